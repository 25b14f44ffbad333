/*
 * wbuf.c - putting file data as extents, and the per-inode write buffer
 * (docs/SCHEMA.md, "Extents").
 *
 * data_put() writes n bytes at off as one extent (extent.c), trimming the
 * extents it overlaps, in one batch with the inode record, whose size field
 * (rec_size) only ever covers data already put: after a crash a file is a
 * prefix of its writes, never a size with missing bytes.  Nothing else of
 * the file is read or written again.
 *
 * The write buffer gathers one contiguous run of small writes of an inode
 * (up to the chunk size, 1 MiB by default): a write that continues the run
 * or lands inside it joins it, any other write puts the run first.  The run
 * is put when it fills, on flush/fsync/release/truncate (file.c), by the
 * background flusher (below) and at unmount (wbuf_flush_all()).
 *
 * Locks: ip->dlock (exclusive for the buffer) before fs->mu, as everywhere.
 * This module sits above inode.c and extent.c and below file.c and fs.c.
 *
 * The flusher thread.  A file that is kept open and appended to slowly (a
 * log) would otherwise keep its last run only in the daemon's memory for as
 * long as it stays open: the thread puts every buffer that has held
 * unwritten bytes for flush_ms; the engine then commits it within one
 * cadence.
 *
 * Folding, by the same thread.  Writes smaller than a page, or not on page
 * boundaries (a slowly appended log, byte-sized random writes), can leave
 * many small extents in one chunk-sized window; a read of the window then
 * visits each.  After such a write, data_put() counts the window's extents
 * and, past FOLD_MAX, queues it: the thread rewrites the window as one
 * extent (its bytes read, holes inside it stored as zeros).  Page-aligned
 * writes never trigger it (at most one extent per page), so the path of a
 * small write never pays for a fold.
 *
 * Bookkeeping: a buffer that becomes active is listed once (ip->wb_listed,
 * protected by fs->mu) with a reference on its inode.  The thread takes the
 * list, and for each inode, under ip->dlock: flushes an old enough buffer;
 * keeps listing one that is still active; unlists an empty one (under
 * fs->mu too, so a writer that makes it active again lists it anew).  The
 * reference is dropped after dlock is released, since the last put may
 * free the inode.  Lock order as everywhere: ip->dlock, then fs->mu.
 *
 * Each pass also deletes the records of the unlinked inodes that handlers
 * queued when their last user let go, in batches (inode_reclaim_queued(),
 * inode.c): handlers never do it themselves.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "extent.h"
#include "grow.h"
#include "internal.h"
#include "log.h"
#include "thread.h"

/* Extents one chunk-sized window may hold before the flusher folds it into one. */
#define FOLD_MAX 256

static void wbflush_fold(struct wbflush *wf, struct inode *ip, uint64_t window);

/* Queue a fold of the window of [off, off + n) if small writes crowded it (dlock held). */
static void maybe_fold(struct mwfs *fs, struct inode *ip, uint64_t off, size_t n)
{
	unsigned count = 0;
	if (!fs->wbf || (n >= 4096 && off % 4096 == 0 && (off + n) % 4096 == 0))
		return;
	uint64_t w = off / fs->cs;
	if (ext_count(fs, ip->ino, w * fs->cs, (w + 1) * fs->cs, FOLD_MAX, &count) == 0 &&
	    count > FOLD_MAX)
		wbflush_fold(fs->wbf, ip, w);
}

/* A run to put: file range and its bytes. */
struct put_run {
	struct ext_range r;
	const uint8_t *data;
};

static int put_run_cmp(const void *a, const void *b)
{
	const struct put_run *x = a, *y = b;
	return x->r.off < y->r.off ? -1 : x->r.off > y->r.off;
}

/*
 * Put runs (disjoint, any order; sorted here) of ip as extents with the
 * inode record, in one batch (ip->dlock exclusive, fs->mu not held).
 */
