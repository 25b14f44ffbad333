/*
 * test_sst.c - unit tests of the SSTable builder and reader (engine/table/sst*.c)
 * on the local store, and on S3 when S3_ENDPOINT is set.
 *
 * Block boundaries: empty table, 1 entry, exactly one block, one entry
 * over, huge keys and values (one entry larger than a block), many versions
 * of one key spread over many blocks.  For each table: a full scan, seeks to
 * every key and between keys, point gets at every snapshot that matters,
 * deletes.  Corruption: a flipped byte in a data block (-EUCLEAN, other
 * blocks still readable), every single-byte flip of a small table (always
 * detected, never a crash), bad footer checksum, bad magic, newer version,
 * truncated object.  Bloom false-positive rate over 100k keys, read cost
 * (one GET to open, at most one block per get), block cache, properties.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cache.h"
#include "coding.h"
#include "fault.h"
#include "format.h"
#include "manifest.h"
#include "memtable.h"
#include "sst.h"
#include "sst_flush.h"
#include "store.h"
#include "testutil.h"
#include "xxhash.h"

static const char *kind = "local"; /* store kind of the current run */
static bool full;                  /* run the slow/heavy cases (not on S3) */

/* ---- a model table ---- */

struct ent {
	uint8_t *key;
	size_t klen;
	uint64_t seq;
	enum kv_type type;
	uint8_t *val;
	size_t vlen;
};

struct model {
	struct ent *e;
	size_t n, cap;
};

static void model_add(struct model *m, const void *k, size_t kl, uint64_t seq, enum kv_type t,
                      const void *v, size_t vl)
{
	struct ent *e;

	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		m->e = realloc(m->e, m->cap * sizeof(*m->e));
		assert_non_null(m->e);
	}
	e = &m->e[m->n++];
	e->key = malloc(kl + 1);
	e->val = malloc(vl + 1);
	assert_non_null(e->key);
	assert_non_null(e->val);
	memcpy(e->key, k, kl);
	if (vl)
		memcpy(e->val, v, vl);
	e->klen = kl;
	e->seq = seq;
	e->type = t;
	e->vlen = vl;
}

static void model_adds(struct model *m, const char *k, uint64_t seq, enum kv_type t, const char *v)
{
	model_add(m, k, strlen(k), seq, t, v, v ? strlen(v) : 0);
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].key);
		free(m->e[i].val);
	}
	free(m->e);
	memset(m, 0, sizeof(*m));
}

/* ---- fixture ---- */

struct fx {
	struct tu_store *t;
	struct store *s;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	int rc = tu_store_open(kind, &f->t);

