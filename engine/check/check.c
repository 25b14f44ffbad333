/*
 * check.c - the offline verifier of a store's engine objects (contract in
 * check.h).
 *
 * One listing of the whole store is the universe: every object found is
 * classified by its prefix and later marked when something references it.
 * The newest manifest that decodes is the root; a newer one that does not is
 * a problem.  From it: every listed SSTable is opened and iterated (the
 * reader verifies block checksums; we verify internal order, the key range
 * the manifest claims and the entry count the properties claim), and every
 * WAL entry from wal_covered on is decoded.  Blob descriptors found in both
 * are checked against the listing (the pack exists, the range lies inside
 * its data) and their bytes total the pack's live bytes.  Then every pack's
 * header and trailer are checked (whole pack with deep).  Whatever is left
 * unmarked and not awaiting GC is an orphan.
 *
 * Read-only and epoch-free, so it may run beside a live writer: objects a
 * writer creates after the listing are simply not seen, and objects GC
 * deletes after the listing are kept for a grace period first.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "coding.h"
#include "format.h"
#include "grow.h"
#include "iter.h"
#include "lease.h"
#include "manifest.h"
#include "pack.h"
#include "regmap.h"
#include "snapshot.h"
#include "sst.h"
#include "sst_flush.h"
#include "store.h"
#include "wal.h"

/* Object kinds by prefix. */
enum okind { K_MANIFEST, K_WAL, K_PACK, K_SST, K_HINT, K_REGION, K_SUB, K_SNAP, K_OTHER };

/* One listed object. */
struct obj {
	char *name;      /* object name (malloc()ed) */
	uint64_t size;   /* object size */
	enum okind kind; /* from the prefix */
	uint64_t live;   /* packs: blob bytes referenced */
	bool ref;        /* referenced by the manifest in use (or uncovered WAL) */
	bool gc;         /* listed by a GC record of the manifest in use */
};

/* The state of one check. */
struct ck {
	struct store *st;           /* borrowed */
	const struct check_opts *o; /* borrowed, never NULL */
	struct check_report *r;     /* totals (the caller's or ours) */
	struct obj *objs;           /* the listing, in key order */
	size_t n, cap;
};

static void emit(struct ck *c, struct check_event *ev)
{
	if (c->o->fn)
		c->o->fn(c->o->arg, ev);
}

/* Report a problem with object. */
__attribute__((format(printf, 4, 5))) static void problem(struct ck *c, const char *object, int err,
                                                          const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	struct check_event ev = {.kind = CHECK_PROBLEM, .object = object, .err = err, .msg = msg};

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->r->problems++;
	emit(c, &ev);
}

static enum okind kind_of(const char *name)
{
	uint64_t v;

	if (!strncmp(name, FMT_MANIFEST_PREFIX, strlen(FMT_MANIFEST_PREFIX)))
		return K_MANIFEST;
	if (!strncmp(name, FMT_WAL_PREFIX, strlen(FMT_WAL_PREFIX)))
		return K_WAL;
	if (!strncmp(name, FMT_PACK_PREFIX, strlen(FMT_PACK_PREFIX)))
		return K_PACK;
	if (!strncmp(name, SST_PREFIX, strlen(SST_PREFIX)))
		return K_SST;
	if (!strcmp(name, FMT_HINT_KEY))
		return K_HINT;
	/* snapshot objects (docs/SNAPSHOTS.md): known, never orphans */
	if (!strncmp(name, SNAP_PREFIX, strlen(SNAP_PREFIX)) &&
	    snapshot_name_valid(name + strlen(SNAP_PREFIX)))
		return K_SNAP;
	/* a region's own objects, under r/<rid>/: its engine's (checked through its view) */
	if (fmt_parse_region_prefix(name) > 0)
		return K_SUB;
	/* the objects of regions (docs/REGIONS.md): not the engine's, but known */
	if (fmt_parse_regions_name(name, &v) == 0 || fmt_parse_holder_name(name, &v) == 0 ||
	    !strcmp(name, FMT_BELL_KEY) ||
	    (!strncmp(name, FMT_MOUNTS_PREFIX, strlen(FMT_MOUNTS_PREFIX)) &&
	     lease_id_valid(name + strlen(FMT_MOUNTS_PREFIX))))
		return K_REGION;
	return K_OTHER;
}

