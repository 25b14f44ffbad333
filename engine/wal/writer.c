/*
 * writer.c - the MemWAL writer: group commit, acknowledgements, fencing
 * and backpressure.
 *
 * DESIGN
 *
 * Many threads call engine_write().  Under the writer lock (e->mu) a batch
 * gets consecutive sequence numbers, its ops are encoded into the open group
 * (blob values are appended to the group's pack and replaced by their
 * descriptor), then inserted into the active MemTable; finally
 * e->visible_seq is advanced past the batch, which is the instant the batch
 * becomes readable, all at once (readers use visible_seq as their snapshot).
 * The caller gets a ticket: the WAL position of the group its batch joined.
 *
 * A blob value stays in the group's WAL entry while the group's blob bytes
 * fit opts.wal_blob_max (one PUT commits the group; the MemTable holds the
 * bytes and its flush promotes them into a pack, sst_flush.c); past that it
 * goes to the group's pack and the entry carries its descriptor.
 *
 * The pipeline.  The open group is closed (close_due_locked()) when the
 * cadence (opts.cadence_ms since the group's first write) fires, when the
 * group passes opts.group_max_bytes, when someone waits urgently
 * (ENGINE_URGENT, engine_wait(urgent), engine_sync(), backpressure, a
 * MemTable freeze) or at close, while fewer than opts.commit_inflight groups
 * are closed and not yet durable (a full group with a pack closes at once,
 * by the writer that filled it, whatever is in flight).  Triggers coalesce
 * by construction: they all just mark the group and wake the pipeline.
 * Closed groups queue in
 * position order; the pipeline threads (pipeline_main()) commit the groups
 * of the entry window (at most WAL_WINDOW past durable_upto) at once, each
 * pack then entry, so entries may land out of order; a group is
 * acknowledged only when it and every group before it are durable
 * (retire_locked()), and the first failure stops acknowledgements at its
 * position, whatever landed after it: an entry past a gap is never
 * acknowledged, and the next writer's fence fills the gap (replay.c).
 *
 * Commit of a group at position P (the commit point is step 2):
 *   1. if it has a pack and no uploader put it yet, seal it and store_put
 *      pack/<epoch>-<P> (a name no other writer can use; streaming when large);
 *   2. put_if_absent wal/<P> with the entry.
 * Only after step 2 returns 0 are P's waiters released (durable_upto = P+1).
 *
 * Epoch lease (docs/WAL.md, "Fencing and GC").  A newer writer's fence entry
 * at our next position stops us only while it exists, and GC deletes it
 * once it is far enough below the covered floor.  So a successful step 2 is
 * acknowledged only if an epoch check (the newest manifest is still of our
 * epoch; the claim at open is the first) was sent less than the lease
 * (gc_grace_sec / 10) before step 2's answer; otherwise a check is made
 * right then, after the put, and a newer epoch turns the group into a
 * sticky -ESTALE with nothing acknowledged.  A lease past its half is
 * renewed before step 2, so only a put that stalls that long needs the
 * check after it.
 *
 * Failure.  -EEXIST at step 2 means another writer took position P: unless
 * the object holds exactly our bytes (our own earlier attempt), we have been
 * fenced: sticky -ESTALE.  Any other error leaves the outcome unknown (a
 * timeout may still land): we read wal/<P> back; if it holds our bytes the
 * group is durable, otherwise it is retried (commit_group()) until it lands
 * or the retries are given up: sticky -EIO.  An error the store says no
 * retry changes (store_err_permanent(): a permission, a link planted in a
 * local store) is not retried: sticky -EIO at once, with a log line.  Either way no group is
 * started after the failure (positions are not reused), the failed group's waiters and all later
 * ones get the error, and whether the failed group is replayed later is decided by whether wal/<P>
 * exists when the next writer opens (docs/WAL.md).
 *
 * Backpressure.  e->stats.pending_bytes counts bytes of groups not yet
 * durable (open and in flight).  A writer that would push it past
 * opts.max_pending_bytes asks for an urgent commit and waits.
 *
 * Conditional writes: writer_write_if() runs a caller's check under e->mu
 * after the backpressure waits and right before the apply; the repack
 * (maint.c) uses it to rewrite a blob only if the key has not been written
 * since it looked.
 *
 * Frozen MemTables: at opts.memtable_max_bytes the active MemTable is frozen
 * and kept readable until the flusher (flush.c) has made it an SSTable;
 * writers wait while frozen bytes exceed opts.max_frozen_bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blobcache.h"
#include "engine_int.h"
#include "log.h"
#include "pack.h"
#include "store.h"
#include "wal.h"

static void group_free(struct group *g)
{
	if (!g)
		return;
	mw_buf_free(&g->wal);
	pack_unref(g->pack);
	free(g);
}

/* Open a new group at the next position (caller holds e->mu). */
static int group_open_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	struct group *g = calloc(1, sizeof(*g));
	int rc;

	if (!g)
		return -ENOMEM;
	rc = wal_entry_begin(&g->wal);
	if (rc) {
		free(g);
		return rc;
	}
	g->position = e->next_pos++;
	g->first_seq = e->next_seq;
	g->opened_us = mw_now_us();
	e->w.open = g;
	pthread_cond_broadcast(&e->w.commit_cv); /* start the cadence clock */
	return 0;
}

