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

void blob_desc_encode(uint8_t *p, const struct blob_desc *d)
{
	p[BLOB_OFF_KIND] = BLOB_DESC_KIND;
	put_be64(p + BLOB_OFF_EPOCH, d->epoch);
	put_be64(p + BLOB_OFF_POSITION, d->position);
	put_be64(p + BLOB_OFF_OFFSET, d->offset);
	put_be64(p + BLOB_OFF_LENGTH, d->length);
	put_be64(p + BLOB_OFF_HASH, d->hash);
}

int blob_desc_decode(const void *vp, size_t n, struct blob_desc *d)
{
	const uint8_t *p = vp;

	if (n != BLOB_DESC_SIZE || p[BLOB_OFF_KIND] != BLOB_DESC_KIND)
		return -EUCLEAN;
	d->epoch = get_be64(p + BLOB_OFF_EPOCH);
	d->position = get_be64(p + BLOB_OFF_POSITION);
	d->offset = get_be64(p + BLOB_OFF_OFFSET);
	d->length = get_be64(p + BLOB_OFF_LENGTH);
	d->hash = get_be64(p + BLOB_OFF_HASH);
	return 0;
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
