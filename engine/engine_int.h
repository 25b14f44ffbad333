/*
 * engine_int.h - the engine's private state, shared by engine.c (open,
 * replay, reads, close), writer.c (group commit), blob.c (blob reads) and
 * batch.c.  Nothing outside engine/ includes this.
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
#include "format.h"
#include "hist.h"
#include "inflight.h"
#include "manifest.h"
#include "memtable.h"
#include "sst.h"
#include "thread.h"

struct pack;
struct cache;
struct diskcache;
struct gc;

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

/* One commit group: what becomes one WAL entry (plus at most one pack). */
struct group {
	uint64_t position;   /* WAL position; also the ticket of its writes */
	struct mw_buf wal;   /* the entry being built (header reserved) */
	struct pack *pack;   /* blob pack, NULL until the first blob */
	uint64_t first_seq;  /* sequence of the first op */
	uint32_t ops;        /* ops in the entry */
	uint32_t batches;    /* batches in the entry */
	size_t bytes;        /* bytes counted in e->pending_bytes */
	size_t wal_blobs;    /* blob bytes carried in the entry (KV_INLINE >= inline_max) */
	bool urgent;         /* someone waits: commit as soon as possible */
	uint64_t opened_us;  /* monotonic time the first op joined */
	bool pack_sealed;    /* pack_seal() done (committer; kept across retries) */
	bool pack_durable;   /* the pack is in the store: a retry sends only the entry */
	uint64_t pack_bytes; /* size of the pack object once written */
	struct group *next;  /* next closed group in position order [mu] */
	bool pack_busy;      /* an uploader is putting the pack [mu] */
	bool pack_tried;     /* an uploader tried once: the committer owns retries [mu] */
	int pack_err;        /* that try's error, or 0 [mu] */
	bool committing;     /* a pipeline thread commits it (pack and entry) [mu] */
	bool done;           /* that commit ended, with rc: waits to retire in order [mu] */
	int rc;              /* 0 durable, or the error that ended it [mu] */
};

/* Pipeline threads besides the first at most (opts.commit_inflight - 1). */
#define WRITER_MAX_UPLOADERS 15

/* A window of a blob: the blocks a disk cache entry holds, the widened GET (blob.c) */
#define BLOB_WINDOW_BLOCKS 16 /* 1 MiB of 64 KiB blocks */

struct engine {
	struct store *st;     /* borrowed, outlives the engine */
	struct engine_opts o; /* options, defaults filled (const after open) */
	bool conditional;     /* store has put_if_absent (const) */
	uint64_t epoch;       /* our writer epoch (const after open) */
	struct cache
	    *blob_cache; /* the memory LRU of pack blocks and SSTable blocks (thread-safe) */

