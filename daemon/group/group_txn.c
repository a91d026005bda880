/*
 * daemon/group/group_txn.c — offsets committed inside a transaction
 * (TxnOffsetCommit v0-4, KIP-98 and KIP-447) and the transaction's end
 * reaching the group coordinator (gc_txn_complete).
 *
 * Design note.
 *
 * A transactional producer commits its consumer's offsets with
 * TxnOffsetCommit after AddOffsetsToTxn put the group's partition of
 * __consumer_offsets into the transaction; daemon/api/api_txn_offset_commit.c
 * checks that with the transaction coordinator first (KIP-890) and hands
 * the verdict here (bk_offset_commit.txn_verdict).  Those offsets must not be
 * seen (OffsetFetch, SQL's committed_offsets and lag) until the
 * transaction commits, and must vanish if it aborts, as Kafka's
 * GroupMetadata keeps them in pendingTransactionalOffsetCommits.
 *
 *   TxnOffsetCommit ──gc_offsets_commit (txn)──► pending rows (SQLite,
 *     │                 the usual job + sync)        pending_txn_offsets)
 *     │ answered once they are durable                      │
 *     ▼                                                     │
 *   EndTxn ─► coordinator ─► marker on the group's partition │
 *                              │ gc_txn_complete             ▼
 *                              └──► job: md_txn_offsets_complete
 *                                   commit: into committed_offsets
 *                                   abort:  dropped
 *                                   done(KP_NONE) after the job's sync
 *
 * The pending rows go through the coordinator's one persistence pipeline
 * (group_persist.c): a TxnOffsetCommit is an offset commit whose entries
 * carry md_offset.txn, so it is validated, batched, written and answered
 * exactly as an OffsetCommit, except for the group check (Kafka's
 * validateOffsetCommit with isTransactional: no member needed unless the
 * request names one, KIP-447) and where the rows land.  A transaction's
 * end is one more kind of entry in the next job, run after that job's
 * offsets.  OffsetFetch's RequireStable (v7+) reads the pending rows of
 * the group and answers UNSTABLE_OFFSET_COMMIT for their partitions.
 *
 * Cluster mode, as Kafka's GroupMetadataManager: the TxnOffsetCommit is
 * also appended to the group's partition of __consumer_offsets as one
 * transactional batch of the producer (ProducerId, ProducerEpoch,
 * BaseSequence 0, Kafka's storeOffsets) and answered once replicated
 * (group_log.c's commit hold), so the offsets outlive their
 * coordinator.  The marker the transaction coordinator then appends to
 * that partition is what commits or aborts them in the log: followers
 * and a later coordinator's load read the batch as pending until its
 * producer's marker (group_log.c G8); a load that ends with it still
 * open leaves pending rows, which that marker's gc_txn_complete
 * completes here.  Nothing is appended at the commit.  A marker that
 * reaches a partition while it is loading here is past what the load
 * reads: gc_txn_complete answers COORDINATOR_LOAD_IN_PROGRESS and the
 * transaction coordinator writes it again (txn_markers.c retries), when
 * the load has left the pending rows it completes.
 *
 * Invariants:
 *   X1. Pending offsets are never in committed_offsets: only
 *       md_txn_offsets_complete with commit moves them there.
 *   X2. A TxnOffsetCommit is answered only after its rows' job is durable,
 *       so any end of its transaction (which the producer sends after that
 *       answer) is queued in a later job and finds them.
 *   X3. gc_txn_complete's done runs exactly once, from the apply half on
 *       the loop after the job's sync (never inside the call); a second
 *       completion of the same transaction finds no rows and succeeds.
 */
#include "daemon/security/sec_authz.h"
#include "daemon/group/group_int.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

/* ---- KIP-447: who may commit in a transaction ---------------------------- */

int16_t gc_txn_group_error(kp_str group, int32_t gen, kp_str member, kp_str instance,
                           bool *create)
{
    *create = false;
    gc_group *g = gc_group_find(group.p ? group.p : "", group.len > 0 ? (size_t)group.len : 0);
    bool named = gen >= 0 || member.len > 0 || instance.len >= 0;
    if (!g) {
        /* Kafka creates the group Empty, then checks: no member is in it. */
        *create = !named;
        return named ? KP_UNKNOWN_MEMBER_ID : KP_NONE;
    }
    if (g->state == GC_DEAD)
        return KP_COORDINATOR_NOT_AVAILABLE;
    if (!named)                       /* a producer before KIP-447 (v0-2) */
        return KP_NONE;
    if (gc_static_fenced(g, member, instance))
        return KP_FENCED_INSTANCE_ID;
    if (!gc_member_of(g, member))
        return KP_UNKNOWN_MEMBER_ID;
    if (gen != g->generation)
        return KP_ILLEGAL_GENERATION;
    return KP_NONE;
}

/* ---- TxnOffsetCommit v0-4 -------------------------------------------------- */

