/*
 * bell.c - the store's doorbell (engine.h "Regions: the bell"; docs/REGIONS.md "The
 * bell").
 *
 * DESIGN
 *
 * An idle follower polls the WAL of its region every few seconds; a mount that follows
 * many regions pays that for each.  The bell lets them stop: one small object `bell` at
 * the store root (leasefmt.c: magic, mount id, seq, host), overwritten by a plain PUT
 * whenever a writer engine of any mount commits after a quiet of BELL_RING_QUIET_MS (R).
 * Every mount with followers GETs it every interval_ms (B) and wakes all its followers
 * (engine_follow_wake()) when its bytes changed.  A follower that found nothing for
 * follow_deep_idle_ms (D) goes deep idle (follow.c) and polls only every
 * follow_safety_ms.  Why no commit is missed: a follower deep-idles only after D of
 * empty polls, so every entry it has seen was durable before the quiet began, and the
 * first entry it has not seen comes at least D - (poll interval + a request) after the
 * writer's previous durable write; with R below that the writer rings for it.  The ring
 * lands after the commit is durable, the watcher reads it within B, and the woken
 * follower polls at once: the first write after a quiet shows within about B plus a poll,
 * not within the follow interval.
 *
 * One thread per mount does both halves:
 *   - ringing: bell_ring() sets b->ring and signals; the thread composes the object
 *     (seq + 1: (mount, seq) never repeats, so a watcher sees every ring as a change
 *     even when two mounts overwrite each other) and PUTs it without any lock.  A failed
 *     PUT is retried after 1 s, doubling to 30 s.  A ring asked for during a PUT is sent
 *     again after it.
 *   - watching: while followers are registered, a GET every B.  The first read gives the
 *     baseline; a change wakes every follower; a failed or malformed read wakes them too
 *     and tells them the bell is not there (no deep idle while it cannot be read), as does
 *     a missing bell (a store whose writers never ring: older binaries).
 *
 * Concurrency: b->mu guards every field marked [mu]; it is never held across store
 * I/O.  Wakes run under b->mu (engine_follow_wake() takes e->mu for a moment and does
 * no I/O; no engine calls into the bell holding e->mu: the commit hook runs unlocked), so
 * bell_unfollow() returning means the engine is no longer touched.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "format.h"
#include "grow.h"
#include "lease.h"
#include "log.h"
#include "store.h"
#include "thread.h"

/*
 * R <= D - (the longest poll interval + a request): 30 s of margin for the default poll
 * back-off (4 s) and a PUT retried for up to about 20 s ("Why a commit made while a follower
 * is deep idle always rings", docs/REGIONS.md).
 */
_Static_assert(BELL_RING_QUIET_MS + 30000u <= ENGINE_FOLLOW_DEEP_IDLE_MS,
               "the ring quiet R must stay well below the followers' deep idle D");

#define RETRY_MIN_MS 1000u  /* a failed ring is sent again after this, doubling */
#define RETRY_MAX_MS 30000u /* up to this */

struct bell {
	struct store *st; /* borrowed */
	char mount[17];   /* our lease id ("" : never rings) */
	char host[256];
	unsigned interval_ms;   /* B */
	unsigned ring_quiet_ms; /* R */

	struct mw_mutex mu;
	pthread_cond_t cv; /* the thread waits here (monotonic) [mu] */
	struct mw_thread thread;

	bool ring;            /* a ring is due [mu] */
	uint64_t seq;         /* rings composed [mu] */
	uint64_t retry_at_us; /* a failed ring is not sent before this [mu] */
	unsigned retry_ms;    /* the next backoff [mu] */
	bool ring_failed;     /* the current run of failures was logged [mu] */

	struct engine **fol;     /* registered followers [mu] */
	size_t nfol, capfol;     /* [mu] */
	uint64_t next_read_us;   /* the next GET [mu] */
	char *last;              /* the bytes of the last read (NULL: none or missing) [mu] */
	size_t last_len;         /* [mu] */
	bool have_base;          /* a read succeeded (last is the baseline) [mu] */
	bool read_failed;        /* the current run of failed reads was logged [mu] */
	struct bell_stats stats; /* [mu] */
};

