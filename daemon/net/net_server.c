/*
 * Connections: the only code that touches client sockets.
 *
 * A connection reads length-prefixed frames, hands each to the API handler
 * through a bk_req, and queues the response on its output buffer.  Message
 * bytes from segment files are added as libevent file segments, which are
 * written with sendfile(2): they never enter this process.
 *
 * Input does not go through libevent's buffers: libevent reads at most 4 KiB
 * per call (after a FIONREAD ioctl) into chains that are then copied out.
 * Instead the connection recv()s straight into its own buffer, as much as
 * the socket has and the buffer holds, and serves frames in place from it:
 * one copy (the kernel's), one syscall per socket-buffer's worth.
 *
 * Output is the connection's own evbuffer, written as soon as a response
 * is queued (after the last frame of a read, so pipelined responses share
 * one writev): a client that reads its answers costs no write event at
 * all.  Only a socket that cannot take everything gets an EV_WRITE event,
 * until it has drained.  (A bufferevent armed and disarmed its write event
 * for every response: two epoll_ctl calls and an extra loop iteration.)
 *
 * Invariants:
 *   1. Responses leave in request order.  A connection processes one
 *      request at a time; while a handler has deferred its response (a
 *      Fetch waiting for data, a PLAIN login on the worker: sec_sasl.c inv. 3)
 *      the connection reads no further frame, as Kafka "mutes" a channel.
 *      Other connections are unaffected.
 *   2. Memory is bounded per connection: a frame longer than
 *      socket.request.max.bytes closes the connection before any of it is
 *      buffered; once more than connection.max.queued.bytes of responses
 *      wait for a client that does not read, the connection stops reading
 *      requests until the queue drains to half.
 *   3. Buffers are reused: each connection owns one input buffer and one
 *      response buffer, grown as needed and kept up to BUF_KEEP bytes;
 *      bigger ones are freed after their request, so a thousand idle
 *      connections that once sent a big Produce do not pin its size each.
 *   4. Memory for requests is bounded across connections, as Kafka's
 *      memory pool does it: once a frame's length is known the connection
 *      reserves that many bytes of queued.max.request.bytes, and holds
 *      them until the frame has been served.  A reservation is granted
 *      while the pool has room, or when nothing is reserved at all (so a
 *      frame larger than the pool still goes through, alone); otherwise
 *      the connection is STARVED: it stops reading its socket until a
 *      reservation is released.  Connections that hold a reservation
 *      always keep reading, so the pool cannot deadlock.  A client that
 *      announces a frame and then stalls holds its reservation until
 *      connections.max.idle.ms; keep socket.request.max.bytes well below
 *      queued.max.request.bytes.
 *   5. At most max.connections connections, and at most
 *      max.connections.per.ip from one address; a connection over either
 *      is closed on accept, before anything is read from it.
 *
 *   6. Each listener of listeners= has its own socket; a connection keeps
 *      the listener it came through (its security protocol, and the
 *      endpoints Metadata gives it: the advertised ones of that listener).
 *   7. A TLS connection's handshake runs in the event loop like any read:
 *      one step per readable/writable event, never a blocking call, so a
 *      stalled or failed handshake costs others nothing.  It must finish
 *      within ssl.handshake.timeout.ms (a deadline, not an idle timer: a
 *      client dribbling a byte at a time is closed too).  No request is
 *      read before it has finished.
 *   8. TLS output: where OpenSSL moved sending into the kernel (kTLS), the
 *      output buffer is written exactly as a plaintext one (writev and
 *      sendfile; the kernel encrypts; sec_tls.c T4).  Otherwise file ranges
 *      are mapped (libevent mmaps a file segment added to a buffer that
 *      does not drain to a socket) and SSL_write encrypts straight from
 *      the page cache: the bytes are never copied into the heap in the
 *      clear.  Input is always SSL_read; bytes OpenSSL holds decrypted
 *      (SSL_pending) count as readable.
 *   9. Logins are paced, so a connection storm cannot stall established
 *      clients (issue 18).  A connection is "logging in" until its TLS
 *      handshake is done, its SASL login has succeeded (SASL listeners)
 *      and it has had one request served (promote); until then each
 *      readable event only mutes it and queues it for a login turn.  A
 *      login turn (login_turn, a zero-timeout timer, so the loop polls and
 *      serves everything else between two turns) reads and serves at most
 *      LOGIN_BURST queued connections, starting none after LOGIN_TURN_US,
 *      in arrival order.  A listener accepts at most ACCEPT_BURST
 *      connections between two turns (it is disabled after that many and
 *      enabled by the next turn); the kernel's backlog (4096, capped by
 *      net.core.somaxconn) holds the rest.  Timeouts (idle, handshake
 *      deadline) are not queued.
 *
 * States of a connection: LOGGING IN (inv. 9: queued for a login turn while
 * it has input) → established; HANDSHAKE (TLS only) → READING; READING (processing
 * frames) → BUSY (deferred handler) → READING; READING → PAUSED (output over
 * the cap) → READING; READING → STARVED (request pool full) → READING; any →
 * closed (error, EOF, idle or handshake timeout, malformed request).
 */
#include "daemon/net/net_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/listener.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "daemon/request.h"
#include "daemon/net/net_metrics.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/security/sec_peer.h"
#include "daemon/security/sec_tls.h"

/* Frame/response buffers above this are freed after their request (inv. 3). */
#define BUF_KEEP (1u << 20)

