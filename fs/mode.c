/*
 * mode.c - a read-write mount that follows a region, and its switch to writing it.
 *
 * Each region of the mount's table (region.c) is written by this mount or followed.  A
 * read-write mount of a region that another live mount holds (docs/REGIONS.md, "Holders
 * and leases") has the region on a following engine (region->writer false; for region 0
 * the mount starts with fs->o.read_only set, though the kernel mount is read-write):
 * reads are served as on a follower, every change of the region fails with EROFS.
 * fs->o.take is then set: at the first change of the region asked for
 * (fs_want_write(), at the start of each changing request, before it takes any lock),
 * the mount command's hook decides from what it knows of the holder, without store
 * I/O, whether the region can be taken (its holder released it, unmounted, or died and
 * its lease ran out); if so it opens a writer engine on it (the epoch claim, the replay
 * of everything the old holder made durable), and the mount switches the region to that
 * engine without unmounting:
 *
 *   1. the gate every FUSE request passes (pool.c) closes: new requests wait at it,
 *      and the switch waits for those inside to finish (the request that asked for
 *      the take left the gate before calling the hook): the whole mount is quiesced,
 *      whichever region switches;
 *   2. the region's follower hooks stop (follow.c), and the notify thread; read-ahead
 *      pauses;
 *   3. the region's engine becomes the writer engine (region->e, region->writer), the
 *      inode numbers to hand out in it come from its superblock (the old holder's
 *      unused range is skipped, as after a crash);
 *   4. every inode of the region the table holds is read again from the new engine (its
 *      state is at least as new as the follower's: the writer replayed the whole WAL);
 *      one whose record is gone is kept gone with nlink 0, as a follower keeps it;
 *   5. the notify thread starts again as a writer's, is told that everything changed
 *      (the kernel drops what it caches of every inode), the write-buffer flusher
 *      starts, read-ahead goes on, the gate opens;
 *   6. the hook's second half (taken) gets the old engine to close; orphans the old
 *      holder left (files it had open when it died) are reclaimed, except those this
 *      mount has open.
 *
 * The FUSE connection keeps what it negotiated at mount: a mount that began as a
 * follower writes without the kernel's writeback cache until it is mounted again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "log.h"
#include "data.h"
#include "readahead.h"

void fs_gate_init(struct fs_gate *g)
{
	atomic_init(&g->active, 0);
	atomic_init(&g->closing, false);
	mw_mutex_init(&g->mu);
	pthread_cond_init(&g->cv, NULL);
}

void fs_gate_destroy(struct fs_gate *g)
{
	pthread_cond_destroy(&g->cv);
	mw_mutex_destroy(&g->mu);
}

void fs_gate_enter(struct fs_gate *g)
{
	for (;;) {
		/* seq_cst both ways: either the closer sees us counted, or we see it closing */
		atomic_fetch_add(&g->active, 1);
		if (!atomic_load(&g->closing))
			return;
		fs_gate_leave(g);
		mw_mutex_lock(&g->mu);
		while (atomic_load(&g->closing))
			mw_cond_wait(&g->cv, &g->mu);
		mw_mutex_unlock(&g->mu);
	}
}

void fs_gate_leave(struct fs_gate *g)
{
	if (atomic_fetch_sub(&g->active, 1) == 1 && atomic_load(&g->closing)) {
		mw_mutex_lock(&g->mu);
		pthread_cond_broadcast(&g->cv);
		mw_mutex_unlock(&g->mu);
	}
}

/* Close g and wait until no request is inside (the caller is not inside). */
static void gate_close(struct fs_gate *g)
{
	mw_mutex_lock(&g->mu);
	atomic_store(&g->closing, true);
	while (atomic_load(&g->active))
		mw_cond_wait(&g->cv, &g->mu);
	mw_mutex_unlock(&g->mu);
}

static void gate_open(struct fs_gate *g)
{
	mw_mutex_lock(&g->mu);
	atomic_store(&g->closing, false);
	pthread_cond_broadcast(&g->cv);
	mw_mutex_unlock(&g->mu);
}

