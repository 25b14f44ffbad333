/*
 * mount.c - "memwalfs mount" and "memwalfs stats": mount a store (a local
 * directory or s3://bucket/prefix) as a FUSE filesystem, and print the
 * statistics of a mounted one.
 *
 *   memwalfs mount [options] STORE MOUNTPOINT
 *
 * Background by default: the process forks first (before any thread
 * exists), the child opens the store and the engine, mounts, and only then
 * tells the waiting parent that the mount succeeded; errors are printed on
 * the terminal and become the parent's exit status.  SIGTERM, SIGINT,
 * "umount" and "fusermount3 -u" end the session; the child then writes out
 * every buffer, commits (engine_close) and exits 0.  "memwalfs umount"
 * (tools/umount.c) waits for that and reports the final status; a writer
 * daemon holds a per-store lock until engine_close() has returned, so that
 * a new mount of the store waits for it instead of fencing it, and a second
 * writer mount of a live one is refused.  --takeover fences the live one on
 * purpose, in three steps that lose nothing it acknowledged: it hands over
 * (commits what it took and takes nothing more), the new mount claims the
 * store, the old one is told and stays fenced (takeover_sync(),
 * takeover_tell()).
 *
 * The mount helper (tools/mount.fuse.memwalfs, installed as
 * /sbin/mount.fuse.memwalfs) turns "mount -t fuse.memwalfs STORE DIR -o
 * opts" and fstab lines into this command; memwalfs' own settings may then
 * come as -o options (endpoint=, region=, cadence=, cache=, memtable=,
 * chunk=, single_writer, format, stack, takeover).
 *
 * Bad input changes nothing.  Everything that can be checked without the
 * store is checked before the fork: every option (the FUSE ones by a dry
 * parse in libfuse, mwfs_check_fuse_args()), the mount point (a directory,
 * not a dead FUSE mount, not already a live memwalfs mount unless --stack)
 * and a local store path (a directory if it exists).  Then the store is
 * opened and, before anything is written to it: a store that is neither
 * empty nor a memwalfs store is refused unless --format; and a writer mount
 * first opens the engine read-only and reads the superblock, so that a
 * store of a newer format version (manifest, WAL, SSTable or filesystem) or
 * a damaged one is refused before the writer open claims an epoch.
 *
 * Divisions, in order: usage and option parsing; remount; checks before
 * anything changes; the daemon (fork, open, serve, close); the entry points
 * (cmd_mount; cmd_stats is in stats.c).  Elsewhere: the per-store lock, the status files
 * and the allocator policy (tools/daemon.c), the metrics endpoint
 * (tools/metrics.c), the store options shared with the other commands
 * (tools/storeopt.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <xxhash.h>

#include "commands.h"
#include "engine.h"
#include "fs.h"
#include "log.h"
#include "store.h"
#include "storeopt.h"
#include "daemon.h"
#include "metrics.h"

/* How long a mount waits for a closing daemon of the same store (seconds). */
#define MOUNT_LOCK_WAIT_SEC 30

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
	char late[64]; /* nodiratime, strictatime: set by remount() once mounted (parse_o()) */
	int follow_ms; /* -o follow_interval=: a read-only mount follows (-1: default) */
	const char *snapshot;  /* --snapshot NAME: mount that snapshot read-only */
	const char *cache_dir; /* --cache-dir / -o cache_dir=: the disk cache (NULL: default) */
	uint64_t disk_cache;   /* --disk-cache-size / -o disk_cache_size= (UINT64_MAX: default) */
	bool cache_set;        /* --cache-size / -o cache= given */
	bool dumpable;         /* --dumpable / -o dumpable: the daemon may dump core */
	char cache_dir_buf[PATH_MAX]; /* the default cache directory */
};

/* ---- usage and command-line / -o option parsing ------------------------- */

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: memwalfs mount [options] STORE MOUNTPOINT\n\n"
	    "Mount STORE (a local directory, created on first use, or s3://bucket/prefix)\n"
	    "at MOUNTPOINT, a directory.  The first mount of an empty store formats it; a\n"
	    "store that holds other things is refused (see --format), and so are a store\n"
	    "of a newer format version, a STORE mounted read-write on this machine (see\n"
	    "--takeover and -o ro) and a MOUNTPOINT that is a live memwalfs mount\n"
	    "(see --stack).  Refused input changes nothing: not the store, not the mounts.\n\n"
	    "options:\n"
	    "  -f, --foreground       stay in the foreground (default: background once mounted)\n"
	    "  -d, --debug            FUSE debug output (implies -f)\n"
	    "  -o OPT[,OPT...]        mount options: ro, allow_other, default_permissions (always\n"
	    "                         on: the kernel checks permissions; no_default_permissions\n"
	    "                         is refused), noatime,\n"
	    "                         ...; memwalfs settings as endpoint=, region=, cadence=,\n"
	    "                         cache=, cache_dir=, disk_cache_size=, memtable=, chunk=,\n"
	    "                         readahead=, readahead_threads=, kernel_readahead=,\n"
	    "                         fsync_timeout=, follow_page_cache,\n"
	    "                         capacity=, metrics_addr=, profile=, sts_endpoint=,\n"
	    "                         single_writer, format, stack, takeover, nonempty (no\n"
	    "                         warning for a mount point that holds files) (for fstab); "
	    "remount\n"
	    "                         (with MOUNTPOINT alone): change ro/rw and the mount flags\n"
	    "                         (no)suid, (no)dev, (no)exec, atime options of a live mount\n"
	    "  --cadence MS           group-commit interval (default 100)\n"
	    "  --commit-inflight N    commit groups in flight at once: up to 4 WAL entries,\n"
	    "                         up to N pack PUTs (1-16, default 8); -o commit_inflight=\n"
	    "  --follow-interval MS   a read-only (ro) mount follows the writer, polling the\n"
	    "                         store this often (default 1000; backs off to 4x when\n"
	    "                         idle; 0: keep the state of the mount); -o follow_interval=\n"
	    "  --follow-page-cache    a following mount reads files through the kernel's page\n"
	    "                         cache: faster small reads and shared mmap, but a read\n"
	    "                         racing the writer's change can be cut or zero-padded to\n"
	    "                         the old size (default: direct I/O, every read() up to\n"
	    "                         1 MiB is one state of the writer); -o follow_page_cache\n"
	    "  --snapshot NAME        mount snapshot NAME (memwalfs snapshot create), read-only\n"
	    "  --gc-grace SEC         keep objects nothing references this long for followers\n"
	    "                         and readers (default 600); -o gc_grace=\n"
	    "  --gc-interval MS       a GC pass this often (default 60000); -o gc_interval=\n"
	    "  --repack-rate KIB      repack rewrites at most this many KiB per second of the\n"
	    "                         GC interval (default 8192; 0: no limit); -o repack_rate=\n"
	    "  --fsync-timeout SEC    while the store is unreachable, fsync waits this long,\n"
	    "                         then fails with EIO (default 0: wait until it is back,\n"
	    "                         like a hard NFS mount); the data still commits later\n"
	    "  --cache-size BYTES     blob and block cache in memory (default: S3 stores a\n"
	    "                         sixteenth of the memory (RAM or cgroup limit), 256M to\n"
	    "                         2G; local stores 256M)\n"
	    "  --cache-dir DIR        the disk cache under the memory cache (S3 stores: on by\n"
	    "                         default in /var/cache/memwalfs/<store hash>, or\n"
	    "                         ~/.cache/memwalfs/ when not root; local\n"
	    "                         stores: only with this option); -o cache_dir=;\n"
	    "                         it and the directories above it must be yours (or\n"
	    "                         root's) and writable by nobody else (sticky: fine)\n"
	    "  --disk-cache-size BYTES  its size bound (default: half the free space of its\n"
	    "                         filesystem, at most 10G; 0: no disk cache);\n"
	    "                         -o disk_cache_size=\n"
	    "  --memtable-size BYTES  MemTable size before a flush (default 64M)\n"
	    "  --chunk-size BYTES     data chunk size when formatting (default 1M)\n"
	    "  --threads N            FUSE worker threads (default 64)\n"
	    "  --capacity BYTES       the size statfs (df) reports, e.g. 500G or 2T; free is\n"
	    "                         that less the live data (default: S3 1P; a local store\n"
	    "                         reports its filesystem's size and free space, as df of\n"
	    "                         it); fallocate beyond the free space fails with ENOSPC\n"
	    "  --readahead BYTES      prefetch this far ahead of sequential readers\n"
	    "                         (grows while reads stay sequential, up to this; default\n"
	    "                         16M; 0 turns read-ahead off)\n"
	    "  --readahead-threads N  threads doing that, each with one ranged GET of a chunk in\n"
	    "                         flight (1-64; default 8)\n"
	    "  --kernel-readahead BYTES  the kernel's read-ahead of the mount (its bdi's\n"
	    "                         read_ahead_kb; needs root; 4K-64M, default 1M; 0\n"
	    "                         keeps the kernel's 128K): larger FUSE reads, fewer requests\n"
	    "  --no-writeback-cache   do not use the kernel writeback cache\n"
	    "  --single-writer        accept a store without conditional create\n"
	    "  --format               format STORE even though it is not empty and holds no\n"
	    "                         memwalfs filesystem (a memwalfs store is never reformatted)\n"
	    "  --stack                mount even if MOUNTPOINT is a live memwalfs mount (the new\n"
	    "                         mount hides it)\n"
	    "  --takeover             fence the writer mount of STORE that is live on this\n"
	    "                         machine (without it such a mount is refused): that mount\n"
	    "                         commits what it took and takes no more (EIO), then learns\n"
	    "                         that it was fenced; -o takeover\n"
	    "  --pidfile FILE         write the id of the serving process to FILE\n"
	    "  --dumpable             let the daemon dump core and be traced by its user, for\n"
	    "                         debugging (default: not dumpable, because its memory\n"
	    "                         holds the S3 secret); -o dumpable\n"
	    "  --metrics-addr HOST:PORT  serve Prometheus metrics at http://HOST:PORT/metrics\n"
	    "                         (e.g. 127.0.0.1:9108; docs/METRICS.md)\n"
	    "  -v, --verbose          log more (-vv or -v -v: debug)\n\n");
	storeopt_usage(f);
	fprintf(f, "\nAn S3 endpoint that does not answer at all (connection refused, unknown\n"
	           "host) fails the mount at once; once mounted, requests are retried patiently\n"
	           "and commits that fail are sent again until the store takes them: an outage\n"
	           "holds writers (fsync waits; see --fsync-timeout), a full local disk gives\n"
	           "ENOSPC, and the mount carries on by itself afterwards (memwalfs stats shows\n"
	           "outage_since while it lasts).\n"
	           "Exit status: 0 mounted; 1 refused or failed (the message says why); 2 a bad\n"
	           "option or argument.\n"
	           "\nUnmount with: memwalfs umount MOUNTPOINT (waits for the final commit and\n"
	           "reports its status), or fusermount3 -u / umount / SIGTERM (return at once;\n"
	           "a new mount of the same store then waits for the closing daemon).\n");
}

