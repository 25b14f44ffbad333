/*
 * flush.c - the flusher thread: frozen MemTables become SSTables, and the
 * manifest's covered WAL position moves forward (protocol in flush.h).
 *
 * Concurrency.  The flusher reads the frozen list and e->man under e->mu,
 * works on the store without any lock (build + conditional manifest commit),
 * then swaps the result in under e->mu and e->mem_mu, so that a reader that
 * takes its table references under mem_mu sees either F or its SSTable,
 * never both missing.  e->man is only written by this thread after open.
 *
 * SSTable names.  Every attempt, a flush or one output of a compaction,
 * writes "sst/<epoch>-<id>" under an id of its own: take_sst_id() hands
 * out e->m.sst_next_id, which starts at the claimed manifest's next_sst and
 * only grows, so a retry never reuses the name of an earlier attempt, even
 * one whose upload reported failure and may still land (an S3 multipart
 * completion after a timeout).  No other engine can take these names: the
 * epoch is ours alone (claimed by a conditional manifest create at open),
 * which is also why a reopen needs no margin or listing, whatever the
 * previous process left in flight under its own epoch.  The manifests
 * this thread commits persist the allocator: a flush sets next_sst to
 * e->m.sst_next_id (past every id handed out so far), a compaction raises it
 * past its outputs (the newest ids).  Hence e->man.next_sst <=
 * e->m.sst_next_id always, and:
 *   - GC (maint.c, gc.c plan_ssts) protects every table of our epoch with
 *     id >= e->man.next_sst.  An attempt in flight has such an id: it took
 *     it when e->man.next_sst <= e->m.sst_next_id, and e->man changes only
 *     on this thread, which commits nothing while the attempt runs;
 *   - a table of a failed attempt falls below next_sst at the next flush
 *     commit, is referenced by no manifest, and GC deletes it after the
 *     grace period (a late landing gets a new mtime and another period);
 *   - deletes of an attempt's own table (fenced commit, discarded job)
 *     name only that attempt's object, so even a late or repeated delete
 *     cannot remove a table that a manifest references.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "blobcache.h"
#include "compact.h"
#include "engine_int.h"
#include "flush.h"
#include "log.h"
#include "pack.h"
#include "sst_flush.h"
#include "store.h"

/* Seconds to wait before retrying a failed flush. */
#define FLUSH_RETRY_SEC 1

/* A fresh SSTable id, never handed out before in this epoch (flusher thread only). */
static uint64_t take_sst_id(struct engine *e)
{
	return e->m.sst_next_id++;
}

/* compact_alloc_id_fn over take_sst_id(): compaction outputs get fresh ids too. */
static uint64_t compact_take_id(void *arg)
{
	return take_sst_id(arg);
}

static int open_reader(struct engine *e, const struct manifest_sst *s, struct sst_reader **out)
{
	struct sst_reader_opts ro = {.counters = &e->rd.sst_counters,
	                             .cache = e->rd.block_cache,
	                             .dcache = e->rd.dcache,
	                             .dsalt = e->o.disk_cache_salt,
	                             .read_around = e->o.read_region_bytes ? SST_READ_AROUND : 0};
	int rc = sst_reader_open(e->st, s->name, s->size, &ro, out);

	if (rc)
		log_err("flush: cannot open SSTable %s: %s", s->name, strerror(-rc));
	return rc;
}

int flusher_open_ssts(struct engine *e)
{
	int rc;

	if (e->man.nssts == 0)
		return 0;
	e->ssts = calloc(e->man.nssts, sizeof(*e->ssts));
	if (!e->ssts)
		return -ENOMEM;
	for (size_t i = 0; i < e->man.nssts; i++) {
		rc = open_reader(e, &e->man.ssts[i], &e->ssts[i]);
		if (rc)
			return rc; /* engine_free() drops what was opened */
		e->nssts++;
	}
	return 0;
}

/* Timed wait on flush_cv (caller holds e->mu). */
static void nap_locked(struct engine *e, unsigned sec)
{
	mw_mutex_assert_held(&e->mu);
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += sec;
	mw_cond_timedwait(&e->m.flush_cv, &e->mu, &ts);
}

