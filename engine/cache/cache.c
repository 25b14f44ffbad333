/*
 * cache.c - sharded LRU cache with reference-counted handles (cache.h),
 * after LevelDB's util/cache.cc.
 *
 * Sixteen shards (one when the budget is below 16 MiB, so that a small cache
 * evicts in exact LRU order, and one for cache_new_exact()), chosen by the top bits of the key's
 * xxhash; each shard has a mutex, a chained hash table and two circular lists:
 *
 *   lru     entries in the cache that no client holds (refs == 1), oldest
 *           first: the eviction candidates;
 *   in_use  entries in the cache that some client holds (refs >= 2).
 *
 * An entry in the cache holds one reference for the cache itself (in_cache
 * is true); each handle holds one more.  An entry leaves the cache (erase,
 * replacement, eviction) by leaving the table and its list and dropping the
 * cache's reference; it is freed, deleter first, when its count reaches 0,
 * which is at once for an unheld entry and at the last release otherwise.
 * usage counts the charge of every entry not yet freed, held erased entries
 * included, so the budget is honest about memory.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "cache.h"

#define SHARD_BITS 4
#define NSHARDS (1u << SHARD_BITS)
/* Below this budget one shard is used, so small caches evict in exact LRU order. */
#define SHARDED_MIN (16u << 20)

struct cache_handle {
	struct cache_handle *hnext; /* next in the hash chain */
	struct cache_handle *prev;  /* neighbours in lru or in_use */
	struct cache_handle *next;
	void *value;              /* owned; given to deleter at the end */
	cache_deleter_fn deleter; /* may be NULL */
	size_t charge;            /* counted in usage until freed */
	uint64_t hash;            /* xxhash of the key */
	uint32_t refs;            /* cache's (if in_cache) + handles' */
	bool in_cache;            /* in the table and one of the lists */
	size_t klen;
	uint8_t key[]; /* copy of the key */
};

struct shard {
	pthread_mutex_t mu;
	/* everything below protected by mu */
	size_t capacity;             /* this shard's share of the budget */
	size_t usage;                /* charge of entries not yet freed */
	struct cache_handle lru;     /* list head: refs == 1, oldest at lru.next */
	struct cache_handle in_use;  /* list head: refs >= 2 */
	struct cache_handle **table; /* hash buckets */
	size_t buckets;              /* power of two */
	size_t elems;                /* entries in table */
	uint64_t hits, misses, inserts, evictions;
};

struct cache {
	struct shard shards[NSHARDS];
	unsigned nbits;  /* shards in use: 1 << nbits (0 or SHARD_BITS) */
	size_t capacity; /* total budget, constant */
};

/* ---- lists and table (shard lock held) -------------------------------- */

static void list_init(struct cache_handle *head)
{
	head->next = head->prev = head;
}

static void list_remove(struct cache_handle *e)
{
	e->next->prev = e->prev;
	e->prev->next = e->next;
}

/* Append e at the newest end of list head. */
static void list_append(struct cache_handle *head, struct cache_handle *e)
{
	e->next = head;
	e->prev = head->prev;
	e->prev->next = e;
	e->next->prev = e;
}

static struct cache_handle **table_find(struct shard *s, const void *key, size_t klen,
                                        uint64_t hash)
{
	struct cache_handle **p = &s->table[hash & (s->buckets - 1)];
	while (*p && ((*p)->hash != hash || (*p)->klen != klen || memcmp((*p)->key, key, klen)))
		p = &(*p)->hnext;
	return p;
}

/* Grow the table when it gets full; on -ENOMEM keep the old one (chains get longer). */
static void table_grow(struct shard *s)
{
	size_t nb = s->buckets * 2;
	struct cache_handle **t = calloc(nb, sizeof(*t));
	if (!t)
		return;
	for (size_t i = 0; i < s->buckets; i++) {
		struct cache_handle *e = s->table[i];
		while (e) {
			struct cache_handle *n = e->hnext;
			struct cache_handle **b = &t[e->hash & (nb - 1)];
			e->hnext = *b;
			*b = e;
			e = n;
		}
	}
	free(s->table);
	s->table = t;
	s->buckets = nb;
}

