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

/* Start time of process pid (field 22 of /proc/PID/stat), 0 if gone; *zombie set. */
static unsigned long long proc_start(long pid, bool *zombie)
{
	char path[64], buf[1024];
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	*zombie = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return 0;
	buf[r] = 0;
	char *p = strrchr(buf, ')'); /* the command name may hold spaces */
	if (!p || p[1] != ' ')
		return 0;
	*zombie = p[2] == 'Z' || p[2] == 'X';
	/* after ") ": state is field 3; starttime is field 22 */
	p += 2;
	for (int f = 3; f < 22 && p; f++) {
		p = strchr(p, ' ');
		if (p)
			p++;
	}
	return p ? strtoull(p, NULL, 10) : 0;
}

/* Unmount mnt: umount2() as root, else fusermount3 -u.  0 or -1 (message printed). */
static int do_unmount(const char *mnt)
{
	if (geteuid() == 0) {
		if (umount2(mnt, 0) == 0)
			return 0;
		fprintf(stderr, "memwalfs: unmounting %s: %s\n", mnt, strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("memwalfs: fork");
		return -1;
	}
	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", mnt, (char *)NULL);
		perror("memwalfs: fusermount3");
		_exit(127);
	}
	int ws;
	while (waitpid(pid, &ws, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -1;
}

static void umount_usage(FILE *f)
{
	fprintf(f, "usage: memwalfs umount [--timeout SEC] MOUNTPOINT\n\n"
	           "Unmount the memwalfs filesystem at MOUNTPOINT and wait until its daemon has\n"
	           "committed every write and exited.  --timeout: give up waiting after SEC\n"
	           "seconds (default: wait).\n\n"
	           "Exit status: 0 the final commit succeeded; 1 it failed, or another mount of\n"
	           "the same store took the filesystem over while it was mounted here (fenced:\n"
	           "writes made here after that were refused with EIO and are not in the store),\n"
	           "or MOUNTPOINT is not a memwalfs mount, or the wait timed out; 2 bad usage.\n");
}

int cmd_umount(int argc, char **argv)
{
	const char *arg = NULL;
	long timeout = 0;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			umount_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) {
			timeout = strtol(argv[++i], NULL, 10);
		} else if (argv[i][0] != '-' && !arg) {
			arg = argv[i];
		} else {
			if (argv[i][0] == '-')
				fprintf(
				    stderr,
				    "memwalfs umount: unknown option %s (valid: --timeout SEC)\n",
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
		fprintf(stderr, "memwalfs: %s: %s\n", arg, strerror(errno));
		return 1;
	}
	ssize_t n = getxattr(mnt, MWFS_DAEMON_XATTR, info, sizeof(info) - 1);
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
	if (do_unmount(mnt))
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
	st[strcspn(st, "\n")] = 0;
	if (!strcmp(st, "ok")) {
		unlink(spath);
		return 0;
	}
	if (!strncmp(st, "fenced", 6)) {
		/* mount.c: engine_close() or the buffer write-out ended with -ESTALE */
		fprintf(stderr,
		        "memwalfs: %s: another mount of this filesystem took it over while it was "
		        "mounted here (this mount was fenced); writes made here after that were "
		        "refused with EIO and are not in the store\n",
		        mnt);
		unlink(spath);
	} else if (!strncmp(st, "lost: ", 6)) {
		/* mount.c engine_lost(): engine/watch.c found objects gone from the store */
		fprintf(
		    stderr,
		    "memwalfs: %s: the store lost objects this filesystem needs (%s): they were "
		    "deleted behind the mount's back.  From the moment that was found the mount "
		    "acknowledged no write, and it wrote no final state.  Recover what remains "
		    "with: memwalfs fsck --salvage STORE (README.md, \"When the store lost "
		    "objects\")\n",
		    mnt, st + 6);
		unlink(spath);
	} else if (!strncmp(st, "error", 5)) {
		fprintf(stderr, "memwalfs: %s: the daemon's final commit failed: %s\n", mnt, st);
		unlink(spath);
	} else {
		fprintf(stderr,
		        "memwalfs: %s: daemon %ld exited without a final status (killed?)\n", mnt,
		        pid);
	}
	return 1;
}
