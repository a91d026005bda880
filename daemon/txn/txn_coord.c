/*
 * daemon/txn/txn_coord.c — the transaction coordinator's state machine, as
 * Kafka's TransactionCoordinator: InitProducerId with a transactional id,
 * adding partitions to a transaction, aborting one (fencing, timeouts),
 * expiring idle ids.  Where the state is kept and how a change is made
 * durable: txn_log.c (T1-T4); the markers: txn_markers.c; the other
 * handlers: txn_api.c.
 *
 * An id's states (TransactionStatus) and what moves it:
 *
 *     (new) ── InitProducerId: new producer id, epoch 0 ──► Empty
 *     Empty, CompleteCommit, CompleteAbort ── InitProducerId: epoch + 1
 *         (a new producer id when the epoch would overflow) ──► Empty
 *     Empty, Complete*, Ongoing ── AddPartitionsToTxn, AddOffsetsToTxn ──► Ongoing
 *     Ongoing ── EndTxn ──► PrepareCommit | PrepareAbort
 *     Ongoing ── InitProducerId (fencing), the timeout: epoch + 1 ──► PrepareAbort
 *     Prepare* ── every marker written (txn_markers.c) ──► Complete*
 *     Empty, Complete* ── transactional.id.expiration.ms idle ──► (tombstone)
 *
 * Each arrow is one record, applied when replicated (txn_log.c T2); a
 * request meeting an id in Prepare* or with a change in flight answers
 * CONCURRENT_TRANSACTIONS and the client retries (txn_log.c T3).
 */
#include "daemon/txn/txn_int.h"
#include "daemon/security/sec_authz.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

static struct {
    bk_broker *b;
    struct event *abort_ev, *expire_ev;
} tc;

/* ---- deferred requests ------------------------------------------------------------ */

static void op_cancel(bk_req *r)
{
    txn_op *op = r->state;
    if (op)
        op->r = NULL;
    r->state = NULL;
}

txn_op *txn_op_new(bk_req *r, txn_answer_fn answer)
{
    txn_op *op = calloc(1, sizeof *op);
    if (!op)
        return NULL;
    op->r = r;
    op->b = r->b;
    op->answer = answer;
    op->v = r->hdr.RequestApiVersion;
    r->state = op;
    r->cancel = op_cancel;
    return op;
}

void txn_op_finish(txn_op *op, int16_t err)
{
    bk_req *r = op->r;
    if (r) {
        int rc = op->answer(op, err);
        r->state = NULL;
        r->cancel = NULL;
        if (rc == BK_RESPOND)
            net_req_finish(r);
        else
            net_req_close(r, false);
    }
    free(op->ctx);
    free(op);
}

int16_t txn_fenced(int16_t v, int16_t fence_v)
{
    return v < fence_v ? KP_INVALID_PRODUCER_EPOCH : KP_PRODUCER_FENCED;
}

/* ---- InitProducerId ----------------------------------------------------------------- */

static int init_answer(txn_op *op, int16_t err)
{
    kp_InitProducerIdResponse m;
    kp_init_InitProducerIdResponse(&m);
    m.ErrorCode = err;
    m.ProducerId = err ? -1 : op->pid;
    m.ProducerEpoch = err ? -1 : op->epoch;
    return bk_req_encoded(op->r, "InitProducerId",
                          kp_enc_InitProducerIdResponse(op->r->out, op->v, &m));
}

static void init_written(txn_meta *m, void *arg, int16_t err)
{
    txn_op *op = arg;
    if (!err) {
        op->pid = m->cur.pid;
        op->epoch = m->cur.epoch;
    }
    txn_op_finish(op, err);
}

/* KIP-360 (v3+): a producer that says which id and epoch it had may bump
 * only those; a retry of the bump that already happened gets the same
 * answer.  KP_NONE (bump), 1 (a retry: answer cur), or the fenced error. */
static int16_t init_expected(const txn_meta *m, const kp_InitProducerIdRequest *q, int16_t v)
{
    const txn_rec *c = &m->cur;
    if (v < 3 || q->ProducerId < 0 || c->pid < 0)
        return KP_NONE;               /* a new id: Kafka ignores what was had */
    if (q->ProducerId == c->pid && q->ProducerEpoch == c->epoch)
        return KP_NONE;
    if ((q->ProducerId == c->last_pid || q->ProducerId == c->pid) &&
        q->ProducerEpoch == c->last_epoch && c->state == TXN_EMPTY)
        return 1;
    return txn_fenced(v, 4);
}

/* The next state of an id InitProducerId bumps (Kafka's
 * prepareIncrementProducerEpoch, prepareProducerIdRotation). */