	if (rc) {
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

static void build(struct store *s, const char *key, const struct model *m,
                  const struct sst_builder_opts *o, struct sst_props *p)
{
	struct sst_builder *b;

	assert_int_equal(sst_builder_new(s, key, o, &b), 0);
	for (size_t i = 0; i < m->n; i++) {
		const struct ent *e = &m->e[i];

		assert_int_equal(
		    sst_builder_add(b, e->key, e->klen, e->seq, e->type, e->val, e->vlen), 0);
	}
	assert_int_equal(sst_builder_entries(b), m->n);
	assert_int_equal(sst_builder_finish(b, p), 0);
}

static struct sst_reader *open_r(struct store *s, const char *key)
{
	struct sst_reader *r = NULL;

	assert_int_equal(sst_reader_open(s, key, 0, NULL, &r), 0);
	return r;
}

static void check_entry(struct kv_iter *it, const struct ent *e)
{
	size_t kl, vl;
	const void *k, *v;

	assert_true(kv_iter_valid(it));
	k = kv_iter_key(it, &kl);
	assert_int_equal(kl, e->klen);
	if (kl)
		assert_memory_equal(k, e->key, kl);
	assert_int_equal(kv_iter_seq(it), e->seq);
	assert_int_equal(kv_iter_type(it), e->type);
	v = kv_iter_value(it, &vl);
	assert_int_equal(vl, e->vlen);
	if (vl)
		assert_memory_equal(v, e->val, vl);
}

/* Full scan, seeks to and between keys, gets at every relevant snapshot. */
static void verify(struct sst_reader *r, const struct model *m)
{
	struct kv_iter *it;
	size_t i;

	assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
	kv_iter_seek_first(it);
	for (i = 0; i < m->n; i++) {
		check_entry(it, &m->e[i]);
		kv_iter_next(it);
	}
	assert_false(kv_iter_valid(it));
	assert_int_equal(kv_iter_status(it), 0);

	for (i = 0; i < m->n; i++) {
		const struct ent *e = &m->e[i];
		bool first =
		    i == 0 || kv_key_cmp(e->key, e->klen, m->e[i - 1].key, m->e[i - 1].klen) != 0;
		size_t nx = i + 1;
		enum kv_type t;
		uint64_t seq;
		void *v = NULL;
		size_t vl;
		uint8_t *k2;

		/* get at snap = e->seq finds exactly e */
		assert_int_equal(
		    sst_reader_get(r, e->key, e->klen, e->seq, false, &t, &seq, &v, &vl), 1);
		assert_int_equal(seq, e->seq);
		assert_int_equal(t, e->type);
		assert_int_equal(vl, e->vlen);
		if (vl)
			assert_memory_equal(v, e->val, vl);
		free(v);
		/* just below it: the next older version, or nothing */
		if (e->seq > 0) {
			int rc = sst_reader_get(r, e->key, e->klen, e->seq - 1, false, NULL, &seq,
			                        NULL, NULL);
			bool older = nx < m->n &&
			             kv_key_cmp(m->e[nx].key, m->e[nx].klen, e->key, e->klen) == 0;

			assert_int_equal(rc, older ? 1 : 0);
			if (older)
				assert_int_equal(seq, m->e[nx].seq);
		}
		if (!first)
			continue;
		/* newest version at the newest snapshot */
		assert_int_equal(
		    sst_reader_get(r, e->key, e->klen, UINT64_MAX, false, NULL, &seq, NULL, NULL),
		    1);
		assert_int_equal(seq, e->seq);
		/* seek to the key lands on its newest version */
		kv_iter_seek(it, e->key, e->klen);
		check_entry(it, e);
		/* seek just after the key (key + "\0") lands on the next key */
		k2 = malloc(e->klen + 1);
		memcpy(k2, e->key, e->klen);
		k2[e->klen] = 0;
		while (nx < m->n && kv_key_cmp(m->e[nx].key, m->e[nx].klen, e->key, e->klen) == 0)
			nx++;
		kv_iter_seek(it, k2, e->klen + 1);
		if (nx < m->n)
			check_entry(it, &m->e[nx]);
		else
			assert_false(kv_iter_valid(it));
		/* absent key between (unless key + "\0" is the next key) */
		if (nx == m->n || kv_key_cmp(m->e[nx].key, m->e[nx].klen, k2, e->klen + 1) != 0)
			assert_int_equal(sst_reader_get(r, k2, e->klen + 1, UINT64_MAX, false, NULL,
			                                NULL, NULL, NULL),
			                 0);
		free(k2);
	}
	assert_int_equal(kv_iter_status(it), 0);
	kv_iter_destroy(it);
}

static void build_verify(struct store *s, const char *key, const struct model *m,
                         const struct sst_builder_opts *o, struct sst_props *out)
{
	struct sst_props p;
	struct sst_reader *r;

	build(s, key, m, o, &p);
	r = open_r(s, key);
	assert_int_equal(sst_reader_props(r)->entries, m->n);
	assert_int_equal(sst_reader_props(r)->data_blocks, p.data_blocks);
	assert_int_equal(sst_reader_props(r)->file_size, p.file_size);
	verify(r, m);
	sst_reader_unref(r);
	if (out)
		*out = p;
	else
		sst_props_free(&p);
}

static void small_opts(struct sst_builder_opts *o, size_t block)
{
	sst_builder_opts_default(o);
	o->block_size = block;
	o->restart_interval = 4;
}

/* ---- block boundaries ---- */

static void test_empty_table(void **state)
{
	struct fx *f = *state;
	struct model m = {0};
	struct sst_props p;
	struct sst_reader *r;
	struct kv_iter *it;

	build(f->s, "sst/empty", &m, NULL, &p);
	assert_int_equal(p.entries, 0);
	assert_int_equal(p.data_blocks, 0);
	r = open_r(f->s, "sst/empty");
	assert_int_equal(sst_reader_get(r, "a", 1, UINT64_MAX, false, NULL, NULL, NULL, NULL), 0);
	assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
	kv_iter_seek_first(it);
	assert_false(kv_iter_valid(it));
	kv_iter_seek(it, "a", 1);
	assert_false(kv_iter_valid(it));
	assert_int_equal(kv_iter_status(it), 0);
	kv_iter_destroy(it);
	assert_null(sst_reader_props(r)->smallest);
	sst_reader_unref(r);
	sst_props_free(&p);
}

static void test_one_entry(void **state)
{
	struct fx *f = *state;
	struct model m = {0};
	struct sst_props p;

	model_adds(&m, "only", 7, KV_INLINE, "value");
	build_verify(f->s, "sst/one", &m, NULL, &p);
	assert_int_equal(p.data_blocks, 1);
	assert_int_equal(p.min_seq, 7);
	assert_int_equal(p.max_seq, 7);
	assert_int_equal(p.smallest_len, 4);
	assert_memory_equal(p.smallest, "only", 4);
	assert_memory_equal(p.largest, "only", 4);
	sst_props_free(&p);
	model_free(&m);

	/* empty key and empty value are entries like any other */
	model_add(&m, "", 0, 3, KV_INLINE, "", 0);
	model_add(&m, "\0", 1, 2, KV_INLINE, "x", 1);
	build_verify(f->s, "sst/emptykey", &m, NULL, NULL);
	model_free(&m);
}

static void fill(struct model *m, size_t n)
{
	char k[32], v[40];

	for (size_t i = 0; i < n; i++) {
		snprintf(k, sizeof(k), "key%06zu", i);
		snprintf(v, sizeof(v), "value-%06zu-padding-%zu", i, i * 7919 % 1000);
		model_adds(m, k, 1000 + i, KV_INLINE, v);
	}
}

static void test_exact_block_and_one_over(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct sst_props p;
	size_t n;

	small_opts(&o, 512);
	/* Find the largest n that fits one block; n + 1 must make two. */
	for (n = 1;; n++) {
		struct model m = {0};

		fill(&m, n);
		build(f->s, "sst/probe", &m, &o, &p);
		model_free(&m);
		if (p.data_blocks > 1) {
			sst_props_free(&p);
			break;
		}
		sst_props_free(&p);
		assert_true(n < 100);
	}
	n--;
	for (size_t k = n; k <= n + 1; k++) {
		struct model m = {0};

		fill(&m, k);
		build_verify(f->s, "sst/exact", &m, &o, &p);
		assert_int_equal(p.data_blocks, k == n ? 1 : 2);
		sst_props_free(&p);
		model_free(&m);
	}
	/* and many blocks */
	{
		struct model m = {0};

		fill(&m, 40 * n + 3);
		build_verify(f->s, "sst/many", &m, &o, &p);
		assert_true(p.data_blocks >= 40);
		sst_props_free(&p);
		model_free(&m);
	}
}

static void test_huge_entries(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	size_t kl = 10000, vl = 300000;
	uint8_t *k = malloc(kl), *v = malloc(vl);

	small_opts(&o, 4096);
	for (int i = 0; i < 6; i++) {
		memset(k, 'a' + i, kl);
		tu_random_bytes(v, vl, (uint64_t)i);
		/* alternate huge key, huge value, both, and small ones */
		model_add(&m, k, (i % 3 == 1) ? 5 : kl, 50 - i, KV_INLINE, v, (i % 3) ? vl : 10);
	}
	build_verify(f->s, "sst/huge", &m, &o, &p);
	assert_true(p.data_blocks >= 4);
	sst_props_free(&p);
	model_free(&m);
	free(k);
	free(v);
}

static void test_many_versions(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	struct sst_reader *r;
	char v[64];

	small_opts(&o, 256);
	model_adds(&m, "a", 5, KV_INLINE, "before");
	for (uint64_t s = 3000; s >= 1000; s -= 2) {
		snprintf(v, sizeof(v), "version %llu", (unsigned long long)s);
		model_adds(&m, "hot", s, s % 10 == 0 ? KV_DELETE : KV_INLINE,
		           s % 10 == 0 ? NULL : v);
	}
	model_adds(&m, "hot2", 4000, KV_INLINE, "after");
	build_verify(f->s, "sst/versions", &m, &o, &p);
	assert_true(p.data_blocks > 20);
	assert_int_equal(p.keys, 3);
	assert_int_equal(p.deletes, 201);
	assert_int_equal(p.min_seq, 5);
	assert_int_equal(p.max_seq, 4000);
	/* snapshots between versions see the older one; a delete is returned as such */
	r = open_r(f->s, "sst/versions");
	for (uint64_t s = 999; s <= 3005; s += 1) {
		uint64_t seq;
		enum kv_type t;
		int rc = sst_reader_get(r, "hot", 3, s, false, &t, &seq, NULL, NULL);

		if (s < 1000) {
			assert_int_equal(rc, 0);
			continue;
		}
		assert_int_equal(rc, 1);
		assert_int_equal(seq, s > 3000 ? 3000 : s & ~(uint64_t)1);
		assert_int_equal(t, seq % 10 == 0 ? KV_DELETE : KV_INLINE);
	}
	sst_reader_unref(r);
	sst_props_free(&p);
	model_free(&m);
}

static void test_order_and_limits(void **state)
{
	struct fx *f = *state;
	struct sst_builder *b;
	struct sst_reader *r;

	assert_int_equal(sst_builder_new(f->s, "sst/order", NULL, &b), 0);
	assert_int_equal(sst_builder_add(b, "b", 1, 5, KV_INLINE, "x", 1), 0);
	assert_int_equal(sst_builder_add(b, "b", 1, 5, KV_INLINE, "x", 1), -EINVAL); /* dup */
	assert_int_equal(sst_builder_add(b, "c", 1, 1, KV_INLINE, "x", 1), -EINVAL); /* sticky */
	assert_int_equal(sst_builder_finish(b, NULL), -EINVAL);
	/* nothing was stored */
	assert_int_equal(sst_reader_open(f->s, "sst/order", 0, NULL, &r), -ENOENT);

	assert_int_equal(sst_builder_new(f->s, "sst/order", NULL, &b), 0);
	assert_int_equal(sst_builder_add(b, "b", 1, 5, KV_INLINE, "x", 1), 0);
	assert_int_equal(sst_builder_add(b, "b", 1, 6, KV_INLINE, "x", 1), -EINVAL); /* seq up */
	sst_builder_abort(b);
	assert_int_equal(sst_builder_new(f->s, "sst/order", NULL, &b), 0);
	assert_int_equal(sst_builder_add(b, "b", 1, 5, KV_INLINE, "x", 1), 0);
	assert_int_equal(sst_builder_add(b, "a", 1, 9, KV_INLINE, "x", 1), -EINVAL); /* key down */
	sst_builder_abort(b);
	assert_int_equal(sst_builder_new(f->s, "sst/order", NULL, &b), 0);
	assert_int_equal(sst_builder_add(b, "b", 1, 5, (enum kv_type)7, "x", 1), -EINVAL);
	sst_builder_abort(b);
	assert_int_equal(sst_reader_open(f->s, "sst/order", 0, NULL, &r), -ENOENT);
}

/* ---- properties, blob references, uncompressed ---- */

static int blob_ref(void *arg, const void *desc, size_t dlen, struct sst_pack_ref *ref)
{
	(void)arg;
	if (dlen != 12)
		return -EINVAL;
	memcpy(ref->id, desc, 4); /* "pack id" = first 4 bytes, length = next 8 */
	ref->idlen = 4;
	ref->bytes = get_be64((const uint8_t *)desc + 4);
	return 0;
}

static void test_props_blobs(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	struct sst_reader *r;
	const struct sst_props *rp;
	char k[16];
	uint8_t d[12];

	sst_builder_opts_default(&o);
	o.blob_ref = blob_ref;
	o.zstd_level = SST_NO_COMPRESSION;
	for (int i = 0; i < 30; i++) {
		snprintf(k, sizeof(k), "f%03d", i);
		memcpy(d, i % 3 == 0 ? "PKa1" : "PKb2", 4);
		put_be64(d + 4, 1000 + (uint64_t)i);
		model_add(&m, k, strlen(k), 100 + (uint64_t)i, KV_BLOB, d, sizeof(d));
	}
	build_verify(f->s, "sst/blobs", &m, &o, &p);
	r = open_r(f->s, "sst/blobs");
	rp = sst_reader_props(r);
	assert_int_equal(rp->blobs, 30);
	assert_int_equal(rp->npacks, 2);
	assert_memory_equal(rp->packs[0].id, "PKa1", 4);
	assert_memory_equal(rp->packs[1].id, "PKb2", 4);
	{
		uint64_t a = 0, b = 0;

		for (int i = 0; i < 30; i++)
			*(i % 3 == 0 ? &a : &b) += 1000 + (uint64_t)i;
		assert_int_equal(rp->packs[0].bytes, a);
		assert_int_equal(rp->packs[1].bytes, b);
		assert_int_equal(rp->blob_bytes, a + b);
	}
	assert_int_equal(rp->raw_key_bytes, 30 * 4);
	assert_int_equal(rp->bloom_bits, 10);
	sst_reader_unref(r);
	sst_props_free(&p);
	model_free(&m);
}

/* ---- read cost, cache, bloom ---- */

static void test_read_cost_and_cache(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	struct store_stats s0, s1;
	struct sst_reader *r;
	struct sst_counters shared = {0};
	struct sst_reader_opts ro = {.counters = &shared};
	struct sst_stats st;
	struct cache *c;

	small_opts(&o, 1024);
	fill(&m, 2000);
	build(f->s, "sst/cost", &m, &o, &p);
	assert_int_equal(cache_new(4 << 20, &c), 0);
	ro.cache = c;
	store_get_stats(f->s, &s0);
	assert_int_equal(sst_reader_open(f->s, "sst/cost", p.file_size, &ro, &r), 0);
	store_get_stats(f->s, &s1);
	/* known size: one ranged GET, no HEAD */
	assert_int_equal(s1.requests[STORE_OP_GET] - s0.requests[STORE_OP_GET], 1);
	assert_int_equal(s1.requests[STORE_OP_HEAD] - s0.requests[STORE_OP_HEAD], 0);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < m.n; i += 37) {
			struct sst_stats a, b;

			sst_reader_stats(r, &a);
			assert_int_equal(sst_reader_get(r, m.e[i].key, m.e[i].klen, UINT64_MAX,
			                                false, NULL, NULL, NULL, NULL),
			                 1);
			sst_reader_stats(r, &b);
			assert_true(b.blocks_read - a.blocks_read + b.cache_hits - a.cache_hits ==
			            1);
			if (pass)
				assert_int_equal(b.blocks_read, a.blocks_read);
		}
	}
	sst_reader_stats(r, &st);
	assert_true(st.cache_hits >= 54);
	sst_counters_read(&shared, &st);
	assert_true(st.cache_hits >= 54);
	assert_int_equal(st.bloom_checks, 2 * ((m.n + 36) / 37));
	sst_reader_unref(r);
	cache_free(c);
	sst_props_free(&p);
	model_free(&m);
}

