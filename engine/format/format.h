/*
 * format.h - the bytes of every object the engine writes, in one place.
 *
 * This header mirrors docs/WAL.md, docs/PACKS.md and docs/MANIFEST.md; if
 * the two disagree, it is a bug in both.  Every integer is big-endian
 * (util/coding.h), every object starts with a 4-byte magic and a 2-byte
 * version, every fixed-size header/trailer is pinned by _Static_assert, and
 * every checksum is XXH3_64 (libxxhash) of the bytes it names.
 *
 * Readers report a bad magic, a newer version and a checksum failure
 * distinctly (each -EUCLEAN, with a log line naming the object).
 *
 * Object names (all fixed-width decimal so that byte order = numeric order):
 *
 *   wal/<position:20>                 one committed group (the commit point)
 *   pack/<epoch:20>-<position:20>     the blob pack of the group at position,
 *                                     written by the writer of that epoch; or,
 *                                     position = PACK_POS_FLUSH | sst id, the
 *                                     blobs a flush promoted from the WAL
 *   manifest/<version:20>             manifest version N (never rewritten)
 *   hint/manifest                     the latest manifest version (overwritten,
 *                                     never trusted alone)
 *   mounts/<id:16 hex>                the lease of one mount (text; overwritten by
 *                                     its renewals; docs/REGIONS.md)
 *   <region prefix>holder/<epoch:20>  who claims epoch of a region (text; created
 *                                     once, before the claim; docs/REGIONS.md)
 *   regions/<version:20>              the region map, version N (text; created once,
 *                                     never rewritten; docs/REGIONS.md)
 *
 * Region rid > 0 keeps its objects under "r/<rid>/" (decimal rid); region 0, the
 * whole store as before regions, at the root (prefix "").
 */
#ifndef MEMWALFS_FORMAT_H
#define MEMWALFS_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------ */
/* Object names                                                        */
/* ------------------------------------------------------------------ */

#define FMT_WAL_PREFIX "wal/"
#define FMT_PACK_PREFIX "pack/"
#define FMT_MANIFEST_PREFIX "manifest/"
#define FMT_HINT_KEY "hint/manifest"
#define FMT_MOUNTS_PREFIX "mounts/"
#define FMT_HOLDER_PREFIX "holder/" /* under the region's prefix */
#define FMT_REGIONS_PREFIX "regions/"
#define FMT_BELL_KEY "bell" /* the store's doorbell (docs/REGIONS.md "The bell") */
/* Large enough for any region prefix ("r/4294967295/") plus NUL. */
#define FMT_REGION_PREFIX_MAX 16
/* Large enough for the longest name above plus NUL. */
#define FMT_NAME_MAX 64

/* ------------------------------------------------------------------ */
/* WAL entry (docs/WAL.md)                                             */
/* ------------------------------------------------------------------ */

#define WAL_MAGIC 0x4D57414CU /* "MWAL" */
/*
 * Version 2: writers keep up to WAL_WINDOW entries in flight and fence that
 * many positions at open (docs/WAL.md); version 1 entries read the same.  A
 * program of version 1 refuses a WAL with version 2 entries, so it cannot
 * fence a writer of version 2 with its single fence.
 */
#define WAL_VERSION 2
#define WAL_HEADER_SIZE 64

/* Header flags. */
#define WAL_FLAG_FENCE 0x0001 /* a fence entry: no records, claims the position for epoch */