static int data_put_runs(struct mwfs *fs, struct inode *ip, struct put_run *p, size_t n)
{
	struct ext_range ranges[WBUF_RUNS];
	uint64_t bytes = 0, end = 0, removed = 0, added = 0;
	if (n == 0)
		return 0;
	qsort(p, n, sizeof(*p), put_run_cmp);
	for (size_t i = 0; i < n; i++) {
		ranges[i] = p[i].r;
		bytes += p[i].r.len;
		if (p[i].r.off + p[i].r.len > end)
			end = p[i].r.off + p[i].r.len;
	}
	/* wait for backpressure here, not under fs->mu (every lookup needs it) */
	int rc = engine_wait_room(fs->e, bytes + FS_META_ROOM);
	if (rc)
		return rc;
	struct engine_batch *b = fs_batch(fs);
	if (!b)
		return -ENOMEM;
	/* the scan may read the store: before fs->mu (dlock keeps the extents still) */
	rc = ext_clear_set(fs, b, ip, ranges, n, &removed);
	for (size_t i = 0; i < n && !rc; i++)
		rc = ext_add(b, ip->ino, p[i].r.off, p[i].data, (size_t)p[i].r.len, &added);
	if (rc)
		return rc;
	mw_mutex_lock(&fs->mu);
	uint64_t saved = ip->rec_size, saved_stored = ip->a.stored;
	if (ip->rec_size < end)
		ip->rec_size = end;
	ip->a.stored = ip->a.stored - (removed < ip->a.stored ? removed : ip->a.stored) + added;
	rc = inode_batch_put(fs, b, ip);
	if (!rc)
		rc = inode_commit(fs, b, &ip, 1);
	if (rc) {
		ip->rec_size = saved;
		ip->a.stored = saved_stored;
	}
	mw_mutex_unlock(&fs->mu);
	for (size_t i = 0; i < n && !rc; i++)
		maybe_fold(fs, ip, p[i].r.off, (size_t)p[i].r.len);
	return rc;
}

int data_put(struct mwfs *fs, struct inode *ip, uint64_t off, const uint8_t *data, size_t n)
{
	struct put_run p = {{off, n}, data};
	return n ? data_put_runs(fs, ip, &p, 1) : 0;
}

int wbuf_flush(struct mwfs *fs, struct inode *ip)
{
	struct wbuf *w = &ip->wb;
	struct put_run p[WBUF_RUNS];
	size_t n = 0;
	if (!w->active)
		return 0;
	mw_mutex_lock(&fs->mu);
	uint64_t size = ip->a.size;
	mw_mutex_unlock(&fs->mu);
	for (uint32_t i = 0; i < w->nruns; i++) {
		const struct wbuf_run *r = &w->run[i];
		/* a truncation may have cut a run short */
		uint64_t len =
		    size > r->off ? (size - r->off < r->len ? size - r->off : r->len) : 0;
		if (len)
			p[n++] = (struct put_run){{r->off, len}, w->data + r->at};
	}
	int rc = data_put_runs(fs, ip, p, n);
	if (!rc)
		wbuf_drop(w);
	else
		log_warn("inode %llu: writing %u buffered runs: %s", (unsigned long long)ip->ino,
		         w->nruns, strerror(-rc));
	return rc;
}

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
static int run_for(const struct mwfs *fs, const struct wbuf *w, uint64_t off, size_t n)
{
	for (uint32_t i = 0; i < w->nruns; i++) {
		const struct wbuf_run *r = &w->run[i];
		if (off >= r->off && off + n <= r->off + r->len)
			return (int)i; /* inside */
		if (off >= r->off && off <= r->off + r->len && r->at + r->len == w->used &&
		    r->at + (off - r->off) + n <= fs->cs && !overlaps_other(w, off, n, i))
			return (int)i;
	}
	return -1;
}

bool wbuf_absorbs(const struct mwfs *fs, const struct wbuf *w, uint64_t off, size_t n)
{
	return w->active && run_for(fs, w, off, n) >= 0;
}

