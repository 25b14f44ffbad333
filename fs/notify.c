/*
 * notify.c - telling the kernel to drop what it caches, from one thread of the
 * mount (docs/DESIGN.md, "Modules"; docs/FOLLOWERS.md).
 *
 * Two users queue here:
 *   - file.c, after a write through an O_DIRECT handle (issue 16): the kernel
 *     drops the cached pages of the range when the write is sent, but a
 *     buffered read of the same range that was under way fetched the old
 *     bytes from us and puts its pages in afterwards; later buffered reads
 *     would return stale data until the pages are evicted.  The range is
 *     queued and its pages are dropped (fuse_lowlevel_notify_inval_inode)
 *     once the write has been answered.
 *   - follow.c, on a read-only mount of a following engine: every key the
 *     follower applied becomes an inode to refresh and invalidate (attributes
 *     and pages) or a directory entry to invalidate
 *     (fuse_lowlevel_notify_inval_entry).
 *
 * The queue is bounded: at most NF_ITEMS items and NF_NAME_BYTES bytes of
 * entry names.  An inode is queued once: a range queued for an inode that is
 * already queued widens its item to the smallest range that covers both
 * (dropping the pages in between too costs a re-read, never a stale one), and
 * len 0 (the whole inode) absorbs any range.  Past the bounds the queue turns
 * into "everything": every inode of the table is invalidated as a whole;
 * names the kernel caches expire by the entry timeout.
 *
 * The thread takes the whole queue at once (queuing is never held up by a
 * notification in progress) and, for each item, holding no lock:
 *   1. on a follower mount, refreshes the inode's record in the table (the
 *      refresh hook, follow.c) and skips an inode the table does not hold
 *      (the kernel knows only those: it holds a lookup on each); for an entry,
 *      skips a parent the table does not hold;
 *   2. sends the notification.
 * An inode invalidation the kernel answers with -ENOENT while the table still
 * counts lookups of the inode is retried (2 ms, doubling to 128 ms, for about
 * a second): a LOOKUP or READDIRPLUS reply built before a follower refreshed the
 * record is then on its way, and the kernel instantiates the inode from it
 * after the invalidation found nothing.  A new inode takes the reply's
 * attributes whatever their age (no attribute version of its own to compare),
 * and would keep the old size for the attribute timeout: reads of the new
 * bytes cut at the old length.  Once the kernel holds the inode, the retry
 * drops what it took; a later stale reply is refused by the kernel's attribute
 * version.  Retries stop when the table's lookup count falls to 0 (a FORGET).
 *
 * Notifications never come from a request handler (the kernel holds the
 * inode's or directory's lock for the request and the invalidation would
 * wait for it) nor with a lock held that a handler may need (fs->mu, this
 * module's own).  Before the session is mounted (fsnotify_session()) items
 * are refreshed but nothing is sent: the kernel caches nothing yet.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "internal.h"
#include "log.h"
#include "thread.h"

/* Items queued at most, and bytes of entry names; past either, "everything". */
#define NF_ITEMS 4096
#define NF_NAME_BYTES (256u << 10)
/* Slots of the index of queued inodes (open addressing, a power of two > NF_ITEMS). */
#define NF_SLOTS (2 * NF_ITEMS)
/* Inode invalidations waiting for a retry at most, tries of each, first and last delay. */
#define NF_RETRIES 256
#define NF_RETRY_TRIES 12
#define NF_RETRY_FIRST_US 2000u
#define NF_RETRY_MAX_US 128000u

struct nf_item {
	uint64_t ino;     /* the inode, or the parent of an entry */
	uint64_t off;     /* inode: first byte of the range */
	uint64_t len;     /* inode: bytes of the range, 0 the whole inode */
	uint32_t slot;    /* inode: its slot in the queue's index */
	uint32_t name_at; /* entry: where its name starts in names */
	uint16_t name_len;
	bool entry; /* an entry (parent, name), else an inode */
};

/* One queue; the thread swaps the queued one for an empty spare. */
struct nf_queue {
	struct nf_item *v;
	size_t n, cap;
	char *names;
	size_t name_len, name_cap;
	uint32_t slot[NF_SLOTS]; /* inode items: index + 1, 0 empty */
	bool all;                /* everything changed */
};

/* An inode invalidation to send again (see the top of this file). */
struct nf_retry {
	uint64_t ino;
	uint64_t due_us; /* mw_now_us() of the next try */
	uint32_t tries;  /* tries made */
};

