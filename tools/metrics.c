/*
 * metrics.c - the daemon's Prometheus endpoint (see metrics.h).
 *
 * One thread, one connection at a time: it polls the listening socket and a
 * stop pipe, reads a request head (bounded: 8 KiB, 5 s), answers and closes.
 * A scrape every few seconds is the load this is for; a slow client holds
 * only the next scrape back, never the filesystem.  Rendering reads the
 * statistics the way `memwalfs stats` does (mwfs_stats_format(), which takes
 * the engine's locks briefly) and the lock-free histograms (util/hist.h).
 *
 * Follower lag: memwalfs_follower_lag_entries is follow_behind (WAL entries
 * listed but not applied), 0 on a writer; memwalfs_follow_lag_ms is the time
 * since the follower last found itself current.
 *
 * The stats lines are "name value"; each known name has a type here
 * (stat_types[]) and becomes memwalfs_NAME (gauges) or memwalfs_NAME_total
 * (counters; store_requests_OP becomes memwalfs_store_requests_total{op=}).
 * A name added to the stats without a type here is exported untyped, and the
 * unit test test_metrics fails until it gets one.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "config.h"
#include "engine.h"
#include "fs.h"
#include "hist.h"
#include "metrics.h"
#include "store.h"

struct metrics {
	int fd;                             /* listening socket */
	int stop_pipe[2];                   /* written once by metrics_stop() to end the thread */
	pthread_t thread;                   /* the server */
	struct store *st;                   /* borrowed, may be NULL (const after start) */
	pthread_mutex_t mu;                 /* protects e and fs (held through a scrape) */
	struct engine *e;                   /* borrowed while attached, else NULL; mu */
	struct mwfs *fs;                    /* borrowed while attached, else NULL; mu */
	pthread_mutex_t pmu;                /* protects the progress fields */
	uint64_t check_done, check_total;   /* WAL entries checked read-only; pmu */
	uint64_t replay_done, replay_total; /* WAL entries replayed; pmu */
};

/* ---- types and help of the stats lines ---------------------------------- */

struct stat_type {
	const char *name; /* stats line name */
	bool counter;     /* counter (only grows) or gauge */
	const char *help; /* HELP text */
};

