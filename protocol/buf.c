/*
 * buf.c — the growable write buffer (kp_buf) and the kp_wr_* encoders.
 *
 * Promises:
 *   1. Errors latch: once b->err is set (KP_E_NOMEM when growing fails,
 *      KP_E_MALFORMED when asked to encode something the wire cannot carry,
 *      e.g. a string longer than INT16_MAX), every later write is a no-op,
 *      so a writer checks b->err once at the end.
 *   2. kp_buf_reset keeps the memory: a connection's buffer grows to its
 *      high-water mark once and is then reused without allocation.
 *   3. All integers are written byte by byte (big-endian), never through a
 *      cast pointer, so alignment never matters.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

void kp_buf_init(kp_buf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->err = 0;
    b->records = NULL;
    b->records_arg = NULL;
}

void kp_buf_free(kp_buf *b)
{
    free(b->data);
    kp_buf_init(b);
}

static void buf_fail(kp_buf *b, int err)
{
    if (b->err == 0)
        b->err = err;
}

uint8_t *kp_buf_reserve(kp_buf *b, size_t n)
{
    if (b->err)
        return NULL;
    if (b->data && n <= b->cap - b->len)
        return b->data + b->len;     /* never NULL + 0: an empty buffer allocates */
    if (n > SIZE_MAX / 2 - b->len) {
        buf_fail(b, KP_E_NOMEM);
        return NULL;
    }
    size_t need = b->len + n;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) {
        buf_fail(b, KP_E_NOMEM);
        return NULL;
    }
    b->data = d;
    b->cap = cap;
    return d + b->len;
}

/* Short texts (a metric line, an error) go through a stack buffer: one
 * vsnprintf; longer ones are formatted again in place. */
void kp_buf_printf(kp_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        kp_wr_raw(b, small, (size_t)n);
        return;
    }
    uint8_t *p = kp_buf_reserve(b, (size_t)n + 1);
    if (!p)
        return;
    va_start(ap, fmt);
    vsnprintf((char *)p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void kp_wr_raw(kp_buf *b, const void *p, size_t n)
{
    uint8_t *d = kp_buf_reserve(b, n);
    if (!d)
        return;
    if (n)
        memcpy(d, p, n);
    b->len += n;
}

static void wr_be(kp_buf *b, uint64_t v, int n)
{
    uint8_t *d = kp_buf_reserve(b, (size_t)n);
    if (!d)
        return;
    for (int i = n - 1; i >= 0; i--) {
        d[i] = (uint8_t)v;
        v >>= 8;
    }
    b->len += (size_t)n;
}

void kp_wr_i8(kp_buf *b, int8_t v)   { wr_be(b, (uint8_t)v, 1); }
void kp_wr_i16(kp_buf *b, int16_t v) { wr_be(b, (uint16_t)v, 2); }
void kp_wr_i32(kp_buf *b, int32_t v) { wr_be(b, (uint32_t)v, 4); }
void kp_wr_i64(kp_buf *b, int64_t v) { wr_be(b, (uint64_t)v, 8); }
void kp_wr_u32(kp_buf *b, uint32_t v) { wr_be(b, v, 4); }
void kp_wr_bool(kp_buf *b, bool v)   { wr_be(b, v ? 1 : 0, 1); }

static void wr_leb(kp_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    int n = 0;
    while (v >= 0x80) {
        tmp[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (uint8_t)v;
    kp_wr_raw(b, tmp, (size_t)n);
}

void kp_wr_uvarint(kp_buf *b, uint32_t v) { wr_leb(b, v); }

void kp_wr_varint(kp_buf *b, int32_t v)
{
    wr_leb(b, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

void kp_wr_varlong(kp_buf *b, int64_t v)
{
    wr_leb(b, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void kp_wr_uuid(kp_buf *b, const uint8_t v[16])
{
    kp_wr_raw(b, v, 16);
}

/* Resolves the (pointer, length) convention: NULL → -1 (null), len < 0 →
 * strlen.  Returns the length, or -2 after latching when it cannot fit max. */
static int64_t str_len(kp_buf *b, const char *s, int32_t len, int64_t max)
{
    if (s == NULL)
        return -1;
    int64_t n = len < 0 ? (int64_t)strlen(s) : len;
    if (n > max) {
        buf_fail(b, KP_E_MALFORMED);
        return -2;
    }
    return n;
}

void kp_wr_string(kp_buf *b, const char *s, int32_t len)
{
    int64_t n = str_len(b, s, len, INT16_MAX);
    if (n < -1)
        return;
    kp_wr_i16(b, (int16_t)n);
    if (n > 0)
        kp_wr_raw(b, s, (size_t)n);
}

void kp_wr_compact_string(kp_buf *b, const char *s, int32_t len)
{
    int64_t n = str_len(b, s, len, INT32_MAX - 1);
    if (n < -1)
        return;
    kp_wr_uvarint(b, (uint32_t)(n + 1));
    if (n > 0)
        kp_wr_raw(b, s, (size_t)n);
}

void kp_wr_bytes(kp_buf *b, const void *p, int32_t len)
{
    if (p == NULL) {
        kp_wr_i32(b, -1);
        return;
    }
    if (len < 0) {
        buf_fail(b, KP_E_MALFORMED);
        return;
    }
    kp_wr_i32(b, len);
    kp_wr_raw(b, p, (size_t)len);
}

void kp_wr_compact_bytes(kp_buf *b, const void *p, int32_t len)
{
    if (p == NULL) {
        kp_wr_uvarint(b, 0);
        return;
    }
    if (len < 0) {
        buf_fail(b, KP_E_MALFORMED);
        return;
    }
    kp_wr_uvarint(b, (uint32_t)len + 1);
    kp_wr_raw(b, p, (size_t)len);
}

void kp_wr_str(kp_buf *b, kp_str s)
{
    if (s.len < 0)
        kp_wr_string(b, NULL, -1);
    else
        kp_wr_string(b, s.len ? s.p : "", s.len);
}

void kp_wr_array(kp_buf *b, int32_t n)
{
    kp_wr_i32(b, n < 0 ? -1 : n);
}

void kp_wr_compact_array(kp_buf *b, int32_t n)
{
    kp_wr_uvarint(b, n < 0 ? 0 : (uint32_t)n + 1);
}

void kp_wr_tags_empty(kp_buf *b)
{
    wr_be(b, 0, 1);
}

void kp_wr_string_v(kp_buf *b, bool flexible, const char *s, int32_t len)
{
    if (flexible)
        kp_wr_compact_string(b, s, len);
    else
        kp_wr_string(b, s, len);
}

void kp_wr_bytes_v(kp_buf *b, bool flexible, const void *p, int32_t len)
{
    if (flexible)
        kp_wr_compact_bytes(b, p, len);
    else
        kp_wr_bytes(b, p, len);
}

void kp_wr_array_v(kp_buf *b, bool flexible, int32_t n)
{
    if (flexible)
        kp_wr_compact_array(b, n);
    else
        kp_wr_array(b, n);
}

size_t kp_wr_i32_placeholder(kp_buf *b)
{
    size_t pos = b->len;
    kp_wr_i32(b, 0);
    return pos;
}

void kp_wr_i32_at(kp_buf *b, size_t pos, int32_t v)
{
    if (b->err || pos > b->len || b->len - pos < 4)
        return;
    uint32_t u = (uint32_t)v;
    b->data[pos] = (uint8_t)(u >> 24);
    b->data[pos + 1] = (uint8_t)(u >> 16);
    b->data[pos + 2] = (uint8_t)(u >> 8);
    b->data[pos + 3] = (uint8_t)u;
}
