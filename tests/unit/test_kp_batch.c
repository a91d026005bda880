/* RecordBatch v2: protocol/README.md §10's 75-byte batch, validation errors, in-place
 * rewrites, the builder round trip for every codec, record iteration, and
 * hostile input (every truncation, random byte flips). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

/* protocol/README.md §10. */
static const uint8_t batch75[75] = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x3f, 0xff, 0xff, 0xff, 0xff,
    0x02, 0x3a, 0xc2, 0xe8, 0x2b, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x00, 0x00, 0x00, 0x01,
    0x1a, 0x00, 0x00, 0x00, 0x02, 0x6b, 0x04, 0x68, 0x69, 0x02, 0x02, 0x68, 0x02, 0x76,
};

START_TEST(test_readme_batch_validates)
{
    kp_batch b;
    ck_assert_int_eq(kp_batch_size(batch75, 12), 75);
    ck_assert_int_eq(kp_batch_validate(batch75, sizeof batch75, &b), 75);
    ck_assert_int_eq(b.BaseOffset, 0);
    ck_assert_int_eq(b.BatchLength, 63);
    ck_assert_int_eq(b.PartitionLeaderEpoch, -1);
    ck_assert_int_eq(b.Magic, 2);
    ck_assert_uint_eq(b.Crc, 0x3AC2E82Bu);
    ck_assert_int_eq(b.Attributes, 0);
    ck_assert_int_eq(b.LastOffsetDelta, 0);
    ck_assert(b.BaseTimestamp == 1700000000000LL);
    ck_assert(b.MaxTimestamp == 1700000000000LL);
    ck_assert(b.ProducerId == -1);
    ck_assert_int_eq(b.ProducerEpoch, -1);
    ck_assert_int_eq(b.BaseSequence, -1);
    ck_assert_int_eq(b.RecordsCount, 1);
    ck_assert_int_eq(kp_batch_check_stored(batch75, sizeof batch75, &b), 75);
    /* Extra bytes after the batch are not its business. */
    uint8_t two[150];
    memcpy(two, batch75, 75);
    memcpy(two + 75, batch75, 75);
    ck_assert_int_eq(kp_batch_validate(two, sizeof two, NULL), 75);
}
END_TEST

START_TEST(test_readme_batch_iterates)
{
    kp_rec_iter it;
    kp_record rec;
    kp_header h;
    kp_rec_iter_init0(&it);
    ck_assert_int_eq(kp_rec_iter_start(&it, batch75, sizeof batch75), 0);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
    ck_assert(kp_str_eq(rec.Key, "k"));
    ck_assert(kp_str_eq(rec.Value, "hi"));
    ck_assert(rec.Timestamp == 1700000000000LL);
    ck_assert(rec.Offset == 0);
    ck_assert_int_eq(rec.HeadersCount, 1);
    ck_assert_int_eq(kp_header_next(&rec, &h), 1);
    ck_assert(kp_str_eq(h.Key, "h"));
    ck_assert(kp_str_eq(h.Value, "v"));
    ck_assert_int_eq(kp_header_next(&rec, &h), 0);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 0);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 0);
    kp_rec_iter_free(&it);
}
END_TEST

static uint8_t *copy75(void)
{
    uint8_t *p = malloc(75);
    memcpy(p, batch75, 75);
    return p;
}

START_TEST(test_corrupt_crc_magic_count_codec_detected)
{
    uint8_t *p = copy75();
    p[70] ^= 1;                                  /* a value byte */
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_CRC);
    ck_assert_int_eq(kp_batch_check_stored(p, 75, NULL), KP_E_CRC);
    free(p);

    p = copy75();
    p[16] = 1;
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_MAGIC);
    free(p);

    p = copy75();
    p[60] = 2;                                   /* RecordsCount 2, LOD 0 */
    uint32_t c = kp_crc32c(0, p + 21, 75 - 21);
    p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
    p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_MALFORMED);
    ck_assert_int_eq(kp_batch_check_stored(p, 75, NULL), KP_E_MALFORMED);
    free(p);

    p = copy75();
    p[60] = 0;                                   /* RecordsCount 0 */
    c = kp_crc32c(0, p + 21, 75 - 21);
    p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
    p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_MALFORMED);
    /* ... which compaction may leave behind. */
    ck_assert_int_eq(kp_batch_check_stored(p, 75, NULL), 75);
    free(p);

    p = copy75();
    p[22] = 5;                                   /* codec 5 */
    c = kp_crc32c(0, p + 21, 75 - 21);
    p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
    p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_CODEC);
    free(p);

    p = copy75();
    p[11] = 10;                                  /* BatchLength below the header */
    ck_assert_int_eq(kp_batch_size(p, 75), KP_E_MALFORMED);
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_MALFORMED);
    p[8] = 0x80;                                 /* negative BatchLength */
    ck_assert_int_eq(kp_batch_size(p, 75), KP_E_MALFORMED);
    p[8] = 0x7f;                                 /* huge BatchLength */
    ck_assert_int_eq(kp_batch_validate(p, 75, NULL), KP_E_TRUNCATED);
    free(p);
}
END_TEST

