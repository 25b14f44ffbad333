/*
 * data.c - putting file data as extents: data_put(), the puts of the write
 * buffers (wbuf.c) and the flusher thread (docs/SCHEMA.md, "Extents").
 *
 * data_put() writes n bytes at off as one extent (extent.c), trimming the
 * extents it overlaps, in one batch with the inode record, whose size field
 * (rec_size) only ever covers data already put: after a crash a file is a
 * prefix of its writes, never a size with missing bytes.  Nothing else of
 * the file is read or written again.
 *
 * Small writes go through the inode's write buffer (wbuf.c, a leaf that
 * only holds bytes): data_write() adds them, and puts the buffer first when
 * a write cannot join it and after when it is full.  A buffer is also put on
 * flush/fsync/release/truncate (file.c), by the flusher (below) and at
 * unmount (data_flush_all()).
 *
 * Direction: file.c, fs.c and xattr.c -> data.c -> extent.c, inode.c and
 * wbuf.c.  The buffer lives in struct inode (inode.c frees it with its
 * inode: inode.c -> wbuf.c), so everything that needs both the buffer and
 * the inode table (a put commits the inode record; the flusher holds inode
 * references) is here, and neither inode.c nor wbuf.c calls back up.
 *
 * Locks: ip->dlock (exclusive for the buffer) before fs->mu, as everywhere.
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
 * inode.c): handlers never do it themselves, and this thread is the one
 * background thread of a writable mount.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "data.h"
#include "extent.h"
#include "grow.h"
#include "internal.h"
#include "thread.h"
#include "wbuf.h"

/* Extents one chunk-sized window may hold before the flusher folds it into one. */
#define FOLD_MAX 256

static void flusher_fold(struct flusher *wf, struct inode *ip, uint64_t window);
static void flusher_note(struct flusher *wf, struct inode *ip);

/* Queue a fold of the window of [off, off + n) if small writes crowded it (dlock held). */
static void maybe_fold(struct mwfs *fs, struct inode *ip, uint64_t off, size_t n)
{
	unsigned count = 0;
	if (!fs->wbf || (n >= 4096 && off % 4096 == 0 && (off + n) % 4096 == 0))
		return;
	uint64_t w = off / fs->cs;
	if (ext_count(fs, ip->ino, w * fs->cs, (w + 1) * fs->cs, FOLD_MAX, &count) == 0 &&
	    count > FOLD_MAX)
		flusher_fold(fs->wbf, ip, w);
}

static int piece_cmp(const void *a, const void *b)
{
	const struct wbuf_piece *x = a, *y = b;
	return x->off < y->off ? -1 : x->off > y->off;
}

/*
 * Put runs (disjoint, any order; sorted here) of ip as extents with the
 * inode record, in one batch (ip->dlock exclusive, fs->mu not held).
 */
static int data_put_runs(struct mwfs *fs, struct inode *ip, struct wbuf_piece *p, size_t n)
{
	struct ext_range ranges[WBUF_RUNS];
	uint64_t bytes = 0, end = 0, removed = 0, added = 0;
	if (n == 0)
		return 0;
	qsort(p, n, sizeof(*p), piece_cmp);
	for (size_t i = 0; i < n; i++) {
		ranges[i] = (struct ext_range){p[i].off, p[i].len};
		bytes += p[i].len;
		if (p[i].off + p[i].len > end)
			end = p[i].off + p[i].len;
	}
	/* wait for backpressure here, not under fs->mu (every lookup needs it) */
	int rc = engine_wait_room(fs_eng(fs, ip->ino), bytes + FS_META_ROOM);
	struct engine_batch *b = NULL;
	if (!rc)
		rc = fs_batch(fs, ip->ino, &b);
	if (rc)
		return rc;
	/* the scan may read the store: before fs->mu (dlock keeps the extents still) */
	rc = ext_clear_set(fs, b, ip, ranges, n, &removed);
	for (size_t i = 0; i < n && !rc; i++)
		rc = ext_add(fs, b, ip->ino, p[i].off, p[i].data, (size_t)p[i].len, &added);
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
		maybe_fold(fs, ip, p[i].off, (size_t)p[i].len);
	return rc;
}

