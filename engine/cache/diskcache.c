/*
 * diskcache.c - the disk tier of the read caches (diskcache.h, docs/CACHE.md).
 *
 * DESIGN
 *
 * Layout of the directory:
 *   lock             flock()ed while a cache has the directory open
 *   format           "memwalfs-diskcache 3\n"; another content: the entries are
 *                    deleted at open (an older or future format, or something else)
 *   XX/NAME          one entry: NAME is the 32 hex digits of XXH3_128(key),
 *                    XX its first two
 *   XX/.NAME.K.tmp   an entry being written by writer K (deleted at open)
 *
 * Entry file (big-endian), whole 4 KiB pages: the header page (magic "MWDC"
 * u32, version u16 (2), klen u16, dlen u32, reserved u32 (0), key[klen],
 * check u64 = XXH3_64(data, seed = XXH3_64(header and key)), zeros), then
 * data[dlen] from offset 4096, then zeros to the end of its last page.  The
 * data on a page boundary lets a writer send a page-aligned buffer to the
 * disk with O_DIRECT as it is, and no truncation is needed after a direct
 * write.  A reader knows the length it wants, reads the header, key and
 * check, then the data, its padding and one byte more, and accepts the
 * entry only if the file has exactly the expected size, magic, version,
 * lengths, key and check.  Anything else is deleted.
 *
 * Entries are written by the cache's writer threads (DC_WRITERS by default):
 * writer K to XX/.NAME.K.tmp, then renamed over XX/NAME, without fsync (a
 * torn file after a crash fails its check).  Several writers because an
 * entry is mostly waiting: creating the file, a direct write of 1 MiB and
 * the truncation to its length took about 4 ms together on the benchmark
 * machine's disk (0.5 ms of it CPU), so one writer kept up with 220 MB/s of
 * cold reads and dropped a quarter of a 512 MiB file read at that speed;
 * four overlap the waits.  The index (hash table of names, LRU list, sizes)
 * lives in memory under dc->mu; it is rebuilt at open by writer 0, which
 * lists the directories first (oldest modification time last in the LRU);
 * no writer writes before the listing is done (it deletes temporaries).  Reads do not need the
 * index: they open the file by name, so they hit even while the listing runs.  A hit moves the
 * entry to the front and, when its file was last touched more than a minute ago, queues a touch
 * (utimensat) so that the order survives a remount.
 *
 * Failures: a write that fails (full disk, read-only, EIO...) stops inserts
 * for good with one warning; reads go on.  Nothing here ever fails a read
 * of the filesystem: the worst case is a miss.
 *
 * Safety.  The daemon runs as root, so a link planted in the directory could
 * make it overwrite or delete any file.  The directory is opened one name at
 * a time from "/" (dcdir_open(), dcdir.c), each directory relative to the one before:
 * every directory on the way must belong to the mount's user or to root and
 * be writable by nobody else (one on the way may be if it is sticky, like
 * /tmp), and a symbolic link on the way is followed only when one of them
 * made it; anything else refuses the cache with a log line that says which
 * directory, whose it is and what to do.  Inside it, everything is opened
 * relative to the directory's descriptor without following a link: lock and
 * format with O_NOFOLLOW (a link named format is removed, not written
 * through), the XX directories once each with O_NOFOLLOW and kept open
 * (sub_dir(); the listing removes a link or file named XX), entry files
 * relative to them (temporaries created with O_EXCL | O_NOFOLLOW).  The
 * wipe unlinks names inside our own XX directories only: an unlinked link
 * is gone, what it pointed at is untouched.
 *
 * Locks: dc->mu protects everything marked so; no I/O is done under it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "coding.h"
#include "dcdir.h"
#include "diskcache.h"
#include "grow.h"
#include "log.h"
#include "thread.h"

#define DC_MAGIC 0x4D574443u /* "MWDC" */
#define DC_VERSION 2
#define DC_HDR 16                          /* magic, version, klen, dlen, reserved */
#define DC_CHECK 8                         /* the check, after the key */
#define DC_PAGE 4096                       /* the header page; files are whole pages */
#define DC_FORMAT "memwalfs-diskcache 3\n" /* content of DIR/format */
#define DC_TOUCH_SEC 60                    /* refresh a hit file's mtime at most this often */
#define DC_NAME 32                         /* hex digits of a name */
#define DC_MIN_AUTO (4u << 20) /* a default bound below this: the disk is full, cache nothing */
#define DC_WRITERS 4           /* writer threads (opts.writers 0) */
#define DC_WRITERS_MAX 16
#define DC_SUBS 256 /* XX directories: 00 to ff */

/* One entry of the index. */
struct dc_ent {
	XXH128_hash_t h;            /* the name */
	uint64_t bytes;             /* file size */
	int64_t mtime;              /* last touch, seconds */
	struct dc_ent *hnext;       /* hash chain */
	struct dc_ent *prev, *next; /* LRU list, dc->head most recent */
};

enum { JOB_PUT, JOB_TOUCH, JOB_FLUSH };

/*
 * Queued work for the writers.  A put's header page starts with head[0,
 * DC_HDR + klen) (header and key), then the check (computed by the writer);
 * its data is data[0, dlen).  A copied
 * put keeps its data after the head; a shared one points at the caller's,
 * which release(arg) gives back once the entry is written or dropped.
 */
