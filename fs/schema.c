/*
 * schema.c - key and record coding of the filesystem (see schema.h and
 * docs/SCHEMA.md).  All integers go through util/coding.h (big-endian).
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "coding.h"
#include "schema.h"

/* Inode record body version (first byte of the record). */
#define INODE_REC_V2 2 /* record version (1: format 1, without the stored bytes) */

_Static_assert(SCHEMA_INODE_LEN == 1 + 4 * 4 + 8 * 3 + (8 + 4) * 3 + 8, "inode record size");
_Static_assert(SCHEMA_SUPER_LEN == 4 + 4 + 4 + 8, "superblock size");
_Static_assert(SCHEMA_DENTRY_LEN == 8 + 1, "dentry size");

size_t schema_key_super(uint8_t *p)
{
	p[0] = SCHEMA_TAG_SUPER;
	return 1;
}

static size_t tag_ino(uint8_t *p, uint8_t tag, uint64_t ino)
{
	p[0] = tag;
	put_be64(p + 1, ino);
	return 9;
}

size_t schema_key_inode(uint8_t *p, uint64_t ino)
{
	return tag_ino(p, SCHEMA_TAG_INODE, ino);
}

size_t schema_key_dentry(uint8_t *p, uint64_t parent, const char *name, size_t nlen)
{
	size_t n = tag_ino(p, SCHEMA_TAG_DENTRY, parent);
	memcpy(p + n, name, nlen);
	return n + nlen;
}

size_t schema_key_dentry_prefix(uint8_t *p, uint64_t parent)
{
	return tag_ino(p, SCHEMA_TAG_DENTRY, parent);
}

/* tag ino:be64 end:be64: an extent or an allocated range, keyed by where it ends. */
static size_t tag_ino_end(uint8_t *p, uint8_t tag, uint64_t ino, uint64_t end)
{
	size_t n = tag_ino(p, tag, ino);
	put_be64(p + n, end);
	return n + 8;
}

size_t schema_key_extent(uint8_t *p, uint64_t ino, uint64_t end)
{
	return tag_ino_end(p, SCHEMA_TAG_EXTENT, ino, end);
}

size_t schema_key_extent_prefix(uint8_t *p, uint64_t ino)
{
	return tag_ino(p, SCHEMA_TAG_EXTENT, ino);
}

size_t schema_key_alloc(uint8_t *p, uint64_t ino, uint64_t end)
{
	return tag_ino_end(p, SCHEMA_TAG_ALLOC, ino, end);
}

size_t schema_key_alloc_prefix(uint8_t *p, uint64_t ino)
{
	return tag_ino(p, SCHEMA_TAG_ALLOC, ino);
}

size_t schema_key_xattr(uint8_t *p, uint64_t ino, const char *name, size_t nlen)
{
	size_t n = tag_ino(p, SCHEMA_TAG_XATTR, ino);
	memcpy(p + n, name, nlen);
	return n + nlen;
}

size_t schema_key_xattr_prefix(uint8_t *p, uint64_t ino)
{
	return tag_ino(p, SCHEMA_TAG_XATTR, ino);
}

size_t schema_key_orphan(uint8_t *p, uint64_t ino)
{
	return tag_ino(p, SCHEMA_TAG_ORPHAN, ino);
}

size_t schema_prefix_end(const uint8_t *p, size_t n, uint8_t *out)
{
	memcpy(out, p, n);
	for (size_t i = n; i > 0; i--) {
		if (out[i - 1] != 0xff) {
			out[i - 1]++;
			return i;
		}
		out[i - 1] = 0;
	}
	return 0;
}

uint64_t schema_key_u64(const uint8_t *key, size_t n, size_t off)
{
	if (n < off + 8)
		return 0;
	return get_be64(key + off);
}

void schema_super_encode(const struct schema_super *s, uint8_t *p)
{
	put_be32(p, SCHEMA_SUPER_MAGIC);
	put_be32(p + 4, s->version);
	put_be32(p + 8, s->chunk_size);
	put_be64(p + 12, s->next_ino);
}

