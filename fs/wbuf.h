/*
 * wbuf.h - the per-inode write buffer (fs/wbuf.c): bytes of small writes
 * gathered in memory until data.c puts them.
 *
 * A leaf: it knows bytes, runs and the chunk size, nothing of the inode
 * table, the engine or the store.  The inode that embeds it (internal.h)
 * frees it with wbuf_release(); data.c decides when it is put.  The caller
 * holds the owning inode's ip->dlock (exclusive to change it, shared to
 * read it).
 */
#ifndef MEMWALFS_FS_WBUF_H
#define MEMWALFS_FS_WBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Runs one write buffer holds at most. */
#define WBUF_RUNS 64

/* One run of contiguous unwritten bytes: file range, and where its bytes are in data. */
struct wbuf_run {
	uint64_t off;
	uint32_t len;
	uint32_t at;
};

/*
 * One inode's write buffer: up to WBUF_RUNS disjoint runs of unwritten
 * bytes, cs (the chunk size) bytes in all, put together in one batch.
 */
struct wbuf {
	uint8_t *data;        /* cs bytes; runs' bytes one after another */
	uint32_t used;        /* bytes of data in use */
	uint32_t nruns;       /* runs in run[] (0: empty) */
	struct wbuf_run *run; /* WBUF_RUNS of them, allocated with data */
	bool active;          /* holds unwritten bytes */
	uint64_t since_ms;    /* CLOCK_MONOTONIC ms when it became active */
};

/* A part of the buffer to put: file range and its bytes (borrowed from the buffer). */
struct wbuf_piece {
	uint64_t off, len;
	const uint8_t *data;
};

/* Whether a write of n bytes at off lies inside or continues one of w's runs (cs: chunk size). */
bool wbuf_absorbs(const struct wbuf *w, uint32_t cs, uint64_t off, size_t n);

/*
 * Copy n bytes (at most cs) at file offset off into w: into the run it lies
 * in or continues, else as a new run.  0 (*started: w was empty and is now
 * active), -ENOMEM, or WBUF_PUT_FIRST when the write overlaps a run only in
 * part or there is no room: nothing is copied, the buffer must be put first.
 */
#define WBUF_PUT_FIRST 1
int wbuf_add(struct wbuf *w, uint32_t cs, uint64_t off, const void *src, uint32_t n, bool *started);

/* Whether w is full (cs bytes used): it is put at once. */
static inline bool wbuf_full(const struct wbuf *w, uint32_t cs)
{
	return w->used == cs;
}

/*
 * The pieces of w to put, clipped to a file of size bytes (a truncation may
 * have cut a run short), into out (WBUF_RUNS of them).  Returns how many.
 */
size_t wbuf_pieces(const struct wbuf *w, uint64_t size, struct wbuf_piece *out);

/* Lay the buffered bytes of [off, off + len) over buf (a read). */
void wbuf_overlay(const struct wbuf *w, uint64_t off, uint8_t *buf, size_t len);

/* Forget the buffered bytes (a truncation dropped them, or they were put). */
static inline void wbuf_drop(struct wbuf *w)
{
	w->active = false;
	w->used = 0;
	w->nruns = 0;
}

/* Free the buffer's memory (the inode is being freed, or closed with nothing buffered). */
static inline void wbuf_release(struct wbuf *w)
{
	free(w->data);
	free(w->run);
	w->data = NULL;
	w->run = NULL;
	wbuf_drop(w);
}

#endif /* MEMWALFS_FS_WBUF_H */
