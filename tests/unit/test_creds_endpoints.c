/*
 * test_creds_endpoints.c - the HTTP sources of the credential chain against
 * credserver.py (argv[1]), a local server that follows the documented
 * protocols of the container credentials endpoint and of IMDSv2 (a GET
 * without the session token is refused): keys arrive, the authorization
 * token (variable and file) is sent and a wrong one refused, IMDS takes a
 * token first, AWS_EC2_METADATA_DISABLED skips it, and keys that expire in
 * a few seconds are refreshed again and again (the server counts the
 * hand-outs).  SKIP (77) without python3.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "creds_int.h"

static const char *server_py;
static char dir[64], portfile[128], logfile[128], base[64];
static pid_t server = -1;

static void stop_server(void)
{
	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
		server = -1;
	}
}

/* Start credserver.py with extra arguments (NULL-terminated); sets base. */
static void start_server(const char *a1, const char *a2, const char *a3)
{
	stop_server();
	unlink(portfile);
	unlink(logfile);
	server = fork();
	assert_true(server >= 0);
	if (server == 0) {
		execlp("python3", "python3", server_py, portfile, logfile, a1, a2, a3,
		       (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 300; i++) {
		FILE *f = fopen(portfile, "r");
		int port = 0;
		if (f && fscanf(f, "%d", &port) == 1 && port > 0) {
			fclose(f);
			snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
			return;
		}
		if (f)
			fclose(f);
		usleep(50000);
	}
	fail_msg("credserver.py did not start");
}

/* How many lines of the server log contain s. */
static int log_count(const char *s)
{
	FILE *f = fopen(logfile, "r");
	char line[512];
	int n = 0;
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, s))
			n++;
	fclose(f);
	return n;
}

static const char *const chain_env[] = {"AWS_ACCESS_KEY_ID",
                                        "AWS_SECRET_ACCESS_KEY",
                                        "AWS_SESSION_TOKEN",
                                        "AWS_PROFILE",
                                        "AWS_WEB_IDENTITY_TOKEN_FILE",
                                        "AWS_ROLE_ARN",
                                        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                                        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                                        "AWS_EC2_METADATA_DISABLED"};

static int clean_env(void **state)
{
	char p[128];
	(void)state;
	for (size_t i = 0; i < sizeof(chain_env) / sizeof(chain_env[0]); i++)
		unsetenv(chain_env[i]);
	snprintf(p, sizeof(p), "%s/none", dir);
	setenv("AWS_CONFIG_FILE", p, 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", p, 1);
	setenv("AWS_METADATA_SERVICE_TIMEOUT", "10", 1); /* a loaded machine, not a slow IMDS */
	return 0;
}

static int after(void **state)
{
	(void)state;
	stop_server();
	return 0;
}

static struct creds_opts opts(void)
{
	struct creds_opts o = {.region = "us-east-1", .s3_endpoint = "http://127.0.0.1:1"};
	return o;
}

static void test_container(void **state)
{
	(void)state;
	struct creds_opts o = opts();
	struct creds *c = NULL;
	char url[128], tf[128];

	start_server("--token", "secret-auth-token", NULL);
	snprintf(url, sizeof(url), "%s/container/creds", base);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	/* no token: the server refuses */
	assert_int_equal(creds_open(&o, &c), -EACCES);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong", 1);
	assert_int_equal(creds_open(&o, &c), -EACCES);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "secret-auth-token", 1);
	assert_int_equal(creds_open(&o, &c), 0);
	struct creds_keys *k = creds_get(c);
	assert_string_equal(k->access_key, "ASIAFAKE0001");
	assert_non_null(k->session_token);
	assert_true(k->expires > k->obtained + 3000);
	creds_keys_put(k);
	creds_close(c);
	/* the token file wins over the variable */
	snprintf(tf, sizeof(tf), "%s/token", dir);
	FILE *f = fopen(tf, "w");
	fputs("secret-auth-token\n", f);
	fclose(f);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong", 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", tf, 1);
	assert_int_equal(creds_open(&o, &c), 0);
	creds_close(c);
	assert_int_equal(log_count("GET /container/creds 401"), 2);
	assert_int_equal(log_count("ISSUED"), 2);
	assert_int_equal(log_count("secret-auth-token"), 0);
}

