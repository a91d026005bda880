/* Request/response headers and the API table. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

/* ApiVersions v3 as librdkafka 2.0.2 sends it, without the frame length:
 * header v2 (client id "rdkafka", empty tags), body: ClientSoftwareName,
 * ClientSoftwareVersion (compact strings), empty tags. */
static const uint8_t apiversions_v3[] = {
    0x00, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x07, 'r', 'd', 'k', 'a', 'f', 'k', 'a',
    0x00,
    0x0b, 'l', 'i', 'b', 'r', 'd', 'k', 'a', 'f', 'k', 'a',
    0x06, '2', '.', '0', '.', '2',
    0x00,
};

/* Metadata v1 (header v1): client id "kafka-python", then a null topic array. */
static const uint8_t metadata_v1[] = {
    0x00, 0x03, 0x00, 0x01, 0x7f, 0xff, 0xff, 0xfe,
    0x00, 0x0c, 'k', 'a', 'f', 'k', 'a', '-', 'p', 'y', 't', 'h', 'o', 'n',
    0xff, 0xff, 0xff, 0xff,
};

START_TEST(test_apiversions_v3_header_v2_and_body)
{
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, apiversions_v3, sizeof apiversions_v3);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert_int_eq(h.RequestApiKey, KP_API_API_VERSIONS);
    ck_assert_int_eq(h.RequestApiVersion, 3);
    ck_assert_int_eq(h.CorrelationId, 1);
    ck_assert(kp_str_eq(h.ClientId, "rdkafka"));
    ck_assert(h.flexible);
    ck_assert(kp_str_eq(kp_rd_compact_string(&r), "librdkafka"));
    ck_assert(kp_str_eq(kp_rd_compact_string(&r), "2.0.2"));
    kp_rd_tags(&r);
    ck_assert(kp_rd_ok(&r));
    ck_assert_int_eq(kp_rd_left(&r), 0);
}
END_TEST

START_TEST(test_metadata_v1_header_v1)
{
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, metadata_v1, sizeof metadata_v1);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert_int_eq(h.RequestApiKey, KP_API_METADATA);
    ck_assert_int_eq(h.RequestApiVersion, 1);
    ck_assert_int_eq(h.CorrelationId, 0x7ffffffe);
    ck_assert(kp_str_eq(h.ClientId, "kafka-python"));
    ck_assert(!h.flexible);
    ck_assert_int_eq(kp_rd_array(&r, 2), -1);
    ck_assert(kp_rd_ok(&r));
}
END_TEST

START_TEST(test_null_client_id_and_tags_in_header_v2)
{
    /* Metadata v9 (flexible), null client id, one tagged field in the header. */
    static const uint8_t d[] = { 0x00, 0x03, 0x00, 0x09, 0x00, 0x00, 0x00, 0x05,
                                 0xff, 0xff, 0x01, 0x03, 0x02, 0xaa, 0xbb, 0x42 };
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, d, sizeof d);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert_int_eq(h.ClientId.len, -1);
    ck_assert(h.flexible);
    ck_assert_int_eq(kp_rd_i8(&r), 0x42);
}
END_TEST

START_TEST(test_controlled_shutdown_v0_uses_header_v0)
{
    static const uint8_t d[] = { 0x00, 0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09,
                                 0x00, 0x00, 0x00, 0x01 };       /* BrokerId 1 */
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, d, sizeof d);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert_int_eq(h.RequestApiKey, 7);
    ck_assert_int_eq(h.CorrelationId, 9);
    ck_assert_int_eq(h.ClientId.len, -1);
    ck_assert(!h.flexible);
    ck_assert_int_eq(kp_rd_i32(&r), 1);
}
END_TEST

START_TEST(test_truncated_header_at_every_byte)
{
    const uint8_t *frames[] = { apiversions_v3, metadata_v1 };
    size_t lens[] = { 18, 22 };        /* header lengths of each */
    for (int f = 0; f < 2; f++)
        for (size_t n = 0; n < lens[f]; n++) {
            uint8_t *p = malloc(n ? n : 1);
            memcpy(p, frames[f], n);
            kp_rd r;
            kp_req_hdr h;
            kp_rd_init(&r, p, n);
            ck_assert_msg(kp_req_hdr_read(&r, &h) < 0, "frame %d prefix %zu", f, n);
            if (n >= 8) {             /* still addressable for an error reply */
                ck_assert_int_eq(h.RequestApiKey, f ? 3 : 18);
                ck_assert_int_eq(h.CorrelationId, f ? 0x7ffffffe : 1);
            }
            free(p);
        }
    /* And the whole ApiVersions v3 request, body included. */
    for (size_t n = 0; n < sizeof apiversions_v3; n++) {
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, apiversions_v3, n);
        kp_rd r;
        kp_req_hdr h;
        kp_rd_init(&r, p, n);
        (void)kp_req_hdr_read(&r, &h);
        (void)kp_rd_compact_string(&r);
        (void)kp_rd_compact_string(&r);
        kp_rd_tags(&r);
        ck_assert_int_ne(r.err, 0);
        free(p);
    }
}
END_TEST

