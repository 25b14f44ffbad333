/*
 * test_store_s3.c - the S3 store against a real server (suite s3).
 *
 * The shared conformance suite runs on S3 as store_conformance_s3 (h1's
 * runner); this program adds the S3-specific checks:
 * wrong secret -> -EACCES with a clear log line, a nonexistent bucket,
 * transport failures (refused at open: at once; silent server: retried) reported, an
 * 8-thread put_if_absent race with one winner, a 100 MiB multipart upload
 * with parallel parts (throughput printed), cleanup_uploads aborting an
 * abandoned upload, a retried conditional create resolved by comparing
 * bytes, awkward keys, ranges and store_open_url.
 *
 * Needs S3_ENDPOINT, S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
 * (tools/s3-server.sh start prints them); exits 77 (SKIP) without them.
 * Every key lives under a random prefix that is wiped at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "log.h"
#include "s3_int.h"
#include "store.h"
#include "testutil.h"
#include "xml.h"

static struct tu_store *T;

static void base_opts(struct s3_opts *o)
{
	s3_opts_default(o);
	o->endpoint = getenv("S3_ENDPOINT");
	o->bucket = getenv("S3_BUCKET");
	o->region = getenv("S3_REGION");
}

static int open_with_secret(void *arg)
{
	struct s3_opts o;
	struct store *s = NULL;
	base_opts(&o);
	o.access_key = getenv("AWS_ACCESS_KEY_ID");
	o.secret_key = arg;
	int rc = store_open_s3(&o, &s);
	store_close(s);
	return rc;
}

static void test_wrong_secret(void **state)
{
	(void)state;
	char log[4096];
	int rc =
	    tu_capture_stderr(log, sizeof(log), open_with_secret, (void *)"not-the-secret-0000");
	assert_int_equal(rc, -EACCES);
	assert_non_null(strstr(log, "HTTP 403"));
	/* RGW with STS enabled (rgw_s3_auth_use_sts, as tools/s3-server.sh sets it up) tries
	   the STS engine after the signature check fails and answers AccessDenied */
	assert_true(strstr(log, "SignatureDoesNotMatch") || strstr(log, "AccessDenied"));
	assert_non_null(strstr(log, "credentials refused"));
	assert_null(strstr(log, "not-the-secret-0000")); /* never log secrets */
	assert_null(strstr(log, getenv("AWS_SECRET_ACCESS_KEY")));
}

static int open_bucket(void *arg)
{
	struct s3_opts o;
	struct store *s = NULL;
	base_opts(&o);
	o.bucket = arg;
	int rc = store_open_s3(&o, &s);
	store_close(s);
	return rc;
}

static void test_missing_bucket(void **state)
{
	(void)state;
	char log[4096], name[64];
	snprintf(name, sizeof(name), "memwalfs-nonexistent-%ld", (long)getpid());
	assert_int_equal(tu_capture_stderr(log, sizeof(log), open_bucket, name), -ENOENT);
	assert_non_null(strstr(log, "NoSuchBucket"));
	assert_int_equal(open_bucket((void *)"x"), -EINVAL); /* invalid name, no request */
}

/* ---- transport failures: retried, then a clear error ---- */

static int open_endpoint(void *arg)
{
	struct s3_opts o;
	struct store *s = NULL;
	base_opts(&o);
	o.endpoint = arg;
	o.max_retries = 2;
	o.timeout_ms = 400;
	int rc = store_open_s3(&o, &s);
	store_close(s);
	return rc;
}

/* A server that accepts connections and never answers. */
static void *silent_server(void *arg)
{
	int lfd = *(int *)arg, c[8], nc = 0;
	while (nc < 8) {
		int fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			break;
		c[nc++] = fd;
	}
	for (int i = 0; i < nc; i++)
		close(c[i]);
	return NULL;
}