struct bk_conn {
    bk_broker *b;
    evutil_socket_t fd;
    struct event *rev;            /* readable / idle timeout */
    bool reading;                 /* rev is added */
    bool unarmed;                 /* an event_add failed: closes (conn_event_failed) */
    struct evbuffer *obuf;        /* responses not yet written */
    struct evbuffer *stage;       /* empty; response bytes after a file range
                                     pass through it (out_add) */
    struct event *wev;            /* writable; added while obuf is stuck */
    bool writing;                 /* wev is added: output left, or paused */
    char peer[64];
    char host[64];                /* peer address alone: per-IP limit */
    bk_secproto proto;            /* the listener's (sec_peer.h inv. 2) */
    const bk_listener *listener;  /* the one it came through (inv. 6) */
    SSL *ssl;                     /* TLS listeners; NULL on plaintext ones */
    bool handshaking;             /* HANDSHAKE state (inv. 7) */
    bool peeked;                  /* its first byte was looked at */
    bool ktls;                    /* the kernel encrypts what we send (inv. 8) */
    int64_t hs_deadline_us;       /* ssl.handshake.timeout.ms after accept */
    char principal[BK_PRINCIPAL_MAX];   /* sec_peer.h inv. 1 */
    bk_sasl_conn *sasl;           /* SASL listeners: sec_sasl.c's state */
    int64_t reserved;             /* bytes of the request pool held (inv. 4) */
    bool starved;                 /* waiting for the request pool */
    bk_conn *snext, *sprev;       /* starved list, while starved */
    kp_buf in;                    /* bytes read; frames served in place */
    size_t in_off;                /* start of the first unserved frame */
    kp_buf out;                   /* the response body being built */
    bk_req req;
    uint64_t serial;              /* 1, 2, ... in accept order: never reused */
    bool busy;                    /* a deferred request is pending */
    bool paused;                  /* output over the cap */
    bool in_process;              /* process_input is on the stack */
    bool established;             /* its login is done (inv. 9) */
    bool queued;                  /* waits for a login turn (inv. 9) */
    bk_conn *lnext, *lprev;       /* the login queue, while queued */
    bk_conn *next, *prev;
};

/* One bound listener (inv. 6). */
typedef struct bk_lsock {
    struct bk_server *s;
    const bk_listener *l;
    struct evconnlistener *ev;
    int burst;                    /* accepts since the last login turn (inv. 9) */
    bool held;                    /* disabled until the next login turn */
} bk_lsock;

struct bk_server {
    bk_broker *b;
    bk_lsock lsocks[BK_LISTENERS_MAX];
    int nlsocks;
    SSL_CTX *tls;                 /* the server context, when a listener is TLS */
    bk_conn conns;                /* list sentinel */
    struct event *drain_timer;    /* shutdown: waits for busy connections */
    int64_t drain_deadline_us;
    int64_t pool_used;            /* reserved request bytes (inv. 4) */
    bk_conn starved;              /* list sentinel (snext/sprev) */
    struct event *wake_ev;        /* resumes starved connections */
    bk_conn logins;               /* list sentinel (lnext/lprev): inv. 9 */
    struct event *login_ev;       /* the next login turn: a zero timeout */
};

/* A login turn (inv. 9): at most this many connections' login steps, and
 * no new one after LOGIN_TURN_US; at most ACCEPT_BURST accepts per
 * listener between two turns. */
#define LOGIN_BURST 16
#define LOGIN_TURN_US 2000
#define ACCEPT_BURST 16

static bool process_input(bk_conn *c);
static void promote(bk_conn *c);

/* An event of c could not be armed (bk_event_add logged why): c could hang
 * unseen, so it goes.  Not here (the caller still holds c): its read event
 * is made active, and conn_read closes a connection marked unarmed first
 * of all, busy or not. */
static void conn_event_failed(bk_conn *c)
{
    c->unarmed = true;
    event_active(c->rev, EV_TIMEOUT, 0);
}

/* An evbuffer_add* result.  Failure is ENOMEM, and the frame's length is
 * already promised: c->out.err makes the caller close the connection. */
static void out_check(bk_conn *c, int rc)
{
    if (rc != 0 && !c->out.err) {
        BK_ERROR("cannot queue a response for %s; closing", c->peer);
        c->out.err = KP_E_NOMEM;
    }
}

/* Reading on or off; off while paused or starved, and while busy once
 * the client sends more (on_readable mutes lazily: a client that waits
 * for its answer costs no epoll_ctl).  Nothing else decides it, so the
 * states and the event never disagree. */
static void want_read(bk_conn *c, bool on)
{
    if (on == c->reading)
        return;
    c->reading = on;
    if (!on) {
        event_del(c->rev);
        return;
    }
    int64_t idle = c->b->cfg->connections_max_idle_ms;
    struct timeval tv = { (time_t)(idle / 1000), (suseconds_t)(idle % 1000) * 1000 };
    if (bk_event_add(c->rev, idle > 0 ? &tv : NULL, "connection read") != 0) {
        conn_event_failed(c);
        return;
    }
    /* Decrypted bytes OpenSSL holds make no epoll event (inv. 8). */
    if (c->ssl && SSL_pending(c->ssl) > 0)
        event_active(c->rev, EV_READ, 0);
}

/* The write event on or off: while output is stuck, while paused, and
 * while a TLS handshake waits to send. */
static void want_write(bk_conn *c, bool on)
{
    if (on == c->writing)
        return;
    c->writing = on;
    if (!on)
        event_del(c->wev);
    else if (bk_event_add(c->wev, NULL, "connection write") != 0)
        conn_event_failed(c);
}

/* ---- request pool (inv. 4) --------------------------------------------------- */
static bool pool_reserve(bk_conn *c, int64_t len)
{
    bk_server *s = c->b->server;
    int64_t limit = c->b->cfg->queued_max_request_bytes;
    if (limit >= 0 && s->pool_used > 0 && s->pool_used + len > limit)
        return false;
    s->pool_used += len;
    c->reserved = len;
    return true;
}

static void pool_release(bk_conn *c)
{
    bk_server *s = c->b->server;
    if (!c->reserved)
        return;
    s->pool_used -= c->reserved;
    c->reserved = 0;
    /* Not from here: the caller may be inside another connection. */
    if (s->starved.snext != &s->starved)
        event_active(s->wake_ev, EV_TIMEOUT, 0);
}

static void starve(bk_conn *c)
{
    bk_server *s = c->b->server;
    want_read(c, false);
    if (c->starved)
        return;
    c->starved = true;
    c->snext = &s->starved;
    c->sprev = s->starved.sprev;
    s->starved.sprev->snext = c;
    s->starved.sprev = c;
}

static void unstarve(bk_conn *c)
{
    if (!c->starved)
        return;
    c->starved = false;
    c->sprev->snext = c->snext;
    c->snext->sprev = c->sprev;
    c->snext = c->sprev = NULL;
}

/* Frees a big buffer after its request; small ones are kept (inv. 3). */
static void buf_trim(kp_buf *b)
{
    if (b->cap > BUF_KEEP) {
        kp_buf_free(b);
        kp_buf_init(b);
    }
}

