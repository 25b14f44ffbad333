/*
 * pack.c - Blob v2 packs: building in memory, sealing, writing, verifying.
 *
 * Layout (docs/PACKS.md): a 32-byte header (magic, version, epoch,
 * position, header checksum), the blobs back to back with no framing (each
 * blob's offset, length and checksum live in its descriptor, which is the
 * KV_BLOB value in the WAL and later in SSTables), and a 24-byte trailer
 * (data length, blob count, trailer magic, checksum of all data) so that a
 * pack can be checked on its own by fsck.
 *
 * Concurrency: the writer appends under its own lock (the engine mutex);
 * readers copy out under p->mu, which also guards the growth of the data.
 *
 * Memory: a pack's bytes are malloc()ed while small; past PACK_MAP_MIN they
 * move once into an anonymous mapping (mmap, grown with mremap, which moves
 * pages instead of copying them), so a large pack starts on a page
 * boundary: the local store writes it with O_DIRECT straight from there
 * (s3/local.c), without a copy into the page cache.  Small packs stay on
 * the heap so that a blob cache full of them does not use up the process's
 * mappings (vm.max_map_count).  The mappings of freed packs are pooled for
 * the next ones (below, "The mapping pool").  A mapping asks for transparent
 * huge pages (MADV_HUGEPAGE): a pack is written once from start to end, and
 * most packs outlive the small pool in the blob cache, so most are fresh
 * memory; a sequential write of 512 MiB took ~110,000 page faults before.
 */
#include <errno.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#include "buf.h"
#include "coding.h"
#include "log.h"
#include "pack.h"
#include "store.h"

struct pack {
	pthread_mutex_t mu; /* guards buf against append/realloc while read */
	struct mw_buf buf;  /* header + data (+ trailer once sealed); protected by mu */
	uint64_t epoch;     /* writer epoch (const) */
	uint64_t position;  /* WAL position of the group (const) */
	uint32_t count;     /* blobs appended; writer only */
	uint64_t *spans;    /* offset, length of each blob (2 * count); writer, then const */
	uint32_t span_cap;  /* blobs spans has room for */
	int sealed;         /* trailer written; writer only */
	bool mapped;        /* buf.p is a mapping (else malloc()ed); protected by mu */
	XXH3_state_t *hs;   /* running XXH3_64 of the data (the trailer's), fed at append
	                       while the bytes are in the cache; writer only, NULL once sealed */
	atomic_int refs;    /* references */
};

/* A pack's bytes move into a mapping of their own past this size (a multiple of the page size). */
#define PACK_MAP_MIN (1u << 20)

/*
 * The mapping pool.  A large pack's mapping is not unmapped when the pack
 * goes (its last reference: the group, or the blob cache evicting it) but
 * kept here, at most PACK_POOL_MAX of them and PACK_POOL_BYTES in all, for
 * the next pack that moves into a mapping.  Its pages are already faulted
 * in: a sequential write of many packs then pays neither the page faults
 * and the kernel's zeroing of fresh anonymous memory nor the munmap of the
 * old pack (together a fifth of the daemon's time on S3 before the pool).
 * A reused mapping holds an old pack's bytes past buf.len; nothing reads
 * there (readers and the stores stay within buf.len).  Process-wide (every
 * engine of the process shares it), guarded by pool.mu; pack_pool_drain()
 * empties it.
 */
#define PACK_POOL_MAX 8
#define PACK_POOL_BYTES ((size_t)64 << 20)

static struct {
	pthread_mutex_t mu;        /* guards the fields below */
	void *map[PACK_POOL_MAX];  /* pooled mappings */
	size_t cap[PACK_POOL_MAX]; /* their sizes (multiples of the page size) */
	unsigned n;                /* mappings pooled */
	size_t bytes;              /* sum of cap[0, n) */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER};

/*
 * A new mapping of len bytes, with huge pages asked for (one fault per 2 MiB
 * instead of one per 4 KiB where the kernel grants them; the advice moves
 * with the mapping when mremap() grows it).  MAP_FAILED without memory.
 */
static void *map_new(size_t len)
{
	void *q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q != MAP_FAILED)
		(void)madvise(q, len, MADV_HUGEPAGE);
	return q;
}

