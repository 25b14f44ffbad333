/*
 * test_store_sub.c - the sub-prefix view of a store (s3/sub.c,
 * store_open_sub()) on the local store: what the conformance suite
 * (store_conformance_sub_local) does not show.  Two views of one parent
 * ("r/1/", "r/2/") and the parent never see each other's keys; a key "r/1/x"
 * of the parent is "x" in view r/1/; keys too long under the prefix; bad
 * prefixes; the files on disk, temp files under the prefix and cleanup of
 * uploads confined to it; read-only; views of views; counters adding up as
 * store.h says; threads; and two engines, one per view, that write, close,
 * reopen and pass fsck with all their objects under their prefix.
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
#include <sys/stat.h>

#include <cmocka.h>

#include "check.h"
#include "engine.h"
#include "engine_fixture.h"
#include "hist.h"
#include "store.h"
#include "testutil.h"

/* Put key = val (a string) in s. */
static void put_s(struct store *s, const char *key, const char *val)
{
	assert_int_equal(store_put(s, key, val, strlen(val)), 0);
}

/* Get key from s and compare it with val (NULL: must be missing). */
static void get_s(struct store *s, const char *key, const char *val)
{
	void *b = NULL;
	size_t n = 0;
	int rc = store_get(s, key, 0, STORE_TO_END, &b, &n);

	if (!val) {
		assert_int_equal(rc, -ENOENT);
		return;
	}
	assert_int_equal(rc, 0);
	assert_int_equal(n, strlen(val));
	assert_memory_equal(b, val, n);
	free(b);
}

/* The listing of s under prefix after after (max keys) is exactly want[0..n). */
static void list_is(struct store *s, const char *prefix, const char *after, size_t max,
                    const char *const *want, size_t n)
{
	struct tu_keys l = {0};

	assert_int_equal(store_list(s, prefix, after, max, tu_keys_add, &l), 0);
	for (size_t i = 0; i < l.n && i < n; i++)
		if (strcmp(l.keys[i], want[i]))
			fail_msg("list %s after %s: key %zu is %s, want %s", prefix,
			         after ? after : "", i, l.keys[i], want[i]);
	if (l.n != n)
		fail_msg("list %s after %s: %zu keys, want %zu", prefix, after ? after : "", l.n,
		         n);
	tu_keys_free(&l);
}

