/*
 * stats.c - "memwalfs stats [--raw] MOUNTPOINT".
 *
 * The daemon answers getxattr(MWFS_STATS_XATTR) on the root with its
 * counters, one "name value" line each (mwfs_stats_format(); docs/METRICS.md
 * says what each is).  --raw prints them as they are, for scripts, tests and
 * the metrics; by default they are read into a short summary for people:
 * what is mounted, health (a sticky error, an outage, any error or loss
 * counter that is not 0, in words), lag, the caches, the store's requests and
 * bytes per second over the last minute, and space (live data, garbage
 * awaiting GC and when GC takes it).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

#include "commands.h"
#include "daemon.h"
#include "engine.h"
#include "fs.h"
#include "human.h"
#include "metrics.h"

/* Lines read at most: the mount's (~140) and ~50 a region, 64 KiB of them. */
#define COUNTERS_MAX 4096

/* The counters as read: the xattr's text, cut into lines "name value". */
struct counters {
	char *text; /* the xattr's value, NUL-terminated; names and values point into it */
	char *name[COUNTERS_MAX];
	char *value[COUNTERS_MAX];
	int n;
};

/* The value of counter name as a number (0 if absent: an older daemon). */
static int64_t val(const struct counters *c, const char *name)
{
	for (int i = 0; i < c->n; i++)
		if (!strcmp(c->name[i], name))
			return strtoll(c->value[i], NULL, 10);
	return 0;
}

static uint64_t uval(const struct counters *c, const char *name)
{
	int64_t v = val(c, name);
	return v > 0 ? (uint64_t)v : 0;
}

/* Read the counters of the mount at mnt.  0, or -1 (printed). */
static int read_counters(const char *mnt, struct counters *c, size_t *len)
{
	c->text = NULL;
	c->n = 0;
	ssize_t n = getxattr(mnt, MWFS_STATS_XATTR, NULL, 0);
	if (n >= 0) {
		c->text = malloc((size_t)n + 1024);
		if (c->text)
			n = getxattr(mnt, MWFS_STATS_XATTR, c->text, (size_t)n + 1023);
	}
	if (n < 0 || !c->text) {
		fprintf(stderr, "memwalfs: %s: %s (is it a memwalfs mount point?)\n", mnt,
		        strerror(errno));
		free(c->text);
		c->text = NULL;
		return -1;
	}
	c->text[n] = 0;
	*len = (size_t)n;
	return 0;
}

/* Cut the text into names and values (after --raw printed it, or for the summary). */
static void split_counters(struct counters *c)
{
	for (char *save = NULL, *line = strtok_r(c->text, "\n", &save); line && c->n < COUNTERS_MAX;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		*sp = 0;
		c->name[c->n] = line;
		c->value[c->n++] = sp + 1;
	}
}

