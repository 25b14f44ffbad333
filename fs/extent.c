/*
 * extent.c - file data as extents (see extent.h and docs/SCHEMA.md).
 *
 * An extent is keyed by the file offset where it ends, so the extents that
 * overlap [from, to) are found by one scan that starts at the first key
 * above from and stops at the first extent that starts at or after to (the
 * value's length gives its start; extents never overlap, so they sort by
 * start too).  The scan reads only references (engine_iter_ref()), never
 * blob bytes; a read then fetches, per extent, only the checksum blocks of
 * its blob that the range touches (engine_ref_read()).
 *
 * A store that does not answer during a scan is waited for by fs_retry()
 * (common.c: the engine's retry policy, within the bound of threads that may
 * wait unless a write waits on it): each operation below is a function that
 * starts over when called again (rewinds what it added to the batch,
 * forgets what it gathered).
 *
 * Allocation.  fallocate allocates the parts of its range that no extent
 * holds as allocated ranges, 'A' ino end -> start: they read as holes, and
 * count in the inode's stored bytes (st_blocks) like extents.  Allocated
 * ranges never overlap each other or an extent: clearing a range for a write,
 * a truncate, a punch hole or a copy clears the allocated ranges in it too, by
 * the same scan-and-trim as extents (their bytes counted as removed, the
 * write's extent then adds its own).  An inode remembers whether it has
 * allocated ranges (ip->alloc) after one look, so files never fallocated pay
 * one seek per inode load, not one per write.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"
#include "extent.h"
#include "grow.h"
#include "internal.h"
#include "log.h"
#include "thread.h"

/*
 * One record met by a scan: file range [start, end) and, for an extent, its
 * value's reference (an allocated range has none).
 */
struct ext {
	uint64_t start, end;
	struct engine_ref ref;
};

typedef int (*ext_fn)(void *arg, const struct ext *x);

/*
 * A scan's iterator over one inode's records of tag (extents or allocated ranges);
 * at: 0, or the state at engine_seq() at.
 */
static int iter_open_tag(struct mwfs *fs, uint8_t tag, uint64_t ino, uint64_t at,
                         struct engine_iter **it)
{
	uint8_t pfx[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	size_t pn = tag == SCHEMA_TAG_ALLOC ? schema_key_alloc_prefix(pfx, ino)
	                                    : schema_key_extent_prefix(pfx, ino);
	size_t en = schema_prefix_end(pfx, pn, end);
	struct engine *e = fs_eng(fs, ino); /* an inode's data is in its region */
	if (!e)
		return -ENOENT;
	if (at)
		return engine_iter_new_at(e, at, pfx, pn, en ? end : NULL, en, it);
	return engine_iter_new(e, pfx, pn, en ? end : NULL, en, it);
}

static int iter_open(struct mwfs *fs, uint64_t ino, uint64_t at, struct engine_iter **it)
{
	return iter_open_tag(fs, SCHEMA_TAG_EXTENT, ino, at, it);
}

/* The key of the record of tag of ino that ends at end. */
static size_t rec_key(uint8_t *key, uint8_t tag, uint64_t ino, uint64_t end)
{
	return tag == SCHEMA_TAG_ALLOC ? schema_key_alloc(key, ino, end)
	                               : schema_key_extent(key, ino, end);
}

/* Decode the record of tag under it into x: 0 or -EUCLEAN (logged). */
static int rec_read(struct engine_iter *it, uint8_t tag, uint64_t ino, struct ext *x)
{
	size_t n, vn = 0;
	const uint8_t *k = engine_iter_key(it, &n);
	uint64_t len = 0;
	x->end = schema_key_u64(k, n, 9);
	if (tag == SCHEMA_TAG_ALLOC) {
		const void *v = NULL;
		memset(&x->ref, 0, sizeof(x->ref));
		if (engine_iter_value(it, &v, &vn) == 0 && vn == SCHEMA_ALLOC_LEN &&
		    get_be64(v) < x->end)
			len = x->end - get_be64(v);
	} else {
		engine_iter_ref(it, &x->ref);
		len = engine_ref_len(&x->ref);
	}
	if (n != 17 || len == 0 || len > x->end) {
		log_err("inode %llu: malformed %s record (key %zu bytes, ending at %llu, %llu "
		        "bytes)",
		        (unsigned long long)ino, tag == SCHEMA_TAG_ALLOC ? "allocation" : "extent",
		        n, (unsigned long long)x->end, (unsigned long long)len);
		return -EUCLEAN;
	}
	x->start = x->end - len;
	return 0;
}

/*
 * Call fn for every record of tag of ino overlapping [from, to), in file
 * order, on it (seeked there).  A nonzero return of fn stops the scan and is
 * returned (1: stop, no error).
 */
static int scan_iter_tag(struct engine_iter *it, uint8_t tag, uint64_t ino, uint64_t from,
                         uint64_t to, ext_fn fn, void *arg)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = rec_key(key, tag, ino, from == UINT64_MAX ? from : from + 1);
	int rc = 0;

