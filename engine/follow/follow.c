/*
 * follow.c - followers: a read-only engine that keeps up with the writer
 * (opts.follow; the page is docs/FOLLOWERS.md).
 *
 * DESIGN
 *
 * After the open's replay (replay.c), one thread polls the store every
 * opts.follow_interval_ms.  A poll is
 *
 *   - a WAL probe: LIST wal/ after the last position applied (one page of up
 *     to 1000 names).  Every listed entry that continues the log is read (one
 *     GET each), decoded and applied whole under e->mu, then published by
 *     raising e->visible_seq past its last op: readers see the state before
 *     or after the entry, never a part of it (the body is checked whole before
 *     its first op goes in, replay.c replay_apply()).  The replay rules of the
 *     open hold (docs/WAL.md): an entry of an older epoch after a newer one is
 *     ignored, fence entries carry nothing;
 *   - a manifest probe: LIST manifest/ after the version in use.  A newer
 *     manifest is loaded and installed: its tables replace ours, and every
 *     MemTable it covers (frozen ones whose WAL end is at or below its
 *     wal_covered; the active one too when wal_covered reaches the position
 *     applied) is dropped.  That is what bounds a follower's memory: it
 *     freezes its MemTable at the writer's thresholds (memtable_max_bytes, or
 *     ENGINE_REPLAY_MAX_ENTRIES entries), and the writer's next flush covers
 *     it.  While frozen MemTables wait for a manifest, every poll probes the
 *     manifest too; past max_frozen_bytes the follower stops applying until
 *     one comes.
 *
 * Idle: a poll that found nothing doubles the interval, up to
 * follow_max_interval_ms, and sends ONE request: the WAL probe, or every
 * FOLLOW_MANIFEST_EVERY-th idle poll the manifest probe instead (tables may
 * be compacted away under an idle follower; the writer keeps them for its GC
 * grace, far longer than that).
 *
 * Bell mode (opts.follow_bell; docs/FOLLOWERS.md "Bell mode").  Once the polls have
 * found nothing for follow_deep_idle_ms (D) and the store's bell exists
 * (engine_follow_set_bell()), the follower goes deep idle: it polls only every
 * follow_safety_ms, until engine_follow_wake() (the mount's bell watcher saw the bell
 * change) makes it poll at once and go back to its normal interval.  D is counted from
 * the end of the last poll that found something, to the start of an empty poll's
 * listing; so every entry the follower has seen was durable (at its writer) before the
 * start of the quiet, and a commit it has not seen comes at least D - (a request's
 * time) after the writer's previous one: the writer rings for it if it rings after R of
 * quiet with R below that (engine/region/bell.c, BELL_RING_QUIET_MS).
 *
 * Falling behind.  The writer's GC deletes WAL entries only below every kept
 * manifest's wal_covered (docs/GC.md), so a WAL probe that lists entries but
 * not the one we need next, or a GET that finds it gone, means a newer
 * manifest covers it: the manifest probe installs the newest one and the
 * follower jumps to its wal_covered (follow_jumps; the callback is told that
 * anything may have changed).  A manifest whose wal_covered is below the one
 * in use (never written by a correct writer) resets: every MemTable dropped,
 * the WAL replayed from there.  A missing entry that no manifest covers is a
 * gap: the writer's entries in flight land in any order (docs/WAL.md,
 * "Entries in flight"), and a crashed writer's stay missing until the next
 * writer's fence fills them.  The follower waits, counting follow_gaps
 * (logged once the gap has lasted GAP_REPORT_US).  A writer of a newer
 * epoch fills the first missing position (its fence, or the older entry it
 * replayed) before it writes anything else, so a newer-epoch entry listed
 * after a gap that is still open can only come from a store whose older
 * writer left gaps unfilled (earlier versions did): only then does the
 * follower skip the entries after the gap of epochs not newer than those
 * it applied (that writer ignored them too) and go on from the first newer
 * one.
 *
 * Sequence numbers.  The follower numbers the ops it applies from the
 * manifest's last_seq + FOLLOW_SEQ_BASE (engine_int.h), so its MemTables
 * always sort above the writer's tables.  That is right because a MemTable
 * of the follower holds only WAL entries at or after the covered position of
 * every manifest installed since it was made, or entries the tables hold
 * identically (the group at wal_covered may be partly in a table).
 *
 * Concurrency.  The follower is the only thread that changes a read-only
 * engine: e->mem, e->frozen, e->ssts (under mem_mu, as the writer's threads
 * do, so a reader's view is whole), e->man, e->next_pos, e->next_seq (under
 * e->mu).  It reads them without locks when it alone could change them.
 * Store I/O happens without any lock; the callback runs without any lock.
 *
 * Lag: e->fo.current_us is the start of the last WAL listing after which
 * everything listed was applied: the follower's view holds every entry
 * durable before that moment.  follow_lag_ms in the stats is its age.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coding.h"
#include "engine_int.h"
#include "follow.h"
#include "format.h"
#include "log.h"
#include "replay.h"
#include "store.h"
#include "wal.h"

/* An idle follower probes the manifest instead of the WAL every this many polls. */
#define FOLLOW_MANIFEST_EVERY 8
/* An active one (entries applied) at least every this many polls. */
#define FOLLOW_MANIFEST_ACTIVE 4
/* WAL names listed per probe (one LIST page). */
#define FOLLOW_LIST_MAX 1000

