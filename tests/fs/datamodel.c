/*
 * datamodel - random data operations on files of a mounted filesystem,
 * checked against a byte-array model of each file (tests/fs/extents.sh).
 *
 *   datamodel DIR MODELDIR OPS SEED [check]
 *
 * Operations (on NFILES files of up to MAXSIZE bytes, through several file
 * descriptors each): pwrite of random sizes (1 byte..1.5 MiB, unaligned and
 * page-aligned, sometimes zeros), pread compared with the model,
 * ftruncate up and down, fallocate punch-hole, copy_file_range between and
 * within files, writes and reads through a shared mmap, fsync, and closing
 * and reopening.  Every 1000 operations and at the end each whole file is
 * compared.  Prints the seed; the same seed replays the same operations.
 * The models are written to MODELDIR/model-N at the end so that a later
 * run with "check" (after a remount) compares the files with them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <linux/falloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xorshift.h"

#define NFILES 4
#define MAXSIZE (24u << 20)
#define NFD 2

static uint64_t rng;

static uint64_t rnd(void)
{
	return xorshift64(&rng);
}

static uint64_t below(uint64_t n)
{
	return n ? rnd() % n : 0;
}

struct file {
	char path[4096];
	int fd[NFD];
	uint8_t *m; /* model bytes */
	uint64_t size;
};

static struct file files[NFILES];
static uint8_t *buf, *buf2;
static uint64_t op;
static uint64_t seed;

static void die(const char *what)
{
	fprintf(stderr, "FAIL: op %" PRIu64 " (seed %" PRIu64 "): %s: %s\n", op, seed, what,
	        strerror(errno));
	exit(1);
}

static void mismatch(const struct file *f, uint64_t off, uint64_t n, const uint8_t *got)
{
	for (uint64_t i = 0; i < n; i++) {
		if (got[i] != f->m[off + i]) {
			fprintf(stderr,
			        "FAIL: op %" PRIu64 " (seed %" PRIu64 "): %s byte %" PRIu64
			        " is %u, model %u (read of %" PRIu64 " at %" PRIu64
			        ", size %" PRIu64 ")\n",
			        op, seed, f->path, off + i, got[i], f->m[off + i], n, off, f->size);
			exit(1);
		}
	}
}

/* Pick an offset, biased towards the end of the file and chunk boundaries. */
static uint64_t pick_off(const struct file *f)
{
	switch (below(4)) {
	case 0:
		return f->size ? below(f->size) : 0;
	case 1:
		return f->size > 4096 ? f->size - below(4096) : f->size; /* near the end */
	case 2: {                                                        /* near a MiB boundary */
		uint64_t m = (1 + below((MAXSIZE >> 20) - 1)) << 20;
		return below(2) ? m - below(64) : m;
	}
	default:
		return below(MAXSIZE / 4096) * 4096; /* page-aligned */
	}
}

static uint64_t pick_len(void)
{
	switch (below(5)) {
	case 0:
		return 1 + below(100);
	case 1:
		return 4096;
	case 2:
		return 1 + below(70000);
	case 3:
		return (1 + below(32)) * 4096;
	default:
		return 1 + below(1536 << 10);
	}
}

static void fill(uint8_t *p, uint64_t n)
{
	int zeros = below(8) == 0;
	uint8_t base = (uint8_t)rnd();
	for (uint64_t i = 0; i < n; i++)
		p[i] = zeros ? 0 : (uint8_t)(base + i * 7 + (i >> 12));
}

static void do_write(struct file *f)
{
	uint64_t off = pick_off(f), n = pick_len();
	if (off + n > MAXSIZE)
		n = MAXSIZE - off;
	if (n == 0)
		return;
	fill(buf, n);
	if (pwrite(f->fd[below(NFD)], buf, n, (off_t)off) != (ssize_t)n)
		die("pwrite");
	memcpy(f->m + off, buf, n);
	if (off + n > f->size)
		f->size = off + n;
}

static void do_read(struct file *f)
{
	uint64_t off = pick_off(f), n = pick_len();
	if (off > f->size)
		off = f->size;
	ssize_t got = pread(f->fd[below(NFD)], buf, n, (off_t)off);
	uint64_t want = off + n > f->size ? f->size - off : n;
	if (got < 0)
		die("pread");
	if ((uint64_t)got != want) {
		fprintf(stderr,
		        "FAIL: op %" PRIu64 " (seed %" PRIu64 "): read %zd bytes, want %" PRIu64
		        "\n",
		        op, seed, got, want);
		exit(1);
	}
	mismatch(f, off, want, buf);
}

static void do_truncate(struct file *f)
{
	uint64_t size = below(3) ? (f->size ? below(f->size) : 0) : below(MAXSIZE);
	if (ftruncate(f->fd[below(NFD)], (off_t)size))
		die("ftruncate");
	if (size > f->size)
		memset(f->m + f->size, 0, size - f->size);
	else
		memset(f->m + size, 0, f->size - size);
	f->size = size;
}

static void do_punch(struct file *f)
{
	uint64_t off = pick_off(f), n = pick_len();
	if (off + n > MAXSIZE)
		n = MAXSIZE - off;
	if (n == 0)
		return;
	if (fallocate(f->fd[below(NFD)], FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
	              (off_t)n))
		die("fallocate punch");
	uint64_t z = off + n < f->size ? off + n : f->size;
	if (off < z)
		memset(f->m + off, 0, z - off);
}

