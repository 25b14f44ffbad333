/*
 * wbflush.c - the write-buffer flusher (see wbflush.h).
 *
 * Each inode has one write buffer (file.c) that gathers writes smaller than
 * a chunk.  It is put into the engine when it fills, when a write moves to
 * another chunk, and at flush/fsync/release; a file that is kept open and
 * appended to slowly (a log) would otherwise keep its last partial chunk
 * only in the daemon's memory for as long as it stays open.  This thread
 * puts every buffer that has held unwritten bytes for flush_ms; the engine
 * then commits it within one cadence.
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
#include "wbflush.h"

struct wbflush {
	struct mwfs *fs;       /* the filesystem (borrowed) */
	unsigned ms;           /* flush buffers older than this, checked this often */
	pthread_t thr;         /* the flusher thread */
	pthread_mutex_t mu;    /* protects stop (waits use cv) */
	pthread_cond_t cv;     /* signalled to stop */
	bool stop;             /* protected by mu */
	struct inode **list;   /* listed inodes, each with a reference; fs->mu */
	size_t n, cap;         /* fs->mu */
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Make room for one more listed inode (fs->mu held).  false: no memory. */
static bool grow_locked(struct wbflush *wf)
{
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
	pthread_mutex_lock(&fs->mu);
	/* not listed when out of memory: the buffer still goes at flush/fsync/release */
	if (!ip->wb_listed && grow_locked(wf)) {
		ip->refs++;
		ip->wb_listed = true;
		wf->list[wf->n++] = ip;
	}
	pthread_mutex_unlock(&fs->mu);
}

/* One pass over the listed inodes. */
static void pass(struct wbflush *wf, bool all)
{
	struct mwfs *fs = wf->fs;
	struct inode **l;
	size_t n;

	pthread_mutex_lock(&fs->mu);
	l = wf->list;
	n = wf->n;
	wf->list = NULL;
	wf->n = wf->cap = 0;
	pthread_mutex_unlock(&fs->mu);

	uint64_t now = now_ms();
	for (size_t i = 0; i < n; i++) {
		struct inode *ip = l[i];
		bool drop = false;
		pthread_rwlock_wrlock(&ip->dlock);
		if (ip->wb.active && (all || now - ip->wb.since_ms >= wf->ms)) {
			int rc = file_wb_flush(fs, ip);
			if (rc)
				log_warn("inode %llu: background put of its write buffer: %s",
					 (unsigned long long)ip->ino, strerror(-rc));
		}
		pthread_mutex_lock(&fs->mu);
		if (!ip->wb.active || all) {
			ip->wb_listed = false;
			drop = true;
		} else if (grow_locked(wf)) {
			wf->list[wf->n++] = ip; /* still active: look again next time */
		} else {
			ip->wb_listed = false;
			drop = true;
		}
		pthread_mutex_unlock(&fs->mu);
		pthread_rwlock_unlock(&ip->dlock);
		if (drop) {
			pthread_mutex_lock(&fs->mu);
			inode_put(fs, ip);
			pthread_mutex_unlock(&fs->mu);
		}
	}
	free(l);
}

static void *flusher_main(void *arg)
{
	struct wbflush *wf = arg;
	pthread_mutex_lock(&wf->mu);
	while (!wf->stop) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)wf->ms * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		pthread_cond_timedwait(&wf->cv, &wf->mu, &ts);
		if (wf->stop)
			break;
		pthread_mutex_unlock(&wf->mu);
		pass(wf, false);
		pthread_mutex_lock(&wf->mu);
	}
	pthread_mutex_unlock(&wf->mu);
	return NULL;
}

int wbflush_start(struct mwfs *fs, unsigned ms, struct wbflush **out)
{
	struct wbflush *wf = calloc(1, sizeof(*wf));
	pthread_condattr_t ca;
	int rc;

	if (!wf)
		return -ENOMEM;
	wf->fs = fs;
	wf->ms = ms ? ms : 100;
	pthread_mutex_init(&wf->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wf->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = pthread_create(&wf->thr, NULL, flusher_main, wf);
	if (rc) {
		pthread_cond_destroy(&wf->cv);
		pthread_mutex_destroy(&wf->mu);
		free(wf);
		return -rc;
	}
	*out = wf;
	return 0;
}

void wbflush_stop(struct wbflush *wf)
{
	if (!wf)
		return;
	pthread_mutex_lock(&wf->mu);
	wf->stop = true;
	pthread_cond_signal(&wf->cv);
	pthread_mutex_unlock(&wf->mu);
	pthread_join(wf->thr, NULL);
	pass(wf, true); /* put what is left and drop every reference */
	free(wf->list);
	pthread_cond_destroy(&wf->cv);
	pthread_mutex_destroy(&wf->mu);
	free(wf);
}
