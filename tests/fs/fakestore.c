/*
 * fakestore.c - make a memwalfs store look as if a newer memwalfs had
 * written it, for tests/fs/badinput.sh (a mount must refuse such a store
 * and leave every object as it was).
 *
 *   fakestore [--endpoint URL] [--region R] KIND STORE
 *
 * STORE is a formatted store that was cleanly unmounted (a local directory
 * or s3://bucket/prefix; S3 credentials from the environment).  KIND:
 *
 *   wal       add a WAL entry of format version WAL_VERSION + 1 at the WAL
 *             tip, where the next open replays it (checksums correct);
 *   manifest  add manifest N+1, a copy of the latest one with format version
 *             MANIFEST_VERSION + 1 (checksums correct);
 *   fs        rewrite the filesystem superblock with format version
 *             SCHEMA_VERSION + 1 through the engine (a normal writer open,
 *             put, clean close);
 *   fs-old    the same with SCHEMA_VERSION - 1 (a store of the old format).
 *
 * Exit status 0, or 1 with a message.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"
#include "engine.h"
#include "format.h"
#include "manifest.h"
#include "schema.h"
#include "store.h"
#include "wal.h"

static int fail(const char *what, int rc)
{
	fprintf(stderr, "fakestore: %s: %s\n", what, strerror(-rc));
	return 1;
}

/* A WAL entry with a newer version at the first free position from the covered one. */
static int fake_wal(struct store *st)
{
	struct manifest m = {0};
	struct mw_buf b = {0};
	char name[FMT_NAME_MAX];
	int rc = manifest_load_latest(st, &m);

	if (rc || m.version == 0)
		return fail("loading the manifest", rc ? rc : -ENOENT);
	for (uint64_t pos = m.wal_covered;; pos++) {
		struct wal_info info = {
		    .epoch = m.epoch, .position = pos, .first_seq = m.last_seq + 1};
		b.len = 0;
		if ((rc = wal_entry_begin(&b)))
			break;
		wal_entry_seal(&b, &info);
		put_be16(b.p + WAL_OFF_VERSION, WAL_VERSION + 1);
		put_be64(b.p + WAL_OFF_HEAD_HASH, fmt_hash(b.p, WAL_OFF_HEAD_HASH));
		fmt_wal_name(name, pos);
		rc = store_put_if_absent(st, name, b.p, b.len);
		if (rc != -EEXIST)
			break;
	}
	mw_buf_free(&b);
	manifest_clear(&m);
	if (rc)
		return fail("putting the WAL entry", rc);
	printf("%s\n", name);
	return 0;
}

/* Manifest N+1 = manifest N with a newer format version. */
static int fake_manifest(struct store *st)
{
	struct manifest m = {0};
	struct mw_buf b = {0};
	char name[FMT_NAME_MAX];
	int rc = manifest_load_latest(st, &m);

	if (rc || m.version == 0)
		return fail("loading the manifest", rc ? rc : -ENOENT);
	m.version++;
	rc = manifest_encode(&m, &b);
	if (!rc) {
		put_be16(b.p + MAN_OFF_VERSION, MANIFEST_VERSION + 1);
		put_be64(b.p + MAN_OFF_HEAD_HASH, fmt_hash(b.p, MAN_OFF_HEAD_HASH));
		fmt_manifest_name(name, m.version);
		rc = store_put_if_absent(st, name, b.p, b.len);
	}
	mw_buf_free(&b);
	manifest_clear(&m);
	if (rc)
		return fail("putting the manifest", rc);
	printf("%s\n", name);
	return 0;
}

/* The superblock, rewritten with another format version (newer: +1, older: -1). */
static int fake_fs(struct store *st, int delta)
{
	struct engine *e = NULL;
	struct engine_batch *b = NULL;
	struct schema_super sb;
	uint8_t key[8], val[SCHEMA_SUPER_LEN];
	void *old = NULL;
	size_t kn = schema_key_super(key), on = 0;
	int rc = engine_open(st, NULL, &e);

	if (rc)
		return fail("opening the engine", rc);
	rc = engine_get(e, key, kn, &old, &on);
	if (!rc)
		rc = schema_super_decode(old, on, &sb);
	if (!rc) {
		sb.version = (uint32_t)((int)SCHEMA_VERSION + delta);
		schema_super_encode(&sb, val);
		rc = engine_batch_new(&b);
	}
	if (!rc)
		rc = engine_batch_put(b, key, kn, val, sizeof(val));
	if (!rc)
		rc = engine_write(e, b, ENGINE_WAIT | ENGINE_URGENT, NULL);
	engine_batch_free(b);
	free(old);
	int rc2 = engine_close(e);
	if (rc || rc2)
		return fail("rewriting the superblock", rc ? rc : rc2);
	printf("superblock version %u\n", sb.version);
	return 0;
}

int main(int argc, char **argv)
{
	struct s3_opts o;
	struct store *st = NULL;
	int i = 1, status;

	s3_opts_default(&o);
	for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
		if (!strcmp(argv[i], "--endpoint")) {
			o.endpoint = argv[i + 1];
			o.path_style = true;
		} else if (!strcmp(argv[i], "--region")) {
			o.region = argv[i + 1];
		} else {
			break;
		}
	}
	if (argc - i != 2) {
		fprintf(stderr, "usage: fakestore [--endpoint URL] [--region R] "
		                "wal|manifest|fs|fs-old STORE\n");
		return 2;
	}
	int rc = store_open_url_flags(argv[i + 1], &o, STORE_OPEN_EXISTING, &st);
	if (rc)
		return fail(argv[i + 1], rc);
	if (!strcmp(argv[i], "wal"))
		status = fake_wal(st);
	else if (!strcmp(argv[i], "manifest"))
		status = fake_manifest(st);
	else if (!strcmp(argv[i], "fs"))
		status = fake_fs(st, 1);
	else if (!strcmp(argv[i], "fs-old"))
		status = fake_fs(st, -1);
	else
		status = fail(argv[i], -EINVAL);
	store_close(st);
	return status;
}
