/*
 * test_engine_crash.c - the engine's crash campaign (suite crash; with --s3,
 * suite s3).
 *
 *   test_engine_crash [--seeds FIRST-LAST] [--s3] [--quiet]
 *
 * Seeds default to 0-199 (or $EC_SEEDS, e.g. "1000-1099").  With
 * $MEMWALFS_SEED=S (as for every randomized test, tests/util/testutil.h) the
 * range is shifted by S: seeds S+FIRST .. S+LAST, so a run with a fresh S
 * covers fresh seeds and MEMWALFS_SEED=S replays the whole run.  Each seed
 * runs a random multi-threaded workload over the fault wrapper, crashes it at
 * a random store call (or after the workload, or closes cleanly), reopens and
 * checks the reference model: see tests/crash/engine_check.c.  Every seed is
 * printed when it starts, and again with FAIL on a violation; reproduce one
 * with --seeds N-N (EC_KEEP_FAILED=1 keeps its objects).  Exit 0 when every
 * seed held, 1 otherwise, 77 (skip) for --s3 without S3_ENDPOINT.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_check.h"

static int parse_range(const char *s, uint64_t *lo, uint64_t *hi)
{
	char *end;

	*lo = strtoull(s, &end, 10);
	if (*end == '-')
		*hi = strtoull(end + 1, &end, 10);
	else
		*hi = *lo;
	return *end || *hi < *lo ? -1 : 0;
}

int main(int argc, char **argv)
{
	uint64_t lo = 0, hi = 199;
	enum ec_kind kind = EC_LOCAL;
	bool quiet = false;
	const char *env = getenv("EC_SEEDS"), *shift = getenv("MEMWALFS_SEED");
	uint64_t base = 0, count;
	unsigned failed = 0;
	struct timespec t0, t1;

	if (env && parse_range(env, &lo, &hi)) {
		fprintf(stderr, "bad EC_SEEDS '%s'\n", env);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seeds") && i + 1 < argc) {
			if (parse_range(argv[++i], &lo, &hi)) {
				fprintf(stderr, "bad --seeds '%s'\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--s3")) {
			kind = EC_S3;
		} else if (!strcmp(argv[i], "--quiet")) {
			quiet = true;
		} else {
			fprintf(stderr, "usage: %s [--seeds FIRST-LAST] [--s3] [--quiet]\n",
			        argv[0]);
			return 2;
		}
	}
	if (kind == EC_S3 && !ec_have_s3()) {
		printf("S3_ENDPOINT unset: skip\n");
		return 77;
	}
	count = hi - lo + 1;
	if (shift && *shift) {
		char *end;

		base = strtoull(shift, &end, 0);
		if (*end || base > UINT64_MAX - hi) {
			fprintf(stderr, "bad MEMWALFS_SEED '%s' (a number, at most %" PRIu64 ")\n",
			        shift, UINT64_MAX - hi);
			return 2;
		}
		lo += base;
		hi += base;
		printf("crash campaign: MEMWALFS_SEED %" PRIu64 " shifts the seeds by %" PRIu64
		       " (replay with MEMWALFS_SEED=%" PRIu64 ")\n",
		       base, base, base);
	}
	printf("crash campaign: seeds %" PRIu64 "-%" PRIu64 " on the %s store\n", lo, hi,
	       kind == EC_S3 ? "s3" : "local");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (uint64_t i = 0; i < count; i++) {
		uint64_t s = lo + i;

		if (!quiet) {
			printf("seed %" PRIu64 "\n", s);
			fflush(stdout);
		}
		int rc = ec_crash_seed(kind, s, !quiet);

		if (rc == 77)
			return 77;
		if (rc) {
			failed++;
			fprintf(stderr,
			        "FAIL seed %" PRIu64 " (rerun: %s--seeds %" PRIu64 "-%" PRIu64
			        "%s)\n",
			        s, base ? "env -u MEMWALFS_SEED " : "", s, s,
			        kind == EC_S3 ? " --s3" : "");
		}
		fflush(stdout);
		fflush(stderr);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);

	struct ec_crash_totals t;

	ec_crash_get_totals(&t);
	printf("crash campaign: %u/%" PRIu64 " seeds passed in %.1f s; %u crashed during the "
	       "workload, %u after it, %u clean closes, %u recovery opens crashed; writes "
	       "issued %" PRIu64 ", acknowledged %" PRIu64 ", found after reopen %" PRIu64
	       "; MemTables frozen %" PRIu64 ", flushed %" PRIu64
	       "; %u recoveries found entries after a WAL gap\n",
	       t.seeds, count,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
	       t.crashed_mid, t.crashed_end, t.clean, t.open_crashes, t.ops, t.acked, t.survived,
	       t.frozen, t.flushes, t.gaps);
	return failed ? 1 : 0;
}
