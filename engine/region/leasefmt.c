/*
 * leasefmt.c - the text of mount leases (mounts/<id>) and holder objects
 * (<prefix>holder/<epoch>): encoding and strict decoding (lease.h, docs/REGIONS.md).
 *
 * One field a line, "name value"; a value runs to the end of its line.  Strings are
 * written with every byte that is not printable ASCII replaced by '?', so a value never
 * holds a newline.  Numbers are plain decimal.  The decoder refuses what it cannot be
 * sure of (a missing field, a bad number, an over-long string, a line without a space)
 * with -EUCLEAN and a log line naming the object; unknown fields are skipped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "lease.h"
#include "log.h"

bool lease_id_valid(const char *s)
{
	for (int i = 0; i < 16; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[16] == '\0';
}

/* Copy src into dst (cap bytes), printable ASCII only (others become '?'). */
static void clean_copy(char *dst, size_t cap, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < cap; i++)
		dst[i] = (src[i] >= 0x20 && src[i] < 0x7f) ? src[i] : '?';
	dst[i] = '\0';
}

/* A growing text buffer. */
struct text {
	char *p;
	size_t len, cap;
	int err;
};

__attribute__((format(printf, 2, 3))) static void add(struct text *t, const char *fmt, ...)
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

int lease_doc_format(const struct lease_doc *d, char **out, size_t *len)
{
	struct text t = {0};
	char host[sizeof(d->host)], mnt[sizeof(d->mnt)];

	clean_copy(host, sizeof(host), d->host);
	clean_copy(mnt, sizeof(mnt), d->mnt);
	add(&t, "%s %d\n", LEASE_MAGIC, LEASE_FORMAT_VERSION);
	add(&t,
	    "mount %s\nhost %s\npid %ld\nmnt %s\nsince %" PRId64 "\nseq %" PRIu64 "\nlease_ms %u\n",
	    d->mount, host, d->pid, mnt, d->since, d->seq, d->lease_ms);
	if (d->boot[0] && d->pidns)
		add(&t, "boot %s\npidns %" PRIu64 "\n", d->boot, d->pidns);
	for (size_t i = 0; i < d->nholds; i++)
		add(&t, "%s %" PRIu32 " %" PRIu64 "\n", d->holds[i].taking ? "take" : "hold",
		    d->holds[i].rid, d->holds[i].epoch);
	if (t.err) {
		free(t.p);
		return t.err;
	}
	*out = t.p;
	*len = t.len;
	return 0;
}

int holder_doc_format(const struct holder_doc *h, char *buf, size_t cap, size_t *len)
{
	char host[sizeof(h->host)], mnt[sizeof(h->mnt)];
	int n;

	clean_copy(host, sizeof(host), h->host);
	clean_copy(mnt, sizeof(mnt), h->mnt);
	n = snprintf(
	    buf, cap,
	    "%s %d\nmount %s\nepoch %" PRIu64 "\nhost %s\npid %ld\nmnt %s\nsince %" PRId64 "\n",
	    HOLDER_MAGIC, HOLDER_FORMAT_VERSION, h->mount, h->epoch, host, h->pid, mnt, h->since);
	if (n < 0 || (size_t)n >= cap)
		return -ENOSPC;
	*len = (size_t)n;
	return 0;
}

void lease_doc_clear(struct lease_doc *d)
{
	free(d->holds);
	memset(d, 0, sizeof(*d));
}

/* ------------------------------------------------------------------ */
/* Decoding                                                            */
/* ------------------------------------------------------------------ */

/* Strict unsigned decimal of exactly the n bytes at p (1..20 digits, no overflow). */
static bool num(const char *p, size_t n, uint64_t max, uint64_t *out)
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

/* Copy the value (n bytes at p) into dst of cap bytes: false if too long or unprintable. */
static bool str(const char *p, size_t n, char *dst, size_t cap)
{
	if (n >= cap)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)p[i] < 0x20 || (unsigned char)p[i] >= 0x7f)
			return false;
	memcpy(dst, p, n);
	dst[n] = '\0';
	return true;
}

/* One line: its name and value (split at the first space). */
struct line {
	const char *name, *val;
	size_t nlen, vlen;
};

/*
 * The next line of [*p, end) into *ln; false at the end.  A line without a space has an
 * empty value and nlen = its length.
 */
static bool next_line(const char **p, const char *end, struct line *ln)
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

static bool is(const struct line *ln, const char *name)
{
	return ln->nlen == strlen(name) && !memcmp(ln->name, name, ln->nlen);
}

/*
 * Check the first line "<magic> <version>".  0, -EPROTONOSUPPORT (a newer version) or
 * -EUCLEAN (logged).
 */
