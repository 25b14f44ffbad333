/*
 * kvbench.c - the KV benchmark of the MemWAL seed protocol (issue 3), on
 * the public engine.h and store.h API only.
 *
 * Workloads:
 *   kv-int   N rows (default 1,000,000), 8-byte big-endian integer keys,
 *            100-byte values, each write an atomic batch of 1,000 rows;
 *   kv-uuid  the same with random UUID keys (36-character strings);
 *   blob     N rows (default 100,000) of incompressible values whose sizes
 *            follow a lognormal law like web images (mean ~70 KiB), batches
 *            of 64 rows.
 *
 * Window W: W batches in flight, each awaited for durability, by W threads
 * that each write a batch and wait for it.  Modes:
 *   seed     engine_write() without waiting, then engine_wait(ticket, false):
 *            the durable put waits for the cadence-driven commit (100 ms);
 *   fsync    engine_write(ENGINE_WAIT | ENGINE_URGENT): a waiting put commits
 *            at once; puts arriving during an in-flight commit form the next
 *            group (what the filesystem does for fsync(2)).
 *
 * Every (workload, mode, window) runs one discarded warm-up and R measured
 * repetitions (default 3), each on a fresh store location (DIR/run-... or
 * s3://bucket/prefix/run-...), which is deleted afterwards unless --keep.
 * Reported: rows/s (median of the repetitions, and min..max), objects
 * written (listing of the store after close) and PUT/multipart requests
 * (store_get_stats), bytes persisted (sum of listed sizes) against the
 * logical bytes (keys + values), and point-read latency p50/p99 of random
 * loaded rows through engine_get(): first on the still-open engine right
 * after loading (MemTable and caches hot), then again after engine_close()
 * and engine_open() on the same store (what a remount does: cold caches,
 * reads through the SSTables and the replayed WAL tail, blobs by ranged GET
 * from their packs), with the reopen time, the live SSTables and the store
 * GETs per read.  Values carry their row number, and every read is checked.
 *
 * Output: a markdown table on stdout (and appended to --out FILE).
 */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "store.h"

enum workload { W_KV_INT, W_KV_UUID, W_BLOB, W__COUNT };
static const char *const workload_name[W__COUNT] = {"kv-int", "kv-uuid", "blob"};

enum mode { M_SEED, M_FSYNC, M__COUNT };
static const char *const mode_name[M__COUNT] = {"seed", "fsync"};

#define KV_VLEN 100
#define KV_BATCH 1000
#define BLOB_BATCH 64
#define BLOB_MEAN (70.0 * 1024)
#define BLOB_SIGMA 1.0
#define BLOB_MIN 512
#define BLOB_MAX (4u << 20)
#define POOL_BYTES (16u << 20) /* random bytes that values are cut from */

struct cfg {
	const char *url;         /* store URL: directory or s3://bucket/prefix */
	struct s3_opts s3;       /* --endpoint, --region */
	uint64_t rows[W__COUNT]; /* rows per workload */
	bool run_wl[W__COUNT];   /* workloads selected */
	bool run_mode[M__COUNT]; /* modes selected */
	unsigned windows[4];     /* windows to run */
	unsigned nwindows;
	unsigned reps;       /* measured repetitions (plus one warm-up) */
	unsigned reads;      /* point reads after loading */
	unsigned cadence_ms; /* engine cadence */
	const char *out;     /* also append the table here (may be NULL) */
	bool keep;           /* keep the run's objects */
	bool is_s3;
};

static uint8_t *pool; /* POOL_BYTES + BLOB_MAX random bytes */

/* ---- deterministic row contents ----------------------------------------- */

