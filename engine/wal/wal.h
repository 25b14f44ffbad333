/*
 * wal.h - encode and decode WAL entries (engine/wal/wal.c, docs/WAL.md).
 *
 * A WAL entry is one object "wal/<position>" holding one committed group:
 * a 64-byte header (format.h) and a body of batches of ops.  The writer
 * builds the body in place behind a reserved header (wal_entry_begin,
 * wal_entry_add_*), then seals it (wal_entry_seal) and puts it.  Replay
 * decodes it (wal_entry_decode) and walks the ops (wal_op_next).
 *
 * Pure functions over caller memory; thread-safe.
 */
#ifndef MEMWALFS_WAL_H
#define MEMWALFS_WAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "iter.h"

/*
 * The WAL window (docs/WAL.md, "Entries in flight"): a writer has at most
 * this many entries in flight past its durable position, so positions
 * [durable, durable + WAL_WINDOW) are the only ones it may still land.  A
 * new writer's fence takes WAL_WINDOW positions for that reason.  Part of
 * the protocol: every writer of a store must agree on it.
 */
#define WAL_WINDOW 4

/* Header fields of a WAL entry. */
struct wal_info {
	uint16_t flags;       /* WAL_FLAG_* */
	uint64_t epoch;       /* writer epoch */
	uint64_t position;    /* WAL position */
	uint64_t first_seq;   /* sequence number of op 0 */
	uint32_t op_count;    /* ops in the body */
	uint32_t batch_count; /* batches in the body */
};

/* Start an entry in b (must be empty): reserves the header.  -ENOMEM. */
int wal_entry_begin(struct mw_buf *b);

/* Append the op-count prefix of a batch of n ops.  -ENOMEM. */
int wal_entry_add_batch(struct mw_buf *b, uint32_t n);

/* Append one op (after its batch prefix).  -ENOMEM. */
int wal_entry_add_op(struct mw_buf *b, enum kv_type type, const void *key, size_t klen,
                     const void *val, size_t vlen);

/* Encoded size of one op (for accounting). */
size_t wal_op_size(size_t klen, size_t vlen);

/* Fill the header of the entry in b from *info (body = the rest of b). */
void wal_entry_seal(struct mw_buf *b, const struct wal_info *info);

/*
 * Validate the entry buf[0..len) read from object name, expected at
 * position pos.  On success fills *info and the body bounds.  Returns
 * -EPROTONOSUPPORT (a newer format version) or -EUCLEAN (bad magic, checksum
 * failure, truncated or inconsistent lengths, wrong position), with a log
 * line naming the object.
 */
int wal_entry_decode(const char *name, const void *buf, size_t len, uint64_t pos,
                     struct wal_info *info, const uint8_t **body, size_t *body_len);

/* Cursor over the ops of a decoded body. */
/*
 * An op type that exists only in engine batches (batch.c), never in a WAL
 * entry: its value is WAL_BORROWED_SIZE bytes, the caller's pointer and
 * length in host order (engine_batch_put_borrowed()).  The writer reads it
 * with a cursor that allows it (wal_cursor.borrowed_ok) and copies the
 * bytes it points to; a WAL entry's cursor refuses it as a malformed op.
 */
#define WAL_OP_BORROWED 0x40
#define WAL_BORROWED_SIZE (sizeof(const void *) + sizeof(size_t))

struct wal_cursor {
	const uint8_t *p, *end; /* unread body */
	uint32_t batches_left;  /* batches not yet started */
	uint64_t ops_in_batch;  /* ops left in the current batch */
	bool batch_start;       /* the op returned last began a batch */
	bool borrowed_ok;       /* a batch's body: WAL_OP_BORROWED ops are returned as such */
};

void wal_cursor_init(struct wal_cursor *c, const uint8_t *body, size_t len, uint32_t batch_count);

/*
 * Next op: returns 1 and fills the fields (borrowed from the body), 0 at
 * the end, -EUCLEAN on a malformed body.  c->batch_start tells whether this
 * op is the first of its batch.
 */
int wal_op_next(struct wal_cursor *c, enum kv_type *type, const uint8_t **key, size_t *klen,
                const uint8_t **val, size_t *vlen);

#endif /* MEMWALFS_WAL_H */
