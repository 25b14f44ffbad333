/*
 * profile.c - profiles of the AWS shared config and credentials files (see
 * profile.h).  A profile is a short list of (key, value) pairs; files are
 * small, so each load reads and scans the whole file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "grow.h"
#include "log.h"
#include "profile.h"

#define PROFILE_MAX_FILE (1u << 20) /* a larger config file is refused */

struct setting {
	char *key;   /* lower case */
	char *value; /* as written, trimmed */
};

struct profile {
	struct setting *v; /* n settings, keys unique */
	size_t n, cap;
};

struct profile *profile_new(void)
{
	return calloc(1, sizeof(struct profile));
}

void profile_free(struct profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		memset(p->v[i].value, 0, strlen(p->v[i].value));
		free(p->v[i].value);
		free(p->v[i].key);
	}
	free(p->v);
	free(p);
}

const char *profile_get(const struct profile *p, const char *key)
{
	for (size_t i = 0; p && i < p->n; i++)
		if (!strcasecmp(p->v[i].key, key))
			return p->v[i].value;
	return NULL;
}

static int set(struct profile *p, const char *k, size_t kl, const char *v, size_t vl)
{
	char *key = strndup(k, kl), *val = strndup(v, vl);
	if (!key || !val)
		goto oom;
	for (char *c = key; *c; c++)
		if (*c >= 'A' && *c <= 'Z')
			*c = (char)(*c - 'A' + 'a');
	for (size_t i = 0; i < p->n; i++) {
		if (!strcmp(p->v[i].key, key)) {
			memset(p->v[i].value, 0, strlen(p->v[i].value));
			free(p->v[i].value);
			p->v[i].value = val;
			free(key);
			return 0;
		}
	}
	if (MW_GROW(p->v, p->cap, p->n + 1, 8))
		goto oom;
	p->v[p->n++] = (struct setting){key, val};
	return 0;
oom:
	free(key);
	free(val);
	return -ENOMEM;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Is section text s (l bytes, trimmed) the profile name in this file? */
static bool section_is(const char *s, size_t l, bool in_config, const char *name)
{
	size_t nl = strlen(name);
	if (in_config) {
		if (l > 8 && !memcmp(s, "profile", 7) && blank(s[7])) {
			s += 8;
			l -= 8;
			while (l && blank(*s))
				s++, l--;
			return l == nl && !memcmp(s, name, nl);
		}
		return !strcmp(name, "default") && l == 7 && !memcmp(s, "default", 7);
	}
	return l == nl && !memcmp(s, name, nl);
}

int profile_parse(struct profile *p, const char *text, size_t n, bool in_config, const char *name)
{
	const char *t = text, *end = text + n;
	bool in = false, found = false, nested = false;
	int rc;

	while (t < end) {
		const char *le = memchr(t, '\n', (size_t)(end - t)), *s = t, *e;
		if (!le)
			le = end;
		t = le < end ? le + 1 : end;
		bool indented = s < le && blank(*s);
		while (s < le && blank(*s))
			s++;
		e = le;
		while (e > s && blank(e[-1]))
			e--;
		if (s == e || *s == '#' || *s == ';')
			continue;
		if (*s == '[') {
			const char *q = memchr(s, ']', (size_t)(e - s));
			nested = false;
			in = false;
			if (!q)
				continue;
			const char *a = s + 1, *b = q;
			while (a < b && blank(*a))
				a++;
			while (b > a && blank(b[-1]))
				b--;
			in = section_is(a, (size_t)(b - a), in_config, name);
			found |= in;
			continue;
		}
		if (indented && nested)
			continue; /* a nested setting ("s3 =" then indented lines) */
		const char *eq = memchr(s, '=', (size_t)(e - s));
		if (!eq || !in)
			continue;
		const char *ke = eq, *v = eq + 1;
		while (ke > s && blank(ke[-1]))
			ke--;
		while (v < e && blank(*v))
			v++;
		nested = v == e;
		if (ke == s || nested)
			continue;
		if ((rc = set(p, s, (size_t)(ke - s), v, (size_t)(e - v))))
			return rc;
	}
	return found;
}

/* Read a whole file (malloc()ed, *n bytes).  -ENOENT when missing. */
static int slurp(const char *path, char **out, size_t *n)
{
	FILE *f = fopen(path, "re");
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int rc = 0;

	if (!f)
		return -errno;
	for (;;) {
		if (len == cap) {
			cap = cap ? cap * 2 : 4096;
			char *nb = cap > PROFILE_MAX_FILE ? NULL : realloc(buf, cap);
			if (!nb) {
				rc = cap > PROFILE_MAX_FILE ? -EFBIG : -ENOMEM;
				break;
			}
			buf = nb;
		}
		size_t r = fread(buf + len, 1, cap - len, f);
		len += r;
		if (r == 0) {
			if (ferror(f))
				rc = -EIO;
			break;
		}
	}
	fclose(f);
	if (rc) {
		if (buf)
			memset(buf, 0, len);
		free(buf);
		return rc;
	}
	*out = buf;
	*n = len;
	return 0;
}

static int load_file(struct profile *p, const char *path, bool in_config, const char *name)
{
	char *text = NULL;
	size_t n = 0;
	int rc;

	if (!path || !*path)
		return 0;
	if ((rc = slurp(path, &text, &n)) < 0) {
		if (rc == -ENOENT || rc == -ENOTDIR)
			return 0;
		log_err("s3: credentials: cannot read %s: %s", path, strerror(-rc));
		return rc;
	}
	rc = profile_parse(p, text, n, in_config, name);
	memset(text, 0, n);
	free(text);
	return rc;
}

int profile_load(const char *config_file, const char *cred_file, const char *name,
                 struct profile **out)
{
	struct profile *p = profile_new();
	int a, b;

	if (!p)
		return -ENOMEM;
	if ((a = load_file(p, config_file, true, name)) < 0 ||
	    (b = load_file(p, cred_file, false, name)) < 0) {
		int rc = a < 0 ? a : b;
		profile_free(p);
		return rc;
	}
	if (!a && !b) {
		profile_free(p);
		return -ENOENT;
	}
	*out = p;
	return 0;
}

static void path_of(const char *env, const char *def, char *out, size_t sz)
{
	const char *v = getenv(env), *home = getenv("HOME");
	if (!home)
		home = "";
	if (v && *v) {
		if (v[0] == '~' && v[1] == '/')
			snprintf(out, sz, "%s%s", home, v + 1);
		else
			snprintf(out, sz, "%s", v);
	} else {
		snprintf(out, sz, "%s/.aws/%s", home, def);
	}
}

void profile_default_paths(char *config, char *cred, size_t sz)
{
	path_of("AWS_CONFIG_FILE", "config", config, sz);
	path_of("AWS_SHARED_CREDENTIALS_FILE", "credentials", cred, sz);
}
