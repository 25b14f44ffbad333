/*
 * file.c - file data: open, read, write, flush, release, fsync,
 * truncation, fallocate (allocate, punch hole), lseek (SEEK_DATA/HOLE) and
 * copy_file_range.
 *
 * Data lives in extents (extent.c, key 'E' ino end; what no extent covers
 * is a hole): a write becomes one extent without reading or rewriting the
 * rest of the file; wbuf.c puts them and keeps each inode's write buffer,
 * which gathers small contiguous writes into one extent.  A large write is
 * put at once from the request's memory.
 *
 * Read path.  Reads assemble the extents over their range into a
 * per-thread buffer (no allocation per request), fetching only the checksum
 * blocks they touch, and are answered with fuse_reply_buf() from it; bytes
 * still in the write buffer are laid over what is stored.  Sequential
 * readers get the next chunk-sized windows prefetched (readahead.c), and a
 * window being loaded by another thread is waited for, not fetched twice.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "extent.h"
#include "internal.h"
#include "log.h"

static struct inode *fh_inode(const struct fuse_file_info *fi)
{
	return (struct inode *)(uintptr_t)(fi->fh & ~FS_FH_WRITE);
}

/*
 * Truncate ip to 0 for open(O_TRUNC), as one batch with its times and the
 * set-id bits the caller of req may not keep (ip held by the caller, fs->mu not held).  The
 * filesystem takes FUSE_CAP_ATOMIC_O_TRUNC (libfuse's default), so the kernel sends no setattr of
 * its own: the truncation is ours to do, before the open is answered.  Bytes still in the write
 * buffer lie beyond the new end and are dropped with the stored ones.
 */
static int open_truncate(fuse_req_t req, struct mwfs *fs, struct inode *ip)
{
	int rc = engine_wait_room(fs_eng(fs, ip->ino), FS_META_ROOM);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&ip->dlock);
	wbuf_drop(&ip->wb);
	struct engine_batch *b = NULL;
	uint64_t removed = 0;
	rc = file_truncate_prepare(fs, ip, 0, &b, &removed);
	if (!rc) {
		mw_mutex_lock(&fs->mu);
		struct inode_tx tx;
		inode_tx_begin_on(fs, &tx, b);
		inode_tx_add(&tx, ip);
		file_truncate_locked(fs, ip, 0, removed);
		fs_touch(&ip->a, false, true, true);
		/* the kernel's own truncate would drop them; it sends no setattr here */
		ip->a.mode = fs_kill_suidgid(req, ip->a.mode, ip->a.gid, false);
		rc = inode_tx_commit(&tx, 0);
		mw_mutex_unlock(&fs->mu);
	}
	pthread_rwlock_unlock(&ip->dlock);
	return rc;
}

void file_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = NULL;
	bool trunc = fi->flags & O_TRUNC;
	int rc;
	if ((fi->flags & O_ACCMODE) != O_RDONLY || trunc)
		fs_want_write(fs, ino); /* a following mount takes the region if it can */
	struct fs_region *r = fs_region_of(fs, ino);
	bool follows = r && r->ff; /* r->ff changes only while no request runs (mode.c) */
	mw_mutex_lock(&fs->mu);
	/* holds a reference until inode_put; a follower's removed file keeps its last state */
	do
		rc = follows ? inode_get_removed(fs, ino, &ip) : inode_get(fs, ino, &ip);
	while (fs_miss_retry(fs, &rc));
	if (rc)
		ip = NULL;
	else if (S_ISDIR(ip->a.mode))
		rc = -EISDIR;
	else if ((fi->flags & O_ACCMODE) != O_RDONLY || trunc)
		rc = fs_writable(fs, ino); /* -EROFS, or EIO once fenced */
	trunc = trunc && ip && S_ISREG(ip->a.mode);
	mw_mutex_unlock(&fs->mu);
	if (!rc && trunc)
		rc = open_truncate(req, fs, ip);
	mw_mutex_lock(&fs->mu);
	if (!rc)
		ip->nopen++;
	if (ip)
		inode_put(fs, ip);
	mw_mutex_unlock(&fs->mu);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	fi->fh = fs_fh(ip, fi->flags);
	if (follows && !fs->o.follow_page_cache) {
		/*
		 * A follower: every read() reaches us and is answered whole from one state
		 * of the writer (file_read()).  Through the page cache the kernel would cut
		 * or pad our bytes to the size it fetched before them, which the writer may
		 * have changed in between (docs/FOLLOWERS.md, "Reads").
		 */
		fi->direct_io = 1;
	} else {
		fi->keep_cache = 1; /* one writer: the page cache stays valid */
	}
	fuse_reply_open(req, fi);
}

