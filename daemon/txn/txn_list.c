/*
 * daemon/txn/txn_list.c — what kafka-transactions.sh asks a coordinator
 * (KIP-664): DescribeTransactions (API 65) and ListTransactions (API 66,
 * v1 with DurationFilter).  Read-only: the ids as txn_meta.cur has them
 * (what the log holds, txn_log.c T2), DESCRIBE on each transactional id.
 */
#include "daemon/txn/txn_int.h"
#include "daemon/security/sec_authz.h"

#include <stdlib.h>
#include <string.h>

/* ---- DescribeTransactions v0 ------------------------------------------------------- */

/* m's partitions by topic (adjacent in cur.tps: txn_coord.c add_tp). */
static int describe_topics(bk_req *r, const txn_meta *m,
                           kp_DescribeTransactionsResponse_TransactionState *s)
{
    const txn_rec *c = &m->cur;
    s->Topics = bk_req_alloc(r, c->ntps ? c->ntps : 1, sizeof *s->Topics);
    int32_t *ids = bk_req_alloc(r, c->ntps ? c->ntps : 1, sizeof *ids);
    if (!s->Topics || !ids)
        return -1;
    for (size_t k = 0; k < c->ntps; k++) {
        kp_DescribeTransactionsResponse_TopicData *t =
            s->Topics_count ? &s->Topics[s->Topics_count - 1] : NULL;
        if (!t || strcmp(c->tps[k - 1].topic, c->tps[k].topic) != 0) {
            t = &s->Topics[s->Topics_count++];
            t->Topic = kp_str_cstr(c->tps[k].topic);
            t->Partitions = &ids[k];
        }
        ids[k] = c->tps[k].partition;
        t->Partitions_count++;
    }
    return 0;
}

