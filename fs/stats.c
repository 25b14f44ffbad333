/*
 * stats.c - the mount's statistics (mwfs_stats_format(), fs.h): the
 * engine's, then the filesystem's own counters.  Its own file, below fs.c
 * and xattr.c (the root's stats xattr), so that neither calls the other.
 */
#include <stdatomic.h>
#include <stdio.h>

#include "hist.h"
#include "internal.h"

void mwfs_get_fsync_latency(struct mwfs *fs, struct mw_hist_snap *out)
{
	mw_hist_read(&fs->fsync_hist, out);
}

size_t mwfs_stats_format(struct mwfs *fs, char *buf, size_t len)
{
	uint64_t pre, waited;
	struct fsnotify_counts nc;
	fsnotify_counts(fs->nf, &nc);
	size_t n = engine_stats_format(fs->reg[0].e, buf, len); /* region 0's, for now */
	ra_counts(fs->ra, &pre, &waited);
	char tail[256];
	int w = snprintf(
	    tail, sizeof(tail),
	    "fs_readahead_chunks %llu\nfs_read_waits %llu\nfs_folded_windows %llu\n"
	    "fs_page_invalidations %llu\nfs_inval_retries %llu\nfs_noio_retries %llu\n",
	    (unsigned long long)pre, (unsigned long long)waited,
	    (unsigned long long)data_flusher_folded(fs->wbf), (unsigned long long)nc.inodes,
	    (unsigned long long)nc.retries,
	    (unsigned long long)atomic_load_explicit(&fs->noio_retries, memory_order_relaxed));
	if (w > 0 && n < len)
		snprintf(buf + n, len - n, "%s", tail);
	n += w > 0 ? (size_t)w : 0;
	if (fs->o.hold_stats && n < len)
		n += fs->o.hold_stats(fs->o.take_arg, 0, buf + n, len - n);
	return n;
}