struct fsnotify {
	struct mwfs *fs;                   /* borrowed */
	fsnotify_refresh_fn fresh;         /* follower mounts: refresh a record before telling
	                                      (mu: read when the thread takes the queue) */
	struct mw_mutex mu;                /* protects the fields below */
	pthread_cond_t cv;                 /* wakes the thread */
	struct mw_thread thr;              /* thr.stop [mu] */
	struct nf_queue *q;                /* being filled [mu] */
	struct nf_queue *spare;            /* the thread's, empty when not in use */
	struct fuse_session *se;           /* NULL until mounted: nothing to tell [mu] */
	struct fsnotify_counts c;          /* [mu] */
	struct nf_retry retry[NF_RETRIES]; /* invalidations to send again [mu] */
	size_t nretry;                     /* entries of retry [mu] */
};

static size_t slot_of(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 32) & (NF_SLOTS - 1);
}

static void queue_clear(struct nf_queue *q)
{
	/* every inode item goes at once: probing chains need no tombstones */
	for (size_t i = 0; i < q->n; i++)
		if (!q->v[i].entry)
			q->slot[q->v[i].slot] = 0;
	q->n = q->name_len = 0;
	q->all = false;
}

/* Room for one more item and n more name bytes ([mu]); false: the queue is full. */
static bool queue_room(struct nf_queue *q, size_t name_bytes)
{
	if (q->n == NF_ITEMS || q->name_len + name_bytes > NF_NAME_BYTES)
		return false;
	return !MW_GROW(q->v, q->cap, q->n + 1, 64) &&
	       !MW_GROW(q->names, q->name_cap, q->name_len + name_bytes, 4096);
}

/* Everything changed ([mu]): the items are dropped, the thread takes every inode. */
static void queue_all(struct nf_queue *q)
{
	queue_clear(q);
	q->all = true;
}

void fsnotify_inode(struct fsnotify *nf, uint64_t ino, uint64_t off, uint64_t len)
{
	if (!nf)
		return;
	mw_mutex_lock(&nf->mu);
	struct nf_queue *q = nf->q;
	size_t s = slot_of(ino);
	while (!q->all && q->slot[s] && q->v[q->slot[s] - 1].ino != ino)
		s = (s + 1) & (NF_SLOTS - 1);
	if (q->all) {
		/* covered */
	} else if (q->slot[s]) {
		struct nf_item *x = &q->v[q->slot[s] - 1];
		if (x->len == 0 || len == 0) {
			x->off = x->len = 0;
		} else {
			uint64_t lo = x->off < off ? x->off : off;
			uint64_t hi = x->off + x->len > off + len ? x->off + x->len : off + len;
			x->off = lo;
			x->len = hi - lo;
		}
	} else if (queue_room(q, 0)) {
		q->slot[s] = (uint32_t)q->n + 1;
		q->v[q->n++] = (struct nf_item){
		    .ino = ino, .off = len ? off : 0, .len = len, .slot = (uint32_t)s};
	} else {
		queue_all(q);
	}
	pthread_cond_signal(&nf->cv);
	mw_mutex_unlock(&nf->mu);
}

void fsnotify_entry(struct fsnotify *nf, uint64_t parent, const char *name, size_t n)
{
	if (!nf)
		return;
	mw_mutex_lock(&nf->mu);
	struct nf_queue *q = nf->q;
	if (q->all) {
		/* names expire by the entry timeout */
	} else if (n <= 0xffff && queue_room(q, n)) {
		memcpy(q->names + q->name_len, name, n);
		q->v[q->n++] = (struct nf_item){.ino = parent,
		                                .name_at = (uint32_t)q->name_len,
		                                .name_len = (uint16_t)n,
		                                .entry = true};
		q->name_len += n;
	} else {
		queue_all(q);
	}
	pthread_cond_signal(&nf->cv);
	mw_mutex_unlock(&nf->mu);
}

void fsnotify_follow(struct fsnotify *nf, fsnotify_refresh_fn refresh)
{
	if (!nf)
		return;
	mw_mutex_lock(&nf->mu);
	nf->fresh = refresh; /* the next queue taken is told with it */
	mw_mutex_unlock(&nf->mu);
	fsnotify_all(nf);
}

void fsnotify_all(struct fsnotify *nf)
{
	if (!nf)
		return;
	mw_mutex_lock(&nf->mu);
	queue_all(nf->q);
	pthread_cond_signal(&nf->cv);
	mw_mutex_unlock(&nf->mu);
}

/*
 * Does the table hold ino; with looked_up, does it also count lookups of it (the kernel
 * holds it, or is about to)?  fs->mu not held; takes it.
 */
static bool held(struct mwfs *fs, uint64_t ino, bool looked_up)
{
	mw_mutex_lock(&fs->mu);
	const struct inode *ip = inode_find(fs, ino);
	bool h = ip && (!looked_up || ip->nlookup > 0);
	mw_mutex_unlock(&fs->mu);
	return h;
}

/*
 * The kernel answered an invalidation of ino with -ENOENT after tries tries (no lock held):
 * queue another if the table still counts lookups of it.  A full list drops the retry.
 */
