/*
 * bloom.h - the bloom filter of SSTables (engine/table/bloom.c).
 *
 * A filter answers "is this user key possibly in the table?" with no false
 * negatives and a false-positive rate set by the bits spent per key.  The
 * encoding (docs/SST.md, "Filter block") is a bit array followed by one byte
 * holding the number of probes k:
 *
 *     bits[m / 8]  k:u8          m = 8 * (len - 1), at least 64 bits
 *
 * Probe i of a key sets bit (h1 + i * h2) mod m, where h1 is the low and h2
 * the high half (forced odd) of the key's 64-bit XXH3 hash (double hashing,
 * Kirsch-Mitzenmacher).  Bit b lives in byte b / 8 at position b % 8.
 *
 * With 10 bits per key and k = 7 the expected false-positive rate is about
 * 0.8 % (measured by tests/unit/test_bloom.c and test_sst.c).
 *
 * All functions are pure and thread-safe.
 */
#ifndef MEMWALFS_BLOOM_H
#define MEMWALFS_BLOOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest number of probes a filter may carry; more is treated as corrupt. */
#define BLOOM_MAX_PROBES 30

/* The 64-bit hash of a key that bloom_build() and bloom_may_contain() take. */
uint64_t bloom_hash(const void *key, size_t len);

/* Number of probes for bits_per_key (round(bits * ln 2), clamped to 1..30). */
unsigned bloom_probes(unsigned bits_per_key);

/*
 * Encoded size in bytes (bit array plus the probe byte) of a filter over
 * nkeys keys at bits_per_key bits each.  bits_per_key must be >= 1.
 */
size_t bloom_size(size_t nkeys, unsigned bits_per_key);

/*
 * Build a filter over n key hashes (from bloom_hash()) into out, which must
 * hold exactly len = bloom_size(n, bits_per_key) bytes.  Cannot fail.
 */
void bloom_build(const uint64_t *hashes, size_t n, unsigned bits_per_key, uint8_t *out, size_t len);

/*
 * Returns false only if the key with this hash was certainly not added to
 * the filter [f, f + len).  A malformed filter (too short, k of 0 or above
 * BLOOM_MAX_PROBES) answers true: it can exclude nothing.
 */
bool bloom_may_contain(const uint8_t *f, size_t len, uint64_t hash);

/* Returns true when [f, f + len) is a well-formed filter encoding. */
bool bloom_valid(const uint8_t *f, size_t len);

#endif /* MEMWALFS_BLOOM_H */
