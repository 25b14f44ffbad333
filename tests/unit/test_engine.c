/*
 * test_engine.c - unit tests of the engine (engine.h) on the local store:
 * put/get/delete, blobs, reopen, group-commit triggers (cadence, size,
 * urgent, coalescing), ordered acknowledgements, sticky errors with the
 * fault store, outages (retried commits, reads served from the caches or
 * waiting for the store).  GC when idle, fencing, read-only open,
 * corruption, backpressure, flush and replay are in test_engine_life.c;
 * the helpers both use in engine_fixture.c.  Sections are marked "---- ".
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

#include "engine_fixture.h"

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
 * One disk cache shared by the engines of two regions (engine_opts.disk_cache, docs/CACHE.md):
 * their packs and tables have the same names (epoch 1, the same positions, offsets and
 * lengths; one key, so the same index) and other bytes; each engine's pack windows and table
 * blocks are keyed with its salt, so after both read their blob once, reopened engines read
 * both again, right, without a GET.  (Without the salt the second region's table block
 * replaced the first's, passed its trailer check and gave the first region the second's
 * descriptor: its bytes were served as the first's.)
 */
static void test_shared_disk_cache(void **state)
{
	enum { BIG = 2 << 20 };
	static uint8_t val[2][BIG];
	uint8_t *buf = malloc(BIG);
	char dc[300], prefix[16];
	struct store *st = open_store(), *view[2];
	struct engine *e[2];
	struct engine_disk_cache *c = NULL;
	struct engine_opts o;
	(void)state;

	assert_non_null(buf);
	snprintf(dc, sizeof(dc), "%s-shared-dc", g_dir);
	engine_opts_default(&o);
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF;
	o.commit_retry_ms = ENGINE_NO_RETRY;
	o.cache_bytes = 4 << 20;
	for (int r = 0; r < 2; r++) {
		snprintf(prefix, sizeof(prefix), "r/%d/", r + 1);
		assert_int_equal(store_open_sub(st, prefix, &view[r]), 0);
		fill(val[r], BIG, 300 + (unsigned)r);
		assert_int_equal(engine_open(view[r], &o, &e[r]), 0);
		assert_int_equal(
		    engine_put(e[r], "big", 3, val[r], BIG, ENGINE_WAIT | ENGINE_URGENT, NULL), 0);
		assert_int_equal(engine_close(e[r]), 0);
	}
	assert_int_equal(engine_disk_cache_open(dc, 64u << 20, &c), 0);
	assert_int_equal(engine_disk_cache_open(dc, 64u << 20, &(struct engine_disk_cache *){0}),
	                 -EBUSY); /* one holder of the directory */
	o.read_only = true;
	o.disk_cache = c;
	for (int pass = 0; pass < 2; pass++) {
		for (int r = 0; r < 2; r++) {
			o.disk_cache_salt = (uint64_t)r + 1;
			assert_int_equal(engine_open(view[r], &o, &e[r]), 0);
			check_value(e[r], "big", val[r], BIG);
		}
		for (int r = 0; r < 2; r++) {
			struct engine_stats s;
			engine_get_stats(e[r], &s);
			printf("  pass %d, region %d: %llu GETs\n", pass, r + 1,
			       (unsigned long long)s.blob_fetches);
			if (pass == 0)
				assert_true(s.blob_fetches > 0);
			else
				assert_int_equal(s.blob_fetches, 0); /* its own windows, on disk */
			assert_int_equal(engine_close(e[r]), 0); /* its queued windows written */
		}
	}
	engine_disk_cache_close(c);
	for (int r = 0; r < 2; r++)
		store_close(view[r]);
	store_close(st);
	free(buf);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dc);
	assert_int_equal(system(cmd), 0);
}

/*
 * The read tiers over a cold engine (docs/CACHE.md): big blobs (windows
 * fetched whole, kept by reference to the GET's buffer) and small ones
 * (coalesced regions) read at random offsets with a memory LRU smaller than
 * the data, every byte compared; then a reopen on the same disk cache reads
 * everything without a GET, and the disk cache holds 1 MiB windows of blocks.  Randomized: prints
 * its seed (SEED=N replays).
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
	/* the disk cache holds windows: each big blob is three files of 1 MiB of blocks
	 * (after a 4 KiB header page), not 48 of a block each */
	char cmd[400], line[32] = "";
	snprintf(cmd, sizeof(cmd), "find '%s' -type f -size %uc | wc -l", dc, 4096 + (1u << 20));
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	pclose(f);
	assert_int_equal(atoi(line), NBIG * BIG / (1 << 20));
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dc);
	assert_int_equal(system(cmd), 0);
}