/* "64M", "1G", "4096" -> bytes; false on a bad number. */
static bool parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	case 't':
	case 'T':
		v <<= 40;
		end++;
		break;
	case 'p':
	case 'P':
		v <<= 50;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end == 'B')
		end++;
	if (*end)
		return false;
	*out = (size_t)v;
	return true;
}

static int add_fuse_opt(struct mount_args *a, const char *opt)
{
	size_t n = strlen(a->fuse_opts);
	int w = snprintf(a->fuse_opts + n, sizeof(a->fuse_opts) - n, "%s%s", n ? "," : "", opt);
	if (w < 0 || (size_t)w >= sizeof(a->fuse_opts) - n) {
		fprintf(stderr, "memwalfs: too many -o options\n");
		return -1;
	}
	return 0;
}

/* A memwalfs setting given as a command-line option or as -o key=value. */
static int set_option(struct mount_args *a, const char *name, const char *val)
{
	size_t sz;
	if (!strcmp(name, "follow_interval")) {
		if (!val || !parse_size(val, &sz) || sz > 600000)
			goto bad;
		a->follow_ms = (int)sz;
	} else if (!strcmp(name, "snapshot")) {
		if (!val || !*val)
			goto bad;
		a->snapshot = val;
	} else if (!strcmp(name, "gc_grace")) {
		if (!val || !parse_size(val, &sz) || sz > 86400 * 30)
			goto bad;
		a->eo.gc_grace_sec = sz ? (unsigned)sz : ENGINE_GC_NO_GRACE;
	} else if (!strcmp(name, "gc_interval")) {
		if (!val || !parse_size(val, &sz) || sz < 10 || sz > 86400000)
			goto bad;
		a->eo.gc_interval_ms = (unsigned)sz;
	} else if (!strcmp(name, "repack_rate")) {
		if (!val || !parse_size(val, &sz) || sz >= ENGINE_GC_OFF)
			goto bad;
		a->eo.repack_kib_per_sec = sz ? (unsigned)sz : ENGINE_GC_OFF;
	} else if (!strcmp(name, "cadence")) {
		if (!val || !parse_size(val, &sz) || sz == 0 || sz > 60000)
			goto bad;
		a->eo.cadence_ms = (unsigned)sz;
		a->fo.wb_flush_ms = (unsigned)sz;
	} else if (!strcmp(name, "commit_inflight")) {
		if (!val || !parse_size(val, &sz) || sz < 1 || sz > 16)
			goto bad;
		a->eo.commit_inflight = (unsigned)sz;
	} else if (!strcmp(name, "fsync_timeout")) {
		if (!val || !parse_size(val, &sz) || sz > 86400)
			goto bad;
		a->eo.sync_timeout_ms = (unsigned)sz * 1000u;
	} else if (!strcmp(name, "cache")) {
		if (!val || !parse_size(val, &sz))
			goto bad;
		a->eo.cache_bytes = sz;
		a->cache_set = true;
	} else if (!strcmp(name, "cache_dir")) {
		if (!val || !*val)
			goto bad;
		a->cache_dir = val;
	} else if (!strcmp(name, "disk_cache_size")) {
		if (!val || !parse_size(val, &sz))
			goto bad;
		a->disk_cache = sz;
	} else if (!strcmp(name, "memtable")) {
		if (!val || !parse_size(val, &sz) || sz < (128u << 10))
			goto bad;
		a->eo.memtable_max_bytes = sz;
	} else if (!strcmp(name, "chunk")) {
		if (!val || !parse_size(val, &sz) || sz < 4096 || sz > (64u << 20) ||
		    (sz & (sz - 1)))
			goto bad;
		a->fo.chunk_size = (uint32_t)sz;
	} else if (!strcmp(name, "threads")) {
		if (!val || !parse_size(val, &sz) || sz < 1 || sz > 256)
			goto bad;
		a->fo.max_threads = (unsigned)sz;
	} else if (!strcmp(name, "readahead")) {
		if (!val || !parse_size(val, &sz))
			goto bad;
		a->fo.readahead_bytes = sz;
	} else if (!strcmp(name, "kernel_readahead")) {
		if (!val || !parse_size(val, &sz) || sz > (64u << 20) || (sz && sz < 4096))
			goto bad; /* 0, or 4K-64M (read_ahead_kb takes KiB; under 4K would be 0:
			             off) */
		a->fo.kernel_readahead = sz;
	} else if (!strcmp(name, "readahead_threads")) {
		if (!val || !parse_size(val, &sz) || sz < 1 || sz > 64)
			goto bad;
		a->fo.readahead_threads = (unsigned)sz;
	} else if (!strcmp(name, "capacity")) {
		if (!val || !parse_size(val, &sz) || sz < (1u << 20))
			goto bad;
		a->fo.capacity = sz;
	} else if (!strcmp(name, "endpoint")) {
		if (!val)
			goto bad;
		a->s3.endpoint = val;
		a->s3.path_style = true;
	} else if (!strcmp(name, "metrics_addr")) {
		if (!val || !*val)
			goto bad;
		a->metrics_addr = val;
	} else if (!strcmp(name, "region")) {
		if (!val)
			goto bad;
		a->s3.region = val;
	} else if (!strcmp(name, "profile")) { /* fstab lines: the AWS profile (issue 18) */
		if (!val || !*val)
			goto bad;
		a->s3.profile = val;
	} else if (!strcmp(name, "sts_endpoint")) {
		if (!val || !*val)
			goto bad;
		a->s3.sts_url = val;
	} else if (!strcmp(name, "single_writer")) {
		a->eo.single_writer_ok = true;
	} else if (!strcmp(name, "no_writeback_cache")) {
		a->fo.writeback = false;
	} else if (!strcmp(name, "follow_page_cache") && !val) {
		a->fo.follow_page_cache = true;
	} else if (!strcmp(name, "format") && !val) {
		a->format = true;
	} else if (!strcmp(name, "stack") && !val) {
		a->stack = true;
	} else if (!strcmp(name, "takeover") && !val) {
		a->takeover = true;
	} else if (!strcmp(name, "dumpable") && !val) {
		a->dumpable = true;
	} else {
		return 0;
	}
	return 1;
bad:
	fprintf(stderr, "memwalfs: bad value for %s: %s\n", name, val ? val : "(none)");
	return -1;
}