static const struct stat_type stat_types[] = {
    {"epoch", false, "writer epoch claimed at open"},
    {"wal_next", false, "next WAL position"},
    {"wal_covered", false, "WAL position covered by flushed SSTables"},
    {"puts", true, "engine put operations applied"},
    {"deletes", true, "engine delete operations applied"},
    {"batches", true, "engine write calls (atomic batches)"},
    {"groups_committed", true, "commit groups written (WAL entries)"},
    {"group_bytes", true, "bytes of WAL entries written"},
    {"packs_written", true, "blob packs written (commit groups' and flushes')"},
    {"wal_blob_bytes", true, "blob bytes carried inside WAL entries"},
    {"flush_packs", true, "packs of blobs promoted from the WAL at MemTable flush"},
    {"flush_pack_bytes", true, "bytes of the packs written at MemTable flush"},
    {"pack_bytes", true, "bytes of blob packs written"},
    {"commit_usec_total", true, "microseconds spent committing groups"},
    {"commit_usec_max", false, "longest group commit, microseconds"},
    {"pending_bytes", false, "bytes applied but not yet durable"},
    {"backpressure_waits", true, "writes that waited for memory"},
    {"memtable_bytes", false, "bytes in the active MemTable"},
    {"frozen_count", false, "frozen MemTables not yet flushed"},
    {"frozen_bytes", false, "bytes in frozen MemTables"},
    {"sst_count", false, "live SSTables"},
    {"flushes", true, "MemTable flushes"},
    {"compactions", true, "compactions"},
    {"gc_deleted", true, "objects deleted by GC"},
    {"blob_cache_hits", true, "blob cache hits"},
    {"blob_cache_misses", true, "blob cache misses"},
    {"blob_fetches", true, "ranged GETs of blob blocks"},
    {"blob_fetch_bytes", true, "bytes of blob blocks fetched"},
    {"block_cache_hits", true, "SSTable block cache hits"},
    {"block_cache_misses", true, "SSTable blocks read from the store"},
    {"block_read_arounds", true, "SSTable blocks brought by the GET of the block before them"},
    {"bloom_negatives", true, "SSTable reads avoided by bloom filters"},
    {"mem_cache_bytes", false, "bytes the memory caches hold (blocks, regions)"},
    {"mem_cache_capacity", false, "the memory caches' budget (--cache-size)"},
    {"read_mem_hits", true, "pack and SSTable blocks served from the memory caches"},
    {"read_mem_bytes", true, "bytes served from the memory caches"},
    {"read_region_hits", true, "pack blocks served from coalesced regions (checked at use)"},
    {"read_region_aheads", true, "pack regions fetched ahead of a scan of small files"},
    {"read_region_pinned_bytes", false,
     "bytes of evicted regions that blocks served from them keep in memory"},
    {"read_region_ahead_pending", false,
     "pack regions queued for or being fetched by the read-ahead"},
    {"read_disk_hits", true, "pack and SSTable blocks served from the disk cache"},
    {"read_disk_bytes", true, "bytes served from the disk cache"},
    {"read_disk_misses", true, "disk cache lookups that found no valid entry"},
    {"read_store_gets", true, "ranged GETs of pack and SSTable blocks"},
    {"read_store_bytes", true, "bytes of those GETs"},
    {"disk_cache_enabled", false, "1 if this mount has a disk cache"},
    {"disk_cache_inserting", false, "1 while the disk cache still takes new entries"},
    {"disk_cache_bytes", false, "bytes of the disk cache's files"},
    {"disk_cache_entries", false, "entries in the disk cache"},
    {"disk_cache_capacity", false, "the disk cache's size bound"},
    {"disk_cache_inserts", true, "entries written to the disk cache"},
    {"disk_cache_insert_bytes", true, "bytes written to the disk cache"},
    {"disk_cache_dropped", true, "disk cache writes not made (queue full, inserts stopped)"},
    {"disk_cache_evictions", true, "disk cache entries evicted by the size bound"},
    {"disk_cache_corrupt", true, "damaged disk cache entries found and deleted"},
    {"read_buffers_in_use", false, "1 MiB read buffers of the pool held now (GETs, cache)"},
    {"read_buffers_resident_bytes", false, "memory the pool of read buffers has touched"},
    {"read_buffers_fallbacks", true, "read buffers malloc()ed because the pool had none free"},
    {"replay_entries", false, "WAL entries replayed at open"},
    {"replay_bytes", false, "WAL bytes replayed at open"},
    {"replay_usec", false, "microseconds the replay at open took"},
    {"replay_gap_entries", false, "WAL entries listed after a gap at open (never acknowledged)"},
    {"fence_positions", false, "WAL positions the open's fence took"},
    {"replay_entries_per_sec", false, "replay speed at open"},
    {"sticky_error", false, "errno that stopped the writer (0: none)"},
    {"batches_lost", false, "writes applied here whose commit never succeeded (fenced, failed)"},
    {"store_lost", false,
     "1 once the store lost objects this filesystem needs: the mount acknowledges nothing "
     "more (docs/DESIGN.md)"},
    {"store_lost_since", false, "unix time the loss was found (0: not lost)"},
    {"store_checks", true, "checks that the store holds what the filesystem needs"},
    {"store_check_errors", true, "store checks whose listings failed (tried again)"},
    {"read_only", false, "1 if the engine is read-only"},
    {"gc_passes", true, "GC passes completed"},
    {"gc_skipped", true, "GC wake-ups with nothing to collect"},
    {"gc_errors", true, "GC passes that failed"},
    {"gc_bytes_reclaimed", true, "bytes of the objects GC deleted"},
    {"repacked_blobs", true, "live blobs rewritten out of mostly dead packs"},
    {"repacked_bytes", true, "bytes of repacked blobs"},
    {"store_pack_bytes", false, "pack bytes in the store at the last GC pass"},
    {"store_live_pack_bytes", false, "of which referenced by the newest manifest"},
    {"store_unflushed_pack_bytes", false, "of which only the WAL references (not yet flushed)"},
    {"gc_last_pass", false, "unix time the last GC pass ended (0: none yet)"},
    {"gc_next_pass", false, "unix time the GC thread wakes next (0: no GC thread)"},
    {"gc_grace_sec", false, "unreferenced objects are kept this long, seconds (--gc-grace)"},
    {"live_bytes_est", false, "estimated live data, bytes (statfs used)"},
    {"outage_since", false, "unix time commits began failing (0: store reachable)"},
    {"outage_seconds", false, "seconds the current outage has lasted"},
    {"outage_error", false, "errno of the last transient commit failure"},
    {"outages", true, "store outages ridden out or going on"},
    {"commit_retries", true, "commit attempts that failed and were retried"},
    {"writers_waiting", false, "writes held by backpressure now"},
    {"sync_timeouts", true, "syncs that gave up after the fsync timeout"},
    {"following", false, "1 if a follower thread tails the writer's WAL"},
    {"follow_polls", true, "follower polls of the store"},
    {"follow_entries", true, "WAL entries a follower applied since open"},
    {"follow_manifests", true, "newer manifests a follower installed"},
    {"follow_jumps", true, "manifests installed past the WAL applied (fell behind)"},
    {"follow_errors", true, "follower polls that failed"},
    {"follow_gaps", true, "follower polls that found the next WAL entry missing"},
    {"follow_lag_ms", false, "ms since the follower last found itself current"},
    {"follow_behind", false, "WAL entries listed but not yet applied by the follower"},
    {"follow_interval_ms", false, "the follower's current poll interval, ms"},
    {"follow_deep_idle", false,
     "1 if the follower is deep idle (bell mode: it polls every 5 min until the bell rings)"},
    {"follow_wakes", true, "times the bell woke the follower from deep idle"},
    {"lease_ms", false, "this mount's lease on the store it writes, ms (--lease)"},
    {"lease_renewals", true, "writes of this mount's lease object that succeeded"},
    {"lease_renew_failures", true, "writes of this mount's lease object that failed"},
    {"lease_last_renew_ms", false, "ms since the lease was last written (-1: never)"},
    {"lease_overdue", false,
     "1 if this mount holds the store and its lease went unwritten "
     "for a whole lease (others may take the store over)"},
    {"lease_requests", true, "store requests of the lease (renewals, looks at holders)"},
    {"holder_self", false, "1 if this mount writes the store, 0 if it follows another"},
    {"holder_state", false,
     "the store's holder: 0 free, 1 live, 2 unsure, 3 dead, 4 this "
     "mount, -1 not known"},
    {"holder_quiet_ms", false, "how long the holder's lease has been seen unchanged, ms"},
    {"regions_known", false, "regions this mount has opened (region 0 included)"},
    {"writer", false, "1 if this mount writes the region, 0 if it follows it (region.N.)"},
    {"path", false, "the region's root, from the mount's root (memwalfs_region_info)"},
    {"regions_written", false, "regions this mount writes (holds)"},
    {"bell_rings", true, "writes of the store's bell by this mount (after a quiet)"},
    {"bell_ring_failures", true, "writes of the bell that failed (retried)"},
    {"bell_reads", true, "reads of the store's bell (every bell interval while following)"},
    {"bell_read_failures", true, "reads of the bell that failed (followers woken)"},
    {"bell_changes", true, "reads that found the bell rung (followers woken)"},
    {"bell_followers", false, "following engines the bell wakes"},
    {"snapshot_wal_end", false, "opened from a snapshot: its WAL end (else 0)"},
    {"store_requests_", true, "requests sent to the store, per class"},
    {"store_retries", true, "store requests repeated after a retryable failure"},
    {"store_errors", true, "store operations that failed"},
    {"store_bytes_sent", true, "payload bytes uploaded"},
    {"store_bytes_received", true, "payload bytes downloaded"},
    {"store_window_sec", false, "seconds the store_window_ gauges cover (60, less after mount)"},
    {"store_window_requests", false, "store requests sent in the last store_window_sec seconds"},
    {"store_window_bytes_sent", false, "payload bytes uploaded in the last store_window_sec s"},
    {"store_window_bytes_received", false,
     "payload bytes downloaded in the last store_window_sec s"},
    {"fs_readahead_chunks", true, "chunks prefetched by read-ahead"},
    {"fs_read_waits", true, "reads that waited for a prefetch in flight"},
    {"fs_folded_windows", true, "file windows folded into one extent"},
    {"fs_page_invalidations", true,
     "inode invalidations sent to the kernel (after direct writes; a follower's changes)"},
    {"fs_inval_retries", true,
     "a follower's inode invalidations sent again: the kernel did not hold the inode yet"},
    {"fs_noio_retries", true,
     "steps under the filesystem lock retried after reading what memory lacked without it"},
};

