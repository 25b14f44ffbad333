/*
 * fs.c - the FUSE session of memwalfs: superblock and format, the
 * operations table and attribute handlers (getattr, setattr, readlink,
 * statfs, forget); the helpers every handler shares are in common.c.
 *
 * Every handler follows one pattern: take fs->mu, resolve inodes through
 * the table, build ONE engine batch with every key the operation changes,
 * apply it with engine_write() (readable at once, durable within a cadence
 * interval), update the in-memory inodes only after the write succeeded,
 * drop the lock and reply.  Engine errors become EIO (a fenced writer) or
 * EROFS; nothing is answered with a silent success.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>

#include "internal.h"
#include "log.h"

void mwfs_opts_default(struct mwfs_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->chunk_size = 1u << 20;
	o->entry_timeout = 10.0;
	o->attr_timeout = 10.0;
	o->writeback = true;
	o->max_threads = FS_DEFAULT_THREADS;
	o->readahead_threads = 8;
	o->readahead_bytes = 16u << 20;
	o->kernel_readahead = 1u << 20;
	o->wb_flush_ms = 100;
}

uint32_t mwfs_chunk_size(const struct mwfs *fs)
{
	return fs->cs;
}

/* ---- attribute handlers ------------------------------------------------- */

/*
 * The FUSE capabilities the filesystem takes.  libfuse turns several on by
 * default; every one is listed here with what honours it, and op_init()
 * clears everything else, so a default added by a newer libfuse never
 * reaches the kernel unhandled.
 *
 *   ASYNC_READ        reads run in parallel: ip->dlock is taken shared.
 *   ATOMIC_O_TRUNC    open(O_TRUNC) is sent to file_open() with no setattr:
 *                     it truncates in one batch before answering the open.
 *   AUTO_INVAL_DATA   the kernel drops cached pages when mtime or size
 *                     change: only ever more invalidation, always safe.
 *   READDIRPLUS(_AUTO) both readdir and readdirplus are implemented.
 *   ASYNC_DIO         parallel O_DIRECT requests: each takes ip->dlock.
 *   PARALLEL_DIROPS   lookups and readdirs of one directory in parallel:
 *                     fs->mu serialises what they share.
 *   EXPORT_SUPPORT    file handles (name_to_handle_at, NFS re-export):
 *                     dir_lookup() answers "." in any inode and ".." in a
 *                     directory; generations are fixed, inode numbers never
 *                     reused (dir.c's header).
 *   WRITEBACK_CACHE   only with the writeback option: the kernel keeps
 *                     dirty pages, sets mtime/ctime (fs_touch is skipped
 *                     then), may read through write-only handles (file_read
 *                     does not check the access mode) and truncates the page
 *                     cache itself on O_TRUNC.
 * Declined: POSIX_LOCKS and FLOCK_LOCKS (no getlk/setlk/flock: the kernel
 * locks locally, right for one mount per store), HANDLE_KILLPRIV (the
 * kernel clears suid/sgid on write and chown, the daemon what it leaves:
 * fs_kill_suidgid(); v1 gives no caller for writeback writes, and libfuse
 * 3.14 has no HANDLE_KILLPRIV_V2), POSIX_ACL (not supported),
 * DONT_MASK (the kernel applies the
 * umask), SPLICE_* (no write_buf), IOCTL_DIR (no ioctl), CACHE_SYMLINKS,
 * EXPLICIT_INVAL_DATA, EXPIRE_ONLY, NO_OPEN(DIR)_SUPPORT.
 */
