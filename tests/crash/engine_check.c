/*
 * engine_check.c - the crash campaign and fencing check of the engine.
 *
 * The crash campaign, per seed:
 *
 *   1. a fresh backing location; the fault wrapper over it; engine_open
 *      with a small cadence (5-20 ms) and seed-chosen thresholds;
 *   2. 1-4 threads each issue 20-120 writes (puts of small and blob-sized
 *      values, deletes, atomic batches) on their own key space, with
 *      ENGINE_WAIT / ENGINE_URGENT / tickets awaited later, engine_sync()
 *      and short sleeps; every call is stamped with a global logical clock
 *      before it starts and after it returns;
 *   3. the fault wrapper crashes at a random store call after open (the
 *      call itself landing or not) or, failing that, after the workload;
 *      some seeds instead close cleanly;
 *   4. sometimes a recovery open is itself crashed at a random call;
 *   5. a new engine is opened on the backing store and checked:
 *      - a full scan equals point gets of every key of the model;
 *      - every value found is byte-exact one that was written to that key;
 *      - per thread, the state equals the thread's writes applied up to
 *        some prefix p_t (batches all or nothing);
 *      - p_t covers every acknowledged write (ENGINE_WAIT returned 0, its
 *        ticket's engine_wait returned 0, or it returned before the start of
 *        an engine_sync that returned 0);
 *      - prefix order across threads: if a write survived, every write that
 *        returned before it was issued survived too (engine.h: "if a write
 *        survives, every write issued before it survives").
 *      Because the same state can follow several prefixes (put then delete),
 *      each thread has a set of candidate prefixes and the check computes the
 *      least fixed point of the cross-thread constraints over those sets.
 *   6. writes after recovery are durable across one more reopen.
 */
#include "engine_check.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "fault.h"
#include "store.h"

/* ------------------------------------------------------------------ */
/* Small helpers                                                       */
/* ------------------------------------------------------------------ */

uint64_t ec_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint64_t ec_seed(const char *name)
{
	const char *env = getenv("MEMWALFS_SEED");
	struct timespec ts;
	uint64_t seed;

	if (env && *env) {
		seed = strtoull(env, NULL, 0);
	} else {
		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
		       ((uint64_t)getpid() << 32);
	}
	fprintf(stderr, "%s: seed %" PRIu64 " (replay with MEMWALFS_SEED=%" PRIu64 ")\n", name,
	        seed, seed);
	return seed;
}

struct rng {
	uint64_t s; /* state */
};

static uint64_t rnd(struct rng *r)
{
	r->s += 0x9e3779b97f4a7c15ULL;
	return ec_mix(r->s);
}

/* Uniform in [lo, hi]. */
static uint64_t rnd_range(struct rng *r, uint64_t lo, uint64_t hi)
{
	return lo + rnd(r) % (hi - lo + 1);
}

