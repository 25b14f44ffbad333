/*
 * sub.c - the sub-prefix view of a store (store_open_sub() in store.h).
 *
 * A view is a store whose key K is the parent's key PREFIX + K.  It holds no
 * connection, credential or retry policy of its own: every operation is one
 * call of the parent's public function (store_put(parent, PREFIX + K, ...)),
 * so the parent's backend does the work, retries and counting exactly as for
 * its own callers.  Issue 39 gives each region's engine such a view on
 * "r/<rid>/" of the mount's one store.
 *
 * Keys.  The prefix is checked at open: non-empty, ending in '/', and a
 * valid key once the '/' is dropped; so PREFIX + K is a valid key of the
 * parent whenever K is a valid key of the view and the sum is at most
 * STORE_KEY_MAX bytes.  A longer one is -ENAMETOOLONG (logged; permanent).
 * Listings add the prefix to the prefix and start_after they pass down and
 * strip it from every key the callback sees; a listing prefix too long for
 * any key of the view lists nothing, and cleanup of uploads is confined to
 * PREFIX + prefix.
 *
 * Counters (documented in store.h): the view counts, in its own counters,
 * one request per operation it forwards with the payload bytes it carries,
 * the way the fault wrapper does; the parent's backend counts the requests
 * it really sends, retries included, as always.  store.c counts errors and
 * latency in both, since a forwarded call passes through it twice.
 *
 * Concurrency.  Everything here is const after open except the counters,
 * which are atomic; a view may be used from any thread, like its parent.
 * The parent must outlive the view: parent->views counts the open views and
 * store_close() of the parent asserts that it is zero.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store_impl.h"

struct sub_store {
	struct store base;   /* must be first */
	struct store *outer; /* the parent (borrowed; outlives the view) */
	size_t plen;         /* strlen(prefix) */
	char name[64];       /* "sub(<parent name>)", caps.name points here */
	char prefix[];       /* the key prefix, ending in '/' */
};

struct sub_writer {
	struct store_writer base;   /* must be first */
	struct store_writer *inner; /* the parent's writer (owned) */
	uint64_t bytes;             /* bytes accepted so far */
};

/* One listing through the view: the caller's callback and what to strip. */
struct sub_list {
	store_list_fn fn; /* the caller's callback */
	void *arg;        /* its argument */
	size_t plen;      /* bytes of prefix to strip from each key */
	size_t emitted;   /* keys passed to fn */
};

/*
 * Write the parent's key for key into out (STORE_KEY_MAX + 1 bytes).
 * -ENAMETOOLONG (logged) when it does not fit.
 */
static int full_key(const struct sub_store *v, const char *key, char *out)
{
	size_t n = strlen(key);

	if (v->plen + n > STORE_KEY_MAX) {
		log_err(
		    "store view %s: key %.64s%s too long under the prefix (%zu + %zu > %d bytes)",
		    v->prefix, key, n > 64 ? "..." : "", v->plen, n, STORE_KEY_MAX);
		return -ENAMETOOLONG;
	}
	memcpy(out, v->prefix, v->plen);
	memcpy(out + v->plen, key, n + 1);
	return 0;
}

/*
 * PREFIX + s for a listing argument, malloc()ed into *out.  Returns 0, 1
 * when the result would be longer than any key (nothing can match), or
 * -ENOMEM.  limit: false for start_after, which may be of any length.
 */
static int full_arg(const struct sub_store *v, const char *s, bool limit, char **out)
{
	size_t n = strlen(s);

	if (limit && v->plen + n > STORE_KEY_MAX)
		return 1;
	*out = malloc(v->plen + n + 1);
	if (!*out)
		return -ENOMEM;
	memcpy(*out, v->prefix, v->plen);
	memcpy(*out + v->plen, s, n + 1);
	return 0;
}

/* ------------------------------------------------------------------------
 * Store operations
 */

/* put or (if_absent) put_if_absent */
static int put_as(struct store *s, const char *key, const void *buf, size_t len, bool if_absent)
{
	struct sub_store *v = (struct sub_store *)s;
	char k[STORE_KEY_MAX + 1];
	int rc = full_key(v, key, k);

	if (rc < 0)
		return rc;
	store_count(s, STORE_OP_PUT, len, 0);
	return if_absent ? store_put_if_absent(v->outer, k, buf, len)
	                 : store_put(v->outer, k, buf, len);
}

