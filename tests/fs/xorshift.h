/*
 * xorshift.h - the one pseudo-random generator of the tests/fs programs
 * (datamodel.c, crashwrite.c): xorshift64, so a printed seed replays a run
 * exactly on any machine.
 */
#ifndef MEMWALFS_TESTS_FS_XORSHIFT_H
#define MEMWALFS_TESTS_FS_XORSHIFT_H

#include <stdint.h>

/* Advance state *s (never 0) and return the new value. */
static inline uint64_t xorshift64(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

#endif /* MEMWALFS_TESTS_FS_XORSHIFT_H */
