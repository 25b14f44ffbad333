/*
 * engine.h - the MemWAL key-value engine: the only header fs/ includes.
 *
 * Keys and values are byte strings.  Keys sort bytewise (memcmp, a prefix
 * before its extensions).  Every write (a put, a delete, or an atomic batch
 * of them) is applied at once to the in-memory MemTable, so it is readable
 * immediately, and joins the current commit group; the group becomes durable
 * as one WAL object (plus at most one blob pack) when the cadence fires, when
 * it reaches its size threshold, or when someone asks for durability now.
 * Values of at least opts.inline_max bytes are blobs: their bytes go once
 * into the group's pack and everything else refers to them by descriptor.
 *
 * Durability: a write is durable when engine_write() with ENGINE_WAIT
 * returns 0, when engine_wait() on its ticket returns 0, or when an
 * engine_sync() that started after it returns 0.  A crash loses only writes
 * that were not yet durable, and loses them whole (batches are atomic) and in
 * order (if a write survives, every write issued before it survives).
 *
 * Errors (negative errno): -ENOENT (no such key), -ENOMEM, -EIO (the store
 * failed; after a failed commit the engine is fenced and every later write
 * returns the same error: the writer never guesses), -ESTALE (another writer
 * opened the store: this one is fenced), -EROFS (opened read-only),
 * -EUCLEAN (a corrupt object; the log names it), -EPROTONOSUPPORT (an object
 * of a newer format version than this program reads; the log names it: the
 * same answer fs/ gives for a newer superblock), -EINVAL.
 *
 * Threads: every function may be called from many threads at once, except
 * engine_close(), which must be the last call on the engine.  Iterators and
 * batches are used by one thread at a time.
 */
#ifndef MEMWALFS_ENGINE_H
#define MEMWALFS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;
struct engine;
struct engine_batch;
struct engine_iter;

/* Called during long work (WAL replay at open, ...) to show progress. */
typedef void (*engine_progress_fn)(void *arg, const char *phase, uint64_t done, uint64_t total);

/*
 * engine_opts.commit_fn: called by a writer after each durable WAL entry and each
 * manifest commit (flush, compaction), with quiet_us the time since the previous such
 * event of this engine (UINT64_MAX for its first).  It runs on the engine's pipeline or
 * flusher thread with no engine lock held, so it must be cheap and must not block or do
 * store I/O: the bell's ringer (engine/region/bell.c) only signals its own thread.
 */
typedef void (*engine_commit_fn)(void *arg, uint64_t quiet_us);

/* engine_opts.wal_blob_max: every blob goes to a pack (no value fits in 1 byte). */
#define ENGINE_WAL_BLOBS_OFF ((size_t)1)

struct engine_opts {
	bool read_only;         /* open without claiming the writer epoch */
	bool single_writer_ok;  /* accept a store without conditional create */
	unsigned cadence_ms;    /* group-commit interval (default 100) */
	size_t group_max_bytes; /* commit a group early at this size (default 8 MiB) */
	size_t inline_max;      /* values >= this many bytes are blobs (default 4096) */
	/*
	 * Blob bytes a commit group carries inside its WAL entry (default
	 * 256 KiB; ENGINE_WAL_BLOBS_OFF: none): a group whose blobs fit is one
	 * PUT, and its blobs are promoted into a pack at MemTable flush
	 * (docs/WAL.md, "Blobs in the entry").  Blobs past the budget go to
	 * the group's own pack, put before the entry.
	 */
	size_t wal_blob_max;
	/*
	 * Pipeline threads, and groups closed and not yet durable at once
	 * (default 8, at most 16; 1: one at a time).  The WAL entries of the
	 * first min(this, WAL_WINDOW = 4) go at once (acknowledged in position
	 * order); the other threads put the packs of the groups behind them
	 * early, so a sequential writer has up to this many pack PUTs in flight
	 * (4 -> 8: 512 MiB written by fio on the test RGW, 155 -> 168 MB/s with
	 * one job, 175 -> 184 MB/s with four; 2026-12-03).
	 */
	unsigned commit_inflight;
	size_t memtable_max_bytes; /* freeze the MemTable at this size (default 64 MiB) */
	size_t max_pending_bytes; /* writers wait while more is not yet durable (default 256 MiB) */
	size_t
	    max_frozen_bytes; /* writers wait while more is frozen, unflushed (default 256 MiB) */
	size_t cache_bytes;   /* blob + block cache budget (default 256 MiB) */
	engine_progress_fn progress; /* may be NULL */
	void *progress_arg;
	/*
	 * Garbage collection (docs/GC.md), writers only.  Each 0 means the default.
	 * gc_interval_ms: a GC pass (delete what no kept manifest needs, then
	 * repack) this often (default 60000; ENGINE_GC_OFF: never by itself).
	 * gc_grace_sec: objects a read-only follower may still use are kept this
	 * long after they stop being referenced (default 600;
	 * ENGINE_GC_NO_GRACE: none, for tests).  Abandoned uploads are aborted
	 * after max(gc_grace_sec, 300 s).  A tenth of it is the writer's epoch
	 * lease (docs/WAL.md): every host that writes or collects one store
	 * must use a grace longer than a tenth of any other's.
	 * repack_below_pct: a pack whose live fraction fell below this many
	 * percent has its live blobs rewritten (default 50; ENGINE_GC_OFF: never).
	 * repack_kib_per_sec: repack rewrites at most this many KiB per second
	 * since the previous pass, at most the GC interval's worth, in one pass
	 * (default 8192: 8 MiB/s, 480 MiB per pass of 60 s; ENGINE_GC_OFF: no
	 * limit); what is left waits for the next pass.
	 */
	unsigned gc_interval_ms;
	unsigned gc_grace_sec;
	unsigned repack_below_pct;
	unsigned repack_kib_per_sec;
	/*
	 * A commit that fails for a transient reason (unreachable or throttling
	 * store, timeouts, a full local disk) stays pending and is sent again
	 * with backoff until it lands (docs/WAL.md, "Outages").  sync_timeout_ms:
	 * how long engine_wait()/engine_sync() wait for it before they return
	 * -ETIMEDOUT (0, the default: wait, like a hard NFS mount).  A full
	 * store (-ENOSPC) is reported at once instead, to waiters and to new
	 * writes.  Either way the data still commits once the store is back.
	 */
	unsigned sync_timeout_ms;
	/*
	 * commit_retry_ms: give a failing commit up after retrying it this long
	 * (the writer then stops with -EIO, as it does for good at the first
	 * failure with ENGINE_NO_RETRY, which fault tests use); 0, the default:
	 * retry until it lands, except at close (60 s).
	 */
	unsigned commit_retry_ms;
	/*
	 * Followers (read_only only; engine/follow/follow.c, docs/FOLLOWERS.md).  follow: after the
	 * replay at open, a thread keeps polling the store for new WAL entries and manifests
	 * and applies them, whole entries only, so reads see the writer's newer states.
	 * follow_interval_ms: poll this often (default 1000); when a poll finds nothing new
	 * the interval doubles, up to follow_max_interval_ms (default 4 x the interval), and
	 * an idle poll sends one request.  Without follow a read-only engine keeps the state
	 * of its open.
	 */
	bool follow;
	unsigned follow_interval_ms;
	unsigned follow_max_interval_ms;
	/*
	 * Bell mode (followers; docs/FOLLOWERS.md "Bell mode", docs/REGIONS.md "The bell").
	 * follow_bell: after follow_deep_idle_ms (default 60000) of polls that found nothing,
	 * and while engine_follow_set_bell() says the store's bell exists, the follower goes
	 * deep idle: it polls only every follow_safety_ms (default 300000) until
	 * engine_follow_wake() (the mount's bell watcher) makes it poll at once and return to
	 * its normal interval.  Writers ring the bell after follow_deep_idle_ms - 30 s of quiet
	 * at most (BELL_RING_QUIET_MS), so a commit made while a follower is deep idle rings.
	 */
	bool follow_bell;
	unsigned follow_deep_idle_ms; /* default ENGINE_FOLLOW_DEEP_IDLE_MS */
	unsigned follow_safety_ms;    /* default ENGINE_FOLLOW_SAFETY_MS */
	/* Writers: see engine_commit_fn (NULL: none).  commit_arg is its argument. */
	engine_commit_fn commit_fn;
	void *commit_arg;
	/*
	 * snapshot: open (read_only only, never following) the state that snapshot NAME
	 * pinned (engine_snapshot_create(); docs/SNAPSHOTS.md) instead of the newest one.
	 * NULL: the newest state.  Borrowed during engine_open() only.
	 */
	const char *snapshot;
	/*
	 * Read caches under the memory caches (docs/CACHE.md).  disk_cache_dir: keep
	 * verified pack blocks and SSTable blocks in files under this directory, which
	 * survives a remount and is locked by one engine at a time (NULL: no disk cache;
	 * a directory that cannot be used gives a warning and no disk cache, never an
	 * error).  Borrowed during engine_open() only.  disk_cache_bytes: its bound (0:
	 * half of the free space of its filesystem, at most 10 GiB).
	 * read_region_bytes: a read that misses every cache fetches the whole aligned
	 * region of this many bytes of the pack around the blocks it needs, in one
	 * ranged GET (files written together are read together), and keeps the rest
	 * of the region in memory until a read checks it against its descriptor
	 * (0: fetch only the blocks needed).  A power of two, at least 64 KiB.
	 */
	const char *disk_cache_dir;
	uint64_t disk_cache_bytes;
	size_t read_region_bytes;
	/*
	 * disk_cache: a disk cache shared by several engines (engine_disk_cache_open(); the
	 * regions of one mount, docs/REGIONS.md): used instead of disk_cache_dir, borrowed (it
	 * must outlive the engine).  disk_cache_salt: what tells this engine's pack blocks from
	 * those of the other engines sharing it (their pack names repeat from store to store:
	 * the region id); 0 keeps the keys of an engine with a cache of its own, so region 0
	 * finds what it cached before.  SSTable blocks are keyed by their table's identity
	 * (a hash of its index) already.
	 */
	struct engine_disk_cache *disk_cache;
	uint64_t disk_cache_salt;
	/*
	 * The store watch (writers; engine/check/watch.c): every store_check_ms (default
	 * 5000) in which groups were committed (an idle engine sends nothing), and at
	 * close, four listings check that the manifest, the WAL tail, the tables and
	 * the uncovered packs the state needs are in the store.  A missing one (or
	 * one a read or a GC pass finds missing) makes the engine sticky -EIO with
	 * stats.store_lost set: nothing more is acknowledged or deleted.
	 * ENGINE_CHECK_OFF: no periodic check (reads, GC and the close still detect).
	 */
	unsigned store_check_ms;
	/*
	 * salvage (writers; engine/check/salvage.c, `memwalfs fsck --salvage`): open a store
	 * that lost objects.  A new manifest version over the newest manifest that
	 * loads, minus its missing tables, of an epoch above every one in the store;
	 * the WAL after it replayed across missing positions and undecodable entries.
	 * Deletes or rewrites nothing; what was dropped is in the salvage_* stats and
	 * the log.  The clean close then leaves a consistent store.
	 */
	bool salvage;
	/*
	 * claim_epoch (writers; docs/REGIONS.md "Holders and leases"): claim exactly this
	 * epoch, the one region_acquire() reserved by its holder object.  Manifest versions
	 * the previous writer adds meanwhile (a dying holder's flush) are retried over; a
	 * newest manifest already of this epoch or later fails the open with -EAGAIN
	 * (another writer claimed: logged), and no other epoch is ever claimed.  0 (the
	 * default): the newest manifest's epoch + 1, whoever holds the store.
	 */
	uint64_t claim_epoch;
};

