/*
 * test_gc_space.c - space comes back by GC alone (issue 16): the GC thread's
 * cycle (engine/maint/maint.c, maint_gc_cycle()) asks for the flush and the
 * compaction that make dead packs collectable, the manifests kept by count
 * go once the newest has aged, and repack keeps to its byte budget per pass.
 *
 *   gc_space_drains   blobs written over several commits and flushed, then
 *                     all deleted; only GC cycles follow (no flush or
 *                     compaction asked by the test): every pack goes.
 *                     Before the fix nothing ever froze the MemTable (its
 *                     size or 1024 WAL groups are the writer's triggers) and
 *                     the newest 4 manifests, kept for ever by count, still
 *                     listed the table of the deleted blobs.
 *   gc_space_budget   32 packs of 4 blobs, 3 of each 4 deleted; with a
 *                     budget of 60 KiB a pass, each GC pass repacks at most
 *                     3 blobs of 16 KiB (the budget holds), several passes
 *                     are needed, and in the end every old pack is gone and
 *                     the store is back to its live bytes.
 *   gc_space_due      with a real grace, a cycle after the deletes defers the
 *                     dead objects and says when the first comes due; the GC
 *                     thread then waits until then (at least a quarter of its
 *                     interval), not a whole interval (before: always the
 *                     interval, so dead packs stayed up to one interval past
 *                     their grace); after a cycle that asked for a flush
 *                     (churn) a quarter interval, so the compaction that
 *                     makes dead data collectable comes sooner.
 *   gc_space_rest     packs a quarter live: a pass after writes selects none
 *                     (half the threshold while the store is written), the
 *                     next pass with no write between selects them and
 *                     rewrites every live blob (the whole threshold at rest),
 *                     and its own repack writes do not count as writing.
 *   gc_space_rate     the repack budget of a pass is the rate times the time
 *                     since the pass before (at most the interval): passes that
 *                     come sooner because objects came due do not multiply
 *                     the rate.
 *
 * Counts and computed values only, no timing.  Store: local directory.
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

/* Sum of object sizes under prefix (the listing must work). */
static struct tu_usage usage_of(struct store *st, const char *prefix)
{
	struct tu_usage u = tu_store_usage(st, prefix);

	assert_int_equal(u.rc, 0);
	return u;
}

static void put_blob(struct engine *e, unsigned i, size_t len)
{
	char key[32];
	uint8_t *buf = malloc(len);

	assert_non_null(buf);
	snprintf(key, sizeof(key), "b/%06u", i);
	tu_random_bytes(buf, len, i);
	assert_int_equal(engine_put(e, key, strlen(key), buf, len, 0, NULL), 0);
	free(buf);
}

static void del_blob(struct engine *e, unsigned i)
{
	char key[32];

	snprintf(key, sizeof(key), "b/%06u", i);
	assert_int_equal(engine_delete(e, key, strlen(key), 0, NULL), 0);
}

static void open_engine_grace(struct tu_store *t, unsigned repack_kib, unsigned grace,
                              struct engine **e)
{
	struct engine_opts o;

	engine_opts_default(&o);
	o.cadence_ms = 20;
	o.gc_interval_ms = ENGINE_GC_OFF; /* the test runs the cycles */
	o.gc_grace_sec = grace;
	o.repack_kib_per_sec = repack_kib;
	assert_int_equal(engine_open(t->store, &o, e), 0);
}

static void open_engine(struct tu_store *t, unsigned repack_kib, struct engine **e)
{
	open_engine_grace(t, repack_kib, ENGINE_GC_NO_GRACE, e);
}

static void test_gc_space_drains(void **state)
{
	struct tu_store *t = NULL;
	struct engine *e = NULL;
	struct maint_gc_result g;
	struct tu_usage packs;
	int rounds = 0, asked = 0;
	(void)state;

	assert_int_equal(tu_store_open("local", &t), 0);
	open_engine(t, 0, &e);
	for (unsigned i = 0; i < 64; i++) {
		put_blob(e, i, 64u << 10);
		if (i % 8 == 7)
			assert_int_equal(engine_sync(e), 0); /* one pack per 8 blobs */
	}
	assert_int_equal(maint_flush_now(e), 0); /* a table lists the blobs */
	assert_true(usage_of(t->store, "pack/").bytes >= 64u * (64u << 10));
	for (unsigned i = 0; i < 64; i++)
		del_blob(e, i);
	assert_int_equal(engine_sync(e), 0);
	/* GC cycles only, as the GC thread runs them */
	do {
		assert_int_equal(maint_gc_cycle(e, &g), 0);
		asked += g.space_requested;
		assert_int_equal(maint_flusher_idle(e), 0);
		packs = usage_of(t->store, "pack/");
	} while (packs.objects > 0 && ++rounds < 6);
	print_message("drain: %d cycles, %d asked for a flush; %" PRIu64 " packs, %" PRIu64
	              " bytes left\n",
	              rounds + 1, asked, packs.objects, packs.bytes);
	assert_true(asked >= 1);
	assert_int_equal(packs.objects, 0);
	/* a further cycle with nothing to do asks for nothing */
	assert_int_equal(maint_gc_cycle(e, &g), 0);
	assert_false(g.space_requested);
	assert_int_equal(engine_close(e), 0);
	tu_store_close(t);
}

