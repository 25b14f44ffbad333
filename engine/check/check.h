/*
 * check.h - an offline verifier of the engine objects of a store
 * (engine/check/check.c; used by "memwalfs inspect" and "memwalfs fsck").
 *
 * check_store() reads, never writes: it is safe on a live store (it does
 * not claim an epoch, so it fences nobody).  It lists the store once, finds
 * and decodes the newest manifest, opens and iterates every SSTable it
 * lists (block checksums, internal order, key range), decodes every WAL
 * entry at or after the covered position, and checks that every blob
 * descriptor reachable from those names an existing pack whose range lies
 * inside the pack's data.  Every pack's header and trailer are checked;
 * with deep, every pack is read whole and every reachable blob's checksum
 * verified.  Objects that no manifest references are reported as orphans
 * (not problems: a live writer makes them transiently, GC removes them).
 *
 * Results come two ways: totals in struct check_report, and a callback per
 * object and per problem (struct check_event), in which every problem names
 * its object.
 */
#ifndef MEMWALFS_CHECK_H
#define MEMWALFS_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store;

/* What a check_event describes. */
enum check_kind {
	CHECK_PROBLEM = 0, /* a broken invariant: object, err and msg set */
	CHECK_MANIFEST,    /* the manifest in use: object, position (= version), epoch */
	CHECK_SST,         /* a live SSTable: object, size, level, keys, entries */
	CHECK_WAL,         /* a WAL entry at or after the covered position */
	CHECK_PACK,        /* a pack: object, size, data_bytes, live_bytes */
	CHECK_ORPHAN,      /* an object no manifest references: object, size */
};

/* One finding.  Every pointer is borrowed for the duration of the callback. */
struct check_event {
	enum check_kind kind;    /* see above */
	const char *object;      /* the object concerned (never NULL) */
	int err;                 /* CHECK_PROBLEM: negative errno (-EUCLEAN, -ENOENT...) */
	const char *msg;         /* CHECK_PROBLEM: what is wrong; CHECK_ORPHAN: why */
	uint64_t size;           /* object size in bytes */
	uint32_t level;          /* CHECK_SST: LSM level */
	const uint8_t *smallest; /* CHECK_SST: smallest user key */
	size_t smallest_len;
	const uint8_t *largest; /* CHECK_SST: largest user key */
	size_t largest_len;
	uint64_t entries;    /* CHECK_SST: entries; CHECK_WAL: ops */
	uint64_t position;   /* CHECK_WAL: position; CHECK_MANIFEST: version */
	uint64_t epoch;      /* CHECK_WAL, CHECK_MANIFEST, CHECK_PACK: epoch */
	uint64_t data_bytes; /* CHECK_PACK: blob data bytes */
	uint64_t live_bytes; /* CHECK_PACK: bytes referenced by SSTs + uncovered WAL */
};

/* Called once per event, from the thread running check_store(). */
typedef void (*check_fn)(void *arg, const struct check_event *ev);

struct check_opts {
	bool deep;   /* read every pack whole and verify every reachable blob */
	check_fn fn; /* may be NULL */
	void *arg;   /* passed to fn */
};

/* Objects and bytes of one kind. */
struct check_count {
	uint64_t objects;
	uint64_t bytes;
};

/* Totals of one check. */
struct check_report {
	uint64_t manifest_version; /* version in use (0: the store has no manifest) */
	uint64_t epoch;            /* its writer epoch */
	uint64_t wal_covered;      /* its covered WAL position */
	uint64_t last_seq;         /* its last sequence number */
	struct check_count manifests, wal, packs, ssts, other; /* everything listed */
	struct check_count regions;    /* the objects of regions (regions/, holder/, mounts/) */
	struct check_count snapshots;  /* snap/<name> objects (docs/SNAPSHOTS.md) */
	struct check_count subregions; /* under r/<rid>/: the engines of regions > 0 (a store's
	                                  root only; each is checked through its own view) */
	uint64_t regions_version;      /* the region map's version (0: none, region 0 only) */
	uint64_t nregions;             /* regions in it (besides region 0) */
	uint64_t wal_uncovered;        /* WAL entries at or after wal_covered */
	uint64_t wal_old;              /* WAL entries below it still present */
	uint64_t sst_entries;          /* entries iterated in live SSTables */
	uint64_t blobs;                /* blob descriptors checked */
	uint64_t pack_data_bytes;      /* blob data bytes in all packs */
	uint64_t pack_live_bytes;      /* of which referenced (live fraction = live / data) */
	struct check_count orphans;    /* objects no manifest references */
	uint64_t awaiting_gc;          /* objects listed by the manifest's GC records */
	uint64_t problems;             /* CHECK_PROBLEM events */
};

/*
 * Check the engine objects of st (borrowed).  o may be NULL (shallow, no
 * callback).  *r (may be NULL) receives the totals.  Returns 0 when no
 * problem was found, -EUCLEAN when at least one was (each reported through
 * o->fn), or a negative errno when the check could not run (listing failed:
 * -EIO...; -ENOMEM).  Any thread; reads only.
 */
int check_store(struct store *st, const struct check_opts *o, struct check_report *r);

#endif /* MEMWALFS_CHECK_H */
