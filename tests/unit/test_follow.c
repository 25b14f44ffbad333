/*
 * test_follow.c - followers and snapshots of the engine (engine/follow/follow.c,
 * engine/core/snapshot.c) on the local store: a writer engine and read-only
 * followers on the same directory (each with its own store handle).
 *
 * Followers are driven by follow_poll_now() (their interval is an hour), so
 * what happens between two polls is decided by the test, except in
 * follow_thread, which lets the follower's own thread poll.  Sections:
 *   ---- follow: entries, deletes, the callback, torn-free batches
 *   ---- flush, compaction and GC under a follower; memory bound
 *   ---- a follower that fell behind the collected WAL jumps
 *   ---- a gap: the follower goes on where the next writer did
 *   ---- the thread by itself, idle requests
 *   ---- snapshots
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
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "engine_int.h"
#include "follow.h"
#include "maint.h"
#include "store.h"

static char g_dir[256];

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof(g_dir), "/tmp/test_follow.XXXXXX");
	assert_non_null(mkdtemp(g_dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[300];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static struct store *open_store(void)
{
	struct store *st = NULL;
	assert_int_equal(store_open_local(g_dir, &st), 0);
	return st;
}

/* A writer with small MemTables (many flushes), no GC thread (passes by hand, no grace). */
static struct engine *open_writer(struct store *st)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 5;
	o.inline_max = 1024;
	o.cache_bytes = 1 << 20;
	o.memtable_max_bytes = 128 << 10;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.gc_grace_sec = ENGINE_GC_NO_GRACE;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static struct engine *open_follower_frozen(struct store *st, unsigned interval_ms,
                                           uint64_t max_frozen_bytes);

static struct engine *open_follower(struct store *st, unsigned interval_ms)
{
	return open_follower_frozen(st, interval_ms, 0);
}

/* max_frozen_bytes: 0 for the default */
static struct engine *open_follower_frozen(struct store *st, unsigned interval_ms,
                                           uint64_t max_frozen_bytes)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	if (max_frozen_bytes)
		o.max_frozen_bytes = max_frozen_bytes;
	o.read_only = true;
	o.follow = true;
	o.follow_interval_ms = interval_ms;
	o.follow_max_interval_ms = interval_ms;
	o.cache_bytes = 1 << 20;
	o.memtable_max_bytes = 128 << 10;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

/* Value of key i in generation gen: inline (short) or a blob (>= 1024 bytes) by i. */
static size_t make_value(int i, int gen, char *buf, size_t cap)
{
	size_t n = (i % 3 == 0) ? 1500 + (size_t)(i % 7) * 100 : 20 + (size_t)(i % 13);
	assert_true(n <= cap);
	for (size_t k = 0; k < n; k++)
		buf[k] = (char)('a' + (i * 31 + gen * 7 + (int)k) % 26);
	return n;
}

static void key_of(int i, char *k)
{
	snprintf(k, 32, "key%06d", i);
}

static void put_range(struct engine *w, int from, int to, int gen)
{
	char k[32], v[4096];
	for (int i = from; i < to; i++) {
		key_of(i, k);
		size_t n = make_value(i, gen, v, sizeof(v));
		assert_int_equal(engine_put(w, k, strlen(k), v, n, 0, NULL), 0);
	}
	assert_int_equal(engine_sync(w), 0);
}

/* Key i holds generation gen (gen < 0: absent). */
static void check_key(struct engine *e, int i, int gen)
{
	char k[32], v[4096];
	void *got = NULL;
	size_t n = 0;
	key_of(i, k);
	int rc = engine_get(e, k, strlen(k), &got, &n);
	if (gen < 0) {
		if (rc != -ENOENT)
			fail_msg("%s: expected absent, got rc %d", k, rc);
		return;
	}
	if (rc != 0)
		fail_msg("%s: expected generation %d, got rc %d", k, gen, rc);
	size_t want = make_value(i, gen, v, sizeof(v));
	assert_int_equal(n, want);
	assert_memory_equal(got, v, want);
	free(got);
}

