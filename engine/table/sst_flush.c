/*
 * sst_flush.c - MemTable -> SSTable, and its promotion through the manifest
 * (contract and crash reasoning in sst_flush.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coding.h"
#include "format.h"
#include "log.h"
#include "pack.h"
#include "sst_flush.h"
#include "store.h"

void sst_flush_name(char *buf, uint64_t epoch, uint64_t id)
{
	snprintf(buf, FMT_NAME_MAX, SST_PREFIX "%020" PRIu64 "-%020" PRIu64, epoch, id);
}

int sst_flush_blob_ref(void *arg, const void *desc, size_t dlen, struct sst_pack_ref *ref)
{
	struct blob_desc d;
	int rc = blob_desc_decode(desc, dlen, &d);

	(void)arg;
	if (rc)
		return rc;
	put_be64(ref->id, d.epoch);
	put_be64(ref->id + 8, d.position);
	ref->idlen = 16;
	ref->bytes = d.length;
	return 0;
}

static uint8_t *dup_mem(const void *p, size_t n)
{
	uint8_t *q = malloc(n ? n : 1);

	if (q && n)
		memcpy(q, p, n);
	return q;
}

/*
 * Append value v to the flush pack (made on first use) and add its
 * descriptor to the table instead of the bytes.
 */
static int promote_add(struct sst_builder *b, struct pack **pack, uint64_t epoch, uint64_t id,
                       const void *k, size_t kl, uint64_t seq, const void *v, size_t vl)
{
	uint8_t small[BLOB_DESC_FIXED + 8 * 32];
	size_t dn = blob_desc_size_for(vl);
	uint8_t *desc = dn <= sizeof(small) ? small : malloc(dn);
	int rc;

	if (!desc)
		return -ENOMEM;
	rc = *pack ? 0 : pack_new(epoch, PACK_POS_FLUSH | id, pack);
	if (!rc)
		rc = pack_append(*pack, v, vl, desc);
	if (!rc)
		rc = sst_builder_add(b, k, kl, seq, KV_BLOB, desc, dn);
	if (desc != small)
		free(desc);
	return rc;
}

int sst_flush_build(struct store *st, struct memtable *m, uint64_t epoch, uint64_t id,
                    const struct sst_builder_opts *o, size_t promote_min, struct pack **pack,
                    struct manifest_sst *out)
{
	struct pack *fp = NULL;
	uint64_t fp_bytes = 0;
	struct sst_builder_opts def;
	struct sst_builder *b = NULL;
	struct sst_props p = {0};
	struct kv_iter *it = NULL;
	char name[FMT_NAME_MAX];
	int rc;

	if (memtable_count(m) == 0)
		return -ENODATA;
	if (!o) {
		sst_builder_opts_default(&def);
		def.blob_ref = sst_flush_blob_ref;
		o = &def;
	}
	sst_flush_name(name, epoch, id);
	rc = memtable_iter_new(m, &it);
	if (rc)
		goto out;
	rc = sst_builder_new(st, name, o, &b);
	if (rc)
		goto out;
	for (kv_iter_seek_first(it); kv_iter_valid(it); kv_iter_next(it)) {
		size_t kl, vl;
		const void *k = kv_iter_key(it, &kl), *v = kv_iter_value(it, &vl);

		if (promote_min && kv_iter_type(it) == KV_INLINE && vl >= promote_min)
			rc = promote_add(b, &fp, epoch, id, k, kl, kv_iter_seq(it), v, vl);
		else
			rc = sst_builder_add(b, k, kl, kv_iter_seq(it), kv_iter_type(it), v, vl);
		if (rc)
			goto out;
	}
	rc = kv_iter_status(it);
	if (rc)
		goto out;
	if (fp) {
		/* the pack is durable before the table that refers to it is finished */
		rc = pack_seal(fp);
		if (!rc)
			rc = pack_write(fp, st, &fp_bytes);
		if (rc)
			goto out;
	}
	rc = sst_builder_finish(b, &p);
	b = NULL;
	if (rc)
		goto out;
	memset(out, 0, sizeof(*out));
	out->name = strdup(name);
	out->smallest = p.smallest;
	out->smallest_len = p.smallest_len;
	out->largest = p.largest;
	out->largest_len = p.largest_len;
	p.smallest = p.largest = NULL;
	if (!out->name || !out->smallest || !out->largest) {
		free(out->name);
		free(out->smallest);
		free(out->largest);
		memset(out, 0, sizeof(*out));
		rc = -ENOMEM;
		goto out;
	}
	out->id = id;
	out->size = p.file_size;
	out->level = 0;
	out->seq_min = p.min_seq;
	out->seq_max = p.max_seq;
	log_info("flush: wrote %s: %" PRIu64 " entries, %" PRIu64 " bytes, %" PRIu64
	         " blocks; %" PRIu64 " bytes promoted from the WAL into a pack",
	         name, p.entries, p.file_size, p.data_blocks, fp_bytes);
	if (pack) {
		*pack = fp;
		fp = NULL;
	}
out:
	pack_unref(fp);
	sst_builder_abort(b);
	kv_iter_destroy(it);
	sst_props_free(&p);
	return rc;
}

int sst_flush_promote(struct store *st, bool conditional, const struct manifest *cur,
                      const struct manifest_sst *add, uint64_t wal_covered, struct manifest *next)
{
	struct manifest m = {0};
	struct manifest_sst *ssts, *s;
	int rc;

	rc = manifest_copy(&m, cur);
	if (rc)
		return rc;
	ssts = realloc(m.ssts, (m.nssts + 1) * sizeof(*ssts));
	if (!ssts) {
		rc = -ENOMEM;
		goto fail;
	}
	m.ssts = ssts;
	s = &m.ssts[m.nssts];
	*s = *add;
	s->name = strdup(add->name);
	s->smallest = dup_mem(add->smallest, add->smallest_len);
	s->largest = dup_mem(add->largest, add->largest_len);
	m.nssts++; /* manifest_clear() frees what was copied, even on failure */
	if (!s->name || !s->smallest || !s->largest) {
		rc = -ENOMEM;
		goto fail;
	}
	m.version = cur->version + 1;
	if (wal_covered > m.wal_covered)
		m.wal_covered = wal_covered;
	if (add->seq_max > m.last_seq)
		m.last_seq = add->seq_max;
	if (add->id + 1 > m.next_sst)
		m.next_sst = add->id + 1;
	rc = manifest_commit_ours(st, &m, conditional);
	if (rc == -EEXIST) {
		/*
		 * A newer writer took the version, or an earlier commit of ours
		 * whose outcome was unknown landed late: either way we stop.  The
		 * table is this attempt's alone (a fresh name), so deleting it
		 * cannot touch what the existing version references.
		 */
		log_warn(
		    "flush: manifest version %" PRIu64 " already exists (a newer writer, or "
		    "a late landing of an earlier attempt): stopping; deleting unreferenced %s",
		    m.version, add->name);
		store_delete(st, add->name);
		rc = -ESTALE;
	}
	if (rc)
		goto fail;
	*next = m;
	return 0;
fail:
	manifest_clear(&m);
	return rc;
}
