/*
 * test_store_local.c - edge cases of the local-directory store (s3/local.c)
 * and of key validation (store_key_valid): the on-disk layout, temp files
 * (never listed, removed at open when their process is gone, removed by age
 * by cleanup_uploads), symlinks planted in the root never followed, keys that
 * are both an object and a prefix, capabilities and counters, the open flags
 * (EXISTING: never creates; READ_ONLY: writes nothing, every write -EROFS),
 * a private store (issue 36: 0700 directories, 0600 objects) and the errors
 * that stay (store_err_permanent: a link where the store keeps a directory,
 * a permission).  The general store contract is in store_conformance.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fault.h"
#include "testutil.h"

/* Write a plain file at dir/rel with content s. */
static void write_file(const char *dir, const char *rel, const char *s)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(s, f);
	fclose(f);
}

static bool file_exists(const char *dir, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return lstat(path, &st) == 0;
}

static void read_file(const char *dir, const char *rel, char *buf, size_t cap)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* Number of entries in dir/rel whose name starts with a backslash. */
static int count_tmp(const char *dir, const char *rel)
{
	char cmd[PATH_MAX + 64], line[64];
	snprintf(cmd, sizeof(cmd), "ls -A '%s/%s' | grep -c '^\\\\' || true", dir, rel);
	FILE *p = popen(cmd, "r");
	assert_non_null(p);
	assert_non_null(fgets(line, sizeof(line), p));
	pclose(p);
	return atoi(line);
}

static void test_key_valid(void **state)
{
	(void)state;
	char k[STORE_KEY_MAX + 2];

	assert_true(store_key_valid("a"));
	assert_true(store_key_valid("wal/0000000000000042"));
	assert_true(store_key_valid("a.b/...c/..d/e..f/.x"));
	assert_true(store_key_valid("...")); /* only "." and ".." are special */
	assert_true(store_key_valid("a-b_c~d+e=f,g;h@i!j'k(l)m*n%o"));
	assert_false(store_key_valid(NULL));
	assert_false(store_key_valid(""));
	assert_false(store_key_valid("/a"));
	assert_false(store_key_valid("a/"));
	assert_false(store_key_valid("a//b"));
	assert_false(store_key_valid("/"));
	assert_false(store_key_valid("."));
	assert_false(store_key_valid(".."));
	assert_false(store_key_valid("../a"));
	assert_false(store_key_valid("a/../b"));
	assert_false(store_key_valid("a/.."));
	assert_false(store_key_valid("./a"));
	assert_false(store_key_valid("a/./b"));
	assert_false(store_key_valid("a\\b")); /* backslash: reserved for temp files */
	assert_false(store_key_valid("\\tmp.1.2"));
	assert_false(store_key_valid("a\nb"));
	assert_false(store_key_valid("a\tb"));
	assert_false(store_key_valid("a\x7f"));
	assert_false(store_key_valid("caf\xc3\xa9")); /* non-ASCII */
	memset(k, 'x', STORE_KEY_MAX);
	k[STORE_KEY_MAX] = '\0';
	assert_true(store_key_valid(k));
	k[STORE_KEY_MAX] = 'x';
	k[STORE_KEY_MAX + 1] = '\0';
	assert_false(store_key_valid(k));
	k[1] = '/'; /* still too long with segments */
	assert_false(store_key_valid(k));
}

/* A key of exactly STORE_KEY_MAX bytes is stored, read and listed (it was not listed). */
static void test_key_max_listed(void **state)
{
	(void)state;
	struct tu_store *t;
	char k[STORE_KEY_MAX + 1];
	struct tu_keys l = {0};

	/* segments of 200 bytes: the filesystem's names stay under NAME_MAX */
	for (size_t i = 0; i < STORE_KEY_MAX; i++)
		k[i] = i % 201 == 200 ? '/' : 'k';
	k[STORE_KEY_MAX] = '\0';
	assert_true(store_key_valid(k));
	assert_int_equal(tu_store_open("local", &t), 0);
	assert_int_equal(store_put(t->store, k, "m", 1), 0);
	assert_int_equal(store_list(t->store, "", NULL, 0, tu_keys_add, &l), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.keys[0], k);
	tu_keys_free(&l);
	assert_int_equal(store_list(t->store, k, NULL, 0, tu_keys_add, &l), 0);
	assert_int_equal(l.n, 1);
	tu_keys_free(&l);
	tu_store_close(t);
}

