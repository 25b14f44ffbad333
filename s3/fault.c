/*
 * fault.c - the fault-injecting store wrapper (see fault.h for the knobs).
 *
 * Every call goes through gate(): under f->mu it counts the call, then
 * decides from the armed knobs whether the call passes to the inner store,
 * fails before reaching it, or reaches it and fails anyway (FAULT_LAND, or
 * a crash_at whose call lands).  The inner call itself and any delay run
 * without the lock.  A call that passed but finds the wrapper crashed when
 * the inner call returns reports -EIO: it was in flight at the crash, so its
 * effect may or may not be there, and it is never acknowledged.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fault.h"
#include "log.h"
#include "store_impl.h"

/* What gate() decided for one call. */
enum verdict {
	V_PASS = 0, /* call the inner store, report its result */
	V_FAIL,     /* do not call it; report the error */
	V_LAND      /* call it, then report the error */
};

struct fault_store {
	struct store base;               /* must be first */
	struct store *inner;             /* owned */
	char name[64];                   /* "fault(<inner>)", caps.name points here */
	pthread_mutex_t mu;              /* protects everything below */
	uint64_t calls[FAULT_OP__COUNT]; /* calls per class */
	uint64_t rng;                    /* splitmix64 state */
	/* fail_nth */
	unsigned nth_ops;  /* class mask (0: disarmed) */
	uint64_t nth;      /* fire at this matching call */
	uint64_t nth_seen; /* matching calls since armed */
	int nth_err;
	int nth_flags;
	bool nth_fired; /* fired once (for FAULT_PERSIST) */
	/* fail_random */
	unsigned rnd_ops; /* class mask (0: disarmed) */
	double rnd_p;
	int rnd_err;
	int rnd_flags;
	bool rnd_fired;
	uint64_t fired; /* faults since the last arming */
	/* delay, jitter */
	unsigned delay_ops;
	unsigned delay_usec;
	unsigned jitter_ops;
	unsigned jitter_usec;
	/* hold */
	unsigned hold_ops;      /* class mask (0: nothing held) */
	char hold_key[256];     /* calls on this key are held too ("": none) */
	unsigned holding;       /* calls waiting in gate() right now */
	pthread_cond_t hold_cv; /* broadcast when hold_ops changes */
	/* cut_writer */
	uint64_t cut_after;
	int cut_err; /* 0: disarmed */
	/* crash */
	bool crashed;
	unsigned crash_ops; /* crash_at class mask (0: disarmed) */
	uint64_t crash_n;
	uint64_t crash_seen;
	enum fault_land crash_land;
};

struct fault_writer {
	struct store_writer base;   /* must be first */
	struct store_writer *inner; /* the inner writer (NULL once gone) */
	uint64_t bytes;             /* bytes accepted so far */
	uint64_t cut_after;         /* cut_writer setting at open */
	int cut_err;                /* 0: no cut */
	int err;                    /* sticky error (0: none) */
};

