/*
 * test_store_s3_faults.c - the S3 store's retries against real failures
 * (suite s3).
 *
 * A fault-injecting proxy (faultproxy.py) sits between the store and the
 * real server: it answers the first N matching requests with 503 SlowDown,
 * 500, 502, 504 or 429, resets the connection mid-request, stalls past the
 * store's timeout, or forwards a request to the server and then loses its
 * answer; then it passes requests through.  Not a mock: the server stores
 * everything that is forwarded, and every check reads the truth back through
 * a second store opened directly on the server.
 *
 * Checked: each retryable failure is retried and the operation then succeeds
 * with the right bytes (put, get, head, list, delete, delete-many, multipart
 * part and complete); 403 and 400 are not retried; retries are counted in
 * store_get_stats; a conditional create whose first attempt landed but whose
 * answer was lost resolves to success, not -EEXIST (and to -EEXIST when the
 * object is really someone else's); exhausted retries give -EIO with the
 * status in the log; a server that goes away after the open (connection
 * refused) is retried patiently, unlike at open.
 *
 * Arguments: the path of faultproxy.py.  Needs S3_ENDPOINT (http://),
 * S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; exits 77 (SKIP)
 * without them.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "faultproxy.h"
#include "log.h"
#include "store.h"
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define TIMEOUT_MS 1500 /* the proxied store's request timeout */
#define STALL_SEC 4     /* a stall outlasts it */

static const char *script;
static struct faultproxy FP;
static struct store *P; /* through the proxy */
static struct store *D; /* directly on the server: the truth */
static char prefix[96];

static int open_store(const char *endpoint, struct store **out)
{
	struct s3_opts o;

	tu_s3_opts(&o, prefix);
	o.endpoint = endpoint;
	o.conditional_create = 1; /* RGW honours it (store_s3 checks the probe) */
	o.timeout_ms = TIMEOUT_MS;
	o.max_retries = 4;
	o.part_size = 5 * MiB;
	return store_open_s3(&o, out);
}

/* The bytes of key on the server (read directly) must be want[0..len). */
static void truth_eq(const char *key, const void *want, size_t len)
{
	void *b = NULL;
	size_t n = 0;
	int rc = store_get(D, key, 0, STORE_TO_END, &b, &n);
	if (rc)
		fail_msg("direct get %s: %s", key, strerror(-rc));
	assert_int_equal(n, len);
	if (len)
		assert_memory_equal(b, want, len);
	free(b);
}

/* Counters around one operation. */
struct delta {
	struct store_stats s0, s1;
	struct faultproxy_stats p0, p1;
};

static void arm(struct delta *d, const char *fault, unsigned count, const char *method,
                const char *path)
{
	assert_int_equal(faultproxy_clear(&FP), 0);
	assert_int_equal(faultproxy_arm(&FP, fault, count, method, path, STALL_SEC), 0);
	store_get_stats(P, &d->s0);
	assert_int_equal(faultproxy_stats(&FP, &d->p0), 0);
}

static void measure(struct delta *d)
{
	store_get_stats(P, &d->s1);
	assert_int_equal(faultproxy_stats(&FP, &d->p1), 0);
}

static uint64_t retries(const struct delta *d)
{
	return d->s1.retries - d->s0.retries;
}

static uint64_t sent(const struct delta *d, enum store_op op)
{
	return d->s1.requests[op] - d->s0.requests[op];
}

/* ---- retryable answers: retried, then the right bytes ---- */

