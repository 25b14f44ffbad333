/*
 * snapshot.c - snapshots: a named object that pins one durable state of the
 * store (the page is docs/SNAPSHOTS.md).
 *
 * DESIGN
 *
 * A snapshot "snap/<name>" records a manifest version V and a WAL range
 * [V.wal_covered, wal_end): the state a crash-recovery would rebuild at the
 * moment of the snapshot (V's tables, then the WAL entries after them up to
 * the first missing position).  Nothing is copied and the writer is not
 * asked to flush, so a snapshot can be taken from any machine while the
 * store is mounted, at the cost of one LIST of the WAL and one PUT; mounting
 * it replays that WAL range, at most about one MemTable's worth (the writer
 * flushes every ENGINE_REPLAY_MAX_ENTRIES entries).
 *
 * Pinning: the writer's GC (gc.c) lists snap/ in every pass and keeps, for
 * each snapshot, manifest V, the tables V lists, the packs those tables
 * reference, the WAL entries of the range and the packs of their groups.
 * Deleting the snapshot object releases them; a later GC pass frees what
 * nothing else needs (after the grace period, as for anything else).
 *
 * Races with GC: V is the newest manifest when it is read, and GC keeps the
 * newest four manifests and everything they need for at least the grace
 * period, so what the snapshot pins cannot go between that read and the PUT
 * of the snapshot object.  To be sure even with a zero grace, create checks
 * after the PUT that manifest V and the first and last WAL entries of the
 * range are still there; if not, it removes the object and tries again.
 *
 * The object is written with a conditional create where the store has one
 * (put_if_absent: of two creators of one name exactly one wins); on a store
 * without it, a HEAD first (a race between two creators of one name is then
 * possible: the later PUT wins).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coding.h"
#include "format.h"
#include "log.h"
#include "manifest.h"
#include "snapshot.h"
#include "store.h"

int snapshot_name_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > SNAP_NAME_MAX || name[0] == '.')
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return 0;
	}
	return 1;
}

int snapshot_encode(const struct engine_snapshot *s, struct mw_buf *out)
{
	size_t n = strlen(s->name), start = out->len;
	int rc = mw_buf_reserve(out, SNAP_FIXED_SIZE + n + SNAP_HASH_SIZE);
	uint8_t *p;

	if (rc)
		return rc;
	p = out->p + start;
	put_be32(p + SNAP_OFF_MAGIC, SNAP_MAGIC);
	put_be16(p + SNAP_OFF_VERSION, SNAP_VERSION);
	put_be16(p + SNAP_OFF_FLAGS, 0);
	put_be64(p + SNAP_OFF_MANIFEST, s->manifest);
	put_be64(p + SNAP_OFF_EPOCH, s->epoch);
	put_be64(p + SNAP_OFF_WAL_FROM, s->wal_from);
	put_be64(p + SNAP_OFF_WAL_END, s->wal_end);
	put_be64(p + SNAP_OFF_CREATED, (uint64_t)s->created);
	put_be16(p + SNAP_OFF_NAME_LEN, (uint16_t)n);
	memcpy(p + SNAP_FIXED_SIZE, s->name, n);
	put_be64(p + SNAP_FIXED_SIZE + n, fmt_hash(p, SNAP_FIXED_SIZE + n));
	out->len += SNAP_FIXED_SIZE + n + SNAP_HASH_SIZE;
	return 0;
}

int snapshot_decode(const char *key, const void *buf, size_t len, struct engine_snapshot *s)
{
	const uint8_t *p = buf;
	size_t n;
	uint16_t ver;

	if (len < SNAP_FIXED_SIZE + SNAP_HASH_SIZE || get_be32(p + SNAP_OFF_MAGIC) != SNAP_MAGIC) {
		log_err("snapshot: %s: not a snapshot object (%zu bytes)", key, len);
		return -EUCLEAN;
	}
	n = get_be16(p + SNAP_OFF_NAME_LEN);
	if (len != SNAP_FIXED_SIZE + n + SNAP_HASH_SIZE ||
	    get_be64(p + SNAP_FIXED_SIZE + n) != fmt_hash(p, SNAP_FIXED_SIZE + n)) {
		log_err("snapshot: %s: checksum mismatch or bad length", key);
		return -EUCLEAN;
	}
	ver = get_be16(p + SNAP_OFF_VERSION);
	if (ver == 0 || ver > SNAP_VERSION) {
		log_err("snapshot: %s: format version %u not supported (this program: %u)", key,
		        ver, SNAP_VERSION);
		return ver ? -EPROTONOSUPPORT : -EUCLEAN;
	}
	memset(s, 0, sizeof(*s));
	if (n > SNAP_NAME_MAX)
		return -EUCLEAN;
	memcpy(s->name, p + SNAP_FIXED_SIZE, n);
	s->name[n] = '\0';
	s->manifest = get_be64(p + SNAP_OFF_MANIFEST);
	s->epoch = get_be64(p + SNAP_OFF_EPOCH);
	s->wal_from = get_be64(p + SNAP_OFF_WAL_FROM);
	s->wal_end = get_be64(p + SNAP_OFF_WAL_END);
	s->created = (int64_t)get_be64(p + SNAP_OFF_CREATED);
	if (!snapshot_name_valid(s->name) || s->wal_end < s->wal_from || s->manifest == 0) {
		log_err("snapshot: %s: inconsistent fields", key);
		return -EUCLEAN;
	}
	return 0;
}

static int snap_key(char *key, size_t cap, const char *name)
{
	if (!snapshot_name_valid(name))
		return -EINVAL;
	snprintf(key, cap, "%s%s", SNAP_PREFIX, name);
	return 0;
}

int engine_snapshot_get(struct store *st, const char *name, struct engine_snapshot *out)
{
	char key[sizeof(SNAP_PREFIX) + SNAP_NAME_MAX + 1];
	void *buf = NULL;
	size_t len = 0;
	int rc = snap_key(key, sizeof(key), name);

	if (rc)
		return rc;
	rc = store_get(st, key, 0, STORE_TO_END, &buf, &len);
	if (rc == 0) {
		rc = snapshot_decode(key, buf, len, out);
		if (rc == 0 && strcmp(out->name, name) != 0) {
			log_err("snapshot: %s holds the name %s", key, out->name);
			rc = -EUCLEAN;
		}
	}
	free(buf);
	return rc;
}

/* Listing callback: the first missing position after the covered one. */
struct tip {
	uint64_t next; /* next position expected */
	bool gap;      /* a gap was seen: stop counting */
};

