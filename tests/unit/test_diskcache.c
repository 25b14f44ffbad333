/*
 * test_diskcache.c - engine/cache/diskcache.c: round trip, a wrong length, damaged
 * files (a flipped byte anywhere, truncated, grown, deleted), the LRU bound,
 * reopen (entries and their order survive), the lock, a bound too small
 * for an entry, DISKCACHE_GET_CALLER_CHECKS (the data is left to the caller,
 * nothing else), a directory of another format version (wiped at open), and
 * parts of an entry read alone and puts of a shared buffer, flushes with
 * several writers, and data on a page boundary (written as it is); a hostile
 * directory (issue 36): one of another user, or writable by others, or on the
 * way through such a directory, is refused; links planted as format, lock,
 * an XX directory or an entry's temporary file are never followed.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "diskcache.h"

static char dir[64];

/* Entry files (engine/cache/diskcache.c): a 4 KiB header page (header, key, check), then the data
   from offset PAGE, padded to whole pages. */
#define PAGE 4096
#define HDR 16
#define FILE_BYTES(len) (PAGE + ((len) + PAGE - 1) / PAGE * PAGE)

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/mw-dctest.XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s.victim' '%s.vdir'", dir, dir, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct diskcache *open_dc(uint64_t max)
{
	struct diskcache_opts o = {.dir = dir, .max_bytes = max};
	struct diskcache *dc = NULL;

	assert_int_equal(diskcache_open(&o, &dc), 0);
	return dc;
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
}

static void key_of(char *k, size_t n, int i)
{
	snprintf(k, n, "key-%d", i);
}

/* The path of the single entry file of the cache (asserts there is exactly one). */
static void only_file(char *out, size_t n)
{
	char cmd[160];
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 2 -type f ! -name '.*'", dir);
	f = popen(cmd, "r");
	assert_non_null(f);
	assert_non_null(fgets(out, (int)n, f));
	out[strcspn(out, "\n")] = 0;
	char more[8];
	assert_null(fgets(more, sizeof(more), f));
	pclose(f);
}

static void roundtrip(void **state)
{
	struct diskcache *dc = open_dc(1 << 20);
	uint8_t in[5000], out[5000];
	struct diskcache_stats st;

	(void)state;
	fill(in, sizeof(in), 1);
	assert_int_equal(diskcache_get(dc, "a", 1, out, sizeof(out), 0), -ENOENT);
	diskcache_put(dc, "a", 1, in, sizeof(in));
	diskcache_flush(dc);
	assert_int_equal(diskcache_get(dc, "a", 1, out, sizeof(out), 0), 0);
	assert_memory_equal(in, out, sizeof(in));
	/* another length is not this entry (and is dropped: the caller wants other bytes) */
	assert_int_equal(diskcache_get(dc, "a", 1, out, sizeof(out) - 1, 0), -ENOENT);
	assert_int_equal(diskcache_get(dc, "a", 1, out, sizeof(out), 0), -ENOENT);
	diskcache_put(dc, "a", 1, in, sizeof(in));
	diskcache_flush(dc);
	diskcache_drop(dc, "a", 1, false);
	assert_int_equal(diskcache_get(dc, "a", 1, out, sizeof(out), 0), -ENOENT);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.inserts, 2);
	assert_int_equal(st.entries, 0);
	assert_int_equal(st.bytes, 0);
	diskcache_close(dc);
}

