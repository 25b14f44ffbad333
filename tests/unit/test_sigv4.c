/*
 * test_sigv4.c - SigV4 against AWS's published S3 examples
 * (docs.aws.amazon.com/AmazonS3/latest/API/sig-v4-header-based-auth.html:
 * GET object with range, PUT object, GET bucket lifecycle, list objects),
 * plus URI and query encoding.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "sigv4.h"

static const struct sigv4_creds ex_creds = {
    .access_key = "AKIAIOSFODNN7EXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
};
#define EX_HOST "examplebucket.s3.amazonaws.com"
#define EX_DATE "20130524T000000Z"
#define AUTH_PREFIX                                                                                \
	"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"

static void test_get_object_range(void **state)
{
	(void)state;
	struct sigv4_header h[] = {
	    {"host", EX_HOST},
	    {"range", "bytes=0-9"},
	    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
	    {"x-amz-date", EX_DATE},
	};
	struct sigv4_request r = {"GET", "/test.txt", "", h, 4, SIGV4_EMPTY_SHA256};
	char auth[512], canon[1024];
	assert_int_equal(sigv4_sign(&ex_creds, "us-east-1", EX_DATE, &r, auth, sizeof(auth), canon,
	                            sizeof(canon)),
	                 0);
	assert_string_equal(
	    auth, AUTH_PREFIX
	    "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
	    "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	assert_string_equal(canon,
	                    "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\n"
	                    "range:bytes=0-9\nx-amz-content-sha256:" SIGV4_EMPTY_SHA256
	                    "\nx-amz-date:20130524T000000Z\n\n"
	                    "host;range;x-amz-content-sha256;x-amz-date\n" SIGV4_EMPTY_SHA256);
}

static void test_put_object(void **state)
{
	(void)state;
	char hash[65], path[64], auth[512];
	const char *body = "Welcome to Amazon S3.";
	sigv4_sha256_hex(body, strlen(body), hash);
	assert_string_equal(hash,
	                    "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
	path[0] = '/';
	sigv4_uri_encode("test$file.text", 14, false, path + 1);
	assert_string_equal(path, "/test%24file.text");
	/* Given out of order on purpose: the signer sorts. */
	struct sigv4_header h[] = {
	    {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
	    {"date", "Fri, 24 May 2013 00:00:00 GMT"},
	    {"host", EX_HOST},
	    {"x-amz-date", EX_DATE},
	    {"x-amz-content-sha256", hash},
	};
	struct sigv4_request r = {"PUT", path, "", h, 5, hash};
	assert_int_equal(
	    sigv4_sign(&ex_creds, "us-east-1", EX_DATE, &r, auth, sizeof(auth), NULL, 0), 0);
	assert_string_equal(
	    auth, AUTH_PREFIX
	    "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;"
	    "x-amz-storage-class,"
	    "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

static void test_get_bucket_lifecycle(void **state)
{
	(void)state;
	struct sigv4_param q[] = {{"lifecycle", ""}};
	char query[64], auth[512];
	assert_int_equal(sigv4_canonical_query(q, 1, query, sizeof(query)), 10);
	assert_string_equal(query, "lifecycle=");
	struct sigv4_header h[] = {
	    {"host", EX_HOST},
	    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
	    {"x-amz-date", EX_DATE},
	};
	struct sigv4_request r = {"GET", "/", query, h, 3, SIGV4_EMPTY_SHA256};
	assert_int_equal(
	    sigv4_sign(&ex_creds, "us-east-1", EX_DATE, &r, auth, sizeof(auth), NULL, 0), 0);
	assert_string_equal(
	    auth, AUTH_PREFIX
	    "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
	    "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

static void test_list_objects(void **state)
{
	(void)state;
	struct sigv4_param q[] = {{"prefix", "J"}, {"max-keys", "2"}}; /* unsorted */
	char query[64], auth[512];
	assert_true(sigv4_canonical_query(q, 2, query, sizeof(query)) > 0);
	assert_string_equal(query, "max-keys=2&prefix=J");
	struct sigv4_header h[] = {
	    {"host", EX_HOST},
	    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
	    {"x-amz-date", EX_DATE},
	};
	struct sigv4_request r = {"GET", "/", query, h, 3, SIGV4_EMPTY_SHA256};
	assert_int_equal(
	    sigv4_sign(&ex_creds, "us-east-1", EX_DATE, &r, auth, sizeof(auth), NULL, 0), 0);
	assert_string_equal(
	    auth, AUTH_PREFIX
	    "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
	    "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

static void test_uri_encode(void **state)
{
	(void)state;
	char out[128];
	const char *in = "a b+c/d~e_f.g-h=é*";
	sigv4_uri_encode(in, strlen(in), false, out);
	assert_string_equal(out, "a%20b%2Bc/d~e_f.g-h%3D%C3%A9%2A");
	sigv4_uri_encode(in, strlen(in), true, out);
	assert_string_equal(out, "a%20b%2Bc%2Fd~e_f.g-h%3D%C3%A9%2A");
	assert_int_equal(sigv4_uri_encode("", 0, true, out), 0);
	assert_string_equal(out, "");
	sigv4_uri_encode("!'()$&,;:@%", 11, false, out);
	assert_string_equal(out, "%21%27%28%29%24%26%2C%3B%3A%40%25");
}

static void test_query_encoding(void **state)
{
	(void)state;
	char out[256];
	struct sigv4_param q[] = {
	    {"prefix", "a/"},         {"list-type", "2"}, {"continuation-token", "1/x+y=="},
	    {"encoding-type", "url"}, {"uploads", ""},
	};
	assert_true(sigv4_canonical_query(q, 5, out, sizeof(out)) > 0);
	assert_string_equal(out, "continuation-token=1%2Fx%2By%3D%3D&encoding-type=url&"
	                         "list-type=2&prefix=a%2F&uploads=");
	assert_int_equal(sigv4_canonical_query(q, 5, out, 10), -ENAMETOOLONG);
	assert_int_equal(sigv4_canonical_query(q, 0, out, sizeof(out)), 0);
	assert_string_equal(out, "");
}

static void test_session_token_and_errors(void **state)
{
	(void)state;
	struct sigv4_creds c = ex_creds;
	char a1[512], a2[512];
	struct sigv4_header h[] = {
	    {"host", EX_HOST},
	    {"x-amz-content-sha256", SIGV4_EMPTY_SHA256},
	    {"x-amz-date", EX_DATE},
	    {"x-amz-security-token", "tok"},
	};
	struct sigv4_request r = {"GET", "/", "", h, 4, SIGV4_EMPTY_SHA256};
	assert_int_equal(sigv4_sign(&c, "us-east-1", EX_DATE, &r, a1, sizeof(a1), NULL, 0), 0);
	assert_non_null(strstr(a1, "x-amz-date;x-amz-security-token,"));
	h[3].value = "tok2";
	assert_int_equal(sigv4_sign(&c, "us-east-1", EX_DATE, &r, a2, sizeof(a2), NULL, 0), 0);
	assert_string_not_equal(a1, a2);
	/* Bad inputs are errors, not crashes. */
	assert_int_equal(sigv4_sign(&c, "us-east-1", "2013", &r, a1, sizeof(a1), NULL, 0), -EINVAL);
	r.nheaders = 0;
	assert_int_equal(sigv4_sign(&c, "us-east-1", EX_DATE, &r, a1, sizeof(a1), NULL, 0),
	                 -EINVAL);
	r.nheaders = 4;
	assert_int_equal(sigv4_sign(&c, "us-east-1", EX_DATE, &r, a1, 20, NULL, 0), -ENAMETOOLONG);
}

static void test_md5_date(void **state)
{
	(void)state;
	char b64[25], d[17];
	sigv4_md5_base64("", 0, b64);
	assert_string_equal(b64, "1B2M2Y8AsgTpgAmY7PhCfg==");
	sigv4_amz_date(1369353600, d);
	assert_string_equal(d, EX_DATE);
}

/*
 * Another service: the IAM ListUsers example of AWS's SigV4 documentation
 * ("Create a signed AWS API request", credentials AKIDEXAMPLE), signed for
 * service "iam" - the scope the credential chain uses for "sts".  (The
 * published header separates its parts with ", "; ours with ",", which is
 * equally valid: the signature is the published one.)
 */
static void test_other_service(void **state)
{
	(void)state;
	const struct sigv4_creds c = {.access_key = "AKIDEXAMPLE",
	                              .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
	struct sigv4_header h[] = {
	    {"content-type", "application/x-www-form-urlencoded; charset=utf-8"},
	    {"host", "iam.amazonaws.com"},
	    {"x-amz-date", "20150830T123600Z"},
	};
	struct sigv4_request r = {"GET", "/", "Action=ListUsers&Version=2010-05-08",
	                          h,     3,   SIGV4_EMPTY_SHA256};
	char auth[512];
	assert_int_equal(sigv4_sign_service(&c, "us-east-1", "iam", "20150830T123600Z", &r, auth,
	                                    sizeof(auth), NULL, 0),
	                 0);
	assert_string_equal(auth,
	                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/"
	                    "aws4_request,SignedHeaders=content-type;host;x-amz-date,"
	                    "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a"
	                    "6f2b5d7");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_get_object_range),
	    cmocka_unit_test(test_put_object),
	    cmocka_unit_test(test_get_bucket_lifecycle),
	    cmocka_unit_test(test_list_objects),
	    cmocka_unit_test(test_uri_encode),
	    cmocka_unit_test(test_query_encoding),
	    cmocka_unit_test(test_session_token_and_errors),
	    cmocka_unit_test(test_other_service),
	    cmocka_unit_test(test_md5_date),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
