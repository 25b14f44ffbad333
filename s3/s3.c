/*
 * s3.c - the S3 object store: libcurl + OpenSSL SigV4, behind store.h.
 *
 * Design in brief.
 *
 * Addressing.  Path-style ("http://host:port/bucket/key") for custom
 * endpoints, virtual-hosted ("https://bucket.s3.region.amazonaws.com/key")
 * for AWS; either can be forced by the options.  Object keys are the
 * store's prefix followed by the caller's key; each is URI-encoded once
 * (keeping '/') and the very same string is signed and sent.  Query values
 * are encoded by sigv4_canonical_query, which also gives the order that is
 * sent.
 *
 * Signing.  SigV4 with x-amz-content-sha256 on every request: the SHA-256 of
 * the body over plain http to another host; UNSIGNED-PAYLOAD over TLS or to
 * a loopback endpoint (unless opts.signed_payload).  The body hash guards a
 * body against damage or tampering on the way, which TLS's record MACs
 * already do, and a loopback connection has no wire: the bytes go from our
 * socket buffer to the server's inside one kernel.  Hashing costs a SHA-256
 * pass over every byte here and another in the server, which verifies it
 * (on a machine that runs both, a third of a core at 200 MB/s).  What the
 * engine stores checks itself besides: pack blocks against the hashes in
 * their descriptors, WAL entries, manifests and SSTables against their own
 * checksums (docs/PACKS.md, docs/WAL.md).
 * Session tokens go in x-amz-security-token (signed).  Credentials come
 * from the AWS chain in s3/creds.h (options, environment, web identity,
 * profiles with roles and credential_process, container, instance
 * metadata); each attempt of a request signs with the keys current at
 * that moment, so refreshed keys take over without disturbing requests in
 * flight.  Secrets are never logged.
 *
 * Retries.  Every operation here is safe to repeat: PUTs write whole objects
 * (or whole parts), GET/HEAD/LIST read, DELETE of a missing key succeeds.
 * Timeouts, connection failures, 500/502/503/504, 429 and SlowDown are
 * retried with full-jitter exponential backoff (100 ms doubling, capped at
 * 10 s, max_retries times).  The one subtle case is conditional create: if
 * an attempt failed in a way that may have landed (transport error or 5xx)
 * and a later attempt gets 412, the object may be ours.  We GET it and
 * compare with our bytes: equal means our create succeeded, so a retry
 * never turns our own success into -EEXIST.  TLS certificate failures are
 * never retried (they do not get better): the first one is reported, with
 * a hint about the CA file.
 *
 * Conditional create is PUT with If-None-Match: *.  At open the store
 * probes whether the backend honours it (a probe key written twice must
 * give 200 then 412) unless the options say so; caps.conditional_create
 * reflects the answer.  Multipart completion is never conditional (RGW
 * ignores If-None-Match there), so caps.conditional_finish is false.
 *
 * Errors that reach the caller are logged once with the operation, key,
 * HTTP status, S3 code and message (s3_fail) and mapped to an errno.
 *
 * One request (signing, the retries above, s3_fail()) is s3_call.c, which
 * this file and s3_writer.c call.
 */
#include <errno.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "log.h"
#include "s3_int.h"
#include "xml.h"

#define MIN_PART_SIZE ((size_t)5 << 20) /* S3's smallest non-final part */

void s3_opts_default(struct s3_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->conditional_create = -1;
	o->connections = 16;
	o->max_retries = 8;
	o->timeout_ms = 30000;
	o->part_size = (size_t)8 << 20;
	o->part_parallel = 4;
}

static struct s3 *S(struct store *st)
{
	return (struct s3 *)st;
}

/* ---- object operations ------------------------------------------------- */