/* State of the follower thread between polls (only it touches this). */
struct follow {
	struct replay r;         /* replay state: next position, highest epoch */
	struct mw_buf keys;      /* keys of the entry being applied */
	struct engine_key *kv;   /* the callback's array */
	size_t kvcap;            /* entries allocated in kv */
	unsigned idle_polls;     /* polls in a row that found nothing */
	unsigned since_manifest; /* polls since the last manifest probe */
	bool want_manifest;      /* probe the manifest at the next poll */
	bool gap_checked;        /* the current gap was looked for in the manifest */
	bool catching_up;        /* applying the WAL up to a manifest about to be installed */
	bool gap_reported;       /* the current gap was logged */
	uint64_t gap_since_us;   /* when the current gap was first seen (0: none) */
	bool error_reported;     /* the current error streak was logged */
	uint64_t listed_end;     /* one past the highest position listed last */
	bool deep;               /* bell mode: deep idle (its safety polls always list the WAL) */
};

static int list_max_manifest(void *arg, const char *key, uint64_t size)
{
	uint64_t *max = arg, v;

	(void)size;
	if (fmt_parse_manifest_name(key, &v) == 0 && v > *max)
		*max = v;
	return 0;
}

/* ------------------------------------------------------------------ */
/* The callback                                                        */
/* ------------------------------------------------------------------ */

void engine_follow_set_fn(struct engine *e, engine_follow_fn fn, engine_follow_gate_fn gate,
                          void *arg)
{
	mw_mutex_lock(&e->mu);
	/* a call in progress keeps using the old pair: wait for it to return */
	while (e->fo.in_cb)
		mw_cond_wait(&e->durable_cv, &e->mu);
	e->fo.fn = fn;
	e->fo.gate = fn ? gate : NULL;
	e->fo.arg = arg;
	mw_mutex_unlock(&e->mu);
}

void engine_follow_wake(struct engine *e)
{
	if (!e || !e->o.follow)
		return;
	mw_mutex_lock(&e->mu);
	e->fo.wakes++;
	pthread_cond_signal(&e->fo.cv);
	mw_mutex_unlock(&e->mu);
}

void engine_follow_set_bell(struct engine *e, bool present)
{
	if (!e || !e->o.follow)
		return;
	mw_mutex_lock(&e->mu);
	if (e->fo.bell && !present) {
		e->fo.wakes++; /* polled again at the normal interval */
		pthread_cond_signal(&e->fo.cv);
	}
	e->fo.bell = present;
	mw_mutex_unlock(&e->mu);
}