/* Is any region of fs followed (its hooks running)? */
static bool any_followed(struct mwfs *fs)
{
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (fs->reg[i].ff)
			return true;
	return false;
}

/* Does this mount write any region? */
static bool any_written(struct mwfs *fs)
{
	unsigned n = atomic_load_explicit(&fs->nreg, memory_order_acquire);
	for (unsigned i = 0; i < n; i++)
		if (fs->reg[i].writer)
			return true;
	return false;
}

/*
 * The notify thread of the mount again (stopped: fs->nf NULL), with the follower's refresh
 * hook when follow (a region is followed), told that everything changed.  Started before
 * a region's follower hooks, which queue for it.
 */
static int notify_restart(struct mwfs *fs, bool follow)
{
	int rc = fsnotify_start(fs, follow ? follow_refresh : NULL, &fs->nf);
	if (!rc) {
		fsnotify_session(fs->nf, fs->se);
		fsnotify_all(fs->nf);
	}
	return rc;
}

/*
 * Step 4: every inode of region rid in the table from its engine, which just became
 * another one.  The gate is closed: no request runs, the follower's hooks and read-ahead
 * are stopped, so the records are read without fs->mu (store I/O) and put in under it.
 */
static void refresh_all(struct mwfs *fs, uint32_t rid)
{
	uint64_t *inos = NULL;
	size_t n = 0;

	mw_mutex_lock(&fs->mu);
	inos = malloc((fs->hcount ? fs->hcount : 1) * sizeof(*inos));
	for (size_t i = 0; inos && i < fs->hsize; i++)
		for (struct inode *ip = fs->htab[i]; ip; ip = ip->hnext)
			if (fs_ino_rid(ip->ino) == rid)
				inos[n++] = ip->ino;
	mw_mutex_unlock(&fs->mu);
	if (!inos) {
		log_err("switching engines: no memory to refresh the inode table; "
		        "attributes may be stale until they change");
		return;
	}
	size_t changed = 0, gone = 0;
	for (size_t i = 0; i < n; i++) {
		void *val = NULL;
		size_t vn = 0;
		uint64_t seq;
		int rc = inode_record_get(fs, inos[i], false, &val, &vn, &seq);
		mw_mutex_lock(&fs->mu);
		struct inode *ip = inode_find(fs, inos[i]);
		if (ip && rc == 0) {
			if (inode_record_set(ip, val, vn, 0))
				ip->gone = false;
			changed++;
		} else if (ip && rc == -ENOENT) {
			/* removed by the old holder while this mount held it: kept as removed */
			ip->gone = true;
			ip->a.nlink = 0;
			ip->seq = 0;
			gone++;
		} else if (ip) {
			log_warn("switching engines: inode %llu: %s; its attributes may be "
			         "stale until it changes",
			         (unsigned long long)inos[i], strerror(-rc));
		}
		mw_mutex_unlock(&fs->mu);
		free(val);
	}
	free(inos);
	log_info("switching engines: %zu inodes read again, %zu of them removed", changed, gone);
}

/* Steps 1-5 for region r; returns the engine it used before (the caller closes it). */
static struct engine *switch_to(struct mwfs *fs, struct fs_region *r, struct engine *ne,
                                const struct schema_super *sb)
{
	gate_close(&fs->gate);
	fsfollow_stop(r->ff);
	r->ff = NULL;
	fsnotify_stop(fs->nf);
	fs->nf = NULL;
	ra_pause(fs->ra, true);
	struct engine *old = r->e;
	r->e = ne;
	r->writer = true;
	mw_mutex_lock(&fs->mu);
	r->next_ino = r->ino_limit = sb->next_ino;
	mw_mutex_unlock(&fs->mu);
	refresh_all(fs, r->rid);
	ra_pause(fs->ra, false);
	int rc = notify_restart(fs, any_followed(fs));
	if (rc)
		log_err("switching to the writer: no notify thread (%s): the kernel may keep "
		        "stale attributes until they expire",
		        strerror(-rc));
	rc = fs->wbf ? 0 : data_flusher_start(fs, fs->o.wb_flush_ms, &fs->wbf);
	if (rc)
		log_err("switching to the writer: no write-buffer flusher (%s): partly written "
		        "chunks are put at close or fsync only",
		        strerror(-rc));
	gate_open(&fs->gate);
	return old;
}

