/*
 * sst_flush.h - the two steps of a MemTable flush that do not need the
 * engine's locks (engine/table/sst_flush.c): write a frozen MemTable as an
 * SSTable, and promote it with one conditional manifest commit.
 *
 * The engine's flusher thread (writer side, h4) calls them in order:
 *
 *   1. sst_flush_build(): streams every entry of the frozen MemTable into
 *      "sst/<epoch:20>-<id:20>".  The caller gives every attempt an id of
 *      its own (the engine: flush.c, "SSTable names"), so an earlier
 *      attempt that lands late can never overwrite a referenced table; the
 *      epoch in the name keeps other writers out.  Nothing is referenced
 *      yet: a crash here leaves an orphan object that GC removes.
 *   2. sst_flush_promote(): manifest N+1 = N + this SSTable (level 0),
 *      wal_covered advanced to the first WAL position NOT in the MemTable,
 *      last_seq and next_sst raised, committed with put_if_absent.  This is
 *      the commit point; only after it returns 0 may the frozen MemTable be
 *      dropped and the WAL before wal_covered be trimmed.
 *
 * Both may be called from any thread; neither touches engine state.
 */
#ifndef MEMWALFS_SST_FLUSH_H
#define MEMWALFS_SST_FLUSH_H

#include <stdbool.h>
#include <stdint.h>

#include "manifest.h"
#include "memtable.h"
#include "sst.h"

#define SST_PREFIX "sst/"

/* Write "sst/<epoch:20>-<id:20>" into buf (FMT_NAME_MAX bytes). */
void sst_flush_name(char *buf, uint64_t epoch, uint64_t id);

/*
 * The blob_ref callback of the builder for engine tables: decodes a blob
 * descriptor (format.h) and reports pack id = be64 epoch || be64 position
 * and the blob length.  -EUCLEAN for a malformed descriptor.
 */
int sst_flush_blob_ref(void *arg, const void *desc, size_t dlen, struct sst_pack_ref *ref);

/*
 * Write every entry of m (frozen: no more inserts) as the SSTable named by
 * (epoch, id).  o may be NULL (defaults with sst_flush_blob_ref).
 * Promotion: with promote_min > 0, each KV_INLINE value of at least
 * promote_min bytes (a blob the WAL entry carried, docs/WAL.md) is appended
 * to the flush pack pack/<epoch>-<PACK_POS_FLUSH | id> and the table holds
 * its descriptor (KV_BLOB) instead; that pack is written (and durable)
 * before the table is finished, and *pack (may be NULL) receives a
 * reference to it, or NULL when nothing was promoted.  On
 * success *out describes the table for the manifest (level 0; free its
 * strings with the manifest, or by hand: name, smallest, largest are
 * malloc()ed).  -ENODATA for an empty MemTable (nothing is written); store
 * errors, -ENOMEM, -EINVAL.
 */
struct pack;
int sst_flush_build(struct store *st, struct memtable *m, uint64_t epoch, uint64_t id,
                    const struct sst_builder_opts *o, size_t promote_min, struct pack **pack,
                    struct manifest_sst *out);

/*
 * Commit manifest cur->version + 1 = *cur plus a deep copy of *add
 * (appended: the list is oldest first), with wal_covered raised to
 * wal_covered, last_seq to add->seq_max and next_sst past add->id.  On
 * success *next holds the new manifest (free with manifest_clear()).
 * -ESTALE when that version already exists (another writer committed: we
 * are fenced; the unreferenced SSTable is deleted, best effort); -EIO or
 * other store errors with an unknown outcome (nothing is deleted);
 * -ENOMEM.
 */
int sst_flush_promote(struct store *st, bool conditional, const struct manifest *cur,
                      const struct manifest_sst *add, uint64_t wal_covered, struct manifest *next);

#endif /* MEMWALFS_SST_FLUSH_H */
