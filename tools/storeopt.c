/*
 * storeopt.c - parsing of the store options shared by all subcommands.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "storeopt.h"

static const char *value(int argc, char **argv, int *i, const char *name)
{
	const char *a = argv[*i];
	size_t n = strlen(name);
	if (a[n] == '=') {
		(*i)++;
		return a + n + 1;
	}
	if (*i + 1 >= argc) {
		fprintf(stderr, "memwalfs: %s needs a value\n", name);
		return NULL;
	}
	*i += 2;
	return argv[*i - 1];
}

static int is(const char *a, const char *name)
{
	size_t n = strlen(name);
	return !strncmp(a, name, n) && (a[n] == '\0' || a[n] == '=');
}

int storeopt_parse(struct s3_opts *o, int argc, char **argv, int *i)
{
	const char *a = argv[*i], *v;
	static const char *const str_opts[] = {"--endpoint", "--region", "--profile", "--ca-file",
	                                       "--sts-endpoint"};
	const char **dst[] = {&o->endpoint, &o->region, &o->profile, &o->ca_file, &o->sts_url};

	for (size_t k = 0; k < sizeof(str_opts) / sizeof(str_opts[0]); k++) {
		if (is(a, str_opts[k])) {
			if (!(v = value(argc, argv, i, str_opts[k])))
				return -1;
			*dst[k] = v;
			if (k == 0)
				o->path_style = !o->virtual_hosted;
			return 1;
		}
	}
	if (!strcmp(a, "--path-style") || !strcmp(a, "--virtual-hosted") ||
	    !strcmp(a, "--unsigned-payload") || !strcmp(a, "--signed-payload")) {
		if (a[2] == 'p') {
			o->path_style = true;
			o->virtual_hosted = false;
		} else if (a[2] == 'v') {
			o->virtual_hosted = true;
			o->path_style = false;
		} else if (a[2] == 'u') {
			o->unsigned_payload = true;
		} else {
			o->signed_payload = true;
		}
		(*i)++;
		return 1;
	}
	if (is(a, "--conditional")) {
		if (!(v = value(argc, argv, i, "--conditional")))
			return -1;
		if (!strcmp(v, "yes"))
			o->conditional_create = 1;
		else if (!strcmp(v, "no"))
			o->conditional_create = 0;
		else if (!strcmp(v, "probe"))
			o->conditional_create = -1;
		else {
			fprintf(stderr, "memwalfs: --conditional takes yes, no or probe\n");
			return -1;
		}
		return 1;
	}
	if (is(a, "--connections")) {
		if (!(v = value(argc, argv, i, "--connections")))
			return -1;
		char *end;
		long n = strtol(v, &end, 10);
		if (*end || n < 1 || n > 1024) {
			fprintf(stderr, "memwalfs: --connections takes 1..1024\n");
			return -1;
		}
		o->connections = (unsigned)n;
		return 1;
	}
	return 0;
}

const char *storeopt_strerror(int rc)
{
	switch (rc) {
	case -ECONNREFUSED:
		return "nothing answers at the endpoint (connection refused)";
	case -EHOSTUNREACH:
		return "the endpoint's host name does not resolve";
	case -ENOENT:
		return "no such store (No such file or directory)";
	default:
		return strerror(-rc);
	}
}

int storeopt_open(const char *url, const struct s3_opts *o, int flags, const char *cmd,
                  struct store **st)
{
	mw_log_capture_begin();
	int rc = store_open_url_flags(url, o, flags, st);
	const char *why = mw_log_capture_end();
	if (!rc)
		return 0;
	bool plain = rc == -ENOENT || !why[0]; /* storeopt_strerror() says it all */
	bool known = rc == -ECONNREFUSED || rc == -EHOSTUNREACH;
	fprintf(stderr, "memwalfs %s: cannot open store %s: %s%s%s\n", cmd, url,
	        plain || known ? storeopt_strerror(rc) : why, known && !plain ? "; " : "",
	        known && !plain ? why : "");
	return rc;
}

void storeopt_usage(FILE *f)
{
	fprintf(
	    f,
	    "store options (for s3://bucket/prefix stores):\n"
	    "  --endpoint URL       S3 endpoint, e.g. http://127.0.0.1:7480 (default: AWS)\n"
	    "  --region R           region (default: AWS_REGION or us-east-1)\n"
	    "  --profile NAME       use profile NAME of ~/.aws/config and ~/.aws/credentials\n"
	    "                       and skip the keys in the environment (without it: the\n"
	    "                       profile AWS_PROFILE names, else \"default\", comes third)\n"
	    "  --sts-endpoint URL   STS for role credentials (default: AWS_ENDPOINT_URL_STS,\n"
	    "                       else the --endpoint, else AWS)\n"
	    "  --ca-file PATH       CA bundle for https (default: AWS_CA_BUNDLE, system)\n"
	    "  --path-style         path-style addressing (default with --endpoint)\n"
	    "  --virtual-hosted     virtual-hosted addressing\n"
	    "  --signed-payload     hash every body (SigV4 payload signing) even over https\n"
	    "                       or to a loopback endpoint, where UNSIGNED-PAYLOAD is\n"
	    "                       the default\n"
	    "  --unsigned-payload   accepted for compatibility: the default where it is safe\n"
	    "  --conditional yes|no|probe  backend honours If-None-Match: * (default probe)\n"
	    "  --connections N      keep-alive connections (default 16)\n"
	    "credentials: the AWS chain, in order: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,\n"
	    "AWS_SESSION_TOKEN (not with --profile); web identity (AWS_WEB_IDENTITY_TOKEN_FILE,\n"
	    "AWS_ROLE_ARN); the profile (--profile, AWS_PROFILE, else \"default\") in\n"
	    "~/.aws/config and ~/.aws/credentials (keys, role_arn with\n"
	    "source_profile, credential_process); container credentials; EC2 instance\n"
	    "metadata.  Temporary credentials are refreshed before they expire.  Never on\n"
	    "the command line.\n");
}