#define ENGINE_CHECK_OFF 0xFFFFFFFFu /* store_check_ms: no periodic store check */

/* Bell mode's defaults: deep idle after a minute of nothing, then a safety poll every 5 min. */
#define ENGINE_FOLLOW_DEEP_IDLE_MS 60000u
#define ENGINE_FOLLOW_SAFETY_MS 300000u

#define ENGINE_NO_RETRY 0xFFFFFFFFu /* commit_retry_ms: a failed commit stops the writer */

/* Values of the GC options above. */
#define ENGINE_GC_OFF                                                                              \
	0xFFFFFFFFu /* gc_interval_ms, repack_below_pct: disabled; repack_kib_per_sec: no limit */
#define ENGINE_GC_NO_GRACE 0xFFFFFFFFu /* gc_grace_sec: zero grace */

/* Fill *o with the defaults above. */
void engine_opts_default(struct engine_opts *o);

/*
 * A disk cache for several engines (engine_opts.disk_cache): opened, locked and indexed in
 * dir as an engine's own (disk_cache_dir) would be, bound bytes (0: half of the free space
 * of its filesystem, at most 10 GiB).  0 and *out; -EBUSY: another cache holds dir; or
 * another -errno (diskcache.h says which, and logs them).  Any thread.
 */
int engine_disk_cache_open(const char *dir, uint64_t bytes, struct engine_disk_cache **out);
/* Write what is queued and close; after every engine that used it closed.  Accepts NULL. */
void engine_disk_cache_close(struct engine_disk_cache *c);

/*
 * Open the engine on store st (borrowed: it must outlive the engine).  As a
 * writer: claims a new epoch through the manifest, fences any older writer,
 * replays the WAL.  An empty store is initialised.  On success *out is the
 * engine; on failure *out is untouched and a log line says why.
 */
int engine_open(struct store *st, const struct engine_opts *o, struct engine **out);

/*
 * Commit what is pending, wait until it is durable, stop background work and
 * free the engine.  Returns the commit's error, if any (the engine is freed
 * either way).  Accepts NULL.
 */
int engine_close(struct engine *e);

/*
 * Flags of writes.  ENGINE_NOWAIT is for a caller that holds a lock every
 * request needs (the filesystem's fs->mu): the write never waits, neither
 * for backpressure nor for a full store's next commit attempt.  Such a
 * caller waits for room before it takes its lock (engine_wait_room()); a
 * write that finds the room taken meanwhile by another is applied anyway, so
 * the pending bytes may pass max_pending_bytes by what the writers between
 * their wait and their write add (a handler's batch each: the bound is
 * soft by that much).  While the store is full it fails with -ENOSPC at
 * once.  Not with ENGINE_WAIT (-EINVAL).
 */