/* Damage the one entry file in each way; every read after it misses. */
static void damage(void **state)
{
	uint8_t in[3000], out[3000];
	char path[256];
	struct stat sb;

	(void)state;
	fill(in, sizeof(in), 2);
	for (int kind = 0; kind < 5; kind++) {
		/* kind 0: every 7th byte of the header, key and check, then of the data */
		size_t positions = kind == 0 ? HDR + 3 + 8 + 3000 : 1;
		for (size_t i = 0; i < positions; i += kind == 0 ? 7 : 1) {
			size_t pos = i < HDR + 3 + 8 ? i : PAGE + (i - (HDR + 3 + 8));
			struct diskcache *dc = open_dc(1 << 20);
			diskcache_put(dc, "key", 3, in, sizeof(in));
			diskcache_flush(dc);
			only_file(path, sizeof(path));
			assert_int_equal(stat(path, &sb), 0);
			assert_int_equal(sb.st_size, FILE_BYTES(sizeof(in)));
			int fd = open(path, O_RDWR);
			assert_true(fd >= 0);
			uint8_t b;
			switch (kind) {
			case 0: /* a flipped byte: header, key, check or data */
				assert_int_equal(pread(fd, &b, 1, (off_t)pos), 1);
				b ^= 0x20;
				assert_int_equal(pwrite(fd, &b, 1, (off_t)pos), 1);
				break;
			case 1: /* truncated by 8 bytes (of the last page's padding) */
				assert_int_equal(ftruncate(fd, sb.st_size - 8), 0);
				break;
			case 2: /* truncated into the data */
				assert_int_equal(ftruncate(fd, sb.st_size / 2), 0);
				break;
			case 3: /* grown by a byte */
				b = 0;
				assert_int_equal(pwrite(fd, &b, 1, sb.st_size), 1);
				break;
			case 4: /* emptied */
				assert_int_equal(ftruncate(fd, 0), 0);
				break;
			}
			close(fd);
			assert_int_equal(diskcache_get(dc, "key", 3, out, sizeof(out), 0), -ENOENT);
			/* and the damaged file is gone */
			assert_int_equal(stat(path, &sb), -1);
			struct diskcache_stats st;
			diskcache_get_stats(dc, &st);
			assert_int_equal(st.corrupt, 1);
			assert_int_equal(st.entries, 0);
			diskcache_close(dc);
		}
	}
	/* deleted behind the cache's back */
	struct diskcache *dc = open_dc(1 << 20);
	diskcache_put(dc, "key", 3, in, sizeof(in));
	diskcache_flush(dc);
	only_file(path, sizeof(path));
	assert_int_equal(unlink(path), 0);
	assert_int_equal(diskcache_get(dc, "key", 3, out, sizeof(out), 0), -ENOENT);
	diskcache_close(dc);
}

/*
 * DISKCACHE_GET_CALLER_CHECKS: a flipped data byte is returned (the caller's
 * own hash finds it and drops the entry, counted as corrupt); a damaged
 * header, key or size is still refused and deleted.
 */
static void caller_checks(void **state)
{
	uint8_t in[3000], out[3000];
	char path[256];
	struct diskcache_stats st;

	(void)state;
	fill(in, sizeof(in), 5);
	struct diskcache *dc = open_dc(1 << 20);
	diskcache_put(dc, "key", 3, in, sizeof(in));
	diskcache_flush(dc);
	only_file(path, sizeof(path));
	int fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	assert_int_equal(pread(fd, &b, 1, PAGE + 100), 1); /* data byte 100 */
	b ^= 0x01;
	assert_int_equal(pwrite(fd, &b, 1, PAGE + 100), 1);
	close(fd);
	assert_int_equal(diskcache_get(dc, "key", 3, out, sizeof(out), DISKCACHE_GET_CALLER_CHECKS),
	                 0);
	assert_int_equal(out[100], in[100] ^ 0x01);
	assert_memory_equal(out, in, 100);
	diskcache_drop(dc, "key", 3, true); /* what a caller does when its hash disagrees */
	assert_int_equal(diskcache_get(dc, "key", 3, out, sizeof(out), DISKCACHE_GET_CALLER_CHECKS),
	                 -ENOENT);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.corrupt, 1);
	assert_int_equal(st.entries, 0);
	/* a flipped key byte: refused even so */
	diskcache_put(dc, "key", 3, in, sizeof(in));
	diskcache_flush(dc);
	only_file(path, sizeof(path));
	fd = open(path, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &b, 1, 17), 1);
	b ^= 0x01;
	assert_int_equal(pwrite(fd, &b, 1, 17), 1);
	close(fd);
	assert_int_equal(diskcache_get(dc, "key", 3, out, sizeof(out), DISKCACHE_GET_CALLER_CHECKS),
	                 -ENOENT);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.corrupt, 2);
	diskcache_close(dc);
}

