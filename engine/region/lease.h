/*
 * lease.h - the objects of region holders and mount leases (engine/region/lease.c,
 * docs/REGIONS.md "Holders and leases"): their text format, for lease.c, GC and tests.
 *
 * Both objects are small text, one field a line, "name value", the first line the magic
 * and version ("memwalfs-lease 1", "memwalfs-holder 1").  Readers ignore fields they do
 * not know (a later version may add some), refuse a newer version with -EPROTONOSUPPORT
 * and anything else malformed with -EUCLEAN, each with a log line naming the object.
 */
#ifndef MEMWALFS_LEASE_H
#define MEMWALFS_LEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEASE_MAGIC "memwalfs-lease"
#define HOLDER_MAGIC "memwalfs-holder"
#define LEASE_FORMAT_VERSION 1
#define HOLDER_FORMAT_VERSION 1

#define LEASE_DEFAULT_MS 30000u /* region_lease_opts.lease_ms 0 */
#define LEASE_MIN_MS 30u        /* shorter leases are raised to this (a tick of 10 ms) */
/*
 * Clocks of hosts and store are assumed within this of each other: a lease object
 * last written more than lease_ms + this ago (its mtime, the store's clock, against our
 * wall clock) is of a dead mount at once, without watching it for a lease.
 */
#define LEASE_CLOCK_SKEW_SEC 600
/* Lease objects larger than this are refused as corrupt (a hold line is ~35 bytes). */
#define LEASE_OBJECT_MAX (1u << 20)
/* GC deletes mounts/ objects not written for this long (a mount that died uncleanly). */
#define LEASE_GC_MOUNT_AGE_SEC (7 * 86400)

/* One region a lease holds ("hold rid epoch") or is taking ("take rid epoch"). */
struct lease_hold {
	uint32_t rid;   /* the region */
	uint64_t epoch; /* the epoch claimed (hold) or reserved by the holder object (take) */
	bool taking;    /* a take: region_acquire() reserved it, region_held() not yet called */
};

/* The decoded contents of mounts/<id>. */
struct lease_doc {
	char mount[17];    /* the id, 16 lowercase hex digits */
	char host[256];    /* host name */
	long pid;          /* pid of the daemon */
	char mnt[1024];    /* mount point */
	int64_t since;     /* unix time of the open */
	uint64_t seq;      /* incremented by every write of the object */
	unsigned lease_ms; /* its lease */
	/*
	 * Where its pid means something: the boot id of its machine (the kernel's
	 * random/boot_id; "" when unknown) and the inode of its pid namespace (0: unknown).
	 * A mount that finds both equal to its own and no process of that pid knows the
	 * holder is dead without waiting for its lease (lease.c, pid_gone()).
	 */
	char boot[40];
	uint64_t pidns;
	struct lease_hold *holds; /* malloc()ed (NULL when none) */
	size_t nholds;
};

/* The decoded contents of <prefix>holder/<epoch>. */
struct holder_doc {
	char mount[17]; /* the mount that created it (the right to claim epoch) */
	uint64_t epoch; /* the epoch, as in the name */
	char host[256]; /* that mount's host */
	long pid;       /* its pid */
	char mnt[1024]; /* its mount point */
	int64_t since;  /* unix time of the creation */
};

/* Encode d into *out (malloc()ed, NUL-terminated; *len without the NUL).  -ENOMEM. */
int lease_doc_format(const struct lease_doc *d, char **out, size_t *len);
/* Decode the object name (for log lines) into *d (free with lease_doc_clear()). */
int lease_doc_parse(const char *name, const void *buf, size_t len, struct lease_doc *d);
/* Free d's holds and zero it.  Accepts a zeroed doc. */
void lease_doc_clear(struct lease_doc *d);

/* Encode h into buf (cap bytes, NUL-terminated); *len its length.  -ENOSPC if too small. */
int holder_doc_format(const struct holder_doc *h, char *buf, size_t cap, size_t *len);
int holder_doc_parse(const char *name, const void *buf, size_t len, struct holder_doc *h);

/* Is s a mount id (16 lowercase hex digits, then NUL)? */
bool lease_id_valid(const char *s);

/*
 * The store's doorbell `bell` (engine/region/bell.c, docs/REGIONS.md "The bell"), one field
 * a line like the objects above:
 *
 *   memwalfs-bell 1
 *   mount 3f9c0b1e77a24d10
 *   seq 12
 *   host build-7
 */
#define BELL_MAGIC "memwalfs-bell"
#define BELL_FORMAT_VERSION 1
/* A bell object larger than this is refused as corrupt (it is about 70 bytes). */
#define BELL_OBJECT_MAX 4096u

/* The decoded contents of `bell`. */
struct bell_doc {
	char mount[17]; /* the mount that rang last: its lease id */
	uint64_t seq;   /* that mount's rings (1, 2, ...): (mount, seq) never repeats */
	char host[256]; /* its host, for people */
};

/* Encode d into buf (cap bytes, NUL-terminated); *len its length.  -ENOSPC if too small. */
int bell_doc_format(const struct bell_doc *d, char *buf, size_t cap, size_t *len);
/* Decode buf (name: for log lines) into *d.  0, -EUCLEAN, -EPROTONOSUPPORT. */
int bell_doc_parse(const char *name, const void *buf, size_t len, struct bell_doc *d);

#endif /* MEMWALFS_LEASE_H */
