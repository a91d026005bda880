/*
 * AlterPartitionReassignments v0 (API key 45) and ListPartitionReassignments
 * v0 (API key 46): what kafka-reassign-partitions --execute / --verify /
 * --cancel and the admin clients' alterPartitionReassignments send.
 *
 *   Alter:  TimeoutMs, Topics [Name, Partitions [PartitionIndex,
 *           Replicas (null: cancel)]]
 *           → ThrottleTimeMs, ErrorCode, ErrorMessage, Responses [Name,
 *             Partitions [PartitionIndex, ErrorCode, ErrorMessage]]
 *   List:   TimeoutMs, Topics (null: all) [Name, PartitionIndexes]
 *           → ThrottleTimeMs, ErrorCode, ErrorMessage, Topics [Name,
 *             Partitions [PartitionIndex, Replicas, AddingReplicas,
 *             RemovingReplicas]]
 *
 * Any broker serves both (daemon/cluster/cluster_reassign.c says why): Alter writes the
 * topic znodes and answers once this broker's mirror shows them, one
 * write per topic; List reads the mirror.  The per-partition checks and
 * their errors are cl_partitions_reassign_request's.  A List naming a partition
 * that is not being reassigned leaves it out, as Kafka does.
 */
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/api/api_topic_wait.h"
#include "kp_msgs.h"

#include <stdio.h>
#include <string.h>

typedef kp_AlterPartitionReassignmentsResponse_ReassignableTopicResponse ra_topic;
typedef kp_AlterPartitionReassignmentsResponse_ReassignablePartitionResponse ra_part;

typedef struct ra_answer {
    bk_req *r;
    kp_AlterPartitionReassignmentsResponse m;
    bk_reassign **parts;             /* [topic][partition]: each part's own check */
} ra_answer;

static kp_str arena_str(bk_req *r, const char *s)
{
    size_t n = strlen(s);
    char *p = kp_arena_alloc(&r->arena, n + 1);
    if (!p)
        return KP_STR_NULL;
    memcpy(p, s, n + 1);
    return (kp_str){ p, (int32_t)n };
}

/* Topic i's write answered: every partition that passed its check gets it. */
static void ra_result(void *ctx, int32_t i, int rc, const char *err)
{
    ra_answer *a = ctx;
    ra_topic *mt = &a->m.Responses[i];
    for (int32_t j = 0; j < mt->Partitions_count; j++) {
        const bk_reassign *ra = &a->parts[i][j];
        ra_part *mp = &mt->Partitions[j];
        mp->ErrorCode = ra->error != KP_NONE ? ra->error : (int16_t)rc;
        const char *msg = ra->error != KP_NONE ? ra->msg : rc != KP_NONE ? err : "";
        mp->ErrorMessage = msg[0] ? arena_str(a->r, msg) : KP_STR_NULL;
    }
}

static void ra_finish(void *ctx)
{
    ra_answer *a = ctx;
    kp_enc_AlterPartitionReassignmentsResponse(a->r->out, a->r->hdr.RequestApiVersion, &a->m);
}

int api_handle_alter_partition_reassignments(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_AlterPartitionReassignmentsRequest q;
    if (kp_dec_AlterPartitionReassignmentsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_ALTER)) {       /* Kafka: the whole request */
        kp_AlterPartitionReassignmentsResponse m;
        kp_init_AlterPartitionReassignmentsResponse(&m);
        m.ErrorCode = KP_CLUSTER_AUTHORIZATION_FAILED;
        kp_enc_AlterPartitionReassignmentsResponse(r->out, v, &m);
        return BK_RESPOND;
    }
    int32_t n = q.Topics_count > 0 ? q.Topics_count : 0;
    ra_answer *a = kp_arena_alloc(&r->arena, sizeof *a);
    if (!a)
        return BK_CLOSE;
    a->r = r;
    kp_init_AlterPartitionReassignmentsResponse(&a->m);
    a->m.Responses = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) * sizeof(ra_topic));
    a->parts = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) * sizeof *a->parts);
    if (!a->m.Responses || !a->parts)
        return BK_CLOSE;
    a->m.Responses_count = n;
    for (int32_t i = 0; i < n; i++) {
        const kp_AlterPartitionReassignmentsRequest_ReassignableTopic *qt = &q.Topics[i];
        int32_t np = qt->Partitions_count > 0 ? qt->Partitions_count : 0;
        ra_topic *mt = &a->m.Responses[i];
        mt->Name = qt->Name;
        mt->Partitions_count = np;
        mt->Partitions = kp_arena_alloc(&r->arena, (size_t)(np ? np : 1) * sizeof(ra_part));
        a->parts[i] = kp_arena_alloc(&r->arena, (size_t)(np ? np : 1) * sizeof(bk_reassign));
        if (!mt->Partitions || !a->parts[i])
            return BK_CLOSE;
        for (int32_t j = 0; j < np; j++) {
            mt->Partitions[j] = (ra_part){ qt->Partitions[j].PartitionIndex, KP_NONE,
                                           KP_STR_NULL };
            a->parts[i][j] = (bk_reassign){
                .partition = qt->Partitions[j].PartitionIndex,
                .replicas = qt->Partitions[j].Replicas,
                .nreplicas = qt->Partitions[j].Replicas_count,
            };
        }
    }
    bk_topic_wait *w = api_topic_wait_new(r, q.TimeoutMs, ra_result, ra_finish, a);
    if (!w)
        return BK_CLOSE;
    for (int32_t i = 0; i < n; i++) {
        char name[MD_TOPIC_NAME_MAX + 1], err[256];
        const kp_str *tn = &q.Topics[i].Name;
        int32_t len = tn->len > 0 && tn->len <= MD_TOPIC_NAME_MAX ? tn->len : 0;
        memcpy(name, tn->p ? tn->p : "", (size_t)len);
        name[len] = 0;
        int rc = cl_partitions_reassign_request(r->b, name, a->parts[i], a->m.Responses[i].Partitions_count,
                                        api_topic_wait_op(w, i), err, sizeof err);
        api_topic_wait_result(w, i, rc, err);
    }
    return api_topic_wait_start(w);
}

