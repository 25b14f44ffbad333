/*
 * sst_props.c - the properties block of an SSTable: a list of tagged
 * fields (tag:varint len:varint bytes[len]) so that new properties can be
 * added without a new format version; readers skip tags they do not know.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"
#include "sst.h"
#include "sst_block.h"

void sst_props_free(struct sst_props *p)
{
	if (!p)
		return;
	free(p->smallest);
	free(p->largest);
	free(p->packs);
	memset(p, 0, sizeof(*p));
}

static int put_field(struct sst_buf *b, unsigned tag, const void *v, size_t n)
{
	uint8_t h[2 * VARINT64_MAX];
	size_t hl = put_varint64(h, tag);
	int rc;

	hl += put_varint64(h + hl, n);
	rc = sst_buf_append(b, h, hl);
	return rc ? rc : sst_buf_append(b, v, n);
}

static int put_num(struct sst_buf *b, unsigned tag, uint64_t v)
{
	uint8_t t[VARINT64_MAX];

	return put_field(b, tag, t, put_varint64(t, v));
}

int sst_props_encode(const struct sst_props *p, uint8_t **out, size_t *len)
{
	struct sst_buf b = {0};
	const struct {
		unsigned tag;
		uint64_t v;
	} nums[] = {
	    {SST_PROP_ENTRIES, p->entries},
	    {SST_PROP_DELETES, p->deletes},
	    {SST_PROP_BLOBS, p->blobs},
	    {SST_PROP_KEYS, p->keys},
	    {SST_PROP_MIN_SEQ, p->min_seq},
	    {SST_PROP_MAX_SEQ, p->max_seq},
	    {SST_PROP_DATA_BLOCKS, p->data_blocks},
	    {SST_PROP_RAW_KEY_BYTES, p->raw_key_bytes},
	    {SST_PROP_RAW_VALUE_BYTES, p->raw_value_bytes},
	    {SST_PROP_BLOB_BYTES, p->blob_bytes},
	    {SST_PROP_BLOOM_BITS, p->bloom_bits},
	};
	int rc = 0;

	for (size_t i = 0; !rc && i < sizeof(nums) / sizeof(nums[0]); i++)
		rc = put_num(&b, nums[i].tag, nums[i].v);
	if (!rc && p->smallest)
		rc = put_field(&b, SST_PROP_SMALLEST, p->smallest, p->smallest_len);
	if (!rc && p->largest)
		rc = put_field(&b, SST_PROP_LARGEST, p->largest, p->largest_len);
	for (size_t i = 0; !rc && i < p->npacks; i++) {
		uint8_t f[1 + SST_PACK_ID_MAX + VARINT64_MAX];
		size_t n = put_varint64(f, p->packs[i].idlen);

		memcpy(f + n, p->packs[i].id, p->packs[i].idlen);
		n += p->packs[i].idlen;
		n += put_varint64(f + n, p->packs[i].bytes);
		rc = put_field(&b, SST_PROP_PACK_REF, f, n);
	}
	if (!rc && !b.p)
		rc = sst_buf_reserve(&b, 1);
	if (rc) {
		sst_buf_free(&b);
		return rc;
	}
	*out = b.p;
	*len = b.n;
	return 0;
}

static int dup_bytes(const uint8_t *v, size_t n, uint8_t **out, size_t *outlen)
{
	uint8_t *p = malloc(n ? n : 1);

	if (!p)
		return -ENOMEM;
	if (n)
		memcpy(p, v, n);
	free(*out);
	*out = p;
	*outlen = n;
	return 0;
}

static int add_pack(struct sst_props *p, const uint8_t *v, size_t n)
{
	struct sst_pack_ref ref = {0};
	uint64_t idlen;
	size_t a, b;
	struct sst_pack_ref *np;

	a = get_varint64(v, v + n, &idlen);
	if (!a || idlen < 1 || idlen > SST_PACK_ID_MAX || idlen > n - a)
		return -EUCLEAN;
	memcpy(ref.id, v + a, idlen);
	ref.idlen = (uint8_t)idlen;
	b = get_varint64(v + a + idlen, v + n, &ref.bytes);
	if (!b || a + idlen + b != n)
		return -EUCLEAN;
	np = realloc(p->packs, (p->npacks + 1) * sizeof(*np));
	if (!np)
		return -ENOMEM;
	p->packs = np;
	p->packs[p->npacks++] = ref;
	return 0;
}

int sst_props_decode(const uint8_t *buf, size_t n, struct sst_props *p)
{
	const uint8_t *q = buf, *end = buf + n;
	int rc = 0;

	memset(p, 0, sizeof(*p));
	while (!rc && q < end) {
		uint64_t tag, len, v = 0;
		size_t a, b;

		a = get_varint64(q, end, &tag);
		b = a ? get_varint64(q + a, end, &len) : 0;
		if (!b || len > (uint64_t)(end - q - a - b)) {
			rc = -EUCLEAN;
			break;
		}
		q += a + b;
		if (tag < SST_PROP_SMALLEST || tag == SST_PROP_DATA_BLOCKS ||
		    (tag >= SST_PROP_RAW_KEY_BYTES && tag <= SST_PROP_BLOB_BYTES) ||
		    tag == SST_PROP_BLOOM_BITS) {
			if (len == 0 || get_varint64(q, q + len, &v) != len) {
				rc = -EUCLEAN;
				break;
			}
		}
		switch (tag) {
		case SST_PROP_ENTRIES:
			p->entries = v;
			break;
		case SST_PROP_DELETES:
			p->deletes = v;
			break;
		case SST_PROP_BLOBS:
			p->blobs = v;
			break;
		case SST_PROP_KEYS:
			p->keys = v;
			break;
		case SST_PROP_MIN_SEQ:
			p->min_seq = v;
			break;
		case SST_PROP_MAX_SEQ:
			p->max_seq = v;
			break;
		case SST_PROP_DATA_BLOCKS:
			p->data_blocks = v;
			break;
		case SST_PROP_RAW_KEY_BYTES:
			p->raw_key_bytes = v;
			break;
		case SST_PROP_RAW_VALUE_BYTES:
			p->raw_value_bytes = v;
			break;
		case SST_PROP_BLOB_BYTES:
			p->blob_bytes = v;
			break;
		case SST_PROP_BLOOM_BITS:
			if (v > 1000)
				rc = -EUCLEAN;
			p->bloom_bits = (unsigned)v;
			break;
		case SST_PROP_SMALLEST:
			rc = dup_bytes(q, len, &p->smallest, &p->smallest_len);
			break;
		case SST_PROP_LARGEST:
			rc = dup_bytes(q, len, &p->largest, &p->largest_len);
			break;
		case SST_PROP_PACK_REF:
			rc = add_pack(p, q, len);
			break;
		default:
			break; /* a property of a later writer: skip it */
		}
		q += len;
	}
	if (rc)
		sst_props_free(p);
	return rc;
}
