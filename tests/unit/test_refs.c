/*
 * test_refs.c - value references and block reads (engine/read/read.c, engine/read/blob.c,
 * engine/wal/batch.c; docs/PACKS.md "Blocks"):
 *   - a read of part of a committed blob fetches only the 64 KiB blocks it
 *     touches (counted by the engine's blob_fetch_bytes), verified;
 *   - a damaged block fails its read with -EUCLEAN while the other blocks
 *     of the same blob still read;
 *   - engine_batch_put_ref() shares a sub-range of a blob (no pack bytes
 *     written), also of an inline value, and survives a reopen; the source's
 *     deletion leaves the slice readable;
 *   - pack_bytes counts each pack once (it counted the last pack again for
 *     every group without one).
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
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "format.h"
#include "store.h"
#include "testutil.h"

#define BIG (5 * BLOB_BLOCK_SIZE + 1000) /* six blocks, the last short */

static char *dir;

static int setup(void **state)
{
	(void)state;
	dir = tu_tempdir();
	return dir ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	tu_rmtree(dir);
	free(dir);
	return 0;
}

static struct engine *open_engine(struct store *st)
{
	struct engine_opts o;
	struct engine *e = NULL;
	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.gc_interval_ms = ENGINE_GC_OFF;
	o.commit_retry_ms = ENGINE_NO_RETRY;
	o.wal_blob_max = ENGINE_WAL_BLOBS_OFF; /* these tests read packs */
	assert_int_equal(engine_open(st, &o, &e), 0);
	return e;
}

/* The reference of key's value, copied into ref/buf (the scan is gone after). */
static void get_ref(struct engine *e, const char *key, struct engine_ref *ref, uint8_t *buf)
{
	struct engine_iter *it = NULL;
	size_t kn = strlen(key), n;
	assert_int_equal(engine_iter_new(e, key, kn, NULL, 0, &it), 0);
	assert_true(engine_iter_valid(it));
	const void *k = engine_iter_key(it, &n);
	assert_int_equal(n, kn);
	assert_memory_equal(k, key, kn);
	engine_iter_ref(it, ref);
	memcpy(buf, ref->p, ref->n);
	ref->p = buf;
	engine_iter_free(it);
}

static uint64_t stat_of(struct engine *e, const char *name)
{
	struct engine_stats s;
	engine_get_stats(e, &s);
	if (!strcmp(name, "fetch_bytes"))
		return s.blob_fetch_bytes;
	if (!strcmp(name, "fetches"))
		return s.blob_fetches;
	if (!strcmp(name, "pack_bytes"))
		return s.pack_bytes;
	return s.packs_written;
}

/* Sum of the sizes of the pack objects in the store. */
static uint64_t packs_in_store(void)
{
	char cmd[512];
	unsigned long long n = 0;
	snprintf(cmd, sizeof(cmd),
	         "find %s/pack -type f -printf '%%s\\n' | awk '{s+=$1} END {print s+0}'", dir);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	assert_int_equal(fscanf(f, "%llu", &n), 1);
	pclose(f);
	return n;
}

