/*
 * daemon.h - how a memwalfs daemon makes its end observable, shared by
 * "memwalfs mount" (the daemon) and "memwalfs umount" (tools/umount.c);
 * implemented in tools/daemon.c.
 *
 * Two small files in the run directory (/run/memwalfs as root, else
 * $XDG_RUNTIME_DIR/memwalfs or /tmp/memwalfs-UID):
 *
 *   store-HASH.lock   flock()ed by the writer daemon of one store from before
 *                     engine_open() until after engine_close() has returned.
 *                     HASH is FNV-1a 64 of the canonical store name (the real
 *                     path of a local store; endpoint + bucket/prefix of S3).
 *                     Its text is "pid\nmountpoint\nfsname\n" of the holder.
 *   daemon-PID.status one line written by the daemon: "serving" once mounted,
 *                     then "ok", "error: ..." or (fenced by a newer writer)
 *                     "fenced: ..." after its final commit.  Removed by the
 *                     "memwalfs umount" that read it, else by the next
 *                     mount's mwd_status_gc() a minute after its daemon is
 *                     gone.
 *
 * The root directory answers getxattr(MWFS_DAEMON_XATTR) with "PID STATUSPATH"
 * so that "memwalfs umount" can find both before it unmounts.
 *
 * A new writer mount of a store whose lock is held waits (bounded) for a
 * daemon that is closing (its mount is gone), so that it never fences a
 * daemon still committing its last writes.  A holder that is still mounted
 * is a live writer: the new mount is refused (a second mount by mistake,
 * fstab plus a manual mount, would fence it and lose what it has not
 * committed), unless --takeover asks to fence it; so is a holder still
 * there after the wait.  Across machines nothing here helps: the engine's
 * epoch lease decides (docs/WAL.md).
 */
#ifndef MEMWALFS_TOOLS_DAEMON_H
#define MEMWALFS_TOOLS_DAEMON_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "store.h"

/*
 * Write the canonical name of store url (with the S3 options o, may be NULL)
 * into out (n bytes).  A local store must already exist.  0 or -errno.
 */
int mwd_store_name(const char *url, const struct s3_opts *o, char *out, size_t n);

/* The daemon a takeover fences (mwd_lock()). */
struct mwd_holder {
	pid_t pid;          /* its process id (0: none was fenced) */
	char mnt[PATH_MAX]; /* its mount point, as it wrote it in the lock file */
};

/*
 * Take the per-store lock of canonical store name for a daemon about to
 * open the engine and mount fsname at mountpoint.  Waits up to wait_sec
 * seconds (printing a message on stderr) while the holder is a closing
 * daemon.  A holder that is still mounted is a live writer: without
 * takeover the lock is not taken and -EALREADY returned, the holder described
 * in *fenced (the caller follows it, tools/hold.c); a holder still there
 * after the wait is refused (-EBUSY, with a message on stderr).  With
 * takeover the lock is taken over and, when fenced is not NULL, the holder
 * is described there (the caller makes it learn that it was fenced).  On
 * success *fd is the lock descriptor (O_CLOEXEC; the lock ends when it is
 * closed or the process exits).  Returns 0, -EALREADY, -EBUSY, or another
 * -errno when the run directory cannot be used (the mount then proceeds
 * without a lock; the caller logs it).
 */
int mwd_lock(const char *name, const char *mountpoint, const char *fsname, unsigned wait_sec,
             bool takeover, struct mwd_holder *fenced, int *fd);

/*
 * Ask the memwalfs mount at mnt, from a child process that is killed after
 * timeout_ms (a hung daemon does not hang the caller): with sync, first
 * syncfs(2) it (the kernel's dirty pages reach its daemon); then
 * getxattr(xattr) on its root, whose value (cut to vn - 1 bytes) goes to
 * val.  For a takeover: MWFS_SYNC_XATTR before the claim (the old mount
 * commits what it holds), MWFS_FENCE_XATTR after it (the old mount learns
 * that it was fenced).  0, -ETIMEDOUT, or the -errno of the child's calls.
 */
