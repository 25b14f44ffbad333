/*
 * gc.h - garbage collection of store objects and pack repack planning
 * (engine/maint/gc.c, docs/GC.md).
 *
 * GC never trusts memory alone: it lists the store and decides, object by
 * object, from the manifests it keeps.
 *
 *   Kept manifests: the newest keep_manifests versions, and every version
 *   whose successor is younger than grace_sec (a follower that read it may
 *   still be using it).  Older versions are deleted.
 *
 *   An object is deleted only when no kept manifest needs it:
 *     wal/<p>          p < floor = min(wal_covered of kept manifests,
 *                      protect_wal_from); or, not a fence (larger than a
 *                      header), p < the covered position of the newest kept
 *                      manifest at least grace_sec / 10 old
 *     manifest/<v>     v older than the oldest kept version
 *     sst/<e>-<id>     listed by no kept manifest, not protected as
 *                      in flight (e == protect_epoch && id >= protect_sst_from),
 *                      and last modified at least grace_sec ago
 *     pack/<e>-<p>     referenced by no table of a kept manifest (the SST
 *                      properties' per-pack referenced bytes) nor by the
 *                      caller's live_packs (unflushed MemTables), p < floor,
 *                      and last modified at least grace_sec ago
 *   plus abandoned streaming uploads older than grace_sec
 *   (store_cleanup_uploads).  Names GC does not recognise are never touched.
 *
 * Repack planning: for every pack that stays, live bytes (referenced by
 * the newest manifest's tables) over data bytes; packs below repack_below
 * whose group is already covered by SSTables are selected.  The repack
 * itself (rewrite the live blobs through the normal write path) belongs to
 * the engine; gc_repack_scan() finds what to rewrite.
 *
 * Threads: a struct gc is used by one thread at a time (the engine's GC
 * thread); it only reads manifests and SSTables and deletes unreferenced
 * objects, so it runs beside the writer, the flusher and the compactor.
 */
#ifndef MEMWALFS_GC_H
#define MEMWALFS_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iter.h"

struct store;
struct gc;

/* A pack, by the name pack/<epoch>-<position>. */
struct gc_pack_id {
	uint64_t epoch;    /* epoch of the writer that made it */
	uint64_t position; /* WAL position of its group */
};

struct gc_opts {
	unsigned grace_sec;        /* default 600 */
	unsigned keep_manifests;   /* newest versions always kept (default 4, min 1) */
	int64_t now;               /* wall clock in seconds; 0: time(NULL) */
	double repack_below;       /* select packs whose live fraction is below (default 0.5) */
	uint64_t protect_epoch;    /* with protect_sst_from: SSTables possibly in flight */
	uint64_t protect_sst_from; /* both 0: the newest manifest's epoch and next_sst */
	uint64_t protect_wal_from; /* WAL entries and packs at >= never go (default UINT64_MAX) */
	/*
	 * Versions >= this are kept whatever their age (default UINT64_MAX:
	 * none): the running writer passes the version it reads through, so
	 * that a newer version it committed but has not installed yet (a
	 * flush or compaction between its commit and install) cannot take the
	 * tables it still reads, even with a zero grace.
	 */
	uint64_t keep_from_version;
	const struct gc_pack_id *live_packs; /* packs unflushed data references (borrowed) */
	size_t nlive_packs;
	bool cleanup_uploads; /* also abort abandoned uploads (default true) */
};

/* Fill *o with the defaults above. */
void gc_opts_default(struct gc_opts *o);

/* What a pack holds, as far as GC knows. */
struct gc_pack_stat {
	struct gc_pack_id id; /* which pack */
	uint64_t size;        /* object bytes */
	uint64_t data_bytes;  /* blob bytes (size minus header and trailer) */
	uint64_t live_bytes;  /* referenced by the newest manifest's tables */
	bool unflushed;       /* at or past the WAL floor, or in live_packs */
};

