/*
 * file.c - file data: open, read, write, flush, release, fsync,
 * truncation, fallocate (allocate, punch hole), lseek (SEEK_DATA/HOLE) and
 * copy_file_range.
 *
 * Data lives in chunks (key 'C' ino index, at most chunk_size bytes; an
 * absent chunk is a hole): wbuf.c reads and puts them and keeps each
 * inode's write buffer.  A write covering a whole chunk is put at once from
 * the request's memory; smaller writes gather in the buffer.
 *
 * Read path.  Reads go straight to engine_get_range() into a per-thread
 * buffer (no allocation per request) and are answered with fuse_reply_buf()
 * from it; bytes still in the write buffer are laid over what is stored.
 * Sequential readers get the next chunks prefetched (readahead.c), and a
 * chunk being loaded by another thread is waited for, not fetched twice.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"
#include "log.h"

static struct inode *fh_inode(const struct fuse_file_info *fi)
{
	return (struct inode *)(uintptr_t)fi->fh;
}

/*
 * Truncate ip to 0 for open(O_TRUNC), as one batch with its times (ip held by
 * the caller, fs->mu not held).  The filesystem takes FUSE_CAP_ATOMIC_O_TRUNC
 * (libfuse's default), so the kernel sends no setattr of its own: the
 * truncation is ours to do, before the open is answered.  Bytes still in the
 * write buffer lie beyond the new end and are dropped with the stored ones.
 */
static int open_truncate(struct mwfs *fs, struct inode *ip)
{
	int rc = engine_wait_room(fs->e, FS_META_ROOM);
	if (rc)
		return rc;
	pthread_rwlock_wrlock(&ip->dlock);
	wbuf_drop(&ip->wb);
	mw_mutex_lock(&fs->mu);
	struct inode_tx tx;
	rc = inode_tx_begin(fs, &tx);
	if (!rc) {
		inode_tx_add(&tx, ip);
		rc = file_truncate_locked(fs, ip, tx.b, 0);
		if (!rc)
			fs_touch(&ip->a, false, true, true);
		rc = inode_tx_commit(&tx, rc);
	}
	mw_mutex_unlock(&fs->mu);
	pthread_rwlock_unlock(&ip->dlock);
	return rc;
}

void file_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = NULL;
	bool trunc = fi->flags & O_TRUNC;
	mw_mutex_lock(&fs->mu);
	int rc = inode_get(fs, ino, &ip); /* holds a reference until inode_put */
	if (rc)
		ip = NULL;
	else if (S_ISDIR(ip->a.mode))
		rc = -EISDIR;
	else if (fs->o.read_only && ((fi->flags & O_ACCMODE) != O_RDONLY || trunc))
		rc = -EROFS;
	trunc = trunc && ip && S_ISREG(ip->a.mode);
	mw_mutex_unlock(&fs->mu);
	if (!rc && trunc)
		rc = open_truncate(fs, ip);
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
	fi->fh = (uintptr_t)ip;
	fi->keep_cache = 1; /* one writer: the page cache stays valid */
	fuse_reply_open(req, fi);
}

/*
 * Read up to size bytes at off of ip into buf (ip->dlock held, shared or
 * exclusive; fs->mu not held); *len gets the count (short at the end of the
 * file).  Bytes still in the write buffer are laid over the stored ones.
 */