static void test_retryable_statuses(void **state)
{
	(void)state;
	static const char *const faults[] = {"503", "500", "502", "504", "429"};
	size_t len = 64 * 1024;
	uint8_t *data = malloc(len);
	char key[64];
	struct delta d;

	assert_non_null(data);
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		snprintf(key, sizeof(key), "st/%s", faults[i]);
		tu_random_bytes(data, len, 1000 + i);
		/* PUT: two failures, then it lands. */
		arm(&d, faults[i], 2, "PUT", NULL);
		assert_int_equal(store_put(P, key, data, len), 0);
		measure(&d);
		assert_int_equal(d.p1.faulted, 2);
		assert_int_equal(d.p1.forwarded, 1);
		assert_int_equal(retries(&d), 2);
		assert_int_equal(sent(&d, STORE_OP_PUT), 3);
		truth_eq(key, data, len);
		/* GET through the proxy: two failures, then the right bytes. */
		void *b = NULL;
		size_t n = 0;
		arm(&d, faults[i], 2, "GET", NULL);
		assert_int_equal(store_get(P, key, 100, 5000, &b, &n), 0);
		measure(&d);
		assert_int_equal(n, 5000);
		assert_memory_equal(b, data + 100, 5000);
		free(b);
		assert_int_equal(retries(&d), 2);
		assert_int_equal(sent(&d, STORE_OP_GET), 3);
		assert_int_equal(d.p1.faulted, 2);
		/* the same into a buffer: the error bodies do not end up in it */
		uint8_t into[5000];
		arm(&d, faults[i], 2, "GET", NULL);
		assert_int_equal(store_get_into(P, key, 100, sizeof(into), into, &n), 0);
		measure(&d);
		assert_int_equal(n, sizeof(into));
		assert_memory_equal(into, data + 100, sizeof(into));
		assert_int_equal(retries(&d), 2);
		assert_int_equal(sent(&d, STORE_OP_GET), 3);
	}
	free(data);
}

/*
 * A server that ignores Range and answers 200 with more bytes than a
 * store_get_into() buffer holds: the transfer stops (nothing is written past
 * the buffer) and the range is got again and copied, right.
 */
static void test_range_ignored(void **state)
{
	(void)state;
	size_t len = 600 * 1024, want = 300 * 1024;
	uint8_t *data = malloc(len), *into = malloc(want + 64);
	struct delta d;
	size_t n = 0;

	assert_non_null(data);
	assert_non_null(into);
	tu_random_bytes(data, len, 77);
	assert_int_equal(store_put(D, "range/ignored", data, len), 0);
	memset(into + want, 0x5a, 64);
	arm(&d, "long_200", 1, "GET", NULL);
	assert_int_equal(store_get_into(P, "range/ignored", 1000, want, into, &n), 0);
	measure(&d);
	assert_int_equal(n, want);
	assert_memory_equal(into, data + 1000, want);
	for (size_t i = 0; i < 64; i++)
		assert_int_equal(into[want + i], 0x5a); /* nothing past the buffer */
	assert_int_equal(d.p1.faulted, 1);
	assert_int_equal(sent(&d, STORE_OP_GET), 2);
	free(into);
	free(data);
}

static int list_count(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	(*(int *)arg)++;
	return 0;
}

/* HEAD, LIST, DELETE and DeleteObjects are retried too. */
static void test_retryable_other_ops(void **state)
{
	(void)state;
	struct store_stat st;
	struct delta d;
	int n = 0;
	const char *keys[] = {"ops/a", "ops/b", "ops/c"};

	for (int i = 0; i < 3; i++)
		assert_int_equal(store_put(D, keys[i], keys[i], strlen(keys[i])), 0);
	arm(&d, "503", 1, "HEAD", NULL);
	assert_int_equal(store_head(P, "ops/a", &st), 0);
	measure(&d);
	assert_int_equal(st.size, 5);
	assert_int_equal(retries(&d), 1);
	assert_int_equal(sent(&d, STORE_OP_HEAD), 2);

	arm(&d, "500", 2, "GET", "list-type=2");
	assert_int_equal(store_list(P, "ops/", NULL, 0, list_count, &n), 0);
	measure(&d);
	assert_int_equal(n, 3);
	assert_int_equal(retries(&d), 2);
	assert_int_equal(sent(&d, STORE_OP_LIST), 3);

	arm(&d, "429", 1, "DELETE", NULL);
	assert_int_equal(store_delete(P, "ops/a"), 0);
	measure(&d);
	assert_int_equal(retries(&d), 1);
	assert_int_equal(store_head(D, "ops/a", &st), -ENOENT);

	arm(&d, "reset", 1, "POST", "delete");
	assert_int_equal(store_delete_many(P, keys + 1, 2), 0);
	measure(&d);
	assert_int_equal(retries(&d), 1);
	assert_int_equal(sent(&d, STORE_OP_DELETE), 2);
	assert_int_equal(store_head(D, "ops/b", &st), -ENOENT);
	assert_int_equal(store_head(D, "ops/c", &st), -ENOENT);
}

