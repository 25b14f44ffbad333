/*
 * wal.c - the WAL entry codec.
 *
 * DESIGN (the full page is docs/WAL.md).
 *
 * The write-ahead log is a sequence of immutable objects wal/<position>,
 * position 0, 1, 2, ... with no holes.  Each object is one commit group:
 * every batch that joined the group, in the order the writer applied them
 * to the MemTable, each op with its sequence number implied (first_seq + its
 * index in the entry).  An entry is written with put_if_absent: the store
 * guarantees that exactly one writer owns a position, and the object is the
 * group's commit point.  Blob values are not in the entry: the op carries a
 * KV_BLOB descriptor naming pack/<epoch>-<position>, which the writer puts
 * (and has acknowledged) before the entry, so an entry never refers to bytes
 * that are not durable.
 *
 * The header carries the epoch of the writer, so replay can ignore an older
 * writer's entry that appears after a newer one, and a fence flag: a newer
 * writer claims the tip position with an empty fence entry so that an older
 * writer's next put_if_absent fails and it stops.
 *
 * Integrity: one checksum over the header, one over the body, plus the
 * lengths must match the object size exactly.  Objects are put atomically,
 * so a torn entry can only come from corruption; it fails decoding with
 * -EUCLEAN and the name of the object in the log.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "coding.h"
#include "format.h"
#include "log.h"
#include "wal.h"

int wal_entry_begin(struct mw_buf *b)
{
	int rc = mw_buf_reserve(b, WAL_HEADER_SIZE);
	if (rc)
		return rc;
	memset(b->p, 0, WAL_HEADER_SIZE);
	b->len = WAL_HEADER_SIZE;
	return 0;
}

int wal_entry_add_batch(struct mw_buf *b, uint32_t n)
{
	return mw_buf_varint(b, n);
}

size_t wal_op_size(size_t klen, size_t vlen)
{
	return 1 + varint64_len(klen) + klen + varint64_len(vlen) + vlen;
}

int wal_entry_add_op(struct mw_buf *b, enum kv_type type, const void *key, size_t klen,
                     const void *val, size_t vlen)
{
	int rc = mw_buf_reserve(b, wal_op_size(klen, vlen));
	if (rc)
		return rc;
	b->p[b->len++] = (uint8_t)type;
	b->len += put_varint64(b->p + b->len, klen);
	if (klen)
		memcpy(b->p + b->len, key, klen);
	b->len += klen;
	b->len += put_varint64(b->p + b->len, vlen);
	if (vlen)
		memcpy(b->p + b->len, val, vlen);
	b->len += vlen;
	return 0;
}

void wal_entry_seal(struct mw_buf *b, const struct wal_info *info)
{
	uint8_t *h = b->p;
	size_t body_len = b->len - WAL_HEADER_SIZE;

	put_be32(h + WAL_OFF_MAGIC, WAL_MAGIC);
	put_be16(h + WAL_OFF_VERSION, WAL_VERSION);
	put_be16(h + WAL_OFF_FLAGS, info->flags);
	put_be64(h + WAL_OFF_EPOCH, info->epoch);
	put_be64(h + WAL_OFF_POSITION, info->position);
	put_be64(h + WAL_OFF_FIRST_SEQ, info->first_seq);
	put_be32(h + WAL_OFF_OP_COUNT, info->op_count);
	put_be32(h + WAL_OFF_BATCH_COUNT, info->batch_count);
	put_be64(h + WAL_OFF_BODY_LEN, body_len);
	put_be64(h + WAL_OFF_BODY_HASH, fmt_hash(h + WAL_HEADER_SIZE, body_len));
	put_be64(h + WAL_OFF_HEAD_HASH, fmt_hash(h, WAL_OFF_HEAD_HASH));
}

int wal_entry_decode(const char *name, const void *buf, size_t len, uint64_t pos,
                     struct wal_info *info, const uint8_t **body, size_t *body_len)
{
	const uint8_t *h = buf;
	uint64_t blen;
	uint16_t ver;

	if (len < WAL_HEADER_SIZE) {
		log_err("wal: %s: truncated entry (%zu bytes, header is %d)", name, len,
		        WAL_HEADER_SIZE);
		return -EUCLEAN;
	}
	if (get_be32(h + WAL_OFF_MAGIC) != WAL_MAGIC) {
		log_err("wal: %s: bad magic 0x%08x", name, get_be32(h + WAL_OFF_MAGIC));
		return -EUCLEAN;
	}
	ver = get_be16(h + WAL_OFF_VERSION);
	if (ver > WAL_VERSION) {
		/* newer only if the header is intact: a flipped bit is damage, not a version */
		if (get_be64(h + WAL_OFF_HEAD_HASH) != fmt_hash(h, WAL_OFF_HEAD_HASH)) {
			log_err("wal: %s: header checksum mismatch (version field %u)", name, ver);
			return -EUCLEAN;
		}
		log_err("wal: %s: format version %u is newer than this program's %u", name, ver,
		        WAL_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (ver == 0) {
		log_err("wal: %s: bad format version 0", name);
		return -EUCLEAN;
	}
	if (get_be64(h + WAL_OFF_HEAD_HASH) != fmt_hash(h, WAL_OFF_HEAD_HASH)) {
		log_err("wal: %s: header checksum mismatch", name);
		return -EUCLEAN;
	}
	blen = get_be64(h + WAL_OFF_BODY_LEN);
	if (blen != len - WAL_HEADER_SIZE) {
		log_err("wal: %s: body length %" PRIu64
		        " but object holds %zu (torn or bad length)",
		        name, blen, len - WAL_HEADER_SIZE);
		return -EUCLEAN;
	}
	if (get_be64(h + WAL_OFF_BODY_HASH) != fmt_hash(h + WAL_HEADER_SIZE, blen)) {
		log_err("wal: %s: body checksum mismatch", name);
		return -EUCLEAN;
	}
	info->flags = get_be16(h + WAL_OFF_FLAGS);
	info->epoch = get_be64(h + WAL_OFF_EPOCH);
	info->position = get_be64(h + WAL_OFF_POSITION);
	info->first_seq = get_be64(h + WAL_OFF_FIRST_SEQ);
	info->op_count = get_be32(h + WAL_OFF_OP_COUNT);
	info->batch_count = get_be32(h + WAL_OFF_BATCH_COUNT);
	if (info->position != pos) {
		log_err("wal: %s: holds position %" PRIu64 ", expected %" PRIu64, name,
		        info->position, pos);
		return -EUCLEAN;
	}
	if ((info->flags & WAL_FLAG_FENCE) && (info->op_count || blen)) {
		log_err("wal: %s: fence entry with a body", name);
		return -EUCLEAN;
	}
	*body = h + WAL_HEADER_SIZE;
	*body_len = (size_t)blen;
	return 0;
}