/*
 * Split a -o list: memwalfs settings, options fstab adds, FUSE options.
 *
 * The standard mount options: ro, rw, dev, nodev, suid, nosuid, exec,
 * noexec, noatime (and sync, async, dirsync) go to the kernel mount through
 * libfuse, which starts from nosuid,nodev (mount.fuse.memwalfs adds
 * dev,suid for mount(8), see there); nodiratime and strictatime, which
 * libfuse does not know, are set by a remount() once mounted (in the
 * background mode; -f says they were not applied).  relatime is the
 * kernel's default: accepted, nothing to pass.  Whatever the atime option,
 * memwalfs stores an atime only when one is set explicitly (utimensat),
 * never because of a read: FUSE sends no atime updates.  Accepted and
 * ignored, because only fstab, mount(8) and systemd read them: defaults,
 * auto, noauto, user, users, nouser, _netdev, nofail, x-*, comment=.
 */
static int parse_o(struct mount_args *a, char *list)
{
	static const char *const dropped[] = {"defaults", "auto",    "noauto",   "user",
	                                      "users",    "nouser",  "_netdev",  "nofail",
	                                      "rw",       "remount", "relatime", NULL};
	for (char *save = NULL, *opt = strtok_r(list, ",", &save); opt;
	     opt = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(opt, '=');
		bool drop = !strncmp(opt, "x-", 2) || !strncmp(opt, "comment=", 8);
		if (!strcmp(opt, "remount"))
			a->remount = true;
		if (!strcmp(opt, "strictatime") || !strcmp(opt, "nodiratime")) {
			size_t n = strlen(a->late);
			snprintf(a->late + n, sizeof(a->late) - n, "%s%s", n ? "," : "", opt);
			continue;
		}
		for (int i = 0; dropped[i]; i++)
			drop = drop || !strcmp(opt, dropped[i]);
		if (drop)
			continue;
		if (!strcmp(opt, "nonempty")) { /* fuse2's option; fuse3 mounts there anyway */
			a->nonempty = true;
			continue;
		}
		if (!strcmp(opt, "no_default_permissions")) {
			/* memwalfs checks no permission itself: the kernel's check is the only one
			 */
			fprintf(stderr,
			        "memwalfs: no_default_permissions is refused: memwalfs makes no "
			        "permission checks of its own, the kernel makes them "
			        "(default_permissions, always on); without them every user of "
			        "an allow_other mount could read, change and chown every file. "
			        "Remove the option\n");
			return -1;
		}
		if (!strcmp(opt, "default_permissions"))
			continue; /* added below */
		if (!strcmp(opt, "ro")) {
			a->eo.read_only = true;
			a->fo.read_only = true;
		}
		if (eq)
			*eq = 0;
		int r = set_option(a, opt, eq ? eq + 1 : NULL);
		if (eq && r == 0)
			*eq = '=';
		if (r < 0)
			return -1;
		if (r > 0 && !a->setting)
			a->setting = opt;
		if (r == 0 && add_fuse_opt(a, opt))
			return -1;
	}
	return 0;
}

static int parse_args(struct mount_args *a, int argc, char **argv)
{
	const char *pos[2];
	int npos = 0;
	static const char *const long_set[][2] = {
	    {"--cadence", "cadence"},
	    {"--commit-inflight", "commit_inflight"},
	    {"--follow-interval", "follow_interval"},
	    {"--snapshot", "snapshot"},
	    {"--gc-grace", "gc_grace"},
	    {"--gc-interval", "gc_interval"},
	    {"--repack-rate", "repack_rate"},
	    {"--cache-size", "cache"},
	    {"--cache-dir", "cache_dir"},
	    {"--disk-cache-size", "disk_cache_size"},
	    {"--memtable-size", "memtable"},
	    {"--chunk-size", "chunk"},
	    {"--threads", "threads"},
	    {"--readahead-threads", "readahead_threads"},
	    {"--kernel-readahead", "kernel_readahead"},
	    {"--readahead", "readahead"},
	    {"--fsync-timeout", "fsync_timeout"},
	    {"--capacity", "capacity"},
	    {"--metrics-addr", "metrics_addr"},
	};
	int verbose = 0;
	for (int i = 1; i < argc;) {
		const char *s = argv[i];
		int r = storeopt_parse(&a->s3, argc, argv, &i);
		if (r < 0)
			return -1;
		if (r > 0)
			continue;
		bool done = false;
		for (size_t k = 0; k < sizeof(long_set) / sizeof(long_set[0]) && !done; k++) {
			size_t n = strlen(long_set[k][0]);
			if (strncmp(s, long_set[k][0], n) || (s[n] && s[n] != '='))
				continue;
			const char *v = s[n] == '=' ? s + n + 1 : (i + 1 < argc ? argv[++i] : NULL);
			if (set_option(a, long_set[k][1], v) < 0)
				return -1;
			i++;
			done = true;
		}
		if (done)
			continue;
		if (!strcmp(s, "-h") || !strcmp(s, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(s, "-f") || !strcmp(s, "--foreground")) {
			a->foreground = true;
		} else if (!strcmp(s, "-d") || !strcmp(s, "--debug")) {
			a->debug = a->foreground = true;
		} else if (!strcmp(s, "--verbose")) {
			verbose++;
		} else if (s[0] == '-' && s[1] == 'v' && strspn(s + 1, "v") == strlen(s + 1)) {
			verbose += (int)strlen(s + 1); /* -v, -vv */
		} else if (!strcmp(s, "--pidfile")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "memwalfs: --pidfile needs a value\n");
				return -1;
			}
			a->pidfile = argv[++i];
		} else if (!strcmp(s, "--single-writer")) {
			a->eo.single_writer_ok = true;
		} else if (!strcmp(s, "--no-writeback-cache")) {
			a->fo.writeback = false;
		} else if (!strcmp(s, "--follow-page-cache")) {
			a->fo.follow_page_cache = true;
		} else if (!strcmp(s, "--format")) {
			a->format = true;
		} else if (!strcmp(s, "--stack")) {
			a->stack = true;
		} else if (!strcmp(s, "--takeover")) {
			a->takeover = true;
		} else if (!strcmp(s, "--dumpable")) {
			a->dumpable = true;
		} else if (!strcmp(s, "-o") || !strncmp(s, "-o", 2)) {
			const char *v = s[2] ? s + 2 : (i + 1 < argc ? argv[++i] : NULL);
			if (!v) {
				fprintf(stderr, "memwalfs: -o needs a value\n");
				return -1;
			}
			char *copy = strdup(v); /* strings point into it: kept until exit */
			char *raw = strdup(v);  /* as given, for remount() */
			if (!copy || !raw || a->n_copies >= 31) {
				free(copy);
				free(raw);
				fprintf(stderr, "memwalfs: too many -o options\n");
				return -1;
			}
			a->o_copies[a->n_copies++] = copy;
			a->o_copies[a->n_copies++] = raw;
			a->raw_o[a->n_raw++] = raw;
			if (parse_o(a, copy))
				return -1;
		} else if (!strcmp(s, "-s") || !strcmp(s, "-n")) {
			/* from mount(8): single-threaded / no mtab: ignored */
		} else if (s[0] == '-' && s[1]) {
			fprintf(
			    stderr,
			    "memwalfs mount: unknown option %s (memwalfs mount --help lists the "
			    "options)\n",
			    s);
			return -1;
		} else if (npos < 2) {
			pos[npos++] = s;
		} else {
			fprintf(stderr, "memwalfs mount: too many arguments\n");
			return -1;
		}
		i++;
	}
	if (npos == 1 && a->remount) /* remount needs only the mount point */
		pos[npos++] = pos[0];
	if (npos != 2) {
		fprintf(stderr, "usage: memwalfs mount [options] STORE MOUNTPOINT (memwalfs mount "
		                "--help explains them)\n");
		return -1;
	}
	if (verbose)
		mw_log_set_level(verbose > 1 ? MW_LOG_DEBUG : MW_LOG_INFO);
	a->store = pos[0];
	a->mountpoint = pos[1];
	/* a snapshot is mounted read-only; a read-only mount follows unless told not to */
	if (a->snapshot) {
		a->eo.snapshot = a->snapshot;
		if (!a->eo.read_only && add_fuse_opt(a, "ro"))
			return -1;
		a->eo.read_only = a->fo.read_only = true;
	} else if (a->eo.read_only && a->follow_ms != 0) {
		a->eo.follow = true;
		a->eo.follow_interval_ms = a->follow_ms > 0 ? (unsigned)a->follow_ms : 0;
	}
	return 0;
}