	struct mw_mutex mu;        /* the writer lock: fields marked [mu] (checked, thread.h) */
	pthread_cond_t commit_cv;  /* wakes the committer [mu] */
	pthread_cond_t durable_cv; /* wakes waiters after a commit or failure [mu] */
	struct manifest man;       /* the manifest we last wrote or read [mu] */
	struct group *open;        /* the group that writes join, or NULL [mu] */
	struct group *q_head;      /* closed groups not yet durable, in position order [mu] */
	struct group *q_tail;      /* the last of them [mu] */
	unsigned nqueued;          /* how many (at most opts.commit_inflight) [mu] */
	uint64_t next_pos;         /* WAL position of the next group [mu] */
	uint64_t durable_upto;     /* every position < this is durable [mu] */
	uint64_t next_seq;         /* next sequence number [mu] */
	int sticky;                /* 0 or the error that fenced the writer [mu] */
	uint64_t failed_pos;       /* position of the group that failed [mu] */
	_Atomic uint64_t lease_from_us; /* when the last epoch check that passed was sent */
	uint64_t
	    handover_until_us; /* engine_handover(): writes refused until then (0: none) [mu] */
	struct mw_thread committer;                       /* the first pipeline thread (writer.c) */
	struct mw_thread uploaders[WRITER_MAX_UPLOADERS]; /* the other pipeline threads */
	unsigned nuploaders;                              /* started (const while running) */
	bool pipeline_stop;                               /* writer_stop(): drain, then exit [mu] */
	struct engine_stats stats;   /* counters [mu]; memtable fields computed on read */
	struct mw_hist commit_hist;  /* time of each group commit (lock-free, hist.h) */
	uint64_t gc_pack_mark;       /* stats.pack_bytes when the last good GC pass began [mu] */
	uint64_t wal_blobs_promoted; /* WAL blob bytes flushes moved into packs [mu] */
	uint64_t frozen_bytes;       /* bytes of frozen, unflushed MemTables [mu] */
	uint64_t freeze_pos;      /* WAL position at the last freeze (replay length bound) [mu] */
	pthread_cond_t flush_cv;  /* wakes the flusher [mu] */
	struct mw_thread flusher; /* the flusher (flush.c); .stop: asked to exit [mu] */
	uint64_t sst_gen;         /* bumped whenever e->ssts changes [mu] */
	uint64_t
	    sst_next_id; /* next SSTable id to hand out, only grows (flusher thread; flush.c) */
	uint64_t flush_failures;           /* failed flush attempts since open [mu] */
	int flush_last_error;              /* error of the last failed flush attempt [mu] */
	uint64_t compact_req;              /* forced compaction rounds asked for [mu] */
	uint64_t compact_done;             /* forced compaction rounds done [mu] */
	struct gc *gc;                     /* the collector (writers; used under gc_mu) */
	pthread_mutex_t gc_mu;             /* serialises GC passes (taken before mu) */
	pthread_cond_t gc_cv;              /* wakes the GC thread [mu] */
	struct mw_thread gc_thread;        /* the GC thread (maint.c); .stop: asked to exit [mu] */
	uint64_t gc_mark[3];               /* what had changed when the last pass began [mu] */
	bool gc_idle;                      /* that pass left nothing to wait for (maint.c) [mu] */
	uint64_t gc_space_deletes;         /* stats.deletes at the last flush GC asked for [mu] */
	uint64_t gc_stuck_version;         /* man.version when GC last asked for a compaction
	                                      because its repack found nothing to move [mu] */
	uint64_t gc_pass_us;               /* mw_now_us() when the last GC pass began [gc_mu] */
	uint64_t gc_writes_seen;           /* foreground puts + deletes at the last GC pass [mu] */
	struct cache *block_cache;         /* = blob_cache (one LRU; readcache.c), borrowed */
	struct sst_counters sst_counters;  /* read costs of all SSTables (atomic) */
	atomic_uint_fast64_t blob_fetches; /* ranged GETs of blob blocks */
	atomic_uint_fast64_t blob_fetch_bytes; /* their bytes */
	struct cache *region_cache;            /* coalesced pack regions, unverified (blob.c) */
	struct blob_ahead *ahead;              /* the pack read-ahead of small blobs (blob.c) */
	struct bigbuf_pool *read_bufs;         /* buffers of window and region reads (blob.c),
	                                          used again instead of freed (bigbuf.h) */
	struct mw_mutex share_mu;              /* region shares of GET buffers (blob.c) */
	size_t region_pinned;     /* bytes of GET buffers that no region entry holds any more, kept
	                             alive by blocks served from their regions [share_mu] */
	size_t region_pin_max;    /* past it, blocks from regions are copied (readcache.c) */
	struct diskcache *dcache; /* the disk tier, or NULL (readcache.c) */
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

	_Atomic uint64_t visible_seq; /* readers' snapshot: last seq of a whole applied batch */

	pthread_mutex_t mem_mu;    /* guards the pointers below (taken after mu) */
	struct memtable *mem;      /* active MemTable [mem_mu; changed under mu too] */
	struct frozen_mem *frozen; /* frozen, oldest first [mem_mu] */
	size_t nfrozen;            /* entries in frozen [mem_mu] */
	size_t frozen_cap;         /* allocated entries [mem_mu] */
	struct sst_reader **ssts;  /* live SSTables, manifest order (oldest first) [mem_mu] */
	size_t nssts;              /* entries in ssts [mem_mu] */
	/*
	 * Read-only engines: reads of an earlier state (engine_get_at(), engine_iter_new_at())
	 * are exact from this sequence on with the tables and MemTables above; the follower's
	 * installs (follow.c install()) raise it and keep what they replaced in old_views,
	 * newest last, which serve the states below it (read.c) [mem_mu]
	 */
	uint64_t floor_seq;
	struct old_view *old_views; /* ENGINE_OLD_VIEWS entries once one was kept [mem_mu] */
	size_t nold_views;          /* entries of old_views in use [mem_mu] */

	/* Followers (read-only engines with opts.follow; follow.c) */
	struct mw_thread follower;         /* the follower thread; .stop: asked to exit [mu] */
	pthread_cond_t follow_cv;          /* wakes the follower (close) [mu] */
	engine_follow_fn follow_fn;        /* callback for applied keys, or NULL [mu] */
	engine_follow_gate_fn follow_gate; /* around a publish and its callback, or NULL [mu] */
	void *follow_arg;                  /* its argument [mu] */
	bool follow_in_cb;                 /* the follower is calling follow_fn (durable_cv) [mu] */
	uint64_t follow_kick;              /* polls asked for by follow_poll_now() [mu] */
	uint64_t follow_done;              /* the last of them served (durable_cv) [mu] */
	bool follow_only_manifest;  /* the next poll probes the manifest only (follow.h) [mu] */
	uint64_t follow_max_epoch;  /* highest epoch applied (replay rule) [mu] */
	uint64_t follow_current_us; /* start of the last poll that found us current [mu] */
	bool from_snapshot;         /* opened from a snapshot (const) */
	uint64_t snapshot_wal_end;  /* then replay stops at this WAL position (const) */

