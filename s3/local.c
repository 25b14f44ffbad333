/*
 * local.c - the local-directory object store (the embedded default).
 *
 * Layout.  An object "a/b/c" is the regular file ROOT/a/b/c; parent
 * directories are made on demand and never removed (an empty directory holds
 * no object and is invisible to listing).  Because a name cannot be both a
 * file and a directory, a key cannot be both an object and a proper prefix of
 * another key followed by '/': putting "a/b" while the object "a" exists
 * fails with -ENOTDIR, and putting "a" while "a/..." exists with -EISDIR.
 *
 * Temporary files.  Every write goes to a temp file in the target's own
 * directory, named "\tmp.<pid>.<seq>" with a leading backslash: a byte that
 * store_key_valid() rejects, so no key can ever name a temp file and listing
 * skips them unambiguously.  At open, temp files whose creating process is
 * gone (or whose name does not parse) are removed: they are the leftovers of a
 * crash.  Temp files of a live process (another open of the same directory)
 * are left alone; store_cleanup_uploads() removes them by age.
 *
 * Large puts bypass the page cache.  A put of at least DIRECT_MIN bytes from a
 * page-aligned buffer (a sealed pack, engine/wal/pack.c) is written with
 * O_DIRECT: the block-aligned prefix straight from the caller's memory, the
 * last partial block from a zero-padded copy, then the file is cut to its
 * length.  Packs are read back through the engine's caches, not this
 * page cache, and filling the page cache costs a copy of every byte into
 * newly allocated pages (on a VM that hands free memory back to its host,
 * several times the cost of the write itself).  A filesystem that refuses
 * O_DIRECT (EINVAL) is written buffered from then on.
 *
 * Atomicity and durability.  put: write the temp file, fsync it, rename() it
 * over the key, fsync the directory; a reader sees the old or the new bytes,
 * never a mix, and after the call returns the object survives a machine crash.
 * put_if_absent and IF_ABSENT writer finish: renameat2(RENAME_NOREPLACE) (or
 * link() + unlink() where the filesystem lacks it), so exactly one of any
 * number of racing creators wins and the others get -EEXIST.  Objects are
 * never modified in place, so an open file descriptor always reads one
 * complete version.  Deletes are not fsynced: after a crash a deleted object
 * may come back (deletion is garbage collection, repeating it is harmless).
 *
 * Confinement.  Every path is resolved one segment at a time with openat()
 * relative to a directory fd of the root, with O_NOFOLLOW: a symlink planted
 * inside the root is never followed, so no key reaches outside it (keys are
 * also validated by store.c: no "..", no ".", no empty segment).
 *
 * Permissions.  A store holds the bytes of every file whatever their modes,
 * so it is private to the user who writes it: the root directory and the
 * directories under it are made 0700, objects 0600 (a mount shares files with
 * others, with their permissions).  A store opened for writing whose root
 * others can enter (made by an older version, 0755) gets a warning that says
 * how to close it; its mode is not changed behind the user's back.
 *
 * Errors.  Nothing is retried here (EINTR aside).  Errors that stay until
 * someone changes the store (local_err_permanent(): a permission, a link or a
 * file where the store has a directory, a read-only filesystem) are reported
 * as permanent, so that the engine fails at once instead of waiting for the
 * store as through an outage; a write that meets a link on its path logs the
 * link's path.
 *
 * Concurrency.  The store has no mutable shared state besides atomic counters;
 * every call works on its own file descriptors, so any number of threads may
 * call at once.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "grow.h"
#include "log.h"
#include "store_impl.h"

/* Every temp file name starts with this; '\\' never appears in a valid key. */
#define TMP_PREFIX "\\tmp."
#define TMP_PREFIX_LEN 5

struct local_store {
	struct store base;     /* must be first */
	int root_fd;           /* O_DIRECTORY fd of the root; immutable after open */
	char *root;            /* root path, for log lines; immutable after open */
	atomic_bool no_direct; /* O_DIRECT failed here once: every put is buffered */
};

