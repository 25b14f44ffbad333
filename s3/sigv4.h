/*
 * sigv4.h - AWS Signature Version 4 for S3 requests (header-based).
 *
 * The S3 store builds every request from the same pieces it signs: the
 * canonical URI path (s3_path from sigv4_uri_encode with '/' kept), the
 * canonical query string (sigv4_canonical_query: names and values
 * URI-encoded here, sorted by name) and a list of headers that includes
 * host, x-amz-date and x-amz-content-sha256.  What is signed is exactly
 * what goes on the wire, so a server that re-derives the signature agrees.
 *
 * Pure functions over caller buffers; thread-safe.  Uses OpenSSL libcrypto
 * for SHA-256, HMAC-SHA256 and MD5.
 */
#ifndef MEMWALFS_SIGV4_H
#define MEMWALFS_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* SHA-256 of the empty string, the payload hash of body-less requests. */
#define SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
#define SIGV4_MAX_HEADERS 16 /* headers one request may sign */

/* Credentials; session_token may be NULL.  Borrowed by every call. */
struct sigv4_creds {
	const char *access_key;    /* AKIA... */
	const char *secret_key;    /* never logged */
	const char *session_token; /* sent as x-amz-security-token when set */
};

/* One query parameter, unencoded (value "" for a bare name like "uploads"). */
struct sigv4_param {
	const char *name;
	const char *value;
};

/* One header to sign: name in lower case, value as sent. */
struct sigv4_header {
	const char *name;
	const char *value;
};

/* What is signed. */
struct sigv4_request {
	const char *method; /* "GET", "PUT", ... */
	const char *path;   /* canonical URI, already encoded ("/bucket/a%24b") */
	const char *query;  /* canonical query from sigv4_canonical_query ("" none) */
	const struct sigv4_header *headers; /* any order; sorted internally */
	size_t nheaders;                    /* <= SIGV4_MAX_HEADERS */
	const char *payload_hash;           /* hex SHA-256 of the body or SIGV4_UNSIGNED */
};

/*
 * URI-encode n bytes of in per SigV4: unreserved characters (A-Z a-z 0-9
 * - _ . ~) are kept, '/' is kept unless encode_slash, everything else
 * becomes %XX (upper-case hex).  out must hold 3 * n + 1 bytes; it is NUL
 * terminated.  Returns the encoded length.
 */
size_t sigv4_uri_encode(const char *in, size_t n, bool encode_slash, char *out);

/*
 * Build the canonical query string of n parameters (sorted by encoded name,
 * then value; '/' in values encoded as %2F) into out (outsz bytes).
 * Returns its length, or -ENAMETOOLONG when it does not fit, -EINVAL for
 * more than 16 parameters.
 */
int sigv4_canonical_query(const struct sigv4_param *p, size_t n, char *out, size_t outsz);

/* Hex SHA-256 of len bytes (out: 65 bytes, NUL-terminated). */
void sigv4_sha256_hex(const void *buf, size_t len, char out[65]);

/* Base64 of the MD5 of len bytes, for Content-MD5 (out: 25 bytes). */
void sigv4_md5_base64(const void *buf, size_t len, char out[25]);

/* Format t (UTC) as "YYYYMMDDTHHMMSSZ" (out: 17 bytes). */
void sigv4_amz_date(time_t t, char out[17]);

/*
 * Compute the Authorization header value for r, signed at amz_date
 * ("YYYYMMDDTHHMMSSZ") in region for service "s3", into auth (authsz bytes;
 * 512 is always enough for up to SIGV4_MAX_HEADERS short names).  Returns 0,
 * -EINVAL for a malformed request (no headers, too many, bad date) or
 * -ENAMETOOLONG when auth is too small.  If canon (may be NULL) is given,
 * the canonical request is also written there (canonsz bytes), for tests.
 */
int sigv4_sign(const struct sigv4_creds *c, const char *region, const char *amz_date,
               const struct sigv4_request *r, char *auth, size_t authsz, char *canon,
               size_t canonsz);

/*
 * The same for another service (the credential chain signs STS requests
 * with service "sts"): the scope is DATE/region/service/aws4_request.
 * sigv4_sign() is this with service "s3".  -EINVAL also for a region and
 * service too long for the scope.
 */
int sigv4_sign_service(const struct sigv4_creds *c, const char *region, const char *service,
                       const char *amz_date, const struct sigv4_request *r, char *auth,
                       size_t authsz, char *canon, size_t canonsz);

#endif /* MEMWALFS_SIGV4_H */