/* A file of the parent's directory exists (relative path). */
static bool file_exists(const char *rel)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", g_dir, rel);
	return lstat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void test_isolation(void **state)
{
	(void)state;
	struct store *p = open_store(), *v1, *v2;
	struct store_stat st;

	assert_int_equal(store_open_sub(p, "r/1/", &v1), 0);
	assert_int_equal(store_open_sub(p, "r/2/", &v2), 0);
	assert_string_equal(store_caps(v1)->name, "sub(local)");
	assert_true(store_caps(v1)->conditional_create && store_caps(v1)->conditional_finish &&
	            store_caps(v1)->durable_on_ack);

	put_s(v1, "x", "one-x");
	put_s(v1, "y/z", "one-yz");
	put_s(v2, "x", "two-x");
	put_s(v2, "y/z", "two-yz");
	put_s(p, "x", "root-x");
	put_s(p, "r/1/w", "root-w"); /* the parent's "r/1/w" is the view's "w" */
	put_s(p, "r/10/x", "ten");   /* beside r/1/, not in it */
	put_s(p, "r/1-", "dash");    /* sorts before "r/1/" */

	/* the files on disk: the view's keys are files under DIR/r/1/ */
	assert_true(file_exists("r/1/x") && file_exists("r/1/y/z") && file_exists("r/2/x"));

	{
		static const char *const w1[] = {"w", "x", "y/z"};
		static const char *const w2[] = {"x", "y/z"};
		static const char *const wp[] = {"r/1-",   "r/1/w", "r/1/x",   "r/1/y/z",
		                                 "r/10/x", "r/2/x", "r/2/y/z", "x"};
		static const char *const y[] = {"y/z"};
		static const char *const after_w[] = {"x", "y/z"};
		static const char *const first[] = {"w"};
		list_is(v1, "", NULL, 0, w1, 3);
		list_is(v2, "", NULL, 0, w2, 2);
		list_is(p, "", NULL, 0, wp, 8);
		list_is(v1, "y", NULL, 0, y, 1);
		list_is(v1, "y/", NULL, 0, y, 1);
		list_is(v1, "", "w", 0, after_w, 2);
		list_is(v1, "", NULL, 1, first, 1);
		list_is(v1, "q", NULL, 0, NULL, 0);
		list_is(v1, "", "y/z", 0, NULL, 0);
		/* start_after before the prefix, in the view's own terms: everything */
		list_is(v1, "", "a", 0, w1, 3);
	}
	get_s(v1, "w", "root-w");
	get_s(v1, "x", "one-x");
	get_s(v2, "x", "two-x");
	get_s(p, "x", "root-x");
	get_s(p, "r/2/y/z", "two-yz");
	get_s(v2, "w", NULL);
	assert_int_equal(store_head(v1, "y/z", &st), 0);
	assert_int_equal(st.size, 6);
	assert_int_equal(store_head(v2, "w", &st), -ENOENT);
	assert_int_equal(store_head(v1, "y", &st), -ENOENT); /* a directory, not an object */

	/* get_into */
	{
		char buf[8];
		size_t n = 0;
		assert_int_equal(store_get_into(v2, "y/z", 4, sizeof(buf), buf, &n), 0);
		assert_int_equal(n, 2);
		assert_memory_equal(buf, "yz", 2);
	}

	/* conditional create sees only the view's key */
	assert_int_equal(store_put_if_absent(v1, "x", "again", 5), -EEXIST);
	assert_int_equal(store_put_if_absent(v1, "new", "n", 1), 0);
	get_s(p, "r/1/new", "n");
	get_s(v2, "new", NULL);

	/* deletes stay in the view */
	assert_int_equal(store_delete(v1, "x"), 0);
	get_s(v1, "x", NULL);
	get_s(v2, "x", "two-x");
	get_s(p, "x", "root-x");
	{
		const char *keys[] = {"y/z", "w", "missing"};
		assert_int_equal(store_delete_many(v2, keys, 3), 0);
	}
	get_s(v2, "y/z", NULL);
	get_s(v1, "y/z", "one-yz");
	get_s(v1, "w", "root-w");

	/* the space is the parent's */
	{
		struct store_space a, b;
		assert_int_equal(store_space(v1, &a), 0);
		assert_int_equal(store_space(p, &b), 0);
		assert_int_equal(a.total, b.total);
	}

	store_close(v1);
	store_close(v2);
	/* closing the views left the parent working */
	get_s(p, "r/1/y/z", "one-yz");
	store_close(p);
}

static void test_bad_prefix(void **state)
{
	(void)state;
	struct store *p = open_store(), *v = (struct store *)&v; /* must stay unchanged */
	struct store *keep = v;
	static const char *const bad[] = {"",     "/",   "r",     "r/1",   "/r/",    "r//",  "./",
	                                  "r/./", "../", "r/../", "a\\b/", "a b\n/", "r/1//"};
	char *longp = malloc(STORE_KEY_MAX + 2);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (store_open_sub(p, bad[i], &v) != -EINVAL)
			fail_msg("prefix \"%s\" accepted", bad[i]);
	assert_ptr_equal(v, keep);
	assert_int_equal(store_open_sub(p, NULL, &v), -EINVAL);
	assert_int_equal(store_open_sub(NULL, "r/1/", &v), -EINVAL);
	assert_int_equal(store_open_sub(p, "r/1/", NULL), -EINVAL);
	/* STORE_KEY_MAX bytes leave no room for a key; one less does */
	assert_non_null(longp);
	memset(longp, 'a', STORE_KEY_MAX);
	longp[STORE_KEY_MAX - 1] = '/';
	longp[STORE_KEY_MAX] = '\0';
	assert_int_equal(store_open_sub(p, longp, &v), -EINVAL);
	longp[STORE_KEY_MAX - 2] = '/';
	longp[STORE_KEY_MAX - 1] = '\0';
	/* a segment of 1021 bytes: valid as a prefix (the local store would refuse the file) */
	assert_int_equal(store_open_sub(p, longp, &v), 0);
	store_close(v);
	free(longp);
	store_close(p);
}

