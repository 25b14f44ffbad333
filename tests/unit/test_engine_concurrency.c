/*
 * test_engine_concurrency.c - 8 writer threads and 4 reader threads on one
 * engine for a bounded time (suite unit; EC_CONC_SECONDS, default 4).
 *
 * Writer w owns the keys "w<w>/a", "w<w>/b" and "w<w>/k<i>" (i < 16).  Each
 * round v (1, 2, ...) it writes one atomic batch {a = v, b = v}, then a
 * single put k<v % 16> = v, and publishes v (an atomic) after both
 * returned.  Values carry (writer, version, length) in a header and are
 * derived bytes after it; every fourth one is blob-sized.  Readers check:
 *   - every value read is byte-exact what its writer wrote;
 *   - point gets never go back in time: a get of w/a started after writer w
 *     published v sees a version >= v, and a reader's successive gets of one
 *     key never see a smaller version;
 *   - a scan is one snapshot: for each writer, a and b are equal, every k<i>
 *     is at most a's version (k is written after the batch of its round), and
 *     a is at least what was published before the scan began;
 *   - engine_get_range of a value returns the right slice.
 * At the end the engine is closed and reopened: every writer's last round is
 * there (a == b == last version).
 *
 * What varies is the interleaving, which no seed replays; the seed (printed,
 * MEMWALFS_SEED replays it) picks the value lengths, the MemTable size and
 * the inline limit, so that repeated runs also cover different shapes.
 * Readers check only what is true at every instant of a run without faults:
 * a bound taken before the read (published) and the snapshot's own
 * consistency, never "the latest value", which a writer may change at any
 * time.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "engine_int.h"
#include "maint.h"
#include "store.h"
#include "testutil.h"

#define NW 8
#define NR 4
#define NK 16
#define HDR 16

static struct engine *eng;
static atomic_bool stop;
static _Atomic uint64_t published[NW]; /* last complete round per writer */
static char failure[512];              /* first violation (protected by fail_mu) */
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t n_reads, n_scans, n_rounds;
static uint64_t salt; /* from the seed: varies the values (set before the threads start) */

static void record_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void record_fail(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&fail_mu);
	if (!failure[0]) {
		va_start(ap, fmt);
		vsnprintf(failure, sizeof(failure), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&fail_mu);
	atomic_store(&stop, true);
}

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static size_t vlen_of(unsigned w, uint64_t v, char which)
{
	uint64_t h = mix((uint64_t)w << 48 ^ v << 8 ^ (uint64_t)which ^ salt);

	return h % 4 == 0 ? 600 + h % 3000 : HDR + h % 64;
}

/* Fill buf with the value of (w, v, which); returns its length. */
static size_t make_val(uint8_t *buf, unsigned w, uint64_t v, char which)
{
	size_t n = vlen_of(w, v, which);
	uint64_t x = mix((uint64_t)w * 7919 + v * 31 + (uint64_t)which + salt);

	memcpy(buf, &v, 8);
	buf[8] = (uint8_t)w;
	buf[9] = (uint8_t)which;
	memcpy(buf + 10, &(uint32_t){(uint32_t)n}, 4);
	buf[14] = buf[15] = 0xEE;
	for (size_t i = HDR; i < n; i++) {
		if (i % 8 == 0)
			x = mix(x);
		buf[i] = (uint8_t)(x >> (8 * (i % 8)));
	}
	return n;
}

/* Check a value read for (w, which); returns its version or UINT64_MAX. */
static uint64_t check_val(const void *p, size_t n, unsigned w, char which, const char *ctx)
{
	uint8_t want[4096];
	uint64_t v;

	if (n < HDR) {
		record_fail("%s: w%u/%c value of %zu bytes", ctx, w, which, n);
		return UINT64_MAX;
	}
	memcpy(&v, p, 8);
	if (v > atomic_load(&published[w]) + 1 || make_val(want, w, v, which) != n ||
	    memcmp(want, p, n)) {
		record_fail("%s: w%u/%c value (version %" PRIu64 ", %zu bytes) is not what "
		            "was written",
		            ctx, w, which, v, n);
		return UINT64_MAX;
	}
	return v;
}

