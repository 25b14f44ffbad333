/*
 * internal.h - state shared by the files of fs/: the filesystem handle, the
 * in-memory inode table and per-file write buffers.  Not a public header.
 *
 * Concurrency.  One mutex, fs->mu, protects the inode table and every
 * inode's attributes and counters: metadata operations are short (they
 * build one batch, apply it to the MemTable and return; durability is
 * asynchronous), so one lock keeps them simple and atomic.  File data has a
 * second lock per inode, ip->dlock (a rwlock): writers of the write buffer
 * hold it exclusively, readers shared.  Lock order: ip->dlock, then fs->mu.
 *
 * Lifetime of an in-memory inode: it stays in the table while the kernel
 * holds lookups on it (nlookup), files are open on it (nopen) or a handler
 * is using it (refs).  When all three reach zero it is dropped, and if it
 * has no links left its records are reclaimed in one batch, without fs->mu
 * (inode.c, "Reclaim").
 */
#ifndef MEMWALFS_FS_INTERNAL_H
#define MEMWALFS_FS_INTERNAL_H

/*
 * 3.12, the API level of Debian 12's libfuse 3.14.  (When the daemon still
 * ran fuse_session_loop_mt(), a lower level picked its old entry point,
 * which read the loop configuration as the v1 layout: max_idle_threads came
 * out 0 and one waiting fsync stopped every other request.  pool.c's own
 * loop replaced it.)
 */
#define FUSE_USE_VERSION 312

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "data.h"
#include "engine.h"
#include "fs.h"
#include "hist.h"
#include "readahead.h"
#include "wbuf.h"
#include "schema.h"
#include "thread.h"

/*
 * Room a metadata batch asks for before it takes fs->mu (engine_wait_room):
 * the backpressure wait of a slow store then holds the writer, not the lock.
 */
#define FS_META_ROOM 4096

/*
 * A file handle (fuse_file_info.fh of a file opened by file_open() or
 * dir_create(); a directory's is its struct dirh, dir.c): the inode's
 * address, with FS_FH_WRITE set when it was opened for writing (inodes are
 * aligned: bit 0 is free), so that a close of a handle opened for writing
 * fails with EIO once the writer stopped: fenced, holding writes for a
 * takeover's handover, or after a commit that failed for good
 * (file_flush(), engine_write_error()).  fs_fh() builds it; no lock.
 */
#define FS_FH_WRITE ((uint64_t)1)
static inline uint64_t fs_fh(const struct inode *ip, int open_flags)
{
	return (uint64_t)(uintptr_t)ip | ((open_flags & O_ACCMODE) != O_RDONLY ? FS_FH_WRITE : 0);
}

/* Inode numbers are handed out from the superblock in ranges of this many (inode_new()). */
#define MWFS_INO_RANGE 1024

/*
 * An in-memory inode: the table entry of one inode number (see the file
 * comment for its lifetime).  Each field names the lock that protects it.
 */
struct inode {
	uint64_t ino;          /* inode number (immutable) */
	struct inode *hnext;   /* hash chain; fs->mu */
	uint64_t nlookup;      /* kernel lookup count; fs->mu */
	uint32_t nopen;        /* open file handles; fs->mu */
	uint32_t refs;         /* handlers using it right now; fs->mu */
	struct schema_inode a; /* attributes as the kernel sees them; fs->mu */
	uint64_t rec_size;     /* size written in records (data durable order); fs->mu */
	bool gone;             /* records deleted (rmdir, reclaimed); fs->mu */
	/*
	 * Read-only mounts: engine_seq() of the state a was read at (inode_record_get()).
	 * A follower keeps a removed inode's last state (gone, nlink 0): its data is read
	 * at this sequence (file.c, docs/FOLLOWERS.md "Removed files"); fs->mu
	 */
	uint64_t seq;
	char *target;       /* symlink target (NUL-terminated) or NULL; fs->mu */
	uint64_t ticket;    /* ticket of the last write touching it; fs->mu */
	uint64_t ra_next;   /* read-ahead: where the last read ended; fs->ra->mu */
	uint64_t ra_hi;     /* read-ahead: chunks below this are queued; fs->ra->mu */
	uint32_t ra_streak; /* read-ahead: sequential reads in a row; fs->ra->mu */
	uint32_t ra_rand;   /* read-ahead: reads that were not sequential; fs->ra->mu */
	uint64_t ra_fill;   /* read-ahead: whole-file fill queued below this chunk; fs->ra->mu */
	bool wb_listed;     /* on the write-buffer flusher's list (data.c); fs->mu */
	uint8_t alloc;      /* has allocated ranges: EXT_ALLOC_* (extent.h); ip->dlock */
	pthread_rwlock_t dlock; /* file data: wb, alloc and the extents (shared to read) */
	struct wbuf wb;         /* write buffer; ip->dlock */
};

/*
 * mode.c: the gate every FUSE request passes (pool.c), closed while a mount that followed
 * switches to a writer engine.  Requests count themselves in active; a switch sets closing
 * and waits for active to drain; new requests wait while it is set.
 */
