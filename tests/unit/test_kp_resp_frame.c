/* The response frame's head (kp_resp_frame_head): Size, then the response
 * header the request's header version calls for. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

START_TEST(test_classic_request_gets_header_v0)
{
    kp_req_hdr h = { .RequestApiKey = KP_API_FETCH, .RequestApiVersion = 11,
                     .CorrelationId = 0x01020304, .flexible = false };
    uint8_t out[KP_RESP_FRAME_HEAD_MAX];
    static const uint8_t want[] = { 0, 0, 0x01, 0x04, 1, 2, 3, 4 };
    ck_assert_int_eq(kp_resp_frame_head(out, &h, 256), sizeof want);
    ck_assert(memcmp(out, want, sizeof want) == 0);
}
END_TEST

START_TEST(test_flexible_request_gets_header_v1)
{
    kp_req_hdr h = { .RequestApiKey = KP_API_FETCH, .RequestApiVersion = 12,
                     .CorrelationId = -1, .flexible = true };
    uint8_t out[KP_RESP_FRAME_HEAD_MAX];
    static const uint8_t want[] = { 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff, 0 };
    ck_assert_int_eq(kp_resp_frame_head(out, &h, 2), sizeof want);
    ck_assert(memcmp(out, want, sizeof want) == 0);
}
END_TEST

START_TEST(test_apiversions_always_gets_header_v0)
{
    kp_req_hdr h = { .RequestApiKey = KP_API_API_VERSIONS, .RequestApiVersion = 3,
                     .CorrelationId = 9, .flexible = true };
    uint8_t out[KP_RESP_FRAME_HEAD_MAX];
    static const uint8_t want[] = { 0, 0, 0, 4, 0, 0, 0, 9 };
    ck_assert(!kp_resp_hdr_flexible(&h));
    ck_assert_int_eq(kp_resp_frame_head(out, &h, 0), sizeof want);
    ck_assert(memcmp(out, want, sizeof want) == 0);
}
END_TEST

START_TEST(test_frame_head_matches_kp_resp_hdr_write)
{
    kp_req_hdr h = { .RequestApiKey = KP_API_METADATA, .RequestApiVersion = 9,
                     .CorrelationId = 4242, .flexible = true };
    uint8_t out[KP_RESP_FRAME_HEAD_MAX];
    size_t n = kp_resp_frame_head(out, &h, 10);
    kp_buf b;
    kp_buf_init(&b);
    kp_resp_hdr_write(&b, h.CorrelationId, kp_resp_hdr_flexible(&h));
    ck_assert_int_eq(n, 4 + b.len);
    ck_assert(memcmp(out + 4, b.data, b.len) == 0);
    kp_buf_free(&b);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_classic_request_gets_header_v0, test_flexible_request_gets_header_v1,
        test_apiversions_always_gets_header_v0, test_frame_head_matches_kp_resp_hdr_write,
    };
    return unit_run("kp_resp_frame", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
