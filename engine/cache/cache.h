/*
 * cache.h - a sharded LRU cache with a byte budget and reference-counted
 * handles (engine/cache/cache.c), after LevelDB's util/cache.cc.
 *
 * Used for decoded blobs (the blob cache) and SSTable blocks (the block
 * cache).  Entries map a key (bytes, copied) to a value pointer that the
 * cache owns from insertion: when the entry is evicted or erased and no
 * handle refers to it any more, the deleter given at insertion is called.
 * Each entry has a charge (usually its size in bytes); the cache keeps the
 * total charge of the entries it holds within its capacity by evicting the
 * least recently used ones that no one holds.  Entries held by handles are
 * never freed under their holder: an evicted or erased entry stays alive
 * until its last handle is released (and may push the usage above capacity
 * meanwhile).
 *
 * Threads: every function may be called from any thread at once; the cache
 * is split into shards, each with its own mutex, chosen by a hash of the key.
 */
#ifndef MEMWALFS_CACHE_H
#define MEMWALFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct cache;
struct cache_handle;

/* Called once per entry when it leaves the cache for good (from any thread). */
typedef void (*cache_deleter_fn)(const void *key, size_t klen, void *value);

struct cache_stats {
	uint64_t hits;      /* lookups that found the key */
	uint64_t misses;    /* lookups that did not */
	uint64_t inserts;   /* successful insertions */
	uint64_t evictions; /* entries pushed out by the budget */
	uint64_t usage;     /* total charge of entries in the cache or still held */
	uint64_t capacity;  /* the byte budget */
	uint64_t entries;   /* entries in the cache (not counting erased, held ones) */
};

/*
 * Create a cache of capacity bytes (0: nothing is retained; inserts return a
 * handle to an entry that dies at its release).  -ENOMEM.
 */
int cache_new(size_t capacity, struct cache **out);

/*
 * cache_new() with one shard whatever the capacity: exact LRU order, for a
 * cache of few large entries (1 MiB regions), which sixteen shards would cut
 * into budgets of one or two entries each that evict one another while the
 * rest of the cache stands empty.
 */
int cache_new_exact(size_t capacity, struct cache **out);

/*
 * Free the cache and, through their deleters, every entry.  Every handle
 * must have been released.  Accepts NULL.
 */
void cache_free(struct cache *c);

/*
 * Insert key -> value with the given charge, replacing any entry of the same
 * key (the old one is freed once its handles are released).  The cache owns
 * value on success.  If out is not NULL, *out receives a handle on the new
 * entry, which the caller releases with cache_release(); if NULL, no handle
 * is kept.  On failure (-ENOMEM) nothing is inserted and the caller still
 * owns value (the deleter is not called).
 */
int cache_insert(struct cache *c, const void *key, size_t klen, void *value, size_t charge,
                 cache_deleter_fn deleter, struct cache_handle **out);

/*
 * Find key.  Returns a handle (release it with cache_release()) or NULL.
 * Counts a hit or a miss and makes the entry the most recently used.
 */
struct cache_handle *cache_lookup(struct cache *c, const void *key, size_t klen);

/* Release a handle from cache_insert() or cache_lookup().  Accepts NULL. */
void cache_release(struct cache *c, struct cache_handle *h);

/* The value of a held entry: valid until the handle is released. */
void *cache_value(const struct cache_handle *h);

/* Charge of a held entry. */
size_t cache_charge(const struct cache_handle *h);

/*
 * Remove key from the cache (no-op if absent).  The entry is freed once the
 * handles on it are released.
 */
void cache_erase(struct cache *c, const void *key, size_t klen);

/* Drop every entry that no handle holds. */
void cache_prune(struct cache *c);

/* Copy the counters (summed over shards, each read under its lock). */
void cache_get_stats(struct cache *c, struct cache_stats *out);

#endif /* MEMWALFS_CACHE_H */