/* ---- remount ------------------------------------------------------------ */

/*
 * Is the daemon of mount point mnt a read-only one (started with -o ro)?
 * Its pid comes from MWFS_DAEMON_XATTR, its options from /proc/PID/cmdline.
 * 1 yes, 0 no, -1 not a memwalfs mount (printed).
 */
static int daemon_read_only(const char *mnt)
{
	char info[PATH_MAX + 32], path[64], buf[16384];
	ssize_t n = getxattr(mnt, MWFS_DAEMON_XATTR, info, sizeof(info) - 1);
	if (n <= 0) {
		fprintf(stderr, "memwalfs: %s: not a memwalfs mount point (%s)\n", mnt,
		        n < 0 ? strerror(errno) : "no daemon information");
		return -1;
	}
	info[n] = 0;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", strtol(info, NULL, 10));
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0; /* unknown: the kernel remount goes ahead, writes then say EROFS */
	buf[n] = 0;
	bool after_o = false;
	for (char *arg = buf; arg < buf + n; arg += strlen(arg) + 1) {
		char *list = after_o ? arg : !strncmp(arg, "-o", 2) && arg[2] ? arg + 2 : NULL;
		after_o = !strcmp(arg, "-o");
		for (char *save = NULL, *t = list ? strtok_r(list, ",", &save) : NULL; t;
		     t = strtok_r(NULL, ",", &save))
			if (!strcmp(t, "ro"))
				return 1;
	}
	return 0;
}

/* Is opt one of the super options of the mount at mnt (/proc/self/mountinfo)? */
static bool super_has(const char *mnt, const char *opt)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[8192];
	bool found = false;
	while (f && fgets(line, sizeof(line), f)) {
		char point[PATH_MAX];
		char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    strcmp(point, mnt))
			continue;
		found = false; /* the last (topmost) mount at mnt counts */
		char *sup = strrchr(sep, ' ');
		for (char *save = NULL, *t = sup ? strtok_r(sup + 1, ",\n", &save) : NULL; t;
		     t = strtok_r(NULL, ",\n", &save))
			found = found || !strcmp(t, opt);
	}
	if (f)
		fclose(f);
	return found;
}

/*
 * -o remount: change the mount at a->mnt in place.  What a FUSE remount can
 * change is the kernel's side: ro/rw of the superblock (the kernel writes
 * back its dirty pages first and then refuses every write with EROFS; the
 * daemon stays the store's writer, so rw comes back at once and no other
 * writer can take the store meanwhile) and the per-mount flags nosuid,
 * nodev, noexec, sync, dirsync, noatime, nodiratime, relatime,
 * strictatime.  A daemon started with ro opened the store read-only: rw is
 * refused.  memwalfs settings (cadence= ...) and FUSE options not already
 * in force (allow_other, ...) need an unmount and a mount: refused.
 * Options not named keep their state (as with mount(8)).  Returns the exit
 * status (0, 1 refused or failed, 2 bad option), printing why.
 */
