/*
 * benchstat.h - helpers shared by the stand-alone benchmark programs of
 * tools/bench (durable_creates.c, stat_backpressure.c): a monotonic clock and
 * percentiles of latency samples.  Header-only, because run.sh builds each
 * program from its one .c file (cc -O2 -pthread -o NAME NAME.c).
 */
#ifndef MEMWALFS_BENCHSTAT_H
#define MEMWALFS_BENCHSTAT_H

#include <stddef.h>
#include <time.h>

/* CLOCK_MONOTONIC in seconds. */
static inline double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* qsort() comparison of doubles, ascending. */
static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The P-th percentile (nearest rank) of N sorted samples; 0 without samples. */
static inline double pct(const double *v, size_t n, double p)
{
	size_t i;

	if (n == 0)
		return 0;
	i = (size_t)(p / 100.0 * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
}

#endif
