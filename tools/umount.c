/*
 * umount.c - "memwalfs umount MOUNTPOINT" (the daemon lock and status files
 * it reads are in daemon.c; their design in daemon.h).
 *
 *   memwalfs umount [--timeout SEC] MOUNTPOINT
 *
 * reads the daemon's pid and status path from the root xattr, unmounts
 * (umount2 as root, else fusermount3 -u), waits until the daemon has
 * written out its buffers, committed (engine_close) and exited, and exits 0
 * only if its final status is "ok" (a fenced daemon's "fenced: ..." is
 * told apart from a failed commit).  Plain "fusermount3 -u" or "umount"
 * return before the final commit; the lock makes a mount that follows them
 * at once wait for that commit instead of fencing it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"
#include "daemon.h"
#include "fs.h"

/* ---- memwalfs umount ---------------------------------------------------- */

/*
 * /proc/PID/stat of pid, from its field 3 (the state) on, into buf (cap bytes): the command
 * name before it may hold spaces and parentheses.  Returns the text, or NULL if pid is gone.
 */
static const char *proc_stat(long pid, char *buf, size_t cap)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t r = read(fd, buf, cap - 1);
	close(fd);
	if (r <= 0)
		return NULL;
	buf[r] = 0;
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

/* Start time of process pid (field 22 of /proc/PID/stat), 0 if gone; *zombie set. */
static unsigned long long proc_start(long pid, bool *zombie)
{
	char buf[1024];
	const char *p = proc_stat(pid, buf, sizeof(buf));
	*zombie = false;
	if (!p)
		return 0;
	*zombie = p[0] == 'Z' || p[0] == 'X';
	/* p is field 3; starttime is field 22 */
	for (int f = 3; f < 22 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

/* ---- who holds a busy mount point ------------------------------------ */

/* 1 when the path link names (a /proc/PID/{cwd,root,fd/N} target) is mnt or below it. */
static int link_under(const char *link, const char *mnt, char *target, size_t cap)
{
	ssize_t n = readlink(link, target, cap - 1);
	if (n <= 0)
		return 0;
	target[n] = 0;
	size_t m = strlen(mnt);
	return !strncmp(target, mnt, m) && (target[m] == 0 || target[m] == '/');
}

/* The parent of process pid (field 4 of /proc/PID/stat), 0 if unknown. */
static long parent_of(long pid)
{
	char buf[1024];
	const char *p = proc_stat(pid, buf, sizeof(buf));
	long ppid = 0;
	return p && sscanf(p, "%*c %ld", &ppid) == 1 ? ppid : 0;
}

/* Is pid this process's parent, or its parent's parent, ... (a shell that ran us)? */
static bool is_ancestor(long pid)
{
	long a = (long)getppid();
	for (int depth = 0; a > 1 && depth < 64; depth++, a = parent_of(a))
		if (a == pid)
			return true;
	return false;
}

/*
 * Find up to 8 processes that hold mnt (their working directory, root or an open file below it;
 * a process of another mount namespace or one this user may not inspect is not seen); print
 * each to stderr on one line if print, after the line "memwalfs: unmounting MNT: busy: ...".
 * *ancestor: one of them is a shell (or other ancestor) of this process, which cannot let go
 * while it waits for us.  Reads /proc links only (no request reaches the daemon, which may be
 * stuck).  Returns how many were found.
 */
static int find_holders(const char *mnt, bool print, bool *ancestor)
{
	DIR *d = opendir("/proc");
	if (!d)
		return 0;
	int found = 0;
	struct dirent *e;
	char link[512], target[PATH_MAX], what[PATH_MAX + 32];
	while ((e = readdir(d)) && found < 8) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 0 || pid == (long)getpid())
			continue;
		what[0] = 0;
		snprintf(link, sizeof(link), "/proc/%ld/cwd", pid);
		if (link_under(link, mnt, target, sizeof(target)))
			snprintf(what, sizeof(what), "its working directory is %s", target);
		snprintf(link, sizeof(link), "/proc/%ld/root", pid);
		if (!what[0] && link_under(link, mnt, target, sizeof(target)))
			snprintf(what, sizeof(what), "its root directory is %s", target);
		snprintf(link, sizeof(link), "/proc/%ld/fd", pid);
		DIR *fds = what[0] ? NULL : opendir(link);
		struct dirent *f;
		while (fds && (f = readdir(fds))) {
			if (f->d_name[0] == '.')
				continue;
			snprintf(link, sizeof(link), "/proc/%ld/fd/%s", pid, f->d_name);
			if (link_under(link, mnt, target, sizeof(target))) {
				snprintf(what, sizeof(what), "it has %s open", target);
				break;
			}
		}
		if (fds)
			closedir(fds);
		if (!what[0])
			continue;
		char comm[64] = "?";
		snprintf(link, sizeof(link), "/proc/%ld/comm", pid);
		FILE *c = fopen(link, "re");
		if (c) {
			if (!fgets(comm, sizeof(comm), c))
				snprintf(comm, sizeof(comm), "?");
			fclose(c);
		}
		comm[strcspn(comm, "\n")] = 0;
		bool anc = is_ancestor(pid);
		*ancestor = *ancestor || anc;
		if (print)
			fprintf(stderr, "memwalfs:   process %ld (%s%s) holds it: %s\n", pid, comm,
			        anc ? ", which ran this command" : "", what);
		found++;
	}
	closedir(d);
	return found;
}

