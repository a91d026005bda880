/*
 * daemon/api/api_txn_offset_commit.c — TxnOffsetCommit v0-4 verified with
 * the transaction coordinator before the group coordinator stores it
 * (KIP-890 part 1, Kafka 3.6+: GroupCoordinator.handleTxnCommitOffsets
 * asks maybeStartTransactionVerificationForPartition first).
 *
 * Design note.
 *
 * Without it a client with WRITE on any transactional id and READ on a
 * group could commit offsets for a producer id nobody's transaction holds:
 * no marker would ever end them, OffsetFetch's RequireStable would answer
 * UNSTABLE_OFFSET_COMMIT forever, the group would never expire and, in
 * cluster mode, __consumer_offsets' open transaction would hold its
 * compaction.  So the group's partition of __consumer_offsets must be in
 * the producer's ongoing transaction (AddOffsetsToTxn put it there) with
 * that producer id and epoch, as the coordinator says:
 *
 *   this broker coordinates the id ─► txn_verify_partition, at once
 *   another broker does            ─► AddPartitionsToTxn v4 VerifyOnly
 *                                     (repl_peer_call), then the request
 *                                     runs again from its first byte with
 *                                     the verdict (tv_cur)
 *
 * The group room (daemon/group/, below txn/) is then handed the verdict:
 * gc_txn_offset_commit refuses each entry with it past the topic checks,
 * nothing is stored.  Kafka's codes (AddPartitionsToTxnManager, then
 * GroupMetadataManager.maybeConvertOffsetCommitError): not in the
 * transaction -> INVALID_TXN_STATE; another producer id ->
 * INVALID_PRODUCER_ID_MAPPING; a stale epoch -> INVALID_PRODUCER_EPOCH;
 * the coordinator busy or unknown -> COORDINATOR_NOT_AVAILABLE; no answer
 * -> COORDINATOR_LOAD_IN_PROGRESS; both retried by every client.
 *
 * Not verified, as Kafka: transaction.partition.verification.enable off;
 * a request refused as a whole anyway (the group room answers it: no WRITE
 * on the id, no READ on the group, an empty group id, a group this broker
 * does not coordinate now).  One malloc per
 * request that waits for another broker; a connection gone meanwhile
 * leaves tv->r NULL and the answer frees it.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/api/api_txn_verify.h"
#include "daemon/group/group.h"
#include "daemon/request.h"
#include "daemon/security/sec_authz.h"
#include "daemon/txn/txn.h"
#include "daemon/view/view.h"
#include "kp_msgs.h"

typedef struct txn_offsets_verify {
    bk_req *r;                        /* first: api_verify_cancel */
    kp_rd body;                       /* the request body, from its start */
    int32_t partition;                /* the group's, of __consumer_offsets */
    int16_t verdict;
} txn_offsets_verify;

static const txn_offsets_verify *tv_cur;   /* during the second run only */

/* The coordinator's code as TxnOffsetCommit answers it (see the note). */
static int16_t tv_code(int16_t err)
{
    switch (err) {
    case KP_PRODUCER_FENCED:
        return KP_INVALID_PRODUCER_EPOCH;
    case KP_NETWORK_EXCEPTION:
    case KP_REQUEST_TIMED_OUT:
    case KP_BROKER_NOT_AVAILABLE:
        return KP_COORDINATOR_LOAD_IN_PROGRESS;
    case KP_COORDINATOR_LOAD_IN_PROGRESS:
    case KP_COORDINATOR_NOT_AVAILABLE:
    case KP_NOT_COORDINATOR:
    case KP_CONCURRENT_TRANSACTIONS:
        return KP_COORDINATOR_NOT_AVAILABLE;
    default:
        return err;
    }
}

/* The other broker's answer: the verdict for the group's partition, then
 * the second run. */
static void tv_done(void *arg, int16_t error, kp_rd *body)
{
    txn_offsets_verify *tv = arg;
    bk_req *r = tv->r;
    if (!r) {
        free(tv);
        return;
    }
    kp_AddPartitionsToTxnResponse m;
    kp_arena a;
    kp_arena_init(&a, 0);
    int16_t v = error ? error : api_verify_decode(body, &m, &a);
    if (v == KP_NONE)
        v = api_verify_part(&m, kp_str_cstr(TXN_OFFSETS_TOPIC), tv->partition);
    kp_arena_free(&a);
    tv->verdict = tv_code(v);
    tv_cur = tv;
    api_verify_rerun(r, tv->body, api_handle_txn_offset_commit);
    tv_cur = NULL;
    free(tv);
}

/* Asks coord (another broker) whether the group's partition is in the
 * transaction: BK_DEFER, or 0 with *verdict set when it cannot be asked. */
static int tv_ask(bk_req *r, const kp_TxnOffsetCommitRequest *q, kp_rd body0, int32_t coord,
                  int32_t part, int16_t *verdict)
{
    txn_offsets_verify *tv = calloc(1, sizeof *tv);
    if (!tv) {
        *verdict = KP_COORDINATOR_NOT_AVAILABLE;
        return 0;
    }
    int32_t ids[1] = { part };
    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTopic tt = {
        .Name = kp_str_cstr(TXN_OFFSETS_TOPIC), .Partitions = ids, .Partitions_count = 1 };
    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction x = {
        .TransactionalId = q->TransactionalId, .ProducerId = q->ProducerId,
        .ProducerEpoch = q->ProducerEpoch, .Topics = &tt, .Topics_count = 1 };
    tv->r = r;
    tv->body = body0;
    tv->partition = part;
    /* No coordinator now (coord -1): the commit is refused with a
     * retriable code. */
    if (api_verify_send(r, coord, &x, 30000, tv_done, tv) != 0) {
        free(tv);
        *verdict = KP_COORDINATOR_NOT_AVAILABLE;
        return 0;
    }
    return BK_DEFER;
}

int api_handle_txn_offset_commit(bk_req *r)
{
    bk_broker *b = r->b;
    kp_rd body0 = r->body;
    kp_TxnOffsetCommitRequest q;
    if (kp_dec_TxnOffsetCommitRequest(&r->body, r->hdr.RequestApiVersion, &q, &r->arena) != 0 ||
        q.Topics_count < 0)
        return BK_CLOSE;
    if (tv_cur)
        return gc_txn_offset_commit(r, &q, tv_cur->verdict);
    /* Refused as a whole by the group room (a group coordinated
     * elsewhere too: no verification wasted on it), or verification off. */
    if (!b->cfg->transaction_partition_verification_enable || q.GroupId.len <= 0 ||
        !sec_authorized(r, BK_RES_TRANSACTIONAL_ID, q.TransactionalId, BK_OP_WRITE) ||
        !sec_authorized(r, BK_RES_GROUP, q.GroupId, BK_OP_READ) ||
        gc_coordinator_error(q.GroupId) != KP_NONE)
        return gc_txn_offset_commit(r, &q, KP_NONE);
    int32_t part = txn_offsets_partition(b, q.GroupId);
    int16_t err = txn_verify_partition(b, q.TransactionalId, q.ProducerId, q.ProducerEpoch,
                                       TXN_OFFSETS_TOPIC, part);
    if (err == KP_NOT_COORDINATOR && bk_cluster_mode(b) && b->txn_coordinator_of) {
        int32_t coord = b->txn_coordinator_of(b, q.TransactionalId.p,
                                              (size_t)q.TransactionalId.len);
        if (coord != b->cfg->broker_id) {
            int rc = tv_ask(r, &q, body0, coord, part, &err);
            if (rc)
                return rc;
        }
    }
    return gc_txn_offset_commit(r, &q, tv_code(err));
}
