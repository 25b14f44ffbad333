/*
 * iter.h - the internal iterator every sorted source implements (MemTables,
 * SSTables, the merge of them), in the manner of LevelDB's Iterator.
 *
 * An iterator yields internal entries in internal order: user key ascending
 * (bytewise, a prefix first), then sequence number DEscending, so the newest
 * version of a key comes first.  An entry carries a type (enum kv_type) and
 * a value whose meaning depends on the type.  Borrowed pointers returned by
 * key() and value() stay valid until the next move or destroy.
 */
#ifndef MEMWALFS_ITER_H
#define MEMWALFS_ITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Entry types.  These tags are written to storage (WAL records, SSTables):
 * they never change meaning; retired ones stay listed here as comments.
 */
enum kv_type {
	KV_DELETE = 0, /* tombstone; value empty */
	KV_INLINE = 1, /* value holds the user value itself */
	KV_BLOB = 2,   /* value holds an encoded blob descriptor (format.h) */
};

struct kv_iter;

struct kv_iter_ops {
	bool (*valid)(const struct kv_iter *it);
	void (*seek_first)(struct kv_iter *it);
	/* first entry with user key >= key (newest version of it first) */
	void (*seek)(struct kv_iter *it, const void *key, size_t klen);
	void (*next)(struct kv_iter *it);
	const void *(*key)(const struct kv_iter *it, size_t *klen);
	uint64_t (*seq)(const struct kv_iter *it);
	enum kv_type (*type)(const struct kv_iter *it);
	const void *(*value)(const struct kv_iter *it, size_t *vlen);
	/* 0, or the error (e.g. -EUCLEAN, -EIO) that made the iterator invalid */
	int (*status)(const struct kv_iter *it);
	void (*destroy)(struct kv_iter *it);
};

/* Every iterator embeds this as its first member. */
struct kv_iter {
	const struct kv_iter_ops *ops;
};

static inline bool kv_iter_valid(const struct kv_iter *it)
{
	return it->ops->valid(it);
}
static inline void kv_iter_seek_first(struct kv_iter *it)
{
	it->ops->seek_first(it);
}
static inline void kv_iter_seek(struct kv_iter *it, const void *k, size_t n)
{
	it->ops->seek(it, k, n);
}
static inline void kv_iter_next(struct kv_iter *it)
{
	it->ops->next(it);
}
static inline const void *kv_iter_key(const struct kv_iter *it, size_t *n)
{
	return it->ops->key(it, n);
}
static inline uint64_t kv_iter_seq(const struct kv_iter *it)
{
	return it->ops->seq(it);
}
static inline enum kv_type kv_iter_type(const struct kv_iter *it)
{
	return it->ops->type(it);
}
static inline const void *kv_iter_value(const struct kv_iter *it, size_t *n)
{
	return it->ops->value(it, n);
}
static inline int kv_iter_status(const struct kv_iter *it)
{
	return it->ops->status(it);
}
static inline void kv_iter_destroy(struct kv_iter *it)
{
	if (it)
		it->ops->destroy(it);
}

/* Compare user keys bytewise; a prefix sorts first.  Returns <0, 0, >0. */
static inline int kv_key_cmp(const void *a, size_t an, const void *b, size_t bn)
{
	size_t n = an < bn ? an : bn;
	int c = n ? __builtin_memcmp(a, b, n) : 0;
	if (c)
		return c;
	return an < bn ? -1 : an > bn;
}

/*
 * Merge n child iterators into one in internal order (engine/table/merge.c).
 * Takes ownership of the children (destroyed with the merger).  Children
 * earlier in the array win ties of equal (key, seq), which never happen
 * between distinct sources in practice.  On success *out is the merger.
 */
int kv_merge_iter_new(struct kv_iter **children, size_t n, struct kv_iter **out);

#endif /* MEMWALFS_ITER_H */
