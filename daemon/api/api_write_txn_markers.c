/*
 * daemon/api/api_write_txn_markers.c — WriteTxnMarkers (API key 27), v0-1:
 * a transaction coordinator ends a transaction in the partitions this
 * broker leads (KIP-98).  Kafka's checks and answers:
 *
 *   no CLUSTER_ACTION on the cluster     CLUSTER_AUTHORIZATION_FAILED for
 *                                        every partition
 *   per partition: replica_txn_write_marker (replica_txn.h): unknown
 *   topic, not the leader, storage error, older producer epoch
 *   (INVALID_PRODUCER_EPOCH), older coordinator epoch
 *   (TRANSACTION_COORDINATOR_FENCED), timeout; KP_NONE once the high
 *   watermark covers the marker (acks=all)
 *   a partition of __consumer_offsets    then gc_txn_complete: the
 *                                        transaction's pending offsets
 *                                        become committed (or are dropped)
 *                                        before that partition is answered;
 *                                        standalone, where group offsets
 *                                        live in SQLite and no such log
 *                                        exists, gc_txn_complete alone
 *
 * The answer waits for every partition (BK_DEFER).  Each partition's
 * callback comes exactly once (replica_txn.c M1, group.h), so the hold
 * is malloc'ed, not in the request arena, and outlives a connection that
 * dies first: the cancel only forgets the request, and the last callback
 * frees the hold.  Errors are kept in the hold and written into the
 * response (arena) only when the request is still there.
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/group/group.h"
#include "daemon/replica/replica_txn.h"
#include "daemon/request.h"
#include "daemon/security/sec_authz.h"
#include "daemon/view/view.h"
#include "kp_msgs.h"

/* Kafka appends markers with request.timeout.ms (30 s by default). */
#define WM_TIMEOUT_MS 30000
#define WM_OFFSETS_TOPIC "__consumer_offsets"

typedef kp_WriteTxnMarkersResponse_WritableTxnMarkerResult wm_marker_out;
typedef kp_WriteTxnMarkersResponse_WritableTxnMarkerTopicResult wm_topic_out;
typedef kp_WriteTxnMarkersResponse_WritableTxnMarkerPartitionResult wm_part_out;

struct wm_hold;
typedef struct wm_part {
    struct wm_hold *h;
    wm_part_out *out;              /* in r->arena: written only while h->r */
    int16_t error;
    bool offsets;                  /* a partition of __consumer_offsets */
    int32_t partition;
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit;
    int32_t coordinator_epoch;
    const char *topic;             /* r->arena; replica_txn_write_marker copies it */
} wm_part;

typedef struct wm_hold {
    bk_broker *b;
    bk_req *r;                     /* NULL: the connection went first */
    kp_WriteTxnMarkersResponse m;
    int pending;
    int n;
    wm_part parts[];
} wm_hold;

static void wm_encode(bk_req *r, wm_hold *h)
{
    for (int i = 0; i < h->n; i++)
        h->parts[i].out->ErrorCode = h->parts[i].error;
    kp_enc_WriteTxnMarkersResponse(r->out, r->hdr.RequestApiVersion, &h->m);
}

static void wm_part_done(wm_part *wp, int16_t error)
{
    wm_hold *h = wp->h;
    wp->error = error;
    if (--h->pending > 0)
        return;
    bk_req *r = h->r;
    if (r) {
        r->state = NULL;
        r->cancel = NULL;
        wm_encode(r, h);
        net_req_finish(r);             /* may start the next request on r */
    }
    free(h);
}

static void wm_offsets_done(void *arg, int16_t error)
{
    wm_part_done(arg, error);
}

static void wm_marker_done(void *arg, int16_t error)
{
    wm_part *wp = arg;
    if (error == KP_NONE && wp->offsets) {
        gc_txn_complete(wp->h->b, wp->partition, wp->producer_id,
                        wp->producer_epoch, wp->commit, wm_offsets_done, wp);
        return;
    }
    wm_part_done(wp, error);
}

static void wm_cancel(bk_req *r)
{
    wm_hold *h = r->state;
    r->state = NULL;
    r->cancel = NULL;
    if (h)
        h->r = NULL;                   /* the callbacks still come; the last frees */
}

/* No CLUSTER_ACTION: every partition CLUSTER_AUTHORIZATION_FAILED, as
 * Kafka answers, decided before anything per partition is allocated (the
 * answer's own arrays, in the arena, are the size of the request). */