/* Swap F (frozen[0]) for reader r and next manifest (caller holds e->mu). */
static int install_locked(struct engine *e, struct sst_reader *r, struct manifest *next)
{
	mw_mutex_assert_held(&e->mu);
	struct sst_reader **v = NULL, **oldv = NULL;
	struct memtable *old;

	/* a new array, swapped under mem_mu: readers index e->ssts under it */
	if (r) {
		v = malloc((e->nssts + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
	}
	pthread_mutex_lock(&e->mem_mu);
	if (r) {
		if (e->nssts)
			memcpy(v, e->ssts, e->nssts * sizeof(*v));
		oldv = e->ssts;
		e->ssts = v;
		e->ssts[e->nssts++] = r;
		e->sst_gen++;
	}
	old = e->frozen[0].mem;
	e->frozen_bytes -= e->frozen[0].bytes;
	memmove(&e->frozen[0], &e->frozen[1], (e->nfrozen - 1) * sizeof(e->frozen[0]));
	e->nfrozen--;
	pthread_mutex_unlock(&e->mem_mu);
	free(oldv);
	memtable_unref(old);
	if (next) {
		manifest_clear(&e->man);
		e->man = *next;
	}
	return 0;
}

int flusher_readers_for(struct engine *e, const struct manifest *m, struct sst_reader ***out)
{
	struct sst_reader **v = calloc(m->nssts ? m->nssts : 1, sizeof(*v));
	int rc = 0;

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < m->nssts && rc == 0; i++) {
		for (size_t j = 0; j < e->nssts && !v[i]; j++) {
			if (strcmp(sst_reader_key(e->ssts[j]), m->ssts[i].name) == 0) {
				v[i] = e->ssts[j];
				sst_reader_ref(v[i]);
			}
		}
		if (!v[i])
			rc = open_reader(e, &m->ssts[i], &v[i]);
	}
	if (rc) {
		for (size_t i = 0; i < m->nssts; i++)
			sst_reader_unref(v[i]);
		free(v);
		return rc;
	}
	*out = v;
	return 0;
}

/*
 * Run compactions while the manifest asks for them (caller holds e->mu;
 * released during the work).  The outputs replace the inputs in the read
 * path in one critical section; iterators already open keep their own
 * references on the input readers, so no snapshot is ever cut short.
 */
static void compact_some_locked(struct engine *e, bool force)
{
	mw_mutex_assert_held(&e->mu);
	struct sst_reader_opts ro = {.counters = &e->rd.sst_counters, .cache = e->rd.block_cache};
	struct compact_opts co;

	compact_opts_default(&co);
	co.epoch = e->epoch;
	co.reader = &ro;
	co.alloc_id = compact_take_id; /* a retried job never reuses an output name */
	co.alloc_arg = e;
	/* forced: compact L0 whatever its size (a full merge when only L0/L1 exist) */
	if (force)
		co.l0_trigger = 1;
	for (int round = 0; round < 8 && !e->m.flusher.stop && !e->w.sticky; round++) {
		struct compact_job *j = NULL;
		struct manifest next = {0};
		struct sst_reader **v = NULL, **oldv;
		size_t oldn;
		uint64_t t0 = mw_now_us();
		int rc = compact_pick(&e->man, &co, &j);

		if (rc) {
			if (rc != -ENODATA)
				log_warn("compact: pick failed: %s", strerror(-rc));
			return;
		}
		mw_mutex_unlock(&e->mu);
		/* e->man and e->ssts change only on this thread: read them unlocked */
		rc = compact_execute(e->st, j, &co, UINT64_MAX);
		bool executed = rc == 0;
		if (rc == 0)
			rc = compact_commit(e->st, e->conditional, &e->man, j, &next);
		if (!executed)
			compact_job_discard(e->st, j);
		else if (rc == 0)
			engine_committed(e); /* the commit hook: a manifest is durable */
		if (rc == 0 && (rc = flusher_readers_for(e, &next, &v)) != 0) {
			log_err("compact: manifest %" PRIu64 " committed but its tables cannot be "
			        "opened (%s); writer stops",
			        next.version, strerror(-rc));
			rc = -EIO;
		}
		compact_job_free(j);
		mw_mutex_lock(&e->mu);
		if (rc == 0) {
			pthread_mutex_lock(&e->mem_mu);
			oldv = e->ssts;
			oldn = e->nssts;
			e->ssts = v;
			e->nssts = next.nssts;
			e->sst_gen++;
			pthread_mutex_unlock(&e->mem_mu);
			for (size_t i = 0; i < oldn; i++)
				sst_reader_unref(oldv[i]);
			free(oldv);
			manifest_clear(&e->man);
			e->man = next;
			e->stats.compactions++;
			log_info("compact: manifest %" PRIu64 ", %zu tables (%" PRIu64 " us)",
			         e->man.version, e->man.nssts, mw_now_us() - t0);
			continue;
		}
		manifest_clear(&next);
		if (rc == -EAGAIN)
			continue;
		if (rc == -ESTALE) {
			/* other failures (an outage) are retried after the next flush */
			log_err("compact: fenced by a newer writer; writer stops");
			if (!e->w.sticky) {
				e->w.sticky = rc;
				e->w.failed_pos = e->durable_upto;
			}
			pthread_cond_broadcast(&e->durable_cv);
		} else {
			log_warn("compact: failed (%s); will retry after the next flush",
			         strerror(-rc));
		}
		return;
	}
}

static void *flusher_main(void *arg)
{
	struct engine *e = arg;

	mw_mutex_lock(&e->mu);
	compact_some_locked(e, false);
	for (;;) {
		if (e->m.flusher.stop || e->w.sticky)
			break;
		if (e->nfrozen == 0 && e->m.compact_done < e->m.compact_req) {
			uint64_t req = e->m.compact_req;

			compact_some_locked(e, true);
			e->m.compact_done = req;
			pthread_cond_broadcast(&e->durable_cv);
			continue;
		}
		if (e->nfrozen == 0) {
			mw_cond_wait(&e->m.flush_cv, &e->mu);
			continue;
		}
		struct frozen_mem f = e->frozen[0];
		if (e->durable_upto < f.durable_need) {
			/* the group open at the freeze is not durable yet: ask for it */
			if (e->w.open && e->w.open->position < f.durable_need &&
			    !e->w.open->urgent) {
				e->w.open->urgent = true;
				pthread_cond_broadcast(&e->w.commit_cv);
			}
			nap_locked(e, 1);
			continue;
		}
		struct manifest cur = {0}, next = {0};
		struct manifest_sst sst = {0};
		struct sst_reader *r = NULL;
		struct pack *fpack = NULL; /* the blobs promoted from the WAL */
		uint64_t t0 = mw_now_us();
		uint64_t id = take_sst_id(e); /* this attempt's own name */
		int rc = manifest_copy(&cur, &e->man);
		memtable_ref(f.mem);
		mw_mutex_unlock(&e->mu);

		/* persist the allocator: the next manifest covers every id handed out */
		if (cur.next_sst < e->m.sst_next_id)
			cur.next_sst = e->m.sst_next_id;
		if (rc == 0)
			rc = sst_flush_build(e->st, f.mem, e->epoch, id, NULL, e->o.inline_max,
			                     &fpack, &sst);
		if (rc == -ENODATA) {
			/*
			 * An empty MemTable: nothing to write.  Every op of the WAL
			 * before f.wal_end is then in the SSTables already, so the
			 * covered position may still move (a clean close replays
			 * nothing): one manifest commit without a new table.
			 */
			memtable_unref(f.mem);
			rc = 0;
			if (f.wal_end > cur.wal_covered) {
				rc = manifest_copy(&next, &cur);
				if (rc == 0) {
					next.version = cur.version + 1;
					next.wal_covered = f.wal_end;
					rc = manifest_commit_ours(e->st, &next, e->conditional);
					if (rc == -EEXIST)
						rc = -ESTALE;
					if (rc == 0)
						engine_committed(e);
				}
			}
			manifest_clear(&cur);
			mw_mutex_lock(&e->mu);
			if (rc == 0) {
				install_locked(e, NULL, next.version ? &next : NULL);
				pthread_cond_broadcast(&e->durable_cv);
				continue;
			}
			manifest_clear(&next);
			goto failed;
		}
		if (rc == 0)
			rc = sst_flush_promote(e->st, e->conditional, &cur, &sst, f.wal_end, &next);
		if (rc == 0)
			engine_committed(e); /* the commit hook: a manifest is durable */
		if (rc == 0 && (rc = open_reader(e, &sst, &r)) != 0)
			log_err("flush: %s committed but unreadable: %s", sst.name, strerror(-rc));
		if (rc == 0 && fpack) /* before the MemTable that holds the bytes goes */
			blob_cache_pack(e, fpack);
		memtable_unref(f.mem);
		mw_mutex_lock(&e->mu);
		if (rc == 0)
			rc = install_locked(e, r, &next);
		if (rc == 0 && fpack) {
			uint64_t n = pack_data_bytes(fpack) + PACK_HEADER_SIZE + PACK_TRAILER_SIZE;
			e->stats.packs_written++;
			e->stats.pack_bytes += n;
			e->stats.flush_packs++;
			e->stats.flush_pack_bytes += n;
			e->m.wal_blobs_promoted += pack_data_bytes(fpack);
		}
		pack_unref(fpack);
		if (rc == 0) {
			e->stats.flushes++;
			log_info("flush: %s covers the WAL before %" PRIu64 " (manifest %" PRIu64
			         ", %" PRIu64 " us)",
			         sst.name, f.wal_end, e->man.version, mw_now_us() - t0);
			pthread_cond_broadcast(&e->durable_cv);
			compact_some_locked(e, false);
		} else {
			sst_reader_unref(r);
			manifest_clear(&next);
		}
		free(sst.name);
		free(sst.smallest);
		free(sst.largest);
		manifest_clear(&cur);
		if (rc == 0)
			continue;
	failed:
		e->m.flush_failures++;
		e->m.flush_last_error = rc;
		pthread_cond_broadcast(&e->durable_cv);
		if (rc == -ESTALE) {
			log_err("flush: fenced by a newer writer; writer stops");
			if (!e->w.sticky) {
				e->w.sticky = -ESTALE;
				e->w.failed_pos = e->durable_upto;
			}
			pthread_cond_broadcast(&e->durable_cv);
		} else if (store_err_permanent(e->st, rc)) {
			/* retrying would only fill the frozen MemTables until writers hang */
			log_err(
			    "flush: the store refuses it for good (%s; its line above says where); "
			    "the writer stops, nothing more is acknowledged (what was is in the "
			    "WAL)",
			    strerror(-rc));
			if (!e->w.sticky) {
				e->w.sticky = -EIO;
				e->w.failed_pos = e->durable_upto;
			}
			pthread_cond_broadcast(&e->durable_cv);
		} else {
			log_warn("flush: failed (%s); retrying in %d s", strerror(-rc),
			         FLUSH_RETRY_SEC);
			nap_locked(e, FLUSH_RETRY_SEC);
		}
	}
	mw_mutex_unlock(&e->mu);
	return NULL;
}

int flusher_start(struct engine *e)
{
	/* ids of our epoch start at the claimed manifest's; see "SSTable names" */
	e->m.sst_next_id = e->man.next_sst;
	return mw_thread_start(&e->m.flusher, "engine flusher", flusher_main, e, &e->mu,
	                       &e->m.flush_cv);
}

void flusher_stop(struct engine *e)
{
	if (!e->m.flusher.running)
		return;
	mw_thread_stop(&e->m.flusher);
	/* writers waiting for frozen space must not wait forever */
	mw_mutex_lock(&e->mu);
	pthread_cond_broadcast(&e->durable_cv);
	mw_mutex_unlock(&e->mu);
}