/* ---- unmount ------------------------------------------------------------ */

/*
 * One try at unmounting mnt: umount2() as root, else fusermount3 -u (its message kept in msg).
 * 0, -EBUSY (mount point in use), or -1 (failed otherwise; msg says why).
 */
static int unmount_once(const char *mnt, char *msg, size_t cap)
{
	msg[0] = 0;
	if (geteuid() == 0) {
		if (umount2(mnt, 0) == 0)
			return 0;
		int err = errno;
		snprintf(msg, cap, "%s", strerror(err));
		return err == EBUSY ? -EBUSY : -1;
	}
	int p[2];
	if (pipe2(p, O_CLOEXEC)) {
		snprintf(msg, cap, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(msg, cap, "fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		dup2(p[1], 2);
		execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
		fprintf(stderr, "cannot run fusermount3: %s", strerror(errno));
		_exit(127);
	}
	close(p[1]);
	size_t len = 0;
	ssize_t r;
	while (len + 1 < cap &&
	       ((r = read(p[0], msg + len, cap - 1 - len)) > 0 || (r < 0 && errno == EINTR)))
		if (r > 0)
			len += (size_t)r;
	msg[len] = 0;
	close(p[0]);
	msg[strcspn(msg, "\n")] = 0;
	int ws;
	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0)
		return 0;
	return strstr(msg, "busy") ? -EBUSY : -1;
}

/*
 * Unmount mnt.  While the mount point is busy, try again every 50 ms for up to busy_wait seconds
 * (a process that is exiting or a short-lived reader lets go), at once when a holder is a shell
 * that ran this command; then name the processes that hold it.  0 or -1 (message printed).
 */
static int do_unmount(const char *mnt, double busy_wait)
{
	struct timespec t0, now, ts = {0, 50 * 1000 * 1000};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	char msg[1024];
	bool checked = false, ancestor = false;
	for (;;) {
		int r = unmount_once(mnt, msg, sizeof(msg));
		if (r == 0)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		double waited = (double)(now.tv_sec - t0.tv_sec) + (now.tv_nsec - t0.tv_nsec) / 1e9;
		if (r != -EBUSY) {
			fprintf(stderr, "memwalfs: unmounting %s: %s\n", mnt, msg);
			return -1;
		}
		/* the shell that ran us, cd'ed in there, will not let go while we wait */
		if (!checked) {
			checked = true;
			find_holders(mnt, false, &ancestor);
		}
		if (waited >= busy_wait || ancestor)
			break;
		nanosleep(&ts, NULL);
	}
	char after[64] = "";
	if (!ancestor)
		snprintf(after, sizeof(after), " (still in use after %g s)", busy_wait);
	fprintf(
	    stderr,
	    "memwalfs: unmounting %s: busy%s: close the files open there and cd out of it, then "
	    "run memwalfs umount again\n",
	    mnt, after);
	if (!find_holders(mnt, true, &ancestor))
		fprintf(stderr, "memwalfs:   no process this user can see holds it (one of another "
		                "mount namespace may)\n");
	return -1;
}

/*
 * The real path of arg when arg is a dead FUSE mount (its daemon gone: realpath() and every
 * request there fail with ENOTCONN): its parent resolved, its last name kept.  0 or -1.
 */
static int dead_path(const char *arg, char *mnt, size_t cap)
{
	char copy[PATH_MAX], parent[PATH_MAX];
	snprintf(copy, sizeof(copy), "%s", arg);
	size_t n = strlen(copy);
	while (n > 1 && copy[n - 1] == '/')
		copy[--n] = 0;
	char *slash = strrchr(copy, '/');
	const char *base = slash ? slash + 1 : copy;
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == copy)
		snprintf(parent, sizeof(parent), "/");
	else
		snprintf(parent, sizeof(parent), "%.*s", (int)(slash - copy), copy);
	char rp[PATH_MAX];
	if (!*base || !realpath(parent, rp))
		return -1;
	if ((size_t)snprintf(mnt, cap, "%s/%s", strcmp(rp, "/") ? rp : "", base) >= cap)
		return -1;
	return 0;
}

