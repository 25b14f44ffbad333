/*
 * test_creds.c - the AWS credential chain without a network (s3/creds*.c,
 * s3/profile.c, s3/json.c): the JSON reader, ISO 8601 times, the JSON
 * documents of credential_process / container / IMDS, STS answers (AWS's
 * documented AssumeRole and AssumeRoleWithWebIdentity responses, RGW's bare
 * <Error>), the INI rules of ~/.aws/config and ~/.aws/credentials, the
 * container URL rules, the refresh schedule, and the chain itself: options,
 * environment, explicit profiles, static profile keys, misconfigurations,
 * credential_process (with temp scripts) including a refresh of expiring
 * keys and a failing refresh that keeps the old keys.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "creds_int.h"
#include "json.h"
#include "profile.h"

static char dir[64];

/* ---- JSON -------------------------------------------------------------- */

struct seen {
	char names[8][32];
	char values[8][64];
	enum json_kind kinds[8];
	int n;
};

static int collect(void *arg, const char *name, const char *value, size_t len, enum json_kind k)
{
	struct seen *s = arg;
	(void)len;
	if (s->n < 8) {
		snprintf(s->names[s->n], 32, "%s", name);
		snprintf(s->values[s->n], 64, "%s", value);
		s->kinds[s->n] = k;
		s->n++;
	}
	return 0;
}

static void test_json(void **state)
{
	(void)state;
	struct seen s = {0};
	const char *doc = " {\"a\": \"x\\\"y\\u00e9\\ud83d\\ude00\", \"n\": -1.5e3, \"t\": true,"
	                  " \"o\": {\"deep\": [1, {\"x\": null}]}, \"z\": null}\n";
	assert_int_equal(json_walk_object(doc, strlen(doc), collect, &s), 0);
	assert_int_equal(s.n, 4); /* the nested object is skipped */
	assert_string_equal(s.names[0], "a");
	assert_string_equal(s.values[0], "x\"y\xc3\xa9\xf0\x9f\x98\x80");
	assert_int_equal(s.kinds[0], JSON_STRING);
	assert_string_equal(s.values[1], "-1.5e3");
	assert_int_equal(s.kinds[1], JSON_NUMBER);
	assert_string_equal(s.values[2], "true");
	assert_int_equal(s.kinds[3], JSON_LITERAL);
	assert_int_equal(json_walk_object("{}", 2, collect, &s), 0);

	static const char *const bad[] = {
	    "",
	    "[]",
	    "{",
	    "{\"a\"}",
	    "{\"a\":}",
	    "{\"a\":1,}",
	    "{\"a\":1} x",
	    "{\"a\":01}",
	    "{\"a\":1.}",
	    "{\"a\":\"\\x\"}",
	    "{\"a\":\"\x01\"}",
	    "{\"a\":\"\\ud800\"}",
	    "{\"a\":\"\\u0000\"}",
	    "{\"a\":tru}",
	    "{\"a\":\"unterminated}",
	    "{'a':1}",
	    "{\"a\":[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&s, 0, sizeof(s));
		int rc = json_walk_object(bad[i], strlen(bad[i]), collect, &s);
		if (rc != -EBADMSG)
			fail_msg("accepted bad JSON #%zu: %s", i, bad[i]);
	}
	/* a truncated document never reads past n */
	for (size_t n = 0; n < strlen(doc) - 1; n++) {
		char *copy = malloc(n ? n : 1);
		memcpy(copy, doc, n);
		memset(&s, 0, sizeof(s));
		assert_int_equal(json_walk_object(copy, n, collect, &s), -EBADMSG);
		free(copy);
	}
}

/* ---- times and documents ----------------------------------------------- */