static int s3_put_common(struct store *st, const char *key, const void *buf, size_t len, bool cond,
                         bool assume_ambiguous)
{
	struct s3 *s = S(st);
	struct s3_result res;
	struct sigv4_header inm = {"if-none-match", "*"};
	char *fk = s3_full_key(s, key);
	int rc;

	if (!fk)
		return -ENOMEM;
	struct s3_call c = {
	    .op = STORE_OP_PUT,
	    .method = "PUT",
	    .okey = fk,
	    .headers = cond ? &inm : NULL,
	    .nheaders = cond ? 1 : 0,
	    .body = buf ? buf : "",
	    .len = len,
	    .retry_conflict = cond,
	};
	rc = s3_call(s, &c, &res);
	if (rc == 0 && (res.r.status == 200 || res.r.status == 201 || res.r.status == 204)) {
		rc = 0;
	} else if (rc == 0 && cond && res.r.status == 412 && (res.ambiguous || assume_ambiguous)) {
		/* Our own earlier attempt may have created it: compare the bytes. */
		void *cur = NULL;
		size_t curlen = 0;
		int g = st->ops->get(st, key, 0, STORE_TO_END, &cur, &curlen);
		if (g == 0 && curlen == len && (len == 0 || !memcmp(cur, buf, len))) {
			log_info("s3: PUT(if-absent) %s: 412 after a retried attempt; the object "
			         "holds our bytes, so the create was ours",
			         fk);
			rc = 0;
		} else {
			rc = -EEXIST;
		}
		free(cur);
	} else {
		rc = s3_fail(s, cond ? "PUT(if-absent)" : "PUT", fk, &res, rc);
	}
	s3_result_free(&res);
	free(fk);
	return rc;
}

static int s3_put(struct store *st, const char *key, const void *buf, size_t len)
{
	return s3_put_common(st, key, buf, len, false, false);
}

static int s3_put_if_absent(struct store *st, const char *key, const void *buf, size_t len)
{
	return s3_put_common(st, key, buf, len, true, false);
}

int s3_put_if_absent_ex(struct store *st, const char *key, const void *buf, size_t len,
                        bool assume_ambiguous)
{
	return s3_put_common(st, key, buf, len, true, assume_ambiguous);
}

static int s3_head(struct store *st, const char *key, struct store_stat *out)
{
	struct s3 *s = S(st);
	struct s3_result res;
	char *fk = s3_full_key(s, key);
	int rc;

	if (!fk)
		return -ENOMEM;
	struct s3_call c = {.op = STORE_OP_HEAD, .method = "HEAD", .okey = fk};
	rc = s3_call(s, &c, &res);
	if (rc == 0 && res.r.status == 200) {
		if (res.r.content_length == UINT64_MAX) {
			log_err("s3: HEAD %s: no Content-Length in the response", fk);
			rc = -EIO;
		} else {
			memset(out, 0, sizeof(*out));
			out->size = res.r.content_length;
			snprintf(out->etag, sizeof(out->etag), "%s", res.r.etag);
			out->mtime = res.r.last_modified;
		}
	} else {
		rc = s3_fail(s, "HEAD", fk, &res, rc);
	}
	s3_result_free(&res);
	free(fk);
	return rc;
}

/*
 * The GET of [off, off + len) of key (len STORE_TO_END: to the end), into
 * into (into_cap bytes) when given; *ranged whether a Range header went.
 * Returns s3_call()'s code; res and *fk (the full key) are the caller's to
 * free.
 */
static int get_call(struct s3 *s, const char *key, uint64_t off, uint64_t len, char *into,
                    size_t into_cap, struct s3_result *res, char **fk, bool *ranged)
{
	struct sigv4_header rh;
	char range[64];

	*ranged = off > 0 || len != STORE_TO_END;
	if (!(*fk = s3_full_key(s, key))) {
		memset(res, 0, sizeof(*res));
		return -ENOMEM;
	}
	if (len == STORE_TO_END || len - 1 > UINT64_MAX - off)
		snprintf(range, sizeof(range), "bytes=%llu-", (unsigned long long)off);
	else
		snprintf(range, sizeof(range), "bytes=%llu-%llu", (unsigned long long)off,
		         (unsigned long long)(off + len - 1));
	rh = (struct sigv4_header){"range", range};
	struct s3_call c = {
	    .op = STORE_OP_GET,
	    .method = "GET",
	    .okey = *fk,
	    .headers = *ranged ? &rh : NULL,
	    .nheaders = *ranged ? 1 : 0,
	    .expect_len = len != STORE_TO_END && len < ((size_t)1 << 30) ? (size_t)len : 0,
	    .into = into,
	    .into_cap = into_cap,
	};
	return s3_call(s, &c, res);
}

