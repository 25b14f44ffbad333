/*
 * follow.h - followers (engine/follow/follow.c, docs/FOLLOWERS.md): the follower's
 * state (struct eng_follow, e->fo; its fields guarded by e->mu), its start and
 * stop (engine.c), and polls on demand for tests and tools, like maint.h for
 * the writer.  Private to engine/ and its tests.
 */
#ifndef MEMWALFS_FOLLOW_H
#define MEMWALFS_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "thread.h"

struct engine;

/* Followers (read-only engines with opts.follow; follow.c): e->fo. */
struct eng_follow {
	struct mw_thread thread;    /* the follower thread; .stop: asked to exit [mu] */
	pthread_cond_t cv;          /* wakes the follower (close) [mu] */
	engine_follow_fn fn;        /* callback for applied keys, or NULL [mu] */
	engine_follow_gate_fn gate; /* around a publish and its callback, or NULL [mu] */
	void *arg;                  /* its argument [mu] */
	bool in_cb;                 /* the follower is calling fn (durable_cv) [mu] */
	uint64_t kick;              /* polls asked for by follow_poll_now() [mu] */
	uint64_t done;              /* the last of them served (durable_cv) [mu] */
	bool only_manifest;         /* the next poll probes the manifest only [mu] */
	uint64_t max_epoch;         /* highest epoch applied (replay rule) [mu] */
	uint64_t current_us;        /* start of the last poll that found us current [mu] */
	uint64_t wakes;             /* engine_follow_wake() calls (bell mode) [mu] */
	bool bell;                  /* the store's bell exists: deep idle allowed [mu] */
};

/*
 * Sequence numbers a follower gives the ops it applies start at this offset above the
 * manifest's: every sequence in a table the writer wrote is below it, so the follower's
 * MemTables, which hold only WAL entries the tables do not cover or cover identically,
 * always win over the tables, in point reads and in scans alike (follow.c).
 */
#define FOLLOW_SEQ_BASE (1ull << 62)

/* follow.c: start / stop the follower thread (read-only engines with opts.follow). */
int follow_start(struct engine *e);
void follow_stop(struct engine *e);

/*
 * Make the follower poll now (whatever its interval) and wait until that poll is
 * done.  Returns 0, -EINVAL on an engine that does not follow.  Any thread but the
 * follower's (not from the follow callback).
 */
int follow_poll_now(struct engine *e);

/*
 * follow_poll_now(), but the poll probes the manifest only, as an idle follower's poll
 * does every FOLLOW_MANIFEST_EVERY polls (it still applies the WAL a newer manifest
 * covers first).  Same returns and threads.
 */
int follow_poll_manifest_now(struct engine *e);

#endif /* MEMWALFS_FOLLOW_H */
