/*
 * sst_format.c - encoding and checking of the fixed parts of an SSTable:
 * header, footer, block trailers and handles (layout in sst_format.h and
 * docs/SST.md).  Pure functions, thread-safe.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "coding.h"
#include "sst_format.h"

const char *sst_fault_str(enum sst_fault f)
{
	switch (f) {
	case SST_OK:
		return "ok";
	case SST_TRUNCATED:
		return "truncated";
	case SST_BAD_MAGIC:
		return "bad magic";
	case SST_NEWER_VERSION:
		return "newer format version";
	case SST_BAD_CHECKSUM:
		return "checksum mismatch";
	case SST_BAD_LAYOUT:
		return "impossible offsets or lengths";
	case SST_BAD_COMPRESSION:
		return "bad compression";
	}
	return "unknown fault";
}

void sst_header_encode(uint8_t *p)
{
	put_be64(p, SST_MAGIC);
	put_be32(p + 8, SST_VERSION);
	put_be32(p + 12, 0);
}

enum sst_fault sst_header_decode(const uint8_t *p)
{
	if (get_be64(p) != SST_MAGIC)
		return SST_BAD_MAGIC;
	if (get_be32(p + 8) > SST_VERSION)
		return SST_NEWER_VERSION;
	if (get_be32(p + 8) == 0 || get_be32(p + 12) != 0)
		return SST_BAD_LAYOUT;
	return SST_OK;
}

static void put_handle(uint8_t *p, const struct sst_handle *h)
{
	put_be64(p, h->off);
	put_be64(p + 8, h->size);
}

static void get_handle(const uint8_t *p, struct sst_handle *h)
{
	h->off = get_be64(p);
	h->size = get_be64(p + 8);
}

void sst_footer_encode(const struct sst_footer *f, uint8_t *p)
{
	put_handle(p, &f->index);
	put_handle(p + 16, &f->filter);
	put_handle(p + 32, &f->props);
	put_be32(p + 48, f->version);
	put_be32(p + 52, f->flags);
	put_be64(p + 56, XXH3_64bits(p, 56));
	put_be64(p + 64, SST_MAGIC);
}

/* A block [off, off + size + trailer) must lie between header and footer. */
static bool handle_ok(const struct sst_handle *h, uint64_t objsize)
{
	uint64_t end = objsize - SST_FOOTER_SIZE;

	if (h->off < SST_HEADER_SIZE || h->off > end)
		return false;
	if (h->size > SST_BLOCK_RAW_MAX + (uint64_t)SST_BLOCK_RAW_MAX / 8)
		return false;
	return h->size + SST_TRAILER_SIZE <= end - h->off;
}

enum sst_fault sst_footer_decode(const uint8_t *p, uint64_t objsize, struct sst_footer *f)
{
	struct sst_footer t;

	if (objsize < SST_HEADER_SIZE + SST_FOOTER_SIZE)
		return SST_TRUNCATED;
	if (get_be64(p + 64) != SST_MAGIC)
		return SST_BAD_MAGIC;
	/* the checksum first: a flipped version bit is damage, not a newer version */
	if (get_be64(p + 56) != XXH3_64bits(p, 56))
		return SST_BAD_CHECKSUM;
	t.version = get_be32(p + 48);
	if (t.version > SST_VERSION)
		return SST_NEWER_VERSION;
	get_handle(p, &t.index);
	get_handle(p + 16, &t.filter);
	get_handle(p + 32, &t.props);
	t.flags = get_be32(p + 52);
	if (t.version == 0 || t.flags != 0)
		return SST_BAD_LAYOUT;
	if (!handle_ok(&t.index, objsize) || !handle_ok(&t.props, objsize))
		return SST_BAD_LAYOUT;
	if ((t.filter.off || t.filter.size) && !handle_ok(&t.filter, objsize))
		return SST_BAD_LAYOUT;
	*f = t;
	return SST_OK;
}

