/*
 * http.c - a pool of keep-alive libcurl handles and the retry policy
 * (see http.h).
 *
 * Concurrency: p->mu protects the free list and the count of handles made;
 * a thread that finds no free handle and the pool at its bound waits on
 * p->cv.  A handle is used by one thread at a time; curl_easy_reset()
 * between requests keeps its live connection, so requests reuse TCP
 * connections without a share handle.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>

#include "grow.h"
#include "http.h"
#include "log.h"

struct http_pool {
	pthread_mutex_t mu;  /* protects everything below */
	pthread_cond_t cv;   /* signalled when a handle is returned */
	CURL **free_list;    /* idle handles */
	unsigned nfree;      /* entries in free_list */
	unsigned made;       /* handles created so far (<= max) */
	unsigned max;        /* bound from the options */
	unsigned timeout_ms; /* per request (constant) */
	char *ca_file;       /* constant after creation */
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_rc;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -EIO;
}

int http_pool_new(const struct http_pool_opts *o, struct http_pool **out)
{
	struct http_pool *p;

	pthread_once(&global_once, global_init);
	if (global_rc)
		return global_rc;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->max = o->connections ? o->connections : 1;
	p->timeout_ms = o->timeout_ms ? o->timeout_ms : 30000;
	p->free_list = calloc(p->max, sizeof(CURL *));
	if (!p->free_list || (o->ca_file && !(p->ca_file = strdup(o->ca_file)))) {
		free(p->free_list);
		free(p);
		return -ENOMEM;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	*out = p;
	return 0;
}

void http_pool_free(struct http_pool *p)
{
	if (!p)
		return;
	for (unsigned i = 0; i < p->nfree; i++)
		curl_easy_cleanup(p->free_list[i]);
	free(p->free_list);
	free(p->ca_file);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

static CURL *take(struct http_pool *p)
{
	CURL *h = NULL;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		if (p->nfree) {
			h = p->free_list[--p->nfree];
			break;
		}
		if (p->made < p->max) {
			p->made++;
			pthread_mutex_unlock(&p->mu);
			h = curl_easy_init();
			if (!h) {
				pthread_mutex_lock(&p->mu);
				p->made--;
				pthread_cond_signal(&p->cv);
				pthread_mutex_unlock(&p->mu);
			}
			return h;
		}
		pthread_cond_wait(&p->cv, &p->mu);
	}
	pthread_mutex_unlock(&p->mu);
	return h;
}

static void give(struct http_pool *p, CURL *h)
{
	pthread_mutex_lock(&p->mu);
	p->free_list[p->nfree++] = h;
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

#define HTTP_BIG_READ (256u << 10) /* expected bodies from here on get a bigger receive buffer */

static int reserve(struct http_resp *rs, size_t need)
{
	return MW_GROW(rs->body, rs->cap, need + 1, 4096);
}

/*
 * The body buffer of a response expected to be len bytes: exactly that (and
 * the terminating NUL); from HTTP_BIG_READ on page-aligned, so that the
 * bytes of a ranged GET that start a blob's block start a page and the disk
 * cache writes them with O_DIRECT from here, without a copy (engine/
 * diskcache.c).  A body longer than expected grows with reserve() (realloc()
 * of it is fine; it may lose the alignment).
 */
static int reserve_expected(struct http_resp *rs, size_t len)
{
	void *p = NULL;

	if (len < HTTP_BIG_READ)
		return reserve(rs, len);
	if (posix_memalign(&p, 4096, len + 1))
		return -ENOMEM;
	rs->body = p;
	rs->cap = len + 1;
	return 0;
}

static size_t on_data(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct http_resp *rs = arg;
	size_t n = size * nmemb;
	if (rs->fixed) {
		if (n > rs->cap - rs->len) {
			rs->overflow = true;
			return 0; /* a write error: the transfer stops */
		}
		memcpy(rs->body + rs->len, ptr, n);
		rs->len += n;
		return n;
	}
	if (reserve(rs, rs->len + n))
		return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
	memcpy(rs->body + rs->len, ptr, n);
	rs->len += n;
	rs->body[rs->len] = '\0';
	return n;
}

/* Value of header line "Name: value\r\n" if its name is name (case-insensitive). */
static bool header_value(const char *line, size_t n, const char *name, char *val, size_t valsz)
{
	size_t nl = strlen(name);
	if (n <= nl || strncasecmp(line, name, nl) || line[nl] != ':')
		return false;
	const char *v = line + nl + 1, *e = line + n;
	while (v < e && (*v == ' ' || *v == '\t'))
		v++;
	while (e > v && (e[-1] == '\r' || e[-1] == '\n' || e[-1] == ' '))
		e--;
	size_t vl = (size_t)(e - v);
	if (vl >= valsz)
		vl = valsz - 1;
	memcpy(val, v, vl);
	val[vl] = '\0';
	return true;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct http_resp *rs = arg;
	size_t n = size * nmemb;
	char v[128];

	if (n > 5 && !strncmp(ptr, "HTTP/", 5)) {
		/* A new response (after 100 Continue or a redirect): forget old headers. */
		rs->content_length = UINT64_MAX;
		rs->etag[0] = '\0';
		rs->last_modified = 0;
		/* "HTTP/1.1 206 Partial Content": a 2xx body goes into the caller's buffer */
		const char *sp = memchr(ptr, ' ', n);
		bool ok = sp && (size_t)(sp - ptr) + 4 <= n && sp[1] == '2';
		if (rs->into && ok != rs->fixed) {
			if (!rs->fixed)
				free(rs->body);
			rs->body = ok ? rs->into : NULL;
			rs->cap = ok ? rs->into_cap : 0;
			rs->len = 0;
			rs->fixed = ok;
		}
	} else if (header_value(ptr, n, "etag", v, sizeof(v))) {
		char *s = v;
		size_t l = strlen(s);
		if (l >= 2 && s[0] == '"' && s[l - 1] == '"') {
			s[l - 1] = '\0';
			s++;
		}
		snprintf(rs->etag, sizeof(rs->etag), "%.71s", s);
	} else if (header_value(ptr, n, "content-length", v, sizeof(v))) {
		char *end;
		errno = 0;
		unsigned long long cl = strtoull(v, &end, 10);
		if (!errno && end != v && !*end) {
			rs->content_length = cl;
			if (!rs->fixed && cl < ((size_t)1 << 31))
				reserve(rs, (size_t)cl); /* best effort */
		}
	} else if (header_value(ptr, n, "last-modified", v, sizeof(v))) {
		time_t t = curl_getdate(v, NULL);
		rs->last_modified = t > 0 ? (int64_t)t : 0;
	}
	return n;
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int http_do(struct http_pool *p, const struct http_req *rq, struct http_resp *rs)
{
	struct curl_slist *hl = NULL, *t;
	bool have_ctype = false, is_head = !strcmp(rq->method, "HEAD");
	int64_t t0 = now_ms();
	CURLcode cc;
	CURL *h;
	int rc = 0;

	memset(rs, 0, sizeof(*rs));
	rs->content_length = UINT64_MAX;
	rs->into = rq->into;
	rs->into_cap = rq->into_cap;
	if (!rq->into && rq->expect_len && rq->expect_len < ((size_t)1 << 31) &&
	    reserve_expected(rs, rq->expect_len))
		return -ENOMEM;
	for (size_t i = 0; i < rq->nheaders; i++) {
		if (!strncasecmp(rq->headers[i], "content-type:", 13))
			have_ctype = true;
		if (!(t = curl_slist_append(hl, rq->headers[i])))
			goto oom;
		hl = t;
	}
	if (!(t = curl_slist_append(hl, "Expect:")))
		goto oom;
	hl = t;
	if (rq->body && !have_ctype) {
		if (!(t = curl_slist_append(hl, "Content-Type: application/octet-stream")))
			goto oom;
		hl = t;
	}
	h = take(p);
	if (!h)
		goto oom;
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, rq->url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, rs->error);
	/* a GET of a pack window arrives in 128 KiB reads, not curl's default 16 KiB ones */
	curl_easy_setopt(h, CURLOPT_BUFFERSIZE, rq->expect_len >= HTTP_BIG_READ ? 131072L : 16384L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, rs);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, rs);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
	                 (long)(p->timeout_ms < 10000 ? p->timeout_ms : 10000));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
	                 (long)p->timeout_ms +
	                     (long)(((rq->body_len + rq->expect_len) >> 20) * 1000));
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (p->ca_file && !strncmp(rq->url, "https://", 8))
		curl_easy_setopt(h, CURLOPT_CAINFO, p->ca_file);
	if (is_head) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else if (rq->body || !strcmp(rq->method, "POST") || !strcmp(rq->method, "PUT")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body ? (const char *)rq->body : "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	} else if (strcmp(rq->method, "GET")) {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, rq->method);
	}
	cc = curl_easy_perform(h);
	rs->curl_code = (int)cc;
	if (cc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &rs->status);
	} else {
		rs->status = 0;
		rc = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
		     : cc == CURLE_OUT_OF_MEMORY    ? -ENOMEM
		                                    : -EIO;
		if (cc == CURLE_WRITE_ERROR)
			rc = rs->overflow ? -EOVERFLOW : -ENOMEM;
		if (!rs->error[0])
			snprintf(rs->error, sizeof(rs->error), "%s", curl_easy_strerror(cc));
	}
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	give(p, h);
	curl_slist_free_all(hl);
	if (rc)
		log_debug("s3 %s %s -> curl error %d (%s), %lld ms", rq->method,
		          rq->log_key ? rq->log_key : "-", rs->curl_code, rs->error,
		          (long long)(now_ms() - t0));
	else
		log_debug("s3 %s %s -> %ld, %zu bytes up, %zu down, %lld ms", rq->method,
		          rq->log_key ? rq->log_key : "-", rs->status, rq->body_len, rs->len,
		          (long long)(now_ms() - t0));
	return rc;