struct local_writer {
	struct store_writer base; /* must be first */
	int dfd;                  /* parent directory of the key */
	int fd;                   /* the temp file */
	int flags;                /* STORE_W_* */
	int err;                  /* sticky error of a failed write (0: none) */
	uint64_t bytes;           /* bytes written so far */
	char *key;                /* object key (for logs) */
	char tmp[64];             /* temp file name inside dfd */
	const char *base_name;    /* last segment of key (points into key) */
};

/* ------------------------------------------------------------------------
 * Small system-call helpers
 */

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len > 0) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Puts this large from page-aligned memory are written with O_DIRECT (see the header). */
#define DIRECT_MIN (1u << 20)
/* Alignment O_DIRECT needs of memory, file offset and length (the page size covers 512 and 4096).
 */
#define DIRECT_ALIGN 4096u

/*
 * Write len bytes of buf as the whole content of the new file fd: with
 * O_DIRECT when the put is large and buf page-aligned, else buffered.
 */
static int write_object(struct local_store *ls, int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	if (len < DIRECT_MIN || (uintptr_t)p % DIRECT_ALIGN || atomic_load(&ls->no_direct))
		return write_all(fd, buf, len);
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_DIRECT) < 0) {
		atomic_store(&ls->no_direct, true);
		return write_all(fd, buf, len);
	}
	size_t head = len - len % DIRECT_ALIGN;
	int rc = write_all(fd, p, head);
	if (rc == 0 && head < len) {
		_Alignas(DIRECT_ALIGN) uint8_t tail[DIRECT_ALIGN];
		memset(tail, 0, sizeof(tail));
		memcpy(tail, p + head, len - head);
		rc = write_all(fd, tail, sizeof(tail));
		if (rc == 0 && ftruncate(fd, (off_t)len) < 0)
			rc = -errno;
	}
	if (rc == -EINVAL) { /* O_DIRECT not taken after all: start over, buffered */
		log_warn("local store %s: O_DIRECT writes fail (EINVAL); writing through the page "
		         "cache",
		         ls->root);
		atomic_store(&ls->no_direct, true);
		if (fcntl(fd, F_SETFL, fl) < 0 || ftruncate(fd, 0) < 0 ||
		    lseek(fd, 0, SEEK_SET) < 0)
			return -errno;
		rc = write_all(fd, buf, len);
	}
	return rc;
}

static int fsync_retry(int fd)
{
	while (fsync(fd) < 0) {
		if (errno != EINTR)
			return -errno;
	}
	return 0;
}

static int openat_retry(int dfd, const char *name, int flags, mode_t mode)
{
	int fd;
	do {
		fd = openat(dfd, name, flags | O_CLOEXEC, mode);
	} while (fd < 0 && errno == EINTR);
	return fd < 0 ? -errno : fd;
}

static void log_io(const char *op, const struct local_store *ls, const char *key, int rc)
{
	if (rc == -ENOSPC)
		log_err("local %s %s/%s: disk full (ENOSPC)", op, ls->root, key);
	else
		log_err("local %s %s/%s: %s", op, ls->root, key, strerror(-rc));
}

/*
 * Open the directory that holds key's last segment.  With create, missing
 * directories are made (and their parents fsynced).  On success returns the
 * directory fd and sets *base to the last segment inside key.  -ENOENT when
 * a directory is missing (without create), -ENOTDIR when a segment is a file
 * or a symlink.
 */
