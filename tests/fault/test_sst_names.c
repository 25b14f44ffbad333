/*
 * test_sst_names.c - every flush or compaction attempt writes an SSTable
 * name that no other attempt takes, so a request of a failed attempt that
 * lands late cannot overwrite (or delete) a table a manifest references
 * (issue 9, part 2; suite fault).
 *
 * The engine runs over
 *
 *     fault wrapper (s3/fault.h) -> late store (below) -> local store
 *
 * The late store records every write that reaches the local store (kind,
 * key, bytes, answer) and can hold one request back: it reports an error
 * to the engine at once, like a client timeout, and performs the request
 * later, right before or right after a later call of a chosen kind: a
 * retried PUT or a multipart completion that lands after the client gave
 * up.  The fault wrapper gives the other case: FAULT_LAND performs the call
 * at once and reports failure anyway.
 *
 * Cases (each checks that no SSTable name is written twice, that every
 * table the newest manifest references holds the bytes its own upload
 * wrote, and that a reopen reads exactly the acknowledged data):
 *   - a flush whose upload lands but reports failure is retried under a
 *     new name; GC run while the retry's table is uploaded but not yet
 *     committed keeps both tables, GC after the commit deletes the orphan;
 *     a late copy of the first attempt written afterwards changes nothing;
 *   - a flush upload that lands late, after the retry's upload;
 *   - a manifest commit that lands late, before the retry commits: the
 *     retry finds its version taken and deletes only its own table, so
 *     the table the landed manifest references is intact;
 *   - the same manifest landing after the retry's commit: -EEXIST, no effect;
 *   - a compaction output that lands late, after the next flush uploaded
 *     its table (with the id reused, it would replace that table).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine.h"
#include "fault.h"
#include "maint.h"
#include "manifest.h"
#include "store.h"
#include "store_impl.h" /* the late store is a backend, like s3/fault.c */
#include "testutil.h"

#define SST_PFX "sst/"
#define MAN_PFX "manifest/"
#define NKEYS 48

/* ------------------------------------------------------------------ */
/* The late store                                                      */
/* ------------------------------------------------------------------ */

/* Kinds of calls the late store records, holds and lands after. */
enum late_kind { LK_PUT = 0, LK_PIA, LK_FINISH, LK_DELETE };

/* One write that reached the inner store. */
struct late_rec {
	enum late_kind kind; /* what kind of call */
	char *key;           /* its key (malloc()ed) */
	uint8_t *buf;        /* the bytes written: puts, finishes (malloc()ed; NULL for deletes) */
	size_t len;          /* bytes in buf */
	int rc;              /* the inner store's answer */
	bool late;           /* the held request, landing late */
};

/* The wrapper.  Its store calls run without mu (a hook may call back in). */
struct late_store {
	struct store base;           /* must be first */
	struct store *inner;         /* owned */
	pthread_mutex_t mu;          /* protects the fields below */
	struct late_rec *recs;       /* every write that reached inner, in order */
	size_t nrecs, caprecs;       /* used / allocated entries of recs */
	int hold_kind;               /* hold the next call of this kind (-1: none) ... */
	const char *hold_pfx;        /* ... on a key with this prefix ... */
	int hold_err;                /* ... answering it with this error */
	enum late_kind land_kind;    /* land the held request at the next call of this kind ... */
	const char *land_pfx;        /* ... on a key with this prefix ... */
	bool land_before;            /* ... right before it (else right after it) */
	bool held, landed;           /* a request is held; it has landed */
	enum late_kind held_kind;    /* the held request: its kind, */
	char *held_key;              /* key (malloc()ed), */
	uint8_t *held_buf;           /* bytes (malloc()ed), */
	size_t held_len;             /* their length, */
	struct store_writer *held_w; /* and for a finish the inner writer, still open */
	int landed_rc;               /* the inner store's answer to the late landing */
	void (*hook)(void *arg);     /* run once, after the hook_at-th landed SSTable finish */
	void *hook_arg;              /* its argument */
	unsigned hook_at;            /* which finish (1-based) */
	unsigned sst_finishes;       /* landed SSTable finishes so far */
};

