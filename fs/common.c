/*
 * common.c - the helpers every handler shares: per-thread scratch space
 * and batch, error mapping, the clock and timestamps, stat replies.
 *
 * Below every other file of fs/ (it calls none of them), so the modules
 * above form no circle: common.c <- inode.c <- wbuf.c <- file.c
 * <- fs.c (dir.c and xattr.c beside file.c; readahead.c and schema.c below
 * them all).
 */
#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"
#include "log.h"

void fs_tls_free(void *p)
{
	struct tls *t = p;
	if (!t)
		return;
	free(t->buf);
	engine_batch_free(t->b);
	free(t);
}

/* This thread's scratch space (NULL on allocation failure). */
struct tls *fs_tls(struct mwfs *fs)
{
	struct tls *t = pthread_getspecific(fs->tkey);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	if (engine_batch_new(&t->b)) {
		fs_tls_free(t);
		return NULL;
	}
	pthread_setspecific(fs->tkey, t);
	return t;
}

/* A per-thread buffer of at least n bytes, reused across requests. */
uint8_t *fs_tls_buf(struct mwfs *fs, size_t n)
{
	struct tls *t = fs_tls(fs);
	if (!t)
		return NULL;
	if (t->cap < n) {
		uint8_t *nb = realloc(t->buf, n);
		if (!nb)
			return NULL;
		t->buf = nb;
		t->cap = n;
	}
	return t->buf;
}

/* The thread's batch, emptied and bound to ino's region. */
int fs_batch(struct mwfs *fs, uint64_t ino, struct engine_batch **out)
{
	struct fs_region *r = fs_region_of(fs, ino);
	if (!r)
		return -ENOENT;
	struct tls *t = fs_tls(fs);
	if (!t)
		return -ENOMEM;
	engine_batch_clear(t->b);
	t->breg = r;
	t->bxdev = false;
	*out = t->b;
	return 0;
}

struct fs_region *fs_batch_region(struct mwfs *fs, const struct engine_batch *b, bool *xdev)
{
	struct tls *t = pthread_getspecific(fs->tkey);
	if (!t || t->b != b)
		return NULL;
	if (xdev)
		*xdev = t->bxdev;
	return t->breg;
}

/*
 * May key go into b?  Only the thread's batch, and only a key of its region (the
 * superblock: any).  A key of another region is a bug of the caller (the region rules of
 * region.c come first): it asserts; else b is marked and -EXDEV returned.
 */
static int batch_key(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn)
{
	struct tls *t = pthread_getspecific(fs->tkey);
	assert(t && t->b == b && t->breg);
	if (!t || t->b != b || !t->breg)
		return -EINVAL;
	int64_t rid = fs_key_rid(key, kn);
	if (rid < 0 || (uint32_t)rid == t->breg->rid)
		return 0;
	assert(!"a batch key of another region");
	t->bxdev = true;
	return -EXDEV;
}

int fs_batch_put(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn,
                 const void *val, size_t vn)
{
	int rc = batch_key(fs, b, key, kn);
	return rc ? rc : engine_batch_put(b, key, kn, val, vn);
}

int fs_batch_del(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn)
{
	int rc = batch_key(fs, b, key, kn);
	return rc ? rc : engine_batch_delete(b, key, kn);
}

int fs_batch_put_ref(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn,
                     const struct engine_ref *ref, uint64_t off, uint64_t len)
{
	int rc = batch_key(fs, b, key, kn);
	return rc ? rc : engine_batch_put_ref(b, key, kn, ref, off, len);
}

int fs_batch_put_borrowed(struct mwfs *fs, struct engine_batch *b, const uint8_t *key, size_t kn,
                          const void *val, size_t vn)
{
	int rc = batch_key(fs, b, key, kn);
	return rc ? rc : engine_batch_put_borrowed(b, key, kn, val, vn);
}

/* Positive errno for fuse_reply_err() from an engine/fs error. */
int fs_err(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case -ESTALE:  /* fenced by a newer writer */
	case -EUCLEAN: /* corrupt object */
	case -EBADMSG:
	case -EPROTONOSUPPORT:
	case -ETIMEDOUT:
		return EIO;
	default:
		return rc < 0 ? -rc : EIO;
	}
}

