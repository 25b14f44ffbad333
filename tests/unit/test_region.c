/*
 * test_region.c - fs/region.c and the routing of internal.h: the rules between regions
 * (rename, link, unlink/rmdir of a region's root) with inode numbers of several regions,
 * the region of a key, the table's lookups, a batch bound to one region, and the
 * allocation of inode numbers in the parent's region.  No engine: the table's entries
 * carry none (nothing here reaches one).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "internal.h"

#define R(rid, n) (((uint64_t)(rid) << FS_REGION_SHIFT) | (n))

static void ino_and_key_regions(void **state)
{
	(void)state;
	uint8_t k[SCHEMA_KEY_MAX];
	assert_int_equal(fs_ino_rid(SCHEMA_ROOT_INO), 0);
	assert_int_equal(fs_ino_rid((1ull << 40) - 1), 0);
	assert_int_equal(fs_ino_rid(R(1, 0)), 1);
	assert_int_equal(fs_ino_rid(R(7, 12345)), 7);
	assert_int_equal(fs_key_rid(k, schema_key_inode(k, R(3, 9))), 3);
	assert_int_equal(fs_key_rid(k, schema_key_orphan(k, R(2, 9))), 2);
	assert_int_equal(fs_key_rid(k, schema_key_extent(k, R(5, 1), 4096)), 5);
	assert_int_equal(fs_key_rid(k, schema_key_alloc(k, R(5, 1), 4096)), 5);
	assert_int_equal(fs_key_rid(k, schema_key_xattr(k, R(4, 2), "user.a", 6)), 4);
	/* an entry lives in its parent's region, whatever the child */
	assert_int_equal(fs_key_rid(k, schema_key_dentry(k, R(6, 2), "x", 1)), 6);
	assert_int_equal(fs_key_rid(k, schema_key_super(k)), -1);
	assert_int_equal(fs_key_rid(k, 5), -1);
}

static void rename_rules(void **state)
{
	(void)state;
	/* one region: never refused */
	assert_int_equal(fs_region_rename(1, 1, 5, 0), 0);
	assert_int_equal(fs_region_rename(1, 9, 5, 6), 0);
	assert_int_equal(fs_region_rename(R(2, 1), R(2, 8), R(2, 5), R(2, 6)), 0);
	/* the two parents in two regions */
	assert_int_equal(fs_region_rename(1, R(1, 1), 5, 0), -EXDEV);
	assert_int_equal(fs_region_rename(R(1, 1), 1, R(1, 5), 0), -EXDEV);
	assert_int_equal(fs_region_rename(R(1, 1), R(2, 1), R(1, 5), R(2, 6)), -EXDEV);
	/* a region's root moved (even within its parent) or replaced */
	assert_int_equal(fs_region_rename(1, 1, R(1, 1), 0), -EBUSY);
	assert_int_equal(fs_region_rename(1, 1, 5, R(1, 1)), -EBUSY);
	assert_int_equal(fs_region_rename(R(1, 3), R(1, 3), R(2, 1), 0), -EBUSY);
	/* a root moved to another region: the root is what refuses */
	assert_int_equal(fs_region_rename(1, R(1, 1), R(1, 1), 0), -EBUSY);
}

static void link_unlink_rules(void **state)
{
	(void)state;
	assert_int_equal(fs_region_link(5, 1), 0);
	assert_int_equal(fs_region_link(R(3, 5), R(3, 1)), 0);
	assert_int_equal(fs_region_link(5, R(3, 1)), -EXDEV);
	assert_int_equal(fs_region_link(R(3, 5), 1), -EXDEV);
	assert_int_equal(fs_region_unlink(1, 5), 0);
	assert_int_equal(fs_region_unlink(R(2, 4), R(2, 5)), 0);
	/* the entry of a region's root: its inode is in the child region */
	assert_int_equal(fs_region_unlink(1, R(2, 1)), -EBUSY);
	assert_int_equal(fs_region_unlink(R(2, 4), R(3, 1)), -EBUSY);
}

/* A mount's handle with a table of regions and no engines: enough for what is tested. */
static struct mwfs *fake_fs(void)
{
	struct mwfs *fs = calloc(1, sizeof(*fs));
	assert_non_null(fs);
	mw_mutex_init(&fs->mu);
	assert_int_equal(pthread_key_create(&fs->tkey, fs_tls_free), 0);
	fs->cs = 1u << 20;
	/* region 0 written, region 3 followed, region 5 written near the end of its range */
	fs->reg[0] = (struct fs_region){.rid = 0, .writer = true, .next_ino = 2, .ino_limit = 2};
	fs->reg[1] = (struct fs_region){.rid = 3, .next_ino = R(3, 2), .ino_limit = R(3, 1024)};
	fs->reg[2] = (struct fs_region){
	    .rid = 5, .writer = true, .next_ino = R(6, 0) - 1, .ino_limit = R(6, 0) - 1};
	atomic_store(&fs->nreg, 3);
	return fs;
}