/* The callbacks as they are now, marked in use until cb_end(). */
struct follow_cb {
	engine_follow_fn fn;
	engine_follow_gate_fn gate;
	void *arg;
};

static void cb_begin(struct engine *e, struct follow_cb *cb)
{
	mw_mutex_lock(&e->mu);
	*cb = (struct follow_cb){e->fo.fn, e->fo.gate, e->fo.arg};
	e->fo.in_cb = cb->fn != NULL;
	mw_mutex_unlock(&e->mu);
}

static void cb_end(struct engine *e, const struct follow_cb *cb)
{
	if (!cb->fn)
		return;
	mw_mutex_lock(&e->mu);
	e->fo.in_cb = false;
	pthread_cond_broadcast(&e->durable_cv);
	mw_mutex_unlock(&e->mu);
}

/* Hand f->keys (or "everything", all) to the callback; no lock held. */
static void notify_cb(struct follow *f, const struct follow_cb *cb, bool all)
{
	engine_follow_fn fn = cb->fn;
	size_t n = 0;

	if (fn && !all) {
		const uint8_t *p = f->keys.p, *end = f->keys.p + f->keys.len;
		while (p < end) {
			uint64_t kn;
			size_t h = get_varint64(p, end, &kn);
			if (!h || kn > (uint64_t)(end - p - h))
				break; /* cannot happen: we wrote it */
			if (n == f->kvcap) {
				size_t cap = f->kvcap ? 2 * f->kvcap : 64;
				struct engine_key *kv = realloc(f->kv, cap * sizeof(*kv));
				if (!kv) {
					all = true; /* cannot list them: say everything changed */
					break;
				}
				f->kv = kv;
				f->kvcap = cap;
			}
			f->kv[n].p = p + h;
			f->kv[n].n = (size_t)kn;
			n++;
			p += h + kn;
		}
	}
	if (fn && (n || all))
		fn(cb->arg, f->kv, all ? 0 : n, all);
	f->keys.len = 0;
}

/* Hand "everything changed" to the callback; no lock held. */
static void notify_all(struct engine *e, struct follow *f)
{
	struct follow_cb cb;

	cb_begin(e, &cb);
	notify_cb(f, &cb, true);
	cb_end(e, &cb);
}

/* ------------------------------------------------------------------ */
/* Installing a manifest                                               */
/* ------------------------------------------------------------------ */

static int probe_wal(struct engine *e, struct follow *f, uint64_t *applied);

