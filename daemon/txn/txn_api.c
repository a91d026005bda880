/*
 * daemon/txn/txn_api.c — the transaction coordinator's handlers:
 * AddPartitionsToTxn v0-5 (v0-3 from clients; v4+ batched, from brokers,
 * with VerifyOnly for KIP-890's verification), AddOffsetsToTxn v0-4 and
 * EndTxn v0-5.  InitProducerId is api_producer_id.c's, handing a
 * transactional one to txn_coord.c.  The decisions are txn_coord.c's; a
 * change is answered when its record is replicated (txn_log.c T2), the
 * request deferred until then (a decoded request borrows from r->arena,
 * kept until it is answered).
 */
#include "daemon/txn/txn_int.h"
#include "daemon/group/group.h"
#include "daemon/security/sec_authz.h"
#include "daemon/view/view.h"

#include <stdlib.h>
#include <string.h>

/* ---- AddPartitionsToTxn v0-5 ---------------------------------------------------- */

/* One transaction of the request: v0-3's fields, or one entry of v4+. */
typedef struct ap_txn {
    kp_str id;
    int64_t pid;
    int16_t epoch;
    bool verify;
    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *topics;
    int32_t ntopics;
    int16_t err;                      /* for its partitions without their own */
    size_t first;                     /* its partitions' index in ap_ctx.errs */
} ap_txn;

#define AP_PENDING (-2)               /* a partition's error: the transaction's */

typedef struct ap_ctx {
    ap_txn *txns;
    int32_t ntxns;
    int16_t *errs;                    /* per partition, in request order */
    int16_t top_err;
} ap_ctx;

typedef struct ap_slot {
    txn_op *op;
    int32_t t;
} ap_slot;

static kp_AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *
ap_topics(bk_req *r, ap_ctx *c, const ap_txn *x)
{
    kp_AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *out =
        bk_req_alloc(r, (size_t)(x->ntopics > 0 ? x->ntopics : 1), sizeof *out);
    if (!out)
        return NULL;
    size_t k = x->first;
    for (int32_t t = 0; t < x->ntopics; t++) {
        const kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *q = &x->topics[t];
        int32_t n = q->Partitions_count > 0 ? q->Partitions_count : 0;
        out[t].Name = q->Name;
        out[t].ResultsByPartition = bk_req_alloc(r, (size_t)(n ? n : 1),
                                                 sizeof *out[t].ResultsByPartition);
        if (!out[t].ResultsByPartition)
            return NULL;
        out[t].ResultsByPartition_count = n;
        for (int32_t p = 0; p < n; p++, k++) {
            out[t].ResultsByPartition[p].PartitionIndex = q->Partitions[p];
            out[t].ResultsByPartition[p].PartitionErrorCode =
                c->errs[k] == AP_PENDING ? x->err : c->errs[k];
        }
    }
    return out;
}

static int ap_encode(bk_req *r, ap_ctx *c)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_AddPartitionsToTxnResponse m;
    kp_init_AddPartitionsToTxnResponse(&m);
    m.ErrorCode = c->top_err;
    if (v < 4) {
        m.ResultsByTopicV3AndBelow = ap_topics(r, c, &c->txns[0]);
        if (!m.ResultsByTopicV3AndBelow)
            return BK_CLOSE;
        m.ResultsByTopicV3AndBelow_count = c->txns[0].ntopics;
    } else if (!c->top_err) {
        m.ResultsByTransaction = bk_req_alloc(r, (size_t)(c->ntxns ? c->ntxns : 1),
                                              sizeof *m.ResultsByTransaction);
        if (!m.ResultsByTransaction)
            return BK_CLOSE;
        m.ResultsByTransaction_count = c->ntxns;
        for (int32_t t = 0; t < c->ntxns; t++) {
            m.ResultsByTransaction[t].TransactionalId = c->txns[t].id;
            m.ResultsByTransaction[t].TopicResults = ap_topics(r, c, &c->txns[t]);
            if (!m.ResultsByTransaction[t].TopicResults)
                return BK_CLOSE;
            m.ResultsByTransaction[t].TopicResults_count = c->txns[t].ntopics;
        }
    }
    return bk_req_encoded(r, "AddPartitionsToTxn",
                          kp_enc_AddPartitionsToTxnResponse(r->out, v, &m));
}

