/*
 * engine_int.h - the engine's private state: struct engine, the few fields
 * every part shares (store, options, manifest, the engine lock, the log's
 * positions, what reads see) and, embedded, the state of each part, declared
 * in the part's own header: e->w (writer.h), e->rd (reader.h), e->m (maint.h),
 * e->fo (follow.h), e->wa (watch.h).  A field marked [mu] is guarded by e->mu,
 * [mem_mu] by e->mem_mu; lock order gc_mu, mu, mem_mu.
 *
 * Included by the engine's parts: batch.c, blob.c, blobcache.c, engine.c,
 * flush.c, follow.c, maint.c, read.c, readcache.c, replay.c, salvage.c,
 * watch.c, writer.c; and by tests/unit/test_follow.c.  Nothing outside
 * engine/ and its tests includes this.
 */
#ifndef MEMWALFS_ENGINE_INT_H
#define MEMWALFS_ENGINE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "engine.h"
#include "flush.h"
#include "follow.h"
#include "format.h"
#include "maint.h"
#include "manifest.h"
#include "memtable.h"
#include "reader.h"
#include "thread.h"
#include "watch.h"
#include "writer.h"

/*
 * Freeze the active MemTable also when this many WAL entries have gone into
 * it, so that replay after a crash reads at most about this many entries
 * (plus those of frozen MemTables not yet flushed), however slow the writes.
 */
#define ENGINE_REPLAY_MAX_ENTRIES 1024
struct sst_reader;

/* A batch: ops encoded as in a WAL body (wal.h), values always inline. */
struct engine_batch {
	struct mw_buf rep; /* u8 type, varint klen, key, varint vlen, value; repeated */
	size_t count;      /* ops in rep */
	size_t bytes;      /* key + value bytes (for accounting) */
};

struct engine {
	struct store *st;          /* borrowed, outlives the engine */
	struct engine_opts o;      /* options, defaults filled (const after open) */
	bool conditional;          /* store has put_if_absent (const) */
	uint64_t epoch;            /* our writer epoch (const after open) */
	bool from_snapshot;        /* opened from a snapshot (const) */
	uint64_t snapshot_wal_end; /* then replay stops at this WAL position (const) */

	struct mw_mutex mu;        /* the engine lock: fields marked [mu] (checked, thread.h) */
	pthread_cond_t durable_cv; /* wakes waiters after a commit, failure or poll [mu] */
	struct manifest man;       /* the manifest we last wrote or read [mu] */
	struct engine_stats stats; /* counters [mu]; memtable fields computed on read */

	/* The log: written by the writer, by replay at open and by the follower */
	uint64_t next_pos;               /* WAL position of the next group [mu] */
	uint64_t durable_upto;           /* every position < this is durable [mu] */
	uint64_t next_seq;               /* next sequence number [mu] */
	_Atomic uint64_t visible_seq;    /* readers' snapshot: last seq of a whole applied batch */
	_Atomic uint64_t last_commit_us; /* engine_committed(): the last durable write (0: none) */

	/* What reads see: the MemTables and SSTables (writer, flusher, follower install) */
	pthread_mutex_t mem_mu;    /* guards the pointers below (taken after mu) */
	struct memtable *mem;      /* active MemTable [mem_mu; changed under mu too] */
	struct frozen_mem *frozen; /* frozen, oldest first [mem_mu] */
	size_t nfrozen;            /* entries in frozen [mem_mu] */
	size_t frozen_cap;         /* allocated entries [mem_mu] */
	struct sst_reader **ssts;  /* live SSTables, manifest order (oldest first) [mem_mu] */
	size_t nssts;              /* entries in ssts [mem_mu] */
	uint64_t sst_gen;          /* bumped whenever e->ssts changes [mu] */
	uint64_t frozen_bytes;     /* bytes of frozen, unflushed MemTables [mu] */
	uint64_t freeze_pos;       /* WAL position at the last freeze (replay length bound) [mu] */

	/* The parts, each in its header next to the code that owns it */
	struct eng_writer w;  /* writer.h: group commit, pipeline, backpressure */
	struct eng_reader rd; /* reader.h: caches, read path, blob reads, kept views */
	struct eng_maint m;   /* maint.h: flusher, compaction, GC */
	struct eng_follow fo; /* follow.h: the follower (read-only engines) */
	struct eng_watch wa;  /* watch.h: the store watch (writers) */
};

/*
 * A writer's WAL entry or manifest commit is durable: call opts.commit_fn with the time
 * since the previous one (engine.h engine_commit_fn).  No engine lock held; any thread.
 */
static inline void engine_committed(struct engine *e)
{
	uint64_t now = mw_now_us();
	uint64_t prev = atomic_exchange(&e->last_commit_us, now);
	if (e->o.commit_fn)
		e->o.commit_fn(e->o.commit_arg, !prev ? UINT64_MAX : now > prev ? now - prev : 0);
}

/*
 * salvage.c: the claim of an opts.salvage open: e->man becomes a new manifest over
 * what remains, of an epoch above every one in the store (docs in salvage.c).
 * 0, -EEXIST (another writer), the store's errors.
 */
int salvage_claim(struct engine *e);

#endif /* MEMWALFS_ENGINE_INT_H */
