/*
 * blob.c - the blob read path: a KV_BLOB descriptor (format.h) to bytes.
 *
 * A descriptor names a range of a blob, and the blob is cut into blocks of
 * BLOB_BLOCK_SIZE whose hashes the descriptor carries; reads work in those
 * blocks.  Order of sources (docs/CACHE.md): (1) the pack of the open or
 * in-flight group, in memory (a blob that is not durable yet is only there;
 * reads never wait for a commit); (2) the blob cache (cache.h), one entry
 * per block keyed by (epoch, position, object offset of the block), which
 * the committer fills with the blocks of every pack it committed (entries
 * that share the sealed pack's memory, so that what this mount wrote is read
 * back without the store, during an outage too) and reads fill with what
 * they fetched; (3) a coalesced region of the pack (raw bytes a fetch of a
 * neighbour brought, opts.read_region_bytes) or the disk cache
 * (diskcache.h: one entry per 1 MiB window of a blob, read a part at a time),
 * each block checked against its hash before it is served; (4) one ranged
 * store_get per run of consecutive missing blocks, widened to the aligned
 * region around the run when the run is smaller and to whole disk windows
 * when there is a disk cache, each block verified against its hash and then
 * kept in the blob cache, and each window queued for the disk cache.  A missing pack or a checksum
 * failure of store bytes is -EUCLEAN with a log line naming the pack; a bad block from a cache tier
 * is dropped and read from the store instead.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bigbuf.h"
#include "blobcache.h"
#include "cache.h"
#include "coding.h"
#include "diskcache.h"
#include "engine_int.h"
#include "log.h"
#include "thread.h"
#include "pack.h"
#include "store.h"

/* The pack of an open or in-flight group holding d, with a reference, or NULL. */
static struct pack *pending_pack(struct engine *e, const struct blob_desc *d)
{
	struct pack *p;

	if (e->o.read_only || d->epoch != e->epoch)
		return NULL;
	mw_mutex_lock(&e->mu);
	p = writer_pending_pack_locked(e, d->position);
	mw_mutex_unlock(&e->mu);
	return p;
}

/*
 * The disk cache holds windows, not blocks: window k of a blob is its blocks
 * [k * BLOB_WINDOW_BLOCKS, (k + 1) * BLOB_WINDOW_BLOCKS), clipped to the blocks
 * a descriptor has the hashes of; one entry (file) per window, read back a
 * part at a time.
 */
#define DISK_KEY 42

/* Bytes of blocks [b0, b1] of d's blob. */
static uint64_t run_bytes(const struct blob_desc *d, uint64_t b0, uint64_t b1)
{
	return b1 * BLOB_BLOCK_SIZE + blob_block_len(d, b1) - b0 * BLOB_BLOCK_SIZE;
}

/* Blocks [*w0, *w1] of the disk window of d that holds block b. */
static void window_of(const struct blob_desc *d, uint64_t b, uint64_t *w0, uint64_t *w1)
{
	uint64_t fb = blob_desc_first_block(d), lb = fb + blob_desc_nblocks(d) - 1;
	uint64_t lo = b / BLOB_WINDOW_BLOCKS * BLOB_WINDOW_BLOCKS, hi = lo + BLOB_WINDOW_BLOCKS - 1;

	*w0 = lo > fb ? lo : fb;
	*w1 = hi < lb ? hi : lb;
}

/*
 * Disk cache key of window [w0, w1] of d: 'W', epoch, position, object offset, bytes; after
 * 'V' and opts.disk_cache_salt when the engine shares its cache (a region > 0).  Its length.
 */
static size_t disk_key(const struct engine *e, uint8_t k[DISK_KEY], const struct blob_desc *d,
                       uint64_t w0, uint64_t w1)
{
	size_t n = 0;
	if (e->o.disk_cache_salt) { /* a cache shared with other engines: opts.disk_cache */
		k[n++] = 'V';
		put_be64(k + n, e->o.disk_cache_salt);
		n += 8;
	}
	k[n] = 'W';
	put_be64(k + n + 1, d->epoch);
	put_be64(k + n + 9, d->position);
	put_be64(k + n + 17, d->offset + w0 * BLOB_BLOCK_SIZE);
	put_be64(k + n + 25, run_bytes(d, w0, w1));
	return n + 33;
}

static void getbuf_release(void *gb)
{
	getbuf_unref(gb);
}

/*
 * Queue for the disk cache the windows that verified blocks [b0, b1] (bytes
 * run, inside gb) hold whole: sharing gb when share (the blocks are most of
 * it), else copied, so that a queued window never keeps a buffer of mostly
 * other bytes (a 1 MiB region around a small file) alive.
 */
