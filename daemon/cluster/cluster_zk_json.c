/*
 * daemon/cluster/cluster_zk_json.c — Kafka's znode JSON, read and written (cluster_zk_json.h).
 *
 * Design note.
 *
 * The reader is a recursive-descent walk over (p, end) with a latching
 * error, in the manner of protocol/'s kp_rd: the first problem sets
 * r->err and every later read is a no-op that returns a neutral value, so
 * each znode parser walks its object and checks once at the end.
 *
 *   value   := object | array | string | number | true | false | null
 *   object  := '{' [ string ':' value { ',' string ':' value } ] '}'
 *   array   := '[' [ value { ',' value } ] ']'
 *
 * Invariants:
 *   J1. No read at or past end: every byte access is behind a p < end test
 *       (the input is a znode's bytes, not a C string).
 *   J2. Recursion is bounded: objects and arrays nest at most ZJ_DEPTH_MAX
 *       deep, so hostile input cannot exhaust the stack.
 *   J3. Numbers the parsers keep are integers read with an overflow test
 *       (no strtoll on unterminated bytes); skipped numbers are only
 *       checked for JSON's grammar.
 *   J4. Decoded strings never hold a NUL (\u0000 is refused): they become
 *       C strings for SQLite and logs.
 *   J5. On error a parser leaves nothing allocated for the caller to free.
 *
 * The writers emit Kafka's key order (ZkData.scala via Jackson) so a znode
 * written by Sluice reads like one written by Kafka.
 */
#include "daemon/cluster/cluster_zk_json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- the reader ------------------------------------------------------------------ */

typedef struct zj_rd {
    const char *start, *p, *end;
    int depth;
    bool failed;
    char *err;
    size_t errlen;
} zj_rd;

#define ZJ_KEY_MAX 128

