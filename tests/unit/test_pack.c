/*
 * test_pack.c - Blob v2 packs (engine/wal/pack.c): build, read while
 * building, seal, write, ranged reads by descriptor, verification of the
 * whole object (magic, version, checksums, truncation).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coding.h"
#include "format.h"
#include "pack.h"
#include "store.h"

static void test_build_read_write(void **state)
{
	char dir[] = "/tmp/test_pack.XXXXXX", cmd[64], name[FMT_NAME_MAX];
	struct store *st;
	struct pack *p;
	struct blob_desc d[3];
	static uint8_t blob[3][150000]; /* blob 0 spans three checksum blocks */
	static uint8_t tmp[150000];
	uint8_t desc[3][BLOB_DESC_FIXED + 8 * 3];
	size_t len[3] = {150000, 6000, 5000};
	void *obj;
	size_t n;
	uint64_t bytes = 0;
	(void)state;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open_local(dir, &st), 0);
	assert_int_equal(pack_new(4, 9, &p), 0);
	for (int i = 0; i < 3; i++) {
		for (size_t j = 0; j < sizeof(blob[i]); j++)
			blob[i][j] = (uint8_t)(i * 13 + j * 7);
		assert_int_equal(pack_append(p, blob[i], len[i], desc[i]), 0);
		assert_int_equal(blob_desc_decode(desc[i], blob_desc_size_for(len[i]), &d[i]), 0);
		assert_int_equal(d[i].epoch, 4);
		assert_int_equal(d[i].position, 9);
		assert_int_equal(d[i].length, len[i]);
		assert_int_equal(d[i].blob_len, len[i]);
		assert_int_equal(d[i].start, 0);
		/* one hash per block of BLOB_BLOCK_SIZE, the last block shorter */
		for (uint64_t b = 0; b < blob_desc_nblocks(&d[i]); b++) {
			size_t o = (size_t)b * BLOB_BLOCK_SIZE;
			size_t bl = len[i] - o < BLOB_BLOCK_SIZE ? len[i] - o : BLOB_BLOCK_SIZE;
			assert_int_equal(get_be64(d[i].hashes + 8 * b), fmt_hash(blob[i] + o, bl));
		}
		/* readable from memory while the pack is still open */
		assert_int_equal(pack_read(p, d[i].offset, tmp, d[i].length), 0);
		assert_memory_equal(tmp, blob[i], d[i].length);
	}
	assert_int_equal(d[0].offset, PACK_HEADER_SIZE);
	assert_int_equal(blob_desc_nblocks(&d[0]), 3);
	assert_int_equal(d[1].offset, PACK_HEADER_SIZE + 150000);
	assert_int_equal(pack_count(p), 3);
	assert_int_equal(pack_data_bytes(p), 150000 + 6000 + 5000);
	assert_int_equal(pack_read(p, d[2].offset + 1, tmp, d[2].length), -ERANGE);
	assert_int_equal(pack_read(p, 0, tmp, 4), -ERANGE);   /* header is not a blob */
	assert_int_equal(pack_write(p, st, &bytes), -EINVAL); /* not sealed */
	assert_int_equal(pack_seal(p), 0);
	assert_int_equal(pack_write(p, st, &bytes), 0);
	assert_int_equal(bytes, PACK_HEADER_SIZE + 161000 + PACK_TRAILER_SIZE);
	pack_unref(p);

	fmt_pack_name(name, 4, 9);
	/* a ranged GET of exactly one blob gives its bytes */
	assert_int_equal(store_get(st, name, d[1].offset, d[1].length, &obj, &n), 0);
	assert_int_equal(n, d[1].length);
	uint64_t bad;
	assert_int_equal(blob_desc_verify(&d[1], 0, obj, n, &bad), 0);
	free(obj);
	/* so does a ranged GET of the middle block of blob 0, alone */
	struct blob_desc mid;
	uint64_t from, to;
	blob_desc_slice(&d[0], BLOB_BLOCK_SIZE + 100, 4096, &mid);
	blob_desc_blocks(&mid, 0, mid.length, &from, &to);
	assert_int_equal(from, BLOB_BLOCK_SIZE);
	assert_int_equal(to, 2 * BLOB_BLOCK_SIZE);
	assert_int_equal(store_get(st, name, d[0].offset + from, to - from, &obj, &n), 0);
	assert_int_equal(blob_desc_verify(&mid, from, obj, n, &bad), 0);
	((uint8_t *)obj)[7] ^= 1;
	assert_int_equal(blob_desc_verify(&mid, from, obj, n, &bad), -EUCLEAN);
	assert_int_equal(bad, BLOB_BLOCK_SIZE);
	free(obj);
	/* the whole object verifies; every kind of damage is detected */
	assert_int_equal(store_get(st, name, 0, STORE_TO_END, &obj, &n), 0);
	assert_int_equal(n, bytes);
	uint8_t *b = obj;
	assert_int_equal(get_be32(b), PACK_MAGIC);
	assert_int_equal(pack_verify(name, b, n), 0);
	for (size_t off = 0; off < n; off += 997) {
		b[off] ^= 0x10;
		assert_int_equal(pack_verify(name, b, n), -EUCLEAN);
		b[off] ^= 0x10;
	}
	assert_int_equal(pack_verify(name, b, n - 1), -EUCLEAN); /* truncated */
	assert_int_equal(pack_verify(name, b, 10), -EUCLEAN);
	put_be16(b + PACK_OFF_VERSION, PACK_VERSION + 1); /* newer version */
	put_be64(b + PACK_OFF_HEAD_HASH, fmt_hash(b, PACK_OFF_HEAD_HASH));
	assert_int_equal(pack_verify(name, b, n), -EPROTONOSUPPORT);
	free(obj);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void test_empty_pack(void **state)
{
	struct pack *p;
	uint8_t *b;
	(void)state;

	assert_int_equal(pack_new(1, 1, &p), 0);
	assert_int_equal(pack_seal(p), 0);
	assert_int_equal(pack_seal(p), 0); /* idempotent */
	uint8_t desc[BLOB_DESC_FIXED + 8];
	assert_int_equal(pack_append(p, "x", 1, desc), -EINVAL); /* sealed */
	b = malloc(PACK_HEADER_SIZE + PACK_TRAILER_SIZE);
	assert_int_equal(pack_read(p, PACK_HEADER_SIZE, b, PACK_TRAILER_SIZE), 0);
	assert_int_equal(get_be32(b + PACK_TOFF_MAGIC), PACK_TAIL_MAGIC);
	assert_int_equal(get_be32(b + PACK_TOFF_COUNT), 0);
	free(b);
	pack_unref(p);
	pack_unref(NULL);
}

