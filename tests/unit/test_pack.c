/*
 * test_pack.c - Blob v2 packs (engine/pack.c): build, read while
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
	static uint8_t blob[3][7000];
	uint8_t tmp[7000];
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
		assert_int_equal(pack_append(p, blob[i], sizeof(blob[i]) - (size_t)i * 1000, &d[i]),
		                 0);
		assert_int_equal(d[i].epoch, 4);
		assert_int_equal(d[i].position, 9);
		assert_int_equal(d[i].hash, fmt_hash(blob[i], d[i].length));
		/* readable from memory while the pack is still open */
		assert_int_equal(pack_read(p, d[i].offset, tmp, d[i].length), 0);
		assert_memory_equal(tmp, blob[i], d[i].length);
	}
	assert_int_equal(d[0].offset, PACK_HEADER_SIZE);
	assert_int_equal(d[1].offset, PACK_HEADER_SIZE + 7000);
	assert_int_equal(pack_count(p), 3);
	assert_int_equal(pack_data_bytes(p), 7000 + 6000 + 5000);
	assert_int_equal(pack_read(p, d[2].offset + 1, tmp, d[2].length), -ERANGE);
	assert_int_equal(pack_read(p, 0, tmp, 4), -ERANGE);   /* header is not a blob */
	assert_int_equal(pack_write(p, st, &bytes), -EINVAL); /* not sealed */
	assert_int_equal(pack_seal(p), 0);
	assert_int_equal(pack_write(p, st, &bytes), 0);
	assert_int_equal(bytes, PACK_HEADER_SIZE + 18000 + PACK_TRAILER_SIZE);
	pack_unref(p);

	fmt_pack_name(name, 4, 9);
	/* a ranged GET of exactly one blob gives its bytes */
	assert_int_equal(store_get(st, name, d[1].offset, d[1].length, &obj, &n), 0);
	assert_int_equal(n, d[1].length);
	assert_int_equal(fmt_hash(obj, n), d[1].hash);
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
	struct blob_desc d;
	assert_int_equal(pack_append(p, "x", 1, &d), -EINVAL); /* sealed */
	b = malloc(PACK_HEADER_SIZE + PACK_TRAILER_SIZE);
	assert_int_equal(pack_read(p, PACK_HEADER_SIZE, b, PACK_TRAILER_SIZE), 0);
	assert_int_equal(get_be32(b + PACK_TOFF_MAGIC), PACK_TAIL_MAGIC);
	assert_int_equal(get_be32(b + PACK_TOFF_COUNT), 0);
	free(b);
	pack_unref(p);
	pack_unref(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_build_read_write),
	    cmocka_unit_test(test_empty_pack),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
