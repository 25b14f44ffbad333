/*
 * fsck.c - the filesystem-level check (contract in fsck.h).
 *
 * Two scans of one engine (each over its own snapshot; on a quiescent or
 * read-only engine both see the same state): first the inode records 'I'
 * into a table sorted by inode number (keys sort by be64 inode number, so
 * the scan yields them in order), the orphan records 'O' and the
 * superblock; then the dentries 'D', chunks 'C' and xattrs 'X', each
 * looked up in the table.  Dentries are kept as (parent, child) edges and
 * a breadth-first walk from the root marks what is reachable.  Finally
 * every inode's nlink is compared with what was counted.
 *
 * Chunk values are never read (they may be blobs): only their keys matter.
 *
 * Regions (docs/REGIONS.md): mwfs_fsck_regions() scans the engines of every region in turn
 * into the same tables (rid ascending, so inode numbers stay sorted), each against its own
 * superblock; a region's root is reached through its entry in the parent region, so the
 * walk, the parent fields and nlink are checked across regions as within one.  A region's
 * root that nothing names (a create that did not finish) is a problem, its orphan mark or
 * not; the stale mark of a named root (the creator died before clearing it) is not.
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

/* What the check knows of one inode. */
struct ino {
	uint64_t ino;          /* inode number */
	uint32_t mode;         /* S_IFMT and permissions */
	uint32_t nlink;        /* recorded link count */
	uint64_t size;         /* recorded size */
	uint64_t stored;       /* regular files: recorded stored bytes */
	uint64_t extent_bytes; /* bytes of its extents and allocated ranges found */
	uint64_t last_end;     /* end of its last extent found (they come in order) */
	uint64_t parent;       /* directories: recorded parent */
	uint32_t names;        /* dentries pointing here */
	uint32_t subdirs;      /* directories: dentries of subdirectories inside */
	bool orphan;           /* has an orphan record */
	bool reached;          /* reachable from the root */
};

/* A dentry as an edge of the tree. */
struct edge {
	uint64_t parent, child;
};

/* The state of one check. */
struct fck {
	struct engine *e;         /* the engine being scanned (borrowed) */
	struct engine *const *es; /* every region's engine, by rid ascending (borrowed) */
	const uint32_t *rids;     /* their region ids */
	size_t nes;               /* how many */
	struct schema_super *sbs; /* their superblocks (have_sbs: which were read) */
	bool *have_sbs;
	mwfs_fsck_fn fn; /* may be NULL */
	void *arg;
	struct mwfs_fsck_report *r;
	struct ino *inos; /* sorted by ino */
	size_t ninos, capinos;
	struct edge *edges; /* dentries */
	size_t nedges, capedges;
	struct schema_super sb; /* the superblock */
	bool have_sb;
};

__attribute__((format(printf, 3, 4))) static void problem(struct fck *c, const char *what,
                                                          const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	c->r->problems++;
	if (c->fn)
		c->fn(c->arg, what, msg);
}

static int ino_cmp(const void *k, const void *e)
{
	uint64_t a = *(const uint64_t *)k, b = ((const struct ino *)e)->ino;
	return a < b ? -1 : a > b;
}

static struct ino *lookup(struct fck *c, uint64_t ino)
{
	return c->ninos ? bsearch(&ino, c->inos, c->ninos, sizeof(*c->inos), ino_cmp) : NULL;
}

int fs_scan_tag(struct engine *e, uint8_t tag, bool want_value, fs_scan_fn fn, void *arg)
{
	uint8_t end = (uint8_t)(tag + 1);
	struct engine_iter *it = NULL;
	int rc = engine_iter_new(e, &tag, 1, &end, 1, &it);

	for (; !rc && engine_iter_valid(it); engine_iter_next(it)) {
		size_t kn, vn = 0;
		const void *v = NULL;
		const uint8_t *k = engine_iter_key(it, &kn);
		struct engine_ref ref; /* the value's length, without its bytes */
		int vrc = 0;
		engine_iter_ref(it, &ref);
		vn = (size_t)engine_ref_len(&ref);
		if (want_value)
			vrc = engine_iter_value(it, &v, &vn);
		rc = vrc == -ENOMEM ? vrc : fn(arg, k, kn, v, vn, vrc);
	}
	if (!rc && it)
		rc = engine_iter_status(it);
	engine_iter_free(it);
	return rc;
}

