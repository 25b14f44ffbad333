/*
 * engine.c - the MemWAL engine: open (epoch claim, replay, fencing),
 * close and statistics.  The read path is read.c, the write path
 * writer.c, blob reads blob.c, formats wal.c / pack.c / manifest.c.
 *
 * DESIGN
 *
 * Open as writer (docs/WAL.md, docs/MANIFEST.md):
 *   1. claim epoch E = latest manifest's epoch + 1 by creating manifest N+1
 *      (put_if_absent; re-read and retry on -EEXIST);
 *   2. list wal/ from the manifest's covered position and replay the entries
 *      in position order into a fresh MemTable, stopping at the first missing
 *      position (a gap; entries after it are ignored).  An entry whose epoch
 *      is older than one already replayed is ignored; an entry newer than E
 *      means a newer writer exists (-ESTALE).  A corrupt entry fails the
 *      open with -EUCLEAN (naming it);
 *   3. fence (fence_wal()): put_if_absent a fence entry (epoch E, no
 *      records) at the first missing position.  If an older writer won that
 *      position, replay its entry and try the next one.  Then fences at the
 *      free positions of the older writer's window after ours (WAL_WINDOW,
 *      wal.h) and up to the listing's tip.  From then on every older
 *      writer's put at or after our first fence fails;
 *   4. start the commit pipeline; our first group goes after the last fence.
 * Replay gives every op a fresh sequence number in replay order, continuing
 * after the manifest's last_seq, so sequence numbers always increase.
 *
 * Read-only open does steps 2 without claiming or writing anything.
 *
 * Open also opens a reader for every SSTable of the manifest; the flusher
 * (flush.c) adds more as frozen MemTables are written out, and a writer
 * starts the GC thread (maint.c, docs/GC.md).
 *
 * Close (writer): stop the GC thread, then maint_flush_now(): commit the
 * open group, freeze the MemTable with no group open and wait until the
 * manifest covers the whole WAL, so the next open replays nothing; then
 * stop the flusher and the committer.  A failed final flush only costs the
 * next open a replay.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cache.h"
#include "dbiter.h"
#include "engine_int.h"
#include "pack.h"
#include "flush.h"
#include "gc.h"
#include "log.h"
#include "maint.h"
#include "snapshot.h"
#include "store.h"
#include "wal.h"

/* Smallest freeze threshold honoured (two MemTable arena blocks). */
#define MEMTABLE_MIN_BYTES (128u << 10)

/* Fence attempts at the WAL tip before giving up (an older writer keeps winning). */
#define FENCE_TRIES 1000

void engine_opts_default(struct engine_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->cadence_ms = 100;
	o->group_max_bytes = 8u << 20;
	o->inline_max = 4096;
	o->wal_blob_max = 256u << 10;
	o->commit_inflight = 8;
	o->memtable_max_bytes = 64u << 20;
	o->max_pending_bytes = 256u << 20;
	o->max_frozen_bytes = 256u << 20;
	o->cache_bytes = 256u << 20;
	o->gc_interval_ms = 60000;
	o->gc_grace_sec = 600;
	o->repack_below_pct = 50;
	o->follow_interval_ms = 1000;
	o->store_check_ms = 5000;
}

/*
 * Replace each option left 0 by its default from engine_opts_default()
 * (cache_bytes excepted: 0 means no cache), and raise a MemTable size
 * below what the arena needs.
 */
static void opts_resolve(struct engine_opts *o)
{
	struct engine_opts def;

	engine_opts_default(&def);
#define DEFAULT_IF_ZERO(field)                                                                     \
	do {                                                                                       \
		if (!o->field)                                                                     \
			o->field = def.field;                                                      \
	} while (0)
	DEFAULT_IF_ZERO(cadence_ms);
	DEFAULT_IF_ZERO(group_max_bytes);
	DEFAULT_IF_ZERO(inline_max);
	DEFAULT_IF_ZERO(wal_blob_max);
	DEFAULT_IF_ZERO(commit_inflight);
	DEFAULT_IF_ZERO(memtable_max_bytes);
	DEFAULT_IF_ZERO(max_pending_bytes);
	DEFAULT_IF_ZERO(max_frozen_bytes);
	DEFAULT_IF_ZERO(gc_interval_ms);
	DEFAULT_IF_ZERO(gc_grace_sec);
	DEFAULT_IF_ZERO(repack_below_pct);
	DEFAULT_IF_ZERO(follow_interval_ms);
	DEFAULT_IF_ZERO(store_check_ms);
#undef DEFAULT_IF_ZERO
	if (o->follow_max_interval_ms < o->follow_interval_ms)
		o->follow_max_interval_ms =
		    o->follow_max_interval_ms ? o->follow_interval_ms : 4 * o->follow_interval_ms;
	if (o->commit_inflight > WRITER_MAX_UPLOADERS + 1)
		o->commit_inflight = WRITER_MAX_UPLOADERS + 1;
	/* the MemTable allocates 64 KiB arena blocks: below a few, every insert would freeze */
	if (o->memtable_max_bytes < MEMTABLE_MIN_BYTES)
		o->memtable_max_bytes = MEMTABLE_MIN_BYTES;
}

