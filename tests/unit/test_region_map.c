/*
 * test_region_map.c - the region map (engine/region/regmap.c, regmapfmt.c;
 * docs/REGIONS.md "The region map").
 *
 * Run with "local" (suite unit: a local store) or "s3" (suite s3: the S3 server of
 * $S3_ENDPOINT; exit 77 = SKIP without it).  Several threads adding at once stand for
 * several machines creating regions.  The randomized round trip prints its seed
 * (MEMWALFS_SEED replays it).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "check.h"
#include "engine.h"
#include "format.h"
#include "gc.h"
#include "regmap.h"
#include "store.h"
#include "testutil.h"

static const char *kind = "local"; /* tu_store kind of this run */
static struct tu_store *ts;        /* this test's store */

static int setup(void **state)
{
	(void)state;
	assert_int_equal(tu_store_open(kind, &ts), 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	tu_store_close(ts);
	ts = NULL;
	return 0;
}

/* An entry to add: root name in parent, at path. */
static struct region_entry want(uint64_t parent, const char *name, const char *path)
{
	struct region_entry e = {.parent_ino = parent, .since = 1767225600};

	snprintf(e.name, sizeof(e.name), "%s", name);
	snprintf(e.path, sizeof(e.path), "%s", path);
	return e;
}

static uint64_t requests(void)
{
	struct store_stats s;
	uint64_t n = 0;

	store_get_stats(ts->store, &s);
	for (int i = 0; i < STORE_OP__COUNT; i++)
		n += s.requests[i];
	return n;
}

static void put_text(uint64_t version, const char *txt)
{
	char name[FMT_NAME_MAX];

	fmt_regions_name(name, version);
	assert_int_equal(store_put(ts->store, name, txt, strlen(txt)), 0);
}

/* ------------------------------------------------------------------ */

/* No map: version 0, no regions; poll sees nothing. */
static void test_empty(void **state)
{
	(void)state;
	struct region_map m;

	memset(&m, 0xa5, sizeof(m)); /* load writes all of it */
	assert_int_equal(region_map_load(ts->store, &m), 0);
	assert_int_equal(m.version, 0);
	assert_int_equal(m.n, 0);
	assert_int_equal(m.max_rid, 0);
	assert_null(region_map_find(&m, 0));
	assert_null(region_map_find(&m, 1));
	assert_int_equal(region_map_poll(ts->store, &m), 0);
	region_map_free(&m);
	region_map_free(NULL);
}

/* Three regions: rids 1, 2, 3, their root inodes, versions 1..3, one LIST + one GET to load. */
static void test_add_three(void **state)
{
	(void)state;
	struct region_map m = {0}, l = {0};
	const char *names[3] = {"home", "ci", "data"};
	uint32_t rid = 0;

	for (uint32_t i = 0; i < 3; i++) {
		struct region_entry w = want(1, names[i], names[i]);
		w.rid = 77; /* ignored */
		assert_int_equal(region_map_add(ts->store, &w, &m, &rid), 0);
		assert_int_equal(rid, i + 1);
		assert_int_equal(m.version, i + 1);
		assert_int_equal(m.n, i + 1);
		assert_int_equal(m.max_rid, i + 1);
	}
	uint64_t r0 = requests();
	assert_int_equal(region_map_load(ts->store, &l), 0);
	assert_int_equal(requests() - r0, 2); /* one LIST, one GET */
	assert_int_equal(l.version, 3);
	assert_int_equal(l.n, 3);
	for (uint32_t rid2 = 1; rid2 <= 3; rid2++) {
		const struct region_entry *e = region_map_find(&l, rid2);
		assert_non_null(e);
		assert_int_equal(e->rid, rid2);
		assert_int_equal(e->root_ino, (uint64_t)rid2 << 40 | 1);
		assert_int_equal(REGION_OF_INO(e->root_ino), rid2);
		assert_int_equal(e->parent_ino, 1);
		assert_string_equal(e->name, names[rid2 - 1]);
		assert_int_equal(e->since, 1767225600);
		assert_ptr_equal(region_map_find_root(&l, 1, names[rid2 - 1]), e);
	}
	assert_null(region_map_find(&l, 4));
	assert_null(region_map_find_root(&l, 2, "home"));
	/* a second region for the same directory: -EEXIST, the map unchanged */
	struct region_entry dup = want(1, "ci", "/ci again");
	assert_int_equal(region_map_add(ts->store, &dup, &l, &rid), -EEXIST);
	assert_int_equal(l.version, 3);
	/* since 0: now; a region whose parent is in another region */
	struct region_entry w = want(REGION_ROOT_INO(2), "sub", "/ci/sub");
	w.since = 0;
	int64_t t0 = (int64_t)time(NULL);
	assert_int_equal(region_map_add(ts->store, &w, &l, &rid), 0);
	assert_int_equal(rid, 4);
	assert_true(region_map_find(&l, 4)->since >= t0);
	/* invalid entries */
	struct region_entry bad[] = {want(0, "x", "/x"), want(1, "", "/x"),   want(1, "a/b", "/x"),
	                             want(1, ".", "/x"), want(1, "..", "/x"), want(1, "x", "")};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(region_map_add(ts->store, &bad[i], &l, NULL), -EINVAL);
	region_map_free(&m);
	region_map_free(&l);
}

/* Names and paths with spaces, '%', newlines and non-ASCII bytes survive (random bytes). */
static void test_round_trip(void **state)
{
	(void)state;
	uint64_t seed = tu_seed("region_map round trip");
	struct region_map m = {0}, l = {0};
	struct region_entry w[6];
	const char *fixed[] = {
	    "a b", "100%", "line\nbreak", "caf\xc3\xa9 \xff\x01", "%41%%", " lead and trail "};

	srandom((unsigned)seed);
	for (int i = 0; i < 6; i++) {
		w[i] = want(1 + (uint64_t)i, fixed[i], fixed[i]);
		if (i >= 3) { /* random bytes: any but NUL ('/' only in the path) */
			size_t n = 1 + (size_t)random() % 255, pn = 1 + (size_t)random() % 1023;
			for (size_t k = 0; k < n; k++) {
				char c;
				do
					c = (char)(1 + random() % 255);
				while (c == '/');
				w[i].name[k] = c;
			}
			w[i].name[n] = '\0';
			if (!strcmp(w[i].name, ".") || !strcmp(w[i].name, ".."))
				w[i].name[0] = 'x';
			for (size_t k = 0; k < pn; k++)
				w[i].path[k] = (char)(1 + random() % 255);
			w[i].path[pn] = '\0';
		}
		assert_int_equal(region_map_add(ts->store, &w[i], &m, NULL), 0);
	}
	assert_int_equal(region_map_load(ts->store, &l), 0);
	assert_int_equal(l.n, 6);
	for (int i = 0; i < 6; i++) {
		assert_string_equal(l.v[i].name, w[i].name);
		assert_string_equal(l.v[i].path, w[i].path);
		assert_int_equal(l.v[i].parent_ino, w[i].parent_ino);
	}
	/* the text: one line per region, nothing unescaped */
	char *txt = NULL;
	size_t len = 0;
	assert_int_equal(regmap_format(&l, &txt, &len), 0);
	size_t lines = 0;
	for (size_t i = 0; i < len; i++) {
		lines += txt[i] == '\n';
		assert_true(txt[i] == '\n' || (txt[i] >= 0x20 && txt[i] < 0x7f));
	}
	assert_int_equal(lines, 3 + 6);
	assert_non_null(strstr(txt, "name a%20b "));
	assert_non_null(strstr(txt, "name 100%25 "));
	assert_non_null(strstr(txt, "name line%0Abreak "));
	free(txt);
	region_map_free(&m);
	region_map_free(&l);
}

struct adder {
	uint32_t rid;
	int rc;
	int idx;
};

static void *adder_main(void *arg)
{
	struct adder *a = arg;
	struct region_map m = {0};
	char name[32];

	snprintf(name, sizeof(name), "t%d", a->idx);
	struct region_entry w = want(1, name, name);
	a->rc = region_map_add(ts->store, &w, &m, &a->rid);
	region_map_free(&m);
	return NULL;
}

/* Four threads add at once: all succeed, distinct rids, the last map has all four. */
static void test_concurrent(void **state)
{
	(void)state;
	for (int round = 0; round < 3; round++) {
		pthread_t t[4];
		struct adder a[4];
		struct region_map l = {0};
		char name[32];

		for (int i = 0; i < 4; i++) {
			a[i] = (struct adder){.idx = round * 4 + i};
			assert_int_equal(pthread_create(&t[i], NULL, adder_main, &a[i]), 0);
		}
		for (int i = 0; i < 4; i++)
			assert_int_equal(pthread_join(t[i], NULL), 0);
		for (int i = 0; i < 4; i++) {
			assert_int_equal(a[i].rc, 0);
			for (int j = 0; j < i; j++)
				assert_int_not_equal(a[i].rid, a[j].rid);
		}
		assert_int_equal(region_map_load(ts->store, &l), 0);
		assert_int_equal(l.version, (uint64_t)(round + 1) * 4);
		assert_int_equal(l.n, (size_t)(round + 1) * 4);
		assert_int_equal(l.max_rid, (round + 1) * 4);
		for (int i = 0; i < 4; i++) {
			const struct region_entry *e = region_map_find(&l, a[i].rid);
			assert_non_null(e);
			snprintf(name, sizeof(name), "t%d", a[i].idx);
			assert_string_equal(e->name, name);
		}
		region_map_free(&l);
	}
}

/* poll: 0 and exactly one request when nothing changed; 1 and the new map after an add. */
static void test_poll(void **state)
{
	(void)state;
	struct region_map a = {0}, b = {0};
	struct region_entry w1 = want(1, "one", "/one"), w2 = want(1, "two", "/two");

	assert_int_equal(region_map_add(ts->store, &w1, &a, NULL), 0);
	assert_int_equal(region_map_load(ts->store, &b), 0);
	for (int i = 0; i < 3; i++) {
		uint64_t r0 = requests();
		assert_int_equal(region_map_poll(ts->store, &b), 0);
		assert_int_equal(requests() - r0, 1);
	}
	assert_int_equal(region_map_add(ts->store, &w2, &a, NULL), 0); /* another writer */
	assert_int_equal(region_map_poll(ts->store, &b), 1);
	assert_int_equal(b.version, 2);
	assert_int_equal(b.n, 2);
	assert_string_equal(region_map_find(&b, 2)->name, "two");
	uint64_t r0 = requests();
	assert_int_equal(region_map_poll(ts->store, &b), 0);
	assert_int_equal(requests() - r0, 1);
	/* a stale map adds after the newest: rid 3, version 3 */
	struct region_map stale = {0};
	uint32_t rid = 0;
	struct region_entry w3 = want(1, "three", "/three");
	assert_int_equal(region_map_add(ts->store, &w3, &stale, &rid), 0);
	assert_int_equal(rid, 3);
	assert_int_equal(stale.version, 3);
	region_map_free(&a);
	region_map_free(&b);
	region_map_free(&stale);
}

/* A rid is never given again, even when a later version dropped its entry. */
static void test_rid_not_reused(void **state)
{
	(void)state;
	struct region_map m = {0};
	uint32_t rid = 0;

	/* version 1 says rid 5 was given, though it lists only region 2 */
	put_text(1, "memwalfs-regions 1\nversion 1\nmax_rid 5\n"
	            "region 2 root 2199023255553 parent 1 name b since 1 path /b\n");
	struct region_entry w = want(1, "c", "/c");
	assert_int_equal(region_map_add(ts->store, &w, &m, &rid), 0);
	assert_int_equal(rid, 6);
	assert_int_equal(m.max_rid, 6);
	assert_null(region_map_find(&m, 5));
	region_map_free(&m);
}

static const char *const corrupt[] = {
    "",
    "memwalfs-lease 1\nversion 1\nmax_rid 0\n",         /* another magic */
    "memwalfs-regions x\nversion 1\nmax_rid 0\n",       /* bad version number */
    "memwalfs-regions 1\nmax_rid 0\n",                  /* no version */
    "memwalfs-regions 1\nversion 1\n",                  /* no max_rid */
    "memwalfs-regions 1\nversion 2\nmax_rid 0\n",       /* not the name's version */
    "memwalfs-regions 1\nversion 1\nmax_rid 8388608\n", /* max_rid out of range */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a "
    "since 1\n", /* no path */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 2199023255553 parent 1 name a "
    "since 1 path /a\n", /* root in another rid's range */
    "memwalfs-regions 1\nversion 1\nmax_rid 2\nregion 2 root 2199023255553 parent 1 name a "
    "since 1 path /a\nregion 2 root 2199023255553 parent 1 name b since 1 path /b\n", /* twice */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 2 root 2199023255553 parent 1 name a "
    "since 1 path /a\n", /* above max_rid */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a%2 "
    "since 1 path /a\n", /* short escape */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a%00 "
    "since 1 path /a\n", /* NUL */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a%2Fb "
    "since 1 path /a\n", /* '/' in a name */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a\tb "
    "since 1 path /a\n", /* a raw control byte */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a "
    "name b since 1 path /a\n", /* a key twice */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 1 root 1099511627777 parent 1 name a "
    "since 1 path\n",                                   /* a key without its value */
    "memwalfs-regions 1\nversion 1\nmax_rid 9000000\n", /* max_rid beyond 2^23-1 */
    "memwalfs-regions 1\nversion 1\nmax_rid 1\nregion 0 root 1 parent 1 name a since 1 path /a\n",
};

/* Corrupt maps: -EUCLEAN (logged with the name); a newer format: -EPROTONOSUPPORT. */
static void test_corrupt(void **state)
{
	(void)state;
	struct region_map m = {0};

	for (size_t i = 0; i < sizeof(corrupt) / sizeof(corrupt[0]); i++) {
		put_text(1, corrupt[i]);
		int rc = region_map_load(ts->store, &m);
		if (rc != -EUCLEAN)
			fail_msg("corrupt map %zu: %d, not -EUCLEAN", i, rc);
		/* add refuses too: it never builds on a map it cannot read */
		struct region_entry w = want(1, "x", "/x");
		assert_int_equal(region_map_add(ts->store, &w, &m, NULL), -EUCLEAN);
	}
	/* unknown lines and keys are skipped */
	put_text(1, "memwalfs-regions 1\nversion 1\nmax_rid 1\nfuture stuff\n"
	            "region 1 root 1099511627777 color blue parent 1 name a since 1 path /a\n");
	assert_int_equal(region_map_load(ts->store, &m), 0);
	assert_int_equal(m.n, 1);
	assert_string_equal(m.v[0].name, "a");
	region_map_free(&m);
	/* a newer format version */
	put_text(2, "memwalfs-regions 2\nversion 2\nmax_rid 1\n");
	assert_int_equal(region_map_load(ts->store, &m), -EPROTONOSUPPORT);
}

static int load_fn(void *arg)
{
	return region_map_load(ts->store, arg);
}

/* The error is logged with the object's name; fsck reports it. */
static void test_corrupt_logged(void **state)
{
	(void)state;
	struct region_map m = {0};
	struct check_report r;
	char log[4096];

	put_text(1, "memwalfs-regions 1\nversion 1\nmax_rid 0\n");
	assert_int_equal(check_store(ts->store, NULL, &r), 0);
	assert_int_equal(r.regions_version, 1);
	assert_int_equal(r.regions.objects, 1);
	assert_int_equal(r.orphans.objects, 0);
	put_text(2, "garbage\n");
	assert_int_equal(tu_capture_stderr(log, sizeof(log), load_fn, &m), -EUCLEAN);
	assert_non_null(strstr(log, "regions/00000000000000000002"));
	assert_int_equal(check_store(ts->store, NULL, &r), -EUCLEAN);
	assert_int_equal(r.problems, 1);
	put_text(3, "memwalfs-regions 7\nversion 3\nmax_rid 0\n");
	assert_int_equal(tu_capture_stderr(log, sizeof(log), load_fn, &m), -EPROTONOSUPPORT);
	assert_non_null(strstr(log, "regions/00000000000000000003"));
	assert_non_null(strstr(log, "newer"));
}

/* GC: the newest 4 versions stay; older ones go once older than the grace. */
static void test_gc(void **state)
{
	(void)state;
	struct engine_opts o;
	struct engine *e = NULL;
	struct region_map m = {0};
	struct gc_plan plan = {0};
	struct gc_opts go;
	struct gc *g = NULL;
	char name[FMT_NAME_MAX];

	/* GC needs a manifest: a writer's */
	engine_opts_default(&o);
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.store_check_ms = ENGINE_CHECK_OFF;
	o.cache_bytes = 1u << 20;
	assert_int_equal(engine_open(ts->store, &o, &e), 0);
	assert_int_equal(engine_close(e), 0);
	for (int i = 0; i < 7; i++) {
		char n[16];
		snprintf(n, sizeof(n), "d%d", i);
		struct region_entry w = want(1, n, n);
		assert_int_equal(region_map_add(ts->store, &w, &m, NULL), 0);
	}
	assert_int_equal(gc_new(ts->store, &g), 0);
	gc_opts_default(&go);
	assert_int_equal(gc_plan_make(g, &go, &plan), 0); /* all young: none go */
	assert_int_equal(plan.n_region, 0);
	gc_plan_clear(&plan);
	go.now = (int64_t)time(NULL) + 3600;
	assert_int_equal(gc_plan_make(g, &go, &plan), 0);
	assert_int_equal(plan.n_region, 3);
	assert_int_equal(gc_plan_execute(g, &go, &plan, NULL), 0);
	gc_plan_clear(&plan);
	for (uint64_t v = 1; v <= 7; v++) { /* 1..3 went, 4..7 stay */
		struct store_stat sst;
		fmt_regions_name(name, v);
		assert_int_equal(store_head(ts->store, name, &sst), v <= 3 ? -ENOENT : 0);
	}
	gc_free(g);
	/* the map is whole; a stale map still adds after the newest */
	struct region_map l = {0}, stale = {0};
	assert_int_equal(region_map_load(ts->store, &l), 0);
	assert_int_equal(l.version, 7);
	assert_int_equal(l.n, 7);
	assert_int_equal(tu_count_keys(ts->store, FMT_REGIONS_PREFIX), 4);
	struct region_entry w = want(1, "after", "/after");
	uint32_t rid = 0;
	assert_int_equal(region_map_add(ts->store, &w, &stale, &rid), 0);
	assert_int_equal(rid, 8);
	assert_int_equal(stale.version, 8);
	region_map_free(&l);
	region_map_free(&m);
	region_map_free(&stale);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_add_three, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_poll, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_rid_not_reused, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_logged, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
	};
	char name[64];

	kind = tu_kind_arg(argc, argv, kind);
	snprintf(name, sizeof(name), "region_map/%s", kind);
	return cmocka_run_group_tests_name(name, tests, NULL, NULL) ? 1 : 0;
}
