/*
 * test_memtable.c - unit tests of engine/table/memtable.c: internal ordering
 * (prefix keys, sequence numbers), snapshot gets, tombstones, many keys,
 * memory accounting, reference counting, and concurrent readers while one
 * writer inserts.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "coding.h"
#include "memtable.h"

static int add_s(struct memtable *m, uint64_t seq, enum kv_type t, const char *k, const char *v)
{
	return memtable_add(m, seq, t, k, strlen(k), v, v ? strlen(v) : 0);
}

static void test_empty(void **state)
{
	(void)state;
	struct memtable *m;
	struct kv_iter *it;
	assert_int_equal(memtable_new(&m), 0);
	assert_int_equal(memtable_count(m), 0);
	assert_int_equal(memtable_max_seq(m), 0);
	assert_int_equal(memtable_get(m, "a", 1, UINT64_MAX, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(memtable_iter_new(m, &it), 0);
	assert_false(kv_iter_valid(it));
	kv_iter_seek_first(it);
	assert_false(kv_iter_valid(it));
	kv_iter_seek(it, "x", 1);
	assert_false(kv_iter_valid(it));
	assert_int_equal(kv_iter_status(it), 0);
	kv_iter_destroy(it);
	memtable_unref(m);
	memtable_unref(NULL);
}

static void test_ordering(void **state)
{
	(void)state;
	struct memtable *m;
	struct kv_iter *it;
	assert_int_equal(memtable_new(&m), 0);
	/* inserted out of order; prefixes, empty key, binary bytes, versions */
	assert_int_equal(add_s(m, 5, KV_INLINE, "ab", "ab5"), 0);
	assert_int_equal(add_s(m, 1, KV_INLINE, "a", "a1"), 0);
	assert_int_equal(add_s(m, 9, KV_INLINE, "ab", "ab9"), 0);
	assert_int_equal(add_s(m, 3, KV_INLINE, "b", "b3"), 0);
	assert_int_equal(add_s(m, 7, KV_DELETE, "a", NULL), 0);
	assert_int_equal(add_s(m, 2, KV_INLINE, "", "empty"), 0);
	assert_int_equal(add_s(m, 4, KV_BLOB, "abc", "desc"), 0);
	const uint8_t hi[2] = {0xff, 0x00};
	assert_int_equal(memtable_add(m, 6, KV_INLINE, hi, 2, "hi", 2), 0);
	assert_int_equal(memtable_count(m), 8);
	assert_int_equal(memtable_max_seq(m), 9);

	static const struct {
		const char *k;
		size_t kn;
		uint64_t seq;
		enum kv_type t;
		const char *v;
	} want[] = {
	    {"", 0, 2, KV_INLINE, "empty"}, {"a", 1, 7, KV_DELETE, ""},
	    {"a", 1, 1, KV_INLINE, "a1"},   {"ab", 2, 9, KV_INLINE, "ab9"},
	    {"ab", 2, 5, KV_INLINE, "ab5"}, {"abc", 3, 4, KV_BLOB, "desc"},
	    {"b", 1, 3, KV_INLINE, "b3"},   {"\xff\x00", 2, 6, KV_INLINE, "hi"},
	};
	assert_int_equal(memtable_iter_new(m, &it), 0);
	size_t i = 0;
	for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), i++) {
		size_t kn, vn;
		assert_true(i < sizeof(want) / sizeof(want[0]));
		const void *k = kv_iter_key(it, &kn);
		const void *v = kv_iter_value(it, &vn);
		assert_int_equal(kn, want[i].kn);
		if (kn)
			assert_memory_equal(k, want[i].k, kn);
		assert_int_equal(kv_iter_seq(it), want[i].seq);
		assert_int_equal(kv_iter_type(it), want[i].t);
		assert_int_equal(vn, strlen(want[i].v));
		if (vn)
			assert_memory_equal(v, want[i].v, vn);
	}
	assert_int_equal(i, sizeof(want) / sizeof(want[0]));

	/* seek lands on the newest version of the first key >= target */
	kv_iter_seek(it, "ab", 2);
	assert_true(kv_iter_valid(it));
	assert_int_equal(kv_iter_seq(it), 9);
	kv_iter_seek(it, "aa", 2);
	assert_true(kv_iter_valid(it));
	assert_int_equal(kv_iter_seq(it), 9);
	kv_iter_seek(it, "abd", 3);
	assert_true(kv_iter_valid(it));
	assert_int_equal(kv_iter_seq(it), 3);
	kv_iter_seek(it, "\xff\x01", 2);
	assert_false(kv_iter_valid(it));
	kv_iter_destroy(it);
	memtable_unref(m);
}