/* "12:34:56 UTC" of unix time t. */
static const char *utc(int64_t t, char *buf, size_t n)
{
	time_t tt = (time_t)t;
	struct tm tm;
	if (!gmtime_r(&tt, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(buf, n, "%" PRId64, t);
	return buf;
}

/* Percent of part in whole, for "92.1%". */
static double pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0.0;
}

static void print_what(const char *mnt, const struct counters *c)
{
	char type[64] = "", src[PATH_MAX] = "?", info[PATH_MAX + 32];
	char rmnt[PATH_MAX];
	if (!realpath(mnt, rmnt))
		snprintf(rmnt, sizeof(rmnt), "%s", mnt);
	mwd_top_mount(rmnt, type, sizeof(type), src, sizeof(src));
	ssize_t n = getxattr(mnt, MWFS_DAEMON_XATTR, info, sizeof(info) - 1);
	long pid = n > 0 ? (info[n] = 0, strtol(info, NULL, 10)) : 0;
	char mode[256];
	if (val(c, "snapshot_wal_end"))
		snprintf(mode, sizeof(mode), "read-only, a snapshot");
	else if (val(c, "following") && val(c, "lease_ms"))
		snprintf(mode, sizeof(mode),
		         "read-write, following the mount that writes the store (changes: EROFS "
		         "until it lets go; memwalfs region list shows it)");
	else if (val(c, "following"))
		snprintf(mode, sizeof(mode), "read-only, following the writer");
	else if (val(c, "read_only"))
		snprintf(mode, sizeof(mode), "read-only, the state at mount");
	else if (val(c, "lease_ms"))
		snprintf(mode, sizeof(mode), "writer (epoch %" PRId64 ", lease %" PRId64 " s%s)",
		         val(c, "epoch"), val(c, "lease_ms") / 1000,
		         val(c, "lease_overdue") ? ", OVERDUE: another mount may take the store"
		                                 : "");
	else
		snprintf(mode, sizeof(mode), "writer (epoch %" PRId64 ")", val(c, "epoch"));
	printf("%s: %s, %s", rmnt, src, mode);
	if (pid > 0)
		printf(", daemon %ld", pid);
	printf("\n");
}

static void print_health(const struct counters *c)
{
	char b[HUMAN_LEN], t[64];
	bool ok = true;
	int64_t sticky = val(c, "sticky_error");
	if (val(c, "store_lost")) {
		/* the engine's line "# store lost: WHAT; ...", cut at the name "#" */
		const char *what = "objects this filesystem needs are missing";
		for (int i = 0; i < c->n; i++)
			if (!strcmp(c->name[i], "#") && !strncmp(c->value[i], "store lost: ", 12))
				what = c->value[i] + 12;
		printf("health:  STOPPED: the store lost objects (%s)\n", what);
		ok = false;
		sticky = 0; /* its consequence: said above */
	}
	if (sticky) {
		int e = sticky < 0 ? (int)-sticky : (int)sticky;
		printf("health:  STOPPED: %s (sticky_error %" PRId64 "): %s\n", strerror(e), sticky,
		       e == ESTALE ? "another mount took the filesystem over; writes here fail "
		                     "(EIO), reads go on; unmount"
		                   : "writes fail (EIO) until a remount, reads go on; see the "
		                     "daemon's log, unmount and mount again");
		ok = false;
	}
	int64_t since = val(c, "outage_since");
	if (since) {
		int e = (int)val(c, "outage_error");
		printf("health:  the store has not answered for %s (since %s%s%s): writes wait and "
		       "are retried\n",
		       human_secs(uval(c, "outage_seconds"), b), utc(since, t, sizeof(t)),
		       e ? "; last error: " : "", e ? strerror(e < 0 ? -e : e) : "");
		ok = false;
	}
	/* every other counter of errors or losses that is not 0, in words */
	for (int i = 0; i < c->n; i++) {
		const char *nm = c->name[i];
		if (!strncmp(nm, "region.", 7))
			continue; /* a region's own errors: print_regions() says them */
		if (!strcmp(nm, "sticky_error") || !strcmp(nm, "outage_error") ||
		    !strcmp(nm, "store_lost") || (!strstr(nm, "error") && !strstr(nm, "lost")) ||
		    !strtoll(c->value[i], NULL, 10))
			continue;
		const char *h = metrics_stat_help(nm);
		printf("health:  %s %s%s%s%s\n", nm, c->value[i], h ? " (" : "", h ? h : "",
		       h ? ")" : "");
		ok = false;
	}
	if (ok)
		printf("health:  ok\n");
}

static void print_lag(const struct counters *c)
{
	char b[HUMAN_LEN];
	if (val(c, "following")) {
		printf("lag:     the follower was last current %" PRId64 " ms ago; %" PRId64
		       " WAL entries listed, not applied yet\n",
		       val(c, "follow_lag_ms"), val(c, "follow_behind"));
		return;
	}
	if (val(c, "read_only"))
		return;
	printf("lag:     %s written, not yet durable in the store",
	       human_bytes(uval(c, "pending_bytes"), b));
	if (val(c, "writers_waiting"))
		printf("; %" PRId64 " writes waiting for memory", val(c, "writers_waiting"));
	printf("\n");
}

static void print_cache(const struct counters *c)
{
	char a[HUMAN_LEN], b[HUMAN_LEN];
	printf("cache:   memory %s of %s", human_bytes(uval(c, "mem_cache_bytes"), a),
	       human_bytes(uval(c, "mem_cache_capacity"), b));
	if (val(c, "disk_cache_enabled"))
		printf("; disk %s of %s (%" PRId64 " entries)",
		       human_bytes(uval(c, "disk_cache_bytes"), a),
		       human_bytes(uval(c, "disk_cache_capacity"), b),
		       val(c, "disk_cache_entries"));
	else
		printf("; no disk cache");
	printf("\n");
	uint64_t mem = uval(c, "read_mem_hits") + uval(c, "read_region_hits");
	uint64_t disk = uval(c, "read_disk_hits"), gets = uval(c, "read_store_gets");
	uint64_t all = mem + disk + gets;
	if (all)
		printf("         hit rate %.1f%% of %" PRIu64 " block reads (memory %.1f%%, disk "
		       "%.1f%%); %" PRIu64 " GETs from the store\n",
		       pct(mem + disk, all), all, pct(mem, all), pct(disk, all), gets);
	else
		printf("         no block read yet\n");
}

static void print_store(const struct counters *c)
{
	char a[HUMAN_LEN], b[HUMAN_LEN];
	uint64_t w = uval(c, "store_window_sec");
	if (w) {
		double s = (double)w;
		printf(
		    "store:   last %" PRIu64 " s: %.1f requests/s, %s/s sent, %s/s received\n", w,
		    (double)uval(c, "store_window_requests") / s,
		    human_bytes((uint64_t)((double)uval(c, "store_window_bytes_sent") / s), a),
		    human_bytes((uint64_t)((double)uval(c, "store_window_bytes_received") / s), b));
	}
	uint64_t req = 0;
	for (int i = 0; i < c->n; i++)
		if (!strncmp(c->name[i], "store_requests_", 15))
			req += strtoull(c->value[i], NULL, 10);
	printf("         since mount: %" PRIu64 " requests (%" PRId64 " PUT, %" PRId64
	       " GET), %s sent, %s received, %" PRId64 " retried\n",
	       req, val(c, "store_requests_put") + val(c, "store_requests_mpu"),
	       val(c, "store_requests_get"), human_bytes(uval(c, "store_bytes_sent"), a),
	       human_bytes(uval(c, "store_bytes_received"), b), val(c, "store_retries"));
}

/* The value of region rid's counter name ("region.<rid>.<name>"). */
static int64_t rval(const struct counters *c, unsigned long rid, const char *name)
{
	char full[128];
	snprintf(full, sizeof(full), "region.%lu.%s", rid, name);
	return val(c, full);
}

static uint64_t urval(const struct counters *c, unsigned long rid, const char *name)
{
	int64_t v = rval(c, rid, name);
	return v > 0 ? (uint64_t)v : 0;
}

/* One block per region of a mount with regions besides region 0 (region.<rid>. lines). */
static void print_regions(const struct counters *c)
{
	static const char *const holder[] = {"nobody", "a live mount", "a mount that may be alive",
	                                     "a dead mount", "this mount"};
	char a[HUMAN_LEN], b[HUMAN_LEN], m[HUMAN_LEN];
	unsigned long rids[256];
	int nr = 0;
	bool more = false;
	for (int i = 0; i < c->n && nr < 256; i++) {
		const char *nm = c->name[i];
		if (strncmp(nm, "region.", 7))
			continue;
		char *end;
		unsigned long rid = strtoul(nm + 7, &end, 10);
		if (end == nm + 7 || strcmp(end, ".path"))
			continue; /* one line of each region: its path */
		rids[nr++] = rid;
		more |= rid != 0;
	}
	if (!more)
		return; /* region 0 only: the lines above are its */
	printf("regions: %d known here, %" PRId64 " written by this mount\n", nr,
	       val(c, "regions_written"));
	for (int i = 0; i < nr; i++) {
		unsigned long r = rids[i];
		char full[64];
		snprintf(full, sizeof(full), "region.%lu.path", r);
		const char *path = "?";
		for (int k = 0; k < c->n; k++)
			if (!strcmp(c->name[k], full))
				path = c->value[k];
		uint64_t req = 0;
		static const char *const ops[] = ENGINE_STORE_OP_NAMES;
		for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++) {
			snprintf(full, sizeof(full), "store_requests_%s", ops[k]);
			req += urval(c, r, full);
		}
		printf("  region %lu %s: ", r, path);
		if (rval(c, r, "writer"))
			printf("written here (epoch %" PRId64 "): WAL at %" PRId64
			       ", tables cover up to %" PRId64 "; %s not yet durable\n",
			       rval(c, r, "epoch"), rval(c, r, "wal_next"),
			       rval(c, r, "wal_covered"),
			       human_bytes(urval(c, r, "pending_bytes"), a));
		else {
			int64_t hs = rval(c, r, "holder_state");
			/* a read-only mount (no lease) watches no holder */
			printf("followed (written by %s): WAL applied up to %" PRId64 ", %" PRId64
			       " entries behind, current as of %.1f s ago\n",
			       hs >= 0 && hs <= 4   ? holder[hs]
			       : val(c, "lease_ms") ? "a mount not known"
			                            : "a mount this read-only mount does not watch",
			       rval(c, r, "wal_next"), rval(c, r, "follow_behind"),
			       (double)rval(c, r, "follow_lag_ms") / 1000.0);
		}
		printf("    %" PRId64 " commits, %" PRId64 " puts; memtable %s; store: %" PRIu64
		       " requests (%" PRId64 " PUT, %" PRId64 " GET), %s sent, %s received\n",
		       rval(c, r, "groups_committed"), rval(c, r, "puts"),
		       human_bytes(urval(c, r, "memtable_bytes"), m), req,
		       rval(c, r, "store_requests_put") + rval(c, r, "store_requests_mpu"),
		       rval(c, r, "store_requests_get"),
		       human_bytes(urval(c, r, "store_bytes_sent"), a),
		       human_bytes(urval(c, r, "store_bytes_received"), b));
		static const char *const errs[] = {"sticky_error", "batches_lost",
		                                   "store_errors", "follow_errors",
		                                   "gc_errors",    "commit_retries"};
		bool first = true;
		for (size_t k = 0; k < sizeof(errs) / sizeof(errs[0]); k++) {
			int64_t v = rval(c, r, errs[k]);
			if (!v)
				continue;
			printf("%s%s %" PRId64, first ? "    ERRORS: " : ", ", errs[k], v);
			first = false;
		}
		if (!first)
			printf("\n");
	}
}

