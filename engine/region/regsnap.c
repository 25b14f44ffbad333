/*
 * regsnap.c - snapshots of a store with regions: one consistent cut of every region
 * (engine.h, "Regions: snapshots"; docs/SNAPSHOTS.md "Regions").
 *
 * A snapshot NAME of a store with regions is one snapshot object per region, each in its
 * region's own store view: snap/NAME for region 0, r/<rid>/snap/NAME for region rid, all
 * of the format of docs/SNAPSHOTS.md, so that each region's writer GC, which sees only its
 * view, honours its region's part, and a region's engine opens at it as any engine does.
 * Region 0's object is written last: it is the commit point.  A snapshot exists (list,
 * mount) when region 0's object does; a region without its object in a snapshot that
 * exists had no state yet, or was made after it.
 *
 * Why any set of per-region positions is a consistent cut: every operation the
 * filesystem allows changes one region (fs/region.c refuses the others), so no state of
 * one region depends on a state of another, except through region create, which writes
 * the region (its root) before the parent's entry naming it.  The order of the pins keeps
 * that too.  Region 0 is pinned first, then the regions of the map by rid ascending (a map
 * read lists them so, and a later read only adds larger rids), and the map is read again
 * until it lists nothing unpinned.  A region's parent region existed when it was made, so
 * its rid is smaller: every region is pinned after its parent.  If the parent's part holds
 * the entry, the entry was durable before that pin, so the region was in the map and its
 * root durable before it too; the last map read, after every pin, lists the region (it
 * is pinned), and its pin, after the parent's, holds the root.  The other way round (a
 * region pinned whose entry its parent's pin does not hold yet) the region is there and
 * nothing names it: the mount never meets its inode numbers.
 *
 * No state is kept: any thread may call these.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "log.h"
#include "regmap.h"
#include "snapshot.h"
#include "store.h"

/* One region's part of a snapshot being made or read. */
struct part {
	uint32_t rid;             /* the region (> 0) */
	struct store *view;       /* r/<rid>/ (owned) */
	struct engine_snapshot s; /* what is pinned in it */
	bool pinned;              /* s holds a state (false: the region has none yet) */
};

/* The regions of a snapshot besides region 0. */
struct parts {
	struct part *v; /* by the order they were met (malloc()ed) */
	size_t n, cap;
};

static void parts_free(struct parts *ps)
{
	for (size_t i = 0; i < ps->n; i++)
		store_close(ps->v[i].view);
	free(ps->v);
	memset(ps, 0, sizeof(*ps));
}

static bool parts_have(const struct parts *ps, uint32_t rid)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->v[i].rid == rid)
			return true;
	return false;
}

/* Add region rid with its view to ps.  0 or -errno. */
static int parts_add(struct parts *ps, struct store *st, uint32_t rid)
{
	char prefix[FMT_REGION_PREFIX_MAX];
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? 2 * ps->cap : 8;
		struct part *v = realloc(ps->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ps->v = v;
		ps->cap = cap;
	}
	struct part *p = &ps->v[ps->n];
	memset(p, 0, sizeof(*p));
	p->rid = rid;
	fmt_region_prefix(prefix, rid);
	int rc = store_open_sub(st, prefix, &p->view);
	if (rc == 0)
		ps->n++;
	return rc;
}

/*
 * Add every region of st's newest map that ps lacks; with pin, each one's state is pinned
 * as it is added.  *added: how many.  0 or -errno.
 */
static int parts_from_map(struct parts *ps, struct store *st, const char *name, bool pin,
                          size_t *added)
{
	struct region_map m = {0};
	int rc = region_map_load(st, &m);

	*added = 0;
	for (size_t i = 0; !rc && i < m.n; i++) {
		if (parts_have(ps, m.v[i].rid))
			continue;
		rc = parts_add(ps, st, m.v[i].rid);
		if (rc || !pin)
			continue;
		struct part *p = &ps->v[ps->n - 1];
		rc = snapshot_pin(p->view, name, &p->s);
		p->pinned = rc == 0;
		if (rc == -ENOENT)
			rc = 0; /* no manifest: a create that stopped before its format */
		(*added)++;
	}
	region_map_free(&m);
	return rc;
}

/* Delete name's object in every region of ps (a missing one is fine). */
static void parts_delete(struct parts *ps, const char *name)
{
	for (size_t i = 0; i < ps->n; i++)
		engine_snapshot_delete(ps->v[i].view, name);
}

/*
 * One attempt: pin every region, write the regions' objects, check them, then region 0's.
 * 0 (done), 1 (GC took part of a pinned state: try again, nothing left behind), or -errno.
 */