/* "region.<rid>.NAME": NAME, and the rid into *rid; else NULL. */
static const char *region_field(const char *name, unsigned long *rid)
{
	char *end;
	if (strncmp(name, "region.", 7) || name[7] < '0' || name[7] > '9')
		return NULL;
	*rid = strtoul(name + 7, &end, 10);
	return *end == '.' && end[1] ? end + 1 : NULL;
}

static const struct stat_type *find_type(const char *name)
{
	unsigned long rid;
	const char *field = region_field(name, &rid);
	if (field) /* a region's line: typed as the mount's line of that name */
		name = field;
	for (size_t i = 0; i < sizeof(stat_types) / sizeof(stat_types[0]); i++) {
		const char *t = stat_types[i].name;
		size_t n = strlen(t);
		if (t[n - 1] == '_' ? !strncmp(name, t, n) : !strcmp(name, t))
			return &stat_types[i];
	}
	return NULL;
}

const char *metrics_stat_type(const char *name)
{
	const struct stat_type *t = find_type(name);
	return t ? (t->counter ? "counter" : "gauge") : NULL;
}

const char *metrics_stat_help(const char *name)
{
	const struct stat_type *t = find_type(name);
	return t ? t->help : NULL;
}

/* ---- rendering ---------------------------------------------------------- */

