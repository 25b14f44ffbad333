/*
 * test_manifest.c - manifests (engine/format/manifest.c): encode/decode with SSTs
 * and GC records, corruption, discovery with and without the hint (stale,
 * missing, corrupt), conditional commit and epoch-claim races, claim nonces.
 */
#include <errno.h>
#include <pthread.h>
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
#include "manifest.h"
#include "store.h"

static char g_dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(g_dir, sizeof(g_dir), "/tmp/test_manifest.XXXXXX");
	assert_non_null(mkdtemp(g_dir));
	return 0;
}

static int teardown(void **state)
{
	char cmd[96];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", g_dir);
	assert_int_equal(system(cmd), 0);
	return 0;
}

static void make(struct manifest *m)
{
	memset(m, 0, sizeof(*m));
	m->version = 12;
	m->epoch = 3;
	m->wal_covered = 77;
	m->last_seq = 123456;
	m->next_sst = 9;
	m->nssts = 2;
	m->ssts = calloc(2, sizeof(*m->ssts));
	for (int i = 0; i < 2; i++) {
		struct manifest_sst *s = &m->ssts[i];
		s->name = strdup(i ? "sst/00000000000000000008" : "sst/00000000000000000007");
		s->id = 7 + (uint64_t)i;
		s->size = 1000000 + (uint64_t)i;
		s->level = (uint32_t)i;
		s->smallest = (uint8_t *)strdup("aaa");
		s->smallest_len = 3;
		s->largest = (uint8_t *)strdup("zzzz");
		s->largest_len = 4;
		s->seq_min = 10;
		s->seq_max = 20 + (uint64_t)i;
	}
	m->ngc = 1;
	m->gc = calloc(1, sizeof(*m->gc));
	m->gc[0].name = strdup("pack/00000000000000000001-00000000000000000002");
	m->gc[0].since_version = 11;
}

static void test_roundtrip_and_corruption(void **state)
{
	struct manifest m, d, c;
	struct mw_buf b = {0};
	(void)state;

	make(&m);
	assert_int_equal(manifest_encode(&m, &b), 0);
	assert_int_equal(get_be32(b.p), MANIFEST_MAGIC);
	assert_int_equal(manifest_decode("manifest/x", b.p, b.len, &d), 0);
	assert_int_equal(d.version, 12);
	assert_int_equal(d.epoch, 3);
	assert_int_equal(d.wal_covered, 77);
	assert_int_equal(d.last_seq, 123456);
	assert_int_equal(d.next_sst, 9);
	assert_int_equal(d.nssts, 2);
	assert_string_equal(d.ssts[1].name, "sst/00000000000000000008");
	assert_int_equal(d.ssts[1].level, 1);
	assert_int_equal(d.ssts[1].size, 1000001);
	assert_int_equal(d.ssts[1].seq_max, 21);
	assert_memory_equal(d.ssts[0].largest, "zzzz", 4);
	assert_int_equal(d.ngc, 1);
	assert_int_equal(d.gc[0].since_version, 11);
	assert_string_equal(d.gc[0].name, m.gc[0].name);
	assert_int_equal(manifest_copy(&c, &d), 0);
	assert_string_equal(c.ssts[0].name, d.ssts[0].name);
	manifest_clear(&c);
	manifest_clear(&d);
	for (size_t i = 0; i < b.len; i++) {
		b.p[i] ^= 0x04;
		assert_int_equal(manifest_decode("manifest/x", b.p, b.len, &d), -EUCLEAN);
		b.p[i] ^= 0x04;
	}
	for (size_t n = 0; n < b.len; n += 7)
		assert_int_equal(manifest_decode("manifest/x", b.p, n, &d), -EUCLEAN);
	put_be16(b.p + MAN_OFF_VERSION, MANIFEST_VERSION + 1);
	put_be64(b.p + MAN_OFF_HEAD_HASH, fmt_hash(b.p, MAN_OFF_HEAD_HASH));
	assert_int_equal(manifest_decode("manifest/x", b.p, b.len, &d), -EPROTONOSUPPORT);
	mw_buf_free(&b);
	manifest_clear(&m);
	manifest_clear(&m); /* twice is fine */
}

static void test_discovery(void **state)
{
	struct store *st;
	struct manifest m = {0}, l;
	uint64_t v;
	(void)state;

	assert_int_equal(store_open_local(g_dir, &st), 0);
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(manifest_load_latest(st, &l), 0);
	assert_int_equal(l.version, 0);
	for (uint64_t i = 1; i <= 12; i++) {
		m.version = i;
		m.epoch = i;
		assert_int_equal(manifest_commit(st, &m, true), 0);
	}
	assert_int_equal(manifest_commit(st, &m, true), -EEXIST); /* version 12 taken */
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 12);
	/* a stale hint (crash before the hint write): listing goes past it */
	uint8_t h[HINT_SIZE];
	put_be32(h + HINT_OFF_MAGIC, HINT_MAGIC);
	put_be16(h + HINT_OFF_VERSION, HINT_VERSION);
	put_be16(h + HINT_OFF_FLAGS, 0);
	put_be64(h + HINT_OFF_MVERSION, 5);
	put_be64(h + HINT_OFF_HASH, fmt_hash(h, HINT_OFF_HASH));
	assert_int_equal(store_put(st, FMT_HINT_KEY, h, sizeof(h)), 0);
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 12);
	/* a hint pointing past the end (older manifests deleted, hint wrong) */
	put_be64(h + HINT_OFF_MVERSION, 40);
	put_be64(h + HINT_OFF_HASH, fmt_hash(h, HINT_OFF_HASH));
	assert_int_equal(store_put(st, FMT_HINT_KEY, h, sizeof(h)), 0);
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 12);
	/* a corrupt hint */
	assert_int_equal(store_put(st, FMT_HINT_KEY, "junk", 4), 0);
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 12);
	/* no hint */
	assert_int_equal(store_delete(st, FMT_HINT_KEY), 0);
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 12);
	assert_int_equal(manifest_load_latest(st, &l), 0);
	assert_int_equal(l.version, 12);
	assert_int_equal(l.epoch, 12);
	manifest_clear(&l);
	/* a corrupt latest manifest is an error, not silently skipped */
	assert_int_equal(store_put(st, "manifest/00000000000000000013", "bad", 3), 0);
	assert_int_equal(manifest_load_latest(st, &l), -EUCLEAN);
	store_close(st);
}