static int list_cb(void *arg, const char *key, uint64_t size)
{
	struct ck *c = arg;
	struct check_count *cnt;

	if (MW_GROW(c->objs, c->cap, c->n + 1, 256))
		return -ENOMEM;
	struct obj *ob = &c->objs[c->n];
	memset(ob, 0, sizeof(*ob));
	ob->name = strdup(key);
	if (!ob->name)
		return -ENOMEM;
	ob->size = size;
	ob->kind = kind_of(key);
	c->n++;
	switch (ob->kind) {
	case K_MANIFEST:
		cnt = &c->r->manifests;
		break;
	case K_WAL:
		cnt = &c->r->wal;
		break;
	case K_PACK:
		cnt = &c->r->packs;
		break;
	case K_SST:
		cnt = &c->r->ssts;
		break;
	case K_HINT:
		cnt = &c->r->manifests;
		break;
	case K_REGION:
		cnt = &c->r->regions;
		break;
	case K_SUB:
		cnt = &c->r->subregions;
		break;
	case K_SNAP:
		cnt = &c->r->snapshots;
		break;
	default:
		cnt = &c->r->other;
		break;
	}
	cnt->objects++;
	cnt->bytes += size;
	return 0;
}

static int obj_cmp(const void *k, const void *e)
{
	return strcmp(k, ((const struct obj *)e)->name);
}

/* The listed object called name, or NULL. */
static struct obj *find(struct ck *c, const char *name)
{
	return c->n ? bsearch(name, c->objs, c->n, sizeof(*c->objs), obj_cmp) : NULL;
}

/* Check one blob descriptor found in object referrer; mark its pack. */
static void check_blob(struct ck *c, const char *referrer, const void *val, size_t vlen)
{
	struct blob_desc d;
	char pname[FMT_NAME_MAX];
	struct obj *p;

	c->r->blobs++;
	int rc = blob_desc_decode(val, vlen, &d);
	if (rc == -EPROTONOSUPPORT) {
		problem(c, referrer, rc,
		        "a blob descriptor of format 1 (an older memwalfs wrote it)");
		return;
	}
	if (rc) {
		problem(c, referrer, -EUCLEAN, "malformed blob descriptor (%zu bytes)", vlen);
		return;
	}
	fmt_pack_name(pname, d.epoch, d.position);
	p = find(c, pname);
	if (!p) {
		problem(c, referrer, -ENOENT, "blob references missing pack %s", pname);
		return;
	}
	p->ref = true;
	p->live += d.length;
	if (p->size < PACK_HEADER_SIZE + PACK_TRAILER_SIZE || d.offset < PACK_HEADER_SIZE ||
	    d.blob_len > p->size - PACK_HEADER_SIZE - PACK_TRAILER_SIZE ||
	    d.offset > p->size - PACK_TRAILER_SIZE - d.blob_len) {
		problem(c, referrer, -EUCLEAN,
		        "blob [%" PRIu64 ", +%" PRIu64 ") lies outside the data of %s (%" PRIu64
		        " bytes)",
		        d.offset, d.blob_len, pname, p->size);
		return;
	}
	if (c->o->deep && d.length) {
		uint64_t from, to, bad;
		void *buf = NULL;
		size_t got = 0;
		blob_desc_blocks(&d, 0, d.length, &from, &to);
		rc = store_get(c->st, pname, d.offset + from, (size_t)(to - from), &buf, &got);
		if (rc)
			problem(c, pname, rc, "cannot read blob at %" PRIu64 " (referenced by %s)",
			        d.offset, referrer);
		else if (got != to - from || blob_desc_verify(&d, from, buf, got, &bad))
			problem(c, pname, -EUCLEAN,
			        "blob at %" PRIu64 " (+%" PRIu64
			        ") fails its checksum (referenced by %s)",
			        d.offset, d.blob_len, referrer);
		free(buf);
	}
}