static uint64_t splitmix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t get_be64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* Key of row i; returns its length.  k holds at least 40 bytes. */
static size_t row_key(enum workload w, uint64_t i, uint64_t seed, uint8_t *k)
{
	if (w == W_KV_UUID) {
		static const char hex[] = "0123456789abcdef";
		uint64_t a = splitmix(i ^ seed), b = splitmix(a ^ i);
		uint8_t u[16];
		put_be64(u, a);
		put_be64(u + 8, b);
		u[6] = (uint8_t)((u[6] & 0x0f) | 0x40); /* version 4 */
		u[8] = (uint8_t)((u[8] & 0x3f) | 0x80); /* variant 1 */
		size_t n = 0;
		for (int j = 0; j < 16; j++) {
			if (j == 4 || j == 6 || j == 8 || j == 10)
				k[n++] = '-';
			k[n++] = (uint8_t)hex[u[j] >> 4];
			k[n++] = (uint8_t)hex[u[j] & 15];
		}
		return n;
	}
	put_be64(k, i); /* kv-int and blob rows */
	return 8;
}

/* Lognormal size of blob row i, mean ~BLOB_MEAN before clamping. */
static size_t blob_size(uint64_t i, uint64_t seed)
{
	uint64_t a = splitmix(i ^ seed ^ 0x5bd1e995), b = splitmix(a);
	double u1 = ((a >> 11) + 1.0) / 9007199254740993.0;
	double u2 = (b >> 11) / 9007199254740992.0;
	double z = sqrt(-2.0 * log(u1)) * cos(2 * M_PI * u2);
	double mu = log(BLOB_MEAN) - BLOB_SIGMA * BLOB_SIGMA / 2;
	double s = exp(mu + BLOB_SIGMA * z);
	if (s < BLOB_MIN)
		s = BLOB_MIN;
	if (s > BLOB_MAX)
		s = BLOB_MAX;
	return (size_t)s;
}

/*
 * Value of row i: bytes cut from the random pool at a row-dependent offset,
 * copied into buf (BLOB_MAX bytes), the row number in the first 8 bytes.
 * Returns the length; *p is buf.
 */
static size_t row_value(enum workload w, uint64_t i, uint64_t seed, uint8_t *buf, const uint8_t **p)
{
	size_t n = w == W_BLOB ? blob_size(i, seed) : KV_VLEN;
	size_t off = splitmix(i * 31 + seed) % POOL_BYTES;
	memcpy(buf, pool + off, n);
	put_be64(buf, i);
	*p = buf;
	return n;
}

/* ---- one run --------------------------------------------------------- */

struct result {
	double rows_per_s;
	double load_s;
	uint64_t objects, bytes, put_reqs, mpu_reqs, bytes_sent;
	uint64_t logical;
	uint64_t groups;
	double p50_us, p99_us;           /* reads on the engine that loaded */
	double cold_p50_us, cold_p99_us; /* reads after close + reopen */
	double reopen_s;                 /* engine_open() after close (replay) */
	uint64_t sst_count, replayed;    /* after the reopen: live SSTables, WAL entries replayed */
	uint64_t cold_gets;              /* store GETs issued by the reads after reopen */
	int err;
};

struct loader {
	const struct cfg *c;
	struct engine *e;
	enum workload w;
	enum mode m;
	uint64_t seed;
	uint64_t rows, batch_rows, nbatches;
	atomic_uint_fast64_t next_batch;
	atomic_uint_fast64_t logical;
	atomic_int err;
};

