/*
 * inode.c - the in-memory inode table and the inode records behind it.
 *
 * The table maps inode numbers to struct inode (a chained hash table that
 * doubles when full).  An inode is loaded from its record on first use and
 * dropped when nobody holds it (see internal.h for the counts).  Inode
 * numbers come from the superblock in ranges of MWFS_INO_RANGE so that only
 * one create in MWFS_INO_RANGE writes the superblock; a crash skips at most
 * the rest of a range (numbers are never reused).
 *
 * Everything here runs with fs->mu held, except inode_check(), the reclaim
 * of unlinked inodes (below), which take it.
 *
 * Reclaim.  An inode with no links left keeps its records (and an orphan
 * mark, 'O') while it is used; when the last user lets go, maybe_evict()
 * drops it from the table and queues its number (fs->reclaim).  The records
 * are deleted by inode_reclaim_queued(), which the write-buffer flusher
 * calls on each pass, in batches of many inodes (a handler only queues:
 * an 8-process rm -r held fs->mu three times per file when each handler
 * reclaimed its own inode): the scan of its extents and xattrs, which may read
 * SSTable blocks from the store, and the backpressure wait before the
 * delete run without fs->mu; under it the inode is checked to be still
 * unused (a file handle may have loaded it again: it is then reclaimed when
 * that user lets go) and the batch applied.  Orphans left by a crash, or by
 * a queue that could not grow, are reclaimed at mount and at unmount
 * (inode_reclaim_orphans()) the same way.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "extent.h"
#include "grow.h"
#include "internal.h"
#include "log.h"

static size_t hslot(const struct mwfs *fs, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 20) & (fs->hsize - 1);
}

static int table_grow(struct mwfs *fs)
{
	size_t nsize = fs->hsize ? fs->hsize * 2 : 1024;
	struct inode **nt = calloc(nsize, sizeof(*nt));
	if (!nt)
		return -ENOMEM;
	struct inode **old = fs->htab;
	size_t osize = fs->hsize;
	fs->htab = nt;
	fs->hsize = nsize;
	for (size_t i = 0; i < osize; i++) {
		struct inode *ip = old[i];
		while (ip) {
			struct inode *next = ip->hnext;
			size_t s = hslot(fs, ip->ino);
			ip->hnext = nt[s];
			nt[s] = ip;
			ip = next;
		}
	}
	free(old);
	return 0;
}

/* Find ino in the table (fs->mu held); NULL if not loaded.  No reference taken. */
struct inode *inode_find(struct mwfs *fs, uint64_t ino)
{
	mw_mutex_assert_held(&fs->mu);
	if (!fs->hsize)
		return NULL;
	for (struct inode *ip = fs->htab[hslot(fs, ino)]; ip; ip = ip->hnext)
		if (ip->ino == ino)
			return ip;
	return NULL;
}

static int table_insert(struct mwfs *fs, struct inode *ip)
{
	if (fs->hcount >= fs->hsize) {
		int rc = table_grow(fs);
		if (rc)
			return rc;
	}
	size_t s = hslot(fs, ip->ino);
	ip->hnext = fs->htab[s];
	fs->htab[s] = ip;
	fs->hcount++;
	return 0;
}

static void table_remove(struct mwfs *fs, struct inode *ip)
{
	struct inode **pp = &fs->htab[hslot(fs, ip->ino)];
	while (*pp && *pp != ip)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = ip->hnext;
		fs->hcount--;
	}
}

static struct inode *inode_alloc(uint64_t ino)
{
	struct inode *ip = calloc(1, sizeof(*ip));
	if (!ip)
		return NULL;
	ip->ino = ino;
	if (pthread_rwlock_init(&ip->dlock, NULL)) {
		free(ip);
		return NULL;
	}
	return ip;
}

static void inode_free(struct inode *ip)
{
	wbuf_release(&ip->wb);
	pthread_rwlock_destroy(&ip->dlock);
	free(ip->target);
	free(ip);
}

int inode_warm(struct mwfs *fs, uint64_t ino)
{
	mw_mutex_lock(&fs->mu);
	bool loaded = inode_find(fs, ino) != NULL;
	mw_mutex_unlock(&fs->mu);
	if (loaded)
		return 0;
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_inode(key, ino);
	return fs_warm_key(fs, key, kn);
}

