/*
 * test_s3_xml.c - the strict XML reader and S3 response parsers: listing
 * pages (plain and url-encoded), multipart results, DeleteObjects errors,
 * ListMultipartUploads, <Error>, and malformed / truncated documents (every
 * prefix of a valid document must be rejected without a crash).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xml.h"

static const char list1[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>b</Name><Prefix>p/</Prefix><KeyCount>2</KeyCount><MaxKeys>2</MaxKeys>"
    "<IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>1/abc+==</NextContinuationToken>"
    "<Contents><Key>p/a&amp;b</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
    "<ETag>&quot;d41d8cd98f00b204e9800998ecf8427e&quot;</ETag><Size>0</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>\n"
    "  <Contents><Key>p/z&#x41;&#66;</Key><Size>18446744073709551615</Size>"
    "<Owner><ID>x</ID></Owner></Contents>"
    "</ListBucketResult>";

static const char list_url[] =
    "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
    "<Contents><Key>fs1%2Fwal%2F0001+x%2B</Key><Size>12</Size></Contents>"
    "<Contents><Key>fs1/%C3%A9</Key><Size>1</Size></Contents>"
    "<CommonPrefixes><Prefix>fs1/d/</Prefix></CommonPrefixes></ListBucketResult>";

static void test_list_page(void **state)
{
	(void)state;
	struct xml_list_page pg;
	assert_int_equal(xml_parse_list_page(list1, strlen(list1), &pg), 0);
	assert_int_equal(pg.n, 2);
	assert_string_equal(pg.v[0].key, "p/a&b");
	assert_int_equal(pg.v[0].size, 0);
	assert_string_equal(pg.v[1].key, "p/zAB");
	assert_true(pg.v[1].size == UINT64_MAX);
	assert_true(pg.truncated);
	assert_string_equal(pg.next_token, "1/abc+==");
	xml_list_page_free(&pg);

	assert_int_equal(xml_parse_list_page(list_url, strlen(list_url), &pg), 0);
	assert_int_equal(pg.n, 2);
	assert_string_equal(pg.v[0].key, "fs1/wal/0001 x+");
	assert_string_equal(pg.v[1].key, "fs1/\xc3\xa9");
	assert_false(pg.truncated);
	assert_null(pg.next_token);
	xml_list_page_free(&pg);

	const char empty[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
	                     "<Prefix/></ListBucketResult>";
	assert_int_equal(xml_parse_list_page(empty, strlen(empty), &pg), 0);
	assert_int_equal(pg.n, 0);
	xml_list_page_free(&pg);
}

static void test_list_page_bad(void **state)
{
	(void)state;
	struct xml_list_page pg;
	static const char *const bad[] = {
	    /* truncated without a token */
	    "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
	    /* Contents without Size */
	    "<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",
	    /* bad size */
	    "<ListBucketResult><Contents><Key>a</Key><Size>1x</Size></Contents></ListBucketResult>",
	    "<ListBucketResult><Contents><Key>a</Key><Size>99999999999999999999</Size>"
	    "</Contents></ListBucketResult>",
	    /* bad boolean */
	    "<ListBucketResult><IsTruncated>yes</IsTruncated></ListBucketResult>",
	    /* wrong root */
	    "<Foo><Contents><Key>a</Key><Size>1</Size></Contents></Foo>",
	    /* bad url escape */
	    "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%zz</Key>"
	    "<Size>1</Size></Contents></ListBucketResult>",
	    "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%00</Key>"
	    "<Size>1</Size></Contents></ListBucketResult>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(xml_parse_list_page(bad[i], strlen(bad[i]), &pg), -EBADMSG);
		xml_list_page_free(&pg);
	}
}

static int count_fn(void *arg, const char *path, const char *text, size_t len)
{
	(void)path;
	(void)text;
	(void)len;
	(*(int *)arg)++;
	return 0;
}

