/*
 * store_conformance.c - the store contract (s3/include/store.h), checked the same
 * way on every store: round trips (empty, small, 100 MiB), ranges at the
 * edges, head, listing 1,500 keys with prefix / start_after / max_keys and
 * byte order across '/' boundaries, delete and delete-many (with missing
 * keys), the streaming writer across part boundaries, abort, conditional
 * finish, and put_if_absent raced by 8 threads where exactly one wins.
 *
 * Each test uses its own key prefix inside the one store opened for the
 * run; the store (temp dir or S3 prefix) is wiped at the end.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "store_conformance.h"
#include "testutil.h"

static struct tu_store *T; /* the store under test, for the whole run */

#define MiB (1024u * 1024u)

/* ------------------------------------------------------------------------
 * Helpers
 */

static void put_ok(const char *key, const void *buf, size_t len)
{
	int rc = store_put(T->store, key, buf, len);
	if (rc != 0)
		fail_msg("put %s (%zu bytes): %s", key, len, strerror(-rc));
}

/*
 * Get [off, off+len) of key and compare with want (wantlen bytes); a range
 * of a count (not STORE_TO_END, not 0) is read with store_get_into() as well,
 * into a buffer of exactly len bytes.
 */
static void get_eq(const char *key, uint64_t off, uint64_t len, const void *want, size_t wantlen)
{
	void *buf = NULL;
	size_t n = 12345;
	int rc = store_get(T->store, key, off, len, &buf, &n);

	if (rc != 0)
		fail_msg("get %s [%" PRIu64 ", +%" PRIu64 "]: %s", key, off, len, strerror(-rc));
	assert_non_null(buf);
	assert_int_equal(n, wantlen);
	if (wantlen)
		assert_memory_equal(buf, want, wantlen);
	free(buf);
	if (len == 0 || len == STORE_TO_END)
		return;
	buf = malloc((size_t)len);
	assert_non_null(buf);
	memset(buf, 0xa5, (size_t)len);
	n = 12345;
	rc = store_get_into(T->store, key, off, len, buf, &n);
	if (rc != 0)
		fail_msg("get_into %s [%" PRIu64 ", +%" PRIu64 "]: %s", key, off, len,
		         strerror(-rc));
	assert_int_equal(n, wantlen);
	if (wantlen)
		assert_memory_equal(buf, want, wantlen);
	free(buf);
}

static uint8_t *random_buf(size_t len, uint64_t seed)
{
	uint8_t *b = malloc(len ? len : 1);
	assert_non_null(b);
	tu_random_bytes(b, len, seed);
	return b;
}

static void list_ok(const char *prefix, const char *after, size_t max, struct tu_keys *l)
{
	int rc = store_list(T->store, prefix, after, max, tu_keys_add, l);
	if (rc != 0)
		fail_msg("list prefix=%s after=%s max=%zu: %d", prefix, after ? after : "", max,
		         rc);
}

/* Listing (prefix, after, max) yields exactly want[0..n). */
static void list_eq(const char *prefix, const char *after, size_t max, const char *const *want,
                    size_t n)
{
	struct tu_keys l = {0};
	list_ok(prefix, after, max, &l);
	if (l.n != n) {
		for (size_t i = 0; i < l.n; i++)
			fprintf(stderr, "  got %s\n", l.keys[i]);
		fail_msg("list prefix=%s after=%s max=%zu: %zu keys, want %zu", prefix,
		         after ? after : "", max, l.n, n);
	}
	for (size_t i = 0; i < n; i++)
		assert_string_equal(l.keys[i], want[i]);
	tu_keys_free(&l);
}

/* ------------------------------------------------------------------------
 * Round trips, ranges, head
 */

