/*
 * engine_fence.c - the fencing check shared by the fault and s3 suites.
 *
 * Writer A opens a location and makes some writes durable; writer B opens
 * the same location through another store handle, which must fence A:
 *   - A's next commit fails with -ESTALE, and so does every later write and
 *     sync of A (sticky), while A's reads keep working;
 *   - after that first failed commit A sends no write request to the store
 *     (counted by store_get_stats() on A's own store handle), not even at
 *     engine_close();
 *   - a waiter blocked in A when B opens is either acknowledged (its commit
 *     beat the fence) and then durable, or gets the error and is absent;
 *   - A's unsynced write from before B's open is not visible to B or later
 *     unless a group of A's that holds it beat the fence (counted by
 *     engine_get_stats() groups_committed);
 *   - B's writes and A's acknowledged writes are intact after a reopen.
 * No check depends on timing: B opens once A's waiter is applied, and what
 * raced with B's open is read from A's counters, not assumed.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "engine_check.h"
#include "fault.h"
#include "store.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL fencing (line %d): ", __LINE__);                             \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		goto out;                                                                          \
	} while (0)

static uint64_t store_writes(struct store *st)
{
	struct store_stats s;

	store_get_stats(st, &s);
	return s.requests[STORE_OP_PUT] + s.requests[STORE_OP_MPU] + s.requests[STORE_OP_DELETE];
}

static void val_of(const char *key, char *buf, size_t n)
{
	/* a blob for keys ending in 5, inline otherwise */
	size_t kl = strlen(key), len = key[kl - 1] == '5' ? 1500 : 40;

	for (size_t i = 0; i < len && i < n; i++)
		buf[i] = (char)(key[i % kl] + (char)i);
}

static size_t val_len(const char *key)
{
	return key[strlen(key) - 1] == '5' ? 1500 : 40;
}

/* 0 if key holds its value, -ENOENT if absent, another error or -EBADMSG. */
static int check_key(struct engine *e, const char *key)
{
	char want[2000];
	void *v = NULL;
	size_t vn = 0;
	int rc = engine_get(e, key, strlen(key), &v, &vn);

	if (rc)
		return rc;
	val_of(key, want, sizeof(want));
	rc = vn == val_len(key) && !memcmp(v, want, vn) ? 0 : -EBADMSG;
	free(v);
	return rc;
}

static int put_key(struct engine *e, const char *key, int flags)
{
	char v[2000];

	val_of(key, v, sizeof(v));
	return engine_put(e, key, strlen(key), v, val_len(key), flags, NULL);
}

struct waiter {
	struct engine *e; /* writer A */
	int rc;           /* what the waiting put returned */
};

static void *wait_put(void *arg)
{
	struct waiter *w = arg;

	w->rc = put_key(w->e, "a/w", ENGINE_WAIT);
	return NULL;
}