static void free_fs(struct mwfs *fs)
{
	inode_table_free(fs);
	fs_tls_free(pthread_getspecific(fs->tkey));
	pthread_setspecific(fs->tkey, NULL);
	pthread_key_delete(fs->tkey);
	mw_mutex_destroy(&fs->mu);
	free(fs);
}

static void table_and_batches(void **state)
{
	(void)state;
	struct mwfs *fs = fake_fs();
	struct engine_batch *b = NULL;
	uint8_t k[SCHEMA_KEY_MAX];
	assert_ptr_equal(fs_region_of(fs, 1), &fs->reg[0]);
	assert_ptr_equal(fs_region_of(fs, R(3, 77)), &fs->reg[1]);
	assert_ptr_equal(fs_region_get(fs, 5), &fs->reg[2]);
	assert_null(fs_region_of(fs, R(4, 1))); /* a region the mount does not know */
	assert_true(fs_region_writes(fs, 7));
	assert_false(fs_region_writes(fs, R(3, 7)));
	assert_false(fs_region_writes(fs, R(4, 7)));
	/* a followed or unknown region is not writable (no engine asked) */
	assert_int_equal(fs_writable(fs, R(3, 7)), -EROFS);
	assert_int_equal(fs_writable(fs, R(4, 7)), -EROFS);

	assert_int_equal(fs_batch(fs, R(4, 1), &b), -ENOENT);
	assert_int_equal(fs_batch(fs, R(3, 9), &b), 0);
	bool xdev = true;
	assert_ptr_equal(fs_batch_region(fs, b, &xdev), &fs->reg[1]);
	assert_false(xdev);
	assert_int_equal(fs_batch_put(fs, b, k, schema_key_inode(k, R(3, 9)), "v", 1), 0);
	assert_int_equal(fs_batch_del(fs, b, k, schema_key_dentry(k, R(3, 2), "n", 1)), 0);
	assert_int_equal(fs_batch_put(fs, b, k, schema_key_super(k), "s", 1), 0);
	assert_int_equal(engine_batch_count(b), 3);
	/* a new fs_batch() binds the batch anew, emptied */
	assert_int_equal(fs_batch(fs, 1, &b), 0);
	assert_ptr_equal(fs_batch_region(fs, b, NULL), &fs->reg[0]);
	assert_int_equal(engine_batch_count(b), 0);
	free_fs(fs);
}

static void allocation_in_parent_region(void **state)
{
	(void)state;
	struct mwfs *fs = fake_fs();
	struct engine_batch *b = NULL;
	struct inode *ip = NULL, *jp = NULL;
	mw_mutex_lock(&fs->mu);
	/* region 0: a new range starts, its superblock goes into the batch */
	assert_int_equal(fs_batch(fs, 1, &b), 0);
	assert_int_equal(inode_new(fs, b, SCHEMA_ROOT_INO, S_IFREG | 0644, &ip), 0);
	assert_int_equal(ip->ino, 2);
	assert_int_equal(fs->reg[0].ino_limit, 2 + MWFS_INO_RANGE);
	assert_int_equal(engine_batch_count(b), 1);
	/* region 3 (a directory of it is the parent): within its range, no superblock */
	assert_int_equal(fs_batch(fs, R(3, 1), &b), 0);
	assert_int_equal(inode_new(fs, b, R(3, 1), S_IFDIR | 0755, &jp), 0);
	assert_int_equal(jp->ino, R(3, 2));
	assert_int_equal(jp->a.nlink, 2);
	assert_int_equal(engine_batch_count(b), 0);
	assert_int_equal(fs->reg[1].next_ino, R(3, 3));
	ip->gone = jp->gone = true;
	inode_put(fs, ip);
	inode_put(fs, jp);
	/* region 5: the last number of its range, then none; the bound never passes it */
	assert_int_equal(fs_batch(fs, R(5, 1), &b), 0);
	assert_int_equal(inode_new(fs, b, R(5, 1), S_IFREG | 0644, &ip), 0);
	assert_int_equal(ip->ino, R(6, 0) - 1);
	assert_int_equal(fs->reg[2].ino_limit, R(6, 0));
	ip->gone = true;
	inode_put(fs, ip);
	assert_int_equal(inode_new(fs, b, R(5, 1), S_IFREG | 0644, &ip), -ENOSPC);
	/* a region the mount does not know */
	assert_int_equal(inode_new(fs, b, R(4, 1), S_IFREG | 0644, &ip), -ENOENT);
	mw_mutex_unlock(&fs->mu);
	free_fs(fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(ino_and_key_regions),         cmocka_unit_test(rename_rules),
	    cmocka_unit_test(link_unlink_rules),           cmocka_unit_test(table_and_batches),
	    cmocka_unit_test(allocation_in_parent_region),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
