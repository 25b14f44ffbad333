/*
 * sst_read.c - the SSTable reader: open (footer, index, filter, properties
 * from the tail), point get, and an iterator implementing struct kv_iter
 * (format: sst_format.h, docs/SST.md).
 *
 * A reader is immutable after open and reference counted; any number of
 * threads may get and iterate at once.  Data blocks are fetched with one
 * ranged GET each (which brings the cold blocks after it up to
 * sst_reader_opts.read_around bytes, around()), verified (checksum, decompression, restart array),
 * and kept in the shared block cache (cache.h) under a key made of the reader's process-unique id
 * and the block offset, so two readers never confuse their blocks and a reopened table starts cold
 * in memory.  Under the block cache sits the disk cache (diskcache.h, when the engine has one):
 * sealed blocks keyed by the table's name, the XXH3 of its tail (footer, index, filter, properties:
 * a table of the same name in a store made again has another) and the block offset; a block from
 * there is unsealed and checked like one from the store, and dropped from the disk if it fails.
 *
 * Every failure to make sense of stored bytes is -EUCLEAN (-EPROTONOSUPPORT
 * for a newer format version) with a log line naming the object, the offset
 * and the fault; nothing is read outside the
 * buffers that were fetched.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "bloom.h"
#include <xxhash.h>

#include "cache.h"
#include "coding.h"
#include "diskcache.h"
#include "inflight.h"
#include "log.h"
#include "sst.h"
#include "sst_block.h"
#include "store.h"

/* Data blocks one reader reads from the store at once with a registry entry each. */
#define FETCHING 8

struct sst_reader {
	_Atomic unsigned refs;       /* references; the last unref frees */
	struct store *store;         /* borrowed */
	char *key;                   /* object key */
	uint64_t size;               /* object size */
	uint64_t id;                 /* process-unique id: block cache key prefix */
	struct cache *cache;         /* borrowed block cache, or NULL */
	struct diskcache *dcache;    /* borrowed disk cache, or NULL */
	uint64_t dsalt;              /* opts.dsalt: before the key in dcache when not 0 */
	size_t around;               /* sst_reader_opts.read_around (0 without a cache) */
	uint64_t ident;              /* XXH3 of the tail: the table's identity in the disk cache */
	struct sst_counters own;     /* this reader's counters */
	struct sst_counters *shared; /* caller's counters, or NULL */
	struct sst_footer foot;      /* decoded footer */
	uint8_t *index_raw;          /* index block contents */
	struct sst_block index;      /* parsed over index_raw */
	uint8_t *filter;             /* bloom filter (NULL: none) */
	size_t filter_len;           /* its length */
	struct sst_props props;      /* decoded properties */
	struct inflight fetching;    /* data blocks being read: key 0, 0; [offset, offset + 1) */
};

/* A decoded data block, shared through the cache or owned by one user. */
struct cblock {
	uint8_t *raw;         /* block contents */
	struct sst_block blk; /* parsed over raw */
};

/* A held block: either a cache handle or a private block. */
struct blockref {
	struct cache_handle *h; /* when from the cache */
	struct cblock *own;     /* when private (no cache or insert failed) */
	struct cblock *b;       /* the block, either way */
};

static _Atomic uint64_t next_reader_id = 1;

#define COUNT(r, field, n)                                                                         \
	do {                                                                                       \
		atomic_fetch_add_explicit(&(r)->own.field, (n), memory_order_relaxed);             \
		if ((r)->shared)                                                                   \
			atomic_fetch_add_explicit(&(r)->shared->field, (n), memory_order_relaxed); \
	} while (0)

static int corrupt(struct sst_reader *r, uint64_t off, const char *what, enum sst_fault f)
{
	log_err("sst: %s: %s at offset %llu: %s", r->key, what, (unsigned long long)off,
	        sst_fault_str(f));
	COUNT(r, corrupt, 1);
	return f == SST_NEWER_VERSION ? -EPROTONOSUPPORT : -EUCLEAN;
}

static void cblock_free(struct cblock *b)
{
	if (b) {
		free(b->raw);
		free(b);
	}
}

static void cblock_deleter(const void *key, size_t klen, void *value)
{
	(void)key;
	(void)klen;
	cblock_free(value);
}

