/*
 * follow.c - a read-only mount of a following engine (docs/FOLLOWERS.md):
 * what the follower applied is taken out of the caches, ours and the kernel's.
 *
 * The engine's follower thread hands every key it applied to follow_keys()
 * (engine_follow_set_fn), which refreshes the inode records among them at once
 * and tells the kernel that their attributes are stale, inside a publish
 * (follow_gate(): from the publish of an entry until the callback returns; a
 * read of file data that a publish overlapped is done again), so that a read
 * never returns new bytes to a kernel that still holds the old size; and
 * queues every key for the mount's notify thread (notify.c):
 *
 *   - a directory entry key ('D' parent name) becomes an entry to invalidate
 *     (fuse_lowlevel_notify_inval_entry(parent, name));
 *   - any other key of an inode (its record, its data, its xattrs: 'I', 'E'
 *     (extents), 'X', 'O', and whatever key layout file data uses, as long as
 *     the inode number follows the tag) an inode to refresh and invalidate
 *     whole (fuse_lowlevel_notify_inval_inode(ino, 0, 0): attributes and
 *     cached pages).
 *
 * The notify thread refreshes each queued inode with follow_refresh() first
 * (its hook on a follower mount): the new record is read from the engine (a
 * MemTable read: the follower just applied it) without fs->mu, then put in the
 * table under it; an inode whose record is gone is marked gone with nlink 0.
 * Only inodes the table holds are known to the kernel (it holds a lookup on
 * each), and only names in directories it holds can be in its dentry cache,
 * so nothing else is sent.
 *
 * A file the writer removed keeps its last state while the kernel holds it (an
 * open file, a cached name): attributes with nlink 0, and its bytes read at the
 * engine sequence of that state (refresh(), file.c read_locked();
 * docs/FOLLOWERS.md "Reads").
 *
 * "Everything changed" (the follower jumped to a newer manifest, or the queue
 * overflowed its bounds): every inode of the table is refreshed and
 * invalidated; names the kernel caches in directories expire by the entry
 * timeout (docs/FOLLOWERS.md, known downsides).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "log.h"

struct fsfollow {
	struct mwfs *fs;       /* borrowed */
	struct fs_region *r;   /* the region whose following engine calls us (borrowed) */
	_Atomic uint64_t keys; /* keys applied */
	/*
	 * Publishes begun plus publishes ended: odd while the follower thread is between
	 * follow_gate(true) and follow_gate(false).  A read that saw the same even count
	 * before and after it overlapped no publish (fsfollow_read_done()).
	 */
	_Atomic uint64_t pubs;
	struct mw_mutex pub_mu;  /* with pub_cv: readers wait for a publish to end */
	pthread_cond_t pub_cv;   /* broadcast when pubs turns even */
	_Atomic uint64_t redone; /* reads done again because a publish overlapped them */
	uint64_t before;         /* engine_seq() before the entry being published (follower) */
	/*
	 * Held exclusive by the follower thread during a publish; shared by the last try of
	 * a read that publishes overlapped FSFOLLOW_READ_TRIES times (the follower waits for
	 * it then); prefers the follower.
	 */
	pthread_rwlock_t gate;
};

/* The engine's gate around a publish (engine follower thread, no lock held). */
static void follow_gate(void *arg, bool hold)
{
	struct fsfollow *ff = arg;

	if (hold) {
		pthread_rwlock_wrlock(&ff->gate);
		atomic_fetch_add(&ff->pubs, 1);
		ff->before = engine_seq(ff->r->e); /* the entry is not applied yet */
		return;
	}
	atomic_fetch_add(&ff->pubs, 1);
	mw_mutex_lock(&ff->pub_mu);
	pthread_cond_broadcast(&ff->pub_cv);
	mw_mutex_unlock(&ff->pub_mu);
	pthread_rwlock_unlock(&ff->gate);
}

/* The publish count once no publish is under way (waits for one to end). */
static uint64_t pubs_even(struct fsfollow *ff)
{
	uint64_t p = atomic_load(&ff->pubs);
	if (!(p & 1))
		return p;
	mw_mutex_lock(&ff->pub_mu);
	while ((p = atomic_load(&ff->pubs)) & 1)
		mw_cond_wait(&ff->pub_cv, &ff->pub_mu);
	mw_mutex_unlock(&ff->pub_mu);
	return p;
}