/* fsck's callbacks, behind fs_scan_tag(): a value that cannot be read ends the check. */
struct fck_scan {
	struct fck *c;
	int (*fn)(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn);
};

static int fck_scan_cb(void *arg, const uint8_t *k, size_t kn, const void *v, size_t vn, int vrc)
{
	struct fck_scan *fs = arg;
	return vrc ? vrc : fs->fn(fs->c, k, kn, v, vn);
}

/*
 * Iterate the keys with one-byte prefix tag (values fetched when want_value) of every
 * region's engine in turn (rid ascending, so inode numbers come in order across them),
 * with c->sb that engine's superblock.
 */
static int scan(struct fck *c, uint8_t tag, bool want_value,
                int (*fn)(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn))
{
	struct fck_scan fs = {c, fn};
	int rc = 0;
	for (size_t i = 0; !rc && i < c->nes; i++) {
		c->e = c->es[i];
		c->sb = c->sbs[i];
		c->have_sb = c->have_sbs[i];
		rc = fs_scan_tag(c->e, tag, want_value, fck_scan_cb, &fs);
	}
	return rc;
}

static const char *type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG:
		return "file";
	case S_IFDIR:
		return "directory";
	case S_IFLNK:
		return "symlink";
	case S_IFCHR:
		return "char device";
	case S_IFBLK:
		return "block device";
	case S_IFIFO:
		return "fifo";
	case S_IFSOCK:
		return "socket";
	default:
		return "unknown type";
	}
}

static int on_inode(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	struct schema_inode in;
	const uint8_t *target = NULL;
	size_t tlen = 0;
	uint64_t ino = schema_key_u64(k, kn, 1);
	char what[48];

	snprintf(what, sizeof(what), "inode %" PRIu64, ino);
	c->r->inodes++;
	if (kn != 9 || ino == 0) {
		problem(c, what, "malformed inode key (%zu bytes)", kn);
		return 0;
	}
	if (schema_inode_decode(v, vn, &in, &target, &tlen)) {
		problem(c, what, "inode record does not decode (%zu bytes)", vn);
		return 0;
	}
	if (c->have_sb && ino >= c->sb.next_ino)
		problem(c, what, "inode number not below the superblock's next_ino %" PRIu64,
		        c->sb.next_ino);
	if (S_ISLNK(in.mode) && (tlen == 0 || tlen != in.size))
		problem(c, what,
		        "symlink target missing or of the wrong length (%zu, size %" PRIu64 ")",
		        tlen, in.size);
	if (MW_GROW(c->inos, c->capinos, c->ninos + 1, 256))
		return -ENOMEM;
	struct ino *e = &c->inos[c->ninos++];
	memset(e, 0, sizeof(*e));
	e->ino = ino;
	e->mode = in.mode;
	e->nlink = in.nlink;
	e->size = in.size;
	e->stored = in.stored;
	e->parent = in.parent;
	e->reached = ino == SCHEMA_ROOT_INO;
	return 0;
}

static int on_orphan(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	uint64_t ino = schema_key_u64(k, kn, 1);
	struct ino *e = lookup(c, ino);
	char what[48];

	(void)v;
	(void)vn;
	c->r->orphans++;
	snprintf(what, sizeof(what), "orphan %" PRIu64, ino);
	if (!e)
		problem(c, what, "orphan record of a missing inode");
	else
		e->orphan = true;
	return 0;
}

