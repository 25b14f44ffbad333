/*
 * readcache.c - the read caches of an engine, tier by tier (docs/CACHE.md):
 * creating and freeing them, and their statistics.
 *
 *   memory   one LRU (cache.h) of pack blocks and decoded SSTable blocks
 *            (e->rd.blob_cache, also e->rd.block_cache): opts.cache_bytes less the
 *            region cache's share, so that neither kind has budget it does
 *            not use while the other evicts
 *   regions  raw pack regions fetched by coalesced reads, not yet verified
 *            (opts.read_region_bytes; an eighth of opts.cache_bytes)
 *   disk     verified pack blocks and sealed SSTable blocks in files
 *            (diskcache.h, opts.disk_cache_dir)
 *   store    ranged GETs
 *
 * The blob path is blob.c, the SSTable path sst_read.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <assert.h>
#include <string.h>

#include "bigbuf.h"
#include "cache.h"
#include "diskcache.h"
#include "engine_int.h"
#include "log.h"
#include "sst.h"

int readcache_open(struct engine *e)
{
	size_t region = 0;
	int rc;

	if (e->o.read_region_bytes) {
		size_t r = e->o.read_region_bytes;
		if (r < BLOB_BLOCK_SIZE || (r & (r - 1)))
			return -EINVAL;
		region = e->o.cache_bytes / 8;
		if (region < 2 * r)
			region = 0; /* too small to hold a region: no coalescing */
	}
	inflight_init(&e->rd.fetching, INFLIGHT_MAX);
	mw_mutex_init(&e->rd.share_mu);
	e->rd.region_pin_max = region;
	e->rd.fetch_init = true;
	if ((rc = cache_new(e->o.cache_bytes - region, &e->rd.blob_cache)) ||
	    (region && (rc = cache_new_exact(region, &e->rd.region_cache))))
		return rc;
	/*
	 * Slots of a disk window (1 MiB, a region's size by default), as many as
	 * the memory cache can hold twice over plus the disk cache's queue and the GETs in
	 * flight: address space only, touched as the reads need them.
	 */
	if (bigbuf_pool_new(BLOB_WINDOW_BLOCKS * BLOB_BLOCK_SIZE,
	                    2 * (size_t)e->o.cache_bytes + (128u << 20), &e->rd.read_bufs))
		e->rd.read_bufs = NULL; /* no pool: malloc() serves them all */
	e->rd.block_cache = e->rd.blob_cache;
	if ((rc = blob_ahead_start(e)))
		return rc;
	if (e->o.disk_cache) {
		e->rd.dcache = (struct diskcache *)e->o.disk_cache;
		e->rd.dcache_shared = true;
		e->o.disk_cache_dir = NULL;
		return 0;
	}
	if (!e->o.disk_cache_dir)
		return 0;
	struct diskcache_opts o = {
	    .dir = e->o.disk_cache_dir,
	    .max_bytes = e->o.disk_cache_bytes ? e->o.disk_cache_bytes : DISKCACHE_AUTO,
	};
	rc = diskcache_open(&o, &e->rd.dcache);
	if (rc == -EBUSY)
		log_warn("disk cache %s is in use by another mount: no disk cache for this one",
		         o.dir);
	else if (rc)
		log_warn("disk cache %s cannot be used (%s): no disk cache", o.dir, strerror(-rc));
	e->o.disk_cache_dir = NULL; /* borrowed during open only */
	return 0;
}

void readcache_close(struct engine *e)
{
	blob_ahead_stop(e); /* first: its threads use the caches and the store */
	if (e->rd.dcache_shared)
		diskcache_flush(e->rd.dcache); /* its queued puts hold our read buffers */
	else
		diskcache_close(e->rd.dcache);
	e->rd.dcache = NULL;
	e->rd.dcache_shared = false;
	cache_free(e->rd.region_cache);
	cache_free(e->rd.blob_cache); /* e->rd.block_cache is the same cache */
	e->rd.region_cache = e->rd.blob_cache = e->rd.block_cache = NULL;
	bigbuf_pool_free(e->rd.read_bufs); /* last: the caches above held its buffers */
	e->rd.read_bufs = NULL;
	if (e->rd.fetch_init) {
		inflight_destroy(&e->rd.fetching);
		mw_mutex_destroy(&e->rd.share_mu);
		e->rd.fetch_init = false;
	}
}