/* ---- references (shard lock held) -------------------------------------- */

static void ref(struct shard *s, struct cache_handle *e)
{
	if (e->refs == 1 && e->in_cache) { /* leaving lru: now held */
		list_remove(e);
		list_append(&s->in_use, e);
	}
	e->refs++;
}

/*
 * Drop one reference.  Returns e if it must be freed (outside the lock, by
 * free_entry()), else NULL.
 */
static struct cache_handle *unref(struct shard *s, struct cache_handle *e)
{
	e->refs--;
	if (e->refs == 0) {
		s->usage -= e->charge;
		return e;
	}
	if (e->in_cache && e->refs == 1) { /* no longer held: evictable */
		list_remove(e);
		list_append(&s->lru, e);
	}
	return NULL;
}

static void free_entry(struct cache_handle *e)
{
	if (!e)
		return;
	if (e->deleter)
		e->deleter(e->key, e->klen, e->value);
	free(e);
}

/*
 * Take e (found in the table at *p) out of the cache.  Returns what to free
 * (see unref()).
 */
static struct cache_handle *finish_erase(struct shard *s, struct cache_handle **p)
{
	struct cache_handle *e = *p;
	*p = e->hnext;
	s->elems--;
	list_remove(e);
	e->in_cache = false;
	return unref(s, e);
}

/*
 * Evict unheld entries, oldest first, while usage > capacity.  Collects them
 * on *dead (chained through hnext) for freeing outside the lock.
 */
static void evict(struct shard *s, struct cache_handle **dead)
{
	while (s->usage > s->capacity && s->lru.next != &s->lru) {
		struct cache_handle *old = s->lru.next;
		struct cache_handle **p = table_find(s, old->key, old->klen, old->hash);
		struct cache_handle *f = finish_erase(s, p);
		s->evictions++;
		if (f) {
			f->hnext = *dead;
			*dead = f;
		}
	}
}

static void free_list(struct cache_handle *dead)
{
	while (dead) {
		struct cache_handle *n = dead->hnext;
		free_entry(dead);
		dead = n;
	}
}

/* ---- public ------------------------------------------------------------ */

static struct shard *shard_of(struct cache *c, uint64_t hash)
{
	return &c->shards[c->nbits ? hash >> (64 - c->nbits) : 0];
}

static int new_cache(size_t capacity, bool sharded, struct cache **out)
{
	struct cache *c = calloc(1, sizeof(*c));
	size_t i;
	if (!c)
		return -ENOMEM;
	c->capacity = capacity;
	c->nbits = sharded ? SHARD_BITS : 0;
	for (i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shards[i];
		s->capacity = c->nbits ? (capacity + NSHARDS - 1) / NSHARDS : (i ? 0 : capacity);
		s->buckets = 16;
		s->table = calloc(s->buckets, sizeof(*s->table));
		if (!s->table)
			goto fail;
		list_init(&s->lru);
		list_init(&s->in_use);
		pthread_mutex_init(&s->mu, NULL);
	}
	*out = c;
	return 0;
fail:
	while (i-- > 0) {
		free(c->shards[i].table);
		pthread_mutex_destroy(&c->shards[i].mu);
	}
	free(c);
	return -ENOMEM;
}

int cache_new(size_t capacity, struct cache **out)
{
	return new_cache(capacity, capacity >= SHARDED_MIN, out);
}

int cache_new_exact(size_t capacity, struct cache **out)
{
	return new_cache(capacity, false, out);
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shards[i];
		/* every handle released: all entries are on lru with refs == 1 */
		struct cache_handle *e = s->lru.next;
		while (e != &s->lru) {
			struct cache_handle *n = e->next;
			free_entry(e);
			e = n;
		}
		free(s->table);
		pthread_mutex_destroy(&s->mu);
	}
	free(c);
}