static void test_roundtrip_small(void **state)
{
	(void)state;
	uint8_t *b = random_buf(1000, 1), *c = random_buf(777, 2);
	struct store_stat st;
	void *buf = (void *)1;
	size_t n = 1;

	put_ok("rt/empty", "", 0);
	get_eq("rt/empty", 0, STORE_TO_END, NULL, 0);
	assert_int_equal(store_head(T->store, "rt/empty", &st), 0);
	assert_int_equal(st.size, 0);

	put_ok("rt/small", b, 1000);
	get_eq("rt/small", 0, STORE_TO_END, b, 1000);
	put_ok("rt/small", c, 777); /* overwrite: entirely the new bytes */
	get_eq("rt/small", 0, STORE_TO_END, c, 777);

	/* names with dots, dashes and deep paths */
	put_ok("rt/a.b-c_d/e/f/g.h", b, 10);
	get_eq("rt/a.b-c_d/e/f/g.h", 0, STORE_TO_END, b, 10);

	/* missing keys and prefixes that are not objects */
	assert_int_equal(store_get(T->store, "rt/missing", 0, STORE_TO_END, &buf, &n), -ENOENT);
	assert_int_equal(store_get(T->store, "rt/a.b-c_d", 0, STORE_TO_END, &buf, &n), -ENOENT);
	assert_int_equal(store_get(T->store, "nodir/x/y", 0, STORE_TO_END, &buf, &n), -ENOENT);
	assert_int_equal(store_head(T->store, "rt/missing", &st), -ENOENT);
	assert_int_equal(store_head(T->store, "rt/a.b-c_d/e", &st), -ENOENT);

	/* invalid keys are refused before reaching the backend */
	assert_int_equal(store_put(T->store, "../x", b, 1), -EINVAL);
	assert_int_equal(store_put(T->store, "a//b", b, 1), -EINVAL);
	assert_int_equal(store_get(T->store, "/abs", 0, 1, &buf, &n), -EINVAL);
	free(b);
	free(c);
}

static void test_roundtrip_100mib(void **state)
{
	(void)state;
	size_t len = 100 * MiB + 3;
	uint8_t *b = random_buf(len, 100);
	struct store_stat st;
	double t0 = tu_now_sec();

	put_ok("rt/big", b, len);
	double t1 = tu_now_sec();
	get_eq("rt/big", 0, STORE_TO_END, b, len);
	double t2 = tu_now_sec();
	assert_int_equal(store_head(T->store, "rt/big", &st), 0);
	assert_int_equal(st.size, len);
	/* a range deep inside; a pack window's 1 MiB (the engine reads those into its pool) */
	get_eq("rt/big", 77 * MiB + 1, MiB + 5, b + 77 * MiB + 1, MiB + 5);
	get_eq("rt/big", 3 * MiB, MiB, b + 3 * MiB, MiB);
	get_eq("rt/big", len - MiB / 2, MiB, b + len - MiB / 2, MiB / 2); /* runs off the end */
	fprintf(stderr, "[%s] 100 MiB put %.2f s (%.0f MB/s), get %.2f s (%.0f MB/s)\n", T->kind,
	        t1 - t0, len / 1e6 / (t1 - t0), t2 - t1, len / 1e6 / (t2 - t1));
	assert_int_equal(store_delete(T->store, "rt/big"), 0);
	free(b);
}

static void test_ranges(void **state)
{
	(void)state;
	const size_t sz = 10000;
	uint8_t *b = random_buf(sz, 3);

	put_ok("range/obj", b, sz);
	get_eq("range/obj", 0, 1, b, 1);                 /* first byte */
	get_eq("range/obj", 0, sz, b, sz);               /* exactly all */
	get_eq("range/obj", 0, sz + 100, b, sz);         /* longer than the object */
	get_eq("range/obj", sz - 1, 1, b + sz - 1, 1);   /* last byte */
	get_eq("range/obj", sz - 1, 100, b + sz - 1, 1); /* runs off the end */
	get_eq("range/obj", sz - 1, STORE_TO_END, b + sz - 1, 1);
	get_eq("range/obj", 123, STORE_TO_END, b + 123, sz - 123);
	get_eq("range/obj", 4096, 4096, b + 4096, 4096);
	get_eq("range/obj", 17, 0, NULL, 0); /* len 0 */
	get_eq("range/obj", 0, 0, NULL, 0);
	get_eq("range/obj", sz, 10, NULL, 0); /* off == size */
	get_eq("range/obj", sz, STORE_TO_END, NULL, 0);
	get_eq("range/obj", sz + 1000, 10, NULL, 0); /* off past the end */
	get_eq("range/obj", UINT64_MAX - 5, 3, NULL, 0);

	/* into a buffer: what a missing key and bad arguments give */
	uint8_t one[4];
	size_t n = 7;
	assert_int_equal(store_get_into(T->store, "range/nope", 0, 4, one, &n), -ENOENT);
	assert_int_equal(store_get_into(T->store, "range/obj", 0, 0, one, &n), -EINVAL);
	assert_int_equal(store_get_into(T->store, "range/obj", 0, STORE_TO_END, one, &n), -EINVAL);

	put_ok("range/empty", "", 0);
	get_eq("range/empty", 0, 10, NULL, 0);
	get_eq("range/empty", 5, STORE_TO_END, NULL, 0);
	free(b);
}

