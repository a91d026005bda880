/* Compression: round trips, snappy's two framings, zstd frames without a
 * content size, concatenated streams, max_out, truncated and garbage input. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

static uint8_t *sample(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)("the quick brown fox "[i % 20] ^ ((i / 997) & 3));
    return p;
}

START_TEST(test_round_trip_every_codec_and_size)
{
    static const size_t sizes[] = { 0, 1, 100, 32 * 1024, 32 * 1024 + 1, 300000, 1 << 20 };
    for (int codec = KP_CODEC_NONE; codec <= KP_CODEC_ZSTD; codec++)
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t n = sizes[s];
            uint8_t *in = sample(n);
            kp_buf c, d;
            kp_buf_init(&c);
            kp_buf_init(&d);
            ck_assert_int_eq(kp_compress(codec, in, n, &c), 0);
            kp_wr_raw(&d, "xx", 2);                      /* appends */
            int rc = kp_decompress(codec, c.data, c.len, &d, n);
            ck_assert_msg(rc == 0, "codec %d size %zu: %d", codec, n, rc);
            ck_assert_int_eq(d.len, n + 2);
            ck_assert(n == 0 || memcmp(d.data + 2, in, n) == 0);
            /* One byte less room than needed: refused, out restored. */
            if (n > 0) {
                ck_assert_int_eq(kp_decompress(codec, c.data, c.len, &d, n - 1), KP_E_CODEC);
                ck_assert_int_eq(d.len, n + 2);
            }
            kp_buf_free(&c);
            kp_buf_free(&d);
            free(in);
        }
}
END_TEST

START_TEST(test_snappy_raw_block_as_librdkafka_sends)
{
    size_t n = 5000;
    uint8_t *in = sample(n);
    size_t cap = snappy_max_compressed_length(n), clen = cap;
    char *c = malloc(cap);
    ck_assert_int_eq(snappy_compress((const char *)in, n, c, &clen), SNAPPY_OK);
    kp_buf d;
    kp_buf_init(&d);
    ck_assert_int_eq(kp_decompress(KP_CODEC_SNAPPY, c, clen, &d, 1 << 20), 0);
    ck_assert_int_eq(d.len, n);
    ck_assert(memcmp(d.data, in, n) == 0);
    /* Declared length over max_out: refused before allocating. */
    ck_assert_int_eq(kp_decompress(KP_CODEC_SNAPPY, c, clen, &d, 100), KP_E_CODEC);
    /* A declared 200 MiB over 8 bytes (no snappy element expands more than
     * 21x): refused before reserving it, whatever max_out allows. */
    kp_buf_free(&d);
    kp_buf_init(&d);
    uint8_t lie[8] = { 0x80, 0x80, 0x80, 0x64, 0, 0, 0, 0 };   /* varint 200 << 20 */
    kp_codec_ctx ctx = KP_CODEC_CTX_INIT;
    ck_assert_int_eq(kp_decompress_ctx(&ctx, KP_CODEC_SNAPPY, lie, sizeof lie, &d, 256u << 20),
                     KP_E_CODEC);
    ck_assert_msg(ctx.snappy.cap < (1u << 20) && d.cap < (1u << 20),
                  "reserved %zu bytes for a lie", ctx.snappy.cap);
    kp_codec_ctx_free(&ctx);
    kp_buf_free(&d);
    free(c);
    free(in);
}
END_TEST

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);  p[3] = (uint8_t)v;
}

