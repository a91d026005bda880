/*
 * Metadata v0-12: brokers, controller, topics and partition leaders.
 *
 * Versions: v1 null topic list = all (v0: empty = all); v4
 * AllowAutoTopicCreation; v5 OfflineReplicas; v7 LeaderEpoch (the partition
 * state's, as Kafka: also for a partition without a live leader; clients
 * send it back as CurrentLeaderEpoch, which Fetch and ListOffsets check);
 * v8 authorized operations (INT32_MIN: not asked for; the cluster's
 * only up to v10), Kafka's bit per allowed operation (sec_authorized_ops);
 * v9+ flexible; v10+ each topic's TopicId; v12 a requested topic may be
 * named by its TopicId alone (null Name), as Kafka answers it: an unknown
 * id gets UNKNOWN_TOPIC_ID with a null name.  Below v12 a topic id in the
 * request, or a null name, is INVALID_REQUEST for that topic (Kafka
 * refuses the request so).
 *
 * Request and response go through the generated codec (kp_msgs.h): the
 * handler fills kp_MetadataResponse and kp_enc_MetadataResponse writes the
 * bytes for the request's version.  The response's arrays live in the
 * request's arena (r->arena, reset when the request is done); replica and
 * ISR lists point straight at the cluster view, which does not change
 * while the handler runs.
 *
 * Topic auto-creation happens here, as in Kafka: a named topic that does
 * not exist is created with num.partitions / default.replication.factor
 * when auto.create.topics.enable is on and the request allows it (v4+
 * AllowAutoTopicCreation; always allowed below v4).  Metadata does not
 * wait for the creation (op NULL): standalone it is complete when
 * view_topic_create returns, so the new topic is answered with its leaders
 * at once; in cluster mode the topic appears in the view once the store
 * confirms it, and until then it is answered LEADER_NOT_AVAILABLE, as
 * Kafka answers a topic it has just started creating (clients retry).
 *
 * With the authorizer on (daemon/security/sec_authz.c), as Kafka: a listing of all
 * topics leaves out those the principal may not DESCRIBE; a named one it
 * may not describe, or would auto-create without CREATE on the cluster or
 * the topic, is answered TOPIC_AUTHORIZATION_FAILED (one asked for by its
 * id with a null name).
 */
#include "daemon/view/view.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/security/sec_peer.h"
#include "kp_msgs.h"

#include <stdio.h>
#include <string.h>

typedef kp_MetadataResponse_MetadataResponseTopic md_topic_out;
typedef kp_MetadataResponse_MetadataResponsePartition md_part_out;

/* Fills one topic's answer.  false: out of arena memory. */
static bool fill_topic(bk_req *r, int16_t v, bk_topic *t, md_topic_out *o)
{
    o->ErrorCode = KP_NONE;
    o->Name = kp_str_cstr(t->name);
    o->IsInternal = t->internal;
    if (v >= 10)
        memcpy(o->TopicId, t->id, 16);
    o->Partitions_count = t->npartitions;
    if (t->npartitions == 0)
        return true;
    md_part_out *ps = kp_arena_alloc(&r->arena, (size_t)t->npartitions * sizeof *ps);
    if (!ps)
        return false;
    o->Partitions = ps;
    for (int32_t i = 0; i < t->npartitions; i++) {
        bk_pview *pv = &t->parts[i];
        md_part_out *po = &ps[i];
        int32_t leader = view_leader_of(r->b, t, i);
        /* Kafka answers LEADER_NOT_AVAILABLE for a partition without a
         * live leader, with its replicas still listed. */
        bool led = leader >= 0 && view_broker_alive(r->b, leader);
        po->ErrorCode = led ? KP_NONE : KP_LEADER_NOT_AVAILABLE;
        po->PartitionIndex = i;
        po->LeaderId = led ? leader : -1;
        /* v7+; below, the codec refuses a field the version lacks unless
         * it holds its default */
        po->LeaderEpoch = v >= 7 ? pv->leader_epoch : -1;
        po->ReplicaNodes = pv->replicas;
        po->ReplicaNodes_count = pv->nreplicas;
        po->IsrNodes = pv->isr;
        po->IsrNodes_count = pv->nisr;
        if (v < 5)                                  /* OfflineReplicas: v5+ */
            continue;
        int32_t off = 0;
        for (int32_t j = 0; j < pv->nreplicas; j++)
            off += !view_broker_alive(r->b, pv->replicas[j]);
        if (off == 0)
            continue;
        int32_t *ids = kp_arena_alloc(&r->arena, (size_t)off * sizeof *ids);
        if (!ids)
            return false;
        po->OfflineReplicas = ids;
        po->OfflineReplicas_count = off;
        for (int32_t j = 0, k = 0; j < pv->nreplicas; j++)
            if (!view_broker_alive(r->b, pv->replicas[j]))
                ids[k++] = pv->replicas[j];
    }
    return true;
}