/* ------------------------------------------------------------------ */
/* Replay                                                              */
/* ------------------------------------------------------------------ */

int replay_list_wal(void *arg, const char *key, uint64_t size)
{
	struct poslist *pl = arg;
	uint64_t pos;

	(void)size;
	if (fmt_parse_wal_name(key, &pos) != 0)
		return 0;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 64;
		uint64_t *v = realloc(pl->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		pl->v = v;
		pl->cap = cap;
	}
	pl->v[pl->n++] = pos;
	return 0;
}

/*
 * Apply one decoded entry to the MemTable.  At open the engine is not shared yet; a
 * follower calls it with e->mu held.  A freeze (writer_freeze_locked) needs e->mu.
 */
static int replay_apply(struct engine *e, struct replay *r, const char *name,
                        const struct wal_info *info, const uint8_t *body, size_t blen)
{
	struct wal_cursor c;
	enum kv_type type;
	const uint8_t *k, *v;
	size_t kn, vn;
	uint32_t ops = 0;
	bool shared = r->locked;
	int rc;

	if (shared) {
		/* a follower is read while it applies: check the whole body before the first op */
		wal_cursor_init(&c, body, blen, info->batch_count);
		while ((rc = wal_op_next(&c, &type, &k, &kn, &v, &vn)) == 1) {
			struct blob_desc d;
			if (type == KV_BLOB && blob_desc_decode(v, vn, &d) != 0)
				rc = -EUCLEAN;
			if (rc < 0)
				break;
			ops++;
		}
		if (rc < 0 || ops != info->op_count) {
			log_err("wal: %s: malformed body (%u ops decoded, header says %u)", name,
			        ops, info->op_count);
			return -EUCLEAN;
		}
		ops = 0;
	}
	wal_cursor_init(&c, body, blen, info->batch_count);
	while ((rc = wal_op_next(&c, &type, &k, &kn, &v, &vn)) == 1) {
		if (type == KV_BLOB) {
			struct blob_desc d;
			int drc = blob_desc_decode(v, vn, &d);
			if (drc == -EPROTONOSUPPORT) {
				log_err("wal: %s: a blob descriptor of format 1: this store was "
				        "written by an older memwalfs (this one reads format 2)",
				        name);
				return drc;
			}
			if (drc) {
				log_err("wal: %s: bad blob descriptor", name);
				return -EUCLEAN;
			}
		}
		rc = memtable_add(e->mem, e->next_seq++, type, k, kn, v, vn);
		if (rc)
			return rc;
		if (r->keys &&
		    ((rc = mw_buf_varint(r->keys, kn)) || (rc = mw_buf_append(r->keys, k, kn))))
			return rc;
		if (type == KV_DELETE)
			e->stats.deletes++;
		else
			e->stats.puts++;
		ops++;
		/* a follower freezes between entries only (replay_entry()): see follow.c */
		if (!e->o.follow && memtable_bytes(e->mem) >= e->o.memtable_max_bytes) {
			if (!shared)
				mw_mutex_lock(&e->mu);
			rc = writer_freeze_locked(e);
			if (!shared)
				mw_mutex_unlock(&e->mu);
			if (rc)
				return rc;
		}
	}
	if (rc < 0 || ops != info->op_count) {
		log_err("wal: %s: malformed body (%u ops decoded, header says %u)", name, ops,
		        info->op_count);
		return -EUCLEAN;
	}
	return 0;
}

int replay_fetch(struct engine *e, uint64_t pos, void **buf, size_t *len)
{
	char name[FMT_NAME_MAX];
	int rc;

	fmt_wal_name(name, pos);
	rc = store_get(e->st, name, 0, STORE_TO_END, buf, len);
	if (rc && rc != -ENOENT)
		log_err("engine: replay: get %s failed: %s", name, strerror(-rc));
	return rc;
}

