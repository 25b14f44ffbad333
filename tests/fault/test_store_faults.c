/*
 * test_store_faults.c - every store operation under injected failures
 * (s3/fault.h over the local store): it either succeeds or returns the
 * injected error, never a wrong result.  The workload keeps a model of what
 * each key may hold (a set of possible values; a failed write that may have
 * landed adds its value to the set) and checks every answer, then reads the
 * truth from the inner store.  Faults: the Nth call failing for N = 1, 2, ...
 * until no fault fires (once, persistent, landed), random throttling with
 * retries, a streaming upload cut in the middle, crashes (now, at call N
 * landing or not, and under concurrent writers), delays and counters.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "testutil.h"

#define NKEYS 6
#define ABSENT 1ull /* bit 0 of a possibility set: no object */

static const char *const keys[NKEYS] = {"m/k0", "m/k1", "m/k2", "m/sub/k3", "m/k4", "m/k5"};

/* Value id v (1..63) has length (v * 997) % 5000 and bytes seeded by v. */
static size_t val_len(int v)
{
	return (size_t)(v * 997) % 5000;
}

static uint8_t *val_bytes(int v)
{
	uint8_t *b = malloc(val_len(v) + 1);
	assert_non_null(b);
	tu_random_bytes(b, val_len(v), (uint64_t)v);
	return b;
}

/* Which value id has exactly these bytes (0: none). */
static int val_of(const void *p, size_t n)
{
	for (int v = 1; v < 64; v++) {
		if (val_len(v) != n)
			continue;
		uint8_t *b = val_bytes(v);
		bool eq = memcmp(b, p, n) == 0;
		free(b);
		if (eq)
			return v;
	}
	return 0;
}

struct model {
	struct store *s;      /* the faulty store */
	int err;              /* the injected error */
	bool land;            /* failed calls may have reached the inner store */
	uint64_t poss[NKEYS]; /* possible values per key: bit v = value v, bit 0 absent */
};

#define BIT(v) (1ull << (v))

static void expect_ok_or_err(struct model *m, int rc, const char *what)
{
	if (rc != 0 && rc != m->err)
		fail_msg("%s: %d (%s), injected %d", what, rc, strerror(-rc), m->err);
}

static void m_put(struct model *m, int k, int v)
{
	uint8_t *b = val_bytes(v);
	int rc = store_put(m->s, keys[k], b, val_len(v));
	free(b);
	expect_ok_or_err(m, rc, "put");
	if (rc == 0)
		m->poss[k] = BIT(v);
	else if (m->land)
		m->poss[k] |= BIT(v);
}

static void m_put_if_absent(struct model *m, int k, int v)
{
	uint8_t *b = val_bytes(v);
	int rc = store_put_if_absent(m->s, keys[k], b, val_len(v));
	free(b);
	if (rc == 0) {
		assert_true(m->poss[k] & ABSENT);
		m->poss[k] = BIT(v);
	} else if (rc == -EEXIST) {
		assert_true(m->poss[k] & ~ABSENT);
		m->poss[k] &= ~ABSENT;
	} else {
		expect_ok_or_err(m, rc, "put_if_absent");
		if (m->land && (m->poss[k] & ABSENT))
			m->poss[k] |= BIT(v);
	}
}

static void m_get(struct model *m, int k, uint64_t off)
{
	void *p = NULL;
	size_t n = 0;
	int rc = store_get(m->s, keys[k], off, STORE_TO_END, &p, &n);
	if (rc == -ENOENT) {
		assert_true(m->poss[k] & ABSENT);
	} else if (rc == 0) {
		/* the bytes must be the tail of one possible value */
		bool found = false;
		for (int v = 1; v < 64 && !found; v++) {
			if (!(m->poss[k] & BIT(v)))
				continue;
			uint8_t *b = val_bytes(v);
			size_t len = val_len(v), want = off >= len ? 0 : len - off;
			found = n == want && (n == 0 || !memcmp(b + off, p, n));
			free(b);
		}
		if (!found)
			fail_msg("get %s@%" PRIu64 ": %zu bytes match no possible value", keys[k],
			         off, n);
		free(p);
	} else {
		expect_ok_or_err(m, rc, "get");
	}
}

