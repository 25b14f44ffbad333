/*
 * blobcache.h - the blob cache's entries (engine/read/blobcache.c): a block of a
 * blob kept in memory by reference to a sealed pack, to a shared GET buffer,
 * or as bytes of its own, and the ways blocks enter the cache.  blob.c (the
 * read path) fills it with what it fetched; writer.c and flush.c with the
 * blocks of each pack they committed (blob_cache_pack()).  The key of a
 * block is (epoch, position, object offset of the block); docs/CACHE.md.
 */
#ifndef MEMWALFS_BLOBCACHE_H
#define MEMWALFS_BLOBCACHE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct bigbuf_pool;
struct blob_desc;
struct engine;
struct pack;

/*
 * The buffer of one ranged GET, shared by the cache entries made from it
 * (blocks of a big blob, a coalesced region) instead of copied into each:
 * freed when the fetch and the last entry have let go of it.
 */
struct getbuf {
	_Atomic unsigned refs;    /* the fetch while it runs + one per entry */
	uint8_t *data;            /* the bytes (a GET's body), owned */
	struct bigbuf_pool *pool; /* data came from bigbuf_get() of this pool */
	struct engine *e;
	size_t cap;       /* bytes of data */
	unsigned regions; /* region cache entries in it; e->rd.share_mu */
	size_t shared;    /* bytes of the blocks kept in it by share_block(); e->rd.share_mu */
	size_t pinned;    /* its part of e->rd.region_pinned; e->rd.share_mu */
};

/*
 * A cached block: a range of a sealed pack it holds a reference on, or bytes:
 * its own (data[]) or inside a GET buffer it holds a reference on.
 */
struct blob_val {
	size_t len;           /* bytes of the block */
	struct pack *pack;    /* a sealed pack holding them at off, or NULL */
	struct getbuf *gb;    /* a GET buffer holding them at bytes, or NULL */
	bool shared;          /* gb's by share_block() */
	const uint8_t *bytes; /* the bytes (data or inside gb) when pack == NULL */
	uint64_t off;         /* object offset in pack */
	uint8_t data[];       /* the bytes, when pack == NULL and gb == NULL */
};

/* A GET buffer of len bytes from e's pool, one reference held; NULL: no memory. */
struct getbuf *getbuf_new(struct engine *e, size_t len);
struct getbuf *getbuf_ref(struct getbuf *gb);
void getbuf_unref(struct getbuf *gb);
/* A region entry in gb comes (+1) or goes (-1) (region shares, blobcache.c). */
void getbuf_share_region(struct getbuf *gb, int delta);

/* The blob cache's free function of a struct blob_val (a cache_free_fn). */
void blob_val_free(const void *key, size_t klen, void *value);
/* Copy n bytes at off of a cached block (off + n <= bv->len). */
int blob_val_read(const struct blob_val *bv, uint64_t off, void *buf, size_t n);
/* Cache key of the block of d's blob that starts at blob offset boff. */
void blob_cache_key(uint8_t k[24], const struct blob_desc *d, uint64_t boff);
/* Bytes of block b of d's blob. */
size_t blob_block_len(const struct blob_desc *d, uint64_t b);

/*
 * Keep the verified block at blob offset boff (bytes p[0, bl)) in the blob
 * cache: by reference to gb, which holds p, charged charge; without gb a
 * copy, charged bl.
 */
void blob_keep_block(struct engine *e, const struct blob_desc *d, uint64_t boff, const uint8_t *p,
                     size_t bl, struct getbuf *gb, size_t charge);
/*
 * Keep the verified block at p (bl bytes, inside gb, which region entries
 * may hold) by reference to gb when the region shares allow, else a copy.
 * True if shared.
 */
bool blob_keep_region_block(struct engine *e, const struct blob_desc *d, uint64_t boff,
                            const uint8_t *p, size_t bl, struct getbuf *gb);

/*
 * Enter every blob of p, a pack that was just committed, into the blob
 * cache, each entry holding a reference on p (no copy; p is freed when its
 * last blob leaves the cache).  Best effort: stops quietly on -ENOMEM.
 */
void blob_cache_pack(struct engine *e, struct pack *p);

#endif /* MEMWALFS_BLOBCACHE_H */