/* ---- transport failures: reset mid-request, stalls, lost answers ---- */

static void test_transport_failures(void **state)
{
	(void)state;
	size_t len = 2 * MiB;
	uint8_t *data = malloc(len);
	struct delta d;
	void *b = NULL;
	size_t n = 0;

	assert_non_null(data);
	tu_random_bytes(data, len, 77);
	/* The connection is reset after half of the body: nothing lands. */
	arm(&d, "reset", 2, "PUT", NULL);
	assert_int_equal(store_put(P, "tr/reset", data, len), 0);
	measure(&d);
	assert_int_equal(d.p1.faulted, 2);
	assert_int_equal(d.p1.forwarded, 1);
	assert_int_equal(retries(&d), 2);
	truth_eq("tr/reset", data, len);

	/* The server stalls past the timeout: the GET times out twice. */
	double t0 = tu_now_sec();
	arm(&d, "stall", 2, "GET", NULL);
	assert_int_equal(store_get(P, "tr/reset", 0, STORE_TO_END, &b, &n), 0);
	measure(&d);
	double dt = tu_now_sec() - t0;
	assert_int_equal(n, len);
	assert_memory_equal(b, data, len);
	free(b);
	assert_int_equal(retries(&d), 2);
	assert_true(dt >= 2.0 * TIMEOUT_MS / 1000 && dt < STALL_SEC * 2); /* timed out, twice */
	fprintf(stderr, "two stalled GETs retried in %.2f s\n", dt);

	/* A plain PUT that landed but whose answer was lost is simply repeated. */
	tu_random_bytes(data, len, 78);
	arm(&d, "land_reset", 1, "PUT", NULL);
	assert_int_equal(store_put(P, "tr/lost", data, len), 0);
	measure(&d);
	assert_int_equal(d.p1.forwarded, 2);
	assert_int_equal(retries(&d), 1);
	truth_eq("tr/lost", data, len);
	free(data);
}

/* ---- not retried ---- */

static int put_via_proxy(void *arg)
{
	return store_put(P, (const char *)arg, "x", 1);
}

static void test_not_retried(void **state)
{
	(void)state;
	struct store_stat st;
	struct delta d;
	char log[8192];
	void *b = NULL;
	size_t n = 0;

	arm(&d, "403", 3, "PUT", NULL);
	assert_int_equal(tu_capture_stderr(log, sizeof(log), put_via_proxy, (void *)"nr/403"),
	                 -EACCES);
	measure(&d);
	assert_int_equal(retries(&d), 0);
	assert_int_equal(sent(&d, STORE_OP_PUT), 1);
	assert_int_equal(d.p1.seen, 1);
	assert_int_equal(d.s1.errors - d.s0.errors, 1);
	assert_non_null(strstr(log, "HTTP 403 AccessDenied"));
	assert_non_null(strstr(log, "after 1 attempt"));
	assert_int_equal(store_head(D, "nr/403", &st), -ENOENT);

	assert_int_equal(store_put(D, "nr/400", "abc", 3), 0);
	arm(&d, "400", 3, "GET", NULL);
	assert_int_equal(store_get(P, "nr/400", 0, STORE_TO_END, &b, &n), -EIO);
	measure(&d);
	assert_int_equal(retries(&d), 0);
	assert_int_equal(sent(&d, STORE_OP_GET), 1);
	assert_int_equal(d.p1.seen, 1);

	/* 412 is an answer, not a failure: never retried. */
	arm(&d, "503", 0, NULL, NULL);
	assert_int_equal(store_put_if_absent(P, "nr/400", "abc", 3), -EEXIST);
	measure(&d);
	assert_int_equal(retries(&d), 0);
	assert_int_equal(sent(&d, STORE_OP_PUT), 1);
}