static int tip_cb(void *arg, const char *key, uint64_t size)
{
	struct tip *t = arg;
	uint64_t pos;

	(void)size;
	if (t->gap || fmt_parse_wal_name(key, &pos) != 0 || pos < t->next)
		return 0;
	if (pos == t->next)
		t->next++;
	else
		t->gap = true;
	return 0;
}

static bool exists(struct store *st, const char *key)
{
	struct store_stat ss;
	return store_head(st, key, &ss) == 0;
}

int snapshot_pin(struct store *st, const char *name, struct engine_snapshot *s)
{
	char w[FMT_NAME_MAX];
	struct manifest m = {0};
	struct tip t;
	uint64_t v;
	int rc;

	memset(s, 0, sizeof(*s));
	if ((rc = manifest_find_latest(st, &v)))
		return rc;
	if (v == 0)
		return -ENOENT;
	if ((rc = manifest_load(st, v, &m)))
		return rc;
	t.next = m.wal_covered;
	t.gap = false;
	if (t.next > 0)
		fmt_wal_name(w, t.next - 1);
	rc = store_list(st, FMT_WAL_PREFIX, t.next ? w : NULL, 0, tip_cb, &t);
	if (rc == 0) {
		snprintf(s->name, sizeof(s->name), "%s", name);
		s->manifest = v;
		s->epoch = m.epoch;
		s->wal_from = m.wal_covered;
		s->wal_end = t.next;
		s->created = (int64_t)time(NULL);
	}
	manifest_clear(&m);
	return rc;
}

