/*
 * test_bigbuf.c - util/bigbuf.c: slot-sized requests take page-aligned slots
 * that are handed out again after bigbuf_put() (the last freed first) without
 * touching more memory; small, larger and surplus requests are served by
 * malloc() and given back through the same call; the counters say which; and
 * threads taking and giving back slots at once never share one.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bigbuf.h"

#define MiB ((size_t)1 << 20)

static void test_slots_used_again(void **state)
{
	(void)state;
	struct bigbuf_pool *p = NULL;
	struct bigbuf_stats st;
	assert_int_equal(bigbuf_pool_new(MiB, 4 * MiB, &p), 0);
	assert_int_equal(bigbuf_slot_bytes(p), MiB);
	uint8_t *a = bigbuf_get(p, MiB);
	uint8_t *b = bigbuf_get(p, MiB / 2 + 1);
	assert_non_null(a);
	assert_non_null(b);
	assert_true(((uintptr_t)a & 4095) == 0 && ((uintptr_t)b & 4095) == 0);
	assert_true(a + MiB <= b || b + MiB <= a);
	memset(a, 1, MiB);
	memset(b, 2, MiB / 2 + 1);
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.in_use, 2);
	assert_int_equal(st.touched, 2);
	assert_int_equal(st.slots, 4);
	bigbuf_put(p, a);
	uint8_t *c = bigbuf_get(p, MiB);
	assert_ptr_equal(c, a);          /* the last freed first */
	assert_int_equal(c[MiB - 1], 1); /* the same memory, not a fresh page */
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.touched, 2);
	assert_int_equal(st.in_use, 2);
	bigbuf_put(p, b);
	bigbuf_put(p, c);
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.fallbacks, 0);
	bigbuf_pool_free(p);
}

static void test_outside_the_pool(void **state)
{
	(void)state;
	struct bigbuf_pool *p = NULL;
	struct bigbuf_stats st;
	assert_int_equal(bigbuf_pool_new(MiB, 2 * MiB, &p), 0);
	/* at most half a slot, or more than one: malloc(), given back all the same */
	uint8_t *small = bigbuf_get(p, 100);
	uint8_t *half = bigbuf_get(p, MiB / 2);
	uint8_t *big = bigbuf_get(p, MiB + 1);
	assert_non_null(small);
	assert_non_null(half);
	assert_non_null(big);
	assert_true(((uintptr_t)half & 4095) == 0 && ((uintptr_t)big & 4095) == 0);
	memset(small, 3, 100);
	memset(half, 3, MiB / 2);
	memset(big, 3, MiB + 1);
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.in_use, 0);
	assert_int_equal(st.touched, 0);
	/* more slot-sized requests than slots: the surplus is malloc()ed and counted */
	uint8_t *s[3];
	for (int i = 0; i < 3; i++) {
		s[i] = bigbuf_get(p, MiB);
		assert_non_null(s[i]);
		memset(s[i], i, MiB);
	}
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.in_use, 2);
	assert_int_equal(st.fallbacks, 1);
	for (int i = 0; i < 3; i++)
		bigbuf_put(p, s[i]);
	bigbuf_put(p, small);
	bigbuf_put(p, half);
	bigbuf_put(p, big);
	bigbuf_put(p, NULL);
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.in_use, 0);
	bigbuf_pool_free(p);
	/* no pool at all: malloc() */
	uint8_t *x = bigbuf_get(NULL, MiB);
	assert_non_null(x);
	memset(x, 4, MiB);
	bigbuf_put(NULL, x);
	bigbuf_pool_stats(NULL, &st);
	assert_int_equal(st.slots, 0);
	assert_int_equal(bigbuf_slot_bytes(NULL), 0);
	assert_int_equal(bigbuf_pool_new(0, MiB, &p), -EINVAL);
}

struct worker {
	struct bigbuf_pool *p;
	unsigned id;
	int bad;
};

/* Take two slots, stamp them with the thread's id, check the stamps, give them back. */
static void *churn(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < 2000 && !w->bad; i++) {
		uint8_t *a = bigbuf_get(w->p, MiB), *b = bigbuf_get(w->p, 3 * MiB / 4);
		if (!a || !b) {
			w->bad = 1;
			break;
		}
		memset(a, (int)w->id, 4096);
		memset(b, (int)w->id, 4096);
		for (size_t k = 0; k < 4096; k += 511)
			if (a[k] != w->id || b[k] != w->id)
				w->bad = 1;
		bigbuf_put(w->p, b);
		bigbuf_put(w->p, a);
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct bigbuf_pool *p = NULL;
	struct bigbuf_stats st;
	struct worker w[6];
	pthread_t t[6];
	assert_int_equal(bigbuf_pool_new(MiB, 8 * MiB, &p), 0); /* fewer slots than wanted */
	for (unsigned i = 0; i < 6; i++) {
		w[i] = (struct worker){p, i + 1, 0};
		assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
	}
	for (unsigned i = 0; i < 6; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	bigbuf_pool_stats(p, &st);
	assert_int_equal(st.in_use, 0);
	assert_true(st.touched <= 8);
	bigbuf_pool_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_slots_used_again),
	    cmocka_unit_test(test_outside_the_pool),
	    cmocka_unit_test(test_threads),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
