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
 *   - A's unsynced write from before B's open is not visible to B or later;
 *   - B's writes and A's acknowledged writes are intact after a reopen.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "engine_check.h"
#include "store.h"

#define FAIL(...)                                                        \
	do {                                                             \
		fprintf(stderr, "FAIL fencing (line %d): ", __LINE__);   \
		fprintf(stderr, __VA_ARGS__);                            \
		fputc('\n', stderr);                                     \
		goto out;                                                \
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
	struct waiter w = { 0 };
	pthread_t tid;
	bool started = false;
	char key[16];
	uint64_t w0, w1, w2;
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
	w.e = e1;
	if (pthread_create(&tid, NULL, wait_put, &w))
		FAIL("pthread_create");
	started = true;
	usleep(20000);

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
	if (w1 - w0 > 2)
		FAIL("A's commits across the fence sent %llu write requests (want at most "
		     "a pack and the WAL entry)", (unsigned long long)(w1 - w0));
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
	/* a/p was issued before a/w: durable iff a/w's commit beat the fence */
	rc = check_key(e2, "a/p");
	if (w.rc ? rc != -ENOENT : rc != 0)
		FAIL("B reads A's unsynced a/p: %d (A's waiter got %d)", rc, w.rc);

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
	static const char *const gone[] = { "a/x", "a/y", "a/z", "a/p" };

	for (unsigned i = 0; i < (w.rc ? 4u : 3u); i++)
		if ((rc = check_key(e2, gone[i])) != -ENOENT)
			FAIL("after reopen %s (never acknowledged, written after the fence) "
			     "is visible: %d", gone[i], rc);
	rc = check_key(e2, "a/w");
	if (w.rc == 0 && rc)
		FAIL("A's acknowledged waiter a/w lost after reopen: %d", rc);
	if (w.rc && rc != -ENOENT)
		FAIL("A's failed waiter a/w visible after reopen: %d", rc);
	printf("fencing: ok (A's waiter across the fence: %d; A's failed commit sent %llu "
	       "write requests, none after)\n", w.rc, (unsigned long long)(w1 - w0));
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
