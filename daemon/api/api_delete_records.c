/*
 * DeleteRecords v0-2 (API key 21; v2 flexible): moves a partition's log start offset
 * forward on request ("delete everything before offset N").  Offset -1
 * means the high watermark.  Segments wholly below the new start leave
 * the log and are unlinked later by the janitor (daemon/replica/replica_retention.c);
 * fetches below it get OFFSET_OUT_OF_RANGE at once.
 *
 *   Request:  Topics [Name, Partitions [PartitionIndex, Offset]], TimeoutMs
 *   Response: ThrottleTimeMs, Topics [Name, Partitions [PartitionIndex,
 *             LowWatermark, ErrorCode]]
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "kp_msgs.h"

static int16_t delete_one(bk_req *r, kp_str topic, int32_t index, int64_t offset,
                          int64_t *low)
{
    *low = -1;
    bk_partition *p;
    int rc = view_leader_replica(r->b, topic, index, &p);
    if (rc != KP_NONE)
        return (int16_t)rc;
    return (int16_t)replica_delete_records(r->b, p, offset, low);
}

/* The request is decoded and its response allocated whole before any
 * partition moves, so a malformed one (or one too big for the arena)
 * changes nothing: it closes the connection. */
int api_handle_delete_records(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DeleteRecordsRequest q;
    if (kp_dec_DeleteRecordsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DeleteRecordsResponse m;
    kp_init_DeleteRecordsResponse(&m);
    m.Topics_count = q.Topics_count;
    m.Topics = kp_arena_alloc(&r->arena, (size_t)q.Topics_count * sizeof *m.Topics);
    if (!m.Topics)
        return BK_CLOSE;
    for (int32_t t = 0; t < q.Topics_count; t++) {
        kp_DeleteRecordsResponse_DeleteRecordsTopicResult *mt = &m.Topics[t];
        mt->Name = q.Topics[t].Name;
        mt->Partitions_count = q.Topics[t].Partitions_count;
        mt->Partitions = kp_arena_alloc(&r->arena,
                                        (size_t)mt->Partitions_count * sizeof *mt->Partitions);
        if (!mt->Partitions)
            return BK_CLOSE;
    }
    for (int32_t t = 0; t < q.Topics_count; t++) {
        const kp_DeleteRecordsRequest_DeleteRecordsTopic *qt = &q.Topics[t];
        for (int32_t i = 0; i < qt->Partitions_count; i++) {
            kp_DeleteRecordsResponse_DeleteRecordsPartitionResult *mp = &m.Topics[t].Partitions[i];
            mp->PartitionIndex = qt->Partitions[i].PartitionIndex;
            mp->LowWatermark = -1;
            mp->ErrorCode = !sec_authorized(r, BK_RES_TOPIC, qt->Name, BK_OP_DELETE)
                ? KP_TOPIC_AUTHORIZATION_FAILED
                : delete_one(r, qt->Name, mp->PartitionIndex, qt->Partitions[i].Offset,
                             &mp->LowWatermark);
        }
    }
    /* TimeoutMs: nothing waits. */
    kp_enc_DeleteRecordsResponse(r->out, v, &m);
    return BK_RESPOND;
}
