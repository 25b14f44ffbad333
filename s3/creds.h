/*
 * creds.h - AWS credentials for the S3 store: the provider chain in the
 * order of the AWS CLI and SDKs, and the refresh of temporary credentials
 * while the store is in use.
 *
 * The chain (the first source that is configured is used; if it fails, the
 * open fails with its error rather than falling through to the next):
 *
 *   1. keys given in the options (struct creds_opts; tests and embedders)
 *   2. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 *      AWS_SESSION_TOKEN (skipped when a profile is named explicitly)
 *   3. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN
 *      (+ AWS_ROLE_SESSION_NAME): STS AssumeRoleWithWebIdentity with the
 *      token read from the file at every refresh
 *   4. the profile (the option, else AWS_PROFILE, else "default") of the
 *      shared files (AWS_CONFIG_FILE / ~/.aws/config, "[profile NAME]";
 *      AWS_SHARED_CREDENTIALS_FILE / ~/.aws/credentials, "[NAME]"):
 *      role_arn with source_profile (STS AssumeRole signed with the source
 *      profile's credentials, which may be a role themselves),
 *      credential_source (Environment, Ec2InstanceMetadata, EcsContainer)
 *      or web_identity_token_file; else aws_access_key_id /
 *      aws_secret_access_key (/ aws_session_token); else credential_process
 *      (its JSON output: Version 1, AccessKeyId, SecretAccessKey,
 *      SessionToken, Expiration).  A profile named explicitly (option or
 *      AWS_PROFILE) must exist.
 *   5. container credentials: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI
 *      (http://169.254.170.2 + it) or AWS_CONTAINER_CREDENTIALS_FULL_URI
 *      (https, or http to a loopback address or the ECS/EKS agent), with
 *      the Authorization header from AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE
 *      (re-read at every refresh) or AWS_CONTAINER_AUTHORIZATION_TOKEN
 *   6. EC2 instance metadata, IMDSv2 only (PUT /latest/api/token, then
 *      GET /latest/meta-data/iam/security-credentials/[ROLE] with the
 *      token): AWS_EC2_METADATA_SERVICE_ENDPOINT overrides
 *      http://169.254.169.254, AWS_EC2_METADATA_DISABLED=true skips it
 *
 * STS requests go to the STS endpoint of the options, else
 * AWS_ENDPOINT_URL_STS, else the S3 endpoint when one is given (Ceph RGW
 * serves STS on the S3 port), else https://sts.REGION.amazonaws.com; they
 * are signed for service "sts" in the S3 signing region.
 *
 * Refresh.  Credentials with an expiry are refreshed by a background thread
 * ahead of time (creds_refresh_at(): 5 minutes before they expire, or half
 * way through a shorter lifetime).  A refresh publishes a new immutable,
 * reference-counted struct creds_keys; a request signs with whatever
 * creds_get() returned when it was signed, so requests in flight keep their
 * signature and new ones use the new keys.  A failed refresh is retried
 * with backoff (1 s doubling to 60 s) while the old keys stay in use until
 * they really expire; a request that finds them expired wakes the
 * refresher and waits (up to the request timeout) for one attempt.
 *
 * Secrets (secret keys, session tokens, web identity and container tokens,
 * credential_process output) are never logged, never put in error messages
 * and never passed on a command line; access key ids may be logged.
 *
 * Thread safety: creds_get() and creds_keys_put() from any thread;
 * creds_close() last.
 */
#ifndef MEMWALFS_CREDS_H
#define MEMWALFS_CREDS_H

#include <stdint.h>

struct creds;

/* One set of keys.  Immutable once published; reference counted. */
struct creds_keys {
	char *access_key;    /* AKIA..., ASIA... */
	char *secret_key;    /* never logged */
	char *session_token; /* NULL: none; never logged */
	int64_t obtained;    /* when fetched, seconds since the epoch */
	int64_t expires;     /* when they stop working (0: never) */
	int refs;            /* atomic; creds_keys_put() frees at 0 */
};

/* Where to look and how.  Strings are borrowed for creds_open() only. */
struct creds_opts {
	const char *access_key; /* explicit keys (both or neither) */
	const char *secret_key;
	const char *session_token;
	const char *profile;      /* explicit profile name (NULL: AWS_PROFILE or "default") */
	const char *region;       /* signing region for STS (required) */
	const char *s3_endpoint;  /* the S3 endpoint (NULL: AWS) */
	const char *sts_endpoint; /* NULL: AWS_ENDPOINT_URL_STS, the S3 endpoint, AWS */
	const char *ca_file;      /* CA bundle for https (NULL: system) */
	unsigned timeout_ms;      /* per request to STS and credential endpoints (0: 10 s) */
};

/*
 * Walk the chain, fetch the first credentials and, when they expire, start
 * the refresh thread.  *out only on success.  Errors (logged with the
 * source and the reason, never a secret): -EACCES no source has
 * credentials or a source refused (STS 403, IMDS without a role),
 * -EINVAL a bad configuration (missing profile, role_arn without a source,
 * unusable container URL), -EIO/-ETIMEDOUT an endpoint failed, -ENOMEM.
 */
int creds_open(const struct creds_opts *o, struct creds **out);

/*
 * The keys to sign a request with, with a reference the caller drops with
 * creds_keys_put().  Never NULL.  When the current keys have expired and a
 * refresh thread runs, waits for one refresh attempt first.
 */
struct creds_keys *creds_get(struct creds *c);

/* Drop a reference from creds_get().  Accepts NULL. */
void creds_keys_put(struct creds_keys *k);

/* Which source the chain chose, for messages ("environment", "profile x: ..."). */
const char *creds_source(const struct creds *c);

/* Refreshes so far: successful ones and failed attempts. */
void creds_refresh_counts(struct creds *c, uint64_t *ok, uint64_t *failed);

/* Stop the refresh thread and free everything.  Accepts NULL. */
void creds_close(struct creds *c);

/*
 * When keys obtained at `obtained` that expire at `expires` (seconds) are
 * refreshed: 5 minutes before expiry, or half way through a lifetime under
 * 10 minutes.  Pure; for tests.
 */
int64_t creds_refresh_at(int64_t obtained, int64_t expires);

#endif /* MEMWALFS_CREDS_H */
