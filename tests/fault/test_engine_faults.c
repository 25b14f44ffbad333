/*
 * test_engine_faults.c - the engine under store failures, fencing and
 * corruption (suite fault).
 *
 * - fail the nth store write for n = 1, 2, ... until no fault fires (SQLite
 *   do_faultsim_test), with the call landing or not: the failed group fences
 *   the writer (sticky error, no later write acknowledged) and a reopen finds
 *   exactly the acknowledged writes (plus, when the failed call landed, at
 *   most the one write whose acknowledgement was lost);
 * - the same for every store call during a reopen of a non-empty store;
 * - every waiter of a failed group gets the error;
 * - random transient "throttling" errors (-EAGAIN, -ETIMEDOUT landed);
 * - fencing by a second writer (engine_fence.c);
 * - corruption (LevelDB corruption_test.cc): flip bytes in, or truncate,
 *   each WAL entry, pack and manifest: open and reads give -EUCLEAN or
 *   -EBADMSG with a log line naming the object, or the right data; never a
 *   crash and never wrong data.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "engine_check.h"
#include "coding.h"
#include "fault.h"
#include "format.h"
#include "store.h"

#define NOPS 14

/* The value of script op i (blob-sized for every third op). */
static size_t op_vlen(unsigned i)
{
	return i % 3 == 1 ? 3000 + i * 7 : 20 + i;
}

static void op_key(unsigned i, char *key, size_t n)
{
	snprintf(key, n, "k/%02u", i);
}

static void op_val(unsigned i, uint8_t *v)
{
	uint64_t x = ec_mix(i + 1000);

	for (size_t j = 0; j < op_vlen(i); j++) {
		if (j % 8 == 0)
			x = ec_mix(x);
		v[j] = (uint8_t)(x >> (8 * (j % 8)));
	}
}

/* Script op i: a put (ENGINE_WAIT, URGENT every other one), op 7 a batch of two. */
static int script_op(struct engine *e, unsigned i)
{
	uint8_t v[4200];
	char key[16];
	int flags = ENGINE_WAIT | (i % 2 ? ENGINE_URGENT : 0);

	op_key(i, key, sizeof(key));
	op_val(i, v);
	if (i != 7)
		return engine_put(e, key, strlen(key), v, op_vlen(i), flags, NULL);

	struct engine_batch *b = NULL;
	int rc = engine_batch_new(&b);

	if (!rc)
		rc = engine_batch_put(b, key, strlen(key), v, op_vlen(i));
	if (!rc)
		rc = engine_batch_put(b, "k/7b", 4, v, 10);
	if (!rc)
		rc = engine_batch_delete(b, "k/00", 4); /* deletes op 0's key */
	if (!rc)
		rc = engine_write(e, b, flags, NULL);
	engine_batch_free(b);
	return rc;
}

/* Check that the store holds exactly the first n script ops. */
static void check_prefix(struct engine *e, unsigned n, const char *what)
{
	uint8_t want[4200];
	char key[16];

	for (unsigned i = 0; i < NOPS; i++) {
		void *v = NULL;
		size_t vn = 0;
		int rc;
		bool present = i < n && !(i == 0 && n > 7);

		op_key(i, key, sizeof(key));
		rc = engine_get(e, key, strlen(key), &v, &vn);
		if (present) {
			op_val(i, want);
			if (rc || vn != op_vlen(i) || memcmp(v, want, vn))
				fail_msg("%s: %s (op %u of %u acknowledged) rc %d len %zu", what,
				         key, i, n, rc, vn);
		} else if (rc != -ENOENT) {
			fail_msg("%s: %s (op %u, %u acknowledged) should be absent, rc %d", what,
			         key, i, n, rc);
		}
		free(v);
	}
	void *v = NULL;
	size_t vn;
	int rc = engine_get(e, "k/7b", 4, &v, &vn);

	free(v);
	if ((n > 7) != (rc == 0))
		fail_msg("%s: batch key k/7b rc %d with %u ops acknowledged", what, rc, n);
}

