/*
 * durable_creates.c - benchmark of durable small-file creation.
 *
 * Each of W writer threads repeatedly creates a new file in DIR, writes 4 KiB
 * to it, fsyncs it and closes it; the time of that whole sequence is one
 * sample.  The run stops after SECONDS or when MAXFILES files exist in all.
 * With many writers a filesystem that group-commits can acknowledge many
 * fsyncs with one round trip to its store; one that uploads per file cannot.
 *
 * usage: durable_creates DIR WRITERS SECONDS MAXFILES
 * output (one line, key=value): files, seconds, files_per_s, p50_ms, p90_ms,
 * p99_ms, max_ms, errors.  Exit status 0 when at least one file was created
 * and no call failed, 1 otherwise, 2 on bad usage.
 *
 * Built by tools/bench/run.sh with: cc -O2 -pthread -o durable_creates durable_creates.c
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
#include <time.h>
#include <unistd.h>

#include "benchstat.h"

#define FILE_BYTES 4096  /* bytes written into each file */
#define MAX_WRITERS 1024 /* sanity bound on the thread count */

struct writer {
	pthread_t thread; /* the thread running writer_main() */
	int id;           /* 0..writers-1, part of each file name */
	double *lat;      /* latency samples in ms, owned */
	size_t n;         /* samples taken */
	size_t cap;       /* room in lat */
	int errors;       /* failed calls */
};

static const char *g_dir;    /* directory the files are created in */
static double g_deadline;    /* CLOCK_MONOTONIC seconds to stop at */
static atomic_long g_budget; /* files still allowed to be created */

/* One create + write + fsync + close; 0 or -errno. */
static int create_one(const char *path, const char *buf)
{
	ssize_t w;
	int fd, rc = 0;

	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
	if (fd < 0)
		return -errno;
	w = write(fd, buf, FILE_BYTES);
	if (w != FILE_BYTES) {
		rc = w < 0 ? -errno : -EIO;
		goto out;
	}
	if (fsync(fd) < 0)
		rc = -errno;
out:
	if (close(fd) < 0 && rc == 0)
		rc = -errno;
	return rc;
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char path[4096], buf[FILE_BYTES];
	size_t seq = 0;
	int rc;

	memset(buf, 'a' + w->id % 26, sizeof(buf));
	while (mono() < g_deadline && atomic_fetch_sub(&g_budget, 1) > 0) {
		double t0, dt;

		snprintf(path, sizeof(path), "%s/w%03d-%06zu", g_dir, w->id, seq++);
		t0 = mono();
		rc = create_one(path, buf);
		dt = (mono() - t0) * 1000.0;
		if (rc < 0) {
			if (w->errors++ == 0)
				fprintf(stderr, "durable_creates: %s: %s\n", path, strerror(-rc));
			if (w->errors > 100)
				break;
			continue;
		}
		if (w->n == w->cap) {
			size_t cap = w->cap ? w->cap * 2 : 1024;
			double *p = realloc(w->lat, cap * sizeof(*p));

			if (!p) {
				w->errors++;
				break;
			}
			w->lat = p;
			w->cap = cap;
		}
		w->lat[w->n++] = dt;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	struct writer *ws = NULL;
	double *all = NULL, t0, secs;
	size_t total = 0, k = 0;
	int writers, errors = 0, rc = 1;
	long maxfiles;

	if (argc != 5) {
		fprintf(stderr, "usage: durable_creates DIR WRITERS SECONDS MAXFILES\n");
		return 2;
	}
	g_dir = argv[1];
	writers = atoi(argv[2]);
	secs = atof(argv[3]);
	maxfiles = atol(argv[4]);
	if (writers < 1 || writers > MAX_WRITERS || secs <= 0 || maxfiles < 1) {
		fprintf(stderr, "durable_creates: bad arguments\n");
		return 2;
	}
	ws = calloc((size_t)writers, sizeof(*ws));
	if (!ws)
		goto out;
	atomic_store(&g_budget, maxfiles);
	t0 = mono();
	g_deadline = t0 + secs;
	for (int i = 0; i < writers; i++) {
		ws[i].id = i;
		if (pthread_create(&ws[i].thread, NULL, writer_main, &ws[i]) != 0) {
			fprintf(stderr, "durable_creates: pthread_create failed\n");
			writers = i;
			errors++;
			break;
		}
	}
	for (int i = 0; i < writers; i++) {
		pthread_join(ws[i].thread, NULL);
		total += ws[i].n;
		errors += ws[i].errors;
	}
	secs = mono() - t0;
	all = malloc((total ? total : 1) * sizeof(*all));
	if (!all)
		goto out;
	for (int i = 0; i < writers; i++)
		for (size_t j = 0; j < ws[i].n; j++)
			all[k++] = ws[i].lat[j];
	qsort(all, total, sizeof(*all), cmp_double);
	printf("files=%zu seconds=%.3f files_per_s=%.1f p50_ms=%.3f p90_ms=%.3f "
	       "p99_ms=%.3f max_ms=%.3f errors=%d\n",
	       total, secs, total / secs, pct(all, total, 50), pct(all, total, 90),
	       pct(all, total, 99), total ? all[total - 1] : 0.0, errors);
	rc = (total > 0 && errors == 0) ? 0 : 1;
out:
	if (ws)
		for (int i = 0; i < writers; i++)
			free(ws[i].lat);
	free(ws);
	free(all);
	return rc;
}