static void print_space(const struct counters *c)
{
	char a[HUMAN_LEN], b[HUMAN_LEN], g[HUMAN_LEN], t[HUMAN_LEN];
	int64_t now = (int64_t)time(NULL);
	if (val(c, "read_only")) {
		printf("space:   read-only: the writer's GC collects garbage\n");
		return;
	}
	printf("space:   live data about %s (df's Used; overwritten data counts until a GC "
	       "pass finds it dead)\n",
	       human_bytes(uval(c, "live_bytes_est"), a));
	int64_t last = val(c, "gc_last_pass"), next = val(c, "gc_next_pass");
	char when[64] = "";
	if (next)
		snprintf(when, sizeof(when), "next pass in %s",
		         human_secs(next > now ? (uint64_t)(next - now) : 0, t));
	else
		snprintf(when, sizeof(when), "no GC thread: memwalfs fsck/inspect show it");
	if (!last) {
		printf("         no GC pass yet (%s)\n", when);
		return;
	}
	uint64_t packs = uval(c, "store_pack_bytes"), live = uval(c, "store_live_pack_bytes");
	live += uval(c, "store_unflushed_pack_bytes"); /* not flushed yet: counted as live */
	uint64_t garbage = packs > live ? packs - live : 0;
	printf("         at the last GC pass (%s ago): packs %s, of which %s garbage: GC "
	       "deletes what has been unreferenced for %s (%s)\n",
	       human_secs(now > last ? (uint64_t)(now - last) : 0, b), human_bytes(packs, a),
	       human_bytes(garbage, g), human_secs(uval(c, "gc_grace_sec"), t), when);
}

