/*
 * test_merge.c - unit tests of engine/table/merge.c (kv_merge_iter_new) and
 * engine/table/dbiter.c: merging MemTables with overlapping keys, snapshots,
 * tombstones hiding older versions, bounds, seek, and error propagation
 * from a failing child.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coding.h"
#include "dbiter.h"
#include "iter.h"
#include "memtable.h"

static void add_s(struct memtable *m, uint64_t seq, enum kv_type t, const char *k, const char *v)
{
	assert_int_equal(memtable_add(m, seq, t, k, strlen(k), v, v ? strlen(v) : 0), 0);
}

/* Three MemTables (oldest to newest) with overlapping keys. */
struct fixture {
	struct memtable *m[3];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	for (int i = 0; i < 3; i++)
		if (memtable_new(&f->m[i]))
			return -1;
	/* oldest: seq 1..6 */
	add_s(f->m[0], 1, KV_INLINE, "a", "a1");
	add_s(f->m[0], 2, KV_INLINE, "b", "b2");
	add_s(f->m[0], 3, KV_INLINE, "c", "c3");
	add_s(f->m[0], 4, KV_INLINE, "d", "d4");
	add_s(f->m[0], 5, KV_INLINE, "dd", "dd5");
	add_s(f->m[0], 6, KV_BLOB, "e", "desc-e6");
	/* middle: seq 7..10 */
	add_s(f->m[1], 7, KV_DELETE, "b", NULL);
	add_s(f->m[1], 8, KV_INLINE, "c", "c8");
	add_s(f->m[1], 9, KV_INLINE, "f", "f9");
	add_s(f->m[1], 10, KV_DELETE, "d", NULL);
	/* newest: seq 11..14 */
	add_s(f->m[2], 11, KV_INLINE, "b", "b11");
	add_s(f->m[2], 12, KV_DELETE, "c", NULL);
	add_s(f->m[2], 13, KV_INLINE, "a", "a13");
	add_s(f->m[2], 14, KV_INLINE, "g", "g14");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	for (int i = 0; i < 3; i++)
		memtable_unref(f->m[i]);
	free(f);
	return 0;
}

static struct kv_iter *merged(struct fixture *f)
{
	struct kv_iter *kids[3], *mi;
	/* newest first, as the reader will pass them */
	for (int i = 0; i < 3; i++)
		assert_int_equal(memtable_iter_new(f->m[2 - i], &kids[i]), 0);
	assert_int_equal(kv_merge_iter_new(kids, 3, &mi), 0);
	return mi;
}

static void test_merge_order(void **state)
{
	struct fixture *f = *state;
	struct kv_iter *mi = merged(f);
	static const struct {
		const char *k;
		uint64_t seq;
	} want[] = {{"a", 13}, {"a", 1},  {"b", 11}, {"b", 7},  {"b", 2}, {"c", 12}, {"c", 8},
	            {"c", 3},  {"d", 10}, {"d", 4},  {"dd", 5}, {"e", 6}, {"f", 9},  {"g", 14}};
	size_t i = 0;
	assert_false(kv_iter_valid(mi));
	for (kv_iter_seek_first(mi); kv_iter_valid(mi); kv_iter_next(mi), i++) {
		size_t kn;
		const void *k = kv_iter_key(mi, &kn);
		assert_true(i < sizeof(want) / sizeof(want[0]));
		assert_int_equal(kn, strlen(want[i].k));
		assert_memory_equal(k, want[i].k, kn);
		assert_int_equal(kv_iter_seq(mi), want[i].seq);
	}
	assert_int_equal(i, sizeof(want) / sizeof(want[0]));
	assert_int_equal(kv_iter_status(mi), 0);
	kv_iter_seek(mi, "c", 1);
	assert_true(kv_iter_valid(mi));
	assert_int_equal(kv_iter_seq(mi), 12);
	kv_iter_seek(mi, "de", 2);
	assert_true(kv_iter_valid(mi));
	assert_int_equal(kv_iter_seq(mi), 6);
	kv_iter_seek(mi, "h", 1);
	assert_false(kv_iter_valid(mi));
	kv_iter_destroy(mi);
}