static void blockref_release(struct sst_reader *r, struct blockref *br)
{
	if (br->h)
		cache_release(r->cache, br->h);
	cblock_free(br->own);
	memset(br, 0, sizeof(*br));
}

/* Does a data block handle lie inside the data area? */
static bool data_handle_ok(const struct sst_reader *r, const struct sst_handle *h)
{
	uint64_t end = r->size - SST_FOOTER_SIZE;

	return h->off >= SST_HEADER_SIZE && h->off < end && h->size <= end - h->off &&
	       h->size + SST_TRAILER_SIZE <= end - h->off;
}

/*
 * Disk cache key of the block at off: 'S', identity, offset, name; after 'V' and the salt when
 * the reader has one (a cache shared by the engines of several regions, whose tables may have
 * the same name and the same index: the identity is no help there).  0: none (name too long).
 */
static size_t disk_key(const struct sst_reader *r, uint64_t off, uint8_t k[DISKCACHE_KEY_MAX])
{
	size_t nl = strlen(r->key), n = 0;

	if (26 + nl > DISKCACHE_KEY_MAX)
		return 0;
	if (r->dsalt) {
		k[n++] = 'V';
		put_be64(k + n, r->dsalt);
		n += 8;
	}
	k[n] = 'S';
	put_be64(k + n + 1, r->ident);
	put_be64(k + n + 9, off);
	memcpy(k + n + 17, r->key, nl);
	return n + 17 + nl;
}

static int read_block_from(struct sst_reader *r, const struct sst_block_iter *ix,
                           const struct sst_handle *h, const uint8_t ckey[16], bool cached,
                           struct blockref *out);

/*
 * The data block at h (ix: the index iterator on h's entry, for the blocks
 * after it, or NULL) from the block cache, else read once for all threads.
 * cached: from the block or disk cache only, else -EWOULDBLOCK (no store
 * read, no wait for another thread's).
 */
static int read_block(struct sst_reader *r, const struct sst_block_iter *ix,
                      const struct sst_handle *h, bool cached, struct blockref *out)
{
	uint8_t ckey[16];
	int slot = -1;

	if (!data_handle_ok(r, h))
		return corrupt(r, h->off, "data block handle", SST_BAD_LAYOUT);
	put_be64(ckey, r->id);
	put_be64(ckey + 8, h->off);
	for (int tries = 0;; tries++) {
		if (r->cache) {
			struct cache_handle *ch = cache_lookup(r->cache, ckey, sizeof(ckey));
			if (ch) {
				COUNT(r, cache_hits, 1);
				COUNT(r, cache_hit_bytes, cache_charge(ch));
				out->h = ch;
				out->own = NULL;
				out->b = cache_value(ch);
				return 0;
			}
		}
		/*
		 * Threads that miss the same cold block (32 stat()s of a cold mount, four
		 * readers of one directory) send one GET of it: the others wait for it and
		 * take the block from the cache.  With no cache, or after two waits, read
		 * it ourselves.
		 */
		if (!r->cache || tries >= 2 || cached)
			break;
		slot = inflight_begin(&r->fetching, 0, 0, h->off, h->off + 1);
		if (slot != INFLIGHT_WAITED)
			break;
	}
	int rc = read_block_from(r, ix, h, ckey, cached, out);
	inflight_end(&r->fetching, slot);
	return rc;
}

/* Most data blocks one GET brings with the one asked for. */
#define AROUND_MAX 64

/*
 * The blocks the GET of the cold block at h brings with it: those of the
 * index entries after ix's whose blocks follow on without a gap and are not
 * in the block cache, up to r->around bytes from h's start.  Their handles go
 * to more[]; returns how many.  A `stat` or `ls -l` of a cold mount, a reader
 * of a directory of small files, an iterator over a table: the blocks next to
 * a cold one are needed next, and a GET of 128 KiB costs about what a GET of
 * 4 KiB costs.
 */
static int around(struct sst_reader *r, const struct sst_block_iter *ix, const struct sst_handle *h,
                  struct sst_handle more[AROUND_MAX])
{
	struct sst_block_iter it;
	uint64_t end = h->off + h->size + SST_TRAILER_SIZE;
	int n = 0;

