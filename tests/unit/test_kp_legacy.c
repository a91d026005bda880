/* The old message formats (protocol/legacy.c): magic 0 and 1 message sets,
 * plain and in gzip/snappy/lz4 wrappers, up-converted to one batch v2;
 * batches v2 down-converted to magic 0/1; a magic 1 set survives the round
 * trip byte for byte; corrupt input is refused. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

#define TS 1700000000000LL

typedef struct msg {
    const char *key, *value;      /* NULL: null */
    int64_t ts;
} msg;

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* One message set entry; value_raw/len override value (wrappers). */
static void add_entry(kp_buf *o, int64_t offset, int magic, int attrs, int64_t ts,
                      const char *key, const void *value, int32_t value_len)
{
    kp_wr_i64(o, offset);
    size_t at = o->len;
    kp_wr_i32(o, 0);
    kp_wr_u32(o, 0);
    kp_wr_i8(o, (int8_t)magic);
    kp_wr_i8(o, (int8_t)attrs);
    if (magic == 1)
        kp_wr_i64(o, ts);
    kp_wr_bytes(o, key, key ? (int32_t)strlen(key) : -1);
    kp_wr_bytes(o, value, value ? value_len : -1);
    ck_assert_int_eq(o->err, 0);
    size_t size = o->len - at - 4;
    put32(o->data + at, (uint32_t)size);
    put32(o->data + at + 4, (uint32_t)crc32(0, o->data + at + 8, (uInt)(size - 4)));
}

static void add_set(kp_buf *o, int magic, const msg *m, int n, int64_t first_offset)
{
    for (int i = 0; i < n; i++)
        add_entry(o, first_offset + i, magic, 0, m[i].ts, m[i].key, m[i].value,
                  m[i].value ? (int32_t)strlen(m[i].value) : -1);
}

static const msg three[] = {
    { "k0", "first", TS }, { NULL, "second", TS + 7 }, { "k2", NULL, TS - 3 }, { "", "", TS + 1 },
};
#define NTHREE 4

static bool str_is(kp_str s, const char *c)
{
    if (!c)
        return s.len < 0;
    return s.len == (int32_t)strlen(c) && !memcmp(s.p, c, (size_t)s.len);
}

/* Checks that the batch at b holds exactly m (timestamps: want_ts(i)). */
static void check_batch(const kp_buf *b, int64_t size, const msg *m, int n, bool magic0,
                        int codec)
{
    kp_batch h;
    ck_assert_int_eq(kp_batch_validate(b->data, b->len, &h), size);
    ck_assert_int_eq((int64_t)b->len, size);
    ck_assert_int_eq(h.RecordsCount, n);
    ck_assert_int_eq(h.LastOffsetDelta, n - 1);
    ck_assert(h.ProducerId == -1);
    ck_assert_int_eq(h.Attributes & KP_ATTR_CODEC_MASK, codec);
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    ck_assert_int_eq(kp_rec_iter_start(&it, b->data, b->len), 0);
    kp_record rec;
    for (int i = 0; i < n; i++) {
        ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 1);
        ck_assert_int_eq(rec.Offset, i);
        ck_assert(rec.Timestamp == (magic0 ? -1 : m[i].ts));
        ck_assert(str_is(rec.Key, m[i].key));
        ck_assert(str_is(rec.Value, m[i].value));
        ck_assert_int_eq(rec.HeadersCount, 0);
    }
    ck_assert_int_eq(kp_rec_iter_next(&it, &rec), 0);
    kp_rec_iter_free(&it);
}

START_TEST(test_magic0_and_magic1_sets_up_convert_to_one_batch)
{
    for (int magic = 0; magic <= 1; magic++) {
        kp_buf in, out;
        kp_buf_init(&in);
        kp_buf_init(&out);
        add_set(&in, magic, three, NTHREE, 0);
        int32_t count = 0;
        int64_t size = kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count);
        ck_assert_int_gt(size, 0);
        ck_assert_int_eq(count, NTHREE);
        check_batch(&out, size, three, NTHREE, magic == 0, KP_CODEC_NONE);
        kp_buf_free(&in);
        kp_buf_free(&out);
    }
}
END_TEST

/* A wrapper around the set, compressed with codec (inner offsets relative
 * for magic 1, absolute for magic 0). */
static void wrap(kp_buf *in, int magic, int codec, int attrs_extra, int64_t wrapper_ts,
                 const msg *m, int n)
{
    kp_buf inner, z;
    kp_buf_init(&inner);
    kp_buf_init(&z);
    add_set(&inner, magic, m, n, magic == 1 ? 0 : 100);
    ck_assert_int_eq(kp_compress(codec, inner.data, inner.len, &z), 0);
    add_entry(in, magic == 1 ? n - 1 : 100 + n - 1, magic, codec | attrs_extra, wrapper_ts,
              NULL, z.data, (int32_t)z.len);
    kp_buf_free(&inner);
    kp_buf_free(&z);
}

