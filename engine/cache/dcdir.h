/*
 * dcdir.h - the disk cache's directory (engine/cache/dcdir.c): opened one name at a time,
 * trusted only when nobody but the mount's user or root could have changed it, and locked.
 * Used by diskcache.c's open.  No state: any thread.
 */
#ifndef MEMWALFS_DCDIR_H
#define MEMWALFS_DCDIR_H

/*
 * Open the cache directory dir, making it and its missing parents (0700): one name at a
 * time from "/", each directory opened relative to the one before it, so that the
 * directory checked is the one used.  Every directory reached must belong to the mount's
 * user or to root and be writable by nobody else (one on the way may be if it is sticky,
 * like /tmp); a symbolic link on the way is followed only if root or the mount's user made
 * it (what the kernel's protected_symlinks asks in sticky directories).  0 and *out its
 * descriptor (the caller closes it), or a negative errno (-EPERM when not trusted; logged
 * with what to do).
 */
int dcdir_open(const char *dir, int *out);

/*
 * Open and flock (exclusive, not waiting) dfd's "lock" (never through a link; dir: the
 * directory's name, for the log).  0 with *lockfd; -EBUSY (another cache has it), or
 * another negative errno (*lockfd may then be an open descriptor or -1: the caller closes
 * it when >= 0).
 */
int dcdir_lock(int dfd, const char *dir, int *lockfd);

#endif /* MEMWALFS_DCDIR_H */