static void test_malformed(void **state)
{
	(void)state;
	static const char *const bad[] = {
	    "",
	    "   ",
	    "<a>",
	    "<a></b>",
	    "<a><b></a></b>",
	    "<a>x</a>trailing",
	    "<a>x</a><b/>",
	    "<a>&bogus;</a>",
	    "<a>&#0;</a>",
	    "<a>&#x110000;</a>",
	    "<a>&#;</a>",
	    "<a><![CDATA[x]]></a>",
	    "<!DOCTYPE a><a/>",
	    "<a>text<b/></a>",
	    "<a b=\"1></a>",
	    "<a b=1></a>",
	    "<a><!-- unclosed </a>",
	    "<1a/>",
	    "<a></a >x",
	    "<a><b></bb></a>",
	    "<a:></a:>",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int n = 0;
		int rc = xml_walk(bad[i], strlen(bad[i]), count_fn, &n);
		if (rc != -EBADMSG)
			fail_msg("accepted malformed #%zu: %s (rc %d)", i, bad[i], rc);
	}
	/* Deep nesting is refused, not recursed without bound. */
	char deep[2000] = "";
	for (int i = 0; i < 40; i++)
		strcat(deep, "<a>");
	for (int i = 0; i < 40; i++)
		strcat(deep, "</a>");
	int n = 0;
	assert_int_equal(xml_walk(deep, strlen(deep), count_fn, &n), -EBADMSG);
	assert_int_equal(xml_walk(NULL, 0, count_fn, &n), -EBADMSG);
}

/* Every strict prefix of a valid document is an error; parsed from a heap copy of exactly
 * that length so that ASan catches any over-read. */
static void test_truncated(void **state)
{
	(void)state;
	const char *docs[] = {list1, list_url};
	for (size_t d = 0; d < 2; d++) {
		size_t len = strlen(docs[d]);
		for (size_t cut = 0; cut < len; cut++) {
			char *p = malloc(cut ? cut : 1);
			assert_non_null(p);
			memcpy(p, docs[d], cut);
			struct xml_list_page pg;
			int rc = xml_parse_list_page(p, cut, &pg);
			xml_list_page_free(&pg);
			free(p);
			if (rc != -EBADMSG)
				fail_msg("doc %zu cut at %zu accepted (rc %d)", d, cut, rc);
		}
	}
}

