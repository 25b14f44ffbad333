/*
 * fs.h - the memwalfs FUSE filesystem: a POSIX tree on the MemWAL engine.
 *
 * The mount command (tools/mount.c) opens a store and an engine, then:
 *
 *   mwfs_open(engine, &opts, &fs);          superblock, orphans
 *   mwfs_mount(fs, argc, argv, mountpoint); FUSE session, kernel mount
 *   (daemonise here)
 *   mwfs_loop(fs);                          serve until unmount / SIGTERM
 *   mwfs_close(fs);                         flush buffers, unmount, free
 *   engine_close(engine);                   commit everything
 *
 * The layout of keys is in schema.h and docs/SCHEMA.md.  Threads: these
 * functions are called by one thread, in this order.
 */
#ifndef MEMWALFS_FS_H
#define MEMWALFS_FS_H

#include <stdbool.h>
#include <stdint.h>

struct engine;
struct mwfs;

/* Options of the filesystem (mwfs_opts_default() fills the defaults). */
#define MWFS_DEFAULT_CAPACITY (1ull << 50) /* 1 PiB: an object store has no fixed size */

/*
 * FUSE worker threads by default.  Each fsync holds one while its group
 * commits (a store round trip), so the number of fsyncs one commit can
 * acknowledge together is bounded by it: durable creates with 32 writers on
 * RGW went from 321 to 1029 files/s when 8 became 64 (issue 14).  Idle
 * threads cost a stack each.
 */
#define FS_DEFAULT_THREADS 64

struct mwfs_opts {
	uint32_t chunk_size;        /* data chunk size used when formatting (default 1 MiB) */
	double entry_timeout;       /* kernel dentry cache time in seconds (default 10) */
	double attr_timeout;        /* kernel attribute cache time in seconds (default 10) */
	bool read_only;             /* region 0's engine was opened read-only (the FUSE init
	                               negotiation; writes are decided per region) */
	bool writeback;             /* ask for the kernel writeback cache (default true) */
	bool follow_page_cache;     /* a follower's files through the kernel's page cache
	                               (default false: direct I/O, docs/FOLLOWERS.md "Reads") */
	unsigned max_threads;       /* FUSE worker threads (default FS_DEFAULT_THREADS) */
	unsigned readahead_threads; /* threads prefetching for sequential readers (default 8) */
	uint64_t readahead_bytes;   /* how far ahead they fetch at most (default 16 MiB; 0: off) */
	uint64_t kernel_readahead;  /* the max_readahead offered to the kernel (default 1 MiB) */
	unsigned wb_flush_ms;       /* put a partly written chunk after this long (default 100) */
	uint64_t capacity;          /* the size statfs reports, bytes (default 0: the size of the
	                               store's filesystem (a local store), else 1 PiB) */
	const char *daemon_info;    /* value of MWFS_DAEMON_XATTR on the root ("PID STATUSPATH"),
	                               or NULL; borrowed: must outlive the filesystem */
	/*
	 * A read-write mount of a region that another live mount holds: the region is opened
	 * on a following engine (region 0: with read_only set), and these hooks (fs/mode.c)
	 * take it over.  At the first change of region rid asked for, take(take_arg, rid,
	 * &writer) is called, from a request's thread with no lock held; it decides without
	 * store I/O whether the region can be taken (else -EROFS: the change fails with it)
	 * and opens a writer engine on it (store I/O).  The mount then switches the region to
	 * that engine and calls taken(take_arg, rid, done, now): done is the engine to close
	 * (the follower it used, or the writer when it could not switch: now NULL), now the
	 * engine it uses from then on.  force (`memwalfs region take --force`): take it even
	 * from a live holder, which is fenced.  NULL: a mount that never takes a region.
	 */
	int (*take)(void *arg, uint32_t rid, bool force, struct engine **writer);
	void (*taken)(void *arg, uint32_t rid, struct engine *done, struct engine *now);
	/*
	 * `memwalfs region release` (getxattr of MWFS_RELEASE_XATTR on the root of a writing
	 * mount): once every write buffer is in the writer and durable and no request runs,
	 * release(take_arg, rid, writer, &follower) opens a following engine on region rid,
	 * closes its writer (the final commit) and lets the region go; 0 and *follower, to
	 * which the mount switches the region (reads served, changes EROFS, the next change
	 * takes it again), or an error with the writer still open and in use.  NULL: -ENOTSUP.
	 */
	int (*release)(void *arg, uint32_t rid, struct engine *writer, struct engine **follower);
	/*
	 * The text of MWFS_REGIONS_XATTR (`memwalfs region list MNT`): regions(take_arg, rid,
	 * buf, len) writes what it knows of region rid (its holder, this mount's lag) into buf
	 * (len bytes) and returns its length; it is called for each region of the mount's
	 * table in turn, then once with MWFS_RID_MOUNT for the lines about the mount itself
	 * (its lease).  NULL: ENODATA (a read-only mount without a lease).
	 */
	size_t (*regions)(void *arg, uint32_t rid, char *buf, size_t len);
	/*
	 * More "name value" lines for the statistics, into buf (len bytes; returns the length
	 * written): with MWFS_RID_MOUNT the mount's lease and the holder of region 0; with a
	 * rid of the table, "region.<rid>.<name> <value>" lines of that region (its root's
	 * path, its holder's state).  NULL: none.
	 */
	size_t (*hold_stats)(void *arg, uint32_t rid, char *buf, size_t len);
	/*
	 * Lazy discovery (docs/REGIONS.md): the mount met an inode number of region rid (a
	 * directory entry naming a region's root) and has no engine for it.
	 * region_open(take_arg, rid, &e, &writer) checks that the region map lists rid, opens
	 * an engine on the region (a follower: writer false; the first change takes it as
	 * take() does) and returns it in *e (borrowed by the filesystem until the mount
	 * command closes it after mwfs_close()).  Called from a request's thread, no lock
	 * held, outside the gate.  0, -ENOENT (not in the map) or -errno.  NULL: regions
	 * other than those the mount was opened with read as missing.
	 */
	int (*region_open)(void *arg, uint32_t rid, struct engine **e, bool *writer);
	/*
	 * `memwalfs region create` (setxattr of MWFS_REGION_CREATE_XATTR): add a region whose
	 * root is name in directory parent (path: the root's path from the mount's root, for
	 * people) to the region map, take it, and open a writer engine on its empty view:
	 * 0 with *rid and *e (borrowed as for region_open), the engine not formatted yet (the
	 * filesystem formats it unless it has a superblock: a create that stopped before the
	 * root's entry and is resumed, the map listing it already); -EEXIST (another mount
	 * holds the region of that name in parent, making it now);
	 * -errno.  Called from a request's thread, no lock held.  NULL: -ENOTSUP.
	 */
	int (*region_create)(void *arg, uint64_t parent, const char *name, const char *path,
	                     uint32_t *rid, struct engine **e);
	void *take_arg; /* the hooks' argument */
};