static int ap_answer(txn_op *op, int16_t err)
{
    (void)err;                        /* each transaction's is in the context */
    return ap_encode(op->r, op->ctx);
}

static void ap_written(txn_meta *m, void *arg, int16_t err)
{
    (void)m;
    ap_slot *s = arg;
    txn_op *op = s->op;
    ap_ctx *c = op->ctx;
    c->txns[s->t].err = err;
    free(s);
    if (--op->waiting == 0)
        txn_op_finish(op, KP_NONE);
}

/* Per partition: TOPIC_AUTHORIZATION_FAILED, UNKNOWN_TOPIC_OR_PARTITION,
 * INVALID_REQUEST (a mirror topic: its offsets are its source's) or
 * AP_PENDING; when any is not, the rest are OPERATION_NOT_ATTEMPTED
 * (Kafka's handleAddPartitionsToTxnRequest).  false when one failed. */
static bool ap_check_topics(bk_req *r, ap_ctx *c, ap_txn *x)
{
    bool ok = true;
    size_t k = x->first;
    for (int32_t t = 0; t < x->ntopics; t++) {
        const kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *q = &x->topics[t];
        bool authz = x->verify || sec_authorized(r, BK_RES_TOPIC, q->Name, BK_OP_WRITE);
        bk_topic *tp = q->Name.len > 0 ? view_topic_find(r->b, q->Name.p, (size_t)q->Name.len)
                                       : NULL;
        const char *why;
        bool mirror = tp && bk_mirror_refuses(r->b, tp->name, &why);
        for (int32_t p = 0; p < q->Partitions_count; p++, k++) {
            int32_t i = q->Partitions[p];
            c->errs[k] = !authz ? KP_TOPIC_AUTHORIZATION_FAILED
                         : !tp || i < 0 || i >= tp->npartitions ? KP_UNKNOWN_TOPIC_OR_PARTITION
                         : mirror ? KP_INVALID_REQUEST     /* as Produce answers there */
                         : AP_PENDING;
            ok &= c->errs[k] == AP_PENDING;
        }
    }
    x->err = KP_OPERATION_NOT_ATTEMPTED;
    return ok;
}

/* The partitions of x as the transaction's (their names borrowed from the
 * request: txn_coord_add copies them).  NULL: no memory. */
static txn_tp *ap_tps(bk_req *r, const ap_txn *x, size_t *n)
{
    *n = 0;
    for (int32_t t = 0; t < x->ntopics; t++)
        *n += x->topics[t].Partitions_count > 0 ? (size_t)x->topics[t].Partitions_count : 0;
    txn_tp *tps = bk_req_alloc(r, *n ? *n : 1, sizeof *tps);
    size_t k = 0;
    for (int32_t t = 0; tps && t < x->ntopics; t++) {
        const kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *q = &x->topics[t];
        char *name = bk_req_alloc(r, (size_t)q->Name.len + 1, 1);
        if (!name)
            return NULL;
        memcpy(name, q->Name.p, (size_t)q->Name.len);
        for (int32_t p = 0; p < q->Partitions_count; p++)
            tps[k++] = (txn_tp){ name, q->Partitions[p] };
    }
    return tps;
}

/* KIP-890: is every partition of x in its open transaction? */
static void ap_verify(ap_ctx *c, ap_txn *x, const txn_meta *m)
{
    if (m && m->cur.state != TXN_ONGOING && !x->err)
        x->err = KP_INVALID_TXN_STATE;
    size_t k = x->first;
    for (int32_t t = 0; t < x->ntopics; t++) {
        const kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic *q = &x->topics[t];
        for (int32_t p = 0; p < q->Partitions_count; p++, k++)
            if (!x->err && !txn_coord_has(m, q->Name.p, (size_t)q->Name.len, q->Partitions[p]))
                c->errs[k] = KP_INVALID_TXN_STATE;
    }
}

