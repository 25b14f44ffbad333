/*
 * test_compact.c - unit tests of leveled compaction (engine/maint/compact.c) on
 * the local store.
 *
 * Merge correctness against a reference model (random puts, blob puts,
 * deletes and overwrites spread over several L0 tables, seeded and
 * printed): with no snapshot the output is exactly the newest live version
 * of each key; with a snapshot every read at or after it sees what it saw
 * before, and no version it cannot see survives; tombstones are kept when a
 * deeper level may hold the key.  Output splitting (ranges sorted, never
 * overlapping, a key never split), blob descriptors carried byte for byte
 * (pack references in the properties), the manifest edit (inputs out,
 * outputs in, list order, next_sst, conflict -EAGAIN, fenced -ESTALE), the
 * picking policy (L0 trigger, level size, least-overlap choice, trivial
 * move) and a run of many compactions checked against the model after each.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compact.h"
#include "coding.h"
#include "format.h"
#include "manifest.h"
#include "sst.h"
#include "sst_flush.h"
#include "store.h"
#include "testutil.h"

/* ---- reference entries ---- */

struct ent {
	char key[16];
	size_t klen;
	uint64_t seq;
	enum kv_type type;
	uint8_t val[BLOB_DESC_FIXED + 8 * 2 + 32];
	size_t vlen;
};

struct ents {
	struct ent *e;
	size_t n, cap;
};

static void ents_push(struct ents *a, const struct ent *e)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 256;
		a->e = realloc(a->e, a->cap * sizeof(*a->e));
		assert_non_null(a->e);
	}
	a->e[a->n++] = *e;
}

/* Internal order: key ascending, seq descending. */
static int ent_cmp(const void *a, const void *b)
{
	const struct ent *x = a, *y = b;
	int c = kv_key_cmp(x->key, x->klen, y->key, y->klen);

	if (c)
		return c;
	return x->seq > y->seq ? -1 : x->seq < y->seq;
}

static uint64_t rng_state;

static uint64_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static uint64_t next_seq = 1;

/* A random entry on one of nkeys keys. */
static void random_ent(struct ent *e, unsigned nkeys)
{
	unsigned r = (unsigned)(rnd() % 10);

	memset(e, 0, sizeof(*e));
	e->klen = (size_t)snprintf(e->key, sizeof(e->key), "k%06u", (unsigned)(rnd() % nkeys));
	e->seq = next_seq++;
	if (r < 2) {
		e->type = KV_DELETE;
	} else if (r < 4) {
		struct blob_desc d = {.epoch = 1 + rnd() % 2,
		                      .position = 1 + rnd() % 5,
		                      .offset = 32 + rnd() % 1000,
		                      .length = 1 + rnd() % 5000,
		                      .hashes = (const uint8_t *)"hash0001hash0002"};
		d.blob_len = d.length;
		e->type = KV_BLOB;
		blob_desc_encode(e->val, &d);
		e->vlen = blob_desc_size(&d);
	} else {
		e->type = KV_INLINE;
		e->vlen = (size_t)(rnd() % 40);
		for (size_t i = 0; i < e->vlen; i++)
			e->val[i] = (uint8_t)rnd();
	}
}

/* ---- fixture ---- */

struct fx {
	struct tu_store *t;
	struct store *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f || tu_store_open("local", &f->t)) {
		free(f);
		return -1;
	}
	f->s = f->t->store;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_store_close(f->t);
	free(f);
	return 0;
}

static uint64_t tbl_id = 1;

/* Write the entries (sorted here) as a table of level; fill *out. */
static void build_table(struct store *s, struct ents *a, uint32_t level, struct manifest_sst *out)
{
	struct sst_builder_opts o;
	struct sst_builder *b;
	struct sst_props p = {0};
	char name[FMT_NAME_MAX];

	qsort(a->e, a->n, sizeof(*a->e), ent_cmp);
	sst_builder_opts_default(&o);
	o.blob_ref = sst_flush_blob_ref;
	o.block_size = 1024;
	memset(out, 0, sizeof(*out));
	out->id = tbl_id++;
	sst_flush_name(name, 1, out->id);
	assert_int_equal(sst_builder_new(s, name, &o, &b), 0);
	for (size_t i = 0; i < a->n; i++)
		assert_int_equal(sst_builder_add(b, a->e[i].key, a->e[i].klen, a->e[i].seq,
		                                 a->e[i].type, a->e[i].val, a->e[i].vlen),
		                 0);
	assert_int_equal(sst_builder_finish(b, &p), 0);
	out->name = strdup(name);
	out->size = p.file_size;
	out->level = level;
	out->smallest = p.smallest;
	out->smallest_len = p.smallest_len;
	out->largest = p.largest;
	out->largest_len = p.largest_len;
	out->seq_min = p.min_seq;
	out->seq_max = p.max_seq;
	p.smallest = p.largest = NULL;
	sst_props_free(&p);
}

