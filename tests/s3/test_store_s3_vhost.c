/*
 * test_store_s3_vhost.c - the S3 store with virtual-hosted addressing
 * (http://BUCKET.s3.localhost:PORT/key) against the real server (suite s3).
 *
 * tools/s3-server.sh sets rgw_dns_name = s3.localhost, and curl resolves
 * every *.localhost name to loopback, so the bucket travels in the Host
 * header and the canonical URI is "/key".  Checked: the URL really is
 * virtual-hosted, the conditional-create probe, round trips with awkward
 * keys (what is signed is what is sent), a listing of 1,050 keys across the
 * 1000-key page with start_after and max_keys, delete-many, an 8-thread
 * put_if_absent race, a multipart upload with parallel parts, abort, and
 * cleanup of an abandoned upload.
 *
 * The endpoint is $S3_ENDPOINT_VHOST, else $S3_ENDPOINT with its host
 * 127.0.0.1 or localhost replaced by s3.localhost.  Needs S3_ENDPOINT,
 * S3_BUCKET, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; exits 77 (SKIP)
 * without them.
 */
#include <errno.h>
#include <pthread.h>
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
#include "testutil.h"

#define MiB ((size_t)1 << 20)
#define NLIST 1050

static char endpoint[256];
static char prefix[96];
static struct store *V; /* virtual-hosted */

static int open_vhost(struct store **out)
{
	struct s3_opts o;
	tu_s3_opts(&o, prefix);
	o.endpoint = endpoint;
	o.path_style = false;
	o.virtual_hosted = true;
	o.part_size = 5 * MiB;
	return store_open_s3(&o, out);
}

static void test_addressing(void **state)
{
	(void)state;
	struct s3 *s = (struct s3 *)V;
	const char *hostport = strstr(endpoint, "://") + 3;
	char want[300];
	snprintf(want, sizeof(want), "http://%s.%s", getenv("S3_BUCKET"), hostport);
	assert_string_equal(s->base_url, want);
	assert_string_equal(s->base_path, "");
	assert_string_equal(s->host, want + 7);
	assert_true(store_caps(V)->conditional_create); /* the probe passed */
}

static void test_roundtrip_keys(void **state)
{
	(void)state;
	static const char *const keys[] = {"k/plain", "k/a b",          "k/a+b=c&d",
	                                   "k/x%2Fy", "k/~q'(!)*,;:@$", "k/deep/er/still"};
	for (size_t i = 0; i < 6; i++) {
		void *b;
		size_t n;
		assert_int_equal(store_put(V, keys[i], keys[i], strlen(keys[i])), 0);
		assert_int_equal(store_get(V, keys[i], 2, STORE_TO_END, &b, &n), 0);
		assert_int_equal(n, strlen(keys[i]) - 2);
		assert_memory_equal(b, keys[i] + 2, n);
		free(b);
	}
	assert_int_equal(tu_count_keys(V, "k/"), 6);
	assert_int_equal(store_delete_many(V, keys, 6), 0);
	assert_int_equal(tu_count_keys(V, "k/"), 0);
}

struct lister {
	unsigned n;
	char first[64], last[64];
	bool ordered;
};

static int list_fn(void *arg, const char *key, uint64_t size)
{
	struct lister *l = arg;
	(void)size;
	if (l->n && strcmp(l->last, key) >= 0)
		l->ordered = false;
	if (!l->n)
		snprintf(l->first, sizeof(l->first), "%s", key);
	snprintf(l->last, sizeof(l->last), "%s", key);
	l->n++;
	return 0;
}

struct filler {
	unsigned from, to;
	int rc;
};

static void *fill_fn(void *arg)
{
	struct filler *f = arg;
	char key[32];
	for (unsigned i = f->from; i < f->to && !f->rc; i++) {
		snprintf(key, sizeof(key), "list/%05u", i);
		f->rc = store_put(V, key, key, 4);
	}
	return NULL;
}

static void test_list_pages(void **state)
{
	(void)state;
	pthread_t th[4];
	struct filler f[4];
	struct lister l = {.ordered = true};
	static char keybuf[NLIST][16];
	const char *keys[NLIST];

	for (unsigned t = 0; t < 4; t++) {
		f[t] = (struct filler){t * NLIST / 4, (t + 1) * NLIST / 4, 0};
		assert_int_equal(pthread_create(&th[t], NULL, fill_fn, &f[t]), 0);
	}
	for (unsigned t = 0; t < 4; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(f[t].rc, 0);
	}
	assert_int_equal(store_list(V, "list/", NULL, 0, list_fn, &l), 0);
	assert_int_equal(l.n, NLIST);
	assert_true(l.ordered);
	assert_string_equal(l.first, "list/00000");
	l = (struct lister){.ordered = true};
	assert_int_equal(store_list(V, "list/", "list/00009", 1005, list_fn, &l), 0);
	assert_int_equal(l.n, 1005);
	assert_true(l.ordered);
	assert_string_equal(l.first, "list/00010");
	assert_string_equal(l.last, "list/01014");
	for (unsigned i = 0; i < NLIST; i++) {
		snprintf(keybuf[i], sizeof(keybuf[i]), "list/%05u", i);
		keys[i] = keybuf[i];
	}
	assert_int_equal(store_delete_many(V, keys, NLIST), 0);
	assert_int_equal(tu_count_keys(V, "list/"), 0);
}

struct racer {
	pthread_barrier_t *bar;
	char body[16];
	int rc;
};

static void *race_fn(void *arg)
{
	struct racer *r = arg;
	pthread_barrier_wait(r->bar);
	r->rc = store_put_if_absent(V, "race/k", r->body, strlen(r->body));
	return NULL;
}

