/*
 * lease.c - who holds a region, whether that holder is alive, and taking a region
 * without racing another taker (engine.h "Regions: holders and leases";
 * docs/REGIONS.md "Holders and leases").
 *
 * DESIGN
 *
 * Objects (text, leasefmt.c):
 *   mounts/<id>                 the lease of one mount: who it is, a seq that every write
 *                               increments, its lease_ms, a "hold rid E" line per region
 *                               held and a "take rid E" line per region being taken.
 *                               Plain PUTs (overwrite), one at a time (l->putting).
 *   <prefix>holder/<E>          created by put_if_absent before the claim of epoch E of the
 *                               region: the right to claim E.  Never rewritten.
 *
 * Who holds region r: the newest manifest's epoch E; holder/<E> names a mount M (missing:
 * FREE, a store older than regions or a claim made without a lease); M's lease missing
 * (clean unmount), or without "hold r E" / "take r E" (released): FREE; else M's
 * liveness, judged from the seq of its lease as we see it change on our monotonic clock
 * (struct mwatch): LIVE while a change was seen within M's lease_ms, UNSURE while
 * watched for less than that without a change (or while our reads fail), DEAD once a
 * read finds the seq unchanged M's lease_ms after we first saw it.  A
 * lease whose mtime is over lease_ms + LEASE_CLOCK_SKEW_SEC old is DEAD at first sight.
 *
 * Taking r (region_acquire): check the holder; write "take r E+1" into our lease (so that
 * a racing taker that meets our holder object can see we are alive); create
 * holder/<E+1>; the caller claims E+1 (engine_opts.claim_epoch) and calls region_held().
 * A holder object whose taker gave up (lease gone, no take line, dead) is skipped: E+2 is
 * tried, which manifest_claim_epoch() allows.
 *
 * Safety does not rest on any of this: the epoch claim and the WAL fence stop a fenced
 * writer (docs/WAL.md); the lease only avoids fencing live holders by accident.
 *
 * Concurrency: l->mu guards every field marked [mu]; it is never held across store I/O.
 * Lookups copy what they need out, unlock, do I/O, lock and merge what they found.
 * Lease writes are serialised by l->putting (a later write never lands before an earlier
 * one from this process), and carry the seq and holds of the moment they are composed.
 * One background thread (l->thread) renews and watches every tick (lease_ms / 3) and
 * waits on l->cv (CLOCK_MONOTONIC) so that close stops it at once between requests.
 */
#include <errno.h>
#include <sys/stat.h>
#include <signal.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "format.h"
#include "grow.h"
#include "lease.h"
#include "log.h"
#include "manifest.h"
#include "store.h"
#include "thread.h"

/* Epochs region_acquire() tries past holder objects of takers that gave up (or forced). */
#define ACQUIRE_TRIES 8
/* Every this many ticks a watched region's manifest and holder object are read again. */
#define FULL_EVERY 4
/* Mounts whose liveness we remember (the least recently used goes first). */
#define MWATCH_MAX 64

/* A mount we watch: the last seq of its lease and when we first saw it. */
struct mwatch {
	char id[17];
	uint64_t seq;      /* highest seq seen */
	uint64_t seen_us;  /* our monotonic clock when we first saw seq */
	uint64_t read_us;  /* the last successful read of its lease (seq confirmed then) */
	uint64_t used_us;  /* last time this entry was consulted (eviction) */
	unsigned lease_ms; /* the mount's own lease */
	bool changed;      /* we saw seq change at least once */
	bool dead_mtime;   /* at first sight its lease was written long ago: dead at once */
	bool pid_gone;     /* its daemon ran on this machine and its pid is gone: dead at once */
};

/* What the holder of a region is, as far as the last look found. */
enum base { B_FREE, B_SELF, B_HELD };

/* A region we look at. */
struct rwatch {
	uint32_t rid;
	bool valid;       /* a look succeeded (the fields below are meaningful) */
	int err;          /* the last look's error (0: it succeeded) */
	uint64_t version; /* newest manifest version at the last full look */
	uint64_t epoch;   /* its epoch */
	bool have_holder; /* holder/<epoch> exists; h is it */
	struct holder_doc h;
	enum base base; /* B_HELD: liveness from the mwatch of h.mount */
	unsigned holder_lease_ms;
	unsigned ticks; /* thread ticks since the last full look */
};

struct region_lease {
	struct store *st; /* borrowed */
	char id[17];
	char key[FMT_NAME_MAX];
	char host[256];
	char mnt[1024];
	long pid;
	int64_t since;
	unsigned lease_ms;
	char boot[40];  /* this machine's boot id ("" unknown) */
	uint64_t pidns; /* our pid namespace's inode (0 unknown) */

	struct mw_mutex mu;
	pthread_cond_t cv;     /* the thread waits here (monotonic) */
	pthread_cond_t put_cv; /* lease writers wait here for l->putting */
	struct mw_thread thread;

	struct lease_hold *holds; /* [mu] regions held or being taken */
	size_t nholds, capholds;  /* [mu] */
	uint64_t seq;             /* [mu] seq of the last write composed */
	uint64_t gen;             /* [mu] bumped by every change of holds */
	uint64_t written_gen;     /* [mu] gen of the last successful write */
	bool putting;             /* [mu] a lease write is in flight */

	struct rwatch *rw; /* [mu] */
	size_t nrw, caprw;
	struct mwatch *mw; /* [mu] */
	size_t nmw, capmw;