static uint64_t next_rand(struct fault_store *f)
{
	uint64_t z = (f->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void sleep_usec(unsigned usec)
{
	struct timespec ts = {.tv_sec = usec / 1000000, .tv_nsec = (long)(usec % 1000000) * 1000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static bool held(const struct fault_store *f, unsigned bit, const char *key)
{
	return (f->hold_ops & bit) || (key && f->hold_key[0] && strcmp(key, f->hold_key) == 0);
}

/* Decide the fate of one call of class op on key (NULL: none); *err gets the error to report. */
static enum verdict gate(struct fault_store *f, enum fault_op op, const char *key, int *err)
{
	unsigned bit = FAULT_M(op), delay = 0;
	enum verdict v = V_PASS;

	pthread_mutex_lock(&f->mu);
	if (f->jitter_ops & bit) {
		/* before the verdict: calls then also cross a crash point out of order */
		unsigned j = (unsigned)(next_rand(f) % (f->jitter_usec + 1u));
		pthread_mutex_unlock(&f->mu);
		sleep_usec(j);
		pthread_mutex_lock(&f->mu);
	}
	f->calls[op]++;
	if (held(f, bit, key)) {
		f->holding++;
		pthread_cond_broadcast(&f->hold_cv);
		while (held(f, bit, key))
			pthread_cond_wait(&f->hold_cv, &f->mu);
		f->holding--;
	}
	if (f->crashed) {
		*err = -EIO;
		v = V_FAIL;
		goto out;
	}
	if (f->crash_ops & bit && ++f->crash_seen == f->crash_n) {
		f->crashed = true;
		*err = -EIO;
		if (f->crash_land == FAULT_LAND_RANDOM)
			v = (next_rand(f) & 1) ? V_LAND : V_FAIL;
		else
			v = f->crash_land == FAULT_LAND_YES ? V_LAND : V_FAIL;
		log_info("fault: crash at call %llu of op %d (%s)", (unsigned long long)f->crash_n,
		         (int)op, v == V_LAND ? "lands" : "dropped");
		goto out;
	}
	if (f->nth_ops & bit) {
		f->nth_seen++;
		if ((f->nth_fired && (f->nth_flags & FAULT_PERSIST)) || f->nth_seen == f->nth) {
			f->nth_fired = true;
			f->fired++;
			*err = f->nth_err;
			v = (f->nth_flags & FAULT_LAND) ? V_LAND : V_FAIL;
			goto out;
		}
	}
	if (f->rnd_ops & bit) {
		double r = (double)(next_rand(f) >> 11) / 9007199254740992.0;
		if ((f->rnd_fired && (f->rnd_flags & FAULT_PERSIST)) || r < f->rnd_p) {
			f->rnd_fired = true;
			f->fired++;
			*err = f->rnd_err;
			v = (f->rnd_flags & FAULT_LAND) ? V_LAND : V_FAIL;
			goto out;
		}
	}
out:
	if (f->delay_ops & bit)
		delay = f->delay_usec;
	pthread_mutex_unlock(&f->mu);
	if (delay)
		sleep_usec(delay);
	return v;
}

/* After an inner call that passed: a crash meanwhile makes it unacknowledged. */
static int after(struct fault_store *f, int rc)
{
	bool crashed;

	pthread_mutex_lock(&f->mu);
	crashed = f->crashed;
	pthread_mutex_unlock(&f->mu);
	return crashed ? -EIO : rc;
}

/* ------------------------------------------------------------------------
 * Store operations
 */

static int f_put(struct store *s, const char *key, const void *buf, size_t len)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_PUT, key, &err);

	if (v == V_FAIL)
		return err;
	store_count(s, STORE_OP_PUT, len, 0);
	rc = store_put(f->inner, key, buf, len);
	return v == V_LAND ? err : after(f, rc);
}

static int f_put_if_absent(struct store *s, const char *key, const void *buf, size_t len)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_PUT_IF_ABSENT, key, &err);

	if (v == V_FAIL)
		return err;
	store_count(s, STORE_OP_PUT, len, 0);
	rc = store_put_if_absent(f->inner, key, buf, len);
	return v == V_LAND ? err : after(f, rc);
}

static int f_get(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
                 size_t *outlen)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_GET, key, &err);
	void *buf = NULL;
	size_t n = 0;

	if (v == V_FAIL)
		return err;
	rc = store_get(f->inner, key, off, len, &buf, &n);
	store_count(s, STORE_OP_GET, 0, rc == 0 ? n : 0);
	if (v == V_LAND)
		rc = err;
	else
		rc = after(f, rc);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	*out = buf;
	*outlen = n;
	return 0;
}

static int f_get_into(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
                      size_t *outlen)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_GET, key, &err);
	size_t n = 0;

	if (v == V_FAIL)
		return err;
	rc = store_get_into(f->inner, key, off, len, buf, &n);
	store_count(s, STORE_OP_GET, 0, rc == 0 ? n : 0);
	rc = v == V_LAND ? err : after(f, rc);
	if (rc == 0)
		*outlen = n;
	return rc;
}

