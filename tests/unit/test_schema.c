/*
 * test_schema.c - fs/schema.c: key layout and sort order, prefix bounds,
 * and the encode/decode edge cases of superblock, inode record and
 * directory entry (truncated values, bad magic, newer version, corrupt
 * fields, extreme values).
 */
#include <errno.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "schema.h"

static int keycmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn)
{
	int c = memcmp(a, b, an < bn ? an : bn);
	return c ? c : (an > bn) - (an < bn);
}

static void test_key_layout(void **state)
{
	(void)state;
	uint8_t k[SCHEMA_KEY_MAX];
	assert_int_equal(schema_key_super(k), 1);
	assert_int_equal(k[0], 'S');
	assert_int_equal(schema_key_inode(k, 0x0102030405060708ull), 9);
	uint8_t want[9] = {'I', 1, 2, 3, 4, 5, 6, 7, 8};
	assert_memory_equal(k, want, 9);
	assert_int_equal(schema_key_dentry(k, 7, "name", 4), 13);
	assert_int_equal(k[0], 'D');
	assert_memory_equal(k + 9, "name", 4);
	assert_int_equal(schema_key_extent(k, 7, 0x1122334455667788ull), 17);
	assert_int_equal(k[0], 'E');
	assert_int_equal(schema_key_u64(k, 17, 1), 7);
	assert_int_equal(schema_key_u64(k, 17, 9), 0x1122334455667788ull);
	assert_int_equal(schema_key_u64(k, 16, 9), 0); /* short key */
	assert_int_equal(schema_key_xattr(k, 7, "user.a", 6), 15);
	assert_int_equal(k[0], 'X');
	assert_int_equal(schema_key_orphan(k, 9), 9);
	assert_int_equal(k[0], 'O');
	/* the longest key fits */
	char name[SCHEMA_NAME_MAX];
	memset(name, 0xff, sizeof(name));
	assert_int_equal(schema_key_dentry(k, UINT64_MAX, name, sizeof(name)), SCHEMA_KEY_MAX);
}

static void test_key_order(void **state)
{
	(void)state;
	uint8_t a[SCHEMA_KEY_MAX], b[SCHEMA_KEY_MAX];
	/* extent ends sort numerically (big-endian), across byte boundaries */
	uint64_t idx[] = {0, 1, 255, 256, 65535, 1ull << 32, UINT64_MAX};
	for (size_t i = 0; i + 1 < sizeof(idx) / sizeof(idx[0]); i++) {
		size_t an = schema_key_extent(a, 5, idx[i]);
		size_t bn = schema_key_extent(b, 5, idx[i + 1]);
		assert_true(keycmp(a, an, b, bn) < 0);
	}
	/* every entry of directory 5 sorts after its prefix and before directory 6's */
	uint8_t p[SCHEMA_KEY_MAX], e[SCHEMA_KEY_MAX];
	size_t pn = schema_key_dentry_prefix(p, 5);
	size_t en = schema_prefix_end(p, pn, e);
	assert_int_equal(en, 9);
	const char *names[] = {"", "a", "\xff\xff\xff", "zzzz"};
	for (size_t i = 0; i < 4; i++) {
		size_t an = schema_key_dentry(a, 5, names[i], strlen(names[i]));
		assert_true(keycmp(p, pn, a, an) <= 0);
		assert_true(keycmp(a, an, e, en) < 0);
	}
	size_t bn = schema_key_dentry(b, 6, "", 0);
	assert_int_equal(keycmp(b, bn, e, en), 0);
	/* an inode's extents all fall between its extent prefix and that prefix's end */
	pn = schema_key_extent_prefix(p, 5);
	en = schema_prefix_end(p, pn, e);
	size_t an = schema_key_extent(a, 5, UINT64_MAX);
	assert_true(keycmp(a, an, e, en) < 0);
	an = schema_key_extent(a, 6, 0);
	assert_true(keycmp(a, an, e, en) >= 0);
}

