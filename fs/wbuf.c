/*
 * wbuf.c - chunk I/O and the per-inode write buffer (docs/SCHEMA.md, chunk
 * records).
 *
 * Chunks: key 'C' ino index, value the chunk's bytes, at most chunk_size
 * (the superblock's), shorter at the end of the file; an absent chunk is a
 * hole and reads as zeros, and a chunk written as all zeros is deleted.
 * chunk_put() puts one chunk in one batch with the inode record, whose size
 * field (rec_size) only ever covers data already put: after a crash a file
 * is a prefix of its writes, never a size with missing bytes.
 *
 * The write buffer holds one partly written chunk of an inode: writes
 * gather in it and it is put when it fills, when a write touches another
 * chunk, and on flush/fsync/release/truncate (file.c), by the background
 * flusher (below) and at unmount (wbuf_flush_all()).  A partially
 * written chunk is merged with its stored bytes (read-modify-write) before
 * the put; that read waits out an outage of the store, since the buffered
 * bytes depend on it.
 *
 * Locks: ip->dlock (exclusive for the buffer) before fs->mu, as everywhere.
 * This module sits above inode.c and below file.c and fs.c.
 *
 * The flusher thread.  A file that is kept open and appended to slowly (a
 * log) would otherwise keep its last partial chunk only in the daemon's
 * memory for as long as it stays open: the thread puts every buffer that
 * has held unwritten bytes for flush_ms; the engine then commits it within
 * one cadence.
 *
 * Bookkeeping: a buffer that becomes active is listed once (ip->wb_listed,
 * protected by fs->mu) with a reference on its inode.  The thread takes the
 * list, and for each inode, under ip->dlock: flushes an old enough buffer;
 * keeps listing one that is still active; unlists an empty one (under
 * fs->mu too, so a writer that makes it active again lists it anew).  The
 * reference is dropped after dlock is released, since the last put may
 * free the inode.  Lock order as everywhere: ip->dlock, then fs->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "log.h"
#include "thread.h"

/*
 * Read n bytes at offset co of chunk idx into dst; holes and the tail past the
 * value read as 0.  A store that does not answer is waited for
 * (engine_get_range_wait()): always when wait is set (a write buffer's bytes
 * depend on the read), else within fs_outage_enter()'s bound.
 */
int chunk_read(struct mwfs *fs, uint64_t ino, uint64_t idx, uint32_t co, uint8_t *dst, size_t n,
               bool wait)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_chunk(key, ino, idx), got = 0;
	int rc = engine_get_range(fs->e, key, kn, co, dst, n, &got);
	if (fs_store_down(rc) && (wait || fs_outage_enter(fs))) {
		rc = engine_get_range_wait(fs->e, key, kn, co, dst, n, &got);
		if (!wait)
			fs_outage_leave(fs);
	}
	if (rc == -ENOENT) {
		rc = 0;
		got = 0;
	}
	if (rc)
		return rc;
	if (got < n)
		memset(dst + got, 0, n - got);
	return 0;
}

/*
 * Put chunk idx of ip with the given bytes (vlen of them) together with the
 * inode record, in one batch (ip->dlock exclusive, fs->mu not held).
 */
int chunk_put(struct mwfs *fs, struct inode *ip, uint64_t idx, const uint8_t *data, size_t vlen)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_chunk(key, ip->ino, idx);
	/* wait for backpressure here, not under fs->mu (every lookup needs it) */
	int rc = engine_wait_room(fs->e, vlen + FS_META_ROOM);
	if (rc)
		return rc;
	mw_mutex_lock(&fs->mu);
	struct engine_batch *b = fs_batch(fs);
	uint64_t saved = ip->rec_size;
	rc = b ? 0 : -ENOMEM;
	if (!rc)
		rc = fs_all_zero(data, vlen) ? engine_batch_delete(b, key, kn)
		                             : engine_batch_put(b, key, kn, data, vlen);
	uint64_t end = idx * fs->cs + vlen;
	if (ip->rec_size < end)
		ip->rec_size = end;
	if (!rc)
		rc = inode_batch_put(fs, b, ip);
	if (!rc)
		rc = inode_commit(fs, b, &ip, 1);
	if (rc)
		ip->rec_size = saved;
	mw_mutex_unlock(&fs->mu);
	return rc;
}

