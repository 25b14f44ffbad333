/*
 * test_wal_blobs.c - blobs carried inside WAL entries (docs/WAL.md, "Blobs
 * in the entry"): a small group is one PUT, a group past the budget puts
 * the rest into its own pack, a crash replays the blobs from the entries,
 * a flush promotes them into one pack named after its SSTable, and GC then
 * collects the entries while the promoted pack lives as long as a table
 * refers to it.
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

#include "check.h"
#include "engine.h"
#include "fault.h"
#include "format.h"
#include "maint.h"
#include "store.h"
#include "testutil.h"

static char *dir;

static int setup(void **state)
{
	(void)state;
	dir = tu_tempdir();
	return dir ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmtree(dir);
	free(dir);
	return 0;
}

static struct engine *open_engine(struct store *st, size_t wal_blob_max)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.wal_blob_max = wal_blob_max;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.gc_grace_sec = ENGINE_GC_NO_GRACE;
	o.repack_below_pct = ENGINE_GC_OFF;
	o.commit_retry_ms = ENGINE_NO_RETRY;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static struct engine_stats stats(struct engine *e)
{
	struct engine_stats s;
	engine_get_stats(e, &s);
	return s;
}

/* The value of key i: len(i) bytes from seed i. */
static size_t vlen(int i)
{
	return 4096 + (size_t)i * 997;
}

static void value(int i, uint8_t *buf)
{
	tu_random_bytes(buf, vlen(i), (uint64_t)i + 1);
}

static void key(int i, char k[16])
{
	snprintf(k, 16, "k%04d", i);
}

static void put(struct engine *e, int i, int flags)
{
	static uint8_t v[1 << 20];
	char k[16];
	key(i, k);
	value(i, v);
	assert_int_equal(engine_put(e, k, strlen(k), v, vlen(i), flags, NULL), 0);
}

static void expect(struct engine *e, int i)
{
	static uint8_t want[1 << 20];
	char k[16];
	void *v = NULL;
	size_t n = 0;
	key(i, k);
	value(i, want);
	int rc = engine_get(e, k, strlen(k), &v, &n);
	if (rc)
		fail_msg("get %s: %d", k, rc);
	assert_int_equal(n, vlen(i));
	assert_memory_equal(v, want, n);
	free(v);
}

/* Objects under prefix in the local store. */
static long count(struct store *st, const char *prefix)
{
	return tu_count_keys(st, prefix);
}

/* Crash: the store stops taking requests, then the engine is dropped. */
static void crash_close(struct engine *e, struct fault_store *f, struct store *st)
{
	fault_store_crash(f);
	engine_close(e);
	store_close(st);
}