/*
 * A scan of the whole follower in the state at seq at (0: the current one): exactly keys
 * [0, n) with generation gen(i), others absent.
 */
static void check_scan_at(struct engine *e, uint64_t at, int n, int (*gen)(int i))
{
	struct engine_iter *it = NULL;
	int want = 0, rc;
	for (; want < n && gen(want) < 0; want++)
		;
	for (rc = at ? engine_iter_new_at(e, at, NULL, 0, NULL, 0, &it)
	             : engine_iter_new(e, NULL, 0, NULL, 0, &it);
	     !rc && engine_iter_valid(it); engine_iter_next(it)) {
		size_t kn;
		const char *k = engine_iter_key(it, &kn);
		char ek[32];
		if (want >= n)
			fail_msg("extra key %.*s", (int)kn, k);
		key_of(want, ek);
		if (kn != strlen(ek) || memcmp(k, ek, kn))
			fail_msg("scan: got %.*s, expected %s", (int)kn, k, ek);
		const void *v;
		size_t vn;
		char ev[4096];
		assert_int_equal(engine_iter_value(it, &v, &vn), 0);
		size_t en = make_value(want, gen(want), ev, sizeof(ev));
		assert_int_equal(vn, en);
		assert_memory_equal(v, ev, en);
		for (want++; want < n && gen(want) < 0; want++)
			;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(engine_iter_status(it), 0);
	engine_iter_free(it);
	assert_int_equal(want, n);
}

static void check_scan(struct engine *e, int n, int (*gen)(int i))
{
	check_scan_at(e, 0, n, gen);
}

/* Key i holds generation gen (< 0: absent) in the state at seq at (engine_get_at()). */
static void check_key_at(struct engine *e, uint64_t at, int i, int gen)
{
	char k[32], v[4096];
	void *got = NULL;
	size_t n = 0;
	key_of(i, k);
	int rc = engine_get_at(e, at, k, strlen(k), &got, &n);
	if (gen < 0) {
		if (rc != -ENOENT)
			fail_msg("%s at %" PRIu64 ": expected absent, got rc %d", k, at, rc);
		return;
	}
	if (rc != 0)
		fail_msg("%s at %" PRIu64 ": expected generation %d, got rc %d", k, at, gen, rc);
	size_t want = make_value(i, gen, v, sizeof(v));
	assert_int_equal(n, want);
	assert_memory_equal(got, v, want);
	free(got);
}

static int g_gen_all0(int i)
{
	(void)i;
	return 0;
}

/* second state: odd keys deleted, keys divisible by 4 rewritten (generation 1) */
static int g_gen_mixed(int i)
{
	if (i % 2)
		return -1;
	return i % 4 == 0 ? 1 : 0;
}

/* ---- follow: entries, deletes, the callback ---- */

struct cb_count {
	size_t keys;  /* keys handed over */
	size_t calls; /* calls */
	size_t alls;  /* calls with all */
};

static void count_cb(void *arg, const struct engine_key *keys, size_t n, bool all)
{
	struct cb_count *c = arg;
	(void)keys;
	c->calls++;
	c->keys += n;
	if (all)
		c->alls++;
}

static void test_follow_basic(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store();
	struct engine *w = open_writer(ws);
	put_range(w, 0, 50, 0);
	struct engine *f = open_follower(fst, 3600000);
	struct cb_count cc = {0};
	engine_follow_set_fn(f, count_cb, NULL, &cc);
	for (int i = 0; i < 50; i++)
		check_key(f, i, 0); /* from the open's replay */
	put_range(w, 50, 300, 0);
	check_key(f, 100, -1); /* not polled yet */
	assert_int_equal(follow_poll_now(f), 0);
	check_scan(f, 300, g_gen_all0);
	assert_true(cc.keys >= 250);
	/* deletes and overwrites in batches */
	struct engine_batch *b = NULL;
	assert_int_equal(engine_batch_new(&b), 0);
	for (int i = 0; i < 300; i++) {
		char k[32], v[4096];
		key_of(i, k);
		if (i % 2)
			assert_int_equal(engine_batch_delete(b, k, strlen(k)), 0);
		else if (i % 4 == 0) {
			size_t n = make_value(i, 1, v, sizeof(v));
			assert_int_equal(engine_batch_put(b, k, strlen(k), v, n), 0);
		}
		if (engine_batch_count(b) >= 20) {
			assert_int_equal(engine_write(w, b, 0, NULL), 0);
			engine_batch_clear(b);
		}
	}
	assert_int_equal(engine_write(w, b, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	engine_batch_free(b);
	assert_int_equal(follow_poll_now(f), 0);
	check_scan(f, 300, g_gen_mixed);
	struct engine_stats s;
	engine_get_stats(f, &s);
	assert_true(s.following);
	assert_true(s.follow_entries > 0);
	assert_int_equal(s.follow_errors, 0);
	engine_follow_set_fn(f, NULL, NULL, NULL);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
}

/*
 * The gate brackets each publish: at hold the entry's key is not readable yet, the
 * callback runs inside the gate and sees it, and every hold is released.  The writer
 * commits one key per WAL entry, so the j-th gate is key j's entry.
 */
struct gate_log {
	struct engine *f;
	int holds, releases, calls; /* gate true / false, callbacks */
	bool held;                  /* inside the gate now */
	int bad;                    /* broken expectations */
};

static void gate_cb(void *arg, bool hold)
{
	struct gate_log *g = arg;
	if (hold) {
		char k[32];
		void *v = NULL;
		size_t n = 0;
		key_of(g->holds, k);
		if (g->held || engine_get(g->f, k, strlen(k), &v, &n) != -ENOENT)
			g->bad++; /* nested, or published before the gate */
		free(v);
		g->held = true;
		g->holds++;
	} else {
		if (!g->held)
			g->bad++;
		g->held = false;
		g->releases++;
	}
}

static void gate_keys_cb(void *arg, const struct engine_key *keys, size_t n, bool all)
{
	struct gate_log *g = arg;
	char k[32];
	void *v = NULL;
	size_t vn = 0;
	key_of(g->holds - 1, k);
	if (all || !g->held || n != 1 || keys[0].n != strlen(k) ||
	    memcmp(keys[0].p, k, strlen(k)) || engine_get(g->f, k, strlen(k), &v, &vn) != 0)
		g->bad++;
	free(v);
	g->calls++;
}

static void test_follow_gate(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store();
	struct engine *w = open_writer(ws);
	struct engine *f = open_follower(fst, 3600000);
	struct gate_log g = {.f = f};
	engine_follow_set_fn(f, gate_keys_cb, gate_cb, &g);
	for (int i = 0; i < 20; i++)
		put_range(w, i, i + 1, 0); /* engine_sync: one entry each */
	assert_int_equal(follow_poll_now(f), 0);
	engine_follow_set_fn(f, NULL, NULL, NULL);
	assert_int_equal(g.bad, 0);
	assert_int_equal(g.holds, 20);
	assert_int_equal(g.releases, 20);
	assert_int_equal(g.calls, 20);
	assert_false(g.held);
	check_scan(f, 20, g_gen_all0);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
}

/* ---- flush, compaction and GC under a follower; memory bound ---- */

static void test_follow_flush_compact_gc(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store();
	struct engine *w = open_writer(ws);
	struct engine *f = open_follower(fst, 3600000);
	struct engine_stats s;
	uint64_t max_frozen = 0;
	for (int round = 0; round < 6; round++) {
		put_range(w, round * 400, (round + 1) * 400, 0);
		assert_int_equal(follow_poll_now(f), 0);
		if (round % 2 == 1) {
			assert_int_equal(maint_flush_now(w), 0);
			assert_int_equal(maint_compact_now(w), 0);
		}
		assert_int_equal(maint_gc_now(w, NULL), 0);
		assert_int_equal(follow_poll_now(f), 0);
		engine_get_stats(f, &s);
		if (s.frozen_count > max_frozen)
			max_frozen = s.frozen_count;
		check_scan(f, (round + 1) * 400, g_gen_all0);
	}
	assert_int_equal(maint_flush_now(w), 0);
	assert_int_equal(maint_gc_now(w, NULL), 0);
	assert_int_equal(follow_poll_now(f), 0);
	assert_int_equal(follow_poll_now(f), 0);
	engine_get_stats(f, &s);
	print_message("follower: %" PRIu64 " manifests installed, %" PRIu64
	              " jumps, frozen max %" PRIu64 ", now %" PRIu64 " frozen, MemTable %" PRIu64
	              " bytes, %" PRIu64 " tables\n",
	              s.follow_manifests, s.follow_jumps, max_frozen, s.frozen_count,
	              s.memtable_bytes, s.sst_count);
	assert_true(s.follow_manifests >= 3);
	/* everything is in tables now: the follower holds no frozen MemTable */
	assert_int_equal(s.frozen_count, 0);
	assert_int_equal(s.follow_errors, 0);
	check_scan(f, 2400, g_gen_all0);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
}

/*
 * Earlier states (engine_seq(), engine_get_at(), engine_iter_new_at()): a follower reads the
 * state at a sequence it saw, exactly, while it applies newer entries and after it installed
 * the writer's next manifests (the views they replaced are kept), until ENGINE_OLD_VIEWS
 * newer installs dropped it: then -ESTALE.  A writer's engine refuses them (-EINVAL).
 */
static void test_follow_earlier_states(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store();
	struct engine *w = open_writer(ws);
	struct engine *f = open_follower(fst, 3600000);
	/* a follower whose budget for kept views (half of max_frozen_bytes) holds none */
	struct store *fst2 = open_store();
	struct engine *f2 = open_follower_frozen(fst2, 3600000, 64 << 10);
	void *v = NULL;
	size_t vn = 0;
	put_range(w, 0, 300, 0);
	assert_int_equal(follow_poll_now(f), 0);
	assert_int_equal(follow_poll_now(f2), 0);
	uint64_t s0 = engine_seq(f), s0b = engine_seq(f2);
	check_key_at(f2, s0b, 1, 0);
	assert_int_equal(engine_get_at(w, engine_seq(w), "key000001", 9, &v, &vn), -EINVAL);
	/* second state: odd keys deleted, keys divisible by 4 rewritten */
	struct engine_batch *b = NULL;
	assert_int_equal(engine_batch_new(&b), 0);
	for (int i = 0; i < 300; i++) {
		char k[32], val[4096];
		key_of(i, k);
		if (i % 2) {
			assert_int_equal(engine_batch_delete(b, k, strlen(k)), 0);
		} else if (i % 4 == 0) {
			size_t n = make_value(i, 1, val, sizeof(val));
			assert_int_equal(engine_batch_put(b, k, strlen(k), val, n), 0);
		}
	}
	assert_int_equal(engine_write(w, b, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	engine_batch_free(b);
	assert_int_equal(follow_poll_now(f), 0);
	uint64_t s1 = engine_seq(f);
	assert_true(s1 > s0);
	check_scan_at(f, s0, 300, g_gen_all0);
	check_scan_at(f, s1, 300, g_gen_mixed);
	check_key_at(f, s0, 1, 0);
	check_key_at(f, s1, 1, -1);
	check_key_at(f, s0, 4, 0);
	check_key_at(f, s1, 4, 1);
	/* the writer flushes: the follower installs its manifest and keeps the view it replaced */
	struct engine_stats st;
	engine_get_stats(f, &st);
	uint64_t mans = st.follow_manifests;
	assert_int_equal(maint_flush_now(w), 0);
	assert_int_equal(follow_poll_now(f), 0);
	assert_int_equal(follow_poll_now(f), 0);
	engine_get_stats(f, &st);
	assert_true(st.follow_manifests > mans);
	check_scan_at(f, s0, 300, g_gen_all0);
	engine_get_stats(f2, &st);
	mans = st.follow_manifests;
	assert_int_equal(follow_poll_now(f2), 0);
	assert_int_equal(follow_poll_now(f2), 0);
	engine_get_stats(f2, &st);
	assert_true(st.follow_manifests > mans);
	assert_int_equal(engine_get_at(f2, s0b, "key000001", 9, &v, &vn), -ESTALE);
	check_key(f2, 4, 1);
	assert_int_equal(engine_close(f2), 0);
	store_close(fst2);
	check_scan_at(f, s1, 300, g_gen_mixed);
	check_scan(f, 300, g_gen_mixed);
	/* each further install (after an entry) keeps one more view; the oldest go */
	int installs = 1;
	for (int round = 0; round < 3 * ENGINE_OLD_VIEWS; round++) {
		put_range(w, 1000 + round, 1001 + round, 0);
		assert_int_equal(follow_poll_now(f), 0);
		engine_get_stats(f, &st);
		mans = st.follow_manifests;
		assert_int_equal(maint_flush_now(w), 0);
		assert_int_equal(follow_poll_now(f), 0);
		assert_int_equal(follow_poll_now(f), 0);
		engine_get_stats(f, &st);
		if (st.follow_manifests > mans)
			installs++;
		int rc = engine_get_at(f, s0, "key000001", 9, &v, &vn);
		free(v);
		v = NULL;
		if (installs <= ENGINE_OLD_VIEWS) {
			assert_int_equal(rc, 0); /* still held */
		} else {
			assert_int_equal(rc, -ESTALE);
			struct engine_iter *it = NULL;
			assert_int_equal(engine_iter_new_at(f, s0, NULL, 0, NULL, 0, &it), -ESTALE);
			break;
		}
	}
	print_message("%d installs; the state before them: -ESTALE after %d\n", installs,
	              ENGINE_OLD_VIEWS);
	assert_true(installs > ENGINE_OLD_VIEWS);
	check_key(f, 1, -1); /* the current state is whole */
	check_key(f, 4, 1);
	check_key(f, 1000, 0);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
}

/* ---- a follower that fell behind the collected WAL jumps ---- */

static void test_follow_behind(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store();
	struct engine *w = open_writer(ws);
	put_range(w, 0, 100, 0);
	struct engine *f = open_follower(fst, 3600000);
	struct cb_count cc = {0};
	engine_follow_set_fn(f, count_cb, NULL, &cc);
	/* while the follower sleeps: many flushes, then GC deletes the WAL it needs next */
	for (int round = 0; round < 6; round++) {
		put_range(w, 100 + round * 300, 100 + (round + 1) * 300, round % 2);
		assert_int_equal(maint_flush_now(w), 0);
	}
	assert_int_equal(maint_compact_now(w), 0);
	assert_int_equal(maint_gc_now(w, NULL), 0);
	assert_int_equal(maint_gc_now(w, NULL), 0);
	put_range(w, 1900, 2000, 0);
	assert_int_equal(follow_poll_now(f), 0);
	struct engine_stats s;
	engine_get_stats(f, &s);
	print_message("behind: %" PRIu64 " jumps, %" PRIu64 " manifests, %" PRIu64 " entries\n",
	              s.follow_jumps, s.follow_manifests, s.follow_entries);
	assert_true(s.follow_jumps >= 1);
	assert_true(cc.alls >= 1);
	for (int i = 0; i < 2000; i++)
		check_key(f, i, i >= 100 && i < 1900 ? ((i - 100) / 300) % 2 : 0);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
}

/*
 * ---- a gap: the follower goes on where the next writer did ----
 *
 * A writer crashed with an entry missing before one that landed (entries in
 * flight land in any order).  The next writer's fence fills the gap, so a
 * follower reads on without a gap and ignores the older entry after it.  A
 * second follower meets the gap as a writer of an earlier version left it
 * (its fence after the highest listed position, the gap never filled: here
 * by deleting the new writer's fence there): it waits until a newer-epoch
 * entry is listed after the gap, then skips what that writer ignored.
 */
static void test_follow_gap(void **state)
{
	(void)state;
	struct store *ws = open_store(), *w2s = open_store(), *fst = open_store(),
	             *f2st = open_store();
	struct engine *w = open_writer(ws);
	put_range(w, 0, 5, 0);
	struct engine *f = open_follower(fst, 3600000), *f2 = open_follower(f2st, 3600000);
	check_key(f, 4, 0);
	check_key(f2, 4, 0);
	/* two more groups, then the first of them is lost from the store: a gap */
	struct engine_stats s;
	engine_get_stats(w, &s);
	uint64_t gap = s.wal_next;
	put_range(w, 5, 6, 0);
	put_range(w, 6, 7, 0);
	char name[64];
	snprintf(name, sizeof(name), "wal/%020" PRIu64, gap);
	assert_int_equal(store_delete(ws, name), 0);
	/* a new writer claims: its replay stops at the gap, its fence fills it */
	struct engine *w2 = open_writer(w2s);
	check_key(w2, 5, -1);
	check_key(w2, 6, -1);
	put_range(w2, 7, 9, 0);
	assert_int_equal(follow_poll_now(f), 0);
	engine_get_stats(f, &s);
	assert_int_equal(s.follow_gaps, 0);
	/* the follower shows what the new writer shows: not the entries after the gap */
	for (int i = 0; i < 9; i++)
		check_key(f, i, i == 5 || i == 6 ? -1 : 0);
	/* the gap as an earlier version left it, for the second follower */
	assert_int_equal(store_delete(ws, name), 0);
	assert_int_equal(follow_poll_now(f2), 0);
	assert_int_equal(follow_poll_now(f2), 0);
	assert_int_equal(follow_poll_now(f2), 0);
	engine_get_stats(f2, &s);
	print_message("gap at %" PRIu64 ": %" PRIu64 " gap polls, %" PRIu64 " manifests\n", gap,
	              s.follow_gaps, s.follow_manifests);
	assert_true(s.follow_gaps >= 1);
	for (int i = 0; i < 9; i++)
		check_key(f2, i, i == 5 || i == 6 ? -1 : 0);
	assert_int_equal(engine_close(f2), 0);
	store_close(f2st);
	assert_int_equal(engine_close(f), 0);
	/* w2's fence at the gap is gone from the store: its close notices (engine/check/watch.c) */
	assert_int_equal(engine_close(w2), -EIO);
	assert_int_equal(engine_close(w), -ESTALE); /* fenced by w2 */
	store_close(ws);
	store_close(w2s);
	store_close(fst);
}

/*
 * A group partly in the writer's table: the MemTable freezes at its size in the middle of
 * a group (the writer's next puts may still join the group before its committer closes
 * it), and the flush covers the WAL up to that group, whose ops before the freeze are in
 * the table.  A follower that installs the manifest by an idle poll (the manifest probe
 * alone) must not show those ops without the rest of their group: the keys it shows end
 * where a WAL entry ends.  The entry ends come from a second follower applying the WAL
 * entry by entry (its callback).  Each round writes 180 KB (one freeze at 128 KiB); whether
 * puts join the group after the freeze races the committer (the first entry's end, printed).
 */
struct pg_ends {
	int round;    /* keys counted are those of this round ("pgRR-...") */
	int seen;     /* keys of the round applied so far */
	int ends[64]; /* seen at the end of each entry of the round */
	int n;
};

static void pg_cb(void *arg, const struct engine_key *keys, size_t n, bool all)
{
	struct pg_ends *p = arg;
	char pfx[16];
	int pn = snprintf(pfx, sizeof(pfx), "pg%02d-", p->round);
	(void)all;
	for (size_t i = 0; i < n; i++)
		if (keys[i].n > (size_t)pn && !memcmp(keys[i].p, pfx, (size_t)pn))
			p->seen++;
	if (p->n < 64)
		p->ends[p->n++] = p->seen;
}

static struct engine *open_writer_slow(struct store *st)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 500; /* groups stay open while the keys go in */
	o.inline_max = 4096;
	o.cache_bytes = 1 << 20;
	o.memtable_max_bytes = 128 << 10;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.gc_grace_sec = ENGINE_GC_NO_GRACE;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static void test_follow_partial_group(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store(), *rst = open_store();
	struct engine *w = open_writer_slow(ws);
	struct engine *f = open_follower(fst, 3600000);
	struct engine *r = open_follower(rst, 3600000);
	struct pg_ends ends = {0};
	engine_follow_set_fn(r, pg_cb, NULL, &ends);
	char v[3000];
	memset(v, 'v', sizeof(v));
	const int nkeys = 60;
	for (int round = 0; round < 8; round++) {
		struct engine_stats st;
		assert_int_equal(follow_poll_now(f), 0);
		assert_int_equal(follow_poll_now(r), 0);
		engine_get_stats(w, &st);
		uint64_t flushes = st.flushes;
		for (int i = 0; i < nkeys; i++) {
			char k[32];
			snprintf(k, sizeof(k), "pg%02d-%04d", round, i);
			assert_int_equal(engine_put(w, k, strlen(k), v, sizeof(v), 0, NULL), 0);
		}
		assert_int_equal(engine_sync(w), 0);
		/* the flusher thread writes the frozen MemTable: wait for its manifest */
		uint64_t t0 = now_ms();
		do {
			engine_get_stats(w, &st);
			if (st.flushes > flushes && st.frozen_count == 0)
				break;
			struct timespec ts = {0, 2000000};
			nanosleep(&ts, NULL);
		} while (now_ms() - t0 < 30000);
		assert_true(st.flushes > flushes);
		assert_int_equal(follow_poll_manifest_now(f), 0);
		int shown = 0;
		for (int i = 0; i < nkeys; i++) {
			char k[32];
			void *got = NULL;
			size_t n = 0;
			snprintf(k, sizeof(k), "pg%02d-%04d", round, i);
			if (engine_get(f, k, strlen(k), &got, &n) == 0)
				shown = i + 1;
			free(got);
		}
		ends = (struct pg_ends){.round = round};
		assert_int_equal(follow_poll_now(r), 0);
		assert_int_equal(ends.seen, nkeys);
		bool at_end = shown == 0;
		for (int i = 0; i < ends.n; i++)
			at_end = at_end || ends.ends[i] == shown;
		print_message("round %d: %d entries, the first ends after key %d; the follower "
		              "showed %d keys after the manifest\n",
		              round, ends.n, ends.ends[0], shown);
		if (!at_end)
			fail_msg(
			    "round %d: after installing the manifest the follower shows the first "
			    "%d keys, inside a WAL entry (the first ends after %d)",
			    round, shown, ends.ends[0]);
	}
	engine_follow_set_fn(r, NULL, NULL, NULL);
	assert_int_equal(engine_close(r), 0);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
	store_close(rst);
}

/* ---- the thread by itself, idle requests ---- */

static void test_follow_thread(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store();
	struct engine *w = open_writer(ws);
	put_range(w, 0, 10, 0);
	struct engine *f = open_follower(fst, 20);
	put_range(w, 10, 20, 0);
	uint64_t deadline = now_ms() + 10000;
	void *v = NULL;
	size_t n;
	while (engine_get(f, "key000019", 9, &v, &n) != 0 && now_ms() < deadline)
		usleep(5000);
	assert_non_null(v);
	free(v);
	check_key(f, 15, 0);
	/* idle: one request per poll at most, and polls at most one per interval */
	struct store_stats a, b;
	struct engine_stats s0, s1;
	engine_get_stats(f, &s0);
	store_get_stats(fst, &a);
	uint64_t t0 = now_ms();
	usleep(500000);
	store_get_stats(fst, &b);
	engine_get_stats(f, &s1);
	uint64_t el = now_ms() - t0;
	uint64_t req = 0;
	for (int i = 0; i < STORE_OP__COUNT; i++)
		req += b.requests[i] - a.requests[i];
	print_message("idle: %" PRIu64 " requests, %" PRIu64 " polls in %" PRIu64 " ms\n", req,
	              s1.follow_polls - s0.follow_polls, el);
	assert_true(req <= s1.follow_polls - s0.follow_polls);
	assert_true(s1.follow_polls - s0.follow_polls <= el / 20 + 2);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(fst);
}

/* ---- snapshots ---- */

struct names {
	char list[8][101];
	int n;
};

static int name_cb(void *arg, const struct engine_snapshot *s)
{
	struct names *ns = arg;
	if (ns->n < 8)
		strcpy(ns->list[ns->n++], s->name);
	return 0;
}

static struct engine *open_snapshot(struct store *st, const char *name, int *rc)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.read_only = true;
	o.snapshot = name;
	o.cache_bytes = 1 << 20;
	*rc = engine_open(st, &o, &e);
	return e;
}

static void test_snapshot(void **state)
{
	(void)state;
	struct store *ws = open_store(), *rs = open_store();
	struct engine *w = open_writer(ws);
	struct engine_snapshot sn;
	int rc;
	put_range(w, 0, 600, 0);
	assert_int_equal(maint_flush_now(w), 0);
	put_range(w, 600, 1000, 0); /* part in tables, part in the WAL only */
	assert_int_equal(engine_snapshot_create(ws, "s1", &sn), 0);
	print_message("snapshot s1: manifest %" PRIu64 ", WAL %" PRIu64 "..%" PRIu64 "\n",
	              sn.manifest, sn.wal_from, sn.wal_end);
	assert_true(sn.wal_end > sn.wal_from);
	assert_int_equal(engine_snapshot_create(ws, "s1", NULL), -EEXIST);
	assert_int_equal(engine_snapshot_create(ws, "../x", NULL), -EINVAL);
	assert_int_equal(engine_snapshot_create(ws, "", NULL), -EINVAL);
	/* the writer rewrites and deletes everything; flushes, compacts, collects */
	for (int round = 0; round < 3; round++) {
		put_range(w, 0, 1000, round + 1);
		assert_int_equal(maint_flush_now(w), 0);
	}
	struct engine_batch *b = NULL;
	assert_int_equal(engine_batch_new(&b), 0);
	for (int i = 0; i < 1000; i++) {
		char k[32];
		key_of(i, k);
		assert_int_equal(engine_batch_delete(b, k, strlen(k)), 0);
	}
	assert_int_equal(engine_write(w, b, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	engine_batch_free(b);
	for (int round = 0; round < 5; round++) {
		assert_int_equal(maint_flush_now(w), 0);
		assert_int_equal(maint_compact_now(w), 0);
		assert_int_equal(maint_gc_now(w, NULL), 0);
	}
	check_key(w, 5, -1);
	/* mounted now, the snapshot is the state at its creation */
	struct engine *r = open_snapshot(rs, "s1", &rc);
	assert_int_equal(rc, 0);
	check_scan(r, 1000, g_gen_all0);
	assert_int_equal(engine_close(r), 0);
	assert_null(open_snapshot(rs, "nope", &rc));
	assert_int_equal(rc, -ENOENT);
	struct names ns = {0};
	assert_int_equal(engine_snapshot_create(ws, "s2", NULL), 0);
	assert_int_equal(engine_snapshot_list(ws, name_cb, &ns), 0);
	assert_int_equal(ns.n, 2);
	assert_string_equal(ns.list[0], "s1");
	assert_string_equal(ns.list[1], "s2");
	/* deleted: the next GC passes free what only it pinned */
	char mname[64];
	struct store_stat ss;
	snprintf(mname, sizeof(mname), "manifest/%020" PRIu64, sn.manifest);
	assert_int_equal(store_head(ws, mname, &ss), 0);
	assert_int_equal(engine_snapshot_delete(ws, "s1"), 0);
	assert_int_equal(engine_snapshot_delete(ws, "s1"), -ENOENT);
	assert_int_equal(maint_gc_now(w, NULL), 0);
	assert_int_equal(store_head(ws, mname, &ss), -ENOENT);
	r = open_snapshot(rs, "s2", &rc);
	assert_int_equal(rc, 0);
	check_key(r, 5, -1);
	assert_int_equal(engine_close(r), 0);
	assert_int_equal(engine_snapshot_delete(ws, "s2"), 0);
	assert_int_equal(engine_close(w), 0);
	store_close(ws);
	store_close(rs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_follow_basic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_gate, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_flush_compact_gc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_earlier_states, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_partial_group, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_behind, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_gap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follow_thread, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
