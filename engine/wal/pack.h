/*
 * pack.h - Blob v2 packs (engine/wal/pack.c, docs/PACKS.md).
 *
 * A pack is the one object that holds the blob values of one commit group:
 * header, the blobs back to back, trailer.  While the group is open the
 * writer appends blobs to an in-memory struct pack; readers may copy blob
 * bytes out of it at any time (that is how a blob that is not durable yet is
 * read).  At commit the pack is sealed (trailer written; immutable after)
 * and put under pack/<epoch>-<position>, a name only that writer can use.
 *
 * Reference counted: the group holds one reference, readers that found it in
 * the pending list take their own, and so does each entry of the blob cache
 * made from a committed pack (blobcache.c, blob_cache_pack()).
 */
#ifndef MEMWALFS_PACK_H
#define MEMWALFS_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"

struct pack;
struct store;

/* New empty pack for the group at (epoch, position), one reference.  -ENOMEM. */
int pack_new(uint64_t epoch, uint64_t position, struct pack **out);
void pack_ref(struct pack *p);
/* Drop a reference; frees on the last.  Accepts NULL. */
void pack_unref(struct pack *p);

/*
 * Append one blob; writes its descriptor (blob_desc_size_for(len) bytes,
 * with the hash of each block) to desc.  Called by the writer
 * (one thread at a time, before pack_seal()); concurrent pack_read() calls
 * are fine.  -ENOMEM.
 */
int pack_append(struct pack *p, const void *data, size_t len, uint8_t *desc);

/*
 * Object offset and length of the i-th blob appended (i < pack_count()).
 * Writer thread, or any thread once the pack is sealed.  -ERANGE.
 */
int pack_blob(const struct pack *p, uint32_t i, uint64_t *off, uint64_t *len);

/* Number of blobs and bytes of blob data appended so far. */
uint32_t pack_count(const struct pack *p);
uint64_t pack_data_bytes(const struct pack *p);
uint64_t pack_position(const struct pack *p);
uint64_t pack_epoch(const struct pack *p);

/* Write the header and trailer; no append after.  -ENOMEM. */
int pack_seal(struct pack *p);

/*
 * Put the sealed pack into st under its name (a streaming writer when it is
 * larger than two of the store's parts).  *bytes (may be NULL) receives the
 * object size.  Returns the store's error.
 */
int pack_write(struct pack *p, struct store *st, uint64_t *bytes);

/*
 * Copy len bytes at object offset off (as in a descriptor) into dst.  Any
 * thread, any time.  -ERANGE if the range is not (yet) in the pack.
 */
int pack_read(struct pack *p, uint64_t off, void *dst, size_t len);

/*
 * Check a whole pack object read from the store (name for the log):
 * magic, version, header and data checksums, trailer.  -EPROTONOSUPPORT
 * (a newer format version), -EUCLEAN (anything else wrong).
 */
int pack_verify(const char *name, const void *buf, size_t len);

/*
 * The pool of mappings freed packs left for the next large ones (pack.c):
 * pack_pool_drain() unmaps them all (engine_close() of the last engine, and
 * tests); pack_pool_bytes() is what it holds.  Any thread.
 */
void pack_pool_drain(void);
size_t pack_pool_bytes(void);

#endif /* MEMWALFS_PACK_H */
