/*
 * regmapfmt.c - the text of the region map (regions/<version>): encoding and strict
 * decoding (regmap.h, docs/REGIONS.md "The region map").
 *
 * Header lines "version N" and "max_rid N", then one "region <rid> key value ..." line
 * per region, by rid.  name and path are percent-encoded (regmap_encode()), so that a
 * value never holds a space or a newline and any byte but NUL survives.  The decoder
 * refuses what it cannot be sure of with -EUCLEAN and a log line naming the object;
 * unknown lines and unknown keys of a region line are skipped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"
#include "grow.h"
#include "log.h"
#include "regmap.h"
#include "textfmt.h"

/* ------------------------------------------------------------------ */
/* Encoding                                                            */
/* ------------------------------------------------------------------ */

char *regmap_encode(char *dst, size_t cap, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s && o + 4 <= cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c <= 0x20 || c >= 0x7f || c == '%') {
			dst[o++] = '%';
			dst[o++] = hex[c >> 4];
			dst[o++] = hex[c & 15];
		} else {
			dst[o++] = (char)c;
		}
	}
	if (cap)
		dst[o < cap ? o : cap - 1] = '\0';
	return dst;
}

/* A name or path may not hold '/' (names only), and is 1..cap-1 bytes. */
static bool valid_str(const char *s, size_t cap, bool name)
{
	size_t n = strnlen(s, cap);

	if (n == 0 || n >= cap)
		return false;
	if (name && (strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")))
		return false;
	return true;
}

bool regmap_entry_valid(const struct region_entry *e)
{
	return e->rid >= 1 && e->rid <= REGION_RID_MAX && REGION_OF_INO(e->root_ino) == e->rid &&
	       (e->root_ino & ((UINT64_C(1) << REGION_INO_SHIFT) - 1)) != 0 && e->parent_ino != 0 &&
	       e->parent_ino != e->root_ino && e->since >= 0 &&
	       valid_str(e->name, sizeof(e->name), true) &&
	       valid_str(e->path, sizeof(e->path), false);
}

int regmap_format(const struct region_map *m, char **out, size_t *len)
{
	struct text t = {0};
	char name[REGMAP_ENC_MAX(sizeof(m->v->name))], path[REGMAP_ENC_MAX(sizeof(m->v->path))];

	text_add(&t, "%s %d\nversion %" PRIu64 "\nmax_rid %" PRIu32 "\n", REGMAP_MAGIC,
	         REGMAP_FORMAT_VERSION, m->version, m->max_rid);
	for (size_t i = 0; i < m->n; i++) {
		const struct region_entry *e = &m->v[i];
		text_add(&t,
		         "region %" PRIu32 " root %" PRIu64 " parent %" PRIu64
		         " name %s since %" PRId64 " path %s\n",
		         e->rid, e->root_ino, e->parent_ino,
		         regmap_encode(name, sizeof(name), e->name), e->since,
		         regmap_encode(path, sizeof(path), e->path));
	}
	if (t.err) {
		free(t.p);
		return t.err;
	}
	*out = t.p;
	*len = t.len;
	return 0;
}

void region_map_free(struct region_map *m)
{
	if (!m)
		return;
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */
/* ------------------------------------------------------------------ */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/*
 * Decode the n bytes at p into dst (cap bytes, NUL-terminated): false on a raw byte that
 * should have been escaped, a bad escape, a NUL, or a result too long.
 */
static bool decode(const char *p, size_t n, char *dst, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c <= 0x20 || c >= 0x7f)
			return false;
		if (c == '%') {
			int hi, lo;
			if (i + 2 >= n)
				return false;
			hi = hexval(p[i + 1]);
			lo = hexval(p[i + 2]);
			if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
				return false;
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (o + 1 >= cap)
			return false;
		dst[o++] = (char)c;
	}
	dst[o] = '\0';
	return true;
}

#define R_ROOT 0x01
#define R_PARENT 0x02
#define R_NAME 0x04
#define R_SINCE 0x08
#define R_PATH 0x10
#define R_ALL 0x1f

/* The next space-separated token of [*p, end) into *tok, *n; false at the end. */
static bool token(const char **p, const char *end, const char **tok, size_t *n)
{
	const char *s = *p, *sp;

	if (s >= end)
		return false;
	sp = memchr(s, ' ', (size_t)(end - s));
	*tok = s;
	*n = (size_t)((sp ? sp : end) - s);
	*p = sp ? sp + 1 : end;
	return true;
}

static bool tok_is(const char *tok, size_t n, const char *name)
{
	return n == strlen(name) && !memcmp(tok, name, n);
}

/* The value of a region line ("<rid> key value ...") into *e.  false: malformed. */
static bool region_line(const char *p, size_t len, struct region_entry *e)
{
	const char *end = p + len, *k, *v;
	size_t kn, vn;
	unsigned have = 0, bit;
	uint64_t x;

	memset(e, 0, sizeof(*e));
	if (!token(&p, end, &k, &kn) || !text_num(k, kn, REGION_RID_MAX, &x) || x == 0)
		return false;
	e->rid = (uint32_t)x;
	while (token(&p, end, &k, &kn)) {
		if (kn == 0 || !token(&p, end, &v, &vn))
			return false; /* an empty key (two spaces) or a key without its value */
		bit = 0;
		if (tok_is(k, kn, "root")) {
			bit = R_ROOT;
			if (!text_num(v, vn, UINT64_MAX, &e->root_ino))
				return false;
		} else if (tok_is(k, kn, "parent")) {
			bit = R_PARENT;
			if (!text_num(v, vn, UINT64_MAX, &e->parent_ino))
				return false;
		} else if (tok_is(k, kn, "since")) {
			bit = R_SINCE;
			if (!text_num(v, vn, INT64_MAX, &x))
				return false;
			e->since = (int64_t)x;
		} else if (tok_is(k, kn, "name")) {
			bit = R_NAME;
			if (!decode(v, vn, e->name, sizeof(e->name)))
				return false;
		} else if (tok_is(k, kn, "path")) {
			bit = R_PATH;
			if (!decode(v, vn, e->path, sizeof(e->path)))
				return false;
		} /* else: a key of a later version, skipped with its value */
		if (have & bit)
			return false; /* a key given twice */
		have |= bit;
	}
	return have == R_ALL && regmap_entry_valid(e);
}

static int rid_cmp(const void *a, const void *b)
{
	const struct region_entry *x = a, *y = b;

	return x->rid < y->rid ? -1 : x->rid > y->rid;
}

#define H_VERSION 0x1
#define H_MAXRID 0x2

int regmap_parse(const char *name, const void *buf, size_t len, struct region_map *out)
{
	const char *p = buf, *end = p + len;
	struct region_map m = {0};
	struct text_line ln;
	uint64_t v, want = 0;
	unsigned have = 0;
	size_t cap = 0;
	int rc;

	if (len > REGMAP_OBJECT_MAX || !text_next_line(&p, end, &ln)) {
		log_err("region: %s: not a region map (%zu bytes)", name, len);
		return -EUCLEAN;
	}
	rc = text_check_magic("region map", name, &ln, REGMAP_MAGIC, REGMAP_FORMAT_VERSION);
	if (rc)
		return rc;
	while (text_next_line(&p, end, &ln)) {
		if (text_is(&ln, "version")) {
			if ((have & H_VERSION) ||
			    !text_num(ln.val, ln.vlen, UINT64_MAX, &m.version) || m.version == 0)
				goto bad;
			have |= H_VERSION;
		} else if (text_is(&ln, "max_rid")) {
			if ((have & H_MAXRID) || !text_num(ln.val, ln.vlen, REGION_RID_MAX, &v))
				goto bad;
			m.max_rid = (uint32_t)v;
			have |= H_MAXRID;
		} else if (text_is(&ln, "region")) {
			if (MW_GROW(m.v, cap, m.n + 1, 8)) {
				region_map_free(&m);
				return -ENOMEM;
			}
			if (!region_line(ln.val, ln.vlen, &m.v[m.n]))
				goto bad;
			m.n++;
		} /* else: a line of a later version, skipped */
	}
	if (have != (H_VERSION | H_MAXRID)) {
		log_err("region: %s: region map without its version or max_rid", name);
		goto fail;
	}
	if (fmt_parse_regions_name(name, &want) == 0 && want != m.version) {
		log_err("region: %s holds version %" PRIu64, name, m.version);
		goto fail;
	}
	if (m.n)
		qsort(m.v, m.n, sizeof(*m.v), rid_cmp);
	for (size_t i = 0; i < m.n; i++)
		if ((i && m.v[i].rid == m.v[i - 1].rid) || m.v[i].rid > m.max_rid) {
			log_err("region: %s: region %" PRIu32
			        " listed twice or above max_rid %" PRIu32,
			        name, m.v[i].rid, m.max_rid);
			goto fail;
		}
	*out = m;
	return 0;
bad:
	v = (uint64_t)(ln.val + ln.vlen - ln.name);
	log_err("region: %s: malformed line \"%.*s\"%s", name, (int)(v < 200 ? v : 200), ln.name,
	        v < 200 ? "" : "...");
fail:
	region_map_free(&m);
	return -EUCLEAN;
}