START_TEST(test_rewrites_keep_crc_valid)
{
    uint8_t *p = copy75();
    kp_batch b;
    kp_batch_set_base_offset(p, 1234567890123LL);
    kp_batch_set_leader_epoch(p, 7);
    ck_assert_int_eq(kp_batch_validate(p, 75, &b), 75);
    ck_assert(b.BaseOffset == 1234567890123LL);
    ck_assert_int_eq(b.PartitionLeaderEpoch, 7);
    kp_batch_set_log_append_time(p, 1800000000000LL);
    ck_assert_int_eq(kp_batch_validate(p, 75, &b), 75);
    ck_assert(b.Attributes & KP_ATTR_LOG_APPEND_TIME);
    ck_assert(b.MaxTimestamp == 1800000000000LL);

    kp_rec_iter it;
    kp_record rec;
    kp_rec_iter_init0(&it);
    ck_assert_int_eq(kp_rec_iter_start(&it, p, 75), 0);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
    ck_assert(rec.Timestamp == 1800000000000LL);     /* LogAppendTime wins */
    ck_assert(rec.Offset == 1234567890123LL);
    kp_rec_iter_free(&it);
    free(p);
}
END_TEST

/* Builds a batch of n records with varied keys, values and headers. */
static int64_t build(kp_buf *out, int codec, int n)
{
    kp_batch_builder bb;
    kp_bb_init(&bb, out, codec);
    kp_bb_set_producer(&bb, 4242, 3, 100);
    for (int i = 0; i < n; i++) {
        char key[32], val[256];
        int kl = snprintf(key, sizeof key, "key-%d", i);
        int vl = snprintf(val, sizeof val, "value %d %0*d", i, i % 200, 0);
        kp_header hs[2] = {
            { { "h1", 2 }, { "v1", 2 } },
            { { "empty-null", 10 }, KP_STR_NULL },
        };
        kp_bb_add(&bb, 1700000000000LL + (i % 7) * 1000 - 3000,
                  i % 5 == 0 ? NULL : key, kl,
                  i % 4 == 1 ? NULL : val, vl,
                  hs, i % 3);
    }
    int64_t size = kp_bb_finish(&bb);
    kp_bb_free(&bb);
    return size;
}

static void check_built(const uint8_t *p, size_t len, int codec, int n)
{
    kp_batch b;
    ck_assert_int_eq(kp_batch_validate(p, len, &b), (int64_t)len);
    ck_assert_int_eq(b.Attributes & KP_ATTR_CODEC_MASK, codec);
    ck_assert_int_eq(b.RecordsCount, n);
    ck_assert_int_eq(b.LastOffsetDelta, n - 1);
    ck_assert(b.ProducerId == 4242);
    ck_assert_int_eq(b.ProducerEpoch, 3);
    ck_assert_int_eq(b.BaseSequence, 100);
    int64_t max = 0;
    for (int i = 0; i < n; i++)
        if (i == 0 || 1700000000000LL + (i % 7) * 1000 - 3000 > max)
            max = 1700000000000LL + (i % 7) * 1000 - 3000;
    ck_assert(b.BaseTimestamp == 1700000000000LL - 3000);   /* first record's */
    ck_assert(b.MaxTimestamp == max);

    kp_rec_iter it;
    kp_record rec;
    kp_rec_iter_init0(&it);
    ck_assert_int_eq(kp_rec_iter_start(&it, p, len), 0);
    for (int i = 0; i < n; i++) {
        char key[32], val[256];
        int kl = snprintf(key, sizeof key, "key-%d", i);
        int vl = snprintf(val, sizeof val, "value %d %0*d", i, i % 200, 0);
        ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
        ck_assert(rec.Offset == i);
        ck_assert(rec.Timestamp == 1700000000000LL + (i % 7) * 1000 - 3000);
        if (i % 5 == 0) {
            ck_assert_int_eq(rec.Key.len, -1);
        } else {
            ck_assert_int_eq(rec.Key.len, kl);
            ck_assert(memcmp(rec.Key.p, key, (size_t)kl) == 0);
        }
        if (i % 4 == 1) {
            ck_assert_int_eq(rec.Value.len, -1);
        } else {
            ck_assert_int_eq(rec.Value.len, vl);
            ck_assert(memcmp(rec.Value.p, val, (size_t)vl) == 0);
        }
        ck_assert_int_eq(rec.HeadersCount, i % 3);
        kp_header h;
        if (i % 3 >= 1) {
            ck_assert_int_eq(kp_header_next(&rec, &h), 1);
            ck_assert(kp_str_eq(h.Key, "h1"));
            ck_assert(kp_str_eq(h.Value, "v1"));
        }
        if (i % 3 == 2) {
            ck_assert_int_eq(kp_header_next(&rec, &h), 1);
            ck_assert(kp_str_eq(h.Key, "empty-null"));
            ck_assert_int_eq(h.Value.len, -1);
        }
        ck_assert_int_eq(kp_header_next(&rec, &h), 0);
    }
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 0);
    kp_rec_iter_free(&it);
}

