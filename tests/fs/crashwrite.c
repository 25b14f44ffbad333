/*
 * crashwrite - random writes into one file until the filesystem under it
 * dies (tests/fs/crash.sh kills its daemon with kill -9), then a check of
 * what survived (issue 13: crash tests with random writes).
 *
 *   crashwrite write FILE LOG SEED [STOP]
 *                                     write until a write or fsync fails (or
 *                                     200,000 writes, or the file STOP exists);
 *                                     LOG (outside the mount) gets the writes
 *                                     issued and the last one an fsync covered
 *   crashwrite check FILE LOG         after a remount: FILE must be the state
 *                                     after the first k writes for some k at
 *                                     or past the last fsync (every fsynced
 *                                     byte exact; later writes a prefix in
 *                                     order, none torn)
 *
 * Writes are 1 byte..256 KiB at random offsets of a 6 MiB file (each one a
 * single FUSE write on a mount without the writeback cache); their bytes are
 * a function of (seed, write number), so the check regenerates them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "xorshift.h"

#define FILESIZE (6u << 20)
#define MAXW (256u << 10)
#define MAXOPS 200000

struct wr {
	uint32_t off, len;
};

static uint64_t rng;

static uint64_t rnd(void)
{
	return xorshift64(&rng);
}

/* The bytes of write i. */
static void fill(uint8_t *p, uint32_t n, uint64_t seed, uint64_t i)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull + 1;
	for (uint32_t j = 0; j < n; j++)
		p[j] = (uint8_t)xorshift64(&x);
}

static int do_write(const char *file, const char *log, uint64_t seed, const char *stop)
{
	static struct wr w[MAXOPS];
	static uint8_t buf[MAXW];
	uint64_t n = 0, synced = 0; /* writes issued; writes covered by an fsync that returned 0 */
	int fd = open(file, O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, FILESIZE) || fsync(fd)) {
		perror(file);
		return 1;
	}
	rng = seed * 2654435761u + 1;
	int err = 0;
	while (n < MAXOPS && !(stop && access(stop, F_OK) == 0)) {
		uint32_t len = (uint32_t)(rnd() % 4 == 0 ? 1 + rnd() % 64 : 1 + rnd() % MAXW);
		uint32_t off = (uint32_t)(rnd() % (FILESIZE - len));
		if (rnd() % 3 == 0)
			off &= ~4095u;
		w[n] = (struct wr){off, len};
		fill(buf, len, seed, n);
		n++; /* issued: it may have landed even if the reply says otherwise */
		if (pwrite(fd, buf, len, off) != (ssize_t)len) {
			err = errno;
			break;
		}
		if (rnd() % 16 == 0) {
			if (fsync(fd)) {
				err = errno;
				break;
			}
			synced = n;
		}
	}
	close(fd);
	FILE *f = fopen(log, "w");
	if (!f || fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", seed, n, synced) < 0) {
		perror(log);
		return 1;
	}
	for (uint64_t i = 0; i < n; i++)
		fprintf(f, "%u %u\n", w[i].off, w[i].len);
	fclose(f);
	printf("crashwrite: %" PRIu64 " writes issued, %" PRIu64
	       " covered by fsync, stopped by: %s\n",
	       n, synced,
	       err          ? strerror(err)
	       : n < MAXOPS ? "the stop file"
	                    : "the limit");
	return 0;
}

static int do_check(const char *file, const char *log)
{
	static struct wr w[MAXOPS];
	static uint8_t buf[MAXW];
	uint64_t seed, n, synced;
	FILE *f = fopen(log, "r");
	if (!f || fscanf(f, "%" SCNu64 " %" SCNu64 " %" SCNu64, &seed, &n, &synced) != 3) {
		fprintf(stderr, "FAIL: cannot read %s\n", log);
		return 1;
	}
	for (uint64_t i = 0; i < n; i++)
		if (fscanf(f, "%u %u", &w[i].off, &w[i].len) != 2) {
			fprintf(stderr, "FAIL: %s is short\n", log);
			return 1;
		}
	fclose(f);
	uint8_t *model = calloc(1, FILESIZE), *got = malloc(FILESIZE);
	int fd = open(file, O_RDONLY);
	struct stat st;
	if (!model || !got || fd < 0 || fstat(fd, &st)) {
		perror(file);
		return 1;
	}
	if (st.st_size != FILESIZE) {
		fprintf(stderr, "FAIL: %s has %jd bytes, want %u (its fsynced size)\n", file,
		        (intmax_t)st.st_size, FILESIZE);
		return 1;
	}
	if (pread(fd, got, FILESIZE, 0) != FILESIZE) {
		perror("pread");
		return 1;
	}
	close(fd);
	/* the model after the fsynced writes, then one write at a time */
	for (uint64_t i = 0; i < synced; i++) {
		fill(buf, w[i].len, seed, i);
		memcpy(model + w[i].off, buf, w[i].len);
	}
	for (uint64_t k = synced;; k++) {
		if (memcmp(model, got, FILESIZE) == 0) {
			printf("crashwrite: the file is the state after %" PRIu64 " of %" PRIu64
			       " writes (%" PRIu64 " fsynced): ok\n",
			       k, n, synced);
			return 0;
		}
		if (k == n)
			break;
		fill(buf, w[k].len, seed, k);
		memcpy(model + w[k].off, buf, w[k].len);
	}
	/* name the first byte that no prefix explains, against the fsynced state */
	memset(model, 0, FILESIZE);
	for (uint64_t i = 0; i < synced; i++) {
		fill(buf, w[i].len, seed, i);
		memcpy(model + w[i].off, buf, w[i].len);
	}
	for (uint32_t b = 0; b < FILESIZE; b++)
		if (model[b] != got[b]) {
			fprintf(stderr,
			        "FAIL: the file is no state the writes went through (seed %" PRIu64
			        ", %" PRIu64 " writes, %" PRIu64
			        " fsynced); first byte differing from "
			        "the fsynced state: %u\n",
			        seed, n, synced, b);
			return 1;
		}
	fprintf(stderr, "FAIL: the file is no state the writes went through (seed %" PRIu64 ")\n",
	        seed);
	return 1;
}

int main(int argc, char **argv)
{
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "write"))
		return do_write(argv[2], argv[3], strtoull(argv[4], NULL, 10),
		                argc == 6 ? argv[5] : NULL);
	if (argc == 4 && !strcmp(argv[1], "check"))
		return do_check(argv[2], argv[3]);
	fprintf(stderr,
	        "usage: crashwrite write FILE LOG SEED [STOP] | crashwrite check FILE LOG\n");
	return 2;
}