/*
 * The body of a 200 or 206 answer to get_call(): its bytes [off, off + len)
 * moved to its start (a server that ignores Range sends the whole object
 * with 200), *n their count.  -EIO when it is shorter than it announced.
 */
static int get_body(const char *fk, struct s3_result *res, bool ranged, uint64_t off, uint64_t len,
                    size_t *n)
{
	char *b = res->r.body;
	*n = res->r.len;
	if (res->r.content_length != UINT64_MAX && res->r.content_length != *n) {
		log_err("s3: GET %s: got %zu bytes of %llu announced", fk, *n,
		        (unsigned long long)res->r.content_length);
		return -EIO;
	}
	if (res->r.status == 200 && ranged) {
		/* The server ignored the range: cut it out ourselves. */
		uint64_t a = off < *n ? off : *n;
		uint64_t e = len == STORE_TO_END || len > *n - a ? *n : a + len;
		if (b && e > a)
			memmove(b, b + a, (size_t)(e - a));
		*n = (size_t)(e - a);
	}
	return 0;
}

static int s3_get(struct store *st, const char *key, uint64_t off, uint64_t len, void **out,
                  size_t *outlen)
{
	struct s3 *s = S(st);
	struct s3_result res;
	bool ranged;
	char *fk = NULL;
	size_t n;
	int rc;

	if (len == 0) {
		/* Nothing to read, but a missing object is still -ENOENT. */
		struct store_stat sst;
		if ((rc = s3_head(st, key, &sst)) < 0)
			return rc;
		if (!(*out = malloc(1)))
			return -ENOMEM;
		*outlen = 0;
		return 0;
	}
	rc = get_call(s, key, off, len, NULL, 0, &res, &fk, &ranged);
	if (rc == 0 && (res.r.status == 200 || res.r.status == 206)) {
		if ((rc = get_body(fk, &res, ranged, off, len, &n)))
			goto out;
		char *b = res.r.body;
		if (!b && !(b = malloc(1))) {
			rc = -ENOMEM;
			goto out;
		}
		res.r.body = NULL;
		*out = b;
		*outlen = n;
	} else if (rc == 0 && res.r.status == 416) {
		/* The range starts at or past the end: an empty read of an existing object. */
		if (!(*out = malloc(1))) {
			rc = -ENOMEM;
			goto out;
		}
		*outlen = 0;
	} else if (fk) {
		rc = s3_fail(s, "GET", fk, &res, rc);
	}
out:
	s3_result_free(&res);
	free(fk);
	return rc;
}

/*
 * s3_get() with the body received straight into buf.  A server that ignores
 * the Range header and sends more than len bytes makes the transfer stop
 * (-EOVERFLOW); then the GET is sent again with s3_get() and copied.
 */
static int s3_get_into(struct store *st, const char *key, uint64_t off, uint64_t len, void *buf,
                       size_t *outlen)
{
	struct s3 *s = S(st);
	struct s3_result res;
	bool ranged;
	char *fk = NULL;
	size_t n = 0;
	int rc;

	rc = get_call(s, key, off, len, buf, (size_t)len, &res, &fk, &ranged);
	if (rc == 0 && (res.r.status == 200 || res.r.status == 206)) {
		if (!(rc = get_body(fk, &res, ranged, off, len, &n)))
			*outlen = n;
	} else if (rc == 0 && res.r.status == 416) {
		*outlen = 0;
	} else if (rc == -EOVERFLOW) {
		void *b = NULL;
		log_debug("s3: GET %s: more than the %llu bytes asked for; getting it again", fk,
		          (unsigned long long)len);
		if (!(rc = s3_get(st, key, off, len, &b, &n))) {
			memcpy(buf, b, n); /* s3_get() returns at most len */
			*outlen = n;
		}
		free(b);
	} else if (fk) {
		rc = s3_fail(s, "GET", fk, &res, rc);
	}
	s3_result_free(&res);
	free(fk);
	return rc;
}