static void test_partial_reads_fetch_blocks(void **state)
{
	(void)state;
	struct store *st = NULL;
	static uint8_t big[BIG], out[BIG];
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st);
	tu_random_bytes(big, sizeof(big), 7);
	assert_int_equal(engine_put(e, "big", 3, big, sizeof(big), ENGINE_WAIT, NULL), 0);
	/* reopened, the cache is empty: reads of the blob go to the store */
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st);
	uint64_t f0 = stat_of(e, "fetch_bytes");
	size_t got = 0;
	assert_int_equal(engine_get_range(e, "big", 3, 100, out, 4096, &got), 0);
	assert_int_equal(got, 4096);
	assert_memory_equal(out, big + 100, 4096);
	assert_int_equal(stat_of(e, "fetch_bytes") - f0, BLOB_BLOCK_SIZE); /* one block */
	/* across a block boundary: two blocks, one GET */
	f0 = stat_of(e, "fetch_bytes");
	uint64_t g0 = stat_of(e, "fetches");
	assert_int_equal(engine_get_range(e, "big", 3, 2 * BLOB_BLOCK_SIZE - 10, out, 20, &got), 0);
	assert_memory_equal(out, big + 2 * BLOB_BLOCK_SIZE - 10, 20);
	assert_int_equal(stat_of(e, "fetch_bytes") - f0, 2 * BLOB_BLOCK_SIZE);
	assert_int_equal(stat_of(e, "fetches") - g0, 1);
	/* the short last block */
	f0 = stat_of(e, "fetch_bytes");
	assert_int_equal(engine_get_range(e, "big", 3, BIG - 5, out, 100, &got), 0);
	assert_int_equal(got, 5);
	assert_memory_equal(out, big + BIG - 5, 5);
	assert_int_equal(stat_of(e, "fetch_bytes") - f0, 1000);
	/* the whole value */
	void *v = NULL;
	size_t vn = 0;
	assert_int_equal(engine_get(e, "big", 3, &v, &vn), 0);
	assert_int_equal(vn, BIG);
	assert_memory_equal(v, big, BIG);
	free(v);

	/* damage block 3 in the pack object: its reads fail, the others still work */
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st);
	char name[4096];
	snprintf(name, sizeof(name), "find %s/pack -type f | head -1", dir);
	FILE *f = popen(name, "r");
	assert_non_null(f);
	assert_non_null(fgets(name, sizeof(name), f));
	pclose(f);
	name[strcspn(name, "\n")] = 0;
	int fd = open(name, O_RDWR);
	assert_true(fd >= 0);
	uint8_t b;
	off_t at = PACK_HEADER_SIZE + 3 * BLOB_BLOCK_SIZE + 77;
	assert_int_equal(pread(fd, &b, 1, at), 1);
	b ^= 0x40;
	assert_int_equal(pwrite(fd, &b, 1, at), 1);
	close(fd);
	assert_int_equal(engine_get_range(e, "big", 3, 3 * BLOB_BLOCK_SIZE + 5, out, 10, &got),
	                 -EUCLEAN);
	assert_int_equal(engine_get_range(e, "big", 3, 4 * BLOB_BLOCK_SIZE + 5, out, 10, &got), 0);
	assert_memory_equal(out, big + 4 * BLOB_BLOCK_SIZE + 5, 10);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_put_ref_shares(void **state)
{
	(void)state;
	struct store *st = NULL;
	static uint8_t big[BIG], out[BIG];
	uint8_t refbuf[1024], ibuf[1024];
	struct engine_ref ref, iref;
	struct engine_batch *b = NULL;
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st);
	tu_random_bytes(big, sizeof(big), 9);
	assert_int_equal(engine_put(e, "a-src", 5, big, sizeof(big), 0, NULL), 0);
	assert_int_equal(engine_put(e, "b-small", 7, "inline bytes", 12, 0, NULL), 0);
	/* a slice of a blob still in the open group's pack */
	get_ref(e, "a-src", &ref, refbuf);
	assert_true(ref.blob);
	assert_int_equal(engine_ref_len(&ref), BIG);
	assert_int_equal(engine_batch_new(&b), 0);
	assert_int_equal(engine_batch_put_ref(b, "c-early", 7, &ref, 10, 100), 0);
	assert_int_equal(engine_write(e, b, ENGINE_WAIT, NULL), 0);
	uint64_t pb = stat_of(e, "pack_bytes");
	/* a slice of the committed blob, across blocks, and of an inline value */
	get_ref(e, "a-src", &ref, refbuf);
	get_ref(e, "b-small", &iref, ibuf);
	assert_false(iref.blob);
	engine_batch_clear(b);
	assert_int_equal(engine_batch_put_ref(b, "d-slice", 7, &ref, BLOB_BLOCK_SIZE - 3, 70000),
	                 0);
	assert_int_equal(engine_batch_put_ref(b, "e-islice", 8, &iref, 7, 5), 0);
	assert_int_equal(engine_batch_put_ref(b, "f-bad", 5, &ref, BIG - 1, 2), -EINVAL);
	assert_int_equal(engine_write(e, b, ENGINE_WAIT, NULL), 0);
	assert_int_equal(stat_of(e, "pack_bytes"), pb); /* no byte written again */
	/* the slice carries only its own blocks' hashes: its reference is small */
	struct engine_ref sref;
	uint8_t sbuf[1024];
	get_ref(e, "d-slice", &sref, sbuf);
	assert_int_equal(sref.n, BLOB_DESC_FIXED + 8 * 3);
	assert_int_equal(engine_ref_read(e, &sref, 65530, out, 10, false), 0);
	assert_memory_equal(out, big + BLOB_BLOCK_SIZE - 3 + 65530, 10);
	assert_int_equal(engine_ref_read(e, &sref, 69999, out, 2, false), -EINVAL);
	/* the source goes; the slices stay, also after a reopen */
	assert_int_equal(engine_delete(e, "a-src", 5, ENGINE_WAIT, NULL), 0);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st);
	void *v = NULL;
	size_t vn = 0;
	assert_int_equal(engine_get(e, "c-early", 7, &v, &vn), 0);
	assert_int_equal(vn, 100);
	assert_memory_equal(v, big + 10, 100);
	free(v);
	assert_int_equal(engine_get(e, "d-slice", 7, &v, &vn), 0);
	assert_int_equal(vn, 70000);
	assert_memory_equal(v, big + BLOB_BLOCK_SIZE - 3, 70000);
	free(v);
	assert_int_equal(engine_get(e, "e-islice", 8, &v, &vn), 0);
	assert_int_equal(vn, 5);
	assert_memory_equal(v, "bytes", 5);
	free(v);
	assert_int_equal(engine_get(e, "a-src", 5, &v, &vn), -ENOENT);
	engine_batch_free(b);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