int inode_record_get(struct mwfs *fs, uint64_t ino, bool locked, void **val, size_t *vn,
                     uint64_t *seq)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_inode(key, ino);
	struct fs_region *r = fs_region_of(fs, ino);
	int rc;

	*seq = 0;
	if (!r)
		return -ENOENT; /* a region this mount has no engine for */
	if (r->writer)
		return locked ? fs_get_locked(fs, 0, key, kn, val, vn)
		              : engine_get(r->e, key, kn, val, vn);
	/* -ESTALE: a follower installed a manifest between the two calls; the next is newer */
	do {
		*seq = engine_seq(r->e);
		rc = locked ? fs_get_locked(fs, *seq, key, kn, val, vn)
		            : engine_get_at(r->e, *seq, key, kn, val, vn);
	} while (rc == -ESTALE);
	return rc;
}

bool inode_record_set(struct inode *ip, const void *val, size_t vn, uint64_t seq)
{
	struct schema_inode a;
	const uint8_t *tgt = NULL;
	size_t tlen = 0;
	if (schema_inode_decode(val, vn, &a, &tgt, &tlen) != 0) {
		log_warn("inode %llu: corrupt record (%zu bytes); kept the old one",
		         (unsigned long long)ip->ino, vn);
		return false;
	}
	char *t = NULL;
	if (S_ISLNK(a.mode) && (t = malloc(tlen + 1))) {
		memcpy(t, tgt, tlen);
		t[tlen] = '\0';
	}
	ip->a = a;
	ip->rec_size = a.size;
	ip->seq = seq;
	if (t || !S_ISLNK(a.mode)) {
		free(ip->target);
		ip->target = t;
	}
	return true;
}

/*
 * Take a reference on inode ino, loading its record if needed (fs->mu
 * held).  -ENOENT if it has no record, -EUCLEAN if the record is corrupt.
 * Release with inode_put().
 */
int inode_get(struct mwfs *fs, uint64_t ino, struct inode **out)
{
	mw_mutex_assert_held(&fs->mu);
	struct inode *ip = inode_find(fs, ino);
	if (ip && ip->gone)
		return -ENOENT;
	return inode_get_removed(fs, ino, out);
}

/*
 * Like inode_get(), but an inode whose records are gone while the kernel still holds it (a
 * directory removed by rmdir or a rename over it, still open or looked up) is returned too,
 * with nlink 0: for the attribute operations, which work on it as on ext4 (fstat, fchmod).
 * Changes to such an inode stay in memory (inode_batch_put() writes no record of it).
 */
int inode_get_removed(struct mwfs *fs, uint64_t ino, struct inode **out)
{
	mw_mutex_assert_held(&fs->mu);
	struct inode *ip = inode_find(fs, ino);
	if (ip) {
		ip->refs++;
		*out = ip;
		return 0;
	}
	void *val = NULL;
	size_t vn = 0;
	uint64_t seq = 0;
	int rc = inode_record_get(fs, ino, true, &val, &vn, &seq);
	if (rc)
		return rc;
	const uint8_t *tgt = NULL;
	size_t tlen = 0;
	ip = inode_alloc(ino);
	if (!ip) {
		rc = -ENOMEM;
		goto out;
	}
	rc = schema_inode_decode(val, vn, &ip->a, &tgt, &tlen);
	if (rc) {
		log_err("inode %llu: corrupt record (%zu bytes)", (unsigned long long)ino, vn);
		goto fail;
	}
	if (S_ISLNK(ip->a.mode)) {
		ip->target = malloc(tlen + 1);
		if (!ip->target) {
			rc = -ENOMEM;
			goto fail;
		}
		memcpy(ip->target, tgt, tlen);
		ip->target[tlen] = 0;
	}
	ip->rec_size = ip->a.size;
	ip->seq = seq;
	rc = table_insert(fs, ip);
	if (rc)
		goto fail;
	ip->refs = 1;
	*out = ip;
	goto out;
fail:
	inode_free(ip);
out:
	free(val);
	return rc;
}

/* fs_scan() step of inode_batch_drop(): delete the key from the batch (a struct drop_arg). */
struct drop_arg {
	struct mwfs *fs;
	struct engine_batch *b;
};
static int drop_key(void *arg, const uint8_t *k, size_t kn)
{
	struct drop_arg *d = arg;
	return fs_batch_del(d->fs, d->b, k, kn);
}

