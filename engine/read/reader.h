/*
 * reader.h - the read path's state and calls: read.c (point reads, scans,
 * the views kept for reads of earlier states), blob.c (blob reads over the
 * tiers), blobcache.c (the blob cache's entries), readcache.c (the caches'
 * open, close and stats).  struct eng_reader is e->rd: its caches and
 * counters are thread-safe or atomic; the kept views are guarded by e->mem_mu,
 * the region shares by share_mu.  flush.c and engine.c read its caches and
 * counters too (a flushed table's readers share the block cache; stats).
 */
#ifndef MEMWALFS_READER_H
#define MEMWALFS_READER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "inflight.h"
#include "sst.h"
#include "thread.h"

struct bigbuf_pool;
struct blob_ahead;
struct blob_desc;
struct cache;
struct diskcache;
struct engine;
struct kv_iter;
struct old_view;

/* A window of a blob: the blocks a disk cache entry holds, the widened GET (blob.c) */
#define BLOB_WINDOW_BLOCKS 16 /* 1 MiB of 64 KiB blocks */

/* The read path (read.c, blob.c, blobcache.c, readcache.c): e->rd. */
struct eng_reader {
	struct cache
	    *blob_cache; /* the memory LRU of pack blocks and SSTable blocks (thread-safe) */
	struct cache *block_cache;             /* = blob_cache (one LRU; readcache.c), borrowed */
	struct sst_counters sst_counters;      /* read costs of all SSTables (atomic) */
	atomic_uint_fast64_t blob_fetches;     /* ranged GETs of blob blocks */
	atomic_uint_fast64_t blob_fetch_bytes; /* their bytes */
	struct cache *region_cache;            /* coalesced pack regions, unverified (blob.c) */
	struct blob_ahead *ahead;              /* the pack read-ahead of small blobs (blob.c) */
	struct bigbuf_pool *read_bufs;         /* buffers of window and region reads (blob.c),
	                                          used again instead of freed (bigbuf.h) */
	struct mw_mutex share_mu;              /* region shares of GET buffers (blobcache.c) */
	size_t region_pinned;     /* bytes of GET buffers that no region entry holds any more, kept
	                             alive by blocks served from their regions [share_mu] */
	size_t region_pin_max;    /* past it, blocks from regions are copied (readcache.c) */
	struct diskcache *dcache; /* the disk tier, or NULL (readcache.c) */
	bool dcache_shared;       /* dcache is opts.disk_cache: borrowed, not closed here */
	bool fetch_init;          /* fetching initialised (readcache.c) */
	struct inflight fetching; /* ranged GETs of packs in flight (blob.c): key
	                             epoch, position; bytes of the pack object */
	atomic_uint_fast64_t blob_mem_bytes;     /* bytes of blob blocks served from memory */
	atomic_uint_fast64_t blob_mem_hits;      /* blob blocks served from memory */
	atomic_uint_fast64_t blob_mem_misses;    /* blob blocks not in memory */
	atomic_uint_fast64_t blob_disk_hits;     /* blob blocks served from the disk cache */
	atomic_uint_fast64_t blob_disk_bytes;    /* their bytes */
	atomic_uint_fast64_t blob_region_hits;   /* blob blocks served from a coalesced region */
	atomic_uint_fast64_t blob_region_aheads; /* regions GET by the pack read-ahead */
	/*
	 * Read-only engines: reads of an earlier state (engine_get_at(), engine_iter_new_at())
	 * are exact from this sequence on with the tables and MemTables of e; the follower's
	 * installs (follow.c install()) raise it and keep what they replaced in old_views,
	 * newest last, which serve the states below it (read.c) [e->mem_mu]
	 */
	uint64_t floor_seq;
	struct old_view *old_views; /* ENGINE_OLD_VIEWS entries once one was kept [e->mem_mu] */
	size_t nold_views;          /* entries of old_views in use [e->mem_mu] */
	/*
	 * Tests only (tests/unit/test_engine_concurrency.c): called by a point read or a scan
	 * of the current state on its own thread, no lock held, right before it takes its
	 * snapshot and view (read.c view_get()), so that a test can run a write, a flush and
	 * a compaction at that instant; NULL otherwise.  Set before any read starts.
	 */
	void (*view_hook)(void *arg);
	void *view_hook_arg; /* view_hook's argument */
};

