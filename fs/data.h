/*
 * data.h - putting file data (fs/data.c): data puts, the puts of the
 * per-inode write buffers (wbuf.h) and the flusher thread.  Internal to fs/.
 *
 * Every put takes ip->dlock exclusive from its caller and is called with
 * fs->mu NOT held: a put may wait for backpressure and scan the store, and
 * every lookup needs fs->mu.
 */
#ifndef MEMWALFS_FS_DATA_H
#define MEMWALFS_FS_DATA_H

#include <stddef.h>
#include <stdint.h>

struct mwfs;
struct inode;
struct flusher;

/*
 * Put n bytes at off of ip as one extent (trimming what it overlaps) with the
 * inode record, in one batch.  All-zero bytes become a hole.
 */
int data_put(struct mwfs *fs, struct inode *ip, uint64_t off, const uint8_t *data, size_t n);

/*
 * Copy n bytes (at most chunk_size) at file offset off into ip's write
 * buffer (wbuf_add()): the buffer is put first when the write cannot join
 * it, and after when it is full.  A buffer that starts holding bytes is
 * listed for the flusher.
 */
int data_write(struct mwfs *fs, struct inode *ip, uint64_t off, const void *src, uint32_t n);

/* Put ip's buffered runs (clipped to the file's size) in one batch. */
int data_flush(struct mwfs *fs, struct inode *ip);

/* Put every inode's buffer (at unmount; takes fs->mu between inodes).  The first error. */
int data_flush_all(struct mwfs *fs);

/*
 * The flusher: puts a file's partly written chunk into the engine once it
 * has held unwritten bytes for flush_ms, so that what the daemon has
 * received is committed within about two cadence intervals even while the
 * file stays open and no one calls fsync; folds crowded windows; reclaims
 * the unlinked inodes handlers queued (inode_reclaim_queued()).
 */
/* Start the flusher thread (every ms milliseconds).  *out only on success. */
int data_flusher_start(struct mwfs *fs, unsigned ms, struct flusher **out);

/* Windows folded into one extent since start (0 for NULL). */
uint64_t data_flusher_folded(struct flusher *wf);

/* Stop the thread and drop every reference it holds (fs->mu not held). Accepts NULL. */
void data_flusher_stop(struct flusher *wf);

#endif /* MEMWALFS_FS_DATA_H */
