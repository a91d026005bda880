/*
 * rd.c — the bounds-checked read cursor (kp_rd) and kp_str helpers.
 *
 * Promises:
 *   1. No read ever touches a byte outside [p, end).
 *   2. The first failure latches r->err (KP_E_TRUNCATED when the input ends
 *      inside a field, KP_E_MALFORMED when a length, count or varint is
 *      impossible); from then on every read returns 0 / an empty slice and
 *      the cursor does not move, so parsers check kp_rd_ok() once.
 *   3. No length or count read from the wire is trusted: a slice length must
 *      fit in the bytes left, an array count times its minimum element size
 *      must fit too, varints longer than their type allows are malformed.
 * Nothing here allocates.
 */
#include <string.h>

#include "protocol/kp.h"

void kp_rd_init(kp_rd *r, const void *buf, size_t len)
{
    r->p = buf;
    r->end = buf ? r->p + len : r->p;      /* NULL + 0 is undefined in C */
    r->err = 0;
}

static inline void fail(kp_rd *r, int err)
{
    if (r->err == 0)
        r->err = err;
}

/* The single gate every fixed-size read goes through. */
static inline const uint8_t *take(kp_rd *r, size_t n)
{
    if (r->err)
        return NULL;
    if ((size_t)(r->end - r->p) < n) {
        r->err = KP_E_TRUNCATED;
        return NULL;
    }
    const uint8_t *q = r->p;
    r->p += n;
    return q;
}

int8_t kp_rd_i8(kp_rd *r)
{
    const uint8_t *q = take(r, 1);
    return q ? (int8_t)q[0] : 0;
}

int16_t kp_rd_i16(kp_rd *r)
{
    const uint8_t *q = take(r, 2);
    return q ? (int16_t)(uint16_t)((uint16_t)q[0] << 8 | q[1]) : 0;
}

uint32_t kp_rd_u32(kp_rd *r)
{
    const uint8_t *q = take(r, 4);
    if (!q)
        return 0;
    return (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 | (uint32_t)q[2] << 8 | q[3];
}

int32_t kp_rd_i32(kp_rd *r)
{
    return (int32_t)kp_rd_u32(r);
}

int64_t kp_rd_i64(kp_rd *r)
{
    const uint8_t *q = take(r, 8);
    if (!q)
        return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | q[i];
    return (int64_t)v;
}

bool kp_rd_bool(kp_rd *r)
{
    return kp_rd_i8(r) != 0;
}

/* LEB128 of at most max_bytes; the last allowed byte may only carry the
 * bits that still fit (last_mask), else the encoding is over-long. */
static uint64_t rd_leb(kp_rd *r, int max_bytes, uint8_t last_mask)
{
    if (r->err)
        return 0;
    uint64_t v = 0;
    const uint8_t *q = r->p;
    for (int i = 0; i < max_bytes; i++) {
        if (q == r->end) {
            r->err = KP_E_TRUNCATED;
            return 0;
        }
        uint8_t b = *q++;
        if (i == max_bytes - 1 && (b & ~last_mask)) {
            r->err = KP_E_MALFORMED;
            return 0;
        }
        v |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            r->p = q;
            return v;
        }
    }
    r->err = KP_E_MALFORMED;          /* not reached: last_mask has no 0x80 */
    return 0;
}

uint32_t kp_rd_uvarint(kp_rd *r)
{
    return (uint32_t)rd_leb(r, 5, 0x0f);
}

int32_t kp_rd_varint(kp_rd *r)
{
    uint32_t u = kp_rd_uvarint(r);
    return (int32_t)((u >> 1) ^ (0u - (u & 1)));
}

int64_t kp_rd_varlong(kp_rd *r)
{
    uint64_t u = rd_leb(r, 10, 0x01);
    return (int64_t)((u >> 1) ^ (0ull - (u & 1)));
}

void kp_rd_uuid(kp_rd *r, uint8_t out[16])
{
    const uint8_t *q = take(r, 16);
    if (q)
        memcpy(out, q, 16);
    else
        memset(out, 0, 16);
}

void kp_rd_skip(kp_rd *r, size_t n)
{
    (void)take(r, n);
}

const uint8_t *kp_rd_raw(kp_rd *r, size_t n)
{
    return take(r, n);
}

/* len < 0 is null; otherwise the slice must fit. */
static kp_str slice(kp_rd *r, int64_t len)
{
    if (r->err)
        return KP_STR_NULL;
    if (len < 0)
        return KP_STR_NULL;
    if (len > INT32_MAX) {
        fail(r, KP_E_MALFORMED);
        return KP_STR_NULL;
    }
    const uint8_t *q = take(r, (size_t)len);
    if (r->err)
        return KP_STR_NULL;
    /* q is NULL only for an empty slice of a cursor over nothing */
    return (kp_str){ q ? (const char *)q : "", (int32_t)len };
}

