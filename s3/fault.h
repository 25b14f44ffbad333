/*
 * fault.h - a fault-injecting wrapper around any store, for tests.
 *
 * Wrap a store, then arm faults; the wrapped store behaves exactly like the
 * inner one until a fault fires:
 *
 *     struct fault_store *f;
 *     fault_store_new(inner, &f);              // f now owns inner
 *     struct store *s = fault_store_as_store(f);
 *     fault_store_fail_nth(f, FAULT_ALL, 3, -EIO, 0); // 3rd call from now fails
 *     ... run the workload on s ...
 *     store_close(s);                          // closes inner too
 *
 * The SQLite do_faultsim_test loop, with every operation failing in turn:
 *
 *     for (uint64_t n = 1;; n++) {
 *             fault_store_fail_nth(f, FAULT_ALL, n, -EIO, 0);
 *             rc = workload(s);               // must succeed or fail cleanly
 *             check(fault_store_inner(f));    // read the truth, no faults
 *             if (!fault_store_fired(f))
 *                     break;                  // the workload has < n calls
 *     }
 *
 * Knobs (each independent; arming one replaces its previous setting):
 *   fail_nth     the nth matching call from now fails with err, once or
 *                (FAULT_PERSIST) from then on; FAULT_LAND performs the inner
 *                call first and then reports err (a write that landed but
 *                whose acknowledgement was lost, like an S3 timeout).
 *   fail_random  each matching call fails with probability p (seeded).
 *   delay        sleep before each matching call.
 *   jitter       sleep a random time (seeded) up to a bound before each
 *                matching call: concurrent calls reach the inner store out
 *                of the order they were made in.
 *   hold         matching calls wait, before reaching the inner store,
 *                until the hold is lifted (a stalled writer: a paused VM,
 *                a partition, SIGSTOP); fault_store_wait_held() waits until
 *                that many calls are stuck.  hold_key holds the calls on
 *                one key only (one request stuck while others go through).
 *   cut_writer   a streaming writer fails once it has passed K bytes: the
 *                bytes up to K reach the inner writer, then the write and
 *                every later call on that writer fail with err.
 *   crash        from now on every call fails with -EIO without reaching the
 *                inner store, open streaming writers are dropped (aborted on
 *                the inner store when the caller finishes or aborts them), and
 *                a call in flight when the crash happens may land in the inner
 *                store but is reported as -EIO.  crash_at does it at the nth
 *                matching call, which lands or not as chosen.
 * Errors used for "throttling" are just err values: -EAGAIN, -EIO, -ETIMEDOUT.
 *
 * Counters: calls per operation class (every call, faulted or not) and the
 * number of faults injected since the last arming of fail_nth/fail_random.
 *
 * Thread safety: every function may be called from any thread at any time;
 * the knobs are protected by one mutex (held only briefly, never across an
 * inner call or a delay).
 */
#ifndef MEMWALFS_FAULT_H
#define MEMWALFS_FAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"

struct fault_store;

/* Operation classes the wrapper counts and can fail. */
enum fault_op {
	FAULT_OP_PUT = 0,       /* store_put */
	FAULT_OP_PUT_IF_ABSENT, /* store_put_if_absent */
	FAULT_OP_GET,           /* store_get */
	FAULT_OP_HEAD,          /* store_head */
	FAULT_OP_LIST,          /* store_list (one call, whatever its length) */
	FAULT_OP_DELETE,        /* store_delete */
	FAULT_OP_DELETE_MANY,   /* store_delete_many */
	FAULT_OP_WRITER_OPEN,   /* store_writer_open */
	FAULT_OP_WRITER_WRITE,  /* store_writer_write */
	FAULT_OP_WRITER_FINISH, /* store_writer_finish */
	FAULT_OP_CLEANUP,       /* store_cleanup_uploads */
	FAULT_OP__COUNT
};

/* Masks of operation classes. */
#define FAULT_M(op) (1u << (op))
#define FAULT_ALL ((1u << FAULT_OP__COUNT) - 1)
#define FAULT_READS (FAULT_M(FAULT_OP_GET) | FAULT_M(FAULT_OP_HEAD) | FAULT_M(FAULT_OP_LIST))
#define FAULT_WRITES (FAULT_ALL & ~FAULT_READS)