static void family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* One stats line "name value" as its metric; store_requests_* are grouped by the caller. */
static void stat_line(FILE *f, const char *name, const char *value)
{
	const struct stat_type *t = find_type(name);
	char full[160];
	size_t n = strlen(name);
	bool has_total = n > 6 && !strcmp(name + n - 6, "_total");
	snprintf(full, sizeof(full), "memwalfs_%s%s", name,
	         t && t->counter && !has_total ? "_total" : "");
	family(f, full,
	       !t           ? "untyped"
	       : t->counter ? "counter"
	                    : "gauge",
	       t ? t->help : "a memwalfs stats counter this version does not describe");
	fprintf(f, "%s %s\n", full, value);
}

static void ratio(FILE *f, const char *name, const char *help, uint64_t hits, uint64_t misses)
{
	family(f, name, "gauge", help);
	fprintf(f, "%s %.6f\n", name, hits + misses ? (double)hits / (double)(hits + misses) : 0.0);
}

/* A histogram in seconds; labels: "" or e.g. "op=\"put\"". */
static void hist(FILE *f, const char *name, const char *labels, const struct mw_hist_snap *h)
{
	uint64_t cum = 0;
	const char *sep = labels[0] ? "," : "";
	for (int i = 0; i < MW_HIST_BUCKETS; i++) {
		cum += h->bucket[i];
		fprintf(f, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name, labels, sep,
		        (double)mw_hist_bounds_us[i] / 1e6, cum);
	}
	fprintf(f, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, h->count);
	fprintf(f, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
	        (double)h->sum_us / 1e6);
	fprintf(f, "%s_count%s%s%s %" PRIu64 "\n", name, labels[0] ? "{" : "", labels,
	        labels[0] ? "}" : "", h->count);
}

/* A label value with \\, " and newlines escaped (the text format's rules). */
static void label_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fputc('\\', f);
		if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* A region's stats line: "region.<rid>.<field> <value>", pointing into the stats text. */
struct rline {
	unsigned long rid;
	const char *field, *value;
};

/*
 * The regions' lines (docs/METRICS.md, "Per region"), one family per field, the regions its
 * samples (labelled region="<rid>"): store_requests_OP in memwalfs_region_store_requests_total
 * {region=,op=}, path in memwalfs_region_info{region=,path=}, every other field
 * memwalfs_region_FIELD (counters _total), typed as the mount's line of that name.
 */