int replay_entry(struct engine *e, struct replay *r, uint64_t pos, const void *buf, size_t len)
{
	char name[FMT_NAME_MAX];
	struct wal_info info;
	const uint8_t *body;
	size_t blen;
	int rc;

	fmt_wal_name(name, pos);
	rc = wal_entry_decode(name, buf, len, pos, &info, &body, &blen);
	if (rc)
		return rc;
	r->next = pos + 1;
	e->stats.replay_entries++;
	e->stats.replay_bytes += len;
	if (!e->o.read_only && info.epoch > e->epoch) {
		log_err("engine: %s has epoch %" PRIu64 " > ours %" PRIu64
		        ": a newer writer exists",
		        name, info.epoch, e->epoch);
		return -ESTALE;
	}
	if (info.epoch < r->max_epoch) {
		log_warn("engine: %s: epoch %" PRIu64 " after epoch %" PRIu64 ": ignored", name,
		         info.epoch, r->max_epoch);
		e->next_pos = pos + 1;
		return 0;
	}
	r->max_epoch = info.epoch;
	e->next_pos = pos; /* a freeze during this entry does not cover it */
	if (!(info.flags & WAL_FLAG_FENCE))
		rc = replay_apply(e, r, name, &info, body, blen);
	e->next_pos = pos + 1;
	/*
	 * A follower freezes at entry boundaries, at the writer's thresholds, so that each of
	 * its frozen MemTables holds whole entries below its wal_end: a manifest covering
	 * wal_end covers all of it (follow.c drops it then).
	 */
	if (rc == 0 && e->o.follow && memtable_count(e->mem) > 0 &&
	    (memtable_bytes(e->mem) >= e->o.memtable_max_bytes ||
	     e->next_pos - e->freeze_pos >= ENGINE_REPLAY_MAX_ENTRIES)) {
		if (!r->locked)
			mw_mutex_lock(&e->mu);
		int frc = writer_freeze_locked(e);
		if (!r->locked)
			mw_mutex_unlock(&e->mu);
		if (frc)
			log_warn("engine: follower: MemTable freeze failed: %s", strerror(-frc));
	}
	return rc;
}

/*
 * Read and replay wal/<pos>.  Returns 0 (applied or ignored), -ENOENT (no
 * such entry), -ESTALE (an entry of a newer writer), -EUCLEAN, -EIO...
 */
static int replay_one(struct engine *e, struct replay *r, uint64_t pos)
{
	void *buf = NULL;
	size_t len = 0;
	int rc = replay_fetch(e, pos, &buf, &len);

	if (rc == 0)
		rc = replay_entry(e, r, pos, buf, len);
	free(buf);
	return rc;
}

/*
 * Replay from the covered position, in position order, up to the first
 * missing one (r->next after it); sets *tip to the first position after
 * every listed one.
 */