static int f_head(struct store *s, const char *key, struct store_stat *st)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_HEAD, key, &err);
	struct store_stat tmp;

	if (v == V_FAIL)
		return err;
	store_count(s, STORE_OP_HEAD, 0, 0);
	rc = store_head(f->inner, key, &tmp);
	rc = v == V_LAND ? err : after(f, rc);
	if (rc == 0)
		*st = tmp;
	return rc;
}

static int f_list(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
                  store_list_fn fn, void *arg)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_LIST, NULL, &err);

	if (v == V_FAIL)
		return err;
	store_count(s, STORE_OP_LIST, 0, 0);
	if (v == V_LAND)
		return err; /* a listing that "landed" has no effect: report the error only */
	rc = store_list(f->inner, prefix, start_after, max_keys, fn, arg);
	return after(f, rc);
}

static int f_delete(struct store *s, const char *key)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_DELETE, key, &err);

	if (v == V_FAIL)
		return err;
	store_count(s, STORE_OP_DELETE, 0, 0);
	rc = store_delete(f->inner, key);
	return v == V_LAND ? err : after(f, rc);
}

static int f_delete_many(struct store *s, const char *const *keys, size_t n)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_DELETE_MANY, NULL, &err);

	if (v == V_FAIL)
		return err;
	store_count(s, STORE_OP_DELETE, 0, 0);
	rc = store_delete_many(f->inner, keys, n);
	return v == V_LAND ? err : after(f, rc);
}

static int f_cleanup(struct store *s, const char *prefix, unsigned older_than_sec, unsigned *n)
{
	struct fault_store *f = (struct fault_store *)s;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_CLEANUP, NULL, &err);

	if (v == V_FAIL)
		return err;
	rc = store_cleanup_uploads(f->inner, prefix, older_than_sec, n);
	return v == V_LAND ? err : after(f, rc);
}

/* ------------------------------------------------------------------------
 * Streaming writer
 */

static void fw_drop(struct fault_writer *w)
{
	if (w->inner)
		store_writer_abort(w->inner);
	w->inner = NULL;
}

static int fw_write(struct store_writer *sw, const void *buf, size_t len)
{
	struct fault_writer *w = (struct fault_writer *)sw;
	struct fault_store *f = (struct fault_store *)sw->store;
	int err = 0, rc = 0;
	enum verdict v;

	if (w->err)
		return w->err;
	v = gate(f, FAULT_OP_WRITER_WRITE, NULL, &err);
	if (v == V_FAIL) {
		w->err = err;
		return err;
	}
	if (w->cut_err && w->bytes + len > w->cut_after) {
		size_t keep = (size_t)(w->cut_after - w->bytes);
		if (keep)
			store_writer_write(w->inner, buf, keep);
		w->bytes += keep;
		w->err = w->cut_err;
		log_info("fault: writer cut after %llu bytes", (unsigned long long)w->bytes);
		return w->err;
	}
	rc = store_writer_write(w->inner, buf, len);
	if (rc == 0)
		w->bytes += len;
	rc = v == V_LAND ? err : after(f, rc);
	if (rc < 0)
		w->err = rc;
	return rc;
}

static int fw_finish(struct store_writer *sw)
{
	struct fault_writer *w = (struct fault_writer *)sw;
	struct fault_store *f = (struct fault_store *)sw->store;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_WRITER_FINISH, NULL, &err);

	if (w->err || v == V_FAIL) {
		rc = w->err ? w->err : err;
		fw_drop(w);
		free(w);
		return rc;
	}
	store_count(sw->store, STORE_OP_PUT, w->bytes, 0);
	rc = store_writer_finish(w->inner);
	w->inner = NULL;
	free(w);
	return v == V_LAND ? err : after(f, rc);
}

static void fw_abort(struct store_writer *sw)
{
	struct fault_writer *w = (struct fault_writer *)sw;
	fw_drop(w);
	free(w);
}