static void fill_error(md_topic_out *o, kp_str name, int16_t err)
{
    o->ErrorCode = err;
    o->Name = name;
}

typedef struct fill_all_ctx {
    bk_req *r;
    md_topic_out *topics;
    int32_t n, cap;
    bool ok;
} fill_all_ctx;

static void fill_all(bk_topic *t, void *arg)
{
    fill_all_ctx *c = arg;
    if (c->n >= c->cap || !sec_authorized(c->r, BK_RES_TOPIC, kp_str_cstr(t->name), BK_OP_DESCRIBE))
        return;                       /* left out, as Kafka lists only what one may see */
    c->ok &= fill_topic(c->r, c->r->hdr.RequestApiVersion, t, &c->topics[c->n++]);
}

/* A named topic: found, auto-created, or answered with its error. */
static bool fill_named(bk_req *r, int16_t v, bool allow_auto,
                       const kp_MetadataRequest_MetadataRequestTopic *qt, md_topic_out *o)
{
    static const uint8_t zero[16];
    bk_broker *b = r->b;
    kp_str n = qt->Name;
    bool by_id = memcmp(qt->TopicId, zero, 16) != 0;
    if (v < 12 && (by_id || n.len < 0)) {
        fill_error(o, n.len < 0 ? KP_STR_NULL : n, KP_INVALID_REQUEST);
        return true;
    }
    if (by_id || n.len < 0) {
        bk_topic *t = view_topic_find_id(b, qt->TopicId);
        bool unknown = !t || (n.len >= 0 && kp_str_cmp(n, kp_str_cstr(t->name)) != 0);
        /* Kafka: an id is no secret, so one known but not to be described
         * is TOPIC_AUTHORIZATION_FAILED, its name left null. */
        if (unknown || !sec_authorized(r, BK_RES_TOPIC, kp_str_cstr(t->name), BK_OP_DESCRIBE)) {
            fill_error(o, KP_STR_NULL,
                       unknown ? KP_UNKNOWN_TOPIC_ID : KP_TOPIC_AUTHORIZATION_FAILED);
            memcpy(o->TopicId, qt->TopicId, 16);
            return true;
        }
        return fill_topic(r, v, t, o);
    }
    bk_topic *t = view_topic_find(b, n.p, (size_t)n.len);
    /* Kafka: DESCRIBE to see it, CREATE (cluster or topic) to auto-create. */
    if (!sec_authorized(r, BK_RES_TOPIC, n, BK_OP_DESCRIBE) ||
        (!t && allow_auto && b->cfg->auto_create_topics_enable &&
         !BK_AUTHZ_CLUSTER(r, BK_OP_CREATE) && !sec_authorized(r, BK_RES_TOPIC, n, BK_OP_CREATE))) {
        fill_error(o, n, KP_TOPIC_AUTHORIZATION_FAILED);
        return true;
    }
    if (!t && allow_auto && b->cfg->auto_create_topics_enable) {
        char name[MD_TOPIC_NAME_MAX + 2], err[MD_ERRLEN];
        if (n.len > MD_TOPIC_NAME_MAX ||
            md_topic_name_check(n.p, (size_t)n.len, err, sizeof err) != KP_NONE) {
            fill_error(o, n, KP_INVALID_TOPIC_EXCEPTION);
            return true;
        }
        kp_str_copy(n, name, sizeof name);
        const char *mirror_msg;
        if (bk_mirror_refuses(b, name, &mirror_msg)) {
            /* A mirror topic its link has not created yet (link.c K1):
             * the link makes it with the source's partitions; meanwhile
             * retriable, as a topic being created. */
            fill_error(o, n, KP_LEADER_NOT_AVAILABLE);
            return true;
        }
        int rc = view_topic_create(b, name, b->cfg->num_partitions,
                                 b->cfg->default_replication_factor, NULL,
                                 NULL, 0, false, NULL, err, sizeof err);
        if (rc != KP_NONE && rc != KP_TOPIC_ALREADY_EXISTS) {
            BK_WARN("auto-creating topic %s failed: %s", name, err);
            fill_error(o, n, rc > 0 ? (int16_t)rc : KP_UNKNOWN_SERVER_ERROR);
            return true;
        }
        t = view_topic_find(b, n.p, (size_t)n.len);
        if (!t) {                     /* being created: not in the view yet */
            fill_error(o, n, KP_LEADER_NOT_AVAILABLE);
            return true;
        }
    }
    if (!t) {
        fill_error(o, n, KP_UNKNOWN_TOPIC_OR_PARTITION);
        return true;
    }
    return fill_topic(r, v, t, o);
}

