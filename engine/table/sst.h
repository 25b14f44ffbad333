/*
 * sst.h - SSTables: immutable sorted tables of internal entries in the
 * object store (builder: engine/table/sst_build.c, reader: engine/table/sst_read.c,
 * format: engine/table/sst_format.h and docs/SST.md).
 *
 * A flush or a compaction feeds entries in internal order (iter.h: user key
 * ascending, sequence descending) to a builder, which streams the table to
 * the store through a store_writer: only the current data block, the index,
 * the filter's key hashes and the properties are ever in memory.  The
 * object appears, whole, at sst_builder_finish().
 *
 * A reader opens a table with one ranged GET of its tail (footer, index,
 * filter, properties; a second GET only when those exceed the tail read),
 * then answers point gets (bloom filter first, then at most one data block)
 * and iterates (struct kv_iter).  Data blocks are read by ranged GETs and
 * verified by checksum; corruption is -EUCLEAN with a log line naming the
 * object, never a crash.
 *
 * Values are carried as bytes: a KV_BLOB value is a blob descriptor
 * (format.h) that the SSTable never interprets, except through the
 * optional blob_ref callback that lets the builder total referenced bytes
 * per pack for garbage collection.
 */
#ifndef MEMWALFS_SST_H
#define MEMWALFS_SST_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iter.h"
#include "sst_format.h"

struct store;
struct cache;
struct diskcache;
struct sst_builder;
struct sst_reader;

/* A pack referenced by blob descriptors, and how many of its bytes. */
struct sst_pack_ref {
	uint8_t id[SST_PACK_ID_MAX]; /* opaque pack identity (e.g. epoch, position) */
	uint8_t idlen;               /* bytes used in id (1..SST_PACK_ID_MAX) */
	uint64_t bytes;              /* blob bytes of that pack referenced by the table */
};

/*
 * Called by the builder for every KV_BLOB entry: fill ref->id, ref->idlen
 * and ref->bytes (the blob's length) from the descriptor, or return a
 * negative errno (the build fails with it).
 */
typedef int (*sst_blob_ref_fn)(void *arg, const void *desc, size_t dlen, struct sst_pack_ref *ref);

struct sst_builder_opts {
	size_t block_size;           /* target uncompressed data block size (default 16 KiB) */
	unsigned restart_interval;   /* keys between restart points (default 16) */
	unsigned bloom_bits_per_key; /* default 10 (~0.8 % false positives); 0: no filter */
	int zstd_level;              /* default 3; SST_NO_COMPRESSION stores blocks raw */
	int writer_flags;            /* flags of store_writer_open() (e.g. STORE_W_IF_ABSENT) */
	sst_blob_ref_fn blob_ref;    /* may be NULL: then blob bytes are not totalled */
	void *blob_ref_arg;          /* passed to blob_ref */
};

/* Fill *o with the defaults above. */
void sst_builder_opts_default(struct sst_builder_opts *o);

/* The table's properties (decoded from its properties block). */
struct sst_props {
	uint64_t entries;          /* all entries */
	uint64_t deletes;          /* KV_DELETE entries */
	uint64_t blobs;            /* KV_BLOB entries */
	uint64_t keys;             /* distinct user keys */
	uint64_t min_seq, max_seq; /* sequence range (0, 0 when empty) */
	uint64_t data_blocks;      /* number of data blocks */
	uint64_t raw_key_bytes;    /* sum of user key lengths over all entries */
	uint64_t raw_value_bytes;  /* sum of value lengths */
	uint64_t blob_bytes;       /* blob bytes referenced (0 without a blob_ref callback) */
	unsigned bloom_bits;       /* bloom bits per key (0: no filter) */
	uint8_t *smallest;         /* smallest user key (malloc()ed; NULL when empty) */
	size_t smallest_len;
	uint8_t *largest; /* largest user key (malloc()ed; NULL when empty) */
	size_t largest_len;
	struct sst_pack_ref *packs; /* per-pack referenced bytes, sorted by id (malloc()ed) */
	size_t npacks;
	uint64_t file_size; /* object size in bytes */
};