/*
 * Options of the pack read-ahead tests: blobs in packs, one group until a
 * put commits it, a 128 MiB cache (16 MiB of regions of R bytes).
 */
static void region_opts(struct engine_opts *o, uint64_t R)
{
	engine_opts_default(o);
	o->wal_blob_max = ENGINE_WAL_BLOBS_OFF;
	o->cadence_ms = 60000;
	o->group_max_bytes = 64u << 20;
	o->cache_bytes = 128u << 20;
	o->read_region_bytes = R;
}

/* Wait (at most 20 s) until at least n pack regions were read ahead; the stats then. */
static void wait_aheads(struct engine *e, uint64_t n, struct engine_stats *s)
{
	uint64_t t0 = now_ms();
	do {
		engine_get_stats(e, s);
		if (s->read_region_aheads >= n)
			return;
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	} while (now_ms() - t0 < 20000);
	fail_msg("%llu regions read ahead, %llu expected",
	         (unsigned long long)s->read_region_aheads, (unsigned long long)n);
}

/* Read blobs "f%02d" from .. to - 1 of LEN bytes each and compare them with v[i]. */
static void read_blobs(struct engine *e, int from, int to, uint8_t (*v)[100 << 10])
{
	static uint8_t got[100 << 10];
	char k[16];
	size_t n;

	for (int i = from; i < to; i++) {
		snprintf(k, sizeof(k), "f%02d", i);
		assert_int_equal(engine_get_range(e, k, strlen(k), 0, got, sizeof(got), &n), 0);
		assert_int_equal(n, sizeof(got));
		assert_memory_equal(got, v[i], sizeof(got));
	}
}

/*
 * The pack read-ahead of small blobs: 80 blobs of 100 KiB written in one group
 * lie in one pack (8 MiB, regions 0-7).  A cold reader of blobs in pack order
 * that has used regions 0 and 1 has regions 2-5 fetched for it by the
 * read-ahead threads (waited for here: they run in the background), so the
 * blobs of regions 2-5 cost the reader no GET of its own; every byte is
 * compared, and the scan goes on to the end of the pack with the read-ahead
 * running beside it.
 */
static void test_region_ahead(void **state)
{
	enum { N = 80, LEN = 100 << 10 };
	static uint8_t v[N][LEN], got[LEN];
	const uint64_t R = 1 << 20;
	char k[16];
	size_t n;
	(void)state;

	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	region_opts(&o, R); /* one group: the last put commits it; 16 MiB of regions */
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < N; i++) {
		fill(v[i], LEN, 300 + (unsigned)i);
		snprintf(k, sizeof(k), "f%02d", i);
		assert_int_equal(engine_put(e, k, strlen(k), v[i], LEN,
		                            i == N - 1 ? ENGINE_WAIT | ENGINE_URGENT : 0, NULL),
		                 0);
	}
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(engine_open(st, &o, &e), 0); /* cold */

	struct engine_stats s;
	/* blob i starts at pack offset 32 + i * LEN (header, then the blobs back to back) */
	int i = 0;
	for (; 32 + (uint64_t)(i + 1) * LEN <= 2 * R; i++) { /* regions 0 and 1 */
		snprintf(k, sizeof(k), "f%02d", i);
		assert_int_equal(engine_get_range(e, k, strlen(k), 0, got, LEN, &n), 0);
		assert_int_equal(n, LEN);
		assert_memory_equal(got, v[i], LEN);
	}
	wait_aheads(e, 4, &s);                                /* regions 2, 3, 4 and 5 */
	uint64_t own = s.blob_fetches - s.read_region_aheads; /* the reader's own GETs */
	for (; 32 + (uint64_t)(i + 1) * LEN <= 6 * R; i++) {  /* wholly inside regions 2-5 */
		snprintf(k, sizeof(k), "f%02d", i);
		assert_int_equal(engine_get_range(e, k, strlen(k), 0, got, LEN, &n), 0);
		assert_memory_equal(got, v[i], LEN);
	}
	engine_get_stats(e, &s);
	printf("test_region_ahead: %llu GETs, %llu of them read-ahead, %llu region hits\n",
	       (unsigned long long)s.blob_fetches, (unsigned long long)s.read_region_aheads,
	       (unsigned long long)s.read_region_hits);
	assert_int_equal(s.blob_fetches - s.read_region_aheads, own);
	for (; i < N; i++) {
		snprintf(k, sizeof(k), "f%02d", i);
		assert_int_equal(engine_get_range(e, k, strlen(k), 0, got, LEN, &n), 0);
		assert_int_equal(n, LEN);
		assert_memory_equal(got, v[i], LEN);
	}
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/* The value of stats line name of e (engine_stats_format()). */
static uint64_t stat_line(struct engine *e, const char *name)
{
	static char buf[16384];
	char pat[80];
	size_t n = engine_stats_format(e, buf, sizeof(buf));
	assert_true(n < sizeof(buf));
	snprintf(pat, sizeof(pat), "\n%s ", name);
	const char *p = strstr(buf, pat);
	assert_non_null(p);
	return strtoull(p + strlen(pat), NULL, 10);
}

