/*
 * maint.h - the engine's background maintenance on demand, and its
 * garbage-collection thread (engine/maint/maint.c, docs/GC.md).
 *
 * The engine runs three kinds of background work by itself: the flusher
 * (flush.c: frozen MemTable -> SSTable, then compaction by score), the
 * committer (writer.c) and the GC thread (maint.c: a GC pass every
 * opts.gc_interval_ms, then a repack of the packs it selected).  The
 * functions below let tests, tools and engine_close() ask for that work now
 * and wait for it.  Private to engine/ and its tests: fs/ never calls them.
 *
 * Threads: any thread may call them, never concurrently with
 * engine_close().  They block; none holds a lock the caller could need.
 */
#ifndef MEMWALFS_MAINT_H
#define MEMWALFS_MAINT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "thread.h"

struct engine;
struct gc;

/*
 * Background maintenance's state: the flusher (flush.c: flushes and compaction
 * rounds) and the GC thread (maint.c), e->m.  Fields marked [mu] are guarded by
 * e->mu; engine.c (open, close, stats), writer.c (wakes the flusher) and watch.c
 * (stops the threads of a store that lost objects) use it too.
 */
struct eng_maint {
	pthread_cond_t flush_cv;  /* wakes the flusher [mu] */
	struct mw_thread flusher; /* the flusher (flush.c); .stop: asked to exit [mu] */
	uint64_t
	    sst_next_id; /* next SSTable id to hand out, only grows (flusher thread; flush.c) */
	uint64_t flush_failures;     /* failed flush attempts since open [mu] */
	int flush_last_error;        /* error of the last failed flush attempt [mu] */
	uint64_t compact_req;        /* forced compaction rounds asked for [mu] */
	uint64_t compact_done;       /* forced compaction rounds done [mu] */
	uint64_t wal_blobs_promoted; /* WAL blob bytes flushes moved into packs [mu] */
	struct gc *gc;               /* the collector (writers; used under gc_mu) */
	pthread_mutex_t gc_mu;       /* serialises GC passes (taken before mu) */
	pthread_cond_t gc_cv;        /* wakes the GC thread [mu] */
	struct mw_thread gc_thread;  /* the GC thread (maint.c); .stop: asked to exit [mu] */
	uint64_t gc_mark[3];         /* what had changed when the last pass began [mu] */
	bool gc_idle;                /* that pass left nothing to wait for (maint.c) [mu] */
	int64_t gc_idle_until;     /* or only deferred objects, the first due then (unix s) [mu] */
	uint64_t gc_space_deletes; /* stats.deletes at the last flush GC asked for [mu] */
	uint64_t gc_stuck_version; /* man.version when GC last asked for a compaction
	                              because its repack found nothing to move [mu] */
	uint64_t gc_pass_us;       /* mw_now_us() when the last GC pass began [gc_mu] */
	uint64_t gc_writes_seen;   /* foreground puts + deletes at the last GC pass [mu] */
	uint64_t gc_pack_mark;     /* stats.pack_bytes when the last good GC pass began [mu] */
};

/*
 * Freeze the active MemTable and wait until every frozen MemTable is an
 * SSTable promoted by the manifest, so that the manifest covers the whole
 * WAL written before the call (a reopen then replays nothing of it; an
 * empty MemTable still advances the covered position).  Returns 0, the
 * writer's sticky error, -EIO when a flush attempt failed (the flusher
 * retries by itself later), -EROFS on a read-only engine.
 */
int maint_flush_now(struct engine *e);

/*
 * Ask the flusher for a full round of compaction (L0 compacted even below
 * its trigger, then every level over its target) and wait for it.
 * Returns 0, the sticky error, -EROFS, or the error of a flush attempt that
 * failed meanwhile (the flusher serves frozen MemTables first; the round is
 * still done once flushes succeed again).
 */
int maint_compact_now(struct engine *e);

