/*
 * dir.c - namespace handlers: lookup, create/mknod/mkdir/symlink, unlink,
 * rmdir, rename (NOREPLACE, EXCHANGE, directories with their subtree),
 * link, and directory listing (readdir, readdirplus).
 *
 * A directory entry is one key ('D' parent name -> child, type), so a
 * lookup is one point read and a listing one prefix scan.  Every handler
 * changes the namespace with ONE batch: e.g. a rename of a directory puts
 * the new entry, deletes the old one and rewrites the three inode records
 * (moved dir's parent pointer, both parents' nlink and times); the subtree
 * below is keyed by inode number and does not move.
 *
 * A listing is snapshot into the directory handle at offset 0 so that
 * offsets are stable indexes (seekdir/telldir work) and a 100,000-entry
 * directory is scanned once, not once per reply.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "log.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static int check_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0)
		return -ENOENT;
	if (n > SCHEMA_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* Point read of a directory entry. */
static int dentry_get(struct mwfs *fs, uint64_t parent, const char *name, uint64_t *ino)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));
	void *val = NULL;
	size_t vn = 0;
	uint32_t type;
	int rc = engine_get(fs->e, key, kn, &val, &vn);
	if (!rc)
		rc = schema_dentry_decode(val, vn, ino, &type);
	free(val);
	return rc;
}

static int dentry_put(struct engine_batch *b, uint64_t parent, const char *name,
		      const struct inode *child)
{
	uint8_t key[SCHEMA_KEY_MAX], val[SCHEMA_DENTRY_LEN];
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));
	schema_dentry_encode(child->ino, child->a.mode, val);
	return engine_batch_put(b, key, kn, val, sizeof(val));
}

static int dentry_del(struct engine_batch *b, uint64_t parent, const char *name)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));
	return engine_batch_delete(b, key, kn);
}

/* 0 if directory ino has no entries, -ENOTEMPTY if it has, or an error. */
static int dir_empty(struct mwfs *fs, uint64_t ino)
{
	uint8_t key[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry_prefix(key, ino);
	size_t en = schema_prefix_end(key, kn, end);
	struct engine_iter *it = NULL;
	int rc = engine_iter_new(fs->e, key, kn, end, en, &it);
	if (!rc)
		rc = engine_iter_valid(it) ? -ENOTEMPTY : engine_iter_status(it);
	engine_iter_free(it);
	return rc;
}

/* Take a reference on directory ino (fs->mu held): -ENOTDIR, -ENOENT if removed. */
static int get_dir(struct mwfs *fs, uint64_t ino, struct inode **out)
{
	struct inode *dp;
	int rc = inode_get(fs, ino, &dp);
	if (rc)
		return rc;
	if (!S_ISDIR(dp->a.mode))
		rc = -ENOTDIR;
	else if (dp->a.nlink == 0)
		rc = -ENOENT;
	if (rc) {
		inode_put(fs, dp);
		return rc;
	}
	*out = dp;
	return 0;
}

void dir_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct fuse_entry_param e;
	struct inode *dp = NULL, *ip = NULL;
	uint64_t ino;
	int rc = check_name(name);
	if (rc)
		goto reply;
	pthread_mutex_lock(&fs->mu);
	rc = get_dir(fs, parent, &dp);
	if (!rc)
		rc = dentry_get(fs, parent, name, &ino);
	if (!rc)
		rc = inode_get(fs, ino, &ip);
	if (!rc) {
		ip->nlookup++;
		fs_fill_entry(fs, ip, &e);
	}
	inode_put(fs, ip);
	inode_put(fs, dp);
	pthread_mutex_unlock(&fs->mu);
reply:
	if (rc == -ENOENT) {
		/* negative entry: safe to cache, this mount is the only writer */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->o.entry_timeout;
		fuse_reply_entry(req, &e);
	} else if (rc) {
		fuse_reply_err(req, fs_err(rc));
	} else {
		fuse_reply_entry(req, &e);
	}
}