static int read_locked(struct mwfs *fs, struct inode *ip, uint64_t off, size_t size, uint8_t *buf,
                       size_t *len)
{
	int rc = 0;
	mw_mutex_lock(&fs->mu);
	uint64_t fsize = ip->a.size;
	mw_mutex_unlock(&fs->mu);
	*len = 0;
	if (off < fsize)
		*len = fsize - off < size ? (size_t)(fsize - off) : size;
	ra_note_read(fs->ra, ip, off, *len, fsize);
	const struct wbuf *w = &ip->wb;
	for (size_t pos = 0; pos < *len && !rc;) {
		uint64_t o = off + pos;
		uint64_t idx = o / fs->cs;
		uint32_t co = (uint32_t)(o % fs->cs);
		size_t n = fs->cs - co < *len - pos ? fs->cs - co : *len - pos;
		if (w->active && w->idx == idx && w->base) {
			memcpy(buf + pos, w->data + co, n);
		} else {
			/* one load per chunk: wait for a prefetch or reader already on it */
			int slot = ra_begin(fs->ra, ip->ino, idx);
			rc = chunk_read(fs, ip->ino, idx, co, buf + pos, n, false);
			ra_end(fs->ra, slot);
			if (!rc && w->active && w->idx == idx) {
				/* lay the buffered bytes over the stored ones */
				uint32_t a = co > w->lo ? co : w->lo;
				uint32_t b = co + n < w->hi ? (uint32_t)(co + n) : w->hi;
				if (a < b)
					memcpy(buf + pos + (a - co), w->data + a, b - a);
			}
		}
		pos += n;
	}
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
	pthread_rwlock_rdlock(&ip->dlock);
	int rc = read_locked(fs, ip, (uint64_t)off, size, buf, &len);
	pthread_rwlock_unlock(&ip->dlock);
	if (rc)
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
		uint64_t idx = o / fs->cs;
		uint32_t co = (uint32_t)(o % fs->cs);
		uint32_t n = fs->cs - co < size - pos ? fs->cs - co : (uint32_t)(size - pos);
		if (ip->wb.active && ip->wb.idx != idx) {
			rc = wbuf_flush(fs, ip);
			if (rc)
				break;
		}
		mw_mutex_lock(&fs->mu);
		if (o + n > ip->a.size)
			ip->a.size = o + n;
		if (!fs->writeback) /* with the writeback cache the kernel sets the times */
			fs_touch(&ip->a, false, true, true);
		mw_mutex_unlock(&fs->mu);
		if (co == 0 && n == fs->cs) {
			if (ip->wb.active) /* same chunk, wholly overwritten */
				ip->wb.active = false;
			rc = chunk_put(fs, ip, idx, buf + pos, n);
		} else {
			rc = wbuf_write(fs, ip, idx, co, buf + pos, n);
		}
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
	if (fs->o.read_only) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (off < 0 || (uint64_t)off + size < (uint64_t)off) {
		fuse_reply_err(req, EFBIG);
		return;
	}
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = write_locked(fs, ip, (const uint8_t *)buf, size, (uint64_t)off, &pos);
	pthread_rwlock_unlock(&ip->dlock);
	if (rc && pos == 0)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_write(req, pos);
}

/*
 * copy_file_range: the bytes move inside the daemon, one chunk-sized piece
 * at a time (read from the source under its lock, written to the
 * destination under its own: never both locks at once), so cp of a big
 * file costs no kernel round trips per page.  Stored blobs are not shared
 * between files (a put of the same bytes is a new blob), so the copy is
 * not free, only cheaper.  The kernel has already rejected overlapping
 * ranges of one file and written back the page cache of both ranges.
 */
void file_copy_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
                     fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
                     int flags)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *src = fh_inode(fi_in), *dst = fh_inode(fi_out);
	size_t copied = 0;
	uint8_t *buf = NULL;
	int rc = 0;
	(void)ino_in;
	(void)ino_out;
	if (fs->o.read_only)
		rc = -EROFS;
	else if (flags)
		rc = -EINVAL;
	else if (off_in < 0 || off_out < 0 || (uint64_t)off_out + len < (uint64_t)off_out)
		rc = -EINVAL;
	else if (!(buf = malloc(fs->cs)))
		rc = -ENOMEM;
	while (!rc && copied < len) {
		size_t want = len - copied < fs->cs ? len - copied : fs->cs, got = 0, put = 0;
		/* pieces aligned to the destination's chunks become whole-chunk puts */
		uint64_t o = (uint64_t)off_out + copied;
		if (want > fs->cs - o % fs->cs)
			want = fs->cs - o % fs->cs;
		pthread_rwlock_rdlock(&src->dlock);
		rc = read_locked(fs, src, (uint64_t)off_in + copied, want, buf, &got);
		pthread_rwlock_unlock(&src->dlock);
		if (rc || got == 0)
			break; /* an error, or the end of the source */
		pthread_rwlock_wrlock(&dst->dlock);
		rc = write_locked(fs, dst, buf, got, o, &put);
		pthread_rwlock_unlock(&dst->dlock);
		copied += put;
		if (got < want)
			break;
	}
	free(buf);
	if (rc && copied == 0)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_write(req, copied);
}

void file_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = wbuf_flush(fs, ip);
	pthread_rwlock_unlock(&ip->dlock);
	fuse_reply_err(req, fs_err(rc));
}

void file_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = fs->o.read_only ? 0 : wbuf_flush(fs, ip);
	mw_mutex_lock(&fs->mu);
	bool last = ip->nopen == 1;
	mw_mutex_unlock(&fs->mu);
	if (last && !ip->wb.active)
		wbuf_release(&ip->wb);
	pthread_rwlock_unlock(&ip->dlock);
	mw_mutex_lock(&fs->mu);
	ip->refs++;
	ip->nopen--;
	inode_put(fs, ip); /* may reclaim an unlinked file */
	mw_mutex_unlock(&fs->mu);
	fuse_reply_err(req, fs_err(rc));
}

