/*
 * inspect.c - "memwalfs inspect" and "memwalfs fsck": what is in a store,
 * and whether it is sound.
 *
 *   memwalfs inspect [store options] STORE
 *       manifest version, epoch, covered WAL position, SSTables by level
 *       with key ranges and sizes, WAL entries after the covered position,
 *       packs with their live fraction, orphans, sizes per kind.
 *   memwalfs fsck [--deep] [store options] STORE
 *       the engine check (engine/check/check.h) and the filesystem check
 *       (fs/fsck.h); prints every problem.  Exit 0 clean, 1 problems found,
 *       2 could not run.
 *
 * Both only read (the store is opened with STORE_OPEN_READ_ONLY: a missing
 * store is an error, never created): they are safe on a mounted (live)
 * store, where objects the daemon writes meanwhile may show as orphans or
 * be missed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "commands.h"
#include "engine.h"
#include "fsck.h"
#include "human.h"
#include "regmap.h"
#include "storeopt.h"

/* Parsed command line of both commands. */
struct args {
	struct s3_opts so; /* store options */
	const char *store; /* STORE argument */
	bool deep;         /* fsck --deep */
	bool salvage;      /* fsck --salvage */
	bool verbose;      /* -v: list every object */
	bool progress;     /* --progress: progress lines on stderr also when not a terminal */
};

static void usage(FILE *f, const char *cmd)
{
	if (!strcmp(cmd, "fsck"))
		fprintf(f,
		        "usage: memwalfs fsck [--deep] [--salvage] [options] STORE\n"
		        "Check the engine objects and the filesystem of STORE (read-only).\n"
		        "  --deep      also read every pack and verify every blob checksum\n"
		        "  --salvage   STORE lost objects (memwalfs stats said store_lost, or a\n"
		        "              mount is refused for a missing object): first write a new\n"
		        "              consistent state over what remains (a new manifest; no\n"
		        "              object is deleted or rewritten), listing what was lost;\n"
		        "              unmount STORE everywhere first (the salvage fences any\n"
		        "              writer left).  Then the check, of the salvaged state.\n"
		        "  --progress  a progress line every 5 s on stderr also when it is not a\n"
		        "              terminal (on a terminal it is always shown)\n"
		        "Exit status: 0 clean, 1 problems found, 2 could not run.\n");
	else
		fprintf(f,
		        "usage: memwalfs inspect [-v] [options] STORE\n"
		        "Show what is in STORE: manifest, SSTables, WAL, packs, orphans.\n"
		        "  -v          list every pack and orphan, not only a summary\n"
		        "  --progress  a progress line every 5 s on stderr also when it is not a\n"
		        "              terminal (on a terminal it is always shown)\n");
	fprintf(f, "STORE is a directory or s3://bucket/prefix.\n");
	storeopt_usage(f);
}

/* Returns 0, or the exit status to return (after printing why). */
static int parse(int argc, char **argv, struct args *a)
{
	const char *cmd = argv[0];

	memset(a, 0, sizeof(*a));
	s3_opts_default(&a->so);
	for (int i = 1; i < argc;) {
		int r = storeopt_parse(&a->so, argc, argv, &i);
		if (r < 0)
			return 2;
		if (r > 0)
			continue;
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout, cmd);
			return -1;
		} else if (!strcmp(argv[i], "--deep") && !strcmp(cmd, "fsck")) {
			a->deep = true;
		} else if (!strcmp(argv[i], "--salvage") && !strcmp(cmd, "fsck")) {
			a->salvage = true;
		} else if (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose")) {
			a->verbose = true;
		} else if (!strcmp(argv[i], "--progress")) {
			a->progress = true;
		} else if (argv[i][0] == '-' && argv[i][1]) {
			fprintf(stderr,
			        "memwalfs %s: unknown option %s (valid: %s-v, --progress, the "
			        "store options; "
			        "memwalfs %s --help)\n",
			        cmd, argv[i], strcmp(cmd, "fsck") ? "" : "--deep, --salvage, ",
			        cmd);
			return 2;
		} else if (!a->store) {
			a->store = argv[i];
		} else {
			usage(stderr, cmd);
			return 2;
		}
		i++;
	}
	if (!a->store) {
		usage(stderr, cmd);
		return 2;
	}
	return 0;
}

