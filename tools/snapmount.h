/*
 * snapmount.h - the regions of a snapshot mount (tools/snapmount.c; docs/SNAPSHOTS.md
 * "Regions").
 *
 *   snapmount_open(a, st, &sm);   nothing read yet
 *   snapmount_hooks(sm, &a->fo);  mwfs_opts.region_open: a region met opens at the snapshot
 *   snapmount_close(sm);          after mwfs_close(): the regions' engines and views
 *
 * One thread calls these in this order; the hook runs on a request's thread.
 */
#ifndef MEMWALFS_TOOLS_SNAPMOUNT_H
#define MEMWALFS_TOOLS_SNAPMOUNT_H

#include "engine.h"
#include "fs.h"
#include "mount.h"
#include "store.h"

struct snapmount;

/* For the mount of snapshot a->snapshot of st (both borrowed).  0 or -ENOMEM. */
int snapmount_open(struct mount_args *a, struct store *st, struct snapmount **out);
/* Set mwfs_opts.region_open (and take_arg) in fo. */
void snapmount_hooks(struct snapmount *sm, struct mwfs_opts *fo);
/* Close the regions' engines and views; accepts NULL. */
void snapmount_close(struct snapmount *sm);

#endif
