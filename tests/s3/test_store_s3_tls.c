/*
 * test_store_s3_tls.c - the S3 store over https against the real server
 * (suite s3).
 *
 * tools/s3-server.sh serves https with a throwaway CA and prints
 * S3_ENDPOINT_TLS and S3_CA_FILE.  Checked here:
 *   - https with the CA file (the option) works, and the option wins over
 *     AWS_CA_BUNDLE; the conditional-create probe passes over TLS;
 *   - UNSIGNED-PAYLOAD over https (puts and multipart parts);
 *   - without the CA (AWS_CA_BUNDLE unset, or the system bundle) the open
 *     fails at once with a clear certificate error: one attempt, no retries;
 *   - a certificate that does not name the host fails the same way;
 *   - AWS_CA_BUNDLE is honoured for https, an unreadable one is refused,
 *     and it is ignored for plain http;
 *   - virtual-hosted addressing over https (bucket.s3.localhost);
 *   - then the whole store conformance suite runs over https.
 *
 * Needs S3_ENDPOINT_TLS, S3_CA_FILE, S3_ENDPOINT, S3_BUCKET,
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; exits 77 (SKIP) without them.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "s3_int.h"
#include "store.h"
#include "store_conformance.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)

static const char *tls_ep, *ca_file, *http_ep;
static char prefix[96];
static char *saved_bundle; /* AWS_CA_BUNDLE at start (restored after each test) */

static void opts(struct s3_opts *o, const char *endpoint)
{
	tu_s3_opts(o, prefix);
	o->endpoint = endpoint;
	o->max_retries = 3;
	o->part_size = 5 * MiB;
}

static void restore_bundle(void)
{
	if (saved_bundle)
		setenv("AWS_CA_BUNDLE", saved_bundle, 1);
	else
		unsetenv("AWS_CA_BUNDLE");
}

/* put, get (whole and ranged), head, list, delete of one key on s. */
static void roundtrip(struct store *s, const char *key, size_t len, uint64_t seed)
{
	uint8_t *data = malloc(len ? len : 1);
	struct store_stat st;
	void *b = NULL;
	size_t n = 0;

	assert_non_null(data);
	tu_random_bytes(data, len, seed);
	assert_int_equal(store_put(s, key, data, len), 0);
	assert_int_equal(store_get(s, key, 0, STORE_TO_END, &b, &n), 0);
	assert_int_equal(n, len);
	if (len)
		assert_memory_equal(b, data, len);
	free(b);
	if (len > 10) {
		assert_int_equal(store_get(s, key, len - 10, 100, &b, &n), 0);
		assert_int_equal(n, 10);
		assert_memory_equal(b, data + len - 10, 10);
		free(b);
	}
	assert_int_equal(store_head(s, key, &st), 0);
	assert_true(st.size == len);
	assert_int_equal(tu_count_keys(s, key), 1);
	assert_int_equal(store_delete(s, key), 0);
	assert_int_equal(store_head(s, key, &st), -ENOENT);
	free(data);
}

static void test_ca_file_option(void **state)
{
	(void)state;
	struct s3_opts o;
	struct store *s = NULL;

	/* The option wins over AWS_CA_BUNDLE (here: a bundle without our CA). */
	setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", 1);
	opts(&o, tls_ep);
	o.ca_file = ca_file;
	assert_int_equal(store_open_s3(&o, &s), 0);
	assert_true(store_caps(s)->conditional_create); /* the probe ran over TLS */
	assert_int_equal(strncmp(((struct s3 *)s)->base_url, "https://", 8), 0);
	roundtrip(s, "tls/small", 1000, 1);
	roundtrip(s, "tls/empty", 0, 2);
	assert_int_equal(store_put_if_absent(s, "tls/cc", "a", 1), 0);
	assert_int_equal(store_put_if_absent(s, "tls/cc", "b", 1), -EEXIST);
	store_close(s);
	restore_bundle();
}

