/*
 * test_wal_format.c - the WAL entry codec (engine/wal/wal.c) and the blob
 * descriptor / object names (engine/format/format.c): round trip, truncated tail,
 * bad length, checksum mismatch in header and body, bad magic, newer
 * version, wrong position, malformed bodies, fence entries.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "coding.h"
#include "format.h"
#include "wal.h"

/* Build an entry with two batches: {put a=1, blob b}, {delete c}. */
static void build(struct mw_buf *b, uint64_t pos)
{
	struct wal_info info = {
	    .epoch = 7, .position = pos, .first_seq = 100, .op_count = 3, .batch_count = 2};
	struct blob_desc d = {.epoch = 7,
	                      .position = pos,
	                      .offset = 32,
	                      .blob_len = 5000,
	                      .length = 5000,
	                      .hashes = (const uint8_t *)"\x11\x22\x33\x44\x55\x66\x77\x88"};
	uint8_t desc[BLOB_DESC_FIXED + 8];

	blob_desc_encode(desc, &d);
	assert_int_equal(wal_entry_begin(b), 0);
	assert_int_equal(wal_entry_add_batch(b, 2), 0);
	assert_int_equal(wal_entry_add_op(b, KV_INLINE, "a", 1, "1", 1), 0);
	assert_int_equal(wal_entry_add_op(b, KV_BLOB, "b", 1, desc, sizeof(desc)), 0);
	assert_int_equal(wal_entry_add_batch(b, 1), 0);
	assert_int_equal(wal_entry_add_op(b, KV_DELETE, "c", 1, NULL, 0), 0);
	wal_entry_seal(b, &info);
}

static void test_roundtrip(void **state)
{
	struct mw_buf b = {0};
	struct wal_info info;
	struct wal_cursor c;
	const uint8_t *body, *k, *v;
	size_t blen, kn, vn;
	enum kv_type t;
	struct blob_desc d;
	(void)state;

	build(&b, 42);
	assert_int_equal(get_be32(b.p), WAL_MAGIC);
	assert_int_equal(wal_entry_decode("wal/x", b.p, b.len, 42, &info, &body, &blen), 0);
	assert_int_equal(info.epoch, 7);
	assert_int_equal(info.position, 42);
	assert_int_equal(info.first_seq, 100);
	assert_int_equal(info.op_count, 3);
	assert_int_equal(info.batch_count, 2);
	assert_int_equal(info.flags, 0);
	wal_cursor_init(&c, body, blen, info.batch_count);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), 1);
	assert_true(c.batch_start);
	assert_int_equal(t, KV_INLINE);
	assert_memory_equal(k, "a", 1);
	assert_memory_equal(v, "1", 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), 1);
	assert_false(c.batch_start);
	assert_int_equal(t, KV_BLOB);
	assert_int_equal(blob_desc_decode(v, vn, &d), 0);
	assert_int_equal(d.length, 5000);
	assert_int_equal(d.offset, 32);
	assert_int_equal(get_be64(d.hashes), 0x1122334455667788ULL);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), 1);
	assert_true(c.batch_start);
	assert_int_equal(t, KV_DELETE);
	assert_int_equal(vn, 0);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), 0);
	mw_buf_free(&b);
}

static void test_truncated_and_bad_length(void **state)
{
	struct mw_buf b = {0};
	struct wal_info info;
	const uint8_t *body;
	size_t blen;
	(void)state;

	build(&b, 1);
	/* truncated tail, every length */
	for (size_t n = 0; n < b.len; n++)
		assert_int_equal(wal_entry_decode("wal/t", b.p, n, 1, &info, &body, &blen),
		                 -EUCLEAN);
	/* trailing garbage: the length no longer matches */
	assert_int_equal(mw_buf_append(&b, "x", 1), 0);
	assert_int_equal(wal_entry_decode("wal/t", b.p, b.len, 1, &info, &body, &blen), -EUCLEAN);
	b.len--;
	/* a bad body length with a valid header checksum */
	put_be64(b.p + WAL_OFF_BODY_LEN, 3);
	put_be64(b.p + WAL_OFF_HEAD_HASH, fmt_hash(b.p, WAL_OFF_HEAD_HASH));
	assert_int_equal(wal_entry_decode("wal/t", b.p, b.len, 1, &info, &body, &blen), -EUCLEAN);
	mw_buf_free(&b);
}

