/*
 * test_fsck.c - the filesystem-level check (fs/fsck.c).
 *
 * Each case writes a small tree by hand in the schema of fs/schema.h
 * (superblock, root, a directory, a file with two names and a chunk, a
 * symlink, an xattr) into an engine on a local store, checks that it is
 * clean, then breaks one invariant and expects -EUCLEAN with a problem
 * naming the broken record.  The last case goes through the store
 * (mwfs_fsck_store: a read-only engine beside the writer).
 *
 * The test_salvage_* cases break the tree the same ways (several at once)
 * and expect mwfs_salvage() (fs/salvage.c) to say what it dropped and to
 * leave a tree the check finds clean: names of gone inodes dropped, wrong
 * types and counts fixed, a gone superblock, root and directory made again
 * (the directory keeping its name and its entries), unnamed inodes and data
 * of gone inodes linked into /lost+found, xattrs of gone inodes dropped.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "fsck.h"
#include "schema.h"
#include "store.h"

#define CHUNK 4096

struct fixture {
	char dir[64];
	struct store *st;
	struct engine *e;
	char problems[4096]; /* "what: msg\n"... */
};

static void collect(void *arg, const char *what, const char *msg)
{
	struct fixture *fx = arg;
	size_t n = strlen(fx->problems);
	snprintf(fx->problems + n, sizeof(fx->problems) - n, "%s: %s\n", what, msg);
	fprintf(stderr, "  problem: %s: %s\n", what, msg);
}

static void put(struct fixture *fx, const uint8_t *k, size_t kn, const void *v, size_t vn)
{
	assert_int_equal(engine_put(fx->e, k, kn, v, vn, 0, NULL), 0);
}

/* Files store 8 bytes in extents here (the fixture's "data" and "more"). */
static void put_inode(struct fixture *fx, uint64_t ino, uint32_t mode, uint32_t nlink,
                      uint64_t size, uint64_t parent, const char *target)
{
	uint8_t k[SCHEMA_KEY_MAX], v[SCHEMA_INODE_LEN + 64];
	struct schema_inode in = {.mode = mode, .nlink = nlink, .size = size, .parent = parent};
	if (S_ISREG(mode) && size)
		in.stored = 8;
	size_t tl = target ? strlen(target) : 0;
	size_t vn = schema_inode_encode(&in, target, tl, v);
	put(fx, k, schema_key_inode(k, ino), v, vn);
}

static void put_dentry(struct fixture *fx, uint64_t parent, const char *name, uint64_t ino,
                       uint32_t mode)
{
	uint8_t k[SCHEMA_KEY_MAX], v[SCHEMA_DENTRY_LEN];
	schema_dentry_encode(ino, mode, v);
	put(fx, k, schema_key_dentry(k, parent, name, strlen(name)), v, sizeof(v));
}

static void del(struct fixture *fx, const uint8_t *k, size_t kn)
{
	assert_int_equal(engine_delete(fx->e, k, kn, 0, NULL), 0);
}

/*
 * The tree: 1 (root, nlink 3) -> "d" = 2 (dir, nlink 2), "f" = 3 (file,
 * nlink 2, 5000 bytes: extents [0,4) and [4096,4100)), "l" = 4 (symlink "f");
 * 2 -> "g" = 3 (the file's second name); xattr user.a on 3.
 */
static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));
	struct engine_opts o;
	uint8_t k[SCHEMA_KEY_MAX], sb[SCHEMA_SUPER_LEN];
	struct schema_super s = {SCHEMA_VERSION, CHUNK, 10};

	assert_non_null(fx);
	strcpy(fx->dir, "/tmp/test_fsck.XXXXXX");
	assert_non_null(mkdtemp(fx->dir));
	assert_int_equal(store_open_local(fx->dir, &fx->st), 0);
	engine_opts_default(&o);
	o.cadence_ms = 5;
	assert_int_equal(engine_open(fx->st, &o, &fx->e), 0);
	schema_super_encode(&s, sb);
	put(fx, k, schema_key_super(k), sb, sizeof(sb));
	put_inode(fx, 1, S_IFDIR | 0755, 3, 0, 1, NULL);
	put_inode(fx, 2, S_IFDIR | 0755, 2, 0, 1, NULL);
	put_inode(fx, 3, S_IFREG | 0644, 2, 5000, 0, NULL);
	put_inode(fx, 4, S_IFLNK | 0777, 1, 1, 0, "f");
	put_dentry(fx, 1, "d", 2, S_IFDIR);
	put_dentry(fx, 1, "f", 3, S_IFREG);
	put_dentry(fx, 1, "l", 4, S_IFLNK);
	put_dentry(fx, 2, "g", 3, S_IFREG);
	put(fx, k, schema_key_extent(k, 3, 4), "data", 4);
	put(fx, k, schema_key_extent(k, 3, 4100), "more", 4);
	put(fx, k, schema_key_xattr(k, 3, "user.a", 6), "1", 1);
	*state = fx;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char cmd[128];
	assert_int_equal(engine_close(fx->e), 0);
	store_close(fx->st);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fx->dir);
	assert_int_equal(system(cmd), 0);
	free(fx);
	return 0;
}

