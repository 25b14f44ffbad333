/*
 * test_bell.c - the store's doorbell (engine/region/bell.c) and bell mode of followers
 * (engine/follow/follow.c) on the local store: a writer engine that rings, a follower
 * engine woken by a watcher, each on its own store handle so that the follower's own
 * requests are counted alone.  Short intervals (docs/REGIONS.md "The bell" has the real
 * ones):
 *   - format: the bell object's text (round trip, bad magic, newer version, missing or
 *     bad fields, unknown fields skipped);
 *   - deep_idle: a follower quiet for D goes deep idle and sends nothing; the writer's
 *     commit after the quiet rings, the watcher wakes the follower, which shows it at once;
 *     the follower goes back to deep idle;
 *   - no_bell: a store without a bell (writers that never ring): no deep idle;
 *   - safety: a writer that does not ring (an older binary) on a store with a bell: the
 *     deep-idle follower sees its commit by the safety poll.
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
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "format.h"
#include "lease.h"
#include "store.h"
#include "testutil.h"

static char *g_dir; /* the store's directory (tu_tempdir()) */

static uint64_t now_ms(void)
{
	return tu_now_ns() / 1000000u;
}

static int setup(void **state)
{
	(void)state;
	g_dir = tu_tempdir();
	assert_non_null(g_dir);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	assert_int_equal(tu_rmtree(g_dir), 0);
	free(g_dir);
	return 0;
}

static struct store *open_store(void)
{
	struct store *st = NULL;
	assert_int_equal(store_open_local(g_dir, &st), 0);
	return st;
}

/* ---- the object's text ---- */