static void disk_keep(struct engine *e, const struct blob_desc *d, uint64_t b0, uint64_t b1,
                      const uint8_t *run, struct getbuf *gb, bool share)
{
	uint64_t w0, w1;
	uint8_t key[DISK_KEY];

	for (uint64_t b = b0; e->rd.dcache && b <= b1; b = w1 + 1) {
		window_of(d, b, &w0, &w1);
		if (w0 < b0 || w1 > b1)
			continue; /* only part of it here */
		size_t kn = disk_key(e, key, d, w0, w1);
		const uint8_t *p = run + (w0 - b0) * BLOB_BLOCK_SIZE;
		size_t len = (size_t)run_bytes(d, w0, w1);
		if (share)
			diskcache_put_shared(e->rd.dcache, key, kn, p, len, getbuf_release,
			                     getbuf_ref(gb));
		else
			diskcache_put(e->rd.dcache, key, kn, p, len);
	}
}

/* Copy the part of blob range [a, z) that block [boff, boff + bl) holds to dst. */
static void copy_part(uint8_t *dst, uint64_t a, uint64_t z, const uint8_t *blk, uint64_t boff,
                      size_t bl)
{
	uint64_t lo = a > boff ? a : boff, hi = z < boff + bl ? z : boff + bl;

	if (dst && lo < hi)
		memcpy(dst + (lo - a), blk + (lo - boff), (size_t)(hi - lo));
}

/* ---- coalesced regions ------------------------------------------------------ */

/*
 * A region is the aligned range [k * R, (k + 1) * R) of a pack object (R =
 * opts.read_region_bytes), or what of it exists before the pack ends.  A
 * fetch that needs less than R bytes GETs the whole region around them and
 * enters its pieces in e->rd.region_cache (key: epoch, position, k), raw and
 * unverified: a later miss of a block inside takes the block from there,
 * checks it against its own descriptor and only then serves and caches it.
 */
struct region {
	size_t len;           /* bytes of the region (R, less at the end of the pack) */
	struct getbuf *gb;    /* the GET buffer holding them (a reference) */
	const uint8_t *bytes; /* the bytes, inside gb */
};

static void region_free(const void *key, size_t klen, void *value)
{
	struct region *rg = value;

	(void)key;
	(void)klen;
	if (rg->gb)
		getbuf_share_region(rg->gb, -1);
	getbuf_unref(rg->gb);
	free(rg);
}

static void region_key(uint8_t k[24], const struct blob_desc *d, uint64_t idx)
{
	put_be64(k, d->epoch);
	put_be64(k + 8, d->position);
	put_be64(k + 16, idx);
}

/* Copy object bytes [off, off + n) of d's pack from cached regions; false if any is missing. */
static bool region_read(struct engine *e, const struct blob_desc *d, uint64_t off, uint8_t *dst,
                        size_t n)
{
	uint64_t R = e->o.read_region_bytes;

	while (n) {
		uint64_t k = off / R, in = off - k * R;
		size_t take = R - in < n ? (size_t)(R - in) : n;
		uint8_t key[24];
		bool ok = false;
		region_key(key, d, k);
		struct cache_handle *h = cache_lookup(e->rd.region_cache, key, sizeof(key));
		if (h) {
			struct region *rg = cache_value(h);
			ok = in + take <= rg->len;
			if (ok)
				memcpy(dst, rg->bytes + in, take);
			cache_release(e->rd.region_cache, h);
		}
		if (!ok)
			return false;
		dst += take;
		off += take;
		n -= take;
	}
	return true;
}

/*
 * Enter the regions that gb (object bytes [g, g + n) of d's pack, asked
 * for [g, g + asked)) holds whole, by reference: those that end inside it,
 * and the last one when the pack ended before asked.
 */
static void region_keep(struct engine *e, const struct blob_desc *d, uint64_t g, struct getbuf *gb,
                        size_t n, size_t asked)
{
	uint64_t R = e->o.read_region_bytes;

	for (uint64_t k = (g + R - 1) / R; k * R < g + n; k++) {
		uint64_t lo = k * R, hi = lo + R;
		if (hi > g + n) {
			if (n == asked)
				break; /* cut by our own range, not by the end of the pack */
			hi = g + n;
		}
		struct region *rg = malloc(sizeof(*rg));
		uint8_t key[24];
		if (!rg)
			return;
		*rg = (struct region){(size_t)(hi - lo), getbuf_ref(gb), gb->data + (lo - g)};
		getbuf_share_region(gb, 1);
		region_key(key, d, k);
		if (cache_insert(e->rd.region_cache, key, sizeof(key), rg, rg->len, region_free,
		                 NULL))
			region_free(NULL, 0, rg);
	}
}

/* Enter region k of d's pack as empty: the pack ends at or before its start. */
static void region_keep_empty(struct engine *e, const struct blob_desc *d, uint64_t k)
{
	struct region *rg = malloc(sizeof(*rg));
	uint8_t key[24];
	if (!rg)
		return;
	*rg = (struct region){0, NULL, NULL};
	region_key(key, d, k);
	if (cache_insert(e->rd.region_cache, key, sizeof(key), rg, sizeof(*rg), region_free, NULL))
		region_free(NULL, 0, rg);
}

