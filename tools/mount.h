/*
 * mount.h - the parts of "memwalfs mount" (tools/mount.c has the design in
 * its file comment), shared by its files:
 *
 *   mount.c       the daemon: fork, open, serve, close; cmd_mount()
 *   mountopt.c    usage, the command line and the -o option lists
 *   mountcheck.c  the checks made before anything changes
 *   remount.c     -o remount: change the flags of a live mount
 *   takeover.c    --takeover: the handover and the fence of the old mount
 *
 * Every function here runs in the one thread of the mount command (before
 * the fork, or in the daemon before its FUSE session starts), except where
 * it says otherwise.
 */
#ifndef MEMWALFS_TOOLS_MOUNT_H
#define MEMWALFS_TOOLS_MOUNT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "engine.h"
#include "fs.h"
#include "store.h"

/* Everything the command line decides. */
struct mount_args {
	const char *store;      /* STORE argument */
	const char *mountpoint; /* MOUNTPOINT argument */
	bool foreground;        /* -f */
	bool debug;             /* -d: FUSE debug output (implies -f) */
	bool format;            /* --format: format a non-empty STORE that holds no memwalfs */
	bool stack;             /* --stack: mount on top of a live memwalfs mount point */
	bool takeover;          /* --takeover: fence a live writer mount of STORE on this machine */
	bool nonempty;          /* -o nonempty: no warning for a non-empty mount point */
	const char *metrics_addr; /* --metrics-addr / -o metrics_addr=: serve Prometheus metrics */
	int metrics_fd;           /* its listening socket (bound before the fork), or -1 */
	struct metrics *metrics;  /* the daemon's endpoint (serve()), or NULL */
	bool local;               /* STORE is a local directory (not s3://) */
	char mnt[PATH_MAX];       /* real path of MOUNTPOINT (checked before the fork) */
	char abs_store[PATH_MAX]; /* STORE made absolute, for a local store */
	struct s3_opts s3;        /* store options */
	struct engine_opts eo;    /* engine options */
	struct mwfs_opts fo;      /* filesystem options */
	char fuse_opts[4096];     /* -o list passed to FUSE */
	const char *pidfile;      /* --pidfile: write the serving process id here */
	char *o_copies[32];       /* -o lists (settings point into them); freed at exit */
	int n_copies;
	bool remount;    /* -o remount: change a live mount (remount()) */
	char *raw_o[32]; /* the -o lists as given, for remount() (in o_copies) */
	int n_raw;
	const char *setting; /* the first memwalfs setting in an -o list, or NULL */
	char late[64];     /* nodiratime, strictatime: set by remount() once mounted (parse_o()) */
	int follow_ms;     /* -o follow_interval=: a read-only mount follows (-1: default) */
	unsigned lease_ms; /* --lease / -o lease=: the mount's lease (0: the default, 30 s) */
	int bell_ms;       /* --bell-interval / -o bell_interval= (-1: default; 0: no bell mode) */
	const char *snapshot;  /* --snapshot NAME: mount that snapshot read-only */
	const char *cache_dir; /* --cache-dir / -o cache_dir=: the disk cache (NULL: default) */
	uint64_t disk_cache;   /* --disk-cache-size / -o disk_cache_size= (UINT64_MAX: default) */
	bool cache_set;        /* --cache-size / -o cache= given */
	bool dumpable;         /* --dumpable / -o dumpable: the daemon may dump core */
	char cache_dir_buf[PATH_MAX]; /* the default cache directory */
};

/* ---- mountopt.c ---------------------------------------------------------- */

/*
 * Parse the command line (argv[1..argc-1]: options, -o lists, STORE and
 * MOUNTPOINT) into a, which cmd_mount() set to the defaults.  Strings in a
 * point into argv or into the -o copies in a->o_copies (freed by
 * cmd_mount()).  -h/--help prints the usage and exits 0.  0, or -1 with the
 * reason printed on stderr (a usage error: exit status 2).
 */
int mount_parse_args(struct mount_args *a, int argc, char **argv);

/*
 * Append opt to the -o list passed to FUSE (a->fuse_opts).  0, or -1 when
 * the list is full (printed).
 */
int mount_add_fuse_opt(struct mount_args *a, const char *opt);

/* ---- remount.c ------------------------------------------------------------ */

/*
 * -o remount: change the flags (ro/rw, nosuid, noatime, ...) of the live
 * memwalfs mount at a->mnt with mount(2) MS_REMOUNT; a->raw_o holds the -o
 * lists as given.  Settings that need a new mount are refused, and so is rw
 * for a daemon started read-only.  Returns the exit status (0, 1 refused or
 * failed, 2 bad option), printing why.
 */
int mount_remount(struct mount_args *a);

/* ---- mountcheck.c: before anything changes ------------------------------ */

/*
 * The mount point must be a directory that is not a dead FUSE mount, and
 * not a live memwalfs mount unless --stack.  Fills a->mnt.  0 or -1
 * (printed).
 */
int mount_check_mountpoint(struct mount_args *a);

/*
 * A local STORE: made absolute into a->abs_store (the daemon changes to
 * "/"), and a directory if it exists.  A read-only mount never creates it.
 * 0 or -1 (printed).
 */
int mount_check_local_store(struct mount_args *a);

/*
 * Complete the FUSE command line (a->fuse_opts: default_permissions,
 * fsname) and check it by a dry parse in libfuse.  0 or -1 (printed).
 */
int mount_check_fuse_opts(struct mount_args *a);

/* --pidfile FILE: its directory must exist and be writable.  0 or -1 (printed). */
int mount_check_pidfile(struct mount_args *a);

/*
 * Refuse the open store st when it is not empty and holds no memwalfs
 * engine, unless --format.  In the daemon, before engine_open().  0, or -1
 * (printed).
 */
int mount_check_store_kind(struct mount_args *a, struct store *st);

/*
 * Before a writer open claims an epoch: open the engine on st read-only and
 * read the filesystem's superblock, so that a newer format version, a
 * damaged object or a store that lost objects is refused with the store
 * untouched.  In the daemon.  0 or -1 (printed).
 */
int mount_check_formats(struct mount_args *a, struct store *st);

/* ---- takeover.c ----------------------------------------------------------- */

/*
 * --takeover, before the engine claims the store: ask the old mount (old,
 * from mwd_lock()) to sync, take no more changes and commit what it took.
 * Waits up to 30 s; what went wrong is printed, never returned.
 */
void mount_takeover_sync(const struct mwd_holder *old);

/*
 * --takeover, once the engine claimed the store (claimed) or failed to:
 * tell the old mount, which then checks its epoch (fenced: every change
 * fails with EIO) or takes changes again.  Waits up to 10 s; prints what
 * happened.
 */
void mount_takeover_tell(const struct mwd_holder *old, bool claimed);

/* ---- mount.c ---------------------------------------------------------------- */

/*
 * engine_opts.progress of the replay at open (arg: the struct metrics, may
 * be NULL): to the metrics, and one line per percent on a terminal.
 */
void mount_progress(void *arg, const char *phase, uint64_t done, uint64_t total);

#endif
