/*
 * test_check.c - the offline store verifier (engine/check/check.c).
 *
 * Every case builds a fresh local store through the engine API: inline
 * values and blobs, a flush (so there are SSTables referencing packs),
 * then more writes left in the uncovered WAL (one of them a blob), with
 * the writer still open, so the check runs against a live store.  A
 * clean store must pass, shallow and deep.  Then one object of each kind
 * is damaged (a flipped byte in a WAL entry, a pack header, pack data, an
 * SSTable data block, the newest manifest; a referenced pack deleted) and
 * the check must fail with -EUCLEAN and a problem naming that object.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "engine.h"
#include "maint.h"
#include "store.h"

#define MAXP 64

/* Problems collected by the callback. */
struct found {
	char text[MAXP][640]; /* "object: msg" */
	int n;
	uint64_t ssts, wals, packs;
};

static void collect(void *arg, const struct check_event *ev)
{
	struct found *f = arg;
	if (ev->kind == CHECK_SST)
		f->ssts++;
	else if (ev->kind == CHECK_WAL)
		f->wals++;
	else if (ev->kind == CHECK_PACK)
		f->packs++;
	if (ev->kind != CHECK_PROBLEM)
		return;
	assert_non_null(ev->object);
	assert_true(ev->err < 0);
	if (f->n < MAXP)
		snprintf(f->text[f->n++], sizeof(f->text[0]), "%s: %s", ev->object, ev->msg);
	fprintf(stderr, "  problem: %s: %s\n", ev->object, ev->msg);
}

/* True when some problem names object (as the object or in the message). */
static bool names(const struct found *f, const char *object)
{
	for (int i = 0; i < f->n; i++)
		if (strstr(f->text[i], object))
			return true;
	return false;
}

struct fixture {
	char dir[64];
	struct store *st;
	struct engine *e; /* left open: its last group stays in the uncovered WAL */
};