static void fail(zj_rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(zj_rd *r, const char *fmt, ...)
{
    if (r->failed)
        return;
    r->failed = true;
    if (r->err && r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
}

static void rd_init(zj_rd *r, const char *json, size_t len, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->p = json ? json : "";
    r->end = r->p + (json ? len : 0);
    r->start = r->p;
    r->err = err;
    r->errlen = errlen;
    if (err && errlen)
        err[0] = 0;
}

static void ws(zj_rd *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

/* The next non-blank byte, not consumed; 0 at the end or after an error. */
static char peek(zj_rd *r)
{
    if (r->failed)
        return 0;
    ws(r);
    return r->p < r->end ? *r->p : 0;
}

static bool eat(zj_rd *r, char c)
{
    if (peek(r) != c)
        return false;
    r->p++;
    return true;
}

static void expect(zj_rd *r, char c, const char *where)
{
    if (r->failed)
        return;
    if (!eat(r, c)) {
        if (r->p >= r->end)
            fail(r, "%s: text ends where '%c' was expected", where, c);
        else
            fail(r, "%s: '%c' expected at byte %zu", where, c, (size_t)(r->p - r->start));
    }
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static bool hex4(zj_rd *r, unsigned *out)
{
    if (r->end - r->p < 4)
        return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(r->p[i]);
        if (h < 0)
            return false;
        v = v << 4 | (unsigned)h;
    }
    r->p += 4;
    *out = v;
    return true;
}

/* Appends byte c to out[cap] at *n, or notes the overflow. */
static void put(char *out, size_t cap, size_t *n, bool *over, char c)
{
    if (out && *n + 1 < cap)
        out[*n] = c;
    else
        *over = true;
    (*n)++;
}

/* Reads a string value into out[cap] (NUL-terminated).  Returns false
 * (r->err set) when it is not a well-formed string; *over tells whether it
 * did not fit (the cursor is past it either way).  out NULL: skip. */
static bool rd_string(zj_rd *r, char *out, size_t cap, bool *over, const char *where)
{
    size_t n = 0;
    bool dummy = false;
    if (!over)
        over = &dummy;
    *over = false;
    if (!eat(r, '"')) {
        fail(r, "%s: a string was expected", where);
        return false;
    }
    for (;;) {
        if (r->p >= r->end) {
            fail(r, "%s: text ends inside a string", where);
            return false;
        }
        unsigned char c = (unsigned char)*r->p++;
        if (c == '"')
            break;
        if (c < 0x20) {
            fail(r, "%s: control character in a string", where);
            return false;
        }
        if (c != '\\') {
            put(out, cap, &n, over, (char)c);
            continue;
        }
        if (r->p >= r->end) {
            fail(r, "%s: text ends inside a string", where);
            return false;
        }
        char e = *r->p++;
        unsigned u;
        switch (e) {
        case '"': case '\\': case '/': put(out, cap, &n, over, e); continue;
        case 'b': put(out, cap, &n, over, '\b'); continue;
        case 'f': put(out, cap, &n, over, '\f'); continue;
        case 'n': put(out, cap, &n, over, '\n'); continue;
        case 'r': put(out, cap, &n, over, '\r'); continue;
        case 't': put(out, cap, &n, over, '\t'); continue;
        case 'u':
            if (!hex4(r, &u)) {
                fail(r, "%s: bad \\u escape", where);
                return false;
            }
            break;
        default:
            fail(r, "%s: bad escape \\%c", where, e >= 0x20 && e < 0x7f ? e : '?');
            return false;
        }
        if (u >= 0xd800 && u <= 0xdbff) {            /* a surrogate pair */
            unsigned lo;
            if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u' ||
                (r->p += 2, !hex4(r, &lo)) || lo < 0xdc00 || lo > 0xdfff) {
                fail(r, "%s: unpaired surrogate in a \\u escape", where);
                return false;
            }
            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        } else if (u >= 0xdc00 && u <= 0xdfff) {
            fail(r, "%s: unpaired surrogate in a \\u escape", where);
            return false;
        }
        if (u == 0) {
            fail(r, "%s: \\u0000 in a string", where);    /* J4 */
            return false;
        }
        if (u < 0x80) {
            put(out, cap, &n, over, (char)u);
        } else if (u < 0x800) {
            put(out, cap, &n, over, (char)(0xc0 | u >> 6));
            put(out, cap, &n, over, (char)(0x80 | (u & 0x3f)));
        } else if (u < 0x10000) {
            put(out, cap, &n, over, (char)(0xe0 | u >> 12));
            put(out, cap, &n, over, (char)(0x80 | ((u >> 6) & 0x3f)));
            put(out, cap, &n, over, (char)(0x80 | (u & 0x3f)));
        } else {
            put(out, cap, &n, over, (char)(0xf0 | u >> 18));
            put(out, cap, &n, over, (char)(0x80 | ((u >> 12) & 0x3f)));
            put(out, cap, &n, over, (char)(0x80 | ((u >> 6) & 0x3f)));
            put(out, cap, &n, over, (char)(0x80 | (u & 0x3f)));
        }
    }
    if (out && cap)
        out[*over ? cap - 1 : n] = 0;
    return true;
}

/* A string that must fit out[cap]. */
static void rd_string_into(zj_rd *r, char *out, size_t cap, const char *where)
{
    bool over;
    if (rd_string(r, out, cap, &over, where) && over)
        fail(r, "%s: longer than %zu bytes", where, cap - 1);
}

/* A string value, malloc'd; NULL after an error. */
static char *rd_string_dup(zj_rd *r, const char *where)
{
    /* Decoded text is never longer than its escaped form: size by that
     * (to the closing quote; rd_string then checks the escapes). */
    if (peek(r) != '"') {
        fail(r, "%s: a string was expected", where);
        return NULL;
    }
    const char *q = r->p + 1;
    while (q < r->end && *q != '"')
        q += *q == '\\' ? 2 : 1;
    if (q > r->end)
        q = r->end;
    size_t cap = (size_t)(q - r->p) + 1;
    char *s = malloc(cap);
    if (!s) {
        fail(r, "%s: out of memory", where);
        return NULL;
    }
    rd_string(r, s, cap, NULL, where);
    if (r->failed) {
        free(s);
        return NULL;
    }
    return s;
}

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* An integer in [min, max] (J3).  A fraction or exponent is refused. */
static int64_t rd_int(zj_rd *r, int64_t min, int64_t max, const char *where)
{
    if (r->failed)
        return 0;
    ws(r);
    bool neg = r->p < r->end && *r->p == '-';
    const char *q = r->p + neg;
    if (q >= r->end || !is_digit(*q)) {
        fail(r, "%s: an integer was expected", where);
        return 0;
    }
    if (*q == '0' && q + 1 < r->end && is_digit(q[1])) {
        fail(r, "%s: leading zero in a number", where);
        return 0;
    }
    uint64_t v = 0;
    bool big = false;
    for (; q < r->end && is_digit(*q); q++) {
        if (v > (UINT64_MAX - 9) / 10)
            big = true;
        else
            v = v * 10 + (uint64_t)(*q - '0');
    }
    if (q < r->end && (*q == '.' || *q == 'e' || *q == 'E')) {
        fail(r, "%s: an integer was expected, not a fraction", where);
        return 0;
    }
    r->p = q;
    int64_t x;
    if (big || (!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1))
        big = true;
    else
        x = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    if (big || x < min || x > max) {
        fail(r, "%s: %s%s out of range [%lld, %lld]", where, neg ? "-" : "",
             big ? "a huge number" : "number", (long long)min, (long long)max);
        return 0;
    }
    return x;
}

/* One or more digits at *q (moved past them); false if none. */
static bool digits(const char **q, const char *end)
{
    const char *from = *q;
    while (*q < end && is_digit(**q))
        (*q)++;
    return *q > from;
}

/* Skips any JSON number (grammar checked, value ignored). */
static void skip_number(zj_rd *r)
{
    const char *q = r->p;
    if (q < r->end && *q == '-')
        q++;
    bool ok = digits(&q, r->end);
    if (ok && q < r->end && *q == '.') {
        q++;
        ok = digits(&q, r->end);
    }
    if (ok && q < r->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < r->end && (*q == '+' || *q == '-'))
            q++;
        ok = digits(&q, r->end);
    }
    if (!ok) {
        fail(r, "bad number at byte %zu", (size_t)(r->p - r->start));
        return;
    }
    r->p = q;
}

static bool eat_word(zj_rd *r, const char *w)
{
    size_t n = strlen(w);
    if (peek(r) == w[0] && (size_t)(r->end - r->p) >= n && !memcmp(r->p, w, n)) {
        r->p += n;
        return true;
    }
    return false;
}

/* null, consumed; false (nothing consumed) for anything else. */
static bool eat_null(zj_rd *r)
{
    return eat_word(r, "null");
}

static void enter(zj_rd *r)
{
    if (++r->depth > ZJ_DEPTH_MAX)
        fail(r, "nested deeper than %d levels", ZJ_DEPTH_MAX);
}

/* Iteration over an object's members / an array's elements.  *first
 * starts true.  open_ reads '{' or '['; more() returns true before each
 * member or element (its ',' consumed), false at the closing bracket
 * (consumed) or on error.  obj_next also reads the member's key and ':'. */
static bool open_(zj_rd *r, char c, const char *where)
{
    expect(r, c, where);
    if (r->failed)
        return false;
    enter(r);
    return !r->failed;
}

static bool obj_begin(zj_rd *r, const char *where) { return open_(r, '{', where); }
static bool arr_begin(zj_rd *r, const char *where) { return open_(r, '[', where); }

static bool more(zj_rd *r, bool *first, char close, const char *where)
{
    if (r->failed)
        return false;
    if (eat(r, close)) {
        r->depth--;
        return false;
    }
    if (!*first)
        expect(r, ',', where);
    *first = false;
    return !r->failed;
}

static bool arr_next(zj_rd *r, bool *first, const char *where)
{
    return more(r, first, ']', where);
}

static bool obj_next(zj_rd *r, bool *first, char key[ZJ_KEY_MAX], const char *where)
{
    if (!more(r, first, '}', where))
        return false;
    bool over;
    if (!rd_string(r, key, ZJ_KEY_MAX, &over, where))
        return false;
    if (over)
        key[0] = 0;                    /* longer than any key we know */
    expect(r, ':', where);
    return !r->failed;
}

static void skip_value(zj_rd *r)
{
    char c = peek(r), key[ZJ_KEY_MAX];
    bool first = true;
    switch (c) {
    case '{':
        if (obj_begin(r, "object"))
            while (obj_next(r, &first, key, "object"))
                skip_value(r);
        break;
    case '[':
        if (arr_begin(r, "array"))
            while (arr_next(r, &first, "array"))
                skip_value(r);
        break;
    case '"':
        rd_string(r, NULL, 0, NULL, "string");
        break;
    case 't': case 'f': case 'n':
        if (!eat_word(r, "true") && !eat_word(r, "false") && !eat_null(r))
            fail(r, "unexpected text at byte %zu", (size_t)(r->p - r->start));
        break;
    case 0:
        if (!r->failed)
            fail(r, "text ends where a value was expected");
        break;
    default:
        skip_number(r);
    }
}

/* The whole input was one value: only blanks may follow. */
static int rd_finish(zj_rd *r)
{
    if (!r->failed && peek(r) != 0)
        fail(r, "unexpected bytes after the JSON value");
    return r->failed ? -1 : 0;
}

/* An int64 written as a JSON string of digits (Kafka's "timestamp") or as
 * a number. */
static int64_t rd_int_or_string(zj_rd *r, int64_t min, int64_t max, const char *where)
{
    if (peek(r) != '"')
        return rd_int(r, min, max, where);
    char text[32];
    rd_string_into(r, text, sizeof text, where);
    if (r->failed)
        return 0;
    zj_rd sub;
    rd_init(&sub, text, strlen(text), r->err, r->errlen);
    int64_t v = rd_int(&sub, min, max, where);
    if (!sub.failed && sub.p != sub.end)
        fail(&sub, "%s: an integer was expected", where);
    if (sub.failed)
        r->failed = true;              /* sub wrote the message */
    return v;
}

/* A list of distinct broker ids >= 0 into ids[MD_REPLICAS_MAX]; what
 * names the list in errors ("partition 3" for its replicas, "isr"). */
static int32_t rd_ids(zj_rd *r, int32_t *ids, const char *what)
{
    bool first = true;
    int32_t n = 0;
    if (!arr_begin(r, what))
        return 0;
    while (arr_next(r, &first, what)) {
        int64_t id = rd_int(r, INT32_MIN, INT32_MAX, what);
        if (r->failed)
            break;
        if (id < 0) {
            fail(r, "%s: broker id %lld", what, (long long)id);
            break;
        }
        if (n == MD_REPLICAS_MAX) {
            fail(r, "%s: more than %d brokers", what, MD_REPLICAS_MAX);
            break;
        }
        for (int32_t i = 0; i < n; i++)
            if (ids[i] == id) {
                fail(r, "%s: broker %lld twice", what, (long long)id);
                return n;
            }
        ids[n++] = (int32_t)id;
    }
    return n;
}

/* ---- the writer ------------------------------------------------------------------ */

static void w_raw(kp_buf *b, const char *s)
{
    kp_wr_raw(b, s, strlen(s));
}

static void w_fmt(kp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void w_fmt(kp_buf *b, const char *fmt, ...)
{
    char small[96];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n > 0)
        kp_wr_raw(b, small, (size_t)n < sizeof small ? (size_t)n : sizeof small - 1);
}

/* A JSON string: quotes, backslashes and control bytes escaped. */
static void w_str(kp_buf *b, const char *s, size_t n)
{
    kp_wr_raw(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        kp_wr_raw(b, s + run, i - run);
        run = i + 1;
        if (c == '"' || c == '\\') {
            char e[2] = { '\\', (char)c };
            kp_wr_raw(b, e, 2);
        } else {
            w_fmt(b, "\\u%04x", c);
        }
    }
    kp_wr_raw(b, s + run, n - run);
    kp_wr_raw(b, "\"", 1);
}

static void w_cstr(kp_buf *b, const char *s)
{
    w_str(b, s, strlen(s));
}

static void w_ids(kp_buf *b, const int32_t *ids, int32_t n)
{
    kp_wr_raw(b, "[", 1);
    for (int32_t i = 0; i < n; i++)
        w_fmt(b, "%s%d", i ? "," : "", (int)ids[i]);
    kp_wr_raw(b, "]", 1);
}

static int w_done(kp_buf *b)
{
    return b->err ? -1 : 0;
}

/* ---- znode ids ------------------------------------------------------------------- */

int cl_zj_id_parse(const char *name, size_t len, int32_t *out)
{
    if (!name || len == 0 || len > 10 || (name[0] == '0' && len > 1))
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!is_digit(name[i]))
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    if (v > INT32_MAX)
        return -1;
    *out = (int32_t)v;
    return 0;
}

