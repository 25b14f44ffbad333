/*
 * dbiter.h - the user-level view of an internal iterator at a snapshot
 * (engine/table/dbiter.c), after LevelDB's db/db_iter.cc.
 *
 * An internal iterator (iter.h; normally the merge of the MemTables and
 * SSTables) yields every version of every key, newest first.  A dbiter turns
 * it into what a scan shows: for each user key in [lower, upper), the newest
 * entry with sequence <= snap; a key whose newest visible entry is KV_DELETE
 * is hidden, and so are all its older versions.  The entry's type
 * (KV_INLINE or KV_BLOB) and raw value are exposed: the caller (engine.c)
 * resolves a KV_BLOB descriptor into the blob's bytes.
 *
 * Typical use from engine_iter_new():
 *
 *   kids[] = memtable iters (+ SST iters); kv_merge_iter_new(kids, n, &mi);
 *   dbiter_new(mi, snap, start, slen, end, elen, &d);   (d owns mi now)
 *   for (dbiter_seek_first(d); dbiter_valid(d); dbiter_next(d)) ...
 *   rc = dbiter_status(d); dbiter_free(d);
 *
 * Thread use: one thread at a time.  Borrowed pointers (key, value) are
 * valid until the next move (seek, next) or dbiter_free().
 */
#ifndef MEMWALFS_DBITER_H
#define MEMWALFS_DBITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iter.h"

struct dbiter;

/*
 * Create a view over internal (ownership moves to the dbiter on success
 * only; on failure the caller still owns internal).  snap: entries with a
 * larger sequence are invisible.  lower (inclusive) and upper (exclusive)
 * bound the keys shown; NULL means unbounded (lower/upper are copied).
 * The new dbiter is unpositioned (invalid) until a seek.  -ENOMEM.
 */
int dbiter_new(struct kv_iter *internal, uint64_t snap, const void *lower, size_t lower_len,
               const void *upper, size_t upper_len, struct dbiter **out);

/* Free the view and the internal iterator it owns.  Accepts NULL. */
void dbiter_free(struct dbiter *d);

/* Position at the first visible key >= lower. */
void dbiter_seek_first(struct dbiter *d);

/* Position at the first visible key >= max(key, lower). */
void dbiter_seek(struct dbiter *d, const void *key, size_t klen);

/* true while positioned at a visible key (false at the end or on error). */
bool dbiter_valid(const struct dbiter *d);

/* Move to the next visible user key.  Requires dbiter_valid(). */
void dbiter_next(struct dbiter *d);

/* The current user key (borrowed).  Requires dbiter_valid(). */
const void *dbiter_key(const struct dbiter *d, size_t *klen);

/* Type of the current entry: KV_INLINE or KV_BLOB.  Requires dbiter_valid(). */
enum kv_type dbiter_type(const struct dbiter *d);

/*
 * Raw value of the current entry (borrowed): the user value for KV_INLINE,
 * the encoded blob descriptor for KV_BLOB.  Requires dbiter_valid().
 */
const void *dbiter_value(const struct dbiter *d, size_t *vlen);

/* Sequence number of the current entry.  Requires dbiter_valid(). */
uint64_t dbiter_seq(const struct dbiter *d);

/* 0, or the error of the internal iterator (-ENOMEM of our own) that ended the scan. */
int dbiter_status(const struct dbiter *d);

#endif /* MEMWALFS_DBITER_H */