static void *writer_main(void *arg)
{
	unsigned w = (unsigned)(uintptr_t)arg;
	uint8_t buf[4096];
	char ka[16], kb[16], kk[16];
	struct engine_batch *b = NULL;
	uint64_t last_ticket = 0;
	int rc;

	snprintf(ka, sizeof(ka), "w%u/a", w);
	snprintf(kb, sizeof(kb), "w%u/b", w);
	if (engine_batch_new(&b)) {
		record_fail("writer %u: batch_new", w);
		return NULL;
	}
	for (uint64_t v = 1; !atomic_load(&stop); v++) {
		int flags = v % 50 == 0 ? ENGINE_WAIT : v % 17 == 0 ? ENGINE_URGENT : 0;
		size_t n;

		engine_batch_clear(b);
		n = make_val(buf, w, v, 'a');
		rc = engine_batch_put(b, ka, strlen(ka), buf, n);
		n = make_val(buf, w, v, 'b');
		if (!rc)
			rc = engine_batch_put(b, kb, strlen(kb), buf, n);
		if (!rc)
			rc = engine_write(eng, b, flags, &last_ticket);
		if (rc) {
			record_fail("writer %u: batch of round %" PRIu64 ": %d", w, v, rc);
			break;
		}
		snprintf(kk, sizeof(kk), "w%u/k%02u", w, (unsigned)(v % NK));
		n = make_val(buf, w, v, 'k');
		rc = engine_put(eng, kk, strlen(kk), buf, n, 0, &last_ticket);
		if (rc) {
			record_fail("writer %u: put of round %" PRIu64 ": %d", w, v, rc);
			break;
		}
		atomic_store(&published[w], v);
		atomic_fetch_add(&n_rounds, 1);
		if (v % 64 == 0 && (rc = engine_wait(eng, last_ticket, v % 128 == 0))) {
			record_fail("writer %u: wait: %d", w, rc);
			break;
		}
		if (w == 0 && v % 200 == 0 && (rc = engine_sync(eng))) {
			record_fail("writer 0: sync: %d", rc);
			break;
		}
	}
	engine_batch_free(b);
	return NULL;
}

/* Point gets of w/a, monotonic and never behind what was published. */
static void reader_gets(uint64_t seen[NW], unsigned r)
{
	for (unsigned w = 0; w < NW && !atomic_load(&stop); w++) {
		char key[16];
		void *v = NULL;
		size_t n;
		uint64_t before = atomic_load(&published[w]), got;
		char which = (r + w) % 2 ? 'a' : 'b';
		int rc;

		snprintf(key, sizeof(key), "w%u/%c", w, which);
		rc = engine_get(eng, key, strlen(key), &v, &n);
		if (rc == -ENOENT && before == 0)
			continue;
		if (rc) {
			record_fail("get %s: %d (published %" PRIu64 ")", key, rc, before);
			return;
		}
		got = check_val(v, n, w, which, "get");
		if (got != UINT64_MAX && got < before)
			record_fail("get %s saw version %" PRIu64 " after %" PRIu64
			            " was published",
			            key, got, before);
		if (got != UINT64_MAX && got < seen[w])
			record_fail("get %s went back from version %" PRIu64 " to %" PRIu64, key,
			            seen[w], got);
		if (got != UINT64_MAX && got > seen[w])
			seen[w] = got;
		/* a slice of the same key */
		if (n > HDR + 4 && !atomic_load(&stop)) {
			uint8_t part[64];
			size_t gotn = 0;

			rc = engine_get_range(eng, key, strlen(key), 8, part, sizeof(part), &gotn);
			if (rc || gotn < 2 || part[0] != w || part[1] != (uint8_t)which)
				record_fail("get_range %s: rc %d got %zu", key, rc, gotn);
		}
		free(v);
		atomic_fetch_add(&n_reads, 1);
	}
}