/* Free the allocations inside *p (not p itself) and zero it.  Accepts NULL. */
void sst_props_free(struct sst_props *p);

/*
 * Encode p as a properties block body (docs/SST.md): *out is malloc()ed,
 * *len bytes, owned by the caller.  file_size is not encoded.  -ENOMEM.
 */
int sst_props_encode(const struct sst_props *p, uint8_t **out, size_t *len);

/*
 * Decode a properties block body into *p (zeroed first; free it with
 * sst_props_free()).  Unknown tags are skipped.  -EUCLEAN, -ENOMEM.
 */
int sst_props_decode(const uint8_t *buf, size_t n, struct sst_props *p);

/*
 * Start building the table that will be stored under key.  o may be NULL
 * (defaults).  s is borrowed and must outlive the builder.  On success
 * *out is the builder; exactly one of finish() or abort() must follow.
 * Errors: those of store_writer_open(), -ENOMEM, -EINVAL.
 */
int sst_builder_new(struct store *s, const char *key, const struct sst_builder_opts *o,
                    struct sst_builder **out);

/*
 * Append an entry.  Entries must come in strictly increasing internal order
 * (a later entry has a greater user key, or the same key and a smaller
 * sequence): -EINVAL otherwise, and for keys over SST_KEY_MAX or values over
 * SST_VALUE_MAX or an unknown type.  Full blocks are uploaded as they
 * close.  After any error the builder is failed: every later call returns
 * the same error and only abort (or finish, which aborts) remains.
 */
int sst_builder_add(struct sst_builder *b, const void *key, size_t klen, uint64_t seq,
                    enum kv_type type, const void *val, size_t vlen);

/* Entries added so far and bytes uploaded (or buffered for upload) so far. */
uint64_t sst_builder_entries(const struct sst_builder *b);
uint64_t sst_builder_bytes(const struct sst_builder *b);

/*
 * Write filter, properties, index and footer and finish the upload; the
 * object exists once this returns 0.  props (may be NULL) receives the
 * table's properties (the caller frees them with sst_props_free()).  Frees
 * the builder whatever happens; on error nothing was stored.
 */
int sst_builder_finish(struct sst_builder *b, struct sst_props *props);

/* Abandon the table (nothing is stored) and free the builder.  Accepts NULL. */
void sst_builder_abort(struct sst_builder *b);

/*
 * Read-cost counters, shareable by many readers (the engine keeps one set
 * for all its tables).  Updated atomically by any thread.
 */
struct sst_counters {
	_Atomic uint64_t blocks_read;     /* data blocks fetched from the store */
	_Atomic uint64_t block_bytes;     /* bytes of those fetches */
	_Atomic uint64_t cache_hits;      /* data blocks served by the block cache */
	_Atomic uint64_t bloom_checks;    /* point gets that consulted a filter */
	_Atomic uint64_t bloom_negatives; /* ... and were answered "absent" by it */
	_Atomic uint64_t bloom_false_pos; /* filter said maybe, the key was absent */
	_Atomic uint64_t corrupt;         /* -EUCLEAN answers */
	_Atomic uint64_t disk_hits;       /* data blocks served by the disk cache */
	_Atomic uint64_t disk_bytes;      /* their bytes (sealed) */
	_Atomic uint64_t cache_hit_bytes; /* bytes of the block cache hits (decoded) */
	_Atomic uint64_t blocks_around;   /* data blocks brought by the GET of another */
	_Atomic uint64_t missing;         /* block reads that found the object missing (404) */
};

/* Plain snapshot of struct sst_counters. */
struct sst_stats {
	uint64_t blocks_read, block_bytes, cache_hits;
	uint64_t bloom_checks, bloom_negatives, bloom_false_pos, corrupt;
	uint64_t disk_hits, disk_bytes, cache_hit_bytes, blocks_around;
};