static void region_ahead(struct engine *e, const struct blob_desc *d, uint64_t k);
static void region_get(struct engine *e, uint64_t epoch, uint64_t position, uint64_t k, bool ahead);

/* Is region k of pack (epoch, position) in the region cache?  *len its length. */
static bool region_cached(struct engine *e, uint64_t epoch, uint64_t position, uint64_t k,
                          size_t *len)
{
	struct blob_desc d = {.epoch = epoch, .position = position};
	uint8_t key[24];
	region_key(key, &d, k);
	struct cache_handle *h = cache_lookup(e->rd.region_cache, key, sizeof(key));
	if (!h)
		return false;
	*len = ((struct region *)cache_value(h))->len;
	cache_release(e->rd.region_cache, h);
	return true;
}

/*
 * The window [w0, w1] of d from the one cached region that holds it whole,
 * checked in place: its blocks kept by reference to the region's buffer
 * (blob_keep_region_block()) and queued for the disk, their part of blob range
 * [a, z) copied to dst.  1: served; 0: no such region, or its bytes are wrong;
 * -1: the window spans regions.
 */
static int region_serve(struct engine *e, const struct blob_desc *d, uint64_t w0, uint64_t w1,
                        uint64_t a, uint64_t z, uint8_t *dst)
{
	uint64_t R = e->o.read_region_bytes, off = d->offset + w0 * BLOB_BLOCK_SIZE;
	uint64_t total = run_bytes(d, w0, w1), k = off / R, in = off - k * R, bad;
	uint8_t key[24];

	if ((off + total - 1) / R != k)
		return -1;
	region_key(key, d, k);
	struct cache_handle *h = cache_lookup(e->rd.region_cache, key, sizeof(key));
	if (!h)
		return 0;
	struct region *rg = cache_value(h);
	const uint8_t *run = rg->bytes + in;
	bool ok = in + total <= rg->len &&
	          blob_desc_verify(d, w0 * BLOB_BLOCK_SIZE, run, total, &bad) == 0;
	if (ok) {
		bool all = true;
		for (uint64_t b = w0; b <= w1; b++) {
			const uint8_t *p = run + (b - w0) * BLOB_BLOCK_SIZE;
			copy_part(dst, a, z, p, b * BLOB_BLOCK_SIZE, blob_block_len(d, b));
			all &= blob_keep_region_block(e, d, b * BLOB_BLOCK_SIZE, p,
			                              blob_block_len(d, b), rg->gb);
		}
		disk_keep(e, d, w0, w1, run, rg->gb, all);
	}
	cache_release(e->rd.region_cache, h);
	return ok;
}

/*
 * Object bytes [off, off + len) of d's pack span regions, and some of them
 * are cached: GET the others (region_get(): whole regions, each sent once
 * however many readers and read-ahead threads want it) instead of the whole
 * span again.  False when none is cached (the caller's one GET of the span
 * is better than one per region).  A blob across a region's end, read after
 * the region before it came, cost a GET of that region again otherwise.
 */
static bool regions_fill(struct engine *e, const struct blob_desc *d, uint64_t off, uint64_t len)
{
	uint64_t R = e->o.read_region_bytes, k0 = off / R, k1 = (off + len - 1) / R;
	size_t rl;
	bool any = false;

	for (uint64_t k = k0; k <= k1 && !any; k++)
		any = region_cached(e, d->epoch, d->position, k, &rl);
	for (uint64_t k = k0; any && k <= k1; k++)
		region_get(e, d->epoch, d->position, k, false);
	return any;
}

/*
 * Blocks from b on of d's blob from the tiers under the blob cache, for blob
 * range [a, z) (z - 1 in block b1): the whole disk window of b from coalesced
 * regions (region_serve(), or copied from the regions it spans), else its
 * part [b, b1] from the disk cache, read straight into a GET buffer that the
 * blob cache entries then share; checked against d's hashes (the one check of
 * these bytes on this path: the disk cache does not check them again),
 * entered in the blob cache (a window from regions is also queued for the
 * disk) and their part of [a, z) copied to dst.  Returns the number of blocks
 * from b on that it served; 0 (and *miss_to, the last block of b's window:
 * none of them is there either) when neither tier has b's window, or it was
 * wrong (and dropped).
 */