static int replay_wal(struct engine *e, struct replay *r, uint64_t *tip)
{
	char after[FMT_NAME_MAX];
	struct poslist pl = {0};
	uint64_t t0 = mw_now_us();
	size_t i;
	int rc;

	r->next = e->man.wal_covered;
	if (r->next > 0)
		fmt_wal_name(after, r->next - 1);
	rc = store_list(e->st, FMT_WAL_PREFIX, r->next ? after : NULL, 0, replay_list_wal, &pl);
	if (rc) {
		log_err("engine: list %s failed: %s", FMT_WAL_PREFIX, strerror(-rc));
		goto out;
	}
	for (i = 0; i < pl.n; i++) {
		if (pl.v[i] < r->next)
			continue;
		if (e->from_snapshot && pl.v[i] >= e->snapshot_wal_end)
			break; /* past the snapshot */
		if (pl.v[i] != r->next && e->o.salvage) {
			/* salvage (salvage.c): what remains after the missing positions counts */
			log_warn("engine: salvage: WAL positions %" PRIu64 "..%" PRIu64
			         " are missing: what they held is lost",
			         r->next, pl.v[i] - 1);
			e->stats.salvage_wal_missing += pl.v[i] - r->next;
			r->next = pl.v[i];
		}
		if (pl.v[i] != r->next)
			break; /* a gap */
		rc = replay_one(e, r, pl.v[i]);
		if (e->o.salvage &&
		    (rc == -EUCLEAN || rc == -EBADMSG || rc == -EPROTONOSUPPORT || rc == -ENOENT)) {
			log_warn("engine: salvage: WAL entry %" PRIu64
			         " skipped (%s): what it held "
			         "is lost",
			         pl.v[i], strerror(-rc));
			e->stats.salvage_wal_bad++;
			r->next = pl.v[i] + 1;
			e->next_pos = r->next;
			rc = 0;
			continue;
		}
		if (rc == -ENOENT)
			break; /* listed, then gone: treat as the end */
		if (rc)
			goto out;
		if (e->o.progress)
			e->o.progress(e->o.progress_arg, "replay", i + 1, pl.n);
	}
	*tip = r->next;
	if (e->from_snapshot) {
		if (r->next < e->snapshot_wal_end) {
			char name[FMT_NAME_MAX];
			fmt_wal_name(name, r->next);
			log_err("engine: snapshot: %s is missing: the snapshot is damaged", name);
			rc = -EUCLEAN;
			goto out;
		}
	} else if (i < pl.n) {
		log_warn("engine: WAL gap at position %" PRIu64 ": %zu later entr%s ignored "
		         "(never acknowledged: a writer stopped with entries in flight)",
		         r->next, pl.n - i, pl.n - i == 1 ? "y" : "ies");
		*tip = pl.v[pl.n - 1] + 1;
		e->stats.replay_gap_entries = pl.n - i;
	}
	rc = 0;
out:
	e->stats.replay_usec = mw_now_us() - t0;
	free(pl.v);
	return rc;
}

/* Put a fence entry of our epoch at pos with put_if_absent: 0, -EEXIST, or the put's error. */
static int put_fence(struct engine *e, struct mw_buf *b, uint64_t pos)
{
	char name[FMT_NAME_MAX];
	struct wal_info info = {
	    .flags = WAL_FLAG_FENCE,
	    .epoch = e->epoch,
	    .position = pos,
	    .first_seq = e->next_seq,
	};
	int rc;

	b->len = 0;
	if ((rc = wal_entry_begin(b)))
		return rc;
	wal_entry_seal(b, &info);
	fmt_wal_name(name, pos);
	rc = e->conditional ? store_put_if_absent(e->st, name, b->p, b->len)
	                    : store_put(e->st, name, b->p, b->len);
	if (rc && rc != -EEXIST)
		log_err("engine: put fence %s failed: %s", name, strerror(-rc));
	return rc;
}

/*
 * -ESTALE if wal/<pos> is of an epoch newer than ours, else 0 (an older
 * writer's entry there is one it can never acknowledge), or the read's error.
 */
static int check_reserved(struct engine *e, uint64_t pos)
{
	char name[FMT_NAME_MAX];
	struct wal_info info;
	const uint8_t *body;
	void *buf = NULL;
	size_t len = 0, blen;
	int rc = replay_fetch(e, pos, &buf, &len);

	if (rc == -ENOENT)
		rc = 0; /* collected: it was below a manifest's coverage, so not newer */
	if (rc == 0 && buf) {
		fmt_wal_name(name, pos);
		rc = wal_entry_decode(name, buf, len, pos, &info, &body, &blen);
		if (rc == 0 && info.epoch > e->epoch) {
			log_err("engine: %s has epoch %" PRIu64 " > ours %" PRIu64
			        ": a newer writer exists",
			        name, info.epoch, e->epoch);
			rc = -ESTALE;
		}
	}
	free(buf);
	return rc;
}

/*
 * Fence the WAL (writer open, step 3; docs/WAL.md "Open, replay and
 * fencing").  An older writer may still have up to WAL_WINDOW entries in
 * flight from its durable position, which is at most the first missing
 * position r->next; and it acknowledges an entry only once every position
 * before it holds its own entries.  So: put_if_absent a fence at r->next;
 * if an older writer won that position, replay its entry (it continues
 * the log and may be acknowledged) and try the next one.  Once our fence
 * landed at q, the older writer can acknowledge nothing at q or after;
 * its entries may still land in (q, q + WAL_WINDOW), never to be
 * acknowledged: we take every free position there (and up to the tip of
 * the listing) with more fences, so replay finds no gap below our first
 * group and ignores those entries (an older epoch after a newer one).
 */