struct fs_gate {
	atomic_uint active;  /* requests inside */
	atomic_bool closing; /* a switch is waiting or under way */
	struct mw_mutex mu;  /* with cv */
	pthread_cond_t cv;   /* closing cleared, or the last request left while closing */
};

#define FS_DGEN_SLOTS 64 /* entries of mwfs.dgen */

/*
 * Regions (docs/REGIONS.md, "Routing in fs/").  A region is an inode-number range with an
 * engine of its own: ino = rid << FS_REGION_SHIFT | n.  Region 0 is the store as before
 * regions (root 1); every key of an inode ('I', 'E', 'A', 'X', 'O' ino) lives in the region
 * of that inode, a directory entry ('D' parent name) in its parent's, and each region's
 * engine has its own superblock ('S') with the next inode number of its range.
 */
#define FS_REGION_SHIFT 40
#define FS_REGIONS_MAX 64 /* entries of mwfs.reg */

/* The region of inode number ino. */
static inline uint32_t fs_ino_rid(uint64_t ino)
{
	return (uint32_t)(ino >> FS_REGION_SHIFT);
}

/*
 * The region engine key k (kn bytes) belongs to: that of the inode number after the tag
 * (a directory entry's is its parent's).  -1 for the superblock ('S', one per region's
 * engine: it belongs to whichever region's engine it is written to) or a key too short.
 */
static inline int64_t fs_key_rid(const uint8_t *k, size_t kn)
{
	if (kn < 9 || k[0] == SCHEMA_TAG_SUPER)
		return -1;
	uint64_t ino = 0;
	for (int i = 1; i < 9; i++)
		ino = ino << 8 | k[i];
	return fs_ino_rid(ino);
}

/*
 * One region of the mount's table (mwfs.reg): its engine and what this mount does with it.
 * An entry is filled by fs_region_add() before it is published (mwfs.nreg) and never
 * removed while the mount runs.  e, writer and ff change only while every request is held
 * at the gate (mode.c's switch and release, with the region's hooks stopped), so requests
 * and background threads read them without a lock.
 */
struct fs_region {
	uint32_t rid;        /* region id (immutable) */
	struct engine *e;    /* its engine, borrowed (the mount command opens and closes it) */
	bool writer;         /* this mount writes it (else it follows it, or a ro mount reads) */
	struct fsfollow *ff; /* a following engine's hooks (follow.c), else NULL */
	uint64_t next_ino;   /* next inode number to hand out in it; fs->mu */
	uint64_t ino_limit;  /* its superblock's next_ino (persisted bound); fs->mu */
};

struct mwfs {
	struct fs_region reg[FS_REGIONS_MAX]; /* the regions this mount knows (fs_region_add()) */
	atomic_uint nreg;                     /* entries of reg in use; only grows */
	struct mwfs_opts o;                   /* options */
	uint32_t cs;                          /* chunk size (superblock) */
	struct mw_mutex mu;  /* see the file comment; mw_mutex_assert_held() checks it */
	struct inode **htab; /* inode hash table; fs->mu */
	/*
	 * Changes of directory entries, per slot of directories (ino %
	 * FS_DGEN_SLOTS), and of anything (a follower's update); fs->mu.  A
	 * listing snapshot remembers them: readdirplus hands the kernel a
	 * name's inode only while they are unchanged (listing.c, do_readdir()).
	 */
	uint64_t dgen[FS_DGEN_SLOTS];
	uint64_t dgen_all;
	size_t hsize, hcount;    /* buckets (power of two), entries; fs->mu */
	struct fuse_session *se; /* NULL until mwfs_mount() */
	bool mounted;
	struct mw_hist fsync_hist;  /* time of fsync and fsyncdir requests (lock-free, hist.h) */
	bool writeback;             /* kernel writeback cache in effect */
	pthread_key_t tkey;         /* per-thread scratch buffers (struct tls) */
	struct readahead *ra;       /* read-ahead threads and in-flight loads (readahead.c) */
	struct flusher *wbf;        /* puts write buffers left partly filled (data.c) */
	atomic_uint outage_readers; /* requests waiting out a store outage (fs_retry()) */
	struct mw_mutex refresh_mu; /* one follow_refresh() at a time (before fs->mu) */
	struct fsnotify *nf; /* kernel cache invalidations (notify.c); NULL on a plain ro mount */
	uint64_t *reclaim;   /* unlinked inodes whose records wait to go (inode.c); fs->mu */
	size_t reclaim_n, reclaim_cap; /* fs->mu */
	atomic_size_t reclaim_queued;  /* reclaim_n, read without fs->mu */
	struct fs_gate gate;           /* every request passes it (mode.c) */
	struct mw_mutex take_mu;       /* one take of the store at a time (mode.c; before fs->mu) */
	/* steps under fs->mu run again after a warm without it (fs_miss_retry()) */
	atomic_uint_fast64_t noio_retries;
};

/* The table entry of region rid, or NULL when the mount does not know it.  No lock. */
static inline struct fs_region *fs_region_get(struct mwfs *fs, uint32_t rid)
{
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (fs->reg[i].rid == rid)
			return &fs->reg[i];
	return NULL;
}