#define GROUPS 32
#define PER 4
#define BLOB (16u << 10)

/* GROUPS x PER blobs of BLOB bytes, then 3 of each PER deleted (25 % live), flushed, compacted. */
static void quarter_live(struct engine *e)
{
	for (unsigned i = 0; i < GROUPS * PER; i++) {
		put_blob(e, i, BLOB);
		if (i % PER == PER - 1)
			assert_int_equal(engine_sync(e), 0);
	}
	for (unsigned i = 0; i < GROUPS * PER; i++)
		if (i % PER != 0)
			del_blob(e, i);
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(maint_compact_now(e), 0);
}

static void test_gc_space_budget(void **state)
{
	struct tu_store *t = NULL;
	struct engine *e = NULL;
	struct maint_gc_result g;
	struct tu_usage packs;
	uint64_t total = 0, live = (uint64_t)GROUPS * BLOB;
	int passes = 0, busy = 0;
	(void)state;

	assert_int_equal(tu_store_open("local", &t), 0);
	/* 1 KiB/s for the 60 s a hand-run pass stands for: 60 KiB, 3 blobs of 16 KiB */
	open_engine(t, 1, &e);
	quarter_live(e);
	for (;;) {
		assert_int_equal(maint_gc_now(e, &g), 0);
		passes++;
		total += g.repacked_bytes;
		assert_true(g.repacked_bytes <= 60u << 10); /* the budget holds */
		if (g.repack_budget_spent)
			busy++;
		packs = usage_of(t->store, "pack/");
		if (getenv("DBG"))
			print_message("pass %d: sel %" PRIu64 " rep %" PRIu64 " packs %" PRIu64
			              "/%" PRIu64 " del %" PRIu64 "\n",
			              passes, g.repack_packs, g.repacked_bytes, packs.bytes,
			              packs.objects, g.deleted);
		if (g.repack_packs == 0 && packs.bytes <= live + live / 4)
			break;
		assert_true(passes < 200);
		/* drop the shadowed versions of what was rewritten (as the cycle would) */
		assert_int_equal(maint_flush_now(e), 0);
		assert_int_equal(maint_compact_now(e), 0);
	}
	packs = usage_of(t->store, "pack/");
	print_message("budget: %d passes (%d stopped at the budget), %" PRIu64
	              " bytes repacked; packs %" PRIu64 " bytes in %" PRIu64
	              " objects, live %" PRIu64 "\n",
	              passes, busy, total, packs.bytes, packs.objects, live);
	assert_true(busy >= 5); /* 32 blobs at 3 a pass: at least 10 passes stopped early */
	assert_int_equal(total, live);
	assert_true(packs.bytes <= live + live / 4);
	/* everything still reads back */
	for (unsigned i = 0; i < GROUPS * PER; i += PER) {
		char key[32];
		uint8_t *want = malloc(BLOB);
		void *got = NULL;
		size_t n = 0;

		assert_non_null(want);
		snprintf(key, sizeof(key), "b/%06u", i);
		tu_random_bytes(want, BLOB, i);
		assert_int_equal(engine_get(e, key, strlen(key), &got, &n), 0);
		assert_int_equal(n, BLOB);
		assert_memory_equal(got, want, BLOB);
		free(got);
		free(want);
	}
	assert_int_equal(engine_close(e), 0);
	tu_store_close(t);
}

/* Wall clock in ms, as the GC thread reads it. */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define GRACE_S 40u       /* longer than the test takes: everything dead waits */
#define INTERVAL_MS 60000 /* the GC thread's interval the waits are computed for */

static void test_gc_space_rest(void **state)
{
	struct tu_store *t = NULL;
	struct engine *e = NULL;
	struct maint_gc_result g;
	(void)state;

	assert_int_equal(tu_store_open("local", &t), 0);
	open_engine(t, 1u << 20, &e); /* a budget far above what is rewritten */
	quarter_live(e);
	/* written since the last pass: 25 % live is not below half of 50 % */
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_true(g.writing);
	assert_int_equal(g.repack_packs, 0);
	assert_int_equal(g.repacked_blobs, 0);
	/* nothing written since: the whole threshold, every pack goes for repack */
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_false(g.writing);
	assert_true(g.repack_packs >= 1);
	assert_int_equal(g.repacked_blobs, GROUPS); /* every live blob */
	/* the repack's own puts are not foreground writes */
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_false(g.writing);
	/* a foreground write makes the next pass a writing one again */
	put_blob(e, 0, BLOB);
	assert_int_equal(engine_sync(e), 0);
	assert_int_equal(maint_gc_now(e, &g), 0);
	assert_true(g.writing);
	print_message("rest: none selected while writing, %u blobs repacked at rest\n",
	              (unsigned)GROUPS);
	assert_int_equal(engine_close(e), 0);
	tu_store_close(t);
}

