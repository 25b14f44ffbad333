/*
 * blob.c - the blob read path: a KV_BLOB descriptor (format.h) to bytes.
 *
 * Order of sources: (1) the pack of the open or in-flight group, in memory
 * (a blob that is not durable yet is only there; reads never wait for a
 * commit); (2) the blob cache (cache.h, budget opts.cache_bytes), keyed by
 * (epoch, position, offset), which the committer fills with the blobs of
 * every pack it committed (entries that share the sealed pack's memory, so
 * that what this mount wrote is read back without the store, during an
 * outage too) and reads fill with what they fetched; (3) a ranged store_get of exactly the blob's
 * bytes from pack/<epoch>-<position>, verified against the descriptor's
 * checksum and then cached.  A missing pack or a checksum failure is
 * -EUCLEAN with a log line naming the pack.
 */
#include <errno.h>
#include <inttypes.h>
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

static void cache_key(uint8_t k[24], const struct blob_desc *d)
{
	put_be64(k, d->epoch);
	put_be64(k + 8, d->position);
	put_be64(k + 16, d->offset);
}

/* The pack of an open or in-flight group holding d, with a reference, or NULL. */
static struct pack *pending_pack(struct engine *e, const struct blob_desc *d)
{
	struct group *gs[2];
	struct pack *p = NULL;

	if (e->o.read_only || d->epoch != e->epoch)
		return NULL;
	mw_mutex_lock(&e->mu);
	gs[0] = e->open;
	gs[1] = e->inflight;
	for (int i = 0; i < 2 && !p; i++) {
		if (gs[i] && gs[i]->pack && pack_position(gs[i]->pack) == d->position) {
			p = gs[i]->pack;
			pack_ref(p);
		}
	}
	mw_mutex_unlock(&e->mu);
	return p;
}

/* Read the whole blob from the store, verified.  *out: malloc()ed blob_val. */
static int load_from_store(struct engine *e, const struct blob_desc *d, struct blob_val **out)
{
	char name[FMT_NAME_MAX];
	struct blob_val *bv;
	void *buf = NULL;
	size_t n = 0;
	int rc;

	fmt_pack_name(name, d->epoch, d->position);
	if (d->length > SIZE_MAX - sizeof(*bv))
		return -EUCLEAN;
	rc = store_get(e->st, name, d->offset, d->length, &buf, &n);
	if (rc == -ENOENT) {
		log_err("blob: pack %s is missing (blob at %" PRIu64 "+%" PRIu64 ")", name,
		        d->offset, d->length);
		return -EUCLEAN;
	}
	if (rc) {
		log_err("blob: get %s [%" PRIu64 "+%" PRIu64 "] failed: %s", name, d->offset,
		        d->length, strerror(-rc));
		return rc;
	}
	if (n != d->length || fmt_hash(buf, n) != d->hash) {
		log_err("blob: %s [%" PRIu64 "+%" PRIu64 "]: %s", name, d->offset, d->length,
		        n != d->length ? "pack too short (truncated)" : "checksum mismatch");
		free(buf);
		return -EUCLEAN;
	}
	bv = malloc(sizeof(*bv) + n);
	if (!bv) {
		free(buf);
		return -ENOMEM;
	}
	bv->len = n;
	bv->pack = NULL;
	bv->off = d->offset;
	memcpy(bv->data, buf, n);
	free(buf);
	*out = bv;
	return 0;
}

int blob_read_range(struct engine *e, const struct blob_desc *d, uint64_t off, void *buf,
                    size_t len, size_t *got)
{
	uint8_t key[24];
	struct cache_handle *h;
	struct blob_val *bv;
	struct pack *p;
	size_t n;
	int rc;

	*got = 0;
	if (off >= d->length)
		return 0;
	n = d->length - off < len ? (size_t)(d->length - off) : len;

	p = pending_pack(e, d);
	if (p) {
		rc = pack_read(p, d->offset + off, buf, n);
		pack_unref(p);
		if (rc == 0) {
			*got = n;
			return 0;
		}
		log_err("blob: in-memory pack %" PRIu64 " does not hold %" PRIu64 "+%" PRIu64,
		        d->position, d->offset, d->length);
		return -EUCLEAN;
	}
	cache_key(key, d);
	h = e->blob_cache ? cache_lookup(e->blob_cache, key, sizeof(key)) : NULL;
	if (h) {
		bv = cache_value(h);
		rc = bv->len == d->length ? blob_val_read(bv, off, buf, n) : -ERANGE;
		cache_release(e->blob_cache, h);
		if (rc == 0) {
			*got = n;
			return 0;
		}
	}
	rc = load_from_store(e, d, &bv);
	if (rc)
		return rc;
	memcpy(buf, bv->data + off, n);
	*got = n;
	if (!e->blob_cache ||
	    cache_insert(e->blob_cache, key, sizeof(key), bv, bv->len, blob_val_free, NULL) != 0)
		free(bv);
	return 0;
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
		struct blob_val *bv = malloc(sizeof(*bv));
		if (!bv || pack_blob(p, i, &d.offset, &d.length)) {
			free(bv);
			return;
		}
		bv->len = (size_t)d.length;
		bv->pack = p;
		bv->off = d.offset;
		pack_ref(p);
		cache_key(key, &d);
		if (cache_insert(e->blob_cache, key, sizeof(key), bv, bv->len, blob_val_free,
		                 NULL) != 0) {
			blob_val_free(NULL, 0, bv);
			return;
		}
	}
}