START_TEST(test_compressed_wrappers_up_convert_keeping_the_codec)
{
    const int codecs[] = { KP_CODEC_GZIP, KP_CODEC_SNAPPY, KP_CODEC_LZ4 };
    for (int magic = 0; magic <= 1; magic++)
        for (size_t c = 0; c < 3; c++) {
            kp_buf in, out;
            kp_buf_init(&in);
            kp_buf_init(&out);
            wrap(&in, magic, codecs[c], 0, TS, three, 2);
            wrap(&in, magic, codecs[c], 0, TS, three + 2, 2);   /* two wrappers */
            int32_t count = 0;
            int64_t size = kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count);
            ck_assert_int_gt(size, 0);
            ck_assert_int_eq(count, NTHREE);
            check_batch(&out, size, three, NTHREE, magic == 0, codecs[c]);
            kp_buf_free(&in);
            kp_buf_free(&out);
        }
}
END_TEST

START_TEST(test_log_append_time_wrapper_stamps_its_messages)
{
    kp_buf in, out;
    kp_buf_init(&in);
    kp_buf_init(&out);
    wrap(&in, 1, KP_CODEC_GZIP, 0x08, TS + 999, three, NTHREE);
    int32_t count;
    int64_t size = kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count);
    ck_assert_int_gt(size, 0);
    msg stamped[NTHREE];
    for (int i = 0; i < NTHREE; i++)
        stamped[i] = (msg){ three[i].key, three[i].value, TS + 999 };
    check_batch(&out, size, stamped, NTHREE, false, KP_CODEC_GZIP);
    kp_buf_free(&in);
    kp_buf_free(&out);
}
END_TEST

/* Promise 4: old clients' lz4 header checksum is wrong; magic 0 reads it. */
START_TEST(test_magic0_lz4_with_the_old_header_checksum_is_read)
{
    for (int magic = 0; magic <= 1; magic++) {
        kp_buf in, out;
        kp_buf_init(&in);
        kp_buf_init(&out);
        wrap(&in, magic, KP_CODEC_LZ4, 0, TS, three, NTHREE);
        /* value: after Offset, Size, Crc, Magic, Attrs, [Ts], KeyLen(-1), ValueLen */
        size_t vat = 12 + 4 + 2 + (magic ? 8 : 0) + 4 + 4;
        uint8_t *frame = in.data + vat;
        size_t hc_at = 4 + 2 + ((frame[4] & 0x08) ? 8 : 0) + ((frame[4] & 0x01) ? 4 : 0);
        frame[hc_at] ^= 0x5a;
        put32(in.data + 12, (uint32_t)crc32(0, in.data + 16, (uInt)(in.len - 16)));
        int32_t count;
        int64_t size = kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count);
        if (magic == 0) {
            ck_assert_int_gt(size, 0);
            check_batch(&out, size, three, NTHREE, true, KP_CODEC_LZ4);
        } else {
            ck_assert_int_eq(size, KP_E_CODEC);      /* magic 1 clients got it right */
        }
        kp_buf_free(&in);
        kp_buf_free(&out);
    }
}
END_TEST

