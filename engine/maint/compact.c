/*
 * compact.c - leveled compaction: pick, merge, commit (contract in
 * compact.h, policy and figures in docs/COMPACTION.md).
 *
 * Crash reasoning.  compact_execute() only creates new, unreferenced
 * objects under names no one else uses (our epoch and fresh ids): a crash
 * during it leaves orphans.  compact_commit() is one conditional manifest
 * put: before it lands the store is as if the job never ran; after it the
 * inputs are unreferenced by the newest manifest and GC deletes them once
 * no kept manifest names them (after the grace period).  Nothing is ever
 * deleted before the commit, so no crash point can lose data.
 *
 * Dropping rule (LevelDB's): walking the merged entries (key ascending,
 * sequence descending), an entry is dropped when a newer version of the
 * same key with sequence <= snapshot has already been seen (no reader can
 * see past it), or when it is a tombstone with sequence <= snapshot and no
 * table in a level below the output level may hold the key (then nothing
 * older exists for it to hide; its older versions in the inputs are dropped
 * by the first rule).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compact.h"
#include "format.h"
#include "iter.h"
#include "log.h"
#include "sst_flush.h"
#include "store.h"

struct compact_job {
	uint32_t level;          /* level taken (0: all L0 tables) */
	uint32_t out_level;      /* level written */
	bool trivial;            /* one input, nothing overlaps: move, no rewrite */
	bool executed;           /* compact_execute() was called */
	uint64_t next_id;        /* past every id handed out (default allocator: the next) */
	struct manifest_sst *in; /* inputs: level tables, then out_level tables */
	size_t nin;
	struct manifest_sst *older; /* tables of levels > out_level (key ranges only) */
	size_t nolder;
	struct manifest_sst *out; /* outputs, key order */
	size_t nout, outcap;
	struct compact_stats stats; /* counters */
};

void compact_opts_default(struct compact_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->l0_trigger = 4;
	o->level_base_bytes = 64ull << 20;
	o->fanout = 10;
	o->levels = COMPACT_MAX_LEVELS;
	o->target_file_bytes = 8ull << 20;
}

/* ------------------------------------------------------------------ */
/* Table descriptors                                                   */
/* ------------------------------------------------------------------ */

static void *dup_mem(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);

	if (q && n)
		memcpy(q, p, n);
	return q;
}

static void sst_free(struct manifest_sst *s)
{
	free(s->name);
	free(s->smallest);
	free(s->largest);
	memset(s, 0, sizeof(*s));
}

/* Deep copy *src into *dst.  -ENOMEM (then *dst is zeroed). */
static int sst_copy(struct manifest_sst *dst, const struct manifest_sst *src)
{
	*dst = *src;
	dst->name = strdup(src->name);
	dst->smallest = dup_mem(src->smallest, src->smallest_len);
	dst->largest = dup_mem(src->largest, src->largest_len);
	if (!dst->name || !dst->smallest || !dst->largest) {
		sst_free(dst);
		return -ENOMEM;
	}
	return 0;
}

/* Append a deep copy of s to (*arr, *n).  -ENOMEM. */
static int sst_push(struct manifest_sst **arr, size_t *n, const struct manifest_sst *s)
{
	struct manifest_sst *a = realloc(*arr, (*n + 1) * sizeof(*a));

	if (!a)
		return -ENOMEM;
	*arr = a;
	if (sst_copy(&a[*n], s))
		return -ENOMEM;
	(*n)++;
	return 0;
}

static void sst_array_free(struct manifest_sst *a, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sst_free(&a[i]);
	free(a);
}

/* Do the key ranges [as, al] and [bs, bl] intersect? */
static bool ranges_overlap(const struct manifest_sst *a, const uint8_t *bs, size_t bsn,
                           const uint8_t *bl, size_t bln)
{
	return kv_key_cmp(a->smallest, a->smallest_len, bl, bln) <= 0 &&
	       kv_key_cmp(bs, bsn, a->largest, a->largest_len) <= 0;
}

/* ------------------------------------------------------------------ */
/* Picking                                                             */
/* ------------------------------------------------------------------ */

