/*
 * xattr.c - extended attributes: one key per (inode, name), 'X' ino name
 * -> value.  listxattr is one prefix scan.  Names are at most 255 bytes and
 * values at most 64 KiB (the Linux VFS limits).
 *
 * The root directory also answers getxattr(MWFS_STATS_XATTR) with the
 * statistics (mwfs_stats_format()), MWFS_DAEMON_XATTR with
 * the daemon's pid and status file (tools/daemon.h) and MWFS_SYNC_XATTR by
 * committing everything (fs.h); they are not stored, not listed and cannot
 * be set.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "grow.h"
#include "internal.h"
#include "log.h"

#define XATTR_VALUE_MAX 65536

/*
 * Names this filesystem does not support, answered with EOPNOTSUPP by every
 * xattr call: POSIX ACLs (the kernel would not enforce stored ones: storing
 * them would be a silent success) and SELinux labels (FUSE has no LSM
 * integration).  Besides being honest this is what makes "ls -l" of a big
 * directory cheap: coreutils remembers per device that getxattr of
 * security.selinux and system.posix_acl_access is unsupported and stops
 * asking, where ENODATA costs two FUSE round trips per entry, every time.
 */
static bool unsupported(const char *name)
{
	return !strcmp(name, "security.selinux") || !strcmp(name, "system.posix_acl_access") ||
	       !strcmp(name, "system.posix_acl_default");
}

/* The virtual xattrs of the root: not stored, not listed, read-only. */
static bool is_stats(fuse_ino_t ino, const char *name)
{
	return ino == SCHEMA_ROOT_INO &&
	       (!strcmp(name, MWFS_STATS_XATTR) || !strcmp(name, MWFS_DAEMON_XATTR) ||
	        !strcmp(name, MWFS_SYNC_XATTR) || !strcmp(name, MWFS_FENCE_XATTR) ||
	        !strcmp(name, MWFS_HANDOVER_XATTR) || !strcmp(name, MWFS_REGIONS_XATTR) ||
	        !strcmp(name, MWFS_RELEASE_XATTR));
}

/*
 * The control xattrs that change what the mount does (handover, fence check, release, take)
 * are for root and for the user who mounted it (the daemon's uid): another local user must
 * not stall, fence or hand away a mount.
 */
static bool may_control(fuse_req_t req)
{
	uid_t uid = fuse_req_ctx(req)->uid;
	return uid == 0 || uid == getuid();
}

/* A region's root (rid > 0) or the mount's root (region 0). */
static bool is_region_root(fuse_ino_t ino)
{
	return ino == SCHEMA_ROOT_INO ||
	       (ino >> FS_REGION_SHIFT && (ino & ((1ull << FS_REGION_SHIFT) - 1)) == 1);
}

/*
 * MWFS_SYNC_XATTR: every write buffer into its engine, then every region this mount writes
 * committed, durable and still in the store (not after it lost objects).  0 or the first
 * error.
 */
static int sync_all(struct mwfs *fs)
{
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	bool any = false;
	for (unsigned i = 0; i < n; i++)
		any = any || fs->reg[i].writer;
	int rc = any ? data_flush_all(fs) : 0;
	for (unsigned i = 0; i < n && !rc; i++) {
		if (!fs->reg[i].writer)
			continue;
		rc = engine_sync(fs->reg[i].e);
		if (!rc)
			rc = engine_check_store(fs->reg[i].e);
	}
	return rc;
}

/*
 * MWFS_REGIONS_XATTR: the hook's text of each region of the table, then of the mount
 * (mwfs_opts.regions), into buf (len bytes).  Returns its length (at most len).
 */
static size_t regions_text(struct mwfs *fs, char *buf, size_t len)
{
	size_t n = 0;
	unsigned nreg = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	for (unsigned i = 0; i <= nreg && n < len; i++)
		n += fs->o.regions(fs->o.take_arg, i < nreg ? fs->reg[i].rid : MWFS_RID_MOUNT,
		                   buf + n, len - n);
	return n < len ? n : len;
}

static void reply_value(fuse_req_t req, const void *val, size_t vn, size_t size)
{
	if (size == 0)
		fuse_reply_xattr(req, vn);
	else if (vn > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, vn);
}

/*
 * Checks shared by setxattr and removexattr, in the order callers see
 * them (removexattr passes size 0 and flags 0).  0 or negative errno.
 */
