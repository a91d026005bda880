/*
 * daemon/replication/repl_peer.c — requests from this broker to another
 * (repl_peer.h): a transaction coordinator's WriteTxnMarkers to partition
 * leaders, a leader's AddPartitionsToTxn verification to a coordinator.
 *
 * One connection per peer broker, made on the first call to it, to its
 * endpoint on the inter-broker listener (inter.broker.listener.name), with
 * the socket, TLS and SASL login the replica fetchers use (repl_conn.h,
 * sec_sasl_client.h).  No ApiVersions: our peers run our code.  Unlike a
 * fetcher, several requests are in flight on a connection; answers are
 * matched to calls by correlation id.
 *
 * States of a peer:
 *
 *   IDLE ──call──► CONNECTING ──connected──► READY (queued calls sent)
 *    ▲  (after the backoff,      │  SASL_* listener: LOGIN (SaslHandshake,
 *    │   if one is due)          │  SaslAuthenticate) ─authenticated─► READY
 *    └──── conn_fail ◄───────────┴── connect error, EOF, a frame of an
 *       (every waiting call:          impossible size, a login refused
 *        NETWORK_EXCEPTION)
 *
 * Invariants:
 *   P1. Every call's done runs exactly once, from an event of the loop
 *       (its answer, or its own timer: its timeout, or armed at zero with
 *       the error when it cannot be sent or its connection failed) or
 *       from repl_peers_stop, never inside repl_peer_call; the call is off
 *       every list and its timer freed before done runs, so done may call
 *       again.
 *   P2. A call is on its peer's list from repl_peer_call until it is
 *       answered or failed; `sent` says its request went out on the
 *       current connection.  A connection's failure answers every call on
 *       the list, sent or not, so no call waits on a connection that is
 *       gone.  A call failed, to be answered on the next loop turn, is on
 *       its set's `later` list, so repl_peers_stop answers it even if the
 *       loop does not turn again.
 *   P3. Memory is bounded by the calls in flight: each holds its framed
 *       request; an answer frame larger than PC_FRAME_MAX fails the
 *       connection before anything is buffered for it beyond what the
 *       socket gave.
 *   P4. Nothing but the login goes out on a SASL_* listener before it
 *       succeeded (sec_sasl_client.h SC1): calls wait queued in LOGIN.
 *   P5. After a failed connection the next one waits
 *       repl_peer_backoff_ms (doubling, 50 ms to 1 s, Kafka's
 *       reconnect.backoff.ms / .max.ms); a call made meanwhile is queued and
 *       its timeout still runs.  A connection that logged in resets it.
 *   P6. A call that times out is answered REQUEST_TIMED_OUT alone while
 *       the peer answers others; when nothing at all came back on the
 *       connection since it was sent, the connection is failed too (P2),
 *       so a peer that vanished without a FIN (a host that died) is not
 *       waited on call after call.
 */
#include "daemon/replication/repl_peer.h"
#include "daemon/broker.h"
#include "daemon/replication/repl_conn.h"
#include "daemon/security/sec_tls.h"
#include "daemon/replication/repl_isr.h"
#include "daemon/security/sec_sasl_client.h"
#include "daemon/view/view.h"
#include "kp_msgs.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PC_HOST_MAX 256
/* An answer to a peer call is small (markers' and verifications' error
 * codes); a frame above this is a broken or hostile peer (P3). */
#define PC_FRAME_MAX (16 << 20)
#define PC_BACKOFF_MIN_MS 50
#define PC_BACKOFF_MAX_MS 1000
/* A connection that makes no progress (connecting, or a login's answer)
 * fails after this; calls have their own timeouts. */
#define PC_CONNECT_TIMEOUT_MS 30000

enum pc_state { PC_IDLE, PC_CONNECTING, PC_LOGIN, PC_READY };

typedef struct pc_call {
    struct pc_peer *peer;                /* while on its peer's list */
    struct pc_call **head;               /* the list it is on: its peer's calls,
                                            its set's later, or none (NULL) */
    int32_t corrid;
    bool sent;
    int64_t sent_us;                     /* mono, when sent */
    int16_t api, version;
    int16_t error;                       /* answered by the timer with this */
    kp_buf req;                          /* framed: size, header, body */
    struct event *timer;
    repl_peer_done done;
    void *arg;
    struct pc_call *prev, *next;
} pc_call;