void fsfollow_read_begin(struct mwfs *fs, uint64_t ino, struct fsfollow_read *r)
{
	struct fs_region *reg = fs_region_of(fs, ino);
	*r = (struct fsfollow_read){0};
	/* reg->ff changes only while no request runs (mode.c): the same until the read ends */
	r->ff = reg ? reg->ff : NULL;
	if (r->ff)
		r->pubs = pubs_even(r->ff);
}

bool fsfollow_read_done(struct fsfollow_read *r)
{
	struct fsfollow *ff = r->ff;

	if (!ff)
		return true;
	if (r->locked) {
		pthread_rwlock_unlock(&ff->gate);
		return true;
	}
	/*
	 * The read's engine reads took the engine's locks, which a publish takes after
	 * counting itself in: a read that saw any of its state sees the count moved.
	 */
	if (atomic_load(&ff->pubs) == r->pubs)
		return true;
	atomic_fetch_add(&ff->redone, 1);
	if (++r->tries >= FSFOLLOW_READ_TRIES) {
		pthread_rwlock_rdlock(&ff->gate);
		r->locked = true;
	} else {
		r->pubs = pubs_even(ff);
	}
	return false;
}

static int refresh(struct mwfs *fs, uint64_t ino, uint64_t before);

/*
 * The engine's follow callback (engine follower thread, no engine lock held, the gate held
 * for a single entry): refresh the inodes whose records changed and tell the kernel their
 * attributes are stale, at once, and queue every key for the notify thread, which
 * refreshes again and invalidates entries and pages.
 */
static void follow_keys(void *arg, const struct engine_key *keys, size_t n, bool all)
{
	struct fsfollow *ff = arg;
	struct fsnotify *nf = ff->fs->nf;

	atomic_fetch_add(&ff->keys, n);
	if (all) {
		mw_mutex_lock(&ff->fs->mu);
		ff->fs->dgen_all++; /* every listing snapshot may be stale (listing.c) */
		mw_mutex_unlock(&ff->fs->mu);
		fsnotify_all(nf);
		return;
	}
	bool dentries = false;
	for (size_t i = 0; i < n && !dentries; i++)
		dentries = keys[i].n >= 9 && ((const uint8_t *)keys[i].p)[0] == SCHEMA_TAG_DENTRY;
	if (dentries) {
		mw_mutex_lock(&ff->fs->mu);
		ff->fs->dgen_all++; /* the writer changed entries: listing snapshots are stale */
		mw_mutex_unlock(&ff->fs->mu);
	}
	for (size_t i = 0; i < n; i++) {
		const uint8_t *k = keys[i].p;
		size_t kn = keys[i].n;
		if (kn < 9 || k[0] == SCHEMA_TAG_SUPER)
			continue;
		uint64_t ino = schema_key_u64(k, kn, 1);
		/* within the gate: the kernel hears of the new size before any read of the bytes */
		if (k[0] == SCHEMA_TAG_INODE && kn == 9 && refresh(ff->fs, ino, ff->before))
			fsnotify_attr_now(nf, ino);
		if (k[0] == SCHEMA_TAG_DENTRY)
			/* the parent's record changes in the same batch: it is refreshed then */
			fsnotify_entry(nf, ino, (const char *)k + 9, kn - 9);
		else
			fsnotify_inode(nf, ino, 0, 0);
	}
}

/*
 * follow_refresh(); before: engine_seq() just before the entry being published (the
 * follower's callback), or 0 (the notify thread: not known).
 */