int inode_batch_drop(struct mwfs *fs, struct engine_batch *b, uint64_t ino, bool data, bool locked)
{
	uint8_t key[SCHEMA_KEY_MAX];
	struct drop_arg d = {fs, b};
	if (!fs_eng(fs, ino))
		return -ENOENT;
	size_t kn = schema_key_inode(key, ino);
	int rc = fs_batch_del(fs, b, key, kn);
	if (!rc) {
		kn = schema_key_orphan(key, ino);
		rc = fs_batch_del(fs, b, key, kn);
	}
	/* data: extents (pass 0) and allocated ranges (1); then the xattrs (2) */
	for (int pass = data ? 0 : 2; pass < 3 && !rc; pass++) {
		kn = pass == 2   ? schema_key_xattr_prefix(key, ino)
		     : pass == 1 ? schema_key_alloc_prefix(key, ino)
		                 : schema_key_extent_prefix(key, ino);
		rc = fs_scan(fs, locked, key, kn, 0, drop_key, &d);
	}
	return rc;
}

/* Queue ip's inode record into b (fs->mu held). */
int inode_batch_put(struct mwfs *fs, struct engine_batch *b, const struct inode *ip)
{
	mw_mutex_assert_held(&fs->mu);
	uint8_t key[SCHEMA_KEY_MAX];
	uint8_t rec[SCHEMA_INODE_LEN + 4096];
	if (ip->gone)
		return 0; /* its records were deleted: none comes back */
	struct schema_inode a = ip->a;
	size_t tlen = ip->target ? strlen(ip->target) : 0;
	if (tlen > 4096)
		return -ENAMETOOLONG;
	a.size = S_ISREG(a.mode) ? ip->rec_size : a.size;
	size_t kn = schema_key_inode(key, ip->ino);
	size_t rn = schema_inode_encode(&a, ip->target, tlen, rec);
	return fs_batch_put(fs, b, key, kn, rec, rn);
}

/*
 * Apply b (non-waiting) to its region's engine and remember its ticket in the n inodes
 * touched (fs->mu held).  Returns the engine's error unchanged.
 */
int inode_commit(struct mwfs *fs, struct engine_batch *b, struct inode **ips, size_t n)
{
	mw_mutex_assert_held(&fs->mu);
	bool xdev = false;
	struct fs_region *r = fs_batch_region(fs, b, &xdev);
	assert(r && !xdev);
	if (!r)
		return -EINVAL; /* not the thread's batch (fs_batch()) */
	if (xdev)
		return -EXDEV; /* a key of another region was refused: never half a change */
	if (!r->writer)
		return -EROFS;
	for (size_t i = 0; i < n; i++)
		assert(!ips[i] || fs_ino_rid(ips[i]->ino) == r->rid);
	uint64_t t = 0;
	int rc = engine_write(r->e, b, ENGINE_NOWAIT, &t); /* room was waited for before fs->mu */
	if (rc)
		return rc; /* the engine logged why it refuses (a stopped writer), once */
	for (size_t i = 0; i < n; i++)
		if (ips[i])
			ips[i]->ticket = t;
	return 0;
}

/*
 * Start a metadata change on the thread's batch (fs->mu held).  0 or
 * -ENOMEM.  Nothing to free: an uncommitted tx is simply dropped, after
 * inode_tx_undo() if its inodes were changed.
 */
int inode_tx_begin(struct mwfs *fs, struct inode_tx *tx, uint64_t ino)
{
	mw_mutex_assert_held(&fs->mu);
	tx->fs = fs;
	tx->n = 0;
	tx->b = NULL;
	return fs_batch(fs, ino, &tx->b);
}

void inode_tx_begin_on(struct mwfs *fs, struct inode_tx *tx, struct engine_batch *b)
{
	mw_mutex_assert_held(&fs->mu);
	tx->fs = fs;
	tx->n = 0;
	tx->b = b;
}

/*
 * Snapshot ip's attributes and have its record written at commit (fs->mu
 * held).  Call it before changing ip; adding an inode twice (e.g. source
 * and target parent of a rename in one directory) or NULL does nothing.
 */
void inode_tx_add(struct inode_tx *tx, struct inode *ip)
{
	if (!ip)
		return;
	for (size_t i = 0; i < tx->n; i++)
		if (tx->ip[i] == ip)
			return;
	assert(tx->n < INODE_TX_MAX);
	tx->ip[tx->n] = ip;
	tx->a[tx->n] = ip->a;
	tx->rec_size[tx->n] = ip->rec_size;
	tx->n++;
}

