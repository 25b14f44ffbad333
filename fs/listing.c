/*
 * listing.c - directory listing: opendir, readdir, readdirplus, releasedir,
 * fsyncdir.
 *
 * A listing is snapshot into the directory handle at offset 0 so that
 * offsets are stable indexes (seekdir/telldir work) and a 100,000-entry
 * directory is scanned once, not once per reply.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "grow.h"
#include "internal.h"

struct dent {
	uint64_t ino;  /* child inode */
	uint32_t type; /* S_IFMT bits */
	uint32_t name; /* offset of the NUL-terminated name in dirh.names */
};

/* An open directory (fi->fh). */
struct dirh {
	pthread_mutex_t mu; /* protects everything below */
	struct dent *ents;  /* snapshot of the listing: ".", "..", then entries */
	size_t n, cap;
	char *names; /* name storage */
	size_t nlen, ncap;
	bool loaded;
	uint64_t gen, gen_all; /* fs->dgen[slot], fs->dgen_all before the snapshot */
};

static int dirh_add(struct dirh *d, uint64_t ino, uint32_t type, const char *name, size_t len)
{
	if (MW_GROW(d->ents, d->cap, d->n + 1, 64) ||
	    MW_GROW(d->names, d->ncap, d->nlen + len + 1, 4096))
		return -ENOMEM;
	memcpy(d->names + d->nlen, name, len);
	d->names[d->nlen + len] = 0;
	d->ents[d->n].ino = ino;
	d->ents[d->n].type = type;
	d->ents[d->n].name = (uint32_t)d->nlen;
	d->nlen += len + 1;
	d->n++;
	return 0;
}

/*
 * Check that ino is a live directory and give its parent (itself for the
 * root).  Takes fs->mu.  0, -ENOTDIR, -ENOENT or the error of loading it.
 */
static int dir_parent(struct mwfs *fs, uint64_t ino, uint64_t *parent)
{
	struct inode *dp = NULL;
	int rc = inode_warm(fs, ino);
	if (rc)
		return rc;
	mw_mutex_lock(&fs->mu);
	do
		rc = dir_get(fs, ino, &dp);
	while (fs_miss_retry(fs, &rc));
	if (!rc) {
		*parent = dp->a.parent ? dp->a.parent : ino;
		inode_put(fs, dp);
	}
	mw_mutex_unlock(&fs->mu);
	return rc;
}

/* Snapshot the listing of directory ino into d (d->mu held). */
static int dirh_load(struct mwfs *fs, struct dirh *d, uint64_t ino)
{
	uint64_t parent;
	d->n = d->nlen = 0;
	d->loaded = false;
	/* before the scan: a change while it runs may or may not be in it */
	mw_mutex_lock(&fs->mu);
	d->gen = fs->dgen[ino % FS_DGEN_SLOTS];
	d->gen_all = fs->dgen_all;
	mw_mutex_unlock(&fs->mu);
	int rc = dir_parent(fs, ino, &parent);
	if (rc)
		return rc;
	rc = dirh_add(d, ino, S_IFDIR, ".", 1);
	if (!rc)
		rc = dirh_add(d, parent, S_IFDIR, "..", 2);
	uint8_t key[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	size_t kn = schema_key_dentry_prefix(key, ino);
	size_t en = schema_prefix_end(key, kn, end);
	struct engine_iter *it = NULL;
	struct engine *e = fs_eng(fs, ino); /* the directory's entries are in its region */
	if (!rc && !e)
		rc = -ENOENT;
	if (!rc)
		rc = engine_iter_new(e, key, kn, end, en, &it);
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
	uint64_t parent;
	int rc = dir_parent(fs, ino, &parent);
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
	if (plus) {
		/*
		 * Warm the records of the entries this reply can hold before
		 * taking fs->mu (see op_warm() in dir.c); a store that does not answer
		 * fails the listing instead of stalling the mount.
		 */
		size_t fit = size / 64 + 1; /* a direntplus is over 128 bytes */
		for (size_t i = (size_t)off < 2 ? 2 : (size_t)off; !rc && i < d->n && fit;
		     i++, fit--) {
			rc = inode_warm(fs, d->ents[i].ino);
			if (rc == -ENOENT)
				rc = 0; /* removed since the snapshot: skipped below */
		}
		if (rc)
			goto out;
		mw_mutex_lock(&fs->mu);
	}
	/*
	 * An entry of the snapshot may have been removed or renamed over since
	 * (its inode can still be in the table: open, or not reclaimed yet).
	 * Given its inode, the kernel would bind the name to it, and a later
	 * stat, open or link(2) of the name would reach the old inode (link
	 * failed with ENOENT on its nlink of 0).  So once the directory changed,
	 * entries go without inode (nodeid 0: a plain entry to the kernel,
	 * which looks the name up when it is used).
	 */
	bool current =
	    plus && d->gen == fs->dgen[ino % FS_DGEN_SLOTS] && d->gen_all == fs->dgen_all;
	for (size_t i = (size_t)off; i < d->n; i++) {
		const struct dent *de = &d->ents[i];
		const char *name = d->names + de->name;
		size_t need;
		if (plus) {
			struct fuse_entry_param e;
			struct inode *ip = NULL;
			memset(&e, 0, sizeof(e));
			if (i < 2 || !current || !fs_region_of(fs, de->ino)) {
				/*
				 * The kernel takes no lookup on "." and ".." (nor on nodeid 0).  An
				 * inode of a region this mount has not opened yet (a region's root)
				 * goes the same way: the kernel's lookup of the name opens it
				 * (op_warm() in dir.c, without d->mu and outside the gate).
				 */
				e.attr.st_ino = de->ino;
				e.attr.st_mode = de->type;
			} else {
				int r = inode_get(fs, de->ino, &ip);
				if (r && r != -EWOULDBLOCK)
					continue; /* removed since the snapshot */
				if (r) {
					/* not in memory: a plain entry, which the kernel looks up
					 */
					e.attr.st_ino = de->ino;
					e.attr.st_mode = de->type;
				} else {
					fs_fill_entry(fs, ip, &e);
				}
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
		mw_mutex_unlock(&fs->mu);
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
	int rc;
	mw_mutex_lock(&fs->mu);
	do
		rc = inode_get(fs, ino, &ip);
	while (fs_miss_retry(fs, &rc));
	if (!rc) {
		t = ip->ticket;
		inode_put(fs, ip);
	}
	mw_mutex_unlock(&fs->mu);
	struct fs_region *r = fs_region_of(fs, ino);
	if (!rc && r && r->writer) /* its entries and record are in its region */
		rc = t ? engine_wait(r->e, t, true) : engine_sync(r->e);
	fuse_reply_err(req, fs_err(rc));
}