struct dc_job {
	struct dc_job *next;
	int kind;                /* JOB_* */
	uint64_t seq;            /* queue order, from 1 */
	XXH128_hash_t h;         /* the entry */
	size_t flen;             /* bytes of the entry file (JOB_PUT) */
	const uint8_t *data;     /* its data (JOB_PUT) */
	void (*release)(void *); /* shared data: give it back (or NULL) */
	void *arg;               /* release's argument */
	uint8_t head[];          /* header and key (JOB_PUT); a copy's data follows */
};

/* One writer thread and what is its own. */
struct dc_writer {
	struct diskcache *dc;
	int idx;         /* K of its temporary names; 0 lists the directory first */
	pthread_t tid;   /* (writers 1..; writer 0 is dc->thr) */
	uint64_t cur;    /* seq of the job it works on, 0 when none; dc->mu */
	uint8_t *bounce; /* its page-aligned buffer for direct writes */
	size_t bounce_cap;
};

struct diskcache {
	char *dir;               /* the directory (for log lines) */
	int dfd;                 /* the directory, open */
	atomic_int sub[DC_SUBS]; /* its XX directories, opened on first use (-1: not yet) */
	int lockfd;              /* DIR/lock, flocked */
	uint64_t max_bytes;      /* the bound; dc->mu (set by the thread after the listing) */
	bool auto_max;           /* the bound is the default one */
	uint64_t avail;          /* free bytes of the filesystem at open (auto_max) */
	size_t queue_max;        /* bound of queued bytes */
	bool wipe;               /* the format file was not ours: delete entries at the listing */

	struct mw_mutex mu;   /* see the file comment */
	pthread_cond_t cv;    /* work queued, or stop; dc->mu */
	pthread_cond_t idle;  /* a writer finished a job while a flush waits; dc->mu */
	struct mw_thread thr; /* writer 0 (its stop flag stops them all) */
	struct dc_writer *w;  /* the writers */
	int nw;               /* their number; nw_started of them run */
	int nw_started;
	bool listed;               /* writer 0 has indexed the directory; dc->mu */
	uint64_t seq;              /* last seq given to a job; dc->mu */
	int flush_waits;           /* writers waiting in a flush job; dc->mu */
	struct dc_job *qhead;      /* queue; dc->mu */
	struct dc_job **qtail;     /* dc->mu */
	size_t qbytes;             /* bytes queued; dc->mu */
	uint64_t flushes;          /* flush jobs queued; dc->mu */
	uint64_t flushed;          /* flush jobs done; dc->mu */
	struct dc_ent **tab;       /* hash table; dc->mu */
	size_t nb;                 /* its buckets (a power of two) */
	struct dc_ent *head;       /* most recently used; dc->mu */
	struct dc_ent *tail;       /* least recently used; dc->mu */
	bool stopped_inserts;      /* a write failed; dc->mu */
	atomic_bool direct;        /* entries are written with O_DIRECT */
	struct diskcache_stats st; /* counters; dc->mu */
};

/* ---- names and the index -------------------------------------------------- */

static XXH128_hash_t name_of(const void *key, size_t klen)
{
	return XXH3_128bits(key, klen);
}

/*
 * The name of h's file in its directory XX, "NAME" (tmp >= 0: writer tmp's ".NAME.K.tmp",
 * K = tmp), into buf (at least 48 bytes); returns the number of XX (h's first byte).
 */
static unsigned name_in_sub(char *buf, size_t n, XXH128_hash_t h, int tmp)
{
	char hex[DC_NAME + 1];

	snprintf(hex, sizeof(hex), "%016" PRIx64 "%016" PRIx64, (uint64_t)h.high64,
	         (uint64_t)h.low64);
	if (tmp >= 0)
		snprintf(buf, n, ".%s.%d.tmp", hex, tmp);
	else
		snprintf(buf, n, "%s", hex);
	return (unsigned)(h.high64 >> 56);
}

/*
 * The descriptor of directory XX number i, opened once (then kept until close) relative to
 * the cache's, never through a link: a link or a file named XX fails (ELOOP, ENOTDIR);
 * create: made (0700) if missing.  -1 with errno on failure.
 */
