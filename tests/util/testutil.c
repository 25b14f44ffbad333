/*
 * testutil.c - shared test helpers (see testutil.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* ------------------------------------------------------------------------
 * Temp dirs
 */

static pthread_mutex_t tmp_mu = PTHREAD_MUTEX_INITIALIZER;
static char **tmp_dirs; /* protected by tmp_mu */
static size_t tmp_n;    /* protected by tmp_mu */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		return rmdir(path) < 0 && errno != ENOENT ? -1 : 0;
	return unlink(path) < 0 && errno != ENOENT ? -1 : 0;
}

int tu_rmtree(const char *path)
{
	if (access(path, F_OK) < 0)
		return 0;
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0)
		return -errno;
	return 0;
}

static void tmp_cleanup(void)
{
	pthread_mutex_lock(&tmp_mu);
	for (size_t i = 0; i < tmp_n; i++) {
		if (!getenv("MEMWALFS_KEEP_TMP"))
			tu_rmtree(tmp_dirs[i]);
		free(tmp_dirs[i]);
	}
	free(tmp_dirs);
	tmp_dirs = NULL;
	tmp_n = 0;
	pthread_mutex_unlock(&tmp_mu);
}

char *tu_tempdir(void)
{
	static bool registered;
	const char *base = getenv("TMPDIR");
	char *path, **nd;

	if (!base || !*base)
		base = "/tmp";
	if (asprintf(&path, "%s/memwalfs-test-XXXXXX", base) < 0)
		return NULL;
	if (!mkdtemp(path)) {
		fprintf(stderr, "tu_tempdir: mkdtemp %s: %s\n", path, strerror(errno));
		free(path);
		return NULL;
	}
	pthread_mutex_lock(&tmp_mu);
	if (!registered) {
		atexit(tmp_cleanup);
		registered = true;
	}
	nd = realloc(tmp_dirs, (tmp_n + 1) * sizeof(*nd));
	if (nd) {
		tmp_dirs = nd;
		tmp_dirs[tmp_n] = strdup(path);
		if (tmp_dirs[tmp_n])
			tmp_n++;
	}
	pthread_mutex_unlock(&tmp_mu);
	return path;
}

/* ------------------------------------------------------------------------
 * Random bytes, seeds, clocks
 */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void tu_random_bytes(void *buf, size_t len, uint64_t seed)
{
	uint8_t *p = buf;
	uint64_t st = seed;
	size_t i = 0;

	for (; i + 8 <= len; i += 8) {
		uint64_t v = splitmix(&st);
		memcpy(p + i, &v, 8);
	}
	if (i < len) {
		uint64_t v = splitmix(&st);
		memcpy(p + i, &v, len - i);
	}
}

uint64_t tu_seed(const char *name)
{
	const char *env = getenv("MEMWALFS_SEED");
	uint64_t seed;

	if (env && *env)
		seed = strtoull(env, NULL, 0);
	else
		seed = tu_now_ns() ^ ((uint64_t)getpid() << 32);
	fprintf(stderr, "%s: seed %" PRIu64 " (replay with MEMWALFS_SEED=%" PRIu64 ")\n",
	        name ? name : "test", seed, seed);
	return seed;
}

uint64_t tu_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double tu_now_sec(void)
{
	return (double)tu_now_ns() / 1e9;
}

/* ------------------------------------------------------------------------
 * Stores
 */

bool tu_have_s3(void)
{
	const char *e = getenv("S3_ENDPOINT");
	return e && *e;
}

const char *tu_kind_arg(int argc, char **argv, const char *dflt)
{
	struct tu_store *probe = NULL;
	int rc;

	if (argc < 2 || strcmp(argv[1], "s3"))
		return dflt;
	rc = tu_have_s3() ? tu_store_open("s3", &probe) : TU_SKIP;
	tu_store_close(probe);
	if (rc) {
		fprintf(stderr, "S3 store unavailable (%d): SKIP\n", rc);
		exit(TU_SKIP);
	}
	return "s3";
}

void tu_require_fuse(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "SKIP: /dev/fuse unavailable: %s\n", strerror(errno));
		exit(TU_SKIP);
	}
	close(fd);
}

void tu_s3_opts(struct s3_opts *o, const char *prefix)
{
	const char *bucket = getenv("S3_BUCKET"), *region = getenv("S3_REGION");

	s3_opts_default(o);
	o->endpoint = getenv("S3_ENDPOINT");
	o->bucket = bucket && *bucket ? bucket : "memwalfs-test";
	o->region = region && *region ? region : "us-east-1";
	o->access_key = getenv("AWS_ACCESS_KEY_ID");
	o->secret_key = getenv("AWS_SECRET_ACCESS_KEY");
	o->prefix = prefix;
	o->path_style = true;
}