int ec_fencing(enum ec_kind kind)
{
	struct ec_backing bk;
	struct store *st1 = NULL, *st2 = NULL;
	struct engine *e1 = NULL, *e2 = NULL;
	struct engine_opts eo;
	struct engine_stats es;
	struct waiter w = {0};
	pthread_t tid;
	bool started = false;
	char key[16];
	uint64_t w0, w1, w2, g0, gw, g1;
	bool p_durable;
	int rc, ret = -1;

	rc = ec_backing_new(kind, "fence", &bk);
	if (rc)
		return rc == 77 ? 77 : -1;
	engine_opts_default(&eo);
	eo.cadence_ms = 400; /* long: A commits only when asked, or at the tick */
	eo.inline_max = 256;
	if ((rc = ec_backing_open(&bk, &st1)) || (rc = ec_backing_open(&bk, &st2)))
		FAIL("open store: %d", rc);
	if ((rc = engine_open(st1, &eo, &e1)))
		FAIL("open writer A: %d", rc);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "a/%d", i);
		if ((rc = put_key(e1, key, i == 9 ? ENGINE_WAIT | ENGINE_URGENT : 0)))
			FAIL("A put %s: %d", key, rc);
	}
	if ((rc = put_key(e1, "a/p", 0))) /* applied, not durable */
		FAIL("A put a/p: %d", rc);
	engine_get_stats(e1, &es);
	g0 = es.groups_committed; /* a/0-a/9 are durable, a/p is not */
	w.e = e1;
	if (pthread_create(&tid, NULL, wait_put, &w))
		FAIL("pthread_create");
	started = true;
	/*
	 * Open B once the waiter's put is applied (visible to A's reads), not
	 * after a fixed sleep: the waiter thread may start late on a loaded
	 * machine.  a/p and a/w then normally share one group (the 400 ms
	 * cadence runs from a/p); should the waiter be so late that a/p's group
	 * committed alone, the checks below still hold, since they count
	 * A's committed groups instead of assuming that.
	 */
	for (int i = 0; check_key(e1, "a/w") == -ENOENT; i++) {
		if (i == 2000)
			FAIL("A's waiting put of a/w not applied after 20 s");
		usleep(10000);
	}

	engine_get_stats(e1, &es);
	gw = es.groups_committed;
	w0 = store_writes(st1); /* st1 is A's alone */
	if ((rc = engine_open(st2, &eo, &e2)))
		FAIL("open writer B: %d", rc);
	pthread_join(tid, NULL);
	started = false;
	if (w.rc && w.rc != -ESTALE)
		FAIL("A's waiter blocked across the fence got %d, want 0 or -ESTALE", w.rc);
	rc = put_key(e1, "a/x", ENGINE_WAIT | ENGINE_URGENT);
	if (rc != -ESTALE)
		FAIL("A's first commit after B opened returned %d, want -ESTALE", rc);
	w1 = store_writes(st1);
	engine_get_stats(e1, &es);
	g1 = es.groups_committed; /* A's groups that beat the fence */
	/* each group that beat the fence is one WAL entry (a/p, a/w are inline) */
	if (w1 - w0 > 2 + (g1 - gw))
		FAIL("A's commits across the fence sent %llu write requests (want at most "
		     "a pack and the WAL entry, plus %llu entries that beat the fence)",
		     (unsigned long long)(w1 - w0), (unsigned long long)(g1 - gw));
	if ((rc = put_key(e1, "a/y", 0)) != -ESTALE)
		FAIL("A put after fencing returned %d, want -ESTALE (sticky)", rc);
	if ((rc = put_key(e1, "a/z", ENGINE_WAIT)) != -ESTALE)
		FAIL("A waiting put after fencing returned %d, want -ESTALE", rc);
	if ((rc = engine_sync(e1)) != -ESTALE)
		FAIL("A sync after fencing returned %d, want -ESTALE", rc);
	engine_get_stats(e1, &es);
	if (es.sticky_error != -ESTALE)
		FAIL("A's stats.sticky_error is %d, want -ESTALE", es.sticky_error);
	if ((rc = check_key(e1, "a/3")) || (rc = check_key(e1, "a/5")))
		FAIL("A's reads after fencing: %d (reads keep working)", rc);

	/* B works, and sees A's durable writes but not A's unsynced one. */
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "b/%d", i);
		if ((rc = put_key(e2, key, i % 3 == 0 ? ENGINE_WAIT : 0)))
			FAIL("B put %s: %d", key, rc);
	}
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "a/%d", i);
		if ((rc = check_key(e2, key)))
			FAIL("B reads A's acknowledged %s: %d", key, rc);
	}
	/*
	 * a/p was issued before a/w: durable iff a group after a/9's beat the
	 * fence - a/w's (then w.rc is 0), or a/p's own if the waiter came late.
	 */
	p_durable = w.rc == 0 || g1 > g0;
	rc = check_key(e2, "a/p");
	if (p_durable ? rc != 0 : rc != -ENOENT)
		FAIL("B reads A's unsynced a/p: %d (A's waiter got %d; %llu of A's groups beat "
		     "the fence)",
		     rc, w.rc, (unsigned long long)(g1 - g0));

	rc = engine_close(e1);
	e1 = NULL;
	if (rc != -ESTALE)
		fprintf(stderr, "note: A's engine_close returned %d (expected -ESTALE)\n", rc);
	w2 = store_writes(st1);
	if (w2 != w1)
		FAIL("fenced writer A sent %llu write requests after its failed commit",
		     (unsigned long long)(w2 - w1));
	if ((rc = engine_close(e2)))
		FAIL("close B: %d", rc);
	e2 = NULL;

	/* Reopen: everything acknowledged is there, nothing of A after the fence. */
	if ((rc = engine_open(st2, &eo, &e2)))
		FAIL("reopen: %d", rc);
	for (int i = 0; i < 20; i++) {
		snprintf(key, sizeof(key), "%c/%d", i < 10 ? 'a' : 'b', i % 10);
		if ((rc = check_key(e2, key)))
			FAIL("after reopen %s: %d", key, rc);
	}
	static const char *const gone[] = {"a/x", "a/y", "a/z", "a/p"};

	for (unsigned i = 0; i < (p_durable ? 3u : 4u); i++)
		if ((rc = check_key(e2, gone[i])) != -ENOENT)
			FAIL("after reopen %s (never acknowledged, written after the fence) "
			     "is visible: %d",
			     gone[i], rc);
	rc = check_key(e2, "a/w");
	if (w.rc == 0 && rc)
		FAIL("A's acknowledged waiter a/w lost after reopen: %d", rc);
	if (w.rc && rc != -ENOENT)
		FAIL("A's failed waiter a/w visible after reopen: %d", rc);
	printf("fencing: ok (A's waiter across the fence: %d; A's failed commit sent %llu "
	       "write requests, none after)\n",
	       w.rc, (unsigned long long)(w1 - w0));
	ret = 0;
