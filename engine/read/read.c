/*
 * read.c - the engine's read path: point reads (engine_get, engine_get_range,
 * engine_get_range_wait, engine_prefetch), scans (engine_iter_*) and the
 * merged iterators the flusher, compaction and GC use.  Open, replay and
 * close are engine.c, the write path writer.c, blob reads blob.c.
 *
 * A read takes a view: references on the active MemTable, the frozen ones
 * and the SSTables, and its snapshot (e->visible_seq: the last sequence of a
 * batch that is entirely in the MemTable), all in one critical section
 * (e->mem_mu; view_get() says why the snapshot may not be taken before).  It
 * consults them newest first: MemTables, then SSTables from the newest.  A
 * KV_BLOB value is resolved through blob.c.  Reads never take the writer
 * lock except for a moment to find a pending pack (blob.c) and to read
 * e->sst_gen with a merged iterator.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbiter.h"
#include "engine_int.h"
#include "iter.h"
#include "log.h"
#include "memtable.h"
#include "sst.h"
#include "store.h"

/* ------------------------------------------------------------------ */
/* Views                                                               */
/* ------------------------------------------------------------------ */

/* What a read consults, each with a reference: MemTables newest first, SSTables oldest first. */
struct view {
	struct memtable **mems; /* active, then frozen newest first */
	size_t nmems;
	struct sst_reader **ssts; /* manifest order: walk backwards for newest first */
	size_t nssts;
};

/* A view a follower's install replaced (read_keep_view()): the states [lo, hi). */
struct old_view {
	uint64_t lo, hi;
	size_t bytes; /* memtable_bytes() of the MemTables only it holds (read_keep_bytes()) */
	struct view v;
};

static void view_put(struct view *v);

/* Room in v for nmems MemTables and nssts SSTables (nothing referenced yet); -ENOMEM. */
static int view_alloc(struct view *v, size_t nmems, size_t nssts)
{
	v->mems = malloc((nmems + 1) * sizeof(*v->mems));
	v->ssts = malloc((nssts + 1) * sizeof(*v->ssts));
	if (!v->mems || !v->ssts) {
		free(v->mems);
		free(v->ssts);
		return -ENOMEM;
	}
	return 0;
}

/* References on what reads see now ([mem_mu]); -ENOMEM. */
static int view_take(struct engine *e, struct view *v)
{
	size_t k = 0;

	if (view_alloc(v, e->nfrozen + 1, e->nssts))
		return -ENOMEM;
	v->mems[k++] = e->mem;
	memtable_ref(e->mem);
	for (size_t i = e->nfrozen; i-- > 0;) {
		v->mems[k++] = e->frozen[i].mem;
		memtable_ref(e->frozen[i].mem);
	}
	v->nmems = k;
	for (size_t i = 0; i < e->nssts; i++) {
		v->ssts[i] = e->ssts[i];
		sst_reader_ref(e->ssts[i]);
	}
	v->nssts = e->nssts;
	return 0;
}

/* Another set of references on the view v ([mem_mu]); -ENOMEM. */
static int view_copy(const struct view *v, struct view *out)
{
	if (view_alloc(out, v->nmems, v->nssts))
		return -ENOMEM;
	for (size_t i = 0; i < v->nmems; i++)
		memtable_ref(out->mems[i] = v->mems[i]);
	for (size_t i = 0; i < v->nssts; i++)
		sst_reader_ref(out->ssts[i] = v->ssts[i]);
	out->nmems = v->nmems;
	out->nssts = v->nssts;
	return 0;
}

/* Drop the oldest kept view ([mem_mu]; its last references: memory, no I/O). */
static void drop_oldest(struct engine *e)
{
	view_put(&e->rd.old_views[0].v);
	memmove(e->rd.old_views, e->rd.old_views + 1,
	        (ENGINE_OLD_VIEWS - 1) * sizeof(*e->rd.old_views));
	e->rd.nold_views--;
}

void read_keep_view(struct engine *e, uint64_t floor)
{
	struct old_view o = {.lo = e->rd.floor_seq, .hi = floor};

	e->rd.floor_seq = floor;
	if (o.lo >= o.hi)
		return; /* no state in between */
	if (!e->rd.old_views &&
	    !(e->rd.old_views = calloc(ENGINE_OLD_VIEWS, sizeof(*e->rd.old_views))))
		return;
	if (view_take(e, &o.v))
		return;
	if (e->rd.nold_views == ENGINE_OLD_VIEWS)
		drop_oldest(e);
	e->rd.old_views[e->rd.nold_views++] = o;
}

