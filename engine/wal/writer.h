/*
 * writer.h - the write path's state and calls (engine/wal/writer.c: group
 * commit, the commit pipeline, backpressure; batch.c builds the batches).
 * struct eng_writer is e->w; the fields marked [mu] are guarded by e->mu.
 * Besides writer.c, engine.c (open, close, stats), watch.c (a lost store
 * fences the writer: sticky, and wakes the committer), flush.c and maint.c
 * (they wait on the sticky error, the open group and the failed position)
 * read or set fields of it.
 */
#ifndef MEMWALFS_WRITER_H
#define MEMWALFS_WRITER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "hist.h"
#include "thread.h"

struct engine;
struct engine_batch;
struct pack;

/* One commit group: what becomes one WAL entry (plus at most one pack). */
struct group {
	uint64_t position;   /* WAL position; also the ticket of its writes */
	struct mw_buf wal;   /* the entry being built (header reserved) */
	struct pack *pack;   /* blob pack, NULL until the first blob */
	uint64_t first_seq;  /* sequence of the first op */
	uint32_t ops;        /* ops in the entry */
	uint32_t batches;    /* batches in the entry */
	size_t bytes;        /* bytes counted in e->pending_bytes */
	size_t wal_blobs;    /* blob bytes carried in the entry (KV_INLINE >= inline_max) */
	bool urgent;         /* someone waits: commit as soon as possible */
	uint64_t opened_us;  /* monotonic time the first op joined */
	bool pack_sealed;    /* pack_seal() done (committer; kept across retries) */
	bool pack_durable;   /* the pack is in the store: a retry sends only the entry */
	uint64_t pack_bytes; /* size of the pack object once written */
	struct group *next;  /* next closed group in position order [mu] */
	bool pack_busy;      /* an uploader is putting the pack [mu] */
	bool pack_tried;     /* an uploader tried once: the committer owns retries [mu] */
	int pack_err;        /* that try's error, or 0 [mu] */
	bool committing;     /* a pipeline thread commits it (pack and entry) [mu] */
	bool done;           /* that commit ended, with rc: waits to retire in order [mu] */
	int rc;              /* 0 durable, or the error that ended it [mu] */
};

/* Pipeline threads besides the first at most (opts.commit_inflight - 1). */
#define WRITER_MAX_UPLOADERS 15

/* The writer (writer.c): e->w. */
struct eng_writer {
	pthread_cond_t commit_cv;       /* wakes the committer [mu] */
	struct group *open;             /* the group that writes join, or NULL [mu] */
	struct group *q_head;           /* closed groups not yet durable, in position order [mu] */
	struct group *q_tail;           /* the last of them [mu] */
	unsigned nqueued;               /* how many (at most opts.commit_inflight) [mu] */
	int sticky;                     /* 0 or the error that fenced the writer [mu] */
	uint64_t failed_pos;            /* position of the group that failed [mu] */
	_Atomic uint64_t lease_from_us; /* when the last epoch check that passed was sent */
	uint64_t
	    handover_until_us; /* engine_handover(): writes refused until then (0: none) [mu] */
	struct mw_thread committer;                       /* the first pipeline thread */
	struct mw_thread uploaders[WRITER_MAX_UPLOADERS]; /* the other pipeline threads */
	unsigned nuploaders;                              /* started (const while running) */
	bool pipeline_stop;                               /* writer_stop(): drain, then exit [mu] */
	struct mw_hist commit_hist; /* time of each group commit (lock-free, hist.h) */
};

/* Errors no retry can cure: a newer writer, corruption, a refused format (writer.c). */
bool err_permanent(int rc);

/* Backoff between retries of a transient store failure: first wait, cap (milliseconds). */
#define RETRY_MIN_MS 50u
#define RETRY_MAX_MS 5000u

/* writer.c: start / stop the committer thread.  Stop commits what is open. */
int writer_start(struct engine *e);
void writer_stop(struct engine *e);

/*
 * Writes applied here whose group will never be acknowledged: those retired
 * as failed, and once the writer stopped, the open group's and the queued
 * ones' at or past the failed position (e->mu held).
 */
uint64_t writer_lost_locked(struct engine *e);

/*
 * writer.c: the pack of an open or closed, not yet durable group at
 * position, with a reference (pack_unref() it), or NULL.  Caller holds e->mu.
 */
struct pack *writer_pending_pack_locked(struct engine *e, uint64_t position);

/* writer.c: freeze the active MemTable (caller holds e->mu).  -ENOMEM. */
int writer_freeze_locked(struct engine *e);

/*
 * Decides, under e->mu, whether a conditional write still applies: return
 * 0 to apply the batch, 1 to skip it, or a negative errno to fail.
 */
typedef int (*writer_cond_fn)(struct engine *e, void *arg);

/*
 * writer.c: engine_write() with a condition checked under e->mu right
 * before the batch is applied (after any backpressure wait), so that no
 * other write can slip in between the check and the apply.  cond NULL:
 * plain engine_write().  Returns 1 when cond skipped the batch (nothing
 * written), else as engine_write().  Any thread except the flusher.
 */
int writer_write_if(struct engine *e, struct engine_batch *b, int flags, uint64_t *ticket,
                    writer_cond_fn cond, void *arg);

#endif /* MEMWALFS_WRITER_H */