	/* statistics [mu] */
	uint64_t renewals, renew_failures;
	uint64_t last_ok_us; /* last successful lease write (0: none) */
	uint64_t fail_since; /* first failure of the current run of failures (0: none) */
	bool overdue_logged; /* the "others may take over" warning was logged */
	_Atomic uint64_t requests;
};

static uint64_t now_us(void)
{
	return mw_now_us();
}

const char *holder_state_name(enum holder_state s)
{
	switch (s) {
	case HOLDER_FREE:
		return "free";
	case HOLDER_LIVE:
		return "live";
	case HOLDER_UNSURE:
		return "unsure";
	case HOLDER_DEAD:
		return "dead";
	case HOLDER_SELF:
		return "self";
	}
	return "?";
}

static void count(struct region_lease *l, unsigned n)
{
	if (l)
		atomic_fetch_add(&l->requests, n);
}

/* ------------------------------------------------------------------ */
/* Store reads (no lock held)                                          */
/* ------------------------------------------------------------------ */

/* Highest version under "<prefix>manifest/" by a listing (regions > 0). */
struct maxver {
	size_t plen;
	uint64_t max;
};

static int maxver_cb(void *arg, const char *key, uint64_t size)
{
	struct maxver *m = arg;
	uint64_t v;

	(void)size;
	if (fmt_parse_manifest_name(key + m->plen, &v) == 0 && v > m->max)
		m->max = v;
	return 0;
}

/*
 * The newest manifest version of rid and its epoch.  *version and *epoch come in as what
 * an earlier look found (0: nothing): an unchanged version is not read again.
 */
static int newest_epoch(struct region_lease *l, struct store *st, uint32_t rid, uint64_t *version,
                        uint64_t *epoch)
{
	char prefix[FMT_REGION_PREFIX_MAX], name[FMT_REGION_PREFIX_MAX + FMT_NAME_MAX];
	struct manifest m = {0};
	uint64_t v = 0;
	int rc;

	fmt_region_prefix(prefix, rid);
	if (rid == 0) {
		rc = manifest_find_latest(st, &v);
		count(l, 2); /* the hint, a listing */
	} else {
		struct maxver mv = {.plen = strlen(prefix)};
		snprintf(name, sizeof(name), "%s%s", prefix, FMT_MANIFEST_PREFIX);
		rc = store_list(st, name, NULL, 0, maxver_cb, &mv);
		count(l, 1);
		v = mv.max;
	}
	if (rc) {
		log_err("region %" PRIu32 ": cannot find the newest manifest: %s", rid,
		        strerror(-rc));
		return rc;
	}
	if (v == 0) {
		*version = *epoch = 0;
		return 0;
	}
	if (v == *version && *epoch)
		return 0;
	if (rid == 0) {
		rc = manifest_load(st, v, &m);
	} else {
		void *buf = NULL;
		size_t len = 0;
		char mname[FMT_NAME_MAX];
		fmt_manifest_name(mname, v);
		snprintf(name, sizeof(name), "%s%s", prefix, mname);
		rc = store_get(st, name, 0, STORE_TO_END, &buf, &len);
		if (!rc)
			rc = manifest_decode(name, buf, len, &m);
		free(buf);
	}
	count(l, 1);
	if (rc == -ENOENT) /* collected since the listing: a newer one exists */
		rc = -EAGAIN;
	if (rc) {
		log_err("region %" PRIu32 ": cannot read manifest %" PRIu64 ": %s", rid, v,
		        strerror(-rc));
		return rc;
	}
	*version = v;
	*epoch = m.epoch;
	manifest_clear(&m);
	return 0;
}

/* GET and parse holder/<epoch> of rid.  *have false when it does not exist. */
static int read_holder(struct region_lease *l, struct store *st, uint32_t rid, uint64_t epoch,
                       bool *have, struct holder_doc *h)
{
	char name[FMT_NAME_MAX];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	fmt_holder_name(name, rid, epoch);
	rc = store_get(st, name, 0, LEASE_OBJECT_MAX + 1, &buf, &len);
	count(l, 1);
	if (rc == -ENOENT) {
		*have = false;
		return 0;
	}
	if (rc) {
		log_err("region %" PRIu32 ": get %s failed: %s", rid, name, strerror(-rc));
		return rc;
	}
	rc = holder_doc_parse(name, buf, len, h);
	free(buf);
	if (!rc && h->epoch != epoch) {
		log_err("region %" PRIu32 ": %s names epoch %" PRIu64, rid, name, h->epoch);
		rc = -EUCLEAN;
	}
	*have = rc == 0;
	return rc;
}

/* GET and parse mounts/<id>.  *have false when it does not exist. */
static int read_lease(struct region_lease *l, struct store *st, const char *id, bool *have,
                      struct lease_doc *d)
{
	char name[FMT_NAME_MAX];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	snprintf(name, sizeof(name), FMT_MOUNTS_PREFIX "%s", id);
	rc = store_get(st, name, 0, LEASE_OBJECT_MAX + 1, &buf, &len);
	count(l, 1);
	if (rc == -ENOENT) {
		*have = false;
		return 0;
	}
	if (rc) {
		log_err("region: get %s failed: %s", name, strerror(-rc));
		return rc;
	}
	rc = lease_doc_parse(name, buf, len, d);
	free(buf);
	if (!rc && strcmp(d->mount, id) != 0) {
		log_err("region: %s names mount %s", name, d->mount);
		lease_doc_clear(d);
		rc = -EUCLEAN;
	}
	*have = rc == 0;
	return rc;
}

