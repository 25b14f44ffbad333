/*
 * s3_writer.c - the S3 streaming writer (multipart upload with parallel
 * parts) and the cleanup of abandoned uploads.
 *
 * Bytes are gathered into a part buffer of s->part_size.  When it is full
 * and more bytes arrive, the multipart upload is initiated (once) and the
 * full buffer is handed to a detached worker thread that PUTs it as the
 * next part while the caller keeps writing into a fresh buffer.  At most
 * s->part_parallel parts are in flight: the writer blocks beyond that, so
 * memory stays within (part_parallel + 1) * part_size.  finish() sends the
 * last (possibly short) part, waits for all, and completes with the part
 * list; any failure aborts the upload so no parts are left behind.  An
 * object that never filled one part is sent as a single PUT instead.
 * With STORE_W_STABLE (the caller's bytes stay put until finish or abort
 * returns: a sealed pack) a write that starts a part and fills it is sent
 * from the caller's memory, with no copy into a part buffer.
 *
 * Concurrency: w->mu protects inflight, err and etags; the worker threads
 * touch w only under w->mu, and the writer is freed only after inflight
 * has dropped to 0 (the worker's last access is its unlock).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "s3_int.h"
#include "xml.h"

struct s3_writer {
	struct store_writer base; /* must be first */
	struct s3 *s;             /* the store */
	char *key;                /* user key (for the single-PUT path) */
	char *fkey;               /* full object key */
	char *upload_id;          /* NULL until the first part goes */
	char *buf;                /* current part buffer, part_size bytes */
	size_t len;               /* bytes in buf */
	unsigned nparts;          /* parts dispatched so far */
	uint64_t total;           /* bytes written so far */
	bool stable;              /* STORE_W_STABLE: whole parts go from the caller's memory */
	pthread_mutex_t mu;       /* protects the fields below */
	pthread_cond_t cv;        /* signalled when a part finishes */
	unsigned inflight;        /* parts being uploaded (by mu) */
	int err;                  /* first failure, sticky (by mu) */
	char **etags;             /* etags[i]: ETag of part i + 1 (by mu) */
	size_t etags_cap;         /* entries allocated (by mu) */
};

/* One part handed to a worker; the worker frees buf when it owns it. */
struct part_job {
	struct s3_writer *w;
	unsigned num; /* 1-based part number */
	const char *buf;
	size_t len;
	bool owned; /* buf is a part buffer (else the caller's STORE_W_STABLE memory) */
};

static int upload_part(struct s3_writer *w, unsigned num, const char *buf, size_t len, char **etag)
{
	struct s3 *s = w->s;
	char pn[16];
	struct s3_result res;
	int rc;

	snprintf(pn, sizeof(pn), "%u", num);
	struct sigv4_param q[] = {{"partNumber", pn}, {"uploadId", w->upload_id}};
	struct s3_call c = {.op = STORE_OP_MPU,
	                    .method = "PUT",
	                    .okey = w->fkey,
	                    .query = q,
	                    .nquery = 2,
	                    .body = buf,
	                    .len = len};
	rc = s3_call(s, &c, &res);
	if (rc == 0 && res.r.status == 200 && res.r.etag[0]) {
		*etag = strdup(res.r.etag);
		rc = *etag ? 0 : -ENOMEM;
	} else if (rc == 0 && res.r.status == 200) {
		log_err("s3: PUT part %u of %s: no ETag in the response", num, w->fkey);
		rc = -EIO;
	} else {
		rc = s3_fail(s, "PUT part", w->fkey, &res, rc);
		if (rc == -ENOENT)
			rc = -EIO; /* the upload vanished */
	}
	s3_result_free(&res);
	return rc;
}

