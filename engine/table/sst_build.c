/*
 * sst_build.c - the SSTable builder: entries in internal order in, one
 * streamed object out (format: sst_format.h, docs/SST.md).
 *
 * Memory: the open data block (about block_size bytes, more for one huge
 * entry), its sealed copy while it is written, the index block (one entry
 * per data block), 8 bytes of hash per distinct user key for the filter,
 * and the properties.  Nothing else of the table is kept: each data block
 * goes to store_writer_write() as soon as it closes.
 *
 * Failure: the first error (store, memory, bad input) is sticky; finish()
 * then aborts the upload so that no partial table is ever visible.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bloom.h"
#include "coding.h"
#include "log.h"
#include "sst.h"
#include "sst_block.h"
#include "store.h"

struct sst_builder {
	struct store *store;            /* borrowed */
	struct store_writer *w;         /* the upload; NULL once finished/aborted */
	char *key;                      /* object key (for log lines) */
	struct sst_builder_opts o;      /* options with defaults applied */
	struct sst_block_builder data;  /* the open data block */
	struct sst_block_builder index; /* one entry per closed data block */
	uint64_t *hashes;               /* bloom hashes of distinct user keys */
	size_t nhashes, hashes_cap;     /* used / allocated entries of hashes */
	struct sst_props props;         /* running totals; smallest/largest/packs owned */
	size_t packs_cap;               /* allocated entries of props.packs */
	struct sst_buf last_key;        /* previous user key (order check) */
	uint64_t last_seq;              /* previous sequence */
	uint64_t off;                   /* bytes written to the object so far */
	int err;                        /* sticky first error */
};

void sst_builder_opts_default(struct sst_builder_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->block_size = 16 * 1024;
	o->restart_interval = 16;
	o->bloom_bits_per_key = 10;
	o->zstd_level = 3;
}

/* Push bytes to the upload, keeping the offset and the sticky error. */
static int emit(struct sst_builder *b, const void *p, size_t n)
{
	int rc = store_writer_write(b->w, p, n);

	if (rc) {
		log_err("sst: writing %s at offset %llu: %s", b->key, (unsigned long long)b->off,
		        strerror(-rc));
		return b->err = rc;
	}
	b->off += n;
	return 0;
}

/* Seal raw[0..n) and write it; *h receives where it went. */
static int emit_block(struct sst_builder *b, const uint8_t *raw, size_t n, int level,
                      struct sst_handle *h)
{
	uint8_t *sealed;
	size_t len;
	int rc = sst_block_seal(raw, n, level, &sealed, &len);

	if (rc)
		return b->err = rc;
	h->off = b->off;
	h->size = len - SST_TRAILER_SIZE;
	rc = emit(b, sealed, len);
	free(sealed);
	return rc;
}

/* Close the open data block: write it and index its last key. */
static int flush_data(struct sst_builder *b)
{
	struct sst_handle h;
	uint8_t hv[2 * VARINT64_MAX];
	const uint8_t *raw;
	size_t n;
	int rc;

	if (b->data.entries == 0)
		return 0;
	rc = sst_bb_finish(&b->data, &raw, &n);
	if (rc)
		return b->err = rc;
	if (n > SST_BLOCK_RAW_MAX)
		return b->err = -EINVAL;
	rc = emit_block(b, raw, n, b->o.zstd_level, &h);
	if (rc)
		return rc;
	rc = sst_bb_add(&b->index, b->data.last_key.p, b->data.last_key.n, b->data.last_seq,
	                KV_INLINE, hv, sst_handle_encode(&h, hv));
	if (rc)
		return b->err = rc;
	b->props.data_blocks++;
	sst_bb_reset(&b->data);
	return 0;
}