/* mtime of mounts/<id> (0: unknown or gone). */
static int64_t lease_mtime(struct region_lease *l, struct store *st, const char *id)
{
	char name[FMT_NAME_MAX];
	struct store_stat s;

	snprintf(name, sizeof(name), FMT_MOUNTS_PREFIX "%s", id);
	count(l, 1);
	return store_head(st, name, &s) == 0 ? s.mtime : 0;
}

/* Does d hold (or take) rid at epoch? */
static bool doc_holds(const struct lease_doc *d, uint32_t rid, uint64_t epoch)
{
	for (size_t i = 0; i < d->nholds; i++)
		if (d->holds[i].rid == rid && d->holds[i].epoch == epoch)
			return true;
	return false;
}

/*
 * Did the daemon of lease d run on this machine, in our pid namespace, and is its pid gone
 * (a kill -9, a crash)?  Then it is dead now, whatever its lease says: a remount after a
 * crash writes at once instead of waiting a lease.  Only when both the boot id and the pid
 * namespace match (another machine's pid, or a container's, means nothing here); a pid
 * reused by another process keeps the holder alive until its lease runs out (the safe way).
 */
static bool pid_gone(const struct region_lease *l, const struct lease_doc *d)
{
	if (!l->boot[0] || !l->pidns || d->pid <= 0 || strcmp(d->boot, l->boot) ||
	    d->pidns != l->pidns)
		return false;
	if (kill((pid_t)d->pid, 0))
		return errno == ESRCH;
	/* a zombie (its parent has not waited for it yet) is gone too */
	char path[64], buf[256];
	snprintf(path, sizeof(path), "/proc/%ld/stat", d->pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	const char *rp = strrchr(buf, ')'); /* "pid (comm) S ...": comm may hold anything */
	return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* A lease written more than lease_ms + the clock margin ago by the store's clock. */
static bool mtime_dead(int64_t mtime, unsigned lease_ms)
{
	int64_t now = (int64_t)time(NULL);
	return mtime > 0 &&
	       (now - mtime) * 1000 > (int64_t)lease_ms + LEASE_CLOCK_SKEW_SEC * 1000LL;
}

/* ------------------------------------------------------------------ */
/* Liveness (under l->mu)                                              */
/* ------------------------------------------------------------------ */

static struct mwatch *mw_find(struct region_lease *l, const char *id)
{
	for (size_t i = 0; i < l->nmw; i++)
		if (!strcmp(l->mw[i].id, id))
			return &l->mw[i];
	return NULL;
}

/*
 * Record that mount id's lease holds seq now (mtime: of a first sight, else 0).  An older
 * seq than one already seen is a stale read of a racing look: ignored.
 */
static int mw_observe(struct region_lease *l, const char *id, uint64_t seq, unsigned lease_ms,
                      int64_t mtime, bool pid_gone, uint64_t now)
{
	struct mwatch *w = mw_find(l, id);

	mw_mutex_assert_held(&l->mu);
	if (!w) {
		if (l->nmw == MWATCH_MAX) { /* forget the least recently consulted */
			size_t old = 0;
			for (size_t i = 1; i < l->nmw; i++)
				if (l->mw[i].used_us < l->mw[old].used_us)
					old = i;
			l->mw[old] = l->mw[--l->nmw];
		}
		if (MW_GROW(l->mw, l->capmw, l->nmw + 1, 8))
			return -ENOMEM;
		w = &l->mw[l->nmw++];
		memset(w, 0, sizeof(*w));
		memcpy(w->id, id, sizeof(w->id));
		w->seq = seq;
		w->seen_us = now;
		w->dead_mtime = mtime_dead(mtime, lease_ms);
	} else if (seq > w->seq) {
		w->seq = seq;
		w->seen_us = now;
		w->changed = true;
		w->dead_mtime = false;
	}
	w->lease_ms = lease_ms;
	w->read_us = now;
	w->used_us = now;
	w->pid_gone = pid_gone && seq == w->seq;
	return 0;
}

/* The liveness of mount id as of now, and how long its lease has been seen unchanged. */
static enum holder_state judge(struct region_lease *l, const char *id, uint64_t now, double *quiet)
{
	struct mwatch *w = mw_find(l, id);
	uint64_t q;

	if (!w) { /* forgotten (many mounts watched): as at first sight */
		*quiet = 0;
		return HOLDER_UNSURE;
	}
	w->used_us = now;
	q = now > w->seen_us ? now - w->seen_us : 0;
	*quiet = (double)q / 1e6;
	/* dead only on a read that found the seq unchanged a whole lease after we saw it:
	 * reads that fail (our partition) make a holder UNSURE, never DEAD */
	if (w->dead_mtime || w->pid_gone ||
	    w->read_us - w->seen_us >= (uint64_t)w->lease_ms * 1000u)
		return HOLDER_DEAD;
	return w->changed && q < (uint64_t)w->lease_ms * 1000u ? HOLDER_LIVE : HOLDER_UNSURE;
}

static struct rwatch *rw_find(struct region_lease *l, uint32_t rid)
{
	for (size_t i = 0; i < l->nrw; i++)
		if (l->rw[i].rid == rid)
			return &l->rw[i];
	return NULL;
}

static bool self_holds(struct region_lease *l, uint32_t rid, uint64_t epoch)
{
	for (size_t i = 0; i < l->nholds; i++)
		if (l->holds[i].rid == rid && l->holds[i].epoch == epoch)
			return true;
	return false;
}

/* The answer for rw as of now. */
static void info_of(struct region_lease *l, const struct rwatch *rw, uint64_t now,
                    struct holder_info *out)
{
	memset(out, 0, sizeof(*out));
	out->epoch = rw->epoch;
	if (rw->have_holder) {
		memcpy(out->mount, rw->h.mount, sizeof(out->mount));
		snprintf(out->host, sizeof(out->host), "%s", rw->h.host);
		snprintf(out->mnt, sizeof(out->mnt), "%s", rw->h.mnt);
		out->pid = rw->h.pid;
		out->since = rw->h.since;
	}
	out->lease_ms = rw->holder_lease_ms;
	switch (rw->base) {
	case B_FREE:
		out->state = HOLDER_FREE;
		break;
	case B_SELF:
		/* ours only while we still hold it (a release turns it FREE without a look) */
		out->state = self_holds(l, rw->rid, rw->epoch) ? HOLDER_SELF : HOLDER_FREE;
		out->lease_ms = l->lease_ms;
		break;
	case B_HELD:
		out->state = judge(l, rw->h.mount, now, &out->quiet_sec);
		break;
	}
}

/* ------------------------------------------------------------------ */
/* One look at a region                                                */
/* ------------------------------------------------------------------ */

/*
 * Look at rid (no lock held on entry or exit) and record what was found in its rwatch
 * (created if create; else a region unwatched meanwhile stays unwatched), then fill *out
 * (may be NULL).  full: read the manifest and holder
 * object again; else only the holder's lease (the first look is always full).
 */
static int look(struct region_lease *l, uint32_t rid, bool full, bool create,
                struct holder_info *out)
{
	struct rwatch cur = {.rid = rid}, *rw;
	struct lease_doc d = {0};
	bool have_lease = false, first_sight = false;
	int64_t mtime = 0;
	int rc;

	mw_mutex_lock(&l->mu);
	rw = rw_find(l, rid);
	if (rw && rw->valid)
		cur = *rw;
	else
		full = true;
	mw_mutex_unlock(&l->mu);

	if (full) {
		uint64_t v = cur.version, ep = cur.epoch;
		rc = newest_epoch(l, l->st, rid, &v, &ep);
		if (rc)
			goto out;
		if (!cur.valid || ep != cur.epoch || !cur.have_holder) {
			rc = ep ? read_holder(l, l->st, rid, ep, &cur.have_holder, &cur.h) : 0;
			if (!ep)
				cur.have_holder = false;
			if (rc)
				goto out;
		}
		cur.version = v;
		cur.epoch = ep;
		cur.ticks = 0;
	}
	cur.holder_lease_ms = 0;
	if (!cur.have_holder) {
		cur.base = B_FREE;
	} else if (!strcmp(cur.h.mount, l->id)) {
		cur.base = B_SELF;
	} else {
		rc = read_lease(l, l->st, cur.h.mount, &have_lease, &d);
		if (rc)
			goto out;
		cur.base = have_lease && doc_holds(&d, rid, cur.epoch) ? B_HELD : B_FREE;
		if (have_lease)
			cur.holder_lease_ms = d.lease_ms;
		if (cur.base == B_HELD) {
			mw_mutex_lock(&l->mu);
			first_sight = mw_find(l, d.mount) == NULL;
			mw_mutex_unlock(&l->mu);
			if (first_sight)
				mtime = lease_mtime(l, l->st, d.mount);
		}
	}
	cur.valid = true;
	cur.err = 0;
	rc = 0;
out:
	mw_mutex_lock(&l->mu);
	if (!rc && cur.base == B_HELD)
		rc = mw_observe(l, d.mount, d.seq, d.lease_ms, mtime, pid_gone(l, &d), now_us());
	rw = rw_find(l, rid);
	if (!rw && !create) { /* not watched (or unwatched meanwhile): stay so */
		if (!rc && out)
			info_of(l, &cur, now_us(), out);
		mw_mutex_unlock(&l->mu);
		lease_doc_clear(&d);
		return rc;
	}
	if (!rw && !MW_GROW(l->rw, l->caprw, l->nrw + 1, 4)) {
		rw = &l->rw[l->nrw++];
		memset(rw, 0, sizeof(*rw));
		rw->rid = rid;
	}
	if (rw && !rc) {
		*rw = cur;
	} else if (rw) {
		rw->err = rc;
	} else {
		rc = -ENOMEM;
	}
	if (!rc && out)
		info_of(l, rw, now_us(), out);
	mw_mutex_unlock(&l->mu);
	lease_doc_clear(&d);
	return rc;
}

/* ------------------------------------------------------------------ */
/* Writing our lease                                                   */
/* ------------------------------------------------------------------ */

/*
 * Write our lease.  want_gen 0: a renewal (always a new write); else write unless a
 * write of a generation >= want_gen already succeeded.  No lock held on entry.
 */
static int lease_put(struct region_lease *l, uint64_t want_gen)
{
	struct lease_doc d = {0};
	char *txt = NULL;
	size_t len = 0;
	uint64_t gen;
	int rc;

	mw_mutex_lock(&l->mu);
	while (l->putting)
		mw_cond_wait(&l->put_cv, &l->mu);
	if (want_gen && l->written_gen >= want_gen) {
		mw_mutex_unlock(&l->mu);
		return 0;
	}
	memcpy(d.mount, l->id, sizeof(d.mount));
	memcpy(d.host, l->host, sizeof(d.host));
	memcpy(d.mnt, l->mnt, sizeof(d.mnt));
	d.pid = l->pid;
	d.since = l->since;
	memcpy(d.boot, l->boot, sizeof(d.boot));
	d.pidns = l->pidns;
	d.seq = ++l->seq;
	d.lease_ms = l->lease_ms;
	d.holds = l->holds; /* borrowed while composing, under the lock */
	d.nholds = l->nholds;
	gen = l->gen;
	rc = lease_doc_format(&d, &txt, &len);
	if (rc) {
		mw_mutex_unlock(&l->mu);
		return rc;
	}
	l->putting = true;
	mw_mutex_unlock(&l->mu);

	rc = store_put(l->st, l->key, txt, len);
	count(l, 1);
	free(txt);

	mw_mutex_lock(&l->mu);
	l->putting = false;
	if (rc == 0) {
		if (gen > l->written_gen)
			l->written_gen = gen;
		l->renewals++;
		if (l->fail_since)
			log_warn(
			    "region: the lease %s is written again (renewals failed for %.1f s)",
			    l->key, (double)(now_us() - l->fail_since) / 1e6);
		l->fail_since = 0;
		l->overdue_logged = false;
		l->last_ok_us = now_us();
	} else {
		l->renew_failures++;
		if (!l->fail_since) {
			l->fail_since = now_us();
			log_warn("region: put %s failed: %s (the lease is retried every %u ms)",
			         l->key, strerror(-rc), l->lease_ms / 3);
		}
	}
	pthread_cond_broadcast(&l->put_cv);
	mw_mutex_unlock(&l->mu);
	return rc;
}

/* Set (add or replace) rid's line in holds; returns the new generation.  [mu] */
static int set_hold_locked(struct region_lease *l, uint32_t rid, uint64_t epoch, bool taking,
                           uint64_t *gen)
{
	size_t i;

	mw_mutex_assert_held(&l->mu);
	for (i = 0; i < l->nholds && l->holds[i].rid != rid; i++)
		;
	if (i == l->nholds) {
		if (MW_GROW(l->holds, l->capholds, l->nholds + 1, 4))
			return -ENOMEM;
		l->nholds++;
	}
	l->holds[i] = (struct lease_hold){.rid = rid, .epoch = epoch, .taking = taking};
	*gen = ++l->gen;
	return 0;
}

/* Drop rid's line; true if there was one.  [mu] */
static bool drop_hold_locked(struct region_lease *l, uint32_t rid, uint64_t *gen)
{
	mw_mutex_assert_held(&l->mu);
	for (size_t i = 0; i < l->nholds; i++)
		if (l->holds[i].rid == rid) {
			l->holds[i] = l->holds[--l->nholds];
			*gen = ++l->gen;
			return true;
		}
	return false;
}

/* ------------------------------------------------------------------ */
/* The thread                                                          */
/* ------------------------------------------------------------------ */

static void *lease_main(void *arg)
{
	struct region_lease *l = arg;
	unsigned tick_ms = l->lease_ms / 3;

	mw_mutex_lock(&l->mu);
	while (!l->thread.stop) {
		struct timespec until = mw_after_ms(tick_ms);
		while (!l->thread.stop && mw_cond_timedwait(&l->cv, &l->mu, &until) != ETIMEDOUT)
			;
		if (l->thread.stop)
			break;
		bool renew = l->nholds > 0;
		if (renew && l->last_ok_us && !l->overdue_logged &&
		    now_us() - l->last_ok_us >= (uint64_t)l->lease_ms * 1000u) {
			l->overdue_logged = true;
			log_warn(
			    "region: the lease %s was not renewed for %.1f s (over its %u ms): "
			    "other mounts may take the regions it holds",
			    l->key, (double)(now_us() - l->last_ok_us) / 1e6, l->lease_ms);
		}
		size_t n = l->nrw;
		uint32_t *rids = n ? malloc(n * sizeof(*rids)) : NULL;
		bool *full = n ? malloc(n * sizeof(*full)) : NULL;
		if (n && (!rids || !full))
			n = 0; /* no memory: no watching this tick */
		for (size_t i = 0; i < n; i++) {
			struct rwatch *rw = &l->rw[i];
			rids[i] = rw->rid;
			full[i] = !rw->valid || ++rw->ticks >= FULL_EVERY;
			/* nothing to re-read between full looks unless another mount holds it */
			if (!full[i] && rw->base != B_HELD)
				rids[i] = UINT32_MAX;
			/* ours: the engine learns of a fence itself; an idle holder only renews */
			if (rw->valid && rw->base == B_SELF && self_holds(l, rw->rid, rw->epoch))
				rids[i] = UINT32_MAX;
			/*
			 * One GET per holder mount a tick, not per region: liveness is the
			 * mount's (struct mwatch), which the first region's read refreshes
			 */
			for (size_t j = 0; j < i && rids[i] != UINT32_MAX && !full[i]; j++)
				if (rids[j] != UINT32_MAX && !full[j] && l->rw[j].base == B_HELD &&
				    !strcmp(l->rw[j].h.mount, rw->h.mount))
					rids[i] = UINT32_MAX;
		}
		mw_mutex_unlock(&l->mu);
		if (renew)
			lease_put(l, 0);
		for (size_t i = 0; i < n; i++) {
			if (rids[i] == UINT32_MAX)
				continue;
			mw_mutex_lock(&l->mu);
			bool stop = l->thread.stop, still = rw_find(l, rids[i]) != NULL;
			mw_mutex_unlock(&l->mu);
			if (stop)
				break;
			if (still)
				look(l, rids[i], full[i], false, NULL);
		}
		free(rids);
		free(full);
		mw_mutex_lock(&l->mu);
	}
	mw_mutex_unlock(&l->mu);
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The API                                                             */
/* ------------------------------------------------------------------ */

/* A fresh mount id: 16 lowercase hex digits from getrandom (the clock as a fallback). */
/* This machine's boot id and our pid namespace (pid_gone()); left unknown on failure. */
static void machine_id(struct region_lease *l)
{
	struct stat st;
	/* tests: a daemon that stands for one on another machine (tests/fs/holders.sh) */
	const char *fake = getenv("MEMWALFS_MACHINE_ID");
	if (fake && *fake) {
		snprintf(l->boot, sizeof(l->boot), "%s", fake);
		if (!stat("/proc/self/ns/pid", &st))
			l->pidns = (uint64_t)st.st_ino;
		return;
	}
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, l->boot, sizeof(l->boot) - 1);
		close(fd);
		while (n > 0 && (l->boot[n - 1] == '\n' || l->boot[n - 1] == ' '))
			n--;
		l->boot[n > 0 ? n : 0] = 0;
		for (ssize_t i = 0; i < n; i++)
			if (l->boot[i] <= ' ' || l->boot[i] > '~')
				l->boot[0] = 0; /* not what a boot id looks like: unknown */
	}
	if (!stat("/proc/self/ns/pid", &st))
		l->pidns = (uint64_t)st.st_ino;
}

static void new_id(char id[17])
{
	uint64_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
		    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)id;
	}
	snprintf(id, 17, "%016" PRIx64, r);
}

