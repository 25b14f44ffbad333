/*
 * wbuf.h - data puts and the per-inode write buffer (fs/wbuf.c).
 *
 * Every function takes ip->dlock exclusive from its caller and is called
 * with fs->mu NOT held: a put may wait for backpressure and scan the store,
 * and every lookup needs fs->mu.
 */
#ifndef MEMWALFS_FS_WBUF_H
#define MEMWALFS_FS_WBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct mwfs;
struct inode;
struct wbflush;

/* One inode's write buffer: a run of contiguous unwritten bytes (ip->dlock). */
struct wbuf {
	uint64_t off;      /* file offset of data[0] */
	uint8_t *data;     /* chunk_size bytes */
	uint32_t len;      /* bytes [off, off + len) hold unwritten data */
	bool active;       /* holds unwritten bytes */
	uint64_t since_ms; /* CLOCK_MONOTONIC ms when it became active */
};

/*
 * Put n bytes at off of ip as one extent (trimming what it overlaps) with the
 * inode record, in one batch.  All-zero bytes become a hole.
 */
int data_put(struct mwfs *fs, struct inode *ip, uint64_t off, const uint8_t *data, size_t n);

/* Whether a write of n bytes at off joins w's run without putting it first. */
bool wbuf_absorbs(const struct mwfs *fs, const struct wbuf *w, uint64_t off, size_t n);

/*
 * Copy n bytes (at most chunk_size) at file offset off into ip's buffer,
 * putting the buffer's run first if the write does not continue it, and
 * after if the buffer is full.
 */
int wbuf_write(struct mwfs *fs, struct inode *ip, uint64_t off, const void *src, uint32_t n);

/* Put ip's buffered run (clipped to the file's size). */
int wbuf_flush(struct mwfs *fs, struct inode *ip);

/* Put every inode's buffer (at unmount; takes fs->mu between inodes).  The first error. */
int wbuf_flush_all(struct mwfs *fs);

/* Forget the buffered bytes (a truncation dropped them, or they were put). */
static inline void wbuf_drop(struct wbuf *w)
{
	w->active = false;
	w->len = 0;
}

/* Free the buffer's memory (the inode is being freed). */
static inline void wbuf_release(struct wbuf *w)
{
	free(w->data);
	w->data = NULL;
	wbuf_drop(w);
}

/*
 * The flusher: puts a file's partly written chunk into the engine once it
 * has held unwritten bytes for flush_ms, so that what the daemon has
 * received is committed within about two cadence intervals even while the
 * file stays open and no one calls fsync.
 */
/* Start the flusher thread (every ms milliseconds).  *out only on success. */
int wbflush_start(struct mwfs *fs, unsigned ms, struct wbflush **out);

/*
 * Note that ip's write buffer just started holding unwritten bytes
 * (ip->dlock held exclusive, fs->mu not held).  Takes a reference on ip
 * until the flusher has seen the buffer empty.  Accepts a NULL flusher.
 */
void wbflush_note(struct wbflush *wf, struct inode *ip);

/* Windows folded into one extent since start (0 for NULL). */
uint64_t wbflush_folded(struct wbflush *wf);

/* Stop the thread and drop every reference it holds (fs->mu not held). Accepts NULL. */
void wbflush_stop(struct wbflush *wf);

#endif /* MEMWALFS_FS_WBUF_H */
