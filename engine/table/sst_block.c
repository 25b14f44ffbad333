/*
 * sst_block.c - entry blocks of SSTables: builder and iterator (format in
 * sst_block.h and docs/SST.md).  Readers validate every length against the
 * block bounds: a malformed block makes the iterator invalid with -EUCLEAN,
 * never a read outside the block.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"
#include "grow.h"
#include "sst_block.h"

/* ---- growable buffer ---- */

int sst_buf_reserve(struct sst_buf *b, size_t n)
{
	if (n > SIZE_MAX - b->n)
		return -ENOMEM;
	return MW_GROW(b->p, b->cap, b->n + n, 256);
}

int sst_buf_append(struct sst_buf *b, const void *p, size_t n)
{
	int rc = sst_buf_reserve(b, n);

	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

void sst_buf_free(struct sst_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

/* ---- builder ---- */

void sst_bb_init(struct sst_block_builder *bb, unsigned interval)
{
	memset(bb, 0, sizeof(*bb));
	bb->interval = interval ? interval : 1;
}

void sst_bb_free(struct sst_block_builder *bb)
{
	sst_buf_free(&bb->data);
	sst_buf_free(&bb->last_key);
	free(bb->restarts);
	memset(bb, 0, sizeof(*bb));
}

void sst_bb_reset(struct sst_block_builder *bb)
{
	bb->data.n = 0;
	bb->last_key.n = 0;
	bb->nrestarts = 0;
	bb->since_restart = 0;
	bb->entries = 0;
	bb->last_seq = 0;
}

size_t sst_bb_size(const struct sst_block_builder *bb)
{
	return bb->data.n + 4 * bb->nrestarts + 4;
}

int sst_bb_add(struct sst_block_builder *bb, const void *key, size_t klen, uint64_t seq,
               enum kv_type type, const void *val, size_t vlen)
{
	uint8_t hdr[4 * VARINT64_MAX + 1];
	size_t shared = 0, h = 0;
	int rc;

	if (bb->entries == 0 || bb->since_restart >= bb->interval) {
		if (bb->nrestarts == bb->restarts_cap) {
			size_t cap = bb->restarts_cap ? 2 * bb->restarts_cap : 16;
			uint32_t *r = realloc(bb->restarts, cap * sizeof(*r));

			if (!r)
				return -ENOMEM;
			bb->restarts = r;
			bb->restarts_cap = cap;
		}
		bb->restarts[bb->nrestarts++] = (uint32_t)bb->data.n;
		bb->since_restart = 0;
	} else {
		size_t max = klen < bb->last_key.n ? klen : bb->last_key.n;

		while (shared < max && bb->last_key.p[shared] == ((const uint8_t *)key)[shared])
			shared++;
	}
	h += put_varint64(hdr + h, shared);
	h += put_varint64(hdr + h, klen - shared);
	h += put_varint64(hdr + h, vlen);
	h += put_varint64(hdr + h, seq);
	hdr[h++] = (uint8_t)type;
	rc = sst_buf_reserve(&bb->data, h + klen - shared + vlen);
	if (rc)
		return rc;
	sst_buf_append(&bb->data, hdr, h);
	sst_buf_append(&bb->data, (const uint8_t *)key + shared, klen - shared);
	sst_buf_append(&bb->data, val, vlen);
	bb->last_key.n = shared;
	rc = sst_buf_append(&bb->last_key, (const uint8_t *)key + shared, klen - shared);
	if (rc)
		return rc;
	bb->last_seq = seq;
	bb->since_restart++;
	bb->entries++;
	return 0;
}

int sst_bb_finish(struct sst_block_builder *bb, const uint8_t **out, size_t *len)
{
	int rc = sst_buf_reserve(&bb->data, 4 * bb->nrestarts + 4);

	if (rc)
		return rc;
	for (size_t i = 0; i < bb->nrestarts; i++) {
		put_be32(bb->data.p + bb->data.n, bb->restarts[i]);
		bb->data.n += 4;
	}
	put_be32(bb->data.p + bb->data.n, (uint32_t)bb->nrestarts);
	bb->data.n += 4;
	*out = bb->data.p;
	*len = bb->data.n;
	return 0;
}

/* ---- parsed block ---- */

int sst_block_parse(const uint8_t *data, size_t len, struct sst_block *b)
{
	uint32_t n, prev = 0;
	size_t end;

	if (len < 4)
		return -EUCLEAN;
	n = get_be32(data + len - 4);
	if (n > (len - 4) / 4)
		return -EUCLEAN;
	end = len - 4 - 4 * (size_t)n;
	if ((n == 0) != (end == 0))
		return -EUCLEAN;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t r = get_be32(data + end + 4 * (size_t)i);

		if (r >= end || (i == 0 && r != 0) || (i > 0 && r <= prev))
			return -EUCLEAN;
		prev = r;
	}
	b->data = data;
	b->entries_end = end;
	b->restarts = data + end;
	b->nrestarts = n;
	return 0;
}

static uint32_t restart_off(const struct sst_block *b, uint32_t i)
{
	return get_be32(b->restarts + 4 * (size_t)i);
}

/* Header of the entry at off: fills the fields; returns 0 or -EUCLEAN. */
struct raw_entry {
	uint64_t shared, unshared, vlen, seq; /* decoded varints */
	uint8_t type;                         /* entry type byte */
	const uint8_t *delta;                 /* key bytes after the shared prefix */
	const uint8_t *val;                   /* value bytes */
	size_t next;                          /* offset of the following entry */
};

static int decode_at(const struct sst_block *b, size_t off, struct raw_entry *e)
{
	const uint8_t *p = b->data + off, *end = b->data + b->entries_end;
	uint64_t *f[4] = {&e->shared, &e->unshared, &e->vlen, &e->seq};

	for (int i = 0; i < 4; i++) {
		size_t n = get_varint64(p, end, f[i]);

		if (!n)
			return -EUCLEAN;
		p += n;
	}
	if (p >= end)
		return -EUCLEAN;
	e->type = *p++;
	if (e->type > KV_BLOB)
		return -EUCLEAN;
	if (e->unshared > (uint64_t)(end - p) || e->vlen > (uint64_t)(end - p) - e->unshared)
		return -EUCLEAN;
	e->delta = p;
	e->val = p + e->unshared;
	e->next = (size_t)(e->val + e->vlen - b->data);
	return 0;
}

void sst_block_iter_init(struct sst_block_iter *it, const struct sst_block *b)
{
	memset(it, 0, sizeof(*it));
	it->b = b;
}

void sst_block_iter_free(struct sst_block_iter *it)
{
	sst_buf_free(&it->key);
	it->valid = false;
}

static void fail(struct sst_block_iter *it, int rc)
{
	it->valid = false;
	if (!it->status)
		it->status = rc;
}

/* Decode the entry at off into the iterator (the key buffer holds the previous key). */
static void load(struct sst_block_iter *it, size_t off)
{
	struct raw_entry e;
	int rc;

	if (off >= it->b->entries_end) {
		it->valid = false;
		return;
	}
	rc = decode_at(it->b, off, &e);
	if (!rc && e.shared > it->key.n)
		rc = -EUCLEAN;
	if (rc)
		return fail(it, rc);
	it->key.n = e.shared;
	rc = sst_buf_append(&it->key, e.delta, e.unshared);
	if (rc)
		return fail(it, rc);
	it->cur = off;
	it->next = e.next;
	it->seq = e.seq;
	it->type = (enum kv_type)e.type;
	it->val = e.val;
	it->vlen = e.vlen;
	it->valid = true;
	while (it->restart + 1 < it->b->nrestarts && restart_off(it->b, it->restart + 1) <= off)
		it->restart++;
}

static void seek_restart(struct sst_block_iter *it, uint32_t i)
{
	it->key.n = 0;
	it->restart = i;
	load(it, restart_off(it->b, i));
}

void sst_block_iter_seek_first(struct sst_block_iter *it)
{
	if (it->status)
		return;
	if (it->b->nrestarts == 0) {
		it->valid = false;
		return;
	}
	seek_restart(it, 0);
}

void sst_block_iter_next(struct sst_block_iter *it)
{
	if (!it->valid)
		return;
	load(it, it->next);
}

void sst_block_iter_seek(struct sst_block_iter *it, const void *key, size_t klen, uint64_t seq)
{
	uint32_t lo = 0, hi;

	if (it->status)
		return;
	if (it->b->nrestarts == 0) {
		it->valid = false;
		return;
	}
	/* Last restart whose key is < target (restart keys are stored whole). */
	hi = it->b->nrestarts - 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo + 1) / 2;
		struct raw_entry e;

		if (decode_at(it->b, restart_off(it->b, mid), &e) || e.shared != 0)
			return fail(it, -EUCLEAN);
		if (sst_internal_cmp(e.delta, e.unshared, e.seq, key, klen, seq) < 0)
			lo = mid;
		else
			hi = mid - 1;
	}
	seek_restart(it, lo);
	while (it->valid && sst_internal_cmp(it->key.p, it->key.n, it->seq, key, klen, seq) < 0)
		load(it, it->next);
}