static void lease_free(struct region_lease *l)
{
	pthread_cond_destroy(&l->cv);
	pthread_cond_destroy(&l->put_cv);
	mw_mutex_destroy(&l->mu);
	free(l->holds);
	free(l->rw);
	free(l->mw);
	free(l);
}

int region_lease_open(struct store *st, const struct region_lease_opts *o,
                      struct region_lease **out)
{
	struct region_lease *l;
	int rc;

	if (!st || !out)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->st = st;
	new_id(l->id);
	snprintf(l->key, sizeof(l->key), FMT_MOUNTS_PREFIX "%s", l->id);
	if (o && o->host)
		snprintf(l->host, sizeof(l->host), "%s", o->host);
	else if (gethostname(l->host, sizeof(l->host) - 1) != 0)
		snprintf(l->host, sizeof(l->host), "?");
	l->pid = o && o->pid ? o->pid : (long)getpid();
	if (l->pid == (long)getpid())
		machine_id(l); /* a pid of our own: others of this machine may check it */
	snprintf(l->mnt, sizeof(l->mnt), "%s", o && o->mnt ? o->mnt : "");
	l->since = (int64_t)time(NULL);
	l->lease_ms = o && o->lease_ms ? o->lease_ms : LEASE_DEFAULT_MS;
	if (l->lease_ms < LEASE_MIN_MS)
		l->lease_ms = LEASE_MIN_MS;
	mw_mutex_init(&l->mu);
	mw_cond_init_monotonic(&l->cv);
	pthread_cond_init(&l->put_cv, NULL);
	atomic_init(&l->requests, 0);