static int install(struct engine *e, struct follow *f, struct manifest *m, bool reset, bool *all)
{
	struct sst_reader **v = NULL, **oldv;
	struct memtable **drop, *fresh = NULL;
	size_t ndrop = 0, oldn;
	int rc = flusher_readers_for(e, m, &v);

	*all = false;
	if (rc)
		return rc;
	/* only this thread changes the frozen list: its length holds until we lock */
	drop = calloc(e->nfrozen + 1, sizeof(*drop));
	if (!drop || (rc = memtable_new(&fresh))) {
		free(drop);
		rc = rc ? rc : -ENOMEM;
		for (size_t i = 0; i < m->nssts; i++)
			sst_reader_unref(v[i]);
		free(v);
		return rc;
	}
	mw_mutex_lock(&e->mu);
	uint64_t covered = m->wal_covered;
	if (covered < e->man.wal_covered) {
		log_warn("follow: manifest %" PRIu64 " covers the WAL before %" PRIu64
		         ", less than manifest %" PRIu64 " did (%" PRIu64 "): replaying from there",
		         m->version, covered, e->man.version, e->man.wal_covered);
		reset = true;
	}
	pthread_mutex_lock(&e->mem_mu);
	/* the states before now are in the tables and MemTables replaced here: keep them */
	uint64_t floor = atomic_load_explicit(&e->visible_seq, memory_order_acquire);
	read_keep_view(e, floor);
	oldv = e->ssts;
	oldn = e->nssts;
	e->ssts = v;
	e->nssts = m->nssts;
	e->sst_gen++;
	/* frozen MemTables are oldest first, their WAL ends increasing */
	size_t keep = 0;
	for (size_t i = 0; i < e->nfrozen; i++) {
		if (reset || e->frozen[i].wal_end <= covered) {
			drop[ndrop++] = e->frozen[i].mem;
			e->frozen_bytes -= e->frozen[i].bytes;
		} else {
			e->frozen[keep++] = e->frozen[i];
		}
	}
	e->nfrozen = keep;
	if (reset || (covered >= e->next_pos && keep == 0)) {
		drop[ndrop++] = e->mem;
		e->mem = fresh;
		fresh = NULL;
		if (reset || covered > e->next_pos)
			*all = true;
		e->next_pos = e->durable_upto = covered;
		e->freeze_pos = covered;
		f->r.next = covered;
	}
	size_t dropped = 0;
	for (size_t i = 0; i < ndrop; i++)
		dropped += memtable_bytes(drop[i]);
	read_keep_bytes(e, floor, dropped);
	pthread_mutex_unlock(&e->mem_mu);
	manifest_clear(&e->man);
	e->man = *m;
	memset(m, 0, sizeof(*m));
	e->stats.follow_manifests++;
	if (*all)
		e->stats.follow_jumps++;
	uint64_t version = e->man.version, pos = e->next_pos;
	mw_mutex_unlock(&e->mu);
	for (size_t i = 0; i < oldn; i++)
		sst_reader_unref(oldv[i]);
	free(oldv);
	for (size_t i = 0; i < ndrop; i++)
		memtable_unref(drop[i]);
	free(drop);
	memtable_unref(fresh);
	log_debug("follow: manifest %" PRIu64 " installed (%zu MemTables dropped%s), next WAL "
	          "position %" PRIu64,
	          version, ndrop, *all ? ", jumped" : "", pos);
	return 0;
}

/*
 * The manifest probe: install the newest manifest if it is newer than ours.
 * *changed: one was installed.  *all: see install().
 */
static int probe_manifest(struct engine *e, struct follow *f, bool *changed, bool *all)
{
	char after[FMT_NAME_MAX];
	struct manifest m = {0};
	uint64_t max = 0;
	int rc;

	*changed = *all = false;
	f->since_manifest = 0;
	fmt_manifest_name(after, e->man.version);
	rc = store_list(e->st, FMT_MANIFEST_PREFIX, e->man.version ? after : NULL, 0,
	                list_max_manifest, &max);
	if (rc) {
		log_err("follow: listing %s failed: %s", FMT_MANIFEST_PREFIX, strerror(-rc));
		return rc;
	}
	if (max <= e->man.version)
		return 0;
	rc = manifest_load(e->st, max, &m);
	if (rc == -ENOENT)
		return 0; /* collected meanwhile: the next probe finds a newer one */
	if (rc)
		return rc;
	if (m.wal_covered >= f->r.next) {
		/*
		 * The writer flushed past what we applied: apply the WAL up to there first, so
		 * that installing m changes nothing readers see (no jump), unless the entries
		 * are gone (collected: we fell behind, and jump).  The entry at wal_covered
		 * too: its group may be partly in m's tables (frozen while it was open, and
		 * durable before m was written: writer.c), and installing those ops without
		 * the rest of the group would show readers a state the writer never had
		 * (issue 36: a file's new bytes under its old size, with no publish the
		 * mount could see).  When no entry is there, the tables hold none of it.
		 */
		uint64_t applied;
		f->catching_up = true;
		rc = probe_wal(e, f, &applied);
		f->catching_up = false;
		if (rc) {
			manifest_clear(&m);
			return rc;
		}
	}
	rc = install(e, f, &m, false, all);
	manifest_clear(&m);
	if (rc == 0)
		*changed = true;
	return rc;
}