static void test_merge_empty(void **state)
{
	(void)state;
	struct kv_iter *mi;
	assert_int_equal(kv_merge_iter_new(NULL, 0, &mi), 0);
	kv_iter_seek_first(mi);
	assert_false(kv_iter_valid(mi));
	assert_int_equal(kv_iter_status(mi), 0);
	kv_iter_destroy(mi);
}

/* Collect a dbiter scan into "k=v,k=v" (blobs as k=#v). */
static void scan(struct dbiter *d, char *out, size_t cap)
{
	size_t o = 0;
	out[0] = 0;
	for (; dbiter_valid(d); dbiter_next(d)) {
		size_t kn, vn;
		const char *k = dbiter_key(d, &kn);
		const char *v = dbiter_value(d, &vn);
		o += (size_t)snprintf(out + o, cap - o, "%s%.*s=%s%.*s", o ? "," : "", (int)kn, k,
		                      dbiter_type(d) == KV_BLOB ? "#" : "", (int)vn, v);
		assert_true(o < cap);
	}
	assert_int_equal(dbiter_status(d), 0);
}

static void check_view(struct fixture *f, uint64_t snap, const char *lo, const char *hi,
                       const char *want)
{
	struct dbiter *d;
	char got[512];
	assert_int_equal(
	    dbiter_new(merged(f), snap, lo, lo ? strlen(lo) : 0, hi, hi ? strlen(hi) : 0, &d), 0);
	dbiter_seek_first(d);
	scan(d, got, sizeof(got));
	assert_string_equal(got, want);
	dbiter_free(d);
}

static void test_dbiter_snapshots(void **state)
{
	struct fixture *f = *state;
	check_view(f, 0, NULL, NULL, "");
	check_view(f, 1, NULL, NULL, "a=a1");
	check_view(f, 6, NULL, NULL, "a=a1,b=b2,c=c3,d=d4,dd=dd5,e=#desc-e6");
	check_view(f, 7, NULL, NULL, "a=a1,c=c3,d=d4,dd=dd5,e=#desc-e6");
	check_view(f, 9, NULL, NULL, "a=a1,c=c8,d=d4,dd=dd5,e=#desc-e6,f=f9");
	check_view(f, 10, NULL, NULL, "a=a1,c=c8,dd=dd5,e=#desc-e6,f=f9");
	check_view(f, 12, NULL, NULL, "a=a1,b=b11,dd=dd5,e=#desc-e6,f=f9");
	check_view(f, UINT64_MAX, NULL, NULL, "a=a13,b=b11,dd=dd5,e=#desc-e6,f=f9,g=g14");
}

static void test_dbiter_bounds(void **state)
{
	struct fixture *f = *state;
	check_view(f, UINT64_MAX, "b", "e", "b=b11,dd=dd5");
	check_view(f, UINT64_MAX, "c", "dd", "");
	check_view(f, UINT64_MAX, "c", "dd\x01", "dd=dd5");
	check_view(f, UINT64_MAX, NULL, "a", "");
	check_view(f, UINT64_MAX, "", "b", "a=a13");
	check_view(f, UINT64_MAX, "f", NULL, "f=f9,g=g14");
	check_view(f, UINT64_MAX, "zz", NULL, "");
	check_view(f, 9, "b", "f", "c=c8,d=d4,dd=dd5,e=#desc-e6");
}