/*
 * The region of inode ino in fs's table, or NULL when the mount does not know that region
 * (an inode number of a region it has no engine for: callers answer -ENOENT).  No lock.
 */
static inline struct fs_region *fs_region_of(struct mwfs *fs, uint64_t ino)
{
	return fs_region_get(fs, fs_ino_rid(ino));
}

/*
 * The engine of ino's region.  Only for an inode the mount knows the region of (one the
 * table holds, or a key of one); NULL otherwise.  No lock.
 */
static inline struct engine *fs_eng(struct mwfs *fs, uint64_t ino)
{
	struct fs_region *r = fs_region_of(fs, ino);
	return r ? r->e : NULL;
}

/* Does this mount write ino's region (false: it follows it, a ro mount, or unknown)? */
static inline bool fs_region_writes(struct mwfs *fs, uint64_t ino)
{
	struct fs_region *r = fs_region_of(fs, ino);
	return r && r->writer;
}

/* Per-thread scratch, reused across requests (avoids a malloc per read). */
struct tls {
	uint8_t *buf; /* read reply / general buffer */
	size_t cap;
	struct engine_batch *b; /* reusable batch */
	struct fs_region *breg; /* the region b belongs to (fs_batch()) */
	bool bxdev;             /* a key of another region was refused: b is not committed */
};

/* ---- common.c ------------------------------------------------------------ */

/* The destructor of fs->tkey: frees a struct tls and what it holds.  Accepts NULL. */
void fs_tls_free(void *tls);
/*
 * The calling thread's scratch (struct tls), made at its first call; owned by
 * the thread (freed by fs_tls_free() when it exits).  NULL on allocation
 * failure.  No lock.
 */
struct tls *fs_tls(struct mwfs *fs);
/*
 * The calling thread's buffer, grown to at least n bytes; valid until the
 * thread's next fs_tls_buf().  NULL on allocation failure.  No lock.
 */
uint8_t *fs_tls_buf(struct mwfs *fs, size_t n);
/*
 * The calling thread's engine batch, emptied, for a change of the region of inode ino (a
 * directory entry's: the parent's), into *out; valid until the thread's next fs_batch().
 * Every key goes in through fs_batch_put() and its siblings, which refuse a key of another
 * region, and inode_commit() writes it to that region's engine: a batch never spans two
 * regions (each is its own engine, with no transaction across them).  0, -ENOMEM, or
 * -ENOENT (a region this mount does not know).  No lock.
 */
int fs_batch(struct mwfs *fs, uint64_t ino, struct engine_batch **out);
/*
 * The region b belongs to: the thread's batch as fs_batch() bound it, else NULL.  No lock.
 * *xdev (may be NULL) tells whether a key of another region was refused since.
 */
struct fs_region *fs_batch_region(struct mwfs *fs, const struct engine_batch *b, bool *xdev);
/*
 * engine_batch_put(), _delete(), _put_ref() and _put_borrowed() of the thread's batch b
 * (fs_batch()), after checking that key belongs to b's region (fs_key_rid(); the
 * superblock belongs to any).  A key of another region is a bug: it asserts, and in a
 * release build returns -EXDEV and marks b so that inode_commit() refuses it too.
 */
int fs_batch_put(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn,
                 const void *val, size_t vn);
int fs_batch_del(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn);
int fs_batch_put_ref(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn,
                     const struct engine_ref *ref, uint64_t off, uint64_t len);
int fs_batch_put_borrowed(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn,
                          const void *val, size_t vn);
/*
 * fsck.c: iterate the engine keys with one-byte prefix tag, calling fn(arg, key, klen,
 * value, vlen, vrc) for each: the value is read only when want_value (vrc: that read's
 * error, value NULL; else 0), vlen is always its length.  A nonzero return of fn stops the
 * scan and is returned; else 0 or the scan's (or -ENOMEM) error.  fsck.c, salvage.c.
 */
typedef int (*fs_scan_fn)(void *arg, const uint8_t *k, size_t kn, const void *v, size_t vn,
                          int vrc);
int fs_scan_tag(struct engine *e, uint8_t tag, bool want_value, fs_scan_fn fn, void *arg);
/*
 * The positive errno for fuse_reply_err() of an engine or fs/ result rc (0
 * or negative): -ESTALE (fenced), -EUCLEAN and -EBADMSG (damaged),
 * -EPROTONOSUPPORT (newer format) and -ETIMEDOUT become EIO, other negative
 * errnos pass through, anything else is EIO.  No lock.
 */
int fs_err(int rc);

/*
 * May the mount change the region of inode ino now?  0; -EROFS when this mount does not
 * write that region (a read-only mount, a region another mount holds, one it does not
 * know); or the region's writer's sticky error: fenced by a newer writer (-ESTALE) or a
 * commit that failed for good (-EIO), which fs_err() answers as EIO.  Every handler that
 * changes something asks this first (for the inode whose keys it changes: a directory
 * entry's parent), so that once the writer stopped every write, create, open for writing,
 * close of a written file, fsync, mkdir, rename, unlink, setattr, xattr change... fails at
 * once, instead of being taken into memory and lost at the next commit.
 */
