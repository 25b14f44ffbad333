/*
 * region.c - "memwalfs region": who writes a store, and handing it back.
 *
 *   memwalfs region list MOUNTPOINT|STORE   the regions, their holders, this mount's lag
 *   memwalfs region release MOUNTPOINT      the mount commits everything, lets the store
 *                                           go and follows it (no unmount)
 *
 * A store has one region today, region 0 (the whole tree); regions of their own come with
 * the rest of issue 39 (docs/REGIONS.md).  list asks a mount's daemon
 * (getxattr(MWFS_REGIONS_XATTR) on its root: what its lease and its watch know); given a
 * store it reads the holder objects and leases itself (region_holder_peek(): liveness from
 * the lease's age alone, which assumes the clocks agree within a few minutes).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>

#include "commands.h"
#include "engine.h"
#include "fs.h"
#include "store.h"
#include "storeopt.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: memwalfs region list [store options] MOUNTPOINT|STORE\n"
	        "       memwalfs region release MOUNTPOINT\n\n"
	        "list: each region of the store (today one, region 0: the whole tree), the mount\n"
	        "that writes it (host, pid, mount point, since when), whether it is alive (its\n"
	        "lease), and, given a mount point, how far that mount is behind it.\n"
	        "release: the mount commits everything, lets the store go and follows it from\n"
	        "then on (reads served, changes fail with EROFS while another mount writes it;\n"
	        "the next change takes it again if nobody does).\n\n");
	storeopt_usage(f);
}

/* getxattr name of mnt into buf (n bytes), NUL-terminated; its length or -1 (errno). */
static ssize_t ask(const char *mnt, const char *name, char *buf, size_t n)
{
	ssize_t r = getxattr(mnt, name, buf, n - 1);
	if (r >= 0)
		buf[r] = 0;
	return r;
}

static int list_store(const char *url, const struct s3_opts *o)
{
	struct store *st = NULL;
	int rc = storeopt_open(url, o, STORE_OPEN_READ_ONLY, "region", &st);
	if (rc)
		return 1;
	struct holder_info h;
	rc = region_holder_peek(st, 0, &h);
	store_close(st);
	if (rc) {
		fprintf(stderr, "memwalfs region: %s: %s\n", url, strerror(-rc));
		return 1;
	}
	printf("region 0 /\n");
	if (!h.mount[0]) {
		printf("  holder: %s, epoch %" PRIu64 "\n",
		       h.epoch ? "none recorded (written by an older memwalfs, or never claimed)"
		               : "none (never written)",
		       h.epoch);
		return 0;
	}
	char since[32] = "?";
	time_t t = (time_t)h.since;
	struct tm tm;
	if (h.since && localtime_r(&t, &tm))
		strftime(since, sizeof(since), "%Y-%m-%d %H:%M:%S", &tm);
	printf("  holder: the mount at %s on %s (pid %ld, mount %s, since %s)\n", h.mnt, h.host,
	       h.pid, h.mount, since);
	printf("  state: %s", holder_state_name(h.state));
	if (h.state != HOLDER_FREE)
		printf(" (its lease of %u s was written %.0f s ago)", (h.lease_ms + 999) / 1000,
		       h.quiet_sec);
	printf(", epoch %" PRIu64 "\n", h.epoch);
	return 0;
}

int cmd_region(int argc, char **argv)
{
	struct s3_opts o;
	const char *pos = NULL;

	s3_opts_default(&o);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *sub = argv[1];
	bool list = !strcmp(sub, "list"), rel = !strcmp(sub, "release");
	if (!list && !rel) {
		fprintf(stderr, "memwalfs region: unknown subcommand %s (list, release)\n", sub);
		return 2;
	}
	for (int i = 2; i < argc;) {
		int r = list ? storeopt_parse(&o, argc, argv, &i) : 0;
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if ((argv[i][0] == '-' && argv[i][1]) || pos) {
			fprintf(stderr, "memwalfs region: unexpected %s (memwalfs region --help)\n",
			        argv[i]);
			return 2;
		}
		pos = argv[i++];
	}
	if (!pos) {
		usage(stderr);
		return 2;
	}
	char buf[65536];
	struct stat sb;
	bool dir = !strstr(pos, "://") && !stat(pos, &sb) && S_ISDIR(sb.st_mode);
	if (rel) {
		if (ask(pos, MWFS_RELEASE_XATTR, buf, sizeof(buf)) < 0) {
			int e = errno;
			fprintf(stderr, "memwalfs region release: %s: %s\n", pos,
			        e == EINVAL ? "this mount does not write its store (it follows it)"
			        : e == ENODATA || e == ENOTSUP || e == EOPNOTSUPP
			            ? "not a memwalfs mount that holds its store"
			            : strerror(e));
			return 1;
		}
		printf("%s: released; it follows its store now\n", pos);
		return 0;
	}
	/* a memwalfs mount answers its stats; a local store's directory does not */
	bool mount = dir && getxattr(pos, MWFS_STATS_XATTR, NULL, 0) >= 0;
	if (mount && ask(pos, MWFS_REGIONS_XATTR, buf, sizeof(buf)) >= 0) {
		fputs(buf, stdout);
		return 0;
	}
	if (mount) {
		fprintf(stderr,
		        "memwalfs region list: %s is a read-only mount (-o ro), which "
		        "holds no lease; give its store instead\n",
		        pos);
		return 1;
	}
	return list_store(pos, &o);
}