START_TEST(test_builder_round_trips_every_codec)
{
    static const int sizes[] = { 1, 2, 17, 1000 };
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            kp_buf out;
            kp_buf_init(&out);
            kp_wr_raw(&out, "prefix", 6);            /* batch need not start at 0 */
            int64_t size = build(&out, codec, sizes[s]);
            ck_assert_msg(size > 0, "codec %d n %d: %lld", codec, sizes[s], (long long)size);
            ck_assert_int_eq(out.len, 6 + (size_t)size);
            check_built(out.data + 6, (size_t)size, codec, sizes[s]);
            kp_buf_free(&out);
        }
}
END_TEST

START_TEST(test_builder_reused_and_gaps)
{
    kp_buf out;
    kp_buf_init(&out);
    kp_batch_builder bb;
    kp_bb_init(&bb, &out, KP_CODEC_NONE);
    ck_assert_int_eq(kp_bb_finish(&bb), KP_E_MALFORMED);     /* empty */
    ck_assert_int_eq(out.len, 0);
    kp_bb_init(&bb, &out, KP_CODEC_NONE);
    kp_bb_add_at(&bb, 0, 10, "a", 1, "1", 1, NULL, 0);
    kp_bb_add_at(&bb, 5, 20, "b", 1, "2", 1, NULL, 0);
    int64_t size = kp_bb_finish(&bb);
    ck_assert_int_gt(size, 0);
    kp_batch b;
    ck_assert_int_eq(kp_batch_validate(out.data, out.len, &b), KP_E_MALFORMED);
    ck_assert_int_eq(kp_batch_check_stored(out.data, out.len, &b), size);
    ck_assert_int_eq(b.LastOffsetDelta, 5);
    ck_assert_int_eq(b.RecordsCount, 2);
    kp_rec_iter it;
    kp_record rec;
    kp_rec_iter_init0(&it);
    kp_batch_set_base_offset(out.data, 100);
    ck_assert_int_eq(kp_rec_iter_start(&it, out.data, out.len), 0);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
    ck_assert(rec.Offset == 100);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
    ck_assert(rec.Offset == 105);
    ck_assert(rec.Timestamp == 20);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 0);

    /* Second batch from the same builder, same iterator restarted. */
    kp_bb_init(&bb, &out, KP_CODEC_GZIP);
    kp_bb_add(&bb, 30, NULL, 0, "", 0, NULL, 0);
    int64_t size2 = kp_bb_finish(&bb);
    ck_assert_int_gt(size2, 0);
    ck_assert_int_eq(out.len, (size_t)(size + size2));
    ck_assert_int_eq(kp_rec_iter_start(&it, out.data + size, (size_t)size2), 0);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
    ck_assert_int_eq(rec.Key.len, -1);
    ck_assert_int_eq(rec.Value.len, 0);
    kp_rec_iter_free(&it);
    kp_bb_free(&bb);

    /* Bad input to the builder latches and leaves out untouched. */
    size_t before = out.len;
    kp_bb_init(&bb, &out, KP_CODEC_NONE);
    kp_bb_add(&bb, 1, "k", -5, NULL, 0, NULL, 0);
    ck_assert_int_eq(kp_bb_finish(&bb), KP_E_MALFORMED);
    kp_bb_init(&bb, &out, 7);
    kp_bb_add(&bb, 1, "k", 1, NULL, 0, NULL, 0);
    ck_assert_int_eq(kp_bb_finish(&bb), KP_E_CODEC);
    ck_assert_int_eq(out.len, before);
    kp_bb_free(&bb);
    kp_buf_free(&out);
}
END_TEST

/* Runs everything a hostile batch can reach; returns 0 if it all passed. */
static int exercise(const uint8_t *p, size_t len)
{
    kp_batch b;
    int bad = 0;
    (void)kp_batch_size(p, len);
    (void)kp_batch_header(p, len, &b);
    if (kp_batch_validate(p, len, &b) < 0)
        bad = 1;
    (void)kp_batch_check_stored(p, len, &b);
    kp_rec_iter it;
    kp_record rec;
    kp_header h;
    kp_rec_iter_init0(&it);
    int rc = kp_rec_iter_start(&it, p, len);
    if (rc < 0)
        bad = 1;
    while (rc >= 0 && (rc = kp_rec_iter_next(&it, &rec)) == 1) {
        int hr;
        volatile size_t sum = 0;
        if (rec.Key.len > 0)
            sum += (uint8_t)rec.Key.p[rec.Key.len - 1];
        if (rec.Value.len > 0)
            sum += (uint8_t)rec.Value.p[rec.Value.len - 1];
        while ((hr = kp_header_next(&rec, &h)) == 1)
            sum += (size_t)h.Key.len;
        if (hr < 0)
            bad = 1;
    }
    if (rc < 0)
        bad = 1;
    kp_rec_iter_free(&it);
    return bad;
}

