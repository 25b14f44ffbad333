/*
 * textfmt.h - what the text objects of regions share (engine/region/textfmt.c): the
 * writer's growing buffer and the reader's strict pieces (lines, numbers, the magic
 * line), for leasefmt.c (mounts/, holder/) and regmapfmt.c (regions/).
 *
 * An object is lines "name value"; the first line is "<magic> <format version>".  The
 * readers built on these refuse what they cannot be sure of and skip fields they do
 * not know.
 */
#ifndef MEMWALFS_TEXTFMT_H
#define MEMWALFS_TEXTFMT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growing text buffer; zero it to start.  The first error sticks in err. */
struct text {
	char *p;    /* the text, NUL-terminated (malloc()ed; NULL until the first add) */
	size_t len; /* its length without the NUL */
	size_t cap; /* bytes allocated at p */
	int err;    /* 0, or the first error (-ENOMEM, -EINVAL): later adds do nothing */
};

/* Append the printf-formatted text to t. */
__attribute__((format(printf, 2, 3))) void text_add(struct text *t, const char *fmt, ...);

/* Strict unsigned decimal of exactly the n bytes at p (1..20 digits, at most max). */
bool text_num(const char *p, size_t n, uint64_t max, uint64_t *out);

/* One line of an object: its name and value, split at the first space. */
struct text_line {
	const char *name, *val; /* into the object's bytes (not NUL-terminated) */
	size_t nlen, vlen;      /* their lengths */
};

/*
 * The next line of [*p, end) into *ln, *p moved past it; false at the end.  A line
 * without a space has an empty value and nlen = its length.
 */
bool text_next_line(const char **p, const char *end, struct text_line *ln);

/* Is the line's name exactly name? */
bool text_is(const struct text_line *ln, const char *name);

/*
 * Check the first line "<magic> <version>" of object name (a "what" object, for the log
 * line): 0, -EPROTONOSUPPORT (a version newer than version) or -EUCLEAN; both logged.
 */
int text_check_magic(const char *what, const char *name, const struct text_line *ln,
                     const char *magic, int version);

#endif /* MEMWALFS_TEXTFMT_H */