static int on_dentry(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	uint64_t parent = schema_key_u64(k, kn, 1), child;
	uint32_t dtype;
	struct ino *p, *ch;
	char what[320];
	int nlen = kn > 9 ? (int)(kn - 9) : 0;

	c->r->dentries++;
	snprintf(what, sizeof(what), "dentry %" PRIu64 "/'%.*s'", parent, nlen,
	         (const char *)k + 9);
	if (kn <= 9 || kn > 9 + SCHEMA_NAME_MAX || memchr(k + 9, '/', kn - 9) ||
	    memchr(k + 9, 0, kn - 9)) {
		problem(c, what, "malformed dentry key (%zu bytes)", kn);
		return 0;
	}
	if (schema_dentry_decode(v, vn, &child, &dtype)) {
		problem(c, what, "dentry value does not decode (%zu bytes)", vn);
		return 0;
	}
	p = lookup(c, parent);
	if (!p)
		problem(c, what, "parent inode %" PRIu64 " does not exist", parent);
	else if (!S_ISDIR(p->mode))
		problem(c, what, "parent inode %" PRIu64 " is a %s, not a directory", parent,
		        type_name(p->mode));
	ch = lookup(c, child);
	if (!ch) {
		problem(c, what, "points to missing inode %" PRIu64, child);
		return 0;
	}
	ch->names++;
	if ((ch->mode & S_IFMT) != (dtype & S_IFMT))
		problem(c, what, "says %s but inode %" PRIu64 " is a %s", type_name(dtype), child,
		        type_name(ch->mode));
	if (S_ISDIR(ch->mode)) {
		if (p)
			p->subdirs++;
		if (ch->parent != parent)
			problem(c, what, "directory %" PRIu64 " records parent %" PRIu64, child,
			        ch->parent);
		if (child == SCHEMA_ROOT_INO)
			problem(c, what, "names the root directory");
	}
	if (MW_GROW(c->edges, c->capedges, c->nedges + 1, 256))
		return -ENOMEM;
	c->edges[c->nedges++] = (struct edge){parent, child};
	return 0;
}

static int on_extent(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	uint64_t ino = schema_key_u64(k, kn, 1), end = schema_key_u64(k, kn, 9);
	struct ino *e = lookup(c, ino);
	char what[80];

	(void)v;
	c->r->extents++;
	snprintf(what, sizeof(what), "extent %" PRIu64 "/[%" PRIu64 ",%" PRIu64 ")", ino,
	         end >= vn ? end - vn : 0, end);
	if (kn != 17 || vn == 0 || vn > end)
		problem(c, what, "malformed extent (key %zu bytes, value %zu bytes)", kn, vn);
	else if (!e)
		problem(c, what, "leaked: extent of missing inode %" PRIu64, ino);
	else if (!S_ISREG(e->mode))
		problem(c, what, "extent of a %s", type_name(e->mode));
	else if (end > e->size)
		problem(c, what, "leaked: beyond the end of the file (size %" PRIu64 ")", e->size);
	else if (end - vn < e->last_end)
		problem(c, what, "overlaps the extent ending at %" PRIu64, e->last_end);
	if (e && kn == 17 && vn <= end) {
		e->extent_bytes += vn;
		e->last_end = end;
	}
	return 0;
}

/* An allocated range ('A' ino end -> start): counted in the inode's stored bytes. */
static int on_alloc(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	uint64_t ino = schema_key_u64(k, kn, 1), end = schema_key_u64(k, kn, 9);
	uint64_t start = vn == SCHEMA_ALLOC_LEN ? schema_key_u64(v, vn, 0) : end;
	struct ino *e = lookup(c, ino);
	char what[80];

	c->r->allocs++;
	snprintf(what, sizeof(what), "allocated range %" PRIu64 "/[%" PRIu64 ",%" PRIu64 ")", ino,
	         start, end);
	if (kn != 17 || vn != SCHEMA_ALLOC_LEN || start >= end)
		problem(c, what, "malformed (key %zu bytes, value %zu bytes)", kn, vn);
	else if (!e)
		problem(c, what, "leaked: allocated range of missing inode %" PRIu64, ino);
	else if (!S_ISREG(e->mode))
		problem(c, what, "allocated range of a %s", type_name(e->mode));
	else
		e->extent_bytes += end - start;
	return 0;
}

