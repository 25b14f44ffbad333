/*
 * inflight.h - a registry of reads in flight, so that threads that miss the
 * same bytes at once send one read of them, not one each.
 *
 * A read of bytes [lo, hi) of an object (named by two numbers: a pack's
 * epoch and position; an SSTable reader's whole table is one registry, key
 * 0, 0) registers first (inflight_begin()).  A thread whose range overlaps a
 * registered one waits until that read ends and is told to look in its
 * caches again (INFLIGHT_WAITED); otherwise it takes a slot and releases it
 * with inflight_end() once what it read is cached (or the read failed).
 * When every slot is taken a read goes without one: no waiting for anyone.
 * Users: pack ranges (engine/read/blob.c, one registry per engine), SSTable data
 * blocks (engine/table/sst_read.c, one per reader) and chunk-sized windows of files
 * (fs/readahead.c: a reader waits for the prefetch of its window, key inode
 * number, 0).  The one registry of reads in flight: in util/ so that both
 * layers use it.  Thread-safe.
 */
#ifndef MEMWALFS_INFLIGHT_H
#define MEMWALFS_INFLIGHT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define INFLIGHT_MAX 64         /* slots a registry may have (fs/: FUSE threads + prefetchers) */
#define INFLIGHT_WAITED (-1000) /* inflight_begin(): another read had the bytes: look again */

struct inflight_slot {
	bool used;       /* the slot is taken */
	uint64_t a, b;   /* the object */
	uint64_t lo, hi; /* its bytes [lo, hi) */
};

struct inflight {
	pthread_mutex_t mu;                      /* guards slot[] */
	pthread_cond_t cv;                       /* a read ended [mu] */
	unsigned n;                              /* slots in use of slot[] */
	struct inflight_slot slot[INFLIGHT_MAX]; /* [mu] */
};

/* Start r with n slots (1..INFLIGHT_MAX). */
void inflight_init(struct inflight *r, unsigned n);
void inflight_destroy(struct inflight *r);

/*
 * Before a read of bytes [lo, hi) of object (a, b): INFLIGHT_WAITED after
 * waiting for an overlapping read in flight, else the slot taken (>= 0) or
 * -1 when none was free.
 */
int inflight_begin(struct inflight *r, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi);

/*
 * inflight_begin() that never waits: the slot taken, or -1 when an
 * overlapping read is in flight or no slot is free (a prefetch then skips).
 */
int inflight_try_begin(struct inflight *r, uint64_t a, uint64_t b, uint64_t lo, uint64_t hi);

/* The read of inflight_begin()'s slot ended: wake those waiting.  Accepts -1. */
void inflight_end(struct inflight *r, int slot);

#endif /* MEMWALFS_INFLIGHT_H */