static void test_layout_and_caps(void **state)
{
	(void)state;
	struct tu_store *t;
	char buf[64];
	struct store_stats st;

	assert_int_equal(tu_store_open("local", &t), 0);
	const struct store_caps *c = store_caps(t->store);
	assert_string_equal(c->name, "local");
	assert_true(c->conditional_create);
	assert_true(c->conditional_finish);
	assert_true(c->durable_on_ack);
	assert_int_equal(c->part_size, 0);

	assert_int_equal(store_put(t->store, "a/b/c", "hello", 5), 0);
	read_file(t->dir, "a/b/c", buf, sizeof(buf)); /* an object is a plain file */
	assert_string_equal(buf, "hello");
	assert_int_equal(count_tmp(t->dir, "a/b"), 0);
	assert_int_equal(store_put_if_absent(t->store, "a/b/c", "x", 1), -EEXIST);
	assert_int_equal(count_tmp(t->dir, "a/b"), 0); /* the loser's temp file is gone */

	/* a key cannot be both an object and a directory of other keys */
	assert_int_equal(store_put(t->store, "a/b/c/d", "x", 1), -ENOTDIR);
	assert_true(store_put(t->store, "a/b", "x", 1) < 0);
	assert_true(store_put_if_absent(t->store, "a/b", "x", 1) < 0);
	assert_int_equal(tu_count_keys(t->store, ""), 1);

	store_get_stats(t->store, &st);
	assert_true(st.requests[STORE_OP_PUT] >= 4);
	assert_int_equal(st.bytes_sent >= 5, true);

	/* a second store on the same directory sees the same objects */
	struct store *s2;
	void *out;
	size_t n;
	assert_int_equal(store_open_local(t->dir, &s2), 0);
	assert_int_equal(store_get(s2, "a/b/c", 1, 3, &out, &n), 0);
	assert_int_equal(n, 3);
	assert_memory_equal(out, "ell", 3);
	free(out);
	store_close(s2);
	tu_store_close(t);
}

/*
 * store_space(): the filesystem of the store's directory, as statvfs() of it says (what df of
 * a mount without --capacity reports); the fault wrapper passes it through.  The free space
 * moves with other programs' writes: it is compared within 64 MiB.
 */
static void test_space(void **state)
{
	(void)state;
	struct tu_store *t;
	struct store_space sp, fsp;
	struct statvfs sv;
	struct fault_store *f;
	struct store *inner;

	assert_int_equal(tu_store_open("local", &t), 0);
	assert_int_equal(store_space(t->store, &sp), 0);
	assert_int_equal(statvfs(t->dir, &sv), 0);
	assert_true(sp.total == (uint64_t)sv.f_blocks * sv.f_frsize);
	assert_true(sp.total > 0 && sp.free <= sp.total && sp.avail <= sp.free);
	uint64_t host_free = (uint64_t)sv.f_bfree * sv.f_frsize;
	uint64_t d = sp.free > host_free ? sp.free - host_free : host_free - sp.free;
	assert_true(d < (64u << 20));

	assert_int_equal(store_open_local(t->dir, &inner), 0);
	assert_int_equal(fault_store_new(inner, &f), 0);
	assert_int_equal(store_space(fault_store_as_store(f), &fsp), 0);
	assert_true(fsp.total == sp.total);
	store_close(fault_store_as_store(f));
	tu_store_close(t);
}

