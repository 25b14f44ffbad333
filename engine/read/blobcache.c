/*
 * blobcache.c - the blob cache's entries (blobcache.h): what a cached block
 * holds its bytes by, the GET buffers blocks and regions share, and the
 * entry of blocks into the cache.  The read path over the tiers is blob.c.
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bigbuf.h"
#include "blobcache.h"
#include "cache.h"
#include "coding.h"
#include "engine_int.h"
#include "pack.h"
#include "thread.h"

/* A GET buffer of len bytes from e's pool, one reference held; NULL: no memory. */
struct getbuf *getbuf_new(struct engine *e, size_t len)
{
	struct getbuf *gb = malloc(sizeof(*gb));
	if (!gb)
		return NULL;
	atomic_init(&gb->refs, 1);
	gb->pool = e->rd.read_bufs;
	gb->e = e;
	gb->cap = len;
	gb->regions = 0;
	gb->shared = gb->pinned = 0;
	if (!(gb->data = bigbuf_get(gb->pool, len))) {
		free(gb);
		return NULL;
	}
	return gb;
}

struct getbuf *getbuf_ref(struct getbuf *gb)
{
	if (gb)
		atomic_fetch_add_explicit(&gb->refs, 1, memory_order_relaxed);
	return gb;
}

void getbuf_unref(struct getbuf *gb)
{
	if (gb && atomic_fetch_sub_explicit(&gb->refs, 1, memory_order_acq_rel) == 1) {
		assert(!gb->pinned);
		bigbuf_put(gb->pool, gb->data);
		free(gb);
	}
}

/*
 * Region shares.  A block served from a cached region is kept in the blob
 * cache by reference to the region's GET buffer, charged its own length,
 * instead of copied (a cold read of small files copied every byte once more
 * and touched twice the memory).  While a region entry holds the buffer, the
 * region cache charges all of it; once none does, the bytes of it that no
 * shared block covers are charged to no cache: they are counted in
 * e->rd.region_pinned, and no block is shared any more while that count is at
 * its bound (e->rd.region_pin_max, the region cache's size): a scan leaves
 * nothing pinned (its blocks cover their regions), a reader of one small file
 * per region would pin up to a region per file otherwise.
 */
static void share_account(struct getbuf *gb) /* e->rd.share_mu held */
{
	size_t p = !gb->regions && gb->shared ? gb->cap - gb->shared : 0;

	gb->e->rd.region_pinned += p;
	gb->e->rd.region_pinned -= gb->pinned;
	gb->pinned = p;
}

/* A region entry in gb comes (+1) or goes (-1). */
void getbuf_share_region(struct getbuf *gb, int delta)
{
	mw_mutex_lock(&gb->e->rd.share_mu);
	gb->regions += (unsigned)delta;
	share_account(gb);
	mw_mutex_unlock(&gb->e->rd.share_mu);
}

/* May a block of bl bytes inside gb be kept by reference to it?  Counted if so. */
static bool share_block(struct getbuf *gb, size_t bl)
{
	struct engine *e = gb->e;

	mw_mutex_lock(&e->rd.share_mu);
	bool ok = gb->regions && e->rd.region_pinned < e->rd.region_pin_max;
	if (ok) {
		gb->shared += bl;
		share_account(gb);
	}
	mw_mutex_unlock(&e->rd.share_mu);
	return ok;
}

static void unshare_block(struct getbuf *gb, size_t bl)
{
	mw_mutex_lock(&gb->e->rd.share_mu);
	gb->shared -= bl;
	share_account(gb);
	mw_mutex_unlock(&gb->e->rd.share_mu);
}

void blob_val_free(const void *key, size_t klen, void *value)
{
	struct blob_val *bv = value;

	(void)key;
	(void)klen;
	pack_unref(bv->pack);
	if (bv->shared)
		unshare_block(bv->gb, bv->len);
	getbuf_unref(bv->gb);
	free(bv);
}

/* A blob_val with room for len bytes of its own (NULL: -ENOMEM). */
static struct blob_val *blob_val_new(size_t len, uint64_t off)
{
	struct blob_val *bv = malloc(sizeof(*bv) + (len ? len : 1));

	if (bv)
		*bv = (struct blob_val){.len = len, .bytes = bv->data, .off = off};
	return bv;
}