static void part_done(struct s3_writer *w, unsigned num, int rc, char *etag)
{
	pthread_mutex_lock(&w->mu);
	if (rc == 0)
		w->etags[num - 1] = etag;
	else if (!w->err)
		w->err = rc;
	w->inflight--;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

static void *part_worker(void *arg)
{
	struct part_job *j = arg;
	char *etag = NULL;
	int rc = upload_part(j->w, j->num, j->buf, j->len, &etag);
	if (j->owned)
		free((char *)j->buf);
	part_done(j->w, j->num, rc, etag);
	free(j);
	return NULL;
}

static int initiate(struct s3_writer *w)
{
	struct s3 *s = w->s;
	struct sigv4_param q[] = {{"uploads", ""}};
	struct s3_call c = {
	    .op = STORE_OP_MPU, .method = "POST", .okey = w->fkey, .query = q, .nquery = 1};
	struct s3_result res;
	int rc = s3_call(s, &c, &res);
	if (rc == 0 && res.r.status == 200) {
		if (xml_parse_initiate(res.r.body, res.r.len, &w->upload_id)) {
			log_err("s3: POST(initiate upload) %s: malformed response", w->fkey);
			rc = -EIO;
		}
	} else {
		rc = s3_fail(s, "POST(initiate upload)", w->fkey, &res, rc);
	}
	s3_result_free(&res);
	return rc;
}

/*
 * Hand buf[0, len) to a worker as the next part (owned: the worker frees it;
 * on failure it stays the caller's).
 */
static int send_part(struct s3_writer *w, const char *buf, size_t len, bool owned)
{
	struct part_job *j;
	pthread_t th;
	pthread_attr_t attr;
	int rc;

	if (!w->upload_id && (rc = initiate(w)) < 0)
		return rc;
	if (!(j = malloc(sizeof(*j))))
		return -ENOMEM;
	pthread_mutex_lock(&w->mu);
	while (w->inflight >= w->s->part_parallel && !w->err)
		pthread_cond_wait(&w->cv, &w->mu);
	rc = w->err;
	if (!rc && w->nparts + 1 > w->etags_cap) {
		size_t cap = w->etags_cap ? 2 * w->etags_cap : 16;
		char **e = realloc(w->etags, cap * sizeof(*e));
		if (!e) {
			rc = -ENOMEM;
		} else {
			memset(e + w->etags_cap, 0, (cap - w->etags_cap) * sizeof(*e));
			w->etags = e;
			w->etags_cap = cap;
		}
	}
	if (rc) {
		pthread_mutex_unlock(&w->mu);
		free(j);
		return rc;
	}
	if (w->nparts >= 10000) {
		pthread_mutex_unlock(&w->mu);
		log_err("s3: upload %s: more than 10000 parts; raise the part size", w->fkey);
		free(j);
		return -EFBIG;
	}
	w->inflight++;
	pthread_mutex_unlock(&w->mu);
	*j = (struct part_job){w, ++w->nparts, buf, len, owned};
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, part_worker, j) != 0)
		part_worker(j); /* no thread: upload it here */
	pthread_attr_destroy(&attr);
	return 0;
}

/* Send the current buffer as the next part; when !last, give w a fresh buffer. */
static int dispatch(struct s3_writer *w, bool last)
{
	char *fresh = NULL;
	if (!last && !(fresh = malloc(w->s->part_size)))
		return -ENOMEM;
	int rc = send_part(w, w->buf, w->len, true);
	if (rc) {
		free(fresh);
		return rc;
	}
	w->buf = fresh;
	w->len = 0;
	return 0;
}

