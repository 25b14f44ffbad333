/*
 * memtable.c - the MemTable: a concurrent skiplist of internal entries
 * (memtable.h), after LevelDB's db/skiplist.h and db/memtable.cc.
 *
 * Structure.  A skiplist of nodes ordered by internal order (iter.h): user
 * key bytewise ascending, then sequence number descending, so the newest
 * version of a key is met first.  Every node is one allocation from an arena
 * owned by the MemTable:
 *
 *     struct node | next[height] | key bytes | value bytes
 *
 * Nothing is ever removed or changed after insertion, so the arena frees
 * everything at once when the last reference goes.  memtable_bytes() is the
 * arena's footprint (block sizes plus block headers): exactly the memory the
 * MemTable holds, keys, values, node overhead and the unused tail of the
 * current block included.
 *
 * Concurrency.  One writer (the caller serialises memtable_add()), any
 * number of lock-free readers.  A new node is fully written (key, value,
 * its own next pointers, relaxed stores) before it is published by a
 * release-store into its predecessors' next pointers, level 0 first; readers
 * load next pointers with acquire, so a reader that sees a node sees its
 * contents.  A reader may see a node at level 0 and not yet at higher levels:
 * that only makes its search a little longer, never wrong.  The list height
 * is read relaxed: a reader seeing a stale (lower) height still finds every
 * node through the lower levels; seeing a new height early it finds NULL
 * (the head's fresh levels) and descends.  Counters (bytes, count, max_seq)
 * are relaxed atomics: readers get a value that was true at some instant.
 *
 * Reference counting: an atomic count; the last memtable_unref() frees the
 * arena.  Iterators hold a reference of their own.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memtable.h"

/* Tallest tower; with branching 4 this covers 4^12 = 16M entries well. */
#define MAX_HEIGHT 12
/* 1 in BRANCHING nodes of height h also get height h+1. */
#define BRANCHING 4
/* Arena blocks; allocations above a quarter of this get a block of their own. */
#define ARENA_BLOCK (64 * 1024)

struct arena_block {
	struct arena_block *next; /* older block; NULL for the first */
	                          /* payload follows, aligned to 8 */
};

struct arena {
	struct arena_block *blocks; /* newest first; writer only */
	uint8_t *ptr;               /* next free byte in the current block; writer only */
	size_t left;                /* bytes left in the current block; writer only */
	atomic_size_t usage;        /* bytes allocated from malloc, headers included */
};

struct node {
	uint64_t seq;   /* sequence number of the entry */
	uint32_t klen;  /* user key length */
	uint32_t vlen;  /* value length */
	uint8_t type;   /* enum kv_type */
	uint8_t height; /* number of next pointers, 1..MAX_HEIGHT */
	/* next[height] pointers; then key bytes, then value bytes */
	_Atomic(struct node *) next[];
};

struct memtable {
	atomic_int refs;               /* references; the last unref frees */
	atomic_int height;             /* current list height, 1..MAX_HEIGHT */
	atomic_size_t count;           /* entries inserted */
	atomic_uint_least64_t max_seq; /* highest seq inserted */
	uint64_t rnd;                  /* xorshift state for tower heights; writer only */
	struct arena arena;            /* owns every node */
	struct node *head;             /* sentinel of height MAX_HEIGHT, no key */
};

/* ---- arena ------------------------------------------------------------ */

static void *arena_alloc_block(struct arena *a, size_t bytes)
{
	struct arena_block *b = malloc(sizeof(*b) + bytes);
	if (!b)
		return NULL;
	b->next = a->blocks;
	a->blocks = b;
	atomic_fetch_add_explicit(&a->usage, sizeof(*b) + bytes, memory_order_relaxed);
	return b + 1;
}

/* Allocate bytes aligned to 8.  Writer only.  NULL on out of memory. */
static void *arena_alloc(struct arena *a, size_t bytes)
{
	bytes = (bytes + 7) & ~(size_t)7;
	if (bytes <= a->left) {
		void *p = a->ptr;
		a->ptr += bytes;
		a->left -= bytes;
		return p;
	}
	if (bytes > ARENA_BLOCK / 4)
		return arena_alloc_block(a, bytes); /* keeps the current block's tail */
	uint8_t *p = arena_alloc_block(a, ARENA_BLOCK);
	if (!p)
		return NULL;
	a->ptr = p + bytes;
	a->left = ARENA_BLOCK - bytes;
	return p;
}