static int get_via_proxy(void *arg)
{
	void *b = NULL;
	size_t n;
	int rc = store_get(P, (const char *)arg, 0, STORE_TO_END, &b, &n);
	free(b);
	return rc;
}

/* Retries run out: -EIO, with the last status in the log. */
static void test_retries_exhausted(void **state)
{
	(void)state;
	struct delta d;
	char log[8192];

	assert_int_equal(store_put(D, "ex/k", "abc", 3), 0);
	arm(&d, "503", 100, "GET", NULL);
	assert_int_equal(tu_capture_stderr(log, sizeof(log), get_via_proxy, (void *)"ex/k"), -EIO);
	measure(&d);
	assert_int_equal(retries(&d), 4);
	assert_int_equal(sent(&d, STORE_OP_GET), 5);
	assert_int_equal(d.s1.errors - d.s0.errors, 1);
	assert_non_null(strstr(log, "HTTP 503 SlowDown"));
	assert_non_null(strstr(log, "after 5 attempts"));
	assert_int_equal(faultproxy_clear(&FP), 0);
}

/* ---- conditional create whose answer was lost ---- */

static void test_conditional_lost_answer(void **state)
{
	(void)state;
	static const char *const faults[] = {"land_reset", "land_503", "land_stall"};
	char key[64], body[64];
	struct delta d;

	for (size_t i = 0; i < 3; i++) {
		snprintf(key, sizeof(key), "cc/%s", faults[i]);
		snprintf(body, sizeof(body), "created by us, %s", faults[i]);
		arm(&d, faults[i], 1, "PUT", NULL);
		/* Attempt 1 lands, its answer is lost; attempt 2 gets 412; the bytes are ours. */
		assert_int_equal(store_put_if_absent(P, key, body, strlen(body)), 0);
		measure(&d);
		assert_int_equal(d.p1.forwarded - d.p0.forwarded, 3); /* PUT, PUT (412), GET */
		assert_int_equal(retries(&d), 1);
		assert_int_equal(sent(&d, STORE_OP_PUT), 2);
		assert_int_equal(sent(&d, STORE_OP_GET), 1);
		truth_eq(key, body, strlen(body));
		/* Now it exists: a second create is a plain loss. */
		assert_int_equal(store_put_if_absent(P, key, body, strlen(body)), -EEXIST);
	}

	/* Someone else's object, and our first attempt never landed: still -EEXIST. */
	assert_int_equal(store_put(D, "cc/theirs", "their bytes", 11), 0);
	arm(&d, "reset", 1, "PUT", NULL);
	assert_int_equal(store_put_if_absent(P, "cc/theirs", "our bytes", 9), -EEXIST);
	measure(&d);
	assert_int_equal(retries(&d), 1);
	truth_eq("cc/theirs", "their bytes", 11);

	/* A 503 that was not forwarded, then the create: plain success. */
	arm(&d, "503", 1, "PUT", NULL);
	assert_int_equal(store_put_if_absent(P, "cc/after503", "v", 1), 0);
	measure(&d);
	assert_int_equal(retries(&d), 1);
	truth_eq("cc/after503", "v", 1);
}

/* ---- multipart: a failed part and a lost completion ---- */