/* A directory whose format file names another version: its entries are deleted at open. */
static void old_format_wiped(void **state)
{
	uint8_t in[2000], out[2000];
	char path[256], fmt[128];
	struct diskcache_stats st;
	struct stat sb;

	(void)state;
	fill(in, sizeof(in), 9);
	struct diskcache *dc = open_dc(1 << 20);
	diskcache_put(dc, "old", 3, in, sizeof(in));
	diskcache_flush(dc);
	diskcache_close(dc);
	only_file(path, sizeof(path));
	snprintf(fmt, sizeof(fmt), "%s/format", dir);
	FILE *f = fopen(fmt, "w");
	assert_non_null(f);
	fputs("memwalfs-diskcache 2\n", f); /* an older version (data not on a page boundary) */
	fclose(f);
	dc = open_dc(1 << 20);
	diskcache_flush(dc); /* the listing (and the wipe) runs before the first job */
	assert_int_equal(stat(path, &sb), -1);
	assert_int_equal(diskcache_get(dc, "old", 3, out, sizeof(out), 0), -ENOENT);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.entries, 0);
	/* the directory is ours now: new entries stay, across a reopen */
	diskcache_put(dc, "new", 3, in, sizeof(in));
	diskcache_close(dc);
	dc = open_dc(1 << 20);
	assert_int_equal(diskcache_get(dc, "new", 3, out, sizeof(out), 0), 0);
	assert_memory_equal(out, in, sizeof(in));
	diskcache_close(dc);
	f = fopen(fmt, "r");
	assert_non_null(f);
	assert_non_null(fgets(fmt, sizeof(fmt), f));
	fclose(f);
	assert_string_equal(fmt, "memwalfs-diskcache 3\n");
}

/* Keys that collide in nothing but their file would be a bug: the key is checked too. */
static void distinct_keys(void **state)
{
	struct diskcache *dc = open_dc(1 << 20);
	uint8_t a[100], b[100], out[100];

	(void)state;
	fill(a, sizeof(a), 3);
	fill(b, sizeof(b), 4);
	diskcache_put(dc, "k1", 2, a, sizeof(a));
	diskcache_put(dc, "k2", 2, b, sizeof(b));
	diskcache_flush(dc);
	assert_int_equal(diskcache_get(dc, "k1", 2, out, sizeof(out), 0), 0);
	assert_memory_equal(out, a, sizeof(a));
	assert_int_equal(diskcache_get(dc, "k2", 2, out, sizeof(out), 0), 0);
	assert_memory_equal(out, b, sizeof(b));
	diskcache_close(dc);
}

/* The bound holds, the least recently used go first, and reopen keeps entries and order. */
static void lru_and_reopen(void **state)
{
	enum { N = 40, SZ = 4000 };
	uint64_t entry = FILE_BYTES(SZ); /* header page, data page */
	struct diskcache *dc = open_dc(10 * entry);
	uint8_t in[SZ], out[SZ];
	char k[16];
	struct diskcache_stats st;

	(void)state;
	for (int i = 0; i < N; i++) {
		key_of(k, sizeof(k), i + 10);
		fill(in, sizeof(in), (unsigned)i);
		diskcache_put(dc, k, strlen(k), in, sizeof(in));
		diskcache_flush(dc);
		if (i >= 2) { /* keep key 10 recent: it must survive */
			key_of(k, sizeof(k), 10);
			assert_int_equal(diskcache_get(dc, k, strlen(k), out, sizeof(out), 0), 0);
		}
	}
	diskcache_get_stats(dc, &st);
	assert_true(st.bytes <= 10 * entry);
	assert_int_equal(st.entries, 10);
	assert_int_equal(st.evictions, N - 10);
	key_of(k, sizeof(k), 10);
	assert_int_equal(diskcache_get(dc, k, strlen(k), out, sizeof(out), 0), 0);
	fill(in, sizeof(in), 0);
	assert_memory_equal(in, out, sizeof(out));
	key_of(k, sizeof(k), 11);
	assert_int_equal(diskcache_get(dc, k, strlen(k), out, sizeof(out), 0), -ENOENT);
	for (int i = N - 9; i < N; i++) {
		key_of(k, sizeof(k), i + 10);
		assert_int_equal(diskcache_get(dc, k, strlen(k), out, sizeof(out), 0), 0);
	}
	/* a second cache on the directory is refused while the first holds it */
	struct diskcache_opts o = {.dir = dir, .max_bytes = 1 << 20};
	struct diskcache *other = NULL;
	assert_int_equal(diskcache_open(&o, &other), -EBUSY);
	diskcache_close(dc);

	/* reopen: the same ten entries, all valid, and a smaller bound evicts at open */
	dc = open_dc(10 * entry);
	diskcache_flush(dc); /* the listing ran before the flush job */
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.entries, 10);
	assert_int_equal(st.bytes, 10 * entry);
	key_of(k, sizeof(k), 10);
	assert_int_equal(diskcache_get(dc, k, strlen(k), out, sizeof(out), 0), 0);
	diskcache_close(dc);
	dc = open_dc(5 * entry);
	diskcache_flush(dc);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.entries, 5);
	assert_int_equal(st.evictions, 5);
	diskcache_close(dc);
}