/* A streaming writer of the late store: passes through, keeps a copy of the bytes. */
struct late_writer {
	struct store_writer base;   /* must be first */
	struct store_writer *inner; /* the inner store's writer */
	struct late_store *ls;      /* the store it writes to */
	char *key;                  /* its key (malloc()ed) */
	uint8_t *buf;               /* every byte written so far (malloc()ed) */
	size_t len, cap;            /* used / allocated bytes of buf */
};

static bool has_pfx(const char *key, const char *pfx)
{
	return strncmp(key, pfx, strlen(pfx)) == 0;
}

static void *dup_bytes(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);

	assert_non_null(q);
	if (n && p)
		memcpy(q, p, n);
	return q;
}

static void record(struct late_store *ls, enum late_kind kind, const char *key, const void *buf,
                   size_t len, int rc, bool late)
{
	struct late_rec *r;

	pthread_mutex_lock(&ls->mu);
	if (ls->nrecs == ls->caprecs) {
		ls->caprecs = ls->caprecs ? 2 * ls->caprecs : 64;
		ls->recs = realloc(ls->recs, ls->caprecs * sizeof(*ls->recs));
		assert_non_null(ls->recs);
	}
	r = &ls->recs[ls->nrecs++];
	r->kind = kind;
	r->key = strdup(key);
	r->buf = buf ? dup_bytes(buf, len) : NULL;
	r->len = len;
	r->rc = rc;
	r->late = late;
	pthread_mutex_unlock(&ls->mu);
}

/*
 * Should this call be held back?  If so it is taken whole: a copy of buf,
 * or for a finish the inner writer w and the bytes *wbuf (ownership moves:
 * *wbuf becomes NULL).
 */
static bool take_hold(struct late_store *ls, enum late_kind kind, const char *key, const void *buf,
                      size_t len, struct store_writer *w, uint8_t **wbuf)
{
	bool take;

	pthread_mutex_lock(&ls->mu);
	take = ls->hold_kind == (int)kind && !ls->held && has_pfx(key, ls->hold_pfx);
	if (take) {
		ls->held = true;
		ls->held_kind = kind;
		ls->held_key = strdup(key);
		ls->held_len = len;
		if (w) {
			ls->held_w = w;
			ls->held_buf = *wbuf;
			*wbuf = NULL;
		} else {
			ls->held_buf = dup_bytes(buf, len);
		}
		ls->hold_kind = -1;
	}
	pthread_mutex_unlock(&ls->mu);
	return take;
}

/* Land the held request if this call (kind, key, before/after it) is its trigger. */
static void maybe_land(struct late_store *ls, enum late_kind kind, const char *key, bool before)
{
	bool go;
	int rc = 0;

	pthread_mutex_lock(&ls->mu);
	go = ls->held && !ls->landed && ls->land_kind == kind && ls->land_before == before &&
	     has_pfx(key, ls->land_pfx);
	if (go)
		ls->landed = true;
	pthread_mutex_unlock(&ls->mu);
	if (!go)
		return;
	switch (ls->held_kind) {
	case LK_PIA:
		rc = store_put_if_absent(ls->inner, ls->held_key, ls->held_buf, ls->held_len);
		break;
	case LK_PUT:
		rc = store_put(ls->inner, ls->held_key, ls->held_buf, ls->held_len);
		break;
	case LK_FINISH:
		rc = store_writer_finish(ls->held_w);
		ls->held_w = NULL;
		break;
	case LK_DELETE:
		rc = store_delete(ls->inner, ls->held_key);
		break;
	}
	print_message("late store: held %s landed late: %d\n", ls->held_key, rc);
	record(ls, ls->held_kind, ls->held_key, ls->held_buf, ls->held_len, rc, true);
	ls->landed_rc = rc;
}

/* A put or put_if_absent: held, or passed on (landing the held one around it). */
static int put_common(struct late_store *ls, enum late_kind kind, const char *key, const void *buf,
                      size_t len)
{
	int rc;

	if (take_hold(ls, kind, key, buf, len, NULL, NULL))
		return ls->hold_err;
	maybe_land(ls, kind, key, true);
	rc = kind == LK_PIA ? store_put_if_absent(ls->inner, key, buf, len)
	                    : store_put(ls->inner, key, buf, len);
	record(ls, kind, key, buf, len, rc, false);
	maybe_land(ls, kind, key, false);
	return rc;
}