static void region_metrics(FILE *f, const struct rline *rl, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		bool req = !strncmp(rl[i].field, "store_requests_", 15);
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = req ? !strncmp(rl[j].field, "store_requests_", 15)
			           : !strcmp(rl[j].field, rl[i].field);
		if (seen)
			continue; /* its family is out already */
		const struct stat_type *t = find_type(rl[i].field);
		char full[160];
		bool info = !strcmp(rl[i].field, "path");
		if (info)
			snprintf(full, sizeof(full), "memwalfs_region_info");
		else if (req)
			snprintf(full, sizeof(full), "memwalfs_region_store_requests_total");
		else
			snprintf(full, sizeof(full), "memwalfs_region_%s%s", rl[i].field,
			         t && t->counter ? "_total" : "");
		family(f, full,
		       info || !t   ? "gauge"
		       : t->counter ? "counter"
		                    : "gauge",
		       info  ? "a region this mount knows (1), its root's path"
		       : req ? "requests of the region's engine sent to the store, per class"
		       : t   ? t->help
		             : "a memwalfs stats counter this version does not describe");
		for (size_t j = i; j < n; j++) {
			if (req ? strncmp(rl[j].field, "store_requests_", 15)
			        : strcmp(rl[j].field, rl[i].field))
				continue;
			fprintf(f, "%s{region=\"%lu\"", full, rl[j].rid);
			if (req)
				fprintf(f, ",op=\"%s\"", rl[j].field + 15);
			if (info) {
				fputs(",path=\"", f);
				label_value(f, rl[j].value);
				fputs("\"} 1\n", f);
			} else {
				fprintf(f, "} %s\n", rl[j].value);
			}
		}
	}
}

/* The stats lines: each becomes a metric; store_requests_OP lines one labelled family. */
static void stats_metrics(FILE *f, char *text)
{
	uint64_t bh = 0, bm = 0, kh = 0, km = 0, behind = 0;
	bool requests_done = false;
	struct rline *rl = NULL;
	size_t nrl = 0, cap = 0;
	for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *sp = strchr(line, ' ');
		if (!sp || line[0] == '#')
			continue; /* "# ..." lines are words for `memwalfs stats` readers */
		*sp = 0;
		const char *name = line, *value = sp + 1;
		unsigned long rid;
		const char *field = region_field(name, &rid);
		if (field) {
			if (nrl == cap) {
				size_t nc = cap ? 2 * cap : 256;
				struct rline *g = realloc(rl, nc * sizeof(*rl));
				if (!g)
					continue; /* out of memory: that line is left out */
				rl = g;
				cap = nc;
			}
			rl[nrl++] = (struct rline){rid, field, value};
			continue;
		}
		if (!strncmp(name, "store_requests_", 15)) {
			if (!requests_done)
				family(f, "memwalfs_store_requests_total", "counter",
				       find_type(name)->help);
			requests_done = true;
			fprintf(f, "memwalfs_store_requests_total{op=\"%s\"} %s\n", name + 15,
			        value);
			continue;
		}
		uint64_t v = strtoull(value, NULL, 10);
		if (!strcmp(name, "blob_cache_hits"))
			bh = v;
		else if (!strcmp(name, "blob_cache_misses"))
			bm = v;
		else if (!strcmp(name, "block_cache_hits"))
			kh = v;
		else if (!strcmp(name, "block_cache_misses"))
			km = v;
		else if (!strcmp(name, "follow_behind"))
			behind = v;
		stat_line(f, name, value);
	}
	ratio(f, "memwalfs_blob_cache_hit_ratio", "blob cache hits / lookups since open (0: none)",
	      bh, bm);
	ratio(f, "memwalfs_block_cache_hit_ratio",
	      "SSTable block cache hits / lookups since open (0: none)", kh, km);
	family(f, "memwalfs_follower_lag_entries", "gauge",
	       "WAL entries a read-only follower has listed but not applied (follow_behind; 0 on "
	       "a writer)");
	fprintf(f, "memwalfs_follower_lag_entries %" PRIu64 "\n", behind);
	region_metrics(f, rl, nrl);
	free(rl);
}