static int remount(struct mount_args *a)
{
	static const struct {
		const char *name;
		unsigned long set, clear;
	} flags[] = {
	    {"ro", MS_RDONLY, 0},
	    {"rw", 0, MS_RDONLY},
	    {"nosuid", MS_NOSUID, 0},
	    {"suid", 0, MS_NOSUID},
	    {"nodev", MS_NODEV, 0},
	    {"dev", 0, MS_NODEV},
	    {"noexec", MS_NOEXEC, 0},
	    {"exec", 0, MS_NOEXEC},
	    {"sync", MS_SYNCHRONOUS, 0},
	    {"async", 0, MS_SYNCHRONOUS},
	    {"dirsync", MS_DIRSYNC, 0},
	    {"noatime", MS_NOATIME, MS_RELATIME | MS_STRICTATIME},
	    {"relatime", MS_RELATIME, MS_NOATIME | MS_STRICTATIME},
	    {"strictatime", MS_STRICTATIME, MS_NOATIME | MS_RELATIME},
	    {"nodiratime", MS_NODIRATIME, 0},
	    {"diratime", 0, MS_NODIRATIME},
	};
	static const char *const fixed[] = {"allow_other", "allow_root", "default_permissions",
	                                    "user_id=",    "group_id=",  "max_read=",
	                                    "blksize=",    "fsname=",    "subtype=",
	                                    NULL};
	if (!realpath(a->mountpoint, a->mnt)) {
		fprintf(stderr, "memwalfs: %s: %s\n", a->mountpoint, strerror(errno));
		return 1;
	}
	if (a->setting) {
		fprintf(stderr,
		        "memwalfs: remount cannot change %s (memwalfs settings take an unmount "
		        "and a mount); remount changes ro/rw and the mount flags (no)suid, "
		        "(no)dev, (no)exec, sync, dirsync, noatime, nodiratime, relatime, "
		        "strictatime\n",
		        a->setting);
		return 2;
	}
	struct statvfs sv;
	if (statvfs(a->mnt, &sv)) {
		fprintf(stderr, "memwalfs: %s: %s\n", a->mnt, strerror(errno));
		return 1;
	}
	unsigned long f = 0;
	f |= sv.f_flag & ST_RDONLY ? MS_RDONLY : 0;
	f |= sv.f_flag & ST_NOSUID ? MS_NOSUID : 0;
	f |= sv.f_flag & ST_NODEV ? MS_NODEV : 0;
	f |= sv.f_flag & ST_NOEXEC ? MS_NOEXEC : 0;
	f |= sv.f_flag & ST_SYNCHRONOUS ? MS_SYNCHRONOUS : 0;
	f |= sv.f_flag & ST_NOATIME ? MS_NOATIME : 0;
	f |= sv.f_flag & ST_NODIRATIME ? MS_NODIRATIME : 0;
	f |= sv.f_flag & ST_RELATIME ? MS_RELATIME : 0;
	if (!(f & (MS_NOATIME | MS_RELATIME)))
		f |= MS_STRICTATIME;
	for (int i = 0; i < a->n_raw; i++) {
		char list[4096];
		snprintf(list, sizeof(list), "%s", a->raw_o[i]);
		for (char *save = NULL, *t = strtok_r(list, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			bool known = !strcmp(t, "remount") || !strcmp(t, "defaults") ||
			             !strncmp(t, "x-", 2) || !strncmp(t, "comment=", 8) ||
			             !strcmp(t, "_netdev") || !strcmp(t, "noauto") ||
			             !strcmp(t, "auto") || !strcmp(t, "nofail");
			for (size_t k = 0; !known && k < sizeof(flags) / sizeof(flags[0]); k++)
				if (!strcmp(t, flags[k].name)) {
					f = (f & ~flags[k].clear) | flags[k].set;
					known = true;
				}
			for (int k = 0; !known && fixed[k]; k++) {
				size_t n = strlen(fixed[k]);
				if (strncmp(t, fixed[k], n) || (fixed[k][n - 1] != '=' && t[n]))
					continue;
				if (!super_has(a->mnt, t)) {
					fprintf(
					    stderr,
					    "memwalfs: remount cannot change the FUSE option %s "
					    "(it takes an unmount and a mount)\n",
					    t);
					return 2;
				}
				known = true;
			}
			if (!known) {
				fprintf(stderr,
				        "memwalfs: remount: unknown or unchangeable option %s; "
				        "remount changes ro/rw and the mount flags (no)suid, "
				        "(no)dev, (no)exec, sync, dirsync, noatime, nodiratime, "
				        "relatime, strictatime\n",
				        t);
				return 2;
			}
		}
	}
	int ro = daemon_read_only(a->mnt);
	if (ro < 0)
		return 1;
	if (ro && !(f & MS_RDONLY)) {
		fprintf(stderr,
		        "memwalfs: %s is served by a read-only daemon (mounted with ro), which "
		        "cannot become the store's writer: unmount it and mount it rw\n",
		        a->mnt);
		return 1;
	}
	if (mount(NULL, a->mnt, NULL, MS_REMOUNT | f, NULL)) {
		fprintf(stderr, "memwalfs: remount of %s: %s\n", a->mnt, strerror(errno));
		return 1;
	}
	return 0;
}

/* Progress of the replay at open: on a terminal, and to the metrics (arg: struct metrics). */
static void progress(void *arg, const char *phase, uint64_t done, uint64_t total)
{
	static int last_pct = -1;
	metrics_progress(arg, "replay", done, total);
	int pct = total ? (int)(done * 100 / total) : -1;
	if (total && (pct == last_pct || !isatty(2)) && done < total)
		return; /* one line per percent, on a terminal only */
	last_pct = pct;
	if (total)
		fprintf(stderr, "\rmemwalfs: %s %llu/%llu (%d%%)", phase, (unsigned long long)done,
		        (unsigned long long)total, pct);
	else
		fprintf(stderr, "\rmemwalfs: %s %llu", phase, (unsigned long long)done);
	if (total && done >= total)
		fprintf(stderr, "\n");
}

/* Tell the waiting parent how the mount went (status byte); closes the pipe. */
static void report(int *fd, unsigned char status)
{
	if (*fd < 0)
		return;
	ssize_t w;
	do
		w = write(*fd, &status, 1);
	while (w < 0 && errno == EINTR);
	close(*fd);
	*fd = -1;
}

/* ---- checks before anything changes -------------------------------------- */

/*
 * The mount point must be a directory that is not a dead FUSE mount, and not
 * a live memwalfs mount unless --stack.  Fills a->mnt.  0 or -1 (printed).
 */
static int check_mountpoint(struct mount_args *a)
{
	struct stat sb;
	struct statvfs vfs;
	char type[64], src[PATH_MAX];

	/* statvfs asks a FUSE daemon (stat may be answered from the kernel's cache) */
	if (stat(a->mountpoint, &sb) || statvfs(a->mountpoint, &vfs)) {
		int err = errno;
		if (err == ENOTCONN)
			fprintf(
			    stderr,
			    "memwalfs: mount point %s is a dead FUSE mount (its daemon is gone): "
			    "unmount it first with memwalfs umount %s\n",
			    a->mountpoint, a->mountpoint);
		else
			fprintf(stderr, "memwalfs: mount point %s: %s\n", a->mountpoint,
			        strerror(err));
		return -1;
	}
	if (!S_ISDIR(sb.st_mode)) {
		fprintf(stderr, "memwalfs: mount point %s is not a directory\n", a->mountpoint);
		return -1;
	}
	if (!realpath(a->mountpoint, a->mnt)) {
		fprintf(stderr, "memwalfs: mount point %s: %s\n", a->mountpoint, strerror(errno));
		return -1;
	}
	if (!a->stack && mwd_top_mount(a->mnt, type, sizeof(type), src, sizeof(src)) &&
	    !strcmp(type, "fuse.memwalfs")) {
		fprintf(stderr,
		        "memwalfs: %s is already a memwalfs mount point (of %s): unmount it first, "
		        "or give --stack (-o stack) to mount on top of it\n",
		        a->mnt, src);
		return -1;
	}
	/* fuse3 mounts over a non-empty directory (fuse2 needed -o nonempty): say what hides */
	DIR *d = a->stack || a->nonempty ? NULL : opendir(a->mnt);
	struct dirent *de;
	long n = 0;
	while (d && (de = readdir(d)))
		n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	if (n)
		fprintf(
		    stderr,
		    "memwalfs: warning: mount point %s is not empty: its %ld entr%s hidden "
		    "while mounted and come%s back after the unmount (-o nonempty: no warning)\n",
		    a->mnt, n, n == 1 ? "y is" : "ies are", n == 1 ? "s" : "");
	return 0;
}

/*
 * A local STORE: made absolute (the daemon changes to "/"), and a directory
 * if it exists.  A read-only mount never creates it.  0 or -1 (printed).
 */
static int check_local_store(struct mount_args *a)
{
	struct stat sb;
	const char *path = strncmp(a->store, "file://", 7) ? a->store : a->store + 7;

	if (!stat(path, &sb)) {
		if (!S_ISDIR(sb.st_mode)) {
			fprintf(stderr, "memwalfs: store %s is not a directory\n", path);
			return -1;
		}
		if (!realpath(path, a->abs_store)) {
			fprintf(stderr, "memwalfs: store %s: %s\n", path, strerror(errno));
			return -1;
		}
	} else if (errno != ENOENT || a->eo.read_only) {
		fprintf(stderr, "memwalfs: store %s: %s%s\n", path, strerror(errno),
		        errno == ENOENT ? " (a read-only mount does not create it)" : "");
		return -1;
	} else if (path[0] == '/') {
		if (snprintf(a->abs_store, sizeof(a->abs_store), "%s", path) >=
		    (int)sizeof(a->abs_store))
			goto too_long;
	} else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof(cwd)))
			goto too_long;
		while (!strncmp(path, "./", 2))
			path += 2;
		if (snprintf(a->abs_store, sizeof(a->abs_store), "%s/%s", cwd, path) >=
		    (int)sizeof(a->abs_store))
			goto too_long;
	}
	a->store = a->abs_store;
	return 0;
too_long:
	fprintf(stderr, "memwalfs: store path %s is too long\n", path);
	return -1;
}

/*
 * The FUSE command line of the mount (a->fuse_opts completed with
 * default_permissions and fsname), checked by a dry parse in libfuse.
 * 0 or -1 (printed).
 */
static int check_fuse_opts(struct mount_args *a)
{
	char fsname[PATH_MAX + 64];
	char prog[] = "memwalfs", dash_o[] = "-o";

	snprintf(fsname, sizeof(fsname), "fsname=%s,subtype=memwalfs", a->store);
	if (add_fuse_opt(a, "default_permissions"))
		return -1;
	if (add_fuse_opt(a, fsname))
		return -1;
	/* without -d, which changes nothing here but prints the library version */
	char *fargv[] = {prog, dash_o, a->fuse_opts, NULL};
	/* libfuse prints its complaint ("fuse: unknown option(s): `-o bogus=1'"): keep it, to
	 * say it in the one line of memwalfs' errors */
	char msg[512] = "";
	FILE *t = tmpfile();
	int saved = t ? dup(2) : -1;
	fflush(stderr);
	if (saved >= 0 && dup2(fileno(t), 2) < 0) {
		close(saved);
		saved = -1;
	}
	int r = mwfs_check_fuse_args(3, fargv);
	if (saved >= 0) {
		fflush(stderr);
		dup2(saved, 2);
		close(saved);
		rewind(t);
		if (!fgets(msg, sizeof(msg), t))
			msg[0] = 0;
	}
	if (t)
		fclose(t);
	msg[strcspn(msg, "\n")] = 0;
	if (!r)
		return 0;
	const char *o = strstr(msg, "`-o ");
	const char *end = o ? strchr(o, '\'') : NULL;
	if (o && end)
		fprintf(stderr,
		        "memwalfs mount: unknown option %.*s (memwalfs mount --help lists the "
		        "options); "
		        "nothing was mounted or changed\n",
		        (int)(end - o - 4), o + 4);
	else
		fprintf(stderr,
		        "memwalfs mount: bad mount option (%s); nothing was mounted or changed\n",
		        msg[0] ? msg + (strncmp(msg, "fuse: ", 6) ? 0 : 6) : "refused by libfuse");
	return -1;
}

