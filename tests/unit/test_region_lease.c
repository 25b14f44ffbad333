/*
 * test_region_lease.c - region holders and mount leases (engine/region/lease.c,
 * docs/REGIONS.md "Holders and leases").
 *
 * Two (or three) struct region_lease on one store in one process stand for mounts on
 * different machines.  Run with "local" (the fault wrapper over a local store, suite
 * unit) or "s3" (suite s3: the S3 server of $S3_ENDPOINT; exit 77 = SKIP without it).
 * Timing: leases are short (300 ms) where a death must be seen, long where a holder must
 * stay alive however loaded the machine is; every wait is a polling loop with a
 * generous deadline, never a fixed sleep that a slow run could outlast.
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
#include <unistd.h>

#include <cmocka.h>

#include "check.h"
#include "engine.h"
#include "fault.h"
#include "format.h"
#include "gc.h"
#include "lease.h"
#include "store.h"
#include "testutil.h"

static const char *kind = "fault"; /* tu_store kind of this run */
static struct tu_store *ts;        /* this test's store */

#define DEADLINE_SEC 20.0 /* every wait gives up after this (a failure, not a hang) */

static int setup(void **state)
{
	(void)state;
	int rc = tu_store_open(kind, &ts);
	assert_int_equal(rc, 0);
	return 0;
}

static struct store *view1; /* test_gc_region's view r/1/ (closed by teardown) */

static int teardown(void **state)
{
	(void)state;
	store_close(view1);
	view1 = NULL;
	tu_store_close(ts);
	ts = NULL;
	return 0;
}

static struct region_lease *open_lease(unsigned lease_ms, const char *mnt)
{
	struct region_lease_opts o = {
	    .host = "testhost", .pid = 4242, .mnt = mnt, .lease_ms = lease_ms};
	struct region_lease *l = NULL;
	assert_int_equal(region_lease_open(ts->store, &o, &l), 0);
	assert_non_null(l);
	return l;
}

/* A writer engine on st (the store, or a region's view) claiming claim_epoch. */
static struct engine *open_writer_on(struct store *st, uint64_t claim_epoch, int *rcp)
{
	struct engine_opts o;
	struct engine *e = NULL;

	engine_opts_default(&o);
	o.cadence_ms = 20;
	o.cache_bytes = 1u << 20;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.store_check_ms = ENGINE_CHECK_OFF;
	o.commit_retry_ms = ENGINE_NO_RETRY;
	o.claim_epoch = claim_epoch;
	*rcp = engine_open(st, &o, &e);
	return *rcp ? NULL : e;
}

static struct engine *open_writer(uint64_t claim_epoch, int *rcp)
{
	return open_writer_on(ts->store, claim_epoch, rcp);
}