void read_keep_bytes(struct engine *e, uint64_t floor, size_t bytes)
{
	size_t budget = e->o.max_frozen_bytes / 2, total = bytes;

	if (!e->rd.nold_views || e->rd.old_views[e->rd.nold_views - 1].hi != floor)
		return; /* nothing was kept */
	e->rd.old_views[e->rd.nold_views - 1].bytes = bytes;
	for (size_t i = 0; i + 1 < e->rd.nold_views; i++)
		total += e->rd.old_views[i].bytes;
	while (e->rd.nold_views && total > budget) {
		total -= e->rd.old_views[0].bytes;
		drop_oldest(e); /* alone over the budget, the newest too: reads get -ESTALE */
	}
}

void read_old_views_free(struct engine *e)
{
	for (size_t i = 0; i < e->rd.nold_views; i++)
		view_put(&e->rd.old_views[i].v);
	free(e->rd.old_views);
	e->rd.old_views = NULL;
	e->rd.nold_views = 0;
}

/* Current readers' snapshot (no earlier state asked for: view_get() checks no floor). */
#define SNAP_NOW UINT64_MAX

/*
 * References on what a read consults, and the snapshot to read them at (*snap): at, the
 * sequence of an earlier state the read is of (engine_get_at()), or for SNAP_NOW
 * e->visible_seq as it is when the view is taken; -ESTALE when no view holds state at.
 *
 * The snapshot of a read of the current state is taken in the same critical section as
 * its view, never before it.  Compaction keeps only the newest version of a key among
 * the tables it merges (compact_some_locked() runs it at UINT64_MAX: no reader may read
 * below the state its view holds), so a snapshot older than the view can find nothing: a
 * read that took visible_seq, then was delayed while the key was written again, frozen,
 * flushed and compacted, found only the new version (above its snapshot) where the old
 * one had been, and answered -ENOENT for a key that always existed (a file's extent
 * missing for an instant; test_read_races_flush_and_compaction).  Under mem_mu the two
 * agree: every table and frozen MemTable of the view holds only sequences <= visible_seq
 * (a writer freezes under e->mu between batches, after apply_locked() published its batch,
 * and tables are made from frozen MemTables), so whatever a compaction dropped is hidden
 * by a newer version the snapshot sees.  Sequences above it are only in the active
 * MemTable (a batch being applied), or, on a follower, in a MemTable frozen at the end of
 * an entry it has not published yet: both are filtered out by the snapshot.
 */
static int view_get(struct engine *e, struct view *v, uint64_t at, uint64_t *snap)
{
	int rc;

	*snap = at;
	pthread_mutex_lock(&e->mem_mu);
	if (at == SNAP_NOW || at >= e->rd.floor_seq) {
		rc = view_take(e, v);
		if (at == SNAP_NOW)
			*snap = atomic_load_explicit(&e->visible_seq, memory_order_acquire);
	} else {
		/* an earlier state: in a view an install replaced, if it is still kept */
		rc = -ESTALE;
		for (size_t i = 0; i < e->rd.nold_views; i++)
			if (at >= e->rd.old_views[i].lo && at < e->rd.old_views[i].hi)
				rc = view_copy(&e->rd.old_views[i].v, v);
	}
	pthread_mutex_unlock(&e->mem_mu);
	return rc;
}

/* e->rd.view_hook, for a read of the current state (tests only; reader.h). */
static void call_view_hook(struct engine *e, uint64_t at)
{
	if (at == SNAP_NOW && e->rd.view_hook)
		e->rd.view_hook(e->rd.view_hook_arg);
}

static void view_put(struct view *v)
{
	for (size_t i = 0; i < v->nmems; i++)
		memtable_unref(v->mems[i]);
	for (size_t i = 0; i < v->nssts; i++)
		sst_reader_unref(v->ssts[i]);
	free(v->mems);
	free(v->ssts);
}

/*
 * One iterator per source of view v, newest first (MemTables, then
 * SSTables from the newest), merged into *out (internal order, every
 * version).  The iterators hold references of their own, so v may be put
 * afterwards.  cached: the tables' iterators read only cached blocks
 * (sst_reader_iter_new()).  Returns 0 or a negative errno (nothing to free
 * then).
 */
