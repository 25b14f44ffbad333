/*
 * wbuf.h - chunk I/O and the per-inode write buffer (fs/wbuf.c).
 *
 * Every function takes ip->dlock from its caller (shared for chunk_read(),
 * exclusive for the rest) and is called with fs->mu NOT held: a put may
 * wait for backpressure and a read for the store, and every lookup needs
 * fs->mu.
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

/* One inode's write buffer: one chunk, partly written (ip->dlock). */
struct wbuf {
	uint64_t idx;  /* chunk index */
	uint8_t *data; /* chunk_size bytes */
	uint32_t lo;   /* dirty byte range [lo, hi) within the chunk */
	uint32_t hi;
	bool base;         /* data holds the whole chunk (stored bytes merged in) */
	bool active;       /* holds unwritten bytes */
	uint64_t since_ms; /* CLOCK_MONOTONIC ms when it became active */
};

/*
 * Read n bytes at offset co of chunk idx of inode ino into dst; holes and
 * the tail past the value read as 0.  A store that does not answer is
 * waited for: always when wait is set (a write depends on the bytes), else
 * while fewer than half the request threads wait so (then the error).
 */
int chunk_read(struct mwfs *fs, uint64_t ino, uint64_t idx, uint32_t co, uint8_t *dst, size_t n,
               bool wait);

/* Put chunk idx of ip (vlen bytes; all zeros: delete it) with the inode record, in one batch. */
int chunk_put(struct mwfs *fs, struct inode *ip, uint64_t idx, const uint8_t *data, size_t vlen);

/*
 * Copy n bytes at offset co of chunk idx into ip's buffer, putting the
 * buffer first if it holds another chunk, and after if the chunk is done.
 */
int wbuf_write(struct mwfs *fs, struct inode *ip, uint64_t idx, uint32_t co, const void *src,
               uint32_t n);

/* Put ip's buffered bytes, merged with the stored chunk when partial. */
int wbuf_flush(struct mwfs *fs, struct inode *ip);

/* Put every inode's buffer (at unmount; takes fs->mu between inodes).  The first error. */
int wbuf_flush_all(struct mwfs *fs);

/* Forget the buffered bytes (a truncation dropped them). */
static inline void wbuf_drop(struct wbuf *w)
{
	w->active = false;
	w->base = false;
	w->lo = w->hi = 0;
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

/* Stop the thread and drop every reference it holds (fs->mu not held). Accepts NULL. */
void wbflush_stop(struct wbflush *wf);

#endif /* MEMWALFS_FS_WBUF_H */
