/*
 * pool.c - the FUSE request loop: a pool of worker threads that parks the
 * ones it does not need.
 *
 * libfuse's fuse_session_loop_mt() leaves every idle worker asleep in
 * read() on /dev/fuse, and the kernel hands each request to the waiter that
 * has slept longest.  A mount needs many workers (each fsync holds one until
 * its group is durable: 64 by default), and with all 64 idle in read() 8
 * processes creating, reading, stat-ing or removing small files ran 20-40%
 * slower than on 8 workers (mdtest through tools/bench, local store: every
 * request woke another thread, with a cold cache and stack).  libfuse's cap
 * on idle workers (max_idle_threads) ends the extra threads instead, and a
 * burst of fsyncs then pays a thread start per request.
 *
 * Here at most POOL_READERS workers are in read() (or on their way to it);
 * a worker done with a request goes back to read() if fewer are, else it
 * parks on a LIFO stack.  A reader that takes the last reading place with a
 * request wakes the worker parked last (or starts one, up to the limit)
 * before it handles the request, so some worker always reads while any may
 * be started.  Requests from a few processes thus rotate over at most
 * POOL_READERS threads, and waiting fsyncs still get up to max_threads.
 *
 * Exit: a reader sees the unmount (0 from fuse_session_receive_buf(), which
 * marks the session exited) or an error; a signal (libfuse's handlers:
 * fuse_session_exit()) interrupts the caller of pool_run(), the only thread
 * with signals unblocked, which then cancels the workers in read()
 * (cancellation is enabled only there).  Parked workers are woken and leave;
 * workers busy with a request finish it first, as with libfuse.
 */
#include "internal.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

struct worker {
	struct worker *next; /* on the parked stack */
	struct worker *all;  /* every worker, for the join at exit */
	struct pool *p;
	pthread_t t;
	pthread_cond_t cv; /* signalled when this worker should read or leave */
	bool woken;        /* set with cv [p->mu] */
	bool reading;      /* in fuse_session_receive_buf(), cancellable [p->mu] */
	struct fuse_buf buf;
};

/* Workers kept in read() at most; the others park (a burst of fsyncs may hold many). */
#define POOL_READERS 8

struct pool {
	struct fuse_session *se;
	struct fs_gate *gate; /* each request is handled inside it */
	pthread_mutex_t mu;
	struct worker *parked; /* LIFO: the most recently parked on top [mu] */
	struct worker *all;    /* [mu] */
	unsigned readers;      /* workers in read() or on their way to it [mu] */
	unsigned n, max;       /* workers started, at most [mu] */
	bool exit;             /* set once: every worker leaves [mu] */
	int error;             /* the first read error (negative errno), or 0 [mu] */
	sem_t done;            /* posted when exit is set */
};

static void *worker_main(void *arg);

/*
 * Start a worker, counted as a reader, with every signal blocked (they go
 * to pool_run()'s caller).  p->mu held.
 */
static int start_worker(struct pool *p)
{
	struct worker *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->p = p;
	pthread_cond_init(&w->cv, NULL);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&w->t, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		free(w);
		return -rc;
	}
	w->all = p->all;
	p->all = w;
	p->n++;
	p->readers++; /* it starts by reading */
	return 0;
}

/* Set exit (first caller wins), wake every parked worker and the waiter.  p->mu held. */
static void pool_exit_locked(struct pool *p, int error)
{
	if (p->exit)
		return;
	p->exit = true;
	p->error = error;
	for (struct worker *w = p->parked; w; w = w->next) {
		w->woken = true;
		p->readers++;
		pthread_cond_signal(&w->cv);
	}
	p->parked = NULL;
	sem_post(&p->done);
}

/*
 * Nobody reads: wake the worker parked last, or start one (it counts
 * itself in p->readers).  p->mu held.
 */
static void hand_on_locked(struct pool *p)
{
	struct worker *w = p->parked;
	if (w) {
		p->parked = w->next;
		w->woken = true;
		p->readers++; /* counted now, so that one wake-up serves */
		pthread_cond_signal(&w->cv);
	} else if (p->n < p->max && start_worker(p)) {
		log_warn("cannot start a FUSE worker thread (%u running)", p->n);
	}
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct pool *p = w->p;
	pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
	pthread_mutex_lock(&p->mu);
	while (!p->exit) {
		w->reading = true;
		pthread_mutex_unlock(&p->mu);
		pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
		int rc = fuse_session_receive_buf(p->se, &w->buf);
		pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
		pthread_mutex_lock(&p->mu);
		w->reading = false;
		if (rc == -EINTR || rc == -EAGAIN)
			continue;
		p->readers--;
		if (rc <= 0) { /* 0: unmounted (the session is marked exited) */
			if (rc < 0)
				fuse_session_exit(p->se);
			pool_exit_locked(p, rc);
			break;
		}
		if (p->readers == 0)
			hand_on_locked(p);
		pthread_mutex_unlock(&p->mu);
		fs_gate_enter(p->gate);
		fuse_session_process_buf(p->se, &w->buf);
		fs_gate_leave(p->gate);
		pthread_mutex_lock(&p->mu);
		if (p->readers >= POOL_READERS && !p->exit) { /* enough read: park */
			w->woken = false;
			w->next = p->parked;
			p->parked = w;
			while (!w->woken)
				pthread_cond_wait(&w->cv, &p->mu);
		} else {
			p->readers++; /* (a parked one is counted by whoever wakes it) */
		}
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

int pool_run(struct fuse_session *se, unsigned max_threads, struct fs_gate *gate)
{
	struct pool p = {.se = se, .gate = gate, .max = max_threads ? max_threads : 1};
	pthread_mutex_init(&p.mu, NULL);
	sem_init(&p.done, 0, 0);
	pthread_mutex_lock(&p.mu);
	int rc = start_worker(&p);
	pthread_mutex_unlock(&p.mu);
	if (rc) {
		log_err("cannot start the FUSE worker threads: %s", strerror(-rc));
		goto out;
	}
	/*
	 * A signal's handler marks the session exited and interrupts the wait
	 * (no SA_RESTART); the timeout covers a signal taken by another thread.
	 */
	while (!fuse_session_exited(se)) {
		pthread_mutex_lock(&p.mu);
		bool ex = p.exit;
		pthread_mutex_unlock(&p.mu);
		if (ex)
			break;
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += 1;
		sem_timedwait(&p.done, &until);
	}
	pthread_mutex_lock(&p.mu);
	pool_exit_locked(&p, 0);
	for (struct worker *w = p.all; w; w = w->all)
		if (w->reading) /* stuck in read(); cancellation is on only there */
			pthread_cancel(w->t);
	rc = p.error;
	struct worker *all = p.all;
	pthread_mutex_unlock(&p.mu);
	while (all) {
		struct worker *w = all;
		all = w->all;
		pthread_join(w->t, NULL);
		pthread_cond_destroy(&w->cv);
		free(w->buf.mem);
		free(w);
	}
out:
	sem_destroy(&p.done);
	pthread_mutex_destroy(&p.mu);
	return rc;
}