static void arena_free(struct arena *a)
{
	struct arena_block *b = a->blocks;
	while (b) {
		struct arena_block *n = b->next;
		free(b);
		b = n;
	}
	a->blocks = NULL;
}

/* ---- nodes ------------------------------------------------------------ */

static inline uint8_t *node_key(const struct node *n)
{
	return (uint8_t *)&n->next[n->height];
}

static inline uint8_t *node_val(const struct node *n)
{
	return node_key(n) + n->klen;
}

static inline struct node *node_next(struct node *n, int level)
{
	return atomic_load_explicit(&n->next[level], memory_order_acquire);
}

/* Internal order of node n against (key, seq): <0, 0, >0. */
static int node_cmp(const struct node *n, const void *key, size_t klen, uint64_t seq)
{
	int c = kv_key_cmp(node_key(n), n->klen, key, klen);
	if (c)
		return c;
	if (n->seq > seq)
		return -1; /* newer sorts first */
	return n->seq < seq;
}

/*
 * First node >= (key, seq) in internal order, or NULL.  When prev is not
 * NULL, fills prev[level] with the last node < (key, seq) at each level
 * (writer use).
 */
static struct node *find_ge(struct memtable *m, const void *key, size_t klen, uint64_t seq,
                            struct node **prev)
{
	struct node *x = m->head;
	int level = atomic_load_explicit(&m->height, memory_order_relaxed) - 1;
	for (;;) {
		struct node *next = node_next(x, level);
		if (next && node_cmp(next, key, klen, seq) < 0) {
			x = next;
			continue;
		}
		if (prev)
			prev[level] = x;
		if (level == 0)
			return next;
		level--;
	}
}

static int random_height(struct memtable *m)
{
	int h = 1;
	while (h < MAX_HEIGHT) {
		uint64_t x = m->rnd;
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		m->rnd = x;
		if ((x >> 32) % BRANCHING)
			break;
		h++;
	}
	return h;
}

/* ---- public ----------------------------------------------------------- */

int memtable_new(struct memtable **out)
{
	struct memtable *m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	atomic_init(&m->refs, 1);
	atomic_init(&m->height, 1);
	atomic_init(&m->count, 0);
	atomic_init(&m->max_seq, 0);
	atomic_init(&m->arena.usage, sizeof(*m));
	m->rnd = 0x9e3779b97f4a7c15ull ^ (uintptr_t)m;
	m->head = arena_alloc(&m->arena, sizeof(struct node) + MAX_HEIGHT * sizeof(struct node *));
	if (!m->head) {
		free(m);
		return -ENOMEM;
	}
	memset(m->head, 0, sizeof(struct node));
	m->head->height = MAX_HEIGHT;
	for (int i = 0; i < MAX_HEIGHT; i++)
		atomic_init(&m->head->next[i], NULL);
	*out = m;
	return 0;
}

void memtable_ref(struct memtable *m)
{
	atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void memtable_unref(struct memtable *m)
{
	if (!m)
		return;
	if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1)
		return;
	arena_free(&m->arena);
	free(m);
}

int memtable_add(struct memtable *m, uint64_t seq, enum kv_type type, const void *key, size_t klen,
                 const void *val, size_t vlen)
{
	struct node *prev[MAX_HEIGHT];

	if (klen > UINT32_MAX || vlen > UINT32_MAX)
		return -EINVAL;
	find_ge(m, key, klen, seq, prev);
	int h = random_height(m);
	int cur = atomic_load_explicit(&m->height, memory_order_relaxed);
	struct node *n = arena_alloc(
	    &m->arena, sizeof(struct node) + (size_t)h * sizeof(struct node *) + klen + vlen);
	if (!n)
		return -ENOMEM;
	n->seq = seq;
	n->klen = (uint32_t)klen;
	n->vlen = (uint32_t)vlen;
	n->type = (uint8_t)type;
	n->height = (uint8_t)h;
	if (klen)
		memcpy(node_key(n), key, klen);
	if (vlen)
		memcpy(node_val(n), val, vlen);
	if (h > cur) {
		for (int i = cur; i < h; i++)
			prev[i] = m->head;
		/* readers seeing the new height early find NULL at head and descend */
		atomic_store_explicit(&m->height, h, memory_order_relaxed);
	}
	for (int i = 0; i < h; i++) {
		/* n is not yet reachable: a relaxed store of its own pointer is enough */
		atomic_store_explicit(&n->next[i],
		                      atomic_load_explicit(&prev[i]->next[i], memory_order_relaxed),
		                      memory_order_relaxed);
		atomic_store_explicit(&prev[i]->next[i], n, memory_order_release);
	}
	atomic_fetch_add_explicit(&m->count, 1, memory_order_relaxed);
	if (seq > atomic_load_explicit(&m->max_seq, memory_order_relaxed))
		atomic_store_explicit(&m->max_seq, seq, memory_order_relaxed);
	return 0;
}