int metrics_render(struct metrics *m, char **out, size_t *len)
{
	static const char *const op_names[STORE_OP__COUNT] = {"put",  "get",    "head",
	                                                      "list", "delete", "mpu"};
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	if (!f)
		return -ENOMEM;
	struct mw_hist_snap h;

	pthread_mutex_lock(&m->mu);
	family(f, "memwalfs_info", "gauge", "memwalfs version (always 1)");
	fprintf(f, "memwalfs_info{version=\"%s\"} 1\n", MEMWALFS_VERSION);
	family(f, "memwalfs_serving", "gauge",
	       "1 once the filesystem is mounted and served, 0 while it opens or closes");
	fprintf(f, "memwalfs_serving %d\n", m->fs ? 1 : 0);

	pthread_mutex_lock(&m->pmu);
	family(f, "memwalfs_open_progress_entries", "gauge",
	       "WAL entries done and to do by the read-only check (phase=check) and the replay "
	       "(phase=replay) while the mount opens");
	fprintf(f,
	        "memwalfs_open_progress_entries{phase=\"check\",of=\"done\"} %" PRIu64 "\n"
	        "memwalfs_open_progress_entries{phase=\"check\",of=\"total\"} %" PRIu64 "\n"
	        "memwalfs_open_progress_entries{phase=\"replay\",of=\"done\"} %" PRIu64 "\n"
	        "memwalfs_open_progress_entries{phase=\"replay\",of=\"total\"} %" PRIu64 "\n",
	        m->check_done, m->check_total, m->replay_done, m->replay_total);
	pthread_mutex_unlock(&m->pmu);

	if (m->fs) {
		char *text = malloc(65536);
		if (text) {
			size_t tn = mwfs_stats_format(m->fs, text, 65536);
			(void)tn; /* truncated at 64 KiB: far more than the stats need */
			stats_metrics(f, text);
			free(text);
		}
		engine_get_commit_latency(m->e, &h);
		family(f, "memwalfs_commit_duration_seconds", "histogram",
		       "time of each group commit (blob pack and WAL entry)");
		hist(f, "memwalfs_commit_duration_seconds", "", &h);
		mwfs_get_fsync_latency(m->fs, &h);
		family(f, "memwalfs_fsync_duration_seconds", "histogram",
		       "time of fsync and fsyncdir requests, request to reply");
		hist(f, "memwalfs_fsync_duration_seconds", "", &h);
	}
	pthread_mutex_unlock(&m->mu);
	if (m->st) {
		family(
		    f, "memwalfs_store_request_duration_seconds", "histogram",
		    "time of store calls per class (put, get, head, list, delete, mpu: streaming "
		    "upload finish), retries included");
		for (int op = 0; op < STORE_OP__COUNT; op++) {
			char labels[32];
			snprintf(labels, sizeof(labels), "op=\"%s\"", op_names[op]);
			store_get_latency(m->st, (enum store_op)op, &h);
			hist(f, "memwalfs_store_request_duration_seconds", labels, &h);
		}
	}
	if (fclose(f)) {
		free(buf);
		return -ENOMEM;
	}
	*out = buf;
	*len = n;
	return 0;
}

/* ---- the server --------------------------------------------------------- */

static int send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void reply(int fd, const char *status, const char *type, const char *body, size_t n,
                  bool head_only)
{
	char hdr[256];
	int hn = snprintf(hdr, sizeof(hdr),
	                  "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
	                  "Connection: close\r\n\r\n",
	                  status, type, n);
	if (send_all(fd, hdr, (size_t)hn) == 0 && !head_only)
		send_all(fd, body, n);
}