	if (from >= to)
		return 0;
	for (engine_iter_seek(it, key, kn); engine_iter_valid(it); engine_iter_next(it)) {
		struct ext x;
		if ((rc = rec_read(it, tag, ino, &x)))
			return rc;
		if (x.start >= to)
			break;
		if ((rc = fn(arg, &x)))
			break;
	}
	if (!rc)
		rc = engine_iter_status(it);
	return rc;
}

static int scan_iter(struct engine_iter *it, uint64_t ino, uint64_t from, uint64_t to, ext_fn fn,
                     void *arg)
{
	return scan_iter_tag(it, SCHEMA_TAG_EXTENT, ino, from, to, fn, arg);
}

/* scan_iter() of [from, to) on an iterator of its own (at: iter_open()). */
static int scan_once(struct mwfs *fs, uint64_t ino, uint64_t at, uint64_t from, uint64_t to,
                     ext_fn fn, void *arg)
{
	struct engine_iter *it = NULL;
	if (from >= to)
		return 0;
	int rc = iter_open(fs, ino, at, &it);
	if (!rc)
		rc = scan_iter(it, ino, from, to, fn, arg);
	engine_iter_free(it);
	return rc == 1 ? 0 : rc;
}

/* ---- reads ------------------------------------------------------------ */

struct read_arg {
	struct mwfs *fs;
	struct engine *e; /* ino's region's */
	uint64_t ino, at;
	uint64_t off, n; /* the file range read */
	uint8_t *dst;
	uint64_t filled; /* dst is written up to here (file offset); holes are zeroed */
	bool wait;
	unsigned tries;
};

static int read_one(void *arg, const struct ext *x)
{
	struct read_arg *r = arg;
	uint64_t a = x->start > r->off ? x->start : r->off;
	uint64_t z = x->end < r->off + r->n ? x->end : r->off + r->n;
	if (a > r->filled) /* a hole before this extent */
		memset(r->dst + (r->filled - r->off), 0, a - r->filled);
	int rc =
	    engine_ref_read(r->e, &x->ref, a - x->start, r->dst + (a - r->off), z - a, r->wait);
	if (rc == 0)
		r->filled = z;
	return rc;
}

static int read_once(void *arg)
{
	struct read_arg *r = arg;
	r->filled = r->off;
	if (r->tries++)
		r->wait = true; /* a blob read failed: wait for the store from now on */
	return scan_once(r->fs, r->ino, r->at, r->off, r->off + r->n, read_one, r);
}

int ext_read(struct mwfs *fs, uint64_t ino, uint64_t at, uint64_t off, uint8_t *dst, size_t n,
             bool wait)
{
	struct read_arg r = {fs, fs_eng(fs, ino), ino, at, off, n, dst, off, wait, 0};
	if (n == 0)
		return 0;
	if (!r.e)
		return -ENOENT;
	int rc = fs_retry(fs, wait, read_once, &r);
	if (rc)
		return rc;
	if (r.filled < off + n)
		memset(dst + (r.filled - off), 0, off + n - r.filled);
	return 0;
}

struct prefetch_arg {
	struct engine *e; /* the inode's region's */
	uint64_t off, n;
};

static int prefetch_one(void *arg, const struct ext *x)
{
	struct prefetch_arg *p = arg;
	uint64_t a = x->start > p->off ? x->start : p->off;
	uint64_t z = x->end < p->off + p->n ? x->end : p->off + p->n;
	return engine_ref_prefetch(p->e, &x->ref, a - x->start, z - a);
}

int ext_prefetch(struct mwfs *fs, uint64_t ino, uint64_t off, uint64_t n)
{
	struct prefetch_arg p = {fs_eng(fs, ino), off, n};
	if (!p.e)
		return -ENOENT;
	return scan_once(fs, ino, 0, off, off + n, prefetch_one, &p);
}

/* ---- changes ---------------------------------------------------------- */