/* Take region rid over if the hook can; fs->take_mu serializes takes.  No lock held. */
static int take(struct mwfs *fs, uint32_t rid, bool force)
{
	mw_mutex_lock(&fs->take_mu);
	struct fs_region *r = fs_region_get(fs, rid);
	if (!r || r->writer || !fs->o.take) {
		int rc = !r ? -ENOENT : !r->writer ? -ENOTSUP : engine_write_error(r->e);
		rc = rc ? rc : r->writer ? -EALREADY : -ENOTSUP; /* a fenced writer: its error */
		mw_mutex_unlock(&fs->take_mu);
		return rc;
	}
	struct engine *ne = NULL;
	int rc = fs->o.take(fs->o.take_arg, rid, force, &ne);
	if (rc) {
		mw_mutex_unlock(&fs->take_mu);
		return rc; /* still held (the hook logs who holds it, once) */
	}
	struct schema_super sb;
	rc = fs_read_super(ne, &sb);
	if (rc || sb.chunk_size != fs->cs) {
		/* a store reformatted under us: nothing here refers to the same inodes */
		log_err("taking region %u over: its superblock %s; staying a follower", rid,
		        rc ? strerror(-rc) : "changed (another chunk size)");
		fs->o.taken(fs->o.take_arg, rid, ne, NULL); /* closes the writer: it took nothing */
		mw_mutex_unlock(&fs->take_mu);
		return rc ? rc : -EUCLEAN;
	}
	struct engine *old = switch_to(fs, r, ne, &sb);
	fs->o.taken(fs->o.take_arg, rid, old, ne);
	log_info("this mount writes region %u now (it followed another mount's writes until "
	         "that mount let go of it)",
	         rid);
	mw_mutex_unlock(&fs->take_mu);
	rc = inode_reclaim_orphans(fs); /* skips the ones open here */
	if (rc)
		log_warn("taking the store over: reclaiming orphans: %s (done at the next mount)",
		         strerror(-rc));
	return 0;
}

void fs_want_write(struct mwfs *fs, uint64_t ino)
{
	struct fs_region *r = fs_region_of(fs, ino);
	if (!r || r->writer || !fs->o.take)
		return;
	fs_gate_leave(&fs->gate);
	take(fs, r->rid, false);
	fs_gate_enter(&fs->gate);
}

int fs_take(struct mwfs *fs, uint32_t rid, bool force)
{
	fs_gate_leave(&fs->gate);
	int rc = take(fs, rid, force);
	fs_gate_enter(&fs->gate);
	return rc;
}

/*
 * Lazy discovery of region rid (outside the gate, no lock held): the hook opens its engine
 * (store I/O, under fs->take_mu only, as a take does); the table gets the region with the
 * gate closed, and a followed region its follower hooks, after the notify thread restarted
 * with the follower's refresh hook (started before the hooks, which queue for it).
 */
static void discover(struct mwfs *fs, uint32_t rid)
{
	mw_mutex_lock(&fs->take_mu);
	if (fs_region_get(fs, rid) || !fs->o.region_open) {
		mw_mutex_unlock(&fs->take_mu);
		return;
	}
	struct engine *e = NULL;
	bool writer = false;
	int rc = fs->o.region_open(fs->o.take_arg, rid, &e, &writer);
	if (rc) {
		mw_mutex_unlock(&fs->take_mu);
		if (rc != -ENOENT) /* not in the map: the hook said so, once */
			log_warn("region %u: not opened (%s); its inodes read as missing", rid,
			         strerror(-rc));
		return;
	}
	gate_close(&fs->gate);
	rc = fs_region_add(fs, rid, e, writer);
	struct fs_region *r = rc ? NULL : fs_region_get(fs, rid);
	if (r && !writer) {
		ra_pause(fs->ra, true);
		/*
		 * The notify thread goes on with the refresh hook: stopping it here (the gate
		 * closed) waited for it, and it may be dropping the pages of a file this mount
		 * writes, locked by a write whose request waits at the gate: a deadlock (found by
		 * fs_regions4: a mount writing two regions while a reader met the others').
		 * Nothing is freed here (a region is added), so the thread may run through.
		 */
		rc = 0;
		if (fs->nf)
			fsnotify_follow(fs->nf, follow_refresh);
		else
			rc = notify_restart(fs, true);
		if (!rc)
			rc = fsfollow_start(fs, r, &r->ff);
		if (rc)
			log_err(
			    "region %u: the follower's hooks did not start (%s): the kernel may "
			    "keep stale attributes until they expire",
			    rid, strerror(-rc));
		ra_pause(fs->ra, false);
	} else if (rc) {
		log_err("region %u: %s; its inodes read as missing", rid, strerror(-rc));
	}
	gate_open(&fs->gate);
	mw_mutex_unlock(&fs->take_mu);
	if (r)
		log_info("region %u: %s it from now on", rid, writer ? "writing" : "following");
}