static int refresh(struct mwfs *fs, uint64_t ino, uint64_t before)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_inode(key, ino);
	void *val = NULL, *last = NULL;
	size_t vn = 0, ln = 0;
	uint64_t seq = 0;
	int held;
	struct fs_region *r = fs_region_of(fs, ino);

	if (!r || r->writer) {
		/*
		 * A region this mount writes: its table entries are ahead of the engine (changes
		 * not committed yet, write buffers), never read back; the kernel is told all
		 * the same (a direct write).  One it does not know: nothing of it is held.
		 */
		mw_mutex_lock(&fs->mu);
		held = r && inode_find(fs, ino) != NULL;
		mw_mutex_unlock(&fs->mu);
		return held;
	}
	/*
	 * One refresh at a time: the notify thread's and the follower's callback's would
	 * otherwise interleave, and a record read before an entry was published could be put
	 * in the table after the one read since (a size older than the engine's bytes, until
	 * the next change of the file).  Reads of the engine are monotonic, so serialized
	 * refreshes leave the newest record.
	 */
	mw_mutex_lock(&fs->refresh_mu);
	mw_mutex_lock(&fs->mu);
	held = inode_find(fs, ino) != NULL;
	mw_mutex_unlock(&fs->mu);
	if (!held) {
		mw_mutex_unlock(&fs->refresh_mu);
		return 0;
	}
	int rc = inode_record_get(fs, ino, false, &val, &vn, &seq);
	/*
	 * Removed by the entry being published: its last state is the one just before it
	 * (the table may hold an older one if the record was not refreshed since).
	 */
	bool have_last =
	    rc == -ENOENT && before && engine_get_at(r->e, before, key, kn, &last, &ln) == 0;
	mw_mutex_lock(&fs->mu);
	struct inode *ip = inode_find(fs, ino);
	if (ip && rc == 0) {
		if (inode_record_set(ip, val, vn, seq))
			ip->gone = false;
	} else if (ip && rc == -ENOENT) {
		/*
		 * Removed by the writer, which does not know that this mount still has it open
		 * or cached (an open file, a name the kernel has not dropped yet): it keeps its
		 * last state, with nlink 0, and its data is read at the sequence of that state
		 * (ip->seq; file.c read_locked()) for as long as the engine holds that state;
		 * then reads fail with ESTALE.  Never an empty file the writer did not have.
		 */
		if (have_last && (!ip->gone || ip->seq < before))
			inode_record_set(ip, last, ln, before);
		ip->gone = true;
		ip->a.nlink = 0;
	}
	mw_mutex_unlock(&fs->mu);
	mw_mutex_unlock(&fs->refresh_mu);
	free(val);
	free(last);
	return ip != NULL;
}

int follow_refresh(struct mwfs *fs, uint64_t ino)
{
	return refresh(fs, ino, 0);
}

int fsfollow_start(struct mwfs *fs, struct fs_region *r, struct fsfollow **out)
{
	struct fsfollow *ff = calloc(1, sizeof(*ff));
	if (!ff)
		return -ENOMEM;
	ff->fs = fs;
	ff->r = r;
	mw_mutex_init(&ff->pub_mu);
	pthread_cond_init(&ff->pub_cv, NULL);
	pthread_rwlockattr_t ga;
	pthread_rwlockattr_init(&ga);
	pthread_rwlockattr_setkind_np(&ga, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	int rc = pthread_rwlock_init(&ff->gate, &ga);
	pthread_rwlockattr_destroy(&ga);
	if (rc) {
		pthread_cond_destroy(&ff->pub_cv);
		mw_mutex_destroy(&ff->pub_mu);
		free(ff);
		return -rc;
	}
	engine_follow_set_fn(r->e, follow_keys, follow_gate, ff);
	*out = ff;
	return 0;
}

void fsfollow_stop(struct fsfollow *ff)
{
	if (!ff)
		return;
	engine_follow_set_fn(ff->r->e, NULL, NULL, NULL); /* returns once no call is in progress */
	struct fsnotify_counts c;
	fsnotify_counts(ff->fs->nf, &c);
	log_info("follow: %llu keys applied, %llu inodes refreshed, %llu inode and %llu entry "
	         "invalidations, %llu retried; %llu reads done again after a publish",
	         (unsigned long long)atomic_load(&ff->keys), (unsigned long long)c.refreshed,
	         (unsigned long long)c.inodes, (unsigned long long)c.entries,
	         (unsigned long long)c.retries, (unsigned long long)atomic_load(&ff->redone));
	pthread_rwlock_destroy(&ff->gate);
	pthread_cond_destroy(&ff->pub_cv);
	mw_mutex_destroy(&ff->pub_mu);
	free(ff);
}