/* Header field offsets. */
#define WAL_OFF_MAGIC 0        /* u32 WAL_MAGIC */
#define WAL_OFF_VERSION 4      /* u16 WAL_VERSION */
#define WAL_OFF_FLAGS 6        /* u16 WAL_FLAG_* */
#define WAL_OFF_EPOCH 8        /* u64 writer epoch */
#define WAL_OFF_POSITION 16    /* u64 position (must match the object name) */
#define WAL_OFF_FIRST_SEQ 24   /* u64 sequence number of the first op */
#define WAL_OFF_OP_COUNT 32    /* u32 number of ops in the body */
#define WAL_OFF_BATCH_COUNT 36 /* u32 number of batches in the body */
#define WAL_OFF_BODY_LEN 40    /* u64 body length in bytes */
#define WAL_OFF_BODY_HASH 48   /* u64 XXH3_64 of the body */
#define WAL_OFF_HEAD_HASH 56   /* u64 XXH3_64 of header bytes [0, 56) */
_Static_assert(WAL_OFF_HEAD_HASH + 8 == WAL_HEADER_SIZE, "WAL header layout");

/*
 * Body: batch_count batches, each
 *   varint op_count, then op_count ops:
 *   u8 type (enum kv_type), varint klen, key, varint vlen, value
 * Op i of the entry (counting across batches) has sequence first_seq + i.
 */

/* ------------------------------------------------------------------ */
/* Blob pack (docs/PACKS.md)                                           */
/* ------------------------------------------------------------------ */

#define PACK_MAGIC 0x4D57504BU      /* "MWPK" */
#define PACK_TAIL_MAGIC 0x4D575045U /* "MWPE" */
#define PACK_VERSION 1
#define PACK_HEADER_SIZE 32
#define PACK_TRAILER_SIZE 24

/*
 * A pack written by a MemTable flush (the blobs WAL entries carried,
 * promoted) has position PACK_POS_FLUSH | sst_id, the id of the SSTable that
 * refers to it: never a WAL position (those stay below 2^63).
 */
#define PACK_POS_FLUSH (1ull << 63)

#define PACK_OFF_MAGIC 0      /* u32 PACK_MAGIC */
#define PACK_OFF_VERSION 4    /* u16 PACK_VERSION */
#define PACK_OFF_FLAGS 6      /* u16 0 */
#define PACK_OFF_EPOCH 8      /* u64 writer epoch */
#define PACK_OFF_POSITION 16  /* u64 WAL position of the group */
#define PACK_OFF_HEAD_HASH 24 /* u64 XXH3_64 of header bytes [0, 24) */
_Static_assert(PACK_OFF_HEAD_HASH + 8 == PACK_HEADER_SIZE, "pack header layout");

/* Trailer, at object size - PACK_TRAILER_SIZE. */
#define PACK_TOFF_DATA_LEN 0   /* u64 bytes of blob data between header and trailer */
#define PACK_TOFF_COUNT 8      /* u32 number of blobs */
#define PACK_TOFF_MAGIC 12     /* u32 PACK_TAIL_MAGIC */
#define PACK_TOFF_DATA_HASH 16 /* u64 XXH3_64 of all blob data */
_Static_assert(PACK_TOFF_DATA_HASH + 8 == PACK_TRAILER_SIZE, "pack trailer layout");

/* ------------------------------------------------------------------ */
/* Blob descriptor: the value of a KV_BLOB entry (WAL records, SSTs)   */
/* ------------------------------------------------------------------ */

/*
 * A descriptor names a value that is a byte range [start, start + length)
 * of one blob: the blob is blob_len bytes at offset `offset` of pack
 * epoch-position.  The blob is cut into blocks of BLOB_BLOCK_SIZE bytes
 * counted from its first byte (the last one shorter); the descriptor carries
 * the XXH3_64 of every block its range touches, so that a ranged GET of only
 * the blocks a read needs can be verified.  A value put whole names its whole
 * blob (start 0, length blob_len); a slice of it (engine_batch_put_ref())
 * keeps only the hashes of its own blocks.
 */
#define BLOB_DESC_KIND 2      /* kind 1 (one hash per blob) was format 1: refused */
#define BLOB_DESC_KIND_V1 1   /* recognised only to say it is too old */
#define BLOB_BLOCK_SIZE 65536 /* checksummed block of a blob */
#define BLOB_DESC_FIXED 49    /* bytes before the block hashes */

