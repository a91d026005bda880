/*
 * ElectLeaders v0-2 (API key 43): what kafka-leader-election
 * --election-type PREFERRED sends, to the controller.
 *
 *   Request:  ElectionType (v1+), TopicPartitions [Topic, Partitions]
 *             (null: every partition), TimeoutMs
 *   Response: ThrottleTimeMs, ErrorCode (v1+), ReplicaElectionResults
 *             [Topic, PartitionResult [PartitionId, ErrorCode, ErrorMessage]]
 *
 * Per partition (daemon/cl_leaders.c ctl_elect_preferred): NONE when the
 * preferred replica was chosen, ELECTION_NOT_NEEDED when it leads already,
 * PREFERRED_LEADER_NOT_AVAILABLE when it is not alive or not in the ISR.
 * A broker that is not the controller answers NOT_CONTROLLER (the admin
 * client then asks the controller), as Kafka's do.  Standalone, the one
 * broker leads everything: ELECTION_NOT_NEEDED.  UNCLEAN elections are
 * refused with INVALID_REQUEST until unclean election exists.
 *
 * The answer goes out once the elections are decided and their state
 * writes queued, not after ZooKeeper confirmed them: a client sees the
 * new leader in Metadata a few milliseconds later.  For a null partition
 * list, partitions that need no election are left out, as in Kafka.
 */
#include "daemon/cl.h"
#include "daemon/authz.h"
#include "daemon/request.h"
#include "kp_msgs.h"

#include <string.h>

#define ELECTION_PREFERRED 0
#define ELECTION_UNCLEAN 1

typedef kp_ElectLeadersResponse_ReplicaElectionResult elect_topic;
typedef kp_ElectLeadersResponse_PartitionResult elect_part;

static int16_t elect_one(bk_req *r, int8_t type, const char *topic, int32_t p,
                         kp_str *msg)
{
    bk_broker *b = r->b;
    *msg = KP_STR_NULL;
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_ALTER))
        return KP_CLUSTER_AUTHORIZATION_FAILED;
    bk_topic *t = bk_topic_find(b, topic, strlen(topic));
    if (!t || p < 0 || p >= t->npartitions)
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    if (type != ELECTION_PREFERRED) {
        static const char why[] = "Only PREFERRED leader elections are served.";
        *msg = (kp_str){ why, (int32_t)sizeof why - 1 };
        return KP_INVALID_REQUEST;
    }
    if (!bk_cluster_mode(b))
        return KP_ELECTION_NOT_NEEDED;
    return (int16_t)ctl_elect_preferred(b, topic, p);
}

/* Fills mt for topic's partitions ps[0..n) (ps NULL: all of them);
 * skip_unneeded drops ELECTION_NOT_NEEDED results.  -1: out of arena. */
static int elect_topic_fill(bk_req *r, int8_t type, const char *topic, const int32_t *ps,
                            int32_t n, bool skip_unneeded, elect_topic *mt)
{
    mt->PartitionResult = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) * sizeof(elect_part));
    if (!mt->PartitionResult)
        return -1;
    mt->PartitionResult_count = 0;
    for (int32_t i = 0; i < n; i++) {
        elect_part *mp = &mt->PartitionResult[mt->PartitionResult_count];
        mp->PartitionId = ps ? ps[i] : i;
        mp->ErrorCode = elect_one(r, type, topic, mp->PartitionId, &mp->ErrorMessage);
        if (!(skip_unneeded && mp->ErrorCode == KP_ELECTION_NOT_NEEDED))
            mt->PartitionResult_count++;
    }
    if (bk_cluster_mode(r->b))
        ctl_reconcile(r->b, topic);               /* carries out what was marked */
    return 0;
}

struct all_arg { bk_req *r; int8_t type; kp_ElectLeadersResponse *m; int32_t cap; bool oom; };

static void elect_all_cb(bk_topic *t, void *arg)
{
    struct all_arg *a = arg;
    if (a->oom || a->m->ReplicaElectionResults_count >= a->cap)
        return;
    elect_topic *mt = &a->m->ReplicaElectionResults[a->m->ReplicaElectionResults_count];
    mt->Topic = (kp_str){ t->name, (int32_t)strlen(t->name) };
    if (elect_topic_fill(a->r, a->type, t->name, NULL, t->npartitions, true, mt) != 0)
        a->oom = true;
    else if (mt->PartitionResult_count > 0)
        a->m->ReplicaElectionResults_count++;
}

int bk_handle_elect_leaders(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_ElectLeadersRequest q;
    if (kp_dec_ElectLeadersRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    int8_t type = v >= 1 ? q.ElectionType : ELECTION_PREFERRED;
    kp_ElectLeadersResponse m;
    kp_init_ElectLeadersResponse(&m);
    bool not_controller = bk_cluster_mode(r->b) && !(r->b->cl && r->b->cl->active);
    if (not_controller && v >= 1)
        m.ErrorCode = KP_NOT_CONTROLLER;
    if (v >= 1 && !BK_AUTHZ_CLUSTER(r, BK_OP_ALTER))
        m.ErrorCode = KP_CLUSTER_AUTHORIZATION_FAILED;
    if (q.TopicPartitions_count < 0) {
        int32_t cap = (int32_t)r->b->ntopics;
        m.ReplicaElectionResults = kp_arena_alloc(&r->arena,
                                                  (size_t)(cap ? cap : 1) * sizeof(elect_topic));
        if (!m.ReplicaElectionResults)
            return BK_CLOSE;
        m.ReplicaElectionResults_count = 0;
        if (!not_controller) {
            struct all_arg a = { r, type, &m, cap, false };
            bk_topics_foreach(r->b, elect_all_cb, &a);
            if (a.oom)
                return BK_CLOSE;
        }
        kp_enc_ElectLeadersResponse(r->out, v, &m);
        return BK_RESPOND;
    }
    m.ReplicaElectionResults_count = q.TopicPartitions_count;
    m.ReplicaElectionResults = kp_arena_alloc(
        &r->arena, (size_t)(q.TopicPartitions_count ? q.TopicPartitions_count : 1) *
                   sizeof(elect_topic));
    if (!m.ReplicaElectionResults)
        return BK_CLOSE;
    for (int32_t t = 0; t < q.TopicPartitions_count; t++) {
        const kp_ElectLeadersRequest_TopicPartitions *qt = &q.TopicPartitions[t];
        elect_topic *mt = &m.ReplicaElectionResults[t];
        mt->Topic = qt->Topic;
        int32_t n = qt->Partitions_count > 0 ? qt->Partitions_count : 0;
        if (not_controller) {
            mt->PartitionResult = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) *
                                                 sizeof(elect_part));
            if (!mt->PartitionResult)
                return BK_CLOSE;
            mt->PartitionResult_count = n;
            for (int32_t i = 0; i < n; i++)
                mt->PartitionResult[i] = (elect_part){ qt->Partitions[i], KP_NOT_CONTROLLER,
                                                       KP_STR_NULL };
            continue;
        }
        char name[MD_TOPIC_NAME_MAX + 1];
        int32_t len = qt->Topic.len > 0 && qt->Topic.len <= MD_TOPIC_NAME_MAX ? qt->Topic.len : 0;
        memcpy(name, qt->Topic.p ? qt->Topic.p : "", (size_t)len);
        name[len] = 0;
        if (elect_topic_fill(r, type, name, qt->Partitions, n, false, mt) != 0)
            return BK_CLOSE;
    }
    kp_enc_ElectLeadersResponse(r->out, v, &m);
    return BK_RESPOND;
}