#define MWFS_CAPS                                                                                  \
	(FUSE_CAP_ASYNC_READ | FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_AUTO_INVAL_DATA |                \
	 FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO | FUSE_CAP_ASYNC_DIO |                   \
	 FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_EXPORT_SUPPORT | FUSE_CAP_WRITEBACK_CACHE)

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct mwfs *fs = userdata;
	conn->want &= conn->capable & (MWFS_CAPS & ~(unsigned)FUSE_CAP_WRITEBACK_CACHE);
	fs->writeback = false;
	if (fs->o.writeback && !fs->o.read_only && (conn->capable & FUSE_CAP_WRITEBACK_CACHE)) {
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
		fs->writeback = true;
	}
	conn->want |= conn->capable & (FUSE_CAP_ATOMIC_O_TRUNC | FUSE_CAP_READDIRPLUS |
	                               FUSE_CAP_PARALLEL_DIROPS | FUSE_CAP_EXPORT_SUPPORT);
	conn->max_write = 1u << 20;
	/*
	 * The kernel keeps the lower of this and its own read-ahead of the mount (128 KiB unless
	 * the mount command raised it: mwd_set_kernel_readahead()); a request is at most
	 * max_write's 1 MiB either way.
	 */
	uint64_t ra = fs->o.kernel_readahead > (1u << 20) ? fs->o.kernel_readahead : 1u << 20;
	if (conn->max_readahead < ra)
		conn->max_readahead = ra > UINT32_MAX ? UINT32_MAX : (unsigned)ra;
	/*
	 * Background requests (writeback of dirty pages, read-ahead, async direct I/O) take at
	 * most half the worker threads: a writer held by backpressure then blocks those, never
	 * every worker, and lookups and getattrs of other files are still answered.
	 */
	unsigned threads = fs->o.max_threads ? fs->o.max_threads : FS_DEFAULT_THREADS;
	conn->max_background = threads > 1 ? threads / 2 : 1;
	log_info("fuse init: writeback=%d max_write=%u want=%#x", fs->writeback, conn->max_write,
	         conn->want);
}

static void op_destroy(void *userdata)
{
	(void)userdata;
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct mwfs *fs = fuse_req_userdata(req);
	mw_mutex_lock(&fs->mu);
	inode_forget(fs, ino, nlookup);
	mw_mutex_unlock(&fs->mu);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	struct mwfs *fs = fuse_req_userdata(req);
	mw_mutex_lock(&fs->mu);
	for (size_t i = 0; i < count; i++)
		inode_forget(fs, f[i].ino, f[i].nlookup);
	mw_mutex_unlock(&fs->mu);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip;
	struct stat st;
	(void)fi;
	int rc;
	mw_mutex_lock(&fs->mu);
	do
		rc = inode_get_removed(fs, ino, &ip); /* fstat of a removed directory: nlink 0 */
	while (fs_miss_retry(fs, &rc));
	if (!rc) {
		fs_fill_stat(fs, ip, &st);
		inode_put(fs, ip);
	}
	mw_mutex_unlock(&fs->mu);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_attr(req, &st, fs->o.attr_timeout);
}

static void set_time(int64_t *sec, uint32_t *nsec, const struct timespec *ts, bool now)
{
	if (now) {
		fs_now(sec, nsec);
	} else {
		*sec = ts->tv_sec;
		*nsec = (uint32_t)ts->tv_nsec;
	}
}