out:
	if (started)
		pthread_join(tid, NULL);
	engine_close(e1);
	engine_close(e2);
	store_close(st1);
	store_close(st2);
	ec_backing_destroy(&bk);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Fencing a writer with entries in flight                              */
/* ------------------------------------------------------------------ */

#define WFAIL(...)                                                                                 \
	do {                                                                                       \
		fprintf(stderr, "FAIL fencing with entries in flight (line %d): ", __LINE__);      \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		goto out;                                                                          \
	} while (0)

struct inflight_put {
	struct engine *e;
	char key[16];
	int rc;
	pthread_t tid;
	bool started;
};

static void *inflight_main(void *arg)
{
	struct inflight_put *p = arg;

	p->rc = put_key(p->e, p->key, ENGINE_WAIT | ENGINE_URGENT);
	return NULL;
}

static int list_max_wal(void *arg, const char *key, uint64_t size)
{
	uint64_t *max = arg;
	uint64_t pos = strtoull(key + 4, NULL, 10); /* "wal/<position>" */

	(void)size;
	if (pos + 1 > *max)
		*max = pos + 1;
	return 0;
}

/* Wait (bounded) until wal/<pos> exists in st. */
static bool wait_landed(struct store *st, uint64_t pos)
{
	char name[40];
	struct store_stat ss;

	snprintf(name, sizeof(name), "wal/%020" PRIu64, pos);
	for (int i = 0; i < 2000; i++) {
		if (store_head(st, name, &ss) == 0)
			return true;
		usleep(10000);
	}
	return false;
}

/*
 * Writer A has WAL_WINDOW (4) entries in flight, at P..P+3: the one at
 * P + stuck is held in the store (a stalled request), the others landed.
 * Writer B opens meanwhile, then A's stalled request goes through.  What
 * A acknowledged is exactly its entries below P + stuck, and B (and a
 * reopen) finds exactly those: the entries past the stalled one landed but
 * are never acknowledged, and B's fence takes the stalled position and the
 * rest of A's window (docs/WAL.md, "Entries in flight").
 */
