/*
 * test_engine_life.c - unit tests of the engine (engine.h) on the local
 * store, continued from test_engine.c: GC when idle, full stores and sync
 * timeouts, queued full groups, waiting for room, fencing, scans over a
 * snapshot, read-only open, corruption, backpressure, freezing, flush and
 * replay, a crash during a flush, a store that refuses a commit for good (a
 * link planted in the local store).  Sections are marked "---- ".
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "fault.h"
#include "maint.h"
#include "store.h"

#include "engine_fixture.h"

/* ---- GC when idle ------------------------------------------------------- */

/*
 * An idle engine sends no request: once a GC pass has left nothing waiting
 * (no grace here), later wake-ups are skipped until something is written.
 */
static void test_gc_idle(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine_opts o;
	struct engine *e = NULL;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.gc_interval_ms = 20;
	o.gc_grace_sec = ENGINE_GC_NO_GRACE;
	o.commit_retry_ms = ENGINE_NO_RETRY;
	assert_int_equal(engine_open(st, &o, &e), 0);
	assert_int_equal(engine_put(e, "k", 1, "v", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	/* wait for a pass after the write, then for a skipped wake-up */
	uint64_t p0 = stats_of(e).gc_passes;
	for (int i = 0; i < 1000 && stats_of(e).gc_passes < p0 + 1; i++)
		usleep(10000);
	uint64_t k0 = stats_of(e).gc_skipped;
	for (int i = 0; i < 1000 && stats_of(e).gc_skipped < k0 + 1; i++)
		usleep(10000);
	assert_true(stats_of(e).gc_skipped > k0);
	uint64_t calls = all_calls(f), passes = stats_of(e).gc_passes;
	usleep(300000); /* 15 GC intervals */
	assert_int_equal(all_calls(f), calls);
	assert_int_equal(stats_of(e).gc_passes, passes);
	assert_true(stats_of(e).gc_skipped >= k0 + 5);
	/* a commit makes the next wake-up run a pass again */
	assert_int_equal(engine_put(e, "k2", 2, "v", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	for (int i = 0; i < 1000 && stats_of(e).gc_passes == passes; i++)
		usleep(10000);
	assert_true(stats_of(e).gc_passes > passes);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* A full store: -ENOSPC at once to waiters and new writes; it all commits once space is back. */
static void test_outage_enospc(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	uint64_t t = 0;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_retrying(st, 0);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT), 1, -ENOSPC, FAULT_PERSIST);
	assert_int_equal(engine_put(e, "full", 4, "1", 1, 0, &t), 0);
	assert_int_equal(engine_wait(e, t, true), -ENOSPC);
	assert_int_equal(engine_put(e, "refused", 7, "2", 1, 0, NULL), -ENOSPC);
	check_value(e, "full", "1", 1);
	fault_store_clear(f);
	assert_int_equal(engine_wait(e, t, true), 0); /* the same group, committed */
	assert_int_equal(engine_put(e, "again", 5, "3", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 50);
	check_value(e, "full", "1", 1);
	check_value(e, "again", "3", 1);
	check_absent(e, "refused");
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* sync_timeout_ms bounds a wait; the write still commits later and nothing is fenced. */
static void test_outage_sync_timeout(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine_stats s;
	uint64_t t = 0;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_retrying(st, 200);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT), 1, -EIO, FAULT_PERSIST);
	assert_int_equal(engine_put(e, "slow", 4, "1", 1, 0, &t), 0);
	assert_int_equal(engine_wait(e, t, true), -ETIMEDOUT);
	assert_int_equal(engine_sync(e), -ETIMEDOUT);
	engine_get_stats(e, &s);
	assert_int_equal(s.sync_timeouts, 2);
	assert_int_equal(s.sticky_error, 0);
	fault_store_clear(f);
	/* the committer may be in a backoff longer than the 200 ms bound: wait again until done */
	int rc = -ETIMEDOUT;
	for (int i = 0; i < 300 && rc == -ETIMEDOUT; i++)
		rc = engine_wait(e, t, true);
	assert_int_equal(rc, 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 50);
	check_value(e, "slow", "1", 1);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

struct room_waiter {
	struct engine *e;
	int rc;
	bool done;
};

static void *room_main(void *arg)
{
	struct room_waiter *w = arg;
	w->rc = engine_wait_room(w->e, 60000); /* 9 KB + 60000 > the 64 KiB bound */
	__atomic_store_n(&w->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * engine_wait_room() waits for backpressure without writing: while the
 * store holds every WAL put, pending bytes pass the bound and a caller
 * waits (counted in writers_waiting); once the store answers it returns 0.
 */
static void test_wait_room(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine_opts o;
	struct engine_stats s;
	struct engine *e = NULL;
	static uint8_t v[3000];
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.max_pending_bytes = 64 << 10;
	assert_int_equal(engine_open(st, &o, &e), 0);
	assert_int_equal(engine_wait_room(e, 1000), 0); /* nothing pending */
	fault_store_hold(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT) | FAULT_M(FAULT_OP_PUT));
	for (int i = 0; i < 3; i++) { /* 9 KB pending, held in the store */
		char k[16];
		snprintf(k, sizeof(k), "r%02d", i);
		assert_int_equal(engine_put(e, k, strlen(k), v, sizeof(v), ENGINE_URGENT, NULL), 0);
	}
	assert_true(fault_store_wait_held(f, 1, 10000));
	struct room_waiter w = {e, 0, false};
	pthread_t tid;
	assert_int_equal(pthread_create(&tid, NULL, room_main, &w), 0);
	for (int i = 0; i < 500; i++) {
		engine_get_stats(e, &s);
		if (s.writers_waiting == 1)
			break;
		usleep(10000);
	}
	assert_int_equal(s.writers_waiting, 1);
	assert_false(__atomic_load_n(&w.done, __ATOMIC_SEQ_CST));
	fault_store_hold(f, 0);
	pthread_join(tid, NULL);
	assert_int_equal(w.rc, 0);
	engine_get_stats(e, &s);
	assert_int_equal(s.writers_waiting, 0);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * A full group queues at once, even while the pipeline is full: with one
 * pipeline thread stuck in a held pack put, every write that fills a group
 * closes it, so a stream of large writes makes groups of group_max_bytes
 * (one pack each) instead of one group that grows until the thread is
 * free.  Once the store answers, all are acknowledged and readable.
 */
static void test_full_groups_queue(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine_opts o;
	struct engine_stats s;
	struct engine *e = NULL;
	static uint8_t v[8][40000];
	uint64_t t = 0;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	engine_opts_default(&o);
	o.cadence_ms = 10000; /* only fullness closes groups here */
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF;
	o.group_max_bytes = 32 << 10;
	o.commit_inflight = 1;
	assert_int_equal(engine_open(st, &o, &e), 0);
	fault_store_hold(f, FAULT_M(FAULT_OP_PUT));
	for (int i = 0; i < 8; i++) {
		char k[16];
		snprintf(k, sizeof(k), "full%d", i);
		memset(v[i], 'a' + i, sizeof(v[i]));
		assert_int_equal(engine_put(e, k, strlen(k), v[i], sizeof(v[i]), 0, &t), 0);
		if (i == 0)
			assert_true(fault_store_wait_held(f, 1, 10000)); /* the thread is stuck */
	}
	engine_get_stats(e, &s);
	assert_int_equal(s.packs_written, 0); /* nothing is durable yet */
	fault_store_hold(f, 0);
	assert_int_equal(engine_wait(e, t, true), 0);
	engine_get_stats(e, &s);
	assert_int_equal(s.packs_written, 8); /* one group, one pack per write */
	for (int i = 0; i < 8; i++) {
		char k[16];
		void *got = NULL;
		size_t n = 0;
		snprintf(k, sizeof(k), "full%d", i);
		assert_int_equal(engine_get(e, k, strlen(k), &got, &n), 0);
		assert_int_equal(n, sizeof(v[i]));
		assert_memory_equal(got, v[i], n);
		free(got);
	}
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* ---- fencing, snapshots, read-only mounts, corruption -------------------- */

/* A second writer fences the first; the first writes nothing more. */
static void test_fencing(void **state)
{
	struct store *st1 = open_store(), *st2 = open_store();
	struct engine *a = open_engine(st1, 50), *b;
	(void)state;

	assert_int_equal(engine_put(a, "a1", 2, "x", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_put(a, "a2", 2, "y", 1, 0, NULL), 0); /* not yet durable */
	b = open_engine(st2, 50);
	check_value(b, "a1", "x", 1);
	assert_int_equal(engine_put(b, "b1", 2, "z", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	/* a's next commit fails with -ESTALE */
	assert_int_equal(engine_put(a, "a3", 2, "w", 1, ENGINE_WAIT | ENGINE_URGENT, NULL),
	                 -ESTALE);
	assert_int_equal(engine_put(a, "a4", 2, "v", 1, 0, NULL), -ESTALE);
	assert_int_equal(engine_close(a), -ESTALE);
	check_value(b, "b1", "z", 1);
	check_absent(b, "a3");
	assert_int_equal(engine_close(b), 0);
	b = open_engine(st2, 50);
	check_value(b, "a1", "x", 1);
	check_value(b, "b1", "z", 1);
	check_absent(b, "a3");
	check_absent(b, "a4");
	assert_int_equal(engine_close(b), 0);
	store_close(st1);
	store_close(st2);
}

/*
 * engine_check_epoch(): a writer that a newer one fenced learns it at once
 * when asked (what a --takeover asks of the old mount), not at its next
 * commit: from then on every write fails with -ESTALE without being applied,
 * and the write it had applied but not committed is counted lost.
 */
static void test_fence_check(void **state)
{
	struct store *st1 = open_store(), *st2 = open_store();
	struct engine *a = open_engine(st1, 60000), *b; /* a commits only when urged */
	uint64_t t2 = 0;
	(void)state;

	assert_int_equal(engine_put(a, "a1", 2, "x", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_check_epoch(a), 0); /* still ours: nothing changes */
	assert_int_equal(engine_write_error(a), 0);
	assert_int_equal(engine_put(a, "a2", 2, "y", 1, 0, &t2), 0); /* applied, not committed */
	b = open_engine(st2, 50);
	check_absent(b, "a2");
	assert_int_equal(engine_write_error(a), 0); /* a has not learned it yet */
	check_value(a, "a2", "y", 1);
	assert_int_equal(engine_check_epoch(a), -ESTALE);
	assert_int_equal(engine_write_error(a), -ESTALE);
	assert_int_equal(engine_check_epoch(a), -ESTALE); /* sticky: asked again, the same */
	assert_int_equal(engine_put(a, "a3", 2, "z", 1, 0, NULL), -ESTALE);
	check_absent(a, "a3");                               /* refused, never applied */
	assert_int_equal(engine_wait(a, t2, true), -ESTALE); /* a2 is never acknowledged */
	struct engine_stats s = stats_of(a);
	assert_int_equal(s.sticky_error, -ESTALE);
	assert_int_equal(s.batches_lost, 1); /* a2 */
	assert_int_equal(stats_of(b).batches_lost, 0);
	assert_int_equal(engine_close(a), -ESTALE);
	assert_int_equal(engine_put(b, "b1", 2, "w", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_close(b), 0);
	b = open_engine(st2, 50);
	check_value(b, "a1", "x", 1);
	check_value(b, "b1", "w", 1);
	check_absent(b, "a2");
	check_absent(b, "a3");
	assert_int_equal(engine_close(b), 0);
	store_close(st1);
	store_close(st2);
}

/*
 * engine_handover(): what a --takeover asks of the old writer before its
 * claim.  Writes applied before it are committed by it; writes after it are
 * refused (-ESTALE, not applied) until it is ended; a newer writer that
 * claims meanwhile finds everything acknowledged, and nothing is lost.
 */
static void test_handover(void **state)
{
	struct store *st1 = open_store(), *st2 = open_store();
	struct engine *a = open_engine(st1, 60000), *b; /* a commits only when urged */
	(void)state;

	assert_int_equal(engine_put(a, "a1", 2, "x", 1, 0, NULL), 0); /* applied, not committed */
	assert_int_equal(engine_handover(a, 60000), 0);               /* committed by it */
	assert_int_equal(engine_write_error(a), -ESTALE);
	assert_int_equal(engine_put(a, "a2", 2, "y", 1, 0, NULL), -ESTALE);
	check_absent(a, "a2");
	assert_int_equal(engine_handover(a, 0), 0); /* the takeover did not happen */
	assert_int_equal(engine_write_error(a), 0);
	assert_int_equal(engine_put(a, "a3", 2, "z", 1, 0, NULL), 0);
	assert_int_equal(engine_handover(a, 60000), 0);
	b = open_engine(st2, 50); /* the claim */
	check_value(b, "a1", "x", 1);
	check_value(b, "a3", "z", 1);
	check_absent(b, "a2");
	assert_int_equal(engine_check_epoch(a), -ESTALE);
	assert_int_equal(engine_handover(a, 0), 0); /* ends the hold, not the fence */
	assert_int_equal(engine_write_error(a), -ESTALE);
	assert_int_equal(stats_of(a).batches_lost, 0);
	assert_int_equal(engine_close(a), -ESTALE);
	assert_int_equal(engine_close(b), 0);
	store_close(st1);
	store_close(st2);
}

static void test_scan_snapshot(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 20);
	struct engine_iter *it;
	static uint8_t big[4000];
	char k[16];
	int rc, n = 0;
	(void)state;

	fill(big, sizeof(big), 9);
	for (int i = 0; i < 20; i++) {
		snprintf(k, sizeof(k), "d/%02d", i);
		if (i == 5)
			assert_int_equal(engine_put(e, k, strlen(k), big, sizeof(big), 0, NULL), 0);
		else
			assert_int_equal(engine_put(e, k, strlen(k), k, strlen(k), 0, NULL), 0);
	}
	assert_int_equal(engine_put(e, "c", 1, "before", 6, 0, NULL), 0);
	assert_int_equal(engine_put(e, "e", 1, "after", 5, 0, NULL), 0);
	assert_int_equal(engine_delete(e, "d/03", 4, 0, NULL), 0);
	for (rc = engine_iter_new(e, "d/", 2, "d0", 2, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t kn, vn;
		const void *key = engine_iter_key(it, &kn), *v;
		assert_int_equal(engine_iter_value(it, &v, &vn), 0);
		if (n == 0) {
			/* changes after the snapshot are invisible */
			assert_int_equal(engine_put(e, "d/001", 5, "new", 3, 0, NULL), 0);
			assert_int_equal(engine_delete(e, "d/10", 4, 0, NULL), 0);
		}
		assert_true(kn == 4 && memcmp(key, "d/", 2) == 0);
		assert_false(memcmp(key, "d/03", 4) == 0);
		if (memcmp(key, "d/05", 4) == 0) {
			assert_int_equal(vn, sizeof(big));
			assert_memory_equal(v, big, vn);
		} else {
			assert_int_equal(vn, kn);
			assert_memory_equal(v, key, kn);
		}
		n++;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(engine_iter_status(it), 0);
	assert_int_equal(n, 19);
	/* seek */
	engine_iter_seek(it, "d/15", 4);
	assert_true(engine_iter_valid(it));
	size_t kn;
	assert_memory_equal(engine_iter_key(it, &kn), "d/15", 4);
	engine_iter_free(it);
	/* a new iterator sees the new state */
	n = 0;
	for (rc = engine_iter_new(e, "d/", 2, NULL, 0, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it))
		n++;
	assert_int_equal(rc, 0);
	engine_iter_free(it);
	assert_int_equal(n, 19 + 1 - 1 + 1); /* +d/001 -d/10 +e */
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_read_only(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 20), *r;
	struct engine_opts o;
	static uint8_t big[3000];
	(void)state;

	fill(big, sizeof(big), 3);
	assert_int_equal(engine_put(e, "k", 1, "v", 1, 0, NULL), 0);
	assert_int_equal(engine_put(e, "b", 1, big, sizeof(big), 0, NULL), 0);
	assert_int_equal(engine_sync(e), 0);
	engine_opts_default(&o);
	o.read_only = true;
	assert_int_equal(engine_open(st, &o, &r), 0);
	check_value(r, "k", "v", 1);
	check_value(r, "b", big, sizeof(big));
	assert_int_equal(engine_put(r, "x", 1, "y", 1, 0, NULL), -EROFS);
	struct engine_stats s;
	engine_get_stats(r, &s);
	assert_true(s.read_only);
	assert_int_equal(s.epoch, 1);
	assert_int_equal(engine_close(r), 0);
	/* the writer was not fenced by the reader */
	assert_int_equal(engine_put(e, "k2", 2, "v", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void flip_byte(const char *key, long off)
{
	char path[512];
	FILE *fp;
	int c;
	snprintf(path, sizeof(path), "%s/%s", g_dir, key);
	fp = fopen(path, "r+b");
	assert_non_null(fp);
	if (off < 0) {
		fseek(fp, 0, SEEK_END);
		off += ftell(fp);
	}
	fseek(fp, off, SEEK_SET);
	c = fgetc(fp);
	fseek(fp, off, SEEK_SET);
	fputc(c ^ 0x40, fp);
	fclose(fp);
}

static void test_corruption(void **state)
{
	struct fault_store *f = NULL;
	struct store *st = open_store();
	struct engine *e;
	struct engine_opts o;
	static uint8_t big[3000];
	void *v;
	size_t n;
	(void)state;

	/* fresh store: manifest 1, wal 0-3 = the fence (WAL_WINDOW), wal 4 = our group, pack 1-4 */
	assert_int_equal(fault_store_new(st, &f), 0);
	st = fault_store_as_store(f);
	e = open_engine(st, 20);
	assert_int_equal(engine_put(e, "b", 1, big, sizeof(big), 0, NULL), 0);
	assert_int_equal(engine_put(e, "k", 1, "v", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	/* crash before the close, whose flush would cover (and so skip) the WAL */
	fault_store_crash(f);
	engine_close(e);
	store_close(st);
	st = open_store();
	/* corrupt the blob bytes: reads of b fail cleanly, k still fine */
	flip_byte("pack/00000000000000000001-00000000000000000004", 40);
	engine_opts_default(&o);
	o.read_only = true;
	assert_int_equal(engine_open(st, &o, &e), 0);
	check_value(e, "k", "v", 1);
	assert_int_equal(engine_get(e, "b", 1, &v, &n), -EUCLEAN);
	assert_int_equal(engine_close(e), 0);
	/* a missing pack: -EUCLEAN naming it */
	assert_int_equal(store_delete(st, "pack/00000000000000000001-00000000000000000004"), 0);
	assert_int_equal(engine_open(st, &o, &e), 0);
	assert_int_equal(engine_get(e, "b", 1, &v, &n), -EUCLEAN);
	assert_int_equal(engine_close(e), 0);
	/* a corrupt WAL entry fails the open */
	flip_byte("wal/00000000000000000004", -3);
	assert_int_equal(engine_open(st, &o, &e), -EUCLEAN);
	o.read_only = false;
	assert_int_equal(engine_open(st, &o, &e), -EUCLEAN);
	store_close(st);
}

/* ---- backpressure, MemTables, flush, crash during flush, replay ----------- */

/* Backpressure: a tiny pending budget makes writers wait, never fail. */
static void test_backpressure(void **state)
{
	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	static uint8_t v[2000];
	struct engine_stats s;
	(void)state;

	engine_opts_default(&o);
	o.cadence_ms = 10000;
	o.max_pending_bytes = 5000;
	o.inline_max = 100000;
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < 20; i++) {
		char k[8];
		snprintf(k, sizeof(k), "p%d", i);
		assert_int_equal(engine_put(e, k, strlen(k), v, sizeof(v), 0, NULL), 0);
	}
	engine_get_stats(e, &s);
	assert_true(s.backpressure_waits > 0);
	assert_true(s.pending_bytes <= 5000 + 2100);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* A store without conditional create is refused unless single_writer_ok. */
static void test_freeze_keeps_readable(void **state)
{
	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	struct engine_stats s;
	char k[16], v[64];
	(void)state;

	engine_opts_default(&o);
	o.cadence_ms = 20;
	o.memtable_max_bytes = 256 << 10;
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < 12000; i++) {
		snprintf(k, sizeof(k), "f%05d", i);
		snprintf(v, sizeof(v), "value-%d-padding-padding-padding", i);
		assert_int_equal(engine_put(e, k, strlen(k), v, strlen(v), 0, NULL), 0);
	}
	engine_get_stats(e, &s);
	assert_true(s.frozen_count >= 1);
	check_value(e, "f00000", "value-0-padding-padding-padding", 31);
	check_value(e, "f11999", "value-11999-padding-padding-padding", 35);
	int n = 0, rc;
	struct engine_iter *it;
	for (rc = engine_iter_new(e, "f", 1, "g", 1, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it))
		n++;
	assert_int_equal(rc, 0);
	engine_iter_free(it);
	assert_int_equal(n, 12000);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* Frozen MemTables are flushed to SSTables; reads and reopen use them. */
static void test_flush_and_reopen(void **state)
{
	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	struct engine_stats s;
	static uint8_t big[5000];
	char k[16], v[64];
	int n, rc;
	struct engine_iter *it;
	(void)state;

	fill(big, sizeof(big), 5);
	engine_opts_default(&o);
	o.cadence_ms = 20;
	o.memtable_max_bytes = 256 << 10;
	o.max_frozen_bytes = 256 << 10;
	o.inline_max = 4096;
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < 16000; i++) {
		snprintf(k, sizeof(k), "f%05d", i);
		snprintf(v, sizeof(v), "value-%d-padding-padding-padding", i);
		assert_int_equal(engine_put(e, k, strlen(k), v, strlen(v), 0, NULL), 0);
		if (i % 2000 == 0)
			assert_int_equal(
			    engine_put(e, "blob", 4, big, sizeof(big) - (size_t)i / 100, 0, NULL),
			    0);
		if (i % 7 == 0) {
			snprintf(k, sizeof(k), "f%05d", i / 2);
			assert_int_equal(engine_delete(e, k, strlen(k), 0, NULL), 0);
		}
	}
	assert_int_equal(engine_sync(e), 0);
	for (int t = 0; t < 500; t++) {
		engine_get_stats(e, &s);
		if (s.flushes >= 4 && s.compactions >= 1 && s.frozen_count == 0)
			break;
		usleep(10000);
	}
	assert_true(s.flushes >= 4);
	assert_true(s.compactions >= 1); /* 4 L0 tables trigger a compaction */
	assert_true(s.sst_count >= 1);
	assert_true(s.sst_count < s.flushes);
	assert_true(s.wal_covered > 0);
	/* reads see MemTable and SSTable data alike */
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < 16000; i += 13) {
			bool deleted = false;
			for (int j = 0; j < 16000; j += 7)
				if (j / 2 == i && j >= i) /* deleted after it was written */
					deleted = true;
			snprintf(k, sizeof(k), "f%05d", i);
			snprintf(v, sizeof(v), "value-%d-padding-padding-padding", i);
			if (deleted)
				check_absent(e, k);
			else
				check_value(e, k, v, strlen(v));
		}
		check_value(e, "blob", big, sizeof(big) - 14000 / 100);
		n = 0;
		for (rc = engine_iter_new(e, "f", 1, "g", 1, &it); !rc && engine_iter_valid(it);
		     engine_iter_next(it))
			n++;
		assert_int_equal(rc, 0);
		assert_int_equal(engine_iter_status(it), 0);
		engine_iter_free(it);
		int expect = 0;
		for (int i = 0; i < 16000; i++) {
			bool deleted = false;
			for (int j = 0; j < 16000; j += 7)
				if (j / 2 == i && j >= i)
					deleted = true;
			expect += !deleted;
		}
		assert_int_equal(n, expect);
		if (pass == 0) {
			uint64_t groups;
			engine_get_stats(e, &s);
			groups = s.groups_committed;
			assert_int_equal(engine_close(e), 0);
			assert_int_equal(engine_open(st, &o, &e), 0);
			engine_get_stats(e, &s);
			assert_true(s.sst_count >= 1);
			assert_true(s.replay_entries <
			            groups); /* the covered WAL is not replayed */
		}
	}
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * Crash at a random store call while a single writer puts keys in order
 * with flushes and compactions going on; after reopen every acknowledged
 * key is there and the keys present form a prefix (nothing reordered).
 */
static void test_crash_during_flush(void **state)
{
	uint64_t x = 0x9E3779B97F4A7C15ULL;
	unsigned seeds = 24, flushed = 0;
	(void)state;

	for (unsigned seed = 1; seed <= seeds; seed++) {
		struct store *inner, *st;
		struct fault_store *f;
		struct engine_opts o;
		struct engine *e = NULL;
		struct engine_stats s;
		char k[16], v[256];
		int acked = -1, i, rc = 0;

		x ^= seed * 0x2545F4914F6CDD1DULL;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		assert_int_equal(store_open_local(g_dir, &inner), 0);
		assert_int_equal(fault_store_new(inner, &f), 0);
		st = fault_store_as_store(f);
		engine_opts_default(&o);
		o.cadence_ms = 5;
		o.memtable_max_bytes = 128 << 10;
		o.inline_max = 200;
		o.commit_retry_ms = ENGINE_NO_RETRY; /* a crashed store never answers again */
		assert_int_equal(engine_open(st, &o, &e), 0);
		fault_store_crash_at(f, FAULT_ALL, 5 + x % 200, (enum fault_land)(x % 3));
		for (i = 0; i < 3000; i++) {
			snprintf(k, sizeof(k), "c%05d", i);
			memset(v, 'a' + i % 26, sizeof(v));
			size_t vl = i % 5 == 0 ? 250 : 120; /* some blobs */
			int fl = i % 50 == 49 ? ENGINE_WAIT | ENGINE_URGENT : 0;
			rc = engine_put(e, k, strlen(k), v, vl, fl, NULL);
			if (rc)
				break;
			if (fl)
				acked = i;
		}
		engine_get_stats(e, &s);
		flushed += s.flushes > 0;
		engine_close(e);
		store_close(st);
		/* reopen on the real directory, no faults */
		assert_int_equal(store_open_local(g_dir, &inner), 0);
		engine_opts_default(&o);
		o.memtable_max_bytes = 128 << 10;
		rc = engine_open(inner, &o, &e);
		if (rc) {
			printf("seed %u: reopen failed %d\n", seed, rc);
			fail();
		}
		int first_missing = -1;
		for (int j = 0; j < 3000; j++) {
			void *val = NULL;
			size_t n = 0;
			snprintf(k, sizeof(k), "c%05d", j);
			rc = engine_get(e, k, strlen(k), &val, &n);
			if (rc == 0) {
				if (first_missing >= 0) {
					printf("seed %u: c%05d present after missing c%05d\n", seed,
					       j, first_missing);
					fail();
				}
				assert_int_equal(n, j % 5 == 0 ? 250 : 120);
				assert_int_equal(((uint8_t *)val)[n - 1], 'a' + j % 26);
				free(val);
			} else {
				if (rc != -ENOENT)
					printf("seed %u: get c%05d: %d\n", seed, j, rc);
				assert_int_equal(rc, -ENOENT);
				if (first_missing < 0)
					first_missing = j;
			}
		}
		if (first_missing >= 0 && first_missing <= acked) {
			printf("seed %u: acknowledged c%05d lost (acked up to %d)\n", seed,
			       first_missing, acked);
			fail();
		}
		assert_int_equal(engine_close(e), 0);
		store_close(inner);
		teardown(NULL);
		setup(NULL);
	}
	printf("crash_during_flush: %u seeds, %u with flushes before the crash\n", seeds, flushed);
}

/* Many small groups freeze the MemTable too, so that replay stays short. */
static void test_replay_bound(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 20);
	struct engine_stats s;
	char k[16];
	(void)state;

	for (int i = 0; i < 1100; i++) {
		snprintf(k, sizeof(k), "r%05d", i);
		assert_int_equal(
		    engine_put(e, k, strlen(k), "v", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	}
	for (int t = 0; t < 500; t++) {
		engine_get_stats(e, &s);
		if (s.flushes >= 1)
			break;
		usleep(10000);
	}
	assert_true(s.flushes >= 1);
	assert_true(s.wal_covered >= 1000);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 20);
	engine_get_stats(e, &s);
	assert_true(s.replay_entries < 200);
	check_value(e, "r00000", "v", 1);
	check_value(e, "r01099", "v", 1);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * A link planted where the local store keeps wal/ (issue 36): the commit fails at once with
 * -EIO and the writer stops (a permanent error of the store: no retry would change it),
 * instead of retrying it as an outage until the sync times out; nothing is written
 * through the link, and a reopen has what was acknowledged before, not the refused write.
 */
static void test_store_refuses_for_good(void **state)
{
	struct store *st = open_store();
	char wal[PATH_MAX / 2], real[PATH_MAX / 2 + 8], away[PATH_MAX / 2 + 8];
	uint64_t t = 0;
	(void)state;

	struct engine *e = open_retrying(st, 20000); /* retried for 20 s by the old code */
	assert_int_equal(engine_put(e, "before", 6, "1", 1, 0, &t), 0);
	assert_int_equal(engine_wait(e, t, true), 0);
	snprintf(wal, sizeof(wal), "%s/wal", g_dir);
	snprintf(real, sizeof(real), "%s.real", wal);
	snprintf(away, sizeof(away), "%s/away", g_dir);
	assert_int_equal(mkdir(away, 0700), 0);
	assert_int_equal(rename(wal, real), 0);
	assert_int_equal(symlink(away, wal), 0);
	uint64_t t0 = now_ms();
	/*
	 * The commit of "after" meets the link; or the store watch (engine/check/watch.c), listing
	 * wal/ while the link went in, found the entry of "before" gone first and stopped the
	 * writer before the put: either way -EIO at once, never retried as an outage.
	 */
	int rc = engine_put(e, "after", 5, "2", 1, 0, &t);
	if (rc == 0)
		rc = engine_wait(e, t, true);
	assert_int_equal(rc, -EIO);
	assert_true(now_ms() - t0 < 15000);
	struct engine_stats s = stats_of(e);
	assert_int_equal(s.sticky_error, -EIO);
	assert_int_equal(s.outage_since, 0); /* not taken for an outage */
	assert_int_equal(engine_sync(e), -EIO);
	assert_int_equal(engine_close(e), -EIO);
	assert_int_equal(rmdir(away), 0); /* empty: nothing went through the link */
	assert_int_equal(unlink(wal), 0);
	assert_int_equal(rename(real, wal), 0);
	e = open_engine(st, 50);
	check_value(e, "before", "1", 1);
	check_absent(e, "after");
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * The same for a MemTable flush (a link planted where the store keeps sst/): the writer stops
 * with -EIO at once, instead of retrying the flush every few seconds while the frozen
 * MemTables grow until writers wait for good; what was acknowledged stays (in the WAL).
 */
static void test_flush_refused_for_good(void **state)
{
	struct store *st = open_store();
	char sst[PATH_MAX / 2], away[PATH_MAX / 2 + 8];
	uint64_t t = 0;
	(void)state;

	struct engine *e = open_retrying(st, 20000);
	snprintf(sst, sizeof(sst), "%s/sst", g_dir);
	snprintf(away, sizeof(away), "%s/away", g_dir);
	assert_int_equal(mkdir(away, 0700), 0);
	assert_int_equal(symlink(away, sst), 0); /* before the first flush makes sst/ */
	assert_int_equal(engine_put(e, "before", 6, "1", 1, 0, &t), 0);
	assert_int_equal(engine_wait(e, t, true), 0);
	assert_int_equal(maint_flush_now(e), -EIO);
	assert_int_equal(stats_of(e).sticky_error, -EIO);
	assert_int_equal(engine_put(e, "after", 5, "2", 1, 0, &t), -EIO);
	assert_int_equal(engine_sync(e), -EIO);
	engine_close(e);
	assert_int_equal(rmdir(away), 0); /* empty: nothing went through the link */
	assert_int_equal(unlink(sst), 0);
	e = open_engine(st, 50);
	check_value(e, "before", "1", 1);
	check_absent(e, "after");
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_gc_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_enospc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_sync_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_groups_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wait_room, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fencing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fence_check, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_handover, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_snapshot, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corruption, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_freeze_keeps_readable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flush_and_reopen, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_during_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replay_bound, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_store_refuses_for_good, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flush_refused_for_good, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