	if (!ix || !r->around)
		return 0;
	sst_block_iter_init(&it, &r->index);
	sst_block_iter_seek(&it, ix->key.p, ix->key.n, ix->seq);
	if (!it.valid || it.cur != ix->cur) {
		sst_block_iter_free(&it);
		return 0;
	}
	for (sst_block_iter_next(&it); it.valid && n < AROUND_MAX; sst_block_iter_next(&it)) {
		struct sst_handle nh;
		uint8_t ckey[16];

		if (sst_handle_decode(it.val, it.val + it.vlen, &nh) != it.vlen || nh.off != end ||
		    !data_handle_ok(r, &nh) ||
		    nh.off + nh.size + SST_TRAILER_SIZE - h->off > r->around)
			break;
		put_be64(ckey, r->id);
		put_be64(ckey + 8, nh.off);
		struct cache_handle *ch = cache_lookup(r->cache, ckey, sizeof(ckey));
		if (ch) {
			cache_release(r->cache, ch);
			break;
		}
		more[n++] = nh;
		end = nh.off + nh.size + SST_TRAILER_SIZE;
	}
	sst_block_iter_free(&it);
	return n;
}

/*
 * Check, parse and cache (memory, disk) the sealed block at h that came with
 * another block's GET.  One that fails is left out: the read that needs it
 * fetches it again and reports what is wrong.
 */
static void keep_around(struct sst_reader *r, const struct sst_handle *h, const uint8_t *sealed)
{
	size_t len = h->size + SST_TRAILER_SIZE, rawlen;
	enum sst_fault f = SST_OK;
	uint8_t ckey[16], dkey[DISKCACHE_KEY_MAX];
	size_t dklen;
	struct cblock *cb = calloc(1, sizeof(*cb));

	if (!cb)
		return;
	if (sst_block_unseal(sealed, len, &cb->raw, &rawlen, &f) ||
	    sst_block_parse(cb->raw, rawlen, &cb->blk)) {
		cblock_free(cb);
		return;
	}
	put_be64(ckey, r->id);
	put_be64(ckey + 8, h->off);
	if (cache_insert(r->cache, ckey, sizeof(ckey), cb, rawlen + sizeof(*cb), cblock_deleter,
	                 NULL)) {
		cblock_free(cb);
		return;
	}
	COUNT(r, blocks_around, 1);
	if (r->dcache && (dklen = disk_key(r, h->off, dkey)))
		diskcache_put(r->dcache, dkey, dklen, sealed, len);
}

/*
 * read_block() of a block not in the memory cache: the disk cache or (not
 * cached) the store.
 */
static int read_block_from(struct sst_reader *r, const struct sst_block_iter *ix,
                           const struct sst_handle *h, const uint8_t ckey[16], bool cached,
                           struct blockref *out)
{
	struct cblock *cb = NULL;
	enum sst_fault f = SST_OK;
	void *buf = NULL;
	size_t got, rawlen, blen = h->size + SST_TRAILER_SIZE;
	struct sst_handle more[AROUND_MAX];
	int rc, nmore = 0;