int writer_freeze_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	struct memtable *m;
	int rc = memtable_new(&m);

	if (rc)
		return rc;
	pthread_mutex_lock(&e->mem_mu);
	if (e->nfrozen == e->frozen_cap) {
		size_t cap = e->frozen_cap ? 2 * e->frozen_cap : 8;
		struct frozen_mem *f = realloc(e->frozen, cap * sizeof(*f));
		if (!f) {
			pthread_mutex_unlock(&e->mem_mu);
			memtable_unref(m);
			return -ENOMEM;
		}
		e->frozen = f;
		e->frozen_cap = cap;
	}
	/* the open group may be partly in the frozen table: it is not covered */
	struct frozen_mem *fm = &e->frozen[e->nfrozen++];
	fm->mem = e->mem;
	fm->wal_end = e->w.open ? e->w.open->position : e->next_pos;
	fm->durable_need = e->w.open ? e->w.open->position + 1 : e->next_pos;
	fm->bytes = memtable_bytes(e->mem);
	e->freeze_pos = fm->wal_end;
	e->frozen_bytes += fm->bytes;
	e->mem = m;
	pthread_mutex_unlock(&e->mem_mu);
	pthread_cond_signal(&e->m.flush_cv);
	log_debug("engine: froze a MemTable (%zu frozen)", e->nfrozen);
	return 0;
}

/* Is the write with this ticket settled (e->mu held)?  1 durable, <0 failed, 0 not yet. */
static int ticket_state_locked(struct engine *e, uint64_t ticket)
{
	mw_mutex_assert_held(&e->mu);
	if (ticket < e->durable_upto)
		return 1;
	if (e->w.sticky && ticket >= e->w.failed_pos)
		return e->w.sticky;
	return 0;
}

/* The absolute CLOCK_MONOTONIC deadline ms from now (durable_cv runs on it). */
static struct timespec deadline_ms(unsigned ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000u;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	return ts;
}

/*
 * Is the store still full (the last commit attempt failed with -ENOSPC)?
 * Asks the pipeline for one more attempt now, cutting its backoff short,
 * and waits for its outcome, so that a write or fsync right after space
 * was freed goes through.  Caller holds e->mu.
 */
static bool still_full_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	if (e->stats.outage_error != -ENOSPC)
		return false;
	uint64_t r0 = e->stats.commit_retries;
	pthread_cond_broadcast(&e->w.commit_cv);
	while (e->stats.outage_error == -ENOSPC && e->stats.commit_retries == r0 && !e->w.sticky)
		mw_cond_wait(&e->durable_cv, &e->mu);
	return e->stats.outage_error == -ENOSPC;
}

/*
 * Wait until ticket is settled (caller holds e->mu).  While the store is
 * full the wait ends at once with -ENOSPC; with opts.sync_timeout_ms it
 * ends with -ETIMEDOUT after that long.  Neither gives up the write: its
 * group stays pending and commits when the store takes it.
 */
static int wait_locked(struct engine *e, uint64_t ticket, bool urgent)
{
	mw_mutex_assert_held(&e->mu);
	struct timespec until = deadline_ms(e->o.sync_timeout_ms);
	int st;

	while ((st = ticket_state_locked(e, ticket)) == 0) {
		if (ticket >= e->next_pos)
			return 0; /* never issued: nothing to wait for */
		if (e->stats.outage_error == -ENOSPC) {
			if (still_full_locked(e))
				return -ENOSPC;
			continue; /* it waited: look at the ticket again */
		}
		if (urgent && e->w.open && ticket >= e->w.open->position && !e->w.open->urgent) {
			e->w.open->urgent = true;
			pthread_cond_broadcast(&e->w.commit_cv);
		}
		if (!e->o.sync_timeout_ms) {
			mw_cond_wait(&e->durable_cv, &e->mu);
		} else if (mw_cond_timedwait(&e->durable_cv, &e->mu, &until) == ETIMEDOUT &&
		           ticket_state_locked(e, ticket) == 0) {
			e->stats.sync_timeouts++;
			return -ETIMEDOUT;
		}
	}
	return st < 0 ? st : 0;
}

/* Append value v to g's pack and its descriptor op to g's WAL entry (e->mu held). */
static int add_blob_locked(struct engine *e, struct group *g, const uint8_t *k, size_t kn,
                           const uint8_t *v, size_t vn)
{
	uint8_t small[BLOB_DESC_FIXED + 8 * 32]; /* the descriptor of a blob up to 2 MiB */
	size_t dn = blob_desc_size_for(vn);
	uint8_t *desc = dn <= sizeof(small) ? small : malloc(dn);
	int rc;

	if (!desc)
		return -ENOMEM;
	rc = g->pack ? 0 : pack_new(e->epoch, g->position, &g->pack);
	if (!rc)
		rc = pack_append(g->pack, v, vn, desc);
	if (!rc)
		rc = wal_entry_add_op(&g->wal, KV_BLOB, k, kn, desc, dn);
	if (desc != small)
		free(desc);
	return rc;
}