static void test_prefix_end(void **state)
{
	(void)state;
	uint8_t out[8];
	const uint8_t p1[] = {1, 2, 3};
	assert_int_equal(schema_prefix_end(p1, 3, out), 3);
	assert_int_equal(out[2], 4);
	const uint8_t p2[] = {1, 0xff, 0xff};
	assert_int_equal(schema_prefix_end(p2, 3, out), 1); /* carry: bound is {2} */
	assert_int_equal(out[0], 2);
	const uint8_t p3[] = {0xff, 0xff};
	assert_int_equal(schema_prefix_end(p3, 2, out), 0); /* no bound: scan to the end */
	/* the directory of the largest inode number: bound on the tag */
	uint8_t k[SCHEMA_KEY_MAX], e[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry_prefix(k, UINT64_MAX);
	assert_int_equal(schema_prefix_end(k, kn, e), 1);
	assert_int_equal(e[0], 'D' + 1);
}

static void test_super(void **state)
{
	(void)state;
	struct schema_super s = {SCHEMA_VERSION, 1u << 20, 12345}, d;
	uint8_t v[SCHEMA_SUPER_LEN + 4];
	schema_super_encode(&s, v);
	assert_int_equal(schema_super_decode(v, SCHEMA_SUPER_LEN, &d), 0);
	assert_int_equal(d.version, s.version);
	assert_int_equal(d.chunk_size, s.chunk_size);
	assert_int_equal(d.next_ino, s.next_ino);
	/* trailing bytes (a later minor addition) are ignored */
	assert_int_equal(schema_super_decode(v, sizeof(v), &d), 0);
	/* truncated */
	for (size_t n = 0; n < SCHEMA_SUPER_LEN; n++)
		assert_int_equal(schema_super_decode(v, n, &d), -EUCLEAN);
	/* bad magic */
	uint8_t bad[SCHEMA_SUPER_LEN];
	memcpy(bad, v, sizeof(bad));
	bad[0] ^= 0x20;
	assert_int_equal(schema_super_decode(bad, sizeof(bad), &d), -EUCLEAN);
	/* a newer version is reported distinctly, with the version filled */
	struct schema_super s2 = s;
	s2.version = SCHEMA_VERSION + 1;
	schema_super_encode(&s2, bad);
	assert_int_equal(schema_super_decode(bad, sizeof(bad), &d), -EPROTONOSUPPORT);
	assert_int_equal(d.version, SCHEMA_VERSION + 1);
	/* chunk sizes: power of two within bounds */
	uint32_t bad_cs[] = {
	    0, 1024, 4095, 4096 + 4096 / 2, 3u << 20, SCHEMA_CHUNK_MAX * 2, 0x80000000u};
	for (size_t i = 0; i < sizeof(bad_cs) / sizeof(bad_cs[0]); i++) {
		s2 = s;
		s2.chunk_size = bad_cs[i];
		schema_super_encode(&s2, bad);
		assert_int_equal(schema_super_decode(bad, sizeof(bad), &d), -EUCLEAN);
	}
	uint32_t good_cs[] = {SCHEMA_CHUNK_MIN, 65536, SCHEMA_CHUNK_MAX};
	for (size_t i = 0; i < 3; i++) {
		s2 = s;
		s2.chunk_size = good_cs[i];
		schema_super_encode(&s2, bad);
		assert_int_equal(schema_super_decode(bad, sizeof(bad), &d), 0);
	}
	/* next_ino must be past the root */
	s2 = s;
	s2.next_ino = SCHEMA_ROOT_INO;
	schema_super_encode(&s2, bad);
	assert_int_equal(schema_super_decode(bad, sizeof(bad), &d), -EUCLEAN);
}

static bool inode_equal(const struct schema_inode *a, const struct schema_inode *b)
{
	return a->mode == b->mode && a->uid == b->uid && a->gid == b->gid && a->nlink == b->nlink &&
	       a->size == b->size && a->rdev == b->rdev && a->parent == b->parent &&
	       a->atime_sec == b->atime_sec && a->atime_nsec == b->atime_nsec &&
	       a->mtime_sec == b->mtime_sec && a->mtime_nsec == b->mtime_nsec &&
	       a->ctime_sec == b->ctime_sec && a->ctime_nsec == b->ctime_nsec &&
	       a->stored == b->stored;
}

static void test_inode(void **state)
{
	(void)state;
	struct schema_inode in = {
	    .mode = S_IFREG | 04755,
	    .uid = UINT32_MAX,
	    .gid = 0,
	    .nlink = 65000,
	    .size = UINT64_MAX,
	    .rdev = 0,
	    .parent = 0,
	    .atime_sec = -1,
	    .atime_nsec = 999999999, /* before 1970 */
	    .mtime_sec = INT64_MAX,
	    .mtime_nsec = 0,
	    .ctime_sec = INT64_MIN,
	    .ctime_nsec = 1,
	    .stored = 0x0102030405060708ull,
	};
	uint8_t rec[SCHEMA_INODE_LEN + 4096];
	size_t n = schema_inode_encode(&in, NULL, 0, rec);
	assert_int_equal(n, SCHEMA_INODE_LEN);
	struct schema_inode out;
	const uint8_t *t = (const uint8_t *)"x";
	size_t tl = 99;
	assert_int_equal(schema_inode_decode(rec, n, &out, &t, &tl), 0);
	assert_true(inode_equal(&in, &out));
	assert_int_equal(tl, 0);
	/* target and tlen may be NULL */
	assert_int_equal(schema_inode_decode(rec, n, &out, NULL, NULL), 0);
	/* truncated records */
	for (size_t k = 0; k < SCHEMA_INODE_LEN; k++)
		assert_int_equal(schema_inode_decode(rec, k, &out, NULL, NULL), -EUCLEAN);
	/* an unknown record version, and format 1's */
	rec[0] = 3;
	assert_int_equal(schema_inode_decode(rec, n, &out, NULL, NULL), -EUCLEAN);
	rec[0] = 1;
	assert_int_equal(schema_inode_decode(rec, n, &out, NULL, NULL), -EUCLEAN);
	rec[0] = 2;
	/* nanoseconds out of range in each timestamp */
	for (int which = 0; which < 3; which++) {
		struct schema_inode b = in;
		uint32_t *ns[] = {&b.atime_nsec, &b.mtime_nsec, &b.ctime_nsec};
		*ns[which] = 1000000000u;
		n = schema_inode_encode(&b, NULL, 0, rec);
		assert_int_equal(schema_inode_decode(rec, n, &out, NULL, NULL), -EUCLEAN);
	}
	/* a symlink with a 4095-byte inline target (PATH_MAX - 1) */
	char target[4095];
	for (size_t i = 0; i < sizeof(target); i++)
		target[i] = (char)('a' + i % 26);
	struct schema_inode l = {.mode = S_IFLNK | 0777, .nlink = 1, .size = sizeof(target)};
	n = schema_inode_encode(&l, target, sizeof(target), rec);
	assert_int_equal(n, SCHEMA_INODE_LEN + sizeof(target));
	assert_int_equal(schema_inode_decode(rec, n, &out, &t, &tl), 0);
	assert_int_equal(tl, sizeof(target));
	assert_memory_equal(t, target, sizeof(target));
	assert_int_equal(out.mode, S_IFLNK | 0777);
}

static void test_dentry(void **state)
{
	(void)state;
	uint32_t types[] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK};
	uint8_t v[SCHEMA_DENTRY_LEN];
	uint64_t ino;
	uint32_t t;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		schema_dentry_encode(UINT64_MAX - i, types[i] | 0644, v);
		assert_int_equal(schema_dentry_decode(v, sizeof(v), &ino, &t), 0);
		assert_int_equal(ino, UINT64_MAX - i);
		assert_int_equal(t, types[i]); /* permission bits are not stored */
	}
	/* short values */
	for (size_t n = 0; n < SCHEMA_DENTRY_LEN; n++)
		assert_int_equal(schema_dentry_decode(v, n, &ino, &t), -EUCLEAN);
	/* inode 0 is never a child */
	schema_dentry_encode(0, S_IFREG, v);
	assert_int_equal(schema_dentry_decode(v, sizeof(v), &ino, &t), -EUCLEAN);
	/* a type byte that is no file type */
	schema_dentry_encode(5, S_IFREG, v);
	uint8_t bad_types[] = {0, 3, 5, 7, 9, 11, 13, 15, 0xff};
	for (size_t i = 0; i < sizeof(bad_types); i++) {
		v[8] = bad_types[i];
		assert_int_equal(schema_dentry_decode(v, sizeof(v), &ino, &t), -EUCLEAN);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_layout), cmocka_unit_test(test_key_order),
	    cmocka_unit_test(test_prefix_end), cmocka_unit_test(test_super),
	    cmocka_unit_test(test_inode),      cmocka_unit_test(test_dentry),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