static int s3_list(struct store *st, const char *prefix, const char *start_after, size_t max_keys,
                   store_list_fn fn, void *arg)
{
	struct s3 *s = S(st);
	char *fprefix = s3_full_key(s, prefix), *fstart = NULL, *token = NULL, mk[24];
	size_t seen = 0;
	int rc = 0;

	if (!fprefix)
		return -ENOMEM;
	if (*start_after && !(fstart = s3_full_key(s, start_after))) {
		rc = -ENOMEM;
		goto out;
	}
	for (;;) {
		struct sigv4_param q[6];
		struct xml_list_page pg;
		struct s3_result res;
		size_t nq = 0, want = 1000;

		if (max_keys && max_keys - seen < want)
			want = max_keys - seen;
		snprintf(mk, sizeof(mk), "%zu", want);
		q[nq++] = (struct sigv4_param){"list-type", "2"};
		q[nq++] = (struct sigv4_param){"prefix", fprefix};
		q[nq++] = (struct sigv4_param){"max-keys", mk};
		q[nq++] = (struct sigv4_param){"encoding-type", "url"};
		if (token)
			q[nq++] = (struct sigv4_param){"continuation-token", token};
		else if (fstart)
			q[nq++] = (struct sigv4_param){"start-after", fstart};
		struct s3_call c = {.op = STORE_OP_LIST, .method = "GET", .query = q, .nquery = nq};
		rc = s3_call(s, &c, &res);
		if (rc != 0 || res.r.status != 200) {
			rc = s3_fail(s, "LIST", fprefix, &res, rc);
			if (rc == -ENOENT)
				rc = -EIO; /* a missing bucket is not a missing key */
			s3_result_free(&res);
			goto out;
		}
		rc = xml_parse_list_page(res.r.body, res.r.len, &pg);
		s3_result_free(&res);
		if (rc) {
			log_err("s3: LIST %s: malformed ListObjectsV2 response", fprefix);
			xml_list_page_free(&pg);
			rc = -EIO;
			goto out;
		}
		for (size_t i = 0; i < pg.n; i++) {
			const char *k = pg.v[i].key;
			if (strncmp(k, s->prefix, s->prefix_len)) {
				log_err("s3: LIST %s: key %s outside the prefix", fprefix, k);
				rc = -EIO;
				break;
			}
			if ((rc = fn(arg, k + s->prefix_len, pg.v[i].size)) != 0)
				break;
			if (max_keys && ++seen >= max_keys)
				break;
		}
		bool more = pg.truncated && rc == 0 && (!max_keys || seen < max_keys);
		free(token);
		token = more ? pg.next_token : NULL;
		if (more)
			pg.next_token = NULL;
		xml_list_page_free(&pg);
		if (!more)
			break;
	}
out:
	free(token);
	free(fstart);
	free(fprefix);
	return rc;
}

static int s3_del(struct store *st, const char *key)
{
	struct s3 *s = S(st);
	struct s3_result res;
	char *fk = s3_full_key(s, key);
	int rc;

	if (!fk)
		return -ENOMEM;
	struct s3_call c = {.op = STORE_OP_DELETE, .method = "DELETE", .okey = fk};
	rc = s3_call(s, &c, &res);
	if (rc == 0 && (res.r.status == 204 || res.r.status == 200 ||
	                (res.r.status == 404 && strcmp(res.code, "NoSuchBucket"))))
		rc = 0;
	else
		rc = s3_fail(s, "DELETE", fk, &res, rc);
	s3_result_free(&res);
	free(fk);
	return rc;
}

