/*
 * store.h - the object-store interface.
 *
 * The engine keeps everything durable in a flat namespace of immutable-ish
 * objects named by keys such as "wal/0000000000000042".  This header is the
 * only thing the engine knows about where those objects live; behind it are
 * the local-directory store (s3/local.c), the S3 store (s3/s3.c), the
 * sub-prefix view of another store (s3/sub.c, store_open_sub()) and a
 * fault-injecting wrapper for tests (s3/fault.h).  A store knows nothing of
 * what the keys mean.
 *
 * Conventions (STYLE.md section 3): every function returns 0 on success or a
 * negative errno.  Errors that every backend reports the same way:
 *
 *   -ENOENT     get/head of a key that does not exist
 *   -EEXIST     put_if_absent (or a conditional streaming finish) lost: the key
 *               already existed.  Exactly one of several racing creators of a
 *               key gets 0; the others get -EEXIST.
 *   -EINVAL     a key that fails store_key_valid(), or a bad argument
 *   -ENOTSUP    the store cannot do this (e.g. conditional create on a backend
 *               without it; see struct store_caps)
 *   -EACCES     credentials refused (S3 403) / permission denied (local)
 *   -EIO        the store failed after all retries that were safe to make;
 *               the backend has logged the operation, key, status and code
 *   -ENOSPC     the local disk is full
 *   -ETIMEDOUT  the operation timed out after retries
 *   -EROFS      a write to a store opened with STORE_OPEN_READ_ONLY
 *
 * Some errors stay until someone changes the store (a permission, a link or
 * a file planted in a local store's directory, a read-only filesystem):
 * store_err_permanent() says which, per backend, so that the engine fails
 * the operation at once instead of retrying it as an outage.
 *
 * Keys: 1..STORE_KEY_MAX bytes of printable ASCII except backslash, made of
 * '/'-separated segments; no empty segment (no leading, trailing or double
 * '/'), no segment "." or "..".  store_key_valid() is the one check; every
 * entry point applies it.
 *
 * Thread safety: every function here may be called from any number of
 * threads at once on the same store, except store_close(), which must be the
 * last call.  A store_writer is used by one thread at a time.
 */
#ifndef MEMWALFS_STORE_H
#define MEMWALFS_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STORE_KEY_MAX 1024

/* Pass as len to store_get() to read to the end of the object. */
#define STORE_TO_END UINT64_MAX

struct store;
struct store_writer;

/* What a backend can do.  Filled by the backend at open; constant after. */
struct store_caps {
	bool conditional_create; /* put_if_absent is atomic on this backend */
	bool conditional_finish; /* a store_writer opened with STORE_W_IF_ABSENT is atomic */
	bool durable_on_ack;     /* an acknowledged put survives a machine crash */
	size_t part_size;        /* streaming writers upload in parts of this size (0: one piece) */
	const char *name;        /* "local", "s3", "fault(local)", ... */
};

/* Result of store_head(). */
struct store_stat {
	uint64_t size; /* object length in bytes */
	char etag[72]; /* entity tag without quotes; "" when the backend has none */
	int64_t mtime; /* last modification, seconds since the epoch (0: unknown) */
};

/* Operation classes counted by every store (see store_get_stats()). */
enum store_op {
	STORE_OP_PUT = 0, /* put, put_if_absent, single-piece writer finish */
	STORE_OP_GET,     /* get (whole or ranged) */
	STORE_OP_HEAD,    /* head */
	STORE_OP_LIST,    /* one listing page */
	STORE_OP_DELETE,  /* one delete, or one delete-many request */
	STORE_OP_MPU,     /* multipart: initiate, part, complete, abort */
	STORE_OP__COUNT
};

/* Counters since open.  Backends count requests actually sent. */
struct store_stats {
	uint64_t requests[STORE_OP__COUNT]; /* requests sent, per class */
	uint64_t retries;                   /* requests repeated after a retryable failure */
	uint64_t errors;                    /* operations that returned an error to the caller */
	uint64_t bytes_sent;                /* payload bytes uploaded */
	uint64_t bytes_received;            /* payload bytes downloaded */
	/* the last minute (STORE_WINDOW_SEC seconds, fewer right after the open): */
	uint64_t window_sec;            /* seconds the window covers (1..60) */
	uint64_t window_requests;       /* requests sent in it */
	uint64_t window_bytes_sent;     /* payload bytes uploaded in it */
	uint64_t window_bytes_received; /* payload bytes downloaded in it */
};