static int create_once(struct store *st, const char *name, struct engine_snapshot *s0,
                       size_t *nregions)
{
	struct parts ps = {0};
	size_t added = 1;
	bool wrote0 = false; /* region 0's object is ours */
	int rc = snapshot_pin(st, name, s0);

	/* the map read after every pin so far, until it lists no region not pinned */
	while (!rc && added)
		rc = parts_from_map(&ps, st, name, true, &added);
	*nregions = 0;
	for (size_t i = 0; !rc && i < ps.n; i++) {
		if (!ps.v[i].pinned)
			continue;
		/* overwriting: a part of a create that stopped before region 0's object */
		rc = snapshot_put(ps.v[i].view, &ps.v[i].s, false);
		(*nregions)++;
	}
	for (size_t i = 0; !rc && i < ps.n; i++) {
		if (ps.v[i].pinned && (rc = snapshot_pinned(ps.v[i].view, &ps.v[i].s)) == 0) {
			log_warn("snapshot %s: GC removed part of region %" PRIu32 "'s state "
			         "meanwhile; taking it again",
			         name, ps.v[i].rid);
			rc = 1;
		} else if (rc == 1) {
			rc = 0;
		}
	}
	if (rc == 0) {
		rc = snapshot_put(st, s0, true);
		wrote0 = rc == 0;
	}
	if (rc == -EEXIST) {
		/* another create of that name won region 0's object: its parts are kept */
		parts_free(&ps);
		return rc;
	}
	if (rc == 0 && (rc = snapshot_pinned(st, s0)) == 0) {
		log_warn("snapshot %s: GC removed part of region 0's state meanwhile; taking it "
		         "again",
		         name);
		rc = 1;
	} else if (rc == 1) {
		rc = 0;
	}
	if (rc) {
		if (wrote0)
			engine_snapshot_delete(st, name);
		parts_delete(&ps, name);
	}
	parts_free(&ps);
	return rc;
}

int region_snapshot_create(struct store *st, const char *name, struct engine_snapshot *out,
                           size_t *nregions)
{
	struct engine_snapshot s0, got;
	size_t n = 0;
	int rc = engine_snapshot_get(st, name, &got);

	if (rc == 0)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	for (int attempt = 0; attempt < SNAP_CREATE_TRIES; attempt++) {
		rc = create_once(st, name, &s0, &n);
		if (rc == 1)
			continue;
		if (rc == 0) {
			log_info("snapshot %s: region 0 at manifest %" PRIu64 ", WAL %" PRIu64
			         "..%" PRIu64 ", and %zu regions besides",
			         name, s0.manifest, s0.wal_from, s0.wal_end, n);
			if (out)
				*out = s0;
			if (nregions)
				*nregions = n;
		}
		return rc;
	}
	return -EAGAIN;
}

int region_snapshot_delete(struct store *st, const char *name)
{
	struct parts ps = {0};
	size_t added;
	int rc = parts_from_map(&ps, st, name, false, &added);
	bool found = false;

	/* the regions' objects first: a delete that stops leaves the snapshot listed */
	for (size_t i = 0; !rc && i < ps.n; i++) {
		int r = engine_snapshot_delete(ps.v[i].view, name);
		found |= r == 0;
		if (r && r != -ENOENT)
			rc = r;
	}
	if (!rc) {
		rc = engine_snapshot_delete(st, name);
		if (rc == -ENOENT && found)
			rc = 0;
	}
	parts_free(&ps);
	return rc;
}

/* engine_snapshot_list()'s callback: region 0's object, then each region's of that name. */
struct list_arg {
	struct parts *ps;
	int (*fn)(void *arg, uint32_t rid, const struct engine_snapshot *s);
	void *arg;
};

static int list_one(void *arg, const struct engine_snapshot *s)
{
	struct list_arg *la = arg;
	int rc = la->fn(la->arg, 0, s);

	for (size_t i = 0; !rc && i < la->ps->n; i++) {
		struct engine_snapshot rs;
		rc = engine_snapshot_get(la->ps->v[i].view, s->name, &rs);
		if (rc == -ENOENT)
			rc = 0; /* the region had no state then, or was made after */
		else if (rc == 0)
			rc = la->fn(la->arg, la->ps->v[i].rid, &rs);
	}
	return rc;
}

int region_snapshot_list(struct store *st,
                         int (*fn)(void *arg, uint32_t rid, const struct engine_snapshot *s),
                         void *arg)
{
	struct parts ps = {0};
	size_t added;
	int rc = parts_from_map(&ps, st, NULL, false, &added);
	struct list_arg la = {.ps = &ps, .fn = fn, .arg = arg};

	if (!rc)
		rc = engine_snapshot_list(st, list_one, &la);
	parts_free(&ps);
	return rc;
}
