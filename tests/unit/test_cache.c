/*
 * test_cache.c - unit tests of engine/cache/cache.c: hits and misses, eviction by
 * charge in LRU order, handles keeping evicted and erased entries alive,
 * replacement, capacity 0, prune, and concurrent use from several threads.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache.h"

/* Values are malloc()ed ints; the deleter counts and checks them. */
static atomic_int deleted;
static atomic_int live;

static void del_int(const void *key, size_t klen, void *value)
{
	int *v = value;
	(void)key;
	(void)klen;
	assert_true(*v >= 0);
	*v = -1; /* poison: a second delete would trip the assert above */
	free(v);
	deleted++;
	live--;
}

static int *mk(int v)
{
	int *p = malloc(sizeof(*p));
	*p = v;
	live++;
	return p;
}

static int setup(void **state)
{
	(void)state;
	deleted = 0;
	live = 0;
	return 0;
}

static void ins(struct cache *c, int k, size_t charge)
{
	assert_int_equal(cache_insert(c, &k, sizeof(k), mk(k), charge, del_int, NULL), 0);
}

/* Returns the value of key k, or -1 if absent. */
static int get(struct cache *c, int k)
{
	struct cache_handle *h = cache_lookup(c, &k, sizeof(k));
	if (!h)
		return -1;
	int v = *(int *)cache_value(h);
	cache_release(c, h);
	return v;
}

static void test_hit_miss(void **state)
{
	(void)state;
	struct cache *c;
	struct cache_stats st;
	assert_int_equal(cache_new(1000, &c), 0);
	assert_int_equal(get(c, 1), -1);
	ins(c, 1, 10);
	ins(c, 2, 10);
	assert_int_equal(get(c, 1), 1);
	assert_int_equal(get(c, 2), 2);
	assert_int_equal(get(c, 3), -1);
	cache_get_stats(c, &st);
	assert_int_equal(st.hits, 2);
	assert_int_equal(st.misses, 2);
	assert_int_equal(st.inserts, 2);
	assert_int_equal(st.usage, 20);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.capacity, 1000);
	cache_free(c);
	assert_int_equal(deleted, 2);
	assert_int_equal(live, 0);
	cache_free(NULL);
}

static void test_eviction_by_charge(void **state)
{
	(void)state;
	struct cache *c;
	struct cache_stats st;
	assert_int_equal(cache_new(100, &c), 0);
	for (int i = 0; i < 10; i++)
		ins(c, i, 10); /* exactly full */
	cache_get_stats(c, &st);
	assert_int_equal(st.usage, 100);
	assert_int_equal(st.evictions, 0);
	assert_int_equal(get(c, 0), 0); /* 0 becomes most recent */
	ins(c, 10, 25);                 /* evicts 1, 2, 3 (oldest unused) */
	assert_int_equal(get(c, 1), -1);
	assert_int_equal(get(c, 2), -1);
	assert_int_equal(get(c, 3), -1);
	assert_int_equal(get(c, 0), 0);
	assert_int_equal(get(c, 4), 4);
	assert_int_equal(get(c, 10), 10);
	cache_get_stats(c, &st);
	assert_true(st.usage <= 100);
	assert_int_equal(st.usage, 95);
	assert_int_equal(st.evictions, 3);
	assert_int_equal(deleted, 3);
	/* an entry larger than the whole budget does not stay */
	ins(c, 11, 500);
	assert_int_equal(get(c, 11), -1);
	cache_get_stats(c, &st);
	assert_true(st.usage <= 100);
	cache_free(c);
	assert_int_equal(live, 0);
}

/*
 * A 32 MiB cache of 1 MiB entries (the region cache's shape): cache_new_exact()
 * holds all 32 whatever their keys hash to; sixteen shards of 2 MiB each cannot
 * (with 32 keys some shard gets three, and evicts one of them).
 */
