/*
 * manifest.c - the manifest: encode/decode, discovery, conditional commit
 * and the writer's epoch claim.
 *
 * DESIGN (the full page is docs/MANIFEST.md).
 *
 * The manifest says what the durable state of the store is apart from the
 * WAL tail: which SSTables are live, which WAL position they cover, which
 * writer epoch is current and which objects await garbage collection.  It is
 * never overwritten: version N+1 is a new object manifest/<N+1> created with
 * put_if_absent, so two writers can never both think they committed N+1.
 *
 * Epochs and fencing.  A writer opens by writing manifest N+1 with epoch+1.
 * Since the name is taken atomically, each epoch belongs to exactly one
 * writer.  Every later manifest commit by that writer is again a conditional
 * create of its own last version + 1: if a newer writer has claimed that
 * number, the commit fails with -EEXIST and the writer is fenced.  (The WAL
 * fence entry, docs/WAL.md, fences its WAL writes.)  A claim also draws a
 * random nonce into the header: the claims of two writers racing from the
 * same version would otherwise be byte-identical, and a store that resolves
 * a retried conditional create by comparing bytes (the S3 store does, after
 * an ambiguous attempt) would then tell both that they won the epoch.
 *
 * Discovery.  hint/manifest holds the latest version its writer knew of.  It
 * is overwritten after each commit and may be stale (a crash between the
 * commit and the hint write) or missing, so the reader lists manifest/ from
 * the hint's version onward and takes the highest name it finds; without a
 * usable hint it lists the whole prefix.  The hint only makes the listing
 * short; correctness comes from the listing.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "coding.h"
#include "format.h"
#include "log.h"
#include "manifest.h"
#include "store.h"

/* How many times manifest_claim() re-reads after losing a race. */
#define CLAIM_TRIES 16

void manifest_clear(struct manifest *m)
{
	for (size_t i = 0; i < m->nssts; i++) {
		free(m->ssts[i].name);
		free(m->ssts[i].smallest);
		free(m->ssts[i].largest);
	}
	free(m->ssts);
	for (size_t i = 0; i < m->ngc; i++)
		free(m->gc[i].name);
	free(m->gc);
	memset(m, 0, sizeof(*m));
}

static void *dup_bytes(const void *p, size_t n)
{
	void *q = malloc(n ? n : 1);
	if (q && n)
		memcpy(q, p, n);
	return q;
}

