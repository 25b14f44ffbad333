/*
 * dir.c - namespace handlers: lookup, create/mknod/mkdir/symlink, unlink,
 * rmdir, rename (NOREPLACE, EXCHANGE, WHITEOUT, directories with their
 * subtree), link.  Listing (opendir, readdir, readdirplus) is listing.c.
 *
 * Export support (file handles, NFS re-export): the kernel looks up "." in
 * any inode (a file handle names an inode it has forgotten) and ".." in a
 * directory (the parent of a disconnected dentry); dir_lookup() answers
 * both from the inode table.  Inode numbers are never reused (inode.c takes
 * them from ranges the superblock records before use), so one fixed
 * generation (fs_fill_entry()) keeps handles stable across remounts.
 *
 * A directory entry is one key ('D' parent name -> child, type), so a
 * lookup is one point read and a listing one prefix scan.  Every handler
 * changes the namespace with ONE batch: e.g. a rename of a directory puts
 * the new entry, deletes the old one and rewrites the three inode records
 * (moved dir's parent pointer, both parents' nlink and times); the subtree
 * below is keyed by inode number and does not move.
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
#ifndef RENAME_WHITEOUT
#define RENAME_WHITEOUT (1 << 2)
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

/*
 * Point read of a directory entry: the child's number, and its S_IFMT bits in *type (may be
 * NULL).  locked: fs->mu is held, and the entry comes from memory or -EWOULDBLOCK
 * (fs_get_locked()).
 */
static int dentry_get(struct mwfs *fs, bool locked, uint64_t parent, const char *name,
                      uint64_t *ino, uint32_t *type)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));
	void *val = NULL;
	size_t vn = 0;
	uint32_t t;
	struct engine *e = fs_eng(fs, parent); /* an entry lives in its parent's region */
	int rc = !e       ? -ENOENT
	         : locked ? fs_get_locked(fs, 0, key, kn, &val, &vn)
	                  : engine_get(e, key, kn, &val, &vn);
	if (!rc)
		rc = schema_dentry_decode(val, vn, ino, type ? type : &t);
	free(val);
	return rc;
}

/*
 * A change of directory parent's entries (fs->mu held): a listing snapshot
 * taken before it may name what is no longer there (do_readdir()).
 */
static void dgen_bump(struct mwfs *fs, uint64_t parent)
{
	mw_mutex_assert_held(&fs->mu);
	fs->dgen[parent % FS_DGEN_SLOTS]++;
}

static int dentry_put(struct inode_tx *tx, uint64_t parent, const char *name,
                      const struct inode *child)
{
	uint8_t key[SCHEMA_KEY_MAX], val[SCHEMA_DENTRY_LEN];
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));
	schema_dentry_encode(child->ino, child->a.mode, val);
	dgen_bump(tx->fs, parent);
	return fs_batch_put(tx->fs, tx->b, key, kn, val, sizeof(val));
}

static int dentry_del(struct inode_tx *tx, uint64_t parent, const char *name)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));
	dgen_bump(tx->fs, parent);
	return fs_batch_del(tx->fs, tx->b, key, kn);
}

/* fs_scan() step of dir_drop(): an entry, live or not yet removed, makes it not empty. */
static int not_empty(void *arg, const uint8_t *k, size_t kn)
{
	(void)arg;
	(void)k;
	(void)kn;
	return -ENOTEMPTY;
}

/*
 * Queue into b the deletion of directory ino's records if it has no entries
 * (inode_batch_drop()).  0, -ENOTEMPTY, or an error.  locked: fs->mu is
 * held and both scans read from memory only (-EWOULDBLOCK: fs_miss_retry()).
 */
static int dir_drop(struct mwfs *fs, struct engine_batch *b, uint64_t ino, bool locked)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry_prefix(key, ino);
	int rc = fs_scan(fs, locked, key, kn, 1, not_empty, NULL);
	return rc ? rc : inode_batch_drop(fs, b, ino, false, locked);
}

/*
 * Before fs->mu is taken: read what removing directory ino reads under it
 * (dir_drop(), into a batch that is thrown away), so that under the lock
 * both scans find cached blocks.  What changed meanwhile is judged under the
 * lock; only a failing store fails here.  0 or negative errno.
 */