	/* The store watch (writers; watch.c): objects the state needs gone from the store */
	bool lost;               /* the store lost objects we need: sticky (watch.c) [mu] */
	char lost_what[160];     /* which, in words, once lost [mu] */
	struct mw_thread watch;  /* the watch thread; .stop: asked to exit [mu] */
	pthread_cond_t watch_cv; /* wakes the watch thread [mu] */
	bool watch_kicked;       /* a read or GC asked for a check now [mu] */
	bool watch_dirty;        /* groups were committed since the last check began [mu] */
	uint64_t *watch_packs;   /* positions of our committed group packs (watch.c) [mu] */
	size_t nwatch_packs;     /* entries in watch_packs [mu] */
	size_t watch_packs_cap;  /* allocated entries [mu] */
};

/*
 * Sequence numbers a follower gives the ops it applies start at this offset above the
 * manifest's: every sequence in a table the writer wrote is below it, so the follower's
 * MemTables, which hold only WAL entries the tables do not cover or cover identically,
 * always win over the tables, in point reads and in scans alike (follow.c).
 */
#define FOLLOW_SEQ_BASE (1ull << 62)

/*
 * watch.c: the store lost objects the state needs (what, printf-style, names the
 * first): make the writer sticky -EIO at its durable position, stop GC and the
 * flusher, log it once.  Any thread, without e->mu.
 */
void engine_store_lost(struct engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * watch.c: check now that the store holds what the state needs (docs in watch.c):
 * 0, -EIO once lost (declared), the sticky error, or a listing's error.  Without e->mu.
 */
int watch_check(struct engine *e);
/* watch.c: ask the watch thread for a check now (a read found an object missing). */
void watch_kick(struct engine *e);
/* watch.c: start / stop the watch thread (writers, unless opts.store_check_ms is off). */
int watch_start(struct engine *e);
void watch_stop(struct engine *e);
/* watch.c: a group was acknowledged: the watch checks soon (e->mu held). */
void watch_note_commit_locked(struct engine *e);
/* watch.c: remember that our group at position put a pack (e->mu held).  -ENOMEM. */
int watch_record_pack_locked(struct engine *e, uint64_t position);

/* The names of a listing, in key order (watch.c; salvage.c uses them too). */
struct keylist {
	char **v;      /* names (malloc()ed, each too) */
	size_t n, cap; /* names, allocated */
	size_t max;    /* fetch stops after this many (0: all) */
};
/*
 * List prefix after start_after (NULL: from the start), at most max names (0:
 * all), into *l (keylist_clear() it).  0 or the listing's error (*l empty).
 */
int keylist_fetch(struct store *st, const char *prefix, const char *start_after, size_t max,
                  struct keylist *l);
/* Is name in l (a binary search)? */
bool keylist_has(const struct keylist *l, const char *name);
void keylist_clear(struct keylist *l);

/*
 * salvage.c: the claim of an opts.salvage open: e->man becomes a new manifest over
 * what remains, of an epoch above every one in the store (docs in salvage.c).
 * 0, -EEXIST (another writer), the store's errors.
 */
int salvage_claim(struct engine *e);

/* follow.c: start / stop the follower thread (read-only engines with opts.follow). */
int follow_start(struct engine *e);
void follow_stop(struct engine *e);

/* Errors no retry can cure: a newer writer, corruption, a refused format (writer.c). */
bool err_permanent(int rc);

/* Backoff between retries of a transient store failure: first wait, cap (milliseconds). */
#define RETRY_MIN_MS 50u
#define RETRY_MAX_MS 5000u

/* writer.c: start / stop the committer thread.  Stop commits what is open. */
int writer_start(struct engine *e);
void writer_stop(struct engine *e);

/*
 * Writes applied here whose group will never be acknowledged: those retired
 * as failed, and once the writer stopped, the open group's and the queued
 * ones' at or past the failed position (e->mu held).
 */
uint64_t writer_lost_locked(struct engine *e);

/*
 * writer.c: the pack of an open or closed, not yet durable group at
 * position, with a reference (pack_unref() it), or NULL.  Caller holds e->mu.
 */
struct pack *writer_pending_pack_locked(struct engine *e, uint64_t position);

/* writer.c: freeze the active MemTable (caller holds e->mu).  -ENOMEM. */
int writer_freeze_locked(struct engine *e);

/*
 * Decides, under e->mu, whether a conditional write still applies: return
 * 0 to apply the batch, 1 to skip it, or a negative errno to fail.
 */
typedef int (*writer_cond_fn)(struct engine *e, void *arg);

/*
 * writer.c: engine_write() with a condition checked under e->mu right
 * before the batch is applied (after any backpressure wait), so that no
 * other write can slip in between the check and the apply.  cond NULL:
 * plain engine_write().  Returns 1 when cond skipped the batch (nothing
 * written), else as engine_write().  Any thread except the flusher.
 */
int writer_write_if(struct engine *e, struct engine_batch *b, int flags, uint64_t *ticket,
                    writer_cond_fn cond, void *arg);

/*
 * engine.c: a merged iterator (internal order, every version, no snapshot
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
 * view of the states from e->floor_seq to below floor, and raise e->floor_seq to floor;
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
 * engine.c: the sequence of the newest version (of any type) of key,
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

#endif /* MEMWALFS_ENGINE_INT_H */
