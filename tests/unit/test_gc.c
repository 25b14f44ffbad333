/*
 * test_gc.c - garbage collection (engine/maint/gc.c) against a randomized model
 * on the local store.
 *
 * A simulated writer makes a history on a clock of its own (object mtimes
 * are set by hand, 10 s per step): commit groups (WAL entry, often a pack),
 * flushes (a real SSTable whose blob entries reference some of the
 * uncovered packs, promoted by a manifest commit, or crashed before it),
 * compactions (inputs replaced by one table referencing part of their
 * packs, or crashed before the commit), epoch claims with packs left by the
 * fenced writer.  Every few steps GC runs with a random grace period and
 * history; the model then checks, object by object:
 *   - safety: everything a kept manifest references (its tables, their
 *     packs, WAL from its wal_covered, packs of uncovered groups, the
 *     caller's live packs) still exists, except WAL entries that are not
 *     fences (larger than a header) below the covered position of the newest
 *     kept manifest at least a tenth of the grace old; the newest manifest
 *     too;
 *   - liveness: everything else older than the grace period is gone;
 *   - pack accounting (live bytes per pack from the newest manifest) and
 *     the repack selection;
 *   - the plan's next_due (when the GC thread wakes next): a pass a second
 *     before it deletes nothing, a pass at it deletes something.
 * Finally a pass far in the future leaves only what the newest manifest
 * needs.  Seeds are printed (MEMWALFS_SEED replays).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>

#include "coding.h"
#include "format.h"
#include "gc.h"
#include "manifest.h"
#include "sst.h"
#include "sst_flush.h"
#include "store.h"
#include "testutil.h"

#define MAXOBJ 8192
#define MAXREF 64

static uint64_t rs;

static uint64_t rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

/* A pack reference of a table. */
struct ref {
	uint64_t epoch, pos, bytes;
};

/* What the model knows of every object it wrote and that still exists. */
struct obj {
	char name[FMT_NAME_MAX];
	int64_t mtime;
	uint64_t size;           /* bytes */
	uint64_t data;           /* packs: blob data bytes */
	struct ref refs[MAXREF]; /* tables: packs referenced */
	size_t nrefs;
};

struct model {
	struct tu_store *t;
	struct store *s;
	struct obj obj[MAXOBJ];
	size_t nobj;
	int64_t clock;     /* simulated wall clock */
	struct manifest m; /* newest committed manifest */
	uint64_t epoch;
	uint64_t next_pos; /* next WAL position */
	uint64_t next_id;  /* next SSTable id (the engine's allocator) */
};

static struct obj *find(struct model *md, const char *name)
{
	for (size_t i = 0; i < md->nobj; i++)
		if (!strcmp(md->obj[i].name, name))
			return &md->obj[i];
	return NULL;
}

/* Record (or refresh) name with the current clock as its mtime. */
static struct obj *touch(struct model *md, const char *name)
{
	struct obj *o = find(md, name);
	struct timespec ts[2];
	char path[4096];

	if (!o) {
		assert_true(md->nobj < MAXOBJ);
		o = &md->obj[md->nobj++];
		memset(o, 0, sizeof(*o));
		snprintf(o->name, sizeof(o->name), "%s", name);
	}
	o->mtime = md->clock;
	ts[0].tv_sec = ts[1].tv_sec = md->clock;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	snprintf(path, sizeof(path), "%s/%s", md->t->dir, name);
	assert_int_equal(utimensat(AT_FDCWD, path, ts, 0), 0);
	return o;
}

static void put_obj(struct model *md, const char *name, size_t len)
{
	uint8_t *b = malloc(len ? len : 1);

	tu_random_bytes(b, len, rnd());
	assert_int_equal(store_put(md->s, name, b, len), 0);
	free(b);
	touch(md, name)->size = len;
}

