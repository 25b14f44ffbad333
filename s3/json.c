/*
 * json.c - a small, strict JSON reader (see json.h).  Recursive descent over
 * (doc, n) with an explicit end pointer; every read checks p < end first.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "json.h"
#include "xml.h"

#define JSON_MAX_DEPTH 16

struct jr {
	const char *p;   /* next byte */
	const char *end; /* one past the last byte */
};

/* Growable text buffer for decoded strings. */
struct jbuf {
	char *p;
	size_t n, cap;
};

static int jb_add(struct jbuf *b, const char *s, size_t n)
{
	if (MW_GROW(b->p, b->cap, b->n + n + 1, 128))
		return -ENOMEM;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

static void skip_ws(struct jr *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
		r->p++;
}

static int hex4(struct jr *r, unsigned *out)
{
	unsigned v = 0;
	if (r->end - r->p < 4)
		return -EBADMSG;
	for (int i = 0; i < 4; i++) {
		char c = *r->p++;
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -EBADMSG;
	}
	*out = v;
	return 0;
}

static int put_utf8(struct jbuf *b, unsigned cp)
{
	char u[4];
	int n = xml_utf8(cp, u); /* a NUL would cut the C string: -EBADMSG */
	return n < 0 ? n : jb_add(b, u, (size_t)n);
}

/* A string at r->p (the opening quote), decoded into b (b may be NULL: skip). */
static int parse_string(struct jr *r, struct jbuf *b)
{
	int rc;
	if (r->p >= r->end || *r->p != '"')
		return -EBADMSG;
	r->p++;
	if (b) {
		b->n = 0;
		if ((rc = jb_add(b, "", 0)))
			return rc;
	}
	for (;;) {
		const char *s = r->p;
		while (r->p < r->end && *r->p != '"' && *r->p != '\\' &&
		       (unsigned char)*r->p >= 0x20)
			r->p++;
		if (b && r->p > s && (rc = jb_add(b, s, (size_t)(r->p - s))))
			return rc;
		if (r->p >= r->end || (unsigned char)*r->p < 0x20)
			return -EBADMSG; /* unterminated, or a raw control character */
		if (*r->p == '"') {
			r->p++;
			return 0;
		}
		r->p++; /* backslash */
		if (r->p >= r->end)
			return -EBADMSG;
		char c = *r->p++, o;
		switch (c) {
		case '"':
		case '\\':
		case '/':
			o = c;
			break;
		case 'b':
			o = '\b';
			break;
		case 'f':
			o = '\f';
			break;
		case 'n':
			o = '\n';
			break;
		case 'r':
			o = '\r';
			break;
		case 't':
			o = '\t';
			break;
		case 'u': {
			unsigned cp, lo;
			if ((rc = hex4(r, &cp)))
				return rc;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return -EBADMSG; /* lone low surrogate */
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u')
					return -EBADMSG;
				r->p += 2;
				if ((rc = hex4(r, &lo)))
					return rc;
				if (lo < 0xdc00 || lo > 0xdfff)
					return -EBADMSG;
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
			}
			if (b && (rc = put_utf8(b, cp)))
				return rc;
			if (!b && cp == 0)
				return -EBADMSG;
			continue;
		}
		default:
			return -EBADMSG;
		}
		if (b && (rc = jb_add(b, &o, 1)))
			return rc;
	}
}

static bool is_digit(const struct jr *r)
{
	return r->p < r->end && *r->p >= '0' && *r->p <= '9';
}