/* Copy n bytes at off of a cached block (off + n <= bv->len). */
int blob_val_read(const struct blob_val *bv, uint64_t off, void *buf, size_t n)
{
	if (!bv->pack) {
		memcpy(buf, bv->bytes + off, n);
		return 0;
	}
	return pack_read(bv->pack, bv->off + off, buf, n);
}

/* Cache key of the block of d's blob that starts at blob offset boff. */
void blob_cache_key(uint8_t k[24], const struct blob_desc *d, uint64_t boff)
{
	put_be64(k, d->epoch);
	put_be64(k + 8, d->position);
	put_be64(k + 16, d->offset + boff);
}

/* Bytes of block b of d's blob. */
size_t blob_block_len(const struct blob_desc *d, uint64_t b)
{
	uint64_t off = b * BLOB_BLOCK_SIZE;

	return d->blob_len - off < BLOB_BLOCK_SIZE ? (size_t)(d->blob_len - off) : BLOB_BLOCK_SIZE;
}

/* Enter bv (taken) into the blob cache as the block at blob offset boff, charged charge. */
static void cache_block(struct engine *e, const struct blob_desc *d, uint64_t boff,
                        struct blob_val *bv, size_t charge)
{
	uint8_t key[24];

	blob_cache_key(key, d, boff);
	if (!e->rd.blob_cache ||
	    cache_insert(e->rd.blob_cache, key, sizeof(key), bv, charge, blob_val_free, NULL) != 0)
		blob_val_free(NULL, 0, bv);
}

/*
 * Keep the verified block at blob offset boff (bytes p[0, bl)) in the blob
 * cache: by reference to gb, which holds p, charged charge; without gb a
 * copy, charged bl.
 */
void blob_keep_block(struct engine *e, const struct blob_desc *d, uint64_t boff, const uint8_t *p,
                     size_t bl, struct getbuf *gb, size_t charge)
{
	struct blob_val *bv;

	if (!e->rd.blob_cache)
		return;
	if (gb) {
		bv = malloc(sizeof(*bv));
		if (!bv)
			return;
		*bv = (struct blob_val){
		    .len = bl, .gb = getbuf_ref(gb), .bytes = p, .off = d->offset + boff};
	} else {
		bv = blob_val_new(bl, d->offset + boff);
		if (!bv)
			return;
		memcpy(bv->data, p, bl);
		charge = bl;
	}
	cache_block(e, d, boff, bv, charge);
}

/*
 * Keep the verified block at p (bl bytes, inside gb, which region entries
 * may hold) by reference to gb when share_block() allows, else a copy.  True
 * if shared.
 */
bool blob_keep_region_block(struct engine *e, const struct blob_desc *d, uint64_t boff,
                            const uint8_t *p, size_t bl, struct getbuf *gb)
{
	if (!e->rd.blob_cache || !share_block(gb, bl)) {
		blob_keep_block(e, d, boff, p, bl, NULL, bl);
		return false;
	}
	struct blob_val *bv = malloc(sizeof(*bv));
	if (!bv) {
		unshare_block(gb, bl);
		return false;
	}
	*bv = (struct blob_val){
	    .len = bl, .gb = getbuf_ref(gb), .shared = true, .bytes = p, .off = d->offset + boff};
	cache_block(e, d, boff, bv, bl);
	return true;
}

void blob_cache_pack(struct engine *e, struct pack *p)
{
	struct blob_desc d = {.epoch = pack_epoch(p), .position = pack_position(p)};
	uint32_t n = pack_count(p);
	uint8_t key[24];

	if (!e->rd.blob_cache)
		return;
	for (uint32_t i = 0; i < n; i++) {
		if (pack_blob(p, i, &d.offset, &d.blob_len))
			return;
		for (uint64_t b = 0; b * BLOB_BLOCK_SIZE < d.blob_len; b++) {
			struct blob_val *bv = malloc(sizeof(*bv));
			if (!bv)
				return;
			*bv = (struct blob_val){.len = blob_block_len(&d, b),
			                        .pack = p,
			                        .off = d.offset + b * BLOB_BLOCK_SIZE};
			pack_ref(p);
			blob_cache_key(key, &d, b * BLOB_BLOCK_SIZE);
			if (cache_insert(e->rd.blob_cache, key, sizeof(key), bv, bv->len,
			                 blob_val_free, NULL) != 0) {
				blob_val_free(NULL, 0, bv);
				return;
			}
		}
	}
}
