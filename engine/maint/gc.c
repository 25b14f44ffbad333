/*
 * gc.c - garbage collection: decide from the kept manifests and a listing
 * of the store what may go, then delete it (contract in gc.h, protocol in
 * docs/GC.md).
 *
 * Safety argument in brief.  Every object class has one owner of truth:
 * a table is live while a kept manifest lists it, a pack while a table of a
 * kept manifest references it or its group is not yet covered by SSTables,
 * a WAL entry while some kept manifest has not covered it.  Kept manifests
 * include every version a reader may still be using (grace period after it
 * was superseded), so a reader never finds an object of its view missing.
 * Objects no manifest ever listed (an SSTable uploaded but not promoted, a
 * pack of a fenced group) are only deleted once older than the grace
 * period, which is far longer than any upload-to-commit interval; tables of
 * the running writer above its in-flight id are never deleted.  The plan
 * is made completely before anything is deleted, and any read error
 * aborts it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coding.h"
#include "format.h"
#include "gc.h"
#include "grow.h"
#include "log.h"
#include "manifest.h"
#include "gclist.h"
#include "regiongc.h"
#include "snapshot.h"
#include "sst.h"
#include "sst_flush.h"
#include "store.h"

/* Pack references of one SSTable (immutable, so cached by name). */
struct sst_refs {
	char *name;               /* object name (malloc()ed) */
	struct gc_pack_id *packs; /* referenced packs (malloc()ed) */
	uint64_t *bytes;          /* referenced bytes of each */
	size_t n;                 /* entries in packs/bytes */
	bool used;                /* referenced by the current pass */
};

/*
 * A manifest the collector kept or looked at.  Manifests are written once
 * (put-if-absent) and never rewritten, so what was read of one stays true
 * until GC deletes it.
 */
struct man_entry {
	uint64_t version;  /* N of manifest/<N> */
	int64_t mtime;     /* its modification time; 0: not known yet */
	bool loaded;       /* m holds it */
	struct manifest m; /* decoded, when loaded */
};

struct gc {
	struct store *st;           /* borrowed */
	char missing[FMT_NAME_MAX]; /* an object the newest manifest needs that the last
	                               pass found missing ("" if none) */
	struct sst_refs *cache;     /* sorted by name */
	size_t ncache, capcache;
	struct man_entry *mans; /* sorted by version: [oldest kept, newest] of the last pass */
	size_t nmans, capmans;
};

/* A listing: names and sizes under one prefix, in key order. */
/* A reference to a pack while planning; sorted, deduplicated. */
struct pref {
	struct gc_pack_id id;
	uint64_t live; /* bytes referenced by the newest manifest */
	bool listed;   /* found in the pack/ listing */
};

struct prefs {
	struct pref *p;
	size_t n, cap;
};

void gc_opts_default(struct gc_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->grace_sec = 600;
	o->keep_manifests = 4;
	o->repack_below = 0.5;
	o->protect_wal_from = UINT64_MAX;
	o->keep_from_version = UINT64_MAX;
	o->cleanup_uploads = true;
}

void gc_plan_clear(struct gc_plan *p)
{
	for (size_t i = 0; i < p->ndeletes; i++)
		free(p->deletes[i]);
	free(p->deletes);
	free(p->packs);
	free(p->repack);
	memset(p, 0, sizeof(*p));
}

int gc_new(struct store *st, struct gc **out)
{
	struct gc *g = calloc(1, sizeof(*g));

	if (!g)
		return -ENOMEM;
	g->st = st;
	*out = g;
	return 0;
}

static void refs_free(struct sst_refs *r)
{
	free(r->name);
	free(r->packs);
	free(r->bytes);
}

void gc_free(struct gc *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->ncache; i++)
		refs_free(&g->cache[i]);
	free(g->cache);
	for (size_t i = 0; i < g->nmans; i++)
		manifest_clear(&g->mans[i].m);
	free(g->mans);
	free(g);
}

/* ------------------------------------------------------------------ */
/* Names and listings                                                  */
/* ------------------------------------------------------------------ */

/* Parse "<prefix><a:20>-<b:20>" exactly.  Returns true on success. */
static bool parse_pair(const char *name, const char *prefix, uint64_t *a, uint64_t *b)
{
	size_t pl = strlen(prefix);
	uint64_t v[2] = {0, 0};
	const char *p;

	if (strncmp(name, prefix, pl) != 0 || strlen(name) != pl + 41 || name[pl + 20] != '-')
		return false;
	p = name + pl;
	for (int k = 0; k < 2; k++, p++) {
		for (int i = 0; i < 20; i++, p++) {
			if (*p < '0' || *p > '9' || v[k] > (UINT64_MAX - 9) / 10)
				return false;
			v[k] = v[k] * 10 + (uint64_t)(*p - '0');
		}
	}
	*a = v[0];
	*b = v[1];
	return true;
}