/*
 * A mapping of at least want bytes (*cap receives its size): the smallest
 * pooled one that is large enough, else the largest pooled one grown with
 * mremap (its pages stay; only the growth is fresh), else a new one.
 * MAP_FAILED without memory.
 */
static void *pool_take(size_t want, size_t *cap)
{
	int fit = -1, big = -1, best;
	void *q;

	pthread_mutex_lock(&pool.mu);
	for (int i = 0; i < (int)pool.n; i++) {
		if (pool.cap[i] >= want && (fit < 0 || pool.cap[i] < pool.cap[fit]))
			fit = i;
		if (big < 0 || pool.cap[i] > pool.cap[big])
			big = i;
	}
	best = fit >= 0 ? fit : big;
	if (best < 0) {
		pthread_mutex_unlock(&pool.mu);
		*cap = want;
		return map_new(want);
	}
	q = pool.map[best];
	*cap = pool.cap[best];
	pool.bytes -= pool.cap[best];
	pool.n--;
	pool.map[best] = pool.map[pool.n];
	pool.cap[best] = pool.cap[pool.n];
	pthread_mutex_unlock(&pool.mu);
	if (*cap >= want)
		return q;
	void *g = mremap(q, *cap, want, MREMAP_MAYMOVE);
	if (g == MAP_FAILED) {
		munmap(q, *cap);
		*cap = want;
		return map_new(want);
	}
	*cap = want;
	return g;
}

/* Keep the mapping [q, q + cap) for a later pack, or unmap it when the pool is full. */
static void pool_give(void *q, size_t cap)
{
	pthread_mutex_lock(&pool.mu);
	if (pool.n < PACK_POOL_MAX && pool.bytes + cap <= PACK_POOL_BYTES) {
		pool.map[pool.n] = q;
		pool.cap[pool.n] = cap;
		pool.n++;
		pool.bytes += cap;
		q = NULL;
	}
	pthread_mutex_unlock(&pool.mu);
	if (q)
		munmap(q, cap);
}

void pack_pool_drain(void)
{
	pthread_mutex_lock(&pool.mu);
	while (pool.n) {
		pool.n--;
		munmap(pool.map[pool.n], pool.cap[pool.n]);
	}
	pool.bytes = 0;
	pthread_mutex_unlock(&pool.mu);
}

size_t pack_pool_bytes(void)
{
	pthread_mutex_lock(&pool.mu);
	size_t n = pool.bytes;
	pthread_mutex_unlock(&pool.mu);
	return n;
}

/* Make room for n more bytes in p's buffer (p->mu held once readers may see it). */
static int pack_reserve(struct pack *p, size_t n)
{
	struct mw_buf *b = &p->buf;
	if (b->len + n <= b->cap)
		return 0;
	if (!p->mapped && b->len + n <= PACK_MAP_MIN)
		return mw_buf_reserve(b, n);
	size_t cap = PACK_MAP_MIN;
	while (cap < b->len + n)
		cap *= 2;
	void *q;
	if (p->mapped) {
		q = mremap(b->p, b->cap, cap, MREMAP_MAYMOVE);
	} else {
		q = pool_take(cap, &cap);
		if (q != MAP_FAILED) {
			memcpy(q, b->p, b->len);
			free(b->p);
		}
	}
	if (q == MAP_FAILED)
		return -ENOMEM;
	b->p = q;
	b->cap = cap;
	p->mapped = true;
	return 0;
}

/* Append n bytes to p's buffer (as pack_reserve()). */
static int pack_put_bytes(struct pack *p, const void *src, size_t n)
{
	int rc = pack_reserve(p, n);
	if (rc == 0 && n) {
		memcpy(p->buf.p + p->buf.len, src, n);
		p->buf.len += n;
	}
	return rc;
}

int pack_new(uint64_t epoch, uint64_t position, struct pack **out)
{
	struct pack *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	if (mw_buf_reserve(&p->buf, PACK_HEADER_SIZE)) {
		free(p);
		return -ENOMEM;
	}
	if (!(p->hs = XXH3_createState()) || XXH3_64bits_reset(p->hs) != XXH_OK) {
		XXH3_freeState(p->hs);
		mw_buf_free(&p->buf);
		free(p);
		return -ENOMEM;
	}
	memset(p->buf.p, 0, PACK_HEADER_SIZE);
	p->buf.len = PACK_HEADER_SIZE;
	pthread_mutex_init(&p->mu, NULL);
	p->epoch = epoch;
	p->position = position;
	atomic_init(&p->refs, 1);
	*out = p;
	return 0;
}