static int wm_refuse(bk_req *r, const kp_WriteTxnMarkersRequest *q)
{
    kp_WriteTxnMarkersResponse m;
    kp_init_WriteTxnMarkersResponse(&m);
    int32_t nm = q->Markers_count < 0 ? 0 : q->Markers_count;
    m.Markers = bk_req_alloc(r, (size_t)(nm ? nm : 1), sizeof *m.Markers);
    if (!m.Markers)
        return BK_CLOSE;
    m.Markers_count = nm;
    for (int32_t i = 0; i < nm; i++) {
        const kp_WriteTxnMarkersRequest_WritableTxnMarker *qm = &q->Markers[i];
        int32_t nt = qm->Topics_count < 0 ? 0 : qm->Topics_count;
        wm_topic_out *to = bk_req_alloc(r, (size_t)(nt ? nt : 1), sizeof *to);
        if (!to)
            return BK_CLOSE;
        m.Markers[i] = (wm_marker_out){ .ProducerId = qm->ProducerId, .Topics = to,
                                        .Topics_count = nt };
        for (int32_t t = 0; t < nt; t++) {
            int32_t np = qm->Topics[t].PartitionIndexes_count;
            np = np < 0 ? 0 : np;
            wm_part_out *po = bk_req_alloc(r, (size_t)(np ? np : 1), sizeof *po);
            if (!po)
                return BK_CLOSE;
            to[t] = (wm_topic_out){ .Name = qm->Topics[t].Name, .Partitions = po,
                                    .Partitions_count = np };
            for (int32_t p = 0; p < np; p++)
                po[p] = (wm_part_out){ .PartitionIndex = qm->Topics[t].PartitionIndexes[p],
                                       .ErrorCode = KP_CLUSTER_AUTHORIZATION_FAILED };
        }
    }
    return bk_req_encoded(r, "WriteTxnMarkers",
                          kp_enc_WriteTxnMarkersResponse(r->out, r->hdr.RequestApiVersion, &m));
}

int api_handle_write_txn_markers(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_WriteTxnMarkersRequest q;
    if (kp_dec_WriteTxnMarkersRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_CLUSTER_ACTION))
        return wm_refuse(r, &q);
    int32_t nm = q.Markers_count < 0 ? 0 : q.Markers_count;
    int n = 0;
    for (int32_t i = 0; i < nm; i++)
        for (int32_t t = 0; t < q.Markers[i].Topics_count; t++)
            n += q.Markers[i].Topics[t].PartitionIndexes_count < 0
                     ? 0 : q.Markers[i].Topics[t].PartitionIndexes_count;
    wm_hold *h = calloc(1, sizeof *h + (size_t)n * sizeof(wm_part));
    wm_marker_out *mo = nm ? kp_arena_alloc(&r->arena, (size_t)nm * sizeof *mo) : NULL;
    if (!h || (nm && !mo)) {
        free(h);
        return BK_CLOSE;
    }
    h->b = r->b;
    h->r = r;
    h->n = n;
    h->m.Markers = mo;
    h->m.Markers_count = nm;
    int k = 0;
    for (int32_t i = 0; i < nm; i++) {
        const kp_WriteTxnMarkersRequest_WritableTxnMarker *qm = &q.Markers[i];
        int32_t nt = qm->Topics_count < 0 ? 0 : qm->Topics_count;
        wm_topic_out *to = nt ? kp_arena_alloc(&r->arena, (size_t)nt * sizeof *to) : NULL;
        if (nt && !to) {
            free(h);
            return BK_CLOSE;
        }
        mo[i] = (wm_marker_out){ .ProducerId = qm->ProducerId, .Topics = to,
                                 .Topics_count = nt };
        for (int32_t t = 0; t < nt; t++) {
            const kp_WriteTxnMarkersRequest_WritableTxnMarkerTopic *qt = &qm->Topics[t];
            int32_t np = qt->PartitionIndexes_count < 0 ? 0 : qt->PartitionIndexes_count;
            wm_part_out *po = np ? kp_arena_alloc(&r->arena, (size_t)np * sizeof *po) : NULL;
            if (np && !po) {
                free(h);
                return BK_CLOSE;
            }
            to[t] = (wm_topic_out){ .Name = qt->Name, .Partitions = po,
                                    .Partitions_count = np };
            bool offsets = kp_str_eq(qt->Name, WM_OFFSETS_TOPIC);
            size_t len = qt->Name.len < 0 ? 0 : (size_t)qt->Name.len;
            char *name = kp_arena_alloc(&r->arena, len + 1);
            if (!name) {
                free(h);
                return BK_CLOSE;
            }
            memcpy(name, qt->Name.p, len);
            name[len] = 0;
            for (int32_t p = 0; p < np; p++, k++) {
                po[p] = (wm_part_out){ .PartitionIndex = qt->PartitionIndexes[p] };
                h->parts[k] = (wm_part){
                    .h = h, .out = &po[p], .offsets = offsets,
                    .partition = qt->PartitionIndexes[p], .producer_id = qm->ProducerId,
                    .producer_epoch = qm->ProducerEpoch, .commit = qm->TransactionResult,
                    .coordinator_epoch = qm->CoordinatorEpoch, .topic = name,
                };
            }
        }
    }
    if (n == 0) {
        wm_encode(r, h);
        free(h);
        return r->out->err ? BK_CLOSE : BK_RESPOND;
    }
    /* Every callback comes on a later loop turn (replica_txn.c M1), so the
     * request is deferred before any of them can finish it. */
    h->pending = n;
    r->state = h;
    r->cancel = wm_cancel;
    r->expire = NULL;              /* each marker has its own deadline */
    for (int i = 0; i < n; i++) {
        wm_part *wp = &h->parts[i];
        if (wp->offsets && !bk_cluster_mode(r->b))
            gc_txn_complete(r->b, wp->partition, wp->producer_id, wp->producer_epoch,
                            wp->commit, wm_offsets_done, wp);
        else
            replica_txn_write_marker(r->b, wp->topic, wp->partition, wp->producer_id,
                                     wp->producer_epoch, wp->commit, wp->coordinator_epoch,
                                     WM_TIMEOUT_MS, wm_marker_done, wp);
    }
    return BK_DEFER;
}
