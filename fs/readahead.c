/*
 * readahead.c - sequential read-ahead: while a file is read sequentially,
 * a few threads fetch the next chunk-sized windows (their extents) into the engine's caches so
 * that the ranged GETs of a cold read from S3 overlap instead of running one after the other behind
 * the kernel's own (1 MiB) read-ahead.  This is the read-ahead of a file's bytes, in file order;
 * the engine's own (engine/read/blob.c, "pack read-ahead") follows packs, for many small files read
 * one after the other, which no file's order shows.
 *
 * Detection is per inode: a read that starts at 0 or near where the last
 * one ended (within a few chunks: the kernel's async reads arrive out of
 * order on several threads) extends a streak; from the second read of a
 * streak on, chunks up to the streak's window past the read are queued (never
 * past the end of the file, never twice: ip->ra_hi remembers how far it
 * went).  The window starts at two chunks and doubles with every sequential
 * read, up to `window` bytes (--readahead), so that a long sequential read
 * keeps a ranged GET in flight on each thread.
 * A jump elsewhere resets the streak.  A file read at random long enough is
 * fetched whole when the engine has a disk cache to keep it (fill_some()).
 *
 * A prefetch is ext_prefetch() of one chunk-sized window: for each extent
 * in it, engine_ref_prefetch() of the range the window covers, which loads
 * the blocks that range touches into the engine's caches (keyed by pack and
 * offset: packs are immutable, so a later write can never be shadowed by a
 * stale prefetch; it writes new blocks into a new pack).
 *
 * The loads in flight (ra_begin/ra_end) are registered in a registry of
 * reads in flight (util/inflight.h, the one the engine uses for its GETs),
 * keyed by inode and chunk: a reader that needs a chunk some other thread is
 * loading waits for that load instead of scanning and reading it again;
 * prefetch threads skip chunks a reader is already loading.
 *
 * Concurrency: ra->mu protects the queue, the counters and the ra_* fields
 * of every inode; ra->busy has its own lock, never taken with ra->mu.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "extent.h"
#include "inflight.h"
#include "internal.h"
#include "log.h"
#include "readahead.h"
#include "thread.h"

#define RA_QUEUE 256      /* queued prefetches (more are dropped) */
#define RA_RANDOM_FILL 16 /* random reads of a file before it is filled whole */

struct ra_job {
	uint64_t ino; /* inode number */
	uint64_t idx; /* chunk index */
};

/* One prefetch thread (mw_thread, whose stop flag is guarded by ra->mu). */
struct ra_worker {
	struct mw_thread t;
	struct readahead *ra; /* borrowed */
};

struct readahead {
	struct mwfs *fs;           /* borrowed */
	uint64_t window;           /* bytes to keep fetched ahead of a sequential reader */
	uint64_t fill_max;         /* largest file filled whole for random readers (0: none) */
	struct mw_mutex mu;        /* see the file comment */
	pthread_cond_t work;       /* a job was queued, or stop; ra->mu */
	struct ra_job q[RA_QUEUE]; /* ring of queued jobs; ra->mu */
	size_t qhead, qn;          /* first job, count; ra->mu */
	struct inflight busy;      /* chunk loads in flight: key (ino, 0), bytes [idx, idx + 1) */
	struct ra_worker *thr;     /* the threads (nthr of them) */
	unsigned nthr;
	uint64_t prefetched; /* chunks loaded by the threads; ra->mu */
	uint64_t waited;     /* reads that waited for a load in flight; ra->mu */
	bool paused;         /* ra_pause(): no job starts; ra->mu */
	unsigned running;    /* jobs being loaded; ra->mu */
	pthread_cond_t idle; /* running reached 0 while paused; ra->mu */
};

int ra_begin(struct readahead *ra, uint64_t ino, uint64_t idx)
{
	if (!ra)
		return -1;
	int slot = inflight_begin(&ra->busy, ino, 0, idx, idx + 1);
	if (slot != INFLIGHT_WAITED)
		return slot;
	mw_mutex_lock(&ra->mu);
	ra->waited++;
	mw_mutex_unlock(&ra->mu);
	return -1;
}