/* Wake every registered follower and tell them whether the bell is there.  [mu] */
static void wake_all_locked(struct bell *b, bool present, bool wake)
{
	mw_mutex_assert_held(&b->mu);
	for (size_t i = 0; i < b->nfol; i++) {
		engine_follow_set_bell(b->fol[i], present);
		if (wake)
			engine_follow_wake(b->fol[i]);
	}
}

/* PUT the bell once (no lock held on entry or exit).  0 or the store's error. */
static int ring_once(struct bell *b)
{
	struct bell_doc d = {0};
	char buf[512];
	size_t len = 0;

	mw_mutex_lock(&b->mu);
	memcpy(d.mount, b->mount, sizeof(d.mount));
	memcpy(d.host, b->host, sizeof(d.host));
	d.seq = ++b->seq;
	b->ring = false;
	mw_mutex_unlock(&b->mu);
	int rc = bell_doc_format(&d, buf, sizeof(buf), &len);
	if (rc == 0)
		rc = store_put(b->st, FMT_BELL_KEY, buf, len);
	mw_mutex_lock(&b->mu);
	if (rc == 0) {
		b->stats.rings++;
		b->retry_ms = RETRY_MIN_MS;
		if (b->ring_failed)
			log_info("bell: rung again");
		b->ring_failed = false;
	} else {
		b->stats.ring_failures++;
		b->ring = true; /* retried */
		b->retry_at_us = mw_now_us() + (uint64_t)b->retry_ms * 1000u;
		if (!b->ring_failed)
			log_warn(
			    "bell: put %s failed: %s (retried; followers of this mount's regions "
			    "see its writes by their safety poll meanwhile)",
			    FMT_BELL_KEY, strerror(-rc));
		b->ring_failed = true;
		b->retry_ms = b->retry_ms * 2 > RETRY_MAX_MS ? RETRY_MAX_MS : b->retry_ms * 2;
	}
	mw_mutex_unlock(&b->mu);
	return rc;
}

/* GET the bell and wake the followers if it changed (no lock held on entry or exit). */
static void read_once(struct bell *b)
{
	void *buf = NULL;
	size_t len = 0;
	struct bell_doc d;
	int rc = store_get(b->st, FMT_BELL_KEY, 0, STORE_TO_END, &buf, &len);

	if (rc == 0)
		rc = bell_doc_parse(FMT_BELL_KEY, buf, len, &d);
	mw_mutex_lock(&b->mu);
	b->stats.reads++;
	if (rc && rc != -ENOENT) {
		b->stats.read_failures++;
		if (!b->read_failed)
			log_warn(
			    "bell: reading %s: %s; its followers poll at their normal interval "
			    "until it reads again",
			    FMT_BELL_KEY, strerror(-rc));
		b->read_failed = true;
		b->stats.present = false;
		wake_all_locked(b, false, true); /* be safe: a ring may hide behind the error */
		free(buf);
	} else {
		bool present = rc == 0;
		bool changed = b->have_base &&
		               (present != (b->last != NULL) ||
		                (present && (len != b->last_len || memcmp(buf, b->last, len))));
		if (b->read_failed)
			log_info("bell: %s reads again", FMT_BELL_KEY);
		b->read_failed = false;
		if (changed)
			b->stats.changes++;
		b->stats.present = present;
		wake_all_locked(b, present, changed);
		free(b->last);
		b->last = present ? buf : NULL;
		b->last_len = present ? len : 0;
		b->have_base = true;
		if (!present)
			free(buf);
	}
	b->next_read_us = mw_now_us() + (uint64_t)b->interval_ms * 1000u;
	mw_mutex_unlock(&b->mu);
}