static void test_transport_retries(void **state)
{
	(void)state;
	char log[8192], ep[64];
	/* Nothing listens on port 1: the open fails at once (one attempt, no backoff) with
	 * -ECONNREFUSED; retries are for a server that is up (test_store_s3_faults). */
	double t0 = tu_now_sec();
	assert_int_equal(
	    tu_capture_stderr(log, sizeof(log), open_endpoint, (void *)"http://127.0.0.1:1"),
	    -ECONNREFUSED);
	assert_true(tu_now_sec() - t0 < 1.0);
	assert_non_null(strstr(log, "cannot reach http://127.0.0.1:1"));
	assert_non_null(strstr(log, "connection refused"));
	assert_null(strstr(log, "attempts"));
	/* Accepts but never answers: timeouts, retried, -ETIMEDOUT. */
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t al = sizeof(a);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 8), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", ntohs(a.sin_port));
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, silent_server, &lfd), 0);
	t0 = tu_now_sec();
	assert_int_equal(tu_capture_stderr(log, sizeof(log), open_endpoint, ep), -ETIMEDOUT);
	double dt = tu_now_sec() - t0;
	assert_non_null(strstr(log, "no response after 3 attempts"));
	assert_true(dt >= 1.1 && dt < 10); /* 3 x 400 ms plus backoff */
	shutdown(lfd, SHUT_RDWR);
	close(lfd);
	pthread_join(th, NULL);
}

/* ---- 8-thread race ---- */

struct racer {
	pthread_barrier_t *bar;
	int id;
	int rc;
	char body[32];
};

static void *race_fn(void *arg)
{
	struct racer *r = arg;
	snprintf(r->body, sizeof(r->body), "writer-%d", r->id);
	pthread_barrier_wait(r->bar);
	r->rc = store_put_if_absent(T->store, "race/key", r->body, strlen(r->body));
	return NULL;
}

static void test_race(void **state)
{
	(void)state;
	for (int round = 0; round < 3; round++) {
		pthread_barrier_t bar;
		pthread_t th[8];
		struct racer r[8];
		int winners = 0, winner = -1;
		pthread_barrier_init(&bar, NULL, 8);
		store_delete(T->store, "race/key");
		for (int i = 0; i < 8; i++) {
			r[i] = (struct racer){.bar = &bar, .id = i};
			assert_int_equal(pthread_create(&th[i], NULL, race_fn, &r[i]), 0);
		}
		for (int i = 0; i < 8; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&bar);
		for (int i = 0; i < 8; i++) {
			if (r[i].rc == 0) {
				winners++;
				winner = i;
			} else if (r[i].rc != -EEXIST) {
				fail_msg("racer %d: %d", i, r[i].rc);
			}
		}
		assert_int_equal(winners, 1);
		void *b;
		size_t n;
		assert_int_equal(store_get(T->store, "race/key", 0, STORE_TO_END, &b, &n), 0);
		assert_int_equal(n, strlen(r[winner].body));
		assert_memory_equal(b, r[winner].body, n);
		free(b);
	}
}

/* ---- multipart ---- */

static void test_multipart_100mib(void **state)
{
	(void)state;
	const size_t total = (size_t)100 << 20, piece = (size_t)1 << 20;
	uint8_t *data = malloc(total);
	struct store_writer *w;
	struct store_stats before, after;
	void *b;
	size_t n;

	assert_non_null(data);
	tu_random_bytes(data, total, 100);
	store_get_stats(T->store, &before);
	double t0 = tu_now_sec();
	assert_int_equal(store_writer_open(T->store, "mpu/big", 0, &w), 0);
	for (size_t off = 0; off < total; off += piece)
		assert_int_equal(store_writer_write(w, data + off, piece), 0);
	assert_int_equal(store_writer_finish(w), 0);
	double dt = tu_now_sec() - t0;
	store_get_stats(T->store, &after);
	uint64_t mpu = after.requests[STORE_OP_MPU] - before.requests[STORE_OP_MPU];
	size_t parts =
	    (total + store_caps(T->store)->part_size - 1) / store_caps(T->store)->part_size;
	fprintf(stderr,
	        "multipart 100 MiB: %.2f s, %.1f MB/s, %" PRIu64 " MPU requests (%zu parts)\n", dt,
	        total / dt / 1e6, mpu, parts);
	assert_true(mpu >= parts + 2); /* initiate + parts + complete */
	assert_int_equal(after.requests[STORE_OP_PUT], before.requests[STORE_OP_PUT]);

	struct store_stat st;
	assert_int_equal(store_head(T->store, "mpu/big", &st), 0);
	assert_true(st.size == total);
	assert_non_null(strchr(st.etag, '-')); /* a multipart ETag */
	/* Spot-check ranges across part boundaries, then the whole object. */
	size_t ps = store_caps(T->store)->part_size;
	assert_int_equal(store_get(T->store, "mpu/big", ps - 10, 20, &b, &n), 0);
	assert_int_equal(n, 20);
	assert_memory_equal(b, data + ps - 10, 20);
	free(b);
	t0 = tu_now_sec();
	assert_int_equal(store_get(T->store, "mpu/big", 0, STORE_TO_END, &b, &n), 0);
	fprintf(stderr, "GET 100 MiB: %.2f s\n", tu_now_sec() - t0);
	assert_true(n == total);
	assert_memory_equal(b, data, total);
	free(b);
	free(data);
	assert_int_equal(store_delete(T->store, "mpu/big"), 0);
}