int fs_writable(struct mwfs *fs, uint64_t ino)
{
	struct fs_region *r = fs_region_of(fs, ino);
	return r && r->writer ? engine_write_error(r->e) : -EROFS;
}

/*
 * The one clock of every timestamp the daemon sets. The kernel stamps some times itself (the
 * ctime after link, mtime and ctime of writes under the writeback cache) from its coarse clock
 * (current_time(): one step per tick, 4 ms at HZ=250); a finer clock here would stamp a file
 * created within the same tick later than a link made after it. So this is the same coarse
 * clock, and never earlier than a time it gave before (a clock set back does not make a
 * timestamp go backwards): equal times within a tick, as on ext4 without fine-grained stamps.
 */
static _Atomic int64_t last_now_ns; /* the latest time fs_now gave, ns since the epoch */

void fs_now(int64_t *sec, uint32_t *nsec)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	int64_t now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	int64_t last = atomic_load_explicit(&last_now_ns, memory_order_relaxed);
	while (now > last &&
	       !atomic_compare_exchange_weak_explicit(&last_now_ns, &last, now,
	                                              memory_order_relaxed, memory_order_relaxed))
		;
	if (now < last)
		now = last;
	*sec = now / 1000000000;
	*nsec = (uint32_t)(now % 1000000000);
}

/*
 * A time the kernel stamped with its own clock (the ctime of a setattr): fs_now gives nothing
 * earlier from now on. On kernels with fine-grained timestamps (6.13 on) the kernel's clock is
 * the coarse one or, within a tick, a little later; this keeps the daemon's stamps after the
 * kernel's. A time more than 1 s ahead of the clock is not taken (not a clock reading).
 */
void fs_clock_seen(int64_t sec, uint32_t nsec)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME_COARSE, &ts);
	int64_t t = sec * 1000000000 + nsec;
	if (t > (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + 1000000000)
		return;
	int64_t last = atomic_load_explicit(&last_now_ns, memory_order_relaxed);
	while (t > last && !atomic_compare_exchange_weak_explicit(
	                       &last_now_ns, &last, t, memory_order_relaxed, memory_order_relaxed))
		;
}

/*
 * The space statfs reports and fallocate checks.  With the capacity option (or on a store with
 * no size of its own: S3, 1 PiB), that capacity, less the engine's estimate of its live data
 * (pack bytes referenced at the last GC pass plus those written since: an upper estimate).
 * Without it on a local store, the size and free space of the filesystem that holds the store,
 * as df of it says, minus nothing and plus nothing (as bindfs): a program that fills the mount
 * until ENOSPC stops where the host's disk would, and is not told of a petabyte that is not
 * there.  Every region is in the one store: the space is the store's, the live data the sum
 * of the regions'.  Takes the engines' locks briefly, not fs->mu.
 */
void fs_space(struct mwfs *fs, struct fs_space *sp)
{
	struct engine_space es;
	if (!fs->o.capacity && !engine_store_space(fs->reg[0].e, &es)) {
		sp->total = es.total & ~(uint64_t)4095;
		sp->free = es.free < sp->total ? es.free : sp->total;
		sp->avail = es.avail < sp->free ? es.avail : sp->free;
		return;
	}
	uint64_t live = 0;
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	for (unsigned i = 0; i < n; i++) {
		struct engine_stats s;
		engine_get_stats(fs->reg[i].e, &s);
		live += s.live_bytes_est;
	}
	uint64_t cap = fs->o.capacity ? fs->o.capacity : MWFS_DEFAULT_CAPACITY;
	cap &= ~(uint64_t)4095;
	uint64_t used = (live + 4095) & ~(uint64_t)4095;
	sp->total = cap;
	sp->free = sp->avail = used < cap ? cap - used : 0;
}