static void stats_usage(FILE *f)
{
	fprintf(f, "usage: memwalfs stats [--raw] MOUNTPOINT\n\n"
	           "A summary of the memwalfs filesystem mounted at MOUNTPOINT: what is mounted,\n"
	           "health (sticky errors, outages, error counters), lag, cache use and hit rate,\n"
	           "store requests and bytes per second over the last minute, space (live data,\n"
	           "garbage awaiting GC and when it goes).  --raw: every counter, one \"name\n"
	           "value\" line each, for scripts (docs/METRICS.md says what each is; memwalfs\n"
	           "mount --metrics-addr serves them to Prometheus).\n");
}

int cmd_stats(int argc, char **argv)
{
	bool raw = false;
	const char *mnt = NULL;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			stats_usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--raw")) {
			raw = true;
		} else if (argv[i][0] != '-' && !mnt) {
			mnt = argv[i];
		} else {
			if (argv[i][0] == '-')
				fprintf(stderr,
				        "memwalfs stats: unknown option %s (valid: --raw)\n",
				        argv[i]);
			else
				fprintf(stderr, "memwalfs stats: one MOUNTPOINT only\n");
			return 2;
		}
	}
	if (!mnt) {
		fprintf(stderr, "usage: memwalfs stats [--raw] MOUNTPOINT (memwalfs stats --help "
		                "explains it)\n");
		return 2;
	}
	struct counters *c = calloc(1, sizeof(*c));
	size_t len;
	if (!c) {
		fprintf(stderr, "memwalfs stats: out of memory\n");
		return 1;
	}
	if (read_counters(mnt, c, &len)) {
		free(c);
		return 1;
	}
	if (raw) {
		fwrite(c->text, 1, len, stdout);
		if (len && c->text[len - 1] != '\n')
			putchar('\n');
	} else {
		split_counters(c);
		print_what(mnt, c);
		print_health(c);
		print_lag(c);
		print_cache(c);
		print_store(c);
		print_regions(c);
		print_space(c);
		printf("every counter: memwalfs stats --raw %s (docs/METRICS.md)\n", mnt);
	}
	free(c->text);
	free(c);
	return 0;
}
