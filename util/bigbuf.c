/*
 * bigbuf.c - the pool of large page-aligned buffers (bigbuf.h).
 *
 * One anonymous mapping, aligned to 2 MiB so that its huge pages line up
 * with slots, is cut into nslots slots.  Slots never handed out are above
 * `next` (bump allocation, in address order, so that the resident part stays
 * dense); freed ones are on a stack (`free_slots`, the last freed on top,
 * whose memory is the most likely to be in the CPU caches and mapped).  A
 * slot handed out for the first time is faulted in with one
 * madvise(MADV_POPULATE_WRITE) (Linux 5.14; elsewhere the first writes fault
 * it in as usual).
 */
#include "bigbuf.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#define HUGE_ALIGN ((size_t)2 << 20) /* x86-64's transparent huge page */

/* Under ASan a slot's bytes past the request, and a free slot, are poisoned. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct bigbuf_pool {
	pthread_mutex_t mu;
	uint8_t *map;         /* the mapping as mmap() returned it */
	size_t map_len;       /* its length */
	uint8_t *base;        /* first slot (2 MiB-aligned inside map) */
	size_t slot;          /* bytes per slot */
	size_t nslots;        /* slots in the mapping */
	size_t next;          /* first slot never handed out; mu */
	uint32_t *free_slots; /* stack of freed slots; mu */
	size_t nfree;         /* its depth; mu */
	uint64_t in_use;      /* mu */
	uint64_t fallbacks;   /* mu */
};

static size_t page_size(void)
{
	long ps = sysconf(_SC_PAGESIZE);
	return ps > 0 ? (size_t)ps : 4096;
}

int bigbuf_pool_new(size_t slot_bytes, size_t max_bytes, struct bigbuf_pool **out)
{
	size_t ps = page_size();
	if (!slot_bytes || !out || slot_bytes > SIZE_MAX / 2)
		return -EINVAL;
	size_t slot = (slot_bytes + ps - 1) / ps * ps;
	size_t n = max_bytes / slot ? max_bytes / slot : 1;
	if (n > UINT32_MAX || n > (SIZE_MAX - HUGE_ALIGN) / slot)
		return -EINVAL;
	struct bigbuf_pool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->free_slots = malloc(n * sizeof(*p->free_slots));
	p->map_len = n * slot + HUGE_ALIGN;
	p->map = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE,
	              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p->map == MAP_FAILED || !p->free_slots) {
		if (p->map != MAP_FAILED)
			munmap(p->map, p->map_len);
		free(p->free_slots);
		free(p);
		return -ENOMEM;
	}
	uintptr_t a = ((uintptr_t)p->map + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
	p->base = (uint8_t *)a;
	p->slot = slot;
	p->nslots = n;
	/* advice only: with transparent huge pages off or unsupported, 4 KiB pages */
	(void)madvise(p->base, n * slot, MADV_HUGEPAGE);
	pthread_mutex_init(&p->mu, NULL);
	*out = p;
	return 0;
}

void bigbuf_pool_free(struct bigbuf_pool *p)
{
	if (!p)
		return;
	UNPOISON(p->base, p->nslots * p->slot); /* the addresses may be mapped again */
	munmap(p->map, p->map_len);
	pthread_mutex_destroy(&p->mu);
	free(p->free_slots);
	free(p);
}

/* A buffer from malloc(): page-aligned from BIGBUF_ALIGNED on. */
static void *fallback(size_t len)
{
	void *b = NULL;
	if (len < BIGBUF_ALIGNED)
		return malloc(len);
	return posix_memalign(&b, page_size(), len) ? NULL : b;
}

void *bigbuf_get(struct bigbuf_pool *p, size_t len)
{
	if (!len)
		len = 1;
	if (!p || len > p->slot || len <= p->slot / 2)
		return fallback(len);
	uint8_t *b = NULL;
	bool fresh = false;
	pthread_mutex_lock(&p->mu);
	if (p->nfree) {
		b = p->base + (size_t)p->free_slots[--p->nfree] * p->slot;
	} else if (p->next < p->nslots) {
		b = p->base + p->next++ * p->slot;
		fresh = true;
	}
	if (b)
		p->in_use++;
	else
		p->fallbacks++;
	pthread_mutex_unlock(&p->mu);
	if (!b)
		return fallback(len);
	if (fresh) /* one call instead of a fault per page; fails harmlessly before 5.14 */
		(void)madvise(b, p->slot, MADV_POPULATE_WRITE);
	UNPOISON(b, len);
	POISON(b + len, p->slot - len);
	return b;
}

void bigbuf_put(struct bigbuf_pool *p, void *buf)
{
	uint8_t *b = buf;
	if (!b)
		return;
	if (!p || b < p->base || b >= p->base + p->nslots * p->slot) {
		free(buf);
		return;
	}
	size_t i = (size_t)(b - p->base) / p->slot;
	POISON(p->base + i * p->slot, p->slot);
	pthread_mutex_lock(&p->mu);
	p->free_slots[p->nfree++] = (uint32_t)i;
	p->in_use--;
	pthread_mutex_unlock(&p->mu);
}

size_t bigbuf_slot_bytes(const struct bigbuf_pool *p)
{
	return p ? p->slot : 0;
}

void bigbuf_pool_stats(struct bigbuf_pool *p, struct bigbuf_stats *st)
{
	*st = (struct bigbuf_stats){0};
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	st->slot_bytes = p->slot;
	st->slots = p->nslots;
	st->in_use = p->in_use;
	st->touched = p->next;
	st->fallbacks = p->fallbacks;
	pthread_mutex_unlock(&p->mu);
}