/* Append a deep copy of t to m->ssts. */
static void man_add(struct manifest *m, const struct manifest_sst *t)
{
	struct manifest one = {.ssts = (struct manifest_sst *)t, .nssts = 1}, cp;

	assert_int_equal(manifest_copy(&cp, &one), 0);
	m->ssts = realloc(m->ssts, (m->nssts + 1) * sizeof(*m->ssts));
	assert_non_null(m->ssts);
	m->ssts[m->nssts++] = cp.ssts[0];
	free(cp.ssts);
	if (t->id + 1 > m->next_sst)
		m->next_sst = t->id + 1;
}

/* Read every entry of the tables into a (appended). */
static void read_tables(struct store *s, const struct manifest_sst *t, size_t n, struct ents *a)
{
	for (size_t i = 0; i < n; i++) {
		struct sst_reader *r;
		struct kv_iter *it;

		assert_int_equal(sst_reader_open(s, t[i].name, t[i].size, NULL, &r), 0);
		assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
		for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
			struct ent e = {0};
			size_t kl, vl;
			const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);

			assert_true(kl < sizeof(e.key));
			assert_true(vl <= sizeof(e.val));
			memcpy(e.key, k, kl);
			e.klen = kl;
			e.seq = kv_iter_seq(it);
			e.type = kv_iter_type(it);
			memcpy(e.val, v, vl);
			e.vlen = vl;
			ents_push(a, &e);
		}
		assert_int_equal(kv_iter_status(it), 0);
		kv_iter_destroy(it);
		sst_reader_unref(r);
	}
}

