/*
 * test_engine_s3.c - the engine's crash campaign and fencing check over the
 * S3 store (suite s3).  Skips (77) when S3_ENDPOINT is unset.
 *
 *   test_engine_s3 [--seeds FIRST-LAST]     (default 0-19, or $EC_S3_SEEDS)
 *
 * Each seed uses a fresh key prefix "h8-PID-TAG-RANDOM/" of $S3_BUCKET and
 * deletes it afterwards.  See tests/crash/engine_check.c.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_check.h"

int main(int argc, char **argv)
{
	uint64_t lo = 0, hi = 19;
	const char *range = getenv("EC_S3_SEEDS");
	unsigned failed = 0;

	if (argc == 3 && !strcmp(argv[1], "--seeds"))
		range = argv[2];
	if (range) {
		char *end;

		lo = strtoull(range, &end, 10);
		hi = *end == '-' ? strtoull(end + 1, NULL, 10) : lo;
	}
	if (!ec_have_s3()) {
		printf("S3_ENDPOINT unset: skip\n");
		return 77;
	}
	int rc = ec_fencing(EC_S3);

	if (rc == 77)
		return 77;
	int fence_rc = rc;

	if (rc)
		failed++;
	if (ec_fencing_window(EC_S3))
		failed++;
	if (ec_open_race(EC_S3))
		failed++;
	for (uint64_t s = lo; s <= hi; s++) {
		printf("seed %" PRIu64 "\n", s);
		fflush(stdout);
		rc = ec_crash_seed(EC_S3, s, true);
		if (rc == 77)
			return 77;
		if (rc) {
			failed++;
			fprintf(stderr,
			        "FAIL seed %" PRIu64 " on s3 (rerun: --seeds %" PRIu64 "-%" PRIu64
			        ")\n",
			        s, s, s);
		}
	}
	struct ec_crash_totals t;

	ec_crash_get_totals(&t);
	printf("s3: fencing %s; crash campaign %u/%" PRIu64 " seeds passed (%u crashed during "
	       "the workload); writes issued %" PRIu64 ", acknowledged %" PRIu64 ", found %" PRIu64
	       "\n",
	       fence_rc ? "FAILED" : "ok", t.seeds, hi - lo + 1, t.crashed_mid, t.ops, t.acked,
	       t.survived);
	return failed ? 1 : 0;
}