/* ------------------------------------------------------------------ */
/* Applying WAL entries                                                */
/* ------------------------------------------------------------------ */

/* Read the header epoch of an entry (for the gap rule).  -EUCLEAN... */
static int entry_epoch(const void *buf, size_t len, uint64_t pos, uint64_t *epoch)
{
	char name[FMT_NAME_MAX];
	struct wal_info info;
	const uint8_t *body;
	size_t blen;
	int rc;

	fmt_wal_name(name, pos);
	rc = wal_entry_decode(name, buf, len, pos, &info, &body, &blen);
	if (rc == 0)
		*epoch = info.epoch;
	return rc;
}

/*
 * Read and apply wal/<pos>.  skip_old: we are past a gap; an entry of an epoch not
 * newer than the ones applied is skipped (the next writer ignored it too).  Returns 0,
 * 1 (skipped), -ENOENT (gone: collected), or an error.
 */
static int apply_one(struct engine *e, struct follow *f, uint64_t pos, bool skip_old)
{
	void *buf = NULL;
	size_t len = 0;
	uint64_t epoch = 0;
	int rc = replay_fetch(e, pos, &buf, &len);

	if (rc)
		return rc;
	if (skip_old && (rc = entry_epoch(buf, len, pos, &epoch)) == 0 && epoch <= f->r.max_epoch) {
		log_warn("follow: wal entry %" PRIu64 " of epoch %" PRIu64
		         " after a gap: ignored, as the next writer did",
		         pos, epoch);
		mw_mutex_lock(&e->mu);
		e->next_pos = e->durable_upto = pos + 1;
		f->r.next = pos + 1;
		mw_mutex_unlock(&e->mu);
		free(buf);
		return 1;
	}
	if (rc)
		goto out;
	struct follow_cb cb;
	cb_begin(e, &cb);
	if (cb.gate)
		cb.gate(cb.arg, true);
	mw_mutex_lock(&e->mu);
	f->r.keys = &f->keys;
	f->keys.len = 0;
	rc = replay_entry(e, &f->r, pos, buf, len);
	if (rc == 0) {
		e->durable_upto = e->next_pos;
		e->fo.max_epoch = f->r.max_epoch;
		e->stats.follow_entries++;
		/* publish the whole entry at once (replay_entry() froze at its end if due) */
		atomic_store_explicit(&e->visible_seq, e->next_seq - 1, memory_order_release);
	}
	mw_mutex_unlock(&e->mu);
	if (rc == 0)
		notify_cb(f, &cb, false);
	f->keys.len = 0;
	if (cb.gate)
		cb.gate(cb.arg, false);
	cb_end(e, &cb);
out:
	free(buf);
	return rc;
}

/* Drop every MemTable and replay from the manifest in use (after a torn apply). */
static int reset(struct engine *e, struct follow *f)
{
	struct manifest m = {0};
	bool all;
	int rc;

	mw_mutex_lock(&e->mu);
	rc = manifest_copy(&m, &e->man);
	mw_mutex_unlock(&e->mu);
	if (rc == 0)
		rc = install(e, f, &m, true, &all);
	manifest_clear(&m);
	if (rc == 0)
		notify_all(e, f);
	return rc;
}

/* A gap is logged once it has lasted this long (in flight entries fill theirs in ms). */
#define GAP_REPORT_US 5000000u

/*
 * Has a newer writer left the gap before the listing pl open for good?
 * Only if the last listed entry is of an epoch newer than those applied
 * (a writer fills the first missing position before it writes anything
 * else, unless it is of a version that left gaps).  A read error: not yet.
 */