/* Kafka clients take every broker listed; a few is what this is for. */
#define BK_METADATA_MAX_BROKERS 1024

int api_handle_metadata(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    bk_broker *b = r->b;
    kp_MetadataRequest q;
    /* Names point into the request frame, which outlives this call. */
    if (kp_dec_MetadataRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    bool allow_auto = v < 4 || q.AllowAutoTopicCreation;
    bool all = q.Topics_count < 0 || (v == 0 && q.Topics_count == 0);

    kp_MetadataResponse m;
    kp_init_MetadataResponse(&m);
    bk_broker_info live[BK_METADATA_MAX_BROKERS];
    int nlive = view_brokers_info(b, net_conn_listener(r->conn), live, BK_METADATA_MAX_BROKERS);
    kp_MetadataResponse_MetadataResponseBroker *brokers =
        kp_arena_alloc(&r->arena, (size_t)(nlive ? nlive : 1) * sizeof *brokers);
    if (!brokers)
        return BK_CLOSE;
    for (int i = 0; i < nlive; i++)
        brokers[i] = (kp_MetadataResponse_MetadataResponseBroker){
            .NodeId = live[i].id, .Host = kp_str_cstr(live[i].host), .Port = live[i].port,
            .Rack = v >= 1 && live[i].rack ? kp_str_cstr(live[i].rack) : KP_STR_NULL,
        };
    m.Brokers = brokers;
    m.Brokers_count = nlive;
    if (v >= 2) {
        const char *cid = view_cluster_id(b);
        m.ClusterId = kp_str_cstr(cid);
    }
    if (v >= 1)
        m.ControllerId = view_controller_id(b);

    int32_t n = all ? (int32_t)b->ntopics : q.Topics_count;
    md_topic_out *topics = NULL;
    if (n > 0) {
        topics = kp_arena_alloc(&r->arena, (size_t)n * sizeof *topics);
        if (!topics)
            return BK_CLOSE;
        for (int32_t i = 0; i < n; i++)            /* JSON defaults */
            topics[i] = (md_topic_out){ .TopicAuthorizedOperations = INT32_MIN };
    }
    bool ok = true;
    if (all) {
        fill_all_ctx c = { r, topics, 0, n, true };
        view_topics_foreach(b, fill_all, &c);
        n = c.n;
        ok = c.ok;
    } else {
        for (int32_t i = 0; i < n && ok; i++)
            ok = fill_named(r, v, allow_auto, &q.Topics[i], &topics[i]);
    }
    if (!ok)
        return BK_CLOSE;                            /* out of memory */
    /* Kafka sets them on the topics the principal may describe (errors
     * such as UNKNOWN_TOPIC_OR_PARTITION included), not on the refused. */
    for (int32_t i = 0; v >= 8 && q.IncludeTopicAuthorizedOperations && i < n; i++) {
        md_topic_out *o = &topics[i];
        if (o->Name.len >= 0 && o->ErrorCode != KP_TOPIC_AUTHORIZATION_FAILED &&
            o->ErrorCode != KP_INVALID_REQUEST && o->ErrorCode != KP_UNKNOWN_TOPIC_ID)
            o->TopicAuthorizedOperations = sec_authorized_ops(r, BK_RES_TOPIC, o->Name);
    }
    m.ClusterAuthorizedOperations = v >= 8 && v <= 10 && q.IncludeClusterAuthorizedOperations
        ? sec_authorized_ops(r, BK_RES_CLUSTER, kp_str_cstr(BK_CLUSTER_NAME)) : INT32_MIN;
    m.Topics = topics;
    m.Topics_count = n;
    kp_enc_MetadataResponse(r->out, v, &m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}