/*
 * Clearing a set of ranges (sorted, disjoint).  An extent may overlap
 * several of them: it is handled once, when the scan of the first meets it,
 * and what is left of it is every gap between the ranges inside it, each
 * kept by reference under the key of its end.  Its own key is deleted
 * unless its last part survives (then it is overwritten).  Then the same for
 * the inode's allocated ranges, if it has any (a kept part of one is a new
 * record with its start).
 */
struct clear_arg {
	struct mwfs *fs;
	struct engine_batch *b;
	struct inode *ip;
	const struct ext_range *r;
	size_t n;
	uint8_t tag;      /* the records being cleared: extents, then allocated ranges */
	size_t cur;       /* the range being scanned: none before it overlaps what the scan meets */
	uint64_t handled; /* records ending at or below this were handled */
	uint64_t removed;
	uint8_t alloc; /* what the scan learnt of ip->alloc (set once the batch is applied) */
	struct engine_batch_mark m; /* b before the first try */
};

/* Keep [from, to) of record x (of c->tag) as a record ending at to. */
static int keep_part(struct clear_arg *c, const struct ext *x, uint64_t from, uint64_t to)
{
	uint8_t key[SCHEMA_KEY_MAX], v[SCHEMA_ALLOC_LEN];
	size_t kn = rec_key(key, c->tag, c->ip->ino, to);
	if (c->tag == SCHEMA_TAG_EXTENT)
		return fs_batch_put_ref(c->fs, c->b, key, kn, &x->ref, from - x->start, to - from);
	put_be64(v, from);
	return fs_batch_put(c->fs, c->b, key, kn, v, sizeof(v));
}

static int clear_one(void *arg, const struct ext *x)
{
	struct clear_arg *c = arg;
	uint8_t key[SCHEMA_KEY_MAX];
	int rc = 0;
	if (x->end <= c->handled)
		return 0; /* met again by the scan of a later range */
	c->handled = x->end;
	uint64_t pos = x->start; /* x's bytes before pos are dealt with */
	for (size_t i = c->cur; i < c->n && c->r[i].off < x->end && !rc; i++) {
		uint64_t a = c->r[i].off, z = a + c->r[i].len;
		if (z <= pos)
			continue;
		if (a > pos) /* keep [pos, a), ending at the range's start */
			rc = keep_part(c, x, pos, a);
		uint64_t lo = a > x->start ? a : x->start, hi = z < x->end ? z : x->end;
		c->removed += hi - lo;
		pos = z;
	}
	if (!rc && pos < x->end) /* keep the last part, under the same key */
		rc = keep_part(c, x, pos, x->end);
	else if (!rc)
		rc = fs_batch_del(c->fs, c->b, key, rec_key(key, c->tag, c->ip->ino, x->end));
	return rc;
}

/* Clear c's ranges of the records of c->tag, on an iterator of its own. */
static int clear_tag(struct clear_arg *c, uint8_t tag)
{
	struct engine_iter *it = NULL;
	int rc = iter_open_tag(c->fs, tag, c->ip->ino, 0, &it);
	c->tag = tag;
	c->handled = 0;
	if (!rc && tag == SCHEMA_TAG_ALLOC && c->alloc == EXT_ALLOC_UNKNOWN) {
		/* one look at the whole prefix: has the inode any allocated range? */
		uint8_t pfx[SCHEMA_KEY_MAX];
		engine_iter_seek(it, pfx, schema_key_alloc_prefix(pfx, c->ip->ino));
		rc = engine_iter_status(it);
		c->alloc = engine_iter_valid(it) ? EXT_ALLOC_SOME : EXT_ALLOC_NONE;
	}
	for (size_t i = 0;
	     i < c->n && !rc && !(tag == SCHEMA_TAG_ALLOC && c->alloc == EXT_ALLOC_NONE); i++) {
		c->cur = i;
		uint64_t to =
		    c->r[i].len > UINT64_MAX - c->r[i].off ? UINT64_MAX : c->r[i].off + c->r[i].len;
		rc = scan_iter_tag(it, tag, c->ip->ino, c->r[i].off, to, clear_one, c);
	}
	engine_iter_free(it);
	return rc;
}

static int clear_set_once(void *arg)
{
	struct clear_arg *c = arg;
	engine_batch_rewind(c->b, &c->m);
	c->handled = c->removed = 0;
	c->alloc = c->ip->alloc;
	int rc = clear_tag(c, SCHEMA_TAG_EXTENT);
	if (!rc && c->alloc != EXT_ALLOC_NONE)
		rc = clear_tag(c, SCHEMA_TAG_ALLOC);
	return rc;
}

