/*
 * daemon/api/api_offset_for_leader_epoch.c — OffsetForLeaderEpoch (API key
 * 23), v0-v4: where a leader epoch ends in this broker's log.
 *
 * A follower that starts following a new leader asks it for the epoch of
 * its own last batch and truncates where the leader's log diverges
 * (daemon/replication/repl_fetcher.c); a consumer may ask to check its position after a
 * leader change.  The answer comes from the log's epoch history
 * (segments/epochs.c, seg_epoch_end_offset), as Kafka's: for the current
 * epoch the log end offset; for an older one the start offset of the next
 * larger epoch, with the largest epoch <= the one asked for; -1 / -1 when
 * the history has nothing to say (an empty log, batches without epochs).
 *
 * Errors per partition, in Kafka's order (Partition.getLocalLog):
 *   UNKNOWN_TOPIC_OR_PARTITION  no such partition in the view
 *   FENCED_LEADER_EPOCH         CurrentLeaderEpoch older than ours
 *   UNKNOWN_LEADER_EPOCH        CurrentLeaderEpoch newer than ours
 *   NOT_LEADER_OR_FOLLOWER      not led here (or this broker is fenced), or
 *                               not hosted here for a debugging request
 * CurrentLeaderEpoch -1 (and v0-1, which lack it) skips the epoch check.
 * ReplicaId -2 (Kafka's debugging id, and the default of v0-2, which lack
 * the field) may read any replica this broker hosts; every other id only
 * the leader's.
 *
 * Not on a hot path: one request per partition per leader change.
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "kp_msgs.h"

#define OE_DEBUGGING_REPLICA_ID (-2)

typedef kp_OffsetForLeaderEpochResponse_OffsetForLeaderTopicResult oe_topic_out;
typedef kp_OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult oe_part_out;

static int16_t end_offset(bk_req *r, kp_str topic, int32_t replica_id,
                          const kp_OffsetForLeaderEpochRequest_OffsetForLeaderPartition *qp,
                          oe_part_out *po)
{
    bk_broker *b = r->b;
    po->LeaderEpoch = -1;
    po->EndOffset = -1;
    const bk_pview *v = view_partition(b, topic, qp->Partition);
    if (!v)
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    if (qp->CurrentLeaderEpoch >= 0 && qp->CurrentLeaderEpoch != v->leader_epoch)
        return qp->CurrentLeaderEpoch < v->leader_epoch ? KP_FENCED_LEADER_EPOCH
                                                        : KP_UNKNOWN_LEADER_EPOCH;
    bk_partition *p = NULL;
    if (replica_id != OE_DEBUGGING_REPLICA_ID) {
        int rc = view_leader_replica(b, topic, qp->Partition, &p);
        if (rc != KP_NONE)
            return (int16_t)rc;
    } else if (!(p = v->local)) {
        return KP_NOT_LEADER_OR_FOLLOWER;
    }
    seg_epoch_end_offset(p->log, qp->LeaderEpoch, &po->LeaderEpoch, &po->EndOffset);
    return KP_NONE;
}

int api_handle_offset_for_leader_epoch(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_OffsetForLeaderEpochRequest q;
    if (kp_dec_OffsetForLeaderEpochRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_OffsetForLeaderEpochResponse m;
    kp_init_OffsetForLeaderEpochResponse(&m);
    int32_t nt = q.Topics_count < 0 ? 0 : q.Topics_count;
    oe_topic_out *topics = NULL;
    if (nt > 0 && !(topics = kp_arena_alloc(&r->arena, (size_t)nt * sizeof *topics)))
        return BK_CLOSE;
    /* Kafka's: a replica (any id but the consumer's -1) needs CLUSTER_ACTION. */
    bool cluster_denied = q.ReplicaId != -1 && !BK_AUTHZ_CLUSTER(r, BK_OP_CLUSTER_ACTION);
    for (int32_t t = 0; t < nt; t++) {
        const kp_OffsetForLeaderEpochRequest_OffsetForLeaderTopic *qt = &q.Topics[t];
        int32_t np = qt->Partitions_count < 0 ? 0 : qt->Partitions_count;
        oe_part_out *parts = NULL;
        if (np > 0 && !(parts = kp_arena_alloc(&r->arena, (size_t)np * sizeof *parts)))
            return BK_CLOSE;
        topics[t] = (oe_topic_out){ .Topic = qt->Topic, .Partitions = parts,
                                    .Partitions_count = np };
        for (int32_t i = 0; i < np; i++) {
            oe_part_out *po = &parts[i];
            *po = (oe_part_out){ 0 };
            po->Partition = qt->Partitions[i].Partition;
            po->ErrorCode = cluster_denied ? KP_CLUSTER_AUTHORIZATION_FAILED
                : q.ReplicaId == -1 && !sec_authorized(r, BK_RES_TOPIC, qt->Topic, BK_OP_DESCRIBE)
                ? KP_TOPIC_AUTHORIZATION_FAILED
                : end_offset(r, qt->Topic, q.ReplicaId, &qt->Partitions[i], po);
        }
    }
    m.Topics = topics;
    m.Topics_count = nt;
    kp_enc_OffsetForLeaderEpochResponse(r->out, v, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}