/* mwfs_opts.regions: not a region, the lines about the mount itself. */
#define MWFS_RID_MOUNT UINT32_MAX

/* Fill *o with the defaults. */
void mwfs_opts_default(struct mwfs_opts *o);

/*
 * Open the filesystem on engine e (borrowed: it must outlive fs).  Reads the
 * superblock, or formats an empty store (superblock and root directory,
 * written durably) unless read-only.  Reclaims orphans left by a crash.
 * Errors: -EPROTONOSUPPORT for an unknown format version, -EUCLEAN for a
 * corrupt superblock, -ENOENT for an unformatted read-only store, engine
 * errors.  Each failure is logged.  *out is written only on success.
 */
int mwfs_open(struct engine *e, const struct mwfs_opts *o, struct mwfs **out);

/* The engine of region 0 that fs uses now (another one after a take, see mwfs_opts.take). */
struct engine *mwfs_engine(struct mwfs *fs);

/*
 * Check, without writing anything, that engine e (typically opened
 * read-only) holds a filesystem this code can mount: reads the superblock.
 * Returns 0 (a known format version), -ENOENT (no filesystem yet: the first
 * writer mount formats it), -EPROTONOSUPPORT (a format version this code
 * does not know, e.g. written by a newer memwalfs), -EUCLEAN (a corrupt
 * superblock) or an engine error; failures other than -ENOENT are logged.
 * *version (may be NULL) gets the superblock's format version, 0 if none.
 * The mount command calls it before opening the store as writer, so that a
 * refused store is left exactly as it was.
 */
int mwfs_check_format(struct engine *e, uint32_t *version);

/* The filesystem format version this code reads and writes (docs/SCHEMA.md). */
uint32_t mwfs_format_version(void);

/*
 * Check a FUSE command line (as mwfs_mount() takes it) the way libfuse
 * parses it, without opening /dev/fuse or mounting anything.  Returns 0 or
 * -EINVAL (libfuse has printed what it refused, e.g. an unknown -o option).
 */
int mwfs_check_fuse_args(int argc, char **argv);

/*
 * Create the FUSE session from the FUSE command line argc/argv (argv[0] a
 * program name, then "-o opt,..." pairs as fuse_session_new() takes them)
 * and mount it at mountpoint.  Installs SIGTERM/SIGINT/SIGHUP handlers that
 * end mwfs_loop().  Returns 0 or a negative errno (logged).
 */
int mwfs_mount(struct mwfs *fs, int argc, char **argv, const char *mountpoint);