static void expect(struct fixture *fx, const char *what)
{
	struct mwfs_fsck_report r;
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_fsck(fx->e, collect, fx, &r), -EUCLEAN);
	assert_true(r.problems >= 1);
	if (!strstr(fx->problems, what))
		fail_msg("no problem names '%s'; got:\n%s", what, fx->problems);
}

static void test_clean(void **state)
{
	struct fixture *fx = *state;
	struct mwfs_fsck_report r;
	assert_int_equal(mwfs_fsck(fx->e, collect, fx, &r), 0);
	assert_int_equal(r.problems, 0);
	assert_int_equal(r.inodes, 4);
	assert_int_equal(r.dentries, 4);
	assert_int_equal(r.extents, 2);
	assert_int_equal(r.xattrs, 1);
	assert_int_equal(r.orphans, 0);
	assert_int_equal(mwfs_fsck(fx->e, NULL, NULL, NULL), 0);
}

static void test_missing_superblock(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	del(fx, k, schema_key_super(k));
	expect(fx, "superblock");
}

static void test_dentry_to_missing_inode(void **state)
{
	struct fixture *fx = *state;
	put_dentry(fx, 2, "ghost", 7, S_IFREG);
	expect(fx, "dentry 2/'ghost'");
}

static void test_dentry_wrong_type(void **state)
{
	struct fixture *fx = *state;
	put_dentry(fx, 1, "l", 4, S_IFREG); /* the symlink, said to be a file */
	expect(fx, "dentry 1/'l'");
}

static void test_file_nlink(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	del(fx, k, schema_key_dentry(k, 2, "g", 1)); /* nlink 2, one name left */
	expect(fx, "inode 3");
}

static void test_dir_nlink(void **state)
{
	struct fixture *fx = *state;
	put_inode(fx, 1, S_IFDIR | 0755, 2, 0, 1, NULL); /* has one subdirectory */
	expect(fx, "inode 1");
}

static void test_unreachable(void **state)
{
	struct fixture *fx = *state;
	put_inode(fx, 5, S_IFREG | 0644, 1, 0, 0, NULL);
	expect(fx, "inode 5");
}

static void test_orphan_ok(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	struct mwfs_fsck_report r;
	put_inode(fx, 5, S_IFREG | 0644, 0, 0, 0, NULL);
	put(fx, k, schema_key_orphan(k, 5), "", 0);
	assert_int_equal(mwfs_fsck(fx->e, collect, fx, &r), 0);
	assert_int_equal(r.orphans, 1);
	put(fx, k, schema_key_orphan(k, 6), "", 0);
	expect(fx, "orphan 6");
}

static void test_extent_beyond_size(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	put(fx, k, schema_key_extent(k, 3, 6000), "leak", 4);
	expect(fx, "extent 3/[5996,6000)");
}

static void test_extent_of_missing_inode(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	put(fx, k, schema_key_extent(k, 8, 4), "leak", 4);
	expect(fx, "extent 8/[0,4)");
}

static void test_extent_overlap_and_stored(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	put(fx, k, schema_key_extent(k, 3, 6), "over", 4); /* [2,6) over [0,4) */
	expect(fx, "extent 3/[2,6)");
	assert_non_null(strstr(fx->problems, "allocated ranges hold 12"));
}

/* An allocated range ('A', fallocate) counts in the stored bytes; a bad one is reported. */
static void put_alloc(struct fixture *fx, uint64_t ino, uint64_t start, uint64_t end)
{
	uint8_t k[SCHEMA_KEY_MAX], v[SCHEMA_ALLOC_LEN];
	for (int i = 0; i < 8; i++)
		v[i] = (uint8_t)(start >> (56 - 8 * i));
	put(fx, k, schema_key_alloc(k, ino, end), v, sizeof(v));
}

static void test_alloc_ranges(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	struct mwfs_fsck_report r;

	put_alloc(fx, 3, 4100, 8192); /* 4092 bytes: the inode records 8 */
	expect(fx, "inode 3");
	assert_non_null(strstr(fx->problems, "allocated ranges hold 4100"));
	uint8_t v[SCHEMA_INODE_LEN];
	struct schema_inode in = {.mode = S_IFREG | 0644, .nlink = 2, .size = 5000, .stored = 4100};
	put(fx, k, schema_key_inode(k, 3), v, schema_inode_encode(&in, NULL, 0, v));
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_fsck(fx->e, collect, fx, &r), 0); /* past the size too (KEEP_SIZE) */
	put_alloc(fx, 8, 0, 4096);
	expect(fx, "allocated range 8/[0,4096)");
	put(fx, k, schema_key_alloc(k, 3, 9000), "bad", 3);
	expect(fx, "malformed");
}