static int check_magic(const char *what, const char *name, const struct line *ln, const char *magic,
                       int version)
{
	uint64_t v;

	if (!is(ln, magic) || !num(ln->val, ln->vlen, UINT32_MAX, &v) || v == 0) {
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

#define F_MOUNT 0x01
#define F_HOST 0x02
#define F_PID 0x04
#define F_MNT 0x08
#define F_SINCE 0x10
#define F_SEQ 0x20
#define F_LEASE 0x40
#define F_EPOCH 0x80

/*
 * A field common to both objects into the given places.  Returns the F_ bit set, 0 for an
 * unknown field, -1 for a bad value.
 */
static int common_field(const struct line *ln, char *mount, char *host, size_t hostcap, long *pid,
                        char *mnt, size_t mntcap, int64_t *since)
{
	uint64_t v;

	if (is(ln, "mount"))
		return str(ln->val, ln->vlen, mount, 17) && lease_id_valid(mount) ? F_MOUNT : -1;
	if (is(ln, "host"))
		return str(ln->val, ln->vlen, host, hostcap) ? F_HOST : -1;
	if (is(ln, "mnt"))
		return str(ln->val, ln->vlen, mnt, mntcap) ? F_MNT : -1;
	if (is(ln, "pid")) {
		if (!num(ln->val, ln->vlen, (uint64_t)INT32_MAX, &v))
			return -1;
		*pid = (long)v;
		return F_PID;
	}
	if (is(ln, "since")) {
		if (!num(ln->val, ln->vlen, (uint64_t)INT64_MAX, &v))
			return -1;
		*since = (int64_t)v;
		return F_SINCE;
	}
	return 0;
}

int lease_doc_parse(const char *name, const void *buf, size_t len, struct lease_doc *out)
{
	const char *p = buf, *end = p + len;
	struct lease_doc d = {0};
	size_t cap = 0;
	struct line ln;
	unsigned have = 0;
	int rc, f;

	if (len > LEASE_OBJECT_MAX || !next_line(&p, end, &ln)) {
		log_err("region: %s: not a lease object (%zu bytes)", name, len);
		return -EUCLEAN;
	}
	rc = check_magic("lease", name, &ln, LEASE_MAGIC, LEASE_FORMAT_VERSION);
	if (rc)
		return rc;
	while (next_line(&p, end, &ln)) {
		uint64_t v, rid, ep;
		f = common_field(&ln, d.mount, d.host, sizeof(d.host), &d.pid, d.mnt, sizeof(d.mnt),
		                 &d.since);
		if (f > 0) {
			have |= (unsigned)f;
			continue;
		}
		if (f < 0)
			goto bad;
		if (is(&ln, "seq")) {
			if (!num(ln.val, ln.vlen, UINT64_MAX, &d.seq))
				goto bad;
			have |= F_SEQ;
		} else if (is(&ln, "lease_ms")) {
			if (!num(ln.val, ln.vlen, UINT32_MAX, &v) || v == 0)
				goto bad;
			d.lease_ms = (unsigned)v;
			have |= F_LEASE;
		} else if (is(&ln, "boot")) {
			if (ln.vlen == 0 || ln.vlen >= sizeof(d.boot))
				goto bad;
			memcpy(d.boot, ln.val, ln.vlen);
			d.boot[ln.vlen] = 0;
		} else if (is(&ln, "pidns")) {
			if (!num(ln.val, ln.vlen, UINT64_MAX, &d.pidns))
				goto bad;
		} else if (is(&ln, "hold") || is(&ln, "take")) {
			const char *sp = memchr(ln.val, ' ', ln.vlen);
			if (!sp || !num(ln.val, (size_t)(sp - ln.val), UINT32_MAX, &rid) ||
			    !num(sp + 1, ln.vlen - (size_t)(sp + 1 - ln.val), UINT64_MAX, &ep))
				goto bad;
			if (MW_GROW(d.holds, cap, d.nholds + 1, 4)) {
				lease_doc_clear(&d);
				return -ENOMEM;
			}
			d.holds[d.nholds++] = (struct lease_hold){
			    .rid = (uint32_t)rid, .epoch = ep, .taking = is(&ln, "take")};
		} /* else: a field of a later version, skipped */
	}
	if ((have & (F_MOUNT | F_SEQ | F_LEASE)) != (F_MOUNT | F_SEQ | F_LEASE)) {
		log_err("region: %s: lease object without its mount, seq or lease_ms", name);
		lease_doc_clear(&d);
		return -EUCLEAN;
	}
	*out = d;
	return 0;
bad:
	log_err("region: %s: malformed line \"%.*s\"", name, (int)(ln.val + ln.vlen - ln.name),
	        ln.name);
	lease_doc_clear(&d);
	return -EUCLEAN;
}

int holder_doc_parse(const char *name, const void *buf, size_t len, struct holder_doc *out)
{
	const char *p = buf, *end = p + len;
	struct holder_doc h = {0};
	struct line ln;
	unsigned have = 0;
	int rc, f;

	if (len > LEASE_OBJECT_MAX || !next_line(&p, end, &ln)) {
		log_err("region: %s: not a holder object (%zu bytes)", name, len);
		return -EUCLEAN;
	}
	rc = check_magic("holder", name, &ln, HOLDER_MAGIC, HOLDER_FORMAT_VERSION);
	if (rc)
		return rc;
	while (next_line(&p, end, &ln)) {
		f = common_field(&ln, h.mount, h.host, sizeof(h.host), &h.pid, h.mnt, sizeof(h.mnt),
		                 &h.since);
		if (f > 0) {
			have |= (unsigned)f;
			continue;
		}
		if (f < 0)
			goto bad;
		if (is(&ln, "epoch")) {
			if (!num(ln.val, ln.vlen, UINT64_MAX, &h.epoch))
				goto bad;
			have |= F_EPOCH;
		}
	}
	if ((have & (F_MOUNT | F_EPOCH)) != (F_MOUNT | F_EPOCH)) {
		log_err("region: %s: holder object without its mount or epoch", name);
		return -EUCLEAN;
	}
	*out = h;
	return 0;
bad:
	log_err("region: %s: malformed line \"%.*s\"", name, (int)(ln.val + ln.vlen - ln.name),
	        ln.name);
	return -EUCLEAN;
}