static void conn_free(bk_conn *c)
{
    bk_server *s = c->b->server;
    (void)s;
    pool_release(c);
    unstarve(c);
    if (c->queued) {
        c->lprev->lnext = c->lnext;
        c->lnext->lprev = c->lprev;
    }
    if (c->busy && c->req.cancel)
        c->req.cancel(&c->req);
    c->busy = false;
    sec_sasl_conn_free(c);
    for (int i = 0; i < c->req.npieces; i++)
        seg_range_release(&c->req.pieces[i].range);
    free(c->req.pieces);
    kp_arena_free(&c->req.arena);
    c->prev->next = c->next;
    c->next->prev = c->prev;
    event_free(c->rev);
    event_free(c->wev);
    evbuffer_free(c->obuf);
    evbuffer_free(c->stage);
    SSL_free(c->ssl);
    evutil_closesocket(c->fd);
    kp_buf_free(&c->in);
    kp_buf_free(&c->out);
    c->b->nconns--;
    free(c);
}

void net_req_add_range(bk_req *r, seg_range *range)
{
    if (range->len == 0) {
        seg_range_release(range);
        return;
    }
    if (r->npieces == r->cap_pieces) {
        int cap = r->cap_pieces ? r->cap_pieces * 2 : 16;
        bk_piece *p = realloc(r->pieces, (size_t)cap * sizeof *p);
        if (!p) {                 /* keep the response consistent: drop it */
            seg_range_release(range);
            r->out->err = KP_E_NOMEM;
            return;
        }
        r->pieces = p;
        r->cap_pieces = cap;
    }
    r->pieces[r->npieces].at = r->out->len;
    r->pieces[r->npieces].range = *range;
    r->npieces++;
    range->file = NULL;
    range->len = 0;
}

const char *net_conn_peer(const bk_conn *c)
{
    return c->peer;
}

/* 0 for a request that came on no connection (tests/fuzz/fuzz_d_request.c
 * drives the handlers directly): "no pace to learn" to the commit cadence. */
uint64_t net_conn_serial(const bk_conn *c)
{
    return c ? c->serial : 0;
}

bk_secproto net_conn_secproto(const bk_conn *c)
{
    return c ? c->proto : BK_SEC_PLAINTEXT;
}

const char *net_conn_principal(const bk_conn *c)
{
    return c && c->principal[0] ? c->principal : BK_PRINCIPAL_ANONYMOUS;
}

void net_conn_set_principal(bk_conn *c, const char *principal)
{
    snprintf(c->principal, sizeof c->principal, "%s",
             principal && principal[0] ? principal : BK_PRINCIPAL_ANONYMOUS);
}

const char *net_conn_host(const bk_conn *c)
{
    return c ? c->host : "";
}

const char *net_conn_listener(const bk_conn *c)
{
    return c && c->listener ? c->listener->name : NULL;
}

bk_sasl_conn **net_conn_sasl(bk_conn *c)
{
    return &c->sasl;
}

size_t net_req_range_bytes(const bk_req *r)
{
    size_t n = 0;
    for (int i = 0; i < r->npieces; i++)
        n += r->pieces[i].range.len;
    return n;
}

static void range_cleanup(const struct evbuffer_file_segment *seg, int flags, void *arg)
{
    (void)seg; (void)flags;
    seg_range *r = arg;
    seg_range_release(r);
    free(r);
}

/* Queues n bytes of memory.  Bytes that follow a file range (a later
 * partition's fields, a flexible Fetch's tagged sections) go through the
 * empty staging buffer and are moved over as a chain: evbuffer_add straight
 * onto a file segment's chain sizes the new chain from that one (libevent
 * doubles the last chain's buffer_len), which was a 1 GiB malloc, mmap and
 * munmap per Fetch v12+ answer from a 1 GiB segment (strace). */
static void out_add(bk_conn *c, const void *p, size_t n, bool after_range)
{
    if (!after_range) {
        out_check(c, evbuffer_add(c->obuf, p, n));
        return;
    }
    out_check(c, evbuffer_add(c->stage, p, n));
    out_check(c, evbuffer_add_buffer(c->obuf, c->stage));
}

/* Queues header + body + file ranges on the socket's output buffer. */
static void send_response(bk_conn *c)
{
    bk_req *r = &c->req;
    struct evbuffer *o = c->obuf;
    if (r->raw) {                 /* a raw SASL token's answer: no header */
        uint8_t len[4] = { (uint8_t)(r->out->len >> 24), (uint8_t)(r->out->len >> 16),
                           (uint8_t)(r->out->len >> 8), (uint8_t)r->out->len };
        out_check(c, evbuffer_add(o, len, 4));
        out_check(c, evbuffer_add(o, r->out->data, r->out->len));
        return;
    }
    uint8_t head[KP_RESP_FRAME_HEAD_MAX];
    out_check(c, evbuffer_add(o, head, kp_resp_frame_head(head, &r->hdr,
                                                          r->out->len + net_req_range_bytes(r))));
    net_metrics_request(r->hdr.RequestApiKey, bk_mono_us() - r->received_us);
    size_t at = 0;
    for (int i = 0; i < r->npieces; i++) {
        bk_piece *p = &r->pieces[i];
        if (p->at > at)
            out_add(c, r->out->data + at, p->at - at, i > 0);
        at = p->at;
        seg_range *keep = malloc(sizeof *keep);
        struct evbuffer_file_segment *seg = NULL;
        if (keep) {
            *keep = p->range;
            /* Flags 0: libevent sends the range with sendfile(2) and does
             * not close the fd; our reference keeps the file open even if
             * retention unlinks it before the bytes leave. */
            seg = evbuffer_file_segment_new(p->range.fd, p->range.pos,
                                            (ev_off_t)p->range.len, 0);
        }
        if (!seg) {
            /* Cannot happen short of ENOMEM; the frame length is already
             * promised, so the connection must go. */
            free(keep);
            seg_range_release(&p->range);
            BK_ERROR("cannot queue a file range for %s; closing", c->peer);
            c->out.err = KP_E_NOMEM;      /* the caller closes */
            continue;
        }
        evbuffer_file_segment_add_cleanup_cb(seg, range_cleanup, keep);
        out_check(c, evbuffer_add_file_segment(o, seg, 0, (ev_off_t)p->range.len));
        evbuffer_file_segment_free(seg);     /* the buffer holds its own ref */
    }
    if (r->out->len > at)
        out_add(c, r->out->data + at, r->out->len - at, r->npieces > 0);
    r->npieces = 0;
}

