/*
 * store.c - the public face of every object store: key validation, error
 * counting and dispatch to the backend's operations (store_impl.h).
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_impl.h"
#include "thread.h"

bool store_key_valid(const char *key)
{
	size_t n, seg = 0;

	if (!key)
		return false;
	n = strnlen(key, STORE_KEY_MAX + 1);
	if (n == 0 || n > STORE_KEY_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		unsigned char c = (unsigned char)key[i];
		if (c == '/' || c == '\0') {
			const char *s = key + i - seg;
			if (seg == 0)
				return false; /* empty segment */
			if ((seg == 1 && s[0] == '.') || (seg == 2 && s[0] == '.' && s[1] == '.'))
				return false;
			seg = 0;
			continue;
		}
		if (c < 0x20 || c >= 0x7f || c == '\\')
			return false;
		seg++;
	}
	return true;
}

/* The second of the monotonic clock. */
static uint64_t mono_sec(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec;
}

void store_init(struct store *s, const struct store_ops *ops)
{
	memset(s, 0, sizeof(*s));
	s->ops = ops;
	s->win_mu = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	s->win_open_sec = mono_sec();
}

void store_count_window(struct store *s, uint64_t sent, uint64_t received)
{
	uint64_t now = mono_sec();
	pthread_mutex_lock(&s->win_mu);
	size_t i = now % STORE_WINDOW_SEC;
	if (s->win[i].sec != now) {
		s->win[i].sec = now;
		s->win[i].requests = s->win[i].sent = s->win[i].received = 0;
	}
	s->win[i].requests++;
	s->win[i].sent += sent;
	s->win[i].received += received;
	pthread_mutex_unlock(&s->win_mu);
}

/* Record the latency of a call of class op that started at t0 (mw_now_us()); returns rc. */
static int timed(struct store *s, enum store_op op, uint64_t t0, int rc)
{
	mw_hist_record(&s->latency[op], mw_now_us() - t0);
	return rc;
}

/*
 * Every request to the store starts here: none may be sent by a thread that
 * holds the filesystem's lock (util/thread.h, the no-I/O mark; debug builds).
 */
static void no_io_check(const char *fn, const char *key)
{
	mw_noio_check(fn, key, key ? strlen(key) : 0);
}

/* Count errors returned to callers; -ENOENT and -EEXIST are answers, not failures. */
static int result(struct store *s, int rc)
{
	if (rc < 0 && rc != -ENOENT && rc != -EEXIST)
		atomic_fetch_add_explicit(&s->errors, 1, memory_order_relaxed);
	return rc;
}

int store_put(struct store *s, const char *key, const void *buf, size_t len)
{
	if (!store_key_valid(key) || (!buf && len))
		return -EINVAL;
	if (s->read_only)
		return -EROFS;
	no_io_check(__func__, key);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_PUT, t0, s->ops->put(s, key, buf, len)));
}

int store_put_if_absent(struct store *s, const char *key, const void *buf, size_t len)
{
	if (!store_key_valid(key) || (!buf && len))
		return -EINVAL;
	if (s->read_only)
		return -EROFS;
	if (!s->caps.conditional_create)
		return -ENOTSUP;
	no_io_check(__func__, key);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_PUT, t0, s->ops->put_if_absent(s, key, buf, len)));
}

int store_get(struct store *s, const char *key, uint64_t off, uint64_t len, void **out,
              size_t *outlen)
{
	if (!store_key_valid(key) || !out || !outlen)
		return -EINVAL;
	no_io_check(__func__, key);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_GET, t0, s->ops->get(s, key, off, len, out, outlen)));
}

/* store_get_into() of a backend without get_into: its get, then a copy. */
static int get_copy(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
                    size_t *outlen)
{
	void *b = NULL;
	size_t n = 0;
	int rc = s->ops->get(s, key, off, len, &b, &n);
	if (!rc) {
		if (n > len)
			n = (size_t)len; /* a backend never returns more, but buf holds len */
		memcpy(buf, b, n);
		*outlen = n;
	}
	free(b);
	return rc;
}

int store_get_into(struct store *s, const char *key, uint64_t off, uint64_t len, void *buf,
                   size_t *outlen)
{
	if (!store_key_valid(key) || !buf || !outlen || !len || len == STORE_TO_END ||
	    len > SIZE_MAX)
		return -EINVAL;
	no_io_check(__func__, key);
	uint64_t t0 = mw_now_us();
	int rc = s->ops->get_into ? s->ops->get_into(s, key, off, len, buf, outlen)
	                          : get_copy(s, key, off, len, buf, outlen);
	return result(s, timed(s, STORE_OP_GET, t0, rc));
}

int store_head(struct store *s, const char *key, struct store_stat *st)
{
	if (!store_key_valid(key) || !st)
		return -EINVAL;
	no_io_check(__func__, key);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_HEAD, t0, s->ops->head(s, key, st)));
}