static void retry_later(struct fsnotify *nf, uint64_t ino, uint32_t tries)
{
	if (tries >= NF_RETRY_TRIES || !held(nf->fs, ino, true))
		return;
	uint64_t delay = (uint64_t)NF_RETRY_FIRST_US << (tries ? tries - 1 : 0);
	if (delay > NF_RETRY_MAX_US)
		delay = NF_RETRY_MAX_US;
	mw_mutex_lock(&nf->mu);
	size_t i = 0;
	while (i < nf->nretry && nf->retry[i].ino != ino)
		i++;
	if (i < nf->nretry || nf->nretry < NF_RETRIES) {
		if (i == nf->nretry)
			nf->nretry++;
		nf->retry[i] =
		    (struct nf_retry){.ino = ino, .due_us = mw_now_us() + delay, .tries = tries};
		nf->c.retries++;
		pthread_cond_signal(&nf->cv);
	}
	mw_mutex_unlock(&nf->mu);
}

/* Refresh (follower) and invalidate one inode; no lock held. */
static void tell_inode(struct fsnotify *nf, fsnotify_refresh_fn fresh, struct fuse_session *se,
                       uint64_t ino, uint64_t off, uint64_t len, struct fsnotify_counts *c)
{
	if (fresh) {
		if (!fresh(nf->fs, ino))
			return;
		c->refreshed++;
	}
	if (!se)
		return;
	int rc = fuse_lowlevel_notify_inval_inode(se, ino, (off_t)off, (off_t)len);
	/* -ENOENT: the kernel does not know the inode (yet: see retry_later()) */
	if (rc == -ENOENT && fresh)
		retry_later(nf, ino, 1);
	else if (rc)
		log_debug("notify: inval_inode %llu: %s", (unsigned long long)ino, strerror(-rc));
	c->inodes++;
}

/* Send the retries that are due (nf->mu held; dropped while sending). */
static void retry_due(struct fsnotify *nf, struct fuse_session *se)
{
	struct nf_retry due[NF_RETRIES];
	size_t n = 0;
	uint64_t now = mw_now_us();

	mw_mutex_assert_held(&nf->mu);
	for (size_t i = 0; i < nf->nretry;) {
		if (nf->retry[i].due_us <= now) {
			due[n++] = nf->retry[i];
			nf->retry[i] = nf->retry[--nf->nretry];
		} else {
			i++;
		}
	}
	if (!n)
		return;
	mw_mutex_unlock(&nf->mu);
	for (size_t i = 0; i < n; i++) {
		int rc = se ? fuse_lowlevel_notify_inval_inode(se, due[i].ino, 0, 0) : 0;
		if (rc == -ENOENT)
			retry_later(nf, due[i].ino, due[i].tries + 1);
		else if (rc)
			log_debug("notify: inval_inode %llu (retry): %s",
			          (unsigned long long)due[i].ino, strerror(-rc));
	}
	mw_mutex_lock(&nf->mu);
}

/* The deadline of the timed wait for the earliest retry ([mu]); false: none queued. */
static bool retry_deadline(const struct fsnotify *nf, struct timespec *until)
{
	if (!nf->nretry)
		return false;
	uint64_t first = nf->retry[0].due_us;
	for (size_t i = 1; i < nf->nretry; i++)
		if (nf->retry[i].due_us < first)
			first = nf->retry[i].due_us;
	until->tv_sec = (time_t)(first / 1000000u);
	until->tv_nsec = (long)(first % 1000000u) * 1000;
	return true;
}

/* Every inode the table holds (sorted by nothing; the table's order). */
static void tell_all(struct fsnotify *nf, fsnotify_refresh_fn fresh, struct fuse_session *se,
                     struct fsnotify_counts *c)
{
	struct mwfs *fs = nf->fs;
	uint64_t *v = NULL;
	size_t n = 0, cap = 0;
	mw_mutex_lock(&fs->mu);
	for (size_t i = 0; i < fs->hsize; i++)
		for (struct inode *ip = fs->htab[i]; ip; ip = ip->hnext) {
			if (n == cap) {
				size_t nc = cap ? 2 * cap : 256;
				uint64_t *nv = realloc(v, nc * sizeof(*nv));
				if (!nv)
					goto out; /* no memory: what was taken is told */
				v = nv;
				cap = nc;
			}
			v[n++] = ip->ino;
		}
out:
	mw_mutex_unlock(&fs->mu);
	for (size_t i = 0; i < n; i++)
		tell_inode(nf, fresh, se, v[i], 0, 0, c);
	free(v);
}