static int sub_dir(struct diskcache *dc, unsigned i, bool create)
{
	int fd = atomic_load_explicit(&dc->sub[i], memory_order_acquire), prev = -1;
	char name[3];

	if (fd >= 0)
		return fd;
	snprintf(name, sizeof(name), "%02x", i);
	fd = openat(dc->dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(dc->dfd, name, 0700) && errno != EEXIST)
			return -1;
		fd = openat(dc->dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -1;
	if (!atomic_compare_exchange_strong(&dc->sub[i], &prev, fd)) {
		close(fd); /* another thread opened it first */
		fd = prev;
	}
	return fd;
}

/* Unlink the file of h (whatever it is: a link is removed, not followed). */
static void unlink_entry(struct diskcache *dc, XXH128_hash_t h)
{
	char name[64];
	int sfd = sub_dir(dc, name_in_sub(name, sizeof(name), h, -1), false);

	if (sfd >= 0)
		unlinkat(sfd, name, 0);
}

static size_t bucket(const struct diskcache *dc, XXH128_hash_t h)
{
	return (size_t)h.low64 & (dc->nb - 1);
}

static struct dc_ent *find(struct diskcache *dc, XXH128_hash_t h)
{
	struct dc_ent *x = dc->tab[bucket(dc, h)];

	while (x && !XXH128_isEqual(x->h, h))
		x = x->hnext;
	return x;
}

static void lru_unlink(struct diskcache *dc, struct dc_ent *x)
{
	if (x->prev)
		x->prev->next = x->next;
	else
		dc->head = x->next;
	if (x->next)
		x->next->prev = x->prev;
	else
		dc->tail = x->prev;
	x->prev = x->next = NULL;
}

static void lru_front(struct diskcache *dc, struct dc_ent *x)
{
	x->next = dc->head;
	x->prev = NULL;
	if (dc->head)
		dc->head->prev = x;
	dc->head = x;
	if (!dc->tail)
		dc->tail = x;
}

/* Take x out of the index (the caller frees it). */
static void forget(struct diskcache *dc, struct dc_ent *x)
{
	struct dc_ent **pp = &dc->tab[bucket(dc, x->h)];

	while (*pp != x)
		pp = &(*pp)->hnext;
	*pp = x->hnext;
	lru_unlink(dc, x);
	dc->st.bytes -= x->bytes;
	dc->st.entries--;
}

/* Double the hash table when it is full (best effort). */
static void maybe_grow(struct diskcache *dc)
{
	size_t nb = dc->nb * 2;
	struct dc_ent **t;

	if (dc->st.entries < dc->nb || !(t = calloc(nb, sizeof(*t))))
		return;
	for (size_t i = 0; i < dc->nb; i++) {
		struct dc_ent *x = dc->tab[i], *next;
		for (; x; x = next) {
			next = x->hnext;
			x->hnext = t[(size_t)x->h.low64 & (nb - 1)];
			t[(size_t)x->h.low64 & (nb - 1)] = x;
		}
	}
	free(dc->tab);
	dc->tab = t;
	dc->nb = nb;
}

/*
 * Enter (or update) h with its size; front (recent) or back (old, from the
 * listing).  Returns false on -ENOMEM (the file then stays unindexed).
 */
static bool remember(struct diskcache *dc, XXH128_hash_t h, uint64_t bytes, int64_t mtime,
                     bool front)
{
	struct dc_ent *x = find(dc, h);

	if (x) {
		forget(dc, x);
	} else {
		maybe_grow(dc);
		x = calloc(1, sizeof(*x));
		if (!x)
			return false;
		x->h = h;
	}
	x->bytes = bytes;
	x->mtime = mtime;
	x->hnext = dc->tab[bucket(dc, h)];
	dc->tab[bucket(dc, h)] = x;
	if (front) {
		lru_front(dc, x);
	} else {
		x->prev = dc->tail;
		if (dc->tail)
			dc->tail->next = x;
		dc->tail = x;
		if (!dc->head)
			dc->head = x;
	}
	dc->st.bytes += bytes;
	dc->st.entries++;
	return true;
}

/* Unlink the files of the least recently used entries while over the bound. */
static void evict(struct diskcache *dc)
{
	mw_mutex_lock(&dc->mu);
	while (dc->tail && dc->st.bytes > dc->max_bytes) {
		struct dc_ent *x = dc->tail;
		XXH128_hash_t h = x->h;
		forget(dc, x);
		free(x);
		dc->st.evictions++;
		mw_mutex_unlock(&dc->mu);
		unlink_entry(dc, h);
		mw_mutex_lock(&dc->mu);
	}
	mw_mutex_unlock(&dc->mu);
}

/* Stop inserts for good after a failed write (one warning). */
static void stop_inserts(struct diskcache *dc, const char *what, int err)
{
	mw_mutex_lock(&dc->mu);
	bool first = !dc->stopped_inserts;
	dc->stopped_inserts = true;
	dc->st.inserting = false;
	mw_mutex_unlock(&dc->mu);
	if (first && err)
		log_warn("disk cache %s: %s failed (%s): no more entries are added to the disk "
		         "cache (it still serves what it holds)",
		         dc->dir, what, strerror(err));
	else if (first)
		log_warn("disk cache %s: %s: nothing is added to the disk cache", dc->dir, what);
}

static void encode_header(uint8_t *p, size_t klen, size_t len)
{
	put_be32(p, DC_MAGIC);
	put_be16(p + 4, DC_VERSION);
	put_be16(p + 6, (uint16_t)klen);
	put_be32(p + 8, (uint32_t)len);
	put_be32(p + 12, 0);
}

static uint64_t check_of(const uint8_t *head, size_t klen, const void *data, size_t len)
{
	return (uint64_t)XXH3_64bits_withSeed(data, len, XXH3_64bits(head, DC_HDR + klen));
}

/* ---- the thread ----------------------------------------------------------- */

/* Parse a 32-hex-digit name. */
static bool parse_name(const char *s, XXH128_hash_t *h)
{
	uint64_t v[2] = {0, 0};

	if (strlen(s) != DC_NAME)
		return false;
	for (int i = 0; i < DC_NAME; i++) {
		int c = s[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else
			return false;
		v[i / 16] = v[i / 16] << 4 | (uint64_t)d;
	}
	h->high64 = v[0];
	h->low64 = v[1];
	return true;
}

struct scanned {
	XXH128_hash_t h;
	uint64_t bytes;
	int64_t mtime;
};

static int by_mtime_desc(const void *a, const void *b)
{
	const struct scanned *x = a, *y = b;

	return x->mtime > y->mtime ? -1 : x->mtime < y->mtime;
}

/* List XX/ directories: index the entries (newest first), delete temporaries. */
static void scan(struct diskcache *dc)
{
	struct scanned *v = NULL;
	size_t n = 0, cap = 0;

	for (unsigned i = 0; i < DC_SUBS; i++) {
		int fd = sub_dir(dc, i, false);
		if (fd < 0 && (errno == ELOOP || errno == ENOTDIR)) {
			/* a link (or a file) named XX: not ours, never followed */
			char sub[3];
			snprintf(sub, sizeof(sub), "%02x", i);
			log_warn("disk cache %s: %s/%s is not a directory (a symbolic link or a "
			         "file): removed without following it",
			         dc->dir, dc->dir, sub);
			unlinkat(dc->dfd, sub, 0);
			continue;
		}
		if (fd < 0 || (fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) < 0)
			continue; /* the listing's own descriptor: closedir() closes it */
		DIR *d = fdopendir(fd);
		if (!d) {
			close(fd);
			continue;
		}
		struct dirent *de;
		while ((de = readdir(d))) {
			struct stat sb;
			XXH128_hash_t h;
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			bool ours = parse_name(de->d_name, &h);
			if (!ours || dc->wipe) {
				if (de->d_name[0] == '.' || dc->wipe)
					unlinkat(fd, de->d_name, 0);
				continue;
			}
			if (fstatat(fd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) ||
			    !S_ISREG(sb.st_mode))
				continue;
			if (MW_GROW(v, cap, n + 1, 1024))
				break;
			v[n++] = (struct scanned){h, (uint64_t)sb.st_size, (int64_t)sb.st_mtime};
		}
		closedir(d);
	}
	if (n)
		qsort(v, n, sizeof(*v), by_mtime_desc);
	mw_mutex_lock(&dc->mu);
	for (size_t i = 0; i < n; i++)
		if (!find(dc, v[i].h)) /* a put that landed first is newer */
			remember(dc, v[i].h, v[i].bytes, v[i].mtime, false);
	if (dc->auto_max) {
		uint64_t m = (dc->avail + dc->st.bytes) / 2;
		dc->max_bytes = m < DISKCACHE_AUTO_CAP ? m : DISKCACHE_AUTO_CAP;
	}
	dc->st.capacity = dc->max_bytes;
	bool tiny = dc->auto_max && dc->max_bytes < DC_MIN_AUTO;
	mw_mutex_unlock(&dc->mu);
	free(v);
	if (tiny) {
		char why[96];
		snprintf(why, sizeof(why),
		         "only %" PRIu64 " bytes free in its filesystem (No space left on device)",
		         dc->avail);
		stop_inserts(dc, why, 0);
	}
	evict(dc);
}

/* Make w's bounce buffer (page-aligned) hold at least n bytes; false without memory. */
static bool bounce_room(struct dc_writer *w, size_t n)
{
	if (n <= w->bounce_cap)
		return true;
	free(w->bounce);
	w->bounce_cap = 0;
	w->bounce = aligned_alloc(DC_PAGE, n);
	if (!w->bounce)
		return false;
	w->bounce_cap = n;
	return true;
}

/* pwritev all of iov[0, nv) to fd at off (it consumes iov): 0, an errno value, or -1 for
   EINVAL before anything was written (direct I/O refused). */
static int pwritev_all(int fd, struct iovec *v, int nv, off_t off)
{
	bool first = true;

	while (nv) {
		ssize_t n = pwritev(fd, v, nv, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL && first)
			return -1;
		if (n <= 0)
			return n < 0 ? errno : ENOSPC;
		first = false;
		off += n;
		size_t k = (size_t)n;
		for (; nv && k >= v->iov_len; nv--, v++)
			k -= v->iov_len;
		if (nv) {
			v->iov_base = (uint8_t *)v->iov_base + k;
			v->iov_len -= k;
		}
	}
	return 0;
}

/*
 * Write the entry file of j to the new file fd with direct I/O, its header
 * page already in w->bounce (which has room for the whole file when the data
 * is not page-aligned, else for two pages).  Data that starts on a page boundary (GET
 * buffers of big reads do, s3/http.c) is written from where it is, only its
 * last partial page copied; other data is copied after the header page.
 * The bytes do not pass through the page cache (which would copy them once
 * more and hold a second copy of what the memory cache holds, dirty, until
 * written back).  0, an errno value, or -1 when direct I/O cannot be used
 * here (the caller writes through the page cache, from then on).
 */
static int write_direct(struct dc_writer *w, int fd, const struct dc_job *j, size_t len)
{
	size_t whole = len / DC_PAGE * DC_PAGE, rest = len - whole;
	bool aligned = (uintptr_t)j->data % DC_PAGE == 0;
	struct iovec iov[3];
	int nv = 0;

	uint8_t *tail = w->bounce + DC_PAGE;
	iov[nv++] = (struct iovec){w->bounce, DC_PAGE};
	if (aligned) {
		if (whole)
			iov[nv++] = (struct iovec){(void *)j->data, whole};
		if (rest) {
			memcpy(tail, j->data + whole, rest);
			memset(tail + rest, 0, DC_PAGE - rest);
			iov[nv++] = (struct iovec){tail, DC_PAGE};
		}
	} else {
		memcpy(tail, j->data, len);
		memset(tail + len, 0, j->flen - DC_PAGE - len);
		iov[0].iov_len = j->flen;
	}
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT))
		return -1; /* a filesystem without direct I/O (EINVAL) */
	return pwritev_all(fd, iov, nv, 0);
}