static int open_parent(struct local_store *ls, const char *key, bool create, const char **base)
{
	char seg[STORE_KEY_MAX + 1];
	int dfd = openat_retry(ls->root_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	const char *p = key, *slash;
	int nfd;

	if (dfd < 0)
		return dfd;
	while ((slash = strchr(p, '/')) != NULL) {
		size_t n = (size_t)(slash - p);

		memcpy(seg, p, n);
		seg[n] = '\0';
		nfd = openat_retry(dfd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
		if (nfd == -ENOENT && create) {
			if (mkdirat(dfd, seg, 0700) < 0 && errno != EEXIST) {
				nfd = -errno;
				goto fail;
			}
			fsync_retry(dfd);
			nfd = openat_retry(dfd, seg, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
		}
		if (nfd < 0) {
			if (nfd == -ELOOP || nfd == -ENOTDIR) {
				nfd = -ENOTDIR; /* a symlink or a file: never followed */
				if (create)
					log_err(
					    "local store %s: %s/%.*s is a symbolic link or a "
					    "file, where the store keeps a directory: it is never "
					    "followed, and nothing can be written under it (move "
					    "it away)",
					    ls->root, ls->root, (int)(slash - key), key);
			}
			close(dfd);
			return nfd;
		}
		close(dfd);
		dfd = nfd;
		p = slash + 1;
	}
	*base = p;
	return dfd;
fail:
	close(dfd);
	return nfd;
}

/*
 * Temp file numbers are unique in the process, not per store handle: two
 * handles on one directory in one process must never pick the same name
 * (O_EXCL would then fail and a put would report a false -EEXIST).
 */
static _Atomic uint64_t tmp_seq;

/*
 * Make a fresh temp file in dfd; writes its name to tmp (size >= 64).  A
 * name left by an earlier process with a reused pid is skipped.
 */
static int make_tmp(struct local_store *ls, int dfd, char *tmp)
{
	int fd = -EEXIST;
	(void)ls;
	for (int tries = 0; tries < 64 && fd == -EEXIST; tries++) {
		uint64_t n = atomic_fetch_add_explicit(&tmp_seq, 1, memory_order_relaxed);
		snprintf(tmp, 64, TMP_PREFIX "%ld.%" PRIu64, (long)getpid(), n);
		fd = openat_retry(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
	}
	return fd;
}

/*
 * Move the (fsynced) temp file onto name: replace it, or with noreplace fail
 * with -EEXIST if it exists.  Then fsync the directory.  On failure the temp
 * file is removed.
 */
static int commit_tmp(int dfd, const char *tmp, const char *name, bool noreplace)
{
	int rc = 0;

	if (!noreplace) {
		if (renameat(dfd, tmp, dfd, name) < 0)
			rc = -errno;
	} else {
		rc = -EINVAL;
#ifdef HAVE_RENAMEAT2
		if (renameat2(dfd, tmp, dfd, name, RENAME_NOREPLACE) < 0)
			rc = -errno;
		else
			rc = 0;
#endif
		if (rc == -EINVAL || rc == -ENOSYS) {
			/* no RENAME_NOREPLACE here: link() fails if name exists */
			rc = linkat(dfd, tmp, dfd, name, 0) < 0 ? -errno : 0;
			unlinkat(dfd, tmp, 0);
		}
	}
	if (rc < 0) {
		unlinkat(dfd, tmp, 0);
		return rc;
	}
	return fsync_retry(dfd);
}

/* ------------------------------------------------------------------------
 * put / put_if_absent / get / head / delete
 */

static int do_put(struct store *s, const char *key, const void *buf, size_t len, bool noreplace)
{
	struct local_store *ls = (struct local_store *)s;
	const char *base;
	char tmp[64];
	int dfd, fd, rc;

	store_count(s, STORE_OP_PUT, len, 0);
	dfd = open_parent(ls, key, true, &base);
	if (dfd < 0) {
		rc = dfd;
		goto out_log;
	}
	fd = make_tmp(ls, dfd, tmp);
	if (fd < 0) {
		rc = fd;
		goto out_dir;
	}
	rc = write_object(ls, fd, buf, len);
	if (rc == 0)
		rc = fsync_retry(fd);
	if (close(fd) < 0 && rc == 0 && errno != EINTR)
		rc = -errno;
	if (rc < 0) {
		unlinkat(dfd, tmp, 0);
		goto out_dir;
	}
	rc = commit_tmp(dfd, tmp, base, noreplace);
out_dir:
	close(dfd);
out_log:
	if (rc < 0 && rc != -EEXIST)
		log_io(noreplace ? "put_if_absent" : "put", ls, key, rc);
	return rc;
}

static int local_put(struct store *s, const char *key, const void *buf, size_t len)
{
	return do_put(s, key, buf, len, false);
}

static int local_put_if_absent(struct store *s, const char *key, const void *buf, size_t len)
{
	return do_put(s, key, buf, len, true);
}

/* Open key for reading: the fd of a regular file, or -ENOENT. */
static int open_object(struct local_store *ls, const char *key, struct stat *st)
{
	const char *base;
	int dfd = open_parent(ls, key, false, &base), fd;

	if (dfd < 0)
		return dfd == -ENOTDIR ? -ENOENT : dfd;
	fd = openat_retry(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
	close(dfd);
	if (fd < 0)
		return (fd == -ELOOP || fd == -ENOTDIR) ? -ENOENT : fd;
	if (fstat(fd, st) < 0) {
		int rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return -ENOENT; /* a directory (a prefix of other keys), not an object */
	}
	return fd;
}

/*
 * Read object key from off, at most len bytes: into buf (len bytes) when
 * given, else into a new buffer (*out).  *outlen the count.
 */
static int read_object(struct store *s, const char *key, uint64_t off, uint64_t len, uint8_t *buf,
                       void **out, size_t *outlen)
{
	struct local_store *ls = (struct local_store *)s;
	struct stat st;
	uint64_t size, n;
	uint8_t *own = NULL;
	size_t got = 0;
	int fd, rc = 0;

	fd = open_object(ls, key, &st);
	if (fd < 0) {
		store_count(s, STORE_OP_GET, 0, 0);
		if (fd != -ENOENT)
			log_io("get", ls, key, fd);
		return fd;
	}
	size = (uint64_t)st.st_size;
	n = off >= size ? 0 : size - off;
	if (len < n)
		n = len;
	if (n > SIZE_MAX - 1) {
		rc = -ENOMEM;
		goto out;
	}
	if (!buf && !(buf = own = malloc(n ? (size_t)n : 1))) {
		rc = -ENOMEM;
		goto out;
	}
	while (got < n) {
		ssize_t r = pread(fd, buf + got, (size_t)n - got, (off_t)(off + got));
		if (r < 0) {
			if (errno == EINTR)
				continue;
			rc = -errno;
			log_io("get", ls, key, rc);
			goto out;
		}
		if (r == 0) {
			rc = -EIO; /* objects are never truncated in place */
			log_err("local get %s/%s: short read at %" PRIu64, ls->root, key,
			        off + got);
			goto out;
		}
		got += (size_t)r;
	}
	store_count(s, STORE_OP_GET, 0, got);
	if (out)
		*out = own;
	*outlen = got;
	own = NULL;
out:
	free(own);
	close(fd);
	return rc;
}

static int local_get(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
                     size_t *outlen)
{
	return read_object(s, key, off, len, NULL, out, outlen);
}

static int local_get_into(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
                          size_t *outlen)
{
	return read_object(s, key, off, len, buf, NULL, outlen);
}

static int local_head(struct store *s, const char *key, struct store_stat *out)
{
	struct local_store *ls = (struct local_store *)s;
	const char *base;
	struct stat st;
	int dfd, rc = 0;

	store_count(s, STORE_OP_HEAD, 0, 0);
	dfd = open_parent(ls, key, false, &base);
	if (dfd < 0)
		return dfd == -ENOTDIR ? -ENOENT : dfd;
	if (fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		rc = errno == ENOTDIR ? -ENOENT : -errno;
	else if (!S_ISREG(st.st_mode))
		rc = -ENOENT;
	close(dfd);
	if (rc < 0) {
		if (rc != -ENOENT)
			log_io("head", ls, key, rc);
		return rc;
	}
	out->size = (uint64_t)st.st_size;
	out->mtime = (int64_t)st.st_mtim.tv_sec;
	/* Stable while the object is unchanged: a put makes a new inode. */
	snprintf(out->etag, sizeof(out->etag), "%" PRIx64 "-%" PRIx64 "-%" PRIx64 "%09ld",
	         (uint64_t)st.st_ino, (uint64_t)st.st_size, (uint64_t)st.st_mtim.tv_sec,
	         (long)st.st_mtim.tv_nsec);
	return 0;
}

static int local_delete(struct store *s, const char *key)
{
	struct local_store *ls = (struct local_store *)s;
	const char *base;
	int dfd, rc = 0;

	store_count(s, STORE_OP_DELETE, 0, 0);
	dfd = open_parent(ls, key, false, &base);
	if (dfd < 0)
		return (dfd == -ENOENT || dfd == -ENOTDIR) ? 0 : dfd;
	if (unlinkat(dfd, base, 0) < 0) {
		rc = -errno;
		/* missing, or a directory (no object of that name): success */
		if (rc == -ENOENT || rc == -EISDIR || rc == -ENOTDIR || rc == -EPERM)
			rc = 0;
	}
	close(dfd);
	if (rc < 0)
		log_io("delete", ls, key, rc);
	return rc;
}

static int local_delete_many(struct store *s, const char *const *keys, size_t n)
{
	int first = 0;
	for (size_t i = 0; i < n; i++) {
		int rc = local_delete(s, keys[i]);
		if (rc < 0 && first == 0)
			first = rc;
	}
	return first;
}

/* ------------------------------------------------------------------------
 * Directory walk: list and temp-file cleanup
 *
 * Keys are listed in byte order by an ordered walk: inside one directory a
 * file "x" stands for the key PATH+"x" and a directory "y" for the range of
 * keys PATH+"y/"...; sorting the entries by "x" and "y/" respectively gives
 * byte order of the full keys, because no name contains '/', so nothing else
 * can sort between "y/" and the keys that start with it.
 */

struct walk_ent {
	char *name;  /* entry name; for a directory with a trailing '/' */
	bool is_dir; /* a directory */
	uint64_t size;
};

struct walk {
	struct local_store *ls;
	const char *prefix;      /* keys must start with this */
	const char *start_after; /* keys must sort after this ("" none) */
	size_t max_keys;         /* 0: no limit */
	size_t emitted;          /* keys passed to fn */
	bool done;               /* max_keys reached: stop the walk */
	store_list_fn fn;        /* list callback (NULL: cleanup walk) */
	void *arg;
	time_t tmp_before;            /* cleanup: remove temp files older than this */
	bool tmp_dead_only;           /* cleanup at open: only temp files of dead processes */
	unsigned removed;             /* cleanup: temp files removed */
	char path[STORE_KEY_MAX + 2]; /* current directory as a key prefix ("" or "a/b/") */
};

static int ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct walk_ent *)a)->name, ((const struct walk_ent *)b)->name);
}

static bool starts_with(const char *s, const char *p)
{
	return strncmp(s, p, strlen(p)) == 0;
}

/* True when the temp file name belongs to a process that no longer runs. */
static bool tmp_owner_dead(const char *name)
{
	char *end;
	long pid = strtol(name + TMP_PREFIX_LEN, &end, 10);

	if (end == name + TMP_PREFIX_LEN || *end != '.' || pid <= 0)
		return true; /* not one of ours in a form we know: garbage */
	if (pid == (long)getpid())
		return false;
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

static void cleanup_tmp(struct walk *w, int dfd, const char *name)
{
	struct stat st;

	if (w->tmp_dead_only) {
		if (!tmp_owner_dead(name))
			return;
	} else {
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			return;
		if (st.st_mtim.tv_sec >= w->tmp_before)
			return;
	}
	if (unlinkat(dfd, name, 0) == 0) {
		w->removed++;
		log_info("local: removed temp file %s/%s%s", w->ls->root, w->path, name);
	}
}

/* Walk directory dfd (consumed) whose key prefix is w->path. */
static int walk_dir(struct walk *w, int dfd)
{
	struct walk_ent *ents = NULL;
	size_t n = 0, cap = 0, plen = strlen(w->path);
	struct dirent *de;
	DIR *d;
	int rc = 0;

	d = fdopendir(dfd);
	if (!d) {
		rc = -errno;
		close(dfd);
		return rc;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		const char *nm = de->d_name;
		struct stat st;
		size_t nl = strlen(nm);

		if (!strcmp(nm, ".") || !strcmp(nm, ".."))
			continue;
		if (!strncmp(nm, TMP_PREFIX, TMP_PREFIX_LEN)) {
			if (!w->fn)
				cleanup_tmp(w, dirfd(d), nm);
			continue;
		}
		/* a file's key may be STORE_KEY_MAX long; a longer name can be no key and hold none
		 */
		if (plen + nl > STORE_KEY_MAX)
			continue;
		if (fstatat(dirfd(d), nm, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* raced with a delete */
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
			continue;
		/* Prune what cannot match the prefix. */
		memcpy(w->path + plen, nm, nl + 1);
		if (S_ISDIR(st.st_mode)) {
			w->path[plen + nl] = '/';
			w->path[plen + nl + 1] = '\0';
			if (!starts_with(w->path, w->prefix) && !starts_with(w->prefix, w->path))
				continue;
		} else if (!w->fn || !starts_with(w->path, w->prefix) ||
		           !store_key_valid(w->path)) {
			continue;
		}
		if (MW_GROW(ents, cap, n + 1, 64)) {
			rc = -ENOMEM;
			goto out;
		}
		ents[n].is_dir = S_ISDIR(st.st_mode);
		ents[n].size = (uint64_t)st.st_size;
		ents[n].name = strdup(w->path + plen);
		if (!ents[n].name) {
			rc = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (errno != 0) {
		rc = -errno;
		goto out;
	}
	w->path[plen] = '\0';
	if (n > 1)
		qsort(ents, n, sizeof(*ents), ent_cmp);
	for (size_t i = 0; i < n && rc == 0 && !w->done; i++) {
		strcpy(w->path + plen, ents[i].name);
		if (ents[i].is_dir) {
			size_t dl = strlen(w->path);
			int cfd;

			/* Skip a subtree whose keys all sort at or before start_after. */
			if (w->fn && *w->start_after && strcmp(w->start_after, w->path) > 0 &&
			    strncmp(w->start_after, w->path, dl) != 0)
				continue;
			w->path[dl - 1] = '\0';
			cfd = openat_retry(dirfd(d), w->path + plen,
			                   O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
			w->path[dl - 1] = '/';
			if (cfd < 0)
				continue; /* removed meanwhile */
			rc = walk_dir(w, cfd);
		} else {
			if (*w->start_after && strcmp(w->path, w->start_after) <= 0)
				continue;
			if (w->max_keys && w->emitted >= w->max_keys) {
				w->done = true;
				break;
			}
			w->emitted++;
			rc = w->fn(w->arg, w->path, ents[i].size); /* nonzero: caller stops */
		}
	}
out:
	w->path[plen] = '\0';
	for (size_t i = 0; i < n; i++)
		free(ents[i].name);
	free(ents);
	closedir(d);
	return rc;
}

/*
 * Open the deepest directory named by prefix (everything up to its last
 * '/'), set w->path to it and walk from there.
 */
static int walk_from_prefix(struct walk *w)
{
	const char *slash = strrchr(w->prefix, '/'), *base;
	int dfd;

	w->path[0] = '\0';
	if (!slash) {
		dfd = openat_retry(w->ls->root_fd, ".", O_RDONLY | O_DIRECTORY, 0);
	} else {
		size_t n = (size_t)(slash - w->prefix) + 1;
		char key[STORE_KEY_MAX + 2];

		/* open_parent wants a key: "dir/x" opens "dir". */
		memcpy(key, w->prefix, n);
		key[n] = 'x';
		key[n + 1] = '\0';
		if (!store_key_valid(key))
			return 0; /* no key can start with this prefix */
		dfd = open_parent(w->ls, key, false, &base);
		if (dfd == -ENOENT || dfd == -ENOTDIR)
			return 0;
		memcpy(w->path, w->prefix, n);
		w->path[n] = '\0';
	}
	if (dfd < 0)
		return dfd;
	return walk_dir(w, dfd);
}

static int local_list(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
                      store_list_fn fn, void *arg)
{
	struct local_store *ls = (struct local_store *)s;
	struct walk *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->ls = ls;
	w->prefix = prefix;
	w->start_after = start_after;
	w->max_keys = max_keys;
	w->fn = fn;
	w->arg = arg;
	rc = walk_from_prefix(w);
	/* one request per page of 1000 keys, like S3 */
	for (size_t i = 0; i <= w->emitted / 1000; i++)
		store_count(s, STORE_OP_LIST, 0, 0);
	if (rc < 0)
		log_io("list", ls, prefix, rc);
	free(w);
	return rc;
}

static int local_cleanup_uploads(struct store *s, const char *prefix, unsigned older_than_sec,
                                 unsigned *n)
{
	struct local_store *ls = (struct local_store *)s;
	struct walk *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->ls = ls;
	w->prefix = prefix;
	w->start_after = "";
	w->tmp_before = time(NULL) - (time_t)older_than_sec;
	if (older_than_sec == 0)
		w->tmp_before++; /* also files created this second */
	rc = walk_from_prefix(w);
	*n = w->removed;
	free(w);
	return rc < 0 ? rc : 0;
}

/* ------------------------------------------------------------------------
 * Streaming writer
 */

static int lw_write(struct store_writer *sw, const void *buf, size_t len)
{
	struct local_writer *w = (struct local_writer *)sw;
	struct local_store *ls = (struct local_store *)sw->store;
	int rc;

	if (w->err)
		return w->err;
	rc = write_all(w->fd, buf, len);
	if (rc < 0) {
		w->err = rc;
		log_io("writer write", ls, w->key, rc);
		return rc;
	}
	w->bytes += len;
	return 0;
}

static void lw_free(struct local_writer *w)
{
	if (w->fd >= 0)
		close(w->fd);
	if (w->tmp[0])
		unlinkat(w->dfd, w->tmp, 0);
	close(w->dfd);
	free(w->key);
	free(w);
}

static int lw_finish(struct store_writer *sw)
{
	struct local_writer *w = (struct local_writer *)sw;
	struct local_store *ls = (struct local_store *)sw->store;
	int rc = w->err;

	store_count(sw->store, STORE_OP_PUT, w->bytes, 0);
	if (rc == 0)
		rc = fsync_retry(w->fd);
	if (close(w->fd) < 0 && rc == 0 && errno != EINTR)
		rc = -errno;
	w->fd = -1;
	if (rc == 0) {
		rc = commit_tmp(w->dfd, w->tmp, w->base_name, w->flags & STORE_W_IF_ABSENT);
		w->tmp[0] = '\0'; /* commit_tmp consumed it either way */
	}
	if (rc < 0 && rc != -EEXIST)
		log_io("writer finish", ls, w->key, rc);
	lw_free(w);
	return rc;
}

static void lw_abort(struct store_writer *sw)
{
	lw_free((struct local_writer *)sw);
}

static const struct store_writer_ops local_writer_ops = {
    .write = lw_write,
    .finish = lw_finish,
    .abort = lw_abort,
};

static int local_writer_open(struct store *s, const char *key, int flags, struct store_writer **out)
{
	struct local_store *ls = (struct local_store *)s;
	struct local_writer *w = calloc(1, sizeof(*w));
	int rc;

	if (!w)
		return -ENOMEM;
	w->fd = -1;
	w->flags = flags;
	w->key = strdup(key);
	if (!w->key) {
		rc = -ENOMEM;
		goto fail;
	}
	w->dfd = open_parent(ls, w->key, true, &w->base_name);
	if (w->dfd < 0) {
		rc = w->dfd;
		goto fail;
	}
	w->fd = make_tmp(ls, w->dfd, w->tmp);
	if (w->fd < 0) {
		rc = w->fd;
		close(w->dfd);
		goto fail;
	}
	w->base.ops = &local_writer_ops;
	w->base.store = s;
	*out = &w->base;
	return 0;
fail:
	log_io("writer open", ls, key, rc);
	free(w->key);
	free(w);
	return rc;
}

/* ------------------------------------------------------------------------
 * Open / close
 */

/* Errors that stay until someone changes the store (store_err_permanent()). */
static bool local_err_permanent(const struct store *s, int rc)
{
	(void)s;
	return rc == -EACCES || rc == -EPERM || rc == -EROFS || rc == -ENOTDIR || rc == -ELOOP ||
	       rc == -EISDIR || rc == -ENAMETOOLONG;
}

static void local_close(struct store *s)
{
	struct local_store *ls = (struct local_store *)s;
	close(ls->root_fd);
	free(ls->root);
	free(ls);
}

/* The filesystem of the root directory: what a df of it says (bindfs reports the same). */
static int local_space(struct store *s, struct store_space *out)
{
	struct local_store *ls = (struct local_store *)s;
	struct statvfs sv;
	if (fstatvfs(ls->root_fd, &sv) < 0)
		return -errno;
	out->total = (uint64_t)sv.f_blocks * sv.f_frsize;
	out->free = (uint64_t)sv.f_bfree * sv.f_frsize;
	out->avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

static const struct store_ops local_ops = {
    .put = local_put,
    .put_if_absent = local_put_if_absent,
    .get = local_get,
    .get_into = local_get_into,
    .head = local_head,
    .list = local_list,
    .del = local_delete,
    .delete_many = local_delete_many,
    .writer_open = local_writer_open,
    .cleanup_uploads = local_cleanup_uploads,
    .space = local_space,
    .close = local_close,
    .err_permanent = local_err_permanent,
};

/* Warn when others can enter the store's root (then read what they may of it). */
static void warn_open_to_others(const struct local_store *ls)
{
	struct stat st;

	if (fstat(ls->root_fd, &st) == 0 && (st.st_mode & (S_IXGRP | S_IXOTH)))
		log_warn("local store %s (mode %04o): other users can enter it and read the bytes "
		         "of files whatever their permissions (stores made before 2026-12-06 have "
		         "0644 objects); run chmod 700 %s to keep it to yourself (share files "
		         "through a mount instead)",
		         ls->root, (unsigned)(st.st_mode & 07777), ls->root);
}

int store_open_local(const char *dir, struct store **out)
{
	return store_open_local_flags(dir, 0, out);
}

int store_open_local_flags(const char *dir, int flags, struct store **out)
{
	struct local_store *ls;
	struct walk *w;
	int rc;

	if (!dir || !*dir || !out || (flags & ~(STORE_OPEN_EXISTING | STORE_OPEN_READ_ONLY)))
		return -EINVAL;
	if (flags & STORE_OPEN_READ_ONLY)
		flags |= STORE_OPEN_EXISTING;
	if (!(flags & STORE_OPEN_EXISTING) && mkdir(dir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		log_err("local open %s: mkdir: %s", dir, strerror(-rc));
		return rc;
	}
	ls = calloc(1, sizeof(*ls));
	if (!ls)
		return -ENOMEM;
	store_init(&ls->base, &local_ops);
	ls->base.caps.conditional_create = true;
	ls->base.caps.conditional_finish = true;
	ls->base.caps.durable_on_ack = true;
	ls->base.caps.part_size = 0;
	ls->base.caps.name = "local";
	ls->root = strdup(dir);
	ls->root_fd = openat_retry(AT_FDCWD, dir, O_RDONLY | O_DIRECTORY, 0);
	if (!ls->root || ls->root_fd < 0) {
		rc = !ls->root ? -ENOMEM : ls->root_fd;
		if (rc == -ENOENT && (flags & STORE_OPEN_EXISTING))
			log_debug("local open %s: no such directory", dir); /* the caller says so */
		else
			log_err("local open %s: %s", dir, strerror(-rc));
		goto fail;
	}
	ls->base.read_only = flags & STORE_OPEN_READ_ONLY;
	if (ls->base.read_only)
		goto done; /* look only: leave even the temp files of a crash alone */
	warn_open_to_others(ls);
	/* Remove the temp files a crashed process left behind. */
	w = calloc(1, sizeof(*w));
	if (!w) {
		rc = -ENOMEM;
		goto fail;
	}
	w->ls = ls;
	w->prefix = "";
	w->start_after = "";
	w->tmp_dead_only = true;
	rc = walk_from_prefix(w);
	if (w->removed)
		log_info("local open %s: removed %u temp files of a crash", dir, w->removed);
	free(w);
	if (rc < 0) {
		log_err("local open %s: scanning for temp files: %s", dir, strerror(-rc));
		goto fail;
	}
done:
	*out = &ls->base;
	return 0;
fail:
	if (ls->root_fd >= 0)
		close(ls->root_fd);
	free(ls->root);
	free(ls);
	return rc;
}
