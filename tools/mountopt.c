/*
 * mountopt.c - "memwalfs mount": usage, the command line and the -o option
 * lists (the design of the mount is in tools/mount.c, the interface in
 * tools/mount.h).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mount.h"
#include "log.h"
#include "storeopt.h"

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
	    "  --takeover             fence the live mount that writes STORE (without it this\n"
	    "                         mount follows that one: reads served, changes EROFS\n"
	    "                         until it lets go); on this machine that mount first\n"
	    "                         commits what it took and takes no more (EIO), then\n"
	    "                         learns that it was fenced; -o takeover\n"
	    "  --lease SEC            this mount's lease on the store it writes (1-3600,\n"
	    "                         default 30): renewed every third of it; another mount\n"
	    "                         takes the store over once it ran out (docs/REGIONS.md);\n"
	    "                         -o lease=\n"
	    "  --bell-interval MS     read the store's doorbell this often (default 10000):\n"
	    "                         a follower quiet for a minute stops polling (but every\n"
	    "                         5 min) until a writer rings it; the first write after\n"
	    "                         a quiet shows within about this; 0: followers keep\n"
	    "                         polling (docs/REGIONS.md \"The bell\"); -o bell_interval=\n"
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

int mount_add_fuse_opt(struct mount_args *a, const char *opt)
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
	} else if (!strcmp(name, "bell_interval")) {
		if (!val || !parse_size(val, &sz) || sz > 600000)
			goto bad;
		a->bell_ms = (int)sz;
	} else if (!strcmp(name, "lease")) {
		if (!val || !parse_size(val, &sz) || sz < 1 || sz > 3600)
			goto bad;
		a->lease_ms = (unsigned)sz * 1000;
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
 * libfuse does not know, are set by a mount_remount() once mounted (in the
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
		if (r == 0 && mount_add_fuse_opt(a, opt))
			return -1;
	}
	return 0;
}

int mount_parse_args(struct mount_args *a, int argc, char **argv)
{
	const char *pos[2];
	int npos = 0;
	static const char *const long_set[][2] = {
	    {"--cadence", "cadence"},
	    {"--commit-inflight", "commit_inflight"},
	    {"--follow-interval", "follow_interval"},
	    {"--lease", "lease"},
	    {"--bell-interval", "bell_interval"},
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
			char *raw = strdup(v);  /* as given, for mount_remount() */
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
		if (!a->eo.read_only && mount_add_fuse_opt(a, "ro"))
			return -1;
		a->eo.read_only = a->fo.read_only = true;
	} else if (a->eo.read_only && a->follow_ms != 0) {
		a->eo.follow = true;
		a->eo.follow_interval_ms = a->follow_ms > 0 ? (unsigned)a->follow_ms : 0;
	}
	return 0;
}