int sst_builder_new(struct store *s, const char *key, const struct sst_builder_opts *o,
                    struct sst_builder **out)
{
	struct sst_builder *b;
	uint8_t hdr[SST_HEADER_SIZE];
	int rc;

	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	if (o)
		b->o = *o;
	else
		sst_builder_opts_default(&b->o);
	if (!b->o.block_size)
		b->o.block_size = 16 * 1024;
	if (!b->o.restart_interval)
		b->o.restart_interval = 16;
	if (b->o.block_size > SST_BLOCK_RAW_MAX / 2 || b->o.bloom_bits_per_key > 100) {
		rc = -EINVAL;
		goto fail;
	}
	b->store = s;
	b->key = strdup(key);
	if (!b->key) {
		rc = -ENOMEM;
		goto fail;
	}
	sst_bb_init(&b->data, b->o.restart_interval);
	sst_bb_init(&b->index, 1);
	b->props.bloom_bits = b->o.bloom_bits_per_key;
	rc = store_writer_open(s, key, b->o.writer_flags, &b->w);
	if (rc) {
		log_err("sst: opening upload of %s: %s", key, strerror(-rc));
		goto fail;
	}
	sst_header_encode(hdr);
	rc = emit(b, hdr, sizeof(hdr));
	if (rc)
		goto fail;
	*out = b;
	return 0;
fail:
	sst_builder_abort(b);
	return rc;
}

