/*
 * store_impl.h - what a store backend implements (private to s3/).
 *
 * A backend embeds struct store as its first member and fills ops and caps.
 * The public functions in store.c validate keys, count errors and dispatch
 * here, so a backend never sees an invalid key.  Backends count the requests
 * they send with store_count() (one call per request actually sent, retries
 * included) so that the counters mean the same on every store.
 */
#ifndef MEMWALFS_STORE_IMPL_H
#define MEMWALFS_STORE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "hist.h"
#include "store.h"

struct store_ops {
	int (*put)(struct store *s, const char *key, const void *buf, size_t len);
	int (*put_if_absent)(struct store *s, const char *key, const void *buf, size_t len);
	int (*get)(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
	           size_t *outlen);
	/* into a buffer of len bytes (store_get_into); NULL: get, then a copy */
	int (*get_into)(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
	                size_t *outlen);
	int (*head)(struct store *s, const char *key, struct store_stat *st);
	int (*list)(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
	            store_list_fn fn, void *arg);
	int (*del)(struct store *s, const char *key);
	int (*delete_many)(struct store *s, const char *const *keys, size_t n);
	int (*writer_open)(struct store *s, const char *key, int flags, struct store_writer **out);
	int (*cleanup_uploads)(struct store *s, const char *prefix, unsigned older_than_sec,
	                       unsigned *n);
	/* store_space(); NULL: the store has no size of its own (-ENOTSUP) */
	int (*space)(struct store *s, struct store_space *out);
	void (*close)(struct store *s);
	/* store_err_permanent() (NULL: no error is) */
	bool (*err_permanent)(const struct store *s, int rc);
};

/* Writer operations; a backend's writer embeds struct store_writer first. */
struct store_writer_ops {
	int (*write)(struct store_writer *w, const void *buf, size_t len);
	int (*finish)(struct store_writer *w); /* frees w */
	void (*abort)(struct store_writer *w); /* frees w */
};

struct store {
	const struct store_ops *ops;                /* backend functions */
	struct store_caps caps;                     /* set by the backend at open */
	_Atomic uint64_t requests[STORE_OP__COUNT]; /* requests sent, per class */
	_Atomic uint64_t retries;                   /* requests repeated */
	_Atomic uint64_t errors;                    /* errors returned to callers */
	_Atomic uint64_t bytes_sent;                /* payload bytes uploaded */
	_Atomic uint64_t bytes_received;            /* payload bytes downloaded */
	struct mw_hist latency[STORE_OP__COUNT];    /* time of the calls through store.c, per
	                                               class (store_get_latency()) */
	bool read_only;                             /* STORE_OPEN_READ_ONLY: writes are -EROFS
	                                               (const after open) */
	_Atomic unsigned views;                     /* open sub-prefix views of this store
	                                               (sub.c); 0 at store_close() */
	/* requests and bytes per second of the last STORE_WINDOW_SEC seconds
	 * (store_stats.window_*): slot s % STORE_WINDOW_SEC counts second s of the monotonic clock
	 * (reset when a later second reuses it); protected by win_mu (static initialiser: never
	 * destroyed) */
	pthread_mutex_t win_mu;
	uint64_t win_open_sec; /* the monotonic second of store_init() (const after it) */
	struct {
		uint64_t sec, requests, sent, received;
	} win[STORE_WINDOW_SEC];
};

struct store_writer {
	const struct store_writer_ops *ops; /* backend functions */
	struct store *store;                /* the store it writes to */
};

/* Initialise the common part of a new backend (zeroes the counters). */
void store_init(struct store *s, const struct store_ops *ops);

/* store.c: count one request of sent/received bytes in the window of the last minute. */
void store_count_window(struct store *s, uint64_t sent, uint64_t received);

/* Count one request of class op carrying sent/received payload bytes. */
static inline void store_count(struct store *s, enum store_op op, uint64_t sent, uint64_t received)
{
	store_count_window(s, sent, received);
	atomic_fetch_add_explicit(&s->requests[op], 1, memory_order_relaxed);
	if (sent)
		atomic_fetch_add_explicit(&s->bytes_sent, sent, memory_order_relaxed);
	if (received)
		atomic_fetch_add_explicit(&s->bytes_received, received, memory_order_relaxed);
}

/* Count one repeated request. */
static inline void store_count_retry(struct store *s)
{
	atomic_fetch_add_explicit(&s->retries, 1, memory_order_relaxed);
}

#endif /* MEMWALFS_STORE_IMPL_H */