int mwd_ask_mount(const char *mnt, bool sync, const char *xattr, char *val, size_t vn,
                  unsigned timeout_ms);

/*
 * Release the lock of mwd_lock() at the daemon's exit: removes the lock file
 * (unless a newer mount already replaced it), then closes fd.  Accepts -1.
 */
void mwd_unlock(int fd);

/*
 * Make this process (and the processes it forks) dumpable or not
 * (prctl(PR_SET_DUMPABLE)).  A daemon is not dumpable by default: its memory
 * holds the S3 secret key, which a core dump (or a debugger of the same user)
 * would expose.  Not dumpable also makes the files of /proc/PID owned by root
 * (their modes unchanged: stat, status and cmdline stay world-readable).
 * 0, or -errno (printed).
 */
int mwd_set_dumpable(bool on);

/*
 * The daemon's allocator policy, set before its threads start: blocks of up
 * to 32 MiB (GET buffers, packs, FUSE buffers) come from malloc's arenas and
 * their memory is reused after free, and an arena gives memory back only
 * when 256 MiB at its top are free.  By default glibc maps each big block
 * afresh and unmaps it at free, and every page of it then faults when first
 * written: on the 2-core test machine a fault costs 13 us, and a cold 1 GiB
 * read took 120,000 of them (docs/DESIGN.md, Memory).  Left alone when
 * GLIBC_TUNABLES sets a malloc tunable (the user's choice wins).
 */
void mwd_memory_policy(void);

/*
 * The memory a mount may plan on: the machine's RAM, or the limit of the
 * daemon's cgroup (v2 memory.max, v1 memory.limit_in_bytes) when lower.  0 when unknown.
 */
uint64_t mwd_memory_bytes(void);

/*
 * Default memory cache of a mount of an S3 store: a sixteenth of
 * mwd_memory_bytes(), at least 256 MiB and at most 2 GiB (docs/CACHE.md).
 */
size_t mwd_cache_default(void);

/* Path of the status file of daemon pid into out (n bytes).  0 or -errno. */
int mwd_status_path(pid_t pid, char *out, size_t n);

/*
 * Replace the status file at path with the one line text (written to a
 * temporary file, fsynced, renamed).  0 or -errno.
 */
int mwd_status_write(const char *path, const char *text);

/*
 * Remove the status files that nobody will read: those of daemons that are
 * gone (exited, killed, or their pid now another process's) and that were
 * last written more than a minute ago, whatever they say ("memwalfs umount"
 * removes the one it read; this removes those of mounts unmounted by
 * fusermount3 -u or umount, and of daemons killed with -9).  Also the lock
 * files of stores that nobody holds and nobody has locked for an hour.
 * Best effort; run by every mount before it writes its own status file.
 */
void mwd_status_gc(void);

/*
 * Is mountpoint (a real path) a mount point here?  If so, copies the type
 * ("fuse.memwalfs", "ext4", ...) and source of the mount on top into
 * type/src (tn/sn bytes) and returns true.
 */
bool mwd_top_mount(const char *mountpoint, char *type, size_t tn, char *src, size_t sn);

/*
 * Set the kernel's read-ahead of the FUSE mount on top of mountpoint (a real
 * path) to bytes (rounded down to KiB), through its backing device's
 * /sys/class/bdi/MAJ:MIN/read_ahead_kb; reads /proc/self/mountinfo only, so
 * it may be called before the daemon answers the kernel's INIT (which then
 * keeps the lower of this and the max_readahead it is given).  0, -ENOENT
 * (no FUSE mount there) or the -errno of the sysfs write (-EACCES when not
 * root).
 */
int mwd_set_kernel_readahead(const char *mountpoint, uint64_t bytes);

#endif /* MEMWALFS_TOOLS_DAEMON_H */
