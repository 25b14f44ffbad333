/*
 * blob.c - the blob read path: a KV_BLOB descriptor (format.h) to bytes.
 *
 * A descriptor names a range of a blob, and the blob is cut into blocks of
 * BLOB_BLOCK_SIZE whose hashes the descriptor carries; reads work in those
 * blocks.  Order of sources: (1) the pack of the open or in-flight group, in
 * memory (a blob that is not durable yet is only there; reads never wait for
 * a commit); (2) the blob cache (cache.h, budget opts.cache_bytes), one entry
 * per block keyed by (epoch, position, object offset of the block), which the
 * committer fills with the blocks of every pack it committed (entries that
 * share the sealed pack's memory, so that what this mount wrote is read back
 * without the store, during an outage too) and reads fill with what they
 * fetched; (3) one ranged store_get per run of consecutive missing blocks,
 * each block verified against its hash and then cached.  A read therefore
 * fetches the blocks it touches, not the whole blob.  A missing pack or a
 * checksum failure is -EUCLEAN with a log line naming the pack.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cache.h"
#include "coding.h"
#include "engine_int.h"
#include "log.h"
#include "pack.h"
#include "store.h"

/* A cached blob: its bytes, owned, or a range of a sealed pack it holds a reference on. */
struct blob_val {
	size_t len;        /* bytes of the blob */
	struct pack *pack; /* NULL: the bytes are in data */
	uint64_t off;      /* object offset in pack */
	uint8_t data[];    /* the blob (pack == NULL) */
};

static void blob_val_free(const void *key, size_t klen, void *value)
{
	struct blob_val *bv = value;

	(void)key;
	(void)klen;
	pack_unref(bv->pack);
	free(bv);
}

/* Copy n bytes at off of a cached blob (off + n <= bv->len). */
static int blob_val_read(const struct blob_val *bv, uint64_t off, void *buf, size_t n)
{
	if (!bv->pack) {
		memcpy(buf, bv->data + off, n);
		return 0;
	}
	return pack_read(bv->pack, bv->off + off, buf, n);
}

/* Cache key of the block of d's blob that starts at blob offset boff. */
static void cache_key(uint8_t k[24], const struct blob_desc *d, uint64_t boff)
{
	put_be64(k, d->epoch);
	put_be64(k + 8, d->position);
	put_be64(k + 16, d->offset + boff);
}

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

/* Bytes of block b of d's blob. */
static size_t block_len(const struct blob_desc *d, uint64_t b)
{
	uint64_t off = b * BLOB_BLOCK_SIZE;

	return d->blob_len - off < BLOB_BLOCK_SIZE ? (size_t)(d->blob_len - off) : BLOB_BLOCK_SIZE;
}

/*
 * Fetch blocks [b0, b1] of d's blob with one ranged GET, check each against
 * its hash, enter each in the cache, and copy the part of blob range
 * [a, z) that they hold into dst (dst[0] is blob byte a; dst may be NULL).
 */
