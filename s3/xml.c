/*
 * xml.c - a small, strict XML reader and the S3 response parsers built on
 * it (see xml.h).  The walker is a recursive descent over (doc, n) with an
 * explicit end pointer; every read checks p < end first.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grow.h"
#include "xml.h"

#define XML_MAX_DEPTH 16
#define XML_MAX_PATH 512

/* Growable text buffer. */
struct tbuf {
	char *p;
	size_t n, cap;
};

static int tb_add(struct tbuf *b, const char *s, size_t n)
{
	if (MW_GROW(b->p, b->cap, b->n + n + 1, 256))
		return -ENOMEM;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
	return 0;
}

struct walker {
	const char *p, *end;
	char path[XML_MAX_PATH];
	size_t plen;
	xml_fn fn;
	void *arg;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_name(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '-' || c == '.' || c == ':';
}

static void skip_ws(struct walker *w)
{
	while (w->p < w->end && is_ws(*w->p))
		w->p++;
}

static bool starts(struct walker *w, const char *s)
{
	size_t n = strlen(s);
	return (size_t)(w->end - w->p) >= n && !memcmp(w->p, s, n);
}

/* Skip to just after the terminator t; -EBADMSG if it never comes. */
static int skip_past(struct walker *w, const char *t)
{
	size_t n = strlen(t);
	while ((size_t)(w->end - w->p) >= n) {
		if (!memcmp(w->p, t, n)) {
			w->p += n;
			return 0;
		}
		w->p++;
	}
	return -EBADMSG;
}

/* Skip whitespace, comments and processing instructions between elements. */
static int skip_misc(struct walker *w)
{
	for (;;) {
		skip_ws(w);
		if (starts(w, "<!--")) {
			if (skip_past(w, "-->"))
				return -EBADMSG;
		} else if (starts(w, "<?")) {
			if (skip_past(w, "?>"))
				return -EBADMSG;
		} else {
			return 0;
		}
	}
}

int xml_utf8(unsigned long cp, char b[4])
{
	if (cp == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return -EBADMSG;
	if (cp < 0x80) {
		b[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		b[0] = (char)(0xc0 | (cp >> 6));
		b[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		b[0] = (char)(0xe0 | (cp >> 12));
		b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		b[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	b[0] = (char)(0xf0 | (cp >> 18));
	b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	b[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/* Append UTF-8 for code point cp. */
static int put_utf8(struct tbuf *t, unsigned long cp)
{
	char b[4];
	int n = xml_utf8(cp, b);
	return n < 0 ? n : tb_add(t, b, (size_t)n);
}

/* Decode one entity at w->p ('&') into t. */
static int entity(struct walker *w, struct tbuf *t)
{
	static const struct {
		const char *name;
		char c;
	} ents[] = {
	    {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
	for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
		if (starts(w, ents[i].name)) {
			w->p += strlen(ents[i].name);
			return tb_add(t, &ents[i].c, 1);
		}
	}
	if (starts(w, "&#")) {
		unsigned long cp = 0;
		int base = 10, digits = 0;
		w->p += 2;
		if (w->p < w->end && *w->p == 'x') {
			base = 16;
			w->p++;
		}
		while (w->p < w->end && *w->p != ';') {
			char c = *w->p;
			int d;
			if (c >= '0' && c <= '9')
				d = c - '0';
			else if (base == 16 && c >= 'a' && c <= 'f')
				d = c - 'a' + 10;
			else if (base == 16 && c >= 'A' && c <= 'F')
				d = c - 'A' + 10;
			else
				return -EBADMSG;
			cp = cp * (unsigned long)base + (unsigned long)d;
			if (cp > 0x10ffff || ++digits > 8)
				return -EBADMSG;
			w->p++;
		}
		if (w->p >= w->end || digits == 0)
			return -EBADMSG;
		w->p++;
		return put_utf8(t, cp);
	}
	return -EBADMSG;
}

static int element(struct walker *w, int depth);

static bool all_ws(const struct tbuf *t)
{
	for (size_t i = 0; i < t->n; i++)
		if (!is_ws(t->p[i]))
			return false;
	return true;
}

/* Parse one element starting at '<'. */
static int element(struct walker *w, int depth)
{
	const char *name, *local;
	size_t nlen, saved = w->plen;
	struct tbuf text = {0};
	bool had_child = false;
	int rc = -EBADMSG;

	if (depth >= XML_MAX_DEPTH || w->p >= w->end || *w->p != '<')
		return -EBADMSG;
	w->p++;
	name = w->p;
	while (w->p < w->end && is_name(*w->p))
		w->p++;
	nlen = (size_t)(w->p - name);
	if (nlen == 0 || w->p >= w->end || (*name >= '0' && *name <= '9') || *name == '-' ||
	    *name == '.')
		return -EBADMSG;
	local = name;
	for (const char *q = name; q < name + nlen; q++)
		if (*q == ':')
			local = q + 1;
	{
		size_t ll = nlen - (size_t)(local - name);
		if (ll == 0 || w->plen + ll + 2 > sizeof(w->path))
			return -EBADMSG;
		if (w->plen)
			w->path[w->plen++] = '/';
		memcpy(w->path + w->plen, local, ll);
		w->plen += ll;
		w->path[w->plen] = '\0';
	}
	/* Attributes. */
	for (;;) {
		skip_ws(w);
		if (w->p >= w->end)
			goto out;
		if (*w->p == '>') {
			w->p++;
			break;
		}
		if (starts(w, "/>")) {
			w->p += 2;
			rc = w->fn(w->arg, w->path, "", 0);
			goto out;
		}
		const char *an = w->p;
		while (w->p < w->end && is_name(*w->p))
			w->p++;
		if (w->p == an)
			goto out;
		skip_ws(w);
		if (w->p >= w->end || *w->p != '=')
			goto out;
		w->p++;
		skip_ws(w);
		if (w->p >= w->end || (*w->p != '"' && *w->p != '\''))
			goto out;
		char q = *w->p++;
		while (w->p < w->end && *w->p != q) {
			if (*w->p == '<')
				goto out;
			w->p++;
		}
		if (w->p >= w->end)
			goto out;
		w->p++;
	}
	/* Content. */
	for (;;) {
		if (w->p >= w->end)
			goto out;
		char c = *w->p;
		if (c == '&') {
			if ((rc = entity(w, &text)) < 0)
				goto out;
			rc = -EBADMSG;
		} else if (c != '<') {
			const char *s = w->p;
			while (w->p < w->end && *w->p != '<' && *w->p != '&')
				w->p++;
			if (tb_add(&text, s, (size_t)(w->p - s))) {
				rc = -ENOMEM;
				goto out;
			}
		} else if (starts(w, "<!--")) {
			if (skip_past(w, "-->"))
				goto out;
		} else if (starts(w, "</")) {
			w->p += 2;
			if ((size_t)(w->end - w->p) < nlen || memcmp(w->p, name, nlen))
				goto out;
			w->p += nlen;
			if (w->p < w->end && is_name(*w->p))
				goto out;
			skip_ws(w);
			if (w->p >= w->end || *w->p != '>')
				goto out;
			w->p++;
			break;
		} else if (starts(w, "<!") || starts(w, "<?")) {
			goto out; /* CDATA, DOCTYPE, PI inside content: not in S3 responses */
		} else {
			if (!all_ws(&text))
				goto out; /* mixed content */
			had_child = true;
			text.n = 0;
			if ((rc = element(w, depth + 1)) != 0)
				goto out;
			rc = -EBADMSG;
		}
	}
	if (had_child) {
		if (!all_ws(&text))
			goto out;
		rc = w->fn(w->arg, w->path, NULL, 0);
	} else {
		rc = w->fn(w->arg, w->path, text.p ? text.p : "", text.n);
	}
out:
	free(text.p);
	w->plen = saved;
	w->path[w->plen] = '\0';
	return rc;
}

int xml_walk(const char *doc, size_t n, xml_fn fn, void *arg)
{
	struct walker w = {.p = doc, .end = doc + n, .fn = fn, .arg = arg};
	int rc;

	if (!doc)
		return -EBADMSG;
	if (n >= 3 && !memcmp(doc, "\xef\xbb\xbf", 3))
		w.p += 3;
	if (skip_misc(&w) || w.p >= w.end)
		return -EBADMSG;
	if ((rc = element(&w, 0)) != 0)
		return rc;
	if (skip_misc(&w) || w.p != w.end)
		return -EBADMSG;
	return 0;
}

/* ---- helpers for the response parsers ---------------------------------- */

static void copy_trunc(char *dst, size_t dsz, const char *s)
{
	if (dsz)
		snprintf(dst, dsz, "%s", s);
}

static int parse_u64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	if (!*s)
		return -EBADMSG;
	for (; *s; s++) {
		uint64_t d = (uint64_t)(*s - '0');
		if (*s < '0' || *s > '9' || v > UINT64_MAX / 10 ||
		    (v == UINT64_MAX / 10 && d > UINT64_MAX % 10))
			return -EBADMSG;
		v = v * 10 + d;
	}
	*out = v;
	return 0;
}

static int parse_bool(const char *s, bool *out)
{
	if (!strcmp(s, "true"))
		*out = true;
	else if (!strcmp(s, "false"))
		*out = false;
	else
		return -EBADMSG;
	return 0;
}

/* "2024-05-01T12:34:56.000Z" -> seconds. */
static int parse_time(const char *s, int64_t *out)
{
	struct tm tm;
	int n = 0;
	memset(&tm, 0, sizeof(tm));
	if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	           &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19)
		return -EBADMSG;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = (int64_t)timegm(&tm);
	return 0;
}

int xml_url_decode(char *s)
{
	char *o = s;
	for (char *p = s; *p; p++) {
		if (*p == '%') {
			int v = 0;
			for (int i = 1; i <= 2; i++) {
				char c = p[i];
				v <<= 4;
				if (c >= '0' && c <= '9')
					v |= c - '0';
				else if (c >= 'a' && c <= 'f')
					v |= c - 'a' + 10;
				else if (c >= 'A' && c <= 'F')
					v |= c - 'A' + 10;
				else
					return -EBADMSG;
			}
			if (v == 0)
				return -EBADMSG;
			*o++ = (char)v;
			p += 2;
		} else if (*p == '+') {
			*o++ = ' ';
		} else {
			*o++ = *p;
		}
	}
	*o = '\0';
	return 0;
}

char *xml_escape(const char *s)
{
	struct tbuf t = {0};
	if (tb_add(&t, "", 0))
		return NULL;
	for (; *s; s++) {
		const char *r = NULL;
		switch (*s) {
		case '&':
			r = "&amp;";
			break;
		case '<':
			r = "&lt;";
			break;
		case '>':
			r = "&gt;";
			break;
		case '"':
			r = "&quot;";
			break;
		case '\'':
			r = "&apos;";
			break;
		}
		if (r ? tb_add(&t, r, strlen(r)) : tb_add(&t, s, 1)) {
			free(t.p);
			return NULL;
		}
	}
	return t.p;
}

/* ---- Error ------------------------------------------------------------- */

struct err_ctx {
	char *code, *msg;
	size_t codesz, msgsz;
	bool root_ok;
};

static int err_fn(void *arg, const char *path, const char *text, size_t len)
{
	struct err_ctx *c = arg;
	(void)len;
	if (strncmp(path, "Error", 5) || (path[5] && path[5] != '/'))
		return 0;
	c->root_ok = true;
	if (text && !strcmp(path, "Error/Code"))
		copy_trunc(c->code, c->codesz, text);
	else if (text && !strcmp(path, "Error/Message"))
		copy_trunc(c->msg, c->msgsz, text);
	return 0;
}

int xml_parse_error(const char *doc, size_t n, char *code, size_t codesz, char *msg, size_t msgsz)
{
	struct err_ctx c = {code, msg, codesz, msgsz, false};
	copy_trunc(code, codesz, "");
	copy_trunc(msg, msgsz, "");
	int rc = xml_walk(doc, n, err_fn, &c);
	if (rc)
		return rc;
	return c.root_ok ? 0 : -EBADMSG;
}

/* ---- ListObjectsV2 ----------------------------------------------------- */

struct list_ctx {
	struct xml_list_page *pg;
	char *key;     /* current Contents/Key */
	uint64_t size; /* current Contents/Size */
	bool have_size;
	bool url; /* EncodingType url */
	bool root_ok;
	size_t cap;
};

static int list_fn(void *arg, const char *path, const char *text, size_t len)
{
	struct list_ctx *c = arg;
	(void)len;
	if (strncmp(path, "ListBucketResult", 16))
		return -EBADMSG;
	c->root_ok = true;
	path += 16;
	if (!strcmp(path, "/Contents/Key") && text) {
		free(c->key);
		if (!(c->key = strdup(text)))
			return -ENOMEM;
	} else if (!strcmp(path, "/Contents/Size") && text) {
		if (parse_u64(text, &c->size))
			return -EBADMSG;
		c->have_size = true;
	} else if (!strcmp(path, "/Contents") && !text) {
		if (!c->key || !c->have_size)
			return -EBADMSG;
		if (c->pg->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 64;
			void *v = realloc(c->pg->v, cap * sizeof(c->pg->v[0]));
			if (!v)
				return -ENOMEM;
			c->pg->v = v;
			c->cap = cap;
		}
		c->pg->v[c->pg->n].key = c->key;
		c->pg->v[c->pg->n].size = c->size;
		c->pg->n++;
		c->key = NULL;
		c->have_size = false;
	} else if (!strcmp(path, "/IsTruncated") && text) {
		if (parse_bool(text, &c->pg->truncated))
			return -EBADMSG;
	} else if (!strcmp(path, "/NextContinuationToken") && text) {
		free(c->pg->next_token);
		if (!(c->pg->next_token = strdup(text)))
			return -ENOMEM;
	} else if (!strcmp(path, "/EncodingType") && text) {
		c->url = !strcmp(text, "url");
	}
	return 0;
}

int xml_parse_list_page(const char *doc, size_t n, struct xml_list_page *out)
{
	struct list_ctx c = {.pg = out};
	int rc;

	memset(out, 0, sizeof(*out));
	rc = xml_walk(doc, n, list_fn, &c);
	free(c.key);
	if (rc)
		return rc;
	if (!c.root_ok || (out->truncated && (!out->next_token || !*out->next_token)))
		return -EBADMSG;
	if (c.url) {
		for (size_t i = 0; i < out->n; i++)
			if (xml_url_decode(out->v[i].key))
				return -EBADMSG;
	}
	return 0;
}

void xml_list_page_free(struct xml_list_page *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i].key);
	free(p->v);
	free(p->next_token);
	memset(p, 0, sizeof(*p));
}

/* ---- multipart --------------------------------------------------------- */

struct one_ctx {
	const char *want; /* path of the value */
	const char *root; /* required root element */
	char *val;
	bool root_ok;
};

static int one_fn(void *arg, const char *path, const char *text, size_t len)
{
	struct one_ctx *c = arg;
	size_t rl = strlen(c->root);
	(void)len;
	if (strncmp(path, c->root, rl) || (path[rl] && path[rl] != '/'))
		return -EBADMSG;
	c->root_ok = true;
	if (text && !strcmp(path, c->want)) {
		free(c->val);
		if (!(c->val = strdup(text)))
			return -ENOMEM;
	}
	return 0;
}

int xml_parse_initiate(const char *doc, size_t n, char **upload_id)
{
	struct one_ctx c = {"InitiateMultipartUploadResult/UploadId",
	                    "InitiateMultipartUploadResult", NULL, false};
	int rc = xml_walk(doc, n, one_fn, &c);
	if (rc || !c.val || !*c.val) {
		free(c.val);
		return rc ? rc : -EBADMSG;
	}
	*upload_id = c.val;
	return 0;
}

int xml_parse_complete(const char *doc, size_t n, char *code, size_t codesz, char *msg,
                       size_t msgsz)
{
	if (xml_parse_error(doc, n, code, codesz, msg, msgsz) == 0)
		return -EIO;
	struct one_ctx c = {"CompleteMultipartUploadResult/ETag", "CompleteMultipartUploadResult",
	                    NULL, false};
	int rc = xml_walk(doc, n, one_fn, &c);
	free(c.val);
	if (rc)
		return rc;
	return c.root_ok ? 0 : -EBADMSG;
}

/* ---- DeleteObjects ----------------------------------------------------- */

struct del_ctx {
	unsigned nerr;
	char *key, *code;
	size_t keysz, codesz;
	char cur_key[1100], cur_code[64];
	bool root_ok;
};

static int del_fn(void *arg, const char *path, const char *text, size_t len)
{
	struct del_ctx *c = arg;
	(void)len;
	if (strncmp(path, "DeleteResult", 12))
		return -EBADMSG;
	c->root_ok = true;
	path += 12;
	if (text && !strcmp(path, "/Error/Key"))
		copy_trunc(c->cur_key, sizeof(c->cur_key), text);
	else if (text && !strcmp(path, "/Error/Code"))
		copy_trunc(c->cur_code, sizeof(c->cur_code), text);
	else if (!text && !strcmp(path, "/Error")) {
		if (strcmp(c->cur_code, "NoSuchKey")) {
			if (c->nerr++ == 0) {
				copy_trunc(c->key, c->keysz, c->cur_key);
				copy_trunc(c->code, c->codesz, c->cur_code);
			}
		}
		c->cur_key[0] = c->cur_code[0] = '\0';
	}
	return 0;
}

int xml_parse_delete_result(const char *doc, size_t n, unsigned *nerr, char *key, size_t keysz,
                            char *code, size_t codesz)
{
	struct del_ctx c;
	memset(&c, 0, sizeof(c));
	c.key = key;
	c.keysz = keysz;
	c.code = code;
	c.codesz = codesz;
	copy_trunc(key, keysz, "");
	copy_trunc(code, codesz, "");
	int rc = xml_walk(doc, n, del_fn, &c);
	if (rc)
		return rc;
	if (!c.root_ok)
		return -EBADMSG;
	*nerr = c.nerr;
	return 0;
}

/* ---- ListMultipartUploads ---------------------------------------------- */

struct up_ctx {
	struct xml_uploads_page *pg;
	struct xml_upload cur;
	bool have_time, url, root_ok;
	size_t cap;
};

static int set_str(char **dst, const char *s)
{
	free(*dst);
	*dst = strdup(s);
	return *dst ? 0 : -ENOMEM;
}

static int up_fn(void *arg, const char *path, const char *text, size_t len)
{
	struct up_ctx *c = arg;
	(void)len;
	if (strncmp(path, "ListMultipartUploadsResult", 26))
		return -EBADMSG;
	c->root_ok = true;
	path += 26;
	if (text && !strcmp(path, "/Upload/Key"))
		return set_str(&c->cur.key, text);
	if (text && !strcmp(path, "/Upload/UploadId"))
		return set_str(&c->cur.upload_id, text);
	if (text && !strcmp(path, "/Upload/Initiated")) {
		if (parse_time(text, &c->cur.initiated))
			return -EBADMSG;
		c->have_time = true;
		return 0;
	}
	if (!text && !strcmp(path, "/Upload")) {
		if (!c->cur.key || !c->cur.upload_id || !c->have_time)
			return -EBADMSG;
		if (c->pg->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 16;
			void *v = realloc(c->pg->v, cap * sizeof(c->pg->v[0]));
			if (!v)
				return -ENOMEM;
			c->pg->v = v;
			c->cap = cap;
		}
		c->pg->v[c->pg->n++] = c->cur;
		memset(&c->cur, 0, sizeof(c->cur));
		c->have_time = false;
		return 0;
	}
	if (text && !strcmp(path, "/IsTruncated"))
		return parse_bool(text, &c->pg->truncated) ? -EBADMSG : 0;
	if (text && !strcmp(path, "/NextKeyMarker"))
		return set_str(&c->pg->next_key_marker, text);
	if (text && !strcmp(path, "/NextUploadIdMarker"))
		return set_str(&c->pg->next_upload_id_marker, text);
	if (text && !strcmp(path, "/EncodingType"))
		c->url = !strcmp(text, "url");
	return 0;
}

int xml_parse_uploads_page(const char *doc, size_t n, struct xml_uploads_page *out)
{
	struct up_ctx c;
	int rc;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	c.pg = out;
	rc = xml_walk(doc, n, up_fn, &c);
	free(c.cur.key);
	free(c.cur.upload_id);
	if (rc)
		return rc;
	if (!c.root_ok)
		return -EBADMSG;
	if (c.url) {
		for (size_t i = 0; i < out->n; i++)
			if (xml_url_decode(out->v[i].key))
				return -EBADMSG;
		if (out->next_key_marker && xml_url_decode(out->next_key_marker))
			return -EBADMSG;
	}
	return 0;
}

void xml_uploads_page_free(struct xml_uploads_page *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].key);
		free(p->v[i].upload_id);
	}
	free(p->v);
	free(p->next_key_marker);
	free(p->next_upload_id_marker);
	memset(p, 0, sizeof(*p));
}
