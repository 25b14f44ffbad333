/*
 * readahead.h - sequential read-ahead for fs/file.c (see readahead.c).
 * Internal to fs/.
 */
#ifndef MEMWALFS_FS_READAHEAD_H
#define MEMWALFS_FS_READAHEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mwfs;
struct inode;
struct readahead;

/*
 * Start nthreads prefetch threads for fs (window: bytes ahead of a
 * sequential reader).  nthreads 0 or window 0: no threads, no prefetch (the
 * in-flight table still deduplicates concurrent loads).  On success *out is
 * the pool.  -ENOMEM or -errno of pthread_create.  Called by mwfs_open().
 */
int ra_start(struct mwfs *fs, unsigned nthreads, uint64_t window, struct readahead **out);

/* Stop the threads (queued jobs are dropped) and free the pool.  Accepts NULL. */
void ra_stop(struct readahead *ra);
/*
 * pause: drop the queued prefetches, start none, and return once none is being loaded (a
 * mount switching engines, mode.c); !pause: go on.  Accepts NULL.
 */
void ra_pause(struct readahead *ra, bool pause);

/*
 * A read of [off, off+len) of ip (file size fsize) was asked for: update
 * ip's sequential-access state and queue prefetches of the chunks ahead of
 * a sequential reader.  Never blocks on I/O.  Any thread.
 */
void ra_note_read(struct readahead *ra, struct inode *ip, uint64_t off, size_t len, uint64_t fsize);

/*
 * Before loading chunk idx of inode ino: if another thread is loading it
 * right now, wait until it is done and return -1 (the bytes are then in the
 * engine's cache); else claim it and return a slot for ra_end() (or -1 when
 * the table is full: load without deduplication).
 */
int ra_begin(struct readahead *ra, uint64_t ino, uint64_t idx);

/* Release a slot returned by ra_begin() (-1 is ignored) and wake waiters. */
void ra_end(struct readahead *ra, int slot);

/* Chunks prefetched and reads that waited for a load in flight, since start. */
void ra_counts(struct readahead *ra, uint64_t *prefetched, uint64_t *waited);

#endif /* MEMWALFS_FS_READAHEAD_H */