/* Write one entry file; false if inserts had to stop. */
static bool write_entry(struct dc_writer *w, struct dc_job *j)
{
	static const uint8_t zeros[DC_PAGE];
	struct diskcache *dc = w->dc;
	char tmp[64], path[64];
	const char *what = "creating an entry";
	int fd, sfd, err = -1;
	size_t klen = get_be16(j->head + 6), len = get_be32(j->head + 8);

	/* the header page: header, key, check, zeros (and room for a direct write's copy) */
	bool direct = atomic_load_explicit(&dc->direct, memory_order_relaxed);
	if (!bounce_room(w, direct && (uintptr_t)j->data % DC_PAGE ? j->flen : 2 * DC_PAGE)) {
		mw_mutex_lock(&dc->mu);
		dc->st.dropped++;
		mw_mutex_unlock(&dc->mu);
		return true; /* no memory now: this entry only */
	}
	memcpy(w->bounce, j->head, DC_HDR + klen);
	put_be64(w->bounce + DC_HDR + klen, check_of(j->head, klen, j->data, len));
	memset(w->bounce + DC_HDR + klen + DC_CHECK, 0, DC_PAGE - DC_HDR - klen - DC_CHECK);
	name_in_sub(path, sizeof(path), j->h, -1);
	sfd = sub_dir(dc, name_in_sub(tmp, sizeof(tmp), j->h, w->idx), true);
	if (sfd < 0) {
		stop_inserts(dc, "opening its directory", errno);
		return false;
	}
	/* a new file, never through a link: whatever has the name (a crash's leftover) goes */
	fd = openat(sfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST && unlinkat(sfd, tmp, 0) == 0)
		fd = openat(sfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		stop_inserts(dc, what, errno);
		return false;
	}
	if (direct) {
		err = write_direct(w, fd, j, len);
		if (err < 0 && atomic_exchange(&dc->direct, false))
			log_info(
			    "disk cache %s: no direct I/O here: entries are written through the "
			    "page cache",
			    dc->dir);
		if (err < 0 && ftruncate(fd, 0) == 0) {
			int fl = fcntl(fd, F_GETFL);
			if (fl >= 0)
				fcntl(fd, F_SETFL, fl & ~O_DIRECT);
		}
	}
	if (err < 0) {
		struct iovec iov[3] = {
		    {w->bounce, DC_PAGE},
		    {(void *)j->data, len},
		    {(void *)zeros, j->flen - DC_PAGE - len},
		};
		err = pwritev_all(fd, iov, 3, 0);
		if (err < 0)
			err = EINVAL;
	}
	what = "writing an entry";
	if (close(fd) && !err)
		err = errno;
	if (!err && renameat(sfd, tmp, sfd, path)) {
		err = errno;
		what = "renaming an entry";
	}
	if (err) {
		unlinkat(sfd, tmp, 0);
		stop_inserts(dc, what, err);
		return false;
	}
	mw_mutex_lock(&dc->mu);
	remember(dc, j->h, j->flen, (int64_t)time(NULL), true);
	dc->st.inserts++;
	dc->st.insert_bytes += j->flen;
	mw_mutex_unlock(&dc->mu);
	return true;
}