static int l_put(struct store *s, const char *key, const void *buf, size_t len)
{
	return put_common((struct late_store *)s, LK_PUT, key, buf, len);
}

static int l_put_if_absent(struct store *s, const char *key, const void *buf, size_t len)
{
	return put_common((struct late_store *)s, LK_PIA, key, buf, len);
}

static int l_get(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
                 size_t *outlen)
{
	return store_get(((struct late_store *)s)->inner, key, off, len, out, outlen);
}

static int l_head(struct store *s, const char *key, struct store_stat *st)
{
	return store_head(((struct late_store *)s)->inner, key, st);
}

static int l_list(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
                  store_list_fn fn, void *arg)
{
	return store_list(((struct late_store *)s)->inner, prefix, start_after, max_keys, fn, arg);
}

static int l_delete(struct store *s, const char *key)
{
	struct late_store *ls = (struct late_store *)s;
	int rc = store_delete(ls->inner, key);

	record(ls, LK_DELETE, key, NULL, 0, rc, false);
	return rc;
}

static int l_delete_many(struct store *s, const char *const *keys, size_t n)
{
	struct late_store *ls = (struct late_store *)s;
	int rc = store_delete_many(ls->inner, keys, n);

	for (size_t i = 0; i < n; i++)
		record(ls, LK_DELETE, keys[i], NULL, 0, rc, false);
	return rc;
}

static int l_cleanup(struct store *s, const char *prefix, unsigned older_than_sec, unsigned *n)
{
	return store_cleanup_uploads(((struct late_store *)s)->inner, prefix, older_than_sec, n);
}

static int lw_write(struct store_writer *w, const void *buf, size_t len)
{
	struct late_writer *lw = (struct late_writer *)w;

	if (lw->len + len > lw->cap) {
		lw->cap = 2 * (lw->len + len);
		lw->buf = realloc(lw->buf, lw->cap);
		assert_non_null(lw->buf);
	}
	memcpy(lw->buf + lw->len, buf, len);
	lw->len += len;
	return store_writer_write(lw->inner, buf, len);
}

static void lw_free(struct late_writer *lw)
{
	free(lw->key);
	free(lw->buf);
	free(lw);
}

static int lw_finish(struct store_writer *w)
{
	struct late_writer *lw = (struct late_writer *)w;
	struct late_store *ls = lw->ls;
	bool run_hook = false;
	int rc;

	if (take_hold(ls, LK_FINISH, lw->key, NULL, lw->len, lw->inner, &lw->buf)) {
		/* the upload stays open on the inner store; the caller sees a timeout */
		rc = ls->hold_err;
		lw_free(lw);
		return rc;
	}
	maybe_land(ls, LK_FINISH, lw->key, true);
	rc = store_writer_finish(lw->inner);
	record(ls, LK_FINISH, lw->key, lw->buf, lw->len, rc, false);
	maybe_land(ls, LK_FINISH, lw->key, false);
	if (rc == 0 && has_pfx(lw->key, SST_PFX)) {
		pthread_mutex_lock(&ls->mu);
		run_hook = ls->hook && ++ls->sst_finishes == ls->hook_at;
		pthread_mutex_unlock(&ls->mu);
	}
	lw_free(lw);
	if (run_hook)
		ls->hook(ls->hook_arg);
	return rc;
}

static void lw_abort(struct store_writer *w)
{
	struct late_writer *lw = (struct late_writer *)w;

	store_writer_abort(lw->inner);
	lw_free(lw);
}

static const struct store_writer_ops late_writer_ops = {
    .write = lw_write,
    .finish = lw_finish,
    .abort = lw_abort,
};

static int l_writer_open(struct store *s, const char *key, int flags, struct store_writer **out)
{
	struct late_store *ls = (struct late_store *)s;
	struct late_writer *lw = calloc(1, sizeof(*lw));
	int rc;

	assert_non_null(lw);
	rc = store_writer_open(ls->inner, key, flags, &lw->inner);
	if (rc) {
		free(lw);
		return rc;
	}
	lw->base.ops = &late_writer_ops;
	lw->base.store = s;
	lw->ls = ls;
	lw->key = strdup(key);
	*out = &lw->base;
	return 0;
}

