/*
 * stat_backpressure.c - stat latency of a cold mount while one thread writes.
 *
 * The target of issue 13: "32 threads stat-ing files of a cold S3 mount while
 * another thread writes under backpressure: stat p99; no stat waits for the
 * writer".  A filesystem that holds one lock across a store round trip or a
 * backpressure wait makes every stat wait for the writer.
 *
 * usage: stat_backpressure prepare DIR THREADS FILES
 *          make DIR/sN/ (N = 0..THREADS-1), each with FILES empty files fK
 *        stat_backpressure run DIR THREADS FILES SECONDS WRITE_MIB
 *          WRITE_MIB > 0: a writer thread writes DIR/w.dat sequentially in
 *          1 MiB write(2)s, without fsync, until SECONDS pass or WRITE_MIB
 *          MiB are written (then it closes the file).  The stat threads
 *          start once the writer has written 32 MiB or 1 s has passed (so
 *          that a filesystem with a bounded write buffer is already
 *          throttling it).  WRITE_MIB = 0: no writer (the baseline).
 *          With SBP_STATS=MOUNT (a memwalfs mount root) in the environment,
 *          the stat threads instead start once the engine holds a writer for
 *          backpressure (its user.memwalfs.stats: writers_waiting > 0 or
 *          backpressure_waits grown; at most SBP_START_MAX s, default 60),
 *          and a monitor thread samples writers_waiting every 20 ms while
 *          they run.
 *          Each of THREADS threads then stats (fstatat) each file of its
 *          directory DIR/sN once, in order: the cold pass (on a fresh mount
 *          every one is a lookup the filesystem must answer from its store),
 *          then repeats statx(AT_STATX_FORCE_SYNC) of those files (a getattr
 *          the kernel must send to the filesystem: the "hot" pass) until
 *          the writer ends (or SECONDS pass, without a writer).
 * output (one line, key=value): files, cold_p50_ms, cold_p99_ms, cold_max_ms,
 * hot_n, hot_p50_ms, hot_p99_ms, hot_max_ms, write_MiB, write_MBps (MB/s
 * of the writer over its own run, 0 without one), write_max_ms (its slowest
 * write(2)), seconds, errors; with SBP_STATS also bp_waits (backpressure
 * waits of the engine over the run), bp_start (1: the stats started under
 * backpressure, 0: after SBP_START_MAX without it) and bp_held_pct (share
 * of the monitor's samples during the stat passes with a writer held by
 * backpressure), on the same line.  Exit status 0 when no call failed, 1
 * otherwise, 2 on bad usage.
 *
 * Built by tools/bench/run.sh with: cc -O2 -pthread -o stat_backpressure stat_backpressure.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "benchstat.h"

#define MAX_THREADS 256            /* sanity bound on the stat threads */
#define WRITE_BYTES (1024 * 1024)  /* one write(2) of the writer */
#define START_BYTES (32ull << 20)  /* the stats start after this much... */
#define START_SECONDS 1.0          /* ...or this long */
#define MAX_HOT_SAMPLES (1u << 18) /* hot samples kept per thread */

struct lat {
	double *v;  /* samples in ms, owned */
	size_t n;   /* samples taken */
	size_t cap; /* room in v */
};

struct stater {
	pthread_t thread; /* the thread running stater_main() */
	int id;           /* 0..threads-1: its directory sN */
	struct lat cold;  /* first stat of each file */
	struct lat hot;   /* forced getattrs afterwards */
	int errors;       /* failed calls */
};

static const char *g_dir;          /* the directory of the files */
static int g_files;                /* files per thread */
static double g_deadline;          /* CLOCK_MONOTONIC seconds to stop at */
static atomic_int g_writer_done;   /* the writer has closed its file */
static atomic_int g_go;            /* the stat threads may start */
static int g_writer_errors;        /* failed calls of the writer */
static uint64_t g_written;         /* bytes the writer wrote */
static double g_write_secs;        /* its run time */
static double g_write_max_ms;      /* its slowest write(2) */
static uint64_t g_write_limit;     /* bytes it may write */
static const char *g_stats;        /* SBP_STATS: a memwalfs mount root, or NULL */
static double g_start_max = 60;    /* SBP_START_MAX */
static int g_bp_start;             /* the stats started under backpressure */
static atomic_int g_staters;       /* stat threads still running */
static uint64_t g_samples, g_held; /* monitor samples, those with a writer held */

