/*
 * test_bloom.c - unit tests of engine/table/bloom.c: no false negatives, the
 * false-positive rate at 10 bits per key over 100k keys, tiny and empty
 * filters, malformed encodings.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bloom.h"

static uint64_t key_hash(const char *pfx, unsigned i)
{
	char k[32];
	int n = snprintf(k, sizeof(k), "%s%08u", pfx, i);

	return bloom_hash(k, (size_t)n);
}

static double fp_rate(unsigned nkeys, unsigned bits)
{
	uint64_t *h = malloc(nkeys * sizeof(*h));
	size_t len = bloom_size(nkeys, bits);
	uint8_t *f = malloc(len);
	unsigned fp = 0;

	assert_non_null(h);
	assert_non_null(f);
	for (unsigned i = 0; i < nkeys; i++)
		h[i] = key_hash("key", i);
	bloom_build(h, nkeys, bits, f, len);
	for (unsigned i = 0; i < nkeys; i++)
		assert_true(bloom_may_contain(f, len, h[i])); /* no false negatives */
	for (unsigned i = 0; i < nkeys; i++)
		fp += bloom_may_contain(f, len, key_hash("absent", i));
	free(h);
	free(f);
	return (double)fp / nkeys;
}

static void test_fp_rate_100k(void **state)
{
	(void)state;
	double r10 = fp_rate(100000, 10), r6 = fp_rate(100000, 6), r16 = fp_rate(100000, 16);

	fprintf(stderr,
	        "bloom fp rate over 100k keys: 6 bits %.3f%%, 10 bits %.3f%%, "
	        "16 bits %.4f%%\n",
	        r6 * 100, r10 * 100, r16 * 100);
	assert_true(r10 < 0.015); /* theory: 0.82 % */
	assert_true(r10 > 0.002);
	assert_true(r6 < 0.07);   /* theory: 5.6 % */
	assert_true(r16 < 0.002); /* theory: 0.046 % */
	assert_true(r16 < r10 && r10 < r6);
}

static void test_small_and_empty(void **state)
{
	(void)state;
	uint64_t h = bloom_hash("x", 1);
	size_t len = bloom_size(0, 10);
	uint8_t f[64];

	assert_true(len == 9); /* 64 bits + probe byte */
	bloom_build(NULL, 0, 10, f, len);
	assert_false(bloom_may_contain(f, len, h));
	len = bloom_size(1, 10);
	bloom_build(&h, 1, 10, f, len);
	assert_true(bloom_may_contain(f, len, h));
	assert_int_equal(f[len - 1], bloom_probes(10));
	assert_int_equal(bloom_probes(10), 7);
	assert_int_equal(bloom_probes(1), 1);
	assert_int_equal(bloom_probes(100), BLOOM_MAX_PROBES);
}

static void test_malformed(void **state)
{
	(void)state;
	uint8_t f[16] = {0};

	/* Malformed filters exclude nothing (and never read out of bounds). */
	assert_false(bloom_valid(f, 16)); /* k = 0 */
	assert_true(bloom_may_contain(f, 16, 42));
	f[15] = 31;
	assert_false(bloom_valid(f, 16));
	assert_true(bloom_may_contain(f, 16, 42));
	assert_false(bloom_valid(f, 3));
	assert_true(bloom_may_contain(f, 3, 42));
	assert_true(bloom_may_contain(f, 0, 42));
	f[15] = 3;
	assert_true(bloom_valid(f, 16));
	assert_false(bloom_may_contain(f, 16, 42)); /* all bits clear */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fp_rate_100k),
	    cmocka_unit_test(test_small_and_empty),
	    cmocka_unit_test(test_malformed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