#define BLOB_OFF_KIND 0      /* u8 BLOB_DESC_KIND */
#define BLOB_OFF_EPOCH 1     /* u64 epoch of the pack */
#define BLOB_OFF_POSITION 9  /* u64 position of the pack */
#define BLOB_OFF_OFFSET 17   /* u64 offset of the blob in the pack object */
#define BLOB_OFF_BLOB_LEN 25 /* u64 length of the whole blob */
#define BLOB_OFF_START 33    /* u64 first byte of the value within the blob */
#define BLOB_OFF_LENGTH 41   /* u64 value length */
#define BLOB_OFF_HASHES 49   /* u64 XXH3_64 of each block touched by the value, in order */
_Static_assert(BLOB_OFF_HASHES == BLOB_DESC_FIXED, "blob descriptor layout");

/* A decoded blob descriptor. */
struct blob_desc {
	uint64_t epoch;        /* epoch of the writer that made the pack */
	uint64_t position;     /* WAL position of the group (the pack's name) */
	uint64_t offset;       /* byte offset of the blob inside the pack object */
	uint64_t blob_len;     /* length of the whole blob */
	uint64_t start;        /* first byte of the value within the blob */
	uint64_t length;       /* value length in bytes */
	const uint8_t *hashes; /* be64 hash of each block of [start, start + length) (borrowed) */
};

/* First block index and number of blocks that [start, start + length) touches. */
uint64_t blob_desc_first_block(const struct blob_desc *d);
uint64_t blob_desc_nblocks(const struct blob_desc *d);
/* Encoded size of d. */
size_t blob_desc_size(const struct blob_desc *d);
/* Encoded size of the descriptor of a whole blob of len bytes. */
size_t blob_desc_size_for(uint64_t len);
/* Encode d into exactly blob_desc_size(d) bytes at p. */
void blob_desc_encode(uint8_t *p, const struct blob_desc *d);
/*
 * Decode; d->hashes points into p.  -EUCLEAN if malformed (size, range, kind
 * unknown), -EPROTONOSUPPORT for a kind-1 descriptor of the old format.
 */
int blob_desc_decode(const void *p, size_t n, struct blob_desc *d);
/*
 * Blob bytes [*from, *to) of the whole blocks that value bytes [off, off + len)
 * of d touch (len > 0, within the value).
 */
void blob_desc_blocks(const struct blob_desc *d, uint64_t off, uint64_t len, uint64_t *from,
                      uint64_t *to);
/*
 * Check n bytes of d's blob starting at blob offset from (whole blocks of d's
 * range, as blob_desc_blocks() gives) against d's hashes.  0, or -EUCLEAN and
 * *bad the blob offset of the first block that fails.
 */
int blob_desc_verify(const struct blob_desc *d, uint64_t from, const uint8_t *buf, uint64_t n,
                     uint64_t *bad);
/* The descriptor of bytes [off, off + len) of d's value (off + len <= d->length). */
void blob_desc_slice(const struct blob_desc *d, uint64_t off, uint64_t len, struct blob_desc *out);

/* ------------------------------------------------------------------ */
/* Manifest (docs/MANIFEST.md)                                          */
/* ------------------------------------------------------------------ */

#define MANIFEST_MAGIC 0x4D574D46U /* "MWMF" */
#define MANIFEST_VERSION 1
#define MANIFEST_HEADER_SIZE 80