int data_put(struct mwfs *fs, struct inode *ip, uint64_t off, const uint8_t *data, size_t n)
{
	struct wbuf_piece p = {off, n, data};
	return n ? data_put_runs(fs, ip, &p, 1) : 0;
}

int data_flush(struct mwfs *fs, struct inode *ip)
{
	struct wbuf *w = &ip->wb;
	struct wbuf_piece p[WBUF_RUNS];
	if (!w->active)
		return 0;
	mw_mutex_lock(&fs->mu);
	uint64_t size = ip->a.size;
	mw_mutex_unlock(&fs->mu);
	int rc = data_put_runs(fs, ip, p, wbuf_pieces(w, size, p));
	if (!rc)
		wbuf_drop(w); /* else kept for the next put; the layer that failed logged why */
	return rc;
}

int data_write(struct mwfs *fs, struct inode *ip, uint64_t off, const void *src, uint32_t n)
{
	struct wbuf *w = &ip->wb;
	bool started;
	int rc = wbuf_add(w, fs->cs, off, src, n, &started);
	if (rc == WBUF_PUT_FIRST) { /* cannot join: the earlier bytes go first */
		rc = data_flush(fs, ip);
		if (!rc)
			rc = wbuf_add(w, fs->cs, off, src, n, &started);
	}
	if (rc)
		return rc;
	if (started)
		flusher_note(fs->wbf, ip);
	if (wbuf_full(w, fs->cs))
		return data_flush(fs, ip); /* full: put it now */
	return 0;
}

/* Write out every write buffer (fs->mu NOT held; takes it). */
int data_flush_all(struct mwfs *fs)
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
			int rc = data_flush(fs, ip);
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

struct flusher {
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
static bool grow_locked(struct flusher *wf)
{
	mw_mutex_assert_held(&wf->fs->mu);
	return MW_GROW(wf->list, wf->cap, wf->n + 1, 64) == 0;
}

/*
 * Note that ip's write buffer just started holding unwritten bytes
 * (ip->dlock held exclusive, fs->mu not held).  Takes a reference on ip
 * until the flusher has seen the buffer empty.  Accepts a NULL flusher.
 */
static void flusher_note(struct flusher *wf, struct inode *ip)
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

static void flusher_fold(struct flusher *wf, struct inode *ip, uint64_t window)
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
	int rc = data_flush(fs, ip);
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
static void fold_pass(struct flusher *wf)
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
			/* a failed fold leaves the window as it was; the layer that failed logged
			 * why */
			if (!rc)
				atomic_fetch_add(&wf->folded, 1);
		}
		mw_mutex_lock(&fs->mu);
		inode_put(fs, ip);
		mw_mutex_unlock(&fs->mu);
	}
	free(buf);
	free(l);
}

uint64_t data_flusher_folded(struct flusher *wf)
{
	return wf ? atomic_load(&wf->folded) : 0;
}

/* One pass over the listed inodes. */
static void pass(struct flusher *wf, bool all)
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
		/*
		 * A put that fails keeps the buffer, tried again next pass, and is not
		 * logged here: the engine logged the commit that failed (the writer
		 * stopped) or the store the request; a line per pass would repeat it.
		 */
		if (ip->wb.active && (all || now - ip->wb.since_ms >= wf->ms))
			(void)data_flush(fs, ip);
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
	struct flusher *wf = arg;
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

int data_flusher_start(struct mwfs *fs, unsigned ms, struct flusher **out)
{
	struct flusher *wf = calloc(1, sizeof(*wf));
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

void data_flusher_stop(struct flusher *wf)
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