#define ENGINE_WAIT 0x1   /* return only once the write is durable */
#define ENGINE_URGENT 0x2 /* commit the group now instead of at the next cadence tick */
#define ENGINE_NOWAIT 0x4 /* never wait: for a caller under a lock others need */

/* Batches: an ordered list of puts and deletes applied atomically. */
int engine_batch_new(struct engine_batch **out);
/* Append a put (key and value are copied). */
int engine_batch_put(struct engine_batch *b, const void *key, size_t klen, const void *val,
                     size_t vlen);
/*
 * Append a put whose value is borrowed, not copied (the key is copied): val
 * must stay valid and unchanged until engine_write() (or writer_write_if())
 * of b has returned, or b is cleared or freed; that write copies it once,
 * straight into its group's pack or WAL entry.  For large values the
 * caller already holds (file data from a FUSE request): it saves one copy
 * of every byte.  -EINVAL, -ENOMEM.
 */
int engine_batch_put_borrowed(struct engine_batch *b, const void *key, size_t klen, const void *val,
                              size_t vlen);
/* Append a delete (the key is copied). */
int engine_batch_delete(struct engine_batch *b, const void *key, size_t klen);
/* Number of operations in the batch. */
size_t engine_batch_count(const struct engine_batch *b);
/* Empty the batch for reuse. */
void engine_batch_clear(struct engine_batch *b);
/* A position in a batch, to drop what was appended after it (a scan that is retried). */
struct engine_batch_mark {
	size_t len, count, bytes;
};
void engine_batch_get_mark(const struct engine_batch *b, struct engine_batch_mark *m);
void engine_batch_rewind(struct engine_batch *b, const struct engine_batch_mark *m);
/* Free the batch.  Accepts NULL. */
void engine_batch_free(struct engine_batch *b);

/*
 * Apply batch b atomically (it is not consumed: clear or free it after).
 * flags: ENGINE_WAIT, ENGINE_URGENT.  *ticket (may be NULL) receives a ticket
 * to pass to engine_wait() later.  Returns once the batch is readable (and,
 * with ENGINE_WAIT, durable).  May block for backpressure.
 */
int engine_write(struct engine *e, struct engine_batch *b, int flags, uint64_t *ticket);

/* A one-operation batch. */
int engine_put(struct engine *e, const void *key, size_t klen, const void *val, size_t vlen,
               int flags, uint64_t *ticket);
int engine_delete(struct engine *e, const void *key, size_t klen, int flags, uint64_t *ticket);

/*
 * Wait, without writing anything, until a write of about bytes would not
 * wait for backpressure (pending or frozen bytes over their bounds).  A
 * caller that holds a lock other threads need (the filesystem's) calls
 * this first, so that a slow or unreachable store holds only the writers,
 * not everyone behind the lock.  Returns 0, the sticky error, -ENOSPC
 * while the store is full, -EROFS on a read-only engine.
 */
int engine_wait_room(struct engine *e, size_t bytes);

/*
 * Wait until the write with this ticket is durable.  urgent: commit the
 * open group now rather than at the next tick.  Returns 0 or the error that
 * failed its group.
 */
int engine_wait(struct engine *e, uint64_t ticket, bool urgent);

/* Commit now and return when every write issued before the call is durable. */
int engine_sync(struct engine *e);

/*
 * Is the store still this writer's?  Reads the newest manifest now (a
 * LIST and a GET; the commits check it only every lease, docs/WAL.md): if
 * a newer writer claimed the store, the writer becomes fenced at once:
 * sticky -ESTALE, nothing not yet acknowledged ever is, and every later
 * write fails.  A mount that took the store over on the same machine asks
 * the old one to check (fs/xattr.c, MWFS_FENCE_XATTR), so that the old one
 * refuses writes from then on instead of from its next commit.  Returns 0
 * (still ours), the sticky error (-ESTALE: fenced), -EROFS on a read-only
 * engine, or the store's error (nothing changes).  Any thread.
 */
int engine_check_epoch(struct engine *e);

/*
 * The writer's sticky error (0: it writes; -ESTALE: fenced by a newer
 * writer, or an engine_handover() holds writes; -EIO: a commit failed for
 * good), without I/O: the filesystem refuses every change at once while it
 * is set.  0 on a read-only engine.
 */
int engine_write_error(struct engine *e);

/*
 * A takeover is about to claim the store (tools/takeover.c, --takeover; the
 * filesystem's MWFS_HANDOVER_XATTR): refuse every write from now on with
 * -ESTALE, as a fenced writer does, for hold_ms, then commit everything
 * applied before and wait until it is durable (engine_sync()), so that
 * nothing acknowledged is lost when the newer writer claims the store.  A
 * later engine_check_epoch() that finds a newer writer makes the refusal
 * sticky; hold_ms 0 ends the hold (the takeover did not happen: writes are
 * taken again), and so does the end of hold_ms.  Returns the sync's result
 * (0, or the error: the hold stays), -EROFS on a read-only engine.  Any
 * thread.
 */
int engine_handover(struct engine *e, unsigned hold_ms);

/*
 * Point read of the newest value of key.  On success *val is a malloc()ed
 * copy owned by the caller (never NULL, even for an empty value) and *vlen
 * its length.  -ENOENT when absent or deleted.  Blobs are read from the
 * cache or by a ranged GET of exactly their bytes, verified by checksum.
 */
int engine_get(struct engine *e, const void *key, size_t klen, void **val, size_t *vlen);

/*
 * The no-I/O rule: a thread that holds a lock every request needs (the
 * filesystem's fs->mu) must not wait for the store, or a cache miss or a
 * slow GET stalls the whole mount.  Such a thread reads with the _nowait
 * calls, which answer only from what this machine holds: the MemTables, the
 * tables' index and filter blocks (in memory from open), the block cache,
 * and the disk cache (local disk: a short read, never a store request).  A
 * key whose block is in none of them gives -EWOULDBLOCK, as does a blob
 * value (file data, never read under such a lock), and the store is not
 * asked; the caller drops its lock, warms the key (engine_prefetch(), or
 * an engine_get() whose value it drops), takes the lock again, looks up
 * again whatever it decided on before, and retries.  Otherwise as
 * engine_get() and engine_get_at().  In debug builds (util/thread.h, the
 * no-I/O mark) every call that may reach the store or wait for it
 * (engine_get(), engine_get_at(), engine_get_range(), engine_prefetch(),
 * a blob's engine_ref_read(), engine_write() without ENGINE_NOWAIT,
 * engine_wait_room(), engine_wait(), engine_sync()) and every store request
 * aborts when made under such a lock, as does engine_iter_new() (a scan
 * under it is engine_iter_new_nowait()).  val may be NULL: a probe,
 * which only says whether key is there (0 or -ENOENT) and sets *vlen to the
 * value's length, a blob's too, without its bytes.
 */
int engine_get_nowait(struct engine *e, const void *key, size_t klen, void **val, size_t *vlen);

/*
 * Earlier states of a read-only engine (a follower's, docs/FOLLOWERS.md).  engine_seq():
 * the sequence number of the state readers see now; reads at it see that state for as long
 * as the engine holds it, however far the follower applies the writer's entries meanwhile.
 * engine_get_at() and engine_iter_new_at() are engine_get() and engine_iter_new() of the
 * state at seq (a value engine_seq() returned).  -ESTALE: the engine no longer holds that
 * state (a follower installed a newer manifest since: its tables replaced the MemTables
 * that held it); -EINVAL on an engine that writes.  Any thread.
 */
