/*
 * stats.c - the mount's statistics (mwfs_stats_format(), fs.h): region 0's
 * engine's, the filesystem's own counters, the mount command's (the lease),
 * then a block of lines per region of the table (docs/METRICS.md, "Per
 * region").  Its own file, below fs.c and xattr.c (the root's stats xattr),
 * so that neither calls the other.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "hist.h"
#include "internal.h"

void mwfs_get_fsync_latency(struct mwfs *fs, struct mw_hist_snap *out)
{
	mw_hist_read(&fs->fsync_hist, out);
}

/* snprintf at buf + *n (nothing once full); *n grows by the length wanted. */
static void __attribute__((format(printf, 4, 5)))
out(char *buf, size_t len, size_t *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int w = *n < len ? vsnprintf(buf + *n, len - *n, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	*n += w > 0 ? (size_t)w : 0;
}

/*
 * The lines of each region of the table, "region.<rid>.<name> <value>" (docs/METRICS.md,
 * "Per region"): its role and engine, and the requests of its store view.  Region 0's
 * engine works on the mount's store itself, whose counters hold every request of the
 * mount: its lines are those less the other regions' (so they include the lease's and the
 * region map's).  The table only grows; an entry's engine changes inside the gate only.
 */
static size_t region_lines(struct mwfs *fs, char *buf, size_t len)
{
	static const char *const ops[ENGINE_STORE_OPS] = ENGINE_STORE_OP_NAMES;
	unsigned nreg = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	struct engine_store_counts c[FS_REGIONS_MAX], others = {0};
	size_t n = 0;
	for (unsigned i = 0; i < nreg; i++) {
		engine_get_store_counts(fs->reg[i].e, &c[i]);
		if (fs->reg[i].rid == 0)
			continue;
		for (int k = 0; k < ENGINE_STORE_OPS; k++)
			others.requests[k] += c[i].requests[k];
		others.retries += c[i].retries;
		others.errors += c[i].errors;
		others.bytes_sent += c[i].bytes_sent;
		others.bytes_received += c[i].bytes_received;
	}
#define SUB(a, b) ((a) > (b) ? (a) - (b) : 0)
	for (unsigned i = 0; i < nreg; i++) {
		struct fs_region *r = &fs->reg[i];
		struct engine_store_counts *sc = &c[i];
		if (r->rid == 0) {
			for (int k = 0; k < ENGINE_STORE_OPS; k++)
				sc->requests[k] = SUB(sc->requests[k], others.requests[k]);
			sc->retries = SUB(sc->retries, others.retries);
			sc->errors = SUB(sc->errors, others.errors);
			sc->bytes_sent = SUB(sc->bytes_sent, others.bytes_sent);
			sc->bytes_received = SUB(sc->bytes_received, others.bytes_received);
		}
		struct engine_stats es;
		engine_get_stats(r->e, &es);
		char p[32],
		    b[4096]; /* one region's lines: whole, or none (the 64 KiB of an xattr) */
		size_t bn = 0, bl = sizeof(b);
		snprintf(p, sizeof(p), "region.%u.", r->rid);
		if (fs->o.hold_stats)
			bn += fs->o.hold_stats(fs->o.take_arg, r->rid, b, bl);
		out(b, bl, &bn, "%swriter %d\n", p, r->writer ? 1 : 0);
#define U64(name) out(b, bl, &bn, "%s%s %" PRIu64 "\n", p, #name, (uint64_t)es.name)
		U64(epoch);
		U64(wal_next);
		U64(wal_covered);
		out(b, bl, &bn, "%sfollowing %d\n", p, es.following ? 1 : 0);
		U64(follow_lag_ms);
		U64(follow_behind);
		U64(follow_entries);
		U64(follow_deep_idle); /* bell mode (docs/REGIONS.md "The bell") */
		U64(puts);
		U64(deletes);
		U64(batches);
		U64(groups_committed);
		U64(group_bytes);
		U64(pack_bytes);
		U64(pending_bytes);
		U64(memtable_bytes);
		U64(frozen_bytes);
		U64(sst_count);
		U64(read_store_gets);
		U64(read_store_bytes);
		out(b, bl, &bn, "%ssticky_error %d\n", p, es.sticky_error);
		U64(batches_lost);
		U64(commit_retries);
		U64(follow_errors);
		U64(gc_errors);
#undef U64
		for (int k = 0; k < ENGINE_STORE_OPS; k++)
			out(b, bl, &bn, "%sstore_requests_%s %" PRIu64 "\n", p, ops[k],
			    sc->requests[k]);
		out(b, bl, &bn,
		    "%sstore_retries %" PRIu64 "\n%sstore_errors %" PRIu64
		    "\n%sstore_bytes_sent %" PRIu64 "\n%sstore_bytes_received %" PRIu64 "\n",
		    p, sc->retries, p, sc->errors, p, sc->bytes_sent, p, sc->bytes_received);
		if (bn >= bl || n + bn >= len)
			break; /* the regions after it are left out, never cut in a line */
		memcpy(buf + n, b, bn + 1);
		n += bn;
	}
#undef SUB
	return n;
}

size_t mwfs_stats_format(struct mwfs *fs, char *buf, size_t len)
{
	uint64_t pre, waited;
	struct fsnotify_counts nc;
	fsnotify_counts(fs->nf, &nc);
	size_t n = engine_stats_format(fs->reg[0].e, buf, len); /* region 0 (then a block each) */
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
		n += fs->o.hold_stats(fs->o.take_arg, MWFS_RID_MOUNT, buf + n, len - n);
	return n < len ? n + region_lines(fs, buf + n, len - n) : n;
}