static void do_copy(struct file *s, struct file *d)
{
	uint64_t soff = s->size ? below(s->size) : 0, n = pick_len(), doff = pick_off(d);
	if (doff + n > MAXSIZE)
		n = MAXSIZE - doff;
	if (s == d && soff < doff + n && doff < soff + n)
		return; /* the kernel refuses overlapping ranges of one file */
	loff_t so = (loff_t)soff, dof = (loff_t)doff;
	uint64_t left = n;
	while (left) {
		ssize_t c = copy_file_range(s->fd[0], &so, d->fd[0], &dof, left, 0);
		if (c < 0)
			die("copy_file_range");
		if (c == 0)
			break; /* end of the source */
		left -= (uint64_t)c;
	}
	uint64_t done = n - left;
	memmove(d->m + doff, s->m + soff, done);
	if (done && doff + done > d->size)
		d->size = doff + done;
}

static void do_mmap(struct file *f)
{
	if (f->size == 0)
		return;
	uint64_t off = below(f->size) & ~4095ull;
	uint64_t n = 1 + below(f->size - off < (256 << 10) ? f->size - off : (256 << 10));
	uint8_t *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd[0], (off_t)off);
	if (p == MAP_FAILED)
		die("mmap");
	mismatch(f, off, n, p); /* read through the mapping */
	uint64_t a = below(n), z = a + 1 + below(n - a);
	fill(buf, z - a);
	memcpy(p + a, buf, z - a);
	memcpy(f->m + off + a, buf, z - a);
	if (below(2) && msync(p, n, MS_SYNC))
		die("msync");
	munmap(p, n);
}

static void check_whole(struct file *f)
{
	struct stat st;
	if (fstat(f->fd[0], &st))
		die("fstat");
	if ((uint64_t)st.st_size != f->size) {
		fprintf(stderr,
		        "FAIL: op %" PRIu64 " (seed %" PRIu64 "): %s size %jd, model %" PRIu64 "\n",
		        op, seed, f->path, (intmax_t)st.st_size, f->size);
		exit(1);
	}
	for (uint64_t off = 0; off < f->size; off += MAXSIZE / 8) {
		uint64_t n = f->size - off < MAXSIZE / 8 ? f->size - off : MAXSIZE / 8;
		if (pread(f->fd[0], buf2, n, (off_t)off) != (ssize_t)n)
			die("pread (whole)");
		mismatch(f, off, n, buf2);
	}
}

static void open_fds(struct file *f, int flags)
{
	for (int i = 0; i < NFD; i++) {
		f->fd[i] = open(f->path, O_RDWR | flags, 0644);
		if (f->fd[i] < 0)
			die(f->path);
	}
}

static void close_fds(struct file *f)
{
	for (int i = 0; i < NFD; i++)
		close(f->fd[i]);
}

/* The model of file i, kept beside the mount for a check after a remount. */
static void model_path(char *p, size_t n, const char *dir, int i)
{
	snprintf(p, n, "%s/model-%d", dir, i);
}

int main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: datamodel DIR MODELDIR OPS SEED [check]\n");
		return 2;
	}
	const char *dir = argv[1], *mdir = argv[2];
	uint64_t ops = strtoull(argv[3], NULL, 10);
	seed = strtoull(argv[4], NULL, 10);
	bool check_only = argc > 5 && strcmp(argv[5], "check") == 0;
	rng = seed * 2654435761u + 1;
	buf = malloc(2u << 20);
	buf2 = malloc(MAXSIZE / 8);
	if (!buf || !buf2)
		die("malloc");
	printf("datamodel: %s, %" PRIu64 " operations, seed %" PRIu64 "%s\n", dir, ops, seed,
	       check_only ? " (check)" : "");
	fflush(stdout);
	for (int i = 0; i < NFILES; i++) {
		struct file *f = &files[i];
		char mp[4096];
		snprintf(f->path, sizeof(f->path), "%s/f%d", dir, i);
		f->m = calloc(1, MAXSIZE);
		if (!f->m)
			die("calloc");
		model_path(mp, sizeof(mp), mdir, i);
		if (check_only) {
			int fd = open(mp, O_RDONLY);
			struct stat st;
			if (fd < 0 || fstat(fd, &st) || read(fd, f->m, MAXSIZE) != st.st_size)
				die(mp);
			f->size = (uint64_t)st.st_size;
			close(fd);
			open_fds(f, 0);
			check_whole(f);
			close_fds(f);
		} else {
			open_fds(f, O_CREAT | O_TRUNC);
		}
	}
	if (check_only) {
		printf("datamodel: check ok\n");
		return 0;
	}
	for (op = 1; op <= ops; op++) {
		struct file *f = &files[below(NFILES)];
		unsigned r = (unsigned)below(100);
		if (r < 38)
			do_write(f);
		else if (r < 68)
			do_read(f);
		else if (r < 74)
			do_truncate(f);
		else if (r < 80)
			do_punch(f);
		else if (r < 88)
			do_copy(f, &files[below(NFILES)]);
		else if (r < 94)
			do_mmap(f);
		else if (r < 97) {
			if (fsync(f->fd[below(NFD)]))
				die("fsync");
		} else {
			close_fds(f);
			open_fds(f, 0);
		}
		if (op % 1000 == 0)
			for (int i = 0; i < NFILES; i++)
				check_whole(&files[i]);
	}
	for (int i = 0; i < NFILES; i++) {
		struct file *f = &files[i];
		char mp[4096];
		check_whole(f);
		close_fds(f);
		model_path(mp, sizeof(mp), mdir, i);
		int fd = open(mp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, f->m, f->size) != (ssize_t)f->size)
			die(mp);
		close(fd);
	}
	printf("datamodel: %" PRIu64 " operations ok\n", ops);
	return 0;
}