/* --pidfile FILE: its directory must exist and be writable (FILE is written once mounted). */
static int check_pidfile(struct mount_args *a)
{
	char dir[PATH_MAX];
	if (!a->pidfile)
		return 0;
	const char *slash = strrchr(a->pidfile, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s",
		         (int)(slash == a->pidfile ? 1 : slash - a->pidfile), a->pidfile);
	if (access(dir, W_OK | X_OK)) {
		fprintf(stderr, "memwalfs: --pidfile %s: %s: %s\n", a->pidfile, dir,
		        strerror(errno));
		return -1;
	}
	return 0;
}

/* Listing callback: note that there is a key, and stop. */
static int any_key(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	*(bool *)arg = true;
	return 1;
}

/* Does the local directory dir hold anything (lost+found of a fresh disk aside)? */
static int dir_has_entries(const char *dir, bool *any)
{
	DIR *d = opendir(dir);
	if (!d)
		return -errno;
	*any = false;
	for (struct dirent *de; !*any && (de = readdir(d));)
		*any = strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
		       strcmp(de->d_name, "lost+found");
	closedir(d);
	return 0;
}

/*
 * Refuse a store that is not empty and holds no memwalfs engine (a
 * manifest/ object exists from the first mount on, docs/MANIFEST.md),
 * unless --format.  0, or -1 (printed).
 */
static int check_store_kind(struct mount_args *a, struct store *st)
{
	bool ours = false, other = false;
	int rc = store_list(st, "manifest/", NULL, 1, any_key, &ours);
	if (rc == 0 && !ours)
		rc = a->local ? dir_has_entries(a->store, &other)
		              : store_list(st, "", NULL, 1, any_key, &other);
	if (rc < 0) {
		fprintf(stderr, "memwalfs: listing %s: %s\n", a->store, strerror(-rc));
		return -1;
	}
	if (ours || !other)
		return 0;
	/* WAL entries, packs or tables without a manifest: a memwalfs store that lost objects */
	bool remains = false;
	for (int i = 0; i < 3 && !remains; i++)
		store_list(st, (const char *[]){"wal/", "pack/", "sst/"}[i], NULL, 1, any_key,
		           &remains); /* a failed listing: the refusal below says less */
	if (remains) {
		fprintf(
		    stderr,
		    "memwalfs: refusing to mount %s: it holds memwalfs objects (WAL entries, "
		    "packs or tables) but no manifest: objects of the store were deleted; nothing "
		    "was changed.  Recover what remains with: memwalfs fsck --salvage %s (not "
		    "--format, which would bury them)\n",
		    a->store, a->store);
		return -1;
	}
	if (a->format && !a->eo.read_only) {
		fprintf(stderr,
		        "memwalfs: %s is not empty and holds no memwalfs filesystem: "
		        "formatting it anyway (--format)\n",
		        a->store);
		return 0;
	}
	fprintf(stderr,
	        "memwalfs: %s is not empty and holds no memwalfs filesystem: refusing to %s "
	        "(nothing was changed)%s\n",
	        a->store, a->eo.read_only ? "mount it" : "format it",
	        a->eo.read_only ? ""
	                        : "; give --format (-o format) to format it anyway, beside what is "
	                          "there");
	return -1;
}

/* Progress of the read-only check before a writer open: on a terminal only. */
static void progress_check(void *arg, const char *phase, uint64_t done, uint64_t total)
{
	(void)phase;
	metrics_progress(arg, "check", done, total);
	if (isatty(2))
		progress(arg, "checking the WAL (read-only)", done, total);
}

/* WAL entries a crash may leave in flight after a missing position (engine/wal.h WAL_WINDOW). */
#define MOUNT_WAL_WINDOW 4

/*
 * Before a writer open claims an epoch (which writes a manifest, a fence
 * entry and, at close, an SSTable): open the engine read-only, which reads
 * and checks the manifest, every SSTable it lists and every WAL entry to
 * replay, and read the filesystem's superblock.  A newer format version or
 * a damaged object is refused here, with the store untouched; so is a store
 * that lost objects (more entries after a WAL gap than a crash leaves, data
 * without a superblock).  0 or -1.
 */

static int check_formats(struct mount_args *a, struct store *st)
{
	struct engine_opts o = a->eo;
	struct engine *e = NULL;
	uint32_t version = 0;

	o.read_only = true;
	o.progress = progress_check;
	o.disk_cache_dir = NULL; /* the check reads tails only: no need to index the cache */
	struct engine_stats es;
	int rc = engine_open(st, &o, &e);
	if (rc) {
		fprintf(stderr, "memwalfs: refusing to mount %s: %s%s; nothing was changed\n",
		        a->store, strerror(-rc),
		        rc == -EUCLEAN ? " (an object is damaged: see above)"
		        : rc == -EPROTONOSUPPORT
		            ? " (an object has a format version newer than this memwalfs reads, "
		              "written by a newer memwalfs?: see above)"
		        : rc == -ENOENT || rc == -EIO
		            ? " (an object the filesystem needs is missing: were objects of the "
		              "store deleted?  memwalfs fsck --salvage STORE recovers what remains)"
		            : "");
		return -1;
	}
	engine_get_stats(e, &es);
	rc = mwfs_check_format(e, &version);
	engine_close(e);
	/*
	 * More entries after a missing WAL position than a crash leaves in flight (the
	 * window, docs/WAL.md), or engine data with no superblock: objects were deleted
	 * (README "When the store lost objects").  A writer would fence over them, and GC
	 * then delete them: refuse, and point at the salvage.
	 */
	if (es.replay_gap_entries > MOUNT_WAL_WINDOW ||
	    (rc == -ENOENT && (es.replay_entries || es.replay_gap_entries || es.sst_count))) {
		fprintf(stderr,
		        "memwalfs: refusing to mount %s: %s: objects of the store were deleted; "
		        "nothing was changed.  Recover what remains with: memwalfs fsck --salvage "
		        "%s\n",
		        a->store,
		        es.replay_gap_entries > MOUNT_WAL_WINDOW
		            ? "WAL entries lie after a missing position, more than a crash leaves"
		            : "it holds data but no filesystem superblock",
		        a->store);
		return -1;
	}
	if (rc == 0 || rc == -ENOENT)
		return 0; /* a filesystem this code reads, or none yet (formatted next) */
	if (rc == -EPROTONOSUPPORT)
		fprintf(stderr,
		        "memwalfs: refusing to mount %s: its filesystem has format version %u, "
		        "which this memwalfs (format %u) does not read (%s); nothing was changed\n",
		        a->store, version, mwfs_format_version(),
		        version < mwfs_format_version()
		            ? "made by an older memwalfs, which stored files as fixed-size chunks: "
		              "copy the files out with that version"
		            : "written by a newer memwalfs?");
	else
		fprintf(stderr, "memwalfs: refusing to mount %s: %s%s; nothing was changed\n",
		        a->store, strerror(-rc),
		        rc == -EUCLEAN ? " (the superblock is damaged)" : "");
	return -1;
}

/* ---- the daemon ----------------------------------------------------------- */

/*
 * The read tiers under the memory cache (docs/CACHE.md): S3 stores get a disk
 * cache (default directory: /var/cache/memwalfs/ (not root: ~/.cache/memwalfs/) and the
 * XXH3 of the store's name, endpoint included, so that two stores never share one) and coalesced
 * reads of 1 MiB regions, and a memory cache sized from the machine's memory
 * (a miss costs a GET; on a local store it costs a read the page cache may
 * serve); local stores neither, unless --cache-dir is given.
 */
static void read_tiers(struct mount_args *a)
{
	char name[PATH_MAX + 64];

	if (!a->local)
		a->eo.read_region_bytes = 1u << 20;
	if (!a->local && !a->cache_set)
		a->eo.cache_bytes = mwd_cache_default();
	if (a->disk_cache == 0 || (a->local && !a->cache_dir))
		return;
	if (!a->cache_dir) {
		if (mwd_store_name(a->store, &a->s3, name, sizeof(name)))
			return;
		/* root: /var/cache/memwalfs; others: $XDG_CACHE_HOME (~/.cache)/memwalfs */
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		char base[PATH_MAX];
		if (getuid() == 0 || (!(xdg && *xdg) && !(home && *home)))
			snprintf(base, sizeof(base), "/var/cache/memwalfs");
		else if (xdg && *xdg)
			snprintf(base, sizeof(base), "%s/memwalfs", xdg);
		else
			snprintf(base, sizeof(base), "%s/.cache/memwalfs", home);
		snprintf(a->cache_dir_buf, sizeof(a->cache_dir_buf), "%.*s/%016llx", PATH_MAX - 32,
		         base, (unsigned long long)XXH3_64bits(name, strlen(name)));
		a->cache_dir = a->cache_dir_buf;
	}
	a->eo.disk_cache_dir = a->cache_dir;
	a->eo.disk_cache_bytes = a->disk_cache == UINT64_MAX ? 0 : a->disk_cache;
}