static int warm_dir_drop(struct mwfs *fs, uint64_t ino)
{
	struct engine_batch *b = NULL;
	int rc = fs_batch(fs, ino, &b) ? 0 : dir_drop(fs, b, ino, false);
	/* not empty: the check under the lock says so again, with nothing more to read */
	return rc != -ENOTEMPTY && engine_err_transient(rc) ? rc : 0;
}

/* Take a reference on directory ino (fs->mu held): -ENOTDIR, -ENOENT if removed. */
int dir_get(struct mwfs *fs, uint64_t ino, struct inode **out)
{
	struct inode *dp;
	mw_mutex_assert_held(&fs->mu);
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

/* ---- the frame of a namespace handler ----------------------------------- */

/*
 * What a namespace handler works on: a parent directory, a name in it and
 * the child that name leads to.  op_check() validates before any lock;
 * op_warm() reads ahead without it and, asked to and with nothing left to
 * read, takes fs->mu for the handler (else op_lock() takes it);
 * op_resolve() loads the parent and the entry; op_begin() does all three.
 * op_end() drops the references and fs->mu.
 *
 * Locking: only fs->mu, held from op_warm() or op_lock() to op_end(), so that checking
 * the entry, building the batch and applying it (inode_tx_commit()) are one
 * atomic step for every other handler.  No handler here takes ip->dlock
 * (lock order elsewhere: ip->dlock, then fs->mu).
 */
struct op {
	struct mwfs *fs;  /* borrowed from the request */
	uint64_t parent;  /* parent directory's inode number */
	const char *name; /* entry name, borrowed from the request */
	struct inode *dp; /* parent directory (a reference) or NULL */
	struct inode *ip; /* child, new or linked inode (a reference) or NULL */
	uint64_t ino;     /* inode number in the entry (OP_CHILD) */
	uint32_t type;    /* S_IFMT bits of that child as op_warm() found it (0: none) */
	bool locked;      /* this op holds fs->mu */
};

enum {
	OP_WRITE = 1,   /* changes the tree: -EROFS on a read-only mount, EIO once fenced */
	OP_CHILD = 2,   /* the entry must exist: its inode goes to op->ip */
	OP_ABSENT = 4,  /* the entry must not exist: else -EEXIST */
	OP_NODOTS = 8,  /* rmdir: "." is -EINVAL, ".." is -ENOTEMPTY */
	OP_REMOVE = 16, /* unlink, rmdir: the entry and its inode in one region (region.c) */
};

/*
 * Start op for req and validate name in directory parent (no lock taken).  0 or negative
 * errno.
 */
static int op_check(struct op *op, fuse_req_t req, uint64_t parent, const char *name, int how)
{
	memset(op, 0, sizeof(*op));
	op->fs = fuse_req_userdata(req);
	op->name = name;
	int rc = check_name(name);
	if (!rc && (how & OP_WRITE)) {
		/* the entry is in the parent's region: that is the region to write */
		fs_want_write(op->fs, parent);    /* a following mount takes it if it can */
		rc = fs_writable(op->fs, parent); /* -EROFS, or EIO once fenced */
	}
	/* backpressure (a slow or unreachable store) holds this writer, not fs->mu */
	if (!rc && (how & OP_WRITE))
		rc = engine_wait_room(fs_eng(op->fs, parent), FS_META_ROOM);
	if (!rc && (how & OP_NODOTS) && !strcmp(name, "."))
		rc = -EINVAL;
	if (!rc && (how & OP_NODOTS) && !strcmp(name, ".."))
		rc = -ENOTEMPTY;
	return rc;
}

static void op_lock(struct op *op)
{
	mw_mutex_lock(&op->fs->mu);
	op->locked = true;
}

static void op_unlock(struct op *op)
{
	op->locked = false;
	mw_mutex_unlock(&op->fs->mu);
}

/*
 * Read what resolving name in parent will read, before fs->mu is taken: the
 * entry, and the records of the parent and of the inode it names unless the
 * inode table holds them (a cold lookup on S3 is a GET or two; held under
 * fs->mu it would stall every handler of the mount, and in an outage for as
 * long as the S3 layer retries).  Under the lock op_resolve() reads the same
 * keys again, from memory.  A store that does not answer fails the handler
 * here.  One look under fs->mu tells whether the table holds both; when it
 * does (the common case: the kernel looked them up) and lock is set, the
 * lock is kept for the handler, which then takes fs->mu once in all.
 * 0 (with lock: fs->mu held) or negative errno (fs->mu not held).
 */
static int op_warm(struct op *op, uint64_t parent, const char *name, bool lock)
{
	struct mwfs *fs = op->fs;
	uint64_t ino = 0;
	int rc = dentry_get(fs, false, parent, name, &ino, &op->type);
	if (engine_err_transient(rc)) {
		uint8_t key[SCHEMA_KEY_MAX];
		size_t kn = schema_key_dentry(key, parent, name, strlen(name));
		rc = fs_warm_key(fs, key, kn); /* waits out an outage within its bound */
		if (!rc)
			rc = dentry_get(fs, false, parent, name, &ino, &op->type);
	}
	if (rc && rc != -ENOENT)
		return rc;
	bool named = rc == 0;
	if (named)
		op->ino = ino; /* a hint for more warming; op_resolve() reads it again */
	if (named)
		fs_region_discover(fs, ino); /* a region's root of a region not known yet */
	op_lock(op);
	bool have_parent = inode_find(fs, parent) != NULL;
	bool have_child = !named || inode_find(fs, ino) != NULL;
	if (!(have_parent && have_child && lock))
		op_unlock(op);
	if (have_parent && have_child)
		return 0;
	rc = have_parent ? 0 : inode_warm(fs, parent);
	if (!rc && !have_child)
		rc = inode_warm(fs, ino);
	if (rc && rc != -ENOENT)
		return rc; /* op_resolve() decides what a missing one means */
	if (lock)
		op_lock(op);
	return 0;
}

/* Drop op's inode references (fs->mu held if it has any). */
static void op_put(struct op *op)
{
	inode_put(op->fs, op->ip);
	inode_put(op->fs, op->dp);
	op->ip = op->dp = NULL;
}

/* One try of op_resolve(): -EWOULDBLOCK when a key is not in memory. */
static int resolve_once(struct op *op, uint64_t parent, const char *name, int how)
{
	uint64_t ino;
	op->parent = parent;
	op->name = name;
	int rc = dir_get(op->fs, parent, &op->dp);
	if (rc)
		return rc;
	rc = dentry_get(op->fs, true, parent, name, &ino, NULL);
	if (how & OP_ABSENT)
		return rc == 0 ? -EEXIST : rc == -ENOENT ? 0 : rc;
	if (rc)
		return rc;
	op->ino = ino;
	if ((how & OP_REMOVE) && (rc = fs_region_unlink(parent, ino)))
		return rc; /* a region's root: its inode is in another region than its entry */
	return (how & OP_CHILD) ? inode_get(op->fs, ino, &op->ip) : 0;
}

/*
 * Load directory parent and look name up in it (fs->mu held): OP_CHILD
 * loads the child, OP_ABSENT wants no entry.  0 or negative errno; what was
 * loaded is released by op_end() either way.  A key not in memory is warmed
 * without the lock and the whole lookup done again (fs_miss_retry()).
 */
static int op_resolve(struct op *op, uint64_t parent, const char *name, int how)
{
	int rc;
	mw_mutex_assert_held(&op->fs->mu);
	do {
		inode_put(op->fs, op->dp);
		op->dp = NULL;
		if (how & OP_CHILD) {
			inode_put(op->fs, op->ip);
			op->ip = NULL;
		}
		rc = resolve_once(op, parent, name, how);
	} while (fs_miss_retry(op->fs, &rc));
	return rc;
}

/* op_check(), op_warm() (keeping fs->mu) and op_resolve() of parent/name in one. */
static int op_begin(struct op *op, fuse_req_t req, fuse_ino_t parent, const char *name, int how)
{
	int rc = op_check(op, req, parent, name, how);
	if (!rc)
		rc = op_warm(op, parent, name, true);
	if (rc)
		return rc;
	return op_resolve(op, parent, name, how);
}

/*
 * Release what op holds: the inode references (fs->mu must be held if it
 * has any: by this op or, in rename, by its partner), then fs->mu if this
 * op took it.  Returns rc, for chaining into the reply.
 */
static int op_end(struct op *op, int rc)
{
	op_put(op);
	if (op->locked)
		mw_mutex_unlock(&op->fs->mu);
	op->locked = false;
	return rc;
}

/* ---- handlers ----------------------------------------------------------- */

/*
 * Export operations: "." in any inode is the inode itself, ".." in a
 * directory its parent (the root's is the root).  Sets op->ip like
 * op_begin() with OP_CHILD; an inode without links is -ENOENT (the kernel
 * answers ESTALE to the handle, as ext4 does).  0 or negative errno.
 */
static int op_begin_dots(struct op *op, fuse_req_t req, fuse_ino_t ino, const char *name)
{
	memset(op, 0, sizeof(*op));
	op->fs = fuse_req_userdata(req);
	op->name = name;
	int rc = inode_warm(op->fs, ino);
	if (rc)
		return rc;
	op_lock(op);
	op->parent = ino;
	do
		rc = inode_get(op->fs, ino, &op->ip);
	while (fs_miss_retry(op->fs, &rc));
	if (!rc && op->ip->a.nlink == 0)
		rc = -ENOENT;
	if (rc || !strcmp(name, "."))
		return rc;
	if (!S_ISDIR(op->ip->a.mode))
		return -ENOTDIR;
	uint64_t parent = op->ip->a.parent ? op->ip->a.parent : ino;
	inode_put(op->fs, op->ip);
	op->ip = NULL;
	mw_mutex_unlock(&op->fs->mu); /* warm the parent outside the lock */
	op->locked = false;
	rc = inode_warm(op->fs, parent);
	if (rc)
		return rc;
	op_lock(op);
	do
		rc = inode_get(op->fs, parent, &op->ip);
	while (fs_miss_retry(op->fs, &rc));
	return rc;
}

void dir_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct op op;
	int rc = (!strcmp(name, ".") || !strcmp(name, ".."))
	             ? op_begin_dots(&op, req, parent, name)
	             : op_begin(&op, req, parent, name, OP_CHILD);
	if (!rc) {
		op.ip->nlookup++;
		fs_fill_entry(op.fs, op.ip, &e);
		if (op.ip->ino == SCHEMA_ROOT_INO)
			e.generation = 0; /* the kernel's root inode has generation 0 ("..") */
	}
	rc = op_end(&op, rc);
	if (rc == -ENOENT) {
		/*
		 * Negative entry: safe to cache where this mount is the only writer.  Not on a
		 * follower: a reply built before the writer's name was applied can reach the
		 * kernel after the follower's invalidation of the name, and would hide the name
		 * for the entry timeout (docs/FOLLOWERS.md).
		 */
		memset(&e, 0, sizeof(e));
		struct fs_region *r = fs_region_of(op.fs, parent);
		e.entry_timeout = r && r->ff ? 0 : op.fs->o.entry_timeout;
		fuse_reply_entry(req, &e);
	} else if (rc) {
		fuse_reply_err(req, fs_err(rc));
	} else {
		fuse_reply_entry(req, &e);
	}
}