	rc = lease_put(l, 0);
	if (rc) {
		log_err("region: cannot write the lease %s: %s", l->key, strerror(-rc));
		goto fail;
	}
	rc = mw_thread_start(&l->thread, "region lease", lease_main, l, &l->mu, &l->cv);
	if (rc)
		goto fail;
	log_info("region: lease %s open (lease %u ms)", l->key, l->lease_ms);
	*out = l;
	return 0;
fail:
	if (l->renewals) {
		store_delete(st, l->key);
		count(l, 1);
	}
	lease_free(l);
	return rc;
}

void region_lease_close(struct region_lease *l, bool release)
{
	int rc;

	if (!l)
		return;
	mw_thread_stop(&l->thread);
	if (release) {
		rc = store_delete(l->st, l->key);
		if (rc)
			log_warn("region: delete %s failed: %s (the regions it held are free once "
			         "its lease runs out)",
			         l->key, strerror(-rc));
	}
	lease_free(l);
}

const char *region_lease_id(const struct region_lease *l)
{
	return l->id;
}

int region_holder(struct region_lease *l, uint32_t rid, struct holder_info *out)
{
	return look(l, rid, true, true, out);
}

int region_holder_look(struct region_lease *l, uint32_t rid, struct holder_info *out)
{
	return look(l, rid, true, false, out);
}