int schema_super_decode(const uint8_t *p, size_t n, struct schema_super *s)
{
	if (n < SCHEMA_SUPER_LEN || get_be32(p) != SCHEMA_SUPER_MAGIC)
		return -EUCLEAN;
	s->version = get_be32(p + 4);
	s->chunk_size = get_be32(p + 8);
	s->next_ino = get_be64(p + 12);
	if (s->version != SCHEMA_VERSION)
		return -EPROTONOSUPPORT;
	if (s->chunk_size < SCHEMA_CHUNK_MIN || s->chunk_size > SCHEMA_CHUNK_MAX ||
	    (s->chunk_size & (s->chunk_size - 1)) || s->next_ino <= SCHEMA_ROOT_INO)
		return -EUCLEAN;
	return 0;
}

static uint8_t *put_time(uint8_t *p, int64_t sec, uint32_t nsec)
{
	put_be64(p, (uint64_t)sec);
	put_be32(p + 8, nsec);
	return p + 12;
}

size_t schema_inode_encode(const struct schema_inode *in, const char *target, size_t tlen,
                           uint8_t *p)
{
	uint8_t *q = p;
	*q++ = INODE_REC_V2;
	put_be32(q, in->mode);
	put_be32(q + 4, in->uid);
	put_be32(q + 8, in->gid);
	put_be32(q + 12, in->nlink);
	put_be64(q + 16, in->size);
	put_be64(q + 24, in->rdev);
	put_be64(q + 32, in->parent);
	q += 40;
	q = put_time(q, in->atime_sec, in->atime_nsec);
	q = put_time(q, in->mtime_sec, in->mtime_nsec);
	q = put_time(q, in->ctime_sec, in->ctime_nsec);
	put_be64(q, in->stored);
	q += 8;
	if (tlen)
		memcpy(q, target, tlen);
	return (size_t)(q - p) + tlen;
}

static const uint8_t *get_time(const uint8_t *p, int64_t *sec, uint32_t *nsec)
{
	*sec = (int64_t)get_be64(p);
	*nsec = get_be32(p + 8);
	return p + 12;
}

int schema_inode_decode(const uint8_t *p, size_t n, struct schema_inode *in, const uint8_t **target,
                        size_t *tlen)
{
	if (n < SCHEMA_INODE_LEN || p[0] != INODE_REC_V2)
		return -EUCLEAN;
	const uint8_t *q = p + 1;
	in->mode = get_be32(q);
	in->uid = get_be32(q + 4);
	in->gid = get_be32(q + 8);
	in->nlink = get_be32(q + 12);
	in->size = get_be64(q + 16);
	in->rdev = get_be64(q + 24);
	in->parent = get_be64(q + 32);
	q += 40;
	q = get_time(q, &in->atime_sec, &in->atime_nsec);
	q = get_time(q, &in->mtime_sec, &in->mtime_nsec);
	q = get_time(q, &in->ctime_sec, &in->ctime_nsec);
	in->stored = get_be64(q);
	q += 8;
	if (in->atime_nsec >= 1000000000u || in->mtime_nsec >= 1000000000u ||
	    in->ctime_nsec >= 1000000000u)
		return -EUCLEAN;
	if (target)
		*target = q;
	if (tlen)
		*tlen = n - SCHEMA_INODE_LEN;
	return 0;
}

void schema_dentry_encode(uint64_t ino, uint32_t mode, uint8_t *p)
{
	put_be64(p, ino);
	p[8] = (uint8_t)((mode & S_IFMT) >> 12);
}

int schema_dentry_decode(const uint8_t *p, size_t n, uint64_t *ino, uint32_t *dtype)
{
	if (n < SCHEMA_DENTRY_LEN)
		return -EUCLEAN;
	*ino = get_be64(p);
	*dtype = (uint32_t)p[8] << 12;
	if (*ino == 0)
		return -EUCLEAN;
	switch (*dtype) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFCHR:
	case S_IFBLK:
	case S_IFIFO:
	case S_IFSOCK:
		return 0;
	default:
		return -EUCLEAN; /* not a file type */
	}
}