int fs_writable(struct mwfs *fs, uint64_t ino);
/*
 * fs_read_super(): read and decode the superblock of e (one region's engine) into *sb.  0, -ENOENT
 * (no filesystem yet), -EPROTONOSUPPORT (a format version this code does not know; logged,
 * sb->version filled), -EUCLEAN (corrupt; logged) or the engine's error.
 */
int fs_read_super(struct engine *e, struct schema_super *sb);

/*
 * Now, for every timestamp the daemon sets: the kernel's coarse clock, never
 * earlier than a time given before nor than one fs_clock_seen() took
 * (common.c says why).  Lock-free; any thread.
 */
void fs_now(int64_t *sec, uint32_t *nsec);
/*
 * A time the kernel stamped with its own clock: fs_now() gives nothing
 * earlier from now on (a time more than 1 s ahead of the clock is ignored).
 * Lock-free; any thread.
 */
void fs_clock_seen(int64_t sec, uint32_t nsec);
/* The space statfs reports and fallocate checks (common.c), bytes, multiples of 4096. */
struct fs_space {
	uint64_t total; /* the size */
	uint64_t free;  /* free */
	uint64_t avail; /* free to an unprivileged user (at most free) */
};
/*
 * Fill *sp: the capacity option (or 1 PiB on a store with no size of its
 * own) less the engine's estimate of live data, or on a local store the
 * size and free space of the filesystem that holds it.  Takes the engine's
 * lock briefly, not fs->mu.
 */
void fs_space(struct mwfs *fs, struct fs_space *sp);
/* Set the chosen timestamps of a to fs_now() (a is an inode's: fs->mu held). */
void fs_touch(struct schema_inode *a, bool atime, bool mtime, bool ctime);
/*
 * The mode a file of mode mode and group gid keeps when the caller of req changes it (write,
 * truncate, fallocate, chown): without CAP_FSETID, set-user-ID cleared, and set-group-ID when
 * group-executable or the caller is not in group gid; sgid_only (a setattr of the mode): only
 * the latter, set-group-ID when the caller is not in gid (common.c says why fs/ does it).
 */
uint32_t fs_kill_suidgid(fuse_req_t req, uint32_t mode, uint32_t gid, bool sgid_only);
/* The struct stat of ip as the kernel sees it (ip->a; fs->mu held). */
void fs_fill_stat(struct mwfs *fs, const struct inode *ip, struct stat *st);
/* The reply to a lookup or create of ip: its stat and the mount's timeouts (fs->mu held). */
void fs_fill_entry(struct mwfs *fs, const struct inode *ip, struct fuse_entry_param *e);
/* Are the n bytes at p all zero (true when n is 0)?  No lock. */
bool fs_all_zero(const uint8_t *p, size_t n);
/*
 * once(arg), and while it fails because the store does not answer
 * (engine_err_transient()) once(arg) again by the engine's retry policy
 * (engine_retry(): its backoff, its sync_timeout): with wait (a write
 * depends on it, its bytes wait in memory) until the store answers; else
 * only while fewer than half the request threads wait so, then the error
 * (threads are left to answer from the caches).  once() must start over
 * each time (rewind what it added to a batch).  The one place fs/ decides
 * to wait for the store.  Returns once()'s last result.
 */
int fs_retry(struct mwfs *fs, bool wait, int (*once)(void *), void *arg);
/*
 * engine_prefetch() of key (on the engine of its region, fs_key_rid()) before fs->mu is
 * taken, waiting out an outage within fs_retry()'s bound.  0, -ENOENT (also: a region
 * this mount does not know) or the store's error.
 */
int fs_warm_key(struct mwfs *fs, const uint8_t *key, size_t kn);

/*
 * Reads under fs->mu, which may not wait for the store (docs/DESIGN.md
 * "Locking"; debug builds check it).  fs_get_locked(): engine_get_nowait()
 * of key (seq 0) or engine_get_at_nowait() at seq (val NULL: a probe); -EWOULDBLOCK
 * when the key is not in memory, and the thread remembers the key for fs_miss_retry().
 *
 * fs_scan(): a scan of the keys under prefix pfx, calling fn(arg, key) on
 * each of the first limit (0: all) until it returns nonzero, which is
 * returned; 0 at the end, or the scan's error.  locked: fs->mu is held and
 * the scan reads from memory only (engine_iter_new_nowait()), -EWOULDBLOCK
 * when a block is not there, and the thread remembers the prefix for
 * fs_miss_retry(), whose warm step is the same scan without the lock and without
 * fn (so limit must cover what fn reads).  fn must not wait for the store.
 *
 * fs_miss_retry() is the one retry of a step under fs->mu that met -EWOULDBLOCK:
 * it drops fs->mu, warms the missed key (fs_warm_key()) or scan, takes fs->mu
 * again and returns true, and the caller runs its step again from where it took
 * the lock, looking up again whatever it had decided on (another handler
 * may have run meanwhile).  false when *rc is anything else or the warm
 * step failed (*rc: its error; fs->mu held again).  The shape of a step:
 *
 *	do
 *		rc = inode_get(fs, ino, &ip);
 *	while (fs_miss_retry(fs, &rc));
 *
 * A cache too small to keep what was warmed until the retry makes the reads
 * of the step wait under the lock after FS_RETRY_MAX rounds, with the
 * thread's no-I/O mark lifted for them: late, never stuck.
 */