struct sst_reader_opts {
	struct sst_counters *counters; /* NULL: the reader's own counters only */
	struct cache *cache;           /* block cache (cache.h); NULL: no caching */
	struct diskcache *dcache;      /* disk tier under it (diskcache.h); NULL: none */
	uint64_t dsalt;                /* keys of its blocks in dcache: 0, or the region id when
	                                  several engines share dcache (engine_opts.disk_cache) */
	size_t read_around;            /* a cold data block's GET brings the uncached blocks
	                                  after it up to this many bytes in all (with a
	                                  cache; 0: one block per GET) */
};

/*
 * Open the table stored under key, of size bytes (0: ask the store with
 * store_head()).  Reads the tail (footer, index, filter, properties) with
 * one ranged GET when they fit in SST_TAIL_READ bytes, two otherwise.  o
 * may be NULL.  s (and o->counters, o->cache, o->dcache) are borrowed and must outlive
 * the reader.  On success *out holds one reference.
 * Errors: -EUCLEAN (corrupt, truncated, bad magic: the log names the object
 * and the fault), -EPROTONOSUPPORT (a newer format version, logged the same
 * way), -ENOENT, store errors, -ENOMEM.
 */
#define SST_TAIL_READ (64 * 1024)

/*
 * The engine's sst_reader_opts.read_around on stores with a region cache (S3):
 * a GET of 128 KiB takes about as long as one of a 4 KiB block there (docs/CACHE.md).
 */
#define SST_READ_AROUND (128 * 1024)
int sst_reader_open(struct store *s, const char *key, uint64_t size,
                    const struct sst_reader_opts *o, struct sst_reader **out);

/* Take another reference (any thread). */
void sst_reader_ref(struct sst_reader *r);
/* Drop a reference; the last one frees the reader.  Accepts NULL. */
void sst_reader_unref(struct sst_reader *r);

/*
 * Point read: the newest entry of key with sequence <= snap.  Consults the
 * bloom filter first and reads at most one data block.  Returns 1 when
 * found, filling *type, *seq and *val, *vlen (a malloc()ed copy owned by the
 * caller, never NULL; val may be NULL to skip the copy); 0 when the table
 * has no such entry (a KV_DELETE found is returned as 1 with that type);
 * -EUCLEAN, -EIO, -ENOMEM.  cached: read the data block from the block or
 * disk cache only, -EWOULDBLOCK when neither has it.  Thread-safe.
 */
int sst_reader_get(struct sst_reader *r, const void *key, size_t klen, uint64_t snap, bool cached,
                   enum kv_type *type, uint64_t *seq, void **val, size_t *vlen);

/* True when the bloom filter says key may be in the table (no I/O). */
bool sst_reader_may_contain(struct sst_reader *r, const void *key, size_t klen);

/*
 * An iterator over every entry in internal order; holds its own reference
 * on r.  seek(key) positions on the newest version of the first user key
 * >= key.  Errors surface through kv_iter_status().  cached: data blocks
 * from the block or disk cache only, as sst_reader_get(); one in neither
 * ends the scan with -EWOULDBLOCK.  One thread at a time.
 */
int sst_reader_iter_new(struct sst_reader *r, bool cached, struct kv_iter **out);

/* Properties of the table (borrowed: valid while the reference is held). */
const struct sst_props *sst_reader_props(const struct sst_reader *r);
/* The object key (borrowed, as above). */
const char *sst_reader_key(const struct sst_reader *r);
/* Counters of this reader alone. */
void sst_reader_stats(const struct sst_reader *r, struct sst_stats *out);
/* Snapshot a shared counter set. */
void sst_counters_read(struct sst_counters *c, struct sst_stats *out);

#endif /* MEMWALFS_SST_H */
