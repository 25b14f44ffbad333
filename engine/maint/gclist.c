/*
 * gclist.c - listings and object ages for GC (gclist.h): one LIST of a prefix into
 * memory, one HEAD for an object's age.  No state: any thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gclist.h"
#include "grow.h"
#include "log.h"
#include "store.h"

static int list_cb(void *arg, const char *key, uint64_t size)
{
	struct gc_listing *l = arg;

	if (l->n == l->cap) { /* names and sizes grow alike, from the same capacity */
		size_t ncap = l->cap, scap = l->cap;

		if (MW_GROW(l->names, ncap, l->n + 1, 64) || MW_GROW(l->sizes, scap, l->n + 1, 64))
			return -ENOMEM;
		l->cap = ncap;
	}
	l->names[l->n] = strdup(key);
	if (!l->names[l->n])
		return -ENOMEM;
	l->sizes[l->n++] = size;
	return 0;
}

void gc_listing_free(struct gc_listing *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->names[i]);
	free(l->names);
	free(l->sizes);
	memset(l, 0, sizeof(*l));
}

int gc_list_prefix(struct store *st, const char *prefix, struct gc_listing *l)
{
	int rc = store_list(st, prefix, NULL, 0, list_cb, l);

	if (rc)
		log_err("gc: listing %s failed: %s", prefix, strerror(-rc));
	return rc;
}

int gc_object_mtime(struct store *st, const char *name, int64_t *mtime)
{
	struct store_stat s;
	int rc = store_head(st, name, &s);

	if (rc) {
		if (rc != -ENOENT)
			log_err("gc: head %s failed: %s", name, strerror(-rc));
		return rc;
	}
	*mtime = s.mtime > 0 ? s.mtime : 0;
	return 0;
}

int gc_object_age(struct store *st, const char *name, int64_t now, int64_t *age)
{
	int64_t mtime = 0;
	int rc = gc_object_mtime(st, name, &mtime);

	if (!rc)
		*age = gc_age_of(mtime, now);
	return rc;
}