	uint8_t dkey[DISKCACHE_KEY_MAX];
	size_t dklen = 0;
	bool from_disk = false;
	if (r->dcache && (dklen = disk_key(r, h->off, dkey)) &&
	    (buf = malloc(h->size + SST_TRAILER_SIZE))) {
		from_disk = diskcache_get(r->dcache, dkey, dklen, buf, h->size + SST_TRAILER_SIZE,
		                          DISKCACHE_GET_CALLER_CHECKS) == 0;
		if (from_disk) {
			got = h->size + SST_TRAILER_SIZE;
			COUNT(r, disk_hits, 1);
			COUNT(r, disk_bytes, got);
		} else {
			free(buf);
			buf = NULL;
		}
	}
	cb = calloc(1, sizeof(*cb));
	if (!cb) {
		rc = -ENOMEM;
		goto out;
	}
	if (from_disk) {
		rc = sst_block_unseal(buf, got, &cb->raw, &rawlen, &f);
		if (rc == 0)
			goto parse;
		diskcache_drop(r->dcache, dkey, dklen, true); /* a wrong entry: read the store */
		free(buf);
		buf = NULL;
	}
	if (cached) {
		rc = -EWOULDBLOCK; /* the caller warms it without its lock and asks again */
		goto out;
	}
	nmore = around(r, ix, h, more);
	rc = store_get(
	    r->store, r->key, h->off,
	    nmore ? more[nmore - 1].off + more[nmore - 1].size + SST_TRAILER_SIZE - h->off : blen,
	    &buf, &got);
	if (rc) {
		log_err("sst: %s: reading block at %llu: %s", r->key, (unsigned long long)h->off,
		        strerror(-rc));
		if (rc == -ENOENT)
			COUNT(r, missing, 1); /* the engine's store watch checks (watch.c) */
		rc = rc == -ENOENT ? -EIO : rc;
		goto out;
	}
	COUNT(r, blocks_read, 1);
	COUNT(r, block_bytes, got);
	if (got < blen) {
		rc = corrupt(r, h->off, "data block", SST_TRUNCATED);
		goto out;
	}
	for (int i = 0; i < nmore; i++)
		if (more[i].off + more[i].size + SST_TRAILER_SIZE - h->off <= got)
			keep_around(r, &more[i], (const uint8_t *)buf + (more[i].off - h->off));
	rc = sst_block_unseal(buf, blen, &cb->raw, &rawlen, &f);
	if (rc == -EUCLEAN)
		rc = corrupt(r, h->off, "data block", f);
	if (rc)
		goto out;
	if (r->dcache && dklen)
		diskcache_put(r->dcache, dkey, dklen, buf, blen);
parse:
	if (sst_block_parse(cb->raw, rawlen, &cb->blk)) {
		rc = corrupt(r, h->off, "data block restarts", SST_BAD_LAYOUT);
		goto out;
	}
	out->b = cb;
	out->h = NULL;
	out->own = cb;
	if (r->cache &&
	    !cache_insert(r->cache, ckey, 16, cb, rawlen + sizeof(*cb), cblock_deleter, &out->h))
		out->own = NULL;
	cb = NULL;
out:
	cblock_free(cb);
	free(buf);
	return rc;
}

/* Unseal a metadata block found in the tail buffer (base = its offset). */
static int meta_block(struct sst_reader *r, const uint8_t *buf, uint64_t base, uint64_t len,
                      const struct sst_handle *h, const char *what, uint8_t **raw, size_t *rawlen)
{
	enum sst_fault f = SST_OK;
	int rc;

	if (h->off < base || h->off - base + h->size + SST_TRAILER_SIZE > len)
		return corrupt(r, h->off, what, SST_BAD_LAYOUT);
	rc = sst_block_unseal(buf + (h->off - base), h->size + SST_TRAILER_SIZE, raw, rawlen, &f);
	if (rc == -EUCLEAN)
		return corrupt(r, h->off, what, f);
	return rc;
}

static void reader_free(struct sst_reader *r)
{
	if (!r)
		return;
	free(r->index_raw);
	free(r->filter);
	sst_props_free(&r->props);
	free(r->key);
	inflight_destroy(&r->fetching);
	free(r);
}