static int16_t init_next(bk_broker *b, const txn_meta *m, int32_t timeout_ms, txn_rec *next)
{
    const txn_rec *c = &m->cur;
    *next = (txn_rec){ .pid = c->pid, .epoch = (int16_t)(c->epoch + 1), .last_pid = c->pid,
                       .last_epoch = c->epoch, .timeout_ms = timeout_ms, .state = TXN_EMPTY,
                       .start_ms = -1, .update_ms = bk_now_ms() };
    if (c->pid < 0 || c->epoch >= INT16_MAX - 1) {
        int16_t e = bk_producer_id_next(b, &next->pid);
        if (e)
            return e;
        next->epoch = 0;
        next->last_epoch = c->pid < 0 ? -1 : c->epoch;
        next->last_pid = c->pid;
    }
    return KP_NONE;
}

static int init_now(bk_req *r, int16_t err, int64_t pid, int16_t epoch)
{
    kp_InitProducerIdResponse m;
    kp_init_InitProducerIdResponse(&m);
    m.ErrorCode = err;
    m.ProducerId = err ? -1 : pid;
    m.ProducerEpoch = err ? -1 : epoch;
    return bk_req_encoded(r, "InitProducerId",
                          kp_enc_InitProducerIdResponse(r->out, r->hdr.RequestApiVersion, &m));
}

int txn_init_producer_id(bk_req *r, const kp_InitProducerIdRequest *q)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_str id = q->TransactionalId;
    if (!sec_authorized(r, BK_RES_TRANSACTIONAL_ID, id, BK_OP_WRITE))
        return init_now(r, KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1);
    if (id.len == 0)
        return init_now(r, KP_INVALID_REQUEST, -1, -1);
    if (q->TransactionTimeoutMs <= 0 ||
        q->TransactionTimeoutMs > r->b->cfg->transaction_max_timeout_ms)
        return init_now(r, KP_INVALID_TRANSACTION_TIMEOUT, -1, -1);
    int32_t part;
    int16_t err = txn_log_owner(r->b, id.p, (size_t)id.len, &part);
    if (err)
        return init_now(r, err, -1, -1);
    txn_meta *m = txn_meta_find(id.p, (size_t)id.len);
    if (!m && !(m = txn_meta_add(id.p, (size_t)id.len, part)))
        return init_now(r, KP_COORDINATOR_NOT_AVAILABLE, -1, -1);
    if (m->pending || m->markers)
        return init_now(r, KP_CONCURRENT_TRANSACTIONS, -1, -1);
    int16_t x = init_expected(m, q, v);
    if (x == 1)
        return init_now(r, KP_NONE, m->cur.pid, m->cur.epoch);
    if (x)
        return init_now(r, x, -1, -1);
    switch (m->cur.state) {
    case TXN_PREPARE_COMMIT:
    case TXN_PREPARE_ABORT:
    case TXN_PREPARE_EPOCH_FENCE:
    case TXN_DEAD:
        return init_now(r, KP_CONCURRENT_TRANSACTIONS, -1, -1);
    case TXN_ONGOING:
        /* Kafka's fencing: the open transaction is aborted under a bumped
         * epoch; the client retries until it is complete. */
        BK_INFO("fencing producer id %lld epoch %d of transactional id %s: a new producer "
                "initialised it; its open transaction is aborted", (long long)m->cur.pid,
                m->cur.epoch, m->id);
        err = txn_coord_abort(r->b, m);
        return init_now(r, err ? err : KP_CONCURRENT_TRANSACTIONS, -1, -1);
    default:
        break;
    }
    txn_rec next;
    if ((err = init_next(r->b, m, q->TransactionTimeoutMs, &next)) != KP_NONE)
        return init_now(r, err, -1, -1);
    txn_op *op = txn_op_new(r, init_answer);
    if (!op)
        return init_now(r, KP_COORDINATOR_NOT_AVAILABLE, -1, -1);
    if ((err = txn_log_write(r->b, m, &next, init_written, op)) != KP_NONE) {
        txn_rec_free(&next);
        r->state = NULL;
        r->cancel = NULL;
        free(op);
        return init_now(r, err, -1, -1);
    }
    return BK_DEFER;
}

/* ---- the producer checks, adding partitions ------------------------------------------ */

int16_t txn_coord_check(const txn_meta *m, int64_t pid, int16_t epoch, int16_t v,
                        int16_t fence_v)
{
    if (!m || m->cur.pid < 0 || m->cur.pid != pid)
        return KP_INVALID_PRODUCER_ID_MAPPING;
    if (m->cur.epoch != epoch)
        return txn_fenced(v, fence_v);
    if (m->pending || m->markers)
        return KP_CONCURRENT_TRANSACTIONS;
    return KP_NONE;
}

