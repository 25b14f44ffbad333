/*
 * replay.h - the WAL at open and for followers (engine/wal/replay.c): replay of
 * entries in position order under the replay rules of docs/WAL.md, and the
 * writer's fencing.  Used by engine.c (open), follow.c (polls) and salvage.c
 * (the WAL listing).
 */
#ifndef MEMWALFS_REPLAY_H
#define MEMWALFS_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct engine;

/* Replay state (one per open; the follower keeps one across polls). */
struct replay {
	uint64_t next;       /* next position expected */
	uint64_t max_epoch;  /* highest epoch replayed so far */
	struct mw_buf *keys; /* NULL, or: every applied key appended (varint len, key) */
	bool locked;         /* the caller holds e->mu (the follower, readers running) */
};

/* Positions listed under wal/ (replay_list_wal(), a store_list_fn). */
struct poslist {
	uint64_t *v; /* ascending */
	size_t n, cap;
};
int replay_list_wal(void *arg, const char *key, uint64_t size);

/*
 * Read wal/<pos> into *buf (malloc()ed) / decode and apply it (in
 * order, the replay rules of docs/WAL.md) into e->mem.  replay_entry() is called by
 * one thread at a time, with e->mu held once the engine is shared (the follower).
 * Returns 0 (applied or ignored), -ENOENT, -ESTALE, -EUCLEAN, -EIO...
 */
int replay_fetch(struct engine *e, uint64_t pos, void **buf, size_t *len);
int replay_entry(struct engine *e, struct replay *r, uint64_t pos, const void *buf, size_t len);

/*
 * Open: replay from the manifest's covered position, in position order, up to
 * the first missing one (r->next after it); *tip gets the first position after
 * every listed one.  A salvage skips what is missing or bad; a snapshot stops at
 * its WAL end.  0, -ESTALE, -EUCLEAN, the store's errors.
 */
int replay_wal(struct engine *e, struct replay *r, uint64_t *tip);
/*
 * Writer open, after replay_wal(): fence the WAL at r->next and over the older
 * writer's window up to tip (docs/WAL.md "Open, replay and fencing"); sets the
 * writer's next and durable positions.  0, -ESTALE, -EIO, the store's errors.
 */
int replay_fence_wal(struct engine *e, struct replay *r, uint64_t tip);

#endif /* MEMWALFS_REPLAY_H */
