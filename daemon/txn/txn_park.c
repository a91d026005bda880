/*
 * daemon/txn/txn_park.c — a client request that meets its transactional id
 * busy (a write of it in flight, or its markers: txn_log.c T3) waits here,
 * a short while, instead of being answered CONCURRENT_TRANSACTIONS at once.
 *
 * Why: a producer's next transaction starts while the markers of the one it
 * just committed are still being written (EndTxn is answered after
 * PrepareCommit, as in Kafka).  Its AddPartitionsToTxn would get
 * CONCURRENT_TRANSACTIONS and the client retries after a backoff (tens of
 * ms in librdkafka and the Java client) — longer than the markers take.
 * Parked, the request is run again as soon as the id is free: the client
 * sees the answer it would have had from its retry, sooner, with one
 * request instead of several.
 *
 *     handler meets CONCURRENT_TRANSACTIONS ── txn_park ──► parked
 *     parked ── the id's write ends, or the id leaves memory
 *               (txn_park_wake: event_active) ──► handler run again
 *     parked ── TXN_PARK_MS since it first parked (its timer) ──► handler run
 *               again, which answers CONCURRENT_TRANSACTIONS this time
 *     parked ── the connection goes (r->cancel) ──► freed, nothing sent
 *     parked ── the server drains (r->expire) ──► run again, no more parking
 *
 * Invariants (cite as "txn_park.c P1"):
 *   P1. A parked request is on tp_all and owns one timer event; both go
 *       before its handler runs again or when its connection goes.
 *   P2. A request parks for TXN_PARK_MS at most in all, however often it
 *       is woken and parks again (the deadline is the first park's).
 *   P3. A rerun reads the request as it first arrived (the body's cursor
 *       as saved before decoding); the handler's decisions are all made
 *       again, nothing of the first run is kept.
 */
#include "daemon/txn/txn_int.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define TXN_PARK_MS 1000

typedef struct tp_park {
    struct tp_park *next, *prev;     /* on tp_all (P1) */
    bk_req *r;
    kp_rd body;                       /* P3 */
    int (*handler)(bk_req *r);
    kp_str id;                        /* borrowed from the request's frame */
    int64_t deadline_us;              /* P2 */
    struct event *ev;
} tp_park;

static tp_park tp_all = { .next = &tp_all, .prev = &tp_all };

/* The request being run again by park_fire, and its deadline (P2). */
static struct {
    bk_req *r;
    int64_t deadline_us;
} tp_rerun;

static void park_unlink_free(tp_park *p)
{
    p->prev->next = p->next;
    p->next->prev = p->prev;
    if (p->ev)
        event_free(p->ev);
    free(p);
}

/* r's park, r's deferral hooks cleared. */
static tp_park *park_take(bk_req *r)
{
    tp_park *p = r->state;
    r->state = NULL;
    r->cancel = r->expire = NULL;
    return p;
}

static void park_cancel(bk_req *r)
{
    tp_park *p = park_take(r);
    if (p)
        park_unlink_free(p);
}

static void park_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    tp_park *p = arg;
    bk_req *r = p->r;
    int (*handler)(bk_req *r) = p->handler;
    int64_t deadline = p->deadline_us;
    r->body = p->body;
    park_unlink_free(park_take(r));   /* P1 */
    tp_rerun.r = r;
    tp_rerun.deadline_us = deadline;
    int rc = handler(r);
    tp_rerun.r = NULL;
    if (rc == BK_RESPOND)
        net_req_finish(r);
    else if (rc != BK_DEFER)
        net_req_close(r, false);
}

/* Draining: run again now, and answer whatever it is. */
static void park_expire(bk_req *r)
{
    tp_park *p = r->state;
    if (p) {
        p->deadline_us = 0;
        event_active(p->ev, EV_TIMEOUT, 0);
    }
}

int txn_park(bk_req *r, kp_rd body, int (*handler)(bk_req *r), kp_str id)
{
    int64_t now = bk_mono_us();
    int64_t deadline = tp_rerun.r == r ? tp_rerun.deadline_us : now + TXN_PARK_MS * 1000;
    if (now >= deadline || id.len <= 0 || r->state)
        return BK_RESPOND;
    tp_park *p = calloc(1, sizeof *p);
    if (!p || !(p->ev = evtimer_new(r->b->base, park_fire, p))) {
        free(p);
        return BK_RESPOND;
    }
    int64_t left = deadline - now;
    struct timeval tv = { (time_t)(left / 1000000), (suseconds_t)(left % 1000000) };
    if (event_add(p->ev, &tv) != 0) {
        event_free(p->ev);
        free(p);
        return BK_RESPOND;
    }
    *p = (tp_park){ .next = tp_all.next, .prev = &tp_all, .r = r, .body = body,
                     .handler = handler, .id = id, .deadline_us = deadline, .ev = p->ev };
    tp_all.next->prev = p;
    tp_all.next = p;
    r->state = p;
    r->cancel = park_cancel;
    r->expire = park_expire;
    return BK_DEFER;
}

void txn_park_wake(const char *id, size_t len)
{
    for (tp_park *p = tp_all.next; p != &tp_all; p = p->next)
        if ((size_t)p->id.len == len && !memcmp(p->id.p, id, len))
            event_active(p->ev, EV_TIMEOUT, 0);
}