bool txn_coord_has(const txn_meta *m, const char *topic, size_t len, int32_t partition)
{
    const txn_rec *c = &m->cur;
    for (size_t k = 0; k < c->ntps; k++)
        if (c->tps[k].partition == partition && strlen(c->tps[k].topic) == len &&
            !memcmp(c->tps[k].topic, topic, len))
            return true;
    return false;
}

int16_t txn_verify_partition(bk_broker *b, kp_str id, int64_t pid, int16_t epoch,
                             const char *topic, int32_t partition)
{
    int32_t part;
    if (id.len <= 0)
        return KP_INVALID_TXN_STATE;
    int16_t err = txn_log_owner(b, id.p, (size_t)id.len, &part);
    if (err != KP_NONE)
        return err;
    const txn_meta *m = txn_meta_find(id.p, (size_t)id.len);
    if (!m || m->cur.pid < 0 || m->cur.pid != pid)
        return KP_INVALID_PRODUCER_ID_MAPPING;
    if (m->cur.epoch != epoch)
        return KP_INVALID_PRODUCER_EPOCH;
    return m->cur.state == TXN_ONGOING && txn_coord_has(m, topic, strlen(topic), partition)
           ? KP_NONE : KP_INVALID_TXN_STATE;
}

static bool has_tp(const txn_rec *c, const txn_tp *tp)
{
    for (size_t k = 0; k < c->ntps; k++)
        if (c->tps[k].partition == tp->partition && !strcmp(c->tps[k].topic, tp->topic))
            return true;
    return false;
}

/* A topic's partitions stay together in the record (txn_log.c writes one
 * entry per run of a topic), so new ones go after their topic's last. */
static int add_tp(txn_rec *c, const txn_tp *tp)
{
    txn_tp *t = realloc(c->tps, (c->ntps + 1) * sizeof *t);
    if (!t)
        return -1;
    c->tps = t;
    size_t at = c->ntps;
    for (size_t k = 0; k < c->ntps; k++)
        if (!strcmp(t[k].topic, tp->topic))
            at = k + 1;
    char *topic = strdup(tp->topic);
    if (!topic)
        return -1;
    memmove(&t[at + 1], &t[at], (c->ntps - at) * sizeof *t);
    t[at] = (txn_tp){ topic, tp->partition };
    c->ntps++;
    return 0;
}

int16_t txn_coord_add(bk_broker *b, txn_meta *m, const txn_tp *tps, size_t n,
                      txn_write_done done, void *arg)
{
    if (m->cur.state == TXN_PREPARE_COMMIT || m->cur.state == TXN_PREPARE_ABORT ||
        m->cur.state == TXN_PREPARE_EPOCH_FENCE)
        return KP_CONCURRENT_TRANSACTIONS;
    if (m->cur.state == TXN_DEAD)
        return KP_INVALID_TXN_STATE;
    txn_rec next = { .pid = m->cur.pid, .last_pid = m->cur.last_pid, .epoch = m->cur.epoch,
                     .last_epoch = m->cur.last_epoch, .timeout_ms = m->cur.timeout_ms,
                     .start_ms = bk_now_ms() };    /* a new transaction */
    bool ongoing = m->cur.state == TXN_ONGOING;
    if (ongoing && txn_rec_copy(&next, &m->cur) != 0)
        return KP_COORDINATOR_NOT_AVAILABLE;
    next.state = TXN_ONGOING;
    next.update_ms = bk_now_ms();
    size_t added = 0;
    for (size_t k = 0; k < n; k++) {
        if (has_tp(&next, &tps[k]))
            continue;
        if (add_tp(&next, &tps[k]) != 0) {
            txn_rec_free(&next);
            return KP_COORDINATOR_NOT_AVAILABLE;
        }
        added++;
    }
    if (ongoing && !added) {          /* all there: Kafka answers at once */
        txn_rec_free(&next);
        return TXN_ADDED_ALREADY;
    }
    int16_t err = txn_log_write(b, m, &next, done, arg);
    txn_rec_free(&next);
    return err;
}

/* ---- aborting: fencing, timeouts ------------------------------------------------------ */

static void abort_written(txn_meta *m, void *arg, int16_t err)
{
    bk_broker *b = arg;
    if (err) {
        BK_WARN("transactional id %s: writing PrepareAbort failed (%d); the next "
                "timeout check retries", m->id, err);
        return;
    }
    if (!m->gone)
        txn_markers_start(b, m);
}