uint64_t engine_seq(struct engine *e);
int engine_get_at(struct engine *e, uint64_t seq, const void *key, size_t klen, void **val,
                  size_t *vlen);
int engine_get_at_nowait(struct engine *e, uint64_t seq, const void *key, size_t klen, void **val,
                         size_t *vlen);

/*
 * Like engine_get() but copies at most len bytes of the value starting at
 * off into buf; *got receives the number copied (0 past the end).  Lets the
 * filesystem read part of a chunk without an extra copy.
 */
int engine_get_range(struct engine *e, const void *key, size_t klen, uint64_t off, void *buf,
                     size_t len, size_t *got);

/*
 * Bring the value of key into memory so that a later engine_get() or
 * engine_get_range() of it does not wait for the store: a blob is read
 * whole (one ranged GET, checked) into the blob cache, unless it is there
 * already; an inline value is in memory anyway.  For read-ahead: the caller
 * does not wait for the bytes, only for the load.  Returns 0, -ENOENT (no
 * such key), or the error of the store read (-EIO, -EUCLEAN...).
 */
int engine_prefetch(struct engine *e, const void *key, size_t klen);

/*
 * engine_get_range() for a read that a write depends on (the read-modify-write
 * of a chunk, whose new bytes wait in memory): a transient store failure (an
 * outage, throttling) is retried with the commits' backoff until the read
 * succeeds or fails for good (-ENOENT, corruption, a newer writer), or until
 * opts.sync_timeout_ms, when set, has passed; then the last error.  Like an
 * fsync on a hard mount, it waits out an outage.
 */
int engine_get_range_wait(struct engine *e, const void *key, size_t klen, uint64_t off, void *buf,
                          size_t len, size_t *got);

/*
 * The one policy for riding out a store that does not answer, for callers
 * that read through the engine in steps of their own (a scan):
 * engine_err_transient() says whether an error is worth retrying (an
 * unreachable or throttling store, a timeout; not an answer such as
 * -ENOENT, nor damage, nor a newer writer).  engine_retry(): rc is the
 * result of a call of fn(arg) the caller just made; while it is transient
 * (and the store does not call it permanent), sleep one step of the
 * backoff (50 ms doubling, up to 5 s) and call fn(arg) again, until it
 * answers or opts.sync_timeout_ms (when set) has passed.  fn must start over
 * each time.  Returns fn's last result.
 */
bool engine_err_transient(int rc);
int engine_retry(struct engine *e, int rc, int (*fn)(void *), void *arg);

/* engine_prefetch() that waits out a store outage like engine_get_range_wait(). */
int engine_prefetch_wait(struct engine *e, const void *key, size_t klen);

/*
 * References: where a value is, without its bytes.  A scan gives the
 * reference of its current entry (engine_iter_ref()); a sub-range of that
 * value can then be read (engine_ref_read(), which fetches only the checksum
 * blocks of a blob that the range touches) or put under another key
 * (engine_batch_put_ref(), which shares a blob's bytes instead of copying
 * them: files share data, and an overwrite of part of a value keeps the rest
 * without rewriting it).  A reference is borrowed: it is valid until the scan
 * moves; its bytes may be copied and used later, while the key it came from
 * (or another that shares the bytes) still holds them, or for the GC grace
 * period after.
 */
struct engine_ref {
	bool blob;     /* p is a blob descriptor; else p is the value itself (inline) */
	const void *p; /* the encoded reference */
	size_t n;      /* its bytes */
};

/* Length in bytes of the value r names (0 for a malformed reference). */
uint64_t engine_ref_len(const struct engine_ref *r);

/*
 * Copy bytes [off, off + len) of the value r names into buf (the range must
 * lie within the value).  A blob is read from memory, the cache, or one
 * ranged GET of the blocks the range touches, each verified.  wait: a
 * transient store failure is retried like engine_get_range_wait().
 */
int engine_ref_read(struct engine *e, const struct engine_ref *r, uint64_t off, void *buf,
                    size_t len, bool wait);

/* Bring bytes [off, off + len) of the value r names into the cache (read-ahead). */
int engine_ref_prefetch(struct engine *e, const struct engine_ref *r, uint64_t off, uint64_t len);

/*
 * Append a put of bytes [off, off + len) of the value r names under key:
 * an inline value's bytes are copied, a blob is referred to (no bytes are
 * written again).  -EINVAL if the range is outside the value, -EUCLEAN for a
 * malformed reference.
 */
int engine_batch_put_ref(struct engine_batch *b, const void *key, size_t klen,
                         const struct engine_ref *r, uint64_t off, uint64_t len);

/*
 * Ordered scan of [start, end) (end NULL: unbounded) over one consistent
 * snapshot taken at creation.  Typical loop:
 *
 *   for (rc = engine_iter_new(e, a, an, b, bn, &it); !rc && engine_iter_valid(it);
 *        engine_iter_next(it)) { k = engine_iter_key(it, &kn); ... }
 *   rc = rc ? rc : engine_iter_status(it); engine_iter_free(it);
 */
int engine_iter_new(struct engine *e, const void *start, size_t slen, const void *end, size_t elen,
                    struct engine_iter **out);
/*
 * engine_iter_new() from memory only, for a caller under a no-I/O lock (see
 * engine_get_nowait()): a data block in neither the block nor the disk cache
 * ends the scan with engine_iter_status() -EWOULDBLOCK, as does
 * engine_iter_value() of a blob; the store is not asked.  The caller drops
 * its lock, warms the range (a scan of it with engine_iter_new()), and
 * starts over under the lock.
 */
int engine_iter_new_nowait(struct engine *e, const void *start, size_t slen, const void *end,
                           size_t elen, struct engine_iter **out);
/* engine_iter_new() over the state at seq (see engine_get_at(): -ESTALE, -EINVAL). */
int engine_iter_new_at(struct engine *e, uint64_t seq, const void *start, size_t slen,
                       const void *end, size_t elen, struct engine_iter **out);
/* Position at the first key >= key (within the range). */
void engine_iter_seek(struct engine_iter *it, const void *key, size_t klen);
bool engine_iter_valid(const struct engine_iter *it);
void engine_iter_next(struct engine_iter *it);
/* Borrowed pointer to the current key, valid until the next move or free. */
const void *engine_iter_key(const struct engine_iter *it, size_t *klen);
/*
 * The current value: borrowed pointer valid until the next move or free.
 * A blob is fetched on demand, which can fail (returns an error).
 */
int engine_iter_value(struct engine_iter *it, const void **val, size_t *vlen);
/* The current value's reference (no store I/O; borrowed like the key). */
void engine_iter_ref(const struct engine_iter *it, struct engine_ref *r);
/* 0, or the error that ended the scan early. */
int engine_iter_status(const struct engine_iter *it);
void engine_iter_free(struct engine_iter *it);

