/*
 * ec_s3.c - the S3 backing of the engine's hard tests (engine_check.h):
 * store_open_s3() from S3_ENDPOINT, S3_BUCKET (default memwalfs-test),
 * S3_REGION (default us-east-1), AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * path-style, under the given key prefix.  Linked only into the s3 suite.
 */
#include <stdlib.h>

#include "engine_check.h"
#include "store.h"
#include "testutil.h"

int ec_open_s3(const char *prefix, struct store **out)
{
	struct s3_opts o;

	tu_s3_opts(&o, prefix);
	return store_open_s3(&o, out);
}
