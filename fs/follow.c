/*
 * follow.c - a read-only mount of a following engine (docs/FOLLOWERS.md):
 * what the follower applied is taken out of the caches, ours and the kernel's.
 *
 * The engine's follower thread hands every key it applied to follow_keys()
 * (engine_follow_set_fn), which refreshes the inode records among them at once
 * (step 1 below, so that the table's sizes follow the engine's data as closely as
 * they can) and queues them all.  This file's own thread takes the queue and
 *
 *   1. refreshes, under fs->mu, every inode of the table whose record (or
 *      data) changed: the new record is read from the engine first (a
 *      MemTable read: the follower just applied it), without the lock; an
 *      inode whose record is gone is marked gone with nlink 0;
 *   2. then, holding no lock, tells the kernel: a directory entry key
 *      ('D' parent name) becomes fuse_lowlevel_notify_inval_entry(parent,
 *      name), any other key of an inode (its record, its data, its xattrs:
 *      'I', 'E' (extents), 'X', 'O', and whatever key layout file data uses, as long as
 *      the inode number follows the tag) fuse_lowlevel_notify_inval_inode(ino),
 *      which drops the kernel's attributes and cached pages of it.  Only
 *      inodes the table holds are known to the kernel (it holds a lookup on
 *      each), and only names in directories it holds can be in its dentry
 *      cache, so nothing else is sent.
 *
 * The notifications never come from a request handler (the kernel would wait
 * for the handler's own directory lock) nor with fs->mu held (a handler
 * waiting for fs->mu may hold what the kernel's invalidation waits for).
 *
 * "Everything changed" (the follower jumped to a newer manifest, or the queue
 * overflowed its FF_QUEUE_MAX bytes): every inode of the table is refreshed
 * and invalidated; names the kernel caches in directories expire by the
 * entry timeout (docs/FOLLOWERS.md, known downsides).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "coding.h"
#include "internal.h"
#include "log.h"

/* Bytes of queued keys past which the queue is dropped for "everything changed". */
#define FF_QUEUE_MAX (4u << 20)

struct fsfollow {
	struct mwfs *fs;         /* borrowed */
	pthread_mutex_t mu;      /* protects the fields below */
	pthread_cond_t cv;       /* wakes the thread */
	uint8_t *q;              /* queued keys: u16 length, key; repeated [mu] */
	size_t qlen, qcap;       /* bytes used, allocated [mu] */
	bool all;                /* everything changed [mu] */
	bool stop;               /* the thread must exit [mu] */
	struct fuse_session *se; /* set once mounted; NULL: nothing to tell [mu] */
	pthread_t tid;           /* the thread */
	uint64_t keys, inval_entries, inval_inodes, refreshed; /* counters [mu] */
};

static int refresh_inode(struct mwfs *fs, uint64_t ino);

/*
 * The engine's follow callback (engine follower thread, no lock held): refresh the
 * inodes whose records changed at once, so that a read does not combine the size of the
 * table with the new bytes for longer than it must, and queue every key for the thread,
 * which tells the kernel.
 */
static void follow_keys(void *arg, const struct engine_key *keys, size_t n, bool all)
{
	struct fsfollow *ff = arg;

	for (size_t i = 0; i < n && !all; i++)
		if (keys[i].n == 9 && keys[i].p[0] == SCHEMA_TAG_INODE)
			refresh_inode(ff->fs, schema_key_u64(keys[i].p, keys[i].n, 1));
	pthread_mutex_lock(&ff->mu);
	if (all)
		ff->all = true;
	for (size_t i = 0; i < n && !ff->all; i++) {
		size_t need = ff->qlen + 2 + keys[i].n;
		if (keys[i].n > 0xffff || need > FF_QUEUE_MAX) {
			ff->all = true;
			break;
		}
		if (need > ff->qcap) {
			size_t cap = ff->qcap ? ff->qcap : 4096;
			while (cap < need)
				cap *= 2;
			uint8_t *q = realloc(ff->q, cap);
			if (!q) {
				ff->all = true;
				break;
			}
			ff->q = q;
			ff->qcap = cap;
		}
		put_be16(ff->q + ff->qlen, (uint16_t)keys[i].n);
		memcpy(ff->q + ff->qlen + 2, keys[i].p, keys[i].n);
		ff->qlen = need;
	}
	if (ff->all)
		ff->qlen = 0;
	ff->keys += n;
	pthread_cond_signal(&ff->cv);
	pthread_mutex_unlock(&ff->mu);
}