/* Put back the attributes of every added inode (fs->mu held). */
void inode_tx_undo(struct inode_tx *tx)
{
	mw_mutex_assert_held(&tx->fs->mu);
	for (size_t i = tx->n; i-- > 0;) {
		tx->ip[i]->a = tx->a[i];
		tx->ip[i]->rec_size = tx->rec_size[i];
	}
}

/*
 * Finish tx (fs->mu held).  rc is the caller's result so far: when it is 0
 * the records of the added inodes are queued and the batch applied
 * (inode_commit(): each added inode remembers the ticket); when rc or the
 * commit fails the snapshots are restored.  Returns the first error.
 */
int inode_tx_commit(struct inode_tx *tx, int rc)
{
	mw_mutex_assert_held(&tx->fs->mu);
	for (size_t i = 0; !rc && i < tx->n; i++)
		rc = inode_batch_put(tx->fs, tx->b, tx->ip[i]);
	if (!rc)
		rc = inode_commit(tx->fs, tx->b, tx->ip, tx->n);
	if (rc)
		inode_tx_undo(tx);
	return rc;
}

/*
 * Allocate a new inode number in parent's region and an in-memory inode with one reference
 * (fs->mu held).  Queues the region's superblock update into b when a new range of numbers
 * is taken.  The caller fills ip->a and commits b; on failure it sets ip->gone and calls
 * inode_put().
 */
int inode_new(struct mwfs *fs, struct engine_batch *b, uint64_t parent, uint32_t mode,
              struct inode **out)
{
	mw_mutex_assert_held(&fs->mu);
	struct fs_region *r = fs_region_of(fs, parent);
	int rc;
	if (!r)
		return -ENOENT;
	/* b is a batch of that region: its superblock goes to that engine */
	assert(fs_batch_region(fs, b, NULL) == r);
	if (fs_batch_region(fs, b, NULL) != r)
		return -EXDEV;
	/* the first number past the region's range (region 0: 2^40) */
	uint64_t end = ((uint64_t)r->rid + 1) << FS_REGION_SHIFT;
	if (r->next_ino >= end)
		return -ENOSPC;
	if (r->next_ino >= r->ino_limit) {
		uint64_t limit = r->ino_limit + MWFS_INO_RANGE;
		struct schema_super sb = {SCHEMA_VERSION, fs->cs, limit < end ? limit : end};
		uint8_t key[4], val[SCHEMA_SUPER_LEN];
		size_t kn = schema_key_super(key);
		schema_super_encode(&sb, val);
		rc = fs_batch_put(fs, b, key, kn, val, sizeof(val));
		if (rc)
			return rc;
		r->ino_limit = sb.next_ino;
	}
	struct inode *ip = inode_alloc(r->next_ino);
	if (!ip)
		return -ENOMEM;
	rc = table_insert(fs, ip);
	if (rc) {
		inode_free(ip);
		return rc;
	}
	r->next_ino++;
	ip->refs = 1;
	ip->alloc = EXT_ALLOC_NONE; /* a new inode has no allocated range to look for */
	ip->a.mode = mode;
	ip->a.nlink = S_ISDIR(mode) ? 2 : 1;
	fs_touch(&ip->a, true, true, true);
	*out = ip;
	return 0;
}

/* Queue ino for inode_reclaim_queued() (fs->mu held).  false: no memory. */
static bool reclaim_queue(struct mwfs *fs, uint64_t ino)
{
	if (MW_GROW(fs->reclaim, fs->reclaim_cap, fs->reclaim_n + 1, 64))
		return false;
	fs->reclaim[fs->reclaim_n++] = ino;
	atomic_store(&fs->reclaim_queued, fs->reclaim_n);
	return true;
}

/* Drop ip from the table if unused; queue the reclaim of its records if it has no links. */
static void maybe_evict(struct mwfs *fs, struct inode *ip)
{
	if (ip->nlookup || ip->nopen || ip->refs || ip->ino == SCHEMA_ROOT_INO)
		return;
	if (ip->a.nlink == 0 && !ip->gone && fs_region_writes(fs, ip->ino) &&
	    !reclaim_queue(fs, ip->ino))
		log_warn("reclaiming inode %llu: out of memory (stays an orphan until the next "
		         "mount)",
		         (unsigned long long)ip->ino);
	table_remove(fs, ip);
	inode_free(ip);
}

/*
 * Delete the records of the unlinked inode ino (fs->mu NOT held; takes it to
 * check and apply).  0, 1 when the inode is in use again (skipped), or the
 * error.
 */