int snapshot_put(struct store *st, const struct engine_snapshot *s, bool excl)
{
	char key[sizeof(SNAP_PREFIX) + SNAP_NAME_MAX + 1];
	struct mw_buf b = {0};
	int rc = snap_key(key, sizeof(key), s->name);

	if (rc || (rc = snapshot_encode(s, &b)))
		return rc;
	if (!excl)
		rc = store_put(st, key, b.p, b.len);
	else if (store_caps(st)->conditional_create)
		rc = store_put_if_absent(st, key, b.p, b.len);
	else
		rc = exists(st, key) ? -EEXIST : store_put(st, key, b.p, b.len);
	mw_buf_free(&b);
	return rc;
}

int snapshot_pinned(struct store *st, const struct engine_snapshot *s)
{
	char mname[FMT_NAME_MAX], w[FMT_NAME_MAX];

	/*
	 * GC could have taken manifest V only with a grace shorter than the create, and the
	 * WAL range's entries once a newer manifest covering them had aged a tenth of the
	 * grace (docs/GC.md): one listing checks every entry of the range.
	 */
	fmt_manifest_name(mname, s->manifest);
	if (!exists(st, mname))
		return 0;
	if (s->wal_end == s->wal_from)
		return 1;
	struct tip c = {.next = s->wal_from, .gap = false};
	if (s->wal_from > 0)
		fmt_wal_name(w, s->wal_from - 1);
	int rc = store_list(st, FMT_WAL_PREFIX, s->wal_from ? w : NULL, 0, tip_cb, &c);
	return rc ? rc : c.next >= s->wal_end;
}

int engine_snapshot_create(struct store *st, const char *name, struct engine_snapshot *out)
{
	int rc = snapshot_name_valid(name) ? 0 : -EINVAL;

	for (int attempt = 0; !rc && attempt < SNAP_CREATE_TRIES; attempt++) {
		struct engine_snapshot s;
		if ((rc = snapshot_pin(st, name, &s)) || (rc = snapshot_put(st, &s, true)))
			return rc;
		rc = snapshot_pinned(st, &s);
		if (rc == 1) {
			log_info("snapshot %s: manifest %" PRIu64 ", WAL %" PRIu64 "..%" PRIu64,
			         name, s.manifest, s.wal_from, s.wal_end);
			if (out)
				*out = s;
			return 0;
		}
		engine_snapshot_delete(st, name);
		if (rc < 0)
			return rc;
		log_warn("snapshot %s: GC removed part of manifest %" PRIu64 "'s state meanwhile; "
		         "taking it again",
		         name, s.manifest);
	}
	return rc ? rc : -EAGAIN;
}

int engine_snapshot_delete(struct store *st, const char *name)
{
	char key[sizeof(SNAP_PREFIX) + SNAP_NAME_MAX + 1];
	int rc = snap_key(key, sizeof(key), name);

	if (rc)
		return rc;
	if (!exists(st, key))
		return -ENOENT;
	return store_delete(st, key);
}

/* Names under snap/, collected first so the callback may use the store. */
struct names {
	char **v;
	size_t n, cap;
};

static int names_cb(void *arg, const char *key, uint64_t size)
{
	struct names *ns = arg;

	(void)size;
	if (ns->n == ns->cap) {
		size_t cap = ns->cap ? 2 * ns->cap : 16;
		char **v = realloc(ns->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		ns->v = v;
		ns->cap = cap;
	}
	ns->v[ns->n] = strdup(key + strlen(SNAP_PREFIX));
	if (!ns->v[ns->n])
		return -ENOMEM;
	ns->n++;
	return 0;
}

int engine_snapshot_list(struct store *st, int (*fn)(void *arg, const struct engine_snapshot *s),
                         void *arg)
{
	struct names ns = {0};
	int rc = store_list(st, SNAP_PREFIX, NULL, 0, names_cb, &ns);

	for (size_t i = 0; rc == 0 && i < ns.n; i++) {
		struct engine_snapshot s;
		if (!snapshot_name_valid(ns.v[i]))
			continue; /* not ours */
		rc = engine_snapshot_get(st, ns.v[i], &s);
		if (rc == -ENOENT) {
			rc = 0; /* deleted meanwhile */
			continue;
		}
		if (rc == 0)
			rc = fn(arg, &s);
	}
	for (size_t i = 0; i < ns.n; i++)
		free(ns.v[i]);
	free(ns.v);
	return rc;
}