/* One transaction: its error now (x->err), or a write started (true). */
static bool ap_one(bk_req *r, txn_op *op, ap_ctx *c, int32_t t)
{
    ap_txn *x = &c->txns[t];
    int16_t v = r->hdr.RequestApiVersion;
    int32_t part;
    if (!x->verify && v < 4 &&
        !sec_authorized(r, BK_RES_TRANSACTIONAL_ID, x->id, BK_OP_WRITE)) {
        x->err = KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
        return false;
    }
    if (!ap_check_topics(r, c, x))
        return false;
    x->err = txn_log_owner(r->b, x->id.p, x->id.len > 0 ? (size_t)x->id.len : 0, &part);
    txn_meta *m = x->err ? NULL : txn_meta_find(x->id.p, (size_t)x->id.len);
    if (!x->err)
        x->err = txn_coord_check(m, x->pid, x->epoch, v, 2);
    if (x->verify) {
        ap_verify(c, x, m);
        return false;
    }
    if (x->err)
        return false;
    size_t n;
    txn_tp *tps = ap_tps(r, x, &n);
    ap_slot *s = malloc(sizeof *s);
    if (!tps || !s) {
        free(s);
        x->err = KP_COORDINATOR_NOT_AVAILABLE;
        return false;
    }
    *s = (ap_slot){ op, t };
    int16_t e = txn_coord_add(r->b, m, tps, n, ap_written, s);
    if (e == KP_NONE) {
        op->waiting++;
        return true;
    }
    free(s);
    x->err = e == TXN_ADDED_ALREADY ? KP_NONE : e;
    return false;
}