/*
 * Merge the stored bytes of the buffer's chunk under its dirty range.  The
 * buffer's bytes depend on this read: it waits out an outage of the store.
 */
static int wb_load_base(struct mwfs *fs, struct inode *ip)
{
	struct wbuf *w = &ip->wb;
	struct tls *t = fs_tls(fs);
	if (!t)
		return -ENOMEM;
	int rc = chunk_read(fs, ip->ino, w->idx, 0, t->chunk, fs->cs, true);
	if (rc)
		return rc;
	memcpy(t->chunk + w->lo, w->data + w->lo, w->hi - w->lo);
	uint8_t *tmp = w->data;
	w->data = t->chunk;
	t->chunk = tmp;
	w->base = true;
	return 0;
}

int wbuf_flush(struct mwfs *fs, struct inode *ip)
{
	struct wbuf *w = &ip->wb;
	if (!w->active)
		return 0;
	mw_mutex_lock(&fs->mu);
	uint64_t size = ip->a.size;
	mw_mutex_unlock(&fs->mu);
	uint64_t start = w->idx * fs->cs;
	size_t vlen = size > start ? (size - start < fs->cs ? (size_t)(size - start) : fs->cs) : 0;
	int rc = 0;
	if (vlen) {
		if (!w->base && !(w->lo == 0 && w->hi >= vlen))
			rc = wb_load_base(fs, ip);
		if (!rc)
			rc = chunk_put(fs, ip, w->idx, w->data, vlen);
	}
	if (!rc) {
		w->active = false;
		w->base = false;
		w->lo = w->hi = 0;
	} else {
		log_warn("inode %llu: writing chunk %llu: %s", (unsigned long long)ip->ino,
		         (unsigned long long)w->idx, strerror(-rc));
	}
	return rc;
}

/* Copy n bytes at offset co of chunk idx into the buffer. */
int wbuf_write(struct mwfs *fs, struct inode *ip, uint64_t idx, uint32_t co, const void *src,
               uint32_t n)
{
	struct wbuf *w = &ip->wb;
	int rc;
	if (w->active && w->idx != idx) {
		rc = wbuf_flush(fs, ip);
		if (rc)
			return rc;
	}
	if (!w->data) {
		w->data = malloc(fs->cs);
		if (!w->data)
			return -ENOMEM;
	}
	if (!w->active) {
		w->idx = idx;
		w->lo = co;
		w->hi = co + n;
		w->base = false;
		w->active = true;
		w->since_ms = mw_now_us() / 1000u;
		wbflush_note(fs->wbf, ip);
	} else if (!w->base) {
		if (co > w->hi || co + n < w->lo) {
			/* a gap between dirty ranges: fill it from the store */
			rc = wb_load_base(fs, ip);
			if (rc)
				return rc;
		} else {
			w->lo = co < w->lo ? co : w->lo;
			w->hi = co + n > w->hi ? co + n : w->hi;
		}
	}
	memcpy(w->data + co, src, n);
	if (!w->base && w->lo == 0 && w->hi == fs->cs)
		return wbuf_flush(fs, ip); /* a whole chunk: put it now */
	if (w->base && co + n == fs->cs)
		return wbuf_flush(fs, ip); /* wrote up to the chunk's end: done with it */
	return 0;
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

struct wbflush {
	struct mwfs *fs;      /* the filesystem (borrowed) */
	unsigned ms;          /* flush buffers older than this, checked this often */
	struct mw_thread thr; /* the flusher thread; thr.stop under mu */
	struct mw_mutex mu;   /* guards thr.stop (waits use cv) */
	pthread_cond_t cv;    /* signalled to stop */
	struct inode **list;  /* listed inodes, each with a reference; fs->mu */
	size_t n, cap;        /* fs->mu */
};

/* Make room for one more listed inode (fs->mu held).  false: no memory. */
static bool grow_locked(struct wbflush *wf)
{
	mw_mutex_assert_held(&wf->fs->mu);
	if (wf->n < wf->cap)
		return true;
	size_t cap = wf->cap ? wf->cap * 2 : 64;
	struct inode **l = realloc(wf->list, cap * sizeof(*l));
	if (!l)
		return false;
	wf->list = l;
	wf->cap = cap;
	return true;
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
	free(wf->list);
	pthread_cond_destroy(&wf->cv);
	mw_mutex_destroy(&wf->mu);
	free(wf);
}