int engine_disk_cache_open(const char *dir, uint64_t bytes, struct engine_disk_cache **out)
{
	struct diskcache_opts o = {.dir = dir, .max_bytes = bytes ? bytes : DISKCACHE_AUTO};
	struct diskcache *dc;
	int rc = diskcache_open(&o, &dc);
	if (rc)
		return rc;
	*out = (struct engine_disk_cache *)dc; /* the public name of the same object */
	return 0;
}

void engine_disk_cache_close(struct engine_disk_cache *c)
{
	diskcache_close((struct diskcache *)c);
}

static uint64_t ld(atomic_uint_fast64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

void readcache_get_stats(struct engine *e, struct engine_stats *out)
{
	struct sst_stats ss;
	struct diskcache_stats ds = {0};

	sst_counters_read(&e->rd.sst_counters, &ss);
	if (e->rd.dcache)
		diskcache_get_stats(e->rd.dcache, &ds);
	out->read_mem_hits = ld(&e->rd.blob_mem_hits) + ss.cache_hits;
	out->read_mem_bytes = ld(&e->rd.blob_mem_bytes) + ss.cache_hit_bytes;
	out->read_disk_hits = ds.hits;
	out->read_disk_bytes = ds.hit_bytes;
	out->read_disk_misses = ds.misses;
	out->read_store_gets = ld(&e->rd.blob_fetches) + ss.blocks_read;
	out->read_store_bytes = ld(&e->rd.blob_fetch_bytes) + ss.block_bytes;
	out->read_region_hits = ld(&e->rd.blob_region_hits);
	out->read_region_aheads = ld(&e->rd.blob_region_aheads);
	out->disk_cache_capacity = e->rd.dcache ? ds.capacity : 0;
}

size_t readcache_stats(struct engine *e, struct read_stat *out)
{
	struct engine_stats s;
	struct diskcache_stats ds = {0};
	size_t n = 0;

	readcache_get_stats(e, &s);
	if (e->rd.dcache)
		diskcache_get_stats(e->rd.dcache, &ds);
#define STAT(nm, v) (out[n++] = (struct read_stat){nm, (uint64_t)(v)})
	struct cache_stats cb = {0}, cr = {0};
	cache_get_stats(e->rd.blob_cache, &cb);
	if (e->rd.region_cache)
		cache_get_stats(e->rd.region_cache, &cr);
	STAT("mem_cache_bytes", cb.usage + cr.usage);
	STAT("mem_cache_capacity", cb.capacity + cr.capacity);
	STAT("read_mem_hits", s.read_mem_hits);
	STAT("read_mem_bytes", s.read_mem_bytes);
	STAT("read_region_hits", s.read_region_hits);
	STAT("read_region_aheads", s.read_region_aheads);
	size_t pinned = 0;
	if (e->rd.fetch_init) {
		mw_mutex_lock(&e->rd.share_mu);
		pinned = e->rd.region_pinned;
		mw_mutex_unlock(&e->rd.share_mu);
	}
	STAT("read_region_pinned_bytes", pinned);
	STAT("read_region_ahead_pending", blob_ahead_pending(e));
	STAT("read_disk_hits", s.read_disk_hits);
	STAT("read_disk_bytes", s.read_disk_bytes);
	STAT("read_disk_misses", s.read_disk_misses);
	STAT("read_store_gets", s.read_store_gets);
	STAT("read_store_bytes", s.read_store_bytes);
	STAT("disk_cache_enabled", e->rd.dcache ? 1 : 0);
	STAT("disk_cache_inserting", ds.inserting ? 1 : 0);
	STAT("disk_cache_bytes", ds.bytes);
	STAT("disk_cache_entries", ds.entries);
	STAT("disk_cache_capacity", ds.capacity);
	STAT("disk_cache_inserts", ds.inserts);
	STAT("disk_cache_insert_bytes", ds.insert_bytes);
	STAT("disk_cache_dropped", ds.dropped);
	STAT("disk_cache_evictions", ds.evictions);
	STAT("disk_cache_corrupt", ds.corrupt);
	struct bigbuf_stats bs;
	bigbuf_pool_stats(e->rd.read_bufs, &bs);
	STAT("read_buffers_in_use", bs.in_use);
	STAT("read_buffers_resident_bytes", bs.touched * bs.slot_bytes);
	STAT("read_buffers_fallbacks", bs.fallbacks);
#undef STAT
	assert(n <= READ_STATS_MAX);
	return n;
}