static void test_unsigned_payload(void **state)
{
	(void)state;
	struct s3_opts o;
	struct store *s = NULL;
	struct store_writer *w;
	size_t len = 11 * MiB;
	uint8_t *data = malloc(len);
	void *b = NULL;
	size_t n = 0;

	assert_non_null(data);
	opts(&o, tls_ep);
	o.ca_file = ca_file;
	o.unsigned_payload = true;
	o.conditional_create = 1;
	assert_int_equal(store_open_s3(&o, &s), 0);
	assert_true(((struct s3 *)s)->unsigned_payload);
	roundtrip(s, "tls/unsigned", 4096, 3);
	tu_random_bytes(data, len, 4);
	assert_int_equal(store_writer_open(s, "tls/unsigned-mpu", 0, &w), 0);
	assert_int_equal(store_writer_write(w, data, len), 0);
	assert_int_equal(store_writer_finish(w), 0);
	assert_int_equal(store_get(s, "tls/unsigned-mpu", 0, STORE_TO_END, &b, &n), 0);
	assert_true(n == len);
	assert_memory_equal(b, data, len);
	free(b);
	free(data);
	assert_int_equal(store_delete(s, "tls/unsigned-mpu"), 0);
	store_close(s);
}

struct open_args {
	const char *endpoint;
	const char *ca;
	bool vhost;
};

static int try_open(void *arg)
{
	struct open_args *a = arg;
	struct s3_opts o;
	struct store *s = NULL;
	opts(&o, a->endpoint);
	o.ca_file = a->ca;
	o.conditional_create = 1;
	if (a->vhost) {
		o.path_style = false;
		o.virtual_hosted = true;
	}
	int rc = store_open_s3(&o, &s);
	store_close(s);
	return rc;
}

/* Without our CA the certificate is refused at once: one attempt, a clear log line. */
static void test_untrusted_fails_fast(void **state)
{
	(void)state;
	struct open_args a = {.endpoint = tls_ep};
	char log[8192];

	for (int i = 0; i < 2; i++) {
		if (i == 0)
			unsetenv("AWS_CA_BUNDLE"); /* curl's default store */
		else
			setenv("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt", 1);
		double t0 = tu_now_sec();
		assert_int_equal(tu_capture_stderr(log, sizeof(log), try_open, &a), -EIO);
		double dt = tu_now_sec() - t0;
		assert_non_null(strstr(log, "no response after 1 attempt:"));
		assert_non_null(strstr(log, "certificate"));
		assert_non_null(strstr(log, "AWS_CA_BUNDLE"));
		assert_null(strstr(log, "retrying"));
		assert_true(dt < 2.0); /* no backoff: nothing was retried */
	}
	restore_bundle();
}

/* A certificate that does not name the host is refused the same way. */
static void test_wrong_host(void **state)
{
	(void)state;
	char ep[256], log[8192];
	const char *port = strrchr(tls_ep, ':');
	assert_non_null(port);
	/* curl resolves every *.localhost name to loopback; the certificate names
	 * 127.0.0.1, localhost, s3.localhost and *.s3.localhost only. */
	snprintf(ep, sizeof(ep), "https://other.localhost%s", port);
	struct open_args a = {.endpoint = ep, .ca = ca_file};
	assert_int_equal(tu_capture_stderr(log, sizeof(log), try_open, &a), -EIO);
	assert_non_null(strstr(log, "other.localhost"));
	assert_non_null(strstr(log, "after 1 attempt:"));
	assert_non_null(strstr(log, "does not name this host"));
}

static void test_aws_ca_bundle(void **state)
{
	(void)state;
	struct s3_opts o;
	struct store *s = NULL;
	struct open_args a = {.endpoint = tls_ep};
	char log[4096];

	/* Honoured for https. */
	setenv("AWS_CA_BUNDLE", ca_file, 1);
	opts(&o, tls_ep);
	o.conditional_create = 1;
	assert_int_equal(store_open_s3(&o, &s), 0);
	roundtrip(s, "bundle/k", 300, 5);
	store_close(s);
	/* An unreadable bundle is refused before any request, naming the variable. */
	setenv("AWS_CA_BUNDLE", "/nonexistent/memwalfs-ca.pem", 1);
	assert_int_equal(tu_capture_stderr(log, sizeof(log), try_open, &a), -EINVAL);
	assert_non_null(strstr(log, "/nonexistent/memwalfs-ca.pem"));
	assert_non_null(strstr(log, "AWS_CA_BUNDLE"));
	/* Ignored for plain http. */
	a.endpoint = http_ep;
	assert_int_equal(try_open(&a), 0);
	restore_bundle();
}