/* An entry larger than the bound is never written; a big queue does not block puts. */
static void limits(void **state)
{
	struct diskcache *dc = open_dc(1000);
	uint8_t in[2000], out[2000];
	struct diskcache_stats st;

	(void)state;
	fill(in, sizeof(in), 5);
	diskcache_put(dc, "big", 3, in, sizeof(in));
	diskcache_flush(dc);
	assert_int_equal(diskcache_get(dc, "big", 3, out, sizeof(out), 0), -ENOENT);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.dropped, 1);
	assert_int_equal(st.inserts, 0);
	diskcache_close(dc);
}

static int released;

static void count_release(void *arg)
{
	(void)arg;
	released++;
}

/*
 * diskcache_get_part(): a part of an entry reads those bytes of it (the
 * header, key and total length checked, the bytes left to the caller); a
 * part without DISKCACHE_GET_CALLER_CHECKS, past the end or of another total
 * is a miss.  diskcache_put_shared() writes the caller's buffer and gives it
 * back once, also when the entry is dropped.
 */
static void parts_and_shared(void **state)
{
	enum { SZ = 200000 };
	struct diskcache *dc = open_dc(8 << 20);
	uint8_t *in = malloc(SZ), *out = malloc(SZ);
	struct diskcache_stats st;

	(void)state;
	assert_non_null(in);
	assert_non_null(out);
	fill(in, SZ, 9);
	released = 0;
	diskcache_put_shared(dc, "w", 1, in, SZ, count_release, NULL);
	diskcache_flush(dc);
	assert_int_equal(released, 1);
	/* parts anywhere, the whole entry with or without the flag */
	const size_t parts[][2] = {{0, 1}, {65536, 65536}, {SZ - 7, 7}, {1234, 99999}, {0, SZ}};
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		memset(out, 0, SZ);
		assert_int_equal(diskcache_get_part(dc, "w", 1, SZ, parts[i][0], out, parts[i][1],
		                                    DISKCACHE_GET_CALLER_CHECKS),
		                 0);
		assert_memory_equal(out, in + parts[i][0], parts[i][1]);
	}
	assert_int_equal(diskcache_get_part(dc, "w", 1, SZ, 0, out, SZ, 0), 0);
	assert_memory_equal(out, in, SZ);
	/* refused without touching the entry: a part with the cache's own check, past the end */
	assert_int_equal(diskcache_get_part(dc, "w", 1, SZ, 10, out, 10, 0), -ENOENT);
	assert_int_equal(
	    diskcache_get_part(dc, "w", 1, SZ, SZ - 5, out, 10, DISKCACHE_GET_CALLER_CHECKS),
	    -ENOENT);
	assert_int_equal(diskcache_get(dc, "w", 1, out, SZ, 0), 0);
	/* another total length: not this entry, which is dropped */
	assert_int_equal(
	    diskcache_get_part(dc, "w", 1, SZ + 1, 0, out, 10, DISKCACHE_GET_CALLER_CHECKS),
	    -ENOENT);
	assert_int_equal(diskcache_get(dc, "w", 1, out, SZ, 0), -ENOENT);
	/* a truncated file: a part inside what is left reads (the caller checks it), one
	   beyond it misses and drops the entry */
	diskcache_put_shared(dc, "t", 1, in, SZ, count_release, NULL);
	diskcache_flush(dc);
	assert_int_equal(released, 2);
	char path[256];
	only_file(path, sizeof(path));
	assert_int_equal(truncate(path, PAGE + 1000), 0);
	assert_int_equal(
	    diskcache_get_part(dc, "t", 1, SZ, 100, out, 900, DISKCACHE_GET_CALLER_CHECKS), 0);
	assert_memory_equal(out, in + 100, 900);
	assert_int_equal(
	    diskcache_get_part(dc, "t", 1, SZ, 900, out, 200, DISKCACHE_GET_CALLER_CHECKS),
	    -ENOENT);
	assert_int_equal(access(path, F_OK), -1);
	/* a shared put that is dropped (larger than the bound) is given back too */
	diskcache_close(dc);
	dc = open_dc(1000);
	diskcache_put_shared(dc, "big", 3, in, SZ, count_release, NULL);
	assert_int_equal(released, 3);
	diskcache_flush(dc);
	diskcache_get_stats(dc, &st);
	assert_int_equal(st.dropped, 1);
	diskcache_close(dc);
	free(in);
	free(out);
}