static char *dup_str(const void *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

int manifest_copy(struct manifest *dst, const struct manifest *src)
{
	struct manifest m = *src;

	m.ssts = NULL;
	m.gc = NULL;
	m.nssts = m.ngc = 0;
	if (src->nssts) {
		m.ssts = calloc(src->nssts, sizeof(*m.ssts));
		if (!m.ssts)
			goto fail;
		for (size_t i = 0; i < src->nssts; i++) {
			const struct manifest_sst *s = &src->ssts[i];
			struct manifest_sst *d = &m.ssts[i];
			*d = *s;
			d->name = dup_str(s->name, strlen(s->name));
			d->smallest = dup_bytes(s->smallest, s->smallest_len);
			d->largest = dup_bytes(s->largest, s->largest_len);
			m.nssts++;
			if (!d->name || !d->smallest || !d->largest)
				goto fail;
		}
	}
	if (src->ngc) {
		m.gc = calloc(src->ngc, sizeof(*m.gc));
		if (!m.gc)
			goto fail;
		for (size_t i = 0; i < src->ngc; i++) {
			m.gc[i] = src->gc[i];
			m.gc[i].name = dup_str(src->gc[i].name, strlen(src->gc[i].name));
			m.ngc++;
			if (!m.gc[i].name)
				goto fail;
		}
	}
	*dst = m;
	return 0;
fail:
	manifest_clear(&m);
	return -ENOMEM;
}

static int put_lenbytes(struct mw_buf *b, const void *p, size_t n)
{
	int rc = mw_buf_varint(b, n);
	return rc ? rc : mw_buf_append(b, p, n);
}

/* Append one record: tag, varint length, payload (built in tmp). */
static int put_record(struct mw_buf *out, uint8_t tag, const struct mw_buf *payload)
{
	int rc = mw_buf_append(out, &tag, 1);
	return rc ? rc : put_lenbytes(out, payload->p, payload->len);
}

int manifest_encode(const struct manifest *m, struct mw_buf *out)
{
	struct mw_buf rec = {0};
	size_t start = out->len, body;
	uint8_t *h;
	int rc;

	rc = mw_buf_reserve(out, MANIFEST_HEADER_SIZE);
	if (rc)
		return rc;
	memset(out->p + start, 0, MANIFEST_HEADER_SIZE);
	out->len += MANIFEST_HEADER_SIZE;
	body = out->len;
	for (size_t i = 0; i < m->nssts; i++) {
		const struct manifest_sst *s = &m->ssts[i];
		rec.len = 0;
		if ((rc = mw_buf_varint(&rec, s->id)) ||
		    (rc = put_lenbytes(&rec, s->name, strlen(s->name))) ||
		    (rc = mw_buf_be64(&rec, s->size)) || (rc = mw_buf_varint(&rec, s->level)) ||
		    (rc = put_lenbytes(&rec, s->smallest, s->smallest_len)) ||
		    (rc = put_lenbytes(&rec, s->largest, s->largest_len)) ||
		    (rc = mw_buf_be64(&rec, s->seq_min)) || (rc = mw_buf_be64(&rec, s->seq_max)) ||
		    (rc = put_record(out, MAN_TAG_SST, &rec)))
			goto out;
	}
	for (size_t i = 0; i < m->ngc; i++) {
		rec.len = 0;
		if ((rc = mw_buf_varint(&rec, m->gc[i].since_version)) ||
		    (rc = mw_buf_append(&rec, m->gc[i].name, strlen(m->gc[i].name))) ||
		    (rc = put_record(out, MAN_TAG_GC, &rec)))
			goto out;
	}
	h = out->p + start;
	put_be32(h + MAN_OFF_MAGIC, MANIFEST_MAGIC);
	put_be16(h + MAN_OFF_VERSION, MANIFEST_VERSION);
	put_be16(h + MAN_OFF_FLAGS, 0);
	put_be64(h + MAN_OFF_MVERSION, m->version);
	put_be64(h + MAN_OFF_EPOCH, m->epoch);
	put_be64(h + MAN_OFF_WAL_COVERED, m->wal_covered);
	put_be64(h + MAN_OFF_LAST_SEQ, m->last_seq);
	put_be64(h + MAN_OFF_NEXT_SST, m->next_sst);
	put_be32(h + MAN_OFF_REC_COUNT, (uint32_t)(m->nssts + m->ngc));
	put_be32(h + MAN_OFF_CLAIM, m->claim);
	put_be64(h + MAN_OFF_BODY_LEN, out->len - body);
	put_be64(h + MAN_OFF_BODY_HASH, fmt_hash(out->p + body, out->len - body));
	put_be64(h + MAN_OFF_HEAD_HASH, fmt_hash(h, MAN_OFF_HEAD_HASH));
out:
	mw_buf_free(&rec);
	return rc;
}

/* Cursor helpers for decoding; each returns false on malformed input. */
static bool get_var(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	size_t n = get_varint64(*p, end, v);
	*p += n;
	return n != 0;
}

static bool get_lenbytes(const uint8_t **p, const uint8_t *end, const uint8_t **b, size_t *n)
{
	uint64_t v;
	if (!get_var(p, end, &v) || v > (uint64_t)(end - *p))
		return false;
	*b = *p;
	*n = (size_t)v;
	*p += v;
	return true;
}

static bool get_u64(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	if (end - *p < 8)
		return false;
	*v = get_be64(*p);
	*p += 8;
	return true;
}

static int decode_sst(const uint8_t *p, const uint8_t *end, struct manifest_sst *s)
{
	const uint8_t *nm, *sm, *lg;
	size_t nn, sn, ln;
	uint64_t level;

	if (!get_var(&p, end, &s->id) || !get_lenbytes(&p, end, &nm, &nn) ||
	    !get_u64(&p, end, &s->size) || !get_var(&p, end, &level) || level > UINT32_MAX ||
	    !get_lenbytes(&p, end, &sm, &sn) || !get_lenbytes(&p, end, &lg, &ln) ||
	    !get_u64(&p, end, &s->seq_min) || !get_u64(&p, end, &s->seq_max) || p != end)
		return -EUCLEAN;
	s->level = (uint32_t)level;
	s->name = dup_str(nm, nn);
	s->smallest = dup_bytes(sm, sn);
	s->smallest_len = sn;
	s->largest = dup_bytes(lg, ln);
	s->largest_len = ln;
	if (!s->name || !s->smallest || !s->largest)
		return -ENOMEM;
	return 0;
}

int manifest_decode(const char *name, const void *buf, size_t len, struct manifest *out)
{
	const uint8_t *h = buf, *p, *end;
	struct manifest m = {0};
	uint64_t blen;
	uint32_t nrec;
	uint16_t ver;
	int rc = -EUCLEAN;

	if (len < MANIFEST_HEADER_SIZE) {
		log_err("manifest: %s: truncated (%zu bytes)", name, len);
		return -EUCLEAN;
	}
	if (get_be32(h + MAN_OFF_MAGIC) != MANIFEST_MAGIC) {
		log_err("manifest: %s: bad magic", name);
		return -EUCLEAN;
	}
	ver = get_be16(h + MAN_OFF_VERSION);
	/* the header checksum first: a flipped version bit is damage, not a newer version */
	if (get_be64(h + MAN_OFF_HEAD_HASH) != fmt_hash(h, MAN_OFF_HEAD_HASH)) {
		log_err("manifest: %s: header checksum mismatch", name);
		return -EUCLEAN;
	}
	if (ver == 0 || ver > MANIFEST_VERSION) {
		log_err("manifest: %s: format version %u not supported (this program: %u)", name,
		        ver, MANIFEST_VERSION);
		return ver ? -EPROTONOSUPPORT : -EUCLEAN;
	}
	blen = get_be64(h + MAN_OFF_BODY_LEN);
	if (blen != len - MANIFEST_HEADER_SIZE) {
		log_err("manifest: %s: body length %" PRIu64 " but object holds %zu", name, blen,
		        len - MANIFEST_HEADER_SIZE);
		return -EUCLEAN;
	}
	if (get_be64(h + MAN_OFF_BODY_HASH) != fmt_hash(h + MANIFEST_HEADER_SIZE, blen)) {
		log_err("manifest: %s: body checksum mismatch", name);
		return -EUCLEAN;
	}
	m.version = get_be64(h + MAN_OFF_MVERSION);
	m.epoch = get_be64(h + MAN_OFF_EPOCH);
	m.wal_covered = get_be64(h + MAN_OFF_WAL_COVERED);
	m.last_seq = get_be64(h + MAN_OFF_LAST_SEQ);
	m.next_sst = get_be64(h + MAN_OFF_NEXT_SST);
	m.claim = get_be32(h + MAN_OFF_CLAIM);
	nrec = get_be32(h + MAN_OFF_REC_COUNT);
	if (nrec > blen / 2) {
		log_err("manifest: %s: %u records cannot fit in %" PRIu64 " bytes", name, nrec,
		        blen);
		return -EUCLEAN;
	}
	if (nrec) {
		m.ssts = calloc(nrec, sizeof(*m.ssts));
		m.gc = calloc(nrec, sizeof(*m.gc));
		if (!m.ssts || !m.gc) {
			rc = -ENOMEM;
			goto fail;
		}
	}
	p = h + MANIFEST_HEADER_SIZE;
	end = p + blen;
	for (uint32_t i = 0; i < nrec; i++) {
		const uint8_t *pl;
		size_t pn;
		uint8_t tag;
		uint64_t since;

		if (p >= end)
			goto bad;
		tag = *p++;
		if (!get_lenbytes(&p, end, &pl, &pn))
			goto bad;
		switch (tag) {
		case MAN_TAG_SST:
			m.nssts++;
			rc = decode_sst(pl, pl + pn, &m.ssts[m.nssts - 1]);
			if (rc == -ENOMEM)
				goto fail;
			if (rc)
				goto bad;
			break;
		case MAN_TAG_GC: {
			const uint8_t *q = pl;
			if (!get_var(&q, pl + pn, &since))
				goto bad;
			m.gc[m.ngc].since_version = since;
			m.gc[m.ngc].name = dup_str(q, (size_t)(pl + pn - q));
			m.ngc++;
			if (!m.gc[m.ngc - 1].name) {
				rc = -ENOMEM;
				goto fail;
			}
			break;
		}
		default:
			log_err("manifest: %s: unknown record tag %u", name, tag);
			rc = -EUCLEAN;
			goto fail;
		}
	}
	if (p != end)
		goto bad;
	*out = m;
	return 0;
bad:
	log_err("manifest: %s: malformed body", name);
	rc = -EUCLEAN;
fail:
	manifest_clear(&m);
	return rc;
}

/* Listing callback: remember the highest manifest version seen. */
static int list_max(void *arg, const char *key, uint64_t size)
{
	uint64_t *max = arg, v;

	(void)size;
	if (fmt_parse_manifest_name(key, &v) == 0 && v > *max)
		*max = v;
	return 0;
}

static uint64_t read_hint(struct store *st)
{
	void *buf = NULL;
	size_t len = 0;
	uint64_t v = 0;
	const uint8_t *h;

	if (store_get(st, FMT_HINT_KEY, 0, STORE_TO_END, &buf, &len) != 0)
		return 0;
	h = buf;
	if (len == HINT_SIZE && get_be32(h + HINT_OFF_MAGIC) == HINT_MAGIC &&
	    get_be16(h + HINT_OFF_VERSION) == HINT_VERSION &&
	    get_be64(h + HINT_OFF_HASH) == fmt_hash(h, HINT_OFF_HASH))
		v = get_be64(h + HINT_OFF_MVERSION);
	else
		log_warn("manifest: %s is not a valid hint; listing all manifests", FMT_HINT_KEY);
	free(buf);
	return v;
}

int manifest_find_latest(struct store *st, uint64_t *version)
{
	char after[FMT_NAME_MAX];
	uint64_t hint = read_hint(st), max = 0;
	int rc;

	if (hint) {
		/* list from the hint onward (inclusive: start after hint-1) */
		fmt_manifest_name(after, hint - 1);
		rc = store_list(st, FMT_MANIFEST_PREFIX, after, 0, list_max, &max);
		if (rc)
			return rc;
	}
	if (max == 0) {
		/* no hint, or the hinted version is gone: list everything */
		rc = store_list(st, FMT_MANIFEST_PREFIX, NULL, 0, list_max, &max);
		if (rc)
			return rc;
	}
	*version = max;
	return 0;
}

int manifest_load(struct store *st, uint64_t version, struct manifest *m)
{
	char name[FMT_NAME_MAX];
	void *buf = NULL;
	size_t len = 0;
	int rc;

	fmt_manifest_name(name, version);
	rc = store_get(st, name, 0, STORE_TO_END, &buf, &len);
	if (rc) {
		if (rc != -ENOENT)
			log_err("manifest: get %s failed: %s", name, strerror(-rc));
		return rc;
	}
	rc = manifest_decode(name, buf, len, m);
	free(buf);
	if (rc == 0 && m->version != version) {
		log_err("manifest: %s holds version %" PRIu64, name, m->version);
		manifest_clear(m);
		rc = -EUCLEAN;
	}
	return rc;
}

int manifest_load_latest(struct store *st, struct manifest *m)
{
	uint64_t v;
	int rc = manifest_find_latest(st, &v);

	if (rc)
		return rc;
	if (v == 0) {
		memset(m, 0, sizeof(*m));
		return 0;
	}
	return manifest_load(st, v, m);
}

static void write_hint(struct store *st, uint64_t version)
{
	uint8_t h[HINT_SIZE];
	int rc;

	put_be32(h + HINT_OFF_MAGIC, HINT_MAGIC);
	put_be16(h + HINT_OFF_VERSION, HINT_VERSION);
	put_be16(h + HINT_OFF_FLAGS, 0);
	put_be64(h + HINT_OFF_MVERSION, version);
	put_be64(h + HINT_OFF_HASH, fmt_hash(h, HINT_OFF_HASH));
	rc = store_put(st, FMT_HINT_KEY, h, sizeof(h));
	if (rc)
		log_warn("manifest: put %s failed: %s (discovery will list)", FMT_HINT_KEY,
		         strerror(-rc));
}

int manifest_commit(struct store *st, const struct manifest *m, bool conditional)
{
	char name[FMT_NAME_MAX];
	struct mw_buf b = {0};
	int rc;

	fmt_manifest_name(name, m->version);
	rc = manifest_encode(m, &b);
	if (rc)
		goto out;
	rc = conditional ? store_put_if_absent(st, name, b.p, b.len)
	                 : store_put(st, name, b.p, b.len);
	if (rc) {
		if (rc != -EEXIST)
			log_err("manifest: put %s failed: %s", name, strerror(-rc));
		goto out;
	}
	write_hint(st, m->version);
out:
	mw_buf_free(&b);
	return rc;
}

/* A claim nonce: random, or (without getrandom) from the clock and the pid. */
static uint32_t claim_nonce(void)
{
	struct {
		struct timespec ts;
		pid_t pid;
		const void *where;
	} seed;
	uint32_t n = 0;

	if (getrandom(&n, sizeof(n), GRND_NONBLOCK) == (ssize_t)sizeof(n))
		return n;
	memset(&seed, 0, sizeof(seed));
	clock_gettime(CLOCK_REALTIME, &seed.ts);
	seed.pid = getpid();
	seed.where = &seed;
	return (uint32_t)fmt_hash(&seed, sizeof(seed));
}

int manifest_commit_ours(struct store *st, struct manifest *m, bool conditional)
{
	for (int i = 0; i < CLAIM_TRIES; i++) {
		int rc = manifest_commit(st, m, conditional);
		if (rc != -EEXIST)
			return rc;
		char name[FMT_NAME_MAX];
		struct manifest got = {0};
		struct mw_buf b = {0};
		void *buf = NULL;
		size_t len = 0;
		fmt_manifest_name(name, m->version);
		rc = store_get(st, name, 0, STORE_TO_END, &buf, &len);
		if (rc == 0)
			rc = manifest_decode(name, buf, len, &got);
		if (rc == 0 && got.epoch == m->epoch && (rc = manifest_encode(m, &b)) == 0 &&
		    b.len == len && memcmp(b.p, buf, len) == 0) {
			rc = 1; /* our own bytes: this very commit landed */
		} else if (rc == 0 && got.epoch == m->epoch) {
			log_warn("manifest: %s is an earlier attempt of ours that landed late; "
			         "committing at the next version",
			         name);
			m->version++;
			rc = 2;
		} else if (rc == 0) {
			rc = -EEXIST; /* a newer writer */
		}
		mw_buf_free(&b);
		manifest_clear(&got);
		free(buf);
		if (rc == 1) {
			write_hint(st, m->version);
			return 0;
		}
		if (rc != 2)
			return rc;
	}
	return -EEXIST;
}

int manifest_claim(struct store *st, bool conditional, struct manifest *out)
{
	return manifest_claim_epoch(st, conditional, 0, out);
}

int manifest_claim_epoch(struct store *st, bool conditional, uint64_t epoch, struct manifest *out)
{
	struct manifest m = {0};
	int rc = -EBUSY;

	for (int i = 0; i < CLAIM_TRIES; i++) {
		rc = manifest_load_latest(st, &m);
		if (rc)
			return rc;
		if (epoch && m.epoch >= epoch) {
			/* someone claimed it (or a later one) since our holder object: never ours
			 */
			log_warn("manifest: epoch %" PRIu64 " was to be ours, but manifest %" PRIu64
			         " is of epoch %" PRIu64 ": another writer claimed; not claiming",
			         epoch, m.version, m.epoch);
			manifest_clear(&m);
			return -EAGAIN;
		}
		m.version++;
		m.epoch = epoch ? epoch : m.epoch + 1;
		m.claim = claim_nonce(); /* our claim's bytes are ours alone */
		rc = manifest_commit(st, &m, conditional);
		if (rc == 0) {
			*out = m;
			return 0;
		}
		manifest_clear(&m);
		if (rc != -EEXIST)
			return rc;
		log_info("manifest: lost the race for a new version; retrying");
	}
	log_err("manifest: could not claim an epoch after %d tries", CLAIM_TRIES);
	return rc;
}

int manifest_claim_at(struct store *st, bool conditional, struct manifest *m, uint64_t latest,
                      uint64_t min_epoch)
{
	m->version = latest + 1;
	m->epoch = m->epoch + 1 > min_epoch ? m->epoch + 1 : min_epoch;
	m->claim = claim_nonce();
	return manifest_commit(st, m, conditional);
}