/* Read and check footer, index, filter and properties. */
static int load_tail(struct sst_reader *r)
{
	uint64_t tail_off, base, meta;
	void *buf = NULL, *buf2 = NULL;
	uint8_t *raw = NULL;
	size_t got, rawlen, ilen;
	enum sst_fault f;
	int rc;

	if (r->size < SST_HEADER_SIZE + SST_FOOTER_SIZE)
		return corrupt(r, 0, "object", SST_TRUNCATED);
	tail_off = r->size > SST_TAIL_READ ? r->size - SST_TAIL_READ : 0;
	rc = store_get(r->store, r->key, tail_off, r->size - tail_off, &buf, &got);
	if (rc) {
		log_err("sst: %s: reading tail: %s", r->key, strerror(-rc));
		return rc;
	}
	if (got != r->size - tail_off) {
		rc = corrupt(r, tail_off, "tail (object shorter than expected)", SST_TRUNCATED);
		goto out;
	}
	f = sst_footer_decode((uint8_t *)buf + got - SST_FOOTER_SIZE, r->size, &r->foot);
	if (f != SST_OK) {
		rc = corrupt(r, r->size - SST_FOOTER_SIZE, "footer", f);
		goto out;
	}
	if (tail_off == 0 && (f = sst_header_decode(buf)) != SST_OK) {
		/* the checksummed footer has our version: a header saying newer is damage */
		rc = corrupt(r, 0, "header", f == SST_NEWER_VERSION ? SST_BAD_LAYOUT : f);
		goto out;
	}
	meta = r->foot.index.off < r->foot.props.off ? r->foot.index.off : r->foot.props.off;
	if (r->foot.filter.size && r->foot.filter.off < meta)
		meta = r->foot.filter.off;
	base = tail_off;
	if (meta < tail_off) {
		/* Metadata larger than the tail read: fetch all of it. */
		rc = store_get(r->store, r->key, meta, r->size - meta, &buf2, &got);
		if (rc) {
			log_err("sst: %s: reading metadata: %s", r->key, strerror(-rc));
			goto out;
		}
		if (got != r->size - meta) {
			rc = corrupt(r, meta, "metadata", SST_TRUNCATED);
			goto out;
		}
		free(buf);
		buf = buf2;
		buf2 = NULL;
		base = meta;
	}
	r->ident = (uint64_t)XXH3_64bits((uint8_t *)buf + (meta - base), r->size - meta);
	got -= SST_FOOTER_SIZE;
	rc = meta_block(r, buf, base, got, &r->foot.index, "index block", &r->index_raw, &ilen);
	if (rc)
		goto out;
	if (sst_block_parse(r->index_raw, ilen, &r->index)) {
		rc = corrupt(r, r->foot.index.off, "index block restarts", SST_BAD_LAYOUT);
		goto out;
	}
	if (r->foot.filter.size) {
		rc = meta_block(r, buf, base, got, &r->foot.filter, "filter block", &r->filter,
		                &r->filter_len);
		if (rc)
			goto out;
		if (!bloom_valid(r->filter, r->filter_len)) {
			rc = corrupt(r, r->foot.filter.off, "filter block", SST_BAD_LAYOUT);
			goto out;
		}
	}
	rc = meta_block(r, buf, base, got, &r->foot.props, "properties block", &raw, &rawlen);
	if (rc)
		goto out;
	rc = sst_props_decode(raw, rawlen, &r->props);
	if (rc == -EUCLEAN)
		rc = corrupt(r, r->foot.props.off, "properties block", SST_BAD_LAYOUT);
	r->props.file_size = r->size;
out:
	free(raw);
	free(buf2);
	free(buf);
	return rc;
}

int sst_reader_open(struct store *s, const char *key, uint64_t size,
                    const struct sst_reader_opts *o, struct sst_reader **out)
{
	struct sst_reader *r;
	int rc;

	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	atomic_init(&r->refs, 1);
	inflight_init(&r->fetching, FETCHING);
	r->store = s;
	r->key = strdup(key);
	if (!r->key) {
		rc = -ENOMEM;
		goto fail;
	}
	r->id = atomic_fetch_add(&next_reader_id, 1);
	if (o) {
		r->shared = o->counters;
		r->cache = o->cache;
		r->dcache = o->dcache;
		r->dsalt = o->dsalt;
		r->around = o->cache ? o->read_around : 0;
	}
	if (!size) {
		struct store_stat st;

		rc = store_head(s, key, &st);
		if (rc) {
			log_err("sst: %s: head: %s", key, strerror(-rc));
			goto fail;
		}
		size = st.size;
	}
	r->size = size;
	rc = load_tail(r);
	if (rc)
		goto fail;
	*out = r;
	return 0;
fail:
	reader_free(r);
	return rc;
}

void sst_reader_ref(struct sst_reader *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}