/* Read one request head and answer it. */
static void serve_one(struct metrics *m, int fd)
{
	char req[8192];
	size_t n = 0;
	struct timeval tv = {5, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	while (n < sizeof(req) - 1) {
		ssize_t r = recv(fd, req + n, sizeof(req) - 1 - n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		req[n] = 0;
		if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
			break;
	}
	req[n] = 0;
	char method[8] = "", path[256] = "";
	if (sscanf(req, "%7s %255s", method, path) != 2) {
		const char *msg = "bad request\n";
		reply(fd, "400 Bad Request", "text/plain", msg, strlen(msg), false);
		return;
	}
	bool head = !strcmp(method, "HEAD");
	if (strcmp(method, "GET") && !head) {
		const char *msg = "only GET and HEAD\n";
		reply(fd, "405 Method Not Allowed", "text/plain", msg, strlen(msg), false);
		return;
	}
	char *q = strchr(path, '?');
	if (q)
		*q = 0;
	if (!strcmp(path, "/metrics")) {
		char *body = NULL;
		size_t bn = 0;
		if (metrics_render(m, &body, &bn) == 0)
			reply(fd, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, bn,
			      head);
		else
			reply(fd, "500 Internal Server Error", "text/plain", "out of memory\n", 14,
			      head);
		free(body);
	} else if (!strcmp(path, "/")) {
		const char *msg = "memwalfs: the metrics are at /metrics\n";
		reply(fd, "200 OK", "text/plain", msg, strlen(msg), head);
	} else {
		const char *msg = "not found: the metrics are at /metrics\n";
		reply(fd, "404 Not Found", "text/plain", msg, strlen(msg), head);
	}
}

static void *server_main(void *arg)
{
	struct metrics *m = arg;
	struct pollfd p[2] = {{m->fd, POLLIN, 0}, {m->stop_pipe[0], POLLIN, 0}};
	for (;;) {
		int r = poll(p, 2, -1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 || p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		int c = accept4(m->fd, NULL, NULL, SOCK_CLOEXEC);
		if (c < 0)
			continue;
		serve_one(m, c);
		close(c);
	}
	return NULL;
}

/* ---- life cycle --------------------------------------------------------- */

int metrics_listen(const char *addr, int *fd)
{
	char host[256];
	const char *colon = strrchr(addr, ':');
	if (!colon || !colon[1] || (size_t)(colon - addr) >= sizeof(host)) {
		fprintf(stderr,
		        "memwalfs: --metrics-addr %s: give HOST:PORT, e.g. 127.0.0.1:9108, "
		        "[::1]:9108 or :9108 (every interface)\n",
		        addr);
		return -EINVAL;
	}
	const char *h = addr;
	size_t hn = (size_t)(colon - addr);
	if (hn >= 2 && h[0] == '[' && h[hn - 1] == ']') {
		h++;
		hn -= 2;
	}
	memcpy(host, h, hn);
	host[hn] = 0;
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (*end || port < 1 || port > 65535) {
		fprintf(stderr, "memwalfs: --metrics-addr %s: the port must be 1-65535\n", addr);
		return -EINVAL;
	}
	struct addrinfo hints = {.ai_flags = AI_PASSIVE | AI_NUMERICSERV,
	                         .ai_family = AF_UNSPEC,
	                         .ai_socktype = SOCK_STREAM},
	                *res = NULL;
	int rc = getaddrinfo(hn ? host : NULL, colon + 1, &hints, &res);
	if (rc) {
		fprintf(stderr, "memwalfs: --metrics-addr %s: %s\n", addr, gai_strerror(rc));
		return -1;
	}
	int err = 0, s = -1;
	for (struct addrinfo *ai = res; ai && s < 0; ai = ai->ai_next) {
		s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (s < 0) {
			err = errno;
			continue;
		}
		int one = 1;
		setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(s, ai->ai_addr, ai->ai_addrlen) || listen(s, 16)) {
			err = errno;
			close(s);
			s = -1;
		}
	}
	freeaddrinfo(res);
	if (s < 0) {
		fprintf(stderr, "memwalfs: --metrics-addr %s: cannot listen there: %s%s\n", addr,
		        strerror(err),
		        err == EADDRINUSE ? " (another program uses the port)"
		        : err == EACCES   ? " (ports below 1024 need root)"
		                          : "");
		return -1;
	}
	*fd = s;
	return 0;
}

int metrics_start(int fd, struct store *st, struct metrics **out)
{
	struct metrics *m = calloc(1, sizeof(*m));
	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	m->fd = fd;
	m->st = st;
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->pmu, NULL);
	if (pipe2(m->stop_pipe, O_CLOEXEC)) {
		int rc = -errno;
		close(fd);
		free(m);
		return rc;
	}
	/* the thread takes no signals: the FUSE session's handlers run in its threads */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int rc = pthread_create(&m->thread, NULL, server_main, m);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc) {
		close(m->stop_pipe[0]);
		close(m->stop_pipe[1]);
		close(fd);
		free(m);
		return -rc;
	}
	*out = m;
	return 0;
}

void metrics_progress(struct metrics *m, const char *phase, uint64_t done, uint64_t total)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->pmu);
	if (!strcmp(phase, "check")) {
		m->check_done = done;
		m->check_total = total;
	} else {
		m->replay_done = done;
		m->replay_total = total;
	}
	pthread_mutex_unlock(&m->pmu);
}

void metrics_attach(struct metrics *m, struct engine *e, struct mwfs *fs)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->mu);
	m->e = e;
	m->fs = fs;
	pthread_mutex_unlock(&m->mu);
}

void metrics_stop(struct metrics *m)
{
	if (!m)
		return;
	ssize_t w;
	do
		w = write(m->stop_pipe[1], "x", 1);
	while (w < 0 && errno == EINTR);
	pthread_join(m->thread, NULL);
	close(m->stop_pipe[0]);
	close(m->stop_pipe[1]);
	close(m->fd);
	pthread_mutex_destroy(&m->mu);
	pthread_mutex_destroy(&m->pmu);
	free(m);
}