/*
 * Read counters name1 and name2 of the memwalfs stats (user.memwalfs.stats of
 * g_stats, lines "name value").  0, or -1 when they cannot be read.
 */
static int mw_stats(const char *name1, uint64_t *v1, const char *name2, uint64_t *v2)
{
	static char buf[1 << 16];
	ssize_t n = getxattr(g_stats, "user.memwalfs.stats", buf, sizeof(buf) - 1);
	int found = 0;

	if (n < 0)
		return -1;
	buf[n] = 0;
	for (char *line = buf; line && *line;) {
		char *nl = strchr(line, '\n');
		size_t l1 = strlen(name1), l2 = strlen(name2);

		if (!strncmp(line, name1, l1) && line[l1] == ' ') {
			*v1 = strtoull(line + l1 + 1, NULL, 10);
			found |= 1;
		} else if (!strncmp(line, name2, l2) && line[l2] == ' ') {
			*v2 = strtoull(line + l2 + 1, NULL, 10);
			found |= 2;
		}
		line = nl ? nl + 1 : NULL;
	}
	return found == 3 ? 0 : -1;
}

/* SBP_STATS: sample writers_waiting while the stat threads run. */
static void *monitor_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&g_go))
		usleep(1000);
	while (atomic_load(&g_staters) > 0) {
		uint64_t waiting = 0, waits = 0;

		if (mw_stats("writers_waiting", &waiting, "backpressure_waits", &waits) == 0) {
			g_samples++;
			g_held += waiting > 0;
		}
		usleep(20000);
	}
	return NULL;
}

static int lat_add(struct lat *l, double ms)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		double *p = realloc(l->v, cap * sizeof(*p));

		if (!p)
			return -1;
		l->v = p;
		l->cap = cap;
	}
	l->v[l->n++] = ms;
	return 0;
}

static void *writer_main(void *arg)
{
	char path[4096], *buf;
	double t0;
	int fd;

	(void)arg;
	buf = malloc(WRITE_BYTES);
	snprintf(path, sizeof(path), "%s/w.dat", g_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (!buf || fd < 0) {
		fprintf(stderr, "stat_backpressure: %s: %s\n", path, strerror(errno));
		g_writer_errors++;
		goto out;
	}
	for (size_t i = 0; i < WRITE_BYTES; i++)
		buf[i] = (char)(i * 2654435761u >> 13);
	t0 = mono();
	uint64_t waits0 = 0, waiting = 0, waits = 0;
	double last_poll = 0;
	if (g_stats && mw_stats("writers_waiting", &waiting, "backpressure_waits", &waits0) < 0) {
		fprintf(stderr, "stat_backpressure: no memwalfs stats at %s\n", g_stats);
		g_stats = NULL;
	}
	while (g_written < g_write_limit && mono() < g_deadline) {
		double w0 = mono(), ms;
		ssize_t w;

		/* Vary the block a little so that no layer can dedupe it. */
		memcpy(buf, &g_written, sizeof(g_written));
		w = write(fd, buf, WRITE_BYTES);
		ms = (mono() - w0) * 1000.0;
		if (ms > g_write_max_ms)
			g_write_max_ms = ms;
		if (w != WRITE_BYTES) {
			fprintf(stderr, "stat_backpressure: write: %s\n",
			        w < 0 ? strerror(errno) : "short write");
			g_writer_errors++;
			break;
		}
		g_written += WRITE_BYTES;
		if (atomic_load(&g_go)) {
			/* running */
		} else if (!g_stats) {
			if (g_written >= START_BYTES || mono() - t0 >= START_SECONDS)
				atomic_store(&g_go, 1);
		} else if (mono() - last_poll >= 0.01) {
			/* a write that just returned may have waited: ask the engine */
			last_poll = mono();
			if (mw_stats("writers_waiting", &waiting, "backpressure_waits", &waits) ==
			        0 &&
			    (waiting > 0 || waits > waits0)) {
				g_bp_start = 1;
				atomic_store(&g_go, 1);
			} else if (mono() - t0 >= g_start_max) {
				atomic_store(&g_go, 1);
			}
		}
	}
	g_write_secs = mono() - t0;
out:
	if (fd >= 0 && close(fd) < 0) {
		fprintf(stderr, "stat_backpressure: close: %s\n", strerror(errno));
		g_writer_errors++;
	}
	free(buf);
	atomic_store(&g_go, 1);
	atomic_store(&g_writer_done, 1);
	return NULL;
}

static void *stater_main(void *arg)
{
	struct stater *s = arg;
	char path[4096];
	int dfd;

	while (!atomic_load(&g_go))
		usleep(1000);
	snprintf(path, sizeof(path), "%s/s%d", g_dir, s->id);
	dfd = open(path, O_RDONLY | O_DIRECTORY);
	if (dfd < 0) {
		fprintf(stderr, "stat_backpressure: %s: %s\n", path, strerror(errno));
		s->errors++;
		return NULL;
	}
	for (int k = 0; k < g_files; k++) {
		struct stat st;
		char name[32];
		double t0;

		snprintf(name, sizeof(name), "f%d", k);
		t0 = mono();
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (s->errors++ == 0)
				fprintf(stderr, "stat_backpressure: %s/%s: %s\n", path, name,
				        strerror(errno));
			continue;
		}
		if (lat_add(&s->cold, (mono() - t0) * 1000.0) < 0)
			s->errors++;
	}
	while (!atomic_load(&g_writer_done) && mono() < g_deadline && s->hot.n < MAX_HOT_SAMPLES) {
		for (int k = 0; k < g_files && !atomic_load(&g_writer_done); k++) {
			struct statx stx;
			char name[32];
			double t0;

			snprintf(name, sizeof(name), "f%d", k);
			t0 = mono();
			if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_STATX_FORCE_SYNC,
			          STATX_BASIC_STATS, &stx) < 0) {
				if (s->errors++ == 0)
					fprintf(stderr, "stat_backpressure: statx %s/%s: %s\n",
					        path, name, strerror(errno));
				continue;
			}
			if (lat_add(&s->hot, (mono() - t0) * 1000.0) < 0)
				s->errors++;
		}
	}
	close(dfd);
	atomic_fetch_sub(&g_staters, 1);
	return NULL;
}