/* Free j, giving shared data back. */
static void job_free(struct dc_job *j)
{
	if (j->release)
		j->release(j->arg);
	free(j);
}

/* True when no writer but w works on a job queued before seq [dc->mu]. */
static bool before_done(const struct diskcache *dc, const struct dc_writer *w, uint64_t seq)
{
	for (int i = 0; i < dc->nw_started; i++)
		if (&dc->w[i] != w && dc->w[i].cur && dc->w[i].cur < seq)
			return false;
	return true;
}

/*
 * A writer: takes jobs in queue order, several writers at once.  A flush job
 * is done once no writer works on a job queued before it (those not taken
 * yet are behind it in no queue: the queue is FIFO), so flushes finish in
 * their order and each one covers what was queued before it.
 */
static void *dc_thread(void *arg)
{
	struct dc_writer *w = arg;
	struct diskcache *dc = w->dc;
	const struct timespec now2[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
	char path[64];
	int sfd;

	if (w->idx == 0)
		scan(dc);
	mw_mutex_lock(&dc->mu);
	if (w->idx == 0) {
		dc->listed = true;
		pthread_cond_broadcast(&dc->cv);
	}
	for (;;) {
		while (!dc->listed || (!dc->qhead && !dc->thr.stop))
			mw_cond_wait(&dc->cv, &dc->mu);
		struct dc_job *j = dc->qhead;
		if (!j)
			break; /* stop, with the queue written */
		dc->qhead = j->next;
		if (!dc->qhead)
			dc->qtail = &dc->qhead;
		dc->qbytes -= j->flen;
		w->cur = j->seq;
		bool skip = dc->stopped_inserts;
		mw_mutex_unlock(&dc->mu);
		switch (j->kind) {
		case JOB_PUT:
			if (skip) {
				mw_mutex_lock(&dc->mu);
				dc->st.dropped++;
				mw_mutex_unlock(&dc->mu);
			} else if (write_entry(w, j)) {
				evict(dc);
			}
			break;
		case JOB_TOUCH:
			sfd = sub_dir(dc, name_in_sub(path, sizeof(path), j->h, -1), false);
			if (sfd >= 0)
				utimensat(sfd, path, now2, AT_SYMLINK_NOFOLLOW);
			break;
		default:
			break;
		}
		bool flush = j->kind == JOB_FLUSH;
		if (!flush)
			job_free(j); /* a release may take locks of the caller's; done before cur */
		mw_mutex_lock(&dc->mu);
		if (flush) {
			dc->flush_waits++;
			while (!before_done(dc, w, j->seq))
				mw_cond_wait(&dc->idle, &dc->mu);
			dc->flush_waits--;
			dc->flushed++;
			free(j);
		}
		w->cur = 0;
		if (dc->flush_waits || flush)
			pthread_cond_broadcast(&dc->idle);
	}
	mw_mutex_unlock(&dc->mu);
	return NULL;
}

/* Queue j (takes it); false (j freed) when it does not fit. */
static bool enqueue(struct diskcache *dc, struct dc_job *j)
{
	mw_mutex_lock(&dc->mu);
	if (j->kind == JOB_PUT && (dc->stopped_inserts || dc->qbytes + j->flen > dc->queue_max)) {
		dc->st.dropped++;
		mw_mutex_unlock(&dc->mu);
		job_free(j);
		return false;
	}
	j->next = NULL;
	j->seq = ++dc->seq;
	*dc->qtail = j;
	dc->qtail = &j->next;
	dc->qbytes += j->flen;
	pthread_cond_signal(&dc->cv);
	mw_mutex_unlock(&dc->mu);
	return true;
}

static void enqueue_small(struct diskcache *dc, int kind, XXH128_hash_t h)
{
	struct dc_job *j = calloc(1, sizeof(*j));

	if (!j)
		return;
	j->kind = kind;
	j->h = h;
	enqueue(dc, j);
}

/* ---- open and close ------------------------------------------------------- */

/*
 * Check DIR/format; write it if missing.  Sets dc->wipe if it is not ours (another version,
 * or not a regular file: a link is removed, never written through).
 */
static void check_format(struct diskcache *dc)
{
	char buf[64];
	struct stat st;
	ssize_t n = -1;
	int fd = openat(dc->dfd, "format", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0 || errno != ENOENT) {
		if (fd >= 0 && !fstat(fd, &st) && S_ISREG(st.st_mode))
			n = read(fd, buf, sizeof(buf));
		if (fd >= 0)
			close(fd);
		if (n == (ssize_t)strlen(DC_FORMAT) && !memcmp(buf, DC_FORMAT, (size_t)n))
			return;
		dc->wipe = true;
		unlinkat(dc->dfd, "format", 0); /* a link goes, not what it points at */
	}
	fd = openat(dc->dfd, "format", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, DC_FORMAT, strlen(DC_FORMAT)) != (ssize_t)strlen(DC_FORMAT))
			dc->wipe = false; /* cannot even write: leave things as they are */
		close(fd);
	}
}