/* The setattr bits that set something (the others qualify them). */
#define SETATTR_FIELDS                                                                             \
	(FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID | FUSE_SET_ATTR_SIZE |         \
	 FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |                     \
	 FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = NULL;
	struct stat st;
	struct engine_batch *b = NULL;
	uint64_t removed = 0;
	bool dlocked = false;
	(void)fi;
	fs_want_write(fs, ino);        /* a following mount takes the region if it can */
	int rc = fs_writable(fs, ino); /* -EROFS, or EIO once fenced */
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	/* backpressure and a cold inode record are waited for before fs->mu (dir.c op_warm()) */
	rc = engine_wait_room(fs_eng(fs, ino), FS_META_ROOM);
	if (!rc)
		rc = inode_warm(fs, ino);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	mw_mutex_lock(&fs->mu);
	do
		rc = inode_get_removed(fs, ino, &ip); /* fchmod of a removed directory works too */
	while (fs_miss_retry(fs, &rc));
	if (rc)
		goto out;
	if (to_set & FUSE_SET_ATTR_SIZE) {
		if (S_ISDIR(ip->a.mode)) {
			rc = -EISDIR;
			goto out;
		}
		if (!S_ISREG(ip->a.mode)) {
			rc = -EINVAL;
			goto out;
		}
		if (attr->st_size < 0) {
			rc = -EINVAL;
			goto out;
		}
		/* lock order: dlock before mu */
		mw_mutex_unlock(&fs->mu);
		pthread_rwlock_wrlock(&ip->dlock);
		dlocked = true;
		rc = data_flush(fs, ip);
		/* the extents past the new end are found before fs->mu (a scan) */
		if (!rc)
			rc = file_truncate_prepare(fs, ip, (uint64_t)attr->st_size, &b, &removed);
		mw_mutex_lock(&fs->mu);
		if (rc)
			goto out;
	}
	struct inode_tx tx;
	if (b)
		inode_tx_begin_on(fs, &tx, b);
	else if ((rc = inode_tx_begin(fs, &tx, ino)))
		goto out;
	inode_tx_add(&tx, ip);
	if (to_set & FUSE_SET_ATTR_SIZE) {
		file_truncate_locked(fs, ip, (uint64_t)attr->st_size, removed);
		if (!(to_set & FUSE_SET_ATTR_MTIME))
			fs_touch(&ip->a, false, true, false);
	}
	uint32_t old_gid = ip->a.gid;
	if (to_set & FUSE_SET_ATTR_MODE)
		ip->a.mode = (ip->a.mode & S_IFMT) | (attr->st_mode & 07777);
	if (to_set & FUSE_SET_ATTR_UID)
		ip->a.uid = attr->st_uid;
	if (to_set & FUSE_SET_ATTR_GID)
		ip->a.gid = attr->st_gid;
	/*
	 * A truncate, a chown, or a setattr with nothing to set (the kernel's kill of the set-id
	 * bits after a write, fallocate or copy that it could not express as a mode): the set-id
	 * bits the caller may not keep go (fs_kill_suidgid()), judged on the group before a chown.
	 * A setattr of the mode alone (a chmod, or the kernel's kill of set-user-ID, which keeps
	 * a set-group-ID without group-exec): set-group-ID goes if the caller is not in the group.
	 */
	if ((to_set & (FUSE_SET_ATTR_SIZE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) ||
	    !(to_set & SETATTR_FIELDS))
		ip->a.mode = fs_kill_suidgid(req, ip->a.mode, old_gid, false);
	else if (to_set & FUSE_SET_ATTR_MODE)
		ip->a.mode = fs_kill_suidgid(req, ip->a.mode, ip->a.gid, true);
	if (to_set & FUSE_SET_ATTR_ATIME)
		set_time(&ip->a.atime_sec, &ip->a.atime_nsec, &attr->st_atim,
		         to_set & FUSE_SET_ATTR_ATIME_NOW);
	if (to_set & FUSE_SET_ATTR_MTIME)
		set_time(&ip->a.mtime_sec, &ip->a.mtime_nsec, &attr->st_mtim,
		         to_set & FUSE_SET_ATTR_MTIME_NOW);
	if (to_set & FUSE_SET_ATTR_CTIME) {
		set_time(&ip->a.ctime_sec, &ip->a.ctime_nsec, &attr->st_ctim, false);
		fs_clock_seen(ip->a.ctime_sec, ip->a.ctime_nsec); /* the kernel's clock */
	} else
		fs_touch(&ip->a, false, false, true);
	/* if not applied, the attributes the kernel must keep seeing are restored */
	rc = inode_tx_commit(&tx, 0);
	if (rc)
		goto out;
	fs_fill_stat(fs, ip, &st);
out:
	if (ip)
		inode_put(fs, ip);
	mw_mutex_unlock(&fs->mu);
	if (dlocked)
		pthread_rwlock_unlock(&ip->dlock);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_attr(req, &st, fs->o.attr_timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip;
	char *copy = NULL;
	int rc;
	mw_mutex_lock(&fs->mu);
	do
		rc = inode_get(fs, ino, &ip);
	while (fs_miss_retry(fs, &rc));
	if (!rc) {
		if (!S_ISLNK(ip->a.mode) || !ip->target)
			rc = -EINVAL;
		else if (!(copy = strdup(ip->target)))
			rc = -ENOMEM;
		inode_put(fs, ip);
	}
	mw_mutex_unlock(&fs->mu);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_readlink(req, copy);
	free(copy);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct statvfs sv;
	struct fs_space sp;
	(void)ino;
	memset(&sv, 0, sizeof(sv));
	fs_space(fs, &sp);
	sv.f_bsize = fs->cs;
	sv.f_frsize = 4096;
	sv.f_blocks = sp.total / 4096;
	sv.f_bfree = sp.free / 4096;
	sv.f_bavail = sp.avail / 4096;
	/* each region is a range of 2^40 inode numbers: the free ones are summed */
	unsigned nreg = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	sv.f_files = (uint64_t)nreg << FS_REGION_SHIFT;
	sv.f_ffree = 0;
	mw_mutex_lock(&fs->mu);
	for (unsigned i = 0; i < nreg; i++) {
		const struct fs_region *r = &fs->reg[i];
		uint64_t end = ((uint64_t)r->rid + 1) << FS_REGION_SHIFT;
		sv.f_ffree += r->next_ino < end ? end - r->next_ino : 0;
	}
	mw_mutex_unlock(&fs->mu);
	sv.f_favail = sv.f_ffree;
	sv.f_namemax = SCHEMA_NAME_MAX;
	fuse_reply_statfs(req, &sv);
}

/* fsync and fsyncdir, timed for the metrics (both reply before they return). */
static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	uint64_t t0 = mw_now_us();
	file_fsync(req, ino, datasync, fi);
	mw_hist_record(&fs->fsync_hist, mw_now_us() - t0);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	uint64_t t0 = mw_now_us();
	dir_fsyncdir(req, ino, datasync, fi);
	mw_hist_record(&fs->fsync_hist, mw_now_us() - t0);
}

static const struct fuse_lowlevel_ops mwfs_ops = {
    .init = op_init,
    .destroy = op_destroy,
    .lookup = dir_lookup,
    .forget = op_forget,
    .forget_multi = op_forget_multi,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .readlink = op_readlink,
    .mknod = dir_mknod,
    .mkdir = dir_mkdir,
    .unlink = dir_unlink,
    .rmdir = dir_rmdir,
    .symlink = dir_symlink,
    .rename = dir_rename,
    .link = dir_link,
    .open = file_open,
    .read = file_read,
    .write = file_write,
    .flush = file_flush,
    .release = file_release,
    .fsync = op_fsync,
    .opendir = dir_opendir,
    .readdir = dir_readdir,
    .readdirplus = dir_readdirplus,
    .releasedir = dir_releasedir,
    .fsyncdir = op_fsyncdir,
    .statfs = op_statfs,
    .setxattr = xattr_set,
    .getxattr = xattr_get,
    .listxattr = xattr_list,
    .removexattr = xattr_remove,
    .create = dir_create,
    .fallocate = file_fallocate,
    .lseek = file_lseek,
    .copy_file_range = file_copy_range,
};

/* ---- open, format, mount ------------------------------------------------ */

/* Format region 0's engine e: superblock and root directory, durably. */
static int format(struct mwfs *fs, struct engine *e)
{
	fs->cs = fs->o.chunk_size;
	int rc = fs_region_format(fs, e, 0, SCHEMA_ROOT_INO, getuid(), getgid());
	if (rc) {
		fs->cs = 0;
		log_err("formatting the store: %s", strerror(-rc));
		return rc;
	}
	log_info("formatted a new filesystem (chunk size %u)", fs->cs);
	return 0;
}

uint32_t mwfs_format_version(void)
{
	return SCHEMA_VERSION;
}

int mwfs_check_format(struct engine *e, uint32_t *version)
{
	struct schema_super sb = {0};
	int rc = fs_read_super(e, &sb);
	if (version)
		*version = rc == 0 || rc == -EPROTONOSUPPORT ? sb.version : 0;
	return rc;
}

int mwfs_open(struct engine *e, const struct mwfs_opts *o, struct mwfs **out)
{
	struct mwfs *fs = calloc(1, sizeof(*fs));
	int rc;
	if (!fs)
		return -ENOMEM;
	fs->o = *o;
	if (fs->o.chunk_size < 4096 || (fs->o.chunk_size & (fs->o.chunk_size - 1)) ||
	    fs->o.chunk_size > (64u << 20)) {
		log_err("chunk size %u: must be a power of two in 4 KiB..64 MiB", fs->o.chunk_size);
		free(fs);
		return -EINVAL;
	}
	mw_mutex_init(&fs->mu);
	mw_mutex_set_noio(&fs->mu); /* no store I/O under it: docs/DESIGN.md "Locking" */
	mw_mutex_init(&fs->refresh_mu);
	mw_mutex_init(&fs->take_mu);
	pthread_rwlock_init(&fs->nf_lock, NULL);
	fs_gate_init(&fs->gate);
	if (pthread_key_create(&fs->tkey, fs_tls_free)) {
		rc = -ENOMEM;
		goto fail_mu;
	}
	struct schema_super sb;
	rc = fs_read_super(e, &sb);
	if (rc == -ENOENT) {
		if (o->read_only) {
			log_err("the store holds no filesystem (and it is opened read-only)");
			goto fail;
		}
		rc = format(fs, e);
		if (rc)
			goto fail;
	} else if (rc) {
		goto fail;
	} else {
		fs->cs = sb.chunk_size;
	}
	/* region 0: the store's root; the mount adds the others (fs_region_add()) */
	rc = fs_region_add(fs, 0, e, !o->read_only);
	if (rc)
		goto fail;
	struct fs_region *r0 = &fs->reg[0];
	/* pin the root */
	struct inode *root;
	mw_mutex_lock(&fs->mu);
	do
		rc = inode_get(fs, SCHEMA_ROOT_INO, &root);
	while (fs_miss_retry(fs, &rc));
	if (!rc)
		root->nlookup = 1;
	mw_mutex_unlock(&fs->mu);
	if (!rc && !o->read_only)
		rc = inode_reclaim_orphans(fs);
	if (rc) {
		log_err("opening the root directory: %s", strerror(-rc));
		goto fail;
	}
	rc = ra_start(fs, o->readahead_threads, o->readahead_bytes, &fs->ra);
	if (rc)
		goto fail;
	if (!o->read_only && (rc = data_flusher_start(fs, o->wb_flush_ms, &fs->wbf))) {
		ra_stop(fs->ra);
		fs->ra = NULL;
		goto fail;
	}
	struct engine_stats es;
	engine_get_stats(e, &es);
	bool follow = o->read_only && es.following;
	if (!o->read_only || follow)
		rc = fsnotify_start(fs, follow ? follow_refresh : NULL, &fs->nf);
	if (!rc && follow)
		rc = fsfollow_start(fs, r0, &r0->ff);
	if (rc) {
		fsnotify_stop(fs->nf);
		fs->nf = NULL;
		data_flusher_stop(fs->wbf);
		fs->wbf = NULL;
		ra_stop(fs->ra);
		fs->ra = NULL;
		goto fail;
	}
	*out = fs;
	return 0;
fail:
	inode_table_free(fs);
	pthread_key_delete(fs->tkey);
fail_mu:
	fs_gate_destroy(&fs->gate);
	pthread_rwlock_destroy(&fs->nf_lock);
	mw_mutex_destroy(&fs->take_mu);
	mw_mutex_destroy(&fs->mu);
	mw_mutex_destroy(&fs->refresh_mu);
	free(fs);
	return rc;
}

int mwfs_check_fuse_args(int argc, char **argv)
{
	static const struct fuse_lowlevel_ops none;
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	/* the same parse mwfs_mount() makes; nothing is opened or mounted */
	struct fuse_session *se = fuse_session_new(&args, &none, sizeof(none), NULL);
	fuse_opt_free_args(&args);
	if (!se)
		return -EINVAL;
	fuse_session_destroy(se);
	return 0;
}

int mwfs_mount(struct mwfs *fs, int argc, char **argv, const char *mountpoint)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	fs->se = fuse_session_new(&args, &mwfs_ops, sizeof(mwfs_ops), fs);
	fuse_opt_free_args(&args);
	if (!fs->se) {
		log_err("cannot create the FUSE session (bad -o option?)");
		return -EINVAL;
	}
	if (fuse_set_signal_handlers(fs->se)) {
		log_err("cannot install signal handlers");
		goto fail;
	}
	if (fuse_session_mount(fs->se, mountpoint)) {
		log_err("cannot mount on %s", mountpoint);
		fuse_remove_signal_handlers(fs->se);
		goto fail;
	}
	fs->mounted = true;
	fsnotify_session(fs->nf, fs->se);
	return 0;
fail:
	fuse_session_destroy(fs->se);
	fs->se = NULL;
	return -EIO;
}