START_TEST(test_truncation_at_every_byte_is_an_error)
{
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf out;
        kp_buf_init(&out);
        int64_t size = build(&out, codec, 20);
        ck_assert_int_gt(size, 0);
        for (size_t n = 0; n < (size_t)size; n++) {
            /* An exact-size heap copy so ASan sees any read past n. */
            uint8_t *p = malloc(n ? n : 1);
            memcpy(p, out.data, n);
            ck_assert_msg(exercise(p, n) == 1, "codec %d prefix %zu accepted", codec, n);
            ck_assert_int_lt(kp_batch_validate(p, n, NULL), 0);
            free(p);
        }
        uint8_t *p = malloc((size_t)size);
        memcpy(p, out.data, (size_t)size);
        ck_assert_int_eq(exercise(p, (size_t)size), 0);
        free(p);
        kp_buf_free(&out);
    }
    for (size_t n = 0; n < sizeof batch75; n++) {
        uint8_t *p = malloc(n ? n : 1);
        memcpy(p, batch75, n);
        ck_assert_int_eq(exercise(p, n), 1);
        free(p);
    }
}
END_TEST

/* The records area itself shortened, with BatchLength and CRC made
 * consistent, so only the record parser can notice. */
START_TEST(test_truncated_records_area_with_fixed_crc)
{
    kp_buf out;
    kp_buf_init(&out);
    int64_t size = build(&out, KP_CODEC_NONE, 5);
    for (size_t n = KP_BATCH_HEADER_SIZE; n < (size_t)size; n++) {
        uint8_t *p = malloc(n);
        memcpy(p, out.data, n);
        uint32_t bl = (uint32_t)(n - 12);
        p[8] = (uint8_t)(bl >> 24); p[9] = (uint8_t)(bl >> 16);
        p[10] = (uint8_t)(bl >> 8); p[11] = (uint8_t)bl;
        uint32_t c = kp_crc32c(0, p + 21, n - 21);
        p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
        p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
        ck_assert_int_eq(kp_batch_validate(p, n, NULL), (int64_t)n);   /* framing ok */
        ck_assert_msg(exercise(p, n) == 1, "records cut at %zu accepted", n);
        free(p);
    }
    kp_buf_free(&out);
}
END_TEST

START_TEST(test_random_byte_flips_never_crash)
{
    srand(777);
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf out;
        kp_buf_init(&out);
        int64_t size = build(&out, codec, 12);
        for (int iter = 0; iter < 3000; iter++) {
            uint8_t *p = malloc((size_t)size);
            memcpy(p, out.data, (size_t)size);
            int flips = 1 + rand() % 4;
            for (int f = 0; f < flips; f++)
                p[rand() % size] ^= (uint8_t)(1 + rand() % 255);
            /* Fix the CRC half the time so the deeper parsers are reached. */
            if (iter & 1) {
                uint32_t c = kp_crc32c(0, p + 21, (size_t)size - 21);
                p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
                p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
            }
            (void)exercise(p, (size_t)size);
            free(p);
        }
        kp_buf_free(&out);
    }
}
END_TEST

START_TEST(test_hostile_record_counts_bounded)
{
    uint8_t *p = copy75();
    p[57] = 0x7f; p[58] = 0xff; p[59] = 0xff; p[60] = 0xff;   /* RecordsCount */
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    ck_assert_int_eq(kp_rec_iter_start(&it, p, 75), KP_E_MALFORMED);
    p[57] = 0x80;                                           /* negative */
    ck_assert_int_eq(kp_rec_iter_start(&it, p, 75), KP_E_MALFORMED);
    free(p);
    /* Header count too large for the record. */
    p = copy75();
    p[70] = 0x7e;                                           /* HeadersCount 63 */
    ck_assert_int_eq(kp_rec_iter_start(&it, p, 75), 0);
    kp_record rec;
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), KP_E_MALFORMED);
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), KP_E_MALFORMED);   /* latched */
    free(p);
    kp_rec_iter_free(&it);
}
END_TEST

/* ---- record validation (protocol/validate.c) ------------------------------ */

static const kp_val_rules no_rules = { .now_ms = 1700000000000LL };

/* A batch around any records area: batch75's header with the length,
 * codec, counts and CRC set.  Returns its size in out. */
static size_t raw_batch(kp_buf *out, int codec, int32_t count,
                        const void *area, size_t n)
{
    kp_buf_reset(out);
    kp_wr_raw(out, batch75, KP_BATCH_HEADER_SIZE);
    kp_wr_raw(out, area, n);
    uint8_t *p = out->data;
    uint32_t len = (uint32_t)(out->len - KP_BATCH_LOG_OVERHEAD);
    p[8] = (uint8_t)(len >> 24); p[9] = (uint8_t)(len >> 16);
    p[10] = (uint8_t)(len >> 8); p[11] = (uint8_t)len;
    p[22] = (uint8_t)codec;
    uint32_t lod = (uint32_t)count - 1;
    p[23] = (uint8_t)(lod >> 24); p[24] = (uint8_t)(lod >> 16);
    p[25] = (uint8_t)(lod >> 8); p[26] = (uint8_t)lod;
    p[57] = (uint8_t)((uint32_t)count >> 24); p[58] = (uint8_t)((uint32_t)count >> 16);
    p[59] = (uint8_t)((uint32_t)count >> 8); p[60] = (uint8_t)count;
    uint32_t c = kp_crc32c(0, p + KP_BATCH_CRC_START, out->len - KP_BATCH_CRC_START);
    p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
    p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
    return out->len;
}