int region_holder_cached(struct region_lease *l, uint32_t rid, struct holder_info *out)
{
	struct rwatch *rw;
	int rc;

	mw_mutex_lock(&l->mu);
	rw = rw_find(l, rid);
	if (!rw || !rw->valid) {
		rc = rw ? rw->err : -ENOENT;
		mw_mutex_unlock(&l->mu);
		return rc ? rc : -ENOENT;
	}
	info_of(l, rw, now_us(), out);
	rc = rw->err;
	mw_mutex_unlock(&l->mu);
	return rc;
}

void region_unwatch(struct region_lease *l, uint32_t rid)
{
	mw_mutex_lock(&l->mu);
	struct rwatch *rw = rw_find(l, rid);
	if (rw)
		*rw = l->rw[--l->nrw];
	mw_mutex_unlock(&l->mu);
}

/* Is a holder in this state one to leave alone? */
static bool busy(enum holder_state s)
{
	return s == HOLDER_LIVE || s == HOLDER_UNSURE;
}

/*
 * The taker that created holder/<epoch> of rid first (we got -EEXIST): *t its state.
 * FREE: it gave up (its lease is gone, or lacks the take/hold of that epoch); SELF: the
 * object is ours, from a take we gave up before (skipped like a FREE one).
 */
static int taker_state(struct region_lease *l, uint32_t rid, uint64_t epoch, struct holder_info *t)
{
	struct holder_doc h;
	struct lease_doc d = {0};
	bool have = false, first;
	int64_t mtime = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	t->epoch = epoch;
	rc = read_holder(l, l->st, rid, epoch, &have, &h);
	if (rc)
		return rc;
	if (!have) /* deleted since (GC of an old epoch): try the next */
		return 0;
	memcpy(t->mount, h.mount, sizeof(t->mount));
	snprintf(t->host, sizeof(t->host), "%s", h.host);
	snprintf(t->mnt, sizeof(t->mnt), "%s", h.mnt);
	t->pid = h.pid;
	t->since = h.since;
	if (!strcmp(h.mount, l->id)) {
		t->state = HOLDER_SELF;
		return 0;
	}
	rc = read_lease(l, l->st, h.mount, &have, &d);
	if (rc)
		return rc;
	if (!have || !doc_holds(&d, rid, epoch)) {
		t->state = HOLDER_FREE;
		lease_doc_clear(&d);
		return 0;
	}
	t->lease_ms = d.lease_ms;
	mw_mutex_lock(&l->mu);
	first = mw_find(l, d.mount) == NULL;
	mw_mutex_unlock(&l->mu);
	if (first)
		mtime = lease_mtime(l, l->st, d.mount);
	mw_mutex_lock(&l->mu);
	rc = mw_observe(l, d.mount, d.seq, d.lease_ms, mtime, pid_gone(l, &d), now_us());
	t->state = judge(l, d.mount, now_us(), &t->quiet_sec);
	mw_mutex_unlock(&l->mu);
	lease_doc_clear(&d);
	return rc;
}

