/*
 * open.c - store_open_url(): open a store named by a URL.
 *
 *   s3://bucket            the S3 store on bucket, no prefix
 *   s3://bucket/fs1/       ... with key prefix "fs1/"
 *   /path, ./path, path    the local-directory store (file:///path also)
 *
 * The remaining S3 options (endpoint, region, credentials, ...) come from
 * *base when given, else from s3_opts_default().  The STORE_OPEN_* flags
 * (store.h) reach both backends.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"
#include "store_impl.h"

int store_open_url(const char *url, const struct s3_opts *base, struct store **out)
{
	return store_open_url_flags(url, base, 0, out);
}

int store_open_url_flags(const char *url, const struct s3_opts *base, int flags, struct store **out)
{
	struct s3_opts o;
	char *bucket = NULL;
	const char *rest, *slash;
	int rc;

	if (!url || !*url || !out)
		return -EINVAL;
	if (!strncmp(url, "file://", 7))
		return store_open_local_flags(url + 7, flags, out);
	if (strncmp(url, "s3://", 5)) {
		if (strstr(url, "://")) {
			log_err("store: %s: unknown URL scheme (use s3:// or a directory path)",
			        url);
			return -EINVAL;
		}
		return store_open_local_flags(url, flags, out);
	}
	if (flags & ~(STORE_OPEN_EXISTING | STORE_OPEN_READ_ONLY))
		return -EINVAL;
	rest = url + 5;
	slash = strchr(rest, '/');
	bucket = slash ? strndup(rest, (size_t)(slash - rest)) : strdup(rest);
	if (!bucket)
		return -ENOMEM;
	if (!*bucket) {
		log_err("store: %s: no bucket name", url);
		rc = -EINVAL;
		goto out;
	}
	if (base)
		o = *base;
	else
		s3_opts_default(&o);
	o.bucket = bucket;
	o.prefix = slash && slash[1] ? slash + 1 : NULL;
	if ((flags & STORE_OPEN_READ_ONLY) && o.conditional_create < 0)
		o.conditional_create = 0; /* the probe writes (and deletes) an object */
	rc = store_open_s3(&o, out);
	if (rc == 0)
		(*out)->read_only = flags & STORE_OPEN_READ_ONLY;
out:
	free(bucket);
	return rc;
}
