/*
 * replay.c - the WAL at open and for followers: replay of entries into the
 * MemTable (the replay rules of docs/WAL.md) and, for a writer, the fencing
 * of the WAL after it (engine.c DESIGN, steps 2 and 3).
 *
 * engine.c replays and fences at open; follow.c replays entry by entry
 * across its polls (replay_fetch(), replay_entry()); salvage.c lists the WAL
 * with replay_list_wal().  None of them calls another for this.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "engine_int.h"
#include "log.h"
#include "replay.h"
#include "store.h"
#include "wal.h"

/* Fence attempts at the WAL tip before giving up (an older writer keeps winning). */
#define FENCE_TRIES 1000

int replay_list_wal(void *arg, const char *key, uint64_t size)
{
	struct poslist *pl = arg;
	uint64_t pos;

	(void)size;
	if (fmt_parse_wal_name(key, &pos) != 0)
		return 0;
	if (pl->n == pl->cap) {
		size_t cap = pl->cap ? 2 * pl->cap : 64;
		uint64_t *v = realloc(pl->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		pl->v = v;
		pl->cap = cap;
	}
	pl->v[pl->n++] = pos;
	return 0;
}

/*
 * Apply one decoded entry to the MemTable.  At open the engine is not shared yet; a
 * follower calls it with e->mu held.  A freeze (writer_freeze_locked) needs e->mu.
 */
static int replay_apply(struct engine *e, struct replay *r, const char *name,
                        const struct wal_info *info, const uint8_t *body, size_t blen)
{
	struct wal_cursor c;
	enum kv_type type;
	const uint8_t *k, *v;
	size_t kn, vn;
	uint32_t ops = 0;
	bool shared = r->locked;
	int rc;

	if (shared) {
		/* a follower is read while it applies: check the whole body before the first op */
		wal_cursor_init(&c, body, blen, info->batch_count);
		while ((rc = wal_op_next(&c, &type, &k, &kn, &v, &vn)) == 1) {
			struct blob_desc d;
			if (type == KV_BLOB && blob_desc_decode(v, vn, &d) != 0)
				rc = -EUCLEAN;
			if (rc < 0)
				break;
			ops++;
		}
		if (rc < 0 || ops != info->op_count) {
			log_err("wal: %s: malformed body (%u ops decoded, header says %u)", name,
			        ops, info->op_count);
			return -EUCLEAN;
		}
		ops = 0;
	}
	wal_cursor_init(&c, body, blen, info->batch_count);
	while ((rc = wal_op_next(&c, &type, &k, &kn, &v, &vn)) == 1) {
		if (type == KV_BLOB) {
			struct blob_desc d;
			int drc = blob_desc_decode(v, vn, &d);
			if (drc == -EPROTONOSUPPORT) {
				log_err("wal: %s: a blob descriptor of format 1: this store was "
				        "written by an older memwalfs (this one reads format 2)",
				        name);
				return drc;
			}
			if (drc) {
				log_err("wal: %s: bad blob descriptor", name);
				return -EUCLEAN;
			}
		}
		rc = memtable_add(e->mem, e->next_seq++, type, k, kn, v, vn);
		if (rc)
			return rc;
		if (r->keys &&
		    ((rc = mw_buf_varint(r->keys, kn)) || (rc = mw_buf_append(r->keys, k, kn))))
			return rc;
		if (type == KV_DELETE)
			e->stats.deletes++;
		else
			e->stats.puts++;
		ops++;
		/* a follower freezes between entries only (replay_entry()): see follow.c */
		if (!e->o.follow && memtable_bytes(e->mem) >= e->o.memtable_max_bytes) {
			if (!shared)
				mw_mutex_lock(&e->mu);
			rc = writer_freeze_locked(e);
			if (!shared)
				mw_mutex_unlock(&e->mu);
			if (rc)
				return rc;
		}
	}
	if (rc < 0 || ops != info->op_count) {
		log_err("wal: %s: malformed body (%u ops decoded, header says %u)", name, ops,
		        info->op_count);
		return -EUCLEAN;
	}
	return 0;
}

int replay_fetch(struct engine *e, uint64_t pos, void **buf, size_t *len)
{
	char name[FMT_NAME_MAX];
	int rc;

	fmt_wal_name(name, pos);
	rc = store_get(e->st, name, 0, STORE_TO_END, buf, len);
	if (rc && rc != -ENOENT)
		log_err("engine: replay: get %s failed: %s", name, strerror(-rc));
	return rc;
}

int replay_entry(struct engine *e, struct replay *r, uint64_t pos, const void *buf, size_t len)
{
	char name[FMT_NAME_MAX];
	struct wal_info info;
	const uint8_t *body;
	size_t blen;
	int rc;

	fmt_wal_name(name, pos);
	rc = wal_entry_decode(name, buf, len, pos, &info, &body, &blen);
	if (rc)
		return rc;
	r->next = pos + 1;
	e->stats.replay_entries++;
	e->stats.replay_bytes += len;
	if (!e->o.read_only && info.epoch > e->epoch) {
		log_err("engine: %s has epoch %" PRIu64 " > ours %" PRIu64
		        ": a newer writer exists",
		        name, info.epoch, e->epoch);
		return -ESTALE;
	}
	if (info.epoch < r->max_epoch) {
		log_warn("engine: %s: epoch %" PRIu64 " after epoch %" PRIu64 ": ignored", name,
		         info.epoch, r->max_epoch);
		e->next_pos = pos + 1;
		return 0;
	}
	r->max_epoch = info.epoch;
	e->next_pos = pos; /* a freeze during this entry does not cover it */
	if (!(info.flags & WAL_FLAG_FENCE))
		rc = replay_apply(e, r, name, &info, body, blen);
	e->next_pos = pos + 1;
	/*
	 * A follower freezes at entry boundaries, at the writer's thresholds, so that each of
	 * its frozen MemTables holds whole entries below its wal_end: a manifest covering
	 * wal_end covers all of it (follow.c drops it then).
	 */
	if (rc == 0 && e->o.follow && memtable_count(e->mem) > 0 &&
	    (memtable_bytes(e->mem) >= e->o.memtable_max_bytes ||
	     e->next_pos - e->freeze_pos >= ENGINE_REPLAY_MAX_ENTRIES)) {
		if (!r->locked)
			mw_mutex_lock(&e->mu);
		int frc = writer_freeze_locked(e);
		if (!r->locked)
			mw_mutex_unlock(&e->mu);
		if (frc)
			log_warn("engine: follower: MemTable freeze failed: %s", strerror(-frc));
	}
	return rc;
}

/*
 * Read and replay wal/<pos>.  Returns 0 (applied or ignored), -ENOENT (no
 * such entry), -ESTALE (an entry of a newer writer), -EUCLEAN, -EIO...
 */
static int replay_one(struct engine *e, struct replay *r, uint64_t pos)
{
	void *buf = NULL;
	size_t len = 0;
	int rc = replay_fetch(e, pos, &buf, &len);

	if (rc == 0)
		rc = replay_entry(e, r, pos, buf, len);
	free(buf);
	return rc;
}

/*
 * Replay from the covered position, in position order, up to the first
 * missing one (r->next after it); sets *tip to the first position after
 * every listed one.
 */
int replay_wal(struct engine *e, struct replay *r, uint64_t *tip)
{
	char after[FMT_NAME_MAX];
	struct poslist pl = {0};
	uint64_t t0 = mw_now_us();
	size_t i;
	int rc;

	r->next = e->man.wal_covered;
	if (r->next > 0)
		fmt_wal_name(after, r->next - 1);
	rc = store_list(e->st, FMT_WAL_PREFIX, r->next ? after : NULL, 0, replay_list_wal, &pl);
	if (rc) {
		log_err("engine: list %s failed: %s", FMT_WAL_PREFIX, strerror(-rc));
		goto out;
	}
	for (i = 0; i < pl.n; i++) {
		if (pl.v[i] < r->next)
			continue;
		if (e->from_snapshot && pl.v[i] >= e->snapshot_wal_end)
			break; /* past the snapshot */
		if (pl.v[i] != r->next && e->o.salvage) {
			/* salvage (salvage.c): what remains after the missing positions counts */
			log_warn("engine: salvage: WAL positions %" PRIu64 "..%" PRIu64
			         " are missing: what they held is lost",
			         r->next, pl.v[i] - 1);
			e->stats.salvage_wal_missing += pl.v[i] - r->next;
			r->next = pl.v[i];
		}
		if (pl.v[i] != r->next)
			break; /* a gap */
		rc = replay_one(e, r, pl.v[i]);
		if (e->o.salvage &&
		    (rc == -EUCLEAN || rc == -EBADMSG || rc == -EPROTONOSUPPORT || rc == -ENOENT)) {
			log_warn("engine: salvage: WAL entry %" PRIu64
			         " skipped (%s): what it held "
			         "is lost",
			         pl.v[i], strerror(-rc));
			e->stats.salvage_wal_bad++;
			r->next = pl.v[i] + 1;
			e->next_pos = r->next;
			rc = 0;
			continue;
		}
		if (rc == -ENOENT)
			break; /* listed, then gone: treat as the end */
		if (rc)
			goto out;
		if (e->o.progress)
			e->o.progress(e->o.progress_arg, "replay", i + 1, pl.n);
	}
	*tip = r->next;
	if (e->from_snapshot) {
		if (r->next < e->snapshot_wal_end) {
			char name[FMT_NAME_MAX];
			fmt_wal_name(name, r->next);
			log_err("engine: snapshot: %s is missing: the snapshot is damaged", name);
			rc = -EUCLEAN;
			goto out;
		}
	} else if (i < pl.n) {
		log_warn("engine: WAL gap at position %" PRIu64 ": %zu later entr%s ignored "
		         "(never acknowledged: a writer stopped with entries in flight)",
		         r->next, pl.n - i, pl.n - i == 1 ? "y" : "ies");
		*tip = pl.v[pl.n - 1] + 1;
		e->stats.replay_gap_entries = pl.n - i;
	}
	rc = 0;
out:
	e->stats.replay_usec = mw_now_us() - t0;
	free(pl.v);
	return rc;
}

/* Put a fence entry of our epoch at pos with put_if_absent: 0, -EEXIST, or the put's error. */
static int put_fence(struct engine *e, struct mw_buf *b, uint64_t pos)
{
	char name[FMT_NAME_MAX];
	struct wal_info info = {
	    .flags = WAL_FLAG_FENCE,
	    .epoch = e->epoch,
	    .position = pos,
	    .first_seq = e->next_seq,
	};
	int rc;

	b->len = 0;
	if ((rc = wal_entry_begin(b)))
		return rc;
	wal_entry_seal(b, &info);
	fmt_wal_name(name, pos);
	rc = e->conditional ? store_put_if_absent(e->st, name, b->p, b->len)
	                    : store_put(e->st, name, b->p, b->len);
	if (rc && rc != -EEXIST)
		log_err("engine: put fence %s failed: %s", name, strerror(-rc));
	return rc;
}

/*
 * -ESTALE if wal/<pos> is of an epoch newer than ours, else 0 (an older
 * writer's entry there is one it can never acknowledge), or the read's error.
 */
static int check_reserved(struct engine *e, uint64_t pos)
{
	char name[FMT_NAME_MAX];
	struct wal_info info;
	const uint8_t *body;
	void *buf = NULL;
	size_t len = 0, blen;
	int rc = replay_fetch(e, pos, &buf, &len);

	if (rc == -ENOENT)
		rc = 0; /* collected: it was below a manifest's coverage, so not newer */
	if (rc == 0 && buf) {
		fmt_wal_name(name, pos);
		rc = wal_entry_decode(name, buf, len, pos, &info, &body, &blen);
		if (rc == 0 && info.epoch > e->epoch) {
			log_err("engine: %s has epoch %" PRIu64 " > ours %" PRIu64
			        ": a newer writer exists",
			        name, info.epoch, e->epoch);
			rc = -ESTALE;
		}
	}
	free(buf);
	return rc;
}

/*
 * Fence the WAL (writer open, step 3; docs/WAL.md "Open, replay and
 * fencing").  An older writer may still have up to WAL_WINDOW entries in
 * flight from its durable position, which is at most the first missing
 * position r->next; and it acknowledges an entry only once every position
 * before it holds its own entries.  So: put_if_absent a fence at r->next;
 * if an older writer won that position, replay its entry (it continues
 * the log and may be acknowledged) and try the next one.  Once our fence
 * landed at q, the older writer can acknowledge nothing at q or after;
 * its entries may still land in (q, q + WAL_WINDOW), never to be
 * acknowledged: we take every free position there (and up to the tip of
 * the listing) with more fences, so replay finds no gap below our first
 * group and ignores those entries (an older epoch after a newer one).
 */
int replay_fence_wal(struct engine *e, struct replay *r, uint64_t tip)
{
	char name[FMT_NAME_MAX];
	struct mw_buf b = {0};
	uint64_t pos = r->next, end;
	int rc = -EIO;

	for (int i = 0; i < FENCE_TRIES; i++, pos = r->next) {
		rc = put_fence(e, &b, pos);
		if (rc != -EEXIST)
			break;
		/* an older writer won this position: its entry continues the log */
		rc = replay_one(e, r, pos);
		if (rc == -ENOENT) /* listed, then collected: it was covered, go on */
			r->next = pos + 1;
		else if (rc)
			goto out;
		rc = -EIO;
	}
	if (rc) {
		if (rc == -EIO)
			log_err("engine: could not fence the WAL after %d positions", FENCE_TRIES);
		goto out;
	}
	fmt_wal_name(name, pos);
	end = pos + WAL_WINDOW > tip ? pos + WAL_WINDOW : tip;
	for (uint64_t p = pos + 1; p < end; p++) {
		rc = put_fence(e, &b, p);
		if (rc == -EEXIST)
			rc = check_reserved(e, p);
		if (rc)
			goto out;
	}
	e->next_pos = end;
	e->durable_upto = end;
	e->stats.fence_positions = end - pos;
	log_info("engine: epoch %" PRIu64 " fenced the WAL at %s (%" PRIu64 " positions)", e->epoch,
	         name, end - pos);
out:
	mw_buf_free(&b);
	return rc;
}