static void test_checksums_magic_version(void **state)
{
	struct mw_buf b = {0};
	struct wal_info info;
	const uint8_t *body;
	size_t blen;
	(void)state;

	build(&b, 5);
	/* every single-byte flip is detected */
	for (size_t i = 0; i < b.len; i++) {
		b.p[i] ^= 0x01;
		assert_int_equal(wal_entry_decode("wal/f", b.p, b.len, 5, &info, &body, &blen),
		                 -EUCLEAN);
		b.p[i] ^= 0x01;
	}
	assert_int_equal(wal_entry_decode("wal/f", b.p, b.len, 5, &info, &body, &blen), 0);
	/* newer version (with a correct checksum) is refused */
	put_be16(b.p + WAL_OFF_VERSION, WAL_VERSION + 1);
	put_be64(b.p + WAL_OFF_HEAD_HASH, fmt_hash(b.p, WAL_OFF_HEAD_HASH));
	assert_int_equal(wal_entry_decode("wal/f", b.p, b.len, 5, &info, &body, &blen),
	                 -EPROTONOSUPPORT);
	/* bad magic */
	put_be16(b.p + WAL_OFF_VERSION, WAL_VERSION);
	put_be32(b.p, 0x12345678);
	put_be64(b.p + WAL_OFF_HEAD_HASH, fmt_hash(b.p, WAL_OFF_HEAD_HASH));
	assert_int_equal(wal_entry_decode("wal/f", b.p, b.len, 5, &info, &body, &blen), -EUCLEAN);
	/* wrong position (an object renamed / copied) */
	mw_buf_free(&b);
	build(&b, 5);
	assert_int_equal(wal_entry_decode("wal/f", b.p, b.len, 6, &info, &body, &blen), -EUCLEAN);
	mw_buf_free(&b);
}

static void test_fence_entry(void **state)
{
	struct mw_buf b = {0};
	struct wal_info info = {.flags = WAL_FLAG_FENCE, .epoch = 3, .position = 9}, out;
	const uint8_t *body;
	size_t blen;
	(void)state;

	assert_int_equal(wal_entry_begin(&b), 0);
	wal_entry_seal(&b, &info);
	assert_int_equal(b.len, WAL_HEADER_SIZE);
	assert_int_equal(wal_entry_decode("wal/9", b.p, b.len, 9, &out, &body, &blen), 0);
	assert_true(out.flags & WAL_FLAG_FENCE);
	assert_int_equal(out.epoch, 3);
	assert_int_equal(blen, 0);
	mw_buf_free(&b);
}

static void test_malformed_body(void **state)
{
	struct wal_cursor c;
	const uint8_t *k, *v;
	size_t kn, vn;
	enum kv_type t;
	/* batch of 1 op: type 9 (unknown) */
	static const uint8_t bad_type[] = {1, 9, 1, 'a', 0};
	/* key length past the end */
	static const uint8_t bad_klen[] = {1, 1, 50, 'a', 0};
	/* batch says 2 ops, only one present */
	static const uint8_t short_batch[] = {2, 1, 1, 'a', 0};
	/* trailing bytes after the last batch */
	static const uint8_t trailing[] = {1, 1, 1, 'a', 0, 7};
	/* unterminated varint */
	static const uint8_t bad_varint[] = {0x80};
	(void)state;

	wal_cursor_init(&c, bad_type, sizeof(bad_type), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), -EUCLEAN);
	wal_cursor_init(&c, bad_klen, sizeof(bad_klen), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), -EUCLEAN);
	wal_cursor_init(&c, short_batch, sizeof(short_batch), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), -EUCLEAN);
	wal_cursor_init(&c, trailing, sizeof(trailing), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), -EUCLEAN);
	wal_cursor_init(&c, bad_varint, sizeof(bad_varint), 1);
	assert_int_equal(wal_op_next(&c, &t, &k, &kn, &v, &vn), -EUCLEAN);
}

