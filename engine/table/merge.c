/*
 * merge.c - kv_merge_iter_new() (iter.h): one iterator in internal order
 * over n child iterators (MemTables, SSTables), in the manner of LevelDB's
 * table/merger.cc.
 *
 * The valid children are kept in a binary min-heap ordered by internal
 * order (user key ascending, sequence descending), ties broken by the
 * child's index so that earlier children win.  The current entry is the
 * heap's root; next() advances the root child and sifts it down: O(log n)
 * per step.  seek() and seek_first() reposition every child and rebuild the
 * heap.
 *
 * Errors: a child whose status() is nonzero ends the merge: the merger
 * becomes invalid and reports that error from status(), so that a scan never
 * silently skips what a failing source (a corrupt SSTable block, a failed
 * GET) would have contributed.
 *
 * Thread use: one thread at a time, like every iterator.
 */
#include <errno.h>
#include <stdlib.h>

#include "iter.h"

struct merge_iter {
	struct kv_iter base;       /* must be first */
	struct kv_iter **children; /* owned; n of them */
	size_t n;                  /* number of children */
	size_t *heap;              /* indexes of valid children, heap-ordered */
	size_t hn;                 /* entries in heap */
	int err;                   /* first child error seen, 0 if none */
};

/* true when child a sorts before child b */
static bool child_less(const struct merge_iter *mi, size_t a, size_t b)
{
	size_t an, bn;
	const void *ak = kv_iter_key(mi->children[a], &an);
	const void *bk = kv_iter_key(mi->children[b], &bn);
	int c = kv_key_cmp(ak, an, bk, bn);
	if (c)
		return c < 0;
	uint64_t as = kv_iter_seq(mi->children[a]), bs = kv_iter_seq(mi->children[b]);
	if (as != bs)
		return as > bs; /* newer first */
	return a < b;
}

static void sift_down(struct merge_iter *mi, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < mi->hn && child_less(mi, mi->heap[l], mi->heap[m]))
			m = l;
		if (r < mi->hn && child_less(mi, mi->heap[r], mi->heap[m]))
			m = r;
		if (m == i)
			return;
		size_t t = mi->heap[i];
		mi->heap[i] = mi->heap[m];
		mi->heap[m] = t;
		i = m;
	}
}

/* Record the first child error; returns true if there is one. */
static bool check_child(struct merge_iter *mi, size_t c)
{
	int st = kv_iter_status(mi->children[c]);
	if (st && !mi->err)
		mi->err = st;
	return mi->err != 0;
}

static void rebuild(struct merge_iter *mi)
{
	mi->hn = 0;
	for (size_t i = 0; i < mi->n; i++) {
		if (check_child(mi, i))
			continue;
		if (kv_iter_valid(mi->children[i]))
			mi->heap[mi->hn++] = i;
	}
	if (mi->err) {
		mi->hn = 0;
		return;
	}
	for (size_t i = mi->hn / 2; i-- > 0;)
		sift_down(mi, i);
}

static bool m_valid(const struct kv_iter *it)
{
	const struct merge_iter *mi = (const struct merge_iter *)it;
	return !mi->err && mi->hn > 0;
}

static void m_seek_first(struct kv_iter *it)
{
	struct merge_iter *mi = (struct merge_iter *)it;
	for (size_t i = 0; i < mi->n; i++)
		kv_iter_seek_first(mi->children[i]);
	rebuild(mi);
}

static void m_seek(struct kv_iter *it, const void *key, size_t klen)
{
	struct merge_iter *mi = (struct merge_iter *)it;
	for (size_t i = 0; i < mi->n; i++)
		kv_iter_seek(mi->children[i], key, klen);
	rebuild(mi);
}

static void m_next(struct kv_iter *it)
{
	struct merge_iter *mi = (struct merge_iter *)it;
	if (mi->err || mi->hn == 0)
		return;
	size_t c = mi->heap[0];
	kv_iter_next(mi->children[c]);
	if (check_child(mi, c)) {
		mi->hn = 0;
		return;
	}
	if (!kv_iter_valid(mi->children[c]))
		mi->heap[0] = mi->heap[--mi->hn];
	if (mi->hn)
		sift_down(mi, 0);
}

static const void *m_key(const struct kv_iter *it, size_t *klen)
{
	const struct merge_iter *mi = (const struct merge_iter *)it;
	return kv_iter_key(mi->children[mi->heap[0]], klen);
}

static uint64_t m_seq(const struct kv_iter *it)
{
	const struct merge_iter *mi = (const struct merge_iter *)it;
	return kv_iter_seq(mi->children[mi->heap[0]]);
}

static enum kv_type m_type(const struct kv_iter *it)
{
	const struct merge_iter *mi = (const struct merge_iter *)it;
	return kv_iter_type(mi->children[mi->heap[0]]);
}

static const void *m_value(const struct kv_iter *it, size_t *vlen)
{
	const struct merge_iter *mi = (const struct merge_iter *)it;
	return kv_iter_value(mi->children[mi->heap[0]], vlen);
}

static int m_status(const struct kv_iter *it)
{
	const struct merge_iter *mi = (const struct merge_iter *)it;
	if (mi->err)
		return mi->err;
	for (size_t i = 0; i < mi->n; i++) {
		int st = kv_iter_status(mi->children[i]);
		if (st)
			return st;
	}
	return 0;
}

static void m_destroy(struct kv_iter *it)
{
	struct merge_iter *mi = (struct merge_iter *)it;
	for (size_t i = 0; i < mi->n; i++)
		kv_iter_destroy(mi->children[i]);
	free(mi->children);
	free(mi->heap);
	free(mi);
}

static const struct kv_iter_ops merge_ops = {
    .valid = m_valid,
    .seek_first = m_seek_first,
    .seek = m_seek,
    .next = m_next,
    .key = m_key,
    .seq = m_seq,
    .type = m_type,
    .value = m_value,
    .status = m_status,
    .destroy = m_destroy,
};

/*
 * On failure (-ENOMEM, -EINVAL) the children are NOT taken: the caller still
 * owns and destroys them.  The merger starts unpositioned (invalid): call
 * seek_first() or seek() first.
 */
int kv_merge_iter_new(struct kv_iter **children, size_t n, struct kv_iter **out)
{
	struct merge_iter *mi;

	if (n && !children)
		return -EINVAL;
	mi = calloc(1, sizeof(*mi));
	if (!mi)
		return -ENOMEM;
	mi->children = calloc(n ? n : 1, sizeof(*mi->children));
	mi->heap = calloc(n ? n : 1, sizeof(*mi->heap));
	if (!mi->children || !mi->heap) {
		free(mi->children);
		free(mi->heap);
		free(mi);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++)
		mi->children[i] = children[i];
	mi->n = n;
	mi->base.ops = &merge_ops;
	*out = &mi->base;
	return 0;
}