static void m_head(struct model *m, int k)
{
	struct store_stat st;
	int rc = store_head(m->s, keys[k], &st);
	if (rc == -ENOENT) {
		assert_true(m->poss[k] & ABSENT);
	} else if (rc == 0) {
		bool found = false;
		for (int v = 1; v < 64; v++)
			if ((m->poss[k] & BIT(v)) && val_len(v) == st.size)
				found = true;
		assert_true(found);
	} else {
		expect_ok_or_err(m, rc, "head");
	}
}

static void m_delete(struct model *m, int k)
{
	int rc = store_delete(m->s, keys[k]);
	expect_ok_or_err(m, rc, "delete");
	if (rc == 0)
		m->poss[k] = ABSENT;
	else if (m->land)
		m->poss[k] |= ABSENT;
}

static void m_delete_many(struct model *m, int a, int b)
{
	const char *ks[3] = {keys[a], "m/never-there", keys[b]};
	int rc = store_delete_many(m->s, ks, 3);
	expect_ok_or_err(m, rc, "delete_many");
	if (rc == 0) {
		m->poss[a] = m->poss[b] = ABSENT;
	} else if (m->land) {
		m->poss[a] |= ABSENT;
		m->poss[b] |= ABSENT;
	}
}

static int collect_keys(void *arg, const char *key, uint64_t size)
{
	uint64_t *seen = arg;
	(void)size;
	for (int k = 0; k < NKEYS; k++)
		if (!strcmp(key, keys[k]))
			*seen |= BIT(k);
	return 0;
}

static void m_list(struct model *m)
{
	uint64_t seen = 0;
	int rc = store_list(m->s, "m/", NULL, 0, collect_keys, &seen);
	if (rc != 0) {
		expect_ok_or_err(m, rc, "list");
		return;
	}
	for (int k = 0; k < NKEYS; k++) {
		if (seen & BIT(k))
			assert_true(m->poss[k] & ~ABSENT);
		else
			assert_true(m->poss[k] & ABSENT);
	}
}

static void m_writer(struct model *m, int k, int v, int flags)
{
	uint8_t *b = val_bytes(v);
	size_t len = val_len(v), third = len / 3;
	struct store_writer *w = NULL;
	int rc = store_writer_open(m->s, keys[k], flags, &w);

	if (rc == 0)
		rc = store_writer_write(w, b, third);
	if (rc == 0)
		rc = store_writer_write(w, b + third, third);
	if (rc == 0)
		rc = store_writer_write(w, b + 2 * third, len - 2 * third);
	if (w)
		rc = rc == 0 ? store_writer_finish(w) : (store_writer_abort(w), rc);
	free(b);
	if (rc == 0) {
		if (flags)
			assert_true(m->poss[k] & ABSENT);
		m->poss[k] = BIT(v);
	} else if (rc == -EEXIST && flags) {
		assert_true(m->poss[k] & ~ABSENT);
		m->poss[k] &= ~ABSENT;
	} else {
		expect_ok_or_err(m, rc, "writer");
		if (m->land && (!flags || (m->poss[k] & ABSENT)))
			m->poss[k] |= BIT(v);
	}
}

/* The workload: every operation class, twice for writes. */
static void workload(struct model *m)
{
	m_put(m, 0, 1);
	m_put_if_absent(m, 1, 2);
	m_get(m, 0, 0);
	m_head(m, 0);
	m_put(m, 0, 3);
	m_get(m, 0, 100);
	m_list(m);
	m_delete(m, 1);
	m_writer(m, 2, 4, 0);
	m_put(m, 3, 5);
	m_delete_many(m, 0, 3);
	m_put_if_absent(m, 2, 6);
	m_writer(m, 4, 7, STORE_W_IF_ABSENT);
	m_writer(m, 4, 8, STORE_W_IF_ABSENT);
	m_get(m, 2, 0);
	m_head(m, 4);
	m_list(m);
	m_put(m, 5, 9);
}