static void req_reset(bk_conn *c)
{
    bk_req *r = &c->req;
    for (int i = 0; i < r->npieces; i++)
        seg_range_release(&r->pieces[i].range);
    r->npieces = 0;
    r->cancel = NULL;
    r->expire = NULL;
    r->state = NULL;
    r->raw = false;
    kp_arena_reset(&r->arena);       /* keeps one chunk for the next request */
    kp_buf_reset(&c->out);
}

static bool over_cap(bk_conn *c)
{
    size_t queued = evbuffer_get_length(c->obuf);
    return (int64_t)queued > c->b->cfg->connection_max_queued_bytes;
}

static bool flush_out(bk_conn *c);

/* Pauses when the output is over the cap even after writing what the
 * socket takes, so a paused connection always has its write event, and
 * on_writable resumes it.  Returns false if c was closed. */
static bool pause_if_over_cap(bk_conn *c)
{
    if (c->paused || !over_cap(c))
        return true;
    if (!flush_out(c))
        return false;
    if (over_cap(c)) {
        c->paused = true;         /* flush_out left the write event added */
        want_read(c, false);
    }
    return true;
}

/* Writes what the socket takes now (memory with writev, file ranges with
 * sendfile) and keeps the write event added exactly while something is
 * left.  Returns false when the write failed and c was closed. */
/* SSL_write of the output's first chain (memory, or a mapped file range:
 * inv. 8), as much as the socket takes.  > 0 bytes written; 0 when the
 * socket is full; -1 when the connection failed. */
static int tls_write(bk_conn *c)
{
    struct evbuffer_iovec v;
    if (evbuffer_peek(c->obuf, -1, NULL, &v, 1) < 1 || v.iov_len == 0)
        return -1;                /* a file range that could not be mapped */
    size_t n = v.iov_len > (1u << 20) ? (1u << 20) : v.iov_len;
    ERR_clear_error();
    int w = SSL_write(c->ssl, v.iov_base, (int)n);
    if (w > 0) {
        evbuffer_drain(c->obuf, (size_t)w);
        return w;
    }
    int e = SSL_get_error(c->ssl, w);
    if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ)
        return 0;                 /* retried with the same bytes (the modes set in sec_tls.c) */
    return -1;
}

static bool flush_out(bk_conn *c)
{
    while (evbuffer_get_length(c->obuf) > 0) {
        if (c->ssl && !c->ktls) {
            int w = tls_write(c);
            if (w > 0)
                continue;
            if (w == 0)
                break;
            conn_free(c);         /* the client is gone, or a TLS alert */
            return false;
        }
        errno = 0;
        int n = evbuffer_write(c->obuf, c->fd);
        if (n > 0)
            continue;
        /* libevent's sendfile path reports EAGAIN as 0, with errno set. */
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            break;
        /* EPIPE, ECONNRESET: the client is gone.  0 without errno: a file
         * range ended early (sendfile at end of file), so the promised
         * frame length cannot be kept. */
        conn_free(c);
        return false;
    }
    /* A paused connection resumes in on_writable, so it keeps the event
     * even when this call drained everything (it then fires at once). */
    want_write(c, evbuffer_get_length(c->obuf) > 0 || c->paused);
    return true;
}

/* A deferred request's end, answered or not: the connection goes on. */
static void req_finished(bk_conn *c)
{
    if (!flush_out(c))
        return;
    c->busy = false;
    req_reset(c);
    pool_release(c);
    buf_trim(&c->out);
    promote(c);
    if (!pause_if_over_cap(c))
        return;
    if (!c->paused && !c->starved)
        want_read(c, true);
    if (!c->paused && !c->in_process)
        process_input(c);
}

void net_req_finish(bk_req *r)
{
    bk_conn *c = r->conn;
    if (r->out->err) {
        conn_free(c);
        return;
    }
    send_response(c);
    if (c->out.err) {
        conn_free(c);
        return;
    }
    req_finished(c);
}

void net_req_finish_silent(bk_req *r)
{
    net_metrics_request(r->hdr.RequestApiKey, bk_mono_us() - r->received_us);
    req_finished(r->conn);
}

void net_req_close(bk_req *r, bool send)
{
    bk_conn *c = r->conn;
    c->busy = false;              /* nothing to cancel any more */
    if (send && !r->out->err) {
        send_response(c);
        if (!flush_out(c))
            return;
    }
    conn_free(c);
}

/* Serves one frame (header + body) of len bytes at p, inside c->in.
 * Returns false when the connection was closed. */