static void test_xattr_of_missing_inode(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	put(fx, k, schema_key_xattr(k, 9, "user.b", 6), "1", 1);
	expect(fx, "xattr 9/'user.b'");
}

static void test_symlink_without_target(void **state)
{
	struct fixture *fx = *state;
	put_inode(fx, 4, S_IFLNK | 0777, 1, 1, 0, NULL);
	expect(fx, "inode 4");
}

static void test_dir_parent_field(void **state)
{
	struct fixture *fx = *state;
	put_inode(fx, 2, S_IFDIR | 0755, 2, 0, 3, NULL);
	expect(fx, "dentry 1/'d'");
}

static void test_through_store(void **state)
{
	struct fixture *fx = *state;
	struct mwfs_fsck_report r;
	assert_int_equal(engine_sync(fx->e), 0);
	/* A read-only engine beside the writer sees the durable tree. */
	assert_int_equal(mwfs_fsck_store(fx->st, collect, fx, &r), 0);
	assert_int_equal(r.inodes, 4);
	put_dentry(fx, 2, "ghost", 7, S_IFREG);
	assert_int_equal(engine_sync(fx->e), 0);
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_fsck_store(fx->st, collect, fx, &r), -EUCLEAN);
	assert_non_null(strstr(fx->problems, "dentry 2/'ghost'"));
}

/*
 * mwfs_fsck_regions(): region 1 on the view r/1/ of the same store, its root 1<<40|1 named
 * "r" in the root of region 0, a file in it.  Clean; without the entry, its root is named
 * by nothing (a problem, orphan mark or not).
 */
static void test_regions(void **state)
{
	struct fixture *fx = *state;
	struct store *view = NULL;
	struct engine *e1 = NULL, *e0 = fx->e;
	struct engine_opts o;
	uint8_t k[SCHEMA_KEY_MAX], sb[SCHEMA_SUPER_LEN];
	uint64_t root1 = (1ull << 40) | 1;
	struct schema_super s = {SCHEMA_VERSION, CHUNK, root1 + 2};
	struct mwfs_fsck_report r;

	assert_int_equal(store_open_sub(fx->st, "r/1/", &view), 0);
	engine_opts_default(&o);
	o.cadence_ms = 5;
	assert_int_equal(engine_open(view, &o, &e1), 0);
	fx->e = e1; /* put() and put_inode() write region 1 */
	schema_super_encode(&s, sb);
	put(fx, k, schema_key_super(k), sb, sizeof(sb));
	put_inode(fx, root1, S_IFDIR | 0755, 2, 0, 1, NULL);
	put_inode(fx, root1 + 1, S_IFREG | 0644, 1, 0, 0, NULL);
	put_dentry(fx, root1, "x", root1 + 1, S_IFREG);
	put(fx, k, schema_key_orphan(k, root1), "", 0); /* a stale mark: harmless */
	fx->e = e0;
	put_dentry(fx, 1, "r", root1, S_IFDIR);
	put_inode(fx, 1, S_IFDIR | 0755, 4, 0, 1, NULL);
	struct engine *es[2] = {e0, e1};
	uint32_t rids[2] = {0, 1};
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_fsck_regions(es, rids, 2, collect, fx, &r), 0);
	assert_int_equal(r.inodes, 6);
	/* region 0 alone: the entry names an inode it does not have */
	assert_int_equal(mwfs_fsck(e0, collect, fx, &r), -EUCLEAN);
	assert_non_null(strstr(fx->problems, "points to missing inode"));
	/* the entry gone: the root of region 1 is named by nothing */
	del(fx, k, schema_key_dentry(k, 1, "r", 1));
	put_inode(fx, 1, S_IFDIR | 0755, 3, 0, 1, NULL);
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_fsck_regions(es, rids, 2, collect, fx, &r), -EUCLEAN);
	assert_non_null(strstr(fx->problems, "is named by no directory entry"));
	assert_int_equal(engine_close(e1), 0);
	store_close(view);
}

/* ---- mwfs_salvage() (fs/salvage.c): each break above repaired ---- */

/* Salvage, expect a loss line naming what (NULL: no line needed), then a clean check. */
static struct mwfs_salvage_report salvage(struct fixture *fx, const char *what)
{
	struct mwfs_salvage_report sr;
	struct mwfs_fsck_report r;
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_salvage(fx->e, collect, fx, &sr), 0);
	if (what && !strstr(fx->problems, what))
		fail_msg("no salvage line names '%s'; got:\n%s", what, fx->problems);
	fx->problems[0] = '\0';
	assert_int_equal(mwfs_fsck(fx->e, collect, fx, &r), 0);
	assert_int_equal(r.problems, 0);
	return sr;
}

