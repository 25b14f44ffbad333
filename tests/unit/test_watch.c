/*
 * test_watch.c - the store watch (engine/check/watch.c): objects the writer's state
 * needs deleted behind its back make it stop acknowledging (issue 36).
 *
 *   watch_wal_wiped     every object deleted under a writer that commits: a
 *                       later write fails with -EIO within the bound (interval
 *                       100 ms; the test allows 10 s), never succeeds after
 *                       the first failure; stats say store_lost with the
 *                       object, and the close returns -EIO without writing a
 *                       manifest.  Before the watch every write succeeded.
 *   watch_pack_read     a group pack deleted, no further commit: a read of the
 *                       blob fails (-EUCLEAN) and asks the watch, which finds
 *                       the loss with no commit after it.
 *   watch_gc_pack       with no periodic check: a flush pack the newest
 *                       manifest's table uses deleted; a GC pass finds it
 *                       missing, deletes nothing and declares the loss.
 *   watch_churn_quiet   no false alarm: writes, flushes, compactions and GC
 *                       passes with no grace, beside a check every 1 ms, for
 *                       a while; the store is never called lost.
 *   salvage_open        engine_opts.salvage (engine/check/salvage.c) over a store
 *                       whose tables and five WAL entries were deleted.
 *
 * Store: local directory (tests/util testutil).  No timing is judged except
 * the generous detection bound; waits poll the engine's state.
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
#include <time.h>

#include <cmocka.h>

#include "engine.h"
#include "maint.h"
#include "store.h"
#include "testutil.h"

static uint64_t ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void nap_ms(unsigned ms)
{
	struct timespec ts = {0, (long)ms * 1000000L};
	nanosleep(&ts, NULL);
}

static struct engine *open_with(struct store *st, unsigned check_ms, unsigned gc_ms, unsigned grace,
                                size_t cache)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 5;
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* every blob in a group pack */
	o.cache_bytes = cache;
	o.store_check_ms = check_ms;
	o.gc_interval_ms = gc_ms;
	o.gc_grace_sec = grace;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static int put_wait(struct engine *e, unsigned i, size_t len)
{
	char key[32];
	uint8_t *v = malloc(len);
	assert_non_null(v);
	for (size_t k = 0; k < len; k++)
		v[k] = (uint8_t)(i * 31 + k);
	snprintf(key, sizeof(key), "k%06u", i);
	int rc = engine_put(e, key, strlen(key), v, len, ENGINE_WAIT, NULL);
	free(v);
	return rc;
}

static struct engine_stats stats(struct engine *e)
{
	struct engine_stats s;
	engine_get_stats(e, &s);
	return s;
}

static void watch_wal_wiped(void **state)
{
	(void)state;
	struct tu_store *t;
	assert_int_equal(tu_store_open("local", &t), 0);
	struct engine *e = open_with(t->store, 100, ENGINE_GC_OFF, 0, 1 << 20);
	unsigned i = 0;
	for (; i < 20; i++)
		assert_int_equal(put_wait(e, i, i % 2 ? 100 : 5000), 0);
	assert_int_equal(tu_wipe_prefix(t->store, ""), 0);
	uint64_t t0 = ms_now();
	int rc = 0;
	while (rc == 0 && ms_now() - t0 < 10000) {
		rc = put_wait(e, i, i % 2 ? 100 : 5000);
		i++;
	}
	assert_int_equal(rc, -EIO);
	printf("# the first write refused %" PRIu64 " ms after the wipe\n", ms_now() - t0);
	for (unsigned k = 0; k < 5; k++)
		assert_int_equal(put_wait(e, i++, 100), -EIO);
	assert_int_equal(engine_sync(e), -EIO);
	struct engine_stats s = stats(e);
	assert_true(s.store_lost);
	assert_true(s.store_lost_since > 0);
	assert_non_null(strstr(s.store_lost_what, "is missing"));
	assert_int_equal(s.sticky_error, -EIO);
	assert_int_equal(engine_check_store(e), -EIO);
	assert_int_equal(engine_close(e), -EIO);
	/* the close wrote no manifest over the loss */
	assert_int_equal(tu_count_keys(t->store, "manifest/"), 0);
	tu_store_close(t);
}