int cache_insert(struct cache *c, const void *key, size_t klen, void *value, size_t charge,
                 cache_deleter_fn deleter, struct cache_handle **out)
{
	uint64_t hash = XXH3_64bits(key, klen);
	struct shard *s = shard_of(c, hash);
	struct cache_handle *dead = NULL, *f;
	struct cache_handle *e = malloc(sizeof(*e) + (klen ? klen : 1));
	if (!e)
		return -ENOMEM;
	e->value = value;
	e->deleter = deleter;
	e->charge = charge;
	e->hash = hash;
	e->klen = klen;
	if (klen)
		memcpy(e->key, key, klen);
	e->refs = out ? 2 : 1;
	e->in_cache = false;
	e->hnext = NULL;

	pthread_mutex_lock(&s->mu);
	s->usage += charge;
	s->inserts++;
	if (s->capacity > 0) {
		struct cache_handle **p = table_find(s, key, klen, hash);
		if (*p) {
			f = finish_erase(s, p); /* replaced */
			if (f) {
				f->hnext = dead;
				dead = f;
			}
			p = table_find(s, key, klen, hash);
		}
		e->in_cache = true;
		e->hnext = NULL;
		*p = e;
		s->elems++;
		list_append(out ? &s->in_use : &s->lru, e);
		if (s->elems > s->buckets)
			table_grow(s);
	} else {
		/* caching disabled: the entry lives only as long as the handle */
		e->refs--;
		if (e->refs == 0) {
			s->usage -= charge;
			e->hnext = dead;
			dead = e;
		}
	}
	evict(s, &dead);
	pthread_mutex_unlock(&s->mu);
	free_list(dead);
	if (out)
		*out = e;
	return 0;
}

struct cache_handle *cache_lookup(struct cache *c, const void *key, size_t klen)
{
	uint64_t hash = XXH3_64bits(key, klen);
	struct shard *s = shard_of(c, hash);
	pthread_mutex_lock(&s->mu);
	struct cache_handle *e = *table_find(s, key, klen, hash);
	if (e) {
		ref(s, e);
		list_remove(e); /* most recently used: newest end of in_use */
		list_append(&s->in_use, e);
		s->hits++;
	} else {
		s->misses++;
	}
	pthread_mutex_unlock(&s->mu);
	return e;
}

void cache_release(struct cache *c, struct cache_handle *h)
{
	if (!h)
		return;
	struct shard *s = shard_of(c, h->hash);
	struct cache_handle *dead = NULL;
	pthread_mutex_lock(&s->mu);
	struct cache_handle *f = unref(s, h);
	if (f) {
		f->hnext = dead;
		dead = f;
	}
	evict(s, &dead); /* usage may have been above capacity while held */
	pthread_mutex_unlock(&s->mu);
	free_list(dead);
}

void *cache_value(const struct cache_handle *h)
{
	return h->value;
}

size_t cache_charge(const struct cache_handle *h)
{
	return h->charge;
}

void cache_erase(struct cache *c, const void *key, size_t klen)
{
	uint64_t hash = XXH3_64bits(key, klen);
	struct shard *s = shard_of(c, hash);
	struct cache_handle *f = NULL;
	pthread_mutex_lock(&s->mu);
	struct cache_handle **p = table_find(s, key, klen, hash);
	if (*p)
		f = finish_erase(s, p);
	pthread_mutex_unlock(&s->mu);
	free_entry(f);
}

void cache_prune(struct cache *c)
{
	for (size_t i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shards[i];
		struct cache_handle *dead = NULL;
		pthread_mutex_lock(&s->mu);
		while (s->lru.next != &s->lru) {
			struct cache_handle *e = s->lru.next;
			struct cache_handle *f =
			    finish_erase(s, table_find(s, e->key, e->klen, e->hash));
			if (f) {
				f->hnext = dead;
				dead = f;
			}
		}
		pthread_mutex_unlock(&s->mu);
		free_list(dead);
	}
}

void cache_get_stats(struct cache *c, struct cache_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->capacity = c->capacity;
	for (size_t i = 0; i < NSHARDS; i++) {
		struct shard *s = &c->shards[i];
		pthread_mutex_lock(&s->mu);
		out->hits += s->hits;
		out->misses += s->misses;
		out->inserts += s->inserts;
		out->evictions += s->evictions;
		out->usage += s->usage;
		out->entries += s->elems;
		pthread_mutex_unlock(&s->mu);
	}
}
