/*
 * hist.c - lock-free latency histograms (see hist.h).
 */
#include "hist.h"

const uint64_t mw_hist_bounds_us[MW_HIST_BUCKETS] = {
    50,     100,    250,    500,     1000,    2500,    5000,     10000,    25000,    50000,
    100000, 250000, 500000, 1000000, 2500000, 5000000, 10000000, 20000000, 30000000, 60000000,
};

void mw_hist_record(struct mw_hist *h, uint64_t us)
{
	int i = 0;
	while (i < MW_HIST_BUCKETS && us > mw_hist_bounds_us[i])
		i++;
	atomic_fetch_add_explicit(&h->bucket[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->sum_us, us, memory_order_relaxed);
}

void mw_hist_read(const struct mw_hist *h, struct mw_hist_snap *out)
{
	out->count = 0;
	for (int i = 0; i <= MW_HIST_BUCKETS; i++) {
		/* const: atomic_load of a const-qualified object is fine in C17, not in all C11
		 * libs */
		out->bucket[i] =
		    atomic_load_explicit((_Atomic uint64_t *)&h->bucket[i], memory_order_relaxed);
		out->count += out->bucket[i];
	}
	out->sum_us = atomic_load_explicit((_Atomic uint64_t *)&h->sum_us, memory_order_relaxed);
}
