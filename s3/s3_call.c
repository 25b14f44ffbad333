/*
 * s3_call.c - one S3 request: signed, sent, retried, and its failure logged
 * and mapped to an errno (s3_call(), s3_fail(); interface in s3_int.h).  The
 * design (addressing, signing, which failures are retried and how) is in
 * s3.c's file comment.  The object operations (s3.c) and the multipart
 * writer (s3_writer.c) both sit on it, and it calls neither.
 *
 * The retries here are those of one HTTP request (a few attempts, full-jitter
 * backoff, s->max_retries): what the store does so that a dropped connection
 * or a 503 is not an error.  Riding through an outage (retrying a failed
 * store operation until the store answers, for how long) is the engine's
 * (engine_retry(), engine/read/read.c).
 */
#include <errno.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "s3_int.h"
#include "xml.h"

#define BACKOFF_BASE_MS 100
#define BACKOFF_CAP_MS 10000
#define MAX_EXTRA_HEADERS 8

char *s3_full_key(struct s3 *s, const char *k)
{
	size_t kl = strlen(k);
	char *f = malloc(s->prefix_len + kl + 1);
	if (!f)
		return NULL;
	memcpy(f, s->prefix, s->prefix_len);
	memcpy(f + s->prefix_len, k, kl + 1);
	return f;
}

