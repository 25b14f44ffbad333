/*
 * thread.h - background threads, checked locks and the monotonic clock, for
 * every layer.
 *
 * struct mw_thread: one background thread with a stop flag.  The thread's
 * main loop waits on a condition variable under a mutex the owner provides
 * and exits once t->stop is set; mw_thread_stop() sets the flag under that
 * mutex, wakes the thread and joins it.  (Model: LevelDB's background
 * thread in util/env_posix.cc, with the shutdown flag under the DB mutex.)
 *
 * struct mw_mutex: a pthread mutex that, in debug builds (assert() on),
 * remembers which thread holds it, so that functions documented "caller
 * holds the lock" (the *_locked ones) check it with mw_mutex_assert_held()
 * (LevelDB's port::Mutex::AssertHeld()).  With NDEBUG the owner is not
 * tracked and the wrappers are plain pthread calls.  Waits on a condition
 * variable must go through mw_cond_wait() / mw_cond_timedwait(), which keep
 * the owner right across the wait.
 *
 * The no-I/O mark: a mutex set with mw_mutex_set_noio() (the filesystem's
 * fs->mu) is one under which nothing may wait for the object store, since
 * every request of the mount queues behind it.  In debug builds its holder
 * carries a per-thread mark (a depth counter, as mw_noio_enter() sets), and
 * the entry points that may do store I/O or wait for it (s3/store.c, the
 * engine's reads, writes and waits) call mw_noio_check(), which aborts,
 * naming the function and the key, while the mark is set.  Code under such
 * a lock uses the engine's no-wait calls (ENGINE_NOWAIT, engine.h) instead.
 * With NDEBUG nothing is tracked and the checks compile to nothing.
 *
 * Threads: a struct mw_thread is started and stopped by one owner thread;
 * the mutex functions are as thread-safe as pthread's.
 */
#ifndef MEMWALFS_THREAD_H
#define MEMWALFS_THREAD_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

/* A mutex that knows its holder in debug builds. */
struct mw_mutex {
	pthread_mutex_t m; /* the lock itself */
#ifndef NDEBUG
	_Atomic uintptr_t owner; /* mw_thread_self() of the holder, 0 when free */
	bool noio;               /* its holder is marked "no store I/O" (mw_mutex_set_noio()) */
#endif
};

#ifndef NDEBUG
/* A token unique to the calling thread (the address of a thread-local). */
uintptr_t mw_thread_self(void);

/* The calling thread's no-I/O depth: locks held marked so, plus mw_noio_enter()s. */
extern _Thread_local unsigned mw_noio_depth;

/* Log "fn: store I/O or a wait under a no-I/O lock (key ...)" and abort. */
_Noreturn void mw_noio_fail(const char *fn, const void *key, size_t klen);
#endif

/* Mark the calling thread "no store I/O" until the matching mw_noio_leave(). */
static inline void mw_noio_enter(void)
{
#ifndef NDEBUG
	mw_noio_depth++;
#endif
}

static inline void mw_noio_leave(void)
{
#ifndef NDEBUG
	assert(mw_noio_depth > 0);
	mw_noio_depth--;
#endif
}

/*
 * Debug builds: abort, naming fn and the klen bytes of key (may be NULL),
 * when the calling thread is marked "no store I/O".  No-op with NDEBUG.
 */
static inline void mw_noio_check(const char *fn, const void *key, size_t klen)
{
#ifndef NDEBUG
	if (mw_noio_depth)
		mw_noio_fail(fn, key, klen);
#else
	(void)fn;
	(void)key;
	(void)klen;
#endif
}

static inline void mw_mutex_init(struct mw_mutex *mu)
{
	pthread_mutex_init(&mu->m, NULL);
#ifndef NDEBUG
	atomic_init(&mu->owner, 0);
	mu->noio = false;
#endif
}