static void test_error(void **state)
{
	(void)state;
	char code[32], msg[64];
	const char e[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>NoSuchKey</Code>"
	                 "<Message>The specified key does not exist.</Message>"
	                 "<Key>a/b</Key><RequestId>tx1</RequestId></Error>";
	assert_int_equal(xml_parse_error(e, strlen(e), code, sizeof(code), msg, sizeof(msg)), 0);
	assert_string_equal(code, "NoSuchKey");
	assert_string_equal(msg, "The specified key does not exist.");
	char small[5];
	assert_int_equal(xml_parse_error(e, strlen(e), small, sizeof(small), msg, sizeof(msg)), 0);
	assert_string_equal(small, "NoSu");
	assert_int_equal(
	    xml_parse_error(list1, strlen(list1), code, sizeof(code), msg, sizeof(msg)), -EBADMSG);
	assert_int_equal(
	    xml_parse_error("<Error><Code>x", 14, code, sizeof(code), msg, sizeof(msg)), -EBADMSG);
	assert_string_equal(code, "");
}

static void test_multipart(void **state)
{
	(void)state;
	char *id = NULL, code[32], msg[64];
	const char init[] =
	    "<InitiateMultipartUploadResult xmlns=\"x\"><Bucket>b</Bucket><Key>k</Key>"
	    "<UploadId>2~abc.DEF_g</UploadId></InitiateMultipartUploadResult>";
	assert_int_equal(xml_parse_initiate(init, strlen(init), &id), 0);
	assert_string_equal(id, "2~abc.DEF_g");
	free(id);
	const char noid[] = "<InitiateMultipartUploadResult><Key>k</Key>"
	                    "</InitiateMultipartUploadResult>";
	assert_int_equal(xml_parse_initiate(noid, strlen(noid), &id), -EBADMSG);
	assert_int_equal(xml_parse_initiate(init, strlen(init) - 3, &id), -EBADMSG);

	const char done[] =
	    "<CompleteMultipartUploadResult><Location>l</Location><Bucket>b</Bucket>"
	    "<Key>k</Key><ETag>\"x-2\"</ETag></CompleteMultipartUploadResult>";
	assert_int_equal(
	    xml_parse_complete(done, strlen(done), code, sizeof(code), msg, sizeof(msg)), 0);
	const char err200[] =
	    "\n\n<Error><Code>InternalError</Code><Message>boom</Message></Error>";
	assert_int_equal(
	    xml_parse_complete(err200, strlen(err200), code, sizeof(code), msg, sizeof(msg)), -EIO);
	assert_string_equal(code, "InternalError");
	assert_int_equal(xml_parse_complete("<Other/>", 8, code, sizeof(code), msg, sizeof(msg)),
	                 -EBADMSG);

	const char ups[] =
	    "<ListMultipartUploadsResult><Bucket>b</Bucket><IsTruncated>true</IsTruncated>"
	    "<NextKeyMarker>p/k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker>"
	    "<Upload><Key>p/k1</Key><UploadId>u1</UploadId>"
	    "<Initiated>2024-01-02T03:04:05.000Z</Initiated></Upload>"
	    "<Upload><Key>p/k2</Key><UploadId>u2</UploadId>"
	    "<Initiator><ID>x</ID></Initiator>"
	    "<Initiated>1970-01-01T00:01:00.000Z</Initiated></Upload>"
	    "</ListMultipartUploadsResult>";
	struct xml_uploads_page up;
	assert_int_equal(xml_parse_uploads_page(ups, strlen(ups), &up), 0);
	assert_int_equal(up.n, 2);
	assert_string_equal(up.v[0].key, "p/k1");
	assert_string_equal(up.v[0].upload_id, "u1");
	assert_int_equal(up.v[0].initiated, 1704164645);
	assert_int_equal(up.v[1].initiated, 60);
	assert_true(up.truncated);
	assert_string_equal(up.next_key_marker, "p/k2");
	assert_string_equal(up.next_upload_id_marker, "u2");
	xml_uploads_page_free(&up);
	const char badtime[] =
	    "<ListMultipartUploadsResult><Upload><Key>k</Key><UploadId>u</UploadId>"
	    "<Initiated>yesterday</Initiated></Upload></ListMultipartUploadsResult>";
	assert_int_equal(xml_parse_uploads_page(badtime, strlen(badtime), &up), -EBADMSG);
	xml_uploads_page_free(&up);
}

static void test_delete_result(void **state)
{
	(void)state;
	unsigned nerr = 99;
	char key[16], code[32];
	const char ok[] = "<DeleteResult><Deleted><Key>a</Key></Deleted></DeleteResult>";
	assert_int_equal(
	    xml_parse_delete_result(ok, strlen(ok), &nerr, key, sizeof(key), code, sizeof(code)),
	    0);
	assert_int_equal(nerr, 0);
	const char quiet[] = "<DeleteResult xmlns=\"x\"/>";
	assert_int_equal(xml_parse_delete_result(quiet, strlen(quiet), &nerr, key, sizeof(key),
	                                         code, sizeof(code)),
	                 0);
	assert_int_equal(nerr, 0);
	const char errs[] =
	    "<DeleteResult><Error><Key>gone</Key><Code>NoSuchKey</Code></Error>"
	    "<Error><Key>b/c</Key><Code>AccessDenied</Code><Message>m</Message></Error>"
	    "<Error><Key>d</Key><Code>InternalError</Code></Error></DeleteResult>";
	assert_int_equal(xml_parse_delete_result(errs, strlen(errs), &nerr, key, sizeof(key), code,
	                                         sizeof(code)),
	                 0);
	assert_int_equal(nerr, 2);
	assert_string_equal(key, "b/c");
	assert_string_equal(code, "AccessDenied");
	assert_int_equal(
	    xml_parse_delete_result(errs, 40, &nerr, key, sizeof(key), code, sizeof(code)),
	    -EBADMSG);
}

static void test_escape_decode(void **state)
{
	(void)state;
	char *e = xml_escape("a<b>&\"c'");
	assert_string_equal(e, "a&lt;b&gt;&amp;&quot;c&apos;");
	free(e);
	char s[] = "a%2Fb+c%2bd";
	assert_int_equal(xml_url_decode(s), 0);
	assert_string_equal(s, "a/b c+d");
	char t[] = "abc%2";
	assert_int_equal(xml_url_decode(t), -EBADMSG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_list_page),     cmocka_unit_test(test_list_page_bad),
	    cmocka_unit_test(test_malformed),     cmocka_unit_test(test_truncated),
	    cmocka_unit_test(test_error),         cmocka_unit_test(test_multipart),
	    cmocka_unit_test(test_delete_result), cmocka_unit_test(test_escape_decode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