/* Newest entry of key with seq <= snap in the sorted a, or NULL. */
static const struct ent *visible(const struct ents *a, const char *key, size_t klen, uint64_t snap)
{
	size_t lo = 0, hi = a->n;

	while (lo < hi) { /* first entry with key >= key */
		size_t mid = lo + (hi - lo) / 2;

		if (kv_key_cmp(a->e[mid].key, a->e[mid].klen, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i < a->n && kv_key_cmp(a->e[i].key, a->e[i].klen, key, klen) == 0; i++)
		if (a->e[i].seq <= snap)
			return &a->e[i];
	return NULL;
}

static bool same_answer(const struct ent *x, const struct ent *y)
{
	bool xl = x && x->type != KV_DELETE, yl = y && y->type != KV_DELETE;

	if (xl != yl)
		return false;
	if (!xl)
		return true;
	return x->type == y->type && x->vlen == y->vlen && !memcmp(x->val, y->val, x->vlen);
}

/* Every key of ref reads the same in got at every snapshot >= snap. */
static void check_reads(const struct ents *ref, const struct ents *got, uint64_t snap)
{
	for (size_t i = 0; i < ref->n; i++) {
		const struct ent *e = &ref->e[i];
		uint64_t snaps[3] = {snap, e->seq, UINT64_MAX};

		for (int k = 0; k < 3; k++) {
			if (snaps[k] < snap)
				continue;
			assert_true(same_answer(visible(ref, e->key, e->klen, snaps[k]),
			                        visible(got, e->key, e->klen, snaps[k])));
		}
	}
}

/* Random L0 tables: returns the model of everything written. */
static void make_l0(struct store *s, struct manifest *m, unsigned ntables, unsigned per,
                    unsigned nkeys, struct ents *all)
{
	for (unsigned t = 0; t < ntables; t++) {
		struct ents a = {0};
		struct manifest_sst ms;

		for (unsigned i = 0; i < per; i++) {
			struct ent e;
			random_ent(&e, nkeys);
			ents_push(&a, &e);
			ents_push(all, &e);
		}
		build_table(s, &a, 0, &ms);
		man_add(m, &ms);
		free(ms.name);
		free(ms.smallest);
		free(ms.largest);
		free(a.e);
	}
	qsort(all->e, all->n, sizeof(*all->e), ent_cmp);
}

/* The engine's id allocator, shared by "flushes" (build_table) and compactions. */
static uint64_t alloc_id(void *arg)
{
	(void)arg;
	return tbl_id++;
}

static void opts_for(struct compact_opts *o)
{
	compact_opts_default(o);
	o->epoch = 1;
	o->l0_trigger = 4;
	o->alloc_id = alloc_id;
}

/* ---- tests ---- */

/* No snapshot, no deeper level: exactly the newest live version of each key. */
static void test_merge_newest_only(void **state)
{
	struct fx *f = *state;
	struct manifest m = {.version = 1, .epoch = 1};
	struct ents all = {0}, got = {0};
	struct compact_opts o;
	struct compact_job *j;
	struct compact_stats cs;
	const struct manifest_sst *out;
	size_t nout, expect = 0;

	rng_state = 1 | tu_seed("compact merge");
	make_l0(f->s, &m, 5, 400, 300, &all);
	opts_for(&o);
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	assert_int_equal(compact_job_level(j), 0);
	assert_int_equal(compact_job_output_level(j), 1);
	assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), 0);
	out = compact_job_outputs(j, &nout);
	assert_int_equal(nout, 1);
	read_tables(f->s, out, nout, &got);
	for (size_t i = 0; i < all.n; i++) {
		bool first = i == 0 || kv_key_cmp(all.e[i].key, all.e[i].klen, all.e[i - 1].key,
		                                  all.e[i - 1].klen) != 0;
		if (first && all.e[i].type != KV_DELETE) {
			assert_true(expect < got.n);
			assert_int_equal(ent_cmp(&all.e[i], &got.e[expect]), 0);
			assert_true(same_answer(&all.e[i], &got.e[expect]));
			expect++;
		}
	}
	assert_int_equal(got.n, expect);
	compact_job_stats(j, &cs);
	assert_int_equal(cs.entries_in, all.n);
	assert_int_equal(cs.entries_out, expect);
	assert_int_equal(cs.entries_in,
	                 cs.entries_out + cs.dropped_shadowed + cs.dropped_tombstones);
	assert_true(cs.dropped_tombstones > 0);
	assert_int_equal(out[0].level, 1);
	assert_true(out[0].id >= m.next_sst);
	check_reads(&all, &got, UINT64_MAX);
	compact_job_free(j);
	manifest_clear(&m);
	free(all.e);
	free(got.e);
}

/* With a snapshot: reads at or after it are unchanged; nothing unreadable is kept. */
static void test_merge_snapshot(void **state)
{
	struct fx *f = *state;
	struct manifest m = {.version = 1, .epoch = 1};
	struct ents all = {0}, got = {0};
	struct compact_opts o;
	struct compact_job *j;
	const struct manifest_sst *out;
	size_t nout;
	uint64_t snap;

	rng_state = 1 | tu_seed("compact snapshot");
	make_l0(f->s, &m, 4, 500, 200, &all);
	snap = all.n / 2 + next_seq - all.n - 1; /* about the middle of the run */
	opts_for(&o);
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	assert_int_equal(compact_execute(f->s, j, &o, snap), 0);
	out = compact_job_outputs(j, &nout);
	read_tables(f->s, out, nout, &got);
	check_reads(&all, &got, snap);
	/* per key: at most one version <= snap, and it is not a tombstone */
	for (size_t i = 0; i < got.n; i++) {
		if (got.e[i].seq > snap)
			continue;
		assert_int_not_equal(got.e[i].type, KV_DELETE);
		if (i > 0 && kv_key_cmp(got.e[i].key, got.e[i].klen, got.e[i - 1].key,
		                        got.e[i - 1].klen) == 0)
			assert_true(got.e[i - 1].seq > snap);
	}
	/* versions newer than the snapshot are all kept */
	for (size_t i = 0; i < all.n; i++)
		if (all.e[i].seq > snap) {
			const struct ent *v =
			    visible(&got, all.e[i].key, all.e[i].klen, all.e[i].seq);
			assert_non_null(v);
			assert_int_equal(v->seq, all.e[i].seq);
		}
	compact_job_free(j);
	manifest_clear(&m);
	free(all.e);
	free(got.e);
}