/* Virtual-hosted addressing over https: the certificate covers *.s3.localhost. */
static void test_vhost_tls(void **state)
{
	(void)state;
	char ep[256];
	const char *port = strrchr(tls_ep, ':');
	struct s3_opts o;
	struct store *s = NULL;
	char want[300];

	assert_non_null(port);
	snprintf(ep, sizeof(ep), "https://s3.localhost%s", port);
	opts(&o, ep);
	o.ca_file = ca_file;
	o.path_style = false;
	o.virtual_hosted = true;
	o.conditional_create = 1;
	assert_int_equal(store_open_s3(&o, &s), 0);
	snprintf(want, sizeof(want), "https://%s.s3.localhost%s", getenv("S3_BUCKET"), port);
	assert_string_equal(((struct s3 *)s)->base_url, want);
	roundtrip(s, "vhost-tls/k", 70000, 6);
	store_close(s);
}

/* Sequential small PUTs over http and https (printed, not asserted). */
static void test_tls_cost(void **state)
{
	(void)state;
	struct s3_opts o;
	struct store *s[2] = {NULL, NULL};
	char buf[4096], key[64];
	const char *name[2] = {"http", "https"};

	memset(buf, 'x', sizeof(buf));
	for (int i = 0; i < 2; i++) {
		opts(&o, i ? tls_ep : http_ep);
		o.ca_file = ca_file;
		o.conditional_create = 1;
		assert_int_equal(store_open_s3(&o, &s[i]), 0);
		double t0 = tu_now_sec();
		for (int k = 0; k < 50; k++) {
			snprintf(key, sizeof(key), "cost/%s/%d", name[i], k);
			assert_int_equal(store_put(s[i], key, buf, sizeof(buf)), 0);
		}
		double dt = tu_now_sec() - t0;
		fprintf(stderr, "50 sequential 4 KiB PUTs over %s: %.3f s (%.0f req/s)\n", name[i],
		        dt, 50 / dt);
	}
	store_close(s[0]);
	store_close(s[1]);
}

static int teardown(void **state)
{
	(void)state;
	struct s3_opts o;
	struct store *s = NULL;
	unsigned n;
	opts(&o, tls_ep);
	o.ca_file = ca_file;
	o.conditional_create = 1;
	if (store_open_s3(&o, &s) == 0) {
		store_cleanup_uploads(s, "", 0, &n);
		tu_wipe_prefix(s, "");
		store_close(s);
	}
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ca_file_option),
	    cmocka_unit_test(test_unsigned_payload),
	    cmocka_unit_test(test_untrusted_fails_fast),
	    cmocka_unit_test(test_wrong_host),
	    cmocka_unit_test(test_aws_ca_bundle),
	    cmocka_unit_test(test_vhost_tls),
	    cmocka_unit_test(test_tls_cost),
	};
	const char *b;
	int rc;

	tls_ep = getenv("S3_ENDPOINT_TLS");
	ca_file = getenv("S3_CA_FILE");
	http_ep = getenv("S3_ENDPOINT");
	if (!tls_ep || !*tls_ep || !ca_file || !*ca_file || !http_ep || !*http_ep) {
		fprintf(stderr, "SKIP: S3_ENDPOINT_TLS, S3_CA_FILE or S3_ENDPOINT is not set\n");
		return TU_SKIP;
	}
	b = getenv("AWS_CA_BUNDLE");
	saved_bundle = b ? strdup(b) : NULL;
	snprintf(prefix, sizeof(prefix), "memwalfs-s3tls-%d-%lld/", (int)getpid(),
	         (long long)(tu_now_ns() % 1000000000ull));
	if (!getenv("MEMWALFS_LOG"))
		mw_log_set_level(MW_LOG_DEBUG); /* the log shows every request */
	rc = cmocka_run_group_tests_name("store_s3_tls", tests, NULL, teardown) ? 1 : 0;

	/* The whole conformance suite over https, the CA from AWS_CA_BUNDLE. */
	mw_log_set_level(MW_LOG_INFO);
	setenv("S3_ENDPOINT", tls_ep, 1);
	setenv("AWS_CA_BUNDLE", ca_file, 1);
	double t0 = tu_now_sec();
	int crc = run_store_conformance("s3");
	fprintf(stderr, "conformance over https: %s in %.1f s\n", crc ? "FAILED" : "passed",
	        tu_now_sec() - t0);
	free(saved_bundle);
	return rc || crc ? 1 : 0;
}