START_TEST(test_corrupt_sets_are_refused)
{
    kp_buf in, out;
    int32_t count;
    kp_buf_init(&out);
    /* bad CRC */
    kp_buf_init(&in);
    add_set(&in, 1, three, NTHREE, 0);
    in.data[in.len - 1] ^= 1;
    ck_assert_int_eq(kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count), KP_E_CRC);
    /* every truncation inside an entry (a cut between entries is a
     * shorter, valid set) */
    in.data[in.len - 1] ^= 1;
    size_t ends[NTHREE];
    for (int k = 0; k < NTHREE; k++) {
        kp_buf pre;
        kp_buf_init(&pre);
        add_set(&pre, 1, three, k + 1, 0);
        ends[k] = pre.len;
        kp_buf_free(&pre);
    }
    for (size_t n = 1, k = 0; n < in.len; n++) {
        out.len = 0;
        int64_t rc = kp_legacy_to_batch(in.data, n, &out, 1 << 20, &count);
        if (n == ends[k]) {
            ck_assert_int_gt(rc, 0);
            ck_assert_int_eq(count, (int32_t)k + 1);
            k++;
        } else {
            ck_assert_msg(rc < 0, "truncated at %zu accepted", n);
            ck_assert_int_eq(out.len, 0);
        }
    }
    out.len = 0;
    kp_buf_free(&in);
    /* magic 2 inside a set */
    kp_buf_init(&in);
    add_entry(&in, 0, 2, 0, 0, "k", "v", 1);
    ck_assert_int_eq(kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count), KP_E_MAGIC);
    kp_buf_free(&in);
    /* a wrapper inside a wrapper */
    kp_buf_init(&in);
    kp_buf inner, z;
    kp_buf_init(&inner);
    kp_buf_init(&z);
    wrap(&inner, 1, KP_CODEC_GZIP, 0, TS, three, 1);
    ck_assert_int_eq(kp_compress(KP_CODEC_GZIP, inner.data, inner.len, &z), 0);
    add_entry(&in, 0, 1, KP_CODEC_GZIP, TS, NULL, z.data, (int32_t)z.len);
    ck_assert_int_eq(kp_legacy_to_batch(in.data, in.len, &out, 1 << 20, &count), KP_E_MALFORMED);
    /* an empty set */
    ck_assert_int_eq(kp_legacy_to_batch(in.data, 0, &out, 1 << 20, &count), KP_E_MALFORMED);
    /* a decompression bomb stays under max_out */
    ck_assert_int_eq(kp_legacy_to_batch(in.data, in.len, &out, 8, &count), KP_E_CODEC);
    ck_assert_int_eq(out.len, 0);
    kp_buf_free(&inner);
    kp_buf_free(&z);
    kp_buf_free(&in);
    kp_buf_free(&out);
}
END_TEST

/* got == want byte for byte; frees both. */
static void assert_same_and_free(kp_buf *got, kp_buf *want)
{
    ck_assert_int_eq(got->len, want->len);
    ck_assert(!memcmp(got->data, want->data, got->len));
    kp_buf_free(got);
    kp_buf_free(want);
}

START_TEST(test_batch_down_converts_from_an_offset)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_GZIP);
    kp_header h = { { "h", 1 }, { "v", 1 } };
    for (int i = 0; i < NTHREE; i++)
        kp_bb_add(&bb, three[i].ts, three[i].key, three[i].key ? (int32_t)strlen(three[i].key) : -1,
                  three[i].value, three[i].value ? (int32_t)strlen(three[i].value) : -1, &h, 1);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_batch_set_base_offset(b.data, 10);
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    for (int magic = 0; magic <= 1; magic++) {
        kp_buf got, want;
        kp_buf_init(&got);
        kp_buf_init(&want);
        ck_assert_int_eq(kp_batch_to_legacy(b.data, b.len, magic, 11, &it, &got), 0);
        for (int i = 1; i < NTHREE; i++)          /* headers dropped, uncompressed */
            add_entry(&want, 10 + i, magic, 0, three[i].ts, three[i].key, three[i].value,
                      three[i].value ? (int32_t)strlen(three[i].value) : -1);
        assert_same_and_free(&got, &want);
    }
    /* LogAppendTime: magic 1 says so in each message */
    kp_batch_set_log_append_time(b.data, TS + 5);
    kp_buf got, want;
    kp_buf_init(&got);
    kp_buf_init(&want);
    ck_assert_int_eq(kp_batch_to_legacy(b.data, b.len, 1, 0, &it, &got), 0);
    for (int i = 0; i < NTHREE; i++)
        add_entry(&want, 10 + i, 1, 0x08, TS + 5, three[i].key, three[i].value,
                  three[i].value ? (int32_t)strlen(three[i].value) : -1);
    assert_same_and_free(&got, &want);
    kp_rec_iter_free(&it);
    kp_buf_free(&b);
}
END_TEST

START_TEST(test_magic1_set_round_trips_byte_for_byte)
{
    kp_buf in, batch, back;
    kp_buf_init(&in);
    kp_buf_init(&batch);
    kp_buf_init(&back);
    add_set(&in, 1, three, NTHREE, 0);
    int32_t count;
    ck_assert_int_gt(kp_legacy_to_batch(in.data, in.len, &batch, 1 << 20, &count), 0);
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    ck_assert_int_eq(kp_batch_to_legacy(batch.data, batch.len, 1, 0, &it, &back), 0);
    assert_same_and_free(&back, &in);
    kp_rec_iter_free(&it);
    kp_buf_free(&batch);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_magic0_and_magic1_sets_up_convert_to_one_batch,
        test_compressed_wrappers_up_convert_keeping_the_codec,
        test_log_append_time_wrapper_stamps_its_messages,
        test_magic0_lz4_with_the_old_header_checksum_is_read,
        test_corrupt_sets_are_refused,
        test_batch_down_converts_from_an_offset,
        test_magic1_set_round_trips_byte_for_byte,
    };
    return unit_run("kp_legacy", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 60);
}
