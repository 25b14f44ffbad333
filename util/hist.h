/*
 * hist.h - latency histograms that any thread records into without a lock.
 *
 * A struct mw_hist counts observations (microseconds) in MW_HIST_BUCKETS
 * fixed buckets whose upper bounds (mw_hist_bounds_us[], inclusive) grow
 * from 50 us to 60 s in 1-2.5-5 steps, plus one for everything slower, and
 * keeps their sum.  Recording is a short search and two relaxed atomic
 * additions: cheap enough for every commit, store request and fsync.
 * Readers take a snapshot whose total count is the sum of its buckets, so
 * the cumulative buckets of an export are always consistent (the sum may be
 * a few observations behind or ahead under concurrent recording).
 *
 * The metrics endpoint (tools/metrics.c) exports these as Prometheus
 * histograms in seconds; docs/METRICS.md lists them.
 */
#ifndef MEMWALFS_HIST_H
#define MEMWALFS_HIST_H

#include <stdatomic.h>
#include <stdint.h>

#define MW_HIST_BUCKETS 20 /* finite upper bounds; one more bucket holds the rest */

/* Upper bounds of the finite buckets, microseconds, ascending. */
extern const uint64_t mw_hist_bounds_us[MW_HIST_BUCKETS];

/* A histogram; zero-initialised (static, calloc, memset) is empty. */
struct mw_hist {
	_Atomic uint64_t bucket[MW_HIST_BUCKETS + 1]; /* observations per bucket (not cumulative) */
	_Atomic uint64_t sum_us;                      /* sum of every observation */
};

/* A copy of a histogram (mw_hist_read()). */
struct mw_hist_snap {
	uint64_t bucket[MW_HIST_BUCKETS + 1]; /* per bucket, not cumulative; last: > the bounds */
	uint64_t count;                       /* sum of bucket[] */
	uint64_t sum_us;                      /* sum of the observations */
};

/* Record one observation of us microseconds.  Any thread, no lock. */
void mw_hist_record(struct mw_hist *h, uint64_t us);

/* Copy h into *out.  Any thread. */
void mw_hist_read(const struct mw_hist *h, struct mw_hist_snap *out);

#endif /* MEMWALFS_HIST_H */
