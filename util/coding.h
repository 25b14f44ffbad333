/*
 * coding.h - the one byte order of every memwalfs format.
 *
 * Every integer that memwalfs writes to storage (WAL entries, packs, the
 * manifest, SSTables, filesystem keys and records) is encoded here, in
 * big-endian order, so that encoded keys compare with memcmp() in numeric
 * order.  Varints (LEB128, 7 bits per byte, low group first) are used only
 * inside record bodies, never in keys.  (Model: LevelDB util/coding.h.)
 *
 * All functions are pure and thread-safe.
 */
#ifndef MEMWALFS_CODING_H
#define MEMWALFS_CODING_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void put_be16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static inline void put_be64(uint8_t *p, uint64_t v)
{
	put_be32(p, (uint32_t)(v >> 32));
	put_be32(p + 4, (uint32_t)v);
}

static inline uint16_t get_be16(const uint8_t *p)
{
	return (uint16_t)((uint16_t)p[0] << 8 | p[1]);
}

static inline uint32_t get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t get_be64(const uint8_t *p)
{
	return (uint64_t)get_be32(p) << 32 | get_be32(p + 4);
}

/* Maximum encoded length of a 64-bit varint. */
#define VARINT64_MAX 10

/* Write v as a varint at p; returns the number of bytes written (1..10). */
static inline size_t put_varint64(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Encoded length of v as a varint. */
static inline size_t varint64_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/*
 * Decode a varint from [p, end).  On success stores the value in *v and
 * returns the number of bytes consumed; returns 0 when the input is
 * truncated or longer than 10 bytes (corrupt input, never a crash).
 */
static inline size_t get_varint64(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	for (size_t i = 0; i < VARINT64_MAX && p + i < end; i++) {
		uint64_t b = p[i];
		if (i == 9 && b > 1)
			return 0; /* would overflow 64 bits */
		r |= (b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*v = r;
			return i + 1;
		}
	}
	return 0;
}

#endif /* MEMWALFS_CODING_H */
