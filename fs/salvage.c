/*
 * salvage.c - make the tree consistent again over what a damaged store kept
 * (contract in fsck.h; `memwalfs fsck --salvage`, README.md "When the store
 * lost objects").
 *
 * Runs on a writer engine opened with opts.salvage (engine/check/salvage.c), which
 * holds every record that remains.  Scans, like fsck.c's: the superblock, the
 * inode records, the orphan records, the extents (each one's bytes are read:
 * an extent whose pack is gone cannot be), the dentries and the xattrs.  Then
 * it decides, and writes the decisions in batches:
 *
 *   - an extent that cannot be read is deleted (a hole; its bytes are counted
 *     as lost for its file);
 *   - a dentry whose inode is gone is deleted (a name lost); one under an
 *     inode that is not a directory too;
 *   - an inode that is gone but still has extents becomes a regular file
 *     (0644, root), one that still has dentries under it a directory (0755;
 *     found by a first scan of the dentries' keys, so that the name naming it
 *     stays), and the root is made again when it is gone;
 *   - an inode no name reaches (and not an orphan, unlinked while open) is
 *     linked into /lost+found as "#<ino>" (only the top of an unreachable
 *     subtree: a directory keeps its children);
 *   - link counts, directories' parents, files' sizes (at least their last
 *     extent's end) and stored bytes are set from what remains;
 *   - xattrs and orphan records of gone inodes are deleted;
 *   - the superblock is written again when it is gone, or when its next_ino
 *     is not above every inode number that remains.
 *
 * Every loss goes to the callback in words.  A check (fsck.c) of the result
 * must then be clean.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"
#include "fsck.h"
#include "grow.h"
#include "internal.h"
#include "schema.h"

/* One inode as the salvage sees it. */
struct sino {
	uint64_t ino;           /* inode number */
	struct schema_inode in; /* its record (made up when made) */
	uint8_t *target;        /* symlink target (malloc()ed) or NULL */
	size_t tlen;            /* its length */
	bool made;              /* no record remained: made up here */
	bool dirty;             /* the record must be written */
	bool orphan;            /* has an orphan record */
	bool reached;           /* reachable from the root */
	uint32_t names;         /* dentries kept that point here */
	uint32_t subdirs;       /* directories: kept dentries of subdirectories inside */
	uint64_t ext_bytes;     /* bytes of its extents that remain */
	uint64_t max_end;       /* end of its last extent that remains */
	uint64_t lost_bytes;    /* bytes of its extents that could not be read */
	uint64_t dparent;       /* the parent of the first kept dentry naming it (0: none) */
	char name[SCHEMA_NAME_MAX + 1]; /* that dentry's name, for messages */
};

/* A dentry kept. */
struct sedge {
	uint64_t parent, child;
};

struct salv {
	struct engine *e;
	mwfs_fsck_fn fn;
	void *arg;
	struct mwfs_salvage_report *r;
	struct sino *inos; /* sorted by ino */
	size_t ninos, capinos;
	struct sedge *edges;
	size_t nedges, capedges;
	struct schema_super sb;
	bool have_sb;
	struct engine_batch *b; /* writes not yet applied */
	size_t bops;            /* ops in b */
	uint64_t lf;            /* /lost+found's inode, once known (0: none) */
};

__attribute__((format(printf, 3, 4))) static void say(struct salv *s, const char *what,
                                                      const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (s->fn)
		s->fn(s->arg, what, msg);
}

/* Apply the batch when it is large (or when force) and wait until it is durable. */
static int flush_batch(struct salv *s, bool force)
{
	int rc = 0;

	if (s->bops && (force || s->bops >= 512)) {
		rc = engine_write(s->e, s->b, ENGINE_WAIT, NULL);
		engine_batch_clear(s->b);
		s->bops = 0;
	}
	return rc;
}

static int del(struct salv *s, const uint8_t *k, size_t kn)
{
	int rc = engine_batch_delete(s->b, k, kn);
	s->bops++;
	return rc ? rc : flush_batch(s, false);
}

static int put(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn)
{
	int rc = engine_batch_put(s->b, k, kn, v, vn);
	s->bops++;
	return rc ? rc : flush_batch(s, false);
}

static int ino_cmp(const void *k, const void *e)
{
	uint64_t a = *(const uint64_t *)k, b = ((const struct sino *)e)->ino;
	return a < b ? -1 : a > b;
}