/* Open, iterate and verify one SSTable listed by the manifest. */
static void check_sst(struct ck *c, const struct manifest_sst *t)
{
	struct obj *ob = find(c, t->name);
	struct sst_reader *rd = NULL;
	struct kv_iter *it = NULL;
	uint8_t *prev = NULL;
	size_t prevlen = 0;
	uint64_t prevseq = 0, entries = 0;
	bool order_bad = false, range_bad = false;
	int rc;

	if (!ob) {
		problem(c, t->name, -ENOENT, "listed by the manifest but missing");
		return;
	}
	ob->ref = true;
	if (ob->size != t->size)
		problem(c, t->name, -EUCLEAN, "size %" PRIu64 " but the manifest says %" PRIu64,
		        ob->size, t->size);
	rc = sst_reader_open(c->st, t->name, ob->size, NULL, &rd);
	if (rc) {
		problem(c, t->name, rc, "cannot open the table: %s", strerror(-rc));
		return;
	}
	rc = sst_reader_iter_new(rd, false, &it);
	if (rc) {
		problem(c, t->name, rc, "cannot iterate the table: %s", strerror(-rc));
		goto out;
	}
	for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
		size_t klen, vlen;
		const uint8_t *key = kv_iter_key(it, &klen);
		const void *val = kv_iter_value(it, &vlen);
		uint64_t seq = kv_iter_seq(it);
		int cmp = prev ? kv_key_cmp(prev, prevlen, key, klen) : -1;

		if (!order_bad && (cmp > 0 || (cmp == 0 && seq >= prevseq))) {
			problem(c, t->name, -EUCLEAN,
			        "entries out of internal order at entry %" PRIu64, entries);
			order_bad = true;
		}
		if (!range_bad && (kv_key_cmp(key, klen, t->smallest, t->smallest_len) < 0 ||
		                   kv_key_cmp(key, klen, t->largest, t->largest_len) > 0)) {
			problem(c, t->name, -EUCLEAN,
			        "key of entry %" PRIu64 " outside the manifest's key range",
			        entries);
			range_bad = true;
		}
		if (cmp != 0) {
			uint8_t *np = realloc(prev, klen ? klen : 1);
			if (!np) {
				problem(c, t->name, -ENOMEM, "out of memory");
				goto out;
			}
			prev = np;
			memcpy(prev, key, klen);
			prevlen = klen;
		}
		prevseq = seq;
		if (kv_iter_type(it) == KV_BLOB)
			check_blob(c, t->name, val, vlen);
		entries++;
	}
	rc = kv_iter_status(it);
	if (rc)
		problem(c, t->name, rc, "read failed after %" PRIu64 " entries: %s", entries,
		        strerror(-rc));
	else if (entries != sst_reader_props(rd)->entries)
		problem(c, t->name, -EUCLEAN, "%" PRIu64 " entries but the properties say %" PRIu64,
		        entries, sst_reader_props(rd)->entries);
	c->r->sst_entries += entries;
	struct check_event ev = {.kind = CHECK_SST,
	                         .object = t->name,
	                         .size = ob->size,
	                         .level = t->level,
	                         .smallest = t->smallest,
	                         .smallest_len = t->smallest_len,
	                         .largest = t->largest,
	                         .largest_len = t->largest_len,
	                         .entries = entries};
	emit(c, &ev);
out:
	free(prev);
	kv_iter_destroy(it);
	sst_reader_unref(rd);
}