/* ---- /brokers/ids/<id> ----------------------------------------------------------- */

/* "NAME://host:port" → host (brackets of an IPv6 literal removed), port. */
static bool split_endpoint(const char *ep, size_t n, char *host, size_t hostcap,
                           int32_t *port)
{
    const char *sep = memmem(ep, n, "://", 3);
    if (!sep)
        return false;
    const char *h = sep + 3, *end = ep + n, *colon = NULL;
    for (const char *q = h; q < end; q++)
        if (*q == ':')
            colon = q;
    if (!colon || colon + 1 == end)
        return false;
    int32_t pv = 0;
    for (const char *q = colon + 1; q < end; q++) {
        if (!is_digit(*q) || pv > 65535)
            return false;
        pv = pv * 10 + (*q - '0');
    }
    if (pv > 65535)
        return false;
    const char *he = colon;
    if (he - h >= 2 && h[0] == '[' && he[-1] == ']') {
        h++;
        he--;
    }
    if ((size_t)(he - h) >= hostcap)
        return false;
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = 0;
    *port = pv;
    return true;
}

/* A host name or address as it may stand in a comma-joined endpoint list. */
static bool host_ok(const char *h)
{
    return !strpbrk(h, ", \t\r\n");
}

/* NAME://host:port, NAME a listener name ([A-Za-z0-9_-]+). */
static bool endpoint_ok(const char *ep, size_t n)
{
    const char *sep = memmem(ep, n, "://", 3);
    if (!sep || sep == ep)
        return false;
    for (const char *q = ep; q < sep; q++)
        if (!((*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z') || is_digit(*q) ||
              *q == '_' || *q == '-'))
            return false;
    char host[256];
    int32_t port;
    return split_endpoint(ep, n, host, sizeof host, &port) && host_ok(host);
}

int cl_zj_broker_parse(const char *json, size_t len, zj_broker *out, char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    memset(out, 0, sizeof *out);
    out->id = -1;
    out->port = -1;
    out->timestamp_ms = -1;
    bool host_set = false, first = true;
    char key[ZJ_KEY_MAX];
    size_t elen = 0;
    if (obj_begin(&r, "broker registration"))
        while (obj_next(&r, &first, key, "broker registration")) {
            if (!strcmp(key, "host")) {
                if (!eat_null(&r)) {
                    rd_string_into(&r, out->host, sizeof out->host, "host");
                    host_set = true;
                    /* It becomes an endpoint in a comma-joined list. */
                    if (!r.failed && !host_ok(out->host))
                        fail(&r, "host \"%.64s\" is not a host name", out->host);
                }
            } else if (!strcmp(key, "port")) {
                out->port = (int32_t)rd_int(&r, -1, 65535, "port");
            } else if (!strcmp(key, "rack")) {
                if (!eat_null(&r))
                    rd_string_into(&r, out->rack, sizeof out->rack, "rack");
            } else if (!strcmp(key, "timestamp")) {
                out->timestamp_ms = rd_int_or_string(&r, INT64_MIN, INT64_MAX, "timestamp");
            } else if (!strcmp(key, "endpoints")) {
                bool f2 = true;
                if (arr_begin(&r, "endpoints"))
                    while (arr_next(&r, &f2, "endpoints")) {
                        char ep[sizeof out->endpoints];
                        rd_string_into(&r, ep, sizeof ep, "endpoint");
                        if (r.failed)
                            break;
                        size_t n = strlen(ep);
                        if (!endpoint_ok(ep, n)) {
                            fail(&r, "endpoint \"%.64s\" is not NAME://host:port", ep);
                            break;
                        }
                        if (elen + !!elen + n >= sizeof out->endpoints) {
                            fail(&r, "endpoints: longer than %zu bytes together",
                                 sizeof out->endpoints - 1);
                            break;
                        }
                        if (elen)
                            out->endpoints[elen++] = ',';
                        memcpy(out->endpoints + elen, ep, n + 1);
                        elen += n;
                    }
            } else {
                skip_value(&r);
            }
        }
    if (rd_finish(&r))
        return -1;
    for (const char *e = out->endpoints; *e && out->neps < ZJ_EPS_MAX;) {
        const char *comma = strchr(e, ',');
        size_t n = comma ? (size_t)(comma - e) : strlen(e);
        struct zj_endpoint *ep = &out->eps[out->neps];
        const char *sep = memmem(e, n, "://", 3);       /* endpoint_ok: there */
        size_t nl = (size_t)(sep - e);
        if (nl < sizeof ep->name &&
            split_endpoint(e, n, ep->host, sizeof ep->host, &ep->port)) {
            memcpy(ep->name, e, nl);
            ep->name[nl] = 0;
            out->neps++;
        }
        e += n + !!comma;
    }
    if (!host_set || out->port < 0) {
        /* Kafka writes host null (port -1) without a PLAINTEXT listener:
         * take the PLAINTEXT endpoint, else the first. */
        const char *pick = NULL, *e = out->endpoints;
        size_t picklen = 0;
        while (*e) {
            const char *comma = strchr(e, ',');
            size_t n = comma ? (size_t)(comma - e) : strlen(e);
            if (!pick || (!strncmp(e, "PLAINTEXT://", 12) && strncmp(pick, "PLAINTEXT://", 12))) {
                pick = e;
                picklen = n;
            }
            e += n + !!comma;
        }
        if (!pick) {
            snprintf(err, errlen, "broker registration has neither host and port "
                     "nor an endpoint");
            return -1;
        }
        if (!split_endpoint(pick, picklen, out->host, sizeof out->host, &out->port)) {
            snprintf(err, errlen, "endpoint \"%.*s\" is not NAME://host:port",
                     (int)(picklen > 64 ? 64 : picklen), pick);
            return -1;
        }
    }
    return 0;
}

/* Kafka's security protocols: a listener named like one maps to it. */
static const char *protocol_of(const char *name, size_t n)
{
    static const char *const protos[] = { "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL" };
    for (size_t i = 0; i < 4; i++)
        if (strlen(protos[i]) == n && !memcmp(protos[i], name, n))
            return protos[i];
    return "PLAINTEXT";
}

const struct zj_endpoint *cl_zj_broker_endpoint(const zj_broker *b, const char *name)
{
    for (int i = 0; i < b->neps; i++)
        if (!strcasecmp(b->eps[i].name, name))
            return &b->eps[i];
    return NULL;
}

/* name's protocol in map ("NAME:PROTO,..."), else protocol_of. */
static void w_protocol(kp_buf *out, const char *map, const char *name, size_t n)
{
    for (const char *e = map; *e;) {
        const char *comma = strchr(e, ',');
        size_t len = comma ? (size_t)(comma - e) : strlen(e);
        if (len > n && e[n] == ':' && !strncmp(e, name, n)) {
            w_str(out, e + n + 1, len - n - 1);
            return;
        }
        e += len + !!comma;
    }
    w_cstr(out, protocol_of(name, n));
}

int cl_zj_broker_format(const zj_broker *b, kp_buf *out)
{
    char dflt[sizeof b->host + 32];
    const char *eps = b->endpoints;
    if (!eps[0]) {
        bool v6 = strchr(b->host, ':') != NULL;
        snprintf(dflt, sizeof dflt, "PLAINTEXT://%s%s%s:%d", v6 ? "[" : "", b->host,
                 v6 ? "]" : "", (int)b->port);
        eps = dflt;
    }
    w_raw(out, "{\"features\":{},\"listener_security_protocol_map\":{");
    for (const char *e = eps; *e;) {
        const char *comma = strchr(e, ','), *sep = strstr(e, "://");
        size_t n = comma ? (size_t)(comma - e) : strlen(e);
        size_t name = sep && (size_t)(sep - e) < n ? (size_t)(sep - e) : n;
        if (e != eps)
            kp_wr_raw(out, ",", 1);
        w_str(out, e, name);
        kp_wr_raw(out, ":", 1);
        w_protocol(out, b->protocol_map, e, name);
        e += n + !!comma;
    }
    w_raw(out, "},\"endpoints\":[");
    for (const char *e = eps; *e;) {
        const char *comma = strchr(e, ',');
        size_t n = comma ? (size_t)(comma - e) : strlen(e);
        if (e != eps)
            kp_wr_raw(out, ",", 1);
        w_str(out, e, n);
        e += n + !!comma;
    }
    w_fmt(out, "],\"jmx_port\":-1,\"port\":%d,\"host\":", (int)b->port);
    w_cstr(out, b->host);
    w_fmt(out, ",\"version\":5,\"timestamp\":\"%lld\"", (long long)b->timestamp_ms);
    if (b->rack[0]) {
        w_raw(out, ",\"rack\":");
        w_cstr(out, b->rack);
    }
    kp_wr_raw(out, "}", 1);
    return w_done(out);
}

/* ---- /brokers/topics/<t> --------------------------------------------------------- */

struct pentry {
    int32_t p;
    md_partition_state st;
};

static int cmp_pentry(const void *a, const void *b)
{
    const struct pentry *x = a, *y = b;
    return (x->p > y->p) - (x->p < y->p);
}

/* The "partitions" object (name "partitions"), or one of the
 * reassignment maps ("adding_replicas", "removing_replicas": the same
 * shape, empty lists allowed), into a malloc'd array, unordered. */
static struct pentry *rd_partitions(zj_rd *r, const char *name, size_t *count)
{
    bool assignment = !strcmp(name, "partitions");
    struct pentry *v = NULL;
    size_t n = 0, cap = 0;
    bool first = true;
    char key[ZJ_KEY_MAX];
    if (obj_begin(r, name))
        while (obj_next(r, &first, key, name)) {
            int32_t p;
            if (cl_zj_id_parse(key, strlen(key), &p)) {
                fail(r, "%s: \"%.32s\" is not a partition number", name, key);
                break;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 16;
                struct pentry *nv = realloc(v, cap * sizeof *v);
                if (!nv) {
                    fail(r, "%s: out of memory", name);
                    break;
                }
                v = nv;
            }
            struct pentry *e = &v[n++];
            memset(e, 0, sizeof *e);
            e->p = p;
            e->st.leader = -1;
            e->st.zk_version = -1;
            char where[48];
            snprintf(where, sizeof where, "%s%spartition %d", assignment ? "" : name,
                     assignment ? "" : ": ", (int)p);
            e->st.nreplicas = rd_ids(r, e->st.replicas, where);
            if (!r->failed && e->st.nreplicas == 0 && assignment)
                fail(r, "partition %d: no replicas", (int)p);
        }
    *count = n;
    return v;
}

/* A reassignment map's ids as bits over each partition's replica
 * positions.  Partitions the topic lacks and ids that are not replicas
 * are ignored: Kafka's controller keeps both lists within the replicas,
 * and a stray id must not cost the whole topic its mirror. */
static void mark_reassigning(md_partition_state *parts, size_t n, const struct pentry *m,
                             size_t nm, bool add)
{
    for (size_t i = 0; i < nm; i++) {
        if ((size_t)m[i].p >= n)
            continue;
        md_partition_state *st = &parts[m[i].p];
        for (int32_t j = 0; j < m[i].st.nreplicas; j++)
            for (int32_t k = 0; k < st->nreplicas; k++)
                if (st->replicas[k] == m[i].st.replicas[j])
                    *(add ? &st->adding : &st->removing) |= 1u << k;
    }
}

/* A reassignment map: each partition with bits set in mask, its ids. */
static void w_reassigning(kp_buf *out, const char *name, const md_partition_state *parts,
                          int32_t n, bool add)
{
    w_fmt(out, ",\"%s\":{", name);
    bool first = true;
    for (int32_t p = 0; p < n; p++) {
        uint32_t mask = add ? parts[p].adding : parts[p].removing;
        if (!mask)
            continue;
        int32_t ids[MD_REPLICAS_MAX], k = 0;
        for (int32_t i = 0; i < parts[p].nreplicas; i++)
            if (mask >> i & 1)
                ids[k++] = parts[p].replicas[i];
        w_fmt(out, "%s\"%d\":", first ? "" : ",", (int)p);
        w_ids(out, ids, k);
        first = false;
    }
    w_raw(out, "}");
}

int cl_zj_topic_parse(const char *json, size_t len, zj_topic *out, char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    memset(out, 0, sizeof *out);
    struct pentry *v = NULL, *adding = NULL, *removing = NULL;
    size_t n = 0, nadding = 0, nremoving = 0;
    bool first = true, seen = false;
    char key[ZJ_KEY_MAX];
    if (obj_begin(&r, "topic"))
        while (obj_next(&r, &first, key, "topic")) {
            if (!strcmp(key, "topic_id")) {
                if (eat_null(&r))
                    continue;             /* no id (a skip_value now would eat the ',') */
                char text[32];
                rd_string_into(&r, text, sizeof text, "topic_id");
                if (!r.failed && md_uuid_from_text(text, strlen(text), out->id))
                    fail(&r, "topic_id \"%s\" is not a 22-character base64 UUID", text);
                out->has_id = !r.failed && memcmp(out->id, (uint8_t[16]){ 0 }, 16);
            } else if (!strcmp(key, "partitions")) {
                if (seen) {
                    fail(&r, "\"partitions\" given twice");
                    break;
                }
                seen = true;
                v = rd_partitions(&r, key, &n);
            } else if (!strcmp(key, "adding_replicas") || !strcmp(key, "removing_replicas")) {
                bool add = key[0] == 'a';
                if (add ? adding : removing) {
                    fail(&r, "\"%s\" given twice", key);
                    break;
                }
                if (!eat_null(&r))
                    *(add ? &adding : &removing) = rd_partitions(&r, key, add ? &nadding
                                                                              : &nremoving);
            } else {
                skip_value(&r);
            }
        }
    if (!rd_finish(&r) && !seen)
        fail(&r, "topic has no \"partitions\"");
    if (!r.failed && n == 0)
        fail(&r, "topic has no partitions");
    if (!r.failed && n > INT32_MAX)
        fail(&r, "topic has too many partitions");
    if (!r.failed) {
        qsort(v, n, sizeof *v, cmp_pentry);
        for (size_t i = 0; i < n && !r.failed; i++) {
            if (i > 0 && v[i].p == v[i - 1].p)
                fail(&r, "partition %d given twice", (int)v[i].p);
            else if ((size_t)v[i].p != i)
                fail(&r, "partition %zu missing (partitions must be 0..%zu)", i, n - 1);
        }
    }
    md_partition_state *parts = NULL;
    if (!r.failed && !(parts = malloc(n * sizeof *parts)))
        fail(&r, "out of memory");
    if (r.failed) {
        free(v);
        free(adding);
        free(removing);
        memset(out, 0, sizeof *out);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        parts[i] = v[i].st;
    free(v);
    mark_reassigning(parts, n, adding, nadding, true);
    mark_reassigning(parts, n, removing, nremoving, false);
    free(adding);
    free(removing);
    out->parts = parts;
    out->npartitions = (int32_t)n;
    return 0;
}

void cl_zj_topic_free(zj_topic *t)
{
    if (!t)
        return;
    free(t->parts);
    t->parts = NULL;
    t->npartitions = 0;
}

int cl_zj_topic_format(const uint8_t *id, const md_partition_state *parts, int32_t n,
                    kp_buf *out)
{
    if (id) {
        char text[MD_UUID_TEXT_LEN + 1];
        md_uuid_to_text(id, text);
        w_fmt(out, "{\"version\":3,\"topic_id\":\"%s\",\"partitions\":{", text);
    } else {
        w_raw(out, "{\"version\":2,\"partitions\":{");
    }
    for (int32_t p = 0; p < n; p++) {
        w_fmt(out, "%s\"%d\":", p ? "," : "", (int)p);
        w_ids(out, parts[p].replicas, parts[p].nreplicas);
    }
    w_raw(out, "}");
    w_reassigning(out, "adding_replicas", parts, n, true);
    w_reassigning(out, "removing_replicas", parts, n, false);
    w_raw(out, "}");
    return w_done(out);
}

/* ---- /brokers/topics/<t>/partitions/<p>/state ---------------------------------- */

int cl_zj_state_parse(const char *json, size_t len, md_partition_state *st,
                   char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    int32_t leader = -1, epoch = 0, cepoch = 0, nisr = 0, isr[MD_REPLICAS_MAX];
    bool has_leader = false, has_epoch = false, has_isr = false, has_cepoch = false;
    bool first = true;
    char key[ZJ_KEY_MAX];
    if (obj_begin(&r, "partition state"))
        while (obj_next(&r, &first, key, "partition state")) {
            if (!strcmp(key, "leader")) {
                leader = (int32_t)rd_int(&r, -1, INT32_MAX, "leader");
                has_leader = true;
            } else if (!strcmp(key, "leader_epoch")) {
                epoch = (int32_t)rd_int(&r, 0, INT32_MAX, "leader_epoch");
                has_epoch = true;
            } else if (!strcmp(key, "controller_epoch")) {
                cepoch = (int32_t)rd_int(&r, 0, INT32_MAX, "controller_epoch");
                has_cepoch = true;
            } else if (!strcmp(key, "isr")) {
                nisr = rd_ids(&r, isr, "isr");
                has_isr = true;
            } else {
                skip_value(&r);
            }
        }
    if (rd_finish(&r))
        return -1;
    const char *missing = !has_leader ? "leader" : !has_epoch ? "leader_epoch" :
                          !has_isr ? "isr" : !has_cepoch ? "controller_epoch" : NULL;
    if (missing) {
        snprintf(err, errlen, "partition state has no \"%s\"", missing);
        return -1;
    }
    st->leader = leader;
    st->leader_epoch = epoch;
    st->controller_epoch = cepoch;
    st->nisr = nisr;
    memcpy(st->isr, isr, (size_t)nisr * sizeof *isr);
    return 0;
}

int cl_zj_state_format(const md_partition_state *st, kp_buf *out)
{
    w_fmt(out, "{\"controller_epoch\":%d,\"leader\":%d,\"version\":1,\"leader_epoch\":%d,"
          "\"isr\":", (int)st->controller_epoch, (int)st->leader, (int)st->leader_epoch);
    w_ids(out, st->isr, st->nisr);
    kp_wr_raw(out, "}", 1);
    return w_done(out);
}

/* ---- /config/topics/<t> ------------------------------------------------------------ */

int cl_zj_config_parse(const char *json, size_t len, md_kv **kv, size_t *n,
                    char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    md_kv *v = NULL;
    size_t cnt = 0, cap = 0;
    bool first = true, seen = false;
    char key[ZJ_KEY_MAX];
    *kv = NULL;
    *n = 0;
    if (obj_begin(&r, "config"))
        while (obj_next(&r, &first, key, "config")) {
            if (strcmp(key, "config")) {
                skip_value(&r);
                continue;
            }
            if (seen) {
                fail(&r, "\"config\" given twice");
                break;
            }
            seen = true;
            bool f2 = true;
            if (!obj_begin(&r, "config"))
                break;
            while (more(&r, &f2, '}', "config")) {
                if (cnt == cap) {
                    cap = cap ? cap * 2 : 8;
                    md_kv *nv = realloc(v, cap * sizeof *v);
                    if (!nv) {
                        fail(&r, "config: out of memory");
                        break;
                    }
                    v = nv;
                }
                md_kv *e = &v[cnt];
                e->name = rd_string_dup(&r, "config name");
                expect(&r, ':', "config");
                e->value = NULL;
                if (!r.failed && eat_null(&r))
                    fail(&r, "config %.64s: value is null", e->name);
                else if (!r.failed && peek(&r) != '"')
                    fail(&r, "config %.64s: value must be a string", e->name);
                else
                    e->value = rd_string_dup(&r, "config value");
                cnt++;
                for (size_t i = 0; i + 1 < cnt && !r.failed; i++)
                    if (!strcmp(v[i].name, e->name))
                        fail(&r, "config %.64s given twice", e->name);
            }
        }
    if (rd_finish(&r)) {
        md_kv_free(v, cnt);
        return -1;
    }
    *kv = cnt ? v : NULL;
    if (!cnt)
        free(v);
    *n = cnt;
    return 0;
}

int cl_zj_config_format(const md_kv *kv, size_t n, kp_buf *out)
{
    w_raw(out, "{\"version\":1,\"config\":{");
    for (size_t i = 0; i < n; i++) {
        if (i)
            kp_wr_raw(out, ",", 1);
        w_cstr(out, kv[i].name);
        kp_wr_raw(out, ":", 1);
        w_cstr(out, kv[i].value);
    }
    w_raw(out, "}}");
    return w_done(out);
}

/* ---- /controller, /controller_epoch, /cluster/id --------------------------------- */

int cl_zj_controller_parse(const char *json, size_t len, int32_t *broker_id,
                        int64_t *timestamp_ms, char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    int64_t id = -1, ts = -1;
    bool first = true;
    char key[ZJ_KEY_MAX];
    if (obj_begin(&r, "controller"))
        while (obj_next(&r, &first, key, "controller")) {
            if (!strcmp(key, "brokerid"))
                id = rd_int(&r, 0, INT32_MAX, "brokerid");
            else if (!strcmp(key, "timestamp"))
                ts = rd_int_or_string(&r, INT64_MIN, INT64_MAX, "timestamp");
            else
                skip_value(&r);
        }
    if (rd_finish(&r))
        return -1;
    if (id < 0) {
        snprintf(err, errlen, "controller has no \"brokerid\"");
        return -1;
    }
    *broker_id = (int32_t)id;
    if (timestamp_ms)
        *timestamp_ms = ts;
    return 0;
}

int cl_zj_controller_format(int32_t broker_id, int64_t timestamp_ms, kp_buf *out)
{
    w_fmt(out, "{\"version\":2,\"brokerid\":%d,\"timestamp\":\"%lld\","
          "\"kraftControllerEpoch\":-1}", (int)broker_id, (long long)timestamp_ms);
    return w_done(out);
}

/* /latest_producer_id_block: Kafka's ProducerIdBlockZNode (ids as strings). */
int cl_zj_pid_block_parse(const char *json, size_t len, int64_t *block_end, char *err,
                          size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    int64_t end = -2;
    bool first = true;
    char key[ZJ_KEY_MAX];
    if (obj_begin(&r, "producer id block"))
        while (obj_next(&r, &first, key, "producer id block")) {
            if (!strcmp(key, "block_end"))
                end = rd_int_or_string(&r, -1, INT64_MAX, "block_end");
            else
                skip_value(&r);
        }
    if (rd_finish(&r))
        return -1;
    if (end < -1) {
        snprintf(err, errlen, "producer id block has no \"block_end\"");
        return -1;
    }
    *block_end = end;
    return 0;
}

int cl_zj_pid_block_format(int32_t broker_id, int64_t start, int64_t end, kp_buf *out)
{
    w_fmt(out, "{\"version\":1,\"broker\":%d,\"block_start\":\"%lld\",\"block_end\":\"%lld\"}",
          (int)broker_id, (long long)start, (long long)end);
    return w_done(out);
}

int cl_zj_epoch_parse(const char *text, size_t len, int32_t *epoch, char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, text, len, err, errlen);
    int64_t v = rd_int(&r, 0, INT32_MAX, "controller epoch");
    if (rd_finish(&r))
        return -1;
    *epoch = (int32_t)v;
    return 0;
}

int cl_zj_epoch_format(int32_t epoch, kp_buf *out)
{
    w_fmt(out, "%d", (int)epoch);
    return w_done(out);
}

int cl_zj_cluster_id_parse(const char *json, size_t len, char out[MD_CLUSTER_ID_MAX + 1],
                        char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    bool first = true;
    char key[ZJ_KEY_MAX];
    out[0] = 0;
    if (obj_begin(&r, "cluster id"))
        while (obj_next(&r, &first, key, "cluster id")) {
            if (!strcmp(key, "id"))
                rd_string_into(&r, out, MD_CLUSTER_ID_MAX + 1, "id");
            else
                skip_value(&r);
        }
    if (rd_finish(&r))
        return -1;
    if (!out[0]) {
        snprintf(err, errlen, "cluster id znode has no \"id\"");
        return -1;
    }
    return 0;
}

int cl_zj_cluster_id_format(const char *id, kp_buf *out)
{
    w_raw(out, "{\"version\":\"1\",\"id\":");
    w_cstr(out, id);
    kp_wr_raw(out, "}", 1);
    return w_done(out);
}

/* ---- /config/changes/config_change_<seq> -------------------------------------------- */

int cl_zj_config_change_parse(const char *json, size_t len, char *entity_path, size_t cap,
                           char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    char type[32] = "", name[MD_TOPIC_NAME_MAX + 1] = "";
    bool first = true;
    char key[ZJ_KEY_MAX];
    if (cap)
        entity_path[0] = 0;
    if (obj_begin(&r, "config change"))
        while (obj_next(&r, &first, key, "config change")) {
            if (!strcmp(key, "entity_path"))
                rd_string_into(&r, entity_path, cap, "entity_path");
            else if (!strcmp(key, "entity_type"))
                rd_string_into(&r, type, sizeof type, "entity_type");
            else if (!strcmp(key, "entity_name"))
                rd_string_into(&r, name, sizeof name, "entity_name");
            else
                skip_value(&r);
        }
    if (rd_finish(&r))
        return -1;
    if (cap && !entity_path[0] && type[0] && name[0] &&
        (size_t)snprintf(entity_path, cap, "%s/%s", type, name) >= cap) {
        snprintf(err, errlen, "config change: entity path longer than %zu bytes", cap - 1);
        return -1;
    }
    if (!cap || !entity_path[0]) {
        snprintf(err, errlen, "config change names no entity");
        return -1;
    }
    return 0;
}

int cl_zj_config_change_format(const char *entity_path, kp_buf *out)
{
    w_raw(out, "{\"version\":2,\"entity_path\":");
    w_cstr(out, entity_path);
    kp_wr_raw(out, "}", 1);
    return w_done(out);
}

/* ---- /log_dir_event_notification ----------------------------------------------------- */
int cl_zj_log_dir_event_parse(const char *json, size_t len, int32_t *broker, int32_t *event,
                           char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    int64_t id = -1, ev = -1;
    bool first = true;
    char key[ZJ_KEY_MAX];
    if (obj_begin(&r, "log dir event"))
        while (obj_next(&r, &first, key, "log dir event")) {
            if (!strcmp(key, "broker"))
                id = rd_int(&r, 0, INT32_MAX, "broker");
            else if (!strcmp(key, "event"))
                ev = rd_int(&r, INT32_MIN, INT32_MAX, "event");
            else
                skip_value(&r);
        }
    if (rd_finish(&r))
        return -1;
    if (id < 0) {
        snprintf(err, errlen, "log dir event has no \"broker\"");
        return -1;
    }
    *broker = (int32_t)id;
    *event = (int32_t)ev;
    return 0;
}

int cl_zj_log_dir_event_format(int32_t broker, int32_t event, kp_buf *out)
{
    w_fmt(out, "{\"version\":1,\"broker\":%d,\"event\":%d}", (int)broker, (int)event);
    return w_done(out);
}

/* ---- Kafka's Sanitizer (entity names in znode names) ------------------------------- */
int cl_zj_sanitize(const char *name, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        bool keep = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || *p == '.' || *p == '-' || *p == '_';
        if (o + (keep ? 1 : 3) >= cap)
            return -1;
        if (keep) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (o >= cap)
        return -1;
    out[o] = 0;
    return 0;
}

static int hex_val(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int cl_zj_desanitize(const char *name, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        if (c == '+') {
            c = ' ';
        } else if (c == '%') {
            int hi = hex_val(p[1]), lo = hi < 0 ? -1 : hex_val(p[2]);
            if (lo < 0 || (hi == 0 && lo == 0))
                return -1;
            c = (char)(hi << 4 | lo);
            p += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = c;
    }
    out[o] = 0;
    return 0;
}

/* ---- /kafka-acl/<type>/<name>, /kafka-acl-extended/prefixed/<type>/<name> ---------- */

int cl_zj_acls_parse(const char *json, size_t len, md_acl **out, size_t *n,
                  char *err, size_t errlen)
{
    zj_rd r;
    rd_init(&r, json, len, err, errlen);
    md_acl *v = NULL;
    size_t cnt = 0, cap = 0;
    bool first = true;
    char key[ZJ_KEY_MAX];
    *out = NULL;
    *n = 0;
    if (obj_begin(&r, "acls"))
        while (obj_next(&r, &first, key, "acls")) {
            if (strcmp(key, "acls")) {
                skip_value(&r);
                continue;
            }
            bool f2 = true;
            if (!arr_begin(&r, "acls"))
                break;
            while (arr_next(&r, &f2, "acls")) {
                if (cnt == cap) {
                    cap = cap ? cap * 2 : 8;
                    md_acl *nv = realloc(v, cap * sizeof *v);
                    if (!nv) {
                        fail(&r, "acls: out of memory");
                        break;
                    }
                    v = nv;
                }
                md_acl *e = &v[cnt++];
                *e = (md_acl){ 0 };
                bool f3 = true;
                if (!obj_begin(&r, "acl"))
                    break;
                while (obj_next(&r, &f3, key, "acl")) {
                    char **f = !strcmp(key, "principal") ? &e->principal
                             : !strcmp(key, "permissionType") ? &e->permission
                             : !strcmp(key, "operation") ? &e->operation
                             : !strcmp(key, "host") ? &e->host : NULL;
                    if (f && !*f)
                        *f = rd_string_dup(&r, key);
                    else
                        skip_value(&r);
                }
                if (!r.failed && (!e->principal || !e->permission || !e->operation || !e->host))
                    fail(&r, "acl %zu: principal, permissionType, operation and host "
                         "are all required", cnt - 1);
            }
        }
    if (rd_finish(&r)) {
        md_acl_free(v, cnt);
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
}

int cl_zj_acls_format(const md_acl *acls, size_t n, kp_buf *out)
{
    w_raw(out, "{\"version\":1,\"acls\":[");
    for (size_t i = 0; i < n; i++) {
        w_raw(out, i ? ",{\"principal\":" : "{\"principal\":");
        w_cstr(out, acls[i].principal);
        w_raw(out, ",\"permissionType\":");
        w_cstr(out, acls[i].permission);
        w_raw(out, ",\"operation\":");
        w_cstr(out, acls[i].operation);
        w_raw(out, ",\"host\":");
        w_cstr(out, acls[i].host);
        kp_wr_raw(out, "}", 1);
    }
    w_raw(out, "]}");
    return w_done(out);
}

int cl_zj_acl_change_format(const char *type, const char *name, kp_buf *out)
{
    w_raw(out, "{\"version\":1,\"resourceType\":");
    w_cstr(out, type);
    w_raw(out, ",\"name\":");
    w_cstr(out, name);
    w_raw(out, ",\"patternType\":\"Prefixed\"}");
    return w_done(out);
}
