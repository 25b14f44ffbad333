/*
 * test_engine_model.c - the engine against an in-memory reference map
 * (issue 6): random puts, deletes, overwrites and batches of inline and
 * blob values, with forced flushes and compactions (128 KiB MemTables),
 * GC passes with zero grace (then every value must still be readable: GC
 * never deletes what is referenced), repacks, clean reopens (which must
 * replay nothing) and crashes through the fault store at random calls
 * (after which the store must hold the last synced state plus a prefix of
 * the later writes, in order).  Equal after every reopen.
 *
 * The seed is printed (MEMWALFS_SEED replays it); MEMWALFS_MODEL_STEPS sets
 * the number of operations (default 20000, about 10 s here).
 *
 * When checks run: a check compares reads with the model, so it runs only
 * while no fault is armed.  An armed crash fires at the nth store write of
 * any thread - the committer, the flusher or compaction, not only the test
 * thread - and from then on every store call fails, so a read during an
 * armed window may get -EIO however correct the engine is.  The periodic
 * check that falls due while a crash is armed waits until the crash has
 * been recovered (or the arm expired).  Background threads that remain
 * while nothing is armed (committer, flusher, compaction after a flush; GC
 * is off, passes are run by the test) move data between MemTables and
 * SSTables but never change what a read returns, so checks need not wait
 * for them.
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

#include <cmocka.h>

#include "engine.h"
#include "fault.h"
#include "maint.h"
#include "store.h"
#include "testutil.h"

#define NKEYS 300
#define MAXPEND 64 /* pending batches before a forced sync */
#define MAXOPS 5   /* ops per batch */
#define INLINE_MAX 1024
#define BLOB_MAX 20000

/* The reference state of one key. */
struct mval {
	bool present; /* put (true) or absent/deleted */
	uint32_t len; /* value length */
	uint64_t ver; /* value bytes = tu_random_bytes(len, ver) */
};

/* One op of a pending batch. */
struct mop {
	unsigned key;
	struct mval v;
};

/* A batch applied (engine_write returned 0) but not yet known durable. */
struct mbatch {
	struct mop ops[MAXOPS];
	unsigned n;
};

static uint64_t rs;
static struct mval durable[NKEYS];      /* state at the last successful sync */
static struct mbatch pend[MAXPEND + 1]; /* applied since, in order */
static unsigned npend;
static uint64_t next_ver = 1;
static uint8_t vbuf[BLOB_MAX];

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static void key_of(unsigned k, char *buf)
{
	snprintf(buf, 16, "k%04u", k);
}

/* The current expected state of key k (durable + pending). */
static struct mval current(unsigned k)
{
	struct mval v = durable[k];

	for (unsigned b = 0; b < npend; b++)
		for (unsigned i = 0; i < pend[b].n; i++)
			if (pend[b].ops[i].key == k)
				v = pend[b].ops[i].v;
	return v;
}

/* Expected state of key k after the first upto pending batches. */
static struct mval at_prefix(unsigned k, unsigned upto)
{
	struct mval v = durable[k];

	for (unsigned b = 0; b < upto; b++)
		for (unsigned i = 0; i < pend[b].n; i++)
			if (pend[b].ops[i].key == k)
				v = pend[b].ops[i].v;
	return v;
}

static void settle(unsigned upto)
{
	for (unsigned b = 0; b < upto; b++)
		for (unsigned i = 0; i < pend[b].n; i++)
			durable[pend[b].ops[i].key] = pend[b].ops[i].v;
	npend = 0;
}

/*
 * Does the engine hold exactly v for key k?  Returns 1 yes, 0 no; fails on
 * errors (no fault is armed when this runs: see the file header).
 */
static int matches(struct engine *e, unsigned k, const struct mval *v, const char *when)
{
	char key[16];
	void *got = NULL;
	size_t n = 0;
	int rc, ok;

	key_of(k, key);
	rc = engine_get(e, key, strlen(key), &got, &n);
	if (rc == -ENOENT)
		return !v->present;
	if (rc)
		fail_msg("%s: get %s: %d (a referenced object is gone or corrupt)", when, key, rc);
	ok = v->present && n == v->len;
	if (ok) {
		tu_random_bytes(vbuf, n, v->ver);
		ok = memcmp(got, vbuf, n) == 0;
	}
	free(got);
	return ok;
}

