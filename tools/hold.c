/*
 * hold.c - a read-write mount's hold on its store (docs/REGIONS.md, "Holders and
 * leases").
 *
 * A read-write mount writes the store only while it holds it.  At mount it opens its lease
 * (mounts/<id>, renewed while it holds anything) and asks who holds region 0, the whole
 * store:
 *
 *   - nobody, or a mount that released it or died (its lease ran out): this mount takes it
 *     (holder/<epoch> by put-if-absent, then the engine's claim of exactly that epoch) and
 *     mounts as the writer, as before;
 *   - a live mount: this mount follows it instead of fencing it.  It serves reads from a
 *     following engine, refuses changes with EROFS (one log line names the holder), and
 *     takes the store over at the first change after the holder let go of it: the take
 *     hook below (fs/mode.c switches the mount to the writer engine it opens);
 *   - --takeover: taken by force; the live holder is fenced (its later changes fail with
 *     EIO, docs/WAL.md), as before.
 *
 * The engine's epoch claim and WAL fence still decide who may commit; the lease only keeps
 * a mount from fencing a live holder by accident and lets a dead one be replaced.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hold.h"
#include "log.h"
#include "metrics.h"

struct hold {
	struct mount_args *a; /* borrowed: the mount's options */
	struct store *st;     /* borrowed */
	struct region_lease *l;
	struct engine *e;  /* the engine the mount uses now */
	struct mwfs *fs;   /* the filesystem, once open (metrics) */
	char said[17 + 8]; /* the holder (mount id and state) the last refusal named */
	double looks;      /* take()'s looks left to spend (HOLD_LOOKS_PER_SEC) */
	int64_t looks_ms;  /* when it was last refilled (monotonic) */
};

/*
 * A change refused because the store is held looks at the holder again (three requests),
 * so that the first change after the holder's unmount is taken at once; at most this many
 * a second (and as many in a burst): a program that retries a refused change in a loop
 * gets the watch's answer (renewed every third of a lease) in between.
 */
#define HOLD_LOOKS_PER_SEC 20

/* May take() spend a look now (a token bucket)? */
static bool look_allowed(struct hold *h)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	h->looks += (double)(now - h->looks_ms) * HOLD_LOOKS_PER_SEC / 1000.0;
	if (h->looks > HOLD_LOOKS_PER_SEC)
		h->looks = HOLD_LOOKS_PER_SEC;
	h->looks_ms = now;
	if (h->looks < 1)
		return false;
	h->looks -= 1;
	return true;
}

/* "the mount at MNT on HOST (pid P, since T)" for h into buf. */
static const char *who(const struct holder_info *h, char *buf, size_t n)
{
	char since[32] = "?";
	time_t t = (time_t)h->since;
	struct tm tm;
	if (h->since && localtime_r(&t, &tm))
		strftime(since, sizeof(since), "%Y-%m-%d %H:%M:%S", &tm);
	if (!h->mount[0])
		snprintf(buf, n, "a writer that left no holder record (an older memwalfs?)");
	else
		snprintf(buf, n, "the mount at %s on %s (pid %ld, mount %s, since %s)",
		         h->mnt[0] ? h->mnt : "?", h->host[0] ? h->host : "?", h->pid, h->mount,
		         since);
	return buf;
}

int hold_open(struct mount_args *a, struct store *st, struct hold **out)
{
	struct hold *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->a = a;
	h->st = st;
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1))
		snprintf(host, sizeof(host), "?");
	struct region_lease_opts lo = {
	    .host = host, .pid = (long)getpid(), .mnt = a->mnt, .lease_ms = a->lease_ms};
	int rc = region_lease_open(st, &lo, &h->l);
	if (rc) {
		fprintf(stderr, "memwalfs: cannot write this mount's lease to %s: %s\n", a->store,
		        strerror(-rc));
		free(h);
		return rc;
	}
	*out = h;
	return 0;
}