static void test_open_errors(void **state)
{
	(void)state;
	char *dir = tu_tempdir(), path[PATH_MAX];
	struct store *s = (struct store *)0x1;

	assert_non_null(dir);
	write_file(dir, "file", "x");
	snprintf(path, sizeof(path), "%s/file", dir);
	assert_true(store_open_local(path, &s) < 0);
	assert_ptr_equal(s, (struct store *)0x1); /* *out untouched on failure */
	assert_int_equal(store_open_local("", &s), -EINVAL);
	snprintf(path, sizeof(path), "%s/new", dir); /* a missing dir is created */
	assert_int_equal(store_open_local(path, &s), 0);
	store_close(s);
	assert_true(file_exists(dir, "new"));
	free(dir);
}

/* STORE_OPEN_EXISTING and STORE_OPEN_READ_ONLY (issue 9: looking never changes a store). */
static void test_open_flags(void **state)
{
	(void)state;
	char *dir = tu_tempdir(), path[PATH_MAX / 2]; /* room for a name below it */
	struct store *s = (struct store *)0x1, *w = NULL;
	struct store_writer *wr = (struct store_writer *)0x1;
	void *data = NULL;
	size_t n = 0;

	assert_non_null(dir);
	/* a missing directory is -ENOENT and stays missing, with either flag */
	snprintf(path, sizeof(path), "%s/missing", dir);
	assert_int_equal(store_open_local_flags(path, STORE_OPEN_EXISTING, &s), -ENOENT);
	assert_int_equal(store_open_local_flags(path, STORE_OPEN_READ_ONLY, &s), -ENOENT);
	assert_int_equal(store_open_url_flags(path, NULL, STORE_OPEN_READ_ONLY, &s), -ENOENT);
	assert_ptr_equal(s, (struct store *)0x1);
	assert_false(file_exists(dir, "missing"));
	assert_int_equal(store_open_local_flags(path, 0x80, &s), -EINVAL);

	/* read-only: reads work, every write is -EROFS, a crash's temp file is left alone */
	snprintf(path, sizeof(path), "%s/st", dir);
	assert_int_equal(store_open_local(path, &w), 0);
	assert_int_equal(store_put(w, "k", "v", 1), 0);
	store_close(w);
	write_file(path, "\\tmp.999999999.1", "crash");
	assert_int_equal(store_open_local_flags(path, STORE_OPEN_READ_ONLY, &s), 0);
	assert_true(file_exists(path, "\\tmp.999999999.1"));
	assert_int_equal(store_get(s, "k", 0, STORE_TO_END, &data, &n), 0);
	assert_int_equal(n, 1);
	free(data);
	assert_int_equal(tu_count_keys(s, ""), 1);
	assert_int_equal(store_put(s, "k2", "v", 1), -EROFS);
	assert_int_equal(store_put_if_absent(s, "k2", "v", 1), -EROFS);
	assert_int_equal(store_delete(s, "k"), -EROFS);
	const char *keys[] = {"k"};
	assert_int_equal(store_delete_many(s, keys, 1), -EROFS);
	assert_int_equal(store_writer_open(s, "k3", 0, &wr), -EROFS);
	assert_ptr_equal(wr, (struct store_writer *)0x1);
	assert_int_equal(store_cleanup_uploads(s, "", 0, NULL), -EROFS);
	store_close(s);
	assert_true(file_exists(path, "k"));
	assert_false(file_exists(path, "k2"));
	assert_true(file_exists(path, "\\tmp.999999999.1"));
	/* EXISTING alone opens an existing store for writing */
	assert_int_equal(store_open_local_flags(path, STORE_OPEN_EXISTING, &s), 0);
	assert_int_equal(store_put(s, "k2", "v", 1), 0);
	store_close(s);
	free(dir);
}