void sst_reader_unref(struct sst_reader *r)
{
	if (r && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
		reader_free(r);
}

const struct sst_props *sst_reader_props(const struct sst_reader *r)
{
	return &r->props;
}

const char *sst_reader_key(const struct sst_reader *r)
{
	return r->key;
}

void sst_counters_read(struct sst_counters *c, struct sst_stats *out)
{
	out->blocks_read = atomic_load(&c->blocks_read);
	out->block_bytes = atomic_load(&c->block_bytes);
	out->cache_hits = atomic_load(&c->cache_hits);
	out->bloom_checks = atomic_load(&c->bloom_checks);
	out->bloom_negatives = atomic_load(&c->bloom_negatives);
	out->bloom_false_pos = atomic_load(&c->bloom_false_pos);
	out->corrupt = atomic_load(&c->corrupt);
	out->disk_hits = atomic_load(&c->disk_hits);
	out->disk_bytes = atomic_load(&c->disk_bytes);
	out->cache_hit_bytes = atomic_load(&c->cache_hit_bytes);
	out->blocks_around = atomic_load(&c->blocks_around);
}

void sst_reader_stats(const struct sst_reader *r, struct sst_stats *out)
{
	sst_counters_read((struct sst_counters *)&r->own, out);
}

bool sst_reader_may_contain(struct sst_reader *r, const void *key, size_t klen)
{
	if (!r->filter)
		return true;
	return bloom_may_contain(r->filter, r->filter_len, bloom_hash(key, klen));
}

/* Decode the handle of the index entry under it. */
static int index_handle(struct sst_reader *r, const struct sst_block_iter *it, struct sst_handle *h)
{
	const uint8_t *end = it->val + it->vlen;

	if (sst_handle_decode(it->val, end, h) != it->vlen)
		return corrupt(r, r->foot.index.off, "index entry", SST_BAD_LAYOUT);
	return 0;
}

int sst_reader_get(struct sst_reader *r, const void *key, size_t klen, uint64_t snap, bool cached,
                   enum kv_type *type, uint64_t *seq, void **val, size_t *vlen)
{
	struct sst_block_iter ix, di;
	struct blockref br = {0};
	struct sst_handle h;
	int rc = 0;

	if (r->filter) {
		COUNT(r, bloom_checks, 1);
		if (!bloom_may_contain(r->filter, r->filter_len, bloom_hash(key, klen))) {
			COUNT(r, bloom_negatives, 1);
			return 0;
		}
	}
	sst_block_iter_init(&ix, &r->index);
	sst_block_iter_init(&di, NULL);
	sst_block_iter_seek(&ix, key, klen, snap);
	if (!ix.valid) {
		if (ix.status)
			rc = ix.status == -EUCLEAN
			         ? corrupt(r, r->foot.index.off, "index block", SST_BAD_LAYOUT)
			         : ix.status;
		goto out;
	}
	rc = index_handle(r, &ix, &h);
	if (rc)
		goto out;
	rc = read_block(r, &ix, &h, cached, &br);
	if (rc)
		goto out;
	sst_block_iter_init(&di, &br.b->blk);
	sst_block_iter_seek(&di, key, klen, snap);
	if (di.status) {
		rc = di.status == -EUCLEAN ? corrupt(r, h.off, "data block entry", SST_BAD_LAYOUT)
		                           : di.status;
		goto out;
	}
	if (!di.valid || kv_key_cmp(di.key.p, di.key.n, key, klen) != 0)
		goto out;
	if (val) {
		void *copy = malloc(di.vlen ? di.vlen : 1);

		if (!copy) {
			rc = -ENOMEM;
			goto out;
		}
		if (di.vlen)
			memcpy(copy, di.val, di.vlen);
		*val = copy;
	}
	if (vlen)
		*vlen = di.vlen;
	if (type)
		*type = di.type;
	if (seq)
		*seq = di.seq;
	rc = 1;
out:
	if (rc == 0 && r->filter)
		COUNT(r, bloom_false_pos, 1);
	sst_block_iter_free(&di);
	sst_block_iter_free(&ix);
	blockref_release(r, &br);
	return rc;
}

/* ---- iterator ---- */

struct sst_iter {
	struct kv_iter base;      /* must be first */
	struct sst_reader *r;     /* holds a reference */
	struct sst_block_iter ix; /* over the index block */
	struct blockref br;       /* the current data block (b NULL: none) */
	struct sst_block_iter di; /* over br.b->blk */
	bool cached;              /* blocks from the block or disk cache only (-EWOULDBLOCK) */
	int status;               /* sticky error */
};

static void it_fail(struct sst_iter *it, int rc)
{
	if (!it->status)
		it->status = rc;
	it->di.valid = false;
}

/* Load the data block the index iterator is on, replacing the current one. */
static bool it_load(struct sst_iter *it)
{
	struct sst_buf keep = it->di.key;
	struct sst_handle h;
	int rc;

	it->di.key = (struct sst_buf){0};
	sst_block_iter_init(&it->di, NULL);
	it->di.key = keep;
	it->di.key.n = 0;
	blockref_release(it->r, &it->br);
	if (!it->ix.valid) {
		if (it->ix.status)
			it_fail(it, it->ix.status == -EUCLEAN
			                ? corrupt(it->r, it->r->foot.index.off, "index block",
			                          SST_BAD_LAYOUT)
			                : it->ix.status);
		return false;
	}
	rc = index_handle(it->r, &it->ix, &h);
	if (!rc)
		rc = read_block(it->r, &it->ix, &h, it->cached, &it->br);
	if (rc) {
		it_fail(it, rc);
		return false;
	}
	it->di.b = &it->br.b->blk;
	return true;
}

/* After a move: step over block ends (and empty blocks) to the next entry. */
static void it_settle(struct sst_iter *it)
{
	while (!it->status && !it->di.valid) {
		if (it->di.status) {
			it_fail(it, it->di.status == -EUCLEAN
			                ? corrupt(it->r, 0, "data block entry", SST_BAD_LAYOUT)
			                : it->di.status);
			return;
		}
		if (!it->br.b)
			return;
		sst_block_iter_next(&it->ix);
		if (!it_load(it))
			return;
		sst_block_iter_seek_first(&it->di);
	}
}

static bool it_valid(const struct kv_iter *k)
{
	const struct sst_iter *it = (const struct sst_iter *)k;

	return !it->status && it->br.b && it->di.valid;
}

static void it_seek_first(struct kv_iter *k)
{
	struct sst_iter *it = (struct sst_iter *)k;

	if (it->status)
		return;
	sst_block_iter_seek_first(&it->ix);
	if (!it_load(it))
		return;
	sst_block_iter_seek_first(&it->di);
	it_settle(it);
}

static void it_seek(struct kv_iter *k, const void *key, size_t klen)
{
	struct sst_iter *it = (struct sst_iter *)k;

	if (it->status)
		return;
	sst_block_iter_seek(&it->ix, key, klen, UINT64_MAX);
	if (!it_load(it))
		return;
	sst_block_iter_seek(&it->di, key, klen, UINT64_MAX);
	it_settle(it);
}

static void it_next(struct kv_iter *k)
{
	struct sst_iter *it = (struct sst_iter *)k;

	if (!it_valid(k))
		return;
	sst_block_iter_next(&it->di);
	it_settle(it);
}

static const void *it_key(const struct kv_iter *k, size_t *klen)
{
	const struct sst_iter *it = (const struct sst_iter *)k;

	*klen = it->di.key.n;
	return it->di.key.p;
}

static uint64_t it_seq(const struct kv_iter *k)
{
	return ((const struct sst_iter *)k)->di.seq;
}

static enum kv_type it_type(const struct kv_iter *k)
{
	return ((const struct sst_iter *)k)->di.type;
}

static const void *it_value(const struct kv_iter *k, size_t *vlen)
{
	const struct sst_iter *it = (const struct sst_iter *)k;

	*vlen = it->di.vlen;
	return it->di.val;
}

static int it_status(const struct kv_iter *k)
{
	return ((const struct sst_iter *)k)->status;
}

static void it_destroy(struct kv_iter *k)
{
	struct sst_iter *it = (struct sst_iter *)k;

	sst_block_iter_free(&it->di);
	sst_block_iter_free(&it->ix);
	blockref_release(it->r, &it->br);
	sst_reader_unref(it->r);
	free(it);
}

static const struct kv_iter_ops sst_iter_ops = {
    .valid = it_valid,
    .seek_first = it_seek_first,
    .seek = it_seek,
    .next = it_next,
    .key = it_key,
    .seq = it_seq,
    .type = it_type,
    .value = it_value,
    .status = it_status,
    .destroy = it_destroy,
};

int sst_reader_iter_new(struct sst_reader *r, bool cached, struct kv_iter **out)
{
	struct sst_iter *it = calloc(1, sizeof(*it));

	if (!it)
		return -ENOMEM;
	it->base.ops = &sst_iter_ops;
	sst_reader_ref(r);
	it->r = r;
	it->cached = cached;
	sst_block_iter_init(&it->ix, &r->index);
	sst_block_iter_init(&it->di, NULL);
	*out = &it->base;
	return 0;
}