/*
 * Create a node of any type in parent: one batch with the new inode, its
 * entry, the parent's record (times, nlink) and maybe the superblock.
 */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev, const char *link, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct fuse_entry_param e;
	struct inode *dp = NULL, *ip = NULL;
	struct schema_inode dsaved;
	uint64_t ino;
	int rc = check_name(name);
	if (!rc && fs->o.read_only)
		rc = -EROFS;
	if (!rc && link && strlen(link) >= 4096)
		rc = -ENAMETOOLONG;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	pthread_mutex_lock(&fs->mu);
	rc = get_dir(fs, parent, &dp);
	if (rc)
		goto out;
	rc = dentry_get(fs, parent, name, &ino);
	if (!rc)
		rc = -EEXIST;
	if (rc != -ENOENT)
		goto out;
	struct engine_batch *b = fs_batch(fs);
	if (!b) {
		rc = -ENOMEM;
		goto out;
	}
	rc = inode_new(fs, b, mode, &ip);
	if (rc)
		goto out;
	dsaved = dp->a;
	ip->a.uid = ctx->uid;
	ip->a.gid = ctx->gid;
	if (dp->a.mode & S_ISGID) {
		ip->a.gid = dp->a.gid;
		if (S_ISDIR(mode))
			ip->a.mode |= S_ISGID;
	}
	ip->a.rdev = (S_ISCHR(mode) || S_ISBLK(mode)) ? rdev : 0;
	if (S_ISDIR(mode)) {
		ip->a.parent = parent;
		dp->a.nlink++;
	}
	if (link) {
		ip->target = strdup(link);
		if (!ip->target) {
			rc = -ENOMEM;
			goto undo;
		}
		ip->a.size = strlen(link);
	}
	fs_touch(&dp->a, false, true, true);
	rc = inode_batch_put(fs, b, ip);
	if (!rc)
		rc = dentry_put(b, parent, name, ip);
	if (!rc)
		rc = inode_batch_put(fs, b, dp);
	struct inode *touched[2] = {ip, dp};
	if (!rc)
		rc = inode_commit(fs, b, touched, 2);
	if (rc)
		goto undo;
	ip->nlookup++;
	if (fi) {
		ip->nopen++;
		fi->fh = (uintptr_t)ip;
		fi->keep_cache = 1;
	}
	fs_fill_entry(fs, ip, &e);
	goto out;
undo:
	dp->a = dsaved;
	ip->a.nlink = 0;
	ip->gone = true;
out:
	inode_put(fs, ip);
	inode_put(fs, dp);
	pthread_mutex_unlock(&fs->mu);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else if (fi)
		fuse_reply_create(req, &e, fi);
	else
		fuse_reply_entry(req, &e);
}

void dir_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	if ((mode & S_IFMT) == 0)
		mode |= S_IFREG;
	switch (mode & S_IFMT) {
	case S_IFREG:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		make_node(req, parent, name, mode, rdev, NULL, NULL);
		return;
	default:
		fuse_reply_err(req, EINVAL);
	}
}

void dir_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_node(req, parent, name, S_IFDIR | (mode & 07777), 0, NULL, NULL);
}

void dir_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_node(req, parent, name, S_IFLNK | 0777, 0, link, NULL);
}

void dir_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		struct fuse_file_info *fi)
{
	make_node(req, parent, name, S_IFREG | (mode & 07777), 0, NULL, fi);
}

/* Drop one link of non-directory ip into b (fs->mu held). */
static int unlink_one(struct mwfs *fs, struct engine_batch *b, struct inode *ip)
{
	ip->a.nlink--;
	fs_touch(&ip->a, false, false, true);
	if (ip->a.nlink == 0) {
		/* reclaimed when the last user lets go (or at the next mount) */
		uint8_t key[SCHEMA_KEY_MAX];
		size_t kn = schema_key_orphan(key, ip->ino);
		int rc = engine_batch_put(b, key, kn, "", 0);
		if (rc)
			return rc;
	}
	return inode_batch_put(fs, b, ip);
}

