/*
 * format.c - object names, the checksum and the blob descriptor codec
 * shared by every engine format (format.h, docs/WAL.md, docs/PACKS.md).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "coding.h"
#include "format.h"

uint64_t fmt_hash(const void *p, size_t n)
{
	return (uint64_t)XXH3_64bits(p, n);
}

uint64_t blob_desc_first_block(const struct blob_desc *d)
{
	return d->start / BLOB_BLOCK_SIZE;
}

uint64_t blob_desc_nblocks(const struct blob_desc *d)
{
	if (d->length == 0)
		return 0;
	return (d->start + d->length - 1) / BLOB_BLOCK_SIZE - d->start / BLOB_BLOCK_SIZE + 1;
}

size_t blob_desc_size(const struct blob_desc *d)
{
	return BLOB_DESC_FIXED + 8 * (size_t)blob_desc_nblocks(d);
}

size_t blob_desc_size_for(uint64_t len)
{
	struct blob_desc d = {.blob_len = len, .length = len};

	return blob_desc_size(&d);
}

void blob_desc_encode(uint8_t *p, const struct blob_desc *d)
{
	size_t nh = (size_t)blob_desc_nblocks(d);

	p[BLOB_OFF_KIND] = BLOB_DESC_KIND;
	put_be64(p + BLOB_OFF_EPOCH, d->epoch);
	put_be64(p + BLOB_OFF_POSITION, d->position);
	put_be64(p + BLOB_OFF_OFFSET, d->offset);
	put_be64(p + BLOB_OFF_BLOB_LEN, d->blob_len);
	put_be64(p + BLOB_OFF_START, d->start);
	put_be64(p + BLOB_OFF_LENGTH, d->length);
	if (nh && d->hashes != p + BLOB_OFF_HASHES)
		memmove(p + BLOB_OFF_HASHES, d->hashes, 8 * nh);
}

int blob_desc_decode(const void *vp, size_t n, struct blob_desc *d)
{
	const uint8_t *p = vp;

	if (n >= 1 && p[BLOB_OFF_KIND] == BLOB_DESC_KIND_V1)
		return -EPROTONOSUPPORT;
	if (n < BLOB_DESC_FIXED || p[BLOB_OFF_KIND] != BLOB_DESC_KIND)
		return -EUCLEAN;
	d->epoch = get_be64(p + BLOB_OFF_EPOCH);
	d->position = get_be64(p + BLOB_OFF_POSITION);
	d->offset = get_be64(p + BLOB_OFF_OFFSET);
	d->blob_len = get_be64(p + BLOB_OFF_BLOB_LEN);
	d->start = get_be64(p + BLOB_OFF_START);
	d->length = get_be64(p + BLOB_OFF_LENGTH);
	d->hashes = p + BLOB_OFF_HASHES;
	if (d->start > d->blob_len || d->length > d->blob_len - d->start ||
	    d->offset > UINT64_MAX - d->blob_len || n != blob_desc_size(d))
		return -EUCLEAN;
	return 0;
}

void blob_desc_blocks(const struct blob_desc *d, uint64_t off, uint64_t len, uint64_t *from,
                      uint64_t *to)
{
	uint64_t last = (d->start + off + len - 1) / BLOB_BLOCK_SIZE;
	uint64_t end = (last + 1) * BLOB_BLOCK_SIZE;

	*from = (d->start + off) / BLOB_BLOCK_SIZE * BLOB_BLOCK_SIZE;
	*to = end < d->blob_len ? end : d->blob_len;
}

int blob_desc_verify(const struct blob_desc *d, uint64_t from, const uint8_t *buf, uint64_t n,
                     uint64_t *bad)
{
	uint64_t fb = blob_desc_first_block(d);

	for (uint64_t pos = 0; pos < n; pos += BLOB_BLOCK_SIZE) {
		uint64_t b = (from + pos) / BLOB_BLOCK_SIZE;
		size_t bl = n - pos < BLOB_BLOCK_SIZE ? (size_t)(n - pos) : BLOB_BLOCK_SIZE;
		if (b < fb || b - fb >= blob_desc_nblocks(d) ||
		    fmt_hash(buf + pos, bl) != get_be64(d->hashes + 8 * (b - fb))) {
			*bad = from + pos;
			return -EUCLEAN;
		}
	}
	return 0;
}

void blob_desc_slice(const struct blob_desc *d, uint64_t off, uint64_t len, struct blob_desc *out)
{
	struct blob_desc s = *d;

	s.start = d->start + off;
	s.length = len;
	s.hashes = d->hashes + 8 * (blob_desc_first_block(&s) - blob_desc_first_block(d));
	*out = s;
}

void fmt_wal_name(char *buf, uint64_t position)
{
	snprintf(buf, FMT_NAME_MAX, FMT_WAL_PREFIX "%020" PRIu64, position);
}

void fmt_pack_name(char *buf, uint64_t epoch, uint64_t position)
{
	snprintf(buf, FMT_NAME_MAX, FMT_PACK_PREFIX "%020" PRIu64 "-%020" PRIu64, epoch, position);
}

void fmt_manifest_name(char *buf, uint64_t version)
{
	snprintf(buf, FMT_NAME_MAX, FMT_MANIFEST_PREFIX "%020" PRIu64, version);
}

/* Parse exactly 20 decimal digits after prefix. */
static int parse_num(const char *name, const char *prefix, uint64_t *out)
{
	size_t pl = strlen(prefix);
	uint64_t v = 0;

	if (strncmp(name, prefix, pl) != 0)
		return -EINVAL;
	name += pl;
	for (int i = 0; i < 20; i++) {
		if (name[i] < '0' || name[i] > '9')
			return -EINVAL;
		uint64_t d = (uint64_t)(name[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -EINVAL;
		v = v * 10 + d;
	}
	if (name[20] != '\0')
		return -EINVAL;
	*out = v;
	return 0;
}

int fmt_parse_wal_name(const char *name, uint64_t *position)
{
	return parse_num(name, FMT_WAL_PREFIX, position);
}

int fmt_parse_manifest_name(const char *name, uint64_t *version)
{
	return parse_num(name, FMT_MANIFEST_PREFIX, version);
}

void fmt_region_prefix(char *buf, uint32_t rid)
{
	if (rid == 0)
		buf[0] = '\0';
	else
		snprintf(buf, FMT_REGION_PREFIX_MAX, "r/%" PRIu32 "/", rid);
}

uint32_t fmt_parse_region_prefix(const char *name)
{
	uint32_t rid = 0;
	const char *p = name + 2;

	if (strncmp(name, "r/", 2) != 0 || *p < '1' || *p > '9')
		return 0;
	for (; *p >= '0' && *p <= '9'; p++) {
		rid = rid * 10 + (uint32_t)(*p - '0');
		if (rid >= 1u << 23)
			return 0;
	}
	return *p == '/' ? rid : 0;
}

void fmt_holder_name(char *buf, uint32_t rid, uint64_t epoch)
{
	char p[FMT_REGION_PREFIX_MAX];

	fmt_region_prefix(p, rid);
	snprintf(buf, FMT_NAME_MAX, "%s" FMT_HOLDER_PREFIX "%020" PRIu64, p, epoch);
}

int fmt_parse_holder_name(const char *name, uint64_t *epoch)
{
	return parse_num(name, FMT_HOLDER_PREFIX, epoch);
}

void fmt_regions_name(char *buf, uint64_t version)
{
	snprintf(buf, FMT_NAME_MAX, FMT_REGIONS_PREFIX "%020" PRIu64, version);
}

int fmt_parse_regions_name(const char *name, uint64_t *version)
{
	return parse_num(name, FMT_REGIONS_PREFIX, version);
}