/* Flags of fault_store_fail_nth() and fault_store_fail_random(). */
#define FAULT_PERSIST 0x1 /* keep failing every matching call after the first fault */
#define FAULT_LAND 0x2    /* perform the inner call, then return the error anyway */

/* Outcome of the crashing call for fault_store_crash_at(). */
enum fault_land {
	FAULT_LAND_NO = 0,    /* the nth call does not reach the inner store */
	FAULT_LAND_YES = 1,   /* the nth call reaches the inner store, then -EIO */
	FAULT_LAND_RANDOM = 2 /* either, chosen by the seed of fault_store_seed() */
};

/*
 * Wrap inner.  Takes ownership of inner: closing the wrapper closes it.
 * caps are inner's, name "fault(<inner name>)".  Writes *out only on
 * success; -ENOMEM otherwise (inner is then not taken).
 */
int fault_store_new(struct store *inner, struct fault_store **out);

/* The wrapper as a store (valid until store_close() of it). */
struct store *fault_store_as_store(struct fault_store *f);

/* The inner store, for reading the truth past every fault (borrowed). */
struct store *fault_store_inner(struct fault_store *f);

/*
 * Arm: the nth call (1-based, counted from now) of a class in ops fails with
 * err (negative errno).  flags: FAULT_PERSIST, FAULT_LAND.  Resets
 * fault_store_fired().  n 0 disarms.
 */
void fault_store_fail_nth(struct fault_store *f, unsigned ops, uint64_t n, int err, int flags);

/*
 * Arm: every call of a class in ops fails with probability p (0..1) with
 * err; flags as above (FAULT_PERSIST: after the first fault every matching
 * call fails).  Resets fault_store_fired().  p 0 disarms.
 */
void fault_store_fail_random(struct fault_store *f, unsigned ops, double p, int err, int flags);

/* Seed the random generator (fail_random, FAULT_LAND_RANDOM).  Default 1. */
void fault_store_seed(struct fault_store *f, uint64_t seed);

/* Sleep usec microseconds before each call of a class in ops (0: none). */
void fault_store_delay(struct fault_store *f, unsigned ops, unsigned usec);

/* Sleep a random 0..max_usec microseconds before each call of a class in ops (0: none). */
void fault_store_jitter(struct fault_store *f, unsigned ops, unsigned max_usec);

/*
 * Hold every call on key (any class) until fault_store_hold_key(f, NULL).
 * Independent of fault_store_hold(); not disarmed by fault_store_clear().
 */
void fault_store_hold_key(struct fault_store *f, const char *key);

/*
 * Hold every call of a class in ops until a later fault_store_hold() whose
 * mask no longer has its class (0 lifts every hold).  Not disarmed by
 * fault_store_clear(): lift it explicitly.
 */
void fault_store_hold(struct fault_store *f, unsigned ops);

/* Wait up to timeout_ms until at least n calls are held; true if they are. */
bool fault_store_wait_held(struct fault_store *f, unsigned n, unsigned timeout_ms);

/*
 * Every streaming writer opened from now on fails with err once it has been
 * given more than after_bytes bytes (the first after_bytes reach the inner
 * writer).  err 0 disarms.
 */
void fault_store_cut_writer(struct fault_store *f, uint64_t after_bytes, int err);

/* Crash now (see above).  Irreversible for this wrapper. */
void fault_store_crash(struct fault_store *f);

/* Crash at the nth call (1-based, from now) of a class in ops. */
void fault_store_crash_at(struct fault_store *f, unsigned ops, uint64_t n, enum fault_land land);

/* True once crashed. */
bool fault_store_crashed(struct fault_store *f);

/* Disarm fail_nth, fail_random, delay, jitter, cut_writer and crash_at (not a crash). */
void fault_store_clear(struct fault_store *f);

/* Faults injected since fail_nth/fail_random was last armed. */
uint64_t fault_store_fired(struct fault_store *f);

/* Calls of class op since open or fault_store_reset_calls(). */
uint64_t fault_store_calls(struct fault_store *f, enum fault_op op);

/* Zero the per-class call counters. */
void fault_store_reset_calls(struct fault_store *f);

#endif /* MEMWALFS_FAULT_H */