static void test_race(void **state)
{
	(void)state;
	pthread_barrier_t bar;
	pthread_t th[8];
	struct racer r[8];
	int wins = 0, winner = -1;
	void *b;
	size_t n;

	pthread_barrier_init(&bar, NULL, 8);
	for (int i = 0; i < 8; i++) {
		r[i] = (struct racer){.bar = &bar};
		snprintf(r[i].body, sizeof(r[i].body), "racer-%d", i);
		assert_int_equal(pthread_create(&th[i], NULL, race_fn, &r[i]), 0);
	}
	for (int i = 0; i < 8; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
	for (int i = 0; i < 8; i++) {
		if (r[i].rc == 0) {
			wins++;
			winner = i;
		} else {
			assert_int_equal(r[i].rc, -EEXIST);
		}
	}
	assert_int_equal(wins, 1);
	assert_int_equal(store_get(V, "race/k", 0, STORE_TO_END, &b, &n), 0);
	assert_int_equal(n, strlen(r[winner].body));
	assert_memory_equal(b, r[winner].body, n);
	free(b);
}

static void test_multipart(void **state)
{
	(void)state;
	size_t len = 17 * MiB + 5;
	uint8_t *data = malloc(len);
	struct store_writer *w;
	struct store_stat st;
	struct store_stats s0, s1;
	void *b;
	size_t n;
	unsigned nab = 99;

	assert_non_null(data);
	tu_random_bytes(data, len, 17);
	store_get_stats(V, &s0);
	assert_int_equal(store_writer_open(V, "mpu/obj", 0, &w), 0);
	for (size_t off = 0; off < len; off += MiB)
		assert_int_equal(
		    store_writer_write(w, data + off, len - off < MiB ? len - off : MiB), 0);
	assert_int_equal(store_writer_finish(w), 0);
	store_get_stats(V, &s1);
	assert_int_equal(s1.requests[STORE_OP_MPU] - s0.requests[STORE_OP_MPU], 4 + 2);
	assert_int_equal(store_head(V, "mpu/obj", &st), 0);
	assert_true(st.size == len);
	assert_non_null(strchr(st.etag, '-'));
	assert_int_equal(store_get(V, "mpu/obj", 5 * MiB - 3, 6, &b, &n), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(b, data + 5 * MiB - 3, 6);
	free(b);
	assert_int_equal(store_get(V, "mpu/obj", 0, STORE_TO_END, &b, &n), 0);
	assert_true(n == len);
	assert_memory_equal(b, data, len);
	free(b);

	/* Abort after parts went up: nothing visible, nothing left to clean. */
	assert_int_equal(store_writer_open(V, "mpu/aborted", 0, &w), 0);
	assert_int_equal(store_writer_write(w, data, 11 * MiB), 0);
	store_writer_abort(w);
	assert_int_equal(store_head(V, "mpu/aborted", &st), -ENOENT);
	assert_int_equal(store_cleanup_uploads(V, "mpu/", 0, &nab), 0);
	assert_int_equal(nab, 0);

	/* An abandoned upload (initiated, never finished) is found and aborted. */
	struct s3 *s = (struct s3 *)V;
	char *fk = s3_full_key(s, "mpu/abandoned");
	struct sigv4_param q[] = {{"uploads", ""}};
	struct s3_call c = {
	    .op = STORE_OP_MPU, .method = "POST", .okey = fk, .query = q, .nquery = 1};
	struct s3_result res;
	assert_int_equal(s3_call(s, &c, &res), 0);
	assert_int_equal(res.r.status, 200);
	s3_result_free(&res);
	free(fk);
	assert_int_equal(store_cleanup_uploads(V, "mpu/", 0, &nab), 0);
	assert_int_equal(nab, 1);
	free(data);
}

static int setup(void **state)
{
	(void)state;
	return open_vhost(&V) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	unsigned n;
	if (V) {
		store_cleanup_uploads(V, "", 0, &n);
		tu_wipe_prefix(V, "");
	}
	store_close(V);
	V = NULL;
	return 0;
}

/* Endpoint for virtual-hosted requests (see the file header); false if none. */
static bool pick_endpoint(void)
{
	const char *e = getenv("S3_ENDPOINT_VHOST"), *ep = getenv("S3_ENDPOINT");
	if (e && *e) {
		snprintf(endpoint, sizeof(endpoint), "%s", e);
		return true;
	}
	static const char *const hosts[] = {"http://127.0.0.1:", "http://localhost:"};
	for (int i = 0; i < 2; i++) {
		size_t l = strlen(hosts[i]);
		if (!strncmp(ep, hosts[i], l)) {
			snprintf(endpoint, sizeof(endpoint), "http://s3.localhost:%s", ep + l);
			return true;
		}
	}
	return false;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addressing), cmocka_unit_test(test_roundtrip_keys),
	    cmocka_unit_test(test_list_pages), cmocka_unit_test(test_race),
	    cmocka_unit_test(test_multipart),
	};
	if (!tu_have_s3()) {
		fprintf(stderr, "SKIP: S3_ENDPOINT is not set\n");
		return TU_SKIP;
	}
	if (!pick_endpoint()) {
		fprintf(stderr, "SKIP: S3_ENDPOINT is not on this machine and S3_ENDPOINT_VHOST "
		                "is not set\n");
		return TU_SKIP;
	}
	snprintf(prefix, sizeof(prefix), "memwalfs-s3vhost-%d-%lld/", (int)getpid(),
	         (long long)(tu_now_ns() % 1000000000ull));
	fprintf(stderr, "virtual-hosted endpoint %s\n", endpoint);
	if (!getenv("MEMWALFS_LOG"))
		mw_log_set_level(MW_LOG_INFO);
	return cmocka_run_group_tests_name("store_s3_vhost", tests, setup, teardown) ? 1 : 0;
}