/* A plan: what one GC pass would delete, and the pack accounting. */
struct gc_plan {
	uint64_t latest;          /* newest manifest version (0: none; plan empty) */
	uint64_t oldest_kept;     /* oldest manifest version kept */
	uint64_t wal_floor;       /* WAL entries below this are deleted */
	uint64_t wal_entry_floor; /* and those below this that are not fences (docs/GC.md) */
	char **deletes;           /* object names to delete (malloc()ed, each too) */
	size_t ndeletes;
	uint64_t delete_bytes;                     /* their total size */
	uint64_t n_wal, n_manifest, n_sst, n_pack; /* deletes per class */
	uint64_t n_region;          /* holder/ objects of old epochs, mounts/ leases unwritten for
	                               7 days, regions/ versions below the newest 4 (docs/REGIONS.md) */
	struct gc_pack_stat *packs; /* every pack that stays (malloc()ed) */
	size_t npacks;
	struct gc_pack_id *repack; /* packs selected for repack (malloc()ed) */
	size_t nrepack;
	uint64_t pack_bytes, live_pack_bytes; /* totals over packs that stay */
	uint64_t n_deferred; /* objects kept only until they are older than the grace */
	/*
	 * Wall-clock second (o->now's clock) at which the first of them comes
	 * due: a pass at that time deletes at least one object this one kept,
	 * and a pass before it deletes nothing (unless the history changes
	 * meanwhile).  0 when nothing is deferred.
	 */
	int64_t next_due;
};

/* Free the arrays of p and zero it.  Accepts a zeroed plan. */
void gc_plan_clear(struct gc_plan *p);

/*
 * A collector over st (borrowed; must outlive it).  It caches between
 * passes what it read of immutable objects: the pack references of
 * SSTables, and the manifests it kept with their modification times
 * (manifests are written once, put-if-absent, and never rewritten), so a
 * pass GETs and HEADs only the manifests committed since the last one.
 * -ENOMEM.
 */
int gc_new(struct store *st, struct gc **out);
void gc_free(struct gc *g);

/*
 * Plan one pass: find the newest manifest, decide the kept versions, load
 * them and the pack references of their tables, list wal/, manifest/, sst/
 * and pack/ and HEAD the candidates whose age matters.  Deletes nothing.
 * Any error (a manifest or a table that cannot be read, a failed listing)
 * fails the whole plan: GC never deletes on partial knowledge.
 * On success *plan is filled (gc_plan_clear() it).  -EUCLEAN, -EIO, -ENOMEM...
 */
int gc_plan_make(struct gc *g, const struct gc_opts *o, struct gc_plan *plan);
/*
 * After a plan that failed with -ENOENT: the name of an object the newest
 * manifest needs (one of its tables, or a pack its tables use) that the store
 * does not hold, or NULL (the failure had another cause).  Valid until the next
 * gc_plan_make() on g.
 */
const char *gc_missing(const struct gc *g);

/*
 * Delete what the plan lists (manifests, WAL, tables, packs, in that
 * order, in batches), then clean abandoned uploads when o->cleanup_uploads.
 * *deleted (may be NULL) gets the number of objects deleted.  Returns the
 * first store error (later deletes are still attempted: every one is safe
 * on its own).
 */
int gc_plan_execute(struct gc *g, const struct gc_opts *o, const struct gc_plan *plan,
                    uint64_t *deleted);

/*
 * Called by gc_repack_scan() for each key whose newest version is a blob in
 * a pack selected for repack: key, its sequence and descriptor (borrowed:
 * valid during the call).  Return 0 to go on, anything else stops the scan.
 */
typedef int (*gc_repack_fn)(void *arg, const void *key, size_t klen, uint64_t seq, const void *desc,
                            size_t dlen);

/*
 * Walk it (a merged iterator over everything the engine holds, in internal
 * order; not consumed) from the start and call fn for each newest-version
 * blob that lives in one of the plan's repack packs.  The engine then
 * rewrites each value through its normal write path, but only if the key's
 * newest sequence is still seq (so a newer write is never undone).
 * Returns 0, fn's nonzero value, or the iterator's error.
 */
int gc_repack_scan(struct kv_iter *it, const struct gc_plan *plan, gc_repack_fn fn, void *arg);

#endif /* MEMWALFS_GC_H */
