/*
 * test_fs_faults.c - fs/'s write path over the fault wrapper (no FUSE mount:
 * mwfs_open() and the write buffer's functions directly).
 *
 * An error is logged once, where it happens (docs/DESIGN.md, "Layers"): when
 * the engine's commit of a background put fails and the writer stops, the
 * engine says so, and neither the put of the next buffer (which then fails)
 * nor the flusher's later passes log that error again.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine.h"
#include "internal.h"
#include "testutil.h"

/* Run until ms have passed or cond() holds; whether it held. */
static bool wait_for(struct mwfs *fs, bool (*cond)(struct mwfs *), unsigned ms)
{
	for (unsigned i = 0; i < ms / 10 && !cond(fs); i++)
		usleep(10000);
	return cond(fs);
}

static bool writer_stopped(struct mwfs *fs)
{
	return engine_write_error(fs->reg[0].e) != 0;
}

static bool never(struct mwfs *fs)
{
	(void)fs;
	return false;
}

/* A new regular file with no name (enough for data puts); one reference held. */
static struct inode *new_file(struct mwfs *fs)
{
	struct inode_tx tx;
	struct inode *ip = NULL;
	mw_mutex_lock(&fs->mu);
	assert_int_equal(inode_tx_begin(fs, &tx, SCHEMA_ROOT_INO), 0);
	assert_int_equal(inode_new(fs, tx.b, SCHEMA_ROOT_INO, S_IFREG | 0644, &ip), 0);
	inode_tx_add(&tx, ip);
	assert_int_equal(inode_tx_commit(&tx, 0), 0);
	mw_mutex_unlock(&fs->mu);
	return ip;
}

static void write_buffered(struct mwfs *fs, struct inode *ip, uint64_t off, const char *s)
{
	pthread_rwlock_wrlock(&ip->dlock);
	mw_mutex_lock(&fs->mu); /* the size first, as file.c's write does */
	if (off + strlen(s) > ip->a.size)
		ip->a.size = off + strlen(s);
	mw_mutex_unlock(&fs->mu);
	assert_int_equal(data_write(fs, ip, off, s, (uint32_t)strlen(s)), 0);
	pthread_rwlock_unlock(&ip->dlock);
}

/* Lines of path that hold what. */
static unsigned count_lines(const char *path, const char *what)
{
	char line[2048];
	unsigned n = 0;
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, what)) {
			fprintf(stdout, "log: %s", line);
			n++;
		}
	fclose(f);
	return n;
}

static void background_flush_failure_logged_once(void **state)
{
	(void)state;
	struct tu_store *t = NULL;
	struct engine *e = NULL;
	struct mwfs *fs = NULL;
	struct engine_opts o;
	struct mwfs_opts fo;

	assert_int_equal(tu_store_open("fault", &t), 0);
	engine_opts_default(&o);
	o.cadence_ms = 10;
	o.commit_retry_ms = ENGINE_NO_RETRY; /* the first failed commit stops the writer */
	assert_int_equal(engine_open(t->store, &o, &e), 0);
	mwfs_opts_default(&fo);
	fo.wb_flush_ms = 10;
	assert_int_equal(mwfs_open(e, &fo, &fs), 0);
	struct inode *ip = new_file(fs);
	assert_int_equal(engine_sync(e), 0);

	/* the daemon's log is its stderr: keep it in a file while the store fails */
	char *dir = tu_tempdir();
	char path[4096];
	snprintf(path, sizeof(path), "%s/log", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	close(fd);

	/* every write to the store fails from now on: the commit of the first put stops the writer
	 */
	fault_store_fail_nth(t->fault, FAULT_WRITES, 1, -EIO, FAULT_PERSIST);
	write_buffered(fs, ip, 0, "the first buffer");
	bool stopped = wait_for(fs, writer_stopped, 10000);
	/* the next buffer's background put fails (the writer stopped), pass after pass */
	write_buffered(fs, ip, 4096, "the second buffer");
	wait_for(fs, never, 300); /* 30 passes of the flusher: time to repeat a line */

	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	assert_true(stopped);
	/* the engine's line, once; no line of fs/ repeats the error */
	assert_int_equal(count_lines(path, "Input/output error"), 1);
	assert_int_equal(count_lines(path, "not committed"), 1);
	assert_int_equal(count_lines(path, "inode "), 0);

	/* the second buffer is still held (a put that failed keeps it), and a put says why */
	pthread_rwlock_wrlock(&ip->dlock);
	assert_true(ip->wb.active);
	assert_int_equal(data_flush(fs, ip), -EIO);
	pthread_rwlock_unlock(&ip->dlock);
	mw_mutex_lock(&fs->mu);
	inode_put(fs, ip);
	mw_mutex_unlock(&fs->mu);
	mwfs_close(fs);
	engine_close(e);
	fault_store_clear(t->fault);
	tu_store_close(t);
	free(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(background_flush_failure_logged_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