static void test_head(void **state)
{
	(void)state;
	uint8_t *b = random_buf(4321, 4), *c = random_buf(4321, 5);
	struct store_stat s1, s2, s3;

	put_ok("head/obj", b, 4321);
	assert_int_equal(store_head(T->store, "head/obj", &s1), 0);
	assert_int_equal(s1.size, 4321);
	assert_int_equal(store_head(T->store, "head/obj", &s2), 0);
	assert_string_equal(s1.etag, s2.etag); /* stable while unchanged */
	assert_true(s1.mtime == 0 || s1.mtime > 1600000000);
	put_ok("head/obj", c, 4321); /* same size, other bytes */
	assert_int_equal(store_head(T->store, "head/obj", &s3), 0);
	assert_int_equal(s3.size, 4321);
	if (s1.etag[0])
		assert_string_not_equal(s1.etag, s3.etag);
	free(b);
	free(c);
}

/* ------------------------------------------------------------------------
 * Listing
 */

#define NLIST 1500

struct put_job {
	int first, step; /* keys first, first+step, ... < NLIST */
	int rc;
};

static void list_key(char *k, size_t cap, int i)
{
	snprintf(k, cap, "list/k%05d", i);
}

static void *put_list_keys(void *arg)
{
	struct put_job *j = arg;
	char k[64];
	uint8_t v[7] = {1, 2, 3, 4, 5, 6, 7};

	for (int i = j->first; i < NLIST && j->rc == 0; i += j->step) {
		list_key(k, sizeof(k), i);
		j->rc = store_put(T->store, k, v, (size_t)(i % 7));
	}
	return NULL;
}

static void test_list_order(void **state)
{
	(void)state;
	/* byte order across '/': '-' < '.' < '/' < '0' < 'b' */
	static const char *const all[] = {"ord/a-c", "ord/a.b", "ord/a/b", "ord/a/c/d",
	                                  "ord/a0",  "ord/ab",  "ord/b"};
	static const char *const put_order[] = {"ord/ab",  "ord/a/c/d", "ord/b",
	                                        "ord/a.b", "ord/a0",    "ord/a/b",
	                                        "ord/a-c", "orda",      "or"};
	for (size_t i = 0; i < sizeof(put_order) / sizeof(*put_order); i++)
		put_ok(put_order[i], "x", 1);

	list_eq("ord/", NULL, 0, all, 7);
	list_eq("ord/a", NULL, 0, all, 6);
	list_eq("ord/a/", NULL, 0, all + 2, 2);
	list_eq("ord/a/c", NULL, 0, all + 3, 1);
	list_eq("ord/", "ord/a.b", 0, all + 2, 5);
	list_eq("ord/", "ord/a/", 0, all + 2, 5);
	list_eq("ord/", "ord/a/b", 0, all + 3, 4);
	list_eq("ord/", "ord/a/c/d", 0, all + 4, 3);
	list_eq("ord/", "ord/a/zzz", 0, all + 4, 3);
	list_eq("ord/", "ord/a0", 2, all + 5, 2);
	list_eq("ord/", "ord/b", 0, NULL, 0);
	list_eq("ord/", "a", 3, all, 3);
	list_eq("ord/", "zzz", 0, NULL, 0);
	list_eq("ord/zz", NULL, 0, NULL, 0);
	list_eq("nothing-here/", NULL, 0, NULL, 0);
	{
		static const char *const o[] = {"or", "ord/a-c", "ord/a.b"};
		list_eq("or", NULL, 3, o, 3);
	}
	{
		static const char *const o[] = {"ord/b", "orda"};
		list_eq("or", "ord/ab", 0, o, 2);
	}
}