/* acquire region rid, open a writer on view with the epoch, mark it held: the engine */
static struct engine *take_region(struct region_lease *l, uint32_t rid, struct store *view,
                                  bool force, uint64_t *epoch)
{
	struct holder_info prev;
	uint64_t ep = 0;
	int rc;

	assert_int_equal(region_acquire(l, rid, force, &ep, &prev), 0);
	struct engine *e = open_writer_on(view, ep, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(region_held(l, rid, ep), 0);
	if (epoch)
		*epoch = ep;
	return e;
}

/* acquire rid 0, open a writer with the epoch, mark it held: the engine */
static struct engine *take(struct region_lease *l, bool force, uint64_t *epoch)
{
	return take_region(l, 0, ts->store, force, epoch);
}

static int put_wait(struct engine *e, const char *k, const char *v)
{
	return engine_put(e, k, strlen(k), v, strlen(v), ENGINE_WAIT, NULL);
}

/* Poll region_holder (io) or region_holder_cached until the state is want. */
static double wait_state(struct region_lease *l, bool io, enum holder_state want,
                         struct holder_info *hi)
{
	double t0 = tu_now_sec();
	for (;;) {
		int rc = io ? region_holder(l, 0, hi) : region_holder_cached(l, 0, hi);
		assert_int_equal(rc, 0);
		if (hi->state == want)
			return tu_now_sec() - t0;
		if (tu_now_sec() - t0 > DEADLINE_SEC)
			fail_msg("state %s, waited for %s", holder_state_name(hi->state),
			         holder_state_name(want));
		usleep(10000);
	}
}

/* ------------------------------------------------------------------ */

static void test_format(void **state)
{
	(void)state;
	struct lease_hold holds[2] = {{.rid = 0, .epoch = 7},
	                              {.rid = 3, .epoch = 9, .taking = true}};
	struct lease_doc d = {.mount = "0123456789abcdef",
	                      .host = "h\nx",
	                      .pid = 12,
	                      .mnt = "/mnt/a b",
	                      .since = 1700000000,
	                      .seq = 5,
	                      .lease_ms = 300,
	                      .holds = holds,
	                      .nholds = 2},
	                 r;
	char *txt = NULL;
	size_t len = 0;

	assert_int_equal(lease_doc_format(&d, &txt, &len), 0);
	assert_non_null(strstr(txt, "memwalfs-lease 1\n"));
	assert_non_null(strstr(txt, "host h?x\n")); /* no newline survives into a value */
	assert_non_null(strstr(txt, "hold 0 7\n"));
	assert_non_null(strstr(txt, "take 3 9\n"));
	assert_int_equal(lease_doc_parse("t", txt, len, &r), 0);
	assert_string_equal(r.mount, d.mount);
	assert_string_equal(r.mnt, "/mnt/a b");
	assert_int_equal(r.seq, 5);
	assert_int_equal(r.lease_ms, 300);
	assert_int_equal(r.nholds, 2);
	assert_true(r.holds[1].taking && r.holds[1].rid == 3 && r.holds[1].epoch == 9);
	lease_doc_clear(&r);
	free(txt);

	struct holder_doc h = {.mount = "fedcba9876543210",
	                       .epoch = 42,
	                       .host = "m",
	                       .pid = 1,
	                       .mnt = "/x",
	                       .since = 5},
	                  hr;
	char buf[2048];
	assert_int_equal(holder_doc_format(&h, buf, sizeof(buf), &len), 0);
	assert_int_equal(holder_doc_parse("h", buf, len, &hr), 0);
	assert_int_equal(hr.epoch, 42);
	assert_string_equal(hr.mount, h.mount);

	static const char *bad[] = {
	    "",
	    "garbage",
	    "memwalfs-lease x\nmount 0123456789abcdef\nseq 1\nlease_ms 5\n",
	    "memwalfs-lease 1\nmount 0123456789ABCDEF\nseq 1\nlease_ms 5\n",
	    "memwalfs-lease 1\nmount 0123456789abcdef\nseq -1\nlease_ms 5\n",
	    "memwalfs-lease 1\nmount 0123456789abcdef\nlease_ms 5\n",
	    "memwalfs-lease 1\nmount 0123456789abcdef\nseq 1\nlease_ms 5\nhold 1\n",
	    "memwalfs-lease 1\nmount 0123456789abcdef\nseq 99999999999999999999999\nlease_ms 5\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(lease_doc_parse("bad", bad[i], strlen(bad[i]), &r), -EUCLEAN);
	const char *newer = "memwalfs-lease 2\nmount 0123456789abcdef\nseq 1\nlease_ms 5\n";
	assert_int_equal(lease_doc_parse("newer", newer, strlen(newer), &r), -EPROTONOSUPPORT);
	const char *extra =
	    "memwalfs-lease 1\nmount 0123456789abcdef\nseq 1\nlease_ms 5\nfuture x\n";
	assert_int_equal(lease_doc_parse("extra", extra, strlen(extra), &r), 0);
	lease_doc_clear(&r);
	assert_int_equal(holder_doc_parse("h", "memwalfs-holder 1\nepoch 3\n", 26, &hr), -EUCLEAN);
}

/* A holds rid 0: B sees it LIVE and cannot take it; A's clean close frees it at once. */
static void test_live_holder_busy(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a"), *b = open_lease(300, "/mnt/b");
	struct holder_info hi, prev;
	uint64_t ep = 0, ep2 = 0;
	struct engine *e;

	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE); /* an empty store */
	e = take(a, false, &ep);
	assert_int_equal(ep, 1);
	assert_int_equal(put_wait(e, "k", "a"), 0);
	assert_int_equal(region_holder(a, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_SELF);

	/* first sight: UNSURE (or LIVE once a renewal was seen); never DEAD or FREE */
	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_true(hi.state == HOLDER_UNSURE || hi.state == HOLDER_LIVE);
	assert_string_equal(hi.mount, region_lease_id(a));
	assert_string_equal(hi.mnt, "/mnt/a");
	assert_int_equal(hi.epoch, 1);
	assert_int_equal(region_acquire(b, 0, false, &ep2, &prev), -EBUSY);
	assert_string_equal(prev.mount, region_lease_id(a));
	wait_state(b, false, HOLDER_LIVE, &hi); /* B's watch sees A renew */
	assert_int_equal(region_acquire(b, 0, false, &ep2, &prev), -EBUSY);
	assert_int_equal(prev.state, HOLDER_LIVE);
	assert_string_equal(prev.host, "testhost");

	assert_int_equal(engine_close(e), 0);
	region_lease_close(a, true);
	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE);
	e = take(b, false, &ep2);
	assert_int_equal(ep2, 2);
	assert_int_equal(engine_close(e), 0);
	region_lease_close(b, true);
}

/* A "dies" (stops renewing, kill -9): B sees UNSURE, then DEAD after the lease, takes over. */
static void test_dead_holder_taken(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(300, "/mnt/a"), *b = open_lease(300, "/mnt/b");
	struct region_lease *c = open_lease(300, "/mnt/c");
	struct holder_info hi;
	uint64_t ep = 0, ep2 = 0;
	struct engine *ea, *eb;
	void *v = NULL;
	size_t vn;

	ea = take(a, false, &ep);
	assert_int_equal(put_wait(ea, "acked", "yes"), 0);
	wait_state(b, true, HOLDER_LIVE, &hi); /* B watches A renew */

	region_lease_close(a, false); /* A's lease stays, unrenewed; its engine is a zombie */
	double t0 = tu_now_sec();
	/* B stays LIVE/UNSURE for at least the lease, then DEAD */
	for (;;) {
		assert_int_equal(region_holder_cached(b, 0, &hi), 0);
		if (hi.state == HOLDER_DEAD)
			break;
		assert_true(hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE);
		assert_true(tu_now_sec() - t0 < DEADLINE_SEC);
		usleep(10000);
	}
	assert_true(hi.quiet_sec >= 0.3);
	assert_true(tu_now_sec() - t0 >= 0.3 - 0.2); /* not before a lease (minus a tick) */
	/* C, which never saw A alive: its lease was written just now, so UNSURE first */
	assert_int_equal(region_holder(c, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_UNSURE);
	assert_int_equal(region_acquire(c, 0, false, &ep2, NULL), -EBUSY);

	eb = take(b, false, &ep2);
	assert_int_equal(ep2, ep + 1);
	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_SELF);
	assert_int_equal(region_holder(c, 0, &hi), 0);
	assert_string_equal(hi.mount, region_lease_id(b));
	assert_true(hi.state == HOLDER_UNSURE || hi.state == HOLDER_LIVE);
	/* what A acknowledged is there; A itself acknowledges nothing more */
	assert_int_equal(engine_get(eb, "acked", 5, &v, &vn), 0);
	assert_int_equal(vn, 3);
	free(v);
	assert_int_equal(put_wait(ea, "late", "no"), -ESTALE);
	engine_close(ea);
	assert_int_equal(engine_close(eb), 0);
	region_lease_close(b, true);
	region_lease_close(c, true);
}

/* region_release frees the region at once. */
static void test_release(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a"), *b = open_lease(300, "/mnt/b");
	struct holder_info hi;
	uint64_t ep = 0;
	struct engine *e = take(a, false, &ep);

	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_true(hi.state == HOLDER_UNSURE || hi.state == HOLDER_LIVE);
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(region_release(a, 0), 0);
	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE);
	assert_string_equal(hi.mount, region_lease_id(a)); /* who had it is still named */
	assert_int_equal(region_holder(a, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE);
	assert_int_equal(region_release(a, 0), 0); /* twice: nothing to do */
	e = take(b, false, &ep);
	assert_int_equal(ep, 2);
	assert_int_equal(engine_close(e), 0);
	region_lease_close(a, true);
	region_lease_close(b, true);
}

/* Two takers at once: exactly one gets the epoch, the other -EBUSY naming it. */
struct racer {
	struct region_lease *l;
	pthread_barrier_t *bar;
	int rc;
	uint64_t epoch;
	struct holder_info prev;
};

static void *race_main(void *arg)
{
	struct racer *r = arg;
	pthread_barrier_wait(r->bar);
	r->rc = region_acquire(r->l, 0, false, &r->epoch, &r->prev);
	return NULL;
}

static void test_two_takers(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a"), *b = open_lease(3000, "/mnt/b");
	pthread_barrier_t bar;
	uint64_t seed = tu_seed("two_takers");

	srand((unsigned)seed);
	int idle = 0; /* rounds in which both backed off (each saw the other's take) */
	for (int round = 0; round < 6; round++) {
		struct racer r[2] = {{.l = a, .bar = &bar}, {.l = b, .bar = &bar}};
		pthread_t t[2];
		pthread_barrier_init(&bar, NULL, 2);
		for (int i = 0; i < 2; i++)
			assert_int_equal(pthread_create(&t[i], NULL, race_main, &r[i]), 0);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		pthread_barrier_destroy(&bar);
		/*
		 * Never two winners.  Both may back off, each having seen the other's take line
		 * (seen once in CI at load 8): a lost round, not a second holder; the round is
		 * run again, a few times at most.
		 */
		assert_false(r[0].rc == 0 && r[1].rc == 0);
		if (r[0].rc == -EBUSY && r[1].rc == -EBUSY && idle < 4) {
			idle++;
			round--;
			continue;
		}
		int won = r[0].rc == 0 ? 0 : 1, lost = 1 - won;
		assert_int_equal(r[won].rc, 0);
		assert_int_equal(r[lost].rc, -EBUSY);
		assert_string_equal(r[lost].prev.mount, region_lease_id(r[won].l));
		if (round % 2) { /* the winner claims: the next round races for the next epoch */
			int rc;
			struct engine *e = open_writer(r[won].epoch, &rc);
			assert_int_equal(rc, 0);
			assert_int_equal(region_held(r[won].l, 0, r[won].epoch), 0);
			assert_int_equal(engine_close(e), 0);
		}
		/* gives up or lets go: the holder object of a taker that gave up is skipped */
		assert_int_equal(region_release(r[won].l, 0), 0);
		(void)rand();
	}
	region_lease_close(a, true);
	region_lease_close(b, true);
}

/* force takes from a live holder; the old engine is fenced at its next commit. */
static void test_force(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a"), *b = open_lease(3000, "/mnt/b");
	struct holder_info hi, prev;
	uint64_t ep = 0, ep2 = 0;
	struct engine *ea = take(a, false, &ep), *eb;
	int rc;

	assert_int_equal(put_wait(ea, "before", "1"), 0);
	assert_int_equal(region_acquire(b, 0, false, &ep2, &prev), -EBUSY);
	assert_int_equal(region_acquire(b, 0, true, &ep2, &prev), 0);
	assert_string_equal(prev.mount, region_lease_id(a));
	assert_int_equal(ep2, ep + 1);
	eb = open_writer(ep2, &rc);
	assert_int_equal(rc, 0);
	assert_int_equal(region_held(b, 0, ep2), 0);
	assert_int_equal(put_wait(ea, "after", "1"), -ESTALE);
	assert_int_equal(region_holder(a, 0, &hi), 0);
	assert_string_equal(hi.mount, region_lease_id(b));
	assert_true(hi.state == HOLDER_UNSURE || hi.state == HOLDER_LIVE);
	engine_close(ea);
	assert_int_equal(put_wait(eb, "b", "1"), 0);
	assert_int_equal(engine_close(eb), 0);
	region_lease_close(a, true);
	region_lease_close(b, true);
}

/* claim_epoch: exactly that epoch or -EAGAIN; a stale taker never claims. */
static void test_claim_epoch(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a"), *b = open_lease(3000, "/mnt/b");
	uint64_t ep = 0, ep2 = 0;
	struct engine *e;
	struct engine_stats s;
	int rc;

	e = take(a, false, &ep);
	engine_get_stats(e, &s);
	assert_int_equal(s.epoch, ep);
	assert_int_equal(engine_close(e), 0);
	assert_null(open_writer(ep, &rc)); /* already claimed */
	assert_int_equal(rc, -EAGAIN);
	/* a skipped epoch (a taker that gave up) is claimed over */
	e = open_writer(ep + 3, &rc);
	assert_int_equal(rc, 0);
	engine_get_stats(e, &s);
	assert_int_equal(s.epoch, ep + 3);
	assert_int_equal(engine_close(e), 0);
	/* A took its epoch before, then someone claimed above it: A's claim fails */
	assert_int_equal(region_release(a, 0), 0);
	assert_int_equal(region_acquire(b, 0, false, &ep2, NULL), 0);
	e = open_writer(0, &rc); /* an old-style open claims regardless */
	assert_int_equal(rc, 0);
	assert_int_equal(engine_close(e), 0);
	assert_null(open_writer(ep2, &rc));
	assert_int_equal(rc, -EAGAIN);
	assert_int_equal(region_release(b, 0), 0);
	region_lease_close(a, true);
	region_lease_close(b, true);
}

/* A lease or holder object that does not parse is -EUCLEAN, never FREE. */
static void test_corrupt(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a"), *b = open_lease(3000, "/mnt/b");
	struct holder_info hi;
	uint64_t ep = 0, ep2;
	char key[64], hkey[64];
	struct engine *e = take(a, false, &ep);

	assert_int_equal(engine_close(e), 0);
	region_lease_close(a, false); /* keep its thread from rewriting the object */
	assert_int_equal(region_holder(b, 0, &hi), 0);
	snprintf(key, sizeof(key), "mounts/%s", hi.mount);
	assert_int_equal(store_put(ts->store, key, "memwalfs-lease 1\nmount x\n", 25), 0);
	assert_int_equal(region_holder(b, 0, &hi), -EUCLEAN);
	assert_int_equal(region_acquire(b, 0, false, &ep2, NULL), -EUCLEAN);
	assert_int_equal(region_holder_peek(ts->store, 0, &hi), -EUCLEAN);
	assert_int_equal(store_delete(ts->store, key), 0);
	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE); /* a lease gone: a clean unmount */
	/* holder objects are never rewritten, so a lease reads each once: fresh leases here */
	fmt_holder_name(hkey, 0, ep);
	assert_int_equal(store_put(ts->store, hkey, "memwalfs-holder 1\nepoch 1\n", 26), 0);
	struct region_lease *c = open_lease(3000, "/mnt/c");
	assert_int_equal(region_holder(c, 0, &hi), -EUCLEAN);
	assert_int_equal(region_holder_cached(c, 0, &hi), -EUCLEAN);
	region_lease_close(c, true);
	assert_int_equal(store_put(ts->store, hkey, "memwalfs-holder 9\n", 18), 0);
	c = open_lease(3000, "/mnt/c");
	assert_int_equal(region_holder(c, 0, &hi), -EPROTONOSUPPORT);
	region_lease_close(c, true);
	region_lease_close(b, true);
}