/*
 * Data on a page boundary (what GET buffers of big reads are) goes to the
 * disk from where it is, its last partial page copied: whole pages, a partial
 * last page, less than a page, and unaligned data beside it read back
 * byte-exact, as wholes and parts, in files of whole pages.
 */
static void aligned_data(void **state)
{
	const size_t sizes[] = {2 * PAGE, 3 * PAGE + 100, 100, PAGE - 1, 5 * PAGE + 1};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	struct diskcache *dc = open_dc(16 << 20);
	uint8_t *buf = aligned_alloc(PAGE, 8 * PAGE), *out = malloc(8 * PAGE);
	char k[16], path[256];

	(void)state;
	assert_non_null(buf);
	assert_non_null(out);
	for (int off = 0; off < 2; off++) { /* off 1: the same sizes, one byte past the boundary */
		for (int i = 0; i < N; i++) {
			uint8_t *p = buf + off;
			fill(p, sizes[i], (unsigned)(i + 10 * off));
			key_of(k, sizeof(k), i + 10 * off);
			released = 0;
			diskcache_put_shared(dc, k, strlen(k), p, sizes[i], count_release, NULL);
			diskcache_flush(dc);
			assert_int_equal(released, 1);
			memset(out, 0, sizes[i]);
			assert_int_equal(diskcache_get(dc, k, strlen(k), out, sizes[i], 0), 0);
			assert_memory_equal(out, p, sizes[i]);
			size_t po = sizes[i] / 3, pl = sizes[i] - po;
			assert_int_equal(diskcache_get_part(dc, k, strlen(k), sizes[i], po, out, pl,
			                                    DISKCACHE_GET_CALLER_CHECKS),
			                 0);
			assert_memory_equal(out, p + po, pl);
		}
	}
	for (int i = 0; i < N; i++) { /* every file: whole pages */
		snprintf(path, sizeof(path),
		         "find '%s' -mindepth 2 -type f ! -name '.*' -size %zuc | grep -c .", dir,
		         (size_t)FILE_BYTES(sizes[i]));
		FILE *f = popen(path, "r");
		assert_non_null(f);
		char line[16];
		assert_non_null(fgets(line, sizeof(line), f));
		pclose(f);
		assert_true(atoi(line) >= 2); /* both offsets of this size */
	}
	diskcache_close(dc);
	free(buf);
	free(out);
}

/* Files of the cache whose names start with a dot (temporaries). */
static int temporaries(void)
{
	char cmd[160], line[256];
	int n = 0;
	FILE *f;

	snprintf(cmd, sizeof(cmd), "find '%s' -mindepth 2 -type f -name '.*'", dir);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n++;
	pclose(f);
	return n;
}

/*
 * Several writers: a flush returns only once every put queued before it is
 * written, whichever writer took it; nothing is left half written; and what
 * was written reads back byte-exact.  (With writers done out of order, a
 * flush that waited for its own writer only returned with entries missing.)
 */
