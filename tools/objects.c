/*
 * objects.c - "memwalfs objects": look at (and, carefully, change) the
 * objects of a store directly, below the filesystem and the engine.
 *
 *   memwalfs objects ls    [opts] STORE [PREFIX]   keys and sizes, in key order
 *   memwalfs objects du    [opts] STORE [PREFIX]   count and bytes per top-level kind
 *   memwalfs objects stat  [opts] STORE KEY        size, entity tag, mtime
 *   memwalfs objects cat   [opts] STORE KEY        object bytes to stdout
 *   memwalfs objects put   [opts] STORE KEY [FILE] object from FILE (default stdin)
 *   memwalfs objects rm    [opts] STORE KEY...     delete objects
 *   memwalfs objects cleanup [opts] STORE [PREFIX] remove abandoned uploads / temp files
 *
 * STORE is a local directory or s3://bucket/prefix (see storeopt.h).  It
 * must exist: no subcommand creates a store, and ls, du, stat and cat open
 * it read-only (STORE_OPEN_READ_ONLY: nothing is written, not even the
 * conditional-create probe of S3).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "human.h"
#include "storeopt.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: memwalfs objects ls|du|stat|cat|put|rm|cleanup [options] STORE [ARGS]\n"
	           "  ls STORE [PREFIX]      list keys and sizes in key order\n"
	           "  du STORE [PREFIX]      object count and bytes per top-level kind (on a\n"
	           "                         terminal with progress; --progress: also elsewhere)\n"
	           "  stat STORE KEY         size, entity tag and mtime (UTC) of an object\n"
	           "  cat STORE KEY          write an object to stdout\n"
	           "  put STORE KEY [FILE]   store FILE (default: stdin) as KEY\n"
	           "  rm STORE KEY...        delete objects\n"
	           "  cleanup STORE [PREFIX] remove abandoned uploads and temp files\n"
	           "STORE is a directory or s3://bucket/prefix; it must exist (nothing here\n"
	           "creates a store, and ls, du, stat and cat never write).\n");
	storeopt_usage(f);
}

static int print_key(void *arg, const char *key, uint64_t size)
{
	(void)arg;
	printf("%12" PRIu64 "  %s\n", size, key);
	return 0;
}

/* Totals per top-level kind (the first '/'-separated segment of the key). */
struct du {
	char kind[16][64];
	uint64_t count[16], bytes[16];
	int n;
	struct progress prog; /* objects listed so far, on stderr (a large store lists long) */
	uint64_t listed, listed_bytes;
};

static int du_key(void *arg, const char *key, uint64_t size)
{
	struct du *d = arg;
	char b[HUMAN_LEN];
	d->listed++;
	d->listed_bytes += size;
	if (prog_due(&d->prog))
		prog_show(&d->prog, "%" PRIu64 " objects listed, %s", d->listed,
		          human_bytes(d->listed_bytes, b));
	size_t len = strcspn(key, "/");
	int i;
	if (len >= sizeof(d->kind[0]))
		len = sizeof(d->kind[0]) - 1;
	for (i = 0; i < d->n; i++)
		if (strlen(d->kind[i]) == len && !strncmp(d->kind[i], key, len))
			break;
	if (i == d->n) {
		if (d->n == 16)
			i = 15; /* fold the rest into the last row */
		else
			d->n++;
		memcpy(d->kind[i], key, len);
		d->kind[i][len] = '\0';
	}
	d->count[i]++;
	d->bytes[i] += size;
	return 0;
}

static int read_all(FILE *f, char **out, size_t *outlen)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			char *nb = realloc(buf, cap *= 2);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
		}
		size_t r = fread(buf + n, 1, cap - n, f);
		n += r;
		if (r == 0)
			break;
	}
	if (ferror(f)) {
		free(buf);
		return -EIO;
	}
	*out = buf;
	*outlen = n;
	return 0;
}