static void watch_pack_read(void **state)
{
	(void)state;
	struct tu_store *t;
	assert_int_equal(tu_store_open("local", &t), 0);
	/* a long interval: only the read's request makes a check */
	struct engine *e = open_with(t->store, 600000, ENGINE_GC_OFF, 0, 0);
	assert_int_equal(put_wait(e, 1, 200000), 0);
	assert_int_equal(put_wait(e, 2, 10), 0);
	struct tu_keys packs = {0};
	assert_int_equal(store_list(t->store, "pack/", NULL, 0, tu_keys_add, &packs), 0);
	assert_int_equal(packs.n, 1);
	assert_int_equal(store_delete(t->store, packs.keys[0]), 0);
	/* no cache (open_with(..., 0)): the read goes to the store */
	uint64_t checks = stats(e).store_checks;
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, "k000001", 7, &v, &n), -EUCLEAN);
	free(v);
	uint64_t t0 = ms_now();
	while (!stats(e).store_lost && ms_now() - t0 < 10000)
		nap_ms(10);
	struct engine_stats s = stats(e);
	assert_true(s.store_lost);
	assert_true(s.store_checks > checks);
	assert_non_null(strstr(s.store_lost_what, packs.keys[0]));
	assert_int_equal(put_wait(e, 3, 10), -EIO);
	tu_keys_free(&packs);
	assert_int_equal(engine_close(e), -EIO);
	tu_store_close(t);
}

static void watch_gc_pack(void **state)
{
	(void)state;
	struct tu_store *t;
	struct maint_gc_result r;
	assert_int_equal(tu_store_open("local", &t), 0);
	struct engine *e = open_with(t->store, ENGINE_CHECK_OFF, ENGINE_GC_OFF, 0, 1 << 20);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(put_wait(e, i, 50000), 0);
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(maint_gc_now(e, &r), 0);
	assert_false(stats(e).store_lost);
	/* the group packs: the flushed table refers to them */
	struct tu_keys packs = {0};
	assert_int_equal(store_list(t->store, "pack/", NULL, 0, tu_keys_add, &packs), 0);
	assert_true(packs.n >= 1);
	assert_int_equal(store_delete(t->store, packs.keys[0]), 0);
	long before = tu_count_keys(t->store, "");
	assert_int_not_equal(maint_gc_now(e, &r), 0);
	struct engine_stats s = stats(e);
	assert_true(s.store_lost);
	assert_non_null(strstr(s.store_lost_what, packs.keys[0]));
	assert_non_null(strstr(s.store_lost_what, "GC"));
	assert_int_equal(tu_count_keys(t->store, ""), before); /* nothing deleted */
	assert_int_equal(put_wait(e, 9, 10), -EIO);
	tu_keys_free(&packs);
	assert_int_equal(engine_close(e), -EIO);
	tu_store_close(t);
}

static void watch_churn_quiet(void **state)
{
	(void)state;
	struct tu_store *t;
	struct maint_gc_result r;
	assert_int_equal(tu_store_open("local", &t), 0);
	struct engine *e = open_with(t->store, 1, 20, ENGINE_GC_NO_GRACE, 1 << 20);
	for (unsigned round = 0; round < 30; round++) {
		for (unsigned i = 0; i < 10; i++)
			assert_int_equal(put_wait(e, i, (round + i) % 3 ? 100 : 3000), 0);
		if (round % 3 == 0)
			assert_int_equal(maint_flush_now(e), 0);
		if (round % 5 == 0)
			assert_int_equal(maint_compact_now(e), 0);
		if (round % 2 == 0)
			assert_int_equal(maint_gc_now(e, &r), 0);
		assert_int_equal(engine_check_store(e), 0);
	}
	struct engine_stats s = stats(e);
	assert_false(s.store_lost);
	assert_true(s.store_checks > 30);
	printf("# %" PRIu64 " checks, %" PRIu64 " flushes, %" PRIu64 " GC passes, no alarm\n",
	       s.store_checks, s.flushes, s.gc_passes);
	assert_int_equal(engine_close(e), 0);
	tu_store_close(t);
}

