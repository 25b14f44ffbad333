/*
 * testutil.h - helpers every test uses: temp dirs, test stores of each kind,
 * wiping a prefix, seeded random bytes, seeds and clocks.
 *
 * Store kinds for tu_store_open():
 *   "local"  store_open_local() on a fresh temp dir (removed at close)
 *   "fault"  the fault wrapper (s3/fault.h) over "local"; t->fault is set
 *   "s3"     store_open_s3() on $S3_ENDPOINT/$S3_BUCKET with AWS_ACCESS_KEY_ID,
 *            AWS_SECRET_ACCESS_KEY (and S3_REGION, default us-east-1), under a
 *            unique random key prefix that is wiped at close.  Returns TU_SKIP
 *            when S3_ENDPOINT is unset.
 *   "sub-local", "sub-s3"  a sub-prefix view (store_open_sub()) on "r/7/" of
 *            a "local" or "s3" store (t->parent); the parent also holds a
 *            few keys of its own outside the view (TU_SUB_PREFIX)
 *
 * Everything here is for tests: failures of the helpers themselves are
 * reported on stderr.  Single-threaded use, except tu_random_bytes() and the
 * clocks, which are thread-safe.
 */
#ifndef MEMWALFS_TESTUTIL_H
#define MEMWALFS_TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fault.h"
#include "store.h"

/* Exit code that meson reports as SKIP; also tu_store_open()'s "skip" result. */
#define TU_SKIP 77

/*
 * The prefix of the "sub-*" kinds' view inside their parent.  At open the
 * parent also gets keys of its own around it (before and after it in byte
 * order, and beside it: "a", "r/6/x", "r/7-", "r/70/x", "r/7x", "r/8/x",
 * "z/r/7/x", each holding its own name), which a view must never list, read
 * or delete (tu_sub_check_outside()).
 */
#define TU_SUB_PREFIX "r/7/"

/* An open test store. */
struct tu_store {
	struct store *store;       /* the store to test (owned) */
	struct fault_store *fault; /* kind "fault": the wrapper of store (else NULL) */
	struct store *parent;      /* kinds "sub-*": the store the view is of (owned) */
	const char *kind;          /* "local", "fault", "s3", "sub-local" or "sub-s3" */
	char *dir;                 /* local/fault: the root directory (owned) */
	char *prefix;              /* s3: the unique key prefix inside the bucket (owned) */
};

/*
 * Make a fresh empty directory under $TMPDIR (or /tmp) and return its
 * malloc()ed path (NULL on failure).  It is removed, with its contents, at
 * exit unless MEMWALFS_KEEP_TMP is set.
 */
char *tu_tempdir(void);

/* Remove path and everything below it (missing is fine).  0 or -errno. */
int tu_rmtree(const char *path);

/*
 * Open a test store of kind.  Returns 0 and *out, TU_SKIP when the kind
 * cannot run here (no S3 server given), or a negative errno.
 */
int tu_store_open(const char *kind, struct tu_store **out);

/*
 * Close t->store and open the same objects again (same dir or prefix), as
 * after a restart.  A fault wrapper is recreated, disarmed.  0 or -errno.
 */
int tu_store_reopen(struct tu_store *t);

/* Close the store, remove every object it made (dir or prefix), free t.  NULL ok. */
void tu_store_close(struct tu_store *t);

/*
 * Kinds "sub-*": 0 when the parent still holds exactly its keys around the
 * view (TU_SUB_PREFIX) outside the view's prefix, each with its bytes; else -1 (what differs is
 * printed on stderr).  0 for the other kinds.
 */
int tu_sub_check_outside(const struct tu_store *t);

/*
 * Keys collected by store_list(st, ..., tu_keys_add, &keys): each key (and its
 * size) in callback order.  stop_after > 0: the callback returns stop_code
 * once that many are collected.  -ENOMEM when out of memory.  Free with
 * tu_keys_free() (which zeroes the struct).
 */
struct tu_keys {
	char **keys;
	uint64_t *sizes;
	size_t n, cap;
	size_t stop_after;
	int stop_code;
};
int tu_keys_add(void *arg, const char *key, uint64_t size);
void tu_keys_free(struct tu_keys *l);

/* Delete every key under prefix ("" for all) in s.  0 or -errno. */
int tu_wipe_prefix(struct store *s, const char *prefix);

/* Count the keys under prefix.  Returns the count, or a negative errno. */
long tu_count_keys(struct store *s, const char *prefix);

/* Bytes and number of the objects under prefix (a listing); on error bytes = objects = 0 and rc <
 * 0. */
struct tu_usage {
	uint64_t bytes, objects;
	int rc;
};
struct tu_usage tu_store_usage(struct store *s, const char *prefix);

/* Fill buf with len bytes determined by seed (same seed, same bytes). */
void tu_random_bytes(void *buf, size_t len, uint64_t seed);

/*
 * A seed for a randomized test: $MEMWALFS_SEED if set, else from the clock.
 * Printed to stderr with name so a failure can be replayed.
 */
uint64_t tu_seed(const char *name);

/* Monotonic clock in nanoseconds / seconds. */
uint64_t tu_now_ns(void);
double tu_now_sec(void);

/* True when S3_ENDPOINT is set (the s3 kind can run). */
bool tu_have_s3(void);

/*
 * The store kind a test that runs "local" (or "fault") and "s3" was asked for: argv[1]
 * "s3" gives "s3" once a probe store opened there (else it exits TU_SKIP, saying why);
 * anything else gives dflt.
 */
const char *tu_kind_arg(int argc, char **argv, const char *dflt);

/* Exit with TU_SKIP (after printing why) when /dev/fuse cannot be opened. */
void tu_require_fuse(void);

/*
 * Fill *o for the S3 test server named by the environment: s3_opts_default(),
 * then S3_ENDPOINT, S3_BUCKET (default "memwalfs-test"), S3_REGION (default
 * us-east-1), AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, path-style
 * addressing, and the key prefix (may be NULL).  The strings are borrowed
 * from the environment and from prefix.
 */
void tu_s3_opts(struct s3_opts *o, const char *prefix);

/*
 * Run fn(arg) with stderr captured into buf (NUL-terminated, truncated to
 * bufsz), for tests that check what a failure logs.  The captured text is
 * written to stderr again afterwards so it stays in the test log.  Returns
 * fn's result (the capture itself cannot fail the call: if no temp file can
 * be made, fn runs uncaptured and buf is empty).
 */
int tu_capture_stderr(char *buf, size_t bufsz, int (*fn)(void *), void *arg);

#endif /* MEMWALFS_TESTUTIL_H */