int hold_acquire(struct hold *h, bool force)
{
	uint64_t epoch = 0;
	struct holder_info prev;
	char w[2048];
	int rc = region_acquire(h->l, 0, force, &epoch, &prev);
	if (rc == -EBUSY) {
		fprintf(stderr,
		        "memwalfs: %s is written by %s, which is alive as far as its lease "
		        "shows; this mount follows it: reads are served, changes fail with "
		        "EROFS until that mount lets go of the store (unmount, memwalfs region "
		        "release, or it dies and its lease of %u s runs out); the first change "
		        "after that takes the store over. --takeover (-o takeover) fences it on "
		        "purpose.\n",
		        h->a->store, who(&prev, w, sizeof(w)), (prev.lease_ms + 999) / 1000);
		return 1;
	}
	if (rc) {
		fprintf(stderr, "memwalfs: cannot take %s over: %s\n", h->a->store, strerror(-rc));
		return rc;
	}
	if (prev.state == HOLDER_DEAD)
		log_warn("%s was held by %s, whose lease ran out %.0f s ago: taking it over",
		         h->a->store, who(&prev, w, sizeof(w)), prev.quiet_sec);
	else if (force && prev.state == HOLDER_LIVE)
		log_warn("--takeover: fencing %s, the live holder of %s", who(&prev, w, sizeof(w)),
		         h->a->store);
	h->a->eo.claim_epoch = epoch;
	return 0;
}

int hold_held(struct hold *h, struct engine *e)
{
	h->e = e;
	if (h->a->eo.read_only)
		return region_holder(h->l, 0, &(struct holder_info){0}); /* watch the holder */
	return region_held(h->l, 0, h->a->eo.claim_epoch);
}

/*
 * mwfs_opts.take: the store (region 0, the only one this mount opens so far), if its holder
 * let go of it (no store I/O until then).
 */
static int take(void *arg, uint32_t rid, struct engine **writer)
{
	struct hold *h = arg;
	struct holder_info hi;
	char w[2048];
	if (rid != 0)
		return -EROFS;
	int rc = region_holder_cached(h->l, 0, &hi);
	if ((rc || hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE) && look_allowed(h))
		rc = region_holder(h->l, 0, &hi); /* look again: a clean unmount frees it at once */
	if (rc == 0 && (hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE)) {
		char said[sizeof(h->said)];
		snprintf(said, sizeof(said), "%s/%d", hi.mount, (int)hi.state);
		if (strcmp(said, h->said)) { /* once per holder and state */
			snprintf(h->said, sizeof(h->said), "%s", said);
			log_warn("changes refused (EROFS): %s is held by %s, %s", h->a->store,
			         who(&hi, w, sizeof(w)),
			         hi.state == HOLDER_LIVE
			             ? "which is alive"
			             : "which may be alive (its lease has not run out yet)");
		}
		return -EROFS;
	}
	if (rc && rc != -ENOENT) {
		log_warn("changes refused (EROFS): who holds %s is not known: %s", h->a->store,
		         strerror(-rc));
		return -EROFS;
	}
	uint64_t epoch = 0;
	struct holder_info prev;
	rc = region_acquire(h->l, 0, false, &epoch, &prev);
	if (rc) {
		if (rc != -EBUSY)
			log_err("taking %s over: %s", h->a->store, strerror(-rc));
		return -EROFS;
	}
	struct engine_opts eo = h->a->eo;
	eo.read_only = false;
	eo.follow = false;
	eo.follow_interval_ms = 0;
	eo.claim_epoch = epoch;
	/* the follower's disk cache stays locked by it until it is closed */
	eo.disk_cache_dir = NULL;
	rc = engine_open(h->st, &eo, writer);
	if (rc) {
		log_err("taking %s over: opening the writer: %s; still following", h->a->store,
		        strerror(-rc));
		region_release(h->l, 0);
		return -EROFS;
	}
	rc = region_held(h->l, 0, epoch);
	if (rc)
		log_warn("taking %s over: writing the lease: %s (renewed at the next tick)",
		         h->a->store, strerror(-rc));
	return 0;
}