/* Compare the inner store (the truth) with the model; no stray keys. */
static void check_truth(struct fault_store *f, struct model *m)
{
	struct store *in = fault_store_inner(f);
	for (int k = 0; k < NKEYS; k++) {
		void *p = NULL;
		size_t n = 0;
		int rc = store_get(in, keys[k], 0, STORE_TO_END, &p, &n);
		if (rc == -ENOENT) {
			if (!(m->poss[k] & ABSENT))
				fail_msg("%s missing, possible set %" PRIx64, keys[k], m->poss[k]);
			continue;
		}
		assert_int_equal(rc, 0);
		int v = val_of(p, n);
		free(p);
		if (!v || !(m->poss[k] & BIT(v)))
			fail_msg("%s holds value %d, possible set %" PRIx64, keys[k], v,
			         m->poss[k]);
	}
	assert_int_equal(tu_count_keys(in, ""), tu_count_keys(in, "m/"));
}

static void faultsim(int flags)
{
	struct tu_store *t;
	uint64_t n;

	assert_int_equal(tu_store_open("fault", &t), 0);
	for (n = 1; n < 1000; n++) {
		struct model m = {.s = t->store, .err = -EIO, .land = flags & FAULT_LAND};
		for (int k = 0; k < NKEYS; k++)
			m.poss[k] = ABSENT;
		assert_int_equal(tu_wipe_prefix(fault_store_inner(t->fault), ""), 0);
		fault_store_fail_nth(t->fault, FAULT_ALL, n, -EIO, flags);
		workload(&m);
		uint64_t fired = fault_store_fired(t->fault);
		fault_store_clear(t->fault);
		check_truth(t->fault, &m);
		if (!fired)
			break;
		if (flags & FAULT_PERSIST)
			assert_true(fired >= 1);
		else
			assert_int_equal(fired, 1);
	}
	fprintf(stderr, "flags %d: %" PRIu64 " fault points\n", flags, n - 1);
	assert_true(n > 20); /* the workload has at least this many calls */
	tu_store_close(t);
}

static void test_fail_nth_once(void **state)
{
	(void)state;
	faultsim(0);
}

static void test_fail_nth_persistent(void **state)
{
	(void)state;
	faultsim(FAULT_PERSIST);
}

static void test_fail_nth_landed(void **state)
{
	(void)state;
	faultsim(FAULT_LAND);
	faultsim(FAULT_LAND | FAULT_PERSIST);
}

/* Random throttling: a caller that retries -EAGAIN ends in the exact state. */
static void test_random_throttle(void **state)
{
	(void)state;
	struct tu_store *t;
	uint64_t seed = tu_seed("test_random_throttle");
	int retries = 0;

	assert_int_equal(tu_store_open("fault", &t), 0);
	fault_store_seed(t->fault, seed);
	fault_store_fail_random(t->fault, FAULT_ALL, 0.3, -EAGAIN, 0);
	for (int i = 0; i < 40; i++) {
		char key[32];
		int v = 1 + i % 60, rc;
		uint8_t *b = val_bytes(v);
		void *p;
		size_t n;

		snprintf(key, sizeof(key), "r/%02d", i);
		while ((rc = store_put(t->store, key, b, val_len(v))) == -EAGAIN)
			retries++;
		assert_int_equal(rc, 0);
		while ((rc = store_get(t->store, key, 0, STORE_TO_END, &p, &n)) == -EAGAIN)
			retries++;
		assert_int_equal(rc, 0);
		assert_int_equal(n, val_len(v));
		assert_memory_equal(p, b, n);
		free(p);
		if (i % 2) {
			while ((rc = store_delete(t->store, key)) == -EAGAIN)
				retries++;
			assert_int_equal(rc, 0);
		}
		free(b);
	}
	long cnt;
	while ((cnt = tu_count_keys(t->store, "r/")) == -EAGAIN)
		retries++;
	assert_int_equal(cnt, 20);
	assert_true(fault_store_fired(t->fault) > 0);
	assert_int_equal(fault_store_fired(t->fault), (uint64_t)retries);
	tu_store_close(t);
}