static void test_imds(void **state)
{
	(void)state;
	struct creds_opts o = opts();
	struct creds *c = NULL;
	struct http_pool *pool = NULL;
	struct http_pool_opts po = {.connections = 1, .timeout_ms = 10000};
	struct http_resp rs;
	char url[160];

	start_server(NULL, NULL, NULL);
	/* the server is an IMDSv2: a GET without a session token is refused */
	assert_int_equal(http_pool_new(&po, &pool), 0);
	snprintf(url, sizeof(url), "%s/latest/meta-data/iam/security-credentials/", base);
	struct http_req rq = {.method = "GET", .url = url};
	assert_int_equal(http_do(pool, &rq, &rs), 0);
	assert_int_equal(rs.status, 401);
	http_resp_free(&rs);
	http_pool_free(pool);

	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", base, 1);
	assert_int_equal(creds_open(&o, &c), 0);
	struct creds_keys *k = creds_get(c);
	assert_string_equal(k->access_key, "ASIAFAKE0001");
	creds_keys_put(k);
	assert_string_equal(creds_source(c), "instance metadata");
	creds_close(c);
	assert_int_equal(log_count("PUT /latest/api/token 200"), 1);
	assert_int_equal(log_count("GET /latest/meta-data/iam/security-credentials/ 200"), 1);
	assert_int_equal(
	    log_count("GET /latest/meta-data/iam/security-credentials/memwalfs-test-role 200"), 1);

	/* disabled: the chain ends without it */
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	assert_int_equal(creds_open(&o, &c), -EACCES);
	assert_int_equal(log_count("ISSUED"), 1);
}

static void wait_refreshes(struct creds *c, uint64_t n)
{
	uint64_t ok = 0, failed = 0;
	for (int i = 0; i < 600 && ok < n; i++) {
		usleep(100000);
		creds_refresh_counts(c, &ok, &failed);
	}
	assert_true(ok >= n);
}

static void test_refresh(void **state)
{
	(void)state;
	struct creds_opts o = opts();
	struct creds *c = NULL;
	char url[128];

	/* container keys that live 4 s: refreshed about every 2 s */
	start_server("--lifetime", "4", NULL);
	snprintf(url, sizeof(url), "%s/container/creds", base);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	assert_int_equal(creds_open(&o, &c), 0);
	wait_refreshes(c, 3);
	struct creds_keys *k = creds_get(c);
	assert_string_not_equal(k->access_key, "ASIAFAKE0001");
	creds_keys_put(k);
	creds_close(c);
	assert_true(log_count("ISSUED") >= 4);

	/* the same through IMDSv2: a new session token for each refresh */
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	start_server("--lifetime", "4", NULL);
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", base, 1);
	assert_int_equal(creds_open(&o, &c), 0);
	wait_refreshes(c, 2);
	creds_close(c);
	assert_true(log_count("PUT /latest/api/token 200") >= 3);
	assert_int_equal(log_count(" 401"), 0);
}

int main(int argc, char **argv)
{
	if (argc < 2 || system("python3 -c pass >/dev/null 2>&1") != 0) {
		fprintf(stderr, "SKIP: needs python3 and the path of credserver.py\n");
		return 77;
	}
	server_py = argv[1];
	snprintf(dir, sizeof(dir), "/tmp/memwalfs-credep-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(portfile, sizeof(portfile), "%s/port", dir);
	snprintf(logfile, sizeof(logfile), "%s/log", dir);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_container, clean_env, after),
	    cmocka_unit_test_setup_teardown(test_imds, clean_env, after),
	    cmocka_unit_test_setup_teardown(test_refresh, clean_env, after),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);
	stop_server();
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		rc = rc ? rc : 1;
	return rc;
}