static void *bell_main(void *arg)
{
	struct bell *b = arg;

	mw_mutex_lock(&b->mu);
	while (!b->thread.stop) {
		uint64_t now = mw_now_us(), until = UINT64_MAX;
		bool ring = b->ring && now >= b->retry_at_us;
		bool read = b->nfol && now >= b->next_read_us;
		if (!ring && !read) {
			if (b->ring)
				until = b->retry_at_us;
			if (b->nfol && b->next_read_us < until)
				until = b->next_read_us;
			uint64_t ms = until == UINT64_MAX ? 3600000u : (until - now + 999) / 1000;
			struct timespec ts = mw_after_ms(ms);
			mw_cond_timedwait(&b->cv, &b->mu, &ts);
			continue;
		}
		mw_mutex_unlock(&b->mu);
		if (ring)
			ring_once(b);
		if (read)
			read_once(b);
		mw_mutex_lock(&b->mu);
	}
	bool pending = b->ring;
	mw_mutex_unlock(&b->mu);
	if (pending)
		ring_once(b); /* a final commit's ring (an unmount): once, best effort */
	return NULL;
}

int bell_open(struct store *st, const struct bell_opts *o, struct bell **out)
{
	struct bell *b;
	int rc;

	if (!st || !out)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->st = st;
	if (o && o->mount)
		snprintf(b->mount, sizeof(b->mount), "%s", o->mount);
	if (o && o->host)
		snprintf(b->host, sizeof(b->host), "%s", o->host);
	else if (gethostname(b->host, sizeof(b->host) - 1) != 0)
		snprintf(b->host, sizeof(b->host), "?");
	b->interval_ms = o && o->interval_ms ? o->interval_ms : BELL_INTERVAL_MS;
	b->ring_quiet_ms = o && o->ring_quiet_ms ? o->ring_quiet_ms : BELL_RING_QUIET_MS;
	b->retry_ms = RETRY_MIN_MS;
	mw_mutex_init(&b->mu);
	mw_cond_init_monotonic(&b->cv);
	rc = mw_thread_start(&b->thread, "bell", bell_main, b, &b->mu, &b->cv);
	if (rc) {
		pthread_cond_destroy(&b->cv);
		mw_mutex_destroy(&b->mu);
		free(b);
		return rc;
	}
	*out = b;
	return 0;
}

void bell_close(struct bell *b)
{
	if (!b)
		return;
	mw_thread_stop(&b->thread);
	pthread_cond_destroy(&b->cv);
	mw_mutex_destroy(&b->mu);
	free(b->fol);
	free(b->last);
	free(b);
}

void bell_ring(struct bell *b)
{
	if (!b || !b->mount[0])
		return;
	mw_mutex_lock(&b->mu);
	if (!b->ring) {
		b->ring = true;
		pthread_cond_signal(&b->cv);
	}
	mw_mutex_unlock(&b->mu);
}

void bell_commit_hook(void *arg, uint64_t quiet_us)
{
	struct bell *b = arg;
	if (b && quiet_us > (uint64_t)b->ring_quiet_ms * 1000u)
		bell_ring(b);
}

int bell_follow(struct bell *b, struct engine *e)
{
	if (!b || !e)
		return -EINVAL;
	mw_mutex_lock(&b->mu);
	for (size_t i = 0; i < b->nfol; i++)
		if (b->fol[i] == e) {
			mw_mutex_unlock(&b->mu);
			return 0;
		}
	if (MW_GROW(b->fol, b->capfol, b->nfol + 1, 8)) {
		mw_mutex_unlock(&b->mu);
		return -ENOMEM;
	}
	b->fol[b->nfol++] = e;
	engine_follow_set_bell(e, b->have_base && b->stats.present && !b->read_failed);
	if (b->nfol == 1 && !b->have_base)
		b->next_read_us = 0; /* the first follower: read the baseline now */
	pthread_cond_signal(&b->cv);
	mw_mutex_unlock(&b->mu);
	return 0;
}

void bell_unfollow(struct bell *b, struct engine *e)
{
	if (!b || !e)
		return;
	mw_mutex_lock(&b->mu);
	for (size_t i = 0; i < b->nfol; i++)
		if (b->fol[i] == e) {
			b->fol[i] = b->fol[--b->nfol];
			break;
		}
	mw_mutex_unlock(&b->mu);
}

void bell_get_stats(struct bell *b, struct bell_stats *out)
{
	memset(out, 0, sizeof(*out));
	if (!b)
		return;
	mw_mutex_lock(&b->mu);
	*out = b->stats;
	out->followers = (unsigned)b->nfol;
	mw_mutex_unlock(&b->mu);
}