static int fence_wal(struct engine *e, struct replay *r, uint64_t tip)
{
	char name[FMT_NAME_MAX];
	struct mw_buf b = {0};
	uint64_t pos = r->next, end;
	int rc = -EIO;

	for (int i = 0; i < FENCE_TRIES; i++, pos = r->next) {
		rc = put_fence(e, &b, pos);
		if (rc != -EEXIST)
			break;
		/* an older writer won this position: its entry continues the log */
		rc = replay_one(e, r, pos);
		if (rc == -ENOENT) /* listed, then collected: it was covered, go on */
			r->next = pos + 1;
		else if (rc)
			goto out;
		rc = -EIO;
	}
	if (rc) {
		if (rc == -EIO)
			log_err("engine: could not fence the WAL after %d positions", FENCE_TRIES);
		goto out;
	}
	fmt_wal_name(name, pos);
	end = pos + WAL_WINDOW > tip ? pos + WAL_WINDOW : tip;
	for (uint64_t p = pos + 1; p < end; p++) {
		rc = put_fence(e, &b, p);
		if (rc == -EEXIST)
			rc = check_reserved(e, p);
		if (rc)
			goto out;
	}
	e->next_pos = end;
	e->durable_upto = end;
	e->stats.fence_positions = end - pos;
	log_info("engine: epoch %" PRIu64 " fenced the WAL at %s (%" PRIu64 " positions)", e->epoch,
	         name, end - pos);
out:
	mw_buf_free(&b);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Open / close                                                        */
/* ------------------------------------------------------------------ */

static void engine_free(struct engine *e)
{
	if (!e)
		return;
	memtable_unref(e->mem);
	for (size_t i = 0; i < e->nfrozen; i++)
		memtable_unref(e->frozen[i].mem);
	free(e->frozen);
	for (size_t i = 0; i < e->nssts; i++)
		sst_reader_unref(e->ssts[i]);
	free(e->ssts);
	read_old_views_free(e);
	readcache_close(e);
	gc_free(e->gc);
	manifest_clear(&e->man);
	pthread_cond_destroy(&e->gc_cv);
	pthread_cond_destroy(&e->follow_cv);
	pthread_cond_destroy(&e->watch_cv);
	free(e->watch_packs);
	pthread_mutex_destroy(&e->gc_mu);
	pthread_cond_destroy(&e->commit_cv);
	pthread_cond_destroy(&e->durable_cv);
	pthread_cond_destroy(&e->flush_cv);
	mw_mutex_destroy(&e->mu);
	pthread_mutex_destroy(&e->mem_mu);
	free(e);
}

int engine_open(struct store *st, const struct engine_opts *o, struct engine **out)
{
	struct engine *e;
	struct engine_opts def;
	pthread_condattr_t ca;
	struct replay r = {0};
	uint64_t tip = 0;
	int rc;

	if (!st || !out)
		return -EINVAL;
	if (!o) {
		engine_opts_default(&def);
		o = &def;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->st = st;
	e->o = *o;
	opts_resolve(&e->o);
	e->conditional = store_caps(st)->conditional_create;
	mw_mutex_init(&e->mu);
	pthread_mutex_init(&e->mem_mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&e->commit_cv, &ca);
	pthread_cond_init(&e->flush_cv, &ca);
	pthread_cond_init(&e->gc_cv, &ca);
	pthread_cond_init(&e->durable_cv, &ca);
	pthread_cond_init(&e->follow_cv, &ca);
	pthread_cond_init(&e->watch_cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&e->gc_mu, NULL);
	e->stats.read_only = e->o.read_only;

	if ((rc = memtable_new(&e->mem)) || (rc = readcache_open(e)))
		goto fail;

	if (e->o.snapshot && !e->o.read_only) {
		rc = -EINVAL;
		goto fail;
	}
	if (e->o.snapshot) {
		struct engine_snapshot sn;
		rc = engine_snapshot_get(st, e->o.snapshot, &sn);
		if (rc) {
			log_err("engine: snapshot %s: %s", e->o.snapshot,
			        rc == -ENOENT ? "no such snapshot" : strerror(-rc));
			goto fail;
		}
		rc = manifest_load(st, sn.manifest, &e->man);
		if (rc) {
			log_err("engine: snapshot %s: manifest %" PRIu64 ": %s", e->o.snapshot,
			        sn.manifest, strerror(-rc));
			goto fail;
		}
		e->o.follow = false; /* a snapshot never changes */
		e->from_snapshot = true;
		e->snapshot_wal_end = sn.wal_end;
		e->stats.snapshot_wal_end = sn.wal_end;
		e->epoch = e->man.epoch;
		e->o.snapshot = NULL; /* borrowed for the open only */
	} else if (e->o.read_only) {
		rc = manifest_load_latest(st, &e->man);
		if (rc)
			goto fail;
		e->epoch = e->man.epoch;
	} else {
		if (!e->conditional && !e->o.single_writer_ok) {
			log_err("engine: store %s has no conditional create; refusing to open as "
			        "writer (single_writer_ok accepts it)",
			        store_caps(st)->name);
			rc = -ENOTSUP;
			goto fail;
		}
		uint64_t claim_us = mw_now_us();
		rc = e->o.salvage ? salvage_claim(e) : manifest_claim(st, e->conditional, &e->man);
		if (rc)
			goto fail;
		e->epoch = e->man.epoch;
		atomic_store(&e->lease_from_us,
		             claim_us); /* the claim is the first epoch check (writer.c) */
	}
	if (!e->o.read_only)
		e->o.follow = false;
	e->next_seq = e->man.last_seq + 1;
	if (e->o.follow)
		e->next_seq += FOLLOW_SEQ_BASE; /* above every table's sequences (follow.c) */
	rc = flusher_open_ssts(e);
	if (rc)
		goto fail;
	e->freeze_pos = e->man.wal_covered; /* a follower's replay counts entries from here */
	rc = replay_wal(e, &r, &tip);
	if (rc)
		goto fail;
	if (e->o.read_only) {
		e->next_pos = e->durable_upto = tip;
	} else {
		rc = fence_wal(e, &r, tip);
		if (rc)
			goto fail;
	}
	atomic_store(&e->visible_seq, e->next_seq - 1);
	if (e->freeze_pos < e->man.wal_covered)
		e->freeze_pos = e->man.wal_covered;
	if (!e->o.read_only && (rc = gc_new(st, &e->gc)))
		goto fail;
	e->follow_max_epoch = r.max_epoch;
	if (e->o.follow && (rc = follow_start(e)))
		goto fail;
	if (!e->o.read_only && ((rc = writer_start(e)) || (rc = flusher_start(e)) ||
	                        (rc = gc_thread_start(e)) || (rc = watch_start(e)))) {
		gc_thread_stop(e);
		flusher_stop(e);
		writer_stop(e);
		goto fail;
	}
	log_info("engine: open %s epoch %" PRIu64 " manifest %" PRIu64 ", replayed %" PRIu64
	         " entries, next position %" PRIu64,
	         e->from_snapshot ? "snapshot"
	         : e->o.follow    ? "follower"
	         : e->o.read_only ? "read-only"
	                          : "writer",
	         e->epoch, e->man.version, e->stats.replay_entries, e->next_pos);
	*out = e;
	return 0;
fail:
	log_err("engine: open failed: %s", strerror(-rc));
	engine_free(e);
	return rc;
}

int engine_close(struct engine *e)
{
	int rc;

	if (!e)
		return 0;
	/*
	 * A clean close flushes: the manifest then covers the whole WAL and the
	 * next open replays nothing.  A failed flush is not an error of the
	 * close (the WAL still holds everything; the next open replays it).
	 */
	follow_stop(e);
	gc_thread_stop(e);
	watch_stop(e);
	/*
	 * a store that lost objects must not get a final manifest over them: check first
	 * (also with no periodic check; not in a salvage, whose WAL has its gaps)
	 */
	if (!e->o.read_only && !e->sticky && !e->o.salvage)
		watch_check(e);
	if (!e->o.read_only && !e->sticky) {
		rc = maint_flush_now(e);
		if (rc && rc != e->sticky)
			log_warn("engine: close: final flush failed (%s); the next open replays "
			         "the WAL",
			         strerror(-rc));
		/* salvage: the deletes of what was lost drop the versions they shadow */
		if (!rc && e->o.salvage && (rc = maint_compact_now(e)) != 0)
			log_warn("engine: close: salvage compaction failed (%s)", strerror(-rc));
	}
	flusher_stop(e);
	writer_stop(e);
	rc = e->sticky;
	engine_free(e);
	pack_pool_drain(); /* the mappings its packs left (another engine's refill it) */
	return rc;
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

int engine_store_space(struct engine *e, struct engine_space *out)
{
	struct store_space sp;
	int rc = store_space(e->st, &sp);
	if (rc)
		return rc;
	out->total = sp.total;
	out->free = sp.free;
	out->avail = sp.avail;
	return 0;
}

void engine_get_stats(struct engine *e, struct engine_stats *out)
{
	mw_mutex_lock(&e->mu);
	*out = e->stats;
	out->epoch = e->epoch;
	out->wal_next = e->next_pos;
	out->wal_covered = e->man.wal_covered;
	out->frozen_bytes = e->frozen_bytes;
	out->sticky_error = e->sticky;
	out->batches_lost = writer_lost_locked(e);
	out->read_only = e->o.read_only;
	out->gc_grace_sec = e->o.gc_grace_sec == ENGINE_GC_NO_GRACE ? 0 : e->o.gc_grace_sec;
	if (e->gc_thread.stop || e->sticky)
		out->gc_next_pass = 0;
	out->store_lost = e->lost;
	memcpy(out->store_lost_what, e->lost_what, sizeof(out->store_lost_what));
	/* blobs in WAL entries not yet promoted into a flush's pack count too */
	out->live_bytes_est = e->stats.store_live_pack_bytes + e->stats.store_unflushed_pack_bytes +
	                      (e->stats.pack_bytes - e->gc_pack_mark) +
	                      (e->stats.wal_blob_bytes > e->wal_blobs_promoted
	                           ? e->stats.wal_blob_bytes - e->wal_blobs_promoted
	                           : 0);
	out->following = e->follower.running;
	if (out->following && e->follow_current_us)
		out->follow_lag_ms = (mw_now_us() - e->follow_current_us) / 1000u;
	mw_mutex_unlock(&e->mu);
	pthread_mutex_lock(&e->mem_mu);
	out->memtable_bytes = memtable_bytes(e->mem);
	out->frozen_count = e->nfrozen;
	out->sst_count = e->nssts;
	pthread_mutex_unlock(&e->mem_mu);
	struct sst_stats ss;
	sst_counters_read(&e->sst_counters, &ss);
	out->bloom_negatives = ss.bloom_negatives;
	out->block_cache_hits = ss.cache_hits;
	out->block_cache_misses = ss.blocks_read;
	out->block_read_arounds = ss.blocks_around;
	out->blob_cache_hits = atomic_load_explicit(&e->blob_mem_hits, memory_order_relaxed);
	out->blob_cache_misses = atomic_load_explicit(&e->blob_mem_misses, memory_order_relaxed);
	out->blob_fetches = atomic_load_explicit(&e->blob_fetches, memory_order_relaxed);
	out->blob_fetch_bytes = atomic_load_explicit(&e->blob_fetch_bytes, memory_order_relaxed);
	readcache_get_stats(e, out);
}

int engine_check_store(struct engine *e)
{
	if (!e)
		return -EINVAL;
	return watch_check(e);
}

void engine_get_commit_latency(struct engine *e, struct mw_hist_snap *out)
{
	mw_hist_read(&e->commit_hist, out);
}

/* snprintf at buf+n (nothing when full); returns the length wanted. */
static size_t __attribute__((format(printf, 4, 5)))
emit(char *buf, size_t len, size_t n, const char *fmt, ...)
{
	char scratch[1];
	va_list ap;
	int w;

	va_start(ap, fmt);
	if (buf && n < len)
		w = vsnprintf(buf + n, len - n, fmt, ap);
	else
		w = vsnprintf(scratch, sizeof(scratch), fmt, ap);
	va_end(ap);
	return w > 0 ? (size_t)w : 0;
}

size_t engine_stats_format(struct engine *e, char *buf, size_t len)
{
	static const char *const op_names[STORE_OP__COUNT] = {
	    "put", "get", "head", "list", "delete", "mpu",
	};
	struct engine_stats s;
	struct store_stats ss;
	size_t n = 0;

	engine_get_stats(e, &s);
	store_get_stats(e->st, &ss);
#define EMIT(...) n += emit(buf, len, n, __VA_ARGS__)
#define U64(name) EMIT("%s %" PRIu64 "\n", #name, (uint64_t)s.name)
	U64(epoch);
	U64(wal_next);
	U64(wal_covered);
	U64(puts);
	U64(deletes);
	U64(batches);
	U64(groups_committed);
	U64(group_bytes);
	U64(packs_written);
	U64(pack_bytes);
	U64(wal_blob_bytes);
	U64(flush_packs);
	U64(flush_pack_bytes);
	U64(commit_usec_total);
	U64(commit_usec_max);
	U64(pending_bytes);
	U64(backpressure_waits);
	U64(memtable_bytes);
	U64(frozen_count);
	U64(frozen_bytes);
	U64(sst_count);
	U64(flushes);
	U64(compactions);
	U64(gc_deleted);
	U64(blob_cache_hits);
	U64(blob_cache_misses);
	U64(blob_fetches);
	U64(blob_fetch_bytes);
	U64(block_cache_hits);
	U64(block_cache_misses);
	U64(block_read_arounds);
	U64(bloom_negatives);
	struct read_stat rs[READ_STATS_MAX];
	for (size_t i = 0, nrs = readcache_stats(e, rs); i < nrs; i++)
		EMIT("%s %" PRIu64 "\n", rs[i].name, rs[i].value);
	U64(replay_entries);
	U64(replay_bytes);
	U64(replay_usec);
	U64(replay_gap_entries);
	U64(fence_positions);
	EMIT("replay_entries_per_sec %" PRIu64 "\n",
	     s.replay_usec ? s.replay_entries * 1000000u / s.replay_usec : 0);
	EMIT("sticky_error %d\n", s.sticky_error);
	U64(batches_lost);
	EMIT("read_only %d\n", s.read_only ? 1 : 0);
	U64(gc_passes);
	U64(gc_skipped);
	U64(gc_errors);
	U64(gc_bytes_reclaimed);
	U64(repacked_blobs);
	U64(repacked_bytes);
	U64(store_pack_bytes);
	U64(store_live_pack_bytes);
	U64(store_unflushed_pack_bytes);
	EMIT("gc_last_pass %" PRId64 "\n", s.gc_last_pass);
	EMIT("gc_next_pass %" PRId64 "\n", s.gc_next_pass);
	U64(gc_grace_sec);
	U64(live_bytes_est);
	EMIT("outage_since %" PRId64 "\n", s.outage_since);
	EMIT("outage_seconds %" PRId64 "\n",
	     s.outage_since ? (int64_t)time(NULL) - s.outage_since : 0);
	EMIT("outage_error %d\n", s.outage_error);
	U64(outages);
	U64(commit_retries);
	U64(writers_waiting);
	U64(sync_timeouts);
	EMIT("following %d\n", s.following ? 1 : 0);
	U64(follow_polls);
	U64(follow_entries);
	U64(follow_manifests);
	U64(follow_jumps);
	U64(follow_errors);
	U64(follow_gaps);
	U64(follow_lag_ms);
	U64(follow_behind);
	U64(follow_interval_ms);
	U64(snapshot_wal_end);
	EMIT("store_lost %d\n", s.store_lost ? 1 : 0);
	EMIT("store_lost_since %" PRId64 "\n", s.store_lost_since);
	U64(store_checks);
	U64(store_check_errors);
	if (s.salvage_manifests_bad || s.salvage_tables_lost || s.salvage_wal_missing ||
	    s.salvage_wal_bad) {
		U64(salvage_manifests_bad);
		U64(salvage_tables_lost);
		U64(salvage_table_bytes_lost);
		U64(salvage_wal_missing);
		U64(salvage_wal_bad);
	}
	for (int i = 0; i < STORE_OP__COUNT; i++)
		EMIT("store_requests_%s %" PRIu64 "\n", op_names[i], ss.requests[i]);
	EMIT("store_retries %" PRIu64 "\n", ss.retries);
	EMIT("store_errors %" PRIu64 "\n", ss.errors);
	EMIT("store_bytes_sent %" PRIu64 "\n", ss.bytes_sent);
	EMIT("store_bytes_received %" PRIu64 "\n", ss.bytes_received);
	EMIT("store_window_sec %" PRIu64 "\n", ss.window_sec);
	EMIT("store_window_requests %" PRIu64 "\n", ss.window_requests);
	EMIT("store_window_bytes_sent %" PRIu64 "\n", ss.window_bytes_sent);
	EMIT("store_window_bytes_received %" PRIu64 "\n", ss.window_bytes_received);
	if (s.store_lost) /* in words, for the person reading `memwalfs stats` */
		EMIT("# store lost: %s; this mount acknowledges nothing more: unmount, then "
		     "run memwalfs fsck --salvage STORE\n",
		     s.store_lost_what);
#undef U64
#undef EMIT
	if (buf && len && n >= len)
		buf[len - 1] = '\0';
	return n;
}
