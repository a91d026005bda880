/*
 * Metadata v0-5: brokers, controller, topics and partition leaders.
 *
 * Topic auto-creation happens here, as in Kafka: a named topic that does
 * not exist is created with num.partitions / default.replication.factor
 * when auto.create.topics.enable is on and the request allows it (v4+
 * AllowAutoTopicCreation; always allowed below v4).  Creation is
 * synchronous, so the new topic is answered with its leaders at once.
 */
#include "daemon/cluster.h"
#include "daemon/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void write_topic(bk_req *r, int16_t v, bk_topic *t)
{
    kp_buf *o = r->out;
    kp_wr_i16(o, KP_NONE);
    kp_wr_string(o, t->name, -1);
    if (v >= 1)
        kp_wr_bool(o, false);                       /* IsInternal */
    kp_wr_array(o, t->npartitions);
    for (int32_t i = 0; i < t->npartitions; i++) {
        const bk_pview *pv = &t->parts[i];
        int32_t leader = bk_leader_of(r->b, t, i);
        /* Kafka answers LEADER_NOT_AVAILABLE for a partition without a
         * live leader, with its replicas still listed. */
        bool led = leader >= 0 && bk_broker_alive(r->b, leader);
        kp_wr_i16(o, led ? KP_NONE : KP_LEADER_NOT_AVAILABLE);
        kp_wr_i32(o, i);                            /* PartitionIndex */
        kp_wr_i32(o, led ? leader : -1);            /* LeaderId */
        kp_wr_array(o, pv->nreplicas);              /* ReplicaNodes */
        for (int32_t j = 0; j < pv->nreplicas; j++)
            kp_wr_i32(o, pv->replicas[j]);
        kp_wr_array(o, pv->nisr);                   /* IsrNodes */
        for (int32_t j = 0; j < pv->nisr; j++)
            kp_wr_i32(o, pv->isr[j]);
        if (v >= 5) {                               /* OfflineReplicas */
            int32_t off = 0;
            for (int32_t j = 0; j < pv->nreplicas; j++)
                off += !bk_broker_alive(r->b, pv->replicas[j]);
            kp_wr_array(o, off);
            for (int32_t j = 0; j < pv->nreplicas; j++)
                if (!bk_broker_alive(r->b, pv->replicas[j]))
                    kp_wr_i32(o, pv->replicas[j]);
        }
    }
}

static void write_topic_error(kp_buf *o, int16_t v, kp_str name, int16_t err)
{
    kp_wr_i16(o, err);
    kp_wr_str(o, name);
    if (v >= 1)
        kp_wr_bool(o, false);
    kp_wr_array(o, 0);
}

static void write_all(bk_topic *t, void *arg)
{
    bk_req *r = arg;
    write_topic(r, r->hdr.RequestApiVersion, t);
}

int bk_handle_metadata(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_rd *in = &r->body;
    bk_broker *b = r->b;
    int32_t ntopics = kp_rd_array(in, 2);
    /* Names point into the request frame, which outlives this call. */
    kp_str names_small[64], *names = names_small;
    kp_str *heap = NULL;
    if (ntopics > 64) {
        heap = malloc((size_t)ntopics * sizeof *heap);
        if (!heap)
            return BK_CLOSE;
        names = heap;
    }
    for (int32_t i = 0; i < ntopics; i++)
        names[i] = kp_rd_string(in);
    bool allow_auto = true;
    if (v >= 4)
        allow_auto = kp_rd_bool(in);
    if (!kp_rd_ok(in)) {
        free(heap);
        return BK_CLOSE;
    }
    bool all = ntopics < 0 || (v == 0 && ntopics == 0);

    kp_buf *o = r->out;
    if (v >= 3)
        kp_wr_i32(o, 0);                            /* ThrottleTimeMs */
    kp_wr_array(o, 1);                              /* Brokers */
    kp_wr_i32(o, b->cfg->broker_id);
    kp_wr_string(o, b->cfg->advertised_host, -1);
    kp_wr_i32(o, b->cfg->advertised_port);
    if (v >= 1)
        kp_wr_string(o, b->cfg->rack[0] ? b->cfg->rack : NULL, -1);
    if (v >= 2)
        kp_wr_string(o, bk_cluster_id(b), -1);      /* ClusterId */
    if (v >= 1)
        kp_wr_i32(o, bk_controller_id(b));

    if (all) {
        kp_wr_array(o, (int32_t)b->ntopics);
        bk_topics_foreach(b, write_all, r);
        free(heap);
        return BK_RESPOND;
    }
    kp_wr_array(o, ntopics);
    for (int32_t i = 0; i < ntopics; i++) {
        kp_str n = names[i];
        if (n.len < 0) {
            write_topic_error(o, v, n, KP_INVALID_TOPIC_EXCEPTION);
            continue;
        }
        bk_topic *t = bk_topic_find(b, n.p, (size_t)n.len);
        if (!t && allow_auto && b->cfg->auto_create_topics_enable) {
            char name[MD_TOPIC_NAME_MAX + 2], err[MD_ERRLEN];
            if (n.len > MD_TOPIC_NAME_MAX ||
                md_topic_name_check(n.p, (size_t)n.len, err, sizeof err) != KP_NONE) {
                write_topic_error(o, v, n, KP_INVALID_TOPIC_EXCEPTION);
                continue;
            }
            kp_str_copy(n, name, sizeof name);
            int rc = bk_topic_create(b, name, b->cfg->num_partitions,
                                     b->cfg->default_replication_factor, NULL,
                                     NULL, 0, false, err, sizeof err);
            if (rc != KP_NONE && rc != KP_TOPIC_ALREADY_EXISTS) {
                BK_WARN("auto-creating topic %s failed: %s", name, err);
                write_topic_error(o, v, n, rc > 0 ? (int16_t)rc : KP_UNKNOWN_SERVER_ERROR);
                continue;
            }
            t = bk_topic_find(b, n.p, (size_t)n.len);
        }
        if (!t) {
            write_topic_error(o, v, n, KP_UNKNOWN_TOPIC_OR_PARTITION);
            continue;
        }
        write_topic(r, v, t);
    }
    free(heap);
    return BK_RESPOND;
}