int diskcache_open(const struct diskcache_opts *o, struct diskcache **out)
{
	struct diskcache *dc;
	struct statvfs sv;
	int rc;

	if (!o->dir || !*o->dir)
		return -EINVAL;
	dc = calloc(1, sizeof(*dc));
	if (!dc)
		return -ENOMEM;
	dc->dfd = dc->lockfd = -1;
	for (int i = 0; i < DC_SUBS; i++)
		atomic_init(&dc->sub[i], -1);
	dc->nb = 1024;
	dc->tab = calloc(dc->nb, sizeof(*dc->tab));
	dc->dir = strdup(o->dir);
	if (!dc->tab || !dc->dir) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = dcdir_open(o->dir, &dc->dfd)) || (rc = dcdir_lock(dc->dfd, dc->dir, &dc->lockfd)))
		goto fail;
	check_format(dc);
	dc->auto_max = o->max_bytes == DISKCACHE_AUTO;
	dc->max_bytes = o->max_bytes;
	if (dc->auto_max) {
		dc->avail = fstatvfs(dc->dfd, &sv) ? 0 : (uint64_t)sv.f_bavail * sv.f_frsize;
		uint64_t m = dc->avail / 2;
		dc->max_bytes = m < DISKCACHE_AUTO_CAP ? m : DISKCACHE_AUTO_CAP;
	}
	dc->st.capacity = dc->max_bytes;
	dc->st.inserting = true;
	dc->queue_max = o->queue_bytes ? o->queue_bytes : (32u << 20);
	atomic_init(&dc->direct, true); /* until a filesystem refuses it */
	dc->qtail = &dc->qhead;
	dc->nw = o->writers ? (int)o->writers : DC_WRITERS;
	if (dc->nw > DC_WRITERS_MAX)
		dc->nw = DC_WRITERS_MAX;
	dc->w = calloc((size_t)dc->nw, sizeof(*dc->w));
	if (!dc->w) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < dc->nw; i++)
		dc->w[i] = (struct dc_writer){.dc = dc, .idx = i};
	mw_mutex_init(&dc->mu);
	mw_cond_init_monotonic(&dc->cv);
	mw_cond_init_monotonic(&dc->idle);
	rc = mw_thread_start(&dc->thr, "diskcache", dc_thread, &dc->w[0], &dc->mu, &dc->cv);
	if (rc) {
		pthread_cond_destroy(&dc->cv);
		pthread_cond_destroy(&dc->idle);
		mw_mutex_destroy(&dc->mu);
		goto fail;
	}
	/* more writers: best effort (one is enough to work); nw_started only grows here */
	mw_mutex_lock(&dc->mu);
	dc->nw_started = 1;
	mw_mutex_unlock(&dc->mu);
	for (int i = 1; i < dc->nw; i++) {
		mw_mutex_lock(&dc->mu);
		bool ok = pthread_create(&dc->w[i].tid, NULL, dc_thread, &dc->w[i]) == 0;
		if (ok)
			dc->nw_started = i + 1;
		mw_mutex_unlock(&dc->mu);
		if (!ok)
			break;
	}
	*out = dc;
	return 0;