static void test_cut_writer(void **state)
{
	(void)state;
	struct tu_store *t;
	struct store_writer *w;
	size_t len = 3 << 20;
	uint8_t *b = malloc(len);
	struct store_stat st;

	assert_non_null(b);
	tu_random_bytes(b, len, 42);
	assert_int_equal(tu_store_open("fault", &t), 0);
	fault_store_cut_writer(t->fault, 1 << 20, -ECONNRESET);
	assert_int_equal(store_writer_open(t->store, "cut/a", 0, &w), 0);
	assert_int_equal(store_writer_write(w, b, 700000), 0);
	assert_int_equal(store_writer_write(w, b + 700000, 700000), -ECONNRESET);
	assert_int_equal(store_writer_write(w, b, 10), -ECONNRESET); /* sticky */
	assert_int_equal(store_writer_finish(w), -ECONNRESET);
	assert_int_equal(store_head(t->store, "cut/a", &st), -ENOENT);
	/* cut at 0 bytes, then abort */
	fault_store_cut_writer(t->fault, 0, -EIO);
	assert_int_equal(store_writer_open(t->store, "cut/b", 0, &w), 0);
	assert_int_equal(store_writer_write(w, b, 1), -EIO);
	store_writer_abort(w);
	/* disarmed: a full upload works */
	fault_store_cut_writer(t->fault, 0, 0);
	assert_int_equal(store_writer_open(t->store, "cut/a", 0, &w), 0);
	assert_int_equal(store_writer_write(w, b, len), 0);
	assert_int_equal(store_writer_finish(w), 0);
	assert_int_equal(store_head(fault_store_inner(t->fault), "cut/a", &st), 0);
	assert_int_equal(st.size, len);
	assert_int_equal(tu_count_keys(fault_store_inner(t->fault), ""), 1);
	tu_store_close(t);
	free(b);
}

static void test_crash_now(void **state)
{
	(void)state;
	struct tu_store *t;
	struct store_writer *w;
	struct store_stat st;
	void *p;
	size_t n;

	assert_int_equal(tu_store_open("fault", &t), 0);
	struct store *in = fault_store_inner(t->fault);
	assert_int_equal(store_put(t->store, "c/acked", "a", 1), 0);
	assert_int_equal(store_writer_open(t->store, "c/stream", 0, &w), 0);
	assert_int_equal(store_writer_write(w, "xyz", 3), 0);
	assert_false(fault_store_crashed(t->fault));
	fault_store_crash(t->fault);
	assert_true(fault_store_crashed(t->fault));
	assert_int_equal(store_put(t->store, "c/after", "b", 1), -EIO);
	assert_int_equal(store_get(t->store, "c/acked", 0, 1, &p, &n), -EIO);
	assert_int_equal(store_head(t->store, "c/acked", &st), -EIO);
	assert_int_equal(tu_count_keys(t->store, ""), -EIO);
	assert_int_equal(store_writer_write(w, "more", 4), -EIO);
	assert_int_equal(store_writer_finish(w), -EIO); /* dropped */
	/* the truth: acknowledged writes are there, the rest is not */
	assert_int_equal(store_head(in, "c/acked", &st), 0);
	assert_int_equal(store_head(in, "c/after", &st), -ENOENT);
	assert_int_equal(store_head(in, "c/stream", &st), -ENOENT);
	assert_int_equal(tu_count_keys(in, ""), 1);
	/* after a "restart" everything works again */
	assert_int_equal(tu_store_reopen(t), 0);
	assert_int_equal(store_put(t->store, "c/after", "b", 1), 0);
	assert_int_equal(tu_count_keys(t->store, ""), 2);
	tu_store_close(t);
}