/* A deeper level holding the key range keeps tombstones alive. */
static void test_tombstone_kept_above_older(void **state)
{
	struct fx *f = *state;
	struct manifest m = {.version = 1, .epoch = 1};
	struct ents all = {0}, old = {0}, got = {0}, merged = {0};
	struct manifest_sst deep;
	struct compact_opts o;
	struct compact_job *j;
	const struct manifest_sst *out;
	size_t nout, dels = 0;

	rng_state = 1 | tu_seed("compact tombstones");
	/* L2: every key, old values */
	for (unsigned k = 0; k < 100; k++) {
		struct ent e = {0};
		e.klen = (size_t)snprintf(e.key, sizeof(e.key), "k%06u", k);
		e.seq = next_seq++;
		e.type = KV_INLINE;
		e.vlen = 3;
		memcpy(e.val, "old", 3);
		ents_push(&old, &e);
	}
	build_table(f->s, &old, 2, &deep);
	man_add(&m, &deep);
	make_l0(f->s, &m, 4, 200, 100, &all);
	opts_for(&o);
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	assert_int_equal(compact_job_level(j), 0);
	assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), 0);
	out = compact_job_outputs(j, &nout);
	read_tables(f->s, out, nout, &got);
	for (size_t i = 0; i < got.n; i++) {
		dels += got.e[i].type == KV_DELETE;
		if (i > 0) /* one version per key */
			assert_int_not_equal(kv_key_cmp(got.e[i].key, got.e[i].klen,
			                                got.e[i - 1].key, got.e[i - 1].klen),
			                     0);
	}
	assert_true(dels > 0);
	/* outputs over L2 read like L0 over L2 */
	for (size_t i = 0; i < got.n; i++)
		ents_push(&merged, &got.e[i]);
	for (size_t i = 0; i < old.n; i++) {
		ents_push(&merged, &old.e[i]);
		ents_push(&all, &old.e[i]);
	}
	qsort(merged.e, merged.n, sizeof(*merged.e), ent_cmp);
	qsort(all.e, all.n, sizeof(*all.e), ent_cmp);
	check_reads(&all, &merged, UINT64_MAX);
	compact_job_free(j);
	manifest_clear(&m);
	free(deep.name);
	free(deep.smallest);
	free(deep.largest);
	free(all.e);
	free(old.e);
	free(got.e);
	free(merged.e);
}

/* Small target size: many outputs, sorted, disjoint, no key split. */
static void test_output_split(void **state)
{
	struct fx *f = *state;
	struct manifest m = {.version = 1, .epoch = 1};
	struct ents all = {0}, got = {0};
	struct compact_opts o;
	struct compact_job *j;
	const struct manifest_sst *out;
	size_t nout;
	uint64_t sum = 0;

	rng_state = 1 | tu_seed("compact split");
	make_l0(f->s, &m, 4, 2000, 3000, &all);
	opts_for(&o);
	o.target_file_bytes = 8192;
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	assert_int_equal(compact_execute(f->s, j, &o, 0), 0);
	out = compact_job_outputs(j, &nout);
	assert_true(nout >= 4);
	for (size_t i = 0; i < nout; i++) {
		struct store_stat st;

		assert_int_equal(store_head(f->s, out[i].name, &st), 0);
		assert_int_equal(st.size, out[i].size);
		sum += out[i].size;
		assert_int_equal(out[i].level, 1);
		assert_true(kv_key_cmp(out[i].smallest, out[i].smallest_len, out[i].largest,
		                       out[i].largest_len) <= 0);
		if (i > 0) {
			assert_true(kv_key_cmp(out[i - 1].largest, out[i - 1].largest_len,
			                       out[i].smallest, out[i].smallest_len) < 0);
			assert_true(out[i].id > out[i - 1].id);
		}
	}
	read_tables(f->s, out, nout, &got);
	check_reads(&all, &got, 0);
	{
		struct compact_stats cs;
		compact_job_stats(j, &cs);
		assert_int_equal(cs.output_tables, nout);
		assert_int_equal(cs.output_bytes, sum);
	}
	/* discard deletes the outputs */
	{
		char *first = strdup(out[0].name), *last = strdup(out[nout - 1].name);
		struct store_stat st;

		compact_job_discard(f->s, j);
		assert_int_equal(store_head(f->s, first, &st), -ENOENT);
		assert_int_equal(store_head(f->s, last, &st), -ENOENT);
		free(first);
		free(last);
	}
	compact_job_free(j);
	manifest_clear(&m);
	free(all.e);
	free(got.e);
}