static void *load_thread(void *arg)
{
	struct loader *L = arg;
	struct engine_batch *b = NULL;
	uint8_t key[48];
	uint8_t *vbuf = malloc(BLOB_MAX);
	int rc = vbuf ? engine_batch_new(&b) : -ENOMEM;
	uint64_t logical = 0;

	if (rc)
		goto out;
	for (;;) {
		uint64_t bi = atomic_fetch_add(&L->next_batch, 1);
		if (bi >= L->nbatches || atomic_load(&L->err))
			break;
		engine_batch_clear(b);
		uint64_t end = (bi + 1) * L->batch_rows;
		if (end > L->rows)
			end = L->rows;
		for (uint64_t i = bi * L->batch_rows; i < end; i++) {
			const uint8_t *v;
			size_t kn = row_key(L->w, i, L->seed, key);
			size_t vn = row_value(L->w, i, L->seed, vbuf, &v);
			rc = engine_batch_put(b, key, kn, v, vn);
			if (rc)
				goto out;
			logical += kn + vn;
		}
		if (L->m == M_FSYNC) {
			rc = engine_write(L->e, b, ENGINE_WAIT | ENGINE_URGENT, NULL);
		} else {
			uint64_t t;
			rc = engine_write(L->e, b, 0, &t);
			if (!rc)
				rc = engine_wait(L->e, t, false);
		}
		if (rc)
			goto out;
	}
out:
	if (rc) {
		int z = 0;
		atomic_compare_exchange_strong(&L->err, &z, rc);
	}
	atomic_fetch_add(&L->logical, logical);
	engine_batch_free(b);
	free(vbuf);
	return NULL;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct listing {
	uint64_t n, bytes;
	char **keys; /* collected for deletion when not NULL-collecting */
	size_t cap;
	bool collect;
};

static int list_cb(void *arg, const char *key, uint64_t size)
{
	struct listing *l = arg;
	if (l->collect) {
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 256;
			char **k = realloc(l->keys, cap * sizeof(*k));
			if (!k)
				return -ENOMEM;
			l->keys = k;
			l->cap = cap;
		}
		l->keys[l->n] = strdup(key);
		if (!l->keys[l->n])
			return -ENOMEM;
	}
	l->n++;
	l->bytes += size;
	return 0;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static int rm_cb(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

/* Delete what the run left: local directory tree or the S3 objects. */
static void cleanup(const struct cfg *c, const char *run_url)
{
	if (!c->is_s3) {
		nftw(run_url, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
		return;
	}
	struct store *st;
	struct listing l = {.collect = true};
	if (store_open_url(run_url, &c->s3, &st))
		return;
	if (!store_list(st, "", NULL, 0, list_cb, &l) && l.n)
		store_delete_many(st, (const char *const *)l.keys, l.n);
	for (size_t i = 0; i < l.n; i++)
		free(l.keys[i]);
	free(l.keys);
	store_close(st);
}

/*
 * n point reads of random rows among the first rows loaded with seed, each
 * value checked (length and row number); salt picks the sample.  lat
 * (n entries) is scratch space; *p50 and *p99 receive the latencies in us.
 */
static int read_rows(struct engine *e, enum workload w, uint64_t seed, uint64_t rows, unsigned n,
                     uint64_t salt, double *lat, double *p50, double *p99)
{
	uint8_t key[48];
	int rc = 0;

	for (unsigned j = 0; j < n; j++) {
		uint64_t i = splitmix(j * 7 + seed + salt * 0x100000001ull) % rows;
		size_t kn = row_key(w, i, seed, key);
		void *v = NULL;
		size_t vn = 0;
		double a = now_s();
		rc = engine_get(e, key, kn, &v, &vn);
		lat[j] = (now_s() - a) * 1e6;
		size_t want = w == W_BLOB ? blob_size(i, seed) : KV_VLEN;
		if (!rc && (vn != want || get_be64(v) != i)) {
			fprintf(stderr, "kvbench: row %llu read back wrong (%zu bytes, want %zu)\n",
			        (unsigned long long)i, vn, want);
			rc = -EUCLEAN;
		}
		free(v);
		if (rc) {
			fprintf(stderr, "kvbench: read of row %llu: %s\n", (unsigned long long)i,
			        strerror(-rc));
			return rc;
		}
	}
	*p50 = *p99 = 0;
	if (n) {
		qsort(lat, n, sizeof(*lat), cmp_double);
		*p50 = lat[n / 2];
		*p99 = lat[(size_t)(n * 0.99)];
	}
	return 0;
}

static int run_one(const struct cfg *c, enum workload w, enum mode m, unsigned window,
                   const char *tag, struct result *r)
{
	char run_url[1024];
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o;
	struct store_stats ss;
	struct listing l = {0};
	pthread_t *th = NULL;
	double *lat = NULL;
	int rc;

	memset(r, 0, sizeof(*r));
	snprintf(run_url, sizeof(run_url), "%s/%s", c->url, tag);
	if (!c->is_s3 && mkdir(run_url, 0755) && errno != EEXIST) {
		rc = -errno;
		goto out;
	}
	rc = store_open_url(run_url, &c->s3, &st);
	if (rc)
		goto out;
	engine_opts_default(&o);
	o.cadence_ms = c->cadence_ms;
	rc = engine_open(st, &o, &e);
	if (rc)
		goto out;

	struct loader L = {.c = c, .e = e, .w = w, .m = m, .rows = c->rows[w]};
	L.seed = splitmix((uint64_t)time(NULL) ^ (uint64_t)getpid() << 20 ^ (uintptr_t)tag);
	L.batch_rows = w == W_BLOB ? BLOB_BATCH : KV_BATCH;
	L.nbatches = (L.rows + L.batch_rows - 1) / L.batch_rows;
	th = calloc(window, sizeof(*th));
	if (!th) {
		rc = -ENOMEM;
		goto out;
	}
	double t0 = now_s();
	unsigned started = 0;
	for (; started < window; started++)
		if (pthread_create(&th[started], NULL, load_thread, &L))
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(th[i], NULL);
	r->load_s = now_s() - t0;
	rc = atomic_load(&L.err);
	if (!rc && started < window)
		rc = -EAGAIN;
	if (rc)
		goto out;
	r->rows_per_s = L.rows / r->load_s;
	r->logical = atomic_load(&L.logical);
	rc = engine_sync(e);
	if (rc)
		goto out;

	lat = calloc(c->reads ? c->reads : 1, sizeof(*lat));
	if (!lat) {
		rc = -ENOMEM;
		goto out;
	}
	/* point reads on the still-open engine: the hot MemTable (and caches) */
	rc = read_rows(e, w, L.seed, L.rows, c->reads, 1, lat, &r->p50_us, &r->p99_us);
	if (rc)
		goto out;
	struct engine_stats es;
	engine_get_stats(e, &es);
	r->groups = es.groups_committed;
	rc = engine_close(e);
	e = NULL;
	if (rc)
		goto out;

	/* what the store holds and what was sent, before the reopen adds to it */
	store_get_stats(st, &ss);
	r->put_reqs = ss.requests[STORE_OP_PUT];
	r->mpu_reqs = ss.requests[STORE_OP_MPU];
	r->bytes_sent = ss.bytes_sent;
	rc = store_list(st, "", NULL, 0, list_cb, &l);
	if (rc)
		goto out;
	r->objects = l.n;
	r->bytes = l.bytes;

	/*
	 * Close + reopen (what a remount does): a new engine with cold caches, so
	 * the reads go through the SSTables flushed so far and the WAL tail
	 * replayed into a fresh MemTable; blob values come from the packs by
	 * ranged GET.  Its GETs are counted from the store's counters.
	 */
	double t1 = now_s();
	rc = engine_open(st, &o, &e);
	r->reopen_s = now_s() - t1;
	if (rc)
		goto out;
	engine_get_stats(e, &es);
	r->sst_count = es.sst_count;
	r->replayed = es.replay_entries;
	struct store_stats s0, s1;
	store_get_stats(st, &s0);
	rc = read_rows(e, w, L.seed, L.rows, c->reads, 2, lat, &r->cold_p50_us, &r->cold_p99_us);
	if (rc)
		goto out;
	store_get_stats(st, &s1);
	r->cold_gets = s1.requests[STORE_OP_GET] - s0.requests[STORE_OP_GET];
	rc = engine_close(e);
	e = NULL;
out:
	engine_close(e);
	store_close(st);
	free(th);
	free(lat);
	if (!c->keep)
		cleanup(c, run_url);
	r->err = rc;
	return rc;
}

/* ---- driver ----------------------------------------------------------- */

/* Median of n values (sorts v). */
static double median(double *v, unsigned n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n ? v[n / 2] : 0;
}

static int cmp_result_rate(const void *a, const void *b)
{
	const struct result *x = a, *y = b;
	return x->rows_per_s < y->rows_per_s ? -1 : x->rows_per_s > y->rows_per_s;
}

static void emit(const struct cfg *c, const char *line)
{
	fputs(line, stdout);
	fflush(stdout);
	if (c->out) {
		FILE *f = fopen(c->out, "a");
		if (f) {
			fputs(line, f);
			fclose(f);
		}
	}
}

static void human(double b, char *out, size_t n)
{
	if (b >= 1e9)
		snprintf(out, n, "%.2f GB", b / 1e9);
	else if (b >= 1e6)
		snprintf(out, n, "%.1f MB", b / 1e6);
	else
		snprintf(out, n, "%.1f kB", b / 1e3);
}

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: kvbench [options] STORE_URL\n"
	        "  STORE_URL              a directory (local store) or s3://bucket/prefix\n"
	        "  --endpoint URL         S3 endpoint (e.g. http://127.0.0.1:7480)\n"
	        "  --region R             S3 region (default us-east-1)\n"
	        "  --workload W           kv-int, kv-uuid, blob or all (repeatable; default all)\n"
	        "  --mode M               seed, fsync or both (default both)\n"
	        "  --window N             1, 32, ... (repeatable; default 1 and 32)\n"
	        "  --reps N               measured repetitions (default 3; plus one warm-up)\n"
	        "  --kv-rows N            rows of the kv workloads (default 1000000)\n"
	        "  --blob-rows N          rows of the blob workload (default 100000)\n"
	        "  --quick                100000 kv rows, 2000 blob rows, 1000 reads\n"
	        "  --reads N              point reads after loading (default 10000)\n"
	        "  --cadence MS           group-commit cadence (default 100)\n"
	        "  --out FILE             also append the markdown table to FILE\n"
	        "  --keep                 keep each run's objects\n"
	        "Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.\n");
}

int main(int argc, char **argv)
{
	struct cfg c = {0};
	bool any_wl = false, any_mode = false;
	static const struct option lo[] = {
	    {"endpoint", required_argument, 0, 'e'},
	    {"region", required_argument, 0, 'r'},
	    {"workload", required_argument, 0, 'w'},
	    {"mode", required_argument, 0, 'm'},
	    {"window", required_argument, 0, 'W'},
	    {"reps", required_argument, 0, 'n'},
	    {"kv-rows", required_argument, 0, 'k'},
	    {"blob-rows", required_argument, 0, 'b'},
	    {"quick", no_argument, 0, 'q'},
	    {"reads", required_argument, 0, 'R'},
	    {"cadence", required_argument, 0, 'c'},
	    {"out", required_argument, 0, 'o'},
	    {"keep", no_argument, 0, 'K'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	int opt;

	s3_opts_default(&c.s3);
	c.rows[W_KV_INT] = c.rows[W_KV_UUID] = 1000000;
	c.rows[W_BLOB] = 100000;
	c.reps = 3;
	c.reads = 10000;
	c.cadence_ms = 100;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case 'e':
			c.s3.endpoint = optarg;
			c.s3.path_style = true;
			break;
		case 'r':
			c.s3.region = optarg;
			break;
		case 'w':
			any_wl = true;
			for (int i = 0; i < W__COUNT; i++)
				if (!strcmp(optarg, "all") || !strcmp(optarg, workload_name[i]))
					c.run_wl[i] = true;
			break;
		case 'm':
			any_mode = true;
			for (int i = 0; i < M__COUNT; i++)
				if (!strcmp(optarg, "both") || !strcmp(optarg, mode_name[i]))
					c.run_mode[i] = true;
			break;
		case 'W':
			if (c.nwindows < 4 && atoi(optarg) > 0)
				c.windows[c.nwindows++] = (unsigned)atoi(optarg);
			break;
		case 'n':
			c.reps = (unsigned)atoi(optarg);
			break;
		case 'k':
			c.rows[W_KV_INT] = c.rows[W_KV_UUID] = strtoull(optarg, NULL, 10);
			break;
		case 'b':
			c.rows[W_BLOB] = strtoull(optarg, NULL, 10);
			break;
		case 'q':
			c.rows[W_KV_INT] = c.rows[W_KV_UUID] = 100000;
			c.rows[W_BLOB] = 2000;
			c.reads = 1000;
			break;
		case 'R':
			c.reads = (unsigned)atoi(optarg);
			break;
		case 'c':
			c.cadence_ms = (unsigned)atoi(optarg);
			break;
		case 'o':
			c.out = optarg;
			break;
		case 'K':
			c.keep = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc - 1 || c.reps < 1) {
		usage(stderr);
		return 2;
	}
	c.url = argv[optind];
	c.is_s3 = !strncmp(c.url, "s3://", 5);
	if (!any_wl)
		for (int i = 0; i < W__COUNT; i++)
			c.run_wl[i] = true;
	if (!any_mode)
		c.run_mode[M_SEED] = c.run_mode[M_FSYNC] = true;
	if (!c.nwindows) {
		c.windows[c.nwindows++] = 1;
		c.windows[c.nwindows++] = 32;
	}
	for (int i = 0; i < W__COUNT; i++)
		if (c.run_wl[i] && c.rows[i] == 0)
			c.run_wl[i] = false;
	if (!c.is_s3 && mkdir(c.url, 0755) && errno != EEXIST) {
		perror(c.url);
		return 1;
	}

	pool = malloc(POOL_BYTES + BLOB_MAX);
	if (!pool)
		return 1;
	uint64_t x = splitmix((uint64_t)getpid());
	for (size_t i = 0; i + 8 <= POOL_BYTES + BLOB_MAX; i += 8) {
		x = splitmix(x);
		memcpy(pool + i, &x, 8);
	}

	char line[1024];
	snprintf(line, sizeof(line),
	         "\nStore: %s%s%s; cadence %u ms; %u measured repetitions after one warm-up; "
	         "rows/s is the median (min..max).\n\n"
	         "| workload | mode | window | rows | rows/s | objects | PUT+MPU reqs | "
	         "persisted | logical | persisted/logical | read p50 / p99 (loaded) | "
	         "read p50 / p99 (reopened) | reopen | SSTs | GETs/read |\n"
	         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
	         c.url, c.s3.endpoint ? " at " : "", c.s3.endpoint ? c.s3.endpoint : "",
	         c.cadence_ms, c.reps);
	emit(&c, line);

	int failures = 0;
	unsigned runno = 0;
	struct result *res = calloc(c.reps, sizeof(*res));
	if (!res)
		return 1;
	for (int w = 0; w < W__COUNT; w++) {
		if (!c.run_wl[w])
			continue;
		for (int m = 0; m < M__COUNT; m++) {
			if (!c.run_mode[m])
				continue;
			for (unsigned wi = 0; wi < c.nwindows; wi++) {
				unsigned win = c.windows[wi];
				char tag[128];
				struct result warm;
				int rc = 0;
				for (unsigned rep = 0; rep <= c.reps && !rc; rep++) {
					snprintf(tag, sizeof(tag), "kvb-%d-%u-%s-%s-w%u-%u",
					         (int)getpid(), runno++, workload_name[w],
					         mode_name[m], win, rep);
					rc = run_one(&c, (enum workload)w, (enum mode)m, win, tag,
					             rep ? &res[rep - 1] : &warm);
					const struct result *rr = rep ? &res[rep - 1] : &warm;
					fprintf(
					    stderr,
					    "kvbench: %s %s w%u %s: %s %.0f rows/s in %.1f s; "
					    "%llu groups, %llu objects, %llu PUT+MPU, %llu/%llu "
					    "bytes; "
					    "read p50/p99 %.0f/%.0f us; reopen %.2f s (%llu SSTs, "
					    "%llu WAL replayed), read p50/p99 %.0f/%.0f us, %llu "
					    "GETs\n",
					    workload_name[w], mode_name[m], win,
					    rep ? "rep" : "warm-up", rc ? strerror(-rc) : "ok",
					    rr->rows_per_s, rr->load_s,
					    (unsigned long long)rr->groups,
					    (unsigned long long)rr->objects,
					    (unsigned long long)(rr->put_reqs + rr->mpu_reqs),
					    (unsigned long long)rr->bytes,
					    (unsigned long long)rr->logical, rr->p50_us, rr->p99_us,
					    rr->reopen_s, (unsigned long long)rr->sst_count,
					    (unsigned long long)rr->replayed, rr->cold_p50_us,
					    rr->cold_p99_us, (unsigned long long)rr->cold_gets);
				}
				if (rc) {
					failures++;
					snprintf(line, sizeof(line),
					         "| %s | %s | %u | %llu | error: %s | | | | | | | "
					         "| | | |\n",
					         workload_name[w], mode_name[m], win,
					         (unsigned long long)c.rows[w], strerror(-rc));
					emit(&c, line);
					continue;
				}
				/* sum/average of object counts; median rate */
				double obj = 0, reqs = 0, bytes = 0, logical = 0, p50 = 0, p99 = 0;
				for (unsigned i = 0; i < c.reps; i++) {
					obj += res[i].objects;
					reqs += res[i].put_reqs + res[i].mpu_reqs;
					bytes += res[i].bytes;
					logical += res[i].logical;
				}
				obj /= c.reps;
				reqs /= c.reps;
				bytes /= c.reps;
				logical /= c.reps;
				/* latencies, reopen time, SSTs, GETs: medians of the repetitions */
				double p50s[16], p99s[16], cp50s[16], cp99s[16], ros[16], ssts[16];
				double gets[16];
				unsigned np = c.reps < 16 ? c.reps : 16;
				for (unsigned i = 0; i < np; i++) {
					p50s[i] = res[i].p50_us;
					p99s[i] = res[i].p99_us;
					cp50s[i] = res[i].cold_p50_us;
					cp99s[i] = res[i].cold_p99_us;
					ros[i] = res[i].reopen_s;
					ssts[i] = (double)res[i].sst_count;
					gets[i] = (double)res[i].cold_gets;
				}
				p50 = median(p50s, np);
				p99 = median(p99s, np);
				double cp50 = median(cp50s, np), cp99 = median(cp99s, np);
				double ro = median(ros, np), sst = median(ssts, np);
				double gpr = c.reads ? median(gets, np) / c.reads : 0;
				qsort(res, c.reps, sizeof(*res), cmp_result_rate);
				char hb[32], hl[32];
				human(bytes, hb, sizeof(hb));
				human(logical, hl, sizeof(hl));
				snprintf(
				    line, sizeof(line),
				    "| %s | %s | %u | %llu | %.0f (%.0f..%.0f) | %.0f | %.0f | "
				    "%s | %s | %.3f | %.0f / %.0f us | %.0f / %.0f us | %.2f s | "
				    "%.0f | %.2f |\n",
				    workload_name[w], mode_name[m], win,
				    (unsigned long long)c.rows[w], res[c.reps / 2].rows_per_s,
				    res[0].rows_per_s, res[c.reps - 1].rows_per_s, obj, reqs, hb,
				    hl, logical > 0 ? bytes / logical : 0.0, p50, p99, cp50, cp99,
				    ro, sst, gpr);
				emit(&c, line);
			}
		}
	}
	free(res);
	free(pool);
	return failures ? 1 : 0;
}