void dir_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *dp = NULL, *ip = NULL;
	struct schema_inode dsaved, isaved;
	uint64_t ino;
	int rc = check_name(name);
	if (!rc && fs->o.read_only)
		rc = -EROFS;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	pthread_mutex_lock(&fs->mu);
	rc = get_dir(fs, parent, &dp);
	if (!rc)
		rc = dentry_get(fs, parent, name, &ino);
	if (!rc)
		rc = inode_get(fs, ino, &ip);
	if (rc)
		goto out;
	if (S_ISDIR(ip->a.mode)) {
		rc = -EISDIR;
		goto out;
	}
	struct engine_batch *b = fs_batch(fs);
	if (!b) {
		rc = -ENOMEM;
		goto out;
	}
	dsaved = dp->a;
	isaved = ip->a;
	fs_touch(&dp->a, false, true, true);
	rc = dentry_del(b, parent, name);
	if (!rc)
		rc = unlink_one(fs, b, ip);
	if (!rc)
		rc = inode_batch_put(fs, b, dp);
	struct inode *touched[2] = {ip, dp};
	if (!rc)
		rc = inode_commit(fs, b, touched, 2);
	if (rc) {
		dp->a = dsaved;
		ip->a = isaved;
	}
out:
	inode_put(fs, ip);
	inode_put(fs, dp);
	pthread_mutex_unlock(&fs->mu);
	fuse_reply_err(req, fs_err(rc));
}

void dir_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *dp = NULL, *ip = NULL;
	struct schema_inode dsaved;
	uint64_t ino;
	int rc = check_name(name);
	if (!rc && fs->o.read_only)
		rc = -EROFS;
	if (!rc && !strcmp(name, "."))
		rc = -EINVAL;
	if (!rc && !strcmp(name, ".."))
		rc = -ENOTEMPTY;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	pthread_mutex_lock(&fs->mu);
	rc = get_dir(fs, parent, &dp);
	if (!rc)
		rc = dentry_get(fs, parent, name, &ino);
	if (!rc)
		rc = inode_get(fs, ino, &ip);
	if (rc)
		goto out;
	if (!S_ISDIR(ip->a.mode)) {
		rc = -ENOTDIR;
		goto out;
	}
	rc = dir_empty(fs, ino);
	if (rc)
		goto out;
	struct engine_batch *b = fs_batch(fs);
	if (!b) {
		rc = -ENOMEM;
		goto out;
	}
	dsaved = dp->a;
	dp->a.nlink--;
	fs_touch(&dp->a, false, true, true);
	rc = dentry_del(b, parent, name);
	if (!rc)
		rc = inode_batch_drop(fs, b, ino);
	if (!rc)
		rc = inode_batch_put(fs, b, dp);
	if (!rc)
		rc = inode_commit(fs, b, &dp, 1);
	if (rc) {
		dp->a = dsaved;
		goto out;
	}
	ip->a.nlink = 0;
	ip->gone = true;
out:
	inode_put(fs, ip);
	inode_put(fs, dp);
	pthread_mutex_unlock(&fs->mu);
	fuse_reply_err(req, fs_err(rc));
}

