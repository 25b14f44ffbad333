/*
 * sigv4.c - AWS Signature Version 4 (see sigv4.h).
 *
 *   canonical request = METHOD \n PATH \n QUERY \n
 *                       (name:value \n)* \n SIGNED_HEADERS \n PAYLOAD_HASH
 *   string to sign    = "AWS4-HMAC-SHA256" \n DATE \n SCOPE \n hex(sha256(canonical))
 *   signing key       = HMAC(HMAC(HMAC(HMAC("AWS4" secret, yyyymmdd), region), "s3"),
 *                            "aws4_request")
 *   signature         = hex(HMAC(signing key, string to sign))
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "grow.h"
#include "sigv4.h"

static const char hexdig[] = "0123456789abcdef";
static const char hexup[] = "0123456789ABCDEF";

static void to_hex(const unsigned char *in, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hexdig[in[i] >> 4];
		out[2 * i + 1] = hexdig[in[i] & 15];
	}
	out[2 * n] = '\0';
}

size_t sigv4_uri_encode(const char *in, size_t n, bool encode_slash, char *out)
{
	size_t o = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)in[i];
		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || (c == '/' && !encode_slash)) {
			out[o++] = (char)c;
		} else {
			out[o++] = '%';
			out[o++] = hexup[c >> 4];
			out[o++] = hexup[c & 15];
		}
	}
	out[o] = '\0';
	return o;
}

struct enc_param {
	char *name;  /* encoded */
	char *value; /* encoded */
};

static int cmp_param(const void *a, const void *b)
{
	const struct enc_param *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : strcmp(x->value, y->value);
}

int sigv4_canonical_query(const struct sigv4_param *p, size_t n, char *out, size_t outsz)
{
	struct enc_param e[16];
	size_t len = 0;
	int rc = 0;

	if (n > 16)
		return -EINVAL;
	memset(e, 0, sizeof(e));
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(p[i].name), vl = strlen(p[i].value);
		e[i].name = malloc(3 * nl + 1);
		e[i].value = malloc(3 * vl + 1);
		if (!e[i].name || !e[i].value) {
			rc = -ENOMEM;
			goto out;
		}
		sigv4_uri_encode(p[i].name, nl, true, e[i].name);
		sigv4_uri_encode(p[i].value, vl, true, e[i].value);
	}
	qsort(e, n, sizeof(e[0]), cmp_param);
	if (outsz == 0) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		int w = snprintf(out + len, outsz - len, "%s%s=%s", i ? "&" : "", e[i].name,
		                 e[i].value);
		if (w < 0 || (size_t)w >= outsz - len) {
			rc = -ENAMETOOLONG;
			goto out;
		}
		len += (size_t)w;
	}
	rc = (int)len;
out:
	for (size_t i = 0; i < n; i++) {
		free(e[i].name);
		free(e[i].value);
	}
	return rc;
}

void sigv4_sha256_hex(const void *buf, size_t len, char out[65])
{
	unsigned char md[SHA256_DIGEST_LENGTH];
	SHA256(buf ? buf : (const void *)"", len, md);
	to_hex(md, sizeof(md), out);
}

void sigv4_md5_base64(const void *buf, size_t len, char out[25])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_Digest(buf ? buf : (const void *)"", len, md, &mdlen, EVP_md5(), NULL);
	EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen); /* 16 bytes -> 24 chars + NUL */
}

void sigv4_amz_date(time_t t, char out[17])
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static void hmac(const void *key, size_t keylen, const void *msg, size_t n, unsigned char out[32])
{
	unsigned int outlen = 32;
	HMAC(EVP_sha256(), key, (int)keylen, msg, n, out, &outlen);
}

/* Growable string for the canonical request. */
struct sbuf {
	char *p;
	size_t n, cap;
	bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->oom)
		return;
	if (MW_GROW(b->p, b->cap, b->n + n + 1, 512)) {
		b->oom = true;
		return;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
	sb_add(b, s, strlen(s));
}

static int cmp_header(const void *a, const void *b)
{
	const struct sigv4_header *x = a, *y = b;
	return strcmp(x->name, y->name);
}