/* What the engine is doing; all counters are since open. */
struct engine_stats {
	uint64_t epoch;             /* writer epoch claimed at open */
	uint64_t wal_next;          /* next WAL position */
	uint64_t wal_covered;       /* WAL position covered by flushed data */
	uint64_t puts, deletes;     /* operations applied */
	uint64_t batches;           /* engine_write() calls */
	uint64_t groups_committed;  /* WAL entries written */
	uint64_t group_bytes;       /* bytes of WAL entries written */
	uint64_t packs_written;     /* blob packs written (groups' and flushes') */
	uint64_t pack_bytes;        /* bytes of packs written */
	uint64_t wal_blob_bytes;    /* blob bytes carried inside WAL entries */
	uint64_t flush_packs;       /* packs of blobs promoted from the WAL at flush */
	uint64_t flush_pack_bytes;  /* bytes of those packs */
	uint64_t commit_usec_total; /* time spent committing groups */
	uint64_t commit_usec_max;
	uint64_t pending_bytes;              /* bytes applied but not yet durable */
	uint64_t backpressure_waits;         /* writes that waited for memory */
	uint64_t memtable_bytes;             /* active MemTable */
	uint64_t frozen_count, frozen_bytes; /* frozen, not yet flushed */
	uint64_t sst_count;                  /* live SSTables */
	uint64_t flushes, compactions, gc_deleted;
	uint64_t blob_cache_hits, blob_cache_misses; /* lookups of blob blocks */
	uint64_t blob_fetches, blob_fetch_bytes;     /* ranged GETs of blob blocks, their bytes */
	uint64_t block_cache_hits, block_cache_misses;
	uint64_t block_read_arounds; /* SSTable blocks a GET of another block brought */
	/* reads per tier: pack and SSTable blocks served from memory, from the disk cache, from
	 * the store (ranged GETs); region_hits: pack blocks served from coalesced regions */
	uint64_t read_mem_hits, read_disk_hits, read_disk_misses, read_store_gets;
	uint64_t read_mem_bytes, read_disk_bytes, read_store_bytes, read_region_hits;
	uint64_t read_region_aheads;  /* pack regions GET ahead of a scan of small blobs */
	uint64_t disk_cache_capacity; /* the disk cache's bound (0: no disk cache) */
	uint64_t bloom_negatives;
	uint64_t replay_entries, replay_bytes, replay_usec; /* replay at open */
	uint64_t replay_gap_entries; /* entries listed after a gap at open (never acknowledged) */
	uint64_t fence_positions;    /* WAL positions the open's fence took (docs/WAL.md) */
	int sticky_error;            /* 0, or the error that fenced the writer */
	uint64_t
	    batches_lost; /* writes applied (readable here) whose group was never acknowledged */
	bool read_only;
	uint64_t gc_passes;             /* GC passes completed */
	uint64_t gc_skipped;            /* GC wake-ups with nothing to collect: no request sent */
	uint64_t gc_errors;             /* GC passes that failed (retried next interval) */
	uint64_t gc_bytes_reclaimed;    /* bytes of the objects GC deleted */
	uint64_t repacked_blobs;        /* live blobs rewritten out of mostly dead packs */
	uint64_t repacked_bytes;        /* their bytes */
	uint64_t store_pack_bytes;      /* pack bytes in the store at the last GC pass */
	uint64_t store_live_pack_bytes; /* of which referenced by the newest manifest */
	uint64_t store_unflushed_pack_bytes; /* of which only the WAL references (not flushed) */
	int64_t gc_last_pass;                /* unix time the last GC pass ended (0: none yet) */
	int64_t gc_next_pass;                /* unix time the GC thread wakes next (0: no thread) */
	uint64_t gc_grace_sec; /* unreferenced objects are kept this long (the option) */
	/*
	 * Live data, estimated cheaply (statfs): store_live_pack_bytes and
	 * store_unflushed_pack_bytes plus the pack bytes written since the last GC pass began;
	 * before the first pass of this open, only what it wrote. An upper estimate
	 * (overwrites count until a flush and a pass find them dead).
	 */
	uint64_t live_bytes_est;
	int64_t outage_since;     /* unix time commits began failing (0: store reachable) */
	int outage_error;         /* the last transient commit error (0: none) */
	uint64_t outages;         /* outages ridden out (or going on) */
	uint64_t commit_retries;  /* commit attempts that failed and were retried */
	uint64_t writers_waiting; /* writes held by backpressure right now */
	uint64_t sync_timeouts;   /* waits that gave up after sync_timeout_ms */
	/* followers (opts.follow): see docs/FOLLOWERS.md */
	bool following;            /* a follower thread runs */
	uint64_t follow_polls;     /* polls made (each one or more requests) */
	uint64_t follow_entries;   /* WAL entries applied since open (after the open's replay) */
	uint64_t follow_manifests; /* newer manifests installed */
	uint64_t follow_jumps;     /* manifests installed past the WAL applied (fell behind) */
	uint64_t follow_errors;    /* polls that failed (retried at the next interval) */
	uint64_t follow_gaps;      /* polls that found the next WAL entry missing */
	uint64_t follow_lag_ms; /* now - start of the last poll that found the follower current */
	uint64_t follow_behind; /* WAL entries listed but not applied yet */
	uint64_t follow_interval_ms; /* the current poll interval (after back-off) */
	bool follow_deep_idle;       /* bell mode: deep idle now (polls every follow_safety_ms) */
	uint64_t follow_wakes;       /* engine_follow_wake() calls that found it deep idle */
	uint64_t snapshot_wal_end;   /* opened from a snapshot: its WAL end (else 0) */
	/* the store watch (engine/check/watch.c) */
	bool store_lost;             /* the store lost objects this state needs: sticky -EIO */
	int64_t store_lost_since;    /* unix time that was found (0: not lost) */
	char store_lost_what[160];   /* the first missing object, in words ("" when not lost) */
	uint64_t store_checks;       /* checks of the store made */
	uint64_t store_check_errors; /* checks whose listing failed (tried again later) */
	/* an opts.salvage open (engine/check/salvage.c): what it could not keep */
	uint64_t salvage_manifests_bad;    /* newest manifests that did not load (skipped) */
	uint64_t salvage_tables_lost;      /* tables of the manifest missing from the store */
	uint64_t salvage_table_bytes_lost; /* their bytes */
	uint64_t salvage_wal_missing;      /* WAL positions missing inside the replayed range */
	uint64_t salvage_wal_bad;          /* WAL entries that did not decode (skipped) */
};

void engine_get_stats(struct engine *e, struct engine_stats *out);

/*
 * The counters of the store the engine was opened on (store_get_stats()): a region's view
 * counts the requests of that region's engine only; the mount's store every request sent
 * through it, its views' too.  requests[] in the order of ENGINE_STORE_OP_NAMES.
 */
#define ENGINE_STORE_OPS 6
#define ENGINE_STORE_OP_NAMES                                                                      \
	{                                                                                          \
		"put", "get", "head", "list", "delete", "mpu"                                      \
	}
struct engine_store_counts {
	uint64_t requests[ENGINE_STORE_OPS]; /* requests sent, per class */
	uint64_t retries;                    /* requests repeated after a retryable failure */
	uint64_t errors;                     /* operations that failed */
	uint64_t bytes_sent, bytes_received; /* payload bytes uploaded, downloaded */
};
void engine_get_store_counts(struct engine *e, struct engine_store_counts *out);

/* The space of the filesystem that holds the store (engine_store_space()). */
struct engine_space {
	uint64_t total; /* its size, bytes */
	uint64_t free;  /* free bytes */
	uint64_t avail; /* free bytes an unprivileged user may take */
};

