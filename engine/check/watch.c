/*
 * watch.c - the store watch: notice, under a live writer, that the store lost
 * objects the filesystem needs, and stop acknowledging (docs/DESIGN.md,
 * "A store that loses its objects").
 *
 * DESIGN
 *
 * A bucket lifecycle rule, an `aws s3 rm --recursive` or another tool's wrong
 * prefix can delete the objects of a mounted store.  Every commit still
 * succeeds (a conditional create of a new name does not care what else is
 * gone), so without a check the mount goes on acknowledging writes that no
 * open can ever read back.  The watch thread checks, every
 * opts.store_check_ms (5 s by default) in which groups are committed (at
 * the first commit at least that long after the previous check), that what
 * the writer's state needs is in the store, with four listings (a few
 * requests, whatever the size of the store).  An idle mount sends nothing
 * (it acknowledges nothing either); its loss is found at its next commit,
 * by a read, by `memwalfs sync` or at unmount (engine_close() checks):
 *
 *   manifest/  the version the engine reads through (e->man) is there, and is
 *              the newest (a newer one means a commit in motion or a newer
 *              writer: this check is skipped, the lease check fences);
 *   wal/       every position from its covered position up to the durable one
 *              (GC never deletes one of those: docs/GC.md);
 *   sst/       every table it lists;
 *   pack/      the packs this writer committed at positions not yet covered.
 *
 * A missing object is then only declared after a HEAD of it says it is gone
 * (a listing can lag: RGW right after a restart listed manifest/ without the
 * manifest it had) and the engine's state has not moved meanwhile (the same
 * manifest version): a flush or a compaction that
 * installs a new version between the snapshot and the listings makes the
 * check start over at the next interval.  Reads that find a pack or a table
 * missing (blob.c, read.c) and a GC pass that finds one the newest manifest
 * needs (gc.c) ask for a check at once (at most one a second).  A GC pass
 * that finds a table or a pack of the newest manifest missing declares the
 * loss itself: that manifest is ours and GC never deletes what it needs.
 *
 * The loss (engine_store_lost()) is sticky: the writer stops with -EIO at the
 * durable position (nothing from there on is acknowledged: fsync and writes
 * fail with EIO), GC, the flusher and the compactor stop (nothing more is
 * deleted: what remains is what `memwalfs fsck --salvage` recovers from), the
 * stats say so in words (store_lost, store_lost_since, a "# store lost: ..."
 * line) and the log names the first missing object.  Reads keep working from
 * what remains and from the caches.
 *
 * Bound: a write is acknowledged at most opts.store_check_ms plus one check's
 * listings after the objects went missing (the groups acknowledged meanwhile
 * were written after the deletion, so they are among what remains).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine_int.h"
#include "grow.h"
#include "log.h"
#include "sst_flush.h"
#include "store.h"

/* Checks asked for by reads: at most one per this many ms. */
#define WATCH_KICK_MIN_MS 1000u

void engine_store_lost(struct engine *e, const char *fmt, ...)
{
	char what[sizeof(e->wa.lost_what)];
	va_list ap;

	va_start(ap, fmt);
	if (vsnprintf(what, sizeof(what), fmt, ap) < 0)
		snprintf(what, sizeof(what), "an object is missing");
	va_end(ap);
	mw_mutex_lock(&e->mu);
	if (e->wa.lost) {
		mw_mutex_unlock(&e->mu);
		return;
	}
	e->wa.lost = true;
	e->stats.store_lost_since = (int64_t)time(NULL);
	memcpy(e->wa.lost_what, what, sizeof(what));
	if (!e->w.sticky) {
		/* nothing from the durable position on is acknowledged (writer.c) */
		e->w.sticky = -EIO;
		e->w.failed_pos = e->durable_upto;
	}
	pthread_cond_broadcast(&e->durable_cv);
	pthread_cond_broadcast(&e->w.commit_cv);
	pthread_cond_broadcast(&e->m.flush_cv);
	pthread_cond_broadcast(&e->m.gc_cv);
	uint64_t durable = e->durable_upto;
	mw_mutex_unlock(&e->mu);
	log_err("engine: THE STORE LOST OBJECTS THIS FILESYSTEM NEEDS: %s (deleted by another "
	        "tool, a lifecycle rule or a wrong prefix?).  The mount stops acknowledging: "
	        "writes, fsync, memwalfs sync and umount fail with EIO from WAL position %" PRIu64
	        " on; nothing more is deleted.  Unmount, then recover what remains with "
	        "`memwalfs fsck --salvage STORE` (README.md, \"When the store lost objects\")",
	        what, durable);
}