/* Print key k as text when printable, else as hex (at most 48 bytes). */
static void print_key(const uint8_t *k, size_t n)
{
	bool text = n > 0;
	size_t m = n > 48 ? 48 : n;
	for (size_t i = 0; i < n; i++)
		if (k[i] < 0x20 || k[i] > 0x7e)
			text = false;
	if (text)
		printf("'%.*s'", (int)m, (const char *)k);
	else
		for (size_t i = 0; i < m; i++)
			printf("%02x", k[i]);
	if (m < n)
		printf("...");
}

/* How to print the events of the engine check. */
struct view {
	bool verbose;
	bool fsck;      /* print problems only */
	unsigned nprob; /* problems printed */
	/* progress on stderr (human.h), for large stores: objects checked so far */
	struct progress prog;
	uint64_t objects;      /* SSTables, WAL entries, packs and orphans seen */
	uint64_t packs, bytes; /* packs seen, bytes of the objects seen */
	/* the orphans by why nothing references them (check.c's reasons) */
	struct {
		const char *why; /* CHECK_ORPHAN's msg (a static string) */
		uint64_t objects, bytes;
	} orphan[8];
	int norphan;
};

/* Remove the progress line before other output. */
static void progress_clear(struct view *v)
{
	prog_clear(&v->prog);
}

/* Count one object checked; show the counts when a line is due. */
static void progress_tick(struct view *v, uint64_t size, bool pack)
{
	char b[HUMAN_LEN];
	v->objects++;
	v->packs += pack;
	v->bytes += size;
	if (prog_due(&v->prog))
		prog_show(&v->prog, "%" PRIu64 " objects checked (%" PRIu64 " packs), %s",
		          v->objects, v->packs, human_bytes(v->bytes, b));
}

/* A phase without counts (the filesystem tree). */
static void progress_phase(struct view *v, const char *what)
{
	prog_clear(&v->prog);
	v->prog.next_ms = 0; /* say it now */
	prog_show(&v->prog, "%s...", what);
}

/* Tally an orphan under its reason. */
static void orphan_count(struct view *v, const char *why, uint64_t size)
{
	int i = 0;
	while (i < v->norphan && strcmp(v->orphan[i].why, why))
		i++;
	if (i == v->norphan) {
		if (i == 8)
			i = 7; /* check.c has four reasons: never */
		else
			v->orphan[v->norphan++].why = why;
	}
	v->orphan[i].objects++;
	v->orphan[i].bytes += size;
}

static void on_event(void *arg, const struct check_event *ev)
{
	struct view *v = arg;
	double pct;

	if (ev->kind != CHECK_MANIFEST && (ev->kind == CHECK_PROBLEM || !v->fsck))
		progress_clear(v); /* a line may follow on stdout */

	switch (ev->kind) {
	case CHECK_PROBLEM:
		v->nprob++;
		printf("PROBLEM %s: %s (%s)\n", ev->object, ev->msg, strerror(-ev->err));
		break;
	case CHECK_MANIFEST:
		break;
	case CHECK_SST:
		if (v->fsck)
			break;
		printf("  L%-2" PRIu32 " %s %10" PRIu64 " bytes %8" PRIu64 " entries  ", ev->level,
		       ev->object, ev->size, ev->entries);
		print_key(ev->smallest, ev->smallest_len);
		printf(" .. ");
		print_key(ev->largest, ev->largest_len);
		printf("\n");
		break;
	case CHECK_WAL:
		if (!v->fsck)
			printf("  wal %s epoch %" PRIu64 " %" PRIu64 " ops %" PRIu64 " bytes\n",
			       ev->object, ev->epoch, ev->entries, ev->size);
		break;
	case CHECK_PACK:
		if (v->fsck || !v->verbose)
			break;
		pct = ev->data_bytes ? 100.0 * (double)ev->live_bytes / (double)ev->data_bytes : 0;
		printf("  pack %s %10" PRIu64 " bytes, live %5.1f%%\n", ev->object, ev->size, pct);
		break;
	case CHECK_ORPHAN:
		orphan_count(v, ev->msg, ev->size);
		if (!v->fsck && v->verbose)
			printf("  orphan %s %" PRIu64 " bytes: %s\n", ev->object, ev->size,
			       ev->msg);
		break;
	}
	fflush(stdout);
	if (ev->kind != CHECK_PROBLEM && ev->kind != CHECK_MANIFEST)
		progress_tick(v, ev->size, ev->kind == CHECK_PACK);
}

