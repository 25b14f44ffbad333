/*
 * sync.c - "memwalfs sync [MOUNTPOINT...]": make everything written to a
 * memwalfs mount durable now, and wait for it.
 *
 * sync(1) and syncfs(2) write the kernel's dirty pages back to the daemon,
 * but libfuse 3.14 (Debian 12) has no syncfs operation, so the daemon is
 * never asked to commit them: after sync(1) the data is in the daemon's
 * memory and becomes durable within a cadence interval or two.  This
 * command does both steps for each mount point: syncfs(2) on it (the pages
 * reach the daemon), then getxattr(MWFS_SYNC_XATTR) on its root, which the
 * daemon answers once every write buffer is put and everything pending is
 * committed (fs/xattr.c).  With no argument: every fuse.memwalfs mount in
 * /proc/self/mounts.  Exit 0 when every mount is durable, 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <mntent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "commands.h"
#include "fs.h"

static void sync_usage(FILE *f)
{
	fprintf(f, "usage: memwalfs sync [MOUNTPOINT...]\n\n"
	           "Write back the kernel's dirty pages of each memwalfs mount, commit everything\n"
	           "its daemon holds and wait until it is durable (what sync(1) does not do on a\n"
	           "FUSE filesystem here).  With no mount point: every memwalfs mount.  An fsync\n"
	           "timeout of the mount (--fsync-timeout) bounds the wait.\n");
}

/* Do the mount's stats say that its store lost objects (engine/check/watch.c)? */
static bool store_lost(const char *mnt)
{
	char buf[65536];
	ssize_t n = getxattr(mnt, MWFS_STATS_XATTR, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = 0;
	return strstr(buf, "\nstore_lost 1\n") != NULL;
}

/* Sync one mount point: 0, or 1 after a message. */
static int sync_one(const char *arg)
{
	char mnt[PATH_MAX], val[64];
	if (!realpath(arg, mnt)) {
		fprintf(stderr, "memwalfs: %s: %s\n", arg, strerror(errno));
		return 1;
	}
	int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "memwalfs: %s: %s\n", mnt, strerror(errno));
		return 1;
	}
	int rc = syncfs(fd);
	int err = errno;
	close(fd);
	if (rc) {
		fprintf(stderr, "memwalfs: %s: syncfs: %s\n", mnt, strerror(err));
		return 1;
	}
	ssize_t n = getxattr(mnt, MWFS_SYNC_XATTR, val, sizeof(val) - 1);
	if (n < 0) {
		err = errno;
		if (err == ENODATA || err == ENOTSUP)
			fprintf(stderr, "memwalfs: %s: not a memwalfs mount point\n", mnt);
		else if (store_lost(mnt))
			fprintf(
			    stderr,
			    "memwalfs: %s: the store lost objects this filesystem needs (see "
			    "`memwalfs stats %s`): the mount acknowledges no write any more.  "
			    "Unmount it, then recover what remains with memwalfs fsck --salvage "
			    "STORE (README.md, \"When the store lost objects\")\n",
			    mnt, mnt);
		else
			fprintf(stderr, "memwalfs: %s: the commit failed: %s\n", mnt,
			        strerror(err));
		return 1;
	}
	printf("%s: durable\n", mnt);
	return 0;
}

int cmd_sync(int argc, char **argv)
{
	int i = 1, status = 0;
	if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		sync_usage(stdout);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "--"))
		i = 2;
	else if (argc > 1 && argv[1][0] == '-') {
		fprintf(stderr, "memwalfs sync: unknown option %s\n", argv[1]);
		sync_usage(stderr);
		return 2;
	}
	if (i < argc) {
		for (; i < argc; i++)
			status |= sync_one(argv[i]);
		return status;
	}
	FILE *m = setmntent("/proc/self/mounts", "r");
	if (!m) {
		fprintf(stderr, "memwalfs: /proc/self/mounts: %s\n", strerror(errno));
		return 1;
	}
	int found = 0;
	for (struct mntent *e; (e = getmntent(m));) {
		if (strcmp(e->mnt_type, "fuse.memwalfs"))
			continue;
		found++;
		status |= sync_one(e->mnt_dir);
	}
	endmntent(m);
	if (!found)
		printf("no memwalfs mounts\n");
	return status;
}