/* How long a takeover waits for the old mount's commit, and for it to learn its fence (ms). */
#define TAKEOVER_SYNC_MS 30000u
#define TAKEOVER_TELL_MS 10000u

/*
 * --takeover, before the claim: the old mount (on this machine, where this
 * process sees it) gets the kernel's dirty pages (syncfs), stops taking
 * changes (EIO) and commits everything it took (MWFS_HANDOVER_XATTR), so
 * that nothing it acknowledged is lost.
 */
static void takeover_sync(const struct mwd_holder *old)
{
	char val[64];
	if (!old->mnt[0]) {
		fprintf(stderr,
		        "memwalfs: --takeover: daemon %ld's mount is not visible here: what it has "
		        "not committed yet is lost\n",
		        (long)old->pid);
		return;
	}
	int rc =
	    mwd_ask_mount(old->mnt, true, MWFS_HANDOVER_XATTR, val, sizeof(val), TAKEOVER_SYNC_MS);
	if (rc)
		fprintf(stderr,
		        "memwalfs: --takeover: the mount at %s did not commit what it holds (%s): "
		        "what it has not committed yet is lost\n",
		        old->mnt, rc == -ETIMEDOUT ? "no answer within 30 s" : strerror(-rc));
	else
		fprintf(stderr,
		        "memwalfs: --takeover: the mount at %s committed what it held and takes no "
		        "more changes\n",
		        old->mnt);
}

/*
 * --takeover, once the engine claimed the store (claimed), or failed to:
 * tell the old mount, which then checks the epoch and fails every change
 * with EIO for good (fs/xattr.c, MWFS_FENCE_XATTR), or, not fenced, takes
 * changes again.  Untold, it learns only at its next commit, after
 * acknowledging a write that is then lost (README.md, "One writer").
 */
static void takeover_tell(const struct mwd_holder *old, bool claimed)
{
	char val[64] = "";
	int rc = old->mnt[0] ? mwd_ask_mount(old->mnt, false, MWFS_FENCE_XATTR, val, sizeof(val),
	                                     TAKEOVER_TELL_MS)
	                     : -ENOENT;
	if (!claimed) {
		if (!rc && !strncmp(val, "current", 7))
			fprintf(
			    stderr,
			    "memwalfs: --takeover failed: the mount at %s takes changes again\n",
			    old->mnt);
		return;
	}
	if (!rc && !strncmp(val, "fenced", 6))
		fprintf(stderr,
		        "memwalfs: --takeover: the mount at %s knows it was fenced: every change "
		        "there fails with EIO from now on\n",
		        old->mnt);
	else
		fprintf(stderr,
		        "memwalfs: --takeover: the old mount%s%s was not told (%s): it learns that "
		        "it was fenced at its next commit, and the first writes made there until "
		        "then are lost\n",
		        old->mnt[0] ? " at " : "", old->mnt,
		        rc ? strerror(-rc) : "it answered that the store is still its own");
}

/*
 * Before the final commit: did the store lose objects this filesystem needs (engine/watch.c;
 * checked now, so that an unmount right after a deletion fails too)?  If so, the final status
 * "lost: WHAT" into final (umount.c reads it), and the log says what to do.
 */
static bool engine_lost(struct engine *e, char *final, size_t len)
{
	struct engine_stats es;

	engine_check_store(e);
	engine_get_stats(e, &es);
	if (!es.store_lost)
		return false;
	snprintf(final, len, "lost: %s", es.store_lost_what);
	return true;
}

static int serve(struct mount_args *a, int report_fd)
{
	struct store *st = NULL;
	struct engine *e = NULL;
	struct mwfs *fs = NULL;
	char spath[PATH_MAX] = "", info[PATH_MAX + 32], final[512] = "ok";
	int rc, status = 1, lock_fd = -1;
	bool serving = false, fenced = false;
	struct mwd_holder old = {0};

	/* a read-only mount never creates a local store directory */
	rc = storeopt_open(a->store, &a->s3, a->eo.read_only ? STORE_OPEN_EXISTING : 0, "mount",
	                   &st);
	if (rc)
		goto out;
	if (check_store_kind(a, st))
		goto out;
	if (a->metrics_fd >= 0) {
		rc = metrics_start(a->metrics_fd, st, &a->metrics);
		a->metrics_fd = -1; /* taken over */
		if (rc) {
			fprintf(stderr, "memwalfs: cannot start the metrics server: %s\n",
			        strerror(-rc));
			goto out;
		}
		a->eo.progress_arg = a->metrics;
	}
	if (!a->eo.read_only) {
		/* wait for a closing daemon of this store instead of fencing it (daemon.h) */
		char name[PATH_MAX + 64];
		rc = mwd_store_name(a->store, &a->s3, name, sizeof(name));
		if (!rc)
			rc = mwd_lock(name, a->mnt, a->store, MOUNT_LOCK_WAIT_SEC, a->takeover,
			              &old, &lock_fd);
		if (rc == -EBUSY)
			goto out; /* a live writer mount of the store: refused (printed) */
		if (rc)
			log_warn("no per-store lock (%s): a closing daemon of this store is not "
			         "waited for",
			         strerror(-rc));
		if (check_formats(a, st))
			goto out;
		if (old.pid)
			takeover_sync(&old);
	}
	mwd_status_gc();
	if (!mwd_status_path(getpid(), spath, sizeof(spath))) {
		snprintf(info, sizeof(info), "%ld %s", (long)getpid(), spath);
		a->fo.daemon_info = info;
	} else {
		spath[0] = 0;
	}
	a->eo.progress = progress;
	a->eo.progress_arg = a->metrics;
	read_tiers(a);
	rc = engine_open(st, &a->eo, &e);
	if (old.pid)
		takeover_tell(&old, rc == 0);
	struct engine_snapshot snap;
	if (rc == -ENOENT && a->snapshot &&
	    engine_snapshot_get(st, a->snapshot, &snap) == -ENOENT) {
		fprintf(
		    stderr,
		    "memwalfs: %s has no snapshot named %s (deleted?); memwalfs snapshot list %s "
		    "lists those it has\n",
		    a->store, a->snapshot, a->store);
		goto out;
	}
	if (rc) {
		fprintf(stderr, "memwalfs: cannot open the engine on %s: %s\n", a->store,
		        strerror(-rc));
		goto out;
	}
	rc = mwfs_open(e, &a->fo, &fs);
	if (rc) {
		fprintf(stderr, "memwalfs: cannot open the filesystem on %s: %s\n", a->store,
		        rc == -EPROTONOSUPPORT ? "unknown format version" : strerror(-rc));
		goto out;
	}
	char prog[] = "memwalfs", dash_o[] = "-o", dash_d[] = "-d";
	char *fargv[] = {prog, dash_o, a->fuse_opts, a->debug ? dash_d : NULL, NULL};
	int fargc = a->debug ? 4 : 3;
	rc = mwfs_mount(fs, fargc, fargv, a->mnt);
	if (rc) {
		fprintf(stderr, "memwalfs: cannot mount %s at %s\n", a->store, a->mnt);
		goto out;
	}
	if (a->fo.kernel_readahead) { /* before the loop answers INIT: see
		                         mwd_set_kernel_readahead() */
		int rr = mwd_set_kernel_readahead(a->mnt, a->fo.kernel_readahead);
		if (rr)
			log_info("kernel read-ahead of %s left as it was (128K by default): %s",
			         a->mnt,
			         rr == -ENOENT ? "its device was not found" : strerror(-rr));
		else
			log_info("kernel read-ahead of %s: %lluK", a->mnt,
			         (unsigned long long)(a->fo.kernel_readahead >> 10));
	}
	metrics_attach(a->metrics, e, fs);
	/* mounted: let the parent go, detach from the terminal */
	if (a->pidfile) {
		FILE *pf = fopen(a->pidfile, "w");
		if (!pf || fprintf(pf, "%ld\n", (long)getpid()) < 0 || fclose(pf))
			fprintf(stderr, "memwalfs: writing %s: %s\n", a->pidfile, strerror(errno));
	}
	if (spath[0]) {
		rc = mwd_status_write(spath, "serving");
		if (rc)
			fprintf(stderr, "memwalfs: writing %s: %s\n", spath, strerror(-rc));
		serving = !rc;
	}
	report(&report_fd, 0);
	if (!a->foreground) {
		int nfd = open("/dev/null", O_RDWR);
		if (nfd >= 0) {
			dup2(nfd, 0);
			dup2(nfd, 1);
			dup2(nfd, 2);
			if (nfd > 2)
				close(nfd);
		}
		mw_log_to_syslog(true);
		if (chdir("/"))
			log_warn("chdir /: %s", strerror(errno));
	}
	rc = mwfs_loop(fs);
	if (rc)
		log_err("the FUSE session ended with %s", strerror(-rc));
	status = 0;
out:
	metrics_attach(a->metrics, NULL, NULL); /* a scrape in progress finishes first */
	rc = mwfs_close(fs);
	if (rc == -ESTALE) {
		fenced = true;
	} else if (rc) {
		log_err("writing out buffered data at unmount: %s", strerror(-rc));
		snprintf(final, sizeof(final), "error: writing out buffered data: %s",
		         strerror(-rc));
		status = 1;
	}
	uint64_t changes_lost = 0;
	if (e) {
		struct engine_stats es;
		engine_get_stats(e, &es);
		/* final once the writer stopped: nothing is applied after */
		changes_lost = es.batches_lost;
	}
	bool store_lost = e && engine_lost(e, final, sizeof(final));
	rc = engine_close(e);
	if (store_lost) {
		status = 1; /* final says it; the close's error is its consequence */
	} else if (rc == -ESTALE) {
		fenced = true;
	} else if (rc) {
		log_err("final commit: %s", strerror(-rc));
		if (!strcmp(final, "ok"))
			snprintf(final, sizeof(final), "error: final commit: %s", strerror(-rc));
		status = 1;
	}
	if (fenced && !store_lost) {
		/* a newer writer claimed the store (engine.c: fencing); umount.c reads this */
		char what[256];
		if (changes_lost)
			snprintf(
			    what, sizeof(what),
			    "%llu change%s made here (each a write, create, rename... that was "
			    "readable here and that close() may have acknowledged) %s never "
			    "committed and %s lost; every change after this mount learned it was "
			    "fenced failed with EIO",
			    (unsigned long long)changes_lost, changes_lost == 1 ? "" : "s",
			    changes_lost == 1 ? "was" : "were", changes_lost == 1 ? "is" : "are");
		else
			snprintf(
			    what, sizeof(what),
			    "every change made here after this mount learned it was fenced failed "
			    "with EIO; no change it had taken was lost");
		log_err("another mount of %s took the filesystem over: this mount was fenced: %s",
		        a->store, what);
		snprintf(final, sizeof(final), "fenced: %s", what);
		status = 1;
	}
	metrics_stop(a->metrics);
	store_close(st);
	/* everything is committed (or reported): tell "memwalfs umount", then unlock */
	if (serving) {
		rc = mwd_status_write(spath, final);
		if (rc)
			log_err("writing %s: %s", spath, strerror(-rc));
	}
	mwd_unlock(lock_fd);
	report(&report_fd, (unsigned char)status);
	return status;
}