static void test_symlinks_never_followed(void **state)
{
	(void)state;
	char *out_dir = tu_tempdir(), path[PATH_MAX], buf[64];
	struct tu_store *t;
	void *data;
	size_t n;
	struct store_stat st;

	assert_int_equal(tu_store_open("local", &t), 0);
	write_file(out_dir, "secret", "outside");
	/* a directory symlink and a file symlink planted inside the root */
	snprintf(path, sizeof(path), "%s/evil", t->dir);
	assert_int_equal(symlink(out_dir, path), 0);
	snprintf(path, sizeof(path), "%s/link", t->dir);
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "%s/secret", out_dir);
	assert_int_equal(symlink(target, path), 0);

	assert_int_equal(store_get(t->store, "evil/secret", 0, STORE_TO_END, &data, &n), -ENOENT);
	assert_int_equal(store_head(t->store, "evil/secret", &st), -ENOENT);
	assert_int_equal(store_get(t->store, "link", 0, STORE_TO_END, &data, &n), -ENOENT);
	assert_int_equal(store_head(t->store, "link", &st), -ENOENT);
	assert_true(store_put(t->store, "evil/new", "x", 1) < 0);
	assert_false(file_exists(out_dir, "new"));
	assert_int_equal(store_delete(t->store, "evil/secret"), 0);
	assert_true(file_exists(out_dir, "secret"));
	assert_int_equal(tu_count_keys(t->store, ""), 0); /* symlinks are not objects */
	assert_int_equal(tu_count_keys(t->store, "evil/"), 0);
	struct store_writer *w;
	assert_true(store_writer_open(t->store, "evil/w", 0, &w) < 0);
	/* putting over a symlink replaces the link, never writes through it */
	assert_int_equal(store_put(t->store, "link", "mine", 4), 0);
	read_file(out_dir, "secret", buf, sizeof(buf));
	assert_string_equal(buf, "outside");
	assert_int_equal(tu_count_keys(t->store, ""), 1);
	/* escape attempts by key are refused before reaching the directory */
	assert_int_equal(store_put(t->store, "../escape", "x", 1), -EINVAL);
	assert_int_equal(store_put(t->store, "a/../../escape", "x", 1), -EINVAL);
	assert_int_equal(store_list(t->store, "../", NULL, 0, NULL, NULL), -EINVAL);
	tu_store_close(t);
	free(out_dir);
}

static int list_nothing(void *arg, const char *key, uint64_t size)
{
	(void)size;
	fail_msg("unexpected key %s listed (%s)", key, (const char *)arg);
	return 0;
}

static void test_temp_files(void **state)
{
	(void)state;
	struct tu_store *t;
	struct store_writer *w;
	char name[64], path[PATH_MAX];
	unsigned n = 99;

	assert_int_equal(tu_store_open("local", &t), 0);
	assert_int_equal(store_put(t->store, "d/keep", "k", 1), 0);
	/* an open writer's temp file is invisible */
	assert_int_equal(store_writer_open(t->store, "d/w", 0, &w), 0);
	assert_int_equal(store_writer_write(w, "abc", 3), 0);
	assert_int_equal(count_tmp(t->dir, "d"), 1);
	assert_int_equal(tu_count_keys(t->store, ""), 1);
	assert_int_equal(store_list(t->store, "d/w", NULL, 0, list_nothing, (void *)"writer tmp"),
	                 0);
	store_writer_abort(w);
	assert_int_equal(count_tmp(t->dir, "d"), 0);

	/* leftovers of a crashed process (pid that cannot exist), garbage, ours */
	write_file(t->dir, "\\tmp.999999999.1", "crash");
	write_file(t->dir, "d/\\tmp.999999999.2", "crash");
	write_file(t->dir, "d/\\tmp.garbage", "junk");
	snprintf(name, sizeof(name), "d/\\tmp.%d.777", (int)getpid());
	write_file(t->dir, name, "live");
	assert_int_equal(tu_count_keys(t->store, ""), 1); /* never listed, even before cleanup */
	assert_int_equal(tu_store_reopen(t), 0);
	assert_false(file_exists(t->dir, "\\tmp.999999999.1"));
	assert_false(file_exists(t->dir, "d/\\tmp.999999999.2"));
	assert_false(file_exists(t->dir, "d/\\tmp.garbage"));
	assert_true(file_exists(t->dir, name)); /* a live process's upload is left alone */
	assert_int_equal(tu_count_keys(t->store, ""), 1);

	/* cleanup_uploads by age */
	assert_int_equal(store_cleanup_uploads(t->store, "", 3600, &n), 0);
	assert_int_equal(n, 0);
	assert_true(file_exists(t->dir, name));
	snprintf(path, sizeof(path), "%s/%s", t->dir, name);
	struct timespec old[2] = {{.tv_sec = time(NULL) - 7200}, {.tv_sec = time(NULL) - 7200}};
	assert_int_equal(utimensat(AT_FDCWD, path, old, 0), 0);
	assert_int_equal(store_cleanup_uploads(t->store, "other/", 3600, &n), 0);
	assert_int_equal(n, 0); /* prefix elsewhere */
	assert_int_equal(store_cleanup_uploads(t->store, "d/", 3600, &n), 0);
	assert_int_equal(n, 1);
	assert_false(file_exists(t->dir, name));
	assert_true(file_exists(t->dir, "d/keep"));
	tu_store_close(t);
}

