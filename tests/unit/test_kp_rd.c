/* Cursor (kp_rd) and writer (kp_buf): primitive round trips, boundaries,
 * hostile lengths and counts, latching. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

START_TEST(test_ints_round_trip_big_endian)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_i8(&b, -2);
    kp_wr_i16(&b, INT16_MIN);
    kp_wr_i32(&b, 0x01020304);
    kp_wr_i64(&b, INT64_MIN);
    kp_wr_u32(&b, 0xE3069283u);
    kp_wr_bool(&b, true);
    ck_assert_int_eq(b.err, 0);
    ck_assert_int_eq(b.len, 1 + 2 + 4 + 8 + 4 + 1);
    ck_assert_int_eq(b.data[3], 0x01);
    ck_assert_int_eq(b.data[6], 0x04);
    kp_rd r;
    kp_rd_init(&r, b.data, b.len);
    ck_assert_int_eq(kp_rd_i8(&r), -2);
    ck_assert_int_eq(kp_rd_i16(&r), INT16_MIN);
    ck_assert_int_eq(kp_rd_i32(&r), 0x01020304);
    ck_assert(kp_rd_i64(&r) == INT64_MIN);
    ck_assert_uint_eq(kp_rd_u32(&r), 0xE3069283u);
    ck_assert(kp_rd_bool(&r));
    ck_assert(kp_rd_ok(&r));
    ck_assert_int_eq(kp_rd_left(&r), 0);
    kp_buf_free(&b);
}
END_TEST

static const int64_t longs[] = { 0, 1, -1, 63, -64, 64, -65, 127, 128, 300,
    INT32_MAX, INT32_MIN, (int64_t)INT32_MAX + 1, (int64_t)INT32_MIN - 1,
    INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1, 1700000000000LL };

START_TEST(test_varlong_round_trip_boundaries)
{
    for (size_t i = 0; i < sizeof longs / sizeof longs[0]; i++) {
        kp_buf b;
        kp_buf_init(&b);
        kp_wr_varlong(&b, longs[i]);
        ck_assert(b.len >= 1 && b.len <= 10);
        kp_rd r;
        kp_rd_init(&r, b.data, b.len);
        ck_assert(kp_rd_varlong(&r) == longs[i]);
        ck_assert(kp_rd_ok(&r));
        ck_assert_int_eq(kp_rd_left(&r), 0);
        kp_buf_free(&b);
    }
}
END_TEST

START_TEST(test_varint_round_trip_boundaries)
{
    static const int32_t v[] = { 0, 1, -1, 63, -64, 64, -65, 8191, -8192,
                                 INT32_MAX, INT32_MIN, INT32_MAX - 1, INT32_MIN + 1 };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        kp_buf b;
        kp_buf_init(&b);
        kp_wr_varint(&b, v[i]);
        kp_wr_uvarint(&b, (uint32_t)v[i]);
        kp_rd r;
        kp_rd_init(&r, b.data, b.len);
        ck_assert_int_eq(kp_rd_varint(&r), v[i]);
        ck_assert_uint_eq(kp_rd_uvarint(&r), (uint32_t)v[i]);
        ck_assert(kp_rd_ok(&r));
        ck_assert_int_eq(kp_rd_left(&r), 0);
        kp_buf_free(&b);
    }
}
END_TEST

START_TEST(test_varint_known_encodings)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_varint(&b, -1);           /* 01 */
    kp_wr_varint(&b, 1);            /* 02 */
    kp_wr_varint(&b, 13);           /* 1a */
    kp_wr_uvarint(&b, 300);         /* ac 02 */
    kp_wr_uvarint(&b, UINT32_MAX);  /* ff ff ff ff 0f */
    static const uint8_t want[] = { 0x01, 0x02, 0x1a, 0xac, 0x02, 0xff, 0xff, 0xff, 0xff, 0x0f };
    ck_assert_int_eq(b.len, sizeof want);
    ck_assert(memcmp(b.data, want, sizeof want) == 0);
    kp_buf_free(&b);
    kp_buf_init(&b);
    kp_wr_varlong(&b, INT64_MIN);   /* zig-zag UINT64_MAX: 9 x ff, 01 */
    ck_assert_int_eq(b.len, 10);
    ck_assert_int_eq(b.data[9], 0x01);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_overlong_varints_are_malformed)
{
    kp_rd r;
    /* 6-byte uvarint */
    static const uint8_t u6[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x00 };
    kp_rd_init(&r, u6, sizeof u6);
    (void)kp_rd_uvarint(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* 5th byte carrying bits beyond 32 */
    static const uint8_t u5[] = { 0xff, 0xff, 0xff, 0xff, 0x1f };
    kp_rd_init(&r, u5, sizeof u5);
    (void)kp_rd_varint(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* 11-byte varlong */
    static const uint8_t l11[] = { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                   0x80, 0x80, 0x00 };
    kp_rd_init(&r, l11, sizeof l11);
    (void)kp_rd_varlong(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* 10th byte with bit 64 set */
    static const uint8_t l10[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0x02 };
    kp_rd_init(&r, l10, sizeof l10);
    (void)kp_rd_varlong(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* varint cut short */
    static const uint8_t cut[] = { 0x80, 0x80 };
    kp_rd_init(&r, cut, sizeof cut);
    (void)kp_rd_varlong(&r);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
}
END_TEST

START_TEST(test_short_read_latches_and_stops)
{
    static const uint8_t d[] = { 0, 1, 2 };
    kp_rd r;
    kp_rd_init(&r, d, sizeof d);
    ck_assert_int_eq(kp_rd_i32(&r), 0);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
    ck_assert_int_eq(kp_rd_i8(&r), 0);            /* no-op after the latch */
    ck_assert_int_eq(kp_rd_left(&r), 3);
    ck_assert_ptr_null(kp_rd_raw(&r, 0));
    kp_str s = kp_rd_string(&r);
    ck_assert_int_lt(s.len, 0);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
}
END_TEST

START_TEST(test_strings_both_forms_and_null)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_string(&b, "abc", -1);
    kp_wr_string(&b, NULL, 0);
    kp_wr_string(&b, "", 0);
    kp_wr_compact_string(&b, "hello", 5);
    kp_wr_compact_string(&b, NULL, 0);
    kp_wr_compact_string(&b, "", -1);
    kp_wr_bytes(&b, "\x00\x01", 2);
    kp_wr_bytes(&b, NULL, 0);
    kp_wr_compact_bytes(&b, "xyz", 3);
    kp_wr_compact_bytes(&b, NULL, 0);
    kp_wr_str(&b, (kp_str){ "q", 1 });
    kp_wr_str(&b, KP_STR_NULL);
    kp_wr_string_v(&b, true, "f", 1);
    kp_wr_bytes_v(&b, false, "g", 1);
    ck_assert_int_eq(b.err, 0);

    kp_rd r;
    kp_rd_init(&r, b.data, b.len);
    ck_assert(kp_str_eq(kp_rd_string(&r), "abc"));
    ck_assert(kp_str_eq(kp_rd_string(&r), NULL));
    kp_str e = kp_rd_string(&r);
    ck_assert_int_eq(e.len, 0);
    ck_assert(kp_str_eq(e, ""));
    ck_assert(kp_str_eq(kp_rd_compact_string(&r), "hello"));
    ck_assert_int_eq(kp_rd_compact_string(&r).len, -1);
    ck_assert_int_eq(kp_rd_compact_string(&r).len, 0);
    kp_str by = kp_rd_bytes(&r);
    ck_assert_int_eq(by.len, 2);
    ck_assert(memcmp(by.p, "\x00\x01", 2) == 0);
    ck_assert_int_eq(kp_rd_bytes(&r).len, -1);
    ck_assert(kp_str_eq(kp_rd_compact_bytes(&r), "xyz"));
    ck_assert_int_eq(kp_rd_compact_bytes(&r).len, -1);
    ck_assert(kp_str_eq(kp_rd_string(&r), "q"));
    ck_assert_int_eq(kp_rd_string(&r).len, -1);
    ck_assert(kp_str_eq(kp_rd_str_v(&r, true), "f"));
    ck_assert(kp_str_eq(kp_rd_bytes_v(&r, false), "g"));
    ck_assert(kp_rd_ok(&r));
    ck_assert_int_eq(kp_rd_left(&r), 0);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_string_length_beyond_input_or_negative)
{
    static const uint8_t big[] = { 0x00, 0x10, 'a', 'b' };
    kp_rd r;
    kp_rd_init(&r, big, sizeof big);
    (void)kp_rd_string(&r);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
    static const uint8_t neg[] = { 0xff, 0xfe };
    kp_rd_init(&r, neg, sizeof neg);
    (void)kp_rd_string(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    static const uint8_t negb[] = { 0x80, 0, 0, 0 };
    kp_rd_init(&r, negb, sizeof negb);
    (void)kp_rd_bytes(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    static const uint8_t cbig[] = { 0xff, 0xff, 0xff, 0xff, 0x0f };
    kp_rd_init(&r, cbig, sizeof cbig);
    (void)kp_rd_compact_bytes(&r);
    ck_assert_int_ne(r.err, 0);
}
END_TEST

START_TEST(test_arrays_counts_are_bounded)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_array(&b, 2);
    kp_wr_i32(&b, 7);
    kp_wr_i32(&b, 8);
    kp_wr_array(&b, -1);
    kp_wr_compact_array(&b, 1);
    kp_wr_i16(&b, 5);
    kp_wr_compact_array(&b, -1);
    kp_wr_array_v(&b, true, 0);
    kp_rd r;
    kp_rd_init(&r, b.data, b.len);
    ck_assert_int_eq(kp_rd_array(&r, 4), 2);
    ck_assert_int_eq(kp_rd_i32(&r), 7);
    ck_assert_int_eq(kp_rd_i32(&r), 8);
    ck_assert_int_eq(kp_rd_array(&r, 4), -1);
    ck_assert_int_eq(kp_rd_compact_array(&r, 2), 1);
    ck_assert_int_eq(kp_rd_i16(&r), 5);
    ck_assert_int_eq(kp_rd_compact_array(&r, 2), -1);
    ck_assert_int_eq(kp_rd_array_v(&r, true, 1), 0);
    ck_assert(kp_rd_ok(&r));
    kp_buf_free(&b);

    /* A count of 2^31-1 with 8 bytes left: malformed, not an allocation. */
    static const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8 };
    kp_rd_init(&r, huge, sizeof huge);
    ck_assert_int_eq(kp_rd_array(&r, 4), 0);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* Count 3 of 4-byte elements in 8 bytes. */
    static const uint8_t three[] = { 0, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8 };
    kp_rd_init(&r, three, sizeof three);
    (void)kp_rd_array(&r, 4);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    kp_rd_init(&r, three, sizeof three);
    ck_assert_int_eq(kp_rd_array(&r, 2), 3);
    /* Count below -1. */
    static const uint8_t m2[] = { 0xff, 0xff, 0xff, 0xfe };
    kp_rd_init(&r, m2, sizeof m2);
    (void)kp_rd_array(&r, 1);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* Compact count too large. */
    static const uint8_t cc[] = { 0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2 };
    kp_rd_init(&r, cc, sizeof cc);
    (void)kp_rd_compact_array(&r, 0);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
}
END_TEST

START_TEST(test_non_nullable_array_and_string_refuse_null)
{
    kp_rd r;
    /* A null array count: malformed, read as 0. */
    static const uint8_t null_arr[] = { 0xff, 0xff, 0xff, 0xff };
    kp_rd_init(&r, null_arr, sizeof null_arr);
    ck_assert_int_eq(kp_rd_array_nn(&r, 1), 0);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* A real count passes through, still bounded by what is left. */
    static const uint8_t two[] = { 0, 0, 0, 2, 0xaa, 0xbb };
    kp_rd_init(&r, two, sizeof two);
    ck_assert_int_eq(kp_rd_array_nn(&r, 1), 2);
    ck_assert(kp_rd_ok(&r));
    kp_rd_init(&r, two, sizeof two);
    ck_assert_int_eq(kp_rd_array_nn(&r, 2), 0);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* An empty array is not null. */
    static const uint8_t empty_arr[] = { 0, 0, 0, 0 };
    kp_rd_init(&r, empty_arr, sizeof empty_arr);
    ck_assert_int_eq(kp_rd_array_nn(&r, 1), 0);
    ck_assert(kp_rd_ok(&r));
    /* A null string: malformed, comes back null. */
    static const uint8_t null_str[] = { 0xff, 0xff };
    kp_rd_init(&r, null_str, sizeof null_str);
    ck_assert_int_lt(kp_rd_string_nn(&r).len, 0);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* The empty string and a real one pass. */
    static const uint8_t strs[] = { 0, 0, 0, 2, 'h', 'i' };
    kp_rd_init(&r, strs, sizeof strs);
    ck_assert_int_eq(kp_rd_string_nn(&r).len, 0);
    ck_assert(kp_str_eq(kp_rd_string_nn(&r), "hi"));
    ck_assert(kp_rd_ok(&r));
    /* An earlier error is kept, not replaced. */
    kp_rd_init(&r, null_str, 1);
    (void)kp_rd_string_nn(&r);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
    kp_rd_init(&r, null_arr, 2);
    ck_assert_int_eq(kp_rd_array_nn(&r, 1), 0);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
}
END_TEST

START_TEST(test_tagged_fields_are_skipped)
{
    /* 2 tags: tag 0 size 3 "abc", tag 5 size 0; then an INT8 marker. */
    static const uint8_t d[] = { 0x02, 0x00, 0x03, 'a', 'b', 'c', 0x05, 0x00, 0x2a };
    kp_rd r;
    kp_rd_init(&r, d, sizeof d);
    kp_rd_tags(&r);
    ck_assert(kp_rd_ok(&r));
    ck_assert_int_eq(kp_rd_i8(&r), 0x2a);
    /* Empty section. */
    static const uint8_t e[] = { 0x00 };
    kp_rd_init(&r, e, 1);
    kp_rd_tags_v(&r, true);
    ck_assert(kp_rd_ok(&r));
    ck_assert_int_eq(kp_rd_left(&r), 0);
    /* Size runs past the end. */
    static const uint8_t bad[] = { 0x01, 0x00, 0x09, 'a' };
    kp_rd_init(&r, bad, sizeof bad);
    kp_rd_tags(&r);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
    /* Count that cannot fit. */
    static const uint8_t many[] = { 0x7f, 0x00, 0x00 };
    kp_rd_init(&r, many, sizeof many);
    kp_rd_tags(&r);
    ck_assert_int_eq(r.err, KP_E_MALFORMED);
    /* Non-flexible: nothing is read. */
    kp_rd_init(&r, many, sizeof many);
    kp_rd_tags_v(&r, false);
    ck_assert_int_eq(kp_rd_left(&r), 3);
}
END_TEST

START_TEST(test_uuid_skip_raw)
{
    uint8_t id[16], got[16];
    for (int i = 0; i < 16; i++)
        id[i] = (uint8_t)(i * 7);
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_uuid(&b, id);
    kp_wr_raw(&b, "xyz", 3);
    kp_rd r;
    kp_rd_init(&r, b.data, b.len);
    kp_rd_uuid(&r, got);
    ck_assert(memcmp(id, got, 16) == 0);
    kp_rd_skip(&r, 1);
    const uint8_t *p = kp_rd_raw(&r, 2);
    ck_assert(p && p[0] == 'y' && p[1] == 'z');
    kp_rd_skip(&r, 1);
    ck_assert_int_eq(r.err, KP_E_TRUNCATED);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_placeholder_reset_reuses_memory)
{
    kp_buf b;
    kp_buf_init(&b);
    size_t pos = kp_wr_i32_placeholder(&b);
    for (int i = 0; i < 1000; i++)
        kp_wr_i32(&b, i);
    kp_wr_i32_at(&b, pos, (int32_t)(b.len - 4));
    kp_rd r;
    kp_rd_init(&r, b.data, b.len);
    ck_assert_int_eq(kp_rd_i32(&r), 4000);
    uint8_t *mem = b.data;
    size_t cap = b.cap;
    kp_buf_reset(&b);
    ck_assert_int_eq(b.len, 0);
    kp_wr_i64(&b, 1);
    ck_assert_ptr_eq(b.data, mem);
    ck_assert_int_eq(b.cap, cap);
    kp_wr_i32_at(&b, 6, 1);      /* out of range: ignored */
    ck_assert_int_eq(b.len, 8);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_oversized_string_latches_on_writer)
{
    kp_buf b;
    kp_buf_init(&b);
    char *big = malloc(40000);
    memset(big, 'a', 40000);
    kp_wr_string(&b, big, 40000);
    ck_assert_int_eq(b.err, KP_E_MALFORMED);
    kp_wr_i32(&b, 1);
    ck_assert_int_eq(b.len, 0);
    free(big);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_str_copy_and_eq)
{
    char dst[4];
    ck_assert_int_eq(kp_str_copy((kp_str){ "hello", 5 }, dst, sizeof dst), 3);
    ck_assert_str_eq(dst, "hel");
    ck_assert_int_eq(kp_str_copy(KP_STR_NULL, dst, sizeof dst), 0);
    ck_assert_str_eq(dst, "");
    ck_assert(!kp_str_eq((kp_str){ "ab", 2 }, "abc"));
    ck_assert(!kp_str_eq(KP_STR_NULL, ""));
    ck_assert(!kp_str_eq((kp_str){ "", 0 }, NULL));
}
END_TEST

START_TEST(test_str_cmp_orders_bytes_then_length)
{
    kp_str ab = { "ab", 2 }, abc = { "abc", 3 }, b = { "b", 1 };
    kp_str empty = { "", 0 }, nul = KP_STR_NULL;
    ck_assert_int_eq(kp_str_cmp(ab, (kp_str){ "abX", 2 }), 0);
    ck_assert_int_lt(kp_str_cmp(ab, abc), 0);
    ck_assert_int_gt(kp_str_cmp(abc, ab), 0);
    ck_assert_int_lt(kp_str_cmp(abc, b), 0);
    ck_assert_int_eq(kp_str_cmp(nul, empty), 0);
    ck_assert_int_lt(kp_str_cmp(nul, ab), 0);
    /* Bytes compare unsigned; an embedded NUL is just a byte. */
    ck_assert_int_lt(kp_str_cmp((kp_str){ "a\0", 2 }, (kp_str){ "a\x80", 2 }), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_ints_round_trip_big_endian, test_varlong_round_trip_boundaries,
        test_varint_round_trip_boundaries, test_varint_known_encodings,
        test_overlong_varints_are_malformed, test_short_read_latches_and_stops,
        test_strings_both_forms_and_null, test_string_length_beyond_input_or_negative,
        test_arrays_counts_are_bounded, test_non_nullable_array_and_string_refuse_null,
        test_tagged_fields_are_skipped, test_uuid_skip_raw,
        test_placeholder_reset_reuses_memory, test_oversized_string_latches_on_writer,
        test_str_copy_and_eq, test_str_cmp_orders_bytes_then_length,
    };
    return unit_run("kp_rd", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