static int fetch_run(struct engine *e, const struct blob_desc *d, uint64_t b0, uint64_t b1,
                     uint64_t a, uint64_t z, uint8_t *dst)
{
	char name[FMT_NAME_MAX];
	uint64_t from = b0 * BLOB_BLOCK_SIZE;
	uint64_t to = b1 * BLOB_BLOCK_SIZE + block_len(d, b1);
	uint8_t *buf = NULL;
	size_t n = 0;
	int rc;

	fmt_pack_name(name, d->epoch, d->position);
	if (to - from > SIZE_MAX - sizeof(struct blob_val))
		return -EUCLEAN;
	rc = store_get(e->st, name, d->offset + from, (size_t)(to - from), (void **)&buf, &n);
	if (rc == -ENOENT) {
		log_err("blob: pack %s is missing (blob at %" PRIu64 "+%" PRIu64 ")", name,
		        d->offset, d->blob_len);
		return -EUCLEAN;
	}
	if (rc) {
		log_err("blob: get %s [%" PRIu64 "+%" PRIu64 "] failed: %s", name, d->offset + from,
		        to - from, strerror(-rc));
		return rc;
	}
	atomic_fetch_add_explicit(&e->blob_fetches, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&e->blob_fetch_bytes, n, memory_order_relaxed);
	if (n != to - from) {
		log_err("blob: %s [%" PRIu64 "+%" PRIu64 "]: pack too short (truncated)", name,
		        d->offset + from, to - from);
		free(buf);
		return -EUCLEAN;
	}
	uint64_t bad;
	if (blob_desc_verify(d, from, buf, n, &bad)) {
		log_err("blob: %s [%" PRIu64 "+%zu]: checksum mismatch", name, d->offset + bad,
		        block_len(d, bad / BLOB_BLOCK_SIZE));
		free(buf);
		return -EUCLEAN;
	}
	if (dst) {
		uint64_t lo = a > from ? a : from, hi = z < to ? z : to;
		memcpy(dst + (lo - a), buf + (lo - from), (size_t)(hi - lo));
	}
	for (uint64_t b = b0; b <= b1 && e->blob_cache; b++) {
		uint64_t boff = b * BLOB_BLOCK_SIZE;
		size_t bl = block_len(d, b);
		struct blob_val *bv = malloc(sizeof(*bv) + bl);
		uint8_t key[24];
		if (!bv)
			break;
		bv->len = bl;
		bv->pack = NULL;
		bv->off = d->offset + boff;
		memcpy(bv->data, buf + (boff - from), bl);
		cache_key(key, d, boff);
		if (cache_insert(e->blob_cache, key, sizeof(key), bv, bl, blob_val_free, NULL) != 0)
			free(bv);
	}
	free(buf);
	return 0;
}

/*
 * Bring value bytes [off, off + n) of d to dst (NULL: only into the cache),
 * block by block; missing blocks are fetched in runs.
 */
static int blob_io(struct engine *e, const struct blob_desc *d, uint64_t off, size_t n,
                   uint8_t *dst)
{
	uint64_t a = d->start + off, z = a + n; /* blob range */
	uint64_t b0 = a / BLOB_BLOCK_SIZE, b1 = (z - 1) / BLOB_BLOCK_SIZE;
	uint64_t run = UINT64_MAX; /* first block of the current run of missing blocks */
	struct pack *p;
	int rc = 0;

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
	for (uint64_t b = b0; b <= b1 && !rc; b++) {
		uint64_t boff = b * BLOB_BLOCK_SIZE;
		size_t bl = block_len(d, b);
		struct cache_handle *h = NULL;
		uint8_t key[24];
		bool hit = false;

		if (e->blob_cache) {
			cache_key(key, d, boff);
			h = cache_lookup(e->blob_cache, key, sizeof(key));
		}
		if (h) {
			struct blob_val *bv = cache_value(h);
			if (bv->len == bl) {
				uint64_t lo = a > boff ? a : boff,
				         hi = z < boff + bl ? z : boff + bl;
				hit = !dst || blob_val_read(bv, lo - boff, dst + (lo - a),
				                            (size_t)(hi - lo)) == 0;
			}
			cache_release(e->blob_cache, h);
		}
		if (!hit && run == UINT64_MAX)
			run = b;
		if (hit && run != UINT64_MAX) {
			rc = fetch_run(e, d, run, b - 1, a, z, dst);
			run = UINT64_MAX;
		}
	}
	if (!rc && run != UINT64_MAX)
		rc = fetch_run(e, d, run, b1, a, z, dst);
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

void blob_cache_pack(struct engine *e, struct pack *p)
{
	struct blob_desc d = {.epoch = pack_epoch(p), .position = pack_position(p)};
	uint32_t n = pack_count(p);
	uint8_t key[24];

	if (!e->blob_cache)
		return;
	for (uint32_t i = 0; i < n; i++) {
		if (pack_blob(p, i, &d.offset, &d.blob_len))
			return;
		for (uint64_t b = 0; b * BLOB_BLOCK_SIZE < d.blob_len; b++) {
			struct blob_val *bv = malloc(sizeof(*bv));
			if (!bv)
				return;
			bv->len = block_len(&d, b);
			bv->pack = p;
			bv->off = d.offset + b * BLOB_BLOCK_SIZE;
			pack_ref(p);
			cache_key(key, &d, b * BLOB_BLOCK_SIZE);
			if (cache_insert(e->blob_cache, key, sizeof(key), bv, bv->len,
			                 blob_val_free, NULL) != 0) {
				blob_val_free(NULL, 0, bv);
				return;
			}
		}
	}
}