START_TEST(test_negative_version_is_malformed)
{
    static const uint8_t d[] = { 0x00, 0x03, 0xff, 0xff, 0, 0, 0, 1, 0, 0 };
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, d, sizeof d);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), KP_E_MALFORMED);
    ck_assert_int_eq(h.CorrelationId, 1);
}
END_TEST

START_TEST(test_first_flexible_table)
{
    ck_assert_int_eq(kp_api_first_flexible(KP_API_PRODUCE), 9);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_FETCH), 12);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_LIST_OFFSETS), 6);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_METADATA), 9);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_OFFSET_COMMIT), 8);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_OFFSET_FETCH), 6);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_FIND_COORDINATOR), 3);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_JOIN_GROUP), 6);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_HEARTBEAT), 4);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_LEAVE_GROUP), 4);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_SYNC_GROUP), 4);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_DESCRIBE_GROUPS), 5);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_LIST_GROUPS), 3);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_SASL_HANDSHAKE), INT16_MAX);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_API_VERSIONS), 3);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_CREATE_TOPICS), 5);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_DELETE_TOPICS), 4);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_DELETE_RECORDS), 2);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_INIT_PRODUCER_ID), 2);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_OFFSET_FOR_LEADER_EPOCH), 4);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_DESCRIBE_CONFIGS), 4);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_ALTER_CONFIGS), 2);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_SASL_AUTHENTICATE), 2);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_CREATE_PARTITIONS), 2);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_DELETE_GROUPS), 2);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_INCREMENTAL_ALTER_CONFIGS), 1);
    ck_assert_int_eq(kp_api_first_flexible(KP_API_DESCRIBE_CLUSTER), 0);
    ck_assert_int_eq(kp_api_first_flexible(47), INT16_MAX);      /* OffsetDelete */
    ck_assert_int_eq(kp_api_first_flexible(-1), INT16_MAX);
    ck_assert_int_eq(kp_api_first_flexible(1000), INT16_MAX);
    for (int k = 0; k <= 67; k++)
        ck_assert_str_ne(kp_api_name((int16_t)k), "Unknown");
}
END_TEST

START_TEST(test_api_names)
{
    ck_assert_str_eq(kp_api_name(0), "Produce");
    ck_assert_str_eq(kp_api_name(18), "ApiVersions");
    ck_assert_str_eq(kp_api_name(60), "DescribeCluster");
    ck_assert_str_eq(kp_api_name(68), "Unknown");
    ck_assert_str_eq(kp_api_name(-5), "Unknown");
}
END_TEST

START_TEST(test_written_headers_read_back)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_req_hdr_write(&b, KP_API_API_VERSIONS, 3, 77, "sluice");
    kp_req_hdr_write(&b, KP_API_FETCH, 11, 78, NULL);
    kp_req_hdr_write(&b, 7, 0, 79, "x");
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, b.data, b.len);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert(h.flexible && h.CorrelationId == 77 && kp_str_eq(h.ClientId, "sluice"));
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert(!h.flexible && h.CorrelationId == 78 && h.ClientId.len == -1);
    ck_assert_int_eq(kp_req_hdr_read(&r, &h), 0);
    ck_assert(h.CorrelationId == 79 && h.RequestApiKey == 7);
    ck_assert_int_eq(kp_rd_left(&r), 0);
    kp_buf_reset(&b);
    kp_resp_hdr_write(&b, 5, false);
    kp_resp_hdr_write(&b, 6, true);
    static const uint8_t want[] = { 0, 0, 0, 5, 0, 0, 0, 6, 0 };
    ck_assert_int_eq(b.len, sizeof want);
    ck_assert(memcmp(b.data, want, sizeof want) == 0);
    kp_buf_free(&b);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_apiversions_v3_header_v2_and_body, test_metadata_v1_header_v1,
        test_null_client_id_and_tags_in_header_v2, test_controlled_shutdown_v0_uses_header_v0,
        test_truncated_header_at_every_byte, test_negative_version_is_malformed,
        test_first_flexible_table, test_api_names, test_written_headers_read_back,
    };
    return unit_run("kp_header", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
