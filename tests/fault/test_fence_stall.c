/*
 * test_fence_stall.c - fencing must hold however long an old writer stalls
 * (issue 9, docs/WAL.md "Fencing and GC").
 *
 *   test_fence_stall local|s3
 *
 * Writer A has a commit pending when every call of its store handle is held
 * (a paused VM, a partition, SIGSTOP: the fault wrapper's hold knob).  Writer
 * B opens the same location through its own handle (claims an epoch and puts
 * its fence entry at A's next WAL position), writes, flushes and runs GC with
 * no grace until that position is below the covered floor and deleted.  Then
 * A resumes: its put of the WAL entry now succeeds, since the fence is gone.
 * A must still acknowledge nothing (-ESTALE, sticky), and every write B
 * acknowledged is there after a reopen.  Before the epoch lease (writer.c)
 * A acknowledged its write, which no replay ever reads: an fsync lost.
 *
 * Exit 0 pass, 1 fail, 77 skip (s3 without S3_ENDPOINT).
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
#include "format.h"
#include "maint.h"
#include "store.h"

#define FAIL(...)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "FAIL fence-after-gc (line %d): ", __LINE__);                      \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fputc('\n', stderr);                                                               \
		goto out;                                                                          \
	} while (0)

static int put_key(struct engine *e, const char *key, int flags)
{
	return engine_put(e, key, strlen(key), key, strlen(key), flags, NULL);
}

/* 0 if key holds its own name, -ENOENT if absent, another error or -EBADMSG. */
static int check_key(struct engine *e, const char *key)
{
	void *v = NULL;
	size_t vn = 0;
	int rc = engine_get(e, key, strlen(key), &v, &vn);

	if (!rc)
		rc = vn == strlen(key) && !memcmp(v, key, vn) ? 0 : -EBADMSG;
	free(v);
	return rc;
}

/* Listing callback: the highest WAL position. */
static int max_pos(void *arg, const char *key, uint64_t size)
{
	uint64_t *max = arg, p;

	(void)size;
	if (fmt_parse_wal_name(key, &p) == 0 && p > *max)
		*max = p;
	return 0;
}

struct pending {
	struct engine *e;
	int rc;
};

static void *pending_put(void *arg)
{
	struct pending *p = arg;

	p->rc = put_key(p->e, "a/stalled", ENGINE_WAIT | ENGINE_URGENT);
	return NULL;
}

