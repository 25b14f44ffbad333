/*
 * region.c - "memwalfs region": who writes a store, and handing it back.
 *
 *   memwalfs region list MOUNTPOINT|STORE   the regions, their holders, this mount's lag
 *   memwalfs region release MNT[/ROOT]      the mount commits everything, lets region 0
 *                                           (or the region whose root ROOT is) go and
 *                                           follows it (no unmount)
 *   memwalfs region take [--force] MNT[/ROOT]  the mount writes region 0 (or the region
 *                                           whose root ROOT is) now, as its first change
 *                                           would; --force fences a live holder
 *   memwalfs region create MOUNTPOINT/PATH  PATH (new, or an empty directory) becomes
 *                                           the root of a new region, written by that
 *                                           mount
 *
 * Region 0 is the whole tree but the regions made by create (docs/REGIONS.md).  create asks
 * the daemon (setxattr(MWFS_REGION_CREATE_XATTR) on PATH's parent, the value PATH from the
 * mount's root).  list asks a mount's daemon
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
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "engine.h"
#include "fs.h"
#include "store.h"
#include "storeopt.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: memwalfs region list [store options] MOUNTPOINT|STORE\n"
	        "       memwalfs region release MOUNTPOINT[/REGION-ROOT]\n"
	        "       memwalfs region take [--force] MOUNTPOINT[/REGION-ROOT]\n"
	        "       memwalfs region create MOUNTPOINT/PATH\n\n"
	        "list: each region of the store (region 0, the tree outside the others, first):\n"
	        "its root, the mount that writes it (host, pid, mount point, since when), whether\n"
	        "it is alive (its lease), and, given a mount point, how far that mount is behind.\n"
	        "release: the mount commits everything, lets the region go (region 0 for the\n"
	        "mount point, else the region whose root is given) and follows it from then on\n"
	        "(reads served, changes fail with EROFS while another mount writes it; the next\n"
	        "change takes it again if nobody does).\n"
	        "take: the mount writes the region now (as its first change would), if no live\n"
	        "mount holds it; --force takes it from a live holder, which is fenced: its\n"
	        "changes fail with EIO from then on, and what it had not made durable is lost.\n"
	        "create: PATH (a new name, or an empty directory, which is replaced) becomes the\n"
	        "root of a new region, which the mount writes; its parent's region must be\n"
	        "written by that mount.  Allowed to root and to the owner of PATH's parent.\n\n");
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

/* One region's holder as region_holder_peek() sees it. */
static void print_peek(struct store *st, uint32_t rid, const char *path)
{
	struct holder_info h;
	int rc = region_holder_peek(st, rid, &h);
	printf("region %u %s\n", rid, path);
	if (rc) {
		printf("  holder: not known (%s)\n", strerror(-rc));
		return;
	}
	if (!h.mount[0]) {
		printf("  holder: %s, epoch %" PRIu64 "\n",
		       h.epoch ? "none recorded (written by an older memwalfs, or never claimed)"
		               : "none (never written)",
		       h.epoch);
		return;
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
}

static int list_store(const char *url, const struct s3_opts *o)
{
	struct store *st = NULL;
	struct region_map m = {0};
	int rc = storeopt_open(url, o, STORE_OPEN_READ_ONLY, "region", &st);
	if (rc)
		return 1;
	rc = region_map_load(st, &m);
	if (rc)
		fprintf(stderr, "memwalfs region: %s: the region map does not load: %s\n", url,
		        strerror(-rc));
	print_peek(st, 0, "/");
	for (size_t i = 0; i < m.n; i++)
		print_peek(st, m.v[i].rid, m.v[i].path);
	region_map_free(&m);
	store_close(st);
	return rc ? 1 : 0;
}

/*
 * region create: PATH's parent and name, the mount's root above it (the first directory
 * upwards that answers MWFS_STATS_XATTR), the request, and the wait until PATH shows.
 */
static int create(const char *arg)
{
	char path[PATH_MAX], dir[PATH_MAX], root[PATH_MAX];
	snprintf(path, sizeof(path), "%s", arg);
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		path[--n] = 0;
	char *slash = strrchr(path, '/');
	const char *name = slash ? slash + 1 : path;
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) {
		fprintf(stderr, "memwalfs region create: %s: give a new name (MNT/PATH)\n", arg);
		return 2;
	}
	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
	if (!dir[0])
		snprintf(dir, sizeof(dir), "/");
	if (!realpath(dir, root)) {
		fprintf(stderr, "memwalfs region create: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", root);
	/* the mount's root: the nearest directory at or above the parent that answers stats */
	for (;;) {
		if (getxattr(root, MWFS_STATS_XATTR, NULL, 0) >= 0)
			break;
		char *s = strrchr(root, '/');
		if (!s || s == root) {
			fprintf(stderr, "memwalfs region create: %s is not in a memwalfs mount\n",
			        parent);
			return 1;
		}
		*s = 0;
	}
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "%s/%s", parent + strlen(root), name);
	/* an empty directory is replaced: removed first, its mode and owner given to the root */
	struct stat old;
	bool replaced = false;
	if (!lstat(path, &old)) {
		if (!S_ISDIR(old.st_mode)) {
			fprintf(stderr,
			        "memwalfs region create: %s exists and is not a directory\n", path);
			return 1;
		}
		if (rmdir(path)) {
			fprintf(stderr, "memwalfs region create: %s: %s\n", path,
			        errno == ENOTEMPTY || errno == EEXIST
			            ? "not empty (a region's root is a new or an empty directory)"
			        : errno == EBUSY ? "already a region's root (or a mount point)"
			                         : strerror(errno));
			return 1;
		}
		replaced = true;
	}
	if (setxattr(parent, MWFS_REGION_CREATE_XATTR, rel, strlen(rel), 0)) {
		int e = errno;
		struct statvfs vfs;
		bool ro = e == EROFS && statvfs(parent, &vfs) == 0 && (vfs.f_flag & ST_RDONLY);
		fprintf(stderr, "memwalfs region create: %s: %s\n", path,
		        ro ? "Read-only file system (a read-only mount: make regions at a "
		             "read-write one)"
		        : e == EROFS  ? "its parent's region is written by another mount (memwalfs "
		                        "region list names it; the daemon's log too)"
		        : e == EEXIST ? "exists (or the map has a region there already)"
		        : e == EPERM  ? "only root or the owner of its parent directory may make a "
		                        "region there"
		        : e == ENOTSUP || e == EOPNOTSUPP
		            ? "the mount cannot create regions (a read-only mount?)"
		            : strerror(e));
		if (replaced && mkdir(path, old.st_mode & 07777) == 0)
			fprintf(stderr, "memwalfs region create: %s made again as it was\n", path);
		return 1;
	}
	struct stat sb;
	for (int i = 0; i < 100 && stat(path, &sb); i++)
		usleep(50000); /* the kernel's negative entry goes (the daemon invalidates it) */
	if (replaced) {
		if (chmod(path, old.st_mode & 07777))
			fprintf(stderr, "memwalfs region create: chmod %s: %s\n", path,
			        strerror(errno));
		if ((old.st_uid != sb.st_uid || old.st_gid != sb.st_gid) &&
		    chown(path, old.st_uid, old.st_gid))
			fprintf(stderr, "memwalfs region create: chown %s: %s\n", path,
			        strerror(errno));
	}
	printf("%s: a new region, written by this mount\n", path);
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
	bool tk = !strcmp(sub, "take"), force = false;
	if (!strcmp(sub, "create")) {
		if (argc != 3 || argv[2][0] == '-') {
			usage(stderr);
			return 2;
		}
		return create(argv[2]);
	}
	if (tk && argc > 2 && !strcmp(argv[2], "--force")) {
		force = true;
		argv++;
		argc--;
	}
	if (!list && !rel && !tk) {
		fprintf(stderr,
		        "memwalfs region: unknown subcommand %s (list, release, take, create)\n",
		        sub);
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
			fprintf(
			    stderr, "memwalfs region release: %s: %s\n", pos,
			    e == EINVAL  ? "this mount does not write that region (it follows it)"
			    : e == EPERM ? "only root and the user who mounted may release a region"
			    : e == ENODATA || e == ENOTSUP || e == EOPNOTSUPP
			        ? "not the root of a memwalfs mount, or of a region, that this "
			          "mount holds"
			        : strerror(e));
			return 1;
		}
		printf("%s: released; this mount follows it now\n", pos);
		return 0;
	}
	if (tk) {
		if (ask(pos, force ? MWFS_TAKE_FORCE_XATTR : MWFS_TAKE_XATTR, buf, sizeof(buf)) <
		    0) {
			int e = errno;
			fprintf(
			    stderr, "memwalfs region take: %s: %s\n", pos,
			    e == EROFS ? "another live mount holds it (memwalfs region list names "
			                 "it); --force fences that mount"
			    : e == EPERM ? "only root and the user who mounted may take a region"
			    : e == ENODATA || e == ENOTSUP || e == EOPNOTSUPP
			        ? "not the root of a memwalfs mount, or of a region, on a mount "
			          "that can write (a read-only mount cannot)"
			        : strerror(e));
			return 1;
		}
		printf("%s: %s\n", pos,
		       !strcmp(buf, "already\n") ? "this mount writes it already"
		                                 : "taken; this mount writes it now");
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