/* Encode batch b into the open group and the MemTable (caller holds e->mu). */
static int apply_locked(struct engine *e, const struct engine_batch *b)
{
	mw_mutex_assert_held(&e->mu);
	struct group *g = e->w.open;
	struct wal_cursor c;
	size_t wal_mark = g->wal.len, blobs_mark = g->wal_blobs, bytes = 0;
	uint64_t seq = e->next_seq;
	uint64_t pack_before = g->pack ? pack_data_bytes(g->pack) : 0;
	enum kv_type type;
	const uint8_t *k, *v;
	size_t kn, vn;
	int rc;

	/* 1. into the group (undone by truncation on failure) */
	rc = wal_entry_add_batch(&g->wal, (uint32_t)b->count);
	wal_cursor_init(&c, b->rep.p, b->rep.len, 0);
	c.ops_in_batch = b->count;
	c.borrowed_ok = true; /* borrowed values are copied from the caller's memory here */
	while (rc == 0 && (rc = wal_op_next(&c, &type, &k, &kn, &v, &vn)) == 1) {
		if (type == KV_INLINE && vn >= e->o.inline_max &&
		    (vn > e->o.wal_blob_max || g->wal_blobs + vn > e->o.wal_blob_max)) {
			rc = add_blob_locked(e, g, k, kn, v, vn);
		} else {
			if (type == KV_INLINE && vn >= e->o.inline_max)
				g->wal_blobs += vn; /* carried in the entry, promoted at flush */
			rc = wal_entry_add_op(&g->wal, type, k, kn, v, vn);
		}
	}
	if (rc < 0) {
		g->wal.len = wal_mark; /* blob bytes stay in the pack, unreferenced */
		g->wal_blobs = blobs_mark;
		return rc;
	}
	/* 2. into the MemTable: from here a failure fences the writer */
	const uint8_t *p = g->wal.p + wal_mark;
	wal_cursor_init(&c, p, g->wal.len - wal_mark, 1);
	while ((rc = wal_op_next(&c, &type, &k, &kn, &v, &vn)) == 1) {
		rc = memtable_add(e->mem, seq++, type, k, kn, v, vn);
		if (rc)
			break;
		if (type == KV_DELETE)
			e->stats.deletes++;
		else
			e->stats.puts++;
	}
	if (rc < 0) {
		log_err("engine: MemTable insert failed (%s): writer stops", strerror(-rc));
		e->w.sticky = -EIO;
		e->w.failed_pos = g->position;
		pthread_cond_broadcast(&e->durable_cv);
		return -EIO;
	}
	bytes = (g->wal.len - wal_mark) + (g->pack ? pack_data_bytes(g->pack) - pack_before : 0);
	g->ops += (uint32_t)b->count;
	g->batches++;
	g->bytes += bytes;
	e->stats.pending_bytes += bytes;
	e->stats.batches++;
	e->next_seq = seq;
	atomic_store_explicit(&e->visible_seq, seq - 1, memory_order_release);
	return 0;
}

static void close_due_locked(struct engine *e, uint64_t *wake_us);

int engine_write(struct engine *e, struct engine_batch *b, int flags, uint64_t *ticket)
{
	return writer_write_if(e, b, flags, ticket, NULL, NULL);
}

/*
 * Backpressure (caller holds e->mu): wait while a write of bytes would push
 * the pending bytes past max_pending_bytes, or while too much is frozen and
 * not yet flushed.  *waited tells whether it waited (counted once).
 */
static void room_wait_locked(struct engine *e, size_t bytes, bool *waited)
{
	mw_mutex_assert_held(&e->mu);
	mw_noio_check("engine backpressure wait", NULL, 0);
	while (!e->w.sticky && e->stats.outage_error != -ENOSPC && e->stats.pending_bytes > 0 &&
	       e->stats.pending_bytes + bytes > e->o.max_pending_bytes) {
		if (!*waited)
			e->stats.backpressure_waits++;
		*waited = true;
		if (e->w.open && !e->w.open->urgent) {
			e->w.open->urgent = true;
			pthread_cond_broadcast(&e->w.commit_cv);
		}
		e->stats.writers_waiting++;
		mw_cond_wait(&e->durable_cv, &e->mu);
		e->stats.writers_waiting--;
	}
	while (!e->w.sticky && e->m.flusher.running && e->frozen_bytes > e->o.max_frozen_bytes) {
		if (!*waited)
			e->stats.backpressure_waits++;
		*waited = true;
		e->stats.writers_waiting++;
		mw_cond_wait(&e->durable_cv, &e->mu);
		e->stats.writers_waiting--;
	}
}

int engine_wait_room(struct engine *e, size_t bytes)
{
	bool waited = false;
	int rc;

	mw_noio_check(__func__, NULL, 0);
	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return -EROFS;
	mw_mutex_lock(&e->mu);
	room_wait_locked(e, bytes, &waited);
	rc = e->w.sticky ? e->w.sticky : still_full_locked(e) ? -ENOSPC : 0;
	mw_mutex_unlock(&e->mu);
	return rc;
}

/* Does an engine_handover() hold writes now?  (e->mu held) */
static bool handover_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	return e->w.handover_until_us && mw_now_us() < e->w.handover_until_us;
}