struct cold_get {
	struct sst_reader *r;
	const struct ent *e;
	int rc;
};

static void *cold_get_main(void *arg)
{
	struct cold_get *g = arg;
	g->rc =
	    sst_reader_get(g->r, g->e->key, g->e->klen, UINT64_MAX, false, NULL, NULL, NULL, NULL);
	return NULL;
}

/*
 * Eight threads look up one key of a cold table at once, over a store whose
 * GETs take 50 ms: its data block is read from the store once (the others
 * wait for that read and take the block from the cache), not eight times.
 */
static void test_cold_block_read_once(void **state)
{
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	struct sst_reader *r;
	struct sst_stats st;
	struct cache *c;
	struct tu_store *ft = NULL; /* a fault store of its own over a local one */
	struct cold_get g[8];
	pthread_t t[8];
	(void)state;

	assert_int_equal(tu_store_open("fault", &ft), 0);
	small_opts(&o, 1024);
	fill(&m, 2000);
	build(ft->store, "sst/cold", &m, &o, &p);
	assert_int_equal(cache_new(4 << 20, &c), 0);
	struct sst_reader_opts ro = {.cache = c};
	assert_int_equal(sst_reader_open(ft->store, "sst/cold", p.file_size, &ro, &r), 0);
	fault_store_delay(ft->fault, FAULT_M(FAULT_OP_GET), 50000);
	for (int i = 0; i < 8; i++) {
		g[i] = (struct cold_get){r, &m.e[777], -1};
		assert_int_equal(pthread_create(&t[i], NULL, cold_get_main, &g[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(g[i].rc, 1);
	}
	sst_reader_stats(r, &st);
	assert_int_equal(st.blocks_read, 1);
	assert_int_equal(st.cache_hits, 7);
	fault_store_clear(ft->fault);
	sst_reader_unref(r);
	tu_store_close(ft);
	cache_free(c);
	sst_props_free(&p);
	model_free(&m);
}

static void test_bloom_fp_100k(void **state)
{
	struct fx *f = *state;
	struct sst_builder *b;
	struct sst_props p;
	struct sst_reader *r;
	struct sst_stats st;
	struct store_stats s0, s1;
	char k[32];
	unsigned n = full ? 100000 : 20000;
	double fp;

	assert_int_equal(sst_builder_new(f->s, "sst/bloom", NULL, &b), 0);
	for (unsigned i = 0; i < n; i++) {
		int kl = snprintf(k, sizeof(k), "user/%09u", i * 2);

		assert_int_equal(sst_builder_add(b, k, (size_t)kl, i + 1, KV_INLINE, "v", 1), 0);
	}
	assert_int_equal(sst_builder_finish(b, &p), 0);
	store_get_stats(f->s, &s0);
	r = open_r(f->s, "sst/bloom");
	store_get_stats(f->s, &s1);
	/* 100k keys: a 125 KB filter exceeds SST_TAIL_READ (second GET); 20k: 25 KB fits */
	assert_int_equal(s1.requests[STORE_OP_GET] - s0.requests[STORE_OP_GET], full ? 2 : 1);
	for (unsigned i = 0; i < n; i++) {
		int kl = snprintf(k, sizeof(k), "user/%09u", i * 2 + 1);

		assert_int_equal(
		    sst_reader_get(r, k, (size_t)kl, UINT64_MAX, false, NULL, NULL, NULL, NULL), 0);
	}
	sst_reader_stats(r, &st);
	fp = (double)(st.bloom_checks - st.bloom_negatives) / (double)st.bloom_checks;
	fprintf(stderr,
	        "sst bloom over %u keys: %llu checks, %llu negatives, fp %.3f%%, "
	        "%llu blocks read, file %llu bytes, %llu data blocks\n",
	        n, (unsigned long long)st.bloom_checks, (unsigned long long)st.bloom_negatives,
	        fp * 100, (unsigned long long)st.blocks_read, (unsigned long long)p.file_size,
	        (unsigned long long)p.data_blocks);
	assert_true(fp < 0.02);
	assert_int_equal(st.blocks_read, st.bloom_checks - st.bloom_negatives);
	assert_int_equal(st.bloom_false_pos, st.blocks_read);
	/* present keys are all found */
	for (unsigned i = 0; i < n; i += 97) {
		int kl = snprintf(k, sizeof(k), "user/%09u", i * 2);

		assert_int_equal(
		    sst_reader_get(r, k, (size_t)kl, UINT64_MAX, false, NULL, NULL, NULL, NULL), 1);
	}
	sst_reader_unref(r);
	sst_props_free(&p);
}

/* ---- corruption ---- */

static void *get_obj(struct store *s, const char *key, size_t *n)
{
	void *buf;

	assert_int_equal(store_get(s, key, 0, STORE_TO_END, &buf, n), 0);
	return buf;
}

/* Open, scan and get everything; return the first error (0 if all fine). */
static int read_all(struct store *s, const char *key, const struct model *m)
{
	struct sst_reader *r;
	struct kv_iter *it;
	int rc = sst_reader_open(s, key, 0, NULL, &r);
	size_t n = 0;

	if (rc)
		return rc;
	assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
	for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
		n++;
	rc = kv_iter_status(it);
	kv_iter_destroy(it);
	for (size_t i = 0; !rc && i < m->n; i++) {
		void *v = NULL;
		size_t vl;
		int g = sst_reader_get(r, m->e[i].key, m->e[i].klen, m->e[i].seq, false, NULL, NULL,
		                       &v, &vl);

		if (g < 0)
			rc = g;
		else if (g == 0 || vl != m->e[i].vlen || (vl && memcmp(v, m->e[i].val, vl)))
			rc = -EBADE; /* undetected wrong answer */
		free(v);
	}
	if (!rc && n != m->n)
		rc = -EBADE;
	sst_reader_unref(r);
	return rc;
}

/*
 * Get every key in order through r; the result of each (1, or an error) in
 * rcs[], wrong values fail the test.
 */
static void get_in_order(struct sst_reader *r, const struct model *m, int *rcs)
{
	for (size_t i = 0; i < m->n; i++) {
		void *v = NULL;
		size_t vl = 0;

		rcs[i] = sst_reader_get(r, m->e[i].key, m->e[i].klen, UINT64_MAX, false, NULL, NULL,
		                        &v, &vl);
		if (rcs[i] == 1) {
			assert_int_equal(vl, m->e[i].vlen);
			assert_memory_equal(v, m->e[i].val, vl);
		}
		free(v);
	}
}

/*
 * With read_around, the GET of a cold data block brings the uncached blocks
 * after it (up to read_around bytes): reading a table in key order costs a
 * fraction of the GETs, every block is still read exactly once, through one
 * of the two ways, and answers are the same as one block per GET, a damaged
 * block included (found and reported when a read needs it, never served).
 */
static void test_read_around(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	struct sst_stats one, ar;
	struct store_stats s0, s1;
	static int rc_one[2000], rc_ar[2000];

	small_opts(&o, 1024);
	fill(&m, 2000);
	build(f->s, "sst/around", &m, &o, &p);
	{ /* an iterator over the whole table: the same few GETs */
		struct cache *c;
		struct sst_reader *r;
		struct kv_iter *it;
		size_t i = 0;
		assert_int_equal(cache_new(4 << 20, &c), 0);
		struct sst_reader_opts ro = {.cache = c, .read_around = 16384};
		assert_int_equal(sst_reader_open(f->s, "sst/around", p.file_size, &ro, &r), 0);
		assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
		for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it))
			check_entry(it, &m.e[i++]);
		assert_int_equal(kv_iter_status(it), 0);
		assert_int_equal(i, m.n);
		kv_iter_destroy(it);
		sst_reader_stats(r, &ar);
		assert_true(ar.blocks_read <= 3 && ar.blocks_around > 40);
		sst_reader_unref(r);
		cache_free(c);
	}
	for (int damaged = 0; damaged < 2; damaged++) {
		if (damaged) { /* a byte of a data block a third into the table */
			size_t n;
			uint8_t *buf = get_obj(f->s, "sst/around", &n);
			buf[p.file_size / 3] ^= 0x10;
			assert_int_equal(store_put(f->s, "sst/around", buf, n), 0);
			free(buf);
		}
		for (int around = 0; around < 2; around++) {
			struct cache *c;
			struct sst_reader *r;
			assert_int_equal(cache_new(4 << 20, &c), 0);
			struct sst_reader_opts ro = {.cache = c, .read_around = around ? 16384 : 0};
			assert_int_equal(sst_reader_open(f->s, "sst/around", p.file_size, &ro, &r),
			                 0);
			store_get_stats(f->s, &s0);
			get_in_order(r, &m, around ? rc_ar : rc_one);
			store_get_stats(f->s, &s1);
			sst_reader_stats(r, around ? &ar : &one);
			assert_int_equal(s1.requests[STORE_OP_GET] - s0.requests[STORE_OP_GET],
			                 (around ? &ar : &one)->blocks_read);
			sst_reader_unref(r);
			cache_free(c);
		}
		printf(
		    "test_read_around%s: %llu GETs one block each, %llu GETs bringing %llu more\n",
		    damaged ? " (a damaged block)" : "", (unsigned long long)one.blocks_read,
		    (unsigned long long)ar.blocks_read, (unsigned long long)ar.blocks_around);
		size_t bad = 0;
		for (size_t i = 0; i < m.n; i++) {
			assert_int_equal(rc_ar[i], rc_one[i]);
			assert_true(rc_one[i] == 1 || (damaged && rc_one[i] == -EUCLEAN));
			bad += rc_one[i] != 1;
		}
		assert_true(damaged ? bad > 0 && bad < 100 : bad == 0);
		/* every block read once, either way, and the damaged one (never kept) once per
		 * get of a key in it, by itself */
		assert_int_equal(one.blocks_around, 0);
		assert_true(one.blocks_read - bad > 40);
		assert_int_equal(ar.blocks_read + ar.blocks_around, one.blocks_read);
		assert_true((ar.blocks_read - bad) * 4 < one.blocks_read - bad);
		assert_int_equal(ar.corrupt, one.corrupt);
	}
	sst_props_free(&p);
	model_free(&m);
}

static void test_corrupt_data_block(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	struct sst_reader *r;
	struct kv_iter *it;
	uint8_t *buf;
	size_t n;

	small_opts(&o, 512);
	fill(&m, 200);
	build(f->s, "sst/corrupt", &m, &o, &p);
	buf = get_obj(f->s, "sst/corrupt", &n);
	buf[SST_HEADER_SIZE + 20] ^= 0x40; /* inside the first data block */
	assert_int_equal(store_put(f->s, "sst/corrupt", buf, n), 0);
	free(buf);
	r = open_r(f->s, "sst/corrupt"); /* metadata is intact */
	assert_int_equal(
	    sst_reader_get(r, m.e[0].key, m.e[0].klen, UINT64_MAX, false, NULL, NULL, NULL, NULL),
	    -EUCLEAN);
	/* blocks after it still read fine */
	assert_int_equal(sst_reader_get(r, m.e[199].key, m.e[199].klen, UINT64_MAX, false, NULL,
	                                NULL, NULL, NULL),
	                 1);
	assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
	kv_iter_seek_first(it);
	assert_false(kv_iter_valid(it));
	assert_int_equal(kv_iter_status(it), -EUCLEAN);
	kv_iter_destroy(it);
	assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
	kv_iter_seek(it, m.e[150].key, m.e[150].klen);
	check_entry(it, &m.e[150]);
	kv_iter_destroy(it);
	{
		struct sst_stats st;

		sst_reader_stats(r, &st);
		assert_true(st.corrupt >= 2);
	}
	sst_reader_unref(r);
	sst_props_free(&p);
	model_free(&m);
}

static void test_every_byte_flip(void **state)
{
	struct fx *f = *state;
	struct sst_builder_opts o;
	struct model m = {0};
	struct sst_props p;
	uint8_t *orig, *buf;
	size_t n, caught = 0;

	small_opts(&o, 128);
	fill(&m, 12);
	model_adds(&m, "zz", 1, KV_DELETE, NULL);
	build(f->s, "sst/flip", &m, &o, &p);
	assert_int_equal(read_all(f->s, "sst/flip", &m), 0);
	orig = get_obj(f->s, "sst/flip", &n);
	buf = malloc(n);
	for (size_t i = 0; i < n; i++) {
		int rc;

		memcpy(buf, orig, n);
		buf[i] ^= (uint8_t)(1u << (i % 8));
		assert_int_equal(store_put(f->s, "sst/flip", buf, n), 0);
		rc = read_all(f->s, "sst/flip", &m);
		if (rc != -EUCLEAN)
			fprintf(stderr, "flip at %zu of %zu: %d\n", i, n, rc);
		assert_int_equal(rc, -EUCLEAN);
		caught++;
	}
	fprintf(stderr, "every-byte flip: %zu of %zu detected\n", caught, n);
	free(buf);
	free(orig);
	sst_props_free(&p);
	model_free(&m);
}

static void test_footer_faults(void **state)
{
	struct fx *f = *state;
	struct model m = {0};
	struct sst_props p;
	struct sst_footer ft;
	struct sst_reader *r;
	uint8_t *orig, *buf, *foot;
	size_t n;

	fill(&m, 50);
	build(f->s, "sst/foot", &m, NULL, &p);
	orig = get_obj(f->s, "sst/foot", &n);
	buf = malloc(n);
	foot = buf + n - SST_FOOTER_SIZE;

	memcpy(buf, orig, n);
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_OK);
	assert_int_equal(ft.version, SST_VERSION);

	/* bad magic */
	foot[70] ^= 1;
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_BAD_MAGIC);
	assert_int_equal(store_put(f->s, "sst/foot", buf, n), 0);
	assert_int_equal(sst_reader_open(f->s, "sst/foot", 0, NULL, &r), -EUCLEAN);

	/* bad footer checksum */
	memcpy(buf, orig, n);
	foot[3] ^= 1;
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_BAD_CHECKSUM);
	assert_int_equal(store_put(f->s, "sst/foot", buf, n), 0);
	assert_int_equal(sst_reader_open(f->s, "sst/foot", 0, NULL, &r), -EUCLEAN);

	/* newer version, otherwise well-formed (checksum recomputed) */
	memcpy(buf, orig, n);
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_OK);
	ft.version = SST_VERSION + 1;
	sst_footer_encode(&ft, foot);
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_NEWER_VERSION);
	assert_int_equal(store_put(f->s, "sst/foot", buf, n), 0);
	assert_int_equal(sst_reader_open(f->s, "sst/foot", 0, NULL, &r), -EPROTONOSUPPORT);

	/* impossible handle with a valid checksum */
	memcpy(buf, orig, n);
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_OK);
	ft.index.off = n;
	sst_footer_encode(&ft, foot);
	assert_int_equal(sst_footer_decode(foot, n, &ft), SST_BAD_LAYOUT);

	/* header: bad magic and newer version are told apart too */
	memcpy(buf, orig, n);
	assert_int_equal(sst_header_decode(buf), SST_OK);
	put_be32(buf + 8, SST_VERSION + 1);
	assert_int_equal(sst_header_decode(buf), SST_NEWER_VERSION);
	buf[0] ^= 1;
	assert_int_equal(sst_header_decode(buf), SST_BAD_MAGIC);

	/* truncated: every shorter prefix is refused */
	for (size_t len = 0; len < n; len += (len < 100 || n - len < 100) ? 1 : 97) {
		int rc;

		assert_int_equal(store_put(f->s, "sst/foot", orig, len), 0);
		rc = sst_reader_open(f->s, "sst/foot", 0, NULL, &r);
		assert_int_equal(rc, -EUCLEAN);
	}
	/* a size larger than the object is refused too */
	assert_int_equal(store_put(f->s, "sst/foot", orig, n), 0);
	assert_int_equal(sst_reader_open(f->s, "sst/foot", n + 5, NULL, &r), -EUCLEAN);
	assert_int_equal(sst_reader_open(f->s, "sst/foot", n, NULL, &r), 0);
	sst_reader_unref(r);
	free(buf);
	free(orig);
	sst_props_free(&p);
	model_free(&m);
}