/* Holding mu marks the holder "no store I/O" (see the top of this file).  Before use. */
static inline void mw_mutex_set_noio(struct mw_mutex *mu)
{
#ifndef NDEBUG
	mu->noio = true;
#else
	(void)mu;
#endif
}

static inline void mw_mutex_destroy(struct mw_mutex *mu)
{
	pthread_mutex_destroy(&mu->m);
}

static inline void mw_mutex_lock(struct mw_mutex *mu)
{
	pthread_mutex_lock(&mu->m);
#ifndef NDEBUG
	atomic_store_explicit(&mu->owner, mw_thread_self(), memory_order_relaxed);
	if (mu->noio)
		mw_noio_enter();
#endif
}

static inline void mw_mutex_unlock(struct mw_mutex *mu)
{
#ifndef NDEBUG
	if (mu->noio)
		mw_noio_leave();
	atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
#endif
	pthread_mutex_unlock(&mu->m);
}

/* Debug builds: abort unless the calling thread holds mu.  No-op with NDEBUG. */
static inline void mw_mutex_assert_held(struct mw_mutex *mu)
{
#ifndef NDEBUG
	assert(atomic_load_explicit(&mu->owner, memory_order_relaxed) == mw_thread_self());
#else
	(void)mu;
#endif
}

/* pthread_cond_wait() on mu (held by the caller), keeping the owner right. */
static inline void mw_cond_wait(pthread_cond_t *cv, struct mw_mutex *mu)
{
	mw_mutex_assert_held(mu);
#ifndef NDEBUG
	atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
#endif
	pthread_cond_wait(cv, &mu->m);
#ifndef NDEBUG
	atomic_store_explicit(&mu->owner, mw_thread_self(), memory_order_relaxed);
#endif
}

/* pthread_cond_timedwait() on mu (held by the caller); returns its result. */
static inline int mw_cond_timedwait(pthread_cond_t *cv, struct mw_mutex *mu,
                                    const struct timespec *until)
{
	int rc;

	mw_mutex_assert_held(mu);
#ifndef NDEBUG
	atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
#endif
	rc = pthread_cond_timedwait(cv, &mu->m, until);
#ifndef NDEBUG
	atomic_store_explicit(&mu->owner, mw_thread_self(), memory_order_relaxed);
#endif
	return rc;
}

/* One background thread (see the top of this file). */
struct mw_thread {
	pthread_t tid;       /* the thread, valid while running */
	bool running;        /* started and not yet joined (owner thread only) */
	bool stop;           /* mw_thread_stop() asks the thread to exit [*mu] */
	struct mw_mutex *mu; /* borrowed: guards stop */
	pthread_cond_t *cv;  /* borrowed: the thread waits on it under *mu */
	const char *name;    /* for log lines (static string) */
};

/*
 * Start fn(arg) as thread t, which waits on cv under mu and exits once
 * t->stop is set.  Returns 0 or a negative errno (logged, naming the
 * thread); t is then not running and mw_thread_stop() does nothing.
 */
int mw_thread_start(struct mw_thread *t, const char *name, void *(*fn)(void *), void *arg,
                    struct mw_mutex *mu, pthread_cond_t *cv);

/*
 * Set t->stop under *mu, wake every waiter of *cv and join the thread.
 * Does nothing when t is not running.  The caller must not hold *mu.
 */
void mw_thread_stop(struct mw_thread *t);

/* pthread_cond_init() with the monotonic clock (timed waits use CLOCK_MONOTONIC). */
void mw_cond_init_monotonic(pthread_cond_t *cv);

/* The monotonic clock in microseconds.  Thread-safe. */
uint64_t mw_now_us(void);

/* The CLOCK_MONOTONIC time ms milliseconds from now: a deadline for mw_cond_timedwait(). */
static inline struct timespec mw_after_ms(uint64_t ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + ms * 1000000u;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return ts;
}

#endif /* MEMWALFS_THREAD_H */