/* A key of len bytes in segments of 100 (the local store's names stay short). */
static char *long_key(size_t len)
{
	char *k = malloc(len + 1);

	assert_non_null(k);
	for (size_t i = 0; i < len; i++)
		k[i] = (i % 101 == 100) ? '/' : 'k';
	if (k[len - 1] == '/')
		k[len - 1] = 'k';
	k[len] = '\0';
	assert_true(store_key_valid(k));
	return k;
}

static void test_key_too_long(void **state)
{
	(void)state;
	struct store *p = open_store(), *v;
	size_t room = STORE_KEY_MAX - strlen("r/1/");
	char *fits = long_key(room), *over = long_key(room + 1);
	struct store_stat st;
	struct store_writer *w;
	struct store_stats s;
	void *b;
	size_t n;
	unsigned nc;

	assert_int_equal(store_open_sub(p, "r/1/", &v), 0);
	put_s(v, fits, "fits");
	get_s(v, fits, "fits");
	{
		const char *const want[] = {fits};
		list_is(v, "", NULL, 0, want, 1);
	}
	assert_int_equal(store_put(v, over, "x", 1), -ENAMETOOLONG);
	assert_int_equal(store_put_if_absent(v, over, "x", 1), -ENAMETOOLONG);
	assert_int_equal(store_get(v, over, 0, STORE_TO_END, &b, &n), -ENAMETOOLONG);
	assert_int_equal(store_get_into(v, over, 0, 1, &st, &n), -ENAMETOOLONG);
	assert_int_equal(store_head(v, over, &st), -ENAMETOOLONG);
	assert_int_equal(store_delete(v, over), -ENAMETOOLONG);
	{
		const char *keys[] = {"a", over};
		assert_int_equal(store_delete_many(v, keys, 2), -ENAMETOOLONG);
	}
	assert_int_equal(store_writer_open(v, over, 0, &w), -ENAMETOOLONG);
	assert_true(store_err_permanent(v, -ENAMETOOLONG));
	assert_false(store_err_permanent(v, -EIO));
	assert_true(store_err_permanent(v, -EACCES)); /* the local parent's rule */
	/* none of them reached the parent or counted as a request of the view */
	store_get_stats(v, &s);
	assert_int_equal(s.requests[STORE_OP_PUT], 1);
	assert_int_equal(s.errors, 8);
	/* a listing prefix too long for any key of the view lists nothing */
	list_is(v, over, NULL, 0, NULL, 0);
	/* a start_after of any length works */
	list_is(v, "", over, 0, NULL, 0);
	nc = 99;
	assert_int_equal(store_cleanup_uploads(v, over, 0, &nc), 0);
	assert_int_equal(nc, 0);
	get_s(v, fits, "fits");
	free(fits);
	free(over);
	store_close(v);
	store_close(p);
}

