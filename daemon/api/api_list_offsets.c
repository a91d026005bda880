/*
 * daemon/api/api_list_offsets.c — ListOffsets (API key 2), v0–v10.
 *
 * v0 answers OldStyleOffsets (at most one offset, if MaxNumOffsets > 0);
 * v1+ Timestamp and Offset; v4+ checks CurrentLeaderEpoch as Fetch does
 * (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) and answers LeaderEpoch as
 * Kafka: for LATEST the current leader epoch, otherwise the epoch that
 * wrote the offset answered (the log's epoch history), -1 with no offset
 * (clients use it to validate their position); v6+ flexible; v10's
 * TimeoutMs is for remote storage and has nothing to wait for here.
 *
 * Timestamp -1 (LATEST) answers the high watermark (standalone: the log
 * end; also for READ_COMMITTED, as there are no transactions), -2
 * (EARLIEST) the log start offset.  Any other timestamp T answers the first
 * offset whose record timestamp is >= T together with that record's
 * timestamp (seg_offset_for_time looks inside the batch and returns both);
 * when no record below the high watermark is that recent, offset -1 and
 * timestamp -1, as Kafka.
 *
 * Request and response go through the generated codec (kp_msgs.h); the
 * response's arrays live in the request's arena (r->arena).
 *
 * Not on the hot path (consumers call it once per partition when they have
 * no committed offset); the time lookup may read one batch from disk.
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "kp_msgs.h"

#define LO_LATEST         (-1)
#define LO_EARLIEST       (-2)
#define LO_MAX_TIMESTAMP  (-3)   /* v7+: the first record with the largest timestamp */
#define LO_EARLIEST_LOCAL (-4)   /* v8+: no tiered storage, so the log start */
#define LO_PENDING_UPLOAD (-5)   /* v9+: nothing is ever uploaded: none (-1) */

/* read_committed (IsolationLevel 1, v2+) sees the log up to the last stable
 * offset, read_uncommitted up to the high watermark (Kafka's
 * lastFetchableOffset): LATEST answers it, a time lookup finds nothing at
 * or past it. */
static int16_t list_offset(bk_req *r, kp_str topic, int32_t index, int64_t when,
                           int32_t current_leader_epoch, int8_t isolation,
                           int64_t *ts_out, int64_t *off_out, int32_t *epoch_out)
{
    bk_broker *b = r->b;
    *ts_out = -1;
    *off_out = -1;
    *epoch_out = -1;
    bk_partition *p;
    int rc = view_leader_replica(b, topic, index, &p);
    if (rc != KP_NONE)
        return rc;
    if (current_leader_epoch >= 0 && current_leader_epoch != p->leader_epoch)
        return current_leader_epoch < p->leader_epoch ? KP_FENCED_LEADER_EPOCH
                                                      : KP_UNKNOWN_LEADER_EPOCH;
    if (when == LO_PENDING_UPLOAD)
        return KP_NONE;
    int64_t fetchable = isolation == 1 ? replica_partition_lso(p) : p->high_watermark;
    if (when == LO_MAX_TIMESTAMP) {
        when = seg_max_timestamp(p->log);
        if (when < 0)
            return KP_NONE;                     /* empty: -1 / -1 */
    }
    if (when == LO_LATEST) {
        *off_out = fetchable;
        *epoch_out = p->leader_epoch;
        return KP_NONE;
    }
    if (when == LO_EARLIEST || when == LO_EARLIEST_LOCAL) {
        *off_out = seg_log_start(p->log);
        *epoch_out = seg_epoch_for_offset(p->log, *off_out);
        return KP_NONE;
    }
    int64_t off = -1, ts = -1;
    if (seg_offset_for_time(p->log, when, &off, &ts) != 0)
        return KP_KAFKA_STORAGE_ERROR;
    if (off < 0 || off >= fetchable)
        return KP_NONE;                         /* none: -1 / -1 */
    *off_out = off;
    *ts_out = ts;
    *epoch_out = seg_epoch_for_offset(p->log, off);
    return KP_NONE;
}

typedef kp_ListOffsetsResponse_ListOffsetsTopicResponse lo_topic_out;
typedef kp_ListOffsetsResponse_ListOffsetsPartitionResponse lo_part_out;

int api_handle_list_offsets(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_ListOffsetsRequest q;
    if (kp_dec_ListOffsetsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;

    kp_ListOffsetsResponse m;
    kp_init_ListOffsetsResponse(&m);
    int32_t nt = q.Topics_count < 0 ? 0 : q.Topics_count;
    lo_topic_out *topics = NULL;
    if (nt > 0 && !(topics = kp_arena_alloc(&r->arena, (size_t)nt * sizeof *topics)))
        return BK_CLOSE;
    for (int32_t t = 0; t < nt; t++) {
        const kp_ListOffsetsRequest_ListOffsetsTopic *qt = &q.Topics[t];
        int32_t np = qt->Partitions_count < 0 ? 0 : qt->Partitions_count;
        lo_part_out *parts = NULL;
        if (np > 0 && !(parts = kp_arena_alloc(&r->arena, (size_t)np * sizeof *parts)))
            return BK_CLOSE;
        topics[t] = (lo_topic_out){ .Name = qt->Name, .Partitions = parts,
                                    .Partitions_count = np };
        for (int32_t i = 0; i < np; i++) {
            const kp_ListOffsetsRequest_ListOffsetsPartition *qp = &qt->Partitions[i];
            int64_t ts, off;
            int32_t epoch;
            lo_part_out *po = &parts[i];
            po->PartitionIndex = qp->PartitionIndex;
            ts = off = -1;
            epoch = -1;
            po->ErrorCode = !sec_authorized(r, BK_RES_TOPIC, qt->Name, BK_OP_DESCRIBE)
                ? KP_TOPIC_AUTHORIZATION_FAILED
                : list_offset(r, qt->Name, qp->PartitionIndex, qp->Timestamp,
                              qp->CurrentLeaderEpoch, v >= 2 ? q.IsolationLevel : 0,
                              &ts, &off, &epoch);
            po->LeaderEpoch = v >= 4 ? epoch : -1;   /* v4+; the default below */
            if (v == 0) {                            /* OldStyleOffsets */
                po->Timestamp = -1;                  /* v1+ fields at their defaults */
                po->Offset = -1;
                if (po->ErrorCode == KP_NONE && off >= 0 && qp->MaxNumOffsets > 0) {
                    int64_t *one = kp_arena_alloc(&r->arena, sizeof *one);
                    if (!one)
                        return BK_CLOSE;
                    *one = off;
                    po->OldStyleOffsets = one;
                    po->OldStyleOffsets_count = 1;
                }
            } else {
                po->Timestamp = ts;
                po->Offset = off;
            }
        }
    }
    m.Topics = topics;
    m.Topics_count = nt;
    kp_enc_ListOffsetsResponse(r->out, v, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}