static int reclaim_one(struct mwfs *fs, uint64_t ino)
{
	struct engine_batch *b = NULL;
	struct engine_batch_mark m;
	int rc = fs_batch(fs, ino, &b);
	if (!rc)
		rc = inode_batch_drop(fs, b, ino, true, false);
	if (!rc) {
		engine_batch_get_mark(b, &m);
		rc = engine_wait_room(fs_eng(fs, ino), m.bytes + FS_META_ROOM);
	}
	if (rc)
		return rc;
	mw_mutex_lock(&fs->mu);
	struct inode *ip = inode_find(fs, ino);
	if (ip && (ip->nopen || ip->refs || ip->a.nlink || ip->gone)) {
		rc = 1;
	} else {
		rc = inode_commit(fs, b, NULL, 0);
		if (!rc && ip)
			ip->gone = true;
	}
	mw_mutex_unlock(&fs->mu);
	return rc;
}

/*
 * Reclaim up to n queued inodes in one batch and one commit (fs->mu NOT
 * held): the scans run before the lock; under it every inode is checked to
 * be still unused.  If one is in use again (rare: a handle opened it by
 * number), the batch is dropped and each inode goes through reclaim_one(),
 * which skips that one.  The inodes are of one region (n >= 1).  0 or the error (the
 * inodes then stay orphans).
 */
static int reclaim_batch(struct mwfs *fs, const uint64_t *inos, size_t n)
{
	struct engine_batch *b = NULL;
	struct engine_batch_mark m;
	int rc = fs_batch(fs, inos[0], &b);
	for (size_t i = 0; !rc && i < n; i++)
		rc = inode_batch_drop(fs, b, inos[i], true, false);
	if (!rc) {
		engine_batch_get_mark(b, &m);
		rc = engine_wait_room(fs_eng(fs, inos[0]), m.bytes + FS_META_ROOM);
	}
	if (rc)
		return rc;
	bool busy = false;
	mw_mutex_lock(&fs->mu);
	for (size_t i = 0; i < n && !busy; i++) {
		struct inode *ip = inode_find(fs, inos[i]);
		busy = ip && (ip->nopen || ip->refs || ip->a.nlink || ip->gone);
	}
	if (!busy) {
		rc = inode_commit(fs, b, NULL, 0);
		for (size_t i = 0; !rc && i < n; i++) {
			struct inode *ip = inode_find(fs, inos[i]);
			if (ip)
				ip->gone = true;
		}
	} else {
		engine_batch_clear(b);
	}
	mw_mutex_unlock(&fs->mu);
	for (size_t i = 0; busy && i < n; i++) {
		int r = reclaim_one(fs, inos[i]);
		if (r < 0 && !rc)
			rc = r;
	}
	return rc;
}

/*
 * Drain the reclaim queue, RECLAIM_BATCH inodes of one region per commit.  The write-buffer
 * flusher calls it on every pass (100 ms by default), so a handler that lets
 * an unlinked inode go (unlink, rename, forget, release) only queues it: an
 * `rm -r` of many files costs one commit per batch for the records, not one
 * per file, and its handlers hold fs->mu once each.
 */
#define RECLAIM_BATCH 256

void inode_reclaim_queued(struct mwfs *fs)
{
	uint64_t inos[RECLAIM_BATCH];
	while (atomic_load(&fs->reclaim_queued)) {
		size_t n = 0;
		mw_mutex_lock(&fs->mu);
		/* the newest's region: a batch commits in one region (fs_batch()) */
		uint32_t rid = fs->reclaim_n ? fs_ino_rid(fs->reclaim[fs->reclaim_n - 1]) : 0;
		for (size_t i = fs->reclaim_n; i-- > 0 && n < RECLAIM_BATCH;) {
			if (fs_ino_rid(fs->reclaim[i]) != rid)
				continue;
			inos[n++] = fs->reclaim[i];
			/* every entry after i was looked at already: the last may move into i */
			fs->reclaim[i] = fs->reclaim[--fs->reclaim_n];
		}
		atomic_store(&fs->reclaim_queued, fs->reclaim_n);
		mw_mutex_unlock(&fs->mu);
		if (!n)
			break;
		int rc = reclaim_batch(fs, inos, n);
		if (rc < 0)
			log_warn(
			    "reclaiming %zu inode(s) from %llu: %s (they stay orphans until the "
			    "next mount)",
			    n, (unsigned long long)inos[0], strerror(-rc));
	}
}