static int v_put(struct store *s, const char *key, const void *buf, size_t len)
{
	return put_as(s, key, buf, len, false);
}

static int v_put_if_absent(struct store *s, const char *key, const void *buf, size_t len)
{
	return put_as(s, key, buf, len, true);
}

static int v_get(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
                 size_t *outlen)
{
	struct sub_store *v = (struct sub_store *)s;
	char k[STORE_KEY_MAX + 1];
	int rc = full_key(v, key, k);

	if (rc < 0)
		return rc;
	rc = store_get(v->outer, k, off, len, out, outlen);
	store_count(s, STORE_OP_GET, 0, rc == 0 ? *outlen : 0);
	return rc;
}

static int v_get_into(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
                      size_t *outlen)
{
	struct sub_store *v = (struct sub_store *)s;
	char k[STORE_KEY_MAX + 1];
	int rc = full_key(v, key, k);

	if (rc < 0)
		return rc;
	rc = store_get_into(v->outer, k, off, len, buf, outlen);
	store_count(s, STORE_OP_GET, 0, rc == 0 ? *outlen : 0);
	return rc;
}

static int v_head(struct store *s, const char *key, struct store_stat *st)
{
	struct sub_store *v = (struct sub_store *)s;
	char k[STORE_KEY_MAX + 1];
	int rc = full_key(v, key, k);

	if (rc < 0)
		return rc;
	store_count(s, STORE_OP_HEAD, 0, 0);
	return store_head(v->outer, k, st);
}

/* The parent's listing callback: the caller's, with the view's prefix stripped. */
static int strip_cb(void *arg, const char *key, uint64_t size)
{
	struct sub_list *l = arg;

	l->emitted++;
	return l->fn(l->arg, key + l->plen, size);
}

static int v_list(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
                  store_list_fn fn, void *arg)
{
	struct sub_store *v = (struct sub_store *)s;
	struct sub_list l = {.fn = fn, .arg = arg, .plen = v->plen};
	char *p = NULL, *after = NULL;
	int rc = full_arg(v, prefix, true, &p);

	if (rc == 1)
		return 0; /* no key of the view is that long: nothing to list, no request sent */
	if (rc == 0 && start_after[0])
		rc = full_arg(v, start_after, false, &after);
	if (rc < 0)
		goto out;
	rc = store_list(v->outer, p, after, max_keys, strip_cb, &l);
	/* one request per page of 1000 keys, as the local and S3 stores count */
	for (size_t i = 0; i <= l.emitted / 1000; i++)
		store_count(s, STORE_OP_LIST, 0, 0);
out:
	free(after);
	free(p);
	return rc;
}

static int v_delete(struct store *s, const char *key)
{
	struct sub_store *v = (struct sub_store *)s;
	char k[STORE_KEY_MAX + 1];
	int rc = full_key(v, key, k);

	if (rc < 0)
		return rc;
	store_count(s, STORE_OP_DELETE, 0, 0);
	return store_delete(v->outer, k);
}

static int v_delete_many(struct store *s, const char *const *keys, size_t n)
{
	struct sub_store *v = (struct sub_store *)s;
	size_t bytes = 0;
	char **full, *p;
	int rc;

	for (size_t i = 0; i < n; i++) {
		size_t kl = strlen(keys[i]);
		if (v->plen + kl > STORE_KEY_MAX) {
			char k[STORE_KEY_MAX + 1];
			return full_key(v, keys[i], k); /* logs, -ENAMETOOLONG */
		}
		bytes += v->plen + kl + 1;
	}
	/* the pointers, then the keys, in one allocation */
	full = malloc(n * sizeof(*full) + bytes);
	if (!full)
		return -ENOMEM;
	p = (char *)(full + n);
	for (size_t i = 0; i < n; i++) {
		full[i] = p;
		full_key(v, keys[i], p);
		p += strlen(p) + 1;
	}
	/* one request per batch of 1000 keys, as S3 sends them */
	for (size_t i = 0; i < n; i += 1000)
		store_count(s, STORE_OP_DELETE, 0, 0);
	rc = store_delete_many(v->outer, (const char *const *)full, n);
	free(full);
	return rc;
}

static int v_cleanup(struct store *s, const char *prefix, unsigned older_than_sec, unsigned *n)
{
	struct sub_store *v = (struct sub_store *)s;
	char *p = NULL;
	int rc = full_arg(v, prefix, true, &p);

	if (rc == 1) {
		*n = 0; /* no key of the view is that long: nothing to clean */
		return 0;
	}
	if (rc < 0)
		return rc;
	rc = store_cleanup_uploads(v->outer, p, older_than_sec, n);
	free(p);
	return rc;
}

