/*
 * test_s3_retry.c - the S3 retry policy (s3/http.h): which statuses, S3
 * error codes and transport failures are repeated, and the bounds of the
 * full-jitter exponential backoff.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "http.h"

static void test_statuses(void **state)
{
	(void)state;
	static const long yes[] = {500, 502, 503, 504, 429};
	static const long no[] = {200, 204, 206, 301, 400, 401, 403, 404, 405, 409, 412, 416, 501};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		assert_true(http_retryable(0, yes[i], NULL));
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (http_retryable(0, no[i], ""))
			fail_msg("status %ld must not be retried", no[i]);
}

static void test_codes(void **state)
{
	(void)state;
	assert_true(http_retryable(0, 503, "SlowDown"));
	assert_true(http_retryable(0, 400, "RequestTimeout"));
	assert_true(http_retryable(0, 200, "InternalError")); /* 200 with an error body */
	assert_true(http_retryable(0, 400, "Throttling"));
	assert_false(http_retryable(0, 403, "SignatureDoesNotMatch"));
	assert_false(http_retryable(0, 403, "InvalidAccessKeyId"));
	assert_false(http_retryable(0, 404, "NoSuchKey"));
	assert_false(http_retryable(0, 404, "NoSuchBucket"));
	assert_false(http_retryable(0, 412, "PreconditionFailed"));
	assert_false(http_retryable(0, 400, "EntityTooSmall"));
}

static void test_transport(void **state)
{
	(void)state;
	static const int yes[] = {CURLE_OPERATION_TIMEDOUT, CURLE_COULDNT_CONNECT,
	                          CURLE_SEND_ERROR,         CURLE_RECV_ERROR,
	                          CURLE_GOT_NOTHING,        CURLE_PARTIAL_FILE};
	static const int no[] = {CURLE_PEER_FAILED_VERIFICATION,
	                         CURLE_SSL_CACERT_BADFILE,
	                         CURLE_URL_MALFORMAT,
	                         CURLE_OUT_OF_MEMORY,
	                         CURLE_WRITE_ERROR,
	                         CURLE_UNSUPPORTED_PROTOCOL};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!http_retryable(yes[i], 0, NULL))
			fail_msg("curl error %d must be retried", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (http_retryable(no[i], 0, NULL))
			fail_msg("curl error %d must not be retried", no[i]);
}

static void test_backoff_bounds(void **state)
{
	(void)state;
	uint64_t rng = 12345;
	for (unsigned attempt = 0; attempt < 20; attempt++) {
		uint64_t ceil = (uint64_t)100 << (attempt < 12 ? attempt : 12);
		if (ceil > 10000)
			ceil = 10000;
		unsigned max = 0, min = UINT32_MAX;
		for (int i = 0; i < 2000; i++) {
			unsigned ms = http_backoff_ms(attempt, 100, 10000, &rng);
			if (ms > ceil)
				fail_msg("attempt %u: %u ms > ceiling %llu", attempt, ms,
				         (unsigned long long)ceil);
			if (ms > max)
				max = ms;
			if (ms < min)
				min = ms;
		}
		/* Full jitter: spread over the whole window, not clustered at the top. */
		assert_true(min < ceil / 10 + 1);
		assert_true(max > ceil * 8 / 10);
	}
	/* A zero state is repaired, not stuck at zero. */
	rng = 0;
	unsigned sum = 0;
	for (int i = 0; i < 100; i++)
		sum += http_backoff_ms(3, 100, 10000, &rng);
	assert_true(sum > 0);
	assert_true(rng != 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_statuses),
	    cmocka_unit_test(test_codes),
	    cmocka_unit_test(test_transport),
	    cmocka_unit_test(test_backoff_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