/* Release a reference taken by inode_get()/inode_new() (fs->mu held unless ip is NULL). */
int inode_put(struct mwfs *fs, struct inode *ip)
{
	if (!ip)
		return 0; /* nothing held: callers may not hold fs->mu then */
	mw_mutex_assert_held(&fs->mu);
	ip->refs--;
	maybe_evict(fs, ip);
	return 0;
}

/*
 * Does inode ino exist (fs->mu NOT held; takes it)?  0, -ENOENT, or the
 * error of loading its record.  For handlers that read other records of
 * ino without the lock.
 */
int inode_check(struct mwfs *fs, uint64_t ino)
{
	struct inode *ip = NULL;
	int rc = inode_warm(fs, ino);
	if (rc)
		return rc;
	mw_mutex_lock(&fs->mu);
	do
		rc = inode_get(fs, ino, &ip);
	while (fs_miss_retry(fs, &rc));
	inode_put(fs, ip);
	mw_mutex_unlock(&fs->mu);
	return rc;
}

/* Drop n kernel lookups of ino (fs->mu held). */
void inode_forget(struct mwfs *fs, uint64_t ino, uint64_t n)
{
	mw_mutex_assert_held(&fs->mu);
	struct inode *ip = inode_find(fs, ino);
	if (!ip)
		return;
	ip->nlookup = n > ip->nlookup ? 0 : ip->nlookup - n;
	maybe_evict(fs, ip);
}

/*
 * Reclaim every orphan of region r that is not open (fs->mu NOT held).
 */
static int reclaim_orphans(struct mwfs *fs, struct fs_region *r)
{
	uint8_t key[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	key[0] = SCHEMA_TAG_ORPHAN;
	size_t en = schema_prefix_end(key, 1, end);
	uint64_t *inos = NULL;
	size_t n = 0, cap = 0, done = 0;
	struct engine_iter *it = NULL;
	int rc;
	for (rc = engine_iter_new(r->e, key, 1, end, en, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t kn;
		const uint8_t *k = engine_iter_key(it, &kn);
		if (MW_GROW(inos, cap, n + 1, 64)) {
			rc = -ENOMEM;
			break;
		}
		inos[n++] = schema_key_u64(k, kn, 1);
	}
	if (!rc)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	for (size_t i = 0; !rc && i < n; i++) {
		if (fs_ino_rid(inos[i]) != r->rid) {
			/* a key of another region in this engine: not ours to delete */
			log_warn("region %u: orphan mark of inode %llu of region %u; left alone",
			         r->rid, (unsigned long long)inos[i], fs_ino_rid(inos[i]));
			continue;
		}
		if (r->rid && inos[i] == ((uint64_t)r->rid << FS_REGION_SHIFT | 1)) {
			/*
			 * A region's root keeps the mark of its creation when the creator died
			 * before clearing it (docs/REGIONS.md "Creating a region"): its entry
			 * lives in the parent region, so whether one names it is not known here.
			 * Never reclaimed by a mount: fsck reports a root that nothing names.
			 */
			continue;
		}
		rc = reclaim_one(fs, inos[i]);
		done += rc == 0;
		rc = rc > 0 ? 0 : rc;
	}
	if (n)
		log_info("reclaimed %zu of %zu orphan inode(s)%s: %s", done, n,
		         r->rid ? " of a region" : "", rc ? strerror(-rc) : "ok");
	free(inos);
	return rc;
}

/*
 * Reclaim every orphan that is not open, in every region this mount writes (fs->mu NOT
 * held): at mount (after a crash nothing is open), after a take, and at unmount.
 */
int inode_reclaim_orphans(struct mwfs *fs)
{
	int first = 0;
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	for (unsigned i = 0; i < n; i++) {
		if (!fs->reg[i].writer)
			continue;
		int rc = reclaim_orphans(fs, &fs->reg[i]);
		if (rc && !first)
			first = rc;
	}
	return first;
}

/* Free every in-memory inode (at close; no handler runs any more). */
void inode_table_free(struct mwfs *fs)
{
	for (size_t i = 0; i < fs->hsize; i++) {
		struct inode *ip = fs->htab[i];
		while (ip) {
			struct inode *next = ip->hnext;
			inode_free(ip);
			ip = next;
		}
	}
	free(fs->htab);
	fs->htab = NULL;
	fs->hsize = fs->hcount = 0;
	free(fs->reclaim); /* still orphans: reclaimed at the next mount */
	fs->reclaim = NULL;
	fs->reclaim_n = fs->reclaim_cap = 0;
	atomic_store(&fs->reclaim_queued, 0);
}
