/*
 * diskcache.h - the disk tier under the engine's memory caches
 * (engine/cache/diskcache.c, docs/CACHE.md).
 *
 * A directory of files, one per entry, holding copies of immutable store
 * bytes (verified pack blocks, sealed SSTable blocks) so that a remount or a
 * working set larger than the memory caches reads them from local disk
 * instead of the store.  Keys are opaque bytes chosen by the caller; every
 * entry is checksummed (XXH3) and checked on every read: an entry that is
 * torn, truncated, corrupt, of another length or another key is deleted and
 * reported as a miss, never returned.  The caller verifies the bytes once
 * more against its own checksum (descriptor hash, block trailer) and calls
 * diskcache_drop() when they do not match.
 *
 * Writes are behind: diskcache_put() copies the bytes into a bounded queue
 * (diskcache_put_shared() queues the caller's buffer instead) that a few
 * background writer threads write out (temporary file, rename); when the
 * queue is full the entry is dropped.  The writers keep the total size
 * within the bound, evicting the least recently used entries (the order is
 * rebuilt at open from the files' modification times, which hits refresh).
 *
 * The directory is locked (flock) by one cache at a time: a second
 * diskcache_open() on it fails with -EBUSY.  A directory that cannot be
 * created or locked, or that another user could tamper with, fails the
 * open; one that fills up or fails a write
 * later stops further inserts with one warning (reads go on).
 *
 * Threads: every function may be called from any thread at once, except
 * diskcache_close(), which must be the last call.
 */
#ifndef MEMWALFS_DISKCACHE_H
#define MEMWALFS_DISKCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct diskcache;

#define DISKCACHE_KEY_MAX 256            /* longest key */
#define DISKCACHE_VALUE_MAX (16u << 20)  /* largest entry */
#define DISKCACHE_AUTO UINT64_MAX        /* max_bytes: the default bound */
#define DISKCACHE_AUTO_CAP (10ull << 30) /* the default bound is at most 10 GiB */

struct diskcache_opts {
	const char *dir;    /* the directory (created 0700, with parents, if missing) */
	uint64_t max_bytes; /* size bound of the files; DISKCACHE_AUTO: half of the free space
	                       of its filesystem plus what the cache holds, at most 10 GiB */
	size_t queue_bytes; /* bytes waiting to be written at most (0: 32 MiB) */
	unsigned writers;   /* writer threads (0: 4; at most 16) */
};

struct diskcache_stats {
	uint64_t hits, hit_bytes;       /* reads served, their bytes */
	uint64_t misses;                /* reads that found no valid entry */
	uint64_t corrupt;               /* entries found damaged (dropped) */
	uint64_t inserts, insert_bytes; /* entries written, their bytes */
	uint64_t dropped;               /* puts not written (queue full, inserts stopped) */
	uint64_t evictions;             /* entries removed by the bound */
	uint64_t bytes, entries;        /* held now (file bytes, count) */
	uint64_t capacity;              /* the bound */
	bool inserting;                 /* inserts still enabled */
};

/*
 * Open (creating it if needed) the cache in o->dir, lock it and start its
 * thread, which first indexes the files already there.  On success *out is
 * the cache.  -EBUSY: another cache holds the directory; -EPERM: the directory
 * or one on the way to it belongs to another user than the caller (geteuid())
 * or root, or others may write into it (one on the way may if it is sticky),
 * or a link on the way was made by another user (diskcache.c, "Safety";
 * logged here, with what to do); -ELOOP: its lock file is a link (logged);
 * other negative errno: the directory cannot be created, opened or locked
 * (logged by the caller).
 */
int diskcache_open(const struct diskcache_opts *o, struct diskcache **out);

/* Write what is queued, stop the thread, unlock and free.  Accepts NULL. */
void diskcache_close(struct diskcache *dc);

/*
 * diskcache_get() flag: do not check the data against the entry's check
 * value; the caller checks the bytes against its own checksum (descriptor
 * hash, block trailer) and calls diskcache_drop(.., true) when they are
 * wrong, so that each byte read is hashed once.  The entry's header, key and
 * size are checked all the same.
 */
#define DISKCACHE_GET_CALLER_CHECKS 1u

/*
 * Read the entry of key into dst, which must be exactly len bytes long.
 * flags: 0 or DISKCACHE_GET_CALLER_CHECKS.  0: dst holds the entry, checked
 * (with the flag: of the right key and size, the data unchecked); -ENOENT:
 * no valid entry of that key and length (a damaged one was deleted).  Never
 * another error.
 */
int diskcache_get(struct diskcache *dc, const void *key, size_t klen, void *dst, size_t len,
                  unsigned flags);

/*
 * Read data bytes [off, off + len) of the entry of key, whose data is total
 * bytes long, into dst: a part of a large entry (a window of blocks the
 * caller checks one by one) for two preads, not the whole.  The header, key
 * and total length are checked; the part's bytes only by the caller, so a
 * part that is not the whole entry needs DISKCACHE_GET_CALLER_CHECKS (else
 * -ENOENT).  The whole entry: as diskcache_get().  0 or -ENOENT as there.
 */
int diskcache_get_part(struct diskcache *dc, const void *key, size_t klen, size_t total, size_t off,
                       void *dst, size_t len, unsigned flags);

/*
 * Queue key -> data[0, len) to be written (copied; the caller keeps data).
 * Best effort: dropped when the queue is full, inserts are stopped or the
 * sizes exceed the limits above.
 */
void diskcache_put(struct diskcache *dc, const void *key, size_t klen, const void *data,
                   size_t len);

/*
 * As diskcache_put(), without the copy: data must stay as it is until the
 * cache calls release(arg), once, when it has written the entry or dropped
 * it (perhaps before this returns; from any thread, with no lock of the
 * cache held).
 */
void diskcache_put_shared(struct diskcache *dc, const void *key, size_t klen, const void *data,
                          size_t len, void (*release)(void *), void *arg);

/*
 * Delete the entry of key (its bytes were wrong for the caller); corrupt:
 * count it in diskcache_stats.corrupt.
 */
void diskcache_drop(struct diskcache *dc, const void *key, size_t klen, bool corrupt);

/* Wait until everything queued so far is written (tests, close). */
void diskcache_flush(struct diskcache *dc);

/* Copy the counters. */
void diskcache_get_stats(struct diskcache *dc, struct diskcache_stats *out);

#endif /* MEMWALFS_DISKCACHE_H */
