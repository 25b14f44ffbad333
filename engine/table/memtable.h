/*
 * memtable.h - the in-memory sorted table that makes every put readable at
 * once (engine/table/memtable.c).
 *
 * Entries are internal entries (iter.h): (user key, sequence, type, value).
 * One writer at a time inserts (the caller serialises inserts); any number of
 * readers may get and iterate concurrently without locks and see either the
 * state before or after each insert.  Entries are never removed or changed:
 * a MemTable only grows until it is frozen, flushed and dropped.
 *
 * Lifetime: reference counted.  memtable_new() returns one reference;
 * readers that outlive the writer's use (iterators, frozen lists) take their
 * own with memtable_ref().  The last memtable_unref() frees it.
 */
#ifndef MEMWALFS_MEMTABLE_H
#define MEMWALFS_MEMTABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iter.h"

struct memtable;

/* Create an empty MemTable with one reference.  -ENOMEM. */
int memtable_new(struct memtable **out);
void memtable_ref(struct memtable *m);
/* Drop a reference; frees on the last.  Accepts NULL. */
void memtable_unref(struct memtable *m);

/*
 * Insert an entry (key and value are copied).  Sequence numbers of the same
 * key must increase.  Caller serialises calls to memtable_add() on one
 * MemTable; concurrent readers are fine.  -ENOMEM.
 */
int memtable_add(struct memtable *m, uint64_t seq, enum kv_type type, const void *key, size_t klen,
                 const void *val, size_t vlen);

/*
 * Find the newest entry of key with sequence <= snap.  Returns 1 and fills
 * *type, *val, *vlen (borrowed: valid while the caller holds a reference) if
 * found, 0 if the MemTable has no entry of that key visible at snap.
 */
int memtable_get(struct memtable *m, const void *key, size_t klen, uint64_t snap,
                 enum kv_type *type, const void **val, size_t *vlen, uint64_t *seq);

/* Bytes used (keys, values, node overhead): what the freeze threshold counts. */
size_t memtable_bytes(const struct memtable *m);
/* Number of entries. */
size_t memtable_count(const struct memtable *m);
/* Highest sequence number inserted (0 if empty). */
uint64_t memtable_max_seq(const struct memtable *m);

/*
 * Iterator over all entries in internal order; holds its own reference on m.
 * Entries inserted after creation may or may not be seen; callers filter by
 * sequence number for a snapshot.
 */
int memtable_iter_new(struct memtable *m, struct kv_iter **out);

#endif /* MEMWALFS_MEMTABLE_H */
