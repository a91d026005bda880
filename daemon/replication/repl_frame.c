/*
 * daemon/replication/repl_frame.c — one answer frame read whole (design
 * note and invariants RF1-RF4 in repl_frame.h).
 */
#include "daemon/replication/repl_frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

void repl_frame_reset(repl_frame *f)
{
    f->got = 0;
    f->lowat = 1;
}

void repl_frame_free(repl_frame *f)
{
    free(f->buf);
    f->buf = NULL;
    f->cap = 0;
    repl_frame_reset(f);
}

/* RF2 */
static bool grow(repl_frame *f, size_t need)
{
    if (need < REPL_FRAME_IN_MIN)
        need = REPL_FRAME_IN_MIN;
    if (need <= f->cap)
        return true;
    uint8_t *nb = realloc(f->buf, need);
    if (!nb)
        return false;
    f->buf = nb;
    f->cap = need;
    return true;
}

static int64_t frame_len(const uint8_t *hdr)
{
    return (int64_t)((uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
                     (uint32_t)hdr[2] << 8 | hdr[3]);
}

/* RF4, RF2: room for a frame of size bytes after its length. */
static int reserve(repl_frame *f, int64_t size, int64_t max, const char **why)
{
    if (size < 4 || size > max) {
        *why = "an answer frame of an impossible size";
        return REPL_FRAME_ERROR;
    }
    if (!grow(f, (size_t)size + 4)) {
        *why = "out of memory for an answer";
        return REPL_FRAME_ERROR;
    }
    return REPL_FRAME_MORE;
}

/* RF3 */
static void set_lowat(repl_frame *f, evutil_socket_t fd, size_t bytes)
{
    int v = bytes > REPL_FRAME_LOWAT_MAX ? (int)REPL_FRAME_LOWAT_MAX : (int)bytes;
    if (v == f->lowat)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0)
        f->lowat = v;
}

int repl_frame_watch(repl_frame *f, struct event_base *base, struct bufferevent *bev,
                     int64_t timeout_ms, void (*cb)(evutil_socket_t, short, void *), void *arg,
                     struct event **ev)
{
    if (!grow(f, REPL_FRAME_IN_MIN))
        return -1;
    *ev = event_new(base, bufferevent_getfd(bev), EV_READ | EV_PERSIST, cb, arg);
    if (!*ev)
        return -1;
    bufferevent_disable(bev, EV_READ);
    struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
    return event_add(*ev, &tv);
}

int repl_frame_recv(repl_frame *f, evutil_socket_t fd, bool expecting, int64_t max, size_t *len,
                    const char **why)
{
    size_t want = f->got < 4 ? f->cap : (size_t)frame_len(f->buf) + 4;
    ssize_t n = recv(fd, f->buf + f->got, want - f->got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return REPL_FRAME_MORE;
    if (n == 0)
        return REPL_FRAME_EOF;
    if (n < 0) {
        *why = strerror(errno);
        return REPL_FRAME_ERROR;
    }
    if (!expecting) {                    /* RF1 */
        *why = "bytes with no request out";
        return REPL_FRAME_ERROR;
    }
    f->got += (size_t)n;
    if (f->got < 4)
        return REPL_FRAME_MORE;
    int64_t size = frame_len(f->buf);
    if (reserve(f, size, max, why) != REPL_FRAME_MORE)
        return REPL_FRAME_ERROR;
    size_t total = (size_t)size + 4;
    if (f->got > total) {                /* RF1 */
        *why = "bytes after the answer";
        return REPL_FRAME_ERROR;
    }
    if (f->got < total) {
        size_t left = total - f->got;
        set_lowat(f, fd, left >= REPL_FRAME_LOWAT_MIN ? left : 1);
        return REPL_FRAME_MORE;
    }
    f->got = 0;
    set_lowat(f, fd, 1);
    *len = (size_t)size;
    return REPL_FRAME_DONE;
}

int repl_frame_evbuffer(repl_frame *f, struct evbuffer *in, bool expecting, int64_t max,
                        size_t *len, const char **why)
{
    size_t have = evbuffer_get_length(in);
    uint8_t hdr[4];
    if (have && !expecting) {            /* RF1 */
        *why = "bytes with no request out";
        return REPL_FRAME_ERROR;
    }
    if (have < 4 || evbuffer_copyout(in, hdr, 4) != 4)
        return REPL_FRAME_MORE;
    int64_t size = frame_len(hdr);
    if (reserve(f, size, max, why) != REPL_FRAME_MORE)
        return REPL_FRAME_ERROR;
    size_t total = (size_t)size + 4;
    if (have > total) {                  /* RF1, RF5 */
        *why = "bytes after the answer";
        return REPL_FRAME_ERROR;
    }
    if (have < total)
        return REPL_FRAME_MORE;
    evbuffer_remove(in, f->buf, total);
    *len = (size_t)size;
    return REPL_FRAME_DONE;
}