static uint64_t lower_tiers(struct engine *e, const struct blob_desc *d, uint64_t b, uint64_t b1,
                            uint64_t a, uint64_t z, uint8_t *dst, uint64_t *miss_to)
{
	uint64_t w0, w1, bad;
	uint8_t key[DISK_KEY];
	bool disk = false, ok = false;
	struct getbuf *gb = NULL;
	int one = 0; /* region_serve() */

	window_of(d, b, &w0, &w1);
	*miss_to = w1;
	if (!e->rd.region_cache && !e->rd.dcache)
		return 0;
	uint64_t total = run_bytes(d, w0, w1);
	uint64_t from = w0, to = w1; /* the blocks read */
	if (e->rd.region_cache && (one = region_serve(e, d, w0, w1, a, z, dst)) < 0 &&
	    (gb = getbuf_new(e, (size_t)total))) {
		uint64_t off = d->offset + w0 * BLOB_BLOCK_SIZE;
		ok = region_read(e, d, off, gb->data, (size_t)total) ||
		     (regions_fill(e, d, off, total) &&
		      region_read(e, d, off, gb->data, (size_t)total));
		ok = ok && blob_desc_verify(d, w0 * BLOB_BLOCK_SIZE, gb->data, total, &bad) == 0;
	}
	if (one <= 0 && !ok && e->rd.dcache) {
		from = b;
		to = b1 < w1 ? b1 : w1;
		uint64_t len = run_bytes(d, from, to);
		/* a buffer of the part alone: the blocks kept by reference to it are charged
		 * their own lengths, so it must hold nothing else */
		getbuf_unref(gb);
		if (!(gb = getbuf_new(e, (size_t)len)))
			return 0;
		size_t kn = disk_key(e, key, d, w0, w1);
		disk = ok = diskcache_get_part(e->rd.dcache, key, kn, (size_t)total,
		                               (size_t)((from - w0) * BLOB_BLOCK_SIZE), gb->data,
		                               (size_t)len, DISKCACHE_GET_CALLER_CHECKS) == 0;
		if (ok && blob_desc_verify(d, from * BLOB_BLOCK_SIZE, gb->data, len, &bad)) {
			/* torn or damaged, or of a pack of the same name in a store made again */
			diskcache_drop(e->rd.dcache, key, kn, true);
			ok = disk = false;
		}
	}
	if (one <= 0 && !ok) {
		getbuf_unref(gb);
		return 0;
	}
	uint64_t n = to - from + 1;
	atomic_fetch_add_explicit(disk ? &e->rd.blob_disk_hits : &e->rd.blob_region_hits, n,
	                          memory_order_relaxed);
	if (disk)
		atomic_fetch_add_explicit(&e->rd.blob_disk_bytes, run_bytes(d, from, to),
		                          memory_order_relaxed);
	for (uint64_t k = from; gb && k <= to; k++) {
		const uint8_t *p = gb->data + (k - from) * BLOB_BLOCK_SIZE;
		copy_part(dst, a, z, p, k * BLOB_BLOCK_SIZE, blob_block_len(d, k));
		blob_keep_block(e, d, k * BLOB_BLOCK_SIZE, p, blob_block_len(d, k), gb,
		                blob_block_len(d, k));
	}
	if (gb && !disk)
		disk_keep(e, d, w0, w1, gb->data, gb, true);
	getbuf_unref(gb);
	if (!disk) /* a region served it: a scan of the pack may go on past it */
		region_ahead(e, d,
		             (d->offset + w1 * BLOB_BLOCK_SIZE + blob_block_len(d, w1) - 1) /
		                 e->o.read_region_bytes);
	return (to < b1 ? to : b1) - b + 1;
}

/* ---- the store ---------------------------------------------------------------- */

#define FETCH_WAITED INFLIGHT_WAITED /* fetch_begin(): another GET had the bytes; look again */

/*
 * Before a GET of object bytes [lo, hi) of d's pack: if a GET in flight
 * overlaps them, wait until it ends and return FETCH_WAITED (the caller looks
 * in the caches again); else take a slot for fetch_end() (-1: table full, no
 * deduplication).  Parallel readers of one region (read-ahead threads on
 * neighbouring chunks, readers of neighbouring small files) send one GET.
 */
static int fetch_begin(struct engine *e, const struct blob_desc *d, uint64_t lo, uint64_t hi)
{
	return inflight_begin(&e->rd.fetching, d->epoch, d->position, lo, hi);
}

static void fetch_end(struct engine *e, int slot)
{
	inflight_end(&e->rd.fetching, slot);
}

/*
 * The checking half of fetch_run(): gb (n bytes of object range [g, gend))
 * holds blocks [b0, b1] of d's blob: check them, copy their part of [a, z)
 * to dst, keep them, and keep the regions gb holds when R.  The blocks are
 * kept by reference to gb when they are most of it (each charged its share
 * of the whole buffer, which lives as long as one of them), else by
 * reference when regions of gb were kept (blob_keep_region_block()), else copied.
 */