/*
 * Read up to size bytes at off of ip into buf (ip->dlock held, shared or
 * exclusive; fs->mu not held); *len gets the count (short at the end of the
 * file).  Bytes still in the write buffer are laid over the stored ones.  A
 * file a follower's writer removed is read in its last state (ip->seq,
 * follow.c refresh()).
 */
static int read_locked(struct mwfs *fs, struct inode *ip, uint64_t off, size_t size, uint8_t *buf,
                       size_t *len)
{
	int rc = 0;
	struct fs_region *r = fs_region_of(fs, ip->ino);
	mw_mutex_lock(&fs->mu);
	uint64_t fsize = ip->a.size;
	uint64_t at = r && r->ff && ip->gone ? ip->seq : 0;
	mw_mutex_unlock(&fs->mu);
	*len = 0;
	if (off < fsize)
		*len = fsize - off < size ? (size_t)(fsize - off) : size;
	ra_note_read(fs->ra, ip, off, *len, fsize);
	const struct wbuf *w = &ip->wb;
	for (size_t pos = 0; pos < *len && !rc;) {
		/* one load per chunk-sized window: wait for a prefetch or reader already on it */
		uint64_t o = off + pos;
		uint64_t idx = o / fs->cs;
		size_t n = fs->cs - o % fs->cs < *len - pos ? fs->cs - o % fs->cs : *len - pos;
		int slot = ra_begin(fs->ra, ip->ino, idx);
		rc = ext_read(fs, ip->ino, at, o, buf + pos, n, false);
		ra_end(fs->ra, slot);
		pos += n;
	}
	if (!rc)
		wbuf_overlay(w, off, buf, *len); /* the buffered bytes over the stored ones */
	return rc;
}

void file_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	uint8_t *buf = fs_tls_buf(fs, size);
	size_t len = 0;
	(void)ino;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	struct fsfollow_read fr;
	int rc;
	fsfollow_read_begin(fs, ip->ino, &fr);
	do {
		pthread_rwlock_rdlock(&ip->dlock);
		rc = read_locked(fs, ip, (uint64_t)off, size, buf, &len);
		pthread_rwlock_unlock(&ip->dlock);
	} while (!fsfollow_read_done(&fr));
	if (rc == -ESTALE && fr.ff)
		fuse_reply_err(req, ESTALE); /* a removed file's last state is no longer held */
	else if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_buf(req, (const char *)buf, len);
}

/*
 * Write size bytes of buf at off into ip (ip->dlock exclusive, fs->mu not
 * held); *done gets the bytes written before an error, if any.
 */