/* One scan of everything: a snapshot. */
static void reader_scan(uint64_t seen_scan[NW])
{
	uint64_t before[NW], a[NW] = {0}, bv[NW] = {0}, kmax[NW] = {0};
	bool has_a[NW] = {0}, has_b[NW] = {0};
	struct engine_iter *it = NULL;
	int rc;

	for (unsigned w = 0; w < NW; w++)
		before[w] = atomic_load(&published[w]);
	for (rc = engine_iter_new(eng, "w", 1, NULL, 0, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t kn, vn;
		const char *k = engine_iter_key(it, &kn);
		const void *v;
		unsigned w;
		char which;

		if (kn < 4 || sscanf(k, "w%u/%c", &w, &which) != 2 || w >= NW) {
			record_fail("scan: unknown key %.*s", (int)kn, k);
			break;
		}
		if ((rc = engine_iter_value(it, &v, &vn))) {
			record_fail("scan: value of %.*s: %d", (int)kn, k, rc);
			break;
		}
		uint64_t ver = check_val(v, vn, w, which, "scan");

		if (ver == UINT64_MAX)
			break;
		if (which == 'a') {
			a[w] = ver;
			has_a[w] = true;
		} else if (which == 'b') {
			bv[w] = ver;
			has_b[w] = true;
		} else if (ver > kmax[w]) {
			kmax[w] = ver;
		}
	}
	if (!rc && it && engine_iter_status(it))
		record_fail("scan status %d", engine_iter_status(it));
	if (rc)
		record_fail("engine_iter_new: %d", rc); /* keeps the first failure */
	engine_iter_free(it);
	if (atomic_load(&stop))
		return;
	for (unsigned w = 0; w < NW; w++) {
		if (has_a[w] != has_b[w] || a[w] != bv[w])
			record_fail("scan is no snapshot: w%u/a version %" PRIu64 ", w%u/b version "
			            "%" PRIu64 " (one batch wrote both)",
			            w, a[w], w, bv[w]);
		else if (kmax[w] > a[w])
			record_fail("scan is no snapshot: w%u has k version %" PRIu64 " but a "
			            "version %" PRIu64,
			            w, kmax[w], a[w]);
		else if (a[w] < before[w])
			record_fail("scan saw w%u at version %" PRIu64 " after %" PRIu64
			            " was published",
			            w, a[w], before[w]);
		else if (a[w] < seen_scan[w])
			record_fail("scan went back: w%u from %" PRIu64 " to %" PRIu64, w,
			            seen_scan[w], a[w]);
		seen_scan[w] = a[w];
	}
	atomic_fetch_add(&n_scans, 1);
}

static void *reader_main(void *arg)
{
	unsigned r = (unsigned)(uintptr_t)arg;
	uint64_t seen[NW] = {0}, seen_scan[NW] = {0};

	for (unsigned i = 0; !atomic_load(&stop); i++) {
		if ((i + r) % 4 == 0)
			reader_scan(seen_scan);
		else
			reader_gets(seen, r);
	}
	return NULL;
}

static void test_concurrency(void **state)
{
	(void)state;
	char dir[] = "/tmp/mwtest-h8-conc-XXXXXX";
	struct store *st = NULL;
	struct engine_opts o;
	pthread_t wt[NW], rt[NR];
	const char *env = getenv("EC_CONC_SECONDS");
	unsigned secs = env ? (unsigned)atoi(env) : 4;
	uint64_t seed = tu_seed("engine_concurrency");
	static const size_t inl[] = {256, 512, 1024};
	char cmd[128];

	salt = mix(seed);
	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open_local(dir, &st), 0);
	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.inline_max = inl[seed % 3];
	o.memtable_max_bytes = (seed >> 2) % 2 ? 1 << 20 : 256 << 10; /* freezes during the run */
	print_message("concurrency: inline_max %zu, MemTable %zu KiB\n", o.inline_max,
	              o.memtable_max_bytes >> 10);
	assert_int_equal(engine_open(st, &o, &eng), 0);
	for (unsigned i = 0; i < NW; i++)
		assert_int_equal(pthread_create(&wt[i], NULL, writer_main, (void *)(uintptr_t)i),
		                 0);
	for (unsigned i = 0; i < NR; i++)
		assert_int_equal(pthread_create(&rt[i], NULL, reader_main, (void *)(uintptr_t)i),
		                 0);
	for (unsigned s = 0; s < secs * 10 && !atomic_load(&stop); s++)
		usleep(100000);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < NW; i++)
		pthread_join(wt[i], NULL);
	for (unsigned i = 0; i < NR; i++)
		pthread_join(rt[i], NULL);
	print_message("concurrency: %" PRIu64 " rounds, %" PRIu64 " gets, %" PRIu64 " scans\n",
	              atomic_load(&n_rounds), atomic_load(&n_reads), atomic_load(&n_scans));
	if (failure[0]) /* every thread is joined: no lock needed */
		fail_msg("%s (seed %" PRIu64 ")", failure, seed);
	assert_true(atomic_load(&n_scans) > 0);
	assert_int_equal(engine_close(eng), 0);

	/* Reopen: the last round of every writer is there. */
	eng = NULL;
	assert_int_equal(engine_open(st, &o, &eng), 0);
	for (unsigned w = 0; w < NW; w++) {
		char key[16];
		void *v = NULL;
		size_t n;
		uint64_t last = atomic_load(&published[w]);

		for (char c = 'a'; c <= 'b'; c++) {
			snprintf(key, sizeof(key), "w%u/%c", w, c);
			assert_int_equal(engine_get(eng, key, strlen(key), &v, &n), 0);
			uint64_t got = check_val(v, n, w, c, "reopen");

			free(v);
			if (got != last)
				fail_msg("after reopen %s has version %" PRIu64
				         ", last written %" PRIu64,
				         key, got, last);
		}
	}
	assert_int_equal(engine_close(eng), 0);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		print_message("could not remove %s\n", dir);
}