/*
 * read.c: a merged iterator (internal order, every version, no snapshot
 * filter) over everything the engine holds: the MemTables and the live
 * SSTables, with references of its own.  *gen gets e->sst_gen of that SSTable set.
 * Caller destroys it with kv_iter_destroy().  -ENOMEM...
 */
int read_merged_iter(struct engine *e, struct kv_iter **out, uint64_t *gen);

/*
 * Views a follower's installs replaced, kept for reads of the states they held
 * (engine_get_at(), engine_iter_new_at()): at most ENGINE_OLD_VIEWS, and the MemTables
 * that only they hold (the installs dropped them) at most half of max_frozen_bytes
 * together (128 MiB by default: about what the writer flushed in those installs); the
 * oldest are dropped first.  They keep their SSTables referenced too (readers: index and
 * filter in memory).
 */
#define ENGINE_OLD_VIEWS 4
/*
 * read.c: keep what reads see now (the MemTables and SSTables, with references) as the
 * view of the states from e->rd.floor_seq to below floor, and raise e->rd.floor_seq to floor;
 * e->mem_mu held, before the install changes them.  Without memory nothing is kept (reads
 * of those states fail with -ESTALE).  read_old_views_free(): drop them all (close).
 */
void read_keep_view(struct engine *e, uint64_t floor);
/*
 * read.c: the install that kept the view below floor dropped MemTables of bytes
 * (memtable_bytes()) that only the view holds now: the kept views are held to their
 * budget, the oldest dropped first (e->mem_mu held).
 */
void read_keep_bytes(struct engine *e, uint64_t floor, size_t bytes);
void read_old_views_free(struct engine *e);

/*
 * read.c: the sequence of the newest version (of any type) of key,
 * caller holds e->mu (so the MemTables and SSTables cannot change).  The
 * SSTables (newest first; may read blocks from the store) are consulted only
 * when with_ssts and the key is in no MemTable.  Returns 1 and *seq, 0 when
 * no consulted source has the key, or a negative errno.
 */
int read_newest_seq_locked(struct engine *e, const void *key, size_t klen, bool with_ssts,
                           uint64_t *seq);

/*
 * blob.c: read bytes [off, off+len) of the blob described by d into buf
 * (*got: bytes copied; 0 past the end), or the whole blob into a new
 * malloc()ed buffer with blob_fetch().  The blob is verified by checksum
 * when it comes from the store.  -EUCLEAN (missing pack, checksum), -EIO...
 */
int blob_fetch(struct engine *e, const struct blob_desc *d, void **out);

/*
 * Start and stop the pack read-ahead of small blobs (threads that GET the
 * regions after the ones a scan of a pack uses; blob.c "pack read-ahead"):
 * started by readcache_open() when there is a region cache, stopped before
 * the caches go.  Start: 0 or a negative errno; stop accepts one not started.
 */
int blob_ahead_start(struct engine *e);
void blob_ahead_stop(struct engine *e);
/* Regions the pack read-ahead has queued or is fetching now (0 without it). */
unsigned blob_ahead_pending(struct engine *e);

/* Bring value bytes [off, off + len) of d into the cache (clipped to the value). */
int blob_load(struct engine *e, const struct blob_desc *d, uint64_t off, uint64_t len);
int blob_read_range(struct engine *e, const struct blob_desc *d, uint64_t off, void *buf,
                    size_t len, size_t *got);

/*
 * readcache.c: create the read caches of e from e->o (memory caches; the
 * region cache when read_region_bytes; the disk cache when disk_cache_dir,
 * which on failure only warns) / free them (after every reader is gone).
 * readcache_open: 0, -EINVAL (a bad read_region_bytes) or -ENOMEM.
 * readcache_stats: the read tiers' stats lines (name, value) into out;
 * returns how many (at most READ_STATS_MAX).
 */
int readcache_open(struct engine *e);
void readcache_close(struct engine *e);
struct read_stat {
	const char *name; /* static */
	uint64_t value;
};
#define READ_STATS_MAX 28
size_t readcache_stats(struct engine *e, struct read_stat *out);
/* Fill the read_* fields of *out. */
void readcache_get_stats(struct engine *e, struct engine_stats *out);

#endif /* MEMWALFS_READER_H */
