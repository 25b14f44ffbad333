/*
 * http.h - HTTP for the S3 store: a pool of keep-alive libcurl easy handles
 * shared by threads, one blocking request function, and the retry policy.
 *
 * The pool holds up to `connections` easy handles; a request takes a free
 * one (waiting when all are busy), so each handle keeps its TCP connection
 * alive between requests (curl_easy_reset keeps live connections).
 * TCP_NODELAY is on.  TLS peers are verified unless the URL is http://.
 *
 * The retry policy is pure (http_retryable, http_backoff_ms) so that it is
 * unit-tested without a network; the S3 store runs the loop.
 */
#ifndef MEMWALFS_HTTP_H
#define MEMWALFS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct http_pool;

/* Pool options. */
struct http_pool_opts {
	unsigned connections; /* handles in the pool (>= 1) */
	unsigned timeout_ms;  /* per request, plus 1 s per MiB of body */
	const char *ca_file;  /* CA bundle for https (NULL: system default) */
};

/* One request.  Everything is borrowed for the duration of http_do(). */
struct http_req {
	const char *method;         /* "GET", "HEAD", "PUT", "POST", "DELETE" */
	const char *url;            /* full URL, already encoded */
	const char *const *headers; /* "Name: value" lines */
	size_t nheaders;
	const void *body; /* request body (NULL: none) */
	size_t body_len;
	size_t expect_len;   /* response body size hint (0: unknown) */
	char *into;          /* a 2xx body goes here, not into a new buffer (NULL: none) */
	size_t into_cap;     /* bytes at into: a longer body fails the request, rs->overflow */
	const char *log_key; /* for the debug log line (may be NULL) */
};

/*
 * The response.  body is malloc()ed (NUL-terminated); free with http_resp_free.
 * With rq->into, a 2xx body is written there instead (not NUL-terminated) and
 * body points to it; the body of any other status is malloc()ed as usual.
 */
struct http_resp {
	long status;   /* HTTP status; 0 when no response arrived */
	int curl_code; /* CURLcode of the transfer (0: completed) */
	char *body;    /* response body (HEAD: none) */
	size_t len;    /* its length */
	size_t cap;    /* allocated */
	char *into;    /* the request's into, into_cap (set by http_do) */
	size_t into_cap;
	bool fixed;    /* body is into: not ours to free or grow */
	bool overflow; /* the body did not fit into it (then curl_code is a write error) */
	uint64_t content_length; /* Content-Length header (UINT64_MAX: absent) */
	int64_t last_modified;   /* Last-Modified, seconds (0: absent) */
	char etag[72];           /* ETag without quotes ("" absent) */
	char error[256];         /* curl's error text */
};

/*
 * Create a pool.  Calls curl_global_init once per process.  *out only on
 * success; -ENOMEM otherwise.
 */
int http_pool_new(const struct http_pool_opts *o, struct http_pool **out);

/* Free the pool and its handles; no request may be in flight.  Accepts NULL. */
void http_pool_free(struct http_pool *p);

/*
 * Send one request and wait for the whole response.  Any thread.  Returns
 * 0 when an HTTP response arrived (whatever its status; see rs->status),
 * -ENOMEM, or a negative errno for a transport failure (then rs->curl_code
 * tells which; -ETIMEDOUT for a timeout, -EIO otherwise).  rs is reset
 * first; call http_resp_free(rs) afterwards in every case.  Logs one debug
 * line per request (method, key, status, bytes, ms).
 */
int http_do(struct http_pool *p, const struct http_req *rq, struct http_resp *rs);

/* Free the body of rs (rs itself is the caller's).  Accepts NULL. */
void http_resp_free(struct http_resp *rs);

/*
 * Retry policy.  Returns true when a request that ended with curl_code
 * (0 if a response arrived), HTTP status and S3 error code s3code (may be
 * NULL or "") is worth repeating: timeouts, connection failures and resets,
 * 500/502/503/504, 429, SlowDown, RequestTimeout, InternalError.  Never for
 * 4xx answers about the request itself (403, 404, 412, ...), nor for TLS
 * certificate failures.
 */
bool http_retryable(int curl_code, long status, const char *s3code);

/*
 * Does curl_code say that nothing answers at that address at all (as
 * opposed to a slow or failing server)?  -ECONNREFUSED for a refused or
 * unroutable connection, -EHOSTUNREACH for a host name that does not
 * resolve, 0 otherwise.
 */
int http_unreachable(int curl_code);

/*
 * A short hint for the log line of a transport failure with curl_code:
 * what to check (TLS certificate not trusted or not matching the host, CA
 * file unreadable, handshake with a plain-http port, host not found,
 * connection refused), or "" when there is nothing to add.  Static string.
 */
const char *http_error_hint(int curl_code);

/*
 * Backoff before retry number attempt (0 = the first retry): "full jitter",
 * a uniform random delay in [0, min(cap_ms, base_ms << attempt)], using and
 * advancing the caller's xorshift state *rng (must be nonzero).
 */
unsigned http_backoff_ms(unsigned attempt, unsigned base_ms, unsigned cap_ms, uint64_t *rng);

#endif /* MEMWALFS_HTTP_H */