START_TEST(test_snappy_xerial_hand_framed)
{
    /* Three blocks of uneven size, framed as snappy-java does. */
    size_t n = 70000, cuts[] = { 0, 1000, 40000, 70000 };
    uint8_t *in = sample(n);
    kp_buf x;
    kp_buf_init(&x);
    static const uint8_t magic[8] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0 };
    uint8_t ver[8];
    put32(ver, 1);
    put32(ver + 4, 1);
    kp_wr_raw(&x, magic, 8);
    kp_wr_raw(&x, ver, 8);
    for (int b = 0; b < 3; b++) {
        size_t len = cuts[b + 1] - cuts[b];
        size_t clen = snappy_max_compressed_length(len);
        char *c = malloc(clen);
        ck_assert_int_eq(snappy_compress((const char *)in + cuts[b], len, c, &clen), SNAPPY_OK);
        uint8_t l[4];
        put32(l, (uint32_t)clen);
        kp_wr_raw(&x, l, 4);
        kp_wr_raw(&x, c, clen);
        free(c);
    }
    kp_buf d;
    kp_buf_init(&d);
    ck_assert_int_eq(kp_decompress(KP_CODEC_SNAPPY, x.data, x.len, &d, n), 0);
    ck_assert_int_eq(d.len, n);
    ck_assert(memcmp(d.data, in, n) == 0);
    /* Every truncation of the framing is an error, output restored. */
    for (size_t cut = 0; cut < x.len; cut += (cut < 64 ? 1 : 97)) {
        uint8_t *p = malloc(cut ? cut : 1);
        memcpy(p, x.data, cut);
        kp_buf_reset(&d);
        int rc = kp_decompress(KP_CODEC_SNAPPY, p, cut, &d, n);
        /* A cut exactly at a block boundary is a shorter valid stream. */
        if (rc == 0)
            ck_assert(cut == 16 || d.len < n);
        else
            ck_assert_int_eq(d.len, 0);
        free(p);
    }
    kp_buf_free(&d);
    kp_buf_free(&x);
    free(in);
}
END_TEST

START_TEST(test_zstd_frame_without_content_size)
{
    size_t n = 200000;
    uint8_t *in = sample(n);
    ZSTD_CStream *cs = ZSTD_createCStream();
    ZSTD_initCStream(cs, 3);
    size_t cap = ZSTD_compressBound(n) + 64;
    uint8_t *c = malloc(cap);
    ZSTD_outBuffer ob = { c, cap, 0 };
    ZSTD_inBuffer ib = { in, n, 0 };
    ck_assert(!ZSTD_isError(ZSTD_compressStream(cs, &ob, &ib)));
    ck_assert_int_eq(ZSTD_endStream(cs, &ob), 0);
    ZSTD_freeCStream(cs);
    ck_assert(ZSTD_getFrameContentSize(c, ob.pos) == ZSTD_CONTENTSIZE_UNKNOWN);
    kp_buf d;
    kp_buf_init(&d);
    ck_assert_int_eq(kp_decompress(KP_CODEC_ZSTD, c, ob.pos, &d, n), 0);
    ck_assert_int_eq(d.len, n);
    ck_assert(memcmp(d.data, in, n) == 0);
    ck_assert_int_eq(kp_decompress(KP_CODEC_ZSTD, c, ob.pos, &d, n / 2), KP_E_CODEC);
    ck_assert_int_eq(d.len, n);
    kp_buf_free(&d);
    free(c);
    free(in);
}
END_TEST

START_TEST(test_concatenated_streams)
{
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        if (codec == KP_CODEC_SNAPPY)
            continue;
        kp_buf c, d;
        kp_buf_init(&c);
        kp_buf_init(&d);
        ck_assert_int_eq(kp_compress(codec, "hello ", 6, &c), 0);
        ck_assert_int_eq(kp_compress(codec, "world", 5, &c), 0);
        ck_assert_int_eq(kp_decompress(codec, c.data, c.len, &d, 100), 0);
        ck_assert_int_eq(d.len, 11);
        ck_assert(memcmp(d.data, "hello world", 11) == 0);
        kp_buf_free(&c);
        kp_buf_free(&d);
    }
}
END_TEST

START_TEST(test_truncated_compressed_input_is_codec_error)
{
    size_t n = 3000;
    uint8_t *in = sample(n);
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf c, d;
        kp_buf_init(&c);
        kp_buf_init(&d);
        ck_assert_int_eq(kp_compress(codec, in, n, &c), 0);
        for (size_t cut = 0; cut < c.len; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, c.data, cut);
            kp_buf_reset(&d);
            int rc = kp_decompress(codec, p, cut, &d, n);
            if (codec == KP_CODEC_SNAPPY && cut == 16)
                ck_assert_int_eq(rc, 0);     /* xerial header alone: empty */
            else
                ck_assert_msg(rc == KP_E_CODEC, "codec %d cut %zu: %d", codec, cut, rc);
            if (rc)
                ck_assert_int_eq(d.len, 0);
            free(p);
        }
        kp_buf_free(&c);
        kp_buf_free(&d);
    }
    free(in);
}
END_TEST