static void l_close(struct store *s)
{
	struct late_store *ls = (struct late_store *)s;

	if (ls->held_w)
		store_writer_abort(ls->held_w); /* never landed */
	for (size_t i = 0; i < ls->nrecs; i++) {
		free(ls->recs[i].key);
		free(ls->recs[i].buf);
	}
	free(ls->recs);
	free(ls->held_key);
	free(ls->held_buf);
	store_close(ls->inner);
	pthread_mutex_destroy(&ls->mu);
	free(ls);
}

static const struct store_ops late_ops = {
    .put = l_put,
    .put_if_absent = l_put_if_absent,
    .get = l_get,
    .head = l_head,
    .list = l_list,
    .del = l_delete,
    .delete_many = l_delete_many,
    .writer_open = l_writer_open,
    .cleanup_uploads = l_cleanup,
    .close = l_close,
};

/* Wrap inner (owned from now on). */
static struct late_store *late_new(struct store *inner)
{
	struct late_store *ls = calloc(1, sizeof(*ls));

	assert_non_null(ls);
	store_init(&ls->base, &late_ops);
	ls->base.caps = *store_caps(inner);
	ls->inner = inner;
	ls->hold_kind = -1;
	pthread_mutex_init(&ls->mu, NULL);
	return ls;
}

/* Arm: hold the next call of kind under hold_pfx (err to the caller); land it
 * before (or after) the next call of land_kind under land_pfx. */
static void late_arm(struct late_store *ls, enum late_kind kind, const char *hold_pfx, int err,
                     enum late_kind land_kind, const char *land_pfx, bool land_before)
{
	pthread_mutex_lock(&ls->mu);
	ls->hold_kind = (int)kind;
	ls->hold_pfx = hold_pfx;
	ls->hold_err = err;
	ls->land_kind = land_kind;
	ls->land_pfx = land_pfx;
	ls->land_before = land_before;
	pthread_mutex_unlock(&ls->mu);
}

/* ------------------------------------------------------------------ */
/* Fixture and checks                                                  */
/* ------------------------------------------------------------------ */

struct fx {
	char *dir;             /* the local store's directory */
	struct late_store *ls; /* over a local store on dir */
	struct fault_store *f; /* over ls: what the engine uses */
	struct store *st;      /* fault_store_as_store(f) */
	struct engine *e;
	unsigned round[NKEYS]; /* the acknowledged round of each key (0: absent) */
};

static struct engine_opts test_opts(void)
{
	struct engine_opts o;

	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.inline_max = 1024; /* every fifth value is a blob in a pack */
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.gc_grace_sec = ENGINE_GC_NO_GRACE;
	o.repack_below_pct = ENGINE_GC_OFF;
	return o;
}

static size_t val_len(unsigned key)
{
	return key % 5 == 0 ? 1500 : 40 + key;
}

static void val_fill(uint8_t *v, unsigned key, unsigned round)
{
	tu_random_bytes(v, val_len(key), (uint64_t)round * 1000 + key);
}

static void key_name(char *buf, size_t n, unsigned key)
{
	snprintf(buf, n, "k/%04u", key);
}

static void fx_open(struct fx *x)
{
	struct store *local = NULL;
	struct engine_opts o = test_opts();

	memset(x, 0, sizeof(*x));
	x->dir = tu_tempdir();
	assert_non_null(x->dir);
	assert_int_equal(store_open_local(x->dir, &local), 0);
	x->ls = late_new(local);
	assert_int_equal(fault_store_new(&x->ls->base, &x->f), 0);
	x->st = fault_store_as_store(x->f);
	assert_int_equal(engine_open(x->st, &o, &x->e), 0);
}

/* Close the engine (its error is the test's to judge) and the stores. */
static int fx_close_engine(struct fx *x)
{
	int rc = engine_close(x->e);

	x->e = NULL;
	return rc;
}