/* A writer that is aborted after parts went up leaves nothing behind. */
/*
 * Payload signing: bodies go with UNSIGNED-PAYLOAD to a loopback endpoint
 * (the test server's) unless signed_payload asks for hashes; either way a
 * put and a multipart upload come back intact.  And which hosts count as
 * loopback.
 */
static void test_payload_signing(void **state)
{
	(void)state;
	static const struct {
		const char *host;
		bool loop;
	} hosts[] = {
	    {"127.0.0.1:7480", true},
	    {"127.1.2.3", true},
	    {"localhost:80", true},
	    {"s3.localhost:7480", true},
	    {"LocalHost", true},
	    {"[::1]:7480", true},
	    {"[::1]", true},
	    {"10.0.0.1:7480", false},
	    {"128.0.0.1", false},
	    {"localhost.example.com", false},
	    {"xlocalhost", false},
	    {"[::2]:80", false},
	    {"127.0.0.1.nip.io", false},
	    {"s3.amazonaws.com", false},
	    {"[::10]", false},
	};
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++) {
		bool got = s3_host_is_loopback(hosts[i].host, strlen(hosts[i].host));
		if (got != hosts[i].loop)
			fail_msg("%s: loopback %d, expected %d", hosts[i].host, got, hosts[i].loop);
	}
	assert_false(s3_host_is_loopback("127.0.0.1/bucket", 8)); /* "127.0.0." */
	const char *ep = getenv("S3_ENDPOINT");
	const char *h = strstr(ep, "://");
	assert_non_null(h);
	h += 3;
	bool loop = s3_host_is_loopback(h, strcspn(h, "/?#"));
	size_t ps = store_caps(T->store)->part_size, len = 2 * ps + 1000;
	uint8_t *data = malloc(len);
	assert_non_null(data);
	tu_random_bytes(data, len, 17);
	for (int signed_payload = 0; signed_payload < 2; signed_payload++) {
		struct s3_opts o;
		struct store *s = NULL;
		struct store_writer *w;
		void *b = NULL;
		size_t n = 0;
		base_opts(&o);
		o.signed_payload = signed_payload;
		o.conditional_create = 1;
		assert_int_equal(store_open_s3(&o, &s), 0);
		assert_int_equal(((struct s3 *)s)->unsigned_payload, loop && !signed_payload);
		assert_int_equal(store_put(s, "sign/small", data, 5000), 0);
		assert_int_equal(store_get(s, "sign/small", 0, STORE_TO_END, &b, &n), 0);
		assert_int_equal(n, 5000);
		assert_memory_equal(b, data, 5000);
		free(b);
		assert_int_equal(store_writer_open(s, "sign/mpu", STORE_W_STABLE, &w), 0);
		assert_int_equal(store_writer_write(w, data, len), 0);
		assert_int_equal(store_writer_finish(w), 0);
		assert_int_equal(store_get(s, "sign/mpu", 0, STORE_TO_END, &b, &n), 0);
		assert_true(n == len);
		assert_memory_equal(b, data, len);
		free(b);
		assert_int_equal(store_delete(s, "sign/small"), 0);
		assert_int_equal(store_delete(s, "sign/mpu"), 0);
		store_close(s);
	}
	free(data);
}

static void test_writer_abort(void **state)
{
	(void)state;
	size_t ps = store_caps(T->store)->part_size, len = 2 * ps + 100;
	uint8_t *data = malloc(len);
	struct store_writer *w;
	struct store_stat st;
	unsigned n = 9;
	assert_non_null(data);
	tu_random_bytes(data, len, 7);
	assert_int_equal(store_writer_open(T->store, "mpu/aborted", 0, &w), 0);
	assert_int_equal(store_writer_write(w, data, len), 0);
	store_writer_abort(w);
	assert_int_equal(store_head(T->store, "mpu/aborted", &st), -ENOENT);
	assert_int_equal(store_cleanup_uploads(T->store, "mpu/", 0, &n), 0);
	assert_int_equal(n, 0); /* abort already removed the upload */
	free(data);
}

