/*
 * test_region_snapshot.c - snapshots of a store with regions (engine/region/regsnap.c;
 * docs/SNAPSHOTS.md "Regions"): one part per region, region 0's last; list and delete of
 * every part; each region's writer GC (grace 0) keeps its part; an engine opened at a
 * region's part reads the state of the snapshot.
 *
 * Run with "local" (suite unit) or "s3" (suite s3; exit 77 = SKIP without $S3_ENDPOINT).
 * Keys and values are deterministic (no seed).
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "check.h"
#include "engine.h"
#include "format.h"
#include "gc.h"
#include "regmap.h"
#include "store.h"
#include "testutil.h"

#define NREG 3 /* region 0, region 1 (a state), region 2 (in the map, never formatted) */

static const char *kind = "local"; /* tu_store kind of this run */
static struct tu_store *ts;        /* this test's store */
static struct store *view[NREG];   /* [0]: the store (borrowed); else r/<rid>/ (owned) */

static int setup(void **state)
{
	(void)state;
	assert_int_equal(tu_store_open(kind, &ts), 0);
	view[0] = ts->store;
	for (uint32_t rid = 1; rid < NREG; rid++) {
		char prefix[FMT_REGION_PREFIX_MAX];
		fmt_region_prefix(prefix, rid);
		assert_int_equal(store_open_sub(ts->store, prefix, &view[rid]), 0);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	for (uint32_t rid = 1; rid < NREG; rid++)
		store_close(view[rid]);
	memset(view, 0, sizeof(view));
	tu_store_close(ts);
	ts = NULL;
	return 0;
}

/* A writer on region rid's view: GC every pass with a zero grace, small MemTables. */
static struct engine *writer(uint32_t rid)
{
	struct engine_opts o;
	struct engine *e = NULL;

	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.cache_bytes = 1u << 20;
	o.memtable_max_bytes = 16 << 10;
	o.gc_interval_ms = ENGINE_GC_OFF; /* passes are run by hand: gc_run() */
	o.store_check_ms = ENGINE_CHECK_OFF;
	assert_int_equal(engine_open(view[rid], &o, &e), 0);
	return e;
}

/* Region rid's engine at snapshot name (read-only), or NULL with *rc. */
static struct engine *at_snapshot(uint32_t rid, const char *name, int *rc)
{
	struct engine_opts o;
	struct engine *e = NULL;

	engine_opts_default(&o);
	o.read_only = true;
	o.snapshot = name;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.store_check_ms = ENGINE_CHECK_OFF;
	*rc = engine_open(view[rid], &o, &e);
	return *rc ? NULL : e;
}

/* Write n keys k0000.. of round r into e (durably). */
static void fill(struct engine *e, uint32_t rid, int round, int n)
{
	char k[32], v[320];
	for (int i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "k%04d", i);
		snprintf(v, sizeof(v), "region %u round %d key %d %0200d", rid, round, i, i);
		assert_int_equal(engine_put(e, k, strlen(k), v, strlen(v), ENGINE_WAIT, NULL), 0);
	}
}

/* Every key of round r in e, as fill() wrote it. */
static void expect_round(struct engine *e, uint32_t rid, int round, int n)
{
	char k[32], v[320];
	for (int i = 0; i < n; i++) {
		void *got = NULL;
		size_t len = 0;
		snprintf(k, sizeof(k), "k%04d", i);
		snprintf(v, sizeof(v), "region %u round %d key %d %0200d", rid, round, i, i);
		assert_int_equal(engine_get(e, k, strlen(k), &got, &len), 0);
		assert_int_equal(len, strlen(v));
		assert_memory_equal(got, v, len);
		free(got);
	}
}

/* Add regions 1 and 2 to the map (region 2 stays without a state). */
static void make_map(void)
{
	struct region_map m = {0};
	for (uint32_t rid = 1; rid < NREG; rid++) {
		struct region_entry e = {.parent_ino = 1, .since = 1767225600};
		uint32_t got = 0;
		snprintf(e.name, sizeof(e.name), "r%u", rid);
		snprintf(e.path, sizeof(e.path), "/r%u", rid);
		assert_int_equal(region_map_add(ts->store, &e, &m, &got), 0);
		assert_int_equal(got, rid);
	}
	region_map_free(&m);
}

/* One GC pass of e's store with a zero grace, now: the count it deleted. */
static size_t gc_now(uint32_t rid)
{
	struct gc *g = NULL;
	struct gc_opts o;
	struct gc_plan plan = {0};
	gc_opts_default(&o);
	o.grace_sec = 0;
	assert_int_equal(gc_new(view[rid], &g), 0);
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	size_t n = plan.ndeletes;
	assert_int_equal(gc_plan_execute(g, &o, &plan, NULL), 0);
	gc_plan_clear(&plan);
	gc_free(g);
	return n;
}

/* region_snapshot_list() callback: count the parts, by rid. */
static int count_part(void *arg, uint32_t rid, const struct engine_snapshot *s)
{
	int *n = arg;
	assert_true(rid < NREG);
	assert_string_equal(s->name, "cut");
	n[rid]++;
	return 0;
}

/* ------------------------------------------------------------------ */

/*
 * A cut of regions 0 and 1 (2 has no state: no part), taken while both write; both go on
 * rewriting every key, GC with a zero grace runs in each: each region opened at its part
 * reads exactly the round of the snapshot.
 */
