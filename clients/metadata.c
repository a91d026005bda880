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
 * Invariants: a topic entry, once created, lives as long as the handle
 * (other modules keep pointers to it); parts is replaced wholesale under
 * cl->lock; md_epoch increments with each answer so waiters can tell.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_int.h"

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

static void skip_i32_array(kp_rd *r)
{
    int32_t n = kp_rd_array(r, 4);
    for (int32_t i = 0; i < n && kp_rd_ok(r); i++)
        (void)kp_rd_i32(r);
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
    if (ver >= 3)
        (void)kp_rd_i32(r);                              /* ThrottleTimeMs */
    int32_t nb = kp_rd_array(r, 10);
    for (int32_t i = 0; i < nb && kp_rd_ok(r); i++) {
        int32_t id = kp_rd_i32(r);
        kp_str host = kp_rd_string(r);
        int32_t port = kp_rd_i32(r);
        (void)kp_rd_string(r);                           /* Rack */
        if (kp_rd_ok(r) && host.len > 0 && host.len < 256) {
            char h[256];
            kp_str_copy(host, h, sizeof h);
            sl_broker_add(cl, id, h, port);
        }
    }
    if (ver >= 2)
        (void)kp_rd_string(r);                           /* ClusterId */
    int32_t controller = kp_rd_i32(r);
    bool retry_soon = false;
    int32_t nt = kp_rd_array(r, 8);
    for (int32_t i = 0; i < nt && kp_rd_ok(r); i++) {
        int16_t ec = kp_rd_i16(r);
        kp_str name = kp_rd_string(r);
        bool internal = kp_rd_bool(r);
        int32_t np = kp_rd_array(r, 18);
        sl_mpart *parts = np > 0 ? calloc((size_t)np, sizeof *parts) : NULL;
        bool missing_leader = false;
        for (int32_t j = 0; j < np && kp_rd_ok(r); j++) {
            int16_t pec = kp_rd_i16(r);
            int32_t idx = kp_rd_i32(r);
            int32_t leader = kp_rd_i32(r);
            skip_i32_array(r);                           /* ReplicaNodes */
            skip_i32_array(r);                           /* IsrNodes */
            if (ver >= 5)
                skip_i32_array(r);                       /* OfflineReplicas */
            if (parts && idx >= 0 && idx < np) {
                parts[idx].leader = leader;
                parts[idx].err = pec;
            }
            if (leader < 0)
                missing_leader = true;
        }
        char tn[256];
        if (!kp_rd_ok(r) || name.len <= 0 || name.len >= (int32_t)sizeof tn) {
            free(parts);
            continue;
        }
        kp_str_copy(name, tn, sizeof tn);
        sl_mtopic *t = sl_md_topic(cl, tn, all);
        if (!t) {
            free(parts);
            continue;
        }
        t->internal = internal;
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
    if (!kp_rd_ok(r)) {
        sl_log(cl, 3, "malformed Metadata response");
        cl->md_needed = true;
        return;
    }
    cl->controller_id = controller;
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
    kp_buf *w = sl_req_begin(cl, b, KP_API_METADATA, v);
    bool all = cl->md_all;
    kp_wr_array(w, all ? -1 : cl->n_topics);                /* -1: all topics */
    for (int i = 0; !all && i < cl->n_topics; i++)
        kp_wr_string(w, cl->topics[i]->name, -1);
    if (v >= 4)
        kp_wr_bool(w, cl->prod != NULL || cl->conf.allow_auto_create_topics);
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
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !t->known)
            return SL_E_TIMED_OUT;
    }
    *out = t;
    return t->npart > 0 ? 0 : (t->err ? t->err : SL_ERR_UNKNOWN_TOPIC_OR_PARTITION);
}
