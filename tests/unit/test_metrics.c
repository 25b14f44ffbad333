/*
 * test_metrics.c - the Prometheus endpoint's pieces (tools/metrics.c, util/hist.c):
 * every line `memwalfs stats` prints has a Prometheus type (a stat added without
 * one fails here: give it a type in tools/metrics.c stat_types[]), histogram
 * buckets at and around their bounds, and a rendering of a live engine and
 * filesystem whose histograms are cumulative with +Inf equal to the count.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "fs.h"
#include "hist.h"
#include "metrics.h"
#include "store.h"

static void test_hist_buckets(void **state)
{
	(void)state;
	struct mw_hist h;
	struct mw_hist_snap s;
	memset(&h, 0, sizeof(h));
	mw_hist_record(&h, 0);
	mw_hist_record(&h, mw_hist_bounds_us[0]);     /* inclusive upper bound */
	mw_hist_record(&h, mw_hist_bounds_us[0] + 1); /* the next bucket */
	mw_hist_record(&h, mw_hist_bounds_us[MW_HIST_BUCKETS - 1]);
	mw_hist_record(&h, mw_hist_bounds_us[MW_HIST_BUCKETS - 1] + 1); /* beyond every bound */
	mw_hist_record(&h, UINT64_MAX / 4);
	mw_hist_read(&h, &s);
	assert_int_equal(s.bucket[0], 2);
	assert_int_equal(s.bucket[1], 1);
	assert_int_equal(s.bucket[MW_HIST_BUCKETS - 1], 1);
	assert_int_equal(s.bucket[MW_HIST_BUCKETS], 2);
	assert_int_equal(s.count, 6);
	for (int i = 1; i < MW_HIST_BUCKETS; i++)
		assert_true(mw_hist_bounds_us[i] > mw_hist_bounds_us[i - 1]);
}

struct fixture {
	char dir[64];
	struct store *st;
	struct engine *e;
	struct mwfs *fs;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct engine_opts eo;
	struct mwfs_opts fo;
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_metrics.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(store_open_local(f->dir, &f->st), 0);
	engine_opts_default(&eo);
	eo.gc_interval_ms = ENGINE_GC_OFF;
	assert_int_equal(engine_open(f->st, &eo, &f->e), 0);
	mwfs_opts_default(&fo);
	assert_int_equal(mwfs_open(f->e, &fo, &f->fs), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];
	mwfs_close(f->fs);
	engine_close(f->e);
	store_close(f->st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

static void test_every_stat_typed(void **state)
{
	struct fixture *f = *state;
	char *buf = malloc(65536);
	size_t n = mwfs_stats_format(f->fs, buf, 65536);
	assert_true(n > 0 && n < 65536);
	int lines = 0;
	for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(l, ' ');
		assert_non_null(sp);
		*sp = 0;
		if (!metrics_stat_type(l))
			fail_msg(
			    "stats line '%s' has no Prometheus type: add it to stat_types[] in "
			    "tools/metrics.c (and docs/METRICS.md)",
			    l);
		lines++;
	}
	assert_true(lines > 40);
	assert_string_equal(metrics_stat_type("puts"), "counter");
	assert_string_equal(metrics_stat_type("pending_bytes"), "gauge");
	assert_string_equal(metrics_stat_type("store_requests_get"), "counter");
	assert_null(metrics_stat_type("no_such_stat"));
	free(buf);
}

/* The value of the sample line that starts with prefix (followed by a space). */
static double sample(const char *text, const char *prefix)
{
	size_t n = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, prefix, n) && p[n] == ' ')
			return strtod(p + n + 1, NULL);
	fail_msg("no sample %s", prefix);
	return -1;
}

static void test_render(void **state)
{
	struct fixture *f = *state;
	int sv[2];
	struct metrics *m = NULL;
	/* any socket will do: the thread only polls it (nothing connects here) */
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(metrics_start(sv[0], f->st, &m), 0);
	metrics_progress(m, "replay", 3, 7);
	metrics_attach(m, f->e, f->fs);
	for (int i = 0; i < 5; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		assert_int_equal(engine_put(f->e, key, strlen(key), "v", 1, ENGINE_WAIT, NULL), 0);
	}
	char *text = NULL;
	size_t len = 0;
	assert_int_equal(metrics_render(m, &text, &len), 0);
	assert_int_equal(strlen(text), len);
	assert_true(sample(text, "memwalfs_puts_total") >= 5);
	assert_true(sample(text, "memwalfs_serving") == 1);
	assert_true(sample(text, "memwalfs_open_progress_entries{phase=\"replay\",of=\"total\"}") ==
	            7);
	double commits = sample(text, "memwalfs_commit_duration_seconds_count");
	assert_true(commits >= 1);
	assert_true(sample(text, "memwalfs_commit_duration_seconds_bucket{le=\"+Inf\"}") ==
	            commits);
	double prev = 0;
	for (int i = 0; i < MW_HIST_BUCKETS; i++) {
		char name[128];
		snprintf(name, sizeof(name), "memwalfs_commit_duration_seconds_bucket{le=\"%g\"}",
		         (double)mw_hist_bounds_us[i] / 1e6);
		double v = sample(text, name);
		assert_true(v >= prev);
		prev = v;
	}
	assert_true(prev <= commits);
	assert_true(sample(text, "memwalfs_store_request_duration_seconds_count{op=\"put\"}") >= 5);
	assert_true(sample(text, "memwalfs_follower_lag_entries") == 0);
	free(text);
	metrics_attach(m, NULL, NULL);
	assert_int_equal(metrics_render(m, &text, &len), 0);
	assert_true(sample(text, "memwalfs_serving") == 0);
	assert_null(strstr(text, "memwalfs_puts_total"));
	free(text);
	metrics_stop(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_hist_buckets),
	    cmocka_unit_test_setup_teardown(test_every_stat_typed, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_render, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