int writer_write_if(struct engine *e, struct engine_batch *b, int flags, uint64_t *ticket,
                    writer_cond_fn cond, void *arg)
{
	uint64_t t;
	bool waited = false;
	int rc = 0;

	if (!e || !b || (flags & ~(ENGINE_WAIT | ENGINE_URGENT | ENGINE_NOWAIT)) ||
	    (flags & (ENGINE_WAIT | ENGINE_NOWAIT)) == (ENGINE_WAIT | ENGINE_NOWAIT))
		return -EINVAL;
	if (e->o.read_only)
		return -EROFS;
	bool nowait = flags & ENGINE_NOWAIT;
	if (!nowait)
		mw_noio_check("engine_write", NULL, 0);
	mw_mutex_lock(&e->mu);
	if (!nowait)
		room_wait_locked(e, b->bytes, &waited); /* a no-wait writer waited before */
	if (e->w.sticky || handover_locked(e)) {
		rc =
		    e->w.sticky ? e->w.sticky : -ESTALE; /* a takeover is under way: as if fenced */
		goto out;
	}
	if (nowait ? e->stats.outage_error == -ENOSPC : still_full_locked(e)) {
		rc = -ENOSPC; /* the store is full: refuse new data until a commit lands */
		goto out;
	}
	if (b->count == 0) {
		t = e->w.open ? e->w.open->position : e->next_pos - 1;
		goto done;
	}
	if (b->count > UINT32_MAX / 2) {
		rc = -EINVAL;
		goto out;
	}
	if (cond && (rc = cond(e, arg)) != 0)
		goto out; /* 1: skipped, nothing written; <0: failed */
	if (!e->w.open && (rc = group_open_locked(e)))
		goto out;
	rc = apply_locked(e, b);
	if (rc)
		goto out;
	t = e->w.open->position;
	if (memtable_bytes(e->mem) >= e->o.memtable_max_bytes ||
	    t - e->freeze_pos >= ENGINE_REPLAY_MAX_ENTRIES) {
		rc = writer_freeze_locked(e);
		if (rc) {
			rc = 0; /* keep writing into the full MemTable; try again later */
			log_warn("engine: MemTable freeze failed (no memory)");
		}
		e->w.open->urgent = true;
	}
	if ((flags & ENGINE_URGENT) || e->w.open->bytes >= e->o.group_max_bytes)
		e->w.open->urgent = true;
	if (e->w.open->urgent) {
		pthread_cond_broadcast(&e->w.commit_cv);
		/* a full group queues now, even while every pipeline thread is busy: it
		   does not grow on until one comes round, and its pack goes next */
		if (e->w.open->bytes >= e->o.group_max_bytes)
			close_due_locked(e, NULL);
	}
done:
	if (ticket)
		*ticket = t;
	if (flags & ENGINE_WAIT)
		rc = wait_locked(e, t, flags & ENGINE_URGENT);
out:
	mw_mutex_unlock(&e->mu);
	return rc;
}

int engine_put(struct engine *e, const void *key, size_t klen, const void *val, size_t vlen,
               int flags, uint64_t *ticket)
{
	struct engine_batch b = {0};
	int rc = engine_batch_put(&b, key, klen, val, vlen);

	if (rc == 0)
		rc = engine_write(e, &b, flags, ticket);
	mw_buf_free(&b.rep);
	return rc;
}

int engine_delete(struct engine *e, const void *key, size_t klen, int flags, uint64_t *ticket)
{
	struct engine_batch b = {0};
	int rc = engine_batch_delete(&b, key, klen);

	if (rc == 0)
		rc = engine_write(e, &b, flags, ticket);
	mw_buf_free(&b.rep);
	return rc;
}

int engine_wait(struct engine *e, uint64_t ticket, bool urgent)
{
	int rc;

	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return 0;
	mw_noio_check(__func__, NULL, 0);
	mw_mutex_lock(&e->mu);
	rc = wait_locked(e, ticket, urgent);
	mw_mutex_unlock(&e->mu);
	return rc;
}

int engine_sync(struct engine *e)
{
	int rc;

	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return 0;
	mw_noio_check(__func__, NULL, 0);
	mw_mutex_lock(&e->mu);
	if (e->w.sticky)
		rc = e->w.sticky;
	else if (e->w.open)
		rc = wait_locked(e, e->w.open->position, true);
	else if (e->w.q_tail)
		rc = wait_locked(e, e->w.q_tail->position, true);
	else
		rc = 0;
	mw_mutex_unlock(&e->mu);
	return rc;
}

/*
 * Does wal/<name> hold exactly buf (our own retried or timed-out put)?
 * 1 yes, 0 no (absent or other bytes), or the read's error.
 */
static int store_holds(struct engine *e, const char *name, const void *buf, size_t len)
{
	void *got = NULL;
	size_t n = 0;
	int rc = store_get(e->st, name, 0, STORE_TO_END, &got, &n);

	if (rc == 0)
		rc = n == len && memcmp(got, buf, len) == 0;
	else if (rc == -ENOENT)
		rc = 0;
	free(got);
	return rc;
}

/* The epoch lease in microseconds: a tenth of the GC grace (docs/WAL.md). */
static uint64_t lease_us(const struct engine *e)
{
	if (e->o.gc_grace_sec == ENGINE_GC_NO_GRACE)
		return 0;
	return (uint64_t)e->o.gc_grace_sec * 100000u;
}

/*
 * Is the store still ours?  Reads the newest manifest (a listing from the
 * hint and one GET; the newest is never deleted, but a version found by the
 * listing may be superseded and collected before the GET, hence the
 * retries): 0 if it is of our epoch, and the lease then runs from this
 * check's start; -ESTALE if a newer writer claimed the store; or the read's
 * error.  Any pipeline thread, without e->mu.
 */
static int epoch_check(struct engine *e)
{
	uint64_t t = mw_now_us();
	struct manifest m;
	int rc = -ENOENT;

	for (int i = 0; i < 3 && rc == -ENOENT; i++)
		rc = manifest_load_latest(e->st, &m);
	if (rc)
		return rc; /* transient: the commit is retried, check included */
	uint64_t newest = m.epoch;
	manifest_clear(&m);
	if (newest > e->epoch) {
		log_err("engine: epoch %" PRIu64 " claimed the store after us (epoch %" PRIu64
		        "); writer stops, nothing more is acknowledged",
		        newest, e->epoch);
		return -ESTALE;
	}
	uint64_t prev = atomic_load(&e->w.lease_from_us);
	while (prev < t && !atomic_compare_exchange_weak(&e->w.lease_from_us, &prev, t))
		; /* checks of several pipeline threads: the latest start counts */
	return 0;
}