static int ref_cmp(const void *a, const void *b)
{
	const struct ref *x = a, *y = b;

	if (x->epoch != y->epoch)
		return x->epoch < y->epoch ? -1 : 1;
	return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* Write a table referencing refs (blob entries) plus an inline entry. */
/* Blobs here are under one block: one hash each. */
static const uint8_t zero_hashes[8];

static void write_table(struct model *md, const char *name, struct ref *refs, size_t n,
                        struct manifest_sst *out)
{
	struct sst_builder_opts o;
	struct sst_builder *b;
	struct sst_props p = {0};
	struct obj *ob;

	qsort(refs, n, sizeof(*refs), ref_cmp);
	sst_builder_opts_default(&o);
	o.blob_ref = sst_flush_blob_ref;
	assert_int_equal(sst_builder_new(md->s, name, &o, &b), 0);
	assert_int_equal(sst_builder_add(b, "a", 1, 1, KV_INLINE, "x", 1), 0);
	for (size_t i = 0; i < n; i++) {
		struct blob_desc d = {.epoch = refs[i].epoch,
		                      .position = refs[i].pos,
		                      .offset = PACK_HEADER_SIZE,
		                      .blob_len = refs[i].bytes,
		                      .length = refs[i].bytes,
		                      .hashes = zero_hashes};
		uint8_t desc[BLOB_DESC_FIXED + sizeof(zero_hashes)];
		char key[64];

		blob_desc_encode(desc, &d);
		snprintf(key, sizeof(key), "b%020" PRIu64 "-%020" PRIu64, d.epoch, d.position);
		assert_int_equal(
		    sst_builder_add(b, key, strlen(key), 2 + i, KV_BLOB, desc, blob_desc_size(&d)),
		    0);
	}
	assert_int_equal(sst_builder_finish(b, &p), 0);
	ob = touch(md, name);
	memcpy(ob->refs, refs, n * sizeof(*refs));
	ob->nrefs = n;
	memset(out, 0, sizeof(*out));
	out->name = strdup(name);
	out->id = md->next_id - 1;
	out->size = p.file_size;
	out->smallest = p.smallest;
	out->smallest_len = p.smallest_len;
	out->largest = p.largest;
	out->largest_len = p.largest_len;
	p.smallest = p.largest = NULL;
	sst_props_free(&p);
}

static void commit(struct model *md, struct manifest *next)
{
	char name[FMT_NAME_MAX];

	next->version = md->m.version + 1;
	assert_int_equal(manifest_commit(md->s, next, true), 0);
	manifest_clear(&md->m);
	md->m = *next;
	fmt_manifest_name(name, md->m.version);
	touch(md, name);
}

/* Append a deep copy of t to m. */
static void man_add(struct manifest *m, const struct manifest_sst *t)
{
	struct manifest one = {.ssts = (struct manifest_sst *)t, .nssts = 1}, cp;

	assert_int_equal(manifest_copy(&cp, &one), 0);
	m->ssts = realloc(m->ssts, (m->nssts + 1) * sizeof(*m->ssts));
	assert_non_null(m->ssts);
	m->ssts[m->nssts++] = cp.ssts[0];
	free(cp.ssts);
}

static void step_group(struct model *md)
{
	char name[FMT_NAME_MAX];

	fmt_wal_name(name, md->next_pos);
	put_obj(md, name, 64 + rnd() % 64);
	if (rnd() % 10 < 7) {
		size_t data = 100 + rnd() % 900;

		fmt_pack_name(name, md->epoch, md->next_pos);
		put_obj(md, name, data + PACK_HEADER_SIZE + PACK_TRAILER_SIZE);
		find(md, name)->data = data;
	}
	md->next_pos++;
}

static void step_flush(struct model *md)
{
	struct ref refs[MAXREF];
	size_t n = 0;
	char name[FMT_NAME_MAX];
	struct manifest_sst t;
	struct manifest next;

	if (md->next_pos == md->m.wal_covered)
		return;
	for (uint64_t p = md->m.wal_covered; p < md->next_pos && n < MAXREF; p++) {
		struct obj *o;

		fmt_pack_name(name, md->epoch, p);
		o = find(md, name);
		if (o && rnd() % 3) {
			refs[n].epoch = md->epoch;
			refs[n].pos = p;
			refs[n].bytes = 1 + rnd() % o->data;
			n++;
		}
	}
	sst_flush_name(name, md->epoch, md->next_id++);
	write_table(md, name, refs, n, &t);
	if (rnd() % 10 == 0) { /* crash before the promotion: an orphan */
		free(t.name);
		free(t.smallest);
		free(t.largest);
		return;
	}
	assert_int_equal(manifest_copy(&next, &md->m), 0);
	man_add(&next, &t);
	next.wal_covered = md->next_pos;
	next.next_sst = md->next_id;
	free(t.name);
	free(t.smallest);
	free(t.largest);
	commit(md, &next);
}

static void step_compact(struct model *md)
{
	struct ref refs[MAXREF];
	size_t n = 0, nin = 0;
	bool in[64] = {false};
	char name[FMT_NAME_MAX];
	struct manifest_sst t;
	struct manifest next = {0};

	if (md->m.nssts < 2 || md->m.nssts > 64)
		return;
	for (size_t i = 0; i < md->m.nssts; i++)
		if (rnd() % 2) {
			in[i] = true;
			nin++;
		}
	if (nin < 2)
		return;
	for (size_t i = 0; i < md->m.nssts; i++) {
		struct obj *o;

		if (!in[i])
			continue;
		o = find(md, md->m.ssts[i].name);
		assert_non_null(o);
		for (size_t k = 0; k < o->nrefs && n < MAXREF; k++)
			if (rnd() % 3) {
				bool dup = false;
				for (size_t q = 0; q < n; q++)
					dup |= !ref_cmp(&refs[q], &o->refs[k]);
				if (!dup)
					refs[n++] = o->refs[k];
			}
	}
	sst_flush_name(name, md->epoch, md->next_id++);
	write_table(md, name, refs, n, &t);
	t.level = 1;
	if (rnd() % 10 == 0) { /* crash before the commit */
		free(t.name);
		free(t.smallest);
		free(t.largest);
		return;
	}
	next = md->m;
	next.ssts = NULL;
	next.nssts = 0;
	next.gc = NULL;
	next.ngc = 0;
	for (size_t i = 0; i < md->m.nssts; i++)
		if (!in[i])
			man_add(&next, &md->m.ssts[i]);
	man_add(&next, &t);
	next.next_sst = md->next_id;
	free(t.name);
	free(t.smallest);
	free(t.largest);
	commit(md, &next);
}

static void step_claim(struct model *md)
{
	char name[FMT_NAME_MAX];
	struct manifest m;

	/* the old writer's last pack, never committed */
	fmt_pack_name(name, md->epoch, md->next_pos);
	put_obj(md, name, 200);
	find(md, name)->data = 200 - PACK_HEADER_SIZE - PACK_TRAILER_SIZE;
	assert_int_equal(manifest_claim(md->s, true, &m), 0);
	assert_int_equal(m.version, md->m.version + 1);
	manifest_clear(&md->m);
	md->m = m;
	md->epoch = m.epoch;
	fmt_manifest_name(name, m.version);
	touch(md, name);
}

/* ---- the model's verdict ---- */

struct verdict {
	uint64_t oldest_kept;
	uint64_t floor;
	uint64_t entry_floor; /* WAL entries that are not fences below it go */
	struct manifest kept[256];
	size_t nkept;
};

static bool sst_live(const struct verdict *v, const char *name)
{
	for (size_t i = 0; i < v->nkept; i++)
		for (size_t k = 0; k < v->kept[i].nssts; k++)
			if (!strcmp(v->kept[i].ssts[k].name, name))
				return true;
	return false;
}

static bool pack_referenced(struct model *md, const struct verdict *v, uint64_t e, uint64_t p,
                            uint64_t *live_latest)
{
	bool any = false;

	*live_latest = 0;
	for (size_t i = 0; i < v->nkept; i++)
		for (size_t k = 0; k < v->kept[i].nssts; k++) {
			struct obj *o = find(md, v->kept[i].ssts[k].name);

			assert_non_null(o); /* safety: a kept table exists */
			for (size_t r = 0; r < o->nrefs; r++)
				if (o->refs[r].epoch == e && o->refs[r].pos == p) {
					any = true;
					if (i == 0)
						*live_latest += o->refs[r].bytes;
				}
		}
	return any;
}

static void decide(struct model *md, const struct gc_opts *o, struct verdict *v)
{
	uint64_t latest = md->m.version;

	unsigned keep = o->keep_manifests;

	v->nkept = 0;
	v->floor = o->protect_wal_from;
	if (latest > 1) {
		/* kept by count only while the newest is younger than the grace */
		char name[FMT_NAME_MAX];
		struct obj *newest;

		fmt_manifest_name(name, latest);
		newest = find(md, name);
		assert_non_null(newest);
		if (o->now - newest->mtime >= (int64_t)o->grace_sec)
			keep = 1;
	}
	for (uint64_t ver = latest; ver >= 1; ver--) {
		char name[FMT_NAME_MAX];
		struct obj *succ;

		if (latest - ver >= keep) {
			fmt_manifest_name(name, ver + 1);
			succ = find(md, name);
			assert_non_null(succ);
			if (o->now - succ->mtime >= (int64_t)o->grace_sec)
				break;
		}
		fmt_manifest_name(name, ver);
		if (!find(md, name))
			break;
		assert_true(v->nkept < 256);
		assert_int_equal(manifest_load(md->s, ver, &v->kept[v->nkept]), 0);
		if (v->kept[v->nkept].wal_covered < v->floor)
			v->floor = v->kept[v->nkept].wal_covered;
		v->nkept++;
	}
	v->oldest_kept = latest - v->nkept + 1;
	/* the newest kept manifest at least grace / 10 old covers the non-fences below it */
	v->entry_floor = v->floor;
	for (size_t i = 0; i < v->nkept; i++) {
		char name[FMT_NAME_MAX];
		uint64_t c = v->kept[i].wal_covered < o->protect_wal_from ? v->kept[i].wal_covered
		                                                          : o->protect_wal_from;

		fmt_manifest_name(name, v->kept[i].version);
		if (o->now - find(md, name)->mtime >= (int64_t)(o->grace_sec / 10)) {
			if (c > v->entry_floor)
				v->entry_floor = c;
			break;
		}
	}
}

/* Should the model object go in this pass? */
static bool should_go(struct model *md, const struct gc_opts *o, const struct verdict *v,
                      const struct obj *ob)
{
	uint64_t a, b, live;
	bool old = o->now - ob->mtime >= (int64_t)o->grace_sec;

	if (fmt_parse_manifest_name(ob->name, &a) == 0)
		return a < v->oldest_kept;
	if (fmt_parse_wal_name(ob->name, &a) == 0)
		return a < v->floor || (a < v->entry_floor && ob->size > WAL_HEADER_SIZE);
	if (sscanf(ob->name, "sst/%20" SCNu64 "-%20" SCNu64, &a, &b) == 2)
		return !sst_live(v, ob->name) && !(a == md->m.epoch && b >= md->m.next_sst) && old;
	if (sscanf(ob->name, "pack/%20" SCNu64 "-%20" SCNu64, &a, &b) == 2) {
		for (size_t i = 0; i < o->nlive_packs; i++)
			if (o->live_packs[i].epoch == a && o->live_packs[i].position == b)
				return false;
		if (pack_referenced(md, v, a, b, &live) || b >= v->floor)
			return false;
		return old;
	}
	fail_msg("unknown object %s", ob->name);
	return false;
}

/*
 * After a pass: plan->next_due is exact.  A pass one second before it
 * deletes nothing (what was due went in this pass; everything else waits
 * for an age or a structure that a second does not change), a pass at it
 * deletes something.  (The GC thread wakes at next_due: docs/GC.md.)
 */
static void check_next_due(struct gc *g, const struct gc_opts *o, const struct gc_plan *plan)
{
	struct gc_opts at = *o;
	struct gc_plan p;

	if (!plan->n_deferred) {
		assert_int_equal(plan->next_due, 0);
		return;
	}
	assert_true(plan->next_due > o->now);
	at.now = plan->next_due - 1;
	assert_int_equal(gc_plan_make(g, &at, &p), 0);
	if (p.ndeletes)
		fail_msg("%zu objects (first %s) due before next_due %" PRId64 " (now %" PRId64 ")",
		         p.ndeletes, p.deletes[0], plan->next_due, o->now);
	gc_plan_clear(&p);
	at.now = plan->next_due;
	assert_int_equal(gc_plan_make(g, &at, &p), 0);
	if (!p.ndeletes)
		fail_msg("nothing due at next_due %" PRId64 " (now %" PRId64 ", %" PRIu64
		         " deferred)",
		         plan->next_due, o->now, plan->n_deferred);
	gc_plan_clear(&p);
}

/* One GC pass, checked against the model. */
static void gc_pass(struct model *md, struct gc *g, struct gc_opts *o, bool print)
{
	struct verdict *v = calloc(1, sizeof(*v));
	struct gc_plan plan;
	uint64_t deleted = 0;
	size_t w = 0, expect = 0;
	struct gc_pack_id live;

	assert_non_null(v);
	/* the caller's live packs: one random existing pack */
	o->nlive_packs = 0;
	for (size_t i = 0; i < md->nobj; i++)
		if (!strncmp(md->obj[i].name, "pack/", 5) && rnd() % 8 == 0) {
			assert_int_equal(sscanf(md->obj[i].name, "pack/%20" SCNu64 "-%20" SCNu64,
			                        &live.epoch, &live.position),
			                 2);
			o->live_packs = &live;
			o->nlive_packs = 1;
			break;
		}
	decide(md, o, v);
	assert_int_equal(gc_plan_make(g, o, &plan), 0);
	assert_int_equal(plan.latest, md->m.version);
	assert_int_equal(plan.oldest_kept, v->oldest_kept);
	assert_int_equal(plan.wal_floor, v->floor);
	assert_int_equal(plan.wal_entry_floor, v->entry_floor);
	/* pack accounting and repack selection */
	for (size_t i = 0; i < plan.npacks; i++) {
		const struct gc_pack_stat *s = &plan.packs[i];
		char name[FMT_NAME_MAX];
		uint64_t lv;
		bool rep = false;

		fmt_pack_name(name, s->id.epoch, s->id.position);
		assert_non_null(find(md, name));
		pack_referenced(md, v, s->id.epoch, s->id.position, &lv);
		if (lv > find(md, name)->data)
			lv = find(md, name)->data;
		assert_int_equal(s->live_bytes, lv);
		assert_int_equal(s->data_bytes, find(md, name)->data);
		for (size_t k = 0; k < plan.nrepack; k++)
			rep |= plan.repack[k].epoch == s->id.epoch &&
			       plan.repack[k].position == s->id.position;
		assert_int_equal(rep, !s->unflushed && s->id.position < md->m.wal_covered &&
		                          lv > 0 && 2 * lv < s->data_bytes);
	}
	assert_int_equal(gc_plan_execute(g, o, &plan, &deleted), 0);
	/* every object: gone iff the model says so */
	for (size_t i = 0; i < md->nobj; i++) {
		struct obj *ob = &md->obj[i];
		struct store_stat st;
		bool go = should_go(md, o, v, ob);
		int rc = store_head(md->s, ob->name, &st);

		if (go != (rc == -ENOENT))
			fail_msg("%s: model says %s, store says %d (now %" PRId64 " mtime %" PRId64
			         " grace %u keep %u floor %" PRIu64 " kept %" PRIu64 "..)",
			         ob->name, go ? "delete" : "keep", rc, o->now, ob->mtime,
			         o->grace_sec, o->keep_manifests, v->floor, v->oldest_kept);
		expect += go;
		if (!go)
			md->obj[w++] = *ob;
	}
	md->nobj = w;
	assert_int_equal(plan.ndeletes, expect);
	assert_int_equal(deleted, expect);
	check_next_due(g, o, &plan);
	if (print)
		fprintf(stderr,
		        "gc pass: %zu deleted, %zu objects left, %zu packs, %zu to repack\n",
		        expect, md->nobj, plan.npacks, plan.nrepack);
	/* safety, stated directly: the newest manifest's world is whole */
	for (size_t k = 0; k < md->m.nssts; k++) {
		struct obj *t = find(md, md->m.ssts[k].name);
		struct store_stat st;

		assert_non_null(t);
		for (size_t r = 0; r < t->nrefs; r++) {
			char name[FMT_NAME_MAX];
			fmt_pack_name(name, t->refs[r].epoch, t->refs[r].pos);
			assert_int_equal(store_head(md->s, name, &st), 0);
		}
	}
	for (uint64_t p = md->m.wal_covered; p < md->next_pos; p++) {
		char name[FMT_NAME_MAX];
		struct store_stat st;
		fmt_wal_name(name, p);
		assert_int_equal(store_head(md->s, name, &st), 0);
	}
	for (size_t i = 0; i < v->nkept; i++)
		manifest_clear(&v->kept[i]);
	free(v);
	gc_plan_clear(&plan);
}

static void run_history(uint64_t seed)
{
	struct model *md = calloc(1, sizeof(*md));
	struct gc *g;
	struct gc_opts o;
	static const unsigned graces[] = {0, 25, 100, 400};

	assert_non_null(md);
	rs = seed | 1;
	assert_int_equal(tu_store_open("local", &md->t), 0);
	md->s = md->t->store;
	md->clock = (int64_t)time(NULL) - 1000000;
	assert_int_equal(manifest_claim(md->s, true, &md->m), 0);
	md->epoch = md->m.epoch;
	{
		char name[FMT_NAME_MAX];
		fmt_manifest_name(name, md->m.version);
		touch(md, name);
	}
	assert_int_equal(gc_new(md->s, &g), 0);
	for (int step = 0; step < 400; step++) {
		unsigned r = (unsigned)(rnd() % 100);

		md->clock += 10;
		if (r < 55)
			step_group(md);
		else if (r < 75)
			step_flush(md);
		else if (r < 88)
			step_compact(md);
		else if (r < 91)
			step_claim(md);
		else if (r < 97 || step % 37 == 0) {
			gc_opts_default(&o);
			o.now = md->clock + (int64_t)(rnd() % 50);
			o.grace_sec = graces[rnd() % 4];
			o.keep_manifests = 1 + (unsigned)(rnd() % 4);
			gc_pass(md, g, &o, false);
		}
	}
	/* far in the future: only what the newest manifest needs remains */
	gc_opts_default(&o);
	o.now = md->clock + 100000;
	o.grace_sec = 10;
	o.keep_manifests = 1;
	gc_pass(md, g, &o, true);
	for (size_t i = 0; i < md->nobj; i++) {
		const char *n = md->obj[i].name;
		uint64_t a, b;

		if (!strncmp(n, "manifest/", 9)) {
			assert_int_equal(fmt_parse_manifest_name(n, &a), 0);
			assert_true(a == md->m.version);
		} else if (!strncmp(n, "wal/", 4)) {
			assert_int_equal(fmt_parse_wal_name(n, &a), 0);
			assert_true(a >= md->m.wal_covered);
		} else if (sscanf(n, "sst/%20" SCNu64 "-%20" SCNu64, &a, &b) == 2) {
			bool live = false;
			for (size_t k = 0; k < md->m.nssts; k++)
				live |= !strcmp(md->m.ssts[k].name, n);
			assert_true(live || (a == md->m.epoch && b >= md->m.next_sst));
		}
	}
	gc_free(g);
	manifest_clear(&md->m);
	tu_store_close(md->t);
	free(md);
}

static void test_gc_model(void **state)
{
	uint64_t seed = tu_seed("gc model");

	(void)state;
	for (uint64_t i = 0; i < 4; i++)
		run_history(seed + i * 0x9e3779b97f4a7c15ull);
}

/* An empty store, and a store whose newest manifest is corrupt: no deletes. */
static void test_gc_refuses(void **state)
{
	struct tu_store *t;
	struct gc *g;
	struct gc_opts o;
	struct gc_plan plan;
	struct manifest m;
	char name[FMT_NAME_MAX];

	(void)state;
	assert_int_equal(tu_store_open("local", &t), 0);
	assert_int_equal(gc_new(t->store, &g), 0);
	gc_opts_default(&o);
	o.grace_sec = 0;
	assert_int_equal(store_put(t->store, "wal/00000000000000000001", "x", 1), 0);
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	assert_int_equal(plan.ndeletes, 0);
	gc_plan_clear(&plan);
	assert_int_equal(manifest_claim(t->store, true, &m), 0);
	manifest_clear(&m);
	fmt_manifest_name(name, 2);
	assert_int_equal(store_put(t->store, name, "garbage", 7), 0);
	assert_int_not_equal(gc_plan_make(g, &o, &plan), 0);
	assert_int_equal(store_head(t->store, "wal/00000000000000000001", &(struct store_stat){0}),
	                 0);
	gc_free(g);
	tu_store_close(t);
}

/*
 * Manifests are read once: a pass after one that kept N manifests GETs and
 * HEADs none of them again (before: N GETs and N HEADs every pass), and
 * after a commit only the new one.  Same plan either way.
 */
static void test_gc_cache(void **state)
{
	struct tu_store *t;
	struct gc *g;
	struct gc_opts o;
	struct gc_plan plan;
	struct manifest m, next;
	uint64_t gets, heads;

	(void)state;
	assert_int_equal(tu_store_open("fault", &t), 0);
	assert_int_equal(gc_new(t->store, &g), 0);
	assert_int_equal(manifest_claim(t->store, true, &m), 0);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(manifest_copy(&next, &m), 0);
		next.version = m.version + 1;
		assert_int_equal(manifest_commit(t->store, &next, true), 0);
		manifest_clear(&m);
		m = next;
	}
	gc_opts_default(&o); /* grace 600 s: all 9 versions are kept */
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	assert_int_equal(plan.oldest_kept, 1);
	assert_true(plan.n_deferred > 0);
	gc_plan_clear(&plan);
	for (int round = 0; round < 2; round++) {
		fault_store_reset_calls(t->fault);
		assert_int_equal(gc_plan_make(g, &o, &plan), 0);
		gets = fault_store_calls(t->fault, FAULT_OP_GET);
		heads = fault_store_calls(t->fault, FAULT_OP_HEAD);
		print_message("cache: pass %d: %" PRIu64 " GETs, %" PRIu64 " HEADs, kept %" PRIu64
		              "..%" PRIu64 "\n",
		              round + 2, gets, heads, plan.oldest_kept, plan.latest);
		assert_int_equal(plan.oldest_kept, 1);
		assert_int_equal(plan.latest, m.version);
		assert_int_equal(plan.ndeletes, 0);
		/*
		 * the hint; after a commit the new manifest (its GET and its HEAD) and
		 * the HEAD of the version that left the count window
		 */
		assert_true(gets <= 1u + (unsigned)round);
		assert_true(heads <= 2u * (unsigned)round);
		gc_plan_clear(&plan);
		assert_int_equal(manifest_copy(&next, &m), 0);
		next.version = m.version + 1;
		assert_int_equal(manifest_commit(t->store, &next, true), 0);
		manifest_clear(&m);
		m = next;
	}
	/* past the grace everything but the newest goes, as without the cache */
	o.now = (int64_t)time(NULL) + 601;
	assert_int_equal(gc_plan_make(g, &o, &plan), 0);
	assert_int_equal(plan.oldest_kept, m.version);
	assert_int_equal(plan.n_manifest, m.version - 1);
	assert_int_equal(plan.n_deferred, 0);
	assert_int_equal(plan.next_due, 0);
	gc_plan_clear(&plan);
	manifest_clear(&m);
	gc_free(g);
	tu_store_close(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_gc_model),
	    cmocka_unit_test(test_gc_refuses),
	    cmocka_unit_test(test_gc_cache),
	};

	return cmocka_run_group_tests_name("gc", tests, NULL, NULL) ? 1 : 0;
}