/* ---- cleanup of abandoned uploads ---- */

static int count_uploads(struct s3 *s, const char *fprefix)
{
	struct sigv4_param q[] = {{"uploads", ""}, {"prefix", fprefix}};
	struct s3_call c = {.op = STORE_OP_LIST, .method = "GET", .query = q, .nquery = 2};
	struct s3_result res;
	struct xml_uploads_page pg;
	assert_int_equal(s3_call(s, &c, &res), 0);
	assert_int_equal(res.r.status, 200);
	assert_int_equal(xml_parse_uploads_page(res.r.body, res.r.len, &pg), 0);
	int n = (int)pg.n;
	xml_uploads_page_free(&pg);
	s3_result_free(&res);
	return n;
}

static void test_cleanup_abandoned(void **state)
{
	(void)state;
	struct s3 *s = (struct s3 *)T->store;
	char *fk = s3_full_key(s, "abandoned/obj"), *fp = s3_full_key(s, "abandoned/");
	struct sigv4_param q[] = {{"uploads", ""}};
	struct s3_call c = {
	    .op = STORE_OP_MPU, .method = "POST", .okey = fk, .query = q, .nquery = 1};
	struct s3_result res;
	char *id = NULL;
	unsigned n = 99;

	/* Start an upload and walk away from it, as a crashed writer would. */
	assert_int_equal(s3_call(s, &c, &res), 0);
	assert_int_equal(res.r.status, 200);
	assert_int_equal(xml_parse_initiate(res.r.body, res.r.len, &id), 0);
	s3_result_free(&res);
	free(id);
	assert_int_equal(count_uploads(s, fp), 1);
	assert_int_equal(store_cleanup_uploads(T->store, "abandoned/", 3600, &n), 0);
	assert_int_equal(n, 0); /* too young */
	assert_int_equal(count_uploads(s, fp), 1);
	sleep(2);
	assert_int_equal(store_cleanup_uploads(T->store, "abandoned/", 1, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(count_uploads(s, fp), 0);
	free(fk);
	free(fp);
}

/* ---- a retried conditional create ---- */

static void test_retried_conditional_create(void **state)
{
	(void)state;
	const char *a = "our bytes", *b = "their bytes";
	assert_int_equal(store_put_if_absent(T->store, "cc/k", a, strlen(a)), 0);
	/* Without doubt, 412 is a loss. */
	assert_int_equal(s3_put_if_absent_ex(T->store, "cc/k", a, strlen(a), false), -EEXIST);
	/* After an attempt that may have landed: same bytes -> it was ours. */
	assert_int_equal(s3_put_if_absent_ex(T->store, "cc/k", a, strlen(a), true), 0);
	/* Different bytes -> someone else's: still a loss. */
	assert_int_equal(s3_put_if_absent_ex(T->store, "cc/k", b, strlen(b), true), -EEXIST);
	assert_int_equal(s3_put_if_absent_ex(T->store, "cc/k", a, 3, true), -EEXIST);
	assert_true(store_caps(T->store)->conditional_create);
	assert_false(store_caps(T->store)->conditional_finish);
	struct store_writer *w;
	assert_int_equal(store_writer_open(T->store, "cc/w", STORE_W_IF_ABSENT, &w), -ENOTSUP);
}

/* ---- keys, ranges, URL ---- */

struct collect {
	char keys[8][64];
	int n;
};

static int collect_fn(void *arg, const char *key, uint64_t size)
{
	struct collect *c = arg;
	(void)size;
	if (c->n < 8)
		snprintf(c->keys[c->n], sizeof(c->keys[0]), "%s", key);
	c->n++;
	return 0;
}

static void test_awkward_keys(void **state)
{
	(void)state;
	static const char *const keys[] = {"odd/a b", "odd/a+b", "odd/a$b&c=d", "odd/x%2Fy",
	                                   "odd/~q'(!)*,;:@"};
	for (size_t i = 0; i < 5; i++)
		assert_int_equal(store_put(T->store, keys[i], keys[i], strlen(keys[i])), 0);
	for (size_t i = 0; i < 5; i++) {
		void *b;
		size_t n;
		assert_int_equal(store_get(T->store, keys[i], 0, STORE_TO_END, &b, &n), 0);
		assert_int_equal(n, strlen(keys[i]));
		assert_memory_equal(b, keys[i], n);
		free(b);
	}
	struct collect c = {0};
	assert_int_equal(store_list(T->store, "odd/", NULL, 0, collect_fn, &c), 0);
	assert_int_equal(c.n, 5);
	/* byte order: ' ' < '$' < '+' < 'x' < '~' */
	assert_string_equal(c.keys[0], "odd/a b");
	assert_string_equal(c.keys[1], "odd/a$b&c=d");
	assert_string_equal(c.keys[2], "odd/a+b");
	assert_string_equal(c.keys[3], "odd/x%2Fy");
	assert_string_equal(c.keys[4], "odd/~q'(!)*,;:@");
	c.n = 0;
	assert_int_equal(store_list(T->store, "odd/a", "odd/a b", 0, collect_fn, &c), 0);
	assert_int_equal(c.n, 2);
	assert_string_equal(c.keys[0], "odd/a$b&c=d");
}

static void test_errors_and_ranges(void **state)
{
	(void)state;
	void *b;
	size_t n;
	struct store_stat st;
	assert_int_equal(store_get(T->store, "none/x", 0, STORE_TO_END, &b, &n), -ENOENT);
	assert_int_equal(store_get(T->store, "none/x", 5, 0, &b, &n), -ENOENT);
	assert_int_equal(store_head(T->store, "none/x", &st), -ENOENT);
	assert_int_equal(store_delete(T->store, "none/x"), 0);
	assert_int_equal(store_put(T->store, "r/k", "0123456789", 10), 0);
	assert_int_equal(store_get(T->store, "r/k", 10, 5, &b, &n), 0); /* 416 -> empty */
	assert_int_equal(n, 0);
	free(b);
	assert_int_equal(store_get(T->store, "r/k", 8, UINT64_MAX - 3, &b, &n), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(b, "89", 2);
	free(b);
	assert_int_equal(store_put(T->store, "r/empty", NULL, 0), 0);
	assert_int_equal(store_get(T->store, "r/empty", 0, STORE_TO_END, &b, &n), 0);
	assert_int_equal(n, 0);
	free(b);
	assert_int_equal(store_head(T->store, "r/empty", &st), 0);
	assert_int_equal(st.size, 0);
	assert_true(st.mtime > 0);
	assert_true(strlen(st.etag) > 0);
}

static void test_open_url(void **state)
{
	(void)state;
	struct s3_opts o;
	struct store *s;
	char url[512];
	void *b;
	size_t n;
	base_opts(&o);
	o.conditional_create = 1; /* skip the probe */
	snprintf(url, sizeof(url), "s3://%s/%s", getenv("S3_BUCKET"), T->prefix);
	assert_int_equal(store_put(T->store, "url/k", "v", 1), 0);
	assert_int_equal(store_open_url(url, &o, &s), 0);
	assert_string_equal(store_caps(s)->name, "s3");
	assert_int_equal(store_get(s, "url/k", 0, STORE_TO_END, &b, &n), 0);
	assert_int_equal(n, 1);
	free(b);
	store_close(s);
	assert_int_equal(store_open_url("s3:///x", &o, &s), -EINVAL);
	assert_int_equal(store_open_url("ftp://x/y", &o, &s), -EINVAL);
}

static int setup(void **state)
{
	(void)state;
	return tu_store_open("s3", &T) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tu_store_close(T);
	T = NULL;
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wrong_secret),
	    cmocka_unit_test(test_missing_bucket),
	    cmocka_unit_test(test_transport_retries),
	    cmocka_unit_test(test_errors_and_ranges),
	    cmocka_unit_test(test_awkward_keys),
	    cmocka_unit_test(test_race),
	    cmocka_unit_test(test_retried_conditional_create),
	    cmocka_unit_test(test_cleanup_abandoned),
	    cmocka_unit_test(test_writer_abort),
	    cmocka_unit_test(test_payload_signing),
	    cmocka_unit_test(test_multipart_100mib),
	    cmocka_unit_test(test_open_url),
	};
	if (!tu_have_s3()) {
		fprintf(stderr, "SKIP: S3_ENDPOINT is not set\n");
		return TU_SKIP;
	}
	if (!getenv("MEMWALFS_LOG"))
		mw_log_set_level(MW_LOG_DEBUG); /* the suite log shows every request */
	return cmocka_run_group_tests_name("store_s3", tests, setup, teardown) ? 1 : 0;
}