fail:
	if (dc->lockfd >= 0)
		close(dc->lockfd);
	if (dc->dfd >= 0)
		close(dc->dfd);
	free(dc->w);
	free(dc->tab);
	free(dc->dir);
	free(dc);
	return rc;
}

void diskcache_close(struct diskcache *dc)
{
	if (!dc)
		return;
	mw_thread_stop(&dc->thr); /* the writers write the queue out first */
	for (int i = 1; i < dc->nw_started; i++)
		pthread_join(dc->w[i].tid, NULL);
	for (int i = 0; i < dc->nw; i++)
		free(dc->w[i].bounce);
	free(dc->w);
	for (size_t i = 0; i < dc->nb; i++) {
		struct dc_ent *x = dc->tab[i], *next;
		for (; x; x = next) {
			next = x->hnext;
			free(x);
		}
	}
	free(dc->tab);
	pthread_cond_destroy(&dc->cv);
	pthread_cond_destroy(&dc->idle);
	mw_mutex_destroy(&dc->mu);
	for (int i = 0; i < DC_SUBS; i++)
		if (atomic_load(&dc->sub[i]) >= 0)
			close(atomic_load(&dc->sub[i]));
	close(dc->lockfd); /* releases the flock */
	close(dc->dfd);
	free(dc->dir);
	free(dc);
}

/* ---- reads and writes ----------------------------------------------------- */

/* Delete the file of h and forget it (a damaged or unwanted entry). */
static void drop_name(struct diskcache *dc, XXH128_hash_t h)
{
	unlink_entry(dc, h);
	mw_mutex_lock(&dc->mu);
	struct dc_ent *x = find(dc, h);
	if (x) {
		forget(dc, x);
		free(x);
	}
	mw_mutex_unlock(&dc->mu);
}

/* pread all of n bytes at off: the byte count read (short at the end of the file), or -1. */
static ssize_t pread_all(int fd, void *dst, size_t n, off_t off)
{
	size_t done = 0;

	while (done < n) {
		ssize_t got = pread(fd, (uint8_t *)dst + done, n - done, off + (off_t)done);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return -1;
		if (got == 0)
			break;
		done += (size_t)got;
	}
	return (ssize_t)done;
}