int wbuf_write(struct mwfs *fs, struct inode *ip, uint64_t off, const void *src, uint32_t n)
{
	struct wbuf *w = &ip->wb;
	int rc;
	int i = w->active ? run_for(fs, w, off, n) : -1;
	if (i < 0 && w->active &&
	    (overlaps_other(w, off, n, WBUF_RUNS) || w->nruns == WBUF_RUNS ||
	     w->used + n > fs->cs)) {
		rc = wbuf_flush(fs, ip); /* cannot join: the earlier bytes go first */
		if (rc)
			return rc;
	}
	if (!w->data) { /* memory only for inodes being written (an inode table may hold many) */
		w->data = malloc(fs->cs);
		w->run = malloc(WBUF_RUNS * sizeof(*w->run));
		if (!w->data || !w->run) {
			wbuf_release(w);
			return -ENOMEM;
		}
	}
	if (!w->active) {
		w->active = true;
		w->since_ms = mw_now_us() / 1000u;
		wbflush_note(fs->wbf, ip);
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
	if (w->used == fs->cs)
		return wbuf_flush(fs, ip); /* full: put it now */
	return 0;
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

/* Write out every write buffer (fs->mu NOT held; takes it). */
int wbuf_flush_all(struct mwfs *fs)
{
	int first = 0;
	mw_mutex_lock(&fs->mu);
	for (size_t i = 0; i < fs->hsize; i++) {
		for (struct inode *ip = fs->htab[i]; ip; ip = ip->hnext) {
			if (!ip->wb.active)
				continue;
			ip->refs++;
			mw_mutex_unlock(&fs->mu);
			pthread_rwlock_wrlock(&ip->dlock);
			int rc = wbuf_flush(fs, ip);
			pthread_rwlock_unlock(&ip->dlock);
			mw_mutex_lock(&fs->mu);
			ip->refs--;
			if (rc && !first)
				first = rc;
		}
	}
	mw_mutex_unlock(&fs->mu);
	return first;
}

/* ---- the flusher ------------------------------------------------------ */

/* A window waiting to be folded, with a reference on its inode. */
struct fold {
	struct inode *ip;
	uint64_t window; /* chunk-sized window index */
};

struct wbflush {
	struct mwfs *fs;    /* the filesystem (borrowed) */
	struct fold *folds; /* windows to fold; fs->mu */
	size_t nfolds, capfolds;
	_Atomic uint64_t folded; /* windows folded since start */
	unsigned ms;             /* flush buffers older than this, checked this often */
	struct mw_thread thr;    /* the flusher thread; thr.stop under mu */
	struct mw_mutex mu;      /* guards thr.stop (waits use cv) */
	pthread_cond_t cv;       /* signalled to stop */
	struct inode **list;     /* listed inodes, each with a reference; fs->mu */
	size_t n, cap;           /* fs->mu */
};

/* Make room for one more listed inode (fs->mu held).  false: no memory. */
static bool grow_locked(struct wbflush *wf)
{
	mw_mutex_assert_held(&wf->fs->mu);
	return MW_GROW(wf->list, wf->cap, wf->n + 1, 64) == 0;
}

void wbflush_note(struct wbflush *wf, struct inode *ip)
{
	if (!wf)
		return;
	struct mwfs *fs = wf->fs;
	mw_mutex_lock(&fs->mu);
	/* not listed when out of memory: the buffer still goes at flush/fsync/release */
	if (!ip->wb_listed && grow_locked(wf)) {
		ip->refs++;
		ip->wb_listed = true;
		wf->list[wf->n++] = ip;
	}
	mw_mutex_unlock(&fs->mu);
}

static void wbflush_fold(struct wbflush *wf, struct inode *ip, uint64_t window)
{
	struct mwfs *fs = wf->fs;
	mw_mutex_lock(&fs->mu);
	bool queued = false;
	for (size_t i = 0; i < wf->nfolds && !queued; i++)
		queued = wf->folds[i].ip == ip && wf->folds[i].window == window;
	if (!queued && wf->nfolds == wf->capfolds) {
		size_t cap = wf->capfolds ? 2 * wf->capfolds : 16;
		struct fold *f = realloc(wf->folds, cap * sizeof(*f));
		if (f) {
			wf->folds = f;
			wf->capfolds = cap;
		}
	}
	if (!queued && wf->nfolds < wf->capfolds) { /* no memory: the window stays as it is */
		ip->refs++;
		wf->folds[wf->nfolds++] = (struct fold){ip, window};
	}
	mw_mutex_unlock(&fs->mu);
}

/* Rewrite one window of ip as one extent (ip->dlock exclusive). */
static int fold_window(struct mwfs *fs, struct inode *ip, uint64_t window, uint8_t *buf)
{
	uint64_t w0 = window * fs->cs;
	int rc = wbuf_flush(fs, ip);
	mw_mutex_lock(&fs->mu);
	uint64_t size = ip->a.size;
	bool gone = ip->gone;
	mw_mutex_unlock(&fs->mu);
	if (rc || gone || w0 >= size)
		return rc;
	uint64_t n = size - w0 < fs->cs ? size - w0 : fs->cs;
	rc = ext_read(fs, ip->ino, 0, w0, buf, (size_t)n, true);
	if (!rc)
		rc = data_put(fs, ip, w0, buf, (size_t)n);
	return rc;
}

/* Fold the queued windows (not on the path of any write). */
static void fold_pass(struct wbflush *wf)
{
	struct mwfs *fs = wf->fs;
	mw_mutex_lock(&fs->mu);
	struct fold *l = wf->folds;
	size_t n = wf->nfolds;
	wf->folds = NULL;
	wf->nfolds = wf->capfolds = 0;
	mw_mutex_unlock(&fs->mu);
	uint8_t *buf = n ? malloc(fs->cs) : NULL;
	for (size_t i = 0; i < n; i++) {
		struct inode *ip = l[i].ip;
		if (buf) {
			pthread_rwlock_wrlock(&ip->dlock);
			int rc = fold_window(fs, ip, l[i].window, buf);
			pthread_rwlock_unlock(&ip->dlock);
			if (rc)
				log_warn("inode %llu: folding the extents of window %llu: %s",
				         (unsigned long long)ip->ino,
				         (unsigned long long)l[i].window, strerror(-rc));
			else
				atomic_fetch_add(&wf->folded, 1);
		}
		mw_mutex_lock(&fs->mu);
		inode_put(fs, ip);
		mw_mutex_unlock(&fs->mu);
	}
	free(buf);
	free(l);
}

uint64_t wbflush_folded(struct wbflush *wf)
{
	return wf ? atomic_load(&wf->folded) : 0;
}

/* One pass over the listed inodes. */
static void pass(struct wbflush *wf, bool all)
{
	struct mwfs *fs = wf->fs;
	struct inode **l;
	size_t n;

	mw_mutex_lock(&fs->mu);
	l = wf->list;
	n = wf->n;
	wf->list = NULL;
	wf->n = wf->cap = 0;
	mw_mutex_unlock(&fs->mu);

	uint64_t now = mw_now_us() / 1000u;
	for (size_t i = 0; i < n; i++) {
		struct inode *ip = l[i];
		bool drop = false;
		pthread_rwlock_wrlock(&ip->dlock);
		if (ip->wb.active && (all || now - ip->wb.since_ms >= wf->ms)) {
			int rc = wbuf_flush(fs, ip);
			if (rc)
				log_warn("inode %llu: background put of its write buffer: %s",
				         (unsigned long long)ip->ino, strerror(-rc));
		}
		mw_mutex_lock(&fs->mu);
		if (!ip->wb.active || all) {
			ip->wb_listed = false;
			drop = true;
		} else if (grow_locked(wf)) {
			wf->list[wf->n++] = ip; /* still active: look again next time */
		} else {
			ip->wb_listed = false;
			drop = true;
		}
		mw_mutex_unlock(&fs->mu);
		pthread_rwlock_unlock(&ip->dlock);
		if (drop) {
			mw_mutex_lock(&fs->mu);
			inode_put(fs, ip);
			mw_mutex_unlock(&fs->mu);
		}
	}
	free(l);
}

static void *flusher_main(void *arg)
{
	struct wbflush *wf = arg;
	mw_mutex_lock(&wf->mu);
	while (!wf->thr.stop) {
		uint64_t until_us = mw_now_us() + (uint64_t)wf->ms * 1000u;
		struct timespec ts = {.tv_sec = (time_t)(until_us / 1000000u),
		                      .tv_nsec = (long)(until_us % 1000000u) * 1000};
		mw_cond_timedwait(&wf->cv, &wf->mu, &ts);
		if (wf->thr.stop)
			break;
		mw_mutex_unlock(&wf->mu);
		pass(wf, false);
		fold_pass(wf);
		inode_reclaim_queued(wf->fs); /* unlinked inodes that handlers let go */
		mw_mutex_lock(&wf->mu);
	}
	mw_mutex_unlock(&wf->mu);
	return NULL;
}

int wbflush_start(struct mwfs *fs, unsigned ms, struct wbflush **out)
{
	struct wbflush *wf = calloc(1, sizeof(*wf));
	int rc;

	if (!wf)
		return -ENOMEM;
	wf->fs = fs;
	wf->ms = ms ? ms : 100;
	mw_mutex_init(&wf->mu);
	mw_cond_init_monotonic(&wf->cv);
	rc = mw_thread_start(&wf->thr, "write-buffer flusher", flusher_main, wf, &wf->mu, &wf->cv);
	if (rc) {
		pthread_cond_destroy(&wf->cv);
		mw_mutex_destroy(&wf->mu);
		free(wf);
		return rc;
	}
	*out = wf;
	return 0;
}

void wbflush_stop(struct wbflush *wf)
{
	if (!wf)
		return;
	mw_thread_stop(&wf->thr);
	pass(wf, true); /* put what is left and drop every reference */
	fold_pass(wf);
	free(wf->list);
	free(wf->folds);
	pthread_cond_destroy(&wf->cv);
	mw_mutex_destroy(&wf->mu);
	free(wf);
}