static void test_pack_bytes_counted_once(void **state)
{
	(void)state;
	struct store *st = NULL;
	static uint8_t big[100000];
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st);
	tu_random_bytes(big, sizeof(big), 3);
	for (int i = 0; i < 3; i++) {
		char k[16];
		snprintf(k, sizeof(k), "blob%d", i);
		assert_int_equal(engine_put(e, k, strlen(k), big, sizeof(big), ENGINE_WAIT, NULL),
		                 0);
		/* a group without a blob after each one */
		assert_int_equal(engine_put(e, "x", 1, "y", 1, ENGINE_WAIT, NULL), 0);
	}
	assert_int_equal(stat_of(e, "packs"), 3);
	assert_int_equal(stat_of(e, "pack_bytes"), packs_in_store());
	assert_int_equal(stat_of(e, "pack_bytes"),
	                 3 * (sizeof(big) + PACK_HEADER_SIZE + PACK_TRAILER_SIZE));
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

/*
 * Borrowed values: copied at engine_write() (inline into the entry when
 * small, into the pack when large), so the caller may reuse its buffer
 * right after; an empty value and a batch mixing copied and borrowed ops
 * come back as written, also after a reopen (the entry and the pack never
 * hold the caller's pointer).
 */
static void test_put_borrowed(void **state)
{
	(void)state;
	struct store *st = NULL;
	static uint8_t big[BIG], keep[BIG];
	uint8_t small[100];
	struct engine_batch *b = NULL;
	void *v = NULL;
	size_t vn = 0;
	assert_int_equal(store_open_local(dir, &st), 0);
	struct engine *e = open_engine(st);
	tu_random_bytes(big, sizeof(big), 21);
	memcpy(keep, big, sizeof(big));
	memset(small, 0x5a, sizeof(small));
	assert_int_equal(engine_batch_new(&b), 0);
	assert_int_equal(engine_batch_put_borrowed(b, "big", 3, big, sizeof(big)), 0);
	assert_int_equal(engine_batch_put(b, "copied", 6, "c", 1), 0);
	assert_int_equal(engine_batch_put_borrowed(b, "small", 5, small, sizeof(small)), 0);
	assert_int_equal(engine_batch_put_borrowed(b, "empty", 5, NULL, 0), 0);
	assert_int_equal(engine_batch_put_borrowed(b, "bad", 3, NULL, 1), -EINVAL);
	assert_int_equal(engine_batch_count(b), 4);
	assert_int_equal(engine_write(e, b, 0, NULL), 0);
	/* the caller's memory is free again at once: what was written stays */
	memset(big, 0, sizeof(big));
	memset(small, 0, sizeof(small));
	assert_int_equal(engine_get(e, "big", 3, &v, &vn), 0);
	assert_int_equal(vn, BIG);
	assert_memory_equal(v, keep, BIG);
	free(v);
	assert_int_equal(engine_sync(e), 0);
	assert_int_equal(stat_of(e, "packs"), 1);
	assert_int_equal(engine_close(e), 0);
	e = open_engine(st);
	assert_int_equal(engine_get(e, "big", 3, &v, &vn), 0);
	assert_int_equal(vn, BIG);
	assert_memory_equal(v, keep, BIG);
	free(v);
	assert_int_equal(engine_get(e, "small", 5, &v, &vn), 0);
	assert_int_equal(vn, 100);
	for (size_t i = 0; i < vn; i++)
		assert_int_equal(((uint8_t *)v)[i], 0x5a);
	free(v);
	assert_int_equal(engine_get(e, "empty", 5, &v, &vn), 0);
	assert_int_equal(vn, 0);
	free(v);
	assert_int_equal(engine_get(e, "copied", 6, &v, &vn), 0);
	assert_int_equal(vn, 1);
	free(v);
	engine_batch_free(b);
	assert_int_equal(engine_close(e), 0);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_partial_reads_fetch_blocks, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_ref_shares, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pack_bytes_counted_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_put_borrowed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
