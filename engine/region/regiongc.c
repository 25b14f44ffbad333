/*
 * regiongc.c - GC of the region objects (regiongc.h; docs/REGIONS.md "Known limits" of the
 * leases, and "GC" of the map): which holder/, mounts/ and regions/ objects of a store
 * view may go.  Deleting is the engine's GC's (engine/maint/gc.c plans and deletes them
 * with everything else, after the rest of its plan is made).
 */
#include <errno.h>
#include <string.h>

#include "format.h"
#include "gclist.h"
#include "lease.h"
#include "regiongc.h"
#include "regmap.h"
#include "store.h"

/* What one call plans with. */
struct rgc {
	struct store *st;
	int64_t now;
	int (*del)(void *arg, const char *name, uint64_t size);
	void *arg;
};

/*
 * Object i of l goes if it is at least min_age seconds old (one HEAD; a vanished one is
 * skipped).  0, the HEAD's error or del's return.
 */
static int aged(const struct rgc *r, const struct gc_listing *l, size_t i, int64_t min_age)
{
	int64_t age;
	int rc = gc_object_age(r->st, l->names[i], r->now, &age);

	if (rc == -ENOENT)
		return 0;
	if (!rc && age >= min_age)
		rc = r->del(r->arg, l->names[i], l->sizes[i]);
	return rc;
}

/*
 * The view's holder objects: the two highest listed and every one of the epoch before the
 * newest manifest's or later stay (the holder, a taker about to claim); older ones go once
 * older than the grace.  A late re-creation of a deleted one cannot be claimed (its epoch
 * is below the newest), so deleting it is always safe.
 */
static int holders(const struct rgc *r, uint64_t cur, unsigned grace_sec)
{
	struct gc_listing l = {0};
	int rc = gc_list_prefix(r->st, FMT_HOLDER_PREFIX, &l);

	for (size_t i = 0; !rc && i + 2 < l.n; i++) {
		uint64_t ep;

		if (fmt_parse_holder_name(l.names[i], &ep) != 0 || ep + 1 >= cur)
			continue;
		rc = aged(r, &l, i, (int64_t)grace_sec);
	}
	gc_listing_free(&l);
	return rc;
}

/*
 * Mount leases not written for LEASE_GC_MOUNT_AGE_SEC: a mount that died without its
 * clean close.  A mount that holds a region renews its lease every lease_ms / 3, so only
 * the lease of a dead mount, or of a live one that holds nothing, is ever that old; the
 * latter writes it again when it takes a region.
 */
static int mounts(const struct rgc *r)
{
	struct gc_listing l = {0};
	int rc = gc_list_prefix(r->st, FMT_MOUNTS_PREFIX, &l);

	for (size_t i = 0; !rc && i < l.n; i++) {
		if (!lease_id_valid(l.names[i] + strlen(FMT_MOUNTS_PREFIX)))
			continue; /* not ours to judge */
		rc = aged(r, &l, i, LEASE_GC_MOUNT_AGE_SEC);
	}
	gc_listing_free(&l);
	return rc;
}

/*
 * The region map (docs/REGIONS.md "The region map"): the newest REGMAP_KEEP versions
 * stay; older ones go once older than the grace.  A reader that listed one GC deletes
 * lists again; a writer only builds on a version it listed as the newest.
 */
static int map_versions(const struct rgc *r, unsigned grace_sec)
{
	struct gc_listing l = {0};
	uint64_t v, newest = 0;
	int rc = gc_list_prefix(r->st, FMT_REGIONS_PREFIX, &l);

	for (size_t i = 0; !rc && i < l.n; i++)
		if (fmt_parse_regions_name(l.names[i], &v) == 0 && v > newest)
			newest = v;
	for (size_t i = 0; !rc && i < l.n; i++) {
		if (fmt_parse_regions_name(l.names[i], &v) != 0 || v + REGMAP_KEEP > newest)
			continue; /* not ours to judge, or among the newest */
		rc = aged(r, &l, i, (int64_t)grace_sec);
	}
	gc_listing_free(&l);
	return rc;
}

int region_gc_plan(struct store *st, uint64_t cur_epoch, unsigned grace_sec, int64_t now,
                   int (*del)(void *arg, const char *name, uint64_t size), void *arg)
{
	struct rgc r = {.st = st, .now = now, .del = del, .arg = arg};
	int rc = holders(&r, cur_epoch, grace_sec);

	if (!rc)
		rc = mounts(&r);
	if (!rc)
		rc = map_versions(&r, grace_sec);
	return rc;
}