static int open_s3(struct tu_store *t)
{
	struct s3_opts o;

	tu_s3_opts(&o, t->prefix);
	return store_open_s3(&o, &t->store);
}

/* The parent's own keys around the view (testutil.h, TU_SUB_PREFIX), in byte order. */
static const char *const sub_outside[] = {"a",    "r/6/x", "r/7-",   "r/70/x",
                                          "r/7x", "r/8/x", "z/r/7/x"};
#define NSUB_OUTSIDE (sizeof(sub_outside) / sizeof(sub_outside[0]))

/* Kinds "sub-*": the parent (t->store on entry), its keys outside, the view on it. */
static int open_sub(struct tu_store *t)
{
	int rc = 0;

	t->parent = t->store;
	t->store = NULL;
	for (size_t i = 0; i < NSUB_OUTSIDE && rc == 0; i++)
		rc = store_put(t->parent, sub_outside[i], sub_outside[i], strlen(sub_outside[i]));
	if (rc == 0)
		rc = store_open_sub(t->parent, TU_SUB_PREFIX, &t->store);
	if (rc < 0) {
		store_close(t->parent);
		t->parent = NULL;
	}
	return rc;
}

static int open_kind(struct tu_store *t)
{
	struct store *local = NULL;
	int rc;

	if (!strcmp(t->kind, "s3"))
		return open_s3(t);
	if (!strcmp(t->kind, "sub-s3")) {
		rc = open_s3(t);
		return rc < 0 ? rc : open_sub(t);
	}
	rc = store_open_local(t->dir, &local);
	if (rc < 0)
		return rc;
	if (!strcmp(t->kind, "local")) {
		t->store = local;
		return 0;
	}
	if (!strcmp(t->kind, "sub-local")) {
		t->store = local;
		return open_sub(t);
	}
	rc = fault_store_new(local, &t->fault);
	if (rc < 0) {
		store_close(local);
		return rc;
	}
	t->store = fault_store_as_store(t->fault);
	return 0;
}

int tu_store_open(const char *kind, struct tu_store **out)
{
	static const char *const kinds[] = {"local", "fault", "s3", "sub-local", "sub-s3"};
	const char *k = NULL; /* t->kind: a static string */
	struct tu_store *t;
	bool s3;
	int rc;

	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (!strcmp(kind, kinds[i]))
			k = kinds[i];
	if (!k)
		return -EINVAL;
	kind = k;
	s3 = !strcmp(kind, "s3") || !strcmp(kind, "sub-s3");
	if (s3 && !tu_have_s3()) {
		fprintf(stderr, "SKIP: S3_ENDPOINT is not set\n");
		return TU_SKIP;
	}
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->kind = kind;
	if (s3) {
		uint64_t r = tu_now_ns() ^ ((uint64_t)getpid() << 20);
		uint64_t st = r;
		if (asprintf(&t->prefix, "memwalfs-test-%d-%016" PRIx64 "/", (int)getpid(),
		             splitmix(&st)) < 0)
			t->prefix = NULL;
		rc = t->prefix ? 0 : -ENOMEM;
	} else {
		t->dir = tu_tempdir();
		rc = t->dir ? 0 : -EIO;
	}
	if (rc == 0)
		rc = open_kind(t);
	if (rc != 0) {
		free(t->dir);
		free(t->prefix);
		free(t);
		return rc;
	}
	*out = t;
	return 0;
}

int tu_store_reopen(struct tu_store *t)
{
	store_close(t->store);
	store_close(t->parent);
	t->store = NULL;
	t->parent = NULL;
	t->fault = NULL;
	return open_kind(t);
}

void tu_store_close(struct tu_store *t)
{
	if (!t)
		return;
	if (t->store && t->prefix) {
		/* S3: the store's own prefix is ours; wipe through the inner store or parent */
		struct store *s = t->parent  ? t->parent
		                  : t->fault ? fault_store_inner(t->fault)
		                             : t->store;
		unsigned n;
		store_cleanup_uploads(s, "", 0, &n);
		tu_wipe_prefix(s, "");
	}
	store_close(t->store);
	store_close(t->parent);
	if (t->dir && !getenv("MEMWALFS_KEEP_TMP"))
		tu_rmtree(t->dir);
	free(t->dir);
	free(t->prefix);
	free(t);
}