static bool serve_frame(bk_conn *c, uint8_t *p, size_t len)
{
    bk_req *r = &c->req;
    kp_rd rd;
    kp_rd_init(&rd, p, len);
    memset(&r->hdr, 0, sizeof r->hdr);
    int rc = kp_req_hdr_read(&rd, &r->hdr);
    const bk_api *api = api_find(r->hdr.RequestApiKey);
    /* A header we cannot read closes the connection, except an ApiVersions
     * of a version we do not know: that one is answered (error 35). */
    if (rc != 0 && !(api && api->key == KP_API_API_VERSIONS &&
                     r->hdr.RequestApiVersion > api->max_version)) {
        BK_WARN("malformed request header from %s; closing", c->peer);
        conn_free(c);
        return false;
    }
    if (!api) {
        BK_WARN("unknown API key %d from %s; closing (as Kafka does)",
                r->hdr.RequestApiKey, c->peer);
        conn_free(c);
        return false;
    }
    /* ApiVersions answers unknown versions itself (error 35, v0 body). */
    if (api->key != KP_API_API_VERSIONS &&
        (r->hdr.RequestApiVersion < api->min_version ||
         r->hdr.RequestApiVersion > api->max_version)) {
        BK_WARN("unsupported %s version %d from %s; closing (as Kafka does)",
                kp_api_name(api->key), r->hdr.RequestApiVersion, c->peer);
        conn_free(c);
        return false;
    }
    /* SASL listeners: nothing but the login before authentication. */
    if (!sec_sasl_gate(c->b, c, api->key)) {
        conn_free(c);
        return false;
    }
    r->b = c->b;
    r->conn = c;
    r->body = rd;
    r->out = &c->out;
    r->received_us = bk_mono_us();
    req_reset(c);
    rc = api->handler(r);
    switch (rc) {
    case BK_RESPOND_CLOSE:
        /* The error response goes out first, as Kafka sends it before
         * closing; flush_out writes what the socket takes now. */
        if (!c->out.err) {
            send_response(c);
            if (!flush_out(c))
                return false;
        }
        conn_free(c);
        return false;
    case BK_RESPOND:
        if (c->out.err) {
            BK_ERROR("out of memory building a %s response; closing",
                     kp_api_name(api->key));
            conn_free(c);
            return false;
        }
        send_response(c);
        if (c->out.err) {
            conn_free(c);
            return false;
        }
        req_reset(c);
        return true;
    case BK_NO_RESPONSE:
        net_metrics_request(r->hdr.RequestApiKey, bk_mono_us() - r->received_us);
        req_reset(c);
        return true;
    case BK_DEFER:
        /* Muted until the response is out: no unbounded input meanwhile,
         * and c->in is not moved while the handler holds the frame.
         * on_readable reads nothing while busy and mutes the socket then,
         * if the client sends more before its answer. */
        c->busy = true;
        return true;
    case BK_CLOSE_QUIET:
        conn_free(c);
        return false;
    default:
        BK_WARN("malformed %s v%d request from %s; closing",
                kp_api_name(api->key), r->hdr.RequestApiVersion, c->peer);
        conn_free(c);
        return false;
    }
}

/* A raw SASL token after SaslHandshake v0 (sec_sasl.h): INT32 length and the
 * bytes, answered the same way, no Kafka header either way.  Tokens are
 * small; one beyond 64 KiB closes the connection.  1 served, 0 incomplete,
 * -1 closed. */
static int serve_raw_token(bk_conn *c, int32_t len, size_t avail)
{
    if (len < 0 || len > 65536) {
        BK_WARN("SASL token of %d bytes from %s; closing", len, c->peer);
        conn_free(c);
        return -1;
    }
    if (avail < (size_t)len + 4)
        return 0;
    const uint8_t *tok = c->in.data + c->in_off + 4;
    c->in_off += (size_t)len + 4;
    bk_req *r = &c->req;
    req_reset(c);
    memset(&r->hdr, 0, sizeof r->hdr);
    r->b = c->b;
    r->conn = c;
    r->out = &c->out;
    r->raw = true;
    r->received_us = bk_mono_us();
    int rc = sec_sasl_raw_token(r, tok, (size_t)len);
    if (rc < 0) {
        conn_free(c);
        return -1;
    }
    if (rc > 0) {                 /* deferred: net_req_finish / net_req_close */
        c->busy = true;
        return 1;
    }
    send_response(c);
    if (c->out.err) {             /* out_check: the answer could not be queued */
        conn_free(c);
        return -1;
    }
    req_reset(c);
    return 1;
}

/* Serves the complete frames buffered in c->in, in order, until one is
 * deferred, the output is over its cap, the request pool is full, or the
 * buffer holds no complete frame.  Returns false if c was closed. */
static bool process_input(bk_conn *c)
{
    c->in_process = true;
    while (!c->busy && !c->paused && !c->b->stopping) {
        size_t avail = c->in.len - c->in_off;
        if (avail < 4)
            break;
        const uint8_t *lenb = c->in.data + c->in_off;
        int32_t len = (int32_t)((uint32_t)lenb[0] << 24 | (uint32_t)lenb[1] << 16 |
                                (uint32_t)lenb[2] << 8 | lenb[3]);
        if (c->sasl && sec_sasl_raw_pending(c)) {
            int st = serve_raw_token(c, len, avail);
            if (st < 0)
                return false;
            if (st == 0)
                break;
            promote(c);
            continue;
        }
        if (len < 8 || len > c->b->cfg->socket_request_max_bytes) {
            BK_WARN("frame of %d bytes from %s outside [8, socket.request.max.bytes=%d]; "
                    "closing", len, c->peer, c->b->cfg->socket_request_max_bytes);
            conn_free(c);
            return false;
        }
        if (!c->reserved && !pool_reserve(c, len)) {
            starve(c);            /* resumed by wake_starved */
            break;
        }
        if (avail < (size_t)len + 4)
            break;
        uint8_t *frame = c->in.data + c->in_off + 4;
        c->in_off += (size_t)len + 4;
        if (!serve_frame(c, frame, (size_t)len))
            return false;
        promote(c);
        if (!c->busy) {           /* a deferred frame is held until finish */
            pool_release(c);
            buf_trim(&c->out);
        }
        if (!pause_if_over_cap(c))
            return false;
    }
    if (!c->busy && c->in_off == c->in.len) {
        c->in_off = c->in.len = 0;
        buf_trim(&c->in);
    }
    c->in_process = false;
    return flush_out(c);
}

/* Room to read into: the rest of the current frame if its length is known
 * (so a big Produce arrives in as few recv calls as the socket allows),
 * else a small minimum.  Moves unserved bytes to the front first. */
static uint8_t *read_space(bk_conn *c, size_t *space)
{
    size_t avail = c->in.len - c->in_off;
    if (c->in_off > 0) {
        memmove(c->in.data, c->in.data + c->in_off, avail);
        c->in.len = avail;
        c->in_off = 0;
    }
    size_t want = 16384;
    if (avail >= 4) {
        const uint8_t *l = c->in.data;
        size_t frame = 4 + ((size_t)l[0] << 24 | (size_t)l[1] << 16 | (size_t)l[2] << 8 | l[3]);
        if (frame > avail && frame - avail > want)
            want = frame - avail;
    }
    if (c->in.cap - c->in.len >= want) {
        *space = c->in.cap - c->in.len;
        return c->in.data + c->in.len;
    }
    uint8_t *p = kp_buf_reserve(&c->in, want);
    *space = p ? c->in.cap - c->in.len : 0;
    return p;
}

/* recv's contract over SSL_read: > 0 bytes, 0 at the client's close,
 * -1 with errno (EAGAIN: nothing decrypted yet). */