/*
 * What the kernel's own filesystems do to the set-id bits of a file that a caller changes
 * (write, truncate, fallocate, chown: setattr_should_drop_suidgid()), for the cases the FUSE
 * kernel module leaves to the daemon.  Without FUSE_CAP_HANDLE_KILLPRIV (v1: the daemon would
 * have to do it all, and a write through the writeback cache carries no caller) the kernel
 * clears set-user-ID and a set-group-ID with group-exec itself, by a setattr of the mode; it
 * drops the kill of a set-group-ID without group-exec (the caller is not in the file's group),
 * sending a setattr with nothing to set (write, fallocate, punch hole, copy_file_range) or a
 * size change alone (truncate), and sends nothing for open(O_TRUNC) (FUSE_CAP_ATOMIC_O_TRUNC:
 * the open truncates).  HANDLE_KILLPRIV_V2, which has the kernel say when to kill, is not in
 * libfuse 3.14.  So the rule is applied here with the caller of the request: unless it has
 * CAP_FSETID, set-user-ID goes, and set-group-ID goes when the file is group-executable or
 * the caller is not in the file's group.  A setattr of the mode is the kernel's kill of
 * set-user-ID (the mode without it) or a chmod; set-group-ID in it goes when the caller is not
 * in the group (sgid_only: a chmod's mode never has it then, the kernel strips it from a
 * chmod by such a caller).  The caller's effective capabilities and groups are
 * read from /proc/PID/status; if it is gone, uid 0 counts as privileged and only the
 * request's gid as its group.
 */
#define CAP_FSETID_BIT 4 /* CAP_FSETID in the CapEff mask (linux/capability.h) */

struct caller {
	bool fsetid;   /* has CAP_FSETID */
	gid_t gid;     /* fsgid */
	gid_t grp[64]; /* supplementary groups (the first 64) */
	int ngrp;
};

static void caller_read(fuse_req_t req, struct caller *c)
{
	const struct fuse_ctx *x = fuse_req_ctx(req);
	char path[64], line[1024];
	c->fsetid = x->uid == 0;
	c->gid = x->gid;
	c->ngrp = 0;
	snprintf(path, sizeof(path), "/proc/%u/status", (unsigned)x->pid);
	FILE *f = x->pid ? fopen(path, "re") : NULL;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "CapEff:", 7)) {
			c->fsetid = (strtoull(line + 7, NULL, 16) >> CAP_FSETID_BIT) & 1;
		} else if (!strncmp(line, "Groups:", 7)) {
			char *p = line + 7, *end;
			for (;;) {
				unsigned long g = strtoul(p, &end, 10);
				if (end == p ||
				    c->ngrp == (int)(sizeof(c->grp) / sizeof(c->grp[0])))
					break;
				c->grp[c->ngrp++] = (gid_t)g;
				p = end;
			}
		}
	}
	fclose(f);
}

uint32_t fs_kill_suidgid(fuse_req_t req, uint32_t mode, uint32_t gid, bool sgid_only)
{
	if (!S_ISREG(mode) || !(mode & (sgid_only ? S_ISGID : S_ISUID | S_ISGID)))
		return mode;
	struct caller c;
	caller_read(req, &c);
	if (c.fsetid)
		return mode;
	bool in_group = c.gid == gid;
	for (int i = 0; i < c.ngrp && !in_group; i++)
		in_group = c.grp[i] == gid;
	if (sgid_only)
		return in_group ? mode : mode & ~(uint32_t)S_ISGID;
	mode &= ~(uint32_t)S_ISUID;
	if ((mode & S_IXGRP) || !in_group)
		mode &= ~(uint32_t)S_ISGID;
	return mode;
}

/* Set the chosen timestamps of a to now. */
void fs_touch(struct schema_inode *a, bool atime, bool mtime, bool ctime)
{
	int64_t s;
	uint32_t ns;
	fs_now(&s, &ns);
	if (atime) {
		a->atime_sec = s;
		a->atime_nsec = ns;
	}
	if (mtime) {
		a->mtime_sec = s;
		a->mtime_nsec = ns;
	}
	if (ctime) {
		a->ctime_sec = s;
		a->ctime_nsec = ns;
	}
}

void fs_fill_stat(struct mwfs *fs, const struct inode *ip, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ip->ino;
	st->st_mode = ip->a.mode;
	st->st_nlink = ip->a.nlink;
	st->st_uid = ip->a.uid;
	st->st_gid = ip->a.gid;
	st->st_rdev = (dev_t)ip->a.rdev;
	st->st_size = (off_t)ip->a.size;
	st->st_blksize = (blksize_t)(fs->cs < 131072 ? fs->cs : 131072);
	/* a file counts the bytes its extents store (holes are free); others their size */
	uint64_t bytes = S_ISREG(ip->a.mode) ? ip->a.stored : ip->a.size;
	st->st_blocks = (blkcnt_t)((bytes + 511) / 512);
	st->st_atim.tv_sec = ip->a.atime_sec;
	st->st_atim.tv_nsec = ip->a.atime_nsec;
	st->st_mtim.tv_sec = ip->a.mtime_sec;
	st->st_mtim.tv_nsec = ip->a.mtime_nsec;
	st->st_ctim.tv_sec = ip->a.ctime_sec;
	st->st_ctim.tv_nsec = ip->a.ctime_nsec;
}