int tu_sub_check_outside(const struct tu_store *t)
{
	struct tu_keys l = {0};
	size_t j = 0;
	int bad = 0, rc;

	if (!t->parent)
		return 0;
	rc = store_list(t->parent, "", NULL, 0, tu_keys_add, &l);
	if (rc < 0) {
		fprintf(stderr, "tu_sub_check_outside: list: %s\n", strerror(-rc));
		tu_keys_free(&l);
		return -1;
	}
	for (size_t i = 0; i < l.n; i++) {
		const char *k = l.keys[i];
		void *b = NULL;
		size_t n = 0;

		if (!strncmp(k, TU_SUB_PREFIX, strlen(TU_SUB_PREFIX)))
			continue; /* the view's */
		if (j >= NSUB_OUTSIDE || strcmp(k, sub_outside[j])) {
			fprintf(stderr, "tu_sub_check_outside: unexpected key %s in the parent\n",
			        k);
			bad = -1;
			continue;
		}
		j++;
		rc = store_get(t->parent, k, 0, STORE_TO_END, &b, &n);
		if (rc < 0 || n != strlen(k) || memcmp(b, k, n)) {
			fprintf(stderr, "tu_sub_check_outside: %s: rc %d, %zu bytes\n", k, rc, n);
			bad = -1;
		}
		free(b);
	}
	if (j != NSUB_OUTSIDE) {
		fprintf(stderr, "tu_sub_check_outside: %zu of %zu keys outside the view left\n", j,
		        NSUB_OUTSIDE);
		bad = -1;
	}
	tu_keys_free(&l);
	return bad;
}

int tu_keys_add(void *arg, const char *key, uint64_t size)
{
	struct tu_keys *l = arg;
	if (l->n == l->cap) {
		size_t nc = l->cap ? l->cap * 2 : 64;
		char **nk = realloc(l->keys, nc * sizeof(*nk));
		if (!nk)
			return -ENOMEM;
		l->keys = nk;
		uint64_t *ns = realloc(l->sizes, nc * sizeof(*ns));
		if (!ns)
			return -ENOMEM;
		l->sizes = ns;
		l->cap = nc;
	}
	l->keys[l->n] = strdup(key);
	if (!l->keys[l->n])
		return -ENOMEM;
	l->sizes[l->n] = size;
	l->n++;
	if (l->stop_after && l->n == l->stop_after)
		return l->stop_code;
	return 0;
}

void tu_keys_free(struct tu_keys *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->keys[i]);
	free(l->keys);
	free(l->sizes);
	memset(l, 0, sizeof(*l));
}

int tu_wipe_prefix(struct store *s, const char *prefix)
{
	struct tu_keys v = {0};
	int rc = store_list(s, prefix, NULL, 0, tu_keys_add, &v);

	if (rc == 0 && v.n)
		rc = store_delete_many(s, (const char *const *)v.keys, v.n);
	tu_keys_free(&v);
	if (rc < 0)
		fprintf(stderr, "tu_wipe_prefix %s: %s\n", prefix, strerror(-rc));
	return rc;
}

static int count_one(void *arg, const char *key, uint64_t size)
{
	(void)key;
	(void)size;
	(*(long *)arg)++;
	return 0;
}

long tu_count_keys(struct store *s, const char *prefix)
{
	long n = 0;
	int rc = store_list(s, prefix, NULL, 0, count_one, &n);
	return rc < 0 ? rc : n;
}

static int usage_one(void *arg, const char *key, uint64_t size)
{
	struct tu_usage *u = arg;

	(void)key;
	u->bytes += size;
	u->objects++;
	return 0;
}

struct tu_usage tu_store_usage(struct store *s, const char *prefix)
{
	struct tu_usage u = {0, 0, 0};

	u.rc = store_list(s, prefix, NULL, 0, usage_one, &u);
	if (u.rc < 0)
		u.bytes = u.objects = 0;
	return u;
}

int tu_capture_stderr(char *buf, size_t bufsz, int (*fn)(void *), void *arg)
{
	char path[] = "/tmp/memwalfs-test-log-XXXXXX";
	int fd = mkstemp(path), saved = fd >= 0 ? dup(2) : -1, rc;
	ssize_t n = 0;

	buf[0] = '\0';
	if (fd < 0 || saved < 0) {
		if (fd >= 0)
			close(fd);
		return fn(arg);
	}
	unlink(path);
	fflush(stderr);
	dup2(fd, 2);
	rc = fn(arg);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	n = pread(fd, buf, bufsz - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	close(fd);
	fputs(buf, stderr); /* keep it in the test log */
	return rc;
}