/* Does the lease cover a WAL put answered now?  Never with a zero lease. */
static bool lease_holds(const struct engine *e)
{
	uint64_t lease = lease_us(e);
	return lease && mw_now_us() - atomic_load(&e->w.lease_from_us) < lease;
}

/*
 * Before a WAL put: renew a lease past its half, so that a put answered in
 * time is acknowledged without a check after it (a check that found a newer
 * epoch after our entry landed could not tell whether the newer writer's
 * replay took the entry in: the failed write might then show up later).
 */
static int lease_renew(struct engine *e)
{
	uint64_t lease = lease_us(e);
	if (!lease || mw_now_us() - atomic_load(&e->w.lease_from_us) < lease / 2)
		return 0;
	return epoch_check(e);
}

/* May the WAL put answered just now be acknowledged?  0 or the check's error. */
static int lease_ack(struct engine *e)
{
	return lease_holds(e) ? 0 : epoch_check(e);
}

int engine_check_epoch(struct engine *e)
{
	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return -EROFS;
	mw_mutex_lock(&e->mu);
	int rc = e->w.sticky;
	mw_mutex_unlock(&e->mu);
	if (rc)
		return rc;
	rc = epoch_check(e);
	if (rc != -ESTALE)
		return rc;
	/* nothing not yet acknowledged may be from here on: the newer writer's fence
	   takes the positions we would write next (a group that landed before its
	   replay may be in the store all the same: reported lost, never guessed) */
	mw_mutex_lock(&e->mu);
	if (!e->w.sticky || e->w.failed_pos > e->durable_upto) {
		e->w.sticky = -ESTALE;
		e->w.failed_pos = e->durable_upto;
	}
	rc = e->w.sticky;
	pthread_cond_broadcast(&e->w.commit_cv);
	pthread_cond_broadcast(&e->durable_cv);
	mw_mutex_unlock(&e->mu);
	return rc;
}

int engine_write_error(struct engine *e)
{
	if (!e || e->o.read_only)
		return 0;
	mw_mutex_lock(&e->mu);
	int rc = e->w.sticky ? e->w.sticky : handover_locked(e) ? -ESTALE : 0;
	mw_mutex_unlock(&e->mu);
	return rc;
}

int engine_handover(struct engine *e, unsigned hold_ms)
{
	if (!e)
		return -EINVAL;
	if (e->o.read_only)
		return -EROFS;
	mw_mutex_lock(&e->mu);
	e->w.handover_until_us = hold_ms ? mw_now_us() + (uint64_t)hold_ms * 1000u : 0;
	mw_mutex_unlock(&e->mu);
	if (!hold_ms)
		return 0;
	log_warn("engine: a takeover is under way: writes are refused for up to %u s while "
	         "what was written is committed",
	         hold_ms / 1000);
	/* every write applied before the hold is in a group at or before the open one */
	return engine_sync(e);
}

/*
 * Seal (once) and put g's pack, if it has one: 0 once it is durable.  Runs
 * without e->mu, by one pipeline thread at a time (a commit, or an early put:
 * g->pack_busy); g is closed, so nothing is appended any more.
 */
static int put_pack(struct engine *e, struct group *g)
{
	int rc;

	if (!g->pack || pack_count(g->pack) == 0) {
		g->pack_durable = true; /* nothing to put */
		return 0;
	}
	if (!g->pack_sealed) {
		rc = pack_seal(g->pack);
		if (rc)
			return rc;
		g->pack_sealed = true;
	}
	rc = pack_write(g->pack, e->st, &g->pack_bytes);
	if (rc == 0)
		g->pack_durable = true;
	return rc;
}

bool err_permanent(int rc)
{
	return rc == -ESTALE || rc == -EUCLEAN || rc == -EBADMSG || rc == -EINVAL ||
	       rc == -ENOTSUP || rc == -EPROTONOSUPPORT;
}

/*
 * Does a commit that failed with rc end without a retry: an error of the engine's own
 * (err_permanent()), or one the store says stays until someone changes the store
 * (store_err_permanent(): a permission, a link planted in a local store's directory, a
 * read-only filesystem)?  Retrying those would only hang the writers until the close.
 */
static bool commit_err_final(struct engine *e, int rc)
{
	return err_permanent(rc) || store_err_permanent(e->st, rc);
}

/*
 * A commit of g failed with the transient error rc: the first failure of an
 * outage sets outage_since and is logged once; a change of error is logged.
 * With e->mu.
 */
static void outage_begin_locked(struct engine *e, const struct group *g, int rc)
{
	mw_mutex_assert_held(&e->mu);
	if (!e->stats.outage_since) {
		e->stats.outage_since = (int64_t)time(NULL);
		e->stats.outages++;
		log_warn("engine: group %" PRIu64 " could not be committed (%s); it stays "
		         "pending and is retried until the store takes it",
		         g->position, strerror(-rc));
	} else if (rc != e->stats.outage_error && e->stats.outage_error) {
		log_warn("engine: commits now fail with: %s", strerror(-rc));
	}
	e->stats.outage_error = rc;
}

/*
 * One attempt at committing g: its pack (once durable, never again), then
 * its WAL entry.  Runs on a pipeline thread without e->mu.  0 durable; -ESTALE
 * fenced; any other error leaves g pending for another attempt of the same
 * bytes at the same position: the pack's name is ours alone and the entry
 * is written with put_if_absent, so whichever attempt lands, the store
 * holds exactly these bytes, and a later attempt finds them (docs/WAL.md).
 */
