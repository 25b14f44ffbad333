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

	snprintf(b->dir, sizeof(b->dir), "%s/mwtest-h8-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp",
		 tag);
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

struct keylist {
	char **k;   /* keys */
	size_t n;   /* used */
	size_t cap; /* allocated */
};

static int keylist_add(void *arg, const char *key, uint64_t size)
{
	struct keylist *l = arg;

	(void)size;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		char **nk = realloc(l->k, nc * sizeof(*nk));

		if (!nk)
			return -ENOMEM;
		l->k = nk;
		l->cap = nc;
	}
	l->k[l->n] = strdup(key);
	if (!l->k[l->n])
		return -ENOMEM;
	l->n++;
	return 0;
}

static void keylist_free(struct keylist *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->k[i]);
	free(l->k);
	memset(l, 0, sizeof(*l));
}

void ec_backing_destroy(struct ec_backing *b)
{
	if (b->kind == EC_LOCAL) {
		if (b->dir[0] && !getenv("EC_KEEP"))
			nftw(b->dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	struct store *st = NULL;
	struct keylist l = { 0 };

	if (ec_backing_open(b, &st))
		return;
	if (!store_list(st, "", NULL, 0, keylist_add, &l) && l.n)
		store_delete_many(st, (const char *const *)l.k, l.n);
	keylist_free(&l);
	store_cleanup_uploads(st, "", 0, NULL);
	store_close(st);
}