static void test_names_and_desc(void **state)
{
	char n1[FMT_NAME_MAX], n2[FMT_NAME_MAX];
	uint64_t v;
	struct blob_desc d;
	uint8_t desc[BLOB_DESC_FIXED + 16];
	struct blob_desc w = {.epoch = 1,
	                      .position = 2,
	                      .offset = 32,
	                      .blob_len = 3 * BLOB_BLOCK_SIZE,
	                      .start = BLOB_BLOCK_SIZE - 10,
	                      .length = 20,
	                      .hashes = (const uint8_t *)"AAAAAAAABBBBBBBB"};
	(void)state;

	fmt_wal_name(n1, 9);
	fmt_wal_name(n2, 10);
	assert_string_equal(n1, "wal/00000000000000000009");
	assert_true(strcmp(n1, n2) < 0); /* byte order = numeric order */
	assert_int_equal(fmt_parse_wal_name(n2, &v), 0);
	assert_int_equal(v, 10);
	fmt_wal_name(n1, UINT64_MAX);
	assert_int_equal(fmt_parse_wal_name(n1, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(fmt_parse_wal_name("wal/123", &v), -EINVAL);
	assert_int_equal(fmt_parse_wal_name("wal/0000000000000000000x", &v), -EINVAL);
	assert_int_equal(fmt_parse_wal_name("wal/99999999999999999999", &v), -EINVAL);
	fmt_manifest_name(n1, 3);
	assert_string_equal(n1, "manifest/00000000000000000003");
	fmt_pack_name(n1, 2, 5);
	assert_string_equal(n1, "pack/00000000000000000002-00000000000000000005");
	memset(desc, 0, sizeof(desc));
	assert_int_equal(blob_desc_decode(desc, BLOB_DESC_FIXED, &d), -EUCLEAN); /* kind 0 */
	desc[0] = BLOB_DESC_KIND_V1;
	assert_int_equal(blob_desc_decode(desc, 41, &d), -EPROTONOSUPPORT); /* the old format */
	desc[0] = BLOB_DESC_KIND;
	assert_int_equal(blob_desc_decode(desc, BLOB_DESC_FIXED - 1, &d), -EUCLEAN);
	assert_int_equal(blob_desc_decode(desc, BLOB_DESC_FIXED, &d), 0); /* an empty value */
	/* a range across a block boundary carries two hashes; a slice keeps its own */
	assert_int_equal(blob_desc_size(&w), sizeof(desc));
	blob_desc_encode(desc, &w);
	assert_int_equal(blob_desc_decode(desc, sizeof(desc) - 8, &d), -EUCLEAN);
	assert_int_equal(blob_desc_decode(desc, sizeof(desc), &d), 0);
	assert_int_equal(d.start, BLOB_BLOCK_SIZE - 10);
	assert_int_equal(blob_desc_nblocks(&d), 2);
	struct blob_desc s;
	blob_desc_slice(&d, 12, 5, &s);
	assert_int_equal(blob_desc_nblocks(&s), 1);
	assert_memory_equal(s.hashes, "BBBBBBBB", 8);
	blob_desc_slice(&d, 0, 10, &s);
	assert_memory_equal(s.hashes, "AAAAAAAA", 8);
	uint64_t from, to;
	blob_desc_blocks(&d, 0, 20, &from, &to);
	assert_int_equal(from, 0);
	assert_int_equal(to, 2 * BLOB_BLOCK_SIZE);
	put_be64(desc + BLOB_OFF_START, 3 * BLOB_BLOCK_SIZE); /* past the blob */
	assert_int_equal(blob_desc_decode(desc, sizeof(desc), &d), -EUCLEAN);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip),
	    cmocka_unit_test(test_truncated_and_bad_length),
	    cmocka_unit_test(test_checksums_magic_version),
	    cmocka_unit_test(test_fence_entry),
	    cmocka_unit_test(test_malformed_body),
	    cmocka_unit_test(test_names_and_desc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