/* The window of store_stats.window_*: the last minute, in one-second slots. */
#define STORE_WINDOW_SEC 60

/* Flags of store_writer_open(). */
#define STORE_W_IF_ABSENT 0x1 /* the finish is a conditional create (-EEXIST if it exists) */
/*
 * The bytes passed to store_writer_write() stay valid and unchanged until
 * store_writer_finish() or _abort() returns: the store may send them from
 * there without a copy (S3: whole parts).
 */
#define STORE_W_STABLE 0x2

/*
 * Callback of store_list(): called once per key, in ascending byte order.
 * key is valid only during the call.  Return 0 to continue; any other value
 * stops the listing and becomes store_list()'s return value.
 */
typedef int (*store_list_fn)(void *arg, const char *key, uint64_t size);

/* Returns true when key is a valid object key (see the rules above). */
bool store_key_valid(const char *key);

/*
 * Store a whole object, replacing any previous one.  The object is either
 * entirely the new bytes or entirely the old ones to any reader, at any time
 * and after a crash.  Returns 0 once the store acknowledges it (on the local
 * store: fsynced, with its directory).
 */
int store_put(struct store *s, const char *key, const void *buf, size_t len);

/*
 * Conditional create: store the object only if no object of that name
 * exists.  Returns 0 if this call created it, -EEXIST if it already existed
 * (including when a racing writer won), -ENOTSUP if !caps.conditional_create.
 * A retried request whose first attempt may have landed is resolved by the
 * backend (by comparing the stored bytes), so our own success never turns
 * into -EEXIST.
 */
int store_put_if_absent(struct store *s, const char *key, const void *buf, size_t len);

/*
 * Read len bytes starting at off (len STORE_TO_END: to the end).  On success
 * *out is a malloc()ed buffer owned by the caller (free() it; never NULL, even
 * for 0 bytes) and *outlen the number of bytes read, which is shorter than len
 * when the object ends first, and 0 when off >= size.  -ENOENT if missing.
 * The S3 store returns bodies of ranges of 256 KiB or more page-aligned (the
 * disk cache then writes them with O_DIRECT without a copy); nothing relies
 * on it.
 */
int store_get(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
              size_t *outlen);

/*
 * store_get() into the caller's buffer: read at most len bytes (a count, not
 * STORE_TO_END; len >= 1) starting at off into buf, which holds len bytes;
 * *outlen gets the number read (shorter when the object ends first, 0 when
 * off >= size).  The contents of buf are undefined after an error.  The S3
 * and local stores write the body straight into buf (no allocation, no
 * copy); other backends read with their get and copy.  Any thread.
 */
int store_get_into(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
                   size_t *outlen);

/* Size and entity tag of an object.  -ENOENT if missing. */
int store_head(struct store *s, const char *key, struct store_stat *st);

/*
 * List the keys that start with prefix ("" for all) and sort after
 * start_after (NULL or "" for no bound), in ascending byte order, calling fn
 * for each.  Pages through the whole result (max_keys 0) or stops after
 * max_keys keys.  Temporary files of the local store and in-progress
 * streaming uploads are never listed.
 */
int store_list(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
               store_list_fn fn, void *arg);

/* Delete one object.  Deleting a missing key succeeds. */
int store_delete(struct store *s, const char *key);

/*
 * Delete n objects (missing ones succeed).  On S3 this is DeleteObjects in
 * batches of 1000.  Returns the first error; keys after it may or may not
 * have been deleted.
 */
int store_delete_many(struct store *s, const char *const *keys, size_t n);

/*
 * Streaming writer for large objects.  Bytes pushed with
 * store_writer_write() go up while the caller keeps writing (on S3: a
 * multipart upload whose parts are sent in parallel).  The object becomes
 * visible, all at once, only at store_writer_finish().  Either finish() or
 * abort() must be called exactly once; both free the writer.  With
 * STORE_W_IF_ABSENT, finish() is a conditional create (-EEXIST if the key
 * exists; -ENOTSUP from open if !caps.conditional_finish).
 */