static void writers_flush(void **state)
{
	enum { ROUNDS = 12, PER = 8, SZ = 1 << 20 };
	struct diskcache_opts o = {.dir = dir, .max_bytes = 1ull << 30, .writers = 4};
	struct diskcache *dc = NULL;
	uint8_t *in = malloc(SZ), *out = malloc(SZ);
	struct diskcache_stats st;
	char k[16];

	(void)state;
	assert_non_null(in);
	assert_non_null(out);
	released = 0;
	assert_int_equal(diskcache_open(&o, &dc), 0);
	for (int r = 0; r < ROUNDS; r++) {
		/* shared puts: queued at once, so that every writer has work */
		fill(in, SZ, (unsigned)r);
		for (int i = 0; i < PER; i++) {
			key_of(k, sizeof(k), r * PER + i);
			diskcache_put_shared(dc, k, strlen(k), in, SZ, count_release, NULL);
		}
		diskcache_flush(dc);
		assert_int_equal(released, (r + 1) * PER);
		diskcache_get_stats(dc, &st);
		assert_int_equal(st.inserts, (uint64_t)(r + 1) * PER);
		assert_int_equal(st.entries, (uint64_t)(r + 1) * PER);
		assert_int_equal(temporaries(), 0);
		for (int i = 0; i < PER; i++) {
			key_of(k, sizeof(k), r * PER + i);
			assert_int_equal(diskcache_get(dc, k, strlen(k), out, SZ, 0), 0);
			assert_memory_equal(in, out, SZ);
		}
	}
	diskcache_close(dc);
	free(in);
	free(out);
}

/* ---- a hostile directory (issue 36) ---------------------------------------- */