/* mwfs_opts.taken: close the engine the mount no longer uses (region 0's). */
static void taken(void *arg, uint32_t rid, struct engine *done, struct engine *now)
{
	struct hold *h = arg;
	(void)rid; /* take() takes region 0 only */
	if (now) {
		h->e = now;
		h->a->eo.read_only = false;
		metrics_attach(h->a->metrics, now, h->fs);
	} else {
		region_release(h->l, 0);
	}
	int rc = engine_close(done);
	if (rc && rc != -EROFS)
		log_warn("closing the %s engine: %s", now ? "follower's" : "unused writer's",
		         strerror(-rc));
}

void hold_failed(struct hold *h)
{
	region_release(h->l, 0);
	h->a->eo.claim_epoch = 0;
}

/* The options of a following engine on the store (a release, or a mount that follows). */
static struct engine_opts follower_opts(const struct mount_args *a)
{
	struct engine_opts eo = a->eo;
	eo.read_only = true;
	eo.follow = true;
	eo.follow_interval_ms = a->follow_ms > 0 ? (unsigned)a->follow_ms : 0;
	eo.claim_epoch = 0;
	return eo;
}

/* mwfs_opts.release: follow the store (region 0) instead of writing it. */
static int release(void *arg, uint32_t rid, struct engine *writer, struct engine **follower)
{
	struct hold *h = arg;
	if (rid != 0)
		return -EINVAL;
	struct engine_opts eo = follower_opts(h->a);
	eo.disk_cache_dir = NULL; /* the writer holds it until it is closed */
	int rc = engine_open(h->st, &eo, follower);
	if (rc) {
		log_err("region release: opening the follower: %s", strerror(-rc));
		return rc;
	}
	h->e = *follower;
	h->a->eo.read_only = true;
	metrics_attach(h->a->metrics, *follower, h->fs);
	rc = engine_close(writer); /* the final commit; everything was durable before */
	if (rc)
		log_warn("region release: closing the writer: %s (everything it acknowledged was "
		         "durable before)",
		         strerror(-rc));
	rc = region_release(h->l, 0);
	if (rc)
		log_warn("region release: writing the lease: %s (others see the store free once "
		         "its next renewal or its lease says so)",
		         strerror(-rc));
	struct holder_info hi;
	region_holder(h->l, 0, &hi); /* watch whoever takes it next */
	log_info("released %s: this mount follows it now", h->a->store);
	return 0;
}

/* "12 s" / "3.4 min" / "2.0 h" for a number of seconds. */
static void ago(double s, char *buf, size_t n)
{
	if (s < 120)
		snprintf(buf, n, "%.0f s", s);
	else if (s < 7200)
		snprintf(buf, n, "%.1f min", s / 60);
	else
		snprintf(buf, n, "%.1f h", s / 3600);
}

/*
 * mwfs_opts.regions: what `memwalfs region list MNT` prints of region rid (region 0: the
 * only one this mount opens so far), or of the mount itself (MWFS_RID_MOUNT).
 */