/*
 * The space of the filesystem that holds e's store: the local store's
 * directory's (statvfs).  0, -ENOTSUP when the store has no size of its own
 * (S3), or -errno.  Sends no request; any thread.
 */
int engine_store_space(struct engine *e, struct engine_space *out);

/*
 * Check now that the store holds what this writer's state needs (engine/check/watch.c:
 * four listings).  0 (all there, or a read-only engine), -EIO when objects are
 * missing (the engine is then sticky, stats.store_lost set, the log names the first),
 * the sticky error of an engine stopped before, or a listing's error (nothing
 * decided).  Any thread.
 */
int engine_check_store(struct engine *e);

/* A key handed to a follow callback: borrowed, valid during the call only. */
struct engine_key {
	const uint8_t *p;
	size_t n;
};

/*
 * Called by a follower (opts.follow) after it applied WAL entries: keys are every key
 * those entries put or deleted (repeats possible), already readable through the engine.
 * all: the follower jumped to a newer manifest without the WAL between (it fell behind,
 * or what it needed was collected): any key may have changed, and keys is empty.  Called
 * on the follower's own thread with no engine lock held; it may read from the engine but
 * must not block for long (the next poll waits for it).
 */
typedef void (*engine_follow_fn)(void *arg, const struct engine_key *keys, size_t n, bool all);

/*
 * Called by a follower with hold true right before it publishes a WAL entry (the entry
 * is fetched and checked; no engine lock held) and with hold false once the follow
 * callback for that entry has returned.  A caller that keeps its readers out in between
 * (a lock they take shared), or has them read again when a publish overlapped them (a
 * count of publishes, as fs/follow.c does), makes them see the state before the entry or
 * after it together with what its callback updated, never the engine's new bytes next to
 * its own old records.  Readers that lock it out must not do so while they wait for
 * anything the follower thread does.  Jumps (all) are not gated.
 */
typedef void (*engine_follow_gate_fn)(void *arg, bool hold);

/*
 * Install (or, with fn NULL, remove) the follow callback and its gate (may be NULL).
 * Any thread; takes effect for the entries applied after it returns.  A no-op on an
 * engine that does not follow.
 */
void engine_follow_set_fn(struct engine *e, engine_follow_fn fn, engine_follow_gate_fn gate,
                          void *arg);

/*
 * Bell mode (engine_opts.follow_bell): make the follower poll at once and return to its
 * normal interval, deep idle or not (the bell rang, or its read failed).  Takes e->mu for
 * a moment, does no I/O, never waits for the poll: any thread but the follower's own.  No
 * effect on an engine that does not follow.
 */
void engine_follow_wake(struct engine *e);

/*
 * Bell mode: whether the store's bell object exists (the watcher's last read found it).
 * A follower deep-idles only while it does (a store whose writers never ring, older
 * binaries, must be polled); false also wakes it.  Same threads as engine_follow_wake().
 */
void engine_follow_set_bell(struct engine *e, bool present);

/* What a snapshot pins (docs/SNAPSHOTS.md). */
struct engine_snapshot {
	char name[101];    /* [A-Za-z0-9._-], 1..100 bytes, not starting with '.' */
	uint64_t manifest; /* the manifest version it pins */
	uint64_t epoch;    /* that manifest's writer epoch */
	uint64_t wal_from; /* the manifest's covered WAL position */
	uint64_t wal_end;  /* first WAL position not in the snapshot */
	int64_t created;   /* unix time of the creation */
};

/*
 * Snapshots of the store st, from any process, mounted or not (engine/core/snapshot.c).
 * create: pin the current durable state (the newest manifest and the WAL after it, up to
 * the first missing position) under name, with a conditional create; *out (may be NULL)
 * gets what was pinned.  -EEXIST (the name is taken), -EINVAL (a bad name), -ENOENT (the
 * store holds no manifest), the store's errors.  delete: -ENOENT when there is no such
 * snapshot; what it pinned is freed by the writer's GC after the grace period.  list:
 * fn for each snapshot, in name order (a nonzero return stops the listing and is
 * returned).  get: one snapshot by name (-ENOENT, -EUCLEAN).
 */
int engine_snapshot_create(struct store *st, const char *name, struct engine_snapshot *out);
int engine_snapshot_delete(struct store *st, const char *name);
int engine_snapshot_get(struct store *st, const char *name, struct engine_snapshot *out);
int engine_snapshot_list(struct store *st, int (*fn)(void *arg, const struct engine_snapshot *s),
                         void *arg);

/*
 * Snapshots of a store with regions (engine/region/regsnap.c; docs/SNAPSHOTS.md
 * "Regions"): one object per region, snap/<name> in region 0 and in the view r/<rid>/ of
 * every region of the map that has a state, region 0's written last (the commit point).
 * On a store without regions they act as engine_snapshot_*().
 * create: pins region 0, then every region the map lists (the map read again until it
 * lists no region not pinned), writes the regions' objects, then region 0's by a
 * conditional create; *out (may be NULL): region 0's part; *nregions (may be NULL): how
 * many regions besides region 0 have a part.  Errors as engine_snapshot_create(), and the
 * map's (-EUCLEAN...).  delete: the regions' objects, then region 0's; -ENOENT when none
 * was there.  list: fn(arg, 0, s) for each snapshot (region 0's object, in name order),
 * each followed by fn(arg, rid, s) for each region that has a part of it; a nonzero return
 * stops the listing and is returned.  Any thread; store I/O only.
 */
int region_snapshot_create(struct store *st, const char *name, struct engine_snapshot *out,
                           size_t *nregions);
int region_snapshot_delete(struct store *st, const char *name);
int region_snapshot_list(struct store *st,
                         int (*fn)(void *arg, uint32_t rid, const struct engine_snapshot *s),
                         void *arg);

/*
 * Write the statistics (engine and store) as "name value" lines into buf
 * (NUL-terminated, truncated to len).  Returns the length it wanted.
 */
size_t engine_stats_format(struct engine *e, char *buf, size_t len);

struct mw_hist_snap; /* util/hist.h */
/*
 * Copy the histogram of group commit times (pack and WAL entry, failed
 * attempts included; what commit_usec_total sums).  Any thread, no lock.
 */
void engine_get_commit_latency(struct engine *e, struct mw_hist_snap *out);

/* ------------------------------------------------------------------ */
/* Regions: holders and leases                                         */
/* ------------------------------------------------------------------ */

/*
 * Who writes a region of a store, and whether that writer is alive (engine/region/lease.c,
 * docs/REGIONS.md "Holders and leases").  A mount opens one struct region_lease on its store:
 * the object mounts/<id> says which regions it holds and is renewed while it holds one.  To
 * write region rid it calls region_acquire() (refused while a live mount holds rid), opens
 * the engine with engine_opts.claim_epoch = the epoch acquired, then region_held() (or
 * region_release() when the open failed).  Region 0 is the whole store (objects at the
 * root); region rid > 0 lives under "r/<rid>/".
 *
 * Correctness never rests on the lease: the epoch claim and the WAL fence stop a fenced
 * writer whatever the lease says (docs/WAL.md).  The lease keeps mounts from fencing a live
 * holder by accident, and lets a dead one be replaced.
 *
 * Errors: negative errno; the store's errors as they come; -EUCLEAN for a lease or holder
 * object that does not parse (logged, naming it: never taken for FREE);
 * -EPROTONOSUPPORT for one of a newer format version.  Threads: every function may be
 * called from any thread, except region_lease_close(), the last call.  No function holds
 * a lock of the lease across store I/O.
 */