int mwfs_loop(struct mwfs *fs)
{
	return pool_run(fs->se, fs->o.max_threads ? fs->o.max_threads : FS_DEFAULT_THREADS,
	                &fs->gate);
}

int mwfs_close(struct mwfs *fs)
{
	if (!fs)
		return 0;
	int rc = 0;
	unsigned nreg = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	bool written = false;
	for (unsigned i = 0; i < nreg; i++) {
		fsfollow_stop(fs->reg[i].ff); /* first: they queue for the notify thread */
		fs->reg[i].ff = NULL;
		written = written || fs->reg[i].writer;
	}
	fsnotify_stop(fs->nf); /* before the session goes: it notifies the kernel */
	fs->nf = NULL;
	ra_stop(fs->ra);
	fs->ra = NULL;
	data_flusher_stop(fs->wbf);
	fs->wbf = NULL;
	if (written) {
		rc = data_flush_all(fs);
		mw_mutex_lock(&fs->mu);
		/* nothing is open any more: every unlinked inode can go */
		for (size_t i = 0; i < fs->hsize; i++)
			for (struct inode *ip = fs->htab[i]; ip; ip = ip->hnext)
				ip->nopen = 0;
		mw_mutex_unlock(&fs->mu);
		int rc2 = inode_reclaim_orphans(fs);
		if (!rc)
			rc = rc2;
	}
	if (fs->se) {
		if (fs->mounted)
			fuse_session_unmount(fs->se);
		fuse_remove_signal_handlers(fs->se);
		fuse_session_destroy(fs->se);
	}
	inode_table_free(fs);
	struct tls *t = pthread_getspecific(fs->tkey);
	fs_tls_free(t);
	pthread_setspecific(fs->tkey, NULL);
	pthread_key_delete(fs->tkey);
	fs_gate_destroy(&fs->gate);
	pthread_rwlock_destroy(&fs->nf_lock);
	mw_mutex_destroy(&fs->take_mu);
	mw_mutex_destroy(&fs->mu);
	mw_mutex_destroy(&fs->refresh_mu);
	free(fs);
	return rc;
}
