/*
 * watch.h - the store watch (engine/check/watch.c, writers): objects the state
 * needs gone from the store.  struct eng_watch is e->wa, its fields guarded
 * by e->mu; besides watch.c only engine.c (open, close, stats) touches them.
 * writer.c tells the watch what it committed through the calls below; the
 * keylist helpers serve salvage.c too.
 */
#ifndef MEMWALFS_WATCH_H
#define MEMWALFS_WATCH_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "thread.h"

struct engine;
struct store;

/* The store watch (watch.c): e->wa. */
struct eng_watch {
	bool lost;               /* the store lost objects we need: sticky [mu] */
	char lost_what[160];     /* which, in words, once lost [mu] */
	struct mw_thread thread; /* the watch thread; .stop: asked to exit [mu] */
	pthread_cond_t cv;       /* wakes the watch thread [mu] */
	bool kicked;             /* a read or GC asked for a check now [mu] */
	bool dirty;              /* groups were committed since the last check began [mu] */
	uint64_t *packs;         /* positions of our committed group packs [mu] */
	size_t npacks;           /* entries in packs [mu] */
	size_t packs_cap;        /* allocated entries [mu] */
};

/*
 * watch.c: the store lost objects the state needs (what, printf-style, names the
 * first): make the writer sticky -EIO at its durable position, stop GC and the
 * flusher, log it once.  Any thread, without e->mu.
 */
void engine_store_lost(struct engine *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/*
 * watch.c: check now that the store holds what the state needs (docs in watch.c):
 * 0, -EIO once lost (declared), the sticky error, or a listing's error.  Without e->mu.
 */
int watch_check(struct engine *e);
/* watch.c: ask the watch thread for a check now (a read found an object missing). */
void watch_kick(struct engine *e);
/* watch.c: start / stop the watch thread (writers, unless opts.store_check_ms is off). */
int watch_start(struct engine *e);
void watch_stop(struct engine *e);
/* watch.c: a group was acknowledged: the watch checks soon (e->mu held). */
void watch_note_commit_locked(struct engine *e);
/* watch.c: remember that our group at position put a pack (e->mu held).  -ENOMEM. */
int watch_record_pack_locked(struct engine *e, uint64_t position);

/* The names of a listing, in key order (watch.c; salvage.c uses them too). */
struct keylist {
	char **v;      /* names (malloc()ed, each too) */
	size_t n, cap; /* names, allocated */
	size_t max;    /* fetch stops after this many (0: all) */
};
/*
 * List prefix after start_after (NULL: from the start), at most max names (0:
 * all), into *l (keylist_clear() it).  0 or the listing's error (*l empty).
 */
int keylist_fetch(struct store *st, const char *prefix, const char *start_after, size_t max,
                  struct keylist *l);
/* Is name in l (a binary search)? */
bool keylist_has(const struct keylist *l, const char *name);
void keylist_clear(struct keylist *l);

#endif /* MEMWALFS_WATCH_H */