void file_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	(void)datasync; /* data and its inode record travel in the same batches */
	if (fs->o.read_only) {
		fuse_reply_err(req, 0);
		return;
	}
	pthread_rwlock_wrlock(&ip->dlock);
	int rc = wbuf_flush(fs, ip);
	pthread_rwlock_unlock(&ip->dlock);
	mw_mutex_lock(&fs->mu);
	uint64_t t = ip->ticket;
	mw_mutex_unlock(&fs->mu);
	if (!rc)
		rc = t ? engine_wait(fs->e, t, true) : engine_sync(fs->e);
	fuse_reply_err(req, fs_err(rc));
}

int file_cut_warm(struct mwfs *fs, uint64_t ino, uint64_t off)
{
	if (off % fs->cs == 0)
		return 0; /* a cut on a chunk boundary deletes whole chunks: nothing to read */
	uint8_t key[SCHEMA_KEY_MAX];
	size_t kn = schema_key_chunk(key, ino, off / fs->cs);
	int rc = fs_warm_key(fs, key, kn);
	return rc == -ENOENT ? 0 : rc;
}

/*
 * Queue deletion (or zeroing) of the stored bytes of ip in [from, to) into
 * b (fs->mu held, dlock exclusive, buffer flushed).  to UINT64_MAX: to the
 * end.  A chunk partly inside is rewritten with the range zeroed (or cut,
 * when cut is true and the range reaches its end).
 */
