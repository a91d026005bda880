/*
 * daemon/replication/repl_frame.h — one answer frame (its 4-byte length,
 * then that many bytes) read whole from another broker, the way the
 * replica fetchers (repl_fetcher.c F8) and a cluster link's connections
 * to its source (daemon/link/link_conn.c C6) both read: with one request
 * in flight, into a buffer of the connection's own.
 *
 * A plaintext connection's answers do not go through libevent's buffers
 * (which read a few KiB per loop turn, each with an FIONREAD, an
 * epoll_wait and a timer re-armed, then copy out): the connection's own
 * persistent event (repl_frame_watch) recv()s each answer straight into
 * the buffer, sized by the frame length.  A TLS connection's answers come
 * through its bufferevent (SSL_read) and are taken out of its input
 * buffer whole (repl_frame_evbuffer).
 *
 * Invariants:
 *   RF1. At most one frame is ever read: bytes beyond it, or bytes with no
 *        request out, are an error (one request in flight).
 *   RF2. The buffer grows to the largest frame and is kept (at least
 *        REPL_FRAME_IN_MIN, so a small answer is one recv): nothing is
 *        allocated per answer once it has grown.
 *   RF3. On a plain socket, while more than REPL_FRAME_LOWAT_MIN of a
 *        frame is missing, the socket's SO_RCVLOWAT is that much (at most
 *        REPL_FRAME_LOWAT_MAX, beyond which the kernel would grow the
 *        receive buffer and clamp the window), so the socket wakes the
 *        loop once that much is there, not per segment; 1 otherwise.  A
 *        failed setsockopt only costs wakeups.
 *   RF4. A frame length below 4 (no correlation id) or above the caller's
 *        limit is an error before anything is allocated for it.
 *   RF5. A TLS connection's input buffer holds at most one frame and the
 *        rest of one read (libevent's SSL_read chunk): its read callback
 *        runs after each read and fails the connection on any byte with no
 *        request out or beyond the frame, so a source sending unasked
 *        never grows it.
 */
#ifndef SLUICE_REPL_FRAME_H
#define SLUICE_REPL_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

struct event;
struct event_base;
struct evbuffer;
struct bufferevent;

#define REPL_FRAME_IN_MIN (64u << 10)
#define REPL_FRAME_LOWAT_MIN (64u << 10)
#define REPL_FRAME_LOWAT_MAX (1u << 20)

typedef struct repl_frame {
    uint8_t *buf;                        /* the frame, its 4-byte length first */
    size_t cap;
    size_t got;                          /* plain socket: bytes of it read */
    int lowat;                           /* the socket's SO_RCVLOWAT (RF3) */
} repl_frame;

/* What repl_frame_recv / repl_frame_evbuffer read. */
enum {
    REPL_FRAME_ERROR = -1,               /* *why says what (a static string) */
    REPL_FRAME_MORE = 0,                 /* not whole yet */
    REPL_FRAME_DONE = 1,                 /* buf + 4 holds *len bytes */
    REPL_FRAME_EOF = 2,                  /* the peer closed; got > 0: mid-answer */
};

/* A new connection's: nothing read, the socket's SO_RCVLOWAT 1. */
void repl_frame_reset(repl_frame *f);
void repl_frame_free(repl_frame *f);

/* Plain socket: f read by cb (EV_READ | EV_PERSIST on the bufferevent's
 * socket, with timeout_ms as read timeout: cb gets EV_TIMEOUT), the
 * bufferevent's own reading turned off (it keeps connecting and output).
 * *ev gets the event.  0, or -1 (out of memory). */
int repl_frame_watch(repl_frame *f, struct event_base *base, struct bufferevent *bev,
                     int64_t timeout_ms, void (*cb)(evutil_socket_t, short, void *), void *arg,
                     struct event **ev);

/* Reads from fd what is there of the frame (RF1-RF4); expecting: a
 * request is out; max: the largest frame length accepted. */
int repl_frame_recv(repl_frame *f, evutil_socket_t fd, bool expecting, int64_t max, size_t *len,
                    const char **why);

/* A whole frame out of a TLS bufferevent's input buffer into f (RF1,
 * RF2, RF4, RF5), or MORE while it is not all there; expecting: a request
 * is out (any byte otherwise is an error, as on a plain socket). */
int repl_frame_evbuffer(repl_frame *f, struct evbuffer *in, bool expecting, int64_t max,
                        size_t *len, const char **why);

#endif
