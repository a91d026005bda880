/*
 * daemon/api_list_offsets.c — ListOffsets (API key 2), v0–v2 (advertised
 * 1–2; v0 costs a few lines and old tools still send it).
 *
 * Timestamp -1 (LATEST) answers the high watermark (standalone: the log
 * end; also for READ_COMMITTED, as there are no transactions), -2
 * (EARLIEST) the log start offset.  Any other timestamp T answers the first
 * offset whose record timestamp is >= T together with that record's
 * timestamp (seg_offset_for_time looks inside the batch and returns both);
 * when no record below the high watermark is that recent, offset -1 and
 * timestamp -1, as Kafka.
 *
 * Not on the hot path (consumers call it once per partition when they have
 * no committed offset); the time lookup may read one batch from disk.
 */
#include "daemon/cluster.h"
#include "daemon/replica.h"
#include "daemon/request.h"

#define LO_LATEST   (-1)
#define LO_EARLIEST (-2)

static int16_t list_offset(bk_req *r, kp_str topic, int32_t index, int64_t when,
                           int64_t *ts_out, int64_t *off_out)
{
    bk_broker *b = r->b;
    *ts_out = -1;
    *off_out = -1;
    bk_partition *p;
    int rc = bk_leader_replica(b, topic, index, &p);
    if (rc != KP_NONE)
        return rc;
    if (when == LO_LATEST) {
        *off_out = p->high_watermark;
        return KP_NONE;
    }
    if (when == LO_EARLIEST) {
        *off_out = seg_log_start(p->log);
        return KP_NONE;
    }
    int64_t off = -1, ts = -1;
    if (seg_offset_for_time(p->log, when, &off, &ts) != 0)
        return KP_KAFKA_STORAGE_ERROR;
    if (off < 0 || off >= p->high_watermark)
        return KP_NONE;                         /* none: -1 / -1 */
    *off_out = off;
    *ts_out = ts;
    return KP_NONE;
}

int bk_handle_list_offsets(bk_req *r)
{
    kp_rd *rd = &r->body;
    kp_buf *o = r->out;
    int16_t v = r->hdr.RequestApiVersion;

    (void)kp_rd_i32(rd);                        /* ReplicaId */
    if (v >= 2)
        (void)kp_rd_i8(rd);                     /* IsolationLevel */
    if (v >= 2)
        kp_wr_i32(o, 0);                        /* ThrottleTimeMs */
    int32_t ntopics = kp_rd_array(rd, 6);
    kp_wr_array(o, ntopics < 0 ? 0 : ntopics);
    for (int32_t t = 0; t < ntopics && kp_rd_ok(rd); t++) {
        kp_str name = kp_rd_string(rd);
        int32_t nparts = kp_rd_array(rd, v == 0 ? 16 : 12);
        kp_wr_str(o, name);
        kp_wr_array(o, nparts < 0 ? 0 : nparts);
        for (int32_t i = 0; i < nparts && kp_rd_ok(rd); i++) {
            int32_t index = kp_rd_i32(rd);
            int64_t when = kp_rd_i64(rd);
            int32_t max_num = v == 0 ? kp_rd_i32(rd) : 1;
            if (!kp_rd_ok(rd))
                break;
            int64_t ts, off;
            int16_t err = list_offset(r, name, index, when, &ts, &off);
            kp_wr_i32(o, index);
            kp_wr_i16(o, err);
            if (v == 0) {                       /* OldStyleOffsets */
                bool one = err == KP_NONE && off >= 0 && max_num > 0;
                kp_wr_array(o, one ? 1 : 0);
                if (one)
                    kp_wr_i64(o, off);
            } else {
                kp_wr_i64(o, ts);
                kp_wr_i64(o, off);
            }
        }
    }
    return kp_rd_ok(rd) ? BK_RESPOND : BK_CLOSE;
}