/* One DeleteObjects request of n <= 1000 keys. */
static int delete_batch(struct s3 *s, const char *const *keys, size_t n)
{
	struct s3_result res;
	char md5[25], ekey[1100], code[64];
	size_t cap = 128 + n * 64, len = 0;
	char *body = malloc(cap);
	unsigned nerr = 0;
	int rc = 0;

	if (!body)
		return -ENOMEM;
	len = (size_t)snprintf(body, cap,
	                       "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
	                       "<Delete><Quiet>true</Quiet>");
	for (size_t i = 0; i < n; i++) {
		char *fk = s3_full_key(s, keys[i]);
		char *ek = fk ? xml_escape(fk) : NULL;
		free(fk);
		if (!ek) {
			rc = -ENOMEM;
			goto out;
		}
		size_t need = len + strlen(ek) + 64;
		if (need > cap) {
			char *nb;
			while (cap < need)
				cap *= 2;
			if (!(nb = realloc(body, cap))) {
				free(ek);
				rc = -ENOMEM;
				goto out;
			}
			body = nb;
		}
		len +=
		    (size_t)snprintf(body + len, cap - len, "<Object><Key>%s</Key></Object>", ek);
		free(ek);
	}
	if (len + 16 > cap) {
		char *nb = realloc(body, len + 16);
		if (!nb) {
			rc = -ENOMEM;
			goto out;
		}
		body = nb;
		cap = len + 16;
	}
	len += (size_t)snprintf(body + len, cap - len, "</Delete>");
	sigv4_md5_base64(body, len, md5);
	struct sigv4_header h[] = {{"content-md5", md5}, {"content-type", "application/xml"}};
	struct sigv4_param q[] = {{"delete", ""}};
	struct s3_call c = {.op = STORE_OP_DELETE,
	                    .method = "POST",
	                    .query = q,
	                    .nquery = 1,
	                    .headers = h,
	                    .nheaders = 2,
	                    .body = body,
	                    .len = len};
	rc = s3_call(s, &c, &res);
	if (rc == 0 && res.r.status == 200) {
		rc = xml_parse_delete_result(res.r.body, res.r.len, &nerr, ekey, sizeof(ekey), code,
		                             sizeof(code));
		if (rc) {
			log_err("s3: DELETE(many) %s...: malformed DeleteResult", keys[0]);
			rc = -EIO;
		} else if (nerr) {
			log_err("s3: DELETE(many): %u keys failed, first %s: %s", nerr, ekey, code);
			rc = !strcmp(code, "AccessDenied") ? -EACCES : -EIO;
		}
	} else {
		rc = s3_fail(s, "DELETE(many)", keys[0], &res, rc);
	}
	s3_result_free(&res);
out:
	free(body);
	return rc;
}

static int s3_delete_many(struct store *st, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i += 1000) {
		int rc = delete_batch(S(st), keys + i, n - i < 1000 ? n - i : 1000);
		if (rc)
			return rc;
	}
	return 0;
}

static void s3_close(struct store *st)
{
	struct s3 *s = S(st);
	http_pool_free(s->pool);
	free(s->base_url);
	free(s->base_path);
	free(s->host);
	free(s->bucket);
	free(s->prefix);
	free(s->region);
	creds_close(s->creds);
	free(s);
}

static const struct store_ops s3_ops = {
    .put = s3_put,
    .put_if_absent = s3_put_if_absent,
    .get = s3_get,
    .get_into = s3_get_into,
    .head = s3_head,
    .list = s3_list,
    .del = s3_del,
    .delete_many = s3_delete_many,
    .writer_open = s3_writer_open,
    .cleanup_uploads = s3_cleanup_uploads,
    .close = s3_close,
};