struct cad_arg {
	struct engine *e; /* the engine */
	atomic_int done;  /* 1 once the put returned */
	int rc;           /* what it returned */
};

static void *cad_put(void *arg)
{
	struct cad_arg *a = arg;

	a->rc = engine_put(a->e, "cad", 3, "v", 1, ENGINE_WAIT, NULL);
	atomic_store(&a->done, 1);
	return NULL;
}

/*
 * A waiting put without ENGINE_URGENT on an idle engine is committed by the
 * cadence (engine.h: "a group is committed when the cadence fires"): with a
 * 10 ms cadence it returns within milliseconds.  The bound is 20 s, not a
 * tight one: the bug this catches waits for an urgent commit that never
 * comes (forever), while a loaded machine under ASan can take a second or
 * more to schedule the committer and write the entry.
 */
static void test_cadence_commits_idle_group(void **state)
{
	(void)state;
	char dir[] = "/tmp/mwtest-h8-cad-XXXXXX";
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o;
	struct cad_arg a = {0};
	pthread_t tid;
	char cmd[128];

	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open_local(dir, &st), 0);
	engine_opts_default(&o);
	o.cadence_ms = 10;
	assert_int_equal(engine_open(st, &o, &e), 0);
	usleep(50000); /* let the committer go idle */
	a.e = e;
	assert_int_equal(pthread_create(&tid, NULL, cad_put, &a), 0);
	for (int i = 0; i < 2000 && !atomic_load(&a.done); i++)
		usleep(10000);
	if (!atomic_load(&a.done)) {
		/* unstick it so the test can finish, then report */
		engine_sync(e);
		pthread_join(tid, NULL);
		fail_msg("a non-urgent ENGINE_WAIT put on an idle engine was not committed by the "
		         "10 ms cadence within 20 s (it waited for the next urgent commit)");
	}
	pthread_join(tid, NULL);
	assert_int_equal(a.rc, 0);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		print_message("could not remove %s\n", dir);
}

struct race_arg {
	struct engine *e; /* the engine */
	uint64_t v;       /* the version the hook writes next */
	bool armed;       /* the next read runs the hook's work (once) */
};