static int run(enum ec_kind kind)
{
	struct ec_backing bk;
	struct store *sa = NULL, *sb = NULL, *inner = NULL;
	struct fault_store *fa = NULL;
	struct engine *ea = NULL, *eb = NULL;
	struct engine_opts oa, ob;
	struct pending pa = {0};
	pthread_t tid;
	bool started = false, held = false;
	char key[32], wal[FMT_NAME_MAX];
	uint64_t tip = 0;
	unsigned rounds = 0, nb = 0;
	int rc, ret = 1;

	rc = ec_backing_new(kind, "stall", &bk);
	if (rc)
		return rc == 77 ? 77 : 1;
	if ((rc = ec_backing_open(&bk, &inner)) || (rc = fault_store_new(inner, &fa)))
		FAIL("open A's store: %d", rc);
	inner = NULL;
	sa = fault_store_as_store(fa);
	if ((rc = ec_backing_open(&bk, &sb)))
		FAIL("open B's store: %d", rc);

	/* A: the GC grace every host uses here is 2 s, so A's lease is 0.2 s */
	engine_opts_default(&oa);
	oa.cadence_ms = 20;
	oa.gc_interval_ms = ENGINE_GC_OFF;
	oa.gc_grace_sec = 2;
	if ((rc = engine_open(sa, &oa, &ea)))
		FAIL("open writer A: %d", rc);
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "a/%d", i);
		if ((rc = put_key(ea, key, i == 9 ? ENGINE_WAIT | ENGINE_URGENT : 0)))
			FAIL("A put %s: %d", key, rc);
	}

	/*
	 * A stalls with a commit pending, right at the put of wal/<tip+1> (only
	 * conditional puts are held: an epoch check A makes before it passes)
	 */
	if ((rc = store_list(sb, FMT_WAL_PREFIX, NULL, 0, max_pos, &tip)))
		FAIL("list wal/: %d", rc);
	fault_store_hold(fa, FAULT_M(FAULT_OP_PUT_IF_ABSENT));
	held = true;
	pa.e = ea;
	if (pthread_create(&tid, NULL, pending_put, &pa))
		FAIL("pthread_create");
	started = true;
	if (!fault_store_wait_held(fa, 1, 10000))
		FAIL("A's commit never reached its store");
	fmt_wal_name(wal, tip + 1);

	/* B takes over, and works and collects until A's next position is gone */
	engine_opts_default(&ob);
	ob.cadence_ms = 20;
	ob.gc_interval_ms = ENGINE_GC_OFF;
	ob.gc_grace_sec = ENGINE_GC_NO_GRACE;
	if ((rc = engine_open(sb, &ob, &eb)))
		FAIL("open writer B: %d", rc);
	struct store_stat ss;

	if ((rc = store_head(sb, wal, &ss)))
		FAIL("B's fence is not at A's next position %s: head %d", wal, rc);
	for (rounds = 0; rounds < 20; rounds++) {
		for (int i = 0; i < 5; i++, nb++) {
			snprintf(key, sizeof(key), "b/%u", nb);
			if ((rc = put_key(eb, key, i == 4 ? ENGINE_WAIT | ENGINE_URGENT : 0)))
				FAIL("B put %s: %d", key, rc);
		}
		if ((rc = maint_flush_now(eb)))
			FAIL("B flush: %d", rc);
		if ((rc = maint_gc_now(eb, NULL)))
			FAIL("B gc: %d", rc);
		rc = store_head(sb, wal, &ss);
		if (rc == -ENOENT)
			break;
		if (rc)
			FAIL("head %s: %d", wal, rc);
	}
	if (rc != -ENOENT)
		FAIL("B's GC never deleted %s after %u rounds", wal, rounds);
	usleep(300000); /* the stall outlasts A's lease */

	/* A resumes: its WAL put lands where the fence was; it must not acknowledge */
	fault_store_hold(fa, 0);
	held = false;
	pthread_join(tid, NULL);
	started = false;
	if (pa.rc == 0)
		FAIL("stalled writer A acknowledged a/stalled after B claimed the store and GC "
		     "deleted B's fence (%s): a durable write no replay will read",
		     wal);
	if (pa.rc != -ESTALE)
		FAIL("A's stalled write returned %d, want -ESTALE", pa.rc);
	if ((rc = put_key(ea, "a/after", ENGINE_WAIT | ENGINE_URGENT)) != -ESTALE)
		FAIL("A's next write returned %d, want -ESTALE (sticky)", rc);
	engine_close(ea);
	ea = NULL;

	/* everything B acknowledged, and A's acknowledged writes, survive a reopen */
	if ((rc = engine_close(eb)))
		FAIL("close B: %d", rc);
	eb = NULL;
	if ((rc = engine_open(sb, &ob, &eb)))
		FAIL("reopen: %d", rc);
	for (unsigned i = 0; i < nb; i++) {
		snprintf(key, sizeof(key), "b/%u", i);
		if ((rc = check_key(eb, key)))
			FAIL("after reopen %s: %d", key, rc);
	}
	for (int i = 0; i < 10; i++) {
		snprintf(key, sizeof(key), "a/%d", i);
		if ((rc = check_key(eb, key)))
			FAIL("after reopen %s: %d", key, rc);
	}
	if ((rc = check_key(eb, "a/after")) != -ENOENT)
		FAIL("A's write after it was fenced is visible: %d", rc);
	printf("fence after gc (%s): ok: A's stalled write got -ESTALE after B deleted %s "
	       "(%u rounds of write+flush+gc); %u writes of B intact\n",
	       kind == EC_S3 ? "s3" : "local", wal, rounds + 1, nb);
	ret = 0;
out:
	if (held)
		fault_store_hold(fa, 0);
	if (started)
		pthread_join(tid, NULL);
	engine_close(ea);
	engine_close(eb);
	store_close(sa);
	store_close(sb);
	store_close(inner);
	ec_backing_destroy(&bk);
	return ret;
}

int main(int argc, char **argv)
{
	enum ec_kind kind = argc > 1 && !strcmp(argv[1], "s3") ? EC_S3 : EC_LOCAL;

	if (kind == EC_S3 && !ec_have_s3()) {
		printf("S3_ENDPOINT unset: skip\n");
		return 77;
	}
	return run(kind);
}
