/*
 * schema/decode.c — records in Confluent's wire format: the id split off,
 * the Avro binary body validated against its schema (the produce path) or
 * decoded to JSON (SQL's value_json).
 *
 * Avro's binary encoding, as read here:
 *   null        nothing
 *   boolean     one byte, 0 or 1
 *   int, long   zig-zag varint (at most 5 / 10 bytes; an int must fit 32 bits)
 *   float       4 bytes little-endian IEEE 754; double 8
 *   bytes       long length (0 <= n <= bytes left), then n bytes; string the same
 *   record      its fields in order, nothing between
 *   enum        int index into the symbols
 *   array, map  blocks: long count n; n < 0: |n| items preceded by a long byte
 *               size; items (map: string key, value); ends with count 0
 *   union       long branch index, then the branch's value
 *   fixed       exactly size bytes
 *
 * One walker (dec_value) does both jobs: with out == NULL it only checks
 * (sch_avro_validate), else it also writes JSON.  Bounds (sch.h S3): the
 * recursion stops at SCH_MAX_VALUE_DEPTH (a recursive type can nest without
 * end, a body cannot), and every value decoded costs a step out of a budget
 * proportional to the body's length, so items that take no bytes (nulls,
 * empty records) in a block of 2^62 cannot loop.  Nothing is allocated:
 * the cursor lives on the stack.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "schema/sch_int.h"

int sch_wire_split(const uint8_t *p, size_t len, int32_t *id, size_t *body_off)
{
    if (!p || len < 5 || p[0] != 0)
        return -1;
    *id = (int32_t)(((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) |
                    (uint32_t)p[4]);
    *body_off = 5;
    return 0;
}

typedef struct {
    const uint8_t *p, *start, *end;
    uint64_t steps;            /* values still allowed */
    kp_buf *out;               /* NULL: validate only */
    char *why;
    size_t whylen;
    bool failed;
} dctx;