static int check_keep(struct engine *e, const struct blob_desc *d, uint64_t b0, uint64_t b1,
                      uint64_t a, uint64_t z, uint8_t *dst, const char *name, uint64_t g,
                      uint64_t gend, struct getbuf *gb, size_t n, uint64_t R)
{
	uint64_t from = b0 * BLOB_BLOCK_SIZE;
	uint64_t to = b1 * BLOB_BLOCK_SIZE + blob_block_len(d, b1);
	uint64_t bad;

	if (n < d->offset + to - g) {
		log_err("blob: %s [%" PRIu64 "+%" PRIu64 "]: pack too short (truncated)", name,
		        d->offset + from, to - from);
		return -EUCLEAN;
	}
	const uint8_t *run = gb->data + (d->offset + from - g);
	if (blob_desc_verify(d, from, run, to - from, &bad)) {
		log_err("blob: %s [%" PRIu64 "+%zu]: checksum mismatch", name, d->offset + bad,
		        blob_block_len(d, bad / BLOB_BLOCK_SIZE));
		return -EUCLEAN;
	}
	if (dst) {
		uint64_t lo = a > from ? a : from, hi = z < to ? z : to;
		memcpy(dst + (lo - a), run + (lo - from), (size_t)(hi - lo));
	}
	bool share = 2 * (to - from) >= n, all = true;
	if (R && (g != d->offset + from || n != to - from))
		region_keep(e, d, g, gb, n,
		            (size_t)(gend - g)); /* first: blob_keep_region_block() */
	for (uint64_t b = b0; b <= b1; b++) {
		size_t bl = blob_block_len(d, b);
		const uint8_t *p = run + (b * BLOB_BLOCK_SIZE - from);
		if (share)
			blob_keep_block(e, d, b * BLOB_BLOCK_SIZE, p, bl, gb,
			                (size_t)((uint64_t)bl * n / (to - from)));
		else
			all &= blob_keep_region_block(e, d, b * BLOB_BLOCK_SIZE, p, bl, gb);
	}
	disk_keep(e, d, b0, b1, run, gb, share || all);
	return 0;
}

/*
 * Fetch blocks [b0, b1] of d's blob with one ranged GET, check each against
 * its hash, keep each (blob cache, disk cache), and copy the part of blob range
 * [a, z) that they hold into dst (dst[0] is blob byte a; dst may be NULL).
 * A run smaller than a region grows first: in a blob of at least a region,
 * to the blob's aligned region-sized window (every block of it checkable
 * with d's hashes); in a smaller blob, to the pack's aligned region, whose
 * other bytes go to the region cache unchecked.  may_wait: when a GET in
 * flight overlaps, wait for it and return FETCH_WAITED instead.
 */
static int fetch_run(struct engine *e, const struct blob_desc *d, uint64_t b0, uint64_t b1,
                     uint64_t a, uint64_t z, uint8_t *dst, bool may_wait)
{
	char name[FMT_NAME_MAX];
	uint64_t R = e->rd.region_cache ? e->o.read_region_bytes : 0;
	struct getbuf *gb = NULL;
	size_t n = 0;
	int rc, slot = -1;

	if (R && (b1 - b0 + 1) * BLOB_BLOCK_SIZE < R && d->blob_len >= R) {
		/*
		 * A big blob: widen the run to the blob's aligned R-window, as far as d
		 * has the hashes, so that every block fetched is checked and kept now.
		 */
		uint64_t per = R / BLOB_BLOCK_SIZE, fb = blob_desc_first_block(d);
		uint64_t lb = fb + blob_desc_nblocks(d) - 1, w0 = b0 / per * per, w1 = w0 + per - 1;
		b0 = w0 > fb ? w0 : fb;
		b1 = w1 > b1 ? (w1 < lb ? w1 : lb) : b1;
		R = 0;
	}
	if (e->rd.dcache) {
		/* whole disk windows, so that every one fetched can go to the disk cache */
		uint64_t w0, w1;
		window_of(d, b0, &w0, &w1);
		b0 = w0;
		window_of(d, b1, &w0, &w1);
		b1 = w1;
	}
	uint64_t from = b0 * BLOB_BLOCK_SIZE;
	uint64_t to = b1 * BLOB_BLOCK_SIZE + blob_block_len(d, b1);
	uint64_t g = d->offset + from, gend = d->offset + to; /* object range to GET */

	fmt_pack_name(name, d->epoch, d->position);
	if (to - from > SIZE_MAX - sizeof(struct blob_val))
		return -EUCLEAN;
	if (R && to - from < R) {
		/* the whole regions around the run, so that each is kept whole */
		g = (d->offset + from) / R * R;
		gend = (d->offset + to + R - 1) / R * R;
	}
	if (may_wait && (slot = fetch_begin(e, d, g, gend)) == FETCH_WAITED)
		return FETCH_WAITED;
	if (!(gb = getbuf_new(e, (size_t)(gend - g)))) {
		fetch_end(e, slot);
		return -ENOMEM;
	}
	rc = store_get_into(e->st, name, g, gend - g, gb->data, &n);
	if (rc == -ENOENT) {
		log_err("blob: pack %s is missing (blob at %" PRIu64 "+%" PRIu64 ")", name,
		        d->offset, d->blob_len);
		rc = -EUCLEAN;
		watch_kick(e); /* the store may have lost it: the watch checks now */
	} else if (rc) {
		log_err("blob: get %s [%" PRIu64 "+%" PRIu64 "] failed: %s", name, g, gend - g,
		        strerror(-rc));
	} else {
		atomic_fetch_add_explicit(&e->rd.blob_fetches, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&e->rd.blob_fetch_bytes, n, memory_order_relaxed);
		rc = check_keep(e, d, b0, b1, a, z, dst, name, g, gend, gb, n, R);
	}
	fetch_end(e, slot);
	getbuf_unref(gb);
	if (!rc && R)
		region_ahead(e, d, (gend - 1) / R);
	return rc;
}