typedef struct pc_peer {
    struct pc_set *set;
    int32_t id;
    char host[PC_HOST_MAX];
    int32_t port;
    enum pc_state state;
    struct bufferevent *bev;
    struct event *timer;                 /* the backoff's end (P5) */
    int failures;                        /* consecutive failed connections */
    int64_t retry_us;                    /* mono: no connection before */
    int64_t reauth_us;                   /* mono: log in afresh after (KIP-368) */
    int64_t answer_us;                   /* mono: the last answer read (P6) */
    int32_t corrid;
    pc_call *calls;                      /* P2 */
    bk_sasl_client sasl;
    int32_t sasl_corrid;
    int16_t sasl_api;
    kp_arena arena;
    struct pc_peer *next;
} pc_peer;

typedef struct pc_set {
    bk_broker *b;
    struct evdns_base *dns;
    bk_sasl_keys keys;                   /* sec_sasl_client.h SC2 */
    pc_peer *peers;
    pc_call *later;                      /* answered on the next loop turn (P1) */
} pc_set;

/* b->repl->peers from repl_peers_stop on: no new set is made (a call from
 * a done callback during the stop). */
static pc_set stopped;

static uint64_t calls_sent, calls_failed;

void repl_peer_counters(uint64_t *sent, uint64_t *failed)
{
    *sent = calls_sent;
    *failed = calls_failed;
}

int64_t repl_peer_backoff_ms(int failures, int64_t min_ms, int64_t max_ms)
{
    if (failures <= 0)
        return 0;
    int64_t ms = min_ms;
    for (int i = 1; i < failures && ms < max_ms; i++)
        ms *= 2;
    return ms < max_ms ? ms : max_ms;
}

/* ---- calls -------------------------------------------------------------------- */

static void call_link(pc_call *c, pc_call **head)
{
    c->head = head;
    c->prev = NULL;
    c->next = *head;
    if (*head)
        (*head)->prev = c;
    *head = c;
}

static void call_unlink(pc_call *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else if (c->head)
        *c->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->prev = c->next = NULL;
    c->head = NULL;
    c->peer = NULL;
}

/* P1: off the lists, freed, then done. */
static void call_finish(pc_call *c, int16_t error, kp_rd *body)
{
    call_unlink(c);
    event_free(c->timer);
    repl_peer_done done = c->done;
    void *arg = c->arg;
    kp_buf_free(&c->req);
    free(c);
    if (error != KP_NONE)
        calls_failed++;
    done(arg, error, body);
}

static void conn_fail(pc_peer *p, const char *why);

static void on_call_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    pc_call *c = arg;
    pc_peer *p = c->peer;
    /* P6: nothing came back since it went out: the connection is taken
     * for dead (Kafka's clients disconnect on a request timeout). */
    if (p && c->sent && p->answer_us < c->sent_us) {
        call_unlink(c);                  /* its own answer: the timeout */
        conn_fail(p, "no answer in time");
    }
    call_finish(c, c->error, NULL);
}

/* Answered on the next loop turn (P1): no peer, or none reachable now;
 * kept on s->later (s may be NULL: no set) so a stop answers it. */
static void call_later(pc_set *s, pc_call *c, int16_t error)
{
    call_unlink(c);
    if (s)
        call_link(c, &s->later);
    c->error = error;
    struct timeval zero = { 0, 0 };
    event_del(c->timer);
    if (bk_event_add(c->timer, &zero, "peer call answer") != 0)
        abort();                         /* a done never run would hang its caller */
}

/* P2: every call of the peer answered with error: on the next loop turn
 * (P1: this may run inside repl_peer_call), or at once when the broker
 * stops (the loop may not run again). */
static void answer_all(pc_peer *p, int16_t error, bool now)
{
    while (p->calls) {
        pc_call *c = p->calls;
        if (now)
            call_finish(c, error, NULL);
        else
            call_later(p->set, c, error);
    }
}

/* ---- the connection -------------------------------------------------------------- */

static void peer_connect(pc_peer *p);

static void close_conn(pc_peer *p)
{
    sec_sasl_client_reset(&p->sasl);
    p->reauth_us = 0;
    if (p->bev)
        bufferevent_free(p->bev);        /* no callback runs after this */
    p->bev = NULL;
    p->state = PC_IDLE;
}

/* Lost or refused: every waiting call NETWORK_EXCEPTION (P2), the next
 * connection after the backoff (P5). */