/* All samples of one kind, sorted; NULL on failure. */
static double *gather(struct stater *ss, int threads, int hot, size_t *n)
{
	size_t total = 0, k = 0;
	double *all;

	for (int i = 0; i < threads; i++)
		total += hot ? ss[i].hot.n : ss[i].cold.n;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		return NULL;
	for (int i = 0; i < threads; i++) {
		struct lat *l = hot ? &ss[i].hot : &ss[i].cold;

		memcpy(all + k, l->v, l->n * sizeof(*all));
		k += l->n;
	}
	qsort(all, total, sizeof(*all), cmp_double);
	*n = total;
	return all;
}

static int prepare(const char *dir, int threads, int files)
{
	char path[4096];

	for (int i = 0; i < threads; i++) {
		snprintf(path, sizeof(path), "%s/s%d", dir, i);
		if (mkdir(path, 0755) < 0 && errno != EEXIST) {
			fprintf(stderr, "stat_backpressure: mkdir %s: %s\n", path, strerror(errno));
			return 1;
		}
		for (int k = 0; k < files; k++) {
			int fd;

			snprintf(path, sizeof(path), "%s/s%d/f%d", dir, i, k);
			fd = open(path, O_WRONLY | O_CREAT, 0644);
			if (fd < 0 || close(fd) < 0) {
				fprintf(stderr, "stat_backpressure: %s: %s\n", path,
				        strerror(errno));
				return 1;
			}
		}
	}
	printf("files=%d\n", threads * files);
	return 0;
}

