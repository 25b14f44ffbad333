/*
 * bigbuf.h - a pool of large page-aligned buffers that are used again
 * instead of being given back to the kernel, from transparent huge pages
 * where the kernel allows them.
 *
 * Why: the buffers of ranged GETs of 1 MiB pack windows are allocated and
 * freed at the rate a cold read runs (hundreds a second).  From malloc()
 * each was mostly fresh memory: a 512 MiB cold read took ~120,000 page
 * faults (one per 4 KiB; malloc's per-thread arenas spread the freed
 * buffers), and on the 2-core benchmark VM a fault costs ~15 us, which was
 * two thirds of the daemon's CPU time of the read.  A pool slot, once
 * touched, stays resident and is handed out again; the pool's mapping asks
 * for huge pages (madvise MADV_HUGEPAGE), so even the first touch of a
 * slot costs one fault per 2 MiB where the kernel grants them.
 *
 * A pool has slots of one size (page-aligned) in one mapping reserved at
 * creation (MAP_NORESERVE: only the slots handed out ever cost memory).
 * bigbuf_get() of more than half a slot and at most a slot takes a slot (the
 * last freed first); any other request, or one when every slot is taken, is
 * served by malloc() instead (page-aligned from BIGBUF_ALIGNED on), so that a
 * slot is never mostly empty; bigbuf_put() tells the two apart by address.
 * Memory of freed slots is kept for the pool's life (its high-water mark is
 * the most slots ever used at once).
 *
 * Thread safety: every function may be called from any thread; a pool is
 * freed once, after its last buffer has been put back.
 */
#ifndef MEMWALFS_BIGBUF_H
#define MEMWALFS_BIGBUF_H

#include <stddef.h>
#include <stdint.h>

struct bigbuf_pool;

/* Buffers from this size on are page-aligned (a slot always is). */
#define BIGBUF_ALIGNED ((size_t)256 << 10)

/* Counters of a pool (bigbuf_pool_stats). */
struct bigbuf_stats {
	uint64_t slot_bytes; /* the size of a slot */
	uint64_t slots;      /* slots in the mapping */
	uint64_t in_use;     /* slots handed out now */
	uint64_t touched;    /* slots ever handed out (resident memory: touched * slot_bytes) */
	uint64_t fallbacks;  /* slot-sized requests served by malloc: no slot was free */
};

/*
 * Create a pool of slots of slot_bytes (rounded up to a page) in a mapping of
 * at most max_bytes (at least one slot).  *out only on success; -ENOMEM when
 * the mapping or the pool cannot be had, -EINVAL for a zero size.
 */
int bigbuf_pool_new(size_t slot_bytes, size_t max_bytes, struct bigbuf_pool **out);

/* Unmap the pool; every slot must have been put back.  Accepts NULL. */
void bigbuf_pool_free(struct bigbuf_pool *p);

/*
 * A buffer of at least len bytes (page-aligned when len >= BIGBUF_ALIGNED),
 * or NULL when out of memory.  Give it back with bigbuf_put(p, buf) only,
 * never free().  With p NULL: from malloc(), given back with bigbuf_put(NULL,
 * buf) all the same.
 */
void *bigbuf_get(struct bigbuf_pool *p, size_t len);

/* Give back a buffer from bigbuf_get(p, ...).  Accepts NULL buf. */
void bigbuf_put(struct bigbuf_pool *p, void *buf);

/* The size of p's slots (0 for NULL): requests up to it take a slot. */
size_t bigbuf_slot_bytes(const struct bigbuf_pool *p);

/* Counters of p (zeroes for NULL). */
void bigbuf_pool_stats(struct bigbuf_pool *p, struct bigbuf_stats *st);

#endif
