/*
 * test_store_conformance.c - runs the store conformance suite
 * (store_conformance.c) against the store kind named by argv[1]: "local"
 * (suite unit), "fault" (the fault wrapper with nothing armed, suite fault),
 * "s3" (suite s3; SKIP without S3_ENDPOINT), or a sub-prefix view
 * (store_open_sub()) of one of them: "sub-local" (suite unit), "sub-s3"
 * (suite s3; SKIP without S3_ENDPOINT).
 */
#include <stdio.h>
#include <string.h>

#include "store_conformance.h"

int main(int argc, char **argv)
{
	const char *kind = argc > 1 ? argv[1] : "local";

	if (strcmp(kind, "local") && strcmp(kind, "fault") && strcmp(kind, "s3") &&
	    strcmp(kind, "sub-local") && strcmp(kind, "sub-s3")) {
		fprintf(stderr, "usage: %s local|fault|s3|sub-local|sub-s3\n", argv[0]);
		return 2;
	}
	return run_store_conformance(kind);
}