static uint64_t block_sum(const uint8_t *payload, size_t n, uint8_t ctype, uint32_t raw_len)
{
	return XXH3_64bits_withSeed(payload, n, (uint64_t)ctype << 32 | raw_len);
}

int sst_block_seal(const uint8_t *raw, size_t n, int level, uint8_t **out, size_t *outlen)
{
	uint8_t *buf = NULL, *t;
	size_t plen = n;
	uint8_t ctype = SST_CTYPE_RAW;

	if (n > SST_BLOCK_RAW_MAX)
		return -EINVAL;
	if (level != SST_NO_COMPRESSION && n >= 64) {
		size_t bound = ZSTD_compressBound(n);
		size_t c;

		buf = malloc(bound + SST_TRAILER_SIZE);
		if (!buf)
			return -ENOMEM;
		c = ZSTD_compress(buf, bound, raw, n, level);
		/* Keep it only when it saves at least an eighth. */
		if (!ZSTD_isError(c) && c < n - n / 8) {
			plen = c;
			ctype = SST_CTYPE_ZSTD;
		}
	}
	if (ctype == SST_CTYPE_RAW) {
		uint8_t *nb = realloc(buf, n + SST_TRAILER_SIZE);

		if (!nb) {
			free(buf);
			return -ENOMEM;
		}
		buf = nb;
		if (n)
			memcpy(buf, raw, n);
	}
	t = buf + plen;
	t[0] = ctype;
	put_be32(t + 1, (uint32_t)n);
	put_be64(t + 5, block_sum(buf, plen, ctype, (uint32_t)n));
	*out = buf;
	*outlen = plen + SST_TRAILER_SIZE;
	return 0;
}

int sst_block_unseal(const uint8_t *buf, size_t n, uint8_t **raw, size_t *rawlen,
                     enum sst_fault *fault)
{
	const uint8_t *t;
	size_t plen;
	uint32_t raw_len;
	uint8_t ctype, *r;

	if (n < SST_TRAILER_SIZE) {
		*fault = SST_TRUNCATED;
		return -EUCLEAN;
	}
	plen = n - SST_TRAILER_SIZE;
	t = buf + plen;
	ctype = t[0];
	raw_len = get_be32(t + 1);
	if (get_be64(t + 5) != block_sum(buf, plen, ctype, raw_len)) {
		*fault = SST_BAD_CHECKSUM;
		return -EUCLEAN;
	}
	if (raw_len > SST_BLOCK_RAW_MAX) {
		*fault = SST_BAD_LAYOUT;
		return -EUCLEAN;
	}
	if (ctype == SST_CTYPE_RAW && raw_len != plen) {
		*fault = SST_BAD_LAYOUT;
		return -EUCLEAN;
	}
	if (ctype != SST_CTYPE_RAW && ctype != SST_CTYPE_ZSTD) {
		*fault = SST_BAD_COMPRESSION;
		return -EUCLEAN;
	}
	r = malloc(raw_len ? raw_len : 1);
	if (!r)
		return -ENOMEM;
	if (ctype == SST_CTYPE_RAW) {
		if (raw_len)
			memcpy(r, buf, raw_len);
	} else {
		size_t got = ZSTD_decompress(r, raw_len, buf, plen);

		if (ZSTD_isError(got) || got != raw_len) {
			free(r);
			*fault = SST_BAD_COMPRESSION;
			return -EUCLEAN;
		}
	}
	*raw = r;
	*rawlen = raw_len;
	return 0;
}

size_t sst_handle_encode(const struct sst_handle *h, uint8_t *p)
{
	size_t n = put_varint64(p, h->off);

	return n + put_varint64(p + n, h->size);
}

size_t sst_handle_decode(const uint8_t *p, const uint8_t *end, struct sst_handle *h)
{
	size_t a, b;

	a = get_varint64(p, end, &h->off);
	if (!a)
		return 0;
	b = get_varint64(p + a, end, &h->size);
	if (!b)
		return 0;
	return a + b;
}
