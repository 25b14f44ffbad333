/*
 * test_notify.c - fs/notify.c, the mount's notify queue, without a session (nothing is
 * sent; the refresh hook shows what the thread takes): an inode queued many times while
 * the thread is busy is taken once; past the queue's bound it becomes "everything" (every
 * inode of the table once, the rest dropped); entries of directories the table does not
 * hold are skipped; stop with items queued returns.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "internal.h"

/* The hook: blocks while the gate is closed, records every inode it is called for. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool open;
	size_t entered; /* calls that started */
	uint64_t seen[64];
	size_t n;
} H = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

static int hook(struct mwfs *fs, uint64_t ino)
{
	(void)fs;
	pthread_mutex_lock(&H.mu);
	H.entered++;
	pthread_cond_broadcast(&H.cv);
	while (!H.open)
		pthread_cond_wait(&H.cv, &H.mu);
	if (H.n < 64)
		H.seen[H.n] = ino;
	H.n++;
	pthread_cond_broadcast(&H.cv);
	pthread_mutex_unlock(&H.mu);
	return 1;
}

static void gate(bool open)
{
	pthread_mutex_lock(&H.mu);
	H.open = open;
	if (!open)
		H.n = H.entered = 0;
	pthread_cond_broadcast(&H.cv);
	pthread_mutex_unlock(&H.mu);
}

/* Wait until the hook returned n times (no deadline: the test's timeout is one). */
static void wait_calls(size_t n)
{
	pthread_mutex_lock(&H.mu);
	while (H.n < n)
		pthread_cond_wait(&H.cv, &H.mu);
	pthread_mutex_unlock(&H.mu);
}

/* Wait until the thread is in the hook: it has taken the queue. */
static void wait_entered(void)
{
	pthread_mutex_lock(&H.mu);
	while (H.entered == 0)
		pthread_cond_wait(&H.cv, &H.mu);
	pthread_mutex_unlock(&H.mu);
}

static bool seen(uint64_t ino)
{
	for (size_t i = 0; i < H.n && i < 64; i++)
		if (H.seen[i] == ino)
			return true;
	return false;
}

/* A filesystem handle with an inode table holding inodes 7 and 8 (one bucket). */
static struct mwfs *fake_fs(void)
{
	struct mwfs *fs = calloc(1, sizeof(*fs));
	static struct inode a, b;
	assert_non_null(fs);
	mw_mutex_init(&fs->mu);
	a.ino = 7;
	b.ino = 8;
	a.hnext = &b;
	fs->htab = calloc(1, sizeof(*fs->htab));
	assert_non_null(fs->htab);
	fs->htab[0] = &a;
	fs->hsize = 1;
	fs->hcount = 2;
	return fs;
}

static void fake_free(struct mwfs *fs)
{
	free(fs->htab);
	mw_mutex_destroy(&fs->mu);
	free(fs);
}

static void test_merge(void **state)
{
	(void)state;
	struct mwfs *fs = fake_fs();
	struct fsnotify *nf = NULL;
	gate(false);
	assert_int_equal(fsnotify_start(fs, hook, &nf), 0);
	fsnotify_inode(nf, 1, 0, 4096); /* the thread takes it and waits in the hook */
	wait_entered();
	for (uint64_t i = 0; i < 3000; i++) {
		fsnotify_inode(nf, 2 + i % 3, i * 4096, 4096);
		fsnotify_entry(nf, 99, "name", 4); /* 99 is not in the table: skipped */
	}
	fsnotify_inode(nf, 3, 0, 0); /* the whole inode absorbs its ranges */
	gate(true);
	wait_calls(4);
	fsnotify_stop(nf);
	assert_int_equal(H.n, 4); /* 1, then 2, 3, 4 once each */
	for (uint64_t ino = 1; ino <= 4; ino++)
		assert_true(seen(ino));
	fake_free(fs);
}

static void test_bound(void **state)
{
	(void)state;
	struct mwfs *fs = fake_fs();
	struct fsnotify *nf = NULL;
	gate(false);
	assert_int_equal(fsnotify_start(fs, hook, &nf), 0);
	fsnotify_inode(nf, 1, 0, 0);
	wait_entered();
	for (uint64_t i = 0; i < 10000; i++) /* more inodes than the queue holds */
		fsnotify_inode(nf, 1000 + i, 0, 4096);
	fsnotify_inode(nf, 500, 0, 0); /* covered by "everything" */
	gate(true);
	wait_calls(3);
	fsnotify_stop(nf);
	assert_int_equal(H.n, 3); /* 1, then the table's 7 and 8 */
	assert_true(seen(1) && seen(7) && seen(8));
	fake_free(fs);
}

static void test_stop_queued(void **state)
{
	(void)state;
	struct mwfs *fs = fake_fs();
	struct fsnotify *nf = NULL;
	gate(true);
	assert_int_equal(fsnotify_start(fs, NULL, &nf), 0);
	fsnotify_session(nf, NULL);
	for (uint64_t i = 0; i < 100; i++)
		fsnotify_inode(nf, i, 0, 0);
	fsnotify_all(nf);
	fsnotify_stop(nf); /* queued work is dropped, the thread joins */
	fsnotify_stop(NULL);
	fsnotify_inode(NULL, 1, 0, 0);
	fake_free(fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_merge),
	    cmocka_unit_test(test_bound),
	    cmocka_unit_test(test_stop_queued),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