int store_writer_open(struct store *s, const char *key, int flags, struct store_writer **out);
int store_writer_write(struct store_writer *w, const void *buf, size_t len);
int store_writer_finish(struct store_writer *w);
void store_writer_abort(struct store_writer *w);

/*
 * Remove what interrupted streaming uploads left behind under prefix
 * (S3: abort incomplete multipart uploads; local: remove temp files) that
 * were started more than older_than_sec seconds ago.  *n (may be NULL) gets
 * how many were removed.
 */
int store_cleanup_uploads(struct store *s, const char *prefix, unsigned older_than_sec,
                          unsigned *n);

/* The space of the filesystem that holds a store (store_space()). */
struct store_space {
	uint64_t total; /* its size, bytes */
	uint64_t free;  /* free bytes */
	uint64_t avail; /* free bytes an unprivileged user may take (df's Avail) */
};

/*
 * The space of the filesystem that holds the store, as statvfs() tells it
 * (the local store: the filesystem of its directory).  0, -ENOTSUP for a
 * store with no size of its own (S3), or -errno.  Sends no request; any thread.
 */
int store_space(struct store *s, struct store_space *out);

/*
 * Does rc, returned by an operation on s, stay until someone changes the store, so that
 * sending the same request again is pointless?  The local store: -EACCES, -EPERM, -EROFS,
 * -ENOTDIR, -ELOOP, -EISDIR, -ENAMETOOLONG (a permission; a link, file or directory where
 * the store has its own; a read-only filesystem).  The S3 store: none (a 403 may be a
 * credential being renewed).  False for 0 and for every other error.  Any thread.
 */
bool store_err_permanent(const struct store *s, int rc);

/* Capabilities of this store; valid until store_close(). */
const struct store_caps *store_caps(struct store *s);

/* Copy the request counters. */
void store_get_stats(struct store *s, struct store_stats *out);

struct mw_hist_snap; /* util/hist.h */
/*
 * Copy the latency histogram of class op: the time of each call through this
 * interface, retries and backoff included, successful or not.  PUT: store_put
 * and store_put_if_absent; GET: store_get; HEAD, LIST (a whole listing),
 * DELETE (store_delete, store_delete_many); MPU: store_writer_finish (the
 * wait for a streaming upload's last parts and its completion).  Any thread.
 */
void store_get_latency(struct store *s, enum store_op op, struct mw_hist_snap *out);

/* Close the store and free it.  Accepts NULL. */
void store_close(struct store *s);

/*
 * Flags of the store_open_*_flags() functions.
 *
 * STORE_OPEN_EXISTING: the store must already exist.  A missing local
 * directory is -ENOENT (and is not created).  On S3 the bucket must exist
 * (it always must); a prefix cannot be told missing from empty.
 *
 * STORE_OPEN_READ_ONLY: for tools that only look.  Opening writes nothing
 * (the local store leaves crash temp files alone; the S3 store does not
 * probe conditional create, so caps.conditional_create is false unless the
 * options say yes) and every write (put, put_if_absent, delete, streaming
 * writer, cleanup of uploads) fails with -EROFS.  Implies EXISTING.
 */
#define STORE_OPEN_EXISTING 0x1
#define STORE_OPEN_READ_ONLY 0x2

/*
 * Backends.  Each writes *out only on success.
 *
 * store_open_local: objects are files under dir (created if missing).
 * store_open_local_flags: the same with STORE_OPEN_* flags.
 */
int store_open_local(const char *dir, struct store **out);
int store_open_local_flags(const char *dir, int flags, struct store **out);