static int write_locked(struct mwfs *fs, struct inode *ip, const uint8_t *buf, size_t size,
                        uint64_t off, size_t *done)
{
	size_t pos = 0;
	int rc = 0;
	while (pos < size && !rc) {
		uint64_t o = off + pos;
		uint32_t n = size - pos < fs->cs ? (uint32_t)(size - pos) : fs->cs;
		/* a large write that joins no run is put at once from the request's memory */
		bool direct = n >= fs->cs / 2 && !wbuf_absorbs(&ip->wb, fs->cs, o, n);
		if (direct && ip->wb.active) {
			rc = data_flush(fs, ip); /* the earlier bytes go first */
			if (rc)
				break;
		}
		mw_mutex_lock(&fs->mu);
		if (o + n > ip->a.size)
			ip->a.size = o + n;
		if (!fs->writeback) /* with the writeback cache the kernel sets the times */
			fs_touch(&ip->a, false, true, true);
		mw_mutex_unlock(&fs->mu);
		if (direct)
			rc = data_put(fs, ip, o, buf + pos, n);
		else
			rc = data_write(fs, ip, o, buf + pos, n);
		if (!rc)
			pos += n;
	}
	*done = pos;
	return rc;
}

void file_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	size_t pos = 0;
	(void)ino;
	int rc = fs_writable(fs, ip->ino);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	if (off < 0 || (uint64_t)off + size < (uint64_t)off) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	pthread_rwlock_wrlock(&ip->dlock);
	rc = write_locked(fs, ip, (const uint8_t *)buf, size, (uint64_t)off, &pos);
	pthread_rwlock_unlock(&ip->dlock);
	uint64_t inum = ip->ino; /* ip may go once the write is answered */
	if (rc && pos == 0)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_write(req, pos);
	if (pos && (fi->flags & O_DIRECT)) /* buffered readers may have cached old pages */
		fsnotify_inode(fs->nf, inum, (uint64_t)off, pos);
}

/* Lock a and b exclusive (one lock when they are the same), lower inode first. */
static void lock_pair(struct inode *a, struct inode *b)
{
	if (a == b) {
		pthread_rwlock_wrlock(&a->dlock);
		return;
	}
	struct inode *first = a->ino < b->ino ? a : b, *second = a->ino < b->ino ? b : a;
	pthread_rwlock_wrlock(&first->dlock);
	pthread_rwlock_wrlock(&second->dlock);
}

static void unlock_pair(struct inode *a, struct inode *b)
{
	pthread_rwlock_unlock(&a->dlock);
	if (a != b)
		pthread_rwlock_unlock(&b->dlock);
}

/* Bytes of the destination that one copy_file_range batch covers. */
#define COPY_PIECE (256ull << 20)

/*
 * copy_file_range: the destination's extents refer to the source's stored
 * bytes (ext_share()): no byte is read or written, a copy of any size costs
 * one extent record per source extent.  Both data locks are held (lower
 * inode first); both write buffers are put first.  The kernel has already
 * rejected overlapping ranges of one file, written back the page cache of
 * both ranges and drops the destination's after the reply.
 */