static int clear_range(struct mwfs *fs, struct inode *ip, struct engine_batch *b, uint64_t from,
                       uint64_t to, bool cut)
{
	mw_mutex_assert_held(&fs->mu);
	uint8_t key[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	uint64_t first = from / fs->cs;
	size_t kn = schema_key_chunk(key, ip->ino, first);
	size_t en;
	if (to == UINT64_MAX || (to - 1) / fs->cs == UINT64_MAX) {
		uint8_t pfx[SCHEMA_KEY_MAX];
		size_t pn = schema_key_chunk_prefix(pfx, ip->ino);
		en = schema_prefix_end(pfx, pn, end);
	} else {
		en = schema_key_chunk(end, ip->ino, (to - 1) / fs->cs + 1);
	}
	struct tls *t = fs_tls(fs);
	if (!t)
		return -ENOMEM;
	struct engine_iter *it = NULL;
	int rc;
	for (rc = engine_iter_new(fs->e, key, kn, end, en, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t n, vn;
		const uint8_t *k = engine_iter_key(it, &n);
		uint64_t idx = schema_key_u64(k, n, 9);
		uint64_t cstart = idx * fs->cs;
		uint64_t a = from > cstart ? from - cstart : 0;
		uint64_t z = to - cstart < fs->cs ? to - cstart : fs->cs;
		if (to == UINT64_MAX)
			z = fs->cs;
		if (a == 0 && z == fs->cs) {
			rc = engine_batch_delete(b, k, n);
			continue;
		}
		const void *v;
		rc = engine_iter_value(it, &v, &vn);
		if (rc)
			break;
		if (vn <= a)
			continue; /* nothing stored in the range */
		memcpy(t->chunk, v, vn);
		size_t nlen = vn;
		if (cut && z == fs->cs)
			nlen = (size_t)a;
		else
			memset(t->chunk + a, 0, (z < vn ? z : vn) - a);
		if (fs_all_zero(t->chunk, nlen))
			rc = engine_batch_delete(b, k, n);
		else
			rc = engine_batch_put(b, k, n, t->chunk, nlen);
	}
	if (!rc)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	return rc;
}

int file_truncate_locked(struct mwfs *fs, struct inode *ip, struct engine_batch *b, uint64_t size)
{
	mw_mutex_assert_held(&fs->mu);
	int rc = 0;
	if (size < ip->a.size || size < ip->rec_size)
		rc = clear_range(fs, ip, b, size, UINT64_MAX, true);
	if (rc)
		return rc;
	ip->a.size = size;
	ip->rec_size = size;
	return 0;
}

void file_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
                    struct fuse_file_info *fi)
{
	struct mwfs *fs = fuse_req_userdata(req);
	struct inode *ip = fh_inode(fi);
	(void)ino;
	int rc = 0;
	if (fs->o.read_only)
		rc = -EROFS;
	else if (off < 0 || len <= 0)
		rc = -EINVAL;
	else if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE))
		rc = -EOPNOTSUPP;
	else if ((mode & FALLOC_FL_PUNCH_HOLE) && !(mode & FALLOC_FL_KEEP_SIZE))
		rc = -EOPNOTSUPP;
	if (rc) {
		fuse_reply_err(req, fs_err(rc));
		return;
	}
	uint64_t end = (uint64_t)off + (uint64_t)len;
	if (!(mode & FALLOC_FL_PUNCH_HOLE)) {
		/*
		 * Nothing is reserved (an object store), but an allocation beyond the free space
		 * fails as on a disk: the bytes past the end of the file count (holes inside it
		 * are not looked for).
		 */
		uint64_t cap, used, size;
		fs_space(fs, &cap, &used);
		mw_mutex_lock(&fs->mu);
		size = ip->a.size;
		mw_mutex_unlock(&fs->mu);
		uint64_t from = (uint64_t)off > size ? (uint64_t)off : size;
		if (end > from && end - from > cap - used) {
			fuse_reply_err(req, ENOSPC);
			return;
		}
	}
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		rc = engine_wait_room(fs->e, FS_META_ROOM + 2 * fs->cs);
		if (!rc)
			rc = file_cut_warm(fs, ip->ino, (uint64_t)off);
		if (!rc)
			rc = file_cut_warm(fs, ip->ino, end);
		if (rc) {
			fuse_reply_err(req, fs_err(rc));
			return;
		}
	}
	pthread_rwlock_wrlock(&ip->dlock);
	rc = wbuf_flush(fs, ip);
	mw_mutex_lock(&fs->mu);
	struct schema_inode saved = ip->a;
	uint64_t saved_rec = ip->rec_size;
	struct engine_batch *b = fs_batch(fs);
	if (!rc && !b)
		rc = -ENOMEM;
	if (rc)
		goto out;
	if (mode & FALLOC_FL_PUNCH_HOLE) {
		uint64_t to = end < ip->a.size ? end : ip->a.size;
		if ((uint64_t)off < to)
			rc = clear_range(fs, ip, b, (uint64_t)off, to, false);
		fs_touch(&ip->a, false, true, true);
	} else if (!(mode & FALLOC_FL_KEEP_SIZE) && end > ip->a.size) {
		/* space is not reserved in an object store: only the size grows */
		ip->a.size = end;
		ip->rec_size = end;
		fs_touch(&ip->a, false, false, true);
	} else {
		goto out; /* nothing to record */
	}
	if (!rc)
		rc = inode_batch_put(fs, b, ip);
	if (!rc)
		rc = inode_commit(fs, b, &ip, 1);
	if (rc) {
		ip->a = saved;
		ip->rec_size = saved_rec;
	}
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
	int rc = fs->o.read_only ? 0 : wbuf_flush(fs, ip);
	mw_mutex_lock(&fs->mu);
	uint64_t size = ip->a.size;
	mw_mutex_unlock(&fs->mu);
	uint64_t pos = 0;
	if (!rc && (off < 0 || (uint64_t)off >= size))
		rc = -ENXIO;
	if (rc)
		goto out;
	uint8_t key[SCHEMA_KEY_MAX], pfx[SCHEMA_KEY_MAX], end[SCHEMA_KEY_MAX];
	uint64_t expect = (uint64_t)off / fs->cs;
	size_t kn = schema_key_chunk(key, ip->ino, expect);
	size_t pn = schema_key_chunk_prefix(pfx, ip->ino);
	size_t en = schema_prefix_end(pfx, pn, end);
	struct engine_iter *it = NULL;
	bool found = false;
	for (rc = engine_iter_new(fs->e, key, kn, end, en, &it); !rc && engine_iter_valid(it);
	     engine_iter_next(it)) {
		size_t n;
		const uint8_t *k = engine_iter_key(it, &n);
		uint64_t idx = schema_key_u64(k, n, 9);
		if (whence == SEEK_DATA) {
			pos = idx * fs->cs;
			found = true;
			break;
		}
		if (idx != expect)
			break; /* a missing chunk: the hole */
		expect++;
	}
	if (!rc)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	if (rc)
		goto out;
	if (whence == SEEK_DATA) {
		if (!found || pos >= size)
			rc = -ENXIO;
		else if (pos < (uint64_t)off)
			pos = (uint64_t)off;
	} else {
		pos = expect * fs->cs;
		if (pos < (uint64_t)off)
			pos = (uint64_t)off;
		if (pos > size)
			pos = size;
	}
out:
	pthread_rwlock_unlock(&ip->dlock);
	if (rc)
		fuse_reply_err(req, fs_err(rc));
	else
		fuse_reply_lseek(req, (off_t)pos);
}