/* The value of key k, or -ENOENT. */
static int get(struct fixture *fx, const uint8_t *k, size_t kn)
{
	void *v = NULL;
	size_t vn = 0;
	int rc = engine_get(fx->e, k, kn, &v, &vn);
	free(v);
	return rc;
}

static void test_salvage_clean(void **state)
{
	struct fixture *fx = *state;
	struct mwfs_salvage_report sr = salvage(fx, NULL);
	assert_int_equal(sr.files, 1);
	assert_int_equal(sr.extents, 2);
	assert_int_equal(sr.names_lost + sr.inodes_made + sr.relinked + sr.records_fixed, 0);
	assert_false(sr.superblock_written);
	assert_string_equal(fx->problems, "");
}

static void test_salvage_superblock(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	del(fx, k, schema_key_super(k));
	assert_true(salvage(fx, "superblock").superblock_written);
}

static void test_salvage_names(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	put_dentry(fx, 2, "ghost", 7, S_IFREG); /* names a gone inode */
	put_dentry(fx, 1, "l", 4, S_IFREG);     /* the wrong type */
	del(fx, k, schema_key_dentry(k, 2, "g", 1));
	struct mwfs_salvage_report sr = salvage(fx, "name 'ghost' in directory 2");
	assert_int_equal(sr.names_lost, 1);
	assert_int_equal(get(fx, k, schema_key_dentry(k, 2, "ghost", 5)), -ENOENT);
	assert_true(sr.records_fixed >= 1); /* the file's nlink 2 -> 1 */
}

static void test_salvage_lost_found(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	put_inode(fx, 5, S_IFREG | 0644, 1, 0, 0, NULL);   /* no name */
	put(fx, k, schema_key_extent(k, 8, 4), "lost", 4); /* data of a gone inode */
	put(fx, k, schema_key_xattr(k, 9, "user.b", 6), "1", 1);
	struct mwfs_salvage_report sr = salvage(fx, "inode 5");
	assert_int_equal(sr.relinked, 2);
	assert_int_equal(sr.inodes_made, 1);
	uint64_t lf;
	uint32_t dtype;
	void *v = NULL;
	size_t vn = 0;
	assert_int_equal(engine_get(fx->e, k, schema_key_dentry(k, 1, "lost+found", 10), &v, &vn),
	                 0);
	assert_int_equal(schema_dentry_decode(v, vn, &lf, &dtype), 0);
	free(v);
	assert_int_equal(get(fx, k, schema_key_dentry(k, lf, "#5", 2)), 0);
	assert_int_equal(get(fx, k, schema_key_dentry(k, lf, "#8", 2)), 0);
	assert_int_equal(get(fx, k, schema_key_xattr(k, 9, "user.b", 6)), -ENOENT);
	/* the superblock's next_ino went past lost+found's new inode */
	struct schema_super sb;
	assert_int_equal(engine_get(fx->e, k, schema_key_super(k), &v, &vn), 0);
	assert_int_equal(schema_super_decode(v, vn, &sb), 0);
	free(v);
	assert_true(sb.next_ino > lf);
}

static void test_salvage_gone_dir_and_root(void **state)
{
	struct fixture *fx = *state;
	uint8_t k[SCHEMA_KEY_MAX];
	del(fx, k, schema_key_inode(k, 2));                   /* "d", with "g" inside */
	del(fx, k, schema_key_inode(k, 1));                   /* the root */
	put(fx, k, schema_key_extent(k, 3, 6000), "tail", 4); /* past the size */
	struct mwfs_salvage_report sr = salvage(fx, "root directory");
	assert_int_equal(sr.inodes_made, 2);
	assert_int_equal(sr.names_lost, 0);
	assert_int_equal(sr.relinked, 0); /* "d" kept its name, "g" inside it */
	assert_int_equal(get(fx, k, schema_key_dentry(k, 2, "g", 1)), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
	    T(test_clean),
	    T(test_missing_superblock),
	    T(test_dentry_to_missing_inode),
	    T(test_dentry_wrong_type),
	    T(test_file_nlink),
	    T(test_dir_nlink),
	    T(test_unreachable),
	    T(test_orphan_ok),
	    T(test_extent_beyond_size),
	    T(test_extent_of_missing_inode),
	    T(test_extent_overlap_and_stored),
	    T(test_alloc_ranges),
	    T(test_xattr_of_missing_inode),
	    T(test_symlink_without_target),
	    T(test_dir_parent_field),
	    T(test_salvage_clean),
	    T(test_salvage_superblock),
	    T(test_salvage_names),
	    T(test_salvage_lost_found),
	    T(test_salvage_gone_dir_and_root),
	    T(test_through_store),
	    T(test_regions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