static struct sino *find(struct salv *s, uint64_t ino)
{
	return s->ninos ? bsearch(&ino, s->inos, s->ninos, sizeof(*s->inos), ino_cmp) : NULL;
}

/* Add inode ino (kept in order); NULL on -ENOMEM. */
static struct sino *add(struct salv *s, uint64_t ino)
{
	size_t lo = 0, hi = s->ninos;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->inos[mid].ino < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (MW_GROW(s->inos, s->capinos, s->ninos + 1, 256))
		return NULL;
	memmove(&s->inos[lo + 1], &s->inos[lo], (s->ninos - lo) * sizeof(*s->inos));
	s->ninos++;
	memset(&s->inos[lo], 0, sizeof(s->inos[lo]));
	s->inos[lo].ino = ino;
	return &s->inos[lo];
}

/* Make up the record of a gone inode of type mode (a file or a directory). */
static struct sino *make(struct salv *s, uint64_t ino, uint32_t mode)
{
	struct sino *i = add(s, ino);

	if (!i)
		return NULL;
	i->made = i->dirty = true;
	i->in.mode = mode;
	i->in.nlink = S_ISDIR(mode) ? 2 : 1;
	i->in.parent = SCHEMA_ROOT_INO;
	fs_now(&i->in.mtime_sec, &i->in.mtime_nsec);
	i->in.atime_sec = i->in.ctime_sec = i->in.mtime_sec;
	i->in.atime_nsec = i->in.ctime_nsec = i->in.mtime_nsec;
	s->r->inodes_made++;
	return i;
}

/* fs_scan_tag() with salvage's callbacks. */
struct salv_scan {
	struct salv *s;
	int (*fn)(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc);
};

static int salv_scan_cb(void *arg, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	struct salv_scan *ss = arg;
	return ss->fn(ss->s, k, kn, v, vn, vrc);
}

static int scan(struct salv *s, uint8_t tag, bool want_value,
                int (*fn)(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn,
                          int vrc))
{
	struct salv_scan ss = {s, fn};
	return fs_scan_tag(s->e, tag, want_value, salv_scan_cb, &ss);
}

static int on_super(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	(void)k;
	(void)kn;
	if (vrc == 0 && schema_super_decode(v, vn, &s->sb) == 0)
		s->have_sb = true;
	return 0;
}

static int on_inode(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	uint64_t ino = schema_key_u64(k, kn, 1);
	struct schema_inode in;
	const uint8_t *target = NULL;
	size_t tlen = 0;
	char what[48];

	snprintf(what, sizeof(what), "inode %" PRIu64, ino);
	if (kn != 9 || ino == 0 || vrc || schema_inode_decode(v, vn, &in, &target, &tlen)) {
		say(s, what,
		    "its record is damaged: dropped (its data and names go with it "
		    "unless they make it again)");
		s->r->records_dropped++;
		return del(s, k, kn);
	}
	struct sino *i = add(s, ino);
	if (!i)
		return -ENOMEM;
	i->in = in;
	if (tlen) {
		if (!(i->target = malloc(tlen)))
			return -ENOMEM;
		memcpy(i->target, target, tlen);
		i->tlen = tlen;
	}
	return 0;
}

static int on_orphan(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	struct sino *i = find(s, schema_key_u64(k, kn, 1));

	(void)v;
	(void)vn;
	(void)vrc;
	if (!i)
		return del(s, k, kn); /* of a gone inode: nothing to reclaim */
	i->orphan = true;
	return 0;
}

static int on_extent(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	uint64_t ino = schema_key_u64(k, kn, 1), end = schema_key_u64(k, kn, 9);
	struct sino *i = find(s, ino);

	(void)v;
	if (kn != 17 || vn == 0 || vn > end)
		return del(s, k, kn); /* malformed: nothing to keep */
	if (i && !S_ISREG(i->in.mode)) {
		s->r->extents_lost++;
		return del(s, k, kn);
	}
	if (!i && !(i = make(s, ino, S_IFREG | 0644)))
		return -ENOMEM;
	if (vrc) {
		/* its pack is gone (or damaged): the range becomes a hole */
		i->lost_bytes += vn;
		s->r->extents_lost++;
		s->r->bytes_lost += vn;
		return del(s, k, kn);
	}
	i->ext_bytes += vn;
	if (end > i->max_end)
		i->max_end = end;
	s->r->extents++;
	return 0;
}

