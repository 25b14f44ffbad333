/*
 * test_engine.c - unit tests of the engine (engine.h) on the local store:
 * put/get/delete, blobs, reopen, group-commit triggers (cadence, size,
 * urgent, coalescing), ordered acknowledgements, sticky errors with the
 * fault store, outages (retried commits, reads served from the caches or
 * waiting for the store), GC when idle, fencing, scans over a snapshot,
 * read-only open, corruption, backpressure, flush and replay.  Sections are
 * marked "---- ".
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "fault.h"
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
	const char *tmp = getenv("TMPDIR");
	snprintf(g_dir, sizeof(g_dir), "%s/test_engine.XXXXXX", tmp && *tmp ? tmp : "/tmp");
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

static struct engine *open_engine(struct store *st, unsigned cadence_ms)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = cadence_ms;
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* packs per group (WAL blobs: test_wal_blobs.c) */
	o.cache_bytes = 1 << 20;
	o.commit_retry_ms = ENGINE_NO_RETRY; /* the tests of retries set their own */
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

static void check_value(struct engine *e, const char *key, const void *val, size_t vlen)
{
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, key, strlen(key), &v, &n), 0);
	assert_int_equal(n, vlen);
	assert_memory_equal(v, val, vlen);
	free(v);
}

static void check_absent(struct engine *e, const char *key)
{
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, key, strlen(key), &v, &n), -ENOENT);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

/* ---- puts, group commit, cadence, commit failures ----------------------- */

static void test_put_get_reopen(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 20);
	static uint8_t big[100000], big2[5000];
	char key[32], val[32];
	(void)state;

	fill(big, sizeof(big), 1);
	fill(big2, sizeof(big2), 2);
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%05d", i);
		snprintf(val, sizeof(val), "v%d", i);
		assert_int_equal(engine_put(e, key, strlen(key), val, strlen(val), 0, NULL), 0);
	}
	assert_int_equal(engine_put(e, "blob1", 5, big, sizeof(big), 0, NULL), 0);
	assert_int_equal(engine_put(e, "blob2", 5, big2, sizeof(big2), 0, NULL), 0);
	assert_int_equal(engine_put(e, "empty", 5, "", 0, 0, NULL), 0);
	assert_int_equal(engine_delete(e, "k00007", 6, 0, NULL), 0);
	/* readable at once, before any commit (blob from the in-memory pack) */
	check_value(e, "k00003", "v3", 2);
	check_value(e, "blob1", big, sizeof(big));
	check_absent(e, "k00007");
	check_value(e, "empty", "", 0);
	/* partial read of a blob */
	uint8_t part[100];
	size_t got = 0;
	assert_int_equal(engine_get_range(e, "blob1", 5, 5000, part, sizeof(part), &got), 0);
	assert_int_equal(got, 100);
	assert_memory_equal(part, big + 5000, 100);
	assert_int_equal(engine_get_range(e, "blob1", 5, sizeof(big) - 10, part, 100, &got), 0);
	assert_int_equal(got, 10);
	assert_int_equal(engine_get_range(e, "blob1", 5, sizeof(big) + 10, part, 100, &got), 0);
	assert_int_equal(got, 0);
	assert_int_equal(engine_get_range(e, "k00003", 6, 1, part, 100, &got), 0);
	assert_int_equal(got, 1);
	assert_int_equal(part[0], '3');
	assert_int_equal(engine_sync(e), 0);
	/* after the commit: from the store / cache */
	check_value(e, "blob1", big, sizeof(big));
	check_value(e, "blob2", big2, sizeof(big2));
	struct engine_stats s;
	engine_get_stats(e, &s);
	assert_true(s.groups_committed >= 1);
	assert_true(s.packs_written >= 1);
	assert_int_equal(s.puts, 203);
	assert_int_equal(s.deletes, 1);
	assert_int_equal(s.pending_bytes, 0);
	assert_int_equal(engine_close(e), 0);

	e = open_engine(st, 20);
	engine_get_stats(e, &s);
	assert_int_equal(s.epoch, 2);
	assert_int_equal(s.replay_entries, 0); /* a clean close flushed: nothing to replay */
	for (int i = 0; i < 200; i++) {
		snprintf(key, sizeof(key), "k%05d", i);
		snprintf(val, sizeof(val), "v%d", i);
		if (i == 7)
			check_absent(e, key);
		else
			check_value(e, key, val, strlen(val));
	}
	check_value(e, "blob1", big, sizeof(big));
	check_value(e, "blob2", big2, sizeof(big2));
	check_value(e, "empty", "", 0);
	/* overwrite and reopen again */
	assert_int_equal(engine_put(e, "k00001", 6, "new", 3, ENGINE_WAIT | ENGINE_URGENT, NULL),
	                 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 20);
	check_value(e, "k00001", "new", 3);
	check_value(e, "blob1", big, sizeof(big));
	char buf[4096];
	size_t n = engine_stats_format(e, buf, sizeof(buf));
	assert_true(n > 100 && n < sizeof(buf));
	assert_non_null(strstr(buf, "epoch 3\n"));
	assert_non_null(strstr(buf, "store_requests_put "));
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_batch_atomic(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 20);
	struct engine_batch *b;
	uint64_t t1 = 0, t2 = 0;
	(void)state;

	assert_int_equal(engine_batch_new(&b), 0);
	assert_int_equal(engine_batch_put(b, "a", 1, "1", 1), 0);
	assert_int_equal(engine_batch_put(b, "b", 1, "2", 1), 0);
	assert_int_equal(engine_batch_delete(b, "a", 1), 0);
	assert_int_equal(engine_batch_count(b), 3);
	assert_int_equal(engine_write(e, b, 0, &t1), 0);
	engine_batch_clear(b);
	assert_int_equal(engine_batch_count(b), 0);
	assert_int_equal(engine_batch_put(b, "c", 1, "3", 1), 0);
	assert_int_equal(engine_write(e, b, 0, &t2), 0);
	assert_true(t2 >= t1);
	assert_int_equal(engine_wait(e, t2, true), 0);
	assert_int_equal(engine_wait(e, t1, false), 0);
	check_absent(e, "a");
	check_value(e, "b", "2", 1);
	engine_batch_free(b);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 20);
	check_absent(e, "a");
	check_value(e, "b", "2", 1);
	check_value(e, "c", "3", 1);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* The cadence commits a waiting put; urgent commits at once. */