int ext_clear_set(struct mwfs *fs, struct engine_batch *b, struct inode *ip,
                  const struct ext_range *r, size_t n, uint64_t *removed)
{
	struct clear_arg c = {fs, b, ip, r, n, SCHEMA_TAG_EXTENT, 0, 0, 0, ip->alloc};
	engine_batch_get_mark(b, &c.m);
	/* the bytes being written or cut wait in memory: wait for the store */
	int rc = fs_retry(fs, true, clear_set_once, &c);
	if (!rc) {
		*removed += c.removed;
		ip->alloc = c.alloc; /* NONE stays true whether or not b is applied */
	}
	return rc;
}

int ext_clear(struct mwfs *fs, struct engine_batch *b, struct inode *ip, uint64_t from, uint64_t to,
              uint64_t *removed)
{
	struct ext_range r = {from, to - from};
	return from < to ? ext_clear_set(fs, b, ip, &r, 1, removed) : 0;
}

/*
 * Allocation: the parts of [off, end) that neither an extent nor an allocated
 * range holds become allocated ranges.  The records met inside are gathered
 * (both kinds come in file order; merged by a sort) and the gaps between them
 * put.
 */
struct alloc_arg {
	struct mwfs *fs;
	struct engine_batch *b;
	uint64_t ino, off, end;
	struct ext_range *held; /* what the records hold inside [off, end) */
	size_t n, cap;
	uint64_t added;
	struct engine_batch_mark m; /* b before the first try */
};

static int alloc_held(void *arg, const struct ext *x)
{
	struct alloc_arg *a = arg;
	if (MW_GROW(a->held, a->cap, a->n + 1, 64))
		return -ENOMEM;
	uint64_t lo = x->start > a->off ? x->start : a->off, hi = x->end < a->end ? x->end : a->end;
	a->held[a->n++] = (struct ext_range){lo, hi - lo};
	return 0;
}