/* Temp files, streaming writers and cleanup of uploads under deeper prefixes. */
static void test_writers_and_cleanup(void **state)
{
	(void)state;
	struct store *p = open_store(), *v1, *v2;
	struct store_writer *w1, *w2, *wp, *wa;
	unsigned n = 99;

	assert_int_equal(store_open_sub(p, "r/1/", &v1), 0);
	assert_int_equal(store_open_sub(p, "r/2/", &v2), 0);
	assert_int_equal(store_writer_open(v1, "d/obj", STORE_W_IF_ABSENT, &w1), 0);
	assert_int_equal(store_writer_write(w1, "abc", 3), 0);
	assert_int_equal(store_writer_open(v2, "d/obj", 0, &w2), 0);
	assert_int_equal(store_writer_write(w2, "def", 3), 0);
	assert_int_equal(store_writer_open(p, "d/obj", 0, &wp), 0);
	assert_int_equal(store_writer_write(wp, "ghi", 3), 0);
	assert_int_equal(store_writer_open(v1, "gone", 0, &wa), 0);
	assert_int_equal(store_writer_write(wa, "zzz", 3), 0);
	/* the temp files are in the prefix's directories and never listed */
	list_is(v1, "", NULL, 0, NULL, 0);
	list_is(p, "", NULL, 0, NULL, 0);
	/* an hour: nothing is that old */
	assert_int_equal(store_cleanup_uploads(v1, "", 3600, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_writer_finish(w1), 0);
	/* IF_ABSENT finish of a key that exists in the view only */
	assert_int_equal(store_writer_open(v1, "d/obj", STORE_W_IF_ABSENT, &w1), 0);
	assert_int_equal(store_writer_write(w1, "xyz", 3), 0);
	assert_int_equal(store_writer_finish(w1), -EEXIST);
	store_writer_abort(wa);
	/* a fresh upload in v1, then cleanup of v1 at age 0: only v1's goes */
	assert_int_equal(store_writer_open(v1, "e/late", 0, &wa), 0);
	assert_int_equal(store_writer_write(wa, "lll", 3), 0);
	assert_int_equal(store_cleanup_uploads(v1, "", 0, &n), 0);
	assert_int_equal(n, 1);
	assert_int_not_equal(store_writer_finish(wa), 0); /* its temp file was removed */
	get_s(v1, "e/late", NULL);
	assert_int_equal(store_writer_finish(w2), 0);
	assert_int_equal(store_writer_finish(wp), 0);
	get_s(v1, "d/obj", "abc");
	get_s(v2, "d/obj", "def");
	get_s(p, "d/obj", "ghi");
	{
		static const char *const all[] = {"d/obj", "r/1/d/obj", "r/2/d/obj"};
		list_is(p, "", NULL, 0, all, 3);
	}
	/* a view of a view: the prefixes add up */
	{
		struct store *vv;
		assert_int_equal(store_open_sub(v1, "s/", &vv), 0);
		assert_string_equal(store_caps(vv)->name, "sub(sub(local))");
		put_s(vv, "k", "deep");
		get_s(p, "r/1/s/k", "deep");
		get_s(v1, "s/k", "deep");
		assert_true(file_exists("r/1/s/k"));
		store_close(vv);
	}
	store_close(v1);
	store_close(v2);
	store_close(p);
}

static void test_read_only(void **state)
{
	(void)state;
	struct store *p = open_store(), *v;
	struct store_writer *w;
	unsigned n;

	assert_int_equal(store_open_sub(p, "r/3/", &v), 0);
	put_s(v, "k", "val");
	store_close(v);
	store_close(p);
	assert_int_equal(store_open_local_flags(g_dir, STORE_OPEN_READ_ONLY, &p), 0);
	assert_int_equal(store_open_sub(p, "r/3/", &v), 0);
	get_s(v, "k", "val");
	assert_int_equal(store_put(v, "k", "x", 1), -EROFS);
	assert_int_equal(store_put_if_absent(v, "k2", "x", 1), -EROFS);
	assert_int_equal(store_delete(v, "k"), -EROFS);
	assert_int_equal(store_writer_open(v, "k3", 0, &w), -EROFS);
	assert_int_equal(store_cleanup_uploads(v, "", 0, &n), -EROFS);
	get_s(v, "k", "val");
	store_close(v);
	store_close(p);
}

/* requests[op] of a minus b */
static uint64_t d(const struct store_stats *a, const struct store_stats *b, enum store_op op)
{
	return a->requests[op] - b->requests[op];
}

/*
 * Counters (store.h): each view counts the requests it forwards; the parent
 * counts what the local store does for everyone, so on a local parent the
 * parent's counts are the views' plus its own callers', except delete_many
 * (the view: one per 1000 keys; the local store: one per key).
 */
static void test_counters(void **state)
{
	(void)state;
	struct store *p = open_store(), *v1, *v2;
	struct store_stats p0, p1, s1, s2, sp;
	struct store_writer *w;
	char big[5000];
	void *b;
	size_t n;
	struct store_stat st;

	assert_int_equal(store_open_sub(p, "r/1/", &v1), 0);
	assert_int_equal(store_open_sub(p, "r/2/", &v2), 0);
	store_get_stats(p, &p0);
	memset(big, 'b', sizeof(big));
	/* v1: 3 puts, 2 gets (one missing), 1 head, 1 listing, 1 delete, 1 writer */
	assert_int_equal(store_put(v1, "a", big, 1000), 0);
	assert_int_equal(store_put(v1, "b", big, 2000), 0);
	assert_int_equal(store_put_if_absent(v1, "c", big, 3000), 0);
	assert_int_equal(store_get(v1, "b", 0, STORE_TO_END, &b, &n), 0);
	free(b);
	assert_int_equal(store_get(v1, "nope", 0, STORE_TO_END, &b, &n), -ENOENT);
	assert_int_equal(store_head(v1, "a", &st), 0);
	assert_int_equal(tu_count_keys(v1, ""), 3);
	assert_int_equal(store_delete(v1, "a"), 0);
	assert_int_equal(store_writer_open(v1, "w", 0, &w), 0);
	assert_int_equal(store_writer_write(w, big, 4000), 0);
	assert_int_equal(store_writer_write(w, big, 1000), 0);
	assert_int_equal(store_writer_finish(w), 0);
	/* v2: 2 puts, 1 get_into, 1 failed put (a directory where the key is: -EISDIR) */
	assert_int_equal(store_put(v2, "x/y", big, 100), 0);
	assert_int_equal(store_put(v2, "z", big, 200), 0);
	{
		char buf[64];
		assert_int_equal(store_get_into(v2, "z", 10, sizeof(buf), buf, &n), 0);
		assert_int_equal(n, 64);
	}
	assert_true(store_put(v2, "x", big, 1) < 0);
	/* the parent itself: 1 put, 1 get */
	assert_int_equal(store_put(p, "top", big, 10), 0);
	assert_int_equal(store_get(p, "top", 0, STORE_TO_END, &b, &n), 0);
	free(b);

	store_get_stats(v1, &s1);
	store_get_stats(v2, &s2);
	store_get_stats(p, &p1);
	assert_int_equal(s1.requests[STORE_OP_PUT], 4);
	assert_int_equal(s1.requests[STORE_OP_GET], 2);
	assert_int_equal(s1.requests[STORE_OP_HEAD], 1);
	assert_int_equal(s1.requests[STORE_OP_LIST], 1);
	assert_int_equal(s1.requests[STORE_OP_DELETE], 1);
	assert_int_equal(s1.requests[STORE_OP_MPU], 0);
	assert_int_equal(s1.bytes_sent, 1000 + 2000 + 3000 + 5000);
	assert_int_equal(s1.bytes_received, 2000);
	assert_int_equal(s1.errors, 0); /* -ENOENT is an answer */
	assert_int_equal(s1.retries, 0);
	assert_int_equal(s1.window_requests, 9);
	assert_int_equal(s2.requests[STORE_OP_PUT], 3);
	assert_int_equal(s2.requests[STORE_OP_GET], 1);
	assert_int_equal(s2.bytes_sent, 100 + 200 + 1);
	assert_int_equal(s2.bytes_received, 64);
	assert_int_equal(s2.errors, 1);
	/* the parent: the views' requests plus its own */
	for (int op = 0; op < STORE_OP__COUNT; op++) {
		uint64_t own = op == STORE_OP_PUT || op == STORE_OP_GET ? 1 : 0;
		if (d(&p1, &p0, op) != s1.requests[op] + s2.requests[op] + own)
			fail_msg("op %d: parent %llu, views %llu + %llu + own %llu", op,
			         (unsigned long long)d(&p1, &p0, op),
			         (unsigned long long)s1.requests[op],
			         (unsigned long long)s2.requests[op], (unsigned long long)own);
	}
	assert_int_equal(p1.bytes_sent - p0.bytes_sent, s1.bytes_sent + s2.bytes_sent + 10);
	assert_int_equal(p1.bytes_received - p0.bytes_received,
	                 s1.bytes_received + s2.bytes_received + 10);
	assert_int_equal(p1.errors - p0.errors, 1); /* the failed put, in both */

	/* delete_many: one request of the view per 1000 keys, one of the local store per key */
	{
		enum { N = 1500 };
		static char names[N][16];
		const char *keys[N];
		for (int i = 0; i < N; i++) {
			snprintf(names[i], sizeof(names[i]), "m%04d", i);
			keys[i] = names[i];
		}
		store_get_stats(p, &p0);
		store_get_stats(v1, &s1);
		assert_int_equal(store_delete_many(v1, keys, N), 0);
		store_get_stats(p, &p1);
		store_get_stats(v1, &sp);
		assert_int_equal(d(&sp, &s1, STORE_OP_DELETE), 2);
		assert_int_equal(d(&p1, &p0, STORE_OP_DELETE), N);
	}
	/* a listing of 1001 keys: 2 pages, in the view and in the parent */
	{
		for (int i = 0; i < 1001; i++) {
			char k[16];
			snprintf(k, sizeof(k), "l/%04d", i);
			assert_int_equal(store_put(v2, k, "", 0), 0);
		}
		store_get_stats(p, &p0);
		store_get_stats(v2, &s2);
		assert_int_equal(tu_count_keys(v2, "l/"), 1001);
		store_get_stats(p, &p1);
		store_get_stats(v2, &sp);
		assert_int_equal(d(&sp, &s2, STORE_OP_LIST), 2);
		assert_int_equal(d(&p1, &p0, STORE_OP_LIST), 2);
	}
	/* latency: each call is timed in the view and again in the parent */
	{
		struct mw_hist_snap hv, hp;
		store_get_latency(v1, STORE_OP_HEAD, &hv);
		store_get_latency(p, STORE_OP_HEAD, &hp);
		assert_int_equal(hv.count, 1);
		assert_int_equal(hp.count, 1);
	}
	store_close(v1);
	store_close(v2);
	store_close(p);
}

/* Threads: puts through two views and the parent at once. */
struct putter {
	struct store *s;
	const char *tag;
	int rc;
};

static void *putter_run(void *arg)
{
	struct putter *pt = arg;
	char k[32];

	for (int i = 0; i < 50 && pt->rc == 0; i++) {
		snprintf(k, sizeof(k), "t/%s/%03d", pt->tag, i);
		pt->rc = store_put(pt->s, k, k, strlen(k));
	}
	return NULL;
}

static void test_threads(void **state)
{
	(void)state;
	struct store *p = open_store(), *v1, *v2;
	struct putter pt[4];
	pthread_t th[4];
	struct store_stats s1, s2, sp;

	assert_int_equal(store_open_sub(p, "r/1/", &v1), 0);
	assert_int_equal(store_open_sub(p, "r/2/", &v2), 0);
	pt[0] = (struct putter){.s = v1, .tag = "a"};
	pt[1] = (struct putter){.s = v1, .tag = "b"};
	pt[2] = (struct putter){.s = v2, .tag = "a"};
	pt[3] = (struct putter){.s = p, .tag = "a"};
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&th[i], NULL, putter_run, &pt[i]), 0);
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(pt[i].rc, 0);
	}
	assert_int_equal(tu_count_keys(v1, "t/"), 100);
	assert_int_equal(tu_count_keys(v2, "t/"), 50);
	assert_int_equal(tu_count_keys(p, "t/"), 50);
	assert_int_equal(tu_count_keys(p, "r/"), 150);
	get_s(v1, "t/b/049", "t/b/049");
	store_get_stats(v1, &s1);
	store_get_stats(v2, &s2);
	store_get_stats(p, &sp);
	assert_int_equal(s1.requests[STORE_OP_PUT], 100);
	assert_int_equal(s2.requests[STORE_OP_PUT], 50);
	assert_int_equal(sp.requests[STORE_OP_PUT], 200);
	store_close(v1);
	store_close(v2);
	store_close(p);
}