int fs_get_locked(struct mwfs *fs, uint64_t seq, const uint8_t *key, size_t kn, void **val,
                  size_t *vn);
int fs_scan(struct mwfs *fs, bool locked, const uint8_t *pfx, size_t pn, size_t limit,
            int (*fn)(void *arg, const uint8_t *k, size_t kn), void *arg);
bool fs_miss_retry(struct mwfs *fs, int *rc);

/*
 * pool.c: serve se's requests on up to max_threads workers until it is
 * unmounted or a signal ends it; workers are reused most recently idle
 * first; each request is handled inside gate.  0 or a negative errno (a read
 * error of the device).
 */
int pool_run(struct fuse_session *se, unsigned max_threads, struct fs_gate *gate);

/* ---- mode.c: a read-write mount that follows, and its switch to writing ---- */

void fs_gate_init(struct fs_gate *g);
void fs_gate_destroy(struct fs_gate *g);
/* Count a request in (waits while a switch is under way) and out. */
void fs_gate_enter(struct fs_gate *g);
void fs_gate_leave(struct fs_gate *g);
/*
 * At the start of a request that changes the region of inode ino, before it takes any
 * lock: on a read-write mount that follows that region (fs->o.take set and the region
 * not written here), take the region over if its holder let go of it, and switch the
 * region to the writer engine (mode.c).  The caller asks fs_writable() next, as always:
 * it says -EROFS while the region is still held.
 */
void fs_want_write(struct mwfs *fs, uint64_t ino);
/*
 * `memwalfs region release` of region rid, from a request's thread (inside the gate, no
 * lock held): the mount commits everything, lets the region go and follows it
 * (mwfs_opts.release).  0, -EINVAL (this mount does not write it), -ENOTSUP (no hook) or
 * the error that kept it writing.
 */
int fs_release(struct mwfs *fs, uint32_t rid);
/*
 * `memwalfs region take [--force]` (in a request, inside the gate): take region rid now, as
 * its first change would; force fences a live holder.  0, -EALREADY (this mount writes it),
 * the write error of this mount's writer of it (-EIO once fenced: another mount took it),
 * -EROFS (another live mount holds it, or the take failed: the log says why), -ENOTSUP (a
 * mount that cannot take regions), -ENOENT (a region this mount does not know).
 */
int fs_take(struct mwfs *fs, uint32_t rid, bool force);

/* ---- region.c: the table of regions and the rules between them -------------- */

/*
 * Add region rid, on engine e (borrowed: it must outlive fs, or be replaced by the switch
 * first), to fs's table: writer when this mount writes it.  Reads the region's superblock
 * (its next inode number; the chunk size must be the mount's).  Called by mwfs_open() for
 * region 0, and by the mount for each further region it writes or follows, before the
 * region's inodes are used; callable while requests run (the entry is published last).
 * 0, -EEXIST (rid is in the table), -ENOSPC (table full), -EINVAL (rid out of range, or
 * another chunk size), or fs_read_super()'s error.
 */
int fs_region_add(struct mwfs *fs, uint32_t rid, struct engine *e, bool writer);

/*
 * The first records of new region rid on its empty writer engine e (`region create`),
 * durably, in one batch: its superblock (next_ino after the root, fs->cs as chunk size) and
 * its root directory (rid << 40 | 1: 0755, nlink 2, owner uid:gid, parent parent) marked an
 * orphan ('O'), so that a crash before its entry in the parent region leaves a root that
 * nothing names.  rid 0: a new filesystem (root 1, its own parent, no mark).  No lock held
 * (store I/O).  0 or the engine's error (logged).
 */
int fs_region_format(struct mwfs *fs, struct engine *e, uint32_t rid, uint64_t parent, uint32_t uid,
                     uint32_t gid);
/*
 * Delete the orphan mark of region rid's root (its entry in the parent region is durable),
 * durably.  No lock held.  0, -EROFS (not written here) or the engine's error (logged).
 */
int fs_region_unorphan(struct mwfs *fs, uint32_t rid);

/*
 * Lazy discovery, from a request's thread inside the gate, no lock held: when inode number
 * ino is of a region the mount does not know, open it through mwfs_opts.region_open and
 * add it to the table (a followed region gets its follower hooks; mode.c).  Nothing when
 * the region is known, or without the hook; a failure is logged and the region keeps
 * reading as missing.
 */
void fs_region_discover(struct mwfs *fs, uint64_t ino);

/*
 * The rules of operations across regions (pure: inode numbers in, an errno out).  Each
 * region is its own engine, and a batch commits in one (fs_batch()), so an operation whose
 * keys would land in two regions is refused before anything changes: EXDEV for rename and
 * link (the kernel's answer to a move across filesystems: mv copies and unlinks), EBUSY
 * for removing a region's root (its inode lives in the child region, its entry in the
 * parent's: a mount point, as the kernel answers rmdir of one).  0 when allowed; with one
 * region they never refuse.  A region root is recognised by its number only: an inode of
 * another region than the directory that names it.
 *
 * rename: the source's parent, the destination's parent, the inode moved, the inode
 * replaced (0: none); exchange: the destination's inode moves too (same rule).
 */