oom:
	curl_slist_free_all(hl);
	return -ENOMEM;
}

void http_resp_free(struct http_resp *rs)
{
	if (!rs)
		return;
	if (!rs->fixed)
		free(rs->body);
	rs->body = NULL;
	rs->len = rs->cap = 0;
	rs->fixed = false;
}

bool http_retryable(int curl_code, long status, const char *s3code)
{
	if (curl_code) {
		switch ((CURLcode)curl_code) {
		case CURLE_OPERATION_TIMEDOUT:
		case CURLE_COULDNT_CONNECT:
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_GOT_NOTHING:
		case CURLE_PARTIAL_FILE:
		case CURLE_HTTP2:
		case CURLE_HTTP2_STREAM:
			return true;
		default:
			return false; /* TLS certificate, bad URL, out of memory, ... */
		}
	}
	if (status == 500 || status == 502 || status == 503 || status == 504 || status == 429)
		return true;
	if (s3code && (!strcmp(s3code, "SlowDown") || !strcmp(s3code, "RequestTimeout") ||
	               !strcmp(s3code, "InternalError") || !strcmp(s3code, "ServiceUnavailable") ||
	               !strcmp(s3code, "Throttling")))
		return true;
	return false;
}

int http_unreachable(int curl_code)
{
	switch ((CURLcode)curl_code) {
	case CURLE_COULDNT_CONNECT:
		return -ECONNREFUSED;
	case CURLE_COULDNT_RESOLVE_HOST:
		return -EHOSTUNREACH;
	default:
		return 0;
	}
}

