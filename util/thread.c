/*
 * thread.c - background threads and checked locks (see thread.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "thread.h"

#ifndef NDEBUG
uintptr_t mw_thread_self(void)
{
	static _Thread_local char self;

	return (uintptr_t)&self;
}

_Thread_local unsigned mw_noio_depth;

_Noreturn void mw_noio_fail(const char *fn, const void *key, size_t klen)
{
	char shown[4 * 64 + 1]; /* "\\xNN" at most per byte */
	size_t n = 0;

	/* keys are binary (the engine's) or text (the store's): escape what is not printable */
	for (size_t i = 0; i < klen && i < 64; i++) {
		unsigned char c = ((const unsigned char *)key)[i];
		n += (size_t)snprintf(shown + n, sizeof(shown) - n,
		                      c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
	}
	shown[n] = 0;
	log_err("%s: store I/O or a wait for it under a no-I/O lock (fs->mu), key \"%s\"%s", fn,
	        shown, klen > 64 ? "..." : "");
	abort();
}
#endif

int mw_thread_start(struct mw_thread *t, const char *name, void *(*fn)(void *), void *arg,
                    struct mw_mutex *mu, pthread_cond_t *cv)
{
	int rc;

	t->name = name;
	t->mu = mu;
	t->cv = cv;
	t->stop = false;
	t->running = false;
	rc = pthread_create(&t->tid, NULL, fn, arg);
	if (rc) {
		log_err("cannot start the %s thread: %s", name, strerror(rc));
		return -rc;
	}
	t->running = true;
	return 0;
}

void mw_thread_stop(struct mw_thread *t)
{
	if (!t->running)
		return;
	mw_mutex_lock(t->mu);
	t->stop = true;
	pthread_cond_broadcast(t->cv);
	mw_mutex_unlock(t->mu);
	pthread_join(t->tid, NULL);
	t->running = false;
}

void mw_cond_init_monotonic(pthread_cond_t *cv)
{
	pthread_condattr_t ca;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &ca);
	pthread_condattr_destroy(&ca);
}

uint64_t mw_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}