static uint64_t level_target(const struct compact_opts *o, uint32_t level)
{
	uint64_t t = o->level_base_bytes;

	for (uint32_t i = 1; i < level; i++)
		t = t > UINT64_MAX / o->fanout ? UINT64_MAX : t * o->fanout;
	return t;
}

/* Bytes of the tables of level in m[lo..hi] that overlap [s, l]. */
static uint64_t overlap_bytes(const struct manifest *m, uint32_t level, const uint8_t *s, size_t sn,
                              const uint8_t *l, size_t ln)
{
	uint64_t b = 0;

	for (size_t i = 0; i < m->nssts; i++)
		if (m->ssts[i].level == level && ranges_overlap(&m->ssts[i], s, sn, l, ln))
			b += m->ssts[i].size;
	return b;
}

/* Fill j->in from the seed range [s, l]: tables of out_level overlapping it. */
static int add_overlapping(struct compact_job *j, const struct manifest *m, const uint8_t *s,
                           size_t sn, const uint8_t *l, size_t ln)
{
	for (size_t i = 0; i < m->nssts; i++) {
		const struct manifest_sst *t = &m->ssts[i];

		if (t->level == j->out_level && ranges_overlap(t, s, sn, l, ln) &&
		    sst_push(&j->in, &j->nin, t))
			return -ENOMEM;
	}
	return 0;
}

static bool opts_ok(const struct compact_opts *o)
{
	return o->l0_trigger >= 1 && o->level_base_bytes >= 1 && o->fanout >= 2 && o->levels >= 2 &&
	       o->levels <= COMPACT_MAX_LEVELS && o->target_file_bytes >= 1;
}

int compact_pick(const struct manifest *m, const struct compact_opts *o, struct compact_job **out)
{
	uint64_t bytes[COMPACT_MAX_LEVELS] = {0};
	size_t n0 = 0;
	double best = 0;
	int lvl = -1, rc = -ENOMEM;
	struct compact_job *j;

	if (!opts_ok(o))
		return -EINVAL;
	for (size_t i = 0; i < m->nssts; i++) {
		uint32_t l = m->ssts[i].level;

		if (l >= o->levels) {
			log_err("compact: %s has level %u beyond %u", m->ssts[i].name, l,
			        o->levels);
			return -EINVAL;
		}
		if (l == 0)
			n0++;
		bytes[l] += m->ssts[i].size;
	}
	if (n0 >= o->l0_trigger) {
		best = (double)n0 / o->l0_trigger;
		lvl = 0;
	}
	for (uint32_t l = 1; l + 1 < o->levels; l++) {
		double score = (double)bytes[l] / (double)level_target(o, l);

		if (score >= 1.0 && score > best) {
			best = score;
			lvl = (int)l;
		}
	}
	if (lvl < 0)
		return -ENODATA;
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->level = (uint32_t)lvl;
	j->out_level = j->level + 1;
	j->next_id = m->next_sst;
	if (lvl == 0) {
		const uint8_t *s = NULL, *l = NULL;
		size_t sn = 0, ln = 0;

		for (size_t i = 0; i < m->nssts; i++) {
			const struct manifest_sst *t = &m->ssts[i];

			if (t->level != 0)
				continue;
			if (sst_push(&j->in, &j->nin, t))
				goto fail;
			if (!s || kv_key_cmp(t->smallest, t->smallest_len, s, sn) < 0) {
				s = t->smallest;
				sn = t->smallest_len;
			}
			if (!l || kv_key_cmp(t->largest, t->largest_len, l, ln) > 0) {
				l = t->largest;
				ln = t->largest_len;
			}
		}
		if (add_overlapping(j, m, s, sn, l, ln))
			goto fail;
	} else {
		/* the table of the level whose push down rewrites least below it */
		const struct manifest_sst *pick = NULL;
		double pick_ratio = 0;

		for (size_t i = 0; i < m->nssts; i++) {
			const struct manifest_sst *t = &m->ssts[i];
			double r;

			if (t->level != j->level)
				continue;
			r = (double)overlap_bytes(m, j->out_level, t->smallest, t->smallest_len,
			                          t->largest, t->largest_len) /
			    (double)(t->size ? t->size : 1);
			if (!pick || r < pick_ratio ||
			    (r == pick_ratio &&
			     kv_key_cmp(t->smallest, t->smallest_len, pick->smallest,
			                pick->smallest_len) < 0)) {
				pick = t;
				pick_ratio = r;
			}
		}
		if (sst_push(&j->in, &j->nin, pick) ||
		    add_overlapping(j, m, pick->smallest, pick->smallest_len, pick->largest,
		                    pick->largest_len))
			goto fail;
	}
	for (size_t i = 0; i < m->nssts; i++)
		if (m->ssts[i].level > j->out_level && sst_push(&j->older, &j->nolder, &m->ssts[i]))
			goto fail;
	j->trivial = j->nin == 1;
	for (size_t i = 0; i < j->nin; i++)
		j->stats.input_bytes += j->in[i].size;
	j->stats.input_tables = j->nin;
	*out = j;
	return 0;
fail:
	compact_job_free(j);
	return rc;
}

