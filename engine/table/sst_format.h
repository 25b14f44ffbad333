/*
 * sst_format.h - the byte layout of an SSTable object (mirrors docs/SST.md,
 * which is the reference: grammar, field tables, worked example, reasons).
 *
 *     sstable   := header data_block* filter_block? props_block index_block footer
 *     header    := magic:be64 version:be32 flags:be32               (16 bytes)
 *     *_block   := payload trailer
 *     trailer   := ctype:u8 raw_len:be32 checksum:be64              (13 bytes)
 *     footer    := index:handle filter:handle props:handle
 *                  version:be32 flags:be32 checksum:be64 magic:be64 (72 bytes)
 *     handle    := offset:be64 size:be64     (size of the payload, no trailer)
 *
 * A payload is the block's contents, compressed with zstd (ctype 1) or
 * stored raw (ctype 0); raw_len is the uncompressed length; checksum is
 * XXH3-64 of the stored payload seeded with (ctype << 32 | raw_len), so the
 * trailer fields are covered too.  The footer checksum is XXH3-64 of its
 * first 56 bytes.  Every integer is big-endian (coding.h).
 *
 * Data and index blocks share one entry encoding (sst_block.h):
 *
 *     entry     := shared:varint unshared:varint vlen:varint seq:varint
 *                  type:u8 key_delta[unshared] value[vlen]
 *     block     := entry* restart:be32[n] n:be32
 *
 * The encode/decode functions here are pure and thread-safe; decoders never
 * trust their input and say what was wrong through enum sst_fault.
 */
#ifndef MEMWALFS_SST_FORMAT_H
#define MEMWALFS_SST_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* "MWSSTABL": first 8 bytes of the object and last 8 bytes of the footer. */
#define SST_MAGIC UINT64_C(0x4d5753535441424c)

/* Format version written by this code; readers refuse anything newer. */
#define SST_VERSION 1

#define SST_HEADER_SIZE 16
#define SST_TRAILER_SIZE 13
#define SST_HANDLE_SIZE 16
#define SST_FOOTER_SIZE 72

/* Compression types of a block trailer (written to storage: never renumber). */
enum sst_ctype {
	SST_CTYPE_RAW = 0,  /* payload is the block itself */
	SST_CTYPE_ZSTD = 1, /* payload is one zstd frame */
};

/*
 * Limits.  A reader treats a block larger than SST_BLOCK_RAW_MAX as corrupt
 * (so a flipped length never makes it allocate gigabytes); the builder
 * refuses keys and values above the entry limits with -EINVAL.
 */
#define SST_KEY_MAX (64u * 1024)              /* user key bytes */
#define SST_VALUE_MAX (16u * 1024 * 1024)     /* value bytes */
#define SST_BLOCK_RAW_MAX (64u * 1024 * 1024) /* uncompressed block bytes */
#define SST_PACK_ID_MAX 64                    /* bytes of an opaque pack id */

/* Property tags (docs/SST.md "Properties block"; never renumber). */
enum sst_prop_tag {
	SST_PROP_ENTRIES = 1,          /* varint: number of entries */
	SST_PROP_DELETES = 2,          /* varint: KV_DELETE entries */
	SST_PROP_BLOBS = 3,            /* varint: KV_BLOB entries */
	SST_PROP_KEYS = 4,             /* varint: distinct user keys (= keys in the filter) */
	SST_PROP_MIN_SEQ = 5,          /* varint */
	SST_PROP_MAX_SEQ = 6,          /* varint */
	SST_PROP_SMALLEST = 7,         /* bytes: smallest user key */
	SST_PROP_LARGEST = 8,          /* bytes: largest user key */
	SST_PROP_DATA_BLOCKS = 9,      /* varint */
	SST_PROP_RAW_KEY_BYTES = 10,   /* varint: sum of user key lengths */
	SST_PROP_RAW_VALUE_BYTES = 11, /* varint: sum of value lengths */
	SST_PROP_BLOB_BYTES = 12,      /* varint: blob bytes referenced (sum over packs) */
	SST_PROP_PACK_REF = 13,        /* repeated: idlen:varint id[idlen] bytes:varint */
	SST_PROP_BLOOM_BITS = 14,      /* varint: bloom bits per key (0: no filter) */
};