static size_t regions(void *arg, uint32_t rid, char *buf, size_t len)
{
	struct hold *h = arg;
	struct holder_info hi;
	struct engine_stats es;
	struct region_lease_stats ls;
	char w[2048], t[32];
	size_t n = 0;
#define OUT(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__);                    \
		if (k_ > 0)                                                                        \
			n += (size_t)k_;                                                           \
	} while (0)
	region_lease_get_stats(h->l, &ls);
	if (rid == MWFS_RID_MOUNT) {
		OUT("this mount: lease mounts/%s, %" PRIu64 " renewals, %" PRIu64
		    " failed, %" PRIu64 " requests\n",
		    region_lease_id(h->l), ls.renewals, ls.renew_failures, ls.requests);
		return n < len ? n : len;
	}
	if (rid != 0)
		return 0;
	engine_get_stats(h->e, &es);
	int rc = region_holder_cached(h->l, 0, &hi);
	OUT("region 0 /\n");
	if (rc && rc != -ENOENT)
		OUT("  holder: not known (%s)\n", strerror(-rc));
	else if (rc == -ENOENT || hi.state == HOLDER_SELF || !h->a->eo.read_only) {
		ago(ls.last_renew_ms_ago >= 0 ? ls.last_renew_ms_ago / 1000.0 : 0, t, sizeof(t));
		OUT("  holder: this mount (mount %s), epoch %" PRIu64 ", lease %u s, renewed %s "
		    "ago%s\n",
		    region_lease_id(h->l), es.epoch, ls.lease_ms / 1000, t,
		    ls.renew_overdue ? " (OVERDUE: others may take the store over)" : "");
		OUT("  WAL: next position %" PRIu64 ", covered by tables up to %" PRIu64 "\n",
		    es.wal_next, es.wal_covered);
	} else {
		ago(hi.quiet_sec, t, sizeof(t));
		OUT("  holder: %s\n  state: %s", who(&hi, w, sizeof(w)),
		    holder_state_name(hi.state));
		if (hi.state != HOLDER_FREE)
			OUT(" (its lease of %u s seen unchanged for %s)",
			    (hi.lease_ms + 999) / 1000, t);
		OUT(", epoch %" PRIu64 "\n", hi.epoch);
		OUT("  this mount follows it: WAL applied up to %" PRIu64 ", %" PRIu64
		    " entries listed and not applied, current as of %.1f s ago; changes here %s\n",
		    es.wal_next, es.follow_behind, es.follow_lag_ms / 1000.0,
		    hi.state == HOLDER_FREE || hi.state == HOLDER_DEAD ? "take the store over"
		                                                       : "fail with EROFS");
	}
#undef OUT
	return n < len ? n : len;
}

/* mwfs_opts.hold_stats: the lease and the holder (of region 0), as statistics lines. */
static size_t hold_stats(void *arg, uint32_t rid, char *buf, size_t len)
{
	struct hold *h = arg;
	(void)rid; /* region 0: the only one this mount opens so far */
	struct region_lease_stats ls;
	struct holder_info hi;
	region_lease_get_stats(h->l, &ls);
	bool self = !h->a->eo.read_only;
	int rc = self ? -ENOENT : region_holder_cached(h->l, 0, &hi);
	int w =
	    snprintf(buf, len,
	             "lease_ms %u\nlease_renewals %" PRIu64 "\nlease_renew_failures %" PRIu64
	             "\nlease_last_renew_ms %" PRId64 "\nlease_overdue %d\nlease_requests %" PRIu64
	             "\nholder_self %d\nholder_state %d\nholder_quiet_ms %" PRIu64 "\n",
	             ls.lease_ms, ls.renewals, ls.renew_failures, ls.last_renew_ms_ago,
	             ls.renew_overdue ? 1 : 0, ls.requests, self ? 1 : 0,
	             self ? (int)HOLDER_SELF
	             : rc ? -1
	                  : (int)hi.state,
	             !self && !rc ? (uint64_t)(hi.quiet_sec * 1000) : 0);
	return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
}

void hold_hooks(struct hold *h, struct mwfs_opts *fo)
{
	fo->hold_stats = hold_stats;
	fo->take = take;
	fo->taken = taken;
	fo->release = release;
	fo->regions = regions;
	fo->take_arg = h;
}

void hold_set_fs(struct hold *h, struct mwfs *fs)
{
	h->fs = fs;
}

struct engine *hold_engine(struct hold *h)
{
	return h->e;
}

void hold_close(struct hold *h)
{
	if (!h)
		return;
	region_lease_close(h->l, true);
	free(h);
}
