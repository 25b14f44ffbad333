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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "lease.h"
#include "log.h"
#include "textfmt.h"

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

int lease_doc_format(const struct lease_doc *d, char **out, size_t *len)
{
	struct text t = {0};
	char host[sizeof(d->host)], mnt[sizeof(d->mnt)];

	clean_copy(host, sizeof(host), d->host);
	clean_copy(mnt, sizeof(mnt), d->mnt);
	text_add(&t, "%s %d\n", LEASE_MAGIC, LEASE_FORMAT_VERSION);
	text_add(&t,
	         "mount %s\nhost %s\npid %ld\nmnt %s\nsince %" PRId64 "\nseq %" PRIu64
	         "\nlease_ms %u\n",
	         d->mount, host, d->pid, mnt, d->since, d->seq, d->lease_ms);
	if (d->boot[0] && d->pidns)
		text_add(&t, "boot %s\npidns %" PRIu64 "\n", d->boot, d->pidns);
	for (size_t i = 0; i < d->nholds; i++)
		text_add(&t, "%s %" PRIu32 " %" PRIu64 "\n", d->holds[i].taking ? "take" : "hold",
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

int bell_doc_format(const struct bell_doc *d, char *buf, size_t cap, size_t *len)
{
	char host[sizeof(d->host)];
	int n;

	clean_copy(host, sizeof(host), d->host);
	n = snprintf(buf, cap, "%s %d\nmount %s\nseq %" PRIu64 "\nhost %s\n", BELL_MAGIC,
	             BELL_FORMAT_VERSION, d->mount, d->seq, host);
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
static int common_field(const struct text_line *ln, char *mount, char *host, size_t hostcap,
                        long *pid, char *mnt, size_t mntcap, int64_t *since)
{
	uint64_t v;

	if (text_is(ln, "mount"))
		return str(ln->val, ln->vlen, mount, 17) && lease_id_valid(mount) ? F_MOUNT : -1;
	if (text_is(ln, "host"))
		return str(ln->val, ln->vlen, host, hostcap) ? F_HOST : -1;
	if (text_is(ln, "mnt"))
		return str(ln->val, ln->vlen, mnt, mntcap) ? F_MNT : -1;
	if (text_is(ln, "pid")) {
		if (!text_num(ln->val, ln->vlen, (uint64_t)INT32_MAX, &v))
			return -1;
		*pid = (long)v;
		return F_PID;
	}
	if (text_is(ln, "since")) {
		if (!text_num(ln->val, ln->vlen, (uint64_t)INT64_MAX, &v))
			return -1;
		*since = (int64_t)v;
		return F_SINCE;
	}
	return 0;
}

/* Where a parse puts the fields common to the objects. */
struct common {
	char *mount;
	char *host;
	size_t hostcap;
	long *pid;
	char *mnt;
	size_t mntcap;
	int64_t *since;
};

/* A field of one object's own: its F_ bit, 0 for an unknown field, -1 for a bad value. */
typedef int (*field_fn)(void *arg, const struct text_line *ln);

/*
 * The parse every object shares: the size bound, the magic line, then each line through
 * common_field() and fn.  *have: the F_ bits seen.  0, -EUCLEAN (logged), -ENOMEM,
 * -EPROTONOSUPPORT.
 */
static int parse(const char *what, const char *magic, int version, const char *name,
                 const void *buf, size_t len, const struct common *c, field_fn fn, void *arg,
                 unsigned *have)
{
	const char *p = buf, *end = p + len;
	struct text_line ln;
	int rc, f;

	*have = 0;
	if (len > LEASE_OBJECT_MAX || !text_next_line(&p, end, &ln)) {
		log_err("region: %s: not a %s object (%zu bytes)", name, what, len);
		return -EUCLEAN;
	}
	rc = text_check_magic(what, name, &ln, magic, version);
	if (rc)
		return rc;
	while (text_next_line(&p, end, &ln)) {
		f = common_field(&ln, c->mount, c->host, c->hostcap, c->pid, c->mnt, c->mntcap,
		                 c->since);
		if (f == 0)
			f = fn(arg, &ln); /* unknown to both: a field of a later version, skipped */
		if (f == -ENOMEM)
			return -ENOMEM;
		if (f < 0) {
			log_err("region: %s: malformed line \"%.*s\"", name,
			        (int)(ln.val + ln.vlen - ln.name), ln.name);
			return -EUCLEAN;
		}
		*have |= (unsigned)f;
	}
	return 0;
}

/* A "seq N" line into *(uint64_t *)arg. */
static int seq_field(uint64_t *seq, const struct text_line *ln)
{
	if (!text_is(ln, "seq"))
		return 0;
	return text_num(ln->val, ln->vlen, UINT64_MAX, seq) ? F_SEQ : -1;
}

/* The lease's own fields (arg: the doc, its holds grown in cap). */
struct lease_parse {
	struct lease_doc *d;
	size_t cap;
};

static int lease_field(void *arg, const struct text_line *ln)
{
	struct lease_parse *lp = arg;
	struct lease_doc *d = lp->d;
	uint64_t v, rid, ep;
	int f = seq_field(&d->seq, ln);

	if (f)
		return f;
	if (text_is(ln, "lease_ms")) {
		if (!text_num(ln->val, ln->vlen, UINT32_MAX, &v) || v == 0)
			return -1;
		d->lease_ms = (unsigned)v;
		return F_LEASE;
	}
	if (text_is(ln, "boot")) {
		if (ln->vlen == 0 || ln->vlen >= sizeof(d->boot))
			return -1;
		memcpy(d->boot, ln->val, ln->vlen);
		d->boot[ln->vlen] = 0;
		return 0x100; /* optional */
	}
	if (text_is(ln, "pidns"))
		return text_num(ln->val, ln->vlen, UINT64_MAX, &d->pidns) ? 0x100 : -1;
	if (text_is(ln, "hold") || text_is(ln, "take")) {
		const char *sp = memchr(ln->val, ' ', ln->vlen);
		if (!sp || !text_num(ln->val, (size_t)(sp - ln->val), UINT32_MAX, &rid) ||
		    !text_num(sp + 1, ln->vlen - (size_t)(sp + 1 - ln->val), UINT64_MAX, &ep))
			return -1;
		if (MW_GROW(d->holds, lp->cap, d->nholds + 1, 4))
			return -ENOMEM;
		d->holds[d->nholds++] = (struct lease_hold){
		    .rid = (uint32_t)rid, .epoch = ep, .taking = text_is(ln, "take")};
		return 0x100;
	}
	return 0;
}

int lease_doc_parse(const char *name, const void *buf, size_t len, struct lease_doc *out)
{
	struct lease_doc d = {0};
	struct lease_parse lp = {&d, 0};
	struct common c = {d.mount, d.host, sizeof(d.host), &d.pid, d.mnt, sizeof(d.mnt), &d.since};
	unsigned have;
	int rc = parse("lease", LEASE_MAGIC, LEASE_FORMAT_VERSION, name, buf, len, &c, lease_field,
	               &lp, &have);

	if (rc == 0 && (have & (F_MOUNT | F_SEQ | F_LEASE)) != (F_MOUNT | F_SEQ | F_LEASE)) {
		log_err("region: %s: lease object without its mount, seq or lease_ms", name);
		rc = -EUCLEAN;
	}
	if (rc) {
		lease_doc_clear(&d);
		return rc;
	}
	*out = d;
	return 0;
}

static int holder_field(void *arg, const struct text_line *ln)
{
	uint64_t *epoch = arg;

	if (!text_is(ln, "epoch"))
		return 0;
	return text_num(ln->val, ln->vlen, UINT64_MAX, epoch) ? F_EPOCH : -1;
}

int holder_doc_parse(const char *name, const void *buf, size_t len, struct holder_doc *out)
{
	struct holder_doc h = {0};
	struct common c = {h.mount, h.host, sizeof(h.host), &h.pid, h.mnt, sizeof(h.mnt), &h.since};
	unsigned have;
	int rc = parse("holder", HOLDER_MAGIC, HOLDER_FORMAT_VERSION, name, buf, len, &c,
	               holder_field, &h.epoch, &have);

	if (rc)
		return rc;
	if ((have & (F_MOUNT | F_EPOCH)) != (F_MOUNT | F_EPOCH)) {
		log_err("region: %s: holder object without its mount or epoch", name);
		return -EUCLEAN;
	}
	*out = h;
	return 0;
}

static int bell_field(void *arg, const struct text_line *ln)
{
	return seq_field(arg, ln);
}

int bell_doc_parse(const char *name, const void *buf, size_t len, struct bell_doc *out)
{
	struct bell_doc d = {0};
	long pid = 0;
	int64_t since = 0;
	char mnt[1024]; /* fields the bell does not have: parsed (a later version), ignored */
	struct common c = {d.mount, d.host, sizeof(d.host), &pid, mnt, sizeof(mnt), &since};
	unsigned have;
	int rc;

	if (len > BELL_OBJECT_MAX) {
		log_err("region: %s: not a bell object (%zu bytes)", name, len);
		return -EUCLEAN;
	}
	rc = parse("bell", BELL_MAGIC, BELL_FORMAT_VERSION, name, buf, len, &c, bell_field, &d.seq,
	           &have);
	if (rc)
		return rc;
	if ((have & (F_MOUNT | F_SEQ)) != (F_MOUNT | F_SEQ)) {
		log_err("region: %s: bell object without its mount or seq", name);
		return -EUCLEAN;
	}
	*out = d;
	return 0;
}