/* Open st with opts.salvage (as memwalfs fsck --salvage does). */
static struct engine *open_salvage(struct store *st)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.salvage = true;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.store_check_ms = ENGINE_CHECK_OFF;
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static bool has_key(struct engine *e, unsigned i)
{
	char key[32];
	void *v = NULL;
	size_t n = 0;
	snprintf(key, sizeof(key), "k%06u", i);
	int rc = engine_get(e, key, strlen(key), &v, &n);
	free(v);
	assert_true(rc == 0 || rc == -ENOENT);
	return rc == 0;
}

/*
 * salvage_open: a store whose tables and five WAL entries in the middle of its
 * uncovered tail were deleted under a writer: its close refuses (-EIO, no
 * manifest written), a plain open is refused; the salvage opens, counts what
 * it dropped, keeps the keys of every remaining entry (those after the gap
 * too), and after its close a plain open replays nothing and reads the same.
 */
static void salvage_open(void **state)
{
	(void)state;
	struct tu_store *t;
	struct tu_keys keys = {0};
	struct engine_opts o;
	struct engine *plain = NULL;
	assert_int_equal(tu_store_open("local", &t), 0);
	struct engine *e = open_with(t->store, ENGINE_CHECK_OFF, ENGINE_GC_OFF, 0, 1 << 20);
	for (unsigned i = 0; i < 30; i++)
		assert_int_equal(put_wait(e, i, 100), 0);
	assert_int_equal(engine_close(e), 0); /* everything into tables */
	e = open_with(t->store, ENGINE_CHECK_OFF, ENGINE_GC_OFF, 0, 1 << 20);
	for (unsigned i = 30; i < 50; i++) /* one WAL entry each, not covered */
		assert_int_equal(put_wait(e, i, i % 3 ? 100 : 3000), 0);
	uint64_t covered = stats(e).wal_covered, next = stats(e).wal_next;
	assert_int_equal(store_list(t->store, "wal/", NULL, 0, tu_keys_add, &keys), 0);
	size_t gone = 0;
	for (size_t i = 0; i < keys.n && gone < 5; i++) {
		uint64_t pos = strtoull(keys.keys[i] + 4, NULL, 10);
		if (pos >= covered + 8 && pos + 4 < next) {
			assert_int_equal(store_delete(t->store, keys.keys[i]), 0);
			gone++;
		}
	}
	assert_int_equal(gone, 5);
	tu_keys_free(&keys);
	assert_int_equal(store_list(t->store, "sst/", NULL, 0, tu_keys_add, &keys), 0);
	assert_true(keys.n >= 1);
	for (size_t i = 0; i < keys.n; i++)
		assert_int_equal(store_delete(t->store, keys.keys[i]), 0);
	tu_keys_free(&keys);
	long manifests = tu_count_keys(t->store, "manifest/");
	assert_int_equal(engine_close(e), -EIO); /* its check at close finds the loss */
	assert_int_equal(tu_count_keys(t->store, "manifest/"), manifests);
	engine_opts_default(&o);
	assert_int_not_equal(engine_open(t->store, &o, &plain), 0);
	e = open_salvage(t->store);
	struct engine_stats s = stats(e);
	assert_true(s.salvage_tables_lost >= 1);
	assert_int_equal(s.salvage_wal_missing, 5);
	unsigned kept = 0;
	for (unsigned i = 0; i < 50; i++)
		kept += has_key(e, i);
	printf("# salvage kept %u of 50 keys (30 in the lost tables, 5 in lost entries)\n", kept);
	assert_int_equal(kept, 15);
	assert_false(has_key(e, 0));
	assert_true(has_key(e, 30));
	assert_true(has_key(e, 49)); /* after the gap */
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(engine_open(t->store, &o, &plain), 0);
	assert_int_equal(stats(plain).replay_entries, 0);
	unsigned again = 0;
	for (unsigned i = 0; i < 50; i++)
		again += has_key(plain, i);
	assert_int_equal(again, kept);
	assert_int_equal(engine_close(plain), 0);
	tu_store_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(watch_wal_wiped), cmocka_unit_test(watch_pack_read),
	    cmocka_unit_test(watch_gc_pack),   cmocka_unit_test(watch_churn_quiet),
	    cmocka_unit_test(salvage_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