static ssize_t tls_read(bk_conn *c, uint8_t *p, size_t space)
{
    ERR_clear_error();
    int n = SSL_read(c->ssl, p, space > INT32_MAX ? INT32_MAX : (int)space);
    if (n > 0)
        return n;
    switch (SSL_get_error(c->ssl, n)) {
    case SSL_ERROR_ZERO_RETURN:   /* close_notify */
        return 0;
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:    /* a TLS 1.3 key update under way */
        errno = EAGAIN;
        return -1;
    case SSL_ERROR_SYSCALL:
        if (n == 0)
            return 0;             /* EOF without close_notify */
        return -1;
    default: {
        char e[256];
        BK_WARN("TLS error from %s: %s; closing", c->peer, sec_tls_error(e, sizeof e));
        errno = EPROTO;
        return -1;
    }
    }
}

static void handshake_done(bk_conn *c)
{
    c->handshaking = false;
    char principal[BK_PRINCIPAL_MAX];
    if (sec_tls_peer_principal(c->ssl, principal, sizeof principal) == 0) {
        net_conn_set_principal(c, principal);
        BK_INFO("TLS client %s on listener %s authenticated as %s", c->peer,
                c->listener->name, principal);
    }
    c->ktls = sec_tls_ktls_send(c->ssl);
    if (c->ktls)                  /* writev and sendfile as plaintext (inv. 8) */
        evbuffer_set_flags(c->obuf, EVBUFFER_FLAG_DRAINS_TO_FD);
    want_write(c, false);
    c->reading = false;           /* re-armed with the idle timeout */
    want_read(c, true);
}

/* One step of the handshake (inv. 7).  Returns false if c was closed. */
static bool handshake_step(bk_conn *c, short what)
{
    if ((what & EV_TIMEOUT) || bk_mono_us() > c->hs_deadline_us) {
        BK_WARN("TLS handshake with %s on listener %s not done in "
                "ssl.handshake.timeout.ms=%lld; closing", c->peer, c->listener->name,
                (long long)c->b->cfg->ssl_handshake_timeout_ms);
        conn_free(c);
        return false;
    }
    if (!c->peeked) {
        /* A TLS connection opens with a handshake record (type 22); a
         * Kafka request's first byte is its length's top byte, 0.  Only
         * the very first byte: later ones may be the middle of a record. */
        uint8_t first;
        ssize_t n = recv(c->fd, &first, 1, MSG_PEEK);
        c->peeked = n == 1;
        if (n == 1 && first != 22) {
            BK_WARN("plaintext (non-TLS) client %s on TLS listener %s; closing",
                    c->peer, c->listener->name);
            conn_free(c);
            return false;
        }
    }
    ERR_clear_error();
    int rc = SSL_do_handshake(c->ssl);
    if (rc == 1) {
        handshake_done(c);
        return true;
    }
    int e = SSL_get_error(c->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        want_write(c, e == SSL_ERROR_WANT_WRITE);
        return true;
    }
    char err[256];
    long vr = SSL_get_verify_result(c->ssl);
    if (e == SSL_ERROR_SSL)
        sec_tls_error(err, sizeof err);
    else
        snprintf(err, sizeof err, "the client closed the connection");
    BK_WARN("TLS handshake with %s on listener %s failed: %s%s%s; closing", c->peer,
            c->listener->name, err, vr != X509_V_OK ? ": " : "",
            vr != X509_V_OK ? X509_verify_cert_error_string(vr) : "");
    conn_free(c);
    return false;
}

/* What a readable (or timed out) connection does; for one still logging
 * in, on its login turn (inv. 9). */
static void conn_read(bk_conn *c, short what)
{
    evutil_socket_t fd = c->fd;
    if (c->unarmed) {
        BK_ERROR("closing %s: its events cannot be armed", c->peer);
        conn_free(c);
        return;
    }
    if (c->handshaking) {
        handshake_step(c, what);
        return;
    }
    if (c->busy) {
        /* Not idle (a deferred request) and not to be read: mute until
         * the answer is out (net_req_finish turns reading back on). */
        if (what & EV_READ)
            want_read(c, false);
        return;
    }
    if (what & EV_TIMEOUT) {
        BK_INFO("closing idle connection %s (connections.max.idle.ms)", c->peer);
        if (c->ssl)
            SSL_shutdown(c->ssl);     /* sec_tls.c T5: close_notify, no wait */
        conn_free(c);
        return;
    }
    if (c->b->stopping) {         /* shutting down: read nothing new */
        want_read(c, false);
        return;
    }
    /* Bounded: at most a few reads per wake-up, so one busy client cannot
     * keep the loop from the others.  Not once a request of these reads
     * was deferred: read_space may move or grow the buffer, and the
     * deferred request's frame (names, records) lies in it until
     * net_req_finish (an acks=all Produce held by a pipelining producer
     * read freed memory under ASan). */
    for (int i = 0; i < 4 && c->reading && !c->busy; i++) {
        size_t space;
        uint8_t *p = read_space(c, &space);
        if (!p) {
            BK_ERROR("cannot grow the input buffer of %s; closing", c->peer);
            conn_free(c);
            return;
        }
        ssize_t n = c->ssl ? tls_read(c, p, space) : recv(fd, p, space, 0);
        if (n == 0) {             /* orderly close by the client */
            conn_free(c);
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return;
            conn_free(c);         /* ECONNRESET and the like */
            return;
        }
        c->in.len += (size_t)n;
        if (!process_input(c))
            return;               /* c was closed */
        if ((size_t)n < space && !(c->ssl && SSL_pending(c->ssl) > 0))
            return;               /* the socket is drained */
    }
    /* Four reads done and OpenSSL still holds bytes: no epoll event will
     * say so (inv. 8), so come back on the next loop turn. */
    if (c->ssl && c->reading && !c->busy && SSL_pending(c->ssl) > 0)
        event_active(c->rev, EV_READ, 0);
}

/* The login is done: TLS handshake, then SASL on a SASL listener, then
 * one request served (inv. 9). */
static void promote(bk_conn *c)
{
    if (!c->established && !c->handshaking &&
        (!bk_secproto_is_sasl(c->proto) || sec_sasl_authenticated(c)))
        c->established = true;
}