static void fx_free(struct fx *x)
{
	if (x->e)
		engine_close(x->e);
	store_close(x->st); /* closes ls and the local store */
	tu_rmtree(x->dir);
	free(x->dir);
}

/* Put keys [from, to) with values of round r, durably. */
static void put_round(struct fx *x, unsigned from, unsigned to, unsigned r)
{
	uint8_t v[2048];
	char k[16];

	for (unsigned i = from; i < to; i++) {
		key_name(k, sizeof(k), i);
		val_fill(v, i, r);
		assert_int_equal(engine_put(x->e, k, strlen(k), v, val_len(i), 0, NULL), 0);
		x->round[i] = r;
	}
	assert_int_equal(engine_sync(x->e), 0);
}

/* Every key reads as its acknowledged round. */
static void check_data(struct engine *e, const unsigned *round, const char *what)
{
	uint8_t want[2048];
	char k[16];

	for (unsigned i = 0; i < NKEYS; i++) {
		void *v = NULL;
		size_t n = 0;
		int rc;

		key_name(k, sizeof(k), i);
		rc = engine_get(e, k, strlen(k), &v, &n);
		if (round[i] == 0) {
			if (rc != -ENOENT)
				fail_msg("%s: %s should be absent: %d", what, k, rc);
		} else {
			val_fill(want, i, round[i]);
			if (rc || n != val_len(i) || memcmp(v, want, n) != 0)
				fail_msg("%s: %s: rc %d, %zu bytes, want round %u", what, k, rc, n,
				         round[i]);
		}
		free(v);
	}
}