/* Build, seal and write a pack of n blobs of len bytes (pattern seed), check it in the store. */
static void big_pack(struct store *st, uint64_t pos, int n, size_t len, uint8_t seed)
{
	struct pack *p;
	uint8_t *blob = malloc(len), *desc = malloc(blob_desc_size_for(len)), *tmp = malloc(len);
	char name[FMT_NAME_MAX];
	struct blob_desc d;
	void *obj;
	size_t got;

	assert_non_null(blob);
	assert_non_null(desc);
	assert_non_null(tmp);
	assert_int_equal(pack_new(1, pos, &p), 0);
	for (int i = 0; i < n; i++) {
		for (size_t j = 0; j < len; j++)
			blob[j] = (uint8_t)(seed + i * 31 + j * 7);
		assert_int_equal(pack_append(p, blob, len, desc), 0);
		assert_int_equal(blob_desc_decode(desc, blob_desc_size_for(len), &d), 0);
		assert_int_equal(pack_read(p, d.offset, tmp, len), 0);
		assert_memory_equal(tmp, blob, len);
	}
	assert_int_equal(pack_data_bytes(p), (uint64_t)n * len);
	assert_int_equal(pack_seal(p), 0);
	assert_int_equal(pack_write(p, st, NULL), 0);
	fmt_pack_name(name, 1, pos);
	assert_int_equal(store_get(st, name, 0, STORE_TO_END, &obj, &got), 0);
	assert_int_equal(got, PACK_HEADER_SIZE + (size_t)n * len + PACK_TRAILER_SIZE);
	assert_int_equal(pack_verify(name, obj, got), 0);
	free(obj);
	pack_unref(p);
	free(blob);
	free(desc);
	free(tmp);
}

/*
 * The mapping pool: a large pack's mapping outlives it in the pool, the
 * next large pack takes it (smaller: as it is; larger: grown), and what is
 * built in a reused mapping is exactly the new pack, whatever the old one
 * left past its end.
 */
static void test_mapping_pool(void **state)
{
	char dir[] = "/tmp/test_pack_pool.XXXXXX", cmd[64];
	struct store *st;
	(void)state;

	assert_non_null(mkdtemp(dir));
	assert_int_equal(store_open_local(dir, &st), 0);
	pack_pool_drain();
	assert_int_equal(pack_pool_bytes(), 0);
	big_pack(st, 1, 6, 500000, 1); /* 3 MB: a mapping */
	size_t pooled = pack_pool_bytes();
	assert_true(pooled >= 3000000);
	big_pack(st, 2, 3, 400000, 2); /* smaller: reuses it, trimmed at seal */
	assert_true(pack_pool_bytes() > 0 && pack_pool_bytes() <= pooled);
	big_pack(st, 3, 9, 700000, 3); /* larger than what is pooled: grown */
	assert_true(pack_pool_bytes() >= 6300000);
	struct pack *small;
	uint8_t desc[BLOB_DESC_FIXED + 8];
	assert_int_equal(pack_new(1, 4, &small), 0); /* a small pack stays on the heap */
	assert_int_equal(pack_append(small, "abc", 3, desc), 0);
	pack_unref(small);
	assert_true(pack_pool_bytes() >= 6300000);
	pack_pool_drain();
	assert_int_equal(pack_pool_bytes(), 0);
	store_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_build_read_write),
	    cmocka_unit_test(test_empty_pack),
	    cmocka_unit_test(test_mapping_pool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