int region_acquire(struct region_lease *l, uint32_t rid, bool force, uint64_t *epoch,
                   struct holder_info *prev)
{
	struct holder_info cur, t;
	struct holder_doc h;
	char name[FMT_NAME_MAX], body[2048];
	size_t blen;
	uint64_t gen, target;
	int rc;

	mw_mutex_lock(&l->mu);
	for (size_t i = 0; i < l->nholds; i++)
		if (l->holds[i].rid == rid) {
			*epoch = l->holds[i].epoch;
			mw_mutex_unlock(&l->mu);
			return -EALREADY;
		}
	mw_mutex_unlock(&l->mu);

	rc = look(l, rid, true, true, &cur);
	if (rc)
		return rc;
	if (prev)
		*prev = cur;
	if (!force && busy(cur.state)) {
		log_info("region %" PRIu32 ": held by mount %s (%s pid %ld, %s): %s", rid,
		         cur.mount, cur.host, cur.pid, cur.mnt, holder_state_name(cur.state));
		return -EBUSY;
	}
	if (force && busy(cur.state))
		log_warn("region %" PRIu32 ": taking it from live mount %s (%s pid %ld, %s) on "
		         "purpose: it will be fenced",
		         rid, cur.mount, cur.host, cur.pid, cur.mnt);
	target = cur.epoch + 1;
	for (int tries = 0; tries < ACQUIRE_TRIES; tries++, target++) {
		/* our take first: a taker that meets our holder object then sees us alive */
		mw_mutex_lock(&l->mu);
		rc = set_hold_locked(l, rid, target, true, &gen);
		mw_mutex_unlock(&l->mu);
		if (rc || (rc = lease_put(l, gen)))
			goto drop;
		memset(&h, 0, sizeof(h));
		memcpy(h.mount, l->id, sizeof(h.mount));
		h.epoch = target;
		memcpy(h.host, l->host, sizeof(h.host));
		memcpy(h.mnt, l->mnt, sizeof(h.mnt));
		h.pid = l->pid;
		h.since = (int64_t)time(NULL);
		rc = holder_doc_format(&h, body, sizeof(body), &blen);
		if (rc)
			goto drop;
		fmt_holder_name(name, rid, target);
		rc = store_put_if_absent(l->st, name, body, blen);
		count(l, 1);
		if (rc == 0) {
			*epoch = target;
			log_info("region %" PRIu32 ": epoch %" PRIu64 " is ours to claim (%s)", rid,
			         target, name);
			return 0;
		}
		if (rc != -EEXIST) {
			log_err("region %" PRIu32 ": put_if_absent %s failed: %s", rid, name,
			        strerror(-rc));
			goto drop;
		}
		rc = taker_state(l, rid, target, &t);
		if (rc)
			goto drop;
		/*
		 * Ours (HOLDER_SELF) is a take of ours given up before (a create of ours whose
		 * answer was lost never comes back -EEXIST: the store resolves it by the bytes,
		 * docs/STORES.md): skipped like anyone's.  Taking it as won made two winners,
		 * this one at E and another at E + 1 that had skipped it while our lease had
		 * no take line yet (test_two_takers under load).
		 */
		if (!force && busy(t.state)) {
			log_info("region %" PRIu32
			         ": mount %s (%s pid %ld, %s) is taking epoch %" PRIu64 " first",
			         rid, t.mount, t.host, t.pid, t.mnt, target);
			if (prev)
				*prev = t;
			rc = -EBUSY;
			goto drop;
		}
		log_info("region %" PRIu32 ": %s is of mount %s, %s; trying epoch %" PRIu64, rid,
		         name, t.mount[0] ? t.mount : "(gone)",
		         busy(t.state) ? "taken over on purpose" : "which gave up", target + 1);
	}
	log_err("region %" PRIu32 ": no free epoch after %d holder objects", rid, ACQUIRE_TRIES);
	rc = -EBUSY;
drop:
	mw_mutex_lock(&l->mu);
	bool had = drop_hold_locked(l, rid, &gen);
	mw_mutex_unlock(&l->mu);
	if (had)
		lease_put(l, gen); /* best effort: a stale take only makes a later taker wait */
	return rc;
}