/*
 * Region shares (engine/read/blob.c, docs/CACHE.md): blocks served from a cached
 * region are kept by reference to its GET buffer, and what an evicted
 * region's buffer holds that no such block covers is counted in
 * read_region_pinned_bytes, under a bound.  24 regions of blobs of 128 KiB
 * that tile them (the first one 32 bytes short, for the pack header), a
 * 16 MiB cache: 2 MiB of regions (the bound), 14 MiB of blocks.  A scan of 8
 * regions, read backwards (no read-ahead: every GET is the reader's), leaves
 * next to nothing pinned: its blocks cover their regions.  Then one blob of
 * each of the 16 other regions pins 7/8 of each region it came from until the
 * bound stops the sharing: the pinned bytes reach the bound and stay under
 * twice it (the shares taken while the regions still in the cache were
 * held).  Every byte is compared, twice (the second time from the blob
 * cache), and each region cost one GET.
 */
static void test_region_shares(void **state)
{
	enum { REGIONS = 24, PER = 8, LEN = 128 << 10, N = REGIONS * PER, SCAN = 8 };
	const uint64_t R = 1 << 20, MAX = 2 << 20;
	static uint8_t want[LEN], got[LEN];
	char k[16];
	size_t n;
	(void)state;

	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	region_opts(&o, R);
	o.cache_bytes = 16u << 20; /* regions: an eighth */
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < N; i++) {
		size_t len = i ? LEN : LEN - 32;
		fill(want, len, 900 + (unsigned)i);
		snprintf(k, sizeof(k), "f%03d", i);
		assert_int_equal(engine_put(e, k, strlen(k), want, len,
		                            i == N - 1 ? ENGINE_WAIT | ENGINE_URGENT : 0, NULL),
		                 0);
	}
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(engine_open(st, &o, &e), 0); /* cold */

	int order[N], m = 0;
	for (int i = N - 1; i >= N - SCAN * PER; i--) /* the scan of the last 8 regions */
		order[m++] = i;
	int scanned = m;
	for (int r = REGIONS - SCAN - 1; r >= 0; r--) /* one blob of each other region */
		order[m++] = r * PER + 3;
	for (int pass = 0; pass < 2; pass++) {
		for (int j = 0; j < m; j++) {
			int i = order[j];
			size_t len = i ? LEN : LEN - 32;
			fill(want, len, 900 + (unsigned)i);
			snprintf(k, sizeof(k), "f%03d", i);
			assert_int_equal(engine_get_range(e, k, strlen(k), 0, got, LEN, &n), 0);
			assert_int_equal(n, len);
			assert_memory_equal(got, want, len);
			if (pass == 0 && j == scanned - 1) {
				uint64_t pinned = stat_line(e, "read_region_pinned_bytes");
				printf("test_region_shares: after the scan %llu bytes pinned\n",
				       (unsigned long long)pinned);
				assert_true(pinned < R / 16);
			}
		}
		struct engine_stats s = stats_of(e);
		uint64_t pinned = stat_line(e, "read_region_pinned_bytes");
		printf("test_region_shares: pass %d: %llu GETs, %llu region hits, %llu bytes "
		       "pinned\n",
		       pass, (unsigned long long)s.blob_fetches,
		       (unsigned long long)s.read_region_hits, (unsigned long long)pinned);
		assert_int_equal(s.read_region_aheads, 0);
		assert_int_equal(s.blob_fetches, REGIONS); /* one GET a region, none again */
		assert_true(pinned >= MAX);
		assert_true(pinned < 2 * MAX);
	}
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * Wait (at most 20 s) until the pack read-ahead has nothing queued or in
 * flight; the stats then.  What a reader's read queued is fetched by then.
 */