/* ---- open -------------------------------------------------------------- */

/* The credential chain (creds.h) for this store. */
static int load_creds(struct s3 *s, const struct s3_opts *o, const char *ca)
{
	struct creds_opts co = {
	    .access_key = o->access_key,
	    .secret_key = o->secret_key,
	    .session_token = o->session_token,
	    .profile = o->profile,
	    .region = s->region,
	    .s3_endpoint = o->endpoint,
	    .sts_endpoint = o->sts_url,
	    .ca_file = ca,
	    .timeout_ms = o->timeout_ms ? (o->timeout_ms < 10000 ? o->timeout_ms : 10000) : 0,
	};
	return creds_open(&co, &s->creds);
}

/*
 * Is the endpoint's host (hostpart[0, hl), maybe with a port) this machine's
 * loopback: an IPv4 literal in 127.0.0.0/8, [::1], or a localhost name
 * (RFC 6761; curl resolves them to the loopback itself)?
 */
bool s3_host_is_loopback(const char *hostpart, size_t hl)
{
	char h[256];
	struct in_addr a4;

	if (hl >= sizeof(h))
		return false;
	memcpy(h, hostpart, hl);
	h[hl] = '\0';
	if (h[0] == '[') {
		char *e = strchr(h, ']');
		return e && (size_t)(e - h) == 4 && !strncmp(h, "[::1]", 5);
	}
	h[strcspn(h, ":")] = '\0';
	size_t n = strlen(h);
	if (!strcasecmp(h, "localhost") || (n > 10 && !strcasecmp(h + n - 10, ".localhost")))
		return true;
	return inet_pton(AF_INET, h, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127;
}

/* Set base_url, base_path and host from the endpoint, bucket and addressing;
 * *tls: https; *loopback: the endpoint is this machine's loopback. */
static int set_addressing(struct s3 *s, const struct s3_opts *o, bool *tls, bool *loopback)
{
	char def[256];
	const char *ep = o->endpoint, *hostpart;
	bool path_style;
	size_t hl;

	if (!ep) {
		snprintf(def, sizeof(def), "https://s3.%s.amazonaws.com", s->region);
		ep = def;
	}
	if (!strncmp(ep, "https://", 8)) {
		*tls = true;
		hostpart = ep + 8;
	} else if (!strncmp(ep, "http://", 7)) {
		*tls = false;
		hostpart = ep + 7;
	} else {
		log_err("s3: endpoint %s: must start with http:// or https://", ep);
		return -EINVAL;
	}
	hl = strcspn(hostpart, "/?#");
	if (hl == 0 || strcspn(hostpart, "@") < hl) {
		log_err("s3: endpoint %s: no host (or user info, which is not supported)", ep);
		return -EINVAL;
	}
	*loopback = s3_host_is_loopback(hostpart, hl);
	path_style = o->virtual_hosted ? false : o->path_style ? true : o->endpoint != NULL;
	if (!path_style && strchr(s->bucket, '.') && *tls)
		log_warn("s3: bucket %s has dots: virtual-hosted TLS may fail certificate checks; "
		         "consider path-style",
		         s->bucket);
	if (path_style) {
		if (asprintf(&s->host, "%.*s", (int)hl, hostpart) < 0 ||
		    asprintf(&s->base_path, "/%s", s->bucket) < 0 ||
		    asprintf(&s->base_url, "%s://%.*s/%s", *tls ? "https" : "http", (int)hl,
		             hostpart, s->bucket) < 0)
			return -ENOMEM;
	} else {
		if (asprintf(&s->host, "%s.%.*s", s->bucket, (int)hl, hostpart) < 0 ||
		    !(s->base_path = strdup("")) ||
		    asprintf(&s->base_url, "%s://%s", *tls ? "https" : "http", s->host) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* NULL if b can be an S3 bucket name, else why not (for the error message). */
static const char *bucket_name_problem(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63)
		return "a bucket name has 3 to 63 characters";
	for (size_t i = 0; i < n; i++) {
		char c = b[i];
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		      c == '_' || (c >= 'A' && c <= 'Z')))
			return "a bucket name has only letters, digits, '-', '.' and '_'";
	}
	return NULL;
}

/*
 * One listing request: checks that the bucket exists and the credentials
 * work.  An endpoint where nothing listens (or whose name does not resolve)
 * fails at once with -ECONNREFUSED / -EHOSTUNREACH: retrying for 15 s would
 * only delay the error.  Slow or overloaded servers (timeouts, 5xx) are
 * retried as always.
 */
static int check_bucket(struct s3 *s)
{
	struct sigv4_param q[] = {{"list-type", "2"}, {"max-keys", "1"}, {"prefix", s->prefix}};
	struct s3_call c = {
	    .op = STORE_OP_LIST, .method = "GET", .query = q, .nquery = 3, .fail_fast = true};
	struct s3_result res;
	int rc = s3_call(s, &c, &res);
	if (rc == 0 && res.r.status == 200) {
		rc = 0;
	} else if (rc < 0 && http_unreachable(res.r.curl_code)) {
		log_err("s3: open: cannot reach %s: %s%s", s->base_url,
		        res.r.error[0] ? res.r.error : strerror(-rc),
		        http_error_hint(res.r.curl_code));
		rc = http_unreachable(res.r.curl_code);
	} else {
		rc = s3_fail(s, "open: LIST", s->bucket, &res, rc);
	}
	s3_result_free(&res);
	return rc;
}

/* Does the backend honour If-None-Match: * on PUT?  1 yes, 0 no, <0 error. */
static int probe_conditional(struct s3 *s)
{
	char key[96];
	struct timespec ts;
	int r1, r2, ok;

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(key, sizeof(key), ".memwalfs-probe-%ld-%ld-%ld", (long)getpid(), (long)ts.tv_sec,
	         ts.tv_nsec);
	r1 = s3_put_if_absent(&s->base, key, "probe", 5);
	r2 = r1 == 0 ? s3_put_if_absent(&s->base, key, "probe", 5) : r1;
	s3_del(&s->base, key);
	if (r1 == 0 && r2 == -EEXIST)
		ok = 1;
	else if (r1 == 0 && r2 == 0)
		ok = 0; /* second create succeeded: the header was ignored */
	else if (r1 == -ENOTSUP || r2 == -ENOTSUP)
		ok = 0;
	else
		ok = r1 < 0 ? r1 : r2;
	return ok;
}

int store_open_s3(const struct s3_opts *opts, struct store **out)
{
	struct s3_opts d;
	struct s3 *s;
	struct timespec ts;
	bool tls = false, loopback = false;
	const char *region, *ca;
	int rc;

	s3_opts_default(&d);
	const char *bucket_name_bad =
	    opts && opts->bucket ? bucket_name_problem(opts->bucket) : NULL;
	if (!opts || !opts->bucket || bucket_name_bad) {
		if (bucket_name_bad)
			log_err("invalid bucket name '%s': %s", opts->bucket, bucket_name_bad);
		else
			log_err("s3: open: no bucket given");
		return -EINVAL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	store_init(&s->base, &s3_ops);
	clock_gettime(CLOCK_REALTIME, &ts);
	atomic_init(&s->rng,
	            ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)getpid() ^ 0x9e3779b97f4a7c15ull);
	region = opts->region ? opts->region : getenv("AWS_REGION");
	if (!region || !*region)
		region = getenv("AWS_DEFAULT_REGION");
	if (!region || !*region)
		region = "us-east-1";
	s->max_retries = opts->max_retries ? opts->max_retries : d.max_retries;
	s->part_size = opts->part_size ? opts->part_size : d.part_size;
	if (s->part_size < MIN_PART_SIZE) {
		log_warn("s3: part size %zu raised to S3's minimum of 5 MiB", s->part_size);
		s->part_size = MIN_PART_SIZE;
	}
	s->part_parallel = opts->part_parallel ? opts->part_parallel : d.part_parallel;
	{
		const char *p = opts->prefix ? opts->prefix : "";
		size_t pl = strlen(p);
		bool slash = pl && p[pl - 1] != '/';
		if (!(s->bucket = strdup(opts->bucket)) || !(s->region = strdup(region)) ||
		    asprintf(&s->prefix, "%s%s", p, slash ? "/" : "") < 0) {
			s->prefix = NULL;
			rc = -ENOMEM;
			goto fail;
		}
		s->prefix_len = strlen(s->prefix);
		s->prefix[s->prefix_len ? s->prefix_len - 1 : 0] = '\0'; /* check without the '/' */
		bool valid = !s->prefix_len || store_key_valid(s->prefix);
		if (s->prefix_len)
			s->prefix[s->prefix_len - 1] = '/';
		if (!valid || s->prefix_len > 256) {
			log_err("s3: open: invalid key prefix '%s'", p);
			rc = -EINVAL;
			goto fail;
		}
	}
	if ((rc = set_addressing(s, opts, &tls, &loopback)) < 0)
		goto fail;
	/* bodies go unhashed only where the transport keeps them intact (the header) */
	s->unsigned_payload = (tls || loopback) && !opts->signed_payload;
	if (opts->unsigned_payload && !s->unsigned_payload)
		log_warn("s3: UNSIGNED-PAYLOAD refused over plain http to another host%s; hashing "
		         "payloads",
		         opts->signed_payload ? " (or with signed_payload)" : "");
	ca = opts->ca_file ? opts->ca_file : tls ? getenv("AWS_CA_BUNDLE") : NULL;
	if (tls && ca && *ca && access(ca, R_OK) < 0) {
		rc = -errno;
		log_err("s3: open: CA file %s (from %s): %s", ca,
		        opts->ca_file ? "the options" : "AWS_CA_BUNDLE", strerror(-rc));
		rc = -EINVAL;
		goto fail;
	}
	if (tls)
		log_debug("s3: TLS peers verified with %s", ca && *ca ? ca : "the system CA store");
	/* STS and credential endpoints may be https even when S3 is not */
	{
		const char *cca = opts->ca_file ? opts->ca_file : getenv("AWS_CA_BUNDLE");
		if ((rc = load_creds(s, opts, cca && *cca ? cca : NULL)) < 0)
			goto fail;
	}
	{
		struct http_pool_opts po = {
		    .connections = opts->connections ? opts->connections : d.connections,
		    .timeout_ms = opts->timeout_ms ? opts->timeout_ms : d.timeout_ms,
		    .ca_file = ca && *ca ? ca : NULL,
		};
		if ((rc = http_pool_new(&po, &s->pool)) < 0)
			goto fail;
	}
	if ((rc = check_bucket(s)) < 0)
		goto fail;
	s->base.caps.name = "s3";
	s->base.caps.durable_on_ack = true;
	s->base.caps.conditional_finish = false;
	s->base.caps.part_size = s->part_size;
	if (opts->conditional_create == 0 || opts->conditional_create == 1) {
		s->base.caps.conditional_create = opts->conditional_create == 1;
	} else {
		rc = probe_conditional(s);
		if (rc < 0)
			goto fail;
		s->base.caps.conditional_create = rc == 1;
		if (rc == 1)
			log_info("s3: %s honours conditional create (If-None-Match: *)", s->host);
		else
			log_warn("s3: %s ignores If-None-Match: * on PUT: conditional create is "
			         "NOT available (caps.conditional_create=false)",
			         s->host);
	}
	log_info("s3: opened bucket %s at %s (%s-style, region %s, prefix '%s')", s->bucket,
	         s->base_url, s->base_path[0] ? "path" : "virtual-hosted", s->region, s->prefix);
	*out = &s->base;
	return 0;
fail:
	s3_close(&s->base);
	return rc;
}
