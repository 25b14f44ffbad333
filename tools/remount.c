/*
 * remount.c - "memwalfs mount -o remount": change the flags of a live mount
 * (interface in tools/mount.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "mount.h"

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
int mount_remount(struct mount_args *a)
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
