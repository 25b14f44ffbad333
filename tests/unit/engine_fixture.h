/*
 * engine_fixture.h - what test_engine.c and test_engine_life.c share: a
 * scratch directory per test (setup/teardown), the local store in it,
 * engines opened with the tests' options, value checks and counters.
 */
#ifndef MEMWALFS_ENGINE_FIXTURE_H
#define MEMWALFS_ENGINE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "fault.h"
#include "store.h"

extern char g_dir[256]; /* this test's scratch directory (setup() makes it) */

uint64_t now_ms(void);
int setup(void **state);    /* cmocka setup: a fresh g_dir under $TMPDIR or /tmp */
int teardown(void **state); /* removes g_dir */
struct store *open_store(void);
/* cadence_ms, 1 KiB inline, packs per group, 1 MiB cache, no commit retries */
struct engine *open_engine(struct store *st, unsigned cadence_ms);
/* 20 ms cadence, commits retried; fsync waits at most sync_timeout_ms */
struct engine *open_retrying(struct store *st, unsigned sync_timeout_ms);
void check_value(struct engine *e, const char *key, const void *val, size_t vlen);
void check_absent(struct engine *e, const char *key);
void fill(uint8_t *p, size_t n, unsigned seed); /* a pattern that depends on seed */
uint64_t all_calls(struct fault_store *f);      /* store calls of every kind so far */
struct engine_stats stats_of(struct engine *e);

#endif