void wal_cursor_init(struct wal_cursor *c, const uint8_t *body, size_t len, uint32_t batch_count)
{
	c->p = body;
	c->end = body + len;
	c->batches_left = batch_count;
	c->ops_in_batch = 0;
	c->batch_start = false;
	c->borrowed_ok = false;
}

int wal_op_next(struct wal_cursor *c, enum kv_type *type, const uint8_t **key, size_t *klen,
                const uint8_t **val, size_t *vlen)
{
	uint64_t n;
	size_t used;

	c->batch_start = false;
	while (c->ops_in_batch == 0) {
		if (c->batches_left == 0)
			return c->p == c->end ? 0 : -EUCLEAN;
		used = get_varint64(c->p, c->end, &n);
		if (!used)
			return -EUCLEAN;
		c->p += used;
		c->batches_left--;
		c->ops_in_batch = n;
		c->batch_start = true;
	}
	if (c->p >= c->end || (*c->p > KV_BLOB && !(c->borrowed_ok && *c->p == WAL_OP_BORROWED)))
		return -EUCLEAN;
	*type = (enum kv_type) * c->p++;
	used = get_varint64(c->p, c->end, &n);
	if (!used || n > (uint64_t)(c->end - c->p - used))
		return -EUCLEAN;
	c->p += used;
	*key = c->p;
	*klen = (size_t)n;
	c->p += n;
	used = get_varint64(c->p, c->end, &n);
	if (!used || n > (uint64_t)(c->end - c->p - used))
		return -EUCLEAN;
	c->p += used;
	*val = c->p;
	*vlen = (size_t)n;
	c->p += n;
	c->ops_in_batch--;
	if (*type == (enum kv_type)WAL_OP_BORROWED) {
		if (n != WAL_BORROWED_SIZE)
			return -EUCLEAN;
		const uint8_t *ref = *val; /* the caller's pointer and length */
		memcpy(val, ref, sizeof(*val));
		memcpy(vlen, ref + sizeof(*val), sizeof(*vlen));
		*type = KV_INLINE;
	}
	return 1;
}