/* What one check compares the store against: a copy of the engine's state. */
struct want {
	uint64_t version; /* the manifest the engine reads through */
	uint64_t covered; /* its covered WAL position */
	uint64_t durable; /* every position below is acknowledged */
	uint64_t epoch;   /* ours */
	char **ssts;      /* its tables' names, sorted (malloc()ed, each too) */
	size_t nssts;
	uint64_t *packs; /* positions of our committed group packs >= covered, ascending */
	size_t npacks;
};

static void want_clear(struct want *w)
{
	for (size_t i = 0; i < w->nssts; i++)
		free(w->ssts[i]);
	free(w->ssts);
	free(w->packs);
	memset(w, 0, sizeof(*w));
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Copy what the store must hold (e->mu held); drops packs now covered.  -ENOMEM. */
static int want_take_locked(struct engine *e, struct want *w)
{
	mw_mutex_assert_held(&e->mu);
	size_t k = 0;

	memset(w, 0, sizeof(*w));
	w->version = e->man.version;
	w->covered = e->man.wal_covered;
	w->durable = e->durable_upto;
	w->epoch = e->epoch;
	for (size_t i = 0; i < e->wa.npacks; i++)
		if (e->wa.packs[i] >= w->covered)
			e->wa.packs[k++] = e->wa.packs[i];
	e->wa.npacks = k;
	w->ssts = calloc(e->man.nssts ? e->man.nssts : 1, sizeof(*w->ssts));
	w->packs = calloc(k ? k : 1, sizeof(*w->packs));
	if (!w->ssts || !w->packs)
		goto nomem;
	for (; w->nssts < e->man.nssts; w->nssts++)
		if (!(w->ssts[w->nssts] = strdup(e->man.ssts[w->nssts].name)))
			goto nomem;
	qsort(w->ssts, w->nssts, sizeof(*w->ssts), str_cmp);
	if (k)
		memcpy(w->packs, e->wa.packs, k * sizeof(*w->packs));
	w->npacks = k;
	return 0;
nomem:
	want_clear(w);
	return -ENOMEM;
}

/* ---- listings of names (also salvage.c) ---- */

void keylist_clear(struct keylist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	memset(l, 0, sizeof(*l));
}

static int keylist_cb(void *arg, const char *key, uint64_t size)
{
	struct keylist *l = arg;

	(void)size;
	if (MW_GROW(l->v, l->cap, l->n + 1, 64))
		return -ENOMEM;
	if (!(l->v[l->n] = strdup(key)))
		return -ENOMEM;
	l->n++;
	return l->max && l->n >= l->max ? 1 : 0;
}

int keylist_fetch(struct store *st, const char *prefix, const char *start_after, size_t max,
                  struct keylist *l)
{
	int rc;

	memset(l, 0, sizeof(*l));
	l->max = max;
	rc = store_list(st, prefix, start_after, max, keylist_cb, l);
	if (rc == 1)
		rc = 0;
	if (rc)
		keylist_clear(l);
	return rc;
}

bool keylist_has(const struct keylist *l, const char *name)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = strcmp(l->v[mid], name);
		if (c == 0)
			return true;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

/*
 * Compare the store with w: 0 when everything is there (or the state is in
 * motion: nothing decided), 1 with missing (FMT_NAME_MAX bytes) naming the
 * first object that is not, or the error of a listing.
 */
static int compare(struct engine *e, const struct want *w, char *missing)
{
	char name[FMT_NAME_MAX], after[FMT_NAME_MAX];
	struct keylist l;
	uint64_t v;
	int rc;

	/* manifest/: ours, and nothing newer */
	fmt_manifest_name(name, w->version);
	if (w->version > 0)
		fmt_manifest_name(after, w->version - 1);
	rc = keylist_fetch(e->st, FMT_MANIFEST_PREFIX, w->version > 0 ? after : NULL, 2, &l);
	if (rc)
		return rc;
	bool ours = l.n >= 1 && !strcmp(l.v[0], name);
	bool newer = l.n > (ours ? 1u : 0u) && fmt_parse_manifest_name(l.v[l.n - 1], &v) == 0 &&
	             v > w->version;
	keylist_clear(&l);
	if (newer)
		return 0; /* a commit in motion, or a newer writer (the lease check fences) */
	if (!ours) {
		snprintf(missing, FMT_NAME_MAX, "%s", name);
		return 1;
	}
	/* wal/: every position in [covered, durable) */
	if (w->durable > w->covered) {
		if (w->covered > 0)
			fmt_wal_name(after, w->covered - 1);
		rc = keylist_fetch(e->st, FMT_WAL_PREFIX, w->covered > 0 ? after : NULL,
		                   (size_t)(w->durable - w->covered), &l);
		if (rc)
			return rc;
		uint64_t p = w->covered;
		for (size_t i = 0; i < l.n && p < w->durable; i++) {
			uint64_t got;
			if (fmt_parse_wal_name(l.v[i], &got) || got != p)
				break;
			p++;
		}
		keylist_clear(&l);
		if (p < w->durable) {
			fmt_wal_name(missing, p);
			return 1;
		}
	}
	/* sst/: every table of the manifest */
	if (w->nssts) {
		rc = keylist_fetch(e->st, SST_PREFIX, NULL, 0, &l);
		if (rc)
			return rc;
		for (size_t i = 0; i < w->nssts; i++)
			if (!keylist_has(&l, w->ssts[i])) {
				snprintf(missing, FMT_NAME_MAX, "%s", w->ssts[i]);
				keylist_clear(&l);
				return 1;
			}
		keylist_clear(&l);
	}
	/* pack/: our group packs not yet covered */
	if (w->npacks) {
		fmt_pack_name(name, w->epoch, w->packs[0]);
		snprintf(after, sizeof(after), "%.*s", (int)(strlen(name) - 1), name);
		rc = keylist_fetch(e->st, FMT_PACK_PREFIX, after, 0, &l);
		if (rc)
			return rc;
		for (size_t i = 0; i < w->npacks; i++) {
			fmt_pack_name(name, w->epoch, w->packs[i]);
			if (!keylist_has(&l, name)) {
				snprintf(missing, FMT_NAME_MAX, "%s", name);
				keylist_clear(&l);
				return 1;
			}
		}
		keylist_clear(&l);
	}
	return 0;
}

int watch_check(struct engine *e)
{
	char missing[FMT_NAME_MAX] = "";
	struct want w;
	int rc;

	if (e->o.read_only)
		return 0;
	mw_mutex_lock(&e->mu);
	if (e->wa.lost || e->w.sticky) {
		rc = e->w.sticky;
		mw_mutex_unlock(&e->mu);
		return rc;
	}
	rc = want_take_locked(e, &w);
	mw_mutex_unlock(&e->mu);
	if (rc)
		return rc;
	rc = compare(e, &w, missing);
	if (rc == 1) {
		/*
		 * A listing is not the last word: an S3 server right after its restart (RGW
		 * under load, seen in fs_outage_s3) listed manifest/ without the manifest it
		 * had.  The object itself is asked before a loss is declared.
		 */
		struct store_stat st;
		int hr = store_head(e->st, missing, &st);
		if (hr == 0) {
			log_warn("engine: store check: a listing left out %s, which is there (the "
			         "store's listing lagged): not a loss; checked again at the next "
			         "interval",
			         missing);
			rc = 0;
		} else if (hr != -ENOENT) {
			rc = hr; /* not known: tried again at the next interval */
		}
	}
	mw_mutex_lock(&e->mu);
	e->stats.store_checks++;
	if (rc < 0)
		e->stats.store_check_errors++;
	/* the state moved on meanwhile (a flush installed, a fence): decide nothing */
	bool moved = e->man.version != w.version;
	mw_mutex_unlock(&e->mu);
	if (rc < 0)
		log_debug("engine: store check: %s (tried again at the next interval)",
		          strerror(-rc));
	if (rc == 1 && !moved) {
		engine_store_lost(e,
		                  "%s is missing (needed by manifest %" PRIu64 ", WAL %" PRIu64
		                  "..%" PRIu64 ")",
		                  missing, w.version, w.covered, w.durable);
		rc = -EIO;
	} else if (rc == 1) {
		rc = 0;
	}
	want_clear(&w);
	return rc;
}

void watch_kick(struct engine *e)
{
	if (e->o.read_only)
		return;
	mw_mutex_lock(&e->mu);
	if (!e->wa.kicked) {
		e->wa.kicked = true;
		pthread_cond_broadcast(&e->wa.cv);
	}
	mw_mutex_unlock(&e->mu);
}

/* The absolute CLOCK_MONOTONIC time ms from now. */
/*
 * The watch thread: a check at a commit when the last check began at least
 * opts.store_check_ms before (a commit sooner than that is not checked by
 * itself: the first one after the interval is), so that a stream of commits
 * is checked once per interval and the check comes with a commit's own
 * requests, never seconds after the last one (an idle mount stays quiet).
 * A read or GC that asks (watch_kick()) gets a check at most once per
 * WATCH_KICK_MIN_MS.
 */
static void *watch_main(void *arg)
{
	struct engine *e = arg;
	uint64_t last_us = 0; /* when the last check began (0: none yet) */

	mw_mutex_lock(&e->mu);
	for (;;) {
		while (!e->wa.thread.stop && !e->wa.lost && !e->wa.dirty && !e->wa.kicked)
			mw_cond_wait(&e->wa.cv, &e->mu);
		if (e->wa.thread.stop || e->wa.lost)
			break;
		uint64_t now = mw_now_us();
		bool due = !last_us || now - last_us >= (uint64_t)e->o.store_check_ms * 1000u;
		e->wa.dirty = false;
		if (!due && !e->wa.kicked)
			continue; /* checked lately: the first commit after the interval checks */
		if (!due && last_us && now - last_us < WATCH_KICK_MIN_MS * 1000u) {
			/* asked by a read again soon after a check: wait out the rest of the second
			 */
			struct timespec until =
			    mw_after_ms(WATCH_KICK_MIN_MS - (now - last_us) / 1000u + 1);
			while (!e->wa.thread.stop && !e->wa.lost &&
			       mw_cond_timedwait(&e->wa.cv, &e->mu, &until) != ETIMEDOUT)
				;
			continue;
		}
		e->wa.kicked = false;
		mw_mutex_unlock(&e->mu);
		last_us = mw_now_us();
		watch_check(e);
		mw_mutex_lock(&e->mu);
	}
	mw_mutex_unlock(&e->mu);
	return NULL;
}

void watch_note_commit_locked(struct engine *e)
{
	mw_mutex_assert_held(&e->mu);
	if (!e->wa.dirty) {
		e->wa.dirty = true;
		pthread_cond_signal(&e->wa.cv);
	}
}

int watch_start(struct engine *e)
{
	if (e->o.read_only || e->o.store_check_ms == ENGINE_CHECK_OFF)
		return 0;
	return mw_thread_start(&e->wa.thread, "engine store watch", watch_main, e, &e->mu,
	                       &e->wa.cv);
}

void watch_stop(struct engine *e)
{
	mw_thread_stop(&e->wa.thread);
}

int watch_record_pack_locked(struct engine *e, uint64_t position)
{
	mw_mutex_assert_held(&e->mu);
	if (MW_GROW(e->wa.packs, e->wa.packs_cap, e->wa.npacks + 1, 64))
		return -ENOMEM; /* that pack goes unwatched; reads and GC still see it */
	e->wa.packs[e->wa.npacks++] = position;
	return 0;
}