static void test_one_put_per_commit(void **state)
{
	(void)state;
	struct store *base = NULL, *st;
	struct fault_store *f = NULL;
	assert_int_equal(store_open_local(dir, &base), 0);
	assert_int_equal(fault_store_new(base, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_engine(st, 0);
	struct engine_stats s0 = stats(e);
	uint64_t blob_bytes = 0;
	for (int i = 0; i < 20; i++) {
		put(e, i, ENGINE_WAIT | ENGINE_URGENT);
		blob_bytes += vlen(i);
	}
	struct engine_stats s1 = stats(e);
	assert_int_equal(s1.groups_committed - s0.groups_committed, 20);
	assert_int_equal(s1.packs_written - s0.packs_written, 0); /* one object per commit */
	assert_int_equal(s1.wal_blob_bytes - s0.wal_blob_bytes, blob_bytes);
	assert_int_equal(count(st, FMT_PACK_PREFIX), 0);
	for (int i = 0; i < 20; i++)
		expect(e, i);
	/* a crash: nothing flushed, the blobs come back from the WAL entries */
	crash_close(e, f, st);
	assert_int_equal(store_open_local(dir, &st), 0);
	e = open_engine(st, 0);
	for (int i = 0; i < 20; i++)
		expect(e, i);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_budget_split(void **state)
{
	(void)state;
	struct store *base = NULL, *st;
	struct fault_store *f = NULL;
	static uint8_t v[3][30000], big[100000];
	assert_int_equal(store_open_local(dir, &base), 0);
	assert_int_equal(fault_store_new(base, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_engine(st, 64 << 10);
	struct engine_batch *b = NULL;
	assert_int_equal(engine_batch_new(&b), 0);
	for (int i = 0; i < 3; i++) {
		char k[8];
		snprintf(k, sizeof(k), "s%d", i);
		tu_random_bytes(v[i], sizeof(v[i]), 10 + (uint64_t)i);
		assert_int_equal(engine_batch_put(b, k, strlen(k), v[i], sizeof(v[i])), 0);
	}
	struct engine_stats s0 = stats(e);
	assert_int_equal(engine_write(e, b, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	struct engine_stats s1 = stats(e);
	/* two fit the 64 KiB budget, the third goes to the group's pack */
	assert_int_equal(s1.wal_blob_bytes - s0.wal_blob_bytes, 60000);
	assert_int_equal(s1.packs_written - s0.packs_written, 1);
	/* a blob larger than the budget never goes into the entry */
	tu_random_bytes(big, sizeof(big), 20);
	assert_int_equal(
	    engine_put(e, "big", 3, big, sizeof(big), ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	struct engine_stats s2 = stats(e);
	assert_int_equal(s2.wal_blob_bytes, s1.wal_blob_bytes);
	assert_int_equal(s2.packs_written - s1.packs_written, 1);
	engine_batch_free(b);
	crash_close(e, f, st);
	assert_int_equal(store_open_local(dir, &st), 0);
	e = open_engine(st, 64 << 10);
	for (int i = 0; i < 3; i++) {
		char k[8];
		void *got = NULL;
		size_t n = 0;
		snprintf(k, sizeof(k), "s%d", i);
		assert_int_equal(engine_get(e, k, strlen(k), &got, &n), 0);
		assert_int_equal(n, sizeof(v[i]));
		assert_memory_equal(got, v[i], n);
		free(got);
	}
	void *got = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, "big", 3, &got, &n), 0);
	assert_int_equal(n, sizeof(big));
	assert_memory_equal(got, big, n);
	free(got);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* The name of the one flush pack in the store (there must be exactly one). */
static void flush_pack_name(struct store *st, char *name)
{
	struct tu_keys l = {0};
	assert_int_equal(store_list(st, FMT_PACK_PREFIX, NULL, 0, tu_keys_add, &l), 0);
	int found = 0;
	for (size_t i = 0; i < l.n; i++) {
		unsigned long long ep, pos;
		if (sscanf(l.keys[i], "pack/%20llu-%20llu", &ep, &pos) == 2 &&
		    (pos & PACK_POS_FLUSH)) {
			snprintf(name, FMT_NAME_MAX, "%s", l.keys[i]);
			found++;
		}
	}
	tu_keys_free(&l);
	assert_int_equal(found, 1);
}

/* Commit five more manifests, so that GC keeps none of the older ones (keep_manifests 4). */
static void newer_manifests(struct engine *e)
{
	for (int i = 0; i < 5; i++) {
		assert_int_equal(engine_put(e, "m", 1, "v", 1, ENGINE_WAIT | ENGINE_URGENT, NULL),
		                 0);
		assert_int_equal(maint_flush_now(e), 0);
	}
}

static void test_flush_promotes(void **state)
{
	(void)state;
	struct store *st = NULL;
	char name[FMT_NAME_MAX];
	struct maint_gc_result g;
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st, 0);
	for (int i = 0; i < 50; i++)
		put(e, i, ENGINE_WAIT | ENGINE_URGENT); /* one blob per group: all fit */
	assert_int_equal(engine_sync(e), 0);
	assert_int_equal(count(st, FMT_PACK_PREFIX), 0);
	assert_int_equal(maint_flush_now(e), 0);
	struct engine_stats s = stats(e);
	assert_int_equal(s.flush_packs, 1);
	assert_int_equal(s.packs_written, 1);
	flush_pack_name(st, name);
	/* the WAL entries are covered: GC takes them, the promoted pack stays */
	long wal_before = count(st, FMT_WAL_PREFIX);
	newer_manifests(e);
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_true(count(st, FMT_WAL_PREFIX) < wal_before);
	assert_int_equal(count(st, FMT_PACK_PREFIX), 1);
	assert_true(g.live_pack_bytes > 0);
	for (int i = 0; i < 50; i++)
		expect(e, i);
	assert_int_equal(engine_close(e), 0);
	/* a reopen reads everything through the table and the promoted pack */
	struct check_report r;
	struct check_opts co = {.deep = true};
	assert_int_equal(check_store(st, &co, &r), 0);
	assert_int_equal(r.problems, 0);
	e = open_engine(st, 0);
	for (int i = 0; i < 50; i++)
		expect(e, i);
	/* overwritten by small values and compacted: nothing refers to it, GC takes it */
	for (int i = 0; i < 50; i++) {
		char k[16];
		key(i, k);
		assert_int_equal(engine_put(e, k, strlen(k), "x", 1, 0, NULL), 0);
	}
	assert_int_equal(engine_sync(e), 0);
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(maint_compact_now(e), 0);
	newer_manifests(e);
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_int_equal(count(st, FMT_PACK_PREFIX), 0);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_promoted_pack_corrupt(void **state)
{
	(void)state;
	struct store *st = NULL;
	char name[FMT_NAME_MAX];
	void *buf = NULL, *v = NULL;
	size_t n = 0;
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st, 0);
	put(e, 0, 0);
	put(e, 1, ENGINE_WAIT | ENGINE_URGENT);
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(engine_close(e), 0);
	flush_pack_name(st, name);
	/* flip a byte of the first blob (right after the 32-byte header) */
	assert_int_equal(store_get(st, name, 0, STORE_TO_END, &buf, &n), 0);
	((uint8_t *)buf)[PACK_HEADER_SIZE + 10] ^= 0x5a;
	assert_int_equal(store_put(st, name, buf, n), 0);
	free(buf);
	e = open_engine(st, 0);
	assert_int_equal(engine_get(e, "k0000", 5, &v, &n), -EUCLEAN);
	expect(e, 1); /* the other blob stays readable */
	assert_int_equal(engine_close(e), 0);
	struct check_report r;
	struct check_opts co = {.deep = true};
	assert_int_equal(check_store(st, &co, &r), -EUCLEAN);
	assert_true(r.problems >= 1);
	store_close(st);
}

/* A reference to a blob still in the WAL is copied, never shared (the entry goes at GC). */
static void test_ref_to_wal_blob_copies(void **state)
{
	(void)state;
	struct store *st = NULL;
	static uint8_t src[20000];
	struct engine_iter *it = NULL;
	struct engine_ref ref;
	struct engine_batch *b = NULL;
	struct maint_gc_result g;
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st, 0);
	tu_random_bytes(src, sizeof(src), 7);
	assert_int_equal(engine_put(e, "src", 3, src, sizeof(src), ENGINE_WAIT, NULL), 0);
	assert_int_equal(engine_iter_new(e, "src", 3, NULL, 0, &it), 0);
	assert_true(engine_iter_valid(it));
	engine_iter_ref(it, &ref);
	assert_false(ref.blob); /* in the MemTable, carried by its WAL entry */
	assert_int_equal(engine_batch_new(&b), 0);
	assert_int_equal(engine_batch_put_ref(b, "dst", 3, &ref, 1000, 9000), 0);
	engine_iter_free(it);
	assert_int_equal(engine_write(e, b, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	engine_batch_free(b);
	assert_int_equal(engine_delete(e, "src", 3, ENGINE_WAIT, NULL), 0);
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 0);
	assert_int_equal(engine_get(e, "dst", 3, &v, &n), 0);
	assert_int_equal(n, 9000);
	assert_memory_equal(v, src + 1000, 9000);
	free(v);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_one_put_per_commit, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_budget_split, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flush_promotes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_promoted_pack_corrupt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_ref_to_wal_blob_copies, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
