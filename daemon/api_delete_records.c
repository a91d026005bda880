/*
 * DeleteRecords v0-1 (API key 21): moves a partition's log start offset
 * forward on request ("delete everything before offset N").  Offset -1
 * means the high watermark.  Segments wholly below the new start leave
 * the log and are unlinked later by the janitor (daemon/retention.c);
 * fetches below it get OFFSET_OUT_OF_RANGE at once.
 *
 *   Request:  Topics [Name, Partitions [PartitionIndex, Offset]], TimeoutMs
 *   Response: ThrottleTimeMs, Topics [Name, Partitions [PartitionIndex,
 *             LowWatermark, ErrorCode]]
 */
#include "daemon/cluster.h"
#include "daemon/replica.h"
#include "daemon/request.h"

static int16_t delete_one(bk_req *r, kp_str topic, int32_t index, int64_t offset,
                          int64_t *low)
{
    *low = -1;
    bk_partition *p;
    int rc = bk_leader_replica(r->b, topic, index, &p);
    if (rc != KP_NONE)
        return (int16_t)rc;
    return (int16_t)bk_delete_records(r->b, p, offset, low);
}

int bk_handle_delete_records(bk_req *r)
{
    kp_rd *rd = &r->body;
    kp_buf *o = r->out;
    kp_wr_i32(o, 0);                            /* ThrottleTimeMs */
    int32_t ntopics = kp_rd_array(rd, 6);
    kp_wr_array(o, ntopics < 0 ? 0 : ntopics);
    for (int32_t t = 0; t < ntopics && kp_rd_ok(rd); t++) {
        kp_str name = kp_rd_string(rd);
        int32_t nparts = kp_rd_array(rd, 12);
        kp_wr_str(o, name);
        kp_wr_array(o, nparts < 0 ? 0 : nparts);
        for (int32_t i = 0; i < nparts && kp_rd_ok(rd); i++) {
            int32_t index = kp_rd_i32(rd);
            int64_t offset = kp_rd_i64(rd);
            if (!kp_rd_ok(rd))
                break;
            int64_t low;
            int16_t err = delete_one(r, name, index, offset, &low);
            kp_wr_i32(o, index);
            kp_wr_i64(o, low);
            kp_wr_i16(o, err);
        }
    }
    (void)kp_rd_i32(rd);                        /* TimeoutMs: nothing waits */
    return kp_rd_ok(rd) ? BK_RESPOND : BK_CLOSE;
}