/* What one GC pass did (also added to the engine's stats). */
struct maint_gc_result {
	uint64_t deleted;              /* objects deleted (incl. aborted uploads) */
	uint64_t deleted_bytes;        /* bytes of the objects deleted */
	uint64_t pack_bytes;           /* pack bytes that stay in the store */
	uint64_t live_pack_bytes;      /* of which referenced by the newest manifest */
	uint64_t repack_packs;         /* packs selected for repack */
	uint64_t repacked_blobs;       /* blobs rewritten through the write path */
	uint64_t repacked_bytes;       /* their bytes */
	uint64_t deferred;             /* objects kept only until they are older than the grace */
	uint64_t wal_only_pack_bytes;  /* bytes of packs past the manifest's covered WAL position */
	uint64_t unflushed_pack_bytes; /* bytes of packs only the WAL references (not yet flushed:
	                                  live until a flush says otherwise) */
	int64_t next_due;              /* wall-clock second the first deferred one comes due (0) */
	bool repack_budget_spent;      /* the repack stopped at its byte budget (the rest: later) */
	bool repack_none;              /* packs were selected but none of their blobs could move:
	                                  every entry that references them is shadowed by a newer
	                                  version (only a compaction drops those) */
	bool space_requested;          /* maint_gc_cycle(): a freeze (+ compaction) was asked for */
	bool writing; /* written since the pass before: repack at half its threshold */
};

/*
 * Run one GC pass now (serialised with the GC thread): plan from the
 * store, delete what no kept manifest needs, clean abandoned uploads, then
 * repack the selected packs (each live blob rewritten by a put that only
 * applies if the key's newest sequence is unchanged) and sync.  The old
 * packs go in a later pass, once a compaction has dropped the shadowed
 * descriptors.  res may be NULL.  Returns 0, -EROFS, the store's error
 * (the pass stops; what was deleted stays deleted), the sticky error.
 */
int maint_gc_now(struct engine *e, struct maint_gc_result *res);

/*
 * What the GC thread does on each wake-up that is not skipped: one pass as
 * maint_gc_now(), then, when the pass shows space that only a flush (and a
 * compaction) can give back, a MemTable freeze and, with deletes or repack
 * work, a forced compaction round, asked of the flusher without waiting
 * (res->space_requested; rules in maint.c, space_request_locked()).
 * Returns as maint_gc_now().
 */
int maint_gc_cycle(struct engine *e, struct maint_gc_result *res);

/*
 * Bytes one GC pass may repack: kib_per_sec KiB (0: the default, 8192;
 * ENGINE_GC_OFF: no limit, UINT64_MAX) for every second since the pass
 * before it began (since_us; 0: no pass before), at most interval_ms (the
 * GC interval; ENGINE_GC_OFF, passes run by hand: always 60 s).  The
 * thread's passes come sooner than the interval when objects come due
 * (maint_gc_wait_ms()), so the rate holds over time, not only per pass.
 * Pure; any thread.
 */
uint64_t maint_repack_budget(unsigned kib_per_sec, unsigned interval_ms, uint64_t since_us);

/*
 * How long the GC thread waits after a pass that returned rc and *r, at
 * wall-clock time now_ms (ms since the epoch): its interval; when the pass
 * deferred objects, until the first of them comes due (r->next_due); when
 * it asked for a flush (r->space_requested: writes and deletes go on), the
 * floor; never less than the floor, a quarter of the interval (at least 1 s,
 * at most the interval).  Dead data becomes collectable only once the
 * compaction a space request asks for has dropped it, and goes once the
 * grace has passed since: so under churn space comes back about a floor
 * after the grace allows, and a churning mount sends at most four passes of
 * requests per interval.  A pass that deferred nothing
 * waits the interval (and the next wake-up is skipped when nothing changed:
 * an idle mount sends nothing).  Pure; any thread.
 */
uint64_t maint_gc_wait_ms(unsigned interval_ms, const struct maint_gc_result *r, int rc,
                          int64_t now_ms);

/*
 * Wait until the flusher has served every frozen MemTable and every
 * compaction round asked for (by maint_gc_cycle() or anyone).  Returns 0,
 * the sticky error, or the error of a flush attempt that failed meanwhile.
 */
int maint_flusher_idle(struct engine *e);

/* maint.c, for engine.c: start / stop the GC thread (writer engines). */
int gc_thread_start(struct engine *e);
void gc_thread_stop(struct engine *e);

#endif /* MEMWALFS_MAINT_H */
