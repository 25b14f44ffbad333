/*
 * bloom.c - bloom filters for SSTables (format in bloom.h and docs/SST.md).
 */
#include <string.h>
#include <xxhash.h>

#include "bloom.h"

uint64_t bloom_hash(const void *key, size_t len)
{
	return XXH3_64bits(key, len);
}

unsigned bloom_probes(unsigned bits_per_key)
{
	/* k = bits * ln(2) minimises the false-positive rate for a given size. */
	unsigned k = (unsigned)((double)bits_per_key * 0.69 + 0.5);

	if (k < 1)
		k = 1;
	if (k > BLOOM_MAX_PROBES)
		k = BLOOM_MAX_PROBES;
	return k;
}

size_t bloom_size(size_t nkeys, unsigned bits_per_key)
{
	size_t bits = nkeys * bits_per_key;

	/* Tiny filters have a poor false-positive rate: never below 64 bits. */
	if (bits < 64)
		bits = 64;
	return (bits + 7) / 8 + 1;
}

void bloom_build(const uint64_t *hashes, size_t n, unsigned bits_per_key, uint8_t *out, size_t len)
{
	uint64_t m = (uint64_t)(len - 1) * 8;
	unsigned k = bloom_probes(bits_per_key);

	memset(out, 0, len);
	out[len - 1] = (uint8_t)k;
	for (size_t i = 0; i < n; i++) {
		uint64_t h1 = (uint32_t)hashes[i];
		uint64_t h2 = (hashes[i] >> 32) | 1;
		uint64_t pos = h1 % m;
		uint64_t step = h2 % m;

		for (unsigned j = 0; j < k; j++) {
			out[pos / 8] |= (uint8_t)(1u << (pos % 8));
			pos += step;
			if (pos >= m)
				pos -= m;
		}
	}
}

bool bloom_valid(const uint8_t *f, size_t len)
{
	return len >= 9 && f[len - 1] >= 1 && f[len - 1] <= BLOOM_MAX_PROBES;
}

bool bloom_may_contain(const uint8_t *f, size_t len, uint64_t hash)
{
	uint64_t m, h1, h2, pos, step;
	unsigned k;

	if (!bloom_valid(f, len))
		return true;
	m = (uint64_t)(len - 1) * 8;
	k = f[len - 1];
	h1 = (uint32_t)hash;
	h2 = (hash >> 32) | 1;
	pos = h1 % m;
	step = h2 % m;
	for (unsigned j = 0; j < k; j++) {
		if (!(f[pos / 8] & (1u << (pos % 8))))
			return false;
		pos += step;
		if (pos >= m)
			pos -= m;
	}
	return true;
}