/* kp_batch_validate, then the records: 0 or the fault's rc. */
static int validate_all_one(kp_validator *v, const uint8_t *p, size_t len,
                            const kp_val_rules *rules, kp_val_fault *f)
{
    kp_batch b;
    int64_t size = kp_batch_validate(p, len, &b);
    ck_assert_msg(size == (int64_t)len, "batch itself refused: %lld", (long long)size);
    return kp_batch_validate_records(v, p, len, &b, rules, f);
}

/* validate_all_one, and every batch is
 * also validated through a 16-byte window (every record but the smallest
 * down the large-record path, every record cut by the window's end): the
 * same verdict and message, or the streaming is wrong. */
static int validate_all(kp_validator *v, const uint8_t *p, size_t len,
                        const kp_val_rules *rules, kp_val_fault *f)
{
    int rc = validate_all_one(v, p, len, rules, f);
    kp_batch b;
    ck_assert_int_eq(kp_batch_validate(p, len, &b), (int64_t)len);
    kp_validator tiny;
    kp_validator_init(&tiny);
    kp_validator_set_window(&tiny, 16);
    kp_val_fault tf;
    ck_assert_int_eq(kp_batch_validate_records(&tiny, p, len, &b, rules, &tf), rc);
    if (rc) {
        ck_assert_int_eq(tf.error, f->error);
        ck_assert_int_eq(tf.record, f->record);
        ck_assert_str_eq(tf.message, f->message);
    }
    kp_validator_free(&tiny);
    return rc;
}

/* ---- the per-record hook (kp_val_rules.on_record) -------------------------- */

typedef struct hook_seen {
    int32_t calls, whole, refuse_at;
} hook_seen;

/* got is build()'s field want (wl bytes; NULL: null), whole or its head. */
static void check_slice(kp_str got, const char *want, int wl, bool whole)
{
    if (!want) {
        ck_assert_int_eq(got.len, -1);
        return;
    }
    int n = whole || wl < KP_VAL_HEAD ? wl : KP_VAL_HEAD;
    ck_assert_int_eq(got.len, n);
    ck_assert(memcmp(got.p, want, (size_t)n) == 0);
}

static int hook(void *arg, int32_t i, const kp_record *rec, bool whole, kp_val_fault *f)
{
    hook_seen *s = arg;
    char key[32], val[256];
    int kl = snprintf(key, sizeof key, "key-%d", i);
    int vl = snprintf(val, sizeof val, "value %d %0*d", i, i % 200, 0);
    ck_assert_int_eq(i, s->calls);                  /* every record once, in order */
    check_slice(rec->Key, i % 5 == 0 ? NULL : key, kl, whole);
    check_slice(rec->Value, i % 4 == 1 ? NULL : val, vl, whole);
    s->calls++;
    s->whole += whole;
    return i == s->refuse_at ? kp_val_record_fault(f, KP_INVALID_RECORD, i, "refused by the hook")
                             : 0;
}

START_TEST(test_validator_calls_the_record_hook)
{
    static const size_t windows[] = { 16, KP_VAL_WINDOW };
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++)
        for (size_t w = 0; w < 2; w++) {
            size_t win = windows[w];
            kp_validator v;
            kp_validator_init(&v);
            kp_validator_set_window(&v, win);
            kp_buf out;
            kp_buf_init(&out);
            int64_t size = build(&out, codec, 300);
            kp_batch b;
            ck_assert_int_eq(kp_batch_validate(out.data, (size_t)size, &b), size);
            hook_seen seen = { .refuse_at = -1 };
            kp_val_rules rules = no_rules;
            rules.on_record = hook;
            rules.arg = &seen;
            kp_val_fault f;
            ck_assert_int_eq(kp_batch_validate_records(&v, out.data, (size_t)size, &b, &rules,
                                                       &f), 0);
            ck_assert_int_eq(seen.calls, 300);
            /* uncompressed records are read in place, whole; through a
             * 16-byte window the long ones stream by, heads only */
            if (codec == KP_CODEC_NONE || win == KP_VAL_WINDOW)
                ck_assert_int_eq(seen.whole, 300);
            else
                ck_assert_int_lt(seen.whole, 300);
            seen = (hook_seen){ .refuse_at = 217 };
            ck_assert_int_eq(kp_batch_validate_records(&v, out.data, (size_t)size, &b, &rules,
                                                       &f), KP_E_MALFORMED);
            ck_assert_int_eq(seen.calls, 218);      /* the walk stops at the refusal */
            ck_assert_int_eq(f.error, KP_INVALID_RECORD);
            ck_assert_int_eq(f.record, 217);
            ck_assert_str_eq(f.message, "Record 217 in batch: refused by the hook");
            kp_buf_free(&out);
            kp_validator_free(&v);
        }
}
END_TEST