struct region_lease;

struct region_lease_opts {
	const char *host;  /* this machine's name (NULL: gethostname()); borrowed during open */
	long pid;          /* the daemon's pid (0: getpid()) */
	const char *mnt;   /* the mount point, for humans (NULL: ""); borrowed during open */
	unsigned lease_ms; /* renew every lease_ms / 3; others call us dead after lease_ms
	                      without a renewal (0: 30000) */
};

enum holder_state {
	HOLDER_FREE,   /* nobody holds it: no holder object, or its mount released it */
	HOLDER_LIVE,   /* held, and the holder renewed its lease within its lease_ms */
	HOLDER_UNSURE, /* held, watched for less than the holder's lease_ms without a renewal
	                  seen: treat as held (refuse writes) */
	HOLDER_DEAD,   /* held by a mount that stopped renewing for its lease_ms (or whose
	                  lease was last written over lease_ms + 10 min ago): may be taken */
	HOLDER_SELF,   /* held (or being taken) by this lease */
};

/* What region_holder() found.  Strings are NUL-terminated ("" when unknown). */
struct holder_info {
	enum holder_state state;
	uint64_t epoch;    /* the newest manifest's epoch (the held one; 0: no manifest) */
	char mount[17];    /* the holder's mount id ("" when there is no holder object) */
	char host[256];    /* its host name */
	long pid;          /* its pid */
	char mnt[1024];    /* its mount point */
	int64_t since;     /* unix time it created the holder object (took the region) */
	unsigned lease_ms; /* its lease (0: its lease object is gone) */
	double quiet_sec;  /* its lease was seen unchanged this long (0 for FREE/SELF) */
};

/*
 * Open this mount's lease on st (borrowed: it must outlive the lease): a fresh random
 * id, mounts/<id> written once (one PUT), and the background thread, which renews the
 * lease every lease_ms / 3 while the mount holds (or is taking) a region, and re-reads
 * the holders of the regions it watches.  *out only on success.  -EINVAL, -ENOMEM, the
 * PUT's error.
 */
int region_lease_open(struct store *st, const struct region_lease_opts *o,
                      struct region_lease **out);

/*
 * Stop the thread and free l.  release: delete mounts/<id> (a clean unmount: every
 * region it held is free at once; close the engines first); false: leave it as it is,
 * as a crash would (others see the holder die after its lease).  Accepts NULL.
 */
void region_lease_close(struct region_lease *l, bool release);

/* This lease's mount id (16 lowercase hex digits); valid until close. */
const char *region_lease_id(const struct region_lease *l);

/*
 * Who holds region rid now (store I/O: the newest manifest, the holder object of its
 * epoch, the holder's lease; a HEAD the first time a mount is seen).  Also starts
 * watching rid: the thread then re-reads that holder's lease every lease_ms / 3 (one GET;
 * the manifest and holder object every 4th time), so that region_holder_cached() learns
 * of a death without waiting.  0 and *out, or an error.
 */
int region_holder(struct region_lease *l, uint32_t rid, struct holder_info *out);

/*
 * What the watch last found for rid, with the liveness judged as of now.  No store I/O,
 * never waits for any (callable under other locks).  -ENOENT if rid was never looked at
 * (region_holder(), region_acquire()); the error of the watch's last look if it failed
 * (the last good answer stays in *out).
 */
int region_holder_cached(struct region_lease *l, uint32_t rid, struct holder_info *out);

/*
 * A fresh look at rid as region_holder() takes, without starting to watch it (a region
 * already watched stays watched, its answer updated).  For `region list MNT` of a region
 * merely followed.  Same returns and threads as region_holder().
 */
int region_holder_look(struct region_lease *l, uint32_t rid, struct holder_info *out);

/* Stop watching rid (a region no longer of interest).  No I/O. */
void region_unwatch(struct region_lease *l, uint32_t rid);

/*
 * Reserve the next epoch of rid for this mount: check the holder (force: skip the
 * check), write "take rid E+1" into our lease, then create <prefix>holder/<E+1> by
 * put_if_absent.  0: *epoch = E+1, to pass as engine_opts.claim_epoch, then
 * region_held() once the open succeeded or region_release() if it failed.  -EBUSY
 * with *prev (may be NULL) filled: the holder is LIVE or UNSURE, or another live taker
 * created the holder object first.  A holder object of a taker that gave up (its lease
 * gone, without the take, or dead) is skipped: the next epoch is tried (bounded), and
 * so does force.  -EALREADY: this lease holds or is taking rid (*epoch: that epoch).
 * *prev (when not NULL) gets the holder the region was taken from.
 */
int region_acquire(struct region_lease *l, uint32_t rid, bool force, uint64_t *epoch,
                   struct holder_info *prev);

/*
 * The claim of epoch succeeded: "hold rid epoch" replaces the take in our lease, which is
 * written at once (the holder is SELF from now on) and renewed from now on.  0 or the
 * PUT's error (the hold stays and the next renewal writes it).
 */
int region_held(struct region_lease *l, uint32_t rid, uint64_t epoch);

/*
 * Let rid go (region release, or an open that failed after region_acquire()): drop its
 * hold or take line and write the lease at once; others see FREE from then on.  Close
 * the engine of rid first.  0 (also when rid was not held) or the PUT's error.
 */
int region_release(struct region_lease *l, uint32_t rid);

/*
 * One look for tools without a lease (`region list STORE`): the holder of rid as
 * region_holder() finds it, its liveness from its lease's mtime alone (the store's
 * clock against ours): renewed less than lease_ms ago LIVE, less than lease_ms + 10 min
 * UNSURE, else DEAD.  Watches nothing.  0 and *out, or an error.
 */
int region_holder_peek(struct store *st, uint32_t rid, struct holder_info *out);

/* What a lease did (memwalfs stats, metrics). */
struct region_lease_stats {
	uint64_t renewals;         /* lease PUTs that succeeded (open, renewals, rewrites) */
	uint64_t renew_failures;   /* lease PUTs that failed (retried at the next tick) */
	int64_t last_renew_ms_ago; /* since the last successful lease PUT (-1: none yet) */
	bool renew_overdue;        /* holding, and no successful PUT for a whole lease */
	uint64_t requests;         /* store requests this lease sent (all kinds) */
	uint64_t holds;            /* regions held or being taken now */
	uint64_t watched;          /* regions watched now */
	unsigned lease_ms;         /* the lease */
};

/* Copy l's statistics.  No I/O; any thread. */
void region_lease_get_stats(struct region_lease *l, struct region_lease_stats *out);

/*
 * Regions: the bell (engine/region/bell.c; docs/REGIONS.md "The bell").  One per mount.
 * The store-wide doorbell object `bell`: a writer engine rings it (one PUT, on the bell's
 * own thread) when it commits after BELL_RING_QUIET_MS of quiet, so that followers may
 * stop polling while nothing happens; the watcher (the same thread) GETs it every
 * interval_ms while followers are registered and wakes them all when it changed (or
 * could not be read).  Every function may be called from any thread and does no store
 * I/O except bell_close(); none waits for the store.
 */
struct bell;

