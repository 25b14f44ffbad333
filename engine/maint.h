/*
 * maint.h - the engine's background maintenance on demand, and its
 * garbage-collection thread (engine/maint.c, docs/GC.md).
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

#include <stdint.h>

struct engine;

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
	uint64_t deleted;             /* objects deleted (incl. aborted uploads) */
	uint64_t deleted_bytes;       /* bytes of the objects deleted */
	uint64_t pack_bytes;          /* pack bytes that stay in the store */
	uint64_t live_pack_bytes;     /* of which referenced by the newest manifest */
	uint64_t repack_packs;        /* packs selected for repack */
	uint64_t repacked_blobs;      /* blobs rewritten through the write path */
	uint64_t repacked_bytes;      /* their bytes */
	uint64_t deferred;            /* objects kept only until they are older than the grace */
	uint64_t wal_only_pack_bytes; /* bytes of packs past the manifest's covered WAL position */
	bool repack_budget_spent;     /* the repack stopped at its byte budget (the rest: later) */
	bool space_requested;         /* maint_gc_cycle(): a freeze (+ compaction) was asked for */
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
 * Wait until the flusher has served every frozen MemTable and every
 * compaction round asked for (by maint_gc_cycle() or anyone).  Returns 0,
 * the sticky error, or the error of a flush attempt that failed meanwhile.
 */
int maint_flusher_idle(struct engine *e);

/* maint.c, for engine.c: start / stop the GC thread (writer engines). */
int gc_thread_start(struct engine *e);
void gc_thread_stop(struct engine *e);

#endif /* MEMWALFS_MAINT_H */