void ra_end(struct readahead *ra, int slot)
{
	if (ra)
		inflight_end(&ra->busy, slot);
}

static void *worker(void *arg)
{
	struct ra_worker *w = arg;
	struct readahead *ra = w->ra;
	mw_mutex_lock(&ra->mu);
	for (;;) {
		while (!w->t.stop && (ra->qn == 0 || ra->paused))
			mw_cond_wait(&ra->work, &ra->mu);
		if (w->t.stop)
			break;
		struct ra_job j = ra->q[ra->qhead];
		ra->qhead = (ra->qhead + 1) % RA_QUEUE;
		ra->qn--;
		ra->running++;
		mw_mutex_unlock(&ra->mu);
		int slot = inflight_try_begin(&ra->busy, j.ino, 0, j.idx, j.idx + 1);
		if (slot < 0) { /* a reader is loading it (or every slot is taken) */
			mw_mutex_lock(&ra->mu);
			if (--ra->running == 0 && ra->paused)
				pthread_cond_broadcast(&ra->idle);
			continue;
		}
		uint64_t cs = ra->fs->cs;
		int rc = ext_prefetch(ra->fs, j.ino, j.idx * cs, cs);
		if (rc && rc != -ENOENT)
			log_debug("read-ahead of inode %llu chunk %llu: %s",
			          (unsigned long long)j.ino, (unsigned long long)j.idx,
			          strerror(-rc));
		inflight_end(&ra->busy, slot);
		mw_mutex_lock(&ra->mu);
		ra->prefetched++;
		if (--ra->running == 0 && ra->paused)
			pthread_cond_broadcast(&ra->idle);
	}
	mw_mutex_unlock(&ra->mu);
	return NULL;
}

/*
 * Wake threads for n jobs just queued (caller holds ra->mu): one per job, not
 * all of them for each (a sequential reader queues about one chunk per chunk
 * read; waking all eight threads for it cost seven needless context switches
 * each time, expensive on a virtual machine).
 */
static void wake(struct readahead *ra, unsigned n)
{
	if (n >= ra->nthr)
		pthread_cond_broadcast(&ra->work);
	else
		while (n--)
			pthread_cond_signal(&ra->work);
}

/*
 * A file read at random (RA_RANDOM_FILL reads that were not sequential) and
 * no larger than ra->fill_max is fetched whole, a chunk per job, into the
 * engine's caches (and so its disk cache): the next random reads find their
 * blocks on local disk instead of one GET each.  Tops the queue up to half
 * its size from ip->ra_fill on; caller holds ra->mu.
 */
static void fill_some(struct readahead *ra, struct inode *ip, uint64_t fsize)
{
	uint64_t cs = ra->fs->cs, nchunks = (fsize + cs - 1) / cs;
	unsigned queued = 0;

	if (!ra->fill_max || ip->ra_rand < RA_RANDOM_FILL || fsize > ra->fill_max)
		return;
	while (ip->ra_fill < nchunks && ra->qn < RA_QUEUE / 2) {
		struct ra_job *j = &ra->q[(ra->qhead + ra->qn) % RA_QUEUE];
		j->ino = ip->ino;
		j->idx = ip->ra_fill++;
		ra->qn++;
		queued++;
	}
	wake(ra, queued);
}

/*
 * The window of a streak of n >= 2 sequential reads: two chunks at the second
 * read, doubling with each read after it, up to ra->window.  A short
 * sequential read (a small file, the head of a big one) costs little; a long
 * one soon has ra->window / chunk GETs in flight.
 */
static uint64_t window_of(const struct readahead *ra, uint32_t n)
{
	uint64_t w = 2 * ra->fs->cs;

	for (uint32_t i = 2; i < n && w < ra->window; i++)
		w *= 2;
	return w < ra->window ? w : ra->window;
}