void pack_ref(struct pack *p)
{
	atomic_fetch_add(&p->refs, 1);
}

void pack_unref(struct pack *p)
{
	if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
		return;
	pthread_mutex_destroy(&p->mu);
	if (p->mapped)
		pool_give(p->buf.p, p->buf.cap);
	else
		mw_buf_free(&p->buf);
	free(p->spans);
	XXH3_freeState(p->hs);
	free(p);
}

int pack_append(struct pack *p, const void *data, size_t len, uint8_t *desc)
{
	struct blob_desc d = {
	    .epoch = p->epoch, .position = p->position, .blob_len = len, .length = len};
	const uint8_t *b = data;
	int rc;

	if (p->sealed)
		return -EINVAL;
	if (p->count == p->span_cap) {
		uint32_t cap = p->span_cap ? 2 * p->span_cap : 16;
		uint64_t *sp = realloc(p->spans, 2 * sizeof(*sp) * cap);
		if (!sp)
			return -ENOMEM;
		p->spans = sp;
		p->span_cap = cap;
	}
	pthread_mutex_lock(&p->mu);
	d.offset = p->buf.len;
	rc = pack_put_bytes(p, data, len);
	pthread_mutex_unlock(&p->mu);
	if (rc)
		return rc;
	XXH3_64bits_update(p->hs, data, len); /* the trailer's hash, while data is hot */
	/* the hashes go straight into the descriptor, after its fixed part */
	d.hashes = desc + BLOB_DESC_FIXED;
	for (size_t off = 0, i = 0; off < len; off += BLOB_BLOCK_SIZE, i++) {
		size_t n = len - off < BLOB_BLOCK_SIZE ? len - off : BLOB_BLOCK_SIZE;
		put_be64(desc + BLOB_DESC_FIXED + 8 * i, fmt_hash(b + off, n));
	}
	blob_desc_encode(desc, &d);
	p->spans[2 * p->count] = d.offset;
	p->spans[2 * p->count + 1] = len;
	p->count++;
	return 0;
}

int pack_blob(const struct pack *p, uint32_t i, uint64_t *off, uint64_t *len)
{
	if (i >= p->count)
		return -ERANGE;
	*off = p->spans[2 * i];
	*len = p->spans[2 * i + 1];
	return 0;
}

uint32_t pack_count(const struct pack *p)
{
	return p->count;
}

uint64_t pack_data_bytes(const struct pack *p)
{
	return p->buf.len - PACK_HEADER_SIZE;
}

uint64_t pack_position(const struct pack *p)
{
	return p->position;
}

uint64_t pack_epoch(const struct pack *p)
{
	return p->epoch;
}

int pack_seal(struct pack *p)
{
	uint8_t t[PACK_TRAILER_SIZE];
	uint8_t *h;
	uint64_t dlen;
	int rc;

	if (p->sealed)
		return 0;
	pthread_mutex_lock(&p->mu);
	h = p->buf.p;
	dlen = p->buf.len - PACK_HEADER_SIZE;
	put_be32(h + PACK_OFF_MAGIC, PACK_MAGIC);
	put_be16(h + PACK_OFF_VERSION, PACK_VERSION);
	put_be16(h + PACK_OFF_FLAGS, 0);
	put_be64(h + PACK_OFF_EPOCH, p->epoch);
	put_be64(h + PACK_OFF_POSITION, p->position);
	put_be64(h + PACK_OFF_HEAD_HASH, fmt_hash(h, PACK_OFF_HEAD_HASH));
	put_be64(t + PACK_TOFF_DATA_LEN, dlen);
	put_be32(t + PACK_TOFF_COUNT, p->count);
	put_be32(t + PACK_TOFF_MAGIC, PACK_TAIL_MAGIC);
	/* XXH3_64 of all data, as fmt_hash() of it would give (pack_verify()) */
	put_be64(t + PACK_TOFF_DATA_HASH, (uint64_t)XXH3_64bits_digest(p->hs));
	rc = pack_put_bytes(p, t, sizeof(t));
	/* a sealed pack may live on in the blob cache: give back the slack */
	if (rc == 0 && p->mapped) {
		size_t page = (size_t)sysconf(_SC_PAGESIZE);
		size_t keep = (p->buf.len + page - 1) / page * page;
		if (p->buf.cap > keep + p->buf.len / 8 &&
		    mremap(p->buf.p, p->buf.cap, keep, 0) != MAP_FAILED)
			p->buf.cap = keep;
	} else if (rc == 0 && p->buf.cap > p->buf.len + p->buf.len / 8) {
		uint8_t *q = realloc(p->buf.p, p->buf.len);
		if (q) {
			p->buf.p = q;
			p->buf.cap = p->buf.len;
		}
	}
	pthread_mutex_unlock(&p->mu);
	if (rc == 0)
		p->sealed = 1;
	return rc;
}