/* What a decoder found wrong (for log lines and tests). */
enum sst_fault {
	SST_OK = 0,
	SST_TRUNCATED,       /* shorter than the fixed part it must hold */
	SST_BAD_MAGIC,       /* not an SSTable (or truncated so the tail is elsewhere) */
	SST_NEWER_VERSION,   /* written by a newer memwalfs: refuse, do not guess */
	SST_BAD_CHECKSUM,    /* bytes changed after writing */
	SST_BAD_LAYOUT,      /* checksums pass but offsets/lengths are impossible */
	SST_BAD_COMPRESSION, /* unknown ctype, or zstd failed / wrong length */
};

/* A human-readable name of a fault ("bad magic", ...). */
const char *sst_fault_str(enum sst_fault f);

/* Where a block is: offset of its payload and the payload's size. */
struct sst_handle {
	uint64_t off;  /* byte offset of the payload in the object */
	uint64_t size; /* payload bytes (the trailer follows them) */
};

/* The decoded footer. */
struct sst_footer {
	struct sst_handle index;  /* the index block */
	struct sst_handle filter; /* the filter block ({0, 0}: none) */
	struct sst_handle props;  /* the properties block */
	uint32_t version;         /* format version */
	uint32_t flags;           /* 0 in version 1 */
};

/* Encode the object header into p[SST_HEADER_SIZE]. */
void sst_header_encode(uint8_t *p);

/* Check a header: SST_OK, SST_BAD_MAGIC or SST_NEWER_VERSION. */
enum sst_fault sst_header_decode(const uint8_t *p);

/* Encode f (version and flags included) into p[SST_FOOTER_SIZE]. */
void sst_footer_encode(const struct sst_footer *f, uint8_t *p);

/*
 * Decode the footer in p[SST_FOOTER_SIZE] of an object of objsize bytes and
 * check that every handle lies between the header and the footer.  Checks
 * in this order: magic, version, checksum, layout.  Fills *f only on SST_OK.
 */
enum sst_fault sst_footer_decode(const uint8_t *p, uint64_t objsize, struct sst_footer *f);

/*
 * Seal a block: compress raw[0..n) with zstd at level unless that does not
 * save at least 1/8 (or level is SST_NO_COMPRESSION), and append the
 * trailer.  *out is a malloc()ed payload+trailer of *outlen bytes, owned by
 * the caller.  -ENOMEM; -EINVAL if n > SST_BLOCK_RAW_MAX.
 */
#define SST_NO_COMPRESSION (-1000)
int sst_block_seal(const uint8_t *raw, size_t n, int level, uint8_t **out, size_t *outlen);

/*
 * Verify and unpack a stored block: buf holds payload+trailer (n =
 * handle.size + SST_TRAILER_SIZE).  On success returns 0 and *raw is a
 * malloc()ed copy of the block contents (*rawlen bytes) owned by the caller.
 * Returns -EUCLEAN with *fault set (SST_TRUNCATED, SST_BAD_CHECKSUM,
 * SST_BAD_COMPRESSION, SST_BAD_LAYOUT for a length over the limit), or
 * -ENOMEM; *raw is untouched on failure.
 */
int sst_block_unseal(const uint8_t *buf, size_t n, uint8_t **raw, size_t *rawlen,
                     enum sst_fault *fault);

/* Encode a handle as two varints at p (up to 20 bytes); returns the length. */
size_t sst_handle_encode(const struct sst_handle *h, uint8_t *p);
/* Decode a handle from [p, end); returns bytes consumed, 0 if corrupt. */
size_t sst_handle_decode(const uint8_t *p, const uint8_t *end, struct sst_handle *h);

_Static_assert(SST_HEADER_SIZE == 8 + 4 + 4, "header: magic, version, flags");
_Static_assert(SST_TRAILER_SIZE == 1 + 4 + 8, "trailer: ctype, raw_len, checksum");
_Static_assert(SST_HANDLE_SIZE == 8 + 8, "footer handle: offset, size");
_Static_assert(SST_FOOTER_SIZE == 3 * SST_HANDLE_SIZE + 4 + 4 + 8 + 8,
               "footer: 3 handles, version, flags, checksum, magic");
_Static_assert(SST_BLOCK_RAW_MAX <= UINT32_MAX, "raw_len is a be32");

#endif /* MEMWALFS_SST_FORMAT_H */