void file_copy_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                     fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                     int flags)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *src = fh_inode(fi_in), *dst = fh_inode(fi_out);
	uint64_t copied = 0;
	(void)ino_in;
	(void)ino_out;
	int rc = fs_writable(fs, dst->ino); /* -EROFS, or EIO once fenced */
	/* the destination's extents would name blobs of the source region's engine */
	if (!rc && fs_ino_rid(src->ino) != fs_ino_rid(dst->ino))
		rc = -EXDEV; /* the kernel copies the bytes itself */
	if (!rc && flags)
		rc = -EINVAL;
	else if (!rc && (off_in < 0 || off_out < 0 || (uint64_t)off_out + len < (uint64_t)off_out ||
	                 (uint64_t)off_in + len < (uint64_t)off_in))
		rc = -EINVAL;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	lock_pair(src, dst);
	rc = data_flush(fs, src);
	if (!rc)
		rc = data_flush(fs, dst);
	mw_mutex_lock(&fs->mu);
	uint64_t ssize = src->a.size;
	mw_mutex_unlock(&fs->mu);
	uint64_t total = (uint64_t)off_in < ssize ? ssize - (uint64_t)off_in : 0;
	if (total > len)
		total = len;
	while (!rc && copied < total) {
		uint64_t n = total - copied < COPY_PIECE ? total - copied : COPY_PIECE;
		uint64_t so = (uint64_t)off_in + copied, dof = (uint64_t)off_out + copied;
		uint64_t removed = 0, added = 0;
		rc = engine_wait_room(fs_eng(fs, dst->ino), FS_META_ROOM);
		struct engine_batch *b = NULL;
		if (!rc)
			rc = fs_batch(fs, dst->ino, &b);
		if (!rc)
			rc = ext_clear(fs, b, dst, dof, dof + n, &removed);
		if (!rc)
			rc = ext_share(fs, b, src->ino, so, n, dst->ino, dof, &added);
		if (rc)
			break;
		mw_mutex_lock(&fs->mu);
		struct inode_tx tx;
		inode_tx_begin_on(fs, &tx, b);
		inode_tx_add(&tx, dst);
		if (dof + n > dst->a.size)
			dst->a.size = dof + n;
		if (dst->rec_size < dof + n)
			dst->rec_size = dof + n;
		dst->a.stored -= removed < dst->a.stored ? removed : dst->a.stored;
		dst->a.stored += added;
		fs_touch(&dst->a, false, true, true);
		rc = inode_tx_commit(&tx, 0);
		mw_mutex_unlock(&fs->mu);
		if (!rc)
			copied += n;
	}
	unlock_pair(src, dst);
	if (rc && copied == 0)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_write(req, (size_t)copied);
}

void file_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = data_flush(fs, ip);
	pthread_rwlock_unlock(&ip->dlock);
	mw_mutex_lock(&fs->mu);
	uint64_t t = ip->ticket;
	mw_mutex_unlock(&fs->mu);
	/* once the writer stopped (fenced), a close of a handle opened for writing fails
	   (what the kernel wrote back through it may have been refused), and so does one
	   of a file whose last change will never be committed (every write is settled) */
	struct engine *e = fs_eng(fs, ip->ino);
	if (!rc && (fi->fh & FS_FH_WRITE))
		rc = engine_write_error(e);
	if (!rc && t && engine_write_error(e))
		rc = engine_wait(e, t, false);
	fuse_reply_err(req, fs_err(rc));
}

void file_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = fs_region_writes(fs, ip->ino) ? data_flush(fs, ip) : 0;
	mw_mutex_lock(&fs->mu);
	bool last = ip->nopen == 1;
	mw_mutex_unlock(&fs->mu);
	if (last && !ip->wb.active)
		wbuf_release(&ip->wb);
	pthread_rwlock_unlock(&ip->dlock);
	mw_mutex_lock(&fs->mu);
	ip->refs++;
	ip->nopen--;
	inode_put(fs, ip); /* may queue the reclaim of an unlinked file */
	mw_mutex_unlock(&fs->mu);
	fuse_reply_err(req, fs_err(rc));
}

void file_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	(void)datasync; /* data and its inode record travel in the same batches */
	struct fs_region *r = fs_region_of(fs, ip->ino);
	if (!r || !r->writer) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = data_flush(fs, ip);
	pthread_rwlock_unlock(&ip->dlock);
	mw_mutex_lock(&fs->mu);
	uint64_t t = ip->ticket;
	mw_mutex_unlock(&fs->mu);
	if (!rc)
		rc = t ? engine_wait(r->e, t, true) : engine_sync(r->e);
	fuse_reply_err(req, fs_err(rc));
}

int file_truncate_prepare(struct mwfs *fs, struct inode *ip, uint64_t size, struct engine_batch **b,
                          uint64_t *removed)
{
	int rc = fs_batch(fs, ip->ino, b);
	if (rc)
		return rc;
	mw_mutex_lock(&fs->mu);
	bool shrink = size < ip->a.size || size < ip->rec_size;
	mw_mutex_unlock(&fs->mu);
	return shrink ? ext_clear(fs, *b, ip, size, UINT64_MAX, removed) : 0;
}

