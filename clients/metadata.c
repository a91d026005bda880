/*
 * metadata.c — the handle's view of the cluster: brokers, the controller,
 * and for each topic the handle uses, its partitions and their leaders.
 *
 * Only topics someone asked about (sl_md_want: a produce, an assign, a
 * subscription) are requested, unless a regex subscription needs the
 * whole list (cl->md_all): then every request asks for all topics, each
 * topic of the answer gets an entry, and md_all_epoch marks the answer
 * (a topic's seen_epoch equal to it: present then).  One Metadata request
 * is in flight at a time; it is sent when something asked for a refresh
 * (sl_md_refresh: a connection loss, NOT_LEADER, a new topic), at most
 * once per retry.backoff.ms, and every metadata.max.age.ms regardless.
 * Versions 1-5 (v0's "empty list = all topics" is avoided); v4+ carries
 * AllowAutoTopicCreation: true for producers, allow.auto.create.topics
 * for consumers.
 *
 * Request and response go through the generated codec (kp_msgs.h), the
 * same description of the message the broker uses.
 *
 * Invariants: a topic entry, once created, lives as long as the handle
 * (other modules keep pointers to it); parts is replaced wholesale under
 * cl->lock; md_epoch increments with each answer so waiters can tell.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_int.h"
#include "kp_msgs.h"

sl_mtopic *sl_md_topic(sl_client *cl, const char *name, bool create)
{
    for (int i = 0; i < cl->n_topics; i++)
        if (strcmp(cl->topics[i]->name, name) == 0)
            return cl->topics[i];
    if (!create)
        return NULL;
    sl_mtopic **nt = realloc(cl->topics, sizeof *nt * (size_t)(cl->n_topics + 1));
    if (!nt)
        return NULL;
    cl->topics = nt;
    sl_mtopic *t = calloc(1, sizeof *t);
    if (!t || !(t->name = strdup(name))) {
        free(t);
        return NULL;
    }
    cl->topics[cl->n_topics++] = t;
    return t;
}

void sl_md_refresh(sl_client *cl)
{
    cl->md_needed = true;
}

void sl_md_want(sl_client *cl, const char *topic)
{
    sl_mtopic *t = sl_md_topic(cl, topic, true);
    if (t && !t->known) {
        cl->md_needed = true;
        sl_wakeup(cl);
    }
}

int32_t sl_md_leader(sl_client *cl, const char *topic, int32_t partition)
{
    sl_mtopic *t = sl_md_topic(cl, topic, false);
    if (!t || partition < 0 || partition >= t->npart)
        return -1;
    return t->parts[partition].leader;
}

static void handle_metadata(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                            kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    bool all = ctx != NULL;
    cl->md_inflight = false;
    int64_t now = sl_now_ms();
    if (err) {
        cl->md_needed = true;
        return;
    }
    kp_MetadataResponse m;
    if (kp_dec_MetadataResponse(r, ver, &m, &cl->arena) != 0) {
        sl_log(cl, 3, "malformed Metadata response");
        cl->md_needed = true;
        return;
    }
    for (int32_t i = 0; i < m.Brokers_count; i++) {
        const kp_MetadataResponse_MetadataResponseBroker *mb = &m.Brokers[i];
        if (mb->Host.len > 0 && mb->Host.len < 256) {
            char h[256];
            kp_str_copy(mb->Host, h, sizeof h);
            sl_broker_add(cl, mb->NodeId, h, mb->Port);
        }
    }
    bool retry_soon = false;
    for (int32_t i = 0; i < m.Topics_count; i++) {
        const kp_MetadataResponse_MetadataResponseTopic *mt = &m.Topics[i];
        int16_t ec = mt->ErrorCode;
        int32_t np = mt->Partitions_count;
        char tn[256];
        if (mt->Name.len <= 0 || mt->Name.len >= (int32_t)sizeof tn)
            continue;
        kp_str_copy(mt->Name, tn, sizeof tn);
        sl_mtopic *t = sl_md_topic(cl, tn, all);
        if (!t)
            continue;
        sl_mpart *parts = np > 0 ? calloc((size_t)np, sizeof *parts) : NULL;
        bool missing_leader = false;
        for (int32_t j = 0; j < np; j++) {
            const kp_MetadataResponse_MetadataResponsePartition *mp = &mt->Partitions[j];
            if (parts && mp->PartitionIndex >= 0 && mp->PartitionIndex < np) {
                parts[mp->PartitionIndex].leader = mp->LeaderId;
                parts[mp->PartitionIndex].err = mp->ErrorCode;
            }
            if (mp->LeaderId < 0)
                missing_leader = true;
        }
        t->internal = mt->IsInternal;
        t->seen_epoch = cl->md_epoch + 1;
        if (ec == 0 && np > 0 && parts) {
            free(t->parts);
            t->parts = parts;
            t->npart = np;
            t->err = 0;
            t->known = true;
            if (missing_leader)
                retry_soon = true;
        } else {
            free(parts);
            t->err = ec ? ec : SL_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            if (ec == SL_ERR_LEADER_NOT_AVAILABLE || (ec == 0 && np <= 0)) {
                retry_soon = true;         /* being created */
            } else if (!kp_error_retriable(ec) || ec == SL_ERR_UNKNOWN_TOPIC_OR_PARTITION) {
                /* Definitive answer (a consumer must not wait forever). */
                t->known = true;
                t->npart = 0;
            } else {
                retry_soon = true;
            }
        }
    }
    cl->controller_id = m.ControllerId;
    cl->md_last_ok = now;
    cl->md_epoch++;
    if (all) {
        /* Topics missing from an all-topics answer do not exist. */
        cl->md_all_epoch = cl->md_epoch;
        for (int i = 0; i < cl->n_topics; i++)
            if (cl->topics[i]->seen_epoch != cl->md_epoch) {
                cl->topics[i]->known = true;
                cl->topics[i]->npart = 0;
                cl->topics[i]->err = SL_ERR_UNKNOWN_TOPIC_OR_PARTITION;
            }
    }
    cl->md_next = now + (retry_soon ? (cl->conf.retry_backoff_ms > 50 ? cl->conf.retry_backoff_ms : 50)
                                    : cl->conf.metadata_max_age_ms);
    pthread_cond_broadcast(&cl->cond);
}