static void test_cut_kept_by_each_gc(void **state)
{
	(void)state;
	struct engine *e0 = writer(0), *e1 = writer(1);
	struct engine_snapshot s0;
	size_t nreg = 9;
	int rc, parts[NREG] = {0};

	make_map();
	fill(e0, 0, 1, 300);
	fill(e1, 1, 1, 300);
	assert_int_equal(region_snapshot_create(ts->store, "cut", &s0, &nreg), 0);
	assert_int_equal(nreg, 1); /* region 2 has no state */
	assert_int_equal(region_snapshot_create(ts->store, "cut", NULL, NULL), -EEXIST);
	assert_int_equal(region_snapshot_list(ts->store, count_part, parts), 0);
	assert_int_equal(parts[0], 1);
	assert_int_equal(parts[1], 1);
	assert_int_equal(parts[2], 0);
	/* the check of each view counts its part as a snapshot object, never an orphan */
	for (uint32_t rid = 0; rid < NREG; rid++) {
		struct check_report r;
		struct check_opts co = {0};
		check_store(view[rid], &co, &r); /* writers run beside it: only the counts */
		assert_int_equal(r.snapshots.objects, rid < 2 ? 1 : 0);
		if (rid == 0)
			assert_true(r.subregions.objects > 0); /* r/1/ and r/2/: not orphans */
	}
	for (int round = 2; round <= 4; round++) {
		fill(e0, 0, round, 300);
		fill(e1, 1, round, 300);
	}
	assert_true(gc_now(0) > 0);
	assert_true(gc_now(1) > 0);
	for (uint32_t rid = 0; rid < 2; rid++) {
		struct engine *s = at_snapshot(rid, "cut", &rc);
		assert_int_equal(rc, 0);
		expect_round(s, rid, 1, 300);
		assert_int_equal(engine_close(s), 0);
	}
	assert_null(at_snapshot(2, "cut", &rc));
	assert_int_equal(rc, -ENOENT);
	/* delete: every part goes; GC frees what only the snapshot kept */
	assert_int_equal(region_snapshot_delete(ts->store, "cut"), 0);
	assert_int_equal(region_snapshot_delete(ts->store, "cut"), -ENOENT);
	memset(parts, 0, sizeof(parts));
	assert_int_equal(region_snapshot_list(ts->store, count_part, parts), 0);
	assert_int_equal(parts[0] + parts[1] + parts[2], 0);
	assert_null(at_snapshot(1, "cut", &rc));
	assert_int_equal(rc, -ENOENT);
	assert_true(gc_now(1) > 0);
	assert_int_equal(engine_close(e0), 0);
	assert_int_equal(engine_close(e1), 0);
}

/*
 * A create that stopped after a region's part and before region 0's left that part: the
 * snapshot does not exist (list shows nothing), and a create of the name replaces it.
 */
static void test_leftover_part(void **state)
{
	(void)state;
	struct engine *e0 = writer(0), *e1 = writer(1);
	struct engine_snapshot old;
	int rc, parts[NREG] = {0};

	make_map();
	fill(e0, 0, 1, 50);
	fill(e1, 1, 1, 50);
	assert_int_equal(engine_snapshot_create(view[1], "cut", &old), 0); /* the leftover */
	assert_int_equal(region_snapshot_list(ts->store, count_part, parts), 0);
	assert_int_equal(parts[0] + parts[1], 0);
	fill(e1, 1, 2, 50);
	assert_int_equal(region_snapshot_create(ts->store, "cut", NULL, NULL), 0);
	assert_int_equal(region_snapshot_list(ts->store, count_part, parts), 0);
	assert_int_equal(parts[1], 1);
	struct engine *s = at_snapshot(1, "cut", &rc);
	assert_int_equal(rc, 0);
	expect_round(s, 1, 2, 50); /* the new part, not the leftover */
	assert_int_equal(engine_close(s), 0);
	assert_int_equal(region_snapshot_create(ts->store, "no/good", NULL, NULL), -EINVAL);
	assert_int_equal(engine_close(e0), 0);
	assert_int_equal(engine_close(e1), 0);
}

/* A store without regions: as engine_snapshot_*(). */
static void test_no_regions(void **state)
{
	(void)state;
	struct engine *e0 = writer(0);
	int rc, parts[NREG] = {0};
	size_t nreg = 9;

	fill(e0, 0, 1, 20);
	assert_int_equal(region_snapshot_create(ts->store, "cut", NULL, &nreg), 0);
	assert_int_equal(nreg, 0);
	assert_int_equal(region_snapshot_list(ts->store, count_part, parts), 0);
	assert_int_equal(parts[0], 1);
	struct engine *s = at_snapshot(0, "cut", &rc);
	assert_int_equal(rc, 0);
	expect_round(s, 0, 1, 20);
	assert_int_equal(engine_close(s), 0);
	assert_int_equal(region_snapshot_delete(ts->store, "cut"), 0);
	assert_int_equal(engine_close(e0), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_cut_kept_by_each_gc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_leftover_part, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_regions, setup, teardown),
	};
	char name[64];

	kind = tu_kind_arg(argc, argv, kind);
	snprintf(name, sizeof(name), "region_snapshot/%s", kind);
	return cmocka_run_group_tests_name(name, tests, NULL, NULL) ? 1 : 0;
}