static void test_list_1500(void **state)
{
	(void)state;
	struct put_job jobs[8];
	pthread_t th[8];
	struct tu_keys l = {0};
	char k[64], after[64];
	char *del[NLIST + 10];

	for (int t = 0; t < 8; t++) {
		jobs[t] = (struct put_job){.first = t, .step = 8, .rc = 0};
		assert_int_equal(pthread_create(&th[t], NULL, put_list_keys, &jobs[t]), 0);
	}
	for (int t = 0; t < 8; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(jobs[t].rc, 0);
	}
	put_ok("list-other/x", "y", 1); /* shares "list", sorts before "list/" */
	put_ok("lisa", "y", 1);

	/* everything, in order, with sizes */
	list_ok("list/", NULL, 0, &l);
	assert_int_equal(l.n, NLIST);
	for (int i = 0; i < NLIST; i++) {
		list_key(k, sizeof(k), i);
		assert_string_equal(l.keys[i], k);
		assert_int_equal(l.sizes[i], i % 7);
	}
	tu_keys_free(&l);

	/* start_after across the 1000-key page boundary */
	list_ok("list/", "list/k00999", 0, &l);
	assert_int_equal(l.n, 500);
	assert_string_equal(l.keys[0], "list/k01000");
	assert_string_equal(l.keys[499], "list/k01499");
	tu_keys_free(&l);

	/* max_keys larger than a page */
	list_ok("list/", NULL, 1200, &l);
	assert_int_equal(l.n, 1200);
	assert_string_equal(l.keys[1199], "list/k01199");
	tu_keys_free(&l);

	/* start_after + max_keys */
	list_ok("list/", "list/k00499", 1001, &l);
	assert_int_equal(l.n, 1000);
	assert_string_equal(l.keys[0], "list/k00500");
	assert_string_equal(l.keys[999], "list/k01499");
	tu_keys_free(&l);
	list_ok("list/", "list/k00100x", 3, &l); /* start_after that is not a key */
	assert_int_equal(l.n, 3);
	assert_string_equal(l.keys[0], "list/k00101");
	tu_keys_free(&l);

	/* narrower prefixes; a prefix with and without '/' */
	list_ok("list/k014", NULL, 0, &l);
	assert_int_equal(l.n, 100);
	tu_keys_free(&l);
	list_ok("list", NULL, 0, &l);
	assert_int_equal(l.n, NLIST + 1);
	assert_string_equal(l.keys[0], "list-other/x"); /* '-' sorts before '/' */
	assert_string_equal(l.keys[1], "list/k00000");
	tu_keys_free(&l);
	list_ok("lis", NULL, 1, &l);
	assert_string_equal(l.keys[0], "lisa");
	tu_keys_free(&l);

	/* the callback stops the listing; its value comes back */
	l.stop_after = 1005;
	l.stop_code = 7;
	assert_int_equal(store_list(T->store, "list/", NULL, 0, tu_keys_add, &l), 7);
	assert_int_equal(l.n, 1005);
	tu_keys_free(&l);

	/* delete-many: every key plus missing ones, across the 1000-key batch */
	for (int i = 0; i < NLIST; i++) {
		list_key(after, sizeof(after), i);
		del[i] = strdup(after);
	}
	for (int i = 0; i < 10; i++) {
		snprintf(after, sizeof(after), "list/missing%d", i);
		del[NLIST + i] = strdup(after);
	}
	assert_int_equal(store_delete_many(T->store, (const char *const *)del, NLIST + 10), 0);
	assert_int_equal(tu_count_keys(T->store, "list/"), 0);
	assert_int_equal(tu_count_keys(T->store, "list"), 1);
	for (int i = 0; i < NLIST + 10; i++)
		free(del[i]);
}

/* ------------------------------------------------------------------------
 * Delete
 */

