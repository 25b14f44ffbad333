/*
 * dcdir.c - the disk cache's directory, opened safely (dcdir.h; the safety argument is in
 * diskcache.c's DESIGN, "Safety"): the daemon runs as root, so a link planted on the way
 * to the directory, or in it, could make it overwrite or delete any file.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dcdir.h"
#include "log.h"

/* "name (uid N)" of user uid into buf, or "uid N" when it has no name. */
static const char *user_name(uid_t uid, char *buf, size_t n)
{
	struct passwd pw, *r = NULL;
	char tmp[1024];

	if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &r) == 0 && r)
		snprintf(buf, n, "%s (uid %u)", r->pw_name, (unsigned)uid);
	else
		snprintf(buf, n, "uid %u", (unsigned)uid);
	return buf;
}

/*
 * May the cache trust directory path (st its stat), the cache directory dir itself (last)
 * or one on the way to it?  It must belong to the mount's user or to root, and nobody else
 * may write into it: another user could plant links in it, or swap a directory on the way
 * for one of theirs.  One on the way may be writable by others if it is sticky (like /tmp:
 * nobody renames or deletes what is not theirs).  0, or -EPERM with a log line that says
 * what to do.
 */
static int trusted(const char *dir, const char *path, const struct stat *st, bool last)
{
	char owner[300], me[300];
	uid_t uid = geteuid();

	if (st->st_uid != uid && st->st_uid != 0) {
		log_err("disk cache %s: %s belongs to %s, not to %s%s: another user could "
		        "plant links in it to make this mount overwrite or delete files, so the "
		        "disk cache is not used. %s",
		        dir, path, user_name(st->st_uid, owner, sizeof(owner)),
		        user_name(uid, me, sizeof(me)), uid ? " or root" : "",
		        last ? "Remove that directory (or take it over: chown), or give "
		               "--cache-dir a directory of your own"
		             : "Give --cache-dir a directory that is not under it");
		return -EPERM;
	}
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && (last || !(st->st_mode & S_ISVTX))) {
		log_err(
		    "disk cache %s: %s (mode %04o) is writable by other users: they could plant "
		    "links in it to make this mount overwrite or delete files, so the disk cache "
		    "is not used. Run chmod go-w %s, or give --cache-dir a directory of your own",
		    dir, path, (unsigned)(st->st_mode & 07777), path);
		return -EPERM;
	}
	return 0;
}

int dcdir_open(const char *dir, int *out)
{
	char path[PATH_MAX], sofar[PATH_MAX] = "/", cwd[PATH_MAX], *names[PATH_MAX / 2];
	char *save = NULL, *name;
	size_t nn = 0;
	struct stat st;
	int fd, nfd, rc, w;

	if (dir[0] == '/')
		w = snprintf(path, sizeof(path), "%s", dir);
	else if (getcwd(cwd, sizeof(cwd)))
		w = snprintf(path, sizeof(path), "%s/%s", cwd, dir);
	else
		return -errno;
	if (w < 0 || (size_t)w >= sizeof(path))
		return -ENAMETOOLONG;
	for (name = strtok_r(path, "/", &save); name; name = strtok_r(NULL, "/", &save))
		if (strcmp(name, "."))
			names[nn++] = name;
	fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
		goto out;
	}
	if ((rc = trusted(dir, "/", &st, nn == 0)))
		goto out;
	for (size_t i = 0; i < nn; i++) {
		size_t n = strlen(sofar);
		name = names[i];
		snprintf(sofar + n, sizeof(sofar) - n, "%s%s", n > 1 ? "/" : "", name);
		nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT) {
			if (mkdirat(fd, name, 0700) && errno != EEXIST) {
				rc = -errno;
				log_err("disk cache %s: cannot create %s: %s", dir, sofar,
				        strerror(-rc));
				goto out;
			}
			nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
			struct stat ls;
			char owner[300];
			int err = errno;
			if (fstatat(fd, name, &ls, AT_SYMLINK_NOFOLLOW) || !S_ISLNK(ls.st_mode)) {
				errno = err; /* a file, not a directory */
			} else if (ls.st_uid != geteuid() && ls.st_uid != 0) {
				log_err("disk cache %s: %s is a symbolic link made by %s: not "
				        "followed (it could lead this mount to overwrite or delete "
				        "files), so the disk cache is not used. Give --cache-dir a "
				        "path without it",
				        dir, sofar, user_name(ls.st_uid, owner, sizeof(owner)));
				rc = -EPERM;
				goto out;
			} else {
				nfd = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			}
		}
		if (nfd < 0) {
			rc = -errno;
			log_err("disk cache %s: cannot open %s: %s", dir, sofar, strerror(-rc));
			goto out;
		}
		close(fd);
		fd = nfd;
		if (fstat(fd, &st)) {
			rc = -errno;
			goto out;
		}
		if ((rc = trusted(dir, sofar, &st, i + 1 == nn)))
			goto out;
	}
	*out = fd;
	return 0;
out:
	close(fd);
	return rc;
}

int dcdir_lock(int dfd, const char *dir, int *lockfd)
{
	struct stat st;

	*lockfd = openat(dfd, "lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
	if (*lockfd < 0 || fstat(*lockfd, &st)) {
		int rc = -errno;
		if (rc == -ELOOP)
			log_err("disk cache %s: %s/lock is a symbolic link: not followed, the disk "
			        "cache is not used. Remove the link",
			        dir, dir);
		return rc;
	}
	if (!S_ISREG(st.st_mode)) {
		log_err("disk cache %s: %s/lock is not a regular file: the disk cache is not used. "
		        "Remove it",
		        dir, dir);
		return -EPERM;
	}
	if (flock(*lockfd, LOCK_EX | LOCK_NB))
		return errno == EWOULDBLOCK ? -EBUSY : -errno;
	return 0;
}