static const struct store_writer_ops fault_writer_ops = {
    .write = fw_write,
    .finish = fw_finish,
    .abort = fw_abort,
};

static int f_writer_open(struct store *s, const char *key, int flags, struct store_writer **out)
{
	struct fault_store *f = (struct fault_store *)s;
	struct fault_writer *w;
	int err = 0, rc;
	enum verdict v = gate(f, FAULT_OP_WRITER_OPEN, key, &err);

	if (v == V_FAIL)
		return err;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	rc = store_writer_open(f->inner, key, flags, &w->inner);
	if (rc == 0 && v == V_LAND) {
		store_writer_abort(w->inner);
		rc = err;
	}
	if (rc == 0 && (rc = after(f, 0)) < 0)
		store_writer_abort(w->inner);
	if (rc < 0) {
		free(w);
		return rc;
	}
	pthread_mutex_lock(&f->mu);
	w->cut_after = f->cut_after;
	w->cut_err = f->cut_err;
	pthread_mutex_unlock(&f->mu);
	w->base.ops = &fault_writer_ops;
	w->base.store = s;
	*out = &w->base;
	return 0;
}

/* ------------------------------------------------------------------------
 * Open, close, knobs
 */

static void f_close(struct store *s)
{
	struct fault_store *f = (struct fault_store *)s;
	store_close(f->inner);
	pthread_cond_destroy(&f->hold_cv);
	pthread_mutex_destroy(&f->mu);
	free(f);
}

/* The inner store's space (not a request: no fault applies). */
static int f_space(struct store *s, struct store_space *out)
{
	return store_space(((struct fault_store *)s)->inner, out);
}

/* The inner store's answer: an injected error is one it could give. */
static bool f_err_permanent(const struct store *s, int rc)
{
	return store_err_permanent(((const struct fault_store *)s)->inner, rc);
}

static const struct store_ops fault_ops = {
    .put = f_put,
    .put_if_absent = f_put_if_absent,
    .get = f_get,
    .get_into = f_get_into,
    .head = f_head,
    .list = f_list,
    .del = f_delete,
    .delete_many = f_delete_many,
    .writer_open = f_writer_open,
    .cleanup_uploads = f_cleanup,
    .space = f_space,
    .close = f_close,
    .err_permanent = f_err_permanent,
};

int fault_store_new(struct store *inner, struct fault_store **out)
{
	struct fault_store *f;

	if (!inner || !out)
		return -EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	store_init(&f->base, &fault_ops);
	if (pthread_mutex_init(&f->mu, NULL) != 0) {
		free(f);
		return -ENOMEM;
	}
	if (pthread_cond_init(&f->hold_cv, NULL) != 0) {
		pthread_mutex_destroy(&f->mu);
		free(f);
		return -ENOMEM;
	}
	f->inner = inner;
	f->rng = 1;
	f->base.caps = *store_caps(inner);
	snprintf(f->name, sizeof(f->name), "fault(%s)", f->base.caps.name);
	f->base.caps.name = f->name;
	*out = f;
	return 0;
}

struct store *fault_store_as_store(struct fault_store *f)
{
	return &f->base;
}

struct store *fault_store_inner(struct fault_store *f)
{
	return f->inner;
}

void fault_store_fail_nth(struct fault_store *f, unsigned ops, uint64_t n, int err, int flags)
{
	pthread_mutex_lock(&f->mu);
	f->nth_ops = n ? ops : 0;
	f->nth = n;
	f->nth_seen = 0;
	f->nth_err = err;
	f->nth_flags = flags;
	f->nth_fired = false;
	f->fired = 0;
	pthread_mutex_unlock(&f->mu);
}

void fault_store_fail_random(struct fault_store *f, unsigned ops, double p, int err, int flags)
{
	pthread_mutex_lock(&f->mu);
	f->rnd_ops = p > 0 ? ops : 0;
	f->rnd_p = p;
	f->rnd_err = err;
	f->rnd_flags = flags;
	f->rnd_fired = false;
	f->fired = 0;
	pthread_mutex_unlock(&f->mu);
}

