/*
 * wbuf.c - the per-inode write buffer: runs of small writes gathered in
 * memory (see wbuf.h).
 *
 * The buffer gathers runs of small writes of an inode (up to the chunk
 * size, 1 MiB by default, in up to WBUF_RUNS runs): a write that continues a
 * run or lands inside it joins it, a write elsewhere starts a new run, and a
 * write that overlaps a run only in part, or finds no room, has the buffer
 * put first (wbuf_add() says so; data.c puts it).  Memory is taken only for
 * inodes being written: an inode table may hold many.
 *
 * A leaf module: it calls nothing of fs/ (data.c puts the buffer, inode.c
 * frees it with its inode), so the write path has one direction.
 */
#include <errno.h>
#include <string.h>

#include "thread.h"
#include "wbuf.h"

/* Whether [off, off + n) overlaps a run other than skip. */
static bool overlaps_other(const struct wbuf *w, uint64_t off, size_t n, uint32_t skip)
{
	for (uint32_t i = 0; i < w->nruns; i++)
		if (i != skip && off < w->run[i].off + w->run[i].len && w->run[i].off < off + n)
			return true;
	return false;
}

/*
 * The run that [off, off + n) lies in, or continues (the run whose bytes end
 * the buffer, with room, growing over no other run), or -1.
 */
static int run_for(const struct wbuf *w, uint32_t cs, uint64_t off, size_t n)
{
	for (uint32_t i = 0; i < w->nruns; i++) {
		const struct wbuf_run *r = &w->run[i];
		if (off >= r->off && off + n <= r->off + r->len)
			return (int)i; /* inside */
		if (off >= r->off && off <= r->off + r->len && r->at + r->len == w->used &&
		    r->at + (off - r->off) + n <= cs && !overlaps_other(w, off, n, i))
			return (int)i;
	}
	return -1;
}

bool wbuf_absorbs(const struct wbuf *w, uint32_t cs, uint64_t off, size_t n)
{
	return w->active && run_for(w, cs, off, n) >= 0;
}

int wbuf_add(struct wbuf *w, uint32_t cs, uint64_t off, const void *src, uint32_t n, bool *started)
{
	int i = w->active ? run_for(w, cs, off, n) : -1;
	*started = false;
	if (i < 0 && w->active &&
	    (overlaps_other(w, off, n, WBUF_RUNS) || w->nruns == WBUF_RUNS || w->used + n > cs))
		return WBUF_PUT_FIRST; /* cannot join: the earlier bytes go first */
	if (!w->data) { /* memory only for inodes being written (an inode table may hold many) */
		w->data = malloc(cs);
		w->run = malloc(WBUF_RUNS * sizeof(*w->run));
		if (!w->data || !w->run) {
			wbuf_release(w);
			return -ENOMEM;
		}
	}
	if (!w->active) {
		w->active = true;
		w->since_ms = mw_now_us() / 1000u;
		*started = true;
	}
	if (i < 0) { /* a new run at the end of the data */
		i = (int)w->nruns++;
		w->run[i] = (struct wbuf_run){off, 0, w->used};
	}
	struct wbuf_run *r = &w->run[i];
	memcpy(w->data + r->at + (off - r->off), src, n);
	if (off + n > r->off + r->len) {
		uint32_t grow = (uint32_t)(off + n - (r->off + r->len));
		r->len += grow;
		w->used += grow;
	}
	return 0;
}

size_t wbuf_pieces(const struct wbuf *w, uint64_t size, struct wbuf_piece *out)
{
	size_t n = 0;
	for (uint32_t i = 0; w->active && i < w->nruns; i++) {
		const struct wbuf_run *r = &w->run[i];
		/* a truncation may have cut a run short */
		uint64_t len =
		    size > r->off ? (size - r->off < r->len ? size - r->off : r->len) : 0;
		if (len)
			out[n++] = (struct wbuf_piece){r->off, len, w->data + r->at};
	}
	return n;
}

void wbuf_overlay(const struct wbuf *w, uint64_t off, uint8_t *buf, size_t len)
{
	if (!w->active)
		return;
	for (uint32_t i = 0; i < w->nruns; i++) {
		const struct wbuf_run *r = &w->run[i];
		uint64_t a = off > r->off ? off : r->off;
		uint64_t z = off + len < r->off + r->len ? off + len : r->off + r->len;
		if (a < z)
			memcpy(buf + (a - off), w->data + r->at + (a - r->off), (size_t)(z - a));
	}
}