/* ---- pack read-ahead ---------------------------------------------------------- */

/*
 * Readers of small files go through a pack region by region: the files a
 * group wrote lie side by side in its pack, so a `cat` or `tar` of a directory
 * meets region k, then k + 1.  Several readers of one directory (files written
 * together by several writers) need the same region at the same moment and
 * wait for the same GET, so they go no faster than one GET after the other.
 * When a reader uses region k of a pack whose region k - 1 is cached (a scan),
 * regions k + 1 .. k + REGION_AHEAD that are neither cached nor asked for are
 * queued, and REGION_AHEAD_THREADS threads GET them into the region cache (one
 * GET each, registered like a reader's, so that a reader needing one waits for
 * it instead of sending its own).  What they bring is raw and unchecked, as
 * every region: its blocks are checked against their descriptors when used.
 * A pack's end is a region shorter than R (a region asked for at or past the
 * end comes back empty and is remembered as such); past it the read-ahead
 * goes on with the pack of the next position, whose group the same writer
 * committed right after (a tree written by one `cp -r` or by parallel
 * writers spans consecutive packs, each a new cold start of two regions
 * read by the readers themselves otherwise).  A position without a pack (its
 * group's bytes were in its WAL entry, or it is not written yet) is
 * remembered as an empty region 0; a read of it later does its own GET.
 */
#define REGION_AHEAD 4         /* regions kept asked for ahead of a scan */
#define REGION_AHEAD_THREADS 4 /* GETs of them in flight */
#define REGION_AHEAD_QUEUE 32  /* queued (more are not queued) */

struct ahead_job {
	uint64_t epoch, position; /* the pack */
	uint64_t k;               /* the region */
	uint64_t seq;             /* queued as the seq-th: the oldest is fetched first */
};

struct ahead_thread {
	struct mw_thread t;
	struct engine *e;
};

struct blob_ahead {
	struct mw_mutex mu;
	pthread_cond_t cv;                      /* a job, or stop; mu */
	struct ahead_job q[REGION_AHEAD_QUEUE]; /* the queue and the jobs running; mu */
	bool running[REGION_AHEAD_QUEUE];       /* q[i] is being fetched; mu */
	bool used[REGION_AHEAD_QUEUE];          /* q[i] holds a job; mu */
	uint64_t seq;                           /* jobs queued so far; mu */
	struct ahead_thread thr[REGION_AHEAD_THREADS];
	unsigned nthr;
};

/*
 * GET region k of pack (epoch, position) into the region cache, unless it is
 * there or a GET in flight brings it (waited for); no lock held.  ahead: a
 * read-ahead thread's (counted in blob_region_aheads), where a missing pack at
 * region 0 is the end of a scan, kept as an empty region.
 */
static void region_get(struct engine *e, uint64_t epoch, uint64_t position, uint64_t k, bool ahead)
{
	uint64_t R = e->o.read_region_bytes;
	struct blob_desc d = {.epoch = epoch, .position = position};
	char name[FMT_NAME_MAX];
	size_t len, n = 0;

	if (region_cached(e, epoch, position, k, &len))
		return;
	int slot = fetch_begin(e, &d, k * R, (k + 1) * R);
	if (slot == FETCH_WAITED)
		return; /* another GET had it */
	struct getbuf *gb = getbuf_new(e, (size_t)R);
	fmt_pack_name(name, epoch, position);
	int rc = gb ? store_get_into(e->st, name, k * R, R, gb->data, &n) : -ENOMEM;
	if (rc == -ENOENT && k == 0 && ahead)
		rc = 0; /* no pack at this position (the next one of a scan): as empty */
	if (rc == 0) {
		atomic_fetch_add_explicit(&e->rd.blob_fetches, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&e->rd.blob_fetch_bytes, n, memory_order_relaxed);
		if (ahead)
			atomic_fetch_add_explicit(&e->rd.blob_region_aheads, 1,
			                          memory_order_relaxed);
		if (n)
			region_keep(e, &d, k * R, gb, n, (size_t)R);
		else /* at or past the pack's end, or no pack: an empty region, not asked again */
			region_keep_empty(e, &d, k);
	} else {
		log_debug("blob: GET of %s region %" PRIu64 ": %s", name, k, strerror(-rc));
	}
	fetch_end(e, slot);
	getbuf_unref(gb);
}