/* The last minute's window of store_stats: the requests just made and their bytes are in it. */
static void test_window(void **state)
{
	(void)state;
	struct store_stats st;
	char buf[1000], key[32];

	memset(buf, 'w', sizeof(buf));
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "win/%d", i);
		put_ok(key, buf, sizeof(buf));
	}
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "win/%d", i);
		get_eq(key, 0, STORE_TO_END, buf, sizeof(buf));
	}
	store_get_stats(T->store, &st);
	assert_true(st.window_sec >= 1 && st.window_sec <= STORE_WINDOW_SEC);
	assert_true(st.window_requests >= 20);
	assert_true(st.window_bytes_sent >= 10 * sizeof(buf));
	assert_true(st.window_bytes_received >= 10 * sizeof(buf));
	/* never more than since the open */
	uint64_t all = 0;
	for (int i = 0; i < STORE_OP__COUNT; i++)
		all += st.requests[i];
	assert_true(st.window_requests <= all);
	assert_true(st.window_bytes_sent <= st.bytes_sent);
	assert_true(st.window_bytes_received <= st.bytes_received);
}

static void test_delete(void **state)
{
	(void)state;
	struct store_stat st;
	const char *keys[] = {"del/a", "del/b", "del/nope", "del/c/d"};

	put_ok("del/a", "1", 1);
	put_ok("del/b", "2", 1);
	put_ok("del/c/d", "3", 1);
	put_ok("del/keep", "4", 1);
	assert_int_equal(store_delete(T->store, "del/a"), 0);
	assert_int_equal(store_head(T->store, "del/a", &st), -ENOENT);
	assert_int_equal(store_delete(T->store, "del/a"), 0); /* again: missing is fine */
	assert_int_equal(store_delete(T->store, "del/never"), 0);
	assert_int_equal(store_delete(T->store, "del/x/y/z"), 0);
	assert_int_equal(store_delete(T->store, "del/c"), 0); /* a prefix, not an object */
	get_eq("del/c/d", 0, STORE_TO_END, "3", 1);
	assert_int_equal(store_delete_many(T->store, keys, 4), 0);
	assert_int_equal(store_delete_many(T->store, keys, 0), 0);
	{
		static const char *const left[] = {"del/keep"};
		list_eq("del/", NULL, 0, left, 1);
	}
	/* a deleted key can be created again, also conditionally */
	put_ok("del/b", "5", 1);
	get_eq("del/b", 0, STORE_TO_END, "5", 1);
	if (store_caps(T->store)->conditional_create) {
		assert_int_equal(store_put_if_absent(T->store, "del/a", "6", 1), 0);
		get_eq("del/a", 0, STORE_TO_END, "6", 1);
	}
}

/* ------------------------------------------------------------------------
 * Streaming writer
 */

/* Write len bytes of src into w in odd-sized pieces. */
static void write_pieces(struct store_writer *w, const uint8_t *src, size_t len)
{
	static const size_t sizes[] = {1, 4093, 65537, 1048583, 3, 2 * 1048576 + 11, 777777};
	size_t off = 0;
	for (unsigned i = 0; off < len; i++) {
		size_t n = sizes[i % (sizeof(sizes) / sizeof(*sizes))];
		if (n > len - off)
			n = len - off;
		int rc = store_writer_write(w, src + off, n);
		if (rc != 0)
			fail_msg("writer write at %zu: %s", off, strerror(-rc));
		off += n;
	}
}