int cmd_objects(int argc, char **argv)
{
	struct s3_opts o;
	struct store *st = NULL;
	const char *
	    *pos; /* the arguments that are no option: STORE, then KEY... (rm: any number) */
	int npos = 0, rc = 0;
	bool progress = false; /* --progress: du's progress lines also when not a terminal */

	s3_opts_default(&o);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *sub = argv[1];
	pos = calloc((size_t)argc, sizeof(*pos));
	if (!pos) {
		fprintf(stderr, "memwalfs objects: out of memory\n");
		return 1;
	}
	for (int i = 2; i < argc;) {
		int r = storeopt_parse(&o, argc, argv, &i);
		if (r < 0) {
			rc = 2;
			goto out;
		}
		if (r == 0) {
			if (!strcmp(argv[i], "--progress")) {
				progress = true;
				i++;
				continue;
			}
			if (argv[i][0] == '-' && argv[i][1]) {
				fprintf(
				    stderr,
				    "memwalfs objects: unknown option %s (valid: --progress, the "
				    "store options; memwalfs objects --help)\n",
				    argv[i]);
				rc = 2;
				goto out;
			}
			pos[npos++] = argv[i++];
		}
	}
	if (npos < 1) {
		usage(stderr);
		rc = 2;
		goto out;
	}
	/* never creates a store; ls, du, stat and cat write nothing at all */
	bool looks =
	    !strcmp(sub, "ls") || !strcmp(sub, "du") || !strcmp(sub, "stat") || !strcmp(sub, "cat");
	rc = storeopt_open(pos[0], &o, looks ? STORE_OPEN_READ_ONLY : STORE_OPEN_EXISTING,
	                   "objects", &st);
	if (rc) {
		rc = 1;
		goto out;
	}
	if (!strcmp(sub, "ls")) {
		rc = store_list(st, npos > 1 ? pos[1] : "", NULL, 0, print_key, NULL);
	} else if (!strcmp(sub, "du")) {
		struct du d = {.n = 0};
		uint64_t tc = 0, tb = 0;
		char b[HUMAN_LEN];
		prog_init(&d.prog, "memwalfs objects du", progress);
		rc = store_list(st, npos > 1 ? pos[1] : "", NULL, 0, du_key, &d);
		prog_clear(&d.prog);
		for (int i = 0; !rc && i < d.n; i++) {
			printf("%-12s %10" PRIu64 " objects %14" PRIu64 " bytes %12s\n", d.kind[i],
			       d.count[i], d.bytes[i], human_bytes(d.bytes[i], b));
			tc += d.count[i];
			tb += d.bytes[i];
		}
		if (!rc)
			printf("%-12s %10" PRIu64 " objects %14" PRIu64 " bytes %12s\n", "total",
			       tc, tb, human_bytes(tb, b));
	} else if (!strcmp(sub, "stat") && npos == 2) {
		struct store_stat s;
		rc = store_head(st, pos[1], &s);
		if (!rc) {
			char when[64] = "?";
			time_t t = (time_t)s.mtime;
			struct tm tm;
			if (gmtime_r(&t, &tm))
				strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
			printf("key   %s\nsize  %" PRIu64 "\netag  %s\nmtime %s (%" PRId64 ")\n",
			       pos[1], s.size, s.etag, when, s.mtime);
		}
	} else if (!strcmp(sub, "cat") && npos == 2) {
		void *buf;
		size_t n;
		rc = store_get(st, pos[1], 0, STORE_TO_END, &buf, &n);
		if (!rc) {
			if (fwrite(buf, 1, n, stdout) != n)
				rc = -EIO;
			free(buf);
		}
	} else if (!strcmp(sub, "put") && (npos == 2 || npos == 3)) {
		FILE *f = npos == 3 ? fopen(pos[2], "rb") : stdin;
		char *buf;
		size_t n;
		if (!f) {
			rc = -errno;
		} else {
			rc = read_all(f, &buf, &n);
			if (f != stdin)
				fclose(f);
			if (!rc) {
				rc = store_put(st, pos[1], buf, n);
				free(buf);
			}
		}
	} else if (!strcmp(sub, "rm") && npos >= 2) {
		rc = store_delete_many(st, pos + 1, (size_t)npos - 1);
	} else if (!strcmp(sub, "cleanup")) {
		unsigned n = 0;
		rc = store_cleanup_uploads(st, npos > 1 ? pos[1] : "", 0, &n);
		if (!rc)
			printf("removed %u abandoned uploads\n", n);
	} else {
		usage(stderr);
		store_close(st);
		rc = 2;
		goto out;
	}
	store_close(st);
	if (rc) {
		fprintf(stderr, "memwalfs objects %s: %s\n", sub, strerror(-rc));
		rc = 1;
	}
out:
	free(pos);
	return rc;
}
