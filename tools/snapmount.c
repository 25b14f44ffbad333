/*
 * snapmount.c - the regions of a snapshot mount (memwalfs mount --snapshot NAME; docs/
 * SNAPSHOTS.md "Regions").
 *
 * A snapshot of a store with regions is one snapshot object per region
 * (engine/region/regsnap.c).  The mount opens region 0 at its object as before; the others
 * when it first meets one of their inode numbers (lazy discovery, the region_open hook of
 * fs/fs.h): a read-only engine on the view r/<rid>/ opened at that region's object of the
 * same name.  A region without one (made after the snapshot, or with no state then) reads
 * as missing.  Nothing is written to the store: no lease, no holder, no map is needed (the
 * snapshot objects say which regions it has).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "log.h"
#include "snapmount.h"

#define SNAPMOUNT_REGIONS_MAX 64 /* FS_REGIONS_MAX */

/* One region opened at the snapshot. */
struct sreg {
	struct store *view; /* r/<rid>/ (owned) */
	struct engine *e;   /* read-only, at the snapshot (owned) */
};

struct snapmount {
	struct mount_args *a; /* borrowed: the mount's options (engine options, the name) */
	struct store *st;     /* borrowed: the store */
	pthread_mutex_t mu;   /* regs, nregs */
	struct sreg regs[SNAPMOUNT_REGIONS_MAX]; /* the regions opened; mu */
	unsigned nregs;                          /* entries of regs in use; mu */
};

int snapmount_open(struct mount_args *a, struct store *st, struct snapmount **out)
{
	struct snapmount *sm = calloc(1, sizeof(*sm));
	if (!sm)
		return -ENOMEM;
	sm->a = a;
	sm->st = st;
	pthread_mutex_init(&sm->mu, NULL);
	*out = sm;
	return 0;
}

/*
 * mwfs_opts.region_open: region rid at the snapshot.  The filesystem calls it once per
 * region (under its take_mu), so two opens of one rid never race.
 */
static int region_open(void *arg, uint32_t rid, struct engine **e, bool *writer)
{
	struct snapmount *sm = arg;
	char prefix[FMT_REGION_PREFIX_MAX];
	struct store *view = NULL;
	struct engine_opts eo = sm->a->eo;

	pthread_mutex_lock(&sm->mu);
	bool full = sm->nregs == SNAPMOUNT_REGIONS_MAX;
	pthread_mutex_unlock(&sm->mu);
	if (full)
		return -ENOSPC;
	fmt_region_prefix(prefix, rid);
	int rc = store_open_sub(sm->st, prefix, &view);
	if (rc) {
		log_err("snapshot %s, region %" PRIu32 ": opening its view: %s", sm->a->snapshot,
		        rid, strerror(-rc));
		return rc;
	}
	eo.read_only = true;
	eo.follow = false;
	eo.follow_interval_ms = 0;
	eo.claim_epoch = 0;
	eo.disk_cache_dir = NULL; /* one disk cache per mount: region 0's */
	eo.snapshot = sm->a->snapshot;
	rc = engine_open(view, &eo, e);
	if (rc) {
		store_close(view);
		if (rc == -ENOENT)
			log_warn("snapshot %s has no part of region %" PRIu32 " (made after it, or "
			         "without a state then): it reads as missing",
			         sm->a->snapshot, rid);
		else
			log_err("snapshot %s, region %" PRIu32 ": opening its engine: %s",
			        sm->a->snapshot, rid, strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&sm->mu);
	sm->regs[sm->nregs++] = (struct sreg){.view = view, .e = *e};
	pthread_mutex_unlock(&sm->mu);
	*writer = false;
	log_info("snapshot %s: region %" PRIu32 " opened at it", sm->a->snapshot, rid);
	return 0;
}

void snapmount_hooks(struct snapmount *sm, struct mwfs_opts *fo)
{
	fo->region_open = region_open;
	fo->take_arg = sm;
}

void snapmount_close(struct snapmount *sm)
{
	if (!sm)
		return;
	for (unsigned i = 0; i < sm->nregs; i++) {
		engine_close(sm->regs[i].e); /* read-only: nothing to commit */
		store_close(sm->regs[i].view);
	}
	pthread_mutex_destroy(&sm->mu);
	free(sm);
}