static void test_time(void **state)
{
	(void)state;
	int64_t t;
	assert_int_equal(creds_parse_time("2026-05-01T12:34:56Z", &t), 0);
	assert_int_equal(t, 1777638896);
	assert_int_equal(creds_parse_time("2026-05-01T12:34:56.789Z", &t), 0);
	assert_int_equal(t, 1777638896);
	assert_int_equal(creds_parse_time("2026-05-01T14:34:56+02:00", &t), 0);
	assert_int_equal(t, 1777638896);
	assert_int_equal(creds_parse_time("2026-05-01T07:34:56-05:00", &t), 0);
	assert_int_equal(t, 1777638896);
	static const char *const bad[] = {"",
	                                  "2026-05-01",
	                                  "2026-05-01T12:34:56",
	                                  "2026-05-01 12:34:56Z",
	                                  "2026-13-01T12:34:56Z",
	                                  "2026-05-01T12:34:56Zjunk",
	                                  "2026-05-01T12:34:56+0200",
	                                  "2026-05-01T12:34:56.Z"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(creds_parse_time(bad[i], &t), -EBADMSG);
}

static void test_json_docs(void **state)
{
	(void)state;
	struct creds_keys *k = NULL;
	char why[128];
	const char *proc = "{\"Version\": 1, \"AccessKeyId\": \"ASIAPROC\", \"SecretAccessKey\": "
	                   "\"s3cr3t\", \"SessionToken\": \"tok\", \"Expiration\": "
	                   "\"2026-05-01T12:34:56Z\"}";
	assert_int_equal(creds_parse_json(proc, strlen(proc), CREDS_JSON_PROCESS, &k, why, 128), 0);
	assert_string_equal(k->access_key, "ASIAPROC");
	assert_string_equal(k->secret_key, "s3cr3t");
	assert_string_equal(k->session_token, "tok");
	assert_int_equal(k->expires, 1777638896);
	creds_keys_put(k);

	const char *v2 = "{\"Version\": 2, \"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}";
	assert_int_equal(creds_parse_json(v2, strlen(v2), CREDS_JSON_PROCESS, &k, why, 128),
	                 -EBADMSG);
	assert_string_equal(why, "Version is not 1");
	const char *nov = "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\"}";
	assert_int_equal(creds_parse_json(nov, strlen(nov), CREDS_JSON_PROCESS, &k, why, 128),
	                 -EBADMSG);
	assert_string_equal(why, "no Version");
	/* the same without Version is a container answer; no Expiration: never expires */
	assert_int_equal(creds_parse_json(nov, strlen(nov), CREDS_JSON_CONTAINER, &k, why, 128), 0);
	assert_int_equal(k->expires, 0);
	assert_null(k->session_token);
	creds_keys_put(k);
	const char *nosec = "{\"Version\": 1, \"AccessKeyId\": \"A\"}";
	assert_int_equal(creds_parse_json(nosec, strlen(nosec), CREDS_JSON_PROCESS, &k, why, 128),
	                 -EBADMSG);
	const char *badexp = "{\"AccessKeyId\": \"A\", \"SecretAccessKey\": \"S\", \"Expiration\": "
	                     "\"tomorrow\"}";
	assert_int_equal(
	    creds_parse_json(badexp, strlen(badexp), CREDS_JSON_CONTAINER, &k, why, 128), -EBADMSG);
	assert_null(strstr(why, "tomorrow")); /* values never go into messages */

	const char *imds = "{\"Code\" : \"Success\", \"LastUpdated\" : \"2026-05-01T11:00:00Z\","
	                   " \"Type\" : \"AWS-HMAC\", \"AccessKeyId\" : \"ASIAIMDS\","
	                   " \"SecretAccessKey\" : \"x\", \"Token\" : \"t\","
	                   " \"Expiration\" : \"2026-05-01T17:00:00Z\"}";
	assert_int_equal(creds_parse_json(imds, strlen(imds), CREDS_JSON_IMDS, &k, why, 128), 0);
	assert_string_equal(k->session_token, "t");
	creds_keys_put(k);
	const char *imdsbad = "{\"Code\": \"AssumeRoleUnauthorizedAccess\", \"AccessKeyId\": \"A\","
	                      " \"SecretAccessKey\": \"S\"}";
	assert_int_equal(creds_parse_json(imdsbad, strlen(imdsbad), CREDS_JSON_IMDS, &k, why, 128),
	                 -EACCES);
}

/* AWS STS API reference, AssumeRole and AssumeRoleWithWebIdentity examples (abridged). */
static const char sts_assume[] =
    "<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
    "<AssumeRoleResult>\n<SourceIdentity>DevUser123</SourceIdentity>\n"
    "<AssumedRoleUser>\n<Arn>arn:aws:sts::123456789012:assumed-role/demo/John</Arn>\n"
    "<AssumedRoleId>ARO123EXAMPLE123:John</AssumedRoleId>\n</AssumedRoleUser>\n"
    "<Credentials>\n<AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>\n"
    "<SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>\n"
    "<SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQW"
    "</SessionToken>\n<Expiration>2019-11-09T13:34:41Z</Expiration>\n</Credentials>\n"
    "<PackedPolicySize>6</PackedPolicySize>\n</AssumeRoleResult>\n"
    "<ResponseMetadata>\n<RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>\n"
    "</ResponseMetadata>\n</AssumeRoleResponse>";
static const char sts_web[] =
    "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
    "<AssumeRoleWithWebIdentityResult>"
    "<SubjectFromWebIdentityToken>amzn1.account.AF6RHO7KZU5XRVQJGXK6HB56KR2A"
    "</SubjectFromWebIdentityToken><Audience>client.5498841531868486423.1548@apps.example.com"
    "</Audience><AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/FederatedWebIdenti"
    "tyRole/app1</Arn><AssumedRoleId>AROACLKWSDQRAOEXAMPLE:app1</AssumedRoleId>"
    "</AssumedRoleUser><Credentials><SessionToken>AQoDYXdzEE0a8ANXXXXXXXXNO1ewxE5TijQyp+IEXAMPLE"
    "</SessionToken><SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"
    "</SecretAccessKey><Expiration>2014-10-24T23:00:23Z</Expiration>"
    "<AccessKeyId>ASgeIAIOSFODNN7EXAMPLE</AccessKeyId></Credentials>"
    "<SourceIdentity>SourceIdentityValue</SourceIdentity><Provider>www.amazon.com</Provider>"
    "</AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-"
    "6b6efEXAMPLE</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>";

static void test_sts(void **state)
{
	(void)state;
	struct creds_keys *k = NULL;
	char code[64], msg[256];
	assert_int_equal(creds_parse_sts(sts_assume, strlen(sts_assume), &k, code, 64, msg, 256),
	                 0);
	assert_string_equal(k->access_key, "ASIAIOSFODNN7EXAMPLE");
	assert_string_equal(k->secret_key, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY");
	assert_string_equal(k->session_token,
	                    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQW");
	assert_int_equal(k->expires, 1573306481);
	creds_keys_put(k);
	assert_int_equal(creds_parse_sts(sts_web, strlen(sts_web), &k, code, 64, msg, 256), 0);
	assert_string_equal(k->access_key, "ASgeIAIOSFODNN7EXAMPLE");
	assert_int_equal(k->expires, 1414191623);
	creds_keys_put(k);

	const char *aws_err = "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">"
	                      "<Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User "
	                      "is not authorized to perform: sts:AssumeRole</Message></Error>"
	                      "<RequestId>x</RequestId></ErrorResponse>";
	assert_int_equal(creds_parse_sts(aws_err, strlen(aws_err), &k, code, 64, msg, 256),
	                 -EACCES);
	assert_string_equal(code, "AccessDenied");
	assert_string_equal(msg, "User is not authorized to perform: sts:AssumeRole");
	const char *rgw_err = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>"
	                      "InvalidIdentityToken</Code><RequestId>tx1</RequestId></Error>";
	assert_int_equal(creds_parse_sts(rgw_err, strlen(rgw_err), &k, code, 64, msg, 256),
	                 -EACCES);
	assert_string_equal(code, "InvalidIdentityToken");
	assert_string_equal(msg, "");

	/* no SessionToken, no Expiration, not XML, truncated */
	const char *partial = "<AssumeRoleResponse><AssumeRoleResult><Credentials><AccessKeyId>A"
	                      "</AccessKeyId><SecretAccessKey>S</SecretAccessKey></Credentials>"
	                      "</AssumeRoleResult></AssumeRoleResponse>";
	assert_int_equal(creds_parse_sts(partial, strlen(partial), &k, code, 64, msg, 256),
	                 -EBADMSG);
	assert_int_equal(creds_parse_sts("{}", 2, &k, code, 64, msg, 256), -EBADMSG);
	assert_int_equal(creds_parse_sts(sts_assume, 200, &k, code, 64, msg, 256), -EBADMSG);
}

/* ---- profiles ---------------------------------------------------------- */

static const char config_text[] = "# comment\n"
                                  "[default]\n"
                                  "region = eu-west-1\n"
                                  "[profile dev]\n"
                                  "Role_Arn = arn:aws:iam::123:role/dev\n"
                                  "source_profile=base\n"
                                  "s3 =\n"
                                  "  max_concurrent_requests = 4\n"
                                  "  region = nested-must-not-count\n"
                                  "[profile   spaced  ]\n"
                                  "aws_access_key_id = FROMCONFIG\n"
                                  "[base]\n" /* not a profile in the config file */
                                  "aws_access_key_id = WRONG\n"
                                  "[sso-session x]\n"
                                  "sso_region = us-east-1\n";
static const char cred_text[] = "[base]\r\n"
                                "aws_access_key_id = AKIABASE\r\n"
                                "  ; an indented comment\r\n"
                                "aws_secret_access_key = base/secret=with=equals\r\n"
                                "[profile dev]\n" /* not profile "dev" in the credentials file */
                                "aws_access_key_id = WRONG\n"
                                "[spaced]\n"
                                "aws_access_key_id = FROMCREDS\n";

static void test_profile_parse(void **state)
{
	(void)state;
	struct profile *p = profile_new();
	assert_int_equal(profile_parse(p, config_text, strlen(config_text), true, "dev"), 1);
	assert_int_equal(profile_parse(p, cred_text, strlen(cred_text), false, "dev"), 0);
	assert_string_equal(profile_get(p, "role_arn"), "arn:aws:iam::123:role/dev");
	assert_string_equal(profile_get(p, "ROLE_ARN"), "arn:aws:iam::123:role/dev");
	assert_string_equal(profile_get(p, "source_profile"), "base");
	assert_null(profile_get(p, "region"));
	assert_null(profile_get(p, "aws_access_key_id"));
	profile_free(p);

	p = profile_new();
	assert_int_equal(profile_parse(p, config_text, strlen(config_text), true, "base"), 0);
	assert_int_equal(profile_parse(p, cred_text, strlen(cred_text), false, "base"), 1);
	assert_string_equal(profile_get(p, "aws_access_key_id"), "AKIABASE");
	assert_string_equal(profile_get(p, "aws_secret_access_key"), "base/secret=with=equals");
	profile_free(p);

	/* the credentials file wins over the config file */
	p = profile_new();
	assert_int_equal(profile_parse(p, config_text, strlen(config_text), true, "spaced"), 1);
	assert_int_equal(profile_parse(p, cred_text, strlen(cred_text), false, "spaced"), 1);
	assert_string_equal(profile_get(p, "aws_access_key_id"), "FROMCREDS");
	profile_free(p);

	p = profile_new();
	assert_int_equal(profile_parse(p, config_text, strlen(config_text), true, "default"), 1);
	assert_string_equal(profile_get(p, "region"), "eu-west-1");
	assert_int_equal(profile_parse(p, config_text, strlen(config_text), true, "x"), 0);
	profile_free(p);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static char *path_in(const char *name)
{
	static char buf[4][128];
	static int i;
	i = (i + 1) % 4;
	snprintf(buf[i], sizeof(buf[i]), "%s/%s", dir, name);
	return buf[i];
}

static void test_profile_load(void **state)
{
	(void)state;
	struct profile *p = NULL;
	write_file(path_in("config"), config_text, 0600);
	write_file(path_in("credentials"), cred_text, 0600);
	assert_int_equal(profile_load(path_in("config"), path_in("credentials"), "base", &p), 0);
	assert_string_equal(profile_get(p, "aws_access_key_id"), "AKIABASE");
	profile_free(p);
	assert_int_equal(profile_load(path_in("config"), path_in("credentials"), "nope", &p),
	                 -ENOENT);
	assert_int_equal(profile_load(path_in("missing"), NULL, "base", &p), -ENOENT);
}

/* ---- small rules ------------------------------------------------------- */

static void test_container_url(void **state)
{
	(void)state;
	char *u = NULL, why[200];
	assert_int_equal(
	    creds_container_url("/v2/credentials/x", "http://evil.example/", &u, why, sizeof(why)),
	    0);
	assert_string_equal(u, "http://169.254.170.2/v2/credentials/x");
	free(u);
	static const char *const ok[] = {"http://127.0.0.1:8080/creds",
	                                 "http://localhost/c",
	                                 "http://169.254.170.23/v1/credentials",
	                                 "http://[fd00:ec2::23]/c",
	                                 "http://[::1]:99/c",
	                                 "https://creds.example.com/c"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(creds_container_url(NULL, ok[i], &u, why, sizeof(why)), 0);
		assert_string_equal(u, ok[i]);
		free(u);
	}
	static const char *const bad[] = {"http://10.0.0.1/c", "http://127.example.com/c",
	                                  "ftp://127.0.0.1/c", "http://user@127.0.0.1/c", ""};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(creds_container_url(NULL, bad[i], &u, why, sizeof(why)), -EINVAL);
	assert_int_equal(creds_container_url("v2/x", NULL, &u, why, sizeof(why)), -EINVAL);
}

static void test_refresh_at(void **state)
{
	(void)state;
	assert_true(creds_refresh_at(1000, 0) == INT64_MAX);
	assert_int_equal(creds_refresh_at(1000, 1000 + 3600), 1000 + 3600 - 300);
	assert_int_equal(creds_refresh_at(1000, 1000 + 900), 1000 + 900 - 300);
	assert_int_equal(creds_refresh_at(1000, 1000 + 6), 1000 + 3);
	assert_int_equal(creds_refresh_at(1000, 990), 990); /* already expired: now */
}

static void test_form(void **state)
{
	(void)state;
	char *b = NULL;
	size_t n = 0;
	assert_int_equal(creds_form_add(&b, &n, "Action", "AssumeRole"), 0);
	assert_int_equal(creds_form_add(&b, &n, "RoleArn", "arn:aws:iam:::role/a b+c"), 0);
	assert_string_equal(b,
	                    "Action=AssumeRole&RoleArn=arn%3Aaws%3Aiam%3A%3A%3Arole%2Fa%20b%2Bc");
	assert_int_equal(n, strlen(b));
	free(b);
}

/* ---- the chain --------------------------------------------------------- */

static const char *const chain_env[] = {"AWS_ACCESS_KEY_ID",
                                        "AWS_SECRET_ACCESS_KEY",
                                        "AWS_SESSION_TOKEN",
                                        "AWS_PROFILE",
                                        "AWS_WEB_IDENTITY_TOKEN_FILE",
                                        "AWS_ROLE_ARN",
                                        "AWS_ROLE_SESSION_NAME",
                                        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                                        "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                                        "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
                                        "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                                        "AWS_ENDPOINT_URL_STS"};

static int clean_env(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(chain_env) / sizeof(chain_env[0]); i++)
		unsetenv(chain_env[i]);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	setenv("AWS_CONFIG_FILE", path_in("config"), 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", path_in("credentials"), 1);
	write_file(path_in("config"), "", 0600);
	write_file(path_in("credentials"), "", 0600);
	return 0;
}

static struct creds_opts base_opts(void)
{
	struct creds_opts o = {.region = "us-east-1", .s3_endpoint = "http://127.0.0.1:1"};
	return o;
}

static void expect_keys(const struct creds_opts *o, const char *ak, const char *sk, const char *tok)
{
	struct creds *c = NULL;
	assert_int_equal(creds_open(o, &c), 0);
	struct creds_keys *k = creds_get(c);
	assert_string_equal(k->access_key, ak);
	assert_string_equal(k->secret_key, sk);
	if (tok)
		assert_string_equal(k->session_token, tok);
	else
		assert_null(k->session_token);
	creds_keys_put(k);
	creds_close(c);
}

static void test_chain_static(void **state)
{
	(void)state;
	struct creds_opts o = base_opts();
	struct creds *c = NULL;

	/* nothing anywhere */
	assert_int_equal(creds_open(&o, &c), -EACCES);
	/* the default profile of the credentials file */
	write_file(path_in("credentials"),
	           "[default]\naws_access_key_id = AKIADEF\naws_secret_access_key = defsecret\n"
	           "[other]\naws_access_key_id = AKIAOTHER\naws_secret_access_key = othersecret\n"
	           "aws_session_token = othertoken\n"
	           "[half]\naws_access_key_id = AKIAHALF\n",
	           0600);
	expect_keys(&o, "AKIADEF", "defsecret", NULL);
	/* the environment comes first */
	setenv("AWS_ACCESS_KEY_ID", "AKIAENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envsecret", 1);
	setenv("AWS_SESSION_TOKEN", "envtoken", 1);
	expect_keys(&o, "AKIAENV", "envsecret", "envtoken");
	/* AWS_PROFILE does not override the environment keys; an explicit profile does */
	setenv("AWS_PROFILE", "other", 1);
	expect_keys(&o, "AKIAENV", "envsecret", "envtoken");
	o.profile = "other";
	expect_keys(&o, "AKIAOTHER", "othersecret", "othertoken");
	/* the options come before everything */
	o.access_key = "AKIAOPT";
	o.secret_key = "optsecret";
	expect_keys(&o, "AKIAOPT", "optsecret", NULL);
	o.secret_key = NULL;
	assert_int_equal(creds_open(&o, &c), -EINVAL);
	o.access_key = NULL;
	/* half a key pair is an error, not a fall-through */
	o.profile = "half";
	assert_int_equal(creds_open(&o, &c), -EINVAL);
	o.profile = NULL;
	unsetenv("AWS_SECRET_ACCESS_KEY");
	assert_int_equal(creds_open(&o, &c), -EINVAL);
	unsetenv("AWS_ACCESS_KEY_ID");
	/* AWS_PROFILE names a profile that must exist */
	setenv("AWS_PROFILE", "nope", 1);
	assert_int_equal(creds_open(&o, &c), -EINVAL);
	setenv("AWS_PROFILE", "other", 1);
	expect_keys(&o, "AKIAOTHER", "othersecret", "othertoken");
}

static void test_chain_misconfigured(void **state)
{
	(void)state;
	struct creds_opts o = base_opts();
	struct creds *c = NULL;
	write_file(path_in("config"),
	           "[profile noroot]\nrole_arn = arn:aws:iam:::role/r\n"
	           "[profile loop1]\nrole_arn = arn:aws:iam:::role/r\nsource_profile = loop2\n"
	           "[profile loop2]\nrole_arn = arn:aws:iam:::role/r\nsource_profile = loop1\n"
	           "[profile gone]\nrole_arn = arn:aws:iam:::role/r\nsource_profile = missing\n"
	           "[profile wif]\nweb_identity_token_file = /tmp/x\n"
	           "[profile dur]\nrole_arn = arn:aws:iam:::role/r\nsource_profile = dur\n"
	           "duration_seconds = 60\naws_access_key_id = A\naws_secret_access_key = S\n"
	           "[profile empty]\nregion = us-east-1\n",
	           0600);
	static const char *const bad[] = {"noroot", "loop1", "gone", "wif", "dur", "empty"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o.profile = bad[i];
		if (creds_open(&o, &c) != -EINVAL)
			fail_msg("profile %s was not refused with EINVAL", bad[i]);
	}
	/* web identity needs its role */
	o.profile = NULL;
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path_in("token"), 1);
	assert_int_equal(creds_open(&o, &c), -EINVAL);
	unsetenv("AWS_WEB_IDENTITY_TOKEN_FILE");
	/* container URL rules */
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://192.0.2.1/creds", 1);
	assert_int_equal(creds_open(&o, &c), -EINVAL);
	unsetenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	/* an STS endpoint that is no URL */
	write_file(path_in("config"),
	           "[profile r]\nrole_arn = arn:aws:iam:::role/r\nsource_profile = r\n"
	           "aws_access_key_id = A\naws_secret_access_key = S\n",
	           0600);
	o.profile = "r";
	o.sts_endpoint = "sts.example.com";
	assert_int_equal(creds_open(&o, &c), -EINVAL);
}

/* A credential_process script: prints keys numbered by a counter file; fails while FAIL exists. */
static void write_process(int lifetime)
{
	char script[1024];
	snprintf(script, sizeof(script),
	         "#!/bin/sh\n"
	         "[ -e %s/FAIL ] && { echo 'some error' >&2; exit 3; }\n"
	         "n=$(cat %s/count 2>/dev/null || echo 0); n=$((n + 1)); echo $n > %s/count\n"
	         "exp=$(date -u -d @$(( $(date +%%s) + %d )) +%%Y-%%m-%%dT%%H:%%M:%%SZ)\n"
	         "printf '{\"Version\": 1, \"AccessKeyId\": \"ASIAPROC%%d\", \"SecretAccessKey\": "
	         "\"procsecret%%d\", \"SessionToken\": \"proctoken\"%s}' $n $n%s\n",
	         dir, dir, dir, lifetime, lifetime ? ", \"Expiration\": \"%s\"" : "",
	         lifetime ? " $exp" : "");
	write_file(path_in("proc.sh"), script, 0700);
	unlink(path_in("count"));
	unlink(path_in("FAIL"));
}

static void test_chain_process(void **state)
{
	(void)state;
	struct creds_opts o = base_opts();
	struct creds *c = NULL;
	char cfg[512];

	write_process(0);
	snprintf(cfg, sizeof(cfg),
	         "[default]\ncredential_process = %s --flag 'quoted arg'\n"
	         "[profile fails]\ncredential_process = sh -c 'exit 5'\n"
	         "[profile garbage]\ncredential_process = echo not-json\n"
	         "[profile v2]\ncredential_process = echo '{\"Version\": 2}'\n",
	         path_in("proc.sh"));
	write_file(path_in("config"), cfg, 0600);
	expect_keys(&o, "ASIAPROC1", "procsecret1", "proctoken");
	static const char *const bad[] = {"fails", "garbage", "v2"};
	for (size_t i = 0; i < 3; i++) {
		o.profile = bad[i];
		if (creds_open(&o, &c) != -EACCES)
			fail_msg("credential_process of profile %s was not refused", bad[i]);
	}
	o.profile = NULL;

	/* keys that expire in 4 s are refreshed after about 2 s, again and again */
	write_process(4);
	assert_int_equal(creds_open(&o, &c), 0);
	struct creds_keys *first = creds_get(c);
	assert_string_equal(first->access_key, "ASIAPROC1");
	assert_true(first->expires > 0);
	uint64_t ok = 0, failed = 0;
	for (int i = 0; i < 300 && ok < 2; i++) {
		usleep(100000);
		creds_refresh_counts(c, &ok, &failed);
	}
	assert_true(ok >= 2);
	struct creds_keys *later = creds_get(c);
	assert_string_not_equal(later->access_key, "ASIAPROC1");
	/* a reference taken before the refresh still holds the old keys */
	assert_string_equal(first->access_key, "ASIAPROC1");
	assert_string_equal(first->secret_key, "procsecret1");
	creds_keys_put(first);
	creds_keys_put(later);

	/* a failing refresh is retried and the old keys stay in use meanwhile */
	struct creds_keys *before = creds_get(c);
	write_file(path_in("FAIL"), "", 0600);
	uint64_t ok0 = ok;
	for (int i = 0; i < 300 && failed < 1; i++) {
		usleep(100000);
		creds_refresh_counts(c, &ok, &failed);
	}
	assert_true(failed >= 1);
	struct creds_keys *held = creds_get(c);
	assert_string_equal(held->access_key, before->access_key);
	creds_keys_put(held);
	creds_keys_put(before);
	unlink(path_in("FAIL"));
	for (int i = 0; i < 300 && ok <= ok0; i++) {
		usleep(100000);
		creds_refresh_counts(c, &ok, &failed);
	}
	assert_true(ok > ok0); /* recovered by itself */
	creds_close(c);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/memwalfs-creds-XXXXXX");
	assert_non_null(mkdtemp(dir));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_time),
	    cmocka_unit_test(test_json_docs),
	    cmocka_unit_test(test_sts),
	    cmocka_unit_test(test_profile_parse),
	    cmocka_unit_test(test_profile_load),
	    cmocka_unit_test(test_container_url),
	    cmocka_unit_test(test_refresh_at),
	    cmocka_unit_test(test_form),
	    cmocka_unit_test_setup(test_chain_static, clean_env),
	    cmocka_unit_test_setup(test_chain_misconfigured, clean_env),
	    cmocka_unit_test_setup(test_chain_process, clean_env),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