uint32_t compact_job_level(const struct compact_job *j)
{
	return j->level;
}

uint32_t compact_job_output_level(const struct compact_job *j)
{
	return j->out_level;
}

const struct manifest_sst *compact_job_inputs(const struct compact_job *j, size_t *n)
{
	*n = j->nin;
	return j->in;
}

const struct manifest_sst *compact_job_outputs(const struct compact_job *j, size_t *n)
{
	*n = j->nout;
	return j->out;
}

void compact_job_stats(const struct compact_job *j, struct compact_stats *out)
{
	*out = j->stats;
}

/* ------------------------------------------------------------------ */
/* Merging                                                             */
/* ------------------------------------------------------------------ */

/*
 * Is there a table below the output level whose range holds key?  Keys
 * come in ascending order, but the older tables are few (a handful per
 * level), so a plain scan is enough.
 */
static bool older_may_hold(const struct compact_job *j, const void *key, size_t klen)
{
	for (size_t i = 0; i < j->nolder; i++)
		if (ranges_overlap(&j->older[i], key, klen, key, klen))
			return true;
	return false;
}

/* The merge in progress: current output builder and key bookkeeping. */
struct merge_state {
	struct store *st;
	struct compact_job *j;
	const struct compact_opts *o;
	struct sst_builder_opts bopts; /* builder options in force */
	struct sst_builder *b;         /* current output, NULL between outputs */
	uint64_t b_id;                 /* its id */
	char b_name[FMT_NAME_MAX];     /* its object name */
	uint8_t *prev;                 /* user key of the previous entry (malloc()ed) */
	size_t prevlen, prevcap;
	bool have_prev;
	bool key_seen;             /* an entry of the current user key came before */
	uint64_t last_seq_for_key; /* seq of that entry (when key_seen) */
};

/* Finish the current output and record it in the job. */
static int finish_output(struct merge_state *ms)
{
	struct compact_job *j = ms->j;
	struct sst_props p = {0};
	struct manifest_sst *t;
	int rc;

	rc = sst_builder_finish(ms->b, &p);
	ms->b = NULL;
	if (rc) {
		log_err("compact: writing %s failed: %s", ms->b_name, strerror(-rc));
		return rc;
	}
	if (j->nout == j->outcap) {
		size_t cap = j->outcap ? 2 * j->outcap : 4;
		struct manifest_sst *a = realloc(j->out, cap * sizeof(*a));

		if (!a) {
			rc = -ENOMEM;
			goto fail;
		}
		j->out = a;
		j->outcap = cap;
	}
	t = &j->out[j->nout];
	memset(t, 0, sizeof(*t));
	t->name = strdup(ms->b_name);
	if (!t->name) {
		rc = -ENOMEM;
		goto fail;
	}
	t->id = ms->b_id;
	t->size = p.file_size;
	t->level = j->out_level;
	t->smallest = p.smallest;
	t->smallest_len = p.smallest_len;
	t->largest = p.largest;
	t->largest_len = p.largest_len;
	p.smallest = p.largest = NULL;
	t->seq_min = p.min_seq;
	t->seq_max = p.max_seq;
	j->nout++;
	j->stats.output_tables++;
	j->stats.output_bytes += t->size;
	sst_props_free(&p);
	return 0;
fail:
	store_delete(ms->st, ms->b_name);
	sst_props_free(&p);
	return rc;
}