static void test_writer(void **state)
{
	(void)state;
	const struct store_caps *caps = store_caps(T->store);
	size_t part = caps->part_size ? caps->part_size : 8 * MiB;
	size_t len = 2 * part + part / 2 + 12345; /* > 2 parts, not a multiple */
	uint8_t *b = random_buf(len, 7);
	struct store_writer *w = NULL;
	struct store_stat st;

	assert_int_equal(store_writer_open(T->store, "w/big", 0, &w), 0);
	write_pieces(w, b, len);
	/* nothing is visible before finish */
	assert_int_equal(store_head(T->store, "w/big", &st), -ENOENT);
	assert_int_equal(tu_count_keys(T->store, "w/"), 0);
	assert_int_equal(store_writer_finish(w), 0);
	get_eq("w/big", 0, STORE_TO_END, b, len);
	get_eq("w/big", part - 1, 2, b + part - 1, 2); /* across the part boundary */
	assert_int_equal(store_head(T->store, "w/big", &st), 0);
	assert_int_equal(st.size, len);

	/* STORE_W_STABLE, written the way a pack is: whole parts (sent from here), then the rest */
	assert_int_equal(store_writer_open(T->store, "w/stable", STORE_W_STABLE, &w), 0);
	for (size_t off = 0; off < len; off += part)
		assert_int_equal(
		    store_writer_write(w, b + off, len - off < part ? len - off : part), 0);
	assert_int_equal(store_writer_finish(w), 0);
	get_eq("w/stable", 0, STORE_TO_END, b, len);
	/* and in pieces that straddle parts: copied where they do not start one */
	assert_int_equal(store_writer_open(T->store, "w/stable", STORE_W_STABLE, &w), 0);
	write_pieces(w, b, len);
	assert_int_equal(store_writer_finish(w), 0);
	get_eq("w/stable", 0, STORE_TO_END, b, len);
	assert_int_equal(store_delete(T->store, "w/stable"), 0);

	/* abort after data: nothing visible, old object untouched */
	assert_int_equal(store_writer_open(T->store, "w/aborted", 0, &w), 0);
	write_pieces(w, b, part + 1);
	store_writer_abort(w);
	assert_int_equal(store_head(T->store, "w/aborted", &st), -ENOENT);
	assert_int_equal(store_writer_open(T->store, "w/big", 0, &w), 0);
	write_pieces(w, b, 100);
	store_writer_abort(w);
	get_eq("w/big", 0, 100, b, 100);
	assert_int_equal(store_head(T->store, "w/big", &st), 0);
	assert_int_equal(st.size, len);
	/* abort with nothing written */
	assert_int_equal(store_writer_open(T->store, "w/aborted2", 0, &w), 0);
	store_writer_abort(w);
	{
		static const char *const only[] = {"w/big"};
		list_eq("w/", NULL, 0, only, 1);
	}

	/* empty and small objects through the writer; overwrite */
	assert_int_equal(store_writer_open(T->store, "w/empty", 0, &w), 0);
	assert_int_equal(store_writer_finish(w), 0);
	get_eq("w/empty", 0, STORE_TO_END, NULL, 0);
	assert_int_equal(store_writer_open(T->store, "w/empty", 0, &w), 0);
	assert_int_equal(store_writer_write(w, b, 10), 0);
	assert_int_equal(store_writer_finish(w), 0);
	get_eq("w/empty", 0, STORE_TO_END, b, 10);

	/* conditional finish */
	if (!caps->conditional_finish) {
		assert_int_equal(store_writer_open(T->store, "w/cond", STORE_W_IF_ABSENT, &w),
		                 -ENOTSUP);
	} else {
		assert_int_equal(store_writer_open(T->store, "w/cond", STORE_W_IF_ABSENT, &w), 0);
		assert_int_equal(store_writer_write(w, b, 1000), 0);
		assert_int_equal(store_writer_finish(w), 0);
		get_eq("w/cond", 0, STORE_TO_END, b, 1000);
		assert_int_equal(store_writer_open(T->store, "w/cond", STORE_W_IF_ABSENT, &w), 0);
		assert_int_equal(store_writer_write(w, b + 1, 500), 0);
		assert_int_equal(store_writer_finish(w), -EEXIST);
		get_eq("w/cond", 0, STORE_TO_END, b, 1000); /* unchanged */
	}
	assert_int_equal(store_writer_open(T->store, "bad//key", 0, &w), -EINVAL);
	free(b);
}

/* ------------------------------------------------------------------------
 * Conditional create
 */

#define NRACE 8

struct racer {
	pthread_barrier_t *bar;
	const char *key;
	int id;
	int rc;
};

static void *race_one(void *arg)
{
	struct racer *r = arg;
	char v[32];
	snprintf(v, sizeof(v), "racer-%d", r->id);
	pthread_barrier_wait(r->bar);
	r->rc = store_put_if_absent(T->store, r->key, v, strlen(v) + 1);
	return NULL;
}