#define MAN_OFF_MAGIC 0        /* u32 MANIFEST_MAGIC */
#define MAN_OFF_VERSION 4      /* u16 MANIFEST_VERSION */
#define MAN_OFF_FLAGS 6        /* u16 0 */
#define MAN_OFF_MVERSION 8     /* u64 manifest version N (must match the name) */
#define MAN_OFF_EPOCH 16       /* u64 writer epoch */
#define MAN_OFF_WAL_COVERED 24 /* u64 first WAL position NOT covered by SSTables */
#define MAN_OFF_LAST_SEQ 32    /* u64 highest sequence number in the SSTables */
#define MAN_OFF_NEXT_SST 40    /* u64 next SSTable id to allocate */
#define MAN_OFF_REC_COUNT 48   /* u32 number of body records */
#define MAN_OFF_CLAIM 52       /* u32 claim nonce (random per epoch claim; was reserved 0) */
#define MAN_OFF_BODY_LEN 56    /* u64 body length */
#define MAN_OFF_BODY_HASH 64   /* u64 XXH3_64 of the body */
#define MAN_OFF_HEAD_HASH 72   /* u64 XXH3_64 of header bytes [0, 72) */
_Static_assert(MAN_OFF_HEAD_HASH + 8 == MANIFEST_HEADER_SIZE, "manifest header layout");

/*
 * Body records, each: u8 tag, varint len, len bytes of payload.  Unknown
 * tags are an error (a newer writer would have bumped MANIFEST_VERSION).
 * Tags never change meaning.
 */
enum manifest_tag {
	MAN_TAG_SST = 1, /* a live SSTable: see manifest.c sst_encode() */
	MAN_TAG_GC = 2,  /* an object awaiting deletion: varint since_version, name */
};

/* Hint object: the latest manifest version as far as its writer knew. */
#define HINT_MAGIC 0x4D574854U /* "MWHT" */
#define HINT_VERSION 1
#define HINT_SIZE 24
#define HINT_OFF_MAGIC 0    /* u32 HINT_MAGIC */
#define HINT_OFF_VERSION 4  /* u16 HINT_VERSION */
#define HINT_OFF_FLAGS 6    /* u16 0 */
#define HINT_OFF_MVERSION 8 /* u64 manifest version */
#define HINT_OFF_HASH 16    /* u64 XXH3_64 of bytes [0, 16) */
_Static_assert(HINT_OFF_HASH + 8 == HINT_SIZE, "hint layout");

/* ------------------------------------------------------------------ */
/* Names                                                               */
/* ------------------------------------------------------------------ */

/* Write "wal/<pos>" into buf (FMT_NAME_MAX bytes). */
void fmt_wal_name(char *buf, uint64_t position);
/* Write "pack/<epoch>-<pos>" into buf (FMT_NAME_MAX bytes). */
void fmt_pack_name(char *buf, uint64_t epoch, uint64_t position);
/* Write "manifest/<version>" into buf (FMT_NAME_MAX bytes). */
void fmt_manifest_name(char *buf, uint64_t version);
/* Parse a name made by fmt_wal_name / fmt_manifest_name; -EINVAL otherwise. */
int fmt_parse_wal_name(const char *name, uint64_t *position);
int fmt_parse_manifest_name(const char *name, uint64_t *version);
/* The prefix of region rid's objects into buf (FMT_REGION_PREFIX_MAX): "" for 0, "r/<rid>/". */
void fmt_region_prefix(char *buf, uint32_t rid);
/*
 * The region whose prefix name starts with: rid for "r/<rid>/..." (decimal, no leading
 * zero, 1 .. 2^23 - 1), else 0 (region 0's objects, or not a region's name).
 */
uint32_t fmt_parse_region_prefix(const char *name);
/* "<region prefix>holder/<epoch:20>" into buf (FMT_NAME_MAX). */
void fmt_holder_name(char *buf, uint32_t rid, uint64_t epoch);
/* Parse a region 0 holder name "holder/<epoch:20>".  0 or -EINVAL. */
int fmt_parse_holder_name(const char *name, uint64_t *epoch);
/* "regions/<version:20>" into buf (FMT_NAME_MAX). */
void fmt_regions_name(char *buf, uint64_t version);
/* Parse "regions/<version:20>".  0 or -EINVAL. */
int fmt_parse_regions_name(const char *name, uint64_t *version);

/* XXH3_64 of n bytes (the one checksum of every format). */
uint64_t fmt_hash(const void *p, size_t n);

#endif /* MEMWALFS_FORMAT_H */