static void test_dbiter_seek(void **state)
{
	struct fixture *f = *state;
	struct dbiter *d;
	char got[512];
	assert_int_equal(dbiter_new(merged(f), UINT64_MAX, "b", 1, "g", 1, &d), 0);
	assert_false(dbiter_valid(d));
	dbiter_seek(d, "c", 1); /* c deleted, d deleted: lands on dd */
	scan(d, got, sizeof(got));
	assert_string_equal(got, "dd=dd5,e=#desc-e6,f=f9");
	dbiter_seek(d, "a", 1); /* below the lower bound: clamps to b */
	assert_true(dbiter_valid(d));
	size_t kn;
	assert_memory_equal(dbiter_key(d, &kn), "b", 1);
	assert_int_equal(dbiter_seq(d), 11);
	assert_int_equal(dbiter_type(d), KV_INLINE);
	dbiter_seek(d, "ee", 2);
	scan(d, got, sizeof(got));
	assert_string_equal(got, "f=f9");
	dbiter_seek(d, "g", 1); /* at the upper bound */
	assert_false(dbiter_valid(d));
	dbiter_free(d);
}

/* A snapshot scan is unaffected by inserts that come after it was taken. */
static void test_dbiter_newer_inserts(void **state)
{
	struct fixture *f = *state;
	struct dbiter *d;
	char got[512];
	assert_int_equal(dbiter_new(merged(f), 14, NULL, 0, NULL, 0, &d), 0);
	dbiter_seek_first(d);
	add_s(f->m[2], 15, KV_DELETE, "dd", NULL);
	add_s(f->m[2], 16, KV_INLINE, "ab", "new");
	add_s(f->m[2], 17, KV_INLINE, "f", "f17");
	scan(d, got, sizeof(got));
	assert_string_equal(got, "a=a13,b=b11,dd=dd5,e=#desc-e6,f=f9,g=g14");
	dbiter_free(d);
	check_view(f, UINT64_MAX, NULL, NULL, "a=a13,ab=new,b=b11,e=#desc-e6,f=f17,g=g14");
}

/* Many versions of many keys spread over tables; newest per key wins. */
static void test_dbiter_many(void **state)
{
	(void)state;
	enum { T = 4, K = 2000 };
	struct memtable *m[T];
	struct kv_iter *kids[T], *mi;
	uint64_t seq = 0;
	uint64_t last[K] = {0};
	bool deleted[K] = {0};
	for (int t = 0; t < T; t++) {
		assert_int_equal(memtable_new(&m[t]), 0);
		for (int i = 0; i < K; i++) {
			if ((i * 7 + t) % 3 == 0)
				continue;
			uint8_t k[4], v[8];
			put_be32(k, (uint32_t)i);
			put_be64(v, ++seq);
			bool del = (i + t) % 5 == 0;
			assert_int_equal(memtable_add(m[t], seq, del ? KV_DELETE : KV_INLINE, k, 4,
			                              v, del ? 0 : 8),
			                 0);
			last[i] = seq;
			deleted[i] = del;
		}
	}
	for (int t = 0; t < T; t++) {
		assert_int_equal(memtable_iter_new(m[t], &kids[t]), 0);
		memtable_unref(m[t]);
	}
	assert_int_equal(kv_merge_iter_new(kids, T, &mi), 0);
	struct dbiter *d;
	assert_int_equal(dbiter_new(mi, UINT64_MAX, NULL, 0, NULL, 0, &d), 0);
	int want_i = 0;
	size_t n = 0;
	for (dbiter_seek_first(d); dbiter_valid(d); dbiter_next(d), n++) {
		while (want_i < K && (!last[want_i] || deleted[want_i]))
			want_i++;
		size_t kn, vn;
		const uint8_t *k = dbiter_key(d, &kn);
		const uint8_t *v = dbiter_value(d, &vn);
		assert_int_equal(kn, 4);
		assert_int_equal(get_be32(k), want_i);
		assert_int_equal(vn, 8);
		assert_int_equal(get_be64(v), last[want_i]);
		want_i++;
	}
	while (want_i < K && (!last[want_i] || deleted[want_i]))
		want_i++;
	assert_int_equal(want_i, K);
	assert_true(n > K / 2);
	dbiter_free(d);
}

/* ---- a child that fails ----------------------------------------------- */