/* Open a new engine straight on the directory (no wrappers) and check the data. */
static void check_reopen(struct fx *x, const char *what)
{
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o = test_opts();
	int rc;

	assert_int_equal(store_open_local(x->dir, &st), 0);
	rc = engine_open(st, &o, &e);
	if (rc)
		fail_msg("%s: reopen failed: %d", what, rc);
	check_data(e, x->round, what);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * Writes of key that reached the store (puts and finishes, any answer),
 * a held one included.  Caller holds ls->mu.
 */
static unsigned writes_of_locked(struct late_store *ls, const char *key)
{
	unsigned n = 0;

	for (size_t i = 0; i < ls->nrecs; i++)
		if (ls->recs[i].kind != LK_DELETE && strcmp(ls->recs[i].key, key) == 0)
			n++;
	if (ls->held && !ls->landed && strcmp(ls->held_key, key) == 0)
		n++;
	return n;
}

/* Deletes of key that reached the store. */
static unsigned deletes_of(struct late_store *ls, const char *key)
{
	unsigned n = 0;

	pthread_mutex_lock(&ls->mu);
	for (size_t i = 0; i < ls->nrecs; i++)
		if (ls->recs[i].kind == LK_DELETE && strcmp(ls->recs[i].key, key) == 0)
			n++;
	pthread_mutex_unlock(&ls->mu);
	return n;
}

/* No SSTable name was ever written twice; returns how many were written. */
static unsigned check_sst_names_unique(struct late_store *ls, const char *what)
{
	unsigned names = 0;

	pthread_mutex_lock(&ls->mu);
	for (size_t i = 0; i < ls->nrecs; i++) {
		const struct late_rec *r = &ls->recs[i];
		bool first = true;

		if (r->kind == LK_DELETE || !has_pfx(r->key, SST_PFX))
			continue;
		for (size_t j = 0; j < i && first; j++)
			if (ls->recs[j].kind != LK_DELETE && strcmp(ls->recs[j].key, r->key) == 0)
				first = false;
		if (!first)
			continue;
		names++;
		if (writes_of_locked(ls, r->key) != 1)
			fail_msg("%s: %s written %u times", what, r->key,
			         writes_of_locked(ls, r->key));
	}
	pthread_mutex_unlock(&ls->mu);
	return names;
}

/* The first landed write of key (rc 0), or NULL.  Caller holds ls->mu. */
static const struct late_rec *landing_of_locked(struct late_store *ls, const char *key)
{
	for (size_t i = 0; i < ls->nrecs; i++)
		if (ls->recs[i].kind != LK_DELETE && ls->recs[i].rc == 0 &&
		    strcmp(ls->recs[i].key, key) == 0)
			return &ls->recs[i];
	return NULL;
}

static bool exists(struct late_store *ls, const char *key)
{
	struct store_stat s;

	return store_head(ls->inner, key, &s) == 0;
}

static bool lists_table(const struct manifest *m, const char *name)
{
	for (size_t i = 0; i < m->nssts; i++)
		if (strcmp(m->ssts[i].name, name) == 0)
			return true;
	return false;
}

/*
 * Every table of the newest manifest holds exactly the bytes of its own
 * upload, and none is named after a table of another attempt.  *m gets that
 * manifest (free with manifest_clear()).
 */
static void check_referenced(struct late_store *ls, struct manifest *m, const char *what)
{
	assert_int_equal(manifest_load_latest(ls->inner, m), 0);
	pthread_mutex_lock(&ls->mu);
	for (size_t i = 0; i < m->nssts; i++) {
		const char *name = m->ssts[i].name;
		const struct late_rec *r = landing_of_locked(ls, name);
		void *buf = NULL;
		size_t n = 0;

		if (!r)
			fail_msg("%s: %s is referenced but was never uploaded here", what, name);
		assert_int_equal(store_get(ls->inner, name, 0, STORE_TO_END, &buf, &n), 0);
		if (n != r->len || memcmp(buf, r->buf, n) != 0)
			fail_msg("%s: %s does not hold the bytes of its upload", what, name);
		if (m->ssts[i].id >= m->next_sst)
			fail_msg("%s: %s has id %" PRIu64 " >= next_sst %" PRIu64, what, name,
			         m->ssts[i].id, m->next_sst);
		free(buf);
	}
	pthread_mutex_unlock(&ls->mu);
}

/* Name of the nth (0-based) distinct SSTable written, or NULL. */
static const char *nth_sst(struct late_store *ls, unsigned nth)
{
	const char *name = NULL;
	unsigned k = 0;

	pthread_mutex_lock(&ls->mu);
	for (size_t i = 0; i < ls->nrecs && !name; i++) {
		const struct late_rec *r = &ls->recs[i];
		bool first = true;

		if (r->kind == LK_DELETE || !has_pfx(r->key, SST_PFX))
			continue;
		for (size_t j = 0; j < i && first; j++)
			if (strcmp(ls->recs[j].key, r->key) == 0)
				first = false;
		if (first && k++ == nth)
			name = r->key; /* the string stays put while ls lives */
	}
	pthread_mutex_unlock(&ls->mu);
	return name;
}

/*
 * The end of a case whose retry won: the newest manifest lists exactly one
 * table, want (holding its own upload's bytes), never gone; the data read
 * right; the engine closes cleanly and a reopen reads the same.  Frees x.
 */
static void finish_one_table(struct fx *x, const char *want, const char *gone, const char *what)
{
	struct manifest m = {0};
	char buf[160];

	check_referenced(x->ls, &m, what);
	assert_int_equal(m.nssts, 1);
	assert_string_equal(m.ssts[0].name, want);
	assert_false(lists_table(&m, gone));
	manifest_clear(&m);
	check_data(x->e, x->round, what);
	assert_int_equal(fx_close_engine(x), 0);
	snprintf(buf, sizeof(buf), "%s, reopened", what);
	check_reopen(x, buf);
	fx_free(x);
}

/* ------------------------------------------------------------------ */
/* Cases                                                               */
/* ------------------------------------------------------------------ */

/* What the GC hook saw while the retry's table was uploaded, not committed. */
struct gc_probe {
	struct fx *x;                 /* the fixture */
	int rc;                       /* maint_gc_now() */
	uint64_t deleted;             /* objects it deleted */
	bool ran;                     /* the hook ran */
	bool first_kept, second_kept; /* each table existed after it */
};

static void gc_hook(void *arg)
{
	struct gc_probe *p = arg;
	struct maint_gc_result res;

	p->rc = maint_gc_now(p->x->e, &res);
	p->deleted = res.deleted;
	p->ran = true;
	p->first_kept = nth_sst(p->x->ls, 0) && exists(p->x->ls, nth_sst(p->x->ls, 0));
	p->second_kept = nth_sst(p->x->ls, 1) && exists(p->x->ls, nth_sst(p->x->ls, 1));
}

/*
 * The flush's SSTable upload lands but reports -EIO (FAULT_LAND): the retry
 * must write another name.  GC (zero grace) while the retry's table is in
 * flight keeps it and the orphan; GC after the commit deletes the orphan.
 */
static void test_flush_upload_landed_then_retry(void **state)
{
	struct fx x;
	struct gc_probe probe = {.x = &x};
	struct maint_gc_result res;
	char first[64], second[64];

	(void)state;
	fx_open(&x);
	put_round(&x, 0, NKEYS, 1);
	x.ls->hook = gc_hook;
	x.ls->hook_arg = &probe;
	x.ls->hook_at = 2; /* after the retry's upload, before its manifest commit */
	fault_store_fail_nth(x.f, FAULT_M(FAULT_OP_WRITER_FINISH), 1, -EIO, FAULT_LAND);
	assert_int_equal(maint_flush_now(x.e), -EIO);
	assert_int_equal(fault_store_fired(x.f), 1);
	assert_int_equal(maint_flush_now(x.e), 0); /* the flusher's retry */

	assert_int_equal(check_sst_names_unique(x.ls, "flush retry"), 2);
	snprintf(first, sizeof(first), "%s", nth_sst(x.ls, 0));
	snprintf(second, sizeof(second), "%s", nth_sst(x.ls, 1));
	assert_string_not_equal(first, second);
	assert_true(exists(x.ls, first)); /* the failed attempt did land */

	/* GC in the window between the retry's upload and its commit */
	assert_true(probe.ran);
	assert_int_equal(probe.rc, 0);
	assert_true(probe.first_kept);
	assert_true(probe.second_kept);
	/* after the commit the failed attempt's table is an orphan: GC removes it */
	assert_int_equal(maint_gc_now(x.e, &res), 0);
	assert_false(exists(x.ls, first));
	assert_true(exists(x.ls, second));
	assert_int_equal(deletes_of(x.ls, second), 0);

	/* a late copy of the first attempt, after all that: nothing refers to it */
	assert_int_equal(store_put(x.ls->inner, first, "late duplicate", 14), 0);
	finish_one_table(&x, second, first, "flush retry");
}

/* The flush's upload times out and lands late, after the retry's upload. */
static void test_flush_upload_lands_late(void **state)
{
	struct fx x;
	const char *first, *second;

	(void)state;
	fx_open(&x);
	put_round(&x, 0, NKEYS, 1);
	late_arm(x.ls, LK_FINISH, SST_PFX, -ETIMEDOUT, LK_FINISH, SST_PFX, false);
	assert_int_equal(maint_flush_now(x.e), -ETIMEDOUT);
	assert_true(x.ls->held);
	assert_false(x.ls->landed);
	assert_int_equal(maint_flush_now(x.e), 0);
	assert_true(x.ls->landed);
	assert_int_equal(x.ls->landed_rc, 0);

	assert_int_equal(check_sst_names_unique(x.ls, "late upload"), 2);
	first = x.ls->held_key;
	second = nth_sst(x.ls, 0); /* the retry landed before the held one */
	assert_string_not_equal(first, second);
	finish_one_table(&x, second, first, "late upload");
}

/*
 * The flush's manifest commit times out and lands late, just before the
 * retry's commit: the retry finds its version taken by a manifest of its own
 * epoch (the earlier attempt) and commits at the next version on top of it
 * (manifest_commit_ours): the writer goes on, the newest manifest references
 * the retry's table, and the late one's table stays intact (an older kept
 * manifest references it; GC collects it later).
 */
static void test_manifest_lands_before_retry(void **state)
{
	struct fx x;
	struct manifest m = {0};
	const char *first, *second;
	int rc;

	(void)state;
	fx_open(&x);
	put_round(&x, 0, NKEYS, 1);
	late_arm(x.ls, LK_PIA, MAN_PFX, -ETIMEDOUT, LK_PIA, MAN_PFX, true);
	assert_int_equal(maint_flush_now(x.e), -ETIMEDOUT);
	assert_true(x.ls->held);
	rc = maint_flush_now(x.e);
	assert_true(x.ls->landed);
	assert_int_equal(x.ls->landed_rc, 0);
	/* the retry found its version taken by its own epoch: it went on */
	assert_int_equal(rc, 0);

	first = nth_sst(x.ls, 0);
	second = nth_sst(x.ls, 1);
	assert_string_not_equal(first, second);
	check_referenced(x.ls, &m, "manifest after retry");
	assert_int_equal(m.nssts, 1);
	assert_string_equal(m.ssts[0].name, second);
	manifest_clear(&m);
	assert_true(exists(x.ls, first)); /* the late manifest's table: intact */
	assert_int_equal(deletes_of(x.ls, first), 0);
	assert_true(exists(x.ls, second));
	assert_int_equal(check_sst_names_unique(x.ls, "manifest before retry"), 2);
	check_data(x.e, x.round, "manifest before retry");
	assert_int_equal(fx_close_engine(&x), 0);
	check_reopen(&x, "manifest before retry, reopened");
	fx_free(&x);
}

/* The same late manifest, landing after the retry committed: it loses, harmlessly. */
static void test_manifest_lands_after_retry(void **state)
{
	struct fx x;

	(void)state;
	fx_open(&x);
	put_round(&x, 0, NKEYS, 1);
	late_arm(x.ls, LK_PIA, MAN_PFX, -ETIMEDOUT, LK_PIA, MAN_PFX, false);
	assert_int_equal(maint_flush_now(x.e), -ETIMEDOUT);
	assert_int_equal(maint_flush_now(x.e), 0);
	assert_true(x.ls->landed);
	assert_int_equal(x.ls->landed_rc, -EEXIST);

	assert_int_equal(check_sst_names_unique(x.ls, "manifest after retry"), 2);
	finish_one_table(&x, nth_sst(x.ls, 1), nth_sst(x.ls, 0), "manifest after retry");
}

/*
 * A compaction output times out (the compaction is retried after the next
 * flush) and lands late, right after that flush uploaded its table.  Had
 * the flush taken the id the failed compaction used, the late output would
 * replace the flushed table and lose its writes.
 */
static void test_compaction_output_lands_late(void **state)
{
	struct fx x;
	struct manifest m = {0};
	struct engine_stats es;

	(void)state;
	fx_open(&x);
	put_round(&x, 0, NKEYS / 2, 1);
	assert_int_equal(maint_flush_now(x.e), 0);
	put_round(&x, NKEYS / 4, NKEYS, 2);
	assert_int_equal(maint_flush_now(x.e), 0);
	late_arm(x.ls, LK_FINISH, SST_PFX, -ETIMEDOUT, LK_FINISH, SST_PFX, false);
	assert_int_equal(maint_compact_now(x.e), 0); /* the failure waits for the next flush */
	assert_true(x.ls->held);
	assert_false(x.ls->landed);
	engine_get_stats(x.e, &es);
	assert_int_equal(es.compactions, 0);
	assert_int_equal(es.sst_count, 2);

	put_round(&x, 0, NKEYS / 2, 3); /* new values for the oldest keys */
	assert_int_equal(maint_flush_now(x.e), 0);
	assert_true(x.ls->landed); /* right after the flush's upload */
	assert_int_equal(x.ls->landed_rc, 0);
	check_data(x.e, x.round, "late compaction output, after the flush");
	assert_int_equal(maint_compact_now(x.e), 0);
	engine_get_stats(x.e, &es);
	assert_true(es.compactions >= 1);

	check_sst_names_unique(x.ls, "late compaction output");
	check_referenced(x.ls, &m, "late compaction output");
	assert_false(lists_table(&m, x.ls->held_key));
	manifest_clear(&m);
	check_data(x.e, x.round, "late compaction output");
	assert_int_equal(fx_close_engine(&x), 0);
	check_reopen(&x, "late compaction output, reopened");
	fx_free(&x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_flush_upload_landed_then_retry),
	    cmocka_unit_test(test_flush_upload_lands_late),
	    cmocka_unit_test(test_manifest_lands_before_retry),
	    cmocka_unit_test(test_manifest_lands_after_retry),
	    cmocka_unit_test(test_compaction_output_lands_late),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