int fs_region_rename(uint64_t parent, uint64_t newparent, uint64_t ino, uint64_t target);
/* link of inode ino into directory newparent. */
int fs_region_link(uint64_t ino, uint64_t newparent);
/* unlink or rmdir of name in parent naming inode ino. */
int fs_region_unlink(uint64_t parent, uint64_t ino);

/*
 * notify.c: one thread per mount that tells the kernel to drop what it caches (never from a
 * handler, never with a lock held), from a bounded queue in which the ranges of one inode
 * merge.  refresh (follower mounts, else NULL): called by the thread before an inode is
 * invalidated; returns nonzero when the table holds the inode (only then is the kernel
 * told).  The queue functions take no lock the caller may hold and accept NULL.
 */
struct fsnotify;
typedef int (*fsnotify_refresh_fn)(struct mwfs *fs, uint64_t ino);
/*
 * Start the notify thread of fs with hook refresh (may be NULL); *out is
 * written on success only, freed by fsnotify_stop().  0, -ENOMEM or the
 * error of starting the thread.  At mount, before the session runs.
 */
int fsnotify_start(struct mwfs *fs, fsnotify_refresh_fn refresh, struct fsnotify **out);
/* The FUSE session to notify, once mounted (before: items are refreshed, nothing sent). */
void fsnotify_session(struct fsnotify *nf, struct fuse_session *se);
/* Drop the kernel's attributes of ino and its cached pages of [off, off + len) (len 0: all). */
void fsnotify_inode(struct fsnotify *nf, uint64_t ino, uint64_t off, uint64_t len);
/* Drop the kernel's cached entry name[0, n) of directory parent. */
void fsnotify_entry(struct fsnotify *nf, uint64_t parent, const char *name, size_t n);
/* Everything changed: every inode of the table, refreshed and invalidated whole. */
void fsnotify_all(struct fsnotify *nf);
/*
 * The refresh hook from now on (a region became followed), then fsnotify_all(); the thread
 * goes on (unlike fsnotify_stop() and a new start, it is not waited for: a notification in
 * progress may wait for a page that a request waiting at a closed gate holds).
 */
void fsnotify_follow(struct fsnotify *nf, fsnotify_refresh_fn refresh);
/*
 * Tell the kernel at once that ino's attributes are stale (not its pages: safe while
 * requests of that inode wait), if the session is mounted; the caller's thread.
 */
void fsnotify_attr_now(struct fsnotify *nf, uint64_t ino);
struct fsnotify_counts {
	uint64_t inodes, entries; /* notifications sent */
	uint64_t refreshed;       /* records refreshed by the hook */
	uint64_t retries;         /* inode invalidations queued again after -ENOENT */
};
/* Copy the counters of nf into *c (zeros when nf is NULL); takes nf's own lock. */
void fsnotify_counts(struct fsnotify *nf, struct fsnotify_counts *c);
void fsnotify_stop(struct fsnotify *nf); /* joins the thread; accepts NULL */

/*
 * follow.c: on a region of a following engine, what the follower applied is queued for the
 * notify thread (fs->nf, started first with follow_refresh as its hook).  start: registers
 * with region r's engine (engine_follow_set_fn), *out goes to r->ff; stop: unregisters
 * (accepts NULL).
 */
struct fsfollow;
int fsfollow_start(struct mwfs *fs, struct fs_region *r, struct fsfollow **out);
void fsfollow_stop(struct fsfollow *ff);
/*
 * Around a read of file data on a follower mount (no-ops on other mounts), so that a read
 * never returns an entry's new bytes to a kernel that still holds the old size and times:
 * the follower publishes an entry, refreshes the records it changed and tells the kernel
 * their attributes are stale inside a publish, and a read that a publish overlapped is
 * done again (fsfollow_read_done() false).  Reads do not hold publishes back, so a read
 * that waits for the store (a cold block, an outage) delays nothing else; after
 * FSFOLLOW_READ_TRIES overlapped tries the last one holds publishes out.  No lock held.
 *
 *	struct fsfollow_read fr;
 *	fsfollow_read_begin(fs, ino, &fr);
 *	do { read } while (!fsfollow_read_done(&fr));
 *
 * The hooks are those of ino's region (none: a region this mount writes).
 */
#define FSFOLLOW_READ_TRIES 4
struct fsfollow_read {
	struct fsfollow *ff; /* the region's hooks, or NULL (no-ops) */
	uint64_t pubs;       /* publishes begun and ended when the try started (even) */
	unsigned tries;      /* tries a publish overlapped */
	bool locked;         /* the last try holds the gate shared */
};
void fsfollow_read_begin(struct mwfs *fs, uint64_t ino, struct fsfollow_read *r);
bool fsfollow_read_done(struct fsfollow_read *r);
/*
 * Reload the record of ino into its table entry, if the table holds it (fs->mu not held).
 * Returns 1 when the table holds it (the kernel may cache it), else 0.  An inode of a
 * region this mount writes is not read again (its table entry is ahead of the engine).
 */