/* Append value with leading/trailing spaces removed and inner runs folded to one. */
static void sb_trimmed(struct sbuf *b, const char *v)
{
	while (*v == ' ' || *v == '\t')
		v++;
	bool space = false;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = true;
			continue;
		}
		if (space)
			sb_add(b, " ", 1);
		space = false;
		sb_add(b, v, 1);
	}
}

int sigv4_sign(const struct sigv4_creds *c, const char *region, const char *amz_date,
               const struct sigv4_request *r, char *auth, size_t authsz, char *canon,
               size_t canonsz)
{
	return sigv4_sign_service(c, region, "s3", amz_date, r, auth, authsz, canon, canonsz);
}

int sigv4_sign_service(const struct sigv4_creds *c, const char *region, const char *service,
                       const char *amz_date, const struct sigv4_request *r, char *auth,
                       size_t authsz, char *canon, size_t canonsz)
{
	struct sigv4_header h[SIGV4_MAX_HEADERS];
	struct sbuf cr = {0}, sh = {0};
	char crhash[65], date[9], scope[128], sts[256], sig[65];
	unsigned char k[32], k2[32];
	int rc = 0, w;

	if (!r->nheaders || r->nheaders > SIGV4_MAX_HEADERS || !amz_date ||
	    strlen(amz_date) != 16 || !c->secret_key || !c->access_key)
		return -EINVAL;
	memcpy(h, r->headers, r->nheaders * sizeof(h[0]));
	qsort(h, r->nheaders, sizeof(h[0]), cmp_header);
	for (size_t i = 0; i < r->nheaders; i++) {
		if (i)
			sb_add(&sh, ";", 1);
		sb_str(&sh, h[i].name);
	}
	sb_str(&cr, r->method);
	sb_add(&cr, "\n", 1);
	sb_str(&cr, r->path);
	sb_add(&cr, "\n", 1);
	sb_str(&cr, r->query ? r->query : "");
	sb_add(&cr, "\n", 1);
	for (size_t i = 0; i < r->nheaders; i++) {
		sb_str(&cr, h[i].name);
		sb_add(&cr, ":", 1);
		sb_trimmed(&cr, h[i].value);
		sb_add(&cr, "\n", 1);
	}
	sb_add(&cr, "\n", 1);
	sb_str(&cr, sh.p ? sh.p : "");
	sb_add(&cr, "\n", 1);
	sb_str(&cr, r->payload_hash);
	if (cr.oom || sh.oom) {
		rc = -ENOMEM;
		goto out;
	}
	if (canon && canonsz) {
		snprintf(canon, canonsz, "%s", cr.p);
	}
	sigv4_sha256_hex(cr.p, cr.n, crhash);

	memcpy(date, amz_date, 8);
	date[8] = '\0';
	w = snprintf(scope, sizeof(scope), "%s/%s/%s/aws4_request", date, region, service);
	if (w < 0 || (size_t)w >= sizeof(scope)) {
		rc = -EINVAL;
		goto out;
	}
	snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, crhash);

	{
		size_t sl = strlen(c->secret_key);
		char *ks = malloc(sl + 5);
		if (!ks) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(ks, "AWS4", 4);
		memcpy(ks + 4, c->secret_key, sl + 1);
		hmac(ks, sl + 4, date, 8, k);
		OPENSSL_cleanse(ks, sl + 4);
		free(ks);
	}
	hmac(k, 32, region, strlen(region), k2);
	hmac(k2, 32, service, strlen(service), k);
	hmac(k, 32, "aws4_request", 12, k2);
	hmac(k2, 32, sts, strlen(sts), k);
	to_hex(k, 32, sig);
	OPENSSL_cleanse(k2, sizeof(k2));

	w = snprintf(auth, authsz,
	             "AWS4-HMAC-SHA256 Credential=%s/%s,SignedHeaders=%s,Signature=%s",
	             c->access_key, scope, sh.p, sig);
	if (w < 0 || (size_t)w >= authsz)
		rc = -ENAMETOOLONG;
out:
	free(cr.p);
	free(sh.p);
	return rc;
}
