/*
 * dbiter.c - the user-level view of an internal iterator at a snapshot
 * (dbiter.h).
 *
 * The internal iterator is always left positioned on the entry the dbiter
 * shows: the newest version with seq <= snap of the current user key, whose
 * type is not KV_DELETE.  next() remembers the current user key in skip[]
 * and advances the internal iterator past every remaining entry of that key
 * (older versions) before looking for the next visible one.  A tombstone
 * likewise puts its key into skip[] so that its older versions stay hidden.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dbiter.h"
#include "grow.h"

struct dbiter {
	struct kv_iter *it; /* owned internal iterator */
	uint64_t snap;      /* visibility bound: seq <= snap */
	uint8_t *lower;     /* inclusive lower bound, NULL: none (owned) */
	size_t lower_len;
	uint8_t *upper; /* exclusive upper bound, NULL: none (owned) */
	size_t upper_len;
	uint8_t *skip; /* user key whose remaining versions are skipped (owned) */
	size_t skip_len;
	size_t skip_cap; /* allocated bytes of skip */
	bool valid;      /* positioned at a visible entry */
	int err;         /* our own error (-ENOMEM), 0 if none */
};

static int dup_bytes(const void *p, size_t n, uint8_t **out)
{
	*out = malloc(n ? n : 1);
	if (!*out)
		return -ENOMEM;
	if (n)
		memcpy(*out, p, n);
	return 0;
}

int dbiter_new(struct kv_iter *internal, uint64_t snap, const void *lower, size_t lower_len,
               const void *upper, size_t upper_len, struct dbiter **out)
{
	struct dbiter *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	if (lower && dup_bytes(lower, lower_len, &d->lower))
		goto fail;
	d->lower_len = lower_len;
	if (upper && dup_bytes(upper, upper_len, &d->upper))
		goto fail;
	d->upper_len = upper_len;
	d->it = internal;
	d->snap = snap;
	*out = d;
	return 0;
fail:
	free(d->lower);
	free(d);
	return -ENOMEM;
}

void dbiter_free(struct dbiter *d)
{
	if (!d)
		return;
	kv_iter_destroy(d->it);
	free(d->lower);
	free(d->upper);
	free(d->skip);
	free(d);
}

static int save_skip(struct dbiter *d, const void *k, size_t n)
{
	if (MW_GROW(d->skip, d->skip_cap, n, 64))
		return -ENOMEM;
	if (n)
		memcpy(d->skip, k, n);
	d->skip_len = n;
	return 0;
}

/*
 * From the internal position, find the next visible entry.  skipping: the
 * versions of the key in skip[] are to be passed over.
 */
static void find_next(struct dbiter *d, bool skipping)
{
	d->valid = false;
	while (kv_iter_valid(d->it)) {
		size_t kn;
		const void *k = kv_iter_key(d->it, &kn);
		if (kv_iter_seq(d->it) > d->snap) {
			kv_iter_next(d->it); /* newer than the snapshot */
			continue;
		}
		if (skipping && !kv_key_cmp(k, kn, d->skip, d->skip_len)) {
			kv_iter_next(d->it); /* an older version of a key already decided */
			continue;
		}
		if (d->upper && kv_key_cmp(k, kn, d->upper, d->upper_len) >= 0)
			return;
		if (kv_iter_type(d->it) == KV_DELETE) {
			if (save_skip(d, k, kn)) {
				d->err = -ENOMEM;
				return;
			}
			skipping = true;
			kv_iter_next(d->it);
			continue;
		}
		d->valid = true;
		return;
	}
}

void dbiter_seek_first(struct dbiter *d)
{
	if (d->err)
		return;
	if (d->lower)
		kv_iter_seek(d->it, d->lower, d->lower_len);
	else
		kv_iter_seek_first(d->it);
	find_next(d, false);
}

void dbiter_seek(struct dbiter *d, const void *key, size_t klen)
{
	if (d->err)
		return;
	if (d->lower && kv_key_cmp(key, klen, d->lower, d->lower_len) < 0)
		kv_iter_seek(d->it, d->lower, d->lower_len);
	else
		kv_iter_seek(d->it, key, klen);
	find_next(d, false);
}

bool dbiter_valid(const struct dbiter *d)
{
	return d->valid && !d->err;
}

void dbiter_next(struct dbiter *d)
{
	size_t kn;
	if (!dbiter_valid(d))
		return;
	const void *k = kv_iter_key(d->it, &kn);
	if (save_skip(d, k, kn)) {
		d->err = -ENOMEM;
		d->valid = false;
		return;
	}
	kv_iter_next(d->it);
	find_next(d, true);
}

const void *dbiter_key(const struct dbiter *d, size_t *klen)
{
	return kv_iter_key(d->it, klen);
}

enum kv_type dbiter_type(const struct dbiter *d)
{
	return kv_iter_type(d->it);
}

const void *dbiter_value(const struct dbiter *d, size_t *vlen)
{
	return kv_iter_value(d->it, vlen);
}

uint64_t dbiter_seq(const struct dbiter *d)
{
	return kv_iter_seq(d->it);
}

int dbiter_status(const struct dbiter *d)
{
	if (d->err)
		return d->err;
	return kv_iter_status(d->it);
}