int follow_refresh(struct mwfs *fs, uint64_t ino);

/*
 * The record of ino (malloc()ed into *val, *vn bytes), as engine_get() of its region's
 * engine; in a region this mount does not write, read at one engine_seq(), which *seq
 * gets (0 in a written one).  -ENOENT also for a region this mount does not know.  locked:
 * the caller holds fs->mu, and the record comes from memory or -EWOULDBLOCK
 * (fs_get_locked()); else any lock.
 */
int inode_record_get(struct mwfs *fs, uint64_t ino, bool locked, void **val, size_t *vn,
                     uint64_t *seq);
/*
 * Put the record val (vn bytes, read at engine sequence seq) in ip: attributes, size, symlink
 * target (fs->mu held).  false: the record is corrupt (logged), ip kept as it was.
 */
bool inode_record_set(struct inode *ip, const void *val, size_t vn, uint64_t seq);

/* ---- inode.c: the inode table (fs->mu held unless said otherwise) --------- */

/*
 * Take a reference on inode ino into *out, loading its record if needed
 * (fs->mu held).  0, -ENOENT if it has no record, -EUCLEAN if the record is
 * corrupt, -EWOULDBLOCK when the record is not in memory (fs_miss_retry()), or
 * the store's error.  Release with inode_put().
 */
int inode_get(struct mwfs *fs, uint64_t ino, struct inode **out);
/*
 * inode_get(), but an inode whose records are gone while the kernel still
 * holds it (a removed directory still open or looked up) is returned too,
 * with nlink 0, for the attribute operations (fstat, fchmod); changes to it
 * stay in memory.  fs->mu held.
 */
int inode_get_removed(struct mwfs *fs, uint64_t ino, struct inode **out);
/* ino's table entry, or NULL if not loaded; no reference taken (fs->mu held). */
struct inode *inode_find(struct mwfs *fs, uint64_t ino);
/*
 * Release a reference taken by inode_get()/inode_new(); the inode may be
 * dropped (and, unlinked, queued for reclaim).  fs->mu held unless ip is
 * NULL (then nothing happens).  Returns 0.
 */
int inode_put(struct mwfs *fs, struct inode *ip);
/*
 * Does inode ino exist?  fs->mu NOT held: takes it.  0, -ENOENT, or the
 * error of loading its record.  For handlers that read other records of ino
 * without the lock.
 */
int inode_check(struct mwfs *fs, uint64_t ino);
/*
 * Bring ino's record into the engine's caches unless the inode is loaded
 * (fs->mu NOT held; takes it only to look).  A handler calls it before it
 * takes fs->mu, so that inode_get() under the lock reads memory instead of
 * waiting for the store with every other handler held up.  0, -ENOENT, or
 * the store's error (the handler then fails without taking fs->mu).
 */
int inode_warm(struct mwfs *fs, uint64_t ino);
/* Drop n kernel lookups of ino (FUSE forget); the inode may be dropped.  fs->mu held. */
void inode_forget(struct mwfs *fs, uint64_t ino, uint64_t n);
/*
 * Allocate a new inode number in the region of directory parent (so that every region is a
 * connected subtree) and an in-memory inode of mode with one reference into *out (fs->mu
 * held); queues that region's superblock update into b (a batch of that region) when a new
 * range of numbers is taken.  The caller fills ip->a and commits b; on failure it sets
 * ip->gone and calls inode_put().  0, -ENOSPC (the region's range is used up), -ENOENT
 * (a region this mount does not know) or -errno.
 */
int inode_new(struct mwfs *fs, struct engine_batch *b, uint64_t parent, uint32_t mode,
              struct inode **out);
/*
 * Queue ip's inode record into b (nothing for an inode whose records are
 * gone).  fs->mu held.  0, -ENAMETOOLONG (a symlink target over 4096
 * bytes) or engine_batch_put()'s error.
 */
int inode_batch_put(struct mwfs *fs, struct engine_batch *b, const struct inode *ip);
/*
 * Queue into b the deletion of every record of ino: inode, orphan mark, xattrs and, with
 * data, extents and allocated ranges (a directory has none).  Scans the store (fs_scan()):
 * locked, under fs->mu from memory only, else without it.  0, or the first error (locked:
 * -EWOULDBLOCK, for fs_miss_retry()).
 */
int inode_batch_drop(struct mwfs *fs, struct engine_batch *b, uint64_t ino, bool data, bool locked);
/*
 * Apply b, the thread's batch (fs_batch()), to the engine of its region (without waiting
 * for durability) and remember its ticket in the n inodes ips (fs->mu held).  -EXDEV if a
 * key of another region was refused on the way, -EROFS if this mount does not write the
 * region, else the engine's error unchanged.
 */
int inode_commit(struct mwfs *fs, struct engine_batch *b, struct inode **ips, size_t n);
/*
 * Unlinked inodes: inode_reclaim_queued() deletes the records of those that maybe_evict()
 * queued; inode_reclaim_orphans() of every orphan not in use (mount, unmount).  Both with
 * fs->mu NOT held (they scan the store without it; see inode.c).
 */
void inode_reclaim_queued(struct mwfs *fs);
int inode_reclaim_orphans(struct mwfs *fs);