void fs_region_discover(struct mwfs *fs, uint64_t ino)
{
	uint32_t rid = fs_ino_rid(ino);
	if (!ino || fs_region_get(fs, rid) || !fs->o.region_open)
		return;
	fs_gate_leave(&fs->gate);
	discover(fs, rid);
	fs_gate_enter(&fs->gate);
}

/*
 * `region release`: the reverse of switch_to().  Everything taken is put into the writer
 * and made durable first; the hook opens the follower before it closes the writer, so a
 * failure leaves the mount writing as it was.
 */
static int release(struct mwfs *fs, uint32_t rid)
{
	mw_mutex_lock(&fs->take_mu);
	struct fs_region *r = fs_region_get(fs, rid);
	if (!r || !r->writer || !fs->o.release) {
		int rc = !r || !r->writer ? -EINVAL : -ENOTSUP;
		mw_mutex_unlock(&fs->take_mu);
		return rc;
	}
	gate_close(&fs->gate);
	data_flusher_stop(fs->wbf);
	fs->wbf = NULL;
	int rc = data_flush_all(fs);
	if (!rc)
		rc = engine_sync(r->e);
	struct engine *fe = NULL;
	if (!rc) {
		ra_pause(fs->ra, true);
		fsnotify_stop(fs->nf);
		fs->nf = NULL;
		rc = fs->o.release(fs->o.take_arg, rid, r->e, &fe);
	}
	if (rc) {
		log_err("region release: %s; this mount goes on writing the store", strerror(-rc));
		if (!fs->nf &&
		    fsnotify_start(fs, any_followed(fs) ? follow_refresh : NULL, &fs->nf) == 0)
			fsnotify_session(fs->nf, fs->se);
		ra_pause(fs->ra, false);
		if (data_flusher_start(fs, fs->o.wb_flush_ms, &fs->wbf))
			log_err("region release: no write-buffer flusher any more");
		gate_open(&fs->gate);
		mw_mutex_unlock(&fs->take_mu);
		return rc;
	}
	r->e = fe;
	r->writer = false;
	refresh_all(fs, rid);
	rc = notify_restart(fs, true);
	if (!rc)
		rc = fsfollow_start(fs, r, &r->ff);
	if (rc)
		log_err("region release: the follower's hooks did not start (%s): the kernel may "
		        "keep stale attributes until they expire",
		        strerror(-rc));
	if (any_written(fs) && data_flusher_start(fs, fs->o.wb_flush_ms, &fs->wbf))
		log_err("region release: no write-buffer flusher any more");
	ra_pause(fs->ra, false);
	gate_open(&fs->gate);
	mw_mutex_unlock(&fs->take_mu);
	log_info("this mount let the store go: it follows it now (the next change takes it "
	         "again if nobody else holds it)");
	return 0;
}

int fs_release(struct mwfs *fs, uint32_t rid)
{
	fs_gate_leave(&fs->gate);
	int rc = release(fs, rid);
	fs_gate_enter(&fs->gate);
	return rc;
}

struct engine *mwfs_engine(struct mwfs *fs)
{
	return fs->reg[0].e;
}