static int wait_parts(struct s3_writer *w)
{
	int rc;
	pthread_mutex_lock(&w->mu);
	while (w->inflight)
		pthread_cond_wait(&w->cv, &w->mu);
	rc = w->err;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

static void abort_upload(struct s3 *s, const char *fkey, const char *upload_id)
{
	struct sigv4_param q[] = {{"uploadId", upload_id}};
	struct s3_call c = {
	    .op = STORE_OP_MPU, .method = "DELETE", .okey = fkey, .query = q, .nquery = 1};
	struct s3_result res;
	int rc = s3_call(s, &c, &res);
	if (!(rc == 0 && (res.r.status == 204 || res.r.status == 200 || res.r.status == 404)))
		s3_fail(s, "DELETE(abort upload)", fkey, &res, rc);
	s3_result_free(&res);
}

static void writer_free(struct s3_writer *w)
{
	for (size_t i = 0; i < w->etags_cap; i++)
		free(w->etags[i]);
	free(w->etags);
	free(w->buf);
	free(w->upload_id);
	free(w->key);
	free(w->fkey);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}

static int w_write(struct store_writer *bw, const void *buf, size_t len)
{
	struct s3_writer *w = (struct s3_writer *)bw;
	const char *p = buf;
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = w->err;
	pthread_mutex_unlock(&w->mu);
	if (rc)
		return rc;
	while (len) {
		if (w->len == w->s->part_size)
			rc = dispatch(w, false);
		else if (w->stable && w->len == 0 && len >= w->s->part_size &&
		         (rc = send_part(w, p, w->s->part_size, false)) == 0) {
			w->total += w->s->part_size; /* a whole part from the caller's memory */
			p += w->s->part_size;
			len -= w->s->part_size;
			continue;
		}
		if (rc < 0) {
			pthread_mutex_lock(&w->mu);
			if (!w->err)
				w->err = rc;
			pthread_mutex_unlock(&w->mu);
			return rc;
		}
		size_t n = w->s->part_size - w->len;
		if (n > len)
			n = len;
		memcpy(w->buf + w->len, p, n);
		w->len += n;
		w->total += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int complete(struct s3_writer *w)
{
	struct s3 *s = w->s;
	struct sigv4_param q[] = {{"uploadId", w->upload_id}};
	struct s3_result res;
	char code[64], msg[200];
	size_t cap = 128 + (size_t)w->nparts * 120, len;
	char *body = malloc(cap);
	int rc;

	if (!body)
		return -ENOMEM;
	len = (size_t)snprintf(body, cap, "<CompleteMultipartUpload>");
	for (unsigned i = 0; i < w->nparts; i++)
		len += (size_t)snprintf(
		    body + len, cap - len,
		    "<Part><PartNumber>%u</PartNumber><ETag>\"%.72s\"</ETag></Part>", i + 1,
		    w->etags[i]);
	len += (size_t)snprintf(body + len, cap - len, "</CompleteMultipartUpload>");
	struct sigv4_header h[] = {{"content-type", "application/xml"}};
	struct s3_call c = {.op = STORE_OP_MPU,
	                    .method = "POST",
	                    .okey = w->fkey,
	                    .query = q,
	                    .nquery = 1,
	                    .headers = h,
	                    .nheaders = 1,
	                    .body = body,
	                    .len = len};
	rc = s3_call(s, &c, &res);
	if (rc == 0 && res.r.status == 200) {
		rc =
		    xml_parse_complete(res.r.body, res.r.len, code, sizeof(code), msg, sizeof(msg));
		if (rc == -EIO)
			log_err("s3: POST(complete upload) %s: HTTP 200 with error %s: %s", w->fkey,
			        code, msg);
		else if (rc)
			log_err("s3: POST(complete upload) %s: malformed response", w->fkey);
		rc = rc ? -EIO : 0;
	} else if (rc == 0 && res.r.status == 404 && res.ambiguous) {
		/* An earlier attempt may have completed it: check the object. */
		struct store_stat st;
		rc = s->base.ops->head(&s->base, w->key, &st);
		if (rc == 0 && st.size == w->total)
			log_info("s3: complete %s: retried after an attempt that landed", w->fkey);
		else
			rc = s3_fail(s, "POST(complete upload)", w->fkey, &res, 0);
	} else {
		rc = s3_fail(s, "POST(complete upload)", w->fkey, &res, rc);
		if (rc == -ENOENT)
			rc = -EIO;
	}
	s3_result_free(&res);
	free(body);
	return rc;
}

static int w_finish(struct store_writer *bw)
{
	struct s3_writer *w = (struct s3_writer *)bw;
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = w->err;
	pthread_mutex_unlock(&w->mu);
	if (!rc && !w->upload_id) {
		/* Never filled a part: one plain PUT. */
		rc = w->s->base.ops->put(&w->s->base, w->key, w->buf, w->len);
		writer_free(w);
		return rc;
	}
	if (!rc && w->len)
		rc = dispatch(w, true);
	int prc = wait_parts(w);
	if (!rc)
		rc = prc;
	if (!rc)
		rc = complete(w);
	if (rc && w->upload_id)
		abort_upload(w->s, w->fkey, w->upload_id);
	writer_free(w);
	return rc;
}

static void w_abort(struct store_writer *bw)
{
	struct s3_writer *w = (struct s3_writer *)bw;
	pthread_mutex_lock(&w->mu);
	if (!w->err)
		w->err = -ECANCELED;
	pthread_mutex_unlock(&w->mu);
	wait_parts(w);
	if (w->upload_id)
		abort_upload(w->s, w->fkey, w->upload_id);
	writer_free(w);
}

static const struct store_writer_ops s3_writer_ops = {
    .write = w_write,
    .finish = w_finish,
    .abort = w_abort,
};

int s3_writer_open(struct store *st, const char *key, int flags, struct store_writer **out)
{
	struct s3 *s = (struct s3 *)st;
	struct s3_writer *w;

	if (flags & STORE_W_IF_ABSENT)
		return -ENOTSUP; /* caps.conditional_finish is false */
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->stable = flags & STORE_W_STABLE;
	w->base.ops = &s3_writer_ops;
	w->base.store = st;
	w->s = s;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (!(w->key = strdup(key)) || !(w->fkey = s3_full_key(s, key)) ||
	    !(w->buf = malloc(s->part_size))) {
		writer_free(w);
		return -ENOMEM;
	}
	*out = &w->base;
	return 0;
}

/* ---- cleanup of abandoned uploads -------------------------------------- */

int s3_cleanup_uploads(struct store *st, const char *prefix, unsigned older_than_sec, unsigned *n)
{
	struct s3 *s = (struct s3 *)st;
	char *fprefix = s3_full_key(s, prefix), *kmark = NULL, *umark = NULL;
	time_t now = time(NULL);
	int rc = 0;

	*n = 0;
	if (!fprefix)
		return -ENOMEM;
	for (;;) {
		struct sigv4_param q[4];
		size_t nq = 0;
		struct xml_uploads_page pg;
		struct s3_result res;

		q[nq++] = (struct sigv4_param){"uploads", ""};
		q[nq++] = (struct sigv4_param){"prefix", fprefix};
		if (kmark)
			q[nq++] = (struct sigv4_param){"key-marker", kmark};
		if (umark)
			q[nq++] = (struct sigv4_param){"upload-id-marker", umark};
		struct s3_call c = {.op = STORE_OP_LIST, .method = "GET", .query = q, .nquery = nq};
		rc = s3_call(s, &c, &res);
		if (rc != 0 || res.r.status != 200) {
			rc = s3_fail(s, "LIST(uploads)", fprefix, &res, rc);
			s3_result_free(&res);
			break;
		}
		rc = xml_parse_uploads_page(res.r.body, res.r.len, &pg);
		s3_result_free(&res);
		if (rc) {
			log_err("s3: LIST(uploads) %s: malformed response", fprefix);
			xml_uploads_page_free(&pg);
			rc = -EIO;
			break;
		}
		for (size_t i = 0; i < pg.n; i++) {
			struct xml_upload *u = &pg.v[i];
			if (strncmp(u->key, fprefix, strlen(fprefix)))
				continue;
			if ((int64_t)now - u->initiated < (int64_t)older_than_sec)
				continue;
			abort_upload(s, u->key, u->upload_id);
			log_info("s3: aborted abandoned upload of %s (started %lld s ago)", u->key,
			         (long long)((int64_t)now - u->initiated));
			(*n)++;
		}
		bool more = pg.truncated && pg.next_key_marker;
		free(kmark);
		free(umark);
		kmark = more ? pg.next_key_marker : NULL;
		umark = more ? pg.next_upload_id_marker : NULL;
		if (more)
			pg.next_key_marker = pg.next_upload_id_marker = NULL;
		xml_uploads_page_free(&pg);
		if (!more)
			break;
	}
	free(kmark);
	free(umark);
	free(fprefix);
	return rc;
}