/* Say, in one line, why /dev/fuse cannot be opened (access() failed with err) and what to do. */
static void dev_fuse_error(int err)
{
	struct stat sb;
	if (err == ENOENT || err == ENODEV || stat("/dev/fuse", &sb)) {
		fprintf(stderr,
		        "memwalfs: /dev/fuse: %s: load the fuse module (modprobe fuse), or "
		        "in a container pass the device in (docker run --device /dev/fuse)\n",
		        strerror(err));
		return;
	}
	if (err != EACCES && err != EPERM) {
		fprintf(stderr, "memwalfs: /dev/fuse: %s\n", strerror(err));
		return;
	}
	/* libfuse opens /dev/fuse itself, and mounts through the setuid fusermount3 only when
	 * the mount(2) is refused: a user who cannot open the device cannot mount at all */
	struct group *g = getgrgid(sb.st_gid);
	fprintf(stderr,
	        "memwalfs: /dev/fuse: permission denied: user %u may not open it (mode %04o, "
	        "group %s); ask root to make it usable (chmod 0666 /dev/fuse, the usual mode, with "
	        "which libfuse mounts through fusermount3; or chmod 0660 and add the user to group "
	        "%s), or mount as root\n",
	        (unsigned)geteuid(), (unsigned)(sb.st_mode & 07777), g ? g->gr_name : "?",
	        g ? g->gr_name : "?");
}

/* Parse and check, then serve in the foreground or fork and wait for the child's verdict. */
static int run_mount(struct mount_args *a, int argc, char **argv)
{
	if (parse_args(a, argc, argv))
		return 2;
	if (a->remount)
		return remount(a);
	/* before any credential is read; the daemon (forked, not exec'd) inherits it */
	if (mwd_set_dumpable(a->dumpable))
		return 1;
	if (a->late[0] && a->foreground)
		fprintf(stderr,
		        "memwalfs: %s not applied with -f (set them with memwalfs mount -o "
		        "remount,%s MOUNTPOINT)\n",
		        a->late, a->late);
	if (access("/dev/fuse", R_OK | W_OK)) {
		dev_fuse_error(errno);
		return 1;
	}
	a->local = strncmp(a->store, "s3://", 5) != 0;
	if (check_mountpoint(a) || (a->local && check_local_store(a)))
		return 1;
	if (check_fuse_opts(a) || check_pidfile(a))
		return 2;
	/* bound before anything is opened: a port in use is a startup error */
	if (a->metrics_addr) {
		int r = metrics_listen(a->metrics_addr, &a->metrics_fd);
		if (r)
			return r == -EINVAL ? 2 : 1;
	}
	if (a->foreground)
		return serve(a, -1);

	/* fork before any thread exists; the child reports success through a pipe */
	int p[2];
	if (pipe(p)) {
		perror("memwalfs: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("memwalfs: fork");
		return 1;
	}
	if (pid == 0) {
		close(p[0]);
		setsid();
		signal(SIGHUP, SIG_IGN);
		return serve(a, p[1]);
	}
	close(p[1]);
	if (a->metrics_fd >= 0) /* the daemon serves it */
		close(a->metrics_fd);
	unsigned char status = 1;
	ssize_t r;
	do
		r = read(p[0], &status, 1);
	while (r < 0 && errno == EINTR);
	close(p[0]);
	if (r != 1) {
		int ws;
		waitpid(pid, &ws, 0);
		return 1;
	}
	if (status != 0) {
		waitpid(pid, NULL, 0);
		return status;
	}
	if (a->late[0]) { /* mounted: the flags libfuse cannot pass (parse_o()) */
		a->raw_o[0] = a->late;
		a->n_raw = 1;
		a->setting = NULL; /* the memwalfs settings were for the mount */
		status = (unsigned char)remount(a);
	}
	return status;
}

/* ---- entry points: memwalfs mount, memwalfs stats --------------------------- */

/* Entry points for the command table in tools/memwalfs.c. */
int cmd_mount(int argc, char **argv);
/* memwalfs mount: see the file comment.  Returns the exit status. */
int cmd_mount(int argc, char **argv)
{
	struct mount_args a;
	mwd_memory_policy();
	memset(&a, 0, sizeof(a));
	a.metrics_fd = -1;
	s3_opts_default(&a.s3);
	engine_opts_default(&a.eo);
	mwfs_opts_default(&a.fo);
	a.follow_ms = -1;
	a.disk_cache = UINT64_MAX;
	int status = run_mount(&a, argc, argv);
	for (int i = 0; i < a.n_copies; i++)
		free(a.o_copies[i]);
	return status;
}