static int fencing_window_once(enum ec_kind kind, unsigned stuck)
{
	struct ec_backing bk;
	struct store *inner = NULL, *st1 = NULL, *st2 = NULL;
	struct fault_store *f = NULL;
	struct engine *e1 = NULL, *e2 = NULL;
	struct engine_opts eo;
	struct inflight_put p[4] = {0};
	char held[40], key[16];
	uint64_t tip = 0;
	int rc, ret = -1;

	rc = ec_backing_new(kind, "fencewin", &bk);
	if (rc)
		return rc == 77 ? 77 : -1;
	engine_opts_default(&eo);
	eo.cadence_ms = 400; /* groups close when a waiter asks, one per put */
	eo.inline_max = 256;
	eo.commit_inflight = 4;
	if ((rc = ec_backing_open(&bk, &inner)) || (rc = fault_store_new(inner, &f)))
		WFAIL("open store: %d", rc);
	inner = NULL;
	st1 = fault_store_as_store(f);
	if ((rc = ec_backing_open(&bk, &st2)))
		WFAIL("open store B: %d", rc);
	if ((rc = engine_open(st1, &eo, &e1)))
		WFAIL("open writer A: %d", rc);
	for (int i = 0; i < 5; i++) {
		snprintf(key, sizeof(key), "a/%d", i);
		if ((rc = put_key(e1, key, i == 4 ? ENGINE_WAIT | ENGINE_URGENT : 0)))
			WFAIL("A put %s: %d", key, rc);
	}
	if ((rc = store_list(st2, "wal/", NULL, 0, list_max_wal, &tip)))
		WFAIL("list wal/: %d", rc);
	/* A's next groups go at tip..tip+3; hold the entry at tip + stuck */
	snprintf(held, sizeof(held), "wal/%020" PRIu64, tip + stuck);
	fault_store_hold_key(f, held);
	for (unsigned i = 0; i < 4; i++) {
		p[i].e = e1;
		snprintf(p[i].key, sizeof(p[i].key), "a/q%u", i);
		if (pthread_create(&p[i].tid, NULL, inflight_main, &p[i]))
			WFAIL("pthread_create");
		p[i].started = true;
		/* one group each: the next put only once this one's entry is out */
		if (i == stuck ? !fault_store_wait_held(f, 1, 20000) : !wait_landed(st2, tip + i))
			WFAIL("A's entry %u (position %" PRIu64 ") neither landed nor held", i,
			      tip + i);
	}
	if ((rc = engine_open(st2, &eo, &e2)))
		WFAIL("open writer B: %d", rc);
	fault_store_hold_key(f, NULL);
	for (unsigned i = 0; i < 4; i++) {
		pthread_join(p[i].tid, NULL);
		p[i].started = false;
		if (i < stuck ? p[i].rc != 0 : p[i].rc != -ESTALE)
			WFAIL("A's put %u (entry %" PRIu64 ", held %" PRIu64
			      ") returned %d, want %d",
			      i, tip + i, tip + stuck, p[i].rc, i < stuck ? 0 : -ESTALE);
	}
	for (int round = 0; round < 2; round++) {
		for (unsigned i = 0; i < 4; i++) {
			rc = check_key(e2, p[i].key);
			if (i < stuck ? rc != 0 : rc != -ENOENT)
				WFAIL("%s: B reads A's %s (%s): %d", round ? "after reopen" : "B",
				      p[i].key, i < stuck ? "acknowledged" : "never acknowledged",
				      rc);
		}
		for (int i = 0; i < 5; i++) {
			snprintf(key, sizeof(key), "a/%d", i);
			if ((rc = check_key(e2, key)))
				WFAIL("B reads A's acknowledged %s: %d", key, rc);
		}
		if (round == 0) {
			if ((rc = put_key(e2, "b/1", ENGINE_WAIT | ENGINE_URGENT)))
				WFAIL("B put b/1: %d", rc);
		} else if ((rc = check_key(e2, "b/1"))) {
			WFAIL("after reopen, B's b/1: %d", rc);
		}
		if (round == 0) {
			struct engine_stats es;

			engine_get_stats(e2, &es);
			if (es.fence_positions < 4)
				WFAIL("B's fence took %" PRIu64 " positions, want at least 4",
				      es.fence_positions);
			if ((rc = engine_close(e2)))
				WFAIL("close B: %d", rc);
			e2 = NULL;
			if ((rc = engine_open(st2, &eo, &e2)))
				WFAIL("reopen: %d", rc);
		}
	}
	printf("fencing with entries in flight: ok (entry %u of 4 stalled: %u acknowledged)\n",
	       stuck + 1, stuck);
	ret = 0;
out:
	if (f)
		fault_store_hold_key(f, NULL);
	for (unsigned i = 0; i < 4; i++)
		if (p[i].started)
			pthread_join(p[i].tid, NULL);
	engine_close(e1);
	engine_close(e2);
	store_close(st1);
	store_close(st2);
	store_close(inner);
	ec_backing_destroy(&bk);
	return ret;
}

