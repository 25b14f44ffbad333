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
 *
 * Idle cost (docs/REGIONS.md "The bell"): every following engine is registered with the
 * mount's bell (tools/mount.c opens it) while the mount uses it, so that it stops polling
 * while nothing happens; the mount rings the bell at every claim (its writers ring after a
 * quiet through engine_opts.commit_fn).  The holder of a region is watched (the lease
 * thread re-reads it every tick) only once this mount wants to write it: a refused change
 * starts the watch (take()), a release keeps it; a region merely followed is not watched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "hold.h"
#include "log.h"
#include "metrics.h"

/* One region this mount knows: its view of the store and the engine it uses now. */
struct hreg {
	uint32_t rid;       /* region id */
	struct store *view; /* region 0: the store (borrowed); else r/<rid>/ (owned) */
	struct engine *e;   /* the engine the mount uses now (region 0: closed by serve()) */
	bool writer;        /* e writes the region (else it follows it) */
};

#define HOLD_REGIONS_MAX 64 /* FS_REGIONS_MAX */

struct hold {
	struct mount_args *a; /* borrowed: the mount's options */
	struct store *st;     /* borrowed */
	struct region_lease *l;
	struct bell *bell;                  /* borrowed (serve()): rings, wakes followers */
	struct engine *e;                   /* region 0's engine the mount uses now */
	pthread_mutex_t mu;                 /* regs, nregs, map (never held across I/O
	                                       of another region's open: see hold_reg()) */
	struct hreg regs[HOLD_REGIONS_MAX]; /* the regions this mount knows; mu */
	unsigned nregs;                     /* entries of regs in use; mu */
	struct region_map map;              /* the newest map seen; mu */
	uint32_t miss_rid;                  /* the last rid the map did not list; mu */
	int64_t miss_ms;   /* when (monotonic): not looked up again for HOLD_MISS_MS; mu */
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

/*
 * An inode number of a region the map does not list (an entry naming the root of a region
 * whose create did not finish, or a damaged entry) is looked up in a new copy of the map at
 * most once in this long, however often it is met.
 */
#define HOLD_MISS_MS 1000

/* Now, in milliseconds of the monotonic clock. */
static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* May take() spend a look now (a token bucket)? */
static bool look_allowed(struct hold *h)
{
	int64_t now = now_ms();
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

/* A hold without a lease yet: the options, the store, the map (if it loads). */
static int hold_new(struct mount_args *a, struct store *st, struct hold **out)
{
	struct hold *h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->a = a;
	h->st = st;
	pthread_mutex_init(&h->mu, NULL);
	int rc = region_map_load(st, &h->map);
	if (rc)
		log_warn("%s: the region map does not load (%s): regions are found when met",
		         a->store, strerror(-rc));
	*out = h;
	return 0;
}

int hold_open(struct mount_args *a, struct store *st, struct hold **out)
{
	struct hold *h;
	int rc = hold_new(a, st, &h);
	if (rc)
		return rc;
	char host[256] = "";
	if (gethostname(host, sizeof(host) - 1))
		snprintf(host, sizeof(host), "?");
	struct region_lease_opts lo = {
	    .host = host, .pid = (long)getpid(), .mnt = a->mnt, .lease_ms = a->lease_ms};
	rc = region_lease_open(st, &lo, &h->l);
	if (rc) {
		fprintf(stderr, "memwalfs: cannot write this mount's lease to %s: %s\n", a->store,
		        strerror(-rc));
		hold_close(h);
		return rc;
	}
	/*
	 * A store with regions: this mount follows some of them (the others' writes change the
	 * sizes of files), and the kernel's writeback cache keeps a file's size of its own,
	 * ignoring the one the daemon answers: no writeback cache (docs/REGIONS.md).
	 */
	if (h->map.n && a->fo.writeback) {
		a->fo.writeback = false;
		fprintf(stderr,
		        "memwalfs: %s has %zu regions besides region 0: this mount follows those "
		        "it does not write, without the kernel's writeback cache\n",
		        a->store, h->map.n);
	}
	*out = h;
	return 0;
}

int hold_open_ro(struct mount_args *a, struct store *st, struct hold **out)
{
	return hold_new(a, st, out);
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

/* A following engine of a region: woken by the bell (bell mode). */
static void bell_reg(struct hold *h, struct engine *e)
{
	if (h->bell && e && h->a->eo.follow_bell && bell_follow(h->bell, e))
		log_warn("bell: cannot register a follower (no memory): it polls as before");
}

int hold_held(struct hold *h, struct engine *e)
{
	h->e = e;
	pthread_mutex_lock(&h->mu);
	h->regs[0] = (struct hreg){.rid = 0, .view = h->st, .e = e, .writer = !h->a->eo.read_only};
	h->nregs = 1;
	pthread_mutex_unlock(&h->mu);
	if (h->a->eo.read_only) {
		/*
		 * Followed, not watched: the lease watch is for regions this mount wants to
		 * write (a refused change starts it, take()), not for every one it follows.
		 */
		bell_reg(h, e);
		return 0;
	}
	bell_ring(h->bell); /* a claim: followers deep idle elsewhere look again */
	return region_held(h->l, 0, h->a->eo.claim_epoch);
}

/* The entry of rid (h->mu held), or NULL. */
static struct hreg *reg_get(struct hold *h, uint32_t rid)
{
	for (unsigned i = 0; i < h->nregs; i++)
		if (h->regs[i].rid == rid)
			return &h->regs[i];
	return NULL;
}

/* The view of region rid (its entry must exist; views never change once set). */
static struct store *reg_view(struct hold *h, uint32_t rid)
{
	pthread_mutex_lock(&h->mu);
	struct hreg *r = reg_get(h, rid);
	struct store *v = r ? r->view : NULL;
	pthread_mutex_unlock(&h->mu);
	return v;
}

/* "the store S" or "region R of S" for log lines. */
static const char *what(const struct hold *h, uint32_t rid, char *buf, size_t n)
{
	if (rid == 0)
		snprintf(buf, n, "%s", h->a->store);
	else
		snprintf(buf, n, "region %u of %s", rid, h->a->store);
	return buf;
}

/*
 * mwfs_opts.take: region rid, if its holder let go of it (no store I/O until then), on a
 * writer engine opened on the region's view.  force (`region take --force`): whoever holds
 * it; a live holder is fenced.
 */
static int take(void *arg, uint32_t rid, bool force, struct engine **writer)
{
	struct hold *h = arg;
	struct holder_info hi;
	char w[2048], s[1200];
	struct store *view = reg_view(h, rid);
	if (!view)
		return -EROFS;
	what(h, rid, s, sizeof(s));
	int rc = force ? 0 : region_holder_cached(h->l, rid, &hi);
	if (force)
		hi.state = HOLDER_FREE; /* region_acquire() looks itself */
	if ((rc || hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE) && look_allowed(h))
		rc = region_holder(h->l, rid,
		                   &hi); /* look again: a clean unmount frees it at once */
	if (rc == 0 && (hi.state == HOLDER_LIVE || hi.state == HOLDER_UNSURE)) {
		char said[sizeof(h->said)];
		snprintf(said, sizeof(said), "%.16s/%d/%u", hi.mount, (int)hi.state, rid % 100);
		if (strcmp(said, h->said)) { /* once per holder, state and region */
			snprintf(h->said, sizeof(h->said), "%s", said);
			log_warn("changes refused (EROFS): %s is held by %s, %s", s,
			         who(&hi, w, sizeof(w)),
			         hi.state == HOLDER_LIVE
			             ? "which is alive"
			             : "which may be alive (its lease has not run out yet)");
		}
		return -EROFS;
	}
	if (rc && rc != -ENOENT) {
		log_warn("changes refused (EROFS): who holds %s is not known: %s", s,
		         strerror(-rc));
		return -EROFS;
	}
	uint64_t epoch = 0;
	struct holder_info prev;
	rc = region_acquire(h->l, rid, force, &epoch, &prev);
	if (rc) {
		if (rc != -EBUSY)
			log_err("taking %s over: %s", s, strerror(-rc));
		return -EROFS;
	}
	if (force && (prev.state == HOLDER_LIVE || prev.state == HOLDER_UNSURE))
		log_warn("region take --force: fencing %s, the %s holder of %s",
		         who(&prev, w, sizeof(w)),
		         prev.state == HOLDER_LIVE ? "live" : "possibly live", s);
	struct engine_opts eo = h->a->eo;
	eo.read_only = false;
	eo.follow = false;
	eo.follow_interval_ms = 0;
	eo.claim_epoch = epoch;
	eo.disk_cache_salt = rid; /* the mount's shared disk cache (a->eo.disk_cache) */
	rc = engine_open(view, &eo, writer);
	if (rc) {
		log_err("taking %s over: opening the writer: %s; still following", s,
		        strerror(-rc));
		region_release(h->l, rid);
		return -EROFS;
	}
	rc = region_held(h->l, rid, epoch);
	if (rc)
		log_warn("taking %s over: writing the lease: %s (renewed at the next tick)", s,
		         strerror(-rc));
	bell_ring(h->bell);
	return 0;
}

/* mwfs_opts.taken: close the engine the mount no longer uses (region rid's). */
static void taken(void *arg, uint32_t rid, struct engine *done, struct engine *now)
{
	struct hold *h = arg;
	if (now) {
		pthread_mutex_lock(&h->mu);
		struct hreg *r = reg_get(h, rid);
		if (r) {
			r->e = now;
			r->writer = true;
		}
		pthread_mutex_unlock(&h->mu);
		if (rid == 0) {
			h->e = now;
			h->a->eo.read_only = false;
		}
		bell_unfollow(h->bell, done); /* the follower replaced */
		/* a scrape in progress (it reads every region's engine) ends before done closes */
		metrics_attach(h->a->metrics, h->e, h->fs);
	} else {
		region_release(h->l, rid);
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

/* mwfs_opts.release: follow region rid instead of writing it. */
static int release(void *arg, uint32_t rid, struct engine *writer, struct engine **follower)
{
	struct hold *h = arg;
	struct store *view = reg_view(h, rid);
	char s[1200];
	if (!view)
		return -EINVAL;
	what(h, rid, s, sizeof(s));
	struct engine_opts eo = follower_opts(h->a);
	eo.disk_cache_salt = rid; /* the mount's shared disk cache, as the writer's */
	int rc = engine_open(view, &eo, follower);
	if (rc) {
		log_err("region release: opening the follower: %s", strerror(-rc));
		return rc;
	}
	pthread_mutex_lock(&h->mu);
	struct hreg *r = reg_get(h, rid);
	r->e = *follower;
	r->writer = false;
	pthread_mutex_unlock(&h->mu);
	bell_reg(h, *follower);
	if (rid == 0) {
		h->e = *follower;
		h->a->eo.read_only = true;
		metrics_attach(h->a->metrics, *follower, h->fs);
	}
	rc = engine_close(writer); /* the final commit; everything was durable before */
	if (rc)
		log_warn("region release: closing the writer: %s (everything it acknowledged was "
		         "durable before)",
		         strerror(-rc));
	rc = region_release(h->l, rid);
	if (rc)
		log_warn("region release: writing the lease: %s (others see the region free once "
		         "its next renewal or its lease says so)",
		         strerror(-rc));
	struct holder_info hi;
	region_holder(h->l, rid, &hi); /* watch whoever takes it next */
	log_info("released %s: this mount follows it now", s);
	return 0;
}

/*
 * Open a view of region rid (r/<rid>/) and an engine on it: a writer claiming epoch, or
 * (epoch 0) a follower.  0 and *view, *e; or -errno (logged).
 */
static int reg_open(struct hold *h, uint32_t rid, uint64_t epoch, struct store **view,
                    struct engine **e)
{
	char prefix[32], s[1200];
	snprintf(prefix, sizeof(prefix), "r/%u/", rid);
	what(h, rid, s, sizeof(s));
	int rc = store_open_sub(h->st, prefix, view);
	if (rc) {
		log_err("%s: opening its view: %s", s, strerror(-rc));
		return rc;
	}
	struct engine_opts eo = epoch ? h->a->eo : follower_opts(h->a);
	if (epoch) {
		eo.read_only = false;
		eo.follow = false;
		eo.follow_interval_ms = 0;
		eo.claim_epoch = epoch;
	}
	if (!epoch && !h->l && !h->a->eo.follow)
		eo.follow = false; /* -o ro with --follow-interval 0: the state at mount */
	eo.disk_cache_salt = rid;  /* the mount's disk cache, shared: keys of its own */
	eo.snapshot = NULL;
	rc = engine_open(*view, &eo, e);
	if (rc) {
		log_err("%s: opening its engine (%s): %s", s, epoch ? "writer" : "follower",
		        strerror(-rc));
		store_close(*view);
		*view = NULL;
	}
	return rc;
}

/* Record region rid's view and engine in the table.  0, or -ENOSPC / -EEXIST. */
static int reg_add(struct hold *h, uint32_t rid, struct store *view, struct engine *e, bool writer)
{
	int rc = 0;
	pthread_mutex_lock(&h->mu);
	if (reg_get(h, rid))
		rc = -EEXIST;
	else if (h->nregs == HOLD_REGIONS_MAX)
		rc = -ENOSPC;
	else
		h->regs[h->nregs++] =
		    (struct hreg){.rid = rid, .view = view, .e = e, .writer = writer};
	pthread_mutex_unlock(&h->mu);
	return rc;
}

/*
 * mwfs_opts.region_open: a region this mount met (an inode number of it) and does not
 * know: it must be in the map (polled when it is not in the one we have); opened on a
 * following engine, its holder watched.  The first change in it takes it (take()).
 */
static int region_open(void *arg, uint32_t rid, struct engine **e, bool *writer)
{
	struct hold *h = arg;
	char s[1200];
	what(h, rid, s, sizeof(s));
	pthread_mutex_lock(&h->mu);
	bool known = region_map_find(&h->map, rid) != NULL;
	bool have = reg_get(h, rid) != NULL;
	bool missed = h->miss_ms && rid == h->miss_rid && now_ms() - h->miss_ms < HOLD_MISS_MS;
	pthread_mutex_unlock(&h->mu);
	if (have)
		return -EEXIST;
	if (!known && missed)
		return -ENOENT;
	if (!known) {
		/* the map is polled with our copy unlocked: a copy of its version is enough */
		struct region_map m = {0};
		int rc = region_map_load(h->st, &m);
		if (rc) {
			log_err("%s: loading the region map: %s", s, strerror(-rc));
			return rc;
		}
		known = region_map_find(&m, rid) != NULL;
		pthread_mutex_lock(&h->mu);
		if (m.version > h->map.version) {
			region_map_free(&h->map);
			h->map = m;
		} else {
			region_map_free(&m);
		}
		pthread_mutex_unlock(&h->mu);
		if (!known) {
			pthread_mutex_lock(&h->mu);
			bool first = rid != h->miss_rid;
			h->miss_rid = rid;
			h->miss_ms = now_ms();
			pthread_mutex_unlock(&h->mu);
			if (first)
				log_warn(
				    "%s: an inode number of it was met, but the region map does "
				    "not list it: it reads as missing",
				    s);
			return -ENOENT;
		}
	}
	struct store *view = NULL;
	int rc = reg_open(h, rid, 0, &view, e);
	if (rc)
		return rc;
	rc = reg_add(h, rid, view, *e, false);
	if (rc) {
		engine_close(*e);
		store_close(view);
		return rc;
	}
	bell_reg(h, *e); /* followed, not watched (hold_held()) */
	*writer = false;
	log_info("%s: following it (found at an inode number of it)", s);
	return 0;
}

/*
 * mwfs_opts.region_create: add a region whose root is name in parent (path: for people)
 * to the map, take it and open its writer engine on its (empty) view.
 */
static int region_create(void *arg, uint64_t parent, const char *name, const char *path,
                         uint32_t *rid, struct engine **e)
{
	struct hold *h = arg;
	struct region_entry want = {.parent_ino = parent};
	snprintf(want.name, sizeof(want.name), "%s", name);
	snprintf(want.path, sizeof(want.path), "%s", path);
	struct region_map m = {0}; /* region_map_add() lists the newest itself */
	uint32_t r = 0;
	int rc = region_map_add(h->st, &want, &m, &r);
	const struct region_entry *was =
	    rc == -EEXIST ? region_map_find_root(&m, parent, name) : NULL;
	if (was) {
		/*
		 * The map has it, and the caller found no entry of that name: a create that
		 * stopped before its entry (docs/REGIONS.md "Creating a region"), or one that
		 * runs now elsewhere (its holder then refuses the acquire below).  Resumed.
		 */
		r = was->rid;
		rc = 0;
		log_warn("region create %s: region %u has that root in the map but no entry "
		         "names it (a create that did not finish): resuming it",
		         path, r);
	}
	if (rc) {
		if (rc != -EEXIST)
			log_err("region create %s: adding it to the region map: %s", path,
			        strerror(-rc));
		region_map_free(&m);
		return rc;
	}
	pthread_mutex_lock(&h->mu);
	region_map_free(&h->map);
	h->map = m;
	pthread_mutex_unlock(&h->mu);
	uint64_t epoch = 0;
	struct holder_info prev;
	rc = region_acquire(h->l, r, false, &epoch, &prev);
	if (rc) {
		log_err("region create %s: taking region %u: %s", path, r, strerror(-rc));
		return was && rc == -EBUSY ? -EEXIST : rc; /* another mount makes it now */
	}
	struct store *view = NULL;
	rc = reg_open(h, r, epoch, &view, e);
	if (rc) {
		region_release(h->l, r);
		return rc;
	}
	rc = reg_add(h, r, view, *e, true);
	if (rc) {
		engine_close(*e);
		store_close(view);
		region_release(h->l, r);
		return rc;
	}
	rc = region_held(h->l, r, epoch);
	if (rc)
		log_warn("region create %s: writing the lease: %s (renewed at the next tick)", path,
		         strerror(-rc));
	bell_ring(h->bell);
	*rid = r;
	log_info("region create %s: region %u, written by this mount", path, r);
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
 * mwfs_opts.regions: what `memwalfs region list MNT` prints of region rid, or of the mount
 * itself (MWFS_RID_MOUNT).
 */
static size_t regions(void *arg, uint32_t rid, char *buf, size_t len)
{
	struct hold *h = arg;
	struct holder_info hi;
	struct engine_stats es;
	struct region_lease_stats ls;
	char w[2048], t[32], path[1024] = "/";
	size_t n = 0;
#define OUT(...)                                                                                   \
	do {                                                                                       \
		int k_ = snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__);                    \
		if (k_ > 0)                                                                        \
			n += (size_t)k_;                                                           \
	} while (0)
	memset(&ls, 0, sizeof(ls));
	if (h->l)
		region_lease_get_stats(h->l, &ls);
	if (rid == MWFS_RID_MOUNT) {
		/* the map's regions this mount has not met yet (as of its copy of the map) */
		pthread_mutex_lock(&h->mu);
		for (size_t i = 0; i < h->map.n; i++)
			if (!reg_get(h, h->map.v[i].rid))
				OUT("region %u %s\n  not opened here yet (it is, when this mount "
				    "first meets it)\n",
				    h->map.v[i].rid, h->map.v[i].path);
		pthread_mutex_unlock(&h->mu);
		if (!h->l)
			OUT("this mount: read-only (-o ro): no lease, it writes nothing to the "
			    "store "
			    "and follows every region\n");
		else
			OUT("this mount: lease mounts/%s, %" PRIu64 " renewals, %" PRIu64
			    " failed, %" PRIu64 " requests\n",
			    region_lease_id(h->l), ls.renewals, ls.renew_failures, ls.requests);
		return n < len ? n : len;
	}
	pthread_mutex_lock(&h->mu);
	struct hreg *r = reg_get(h, rid);
	struct engine *e = r ? r->e : NULL;
	bool writer = r && r->writer;
	const struct region_entry *me = region_map_find(&h->map, rid);
	if (me)
		snprintf(path, sizeof(path), "%s", me->path);
	else if (rid)
		snprintf(path, sizeof(path), "?");
	pthread_mutex_unlock(&h->mu);
	if (!e)
		return 0;
	engine_get_stats(e, &es); /* the engine stays open while the mount runs */
	int rc = h->l ? region_holder_cached(h->l, rid, &hi) : -ENOENT;
	if (rc == -ENOENT && !writer && h->l)
		rc = region_holder_look(h->l, rid, &hi); /* followed, not watched: look once */
	OUT("region %u %s\n", rid, path);
	if (writer && engine_write_error(e) == -ESTALE) {
		OUT("  holder: another mount; this mount was FENCED here (it took the region over: "
		    "memwalfs region list STORE names it); changes here fail with EIO until this "
		    "mount is mounted again\n");
		OUT("  WAL: this mount's writer stopped at position %" PRIu64 "\n", es.wal_next);
	} else if (writer) {
		ago(ls.last_renew_ms_ago >= 0 ? ls.last_renew_ms_ago / 1000.0 : 0, t, sizeof(t));
		OUT("  holder: this mount (mount %s), epoch %" PRIu64 ", lease %u s, renewed %s "
		    "ago%s\n",
		    region_lease_id(h->l), es.epoch, ls.lease_ms / 1000, t,
		    ls.renew_overdue ? " (OVERDUE: others may take the region over)" : "");
		OUT("  WAL: next position %" PRIu64 ", covered by tables up to %" PRIu64 "\n",
		    es.wal_next, es.wal_covered);
	} else if (!h->l) {
		OUT("  holder: not watched (a read-only mount takes nothing)\n");
		OUT("  this mount follows it: WAL applied up to %" PRIu64 ", %" PRIu64
		    " entries listed and not applied, current as of %.1f s ago\n",
		    es.wal_next, es.follow_behind, es.follow_lag_ms / 1000.0);
	} else if (rc) {
		OUT("  holder: not known (%s)\n", strerror(-rc));
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
		    hi.state == HOLDER_FREE || hi.state == HOLDER_DEAD ? "take the region over"
		                                                       : "fail with EROFS");
	}
#undef OUT
	return n < len ? n : len;
}

/*
 * mwfs_stats_format()'s lines of region rid: its root's path and its holder's state (as
 * holder_state below; 4: this mount).
 */
static size_t region_stats(struct hold *h, uint32_t rid, char *buf, size_t len)
{
	char path[1024] = "/";
	struct holder_info hi;
	pthread_mutex_lock(&h->mu);
	const struct region_entry *me = region_map_find(&h->map, rid);
	struct hreg *r = reg_get(h, rid);
	bool writer = r && r->writer;
	if (me)
		snprintf(path, sizeof(path), "%s", me->path);
	else if (rid)
		snprintf(path, sizeof(path), "?");
	pthread_mutex_unlock(&h->mu);
	int rc = writer || !h->l ? -ENOENT : region_holder_cached(h->l, rid, &hi);
	int w = snprintf(buf, len, "region.%u.path %s\nregion.%u.holder_state %d\n", rid, path, rid,
	                 writer ? (int)HOLDER_SELF
	                 : rc   ? -1
	                        : (int)hi.state);
	return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
}

/*
 * mwfs_opts.hold_stats: the lease and the holder of region 0 (MWFS_RID_MOUNT), or the
 * lines of region rid, as statistics lines.
 */
static size_t hold_stats(void *arg, uint32_t rid, char *buf, size_t len)
{
	struct hold *h = arg;
	if (rid != MWFS_RID_MOUNT)
		return region_stats(h, rid, buf, len);
	struct region_lease_stats ls;
	struct holder_info hi;
	struct bell_stats bs;
	char bell[512];
	bell_get_stats(h->bell, &bs);
	pthread_mutex_lock(&h->mu);
	unsigned nregs = h->nregs, nw = 0;
	for (unsigned i = 0; i < nregs; i++)
		nw += h->regs[i].writer;
	pthread_mutex_unlock(&h->mu);
	int w, b;
	b = snprintf(
	    bell, sizeof(bell),
	    "bell_rings %" PRIu64 "\nbell_ring_failures %" PRIu64 "\nbell_reads %" PRIu64
	    "\nbell_read_failures %" PRIu64 "\nbell_changes %" PRIu64 "\nbell_followers %u\n",
	    bs.rings, bs.ring_failures, bs.reads, bs.read_failures, bs.changes, bs.followers);
	if (b < 0)
		bell[0] = 0;
	if (!h->l) { /* -o ro: no lease, no holder watched */
		w = snprintf(buf, len, "regions_known %u\nregions_written 0\n%s", nregs, bell);
		return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
	}
	region_lease_get_stats(h->l, &ls);
	bool self = !h->a->eo.read_only;
	int rc = self ? -ENOENT : region_holder_cached(h->l, 0, &hi);
	w = snprintf(buf, len,
	             "lease_ms %u\nlease_renewals %" PRIu64 "\nlease_renew_failures %" PRIu64
	             "\nlease_last_renew_ms %" PRId64 "\nlease_overdue %d\nlease_requests %" PRIu64
	             "\nholder_self %d\nholder_state %d\nholder_quiet_ms %" PRIu64
	             "\nregions_known %u\nregions_written %u\n%s",
	             ls.lease_ms, ls.renewals, ls.renew_failures, ls.last_renew_ms_ago,
	             ls.renew_overdue ? 1 : 0, ls.requests, self ? 1 : 0,
	             self ? (int)HOLDER_SELF
	             : rc ? -1
	                  : (int)hi.state,
	             !self && !rc ? (uint64_t)(hi.quiet_sec * 1000) : 0, nregs, nw, bell);
	return w < 0 ? 0 : (size_t)w < len ? (size_t)w : len - 1;
}

void hold_hooks(struct hold *h, struct mwfs_opts *fo)
{
	fo->hold_stats = hold_stats;
	fo->regions = regions;
	fo->region_open = region_open;
	fo->take_arg = h;
	if (!h->l)
		return; /* -o ro: regions are followed, never taken, made or released */
	fo->take = take;
	fo->taken = taken;
	fo->release = release;
	fo->region_create = region_create;
}

void hold_set_fs(struct hold *h, struct mwfs *fs)
{
	h->fs = fs;
}

const char *hold_id(struct hold *h)
{
	return h->l ? region_lease_id(h->l) : NULL; /* -o ro: no lease, never rings */
}

void hold_set_bell(struct hold *h, struct bell *b)
{
	h->bell = b;
}

struct engine *hold_engine(struct hold *h)
{
	return h->e;
}

int hold_close_regions(struct hold *h, struct hold_region_err *err)
{
	int first = 0;
	if (!h)
		return 0;
	for (unsigned i = 0; i < h->nregs; i++) {
		struct hreg *r = &h->regs[i];
		if (r->rid == 0)
			continue; /* serve() closes region 0's engine, and owns the store */
		bell_unfollow(h->bell, r->e);
		struct engine_stats es = {0};
		if (r->writer)
			engine_get_stats(r->e, &es); /* final once the writer stopped */
		int rc = engine_close(r->e);
		if (rc)
			log_err("region %u: final commit: %s", r->rid, strerror(-rc));
		if (rc && !first && err) {
			first = rc;
			err->rid = r->rid;
			err->changes_lost = es.batches_lost;
		}
		store_close(r->view);
		r->e = NULL;
		r->view = NULL;
	}
	h->nregs = h->nregs ? 1 : 0;
	return first;
}

void hold_close(struct hold *h)
{
	if (!h)
		return;
	hold_close_regions(h, NULL);
	region_lease_close(h->l, true);
	region_map_free(&h->map);
	pthread_mutex_destroy(&h->mu);
	free(h);
}
