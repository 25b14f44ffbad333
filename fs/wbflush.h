/*
 * wbflush.h - the write-buffer flusher: puts a file's partly written chunk
 * into the engine once it has held unwritten bytes for flush_ms, so that
 * what the daemon has received is committed within about two cadence
 * intervals even while the file stays open and no one calls fsync.
 */
#ifndef MEMWALFS_FS_WBFLUSH_H
#define MEMWALFS_FS_WBFLUSH_H

struct mwfs;
struct inode;
struct wbflush;

/* Start the flusher thread (every ms milliseconds).  *out only on success. */
int wbflush_start(struct mwfs *fs, unsigned ms, struct wbflush **out);

/*
 * Note that ip's write buffer just started holding unwritten bytes
 * (ip->dlock held exclusive, fs->mu not held).  Takes a reference on ip
 * until the flusher has seen the buffer empty.  Accepts a NULL flusher.
 */
void wbflush_note(struct wbflush *wf, struct inode *ip);

/* Stop the thread and drop every reference it holds (fs->mu not held). Accepts NULL. */
void wbflush_stop(struct wbflush *wf);

#endif /* MEMWALFS_FS_WBFLUSH_H */