static void print_count(const char *what, const struct check_count *c)
{
	char b[HUMAN_LEN];
	printf("  %-10s %8" PRIu64 " objects %14" PRIu64 " bytes %12s\n", what, c->objects,
	       c->bytes, human_bytes(c->bytes, b));
}

/* The orphans: how many, why nothing references them, and when GC takes them. */
static void print_orphans(const struct view *v, const struct check_report *r)
{
	char b[HUMAN_LEN];
	printf("orphans: %" PRIu64 " objects, %s (%" PRIu64 " bytes) that the manifest in use does "
	       "not reference\n",
	       r->orphans.objects, human_bytes(r->orphans.bytes, b), r->orphans.bytes);
	for (int i = 0; i < v->norphan; i++)
		printf("  %8" PRIu64 " objects %12s: %s\n", v->orphan[i].objects,
		       human_bytes(v->orphan[i].bytes, b), v->orphan[i].why);
	if (r->orphans.objects)
		printf(
		    "  (what flushes, compactions and repacks replaced, and overwritten or deleted "
		    "data: a writer mount's GC deletes each once no kept manifest references it "
		    "and it is older than the grace, --gc-grace, 600 s by default, at a pass every "
		    "--gc-interval, 60 s; nothing deletes them while the store is not mounted)\n");
	printf("awaiting GC: %" PRIu64 " objects the manifest's GC records list (deleted at the "
	       "next pass once past the grace)\n",
	       r->awaiting_gc);
}

/*
 * The region map, one line a region (names and paths percent-encoded as in the map:
 * docs/REGIONS.md "The region map").  One LIST and one GET.
 */
static void print_regions(struct store *st)
{
	struct region_map m = {0};
	char name[REGMAP_ENC_MAX(sizeof(m.v->name))], path[REGMAP_ENC_MAX(sizeof(m.v->path))];
	char when[64];
	int rc = region_map_load(st, &m);

	if (rc) {
		printf("regions: the region map does not load: %s\n", strerror(-rc));
		return;
	}
	if (!m.version) {
		printf("regions: no region map (region 0 is the whole store)\n");
		return;
	}
	printf("regions: map version %" PRIu64 ", %zu regions besides region 0, largest rid "
	       "given %" PRIu32 "\n",
	       m.version, m.n, m.max_rid);
	for (size_t i = 0; i < m.n; i++) {
		const struct region_entry *e = &m.v[i];
		time_t t = (time_t)e->since;
		struct tm tm;
		if (!gmtime_r(&t, &tm) ||
		    !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm))
			snprintf(when, sizeof(when), "%" PRId64, e->since);
		printf("  region %" PRIu32 " root %" PRIu64 " parent %" PRIu64 " name %s path %s "
		       "since %s\n",
		       e->rid, e->root_ino, e->parent_ino,
		       regmap_encode(name, sizeof(name), e->name),
		       regmap_encode(path, sizeof(path), e->path), when);
	}
	region_map_free(&m);
}

static int open_store(const struct args *a, const char *cmd, struct store **st)
{
	/* only reads: a missing store is an error, and nothing is written */
	return storeopt_open(a->store, &a->so, STORE_OPEN_READ_ONLY, cmd, st);
}