void dir_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		const char *newname, unsigned int flags)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *sp = NULL, *dp = NULL, *si = NULL, *di = NULL;
	struct schema_inode sps, dps, sis, dis;
	uint64_t sino, dino = 0;
	bool exists, drop_di = false;
	int rc = check_name(name);
	if (!rc)
		rc = check_name(newname);
	if (!rc && fs->o.read_only)
		rc = -EROFS;
	if (!rc && ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) ||
		    (flags & RENAME_NOREPLACE && flags & RENAME_EXCHANGE)))
		rc = -EINVAL;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	pthread_mutex_lock(&fs->mu);
	rc = get_dir(fs, parent, &sp);
	if (!rc)
		rc = get_dir(fs, newparent, &dp);
	if (!rc)
		rc = dentry_get(fs, parent, name, &sino);
	if (rc)
		goto out;
	rc = dentry_get(fs, newparent, newname, &dino);
	if (rc && rc != -ENOENT)
		goto out;
	exists = rc == 0;
	rc = 0;
	if (exists && flags & RENAME_NOREPLACE) {
		rc = -EEXIST;
		goto out;
	}
	if (!exists && flags & RENAME_EXCHANGE) {
		rc = -ENOENT;
		goto out;
	}
	if (exists && dino == sino)
		goto out; /* two links to one file: POSIX says do nothing */
	rc = inode_get(fs, sino, &si);
	if (!rc && exists)
		rc = inode_get(fs, dino, &di);
	if (rc)
		goto out;
	struct engine_batch *b = fs_batch(fs);
	if (!b) {
		rc = -ENOMEM;
		goto out;
	}
	sps = sp->a;
	dps = dp->a;
	sis = si->a;
	if (di)
		dis = di->a;
	bool moved = parent != newparent;
	if (flags & RENAME_EXCHANGE) {
		rc = dentry_put(b, parent, name, di);
		if (!rc)
			rc = dentry_put(b, newparent, newname, si);
		if (moved && S_ISDIR(si->a.mode)) {
			si->a.parent = newparent;
			sp->a.nlink--;
			dp->a.nlink++;
		}
		if (moved && S_ISDIR(di->a.mode)) {
			di->a.parent = parent;
			dp->a.nlink--;
			sp->a.nlink++;
		}
		fs_touch(&di->a, false, false, true);
	} else {
		if (di) {
			if (S_ISDIR(si->a.mode) && !S_ISDIR(di->a.mode))
				rc = -ENOTDIR;
			else if (!S_ISDIR(si->a.mode) && S_ISDIR(di->a.mode))
				rc = -EISDIR;
			else if (S_ISDIR(di->a.mode))
				rc = dir_empty(fs, dino);
			if (rc)
				goto out;
			if (S_ISDIR(di->a.mode)) {
				rc = inode_batch_drop(fs, b, dino);
				dp->a.nlink--;
				drop_di = true;
			} else {
				rc = unlink_one(fs, b, di);
			}
		}
		if (!rc)
			rc = dentry_del(b, parent, name);
		if (!rc)
			rc = dentry_put(b, newparent, newname, si);
		if (moved && S_ISDIR(si->a.mode)) {
			si->a.parent = newparent;
			sp->a.nlink--;
			dp->a.nlink++;
		}
	}
	fs_touch(&si->a, false, false, true);
	fs_touch(&sp->a, false, true, true);
	fs_touch(&dp->a, false, true, true);
	if (!rc)
		rc = inode_batch_put(fs, b, si);
	if (!rc)
		rc = inode_batch_put(fs, b, sp);
	if (!rc && moved)
		rc = inode_batch_put(fs, b, dp);
	if (!rc && di && !drop_di && (flags & RENAME_EXCHANGE))
		rc = inode_batch_put(fs, b, di);
	struct inode *touched[4] = {si, sp, dp, di};
	if (!rc)
		rc = inode_commit(fs, b, touched, 4);
	if (rc) {
		sp->a = sps;
		dp->a = dps;
		si->a = sis;
		if (di)
			di->a = dis;
		goto out;
	}
	if (drop_di) {
		di->a.nlink = 0;
		di->gone = true;
	}
out:
	inode_put(fs, di);
	inode_put(fs, si);
	inode_put(fs, dp);
	inode_put(fs, sp);
	pthread_mutex_unlock(&fs->mu);
	fuse_reply_err(req, fs_err(rc));
}