int diskcache_get_part(struct diskcache *dc, const void *key, size_t klen, size_t total, size_t off,
                       void *dst, size_t len, unsigned flags)
{
	uint8_t head[DC_HDR + DISKCACHE_KEY_MAX + DC_CHECK], want[DC_HDR], pad[DC_PAGE + 1];
	bool whole = off == 0 && len == total;
	XXH128_hash_t h;
	char path[64];
	ssize_t got;
	bool ok;
	int fd;

	if (klen > DISKCACHE_KEY_MAX || total > DISKCACHE_VALUE_MAX || off > total ||
	    len > total - off || (!whole && !(flags & DISKCACHE_GET_CALLER_CHECKS)))
		return -ENOENT;
	h = name_of(key, klen);
	fd = sub_dir(dc, name_in_sub(path, sizeof(path), h, -1), false);
	if (fd >= 0)
		fd = openat(fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		mw_mutex_lock(&dc->mu);
		dc->st.misses++;
		struct dc_ent *x = errno == ENOENT ? find(dc, h) : NULL;
		if (x) { /* deleted behind our back */
			forget(dc, x);
			free(x);
		}
		mw_mutex_unlock(&dc->mu);
		return -ENOENT;
	}
	encode_header(want, klen, total);
	/* header, key and check, from the header page */
	if (!whole) /* no kernel read-ahead: a random read of a block must not read the rest
	               of the window from the disk too */
		posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
	got = pread_all(fd, head, DC_HDR + klen + DC_CHECK, 0);
	ok = got == (ssize_t)(DC_HDR + klen + DC_CHECK);
	if (ok && whole) {
		/* the data, its page's padding and one byte more: the file is exactly that long */
		size_t np = (len + DC_PAGE - 1) / DC_PAGE * DC_PAGE - len;
		struct iovec iov[2] = {{dst, len}, {pad, np + 1}};
		do
			got = preadv(fd, iov, 2, DC_PAGE);
		while (got < 0 && errno == EINTR);
		ok = got == (ssize_t)(len + np);
	} else if (ok) {
		/* the part alone (its bytes are the caller's to check) */
		got = pread_all(fd, dst, len, (off_t)(DC_PAGE + off));
		ok = got == (ssize_t)len;
	}
	close(fd);
	ok = ok && !memcmp(head, want, DC_HDR) && !memcmp(head + DC_HDR, key, klen) &&
	     ((flags & DISKCACHE_GET_CALLER_CHECKS) ||
	      get_be64(head + DC_HDR + klen) == check_of(head, klen, dst, len));
	if (!ok) {
		if (got >= 0) /* damaged, or another length or key: never serve it */
			drop_name(dc, h);
		mw_mutex_lock(&dc->mu);
		dc->st.misses++;
		if (got >= 0)
			dc->st.corrupt++;
		mw_mutex_unlock(&dc->mu);
		return -ENOENT;
	}
	bool touch = false;
	mw_mutex_lock(&dc->mu);
	dc->st.hits++;
	dc->st.hit_bytes += len;
	struct dc_ent *x = find(dc, h);
	if (x) {
		lru_unlink(dc, x);
		lru_front(dc, x);
		int64_t now = (int64_t)time(NULL);
		if (now - x->mtime > DC_TOUCH_SEC) {
			x->mtime = now;
			touch = true;
		}
	}
	mw_mutex_unlock(&dc->mu);
	if (touch)
		enqueue_small(dc, JOB_TOUCH, h);
	return 0;
}

int diskcache_get(struct diskcache *dc, const void *key, size_t klen, void *dst, size_t len,
                  unsigned flags)
{
	return diskcache_get_part(dc, key, klen, len, 0, dst, len, flags);
}

/* Queue a put of data (copied unless release, which then gets arg once the entry is done). */
static void put(struct diskcache *dc, const void *key, size_t klen, const void *data, size_t len,
                void (*release)(void *), void *arg)
{
	size_t flen = DC_PAGE + (len + DC_PAGE - 1) / DC_PAGE * DC_PAGE;
	struct dc_job *j = NULL;

	if (klen > DISKCACHE_KEY_MAX || len > DISKCACHE_VALUE_MAX)
		goto give_back;
	mw_mutex_lock(&dc->mu);
	bool full =
	    dc->stopped_inserts || dc->qbytes + flen > dc->queue_max || flen > dc->max_bytes;
	if (full)
		dc->st.dropped++;
	mw_mutex_unlock(&dc->mu);
	if (full)
		goto give_back;
	j = malloc(sizeof(*j) + DC_HDR + klen + (release ? 0 : len));
	if (!j)
		goto give_back;
	j->kind = JOB_PUT;
	j->h = name_of(key, klen);
	j->flen = flen;
	j->release = release;
	j->arg = arg;
	encode_header(j->head, klen, len);
	memcpy(j->head + DC_HDR, key, klen);
	if (release) {
		j->data = data;
	} else {
		memcpy(j->head + DC_HDR + klen, data, len);
		j->data = j->head + DC_HDR + klen;
	}
	/* the check is computed by the thread (write_entry()), off the read path */
	enqueue(dc, j);
	return;
give_back:
	if (release)
		release(arg);
}

void diskcache_put(struct diskcache *dc, const void *key, size_t klen, const void *data, size_t len)
{
	put(dc, key, klen, data, len, NULL, NULL);
}

void diskcache_put_shared(struct diskcache *dc, const void *key, size_t klen, const void *data,
                          size_t len, void (*release)(void *), void *arg)
{
	put(dc, key, klen, data, len, release, arg);
}

void diskcache_drop(struct diskcache *dc, const void *key, size_t klen, bool corrupt)
{
	drop_name(dc, name_of(key, klen));
	if (corrupt) {
		mw_mutex_lock(&dc->mu);
		dc->st.corrupt++;
		mw_mutex_unlock(&dc->mu);
	}
}

void diskcache_flush(struct diskcache *dc)
{
	struct dc_job *j = calloc(1, sizeof(*j));

	if (!j)
		return;
	j->kind = JOB_FLUSH;
	mw_mutex_lock(&dc->mu);
	uint64_t want = ++dc->flushes; /* flush jobs finish in queue order */
	j->seq = ++dc->seq;
	*dc->qtail = j;
	dc->qtail = &j->next;
	pthread_cond_signal(&dc->cv);
	while (dc->flushed < want)
		mw_cond_wait(&dc->idle, &dc->mu);
	mw_mutex_unlock(&dc->mu);
}

void diskcache_get_stats(struct diskcache *dc, struct diskcache_stats *out)
{
	mw_mutex_lock(&dc->mu);
	*out = dc->st;
	mw_mutex_unlock(&dc->mu);
}
