/*
 * fsyncq.c - fsync and fsyncdir answered off the FUSE worker threads.
 *
 * An fsync waits for its operation's ticket to be durable: a store round
 * trip.  When the worker that received it waited, every fsync held one of
 * the -o threads workers for that long, so the number of fsyncs one commit
 * could acknowledge together was bounded by the pool, and the pool had to
 * be large (64); a large pool costs every other request a wake-up of a
 * sleeping worker (an 8-process rm -r made three times the context
 * switches of an 8-worker pool, issue 13).  Here the worker queues the
 * request with its ticket and returns; FSYNCQ_THREADS syncer threads take
 * everything queued at once, wait for the newest ticket of what they took
 * (urgently: the open group commits now), then answer each request with
 * the result of its own ticket (durability is in order, so the newest one
 * being durable makes the others so; after a failure engine_wait() again
 * on each, decided at once, and after a timeout the same -ETIMEDOUT, since
 * every one of them has waited that long).  While one syncer waits for a commit the
 * next takes what arrives meanwhile, so commits still overlap as they did
 * when the workers waited.  A ticket of 0 (nothing written to that inode
 * since it was loaded) is answered by engine_sync(), as before.
 *
 * Threads: fsyncq_answer() from any handler (takes q->mu only, a moment);
 * the syncers hold no lock while they wait or reply.  fsyncq_stop() (at
 * close, after the session loop ended) answers what is still queued, then
 * joins them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "internal.h"
#include "log.h"

/* Syncer threads: commits waited on at once (each covers every fsync queued before it). */
#define FSYNCQ_THREADS 8

struct fsq_item {
	fuse_req_t req;  /* answered by the syncer */
	uint64_t ticket; /* what must be durable (0: everything issued so far) */
	uint64_t t0;     /* mw_now_us() at the request's start (fs->fsync_hist) */
};

struct fsyncq {
	struct mwfs *fs;               /* borrowed */
	struct mw_mutex mu;            /* guards the fields below */
	pthread_cond_t cv;             /* a request was queued, or stop */
	struct fsq_item *q;            /* queued requests; mu */
	size_t n, cap;                 /* mu */
	bool stop;                     /* fsyncq_stop(): drain, then exit; mu */
	unsigned nthr;                 /* threads started */
	pthread_t tid[FSYNCQ_THREADS]; /* the syncers */
};

/* Wait for and answer the n requests of it (no lock held). */
static void answer(struct fsyncq *q, const struct fsq_item *it, size_t n)
{
	struct mwfs *fs = q->fs;
	uint64_t newest = 0;
	bool all = false;
	for (size_t i = 0; i < n; i++) {
		newest = it[i].ticket > newest ? it[i].ticket : newest;
		all |= it[i].ticket == 0;
	}
	int rc_all = all ? engine_sync(fs->e) : 0;
	int rc_newest = !newest                ? 0
	                : rc_all == -ETIMEDOUT ? rc_all
	                                       : engine_wait(fs->e, newest, true);
	for (size_t i = 0; i < n; i++) {
		/*
		 * Durable in order: the newest durable, all are.  Else each one's own result
		 * (decided at once when the engine is fenced or full), except after the
		 * --fsync-timeout: all have waited that long, and waiting again would make n
		 * timeouts of one.
		 */
		int rc = rc_newest;
		if (!it[i].ticket)
			rc = rc_all;
		else if (rc_newest && rc_newest != -ETIMEDOUT)
			rc = engine_wait(fs->e, it[i].ticket, false);
		fuse_reply_err(it[i].req, fs_err(rc));
		mw_hist_record(&fs->fsync_hist, mw_now_us() - it[i].t0);
	}
}

static void *syncer_main(void *arg)
{
	struct fsyncq *q = arg;
	mw_mutex_lock(&q->mu);
	for (;;) {
		while (!q->n && !q->stop)
			mw_cond_wait(&q->cv, &q->mu);
		if (!q->n)
			break; /* stopped and drained */
		struct fsq_item *it = q->q;
		size_t n = q->n;
		q->q = NULL;
		q->n = q->cap = 0;
		mw_mutex_unlock(&q->mu);
		answer(q, it, n);
		free(it);
		mw_mutex_lock(&q->mu);
	}
	mw_mutex_unlock(&q->mu);
	return NULL;
}

int fsyncq_start(struct mwfs *fs, struct fsyncq **out)
{
	struct fsyncq *q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->fs = fs;
	mw_mutex_init(&q->mu);
	pthread_cond_init(&q->cv, NULL);
	for (; q->nthr < FSYNCQ_THREADS; q->nthr++) {
		int rc = pthread_create(&q->tid[q->nthr], NULL, syncer_main, q);
		if (rc) {
			log_err("cannot start an fsync thread: %s", strerror(rc));
			fsyncq_stop(q);
			return -rc;
		}
	}
	*out = q;
	return 0;
}

void fsyncq_answer(struct mwfs *fs, fuse_req_t req, int rc, uint64_t ticket, uint64_t t0)
{
	struct fsyncq *q = fs->fsq;
	struct fsq_item it = {req, ticket, t0};
	if (rc || !q) {
		fuse_reply_err(
		    req, fs_err(rc)); /* an error, or a read-only mount: nothing to wait for */
		mw_hist_record(&fs->fsync_hist, mw_now_us() - t0);
		return;
	}
	mw_mutex_lock(&q->mu);
	bool queued = !MW_GROW(q->q, q->cap, q->n + 1, 64);
	if (queued) {
		q->q[q->n++] = it;
		pthread_cond_signal(&q->cv);
	}
	mw_mutex_unlock(&q->mu);
	if (!queued)
		answer(q, &it, 1); /* no memory for the queue: wait here, as workers once did */
}

void fsyncq_stop(struct fsyncq *q)
{
	if (!q)
		return;
	mw_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cv);
	mw_mutex_unlock(&q->mu);
	for (unsigned i = 0; i < q->nthr; i++)
		pthread_join(q->tid[i], NULL);
	free(q->q);
	pthread_cond_destroy(&q->cv);
	mw_mutex_destroy(&q->mu);
	free(q);
}
