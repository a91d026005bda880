/*
 * tests/unit/kp_msgs_check.h — what the tests of generated codecs share: an
 * output buffer and a decode arena per test (the fixture), byte-exact
 * comparison, whole-input decoding, and the round trip of every message at
 * every version with default values.
 */
#ifndef SLUICE_KP_MSGS_CHECK_H
#define SLUICE_KP_MSGS_CHECK_H

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

#define S(lit) ((kp_str){ lit, (int32_t)sizeof lit - 1 })

static kp_buf out;
static kp_arena arena;

static void setup(void)
{
    kp_buf_init(&out);
    kp_arena_init(&arena, 0);
}

static void teardown(void)
{
    kp_buf_free(&out);
    kp_arena_free(&arena);
}

static void assert_bytes(const kp_buf *b, const uint8_t *want, size_t n)
{
    ck_assert_int_eq(b->err, 0);
    ck_assert_uint_eq(b->len, n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(b->data[i] == want[i], "byte %zu: got 0x%02x, want 0x%02x",
                      i, b->data[i], want[i]);
}

#define ASSERT_BYTES(b, ...) do { \
        static const uint8_t want_[] = { __VA_ARGS__ }; \
        assert_bytes((b), want_, sizeof want_); \
    } while (0)

/* Decodes the whole of p with desc at version v into m; the cursor must
 * end exactly at the end of the input. */
static int dec_all(const kp_msg_desc *d, int16_t v, const void *p, size_t n, void *m)
{
    kp_rd r;
    kp_rd_init(&r, p, n);
    int rc = d->dec(&r, v, m, &arena);
    if (rc == 0 && kp_rd_left(&r) != 0)
        return -1;
    return rc;
}

/* Re-encoding a decoded message gives the same bytes. */
static void assert_reencodes(const kp_msg_desc *d, int16_t v, const void *m,
                             const uint8_t *want, size_t n)
{
    kp_buf b;
    kp_buf_init(&b);
    ck_assert_int_eq(d->enc(&b, v, m), 0);
    assert_bytes(&b, want, n);
    kp_buf_free(&b);
}

/* Every message of a table at every version: defaults encode, decode to
 * the end of the input, and re-encode to the same bytes. */
static void check_defaults_round_trip(const kp_msg_desc *descs, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const kp_msg_desc *d = &descs[i];
        void *m = calloc(1, d->size), *r = calloc(1, d->size);
        for (int16_t v = d->min_version; v <= d->max_version; v++) {
            d->init(m);
            kp_buf_reset(&out);
            ck_assert_msg(d->enc(&out, v, m) == 0, "%s v%d", d->name, v);
            ck_assert_msg(dec_all(d, v, out.data, out.len, r) == 0, "%s v%d", d->name, v);
            assert_reencodes(d, v, r, out.data, out.len);
            kp_arena_reset(&arena);
        }
        free(m);
        free(r);
    }
}

#endif
