/*
 * hold.h - a read-write mount's hold on its store: its lease, the take of the store at
 * mount, and the hook that takes it over later (tools/hold.c; docs/REGIONS.md).
 *
 *   hold_open(a, st, &h);        the lease (mounts/<id>)
 *   hold_acquire(h, takeover);   0: write (a->eo.claim_epoch set); 1: follow (printed why)
 *   (engine_open with a->eo, read-only and following when following)
 *   hold_held(h, e);             the claim succeeded / watch the holder
 *   hold_hooks(h, &a->fo);       mwfs_opts.take, .taken, .release, .regions,
 *                                .region_open, .region_create (every region, per rid)
 *   hold_set_fs(h, fs);          once the filesystem is open
 *   hold_engine(h)               the engine in use at unmount (another after a take)
 *   hold_close_regions(h, &err)  after the engine's close: the other regions' engines
 *                                (their final commits' result)
 *   hold_close(h);               then the lease goes
 *
 * One thread calls these in this order; the hooks run on a request's thread.
 */
#ifndef MEMWALFS_TOOLS_HOLD_H
#define MEMWALFS_TOOLS_HOLD_H

#include <stdbool.h>

#include "engine.h"
#include "fs.h"
#include "mount.h"
#include "store.h"

struct hold;

/*
 * Open the mount's lease on st and read the region map (a store with regions besides region
 * 0 turns a->fo.writeback off).  0, or -errno (printed).
 */
int hold_open(struct mount_args *a, struct store *st, struct hold **out);
/*
 * A read-only (-o ro) mount's hold: no lease, nothing ever written; the region map only, so
 * that the mount discovers and follows every region (hold_hooks() then sets no take,
 * release or create hook).  Then hold_held(), hold_hooks(), hold_set_fs(), hold_close() as
 * above.  0, or -errno.
 */
int hold_open_ro(struct mount_args *a, struct store *st, struct hold **out);
/*
 * Take region 0 for writing (force: --takeover, fences a live holder).  0: taken, the
 * engine's claim_epoch is set in a->eo; 1: held by a live mount (printed): mount as its
 * follower; -errno: failed (printed).
 */
int hold_acquire(struct hold *h, bool force);
/* The engine's open after hold_acquire() failed: let the region go again. */
void hold_failed(struct hold *h);
/* e is open: record the hold (a writer) or start watching the holder (a follower). */
int hold_held(struct hold *h, struct engine *e);
/* A following mount (a->eo.read_only): set the take hooks in fo. */
void hold_hooks(struct hold *h, struct mwfs_opts *fo);
void hold_set_fs(struct hold *h, struct mwfs *fs);
/* The mount's lease id (the bell's mount). */
const char *hold_id(struct hold *h);
/*
 * The mount's bell (borrowed: closed after hold_close()), before hold_held(): rung at
 * every claim; every following engine with eo.follow_bell is registered with it while
 * the mount uses it.
 */
void hold_set_bell(struct hold *h, struct bell *b);
/* The engine the mount uses now. */
struct engine *hold_engine(struct hold *h);
/*
 * After region 0's engine's close: close the engines of the other regions (their final
 * commits, errors logged) and their views, then delete the lease; accepts NULL.
 */
/* What hold_close_regions() says of the first region whose final commit failed. */
struct hold_region_err {
	uint32_t rid;          /* the region */
	uint64_t changes_lost; /* its changes applied here and never committed */
};
/*
 * After region 0's engine's close: close every other region's engine (the final commit of
 * each; failures logged) and its view.  0, or the first failure's -errno (-ESTALE: another
 * mount claimed that region: this mount was fenced there), described in *err (may be NULL).
 * hold_close() does it too (a second call closes nothing).
 */
int hold_close_regions(struct hold *h, struct hold_region_err *err);
void hold_close(struct hold *h);

#endif