static uint64_t store_requests(void)
{
	struct store_stats s;
	uint64_t n = 0;
	store_get_stats(ts->store, &s);
	for (int i = 0; i < STORE_OP__COUNT; i++)
		n += s.requests[i];
	return n;
}

/* region_holder_cached sends nothing; costs of an idle holder and an observer. */
static void test_costs(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(60000, "/mnt/a"), *b = open_lease(60000, "/mnt/b");
	struct region_lease_stats sa, sb;
	struct holder_info hi;
	uint64_t ep, n0;
	struct engine *e = take(a, false, &ep);

	assert_int_equal(engine_close(e), 0);
	assert_int_equal(region_holder(b, 0, &hi), 0);
	/* long leases: neither thread ticks during this loop */
	n0 = store_requests();
	for (int i = 0; i < 10000; i++)
		assert_int_equal(region_holder_cached(b, 0, &hi), 0);
	assert_int_equal(store_requests(), n0);
	assert_int_equal(region_holder_cached(b, 7, &hi), -ENOENT);
	region_lease_close(a, true);
	region_lease_close(b, true);

	/* an idle mount that holds nothing and watches nothing: no request */
	struct region_lease *idle = open_lease(300, "/mnt/idle");
	usleep(1000 * 1000);
	/* its own count: the shared store's also counts what earlier tests' threads still send
	 * (2 requests in this second once in CI at load 8) */
	region_lease_get_stats(idle, &sa);
	assert_int_equal(sa.requests, 1); /* the open's PUT */
	region_lease_close(idle, true);

	/* an idle holder: one PUT per lease_ms / 3; an observer: one GET per tick, more every 4th
	 */
	a = open_lease(300, "/mnt/a");
	b = open_lease(300, "/mnt/b");
	e = take(a, false, &ep);
	assert_int_equal(engine_close(e), 0); /* the region stays held, the engine is idle */
	assert_int_equal(region_holder(b, 0, &hi), 0);
	region_lease_get_stats(a, &sa);
	region_lease_get_stats(b, &sb);
	uint64_t ra = sa.requests, rb = sb.requests, pa = sa.renewals;
	double t0 = tu_now_sec();
	usleep(3000 * 1000);
	double dt = tu_now_sec() - t0;
	region_lease_get_stats(a, &sa);
	region_lease_get_stats(b, &sb);
	double ticks = dt * 1000.0 / 100.0;
	fprintf(stderr,
	        "costs over %.2f s (%.0f ticks of 100 ms): holder %" PRIu64 " requests (%" PRIu64
	        " renewals), observer %" PRIu64 " requests\n",
	        dt, ticks, sa.requests - ra, sa.renewals - pa, sb.requests - rb);
	assert_true(sa.requests - ra <= (uint64_t)(ticks + 2));
	assert_true(sa.requests - ra >= (uint64_t)(ticks / 3)); /* it renews (loaded: late) */
	/* its lease's PUTs, and at most a look or two at its own region right after the take
	 * (31 requests for 29 renewals once in CI at load 8) */
	assert_true(sa.requests - ra >= sa.renewals - pa);
	assert_true(sa.requests - ra <= sa.renewals - pa + 2);
	/* per tick one GET, every 4th tick + hint, listing (+ manifest, holder if changed) */
	assert_true(sb.requests - rb <= (uint64_t)(ticks * 1.75 + 8));
	assert_true(sa.last_renew_ms_ago >= 0 && sa.last_renew_ms_ago < 60000);
	assert_int_equal(sa.holds, 1);
	assert_int_equal(sb.watched, 1);
	region_lease_close(a, true);
	region_lease_close(b, true);

	/* an observer of two regions of one holder: one GET of its lease a tick, not two */
	a = open_lease(300, "/mnt/a");
	b = open_lease(300, "/mnt/b");
	e = take(a, false, &ep);
	assert_int_equal(engine_close(e), 0);
	struct store *v5 = NULL;
	uint64_t ep5 = 0;
	int rc;
	assert_int_equal(store_open_sub(ts->store, "r/5/", &v5), 0);
	assert_int_equal(region_acquire(a, 5, false, &ep5, &hi), 0);
	struct engine_opts o;
	engine_opts_default(&o);
	o.cache_bytes = 1u << 20;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.store_check_ms = ENGINE_CHECK_OFF;
	o.claim_epoch = ep5;
	assert_int_equal(engine_open(v5, &o, &e), 0);
	assert_int_equal(region_held(a, 5, ep5), 0);
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(region_holder(b, 0, &hi), 0);
	assert_int_equal(hi.state == HOLDER_UNSURE || hi.state == HOLDER_LIVE, 1);
	assert_int_equal(region_holder(b, 5, &hi), 0);
	region_lease_get_stats(b, &sb);
	rb = sb.requests;
	t0 = tu_now_sec();
	usleep(3000 * 1000);
	dt = tu_now_sec() - t0;
	region_lease_get_stats(b, &sb);
	ticks = dt * 1000.0 / 100.0;
	fprintf(stderr, "two regions of one holder over %.2f s: observer %" PRIu64 " requests\n",
	        dt, sb.requests - rb);
	/* per tick one shared GET, every 4th tick a full look of each (hint, listing, lease):
	 * 1.5 + 0.75 a tick; two GETs a tick would be 2 x 1.75 */
	assert_true(sb.requests - rb <= (uint64_t)(ticks * 2.6 + 8));
	assert_int_equal(sb.watched, 2);
	assert_int_equal(region_holder_cached(b, 5, &hi), 0);
	assert_int_equal(hi.state, HOLDER_LIVE);
	rc = region_holder_look(b, 7, &hi); /* a look that does not watch */
	assert_int_equal(rc, 0);
	assert_int_equal(hi.state, HOLDER_FREE);
	region_lease_get_stats(b, &sb);
	assert_int_equal(sb.watched, 2);
	region_lease_close(a, true);
	region_lease_close(b, true);
	store_close(v5);
}