static bool gap_decided(struct engine *e, struct follow *f, const struct poslist *pl)
{
	uint64_t pos = pl->v[pl->n - 1], epoch = 0;
	void *buf = NULL;
	size_t len = 0;
	bool newer = false;

	if (replay_fetch(e, pos, &buf, &len) == 0 && entry_epoch(buf, len, pos, &epoch) == 0)
		newer = epoch > f->r.max_epoch;
	free(buf);
	return newer;
}

/*
 * The WAL probe: list after the last position applied and apply what continues the log.
 * *applied: entries applied.  May ask for a manifest probe (f->want_manifest).
 */
static int probe_wal(struct engine *e, struct follow *f, uint64_t *applied)
{
	char after[FMT_NAME_MAX];
	struct poslist pl = {0};
	int rc = 0;

	*applied = 0;
	for (;;) {
		uint64_t t_list = mw_now_us(), next = f->r.next;
		bool skip_old = false;

		pl.n = 0;
		if (next > 0)
			fmt_wal_name(after, next - 1);
		rc = store_list(e->st, FMT_WAL_PREFIX, next ? after : NULL, FOLLOW_LIST_MAX,
		                replay_list_wal, &pl);
		if (rc) {
			log_err("follow: listing %s failed: %s", FMT_WAL_PREFIX, strerror(-rc));
			break;
		}
		f->listed_end = pl.n ? pl.v[pl.n - 1] + 1 : next;
		if (pl.n == 0) {
			mw_mutex_lock(&e->mu);
			e->fo.current_us = t_list;
			mw_mutex_unlock(&e->mu);
			f->gap_reported = f->gap_checked = false;
			break;
		}
		if (pl.v[0] != next) {
			/* the entry we need is not there, later ones are: collected, or a gap */
			mw_mutex_lock(&e->mu);
			e->stats.follow_gaps++;
			bool newer_writer = e->man.epoch > f->r.max_epoch;
			mw_mutex_unlock(&e->mu);
			if (f->catching_up)
				break; /* before a newer manifest: it covers the missing entries */
			if (!f->gap_checked) {
				/* a newer manifest may cover it: look there first */
				f->gap_checked = true;
				f->want_manifest = true;
				break;
			}
			if (!newer_writer || !gap_decided(e, f, &pl)) {
				uint64_t now = mw_now_us();
				if (!f->gap_since_us)
					f->gap_since_us = now;
				if (!f->gap_reported && now - f->gap_since_us >= GAP_REPORT_US) {
					log_warn(
					    "follow: wal entry %" PRIu64
					    " is missing and no manifest "
					    "covers it (a gap): waiting for a writer to decide",
					    next);
					f->gap_reported = true;
				}
				f->want_manifest = true;
				break;
			}
			skip_old = true;
		}
		f->gap_reported = f->gap_checked = false;
		f->gap_since_us = 0;
		size_t i;
		for (i = 0; i < pl.n; i++) {
			if (!skip_old && pl.v[i] != f->r.next)
				break; /* a gap inside the listing: the next probe handles it */
			if (skip_old)
				f->r.next = pl.v[i];
			rc = apply_one(e, f, pl.v[i], skip_old);
			if (rc == 1) {
				rc = 0;
				continue;
			}
			skip_old = false;
			if (rc == -ENOENT) {
				/* listed, then gone: GC took it, a newer manifest covers it */
				f->want_manifest = true;
				rc = 0;
				break;
			}
			if (rc == -ENOMEM) {
				/* perhaps part of the entry went in: start over from the manifest
				 */
				log_warn("follow: out of memory applying wal entry %" PRIu64
				         ": reloading",
				         pl.v[i]);
				rc = reset(e, f);
				goto out;
			}
			if (rc) {
				log_err("follow: wal entry %" PRIu64 ": %s; waiting for a manifest "
				        "that covers it",
				        pl.v[i], strerror(-rc));
				f->want_manifest = true;
				goto out;
			}
			(*applied)++;
			mw_mutex_lock(&e->mu);
			bool full = e->frozen_bytes >= e->o.max_frozen_bytes;
			mw_mutex_unlock(&e->mu);
			if (full) {
				f->want_manifest =
				    true; /* memory bound: wait for the writer's flush */
				i++;
				break;
			}
		}
		if (i < pl.n || pl.n < FOLLOW_LIST_MAX || f->want_manifest) {
			if (i == pl.n && pl.n < FOLLOW_LIST_MAX) {
				mw_mutex_lock(&e->mu);
				e->fo.current_us = t_list; /* everything listed is applied */
				mw_mutex_unlock(&e->mu);
			}
			break;
		}
	}
out:
	free(pl.v);
	return rc;
}