static void test_refcount(void **state)
{
	struct fx *f = *state;
	struct model m = {0};
	struct sst_reader *r;
	struct kv_iter *it;

	fill(&m, 10);
	build(f->s, "sst/ref", &m, NULL, NULL);
	r = open_r(f->s, "sst/ref");
	assert_int_equal(sst_reader_iter_new(r, false, &it), 0);
	sst_reader_unref(r); /* the iterator keeps it alive */
	kv_iter_seek_first(it);
	check_entry(it, &m.e[0]);
	kv_iter_destroy(it);
	model_free(&m);
}

/* ---- flush: MemTable -> SSTable -> manifest ---- */

static void test_flush_promote(void **state)
{
	struct fx *f = *state;
	struct memtable *mt;
	struct manifest m0 = {0}, m1 = {0}, m2 = {0}, back = {0};
	struct manifest_sst add = {0}, add2 = {0};
	struct sst_reader *r;
	const struct sst_props *rp;
	static const uint8_t hashes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	struct blob_desc d = {.epoch = 3,
	                      .position = 17,
	                      .offset = 32,
	                      .blob_len = 5000,
	                      .length = 5000,
	                      .hashes = hashes};
	uint8_t desc[BLOB_DESC_FIXED + 8];
	char k[32], v[32];
	bool cond = store_caps(f->s)->conditional_create;

	assert_int_equal(memtable_new(&mt), 0);
	assert_int_equal(sst_flush_build(f->s, mt, 1, 1, NULL, 0, NULL, &add), -ENODATA);
	blob_desc_encode(desc, &d);
	for (int i = 0; i < 500; i++) {
		snprintf(k, sizeof(k), "ino/%06d", i);
		snprintf(v, sizeof(v), "attrs %d", i);
		assert_int_equal(
		    memtable_add(mt, 10 + (uint64_t)i, KV_INLINE, k, strlen(k), v, strlen(v)), 0);
		if (i % 50 == 0)
			assert_int_equal(memtable_add(mt, 1000 + (uint64_t)i, KV_BLOB, k, strlen(k),
			                              desc, sizeof(desc)),
			                 0);
	}
	assert_int_equal(manifest_claim(f->s, cond, &m0), 0);
	assert_int_equal(sst_flush_build(f->s, mt, m0.epoch, m0.next_sst, NULL, 0, NULL, &add), 0);
	assert_int_equal(add.level, 0);
	assert_int_equal(add.seq_min, 10);
	assert_int_equal(add.seq_max, 1450);
	assert_int_equal(add.smallest_len, 10);
	assert_memory_equal(add.smallest, "ino/000000", 10);
	assert_memory_equal(add.largest, "ino/000499", 10);

	r = open_r(f->s, add.name);
	rp = sst_reader_props(r);
	assert_int_equal(rp->entries, 510);
	assert_int_equal(rp->blobs, 10);
	assert_int_equal(rp->npacks, 1);
	assert_int_equal(rp->blob_bytes, 50000);
	assert_int_equal(get_be64(rp->packs[0].id), 3);
	assert_int_equal(get_be64(rp->packs[0].id + 8), 17);
	{
		enum kv_type t;
		void *val;
		size_t vl;

		assert_int_equal(
		    sst_reader_get(r, "ino/000050", 10, UINT64_MAX, false, &t, NULL, &val, &vl), 1);
		assert_int_equal(t, KV_BLOB);
		assert_int_equal(vl, sizeof(desc));
		assert_memory_equal(val, desc, vl);
		free(val);
		assert_int_equal(
		    sst_reader_get(r, "ino/000050", 10, 999, false, &t, NULL, &val, &vl), 1);
		assert_int_equal(t, KV_INLINE);
		assert_memory_equal(val, "attrs 50", 8);
		free(val);
	}
	sst_reader_unref(r);

	assert_int_equal(sst_flush_promote(f->s, cond, &m0, &add, 42, &m1), 0);
	assert_int_equal(m1.version, m0.version + 1);
	assert_int_equal(m1.wal_covered, 42);
	assert_int_equal(m1.last_seq, 1450);
	assert_int_equal(m1.next_sst, m0.next_sst + 1);
	assert_int_equal(manifest_load_latest(f->s, &back), 0);
	assert_int_equal(back.version, m1.version);
	assert_int_equal(back.nssts, 1);
	assert_string_equal(back.ssts[0].name, add.name);
	assert_int_equal(back.ssts[0].size, add.size);
	manifest_clear(&back);

	/*
	 * A second flush promoted against the stale m0 skips m1 (same epoch: an
	 * earlier attempt of ours) and meets a newer writer's version: fenced,
	 * orphan removed.
	 */
	if (cond) {
		struct store_stat st;
		struct manifest nw = {.version = m1.version + 1, .epoch = m0.epoch + 1};

		assert_int_equal(manifest_commit(f->s, &nw, true), 0);
		assert_int_equal(
		    sst_flush_build(f->s, mt, m0.epoch, m1.next_sst, NULL, 0, NULL, &add2), 0);
		assert_int_equal(sst_flush_promote(f->s, cond, &m0, &add2, 50, &m2), -ESTALE);
		assert_int_equal(store_head(f->s, add2.name, &st), -ENOENT);
		free(add2.name);
		free(add2.smallest);
		free(add2.largest);
	}
	free(add.name);
	free(add.smallest);
	free(add.largest);
	manifest_clear(&m0);
	manifest_clear(&m1);
	memtable_unref(mt);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_empty_table, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_one_entry, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_exact_block_and_one_over, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_huge_entries, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_many_versions, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_order_and_limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_props_blobs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_cost_and_cache, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_cold_block_read_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_around, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bloom_fp_100k, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_corrupt_data_block, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_footer_faults, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_refcount, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_flush_promote, setup, teardown),
	};
	const struct CMUnitTest slow[] = {
	    cmocka_unit_test_setup_teardown(test_every_byte_flip, setup, teardown),
	};
	struct tu_store *probe = NULL;
	int fails, prc;

	full = true;
	fails = cmocka_run_group_tests_name("sst/local", tests, NULL, NULL);
	fails += cmocka_run_group_tests_name("sst/local slow", slow, NULL, NULL);
	prc = tu_have_s3() ? tu_store_open("s3", &probe) : TU_SKIP;
	tu_store_close(probe);
	if (prc == 0) {
		kind = "s3";
		full = false;
		fails += cmocka_run_group_tests_name("sst/s3", tests, NULL, NULL);
	} else {
		fprintf(stderr, "S3 store unavailable (%d): S3 runs skipped\n", prc);
	}
	return fails ? 1 : 0;
}
