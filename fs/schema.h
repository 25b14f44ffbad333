/*
 * schema.h - how the filesystem is laid out as engine keys and values
 * (docs/SCHEMA.md is the page for this header).
 *
 * Every key starts with a one-byte tag followed by big-endian integers, so
 * that related keys sort together and one prefix scan finds them:
 *
 *   'S'                        superblock  (format version, chunk size, next inode)
 *   'I' ino:be64               inode record (attributes; inline symlink target)
 *   'D' parent:be64 name       directory entry -> child ino:be64, type:u8
 *   'E' ino:be64 end:be64      file data extent: the value is bytes [end - len, end)
 *   'A' ino:be64 end:be64      allocated range [start, end) not written (fallocate):
 *                              the value is start:be64
 *   'X' ino:be64 name          extended attribute value
 *   'O' ino:be64               orphan: unlinked while open, reclaim later
 *
 * 'C' (fixed-size chunks, format 1) is retired and stays reserved.  Tags
 * written to storage never change meaning.  All functions here are
 * pure (no engine, no FUSE) and thread-safe.
 */
#ifndef MEMWALFS_FS_SCHEMA_H
#define MEMWALFS_FS_SCHEMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Key tags (one byte, first byte of every key). */
#define SCHEMA_TAG_SUPER 'S'
#define SCHEMA_TAG_INODE 'I'
#define SCHEMA_TAG_DENTRY 'D'
#define SCHEMA_TAG_CHUNK 'C' /* retired with format 1; reserved */
#define SCHEMA_TAG_EXTENT 'E'
#define SCHEMA_TAG_XATTR 'X'
#define SCHEMA_TAG_ORPHAN 'O'
#define SCHEMA_TAG_ALLOC 'A'

/* The format version this code reads and writes. */
#define SCHEMA_VERSION 2
/* Magic at the start of the superblock value: "MWFS". */
#define SCHEMA_SUPER_MAGIC 0x4d574653u

/* Smallest and largest chunk size a superblock may record. */
#define SCHEMA_CHUNK_MIN 4096u
#define SCHEMA_CHUNK_MAX (64u << 20)

/* Longest file name (bytes) and longest xattr name. */
#define SCHEMA_NAME_MAX 255
#define SCHEMA_XATTR_NAME_MAX 255
/* Longest key: tag + ino + name. */
#define SCHEMA_KEY_MAX (1 + 8 + SCHEMA_NAME_MAX)
/* Root directory inode number (FUSE_ROOT_ID). */
#define SCHEMA_ROOT_INO 1

/* The superblock value. */
struct schema_super {
	uint32_t version;    /* SCHEMA_VERSION of the writer that formatted it */
	uint32_t chunk_size; /* largest extent and read-ahead unit (power of two) */
	uint64_t next_ino;   /* inode numbers >= this were never handed out */
};

/* Encoded superblock length: magic:be32 version:be32 chunk:be32 next:be64. */
#define SCHEMA_SUPER_LEN 20

/* One inode's attributes, as stored. */
struct schema_inode {
	uint32_t mode;     /* file type and permission bits */
	uint32_t uid, gid; /* owner */
	uint32_t nlink;    /* hard links (dirs: 2 + subdirectories) */
	uint64_t size;     /* bytes (symlink: target length) */
	uint64_t rdev;     /* device number for chr/blk nodes */
	uint64_t parent;   /* directories: the parent's inode number */
	int64_t atime_sec, mtime_sec, ctime_sec;
	uint32_t atime_nsec, mtime_nsec, ctime_nsec;
	uint64_t stored; /* regular files: bytes in extents and allocated ranges (st_blocks) */
};

/* Encoded inode record length without the inline symlink target. */
#define SCHEMA_INODE_LEN 85

/* Keys: each writes into p (at least SCHEMA_KEY_MAX bytes), returns the length. */
size_t schema_key_super(uint8_t *p);
size_t schema_key_inode(uint8_t *p, uint64_t ino);
size_t schema_key_dentry(uint8_t *p, uint64_t parent, const char *name, size_t nlen);
/* Prefix of every dentry of parent ('D' parent): 9 bytes. */
size_t schema_key_dentry_prefix(uint8_t *p, uint64_t parent);
/* The extent of ino that ends at byte end (exclusive). */
size_t schema_key_extent(uint8_t *p, uint64_t ino, uint64_t end);
size_t schema_key_extent_prefix(uint8_t *p, uint64_t ino);
/* The allocated range of ino that ends at byte end (exclusive); value: start:be64. */
size_t schema_key_alloc(uint8_t *p, uint64_t ino, uint64_t end);
size_t schema_key_alloc_prefix(uint8_t *p, uint64_t ino);
#define SCHEMA_ALLOC_LEN 8
size_t schema_key_xattr(uint8_t *p, uint64_t ino, const char *name, size_t nlen);
size_t schema_key_xattr_prefix(uint8_t *p, uint64_t ino);
size_t schema_key_orphan(uint8_t *p, uint64_t ino);

/*
 * The exclusive upper bound of a prefix: copies prefix p (n bytes) into out
 * and increments it as a big-endian number.  Returns n, or 0 when the prefix
 * is all 0xff (no bound: scan to the end).
 */
size_t schema_prefix_end(const uint8_t *p, size_t n, uint8_t *out);

/* Decode the big-endian integer at byte offset off of a key of length n (0 if short). */
uint64_t schema_key_u64(const uint8_t *key, size_t n, size_t off);

/* Superblock value: encode into p (SCHEMA_SUPER_LEN bytes) / decode. */
void schema_super_encode(const struct schema_super *s, uint8_t *p);
/*
 * Decode a superblock.  -EUCLEAN for a short value, bad magic, a chunk
 * size that is not a power of two in [SCHEMA_CHUNK_MIN, SCHEMA_CHUNK_MAX]
 * or next_ino <= the root; -EPROTONOSUPPORT for a version this code does
 * not know (s->version is still filled so the caller can report it).
 */
int schema_super_decode(const uint8_t *p, size_t n, struct schema_super *s);

/*
 * Inode record: encode into p (SCHEMA_INODE_LEN + tlen bytes), where
 * target/tlen is the inline symlink target (NULL/0 for other files).
 * Returns the encoded length.
 */
size_t schema_inode_encode(const struct schema_inode *in, const char *target, size_t tlen,
                           uint8_t *p);
/*
 * Decode an inode record.  *target and *tlen (may be NULL) point into p at the
 * inline symlink target (valid as long as p).  -EUCLEAN if malformed.
 */
int schema_inode_decode(const uint8_t *p, size_t n, struct schema_inode *in, const uint8_t **target,
                        size_t *tlen);

/* Dentry value: child ino:be64 type:u8 (mode >> 12). */
#define SCHEMA_DENTRY_LEN 9
void schema_dentry_encode(uint64_t ino, uint32_t mode, uint8_t *p);
/* -EUCLEAN if short, child 0 or not a file type; *dtype gets S_IFMT bits of the child. */
int schema_dentry_decode(const uint8_t *p, size_t n, uint64_t *ino, uint32_t *dtype);

#endif /* MEMWALFS_FS_SCHEMA_H */