/* Open a new output builder. */
static int start_output(struct merge_state *ms)
{
	const struct compact_opts *o = ms->o;
	int rc;

	ms->b_id = o->alloc_id ? o->alloc_id(o->alloc_arg) : ms->j->next_id;
	if (ms->b_id >= ms->j->next_id)
		ms->j->next_id = ms->b_id + 1;
	sst_flush_name(ms->b_name, o->epoch, ms->b_id);
	rc = sst_builder_new(ms->st, ms->b_name, &ms->bopts, &ms->b);
	if (rc)
		log_err("compact: cannot start %s: %s", ms->b_name, strerror(-rc));
	return rc;
}

/* Remember key as the current user key. */
static int set_prev(struct merge_state *ms, const void *key, size_t klen)
{
	if (klen > ms->prevcap) {
		uint8_t *p = realloc(ms->prev, klen);

		if (!p)
			return -ENOMEM;
		ms->prev = p;
		ms->prevcap = klen;
	}
	if (klen)
		memcpy(ms->prev, key, klen);
	ms->prevlen = klen;
	ms->have_prev = true;
	return 0;
}

/* Handle one merged entry: drop it or add it to the current output. */
static int merge_one(struct merge_state *ms, struct kv_iter *it, uint64_t snapshot)
{
	struct compact_job *j = ms->j;
	size_t kl, vl;
	const void *k = kv_iter_key(it, &kl), *v;
	uint64_t seq = kv_iter_seq(it);
	enum kv_type type = kv_iter_type(it);
	bool new_key = !ms->have_prev || kv_key_cmp(k, kl, ms->prev, ms->prevlen) != 0;
	bool drop = false;
	int rc;

	j->stats.entries_in++;
	if (new_key) {
		/* a split point: close the output once it is big enough */
		if (ms->b && sst_builder_bytes(ms->b) >= ms->o->target_file_bytes) {
			rc = finish_output(ms);
			if (rc)
				return rc;
		}
		rc = set_prev(ms, k, kl);
		if (rc)
			return rc;
		ms->key_seen = false;
	}
	if (ms->key_seen && ms->last_seq_for_key <= snapshot) {
		drop = true; /* a newer version visible to every reader hides it */
		j->stats.dropped_shadowed++;
	} else if (type == KV_DELETE && seq <= snapshot && !older_may_hold(j, k, kl)) {
		drop = true; /* nothing older to hide */
		j->stats.dropped_tombstones++;
	}
	ms->key_seen = true;
	ms->last_seq_for_key = seq;
	if (drop)
		return 0;
	if (!ms->b) {
		rc = start_output(ms);
		if (rc)
			return rc;
	}
	v = kv_iter_value(it, &vl);
	rc = sst_builder_add(ms->b, k, kl, seq, type, v, vl);
	if (rc) {
		log_err("compact: add to %s failed: %s", ms->b_name, strerror(-rc));
		return rc;
	}
	j->stats.entries_out++;
	return 0;
}