static int on_dentry(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	uint64_t parent = schema_key_u64(k, kn, 1), child = 0;
	uint32_t dtype = 0;
	int nlen = kn > 9 ? (int)(kn - 9) : 0;
	char what[320];

	snprintf(what, sizeof(what), "name '%.*s' in directory %" PRIu64, nlen, (const char *)k + 9,
	         parent);
	if (kn <= 9 || kn > 9 + SCHEMA_NAME_MAX || vrc ||
	    schema_dentry_decode(v, vn, &child, &dtype)) {
		say(s, what, "damaged: dropped");
		s->r->names_lost++;
		return del(s, k, kn);
	}
	struct sino *c = find(s, child);
	if (!c) {
		say(s, what, "lost: inode %" PRIu64 " it named is gone", child);
		s->r->names_lost++;
		return del(s, k, kn);
	}
	struct sino *p = find(s, parent); /* on_parent() made the gone ones */
	if (!p || !S_ISDIR(p->in.mode) || child == SCHEMA_ROOT_INO || child == parent ||
	    (S_ISDIR(c->in.mode) && c->dparent)) {
		say(s, what, "dropped (%s)",
		    !S_ISDIR(p->in.mode) ? "under a non-directory"
		                         : "a second name of a directory");
		s->r->names_lost++;
		return del(s, k, kn);
	}
	if ((dtype & S_IFMT) != (c->in.mode & S_IFMT)) {
		uint8_t dv[SCHEMA_DENTRY_LEN];
		schema_dentry_encode(child, c->in.mode, dv);
		int rc = put(s, k, kn, dv, sizeof(dv));
		if (rc)
			return rc;
		c = find(s, child);
	}
	if (!c->dparent) {
		c->dparent = parent;
		snprintf(c->name, sizeof(c->name), "%.*s", nlen, (const char *)k + 9);
	}
	if (MW_GROW(s->edges, s->capedges, s->nedges + 1, 256))
		return -ENOMEM;
	s->edges[s->nedges++] = (struct sedge){parent, child};
	return 0;
}

/* Before the dentries: a gone inode that still has names under it becomes a directory. */
static int on_parent(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	uint64_t parent = schema_key_u64(k, kn, 1);
	char what[48];

	(void)v;
	(void)vn;
	(void)vrc;
	if (kn <= 9 || find(s, parent))
		return 0;
	if (!make(s, parent, S_IFDIR | 0755))
		return -ENOMEM;
	snprintf(what, sizeof(what), "inode %" PRIu64, parent);
	say(s, what, "a directory whose record was gone, with names inside: made again");
	return 0;
}

static int on_xattr(struct salv *s, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	(void)v;
	(void)vn;
	(void)vrc;
	return find(s, schema_key_u64(k, kn, 1)) ? 0 : del(s, k, kn);
}

static int edge_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct sedge *)a)->parent, y = ((const struct sedge *)b)->parent;
	return x < y ? -1 : x > y;
}

/* Mark what is reachable from ino (breadth-first over the sorted edges). */
static int reach(struct salv *s, uint64_t ino)
{
	uint64_t *q = malloc((s->ninos + 1) * sizeof(*q));
	size_t qh = 0, qt = 0;

	if (!q)
		return -ENOMEM;
	find(s, ino)->reached = true;
	q[qt++] = ino;
	while (qh < qt) {
		uint64_t p = q[qh++];
		struct sedge key = {p, 0};
		struct sedge *f = bsearch(&key, s->edges, s->nedges, sizeof(*s->edges), edge_cmp);
		if (!f)
			continue;
		while (f > s->edges && f[-1].parent == p)
			f--;
		for (; f < s->edges + s->nedges && f->parent == p; f++) {
			struct sino *c = find(s, f->child);
			if (c && !c->reached) {
				c->reached = true;
				q[qt++] = c->ino;
			}
		}
	}
	free(q);
	return 0;
}