int memtable_get(struct memtable *m, const void *key, size_t klen, uint64_t snap,
                 enum kv_type *type, const void **val, size_t *vlen, uint64_t *seq)
{
	struct node *n = find_ge(m, key, klen, snap, NULL);
	if (!n || kv_key_cmp(node_key(n), n->klen, key, klen))
		return 0;
	if (type)
		*type = (enum kv_type)n->type;
	if (val)
		*val = node_val(n);
	if (vlen)
		*vlen = n->vlen;
	if (seq)
		*seq = n->seq;
	return 1;
}

size_t memtable_bytes(const struct memtable *m)
{
	return atomic_load_explicit(&m->arena.usage, memory_order_relaxed);
}

size_t memtable_count(const struct memtable *m)
{
	return atomic_load_explicit(&m->count, memory_order_relaxed);
}

uint64_t memtable_max_seq(const struct memtable *m)
{
	return atomic_load_explicit(&m->max_seq, memory_order_relaxed);
}

/* ---- iterator --------------------------------------------------------- */

struct mt_iter {
	struct kv_iter base; /* must be first */
	struct memtable *m;  /* referenced */
	struct node *cur;    /* current node, NULL when invalid */
};

static bool mi_valid(const struct kv_iter *it)
{
	return ((const struct mt_iter *)it)->cur != NULL;
}

static void mi_seek_first(struct kv_iter *it)
{
	struct mt_iter *mi = (struct mt_iter *)it;
	mi->cur = node_next(mi->m->head, 0);
}

static void mi_seek(struct kv_iter *it, const void *key, size_t klen)
{
	struct mt_iter *mi = (struct mt_iter *)it;
	mi->cur = find_ge(mi->m, key, klen, UINT64_MAX, NULL);
}

static void mi_next(struct kv_iter *it)
{
	struct mt_iter *mi = (struct mt_iter *)it;
	if (mi->cur)
		mi->cur = node_next(mi->cur, 0);
}

static const void *mi_key(const struct kv_iter *it, size_t *klen)
{
	const struct mt_iter *mi = (const struct mt_iter *)it;
	*klen = mi->cur->klen;
	return node_key(mi->cur);
}

static uint64_t mi_seq(const struct kv_iter *it)
{
	return ((const struct mt_iter *)it)->cur->seq;
}

static enum kv_type mi_type(const struct kv_iter *it)
{
	return (enum kv_type)((const struct mt_iter *)it)->cur->type;
}

static const void *mi_value(const struct kv_iter *it, size_t *vlen)
{
	const struct mt_iter *mi = (const struct mt_iter *)it;
	*vlen = mi->cur->vlen;
	return node_val(mi->cur);
}

static int mi_status(const struct kv_iter *it)
{
	(void)it;
	return 0;
}

static void mi_destroy(struct kv_iter *it)
{
	struct mt_iter *mi = (struct mt_iter *)it;
	memtable_unref(mi->m);
	free(mi);
}

static const struct kv_iter_ops mt_iter_ops = {
    .valid = mi_valid,
    .seek_first = mi_seek_first,
    .seek = mi_seek,
    .next = mi_next,
    .key = mi_key,
    .seq = mi_seq,
    .type = mi_type,
    .value = mi_value,
    .status = mi_status,
    .destroy = mi_destroy,
};

int memtable_iter_new(struct memtable *m, struct kv_iter **out)
{
	struct mt_iter *mi = calloc(1, sizeof(*mi));
	if (!mi)
		return -ENOMEM;
	mi->base.ops = &mt_iter_ops;
	memtable_ref(m);
	mi->m = m;
	mi->cur = NULL;
	*out = &mi->base;
	return 0;
}