int16_t txn_coord_abort(bk_broker *b, txn_meta *m)
{
    txn_rec next;
    if (txn_rec_copy(&next, &m->cur) != 0)
        return KP_COORDINATOR_NOT_AVAILABLE;
    if (next.epoch < INT16_MAX) {     /* Kafka's prepareFenceProducerEpoch */
        next.last_epoch = next.epoch;
        next.epoch++;
    }
    next.state = TXN_PREPARE_ABORT;
    next.update_ms = bk_now_ms();
    int16_t err = txn_log_write(b, m, &next, abort_written, b);
    txn_rec_free(&next);
    return err;
}

void txn_coord_loaded(txn_meta *m)
{
    if (m->cur.state == TXN_PREPARE_COMMIT || m->cur.state == TXN_PREPARE_ABORT)
        txn_markers_start(tc.b, m);
}

/* Also restarts the markers of a decided transaction whose markers or
 * Complete record failed to start (out of memory, leadership moving). */
static void abort_if_timed_out(txn_meta *m, void *arg)
{
    int64_t now = *(int64_t *)arg;
    if ((m->cur.state == TXN_PREPARE_COMMIT || m->cur.state == TXN_PREPARE_ABORT) &&
        !m->pending && !m->markers && txn_log_epoch(m->part) >= 0) {
        txn_markers_start(tc.b, m);
        return;
    }
    if (m->cur.state != TXN_ONGOING || m->pending || m->markers ||
        txn_log_epoch(m->part) < 0 || now - m->cur.start_ms <= m->cur.timeout_ms)
        return;
    BK_INFO("aborting transaction %s (producer id %lld, epoch %d) open for %lld ms, past "
            "its timeout", m->id, (long long)m->cur.pid, m->cur.epoch,
            (long long)(now - m->cur.start_ms));
    int16_t err = txn_coord_abort(tc.b, m);
    if (err)
        BK_WARN("transactional id %s: aborting failed (%d); retried at the next check",
                m->id, err);
    else
        txn_ops_timeout_abort();
}

static void abort_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    int64_t now = bk_now_ms();
    txn_meta_foreach(abort_if_timed_out, &now);
}

static void expired_written(txn_meta *m, void *arg, int16_t err)
{
    (void)arg;
    if (!err && !m->gone)
        txn_meta_remove(m);
}

static void expire_if_idle(txn_meta *m, void *arg)
{
    int64_t now = *(int64_t *)arg;
    int8_t s = m->cur.state;
    if ((s != TXN_EMPTY && s != TXN_COMPLETE_COMMIT && s != TXN_COMPLETE_ABORT) ||
        m->pending || m->markers || txn_log_epoch(m->part) < 0 ||
        now - m->cur.update_ms <= tc.b->cfg->transactional_id_expiration_ms)
        return;
    if (m->cur.pid < 0) {             /* never written: nothing to forget */
        txn_meta_remove(m);
        return;
    }
    BK_INFO("transactional id %s expired: idle for %lld ms", m->id,
            (long long)(now - m->cur.update_ms));
    txn_log_write(tc.b, m, NULL, expired_written, NULL);
}

static void expire_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    int64_t now = bk_now_ms();
    txn_meta_foreach(expire_if_idle, &now);
}

static struct event *every(bk_broker *b, int32_t ms, event_callback_fn fn)
{
    struct event *ev = event_new(b->base, -1, EV_PERSIST, fn, NULL);
    struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
    if (ev && event_add(ev, &tv) != 0) {
        event_free(ev);
        ev = NULL;
    }
    return ev;
}

int txn_coord_start(bk_broker *b)
{
    tc.b = b;
    tc.abort_ev = every(b, b->cfg->transaction_abort_timed_out_transaction_cleanup_interval_ms,
                        abort_tick);
    tc.expire_ev = every(b, b->cfg->transaction_remove_expired_transaction_cleanup_interval_ms,
                         expire_tick);
    return tc.abort_ev && tc.expire_ev ? 0 : -1;
}

void txn_coord_stop(void)
{
    if (tc.abort_ev)
        event_free(tc.abort_ev);
    if (tc.expire_ev)
        event_free(tc.expire_ev);
    memset(&tc, 0, sizeof tc);
}

/* ---- start, stop ---------------------------------------------------------------------- */

int txn_start(bk_broker *b)
{
    if (txn_log_start(b) != 0 || txn_coord_start(b) != 0)
        return -1;
    b->txn_coordinator_of = txn_coordinator_of;
    return 0;
}

void txn_stop(void)
{
    txn_coord_stop();
    txn_log_stop();
}