/* Yields keys "x0".."x<n-1>" then fails with -EIO after fail_after steps. */
struct fail_iter {
	struct kv_iter base;
	int pos, n, fail_after;
	int err;
	char key[16];
};

static bool f_valid(const struct kv_iter *it)
{
	const struct fail_iter *f = (const struct fail_iter *)it;
	return !f->err && f->pos >= 0 && f->pos < f->n;
}
static void f_set(struct fail_iter *f)
{
	if (f->pos >= f->fail_after)
		f->err = -EIO;
	snprintf(f->key, sizeof(f->key), "x%d", f->pos);
}
static void f_seek_first(struct kv_iter *it)
{
	struct fail_iter *f = (struct fail_iter *)it;
	f->pos = 0;
	f_set(f);
}
static void f_seek(struct kv_iter *it, const void *k, size_t kn)
{
	(void)k;
	(void)kn;
	f_seek_first(it);
}
static void f_next(struct kv_iter *it)
{
	struct fail_iter *f = (struct fail_iter *)it;
	f->pos++;
	f_set(f);
}
static const void *f_key(const struct kv_iter *it, size_t *n)
{
	const struct fail_iter *f = (const struct fail_iter *)it;
	*n = strlen(f->key);
	return f->key;
}
static uint64_t f_seq(const struct kv_iter *it)
{
	(void)it;
	return 100;
}
static enum kv_type f_type(const struct kv_iter *it)
{
	(void)it;
	return KV_INLINE;
}
static const void *f_value(const struct kv_iter *it, size_t *n)
{
	(void)it;
	*n = 1;
	return "v";
}
static int f_status(const struct kv_iter *it)
{
	return ((const struct fail_iter *)it)->err;
}
static void f_destroy(struct kv_iter *it)
{
	free(it);
}
static const struct kv_iter_ops fail_ops = {f_valid, f_seek_first, f_seek,  f_next,   f_key,
                                            f_seq,   f_type,       f_value, f_status, f_destroy};

static void test_error_propagation(void **state)
{
	struct fixture *f = *state;
	struct kv_iter *kids[2], *mi;
	struct fail_iter *fi = calloc(1, sizeof(*fi));
	fi->base.ops = &fail_ops;
	fi->n = 10;
	fi->fail_after = 3;
	assert_int_equal(memtable_iter_new(f->m[0], &kids[0]), 0);
	kids[1] = &fi->base;
	assert_int_equal(kv_merge_iter_new(kids, 2, &mi), 0);
	struct dbiter *d;
	assert_int_equal(dbiter_new(mi, UINT64_MAX, NULL, 0, NULL, 0, &d), 0);
	size_t n = 0;
	for (dbiter_seek_first(d); dbiter_valid(d); dbiter_next(d))
		n++;
	/* a..e from the memtable come first, then x0 x1 x2, then the failure */
	assert_int_equal(dbiter_status(d), -EIO);
	assert_int_equal(n, 6 + 3);
	dbiter_free(d);

	/* an error at the very first position */
	fi = calloc(1, sizeof(*fi));
	fi->base.ops = &fail_ops;
	fi->n = 10;
	fi->fail_after = 0;
	assert_int_equal(memtable_iter_new(f->m[1], &kids[0]), 0);
	kids[1] = &fi->base;
	assert_int_equal(kv_merge_iter_new(kids, 2, &mi), 0);
	kv_iter_seek_first(mi);
	assert_false(kv_iter_valid(mi));
	assert_int_equal(kv_iter_status(mi), -EIO);
	kv_iter_destroy(mi);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_merge_order, setup, teardown),
	    cmocka_unit_test(test_merge_empty),
	    cmocka_unit_test_setup_teardown(test_dbiter_snapshots, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dbiter_bounds, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dbiter_seek, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dbiter_newer_inserts, setup, teardown),
	    cmocka_unit_test(test_dbiter_many),
	    cmocka_unit_test_setup_teardown(test_error_propagation, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
