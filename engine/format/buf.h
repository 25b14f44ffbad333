/*
 * buf.h - a growable byte buffer used to build objects in memory (WAL
 * entries, packs, manifests).  Not thread-safe; the owner serialises use.
 */
#ifndef MEMWALFS_BUF_H
#define MEMWALFS_BUF_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"

struct mw_buf {
	uint8_t *p; /* bytes (malloc()ed, owned) */
	size_t len; /* bytes used */
	size_t cap; /* bytes allocated */
};

/* Make room for n more bytes.  -ENOMEM. */
static inline int mw_buf_reserve(struct mw_buf *b, size_t n)
{
	if (b->len + n <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + n)
		cap *= 2;
	uint8_t *p = realloc(b->p, cap);
	if (!p)
		return -ENOMEM;
	b->p = p;
	b->cap = cap;
	return 0;
}

/* Append n bytes.  -ENOMEM. */
static inline int mw_buf_append(struct mw_buf *b, const void *src, size_t n)
{
	int rc = mw_buf_reserve(b, n);
	if (rc)
		return rc;
	if (n)
		memcpy(b->p + b->len, src, n);
	b->len += n;
	return 0;
}

/* Append a varint.  -ENOMEM. */
static inline int mw_buf_varint(struct mw_buf *b, uint64_t v)
{
	int rc = mw_buf_reserve(b, VARINT64_MAX);
	if (rc)
		return rc;
	b->len += put_varint64(b->p + b->len, v);
	return 0;
}

/* Append a big-endian u64 / u32.  -ENOMEM. */
static inline int mw_buf_be64(struct mw_buf *b, uint64_t v)
{
	int rc = mw_buf_reserve(b, 8);
	if (rc)
		return rc;
	put_be64(b->p + b->len, v);
	b->len += 8;
	return 0;
}

static inline int mw_buf_be32(struct mw_buf *b, uint32_t v)
{
	int rc = mw_buf_reserve(b, 4);
	if (rc)
		return rc;
	put_be32(b->p + b->len, v);
	b->len += 4;
	return 0;
}

/* Free the bytes and reset to empty.  Accepts an empty buffer. */
static inline void mw_buf_free(struct mw_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}

#endif /* MEMWALFS_BUF_H */