/* Crash at the 3rd put; returns whether that put landed in the inner store. */
static bool crash_at_third(enum fault_land land, uint64_t seed)
{
	struct tu_store *t;
	struct store_stat st;
	bool landed;

	assert_int_equal(tu_store_open("fault", &t), 0);
	fault_store_seed(t->fault, seed);
	fault_store_crash_at(t->fault, FAULT_M(FAULT_OP_PUT), 3, land);
	assert_int_equal(store_put(t->store, "ca/1", "1", 1), 0);
	assert_int_equal(store_head(t->store, "ca/1", &st), 0); /* other classes don't count */
	assert_int_equal(store_put(t->store, "ca/2", "2", 1), 0);
	assert_int_equal(store_put(t->store, "ca/3", "3", 1), -EIO);
	assert_true(fault_store_crashed(t->fault));
	assert_int_equal(store_put(t->store, "ca/4", "4", 1), -EIO);
	struct store *in = fault_store_inner(t->fault);
	landed = store_head(in, "ca/3", &st) == 0;
	assert_int_equal(store_head(in, "ca/2", &st), 0);
	assert_int_equal(store_head(in, "ca/4", &st), -ENOENT);
	tu_store_close(t);
	return landed;
}

static void test_crash_at(void **state)
{
	(void)state;
	int landed = 0, dropped = 0;

	assert_true(crash_at_third(FAULT_LAND_YES, 1));
	assert_false(crash_at_third(FAULT_LAND_NO, 1));
	for (uint64_t seed = 1; seed <= 16; seed++) {
		if (crash_at_third(FAULT_LAND_RANDOM, seed))
			landed++;
		else
			dropped++;
	}
	assert_true(landed > 0 && dropped > 0); /* tests see both outcomes */
}

struct crash_writer {
	struct store *s;
	int id;
	int acked;         /* puts acknowledged before the first failure */
	bool failed_other; /* an error other than -EIO */
};

static void *crash_writer_run(void *arg)
{
	struct crash_writer *c = arg;
	for (int i = 0; i < 100000; i++) {
		char key[32];
		int v = 1 + (c->id * 7 + i) % 60;
		uint8_t *b = val_bytes(v);
		snprintf(key, sizeof(key), "cc/%d/%05d", c->id, i);
		int rc = store_put(c->s, key, b, val_len(v));
		free(b);
		if (rc != 0) {
			c->failed_other = rc != -EIO;
			break;
		}
		c->acked++;
	}
	return NULL;
}

static void test_crash_concurrent(void **state)
{
	(void)state;
	struct tu_store *t;
	struct crash_writer cw[4];
	pthread_t th[4];

	assert_int_equal(tu_store_open("fault", &t), 0);
	for (int i = 0; i < 4; i++) {
		cw[i] = (struct crash_writer){.s = t->store, .id = i};
		assert_int_equal(pthread_create(&th[i], NULL, crash_writer_run, &cw[i]), 0);
	}
	usleep(50000);
	fault_store_crash(t->fault);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	struct store *in = fault_store_inner(t->fault);
	for (int i = 0; i < 4; i++) {
		assert_false(cw[i].failed_other);
		/* every acknowledged put is there, whole; at most the one in flight beyond */
		for (int j = 0; j <= cw[i].acked; j++) {
			char key[32];
			void *p;
			size_t n;
			snprintf(key, sizeof(key), "cc/%d/%05d", i, j);
			int rc = store_get(in, key, 0, STORE_TO_END, &p, &n);
			if (j == cw[i].acked) {
				if (rc == 0) {
					assert_int_equal(val_of(p, n), 1 + (i * 7 + j) % 60);
					free(p);
				} else {
					assert_int_equal(rc, -ENOENT);
				}
				continue;
			}
			assert_int_equal(rc, 0);
			assert_int_equal(val_of(p, n), 1 + (i * 7 + j) % 60);
			free(p);
		}
		char pre[16];
		snprintf(pre, sizeof(pre), "cc/%d/", i);
		long cnt = tu_count_keys(in, pre);
		assert_true(cnt == cw[i].acked || cnt == cw[i].acked + 1);
	}
	tu_store_close(t);
}