static void test_exact_large_entries(void **state)
{
	(void)state;
	const size_t MiB = 1u << 20;
	struct cache *c, *sh;
	assert_int_equal(cache_new_exact(32 * MiB, &c), 0);
	assert_int_equal(cache_new(32 * MiB, &sh), 0);
	for (int i = 0; i < 32; i++) {
		ins(c, i, MiB);
		ins(sh, i, MiB);
	}
	int kept = 0;
	for (int i = 0; i < 32; i++) {
		assert_int_equal(get(c, i), i);
		kept += get(sh, i) == i;
	}
	assert_true(kept < 32);
	ins(c, 32, MiB); /* one more: the least recently used (0) goes */
	assert_int_equal(get(c, 0), -1);
	assert_int_equal(get(c, 1), 1);
	cache_free(c);
	cache_free(sh);
	assert_int_equal(live, 0);
}

static void test_handle_keeps_evicted_alive(void **state)
{
	(void)state;
	struct cache *c;
	struct cache_stats st;
	struct cache_handle *h;
	int k = 7;
	assert_int_equal(cache_new(50, &c), 0);
	assert_int_equal(cache_insert(c, &k, sizeof(k), mk(7), 30, del_int, &h), 0);
	assert_int_equal(cache_charge(h), 30);
	/* held entries are not evictable: the budget is exceeded, not broken */
	ins(c, 8, 30);
	assert_int_equal(get(c, 7), 7);
	cache_get_stats(c, &st);
	assert_int_equal(st.usage, 30); /* 8 was evicted at once: 7 is held */
	assert_int_equal(get(c, 8), -1);
	assert_int_equal(deleted, 1);
	/* erase while held: gone from lookups, value still valid */
	cache_erase(c, &k, sizeof(k));
	assert_int_equal(get(c, 7), -1);
	assert_int_equal(*(int *)cache_value(h), 7);
	assert_int_equal(deleted, 1);
	cache_get_stats(c, &st);
	assert_int_equal(st.usage, 30);
	assert_int_equal(st.entries, 0);
	cache_release(c, h);
	assert_int_equal(deleted, 2);
	cache_get_stats(c, &st);
	assert_int_equal(st.usage, 0);

	/* replace while held: old value alive until release, lookups see new */
	assert_int_equal(cache_insert(c, &k, sizeof(k), mk(70), 10, del_int, &h), 0);
	assert_int_equal(cache_insert(c, &k, sizeof(k), mk(71), 10, del_int, NULL), 0);
	assert_int_equal(get(c, 7), 71);
	assert_int_equal(*(int *)cache_value(h), 70);
	assert_int_equal(deleted, 2);
	cache_release(c, h);
	assert_int_equal(deleted, 3);
	/* erase of an unheld entry frees at once; erase of a missing key is a no-op */
	cache_erase(c, &k, sizeof(k));
	assert_int_equal(deleted, 4);
	cache_erase(c, &k, sizeof(k));
	cache_free(c);
	assert_int_equal(live, 0);
}

static void test_evicted_while_held(void **state)
{
	(void)state;
	struct cache *c;
	struct cache_handle *h;
	int k = 1;
	assert_int_equal(cache_new(40, &c), 0);
	ins(c, 1, 20);
	h = cache_lookup(c, &k, sizeof(k));
	assert_non_null(h);
	cache_release(c, h);
	h = cache_lookup(c, &k, sizeof(k));
	/* fill past the budget while 1 is held; release makes it evictable */
	ins(c, 2, 20);
	ins(c, 3, 20); /* evicts 2 (1 is held) */
	assert_int_equal(get(c, 2), -1);
	assert_int_equal(*(int *)cache_value(h), 1);
	cache_release(c, h);
	assert_int_equal(get(c, 1), 1);
	assert_int_equal(get(c, 3), 3);
	cache_free(c);
	assert_int_equal(live, 0);
}