/* Put a kept name for child under parent (a new dentry). */
static int link_name(struct salv *s, uint64_t parent, uint64_t child, const char *name)
{
	uint8_t key[SCHEMA_KEY_MAX], dv[SCHEMA_DENTRY_LEN];
	struct sino *c = find(s, child);
	size_t kn = schema_key_dentry(key, parent, name, strlen(name));

	schema_dentry_encode(child, c->in.mode, dv);
	if (!c->dparent) {
		c->dparent = parent;
		snprintf(c->name, sizeof(c->name), "%s", name);
	}
	if (MW_GROW(s->edges, s->capedges, s->nedges + 1, 256))
		return -ENOMEM;
	s->edges[s->nedges++] = (struct sedge){parent, child};
	qsort(s->edges, s->nedges, sizeof(*s->edges), edge_cmp);
	return put(s, key, kn, dv, sizeof(dv));
}

/* /lost+found: the directory of that name in the root, made when there is none. */
static int lost_found(struct salv *s, uint64_t *next_ino)
{
	uint8_t key[SCHEMA_KEY_MAX];
	void *v = NULL;
	size_t vn = 0;
	uint64_t ino;
	uint32_t dtype;
	size_t kn = schema_key_dentry(key, SCHEMA_ROOT_INO, "lost+found", 10);

	if (s->lf)
		return 0;
	if (engine_get(s->e, key, kn, &v, &vn) == 0 &&
	    schema_dentry_decode(v, vn, &ino, &dtype) == 0 && S_ISDIR(dtype) && find(s, ino)) {
		free(v);
		s->lf = ino;
		return 0;
	}
	free(v);
	ino = (*next_ino)++;
	if (!make(s, ino, S_IFDIR | 0700))
		return -ENOMEM;
	s->r->inodes_made--; /* not a salvaged inode */
	find(s, ino)->reached = true;
	s->lf = ino;
	return link_name(s, SCHEMA_ROOT_INO, ino, "lost+found");
}

/* The top of the unreachable subtree holding i: climb the first names up. */
static struct sino *top_of(struct salv *s, struct sino *i)
{
	for (size_t steps = 0; i->dparent && steps < s->ninos; steps++) {
		struct sino *p = find(s, i->dparent);
		if (!p || p->reached)
			break;
		i = p;
	}
	return i;
}

/* Link every unreachable inode that is not an orphan under /lost+found. */
static int relink(struct salv *s, uint64_t *next_ino)
{
	int rc;

	for (size_t n = 0; n < s->ninos; n++) {
		struct sino *i = &s->inos[n];
		char name[32], what[48];
		if (i->reached || i->orphan)
			continue;
		uint64_t top = top_of(s, i)->ino;
		if ((rc = lost_found(s, next_ino)))
			return rc;
		/* lost_found() may have moved the array: look again */
		struct sino *t = find(s, top);
		if (t->reached)
			continue;
		snprintf(name, sizeof(name), "#%" PRIu64, top);
		snprintf(what, sizeof(what), "inode %" PRIu64, top);
		say(s, what, "no name reached it: linked as /lost+found/%s%s%s%s", name,
		    t->name[0] ? " (it was '" : "", t->name, t->name[0] ? "')" : "");
		s->r->relinked++;
		if ((rc = link_name(s, s->lf, top, name)) || (rc = reach(s, top)))
			return rc;
		t = find(s, top);
		if (S_ISDIR(t->in.mode))
			t->dparent = s->lf;
		n = (size_t)-1; /* start over: lost_found() may have shifted the array */
	}
	return 0;
}

/* Counts, parents, sizes; write every record that changed. */
static int settle(struct salv *s)
{
	for (size_t n = 0; n < s->ninos; n++)
		s->inos[n].names = s->inos[n].subdirs = 0;
	for (size_t n = 0; n < s->nedges; n++) {
		struct sino *c = find(s, s->edges[n].child), *p = find(s, s->edges[n].parent);
		if (!c || !p)
			continue;
		c->names++;
		if (S_ISDIR(c->in.mode))
			p->subdirs++;
	}
	for (size_t n = 0; n < s->ninos; n++) {
		struct sino *i = &s->inos[n];
		struct schema_inode in = i->in;
		char what[48];
		if (S_ISDIR(in.mode)) {
			in.nlink = 2 + i->subdirs;
			in.parent = i->ino == SCHEMA_ROOT_INO ? SCHEMA_ROOT_INO
			            : i->dparent              ? i->dparent
			                                      : in.parent;
		} else {
			in.nlink = i->names;
		}
		if (S_ISREG(in.mode)) {
			in.stored = i->ext_bytes;
			if (in.size < i->max_end)
				in.size = i->max_end;
		}
		if (i->lost_bytes) {
			snprintf(what, sizeof(what), "inode %" PRIu64, i->ino);
			say(s, what, "%s%s%s%" PRIu64 " bytes of its data lost (now holes)",
			    i->name[0] ? "file '" : "", i->name, i->name[0] ? "': " : "",
			    i->lost_bytes);
			s->r->files_damaged++;
		}
		if (!i->dirty && !memcmp(&in, &i->in, sizeof(in)))
			continue;
		uint8_t key[SCHEMA_KEY_MAX], *rec = malloc(SCHEMA_INODE_LEN + i->tlen);
		if (!rec)
			return -ENOMEM;
		size_t kn = schema_key_inode(key, i->ino);
		size_t rn = schema_inode_encode(&in, (const char *)i->target, i->tlen, rec);
		int rc = put(s, key, kn, rec, rn);
		free(rec);
		if (rc)
			return rc;
		i->in = in;
		s->r->records_fixed++;
	}
	return 0;
}