static int check_change(struct mwfs *fs, fuse_ino_t ino, const char *name, size_t size, int flags)
{
	size_t nlen = strlen(name);
	fs_want_write(fs, ino); /* a following mount takes the region if it can (no lock held) */
	int rc = fs_writable(fs, ino);
	if (rc)
		return rc;
	if (nlen == 0 || nlen > SCHEMA_XATTR_NAME_MAX)
		return -ERANGE;
	if (size > XATTR_VALUE_MAX)
		return -E2BIG;
	if (flags & ~(XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (is_stats(ino, name))
		return -EPERM;
	if (unsupported(name))
		return -EOPNOTSUPP;
	/* wait for backpressure and read what change() reads before fs->mu (op_warm() in dir.c) */
	rc = engine_wait_room(fs_eng(fs, ino), size + nlen + FS_META_ROOM);
	if (!rc)
		rc = inode_warm(fs, ino);
	if (!rc) {
		uint8_t key[SCHEMA_KEY_MAX];
		size_t kn = schema_key_xattr(key, ino, name, nlen);
		rc = fs_warm_key(fs, key, kn);
		if (rc == -ENOENT)
			rc = 0;
	}
	return rc;
}

/*
 * Does the xattr under key exist (fs->mu held)?  0, or -EEXIST/-ENODATA as flags want,
 * -EWOULDBLOCK (fs_miss_retry()).
 */
static int check_exists(struct mwfs *fs, const uint8_t *key, size_t kn, int flags)
{
	size_t len;
	int rc = fs_get_locked(fs, 0, key, kn, NULL, &len);
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == 0 && (flags & XATTR_CREATE))
		return -EEXIST;
	if (rc == -ENOENT && (flags & XATTR_REPLACE))
		return -ENODATA;
	return 0;
}

/*
 * Put (value) or delete (remove) xattr name of ino and touch ino's ctime,
 * in one batch.  Takes fs->mu.  flags as in setxattr(2): remove passes
 * XATTR_REPLACE, so a missing name is -ENODATA.  0 or negative errno.
 */
static int change(struct mwfs *fs, fuse_ino_t ino, const char *name, bool remove, const char *value,
                  size_t size, int flags)
{
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_xattr(key, ino, name, strlen(name));
	struct inode *ip = NULL;
	struct inode_tx tx;
	int rc;
	mw_mutex_lock(&fs->mu);
	do {
		inode_put(fs, ip);
		ip = NULL;
		rc = inode_get(fs, ino, &ip);
		if (!rc)
			rc = check_exists(fs, key, kn, flags);
	} while (fs_miss_retry(fs, &rc));
	if (!rc)
		rc = inode_tx_begin(fs, &tx, ino);
	if (!rc) {
		inode_tx_add(&tx, ip);
		fs_touch(&ip->a, false, false, true);
		rc = remove ? fs_batch_del(fs, tx.b, key, kn)
		            : fs_batch_put(fs, tx.b, key, kn, value, size);
		rc = inode_tx_commit(&tx, rc);
	}
	inode_put(fs, ip);
	mw_mutex_unlock(&fs->mu);
	return rc;
}

void xattr_set(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
               int flags)
{
	struct mwfs *fs = fuse_req_userdata(req);
	if (!strcmp(name, MWFS_REGION_CREATE_XATTR)) {
		dir_region_create(req, ino, value, size); /* replies */
		return;
	}
	int rc = check_change(fs, ino, name, size, flags);
	if (!rc)
		rc = change(fs, ino, name, false, value, size, flags);
	fuse_reply_err(req, fs_err(rc));
}

void xattr_get(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct mwfs *fs = fuse_req_userdata(req);
	uint8_t key[SCHEMA_KEY_MAX];
	size_t nlen = strlen(name);
	if (nlen == 0 || nlen > SCHEMA_XATTR_NAME_MAX) {
		fuse_reply_err(req, ERANGE);
		return;
	}
	if (unsupported(name)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	if (is_stats(ino, name) && !strcmp(name, MWFS_SYNC_XATTR)) {
		int rc = sync_all(fs);
		if (rc)
			fuse_reply_err(req, fs_err(rc));
		else
			reply_value(req, "durable\n", 8, size);
		return;
	}
	if ((is_stats(ino, name) &&
	     (!strcmp(name, MWFS_HANDOVER_XATTR) || !strcmp(name, MWFS_FENCE_XATTR))) ||
	    (is_region_root(ino) &&
	     (!strcmp(name, MWFS_RELEASE_XATTR) || !strcmp(name, MWFS_TAKE_XATTR) ||
	      !strcmp(name, MWFS_TAKE_FORCE_XATTR)))) {
		if (!may_control(req)) {
			fuse_reply_err(req, EPERM);
			return;
		}
	}
	if (is_stats(ino, name) && !strcmp(name, MWFS_HANDOVER_XATTR)) {
		/* buffers first: the hold refuses their later flush too */
		struct fs_region *r =
		    &fs->reg[0]; /* a takeover is of region 0 (tools/takeover.c) */
		int rc = r->writer ? data_flush_all(fs) : -EROFS;
		if (!rc)
			rc = engine_handover(r->e, MWFS_HANDOVER_MS);
		if (rc)
			fuse_reply_err(req, fs_err(rc));
		else
			reply_value(req, "durable\n", 8, size);
		return;
	}
	if (is_stats(ino, name) && !strcmp(name, MWFS_FENCE_XATTR)) {
		struct fs_region *r = &fs->reg[0];
		int rc = r->writer ? engine_check_epoch(r->e) : -EROFS;
		if (rc == 0)
			rc = engine_handover(r->e, 0); /* still ours: take changes again */
		if (rc == -ESTALE)
			reply_value(req, "fenced\n", 7, size);
		else if (rc == 0)
			reply_value(req, "current\n", 8, size);
		else
			fuse_reply_err(req, fs_err(rc));
		return;
	}
	/* release: the root lets region 0 go, a region's root its region */
	if (!strcmp(name, MWFS_RELEASE_XATTR) && is_region_root(ino)) {
		int rc = fs_release(fs, fs_ino_rid(ino));
		if (rc)
			fuse_reply_err(req, rc == -EINVAL ? EINVAL : fs_err(rc));
		else
			reply_value(req, "released\n", 9, size);
		return;
	}
	/* take: the same roots; force fences a live holder */
	if ((!strcmp(name, MWFS_TAKE_XATTR) || !strcmp(name, MWFS_TAKE_FORCE_XATTR)) &&
	    is_region_root(ino)) {
		int rc = fs_take(fs, fs_ino_rid(ino), !strcmp(name, MWFS_TAKE_FORCE_XATTR));
		if (rc == -EALREADY)
			reply_value(req, "already\n", 8, size);
		else if (rc)
			fuse_reply_err(req, rc == -ENOTSUP ? ENOTSUP : fs_err(rc));
		else
			reply_value(req, "taken\n", 6, size);
		return;
	}
	if (is_stats(ino, name) && !strcmp(name, MWFS_REGIONS_XATTR)) {
		char *buf = (char *)fs_tls_buf(fs, 65536);
		size_t n = buf && fs->o.regions ? regions_text(fs, buf, 65536) : 0;
		if (!buf)
			fuse_reply_err(req, ENOMEM);
		else if (!fs->o.regions)
			fuse_reply_err(req, ENODATA);
		else
			reply_value(req, buf, n, size);
		return;
	}
	if (is_stats(ino, name) && !strcmp(name, MWFS_DAEMON_XATTR)) {
		if (fs->o.daemon_info)
			reply_value(req, fs->o.daemon_info, strlen(fs->o.daemon_info), size);
		else
			fuse_reply_err(req, ENODATA);
		return;
	}
	if (is_stats(ino, name)) {
		char *buf = (char *)fs_tls_buf(fs, 65536);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		size_t n = mwfs_stats_format(fs, buf, 65536);
		if (n >= 65536)
			n = 65535;
		reply_value(req, buf, n, size);
		return;
	}
	void *val = NULL;
	size_t vn = 0;
	int rc = inode_check(fs, ino);
	if (!rc) {
		size_t kn = schema_key_xattr(key, ino, name, nlen);
		rc = engine_get(fs_eng(fs, ino), key, kn, &val, &vn);
		if (rc == -ENOENT)
			rc = -ENODATA;
	}
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		reply_value(req, val, vn, size);
	free(val);
}

void xattr_list(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct mwfs *fs = fuse_req_userdata(req);
	uint8_t key[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	char *out = NULL;
	size_t on = 0, ocap = 0;
	int rc = inode_check(fs, ino);
	size_t kn = schema_key_xattr_prefix(key, ino);
	size_t en = schema_prefix_end(key, kn, end);
	struct engine_iter *it = NULL;
	if (!rc) /* the inode exists: its region is known */
		rc = engine_iter_new(fs_eng(fs, ino), key, kn, end, en, &it);
	for (; !rc && engine_iter_valid(it); engine_iter_next(it)) {
		size_t n;
		const uint8_t *k = engine_iter_key(it, &n);
		size_t len = n - kn;
		if (MW_GROW(out, ocap, on + len + 1, 1024)) {
			rc = -ENOMEM;
			break;
		}
		memcpy(out + on, k + kn, len);
		out[on + len] = 0;
		on += len + 1;
	}
	if (!rc && it)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		reply_value(req, out ? out : "", on, size);
	free(out);
}

void xattr_remove(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct mwfs *fs = fuse_req_userdata(req);
	int rc = check_change(fs, ino, name, 0, 0);
	if (!rc)
		rc = change(fs, ino, name, true, NULL, 0, XATTR_REPLACE);
	fuse_reply_err(req, fs_err(rc));
}