/* Total the blob bytes of a descriptor into the per-pack list (sorted by id). */
static int add_blob_ref(struct sst_builder *b, const void *val, size_t vlen)
{
	struct sst_pack_ref ref = {0};
	size_t lo = 0, hi = b->props.npacks;
	int rc;

	rc = b->o.blob_ref(b->o.blob_ref_arg, val, vlen, &ref);
	if (rc)
		return rc;
	if (ref.idlen < 1 || ref.idlen > SST_PACK_ID_MAX)
		return -EINVAL;
	b->props.blob_bytes += ref.bytes;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		struct sst_pack_ref *m = &b->props.packs[mid];
		int c = kv_key_cmp(m->id, m->idlen, ref.id, ref.idlen);

		if (c == 0) {
			m->bytes += ref.bytes;
			return 0;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (b->props.npacks == b->packs_cap) {
		size_t cap = b->packs_cap ? 2 * b->packs_cap : 8;
		struct sst_pack_ref *p = realloc(b->props.packs, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		b->props.packs = p;
		b->packs_cap = cap;
	}
	memmove(&b->props.packs[lo + 1], &b->props.packs[lo], (b->props.npacks - lo) * sizeof(ref));
	b->props.packs[lo] = ref;
	b->props.npacks++;
	return 0;
}

static int add_hash(struct sst_builder *b, const void *key, size_t klen)
{
	if (b->nhashes == b->hashes_cap) {
		size_t cap = b->hashes_cap ? 2 * b->hashes_cap : 1024;
		uint64_t *h = realloc(b->hashes, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		b->hashes = h;
		b->hashes_cap = cap;
	}
	b->hashes[b->nhashes++] = bloom_hash(key, klen);
	return 0;
}

int sst_builder_add(struct sst_builder *b, const void *key, size_t klen, uint64_t seq,
                    enum kv_type type, const void *val, size_t vlen)
{
	bool new_key;
	int rc;

	if (b->err)
		return b->err;
	if (klen > SST_KEY_MAX || vlen > SST_VALUE_MAX || (unsigned)type > KV_BLOB ||
	    (!key && klen) || (!val && vlen))
		return b->err = -EINVAL;
	if (b->props.entries) {
		int c = sst_internal_cmp(key, klen, seq, b->last_key.p, b->last_key.n, b->last_seq);

		if (c <= 0) {
			log_err("sst: %s: entry out of internal order", b->key);
			return b->err = -EINVAL;
		}
		new_key = kv_key_cmp(key, klen, b->last_key.p, b->last_key.n) != 0;
	} else {
		new_key = true;
		rc = sst_buf_append(&b->last_key, key, klen);
		if (rc)
			return b->err = rc;
		b->props.smallest = malloc(klen ? klen : 1);
		if (!b->props.smallest)
			return b->err = -ENOMEM;
		if (klen)
			memcpy(b->props.smallest, key, klen);
		b->props.smallest_len = klen;
		b->props.min_seq = seq;
	}
	if (type == KV_BLOB && b->o.blob_ref) {
		rc = add_blob_ref(b, val, vlen);
		if (rc)
			return b->err = rc;
	}
	if (new_key) {
		b->props.keys++;
		if (b->o.bloom_bits_per_key) {
			rc = add_hash(b, key, klen);
			if (rc)
				return b->err = rc;
		}
	}
	rc = sst_bb_add(&b->data, key, klen, seq, type, val, vlen);
	if (rc)
		return b->err = rc;
	b->last_key.n = 0;
	rc = sst_buf_append(&b->last_key, key, klen);
	if (rc)
		return b->err = rc;
	b->last_seq = seq;
	b->props.entries++;
	b->props.deletes += type == KV_DELETE;
	b->props.blobs += type == KV_BLOB;
	b->props.raw_key_bytes += klen;
	b->props.raw_value_bytes += vlen;
	if (seq < b->props.min_seq)
		b->props.min_seq = seq;
	if (seq > b->props.max_seq)
		b->props.max_seq = seq;
	if (sst_bb_size(&b->data) >= b->o.block_size)
		return flush_data(b);
	return 0;
}

uint64_t sst_builder_entries(const struct sst_builder *b)
{
	return b->props.entries;
}

uint64_t sst_builder_bytes(const struct sst_builder *b)
{
	return b->off + sst_bb_size(&b->data);
}

/* Write everything after the data blocks, then the footer. */
static int write_tail(struct sst_builder *b)
{
	struct sst_footer f = {.version = SST_VERSION};
	uint8_t foot[SST_FOOTER_SIZE];
	uint8_t *buf = NULL;
	const uint8_t *raw;
	size_t n;
	int rc;

	rc = flush_data(b);
	if (rc)
		return rc;
	if (b->o.bloom_bits_per_key) {
		n = bloom_size(b->nhashes, b->o.bloom_bits_per_key);
		buf = malloc(n);
		if (!buf)
			return b->err = -ENOMEM;
		bloom_build(b->hashes, b->nhashes, b->o.bloom_bits_per_key, buf, n);
		rc = emit_block(b, buf, n, SST_NO_COMPRESSION, &f.filter);
		free(buf);
		if (rc)
			return rc;
	}
	if (b->props.entries) {
		b->props.largest = malloc(b->last_key.n ? b->last_key.n : 1);
		if (!b->props.largest)
			return b->err = -ENOMEM;
		if (b->last_key.n)
			memcpy(b->props.largest, b->last_key.p, b->last_key.n);
		b->props.largest_len = b->last_key.n;
	}
	rc = sst_props_encode(&b->props, &buf, &n);
	if (rc)
		return b->err = rc;
	rc = emit_block(b, buf, n, b->o.zstd_level, &f.props);
	free(buf);
	if (rc)
		return rc;
	rc = sst_bb_finish(&b->index, &raw, &n);
	if (rc)
		return b->err = rc;
	rc = emit_block(b, raw, n, b->o.zstd_level, &f.index);
	if (rc)
		return rc;
	sst_footer_encode(&f, foot);
	return emit(b, foot, sizeof(foot));
}

int sst_builder_finish(struct sst_builder *b, struct sst_props *props)
{
	int rc = b->err;

	if (!rc)
		rc = write_tail(b);
	if (rc)
		goto out;
	rc = store_writer_finish(b->w);
	b->w = NULL;
	if (rc) {
		log_err("sst: finishing upload of %s (%llu bytes): %s", b->key,
		        (unsigned long long)b->off, strerror(-rc));
		goto out;
	}
	if (props) {
		*props = b->props;
		props->file_size = b->off;
		memset(&b->props, 0, sizeof(b->props));
	}
out:
	sst_builder_abort(b);
	return rc;
}

void sst_builder_abort(struct sst_builder *b)
{
	if (!b)
		return;
	if (b->w)
		store_writer_abort(b->w);
	sst_bb_free(&b->data);
	sst_bb_free(&b->index);
	sst_buf_free(&b->last_key);
	sst_props_free(&b->props);
	free(b->hashes);
	free(b->key);
	free(b);
}