/* Blob descriptors come through unchanged, with pack references. */
static void test_blob_descriptors(void **state)
{
	struct fx *f = *state;
	struct manifest m = {.version = 1, .epoch = 1};
	struct ents all = {0};
	struct compact_opts o;
	struct compact_job *j;
	const struct manifest_sst *out;
	struct sst_reader *r;
	const struct sst_props *p;
	size_t nout;
	uint64_t live_blob = 0;

	rng_state = 1 | tu_seed("compact blobs");
	make_l0(f->s, &m, 4, 300, 150, &all);
	for (size_t i = 0; i < all.n; i++) {
		bool first = i == 0 || kv_key_cmp(all.e[i].key, all.e[i].klen, all.e[i - 1].key,
		                                  all.e[i - 1].klen) != 0;
		struct blob_desc d;
		if (first && all.e[i].type == KV_BLOB) {
			assert_int_equal(blob_desc_decode(all.e[i].val, all.e[i].vlen, &d), 0);
			live_blob += d.length;
		}
	}
	opts_for(&o);
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), 0);
	out = compact_job_outputs(j, &nout);
	assert_int_equal(nout, 1);
	assert_int_equal(sst_reader_open(f->s, out[0].name, 0, NULL, &r), 0);
	p = sst_reader_props(r);
	assert_int_equal(p->blob_bytes, live_blob);
	{
		uint64_t s = 0;
		for (size_t i = 0; i < p->npacks; i++) {
			assert_int_equal(p->packs[i].idlen, 16);
			s += p->packs[i].bytes;
		}
		assert_int_equal(s, live_blob);
	}
	sst_reader_unref(r);
	compact_job_free(j);
	manifest_clear(&m);
	free(all.e);
}

static bool man_has(const struct manifest *m, uint64_t id)
{
	for (size_t i = 0; i < m->nssts; i++)
		if (m->ssts[i].id == id)
			return true;
	return false;
}

/* The manifest edit and its commit; flushes may land in between. */
static void test_manifest_edit(void **state)
{
	struct fx *f = *state;
	struct manifest m = {0}, cur = {0}, next = {0}, loaded = {0}, raced = {0};
	struct ents all = {0}, more = {0}, l1 = {0};
	struct manifest_sst t1;
	uint64_t late;
	struct compact_opts o;
	struct compact_job *j;
	const struct manifest_sst *in, *out;
	size_t nin, nout;

	rng_state = 1 | tu_seed("compact manifest");
	assert_int_equal(manifest_claim(f->s, true, &m), 0); /* version 1, epoch 1 */
	/* an L1 table on keys k000000..k000049 and one beyond every L0 key */
	for (unsigned k = 0; k < 50; k++) {
		struct ent e = {0};
		e.klen = (size_t)snprintf(e.key, sizeof(e.key), "k%06u", k);
		e.seq = next_seq++;
		e.type = KV_INLINE;
		ents_push(&l1, &e);
	}
	build_table(f->s, &l1, 1, &t1);
	man_add(&m, &t1);
	l1.n = 0;
	{
		struct ent e = {0};
		struct manifest_sst far;
		e.klen = (size_t)snprintf(e.key, sizeof(e.key), "z");
		e.seq = next_seq++;
		e.type = KV_INLINE;
		ents_push(&l1, &e);
		build_table(f->s, &l1, 1, &far);
		man_add(&m, &far);
		free(far.name);
		free(far.smallest);
		free(far.largest);
	}
	make_l0(f->s, &m, 4, 100, 100, &all);
	m.version++;
	assert_int_equal(manifest_commit(f->s, &m, true), 0);
	opts_for(&o);
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	in = compact_job_inputs(j, &nin);
	assert_int_equal(nin, 5); /* 4 L0 + the overlapping L1, not "z" */
	assert_int_equal(in[4].id, t1.id);
	assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), 0);
	assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), -EINVAL);
	out = compact_job_outputs(j, &nout);
	assert_int_equal(nout, 1);

	/* a flush lands meanwhile: a newer L0 table */
	assert_int_equal(manifest_copy(&cur, &m), 0);
	make_l0(f->s, &cur, 1, 20, 100, &more);
	late = cur.ssts[cur.nssts - 1].id;
	cur.version++;
	assert_int_equal(manifest_commit(f->s, &cur, true), 0);

	/* a newer writer took version cur+1: fenced, outputs deleted */
	assert_int_equal(manifest_copy(&raced, &cur), 0);
	raced.version++;
	raced.epoch++;
	assert_int_equal(manifest_commit(f->s, &raced, true), 0);
	assert_int_equal(compact_commit(f->s, true, &cur, j, &next), -ESTALE);
	{
		struct store_stat st;
		assert_int_equal(store_head(f->s, out[0].name, &st), -ENOENT);
	}
	manifest_clear(&raced);
	compact_job_free(j);

	/* again, against the raced version */
	assert_int_equal(manifest_load_latest(f->s, &raced), 0);
	assert_int_equal(compact_pick(&m, &o, &j), 0); /* picked before the flush */
	assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), 0);
	out = compact_job_outputs(j, &nout);
	assert_int_equal(compact_commit(f->s, true, &raced, j, &next), 0);
	assert_int_equal(next.version, raced.version + 1);
	assert_int_equal(next.nssts, raced.nssts - 5 + nout);
	in = compact_job_inputs(j, &nin);
	for (size_t i = 0; i < nin; i++)
		assert_false(man_has(&next, in[i].id));
	for (size_t i = 0; i < nout; i++)
		assert_true(man_has(&next, out[i].id));
	assert_true(next.next_sst > out[nout - 1].id);
	/* order: deep levels first (by key), then L0 oldest first; the late flush last */
	assert_int_equal(next.ssts[next.nssts - 1].id, late);
	assert_int_equal(next.ssts[next.nssts - 1].level, 0);
	for (size_t i = 1; i < next.nssts; i++)
		assert_true(next.ssts[i - 1].level >= next.ssts[i].level);
	assert_int_equal(manifest_load_latest(f->s, &loaded), 0);
	assert_int_equal(loaded.version, next.version);
	assert_int_equal(loaded.nssts, next.nssts);
	/* a stale job: inputs gone */
	assert_int_equal(compact_apply(&next, j, &loaded), -EAGAIN);
	compact_job_free(j);
	manifest_clear(&m);
	manifest_clear(&cur);
	manifest_clear(&next);
	manifest_clear(&loaded);
	manifest_clear(&raced);
	free(t1.name);
	free(t1.smallest);
	free(t1.largest);
	free(all.e);
	free(more.e);
	free(l1.e);
}

