/* Clocks, the log line format and small request helpers shared by the
 * daemon. */
#include "daemon/broker.h"
#include "daemon/request.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

int64_t bk_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t bk_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int bk_event_add(struct event *ev, const struct timeval *tv, const char *what)
{
    if (ev && event_add(ev, tv) == 0)
        return 0;
    BK_ERROR("cannot arm the %s event: %s", what, ev ? strerror(errno) : "not created");
    return -1;
}

void bk_log(const char *level, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    /* One fprintf: lines from worker threads never interleave mid-line. */
    fprintf(stderr, "[%s,%03ld] %s %s\n", when, ts.tv_nsec / 1000000, level, msg);
}

int16_t bk_wire_code(int rc)
{
    return rc >= -1 && rc <= INT16_MAX ? (int16_t)rc : KP_UNKNOWN_SERVER_ERROR;
}

char *bk_slice_dup(kp_str s, bool *oom)
{
    if (s.len < 0)
        return NULL;
    char *p = malloc((size_t)s.len + 1);
    if (!p) {
        *oom = true;
        return NULL;
    }
    for (int32_t i = 0; i < s.len; i++)
        p[i] = s.p[i] ? s.p[i] : '?';
    p[s.len] = 0;
    return p;
}

void bk_req_client_host(bk_req *r, char *out, size_t cap)
{
    const char *peer = r->conn ? net_conn_peer(r->conn) : NULL;
    if (!peer || !*peer) {
        snprintf(out, cap, "%s", "");
        return;
    }
    /* "host:port" or "[v6]:port" → Kafka's "/host". */
    const char *colon = strrchr(peer, ':');
    size_t n = colon ? (size_t)(colon - peer) : strlen(peer);
    if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') {
        peer++;
        n -= 2;
    }
    snprintf(out, cap, "/%.*s", (int)n, peer);
}

void *bk_req_alloc(bk_req *r, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return kp_arena_alloc(&r->arena, n * size);
}

int bk_req_encoded(bk_req *r, const char *api, int rc)
{
    if (rc == 0)
        return BK_RESPOND;
    /* Our own response did not fit its version's schema: a bug here, not
     * the client's; it gets no half-written body. */
    BK_ERROR("%s v%d: response not encodable (%d)", api, r->hdr.RequestApiVersion, rc);
    return BK_CLOSE;
}

bool bk_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p++;
        int more;
        unsigned cp, min;
        if (c < 0x80)
            continue;
        if (c >= 0xc2 && c <= 0xdf)
            more = 1, cp = c & 0x1f, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            more = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            more = 3, cp = c & 0x07, min = 0x10000;
        else
            return false;
        if (end - p < more)
            return false;
        for (int i = 0; i < more; i++, p++) {
            if ((*p & 0xc0) != 0x80)
                return false;
            cp = cp << 6 | (*p & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
    }
    return true;
}