static int on_xattr(struct fck *c, const uint8_t *k, size_t kn, const uint8_t *v, size_t vn)
{
	uint64_t ino = schema_key_u64(k, kn, 1);
	char what[320];
	int nlen = kn > 9 ? (int)(kn - 9) : 0;

	(void)v;
	(void)vn;
	c->r->xattrs++;
	snprintf(what, sizeof(what), "xattr %" PRIu64 "/'%.*s'", ino, nlen, (const char *)k + 9);
	if (kn <= 9)
		problem(c, what, "malformed xattr key (%zu bytes)", kn);
	else if (!lookup(c, ino))
		problem(c, what, "xattr of missing inode %" PRIu64, ino);
	return 0;
}

static int edge_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct edge *)a)->parent, y = ((const struct edge *)b)->parent;
	return x < y ? -1 : x > y;
}

/* Mark everything reachable from the root (breadth-first over the edges). */
static int walk(struct fck *c)
{
	uint64_t *queue = malloc((c->ninos + 1) * sizeof(*queue));
	size_t head = 0, tail = 0;

	if (!queue)
		return -ENOMEM;
	qsort(c->edges, c->nedges, sizeof(*c->edges), edge_cmp);
	if (lookup(c, SCHEMA_ROOT_INO))
		queue[tail++] = SCHEMA_ROOT_INO;
	while (head < tail) {
		uint64_t dir = queue[head++];
		size_t lo = 0, hi = c->nedges;
		while (lo < hi) { /* first edge of dir */
			size_t mid = (lo + hi) / 2;
			if (c->edges[mid].parent < dir)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (; lo < c->nedges && c->edges[lo].parent == dir; lo++) {
			struct ino *ch = lookup(c, c->edges[lo].child);
			if (!ch || ch->reached)
				continue;
			ch->reached = true;
			if (S_ISDIR(ch->mode) && tail <= c->ninos)
				queue[tail++] = ch->ino;
		}
	}
	free(queue);
	return 0;
}

static void final_checks(struct fck *c)
{
	char what[48];

	for (size_t i = 0; i < c->ninos; i++) {
		struct ino *e = &c->inos[i];
		snprintf(what, sizeof(what), "inode %" PRIu64, e->ino);
		bool region_root = e->ino >> FS_REGION_SHIFT && (e->ino & 0xffffffffffull) == 1;
		if (region_root && !e->reached)
			problem(c, what,
			        "the root of region %" PRIu64 " is named by no directory entry (a "
			        "region create that did not finish, or a lost entry)%s",
			        e->ino >> FS_REGION_SHIFT,
			        e->orphan ? "; it is marked an orphan" : "");
		else if (!e->reached && !e->orphan)
			problem(c, what, "%s unreachable from the root and not an orphan",
			        type_name(e->mode));
		if (S_ISDIR(e->mode)) {
			if (e->nlink != 2 + e->subdirs)
				problem(c, what,
				        "directory nlink %" PRIu32 ", expected 2 + %" PRIu32
				        " subdirectories",
				        e->nlink, e->subdirs);
			if (e->ino != SCHEMA_ROOT_INO && e->names > 1)
				problem(c, what, "directory has %" PRIu32 " names", e->names);
		} else if (e->nlink != e->names) {
			problem(c, what, "%s nlink %" PRIu32 " but %" PRIu32 " directory entries",
			        type_name(e->mode), e->nlink, e->names);
		}
		if (S_ISREG(e->mode) && e->stored != e->extent_bytes)
			problem(c, what,
			        "records %" PRIu64
			        " stored bytes, its extents and allocated ranges "
			        "hold %" PRIu64,
			        e->stored, e->extent_bytes);
	}
}

int mwfs_fsck_regions(struct engine *const *es, const uint32_t *rids, size_t n, mwfs_fsck_fn fn,
                      void *arg, struct mwfs_fsck_report *r)
{
	struct mwfs_fsck_report own;
	struct fck c = {.es = es, .rids = rids, .nes = n, .fn = fn, .arg = arg, .r = r ? r : &own};
	uint8_t key[SCHEMA_KEY_MAX];
	char what[64];
	int rc = 0;

	memset(c.r, 0, sizeof(*c.r));
	c.sbs = calloc(n ? n : 1, sizeof(*c.sbs));
	c.have_sbs = calloc(n ? n : 1, sizeof(*c.have_sbs));
	if (!c.sbs || !c.have_sbs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		void *val = NULL;
		size_t vlen = 0;
		if (rids[i])
			snprintf(what, sizeof(what), "region %" PRIu32 " superblock", rids[i]);
		else
			snprintf(what, sizeof(what), "superblock");
		rc = engine_get(es[i], key, schema_key_super(key), &val, &vlen);
		if (rc == -ENOENT) {
			problem(&c, what,
			        "missing: not a memwalfs filesystem, never mounted, or its objects "
			        "were deleted (memwalfs fsck --salvage keeps what remains)");
		} else if (rc) {
			goto out;
		} else if ((rc = schema_super_decode(val, vlen, &c.sbs[i])) != 0) {
			problem(&c, what, "does not decode (%s, version %" PRIu32 ")",
			        rc == -EPROTONOSUPPORT ? "unknown version" : "corrupt",
			        c.sbs[i].version);
		} else {
			c.have_sbs[i] = true;
		}
		rc = 0;
		free(val);
	}
	rc = scan(&c, SCHEMA_TAG_INODE, true, on_inode);
	if (!rc)
		rc = scan(&c, SCHEMA_TAG_ORPHAN, false, on_orphan);
	if (!rc)
		rc = scan(&c, SCHEMA_TAG_DENTRY, true, on_dentry);
	if (!rc)
		rc = scan(&c, SCHEMA_TAG_EXTENT, false, on_extent);
	if (!rc)
		rc = scan(&c, SCHEMA_TAG_ALLOC, true, on_alloc);
	if (!rc)
		rc = scan(&c, SCHEMA_TAG_XATTR, false, on_xattr);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		uint64_t root =
		    rids[i] ? (uint64_t)rids[i] << FS_REGION_SHIFT | 1 : SCHEMA_ROOT_INO;
		struct ino *ri = lookup(&c, root);
		snprintf(what, sizeof(what), "inode %" PRIu64, root);
		if (!c.have_sbs[i])
			continue;
		if (!ri)
			problem(&c, what, "the root directory%s is missing",
			        rids[i] ? " of a region" : "");
		else if (!S_ISDIR(ri->mode))
			problem(&c, what, "the root is a %s", type_name(ri->mode));
	}
	rc = walk(&c);
	if (rc)
		goto out;
	final_checks(&c);
	rc = c.r->problems ? -EUCLEAN : 0;
out:
	free(c.inos);
	free(c.edges);
	free(c.sbs);
	free(c.have_sbs);
	return rc;
}

int mwfs_fsck(struct engine *e, mwfs_fsck_fn fn, void *arg, struct mwfs_fsck_report *r)
{
	uint32_t rid0 = 0;
	return mwfs_fsck_regions(&e, &rid0, 1, fn, arg, r);
}

int mwfs_fsck_store(struct store *st, mwfs_fsck_fn fn, void *arg, struct mwfs_fsck_report *r)
{
	struct engine_opts o;
	struct engine *e = NULL;
	int rc;

	engine_opts_default(&o);
	o.read_only = true;
	o.single_writer_ok = true;
	rc = engine_open(st, &o, &e);
	if (rc)
		return rc;
	rc = mwfs_fsck(e, fn, arg, r);
	engine_close(e);
	return rc;
}
