/*
 * daemon/producer_ids.c — producer ids (bk_producer_id_next, broker.h).
 *
 * Ids come from SQLite (producer_ids) in blocks of PID_BLOCK, like Kafka's
 * ProducerIdManager: one durable write per block, and an id is never
 * handed out twice, even across a crash (the unused rest of a block is
 * skipped).  Idempotent producers (api_producer_id.c) and the transaction
 * coordinator (daemon/txn/) both draw from here.  Cluster mode draws
 * from ZooKeeper instead, so ids are unique across the brokers
 * (b->on_producer_id_next, daemon/cluster/cluster_producer_ids.c).
 *
 *   P1. In cluster mode an InitProducerId is answered only after a read of
 *       the producer id floor (sync, then get: cluster_producer_ids.c PB8)
 *       that was SENT after the request arrived, so an id handed out lies
 *       at or above every floor raised before the request (a watch not yet
 *       processed does not count).  The request is deferred meanwhile
 *       (BK_DEFER: nothing waits on the loop); requests that arrive while a
 *       read is in flight wait for the next one (pid_wait_next), and one
 *       read covers all that were waiting when it was sent (pid_wait_cur).
 *       A waiting request whose connection closes is unlinked (cancel).
 */
#include "daemon/request.h"
#include "metadata/md.h"

#include <stddef.h>

#define PID_BLOCK 1000

int16_t bk_producer_id_next(bk_broker *b, int64_t *pid)
{
    if (b->on_producer_id_next)
        return b->on_producer_id_next(b, pid);    /* cluster mode */
    if (b->pid_next >= b->pid_end) {
        char err[MD_ERRLEN];
        int64_t first;
        if (md_producer_id_allocate(b->db, PID_BLOCK, &first, err, sizeof err) != 0) {
            BK_ERROR("InitProducerId: cannot reserve producer ids: %s", err);
            return KP_COORDINATOR_NOT_AVAILABLE;      /* retriable */
        }
        b->pid_next = first;
        b->pid_end = first + PID_BLOCK;
    }
    *pid = b->pid_next++;
    return KP_NONE;
}

int16_t bk_producer_id_floor(bk_broker *b, int64_t above)
{
    if (b->on_producer_id_floor)
        return b->on_producer_id_floor(b, above);  /* cluster mode */
    if (above < b->pid_floor)
        return KP_NONE;                  /* the common case: nothing to do */
    int64_t floor = (above / PID_BLOCK + 1) * PID_BLOCK;
    char err[MD_ERRLEN];
    if (md_producer_id_floor(b->db, floor, err, sizeof err) != 0) {
        BK_ERROR("cannot raise the producer id floor to %lld: %s", (long long)floor, err);
        return KP_COORDINATOR_NOT_AVAILABLE;
    }
    b->pid_floor = floor;
    if (b->pid_next <= above)
        b->pid_next = b->pid_end;        /* the block in hand may hold those ids: dropped */
    return KP_NONE;
}

/* ---- P1: a fresh floor before an InitProducerId is answered ---------------------------- */
struct bk_pid_wait {
    bk_req *r;
    bk_handler h;
    kp_rd body;                      /* the request body, unread */
    struct bk_pid_wait *next;
};

static char pid_fresh;               /* r->state: the read is back, go on */

static void wait_unlink(struct bk_pid_wait **l, const struct bk_pid_wait *w)
{
    for (; *l; l = &(*l)->next)
        if (*l == w) {
            *l = w->next;
            return;
        }
}

static void wait_cancel(bk_req *r)
{
    struct bk_pid_wait *w = r->state;
    wait_unlink(&r->b->pid_wait_cur, w);
    wait_unlink(&r->b->pid_wait_next, w);
    wait_unlink(&r->b->pid_wait_run, w);
    r->state = NULL;
}

static void wait_send(bk_broker *b)
{
    if (b->pid_reading || !b->pid_wait_next)
        return;
    b->pid_wait_cur = b->pid_wait_next;
    b->pid_wait_next = NULL;
    b->pid_reading = true;
    b->on_producer_id_fresh(b);      /* answers later, on the loop */
}

static void wait_resume(struct bk_pid_wait *w)
{
    bk_req *r = w->r;
    r->cancel = NULL;
    r->state = &pid_fresh;
    r->body = w->body;
    int rc = w->h(r);                /* w lives in r's arena: not used after */
    if (r->state == &pid_fresh)
        r->state = NULL;
    switch (rc) {
    case BK_DEFER:
        break;                       /* the handler finishes it itself */
    case BK_RESPOND:
        net_req_finish(r);
        break;
    case BK_NO_RESPONSE:
        net_req_finish_silent(r);
        break;
    case BK_RESPOND_CLOSE:
        net_req_close(r, true);
        break;
    default:
        net_req_close(r, false);
        break;
    }
}

void bk_producer_ids_synced(bk_broker *b)
{
    /* run: a list of b's, so a waiter whose connection closes while an
     * earlier one runs is unlinked (cancel) before its turn */
    struct bk_pid_wait **run = &b->pid_wait_run;
    while (*run)
        run = &(*run)->next;
    *run = b->pid_wait_cur;
    b->pid_wait_cur = NULL;
    b->pid_reading = false;
    while (b->pid_wait_run) {        /* a resumed connection may add to next */
        struct bk_pid_wait *w = b->pid_wait_run;
        b->pid_wait_run = w->next;
        wait_resume(w);
    }
    if (b->on_producer_id_fresh)
        wait_send(b);
}

bool bk_producer_id_wait(bk_req *r, bk_handler h)
{
    bk_broker *b = r->b;
    if (r->state == &pid_fresh) {
        r->state = NULL;
        return false;
    }
    if (!b->on_producer_id_fresh)
        return false;                /* standalone: SQLite's ids, no floor to read */
    struct bk_pid_wait *w = bk_req_alloc(r, 1, sizeof *w);
    if (!w) {
        BK_ERROR("InitProducerId: out of memory: answered without a fresh producer id floor");
        return false;                /* out of memory: answered without P1 */
    }
    *w = (struct bk_pid_wait){ .r = r, .h = h, .body = r->body, .next = b->pid_wait_next };
    b->pid_wait_next = w;
    r->state = w;
    r->cancel = wait_cancel;
    wait_send(b);
    return true;
}