static void login_arm(bk_server *s)
{
    static const struct timeval now = { 0, 0 };
    if (!evtimer_pending(s->login_ev, NULL))
        bk_event_add(s->login_ev, &now, "logins");    /* retried at the next login */
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    bk_conn *c = arg;
    if (c->queued) {              /* re-armed meanwhile (net_req_finish) */
        if (!(what & EV_TIMEOUT))
            want_read(c, false);
        return;
    }
    if (!c->established && !(what & EV_TIMEOUT)) {
        /* Muted and queued for a login turn (inv. 9). */
        bk_server *s = c->b->server;
        want_read(c, false);
        c->queued = true;
        c->lnext = &s->logins;
        c->lprev = s->logins.lprev;
        s->logins.lprev->lnext = c;
        s->logins.lprev = c;
        login_arm(s);
        return;
    }
    conn_read(c, what);
}

/* A login turn (inv. 9): a few queued connections read and served, then
 * the listeners held since the last turn accept again.  On a zero-timeout
 * timer, so the loop polls (and serves established connections) between
 * two turns. */
static void login_turn(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_server *s = arg;
    int64_t end = bk_mono_us() + LOGIN_TURN_US;
    for (int n = 0; n < LOGIN_BURST && s->logins.lnext != &s->logins &&
                    (n == 0 || bk_mono_us() < end); n++) {
        bk_conn *c = s->logins.lnext;
        c->queued = false;
        s->logins.lnext = c->lnext;
        c->lnext->lprev = &s->logins;
        c->lnext = c->lprev = NULL;
        if (c->handshaking) {     /* re-armed with what is left of its deadline */
            int64_t left = c->hs_deadline_us - bk_mono_us();
            if (left < 0)
                left = 0;
            struct timeval tv = { (time_t)(left / 1000000), (suseconds_t)(left % 1000000) };
            c->reading = true;
            if (bk_event_add(c->rev, &tv, "handshake deadline") != 0)
                conn_event_failed(c);
        } else if (!c->busy && !c->paused && !c->starved) {
            want_read(c, true);
        }
        conn_read(c, EV_READ);    /* may free c */
    }
    for (int i = 0; i < s->nlsocks; i++) {
        bk_lsock *ls = &s->lsocks[i];
        ls->burst = 0;
        if (ls->held && !s->b->stopping)
            evconnlistener_enable(ls->ev);
        ls->held = false;
    }
    if (s->logins.lnext != &s->logins)
        login_arm(s);
}

/* Runs on its own loop turn after a reservation was released: resumes
 * starved connections in arrival order while the pool has room. */
static void wake_starved(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_server *s = arg;
    int64_t limit = s->b->cfg->queued_max_request_bytes;
    /* Each gets one try per wake-up: one that starves again goes to the
     * back of the list, so the loop is bounded by the list at entry. */
    int n = 0;
    for (bk_conn *c = s->starved.snext; c != &s->starved; c = c->snext)
        n++;
    while (n-- > 0 && s->starved.snext != &s->starved &&
           (limit < 0 || s->pool_used < limit || s->pool_used == 0)) {
        bk_conn *c = s->starved.snext;
        unstarve(c);
        if (c->busy || c->paused)
            continue;             /* their own paths re-enable reading */
        want_read(c, true);
        process_input(c);         /* reserves, starves again, or frees c */
    }
}

static int conns_from(bk_server *s, const char *host)
{
    int n = 0;
    for (bk_conn *c = s->conns.next; c != &s->conns; c = c->next)
        n += strcmp(c->host, host) == 0;
    return n;
}

/* The socket can take more of a stuck output. */
static void on_writable(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_conn *c = arg;
    if (c->handshaking) {
        handshake_step(c, 0);
        return;
    }
    if (!flush_out(c))
        return;
    /* Resume once half the cap has drained (inv. 2). */
    if (c->paused && (int64_t)evbuffer_get_length(c->obuf) <=
                     c->b->cfg->connection_max_queued_bytes / 2) {
        c->paused = false;
        if (!c->busy && !c->starved)
            want_read(c, true);
        if (!c->busy)
            process_input(c);
    }
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd,
                      struct sockaddr *sa, int socklen, void *arg)
{
    (void)socklen;
    bk_lsock *ls = arg;
    bk_server *s = ls->s;
    bk_broker *b = s->b;
    if (++ls->burst >= ACCEPT_BURST && !ls->held) {
        /* Returns to the loop after this one (libevent stops accepting
         * once the callback disabled the listener): inv. 9. */
        evconnlistener_disable(l);
        ls->held = true;
        login_arm(s);
    }
    if (b->stopping || b->nconns >= b->cfg->max_connections) {
        evutil_closesocket(fd);
        return;
    }
    bk_conn *c = calloc(1, sizeof *c);
    if (!c) {
        evutil_closesocket(fd);
        return;
    }
    static uint64_t serials;
    c->serial = ++serials;
    kp_arena_init(&c->req.arena, 0);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->b = b;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    snprintf(c->host, sizeof c->host, "%s", host);
    c->listener = ls->l;
    c->proto = ls->l->proto;
    net_conn_set_principal(c, NULL);
    /* O(connections) per accept: cheap next to the accept itself. */
    if (b->cfg->max_connections_per_ip < b->cfg->max_connections &&
        conns_from(s, host) >= b->cfg->max_connections_per_ip) {
        BK_WARN("closing connection from %s: max.connections.per.ip=%d reached",
                c->peer, b->cfg->max_connections_per_ip);
        evutil_closesocket(fd);
        free(c);
        return;
    }
    c->fd = fd;
    evutil_make_socket_nonblocking(fd);
    c->obuf = evbuffer_new();
    c->stage = evbuffer_new();
    /* Tells libevent this buffer drains to a socket, so file ranges go out
     * with sendfile(2); without it they are mmapped, which is what TLS
     * without kTLS encrypts from (inv. 8). */
    bool tls = ls->l->proto == BK_SEC_SSL || ls->l->proto == BK_SEC_SASL_SSL;
    if (c->obuf && !tls)
        evbuffer_set_flags(c->obuf, EVBUFFER_FLAG_DRAINS_TO_FD);
    if (tls && (c->ssl = SSL_new(s->tls)) != NULL) {
        SSL_set_fd(c->ssl, fd);
        SSL_set_accept_state(c->ssl);
        c->handshaking = true;
        c->hs_deadline_us = bk_mono_us() + b->cfg->ssl_handshake_timeout_ms * 1000;
    }
    c->rev = event_new(b->base, fd, EV_READ | EV_PERSIST, on_readable, c);
    c->wev = event_new(b->base, fd, EV_WRITE | EV_PERSIST, on_writable, c);
    if (!c->obuf || !c->stage || !c->rev || !c->wev || (tls && !c->ssl)) {
        if (c->obuf)
            evbuffer_free(c->obuf);
        if (c->stage)
            evbuffer_free(c->stage);
        if (c->rev)
            event_free(c->rev);
        if (c->wev)
            event_free(c->wev);
        SSL_free(c->ssl);
        evutil_closesocket(fd);
        free(c);
        return;
    }
    kp_buf_init(&c->in);
    kp_buf_init(&c->out);
    if (c->handshaking) {         /* the deadline's timer (inv. 7) */
        int64_t ms = b->cfg->ssl_handshake_timeout_ms;
        struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
        c->reading = true;
        if (bk_event_add(c->rev, &tv, "handshake deadline") != 0)
            conn_event_failed(c);
    } else {
        want_read(c, true);
    }
    c->next = s->conns.next;
    c->prev = &s->conns;
    s->conns.next->prev = c;
    s->conns.next = c;
    b->nconns++;
}