/* Every key equals the current model. */
static void check_all(struct engine *e, const char *when)
{
	for (unsigned k = 0; k < NKEYS; k++) {
		struct mval v = current(k);

		if (!matches(e, k, &v, when))
			fail_msg("%s: key %u differs from the model (present %d len %u ver %" PRIu64
			         ")",
			         when, k, v.present, v.len, v.ver);
	}
}

/* Also a scan: keys in order, same set as the model. */
static void check_scan(struct engine *e)
{
	struct engine_iter *it = NULL;
	unsigned expect = 0, seen = 0;
	int rc;

	for (unsigned k = 0; k < NKEYS; k++)
		expect += current(k).present;
	for (rc = engine_iter_new(e, NULL, 0, NULL, 0, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t kn;
		const char *key = engine_iter_key(it, &kn);
		char buf[16] = {0};
		unsigned k;

		assert_true(kn > 1 && kn < sizeof(buf));
		memcpy(buf, key, kn);
		k = (unsigned)atoi(buf + 1);

		assert_true(k < NKEYS);
		assert_true(current(k).present);
		seen++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(engine_iter_status(it), 0);
	engine_iter_free(it);
	assert_int_equal(seen, expect);
}

static void opts(struct engine_opts *o)
{
	engine_opts_default(o);
	o->cadence_ms = 5;
	o->inline_max = INLINE_MAX;
	o->memtable_max_bytes = 128 << 10;
	o->cache_bytes = 2 << 20;
	o->gc_interval_ms = ENGINE_GC_OFF; /* passes are run by the test */
	o->gc_grace_sec = ENGINE_GC_NO_GRACE;
	o->repack_below_pct = 60;
	o->commit_retry_ms = ENGINE_NO_RETRY; /* a crash fences at once, as the model expects */
}

/* A random batch; returns engine_write()'s result and records it when applied. */
static int random_write(struct engine *e)
{
	struct engine_batch *b = NULL;
	struct mbatch mb = {.n = 1 + (rnd() % 4 == 0 ? (unsigned)(rnd() % (MAXOPS - 1)) : 0)};
	int rc;

	assert_int_equal(engine_batch_new(&b), 0);
	for (unsigned i = 0; i < mb.n; i++) {
		struct mop *op = &mb.ops[i];
		char key[16];

		op->key = (unsigned)(rnd() % NKEYS);
		key_of(op->key, key);
		if (rnd() % 100 < 20) {
			op->v = (struct mval){.present = false};
			assert_int_equal(engine_batch_delete(b, key, strlen(key)), 0);
			continue;
		}
		op->v.present = true;
		op->v.ver = next_ver++;
		op->v.len = rnd() % 100 < 35
		                ? INLINE_MAX + (uint32_t)(rnd() % (BLOB_MAX - INLINE_MAX))
		                : (uint32_t)(rnd() % 200);
		tu_random_bytes(vbuf, op->v.len, op->v.ver);
		assert_int_equal(engine_batch_put(b, key, strlen(key), vbuf, op->v.len), 0);
	}
	rc = engine_write(e, b, 0, NULL);
	engine_batch_free(b);
	if (rc == 0)
		pend[npend++] = mb;
	return rc;
}

/* After a crash: the engine must hold durable + some prefix of pend. */
static void check_after_crash(struct engine *e)
{
	int k;

	for (k = (int)npend; k >= 0; k--) {
		bool ok = true;

		for (unsigned key = 0; key < NKEYS && ok; key++) {
			struct mval v = at_prefix(key, (unsigned)k);

			ok = matches(e, key, &v, "after a crash");
		}
		if (ok)
			break;
	}
	if (k < 0)
		fail_msg("after a crash the store holds no prefix of the %u unsynced batches",
		         npend);
	settle((unsigned)k);
}

/* The crash: drop the engine, restart the store, reopen, compare, GC, compare. */
static struct engine *crash_and_recover(struct tu_store *t, struct engine *e,
                                        const struct engine_opts *o)
{
	if (!fault_store_crashed(t->fault))
		fault_store_crash(t->fault);
	engine_close(e);
	e = NULL;
	assert_int_equal(tu_store_reopen(t), 0);
	assert_int_equal(engine_open(t->store, o, &e), 0);
	check_after_crash(e);
	check_all(e, "after a crash");
	/* GC right after recovery must not take anything still referenced */
	assert_int_equal(maint_gc_now(e, NULL), 0);
	check_all(e, "after GC following a crash");
	return e;
}

static void test_model(void **state)
{
	struct tu_store *t = NULL;
	struct engine *e = NULL;
	struct engine_opts o;
	struct engine_stats s;
	const char *env = getenv("MEMWALFS_MODEL_STEPS");
	unsigned steps = env ? (unsigned)atoi(env) : 20000;
	unsigned crashes = 0, reopens = 0, gcs = 0, flushes = 0, compactions = 0;
	uint64_t deleted = 0, repacked = 0;
	bool armed = false;     /* a crash is armed: no check may run (file header) */
	bool check_due = false; /* the periodic check fell due while armed */
	unsigned armed_for = 0;
	int rc;
	(void)state;

	rs = tu_seed("engine_model") | 1;
	assert_int_equal(tu_store_open("fault", &t), 0);
	opts(&o);
	assert_int_equal(engine_open(t->store, &o, &e), 0);
	for (unsigned step = 0; step < steps; step++) {
		unsigned r = (unsigned)(rnd() % 1000);

		if (r < 880) {
			rc = random_write(e);
		} else if (r < 950) {
			rc = engine_sync(e);
			if (rc == 0)
				settle(npend);
		} else if (r < 962) {
			rc = maint_flush_now(e);
			flushes += rc == 0;
		} else if (r < 970) {
			/* with a frozen MemTable whose flush fails (armed, crashed) this
			 * returns the flush's error (it used to wait for ever) */
			rc = maint_compact_now(e);
			compactions += rc == 0;
		} else if (r < 985) {
			struct maint_gc_result g;

			rc = maint_gc_now(e, &g);
			if (rc == 0) {
				gcs++;
				deleted += g.deleted;
				repacked += g.repacked_blobs;
				if (g.repacked_blobs) /* the rewrites are synced */
					settle(npend);
				if (!armed)
					check_all(e, "after a GC pass");
			}
		} else if (r < 993 && !armed) {
			/* clean close: everything durable and flushed; nothing to replay */
			assert_int_equal(engine_close(e), 0);
			settle(npend);
			assert_int_equal(engine_open(t->store, &o, &e), 0);
			engine_get_stats(e, &s);
			assert_int_equal(s.replay_entries, 0);
			check_all(e, "after a clean reopen");
			reopens++;
			rc = 0;
		} else if (!armed) {
			/* crash at a random later write (landing or not) */
			fault_store_seed(t->fault, rnd());
			fault_store_crash_at(t->fault, FAULT_WRITES, 1 + rnd() % 30,
			                     FAULT_LAND_RANDOM);
			armed = true;
			armed_for = 0;
			rc = 0;
		} else {
			rc = 0;
		}
		if (npend >= MAXPEND) {
			int src = engine_sync(e);

			if (src == 0)
				settle(npend);
			else
				rc = rc ? rc : src;
		}
		if (armed && (rc || fault_store_crashed(t->fault) || ++armed_for > 200)) {
			e = crash_and_recover(t, e, &o);
			armed = false;
			crashes++;
			continue;
		}
		if (rc)
			fail_msg("step %u: unexpected error %d without a fault", step, rc);
		if (step % 250 == 0)
			check_due = true;
		if (check_due && !armed) {
			check_all(e, "periodic");
			check_due = false;
		}
	}
	if (armed)
		e = crash_and_recover(t, e, &o);
	assert_int_equal(engine_sync(e), 0);
	settle(npend);
	check_all(e, "end");
	check_scan(e);
	/* the end: flush, compact, two GC passes; all still readable */
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(maint_compact_now(e), 0);
	assert_int_equal(maint_gc_now(e, NULL), 0);
	assert_int_equal(maint_flush_now(e), 0);
	assert_int_equal(maint_gc_now(e, NULL), 0);
	check_all(e, "after the final GC");
	engine_get_stats(e, &s);
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(engine_open(t->store, &o, &e), 0);
	check_all(e, "final reopen");
	check_scan(e);
	assert_int_equal(engine_close(e), 0);
	print_message("model: %u steps, %u crashes, %u clean reopens, %u flushes, %u compactions, "
	              "%u GC passes (%" PRIu64 " objects deleted, %" PRIu64 " blobs repacked)\n",
	              steps, crashes, reopens, flushes, compactions, gcs, deleted, repacked);
	assert_true(gcs > 0);
	tu_store_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