static void test_capacity_zero_and_prune(void **state)
{
	(void)state;
	struct cache *c;
	struct cache_handle *h;
	struct cache_stats st;
	int k = 5;
	assert_int_equal(cache_new(0, &c), 0);
	assert_int_equal(cache_insert(c, &k, sizeof(k), mk(5), 1, del_int, &h), 0);
	assert_int_equal(*(int *)cache_value(h), 5);
	assert_int_equal(get(c, 5), -1);
	cache_release(c, h);
	assert_int_equal(deleted, 1);
	ins(c, 6, 1);
	assert_int_equal(deleted, 2);
	cache_free(c);

	assert_int_equal(cache_new(1000, &c), 0);
	for (int i = 0; i < 20; i++)
		ins(c, i, 1);
	k = 3;
	h = cache_lookup(c, &k, sizeof(k));
	cache_prune(c);
	cache_get_stats(c, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(deleted, 2 + 19);
	cache_release(c, h);
	assert_int_equal(get(c, 3), 3);
	cache_free(c);
	assert_int_equal(live, 0);
}

/* Keys of variable length, incl. empty; many entries force table growth. */
static void test_keys(void **state)
{
	(void)state;
	struct cache *c;
	assert_int_equal(cache_new(1 << 20, &c), 0);
	assert_int_equal(cache_insert(c, "", 0, mk(100), 1, del_int, NULL), 0);
	assert_int_equal(cache_insert(c, "a", 1, mk(101), 1, del_int, NULL), 0);
	assert_int_equal(cache_insert(c, "ab", 2, mk(102), 1, del_int, NULL), 0);
	for (int i = 0; i < 5000; i++)
		ins(c, i, 1);
	struct cache_handle *h = cache_lookup(c, "", 0);
	assert_non_null(h);
	assert_int_equal(*(int *)cache_value(h), 100);
	cache_release(c, h);
	h = cache_lookup(c, "ab", 2);
	assert_int_equal(*(int *)cache_value(h), 102);
	cache_release(c, h);
	for (int i = 0; i < 5000; i += 13)
		assert_int_equal(get(c, i), i);
	cache_free(c);
	assert_int_equal(live, 0);
}

/* ---- concurrency ------------------------------------------------------- */

struct conc {
	struct cache *c;
	int id;
	atomic_int *failures;
};

/* Each value holds its key; a reader checks it under its handle. */
static void *conc_worker(void *arg)
{
	struct conc *w = arg;
	uint64_t rnd = 0x1234567ull * (uint64_t)(w->id + 1);
	for (int i = 0; i < 50000; i++) {
		rnd ^= rnd << 13;
		rnd ^= rnd >> 7;
		rnd ^= rnd << 17;
		int k = (int)(rnd % 2000);
		int op = (int)((rnd >> 20) % 10);
		if (op < 6) {
			struct cache_handle *h = cache_lookup(w->c, &k, sizeof(k));
			if (h) {
				if (*(int *)cache_value(h) != k)
					(*w->failures)++;
				cache_release(w->c, h);
			}
		} else if (op < 9) {
			struct cache_handle *h;
			int *v = mk(k);
			if (cache_insert(w->c, &k, sizeof(k), v, 64 + (size_t)k % 512, del_int,
			                 &h)) {
				(*w->failures)++;
				continue;
			}
			if (*(int *)cache_value(h) != k)
				(*w->failures)++;
			cache_release(w->c, h);
		} else {
			cache_erase(w->c, &k, sizeof(k));
		}
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	(void)state;
	struct cache *c;
	atomic_int failures = 0;
	pthread_t t[4];
	struct conc w[4];
	struct cache_stats st;
	/* a small sharded budget: 2000 keys * ~300 B = 600 KB; force evictions */
	assert_int_equal(cache_new(200 * 1024, &c), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct conc){c, i, &failures};
		assert_int_equal(pthread_create(&t[i], NULL, conc_worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(failures, 0);
	cache_get_stats(c, &st);
	assert_true(st.usage <= 200 * 1024);
	assert_true(st.evictions > 0);
	assert_true(st.hits > 0);
	cache_free(c);
	assert_int_equal(live, 0);

	/* the same on a sharded cache */
	assert_int_equal(cache_new(32u << 20, &c), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct conc){c, i + 10, &failures};
		assert_int_equal(pthread_create(&t[i], NULL, conc_worker, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(failures, 0);
	cache_get_stats(c, &st);
	assert_true(st.entries > 0 && st.entries <= 2000);
	cache_free(c);
	assert_int_equal(live, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(test_hit_miss, setup),
	    cmocka_unit_test_setup(test_eviction_by_charge, setup),
	    cmocka_unit_test_setup(test_exact_large_entries, setup),
	    cmocka_unit_test_setup(test_handle_keeps_evicted_alive, setup),
	    cmocka_unit_test_setup(test_evicted_while_held, setup),
	    cmocka_unit_test_setup(test_capacity_zero_and_prune, setup),
	    cmocka_unit_test_setup(test_keys, setup),
	    cmocka_unit_test_setup(test_concurrent, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