int pack_write(struct pack *p, struct store *st, uint64_t *bytes)
{
	char name[FMT_NAME_MAX];
	const struct store_caps *caps = store_caps(st);
	struct store_writer *w = NULL;
	size_t len = p->buf.len;
	int rc;

	if (!p->sealed)
		return -EINVAL;
	fmt_pack_name(name, p->epoch, p->position);
	if (caps->part_size && len > 2 * caps->part_size) {
		/* the sealed pack stays as it is until the writer is done: no copy into parts */
		rc = store_writer_open(st, name, STORE_W_STABLE, &w);
		if (rc)
			goto out;
		for (size_t off = 0; off < len; off += caps->part_size) {
			size_t n = len - off < caps->part_size ? len - off : caps->part_size;
			rc = store_writer_write(w, p->buf.p + off, n);
			if (rc) {
				store_writer_abort(w);
				goto out;
			}
		}
		rc = store_writer_finish(w);
	} else {
		rc = store_put(st, name, p->buf.p, len);
	}
out:
	/* a failure is logged once: by the store, with the key and the errno or
	 * HTTP status; the writer says what follows (retried, or it stops) */
	if (rc == 0 && bytes)
		*bytes = len;
	return rc;
}

int pack_read(struct pack *p, uint64_t off, void *dst, size_t len)
{
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	if (off < PACK_HEADER_SIZE || off > p->buf.len || len > p->buf.len - off)
		rc = -ERANGE;
	else
		memcpy(dst, p->buf.p + off, len);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int pack_verify(const char *name, const void *vbuf, size_t len)
{
	const uint8_t *h = vbuf, *t;
	uint16_t ver;
	uint64_t dlen;

	if (len < PACK_HEADER_SIZE + PACK_TRAILER_SIZE) {
		log_err("pack: %s: truncated (%zu bytes)", name, len);
		return -EUCLEAN;
	}
	if (get_be32(h + PACK_OFF_MAGIC) != PACK_MAGIC) {
		log_err("pack: %s: bad magic", name);
		return -EUCLEAN;
	}
	ver = get_be16(h + PACK_OFF_VERSION);
	/* the header checksum first: a flipped version bit is damage, not a newer version */
	if (get_be64(h + PACK_OFF_HEAD_HASH) != fmt_hash(h, PACK_OFF_HEAD_HASH)) {
		log_err("pack: %s: header checksum mismatch", name);
		return -EUCLEAN;
	}
	if (ver == 0 || ver > PACK_VERSION) {
		log_err("pack: %s: format version %u not supported (this program: %u)", name, ver,
		        PACK_VERSION);
		return ver ? -EPROTONOSUPPORT : -EUCLEAN;
	}
	t = h + len - PACK_TRAILER_SIZE;
	dlen = get_be64(t + PACK_TOFF_DATA_LEN);
	if (get_be32(t + PACK_TOFF_MAGIC) != PACK_TAIL_MAGIC ||
	    dlen != len - PACK_HEADER_SIZE - PACK_TRAILER_SIZE) {
		log_err("pack: %s: bad trailer (torn or bad length)", name);
		return -EUCLEAN;
	}
	if (get_be64(t + PACK_TOFF_DATA_HASH) != fmt_hash(h + PACK_HEADER_SIZE, dlen)) {
		log_err("pack: %s: data checksum mismatch", name);
		return -EUCLEAN;
	}
	return 0;
}