static int count_cb(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	(*(int *)arg)++;
	return 0;
}

static void test_foreign_files(void **state)
{
	(void)state;
	struct tu_store *t;
	char path[PATH_MAX];
	int n = 0;

	/* files that no key can name are not listed (and not touched) */
	assert_int_equal(tu_store_open("local", &t), 0);
	write_file(t->dir, "ok", "1");
	write_file(t->dir, "sp ace", "1"); /* a space is printable: a valid key */
	write_file(t->dir, "caf\xc3\xa9", "1");
	write_file(t->dir, "new\nline", "1");
	snprintf(path, sizeof(path), "%s/fifo", t->dir);
	assert_int_equal(mkfifo(path, 0600), 0);
	assert_int_equal(store_list(t->store, "", NULL, 0, count_cb, &n), 0);
	assert_int_equal(n, 2);
	void *d;
	size_t len;
	assert_int_equal(store_get(t->store, "fifo", 0, 1, &d, &len), -ENOENT);
	assert_true(file_exists(t->dir, "caf\xc3\xa9"));
	tu_store_close(t);
}

/*
 * Large puts from page-aligned memory go through O_DIRECT (local.c): the
 * aligned prefix, a padded last block, then a cut to the length.  Every
 * shape reads back byte-exact: a whole number of blocks, a partial last
 * block, unaligned memory (written buffered), and put_if_absent.
 */
static void test_large_puts(void **state)
{
	(void)state;
	struct tu_store *t;
	const size_t sizes[] = {1u << 20, (1u << 20) + 1, (3u << 20) + 4095, (2u << 20) + 512};
	uint8_t *buf = NULL;
	assert_int_equal(posix_memalign((void **)&buf, 4096, (4u << 20) + 4096), 0);
	for (size_t i = 0; i < (4u << 20) + 4096; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 24);
	assert_int_equal(tu_store_open("local", &t), 0);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		for (int shift = 0; shift < 2; shift++) {
			char key[32];
			const uint8_t *src = buf + 16 * shift; /* shift 1: not page-aligned */
			snprintf(key, sizeof(key), "big/%zu-%d", i, shift);
			assert_int_equal(i % 2 ? store_put_if_absent(t->store, key, src, sizes[i])
			                       : store_put(t->store, key, src, sizes[i]),
			                 0);
			void *out = NULL;
			size_t n = 0;
			assert_int_equal(store_get(t->store, key, 0, STORE_TO_END, &out, &n), 0);
			assert_int_equal(n, sizes[i]);
			assert_memory_equal(out, src, n);
			free(out);
			char path[PATH_MAX];
			struct stat st;
			snprintf(path, sizeof(path), "%s/%s", t->dir, key);
			assert_int_equal(stat(path, &st), 0);
			assert_int_equal((size_t)st.st_size, sizes[i]);
		}
	}
	tu_store_close(t);
	free(buf);
}

/* The permission bits of dir/rel. */
static unsigned mode_of(const char *dir, const char *rel)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	assert_int_equal(lstat(path, &st), 0);
	return (unsigned)(st.st_mode & 07777);
}