/* Failed renewals are counted, then recover (fault store only). */
static void test_renew_failures(void **state)
{
	(void)state;
	if (!ts->fault)
		skip();
	struct region_lease *a = open_lease(300, "/mnt/a");
	struct region_lease_stats s;
	uint64_t ep;
	struct engine *e = take(a, false, &ep);
	double t0;

	assert_int_equal(engine_close(e), 0);
	fault_store_fail_nth(ts->fault, FAULT_M(FAULT_OP_PUT), 1, -EIO, FAULT_PERSIST);
	t0 = tu_now_sec();
	do {
		assert_true(tu_now_sec() - t0 < DEADLINE_SEC);
		usleep(20000);
		region_lease_get_stats(a, &s);
	} while (!s.renew_overdue || s.renew_failures < 3);
	fault_store_clear(ts->fault);
	t0 = tu_now_sec();
	do {
		assert_true(tu_now_sec() - t0 < DEADLINE_SEC);
		usleep(20000);
		region_lease_get_stats(a, &s);
	} while (s.renew_overdue);
	assert_true(s.last_renew_ms_ago < 1000);
	region_lease_close(a, true);
}

/* region_holder_peek: liveness from the lease's mtime. */
static void test_peek(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a");
	struct holder_info hi;
	uint64_t ep;

	assert_int_equal(region_holder_peek(ts->store, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE);
	struct engine *e = take(a, false, &ep);
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(region_holder_peek(ts->store, 0, &hi), 0);
	assert_true(hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE);
	assert_string_equal(hi.mount, region_lease_id(a));
	assert_int_equal(hi.lease_ms, 3000);
	region_lease_close(a, true);
	assert_int_equal(region_holder_peek(ts->store, 0, &hi), 0);
	assert_int_equal(hi.state, HOLDER_FREE);
}

/* An observer whose reads fail never calls a holder DEAD (fault store only). */
static void test_observer_partition(void **state)
{
	(void)state;
	if (!ts->fault)
		skip();
	struct region_lease *a = open_lease(300, "/mnt/a"), *b = open_lease(300, "/mnt/b");
	struct holder_info hi;
	uint64_t ep;
	struct engine *e = take(a, false, &ep);

	assert_int_equal(engine_close(e), 0);
	wait_state(b, true, HOLDER_LIVE, &hi);
	fault_store_fail_nth(ts->fault, FAULT_READS, 1, -EIO, FAULT_PERSIST); /* B reads nothing */
	region_lease_close(a, false); /* and A dies meanwhile */
	double t0 = tu_now_sec();
	while (tu_now_sec() - t0 < 1.5) { /* five leases */
		int rc = region_holder_cached(b, 0, &hi);
		assert_true(rc == 0 || rc == -EIO);
		assert_true(hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE);
		usleep(20000);
	}
	assert_int_equal(hi.state, HOLDER_UNSURE);
	fault_store_clear(ts->fault);
	wait_state(b, true, HOLDER_DEAD, &hi); /* reads again: now it knows */
	region_lease_close(b, true);
}

static bool planned(const struct gc_plan *p, const char *name)
{
	for (size_t i = 0; i < p->ndeletes; i++)
		if (!strcmp(p->deletes[i], name))
			return true;
	return false;
}

/* GC: old holder objects after the grace, mount leases after 7 days; nothing else of ours. */
static void test_gc(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a");
	struct gc_plan plan = {0};
	struct gc_opts o;
	struct gc *g = NULL;
	char name[64], lkey[64];
	uint64_t ep = 0;

	for (int i = 0; i < 5; i++) { /* epochs 1..5, each with its holder object */
		struct engine *e = take(a, false, &ep);
		assert_int_equal(put_wait(e, "k", "v"), 0);
		assert_int_equal(engine_close(e), 0);
		assert_int_equal(region_release(a, 0), 0);
	}
	assert_int_equal(ep, 5);
	snprintf(lkey, sizeof(lkey), "mounts/%s", region_lease_id(a));
	assert_int_equal(gc_new(ts->store, &g), 0);
	gc_opts_default(&o);
	assert_int_equal(gc_plan_make(g, &o, &plan), 0); /* all young: nothing of ours goes */
	assert_int_equal(plan.n_region, 0);
	gc_plan_clear(&plan);
	o.now = (int64_t)time(NULL) + 8 * 86400;
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	for (uint64_t e = 1; e <= 5; e++) {
		fmt_holder_name(name, 0, e);
		assert_int_equal(planned(&plan, name), e <= 3); /* 4 and 5 stay */
	}
	assert_true(planned(&plan, lkey)); /* 8 days unwritten (by the plan's clock) */
	assert_int_equal(plan.n_region, 4);
	gc_plan_clear(&plan);
	o.now = (int64_t)time(NULL) + 86400; /* a day: holders go, the lease stays */
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	assert_false(planned(&plan, lkey));
	assert_int_equal(plan.n_region, 3);
	gc_plan_clear(&plan);
	gc_free(g);
	region_lease_close(a, true);
}

/*
 * GC per region: the writer of region 1, an engine on the view r/1/, collects that
 * region's holder objects (r/1/holder/, its holder/) as region 0's writer does its own;
 * region 0's GC leaves them alone; the check of the view counts them as region objects,
 * that of the store root counts r/1/ as another region's, never as orphans.
 */
/* check_opts.fn: count the orphans that are region objects (holder/, r/...) in *arg. */
static void region_orphans(void *arg, const struct check_event *ev)
{
	if (ev->kind == CHECK_ORPHAN &&
	    (!strncmp(ev->object, "r/", 2) || !strncmp(ev->object, "holder/", 7)))
		(*(int *)arg)++;
}

static void test_gc_region(void **state)
{
	(void)state;
	struct region_lease *a = open_lease(3000, "/mnt/a");
	struct gc_plan plan = {0};
	struct gc_opts o;
	struct gc *g = NULL;
	struct check_report r;
	int bad = 0; /* region objects taken for orphans */
	struct check_opts co = {.fn = region_orphans, .arg = &bad};
	char name[64];
	uint64_t ep = 0;

	assert_int_equal(store_open_sub(ts->store, "r/1/", &view1), 0);
	struct store *v = view1;
	struct engine *e0 = take(a, false, NULL); /* region 0: a state of its own */
	assert_int_equal(put_wait(e0, "k", "v"), 0);
	for (int i = 0; i < 5; i++) { /* region 1, epochs 1..5, each with its holder object */
		struct engine *e = take_region(a, 1, v, false, &ep);
		assert_int_equal(put_wait(e, "k", "v"), 0);
		assert_int_equal(engine_close(e), 0);
		assert_int_equal(region_release(a, 1), 0);
	}
	assert_int_equal(ep, 5);
	gc_opts_default(&o);
	o.now = (int64_t)time(NULL) + 86400;
	/* region 0's GC: its own holder object is the newest; nothing of r/1/ */
	assert_int_equal(gc_new(ts->store, &g), 0);
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	for (size_t i = 0; i < plan.ndeletes; i++)
		assert_true(strncmp(plan.deletes[i], "r/", 2) != 0);
	assert_int_equal(plan.n_region, 0);
	gc_plan_clear(&plan);
	gc_free(g);
	/* region 1's GC, on its view: holder/ 1..3 go, 4 and 5 stay */
	assert_int_equal(check_store(v, &co, &r), 0);
	assert_int_equal(r.regions.objects, 5);
	assert_int_equal(gc_new(v, &g), 0);
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	for (uint64_t e = 1; e <= 5; e++) {
		snprintf(name, sizeof(name), "holder/%020" PRIu64, e);
		assert_int_equal(planned(&plan, name), e <= 3);
	}
	assert_int_equal(plan.n_region, 3);
	assert_int_equal(gc_plan_execute(g, &o, &plan, NULL), 0);
	gc_plan_clear(&plan);
	gc_free(g);
	assert_int_equal(check_store(v, &co, &r), 0);
	assert_int_equal(r.regions.objects, 2);
	assert_int_equal(r.orphans.objects, 0); /* the compacted tables went too */
	/* the root's check: r/1/ is region 1's, not orphans of region 0 */
	assert_int_equal(check_store(ts->store, &co, &r), 0);
	assert_int_equal(bad, 0);
	assert_true(r.subregions.objects >= 2 + 3); /* holders, manifest, WAL... */
	assert_int_equal(engine_close(e0), 0);
	region_lease_close(a, true);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_format),
	    cmocka_unit_test_setup_teardown(test_live_holder_busy, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_holder_taken, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_release, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_two_takers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_force, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim_epoch, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_costs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_renew_failures, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_peek, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc_region, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_observer_partition, setup, teardown),
	};
	char name[64];

	kind = tu_kind_arg(argc, argv, kind);
	snprintf(name, sizeof(name), "region_lease/%s", kind);
	return cmocka_run_group_tests_name(name, tests, NULL, NULL) ? 1 : 0;
}
