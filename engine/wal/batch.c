/*
 * batch.c - engine batches: an ordered list of puts and deletes applied
 * atomically by engine_write().  Ops are kept encoded as in a WAL body
 * (u8 type, varint klen, key, varint vlen, value), with every value inline
 * but for borrowed ones (WAL_OP_BORROWED: the value is the caller's pointer
 * and length, engine_batch_put_borrowed()); the writer turns large values
 * into blob descriptors when the batch joins a group, and copies borrowed
 * ones from the caller's memory then.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "format.h"
#include "wal.h"

int engine_batch_new(struct engine_batch **out)
{
	struct engine_batch *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	*out = b;
	return 0;
}

int engine_batch_put(struct engine_batch *b, const void *key, size_t klen, const void *val,
                     size_t vlen)
{
	int rc;

	if (!b || (!key && klen) || (!val && vlen) || klen == 0)
		return -EINVAL;
	rc = wal_entry_add_op(&b->rep, KV_INLINE, key, klen, val, vlen);
	if (rc)
		return rc;
	b->count++;
	b->bytes += klen + vlen;
	return 0;
}

int engine_batch_put_borrowed(struct engine_batch *b, const void *key, size_t klen, const void *val,
                              size_t vlen)
{
	uint8_t ref[WAL_BORROWED_SIZE];
	int rc;

	if (!b || !key || klen == 0 || (!val && vlen))
		return -EINVAL;
	memcpy(ref, &val, sizeof(val));
	memcpy(ref + sizeof(val), &vlen, sizeof(vlen));
	rc = wal_entry_add_op(&b->rep, (enum kv_type)WAL_OP_BORROWED, key, klen, ref, sizeof(ref));
	if (rc)
		return rc;
	b->count++;
	b->bytes += klen + vlen;
	return 0;
}

int engine_batch_put_ref(struct engine_batch *b, const void *key, size_t klen,
                         const struct engine_ref *r, uint64_t off, uint64_t len)
{
	uint8_t small[BLOB_DESC_FIXED + 8 * 32];
	struct blob_desc d, s;
	uint8_t *desc;
	size_t dn;
	int rc;

	if (!b || !key || klen == 0 || !r)
		return -EINVAL;
	if (!r->blob) {
		if (off > r->n || len > r->n - off)
			return -EINVAL;
		return engine_batch_put(b, key, klen, (const uint8_t *)r->p + off, (size_t)len);
	}
	if ((rc = blob_desc_decode(r->p, r->n, &d)))
		return rc;
	if (off > d.length || len > d.length - off)
		return -EINVAL;
	blob_desc_slice(&d, off, len, &s);
	dn = blob_desc_size(&s);
	desc = dn <= sizeof(small) ? small : malloc(dn);
	if (!desc)
		return -ENOMEM;
	blob_desc_encode(desc, &s);
	rc = wal_entry_add_op(&b->rep, KV_BLOB, key, klen, desc, dn);
	if (desc != small)
		free(desc);
	if (rc)
		return rc;
	b->count++;
	b->bytes += klen + dn;
	return 0;
}

int engine_batch_delete(struct engine_batch *b, const void *key, size_t klen)
{
	int rc;

	if (!b || !key || klen == 0)
		return -EINVAL;
	rc = wal_entry_add_op(&b->rep, KV_DELETE, key, klen, NULL, 0);
	if (rc)
		return rc;
	b->count++;
	b->bytes += klen;
	return 0;
}

size_t engine_batch_count(const struct engine_batch *b)
{
	return b ? b->count : 0;
}

void engine_batch_clear(struct engine_batch *b)
{
	if (!b)
		return;
	b->rep.len = 0;
	b->count = 0;
	b->bytes = 0;
}

void engine_batch_get_mark(const struct engine_batch *b, struct engine_batch_mark *m)
{
	m->len = b->rep.len;
	m->count = b->count;
	m->bytes = b->bytes;
}

void engine_batch_rewind(struct engine_batch *b, const struct engine_batch_mark *m)
{
	if (m->len > b->rep.len)
		return;
	b->rep.len = m->len;
	b->count = m->count;
	b->bytes = m->bytes;
}

void engine_batch_free(struct engine_batch *b)
{
	if (!b)
		return;
	mw_buf_free(&b->rep);
	free(b);
}