static void conn_fail(pc_peer *p, const char *why)
{
    p->failures++;
    int64_t ms = repl_peer_backoff_ms(p->failures, PC_BACKOFF_MIN_MS, PC_BACKOFF_MAX_MS);
    p->retry_us = bk_mono_us() + ms * 1000;
    BK_WARN("peer broker %d (%s:%d): %s; the next connection in %lld ms at the earliest",
            p->id, p->host, p->port, why, (long long)ms);
    close_conn(p);
    answer_all(p, KP_NETWORK_EXCEPTION, false);
}

static int write_frame(pc_peer *p, const kp_buf *frame)
{
    return bufferevent_write(p->bev, frame->data, frame->len);
}

/* READY: every call not yet sent goes out, in the order made. */
static void flush_calls(pc_peer *p)
{
    pc_call *last = p->calls;
    while (last && last->next)
        last = last->next;
    for (pc_call *c = last; c; c = c->prev) {    /* the list is newest first */
        if (c->sent)
            continue;
        if (write_frame(p, &c->req) != 0) {
            conn_fail(p, "cannot send a request");
            return;
        }
        c->sent = true;
        c->sent_us = bk_mono_us();
        calls_sent++;
    }
}

/* The SASL exchange's requests (sec_sasl_client.h ops). */
static void sasl_send(void *conn, int16_t api, int16_t version, const void *q)
{
    pc_peer *p = conn;
    bk_broker *b = p->set->b;
    char client_id[32];
    snprintf(client_id, sizeof client_id, "broker-%d-peer", b->cfg->broker_id);
    kp_buf out;
    kp_buf_init(&out);
    if (++p->corrid < 0)
        p->corrid = 0;
    size_t frame = kp_wr_i32_placeholder(&out);
    kp_req_hdr_write(&out, api, version, p->corrid, client_id);
    if (api == KP_API_SASL_HANDSHAKE)
        kp_enc_SaslHandshakeRequest(&out, version, q);
    else
        kp_enc_SaslAuthenticateRequest(&out, version, q);
    kp_wr_i32_at(&out, frame, (int32_t)(out.len - frame - 4));
    int rc = out.err ? -1 : write_frame(p, &out);
    OPENSSL_cleanse(out.data, out.cap);          /* the password or proof */
    kp_buf_free(&out);
    if (rc != 0) {
        conn_fail(p, "cannot send the login");
        return;
    }
    p->sasl_corrid = p->corrid;
    p->sasl_api = api;
}

static void sasl_conn_fail(void *conn, const char *why)
{
    conn_fail(conn, why);
}

static void sasl_authenticated(void *conn, int64_t lifetime_ms)
{
    pc_peer *p = conn;
    p->state = PC_READY;
    p->failures = 0;
    bufferevent_set_timeouts(p->bev, NULL, NULL);  /* idle stays: calls time out */
    /* KIP-368: a session that ends is renewed by a new connection when the
     * next call comes after 90 % of it. */
    p->reauth_us = lifetime_ms > 0 && lifetime_ms < INT64_MAX / 900
        ? bk_mono_us() + lifetime_ms * 900 : 0;
    flush_calls(p);
}

static const bk_sasl_client_ops sasl_ops = { sasl_send, sasl_conn_fail, sasl_authenticated };

static void on_salted(void *owner, bool ok)
{
    pc_set *s = owner;
    for (pc_peer *p = s->peers; p; p = p->next)
        if (p->sasl.salting)
            sec_sasl_client_resume(&p->sasl, ok);
}

