/*
 * mountcheck.c - what "memwalfs mount" checks before anything changes: the
 * mount point, a local store's path, the FUSE options and the pid file
 * before the fork; the kind and the formats of the store in the daemon
 * (interface in tools/mount.h; the design in tools/mount.c).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "mount.h"
#include "log.h"
#include "metrics.h"

/* ---- checks before anything changes -------------------------------------- */

/*
 * The mount point must be a directory that is not a dead FUSE mount, and not
 * a live memwalfs mount unless --stack.  Fills a->mnt.  0 or -1 (printed).
 */
int mount_check_mountpoint(struct mount_args *a)
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
int mount_check_local_store(struct mount_args *a)
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
int mount_check_fuse_opts(struct mount_args *a)
{
	char fsname[PATH_MAX + 64];
	char prog[] = "memwalfs", dash_o[] = "-o";

	snprintf(fsname, sizeof(fsname), "fsname=%s,subtype=memwalfs", a->store);
	if (mount_add_fuse_opt(a, "default_permissions"))
		return -1;
	if (mount_add_fuse_opt(a, fsname))
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
int mount_check_pidfile(struct mount_args *a)
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
int mount_check_store_kind(struct mount_args *a, struct store *st)
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
		mount_progress(arg, "checking the WAL (read-only)", done, total);
}

/* WAL entries a crash may leave in flight after a missing position (engine/wal/wal.h WAL_WINDOW).
 */
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

int mount_check_formats(struct mount_args *a, struct store *st)
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

/*
 * Progress of the replay at open (mount.c) and of the WAL check (above): on a terminal, and to
 * the metrics (arg: struct metrics).  Here, below mount.c, so that the two files do not call
 * each other.
 */
void mount_progress(void *arg, const char *phase, uint64_t done, uint64_t total)
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