static void test_gc_space_due(void **state)
{
	struct tu_store *t = NULL;
	struct engine *e = NULL;
	struct maint_gc_result g = {0}, none = {0};
	int64_t before_s = wall_ms() / 1000, now;
	uint64_t w;
	int cycles = 0;
	(void)state;

	/* the rule alone: interval without deferred objects, else the due time in [floor, interval]
	 */
	now = wall_ms();
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, 0, now), INTERVAL_MS);
	none.deferred = 1;
	none.next_due = now / 1000 + 30;
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, -EIO, now), INTERVAL_MS);
	w = maint_gc_wait_ms(INTERVAL_MS, &none, 0, now);
	assert_true(w > 29000 && w <= 30000);
	none.next_due = now / 1000 + 1;
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, 0, now), INTERVAL_MS / 4);
	none.next_due = now / 1000 - 5; /* due already */
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, 0, now), INTERVAL_MS / 4);
	assert_int_equal(maint_gc_wait_ms(2000, &none, 0, now), 1000); /* at least 1 s */
	assert_int_equal(maint_gc_wait_ms(500, &none, 0, now), 500);   /* at most the interval */
	none.next_due = now / 1000 + 3600;
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, 0, now), INTERVAL_MS);
	/* a pass that asked for a flush (churn goes on): the floor, whatever is due */
	none.space_requested = true;
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, 0, now), INTERVAL_MS / 4);
	none.deferred = 0;
	assert_int_equal(maint_gc_wait_ms(INTERVAL_MS, &none, 0, now), INTERVAL_MS / 4);

	/* from a real pass: dead blobs under a grace of GRACE_S */
	assert_int_equal(tu_store_open("local", &t), 0);
	open_engine_grace(t, 0, GRACE_S, &e);
	for (unsigned i = 0; i < 16; i++) {
		put_blob(e, i, 64u << 10);
		if (i % 4 == 3)
			assert_int_equal(engine_sync(e), 0);
	}
	assert_int_equal(maint_flush_now(e), 0);
	for (unsigned i = 0; i < 16; i++)
		del_blob(e, i);
	assert_int_equal(engine_sync(e), 0);
	/* the cycles make the blobs' packs unreferenced in the newest manifest; they wait */
	do {
		assert_int_equal(maint_gc_cycle(e, &g), 0);
		assert_int_equal(maint_flusher_idle(e), 0);
	} while (g.space_requested && ++cycles < 4);
	now = wall_ms();
	print_message("due: %" PRIu64 " deferred, first due in %" PRId64 " s (grace %u)\n",
	              g.deferred, g.next_due - now / 1000, GRACE_S);
	assert_true(g.deferred > 0);
	assert_int_equal(g.deleted, 0);
	/* the first due: the covered WAL entries, a tenth of the grace after their manifest */
	assert_true(g.next_due >= before_s + GRACE_S / 10);
	assert_true(g.next_due <= now / 1000 + GRACE_S + 1);
	w = maint_gc_wait_ms(INTERVAL_MS, &g, 0, now);
	assert_true(w >= INTERVAL_MS / 4);
	assert_true(w < INTERVAL_MS); /* before: the thread always waited the interval */
	assert_true(w <= (uint64_t)(g.next_due * 1000 - now) || w == INTERVAL_MS / 4);
	assert_int_equal(engine_close(e), 0);
	tu_store_close(t);
}

static void test_gc_space_rate(void **state)
{
	(void)state;
	/* 8 MiB/s: a quarter interval after the last pass, a quarter of the interval's budget */
	assert_int_equal(maint_repack_budget(8192, 15000, 3750000), 30ull << 20);
	assert_int_equal(maint_repack_budget(8192, 15000, 0), 120ull << 20); /* first pass */
	assert_int_equal(maint_repack_budget(8192, 15000, 100000000), 120ull << 20); /* capped */
	assert_int_equal(maint_repack_budget(0, 1000, 500000), 4ull << 20); /* default rate */
	/* passes by hand (no thread): 60 s each, whatever the time between */
	assert_int_equal(maint_repack_budget(1, ENGINE_GC_OFF, 1000), 60u << 10);
	assert_int_equal(maint_repack_budget(ENGINE_GC_OFF, 15000, 1000), UINT64_MAX);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gc_space_drains), cmocka_unit_test(test_gc_space_budget),
	    cmocka_unit_test(test_gc_space_rest),   cmocka_unit_test(test_gc_space_due),
	    cmocka_unit_test(test_gc_space_rate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
