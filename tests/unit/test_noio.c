/*
 * test_noio.c - the no-I/O mark (util/thread.h): a thread that holds a lock
 * marked mw_mutex_set_noio() (the filesystem's fs->mu) or is inside
 * mw_noio_enter() aborts at any store request or engine call that may wait
 * for the store, while the no-wait calls (engine_get_nowait(),
 * engine_write() with ENGINE_NOWAIT, engine_iter_new_nowait()) answer, or
 * say -EWOULDBLOCK for a table block in no cache.  Each call that must abort
 * runs in a forked child.  Debug builds only: with NDEBUG the mark is not kept.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "maint.h"
#include "store.h"
#include "thread.h"

struct fix {
	char dir[64];
	struct store *s;
	struct engine *e;
};

/* An engine on a fresh local store; cache_bytes as engine_opts (0: no block cache). */
static int open_fix(void **state, size_t cache_bytes)
{
	struct fix *f = calloc(1, sizeof(*f));
	struct engine_opts o;

	assert_non_null(f);
	strcpy(f->dir, "/tmp/test_noio.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	assert_int_equal(store_open_local(f->dir, &f->s), 0);
	engine_opts_default(&o);
	o.cache_bytes = cache_bytes;
	assert_int_equal(engine_open(f->s, &o, &f->e), 0);
	*state = f;
	return 0;
}

static int setup(void **state)
{
	struct engine_opts o;

	engine_opts_default(&o);
	return open_fix(state, o.cache_bytes);
}

/* No block cache (and a local store has no disk cache): every table block is cold. */
static int setup_cold(void **state)
{
	return open_fix(state, 0);
}

static int teardown(void **state)
{
	struct fix *f = *state;
	char cmd[96];

	engine_close(f->e);
	store_close(f->s);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	assert_int_equal(system(cmd), 0);
	free(f);
	return 0;
}

/* Run fn(f) in a child; true when the child died of SIGABRT (the mark's check). */
static bool aborts(struct fix *f, void (*fn)(struct fix *))
{
	fflush(NULL);
	pid_t pid = fork();
	int st;

	assert_true(pid >= 0);
	if (pid == 0) {
		fn(f);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void store_get_marked(struct fix *f)
{
	void *b = NULL;
	size_t n;

	mw_noio_enter();
	(void)store_get(f->s, "some/key", 0, STORE_TO_END, &b, &n);
}

static void store_put_under_lock(struct fix *f)
{
	struct mw_mutex mu;

	mw_mutex_init(&mu);
	mw_mutex_set_noio(&mu);
	mw_mutex_lock(&mu);
	(void)store_put(f->s, "some/key", "x", 1);
}

static void store_put_after_unlock(struct fix *f)
{
	struct mw_mutex mu;

	mw_mutex_init(&mu);
	mw_mutex_set_noio(&mu);
	mw_mutex_lock(&mu);
	mw_mutex_unlock(&mu);
	if (store_put(f->s, "some/key", "x", 1))
		_exit(2);
}

static void engine_get_marked(struct fix *f)
{
	void *v = NULL;
	size_t n;

	mw_noio_enter();
	(void)engine_get(f->e, "k", 1, &v, &n);
}

static void engine_write_marked(struct fix *f)
{
	mw_noio_enter();
	(void)engine_put(f->e, "k", 1, "v", 1, 0, NULL);
}

static void engine_wait_room_marked(struct fix *f)
{
	mw_noio_enter();
	(void)engine_wait_room(f->e, 1);
}

/* Store requests and engine waits abort under the mark, and only under it. */
static void test_mark_aborts(void **state)
{
	struct fix *f = *state;

	assert_true(aborts(f, store_get_marked));
	assert_true(aborts(f, store_put_under_lock));
	assert_false(aborts(f, store_put_after_unlock));
	assert_true(aborts(f, engine_get_marked));
	assert_true(aborts(f, engine_write_marked));
	assert_true(aborts(f, engine_wait_room_marked));
}

/* The no-wait calls answer from memory under the mark. */
static void test_nowait_answers(void **state)
{
	struct fix *f = *state;
	void *v = NULL;
	size_t n = 0;

	assert_int_equal(engine_put(f->e, "k", 1, "v", 1, ENGINE_WAIT, NULL), 0);
	mw_noio_enter();
	assert_int_equal(engine_get_nowait(f->e, "k", 1, &v, &n), 0);
	assert_int_equal(n, 1);
	assert_memory_equal(v, "v", 1);
	free(v);
	assert_int_equal(engine_get_nowait(f->e, "k", 1, NULL, &n), 0); /* a probe */
	assert_int_equal(engine_get_nowait(f->e, "none", 4, &v, &n), -ENOENT);

	struct engine_batch *b = NULL;
	assert_int_equal(engine_batch_new(&b), 0);
	assert_int_equal(engine_batch_put(b, "k2", 2, "w", 1), 0);
	assert_int_equal(engine_write(f->e, b, ENGINE_NOWAIT, NULL), 0);
	assert_int_equal(engine_write(f->e, b, ENGINE_NOWAIT | ENGINE_WAIT, NULL), -EINVAL);
	engine_batch_free(b);
	assert_int_equal(engine_get_nowait(f->e, "k2", 2, &v, &n), 0);
	free(v);
	mw_noio_leave();
}

static void engine_iter_marked(struct fix *f)
{
	struct engine_iter *it = NULL;

	mw_noio_enter();
	(void)engine_iter_new(f->e, "a", 1, "z", 1, &it);
}

/*
 * Keys in a table whose blocks no cache holds: the no-wait get and scan say
 * -EWOULDBLOCK under the mark without asking the store (which would abort),
 * the waiting scan aborts, and without the mark the same calls answer.
 */
static void test_nowait_cold(void **state)
{
	struct fix *f = *state;
	struct engine_iter *it = NULL;
	void *v = NULL;
	size_t n = 0;

	assert_int_equal(engine_put(f->e, "k1", 2, "v", 1, ENGINE_WAIT, NULL), 0);
	assert_int_equal(engine_put(f->e, "k2", 2, "w", 1, ENGINE_WAIT, NULL), 0);
	assert_int_equal(maint_flush_now(f->e), 0);
	assert_true(aborts(f, engine_iter_marked));

	mw_noio_enter();
	assert_int_equal(engine_get_nowait(f->e, "k1", 2, &v, &n), -EWOULDBLOCK);
	assert_int_equal(engine_iter_new_nowait(f->e, "a", 1, "z", 1, &it), 0);
	assert_false(engine_iter_valid(it));
	assert_int_equal(engine_iter_status(it), -EWOULDBLOCK);
	engine_iter_free(it);
	mw_noio_leave();

	assert_int_equal(engine_iter_new(f->e, "a", 1, "z", 1, &it), 0);
	assert_true(engine_iter_valid(it));
	engine_iter_next(it);
	assert_true(engine_iter_valid(it));
	engine_iter_next(it);
	assert_false(engine_iter_valid(it));
	assert_int_equal(engine_iter_status(it), 0);
	engine_iter_free(it);
}

/* A scan of keys in the MemTables answers under the mark. */
static void test_nowait_scan_memory(void **state)
{
	struct fix *f = *state;
	struct engine_iter *it = NULL;
	size_t kn = 0;

	assert_int_equal(engine_put(f->e, "k1", 2, "v", 1, ENGINE_WAIT, NULL), 0);
	mw_noio_enter();
	assert_int_equal(engine_iter_new_nowait(f->e, "a", 1, "z", 1, &it), 0);
	assert_true(engine_iter_valid(it));
	assert_memory_equal(engine_iter_key(it, &kn), "k1", 2);
	engine_iter_next(it);
	assert_false(engine_iter_valid(it));
	assert_int_equal(engine_iter_status(it), 0);
	engine_iter_free(it);
	mw_noio_leave();
}

int main(void)
{
#ifdef NDEBUG
	return 77; /* the mark is kept in debug builds only: skipped */
#else
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mark_aborts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nowait_answers, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nowait_cold, setup_cold, teardown),
	    cmocka_unit_test_setup_teardown(test_nowait_scan_memory, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
#endif
}
