/*
 * region.c - the mount's table of regions and the rules between regions
 * (docs/REGIONS.md, "Routing in fs/").
 *
 * A region is a range of inode numbers with an engine of its own (its WAL, epoch and
 * manifest): ino = rid << FS_REGION_SHIFT | n.  Region 0 is the store as it was before
 * regions (every inode below 2^40, root 1), at the store's root; region rid > 0 is an
 * engine on the view r/<rid>/ of the store, which the mount command opens.  Keys are
 * routed by the inode number after their tag (internal.h, fs_key_rid()): an inode's
 * record, extents, allocated ranges, xattrs and orphan mark live in its region, a
 * directory entry in its parent's, and each region's engine keeps its own superblock with
 * the next inode number of its range.  New inodes are made in their parent's region, so
 * each region is a connected subtree; a region's root is a directory whose inode is in
 * the region and whose entry is in the parent region.
 *
 * The table (mwfs.reg, mwfs.nreg) only grows while the mount runs: fs_region_add() fills
 * an entry and then publishes it, so lookups (fs_region_of(), internal.h) take no lock.
 * What a region's entry says about its engine changes only inside the gate (mode.c).
 *
 * The rules below are pure functions of inode numbers, called by dir.c before anything
 * changes: every batch commits in one region (fs_batch()), so an operation whose keys
 * would land in two is refused.  With one region they never refuse.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "log.h"

/* The largest region id an inode number can carry (the bits above FS_REGION_SHIFT). */
#define RID_MAX ((uint32_t)((UINT64_MAX >> FS_REGION_SHIFT)))

int fs_region_add(struct mwfs *fs, uint32_t rid, struct engine *e, bool writer)
{
	struct schema_super sb;
	if (rid > RID_MAX || !e)
		return -EINVAL;
	int rc = fs_read_super(e, &sb); /* store I/O: before fs->mu */
	if (rc)
		return rc;
	uint64_t lo = (uint64_t)rid << FS_REGION_SHIFT;
	uint64_t hi = rid == RID_MAX ? UINT64_MAX : lo + (1ull << FS_REGION_SHIFT);
	if (sb.next_ino < lo || sb.next_ino > hi) {
		log_err("region %u: its superblock's next inode number %llu is outside the "
		        "region's range",
		        rid, (unsigned long long)sb.next_ino);
		return -EUCLEAN;
	}
	if (fs->cs && sb.chunk_size != fs->cs) {
		log_err("region %u: chunk size %u, the mount's is %u", rid, sb.chunk_size, fs->cs);
		return -EINVAL;
	}
	mw_mutex_lock(&fs->mu);
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_relaxed);
	if (fs_region_get(fs, rid))
		rc = -EEXIST;
	else if (n == FS_REGIONS_MAX)
		rc = -ENOSPC;
	if (!rc) {
		struct fs_region *r = &fs->reg[n];
		memset(r, 0, sizeof(*r));
		r->rid = rid;
		r->e = e;
		r->writer = writer;
		r->next_ino = r->ino_limit = sb.next_ino;
		atomic_store_explicit(&fs->nreg, n + 1, memory_order_release);
	}
	mw_mutex_unlock(&fs->mu);
	return rc;
}

/* ---- a new region's first records ---------------------------------------- */

/* Write b to e durably (at once), then free it; 0 or the engine's error. */
static int write_now(struct engine *e, struct engine_batch *b, int rc)
{
	if (!rc)
		rc = engine_write(e, b, ENGINE_WAIT | ENGINE_URGENT, NULL);
	engine_batch_free(b);
	return rc;
}

int fs_region_format(struct mwfs *fs, struct engine *e, uint32_t rid, uint64_t parent, uint32_t uid,
                     uint32_t gid)
{
	uint64_t root = rid ? (uint64_t)rid << FS_REGION_SHIFT | 1 : SCHEMA_ROOT_INO;
	struct schema_super sb = {SCHEMA_VERSION, fs->cs, root + 1};
	struct schema_inode ri;
	uint8_t key[SCHEMA_KEY_MAX], val[SCHEMA_INODE_LEN];
	struct engine_batch *b = NULL;
	if (rid > RID_MAX)
		return -EINVAL;
	int rc = engine_batch_new(&b);
	if (rc)
		return rc;
	memset(&ri, 0, sizeof(ri));
	ri.mode = S_IFDIR | 0755;
	ri.nlink = 2;
	ri.uid = uid;
	ri.gid = gid;
	ri.parent = parent;
	fs_touch(&ri, true, true, true);
	size_t kn = schema_key_super(key);
	schema_super_encode(&sb, val);
	rc = engine_batch_put(b, key, kn, val, SCHEMA_SUPER_LEN);
	kn = schema_key_inode(key, root);
	size_t vn = schema_inode_encode(&ri, NULL, 0, val);
	if (!rc)
		rc = engine_batch_put(b, key, kn, val, vn);
	/* an orphan until its entry in the parent's region is durable (child first) */
	kn = schema_key_orphan(key, root);
	if (!rc && rid)
		rc = engine_batch_put(b, key, kn, "", 0);
	rc = write_now(e, b, rc);
	if (rc)
		log_err("region %u: formatting it: %s", rid, strerror(-rc));
	return rc;
}

int fs_region_unorphan(struct mwfs *fs, uint32_t rid)
{
	struct fs_region *r = fs_region_get(fs, rid);
	uint8_t key[SCHEMA_KEY_MAX];
	struct engine_batch *b = NULL;
	if (!r || !r->writer)
		return -EROFS;
	int rc = engine_batch_new(&b);
	if (rc)
		return rc;
	size_t kn = schema_key_orphan(key, (uint64_t)rid << FS_REGION_SHIFT | 1);
	rc = write_now(r->e, b, engine_batch_delete(b, key, kn));
	if (rc)
		log_err("region %u: clearing its root's orphan mark: %s (a stale mark: the root is "
		        "never reclaimed for it)",
		        rid, strerror(-rc));
	return rc;
}

/* ---- the rules ---------------------------------------------------------- */

static bool same(uint64_t a, uint64_t b)
{
	return fs_ino_rid(a) == fs_ino_rid(b);
}

int fs_region_rename(uint64_t parent, uint64_t newparent, uint64_t ino, uint64_t target)
{
	/* a region's root moved or replaced: its record is in one region, its entry in another */
	if (!same(parent, ino) || (target && !same(newparent, target)))
		return -EBUSY;
	if (!same(parent, newparent))
		return -EXDEV;
	return 0;
}

int fs_region_link(uint64_t ino, uint64_t newparent)
{
	return same(ino, newparent) ? 0 : -EXDEV;
}

int fs_region_unlink(uint64_t parent, uint64_t ino)
{
	return same(parent, ino) ? 0 : -EBUSY;
}