static void process(struct fsnotify *nf, struct nf_queue *q, fsnotify_refresh_fn fresh,
                    struct fuse_session *se)
{
	struct fsnotify_counts c = {0};
	for (size_t i = 0; i < q->n; i++) {
		const struct nf_item *x = &q->v[i];
		if (!x->entry) {
			tell_inode(nf, fresh, se, x->ino, x->off, x->len, &c);
			continue;
		}
		/* only names in directories the kernel holds can be in its dentry cache */
		if (!se || !held(nf->fs, x->ino, false))
			continue;
		int rc = fuse_lowlevel_notify_inval_entry(se, x->ino, q->names + x->name_at,
		                                          x->name_len);
		if (rc && rc != -ENOENT)
			log_debug("notify: inval_entry %llu: %s", (unsigned long long)x->ino,
			          strerror(-rc));
		c.entries++;
	}
	if (q->all)
		tell_all(nf, fresh, se, &c);
	mw_mutex_lock(&nf->mu);
	nf->c.inodes += c.inodes;
	nf->c.entries += c.entries;
	nf->c.refreshed += c.refreshed;
	mw_mutex_unlock(&nf->mu);
}

static void *notify_main(void *arg)
{
	struct fsnotify *nf = arg;
	mw_mutex_lock(&nf->mu);
	for (;;) {
		struct timespec until;
		while (!nf->thr.stop && nf->q->n == 0 && !nf->q->all) {
			if (!retry_deadline(nf, &until))
				mw_cond_wait(&nf->cv, &nf->mu);
			else if (mw_cond_timedwait(&nf->cv, &nf->mu, &until) == ETIMEDOUT)
				break;
		}
		if (nf->thr.stop)
			break;
		retry_due(nf, nf->se);
		if (nf->q->n == 0 && !nf->q->all)
			continue;
		struct nf_queue *q = nf->q;
		struct fuse_session *se = nf->se;
		fsnotify_refresh_fn fresh = nf->fresh; /* fsnotify_follow() may change it */
		nf->q = nf->spare;
		nf->spare = NULL;
		mw_mutex_unlock(&nf->mu);
		process(nf, q, fresh, se);
		queue_clear(q);
		mw_mutex_lock(&nf->mu);
		nf->spare = q;
	}
	mw_mutex_unlock(&nf->mu);
	return NULL;
}

static void queue_free(struct nf_queue *q)
{
	if (!q)
		return;
	free(q->v);
	free(q->names);
	free(q);
}

int fsnotify_start(struct mwfs *fs, fsnotify_refresh_fn refresh, struct fsnotify **out)
{
	struct fsnotify *nf = calloc(1, sizeof(*nf));
	if (!nf)
		return -ENOMEM;
	nf->fs = fs;
	nf->fresh = refresh;
	nf->q = calloc(1, sizeof(*nf->q));
	nf->spare = calloc(1, sizeof(*nf->spare));
	if (!nf->q || !nf->spare) {
		queue_free(nf->q);
		queue_free(nf->spare);
		free(nf);
		return -ENOMEM;
	}
	mw_mutex_init(&nf->mu);
	mw_cond_init_monotonic(&nf->cv); /* retries wait on mw_now_us()'s clock */
	int rc = mw_thread_start(&nf->thr, "notify", notify_main, nf, &nf->mu, &nf->cv);
	if (rc) {
		fsnotify_stop(nf);
		return rc;
	}
	*out = nf;
	return 0;
}

void fsnotify_session(struct fsnotify *nf, struct fuse_session *se)
{
	if (!nf)
		return;
	mw_mutex_lock(&nf->mu);
	nf->se = se;
	pthread_cond_signal(&nf->cv);
	mw_mutex_unlock(&nf->mu);
}

void fsnotify_attr_now(struct fsnotify *nf, uint64_t ino)
{
	int rc = 0;

	if (!nf)
		return;
	mw_mutex_lock(&nf->mu); /* nf->se stays while it is held */
	if (nf->se) {
		/* off -1: attributes only; the kernel locks no page for it */
		rc = fuse_lowlevel_notify_inval_inode(nf->se, ino, -1, 0);
		if (rc && rc != -ENOENT)
			log_debug("notify: inval_inode %llu (attributes): %s",
			          (unsigned long long)ino, strerror(-rc));
		nf->c.inodes++;
	}
	mw_mutex_unlock(&nf->mu);
	if (rc == -ENOENT)
		retry_later(nf, ino, 1);
}

void fsnotify_counts(struct fsnotify *nf, struct fsnotify_counts *c)
{
	*c = (struct fsnotify_counts){0};
	if (!nf)
		return;
	mw_mutex_lock(&nf->mu);
	*c = nf->c;
	mw_mutex_unlock(&nf->mu);
}

void fsnotify_stop(struct fsnotify *nf)
{
	if (!nf)
		return;
	mw_thread_stop(&nf->thr);
	queue_free(nf->q);
	queue_free(nf->spare);
	pthread_cond_destroy(&nf->cv);
	mw_mutex_destroy(&nf->mu);
	free(nf);
}