void sl_md_tick(sl_client *cl, int64_t now, int64_t *next)
{
    if (cl->md_inflight)
        return;
    bool due = now >= cl->md_next;
    if (cl->md_needed && now < cl->md_last_ok + cl->conf.retry_backoff_ms) {
        /* Rate-limit refreshes that follow an answer closely. */
        int64_t at = cl->md_last_ok + cl->conf.retry_backoff_ms;
        if (!due) {
            if (at < *next)
                *next = at;
            return;
        }
    }
    if (!cl->md_needed && !due) {
        if (cl->md_next < *next)
            *next = cl->md_next;
        return;
    }
    sl_broker *b = sl_any_broker(cl);
    if (!b)
        return;
    int16_t v = sl_api_version(b, KP_API_METADATA, 1, 5);
    if (v < 0) {
        sl_log(cl, 3, "broker %d offers no Metadata version in 1..5", b->id);
        cl->md_next = now + 1000;
        cl->md_needed = false;
        return;
    }
    bool all = cl->md_all;
    kp_MetadataRequest q;
    kp_init_MetadataRequest(&q);
    q.Topics_count = -1;                                    /* null: all topics */
    if (!all) {
        q.Topics_count = cl->n_topics;
        q.Topics = cl->n_topics ? kp_arena_alloc(&cl->arena, (size_t)cl->n_topics *
                                                 sizeof *q.Topics) : NULL;
        if (cl->n_topics && !q.Topics) {
            cl->md_next = now + 1000;                       /* out of memory */
            return;
        }
        for (int i = 0; i < cl->n_topics; i++)
            q.Topics[i].Name = (kp_str){ cl->topics[i]->name,
                                         (int32_t)strlen(cl->topics[i]->name) };
    }
    /* v4+; below v4 the broker always may (JSON default true). */
    q.AllowAutoTopicCreation = v < 4 || cl->prod != NULL || cl->conf.allow_auto_create_topics;
    kp_enc_MetadataRequest(sl_req_begin(cl, b, KP_API_METADATA, v), v, &q);
    kp_arena_reset(&cl->arena);     /* the topic array, now encoded */
    sl_req_end(cl, b, handle_metadata, all ? (void *)cl : NULL);
    cl->md_inflight = true;
    cl->md_needed = false;
    cl->md_next = now + cl->conf.metadata_max_age_ms;
}

int sl_md_wait_topic(sl_client *cl, const char *topic, int64_t deadline,
                     sl_mtopic **out)
{
    sl_mtopic *t = sl_md_topic(cl, topic, true);
    if (!t)
        return SL_E_NOMEM;
    if (!t->known) {
        cl->md_needed = true;
        sl_wakeup(cl);
    }
    while (!t->known) {
        if (cl->auth_err)                  /* client_sec.c inv. 1 */
            return cl->auth_err;
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !t->known)
            return SL_E_TIMED_OUT;
    }
    *out = t;
    return t->npart > 0 ? 0 : (t->err ? t->err : SL_ERR_UNKNOWN_TOPIC_OR_PARTITION);
}