/* Options of the S3 store (s3/s3.c).  Unset strings are NULL. */
struct s3_opts {
	const char *endpoint;   /* "https://s3.us-east-1.amazonaws.com", "http://127.0.0.1:7480";
	                           NULL: AWS from region */
	const char *region;     /* default "us-east-1" (or AWS_REGION / AWS_DEFAULT_REGION) */
	const char *bucket;     /* required */
	const char *prefix;     /* key prefix inside the bucket ("" or "fs1/") */
	const char *access_key; /* NULL: the AWS credential chain (s3/creds.h) */
	const char *secret_key;
	const char *session_token;
	const char *profile;    /* NULL: AWS_PROFILE or "default" */
	const char *sts_url;    /* STS for roles (NULL: AWS_ENDPOINT_URL_STS, endpoint, AWS) */
	const char *ca_file;    /* NULL: AWS_CA_BUNDLE for https, else system default */
	bool path_style;        /* path-style addressing (default for custom endpoints) */
	bool virtual_hosted;    /* force virtual-hosted addressing */
	bool unsigned_payload;  /* asked for UNSIGNED-PAYLOAD: the default where it is taken
	                           (TLS, loopback); only warns elsewhere */
	bool signed_payload;    /* hash every body, even over TLS or to a loopback endpoint */
	int conditional_create; /* 1 yes, 0 no, -1 probe (default) */
	unsigned connections;   /* keep-alive connections in the pool (default 16) */
	unsigned max_retries;   /* default 8 */
	unsigned timeout_ms;    /* per request (default 30000) */
	size_t part_size;       /* multipart part size (default 8 MiB) */
	unsigned part_parallel; /* parts in flight per writer (default 4) */
};

/* Fill *o with defaults (all strings NULL, conditional_create -1, ...). */
void s3_opts_default(struct s3_opts *o);

/*
 * Open an S3 store.  Does one request to check the bucket and credentials
 * (then, unless o->conditional_create says, the conditional-create probe).
 * That first request fails at once, without retries, when the endpoint
 * cannot be reached at all: -ECONNREFUSED (nothing listens, no route) or
 * -EHOSTUNREACH (the host name does not resolve).  Once open, requests are
 * retried patiently (max_retries with backoff).
 */
int store_open_s3(const struct s3_opts *o, struct store **out);

/*
 * Open a store named by a URL: "s3://bucket/prefix" (the rest of the S3
 * options from *base, which may be NULL), or a local directory path.
 * store_open_url_flags: the same with STORE_OPEN_* flags.
 */
int store_open_url(const char *url, const struct s3_opts *base, struct store **out);
int store_open_url_flags(const char *url, const struct s3_opts *base, int flags,
                         struct store **out);

/*
 * Open a view of parent in which key K is the parent's key prefix + K: the
 * store of one region's engine (issue 39: "r/<rid>/").  prefix: non-empty,
 * ending in '/', a valid key without that '/' (so "r/1/", never "/r/" or
 * "r//"), shorter than STORE_KEY_MAX; otherwise -EINVAL.  Copied: the
 * caller's string need not outlive the call.
 *
 * Every operation is one call of the parent's function on prefix + K, so
 * the view shares the parent's connections, credentials and retries and
 * sends nothing of its own.  A key whose prefixed form is longer than
 * STORE_KEY_MAX is -ENAMETOOLONG (logged; store_err_permanent() says yes).
 * store_list() looks up prefix + its prefix after prefix + start_after and
 * hands the callback the keys without the view's prefix (a listing prefix
 * too long for any key lists nothing and sends nothing);
 * store_cleanup_uploads() cleans under prefix + its prefix only.  The
 * parent's keys outside prefix are never seen.
 * caps: the parent's, named "sub(<parent's name>)"; read-only when the
 * parent is; store_space() and store_err_permanent() are the parent's.
 *
 * Counters: the view's store_get_stats() counts the operations it forwards,
 * one request each with the payload bytes it carried (put, put_if_absent,
 * get, head, delete: 1; a listing: 1 per 1000 keys listed, at least 1, as
 * the local and S3 stores count pages; delete_many: 1 per 1000 keys, as S3
 * batches them; a streaming writer: 1 PUT with all its bytes at finish);
 * retries stay 0.  The parent counts what its backend really sends, as for
 * any caller, so the parent's counters are the mount's total, the views'
 * included.  On a local parent the two agree exactly except delete_many
 * (the local store counts one DELETE per key); on S3 the parent also counts
 * retries, multipart requests (MPU) and delete batches as sent.  Errors and
 * latency (store_get_latency()) are recorded by both.
 *
 * Lifetime: the parent must outlive all its views (store_close() of a store
 * with open views is a bug, caught by an assert); store_close() of a view
 * frees the view only, never the parent.  Thread safety as for any store:
 * any thread, also at once with the parent and other views.  Views of views
 * work (the prefixes add up).  *out is written only on success.
 */
int store_open_sub(struct store *parent, const char *prefix, struct store **out);

#endif /* MEMWALFS_STORE_H */