void file_truncate_locked(struct mwfs *fs, struct inode *ip, uint64_t size, uint64_t removed)
{
	mw_mutex_assert_held(&fs->mu);
	ip->a.size = size;
	ip->rec_size = size;
	ip->a.stored -= removed < ip->a.stored ? removed : ip->a.stored;
}

void file_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                    struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	int rc = fs_writable(fs, ip->ino); /* -EROFS, or EIO once fenced */
	if (!rc && (off < 0 || len <= 0))
		rc = -EINVAL;
	else if (!rc && (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)))
		rc = -EOPNOTSUPP;
	else if (!rc && (mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		rc = -EOPNOTSUPP;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	uint64_t end = (uint64_t)off + (uint64_t)len;
	rc = engine_wait_room(fs_eng(fs, ip->ino), FS_META_ROOM);
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	pthread_rwlock_wrlock(&ip->dlock);
	rc = data_flush(fs, ip);
	struct engine_batch *b = NULL;
	uint64_t removed = 0, added = 0;
	if (!rc)
		rc = fs_batch(fs, ip->ino, &b);
	if (!rc && (mode & FALLOC_FL_PUNCH_HOLE)) {
		/*
		 * The extents and allocated ranges inside go (past the end of the file too: a
		 * KEEP_SIZE allocation), those across an edge keep their outside part.
		 */
		rc = ext_clear(fs, b, ip, (uint64_t)off, end, &removed);
	} else if (!rc) {
		/*
		 * What no extent holds becomes allocated ranges: counted in st_blocks, read as
		 * zeros.  Nothing is reserved (an object store), but an allocation beyond the
		 * available space fails as on a disk.
		 */
		struct fs_space sp;
		rc = ext_alloc(fs, b, ip, (uint64_t)off, end, &added);
		fs_space(fs, &sp);
		if (!rc && added > sp.avail)
			rc = -ENOSPC;
	}
	mw_mutex_lock(&fs->mu);
	struct inode_tx tx;
	if (rc)
		goto out;
	inode_tx_begin_on(fs, &tx, b);
	inode_tx_add(&tx, ip);
	ip->a.stored -= removed < ip->a.stored ? removed : ip->a.stored;
	ip->a.stored += added;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		fs_touch(&ip->a, false, true, true);
	} else if (!(mode & FALLOC_FL_KEEP_SIZE) && end > ip->a.size) {
		ip->a.size = end;
		ip->rec_size = end;
		fs_touch(&ip->a, false, false, true);
	} else if (!added) {
		goto out; /* nothing to record */
	}
	rc = inode_tx_commit(&tx, 0);
out:
	mw_mutex_unlock(&fs->mu);
	pthread_rwlock_unlock(&ip->dlock);
	fuse_reply_err(req, fs_err(rc));
}

void file_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	if (whence != SEEK_DATA && whence != SEEK_HOLE) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (fs->writeback) {
		/*
		 * The kernel sends FUSE_LSEEK without writing its dirty pages
		 * back first, so the daemon's view misses them (cp of a log being
		 * appended would copy its unflushed tail as a hole).  ENOSYS makes
		 * the kernel answer from i_size for the rest of the mount: all
		 * data, no holes, which is always correct.
		 */
		fuse_reply_err(req, ENOSYS);
		return;
	}
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = fs_region_writes(fs, ip->ino) ? data_flush(fs, ip) : 0;
	mw_mutex_lock(&fs->mu);
	uint64_t size = ip->a.size;
	mw_mutex_unlock(&fs->mu);
	uint64_t pos = 0;
	if (!rc && (off < 0 || (uint64_t)off >= size))
		rc = -ENXIO;
	if (rc)
		goto out;
	rc = ext_seek(fs, ip->ino, (uint64_t)off, size, whence == SEEK_DATA, &pos);
out:
	pthread_rwlock_unlock(&ip->dlock);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_lseek(req, (off_t)pos);
}