static void wait_ahead_idle(struct engine *e, struct engine_stats *s)
{
	uint64_t t0 = now_ms();
	while (stat_line(e, "read_region_ahead_pending") != 0) {
		if (now_ms() - t0 > 20000)
			fail_msg("the read-ahead is still busy after 20 s");
		struct timespec ts = {0, 10 * 1000000L};
		nanosleep(&ts, NULL);
	}
	engine_get_stats(e, s);
}

/*
 * A scan that reaches the end of a pack goes on into the pack of the next
 * position (the writer's next group): reading the first region of the second
 * of two packs written one after the other costs the reader no GET of its own.
 * The reader waits until the read-ahead is idle before it reads on (one that
 * overtook the read-ahead threads would send its own GET: a race, not a
 * failure of the read-ahead; and how many empty regions past the first pack's
 * end are asked for depends on the threads' timing, so no count of them is
 * waited for).
 */
static void test_region_ahead_next_pack(void **state)
{
	enum { N = 30, LEN = 100 << 10 }; /* 30 x 100 KiB a pack: regions 0, 1 and a short 2 */
	static uint8_t v[2 * N][LEN];
	const uint64_t R = 1 << 20;
	char k[16];
	(void)state;

	struct store *st = open_store();
	struct engine_opts o;
	struct engine *e = NULL;
	region_opts(&o, R); /* one group per pack: its last put commits it */
	assert_int_equal(engine_open(st, &o, &e), 0);
	for (int i = 0; i < 2 * N; i++) {
		fill(v[i], LEN, 700 + (unsigned)i);
		snprintf(k, sizeof(k), "f%02d", i);
		assert_int_equal(engine_put(e, k, strlen(k), v[i], LEN,
		                            i % N == N - 1 ? ENGINE_WAIT | ENGINE_URGENT : 0, NULL),
		                 0);
	}
	assert_int_equal(engine_close(e), 0);
	assert_int_equal(engine_open(st, &o, &e), 0); /* cold */

	struct engine_stats s;
	int i = 0;
	while (32 + (uint64_t)(i + 1) * LEN <= 2 * R) /* wholly in regions 0 and 1 */
		i++;
	read_blobs(e, 0, i, v);
	/* region 2 of the first pack (and maybe regions past its end, as empty ones, or
	 * region 0 of the next pack: how far it gets depends on how soon region 2, the
	 * short one, comes back) before the reader goes on: a reader that reached region 2
	 * before the read-ahead had it would do its own GET */
	wait_ahead_idle(e, &s);
	assert_true(s.read_region_aheads >= 1);
	read_blobs(e, i, N, v); /* the rest: its short region 2 ends it */
	/* and region 0 of the next pack, queued at the latest when the reader used the
	 * short region 2 */
	wait_ahead_idle(e, &s);
	assert_true(s.read_region_aheads >= 2);
	uint64_t own = s.blob_fetches - s.read_region_aheads;
	for (i = N; 32 + (uint64_t)(i - N + 1) * LEN <= R;) /* wholly in its region 0 */
		i++;
	read_blobs(e, N, i, v);
	engine_get_stats(e, &s);
	printf("test_region_ahead_next_pack: %llu GETs, %llu of them read-ahead\n",
	       (unsigned long long)s.blob_fetches, (unsigned long long)s.read_region_aheads);
	assert_int_equal(s.blob_fetches - s.read_region_aheads, own);
	read_blobs(e, N, 2 * N, v);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
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
	    cmocka_unit_test_setup_teardown(test_shared_disk_cache, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_region_ahead, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_region_ahead_next_pack, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_region_shares, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_get_range_wait, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
