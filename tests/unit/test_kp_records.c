/* The __consumer_offsets records generated from the JSON in protocol/records/
 * (kp_records.h): byte for byte what the broker wrote by hand before
 * (group_log.c, Kafka's GroupMetadataManager layouts), and read back. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kp_records.h"
#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

/* The layout as written by hand, and as the generated encoder writes it. */
static kp_buf want, got;

static void bufs_init(void)
{
    kp_buf_init(&want);
    kp_buf_init(&got);
}

static void bufs_free(void)
{
    kp_buf_free(&want);
    kp_buf_free(&got);
}

static void same_bytes(const kp_buf *a, const kp_buf *b)
{
    ck_assert_int_eq(a->err, 0);
    ck_assert_int_eq(b->err, 0);
    ck_assert_int_eq(a->len, b->len);
    ck_assert(memcmp(a->data, b->data, a->len) == 0);
}

START_TEST(test_offset_commit_key_matches_the_hand_layout)
{
    kp_wr_i16(&want, 1);
    kp_wr_string(&want, "grp", 3);
    kp_wr_string(&want, "orders", 6);
    kp_wr_i32(&want, 7);
    kp_OffsetCommitKey k = { .group = { "grp", 3 }, .topic = { "orders", 6 }, .partition = 7 };
    kp_wr_i16(&got, KP_RECORD_TYPE_OffsetCommitKey);
    ck_assert_int_eq(kp_enc_OffsetCommitKey(&got, 0, &k), 0);
    same_bytes(&want, &got);

    kp_rd r;
    kp_rd_init(&r, got.data + 2, got.len - 2);
    kp_OffsetCommitKey back;
    ck_assert_int_eq(kp_dec_OffsetCommitKey(&r, 0, &back, NULL), 0);
    ck_assert(kp_str_eq(back.group, "grp") && kp_str_eq(back.topic, "orders"));
    ck_assert_int_eq(back.partition, 7);
}
END_TEST

START_TEST(test_offset_commit_value_v1_and_v3_match_the_hand_layout)
{
    kp_OffsetCommitValue v = { .offset = 42, .leaderEpoch = 5, .metadata = { "m", 1 },
                               .commitTimestamp = 1000, .expireTimestamp = 2000 };
    kp_wr_i64(&want, 42);              /* v1 */
    kp_wr_string(&want, "m", 1);
    kp_wr_i64(&want, 1000);
    kp_wr_i64(&want, 2000);
    ck_assert_int_eq(kp_enc_OffsetCommitValue(&got, 1, &v), 0);
    same_bytes(&want, &got);
    kp_buf_reset(&want);
    kp_buf_reset(&got);
    v.expireTimestamp = -1;
    v.metadata = (kp_str){ "", 0 };
    kp_wr_i64(&want, 42);              /* v3 */
    kp_wr_i32(&want, 5);
    kp_wr_string(&want, "", 0);
    kp_wr_i64(&want, 1000);
    ck_assert_int_eq(kp_enc_OffsetCommitValue(&got, 3, &v), 0);
    same_bytes(&want, &got);

    kp_rd r;
    kp_rd_init(&r, got.data, got.len);
    kp_OffsetCommitValue back;
    ck_assert_int_eq(kp_dec_OffsetCommitValue(&r, 3, &back, NULL), 0);
    ck_assert(back.offset == 42 && back.leaderEpoch == 5 && back.expireTimestamp == -1);
}
END_TEST

START_TEST(test_group_metadata_v3_matches_the_hand_layout)
{
    kp_wr_string(&want, "consumer", -1);
    kp_wr_i32(&want, 4);
    kp_wr_string(&want, "range", -1);
    kp_wr_string(&want, NULL, 0);      /* leader: null */
    kp_wr_i64(&want, 123456);
    kp_wr_i32(&want, 2);
    for (int i = 0; i < 2; i++) {
        kp_wr_string(&want, i ? "m-2" : "m-1", -1);
        kp_wr_string(&want, i ? "static-2" : NULL, i ? -1 : 0);
        kp_wr_string(&want, "cid", -1);
        kp_wr_string(&want, "/127.0.0.1", -1);
        kp_wr_i32(&want, 300000);
        kp_wr_i32(&want, 10000);
        kp_wr_bytes(&want, "sub", 3);
        kp_wr_bytes(&want, "", 0);
    }
    kp_GroupMetadataValue_MemberMetadata mm[2];
    for (int i = 0; i < 2; i++)
        mm[i] = (kp_GroupMetadataValue_MemberMetadata){
            .memberId = kp_str_cstr(i ? "m-2" : "m-1"),
            .groupInstanceId = kp_str_cstr(i ? "static-2" : NULL),
            .clientId = kp_str_cstr("cid"), .clientHost = kp_str_cstr("/127.0.0.1"),
            .rebalanceTimeout = 300000, .sessionTimeout = 10000,
            .subscription = { "sub", 3 }, .assignment = { "", 0 },
        };
    kp_GroupMetadataValue g = { .protocolType = kp_str_cstr("consumer"), .generation = 4,
                                .protocol = kp_str_cstr("range"), .leader = KP_STR_NULL,
                                .currentStateTimestamp = 123456, .members = mm,
                                .members_count = 2 };
    ck_assert_int_eq(kp_enc_GroupMetadataValue(&got, 3, &g), 0);
    same_bytes(&want, &got);

    kp_arena a;
    kp_arena_init(&a, 0);
    kp_rd r;
    kp_rd_init(&r, got.data, got.len);
    kp_GroupMetadataValue back;
    ck_assert_int_eq(kp_dec_GroupMetadataValue(&r, 3, &back, &a), 0);
    ck_assert_int_eq(back.members_count, 2);
    ck_assert(back.leader.len < 0 && kp_str_eq(back.members[1].groupInstanceId, "static-2"));
    ck_assert(back.members[0].groupInstanceId.len < 0);
    /* A member count the bytes cannot hold is malformed, not an allocation. */
    kp_rd_init(&r, got.data, 4 + 8 + 4 + 2 + 5 + 2 + 8 + 4);
    ck_assert_int_ne(kp_dec_GroupMetadataValue(&r, 3, &back, &a), 0);
    kp_arena_free(&a);
}
END_TEST

START_TEST(test_group_metadata_key_matches_the_hand_layout)
{
    kp_wr_i16(&want, 2);
    kp_wr_string(&want, "grp", 3);
    kp_GroupMetadataKey k = { .group = { "grp", 3 } };
    kp_wr_i16(&got, KP_RECORD_TYPE_GroupMetadataKey);
    ck_assert_int_eq(kp_enc_GroupMetadataKey(&got, 0, &k), 0);
    same_bytes(&want, &got);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_offset_commit_key_matches_the_hand_layout,
        test_offset_commit_value_v1_and_v3_match_the_hand_layout,
        test_group_metadata_v3_matches_the_hand_layout,
        test_group_metadata_key_matches_the_hand_layout,
    };
    return unit_run("kp_records", "core", tests, sizeof tests / sizeof *tests,
                    bufs_init, bufs_free, 0);
}
