/*
 * snapshot.c - "memwalfs snapshot": named, pinned states of a store
 * (docs/SNAPSHOTS.md; the engine's part is engine/core/snapshot.c).
 *
 *   memwalfs snapshot create [opts] STORE NAME   pin the current durable state
 *   memwalfs snapshot list   [opts] STORE        name, manifest, WAL range, time
 *   memwalfs snapshot delete [opts] STORE NAME   unpin (GC frees what it kept)
 *
 * Any machine, mounted or not: a snapshot is one object per region written beside
 * each region's writer's, and each writer's GC honours its region's (a store with
 * regions: one consistent cut of every region, engine/region/regsnap.c).  "memwalfs
 * mount --snapshot NAME STORE MNT" mounts one read-only, regions included.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "engine.h"
#include "human.h"
#include "storeopt.h"

static void usage(FILE *f)
{
	fprintf(f,
	        "usage: memwalfs snapshot create|list|delete [options] STORE [NAME]\n"
	        "  create STORE NAME   pin the current durable state of STORE as NAME (any\n"
	        "                      machine, while mounted too; NAME: letters, digits,\n"
	        "                      '.', '_', '-', at most 100, not starting with '.');\n"
	        "                      the time it takes on a terminal (--progress: also\n"
	        "                      elsewhere, every 5 s)\n"
	        "  list STORE          the snapshots: name, manifest version, WAL range, time;\n"
	        "                      then a line per region besides region 0 it pins\n"
	        "  delete STORE NAME   remove NAME; the writer's GC frees what only it kept\n"
	        "Mount one with: memwalfs mount --snapshot NAME STORE MOUNTPOINT (read-only).\n");
	storeopt_usage(f);
}

static int print_snap(void *arg, uint32_t rid, const struct engine_snapshot *s)
{
	char when[64] = "?";
	time_t t = (time_t)s->created;
	struct tm tm;

	(void)arg;
	if (rid) {
		printf("  region %" PRIu32 " manifest %" PRIu64 " epoch %" PRIu64 " wal %" PRIu64
		       "..%" PRIu64 "\n",
		       rid, s->manifest, s->epoch, s->wal_from, s->wal_end);
		return 0;
	}
	if (gmtime_r(&t, &tm))
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	printf("%s manifest %" PRIu64 " epoch %" PRIu64 " wal %" PRIu64 "..%" PRIu64 " %s\n",
	       s->name, s->manifest, s->epoch, s->wal_from, s->wal_end, when);
	return 0;
}

/* Progress of a snapshot create: the time it has taken, from a thread beside the create. */
struct create_progress {
	struct progress prog; /* human.h: used by the thread only while it runs */
	const char *store;    /* STORE, for the line */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done; /* the create returned (protected by mu) */
};

static void *create_progress_main(void *arg)
{
	struct create_progress *c = arg;
	pthread_mutex_lock(&c->mu);
	while (!c->done) {
		/* a line when due: at once when asked for on a non-terminal, else after 1 s */
		prog_show(&c->prog,
		          "pinning the state of %s (its manifest, a listing of the WAL)...",
		          c->store);
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 200 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	prog_clear(&c->prog);
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

/* region_snapshot_create() with a progress line (human.h) while it runs. */
static int create_with_progress(struct store *st, const char *store, const char *name, bool force,
                                struct engine_snapshot *s, size_t *nregions)
{
	struct create_progress c = {.store = store, .done = false};
	pthread_t t;
	prog_init(&c.prog, "memwalfs snapshot create", force);
	pthread_mutex_init(&c.mu, NULL);
	pthread_cond_init(&c.cv, NULL);
	bool thread =
	    (c.prog.tty || force) && pthread_create(&t, NULL, create_progress_main, &c) == 0;
	int rc = region_snapshot_create(st, name, s, nregions);
	if (thread) {
		pthread_mutex_lock(&c.mu);
		c.done = true;
		pthread_cond_signal(&c.cv);
		pthread_mutex_unlock(&c.mu);
		pthread_join(t, NULL);
	}
	pthread_cond_destroy(&c.cv);
	pthread_mutex_destroy(&c.mu);
	return rc;
}

int cmd_snapshot(int argc, char **argv)
{
	struct s3_opts o;
	struct store *st = NULL;
	const char *pos[3];
	int npos = 0, rc;
	bool progress = false; /* --progress: create's progress also when not a terminal */

	s3_opts_default(&o);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *sub = argv[1];
	bool create = !strcmp(sub, "create"), del = !strcmp(sub, "delete"),
	     list = !strcmp(sub, "list");
	if (!create && !del && !list) {
		fprintf(stderr, "memwalfs snapshot: unknown subcommand %s (create, list, delete)\n",
		        sub);
		return 2;
	}
	for (int i = 2; i < argc;) {
		int r = storeopt_parse(&o, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--progress")) {
			progress = true;
			i++;
			continue;
		}
		if ((argv[i][0] == '-' && argv[i][1]) || npos == 3) {
			fprintf(stderr,
			        "memwalfs snapshot: unexpected %s (memwalfs snapshot --help)\n",
			        argv[i]);
			return 2;
		}
		pos[npos++] = argv[i++];
	}
	if (npos != (list ? 1 : 2)) {
		usage(stderr);
		return 2;
	}
	rc = store_open_url_flags(pos[0], &o, list ? STORE_OPEN_READ_ONLY : STORE_OPEN_EXISTING,
	                          &st);
	if (rc) {
		fprintf(stderr, "memwalfs snapshot: cannot open store %s: %s\n", pos[0],
		        storeopt_strerror(rc));
		return 1;
	}
	if (create) {
		struct engine_snapshot s;
		size_t nregions = 0;
		rc = create_with_progress(st, pos[0], pos[1], progress, &s, &nregions);
		if (rc == 0) {
			print_snap(NULL, 0, &s);
			if (nregions)
				printf(
				    "  and %zu regions besides region 0 (memwalfs snapshot list)\n",
				    nregions);
		}
	} else if (del) {
		rc = region_snapshot_delete(st, pos[1]);
	} else {
		rc = region_snapshot_list(st, print_snap, NULL);
	}
	store_close(st);
	if (rc) {
		const char *why = rc == -EEXIST   ? "a snapshot of that name exists"
		                  : rc == -EINVAL ? "not a valid snapshot name"
		                  : rc == -ENOENT ? (create ? "the store holds no filesystem yet"
		                                            : "no such snapshot")
		                                  : strerror(-rc);
		fprintf(stderr, "memwalfs snapshot %s: %s\n", sub, why);
		return 1;
	}
	return 0;
}