static void test_delay_counters_clear(void **state)
{
	(void)state;
	struct tu_store *t;
	void *p;
	size_t n;
	struct store_stat st;

	assert_int_equal(tu_store_open("fault", &t), 0);
	assert_string_equal(store_caps(t->store)->name, "fault(local)");
	assert_true(store_caps(t->store)->conditional_create);
	assert_int_equal(store_put(t->store, "d/x", "abc", 3), 0);
	fault_store_delay(t->fault, FAULT_M(FAULT_OP_GET), 300000);
	double t0 = tu_now_sec();
	assert_int_equal(store_get(t->store, "d/x", 0, STORE_TO_END, &p, &n), 0);
	free(p);
	assert_true(tu_now_sec() - t0 >= 0.299);
	/*
	 * A head is not delayed.  A delayed call always takes 300 ms or more,
	 * while an undelayed one may too on a loaded machine (preemption, a
	 * slow disk), so a single slow head proves nothing: the head is not
	 * delayed if any of five takes less than the delay.
	 */
	bool fast = false;
	uint64_t heads = 0;

	for (int i = 0; i < 5 && !fast; i++, heads++) {
		t0 = tu_now_sec();
		assert_int_equal(store_head(t->store, "d/x", &st), 0);
		fast = tu_now_sec() - t0 < 0.299;
	}
	assert_true(fast);
	assert_int_equal(fault_store_calls(t->fault, FAULT_OP_PUT), 1);
	assert_int_equal(fault_store_calls(t->fault, FAULT_OP_GET), 1);
	assert_int_equal(fault_store_calls(t->fault, FAULT_OP_HEAD), heads);
	fault_store_reset_calls(t->fault);
	assert_int_equal(fault_store_calls(t->fault, FAULT_OP_GET), 0);

	/* persistent failure of reads only, then cleared */
	fault_store_fail_nth(t->fault, FAULT_READS, 1, -ETIMEDOUT, FAULT_PERSIST);
	assert_int_equal(store_put(t->store, "d/y", "y", 1), 0);
	assert_int_equal(store_head(t->store, "d/x", &st), -ETIMEDOUT);
	assert_int_equal(store_get(t->store, "d/y", 0, 1, &p, &n), -ETIMEDOUT);
	assert_int_equal(fault_store_fired(t->fault), 2);
	fault_store_clear(t->fault);
	fault_store_delay(t->fault, 0, 0);
	assert_int_equal(store_get(t->store, "d/y", 0, 1, &p, &n), 0);
	free(p);
	/* LAND on get: the read happened but the caller sees only the error */
	fault_store_fail_nth(t->fault, FAULT_M(FAULT_OP_GET), 1, -EIO, FAULT_LAND);
	p = (void *)0x1;
	assert_int_equal(store_get(t->store, "d/y", 0, 1, &p, &n), -EIO);
	assert_ptr_equal(p, (void *)0x1);
	tu_store_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_fail_nth_once),
	    cmocka_unit_test(test_fail_nth_persistent),
	    cmocka_unit_test(test_fail_nth_landed),
	    cmocka_unit_test(test_random_throttle),
	    cmocka_unit_test(test_cut_writer),
	    cmocka_unit_test(test_crash_now),
	    cmocka_unit_test(test_crash_at),
	    cmocka_unit_test(test_crash_concurrent),
	    cmocka_unit_test(test_delay_counters_clear),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