static void *ahead_main(void *arg)
{
	struct ahead_thread *t = arg;
	struct engine *e = t->e;
	struct blob_ahead *a = e->rd.ahead;

	mw_mutex_lock(&a->mu);
	for (;;) {
		int i = -1; /* the oldest job not running */
		for (int k = 0; k < REGION_AHEAD_QUEUE; k++)
			if (a->used[k] && !a->running[k] && (i < 0 || a->q[k].seq < a->q[i].seq))
				i = k;
		if (t->t.stop)
			break;
		if (i < 0) {
			mw_cond_wait(&a->cv, &a->mu);
			continue;
		}
		a->running[i] = true;
		struct ahead_job j = a->q[i];
		mw_mutex_unlock(&a->mu);
		region_get(e, j.epoch, j.position, j.k, true);
		mw_mutex_lock(&a->mu);
		a->used[i] = a->running[i] = false;
	}
	mw_mutex_unlock(&a->mu);
	return NULL;
}

/*
 * The region a scan meets after region *k of pack (epoch, *pos): *k + 1, or
 * region 0 of the pack of the next position when *k is the last of a pack
 * (a short region cached), which holds what the writer's next group wrote.
 * False past that one (a scan is read ahead into one next pack at most), and
 * past its region 0 while that is not known to exist (there may be no pack).
 */
static bool region_next(struct engine *e, uint64_t epoch, uint64_t first, uint64_t *pos,
                        uint64_t *k)
{
	size_t len;

	bool cached = region_cached(e, epoch, *pos, *k, &len);
	if (!cached && *pos != first && *k == 0)
		return false; /* the next pack: on only once it is known to exist */
	if (!cached || len == e->o.read_region_bytes) {
		++*k;
		return true;
	}
	if (*pos != first || *pos == UINT64_MAX)
		return false;
	++*pos;
	*k = 0;
	return true;
}

/*
 * A reader used region k of d's pack: when region k - 1 is cached too (a scan),
 * queue the next REGION_AHEAD regions (region_next()) that are neither cached
 * nor queued.
 */
static void region_ahead(struct engine *e, const struct blob_desc *d, uint64_t k)
{
	struct blob_ahead *a = e->rd.ahead;
	uint64_t pos = d->position, i = k;
	size_t len;

	if (!a || k == 0 || !region_cached(e, d->epoch, d->position, k - 1, &len))
		return;
	for (int n = 0; n < REGION_AHEAD; n++) {
		if (!region_next(e, d->epoch, d->position, &pos, &i))
			return;
		if (region_cached(e, d->epoch, pos, i, &len))
			continue;
		mw_mutex_lock(&a->mu);
		int free_slot = -1;
		bool have = false;
		for (int s = 0; s < REGION_AHEAD_QUEUE && !have; s++) {
			if (!a->used[s])
				free_slot = free_slot < 0 ? s : free_slot;
			else if (a->q[s].epoch == d->epoch && a->q[s].position == pos &&
			         a->q[s].k == i)
				have = true;
		}
		if (!have && free_slot >= 0) {
			a->q[free_slot] = (struct ahead_job){d->epoch, pos, i, a->seq++};
			a->used[free_slot] = true;
			pthread_cond_signal(&a->cv);
		}
		mw_mutex_unlock(&a->mu);
		if (!have && free_slot < 0)
			return; /* the queue is full */
	}
}

int blob_ahead_start(struct engine *e)
{
	if (!e->rd.region_cache)
		return 0;
	struct blob_ahead *a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	mw_mutex_init(&a->mu);
	pthread_cond_init(&a->cv, NULL);
	e->rd.ahead = a;
	for (; a->nthr < REGION_AHEAD_THREADS; a->nthr++) {
		struct ahead_thread *t = &a->thr[a->nthr];
		t->e = e;
		int rc = mw_thread_start(&t->t, "region-ahead", ahead_main, t, &a->mu, &a->cv);
		if (rc) {
			blob_ahead_stop(e);
			return rc;
		}
	}
	return 0;
}

unsigned blob_ahead_pending(struct engine *e)
{
	struct blob_ahead *a = e->rd.ahead;
	unsigned n = 0;

	if (!a)
		return 0;
	mw_mutex_lock(&a->mu);
	for (int i = 0; i < REGION_AHEAD_QUEUE; i++)
		n += a->used[i];
	mw_mutex_unlock(&a->mu);
	return n;
}