void dir_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *dp = NULL, *ip = NULL;
	struct schema_inode dsaved, isaved;
	struct fuse_entry_param e;
	uint64_t other;
	int rc = check_name(newname);
	if (!rc && fs->o.read_only)
		rc = -EROFS;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	pthread_mutex_lock(&fs->mu);
	rc = inode_get(fs, ino, &ip);
	if (!rc && S_ISDIR(ip->a.mode))
		rc = -EPERM;
	if (!rc && ip->a.nlink == 0)
		rc = -ENOENT;
	if (!rc)
		rc = get_dir(fs, newparent, &dp);
	if (rc)
		goto out;
	rc = dentry_get(fs, newparent, newname, &other);
	if (!rc)
		rc = -EEXIST;
	if (rc != -ENOENT)
		goto out;
	struct engine_batch *b = fs_batch(fs);
	if (!b) {
		rc = -ENOMEM;
		goto out;
	}
	dsaved = dp->a;
	isaved = ip->a;
	ip->a.nlink++;
	fs_touch(&ip->a, false, false, true);
	fs_touch(&dp->a, false, true, true);
	rc = dentry_put(b, newparent, newname, ip);
	if (!rc)
		rc = inode_batch_put(fs, b, ip);
	if (!rc)
		rc = inode_batch_put(fs, b, dp);
	struct inode *touched[2] = {ip, dp};
	if (!rc)
		rc = inode_commit(fs, b, touched, 2);
	if (rc) {
		dp->a = dsaved;
		ip->a = isaved;
		goto out;
	}
	ip->nlookup++;
	fs_fill_entry(fs, ip, &e);
out:
	inode_put(fs, ip);
	inode_put(fs, dp);
	pthread_mutex_unlock(&fs->mu);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_entry(req, &e);
}

/* ---- listing ------------------------------------------------------------ */

struct dent {
	uint64_t ino;     /* child inode */
	uint32_t type;    /* S_IFMT bits */
	uint32_t name;    /* offset of the NUL-terminated name in dirh.names */
};

/* An open directory (fi->fh). */
struct dirh {
	pthread_mutex_t mu; /* protects everything below */
	struct dent *ents;  /* snapshot of the listing: ".", "..", then entries */
	size_t n, cap;
	char *names;        /* name storage */
	size_t nlen, ncap;
	bool loaded;
};

static int dirh_add(struct dirh *d, uint64_t ino, uint32_t type, const char *name, size_t len)
{
	if (d->n == d->cap) {
		size_t nc = d->cap ? d->cap * 2 : 64;
		struct dent *ne = realloc(d->ents, nc * sizeof(*ne));
		if (!ne)
			return -ENOMEM;
		d->ents = ne;
		d->cap = nc;
	}
	if (d->nlen + len + 1 > d->ncap) {
		size_t nc = d->ncap ? d->ncap * 2 : 4096;
		while (nc < d->nlen + len + 1)
			nc *= 2;
		char *nn = realloc(d->names, nc);
		if (!nn)
			return -ENOMEM;
		d->names = nn;
		d->ncap = nc;
	}
	memcpy(d->names + d->nlen, name, len);
	d->names[d->nlen + len] = 0;
	d->ents[d->n].ino = ino;
	d->ents[d->n].type = type;
	d->ents[d->n].name = (uint32_t)d->nlen;
	d->nlen += len + 1;
	d->n++;
	return 0;
}

