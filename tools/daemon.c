/*
 * daemon.c - the per-store daemon lock and status files (the design is in
 * daemon.h), used by "memwalfs mount" (the daemon) and "memwalfs umount".
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "daemon.h"

/*
 * The status file of a daemon that is gone is removed once it is this old,
 * whatever it says.  Its only reader is a "memwalfs umount" that waited for
 * that daemon's exit and reads the file within 20 ms of it (tools/umount.c);
 * the daemon writes its final status just before it exits, so a minute is
 * far more than that reader needs even on a loaded machine.  A "serving"
 * left by a daemon killed with -9 says no more than a missing file does.
 */
#define MWD_STATUS_GONE_SEC 60

/* Lock files of stores nobody has locked are removed after this long. */
#define MWD_LOCK_KEEP_SEC 3600

/* ---- run directory, names ------------------------------------------------ */

/* The run directory (created 0700 if missing) into out.  0 or -errno. */
static int rundir(char *out, size_t n)
{
	const char *x = getenv("XDG_RUNTIME_DIR"), *r = getenv("MEMWALFS_RUNDIR");
	int w;
	if (r && r[0] == '/') /* tests: a daemon that stands for one on another machine */
		w = snprintf(out, n, "%s", r);
	else if (geteuid() == 0)
		w = snprintf(out, n, "/run/memwalfs");
	else if (x && x[0] == '/')
		w = snprintf(out, n, "%s/memwalfs", x);
	else
		w = snprintf(out, n, "/tmp/memwalfs-%u", (unsigned)geteuid());
	if (w < 0 || (size_t)w >= n)
		return -ENAMETOOLONG;
	if (mkdir(out, 0700) && errno != EEXIST)
		return -errno;
	struct stat st;
	if (lstat(out, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM; /* someone else's directory in /tmp: do not trust it */
	return 0;
}

static uint64_t fnv1a64(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 offset basis */
	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 0x100000001b3ull; /* FNV 64 prime */
	}
	return h;
}

int mwd_store_name(const char *url, const struct s3_opts *o, char *out, size_t n)
{
	int w;
	if (!strncmp(url, "s3://", 5)) {
		size_t len = strlen(url);
		while (len > 5 && url[len - 1] == '/')
			len--;
		const char *ep = o && o->endpoint ? o->endpoint : "aws";
		size_t elen = strlen(ep);
		while (elen > 1 && ep[elen - 1] == '/')
			elen--;
		w = snprintf(out, n, "s3 %.*s %.*s", (int)elen, ep, (int)len, url);
	} else {
		char real[PATH_MAX];
		if (!strncmp(url, "file://", 7))
			url += 7;
		if (!realpath(url, real))
			return -errno;
		w = snprintf(out, n, "local %s", real);
	}
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

int mwd_status_path(pid_t pid, char *out, size_t n)
{
	char dir[PATH_MAX - 64];
	int rc = rundir(dir, sizeof(dir));
	if (rc)
		return rc;
	int w = snprintf(out, n, "%s/daemon-%ld.status", dir, (long)pid);
	return w < 0 || (size_t)w >= n ? -ENAMETOOLONG : 0;
}

/*
 * Remove the lock file name of a store nobody has mounted for an hour (a daemon
 * killed with -9 leaves its lock file behind): only when no one holds it.  A
 * daemon that opened it meanwhile finds it replaced and opens a new one.
 */
static void stale_lock(DIR *d, const char *name, time_t now)
{
	struct stat st, fst;
	int fd = openat(dirfd(d), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	if (!flock(fd, LOCK_EX | LOCK_NB) && !fstat(fd, &fst) &&
	    !fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) && st.st_ino == fst.st_ino &&
	    st.st_dev == fst.st_dev && now - st.st_mtime > MWD_LOCK_KEEP_SEC)
		unlinkat(dirfd(d), name, 0);
	close(fd);
}

/*
 * Wall-clock second at which process pid started, or 0 when unknown
 * (/proc/PID/stat field 22 in clock ticks since boot, plus btime of
 * /proc/stat).  *zombie tells whether it has exited and is not yet reaped.
 */
static time_t proc_started(long pid, bool *zombie)
{
	char path[64], buf[1024];
	unsigned long long ticks = 0, btime = 0;
	*zombie = false;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char *p = strrchr(buf, ')'); /* the name (field 2) may hold spaces and ')' */
	char state;
	/* fields 3 (state) .. 22 (starttime) after the name */
	if (!p || sscanf(p + 1,
	                 " %c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
	                 "%*s %*s %llu",
	                 &state, &ticks) != 2)
		return 0;
	*zombie = state == 'Z';
	f = fopen("/proc/stat", "re");
	if (!f)
		return 0;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (!btime || hz <= 0)
		return 0;
	return (time_t)(btime + ticks / (unsigned long long)hz);
}

/*
 * Is the daemon pid that last wrote its status file at written gone?  It is
 * when no process has that pid, when that process has exited (a zombie), or
 * when it started after the file was written (the pid was given to another
 * process: 32768 pids go round in an hour of tests).  Unknown means running.
 */
static bool daemon_gone(long pid, time_t written)
{
	if (kill((pid_t)pid, 0) && errno == ESRCH)
		return true;
	bool zombie;
	time_t started = proc_started(pid, &zombie);
	/* 2 s: btime is whole seconds, and so is the file's time here */
	return zombie || (started && started > written + 2);
}

void mwd_status_gc(void)
{
	char dir[PATH_MAX - 64];
	if (rundir(dir, sizeof(dir)))
		return;
	DIR *d = opendir(dir);
	if (!d)
		return;
	time_t now = time(NULL);
	for (struct dirent *de; (de = readdir(d));) {
		long pid;
		char tail[16];
		if (!strncmp(de->d_name, "store-", 6) && strstr(de->d_name, ".lock")) {
			stale_lock(d, de->d_name, now);
			continue;
		}
		if (sscanf(de->d_name, "daemon-%ld.%15s", &pid, tail) != 2 ||
		    strcmp(tail, "status"))
			continue;
		struct stat st;
		if (pid <= 0 || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    now - st.st_mtime <= MWD_STATUS_GONE_SEC || !daemon_gone(pid, st.st_mtime))
			continue;
		unlinkat(dirfd(d), de->d_name, 0);
	}
	closedir(d);
}

/* Write all n bytes of p to fd.  0 or -errno (a short write is an error). */
static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int mwd_status_write(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	int rc = 0;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	rc = write_all(fd, text, strlen(text));
	if (!rc)
		rc = write_all(fd, "\n", 1);
	if (!rc && fsync(fd))
		rc = -errno;
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path))
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* ---- the per-store lock -------------------------------------------------- */

/* Undo the octal escapes (\040 ...) of a /proc/self/mountinfo field, in place. */
static void unescape(char *s)
{
	char *d = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = 0;
}

/*
 * Walk /proc/self/mountinfo for mounts at mountpoint.  Each match (in mount
 * order, so the last one is on top) is copied into type/src (unescaped) and
 * its device ("major:minor") into dev (dn bytes).  Stops at the first match
 * when src_want is given and equals its source.  Returns the number of
 * matches seen (0 if unreadable).  Nothing is asked of the mounted
 * filesystems themselves: safe before a FUSE mount answers its INIT.
 */
static int scan_mounts(const char *mountpoint, const char *src_want, char *type, size_t tn,
                       char *srcbuf, size_t sn, char *dev, size_t dn)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int found = 0;
	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		/* id parent maj:min root MOUNTPOINT opts [optional...] - FSTYPE SOURCE superopts */
		char *save = NULL, *mp = NULL, *majmin = NULL, *tok;
		int i = 0;
		for (tok = strtok_r(line, " ", &save); tok && i < 4;
		     tok = strtok_r(NULL, " ", &save))
			if (++i == 3)
				majmin = tok;
		mp = tok;
		while (tok && strcmp(tok, "-"))
			tok = strtok_r(NULL, " ", &save);
		char *ty = tok ? strtok_r(NULL, " ", &save) : NULL;
		char *src = ty ? strtok_r(NULL, " ", &save) : NULL;
		if (!mp || !src)
			continue;
		unescape(mp);
		if (strcmp(mp, mountpoint))
			continue;
		unescape(src);
		if (src_want && (strcmp(ty, "fuse.memwalfs") || strcmp(src, src_want)))
			continue;
		found++;
		if (type)
			snprintf(type, tn, "%s", ty);
		if (srcbuf)
			snprintf(srcbuf, sn, "%s", src);
		if (dev)
			snprintf(dev, dn, "%s", majmin ? majmin : "");
		if (src_want)
			break;
	}
	free(line);
	fclose(f);
	return found;
}