/* ------------------------------------------------------------------------
 * Streaming writer
 */

static int vw_write(struct store_writer *sw, const void *buf, size_t len)
{
	struct sub_writer *w = (struct sub_writer *)sw;
	int rc = store_writer_write(w->inner, buf, len);

	if (rc == 0)
		w->bytes += len;
	return rc;
}

static int vw_finish(struct store_writer *sw)
{
	struct sub_writer *w = (struct sub_writer *)sw;
	struct store_writer *inner = w->inner;

	/* the object goes up as one PUT of w->bytes, as the fault wrapper counts it */
	store_count(sw->store, STORE_OP_PUT, w->bytes, 0);
	free(w);
	return store_writer_finish(inner);
}

static void vw_abort(struct store_writer *sw)
{
	struct sub_writer *w = (struct sub_writer *)sw;

	store_writer_abort(w->inner);
	free(w);
}

static const struct store_writer_ops sub_writer_ops = {
    .write = vw_write,
    .finish = vw_finish,
    .abort = vw_abort,
};

static int v_writer_open(struct store *s, const char *key, int flags, struct store_writer **out)
{
	struct sub_store *v = (struct sub_store *)s;
	char k[STORE_KEY_MAX + 1];
	struct sub_writer *w;
	int rc = full_key(v, key, k);

	if (rc < 0)
		return rc;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	rc = store_writer_open(v->outer, k, flags, &w->inner);
	if (rc < 0) {
		free(w);
		return rc;
	}
	w->base.ops = &sub_writer_ops;
	w->base.store = s;
	*out = &w->base;
	return 0;
}

/* ------------------------------------------------------------------------
 * Open, close
 */

/* The parent's space: a view has no size of its own. */
static int v_space(struct store *s, struct store_space *out)
{
	return store_space(((struct sub_store *)s)->outer, out);
}

/* The parent's rule; a key too long under the prefix stays too long. */
static bool v_err_permanent(const struct store *s, int rc)
{
	return rc == -ENAMETOOLONG || store_err_permanent(((const struct sub_store *)s)->outer, rc);
}

static void v_close(struct store *s)
{
	struct sub_store *v = (struct sub_store *)s;

	atomic_fetch_sub_explicit(&v->outer->views, 1, memory_order_relaxed);
	free(v);
}

static const struct store_ops sub_ops = {
    .put = v_put,
    .put_if_absent = v_put_if_absent,
    .get = v_get,
    .get_into = v_get_into,
    .head = v_head,
    .list = v_list,
    .del = v_delete,
    .delete_many = v_delete_many,
    .writer_open = v_writer_open,
    .cleanup_uploads = v_cleanup,
    .space = v_space,
    .close = v_close,
    .err_permanent = v_err_permanent,
};

/* A valid view prefix: non-empty, ends in '/', and a valid key without that '/'. */
static bool prefix_valid(const char *prefix)
{
	char k[STORE_KEY_MAX + 1];
	size_t n = strnlen(prefix, STORE_KEY_MAX + 1);

	/* n < STORE_KEY_MAX: room for a key of at least one byte under it */
	if (n < 2 || n >= STORE_KEY_MAX || prefix[n - 1] != '/')
		return false;
	memcpy(k, prefix, n - 1);
	k[n - 1] = '\0';
	return store_key_valid(k);
}

int store_open_sub(struct store *parent, const char *prefix, struct store **out)
{
	struct sub_store *v;
	size_t n;

	if (!parent || !prefix || !out || !prefix_valid(prefix))
		return -EINVAL;
	n = strlen(prefix);
	v = calloc(1, sizeof(*v) + n + 1);
	if (!v)
		return -ENOMEM;
	store_init(&v->base, &sub_ops);
	v->outer = parent;
	v->plen = n;
	memcpy(v->prefix, prefix, n + 1);
	v->base.caps = *store_caps(parent);
	snprintf(v->name, sizeof(v->name), "sub(%s)", v->base.caps.name);
	v->base.caps.name = v->name;
	v->base.read_only = parent->read_only;
	atomic_fetch_add_explicit(&parent->views, 1, memory_order_relaxed);
	*out = &v->base;
	return 0;
}