/* Attributes of a node made by ctx in directory dp (S_ISGID inheritance). */
static void init_node(struct inode *ip, const struct inode *dp, const struct fuse_ctx *ctx,
                      dev_t rdev)
{
	mode_t mode = ip->a.mode;
	ip->a.uid = ctx->uid;
	ip->a.gid = ctx->gid;
	if (dp->a.mode & S_ISGID) {
		ip->a.gid = dp->a.gid;
		if (S_ISDIR(mode))
			ip->a.mode |= S_ISGID;
	}
	ip->a.rdev = (S_ISCHR(mode) || S_ISBLK(mode)) ? rdev : 0;
	if (S_ISDIR(mode))
		ip->a.parent = dp->ino;
}

/*
 * Create a node of any type in parent: one batch with the new inode, its
 * entry, the parent's record (times, nlink) and maybe the superblock.
 */
static void make_node(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev,
                      const char *link, struct fuse_file_info *fi)
{
	struct fuse_entry_param e;
	struct inode_tx tx;
	struct op op;
	int rc = op_check(&op, req, parent, name, OP_WRITE);
	if (!rc && link && strlen(link) >= 4096)
		rc = -ENAMETOOLONG;
	if (!rc)
		rc = op_warm(&op, parent, name, true);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	rc = op_resolve(&op, parent, name, OP_ABSENT);
	if (!rc)
		rc = inode_tx_begin(op.fs, &tx, parent);
	if (!rc) /* in the parent's region: the entry, the inode and the parent commit together */
		rc = inode_new(op.fs, tx.b, parent, mode, &op.ip);
	if (rc)
		goto out;
	struct inode *ip = op.ip, *dp = op.dp;
	inode_tx_add(&tx, ip);
	inode_tx_add(&tx, dp);
	init_node(ip, dp, fuse_req_ctx(req), rdev);
	if (S_ISDIR(mode))
		dp->a.nlink++;
	if (link) {
		ip->target = strdup(link);
		if (!ip->target)
			rc = -ENOMEM;
		else
			ip->a.size = strlen(link);
	}
	fs_touch(&dp->a, false, true, true);
	if (!rc)
		rc = dentry_put(&tx, parent, name, ip);
	rc = inode_tx_commit(&tx, rc);
	if (rc) {
		ip->a.nlink = 0; /* never stored: dropped by op_end() */
		ip->gone = true;
		goto out;
	}
	ip->nlookup++;
	if (fi) {
		ip->nopen++;
		fi->fh = fs_fh(ip, fi->flags);
		fi->keep_cache = 1;
	}
	fs_fill_entry(op.fs, ip, &e);
out:
	rc = op_end(&op, rc);
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

/*
 * `memwalfs region create` (MWFS_REGION_CREATE_XATTR set on directory parent, value the
 * new root's path from the mount's root, whose last name is the new entry): the protocol
 * of docs/REGIONS.md "Creating a region".  The child first: the hook adds the region to
 * the map and opens its writer; its superblock and root (marked an orphan) are made
 * durable; then one batch in the parent's region names the root and counts it in the
 * parent's nlink, made durable; then the root's orphan mark goes.  Checks (before any
 * store I/O): this mount writes parent's region (EROFS), the name is new (EEXIST), the
 * caller is root or owns parent (EPERM; the kernel checked that it may write parent).
 */
void dir_region_create(fuse_req_t req, fuse_ino_t parent, const char *value, size_t size)
{
	struct mwfs *fs = fuse_req_userdata(req);
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	char path[1024];
	struct op op;
	struct inode_tx tx;
	uint32_t rid = 0, gid = ctx->gid;
	struct engine *e = NULL;
	if (size == 0 || size >= sizeof(path) || memchr(value, 0, size)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	memcpy(path, value, size);
	path[size] = 0;
	const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	if (!fs->o.region_create) {
		fuse_reply_err(req, ENOTSUP);
		return;
	}
	int rc = op_begin(&op, req, parent, name, OP_WRITE | OP_ABSENT);
	if (!rc && ctx->uid != 0 && ctx->uid != op.dp->a.uid)
		rc = -EPERM;
	if (!rc && (op.dp->a.mode & S_ISGID))
		gid = op.dp->a.gid;
	rc = op_end(&op, rc);
	if (!rc) /* store I/O: no lock held */
		rc = fs->o.region_create(fs->o.take_arg, parent, name, path, &rid, &e);
	struct schema_super sb;
	/* a resumed create (the hook found the region in the map) may be formatted already */
	if (!rc && fs_read_super(e, &sb) == -ENOENT)
		rc = fs_region_format(fs, e, rid, parent, ctx->uid, gid);
	if (!rc)
		rc = fs_region_add(fs, rid, e, true);
	if (rc) {
		if (rc != -EEXIST && rc != -EROFS && rc != -EPERM)
			log_err("region create %s: %s", path, strerror(-rc));
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	/* the root's entry in the parent's region (checked again: the name may be taken now) */
	uint64_t root = (uint64_t)rid << FS_REGION_SHIFT | 1;
	rc = op_begin(&op, req, parent, name, OP_WRITE | OP_ABSENT);
	if (!rc)
		rc = inode_tx_begin(fs, &tx, parent);
	if (!rc) {
		do
			rc = inode_get(fs, root, &op.ip);
		while (fs_miss_retry(fs, &rc));
		if (!rc) {
			inode_tx_add(&tx, op.dp);
			op.dp->a.nlink++;
			fs_touch(&op.dp->a, false, true, true);
			rc = dentry_put(&tx, parent, name, op.ip);
		}
		rc = inode_tx_commit(&tx, rc);
	}
	rc = op_end(&op, rc);
	if (!rc)
		rc = engine_sync(fs_eng(fs, parent)); /* the entry is durable */
	if (rc) {
		log_err("region create %s: region %u is made, but naming its root failed (%s): "
		        "its root stays an orphan that nothing names",
		        path, rid, strerror(-rc));
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	fs_region_unorphan(fs, rid);                        /* logged; a stale mark is harmless */
	fsnotify_entry(fs->nf, parent, name, strlen(name)); /* a negative entry the tool made */
	log_info("region create %s: region %u, root inode %llu", path, rid,
	         (unsigned long long)root);
	fuse_reply_err(req, 0);
}

/*
 * Drop one link of non-directory ip (fs->mu held; ip already added to the
 * tx, which writes its record).  At nlink 0 it becomes an orphan,
 * reclaimed when the last user lets go (or at the next mount).
 */
static int unlink_one(struct mwfs *fs, struct engine_batch *b, struct inode *ip)
{
	ip->a.nlink--;
	fs_touch(&ip->a, false, false, true);
	if (ip->a.nlink > 0)
		return 0;
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_orphan(key, ip->ino);
	return fs_batch_put(fs, b, key, kn, "", 0);
}

void dir_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct inode_tx tx;
	struct op op;
	int rc = op_begin(&op, req, parent, name, OP_WRITE | OP_CHILD | OP_REMOVE);
	if (!rc && S_ISDIR(op.ip->a.mode))
		rc = -EISDIR;
	if (!rc)
		rc = inode_tx_begin(op.fs, &tx, parent);
	if (!rc) {
		inode_tx_add(&tx, op.ip);
		inode_tx_add(&tx, op.dp);
		fs_touch(&op.dp->a, false, true, true);
		rc = dentry_del(&tx, parent, name);
		if (!rc)
			rc = unlink_one(op.fs, tx.b, op.ip);
		rc = inode_tx_commit(&tx, rc);
	}
	fuse_reply_err(req, fs_err(op_end(&op, rc)));
}

/*
 * One try of rmdir's reads under fs->mu: the entry and the directory it
 * names, which must be empty; its records' deletion goes into tx's batch,
 * begun here.  0, negative errno, -EWOULDBLOCK (fs_miss_retry()).
 */
static int rmdir_resolve(struct op *op, uint64_t parent, const char *name, struct inode_tx *tx)
{
	op_put(op);
	int rc = resolve_once(op, parent, name, OP_CHILD | OP_REMOVE);
	if (!rc && !S_ISDIR(op->ip->a.mode))
		rc = -ENOTDIR;
	if (!rc)
		rc = inode_tx_begin(op->fs, tx, parent);
	if (!rc)
		rc = dir_drop(op->fs, tx->b, op->ino, true);
	return rc;
}

void dir_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct inode_tx tx;
	struct op op;
	int how = OP_WRITE | OP_NODOTS | OP_CHILD | OP_REMOVE;
	int rc = op_check(&op, req, parent, name, how);
	if (!rc)
		rc = op_warm(&op, parent, name, false);
	if (!rc && op.ino)
		rc = fs_region_unlink(parent, op.ino); /* a region's root: before reading it */
	if (!rc && op.ino)
		rc = warm_dir_drop(op.fs, op.ino);
	if (!rc) {
		op_lock(&op);
		do
			rc = rmdir_resolve(&op, parent, name, &tx);
		while (fs_miss_retry(op.fs, &rc));
	}
	if (!rc) {
		inode_tx_add(&tx, op.dp); /* the child's records are dropped, not written */
		op.dp->a.nlink--;
		fs_touch(&op.dp->a, false, true, true);
		rc = dentry_del(&tx, parent, name);
		rc = inode_tx_commit(&tx, rc);
	}
	if (!rc) {
		op.ip->a.nlink = 0;
		op.ip->gone = true;
	}
	fuse_reply_err(req, fs_err(op_end(&op, rc)));
}

/* A directory ip moving from directory from to directory to: fix the links. */
static void reparent(struct inode *ip, struct inode *from, struct inode *to)
{
	if (from == to || !S_ISDIR(ip->a.mode))
		return;
	ip->a.parent = to->ino;
	from->a.nlink--;
	to->a.nlink++;
}

/* RENAME_EXCHANGE: swap the two entries (fs->mu held, inodes in tx). */
static int rename_exchange(struct op *src, struct op *dst, struct inode_tx *tx)
{
	int rc = dentry_put(tx, src->parent, src->name, dst->ip);
	if (!rc)
		rc = dentry_put(tx, dst->parent, dst->name, src->ip);
	reparent(src->ip, src->dp, dst->dp);
	reparent(dst->ip, dst->dp, src->dp);
	fs_touch(&dst->ip->a, false, false, true);
	return rc;
}

/*
 * One try of rename's lookups (fs->mu held): both directories, both entries and the
 * inodes they name; then tx is begun, and a directory a directory replaces is checked
 * empty and its records' deletion queued into tx.  *exists: the new name exists.  0, 1
 * when there is nothing to do (two links to one file), negative errno, -EWOULDBLOCK
 * (fs_miss_retry()).
 */
static int rename_resolve(struct op *src, struct op *dst, unsigned flags, bool *exists,
                          struct inode_tx *tx)
{
	struct mwfs *fs = src->fs;
	int rc = dir_get(fs, src->parent, &src->dp);
	if (!rc)
		rc = dir_get(fs, dst->parent, &dst->dp);
	if (!rc)
		rc = dentry_get(fs, true, src->parent, src->name, &src->ino, NULL);
	if (rc)
		return rc;
	rc = dentry_get(fs, true, dst->parent, dst->name, &dst->ino, NULL);
	if (rc && rc != -ENOENT)
		return rc;
	*exists = rc == 0;
	if (*exists && flags & RENAME_NOREPLACE)
		return -EEXIST;
	if (!*exists && flags & RENAME_EXCHANGE)
		return -ENOENT;
	if (*exists && dst->ino == src->ino)
		return 1;
	/* every key in one region, or nothing changes (region.c) */
	rc = fs_region_rename(src->parent, dst->parent, src->ino, *exists ? dst->ino : 0);
	if (!rc)
		rc = inode_get(fs, src->ino, &src->ip);
	if (!rc && *exists)
		rc = inode_get(fs, dst->ino, &dst->ip);
	if (!rc)
		rc = inode_tx_begin(fs, tx, src->parent);
	if (!rc && *exists && !(flags & RENAME_EXCHANGE) && S_ISDIR(src->ip->a.mode) &&
	    S_ISDIR(dst->ip->a.mode))
		rc = dir_drop(fs, tx->b, dst->ino, true);
	return rc;
}

/*
 * Plain rename: move src's entry to dst, replacing dst's child if any
 * (fs->mu held; both parents and the source in tx).  With wh (WHITEOUT)
 * src's name is not deleted but points at wh.  *dropped is set when
 * the replaced child is an empty directory whose records the batch deletes.
 */
static int rename_replace(struct op *src, struct op *dst, struct inode_tx *tx, struct inode *wh,
                          bool *dropped)
{
	struct inode *si = src->ip, *di = dst->ip;
	int rc = 0;
	if (di) {
		if (S_ISDIR(si->a.mode) && !S_ISDIR(di->a.mode))
			return -ENOTDIR;
		if (!S_ISDIR(si->a.mode) && S_ISDIR(di->a.mode))
			return -EISDIR;
		if (S_ISDIR(di->a.mode)) {
			/* its records' deletion is in the batch already (rename_resolve()) */
			dst->dp->a.nlink--;
			*dropped = true;
		} else {
			inode_tx_add(tx, di);
			rc = unlink_one(src->fs, tx->b, di);
		}
	}
	if (!rc)
		rc = wh ? dentry_put(tx, src->parent, src->name, wh)
		        : dentry_del(tx, src->parent, src->name);
	if (!rc)
		rc = dentry_put(tx, dst->parent, dst->name, si);
	reparent(si, src->dp, dst->dp);
	return rc;
}

void dir_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                const char *newname, unsigned int flags)
{
	struct op src, dst; /* src holds fs->mu for both */
	struct inode_tx tx;
	struct inode *wh = NULL; /* RENAME_WHITEOUT: the whiteout left at src */
	bool dropped = false;
	int rc = op_check(&src, req, parent, name, 0);
	/* across regions: EXDEV before EROFS, so that mv copies (and meets EROFS, if any, there) */
	int rc2 = fs_ino_rid(parent) != fs_ino_rid(newparent)
	              ? -EXDEV
	              : op_check(&dst, req, newparent, newname, OP_WRITE);
	if (!rc)
		rc = rc2;
	if (!rc && ((flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) ||
	            (flags & RENAME_EXCHANGE && flags & (RENAME_NOREPLACE | RENAME_WHITEOUT))))
		rc = -EINVAL;
	if (!rc)
		rc = op_warm(&src, parent, name, false);
	if (!rc)
		rc = op_warm(&dst, newparent, newname, false);
	/* across regions: refused before anything is read of them (again under the lock) */
	if (!rc && src.ino)
		rc = fs_region_rename(parent, newparent, src.ino, dst.ino);
	/* a directory being replaced is checked empty and dropped under the lock */
	if (!rc && dst.ino && dst.type == S_IFDIR &&
	    !(flags & (RENAME_EXCHANGE | RENAME_NOREPLACE)))
		rc = warm_dir_drop(dst.fs, dst.ino);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	struct mwfs *fs = src.fs;
	op_lock(&src);
	src.parent = parent;
	dst.parent = newparent;
	bool exists = false;
	do {
		op_put(&src);
		op_put(&dst);
		rc = rename_resolve(&src, &dst, flags, &exists, &tx);
	} while (fs_miss_retry(fs, &rc));
	if (rc > 0) {
		rc = 0; /* two links to one file: POSIX says do nothing */
		goto out;
	}
	if (rc)
		goto out;
	inode_tx_add(&tx, src.ip);
	inode_tx_add(&tx, src.dp);
	inode_tx_add(&tx, dst.dp); /* the same inode as src.dp within one directory */
	if (flags & RENAME_EXCHANGE) {
		inode_tx_add(&tx, dst.ip);
		rc = rename_exchange(&src, &dst, &tx);
	} else {
		if (flags & RENAME_WHITEOUT) {
			/* a character device 0/0 with mode 0, as the kernel and ext4 make it */
			rc = inode_new(fs, tx.b, parent, S_IFCHR, &wh);
			if (!rc) {
				inode_tx_add(&tx, wh);
				init_node(wh, src.dp, fuse_req_ctx(req), 0);
			}
		}
		if (!rc)
			rc = rename_replace(&src, &dst, &tx, wh, &dropped);
	}
	fs_touch(&src.ip->a, false, false, true);
	fs_touch(&src.dp->a, false, true, true);
	fs_touch(&dst.dp->a, false, true, true);
	rc = inode_tx_commit(&tx, rc);
	if (!rc && dropped) {
		dst.ip->a.nlink = 0;
		dst.ip->gone = true;
	}
	if (rc && wh) {
		wh->a.nlink = 0; /* never stored: dropped by inode_put() */
		wh->gone = true;
	}
	inode_put(fs, wh);
out:
	op_end(&dst, 0);
	fuse_reply_err(req, fs_err(op_end(&src, rc)));
}

void dir_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fuse_entry_param e;
	struct inode_tx tx;
	struct op op;
	/* the inode's record and the entry: one region (EXDEV before EROFS, as rename) */
	int rc = fs_region_link(ino, newparent);
	if (!rc)
		rc = op_check(&op, req, newparent, newname, OP_WRITE);
	if (!rc)
		rc = inode_warm(op.fs, ino);
	if (!rc)
		rc = op_warm(&op, newparent, newname, true);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	do {
		op_put(&op);
		rc = inode_get(op.fs, ino, &op.ip);
		if (!rc && S_ISDIR(op.ip->a.mode))
			rc = -EPERM;
		if (!rc && op.ip->a.nlink == 0)
			rc = -ENOENT;
		if (!rc)
			rc = resolve_once(&op, newparent, newname, OP_ABSENT);
	} while (fs_miss_retry(op.fs, &rc));
	if (!rc)
		rc = inode_tx_begin(op.fs, &tx, newparent);
	if (!rc) {
		inode_tx_add(&tx, op.ip);
		inode_tx_add(&tx, op.dp);
		op.ip->a.nlink++;
		fs_touch(&op.ip->a, false, false, true);
		fs_touch(&op.dp->a, false, true, true);
		rc = dentry_put(&tx, newparent, newname, op.ip);
		rc = inode_tx_commit(&tx, rc);
	}
	if (!rc) {
		op.ip->nlookup++;
		fs_fill_entry(op.fs, op.ip, &e);
	}
	rc = op_end(&op, rc);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_entry(req, &e);
}
