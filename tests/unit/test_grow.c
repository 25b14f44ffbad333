/*
 * test_grow.c - util/grow.c: the capacity doubles from the first one until the
 * need fits, contents survive growth, a need already met changes nothing,
 * and a size that would overflow is -ENOMEM with the array untouched.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "grow.h"

struct item {
	uint64_t a, b;
};

static void test_doubling(void **state)
{
	(void)state;
	struct item *v = NULL;
	size_t n = 0, cap = 0;
	assert_int_equal(MW_GROW(v, cap, 1, 4), 0);
	assert_int_equal(cap, 4);
	for (uint64_t i = 0; i < 1000; i++) {
		assert_int_equal(MW_GROW(v, cap, n + 1, 4), 0);
		assert_true(cap >= n + 1);
		v[n++] = (struct item){i, ~i};
	}
	assert_int_equal(cap, 1024); /* 4 doubled to the first power that holds 1000 */
	for (uint64_t i = 0; i < n; i++) {
		assert_int_equal(v[i].a, i);
		assert_int_equal(v[i].b, ~i);
	}
	free(v);
}

static void test_big_step_and_no_op(void **state)
{
	(void)state;
	char *p = NULL;
	size_t cap = 0;
	assert_int_equal(MW_GROW(p, cap, 5000, 128), 0); /* one call doubles as often as needed */
	assert_int_equal(cap, 8192);
	char *before = p;
	assert_int_equal(MW_GROW(p, cap, 8192, 128), 0); /* already fits: nothing moves */
	assert_ptr_equal(p, before);
	assert_int_equal(cap, 8192);
	assert_int_equal(MW_GROW(p, cap, 0, 128), 0);
	assert_int_equal(cap, 8192);
	free(p);

	size_t c0 = 0;
	int *q = NULL;
	assert_int_equal(MW_GROW(q, c0, 3, 0), 0); /* first 0 starts at 1 */
	assert_int_equal(c0, 4);
	free(q);
}

static void test_overflow(void **state)
{
	(void)state;
	struct item *v = NULL;
	size_t cap = 0;
	assert_int_equal(MW_GROW(v, cap, 2, 2), 0);
	struct item *before = v;
	assert_int_equal(MW_GROW(v, cap, SIZE_MAX / sizeof(*v) + 1, 2), -ENOMEM);
	assert_int_equal(MW_GROW(v, cap, SIZE_MAX, 2), -ENOMEM);
	assert_ptr_equal(v, before); /* unchanged on failure */
	assert_int_equal(cap, 2);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_doubling),
	    cmocka_unit_test(test_big_step_and_no_op),
	    cmocka_unit_test(test_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
