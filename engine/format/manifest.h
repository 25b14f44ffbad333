/*
 * manifest.h - versioned manifests, discovery and the writer's epoch claim
 * (engine/format/manifest.c, docs/MANIFEST.md).
 *
 * struct manifest is a plain value (decoded contents of manifest/<version>);
 * the functions that touch the store are safe from any thread.
 */
#ifndef MEMWALFS_MANIFEST_H
#define MEMWALFS_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct store;

/* A live SSTable, as listed in the manifest. */
struct manifest_sst {
	char *name;        /* object name (malloc()ed) */
	uint64_t id;       /* SSTable id (unique per store) */
	uint64_t size;     /* object size in bytes */
	uint32_t level;    /* LSM level (0: flushed from a MemTable) */
	uint8_t *smallest; /* smallest user key (malloc()ed) */
	size_t smallest_len;
	uint8_t *largest; /* largest user key (malloc()ed) */
	size_t largest_len;
	uint64_t seq_min; /* lowest sequence number inside */
	uint64_t seq_max; /* highest sequence number inside */
};

/* An object no longer referenced, deletable after a grace period. */
struct manifest_gc {
	char *name;             /* object name (malloc()ed) */
	uint64_t since_version; /* manifest version that dropped it */
};

/* The decoded contents of one manifest version. */
struct manifest {
	uint64_t version;          /* N of manifest/<N>; 0: no manifest yet */
	uint64_t epoch;            /* writer epoch that wrote it */
	uint64_t wal_covered;      /* first WAL position not covered by SSTables */
	uint64_t last_seq;         /* highest sequence number inside the SSTables */
	uint64_t next_sst;         /* next SSTable id to allocate */
	uint32_t claim;            /* nonce of the epoch claim, copied by later versions */
	struct manifest_sst *ssts; /* live SSTables (malloc()ed array) */
	size_t nssts;
	struct manifest_gc *gc; /* objects awaiting deletion (malloc()ed array) */
	size_t ngc;
};

/* Free the arrays and strings of m and zero it.  Accepts a zeroed manifest. */
void manifest_clear(struct manifest *m);

/* Deep copy src into *dst (dst is overwritten, not freed).  -ENOMEM. */
int manifest_copy(struct manifest *dst, const struct manifest *src);

/* Encode m into out (appended).  -ENOMEM. */
int manifest_encode(const struct manifest *m, struct mw_buf *out);

/*
 * Decode an object read from name.  On success *m holds the contents
 * (free with manifest_clear()).  -EPROTONOSUPPORT for a newer format
 * version, -EUCLEAN on bad magic, checksum failure or malformed body (both
 * logged with the name); -ENOMEM.
 */
int manifest_decode(const char *name, const void *buf, size_t len, struct manifest *m);

/*
 * Find the latest manifest version: read the hint, then list forward from
 * it (the hint is never trusted alone), or list everything when the hint is
 * missing or bad.  *version = 0 when the store has no manifest.
 */
int manifest_find_latest(struct store *st, uint64_t *version);

/* Read and decode manifest/<version>.  -ENOENT, -EUCLEAN, -EIO... */
int manifest_load(struct store *st, uint64_t version, struct manifest *m);

/* Find and load the latest; a zeroed *m (version 0) when there is none. */
int manifest_load_latest(struct store *st, struct manifest *m);

/*
 * Write m as manifest/<m->version> with put_if_absent, then overwrite the
 * hint (best effort).  -EEXIST if that version exists (someone else wrote
 * it: the caller is fenced or must re-read).  With !conditional, a plain put
 * (single-writer-by-convention stores).
 */
int manifest_commit(struct store *st, const struct manifest *m, bool conditional);

/*
 * The running writer's commit of m (its own epoch): as manifest_commit(),
 * except that a version already taken by a manifest of the SAME epoch is an
 * earlier attempt of ours whose outcome was unknown and which landed late
 * (only this writer writes manifests of its epoch).  Holding exactly m's
 * bytes, it is this commit; otherwise m is committed at the next version on
 * top of it (both descend from the same state and carry the same covered
 * data; what the late one added is dropped, and GC collects it), and
 * m->version says where.  -EEXIST only for a newer writer.  Never for the
 * claim, where an equal epoch is a racing claimer.
 */
int manifest_commit_ours(struct store *st, struct manifest *m, bool conditional);

/*
 * Claim a new writer epoch: load the latest manifest, write version+1 with
 * epoch+1 (all else unchanged); on -EEXIST re-read and retry a bounded number
 * of times.  On success *m is the manifest just written.
 */
int manifest_claim(struct store *st, bool conditional, struct manifest *m);

/*
 * manifest_claim() of exactly epoch (0: latest + 1, as manifest_claim()).  Versions
 * added meanwhile by the previous writer (a dying holder's flush) are retried over, as
 * in manifest_claim(); a newest manifest whose epoch is already epoch or later fails
 * with -EAGAIN (logged: another writer claimed), and no other epoch is ever claimed.  A
 * newest epoch below epoch - 1 is claimed over (region_acquire() may skip an epoch
 * whose holder object a taker that gave up left behind: docs/REGIONS.md).
 */
int manifest_claim_epoch(struct store *st, bool conditional, uint64_t epoch, struct manifest *m);

/*
 * The salvage's claim (engine/check/salvage.c): write *m (prepared by the caller: what
 * survives of the latest readable manifest) as version latest + 1 with an epoch
 * above both its own and min_epoch - 1, by put_if_absent.  0 (m is then the
 * manifest written), -EEXIST (another writer claimed that version), the put's error.
 */
int manifest_claim_at(struct store *st, bool conditional, struct manifest *m, uint64_t latest,
                      uint64_t min_epoch);

#endif /* MEMWALFS_MANIFEST_H */
