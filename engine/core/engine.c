/*
 * engine.c - the MemWAL engine: open (epoch claim, then replay and fencing
 * by replay.c), close and statistics.  The read path is read.c, the write
 * path writer.c, blob reads blob.c, formats wal.c / pack.c / manifest.c.
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
 *   3. fence (replay_fence_wal()): put_if_absent a fence entry (epoch E, no
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
#include "replay.h"
#include "flush.h"
#include "gc.h"
#include "log.h"
#include "maint.h"
#include "snapshot.h"
#include "store.h"
#include "wal.h"

/* Smallest freeze threshold honoured (two MemTable arena blocks). */
#define MEMTABLE_MIN_BYTES (128u << 10)

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
	o->follow_deep_idle_ms = ENGINE_FOLLOW_DEEP_IDLE_MS;
	o->follow_safety_ms = ENGINE_FOLLOW_SAFETY_MS;
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
	DEFAULT_IF_ZERO(follow_deep_idle_ms);
	DEFAULT_IF_ZERO(follow_safety_ms);
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
	gc_free(e->m.gc);
	manifest_clear(&e->man);
	pthread_cond_destroy(&e->m.gc_cv);
	pthread_cond_destroy(&e->fo.cv);
	pthread_cond_destroy(&e->wa.cv);
	free(e->wa.packs);
	pthread_mutex_destroy(&e->m.gc_mu);
	pthread_cond_destroy(&e->w.commit_cv);
	pthread_cond_destroy(&e->durable_cv);
	pthread_cond_destroy(&e->m.flush_cv);
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
	pthread_cond_init(&e->w.commit_cv, &ca);
	pthread_cond_init(&e->m.flush_cv, &ca);
	pthread_cond_init(&e->m.gc_cv, &ca);
	pthread_cond_init(&e->durable_cv, &ca);
	pthread_cond_init(&e->fo.cv, &ca);
	pthread_cond_init(&e->wa.cv, &ca);
	pthread_condattr_destroy(&ca);
	pthread_mutex_init(&e->m.gc_mu, NULL);
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
		if (e->o.salvage && e->o.claim_epoch) {
			rc = -EINVAL; /* a salvage claims above every epoch it finds */
			goto fail;
		}
		rc = e->o.salvage
		         ? salvage_claim(e)
		         : manifest_claim_epoch(st, e->conditional, e->o.claim_epoch, &e->man);
		if (rc)
			goto fail;
		e->epoch = e->man.epoch;
		atomic_store(&e->w.lease_from_us,
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
		rc = replay_fence_wal(e, &r, tip);
		if (rc)
			goto fail;
	}
	atomic_store(&e->visible_seq, e->next_seq - 1);
	if (e->freeze_pos < e->man.wal_covered)
		e->freeze_pos = e->man.wal_covered;
	if (!e->o.read_only && (rc = gc_new(st, &e->m.gc)))
		goto fail;
	e->fo.max_epoch = r.max_epoch;
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
	if (!e->o.read_only && !e->w.sticky && !e->o.salvage)
		watch_check(e);
	if (!e->o.read_only && !e->w.sticky) {
		rc = maint_flush_now(e);
		if (rc && rc != e->w.sticky)
			log_warn("engine: close: final flush failed (%s); the next open replays "
			         "the WAL",
			         strerror(-rc));
		/* salvage: the deletes of what was lost drop the versions they shadow */
		if (!rc && e->o.salvage && (rc = maint_compact_now(e)) != 0)
			log_warn("engine: close: salvage compaction failed (%s)", strerror(-rc));
	}
	flusher_stop(e);
	writer_stop(e);
	rc = e->w.sticky;
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
	out->sticky_error = e->w.sticky;
	out->batches_lost = writer_lost_locked(e);
	out->read_only = e->o.read_only;
	out->gc_grace_sec = e->o.gc_grace_sec == ENGINE_GC_NO_GRACE ? 0 : e->o.gc_grace_sec;
	if (e->m.gc_thread.stop || e->w.sticky)
		out->gc_next_pass = 0;
	out->store_lost = e->wa.lost;
	memcpy(out->store_lost_what, e->wa.lost_what, sizeof(out->store_lost_what));
	/* blobs in WAL entries not yet promoted into a flush's pack count too */
	out->live_bytes_est = e->stats.store_live_pack_bytes + e->stats.store_unflushed_pack_bytes +
	                      (e->stats.pack_bytes - e->m.gc_pack_mark) +
	                      (e->stats.wal_blob_bytes > e->m.wal_blobs_promoted
	                           ? e->stats.wal_blob_bytes - e->m.wal_blobs_promoted
	                           : 0);
	out->following = e->fo.thread.running;
	if (out->following && e->fo.current_us)
		out->follow_lag_ms = (mw_now_us() - e->fo.current_us) / 1000u;
	mw_mutex_unlock(&e->mu);
	pthread_mutex_lock(&e->mem_mu);
	out->memtable_bytes = memtable_bytes(e->mem);
	out->frozen_count = e->nfrozen;
	out->sst_count = e->nssts;
	pthread_mutex_unlock(&e->mem_mu);
	struct sst_stats ss;
	sst_counters_read(&e->rd.sst_counters, &ss);
	out->bloom_negatives = ss.bloom_negatives;
	out->block_cache_hits = ss.cache_hits;
	out->block_cache_misses = ss.blocks_read;
	out->block_read_arounds = ss.blocks_around;
	out->blob_cache_hits = atomic_load_explicit(&e->rd.blob_mem_hits, memory_order_relaxed);
	out->blob_cache_misses = atomic_load_explicit(&e->rd.blob_mem_misses, memory_order_relaxed);
	out->blob_fetches = atomic_load_explicit(&e->rd.blob_fetches, memory_order_relaxed);
	out->blob_fetch_bytes = atomic_load_explicit(&e->rd.blob_fetch_bytes, memory_order_relaxed);
	readcache_get_stats(e, out);
}

void engine_get_store_counts(struct engine *e, struct engine_store_counts *out)
{
	_Static_assert(ENGINE_STORE_OPS == STORE_OP__COUNT, "one name per store_op");
	struct store_stats ss;
	store_get_stats(e->st, &ss);
	for (int i = 0; i < STORE_OP__COUNT; i++)
		out->requests[i] = ss.requests[i];
	out->retries = ss.retries;
	out->errors = ss.errors;
	out->bytes_sent = ss.bytes_sent;
	out->bytes_received = ss.bytes_received;
}

int engine_check_store(struct engine *e)
{
	if (!e)
		return -EINVAL;
	return watch_check(e);
}

void engine_get_commit_latency(struct engine *e, struct mw_hist_snap *out)
{
	mw_hist_read(&e->w.commit_hist, out);
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
	static const char *const op_names[STORE_OP__COUNT] = ENGINE_STORE_OP_NAMES;
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
	EMIT("follow_deep_idle %d\n", s.follow_deep_idle ? 1 : 0);
	U64(follow_wakes);
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