int txn_handle_describe_transactions(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DescribeTransactionsRequest q;
    if (kp_dec_DescribeTransactionsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DescribeTransactionsResponse m;
    kp_init_DescribeTransactionsResponse(&m);
    int32_t n = q.TransactionalIds_count > 0 ? q.TransactionalIds_count : 0;
    m.TransactionStates = bk_req_alloc(r, (size_t)(n ? n : 1), sizeof *m.TransactionStates);
    if (!m.TransactionStates)
        return BK_CLOSE;
    m.TransactionStates_count = n;
    for (int32_t i = 0; i < n; i++) {
        kp_DescribeTransactionsResponse_TransactionState *s = &m.TransactionStates[i];
        kp_str id = q.TransactionalIds[i];
        int32_t part;
        *s = (kp_DescribeTransactionsResponse_TransactionState){
            .TransactionalId = id, .TransactionState = kp_str_cstr(""),
            .TransactionStartTimeMs = -1, .ProducerId = -1, .ProducerEpoch = -1,
        };
        if (!sec_authorized(r, BK_RES_TRANSACTIONAL_ID, id, BK_OP_DESCRIBE)) {
            s->ErrorCode = KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            continue;
        }
        s->ErrorCode = txn_log_owner(r->b, id.p, id.len > 0 ? (size_t)id.len : 0, &part);
        const txn_meta *t = s->ErrorCode ? NULL : txn_meta_find(id.p, (size_t)id.len);
        if (!s->ErrorCode && (!t || t->cur.pid < 0))
            s->ErrorCode = KP_TRANSACTIONAL_ID_NOT_FOUND;
        if (s->ErrorCode)
            continue;
        s->TransactionState = kp_str_cstr(txn_state_name(t->cur.state));
        s->TransactionTimeoutMs = t->cur.timeout_ms;
        s->TransactionStartTimeMs = t->cur.start_ms;
        s->ProducerId = t->cur.pid;
        s->ProducerEpoch = t->cur.epoch;
        if (describe_topics(r, t, s) != 0)
            return BK_CLOSE;
    }
    return bk_req_encoded(r, "DescribeTransactions",
                          kp_enc_DescribeTransactionsResponse(r->out, v, &m));
}

/* ---- ListTransactions v0-1 ----------------------------------------------------------- */

typedef struct lt_walk {
    bk_req *r;
    const kp_ListTransactionsRequest *q;
    bool *states;                     /* [8]: wanted, when any filter */
    bool any_state;
    const int64_t *pids;              /* ProducerIdFilters, sorted: looked up per id */
    size_t npids;                     /* 0: no filter */
    int64_t now;
    kp_ListTransactionsResponse *m;
    int32_t cap;
    bool nomem;
} lt_walk;

static int lt_pid_cmp(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The filters sorted once per request: comparing every id with every
 * filter would be ids x filters (10^5 x 10^6) on the event loop. */
static int lt_sort_pids(bk_req *r, const kp_ListTransactionsRequest *q, lt_walk *w)
{
    if (q->ProducerIdFilters_count <= 0)
        return 0;
    size_t n = (size_t)q->ProducerIdFilters_count;
    int64_t *p = bk_req_alloc(r, n, sizeof *p);
    if (!p)
        return -1;
    memcpy(p, q->ProducerIdFilters, n * sizeof *p);
    qsort(p, n, sizeof *p, lt_pid_cmp);
    w->pids = p;
    w->npids = n;
    return 0;
}

static bool lt_wanted(const lt_walk *w, const txn_meta *t)
{
    const kp_ListTransactionsRequest *q = w->q;
    if (t->cur.pid < 0 || txn_log_epoch(t->part) < 0)
        return false;                 /* never written, or not coordinated here */
    if (w->any_state && (t->cur.state < 0 || t->cur.state > 7 || !w->states[t->cur.state]))
        return false;
    if (w->npids && !bsearch(&t->cur.pid, w->pids, w->npids, sizeof *w->pids, lt_pid_cmp))
        return false;
    /* v1: open longer than DurationFilter ms (-1: any) */
    if (q->DurationFilter >= 0 &&
        (t->cur.start_ms < 0 || w->now - t->cur.start_ms < q->DurationFilter))
        return false;
    kp_str id = { t->id, (int32_t)t->id_len };
    return sec_authorized(w->r, BK_RES_TRANSACTIONAL_ID, id, BK_OP_DESCRIBE);
}

static void lt_one(txn_meta *t, void *arg)
{
    lt_walk *w = arg;
    if (w->nomem || !lt_wanted(w, t))
        return;
    kp_ListTransactionsResponse *m = w->m;
    if (m->TransactionStates_count == w->cap) {
        int32_t cap = w->cap ? 2 * w->cap : 64;
        kp_ListTransactionsResponse_TransactionState *x =
            bk_req_alloc(w->r, (size_t)cap, sizeof *x);
        if (!x) {
            w->nomem = true;
            return;
        }
        if (w->cap)
            memcpy(x, m->TransactionStates, (size_t)w->cap * sizeof *x);
        m->TransactionStates = x;
        w->cap = cap;
    }
    m->TransactionStates[m->TransactionStates_count++] =
        (kp_ListTransactionsResponse_TransactionState){
            .TransactionalId = { t->id, (int32_t)t->id_len }, .ProducerId = t->cur.pid,
            .TransactionState = kp_str_cstr(txn_state_name(t->cur.state)) };
}

int txn_handle_list_transactions(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_ListTransactionsRequest q;
    if (kp_dec_ListTransactionsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (v < 1)
        q.DurationFilter = -1;
    kp_ListTransactionsResponse m;
    kp_init_ListTransactionsResponse(&m);
    bool states[8] = { false };
    lt_walk w = { .r = r, .q = &q, .states = states, .now = bk_now_ms(), .m = &m };
    int32_t nf = q.StateFilters_count > 0 ? q.StateFilters_count : 0;
    m.UnknownStateFilters = bk_req_alloc(r, (size_t)(nf ? nf : 1), sizeof *m.UnknownStateFilters);
    m.TransactionStates = bk_req_alloc(r, 1, sizeof *m.TransactionStates);
    if (!m.UnknownStateFilters || !m.TransactionStates)
        return BK_CLOSE;
    for (int32_t k = 0; k < nf; k++) {
        int8_t s = 0;
        while (s < 8 && !kp_str_eq(q.StateFilters[k], txn_state_name(s)))
            s++;
        if (s < 8)
            states[s] = w.any_state = true;
        else
            m.UnknownStateFilters[m.UnknownStateFilters_count++] = q.StateFilters[k];
    }
    /* Only unknown names: nothing can match (Kafka lists none). */
    if (nf && !w.any_state)
        return bk_req_encoded(r, "ListTransactions",
                              kp_enc_ListTransactionsResponse(r->out, v, &m));
    m.ErrorCode = txn_log_loading() ? KP_COORDINATOR_LOAD_IN_PROGRESS : KP_NONE;
    if (lt_sort_pids(r, &q, &w) != 0)
        return BK_CLOSE;
    txn_meta_foreach(lt_one, &w);
    if (w.nomem)
        return BK_CLOSE;
    return bk_req_encoded(r, "ListTransactions", kp_enc_ListTransactionsResponse(r->out, v, &m));
}
