/*
 * gclist.h - what GC reads of the store besides manifests and tables: listings of a
 * prefix and the ages of objects (engine/maint/gclist.c).  Used by the engine's GC
 * (gc.c) and the GC of the region objects (engine/region/regiongc.c).
 */
#ifndef MEMWALFS_GCLIST_H
#define MEMWALFS_GCLIST_H

#include <stddef.h>
#include <stdint.h>

struct store;

/* The names and sizes under a prefix, in key order (names and sizes malloc()ed). */
struct gc_listing {
	char **names;    /* the keys, whole (the prefix included) */
	uint64_t *sizes; /* their sizes, by the same index */
	size_t n, cap;   /* entries in use, and allocated */
};

/*
 * Append every object of st under prefix to l (zeroed, or a listing to extend).  0, or
 * the store's error (logged with the prefix) / -ENOMEM; l holds what was listed either
 * way: free it with gc_listing_free().
 */
int gc_list_prefix(struct store *st, const char *prefix, struct gc_listing *l);
/* Free l's contents and zero it; accepts a zeroed listing. */
void gc_listing_free(struct gc_listing *l);

/*
 * The store's modification time of name (unix seconds; 0 when the store does not know
 * it), by a HEAD.  0, -ENOENT (gone), or the store's error (logged).
 */
int gc_object_mtime(struct store *st, const char *name, int64_t *mtime);

/* Age in seconds at now of an object modified at mtime; unknown (0) counts as brand new. */
static inline int64_t gc_age_of(int64_t mtime, int64_t now)
{
	return mtime > 0 ? now - mtime : 0;
}

/* gc_object_mtime(), as an age at now (seconds). */
int gc_object_age(struct store *st, const char *name, int64_t now, int64_t *age);

#endif /* MEMWALFS_GCLIST_H */