static struct engine_opts quick_opts(void)
{
	struct engine_opts o;

	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.inline_max = 1024;
	o.commit_retry_ms = ENGINE_NO_RETRY; /* these check that a failed commit stops the writer */
	return o;
}

/* Open a truth engine on a new handle of bk; check its first n ops (n or n+1 if maybe). */
static void check_truth(const struct ec_backing *bk, unsigned n, bool maybe_one_more,
                        const char *what)
{
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o = quick_opts();
	int rc;

	assert_int_equal(ec_backing_open(bk, &st), 0);
	rc = engine_open(st, &o, &e);
	if (rc)
		fail_msg("%s: reopen failed %d", what, rc);
	if (maybe_one_more && n < NOPS) {
		char key[16];
		void *v = NULL;
		size_t vn;

		op_key(n, key, sizeof(key));
		if (engine_get(e, key, strlen(key), &v, &vn) == 0)
			n++;
		free(v);
	}
	check_prefix(e, n, what);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* stderr captured into a temporary file while an engine call runs. */
struct capture {
	int saved; /* the real stderr */
	FILE *tmp; /* where it goes meanwhile */
};

static void cap_begin(struct capture *c)
{
	fflush(stderr);
	c->saved = dup(2);
	c->tmp = tmpfile();
	assert_non_null(c->tmp);
	dup2(fileno(c->tmp), 2);
}

/* Restore stderr; return what was logged (malloc()ed, NUL-terminated). */
static char *cap_end(struct capture *c)
{
	long n;
	char *buf;

	fflush(stderr);
	dup2(c->saved, 2);
	close(c->saved);
	n = ftell(c->tmp);
	buf = calloc(1, (size_t)(n > 0 ? n : 0) + 1);
	assert_non_null(buf);
	rewind(c->tmp);
	if (n > 0 && fread(buf, 1, (size_t)n, c->tmp) != (size_t)n)
		buf[0] = 0;
	fclose(c->tmp);
	return buf;
}

struct golden {
	struct ec_backing bk; /* the intact store */
	struct store *st;     /* a handle on it */
	char *keys[64];       /* its objects */
	size_t nkeys;         /* used */
};

static int golden_add(void *arg, const char *key, uint64_t size)
{
	struct golden *g = arg;

	(void)size;
	if (g->nkeys < 64)
		g->keys[g->nkeys++] = strdup(key);
	return 0;
}

static int copy_store(struct golden *g, struct store *dst)
{
	for (size_t i = 0; i < g->nkeys; i++) {
		void *v = NULL;
		size_t n = 0;
		int rc = store_get(g->st, g->keys[i], 0, STORE_TO_END, &v, &n);

		if (!rc)
			rc = store_put(dst, g->keys[i], v, n);
		free(v);
		if (rc)
			return rc;
	}
	return 0;
}

/* One fail-nth run; returns whether the fault fired. */
static bool failnth_once(uint64_t n, int flags, unsigned mask)
{
	struct ec_backing bk;
	struct store *inner = NULL;
	struct fault_store *f = NULL;
	struct engine *e = NULL;
	struct engine_opts o = quick_opts();
	struct engine_stats es;
	char what[96];
	unsigned acked = 0;
	int first_err = 0, rc;
	bool fired;

	snprintf(what, sizeof(what), "fail write call %" PRIu64 "%s", n,
	         flags & FAULT_LAND ? " (landed)" : "");
	assert_int_equal(ec_backing_new(EC_LOCAL, "failnth", &bk), 0);
	assert_int_equal(ec_backing_open(&bk, &inner), 0);
	assert_int_equal(fault_store_new(inner, &f), 0);
	assert_int_equal(engine_open(fault_store_as_store(f), &o, &e), 0);
	fault_store_fail_nth(f, mask, n, -EIO, flags);
	for (unsigned i = 0; i < NOPS; i++) {
		rc = script_op(e, i);
		if (rc && !first_err) {
			first_err = rc;
			continue;
		}
		if (!rc && first_err)
			fail_msg("%s: op %u acknowledged after op %u failed with %d", what, i,
			         acked, first_err);
		if (first_err && rc != first_err)
			fail_msg("%s: op %u returned %d, not the sticky %d", what, i, rc,
			         first_err);
		if (!rc)
			acked++;
	}
	engine_get_stats(e, &es);
	if (first_err && es.sticky_error != first_err)
		fail_msg("%s: stats.sticky_error %d, want %d", what, es.sticky_error, first_err);
	if (first_err && engine_sync(e) != first_err)
		fail_msg("%s: sync after the failure did not return %d", what, first_err);
	/*
	 * The clean close writes too (the final flush: an SSTable and a
	 * manifest), so whether the fault fired is known only after it; a fault
	 * there costs the flush, not data (the next open replays the WAL).
	 */
	rc = engine_close(e);
	fired = fault_store_fired(f) > 0;
	if (!fired && rc)
		fail_msg("%s: close without a fault returned %d", what, rc);
	store_close(fault_store_as_store(f));
	check_truth(&bk, acked, (flags & FAULT_LAND) || !first_err, what);
	ec_backing_destroy(&bk);
	return fired;
}

static void test_fail_nth_write(void **state)
{
	(void)state;
	uint64_t n;

	for (n = 1; failnth_once(n, 0, FAULT_WRITES); n++)
		;
	print_message("fail-nth write: %" PRIu64 " fault points, not landed\n", n - 1);
	for (n = 1; failnth_once(n, FAULT_LAND, FAULT_WRITES); n++)
		;
	print_message("fail-nth write: %" PRIu64 " fault points, landed\n", n - 1);
	for (n = 1; failnth_once(n, FAULT_PERSIST, FAULT_ALL); n++)
		;
	print_message("fail-nth any call, persistent: %" PRIu64 " fault points\n", n - 1);
}

/*
 * A golden store holding the whole script: ops 0-6 then a clean close (the
 * engine may flush them into an SSTable and cover their WAL entries), ops
 * 7-13 durable in WAL entries that no manifest covers (the writer then
 * crashes, so nothing flushes them).
 */
static void golden_make(struct golden *g)
{
	struct engine *e = NULL;
	struct engine_opts o = quick_opts();
	struct store *st = NULL;
	struct fault_store *f = NULL;

	memset(g, 0, sizeof(*g));
	assert_int_equal(ec_backing_new(EC_LOCAL, "golden", &g->bk), 0);
	assert_int_equal(ec_backing_open(&g->bk, &g->st), 0);
	assert_int_equal(engine_open(g->st, &o, &e), 0);
	for (unsigned i = 0; i < 7; i++)
		assert_int_equal(script_op(e, i), 0);
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(ec_backing_open(&g->bk, &st), 0);
	assert_int_equal(fault_store_new(st, &f), 0);
	assert_int_equal(engine_open(fault_store_as_store(f), &o, &e), 0);
	for (unsigned i = 7; i < NOPS; i++)
		assert_int_equal(script_op(e, i), 0);
	fault_store_crash(f);
	engine_close(e);
	store_close(fault_store_as_store(f));
	assert_int_equal(store_list(g->st, "", NULL, 0, golden_add, g), 0);
}

/* The WAL position covered by the newest manifest of g (0 if none). */
static uint64_t golden_covered(struct golden *g, const char *latest)
{
	void *v = NULL;
	size_t n = 0;
	uint64_t cov = 0;

	if (latest && !store_get(g->st, latest, 0, STORE_TO_END, &v, &n) &&
	    n >= MANIFEST_HEADER_SIZE)
		cov = get_be64((const uint8_t *)v + MAN_OFF_WAL_COVERED);
	free(v);
	return cov;
}

static void golden_free(struct golden *g)
{
	for (size_t i = 0; i < g->nkeys; i++)
		free(g->keys[i]);
	store_close(g->st);
	ec_backing_destroy(&g->bk);
}

/*
 * Every store call of a reopen of a copy of the golden store fails in turn
 * (landed or not): open fails cleanly or works with all the data, and the
 * data is intact afterwards.
 */
static void test_fail_nth_open(void **state)
{
	(void)state;
	struct golden g;
	struct engine_opts o = quick_opts();
	uint64_t n;
	unsigned opened = 0;

	golden_make(&g);
	for (n = 1;; n++) {
		struct ec_backing bk;
		struct store *st = NULL;
		struct fault_store *f = NULL;
		struct engine *e = NULL;
		bool fired;
		int rc;

		assert_int_equal(ec_backing_new(EC_LOCAL, "failopen", &bk), 0);
		assert_int_equal(ec_backing_open(&bk, &st), 0);
		assert_int_equal(copy_store(&g, st), 0);
		assert_int_equal(fault_store_new(st, &f), 0);
		fault_store_fail_nth(f, FAULT_ALL, n, -EIO, n % 2 ? FAULT_LAND : 0);
		rc = engine_open(fault_store_as_store(f), &o, &e);
		fired = fault_store_fired(f) > 0;
		if (!rc) {
			opened++;
			fault_store_clear(f);
			check_prefix(e, NOPS, "open with one failed call");
			engine_close(e);
		} else if (rc == -EUCLEAN || rc == -EINVAL) {
			fail_msg("open with store call %" PRIu64 " failing returned %d: a "
			         "transient store error must not look like corruption",
			         n, rc);
		}
		store_close(fault_store_as_store(f));
		check_truth(&bk, NOPS, false, "after an open with a failed call");
		ec_backing_destroy(&bk);
		if (!fired)
			break;
	}
	print_message("open: %" PRIu64 " fault points (%u opens worked despite the fault)\n", n - 1,
	              opened);
	golden_free(&g);
}

struct waiter {
	struct engine *e; /* the engine */
	unsigned i;       /* which key */
	int rc;           /* what the put returned */
};

static void *waiter_main(void *arg)
{
	struct waiter *w = arg;
	char key[16];
	uint8_t v[3000];

	snprintf(key, sizeof(key), "w/%u", w->i);
	memset(v, (int)w->i, sizeof(v));
	w->rc = engine_put(w->e, key, strlen(key), v, w->i % 2 ? sizeof(v) : 30, ENGINE_WAIT, NULL);
	return NULL;
}

/* Four waiters in one group whose WAL write fails: all get the error. */
static void test_waiters_get_error(void **state)
{
	(void)state;
	struct ec_backing bk;
	struct store *st = NULL;
	struct fault_store *f = NULL;
	struct engine *e = NULL;
	struct engine_opts o = quick_opts();
	struct waiter w[4];
	pthread_t tid[4];

	o.cadence_ms = 300;
	assert_int_equal(ec_backing_new(EC_LOCAL, "waiters", &bk), 0);
	assert_int_equal(ec_backing_open(&bk, &st), 0);
	assert_int_equal(fault_store_new(st, &f), 0);
	assert_int_equal(engine_open(fault_store_as_store(f), &o, &e), 0);
	assert_int_equal(engine_put(e, "before", 6, "x", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT), 1, -EIO, 0);
	for (unsigned i = 0; i < 4; i++) {
		w[i] = (struct waiter){e, i, 1};
		assert_int_equal(pthread_create(&tid[i], NULL, waiter_main, &w[i]), 0);
	}
	for (unsigned i = 0; i < 4; i++)
		pthread_join(tid[i], NULL);
	assert_true(fault_store_fired(f) > 0);
	for (unsigned i = 0; i < 4; i++)
		if (w[i].rc != -EIO)
			fail_msg("waiter %u of the failed group got %d, want -EIO", i, w[i].rc);
	assert_int_equal(engine_put(e, "after", 5, "y", 1, 0, NULL), -EIO);
	assert_int_equal(engine_sync(e), -EIO);
	engine_close(e);
	store_close(fault_store_as_store(f));

	assert_int_equal(ec_backing_open(&bk, &st), 0);
	assert_int_equal(engine_open(st, &o, &e), 0);
	void *v = NULL;
	size_t vn;

	assert_int_equal(engine_get(e, "before", 6, &v, &vn), 0);
	free(v);
	for (unsigned i = 0; i < 4; i++) {
		char key[16];

		snprintf(key, sizeof(key), "w/%u", i);
		assert_int_equal(engine_get(e, key, strlen(key), &v, &vn), -ENOENT);
	}
	assert_int_equal(engine_get(e, "after", 5, &v, &vn), -ENOENT);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
	ec_backing_destroy(&bk);
}

/*
 * Random throttling errors: whatever fails, a reopen finds what was
 * acknowledged.  16 runs with seeds base .. base+15 (base from ec_seed():
 * printed, MEMWALFS_SEED replays).
 */
static void test_throttling(void **state)
{
	(void)state;
	unsigned failed_runs = 0;
	uint64_t base = ec_seed("engine_faults throttling");

	for (uint64_t seed = base; seed - base < 16; seed++) {
		struct ec_backing bk;
		struct store *st = NULL;
		struct fault_store *f = NULL;
		struct engine *e = NULL;
		struct engine_opts o = quick_opts();
		unsigned acked = 0;
		bool land = seed % 2 == 0;
		int rc = 0;
		char what[64];

		snprintf(what, sizeof(what), "throttling seed %" PRIu64, seed);
		assert_int_equal(ec_backing_new(EC_LOCAL, "throttle", &bk), 0);
		assert_int_equal(ec_backing_open(&bk, &st), 0);
		assert_int_equal(fault_store_new(st, &f), 0);
		assert_int_equal(engine_open(fault_store_as_store(f), &o, &e), 0);
		fault_store_seed(f, seed);
		fault_store_fail_random(f, FAULT_WRITES, 0.08, land ? -ETIMEDOUT : -EAGAIN,
		                        land ? FAULT_LAND : 0);
		for (unsigned i = 0; i < NOPS && !rc; i++) {
			rc = script_op(e, i);
			acked += rc == 0;
		}
		if (rc) {
			failed_runs++;
			if (script_op(e, NOPS - 1) == 0)
				fail_msg("%s: a write was acknowledged after the failure %d", what,
				         rc);
		}
		engine_close(e);
		store_close(fault_store_as_store(f));
		check_truth(&bk, acked, land || !rc, what);
		ec_backing_destroy(&bk);
	}
	print_message("throttling: %u of 16 runs (seeds %" PRIu64 "..+15) hit an error\n",
	              failed_runs, base);
}

static void test_fencing(void **state)
{
	(void)state;
	assert_int_equal(ec_fencing(EC_LOCAL), 0);
}

static void test_fencing_window(void **state)
{
	(void)state;
	assert_int_equal(ec_fencing_window(EC_LOCAL), 0);
}

/* ------------------------------------------------------------------ */
/* Corruption                                                          */
/* ------------------------------------------------------------------ */

static bool clear_error(int rc)
{
	return rc == -EUCLEAN || rc == -EBADMSG;
}

enum mutation { FLIP_FIRST, FLIP_VERSION, FLIP_MIDDLE, FLIP_LAST, TRUNC_HALF, TRUNC_ZERO, MUT__N };
static const char *const mut_name[] = {"flip byte 0",    "flip byte 5",      "flip middle byte",
                                       "flip last byte", "truncate to half", "truncate to 0"};

/*
 * Corrupt object g->keys[oi] by mutation m in a copy of the golden store,
 * open and read everything.  Returns 1 if the corruption was reported.
 */
static int corrupt_case(struct golden *g, size_t oi, enum mutation m, bool latest_manifest,
                        uint64_t covered)
{
	const char *obj = g->keys[oi];
	struct ec_backing bk;
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o = quick_opts();
	struct capture cap;
	char what[160];
	void *v = NULL;
	size_t n = 0, errors = 0;
	int rc, detected = 0;
	char *log;

	snprintf(what, sizeof(what), "%s of %s", mut_name[m], obj);
	assert_int_equal(ec_backing_new(EC_LOCAL, "corrupt", &bk), 0);
	assert_int_equal(ec_backing_open(&bk, &st), 0);
	assert_int_equal(copy_store(g, st), 0);
	assert_int_equal(store_get(st, obj, 0, STORE_TO_END, &v, &n), 0);
	uint8_t *b = v;

	switch (m) {
	case FLIP_FIRST:
		if (n)
			b[0] ^= 0x40;
		break;
	case FLIP_VERSION:
		if (n > 5)
			b[5] ^= 0x01;
		break;
	case FLIP_MIDDLE:
		if (n)
			b[n / 2] ^= 0x08;
		break;
	case FLIP_LAST:
		if (n)
			b[n - 1] ^= 0x80;
		break;
	case TRUNC_HALF:
		n /= 2;
		break;
	case TRUNC_ZERO:
		n = 0;
		break;
	default:
		break;
	}
	assert_int_equal(store_put(st, obj, v, n), 0);
	free(v);

	cap_begin(&cap);
	rc = engine_open(st, &o, &e);
	if (!rc) {
		uint8_t want[4200];
		char key[16];

		for (unsigned i = 0; i < NOPS; i++) {
			bool present = !(i == 0);

			op_key(i, key, sizeof(key));
			v = NULL;
			int r = engine_get(e, key, strlen(key), &v, &n);

			op_val(i, want);
			if (clear_error(r)) {
				errors++;
			} else if (present && (r || n != op_vlen(i) || memcmp(v, want, n))) {
				free(v);
				cap_end(&cap);
				fail_msg("%s: get %s gave wrong data (rc %d, %zu bytes)", what, key,
				         r, n);
			} else if (!present && r != -ENOENT) {
				free(v);
				cap_end(&cap);
				fail_msg("%s: deleted key %s read back (rc %d)", what, key, r);
			}
			free(v);
		}
		struct engine_iter *it = NULL;

		for (rc = engine_iter_new(e, "k/", 2, "k0", 2, &it); !rc && engine_iter_valid(it);
		     engine_iter_next(it)) {
			const void *iv;
			size_t ivn;

			if (clear_error(engine_iter_value(it, &iv, &ivn))) {
				errors++;
				break;
			}
		}
		if (it && clear_error(engine_iter_status(it)))
			errors++;
		engine_iter_free(it);
		rc = 0;
		engine_close(e);
	}
	log = cap_end(&cap);
	if (rc && !clear_error(rc))
		fail_msg("%s: open returned %d, want -EUCLEAN or -EBADMSG\nlog:\n%s", what, rc,
		         log);
	if ((rc || errors) && !strstr(log, obj))
		fail_msg("%s: the error (open %d, %zu read errors) does not name the object; "
		         "log:\n%s",
		         what, rc, errors, log);
	detected = rc || errors || strstr(log, obj); /* noticed, even if worked around */
	uint64_t pos = 0;

	if (!detected && !strncmp(obj, "wal/", 4) && !fmt_parse_wal_name(obj, &pos) &&
	    pos >= covered)
		fail_msg("%s: a corrupt WAL entry that no manifest covers went unnoticed "
		         "(open and reads fine)",
		         what);
	if (!detected && !strncmp(obj, "sst/", 4) && (m == FLIP_MIDDLE || m >= TRUNC_HALF))
		fail_msg("%s: a corrupt SSTable went unnoticed", what);
	if (!detected && latest_manifest)
		fail_msg("%s: a corrupt latest manifest went unnoticed", what);
	if (!detected && !strncmp(obj, "pack/", 5) && (m == FLIP_MIDDLE || m >= TRUNC_HALF))
		fail_msg("%s: corrupt blob bytes went unnoticed", what);
	free(log);
	store_close(st);
	ec_backing_destroy(&bk);
	return detected;
}

static void test_corruption(void **state)
{
	(void)state;
	struct golden g;
	unsigned per[4] = {0}, hit[4] = {0};
	const char *latest = NULL;
	uint64_t covered;

	golden_make(&g);
	for (size_t i = 0; i < g.nkeys; i++)
		if (!strncmp(g.keys[i], "manifest/", 9))
			latest = g.keys[i];
	covered = golden_covered(&g, latest);
	for (size_t i = 0; i < g.nkeys; i++) {
		int kind = !strncmp(g.keys[i], "wal/", 4)        ? 0
		           : !strncmp(g.keys[i], "pack/", 5)     ? 1
		           : !strncmp(g.keys[i], "manifest/", 9) ? 2
		           : !strncmp(g.keys[i], "sst/", 4)      ? 3
		                                                 : -1;

		for (int m = 0; m < MUT__N; m++) {
			int d = corrupt_case(&g, i, (enum mutation)m, g.keys[i] == latest, covered);

			if (kind >= 0) {
				per[kind]++;
				hit[kind] += (unsigned)d;
			}
		}
	}
	if (!per[0] || !per[1] || !per[2])
		fail_msg("expected wal/, pack/ and manifest/ objects, found %u %u %u cases", per[0],
		         per[1], per[2]);
	print_message("corruption: %zu objects (WAL covered below %" PRIu64 "); detected wal "
	              "%u/%u, pack %u/%u, manifest %u/%u, sst %u/%u\n",
	              g.nkeys, covered, hit[0], per[0], hit[1], per[1], hit[2], per[2], hit[3],
	              per[3]);
	golden_free(&g);
}

/* Four writers open one location at once (engine_fence.c). */
static void test_open_race(void **state)
{
	(void)state;
	for (unsigned round = 0; round < 5; round++)
		assert_int_equal(ec_open_race(EC_LOCAL), 0);
}

struct handle_putter {
	struct store *st; /* its own handle on the shared directory */
	unsigned i;       /* which one */
	int bad;          /* first unexpected return */
};

static void *handle_put_main(void *arg)
{
	struct handle_putter *h = arg;

	for (unsigned k = 0; k < 300 && !h->bad; k++) {
		char key[32];
		int rc;

		snprintf(key, sizeof(key), "h/%u-%u", h->i, k); /* one parent dir */
		rc = k % 2 ? store_put(h->st, key, key, strlen(key))
		           : store_put_if_absent(h->st, key, key, strlen(key));
		if (rc)
			h->bad = rc;
	}
	return NULL;
}

/*
 * Root cause of test_open_race failures seen on the local store: two store
 * handles on one directory in one process, writing distinct keys at once,
 * must never fail (a spurious -EEXIST from put_if_absent makes the engine
 * skip a WAL position).
 */
static void test_two_handles_one_dir(void **state)
{
	(void)state;
	struct ec_backing bk;
	struct handle_putter h[2];
	pthread_t tid[2];

	assert_int_equal(ec_backing_new(EC_LOCAL, "handles", &bk), 0);
	for (unsigned i = 0; i < 2; i++) {
		h[i] = (struct handle_putter){NULL, i, 0};
		assert_int_equal(ec_backing_open(&bk, &h[i].st), 0);
	}
	for (unsigned i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&tid[i], NULL, handle_put_main, &h[i]), 0);
	for (unsigned i = 0; i < 2; i++)
		pthread_join(tid[i], NULL);
	for (unsigned i = 0; i < 2; i++)
		store_close(h[i].st);
	ec_backing_destroy(&bk);
	for (unsigned i = 0; i < 2; i++)
		if (h[i].bad)
			fail_msg("handle %u: a put of a fresh key returned %d (two handles on one "
			         "directory in one process pick the same temp file name)",
			         i, h[i].bad);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fail_nth_write),
	    cmocka_unit_test(test_fail_nth_open),
	    cmocka_unit_test(test_waiters_get_error),
	    cmocka_unit_test(test_throttling),
	    cmocka_unit_test(test_fencing),
	    cmocka_unit_test(test_fencing_window),
	    cmocka_unit_test(test_two_handles_one_dir),
	    cmocka_unit_test(test_open_race),
	    cmocka_unit_test(test_corruption),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