kp_str kp_rd_string(kp_rd *r)
{
    int16_t n = kp_rd_i16(r);
    if (n < -1)
        fail(r, KP_E_MALFORMED);
    return slice(r, n);
}

kp_str kp_rd_compact_string(kp_rd *r)
{
    uint32_t n = kp_rd_uvarint(r);
    return slice(r, (int64_t)n - 1);
}

kp_str kp_rd_bytes(kp_rd *r)
{
    int32_t n = kp_rd_i32(r);
    if (n < -1)
        fail(r, KP_E_MALFORMED);
    return slice(r, n);
}

kp_str kp_rd_compact_bytes(kp_rd *r)
{
    return kp_rd_compact_string(r);
}

/* A count must be payable from the bytes left.  min_elem_size 0 is treated
 * as 1: an element that takes no bytes cannot be told apart from garbage. */
static int32_t bound_count(kp_rd *r, int64_t n, size_t min_elem_size)
{
    if (r->err)
        return 0;
    if (n < -1 || n > INT32_MAX) {
        fail(r, KP_E_MALFORMED);
        return 0;
    }
    if (n <= 0)
        return (int32_t)n;
    if (min_elem_size == 0)
        min_elem_size = 1;
    if ((uint64_t)n > kp_rd_left(r) / min_elem_size) {
        fail(r, KP_E_MALFORMED);
        return 0;
    }
    return (int32_t)n;
}

int32_t kp_rd_array(kp_rd *r, size_t min_elem_size)
{
    int32_t n = kp_rd_i32(r);
    return bound_count(r, n, min_elem_size);
}

int32_t kp_rd_compact_array(kp_rd *r, size_t min_elem_size)
{
    uint32_t n = kp_rd_uvarint(r);
    return bound_count(r, (int64_t)n - 1, min_elem_size);
}

int32_t kp_rd_array_nn(kp_rd *r, size_t min_elem_size)
{
    int32_t n = kp_rd_array(r, min_elem_size);
    if (n < 0) {
        fail(r, KP_E_MALFORMED);
        return 0;
    }
    return n;
}

kp_str kp_rd_string_nn(kp_rd *r)
{
    kp_str s = kp_rd_string(r);
    if (s.len < 0)
        fail(r, KP_E_MALFORMED);
    return s;
}

/* Every tag is unknown to us: read tag, read size, skip.  Each field takes
 * at least 2 bytes, which bounds the loop.  Order is not enforced (a
 * lenient reader; Kafka's own generated readers do not check it either). */
void kp_rd_tags(kp_rd *r)
{
    uint32_t n = kp_rd_uvarint(r);
    if (r->err)
        return;
    if (n > kp_rd_left(r) / 2) {
        fail(r, KP_E_MALFORMED);
        return;
    }
    for (uint32_t i = 0; i < n && !r->err; i++) {
        (void)kp_rd_uvarint(r);            /* tag */
        uint32_t size = kp_rd_uvarint(r);
        kp_rd_skip(r, size);
    }
}

kp_str kp_rd_str_v(kp_rd *r, bool flexible)
{
    return flexible ? kp_rd_compact_string(r) : kp_rd_string(r);
}

kp_str kp_rd_bytes_v(kp_rd *r, bool flexible)
{
    return flexible ? kp_rd_compact_bytes(r) : kp_rd_bytes(r);
}

int32_t kp_rd_array_v(kp_rd *r, bool flexible, size_t min_elem_size)
{
    return flexible ? kp_rd_compact_array(r, min_elem_size)
                    : kp_rd_array(r, min_elem_size);
}

/* ---- kp_str ------------------------------------------------------------- */

bool kp_str_eq(kp_str s, const char *cstr)
{
    if (s.len < 0 || cstr == NULL)
        return s.len < 0 && cstr == NULL;
    size_t n = strlen(cstr);
    return n == (size_t)s.len && (n == 0 || memcmp(s.p, cstr, n) == 0);
}

kp_str kp_str_cstr(const char *cstr)
{
    return cstr ? (kp_str){ cstr, (int32_t)strlen(cstr) } : KP_STR_NULL;
}

/* Returns the number of bytes copied (strlen(dst)); a null slice copies "". */
size_t kp_str_copy(kp_str s, char *dst, size_t cap)
{
    if (cap == 0)
        return 0;
    size_t n = s.len > 0 ? (size_t)s.len : 0;
    if (n > cap - 1)
        n = cap - 1;
    if (n)
        memcpy(dst, s.p, n);
    dst[n] = '\0';
    return n;
}

int kp_str_cmp(kp_str a, kp_str b)
{
    size_t la = a.len > 0 ? (size_t)a.len : 0, lb = b.len > 0 ? (size_t)b.len : 0;
    int c = memcmp(a.p ? a.p : "", b.p ? b.p : "", la < lb ? la : lb);
    if (c)
        return c;
    return (la > lb) - (la < lb);
}