int cmd_inspect(int argc, char **argv)
{
	struct args a;
	struct store *st = NULL;
	struct view v = {0};
	struct check_opts co = {.fn = on_event, .arg = &v};
	struct check_report r;
	int rc = parse(argc, argv, &a);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (open_store(&a, "inspect", &st))
		return 2;
	v.verbose = a.verbose;
	prog_init(&v.prog, "memwalfs inspect", a.progress);
	printf("store %s\n", a.store);
	printf("live SSTables and uncovered WAL entries:\n");
	rc = check_store(st, &co, &r);
	progress_clear(&v);
	if (rc && rc != -EUCLEAN) {
		fprintf(stderr, "memwalfs inspect: %s\n", strerror(-rc));
		store_close(st);
		return 2;
	}
	printf("manifest version %" PRIu64 ", epoch %" PRIu64 ", WAL covered below %" PRIu64
	       ", last sequence %" PRIu64 "\n",
	       r.manifest_version, r.epoch, r.wal_covered, r.last_seq);
	printf("WAL: %" PRIu64 " entries after the covered position, %" PRIu64
	       " older ones still present\n",
	       r.wal_uncovered, r.wal_old);
	printf("SSTables: %" PRIu64 " entries; blobs referenced: %" PRIu64 "\n", r.sst_entries,
	       r.blobs);
	char pb[HUMAN_LEN], lb[HUMAN_LEN];
	printf("packs: %s of data, %s live (%.1f%%; %" PRIu64 " and %" PRIu64 " bytes)\n",
	       human_bytes(r.pack_data_bytes, pb), human_bytes(r.pack_live_bytes, lb),
	       r.pack_data_bytes ? 100.0 * (double)r.pack_live_bytes / (double)r.pack_data_bytes
	                         : 100.0,
	       r.pack_data_bytes, r.pack_live_bytes);
	print_orphans(&v, &r);
	printf("sizes per kind:\n");
	print_count("manifest", &r.manifests);
	print_count("wal", &r.wal);
	print_count("pack", &r.packs);
	print_count("sst", &r.ssts);
	print_count("snapshot", &r.snapshots);
	print_count("region", &r.regions);
	print_count("r/<rid>/", &r.subregions);
	print_count("other", &r.other);
	print_regions(st);
	if (r.problems)
		printf("%" PRIu64 " problems (run memwalfs fsck)\n", r.problems);
	store_close(st);
	return 0;
}

/* The filesystem check's problems (arg: struct view; its nprob counts them). */
static void fs_problem(void *arg, const char *what, const char *msg)
{
	struct view *v = arg;
	v->nprob++;
	progress_clear(v);
	printf("PROBLEM fs %s: %s\n", what, msg);
	fflush(stdout);
}

/* A loss the salvage reports (arg: unused). */
static void fs_lost(void *arg, const char *what, const char *msg)
{
	(void)arg;
	printf("LOST fs %s: %s\n", what, msg);
	fflush(stdout);
}

/*
 * fsck --salvage: a writer engine with opts.salvage over what remains of STORE
 * (engine/check/salvage.c), the tree repaired (fs/salvage.c), a clean close.  0, or
 * the exit status after a message.
 */