/* Decode one uncovered WAL entry and check its blob descriptors. */
static void check_wal(struct ck *c, struct obj *ob, uint64_t pos)
{
	void *buf = NULL;
	size_t len = 0, blen, klen, vlen;
	const uint8_t *body, *key, *val;
	struct wal_info info;
	struct wal_cursor cur;
	enum kv_type type;
	uint64_t ops = 0;
	int rc;

	ob->ref = true;
	rc = store_get(c->st, ob->name, 0, STORE_TO_END, &buf, &len);
	if (rc == -ENOENT)
		return; /* listed, then deleted: a newer manifest covers it */
	if (rc) {
		problem(c, ob->name, rc, "cannot read: %s", strerror(-rc));
		return;
	}
	rc = wal_entry_decode(ob->name, buf, len, pos, &info, &body, &blen);
	if (rc) {
		problem(c, ob->name, rc, "corrupt WAL entry (bad magic, version or checksum)");
		goto out;
	}
	wal_cursor_init(&cur, body, blen, info.batch_count);
	while ((rc = wal_op_next(&cur, &type, &key, &klen, &val, &vlen)) == 1) {
		if (type == KV_BLOB)
			check_blob(c, ob->name, val, vlen);
		ops++;
	}
	if (rc < 0)
		problem(c, ob->name, rc, "malformed body after %" PRIu64 " ops", ops);
	else if (ops != info.op_count)
		problem(c, ob->name, -EUCLEAN, "%" PRIu64 " ops but the header says %" PRIu32, ops,
		        info.op_count);
	struct check_event ev = {.kind = CHECK_WAL,
	                         .object = ob->name,
	                         .size = ob->size,
	                         .entries = ops,
	                         .position = pos,
	                         .epoch = info.epoch};
	emit(c, &ev);
out:
	free(buf);
}

/* Check a pack's header and trailer (the whole pack with deep). */
static void check_pack(struct ck *c, struct obj *ob)
{
	void *head = NULL, *tail = NULL;
	size_t hn = 0, tn = 0;
	uint64_t epoch = 0, data = 0;
	int rc;

	if (ob->size < PACK_HEADER_SIZE + PACK_TRAILER_SIZE) {
		problem(c, ob->name, -EUCLEAN, "truncated pack (%" PRIu64 " bytes)", ob->size);
		goto report;
	}
	data = ob->size - PACK_HEADER_SIZE - PACK_TRAILER_SIZE;
	if (c->o->deep) {
		rc = store_get(c->st, ob->name, 0, STORE_TO_END, &head, &hn);
		if (rc == -ENOENT && !ob->ref) {
			data = 0; /* an unreferenced pack GC deleted since the listing */
		} else if (rc) {
			problem(c, ob->name, rc, "cannot read: %s", strerror(-rc));
		} else if (pack_verify(ob->name, head, hn)) {
			problem(c, ob->name, -EUCLEAN, "corrupt pack (header, data or trailer)");
		} else {
			epoch = get_be64((uint8_t *)head + PACK_OFF_EPOCH);
		}
		goto report;
	}
	rc = store_get(c->st, ob->name, 0, PACK_HEADER_SIZE, &head, &hn);
	if (!rc)
		rc = store_get(c->st, ob->name, ob->size - PACK_TRAILER_SIZE, PACK_TRAILER_SIZE,
		               &tail, &tn);
	if (rc == -ENOENT && !ob->ref) {
		data = 0; /* an unreferenced pack GC deleted since the listing */
		goto report;
	}
	if (rc) {
		problem(c, ob->name, rc, "cannot read: %s", strerror(-rc));
		goto report;
	}
	const uint8_t *h = head, *t = tail;
	if (hn != PACK_HEADER_SIZE || tn != PACK_TRAILER_SIZE ||
	    get_be32(h + PACK_OFF_MAGIC) != PACK_MAGIC ||
	    get_be32(t + PACK_TOFF_MAGIC) != PACK_TAIL_MAGIC) {
		problem(c, ob->name, -EUCLEAN, "bad pack magic");
	} else if (get_be16(h + PACK_OFF_VERSION) > PACK_VERSION) {
		problem(c, ob->name, -EPROTONOSUPPORT, "pack version %u is newer than this program",
		        get_be16(h + PACK_OFF_VERSION));
	} else if (fmt_hash(h, PACK_OFF_HEAD_HASH) != get_be64(h + PACK_OFF_HEAD_HASH)) {
		problem(c, ob->name, -EUCLEAN, "pack header checksum mismatch");
	} else if (get_be64(t + PACK_TOFF_DATA_LEN) != data) {
		problem(c, ob->name, -EUCLEAN,
		        "trailer data length %" PRIu64 " but %" PRIu64
		        " bytes between header and trailer",
		        get_be64(t + PACK_TOFF_DATA_LEN), data);
	} else {
		epoch = get_be64(h + PACK_OFF_EPOCH);
	}
report:;
	struct check_event ev = {.kind = CHECK_PACK,
	                         .object = ob->name,
	                         .size = ob->size,
	                         .epoch = epoch,
	                         .data_bytes = data,
	                         .live_bytes = ob->live};
	emit(c, &ev);
	c->r->pack_data_bytes += data;
	c->r->pack_live_bytes += ob->live;
	free(head);
	free(tail);
}