/* Write s to path. */
static void write_file(const char *path, const char *s)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(fputs(s, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

/* Does path hold exactly s? */
static bool holds(const char *path, const char *s)
{
	char buf[256] = "";
	FILE *f = fopen(path, "r");

	if (!f)
		return false;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	return strcmp(buf, s) == 0;
}

static int try_open(const char *d)
{
	struct diskcache_opts o = {.dir = d, .max_bytes = 1 << 20};
	struct diskcache *dc = NULL;
	int rc = diskcache_open(&o, &dc);

	diskcache_close(dc);
	return rc;
}

/*
 * A cache directory writable by others (a group or everybody), or below a directory that is
 * (and not sticky), is refused; below a sticky one (like /tmp) it is taken.  Another user's
 * directory (root only: chown) is refused, and so is a path through a link another user
 * made.
 */
static void unsafe_dirs(void **state)
{
	char d[128], sub[160], link[160];

	(void)state;
	snprintf(d, sizeof(d), "%s/c", dir);
	assert_int_equal(mkdir(d, 0700), 0);
	assert_int_equal(try_open(d), 0);
	assert_int_equal(chmod(d, 0777), 0);
	assert_int_equal(try_open(d), -EPERM);
	assert_int_equal(chmod(d, 0770), 0);
	assert_int_equal(try_open(d), -EPERM);
	assert_int_equal(chmod(d, 01777), 0); /* sticky or not, others write into it */
	assert_int_equal(try_open(d), -EPERM);
	/* a directory on the way: writable by others refuses, sticky too is fine */
	snprintf(sub, sizeof(sub), "%s/new/cache", d);
	assert_int_equal(chmod(d, 0777), 0);
	assert_int_equal(try_open(sub), -EPERM);
	assert_int_equal(chmod(d, 01777), 0);
	assert_int_equal(try_open(sub), 0);
	struct stat sb;
	assert_int_equal(stat(sub, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0700);
	if (geteuid() != 0) {
		print_message("the checks of another user's directory need root: not run\n");
		return;
	}
	/* another user's directory, and a link another user made on the way */
	assert_int_equal(chown(sub, 65534, 65534), 0);
	assert_int_equal(try_open(sub), -EPERM);
	snprintf(link, sizeof(link), "%s/link", d);
	assert_int_equal(symlink(dir, link), 0);
	assert_int_equal(lchown(link, 65534, 65534), 0);
	snprintf(sub, sizeof(sub), "%s/link/cache2", d);
	assert_int_equal(try_open(sub), -EPERM);
	assert_int_equal(lchown(link, 0, 0), 0); /* a link of root's is followed */
	assert_int_equal(try_open(sub), 0);
}

/*
 * Links planted in our own directory are never followed: format to a file (replaced, the
 * file untouched), 00 to a directory (removed by the listing, even with the wipe a foreign
 * format asks for, the files there untouched), an entry's temporary file to a file (the
 * entry written, the file untouched); lock to a file refuses the cache without creating it.
 */
static void planted_links(void **state)
{
	char victim[128], vdir[100], vfile[160], p[400], name[40], tmp[64];
	uint8_t in[3000], out[3000];

	(void)state;
	snprintf(victim, sizeof(victim), "%s.victim", dir);
	snprintf(vdir, sizeof(vdir), "%s.vdir", dir);
	write_file(victim, "precious\n");
	assert_int_equal(mkdir(vdir, 0700), 0);
	snprintf(vfile, sizeof(vfile), "%s/0123456789abcdef0123456789abcdef", vdir);
	write_file(vfile, "precious too\n");
	snprintf(p, sizeof(p), "%s/format", dir);
	assert_int_equal(symlink(victim, p), 0);
	snprintf(p, sizeof(p), "%s/00", dir);
	assert_int_equal(symlink(vdir, p), 0);
	struct diskcache_opts o = {.dir = dir, .max_bytes = 1 << 20, .writers = 1};
	struct diskcache *dc = NULL;
	assert_int_equal(diskcache_open(&o, &dc), 0);
	diskcache_flush(dc); /* the listing is done */
	assert_true(holds(victim, "precious\n"));
	assert_true(holds(vfile, "precious too\n"));
	struct stat sb;
	assert_int_equal(lstat(p, &sb), -1); /* the link 00 is gone */
	snprintf(p, sizeof(p), "%s/format", dir);
	assert_true(holds(p, "memwalfs-diskcache 3\n"));
	assert_int_equal(lstat(p, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));

	/* writer 0's temporary name of key "t", planted as a link after the listing */
	XXH128_hash_t h = XXH3_128bits("t", 1);
	snprintf(name, sizeof(name), "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64,
	         (uint64_t)h.low64);
	snprintf(p, sizeof(p), "%s/%.2s", dir, name);
	assert_int_equal(mkdir(p, 0700), 0);
	snprintf(tmp, sizeof(tmp), ".%s.0.tmp", name);
	snprintf(p, sizeof(p), "%s/%.2s/%s", dir, name, tmp);
	assert_int_equal(symlink(victim, p), 0);
	fill(in, sizeof(in), 3);
	diskcache_put(dc, "t", 1, in, sizeof(in));
	diskcache_flush(dc);
	assert_true(holds(victim, "precious\n"));
	assert_int_equal(diskcache_get(dc, "t", 1, out, sizeof(out), 0), 0);
	assert_memory_equal(out, in, sizeof(in));
	diskcache_close(dc);

	/* lock: refused, the file it names not created */
	snprintf(p, sizeof(p), "%s/lock", dir);
	assert_int_equal(unlink(p), 0);
	snprintf(vfile, sizeof(vfile), "%s/created", vdir);
	assert_int_equal(symlink(vfile, p), 0);
	assert_int_equal(try_open(dir), -ELOOP);
	assert_int_equal(lstat(vfile, &sb), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(roundtrip, setup, teardown),
	    cmocka_unit_test_setup_teardown(damage, setup, teardown),
	    cmocka_unit_test_setup_teardown(distinct_keys, setup, teardown),
	    cmocka_unit_test_setup_teardown(lru_and_reopen, setup, teardown),
	    cmocka_unit_test_setup_teardown(limits, setup, teardown),
	    cmocka_unit_test_setup_teardown(caller_checks, setup, teardown),
	    cmocka_unit_test_setup_teardown(old_format_wiped, setup, teardown),
	    cmocka_unit_test_setup_teardown(parts_and_shared, setup, teardown),
	    cmocka_unit_test_setup_teardown(writers_flush, setup, teardown),
	    cmocka_unit_test_setup_teardown(aligned_data, setup, teardown),
	    cmocka_unit_test_setup_teardown(unsafe_dirs, setup, teardown),
	    cmocka_unit_test_setup_teardown(planted_links, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
