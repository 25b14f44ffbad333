/*
 * inflight.c - the registry of reads in flight (inflight.h).
 */
#include "inflight.h"

void inflight_init(struct inflight *r, unsigned n)
{
	pthread_mutex_init(&r->mu, NULL);
	pthread_cond_init(&r->cv, NULL);
	r->n = n < 1 ? 1 : n > INFLIGHT_MAX ? INFLIGHT_MAX : n;
	for (unsigned i = 0; i < INFLIGHT_MAX; i++)
		r->slot[i].used = false;
}

void inflight_destroy(struct inflight *r)
{
	pthread_cond_destroy(&r->cv);
	pthread_mutex_destroy(&r->mu);
}

/* Is a read of [lo, hi) of (a, b) in flight? [r->mu] */
static bool busy(const struct inflight *r, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
	for (unsigned i = 0; i < r->n; i++) {
		const struct inflight_slot *s = &r->slot[i];
		if (s->used && s->a == a && s->b == b && s->lo < hi && lo < s->hi)
			return true;
	}
	return false;
}

/* Take a free slot for [lo, hi) of (a, b) (r->mu held): its index, or -1. */
static int take(struct inflight *r, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
	for (unsigned i = 0; i < r->n; i++)
		if (!r->slot[i].used) {
			r->slot[i] = (struct inflight_slot){true, a, b, lo, hi};
			return (int)i;
		}
	return -1;
}

int inflight_begin(struct inflight *r, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
	int slot = -1;
	bool waited = false;

	pthread_mutex_lock(&r->mu);
	while (busy(r, a, b, lo, hi)) {
		waited = true;
		pthread_cond_wait(&r->cv, &r->mu);
	}
	if (!waited)
		slot = take(r, a, b, lo, hi);
	pthread_mutex_unlock(&r->mu);
	return waited ? INFLIGHT_WAITED : slot;
}

int inflight_try_begin(struct inflight *r, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
	pthread_mutex_lock(&r->mu);
	int slot = busy(r, a, b, lo, hi) ? -1 : take(r, a, b, lo, hi);
	pthread_mutex_unlock(&r->mu);
	return slot;
}

void inflight_end(struct inflight *r, int slot)
{
	if (slot < 0 || (unsigned)slot >= r->n)
		return;
	pthread_mutex_lock(&r->mu);
	r->slot[slot].used = false;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
}