/* A set of inode numbers (sorted, deduplicated at the end). */
struct inos {
	uint64_t *v;
	size_t n, cap;
};

static int inos_add(struct inos *s, uint64_t ino)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 64;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = ino;
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static void inos_finish(struct inos *s)
{
	size_t w = 0;
	if (!s->n)
		return;
	qsort(s->v, s->n, sizeof(*s->v), u64_cmp);
	for (size_t i = 1; i < s->n; i++)
		if (s->v[i] != s->v[w])
			s->v[++w] = s->v[i];
	s->n = w + 1;
}

/*
 * Reload the record of ino into its table entry, if the table holds it (fs->mu not
 * held).  Returns 1 when the table holds it (the kernel may cache it), else 0.
 */
static int refresh_inode(struct mwfs *fs, uint64_t ino)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_inode(key, ino);
	void *val = NULL;
	size_t vn = 0;
	int held;

	mw_mutex_lock(&fs->mu);
	held = inode_find(fs, ino) != NULL;
	mw_mutex_unlock(&fs->mu);
	if (!held)
		return 0;
	int rc = engine_get(fs->e, key, kn, &val, &vn);
	mw_mutex_lock(&fs->mu);
	struct inode *ip = inode_find(fs, ino);
	if (ip && rc == 0) {
		struct schema_inode a;
		const uint8_t *tgt = NULL;
		size_t tlen = 0;
		if (schema_inode_decode(val, vn, &a, &tgt, &tlen) == 0) {
			char *t = NULL;
			if (S_ISLNK(a.mode) && (t = malloc(tlen + 1))) {
				memcpy(t, tgt, tlen);
				t[tlen] = '\0';
			}
			ip->a = a;
			ip->rec_size = a.size;
			ip->gone = false;
			if (t || !S_ISLNK(a.mode)) {
				free(ip->target);
				ip->target = t;
			}
		} else {
			log_warn("follow: inode %llu: corrupt record (%zu bytes); kept the old one",
			         (unsigned long long)ino, vn);
		}
	} else if (ip && rc == -ENOENT) {
		/*
		 * Removed by the writer, which does not know that this mount still has it open
		 * (its data goes with it): fstat shows nlink 0, and reads end at once rather
		 * than returning zeros where the deleted bytes were.
		 */
		ip->gone = true;
		ip->a.nlink = 0;
		if (S_ISREG(ip->a.mode))
			ip->a.size = ip->rec_size = 0;
	}
	mw_mutex_unlock(&fs->mu);
	free(val);
	return ip != NULL;
}

