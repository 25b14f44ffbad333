/*
 * engine_check.h - shared machinery of the engine's hard tests (crash
 * campaign, fencing, corruption, S3 variants).
 *
 * The tests drive the public engine API (engine.h) over a "backing" store
 * (a local directory or a fresh prefix of the S3 test bucket) seen through
 * the fault-injecting wrapper (s3/fault.h), and check what a reopened engine
 * finds against a reference model of what was issued and acknowledged.
 *
 * Every failure prints the seed and enough detail to reproduce it with
 * `test_engine_crash --seeds N-N`.  Nothing here is thread-safe unless
 * stated: one test thread drives it (the workload threads it starts record
 * into their own slots).
 */
#ifndef MEMWALFS_ENGINE_CHECK_H
#define MEMWALFS_ENGINE_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* Where the backing objects live. */
enum ec_kind {
	EC_LOCAL = 0, /* a fresh temporary directory */
	EC_S3,        /* a fresh prefix of $S3_BUCKET at $S3_ENDPOINT */
};

/* One backing location; reopenable any number of times. */
struct ec_backing {
	enum ec_kind kind; /* local or s3 */
	char dir[256];     /* local: the temp dir */
	char prefix[128];  /* s3: the key prefix ("h8-PID-TAG/") */
};

/*
 * Create a fresh backing location.  tag distinguishes locations of one run.
 * Returns 0, 77 when kind is EC_S3 and S3_ENDPOINT is unset (caller skips),
 * or a negative errno.
 */
int ec_backing_new(enum ec_kind kind, const char *tag, struct ec_backing *b);

/* Open a new store handle on the backing location (*out owned by caller). */
int ec_backing_open(const struct ec_backing *b, struct store **out);

/* Remove every object of the location (and the temp dir).  Best effort. */
void ec_backing_destroy(struct ec_backing *b);

/* Open an S3 store on prefix from the environment (tests/s3/ec_s3.c). */
int ec_open_s3(const char *prefix, struct store **out);

/* True when the S3 environment is configured. */
bool ec_have_s3(void);

/*
 * Run one seed of the crash campaign (see test_engine_crash.c for what is
 * checked).  Returns 0 when every invariant held, -1 on a violation (already
 * printed with the seed), 77 if the backing store is unavailable.
 * verbose: print a one-line summary of the seed.
 */
int ec_crash_seed(enum ec_kind kind, uint64_t seed, bool verbose);

/* Totals over the seeds run so far (for the campaign summary). */
struct ec_crash_totals {
	unsigned seeds;                /* seeds run */
	unsigned crashed_mid;          /* the injected crash fired during the workload */
	unsigned crashed_end;          /* crash forced after the workload */
	unsigned clean;                /* clean close (no crash) */
	unsigned open_crashes;         /* a recovery open was crashed too */
	uint64_t ops, acked, survived; /* writes issued / acknowledged / found after reopen */
	uint64_t frozen, flushes;      /* MemTables frozen / flushed before the crash */
	unsigned gaps;                 /* recoveries that found entries after a WAL gap */
};
void ec_crash_get_totals(struct ec_crash_totals *t);

/*
 * Fencing: writer A open, writer B opens the same location; A's next commit
 * fails with -ESTALE and A sends no store write afterwards; B's data and A's
 * acknowledged data are intact after reopen.  Returns 0 or -1 (printed).
 */
int ec_fencing(enum ec_kind kind);

/*
 * Fencing a writer with WAL_WINDOW entries in flight, one of them stalled
 * in the store while the next writer opens (each position in turn): 0 ok,
 * 77 skip, else failed (reason on stderr).
 */
int ec_fencing_window(enum ec_kind kind);

/*
 * Racing opens: four writers open one location at once, each makes one
 * waiting put; epochs must be distinct, a put is acknowledged or fails with
 * -ESTALE, and a reopen finds exactly the acknowledged puts.  0, -1
 * (printed) or 77.
 */
int ec_open_race(enum ec_kind kind);

/* Deterministic 64-bit mixer (splitmix64). */
uint64_t ec_mix(uint64_t x);

/*
 * A seed for a randomized test, as tu_seed() (tests/util/testutil.h) gives
 * it to the tests that link testutil: $MEMWALFS_SEED if set, else from the
 * clock; printed to stderr with name so that a failure can be replayed.
 */
uint64_t ec_seed(const char *name);

#endif /* MEMWALFS_ENGINE_CHECK_H */