int mwfs_salvage(struct engine *e, mwfs_fsck_fn fn, void *arg, struct mwfs_salvage_report *r)
{
	struct mwfs_salvage_report dummy;
	struct salv s = {.e = e, .fn = fn, .arg = arg, .r = r ? r : &dummy};
	uint64_t max_ino = SCHEMA_ROOT_INO, next_ino;
	int rc;

	memset(s.r, 0, sizeof(*s.r));
	if ((rc = engine_batch_new(&s.b)))
		return rc;
	if ((rc = scan(&s, SCHEMA_TAG_SUPER, true, on_super)) ||
	    (rc = scan(&s, SCHEMA_TAG_INODE, true, on_inode)) ||
	    (rc = scan(&s, SCHEMA_TAG_ORPHAN, false, on_orphan)) ||
	    (rc = scan(&s, SCHEMA_TAG_EXTENT, true, on_extent)))
		goto out;
	if (!find(&s, SCHEMA_ROOT_INO)) {
		say(&s, "inode 1", "the root directory was gone: made again");
		if (!make(&s, SCHEMA_ROOT_INO, S_IFDIR | 0755)) {
			rc = -ENOMEM;
			goto out;
		}
	}
	if ((rc = scan(&s, SCHEMA_TAG_DENTRY, false, on_parent)) ||
	    (rc = scan(&s, SCHEMA_TAG_DENTRY, true, on_dentry)) ||
	    (rc = scan(&s, SCHEMA_TAG_XATTR, false, on_xattr)))
		goto out;
	for (size_t n = 0; n < s.ninos; n++)
		if (s.inos[n].ino > max_ino)
			max_ino = s.inos[n].ino;
	next_ino = max_ino + 1;
	if (s.have_sb && s.sb.next_ino > next_ino)
		next_ino = s.sb.next_ino;
	qsort(s.edges, s.nedges, sizeof(*s.edges), edge_cmp);
	if ((rc = reach(&s, SCHEMA_ROOT_INO)) || (rc = relink(&s, &next_ino)) || (rc = settle(&s)))
		goto out;
	if (!s.have_sb || s.sb.next_ino < next_ino) {
		uint8_t key[SCHEMA_KEY_MAX], v[SCHEMA_SUPER_LEN];
		if (!s.have_sb) {
			say(&s, "superblock", "was gone: written again (chunk size 1 MiB)");
			s.sb.version = SCHEMA_VERSION;
			s.sb.chunk_size = 1u << 20;
		}
		/* past a whole range of 1024, as a create that starts one would leave it */
		s.sb.next_ino = (next_ino + 1023) / 1024 * 1024 + 1024;
		schema_super_encode(&s.sb, v);
		s.r->superblock_written = true;
		if ((rc = put(&s, key, schema_key_super(key), v, sizeof(v))))
			goto out;
	}
	rc = flush_batch(&s, true);
	if (!rc)
		rc = engine_sync(e);
	for (size_t n = 0; n < s.ninos; n++)
		if (S_ISREG(s.inos[n].in.mode) && s.inos[n].reached)
			s.r->files++;
out:
	for (size_t n = 0; n < s.ninos; n++)
		free(s.inos[n].target);
	free(s.inos);
	free(s.edges);
	engine_batch_free(s.b);
	return rc;
}