/* One batch of work taken off the queue. */
static void process(struct fsfollow *ff, uint8_t *q, size_t qlen, bool all, struct fuse_session *se)
{
	struct mwfs *fs = ff->fs;
	struct inos inos = {0};
	uint64_t n_entry = 0, n_inode = 0, n_ref = 0;

	if (all) {
		/* every inode the table holds */
		mw_mutex_lock(&fs->mu);
		for (size_t i = 0; i < fs->hsize; i++)
			for (struct inode *ip = fs->htab[i]; ip; ip = ip->hnext)
				if (inos_add(&inos, ip->ino))
					break;
		mw_mutex_unlock(&fs->mu);
	}
	for (size_t off = 0; off + 2 <= qlen;) {
		size_t kn = get_be16(q + off);
		const uint8_t *k = q + off + 2;
		off += 2 + kn;
		if (kn < 9 || k[0] == SCHEMA_TAG_SUPER)
			continue;
		uint64_t ino = schema_key_u64(k, kn, 1);
		if (k[0] == SCHEMA_TAG_DENTRY) {
			/* the parent's record changes in the same batch: it is refreshed then */
			mw_mutex_lock(&fs->mu);
			bool held = inode_find(fs, ino) != NULL;
			mw_mutex_unlock(&fs->mu);
			if (held && se) {
				int rc = fuse_lowlevel_notify_inval_entry(
				    se, ino, (const char *)k + 9, kn - 9);
				if (rc && rc != -ENOENT)
					log_debug("follow: inval_entry %llu: %s",
					          (unsigned long long)ino, strerror(-rc));
				n_entry++;
			}
			continue;
		}
		inos_add(&inos, ino);
	}
	inos_finish(&inos);
	for (size_t i = 0; i < inos.n; i++) {
		if (!refresh_inode(fs, inos.v[i]))
			continue;
		n_ref++;
		if (se) {
			int rc = fuse_lowlevel_notify_inval_inode(se, inos.v[i], 0, 0);
			if (rc && rc != -ENOENT)
				log_debug("follow: inval_inode %llu: %s",
				          (unsigned long long)inos.v[i], strerror(-rc));
			n_inode++;
		}
	}
	free(inos.v);
	pthread_mutex_lock(&ff->mu);
	ff->inval_entries += n_entry;
	ff->inval_inodes += n_inode;
	ff->refreshed += n_ref;
	pthread_mutex_unlock(&ff->mu);
}

static void *ff_main(void *arg)
{
	struct fsfollow *ff = arg;
	uint8_t *spare = NULL;
	size_t spare_cap = 0;

	pthread_mutex_lock(&ff->mu);
	for (;;) {
		while (!ff->stop && !ff->all && ff->qlen == 0)
			pthread_cond_wait(&ff->cv, &ff->mu);
		if (ff->stop)
			break;
		/* take the queue, leave an empty buffer for the callback */
		uint8_t *q = ff->q;
		size_t qlen = ff->qlen, qcap = ff->qcap;
		bool all = ff->all;
		struct fuse_session *se = ff->se;
		ff->q = spare;
		ff->qcap = spare_cap;
		ff->qlen = 0;
		ff->all = false;
		pthread_mutex_unlock(&ff->mu);
		process(ff, q, qlen, all, se);
		spare = q;
		spare_cap = qcap;
		pthread_mutex_lock(&ff->mu);
	}
	pthread_mutex_unlock(&ff->mu);
	free(spare);
	return NULL;
}

int fsfollow_start(struct mwfs *fs, struct fsfollow **out)
{
	struct fsfollow *ff = calloc(1, sizeof(*ff));
	int rc;

	if (!ff)
		return -ENOMEM;
	ff->fs = fs;
	pthread_mutex_init(&ff->mu, NULL);
	pthread_cond_init(&ff->cv, NULL);
	rc = pthread_create(&ff->tid, NULL, ff_main, ff);
	if (rc) {
		pthread_cond_destroy(&ff->cv);
		pthread_mutex_destroy(&ff->mu);
		free(ff);
		return -rc;
	}
	engine_follow_set_fn(fs->e, follow_keys, ff);
	*out = ff;
	return 0;
}

void fsfollow_session(struct fsfollow *ff, struct fuse_session *se)
{
	if (!ff)
		return;
	pthread_mutex_lock(&ff->mu);
	ff->se = se;
	pthread_mutex_unlock(&ff->mu);
}

void fsfollow_stop(struct fsfollow *ff)
{
	if (!ff)
		return;
	engine_follow_set_fn(ff->fs->e, NULL, NULL); /* returns once no call is in progress */
	pthread_mutex_lock(&ff->mu);
	ff->stop = true;
	pthread_cond_signal(&ff->cv);
	pthread_mutex_unlock(&ff->mu);
	pthread_join(ff->tid, NULL);
	log_info("follow: %llu keys applied, %llu inodes refreshed, %llu inode and %llu entry "
	         "invalidations",
	         (unsigned long long)ff->keys, (unsigned long long)ff->refreshed,
	         (unsigned long long)ff->inval_inodes, (unsigned long long)ff->inval_entries);
	free(ff->q);
	pthread_cond_destroy(&ff->cv);
	pthread_mutex_destroy(&ff->mu);
	free(ff);
}