void ra_note_read(struct readahead *ra, struct inode *ip, uint64_t off, size_t len, uint64_t fsize)
{
	if (!ra || !ra->nthr || !len)
		return;
	uint64_t cs = ra->fs->cs;
	uint64_t end = off + len;
	uint64_t slack = 4 * cs;
	mw_mutex_lock(&ra->mu);
	bool seq = off == 0 || (off + slack >= ip->ra_next && off <= ip->ra_next + slack);
	if (!seq) {
		ip->ra_streak = 0;
		ip->ra_hi = 0;
		ip->ra_next = end;
		if (ip->ra_rand < UINT32_MAX)
			ip->ra_rand++;
		fill_some(ra, ip, fsize);
		mw_mutex_unlock(&ra->mu);
		return;
	}
	if (end > ip->ra_next)
		ip->ra_next = end;
	if (ip->ra_streak < UINT32_MAX)
		ip->ra_streak++;
	if (ip->ra_streak >= 2 && fsize > 0) {
		uint64_t first = (end + cs - 1) / cs; /* the first chunk not touched by this read */
		uint64_t last = (end + window_of(ra, ip->ra_streak) + cs - 1) / cs; /* exclusive */
		uint64_t nchunks = (fsize + cs - 1) / cs;
		if (first < ip->ra_hi)
			first = ip->ra_hi;
		if (last > nchunks)
			last = nchunks;
		unsigned queued = 0;
		for (uint64_t i = first; i < last && ra->qn < RA_QUEUE; i++) {
			struct ra_job *j = &ra->q[(ra->qhead + ra->qn) % RA_QUEUE];
			j->ino = ip->ino;
			j->idx = i;
			ra->qn++;
			ip->ra_hi = i + 1;
			queued++;
		}
		wake(ra, queued);
	}
	mw_mutex_unlock(&ra->mu);
}

void ra_pause(struct readahead *ra, bool pause)
{
	if (!ra)
		return;
	mw_mutex_lock(&ra->mu);
	ra->paused = pause;
	if (pause) {
		ra->qn = 0; /* queued for the state before: the readers queue again */
		while (ra->running)
			mw_cond_wait(&ra->idle, &ra->mu);
	} else {
		pthread_cond_broadcast(&ra->work);
	}
	mw_mutex_unlock(&ra->mu);
}

void ra_counts(struct readahead *ra, uint64_t *prefetched, uint64_t *waited)
{
	*prefetched = *waited = 0;
	if (!ra)
		return;
	mw_mutex_lock(&ra->mu);
	*prefetched = ra->prefetched;
	*waited = ra->waited;
	mw_mutex_unlock(&ra->mu);
}

int ra_start(struct mwfs *fs, unsigned nthreads, uint64_t window, struct readahead **out)
{
	struct readahead *ra = calloc(1, sizeof(*ra));
	if (!ra)
		return -ENOMEM;
	ra->fs = fs;
	ra->window = window;
	struct engine_stats es;
	engine_get_stats(fs->reg[0].e, &es);       /* region 0's disk cache: the mount's options */
	ra->fill_max = es.disk_cache_capacity / 4; /* a disk cache holds it with room to spare */
	mw_mutex_init(&ra->mu);
	pthread_cond_init(&ra->work, NULL);
	pthread_cond_init(&ra->idle, NULL);
	inflight_init(&ra->busy, INFLIGHT_MAX);
	if (window && nthreads) {
		ra->thr = calloc(nthreads, sizeof(*ra->thr));
		if (!ra->thr) {
			ra_stop(ra);
			return -ENOMEM;
		}
		for (; ra->nthr < nthreads; ra->nthr++) {
			struct ra_worker *w = &ra->thr[ra->nthr];
			w->ra = ra;
			int rc =
			    mw_thread_start(&w->t, "read-ahead", worker, w, &ra->mu, &ra->work);
			if (rc) {
				ra_stop(ra);
				return rc;
			}
		}
	}
	*out = ra;
	return 0;
}

void ra_stop(struct readahead *ra)
{
	if (!ra)
		return;
	for (unsigned i = 0; i < ra->nthr; i++)
		mw_thread_stop(&ra->thr[i].t);
	free(ra->thr);
	pthread_cond_destroy(&ra->work);
	pthread_cond_destroy(&ra->idle);
	inflight_destroy(&ra->busy);
	mw_mutex_destroy(&ra->mu);
	free(ra);
}