static void test_snapshots(void **state)
{
	(void)state;
	struct memtable *m;
	enum kv_type t;
	const void *v;
	size_t vn;
	uint64_t seq;
	assert_int_equal(memtable_new(&m), 0);
	assert_int_equal(add_s(m, 10, KV_INLINE, "k", "v10"), 0);
	assert_int_equal(add_s(m, 20, KV_INLINE, "k", "v20"), 0);
	assert_int_equal(add_s(m, 30, KV_DELETE, "k", NULL), 0);
	assert_int_equal(add_s(m, 40, KV_INLINE, "k", "v40"), 0);
	assert_int_equal(add_s(m, 15, KV_INLINE, "k2", "x"), 0);
	assert_int_equal(add_s(m, 25, KV_INLINE, "j", "y"), 0);

	/* before the first version: not found */
	assert_int_equal(memtable_get(m, "k", 1, 9, &t, &v, &vn, &seq), 0);
	struct {
		uint64_t snap, seq;
		enum kv_type t;
		const char *v;
	} cases[] = {
	    {10, 10, KV_INLINE, "v10"}, {19, 10, KV_INLINE, "v10"},
	    {20, 20, KV_INLINE, "v20"}, {29, 20, KV_INLINE, "v20"},
	    {30, 30, KV_DELETE, ""},    {39, 30, KV_DELETE, ""},
	    {40, 40, KV_INLINE, "v40"}, {UINT64_MAX, 40, KV_INLINE, "v40"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(memtable_get(m, "k", 1, cases[i].snap, &t, &v, &vn, &seq), 1);
		assert_int_equal(seq, cases[i].seq);
		assert_int_equal(t, cases[i].t);
		assert_int_equal(vn, strlen(cases[i].v));
		if (vn)
			assert_memory_equal(v, cases[i].v, vn);
	}
	/* a prefix or an extension of a key is another key */
	assert_int_equal(memtable_get(m, "", 0, UINT64_MAX, &t, &v, &vn, &seq), 0);
	assert_int_equal(memtable_get(m, "k2", 2, 14, &t, &v, &vn, &seq), 0);
	assert_int_equal(memtable_get(m, "k2", 2, 15, &t, &v, &vn, &seq), 1);
	assert_int_equal(memtable_get(m, "k22", 3, UINT64_MAX, &t, &v, &vn, &seq), 0);
	assert_int_equal(memtable_get(m, "j", 1, 24, &t, &v, &vn, &seq), 0);
	assert_int_equal(memtable_get(m, "j", 1, 25, NULL, NULL, NULL, NULL), 1);
	memtable_unref(m);
}

static void make_key(uint8_t *k, uint64_t i)
{
	put_be64(k, i * 2654435761u % 1000003u);
}

static void test_many_and_accounting(void **state)
{
	(void)state;
	struct memtable *m;
	struct kv_iter *it;
	enum { N = 100000, VLEN = 100 };
	uint8_t k[8], v[VLEN];
	assert_int_equal(memtable_new(&m), 0);
	size_t base = memtable_bytes(m);
	assert_true(base > 0);
	for (uint64_t i = 0; i < N; i++) {
		make_key(k, i);
		memset(v, (int)(i & 0xff), VLEN);
		put_be64(v, i);
		assert_int_equal(memtable_add(m, i + 1, KV_INLINE, k, 8, v, VLEN), 0);
	}
	assert_int_equal(memtable_count(m), N);
	size_t bytes = memtable_bytes(m);
	size_t payload = (size_t)N * (8 + VLEN);
	/* at least keys + values + the fixed node header, at most ~2x */
	assert_true(bytes >= base + payload + (size_t)N * 24);
	assert_true(bytes <= base + 2 * payload);

	/* every key found with its value */
	for (uint64_t i = 0; i < N; i += 7) {
		const void *val;
		size_t vn;
		enum kv_type t;
		uint64_t seq;
		make_key(k, i);
		assert_int_equal(memtable_get(m, k, 8, UINT64_MAX, &t, &val, &vn, &seq), 1);
		assert_int_equal(vn, VLEN);
		assert_int_equal(get_be64(val), i);
		assert_int_equal(seq, i + 1);
	}
	/* strictly ascending iteration over all entries */
	assert_int_equal(memtable_iter_new(m, &it), 0);
	size_t n = 0;
	uint64_t prev = 0;
	for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it), n++) {
		size_t kn;
		uint64_t cur = get_be64(kv_iter_key(it, &kn));
		assert_int_equal(kn, 8);
		if (n)
			assert_true(cur > prev);
		prev = cur;
	}
	assert_int_equal(n, N);
	/* the iterator's reference keeps the table alive */
	memtable_unref(m);
	kv_iter_seek_first(it);
	assert_true(kv_iter_valid(it));
	kv_iter_destroy(it);
}