/* Open one iterator per input (newer level first). */
static int open_inputs(struct store *st, struct compact_job *j, const struct compact_opts *o,
                       struct kv_iter **its)
{
	for (size_t i = 0; i < j->nin; i++) {
		struct sst_reader *r = NULL;
		int rc = sst_reader_open(st, j->in[i].name, j->in[i].size, o->reader, &r);

		if (rc) {
			log_err("compact: cannot open input %s: %s", j->in[i].name, strerror(-rc));
			return rc;
		}
		rc = sst_reader_iter_new(r, false, &its[i]);
		sst_reader_unref(r); /* the iterator holds its own reference */
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * A trivial move keeps every entry of its table.  When the table holds
 * shadowed versions (more entries than keys) or tombstones that nothing
 * below would need (no deeper table overlaps it), rewriting it drops them
 * and, with them, the references that keep dead packs in the store (a
 * forced L0 round over one table was a move, and the space of what was
 * deleted or overwritten never came back).  Returns 1: move, 0: rewrite,
 * or the error of opening the table.  st NULL (tests of the policy alone):
 * 1, without looking.
 */
static int move_drops_nothing(struct store *st, const struct compact_job *j,
                              const struct compact_opts *o)
{
	const struct manifest_sst *t = &j->in[0];
	struct sst_reader *r = NULL;
	bool below = false;
	int rc;

	if (!st)
		return 1; /* no store to look in (policy tests): a plain move */
	rc = sst_reader_open(st, t->name, t->size, o->reader, &r);
	if (rc) {
		log_err("compact: cannot open input %s: %s", t->name, strerror(-rc));
		return rc;
	}
	const struct sst_props *p = sst_reader_props(r);
	for (size_t i = 0; i < j->nolder && !below; i++)
		below = ranges_overlap(&j->older[i], t->smallest, t->smallest_len, t->largest,
		                       t->largest_len);
	rc = p->entries > p->keys || (p->deletes > 0 && !below) ? 0 : 1;
	sst_reader_unref(r);
	return rc;
}

int compact_execute(struct store *st, struct compact_job *j, const struct compact_opts *o,
                    uint64_t snapshot)
{
	struct merge_state ms = {0};
	struct kv_iter **its = NULL, *merged = NULL;
	int rc;

	if (j->executed)
		return -EINVAL;
	j->executed = true;
	if (j->trivial) {
		rc = move_drops_nothing(st, j, o);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			j->trivial = false; /* merge it alone: what it can drop goes */
			log_info("compact: %s holds versions to drop: rewritten, not moved",
			         j->in[0].name);
		}
	}
	if (j->trivial) {
		/* nothing overlaps below: the table changes level, bytes stay */
		rc = sst_push(&j->out, &j->nout, &j->in[0]);
		if (rc)
			return rc;
		j->outcap = j->nout;
		j->out[0].level = j->out_level;
		j->stats.trivial_move = true;
		log_info("compact: moved %s from L%u to L%u", j->in[0].name, j->level,
		         j->out_level);
		return 0;
	}
	ms.st = st;
	ms.j = j;
	ms.o = o;
	if (o->builder) {
		ms.bopts = *o->builder;
	} else {
		sst_builder_opts_default(&ms.bopts);
		ms.bopts.blob_ref = sst_flush_blob_ref;
	}
	its = calloc(j->nin, sizeof(*its));
	if (!its) {
		rc = -ENOMEM;
		goto out;
	}
	rc = open_inputs(st, j, o, its);
	if (rc)
		goto out;
	rc = kv_merge_iter_new(its, j->nin, &merged);
	if (rc)
		goto out;
	free(its); /* the merger owns the children now */
	its = NULL;
	for (kv_iter_seek_first(merged); kv_iter_valid(merged); kv_iter_next(merged)) {
		rc = merge_one(&ms, merged, snapshot);
		if (rc)
			goto out;
	}
	rc = kv_iter_status(merged);
	if (rc) {
		log_err("compact: reading inputs failed: %s", strerror(-rc));
		goto out;
	}
	if (ms.b)
		rc = finish_output(&ms);
out:
	if (ms.b) {
		sst_builder_abort(ms.b);
		ms.b = NULL;
	}
	if (its) {
		for (size_t i = 0; i < j->nin; i++)
			kv_iter_destroy(its[i]);
		free(its);
	}
	kv_iter_destroy(merged);
	free(ms.prev);
	if (rc) {
		compact_job_discard(st, j);
		return rc;
	}
	log_info("compact: L%u->L%u: %" PRIu64 " tables (%" PRIu64 " bytes) -> %" PRIu64
	         " (%" PRIu64 " bytes); %" PRIu64 " entries -> %" PRIu64 " (%" PRIu64
	         " shadowed, %" PRIu64 " tombstones dropped)",
	         j->level, j->out_level, j->stats.input_tables, j->stats.input_bytes,
	         j->stats.output_tables, j->stats.output_bytes, j->stats.entries_in,
	         j->stats.entries_out, j->stats.dropped_shadowed, j->stats.dropped_tombstones);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The manifest edit                                                   */
/* ------------------------------------------------------------------ */

static bool job_has_input(const struct compact_job *j, uint64_t id)
{
	for (size_t i = 0; i < j->nin; i++)
		if (j->in[i].id == id)
			return true;
	return false;
}

/* qsort order of level >= 1 tables: deeper level first, then smallest key. */
static int deep_cmp(const void *a, const void *b)
{
	const struct manifest_sst *x = a, *y = b;

	if (x->level != y->level)
		return x->level > y->level ? -1 : 1;
	return kv_key_cmp(x->smallest, x->smallest_len, y->smallest, y->smallest_len);
}

int compact_apply(const struct manifest *cur, const struct compact_job *j, struct manifest *next)
{
	struct manifest m = *cur;
	size_t found = 0, ndeep = 0, cap = cur->nssts + j->nout;
	int rc = -ENOMEM;

	for (size_t i = 0; i < cur->nssts; i++)
		if (job_has_input(j, cur->ssts[i].id))
			found++;
	if (found != j->nin) {
		log_warn("compact: %zu of %zu inputs are no longer live; dropping the job",
		         j->nin - found, j->nin);
		return -EAGAIN;
	}
	m.ssts = NULL;
	m.nssts = 0;
	m.gc = NULL;
	m.ngc = 0;
	if (cap) {
		m.ssts = calloc(cap, sizeof(*m.ssts));
		if (!m.ssts)
			goto fail;
	}
	/* deep levels: survivors and outputs, sorted */
	for (size_t i = 0; i < cur->nssts; i++) {
		const struct manifest_sst *t = &cur->ssts[i];

		if (t->level == 0 || job_has_input(j, t->id))
			continue;
		if (sst_copy(&m.ssts[m.nssts], t))
			goto fail;
		m.nssts++;
	}
	for (size_t i = 0; i < j->nout; i++) {
		if (sst_copy(&m.ssts[m.nssts], &j->out[i]))
			goto fail;
		m.nssts++;
		if (j->out[i].id + 1 > m.next_sst)
			m.next_sst = j->out[i].id + 1;
	}
	ndeep = m.nssts;
	qsort(m.ssts, ndeep, sizeof(*m.ssts), deep_cmp);
	/* then L0, oldest first, as they were */
	for (size_t i = 0; i < cur->nssts; i++) {
		const struct manifest_sst *t = &cur->ssts[i];

		if (t->level != 0 || job_has_input(j, t->id))
			continue;
		if (sst_copy(&m.ssts[m.nssts], t))
			goto fail;
		m.nssts++;
	}
	if (cur->ngc) {
		m.gc = calloc(cur->ngc, sizeof(*m.gc));
		if (!m.gc)
			goto fail;
		for (size_t i = 0; i < cur->ngc; i++) {
			m.gc[i] = cur->gc[i];
			m.gc[i].name = strdup(cur->gc[i].name);
			m.ngc++;
			if (!m.gc[i].name)
				goto fail;
		}
	}
	if (j->next_id > m.next_sst)
		m.next_sst = j->next_id; /* even ids of outputs that were not kept */
	m.version = cur->version + 1;
	*next = m;
	return 0;
fail:
	manifest_clear(&m);
	return rc;
}

int compact_commit(struct store *st, bool conditional, const struct manifest *cur,
                   const struct compact_job *j, struct manifest *next)
{
	struct manifest m = {0};
	int rc = compact_apply(cur, j, &m);

	if (rc)
		return rc;
	rc = manifest_commit_ours(st, &m, conditional);
	if (rc == -EEXIST) {
		/* the outputs have this job's fresh names: no manifest references them */
		log_warn("compact: manifest version %" PRIu64 " already exists (a newer writer, "
		         "or a late landing of an earlier attempt): stopping; deleting %zu "
		         "unreferenced outputs",
		         m.version, j->nout);
		if (!j->trivial)
			for (size_t i = 0; i < j->nout; i++)
				store_delete(st, j->out[i].name);
		rc = -ESTALE;
	}
	if (rc) {
		manifest_clear(&m);
		return rc;
	}
	*next = m;
	return 0;
}

void compact_job_discard(struct store *st, struct compact_job *j)
{
	if (!j->trivial)
		for (size_t i = 0; i < j->nout; i++)
			store_delete(st, j->out[i].name);
	sst_array_free(j->out, j->nout);
	j->out = NULL;
	j->nout = j->outcap = 0;
}

void compact_job_free(struct compact_job *j)
{
	if (!j)
		return;
	sst_array_free(j->in, j->nin);
	sst_array_free(j->older, j->nolder);
	sst_array_free(j->out, j->nout);
	free(j);
}