/*
 * Load the newest manifest that decodes into *m; newer ones that do not
 * are problems.  *m stays zeroed when there is none.
 */
static void load_manifest(struct ck *c, uint64_t latest, struct manifest *m)
{
	for (size_t i = c->n; i-- > 0;) {
		struct obj *ob = &c->objs[i];
		uint64_t v;
		int rc;

		if (ob->kind != K_MANIFEST)
			continue;
		if (fmt_parse_manifest_name(ob->name, &v)) {
			problem(c, ob->name, -EUCLEAN, "not a manifest name");
			continue;
		}
		ob->ref = true;
		if (v > latest)
			continue; /* committed after we looked: not ours to judge */
		if (m->version) {
			if (!c->o->deep)
				continue;
			struct manifest old = {0};
			rc = manifest_load(c->st, v, &old);
			if (rc && rc != -ENOENT)
				problem(c, ob->name, rc, "older manifest does not decode");
			manifest_clear(&old);
			continue;
		}
		rc = manifest_load(c->st, v, m);
		if (rc == -ENOENT) {
			manifest_clear(m); /* deleted by GC since the listing */
		} else if (rc) {
			problem(c, ob->name, rc, "manifest does not decode: %s", strerror(-rc));
			manifest_clear(m);
		}
	}
}

/*
 * The newest region map listed must decode (docs/REGIONS.md "The region map"): a map that
 * does not stops every mount from knowing the store's regions.
 */
static void check_region_map(struct ck *c)
{
	struct region_map rm = {0};
	uint64_t v, newest = 0;
	int rc;

	for (size_t i = 0; i < c->n; i++)
		if (c->objs[i].kind == K_REGION &&
		    fmt_parse_regions_name(c->objs[i].name, &v) == 0 && v > newest)
			newest = v;
	if (!newest)
		return;
	/* the newest at the listing: a map added since is not seen, as other objects */
	rc = region_map_load(c->st, &rm);
	if (rc) {
		char name[FMT_NAME_MAX];
		fmt_regions_name(name, newest);
		problem(c, name, rc, "the newest region map does not load");
		return;
	}
	c->r->regions_version = rm.version;
	c->r->nregions = rm.n;
	region_map_free(&rm);
}