/*
 * A writer rings when its previous durable write (WAL entry or manifest) is more than
 * this old.  It must stay below follow_deep_idle_ms minus a poll interval and a request's
 * time (60 s - 30 s with the defaults; the argument is in docs/REGIONS.md "The bell").
 */
#define BELL_RING_QUIET_MS 30000u
#define BELL_INTERVAL_MS 10000u /* bell_opts.interval_ms 0 */

struct bell_opts {
	const char *mount;      /* the mount's id (region_lease_id()); NULL: never rings (-o ro) */
	const char *host;       /* for the object, for people (NULL: gethostname) */
	unsigned interval_ms;   /* GET the bell this often while followers are registered */
	unsigned ring_quiet_ms; /* bell_commit_hook() rings after this quiet (0: R, above) */
};

/* Open the bell of st (borrowed: it must outlive the bell) and start its thread. */
int bell_open(struct store *st, const struct bell_opts *o, struct bell **out);
/* Stop the thread (a ring still pending is sent first, once); accepts NULL. */
void bell_close(struct bell *b);
/* Ring: the thread PUTs the bell soon (retried with backoff while it fails). */
void bell_ring(struct bell *b);
/* An engine_commit_fn (arg: the bell): rings when quiet_us > its ring_quiet_ms. */
void bell_commit_hook(void *arg, uint64_t quiet_us);
/*
 * Register a following engine (opened with follow_bell) to be woken by the bell, or
 * unregister it (before its engine_close(): once bell_unfollow() returns, the bell no
 * longer touches e).  bell_follow(): 0, -ENOMEM; an engine registered twice is once.
 */
int bell_follow(struct bell *b, struct engine *e);
void bell_unfollow(struct bell *b, struct engine *e);

struct bell_stats {
	uint64_t rings;         /* bell PUTs that succeeded */
	uint64_t ring_failures; /* bell PUTs that failed (retried) */
	uint64_t reads;         /* bell GETs */
	uint64_t read_failures; /* GETs that failed or found it malformed (followers woken) */
	uint64_t changes;       /* reads that found it changed (followers woken) */
	unsigned followers;     /* engines registered */
	bool present;           /* the last read found it */
};
void bell_get_stats(struct bell *b, struct bell_stats *out);

/* The name of a holder state: "free", "live", "unsure", "dead", "self". */
const char *holder_state_name(enum holder_state s);

/* ------------------------------------------------------------------ */
/* Regions: the map                                                    */
/* ------------------------------------------------------------------ */

/*
 * The store's list of its regions (engine/region/regmap.c, docs/REGIONS.md "The region
 * map"): objects regions/<version:20>, version 1, 2, 3, ..., each created once by
 * put_if_absent and never rewritten; the newest one is the map.  Region 0 (the whole
 * store before regions, root inode 1) is never listed: a store without a map has region 0
 * only.
 *
 * A region rid > 0 owns the inode numbers rid << 40 | n (n < 2^40); its root is the
 * directory of inode rid << 40 | 1, whose dentry (name in parent_ino) lives in the parent
 * directory's region.  rid is 1..REGION_RID_MAX, so that every inode number fits in 63 bits.
 * rids are never reused: the map keeps the largest rid ever given (max_rid) even when a
 * later version drops an entry.
 *
 * Errors: negative errno; the store's errors as they come; -EUCLEAN for a map object
 * that does not parse, -EPROTONOSUPPORT for one of a newer format version (both logged,
 * naming the object; the older versions are not used instead: they may lack regions).
 * Threads: the functions keep no state of their own; any thread may call them, on one
 * store at once.  A struct region_map is the caller's: calls on one map must not run
 * at once (lock it, or give each thread its own).
 */
#define REGION_INO_SHIFT 40                         /* ino = rid << 40 | n */
#define REGION_RID_MAX ((uint32_t)((1u << 23) - 1)) /* rid << 40 stays below 2^63 */
#define REGION_ROOT_INO(rid) (((uint64_t)(rid) << REGION_INO_SHIFT) | 1) /* its root dir */
#define REGION_OF_INO(ino) ((uint32_t)((uint64_t)(ino) >> REGION_INO_SHIFT))

/* One region of the map. */
struct region_entry {
	uint32_t rid;        /* 1..REGION_RID_MAX */
	uint64_t root_ino;   /* its root directory: REGION_ROOT_INO(rid) */
	uint64_t parent_ino; /* the directory that holds the root's dentry (another region's) */
	char name[256];      /* the root's name in parent_ino (1..255 bytes, no '/', not "."
	                        or ".."), as at creation */
	char path[1024];     /* the root's path at creation (1..1023 bytes), for people */
	int64_t since;       /* unix seconds of its creation */
};

/* The map: one version of regions/.  Zero it ({0}) for "no map read yet". */
struct region_map {
	uint64_t version;       /* N of regions/<N> it was read from (0: no map: region 0 only) */
	uint32_t max_rid;       /* the largest rid ever given (>= every entry's rid) */
	struct region_entry *v; /* the regions, by rid ascending (malloc()ed; NULL when n is 0) */
	size_t n;               /* entries in v */
};

/*
 * Read the newest map of st into *m (written only on success; whatever *m held is not
 * freed).  No map: 0 with *m zeroed (version 0, n 0).  Cost: one LIST of regions/ (GC
 * keeps it to a few names) and one GET.  Free with region_map_free().
 */
int region_map_load(struct store *st, struct region_map *m);

/*
 * Is there a map newer than m->version (m: a map from region_map_load(), _poll(),
 * _add(), or zeroed)?  One LIST (start_after regions/<m->version>); if there is, one GET
 * of the newest, which replaces *m (the old contents freed).  1: *m changed; 0: no newer
 * map (*m untouched; exactly one request); an error: *m untouched.
 */
int region_map_poll(struct store *st, struct region_map *m);

/*
 * Add a region: want's parent_ino, name, path and since (0: now) are used; its rid and
 * root_ino are ignored.  The new region gets rid = max_rid + 1 and root_ino
 * REGION_ROOT_INO(rid); regions/<newest + 1> is written by put_if_absent.  Losing the
 * race to another writer (-EEXIST of the put) reloads the newest map and tries again,
 * at most 16 times.  *m (a map as for region_map_poll()) is brought up to date first
 * (one LIST when it is the newest) and, on success, replaced by the map written; *rid
 * (may be NULL) gets the rid.  Errors: -EINVAL (want's name, path or parent_ino is not
 * valid); -EEXIST (a region whose root is name in parent_ino is in the map already: *m
 * is the map that has it); -ENOSPC (every rid is used); -EAGAIN (lost 16 races); the
 * store's and the load's errors.  *m may have been brought up to date on any error.
 */
int region_map_add(struct store *st, const struct region_entry *want, struct region_map *m,
                   uint32_t *rid);

/* Free m's entries and zero it.  Accepts NULL and a zeroed map. */
void region_map_free(struct region_map *m);

/* The entry of rid in m, or NULL (always for rid 0).  Valid until m changes.  No I/O. */
const struct region_entry *region_map_find(const struct region_map *m, uint32_t rid);

/*
 * The entry whose root is name in directory parent_ino, or NULL.  Valid until m changes.
 * No I/O.
 */
const struct region_entry *region_map_find_root(const struct region_map *m, uint64_t parent_ino,
                                                const char *name);

#endif /* MEMWALFS_ENGINE_H */
