/*
 * textfmt.c - the pieces the text objects of regions share: a growing buffer to write
 * them, and strict line and number parsing to read them (textfmt.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "grow.h"
#include "log.h"
#include "textfmt.h"

void text_add(struct text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (t->err)
		return;
	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(t->p ? t->p + t->len : NULL, t->p ? t->cap - t->len : 0, fmt, ap);
		va_end(ap);
		if (n < 0) {
			t->err = -EINVAL;
			return;
		}
		if (t->p && t->len + (size_t)n < t->cap) {
			t->len += (size_t)n;
			return;
		}
		if (MW_GROW(t->p, t->cap, t->len + (size_t)n + 1, 512)) {
			t->err = -ENOMEM;
			return;
		}
	}
}

bool text_num(const char *p, size_t n, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 20)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		uint64_t dg = (uint64_t)(p[i] - '0');
		if (v > (max - dg) / 10)
			return false;
		v = v * 10 + dg;
	}
	*out = v;
	return true;
}

bool text_next_line(const char **p, const char *end, struct text_line *ln)
{
	const char *s = *p, *nl, *sp;

	if (s >= end)
		return false;
	nl = memchr(s, '\n', (size_t)(end - s));
	if (!nl)
		nl = end;
	sp = memchr(s, ' ', (size_t)(nl - s));
	ln->name = s;
	ln->nlen = (size_t)((sp ? sp : nl) - s);
	ln->val = sp ? sp + 1 : nl;
	ln->vlen = (size_t)(nl - ln->val);
	*p = nl < end ? nl + 1 : end;
	return true;
}

bool text_is(const struct text_line *ln, const char *name)
{
	return ln->nlen == strlen(name) && !memcmp(ln->name, name, ln->nlen);
}

int text_check_magic(const char *what, const char *name, const struct text_line *ln,
                     const char *magic, int version)
{
	uint64_t v;

	if (!text_is(ln, magic) || !text_num(ln->val, ln->vlen, UINT32_MAX, &v) || v == 0) {
		log_err("region: %s is not a %s object (bad magic)", name, what);
		return -EUCLEAN;
	}
	if (v > (uint64_t)version) {
		log_err("region: %s is a %s object of format version %" PRIu64
		        ", newer than this program reads (%d)",
		        name, what, v, version);
		return -EPROTONOSUPPORT;
	}
	return 0;
}