int region_held(struct region_lease *l, uint32_t rid, uint64_t epoch)
{
	uint64_t gen;
	int rc;

	mw_mutex_lock(&l->mu);
	rc = set_hold_locked(l, rid, epoch, false, &gen);
	struct rwatch *rw = rw_find(l, rid);
	if (!rc && rw && rw->valid) {
		/* ours now; the next full look reads the manifest and holder object again */
		rw->epoch = epoch;
		rw->base = B_SELF;
		rw->have_holder = true;
		memset(&rw->h, 0, sizeof(rw->h));
		memcpy(rw->h.mount, l->id, sizeof(rw->h.mount));
		memcpy(rw->h.host, l->host, sizeof(rw->h.host));
		memcpy(rw->h.mnt, l->mnt, sizeof(rw->h.mnt));
		rw->h.pid = l->pid;
		rw->h.epoch = epoch;
		rw->h.since = (int64_t)time(NULL);
		rw->ticks = FULL_EVERY;
	}
	mw_mutex_unlock(&l->mu);
	if (rc)
		return rc;
	rc = lease_put(l, gen);
	if (rc)
		log_warn("region %" PRIu32 ": holding epoch %" PRIu64
		         ", but the lease write failed: %s (retried at the next tick)",
		         rid, epoch, strerror(-rc));
	return rc;
}

int region_release(struct region_lease *l, uint32_t rid)
{
	uint64_t gen;
	bool had;

	mw_mutex_lock(&l->mu);
	had = drop_hold_locked(l, rid, &gen);
	mw_mutex_unlock(&l->mu);
	return had ? lease_put(l, gen) : 0;
}

int region_holder_peek(struct store *st, uint32_t rid, struct holder_info *out)
{
	struct holder_doc h;
	struct lease_doc d = {0};
	bool have = false;
	uint64_t v = 0, ep = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = newest_epoch(NULL, st, rid, &v, &ep);
	if (rc)
		return rc;
	out->epoch = ep;
	if (ep && (rc = read_holder(NULL, st, rid, ep, &have, &h)))
		return rc;
	if (!ep || !have) {
		out->state = HOLDER_FREE;
		return 0;
	}
	memcpy(out->mount, h.mount, sizeof(out->mount));
	snprintf(out->host, sizeof(out->host), "%s", h.host);
	snprintf(out->mnt, sizeof(out->mnt), "%s", h.mnt);
	out->pid = h.pid;
	out->since = h.since;
	rc = read_lease(NULL, st, h.mount, &have, &d);
	if (rc)
		return rc;
	if (!have || !doc_holds(&d, rid, ep)) {
		out->state = HOLDER_FREE;
		lease_doc_clear(&d);
		return 0;
	}
	out->lease_ms = d.lease_ms;
	int64_t mtime = lease_mtime(NULL, st, h.mount), age = (int64_t)time(NULL) - mtime;
	if (mtime <= 0)
		out->state = HOLDER_UNSURE;
	else if (age * 1000 < (int64_t)d.lease_ms)
		out->state = HOLDER_LIVE;
	else if (age * 1000 < (int64_t)d.lease_ms + LEASE_CLOCK_SKEW_SEC * 1000LL)
		out->state = HOLDER_UNSURE;
	else
		out->state = HOLDER_DEAD;
	out->quiet_sec = mtime > 0 && age > 0 ? (double)age : 0;
	lease_doc_clear(&d);
	return 0;
}

void region_lease_get_stats(struct region_lease *l, struct region_lease_stats *out)
{
	uint64_t now = now_us();

	memset(out, 0, sizeof(*out));
	mw_mutex_lock(&l->mu);
	out->renewals = l->renewals;
	out->renew_failures = l->renew_failures;
	out->last_renew_ms_ago = l->last_ok_us ? (int64_t)((now - l->last_ok_us) / 1000u) : -1;
	out->renew_overdue =
	    l->nholds && l->last_ok_us && now - l->last_ok_us >= (uint64_t)l->lease_ms * 1000u;
	out->holds = l->nholds;
	out->watched = l->nrw;
	out->lease_ms = l->lease_ms;
	mw_mutex_unlock(&l->mu);
	out->requests = atomic_load(&l->requests);
}