static void test_multipart_faults(void **state)
{
	(void)state;
	size_t len = 12 * MiB + 123;
	uint8_t *data = malloc(len);
	struct store_writer *w;
	struct store_stat st;
	struct delta d;

	assert_non_null(data);
	tu_random_bytes(data, len, 4242);
	/* Part 2 gets a 503 once and is retried while the other parts go on. */
	arm(&d, "503", 1, "PUT", "partNumber=2&");
	assert_int_equal(store_writer_open(P, "mp/obj", 0, &w), 0);
	assert_int_equal(store_writer_write(w, data, 6 * MiB), 0);
	assert_int_equal(store_writer_write(w, data + 6 * MiB, len - 6 * MiB), 0);
	assert_int_equal(store_writer_finish(w), 0);
	measure(&d);
	assert_int_equal(d.p1.faulted, 1);
	assert_int_equal(retries(&d), 1);
	truth_eq("mp/obj", data, len);

	/* CompleteMultipartUpload lands but its answer is lost: the retry gets
	 * NoSuchUpload, and HEAD shows our object, so finish succeeds. */
	tu_random_bytes(data, len, 4343);
	arm(&d, "land_reset", 1, "POST", "uploadId=");
	assert_int_equal(store_writer_open(P, "mp/obj2", 0, &w), 0);
	assert_int_equal(store_writer_write(w, data, len), 0);
	assert_int_equal(store_writer_finish(w), 0);
	measure(&d);
	assert_int_equal(d.p1.faulted, 1);
	assert_true(retries(&d) >= 1);
	truth_eq("mp/obj2", data, len);
	assert_int_equal(store_head(D, "mp/obj2", &st), 0);
	assert_non_null(strchr(st.etag, '-'));
	free(data);
}

/*
 * The server goes away after the open (the proxy stops: connections are
 * refused).  Unlike the first request of an open, which gives up at once,
 * requests of an open store are retried max_retries times, then -EIO.  Runs
 * last: the proxy stays down.
 */
static void test_refused_after_open(void **state)
{
	(void)state;
	struct store_stats s0, s1;
	void *b = NULL;
	size_t n = 0;

	assert_int_equal(store_put(P, "gone/obj", "x", 1), 0);
	faultproxy_stop(&FP);
	store_get_stats(P, &s0);
	assert_int_equal(store_get(P, "gone/obj", 0, STORE_TO_END, &b, &n), -EIO);
	store_get_stats(P, &s1);
	assert_int_equal(s1.retries - s0.retries, 4); /* open_store: max_retries 4 */
	assert_int_equal(s1.requests[STORE_OP_GET] - s0.requests[STORE_OP_GET], 5);
	truth_eq("gone/obj", "x", 1);
}

static int setup(void **state)
{
	(void)state;
	const char *ep = getenv("S3_ENDPOINT");
	if (faultproxy_start(&FP, script, ep) < 0)
		return -1;
	snprintf(prefix, sizeof(prefix), "memwalfs-s3faults-%d-%lld/", (int)getpid(),
	         (long long)(tu_now_ns() % 1000000000ull));
	if (open_store(ep, &D) < 0 || open_store(FP.url, &P) < 0)
		return -1;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unsigned n;
	if (D) {
		store_cleanup_uploads(D, "", 0, &n);
		tu_wipe_prefix(D, "");
	}
	store_close(P);
	store_close(D);
	faultproxy_stop(&FP);
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_retryable_statuses),
	    cmocka_unit_test(test_retryable_other_ops),
	    cmocka_unit_test(test_range_ignored),
	    cmocka_unit_test(test_transport_failures),
	    cmocka_unit_test(test_not_retried),
	    cmocka_unit_test(test_retries_exhausted),
	    cmocka_unit_test(test_conditional_lost_answer),
	    cmocka_unit_test(test_multipart_faults),
	    cmocka_unit_test(test_refused_after_open), /* last: stops the proxy */
	};
	const char *ep = getenv("S3_ENDPOINT");

	if (argc < 2) {
		fprintf(stderr, "usage: %s path/to/faultproxy.py\n", argv[0]);
		return 2;
	}
	script = argv[1];
	if (!tu_have_s3()) {
		fprintf(stderr, "SKIP: S3_ENDPOINT is not set\n");
		return TU_SKIP;
	}
	if (strncmp(ep, "http://", 7)) {
		fprintf(stderr, "SKIP: the fault proxy speaks plain http; S3_ENDPOINT is %s\n", ep);
		return TU_SKIP;
	}
	if (!getenv("MEMWALFS_LOG"))
		mw_log_set_level(MW_LOG_DEBUG); /* the log shows every request and retry */
	return cmocka_run_group_tests_name("store_s3_faults", tests, setup, teardown) ? 1 : 0;
}
