/*
 * regmap.c - the region map: the store's list of its regions (engine.h, "Regions: the
 * map"; docs/REGIONS.md "The region map"; the text in regmapfmt.c).
 *
 * Versions.  regions/<N:20> is version N of the map, created once by put_if_absent and
 * never rewritten; the newest listed version is the map.  A writer adds a region by
 * creating version newest + 1 from the newest: exactly one writer wins each version;
 * a loser (-EEXIST) reads the winner's and tries the next.  So every version is its
 * predecessor plus one change, and no change is lost.
 *
 * Discovery.  No hint object: GC keeps regions/ to the newest REGMAP_KEEP versions plus
 * those younger than its grace, so listing the whole prefix is one short LIST; a map
 * already read lists only what sorts after its own name (region_map_poll()).
 *
 * rids.  Each version carries max_rid, the largest rid ever given; a new region gets
 * max_rid + 1, so a rid is never given twice even if a later version drops its entry.
 *
 * GC.  Versions below the newest REGMAP_KEEP go once older than the grace
 * (engine/maint/gc.c).  A reader that listed a version GC deleted before its GET lists
 * again.  A writer always starts from a version it listed as the newest (never from a
 * version it only remembers), and that one is not deleted while it is among the newest
 * four; only a writer stalled for longer than the grace between its listing and its put
 * could re-create a deleted version, as for manifests.
 *
 * No state is kept here: every function works on the caller's struct region_map.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "format.h"
#include "log.h"
#include "regmap.h"
#include "store.h"

/* How often a load lists again after the listed newest version vanished (GC). */
#define LOAD_TRIES 4

/* Listing callback: remember the highest version seen. */
static int list_max(void *arg, const char *key, uint64_t size)
{
	uint64_t *max = arg, v;

	(void)size;
	if (fmt_parse_regions_name(key, &v) == 0 && v > *max)
		*max = v;
	return 0;
}

/* The newest version after `after` (0: all) into *v (0: none).  One LIST (a page per 1000). */
static int find_newest(struct store *st, uint64_t after, uint64_t *v)
{
	char name[FMT_NAME_MAX];
	int rc;

	*v = 0;
	if (after)
		fmt_regions_name(name, after);
	rc = store_list(st, FMT_REGIONS_PREFIX, after ? name : NULL, 0, list_max, v);
	if (rc)
		log_err("region: listing %s failed: %s", FMT_REGIONS_PREFIX, strerror(-rc));
	return rc;
}

/* Read and decode version v into *m.  -ENOENT (not logged): it is gone. */
static int load_version(struct store *st, uint64_t v, struct region_map *m)
{
	char name[FMT_NAME_MAX];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	fmt_regions_name(name, v);
	rc = store_get(st, name, 0, STORE_TO_END, &buf, &len);
	if (rc) {
		if (rc != -ENOENT)
			log_err("region: get %s failed: %s", name, strerror(-rc));
		return rc;
	}
	rc = regmap_parse(name, buf, len, m);
	free(buf);
	return rc;
}

/*
 * The newest map after version `after` (0: any) into *m: 0 and *found = true, 0 and
 * *found = false when there is none, or an error.  A version that vanished between the
 * listing and the GET (GC, after newer ones came) is listed again.
 */
static int load_newest(struct store *st, uint64_t after, struct region_map *m, bool *found)
{
	uint64_t v;
	int rc = 0;

	*found = false;
	for (int i = 0; i < LOAD_TRIES; i++) {
		if ((rc = find_newest(st, after, &v)))
			return rc;
		if (v == 0)
			return 0;
		rc = load_version(st, v, m);
		if (rc != -ENOENT) {
			*found = rc == 0;
			return rc;
		}
	}
	log_err("region: the newest region map vanished %d times while being read", LOAD_TRIES);
	return rc;
}

int region_map_load(struct store *st, struct region_map *m)
{
	struct region_map tmp = {0};
	bool found;
	int rc = load_newest(st, 0, &tmp, &found);

	if (rc == 0)
		*m = tmp;
	return rc;
}

int region_map_poll(struct store *st, struct region_map *m)
{
	struct region_map tmp = {0};
	bool found;
	int rc = load_newest(st, m->version, &tmp, &found);

	if (rc || !found)
		return rc;
	region_map_free(m);
	*m = tmp;
	return 1;
}

const struct region_entry *region_map_find(const struct region_map *m, uint32_t rid)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) { /* v is sorted by rid */
		size_t mid = lo + (hi - lo) / 2;
		if (m->v[mid].rid == rid)
			return &m->v[mid];
		if (m->v[mid].rid < rid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

const struct region_entry *region_map_find_root(const struct region_map *m, uint64_t parent_ino,
                                                const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (m->v[i].parent_ino == parent_ino && !strcmp(m->v[i].name, name))
			return &m->v[i];
	return NULL;
}

/* Write version m->version + 1: m plus e (rid max_rid + 1).  0, -EEXIST (lost), errors. */
static int put_next(struct store *st, const struct region_map *m, const struct region_entry *e,
                    struct region_map *out)
{
	struct region_map next = {.version = m->version + 1, .max_rid = e->rid, .n = m->n + 1};
	char name[FMT_NAME_MAX], *txt = NULL;
	size_t len = 0;
	int rc;

	next.v = malloc(next.n * sizeof(*next.v));
	if (!next.v)
		return -ENOMEM;
	if (m->n)
		memcpy(next.v, m->v, m->n * sizeof(*m->v));
	next.v[m->n] = *e; /* its rid is above every other: the order stays */
	rc = regmap_format(&next, &txt, &len);
	if (rc)
		goto out;
	fmt_regions_name(name, next.version);
	rc = store_put_if_absent(st, name, txt, len);
	if (rc && rc != -EEXIST)
		log_err("region: put %s failed: %s", name, strerror(-rc));
out:
	free(txt);
	if (rc) {
		region_map_free(&next);
		return rc;
	}
	*out = next;
	return 0;
}

int region_map_add(struct store *st, const struct region_entry *want, struct region_map *m,
                   uint32_t *rid)
{
	struct region_entry e = *want;
	struct region_map next;
	int rc;

	e.rid = 1; /* stand-ins, to check the rest */
	e.root_ino = REGION_ROOT_INO(1);
	if (e.since == 0)
		e.since = (int64_t)time(NULL);
	if (!regmap_entry_valid(&e))
		return -EINVAL;
	for (int i = 0; i < REGMAP_ADD_TRIES; i++) {
		rc = region_map_poll(st, m); /* from the newest listed: one LIST when m is it */
		if (rc < 0)
			return rc;
		if (region_map_find_root(m, e.parent_ino, e.name))
			return -EEXIST;
		if (m->max_rid >= REGION_RID_MAX)
			return -ENOSPC;
		e.rid = m->max_rid + 1;
		e.root_ino = REGION_ROOT_INO(e.rid);
		rc = put_next(st, m, &e, &next);
		if (rc == 0) {
			region_map_free(m);
			*m = next;
			if (rid)
				*rid = e.rid;
			log_info("region: region %" PRIu32 " added (map version %" PRIu64 ")",
			         e.rid, m->version);
			return 0;
		}
		if (rc != -EEXIST)
			return rc;
	}
	log_err("region: adding a region lost %d races for the next map version", REGMAP_ADD_TRIES);
	return -EAGAIN;
}