static void test_big_values(void **state)
{
	(void)state;
	struct memtable *m;
	assert_int_equal(memtable_new(&m), 0);
	size_t before = memtable_bytes(m);
	size_t big = 1 << 20;
	uint8_t *v = malloc(big);
	assert_non_null(v);
	for (size_t i = 0; i < big; i++)
		v[i] = (uint8_t)(i * 31);
	assert_int_equal(memtable_add(m, 1, KV_INLINE, "big", 3, v, big), 0);
	assert_int_equal(add_s(m, 2, KV_INLINE, "small", "s"), 0);
	assert_true(memtable_bytes(m) >= before + big);
	assert_true(memtable_bytes(m) <= before + big + 128 * 1024);
	const void *got;
	size_t gn;
	assert_int_equal(memtable_get(m, "big", 3, 1, NULL, &got, &gn, NULL), 1);
	assert_int_equal(gn, big);
	assert_memory_equal(got, v, big);
	free(v);
	memtable_unref(m);
}

/* ---- concurrency ------------------------------------------------------ */

/*
 * The writer inserts key i (i = 0, 1, 2, ...) with seq i+1 and value i, in a
 * shuffled key order, publishing the count of completed inserts.  Readers
 * check: every key the writer finished before the reader looked is found
 * with its value; scans are strictly ordered; the number of keys a scan sees
 * never decreases.
 */
enum { CONC_N = 200000 };

struct conc {
	struct memtable *m;
	_Atomic uint64_t done; /* inserts completed */
	_Atomic int stop;
	_Atomic uint64_t reads;
	_Atomic int failures;
};

static uint64_t conc_key(uint64_t i)
{
	return (i * 7919u) % CONC_N; /* a permutation of 0..CONC_N-1 */
}

static void *conc_writer(void *arg)
{
	struct conc *c = arg;
	uint8_t k[8], v[16];
	for (uint64_t i = 0; i < CONC_N && !c->stop; i++) {
		put_be64(k, conc_key(i));
		put_be64(v, i);
		put_be64(v + 8, ~i);
		if (memtable_add(c->m, i + 1, KV_INLINE, k, 8, v, 16))
			c->failures++;
		atomic_store(&c->done, i + 1);
	}
	return NULL;
}

static void *conc_reader(void *arg)
{
	struct conc *c = arg;
	uint64_t rnd = (uintptr_t)&rnd;
	size_t last_scan = 0;
	while (!atomic_load(&c->stop)) {
		uint64_t done = atomic_load(&c->done);
		/* point reads of finished inserts */
		for (int j = 0; j < 200 && done; j++) {
			rnd ^= rnd << 13;
			rnd ^= rnd >> 7;
			rnd ^= rnd << 17;
			uint64_t i = rnd % done;
			uint8_t k[8];
			const void *v;
			size_t vn;
			uint64_t seq;
			put_be64(k, conc_key(i));
			if (memtable_get(c->m, k, 8, UINT64_MAX, NULL, &v, &vn, &seq) != 1 ||
			    vn != 16 || get_be64(v) != i ||
			    get_be64((const uint8_t *)v + 8) != ~i || seq != i + 1)
				c->failures++;
			c->reads++;
		}
		/* a partial scan: ordered, and at least as many keys as finished before */
		struct kv_iter *it;
		if (memtable_iter_new(c->m, &it)) {
			c->failures++;
			continue;
		}
		size_t n = 0;
		uint64_t prev = 0;
		uint8_t lim[8];
		put_be64(lim, CONC_N / 50);
		for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
			size_t kn;
			const void *k = kv_iter_key(it, &kn);
			if (kv_key_cmp(k, kn, lim, 8) >= 0)
				break;
			uint64_t cur = get_be64(k);
			if (n && cur <= prev)
				c->failures++;
			prev = cur;
			n++;
		}
		kv_iter_destroy(it);
		if (n < last_scan)
			c->failures++; /* visibility went backwards */
		last_scan = n;
	}
	return NULL;
}

static void test_concurrent_readers(void **state)
{
	(void)state;
	struct conc c = {0};
	pthread_t w, r[4];
	assert_int_equal(memtable_new(&c.m), 0);
	assert_int_equal(pthread_create(&w, NULL, conc_writer, &c), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&r[i], NULL, conc_reader, &c), 0);
	/* run until the writer finishes, at most ~5 s */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct timespec ts = {0, 20 * 1000 * 1000};
		nanosleep(&ts, NULL);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (atomic_load(&c.done) == CONC_N || now.tv_sec - t0.tv_sec >= 5)
			break;
	}
	atomic_store(&c.stop, 1);
	pthread_join(w, NULL);
	for (int i = 0; i < 4; i++)
		pthread_join(r[i], NULL);
	assert_int_equal(c.failures, 0);
	assert_true(c.reads > 0);
	assert_int_equal(memtable_count(c.m), atomic_load(&c.done));
	memtable_unref(c.m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_empty),      cmocka_unit_test(test_ordering),
	    cmocka_unit_test(test_snapshots),  cmocka_unit_test(test_many_and_accounting),
	    cmocka_unit_test(test_big_values), cmocka_unit_test(test_concurrent_readers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
