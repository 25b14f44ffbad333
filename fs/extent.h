/*
 * extent.h - file data as extents (fs/extent.c; docs/SCHEMA.md, "Extents").
 *
 * A regular file's bytes are extents: key 'E' ino end -> the bytes of
 * [end - len, end), stored by the engine inline or as a blob range.  Extents
 * of one file never overlap; what no extent covers is a hole (zeros).  A
 * write of n bytes adds one extent and trims the ones it overlaps: a trimmed
 * extent keeps its outside part as a reference to the same blob bytes
 * (engine_batch_put_ref()), so nothing that was not written is read or
 * written again.
 *
 * Every function is called with the inode's ip->dlock held (shared for
 * reads, exclusive for the rest: extents of a file change only under it) and
 * fs->mu NOT held: scans may read SSTable blocks from the store.
 */
#ifndef MEMWALFS_FS_EXTENT_H
#define MEMWALFS_FS_EXTENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mwfs;
struct inode;
struct engine_batch;

/*
 * Read n bytes at off of inode ino into dst; holes read as zeros.  at: 0 for
 * the current state, or an engine_seq() of an earlier one (a follower's
 * removed file, file.c; -ESTALE once the engine no longer holds it).  A
 * store that does not answer is waited for: always when wait is set (a
 * write depends on the bytes), else while fewer than half the request
 * threads wait so (fs_retry()), then the error.
 */
int ext_read(struct mwfs *fs, uint64_t ino, uint64_t at, uint64_t off, uint8_t *dst, size_t n,
             bool wait);

/* Bring the stored bytes of [off, off + n) of ino into the engine's cache (read-ahead). */
int ext_prefetch(struct mwfs *fs, uint64_t ino, uint64_t off, uint64_t n);

/*
 * Queue into b what removes the stored bytes of [from, to) of ip (to
 * UINT64_MAX: to the end of the file): extents and allocated ranges inside
 * are deleted, one across an edge keeps its outside part.  *removed (added
 * to) counts the stored bytes that go (the inode's stored counts both).
 * Sets ip->alloc to EXT_ALLOC_NONE when the inode has no allocated range.
 */
int ext_clear(struct mwfs *fs, struct engine_batch *b, struct inode *ip, uint64_t from, uint64_t to,
              uint64_t *removed);

/* A file range. */
struct ext_range {
	uint64_t off, len;
};

/*
 * ext_clear() of several ranges at once (sorted by offset, disjoint, none
 * empty), with one iterator: what a write buffer of several runs puts.
 */
int ext_clear_set(struct mwfs *fs, struct engine_batch *b, struct inode *ip,
                  const struct ext_range *r, size_t n, uint64_t *removed);

/* ip->alloc: whether the inode has allocated ranges ('A', docs/SCHEMA.md). */
#define EXT_ALLOC_UNKNOWN 0 /* not looked for since the inode was loaded */
#define EXT_ALLOC_NONE 1
#define EXT_ALLOC_SOME 2

/*
 * fallocate: queue into b allocated ranges for the parts of [off, end) of ip
 * that no extent or allocated range holds.  *added (added to): their bytes,
 * which the inode's stored counts (st_blocks).  They read as holes and
 * reserve nothing in the store.
 */
int ext_alloc(struct mwfs *fs, struct engine_batch *b, struct inode *ip, uint64_t off, uint64_t end,
              uint64_t *added);

/*
 * Queue into b the bytes data[0, n) as ino's data at [off, off + n), after
 * ext_clear() of that range: one new extent, or nothing when the bytes are
 * all zero (a hole reads the same and costs nothing).  *added (added to):
 * the stored bytes it adds.  data is borrowed, not copied: it must stay
 * unchanged until b has been written (engine_write()).
 */
int ext_add(struct mwfs *fs, struct engine_batch *b, uint64_t ino, uint64_t off,
            const uint8_t *data, size_t n, uint64_t *added);

/*
 * Queue into b extents of dst that share the stored bytes of src's
 * [soff, soff + len) at doff (after ext_clear() of the destination range):
 * no byte is copied, the destination refers to the source's blobs.  Holes
 * stay holes.  *added (added to): the stored bytes the destination gains.
 * src and dst may be the same inode (ranges that do not overlap).
 */
int ext_share(struct mwfs *fs, struct engine_batch *b, uint64_t src, uint64_t soff, uint64_t len,
              uint64_t dst, uint64_t doff, uint64_t *added);

/*
 * SEEK_DATA / SEEK_HOLE from off (< size) over the extents of ino (the file's
 * size is size): *pos is the next data or hole offset; -ENXIO when no data
 * follows off (SEEK_DATA).
 */
int ext_seek(struct mwfs *fs, uint64_t ino, uint64_t off, uint64_t size, bool data, uint64_t *pos);

/* Number of extents of ino that overlap [from, to), counting at most limit + 1. */
int ext_count(struct mwfs *fs, uint64_t ino, uint64_t from, uint64_t to, unsigned limit,
              unsigned *count);

#endif /* MEMWALFS_FS_EXTENT_H */