static int salvage(const struct args *a)
{
	struct store *st = NULL;
	struct engine *e = NULL;
	struct engine_opts o;
	struct engine_stats es;
	struct mwfs_salvage_report sr;
	int rc;

	if (storeopt_open(a->store, &a->so, STORE_OPEN_EXISTING, "fsck --salvage", &st))
		return 2;
	engine_opts_default(&o);
	o.salvage = true;
	o.gc_interval_ms = ENGINE_GC_OFF;    /* nothing is deleted */
	o.store_check_ms = ENGINE_CHECK_OFF; /* what is gone is known */
	rc = engine_open(st, &o, &e);
	if (rc) {
		fprintf(stderr, "memwalfs fsck --salvage: %s: cannot open what remains: %s\n",
		        a->store, strerror(-rc));
		store_close(st);
		return 2;
	}
	engine_get_stats(e, &es);
	printf("salvage: manifest epoch %" PRIu64 ", WAL replayed: %" PRIu64 " entries\n", es.epoch,
	       es.replay_entries);
	if (es.salvage_manifests_bad)
		printf("LOST engine: %" PRIu64 " newest manifests did not load (skipped)\n",
		       es.salvage_manifests_bad);
	if (es.salvage_tables_lost)
		printf("LOST engine: %" PRIu64 " SSTables (%" PRIu64 " bytes) were missing: what "
		       "only they held is gone\n",
		       es.salvage_tables_lost, es.salvage_table_bytes_lost);
	if (es.salvage_wal_missing)
		printf("LOST engine: %" PRIu64 " WAL positions were missing: what they held is "
		       "gone\n",
		       es.salvage_wal_missing);
	if (es.salvage_wal_bad)
		printf("LOST engine: %" PRIu64 " WAL entries did not decode (skipped)\n",
		       es.salvage_wal_bad);
	rc = mwfs_salvage(e, fs_lost, NULL, &sr);
	if (rc) {
		fprintf(stderr, "memwalfs fsck --salvage: %s: repairing the tree failed: %s\n",
		        a->store, strerror(-rc));
		engine_close(e);
		store_close(st);
		return 2;
	}
	printf("salvage: %" PRIu64 " files kept (%" PRIu64 " extents); lost: %" PRIu64
	       " names, %" PRIu64 " extents (%" PRIu64 " bytes) in %" PRIu64 " files; %" PRIu64
	       " inodes made again, %" PRIu64 " linked into /lost+found, "
	       "%" PRIu64 " records fixed%s\n",
	       sr.files, sr.extents, sr.names_lost, sr.extents_lost, sr.bytes_lost,
	       sr.files_damaged, sr.inodes_made, sr.relinked, sr.records_fixed,
	       sr.superblock_written ? ", superblock written" : "");
	rc = engine_close(e);
	store_close(st);
	if (rc) {
		fprintf(stderr, "memwalfs fsck --salvage: %s: the final commit failed: %s\n",
		        a->store, strerror(-rc));
		return 2;
	}
	return 0;
}

/* The regions fsck checks besides region 0: the views and read-only engines of the map's. */
struct fsck_regions {
	struct store *views[65]; /* [0]: the store itself (borrowed) */
	struct engine *es[65];   /* [0]: NULL until opened */
	uint32_t rids[65];       /* rid ascending, rids[0] = 0 */
	size_t n;                /* entries in use */
	struct region_map m;     /* the map (zeroed: none) */
};

/*
 * Open a read-only engine on every region of st's map (and region 0's); a region whose
 * engine does not open is a problem, counted in *problems.  0, or the map's error.
 */
static int fsck_open_regions(struct store *st, struct fsck_regions *fr, uint64_t *problems)
{
	struct engine_opts o;
	engine_opts_default(&o);
	o.read_only = true;
	o.single_writer_ok = true;
	memset(fr, 0, sizeof(*fr));
	int rc = region_map_load(st, &fr->m);
	if (rc)
		return rc; /* the engine check reported it already */
	fr->views[0] = st;
	rc = engine_open(st, &o, &fr->es[0]);
	if (rc)
		return rc;
	fr->n = 1;
	for (size_t i = 0; i < fr->m.n && fr->n < sizeof(fr->es) / sizeof(fr->es[0]); i++) {
		char prefix[32];
		uint32_t rid = fr->m.v[i].rid;
		snprintf(prefix, sizeof(prefix), "r/%" PRIu32 "/", rid);
		struct store *v = NULL;
		struct engine *e = NULL;
		rc = store_open_sub(st, prefix, &v);
		if (!rc)
			rc = engine_open(v, &o, &e);
		if (rc) {
			printf("PROBLEM region %" PRIu32 " (%s): its engine does not open: %s\n",
			       rid, fr->m.v[i].path, strerror(-rc));
			(*problems)++;
			store_close(v);
			continue;
		}
		fr->views[fr->n] = v;
		fr->es[fr->n] = e;
		fr->rids[fr->n++] = rid;
	}
	return 0;
}