void fault_store_seed(struct fault_store *f, uint64_t seed)
{
	pthread_mutex_lock(&f->mu);
	f->rng = seed;
	pthread_mutex_unlock(&f->mu);
}

void fault_store_delay(struct fault_store *f, unsigned ops, unsigned usec)
{
	pthread_mutex_lock(&f->mu);
	f->delay_ops = usec ? ops : 0;
	f->delay_usec = usec;
	pthread_mutex_unlock(&f->mu);
}

void fault_store_jitter(struct fault_store *f, unsigned ops, unsigned max_usec)
{
	pthread_mutex_lock(&f->mu);
	f->jitter_ops = max_usec ? ops : 0;
	f->jitter_usec = max_usec;
	pthread_mutex_unlock(&f->mu);
}

void fault_store_hold_key(struct fault_store *f, const char *key)
{
	pthread_mutex_lock(&f->mu);
	snprintf(f->hold_key, sizeof(f->hold_key), "%s", key ? key : "");
	pthread_cond_broadcast(&f->hold_cv);
	pthread_mutex_unlock(&f->mu);
}

void fault_store_hold(struct fault_store *f, unsigned ops)
{
	pthread_mutex_lock(&f->mu);
	f->hold_ops = ops;
	pthread_cond_broadcast(&f->hold_cv);
	pthread_mutex_unlock(&f->mu);
}

bool fault_store_wait_held(struct fault_store *f, unsigned n, unsigned timeout_ms)
{
	struct timespec ts;
	bool ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&f->mu);
	while (f->holding < n)
		if (pthread_cond_timedwait(&f->hold_cv, &f->mu, &ts) != 0)
			break;
	ok = f->holding >= n;
	pthread_mutex_unlock(&f->mu);
	return ok;
}

void fault_store_cut_writer(struct fault_store *f, uint64_t after_bytes, int err)
{
	pthread_mutex_lock(&f->mu);
	f->cut_after = after_bytes;
	f->cut_err = err;
	pthread_mutex_unlock(&f->mu);
}

void fault_store_crash(struct fault_store *f)
{
	pthread_mutex_lock(&f->mu);
	f->crashed = true;
	pthread_mutex_unlock(&f->mu);
	log_info("fault: crash");
}

void fault_store_crash_at(struct fault_store *f, unsigned ops, uint64_t n, enum fault_land land)
{
	pthread_mutex_lock(&f->mu);
	f->crash_ops = n ? ops : 0;
	f->crash_n = n;
	f->crash_seen = 0;
	f->crash_land = land;
	pthread_mutex_unlock(&f->mu);
}

bool fault_store_crashed(struct fault_store *f)
{
	bool c;
	pthread_mutex_lock(&f->mu);
	c = f->crashed;
	pthread_mutex_unlock(&f->mu);
	return c;
}

void fault_store_clear(struct fault_store *f)
{
	pthread_mutex_lock(&f->mu);
	f->nth_ops = 0;
	f->rnd_ops = 0;
	f->delay_ops = 0;
	f->jitter_ops = 0;
	f->cut_err = 0;
	f->crash_ops = 0;
	pthread_mutex_unlock(&f->mu);
}

uint64_t fault_store_fired(struct fault_store *f)
{
	uint64_t n;
	pthread_mutex_lock(&f->mu);
	n = f->fired;
	pthread_mutex_unlock(&f->mu);
	return n;
}

uint64_t fault_store_calls(struct fault_store *f, enum fault_op op)
{
	uint64_t n;
	if ((unsigned)op >= FAULT_OP__COUNT)
		return 0;
	pthread_mutex_lock(&f->mu);
	n = f->calls[op];
	pthread_mutex_unlock(&f->mu);
	return n;
}

void fault_store_reset_calls(struct fault_store *f)
{
	pthread_mutex_lock(&f->mu);
	memset(f->calls, 0, sizeof(f->calls));
	pthread_mutex_unlock(&f->mu);
}
