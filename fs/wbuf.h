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

/* Runs one write buffer holds at most. */
#define WBUF_RUNS 64

/* One run of contiguous unwritten bytes: file range, and where its bytes are in data. */
struct wbuf_run {
	uint64_t off;
	uint32_t len;
	uint32_t at;
};

/*
 * One inode's write buffer (ip->dlock): up to WBUF_RUNS disjoint runs of
 * unwritten bytes, chunk_size bytes in all, put together in one batch.
 */
struct wbuf {
	uint8_t *data;        /* chunk_size bytes; runs' bytes one after another */
	uint32_t used;        /* bytes of data in use */
	uint32_t nruns;       /* runs in run[] (0: empty) */
	struct wbuf_run *run; /* WBUF_RUNS of them, allocated with data */
	bool active;          /* holds unwritten bytes */
	uint64_t since_ms;    /* CLOCK_MONOTONIC ms when it became active */
};

/*
 * Put n bytes at off of ip as one extent (trimming what it overlaps) with the
 * inode record, in one batch.  All-zero bytes become a hole.
 */
int data_put(struct mwfs *fs, struct inode *ip, uint64_t off, const uint8_t *data, size_t n);

/* Whether a write of n bytes at off lies inside or continues one of w's runs. */
bool wbuf_absorbs(const struct mwfs *fs, const struct wbuf *w, uint64_t off, size_t n);

/*
 * Copy n bytes (at most chunk_size) at file offset off into ip's buffer:
 * into the run it lies in or continues, else as a new run; the buffer is put
 * first when the write overlaps a run only in part or there is no room, and
 * after when it is full.
 */
int wbuf_write(struct mwfs *fs, struct inode *ip, uint64_t off, const void *src, uint32_t n);

/* Lay the buffered bytes of [off, off + len) over buf (a read). */
void wbuf_overlay(const struct wbuf *w, uint64_t off, uint8_t *buf, size_t len);

/* Put ip's buffered runs (clipped to the file's size) in one batch. */
int wbuf_flush(struct mwfs *fs, struct inode *ip);

/* Put every inode's buffer (at unmount; takes fs->mu between inodes).  The first error. */
int wbuf_flush_all(struct mwfs *fs);

/* Forget the buffered bytes (a truncation dropped them, or they were put). */
static inline void wbuf_drop(struct wbuf *w)
{
	w->active = false;
	w->used = 0;
	w->nruns = 0;
}

/* Free the buffer's memory (the inode is being freed). */
static inline void wbuf_release(struct wbuf *w)
{
	free(w->data);
	free(w->run);
	w->data = NULL;
	w->run = NULL;
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