/* ------------------------------------------------------------------ */
/* The thread                                                          */
/* ------------------------------------------------------------------ */

/*
 * One poll; no lock held.  *progress: something changed.  manifest_only: the manifest
 * probe alone, as an idle poll (follow_poll_manifest_now()).
 */
static int poll_once(struct engine *e, struct follow *f, bool manifest_only, bool *progress)
{
	bool changed = false, all = false, idle = f->idle_polls > 0;
	uint64_t applied = 0, more = 0;
	int rc = 0;

	*progress = false;
	mw_mutex_lock(&e->mu);
	bool frozen = e->nfrozen > 0;
	bool full = e->frozen_bytes >= e->o.max_frozen_bytes;
	e->stats.follow_polls++;
	mw_mutex_unlock(&e->mu);
	f->since_manifest++;
	/* frozen MemTables wait for a manifest: look each poll while the writer is active */
	bool probe_m = f->want_manifest || full || (frozen && !idle) ||
	               f->since_manifest >= (idle ? FOLLOW_MANIFEST_EVERY : FOLLOW_MANIFEST_ACTIVE);
	/* idle and nothing waits for a manifest: this poll's one request is the manifest probe */
	bool only_m = (probe_m && idle && !f->want_manifest && !full && !f->deep) || manifest_only;
	probe_m = probe_m || manifest_only;
	if (!only_m && !full) {
		rc = probe_wal(e, f, &applied);
		if (rc)
			return rc;
	}
	if (probe_m || f->want_manifest) {
		f->want_manifest = false;
		rc = probe_manifest(e, f, &changed, &all);
		if (rc)
			return rc;
		if (all)
			notify_all(e, f);
		/* a jump or a freed frozen bound: go on from the new position now */
		if (changed && !only_m)
			rc = probe_wal(e, f, &more);
	}
	mw_mutex_lock(&e->mu);
	e->stats.follow_behind = f->listed_end > f->r.next ? f->listed_end - f->r.next : 0;
	mw_mutex_unlock(&e->mu);
	*progress = changed || applied + more > 0;
	return rc;
}