__attribute__((format(printf, 2, 3))) static int d_fail(dctx *d, const char *fmt, ...)
{
    if (!d->failed && d->why && d->whylen) {
        int n = snprintf(d->why, d->whylen, "at byte %zu: ", (size_t)(d->p - d->start));
        if (n >= 0 && (size_t)n < d->whylen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(d->why + n, d->whylen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    d->failed = true;
    return -1;
}

static int d_long(dctx *d, int64_t *v, int maxbytes)
{
    uint64_t u = 0;
    *v = 0;
    for (int shift = 0, i = 0; i < maxbytes; i++, shift += 7) {
        if (d->p >= d->end)
            return d_fail(d, "truncated varint");
        uint8_t b = *d->p++;
        u |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            return 0;
        }
    }
    return d_fail(d, "varint longer than %d bytes", maxbytes);
}

static int d_int(dctx *d, int64_t *v)
{
    if (d_long(d, v, 5) != 0)
        return -1;
    if (*v < INT32_MIN || *v > INT32_MAX)
        return d_fail(d, "int out of range");
    return 0;
}

/* Output: the common case (room left) inline; kp_wr_raw grows the buffer. */
static inline void w(dctx *d, const char *s, size_t n)
{
    kp_buf *b = d->out;
    if (b->data && !b->err && n <= b->cap - b->len) {
        memcpy(b->data + b->len, s, n);
        b->len += n;
        return;
    }
    kp_wr_raw(b, s, n);
}
#define W(d, lit) w(d, lit, sizeof lit - 1)

/* Bytes written as they are inside a JSON string. */
static const bool k_plain[256] = {
    [0x20] = 1, [0x21] = 1, [0x23 ... 0x5b] = 1, [0x5d ... 0x7f] = 1,
};

/* Text as a JSON string.  bytes: every byte is the code point of its value
 * (Avro's JSON encoding of bytes and fixed); else UTF-8, invalid sequences
 * replaced by U+FFFD so the output stays valid JSON. */
static void w_text(dctx *d, const uint8_t *s, size_t n, bool bytes)
{
    static const char hex[] = "0123456789abcdef";
    W(d, "\"");
    size_t run = 0, i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (k_plain[c]) { /* printable ASCII but '"' and '\\': the usual byte */
            i++;
            continue;
        }
        size_t clen = 0;
        if (c >= 0x80 && !bytes) { /* a well-formed UTF-8 sequence passes as it is */
            uint32_t cp = 0;
            clen = c >= 0xf5 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
            if (clen && i + clen <= n) {
                cp = c & (0x3f >> (clen - 1));
                for (size_t k = 1; k < clen; k++) {
                    if ((s[i + k] & 0xc0) != 0x80) {
                        clen = 0;
                        break;
                    }
                    cp = (cp << 6) | (s[i + k] & 0x3f);
                }
                if (clen && ((clen == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
                             (clen == 4 && (cp < 0x10000 || cp > 0x10ffff))))
                    clen = 0;
            } else {
                clen = 0;
            }
            if (clen) {
                i += clen;
                continue;
            }
        }
        w(d, (const char *)s + run, i - run);
        if (c >= 0x80 && bytes) {
            char u[2] = {(char)(0xc0 | (c >> 6)), (char)(0x80 | (c & 0x3f))};
            w(d, u, 2);
        } else if (c >= 0x80) {
            W(d, "\xef\xbf\xbd");
        } else if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            w(d, e, 2);
        } else if (c == '\n' || c == '\t' || c == '\r') {
            char e[2] = {'\\', c == '\n' ? 'n' : c == '\t' ? 't' : 'r'};
            w(d, e, 2);
        } else {
            char e[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            w(d, e, 6);
        }
        i++;
        run = i;
    }
    w(d, (const char *)s + run, n - run);
    W(d, "\"");
}

/* Decimal digits of v into buf (at least 21 bytes); returns the length.
 * snprintf was most of to_json's time (bench/sch_avro_bench.c). */
static size_t w_int(char *buf, int64_t v)
{
    char tmp[24];
    size_t n = 0, o = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        buf[o++] = '-';
    while (n)
        buf[o++] = tmp[--n];
    return o;
}

/* A finite double as JSON: when m / 10^k is x for some k <= 9 (m below
 * 2^53, so the division is exact but for its one rounding, as strtod's of
 * the decimal), those digits, which read back as x; else %.17g (%.9g for a
 * float, compared as a float). */
static size_t w_real(char *buf, double x, bool is_float)
{
    static const double p10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};
    if (fabs(x) < 1e9) {
        for (int k = 0; k <= 9; k++) {
            double m = nearbyint(x * p10[k]);
            if (fabs(m) >= 9007199254740992.0)
                break;
            double back = m / p10[k];
            if (is_float ? (float)back == (float)x : back == x) {
                int64_t mi = (int64_t)m;
                size_t o = 0;
                if (mi < 0 || (mi == 0 && signbit(x))) {
                    buf[o++] = '-';
                    mi = mi < 0 ? -mi : mi;
                }
                char dig[24];
                size_t nd = w_int(dig, mi);
                if ((size_t)k >= nd) { /* 0.000ddd */
                    buf[o++] = '0';
                    buf[o++] = '.';
                    for (size_t z = nd; z < (size_t)k; z++)
                        buf[o++] = '0';
                    memcpy(buf + o, dig, nd);
                    return o + nd;
                }
                memcpy(buf + o, dig, nd - (size_t)k);
                o += nd - (size_t)k;
                if (k) {
                    buf[o++] = '.';
                    memcpy(buf + o, dig + nd - k, (size_t)k);
                    o += (size_t)k;
                }
                return o;
            }
        }
    }
    return (size_t)snprintf(buf, 40, is_float ? "%.9g" : "%.17g", x);
}

/* A decimal's unscaled value (big-endian two's complement, up to 16 bytes)
 * as a JSON number with scale digits after the point; longer ones stay
 * bytes. */
static void w_decimal(dctx *d, const uint8_t *p, size_t n, int scale)
{
    if (n > 16) {
        w_text(d, p, n, true);
        return;
    }
    unsigned __int128 u = n && (p[0] & 0x80) ? ~(unsigned __int128)0 : 0;
    for (size_t i = 0; i < n; i++)
        u = (u << 8) | p[i];
    bool neg = n && (p[0] & 0x80);
    if (neg)
        u = ~u + 1;
    char dig[48];
    size_t nd = 0;
    do {
        dig[nd++] = (char)('0' + (int)(u % 10));
        u /= 10;
    } while (u);
    if (neg)
        W(d, "-");
    if ((size_t)scale >= nd) {
        W(d, "0.");
        for (size_t z = nd; z < (size_t)scale; z++)
            W(d, "0");
        while (nd)
            w(d, &dig[--nd], 1);
        return;
    }
    while (nd > (size_t)scale)
        w(d, &dig[--nd], 1);
    if (scale) {
        W(d, ".");
        while (nd)
            w(d, &dig[--nd], 1);
    }
}

static int d_value(dctx *d, const sch_node *t, int depth);

/* bytes, string: a long length then the bytes; *s, *n the slice. */
static int d_slice(dctx *d, const uint8_t **s, size_t *n)
{
    int64_t len;
    if (d_long(d, &len, 10) != 0)
        return -1;
    if (len < 0 || (uint64_t)len > (uint64_t)(d->end - d->p))
        return d_fail(d, "length %lld out of range", (long long)len);
    *s = d->p;
    *n = (size_t)len;
    d->p += len;
    return 0;
}

/* Arrays and maps: blocks of items until a count of 0. */
static int d_blocks(dctx *d, const sch_node *t, int depth)
{
    bool map = t->kind == SCH_K_MAP;
    bool first = true;
    if (d->out)
        w(d, map ? "{" : "[", 1);
    for (;;) {
        int64_t count;
        if (d_long(d, &count, 10) != 0)
            return -1;
        if (count == 0)
            break;
        if (count < 0) {
            int64_t size;
            if (count == INT64_MIN)
                return d_fail(d, "block count out of range");
            count = -count;
            if (d_long(d, &size, 10) != 0)
                return -1;
            if (size < 0 || (uint64_t)size > (uint64_t)(d->end - d->p))
                return d_fail(d, "block size %lld out of range", (long long)size);
        }
        if ((uint64_t)count > d->steps)
            return d_fail(d, "block of %lld items is more than the body can hold",
                          (long long)count);
        for (int64_t i = 0; i < count; i++) {
            if (d->out && !first)
                W(d, ",");
            first = false;
            if (map) {
                const uint8_t *k;
                size_t kn;
                if (d_slice(d, &k, &kn) != 0)
                    return -1;
                if (d->out) {
                    w_text(d, k, kn, false);
                    W(d, ":");
                }
            }
            if (d_value(d, t->items, depth + 1) != 0)
                return -1;
        }
    }
    if (d->out)
        w(d, map ? "}" : "]", 1);
    return 0;
}

static int d_value(dctx *d, const sch_node *t, int depth)
{
    if (depth > SCH_MAX_VALUE_DEPTH)
        return d_fail(d, "values nested deeper than %d", SCH_MAX_VALUE_DEPTH);
    if (d->steps == 0)
        return d_fail(d, "more values than the body's length allows");
    d->steps--;
    int64_t v;
    char num[40];
    const uint8_t *s;
    size_t n;
    switch (t->kind) {
    case SCH_K_NULL:
        if (d->out)
            W(d, "null");
        return 0;
    case SCH_K_BOOLEAN:
        if (d->p >= d->end)
            return d_fail(d, "truncated boolean");
        if (*d->p > 1)
            return d_fail(d, "boolean byte %u", *d->p);
        if (d->out) {
            if (*d->p)
                W(d, "true");
            else
                W(d, "false");
        }
        d->p++;
        return 0;
    case SCH_K_INT:
    case SCH_K_LONG:
        if ((t->kind == SCH_K_INT ? d_int(d, &v) : d_long(d, &v, 10)) != 0)
            return -1;
        if (d->out)
            w(d, num, w_int(num, v));
        return 0;
    case SCH_K_FLOAT:
    case SCH_K_DOUBLE: {
        size_t sz = t->kind == SCH_K_FLOAT ? 4 : 8;
        if ((size_t)(d->end - d->p) < sz)
            return d_fail(d, "truncated %s", sch_kind_name(t->kind));
        if (d->out) {
            uint64_t u = 0;
            for (size_t i = 0; i < sz; i++)
                u |= (uint64_t)d->p[i] << (8 * i);
            double x;
            if (sz == 4) {
                uint32_t u32 = (uint32_t)u;
                float f;
                memcpy(&f, &u32, 4);
                x = f;
            } else {
                memcpy(&x, &u, 8);
            }
            if (isnan(x) || isinf(x))
                W(d, "null");
            else
                w(d, num, w_real(num, x, sz == 4));
        }
        d->p += sz;
        return 0;
    }
    case SCH_K_BYTES:
    case SCH_K_STRING:
        if (d_slice(d, &s, &n) != 0)
            return -1;
        if (d->out && t->dec_scale >= 0)
            w_decimal(d, s, n, t->dec_scale);
        else if (d->out)
            w_text(d, s, n, t->kind == SCH_K_BYTES);
        return 0;
    case SCH_K_FIXED:
        if ((uint64_t)(d->end - d->p) < (uint64_t)t->size)
            return d_fail(d, "truncated fixed %s", t->full);
        if (d->out && t->dec_scale >= 0)
            w_decimal(d, d->p, (size_t)t->size, t->dec_scale);
        else if (d->out)
            w_text(d, d->p, (size_t)t->size, true);
        d->p += t->size;
        return 0;
    case SCH_K_ENUM:
        if (d_int(d, &v) != 0)
            return -1;
        if (v < 0 || (uint64_t)v >= t->nsymbols)
            return d_fail(d, "enum %s index %lld out of range", t->full, (long long)v);
        if (d->out)
            w_text(d, (const uint8_t *)t->symbols[v], strlen(t->symbols[v]), false);
        return 0;
    case SCH_K_UNION:
        if (d_long(d, &v, 10) != 0)
            return -1;
        if (v < 0 || (uint64_t)v >= t->nbranches)
            return d_fail(d, "union index %lld out of range", (long long)v);
        return d_value(d, t->branches[v], depth + 1);
    case SCH_K_ARRAY:
    case SCH_K_MAP:
        return d_blocks(d, t, depth);
    case SCH_K_RECORD:
        if (d->out)
            W(d, "{");
        for (size_t i = 0; i < t->nfields; i++) {
            if (d->out) {
                if (i)
                    W(d, ",");
                w_text(d, (const uint8_t *)t->fields[i].name, strlen(t->fields[i].name), false);
                W(d, ":");
            }
            if (d_value(d, t->fields[i].type, depth + 1) != 0)
                return -1;
        }
        if (d->out)
            W(d, "}");
        return 0;
    }
    return d_fail(d, "unknown type");
}

static int d_run(dctx *d, const sch_schema *s, const uint8_t *body, size_t len)
{
    d->p = d->start = body;
    d->end = body + len;
    /* Every value costs a step: 64 per byte, and a floor for bodies of
     * nulls and empty records. */
    d->steps = 4096 + 64 * (uint64_t)len;
    if (d_value(d, s->root, 0) != 0)
        return -1;
    if (d->p != d->end)
        return d_fail(d, "%zu bytes left after the value", (size_t)(d->end - d->p));
    return 0;
}

int sch_avro_validate(const sch_schema *s, const uint8_t *body, size_t len, char *why,
                      size_t whylen)
{
    dctx d = {.why = why, .whylen = whylen};
    return d_run(&d, s, body, len);
}

int sch_avro_to_json(const sch_schema *s, const uint8_t *body, size_t len, kp_buf *out)
{
    size_t mark = out->len;
    dctx d = {.out = out};
    if (d_run(&d, s, body, len) != 0 || out->err) {
        out->len = mark;
        return -1;
    }
    return 0;
}
