/*
 * inval.c - direct writes and the kernel's page cache (issue 16: O_DIRECT
 * next to buffered readers).
 *
 * A write through a file opened with O_DIRECT goes past the page cache.  The
 * kernel drops the cached pages of the range when the write is sent, but a
 * buffered read of the same range that was under way fetched the old bytes
 * from us and puts its pages in afterwards: later buffered reads then return
 * stale data until the pages are evicted.  So after each direct write the
 * range is queued here, and a thread of its own tells the kernel to drop the
 * cached pages of it (fuse_lowlevel_notify_inval_inode) once the write has
 * been answered: never from the write's handler (the kernel holds the inode's
 * lock for the write and the invalidation would wait for it) and never with
 * a lock held that a handler may need.  Readers that raced are corrected
 * within one pass of the thread (it runs as soon as something is queued).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"

/* Ranges queued at most; past it, whole inodes are dropped instead (len 0). */
#define INVAL_MAX 4096

struct inval_range {
	uint64_t ino, off, len; /* len 0: the whole inode */
};

struct fsinval {
	pthread_mutex_t mu;      /* protects the fields below */
	pthread_cond_t cv;       /* wakes the thread */
	struct inval_range *q;   /* queued [mu] */
	size_t n, cap;           /* [mu] */
	bool stop;               /* [mu] */
	struct fuse_session *se; /* NULL until mounted: nothing to tell [mu] */
	uint64_t sent;           /* invalidations sent [mu] */
	pthread_t tid;
};

void fsinval_queue(struct fsinval *iv, uint64_t ino, uint64_t off, uint64_t len)
{
	if (!iv || len == 0)
		return;
	pthread_mutex_lock(&iv->mu);
	if (iv->n > 0 && iv->q[iv->n - 1].ino == ino && iv->q[iv->n - 1].len &&
	    iv->q[iv->n - 1].off + iv->q[iv->n - 1].len == off) {
		iv->q[iv->n - 1].len += len; /* a sequential direct writer: one range */
	} else {
		if (iv->n == iv->cap && iv->cap < INVAL_MAX) {
			size_t cap = iv->cap ? 2 * iv->cap : 64;
			struct inval_range *q = realloc(iv->q, cap * sizeof(*q));
			if (q) {
				iv->q = q;
				iv->cap = cap;
			}
		}
		if (iv->n < iv->cap)
			iv->q[iv->n++] = (struct inval_range){ino, off, len};
		else if (iv->n > 0)
			iv->q[iv->n - 1] =
			    (struct inval_range){ino, 0, 0}; /* full: all of the last */
	}
	pthread_cond_signal(&iv->cv);
	pthread_mutex_unlock(&iv->mu);
}

static void *inval_main(void *arg)
{
	struct fsinval *iv = arg;
	pthread_mutex_lock(&iv->mu);
	for (;;) {
		while (!iv->stop && (iv->n == 0 || !iv->se))
			pthread_cond_wait(&iv->cv, &iv->mu);
		if (iv->stop)
			break;
		struct inval_range *q = iv->q;
		size_t n = iv->n;
		struct fuse_session *se = iv->se;
		iv->q = NULL;
		iv->n = iv->cap = 0;
		pthread_mutex_unlock(&iv->mu);
		for (size_t i = 0; i < n; i++) {
			int rc = fuse_lowlevel_notify_inval_inode(se, q[i].ino, (off_t)q[i].off,
			                                          (off_t)q[i].len);
			/* -ENOENT: the kernel no longer knows the inode, nothing is cached */
			if (rc && rc != -ENOENT)
				log_debug("invalidating pages of inode %llu: %s",
				          (unsigned long long)q[i].ino, strerror(-rc));
		}
		free(q);
		pthread_mutex_lock(&iv->mu);
		iv->sent += n;
	}
	pthread_mutex_unlock(&iv->mu);
	return NULL;
}

int fsinval_start(struct fsinval **out)
{
	struct fsinval *iv = calloc(1, sizeof(*iv));
	if (!iv)
		return -ENOMEM;
	pthread_mutex_init(&iv->mu, NULL);
	pthread_cond_init(&iv->cv, NULL);
	int rc = pthread_create(&iv->tid, NULL, inval_main, iv);
	if (rc) {
		pthread_cond_destroy(&iv->cv);
		pthread_mutex_destroy(&iv->mu);
		free(iv);
		return -rc;
	}
	*out = iv;
	return 0;
}

void fsinval_session(struct fsinval *iv, struct fuse_session *se)
{
	if (!iv)
		return;
	pthread_mutex_lock(&iv->mu);
	iv->se = se;
	pthread_cond_signal(&iv->cv);
	pthread_mutex_unlock(&iv->mu);
}

uint64_t fsinval_sent(struct fsinval *iv)
{
	if (!iv)
		return 0;
	pthread_mutex_lock(&iv->mu);
	uint64_t n = iv->sent;
	pthread_mutex_unlock(&iv->mu);
	return n;
}

void fsinval_stop(struct fsinval *iv)
{
	if (!iv)
		return;
	pthread_mutex_lock(&iv->mu);
	iv->stop = true;
	pthread_cond_signal(&iv->cv);
	pthread_mutex_unlock(&iv->mu);
	pthread_join(iv->tid, NULL);
	free(iv->q);
	pthread_cond_destroy(&iv->cv);
	pthread_mutex_destroy(&iv->mu);
	free(iv);
}