/* One TxnOffsetCommit while it is answered; a single allocation.  r->state
 * points here; offs point into the request's frame. */
struct tc_commit {
    const kp_TxnOffsetCommitRequest_TxnOffsetCommitRequestTopic *qt;
    int32_t ntopics, n;
    md_offset *offs;                  /* request order */
    struct gc_wait *pending;
};

static void write_txn_commit_response(bk_req *r, const struct tc_commit *c)
{
    kp_buf_reset(r->out);
    kp_TxnOffsetCommitResponse m;
    kp_init_TxnOffsetCommitResponse(&m);
    kp_TxnOffsetCommitResponse_TxnOffsetCommitResponseTopic *t =
        bk_req_alloc(r, (size_t)(c->ntopics > 0 ? c->ntopics : 1), sizeof *t);
    kp_TxnOffsetCommitResponse_TxnOffsetCommitResponsePartition *p =
        bk_req_alloc(r, (size_t)(c->n > 0 ? c->n : 1), sizeof *p);
    if (!t || !p) {
        BK_ERROR("TxnOffsetCommit: no memory for the response");
        return;                       /* an empty body: the client's parse fails */
    }
    int32_t k = 0;
    for (int32_t i = 0; i < c->ntopics; i++) {
        t[i] = (kp_TxnOffsetCommitResponse_TxnOffsetCommitResponseTopic){
            .Name = c->qt[i].Name, .Partitions = p + k,
            .Partitions_count = c->qt[i].Partitions_count,
        };
        for (int32_t j = 0; j < c->qt[i].Partitions_count; j++, k++)
            p[k] = (kp_TxnOffsetCommitResponse_TxnOffsetCommitResponsePartition){
                .PartitionIndex = c->offs[k].partition,
                .ErrorCode = (int16_t)c->offs[k].result,
            };
    }
    m.Topics = t;
    m.Topics_count = c->ntopics;
    int rc = kp_enc_TxnOffsetCommitResponse(r->out, r->hdr.RequestApiVersion, &m);
    if (bk_req_encoded(r, "TxnOffsetCommit", rc) != BK_RESPOND)
        kp_buf_reset(r->out);
}

static void tc_cancel(bk_req *r)
{
    struct tc_commit *c = r->state;
    if (c)
        gc_groups_forget(c->pending);
    gc_req_release(r, c);
}

static void tc_done(void *arg, int rc)
{
    (void)rc;                         /* the entries carry it */
    bk_req *r = arg;
    struct tc_commit *c = r->state;
    write_txn_commit_response(r, c);
    gc_req_finish(r, c);
}

/* Kafka's handleTxnOffsetCommitRequest: WRITE on the transactional id,
 * then READ on the group, each failing the whole request; then the group
 * coordinator's checks (gc_offsets_commit: coordinator, READ on each topic,
 * the partition, the coordinator's verdict, KIP-447 member, the metadata
 * size).  Decoded, and verified with the transaction coordinator, by
 * daemon/api/api_txn_offset_commit.c (KIP-890: this room is below txn/). */
int gc_txn_offset_commit(bk_req *r, const kp_TxnOffsetCommitRequest *qp, int16_t verdict)
{
    const kp_TxnOffsetCommitRequest q = *qp;
    int64_t total = 0;
    for (int32_t t = 0; t < q.Topics_count; t++)
        total += q.Topics[t].Partitions_count > 0 ? q.Topics[t].Partitions_count : 0;
    if (total > INT32_MAX / 2)
        return BK_CLOSE;
    struct tc_commit *c = calloc(1, sizeof *c + (size_t)(total + 1) * sizeof(md_offset));
    if (!c)
        return BK_CLOSE;
    c->qt = q.Topics;
    c->ntopics = q.Topics_count;
    c->n = (int32_t)total;
    c->offs = (md_offset *)(c + 1);
    int64_t now = bk_now_ms();
    int32_t k = 0;
    for (int32_t t = 0; t < q.Topics_count; t++)
        for (int32_t p = 0; p < q.Topics[t].Partitions_count; p++, k++) {
            const kp_TxnOffsetCommitRequest_TxnOffsetCommitRequestPartition *qp =
                &q.Topics[t].Partitions[p];
            c->offs[k] = (md_offset){
                .group_id = q.GroupId.p, .group_len = q.GroupId.len,
                .topic = q.Topics[t].Name.p, .topic_len = q.Topics[t].Name.len,
                .partition = qp->PartitionIndex, .offset = qp->CommittedOffset,
                .leader_epoch = qp->CommittedLeaderEpoch,      /* -1 before v2 */
                .metadata = qp->CommittedMetadata.p,
                .metadata_len = qp->CommittedMetadata.len,
                .commit_time_ms = now, .expire_time_ms = -1,
            };
        }
    bk_offset_commit bc = {
        .group = q.GroupId, .generation = q.GenerationId, .member_id = q.MemberId,
        .instance_id = q.GroupInstanceId.len < 0 ? KP_STR_NULL : q.GroupInstanceId,
        .txn = true, .producer_id = q.ProducerId, .producer_epoch = q.ProducerEpoch,
        .offs = c->offs, .n = (size_t)c->n, .done = tc_done, .arg = r,
        .cadence_key = r->conn ? net_conn_serial(r->conn) : 0, .authz = r,
        .txn_verdict = verdict,
    };
    int16_t whole = KP_NONE;
    if (!sec_authorized(r, BK_RES_TRANSACTIONAL_ID, q.TransactionalId, BK_OP_WRITE))
        whole = KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    else if (!sec_authorized(r, BK_RES_GROUP, q.GroupId, BK_OP_READ))
        whole = KP_GROUP_AUTHORIZATION_FAILED;
    else if (q.GroupId.len <= 0)
        whole = KP_INVALID_GROUP_ID;  /* Kafka's validateGroupStatus */
    char err[MD_ERRLEN];
    if (whole)
        for (int32_t i = 0; i < c->n; i++)
            c->offs[i].result = whole;
    else
        gc_offsets_commit(r->b, &bc, err, sizeof err);
    if (!bc.pending) {
        write_txn_commit_response(r, c);
        free(c);
        return BK_RESPOND;
    }
    c->pending = bc.pending;
    r->state = c;
    r->cancel = tc_cancel;
    return BK_DEFER;
}

