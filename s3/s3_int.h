/*
 * s3_int.h - internals shared by the S3 store's files (s3/s3.c: the store
 * and its request engine; s3/s3_writer.c: multipart writer and upload
 * cleanup).  Not for use outside s3/ except by the S3 tests.
 */
#ifndef MEMWALFS_S3_INT_H
#define MEMWALFS_S3_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "creds.h"
#include "http.h"
#include "sigv4.h"
#include "store_impl.h"

/* The S3 store.  Every field is constant after store_open_s3() except rng (and what
   creds refreshes behind its own lock). */
struct s3 {
	struct store base;      /* must be first */
	int down;               /* requests fail for want of an answer (atomic): log once */
	struct http_pool *pool; /* keep-alive connections */
	char *base_url;         /* "http://h:p/bucket" (path) or "https://bucket.h" (virtual) */
	char *base_path;        /* canonical URI of the bucket: "/bucket" or "" */
	char *host;             /* Host header value */
	char *bucket;           /* bucket name */
	char *prefix;           /* key prefix ("" or ending in '/') */
	size_t prefix_len;      /* strlen(prefix) */
	char *region;           /* signing region */
	struct creds *creds;    /* the credential chain and its refresh (creds.h) */
	bool unsigned_payload;  /* UNSIGNED-PAYLOAD (only over TLS or to a loopback endpoint) */
	unsigned max_retries;   /* repeats after the first attempt */
	size_t part_size;       /* multipart part size (>= 5 MiB) */
	unsigned part_parallel; /* parts in flight per writer */
	_Atomic uint64_t rng;   /* backoff jitter state, shared */
};

/* One request to make (everything borrowed). */
struct s3_call {
	enum store_op op;                /* counter class */
	const char *method;              /* "GET", ... */
	const char *okey;                /* full object key (prefix included); NULL: bucket */
	const struct sigv4_param *query; /* query parameters, unencoded */
	size_t nquery;
	const struct sigv4_header *headers; /* extra signed headers (lower-case names) */
	size_t nheaders;                    /* <= 8 */
	const void *body;                   /* request body or NULL */
	size_t len;
	size_t expect_len; /* response size hint */
	char *into;        /* a 2xx body goes here (http_req.into), into_cap bytes */
	size_t into_cap;
	bool retry_conflict; /* also retry 409 ConditionalRequestConflict */
	bool fail_fast;      /* do not retry when the endpoint cannot be reached at all
	                        (connection refused, unknown host): the probe at open */
};

/* Outcome of s3_call(). */
struct s3_result {
	struct http_resp r; /* the last response (free with s3_result_free) */
	char code[64];      /* S3 error code from the body ("" none) */
	char msg[200];      /* S3 error message ("" none) */
	unsigned attempts;  /* requests sent */
	bool ambiguous;     /* an earlier attempt failed in a way that may have landed */
};

/*
 * Send c, signed, retrying what http_retryable() allows up to
 * s->max_retries times with full-jitter backoff.  Every attempt is counted
 * with store_count() (and repeats with store_count_retry()).  Returns 0 when
 * a response arrived (any status: see res->r.status, res->code), or the
 * negative errno of the last transport failure.  Always call
 * s3_result_free(res) afterwards.
 */
int s3_call(struct s3 *s, const struct s3_call *c, struct s3_result *res);
void s3_result_free(struct s3_result *res);

/*
 * Log a failure that reaches the caller (operation, user key, HTTP status,
 * S3 code and message; a hint for credential errors) and map it to an
 * errno: 404 -ENOENT, 412 -EEXIST, 401/403 -EACCES, 501 -ENOTSUP, else
 * -EIO; transport failures keep rc (-ETIMEDOUT, -EIO).  -ENOENT and -EEXIST
 * are logged at debug level only (they are answers).
 */
int s3_fail(struct s3 *s, const char *op, const char *key, const struct s3_result *res, int rc);

/* Full object key of user key k: malloc()ed prefix + k (NULL: ENOMEM). */
char *s3_full_key(struct s3 *s, const char *k);

/* s3_writer.c: the store operations it provides. */
int s3_writer_open(struct store *st, const char *key, int flags, struct store_writer **out);
int s3_cleanup_uploads(struct store *st, const char *prefix, unsigned older_than_sec, unsigned *n);

/*
 * Conditional create with the retry resolution made testable: when
 * assume_ambiguous is true, a 412 is resolved as if an earlier attempt of
 * ours might have landed (GET the object and compare it with buf).  The
 * store's put_if_absent is this with assume_ambiguous false.
 */
int s3_put_if_absent_ex(struct store *st, const char *key, const void *buf, size_t len,
                        bool assume_ambiguous);

/*
 * Is hostpart[0, hl) (an endpoint's host, maybe with ":port") this machine's
 * loopback: 127.0.0.0/8, [::1] or a localhost name?  Bodies to such an
 * endpoint go with UNSIGNED-PAYLOAD (s3.c, "Signing").
 */
bool s3_host_is_loopback(const char *hostpart, size_t hl);

#endif /* MEMWALFS_S3_INT_H */