/*
 * One metadata change as one batch (fs->mu held from begin to commit):
 * inode_tx_add() snapshots an inode's attributes BEFORE the caller changes
 * them; inode_tx_commit() queues the record of every added inode, applies
 * the batch and, if anything fails, puts the snapshots back so that the
 * kernel keeps seeing what is stored.  See inode.c.
 */
#define INODE_TX_MAX 5 /* rename: 2 parents, source, replaced child, whiteout */
struct inode_tx {
	struct mwfs *fs;                     /* borrowed */
	struct engine_batch *b;              /* the thread's batch (fs_batch()) */
	size_t n;                            /* inodes in ip[] */
	struct inode *ip[INODE_TX_MAX];      /* touched inodes, in record order */
	struct schema_inode a[INODE_TX_MAX]; /* ip[i]->a before the change */
	uint64_t rec_size[INODE_TX_MAX];     /* ip[i]->rec_size before the change */
};
/*
 * Start tx on the thread's batch (fs_batch() for the region of inode ino: the inode the
 * change is about, a directory entry's parent; fs->mu held).  0, -ENOMEM or -ENOENT.
 * Nothing to free: an uncommitted tx is dropped, after inode_tx_undo() if its inodes were
 * changed.
 */
int inode_tx_begin(struct mwfs *fs, struct inode_tx *tx, uint64_t ino);
/* inode_tx_begin() on b, a batch (fs_batch()) that already holds data changes. */
void inode_tx_begin_on(struct mwfs *fs, struct inode_tx *tx, struct engine_batch *b);
/*
 * Snapshot ip's attributes and have its record written at commit; call it
 * before changing ip.  Adding an inode twice, or NULL, does nothing.  fs->mu
 * held.
 */
void inode_tx_add(struct inode_tx *tx, struct inode *ip);
/*
 * Finish tx (fs->mu held).  rc is the caller's result so far: when 0 the
 * records of the added inodes are queued and the batch applied
 * (inode_commit()); when rc or the commit fails the snapshots are put back.
 * Returns the first error.
 */
int inode_tx_commit(struct inode_tx *tx, int rc);
/* Put back the attributes of every inode added to tx (fs->mu held). */
void inode_tx_undo(struct inode_tx *tx);
/* Free every in-memory inode and the table, at close, once no handler runs. */
void inode_table_free(struct mwfs *fs);

/*
 * ---- the FUSE low-level handlers (fs.c's fuse_lowlevel_ops) ---------------
 *
 * Each is the handler of the FUSE request of its name, called on a worker
 * thread of pool.c with no lock held; it replies exactly once (fuse_reply_*)
 * with a positive errno from fs_err() on failure.  Those that change
 * anything ask fs_writable() first; they take ip->dlock and fs->mu
 * themselves, in that order.
 */

/* dir.c: lookup, mknod, mkdir, symlink, create, unlink, rmdir, rename, link;
 * listing.c: open directories (opendir, readdir, readdirplus, releasedir, fsyncdir). */
void dir_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
/* setxattr of MWFS_REGION_CREATE_XATTR on directory parent: `memwalfs region create`. */
void dir_region_create(fuse_req_t req, fuse_ino_t parent, const char *value, size_t size);
void dir_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void dir_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void dir_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void dir_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                struct fuse_file_info *fi);
void dir_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void dir_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void dir_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                const char *newname, unsigned int flags);
void dir_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
/*
 * Directory ino, live, with a reference (fs->mu held): 0, -ENOTDIR, -ENOENT (removed) or
 * the error of reading it.
 */
int dir_get(struct mwfs *fs, uint64_t ino, struct inode **out);
void dir_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void dir_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void dir_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info *fi);
void dir_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void dir_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* file.c: open, read, write, flush (close), release, fsync, fallocate, lseek,
 * copy_file_range. */
void file_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void file_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi);
void file_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi);
void file_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void file_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void file_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void file_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                    struct fuse_file_info *fi);
void file_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi);
void file_copy_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                     fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                     int flags);
/*
 * Truncation in two steps.  file_truncate_prepare() (ip->dlock exclusive,
 * buffer flushed, fs->mu NOT held: it scans the extents) queues into the
 * thread's batch (*b, from fs_batch()) what removes the stored bytes at and
 * past size, and counts them in *removed.  file_truncate_locked() (the same
 * locks plus fs->mu; start the transaction with inode_tx_begin_on(*b)) sets
 * the size and the stored bytes.
 */
int file_truncate_prepare(struct mwfs *fs, struct inode *ip, uint64_t size, struct engine_batch **b,
                          uint64_t *removed);
void file_truncate_locked(struct mwfs *fs, struct inode *ip, uint64_t size, uint64_t removed);

/* xattr.c: setxattr, getxattr (on the root also the virtual MWFS_*_XATTR names of fs.h),
 * listxattr, removexattr. */
void xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
               int flags);
void xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void xattr_list(fuse_req_t req, fuse_ino_t ino, size_t size);
void xattr_remove(fuse_req_t req, fuse_ino_t ino, const char *name);

#endif /* MEMWALFS_FS_INTERNAL_H */