/* ---- a transaction's end -------------------------------------------------- */

/* The partitions of __consumer_offsets groups hash over, in cluster mode;
 * 0 standalone: there is no such topic and this broker coordinates every
 * group, so an end completes all of the producer's groups (a later marker
 * for another partition of the same transaction finds nothing, X3). */
static int32_t offsets_partitions(bk_broker *b)
{
    if (!bk_cluster_mode(b))
        return 0;
    const bk_topic *t = view_topic_find(b, GL_TOPIC, sizeof GL_TOPIC - 1);
    return t && t->npartitions > 0 ? t->npartitions : b->cfg->offsets_topic_num_partitions;
}

/* A marker that met a load (see the design note): refused on the next
 * turn (X3). */
struct tc_refused {
    gc_txn_done_fn done;
    void *arg;
};

static void tc_refuse_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    struct tc_refused x = *(struct tc_refused *)arg;
    free(arg);
    x.done(x.arg, KP_COORDINATOR_LOAD_IN_PROGRESS);
}

void gc_txn_complete(bk_broker *b, int32_t offsets_partition, int64_t producer_id,
                     int16_t producer_epoch, bool commit, gc_txn_done_fn done, void *arg)
{
    (void)producer_epoch;             /* Kafka completes by producer id */
    if (bk_cluster_mode(b) && gc_log_loading(offsets_partition)) {
        struct tc_refused *x = malloc(sizeof *x);
        struct timeval now = { 0, 0 };
        if (!x)
            abort();                  /* done must run: nothing else can say so */
        *x = (struct tc_refused){ done, arg };
        if (event_base_once(b->base, -1, EV_TIMEOUT, tc_refuse_cb, x, &now) != 0)
            abort();
        return;
    }
    gc_wait *w = calloc(1, sizeof *w);
    if (!w)
        abort();                      /* done must run: nothing else can say so */
    w->next = w->prev = w;
    w->txn_done = done;
    w->done_arg = arg;
    w->txn_producer_id = producer_id;
    w->txn_commit = commit;
    w->txn_partition = offsets_partition;
    w->txn_nparts = offsets_partitions(b);
    gc_batch_add(w, 0);               /* X3: answered from the turn, never here */
}

int gc_txn_to_job(gc_wait *w, gc_job *j)
{
    gc_txn_end t = {
        .producer_id = w->txn_producer_id, .commit = w->txn_commit,
        .part = w->txn_partition, .nparts = w->txn_partition >= 0 ? w->txn_nparts : 0,
    };
    if (gc_job_txn_end(j, &t, &w->job_first) != 0)
        return MD_E_SQL;
    w->job = j;
    return 0;
}

void gc_txn_apply(gc_wait *w, int rc)
{
    /* The job's own rc too: its transaction's commit may have failed after
     * the end ran (md_sync.c); a retry is harmless (X3). */
    if (!rc && (!w->job || gc_job_rc(w->job) != 0 ||
                gc_job_txn_end_result(w->job, w->job_first) != 0))
        rc = MD_E_SQL;
    gc_txn_done_fn done = w->txn_done;
    void *arg = w->done_arg;
    free(w);
    /* Kafka's coordinator retries a marker answered with an error. */
    done(arg, rc ? KP_COORDINATOR_NOT_AVAILABLE : KP_NONE);
}

/* ---- OffsetFetch's RequireStable (KIP-447) -------------------------------- */

int gc_txn_pending_list(bk_broker *b, kp_str group, md_committed **rows, size_t *n)
{
    return md_txn_offsets_pending(b->db, group.p, group.len > 0 ? (size_t)group.len : 0,
                                  rows, n);
}