static int range_cmp(const void *p, const void *q)
{
	const struct ext_range *x = p, *y = q;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int alloc_once(void *arg)
{
	struct alloc_arg *a = arg;
	uint8_t key[SCHEMA_KEY_MAX], v[SCHEMA_ALLOC_LEN];
	int rc = 0;
	engine_batch_rewind(a->b, &a->m);
	a->n = 0;
	a->added = 0;
	for (int pass = 0; pass < 2 && !rc; pass++) {
		uint8_t tag = pass ? SCHEMA_TAG_ALLOC : SCHEMA_TAG_EXTENT;
		struct engine_iter *it = NULL;
		rc = iter_open_tag(a->fs, tag, a->ino, 0, &it);
		if (!rc)
			rc = scan_iter_tag(it, tag, a->ino, a->off, a->end, alloc_held, a);
		engine_iter_free(it);
	}
	if (rc)
		return rc;
	qsort(a->held, a->n, sizeof(*a->held), range_cmp);
	/*
	 * A gap at off continues an allocated range that ends there (a file extended by
	 * fallocate a piece at a time): that record grows instead of a second one starting.
	 */
	uint64_t first = a->off;
	if (a->off > 0 && (a->n == 0 || a->held[0].off > a->off)) {
		void *val = NULL;
		size_t vn = 0, kn = schema_key_alloc(key, a->ino, a->off);
		struct engine *e = fs_eng(a->fs, a->ino);
		rc = e ? engine_get(e, key, kn, &val, &vn) : -ENOENT;
		if (!rc && vn == SCHEMA_ALLOC_LEN && get_be64(val) < a->off) {
			first = get_be64(val);
			rc = fs_batch_del(a->fs, a->b, key, kn);
		}
		free(val);
		if (rc == -ENOENT)
			rc = 0;
	}
	uint64_t pos = a->off;
	for (size_t i = 0; i <= a->n && !rc; i++) {
		uint64_t next = i < a->n ? a->held[i].off : a->end;
		if (next > pos) { /* a gap [pos, next) */
			put_be64(v, pos == a->off ? first : pos);
			rc = fs_batch_put(a->fs, a->b, key, schema_key_alloc(key, a->ino, next), v,
			                  sizeof(v));
			a->added += next - pos;
		}
		if (i < a->n && a->held[i].off + a->held[i].len > pos)
			pos = a->held[i].off + a->held[i].len;
	}
	return rc;
}

int ext_alloc(struct mwfs *fs, struct engine_batch *b, struct inode *ip, uint64_t off, uint64_t end,
              uint64_t *added)
{
	struct alloc_arg a = {fs, b, ip->ino, off, end, NULL, 0, 0, 0};
	if (off >= end)
		return 0;
	engine_batch_get_mark(b, &a.m);
	int rc = fs_retry(fs, true, alloc_once, &a);
	free(a.held);
	if (!rc) {
		*added += a.added;
		if (a.added)
			ip->alloc = EXT_ALLOC_SOME;
	}
	return rc;
}

int ext_add(struct mwfs *fs, struct engine_batch *b, uint64_t ino, uint64_t off,
            const uint8_t *data, size_t n, uint64_t *added)
{
	uint8_t key[SCHEMA_KEY_MAX];
	if (n == 0 || fs_all_zero(data, n))
		return 0;
	size_t kn = schema_key_extent(key, ino, off + n);
	/* borrowed: data (a FUSE request's or the write buffer's) outlives the commit */
	int rc = fs_batch_put_borrowed(fs, b, key, kn, data, n);
	if (!rc)
		*added += n;
	return rc;
}

struct share_arg {
	struct mwfs *fs;
	struct engine_batch *b;
	uint64_t src, soff, len, dst, doff;
	uint64_t added;
	struct engine_batch_mark m; /* b before the first try */
};

static int share_one(void *arg, const struct ext *x)
{
	struct share_arg *s = arg;
	uint8_t key[SCHEMA_KEY_MAX];
	uint64_t a = x->start > s->soff ? x->start : s->soff;
	uint64_t z = x->end < s->soff + s->len ? x->end : s->soff + s->len;
	size_t kn = schema_key_extent(key, s->dst, s->doff + (z - s->soff));
	int rc = fs_batch_put_ref(s->fs, s->b, key, kn, &x->ref, a - x->start, z - a);
	if (!rc)
		s->added += z - a;
	return rc;
}

static int share_once(void *arg)
{
	struct share_arg *s = arg;
	engine_batch_rewind(s->b, &s->m);
	s->added = 0;
	return scan_once(s->fs, s->src, 0, s->soff, s->soff + s->len, share_one, s);
}

int ext_share(struct mwfs *fs, struct engine_batch *b, uint64_t src, uint64_t soff, uint64_t len,
              uint64_t dst, uint64_t doff, uint64_t *added)
{
	struct share_arg s = {fs, b, src, soff, len, dst, doff, 0, {0}};
	engine_batch_get_mark(b, &s.m);
	int rc = fs_retry(fs, false, share_once, &s);
	if (!rc)
		*added += s.added;
	return rc;
}

/* ---- lseek and counting ------------------------------------------------ */

struct seek_arg {
	struct mwfs *fs;
	uint64_t ino, off;
	bool data;
	uint64_t pos; /* SEEK_DATA: the first data at or after off; SEEK_HOLE: scan position */
	bool found;
};

static int seek_one(void *arg, const struct ext *x)
{
	struct seek_arg *s = arg;
	if (s->data) {
		s->pos = x->start > s->off ? x->start : s->off;
		s->found = true;
		return 1;
	}
	if (x->start > s->pos)
		return 1; /* a hole at s->pos */
	s->pos = x->end;
	return 0;
}

static int seek_once(void *arg)
{
	struct seek_arg *s = arg;
	s->pos = s->off;
	s->found = false;
	return scan_once(s->fs, s->ino, 0, s->off, UINT64_MAX, seek_one, s);
}

int ext_seek(struct mwfs *fs, uint64_t ino, uint64_t off, uint64_t size, bool data, uint64_t *pos)
{
	struct seek_arg s = {fs, ino, off, data, off, false};
	int rc = fs_retry(fs, false, seek_once, &s);
	if (rc)
		return rc;
	if (data) {
		if (!s.found || s.pos >= size)
			return -ENXIO;
		*pos = s.pos;
	} else {
		*pos = s.pos < size ? s.pos : size;
	}
	return 0;
}

struct count_arg {
	unsigned n, limit;
};

static int count_one(void *arg, const struct ext *x)
{
	struct count_arg *c = arg;
	(void)x;
	return ++c->n > c->limit ? 1 : 0;
}

int ext_count(struct mwfs *fs, uint64_t ino, uint64_t from, uint64_t to, unsigned limit,
              unsigned *count)
{
	struct count_arg c = {0, limit};
	int rc = scan_once(fs, ino, 0, from, to, count_one, &c);
	*count = c.n;
	return rc;
}