static int commit_once(struct engine *e, struct group *g)
{
	char name[FMT_NAME_MAX];
	struct wal_info info = {
	    .flags = 0,
	    .epoch = e->epoch,
	    .position = g->position,
	    .first_seq = g->first_seq,
	    .op_count = g->ops,
	    .batch_count = g->batches,
	};
	int rc, held;

	if (!g->pack_durable && (rc = put_pack(e, g)) != 0)
		return rc;
	rc = lease_renew(e);
	if (rc)
		return rc;
	wal_entry_seal(&g->wal, &info);
	fmt_wal_name(name, g->position);
	if (e->conditional)
		rc = store_put_if_absent(e->st, name, g->wal.p, g->wal.len);
	else
		rc = store_put(e->st, name, g->wal.p, g->wal.len);
	if (rc == 0)
		return lease_ack(e);
	if (rc != -EEXIST && !commit_err_final(e, rc) && e->o.commit_retry_ms != ENGINE_NO_RETRY) {
		/* the outage shows now, not after the check below has retried too */
		mw_mutex_lock(&e->mu);
		outage_begin_locked(e, g, rc);
		mw_mutex_unlock(&e->mu);
	}
	held = store_holds(e, name, g->wal.p, g->wal.len);
	if (held == 1) {
		log_info("engine: %s: put returned %s but the store holds our entry", name,
		         strerror(-rc));
		return lease_ack(e);
	}
	if (rc == -EEXIST && held == 0) {
		log_err("engine: %s exists: another writer fenced epoch %" PRIu64 "; writer stops",
		        name, e->epoch);
		return -ESTALE;
	}
	return held < 0 ? held : rc;
}

/* Give up a close that waits this long for an unreachable store. */
#define CLOSE_OUTAGE_MS 60000u

/*
 * Commit g, retrying transient failures with backoff (capped, jittered)
 * until it lands; only a permanent error ends the loop, or a close that has
 * waited CLOSE_OUTAGE_MS (then nothing of g was acknowledged and the error
 * is returned).  The first failure of an outage is logged once, and so is
 * the end; meanwhile the stats say since when (outage_since).  Pipeline
 * thread, without e->mu.
 */
static int commit_group(struct engine *e, struct group *g)
{
	unsigned wait_ms = RETRY_MIN_MS;
	uint64_t closing_since = 0, started = mw_now_us();
	uint64_t jitter = g->position * 0x9e3779b97f4a7c15ull;

	if (g->pack_err && e->o.commit_retry_ms == ENGINE_NO_RETRY) {
		/* an uploader's try was the first attempt: no retry means none after it */
		log_err("engine: group %" PRIu64 " not committed (its pack: %s); the writer stops, "
		        "none of it was acknowledged",
		        g->position, strerror(-g->pack_err));
		return -EIO;
	}
	for (;;) {
		int rc = commit_once(e, g);

		mw_mutex_lock(&e->mu);
		if (rc == 0 || commit_err_final(e, rc)) {
			if (rc && !err_permanent(rc)) {
				log_err("engine: group %" PRIu64
				        " not committed: the store refuses "
				        "it (%s), and no retry would change that (its line above "
				        "says where); the writer stops, none of it was "
				        "acknowledged",
				        g->position, strerror(-rc));
				rc = -EIO;
			}
			if (e->stats.outage_since) {
				log_warn("engine: the store takes commits again, after %" PRId64
				         " s and %" PRIu64 " retries",
				         (int64_t)time(NULL) - e->stats.outage_since,
				         e->stats.commit_retries);
				e->stats.outage_since = 0;
				e->stats.outage_error = 0;
			}
			mw_mutex_unlock(&e->mu);
			return rc;
		}
		if (e->w.sticky) {
			/* another group failed: nothing from here on can be acknowledged */
			rc = e->w.sticky;
			mw_mutex_unlock(&e->mu);
			return rc;
		}
		uint64_t now = mw_now_us();
		if (e->w.pipeline_stop && !closing_since)
			closing_since = now;
		if (e->o.commit_retry_ms == ENGINE_NO_RETRY ||
		    (e->o.commit_retry_ms &&
		     now - started >= (uint64_t)e->o.commit_retry_ms * 1000u) ||
		    (closing_since && now - closing_since >= (uint64_t)CLOSE_OUTAGE_MS * 1000u)) {
			log_err("engine: group %" PRIu64 " not committed (%s); the writer stops, "
			        "none of it was acknowledged (a reopen decides whether it landed)",
			        g->position, strerror(-rc));
			mw_mutex_unlock(&e->mu);
			return -EIO;
		}
		outage_begin_locked(e, g, rc);
		e->stats.commit_retries++;
		pthread_cond_broadcast(&e->durable_cv); /* -ENOSPC waiters return */
		jitter = jitter * 6364136223846793005ull + 1442695040888963407ull;
		unsigned ms = wait_ms / 2 + (unsigned)((jitter >> 33) % (wait_ms / 2 + 1));
		struct timespec until = deadline_ms(ms);
		mw_cond_timedwait(&e->w.commit_cv, &e->mu, &until);
		mw_mutex_unlock(&e->mu);
		wait_ms = wait_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : wait_ms * 2;
	}
}

uint64_t writer_lost_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	uint64_t n = e->stats.batches_lost;

	if (!e->w.sticky)
		return n;
	if (e->w.open)
		n += e->w.open->batches;
	for (struct group *g = e->w.q_head; g; g = g->next)
		if ((g->done && g->rc) || g->position >= e->w.failed_pos)
			n += g->batches;
	return n;
}

struct pack *writer_pending_pack_locked(struct engine *e, uint64_t position)
{
	mw_mutex_assert_held(&e->mu);
	struct group *g = e->w.open;