static int view_merged_iter(const struct view *v, bool cached, struct kv_iter **out)
{
	struct kv_iter **kids;
	size_t nk = 0;
	int rc = 0;

	kids = calloc(v->nmems + v->nssts + 1, sizeof(*kids));
	if (!kids)
		return -ENOMEM;
	for (size_t i = 0; i < v->nmems && !rc; i++)
		if ((rc = memtable_iter_new(v->mems[i], &kids[nk])) == 0)
			nk++;
	for (size_t i = v->nssts; i-- > 0 && !rc;)
		if ((rc = sst_reader_iter_new(v->ssts[i], cached, &kids[nk])) == 0)
			nk++;
	if (rc == 0 && (rc = kv_merge_iter_new(kids, nk, out)) == 0)
		nk = 0; /* the merger owns them */
	for (size_t i = 0; i < nk; i++)
		kv_iter_destroy(kids[i]);
	free(kids);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Point reads                                                         */
/* ------------------------------------------------------------------ */

/*
 * Find the newest entry of key visible at at (SNAP_NOW: e->visible_seq).  Returns 0 with a
 * malloc()ed copy of the stored value in *val (*vlen bytes): the value itself, or for a
 * blob its descriptor (*is_blob), decoded into *d (whose hashes point into *val); or
 * -ENOENT, -ESTALE (view_get()); nowait: -EWOULDBLOCK instead of reading a table's block
 * from the store.
 */
static int lookup(struct engine *e, uint64_t at, const void *key, size_t klen, bool nowait,
                  void **val, size_t *vlen, bool *is_blob, struct blob_desc *d)
{
	struct view w;
	enum kv_type type = KV_DELETE;
	const void *v = NULL;
	void *owned = NULL;
	size_t vn = 0;
	uint64_t seq, snap;
	int found = 0, rc;

	call_view_hook(e, at);
	rc = view_get(e, &w, at, &snap);
	if (rc)
		return rc;
	for (size_t i = 0; i < w.nmems && !found; i++)
		found = memtable_get(w.mems[i], key, klen, snap, &type, &v, &vn, &seq);
	for (size_t i = w.nssts; i-- > 0 && !found;) {
		found =
		    sst_reader_get(w.ssts[i], key, klen, snap, nowait, &type, &seq, &owned, &vn);
		v = owned;
	}
	if (found < 0) {
		rc = found;
		if (rc == -EIO && atomic_load(&e->rd.sst_counters.missing))
			watch_kick(e); /* a table may be gone from the store: check it now */
	} else if (!found || type == KV_DELETE) {
		rc = -ENOENT;
	} else {
		*is_blob = type == KV_BLOB;
		*val = malloc(vn ? vn : 1);
		rc = *val ? 0 : -ENOMEM;
		if (*val && vn)
			memcpy(*val, v, vn);
		*vlen = vn;
		if (!rc && *is_blob && (rc = blob_desc_decode(*val, vn, d)) != 0) {
			log_err("engine: corrupt blob descriptor for a key");
			free(*val);
		}
	}
	free(owned);
	view_put(&w);
	return rc;
}

/*
 * engine_get() of the state at at (SNAP_NOW: the current one).  nowait: from memory
 * only (engine_get_nowait()).
 */
static int get_at(struct engine *e, uint64_t at, const void *key, size_t klen, bool nowait,
                  void **val, size_t *vlen)
{
	struct blob_desc d;
	bool is_blob = false;
	void *v = NULL, *bytes;
	size_t n = 0;
	int rc;

	if (!e || !key || (!val && !nowait) || !vlen)
		return -EINVAL;
	rc = lookup(e, at, key, klen, nowait, &v, &n, &is_blob, &d);
	if (rc)
		return rc;
	if (!val) {
		*vlen = is_blob ? (size_t)d.length : n; /* a probe: is it there, how long */
		free(v);
		return 0;
	}
	if (is_blob && nowait) {
		free(v);
		return -EWOULDBLOCK; /* blobs are file data: never read under a caller's lock */
	}
	if (is_blob) {
		rc = blob_fetch(e, &d, &bytes);
		free(v);
		if (rc)
			return rc;
		v = bytes;
		n = (size_t)d.length;
	}
	*val = v;
	*vlen = n;
	return 0;
}

int engine_get(struct engine *e, const void *key, size_t klen, void **val, size_t *vlen)
{
	mw_noio_check(__func__, key, key ? klen : 0);
	return get_at(e, SNAP_NOW, key, klen, false, val, vlen);
}

int engine_get_nowait(struct engine *e, const void *key, size_t klen, void **val, size_t *vlen)
{
	return get_at(e, SNAP_NOW, key, klen, true, val, vlen);
}

uint64_t engine_seq(struct engine *e)
{
	return atomic_load_explicit(&e->visible_seq, memory_order_acquire);
}

int engine_get_at(struct engine *e, uint64_t seq, const void *key, size_t klen, void **val,
                  size_t *vlen)
{
	mw_noio_check(__func__, key, key ? klen : 0);
	if (!e || !e->o.read_only || seq == SNAP_NOW)
		return -EINVAL;
	return get_at(e, seq, key, klen, false, val, vlen);
}

int engine_get_at_nowait(struct engine *e, uint64_t seq, const void *key, size_t klen, void **val,
                         size_t *vlen)
{
	if (!e || !e->o.read_only || seq == SNAP_NOW)
		return -EINVAL;
	return get_at(e, seq, key, klen, true, val, vlen);
}

int engine_get_range(struct engine *e, const void *key, size_t klen, uint64_t off, void *buf,
                     size_t len, size_t *got)
{
	struct blob_desc d;
	bool is_blob = false;
	void *v = NULL;
	size_t n = 0;
	int rc;

	mw_noio_check(__func__, key, key ? klen : 0);
	if (!e || !key || (!buf && len) || !got)
		return -EINVAL;
	rc = lookup(e, SNAP_NOW, key, klen, false, &v, &n, &is_blob, &d);
	if (rc)
		return rc;
	*got = 0;
	if (is_blob) {
		/* a read of no bytes still loads the whole blob (engine_prefetch_wait()) */
		rc = len ? blob_read_range(e, &d, off, buf, len, got)
		         : blob_load(e, &d, 0, d.length);
	} else if (off < n) {
		*got = n - off < len ? n - off : len;
		memcpy(buf, (uint8_t *)v + off, *got);
	}
	free(v);
	return rc;
}

int engine_prefetch(struct engine *e, const void *key, size_t klen)
{
	size_t got;

	if (!e || !key)
		return -EINVAL;
	return engine_get_range(e, key, klen, 0, NULL, 0, &got);
}

/*
 * One step of the backoff of retried reads: sleeps *wait_ms (RETRY_MIN_MS at
 * the first call, *wait_ms 0; doubling up to RETRY_MAX_MS) and returns 0, or
 * -ETIMEDOUT once opts.sync_timeout_ms (when set) has passed since start_us.
 */
static int backoff(struct engine *e, uint64_t start_us, unsigned *wait_ms)
{
	uint64_t waited_ms = (mw_now_us() - start_us) / 1000u;

	if (e->o.sync_timeout_ms && waited_ms >= e->o.sync_timeout_ms)
		return -ETIMEDOUT;
	if (*wait_ms == 0) {
		*wait_ms = RETRY_MIN_MS;
		log_warn("engine: a read failed; it is retried until the store answers");
	}
	struct timespec ts = {.tv_sec = *wait_ms / 1000u,
	                      .tv_nsec = (long)(*wait_ms % 1000u) * 1000000L};
	nanosleep(&ts, NULL);
	*wait_ms = *wait_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : *wait_ms * 2;
	return 0;
}

bool engine_err_transient(int rc)
{
	return rc && rc != -ENOENT && rc != -ENOMEM && rc != -EINVAL && !err_permanent(rc);
}

int engine_retry(struct engine *e, int rc, int (*fn)(void *), void *arg)
{
	uint64_t start = mw_now_us();
	unsigned wait_ms = 0;

	while (engine_err_transient(rc) && !store_err_permanent(e->st, rc) &&
	       backoff(e, start, &wait_ms) == 0)
		rc = fn(arg);
	return rc;
}

/* fn(arg), retried while it fails for a transient reason (engine_get_range_wait()). */
static int retry_transient(struct engine *e, int (*fn)(void *), void *arg)
{
	return engine_retry(e, fn(arg), fn, arg);
}

struct get_range_args {
	struct engine *e;
	const void *key;
	size_t klen;
	uint64_t off;
	void *buf;
	size_t len;
	size_t *got;
};

static int get_range_once(void *arg)
{
	struct get_range_args *a = arg;

	return engine_get_range(a->e, a->key, a->klen, a->off, a->buf, a->len, a->got);
}

int engine_get_range_wait(struct engine *e, const void *key, size_t klen, uint64_t off, void *buf,
                          size_t len, size_t *got)
{
	struct get_range_args a = {e, key, klen, off, buf, len, got};

	return retry_transient(e, get_range_once, &a);
}

int engine_prefetch_wait(struct engine *e, const void *key, size_t klen)
{
	size_t got;
	/* a read of no bytes loads what engine_prefetch() loads */
	return engine_get_range_wait(e, key, klen, 0, NULL, 0, &got);
}

/* ------------------------------------------------------------------ */
/* References                                                          */
/* ------------------------------------------------------------------ */

uint64_t engine_ref_len(const struct engine_ref *r)
{
	struct blob_desc d;

	if (!r->blob)
		return r->n;
	return blob_desc_decode(r->p, r->n, &d) ? 0 : d.length;
}

struct ref_args {
	struct engine *e;
	const struct blob_desc *d;
	uint64_t off;
	void *buf;
	size_t len;
};

static int ref_read_once(void *arg)
{
	struct ref_args *a = arg;
	size_t got;

	return blob_read_range(a->e, a->d, a->off, a->buf, a->len, &got);
}

int engine_ref_read(struct engine *e, const struct engine_ref *r, uint64_t off, void *buf,
                    size_t len, bool wait)
{
	struct blob_desc d;
	int rc;

	if (!r->blob) {
		if (off > r->n || len > r->n - off)
			return -EINVAL;
		memcpy(buf, (const uint8_t *)r->p + off, len);
		return 0;
	}
	mw_noio_check(__func__, NULL, 0); /* a blob's bytes may come from the store */
	if ((rc = blob_desc_decode(r->p, r->n, &d)))
		return rc;
	if (off > d.length || len > d.length - off)
		return -EINVAL;
	struct ref_args a = {e, &d, off, buf, len};
	return wait ? retry_transient(e, ref_read_once, &a) : ref_read_once(&a);
}

int engine_ref_prefetch(struct engine *e, const struct engine_ref *r, uint64_t off, uint64_t len)
{
	struct blob_desc d;
	int rc;

	if (!r->blob)
		return 0;
	if ((rc = blob_desc_decode(r->p, r->n, &d)))
		return rc;
	return blob_load(e, &d, off, len);
}

int read_merged_iter(struct engine *e, struct kv_iter **out, uint64_t *gen)
{
	struct view w = {0};
	uint64_t snap; /* unused: the iterator has every version */
	int rc;

	mw_mutex_lock(&e->mu);
	*gen = e->sst_gen;
	rc = view_get(e, &w, SNAP_NOW, &snap);
	mw_mutex_unlock(&e->mu);
	if (rc)
		return rc;
	rc = view_merged_iter(&w, false, out);
	view_put(&w);
	return rc;
}

int read_newest_seq_locked(struct engine *e, const void *key, size_t klen, bool with_ssts,
                           uint64_t *seq)
{
	enum kv_type type;
	const void *v;
	void *owned = NULL;
	size_t vn;
	int found;

	/* e->mu is held: neither the MemTable list nor the SSTable list can change */
	mw_mutex_assert_held(&e->mu);
	if (memtable_get(e->mem, key, klen, UINT64_MAX, &type, &v, &vn, seq))
		return 1;
	for (size_t i = e->nfrozen; i-- > 0;)
		if (memtable_get(e->frozen[i].mem, key, klen, UINT64_MAX, &type, &v, &vn, seq))
			return 1;
	if (!with_ssts)
		return 0;
	for (size_t i = e->nssts; i-- > 0;) {
		found = sst_reader_get(e->ssts[i], key, klen, UINT64_MAX, false, &type, seq, &owned,
		                       &vn);
		free(owned);
		owned = NULL;
		if (found)
			return found;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* Scans                                                               */
/* ------------------------------------------------------------------ */

struct engine_iter {
	struct engine *e; /* the engine (borrowed) */
	struct dbiter *d; /* user view over the merged MemTables (owned) */
	void *blob;       /* the current blob's bytes, fetched on demand (owned) */
	size_t blob_len;  /* bytes in blob */
	bool have_blob;   /* blob holds the current entry's value */
	bool nowait;      /* from memory only (engine_iter_new_nowait()) */
	int status;       /* 0, or the error that ended the scan */
};

/*
 * engine_iter_new() over the state at at (SNAP_NOW: the current one).  nowait: from memory
 * only (engine_iter_new_nowait()).
 */
static int iter_new_at(struct engine *e, uint64_t at, bool nowait, const void *start, size_t slen,
                       const void *end, size_t elen, struct engine_iter **out)
{
	uint64_t snap;
	struct view w = {0};
	struct kv_iter *mi = NULL;
	struct engine_iter *it;
	int rc;

	it = calloc(1, sizeof(*it));
	if (!it)
		return -ENOMEM;
	it->e = e;
	it->nowait = nowait;
	call_view_hook(e, at);
	if ((rc = view_get(e, &w, at, &snap)))
		goto fail;
	rc = view_merged_iter(&w, nowait, &mi);
	view_put(&w);
	if (rc)
		goto fail;
	rc = dbiter_new(mi, snap, start, start ? slen : 0, end, end ? elen : 0, &it->d);
	if (rc)
		goto fail;
	mi = NULL;
	dbiter_seek_first(it->d);
	it->status = dbiter_status(it->d);
	*out = it;
	return 0;
fail:
	kv_iter_destroy(mi);
	free(it);
	return rc;
}

int engine_iter_new(struct engine *e, const void *start, size_t slen, const void *end, size_t elen,
                    struct engine_iter **out)
{
	mw_noio_check(__func__, start, start ? slen : 0);
	return iter_new_at(e, SNAP_NOW, false, start, slen, end, elen, out);
}

int engine_iter_new_nowait(struct engine *e, const void *start, size_t slen, const void *end,
                           size_t elen, struct engine_iter **out)
{
	return iter_new_at(e, SNAP_NOW, true, start, slen, end, elen, out);
}

int engine_iter_new_at(struct engine *e, uint64_t seq, const void *start, size_t slen,
                       const void *end, size_t elen, struct engine_iter **out)
{
	mw_noio_check(__func__, start, start ? slen : 0);
	if (!e || !e->o.read_only || seq == SNAP_NOW)
		return -EINVAL;
	return iter_new_at(e, seq, false, start, slen, end, elen, out);
}

static void drop_blob(struct engine_iter *it)
{
	free(it->blob);
	it->blob = NULL;
	it->have_blob = false;
}

void engine_iter_seek(struct engine_iter *it, const void *key, size_t klen)
{
	drop_blob(it);
	dbiter_seek(it->d, key, klen);
	it->status = dbiter_status(it->d);
}

bool engine_iter_valid(const struct engine_iter *it)
{
	return it && it->status == 0 && dbiter_valid(it->d);
}

void engine_iter_next(struct engine_iter *it)
{
	drop_blob(it);
	dbiter_next(it->d);
	it->status = dbiter_status(it->d);
}

const void *engine_iter_key(const struct engine_iter *it, size_t *klen)
{
	return dbiter_key(it->d, klen);
}

int engine_iter_value(struct engine_iter *it, const void **val, size_t *vlen)
{
	struct blob_desc d;
	const void *v;
	size_t vn;
	int rc;

	v = dbiter_value(it->d, &vn);
	if (dbiter_type(it->d) != KV_BLOB) {
		*val = v;
		*vlen = vn;
		return 0;
	}
	if (!it->have_blob) {
		if (it->nowait)
			return -EWOULDBLOCK; /* blobs are file data: never read under a caller's
			                        lock */
		rc = blob_desc_decode(v, vn, &d);
		if (rc == 0)
			rc = blob_fetch(it->e, &d, &it->blob);
		if (rc)
			return rc;
		it->blob_len = (size_t)d.length;
		it->have_blob = true;
	}
	*val = it->blob;
	*vlen = it->blob_len;
	return 0;
}

void engine_iter_ref(const struct engine_iter *it, struct engine_ref *r)
{
	r->p = dbiter_value(it->d, &r->n);
	r->blob = dbiter_type(it->d) == KV_BLOB;
}

int engine_iter_status(const struct engine_iter *it)
{
	return it->status;
}

void engine_iter_free(struct engine_iter *it)
{
	if (!it)
		return;
	drop_blob(it);
	dbiter_free(it->d);
	free(it);
}
