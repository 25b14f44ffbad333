/*
 * regiongc.h - GC of the region objects of one store view (engine/region/regiongc.c;
 * docs/REGIONS.md): holder/, mounts/ and regions/.  Called by the engine's GC pass
 * (engine/maint/gc.c) on its own store: region 0's writer at the store's root (all three),
 * region rid's writer on the view r/<rid>/ (its holder/; the view has no mounts/ or
 * regions/ of its own).
 */
#ifndef MEMWALFS_REGIONGC_H
#define MEMWALFS_REGIONGC_H

#include <stdint.h>

struct store;

/*
 * Find the region objects of st that may go at now (unix seconds), and call
 * del(arg, name, size) for each:
 *   holder/<E>: all but the two highest listed and those of epoch cur_epoch - 1 or later
 *               (cur_epoch: the newest manifest's), once older than grace_sec;
 *   mounts/<id>: leases not written for LEASE_GC_MOUNT_AGE_SEC;
 *   regions/<N>: all but the newest REGMAP_KEEP versions, once older than grace_sec.
 * Names that are not of these formats are left alone.  Three LISTs, a HEAD per candidate.
 * 0, the first nonzero return of del, or the store's error (nothing more is planned).
 */
int region_gc_plan(struct store *st, uint64_t cur_epoch, unsigned grace_sec, int64_t now,
                   int (*del)(void *arg, const char *name, uint64_t size), void *arg);

#endif /* MEMWALFS_REGIONGC_H */