void blob_ahead_stop(struct engine *e)
{
	struct blob_ahead *a = e->rd.ahead;
	if (!a)
		return;
	for (unsigned i = 0; i < a->nthr; i++)
		mw_thread_stop(&a->thr[i].t);
	pthread_cond_destroy(&a->cv);
	mw_mutex_destroy(&a->mu);
	free(a);
	e->rd.ahead = NULL;
}

/* ---- reads -------------------------------------------------------------------- */

/*
 * Bring value bytes [off, off + n) of d to dst (NULL: only into the cache),
 * block by block: memory, then the lower tiers, then runs of missing blocks
 * from the store.
 */
static int blob_io(struct engine *e, const struct blob_desc *d, uint64_t off, size_t n,
                   uint8_t *dst)
{
	uint64_t a = d->start + off, z = a + n; /* blob range */
	uint64_t b0 = a / BLOB_BLOCK_SIZE, b1 = (z - 1) / BLOB_BLOCK_SIZE;
	uint64_t run;        /* first block of the current run of missing blocks */
	uint64_t lower_miss; /* see below */
	struct pack *p;
	int rc = 0, waits = 0;

	if (n == 0)
		return 0;
	p = pending_pack(e, d);
	if (p) {
		rc = dst ? pack_read(p, d->offset + a, dst, n) : 0;
		pack_unref(p);
		if (rc)
			log_err("blob: in-memory pack %" PRIu64 " does not hold %" PRIu64 "+%zu",
			        d->position, d->offset + a, n);
		return rc ? -EUCLEAN : 0;
	}
again: /* after waiting for another thread's GET of some of these blocks */
	run = UINT64_MAX;
	rc = 0;
	lower_miss = UINT64_MAX; /* through this block the lower tiers have nothing */
	for (uint64_t b = b0; b <= b1 && !rc; b++) {
		uint64_t last = b; /* the last block this round served */
		uint64_t boff = b * BLOB_BLOCK_SIZE;
		size_t bl = blob_block_len(d, b);
		struct cache_handle *h = NULL;
		uint8_t key[24];
		bool hit = false;

		if (e->rd.blob_cache) {
			blob_cache_key(key, d, boff);
			h = cache_lookup(e->rd.blob_cache, key, sizeof(key));
		}
		if (h) {
			struct blob_val *bv = cache_value(h);
			if (bv->len == bl) {
				uint64_t lo = a > boff ? a : boff,
				         hi = z < boff + bl ? z : boff + bl;
				hit = !dst || blob_val_read(bv, lo - boff, dst + (lo - a),
				                            (size_t)(hi - lo)) == 0;
				if (hit)
					atomic_fetch_add_explicit(&e->rd.blob_mem_bytes, hi - lo,
					                          memory_order_relaxed);
			}
			cache_release(e->rd.blob_cache, h);
		}
		if (e->rd.blob_cache)
			atomic_fetch_add_explicit(hit ? &e->rd.blob_mem_hits
			                              : &e->rd.blob_mem_misses,
			                          1, memory_order_relaxed);
		if (!hit && (lower_miss == UINT64_MAX || b > lower_miss)) {
			uint64_t k = lower_tiers(e, d, b, b1, a, z, dst, &lower_miss);
			hit = k > 0;
			if (hit) {
				last = b + k - 1;
				lower_miss = UINT64_MAX;
			}
		}
		if (!hit && run == UINT64_MAX)
			run = b;
		if (hit && run != UINT64_MAX) {
			rc = fetch_run(e, d, run, b - 1, a, z, dst, waits < 2);
			run = UINT64_MAX;
		}
		b = last;
	}
	if (!rc && run != UINT64_MAX)
		rc = fetch_run(e, d, run, b1, a, z, dst, waits < 2);
	if (rc == FETCH_WAITED) {
		waits++;
		goto again;
	}
	return rc;
}

int blob_read_range(struct engine *e, const struct blob_desc *d, uint64_t off, void *buf,
                    size_t len, size_t *got)
{
	size_t n;
	int rc;

	*got = 0;
	if (off >= d->length)
		return 0;
	n = d->length - off < len ? (size_t)(d->length - off) : len;
	rc = blob_io(e, d, off, n, buf);
	if (rc == 0)
		*got = n;
	return rc;
}

int blob_load(struct engine *e, const struct blob_desc *d, uint64_t off, uint64_t len)
{
	if (off >= d->length)
		return 0;
	if (len > d->length - off)
		len = d->length - off;
	return blob_io(e, d, off, (size_t)len, NULL);
}

int blob_fetch(struct engine *e, const struct blob_desc *d, void **out)
{
	size_t got;
	void *buf;
	int rc;

	if (d->length > SIZE_MAX - 1)
		return -EUCLEAN;
	buf = malloc(d->length ? (size_t)d->length : 1);
	if (!buf)
		return -ENOMEM;
	rc = blob_read_range(e, d, 0, buf, (size_t)d->length, &got);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}
