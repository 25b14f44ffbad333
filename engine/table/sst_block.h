/*
 * sst_block.h - building and reading the entry blocks of an SSTable (data
 * and index blocks), internal to engine/table/sst_*.c.
 *
 * A block is a run of internal entries in internal order (iter.h: user key
 * ascending, sequence descending) with shared key prefixes, followed by
 * restart points (docs/SST.md "Blocks"):
 *
 *     entry := shared:varint unshared:varint vlen:varint seq:varint type:u8
 *              key_delta[unshared] value[vlen]
 *     block := entry* restart:be32[n] n:be32
 *
 * Every restart_interval-th entry is a restart point: it stores its whole
 * key (shared = 0) and its offset is listed in the restart array, so a seek
 * binary-searches the restarts and then scans at most one interval.
 *
 * A builder is used by one thread.  A parsed block (struct sst_block) is
 * immutable and may be read by many iterators on many threads at once.
 */
#ifndef MEMWALFS_SST_BLOCK_H
#define MEMWALFS_SST_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iter.h"

/* A growable byte buffer. */
struct sst_buf {
	uint8_t *p; /* malloc()ed bytes (NULL when empty) */
	size_t n;   /* bytes used */
	size_t cap; /* bytes allocated */
};

/* Append n bytes; -ENOMEM. */
int sst_buf_append(struct sst_buf *b, const void *p, size_t n);
/* Make room for n more bytes; -ENOMEM. */
int sst_buf_reserve(struct sst_buf *b, size_t n);
/* Free the bytes and zero the buffer. */
void sst_buf_free(struct sst_buf *b);

/* Builds one block in memory. */
struct sst_block_builder {
	struct sst_buf data;     /* entries so far, then the restart array at finish */
	struct sst_buf last_key; /* user key of the last entry added */
	uint32_t *restarts;      /* offsets of restart entries */
	size_t nrestarts;        /* entries used in restarts */
	size_t restarts_cap;     /* entries allocated in restarts */
	unsigned interval;       /* restart every this many entries (>= 1) */
	unsigned since_restart;  /* entries since the last restart */
	uint64_t last_seq;       /* sequence of the last entry added */
	size_t entries;          /* entries in the block */
};

/* Initialise an empty builder restarting every interval entries. */
void sst_bb_init(struct sst_block_builder *bb, unsigned interval);
/* Free its memory.  Accepts a zeroed builder. */
void sst_bb_free(struct sst_block_builder *bb);
/* Empty the builder for the next block (keeps its memory). */
void sst_bb_reset(struct sst_block_builder *bb);
/* Append an entry (caller guarantees internal order); -ENOMEM. */
int sst_bb_add(struct sst_block_builder *bb, const void *key, size_t klen, uint64_t seq,
               enum kv_type type, const void *val, size_t vlen);
/* Size the block would have if finished now. */
size_t sst_bb_size(const struct sst_block_builder *bb);
/*
 * Append the restart array; *out and *len point into bb->data (borrowed until
 * the next reset or free).  -ENOMEM.
 */
int sst_bb_finish(struct sst_block_builder *bb, const uint8_t **out, size_t *len);

/* A parsed block over borrowed bytes. */
struct sst_block {
	const uint8_t *data;     /* block contents (borrowed) */
	size_t entries_end;      /* entries occupy [0, entries_end) */
	const uint8_t *restarts; /* the be32 restart array */
	uint32_t nrestarts;      /* number of restart points (>= 1) */
};

/* Check the restart array of data[0..len); 0 or -EUCLEAN. */
int sst_block_parse(const uint8_t *data, size_t len, struct sst_block *b);

/* Position in a block; one thread at a time. */
struct sst_block_iter {
	const struct sst_block *b; /* the block (borrowed) */
	size_t cur;                /* offset of the current entry */
	size_t next;               /* offset of the entry after it */
	uint32_t restart;          /* restart interval containing cur */
	struct sst_buf key;        /* the current user key, rebuilt from prefixes */
	uint64_t seq;              /* current sequence */
	enum kv_type type;         /* current type */
	const uint8_t *val;        /* current value (points into the block) */
	size_t vlen;               /* its length */
	bool valid;                /* positioned on an entry */
	int status;                /* 0, -EUCLEAN on a malformed entry, -ENOMEM */
};

/* Start an iterator on b (unpositioned).  Free with sst_block_iter_free(). */
void sst_block_iter_init(struct sst_block_iter *it, const struct sst_block *b);
void sst_block_iter_free(struct sst_block_iter *it);
void sst_block_iter_seek_first(struct sst_block_iter *it);
/* First entry >= (key, seq) in internal order. */
void sst_block_iter_seek(struct sst_block_iter *it, const void *key, size_t klen, uint64_t seq);
void sst_block_iter_next(struct sst_block_iter *it);

/* Internal order of (key, seq) pairs: key ascending, then seq descending. */
static inline int sst_internal_cmp(const void *a, size_t an, uint64_t as, const void *b, size_t bn,
                                   uint64_t bs)
{
	int c = kv_key_cmp(a, an, b, bn);

	if (c)
		return c;
	return as > bs ? -1 : as < bs;
}

#endif /* MEMWALFS_SST_BLOCK_H */