/* Put key "k" = "v<v>" and wait until it is durable. */
static void put_version(struct engine *e, uint64_t v)
{
	char val[24];

	snprintf(val, sizeof(val), "v%" PRIu64, v);
	assert_int_equal(engine_put(e, "k", 1, val, strlen(val), ENGINE_WAIT, NULL), 0);
}

/*
 * view_hook: what a loaded machine can do between a read's start and its view.  A newer
 * version of k is written, flushed into a table of its own, and the tables compacted
 * (which keeps only the newest version of k: compaction drops every version a newer one
 * hides, as no reader may read below the newest state).
 */
static void race_hook(void *arg)
{
	struct race_arg *a = arg;

	if (!a->armed)
		return;
	a->armed = false;
	put_version(a->e, ++a->v);
	assert_int_equal(maint_flush_now(a->e), 0);
	assert_int_equal(maint_compact_now(a->e), 0);
}

/* k's value as read now: point get, range read and scan agree; returns its version. */
static uint64_t read_k(struct race_arg *a, bool scan)
{
	char want[24], buf[24];
	struct engine_iter *it = NULL;
	void *v = NULL;
	size_t n = 0, got = 0;
	const void *p;

	a->armed = true;
	if (scan) {
		assert_int_equal(engine_iter_new(a->e, NULL, 0, NULL, 0, &it), 0);
		assert_false(a->armed);
		if (!engine_iter_valid(it))
			fail_msg("a scan during a flush and compaction found no key (status %d)",
			         engine_iter_status(it));
		assert_int_equal(engine_iter_value(it, &p, &n), 0);
		assert_true(n < sizeof(buf));
		memcpy(buf, p, n);
		engine_iter_free(it);
	} else if (a->v % 2) {
		int rc = engine_get(a->e, "k", 1, &v, &n);

		if (rc)
			fail_msg("get of k during a flush and compaction: %d", rc);
		assert_true(n < sizeof(buf));
		memcpy(buf, v, n);
		free(v);
	} else {
		int rc = engine_get_range(a->e, "k", 1, 0, buf, sizeof(buf) - 1, &got);

		if (rc)
			fail_msg("get_range of k during a flush and compaction: %d", rc);
		n = got;
	}
	assert_false(a->armed);
	buf[n] = 0;
	snprintf(want, sizeof(want), "v%" PRIu64, a->v);
	assert_string_equal(buf, want); /* the snapshot is of the state after the hook */
	return a->v;
}

/*
 * A read whose snapshot is older than the tables it then consults: the seen failure
 * "get_range w0/a: rc -2" of test_concurrency, made deterministic.  Between a read's
 * start and the moment it takes its references (e->rd.view_hook), a newer version of the
 * key is written, flushed and compacted with the older one.  The read must still find the
 * key (the newest version: its snapshot is taken with its view), by get, get_range and
 * scan alike.
 */
static void test_read_races_flush_and_compaction(void **state)
{
	(void)state;
	char dir[] = "/tmp/mwtest-h8-race-XXXXXX";
	struct store *st = NULL;
	struct engine_opts o;
	struct race_arg a = {0};
	char cmd[128];

	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open_local(dir, &st), 0);
	engine_opts_default(&o);
	o.cadence_ms = 10;
	assert_int_equal(engine_open(st, &o, &a.e), 0);
	put_version(a.e, ++a.v); /* v1 in a table of its own */
	assert_int_equal(maint_flush_now(a.e), 0);
	a.e->rd.view_hook = race_hook;
	a.e->rd.view_hook_arg = &a;
	for (int i = 0; i < 6; i++)
		read_k(&a, i % 3 == 2);
	a.e->rd.view_hook = NULL;
	assert_int_equal(engine_close(a.e), 0);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		print_message("could not remove %s\n", dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cadence_commits_idle_group),
	    cmocka_unit_test(test_read_races_flush_and_compaction),
	    cmocka_unit_test(test_concurrency),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
