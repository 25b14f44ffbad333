/*
 * snapshot.h - snapshot objects (engine/core/snapshot.c, docs/SNAPSHOTS.md): the
 * codec and the names, for the engine's open, GC and the tools.  The
 * operations themselves are in engine.h (engine_snapshot_*).
 */
#ifndef MEMWALFS_SNAPSHOT_H
#define MEMWALFS_SNAPSHOT_H

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

#endif /* MEMWALFS_SNAPSHOT_H */