START_TEST(test_validator_accepts_every_built_batch)
{
    static const int sizes[] = { 1, 2, 17, 1000 };
    kp_validator v;
    kp_validator_init(&v);
    kp_val_fault f;
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            kp_buf out;
            kp_buf_init(&out);
            int64_t size = build(&out, codec, sizes[s]);
            ck_assert_int_eq(validate_all(&v, out.data, (size_t)size, &no_rules, &f), 0);
            /* build() leaves record 0 without a key: a compacted topic refuses it */
            kp_val_rules compact = no_rules;
            compact.key_required = true;
            ck_assert_int_eq(validate_all(&v, out.data, (size_t)size, &compact, &f),
                             KP_E_MALFORMED);
            ck_assert_int_eq(f.error, KP_INVALID_RECORD);
            ck_assert_int_eq(f.record, 0);
            ck_assert_str_eq(f.message, "Record 0 in batch: Compacted topic cannot "
                                        "accept message without key");
            kp_buf_free(&out);
        }
    kp_validator_free(&v);
}
END_TEST

START_TEST(test_validator_reuses_its_buffers)
{
    kp_validator v;
    kp_validator_init(&v);
    kp_val_fault f;
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf out;
        kp_buf_init(&out);
        int64_t size = build(&out, codec, 300);
        ck_assert_int_eq(validate_all(&v, out.data, (size_t)size, &no_rules, &f), 0);
        kp_validator warm = v;
        for (int i = 0; i < 3; i++)
            ck_assert_int_eq(validate_all(&v, out.data, (size_t)size, &no_rules, &f), 0);
        /* same contexts, same buffer: nothing was allocated again */
        ck_assert(memcmp(&warm.codec, &v.codec, sizeof v.codec) == 0);
        ck_assert_ptr_eq(warm.win, v.win);
        ck_assert_uint_eq(v.win_cap, KP_VAL_WINDOW);
        kp_buf_free(&out);
    }
    kp_validator_free(&v);
}
END_TEST

/* The record area of batch75 (one record, key "k"), and records i = 0..
 * built the same way by kp_bb, for poison cases. */
static size_t plain_records(kp_buf *area, const int32_t *deltas, int n,
                            const int64_t *ts)
{
    kp_buf tmp;
    kp_buf_init(&tmp);
    kp_batch_builder bb;
    kp_bb_init(&bb, &tmp, KP_CODEC_NONE);
    for (int i = 0; i < n; i++)
        kp_bb_add_at(&bb, deltas[i], ts ? ts[i] : 1700000000000LL, "key", 3,
                     "value-value", 11, NULL, 0);
    int64_t size = kp_bb_finish(&bb);
    ck_assert(size > 0);
    kp_buf_reset(area);
    kp_wr_raw(area, tmp.data + KP_BATCH_HEADER_SIZE, (size_t)size - KP_BATCH_HEADER_SIZE);
    kp_buf_free(&tmp);
    return area->len;
}

