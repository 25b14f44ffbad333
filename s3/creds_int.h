/*
 * creds_int.h - internals of the credential chain shared by s3/creds.c (the
 * chain, the provider and its refresh thread) and s3/creds_fetch.c (the
 * sources: STS, credential_process, container and instance metadata
 * endpoints) and the unit tests.  Not for use elsewhere.
 */
#ifndef MEMWALFS_CREDS_INT_H
#define MEMWALFS_CREDS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "creds.h"
#include "http.h"

/* Kinds of source. */
enum creds_kind {
	CREDS_STATIC,       /* keys known at open: options, environment, profile */
	CREDS_WEB_IDENTITY, /* STS AssumeRoleWithWebIdentity with a token file */
	CREDS_ASSUME_ROLE,  /* STS AssumeRole signed with the inner source's keys */
	CREDS_PROCESS,      /* credential_process */
	CREDS_CONTAINER,    /* the container credentials endpoint */
	CREDS_IMDS,         /* EC2 instance metadata (IMDSv2) */
};

/* A resolved source: everything needed to fetch keys again.  Constant after open. */
struct creds_src {
	enum creds_kind kind;
	char *desc;              /* for messages: "environment", "profile p: role_arn ..." */
	struct creds_keys *keys; /* CREDS_STATIC: the keys (one reference) */
	char *role_arn;          /* roles: the role to assume */
	char *session_name;      /* roles: RoleSessionName */
	char *external_id;       /* AssumeRole: ExternalId (NULL: none) */
	unsigned duration;       /* roles: DurationSeconds (0: the server's default) */
	char *token_file;        /* web identity: the token file */
	struct creds_src *inner; /* AssumeRole: whose keys sign the request */
	char *command;           /* process: the command (run by /bin/sh -c; never logged) */
	char *url;               /* container: the URL; IMDS: the endpoint ("http://h:p") */
	char *auth_token;        /* container: Authorization value (never logged) */
	char *auth_token_file;   /* container: file holding it (re-read each time) */
	bool quiet;              /* IMDS reached by falling through the chain: "no answer" is
	                            logged at debug level (creds_open() says "no credentials") */
};

void creds_src_free(struct creds_src *s);

/* Where and how sources fetch.  Constant after creds_open(). */
struct creds_fetch_ctx {
	struct http_pool *pool;      /* STS and container requests */
	struct http_pool *imds_pool; /* instance metadata (short timeout) */
	char *sts_url;               /* POST target: "http://h:p/" */
	char *sts_host;              /* its Host header */
	char *sts_path;              /* its canonical path ("/") */
	char *region;                /* signing region */
	unsigned process_timeout_ms; /* credential_process may run this long */
};

/*
 * Fetch keys from s (*out: one reference, only on success).  Errors are
 * logged with s->desc and mapped as creds_open() says.  Any thread.
 */
int creds_fetch(struct creds_fetch_ctx *x, const struct creds_src *s, struct creds_keys **out);

/* New keys (copies; token may be NULL), refs 1.  NULL: ENOMEM. */
struct creds_keys *creds_keys_new(const char *ak, const char *sk, const char *token,
                                  int64_t expires);

/* ---- parsers (pure; unit-tested) --------------------------------------- */

/*
 * ISO 8601 / RFC 3339 date-time, UTC or with an offset:
 * "2026-05-01T12:34:56Z", "...56.123Z", "...56+02:00" -> seconds.
 * 0 or -EBADMSG.
 */
int creds_parse_time(const char *s, int64_t *out);

/* What a JSON credential document is. */
enum creds_json_kind {
	CREDS_JSON_PROCESS,   /* credential_process: Version 1, SessionToken */
	CREDS_JSON_CONTAINER, /* container endpoint: Token */
	CREDS_JSON_IMDS,      /* instance metadata: Token, Code "Success" */
};

/*
 * Parse a JSON credential document.  *out on success (refs 1).  -EBADMSG
 * for malformed JSON, a missing AccessKeyId/SecretAccessKey, a bad
 * Expiration or a Version other than 1 (process); what is wrong goes to
 * why (whysz bytes; never a value).  Expiration absent: never expires.
 */
int creds_parse_json(const char *doc, size_t n, enum creds_json_kind kind, struct creds_keys **out,
                     char *why, size_t whysz);

/*
 * Parse an STS answer (AssumeRole, AssumeRoleWithWebIdentity).  0 and *out
 * for a response with Credentials (AccessKeyId, SecretAccessKey,
 * SessionToken, Expiration all present); -EACCES with code and msg filled
 * for an error document (<ErrorResponse><Error> or a bare <Error>);
 * -EBADMSG otherwise.
 */
int creds_parse_sts(const char *doc, size_t n, struct creds_keys **out, char *code, size_t codesz,
                    char *msg, size_t msgsz);

/*
 * The container credentials URL: relative (AWS_CONTAINER_CREDENTIALS_
 * RELATIVE_URI, must start with '/') wins over full (..._FULL_URI, https,
 * or http to 127.0.0.0/8, [::1], localhost, 169.254.170.2, 169.254.170.23
 * or [fd00:ec2::23]).  *out malloc()ed.  -EINVAL (why filled) otherwise.
 */
int creds_container_url(const char *relative, const char *full, char **out, char *why,
                        size_t whysz);

/*
 * Split an endpoint URL "http[s]://host[:port][/path]" into a Host header
 * value and a canonical path ("/" when none), both malloc()ed.  -EINVAL
 * for anything else (no scheme, no host, user info).
 */
int creds_split_url(const char *url, char **host, char **path);

/* Append name=value, form-encoded, to a growing "a=b&c=d" body. */
int creds_form_add(char **body, size_t *len, const char *name, const char *value);

#endif /* MEMWALFS_CREDS_INT_H */