static struct manifest_sst fake(uint64_t id, uint32_t level, const char *s, const char *l,
                                uint64_t size)
{
	struct manifest_sst t = {0};

	t.name = (char *)"sst/x";
	t.id = id;
	t.level = level;
	t.smallest = (uint8_t *)s;
	t.smallest_len = strlen(s);
	t.largest = (uint8_t *)l;
	t.largest_len = strlen(l);
	t.size = size;
	return t;
}

/* The policy, on fake manifests (no I/O). */
static void test_pick_policy(void **state)
{
	struct manifest_sst t[8];
	struct manifest m = {.version = 3, .ssts = t};
	struct compact_opts o;
	struct compact_job *j;
	const struct manifest_sst *in;
	size_t nin;

	(void)state;
	compact_opts_default(&o);
	o.epoch = 1;
	o.level_base_bytes = 1000;
	/* three L0 tables: below the trigger */
	t[0] = fake(1, 1, "a", "c", 400);
	t[1] = fake(2, 0, "b", "d", 100);
	t[2] = fake(3, 0, "x", "y", 100);
	t[3] = fake(4, 0, "e", "f", 100);
	m.nssts = 4;
	assert_int_equal(compact_pick(&m, &o, &j), -ENODATA);
	/* a fourth: all L0 + L1 tables overlapping [b, y] */
	t[4] = fake(5, 0, "a", "a", 100);
	m.nssts = 5;
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	in = compact_job_inputs(j, &nin);
	assert_int_equal(nin, 5);
	assert_int_equal(in[4].id, 1);
	compact_job_free(j);
	/* L1 over its target: the table with least overlap in L2 goes down */
	t[0] = fake(1, 1, "a", "c", 600);
	t[1] = fake(2, 1, "d", "f", 600);
	t[2] = fake(3, 2, "a", "b", 5000);
	t[3] = fake(4, 2, "e", "e", 10);
	t[4] = fake(5, 2, "g", "h", 10);
	m.nssts = 5;
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	assert_int_equal(compact_job_level(j), 1);
	assert_int_equal(compact_job_output_level(j), 2);
	in = compact_job_inputs(j, &nin);
	assert_int_equal(nin, 2);
	assert_int_equal(in[0].id, 2);
	assert_int_equal(in[1].id, 4);
	compact_job_free(j);
	/* nothing overlaps below: a trivial move */
	t[3] = fake(4, 2, "x", "x", 10);
	assert_int_equal(compact_pick(&m, &o, &j), 0);
	in = compact_job_inputs(j, &nin);
	assert_int_equal(nin, 1);
	assert_int_equal(compact_execute(NULL, j, &o, 0), 0);
	{
		struct compact_stats cs;
		struct manifest next;
		const struct manifest_sst *out;
		size_t nout;

		compact_job_stats(j, &cs);
		assert_true(cs.trivial_move);
		out = compact_job_outputs(j, &nout);
		assert_int_equal(nout, 1);
		assert_int_equal(out[0].id, 2);
		assert_int_equal(out[0].level, 2);
		assert_int_equal(compact_apply(&m, j, &next), 0);
		assert_int_equal(next.nssts, 5);
		for (size_t i = 0; i < next.nssts; i++)
			if (next.ssts[i].id == 2)
				assert_int_equal(next.ssts[i].level, 2);
		manifest_clear(&next);
	}
	compact_job_free(j);
	/* the last level never compacts; bad options are refused */
	o.levels = 3;
	t[0] = fake(1, 2, "a", "c", 1u << 30);
	m.nssts = 1;
	assert_int_equal(compact_pick(&m, &o, &j), -ENODATA);
	o.fanout = 1;
	assert_int_equal(compact_pick(&m, &o, &j), -EINVAL);
}