void s3_result_free(struct s3_result *res)
{
	http_resp_free(&res->r);
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static unsigned backoff(struct s3 *s, unsigned attempt)
{
	uint64_t r = atomic_load_explicit(&s->rng, memory_order_relaxed);
	unsigned ms = http_backoff_ms(attempt, BACKOFF_BASE_MS, BACKOFF_CAP_MS, &r);
	atomic_store_explicit(&s->rng, r, memory_order_relaxed);
	return ms;
}

/* Pick the S3 error code out of an error response body. */
static void parse_code(struct s3_result *res)
{
	res->code[0] = res->msg[0] = '\0';
	if (res->r.status >= 300 && res->r.len)
		xml_parse_error(res->r.body, res->r.len, res->code, sizeof(res->code), res->msg,
		                sizeof(res->msg));
}

int s3_call(struct s3 *s, const struct s3_call *c, struct s3_result *res)
{
	char phash[65], date[17], auth[640], *path = NULL, *url = NULL, *query = NULL;
	char *lines[MAX_EXTRA_HEADERS + 6];
	struct sigv4_header h[MAX_EXTRA_HEADERS + 4];
	size_t nh, nl, qcap = 4096;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	memset(lines, 0, sizeof(lines));
	if (c->nheaders > MAX_EXTRA_HEADERS)
		return -EINVAL;
	if (s->unsigned_payload && c->body)
		snprintf(phash, sizeof(phash), "%s", SIGV4_UNSIGNED);
	else
		sigv4_sha256_hex(c->body, c->len, phash);

	/* Canonical path, query and URL: built once, identical for every attempt. */
	{
		size_t kl = c->okey ? strlen(c->okey) : 0;
		size_t bl = strlen(s->base_path);
		path = malloc(bl + 3 * kl + 3);
		query = malloc(qcap);
		if (!path || !query) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(path, s->base_path, bl);
		path[bl] = '/';
		if (c->okey)
			sigv4_uri_encode(c->okey, kl, false, path + bl + 1);
		else if (bl)
			path[bl] = '\0'; /* "/bucket" */
		else
			path[bl + 1] = '\0'; /* "/" */
		int ql = sigv4_canonical_query(c->query, c->nquery, query, qcap);
		if (ql < 0) {
			rc = ql;
			goto out;
		}
		size_t ul = strlen(s->base_url) + strlen(path) + (size_t)ql + 2;
		url = malloc(ul);
		if (!url) {
			rc = -ENOMEM;
			goto out;
		}
		/* base_url already holds the bucket path for path-style; path repeats it. */
		snprintf(url, ul, "%s%s%s%s", s->base_url, path + strlen(s->base_path),
		         ql ? "?" : "", query);
	}

	for (unsigned attempt = 0;; attempt++) {
		bool transport = false;

		if (attempt) {
			store_count_retry(&s->base);
			sleep_ms(backoff(s, attempt - 1));
		}
		/* Each attempt signs with the keys current now (a refresh may have
		   replaced them since the last one); they are copied into the header
		   lines, so the reference is dropped before the request goes out. */
		struct creds_keys *k = creds_get(s->creds);
		struct sigv4_creds cr = {k->access_key, k->secret_key, k->session_token};
		sigv4_amz_date(time(NULL), date);
		nh = 0;
		nl = 0;
		h[nh++] = (struct sigv4_header){"host", s->host};
		h[nh++] = (struct sigv4_header){"x-amz-content-sha256", phash};
		h[nh++] = (struct sigv4_header){"x-amz-date", date};
		if (k->session_token)
			h[nh++] = (struct sigv4_header){"x-amz-security-token", k->session_token};
		for (size_t i = 0; i < c->nheaders; i++)
			h[nh++] = c->headers[i];
		struct sigv4_request sr = {c->method, path, query, h, nh, phash};
		if ((rc = sigv4_sign(&cr, s->region, date, &sr, auth, sizeof(auth), NULL, 0)) < 0) {
			creds_keys_put(k);
			goto out;
		}
		for (size_t i = 0; i < nh; i++) {
			if (asprintf(&lines[nl], "%s: %s", h[i].name, h[i].value) < 0) {
				lines[nl] = NULL;
				rc = -ENOMEM;
				break;
			}
			nl++;
		}
		creds_keys_put(k);
		if (rc == -ENOMEM)
			goto free_lines;
		if (asprintf(&lines[nl], "Authorization: %s", auth) < 0) {
			lines[nl] = NULL;
			rc = -ENOMEM;
			goto free_lines;
		}
		nl++;
		struct http_req rq = {
		    .method = c->method,
		    .url = url,
		    .headers = (const char *const *)lines,
		    .nheaders = nl,
		    .body = c->body,
		    .body_len = c->len,
		    .expect_len = c->expect_len,
		    .into = c->into,
		    .into_cap = c->into_cap,
		    .log_key = c->okey ? c->okey : s->bucket,
		};
		http_resp_free(&res->r);
		rc = http_do(s->pool, &rq, &res->r);
		res->attempts++;
		store_count(&s->base, c->op, c->len, res->r.len);
	free_lines:
		for (size_t i = 0; i < nl; i++) {
			free(lines[i]);
			lines[i] = NULL;
		}
		if (rc == -ENOMEM)
			goto out;
		if (rc < 0)
			transport = true;
		else
			parse_code(res);
		bool again = transport ? http_retryable(res->r.curl_code, 0, NULL)
		                       : http_retryable(0, res->r.status, res->code) ||
		                             (c->retry_conflict && res->r.status == 409);
		if (transport && c->fail_fast && http_unreachable(res->r.curl_code))
			again = false;
		if (!transport && res->r.status < 500 && res->r.status != 429 &&
		    __atomic_exchange_n(&s->down, 0, __ATOMIC_RELAXED))
			log_warn("s3: %s answers again", s->base_url);
		if (!again || attempt >= s->max_retries)
			break;
		if (transport || res->r.status >= 500)
			res->ambiguous = true;
		log_debug("s3 %s %s: retrying after %s%ld %s", c->method,
		          c->okey ? c->okey : s->bucket, transport ? "transport error " : "HTTP ",
		          transport ? (long)res->r.curl_code : res->r.status, res->code);
	}
out:
	free(path);
	free(query);
	free(url);
	return rc;
}

int s3_fail(struct s3 *s, const char *op, const char *key, const struct s3_result *res, int rc)
{
	const char *hint = "";
	char hintbuf[300];
	long st = res->r.status;

	/* an outage fails every request alike: say so once, until one gets an answer */
	bool outage = (rc < 0 && rc != -ENOMEM) || st >= 500 || st == 429;
	bool first = outage && !__atomic_exchange_n(&s->down, 1, __ATOMIC_RELAXED);
	if (rc < 0 && rc != -ENOMEM) {
		mw_log(
		    first ? MW_LOG_ERR : MW_LOG_DEBUG, __FILE__, __LINE__,
		    "s3: %s %s: no response after %u attempt%s: %s%s%s", op, key, res->attempts,
		    res->attempts == 1 ? "" : "s", res->r.error[0] ? res->r.error : strerror(-rc),
		    http_error_hint(res->r.curl_code),
		    first ? " (further failures are logged at debug level until it answers)" : "");
		return rc;
	}
	if (rc == -ENOMEM) {
		log_err("s3: %s %s: out of memory", op, key);
		return rc;
	}
	if (st == 404 && strcmp(res->code, "NoSuchBucket")) {
		log_debug("s3: %s %s: HTTP 404 %s", op, key, res->code);
		return -ENOENT;
	}
	if (st == 412) {
		log_debug("s3: %s %s: HTTP 412 %s", op, key, res->code);
		return -EEXIST;
	}
	if (st == 401 || st == 403) {
		snprintf(hintbuf, sizeof(hintbuf), " (credentials refused: %s; they come from %s)",
		         !strcmp(res->code, "ExpiredToken") ? "they have expired"
		                                            : "check the access key and secret key",
		         creds_source(s->creds));
		hint = hintbuf;
	} else if (!strcmp(res->code, "NoSuchBucket"))
		hint = " (the bucket does not exist)";
	mw_log(!outage || first ? MW_LOG_ERR : MW_LOG_DEBUG, __FILE__, __LINE__,
	       "s3: %s %s: HTTP %ld %s%s%s%s after %u attempt%s", op, key, st,
	       res->code[0] ? res->code : "(no code)", res->msg[0] ? ": " : "", res->msg, hint,
	       res->attempts, res->attempts == 1 ? "" : "s");
	if (st == 401 || st == 403)
		return -EACCES;
	if (st == 404)
		return -ENOENT;
	if (st == 501)
		return -ENOTSUP;
	if (st == 400 && !strcmp(res->code, "InvalidBucketName"))
		return -EINVAL;
	return -EIO;
}
