/*
 * snapshot.h - snapshot objects (engine/core/snapshot.c, docs/SNAPSHOTS.md): the
 * codec and the names, for the engine's open, GC and the tools.  The
 * operations themselves are in engine.h (engine_snapshot_*).
 */
#ifndef MEMWALFS_SNAPSHOT_H
#define MEMWALFS_SNAPSHOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "engine.h"

/* Snapshot objects are "snap/<name>". */
#define SNAP_PREFIX "snap/"
#define SNAP_NAME_MAX 100

/* The object: see docs/SNAPSHOTS.md for the table. */
#define SNAP_MAGIC 0x4D57534Eu /* "MWSN" */
#define SNAP_VERSION 1
#define SNAP_OFF_MAGIC 0
#define SNAP_OFF_VERSION 4
#define SNAP_OFF_FLAGS 6
#define SNAP_OFF_MANIFEST 8
#define SNAP_OFF_EPOCH 16
#define SNAP_OFF_WAL_FROM 24
#define SNAP_OFF_WAL_END 32
#define SNAP_OFF_CREATED 40
#define SNAP_OFF_NAME_LEN 48
#define SNAP_FIXED_SIZE 50 /* then the name, then XXH3_64 of everything before it */
#define SNAP_HASH_SIZE 8
/* Attempts of a create when GC removed what it was about to pin. */
#define SNAP_CREATE_TRIES 4
_Static_assert(SNAP_OFF_NAME_LEN + 2 == SNAP_FIXED_SIZE, "snapshot header layout");

/* 1 when name may name a snapshot: [A-Za-z0-9._-], 1..100 bytes, no leading '.'. */
int snapshot_name_valid(const char *name);

/* Encode s into out (appended).  -ENOMEM. */
int snapshot_encode(const struct engine_snapshot *s, struct mw_buf *out);

/*
 * Decode an object read from key (for the log).  -EUCLEAN (bad magic, checksum,
 * lengths, a bad name), -EPROTONOSUPPORT (a newer version); logged with the key.
 */
int snapshot_decode(const char *key, const void *buf, size_t len, struct engine_snapshot *s);

/*
 * The steps of a create (engine_snapshot_create(), region_snapshot_create()), on one
 * engine's store (a region's view):
 *   snapshot_pin:    the durable state now: the newest manifest V and the first missing
 *                    WAL position after V's covered one, into *s named name (-ENOENT: no
 *                    manifest yet; store errors).  One GET of the hint, one LIST of
 *                    manifest/, one GET of V, one LIST of wal/.  Writes nothing.
 *   snapshot_put:    write s as snap/<name>: excl, by a conditional create (-EEXIST when
 *                    one exists; a HEAD first where the store has none), else overwriting.
 *   snapshot_pinned: 1 when manifest V and every WAL entry of s's range are still there
 *                    (GC took none of it before the object existed), 0 when not, or -errno.
 */
int snapshot_pin(struct store *st, const char *name, struct engine_snapshot *s);
int snapshot_put(struct store *st, const struct engine_snapshot *s, bool excl);
int snapshot_pinned(struct store *st, const struct engine_snapshot *s);

#endif /* MEMWALFS_SNAPSHOT_H */