static void *follow_main(void *arg)
{
	struct engine *e = arg;
	struct follow f = {0};
	unsigned interval = e->o.follow_interval_ms;
	uint64_t quiet_us = mw_now_us(); /* end of the last poll that found something */

	mw_mutex_lock(&e->mu);
	uint64_t wakes = e->fo.wakes;
	f.r.next = e->next_pos;
	f.r.max_epoch = e->fo.max_epoch;
	f.r.locked = true;
	e->fo.current_us = mw_now_us(); /* the open's replay listed the WAL just now */
	for (;;) {
		struct timespec ts;
		uint64_t ns;

		e->stats.follow_interval_ms = interval;
		e->stats.follow_deep_idle = f.deep;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns = (uint64_t)ts.tv_nsec + (uint64_t)interval * 1000000u;
		ts.tv_sec += (time_t)(ns / 1000000000u);
		ts.tv_nsec = (long)(ns % 1000000000u);
		while (!e->fo.thread.stop && e->fo.kick == e->fo.done && e->fo.wakes == wakes &&
		       mw_cond_timedwait(&e->fo.cv, &e->mu, &ts) != ETIMEDOUT)
			;
		if (e->fo.thread.stop)
			break;
		if (e->fo.wakes != wakes) {
			/* the bell rang (or could not be read): poll now, at the normal interval */
			wakes = e->fo.wakes;
			if (f.deep) {
				e->stats.follow_wakes++;
				log_info("follow: woken by the bell");
			}
			f.deep = false;
			f.idle_polls = 0;
			interval = e->o.follow_interval_ms;
			quiet_us = mw_now_us();
		}
		uint64_t kick = e->fo.kick;
		bool manifest_only = e->fo.only_manifest;
		e->fo.only_manifest = false;
		mw_mutex_unlock(&e->mu);
		bool progress = false;
		uint64_t t_poll = mw_now_us();
		int rc = poll_once(e, &f, manifest_only, &progress);
		mw_mutex_lock(&e->mu);
		e->fo.done = kick;
		pthread_cond_broadcast(&e->durable_cv);
		if (rc) {
			e->stats.follow_errors++;
			if (!f.error_reported)
				log_warn("follow: poll failed (%s); retrying", strerror(-rc));
			f.error_reported = true;
		} else if (f.error_reported) {
			log_info("follow: polls succeed again");
			f.error_reported = false;
		}
		if (progress) {
			f.idle_polls = 0;
			interval = e->o.follow_interval_ms;
			f.deep = false;
			quiet_us = mw_now_us();
		} else if (f.deep) {
			interval = e->o.follow_safety_ms; /* the safety poll found nothing */
		} else if (e->o.follow_bell && e->fo.bell && !rc &&
		           t_poll - quiet_us >= (uint64_t)e->o.follow_deep_idle_ms * 1000u) {
			/* quiet for D: the next commit rings the bell (bell.c) */
			f.deep = true;
			interval = e->o.follow_safety_ms;
			log_info(
			    "follow: nothing new for %u ms: deep idle (a poll every %u ms until "
			    "the bell rings)",
			    e->o.follow_deep_idle_ms, e->o.follow_safety_ms);
		} else {
			/* back off: 4 idle polls at each interval, then double it */
			f.idle_polls++;
			if (f.idle_polls % 4 == 0 && interval < e->o.follow_max_interval_ms) {
				interval *= 2;
				if (interval > e->o.follow_max_interval_ms)
					interval = e->o.follow_max_interval_ms;
			}
		}
	}
	e->fo.done = e->fo.kick; /* nobody waits for a stopped follower */
	pthread_cond_broadcast(&e->durable_cv);
	mw_mutex_unlock(&e->mu);
	mw_buf_free(&f.keys);
	free(f.kv);
	return NULL;
}

/* follow_poll_now(), follow_poll_manifest_now() */
static int poll_now(struct engine *e, bool manifest_only)
{
	if (!e || !e->fo.thread.running)
		return -EINVAL;
	mw_mutex_lock(&e->mu);
	/* after the poll in progress, if any: the next one serves this request */
	while (manifest_only && e->fo.kick != e->fo.done && !e->fo.thread.stop)
		mw_cond_wait(&e->durable_cv, &e->mu);
	e->fo.only_manifest = manifest_only;
	uint64_t req = ++e->fo.kick;
	pthread_cond_signal(&e->fo.cv);
	while (e->fo.done < req && !e->fo.thread.stop)
		mw_cond_wait(&e->durable_cv, &e->mu);
	mw_mutex_unlock(&e->mu);
	return 0;
}

int follow_poll_now(struct engine *e)
{
	return poll_now(e, false);
}

int follow_poll_manifest_now(struct engine *e)
{
	return poll_now(e, true);
}

int follow_start(struct engine *e)
{
	if (!e->o.read_only || !e->o.follow)
		return 0;
	return mw_thread_start(&e->fo.thread, "engine follower", follow_main, e, &e->mu, &e->fo.cv);
}

void follow_stop(struct engine *e)
{
	if (e->fo.thread.running)
		mw_thread_stop(&e->fo.thread);
}