	if (!(g && g->pack && pack_position(g->pack) == position))
		for (g = e->w.q_head; g && !(g->pack && pack_position(g->pack) == position);
		     g = g->next)
			;
	if (!g)
		return NULL;
	pack_ref(g->pack);
	return g->pack;
}

/* WAL entries in flight at once: the protocol's window (wal.h), or fewer. */
static unsigned entry_window(const struct engine *e)
{
	return e->o.commit_inflight < WAL_WINDOW ? e->o.commit_inflight : WAL_WINDOW;
}

/*
 * Close the open group if it is due (urgent, its cadence passed, a close)
 * and fewer than opts.commit_inflight groups are closed and not yet
 * durable: it joins the queue, later writes open the next group.  A group
 * without a pack is closed only when its entry can go at once (fewer
 * queued groups than the entry window): closing it early would only split
 * the writes that wait into more entries (more round trips), with no
 * upload to overlap.  A group that reached opts.group_max_bytes with a
 * pack closes even when the pipeline is full (the queue is bounded by
 * opts.max_pending_bytes): it would otherwise grow to tens of MB while the
 * threads upload, and its upload would start only once one is free.  A
 * pipeline thread, or the writer that filled the group, under e->mu.
 * *wake_us (may be NULL) receives when the open group falls due (0:
 * nothing to wait for).
 */
static void close_due_locked(struct engine *e, uint64_t *wake_us)
{
	mw_mutex_assert_held(&e->mu);
	struct group *g = e->w.open;

	if (wake_us)
		*wake_us = 0;
	if (!g || e->w.sticky)
		return;
	uint64_t due = g->opened_us + (uint64_t)e->o.cadence_ms * 1000u;
	if (!g->urgent && !e->w.pipeline_stop && mw_now_us() < due) {
		if (wake_us)
			*wake_us = due;
		return;
	}
	bool full = g->bytes >= e->o.group_max_bytes && g->pack && pack_count(g->pack) > 0;
	if (e->w.nqueued >= e->o.commit_inflight && !full)
		return; /* the pipeline is full: a retirement wakes us */
	if (e->w.nqueued >= entry_window(e) && !(g->pack && pack_count(g->pack) > 0))
		return; /* no pack to upload early: it gathers writes until an entry slot frees */
	e->w.open = NULL;
	g->next = NULL;
	if (e->w.q_tail)
		e->w.q_tail->next = g;
	else
		e->w.q_head = g;
	e->w.q_tail = g;
	e->w.nqueued++;
	pthread_cond_broadcast(&e->w.commit_cv);
}

/* Wait on commit_cv (e->mu held) until woken, or until wake_us (monotonic) when not 0. */
static void pipeline_wait_locked(struct engine *e, uint64_t wake_us)
{
	if (!wake_us) {
		mw_cond_wait(&e->w.commit_cv, &e->mu);
		return;
	}
	uint64_t now = mw_now_us();
	if (wake_us <= now)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t ns = (uint64_t)ts.tv_nsec + (wake_us - now) * 1000u;
	ts.tv_sec += (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	mw_cond_timedwait(&e->w.commit_cv, &e->mu, &ts);
}

/*
 * Record the end of g's commit (e->mu held): a failure makes the writer
 * sticky at the lowest failed position, so that nothing from there on is
 * acknowledged, whatever landed after it.
 */
static void commit_ended_locked(struct engine *e, struct group *g, int rc)
{
	mw_mutex_assert_held(&e->mu);
	g->done = true;
	g->rc = rc;
	if (!rc)
		return;
	if (!e->w.sticky) {
		e->w.sticky = rc;
		e->w.failed_pos = g->position;
	} else if (g->position < e->w.failed_pos) {
		e->w.failed_pos = g->position;
	}
}

/*
 * Retire the finished groups at the head of the queue, in position order
 * (e->mu held): a durable one below any failure advances durable_upto,
 * which releases its waiters.  A group that landed after a failed one is
 * not acknowledged (its entry is past a gap, or past a fence: docs/WAL.md).
 * The retired groups are chained on *freed, to be freed without e->mu.
 * Returns true when a group became durable (engine_committed() is due).
 */
static bool retire_locked(struct engine *e, struct group **freed)
{
	mw_mutex_assert_held(&e->mu);
	struct group *g;
	bool any = false, durable = false;

	while ((g = e->w.q_head) && g->done) {
		e->w.q_head = g->next;
		if (!e->w.q_head)
			e->w.q_tail = NULL;
		e->w.nqueued--;
		e->stats.pending_bytes -= g->bytes;
		if (g->rc || (e->w.sticky && g->position >= e->w.failed_pos)) {
			e->stats.batches_lost += g->batches; /* applied, never acknowledged */
		} else {
			e->durable_upto = g->position + 1;
			durable = true;
			e->stats.groups_committed++;
			e->stats.group_bytes += g->wal.len;
			e->stats.wal_blob_bytes += g->wal_blobs;
			if (g->pack_bytes) { /* a group without a pack wrote none */
				e->stats.packs_written++;
				e->stats.pack_bytes += g->pack_bytes;
				watch_record_pack_locked(e, g->position); /* the store watch */
			}
		}
		g->next = *freed;
		*freed = g;
		any = true;
	}
	if (any) {
		watch_note_commit_locked(e); /* the store watch checks soon (watch.c) */
		pthread_cond_broadcast(&e->durable_cv);
		pthread_cond_broadcast(&e->w.commit_cv); /* room in the pipeline */
	}
	return durable;
}

/* Free a chain of retired groups (without e->mu). */
static void free_chain(struct group *g)
{
	while (g) {
		struct group *next = g->next;
		group_free(g);
		g = next;
	}
}

/*
 * After a failure, groups nobody is committing will never be: end them with
 * the writer's error, and drop the open group (e->mu held).
 */
static void fail_queued_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	if (e->w.open) {
		e->stats.pending_bytes -= e->w.open->bytes;
		e->stats.batches_lost += e->w.open->batches;
		group_free(e->w.open);
		e->w.open = NULL;
	}
	for (struct group *g = e->w.q_head; g; g = g->next)
		if (!g->committing && !g->pack_busy && !g->done)
			commit_ended_locked(e, g, e->w.sticky);
	pthread_cond_broadcast(&e->durable_cv);
}