int store_list(struct store *s, const char *prefix, const char *start_after, size_t max_keys,
               store_list_fn fn, void *arg)
{
	if (!fn || (prefix && strlen(prefix) > STORE_KEY_MAX))
		return -EINVAL;
	no_io_check(__func__, prefix);
	uint64_t t0 = mw_now_us();
	int rc = s->ops->list(s, prefix ? prefix : "", start_after ? start_after : "", max_keys, fn,
	                      arg);
	timed(s, STORE_OP_LIST, t0, rc);
	return rc < 0 ? result(s, rc) : rc;
}

int store_delete(struct store *s, const char *key)
{
	if (!store_key_valid(key))
		return -EINVAL;
	if (s->read_only)
		return -EROFS;
	no_io_check(__func__, key);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_DELETE, t0, s->ops->del(s, key)));
}

int store_delete_many(struct store *s, const char *const *keys, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!store_key_valid(keys[i]))
			return -EINVAL;
	if (n == 0)
		return 0;
	if (s->read_only)
		return -EROFS;
	no_io_check(__func__, keys[0]);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_DELETE, t0, s->ops->delete_many(s, keys, n)));
}

int store_writer_open(struct store *s, const char *key, int flags, struct store_writer **out)
{
	if (!store_key_valid(key) || !out || (flags & ~(STORE_W_IF_ABSENT | STORE_W_STABLE)))
		return -EINVAL;
	if (s->read_only)
		return -EROFS;
	if ((flags & STORE_W_IF_ABSENT) && !s->caps.conditional_finish)
		return -ENOTSUP;
	no_io_check(__func__, key);
	return result(s, s->ops->writer_open(s, key, flags, out));
}

int store_writer_write(struct store_writer *w, const void *buf, size_t len)
{
	if (!buf && len)
		return -EINVAL;
	if (len == 0)
		return 0;
	no_io_check(__func__, NULL);
	return result(w->store, w->ops->write(w, buf, len));
}

int store_writer_finish(struct store_writer *w)
{
	struct store *s = w->store;
	no_io_check(__func__, NULL);
	uint64_t t0 = mw_now_us();
	return result(s, timed(s, STORE_OP_MPU, t0, w->ops->finish(w)));
}

void store_writer_abort(struct store_writer *w)
{
	if (w)
		w->ops->abort(w);
}

int store_cleanup_uploads(struct store *s, const char *prefix, unsigned older_than_sec, unsigned *n)
{
	unsigned dummy;
	if (s->read_only)
		return -EROFS;
	no_io_check(__func__, prefix);
	return result(
	    s, s->ops->cleanup_uploads(s, prefix ? prefix : "", older_than_sec, n ? n : &dummy));
}

int store_space(struct store *s, struct store_space *out)
{
	no_io_check(__func__, NULL);
	return s->ops->space ? s->ops->space(s, out) : -ENOTSUP;
}

bool store_err_permanent(const struct store *s, int rc)
{
	return rc < 0 && s->ops->err_permanent && s->ops->err_permanent(s, rc);
}

const struct store_caps *store_caps(struct store *s)
{
	return &s->caps;
}

void store_get_stats(struct store *s, struct store_stats *out)
{
	for (int i = 0; i < STORE_OP__COUNT; i++)
		out->requests[i] = atomic_load_explicit(&s->requests[i], memory_order_relaxed);
	out->retries = atomic_load_explicit(&s->retries, memory_order_relaxed);
	out->errors = atomic_load_explicit(&s->errors, memory_order_relaxed);
	out->bytes_sent = atomic_load_explicit(&s->bytes_sent, memory_order_relaxed);
	out->bytes_received = atomic_load_explicit(&s->bytes_received, memory_order_relaxed);
	/* the last STORE_WINDOW_SEC seconds, the current one included */
	uint64_t now = mono_sec();
	out->window_sec = now - s->win_open_sec + 1;
	if (out->window_sec > STORE_WINDOW_SEC)
		out->window_sec = STORE_WINDOW_SEC;
	out->window_requests = out->window_bytes_sent = out->window_bytes_received = 0;
	pthread_mutex_lock(&s->win_mu);
	for (size_t i = 0; i < STORE_WINDOW_SEC; i++)
		if (s->win[i].sec + STORE_WINDOW_SEC > now && s->win[i].sec <= now &&
		    (s->win[i].requests || s->win[i].sent || s->win[i].received)) {
			out->window_requests += s->win[i].requests;
			out->window_bytes_sent += s->win[i].sent;
			out->window_bytes_received += s->win[i].received;
		}
	pthread_mutex_unlock(&s->win_mu);
}

void store_get_latency(struct store *s, enum store_op op, struct mw_hist_snap *out)
{
	mw_hist_read(&s->latency[op], out);
}

void store_close(struct store *s)
{
	if (!s)
		return;
	/* a view forwards to its parent: closing the parent first leaves it dangling */
	assert(atomic_load_explicit(&s->views, memory_order_relaxed) == 0);
	s->ops->close(s);
}