static void test_format(void **state)
{
	(void)state;
	struct bell_doc d = {.mount = "0123456789abcdef", .seq = 42, .host = "h\nx"}, got;
	char buf[512];
	size_t len;
	assert_int_equal(bell_doc_format(&d, buf, sizeof(buf), &len), 0);
	assert_string_equal(buf, "memwalfs-bell 1\nmount 0123456789abcdef\nseq 42\nhost h?x\n");
	assert_int_equal(bell_doc_parse("bell", buf, len, &got), 0);
	assert_string_equal(got.mount, d.mount);
	assert_int_equal(got.seq, 42);
	assert_string_equal(got.host, "h?x");
	assert_int_equal(bell_doc_format(&d, buf, 20, &len), -ENOSPC);
	static const struct {
		const char *txt;
		int rc;
	} cases[] = {
	    {"memwalfs-bell 1\nmount 0123456789abcdef\nseq 1\nlater 7 8\n", 0},
	    {"memwalfs-bell 2\nmount 0123456789abcdef\nseq 1\n", -EPROTONOSUPPORT},
	    {"memwalfs-lease 1\nmount 0123456789abcdef\nseq 1\n", -EUCLEAN},
	    {"memwalfs-bell 1\nmount 0123456789abcdef\n", -EUCLEAN},
	    {"memwalfs-bell 1\nseq 3\n", -EUCLEAN},
	    {"memwalfs-bell 1\nmount 0123456789ABCDEF\nseq 1\n", -EUCLEAN},
	    {"memwalfs-bell 1\nmount 0123456789abcdef\nseq x1\n", -EUCLEAN},
	    {"", -EUCLEAN},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_int_equal(bell_doc_parse("bell", cases[i].txt, strlen(cases[i].txt), &got),
		                 cases[i].rc);
}

/* ---- engines ---- */

/* A writer that rings b (NULL: never rings, as an older binary). */
static struct engine *open_writer(struct store *st, struct bell *b)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 5;
	o.cache_bytes = 1 << 20;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.store_check_ms = ENGINE_CHECK_OFF;
	o.commit_fn = b ? bell_commit_hook : NULL;
	o.commit_arg = b;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

/* A follower in bell mode: polls every 20 ms, deep idle after 500 ms, safety poll every safety_ms.
 */
static struct engine *open_follower(struct store *st, unsigned safety_ms)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.read_only = true;
	o.follow = true;
	o.follow_interval_ms = 20;
	o.follow_max_interval_ms = 40;
	o.follow_bell = true;
	o.follow_deep_idle_ms = 500;
	o.follow_safety_ms = safety_ms;
	o.cache_bytes = 1 << 20;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static void put_key(struct engine *w, const char *k)
{
	assert_int_equal(engine_put(w, k, strlen(k), "v", 1, 0, NULL), 0);
	assert_int_equal(engine_sync(w), 0);
}

/* Wait up to ms for key k at f; the time it took, or fail. */
static uint64_t wait_key(struct engine *f, const char *k, uint64_t ms)
{
	uint64_t t0 = now_ms();
	void *v = NULL;
	size_t n;
	while (engine_get(f, k, strlen(k), &v, &n) != 0) {
		if (now_ms() - t0 > ms)
			fail_msg("%s did not show at the follower within %" PRIu64 " ms", k, ms);
		usleep(5000);
	}
	free(v);
	return now_ms() - t0;
}

/* Wait up to ms for f's deep idle to become want; the time it took, or fail. */
static uint64_t wait_deep(struct engine *f, bool want, uint64_t ms)
{
	uint64_t t0 = now_ms();
	struct engine_stats s;
	for (;;) {
		engine_get_stats(f, &s);
		if (s.follow_deep_idle == want)
			return now_ms() - t0;
		if (now_ms() - t0 > ms)
			fail_msg("follow_deep_idle did not become %d within %" PRIu64 " ms", want,
			         ms);
		usleep(10000);
	}
}

static uint64_t requests(struct store *st)
{
	struct store_stats s;
	uint64_t n = 0;
	store_get_stats(st, &s);
	for (int i = 0; i < STORE_OP__COUNT; i++)
		n += s.requests[i];
	return n;
}

static void test_deep_idle(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store(), *bst = open_store();
	struct bell *ringer = NULL, *watcher = NULL;
	struct bell_opts ro = {.mount = "0123456789abcdef", .ring_quiet_ms = 300};
	struct bell_opts wo = {.interval_ms = 100};
	assert_int_equal(bell_open(ws, &ro, &ringer), 0);
	assert_int_equal(bell_open(bst, &wo, &watcher), 0);
	struct engine *w = open_writer(ws, ringer);
	put_key(w, "k0"); /* the first commit rings: the bell exists */
	struct engine *f = open_follower(fst, 60000);
	assert_int_equal(bell_follow(watcher, f), 0);
	assert_int_equal(bell_follow(watcher, f), 0); /* twice is once */
	wait_key(f, "k0", 5000);
	uint64_t t = wait_deep(f, true, 10000);
	print_message("deep idle %" PRIu64 " ms after the follower's first poll\n", t);

	/* deep idle: the follower sends nothing (its safety poll is a minute away) */
	uint64_t r0 = requests(fst);
	usleep(1000000);
	uint64_t r1 = requests(fst);
	print_message("deep idle: %" PRIu64 " follower requests in 1 s\n", r1 - r0);
	assert_int_equal(r1 - r0, 0);

	/* a commit after the quiet rings; the watcher wakes the follower */
	struct bell_stats b0, b1;
	bell_get_stats(watcher, &b0);
	put_key(w, "k1");
	uint64_t lag = wait_key(f, "k1", 3000);
	bell_get_stats(watcher, &b1);
	struct engine_stats s;
	engine_get_stats(f, &s);
	print_message("a commit after the quiet showed in %" PRIu64 " ms (watcher every 100 ms); "
	              "%" PRIu64 " change(s) seen, %" PRIu64 " wake(s)\n",
	              lag, b1.changes - b0.changes, s.follow_wakes);
	assert_true(b1.changes > b0.changes);
	assert_true(s.follow_wakes >= 1);
	assert_int_equal(b1.followers, 1);
	assert_true(b1.present);
	/* a commit soon after (less than the ring quiet): no ring, the active follower sees it */
	bell_get_stats(ringer, &b0);
	put_key(w, "k2");
	wait_key(f, "k2", 3000);
	usleep(200000);
	bell_get_stats(ringer, &b1);
	assert_int_equal(b1.rings, b0.rings);
	wait_deep(f, true, 10000); /* and it goes back to deep idle */

	bell_unfollow(watcher, f);
	bell_get_stats(watcher, &b1);
	assert_int_equal(b1.followers, 0);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	bell_close(watcher);
	bell_close(ringer);
	/* the object as rung: by our mount, seq counting the rings */
	void *buf = NULL;
	size_t len = 0;
	struct bell_doc d;
	assert_int_equal(store_get(bst, FMT_BELL_KEY, 0, STORE_TO_END, &buf, &len), 0);
	assert_int_equal(bell_doc_parse(FMT_BELL_KEY, buf, len, &d), 0);
	assert_string_equal(d.mount, "0123456789abcdef");
	assert_true(d.seq >= 2);
	free(buf);
	store_close(ws);
	store_close(fst);
	store_close(bst);
}

static void test_no_bell(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store(), *bst = open_store();
	struct bell *watcher = NULL;
	struct bell_opts wo = {.interval_ms = 100};
	assert_int_equal(bell_open(bst, &wo, &watcher), 0);
	struct engine *w = open_writer(ws, NULL); /* never rings: no bell object */
	put_key(w, "k0");
	struct engine *f = open_follower(fst, 60000);
	assert_int_equal(bell_follow(watcher, f), 0);
	wait_key(f, "k0", 5000);
	usleep(1500000); /* three times D */
	struct engine_stats s;
	struct bell_stats bs;
	engine_get_stats(f, &s);
	bell_get_stats(watcher, &bs);
	print_message("no bell: deep idle %d, %" PRIu64 " polls, %" PRIu64 " bell reads\n",
	              s.follow_deep_idle, s.follow_polls, bs.reads);
	assert_false(s.follow_deep_idle);
	assert_false(bs.present);
	assert_true(bs.reads >= 5);
	put_key(w, "k1");
	wait_key(f, "k1", 1000);
	bell_unfollow(watcher, f);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	bell_close(watcher);
	store_close(ws);
	store_close(fst);
	store_close(bst);
}

static void test_safety(void **state)
{
	(void)state;
	struct store *ws = open_store(), *fst = open_store(), *bst = open_store();
	struct bell *ringer = NULL, *watcher = NULL;
	struct bell_opts ro = {.mount = "00000000000000aa"}, wo = {.interval_ms = 100};
	assert_int_equal(bell_open(ws, &ro, &ringer), 0);
	assert_int_equal(bell_open(bst, &wo, &watcher), 0);
	bell_ring(ringer);                        /* another mount's ring: the bell exists */
	struct engine *w = open_writer(ws, NULL); /* this writer never rings */
	put_key(w, "k0");
	struct engine *f = open_follower(fst, 700);
	assert_int_equal(bell_follow(watcher, f), 0);
	wait_key(f, "k0", 5000);
	wait_deep(f, true, 10000);
	usleep(100000);
	put_key(w, "k1");
	uint64_t lag = wait_key(f, "k1", 5000);
	print_message("a commit that did not ring showed in %" PRIu64 " ms (safety poll 700 ms)\n",
	              lag);
	assert_true(lag >= 100); /* not at once: the follower was deep idle */
	bell_unfollow(watcher, f);
	assert_int_equal(engine_close(f), 0);
	assert_int_equal(engine_close(w), 0);
	bell_close(watcher);
	bell_close(ringer);
	store_close(ws);
	store_close(fst);
	store_close(bst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format),
	    cmocka_unit_test_setup_teardown(test_deep_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_bell, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_safety, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
