/*
 * maint.c - garbage collection and repack wired into the engine, and
 * flush / compaction on demand (contract in maint.h, protocol in
 * docs/GC.md).
 *
 * DESIGN
 *
 * The GC thread wakes every opts.gc_interval_ms and runs one pass, unless
 * nothing changed since a pass that left nothing to wait for; after a pass
 * that deferred objects (kept only until they outgrow the grace period) it
 * wakes when the first comes due instead, and after one that asked for a
 * flush (the filesystem is churning) a quarter of the interval later, never
 * sooner (maint_gc_wait_ms()).  Tests and tools run the same pass
 * with maint_gc_now().  Passes are serialised
 * by e->m.gc_mu (taken before e->mu, never while holding it).  A pass:
 *
 *   1. snapshot, under e->mu, what protects in-flight work: our epoch and
 *      e->man.next_sst (every SSTable the flusher or the compactor is
 *      writing has an id >= it: both take fresh ids from e->m.sst_next_id,
 *      which never falls below e->man.next_sst, and both run on the one
 *      flusher thread, which commits no manifest while an attempt is in
 *      flight; flush.c, "SSTable names"), and e->man.wal_covered;
 *   2. gc_plan_make() + gc_plan_execute() without any engine lock (gc.c
 *      decides from the store alone).  No live_packs are passed: every
 *      MemTable entry and unflushed WAL entry references the pack of its
 *      own group, at a position >= e->man.wal_covered >= the plan's WAL
 *      floor, and GC never deletes a pack at or past the floor;
 *   3. abandoned streaming uploads older than max(grace, 300 s) are
 *      aborted.  Not with the grace alone: with a zero grace (tests) a
 *      pack or table upload in flight would be aborted under its writer;
 *   4. repack: gc_repack_scan() over a merged iterator of everything the
 *      engine holds calls back for each key whose newest version is a blob
 *      in a selected pack.  The blob is read (checksum verified) and put
 *      again through the normal write path by writer_write_if(), whose
 *      condition runs under e->mu: the key's newest sequence must still be
 *      the one the scan saw.  The MemTables are checked directly; the
 *      SSTables only when the key is in no MemTable and the SSTable set
 *      changed since the scan started (e->sst_gen), since a newer write
 *      sits in a MemTable until a flush moves it into a new SSTable.  So a
 *      newer write is never undone, and nothing waits for I/O under e->mu
 *      in the common case.  The rewritten blob lands in the pack of the
 *      current group; the old pack goes in a later pass once a compaction
 *      dropped the shadowed descriptors and no kept manifest lists a table
 *      that references it.
 *
 * Failure: a failed pass is counted (stats.gc_errors) and retried at the
 * next interval; what was deleted stays deleted (each delete is safe on
 * its own).  A repack write that fails leaves the old version in place.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "gc.h"
#include "log.h"
#include "maint.h"
#include "store.h"

/* Abandoned uploads are aborted only after at least this long (see step 3). */
#define MAINT_UPLOAD_MIN_AGE_SEC 300
/* Default repack rate (engine_opts.repack_kib_per_sec 0): 8 MiB/s. */
#define MAINT_REPACK_KIB_PER_SEC 8192u
/* Packs only the WAL references (past e->man.wal_covered) above this: ask for a flush. */
#define MAINT_SPACE_FLUSH_BYTES (16ull << 20)
/*
 * The GC thread's shortest wait (after a pass that asked for a flush, or
 * when deferred objects come due sooner): the interval over this, at least
 * MAINT_GC_WAIT_MIN_MS.  It bounds the requests of a churning mount to this
 * many passes per interval.
 */
#define MAINT_GC_WAIT_DIV 4u
#define MAINT_GC_WAIT_MIN_MS 1000u

/* ------------------------------------------------------------------ */
/* Flush and compaction on demand                                      */
/* ------------------------------------------------------------------ */