/* Every key of p is under one of the prefixes r/1/ or r/2/. */
static int under_regions(void *arg, const char *key, uint64_t size)
{
	(void)size;
	(*(unsigned *)arg)++;
	if (strncmp(key, "r/1/", 4) && strncmp(key, "r/2/", 4))
		fail_msg("object %s outside the regions' prefixes", key);
	return 0;
}

/* Write, close, reopen an engine on each of two views of one store. */
static void test_engines(void **state)
{
	(void)state;
	struct store *p = open_store(), *v[2];
	struct engine *e[2];
	static uint8_t big[200000];
	char key[32], val[32];
	unsigned nobj = 0;

	assert_int_equal(store_open_sub(p, "r/1/", &v[0]), 0);
	assert_int_equal(store_open_sub(p, "r/2/", &v[1]), 0);
	for (int r = 0; r < 2; r++) {
		e[r] = open_engine(v[r], 20);
		for (int i = 0; i < 300; i++) {
			snprintf(key, sizeof(key), "k%05d", i);
			snprintf(val, sizeof(val), "r%d-v%d", r, i);
			assert_int_equal(
			    engine_put(e[r], key, strlen(key), val, strlen(val), 0, NULL), 0);
		}
		fill(big, sizeof(big), (unsigned)r + 1);
		assert_int_equal(engine_put(e[r], "blob", 4, big, sizeof(big), 0, NULL), 0);
	}
	for (int r = 0; r < 2; r++) {
		struct engine_stats es;
		assert_int_equal(engine_sync(e[r]), 0);
		engine_get_stats(e[r], &es);
		assert_true(es.packs_written >= 1);
		assert_int_equal(engine_close(e[r]), 0);
	}
	/* nothing at the store's root: every object is under its region's prefix */
	assert_int_equal(store_list(p, "", NULL, 0, under_regions, &nobj), 0);
	assert_true(nobj >= 6);
	assert_true(tu_count_keys(p, "r/1/manifest/") >= 1 &&
	            tu_count_keys(p, "r/2/manifest/") >= 1);
	assert_true(tu_count_keys(p, "r/1/pack/") >= 1 && tu_count_keys(p, "r/2/pack/") >= 1);

	for (int r = 0; r < 2; r++) {
		struct engine_stats es;
		struct check_report rep;
		struct check_opts co = {.deep = true};
		char buf[8192];

		e[r] = open_engine(v[r], 20);
		engine_get_stats(e[r], &es);
		assert_int_equal(es.epoch, 2);
		for (int i = 0; i < 300; i++) {
			snprintf(key, sizeof(key), "k%05d", i);
			snprintf(val, sizeof(val), "r%d-v%d", r, i);
			check_value(e[r], key, val, strlen(val));
		}
		fill(big, sizeof(big), (unsigned)r + 1);
		check_value(e[r], "blob", big, sizeof(big));
		/* the engine's store counters are the view's */
		size_t n = engine_stats_format(e[r], buf, sizeof(buf));
		assert_true(n > 100 && n < sizeof(buf));
		assert_non_null(strstr(buf, "store_requests_put "));
		assert_int_equal(engine_close(e[r]), 0);
		/* fsck of the region through its view: clean */
		assert_int_equal(check_store(v[r], &co, &rep), 0);
		assert_true(rep.manifest_version >= 1);
		assert_int_equal(rep.problems, 0);
		assert_int_equal(rep.other.objects, 0);
	}
	nobj = 0;
	assert_int_equal(store_list(p, "", NULL, 0, under_regions, &nobj), 0);
	store_close(v[0]);
	store_close(v[1]);
	store_close(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_isolation, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_prefix, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_key_too_long, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_writers_and_cleanup, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_read_only, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_engines, setup, teardown),
	};
	return cmocka_run_group_tests_name("store_sub", tests, NULL, NULL);
}