static void test_put_if_absent(void **state)
{
	(void)state;
	if (!store_caps(T->store)->conditional_create) {
		assert_int_equal(store_put_if_absent(T->store, "pia/x", "a", 1), -ENOTSUP);
		skip();
	}
	assert_int_equal(store_put_if_absent(T->store, "pia/x", "first", 5), 0);
	assert_int_equal(store_put_if_absent(T->store, "pia/x", "second", 6), -EEXIST);
	get_eq("pia/x", 0, STORE_TO_END, "first", 5);
	assert_int_equal(store_put_if_absent(T->store, "pia/empty", "", 0), 0);
	assert_int_equal(store_put_if_absent(T->store, "pia/empty", "", 0), -EEXIST);

	for (int round = 0; round < 5; round++) {
		pthread_barrier_t bar;
		pthread_t th[NRACE];
		struct racer r[NRACE];
		char key[32], want[32];
		int winners = 0, winner = -1;

		snprintf(key, sizeof(key), "pia/race%d", round);
		pthread_barrier_init(&bar, NULL, NRACE);
		for (int i = 0; i < NRACE; i++) {
			r[i] = (struct racer){.bar = &bar, .key = key, .id = i, .rc = 1};
			assert_int_equal(pthread_create(&th[i], NULL, race_one, &r[i]), 0);
		}
		for (int i = 0; i < NRACE; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&bar);
		for (int i = 0; i < NRACE; i++) {
			if (r[i].rc == 0) {
				winners++;
				winner = i;
			} else if (r[i].rc != -EEXIST) {
				fail_msg("racer %d: %d (%s)", i, r[i].rc, strerror(-r[i].rc));
			}
		}
		assert_int_equal(winners, 1);
		snprintf(want, sizeof(want), "racer-%d", winner);
		get_eq(key, 0, STORE_TO_END, want, strlen(want) + 1);
	}
}

/* ------------------------------------------------------------------------
 * Cleanup of interrupted uploads (must not touch finished objects)
 */

static void test_cleanup_uploads(void **state)
{
	(void)state;
	unsigned n = 99;
	struct store_writer *w;

	put_ok("cu/done", "x", 1);
	assert_int_equal(store_writer_open(T->store, "cu/open", 0, &w), 0);
	assert_int_equal(store_writer_write(w, "abc", 3), 0);
	/* only uploads older than an hour: ours is young and survives */
	assert_int_equal(store_cleanup_uploads(T->store, "cu/", 3600, &n), 0);
	assert_int_equal(store_writer_finish(w), 0);
	get_eq("cu/open", 0, STORE_TO_END, "abc", 3);
	get_eq("cu/done", 0, STORE_TO_END, "x", 1);
}

/* ------------------------------------------------------------------------
 * Runner
 */

int run_store_conformance(const char *kind)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_small),
	    cmocka_unit_test(test_ranges),
	    cmocka_unit_test(test_head),
	    cmocka_unit_test(test_delete),
	    cmocka_unit_test(test_window),
	    cmocka_unit_test(test_list_order),
	    cmocka_unit_test(test_list_1500),
	    cmocka_unit_test(test_writer),
	    cmocka_unit_test(test_put_if_absent),
	    cmocka_unit_test(test_cleanup_uploads),
	    cmocka_unit_test(test_roundtrip_100mib),
	};
	char name[64];
	struct store_stats st;
	int rc = tu_store_open(kind, &T);

	if (rc == TU_SKIP)
		return TU_SKIP;
	if (rc != 0) {
		fprintf(stderr, "cannot open a %s store: %s\n", kind, strerror(-rc));
		return 1;
	}
	snprintf(name, sizeof(name), "store_conformance(%s)", store_caps(T->store)->name);
	rc = cmocka_run_group_tests_name(name, tests, NULL, NULL);
	store_get_stats(T->store, &st);
	fprintf(stderr,
	        "[%s] requests: put %" PRIu64 " get %" PRIu64 " head %" PRIu64 " list %" PRIu64
	        " delete %" PRIu64 " mpu %" PRIu64 ", retries %" PRIu64 ", errors %" PRIu64
	        ", sent %" PRIu64 " B, received %" PRIu64 " B\n",
	        kind, st.requests[STORE_OP_PUT], st.requests[STORE_OP_GET],
	        st.requests[STORE_OP_HEAD], st.requests[STORE_OP_LIST],
	        st.requests[STORE_OP_DELETE], st.requests[STORE_OP_MPU], st.retries, st.errors,
	        st.bytes_sent, st.bytes_received);
	if (tu_sub_check_outside(T) < 0) {
		fprintf(stderr, "[%s] the view touched keys of its parent outside its prefix\n",
		        kind);
		rc++;
	}
	tu_store_close(T);
	T = NULL;
	return rc;
}