static void fsck_close_regions(struct fsck_regions *fr)
{
	for (size_t i = 0; i < fr->n; i++) {
		engine_close(fr->es[i]);
		if (i)
			store_close(fr->views[i]);
	}
	region_map_free(&fr->m);
	memset(fr, 0, sizeof(*fr));
}

int cmd_fsck(int argc, char **argv)
{
	struct args a;
	struct store *st = NULL;
	struct view v = {.fsck = true};
	struct check_opts co = {.fn = on_event, .arg = &v};
	struct check_report r;
	struct mwfs_fsck_report fr;
	int rc = parse(argc, argv, &a), frc;

	if (rc)
		return rc < 0 ? 0 : rc;
	if (a.salvage && (rc = salvage(&a)) != 0)
		return rc;
	if (open_store(&a, "fsck", &st))
		return 2;
	co.deep = a.deep;
	prog_init(&v.prog, "memwalfs fsck", a.progress);
	rc = check_store(st, &co, &r);
	progress_clear(&v);
	if (rc && rc != -EUCLEAN) {
		fprintf(stderr, "memwalfs fsck: engine check could not run: %s\n", strerror(-rc));
		store_close(st);
		return 2;
	}
	printf("engine: manifest %" PRIu64 ", %" PRIu64 " SSTables, %" PRIu64
	       " WAL entries to replay, %" PRIu64 " packs, %" PRIu64 " blobs checked%s: %" PRIu64
	       " problems\n",
	       r.manifest_version, r.ssts.objects, r.wal_uncovered, r.packs.objects, r.blobs,
	       a.deep ? " (deep)" : "", r.problems);
	/* each region's engine, through its view (region 0's objects were checked above) */
	struct fsck_regions regs;
	uint64_t reg_problems = 0;
	frc = fsck_open_regions(st, &regs, &reg_problems);
	for (size_t i = 1; !frc && i < regs.n; i++) {
		struct check_report rr;
		int crc = check_store(regs.views[i], &co, &rr);
		progress_clear(&v);
		if (crc && crc != -EUCLEAN) {
			printf("PROBLEM region %" PRIu32 ": the engine check could not run: %s\n",
			       regs.rids[i], strerror(-crc));
			reg_problems++;
			continue;
		}
		printf("engine of region %" PRIu32 ": manifest %" PRIu64 ", %" PRIu64
		       " SSTables, %" PRIu64 " WAL entries to replay, %" PRIu64 " packs: %" PRIu64
		       " problems\n",
		       regs.rids[i], rr.manifest_version, rr.ssts.objects, rr.wal_uncovered,
		       rr.packs.objects, rr.problems);
		reg_problems += rr.problems;
	}
	progress_phase(&v, "checking the filesystem tree (inodes, entries, chunks)");
	fflush(stdout);
	if (!frc)
		frc = mwfs_fsck_regions(regs.es, regs.rids, regs.n, fs_problem, &v, &fr);
	fsck_close_regions(&regs);
	progress_clear(&v);
	if (reg_problems && !rc)
		rc = -EUCLEAN;
	if (frc && frc != -EUCLEAN) {
		fprintf(stderr, "memwalfs fsck: filesystem check could not run: %s\n",
		        strerror(-frc));
		store_close(st);
		return 2;
	}
	printf("filesystem: %" PRIu64 " inodes, %" PRIu64 " directory entries, %" PRIu64
	       " extents, %" PRIu64 " allocated ranges, %" PRIu64 " xattrs, %" PRIu64
	       " orphan records: %" PRIu64 " problems\n",
	       fr.inodes, fr.dentries, fr.extents, fr.allocs, fr.xattrs, fr.orphans, fr.problems);
	store_close(st);
	if (rc || frc) {
		printf("memwalfs fsck: %s: problems found\n", a.store);
		return 1;
	}
	printf("memwalfs fsck: %s: clean\n", a.store);
	return 0;
}