static bool chance(struct rng *r, unsigned pct)
{
	return rnd(r) % 100 < pct;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ------------------------------------------------------------------ */
/* Values and keys of the model                                        */
/* ------------------------------------------------------------------ */

#define EC_MAXT 4  /* threads */
#define EC_KEYS 24 /* keys per thread */
#define EC_MAXB 6  /* operations per batch */
#define EC_DEL UINT32_MAX
#define EC_VHDR 12 /* value header: 'V' thread op(4) pos 0 vlen(4) */

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void make_key(char *buf, size_t n, unsigned t, unsigned k)
{
	snprintf(buf, n, "t%u/k%03u", t, k);
}

/* Fill v[0, len) with the value of (seed, thread, op, pos). */
static void make_value(uint8_t *v, uint32_t len, uint64_t seed, unsigned t, uint32_t op,
                       unsigned pos)
{
	uint64_t x = ec_mix(seed ^ ((uint64_t)t << 56) ^ ((uint64_t)op << 8) ^ pos);

	v[0] = 'V';
	v[1] = (uint8_t)t;
	v[2] = (uint8_t)(op >> 24);
	v[3] = (uint8_t)(op >> 16);
	v[4] = (uint8_t)(op >> 8);
	v[5] = (uint8_t)op;
	v[6] = (uint8_t)pos;
	v[7] = 0;
	v[8] = (uint8_t)(len >> 24);
	v[9] = (uint8_t)(len >> 16);
	v[10] = (uint8_t)(len >> 8);
	v[11] = (uint8_t)len;
	for (uint32_t i = EC_VHDR; i < len; i += 8) {
		x = ec_mix(x);
		for (uint32_t j = 0; j < 8 && i + j < len; j++)
			v[i + j] = (uint8_t)(x >> (8 * j));
	}
}

/* ------------------------------------------------------------------ */
/* The workload                                                        */
/* ------------------------------------------------------------------ */

/* One write issued by a thread. */
struct ec_op {
	uint8_t n;               /* key operations in it (1 for put/delete) */
	uint8_t batch;           /* issued with engine_write (else put/delete) */
	uint16_t key[EC_MAXB];   /* key index within the thread's space */
	uint32_t vlen[EC_MAXB];  /* value length, EC_DEL for a delete */
	uint64_t s_start, s_end; /* logical clock before the call / after return */
	int flags;               /* ENGINE_WAIT, ENGINE_URGENT */
	int rc;                  /* what the write returned */
	uint64_t ticket;         /* its ticket (flags without WAIT) */
	bool acked;              /* known durable (WAIT or ticket wait returned 0) */
};

/* An engine_sync() call. */
struct ec_sync {
	uint64_t s_start; /* logical clock before the call */
	int rc;           /* what it returned */
};

struct ec_run;

/* One workload thread; written only by that thread until joined. */
struct ec_thread {
	struct ec_run *run;       /* the seed's run */
	unsigned t;               /* thread index */
	unsigned nops;            /* writes to issue */
	struct ec_op *ops;        /* [nops] */
	unsigned n;               /* writes issued (incl. a failed last one) */
	struct ec_sync syncs[64]; /* syncs issued */
	unsigned nsync;           /* used */
	char fail[512];           /* first invariant violation seen live, "" if none */
	int model_op[EC_KEYS];    /* live model: op index of the current value, -1 absent */
	int model_pos[EC_KEYS];   /* and its position in the op */
};

/* Everything about one seed. */
struct ec_run {
	uint64_t seed;                /* the seed */
	struct engine *e;             /* the engine under test */
	struct fault_store *fs;       /* the fault wrapper */
	struct store *fault;          /* the same, as a store */
	_Atomic uint64_t clock;       /* logical clock */
	atomic_bool error_seen;       /* some call failed */
	unsigned nthreads;            /* 1..4 */
	unsigned inline_max;          /* engine_opts.inline_max */
	struct ec_thread th[EC_MAXT]; /* the threads */
};

static void th_fail(struct ec_thread *th, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void th_fail(struct ec_thread *th, const char *fmt, ...)
{
	va_list ap;

	if (th->fail[0])
		return;
	va_start(ap, fmt);
	vsnprintf(th->fail, sizeof(th->fail), fmt, ap);
	va_end(ap);
}

static uint32_t pick_vlen(struct rng *r, unsigned inline_max)
{
	if (chance(r, 30)) /* a blob */
		return (uint32_t)rnd_range(r, inline_max, inline_max + 12000);
	if (chance(r, 35)) /* a large inline value: fills the MemTable */
		return (uint32_t)rnd_range(r, inline_max / 2, inline_max - 1);
	return (uint32_t)rnd_range(r, EC_VHDR, EC_VHDR + 120);
}

/* Read back key k of the thread and compare with the live model. */
static void check_read_own(struct ec_thread *th, unsigned k)
{
	struct ec_run *run = th->run;
	char key[32];
	void *v = NULL;
	size_t vn = 0;
	int rc;

	make_key(key, sizeof(key), th->t, k);
	rc = engine_get(run->e, key, strlen(key), &v, &vn);
	if (atomic_load(&run->error_seen) || fault_store_crashed(run->fs)) {
		free(v); /* the engine may be fenced: reads of unsaved blobs may fail */
		return;
	}
	if (th->model_op[k] < 0) {
		if (rc != -ENOENT)
			th_fail(th, "read-your-writes: %s deleted but get returned %d", key, rc);
		free(v);
		return;
	}
	const struct ec_op *op = &th->ops[th->model_op[k]];
	uint32_t len = op->vlen[th->model_pos[k]];

	if (rc) {
		th_fail(th, "read-your-writes: get %s returned %d", key, rc);
		return;
	}
	uint8_t *want = malloc(len);

	if (want) {
		make_value(want, len, run->seed, th->t, (uint32_t)th->model_op[k],
		           (unsigned)th->model_pos[k]);
		if (vn != len || memcmp(v, want, len))
			th_fail(th, "read-your-writes: %s has wrong bytes (len %zu want %u)", key,
			        vn, len);
	}
	free(want);
	free(v);
}

static void *workload(void *arg)
{
	struct ec_thread *th = arg;
	struct ec_run *run = th->run;
	struct rng r = {ec_mix(run->seed * 131 + th->t)};
	struct engine_batch *b = NULL;
	uint8_t *vbuf = malloc(run->inline_max + 12000 + 200);
	uint64_t tickets[8];
	unsigned tix[8], ntix = 0;

	if (!vbuf || engine_batch_new(&b)) {
		th_fail(th, "out of memory");
		goto out;
	}
	for (unsigned k = 0; k < EC_KEYS; k++)
		th->model_op[k] = -1;
	while (th->n < th->nops) {
		unsigned what = (unsigned)rnd_range(&r, 0, 99);

		if (what < 8) { /* a pause */
			sleep_us((unsigned)rnd_range(&r, 0, 4000));
			continue;
		}
		if (what < 14 && th->nsync < 64) { /* a sync */
			struct ec_sync *s = &th->syncs[th->nsync++];

			s->s_start = atomic_fetch_add(&run->clock, 1);
			s->rc = engine_sync(run->e);
			if (s->rc) {
				atomic_store(&run->error_seen, true);
				break;
			}
			continue;
		}
		if (what < 20 && ntix) { /* await an earlier ticket */
			unsigned i = (unsigned)rnd_range(&r, 0, ntix - 1);
			int rc = engine_wait(run->e, tickets[i], chance(&r, 50));

			if (rc) {
				atomic_store(&run->error_seen, true);
				break;
			}
			th->ops[tix[i]].acked = true;
			tickets[i] = tickets[ntix - 1];
			tix[i] = tix[ntix - 1];
			ntix--;
			continue;
		}

		struct ec_op *op = &th->ops[th->n];
		unsigned opi = th->n;
		unsigned fl = (unsigned)rnd_range(&r, 0, 99);

		memset(op, 0, sizeof(*op));
		op->flags = fl < 20   ? ENGINE_WAIT
		            : fl < 30 ? ENGINE_WAIT | ENGINE_URGENT
		            : fl < 40 ? ENGINE_URGENT
		                      : 0;
		if (what < 60) { /* a put */
			op->n = 1;
			op->key[0] = (uint16_t)rnd_range(&r, 0, EC_KEYS - 1);
			op->vlen[0] = pick_vlen(&r, run->inline_max);
		} else if (what < 72) { /* a delete */
			op->n = 1;
			op->key[0] = (uint16_t)rnd_range(&r, 0, EC_KEYS - 1);
			op->vlen[0] = EC_DEL;
		} else { /* a batch of distinct keys */
			op->batch = 1;
			op->n = (uint8_t)rnd_range(&r, 1, EC_MAXB);
			for (unsigned i = 0; i < op->n; i++) {
				uint16_t k;
				bool dup;

				do {
					k = (uint16_t)rnd_range(&r, 0, EC_KEYS - 1);
					dup = false;
					for (unsigned j = 0; j < i; j++)
						dup |= op->key[j] == k;
				} while (dup);
				op->key[i] = k;
				op->vlen[i] =
				    chance(&r, 25) ? EC_DEL : pick_vlen(&r, run->inline_max);
			}
		}

		char key[32];
		uint64_t *tp = op->flags & ENGINE_WAIT ? NULL : &op->ticket;

		op->rc = 0;
		if (op->batch) {
			engine_batch_clear(b);
			for (unsigned i = 0; i < op->n && !op->rc; i++) {
				make_key(key, sizeof(key), th->t, op->key[i]);
				if (op->vlen[i] == EC_DEL) {
					op->rc = engine_batch_delete(b, key, strlen(key));
					continue;
				}
				make_value(vbuf, op->vlen[i], run->seed, th->t, opi, i);
				op->rc = engine_batch_put(b, key, strlen(key), vbuf, op->vlen[i]);
			}
			if (op->rc || engine_batch_count(b) != op->n) {
				th_fail(th, "batch build failed: rc %d count %zu", op->rc,
				        engine_batch_count(b));
				break;
			}
		} else if (op->vlen[0] != EC_DEL) {
			make_value(vbuf, op->vlen[0], run->seed, th->t, opi, 0);
		}
		make_key(key, sizeof(key), th->t, op->key[0]);
		op->s_start = atomic_fetch_add(&run->clock, 1);
		if (op->batch)
			op->rc = engine_write(run->e, b, op->flags, tp);
		else if (op->vlen[0] == EC_DEL)
			op->rc = engine_delete(run->e, key, strlen(key), op->flags, tp);
		else
			op->rc =
			    engine_put(run->e, key, strlen(key), vbuf, op->vlen[0], op->flags, tp);
		op->s_end = atomic_fetch_add(&run->clock, 1);
		th->n++;
		if (op->rc) {
			if (op->rc == -EINVAL || op->rc == -ENOENT || op->rc == -EUCLEAN)
				th_fail(th, "write op %u returned unexpected %d", opi, op->rc);
			atomic_store(&run->error_seen, true);
			break;
		}
		if (op->flags & ENGINE_WAIT)
			op->acked = true;
		else if (ntix < 8 && chance(&r, 40)) {
			tickets[ntix] = op->ticket;
			tix[ntix++] = opi;
		}
		for (unsigned i = 0; i < op->n; i++) {
			th->model_op[op->key[i]] = op->vlen[i] == EC_DEL ? -1 : (int)opi;
			th->model_pos[op->key[i]] = (int)i;
		}
		if (chance(&r, 25))
			check_read_own(th, op->key[rnd_range(&r, 0, op->n - 1)]);
	}
out:
	engine_batch_free(b);
	free(vbuf);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* Checking a reopened engine                                          */
/* ------------------------------------------------------------------ */

/* What a reopened engine holds for one key: (op, pos) or absent. */
struct ec_found {
	int op;  /* op index, -1 absent */
	int pos; /* position in the op */
};

static int fail_seed(uint64_t seed, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail_seed(uint64_t seed, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "FAIL seed %" PRIu64 ": ", seed);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

/* Decode a value found under key (t, k); check its bytes. */
static int decode_found(struct ec_run *run, unsigned t, unsigned k, const uint8_t *v, size_t vn,
                        struct ec_found *f)
{
	const struct ec_thread *th = &run->th[t];

	if (vn < EC_VHDR || v[0] != 'V' || v[1] != t)
		return fail_seed(run->seed, "t%u/k%03u: value of %zu bytes is not one we wrote", t,
		                 k, vn);
	uint32_t op = be32(v + 2), len = be32(v + 8);
	unsigned pos = v[6];

	if (op >= th->n || pos >= th->ops[op].n || th->ops[op].key[pos] != k ||
	    th->ops[op].vlen[pos] != len || len != vn)
		return fail_seed(run->seed,
		                 "t%u/k%03u: value claims op %u pos %u len %u (found %zu bytes) "
		                 "but no such write to this key was issued",
		                 t, k, op, pos, len, vn);
	uint8_t *want = malloc(len);

	if (!want)
		return fail_seed(run->seed, "out of memory");
	make_value(want, len, run->seed, t, op, pos);
	int bad = memcmp(want, v, len);

	free(want);
	if (bad)
		return fail_seed(run->seed, "t%u/k%03u: value of op %u has corrupt bytes", t, k,
		                 op);
	f->op = (int)op;
	f->pos = (int)pos;
	return 0;
}

/*
 * Read everything the engine holds: a scan, then point gets of every model
 * key, which must agree.  Fills found[t][k].
 */
static int read_state(struct ec_run *run, struct engine *e, struct ec_found found[EC_MAXT][EC_KEYS])
{
	struct engine_iter *it = NULL;
	int rc, ret = 0;

	for (unsigned t = 0; t < EC_MAXT; t++)
		for (unsigned k = 0; k < EC_KEYS; k++) {
			found[t][k].op = -1;
			found[t][k].pos = 0;
		}
	for (rc = engine_iter_new(e, "t", 1, "u", 1, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t kn, vn;
		const char *key = engine_iter_key(it, &kn);
		const void *v;
		unsigned t, k;
		char kbuf[32], kcopy[32];

		/* the key is not NUL-terminated: parse a terminated copy */
		if (kn < sizeof(kcopy)) {
			memcpy(kcopy, key, kn);
			kcopy[kn] = '\0';
		}
		if (kn >= sizeof(kbuf) || sscanf(kcopy, "t%u/k%u", &t, &k) != 2 ||
		    t >= run->nthreads || k >= EC_KEYS) {
			ret = fail_seed(run->seed, "scan found unknown key '%.*s'", (int)kn, key);
			break;
		}
		make_key(kbuf, sizeof(kbuf), t, k);
		if (strlen(kbuf) != kn || memcmp(kbuf, key, kn)) {
			ret = fail_seed(run->seed, "scan found unknown key '%.*s'", (int)kn, key);
			break;
		}
		if (found[t][k].op >= 0) {
			ret = fail_seed(run->seed, "scan returned %s twice", kbuf);
			break;
		}
		rc = engine_iter_value(it, &v, &vn);
		if (rc) {
			ret = fail_seed(run->seed, "scan value of %s: error %d", kbuf, rc);
			break;
		}
		if (decode_found(run, t, k, v, vn, &found[t][k])) {
			ret = -1;
			break;
		}
	}
	if (!ret && rc)
		ret = fail_seed(run->seed, "engine_iter_new failed: %d", rc);
	if (!ret && it && engine_iter_status(it))
		ret = fail_seed(run->seed, "scan ended with error %d", engine_iter_status(it));
	engine_iter_free(it);
	if (ret)
		return ret;

	/* engine_iter_seek lands on the first key found at or after a model key */
	for (unsigned t = 0; t < run->nthreads && !ret; t++) {
		unsigned k0 = (unsigned)(ec_mix(run->seed + t) % EC_KEYS), k = k0, tt = t;
		char key[32], want[32];

		while (tt < run->nthreads && found[tt][k].op < 0)
			if (++k == EC_KEYS) {
				k = 0;
				tt++;
			}
		make_key(key, sizeof(key), t, k0);
		it = NULL;
		if ((rc = engine_iter_new(e, "t", 1, "u", 1, &it)))
			return fail_seed(run->seed, "engine_iter_new failed: %d", rc);
		engine_iter_seek(it, key, strlen(key));
		if (tt < run->nthreads) {
			size_t kn = 0;
			const char *got = engine_iter_valid(it) ? engine_iter_key(it, &kn) : NULL;

			make_key(want, sizeof(want), tt, k);
			if (!got || kn != strlen(want) || memcmp(got, want, kn))
				ret = fail_seed(run->seed, "seek to %s: got '%.*s', want %s", key,
				                (int)kn, got ? got : "", want);
		} else if (engine_iter_valid(it)) {
			ret = fail_seed(run->seed, "seek to %s: valid past the last key", key);
		}
		engine_iter_free(it);
	}
	if (ret)
		return ret;

	for (unsigned t = 0; t < run->nthreads; t++) {
		for (unsigned k = 0; k < EC_KEYS; k++) {
			char key[32];
			void *v = NULL;
			size_t vn = 0;
			struct ec_found g = {-1, 0};

			make_key(key, sizeof(key), t, k);
			rc = engine_get(e, key, strlen(key), &v, &vn);
			if (rc && rc != -ENOENT)
				return fail_seed(run->seed, "get %s: error %d", key, rc);
			if (!rc && decode_found(run, t, k, v, vn, &g)) {
				free(v);
				return -1;
			}
			free(v);
			if (g.op != found[t][k].op || (g.op >= 0 && g.pos != found[t][k].pos))
				return fail_seed(run->seed, "%s: get says op %d, scan says op %d",
				                 key, g.op, found[t][k].op);
		}
	}
	return 0;
}

/*
 * cand[t][p] = 1 when the state found for thread t equals the thread's
 * first p writes applied.
 */
static void candidates(const struct ec_run *run, struct ec_found found[EC_MAXT][EC_KEYS],
                       uint8_t *cand[EC_MAXT])
{
	for (unsigned t = 0; t < run->nthreads; t++) {
		const struct ec_thread *th = &run->th[t];
		int mop[EC_KEYS], mpos[EC_KEYS];
		unsigned mism = 0;

		for (unsigned k = 0; k < EC_KEYS; k++) {
			mop[k] = -1;
			mpos[k] = 0;
			mism += found[t][k].op != -1;
		}
		cand[t][0] = mism == 0;
		for (unsigned p = 1; p <= th->n; p++) {
			const struct ec_op *op = &th->ops[p - 1];

			for (unsigned i = 0; i < op->n; i++) {
				unsigned k = op->key[i];
				bool was = mop[k] == found[t][k].op &&
				           (mop[k] < 0 || mpos[k] == found[t][k].pos);

				mop[k] = op->vlen[i] == EC_DEL ? -1 : (int)(p - 1);
				mpos[k] = (int)i;
				bool now = mop[k] == found[t][k].op &&
				           (mop[k] < 0 || mpos[k] == found[t][k].pos);

				mism += (unsigned)(was && !now);
				mism -= (unsigned)(!was && now);
			}
			cand[t][p] = mism == 0;
		}
	}
}

/* Smallest candidate prefix >= lo, or -1. */
static int next_cand(const uint8_t *cand, unsigned n, unsigned lo)
{
	for (unsigned p = lo; p <= n; p++)
		if (cand[p])
			return (int)p;
	return -1;
}

/* Describe the key state of thread t against its prefix p, for a failure. */
static void explain(const struct ec_run *run, unsigned t, unsigned p,
                    struct ec_found found[EC_MAXT][EC_KEYS])
{
	const struct ec_thread *th = &run->th[t];
	int mop[EC_KEYS], mpos[EC_KEYS];

	for (unsigned k = 0; k < EC_KEYS; k++)
		mop[k] = -1;
	for (unsigned i = 0; i < p; i++)
		for (unsigned j = 0; j < th->ops[i].n; j++) {
			mop[th->ops[i].key[j]] = th->ops[i].vlen[j] == EC_DEL ? -1 : (int)i;
			mpos[th->ops[i].key[j]] = (int)j;
		}
	for (unsigned k = 0; k < EC_KEYS; k++)
		if (mop[k] != found[t][k].op || (mop[k] >= 0 && mpos[k] != found[t][k].pos))
			fprintf(stderr, "  t%u/k%03u: after %u writes expect op %d, found op %d\n",
			        t, k, p, mop[k], found[t][k].op);
	fprintf(stderr, "  thread %u issued %u writes:", t, th->n);
	for (unsigned i = 0; i < th->n && i < 400; i++)
		fprintf(stderr, " %u%s%s[%" PRIu64 ",%" PRIu64 "]%s", i,
		        th->ops[i].batch               ? "B"
		        : th->ops[i].vlen[0] == EC_DEL ? "D"
		                                       : "P",
		        th->ops[i].acked ? "a" : "", th->ops[i].s_start, th->ops[i].s_end,
		        th->ops[i].rc ? "!" : "");
	fputc('\n', stderr);
}

/* The invariants of the file header, over the state found after reopen. */
static int check_model(struct ec_run *run, struct ec_found found[EC_MAXT][EC_KEYS], bool clean,
                       uint64_t *acked_total, uint64_t *survived_total)
{
	uint8_t *cand[EC_MAXT] = {0};
	unsigned acked[EC_MAXT] = {0};
	int p[EC_MAXT];
	int ret = 0;

	for (unsigned t = 0; t < run->nthreads; t++) {
		cand[t] = calloc(run->th[t].n + 1, 1);
		if (!cand[t]) {
			ret = fail_seed(run->seed, "out of memory");
			goto out;
		}
	}
	candidates(run, found, cand);

	/* What is acknowledged, per thread: a prefix. */
	for (unsigned t = 0; t < run->nthreads; t++) {
		const struct ec_thread *th = &run->th[t];

		for (unsigned i = 0; i < th->n; i++)
			if (th->ops[i].acked)
				acked[t] = i + 1;
		if (clean)
			acked[t] = th->n;
	}
	for (unsigned s = 0; s < run->nthreads; s++) {
		for (unsigned j = 0; j < run->th[s].nsync; j++) {
			const struct ec_sync *sy = &run->th[s].syncs[j];

			if (sy->rc)
				continue;
			for (unsigned t = 0; t < run->nthreads; t++)
				for (unsigned i = 0; i < run->th[t].n; i++)
					if (run->th[t].ops[i].s_end < sy->s_start &&
					    i + 1 > acked[t])
						acked[t] = i + 1;
		}
	}
	for (unsigned t = 0; t < run->nthreads; t++) {
		p[t] = next_cand(cand[t], run->th[t].n, acked[t]);
		if (p[t] < 0) {
			int any = next_cand(cand[t], run->th[t].n, 0);

			if (any < 0)
				ret = fail_seed(run->seed,
				                "thread %u: the state found is no prefix of its "
				                "writes (torn batch or reordering)",
				                t);
			else
				ret = fail_seed(run->seed,
				                "thread %u: acknowledged write %u lost (state is "
				                "its first %d writes)",
				                t, acked[t] - 1, any);
			explain(run, t, acked[t], found);
			goto out;
		}
	}
	/* Least fixed point of "survived(B_j) => survived(A_i) when A_i returned
	 * before B_j started". */
	for (bool changed = true; changed;) {
		changed = false;
		for (unsigned bt = 0; bt < run->nthreads; bt++) {
			if (p[bt] == 0)
				continue;
			uint64_t s = run->th[bt].ops[p[bt] - 1].s_start;

			for (unsigned at = 0; at < run->nthreads; at++) {
				const struct ec_thread *a = &run->th[at];
				unsigned need = 0;

				while (need < a->n && a->ops[need].s_end < s)
					need++;
				if ((unsigned)p[at] >= need)
					continue;
				int np = next_cand(cand[at], a->n, need);

				if (np < 0) {
					ret = fail_seed(
					    run->seed,
					    "order: thread %u write %d survived but thread "
					    "%u write %u, which returned before it was "
					    "issued, is lost",
					    bt, p[bt] - 1, at, need - 1);
					explain(run, at, need, found);
					goto out;
				}
				p[at] = np;
				changed = true;
			}
		}
	}
	for (unsigned t = 0; t < run->nthreads; t++) {
		*acked_total += acked[t];
		*survived_total += (unsigned)p[t];
	}
out:
	for (unsigned t = 0; t < run->nthreads; t++)
		free(cand[t]);
	return ret;
}

/* ------------------------------------------------------------------ */
/* One seed                                                            */
/* ------------------------------------------------------------------ */

static struct ec_crash_totals totals;

void ec_crash_get_totals(struct ec_crash_totals *t)
{
	*t = totals;
}

static const char *volatile phase = "start";

/* Put, sync, reopen and read a few keys: writes after recovery last. */
static int after_recovery(struct ec_run *run, const struct ec_backing *bk,
                          const struct engine_opts *eo, struct ec_found found[EC_MAXT][EC_KEYS])
{
	struct store *st = NULL;
	struct engine *e = NULL;
	struct ec_found again[EC_MAXT][EC_KEYS];
	int rc, ret = -1;

	phase = "post-recovery writes";
	if ((rc = ec_backing_open(bk, &st)) || (rc = engine_open(st, eo, &e))) {
		fail_seed(run->seed, "second reopen failed: %d", rc);
		goto out;
	}
	for (unsigned i = 0; i < 4; i++) {
		char key[16], val[64];

		snprintf(key, sizeof(key), "z/%u", i);
		snprintf(val, sizeof(val), "after-%" PRIu64 "-%u", run->seed, i);
		rc = engine_put(e, key, strlen(key), val, strlen(val), i == 3 ? ENGINE_WAIT : 0,
		                NULL);
		if (rc) {
			fail_seed(run->seed, "put after recovery: %d", rc);
			goto out;
		}
	}
	rc = engine_close(e);
	e = NULL;
	if (rc) {
		fail_seed(run->seed, "close after recovery: %d", rc);
		goto out;
	}
	phase = "third open";
	if ((rc = engine_open(st, eo, &e))) {
		fail_seed(run->seed, "third open failed: %d", rc);
		goto out;
	}
	for (unsigned i = 0; i < 4; i++) {
		char key[16], val[64];
		void *v = NULL;
		size_t vn = 0;

		snprintf(key, sizeof(key), "z/%u", i);
		snprintf(val, sizeof(val), "after-%" PRIu64 "-%u", run->seed, i);
		rc = engine_get(e, key, strlen(key), &v, &vn);
		if (rc || vn != strlen(val) || memcmp(v, val, vn)) {
			free(v);
			fail_seed(run->seed, "write after recovery %s lost (rc %d)", key, rc);
			goto out;
		}
		free(v);
	}
	if (read_state(run, e, again))
		goto out;
	if (memcmp(again, found, sizeof(again))) {
		fail_seed(run->seed, "state changed between the recovery open and the next one");
		goto out;
	}
	ret = 0;
out:
	engine_close(e);
	store_close(st);
	return ret;
}

static volatile uint64_t current_seed;

/* A crash of the test process itself still names the seed. */
static void fatal_handler(int sig)
{
	char msg[96];
	int n = snprintf(msg, sizeof(msg), "FAIL seed %llu: signal %d in phase '%s'\n",
	                 (unsigned long long)current_seed, sig, phase);

	if (write(2, msg, (size_t)n) < 0)
		_exit(1);
	signal(sig, SIG_DFL);
	raise(sig);
}

static void alarm_handler(int sig)
{
	(void)sig;
	fprintf(stderr, "FAIL seed %llu: hung in phase '%s' (watchdog)\n",
	        (unsigned long long)current_seed, phase);
	if (getenv("EC_GDB")) { /* EC_GDB=1: show where every thread is */
		char cmd[160];

		snprintf(cmd, sizeof(cmd),
		         "gdb -p %d -batch -ex 'thread apply all bt' </dev/null 1>&2 2>/dev/null",
		         (int)getpid());
		if (system(cmd))
			fprintf(stderr, "(gdb failed)\n");
	}
	_exit(1);
}

int ec_crash_seed(enum ec_kind kind, uint64_t seed, bool verbose)
{
	struct ec_run *run = calloc(1, sizeof(*run));
	struct ec_backing bk;
	struct store *inner = NULL, *inner2 = NULL;
	struct engine_opts eo, ro;
	struct rng r = {seed};
	pthread_t tids[EC_MAXT];
	char tag[32];
	int rc, ret = -1;
	bool clean, crashed_mid = false, open_crash;
	static struct ec_found found[EC_MAXT][EC_KEYS];
	struct timespec t0, t1;

	if (!run)
		return fail_seed(seed, "out of memory");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	current_seed = seed;
	signal(SIGALRM, alarm_handler);
	signal(SIGSEGV, fatal_handler);
	signal(SIGBUS, fatal_handler);
	signal(SIGABRT, fatal_handler);
	signal(SIGFPE, fatal_handler);
	alarm(kind == EC_S3 ? 120 : getenv("EC_GDB") ? 8 : 30);
	snprintf(tag, sizeof(tag), "s%" PRIu64, seed);
	rc = ec_backing_new(kind, tag, &bk);
	if (rc) {
		free(run);
		return rc == 77 ? 77 : fail_seed(seed, "backing store: %d", rc);
	}
	run->seed = seed;
	run->nthreads = (unsigned)rnd_range(&r, 1, EC_MAXT);
	run->inline_max = chance(&r, 50) ? 256 : 4096;
	engine_opts_default(&eo);
	eo.cadence_ms = (unsigned)rnd_range(&r, 5, 20);
	eo.inline_max = run->inline_max;
	/* transient faults are retried for a moment; a crashed store gives up soon */
	eo.commit_retry_ms = chance(&r, 50) ? ENGINE_NO_RETRY : 100;
	if (chance(&r, 30))
		eo.group_max_bytes = 32 * 1024;
	/* blobs in the WAL entries (the default), all in packs, or a few then packs */
	int wb = (int)rnd_range(&r, 0, 2);
	eo.wal_blob_max = wb == 0 ? ENGINE_WAL_BLOBS_OFF : wb == 1 ? 8 * 1024 : 0;
	/* one group at a time, or several in flight (entries: up to WAL_WINDOW at once) */
	eo.commit_inflight = 1u << rnd_range(&r, 0, 3);
	/* entries in flight land out of order: crashes leave gaps (docs/WAL.md) */
	bool jitter = eo.commit_inflight > 1 && chance(&r, 50);
	bool small_mem = chance(&r, 40);

	if (small_mem) { /* freeze and flush often (128 KiB: the engine's minimum) */
		eo.memtable_max_bytes = 128 * 1024;
		eo.inline_max = run->inline_max = 4096;
	}
	clean = chance(&r, 10);
	open_crash = !clean && chance(&r, 25);
	for (unsigned t = 0; t < run->nthreads; t++) {
		run->th[t].run = run;
		run->th[t].t = t;
		run->th[t].nops = (unsigned)rnd_range(&r, 20,
		                                      kind == EC_S3 ? 60
		                                      : small_mem   ? 250
		                                                    : 120);
		run->th[t].ops = calloc(run->th[t].nops, sizeof(struct ec_op));
		if (!run->th[t].ops) {
			fail_seed(seed, "out of memory");
			goto out;
		}
	}

	phase = "open";
	if ((rc = ec_backing_open(&bk, &inner))) {
		fail_seed(seed, "open backing store: %d", rc);
		goto out;
	}
	if ((rc = fault_store_new(inner, &run->fs))) {
		fail_seed(seed, "fault wrapper: %d", rc);
		goto out;
	}
	inner = NULL; /* owned by the wrapper */
	fault_store_seed(run->fs, seed);
	if (jitter)
		fault_store_jitter(run->fs, FAULT_M(FAULT_OP_PUT_IF_ABSENT) | FAULT_M(FAULT_OP_PUT),
		                   kind == EC_S3 ? 20000 : 3000);
	run->fault = fault_store_as_store(run->fs);
	if ((rc = engine_open(run->fault, &eo, &run->e))) {
		fail_seed(seed, "first engine_open: %d", rc);
		goto out;
	}
	if (!clean)
		fault_store_crash_at(run->fs, FAULT_ALL,
		                     rnd_range(&r, 1,
		                               kind == EC_S3 ? 30
		                               : small_mem   ? 150
		                                             : 50),
		                     chance(&r, 50) ? FAULT_LAND_YES : FAULT_LAND_NO);

	phase = "workload";
	for (unsigned t = 0; t < run->nthreads; t++)
		if (pthread_create(&tids[t], NULL, workload, &run->th[t])) {
			fail_seed(seed, "pthread_create");
			for (unsigned j = 0; j < t; j++)
				pthread_join(tids[j], NULL);
			goto out;
		}
	for (unsigned t = 0; t < run->nthreads; t++)
		pthread_join(tids[t], NULL);
	for (unsigned t = 0; t < run->nthreads; t++)
		if (run->th[t].fail[0]) {
			fail_seed(seed, "thread %u: %s", t, run->th[t].fail);
			goto out;
		}
	for (unsigned t = 0; t < run->nthreads; t++)
		totals.ops += run->th[t].n;

	phase = "crash+close";
	{
		struct engine_stats es;

		engine_get_stats(run->e, &es);
		totals.flushes += es.flushes;
		totals.frozen += es.frozen_count + es.flushes;
	}
	if (clean) {
		rc = engine_close(run->e);
		run->e = NULL;
		if (rc) {
			fail_seed(seed, "clean close failed: %d", rc);
			goto out;
		}
		totals.clean++;
	} else {
		crashed_mid = fault_store_crashed(run->fs);
		fault_store_crash(run->fs);
		rc = engine_close(run->e); /* must fail or succeed, never hang */
		run->e = NULL;
		if (crashed_mid)
			totals.crashed_mid++;
		else
			totals.crashed_end++;
	}
	store_close(run->fault); /* closes the inner store too */
	run->fault = NULL;
	run->fs = NULL;

	if ((rc = ec_backing_open(&bk, &inner))) {
		fail_seed(seed, "reopen backing store: %d", rc);
		goto out;
	}
	if (open_crash) { /* a recovery that crashes too */
		struct fault_store *f = NULL;
		struct engine *e2 = NULL;

		phase = "crashed recovery";
		totals.open_crashes++;
		if ((rc = ec_backing_open(&bk, &inner2)) || (rc = fault_store_new(inner2, &f))) {
			fail_seed(seed, "fault wrapper: %d", rc);
			goto out;
		}
		inner2 = NULL;
		fault_store_seed(f, seed ^ 0x5a5a);
		fault_store_crash_at(f, FAULT_ALL, rnd_range(&r, 1, 8),
		                     chance(&r, 50) ? FAULT_LAND_YES : FAULT_LAND_NO);
		if (!engine_open(fault_store_as_store(f), &eo, &e2)) {
			/* outside the model's scan range [t, u) */
			engine_put(e2, "y/0", 3, "x", 1, ENGINE_WAIT, NULL);
			fault_store_crash(f);
			engine_close(e2);
		}
		store_close(fault_store_as_store(f));
	}

	phase = "recovery";
	ro = eo;
	if ((rc = engine_open(inner, &ro, &run->e))) {
		fail_seed(seed, "engine_open after crash: %d", rc);
		goto out;
	}
	{
		struct engine_stats es;

		engine_get_stats(run->e, &es);
		totals.gaps += es.replay_gap_entries > 0;
	}
	phase = "verify";
	if (read_state(run, run->e, found))
		goto out;
	if (check_model(run, found, clean, &totals.acked, &totals.survived))
		goto out;
	rc = engine_close(run->e);
	run->e = NULL;
	if (rc) {
		fail_seed(seed, "close of the recovered engine: %d", rc);
		goto out;
	}
	if (after_recovery(run, &bk, &eo, found))
		goto out;
	ret = 0;
	totals.seeds++;
	if (verbose) {
		unsigned n = 0;

		for (unsigned t = 0; t < run->nthreads; t++)
			n += run->th[t].n;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("seed %" PRIu64 ": ok, %u threads, %u writes, %s (%.1f s)\n", seed,
		       run->nthreads, n,
		       clean         ? "clean close"
		       : crashed_mid ? "crash during workload"
		                     : "crash after workload",
		       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	}
out:
	alarm(0);
	phase = "cleanup";
	engine_close(run->e);
	store_close(run->fault);
	store_close(inner);
	store_close(inner2);
	if (ret && getenv("EC_KEEP_FAILED") && kind == EC_LOCAL)
		fprintf(stderr, "  kept objects in %s\n", bk.dir);
	else
		ec_backing_destroy(&bk);
	for (unsigned t = 0; t < EC_MAXT; t++)
		free(run->th[t].ops);
	free(run);
	return ret;
}