/*
 * arg is a mount point whose daemon is gone (ENOTCONN): if it is a memwalfs mount, unmount it
 * and say what that means.  Returns the exit status.
 */
static int umount_dead(const char *arg, double busy_wait)
{
	char mnt[PATH_MAX], type[64], src[PATH_MAX];
	if (dead_path(arg, mnt, sizeof(mnt)) ||
	    !mwd_top_mount(mnt, type, sizeof(type), src, sizeof(src)) ||
	    strcmp(type, "fuse.memwalfs")) {
		fprintf(stderr, "memwalfs: %s: %s\n", arg, strerror(ENOTCONN));
		return 1;
	}
	if (chdir("/"))
		fprintf(stderr, "memwalfs: chdir /: %s\n", strerror(errno));
	if (do_unmount(mnt, busy_wait))
		return 1;
	fprintf(stderr,
	        "memwalfs: %s: its daemon was gone (killed or crashed): unmounted; what it had not "
	        "committed is lost, the next mount of %s replays what was\n",
	        mnt, src);
	return 1;
}

static void umount_usage(FILE *f)
{
	fprintf(f, "usage: memwalfs umount [--timeout SEC] [--busy-wait SEC] MOUNTPOINT\n\n"
	           "Unmount the memwalfs filesystem at MOUNTPOINT and wait until its daemon has\n"
	           "committed every write and exited.  --timeout: give up waiting after SEC\n"
	           "seconds (default: wait).  --busy-wait: while MOUNTPOINT is in use (a process\n"
	           "has a file open there or its working directory in it), try again for up to\n"
	           "SEC seconds (default 3), then name those processes and fail.\n\n"
	           "A dead mount (its daemon killed) is unmounted, with a message that says so.\n\n"
	           "Exit status: 0 the final commit succeeded; 1 it failed, or another mount of\n"
	           "the same store took the filesystem over while it was mounted here (fenced:\n"
	           "it says how many changes made here were never committed and are lost),\n"
	           "or MOUNTPOINT is not a memwalfs mount, or its daemon was gone, or the wait\n"
	           "timed out; 2 bad usage.\n");
}