/* Serve requests until unmounted or signalled.  Returns 0 or a negative errno. */
int mwfs_loop(struct mwfs *fs);

/*
 * Write out every buffered write, reclaim orphans no longer open, unmount
 * (if mounted) and free fs.  Returns the first error of writing buffers
 * out.  Accepts NULL.  The engine stays open: the caller closes it.
 */
int mwfs_close(struct mwfs *fs);

/* Chunk size in use (from the superblock). */
uint32_t mwfs_chunk_size(const struct mwfs *fs);

/*
 * The statistics as "name value" lines: engine_stats_format() of region 0 followed by the
 * filesystem's own counters (fs_*), the hold_stats hook's lines, then each region's
 * "region.<rid>.<name> <value>" lines (a region's whole or none), into buf (NUL-terminated,
 * truncated to len).  Returns the length it wanted, or less when regions were left out.
 * Any thread, while fs is open.
 */
size_t mwfs_stats_format(struct mwfs *fs, char *buf, size_t len);

struct mw_hist_snap; /* util/hist.h */
/* Copy the histogram of fsync and fsyncdir times (request to reply).  Any thread. */
void mwfs_get_fsync_latency(struct mwfs *fs, struct mw_hist_snap *out);

/* The xattr of the root directory whose value is mwfs_stats_format(). */
#define MWFS_STATS_XATTR "user.memwalfs.stats"
/* The xattr of the root directory whose value is mwfs_opts.daemon_info. */
#define MWFS_DAEMON_XATTR "user.memwalfs.daemon"
/*
 * getxattr of this name on the root puts every write buffer into the engine,
 * commits everything pending and waits until it is durable (as fsync does,
 * with the same --fsync-timeout), then answers "durable\n"; the error
 * otherwise.  "memwalfs sync" (tools/sync.c) uses it after syncfs(2), since
 * libfuse 3.14 has no syncfs operation of its own.
 */
#define MWFS_SYNC_XATTR "user.memwalfs.sync"
/*
 * The two steps of a takeover on the same machine (tools/takeover.c,
 * --takeover), asked of the old mount by the new one.  Before its claim,
 * getxattr of MWFS_HANDOVER_XATTR on the root puts every write buffer into
 * the engine, then refuses every change with EIO (engine_handover(), for up
 * to MWFS_HANDOVER_MS) and commits everything taken before, and answers
 * "durable\n" once it is (the error otherwise).  After the claim (or its
 * failure), getxattr of MWFS_FENCE_XATTR makes the daemon check now whether
 * a newer writer claimed the store (engine_check_epoch()) and answers
 * "fenced\n" (from then on every change fails with EIO) or "current\n" (the
 * takeover did not happen: the hold ends, changes are taken again); the
 * store's error otherwise.
 */
/*
 * getxattr of MWFS_REGIONS_XATTR on the root: the regions and their holders (mwfs_opts.regions);
 * of MWFS_RELEASE_XATTR on the root (region 0) or on a region's root (that region): let the
 * region go and follow it (mwfs_opts.release), answering "released\n"; EINVAL if this mount
 * does not write it.
 */
#define MWFS_REGIONS_XATTR "user.memwalfs.regions"
#define MWFS_RELEASE_XATTR "user.memwalfs.release"
/*
 * getxattr of MWFS_TAKE_XATTR on the same roots: take the region now, as its first change
 * would (`memwalfs region take`): "taken\n", "already\n" (this mount writes it), EROFS while
 * another live mount holds it (the log names it); MWFS_TAKE_FORCE_XATTR takes it even then,
 * fencing that mount (`region take --force`).  Release and take (and the handover and fence
 * check) answer EPERM to anyone but root and the user who mounted.
 */
#define MWFS_TAKE_XATTR "user.memwalfs.take"
#define MWFS_TAKE_FORCE_XATTR "user.memwalfs.take-force"
/*
 * setxattr of MWFS_REGION_CREATE_XATTR on a directory D, whose value is the path of the new
 * region's root from the mount's root ("/a/b/NAME", NAME a new name in D): makes NAME a new
 * directory that is the root of a new region, written by this mount (`memwalfs region
 * create`; docs/REGIONS.md "Creating a region").  EROFS if this mount does not write D's
 * region, EEXIST if NAME exists, EPERM unless the caller is root or owns D (the kernel
 * checked that it may write D).
 */
#define MWFS_REGION_CREATE_XATTR "user.memwalfs.region-create"
#define MWFS_HANDOVER_XATTR "user.memwalfs.handover"
#define MWFS_FENCE_XATTR "user.memwalfs.fence-check"
#define MWFS_HANDOVER_MS 120000u

#endif /* MEMWALFS_FS_H */