/* Snapshot the listing of directory ino into d (d->mu held). */
static int dirh_load(struct mwfs *fs, struct dirh *d, uint64_t ino)
{
	struct inode *dp;
	uint64_t parent;
	d->n = d->nlen = 0;
	d->loaded = false;
	pthread_mutex_lock(&fs->mu);
	int rc = get_dir(fs, ino, &dp);
	if (!rc) {
		parent = dp->a.parent ? dp->a.parent : ino;
		inode_put(fs, dp);
	}
	pthread_mutex_unlock(&fs->mu);
	if (rc)
		return rc;
	rc = dirh_add(d, ino, S_IFDIR, ".", 1);
	if (!rc)
		rc = dirh_add(d, parent, S_IFDIR, "..", 2);
	uint8_t key[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry_prefix(key, ino);
	size_t en = schema_prefix_end(key, kn, end);
	struct engine_iter *it = NULL;
	if (!rc)
		rc = engine_iter_new(fs->e, key, kn, end, en, &it);
	for (; !rc && engine_iter_valid(it); engine_iter_next(it)) {
		size_t n, vn;
		const uint8_t *k = engine_iter_key(it, &n);
		const void *v;
		uint64_t child;
		uint32_t type;
		rc = engine_iter_value(it, &v, &vn);
		if (!rc)
			rc = schema_dentry_decode(v, vn, &child, &type);
		if (!rc && n > kn)
			rc = dirh_add(d, child, type, (const char *)k + kn, n - kn);
	}
	if (!rc && it)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	if (!rc)
		d->loaded = true;
	return rc;
}

void dir_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *dp;
	pthread_mutex_lock(&fs->mu);
	int rc = get_dir(fs, ino, &dp);
	if (!rc)
		inode_put(fs, dp);
	pthread_mutex_unlock(&fs->mu);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	struct dirh *d = calloc(1, sizeof(*d));
	if (!d) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->mu, NULL);
	fi->fh = (uintptr_t)d;
	fuse_reply_open(req, fi);
}

static void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi, bool plus)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	char *buf = (char *)fs_tls_buf(fs, size);
	size_t pos = 0;
	int rc = 0;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_lock(&d->mu);
	if (off == 0 || !d->loaded)
		rc = dirh_load(fs, d, ino);
	if (rc)
		goto out;
	if (plus)
		pthread_mutex_lock(&fs->mu);
	for (size_t i = (size_t)off; i < d->n; i++) {
		const struct dent *de = &d->ents[i];
		const char *name = d->names + de->name;
		size_t need;
		if (plus) {
			struct fuse_entry_param e;
			struct inode *ip = NULL;
			memset(&e, 0, sizeof(e));
			if (i < 2) {
				/* the kernel takes no lookup on "." and ".." */
				e.attr.st_ino = de->ino;
				e.attr.st_mode = de->type;
			} else {
				int r = inode_get(fs, de->ino, &ip);
				if (r)
					continue; /* removed since the snapshot */
				fs_fill_entry(fs, ip, &e);
			}
			need = fuse_add_direntry_plus(req, buf + pos, size - pos, name, &e,
						      (off_t)(i + 1));
			if (need <= size - pos && ip)
				ip->nlookup++;
			inode_put(fs, ip);
		} else {
			struct stat st;
			memset(&st, 0, sizeof(st));
			st.st_ino = de->ino;
			st.st_mode = de->type;
			need = fuse_add_direntry(req, buf + pos, size - pos, name, &st,
						 (off_t)(i + 1));
		}
		if (need > size - pos)
			break;
		pos += need;
	}
	if (plus)
		pthread_mutex_unlock(&fs->mu);
out:
	pthread_mutex_unlock(&d->mu);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_buf(req, buf, pos);
}

void dir_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, false);
}

void dir_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	do_readdir(req, ino, size, off, fi, true);
}

void dir_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	(void)ino;
	if (d) {
		pthread_mutex_destroy(&d->mu);
		free(d->ents);
		free(d->names);
		free(d);
	}
	fuse_reply_err(req, 0);
}

void dir_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = NULL;
	uint64_t t = 0;
	(void)datasync;
	(void)fi;
	pthread_mutex_lock(&fs->mu);
	int rc = inode_get(fs, ino, &ip);
	if (!rc) {
		t = ip->ticket;
		inode_put(fs, ip);
	}
	pthread_mutex_unlock(&fs->mu);
	if (!rc && !fs->o.read_only)
		rc = t ? engine_wait(fs->e, t, true) : engine_sync(fs->e);
	fuse_reply_err(req, fs_err(rc));
}