START_TEST(test_validator_refuses_poison_with_a_valid_crc)
{
    static const int32_t seq[] = { 0, 1, 2 }, swapped[] = { 0, 2, 1 };
    kp_validator v;
    kp_validator_init(&v);
    kp_val_fault f;
    kp_buf area, b, z;
    kp_buf_init(&area);
    kp_buf_init(&b);
    kp_buf_init(&z);
    plain_records(&area, seq, 3, NULL);

    /* every codec's bit over uncompressed records */
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        size_t n = raw_batch(&b, codec, 3, area.data, area.len);
        ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_CODEC);
        ck_assert_int_eq(f.error, KP_CORRUPT_MESSAGE);
        ck_assert_int_eq(f.record, -1);
        ck_assert_msg(strstr(f.message, "records do not decompress"), "%s", f.message);
    }
    /* RecordsCount one too many / one too few inside a compressed area */
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf_reset(&z);
        ck_assert_int_eq(kp_compress(codec, area.data, area.len, &z), 0);
        size_t n = raw_batch(&b, codec, 4, z.data, z.len);
        ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
        ck_assert_str_eq(f.message, "Record 3 in batch: missing: the records end after 3 "
                                    "of RecordsCount 4");
        n = raw_batch(&b, codec, 2, z.data, z.len);
        ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
        ck_assert_msg(strstr(f.message, "bytes after the last of RecordsCount 2"), "%s",
                      f.message);
    }
    /* a valid gzip stream of garbage */
    kp_buf_reset(&z);
    ck_assert_int_eq(kp_compress(KP_CODEC_GZIP, "\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f", 8, &z), 0);
    size_t n = raw_batch(&b, KP_CODEC_GZIP, 1, z.data, z.len);
    ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
    ck_assert_str_eq(f.message, "Record 0 in batch: negative length -64");

    /* record 1's length one too long, then one too short */
    size_t rec0 = (area.len) / 3;                 /* equal records */
    area.data[rec0] += 2;                         /* zigzag: +1 */
    n = raw_batch(&b, KP_CODEC_NONE, 3, area.data, area.len);
    ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
    ck_assert_int_eq(f.record, 1);
    ck_assert_msg(strstr(f.message, "Record 1 in batch: fields do not fill its length"),
                  "%s", f.message);
    area.data[rec0] -= 4;
    n = raw_batch(&b, KP_CODEC_NONE, 3, area.data, area.len);
    ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
    ck_assert_int_eq(f.record, 1);
    area.data[rec0] += 2;
    /* the last record's length past the end */
    area.data[2 * rec0] += 20;
    n = raw_batch(&b, KP_CODEC_NONE, 3, area.data, area.len);
    ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
    ck_assert_msg(strstr(f.message, "Record 2 in batch: length") &&
                  strstr(f.message, "runs past the batch end"), "%s", f.message);
    area.data[2 * rec0] -= 20;
    /* a truncated varint: the last record cut to its length's first byte, 0xff */
    kp_buf cut;
    kp_buf_init(&cut);
    kp_wr_raw(&cut, area.data, 2 * rec0);
    kp_wr_raw(&cut, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 15);
    n = raw_batch(&b, KP_CODEC_NONE, 3, cut.data, cut.len);
    ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
    ck_assert_str_eq(f.message, "Record 2 in batch: length varint truncated or too long");
    kp_buf_free(&cut);

    /* offset deltas out of order: INVALID_RECORD naming the record */
    plain_records(&area, swapped, 3, NULL);
    n = raw_batch(&b, KP_CODEC_NONE, 3, area.data, area.len);
    ck_assert_int_eq(validate_all(&v, b.data, n, &no_rules, &f), KP_E_MALFORMED);
    ck_assert_int_eq(f.error, KP_INVALID_RECORD);
    ck_assert_str_eq(f.message, "Record 1 in batch: OffsetDelta 2, expected 1 "
                                "(deltas run 0..RecordsCount-1 in order)");

    /* timestamps: record 2 is two hours old, -1 is exempt */
    static const int64_t ts[] = { 1700000000000LL, -1, 1700000000000LL - 7200000 };
    plain_records(&area, seq, 3, ts);
    n = raw_batch(&b, KP_CODEC_NONE, 3, area.data, area.len);
    kp_val_rules r = { .check_timestamps = true, .now_ms = 1700000000000LL,
                       .before_max_ms = 3600000, .after_max_ms = 0 };
    ck_assert_int_eq(validate_all(&v, b.data, n, &r, &f), KP_E_MALFORMED);
    ck_assert_int_eq(f.error, KP_INVALID_TIMESTAMP);
    ck_assert_int_eq(f.record, 2);
    r.before_max_ms = 7200000;
    ck_assert_int_eq(validate_all(&v, b.data, n, &r, &f), 0);
    r.now_ms -= 1;                                /* record 0 now 1 ms ahead */
    ck_assert_int_eq(validate_all(&v, b.data, n, &r, &f), KP_E_MALFORMED);
    ck_assert_int_eq(f.record, 0);
    r.after_max_ms = INT64_MAX / 2;
    r.before_max_ms = INT64_MAX / 2;
    r.now_ms = INT64_MAX / 4;                     /* no overflow at the extremes */
    ck_assert_int_eq(validate_all(&v, b.data, n, &r, &f), 0);
    /* one side unbounded (INT64_MAX), however far the timestamp lies */
    kp_val_rules one = { .check_timestamps = true, .now_ms = 1700000000000LL,
                         .before_max_ms = INT64_MAX, .after_max_ms = 1000 };
    ck_assert(kp_val_timestamp_ok(&one, INT64_MIN));
    ck_assert(kp_val_timestamp_ok(&one, -2));
    ck_assert(kp_val_timestamp_ok(&one, 1700000001000LL));
    ck_assert(!kp_val_timestamp_ok(&one, 1700000001001LL));
    ck_assert(!kp_val_timestamp_ok(&one, INT64_MAX));
    one = (kp_val_rules){ .check_timestamps = true, .now_ms = 1700000000000LL,
                          .before_max_ms = 0, .after_max_ms = INT64_MAX };
    ck_assert(kp_val_timestamp_ok(&one, INT64_MAX));
    ck_assert(!kp_val_timestamp_ok(&one, INT64_MIN));
    ck_assert(!kp_val_timestamp_ok(&one, 1699999999999LL));
    ck_assert(kp_val_timestamp_ok(&one, -1));     /* NO_TIMESTAMP */

    kp_buf_free(&area);
    kp_buf_free(&b);
    kp_buf_free(&z);
    kp_validator_free(&v);
}
END_TEST