int txn_handle_add_partitions_to_txn(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd body = r->body;             /* for a rerun (txn_park.c P3) */
    kp_AddPartitionsToTxnRequest q;
    if (kp_dec_AddPartitionsToTxnRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    ap_ctx *c = calloc(1, sizeof *c);
    txn_op *op = c ? txn_op_new(r, ap_answer) : NULL;
    if (!op) {
        free(c);
        return BK_CLOSE;
    }
    op->ctx = c;
    c->ntxns = v < 4 ? 1 : q.Transactions_count > 0 ? q.Transactions_count : 0;
    c->txns = bk_req_alloc(r, (size_t)(c->ntxns ? c->ntxns : 1), sizeof *c->txns);
    size_t nparts = 0;
    for (int32_t t = 0; c->txns && t < c->ntxns; t++) {
        ap_txn *x = &c->txns[t];
        if (v < 4)
            *x = (ap_txn){ .id = q.V3AndBelowTransactionalId, .pid = q.V3AndBelowProducerId,
                           .epoch = q.V3AndBelowProducerEpoch, .topics = q.V3AndBelowTopics,
                           .ntopics = q.V3AndBelowTopics_count };
        else
            *x = (ap_txn){ .id = q.Transactions[t].TransactionalId,
                           .pid = q.Transactions[t].ProducerId,
                           .epoch = q.Transactions[t].ProducerEpoch,
                           .verify = q.Transactions[t].VerifyOnly,
                           .topics = q.Transactions[t].Topics,
                           .ntopics = q.Transactions[t].Topics_count };
        x->ntopics = x->ntopics > 0 ? x->ntopics : 0;
        x->first = nparts;
        for (int32_t k = 0; k < x->ntopics; k++)
            nparts += x->topics[k].Partitions_count > 0 ? (size_t)x->topics[k].Partitions_count
                                                         : 0;
    }
    c->errs = bk_req_alloc(r, nparts ? nparts : 1, sizeof *c->errs);
    if (!c->txns || !c->errs) {
        r->state = NULL;
        r->cancel = NULL;
        free(c);
        free(op);
        return BK_CLOSE;
    }
    for (size_t k = 0; k < nparts; k++)
        c->errs[k] = AP_PENDING;
    /* v4+ comes from brokers (KIP-890): CLUSTER_ACTION, as Kafka asks. */
    if (v >= 4 && !BK_AUTHZ_CLUSTER(r, BK_OP_CLUSTER_ACTION))
        c->top_err = KP_CLUSTER_AUTHORIZATION_FAILED;
    op->waiting = 1;                  /* this call's own, dropped below */
    for (int32_t t = 0; !c->top_err && t < c->ntxns; t++)
        ap_one(r, op, c, t);
    if (--op->waiting > 0)
        return BK_DEFER;
    r->state = NULL;
    r->cancel = NULL;
    /* One transaction whose id is busy: it waits for it (a broker's
     * verification is answered at once). */
    int rc = BK_RESPOND;
    if (c->ntxns == 1 && !c->top_err && !c->txns[0].verify &&
        c->txns[0].err == KP_CONCURRENT_TRANSACTIONS)
        rc = txn_park(r, body, txn_handle_add_partitions_to_txn, c->txns[0].id);
    if (rc != BK_DEFER)
        rc = ap_encode(r, c);
    free(c);
    free(op);
    return rc;
}

/* ---- AddOffsetsToTxn v0-4 ---------------------------------------------------------- */

static int ao_now(bk_req *r, int16_t err)
{
    kp_AddOffsetsToTxnResponse m;
    kp_init_AddOffsetsToTxnResponse(&m);
    m.ErrorCode = err;
    return bk_req_encoded(r, "AddOffsetsToTxn",
                          kp_enc_AddOffsetsToTxnResponse(r->out, r->hdr.RequestApiVersion, &m));
}

static int ao_answer(txn_op *op, int16_t err)
{
    return ao_now(op->r, err);
}

static void op_written(txn_meta *m, void *arg, int16_t err)
{
    (void)m;
    txn_op_finish(arg, err);
}

/* The group's partition of __consumer_offsets (Kafka's partitionFor):
 * the topic's partition count in cluster mode once it exists, else
 * offsets.topic.num.partitions. */
int32_t txn_offsets_partition(bk_broker *b, kp_str group)
{
    bk_topic *t = view_topic_find(b, TXN_OFFSETS_TOPIC, sizeof TXN_OFFSETS_TOPIC - 1);
    int32_t n = t && t->npartitions > 0 ? t->npartitions : b->cfg->offsets_topic_num_partitions;
    return gc_log_partition_in(n, group.p, group.len > 0 ? (size_t)group.len : 0);
}

int txn_handle_add_offsets_to_txn(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd body = r->body;             /* for a rerun (txn_park.c P3) */
    kp_AddOffsetsToTxnRequest q;
    if (kp_dec_AddOffsetsToTxnRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!sec_authorized(r, BK_RES_TRANSACTIONAL_ID, q.TransactionalId, BK_OP_WRITE))
        return ao_now(r, KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    if (!sec_authorized(r, BK_RES_GROUP, q.GroupId, BK_OP_READ))
        return ao_now(r, KP_GROUP_AUTHORIZATION_FAILED);
    int32_t part;
    kp_str id = q.TransactionalId;
    int16_t err = txn_log_owner(r->b, id.p, id.len > 0 ? (size_t)id.len : 0, &part);
    txn_meta *m = err ? NULL : txn_meta_find(id.p, (size_t)id.len);
    if (!err)
        err = txn_coord_check(m, q.ProducerId, q.ProducerEpoch, v, 2);
    if (err == KP_CONCURRENT_TRANSACTIONS &&
        txn_park(r, body, txn_handle_add_offsets_to_txn, id) == BK_DEFER)
        return BK_DEFER;
    if (err)
        return ao_now(r, err);
    txn_tp tp = { (char *)TXN_OFFSETS_TOPIC, txn_offsets_partition(r->b, q.GroupId) };
    txn_op *op = txn_op_new(r, ao_answer);
    if (!op)
        return ao_now(r, KP_COORDINATOR_NOT_AVAILABLE);
    err = txn_coord_add(r->b, m, &tp, 1, op_written, op);
    if (err == KP_NONE)
        return BK_DEFER;
    r->state = NULL;
    r->cancel = NULL;
    free(op);
    if (err == KP_CONCURRENT_TRANSACTIONS &&
        txn_park(r, body, txn_handle_add_offsets_to_txn, id) == BK_DEFER)
        return BK_DEFER;
    return ao_now(r, err == TXN_ADDED_ALREADY ? KP_NONE : err);
}

/* ---- EndTxn v0-5 ------------------------------------------------------------------------ */

static int end_now(bk_req *r, int16_t err)
{
    kp_EndTxnResponse m;
    kp_init_EndTxnResponse(&m);
    m.ErrorCode = err;
    m.ProducerId = -1;
    m.ProducerEpoch = -1;
    return bk_req_encoded(r, "EndTxn", kp_enc_EndTxnResponse(r->out, r->hdr.RequestApiVersion,
                                                              &m));
}

static int end_answer(txn_op *op, int16_t err)
{
    return end_now(op->r, err);
}

/* PrepareCommit / PrepareAbort is replicated: the client hears it now,
 * then the markers go out (Kafka answers EndTxn before the markers). */
static void end_written(txn_meta *m, void *arg, int16_t err)
{
    txn_op *op = arg;
    bk_broker *b = op->b;
    txn_op_finish(op, err);
    if (!err && !m->gone)
        txn_markers_start(b, m);
}

/* Kafka's handleEndTransaction, the state checks: KP_NONE to write
 * Prepare*, 1 to answer success at once (a retry of a completed end), or
 * the error. */
static int16_t end_check(const txn_meta *m, bool commit)
{
    switch (m->cur.state) {
    case TXN_ONGOING:
        return KP_NONE;
    case TXN_COMPLETE_COMMIT:
        return commit ? 1 : KP_INVALID_TXN_STATE;
    case TXN_COMPLETE_ABORT:
        return commit ? KP_INVALID_TXN_STATE : 1;
    case TXN_PREPARE_COMMIT:
        return commit ? KP_CONCURRENT_TRANSACTIONS : KP_INVALID_TXN_STATE;
    case TXN_PREPARE_ABORT:
        return commit ? KP_INVALID_TXN_STATE : KP_CONCURRENT_TRANSACTIONS;
    default:                          /* Empty, Dead, PrepareEpochFence */
        return KP_INVALID_TXN_STATE;
    }
}

int txn_handle_end_txn(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd body = r->body;             /* for a rerun (txn_park.c P3) */
    kp_EndTxnRequest q;
    if (kp_dec_EndTxnRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_str id = q.TransactionalId;
    if (!sec_authorized(r, BK_RES_TRANSACTIONAL_ID, id, BK_OP_WRITE))
        return end_now(r, KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
    int32_t part;
    int16_t err = txn_log_owner(r->b, id.p, id.len > 0 ? (size_t)id.len : 0, &part);
    txn_meta *m = err ? NULL : txn_meta_find(id.p, (size_t)id.len);
    if (!err)
        err = txn_coord_check(m, q.ProducerId, q.ProducerEpoch, v, 2);
    if (!err)
        err = end_check(m, q.Committed);
    if (err == KP_CONCURRENT_TRANSACTIONS &&
        txn_park(r, body, txn_handle_end_txn, id) == BK_DEFER)
        return BK_DEFER;
    if (err)
        return end_now(r, err == 1 ? KP_NONE : err);
    txn_rec next;
    if (txn_rec_copy(&next, &m->cur) != 0)
        return end_now(r, KP_COORDINATOR_NOT_AVAILABLE);
    next.state = q.Committed ? TXN_PREPARE_COMMIT : TXN_PREPARE_ABORT;
    next.update_ms = bk_now_ms();
    txn_op *op = txn_op_new(r, end_answer);
    err = KP_COORDINATOR_NOT_AVAILABLE;
    if (op && (err = txn_log_write(r->b, m, &next, end_written, op)) == KP_NONE)
        return BK_DEFER;
    txn_rec_free(&next);
    r->state = NULL;
    r->cancel = NULL;
    free(op);
    return end_now(r, err);
}