int maint_flush_now(struct engine *e)
{
	uint64_t failures, target;
	int rc = 0;

	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return -EROFS;
	/*
	 * Commit the open group first: a freeze while a group is open cannot
	 * cover that group (it may continue in the next MemTable).
	 */
	rc = engine_sync(e);
	if (rc)
		return rc;
	mw_mutex_lock(&e->mu);
	if (e->w.sticky) {
		rc = e->w.sticky;
		goto out;
	}
	failures = e->m.flush_failures;
	/* everything issued so far is in the MemTable frozen now (or older ones) */
	rc = writer_freeze_locked(e);
	if (rc)
		goto out;
	target = e->frozen[e->nfrozen - 1].wal_end;
	if (e->w.open && !e->w.open->urgent) {
		e->w.open->urgent = true;
		pthread_cond_broadcast(&e->w.commit_cv);
	}
	while (!e->w.sticky && e->m.flusher.running &&
	       (e->nfrozen > 0 || e->man.wal_covered < target)) {
		if (e->m.flush_failures != failures) {
			rc = e->m.flush_last_error ? e->m.flush_last_error : -EIO;
			goto out;
		}
		mw_cond_wait(&e->durable_cv, &e->mu);
	}
	if (e->w.sticky)
		rc = e->w.sticky;
	else if (e->nfrozen > 0)
		rc = -EIO; /* the flusher stopped */
out:
	mw_mutex_unlock(&e->mu);
	return rc;
}

/*
 * Under e->mu: wait until compaction round req is done and, when frozen,
 * no frozen MemTable is left.  A flush failing meanwhile (an outage) keeps
 * the flusher from the work: that error is returned.
 */
static int wait_flusher_locked(struct engine *e, uint64_t req, bool frozen)
{
	mw_mutex_assert_held(&e->mu);
	uint64_t failures = e->m.flush_failures;

	while (!e->w.sticky && e->m.flusher.running && e->m.flush_failures == failures &&
	       (e->m.compact_done < req || (frozen && e->nfrozen > 0)))
		mw_cond_wait(&e->durable_cv, &e->mu);
	if (e->w.sticky)
		return e->w.sticky;
	if (e->m.compact_done < req || (frozen && e->nfrozen > 0))
		return e->m.flush_failures != failures && e->m.flush_last_error
		           ? e->m.flush_last_error
		           : -EIO;
	return 0;
}