int check_store(struct store *st, const struct check_opts *o, struct check_report *r)
{
	static const struct check_opts none = {0};
	struct check_report own;
	struct manifest m = {0};
	struct ck c = {.st = st, .o = o ? o : &none, .r = r ? r : &own};
	uint64_t expect, latest = 0;
	bool gap = false;
	int rc;

	memset(c.r, 0, sizeof(*c.r));
	/*
	 * The newest manifest first, then the listing: everything that
	 * manifest needs was stored before it was committed, so it is in the
	 * listing even while a writer runs.
	 */
	rc = manifest_find_latest(st, &latest);
	if (rc)
		goto out;
	rc = store_list(st, "", NULL, 0, list_cb, &c);
	if (rc)
		goto out;
	check_region_map(&c);
	load_manifest(&c, latest, &m);
	if (!m.version) {
		for (size_t i = 0; i < c.n; i++)
			if (c.objs[i].kind == K_WAL || c.objs[i].kind == K_PACK ||
			    c.objs[i].kind == K_SST) {
				problem(&c, FMT_MANIFEST_PREFIX, -ENOENT,
				        "engine objects present but no readable manifest");
				break;
			}
	} else {
		struct check_event ev = {
		    .kind = CHECK_MANIFEST, .object = "", .position = m.version, .epoch = m.epoch};
		char mname[FMT_NAME_MAX];
		fmt_manifest_name(mname, m.version);
		ev.object = mname;
		emit(&c, &ev);
	}
	c.r->manifest_version = m.version;
	c.r->epoch = m.epoch;
	c.r->wal_covered = m.wal_covered;
	c.r->last_seq = m.last_seq;
	for (size_t i = 0; i < m.ngc; i++) {
		struct obj *ob = find(&c, m.gc[i].name);
		if (ob) {
			ob->gc = true;
			c.r->awaiting_gc++;
		}
	}
	for (size_t i = 0; i < m.nssts; i++)
		check_sst(&c, &m.ssts[i]);
	expect = m.wal_covered;
	for (size_t i = 0; i < c.n; i++) {
		struct obj *ob = &c.objs[i];
		uint64_t pos;
		if (ob->kind != K_WAL)
			continue;
		if (fmt_parse_wal_name(ob->name, &pos)) {
			problem(&c, ob->name, -EUCLEAN, "not a WAL entry name");
			continue;
		}
		if (pos < m.wal_covered) {
			c.r->wal_old++;
			ob->ref = true; /* covered: GC deletes it in time */
			continue;
		}
		c.r->wal_uncovered++;
		if (pos != expect)
			gap = true;
		expect = pos + 1;
		if (!gap)
			check_wal(&c, ob, pos);
	}
	for (size_t i = 0; i < c.n; i++)
		if (c.objs[i].kind == K_PACK)
			check_pack(&c, &c.objs[i]);
	for (size_t i = 0; i < c.n; i++) {
		struct obj *ob = &c.objs[i];
		const char *why = NULL;
		if (ob->ref || ob->gc || ob->kind == K_HINT || ob->kind == K_REGION ||
		    ob->kind == K_SUB || ob->kind == K_SNAP)
			continue;
		switch (ob->kind) {
		case K_WAL:
			why = "WAL entry after a gap: never replayed (a writer stopped with it in "
			      "flight, or the entries before it were deleted: memwalfs fsck "
			      "--salvage keeps it)";
			break;
		case K_PACK:
			why = "pack no table or uncovered WAL entry references";
			break;
		case K_SST:
			why = "table the manifest does not list";
			break;
		default:
			why = "not an engine object";
			break;
		}
		c.r->orphans.objects++;
		c.r->orphans.bytes += ob->size;
		struct check_event ev = {
		    .kind = CHECK_ORPHAN, .object = ob->name, .msg = why, .size = ob->size};
		emit(&c, &ev);
	}
	rc = c.r->problems ? -EUCLEAN : 0;
out:
	manifest_clear(&m);
	for (size_t i = 0; i < c.n; i++)
		free(c.objs[i].name);
	free(c.objs);
	return rc;
}