const char *http_error_hint(int curl_code)
{
	switch ((CURLcode)curl_code) {
	case CURLE_PEER_FAILED_VERIFICATION:
		return " (TLS: the server certificate is not trusted or does not name this host; "
		       "give its CA with the CA-file option or AWS_CA_BUNDLE)";
	case CURLE_SSL_CACERT_BADFILE:
		return " (TLS: the CA file cannot be read)";
	case CURLE_SSL_CONNECT_ERROR:
		return " (TLS handshake failed: does the endpoint really speak https?)";
	case CURLE_COULDNT_RESOLVE_HOST:
		return " (host name not found)";
	case CURLE_COULDNT_CONNECT:
		return " (connection refused: is the server running?)";
	case CURLE_OPERATION_TIMEDOUT:
		return " (timed out)";
	default:
		return "";
	}
}

unsigned http_backoff_ms(unsigned attempt, unsigned base_ms, unsigned cap_ms, uint64_t *rng)
{
	uint64_t x = *rng ? *rng : 0x9e3779b97f4a7c15ull;
	uint64_t ceil = base_ms;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*rng = x;
	for (unsigned i = 0; i < attempt && ceil < cap_ms; i++)
		ceil <<= 1;
	if (ceil > cap_ms)
		ceil = cap_ms;
	return (unsigned)(x % (ceil + 1));
}