/* Is a fuse.memwalfs mount of fsname at mountpoint visible here? */
static bool is_mounted(const char *mountpoint, const char *fsname)
{
	return scan_mounts(mountpoint, fsname, NULL, 0, NULL, 0, NULL, 0) > 0;
}

bool mwd_top_mount(const char *mountpoint, char *type, size_t tn, char *src, size_t sn)
{
	return scan_mounts(mountpoint, NULL, type, tn, src, sn, NULL, 0) > 0;
}

int mwd_set_kernel_readahead(const char *mountpoint, uint64_t bytes)
{
	char type[64], dev[32], path[96];
	if (scan_mounts(mountpoint, NULL, type, sizeof(type), NULL, 0, dev, sizeof(dev)) <= 0 ||
	    strncmp(type, "fuse", 4) || !dev[0] || strchr(dev, '/'))
		return -ENOENT;
	snprintf(path, sizeof(path), "/sys/class/bdi/%s/read_ahead_kb", dev);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char v[24];
	int n = snprintf(v, sizeof(v), "%llu\n", (unsigned long long)(bytes >> 10));
	int rc = write(fd, v, (size_t)n) == n ? 0 : -errno;
	close(fd);
	return rc;
}

/* Read the holder's "pid\nmountpoint\nfsname\n" from fd (0 or -1). */
static int read_holder(int fd, long *pid, char *mnt, size_t mn, char *fsn, size_t fn)
{
	char buf[2 * PATH_MAX + 64];
	ssize_t r = pread(fd, buf, sizeof(buf) - 1, 0);
	if (r <= 0)
		return -1;
	buf[r] = 0;
	char *a = strchr(buf, '\n');
	char *b = a ? strchr(a + 1, '\n') : NULL;
	char *c = b ? strchr(b + 1, '\n') : NULL;
	if (!c)
		return -1;
	*a = *b = *c = 0;
	*pid = strtol(buf, NULL, 10);
	snprintf(mnt, mn, "%s", a + 1);
	snprintf(fsn, fn, "%s", b + 1);
	return 0;
}