int ec_fencing_window(enum ec_kind kind)
{
	for (unsigned stuck = 0; stuck < 4; stuck++) {
		int rc = fencing_window_once(kind, stuck);
		if (rc)
			return rc;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Racing opens                                                        */
/* ------------------------------------------------------------------ */

#define RFAIL(...)                                                                                 \
	do {                                                                                       \
		fprintf(stderr, "FAIL open race (line %d): ", __LINE__);                           \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		goto out;                                                                          \
	} while (0)

struct racer {
	const struct ec_backing *bk; /* the shared location */
	unsigned i;                  /* racer number */
	int open_rc;                 /* engine_open */
	int put_rc;                  /* the waiting put of its key */
	uint64_t epoch;              /* epoch it claimed */
};

static void *racer_main(void *arg)
{
	struct racer *r = arg;
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o;
	struct engine_stats es;
	char key[16];

	engine_opts_default(&o);
	o.cadence_ms = 10;
	r->open_rc = ec_backing_open(r->bk, &st);
	if (!r->open_rc)
		r->open_rc = engine_open(st, &o, &e);
	if (!r->open_rc) {
		engine_get_stats(e, &es);
		r->epoch = es.epoch;
		snprintf(key, sizeof(key), "race/%u", r->i);
		r->put_rc = engine_put(e, key, strlen(key), key, strlen(key),
		                       ENGINE_WAIT | ENGINE_URGENT, NULL);
		engine_close(e);
	}
	store_close(st);
	return NULL;
}

/*
 * Four writers open the same empty location at once and each makes one
 * waiting put: epochs are distinct, a put is acknowledged or fails with
 * -ESTALE, and a reopen finds exactly the acknowledged puts.
 */
int ec_open_race(enum ec_kind kind)
{
	struct ec_backing bk;
	struct racer r[4];
	pthread_t tid[4];
	bool started[4] = {0};
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o;
	unsigned acked = 0;
	int rc, ret = -1;

	engine_opts_default(&o);
	o.cadence_ms = 10;
	rc = ec_backing_new(kind, "race", &bk);
	if (rc)
		return rc == 77 ? 77 : -1;
	for (unsigned i = 0; i < 4; i++) {
		r[i] = (struct racer){&bk, i, 0, 0, 0};
		started[i] = !pthread_create(&tid[i], NULL, racer_main, &r[i]);
		if (!started[i])
			r[i].open_rc = -EAGAIN;
	}
	for (unsigned i = 0; i < 4; i++)
		if (started[i])
			pthread_join(tid[i], NULL);
	for (unsigned i = 0; i < 4; i++) {
		if (r[i].open_rc && r[i].open_rc != -ESTALE && r[i].open_rc != -EAGAIN &&
		    r[i].open_rc != -EBUSY)
			RFAIL("racer %u: open returned %d", i, r[i].open_rc);
		if (!r[i].open_rc && r[i].put_rc && r[i].put_rc != -ESTALE)
			RFAIL("racer %u: put returned %d, want 0 or -ESTALE", i, r[i].put_rc);
		for (unsigned j = 0; j < i; j++)
			if (!r[i].open_rc && !r[j].open_rc && r[i].epoch == r[j].epoch)
				RFAIL("racers %u and %u both claimed epoch %" PRIu64, j, i,
				      r[i].epoch);
	}
	char who[256];
	size_t wn = 0;

	for (unsigned i = 0; i < 4; i++)
		wn += (size_t)snprintf(who + wn, sizeof(who) - wn,
		                       " racer %u: open %d epoch %" PRIu64 " put %d;", i,
		                       r[i].open_rc, r[i].epoch, r[i].put_rc);
	if ((rc = ec_backing_open(&bk, &st)) || (rc = engine_open(st, &o, &e)))
		RFAIL("reopen after the race: %d", rc);
	for (unsigned i = 0; i < 4; i++) {
		char key[16];
		void *v = NULL;
		size_t vn;
		bool ok = !r[i].open_rc && !r[i].put_rc;

		snprintf(key, sizeof(key), "race/%u", i);
		rc = engine_get(e, key, strlen(key), &v, &vn);
		free(v);
		if (ok && rc)
			RFAIL("racer %u's acknowledged put is lost: %d (%s at %s%s)", i, rc, who,
			      bk.dir, bk.prefix);
		if (!ok && rc != -ENOENT)
			RFAIL("racer %u's failed put is visible: %d (%s at %s%s)", i, rc, who,
			      bk.dir, bk.prefix);
		acked += ok;
	}
	printf("open race: %u of 4 writers' puts acknowledged\n", acked);
	ret = 0;
out:
	engine_close(e);
	store_close(st);
	ec_backing_destroy(&bk);
	return ret;
}
