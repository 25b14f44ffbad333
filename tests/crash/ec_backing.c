/*
 * ec_backing.c - backing locations of the engine's hard tests
 * (engine_check.h): a fresh temporary directory, or a fresh key prefix of
 * the S3 test bucket; any number of store handles on one; removal after.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine_check.h"
#include "store.h"
#include "testutil.h"

/* ------------------------------------------------------------------ */
/* Backing locations                                                   */
/* ------------------------------------------------------------------ */

bool ec_have_s3(void)
{
	const char *e = getenv("S3_ENDPOINT");

	return e && *e;
}

int ec_backing_new(enum ec_kind kind, const char *tag, struct ec_backing *b)
{
	memset(b, 0, sizeof(*b));
	b->kind = kind;
	if (kind == EC_S3) {
		if (!ec_have_s3())
			return 77;
		snprintf(b->prefix, sizeof(b->prefix), "h8-%d-%s-%08x/", (int)getpid(), tag,
		         (unsigned)(ec_mix((uint64_t)time(NULL) ^ (uint64_t)clock()) & 0xffffffff));
		return 0;
	}
	const char *tmp = getenv("TMPDIR");

	snprintf(b->dir, sizeof(b->dir), "%s/mwtest-h8-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
	if (!mkdtemp(b->dir))
		return -errno;
	return 0;
}

/*
 * The S3 kind: defined for real in tests/s3/ec_s3.c, which only the s3
 * suite links (so that the other suites build without the S3 backend).
 */
__attribute__((weak)) int ec_open_s3(const char *prefix, struct store **out)
{
	(void)prefix;
	(void)out;
	return -ENOTSUP;
}

int ec_backing_open(const struct ec_backing *b, struct store **out)
{
	if (b->kind == EC_LOCAL)
		return store_open_local(b->dir, out);
	return ec_open_s3(b->prefix, out);
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

void ec_backing_destroy(struct ec_backing *b)
{
	if (b->kind == EC_LOCAL) {
		if (b->dir[0] && !getenv("EC_KEEP"))
			nftw(b->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	struct store *st = NULL;
	struct tu_keys l = {0};

	if (ec_backing_open(b, &st))
		return;
	if (!store_list(st, "", NULL, 0, tu_keys_add, &l) && l.n)
		store_delete_many(st, (const char *const *)l.keys, l.n);
	tu_keys_free(&l);
	store_cleanup_uploads(st, "", 0, NULL);
	store_close(st);
}
