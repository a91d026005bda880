/*
 * daemon/api/api_describe_producers.c — DescribeProducers (API key 61),
 * v0 (KIP-664, what `kafka-transactions.sh describe-producers` asks):
 * per partition led here, the producers its state remembers
 * (replica_producers.h), as Kafka's ProducerStateManager.activeProducers:
 *
 *   no READ on the topic           TOPIC_AUTHORIZATION_FAILED
 *   unknown topic or partition     UNKNOWN_TOPIC_OR_PARTITION
 *   not the leader                 NOT_LEADER_OR_FOLLOWER
 *   else                           ActiveProducers: id, epoch, last
 *                                  sequence and timestamp (-1 when no
 *                                  batch is remembered, as after a
 *                                  marker with a new epoch), coordinator
 *                                  epoch, current transaction's first
 *                                  offset (-1: none open)
 *   a (topic, partition) listed again  INVALID_REQUEST, no producers
 *
 * Kafka answers every listed index, a repeat with its producers again;
 * its admin client never repeats one (it asks a set of partitions).  Here
 * a repeat is refused as Kafka refuses repeated resources elsewhere
 * ("Duplicate topic in request."): answering it in full would copy every
 * producer of the partition once per repeat, a 1 MB request naming one
 * partition 250k times costing gigabytes.  So the memory stays a small
 * multiple of the request plus one copy of each partition's producers.
 */
#include "daemon/replica/replica.h"
#include "daemon/request.h"
#include "daemon/security/sec_authz.h"
#include "daemon/view/view.h"
#include "kp_msgs.h"

#include <stdlib.h>

typedef kp_DescribeProducersResponse_TopicResponse dp_topic_out;
typedef kp_DescribeProducersResponse_PartitionResponse dp_part_out;
typedef kp_DescribeProducersResponse_ProducerState dp_producer_out;

/* Fills po for one partition.  0, or -1 when the arena is out of memory. */
static int dp_partition(bk_req *r, kp_str topic, bool allowed, dp_part_out *po)
{
    bk_partition *p = NULL;
    po->ErrorCode = allowed ? (int16_t)view_leader_replica(r->b, topic, po->PartitionIndex, &p)
                            : KP_TOPIC_AUTHORIZATION_FAILED;
    if (po->ErrorCode != KP_NONE || !p->producers)
        return 0;
    const bk_pstate *ps = p->producers;
    dp_producer_out *out = ps->n ? kp_arena_alloc(&r->arena, ps->n * sizeof *out) : NULL;
    if (ps->n && !out)
        return -1;
    int32_t k = 0;
    for (uint32_t i = 0; i < ps->cap; i++) {
        const bk_producer *e = ps->slots[i];
        if (!e)
            continue;
        const bk_pbatch *last = e->n > 0 ? &e->batches[e->head] : NULL;
        out[k++] = (dp_producer_out){
            .ProducerId = e->pid,
            .ProducerEpoch = e->epoch,
            .LastSequence = last ? last->last_seq : -1,
            .LastTimestamp = last ? last->timestamp : -1,
            .CoordinatorEpoch = e->coord_epoch,
            .CurrentTxnStartOffset = e->txn_first,
        };
    }
    po->ActiveProducers = out;
    po->ActiveProducers_count = k;
    return 0;
}

/* One listed index: where it sits in the request, to find repeats. */
typedef struct dp_ref {
    kp_str topic;
    int32_t partition;
    dp_part_out *out;              /* request order: &parts[t][i] grows with it */
} dp_ref;

static int dp_ref_cmp(const void *x, const void *y)
{
    const dp_ref *a = x, *b = y;
    int c = kp_str_cmp(a->topic, b->topic);
    if (c)
        return c;
    if (a->partition != b->partition)
        return (a->partition > b->partition) - (a->partition < b->partition);
    return (a->out > b->out) - (a->out < b->out);
}

/* Marks every (topic, partition) listed before (INVALID_REQUEST): after
 * the sort, each run of one pair keeps its first in request order. */
static void dp_mark_repeats(dp_ref *refs, size_t n)
{
    qsort(refs, n, sizeof *refs, dp_ref_cmp);
    for (size_t k = 1; k < n; k++)
        if (refs[k].partition == refs[k - 1].partition &&
            kp_str_cmp(refs[k].topic, refs[k - 1].topic) == 0)
            refs[k].out->ErrorCode = KP_INVALID_REQUEST;
}

int api_handle_describe_producers(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_DescribeProducersRequest q;
    if (kp_dec_DescribeProducersRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_DescribeProducersResponse m;
    kp_init_DescribeProducersResponse(&m);
    int32_t nt = q.Topics_count < 0 ? 0 : q.Topics_count;
    dp_topic_out *topics = nt ? kp_arena_alloc(&r->arena, (size_t)nt * sizeof *topics) : NULL;
    if (nt && !topics)
        return BK_CLOSE;
    size_t nall = 0;
    for (int32_t t = 0; t < nt; t++)
        nall += q.Topics[t].PartitionIndexes_count < 0 ? 0 : (size_t)q.Topics[t].PartitionIndexes_count;
    /* One array for all partitions, in request order (dp_ref_cmp). */
    dp_part_out *all = nall ? bk_req_alloc(r, nall, sizeof *all) : NULL;
    dp_ref *refs = nall ? bk_req_alloc(r, nall, sizeof *refs) : NULL;
    if (nall && (!all || !refs))
        return BK_CLOSE;
    size_t k = 0;
    for (int32_t t = 0; t < nt; t++) {
        const kp_DescribeProducersRequest_TopicRequest *qt = &q.Topics[t];
        int32_t np = qt->PartitionIndexes_count < 0 ? 0 : qt->PartitionIndexes_count;
        topics[t] = (dp_topic_out){ .Name = qt->Name, .Partitions = np ? &all[k] : NULL,
                                    .Partitions_count = np };
        for (int32_t i = 0; i < np; i++, k++) {
            all[k] = (dp_part_out){ .PartitionIndex = qt->PartitionIndexes[i],
                                    .ErrorMessage = { NULL, -1 } };
            refs[k] = (dp_ref){ .topic = qt->Name, .partition = qt->PartitionIndexes[i],
                                .out = &all[k] };
        }
    }
    if (nall > 1)
        dp_mark_repeats(refs, nall);
    for (int32_t t = 0; t < nt; t++) {
        dp_part_out *parts = topics[t].Partitions;
        bool allowed = sec_authorized(r, BK_RES_TOPIC, topics[t].Name, BK_OP_READ);
        for (int32_t i = 0; i < topics[t].Partitions_count; i++)
            if (parts[i].ErrorCode == KP_NONE &&
                dp_partition(r, topics[t].Name, allowed, &parts[i]) != 0)
                return BK_CLOSE;
    }
    m.Topics = topics;
    m.Topics_count = nt;
    kp_enc_DescribeProducersResponse(r->out, v, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}