static int bind_listener(bk_server *s, const bk_listener *l, char *err, size_t errlen)
{
    struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                                     .ai_flags = EVUTIL_AI_PASSIVE };
    struct evutil_addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", l->port);
    const char *host = l->host[0] ? l->host : NULL;
    int rc = evutil_getaddrinfo(host, port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(err, errlen, "cannot resolve listener %s://%s:%s: %s", l->name,
                 host ? host : "*", port, evutil_gai_strerror(rc));
        return -1;
    }
    bk_lsock *ls = &s->lsocks[s->nlsocks];
    ls->s = s;
    ls->l = l;
    ls->ev = evconnlistener_new_bind(s->b->base, on_accept, ls,
                                     LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_FREE,
                                     4096, ai->ai_addr, (int)ai->ai_addrlen);
    evutil_freeaddrinfo(ai);
    if (!ls->ev) {
        snprintf(err, errlen, "cannot listen on %s://%s:%s: %s", l->name, host ? host : "*",
                 port, strerror(errno));
        return -1;
    }
    s->nlsocks++;
    BK_INFO("listener %s (%s) on %s:%d, advertised as %s:%d%s", l->name,
            bk_secproto_name(l->proto), host ? host : "*", l->port, l->adv_host, l->adv_port,
            l == &s->b->cfg->listeners[s->b->cfg->inter_broker_listener] &&
            s->b->cfg->zookeeper_connect[0] ? " (inter-broker)" : "");
    return 0;
}

int net_server_start(bk_broker *b, char *err, size_t errlen)
{
    bk_server *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->b = b;
    s->conns.next = s->conns.prev = &s->conns;
    s->starved.snext = s->starved.sprev = &s->starved;
    s->logins.lnext = s->logins.lprev = &s->logins;
    b->server = s;
    s->wake_ev = event_new(b->base, -1, 0, wake_starved, s);
    s->login_ev = evtimer_new(b->base, login_turn, s);
    if (!s->wake_ev || !s->login_ev) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < b->cfg->nlisteners; i++) {
        const bk_listener *l = &b->cfg->listeners[i];
        if ((l->proto == BK_SEC_SSL || l->proto == BK_SEC_SASL_SSL) && !s->tls) {
            char terr[512];
            s->tls = sec_tls_server_ctx(b, terr, sizeof terr);
            if (!s->tls) {
                snprintf(err, errlen, "listener %s: %s", l->name, terr);
                return -1;
            }
            bool kern = sec_tls_kernel_available();
            BK_INFO("TLS: %s (OpenSSL %s); client auth %s, protocols %s",
                    kern ? "kernel TLS available: sends use kTLS where the cipher allows"
                         : "no kernel TLS here (no \"tls\" TCP ULP): fetches are encrypted "
                           "from mmapped segments by SSL_write",
                    OpenSSL_version(OPENSSL_VERSION), b->cfg->ssl_client_auth,
                    b->cfg->ssl_enabled_protocols);
        }
        if (bind_listener(s, l, err, errlen))
            return -1;
    }
    return 0;
}

static void drain_check(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_server *s = arg;
    bool busy = false;
    for (bk_conn *c = s->conns.next; c != &s->conns; c = c->next)
        if (c->busy)
            busy = true;
    if (!busy || bk_mono_us() > s->drain_deadline_us)
        event_base_loopexit(s->b->base, NULL);
}

void net_server_drain(bk_broker *b)
{
    bk_server *s = b->server;
    if (!s)
        return;
    for (int i = 0; i < s->nlsocks; i++)
        evconnlistener_disable(s->lsocks[i].ev);
    /* Deferred requests that can answer early (a waiting Fetch) are told
     * to; the others answer by their own timers.  Leave the loop once all
     * have, or after three seconds either way. */
    s->drain_deadline_us = bk_mono_us() + 3000000;
    for (bk_conn *c = s->conns.next, *next; c != &s->conns; c = next) {
        next = c->next;       /* expire may answer, and the answer may close c */
        if (c->busy && c->req.expire)
            c->req.expire(&c->req);
    }
    s->drain_timer = event_new(b->base, -1, EV_PERSIST, drain_check, s);
    struct timeval tv = { 0, 20000 };
    if (bk_event_add(s->drain_timer, &tv, "drain check") != 0) {
        /* Nothing would look again: stop now, as at the deadline. */
        event_base_loopexit(b->base, NULL);
        return;
    }
    drain_check(-1, 0, s);
}

void net_server_free(bk_broker *b)
{
    bk_server *s = b->server;
    if (!s)
        return;
    while (s->conns.next != &s->conns)
        conn_free(s->conns.next);
    if (s->drain_timer)
        event_free(s->drain_timer);
    if (s->wake_ev)
        event_free(s->wake_ev);
    if (s->login_ev)
        event_free(s->login_ev);
    for (int i = 0; i < s->nlsocks; i++)
        evconnlistener_free(s->lsocks[i].ev);
    free(s);
    b->server = NULL;
    sec_tls_free(b);
}