int cmd_umount(int argc, char **argv)
{
	const char *arg = NULL;
	long timeout = 0;
	double busy_wait = 3;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			umount_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = strtol(argv[++i], NULL, 10);
		} else if (!strcmp(argv[i], "--busy-wait") && i + 1 < argc) {
			char *end;
			busy_wait = strtod(argv[++i], &end);
			if (*end || !(busy_wait >= 0 && busy_wait <= 86400)) {
				fprintf(
				    stderr,
				    "memwalfs umount: --busy-wait %s: give seconds, 0 to 86400\n",
				    argv[i]);
				return 2;
			}
		} else if (argv[i][0] != '-' && !arg) {
			arg = argv[i];
		} else {
			if (argv[i][0] == '-')
				fprintf(stderr,
				        "memwalfs umount: unknown option %s (valid: --timeout SEC, "
				        "--busy-wait SEC)\n",
				        argv[i]);
			umount_usage(stderr);
			return 2;
		}
	}
	if (!arg) {
		umount_usage(stderr);
		return 2;
	}
	char mnt[PATH_MAX], info[PATH_MAX + 32], spath[PATH_MAX];
	if (!realpath(arg, mnt)) {
		if (errno == ENOTCONN)
			return umount_dead(arg, busy_wait);
		fprintf(stderr, "memwalfs: %s: %s\n", arg, strerror(errno));
		return 1;
	}
	ssize_t n = getxattr(mnt, MWFS_DAEMON_XATTR, info, sizeof(info) - 1);
	if (n < 0 && errno == ENOTCONN)
		return umount_dead(mnt, busy_wait);
	long pid = 0;
	if (n > 0) {
		info[n] = 0;
		char *sp = strchr(info, ' ');
		pid = strtol(info, NULL, 10);
		if (!sp || pid <= 0 || snprintf(spath, sizeof(spath), "%s", sp + 1) <= 0)
			n = -1;
		spath[strcspn(spath, "\n")] = 0;
	}
	if (n <= 0) {
		fprintf(stderr, "memwalfs: %s: not a memwalfs mount point (%s)\n", mnt,
		        n < 0 ? strerror(errno) : "no daemon information");
		return 1;
	}
	bool zombie;
	unsigned long long start = proc_start(pid, &zombie);
	/* run from a shell cd'ed in there, this process would hold the mount point itself */
	if (chdir("/"))
		fprintf(stderr, "memwalfs: chdir /: %s\n", strerror(errno));
	if (do_unmount(mnt, busy_wait))
		return 1;
	struct timespec t0, now, ts = {0, 20 * 1000 * 1000};
	clock_gettime(CLOCK_MONOTONIC, &t0);
	bool told = false;
	while (start) {
		unsigned long long s = proc_start(pid, &zombie);
		if (!s || s != start || zombie)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long waited = (long)(now.tv_sec - t0.tv_sec);
		if (timeout > 0 && waited >= timeout) {
			fprintf(stderr,
			        "memwalfs: daemon %ld still committing after %ld s; giving up\n",
			        pid, timeout);
			return 1;
		}
		if (waited >= 3 && !told) {
			fprintf(stderr, "memwalfs: waiting for daemon %ld to commit...\n", pid);
			told = true;
		}
		nanosleep(&ts, NULL);
	}
	char st[512] = "";
	FILE *f = fopen(spath, "re");
	if (f) {
		if (!fgets(st, sizeof(st), f))
			st[0] = 0;
		fclose(f);
	}
	/* the daemon is gone: nobody else reads its status (daemon.h) */
	unlink(spath);
	st[strcspn(st, "\n")] = 0;
	if (!strcmp(st, "ok"))
		return 0;
	if (!strncmp(st, "fenced", 6)) {
		/* mount.c: engine_close() or the buffer write-out ended with -ESTALE */
		fprintf(stderr,
		        "memwalfs: %s: another mount of this filesystem took it over while it was "
		        "mounted here (this mount was fenced): %s\n",
		        mnt,
		        st[6] == ':' && st[7] == ' ' && st[8]
		            ? st + 8
		            : "writes made here after that were refused with EIO and are not in "
		              "the store");
	} else if (!strncmp(st, "lost: ", 6)) {
		/* mount.c engine_lost(): engine/check/watch.c found objects gone from the store */
		fprintf(
		    stderr,
		    "memwalfs: %s: the store lost objects this filesystem needs (%s): they were "
		    "deleted behind the mount's back.  From the moment that was found the mount "
		    "acknowledged no write, and it wrote no final state.  Recover what remains "
		    "with: memwalfs fsck --salvage STORE (README.md, \"When the store lost "
		    "objects\")\n",
		    mnt, st + 6);
	} else if (!strncmp(st, "error", 5)) {
		fprintf(stderr, "memwalfs: %s: the daemon's final commit failed: %s\n", mnt, st);
	} else {
		fprintf(stderr,
		        "memwalfs: %s: daemon %ld exited without a final status (killed?)\n", mnt,
		        pid);
	}
	return 1;
}