/* Many rounds: flush random L0 tables, compact whatever is picked, check. */
static void test_many_rounds(void **state)
{
	struct fx *f = *state;
	struct manifest m = {0}, next;
	struct ents all = {0};
	struct compact_opts o;
	unsigned jobs = 0, deep = 0;

	rng_state = 1 | tu_seed("compact rounds");
	assert_int_equal(manifest_claim(f->s, true, &m), 0);
	opts_for(&o);
	o.level_base_bytes = 16 * 1024;
	o.fanout = 3;
	o.target_file_bytes = 8 * 1024;
	o.levels = 4;
	for (int round = 0; round < 24; round++) {
		struct compact_job *j;
		struct ents got = {0};
		int rc;

		make_l0(f->s, &m, 1, 300, 2000, &all);
		m.version++;
		assert_int_equal(manifest_commit(f->s, &m, true), 0);
		while ((rc = compact_pick(&m, &o, &j)) == 0) {
			assert_int_equal(compact_execute(f->s, j, &o, UINT64_MAX), 0);
			assert_int_equal(compact_commit(f->s, true, &m, j, &next), 0);
			compact_job_free(j);
			manifest_clear(&m);
			m = next;
			jobs++;
		}
		assert_int_equal(rc, -ENODATA);
		/* levels >= 1 never overlap; reads equal the model */
		for (size_t a = 0; a < m.nssts; a++) {
			deep = m.ssts[a].level > deep ? m.ssts[a].level : deep;
			for (size_t b = a + 1; b < m.nssts; b++)
				if (m.ssts[a].level && m.ssts[a].level == m.ssts[b].level)
					assert_false(
					    kv_key_cmp(m.ssts[a].smallest, m.ssts[a].smallest_len,
					               m.ssts[b].largest,
					               m.ssts[b].largest_len) <= 0 &&
					    kv_key_cmp(m.ssts[b].smallest, m.ssts[b].smallest_len,
					               m.ssts[a].largest,
					               m.ssts[a].largest_len) <= 0);
		}
		read_tables(f->s, m.ssts, m.nssts, &got);
		qsort(got.e, got.n, sizeof(*got.e), ent_cmp);
		check_reads(&all, &got, UINT64_MAX);
		free(got.e);
	}
	assert_true(jobs >= 6);
	assert_true(deep >= 2);
	manifest_clear(&m);
	free(all.e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_merge_newest_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_merge_snapshot, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_tombstone_kept_above_older, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_output_split, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_blob_descriptors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_manifest_edit, setup, teardown),
	    cmocka_unit_test(test_pick_policy),
	    cmocka_unit_test_setup_teardown(test_many_rounds, setup, teardown),
	};

	return cmocka_run_group_tests_name("compact", tests, NULL, NULL) ? 1 : 0;
}