int main(int argc, char **argv)
{
	struct stater *ss = NULL;
	pthread_t writer, monitor;
	uint64_t waits0 = 0, waits1 = 0, unused = 0;
	int have_monitor = 0;
	double *cold = NULL, *hot = NULL, t0, secs;
	size_t ncold = 0, nhot = 0;
	int threads, errors = 0, rc = 1, with_writer;
	long write_mib;

	if (argc == 5 && !strcmp(argv[1], "prepare")) {
		threads = atoi(argv[3]);
		g_files = atoi(argv[4]);
		if (threads < 1 || threads > MAX_THREADS || g_files < 1) {
			fprintf(stderr, "stat_backpressure: bad arguments\n");
			return 2;
		}
		return prepare(argv[2], threads, g_files);
	}
	if (argc != 7 || strcmp(argv[1], "run")) {
		fprintf(stderr,
		        "usage: stat_backpressure prepare DIR THREADS FILES\n"
		        "       stat_backpressure run DIR THREADS FILES SECONDS WRITE_MIB\n");
		return 2;
	}
	g_dir = argv[2];
	threads = atoi(argv[3]);
	g_files = atoi(argv[4]);
	secs = atof(argv[5]);
	write_mib = atol(argv[6]);
	if (threads < 1 || threads > MAX_THREADS || g_files < 1 || secs <= 0 || write_mib < 0) {
		fprintf(stderr, "stat_backpressure: bad arguments\n");
		return 2;
	}
	with_writer = write_mib > 0;
	g_write_limit = (uint64_t)write_mib << 20;
	g_stats = getenv("SBP_STATS");
	if (getenv("SBP_START_MAX"))
		g_start_max = atof(getenv("SBP_START_MAX"));
	if (g_stats && mw_stats("backpressure_waits", &waits0, "writers_waiting", &unused) < 0) {
		fprintf(stderr, "stat_backpressure: no memwalfs stats at %s\n", g_stats);
		g_stats = NULL;
	}
	ss = calloc((size_t)threads, sizeof(*ss));
	if (!ss)
		goto out;
	t0 = mono();
	g_deadline = t0 + secs;
	atomic_store(&g_staters, threads);
	if (g_stats && pthread_create(&monitor, NULL, monitor_main, NULL) == 0)
		have_monitor = 1;
	if (with_writer) {
		if (pthread_create(&writer, NULL, writer_main, NULL) != 0) {
			fprintf(stderr, "stat_backpressure: pthread_create failed\n");
			goto out;
		}
	} else {
		atomic_store(&g_go, 1);
	}
	for (int i = 0; i < threads; i++) {
		ss[i].id = i;
		if (pthread_create(&ss[i].thread, NULL, stater_main, &ss[i]) != 0) {
			fprintf(stderr, "stat_backpressure: pthread_create failed\n");
			atomic_fetch_sub(&g_staters, threads - i);
			threads = i;
			errors++;
			break;
		}
	}
	for (int i = 0; i < threads; i++) {
		pthread_join(ss[i].thread, NULL);
		errors += ss[i].errors;
	}
	if (with_writer) {
		pthread_join(writer, NULL);
		errors += g_writer_errors;
	}
	if (have_monitor)
		pthread_join(monitor, NULL);
	secs = mono() - t0;
	cold = gather(ss, threads, 0, &ncold);
	hot = gather(ss, threads, 1, &nhot);
	if (!cold || !hot)
		goto out;
	printf("files=%zu cold_p50_ms=%.3f cold_p99_ms=%.3f cold_max_ms=%.3f hot_n=%zu "
	       "hot_p50_ms=%.3f hot_p99_ms=%.3f hot_max_ms=%.3f write_MiB=%.0f write_MBps=%.1f "
	       "write_max_ms=%.1f seconds=%.3f errors=%d",
	       ncold, pct(cold, ncold, 50), pct(cold, ncold, 99), ncold ? cold[ncold - 1] : 0.0,
	       nhot, pct(hot, nhot, 50), pct(hot, nhot, 99), nhot ? hot[nhot - 1] : 0.0,
	       g_written / 1048576.0, g_write_secs > 0 ? g_written / g_write_secs / 1e6 : 0.0,
	       g_write_max_ms, secs, errors);
	if (g_stats && mw_stats("backpressure_waits", &waits1, "writers_waiting", &unused) == 0)
		printf(" bp_waits=%llu bp_start=%d bp_held_pct=%.1f",
		       (unsigned long long)(waits1 - waits0), g_bp_start,
		       g_samples ? 100.0 * (double)g_held / (double)g_samples : 0.0);
	printf("\n");
	rc = (ncold > 0 && errors == 0) ? 0 : 1;
out:
	if (ss)
		for (int i = 0; i < threads; i++) {
			free(ss[i].cold.v);
			free(ss[i].hot.v);
		}
	free(ss);
	free(cold);
	free(hot);
	return rc;
}
