/*
 * storeopt.h - the store options every subcommand accepts (mount, objects,
 * stats, bench), parsed in one place so that they mean the same everywhere:
 *
 *   --endpoint URL        S3 endpoint (http://127.0.0.1:7480); default: AWS from the region
 *   --region R            S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, us-east-1)
 *   --profile NAME        AWS profile (default: AWS_PROFILE or "default"; see s3/creds.h)
 *   --sts-endpoint URL    STS for role credentials (default: AWS_ENDPOINT_URL_STS, --endpoint)
 *   --ca-file PATH        CA bundle for https (default: AWS_CA_BUNDLE, then the system's)
 *   --path-style          path-style addressing (the default with --endpoint)
 *   --virtual-hosted      virtual-hosted addressing
 *   --signed-payload      hash every body even over https or to a loopback endpoint
 *   --unsigned-payload    accepted (UNSIGNED-PAYLOAD is the default where it is safe)
 *   --conditional yes|no|probe   whether the backend honours If-None-Match: * (default probe)
 *   --connections N       keep-alive connections (default 16)
 *
 * Credentials come from the AWS credential chain (s3/creds.h: environment,
 * web identity, profiles, container, instance metadata), never from the
 * command line (so they do not show in ps).
 */
#ifndef MEMWALFS_STOREOPT_H
#define MEMWALFS_STOREOPT_H

#include <stdio.h>

#include "store.h"

/*
 * Try to consume the store option at argv[*i] (and its value).  Returns 1
 * if consumed (*i advanced past it), 0 if argv[*i] is not a store option,
 * -1 after printing an error for a bad value.  The strings stored in *o
 * point into argv.
 */
int storeopt_parse(struct s3_opts *o, int argc, char **argv, int *i);

/*
 * Why a store did not open, for people: strerror(-rc), or a plainer text
 * for the errors store_open_*() gives an unreachable endpoint
 * (-ECONNREFUSED, -EHOSTUNREACH) and a missing store (-ENOENT).
 */
const char *storeopt_strerror(int rc);

/*
 * store_open_url_flags() for a command (cmd: "mount", "objects", ...): on
 * failure prints one line, "memwalfs CMD: cannot open store URL: why", where
 * why is the first error the store layer logged (captured, not printed
 * separately: util/log.h) or storeopt_strerror(rc).  Returns 0 or rc.
 */
int storeopt_open(const char *url, const struct s3_opts *o, int flags, const char *cmd,
                  struct store **st);

/* Print the option list above (for --help). */
void storeopt_usage(FILE *f);

#endif /* MEMWALFS_STOREOPT_H */