START_TEST(test_garbage_and_flips_never_crash)
{
    srand(99);
    size_t n = 2000;
    uint8_t *in = sample(n);
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf c, d;
        kp_buf_init(&c);
        kp_buf_init(&d);
        ck_assert_int_eq(kp_compress(codec, in, n, &c), 0);
        for (int iter = 0; iter < 2000; iter++) {
            uint8_t *p = malloc(c.len);
            memcpy(p, c.data, c.len);
            p[rand() % c.len] ^= (uint8_t)(1 + rand() % 255);
            kp_buf_reset(&d);
            int rc = kp_decompress(codec, p, c.len, &d, 4096);
            ck_assert(rc == 0 || rc == KP_E_CODEC);
            ck_assert(d.len <= 4096);
            free(p);
        }
        uint8_t junk[64];
        for (int i = 0; i < 64; i++)
            junk[i] = (uint8_t)rand();
        kp_buf_reset(&d);
        (void)kp_decompress(codec, junk, sizeof junk, &d, 4096);
        kp_buf_free(&c);
        kp_buf_free(&d);
    }
    kp_buf d;
    kp_buf_init(&d);
    ck_assert_int_eq(kp_decompress(5, in, 10, &d, 100), KP_E_CODEC);
    ck_assert_int_eq(kp_compress(-1, in, 10, &d), KP_E_CODEC);
    ck_assert_int_eq(kp_decompress(KP_CODEC_NONE, in, 10, &d, 9), KP_E_CODEC);
    kp_buf_free(&d);
    free(in);
}
END_TEST

START_TEST(test_compression_bomb_bounded)
{
    /* 64 MiB of zeros compresses to a few KiB; max_out 1 MiB must stop it. */
    size_t n = 64u << 20;
    uint8_t *zeros = calloc(1, n);
    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf c, d;
        kp_buf_init(&c);
        kp_buf_init(&d);
        ck_assert_int_eq(kp_compress(codec, zeros, n, &c), 0);
        ck_assert_int_eq(kp_decompress(codec, c.data, c.len, &d, 1u << 20), KP_E_CODEC);
        ck_assert_int_eq(d.len, 0);
        ck_assert_msg(d.cap <= (2u << 20), "codec %d grew to %zu", codec, d.cap);
        kp_buf_free(&c);
        kp_buf_free(&d);
    }
    free(zeros);
}
END_TEST

START_TEST(test_gzip_output_is_gzip)
{
    kp_buf c;
    kp_buf_init(&c);
    ck_assert_int_eq(kp_compress(KP_CODEC_GZIP, "abc", 3, &c), 0);
    ck_assert_int_eq(c.data[0], 0x1f);
    ck_assert_int_eq(c.data[1], 0x8b);
    kp_buf_reset(&c);
    ck_assert_int_eq(kp_compress(KP_CODEC_LZ4, "abc", 3, &c), 0);
    ck_assert_int_eq(c.data[0], 0x04);          /* LZ4 frame magic 184D2204 LE */
    ck_assert_int_eq(c.data[3], 0x18);
    kp_buf_reset(&c);
    ck_assert_int_eq(kp_compress(KP_CODEC_SNAPPY, "abc", 3, &c), 0);
    ck_assert_int_eq(c.data[0], 0x82);
    kp_buf_free(&c);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_round_trip_every_codec_and_size, test_snappy_raw_block_as_librdkafka_sends,
        test_snappy_xerial_hand_framed, test_zstd_frame_without_content_size,
        test_concatenated_streams, test_truncated_compressed_input_is_codec_error,
        test_garbage_and_flips_never_crash, test_compression_bomb_bounded,
        test_gzip_output_is_gzip,
    };
    return unit_run("kp_codec", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 120);
}