void fs_fill_entry(struct mwfs *fs, const struct inode *ip, struct fuse_entry_param *e)
{
	memset(e, 0, sizeof(*e));
	e->ino = ip->ino;
	e->generation = 1;
	e->attr_timeout = fs->o.attr_timeout;
	e->entry_timeout = fs->o.entry_timeout;
	fs_fill_stat(fs, ip, &e->attr);
}

bool fs_all_zero(const uint8_t *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/*
 * A request that found the store unreachable waits for it (like a hard NFS
 * mount) while fewer than half the request threads wait so: outage_enter()
 * takes a place (false: none left, fail now, so that threads are left to
 * answer from the caches), outage_leave() gives it back.
 */
static bool outage_enter(struct mwfs *fs)
{
	unsigned cap = (fs->o.max_threads ? fs->o.max_threads : FS_DEFAULT_THREADS) / 2;
	unsigned cur = atomic_load(&fs->outage_readers);
	do {
		if (cur >= (cap ? cap : 1))
			return false;
	} while (!atomic_compare_exchange_weak(&fs->outage_readers, &cur, cur + 1));
	return true;
}

static void outage_leave(struct mwfs *fs)
{
	atomic_fetch_sub(&fs->outage_readers, 1);
}

int fs_retry(struct mwfs *fs, bool wait, int (*once)(void *), void *arg)
{
	int rc = once(arg);
	if (!engine_err_transient(rc) || (!wait && !outage_enter(fs)))
		return rc;
	rc = engine_retry(fs->reg[0].e, rc, once, arg); /* one policy: the mount's options */
	if (!wait)
		outage_leave(fs);
	return rc;
}

struct warm_arg {
	struct engine *e;
	const uint8_t *key;
	size_t kn;
};

static int warm_once(void *arg)
{
	struct warm_arg *w = arg;
	return engine_prefetch(w->e, w->key, w->kn);
}

int fs_warm_key(struct mwfs *fs, const uint8_t *key, size_t kn)
{
	int64_t rid = fs_key_rid(key, kn);
	struct fs_region *r = rid < 0 ? &fs->reg[0] : fs_region_get(fs, (uint32_t)rid);
	if (!r)
		return -ENOENT;
	struct warm_arg w = {r->e, key, kn};
	return fs_retry(fs, false, warm_once, &w);
}

int fs_read_super(struct engine *e, struct schema_super *sb)
{
	uint8_t key[4];
	void *val = NULL;
	size_t vn = 0;
	size_t kn = schema_key_super(key);
	int rc = engine_get(e, key, kn, &val, &vn);
	if (rc == -ENOENT)
		return rc;
	if (rc) {
		log_err("reading the superblock: %s", strerror(-rc));
		return rc;
	}
	rc = schema_super_decode(val, vn, sb);
	if (rc == -EPROTONOSUPPORT)
		log_err(
		    "the filesystem has format version %u; this memwalfs reads version %u "
		    "only: refusing to mount%s",
		    sb->version, SCHEMA_VERSION,
		    sb->version < SCHEMA_VERSION
		        ? " (it was made by an older memwalfs, with fixed-size chunks; copy its "
		          "files out with that version)"
		        : "");
	else if (rc)
		log_err("the superblock is corrupt (%zu bytes)", vn);
	free(val);
	return rc;
}

/* fs_miss_retry() rounds of one step before its reads under the lock may wait (fs_get_locked()). */
#define FS_RETRY_MAX 8

/*
 * What the thread's last read under fs->mu did not find in memory: a key
 * (fs_get_locked()) or a scan of a prefix (fs_scan()), and the rounds its
 * step has run.
 */
static _Thread_local struct {
	uint8_t key[SCHEMA_KEY_MAX]; /* the key, or the scan's prefix */
	size_t n;                    /* its bytes; 0: nothing missed */
	bool scan;                   /* key is a prefix to scan */
	size_t limit;                /* the scan's entries (0: all) */
	unsigned rounds;
} missed;

/*
 * A read under fs->mu is about to run: true when it may read only from
 * memory; false after FS_RETRY_MAX rounds of its step, when the thread's
 * no-I/O mark is lifted for it until read_locked_end().
 */
static bool read_locked_begin(struct mwfs *fs)
{
	mw_mutex_assert_held(&fs->mu);
	if (missed.rounds < FS_RETRY_MAX)
		return true;
	/* what was warmed keeps being evicted before the retry: read it here, once */
	mw_noio_leave();
	return false;
}

/* The read read_locked_begin() announced ended with rc: remember a miss for fs_miss_retry(). */
static int read_locked_end(bool nowait, const uint8_t *key, size_t kn, bool scan, size_t limit,
                           int rc)
{
	if (!nowait)
		mw_noio_enter();
	if (rc == -EWOULDBLOCK && kn <= sizeof(missed.key)) {
		memcpy(missed.key, key, kn);
		missed.n = kn;
		missed.scan = scan;
		missed.limit = limit;
	}
	return rc;
}

/* The engine of key k's region (its inode's; an entry's parent's), or NULL: not known here. */
static struct engine *key_engine(struct mwfs *fs, const uint8_t *k, size_t kn)
{
	int64_t rid = fs_key_rid(k, kn);
	struct fs_region *r = fs_region_get(fs, rid < 0 ? 0 : (uint32_t)rid);
	return r ? r->e : NULL;
}

int fs_get_locked(struct mwfs *fs, uint64_t seq, const uint8_t *key, size_t kn, void **val,
                  size_t *vn)
{
	struct engine *e = key_engine(fs, key, kn);
	if (!e)
		return -ENOENT; /* a region this mount has no engine for */
	bool nowait = read_locked_begin(fs);
	void *v = NULL;
	int rc;
	if (nowait)
		rc = seq ? engine_get_at_nowait(e, seq, key, kn, val, vn)
		         : engine_get_nowait(e, key, kn, val, vn);
	else
		rc = seq ? engine_get_at(e, seq, key, kn, &v, vn) : engine_get(e, key, kn, &v, vn);
	if (!nowait && val)
		*val = v;
	else
		free(v); /* a probe's value, read in full by engine_get() */
	return read_locked_end(nowait, key, kn, false, 0, rc);
}

int fs_scan(struct mwfs *fs, bool locked, const uint8_t *pfx, size_t pn, size_t limit,
            int (*fn)(void *arg, const uint8_t *k, size_t kn), void *arg)
{
	uint8_t end[SCHEMA_KEY_MAX];
	size_t en = schema_prefix_end(pfx, pn, end);
	struct engine_iter *it = NULL;
	struct engine *e = key_engine(fs, pfx, pn);
	if (!e)
		return -ENOENT;
	bool nowait = locked && read_locked_begin(fs);
	int rc = nowait ? engine_iter_new_nowait(e, pfx, pn, end, en, &it)
	                : engine_iter_new(e, pfx, pn, end, en, &it);
	for (size_t i = 0; !rc && engine_iter_valid(it);) {
		size_t n;
		const uint8_t *k = engine_iter_key(it, &n);
		rc = fn ? fn(arg, k, n) : 0;
		if (++i == limit)
			break; /* no step past what the caller reads: the warm step reads as far */
		engine_iter_next(it);
	}
	if (!rc && it)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	return locked ? read_locked_end(nowait, pfx, pn, true, limit, rc) : rc;
}

bool fs_miss_retry(struct mwfs *fs, int *rc)
{
	mw_mutex_assert_held(&fs->mu);
	if (*rc != -EWOULDBLOCK || !missed.n) {
		missed.rounds = 0;
		return false;
	}
	missed.rounds++;
	atomic_fetch_add_explicit(&fs->noio_retries, 1, memory_order_relaxed);
	mw_mutex_unlock(&fs->mu);
	*rc = missed.scan ? fs_scan(fs, false, missed.key, missed.n, missed.limit, NULL, NULL)
	                  : fs_warm_key(fs, missed.key, missed.n);
	missed.n = 0;
	mw_mutex_lock(&fs->mu);
	if (*rc == -ENOENT)
		*rc = 0; /* absent now: the step, run again, finds that out from memory */
	if (*rc)
		missed.rounds = 0;
	return *rc == 0;
}