/* Open (creating) the lock file; -errno on failure. */
static int open_lock(const char *path)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	return fd < 0 ? -errno : fd;
}

/* Does path still name the file open at fd (nobody replaced it)? */
static bool same_file(int fd, const char *path)
{
	struct stat a, b;
	return !fstat(fd, &a) && !stat(path, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int mwd_lock(const char *name, const char *mountpoint, const char *fsname, unsigned wait_sec,
             bool takeover, struct mwd_holder *fenced, int *out)
{
	char dir[PATH_MAX - 64], path[PATH_MAX];
	int rc = rundir(dir, sizeof(dir));
	if (rc)
		return rc;
	snprintf(path, sizeof(path), "%s/store-%016llx.lock", dir,
	         (unsigned long long)fnv1a64(name));
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool told = false;
	int fd = -1;
	if (fenced)
		fenced->pid = 0;
	for (;;) {
		if (fd < 0 && (fd = open_lock(path)) < 0)
			return fd;
		if (!flock(fd, LOCK_EX | LOCK_NB)) {
			if (same_file(fd, path))
				break; /* ours, and still the current lock file */
			close(fd);     /* replaced by a takeover: retry */
			fd = -1;
			continue;
		}
		if (errno != EWOULDBLOCK && errno != EINTR) {
			rc = -errno;
			close(fd);
			return rc;
		}
		if (!same_file(fd, path)) {
			close(fd);
			fd = -1;
			continue;
		}
		long pid = 0;
		char hm[PATH_MAX], hf[PATH_MAX];
		bool known = !read_holder(fd, &pid, hm, sizeof(hm), hf, sizeof(hf));
		clock_gettime(CLOCK_MONOTONIC, &now);
		double waited = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		bool live = known && is_mounted(hm, hf);
		if (live && !takeover) {
			/* the caller follows it (tools/hold.c) and says so */
			if (fenced) {
				fenced->pid = (pid_t)pid;
				snprintf(fenced->mnt, sizeof(fenced->mnt), "%s", hm);
			}
			close(fd);
			return -EALREADY;
		}
		if (waited >= wait_sec && !takeover) {
			fprintf(stderr,
			        "memwalfs: refusing to mount: daemon %ld (%s, mounted at %s) "
			        "still holds the store after %u s: it is still writing out its "
			        "final commit, or it is mounted where this process cannot see "
			        "its mount. Wait for it to exit, or give --takeover (-o "
			        "takeover) to fence it on purpose (what it has not committed "
			        "yet is lost). Nothing was changed.\n",
			        pid, known ? hf : "?", known ? hm : "?", wait_sec);
			close(fd);
			return -EBUSY;
		}
		if (live || waited >= wait_sec) {
			fprintf(stderr,
			        "memwalfs: --takeover: %s daemon %ld (mounted at %s): this mount "
			        "fences it\n",
			        live ? "taking the store over from the live"
			             : "not waiting longer for",
			        pid, known ? hm : "?");
			if (fenced && known) {
				fenced->pid = (pid_t)pid;
				/* its mount, where this process sees it (else it is not asked) */
				snprintf(fenced->mnt, sizeof(fenced->mnt), "%s", live ? hm : "");
			}
			/* a fresh lock file for us; the old holder keeps the unlinked one */
			unlink(path);
			close(fd);
			fd = -1;
			continue;
		}
		if (!told && waited >= 1.0) {
			/* said only once a person would notice: a quick remount waits milliseconds
			 */
			fprintf(stderr,
			        "memwalfs: waiting up to %u s for daemon %ld to finish its final "
			        "commit of this store...\n",
			        wait_sec, pid);
			told = true;
		}
		struct timespec ts = {0, 50 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	if (told)
		fprintf(stderr, "memwalfs: the previous daemon has finished\n");
	char text[2 * PATH_MAX + 64];
	int w = snprintf(text, sizeof(text), "%ld\n%s\n%s\n", (long)getpid(), mountpoint, fsname);
	if (w < 0 || (size_t)w >= sizeof(text) || ftruncate(fd, 0) ||
	    pwrite(fd, text, (size_t)w, 0) != w) {
		/* the lock is held; only the informative text is missing */
		fprintf(stderr, "memwalfs: writing %s: %s\n", path, strerror(errno));
	}
	*out = fd;
	return 0;
}

int mwd_ask_mount(const char *mnt, bool sync, const char *xattr, char *val, size_t vn,
                  unsigned timeout_ms)
{
	int p[2];
	if (vn < 2 || pipe2(p, O_CLOEXEC))
		return vn < 2 ? -EINVAL : -errno;
	pid_t pid = fork();
	if (pid < 0) {
		int err = errno;
		close(p[0]);
		close(p[1]);
		return -err;
	}
	if (pid == 0) {
		/* system calls only: the parent may have threads */
		int fd = open(mnt, O_RDONLY | O_DIRECTORY | O_CLOEXEC), err = 0;
		ssize_t n = -1;
		char buf[256];
		if (fd < 0 || (sync && syncfs(fd)))
			err = errno;
		else if ((n = getxattr(mnt, xattr, buf + 1, sizeof(buf) - 1)) < 0)
			err = errno;
		buf[0] = (char)(err > 0 && err < 128 ? err : err ? EIO : 0);
		if (write(p[1], buf, n > 0 ? (size_t)n + 1 : 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	struct pollfd pfd = {.fd = p[0], .events = POLLIN};
	int rc, pr;
	do
		pr = poll(&pfd, 1, (int)timeout_ms);
	while (pr < 0 && errno == EINTR);
	char buf[256];
	ssize_t n = pr > 0 ? read(p[0], buf, sizeof(buf)) : -1;
	if (pr == 0) {
		kill(pid, SIGKILL); /* a FUSE request waits killably */
		rc = -ETIMEDOUT;
	} else if (n <= 0) {
		rc = -EIO;
	} else if (buf[0]) {
		rc = -(int)(unsigned char)buf[0];
	} else {
		size_t k = (size_t)n - 1 < vn - 1 ? (size_t)n - 1 : vn - 1;
		memcpy(val, buf + 1, k);
		val[k] = 0;
		rc = 0;
	}
	close(p[0]);
	while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
		;
	return rc;
}

void mwd_unlock(int fd)
{
	char link[64], path[PATH_MAX];
	if (fd < 0)
		return;
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(link, path, sizeof(path) - 1);
	if (n > 0) {
		path[n] = 0;
		/* still the current lock file (not replaced by a mount that gave up waiting):
		 * remove it while holding it; a waiter that opened it sees it replaced (mwd_lock)
		 */
		if (same_file(fd, path))
			unlink(path);
	}
	close(fd);
}

int mwd_set_dumpable(bool on)
{
	if (prctl(PR_SET_DUMPABLE, on ? 1 : 0, 0, 0, 0)) {
		int rc = -errno;
		fprintf(stderr, "memwalfs: prctl(PR_SET_DUMPABLE, %d): %s\n", on ? 1 : 0,
		        strerror(-rc));
		return rc;
	}
	return 0;
}

void mwd_memory_policy(void)
{
	const char *t = getenv("GLIBC_TUNABLES");

	if (t && strstr(t, "glibc.malloc."))
		return;
	/* fixed values also turn off glibc's own sliding threshold */
	mallopt(M_MMAP_THRESHOLD, 32 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

/* The value of the first line of path as a number; false when it is none ("max", no file). */
static bool read_u64_file(const char *path, uint64_t *out)
{
	char buf[64], *end;
	FILE *f = fopen(path, "re");

	if (!f)
		return false;
	bool ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok || buf[0] < '0' || buf[0] > '9')
		return false;
	*out = strtoull(buf, &end, 10);
	return *end == '\n' || *end == 0;
}

uint64_t mwd_memory_bytes(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0, lim;
	char line[PATH_MAX], path[PATH_MAX + 32];
	FILE *f = fopen("/proc/self/cgroup", "re");

	if (!f)
		return ram;
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		const char *v1 = strstr(line, ":memory:/");
		if (n < 5 || line[n - 1] != '\n')
			continue;
		line[n - 1] = 0;
		if (!strncmp(line, "0::/", 4)) /* the unified (v2) hierarchy */
			snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", line + 3);
		else if (v1) /* v1's memory controller ("no limit" is a huge number) */
			snprintf(path, sizeof(path),
			         "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", v1 + 8);
		else
			continue;
		if (read_u64_file(path, &lim) && lim && (!ram || lim < ram))
			ram = lim;
	}
	fclose(f);
	return ram;
}

size_t mwd_cache_default(void)
{
	uint64_t m = mwd_memory_bytes() / 16, lo = 256u << 20, hi = (uint64_t)2 << 30;

	return (size_t)(m < lo ? lo : m > hi ? hi : m);
}