/* A number per the RFC grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int parse_number(struct jr *r)
{
	if (r->p < r->end && *r->p == '-')
		r->p++;
	if (!is_digit(r))
		return -EBADMSG;
	if (*r->p == '0')
		r->p++;
	else
		while (is_digit(r))
			r->p++;
	if (r->p < r->end && *r->p == '.') {
		r->p++;
		if (!is_digit(r))
			return -EBADMSG;
		while (is_digit(r))
			r->p++;
	}
	if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
		r->p++;
		if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
			r->p++;
		if (!is_digit(r))
			return -EBADMSG;
		while (is_digit(r))
			r->p++;
	}
	return 0;
}

static int parse_literal(struct jr *r)
{
	static const char *const lits[] = {"true", "false", "null"};
	for (size_t i = 0; i < 3; i++) {
		size_t l = strlen(lits[i]);
		if ((size_t)(r->end - r->p) >= l && !memcmp(r->p, lits[i], l)) {
			r->p += l;
			return 0;
		}
	}
	return -EBADMSG;
}

static int parse_value(struct jr *r, int depth);

/* An object or array at r->p, checked and skipped. */
static int parse_container(struct jr *r, int depth)
{
	char close = *r->p == '{' ? '}' : ']';
	bool obj = close == '}';
	int rc;

	if (depth >= JSON_MAX_DEPTH)
		return -EBADMSG;
	r->p++;
	skip_ws(r);
	if (r->p < r->end && *r->p == close) {
		r->p++;
		return 0;
	}
	for (;;) {
		skip_ws(r);
		if (obj) {
			if ((rc = parse_string(r, NULL)))
				return rc;
			skip_ws(r);
			if (r->p >= r->end || *r->p != ':')
				return -EBADMSG;
			r->p++;
			skip_ws(r);
		}
		if ((rc = parse_value(r, depth + 1)))
			return rc;
		skip_ws(r);
		if (r->p >= r->end)
			return -EBADMSG;
		if (*r->p == close) {
			r->p++;
			return 0;
		}
		if (*r->p != ',')
			return -EBADMSG;
		r->p++;
	}
}

static int parse_value(struct jr *r, int depth)
{
	if (r->p >= r->end)
		return -EBADMSG;
	switch (*r->p) {
	case '"':
		return parse_string(r, NULL);
	case '{':
	case '[':
		return parse_container(r, depth);
	case 't':
	case 'f':
	case 'n':
		return parse_literal(r);
	default:
		return parse_number(r);
	}
}

int json_walk_object(const char *doc, size_t n, json_fn fn, void *arg)
{
	struct jr r = {.p = doc, .end = doc + n};
	struct jbuf name = {0}, val = {0};
	int rc = -EBADMSG;

	if (!doc)
		return -EBADMSG;
	skip_ws(&r);
	if (r.p >= r.end || *r.p != '{')
		return -EBADMSG;
	r.p++;
	skip_ws(&r);
	if (r.p < r.end && *r.p == '}') {
		r.p++;
		goto tail;
	}
	for (;;) {
		skip_ws(&r);
		if ((rc = parse_string(&r, &name)))
			goto out;
		skip_ws(&r);
		rc = -EBADMSG;
		if (r.p >= r.end || *r.p != ':')
			goto out;
		r.p++;
		skip_ws(&r);
		if (r.p >= r.end)
			goto out;
		if (*r.p == '"') {
			if ((rc = parse_string(&r, &val)))
				goto out;
			if ((rc = fn(arg, name.p, val.p, val.n, JSON_STRING)))
				goto out;
		} else if (*r.p == '{' || *r.p == '[') {
			if ((rc = parse_container(&r, 1)))
				goto out;
		} else {
			const char *s = r.p;
			enum json_kind k =
			    (*s == 't' || *s == 'f' || *s == 'n') ? JSON_LITERAL : JSON_NUMBER;
			if ((rc = k == JSON_LITERAL ? parse_literal(&r) : parse_number(&r)))
				goto out;
			val.n = 0;
			if ((rc = jb_add(&val, s, (size_t)(r.p - s))))
				goto out;
			if ((rc = fn(arg, name.p, val.p, val.n, k)))
				goto out;
		}
		skip_ws(&r);
		rc = -EBADMSG;
		if (r.p >= r.end)
			goto out;
		if (*r.p == '}') {
			r.p++;
			break;
		}
		if (*r.p != ',')
			goto out;
		r.p++;
	}
tail:
	skip_ws(&r);
	rc = r.p == r.end ? 0 : -EBADMSG;
out:
	free(name.p);
	if (val.p)
		memset(val.p, 0, val.cap); /* it held secret keys */
	free(val.p);
	return rc;
}