/* Peak RSS since the last reset (VmHWM), in KiB; -1 if unavailable. */
static long rss_peak_kib(void)
{
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (fp && fgets(line, sizeof line, fp))
        if (sscanf(line, "VmHWM: %ld kB", &kib) == 1)
            break;
    if (fp)
        fclose(fp);
    return kib;
}

/* Resets VmHWM to the current RSS (clear_refs 5); false if not allowed. */
static bool rss_peak_reset(void)
{
    FILE *fp = fopen("/proc/self/clear_refs", "w");
    if (!fp)
        return false;
    bool ok = fputs("5", fp) >= 0;
    return fclose(fp) == 0 && ok;
}

/* A batch far larger decompressed than the window: 64 MiB of small
 * records, or one 20 MiB record (with headers around its value).  The
 * validator streams it: accepted, its buffers still the window, and the
 * process's peak RSS grows by far less than the decompressed size (a
 * whole decompression grew it by 64 MiB / 20 MiB).  Then the same batch
 * with one record too many is refused with the whole-batch message. */
static void validate_huge(int codec, bool one_big)
{
    static char val[20 << 20];
    memset(val, 'x', sizeof val);
    kp_buf out;
    kp_buf_init(&out);
    kp_batch_builder bb;
    kp_bb_init(&bb, &out, codec);
    kp_header hs[2] = { { { "h1", 2 }, { "v1", 2 } }, { { "h2", 2 }, KP_STR_NULL } };
    int32_t n = 0;
    size_t plain = 0;
    if (one_big) {
        kp_bb_add(&bb, 1700000000000LL, "key", 3, val, (int32_t)sizeof val, hs, 2);
        n = 1;
        plain = sizeof val;
    } else {
        for (; plain < (size_t)64 << 20; plain += 100, n++)
            kp_bb_add(&bb, 1700000000000LL + n % 1000, "k", 1, val, 100, hs, n % 3);
    }
    int64_t size = kp_bb_finish(&bb);
    kp_bb_free(&bb);
    ck_assert(size > 0);

    kp_validator v;
    kp_validator_init(&v);
    kp_val_rules compact = no_rules;
    compact.key_required = true;
    kp_val_fault f;
    bool measured = rss_peak_reset();
    long before = rss_peak_kib();
    ck_assert_int_eq(validate_all_one(&v, out.data, (size_t)size, &compact, &f), 0);
    long grew = rss_peak_kib() - before;
    ck_assert_uint_eq(v.win_cap, KP_VAL_WINDOW);
    ck_assert_uint_le(v.codec.snappy.cap, (size_t)64 << 10);   /* xerial blocks */
    if (measured)
        ck_assert_msg(grew < (long)(plain >> 10) / 4,
                      "codec %d: peak RSS grew %ld KiB validating %zu KiB",
                      codec, grew, plain >> 10);

    /* RecordsCount one too many: "missing", as a whole decompression says */
    uint8_t *p = out.data;
    uint32_t c = (uint32_t)n + 1, lod = (uint32_t)n;
    p[23] = (uint8_t)(lod >> 24); p[24] = (uint8_t)(lod >> 16);
    p[25] = (uint8_t)(lod >> 8); p[26] = (uint8_t)lod;
    p[57] = (uint8_t)(c >> 24); p[58] = (uint8_t)(c >> 16);
    p[59] = (uint8_t)(c >> 8); p[60] = (uint8_t)c;
    uint32_t crc = kp_crc32c(0, p + KP_BATCH_CRC_START, (size_t)size - KP_BATCH_CRC_START);
    p[17] = (uint8_t)(crc >> 24); p[18] = (uint8_t)(crc >> 16);
    p[19] = (uint8_t)(crc >> 8);  p[20] = (uint8_t)crc;
    ck_assert_int_eq(validate_all_one(&v, out.data, (size_t)size, &no_rules, &f),
                     KP_E_MALFORMED);
    char want[128];
    snprintf(want, sizeof want, "Record %d in batch: missing: the records end after %d "
             "of RecordsCount %d", n, n, n + 1);
    ck_assert_str_eq(f.message, want);
    kp_validator_free(&v);
    kp_buf_free(&out);
}

START_TEST(test_validator_streams_batches_larger_than_its_window)
{
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        validate_huge(codec, false);
        validate_huge(codec, true);
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_readme_batch_validates, test_readme_batch_iterates,
        test_corrupt_crc_magic_count_codec_detected, test_rewrites_keep_crc_valid,
        test_builder_round_trips_every_codec, test_builder_reused_and_gaps,
        test_truncation_at_every_byte_is_an_error, test_truncated_records_area_with_fixed_crc,
        test_random_byte_flips_never_crash, test_hostile_record_counts_bounded,
        test_validator_accepts_every_built_batch, test_validator_calls_the_record_hook,
        test_validator_reuses_its_buffers,
        test_validator_refuses_poison_with_a_valid_crc,
        test_validator_streams_batches_larger_than_its_window,
    };
    return unit_run("kp_batch", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 120);
}