struct claim_ctx {
	struct store *st;
	uint64_t epoch;
	int rc;
};

static void *claimer(void *arg)
{
	struct claim_ctx *c = arg;
	struct manifest m;
	c->rc = manifest_claim(c->st, true, &m);
	if (c->rc == 0) {
		c->epoch = m.epoch;
		manifest_clear(&m);
	}
	return NULL;
}

/*
 * The writer's commit over a version already taken: its own bytes are this
 * commit; another manifest of its epoch (an earlier attempt that landed
 * late) is skipped to the next version; a newer epoch is -EEXIST.
 */
static void test_commit_ours(void **state)
{
	struct store *st;
	struct manifest m = {0}, l;
	(void)state;

	assert_int_equal(store_open_local(g_dir, &st), 0);
	m.version = 1;
	m.epoch = 3;
	m.wal_covered = 10;
	assert_int_equal(manifest_commit(st, &m, true), 0);
	/* the same bytes again (our retried put): success at the same version */
	assert_int_equal(manifest_commit_ours(st, &m, true), 0);
	assert_int_equal(m.version, 1);
	/* an earlier attempt of epoch 3 holds version 1: ours goes to version 2 */
	m.wal_covered = 20;
	assert_int_equal(manifest_commit_ours(st, &m, true), 0);
	assert_int_equal(m.version, 2);
	assert_int_equal(manifest_load_latest(st, &l), 0);
	assert_int_equal(l.version, 2);
	assert_int_equal(l.wal_covered, 20);
	manifest_clear(&l);
	/* a newer writer (epoch 4) at version 3: fenced, nothing written */
	struct manifest n = {.version = 3, .epoch = 4};
	assert_int_equal(manifest_commit(st, &n, true), 0);
	m.version = 3;
	assert_int_equal(manifest_commit_ours(st, &m, true), -EEXIST);
	assert_int_equal(m.version, 3);
	assert_int_equal(manifest_load_latest(st, &l), 0);
	assert_int_equal(l.epoch, 4);
	manifest_clear(&l);
	store_close(st);
}

static void test_claim_race(void **state)
{
	struct store *st;
	struct claim_ctx c[6];
	pthread_t th[6];
	bool seen[16] = {false};
	uint64_t v;
	(void)state;

	assert_int_equal(store_open_local(g_dir, &st), 0);
	for (int i = 0; i < 6; i++) {
		c[i] = (struct claim_ctx){.st = st};
		assert_int_equal(pthread_create(&th[i], NULL, claimer, &c[i]), 0);
	}
	for (int i = 0; i < 6; i++)
		pthread_join(th[i], NULL);
	/* every claimer got its own epoch (1..6), none shared */
	for (int i = 0; i < 6; i++) {
		assert_int_equal(c[i].rc, 0);
		assert_true(c[i].epoch >= 1 && c[i].epoch <= 6);
		assert_false(seen[c[i].epoch]);
		seen[c[i].epoch] = true;
	}
	assert_int_equal(manifest_find_latest(st, &v), 0);
	assert_int_equal(v, 6);
	store_close(st);
}

/*
 * Two claims from the same version (the second after the first's object is
 * gone, as if it had raced the first) get the same epoch but different
 * bytes, so comparing bytes can never hand one epoch to two writers; the
 * nonce round-trips and later versions keep it.
 */
static void test_claim_bytes_unique(void **state)
{
	struct store *st;
	struct manifest a, b, d;
	void *ba = NULL, *bb = NULL;
	size_t na = 0, nb = 0;
	(void)state;

	assert_int_equal(store_open_local(g_dir, &st), 0);
	assert_int_equal(manifest_claim(st, true, &a), 0);
	assert_int_equal(a.version, 1);
	assert_int_equal(store_get(st, "manifest/00000000000000000001", 0, STORE_TO_END, &ba, &na),
	                 0);
	assert_int_equal(store_delete(st, "manifest/00000000000000000001"), 0);
	assert_int_equal(manifest_claim(st, true, &b), 0);
	assert_int_equal(b.version, 1);
	assert_int_equal(b.epoch, a.epoch);
	assert_int_equal(store_get(st, "manifest/00000000000000000001", 0, STORE_TO_END, &bb, &nb),
	                 0);
	assert_int_equal(na, nb);
	assert_true(a.claim != b.claim); /* 2^-32 to collide */
	assert_true(memcmp(ba, bb, na) != 0);
	assert_int_equal(manifest_load(st, 1, &d), 0);
	assert_int_equal(d.claim, b.claim);
	manifest_clear(&d);
	/* a later version copies the claim */
	b.version = 2;
	assert_int_equal(manifest_commit(st, &b, true), 0);
	assert_int_equal(manifest_load(st, 2, &d), 0);
	assert_int_equal(d.claim, b.claim);
	manifest_clear(&d);
	free(ba);
	free(bb);
	manifest_clear(&a);
	manifest_clear(&b);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_and_corruption),
	    cmocka_unit_test_setup_teardown(test_discovery, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_commit_ours, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim_race, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_claim_bytes_unique, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