/* One answer frame (after its size): the login's, or a call's. */
static void handle_frame(pc_peer *p, const uint8_t *frame, size_t len)
{
    kp_rd r;
    kp_rd_init(&r, frame, len);
    int32_t corrid = kp_rd_i32(&r);
    if (!kp_rd_ok(&r)) {
        conn_fail(p, "an answer without a correlation id");
        return;
    }
    p->answer_us = bk_mono_us();
    if (p->state == PC_LOGIN) {
        if (corrid != p->sasl_corrid || p->sasl.salting) {
            conn_fail(p, "an answer with an unexpected correlation id during the login");
            return;
        }
        kp_arena_reset(&p->arena);
        sec_sasl_client_answer(&p->sasl, p->sasl_api, &r, &p->arena);
        return;
    }
    pc_call *c = p->calls;
    while (c && !(c->sent && c->corrid == corrid))
        c = c->next;
    if (!c)
        return;                          /* its call timed out: answered already */
    if (c->api != KP_API_API_VERSIONS && c->version >= kp_api_first_flexible(c->api))
        kp_rd_tags(&r);                  /* response header v1 */
    if (!kp_rd_ok(&r)) {
        conn_fail(p, "an answer with a malformed header");
        return;
    }
    call_finish(c, KP_NONE, &r);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    pc_peer *p = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    while (p->bev == bev) {
        uint8_t hdr[4];
        size_t have = evbuffer_get_length(in);
        if (have < 4 || evbuffer_copyout(in, hdr, 4) != 4)
            return;
        uint32_t size = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
                        (uint32_t)hdr[2] << 8 | hdr[3];
        if (size < 4 || size > PC_FRAME_MAX) {           /* P3 */
            conn_fail(p, "an answer frame of an impossible size");
            return;
        }
        if (have < (size_t)size + 4)
            return;
        const uint8_t *f = evbuffer_pullup(in, (ssize_t)size + 4);
        if (!f) {
            conn_fail(p, "out of memory for an answer");
            return;
        }
        /* handle_frame may fail the connection: bev is freed, with its
         * input, and nothing of it is touched after. */
        handle_frame(p, f + 4, size);
        if (p->bev != bev)
            return;
        evbuffer_drain(in, (size_t)size + 4);
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    pc_peer *p = arg;
    if (bev != p->bev)
        return;
    if (what & BEV_EVENT_CONNECTED) {
        BK_INFO("peer broker %d: connected to %s:%d", p->id, p->host, p->port);
        /* Idle connections stay: calls carry their own timeouts. */
        bufferevent_set_timeouts(bev, NULL, NULL);
        if (sec_sasl_client_wanted(p->set->b)) {
            p->state = PC_LOGIN;         /* P4 */
            struct timeval tv = { PC_CONNECT_TIMEOUT_MS / 1000, 0 };
            bufferevent_set_timeouts(bev, &tv, NULL);
            sec_sasl_client_start(&p->sasl);
            return;
        }
        p->state = PC_READY;
        p->failures = 0;
        flush_calls(p);
        return;
    }
    char why[256];
    conn_fail(p, sec_tls_event_why(bev, what, "connection closed by the peer", why,
                                     sizeof why));
}

static void peer_connect(pc_peer *p)
{
    bk_broker *b = p->set->b;
    close_conn(p);
    char err[512];
    const char *why = NULL;
    p->bev = repl_conn_new(b, p->host, err, sizeof err, &why);
    if (!p->bev) {
        conn_fail(p, why);
        return;
    }
    bufferevent_setcb(p->bev, on_read, NULL, on_event, p);
    struct timeval tv = { PC_CONNECT_TIMEOUT_MS / 1000, 0 };
    bufferevent_set_timeouts(p->bev, &tv, &tv);
    bufferevent_enable(p->bev, EV_READ | EV_WRITE);
    p->state = PC_CONNECTING;
    for (pc_call *c = p->calls; c; c = c->next)
        c->sent = false;
    /* Name resolution through evdns: nothing blocks the loop. */
    if (bufferevent_socket_connect_hostname(p->bev, p->set->dns, AF_UNSPEC, p->host,
                                            p->port) != 0)
        conn_fail(p, "cannot connect");
}

static void on_backoff(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    pc_peer *p = arg;
    if (p->state == PC_IDLE && p->calls)
        peer_connect(p);
}

/* ---- the set -------------------------------------------------------------------- */

static pc_set *set_get(bk_broker *b)
{
    if (!b->repl || b->repl->peers == &stopped)
        return NULL;
    if (b->repl->peers)
        return b->repl->peers;
    pc_set *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->b = b;
    sec_sasl_keys_init(&s->keys, b, on_salted, s);
    s->dns = evdns_base_new(b->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                     EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    b->repl->peers = s;
    return s;
}

static pc_peer *peer_get(pc_set *s, int32_t id)
{
    for (pc_peer *p = s->peers; p; p = p->next)
        if (p->id == id)
            return p;
    pc_peer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->set = s;
    p->id = id;
    p->port = -1;
    p->timer = evtimer_new(s->b->base, on_backoff, p);
    if (!p->timer) {
        free(p);
        return NULL;
    }
    kp_arena_init(&p->arena, 0);
    sec_sasl_client_init(&p->sasl, &s->keys, &sasl_ops, p, id);
    p->next = s->peers;
    s->peers = p;
    return p;
}

/* The peer's endpoint on the inter-broker listener; false: not alive. */
static bool peer_endpoint(bk_broker *b, int32_t id, char *host, int32_t *port)
{
    if (!view_broker_alive(b, id))
        return false;
    static bk_broker_info info[CL_MAX_BROKERS];  /* the loop thread's only */
    const bk_listener *ib = &b->cfg->listeners[b->cfg->inter_broker_listener];
    int n = view_brokers_info(b, ib->name, info, CL_MAX_BROKERS);
    for (int i = 0; i < n; i++)
        if (info[i].id == id) {
            snprintf(host, PC_HOST_MAX, "%s", info[i].host);
            *port = info[i].port;
            return true;
        }
    return false;
}

void repl_peer_call(bk_broker *b, int32_t broker_id, int16_t api, int16_t version,
                    const uint8_t *body, size_t len, int64_t timeout_ms,
                    repl_peer_done done, void *arg)
{
    pc_call *c = calloc(1, sizeof *c);
    if (!c)
        abort();                         /* P1 cannot be kept without it */
    c->api = api;
    c->version = version;
    c->done = done;
    c->arg = arg;
    c->error = KP_REQUEST_TIMED_OUT;
    c->timer = evtimer_new(b->base, on_call_timer, c);
    if (!c->timer)
        abort();
    kp_buf_init(&c->req);
    pc_set *s = b->stopping ? NULL : set_get(b);
    char host[PC_HOST_MAX];
    int32_t port = -1;
    if (!s || !peer_endpoint(b, broker_id, host, &port)) {
        call_later(s, c, KP_BROKER_NOT_AVAILABLE);
        return;
    }
    pc_peer *p = peer_get(s, broker_id);
    if (!p) {
        call_later(s, c, KP_BROKER_NOT_AVAILABLE);
        return;
    }
    if (p->state != PC_IDLE && (p->port != port || strcmp(p->host, host) != 0))
        conn_fail(p, "the broker moved to another endpoint");   /* it restarted */
    snprintf(p->host, sizeof p->host, "%s", host);
    p->port = port;
    if (++p->corrid < 0)
        p->corrid = 0;
    c->corrid = p->corrid;
    char client_id[32];
    snprintf(client_id, sizeof client_id, "broker-%d-peer", b->cfg->broker_id);
    size_t frame = kp_wr_i32_placeholder(&c->req);
    kp_req_hdr_write(&c->req, api, version, c->corrid, client_id);
    kp_wr_raw(&c->req, body, len);
    kp_wr_i32_at(&c->req, frame, (int32_t)(c->req.len - frame - 4));
    if (c->req.err) {
        call_later(s, c, KP_BROKER_NOT_AVAILABLE);
        return;
    }
    int64_t t = timeout_ms > 0 ? timeout_ms : 0;
    struct timeval tv = { (time_t)(t / 1000), (suseconds_t)(t % 1000) * 1000 };
    if (bk_event_add(c->timer, &tv, "peer call timeout") != 0)
        abort();                         /* without it a call could wait forever */
    call_link(c, &p->calls);
    c->peer = p;
    int64_t now = bk_mono_us();
    if (p->state == PC_READY && p->reauth_us && now >= p->reauth_us && !c->next) {
        close_conn(p);                   /* KIP-368: a fresh login for the new call */
    }
    if (p->state == PC_READY) {
        flush_calls(p);
    } else if (p->state == PC_IDLE && !evtimer_pending(p->timer, NULL)) {
        int64_t wait = p->retry_us > now ? p->retry_us - now : 0;
        struct timeval bt = { (time_t)(wait / 1000000), (suseconds_t)(wait % 1000000) };
        if (bk_event_add(p->timer, &bt, "peer connection") != 0)
            call_later(s, c, KP_BROKER_NOT_AVAILABLE);
    }
}

void repl_peers_stop(bk_broker *b)
{
    pc_set *s = b->repl ? b->repl->peers : NULL;
    if (!s || s == &stopped)
        return;
    b->repl->peers = &stopped;           /* a call from a done: answered later */
    while (s->peers) {
        pc_peer *p = s->peers;
        s->peers = p->next;
        close_conn(p);
        answer_all(p, KP_BROKER_NOT_AVAILABLE, true);
        event_free(p->timer);
        kp_arena_free(&p->arena);
        free(p);
    }
    while (s->later)                     /* the loop may not run again */
        call_finish(s->later, s->later->error, NULL);
    sec_sasl_keys_free(&s->keys);        /* a job in flight is disowned */
    if (s->dns)
        evdns_base_free(s->dns, 0);
    free(s);
}
