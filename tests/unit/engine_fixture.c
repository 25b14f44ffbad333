/* engine_fixture.c - the helpers of engine_fixture.h. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "fault.h"
#include "store.h"

#include "engine_fixture.h"

char g_dir[256];

uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int setup(void **state)
{
	(void)state;
	const char *tmp = getenv("TMPDIR");
	snprintf(g_dir, sizeof(g_dir), "%s/test_engine.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	assert_non_null(mkdtemp(g_dir));
	return 0;
}

int teardown(void **state)
{
	char cmd[300];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

struct store *open_store(void)
{
	struct store *st = NULL;
	assert_int_equal(store_open_local(g_dir, &st), 0);
	return st;
}

struct engine *open_engine(struct store *st, unsigned cadence_ms)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = cadence_ms;
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* packs per group (WAL blobs: test_wal_blobs.c) */
	o.cache_bytes = 1 << 20;
	o.commit_retry_ms = ENGINE_NO_RETRY; /* the tests of retries set their own */
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

void check_value(struct engine *e, const char *key, const void *val, size_t vlen)
{
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, key, strlen(key), &v, &n), 0);
	assert_int_equal(n, vlen);
	assert_memory_equal(v, val, vlen);
	free(v);
}

void check_absent(struct engine *e, const char *key)
{
	void *v = NULL;
	size_t n = 0;
	assert_int_equal(engine_get(e, key, strlen(key), &v, &n), -ENOENT);
}

void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

struct engine *open_retrying(struct store *st, unsigned sync_timeout_ms)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 20;
	o.inline_max = 1024;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* test_outage_pack fails the pack's put */
	o.cache_bytes = 1 << 20;
	o.sync_timeout_ms = sync_timeout_ms;
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

uint64_t all_calls(struct fault_store *f)
{
	uint64_t n = 0;
	for (int op = 0; op < FAULT_OP__COUNT; op++)
		n += fault_store_calls(f, (enum fault_op)op);
	return n;
}

struct engine_stats stats_of(struct engine *e)
{
	struct engine_stats s;
	engine_get_stats(e, &s);
	return s;
}
