/*
 * daemon/api/api_topic_wait.c — N topic writes, one answer when the last is in.
 *
 * A write half given an op either finishes before it returns or sets
 * op->pending and calls op->done on the loop later, exactly once
 * (view.h).  A wait hands out one op per entry and counts those that
 * went pending:
 *
 *   api_topic_wait_new
 *     │ per entry: api_topic_wait_op → write half → api_topic_wait_result
 *     ▼
 *   api_topic_wait_start ── none pending ──► finish(ctx); freed   (standalone)
 *     │ some pending
 *     ▼
 *   WAITING ── done: result(ctx, i) ── the last ──► finish(ctx),
 *     │                                              net_req_finish; freed
 *     │ cancel: the client's connection closed (r->cancel), or the SQL
 *     │         surface stops
 *     │ expire: shutdown (r->expire): the entries still pending answer
 *     │         REQUEST_TIMED_OUT, finish and net_req_finish run now
 *     ▼
 *   DETACHED ── done: dropped ── the last ──► freed
 *
 * Invariants:
 *   W1. result runs once per entry and finish once per wait, only while
 *       attached: after cancel or expire nothing touches ctx or the
 *       request (both live in the request's arena, which dies with it).
 *   W2. The wait lives until its last pending op has called done,
 *       whatever became of the caller, so no done reaches freed memory.
 *   W3. Entry i's answer goes to slot i, so the response keeps the
 *       request's order whatever order the answers come in.
 *   W4. A done never runs inside the write call that set pending
 *       (view.h), so counting pending ops after each call is exact.
 * Memory: one slot per pending op; a write answered at once reuses the
 * spare slot, so standalone costs two small allocations per request.
 */
#include "daemon/api/api_topic_wait.h"

#include <stdlib.h>

typedef struct tw_slot {
    bk_topic_op op;
    bk_topic_wait *w;
    int32_t i;                        /* the entry it answers */
    bool waiting;                     /* pending, done not called yet */
    struct tw_slot *next;             /* w->slots */
} tw_slot;

struct bk_topic_wait {
    bk_req *r;                        /* NULL: not a request, or detached */
    bk_topic_result_fn result;
    void (*finish)(void *ctx);
    void *ctx;
    int32_t timeout_ms;
    int32_t left;                     /* pending ops still to answer */
    bool attached;
    tw_slot *slots;                   /* every op that went pending */
    tw_slot *spare;                   /* handed out last, not pending (yet) */
};

static void tw_free(bk_topic_wait *w)
{
    for (tw_slot *s = w->slots, *n; s; s = n) {
        n = s->next;
        free(s);
    }
    free(w->spare);
    free(w);
}

/* Keeps the spare if its write went pending (W4: it cannot have answered
 * yet).  true if it did. */
static bool tw_keep(bk_topic_wait *w)
{
    tw_slot *s = w->spare;
    if (!s || !s->op.pending)
        return false;
    s->waiting = true;
    s->next = w->slots;
    w->slots = s;
    w->spare = NULL;
    w->left++;
    return true;
}

/* Detaches from the request before answering it: net_req_finish may close
 * the connection (whose cancel must not find w) or start the next
 * request on r. */
static void tw_complete(bk_topic_wait *w)
{
    bk_req *r = w->r;
    w->attached = false;
    w->r = NULL;
    if (r) {
        r->state = NULL;
        r->cancel = NULL;
        r->expire = NULL;
    }
    w->finish(w->ctx);
    if (r)
        net_req_finish(r);
}

static void tw_done(bk_topic_op *op, int rc, const char *err)
{
    tw_slot *s = op->arg;
    bk_topic_wait *w = s->w;
    if (!s->waiting)
        return;                       /* a second done breaks view.h's word */
    s->waiting = false;
    if (w->attached)
        w->result(w->ctx, s->i, rc, err ? err : "");
    if (--w->left > 0)
        return;
    if (w->attached)
        tw_complete(w);
    tw_free(w);                       /* W2: the last done */
}

bk_topic_wait *api_topic_wait_new(bk_req *r, int32_t timeout_ms, bk_topic_result_fn result,
                                 void (*finish)(void *ctx), void *ctx)
{
    bk_topic_wait *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    *w = (bk_topic_wait){ .r = r, .result = result, .finish = finish, .ctx = ctx,
                          .timeout_ms = timeout_ms, .attached = true };
    return w;
}

bk_topic_op *api_topic_wait_op(bk_topic_wait *w, int32_t i)
{
    tw_keep(w);
    if (!w->spare && !(w->spare = malloc(sizeof *w->spare)))
        return NULL;
    tw_slot *s = w->spare;
    *s = (tw_slot){ .op = { .done = tw_done, .arg = s, .timeout_ms = w->timeout_ms },
                    .w = w, .i = i };
    return &s->op;
}

void api_topic_wait_result(bk_topic_wait *w, int32_t i, int rc, const char *err)
{
    if (w->spare && w->spare->i == i && tw_keep(w))
        return;                       /* its done brings the answer */
    w->result(w->ctx, i, rc, err);
}

static void tw_cancel(bk_req *r)
{
    api_topic_wait_cancel(r->state);
}

/* Shutdown: the broker will not wait for the store; answer with what is
 * known, the rest as timed out (Kafka's answer when its controller does
 * not confirm in time).  The ops still answer later, into a detached w. */
static void tw_expire(bk_req *r)
{
    bk_topic_wait *w = r->state;
    for (tw_slot *s = w->slots; s; s = s->next)
        if (s->waiting)
            w->result(w->ctx, s->i, KP_REQUEST_TIMED_OUT,
                      "The broker shut down before the change was confirmed.");
    tw_complete(w);
}

int api_topic_wait_start(bk_topic_wait *w)
{
    tw_keep(w);
    free(w->spare);
    w->spare = NULL;
    if (w->left == 0) {
        w->r = NULL;                  /* the caller sends the answer */
        w->finish(w->ctx);
        tw_free(w);
        return BK_RESPOND;
    }
    if (w->r) {
        w->r->state = w;
        w->r->cancel = tw_cancel;
        w->r->expire = tw_expire;
    }
    return BK_DEFER;
}

void api_topic_wait_cancel(bk_topic_wait *w)
{
    if (w->r) {
        w->r->state = NULL;
        w->r->cancel = NULL;
        w->r->expire = NULL;
    }
    w->r = NULL;
    w->attached = false;
}
