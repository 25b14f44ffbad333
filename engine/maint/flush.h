/*
 * flush.h - the engine's flusher (engine/maint/flush.c): turns frozen MemTables
 * into SSTables with sst_flush_build() / sst_flush_promote() (h6's
 * sst_flush.h) and swaps them into the read path.  Private to engine/.
 *
 * Protocol, one frozen MemTable F at a time, oldest first:
 *   1. wait until the WAL group that was open when F was frozen is durable
 *      (F never carries bytes a crash could take back out of order);
 *   2. build "sst/<epoch>-<id>" from F under a fresh id (every attempt
 *      takes its own: a retry never writes the name of an earlier attempt,
 *      which may still land late; see "SSTable names" in flush.c);
 *   3. manifest N+1 = N + the SSTable, wal_covered = F.wal_end, by
 *      put_if_absent (the commit point; -EEXIST: fenced, sticky -ESTALE);
 *   4. under mem_mu, drop F from the frozen list and add the SSTable reader
 *      to the read path, atomically for readers.
 * A failed build or an unknown manifest outcome is retried later (the WAL
 * still holds F's data); a fence stops the writer.
 */
#ifndef MEMWALFS_FLUSH_H
#define MEMWALFS_FLUSH_H

#include <stdint.h>

#include "memtable.h"

struct engine;

/* A frozen MemTable and the WAL it covers (the engine keeps a list of these). */
struct frozen_mem {
	struct memtable *mem;  /* one reference, owned by the list */
	uint64_t wal_end;      /* WAL positions < wal_end are covered once mem is flushed */
	uint64_t durable_need; /* flush only once durable_upto >= this */
	uint64_t bytes;        /* memtable_bytes(mem) at freeze */
};

/* Start / stop the flusher thread (writer engines only).  Stop does not flush. */
int flusher_start(struct engine *e);
void flusher_stop(struct engine *e);

/* Open readers for every SSTable of e->man (at open, before any thread). */
int flusher_open_ssts(struct engine *e);

/*
 * Readers for every SSTable of m, reusing the open ones of e->ssts (each with a reference
 * of its own) and opening the others: *out is a malloc()ed array of m->nssts.  Called by
 * the one thread that changes e->ssts (the flusher; a follower's thread), which reads it
 * without mem_mu.  -ENOMEM, or the error of an open (logged).
 */
struct manifest;
struct sst_reader;
int flusher_readers_for(struct engine *e, const struct manifest *m, struct sst_reader ***out);

#endif /* MEMWALFS_FLUSH_H */
