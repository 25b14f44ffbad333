/*
 * salvage.c - open a writer over what remains of a damaged store
 * (opts.salvage; `memwalfs fsck --salvage`; README.md "When the store lost
 * objects", docs/DESIGN.md).
 *
 * DESIGN
 *
 * A store that lost objects (engine/check/watch.c) cannot be opened: a table the
 * manifest lists is missing, or the manifest itself, or a WAL position inside
 * the replayed range.  Salvage makes a NEW consistent state out of what
 * remains, in the same store, without deleting or rewriting any existing
 * object (so it can be run again, and nothing it looked at is lost to a
 * second opinion):
 *
 *   1. the newest manifest that still loads (none: an empty one), minus the
 *      tables that are not in the store or do not open (each logged and
 *      counted: salvage_tables_lost, salvage_table_bytes_lost);
 *   2. a new epoch above every epoch the store shows (manifests, table and
 *      pack names, WAL entry headers), claimed as the next manifest version
 *      by put_if_absent (a racing writer fails the salvage with -EEXIST);
 *   3. replay of every WAL entry from that manifest's covered position on,
 *      in position order, across gaps (the missing positions are counted:
 *      salvage_wal_missing) and past entries that do not decode (counted:
 *      salvage_wal_bad); the replay rules otherwise hold (an older epoch after
 *      a newer one is ignored);
 *   4. the fence and the writer start as at any open.  The caller repairs the
 *      layer above (fs/salvage.c: what the tree lost) and closes the engine:
 *      the clean close flushes everything under a manifest that covers the
 *      whole WAL, so the next open replays nothing and finds no gap.
 *
 * Blob values whose pack is gone stay in the state as descriptors; reading
 * one fails (-EUCLEAN), which is how the layer above finds and drops them.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"
#include "engine_int.h"
#include "format.h"
#include "log.h"
#include "replay.h"
#include "sst_flush.h"
#include "store.h"
#include "wal.h"

/* The epoch of a name "<prefix><epoch:20>-..." (0 if it is not one). */
static uint64_t name_epoch(const char *name, const char *prefix)
{
	size_t pl = strlen(prefix);
	uint64_t v = 0;

	if (strncmp(name, prefix, pl) != 0)
		return 0;
	for (const char *p = name + pl; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (uint64_t)(*p - '0');
	return v;
}

/* The highest epoch among the WAL entries at or after from (their headers). */
static int wal_max_epoch(struct engine *e, uint64_t from, uint64_t *max)
{
	struct poslist pl = {0};
	char name[FMT_NAME_MAX];
	int rc = store_list(e->st, FMT_WAL_PREFIX, NULL, 0, replay_list_wal, &pl);

	for (size_t i = 0; !rc && i < pl.n; i++) {
		uint8_t head[WAL_HEADER_SIZE];
		size_t got = 0;
		if (pl.v[i] < from)
			continue;
		fmt_wal_name(name, pl.v[i]);
		int g = store_get_into(e->st, name, 0, sizeof(head), head, &got);
		if (g == -ENOENT || (g == 0 && got < WAL_OFF_EPOCH + 8))
			continue; /* gone since the listing, or too short to be read: replay says */
		if (g) {
			rc = g;
			break;
		}
		uint64_t ep = get_be64(head + WAL_OFF_EPOCH); /* unchecked: an upper bound */
		if (ep > *max)
			*max = ep;
	}
	free(pl.v);
	return rc;
}

int salvage_claim(struct engine *e)
{
	struct keylist ssts = {0}, packs = {0};
	struct manifest m = {0};
	uint64_t latest = 0, max_epoch = 0;
	int rc;

	rc = manifest_find_latest(e->st, &latest);
	if (rc)
		goto out;
	/* the newest manifest that still loads */
	for (uint64_t v = latest; v >= 1; v--) {
		rc = manifest_load(e->st, v, &m);
		if (rc == 0)
			break;
		log_warn("salvage: manifest %" PRIu64 ": %s; trying the one before", v,
		         strerror(-rc));
		e->stats.salvage_manifests_bad++;
		memset(&m, 0, sizeof(m));
	}
	if (m.version == 0) {
		log_warn("salvage: no manifest loads: starting from an empty one (every table "
		         "is lost; the WAL that remains is replayed from position 0)");
		memset(&m, 0, sizeof(m));
	}
	if ((rc = keylist_fetch(e->st, SST_PREFIX, NULL, 0, &ssts)) ||
	    (rc = keylist_fetch(e->st, FMT_PACK_PREFIX, NULL, 0, &packs)))
		goto out;
	/* 1. its tables that are still there */
	size_t k = 0;
	for (size_t i = 0; i < m.nssts; i++) {
		struct manifest_sst *t = &m.ssts[i];
		if (keylist_has(&ssts, t->name)) {
			m.ssts[k++] = *t;
			continue;
		}
		log_warn("salvage: table %s (%" PRIu64 " bytes) is missing: what only it held "
		         "is lost",
		         t->name, t->size);
		e->stats.salvage_tables_lost++;
		e->stats.salvage_table_bytes_lost += t->size;
		free(t->name);
		free(t->smallest);
		free(t->largest);
	}
	m.nssts = k;
	/* 2. an epoch above every one the store shows */
	for (size_t i = 0; i < ssts.n; i++) {
		uint64_t ep = name_epoch(ssts.v[i], SST_PREFIX);
		if (ep > max_epoch)
			max_epoch = ep;
	}
	for (size_t i = 0; i < packs.n; i++) {
		uint64_t ep = name_epoch(packs.v[i], FMT_PACK_PREFIX);
		if (ep > max_epoch)
			max_epoch = ep;
	}
	rc = wal_max_epoch(e, m.wal_covered, &max_epoch);
	if (rc)
		goto out;
	rc = manifest_claim_at(e->st, e->conditional, &m, latest, max_epoch + 1);
	if (rc) {
		log_err("salvage: claiming manifest %" PRIu64 ": %s%s", latest + 1, strerror(-rc),
		        rc == -EEXIST ? " (another writer is at work on this store: stop it "
		                        "first)"
		                      : "");
		goto out;
	}
	log_info("salvage: manifest %" PRIu64 " (epoch %" PRIu64 ") over %zu tables that "
	         "remain; replaying the WAL from %" PRIu64,
	         m.version, m.epoch, m.nssts, m.wal_covered);
	e->man = m;
	memset(&m, 0, sizeof(m));
	e->epoch = e->man.epoch;
out:
	manifest_clear(&m);
	keylist_clear(&ssts);
	keylist_clear(&packs);
	return rc;
}