/*
 * The next group whose commit a pipeline thread may start (e->mu held):
 * the first queued group in the entry window that nobody is on.  Entries
 * of the window go at once, in any order: each is written only after its
 * own pack is durable, and replay and the acknowledgements take them in
 * position order (a later entry that lands before an earlier one is
 * acknowledged only once the earlier one is durable too).
 */
static struct group *commit_candidate_locked(struct engine *e)
{
	uint64_t end = e->durable_upto + entry_window(e);

	if (e->w.sticky)
		return NULL;
	for (struct group *g = e->w.q_head; g && g->position < end; g = g->next)
		if (!g->committing && !g->pack_busy && !g->done)
			return g;
	return NULL;
}

/* A queued group past the entry window whose pack may go early, or NULL (e->mu held). */
static struct group *pack_candidate_locked(struct engine *e)
{
	if (e->w.sticky)
		return NULL;
	for (struct group *g = e->w.q_head; g; g = g->next)
		if (!g->committing && !g->pack_busy && !g->pack_tried && !g->pack_durable &&
		    !g->done && g->pack && pack_count(g->pack) > 0)
			return g;
	return NULL;
}

/*
 * A pipeline thread (opts.commit_inflight of them, all alike): closes due
 * groups; commits groups of the entry window (pack, then entry, retried
 * until it lands or the writer fails: commit_group()), several at once;
 * puts the packs of groups past the window early, once each (a failure
 * leaves the pack to the commit); retires finished groups in position
 * order.  At writer_stop() the threads drain the queue and the open group,
 * then exit.
 */
static void *pipeline_main(void *arg)
{
	struct engine *e = arg;

	mw_mutex_lock(&e->mu);
	for (;;) {
		struct group *g, *freed = NULL;
		uint64_t wake = 0;

		if (e->w.sticky)
			fail_queued_locked(e);
		close_due_locked(e, &wake);
		bool durable = retire_locked(e, &freed);
		if (freed) {
			mw_mutex_unlock(&e->mu);
			if (durable)
				engine_committed(e); /* the commit hook, without the lock */
			free_chain(freed);
			mw_mutex_lock(&e->mu);
			continue;
		}
		if ((g = commit_candidate_locked(e)) != NULL) {
			g->committing = true;
			mw_mutex_unlock(&e->mu);
			uint64_t t0 = mw_now_us();
			int rc = commit_group(e, g);
			uint64_t dt = mw_now_us() - t0;
			mw_hist_record(&e->w.commit_hist, dt);
			if (rc == 0 && g->pack) /* before readers stop finding it in flight */
				blob_cache_pack(e, g->pack);
			mw_mutex_lock(&e->mu);
			commit_ended_locked(e, g, rc);
			e->stats.commit_usec_total += dt;
			if (dt > e->stats.commit_usec_max)
				e->stats.commit_usec_max = dt;
			pthread_cond_broadcast(&e->w.commit_cv);
			continue;
		}
		if ((g = pack_candidate_locked(e)) != NULL) {
			g->pack_busy = g->pack_tried = true;
			mw_mutex_unlock(&e->mu);
			int rc = put_pack(e, g);
			mw_mutex_lock(&e->mu);
			g->pack_busy = false;
			g->pack_err = rc;
			if (rc)
				log_debug("engine: early put of the pack of group %" PRIu64
				          " failed (%s); its commit retries it",
				          g->position, strerror(-rc));
			pthread_cond_broadcast(&e->w.commit_cv);
			continue;
		}
		if (e->w.pipeline_stop && !e->w.open && !e->w.q_head)
			break;
		pipeline_wait_locked(e, wake);
	}
	mw_mutex_unlock(&e->mu);
	return NULL;
}

int writer_start(struct engine *e)
{
	int rc = mw_thread_start(&e->w.committer, "engine commit pipeline", pipeline_main, e,
	                         &e->mu, &e->w.commit_cv);

	for (unsigned i = 0; rc == 0 && i + 1 < e->o.commit_inflight; i++) {
		rc = mw_thread_start(&e->w.uploaders[i], "engine commit pipeline", pipeline_main, e,
		                     &e->mu, &e->w.commit_cv);
		if (rc == 0)
			e->w.nuploaders++;
	}
	if (rc)
		writer_stop(e);
	return rc;
}

void writer_stop(struct engine *e)
{
	/* every thread drains: the open group and the queue go first, then they exit */
	mw_mutex_lock(&e->mu);
	e->w.pipeline_stop = true;
	pthread_cond_broadcast(&e->w.commit_cv);
	mw_mutex_unlock(&e->mu);
	for (unsigned i = 0; i < e->w.nuploaders; i++)
		mw_thread_stop(&e->w.uploaders[i]);
	e->w.nuploaders = 0;
	mw_thread_stop(&e->w.committer);
}