/*
 * An object of this age is kept only until it has aged grace seconds:
 * count it as deferred, and remember the first second one comes due.
 */
static void defer(struct gc_plan *p, int64_t now, int64_t age, unsigned grace)
{
	int64_t due = now - age + (int64_t)grace;

	p->n_deferred++;
	if (!p->next_due || due < p->next_due)
		p->next_due = due;
}

/* Add a copy of name to the plan's delete list. */
static int plan_delete(struct gc_plan *p, const char *name, uint64_t size, uint64_t *counter)
{
	char **d = realloc(p->deletes, (p->ndeletes + 1) * sizeof(*d));

	if (!d)
		return -ENOMEM;
	p->deletes = d;
	d[p->ndeletes] = strdup(name);
	if (!d[p->ndeletes])
		return -ENOMEM;
	p->ndeletes++;
	p->delete_bytes += size;
	(*counter)++;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Pack references                                                     */
/* ------------------------------------------------------------------ */

static int id_cmp(const struct gc_pack_id *a, const struct gc_pack_id *b)
{
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch ? -1 : 1;
	if (a->position != b->position)
		return a->position < b->position ? -1 : 1;
	return 0;
}

static int pref_cmp(const void *a, const void *b)
{
	return id_cmp(&((const struct pref *)a)->id, &((const struct pref *)b)->id);
}

static int prefs_add(struct prefs *s, const struct gc_pack_id *id, uint64_t live)
{
	if (MW_GROW(s->p, s->cap, s->n + 1, 64))
		return -ENOMEM;
	s->p[s->n].id = *id;
	s->p[s->n].live = live;
	s->p[s->n].listed = false;
	s->n++;
	return 0;
}

/* Sort and merge duplicates (summing live bytes). */
static void prefs_finish(struct prefs *s)
{
	size_t w = 0;

	if (!s->n)
		return;
	qsort(s->p, s->n, sizeof(*s->p), pref_cmp);
	for (size_t i = 1; i < s->n; i++) {
		if (id_cmp(&s->p[i].id, &s->p[w].id) == 0)
			s->p[w].live += s->p[i].live;
		else
			s->p[++w] = s->p[i];
	}
	s->n = w + 1;
}

static struct pref *prefs_find(const struct prefs *s, const struct gc_pack_id *id)
{
	struct pref key = {.id = *id};

	return s->n ? bsearch(&key, s->p, s->n, sizeof(*s->p), pref_cmp) : NULL;
}

/* Cache slot of name: index where it is or would be inserted. */
static size_t cache_pos(const struct gc *g, const char *name, bool *found)
{
	size_t lo = 0, hi = g->ncache;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(g->cache[mid].name, name);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Read the pack references of table t (from its properties) into r. */
static int read_refs(struct gc *g, const struct manifest_sst *t, struct sst_refs *r)
{
	struct sst_reader *rd = NULL;
	const struct sst_props *p;
	int rc = sst_reader_open(g->st, t->name, t->size, NULL, &rd);

	memset(r, 0, sizeof(*r));
	if (rc) {
		log_err("gc: cannot read live table %s: %s; no pack is collected", t->name,
		        strerror(-rc));
		return rc;
	}
	p = sst_reader_props(rd);
	r->name = strdup(t->name);
	r->packs = calloc(p->npacks ? p->npacks : 1, sizeof(*r->packs));
	r->bytes = calloc(p->npacks ? p->npacks : 1, sizeof(*r->bytes));
	if (!r->name || !r->packs || !r->bytes) {
		rc = -ENOMEM;
		goto fail;
	}
	for (size_t i = 0; i < p->npacks; i++) {
		if (p->packs[i].idlen != 16) {
			log_err("gc: %s references a pack id of %u bytes", t->name,
			        p->packs[i].idlen);
			rc = -EUCLEAN;
			goto fail;
		}
		r->packs[i].epoch = get_be64(p->packs[i].id);
		r->packs[i].position = get_be64(p->packs[i].id + 8);
		r->bytes[i] = p->packs[i].bytes;
	}
	r->n = p->npacks;
	sst_reader_unref(rd);
	return 0;
fail:
	sst_reader_unref(rd);
	refs_free(r);
	memset(r, 0, sizeof(*r));
	return rc;
}

/* The cached references of t, reading them on a miss. */
static int get_refs(struct gc *g, const struct manifest_sst *t, struct sst_refs **out)
{
	bool found;
	size_t pos = cache_pos(g, t->name, &found);
	struct sst_refs r;
	int rc;

	if (!found) {
		rc = read_refs(g, t, &r);
		if (rc)
			return rc;
		if (MW_GROW(g->cache, g->capcache, g->ncache + 1, 32)) {
			refs_free(&r);
			return -ENOMEM;
		}
		memmove(&g->cache[pos + 1], &g->cache[pos], (g->ncache - pos) * sizeof(*g->cache));
		g->cache[pos] = r;
		g->ncache++;
	}
	g->cache[pos].used = true;
	*out = &g->cache[pos];
	return 0;
}

/* Forget cached tables no kept manifest lists any more. */
static void cache_prune(struct gc *g)
{
	size_t w = 0;

	for (size_t i = 0; i < g->ncache; i++) {
		if (g->cache[i].used) {
			g->cache[i].used = false;
			g->cache[w++] = g->cache[i];
		} else {
			refs_free(&g->cache[i]);
		}
	}
	g->ncache = w;
}

/* ------------------------------------------------------------------ */
/* Planning                                                            */
/* ------------------------------------------------------------------ */

/* A kept manifest younger than the WAL delay (wal_floor_of()). */
struct young {
	uint64_t covered; /* its wal_covered (at most protect_wal_from) */
	int64_t age;      /* seconds */
};

/* The state of one planning pass. */
struct pass {
	struct gc *g;
	const struct gc_opts *o;
	int64_t now;
	struct manifest *kept; /* kept manifests, newest first */
	size_t nkept;
	char **live_ssts; /* names listed by kept manifests, sorted */
	size_t nlive_ssts;
	struct prefs refs;   /* packs referenced by kept tables */
	uint64_t floor;      /* WAL floor */
	uint64_t wal_floor;  /* WAL entries (not fences) below it go (wal_floor_of()) */
	struct young *young; /* kept manifests that cover more but are too young, oldest last */
	size_t nyoung;
	struct manifest *pinned; /* manifests only snapshots keep (docs/SNAPSHOTS.md) */
	size_t npinned;
	struct engine_snapshot *snaps; /* every snapshot: its manifest and WAL range */
	size_t nsnaps;
};

/* Is WAL position (or the pack of its group) p inside a snapshot's range? */
static bool snap_pins_pos(const struct pass *ps, uint64_t p)
{
	for (size_t i = 0; i < ps->nsnaps; i++)
		if (p >= ps->snaps[i].wal_from && p < ps->snaps[i].wal_end)
			return true;
	return false;
}

static bool snap_pins_manifest(const struct pass *ps, uint64_t v)
{
	for (size_t i = 0; i < ps->nsnaps; i++)
		if (ps->snaps[i].manifest == v)
			return true;
	return false;
}

static int snap_cb(void *arg, const struct engine_snapshot *sn)
{
	struct pass *ps = arg;
	struct engine_snapshot *v = realloc(ps->snaps, (ps->nsnaps + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	ps->snaps = v;
	ps->snaps[ps->nsnaps++] = *sn;
	return 0;
}

/*
 * Read every snapshot and load the manifests they pin that the kept history does not
 * hold.  An unreadable snapshot fails the plan (never delete on partial knowledge); a
 * snapshot whose manifest is gone is logged and keeps its WAL range only.
 */
static int load_snapshots(struct pass *ps, uint64_t oldest_kept)
{
	int rc = engine_snapshot_list(ps->g->st, snap_cb, ps);

	if (rc) {
		log_err("gc: cannot read the snapshots: %s; nothing is collected", strerror(-rc));
		return rc;
	}
	for (size_t i = 0; i < ps->nsnaps; i++) {
		uint64_t v = ps->snaps[i].manifest;
		bool have = v >= oldest_kept;
		for (size_t k = 0; k < ps->npinned && !have; k++)
			have = ps->pinned[k].version == v;
		if (have)
			continue;
		struct manifest *m = realloc(ps->pinned, (ps->npinned + 1) * sizeof(*m));
		if (!m)
			return -ENOMEM;
		ps->pinned = m;
		rc = manifest_load(ps->g->st, v, &ps->pinned[ps->npinned]);
		if (rc == -ENOENT) {
			log_err("gc: snapshot %s: manifest %" PRIu64 " is gone (the snapshot is "
			        "damaged)",
			        ps->snaps[i].name, v);
			continue;
		}
		if (rc) {
			log_err("gc: snapshot %s: cannot load manifest %" PRIu64 ": %s; nothing is "
			        "collected",
			        ps->snaps[i].name, v, strerror(-rc));
			return rc;
		}
		ps->npinned++;
	}
	return 0;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The cache entry of manifest v, made (empty) when missing.  NULL: no memory. */
static struct man_entry *man_entry(struct gc *g, uint64_t v)
{
	size_t lo = 0, hi = g->nmans;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (g->mans[mid].version == v)
			return &g->mans[mid];
		if (g->mans[mid].version < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (MW_GROW(g->mans, g->capmans, g->nmans + 1, 16))
		return NULL;
	memmove(&g->mans[lo + 1], &g->mans[lo], (g->nmans - lo) * sizeof(*g->mans));
	memset(&g->mans[lo], 0, sizeof(*g->mans));
	g->mans[lo].version = v;
	g->nmans++;
	return &g->mans[lo];
}

/* Age of manifest v as gc_object_age(); one HEAD the first time only. */
static int manifest_age(struct pass *ps, uint64_t v, int64_t *age)
{
	struct man_entry *me = man_entry(ps->g, v);
	char name[FMT_NAME_MAX];
	int rc;

	if (!me)
		return -ENOMEM;
	if (!me->mtime) {
		fmt_manifest_name(name, v);
		rc = gc_object_mtime(ps->g->st, name, &me->mtime);
		if (rc)
			return rc;
	}
	*age = gc_age_of(me->mtime, ps->now);
	return 0;
}

/* Manifest v into *m (a copy: manifest_clear() it); one GET the first time only. */
static int manifest_get(struct pass *ps, uint64_t v, struct manifest *m)
{
	struct man_entry *me = man_entry(ps->g, v);
	int rc;

	if (!me)
		return -ENOMEM;
	if (!me->loaded) {
		rc = manifest_load(ps->g->st, v, &me->m);
		if (rc)
			return rc;
		me->loaded = true;
	}
	return manifest_copy(m, &me->m);
}

/* Forget cached manifests older than the oldest kept version (GC deletes them). */
static void man_prune(struct gc *g, uint64_t oldest_kept)
{
	size_t n = 0;

	while (n < g->nmans && g->mans[n].version < oldest_kept)
		manifest_clear(&g->mans[n++].m);
	memmove(g->mans, g->mans + n, (g->nmans - n) * sizeof(*g->mans));
	g->nmans -= n;
}

/* Decide and load the kept manifests (newest first). */
static int load_kept(struct pass *ps, uint64_t latest, struct gc_plan *plan)
{
	unsigned keep = ps->o->keep_manifests ? ps->o->keep_manifests : 1;
	int64_t newest_age = 0;
	int rc = 0;

	/*
	 * The newest keep versions are kept by count only while the newest is
	 * younger than the grace: once it has aged, every successor of an older
	 * version has too, and the time rule alone decides.  Without this an
	 * idle store kept the tables (and packs) of its last keep - 1
	 * superseded versions for ever (an emptied filesystem never came back
	 * near zero).
	 */
	if (keep > 1 && latest > 1) {
		rc = manifest_age(ps, latest, &newest_age);
		if (rc)
			return rc;
		if (newest_age >= (int64_t)ps->o->grace_sec)
			keep = 1;
	}
	ps->kept = calloc(1, sizeof(*ps->kept));
	if (!ps->kept)
		return -ENOMEM;
	for (uint64_t v = latest; v >= 1; v--) {
		struct manifest *k;
		bool deferred = false;
		int64_t age = newest_age; /* kept by count: goes once the newest has aged */

		if (v < latest && latest - v < keep)
			deferred = true;
		if (latest - v >= keep && v < ps->o->keep_from_version) {
			/* v stays while its successor is younger than the grace period */
			rc = manifest_age(ps, v + 1, &age);
			if (rc)
				return rc;
			if (age >= (int64_t)ps->o->grace_sec)
				break;
			deferred = true; /* v goes once its successor has aged */
		}
		k = realloc(ps->kept, (ps->nkept + 1) * sizeof(*k));
		if (!k)
			return -ENOMEM;
		ps->kept = k;
		rc = manifest_get(ps, v, &ps->kept[ps->nkept]);
		if (rc == -ENOENT && v < latest)
			return 0; /* an earlier pass deleted it: history starts after */
		if (rc) {
			log_err("gc: cannot load manifest %" PRIu64 ": %s; nothing is collected", v,
			        strerror(-rc));
			return rc;
		}
		ps->nkept++;
		if (deferred)
			defer(plan, ps->now, age, ps->o->grace_sec);
	}
	return 0;
}

/* Count m's tables as live and their packs as referenced (with their bytes when live). */
static int add_tables(struct pass *ps, const struct manifest *m, bool live)
{
	for (size_t s = 0; s < m->nssts; s++) {
		struct sst_refs *r;
		int rc;

		ps->live_ssts[ps->nlive_ssts++] = m->ssts[s].name; /* borrowed */
		rc = get_refs(ps->g, &m->ssts[s], &r);
		if (rc == -ENOENT &&
		    live) /* the newest manifest's table is gone: the store lost it */
			snprintf(ps->g->missing, sizeof(ps->g->missing), "%s", m->ssts[s].name);
		if (rc)
			return rc;
		for (size_t k = 0; k < r->n; k++) {
			rc = prefs_add(&ps->refs, &r->packs[k], live ? r->bytes[k] : 0);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/*
 * The floor of WAL entries that are not fences (docs/GC.md, "Deletion
 * rules"): the covered position of the newest kept manifest that is at least
 * a tenth of the grace old (the writers' epoch lease), so that an entry goes
 * that long after the first manifest that covered it, not a grace after the
 * last one that did not.  What still reads such an entry: a reader that
 * loaded an older manifest (a follower, a read-only open) and replays from
 * its covered position; one slower than that finds the entry gone and jumps
 * to the newest manifest (docs/FOLLOWERS.md).  Fences stay until the floor of
 * every kept manifest passes them: the epoch lease's argument needs them for
 * the whole grace (docs/WAL.md, "Fencing and GC").
 */
static int wal_floor_of(struct pass *ps)
{
	int64_t delay = (int64_t)(ps->o->grace_sec / 10);

	ps->wal_floor = ps->floor;
	ps->young = calloc(ps->nkept ? ps->nkept : 1, sizeof(*ps->young));
	if (!ps->young)
		return -ENOMEM;
	for (size_t i = 0; i < ps->nkept; i++) {
		uint64_t c = ps->kept[i].wal_covered;
		int64_t age;
		int rc;

		if (c > ps->o->protect_wal_from)
			c = ps->o->protect_wal_from;
		if (c <= ps->wal_floor)
			break;
		if ((rc = manifest_age(ps, ps->kept[i].version, &age)))
			return rc;
		if (age >= delay) {
			ps->wal_floor = c;
			break;
		}
		ps->young[ps->nyoung++] = (struct young){c, age};
	}
	return 0;
}

/*
 * A covered entry at p that is not a fence and stays in this pass goes once
 * the oldest young manifest covering it has aged the delay: defer it.
 */
static void defer_wal(struct pass *ps, struct gc_plan *plan, uint64_t p)
{
	for (size_t i = ps->nyoung; i-- > 0;)
		if (ps->young[i].covered > p) {
			defer(plan, ps->now, ps->young[i].age, ps->o->grace_sec / 10);
			return;
		}
}

/* Collect live tables and pack references of the kept manifests. */
static int collect_refs(struct pass *ps)
{
	size_t total = 0;
	int rc;

	for (size_t i = 0; i < ps->nkept; i++)
		total += ps->kept[i].nssts;
	for (size_t i = 0; i < ps->npinned; i++)
		total += ps->pinned[i].nssts;
	ps->live_ssts = calloc(total ? total : 1, sizeof(*ps->live_ssts));
	if (!ps->live_ssts)
		return -ENOMEM;
	ps->floor = ps->o->protect_wal_from;
	for (size_t i = 0; i < ps->nkept; i++) {
		if (ps->kept[i].wal_covered < ps->floor)
			ps->floor = ps->kept[i].wal_covered;
		/* live bytes count for the newest manifest only */
		if ((rc = add_tables(ps, &ps->kept[i], i == 0)))
			return rc;
	}
	if ((rc = wal_floor_of(ps)))
		return rc;
	/* tables of manifests only snapshots pin: live, but no part of the newest state */
	for (size_t i = 0; i < ps->npinned; i++)
		if ((rc = add_tables(ps, &ps->pinned[i], false)))
			return rc;
	for (size_t i = 0; i < ps->o->nlive_packs; i++) {
		rc = prefs_add(&ps->refs, &ps->o->live_packs[i], 0);
		if (rc)
			return rc;
	}
	prefs_finish(&ps->refs);
	qsort(ps->live_ssts, ps->nlive_ssts, sizeof(char *), str_cmp);
	return 0;
}

static int plan_manifests(struct pass *ps, struct gc_plan *plan)
{
	struct gc_listing l = {0};
	int rc = gc_list_prefix(ps->g->st, FMT_MANIFEST_PREFIX, &l);

	for (size_t i = 0; !rc && i < l.n; i++) {
		uint64_t v;

		if (fmt_parse_manifest_name(l.names[i], &v) == 0 && v < plan->oldest_kept &&
		    !snap_pins_manifest(ps, v))
			rc = plan_delete(plan, l.names[i], l.sizes[i], &plan->n_manifest);
	}
	gc_listing_free(&l);
	return rc;
}

static int plan_wal(struct pass *ps, struct gc_plan *plan)
{
	struct gc_listing l = {0};
	int rc = gc_list_prefix(ps->g->st, FMT_WAL_PREFIX, &l);

	for (size_t i = 0; !rc && i < l.n; i++) {
		uint64_t pos;

		if (fmt_parse_wal_name(l.names[i], &pos) != 0 || snap_pins_pos(ps, pos))
			continue;
		/* below every kept manifest's covered position, or a covered non-fence */
		if (pos < ps->floor || (pos < ps->wal_floor && l.sizes[i] > WAL_HEADER_SIZE))
			rc = plan_delete(plan, l.names[i], l.sizes[i], &plan->n_wal);
		else if (l.sizes[i] > WAL_HEADER_SIZE)
			defer_wal(ps, plan, pos);
	}
	gc_listing_free(&l);
	return rc;
}

/*
 * May SSTable id of epoch be in flight (uploaded, not yet committed)?  Its
 * table, and the pack of blobs its flush promoted, must then stay.
 */
static bool sst_in_flight(const struct pass *ps, uint64_t epoch, uint64_t id)
{
	uint64_t pe = ps->o->protect_epoch, pf = ps->o->protect_sst_from;

	if (pe == 0 && pf == 0) {
		pe = ps->kept[0].epoch;
		pf = ps->kept[0].next_sst;
	}
	return epoch == pe && id >= pf;
}

static int plan_ssts(struct pass *ps, struct gc_plan *plan)
{
	struct gc_listing l = {0};
	int rc;

	rc = gc_list_prefix(ps->g->st, SST_PREFIX, &l);
	for (size_t i = 0; !rc && i < l.n; i++) {
		const char *name = l.names[i];
		uint64_t epoch, id;
		int64_t age;

		if (!parse_pair(name, SST_PREFIX, &epoch, &id))
			continue; /* not ours to judge */
		if (bsearch(&name, ps->live_ssts, ps->nlive_ssts, sizeof(char *), str_cmp))
			continue;
		if (sst_in_flight(ps, epoch, id))
			continue; /* possibly in flight: never before its commit */
		rc = gc_object_age(ps->g->st, name, ps->now, &age);
		if (rc == -ENOENT) {
			rc = 0;
			continue;
		}
		if (!rc && age >= (int64_t)ps->o->grace_sec)
			rc = plan_delete(plan, name, l.sizes[i], &plan->n_sst);
		else if (!rc)
			defer(plan, ps->now, age, ps->o->grace_sec);
	}
	gc_listing_free(&l);
	return rc;
}

static int plan_packs(struct pass *ps, struct gc_plan *plan)
{
	const struct manifest *latest = &ps->kept[0];
	struct gc_listing l = {0};
	int rc = gc_list_prefix(ps->g->st, FMT_PACK_PREFIX, &l);

	if (!rc && l.n) {
		plan->packs = calloc(l.n, sizeof(*plan->packs));
		plan->repack = calloc(l.n, sizeof(*plan->repack));
		if (!plan->packs || !plan->repack)
			rc = -ENOMEM;
	}
	for (size_t i = 0; !rc && i < l.n; i++) {
		const char *name = l.names[i];
		struct gc_pack_stat *s;
		struct gc_pack_id id;
		struct pref *r;
		int64_t age;
		bool unflushed, flushed;

		if (!parse_pair(name, FMT_PACK_PREFIX, &id.epoch, &id.position))
			continue;
		r = prefs_find(&ps->refs, &id);
		/*
		 * a snapshot's WAL range pins the packs of its groups as the floor
		 * does; a flush's pack is live only through the tables that refer
		 * to it
		 */
		flushed = id.position & PACK_POS_FLUSH;
		if (flushed)
			unflushed = sst_in_flight(ps, id.epoch, id.position & ~PACK_POS_FLUSH);
		else
			unflushed = id.position >= ps->floor || snap_pins_pos(ps, id.position);
		for (size_t k = 0; !unflushed && k < ps->o->nlive_packs; k++)
			unflushed = id_cmp(&ps->o->live_packs[k], &id) == 0;
		if (!r && !unflushed) {
			rc = gc_object_age(ps->g->st, name, ps->now, &age);
			if (rc == -ENOENT) {
				rc = 0;
				continue;
			}
			if (rc)
				break;
			if (age >= (int64_t)ps->o->grace_sec) {
				rc = plan_delete(plan, name, l.sizes[i], &plan->n_pack);
				continue;
			}
			defer(plan, ps->now, age, ps->o->grace_sec);
		}
		s = &plan->packs[plan->npacks++];
		s->id = id;
		if (r)
			r->listed = true;
		s->size = l.sizes[i];
		s->data_bytes = s->size > PACK_HEADER_SIZE + PACK_TRAILER_SIZE
		                    ? s->size - PACK_HEADER_SIZE - PACK_TRAILER_SIZE
		                    : 0;
		s->live_bytes = r ? r->live : 0;
		if (s->live_bytes > s->data_bytes)
			s->live_bytes = s->data_bytes;
		s->unflushed = unflushed;
		plan->pack_bytes += s->size;
		plan->live_pack_bytes += s->live_bytes;
		/* repack: covered by SSTables, partly live, mostly dead */
		if (!unflushed && (flushed || id.position < latest->wal_covered) &&
		    s->live_bytes > 0 &&
		    (double)s->live_bytes < ps->o->repack_below * (double)s->data_bytes)
			plan->repack[plan->nrepack++] = id;
	}
	gc_listing_free(&l);
	/* a pack the newest manifest's tables use and the listing lacks: the store lost it */
	for (size_t i = 0; !rc && i < ps->refs.n; i++)
		if (ps->refs.p[i].live && !ps->refs.p[i].listed) {
			fmt_pack_name(ps->g->missing, ps->refs.p[i].id.epoch,
			              ps->refs.p[i].id.position);
			log_err("gc: %s is missing, though the newest manifest's tables use it; "
			        "nothing is collected",
			        ps->g->missing);
			rc = -ENOENT;
		}
	return rc;
}

const char *gc_missing(const struct gc *g)
{
	return g->missing[0] ? g->missing : NULL;
}

/* region_gc_plan()'s callback: a region object to delete (docs/REGIONS.md). */
static int plan_region(void *arg, const char *name, uint64_t size)
{
	struct gc_plan *plan = arg;
	return plan_delete(plan, name, size, &plan->n_region);
}

int gc_plan_make(struct gc *g, const struct gc_opts *o, struct gc_plan *out)
{
	struct pass ps = {.g = g, .o = o};
	struct gc_plan plan = {0};
	uint64_t latest;
	int rc;

	ps.now = o->now ? o->now : (int64_t)time(NULL);
	g->missing[0] = '\0';
	rc = manifest_find_latest(g->st, &latest);
	if (rc)
		return rc;
	if (latest == 0) {
		*out = plan; /* an empty store, or not ours: touch nothing */
		return 0;
	}
	rc = load_kept(&ps, latest, &plan);
	if (rc)
		goto out;
	if (o->protect_epoch && ps.kept[0].epoch > o->protect_epoch) {
		/* a newer writer owns the store: a fenced writer deletes nothing */
		log_warn("gc: the store belongs to epoch %" PRIu64 ", not %" PRIu64
		         "; nothing deleted",
		         ps.kept[0].epoch, o->protect_epoch);
		rc = -ESTALE;
		goto out;
	}
	plan.latest = latest;
	plan.oldest_kept = latest - (ps.nkept - 1);
	rc = load_snapshots(&ps, plan.oldest_kept);
	if (rc)
		goto out;
	rc = collect_refs(&ps);
	if (rc)
		goto out;
	plan.wal_floor = ps.floor;
	plan.wal_entry_floor = ps.wal_floor;
	if ((rc = plan_manifests(&ps, &plan)) || (rc = plan_wal(&ps, &plan)) ||
	    (rc = plan_ssts(&ps, &plan)) || (rc = plan_packs(&ps, &plan)) ||
	    (rc =
	         region_gc_plan(g->st, ps.kept[0].epoch, o->grace_sec, ps.now, plan_region, &plan)))
		goto out;
	cache_prune(g);
	man_prune(g, plan.oldest_kept);
	log_debug("gc: plan: manifests %" PRIu64 "..%" PRIu64 " kept, WAL floor %" PRIu64
	          ", delete %zu objects (%" PRIu64 " bytes), %zu packs stay, %zu to repack",
	          plan.oldest_kept, plan.latest, plan.wal_floor, plan.ndeletes, plan.delete_bytes,
	          plan.npacks, plan.nrepack);
out:
	for (size_t i = 0; i < ps.nkept; i++)
		manifest_clear(&ps.kept[i]);
	free(ps.kept);
	free(ps.young);
	for (size_t i = 0; i < ps.npinned; i++)
		manifest_clear(&ps.pinned[i]);
	free(ps.pinned);
	free(ps.snaps);
	free(ps.live_ssts);
	free(ps.refs.p);
	if (rc) {
		gc_plan_clear(&plan);
		return rc;
	}
	*out = plan;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Execution                                                           */
/* ------------------------------------------------------------------ */

int gc_plan_execute(struct gc *g, const struct gc_opts *o, const struct gc_plan *plan,
                    uint64_t *deleted)
{
	int rc, first = 0;
	uint64_t done = 0;

	/* the plan lists manifests, WAL, tables, packs in that order */
	for (size_t i = 0; i < plan->ndeletes; i += 1000) {
		size_t n = plan->ndeletes - i < 1000 ? plan->ndeletes - i : 1000;

		rc = store_delete_many(g->st, (const char *const *)plan->deletes + i, n);
		if (rc) {
			log_err("gc: deleting %zu objects from %s failed: %s", n, plan->deletes[i],
			        strerror(-rc));
			if (!first)
				first = rc;
			continue;
		}
		done += n;
	}
	if (o->cleanup_uploads) {
		unsigned n = 0;

		rc = store_cleanup_uploads(g->st, "", o->grace_sec, &n);
		if (rc && rc != -ENOTSUP) {
			log_warn("gc: cleaning abandoned uploads failed: %s", strerror(-rc));
			if (!first)
				first = rc;
		}
		done += n;
	}
	if (done)
		log_info("gc: deleted %" PRIu64 " objects (%" PRIu64 " WAL, %" PRIu64
		         " manifests, %" PRIu64 " tables, %" PRIu64 " packs, %" PRIu64
		         " region objects planned)",
		         done, plan->n_wal, plan->n_manifest, plan->n_sst, plan->n_pack,
		         plan->n_region);
	if (deleted)
		*deleted = done;
	return first;
}

/* ------------------------------------------------------------------ */
/* Repack scan                                                         */
/* ------------------------------------------------------------------ */

static int pid_cmp(const void *a, const void *b)
{
	return id_cmp(a, b);
}

int gc_repack_scan(struct kv_iter *it, const struct gc_plan *plan, gc_repack_fn fn, void *arg)
{
	struct gc_pack_id *sel = NULL;
	uint8_t *prev = NULL;
	size_t prevlen = 0, prevcap = 0;
	bool have_prev = false;
	int rc = 0;

	if (!plan->nrepack)
		return 0;
	sel = malloc(plan->nrepack * sizeof(*sel));
	if (!sel)
		return -ENOMEM;
	memcpy(sel, plan->repack, plan->nrepack * sizeof(*sel));
	qsort(sel, plan->nrepack, sizeof(*sel), pid_cmp);
	for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
		size_t kl, vl;
		const void *k = kv_iter_key(it, &kl), *v;
		struct blob_desc d;
		struct gc_pack_id id;

		if (have_prev && kv_key_cmp(k, kl, prev, prevlen) == 0)
			continue; /* an older version */
		if (kl > prevcap || !prev) {
			uint8_t *p = realloc(prev, kl ? kl : 1);

			if (!p) {
				rc = -ENOMEM;
				goto out;
			}
			prev = p;
			prevcap = kl;
		}
		if (kl)
			memcpy(prev, k, kl);
		prevlen = kl;
		have_prev = true;
		if (kv_iter_type(it) != KV_BLOB)
			continue;
		v = kv_iter_value(it, &vl);
		if (blob_desc_decode(v, vl, &d))
			continue; /* the reader reports corrupt descriptors */
		id.epoch = d.epoch;
		id.position = d.position;
		if (!bsearch(&id, sel, plan->nrepack, sizeof(*sel), pid_cmp))
			continue;
		rc = fn(arg, k, kl, kv_iter_seq(it), v, vl);
		if (rc)
			goto out;
	}
	rc = kv_iter_status(it);
out:
	free(prev);
	free(sel);
	return rc;
}
