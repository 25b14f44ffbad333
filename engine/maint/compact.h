/*
 * compact.h - leveled compaction of SSTables (engine/maint/compact.c,
 * docs/COMPACTION.md).
 *
 * Levels.  L0 holds the SSTables flushed from MemTables; they may overlap
 * and are ordered by age (manifest list order).  L1..L(max-1) are sorted
 * runs: within one level no two SSTables overlap.  Data only moves down,
 * so for any user key a deeper level holds older versions.
 *
 * Three steps, so that the engine can run the slow one without its locks:
 *
 *   1. compact_pick(): a pure function of a manifest: is there work, and
 *      which SSTables does it take?  (score = L0 count / l0_trigger, or
 *      level bytes / level target; the best score >= 1 wins)
 *   2. compact_execute(): merge the inputs (kv_merge_iter_new over SST
 *      reader iterators) into new SSTables "sst/<epoch>-<id>" of about
 *      target_file_bytes each, split only between user keys, dropping
 *      shadowed versions and the tombstones nothing older needs.  Values
 *      are copied as bytes: blob descriptors are rewritten, blob bytes never.
 *      Nothing is referenced yet: a crash leaves orphans that GC removes.
 *   3. compact_commit(): manifest N+1 = the current manifest minus the
 *      inputs plus the outputs, committed with one conditional put.  That is
 *      the commit point; readers of older versions keep their inputs until
 *      GC's grace period ends.
 *
 * The manifest's SST list is kept "oldest first": deeper levels first
 * (each sorted by smallest key), then L0 oldest first, so that a reader
 * walking it backwards sees newer data first and sst_flush_promote() can
 * keep appending new L0 tables.
 *
 * Threads: at most one compaction job at a time per store (the engine's
 * compactor thread); flushes may commit L0 tables meanwhile.  Functions
 * touch no engine state; a job is used by one thread at a time.
 */
#ifndef MEMWALFS_COMPACT_H
#define MEMWALFS_COMPACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "manifest.h"
#include "sst.h"

struct store;
struct compact_job;

/* Deepest level count: levels are 0 .. COMPACT_MAX_LEVELS - 1. */
#define COMPACT_MAX_LEVELS 7

/* Hands out SSTable ids unique in the store (the engine's allocator). */
typedef uint64_t (*compact_alloc_id_fn)(void *arg);

struct compact_opts {
	unsigned l0_trigger;        /* compact L0 at this many tables (default 4) */
	uint64_t level_base_bytes;  /* target size of L1 in SSTable bytes (default 64 MiB) */
	unsigned fanout;            /* L(i+1) target = fanout * Li target (default 10) */
	unsigned levels;            /* levels in use, 2..COMPACT_MAX_LEVELS (default 7) */
	uint64_t target_file_bytes; /* split outputs at about this size (default 8 MiB) */
	uint64_t epoch;             /* writer epoch for output names (required) */
	/*
	 * NULL: ids from the job's manifest next_sst on.  Then two jobs picked
	 * from one manifest (a retry) write the same names, so a caller that
	 * may retry must hand out fresh ids (the engine does: flush.c).
	 */
	compact_alloc_id_fn alloc_id;
	void *alloc_arg;                        /* passed to alloc_id */
	const struct sst_builder_opts *builder; /* NULL: defaults + sst_flush_blob_ref */
	const struct sst_reader_opts *reader;   /* NULL: no cache, own counters */
};

/* Fill *o with the defaults above (epoch 0: set it). */
void compact_opts_default(struct compact_opts *o);

/* What a finished job did (counters for the engine's stats and tests). */
struct compact_stats {
	uint64_t input_tables, output_tables; /* SSTables read / written */
	uint64_t input_bytes, output_bytes;   /* their object bytes */
	uint64_t entries_in, entries_out;     /* entries merged / kept */
	uint64_t dropped_shadowed;            /* older versions nobody can see */
	uint64_t dropped_tombstones;          /* deletes with nothing older below */
	bool trivial_move;                    /* one table changed level, nothing rewritten */
};

/*
 * Decide whether m needs a compaction.  Returns 0 and *out (a job holding
 * deep copies of what it needs; free with compact_job_free()) when it does,
 * -ENODATA when no level is over its target, -ENOMEM, -EINVAL (bad opts).
 * Pure: no I/O.  Any thread.
 */
int compact_pick(const struct manifest *m, const struct compact_opts *o, struct compact_job **out);

/*
 * Level taken by the job (0: all L0 tables), the level it writes, and its
 * input tables (borrowed, valid until compact_job_free()).
 */
uint32_t compact_job_level(const struct compact_job *j);
uint32_t compact_job_output_level(const struct compact_job *j);
const struct manifest_sst *compact_job_inputs(const struct compact_job *j, size_t *n);

/*
 * Outputs written by compact_execute() (borrowed, as above), in key order.
 */
const struct manifest_sst *compact_job_outputs(const struct compact_job *j, size_t *n);

/* Counters of the job so far. */
void compact_job_stats(const struct compact_job *j, struct compact_stats *out);

/*
 * Merge the inputs into new SSTables in st.  snapshot: the smallest
 * sequence number any reader may still read at (UINT64_MAX: no snapshot
 * older than the newest data); versions a reader at or after it can see are
 * kept.  A tombstone is dropped only when no level below the output level
 * has a table whose key range holds its key, and seq <= snapshot.
 * o must be the options given to compact_pick() (o->epoch set).
 * A job with one input that nothing overlaps is a move (no rewrite) unless
 * the table's properties show shadowed versions (entries > keys) or
 * tombstones no deeper table needs: then it is rewritten alone, so that
 * they go (one properties read; st may be NULL for a move in policy tests).
 * Returns 0 (outputs in the job; possibly none, when everything dropped),
 * or the error of the store, a reader (-EUCLEAN, -EIO) or the builder;
 * on error the tables written so far are deleted, best effort.  Any one
 * thread; may be called once per job.
 */
int compact_execute(struct store *st, struct compact_job *j, const struct compact_opts *o,
                    uint64_t snapshot);

/*
 * Build manifest cur->version + 1 from cur: the job's inputs removed, its
 * outputs added (list order as in the header comment), next_sst raised
 * past every id the job handed out.  cur may be newer than the manifest the job was
 * picked from (flushes add L0 tables).  Pure.  On success *next is a new
 * manifest (free with manifest_clear()).  -EAGAIN when an input is no
 * longer in cur (someone else compacted it: drop the job), -ENOMEM.
 */
int compact_apply(const struct manifest *cur, const struct compact_job *j, struct manifest *next);

/*
 * compact_apply() then manifest_commit(): the commit point.  -ESTALE when
 * version cur->version + 1 exists (a newer writer fenced us; the outputs
 * are deleted, best effort); -EAGAIN as compact_apply(); store errors with
 * an unknown outcome leave the outputs in place (GC removes them if the
 * commit did not land).  On success *next is the committed manifest.
 */
int compact_commit(struct store *st, bool conditional, const struct manifest *cur,
                   const struct compact_job *j, struct manifest *next);

/*
 * Delete the job's outputs (best effort), for a job that will not be
 * committed.  Harmless after a failed execute.
 */
void compact_job_discard(struct store *st, struct compact_job *j);

/* Free the job (never deletes objects).  Accepts NULL. */
void compact_job_free(struct compact_job *j);

#endif /* MEMWALFS_COMPACT_H */