static void test_cadence_and_urgent(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 300);
	struct engine_stats s;
	uint64_t t0;
	(void)state;

	t0 = now_ms();
	assert_int_equal(engine_put(e, "x", 1, "1", 1, ENGINE_WAIT, NULL), 0);
	uint64_t dt = now_ms() - t0;
	assert_true(dt >= 250); /* waited for the cadence tick */
	assert_true(dt < 3000);
	t0 = now_ms();
	assert_int_equal(engine_put(e, "y", 1, "2", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_true(now_ms() - t0 < 250); /* did not wait for the tick */
	/* sync commits now too */
	assert_int_equal(engine_put(e, "z", 1, "3", 1, 0, NULL), 0);
	t0 = now_ms();
	assert_int_equal(engine_sync(e), 0);
	assert_true(now_ms() - t0 < 250);
	engine_get_stats(e, &s);
	assert_int_equal(s.groups_committed, 3);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* A group past group_max_bytes is committed without waiting for the tick. */
static void test_size_trigger(void **state)
{
	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	static uint8_t v[3000];
	uint64_t t = 0, t0;
	(void)state;

	engine_opts_default(&o);
	o.cadence_ms = 60000;
	o.group_max_bytes = 8192;
	o.inline_max = 100000;
	assert_int_equal(engine_open(st, &o, &e), 0);
	t0 = now_ms();
	for (int i = 0; i < 3; i++) {
		char k[8];
		snprintf(k, sizeof(k), "s%d", i);
		assert_int_equal(engine_put(e, k, strlen(k), v, sizeof(v), 0, &t), 0);
	}
	assert_int_equal(engine_wait(e, t, false), 0);
	assert_true(now_ms() - t0 < 5000);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

struct wctx {
	struct engine *e;
	int id;
	int n;
	int flags;
	uint64_t last_ticket;
};

static void *writer_thread(void *arg)
{
	struct wctx *c = arg;
	char k[32], v[32];
	for (int i = 0; i < c->n; i++) {
		uint64_t t;
		snprintf(k, sizeof(k), "t%02d-%05d", c->id, i);
		snprintf(v, sizeof(v), "%d-%d", c->id, i);
		if (engine_put(c->e, k, strlen(k), v, strlen(v), c->flags, &t) != 0)
			return (void *)1;
		if (t < c->last_ticket)
			return (void *)2; /* tickets of one thread never go back */
		c->last_ticket = t;
	}
	return NULL;
}

/* Eight threads waiting on the cadence share a few groups. */
static void test_coalescing(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 100);
	pthread_t th[8];
	struct wctx c[8];
	struct engine_stats s;
	(void)state;

	for (int i = 0; i < 8; i++) {
		c[i] = (struct wctx){.e = e, .id = i, .n = 5, .flags = ENGINE_WAIT};
		assert_int_equal(pthread_create(&th[i], NULL, writer_thread, &c[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		void *r;
		pthread_join(th[i], &r);
		assert_null(r);
	}
	engine_get_stats(e, &s);
	/* 40 durable puts; each thread waits 5 times: about 5 groups, far fewer than 40 */
	assert_true(s.groups_committed >= 5);
	assert_true(s.groups_committed <= 12);
	assert_int_equal(s.puts, 40);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 100);
	check_value(e, "t07-00004", "7-4", 3);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* Urgent waiters from many threads: acks in order, everything durable. */
static void test_urgent_threads(void **state)
{
	struct store *st = open_store();
	struct engine *e = open_engine(st, 100);
	pthread_t th[4];
	struct wctx c[4];
	(void)state;

	for (int i = 0; i < 4; i++) {
		c[i] =
		    (struct wctx){.e = e, .id = i, .n = 50, .flags = ENGINE_WAIT | ENGINE_URGENT};
		assert_int_equal(pthread_create(&th[i], NULL, writer_thread, &c[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *r;
		pthread_join(th[i], &r);
		assert_null(r);
	}
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 100);
	char k[32], v[32];
	for (int i = 0; i < 4; i++)
		for (int j = 0; j < 50; j++) {
			snprintf(k, sizeof(k), "t%02d-%05d", i, j);
			snprintf(v, sizeof(v), "%d-%d", i, j);
			check_value(e, k, v, strlen(v));
		}
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* A failed WAL put fences the writer: sticky -EIO; acked data survives. */
static void test_sticky_error(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine *e;
	uint64_t t = 0;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	e = open_engine(st, 50);
	assert_int_equal(engine_put(e, "ok", 2, "1", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT), 1, -EIO, FAULT_PERSIST);
	assert_int_equal(engine_put(e, "bad", 3, "2", 1, 0, &t), 0);
	assert_int_equal(engine_wait(e, t, true), -EIO);
	assert_int_equal(engine_put(e, "later", 5, "3", 1, 0, NULL), -EIO);
	assert_int_equal(engine_sync(e), -EIO);
	check_value(e, "ok", "1", 1); /* reads keep working */
	struct engine_stats s;
	engine_get_stats(e, &s);
	assert_int_equal(s.sticky_error, -EIO);
	assert_int_equal(engine_close(e), -EIO);
	fault_store_clear(f);
	e = open_engine(st, 50);
	check_value(e, "ok", "1", 1);
	check_absent(e, "bad");
	check_absent(e, "later");
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* The put failed but landed (a lost acknowledgement): resolved as durable. */
static void test_lost_ack_resolved(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine *e;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	e = open_engine(st, 50);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT), 1, -ETIMEDOUT, FAULT_LAND);
	assert_int_equal(engine_put(e, "landed", 6, "1", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_put(e, "next", 4, "2", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 50);
	check_value(e, "landed", "1", 1);
	check_value(e, "next", "2", 1);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* A pack put failure fails the group before its WAL entry is written. */
static void test_pack_failure(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine *e;
	static uint8_t big[20000];
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	e = open_engine(st, 50);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT), 1, -EIO, 0);
	assert_int_equal(
	    engine_put(e, "big", 3, big, sizeof(big), ENGINE_WAIT | ENGINE_URGENT, NULL), -EIO);
	assert_int_equal(engine_close(e), -EIO);
	e = open_engine(st, 50);
	check_absent(e, "big");
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* ---- outages: transient failures are retried (docs/WAL.md, "Outages") ---- */

static struct engine *open_retrying(struct store *st, unsigned sync_timeout_ms)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 20;
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* test_outage_pack fails the pack's put */
	o.cache_bytes = 1 << 20;
	o.sync_timeout_ms = sync_timeout_ms;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

struct bg_put {
	struct engine *e;
	const char *key;
	size_t vlen;
	int rc;
	bool done;
};

static void *bg_put_main(void *arg)
{
	struct bg_put *p = arg;
	static uint8_t v[20000];
	fill(v, sizeof(v), 3);
	p->rc =
	    engine_put(p->e, p->key, strlen(p->key), v, p->vlen, ENGINE_WAIT | ENGINE_URGENT, NULL);
	__atomic_store_n(&p->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Wait (up to 10 s) until the engine has retried a commit n times. */
static void wait_retries(struct engine *e, uint64_t n)
{
	struct engine_stats s;
	for (int i = 0; i < 1000; i++) {
		engine_get_stats(e, &s);
		if (s.commit_retries >= n)
			return;
		usleep(10000);
	}
	fail_msg("the engine retried %llu times, want %llu", (unsigned long long)s.commit_retries,
	         (unsigned long long)n);
}

/*
 * The store fails every WAL put (or every pack put) for a while: the waiting
 * write stays pending, the stats show the outage, and once the store takes
 * puts again the same group commits, the waiter gets 0 and the writer goes on.
 */
static void outage_case(unsigned op, size_t vlen)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	struct engine_stats s;
	struct bg_put p = {0};
	pthread_t tid;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_retrying(st, 0);
	assert_int_equal(engine_put(e, "before", 6, "1", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	fault_store_fail_nth(f, FAULT_M(op), 1, -ECONNREFUSED, FAULT_PERSIST);
	p = (struct bg_put){e, "during", vlen, 0, false};
	assert_int_equal(pthread_create(&tid, NULL, bg_put_main, &p), 0);
	wait_retries(e, 3);
	assert_false(__atomic_load_n(&p.done, __ATOMIC_SEQ_CST)); /* still waiting */
	engine_get_stats(e, &s);
	assert_true(s.outage_since > 0);
	assert_int_equal(s.outage_error, -ECONNREFUSED);
	assert_int_equal(s.sticky_error, 0);
	check_value(e, "before", "1", 1); /* reads keep working */
	fault_store_clear(f);
	pthread_join(tid, NULL);
	assert_int_equal(p.rc, 0);
	engine_get_stats(e, &s);
	assert_int_equal(s.outage_since, 0);
	assert_int_equal(s.outages, 1);
	assert_int_equal(engine_put(e, "after", 5, "3", 1, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 50);
	check_value(e, "before", "1", 1);
	check_value(e, "after", "3", 1);
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, "during", 6, &v, &n), 0);
	assert_int_equal(n, vlen);
	free(v);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_outage_wal(void **state)
{
	(void)state;
	outage_case(FAULT_OP_PUT_IF_ABSENT, 10);
}

static void test_outage_pack(void **state)
{
	(void)state;
	outage_case(FAULT_OP_PUT, 20000); /* a blob: its pack put fails first */
}

/* A WAL put whose answer is lost while the store stays down is settled by a retry. */
static void test_outage_lost_ack(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	(void)state;

	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_retrying(st, 0);
	/* the put lands but its answer is lost, and the read-back fails too */
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_PUT_IF_ABSENT), 1, -ETIMEDOUT, FAULT_LAND);
	fault_store_fail_random(f, FAULT_M(FAULT_OP_GET), 1.0, -ECONNRESET, 0);
	struct bg_put p = {e, "landed", 10, 0, false};
	pthread_t tid;
	assert_int_equal(pthread_create(&tid, NULL, bg_put_main, &p), 0);
	wait_retries(e, 2);
	fault_store_fail_random(f, FAULT_M(FAULT_OP_GET), 0.0, 0, 0);
	pthread_join(tid, NULL);
	assert_int_equal(p.rc, 0); /* the retry found our own entry (-EEXIST, same bytes) */
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 50);
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, "landed", 6, &v, &n), 0);
	free(v);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* ---- reads that the caches or a waiting read serve (outages, issue 10) ----- */

/*
 * What this engine committed is read back from its blob cache with no store
 * read at all: while the store is down, and with several blobs of one pack
 * (each cache entry shares the pack's memory).
 */
static void test_committed_blobs_cached(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	static uint8_t a[3000], b[5000];
	(void)state;

	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 7 + 1);
	memset(a, 0xa5, sizeof(a));
	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_engine(st, 1000);
	assert_int_equal(engine_put(e, "a", 1, a, sizeof(a), 0, NULL), 0);
	assert_int_equal(engine_put(e, "b", 1, b, sizeof(b), ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_GET), 1, -ECONNREFUSED, FAULT_PERSIST);
	uint64_t gets = fault_store_calls(f, FAULT_OP_GET);
	check_value(e, "a", a, sizeof(a));
	check_value(e, "b", b, sizeof(b));
	assert_int_equal(fault_store_calls(f, FAULT_OP_GET), gets);
	fault_store_clear(f);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 50); /* a new engine has a cold cache: the store serves it */
	check_value(e, "b", b, sizeof(b));
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * The read tiers over a cold engine (docs/CACHE.md): big blobs (windows
 * fetched whole, kept by reference to the GET's buffer) and small ones
 * (coalesced regions) read at random offsets with a memory LRU smaller than
 * the data, every byte compared; then a reopen on the same disk cache reads
 * everything without a GET.  Randomized: prints its seed (SEED=N replays).
 */
static void test_read_tiers(void **state)
{
	enum { NBIG = 6, BIG = 3 << 20, NSMALL = 60 };
	static uint8_t big[NBIG][BIG], small[NSMALL][9000];
	size_t slen[NSMALL];
	char dc[300], k[16];
	uint8_t *buf = malloc(BIG);
	const char *env = getenv("SEED");
	unsigned seed = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)time(NULL);
	(void)state;

	printf("test_read_tiers: seed %u (SEED=%u replays)\n", seed, seed);
	srand(seed);
	assert_non_null(buf);
	snprintf(dc, sizeof(dc), "%s-dc", g_dir);
	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF;
	o.commit_retry_ms = ENGINE_NO_RETRY;
	o.cache_bytes = 16 << 20; /* 14 MiB of LRU, 2 MiB of regions: less than the data */
	o.read_region_bytes = 1 << 20;
	o.disk_cache_dir = dc;
	/* an explicit bound: the default one is half the free space, which may hold less than
	 * the data on a machine with a nearly full disk (then every reopen GETs again) */
	o.disk_cache_bytes = 64u << 20;
	struct statvfs sv;
	assert_int_equal(statvfs(g_dir, &sv), 0);
	if ((uint64_t)sv.f_bavail * sv.f_frsize < (64ull << 20)) {
		printf("test_read_tiers: SKIP: %s has less than 64 MiB free for the store and the "
		       "disk cache\n",
		       g_dir);
		store_close(st);
		free(buf);
		skip();
	}
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < NBIG; i++) {
		fill(big[i], BIG, 100 + (unsigned)i);
		snprintf(k, sizeof(k), "big%d", i);
		assert_int_equal(engine_put(e, k, strlen(k), big[i], BIG, 0, NULL), 0);
	}
	for (int i = 0; i < NSMALL; i++) {
		slen[i] = 2000 + (size_t)(rand() % 7000);
		fill(small[i], slen[i], 200 + (unsigned)i);
		snprintf(k, sizeof(k), "small%d", i);
		assert_int_equal(engine_put(e, k, strlen(k), small[i], slen[i],
		                            i == NSMALL - 1 ? ENGINE_WAIT | ENGINE_URGENT : 0,
		                            NULL),
		                 0);
	}
	assert_int_equal(engine_close(e), 0);

	for (int pass = 0; pass < 2; pass++) {
		o.disk_cache_dir = dc;
		assert_int_equal(engine_open(st, &o, &e), 0);
		for (int r = 0; r < 400; r++) {
			bool isbig = rand() % 2;
			int i = rand() % (isbig ? NBIG : NSMALL);
			size_t vlen = isbig ? BIG : slen[i];
			const uint8_t *want = isbig ? big[i] : small[i];
			uint64_t off = (uint64_t)rand() % vlen;
			size_t len = 1 + (size_t)rand() % (isbig ? (300u << 10) : vlen), got = 0;
			snprintf(k, sizeof(k), isbig ? "big%d" : "small%d", i);
			assert_int_equal(engine_get_range(e, k, strlen(k), off, buf, len, &got), 0);
			assert_int_equal(got, len < vlen - off ? len : vlen - off);
			assert_memory_equal(buf, want + off, got);
		}
		for (int i = 0; i < NBIG; i++) {
			snprintf(k, sizeof(k), "big%d", i);
			check_value(e, k, big[i], BIG);
		}
		for (int i = 0; i < NSMALL; i++) {
			snprintf(k, sizeof(k), "small%d", i);
			check_value(e, k, small[i], slen[i]);
		}
		struct engine_stats s;
		engine_get_stats(e, &s);
		printf("  pass %d: %llu GETs, %llu region hits, %llu disk hits, %llu memory hits\n",
		       pass, (unsigned long long)s.blob_fetches,
		       (unsigned long long)s.read_region_hits, (unsigned long long)s.read_disk_hits,
		       (unsigned long long)s.read_mem_hits);
		if (pass == 0) {
			assert_true(s.blob_fetches > 0);
			assert_true(s.read_region_hits >
			            0); /* small blobs came from a coalesced GET */
		} else {
			assert_int_equal(s.blob_fetches, 0); /* all from the disk cache */
			assert_true(s.read_disk_hits > 0);
		}
		assert_int_equal(engine_close(e), 0); /* writes out what is queued for the disk */
	}
	store_close(st);
	free(buf);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dc);
	assert_int_equal(system(cmd), 0);
}

struct lift_later {
	struct fault_store *f;
	unsigned ms;
};

static void *lift_main(void *arg)
{
	struct lift_later *l = arg;
	struct timespec ts = {.tv_sec = l->ms / 1000u, .tv_nsec = (long)(l->ms % 1000u) * 1000000L};
	nanosleep(&ts, NULL);
	fault_store_clear(l->f);
	return NULL;
}

/*
 * engine_get_range_wait() waits out failing store reads (a cold cache during
 * an outage) and gives up after sync_timeout_ms when that is set; a missing
 * key is -ENOENT at once.
 */
static void test_get_range_wait(void **state)
{
	struct store *inner = open_store(), *st;
	struct fault_store *f;
	static uint8_t b[5000], got[5000];
	size_t n = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(b); i++)
		b[i] = (uint8_t)(i * 13 + 5);
	assert_int_equal(fault_store_new(inner, &f), 0);
	st = fault_store_as_store(f);
	struct engine *e = open_engine(st, 10);
	assert_int_equal(engine_put(e, "b", 1, b, sizeof(b), ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st, 10); /* cold caches: the value is in an SSTable and a pack */
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_GET), 1, -ECONNREFUSED, FAULT_PERSIST);
	assert_int_equal(engine_get_range(e, "b", 1, 0, got, sizeof(got), &n), -ECONNREFUSED);
	struct lift_later l = {f, 400};
	pthread_t tid;
	uint64_t t0 = now_ms();
	assert_int_equal(pthread_create(&tid, NULL, lift_main, &l), 0);
	assert_int_equal(engine_get_range_wait(e, "b", 1, 100, got, sizeof(got), &n), 0);
	pthread_join(tid, NULL);
	assert_true(now_ms() - t0 >= 400);
	assert_int_equal(n, sizeof(b) - 100);
	assert_memory_equal(got, b + 100, n);
	assert_int_equal(engine_get_range_wait(e, "none", 4, 0, got, sizeof(got), &n), -ENOENT);
	assert_int_equal(engine_close(e), 0);

	struct engine_opts o;
	engine_opts_default(&o);
	o.inline_max = 1024;
	o.sync_timeout_ms = 300;
	assert_int_equal(engine_open(st, &o, &e), 0);
	fault_store_fail_nth(f, FAULT_M(FAULT_OP_GET), 1, -ECONNREFUSED, FAULT_PERSIST);
	t0 = now_ms();
	assert_int_equal(engine_get_range_wait(e, "b", 1, 0, got, sizeof(got), &n), -ECONNREFUSED);
	assert_true(now_ms() - t0 >= 300);
	fault_store_clear(f);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static uint64_t all_calls(struct fault_store *f)
{
	uint64_t n = 0;
	for (int op = 0; op < FAULT_OP__COUNT; op++)
		n += fault_store_calls(f, (enum fault_op)op);
	return n;
}

static struct engine_stats stats_of(struct engine *e)
{
	struct engine_stats s;
	engine_get_stats(e, &s);
	return s;
}

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

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_put_get_reopen, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_batch_atomic, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cadence_and_urgent, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_size_trigger, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_coalescing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_urgent_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_sticky_error, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_lost_ack_resolved, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pack_failure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_wal, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_pack, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_lost_ack, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_committed_blobs_cached, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_tiers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_range_wait, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_gc_idle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_enospc, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_outage_sync_timeout, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_full_groups_queue, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_wait_room, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fencing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_scan_snapshot, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corruption, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_backpressure, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_freeze_keeps_readable, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flush_and_reopen, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_during_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replay_bound, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