int maint_compact_now(struct engine *e)
{
	int rc;

	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return -EROFS;
	mw_mutex_lock(&e->mu);
	uint64_t req = ++e->m.compact_req;
	pthread_cond_signal(&e->m.flush_cv);
	rc = wait_flusher_locked(e, req, false);
	mw_mutex_unlock(&e->mu);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Repack                                                              */
/* ------------------------------------------------------------------ */

/* repack_one()'s "stop the scan": this pass's byte budget is spent. */
#define REPACK_BUDGET_SPENT 1

uint64_t maint_repack_budget(unsigned kib_per_sec, unsigned interval_ms, uint64_t since_us)
{
	uint64_t kib = kib_per_sec ? kib_per_sec : MAINT_REPACK_KIB_PER_SEC;
	uint64_t ms = interval_ms == ENGINE_GC_OFF ? 60000 : interval_ms;

	if (kib_per_sec == ENGINE_GC_OFF)
		return UINT64_MAX;
	if (interval_ms != ENGINE_GC_OFF && since_us && since_us / 1000u < ms)
		ms = since_us / 1000u;
	return kib * 1024u * ms / 1000u;
}

/* State of one repack scan. */
struct repack {
	struct engine *e;
	uint64_t budget;       /* bytes this pass may rewrite (UINT64_MAX: no limit) */
	bool over_budget;      /* the scan stopped at the budget: the rest waits */
	uint64_t sst_gen;      /* e->sst_gen when the scan's iterator was made */
	uint64_t seq;          /* the newest sequence the scan saw for the current key */
	uint64_t blobs, bytes; /* rewritten */
	uint64_t skipped;      /* keys written meanwhile: left alone */
};

/* Under e->mu: does the key still have the newest sequence rp->seq?  0 yes, 1 no. */
static int still_newest(struct engine *e, void *arg, const void *key, size_t klen)
{
	mw_mutex_assert_held(&e->mu);
	struct repack *rp = arg;
	uint64_t seq = 0;
	int found = read_newest_seq_locked(e, key, klen, e->sst_gen != rp->sst_gen, &seq);

	if (found < 0)
		return found;
	if (found == 0)
		/* in no MemTable and the SSTables are those the scan read: unchanged */
		return e->sst_gen == rp->sst_gen ? 0 : 1;
	return seq == rp->seq ? 0 : 1;
}

/* writer_cond_fn adapter: the key is the batch's only key. */
struct cond_arg {
	struct repack *rp;
	const void *key;
	size_t klen;
};

static int repack_cond(struct engine *e, void *arg)
{
	struct cond_arg *c = arg;

	return still_newest(e, c->rp, c->key, c->klen);
}

static int repack_one(void *arg, const void *key, size_t klen, uint64_t seq, const void *desc,
                      size_t dlen)
{
	struct repack *rp = arg;
	struct engine *e = rp->e;
	struct engine_batch b = {0};
	struct blob_desc d;
	struct cond_arg c = {.rp = rp, .key = key, .klen = klen};
	void *val = NULL;
	int rc = blob_desc_decode(desc, dlen, &d);

	if (rc)
		return 0; /* the scan skips these already */
	/* the pass's first blob always goes, so even a blob over the budget moves */
	if (rp->bytes && (rp->bytes >= rp->budget || d.length > rp->budget - rp->bytes)) {
		rp->over_budget = true;
		return REPACK_BUDGET_SPENT;
	}
	rc = blob_fetch(e, &d, &val);
	if (rc) {
		log_err("gc: repack: reading a blob of pack %" PRIu64 "-%" PRIu64 " failed: %s",
		        d.epoch, d.position, strerror(-rc));
		return rc;
	}
	rc = engine_batch_put(&b, key, klen, val, (size_t)d.length);
	free(val);
	if (rc)
		goto out;
	rp->seq = seq;
	rc = writer_write_if(e, &b, 0, NULL, repack_cond, &c);
	if (rc == 1) {
		rp->skipped++;
		rc = 0;
	} else if (rc == 0) {
		rp->blobs++;
		rp->bytes += d.length;
	}
out:
	mw_buf_free(&b.rep);
	return rc;
}

/* Rewrite the live blobs of the plan's repack packs, at most budget bytes, then sync. */
static int repack_run(struct engine *e, const struct gc_plan *plan, uint64_t budget,
                      struct maint_gc_result *res)
{
	struct repack rp = {.e = e, .budget = budget};
	struct kv_iter *it = NULL;
	int rc = read_merged_iter(e, &it, &rp.sst_gen);

	if (rc)
		return rc;
	rc = gc_repack_scan(it, plan, repack_one, &rp);
	kv_iter_destroy(it);
	if (rc == REPACK_BUDGET_SPENT && rp.over_budget)
		rc = 0; /* the next pass goes on */
	if (rp.blobs) {
		int src = engine_sync(e);

		if (!rc)
			rc = src;
	}
	res->repacked_blobs = rp.blobs;
	res->repacked_bytes = rp.bytes;
	res->repack_budget_spent = rp.over_budget;
	res->repack_none = rc == 0 && plan->nrepack && !rp.blobs && !rp.over_budget;
	log_info("gc: repacked %" PRIu64 " blobs (%" PRIu64 " bytes) out of %zu packs, %" PRIu64
	         " keys rewritten meanwhile left alone (%s)",
	         rp.blobs, rp.bytes, plan->nrepack, rp.skipped,
	         rc               ? strerror(-rc)
	         : rp.over_budget ? "budget spent, the rest next pass"
	                          : "done");
	return rc;
}

/* ------------------------------------------------------------------ */
/* One pass                                                            */
/* ------------------------------------------------------------------ */

/*
 * res->wal_only_pack_bytes from the plan's packs, and a log line of where
 * the pack bytes that stay are: past the floor (only the WAL references
 * them), in packs the newest manifest references (live and dead parts:
 * what repack can give back), and in packs only older kept manifests
 * reference (they go when those manifests age past the grace).
 */
static void pack_summary(const struct gc_plan *plan, uint64_t covered, struct maint_gc_result *res)
{
	uint64_t unflushed = 0, live = 0, in_live = 0, old = 0;

	for (size_t i = 0; i < plan->npacks; i++) {
		const struct gc_pack_stat *s = &plan->packs[i];

		if (!(s->id.position & PACK_POS_FLUSH) && s->id.position >= covered)
			res->wal_only_pack_bytes += s->size;
		if (s->unflushed) {
			unflushed += s->size;
		} else if (s->live_bytes) {
			in_live += s->size;
			live += s->live_bytes;
		} else {
			old += s->size;
		}
	}
	res->unflushed_pack_bytes = unflushed;
	log_info("gc: packs %" PRIu64 " KiB: %" PRIu64 " KiB past the WAL floor, %" PRIu64
	         " KiB live of %" PRIu64 " KiB in packs the newest manifest references, %" PRIu64
	         " KiB only older manifests or the grace keep; %" PRIu64 " deferred, first due in "
	         "%" PRId64 " s",
	         plan->pack_bytes >> 10, unflushed >> 10, live >> 10, in_live >> 10, old >> 10,
	         plan->n_deferred, plan->next_due ? plan->next_due - (int64_t)time(NULL) : 0);
	/*
	 * Where the dead bytes of referenced packs are (reading a churn run):
	 * per kind (a group's pack, a flush's pack) the size and live bytes of
	 * the packs the newest manifest references, by live fraction: below
	 * the repack threshold, 50-75 %, 75-90 %, 90-100 %.
	 */
	uint64_t sz[2][4] = {{0}}, lv[2][4] = {{0}}, asz[2] = {0}, alv[2] = {0}, dead[2] = {0};
	for (size_t i = 0; i < plan->npacks; i++) {
		const struct gc_pack_stat *s = &plan->packs[i];
		int k = (s->id.position & PACK_POS_FLUSH) ? 1 : 0, b;
		double f;

		if (s->live_bytes) {
			asz[k] += s->size;
			alv[k] += s->live_bytes;
		} else {
			dead[k] += s->size;
		}
		if (s->unflushed || !s->live_bytes || !s->data_bytes)
			continue;
		f = (double)s->live_bytes / (double)s->data_bytes;
		b = f < 0.5 ? 0 : f < 0.75 ? 1 : f < 0.9 ? 2 : 3;
		sz[k][b] += s->size;
		lv[k][b] += s->live_bytes;
	}
	for (int k = 0; k < 2; k++)
		log_info("gc: %s packs: %" PRIu64 " KiB live of %" PRIu64
		         " KiB in packs the newest "
		         "manifest references, %" PRIu64 " KiB in packs it does not",
		         k ? "flush" : "group", alv[k] >> 10, asz[k] >> 10, dead[k] >> 10);
	for (int k = 0; k < 2; k++)
		log_info("gc: %s packs by live fraction (KiB live/size): <50%% %" PRIu64 "/%" PRIu64
		         ", 50-75%% %" PRIu64 "/%" PRIu64 ", 75-90%% %" PRIu64 "/%" PRIu64
		         ", 90-100%% %" PRIu64 "/%" PRIu64,
		         k ? "flush" : "group", lv[k][0] >> 10, sz[k][0] >> 10, lv[k][1] >> 10,
		         sz[k][1] >> 10, lv[k][2] >> 10, sz[k][2] >> 10, lv[k][3] >> 10,
		         sz[k][3] >> 10);
}

/* Caller holds e->m.gc_mu. */
static int gc_pass(struct engine *e, struct maint_gc_result *res)
{
	struct gc_opts o;
	struct gc_plan plan = {0};
	uint64_t deleted = 0;
	unsigned aborted = 0, age;
	uint64_t pack_mark, start_us = mw_now_us(), since_us;
	int rc, urc;

	memset(res, 0, sizeof(*res));
	since_us = e->m.gc_pass_us ? start_us - e->m.gc_pass_us : 0;
	e->m.gc_pass_us = start_us;
	gc_opts_default(&o);
	o.grace_sec = e->o.gc_grace_sec == ENGINE_GC_NO_GRACE ? 0 : e->o.gc_grace_sec;
	o.repack_below =
	    e->o.repack_below_pct == ENGINE_GC_OFF ? 0.0 : (double)e->o.repack_below_pct / 100.0;
	o.cleanup_uploads = false; /* below, with a floor on the age */
	mw_mutex_lock(&e->mu);
	rc = e->w.sticky;
	pack_mark = e->stats.pack_bytes; /* what is written from here on counts as live */
	/*
	 * While the store is being written, repack only below half the threshold:
	 * the live rest of a mostly dead pack then tends to die soon too, and a
	 * copy made now stays beside the old pack for the grace (docs/GC.md,
	 * "Pack accounting and repack").  The first pass after the writes stop
	 * uses the whole threshold, so a store at rest comes back to it.
	 */
	uint64_t writes = e->stats.puts + e->stats.deletes - e->stats.repacked_blobs;
	res->writing = writes != e->m.gc_writes_seen;
	e->m.gc_writes_seen = writes;
	if (res->writing)
		o.repack_below /= 2;
	o.protect_epoch = e->epoch;
	o.protect_sst_from = e->man.next_sst;
	o.protect_wal_from = e->man.wal_covered;
	o.keep_from_version = e->man.version; /* what the engine reads through until it installs */
	mw_mutex_unlock(&e->mu);
	if (rc)
		return rc;
	rc = gc_plan_make(e->m.gc, &o, &plan);
	if (rc == -ENOENT && gc_missing(e->m.gc))
		engine_store_lost(e, "%s is missing (the newest manifest needs it; found by GC)",
		                  gc_missing(e->m.gc));
	if (rc)
		goto out;
	rc = gc_plan_execute(e->m.gc, &o, &plan, &deleted);
	res->deleted = deleted;
	res->deleted_bytes = rc ? 0 : plan.delete_bytes;
	res->pack_bytes = plan.pack_bytes;
	res->live_pack_bytes = plan.live_pack_bytes;
	res->repack_packs = plan.nrepack;
	res->deferred = plan.n_deferred;
	res->next_due = plan.next_due;
	pack_summary(&plan, o.protect_wal_from, res);
	age = o.grace_sec > MAINT_UPLOAD_MIN_AGE_SEC ? o.grace_sec : MAINT_UPLOAD_MIN_AGE_SEC;
	urc = store_cleanup_uploads(e->st, "", age, &aborted);
	if (urc && urc != -ENOTSUP)
		log_warn("gc: cleaning abandoned uploads failed: %s", strerror(-urc));
	res->deleted += aborted;
	if (rc == 0 && plan.nrepack && o.repack_below > 0.0)
		rc = repack_run(
		    e, &plan,
		    maint_repack_budget(e->o.repack_kib_per_sec, e->o.gc_interval_ms, since_us),
		    res);
out:
	gc_plan_clear(&plan);
	mw_mutex_lock(&e->mu);
	if (rc == -ESTALE && !e->w.sticky)
		e->w.sticky = -ESTALE; /* GC found a newer epoch: stop writing too */
	e->stats.gc_deleted += res->deleted;
	e->stats.gc_bytes_reclaimed += res->deleted_bytes;
	e->stats.repacked_blobs += res->repacked_blobs;
	e->stats.repacked_bytes += res->repacked_bytes;
	if (rc) {
		e->stats.gc_errors++;
	} else {
		e->stats.gc_passes++;
		e->stats.store_pack_bytes = res->pack_bytes;
		e->stats.store_live_pack_bytes = res->live_pack_bytes;
		e->stats.store_unflushed_pack_bytes = res->unflushed_pack_bytes;
		e->stats.gc_last_pass = (int64_t)time(NULL);
		e->m.gc_pack_mark = pack_mark;
	}
	mw_mutex_unlock(&e->mu);
	if (rc)
		log_warn("gc: pass failed (%s); retried at the next interval", strerror(-rc));
	return rc;
}

/*
 * After a pass, under e->mu: ask the flusher for what makes space come back
 * (no waiting).  GC can only delete a pack once the manifest covers its WAL
 * group and no kept table references it, and the writer by itself freezes a
 * MemTable only at its size or after ENGINE_REPLAY_MAX_ENTRIES groups (blob
 * bytes are not in the MemTable: a churning filesystem took many minutes to
 * get there, and the space of everything written meanwhile stayed).  So:
 *
 *   - a freeze when the MemTable holds anything and either the packs only
 *     the WAL references hold MAINT_SPACE_FLUSH_BYTES or more, or deletes
 *     were applied since the last such freeze;
 *   - with it, a forced compaction round (L0 whatever its size) when there
 *     were deletes or the pass selected packs for repack: the tombstones and
 *     the versions they and newer writes shadow are dropped, and with them
 *     the references that kept dead packs (and made mostly dead ones look
 *     live to repack);
 *   - a freeze (when the MemTable holds anything) and a forced compaction
 *     round when the repack found nothing it could move in the packs it
 *     selected (r->repack_none): their live bytes, as the tables count them,
 *     are all versions a newer entry shadows, so repacking again cannot help
 *     and only a compaction can; asked once per manifest version, so that a
 *     compaction that leaves them (a deeper level) does not make GC ask
 *     forever.  Such a pass counts as idle: an idle mount sends nothing.
 *
 * Returns true when it asked.  e->mu held.
 */
static bool space_request_locked(struct engine *e, const struct maint_gc_result *r)
{
	mw_mutex_assert_held(&e->mu);
	bool deletes = e->stats.deletes != e->m.gc_space_deletes;
	bool stuck = r->repack_none && e->man.version != e->m.gc_stuck_version;

	if (e->w.sticky)
		return false;
	if (memtable_count(e->mem) == 0) {
		if (!stuck)
			return false;
	} else {
		if (r->wal_only_pack_bytes < MAINT_SPACE_FLUSH_BYTES && !deletes && !stuck)
			return false;
		if (writer_freeze_locked(e))
			return false; /* no memory: the next pass tries again */
		e->m.gc_space_deletes = e->stats.deletes;
	}
	if (stuck)
		e->m.gc_stuck_version = e->man.version;
	if (deletes || r->repack_packs)
		e->m.compact_req++;
	pthread_cond_signal(&e->m.flush_cv);
	return true;
}

/* One pass (serialised by gc_mu), then, with ask_space, the space request. */
static int gc_run(struct engine *e, struct maint_gc_result *res, bool ask_space)
{
	struct maint_gc_result r;
	int rc;

	if (!e)
		return -EINVAL;
	if (e->o.read_only || !e->m.gc)
		return -EROFS;
	pthread_mutex_lock(&e->m.gc_mu);
	rc = gc_pass(e, &r);
	pthread_mutex_unlock(&e->m.gc_mu);
	if (ask_space) {
		mw_mutex_lock(&e->mu);
		r.space_requested = rc == 0 && space_request_locked(e, &r);
		mw_mutex_unlock(&e->mu);
	}
	if (res)
		*res = r;
	return rc;
}

int maint_gc_cycle(struct engine *e, struct maint_gc_result *res)
{
	return gc_run(e, res, true);
}

int maint_flusher_idle(struct engine *e)
{
	int rc;

	if (!e)
		return -EINVAL;
	mw_mutex_lock(&e->mu);
	rc = wait_flusher_locked(e, e->m.compact_req, true);
	mw_mutex_unlock(&e->mu);
	return rc;
}

int maint_gc_now(struct engine *e, struct maint_gc_result *res)
{
	return gc_run(e, res, false);
}

/* ------------------------------------------------------------------ */
/* The GC thread                                                       */
/* ------------------------------------------------------------------ */

uint64_t maint_gc_wait_ms(unsigned interval_ms, const struct maint_gc_result *r, int rc,
                          int64_t now_ms)
{
	uint64_t floor = interval_ms / MAINT_GC_WAIT_DIV, due;

	if (floor < MAINT_GC_WAIT_MIN_MS)
		floor = MAINT_GC_WAIT_MIN_MS;
	if (floor > interval_ms)
		floor = interval_ms;
	if (rc)
		return interval_ms;
	if (r->space_requested)
		return floor; /* churning: the sooner the compaction, the sooner the space */
	if (!r->deferred || r->next_due <= 0)
		return interval_ms;
	if (r->next_due <= now_ms / 1000)
		return floor; /* due already (clocks differ, or the pass was long) */
	due = (uint64_t)(r->next_due * 1000 - now_ms);
	return due < floor ? floor : due > interval_ms ? interval_ms : due;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void *gc_main(void *arg)
{
	struct engine *e = arg;
	struct maint_gc_result r;
	uint64_t wait_ms = e->o.gc_interval_ms;

	mw_mutex_lock(&e->mu);
	for (;;) {
		struct timespec ts;
		uint64_t ns;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns = (uint64_t)ts.tv_nsec + wait_ms * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		e->stats.gc_next_pass = (int64_t)time(NULL) + (int64_t)((wait_ms + 999) / 1000);
		while (!e->m.gc_thread.stop && !e->w.sticky &&
		       mw_cond_timedwait(&e->m.gc_cv, &e->mu, &ts) != ETIMEDOUT)
			;
		if (e->m.gc_thread.stop || e->w.sticky)
			break;
		wait_ms = e->o.gc_interval_ms;
		/*
		 * Nothing to collect: no new manifest, commit or retry since a
		 * pass that left nothing waiting for its grace period or for
		 * repack.  Then this wake-up sends no request (an idle mount
		 * costs nothing on S3).
		 */
		uint64_t mark[3] = {e->man.version, e->durable_upto, e->stats.commit_retries};
		/*
		 * Or nothing changed since a pass that left only deferred objects, none of
		 * them due yet: a pass now would find what that one found (an idle writer
		 * whose last pass deferred the objects of its last burst sent about 17
		 * requests a minute for the whole grace period).
		 */
		bool waiting = e->m.gc_idle_until && (int64_t)time(NULL) < e->m.gc_idle_until;
		if ((e->m.gc_idle || waiting) && !memcmp(mark, e->m.gc_mark, sizeof(mark))) {
			e->stats.gc_skipped++;
			continue;
		}
		mw_mutex_unlock(&e->mu);
		int rc = maint_gc_cycle(e, &r);
		mw_mutex_lock(&e->mu);
		/* a repack with nothing it can move waits for the compaction asked for, not a pass
		 */
		e->m.gc_idle = rc == 0 && r.deferred == 0 &&
		               (r.repack_packs == 0 || r.repack_none) && !r.space_requested;
		e->m.gc_idle_until = rc == 0 && r.deferred && r.next_due > 0 &&
		                             (r.repack_packs == 0 || r.repack_none) &&
		                             !r.space_requested
		                         ? r.next_due
		                         : 0;
		memcpy(e->m.gc_mark, mark, sizeof(mark));
		wait_ms = maint_gc_wait_ms(e->o.gc_interval_ms, &r, rc, wall_ms());
	}
	mw_mutex_unlock(&e->mu);
	return NULL;
}

int gc_thread_start(struct engine *e)
{
	if (e->o.read_only || e->o.gc_interval_ms == ENGINE_GC_OFF)
		return 0;
	return mw_thread_start(&e->m.gc_thread, "engine GC", gc_main, e, &e->mu, &e->m.gc_cv);
}

void gc_thread_stop(struct engine *e)
{
	mw_thread_stop(&e->m.gc_thread);
}