static void put_many(struct engine *e, const char *pfx, int n, int blobs)
{
	char key[32];
	static char val[10000];
	memset(val, 'v', sizeof(val));
	for (int i = 0; i < n; i++) {
		snprintf(key, sizeof(key), "%s%04d", pfx, i);
		size_t vlen = i < blobs ? 6000 + (size_t)i : 20 + (size_t)i;
		val[0] = (char)i;
		assert_int_equal(engine_put(e, key, strlen(key), val, vlen, 0, NULL), 0);
	}
	assert_int_equal(engine_sync(e), 0);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct engine_opts o;
	struct engine *e;
	struct engine_stats es;

	assert_non_null(fx);
	strcpy(fx->dir, "/tmp/test_check.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	assert_int_equal(store_open_local(fx->dir, &fx->st), 0);
	engine_opts_default(&o);
	o.cadence_ms = 5;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.repack_below_pct = ENGINE_GC_OFF;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* groups' packs (flush packs: test_flush_pack) */
	assert_int_equal(engine_open(fx->st, &o, &e), 0);
	put_many(e, "a", 60, 5);
	assert_int_equal(maint_flush_now(e), 0);
	put_many(e, "b", 20, 3);
	engine_get_stats(e, &es);
	assert_true(es.wal_next > es.wal_covered);
	fx->e = e;
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];
	(void)engine_close(fx->e); /* may fail: the test damaged its objects */
	store_close(fx->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	assert_int_equal(system(cmd), 0);
	free(fx);
	return 0;
}

/* First (last with last) listed key with prefix into out. */
struct pick {
	char key[256];
	bool last;
	bool found;
};

static int pick_cb(void *arg, const char *key, uint64_t size)
{
	struct pick *p = arg;
	(void)size;
	if (!p->found || p->last)
		snprintf(p->key, sizeof(p->key), "%s", key);
	p->found = true;
	return 0;
}

static void pick(struct store *st, const char *prefix, bool last, char *out)
{
	struct pick p = {.last = last};
	assert_int_equal(store_list(st, prefix, NULL, 0, pick_cb, &p), 0);
	assert_true(p.found);
	strcpy(out, p.key);
}

/* Flip one byte of object key at offset off (from the end when off < 0). */
static void flip(struct store *st, const char *key, long off)
{
	void *buf;
	size_t n;
	assert_int_equal(store_get(st, key, 0, STORE_TO_END, &buf, &n), 0);
	size_t at = off < 0 ? n - (size_t)-off : (size_t)off;
	assert_true(at < n);
	((uint8_t *)buf)[at] ^= 0x5a;
	assert_int_equal(store_put(st, key, buf, n), 0);
	free(buf);
}

static void expect_problem(struct store *st, bool deep, const char *object)
{
	struct found f = {0};
	struct check_opts o = {.deep = deep, .fn = collect, .arg = &f};
	struct check_report r;
	assert_int_equal(check_store(st, &o, &r), -EUCLEAN);
	assert_true(r.problems >= 1);
	assert_int_equal((int)r.problems, f.n);
	if (!names(&f, object))
		fail_msg("no problem names %s", object);
}

static void test_clean(void **state)
{
	struct fixture *fx = *state;
	for (int deep = 0; deep < 2; deep++) {
		struct found f = {0};
		struct check_opts o = {.deep = deep, .fn = collect, .arg = &f};
		struct check_report r;
		assert_int_equal(check_store(fx->st, &o, &r), 0);
		assert_int_equal(r.problems, 0);
		assert_int_equal(f.n, 0);
		assert_true(r.manifest_version >= 1);
		assert_true(r.ssts.objects >= 1);
		assert_true(r.sst_entries >= 60);
		assert_true(r.wal_uncovered >= 1);
		assert_true(r.packs.objects >= 2);
		assert_true(r.blobs >= 8);
		assert_true(r.pack_live_bytes > 0);
		assert_true(r.pack_live_bytes <= r.pack_data_bytes);
		assert_int_equal(f.ssts, r.ssts.objects);
		assert_int_equal(f.packs, r.packs.objects);
		assert_int_equal(f.wals, r.wal_uncovered);
	}
	/* NULL options and report are allowed. */
	assert_int_equal(check_store(fx->st, NULL, NULL), 0);
}

static void test_empty_store(void **state)
{
	struct fixture *fx = *state;
	char dir[64], cmd[128];
	struct store *st;
	struct check_report r;
	(void)fx;
	strcpy(dir, "/tmp/test_check_e.XXXXXX");
	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open_local(dir, &st), 0);
	assert_int_equal(check_store(st, NULL, &r), 0);
	assert_int_equal(r.manifest_version, 0);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_corrupt_wal(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	pick(fx->st, "wal/", true, key);
	flip(fx->st, key, -1);
	expect_problem(fx->st, false, key);
}

static void test_corrupt_wal_header(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	pick(fx->st, "wal/", true, key);
	flip(fx->st, key, 0);
	expect_problem(fx->st, false, key);
}

static void test_corrupt_pack_header(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	pick(fx->st, "pack/", false, key);
	flip(fx->st, key, 9);
	expect_problem(fx->st, false, key);
}

static void test_corrupt_pack_data(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	struct check_report r;
	pick(fx->st, "pack/", false, key);
	flip(fx->st, key, 40);
	/* Blob data is only read by the deep check. */
	assert_int_equal(check_store(fx->st, NULL, &r), 0);
	expect_problem(fx->st, true, key);
}

static void test_corrupt_sst(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	pick(fx->st, "sst/", false, key);
	flip(fx->st, key, 10);
	expect_problem(fx->st, false, key);
}

static void test_corrupt_manifest(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	pick(fx->st, "manifest/", true, key);
	flip(fx->st, key, 30);
	expect_problem(fx->st, false, key);
}

static void test_missing_pack(void **state)
{
	struct fixture *fx = *state;
	char key[256];
	pick(fx->st, "pack/", false, key);
	assert_int_equal(store_delete(fx->st, key), 0);
	expect_problem(fx->st, false, key);
}

static void test_orphan(void **state)
{
	struct fixture *fx = *state;
	struct check_report r, r2;
	assert_int_equal(check_store(fx->st, NULL, &r), 0);
	assert_int_equal(store_put(fx->st, "sst/00000000000000000099-00000000000000000099", "x", 1),
	                 0);
	/* An orphan is reported but is not a problem. */
	assert_int_equal(check_store(fx->st, NULL, &r2), 0);
	assert_int_equal(r2.orphans.objects, r.orphans.objects + 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_store, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_wal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_wal_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_pack_header, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_pack_data, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_sst, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_manifest, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_missing_pack, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_orphan, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