/* ---- ListPartitionReassignments ------------------------------------------------------- */

typedef kp_ListPartitionReassignmentsResponse_OngoingTopicReassignment lr_topic;
typedef kp_ListPartitionReassignmentsResponse_OngoingPartitionReassignment lr_part;

/* Partition p of t into mp when it is being reassigned; -1 out of arena,
 * 0 not reassigning, 1 filled. */
static int lr_fill(bk_req *r, const bk_topic *t, int32_t p, lr_part *mp)
{
    if (p < 0 || p >= t->npartitions)
        return 0;
    const bk_pview *v = &t->parts[p];
    if (!v->adding && !v->removing)
        return 0;
    int32_t *ids = kp_arena_alloc(&r->arena, 3 * MD_REPLICAS_MAX * sizeof *ids);
    if (!ids)
        return -1;
    memcpy(ids, v->replicas, (size_t)v->nreplicas * sizeof *ids);
    *mp = (lr_part){
        .PartitionIndex = p, .Replicas = ids, .Replicas_count = v->nreplicas,
        .AddingReplicas = ids + MD_REPLICAS_MAX,
        .AddingReplicas_count = cl_reassign_ids(v, true, ids + MD_REPLICAS_MAX),
        .RemovingReplicas = ids + 2 * MD_REPLICAS_MAX,
        .RemovingReplicas_count = cl_reassign_ids(v, false, ids + 2 * MD_REPLICAS_MAX),
    };
    return 1;
}

/* The reassigning partitions of t among ps[0..n) (ps NULL: all) as one
 * more entry of m, when there are any.  -1: out of arena. */
static int lr_topic_add(bk_req *r, const bk_topic *t, const int32_t *ps, int32_t n,
                        kp_ListPartitionReassignmentsResponse *m)
{
    lr_topic *mt = &m->Topics[m->Topics_count];
    mt->Name = (kp_str){ t->name, (int32_t)strlen(t->name) };
    mt->Partitions = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) * sizeof(lr_part));
    if (!mt->Partitions)
        return -1;
    mt->Partitions_count = 0;
    for (int32_t i = 0; i < n; i++) {
        int rc = lr_fill(r, t, ps ? ps[i] : i, &mt->Partitions[mt->Partitions_count]);
        if (rc < 0)
            return -1;
        mt->Partitions_count += rc;
    }
    if (mt->Partitions_count > 0)
        m->Topics_count++;
    return 0;
}

struct lr_all { bk_req *r; kp_ListPartitionReassignmentsResponse *m; int32_t cap; bool oom; };

static void lr_all_cb(bk_topic *t, void *arg)
{
    struct lr_all *a = arg;
    if (!a->oom && a->m->Topics_count < a->cap &&
        lr_topic_add(a->r, t, NULL, t->npartitions, a->m) != 0)
        a->oom = true;
}

int api_handle_list_partition_reassignments(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_ListPartitionReassignmentsRequest q;
    if (kp_dec_ListPartitionReassignmentsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_ListPartitionReassignmentsResponse m;
    kp_init_ListPartitionReassignmentsResponse(&m);
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_DESCRIBE)) {
        m.ErrorCode = KP_CLUSTER_AUTHORIZATION_FAILED;
        kp_enc_ListPartitionReassignmentsResponse(r->out, v, &m);
        return BK_RESPOND;
    }
    int32_t cap = q.Topics_count < 0 ? (int32_t)r->b->ntopics : q.Topics_count;
    m.Topics = kp_arena_alloc(&r->arena, (size_t)(cap ? cap : 1) * sizeof(lr_topic));
    if (!m.Topics)
        return BK_CLOSE;
    m.Topics_count = 0;
    if (q.Topics_count < 0) {
        struct lr_all a = { r, &m, cap, false };
        view_topics_foreach(r->b, lr_all_cb, &a);
        if (a.oom)
            return BK_CLOSE;
    }
    for (int32_t i = 0; i < q.Topics_count; i++) {
        const kp_ListPartitionReassignmentsRequest_ListPartitionReassignmentsTopics *qt =
            &q.Topics[i];
        bk_topic *t = qt->Name.p ? view_topic_find(r->b, qt->Name.p, (size_t)qt->Name.len)
                                 : NULL;
        if (t && lr_topic_add(r, t, qt->PartitionIndexes,
                              qt->PartitionIndexes_count > 0 ? qt->PartitionIndexes_count : 0,
                              &m) != 0)
            return BK_CLOSE;
    }
    kp_enc_ListPartitionReassignmentsResponse(r->out, v, &m);
    return BK_RESPOND;
}