/*
 * A new store is private (issue 36): its root and every directory in it 0700, objects
 * 0600, from put, put_if_absent and a streaming writer, even with a umask of 0.
 */
static void test_private_modes(void **state)
{
	(void)state;
	char *base = tu_tempdir(), dir[PATH_MAX / 2];
	struct store_writer *w;
	struct store *s;
	mode_t old = umask(0);

	snprintf(dir, sizeof(dir), "%s/store", base);
	assert_int_equal(store_open_local(dir, &s), 0);
	assert_int_equal(store_put(s, "wal/1", "x", 1), 0);
	assert_int_equal(store_put_if_absent(s, "pack/a/b", "y", 1), 0);
	assert_int_equal(store_writer_open(s, "sst/c", 0, &w), 0);
	assert_int_equal(store_writer_write(w, "z", 1), 0);
	assert_int_equal(store_writer_finish(w), 0);
	umask(old);
	assert_int_equal(mode_of(base, "store"), 0700);
	assert_int_equal(mode_of(dir, "wal"), 0700);
	assert_int_equal(mode_of(dir, "pack"), 0700);
	assert_int_equal(mode_of(dir, "pack/a"), 0700);
	assert_int_equal(mode_of(dir, "sst"), 0700);
	assert_int_equal(mode_of(dir, "wal/1"), 0600);
	assert_int_equal(mode_of(dir, "pack/a/b"), 0600);
	assert_int_equal(mode_of(dir, "sst/c"), 0600);
	store_close(s);
	assert_int_equal(tu_rmtree(base), 0);
	free(base);
}

/*
 * Errors that stay until someone changes the store are permanent (store_err_permanent):
 * a link planted where the store keeps a directory (nothing written through it), a
 * directory the store may not write (not as root: root writes anyway); a full disk, EIO,
 * a timeout are not.  The fault wrapper answers as the store under it.
 */
static void test_permanent_errors(void **state)
{
	(void)state;
	char *out_dir = tu_tempdir(), path[PATH_MAX];
	struct tu_store *t;
	int rc;

	assert_int_equal(tu_store_open("fault", &t), 0);
	snprintf(path, sizeof(path), "%s/wal", t->dir);
	assert_int_equal(symlink(out_dir, path), 0);
	rc = store_put_if_absent(t->store, "wal/1", "x", 1);
	assert_int_equal(rc, -ENOTDIR);
	assert_true(store_err_permanent(t->store, rc));
	assert_false(file_exists(out_dir, "1"));
	rc = store_put(t->store, "wal/2/3", "x", 1);
	assert_int_equal(rc, -ENOTDIR);
	assert_true(store_err_permanent(t->store, rc));
	for (int e = 0; e < 3; e++) {
		int errs[] = {-ENOSPC, -EIO, -ETIMEDOUT};
		assert_false(store_err_permanent(t->store, errs[e]));
	}
	assert_false(store_err_permanent(t->store, 0));
	if (geteuid() != 0) {
		assert_int_equal(chmod(t->dir, 0500), 0);
		rc = store_put(t->store, "k", "x", 1);
		assert_int_equal(rc, -EACCES);
		assert_true(store_err_permanent(t->store, rc));
		assert_int_equal(chmod(t->dir, 0700), 0);
	} else {
		print_message("a directory the store may not write: not checked as root\n");
	}
	tu_store_close(t);
	assert_int_equal(tu_rmtree(out_dir), 0);
	free(out_dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_key_valid),
	    cmocka_unit_test(test_key_max_listed),
	    cmocka_unit_test(test_layout_and_caps),
	    cmocka_unit_test(test_space),
	    cmocka_unit_test(test_open_errors),
	    cmocka_unit_test(test_open_flags),
	    cmocka_unit_test(test_symlinks_never_followed),
	    cmocka_unit_test(test_temp_files),
	    cmocka_unit_test(test_foreign_files),
	    cmocka_unit_test(test_large_puts),
	    cmocka_unit_test(test_private_modes),
	    cmocka_unit_test(test_permanent_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
