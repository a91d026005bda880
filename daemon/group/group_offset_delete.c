/*
 * daemon/group/group_offset_delete.c — OffsetDelete v0 (API key 47): forget a
 * group's committed offsets for some partitions (librdkafka's
 * DeleteConsumerGroupOffsets, Kafka's kafka-consumer-groups --delete-offsets).
 *
 * Design note.
 *
 * The decisions are Kafka's GroupCoordinator.handleDeleteOffsets with
 * KafkaApis' topic check in front:
 *   - the group question first: NOT_COORDINATOR (gc_coordinator_error),
 *     GROUP_ID_NOT_FOUND for a group the coordinator does not know (or one
 *     being deleted), NON_EMPTY_GROUP for a group with members that is not
 *     a consumer group (protocol type other than "consumer"); any of these
 *     answers the request alone, with no topics;
 *   - per partition: UNKNOWN_TOPIC_OR_PARTITION when it does not exist;
 *     GROUP_SUBSCRIBED_TO_TOPIC when the group has members and one of
 *     them subscribes to the topic (its ConsumerProtocolSubscription for
 *     the group's protocol; one that cannot be read counts as subscribed,
 *     as Kafka's isSubscribedToTopic does when it knows no subscription);
 *   - every other partition is deleted, whether or not an offset was
 *     stored (Kafka answers NONE for both).
 *
 * The delete is a tombstone on the one path for committed offsets
 * (gc_offsets_commit with delete_offsets, md_offset.tombstone): it is
 * stored by the same turn's job, in order with the commits around it,
 * and answered only once durable — what Kafka does by writing tombstones
 * to __consumer_offsets.
 *
 * Invariant:
 *   D1. A partition is deleted only when its answer is NONE; the entries
 *       (md_offset, pointing into the request's frame, which like r->arena
 *       lives until the request is answered) stay in r->state until the
 *       answer is written or the connection goes (gc_groups_forget).
 */
#include "daemon/security/sec_authz.h"
#include "daemon/group/group_int.h"

#include <stdlib.h>
#include <string.h>

/* One OffsetDelete while it is stored; r->state points here.  offs[i]
 * answers the i-th partition of the request, in request order. */
struct od_request {
    kp_OffsetDeleteRequest q;         /* in the frame and r->arena (kept) */
    int16_t group_err;
    int32_t n;
    md_offset *offs;
    /* The entries given to gc_offsets_commit (it sets each one's result):
     * store[i] answers offs[where[i]]. */
    md_offset *store;
    int32_t *where;
    int32_t nstore;
    struct gc_wait *pending;
};

static void od_collect(struct od_request *d)
{
    for (int32_t i = 0; i < d->nstore; i++)
        d->offs[d->where[i]].result = d->store[i].result;
}

/* Whether a ConsumerProtocolSubscription (INT16 version, ARRAY of STRING
 * topics, ...; never flexible) names topic.  Unreadable: true. */
static bool subscription_names(const uint8_t *meta, int32_t len, kp_str topic)
{
    kp_rd rd;
    kp_rd_init(&rd, meta, len > 0 ? (size_t)len : 0);
    if (kp_rd_i16(&rd) < 0)
        return true;
    int32_t n = kp_rd_array(&rd, 2);
    for (int32_t i = 0; i < n && kp_rd_ok(&rd); i++) {
        kp_str t = kp_rd_string(&rd);
        if (kp_rd_ok(&rd) && t.len == topic.len && !memcmp(t.p, topic.p, (size_t)t.len))
            return true;
    }
    return !kp_rd_ok(&rd) || n < 0;
}

static bool group_subscribed(const gc_group *g, kp_str topic)
{
    for (const gc_member *m = g->members.next; m != &g->members; m = m->next) {
        const gc_proto *p = gc_member_proto(m, g->protocol);
        if (!p || subscription_names(p->meta, p->meta_len, topic))
            return true;
    }
    return false;
}

/* The whole request's error, or KP_NONE with *consumers: the group has
 * members whose subscriptions decide per topic. */
static int16_t group_error(kp_str id, bool *consumers)
{
    *consumers = false;
    int16_t err = gc_coordinator_error(id);
    if (err)
        return err;
    gc_group *g = gc_group_find(id.p ? id.p : "", id.len > 0 ? (size_t)id.len : 0);
    if (!g || g->state == GC_DEAD)
        return KP_GROUP_ID_NOT_FOUND;
    if (g->state == GC_EMPTY || g->nmembers == 0)
        return KP_NONE;
    if (!g->protocol_type || strcmp(g->protocol_type, "consumer"))
        return KP_NON_EMPTY_GROUP;
    *consumers = true;
    return KP_NONE;
}

/* Answers in r->out. */
static int od_respond(bk_req *r, const struct od_request *d)
{
    kp_buf_reset(r->out);
    kp_OffsetDeleteResponse m;
    kp_init_OffsetDeleteResponse(&m);
    m.ErrorCode = d->group_err;
    if (!d->group_err) {
        const kp_OffsetDeleteRequest *q = &d->q;
        kp_OffsetDeleteResponse_OffsetDeleteResponseTopic *t =
            bk_req_alloc(r, (size_t)(q->Topics_count > 0 ? q->Topics_count : 1), sizeof *t);
        kp_OffsetDeleteResponse_OffsetDeleteResponsePartition *p =
            bk_req_alloc(r, (size_t)(d->n > 0 ? d->n : 1), sizeof *p);
        if (!t || !p)
            return BK_CLOSE;
        int32_t k = 0;
        for (int32_t i = 0; i < q->Topics_count; i++) {
            t[i] = (kp_OffsetDeleteResponse_OffsetDeleteResponseTopic){
                .Name = q->Topics[i].Name, .Partitions = p + k,
                .Partitions_count = q->Topics[i].Partitions_count,
            };
            for (int32_t j = 0; j < q->Topics[i].Partitions_count; j++, k++)
                p[k] = (kp_OffsetDeleteResponse_OffsetDeleteResponsePartition){
                    .PartitionIndex = d->offs[k].partition,
                    .ErrorCode = (int16_t)d->offs[k].result,
                };
        }
        m.Topics = t;
        m.Topics_count = q->Topics_count;
    }
    return bk_req_encoded(r, "OffsetDelete", kp_enc_OffsetDeleteResponse(r->out, 0, &m));
}

static void od_cancel(bk_req *r)
{
    struct od_request *d = r->state;
    if (d)
        gc_groups_forget(d->pending);
    gc_req_release(r, d);
}

static void od_done(void *arg, int rc)
{
    (void)rc;                         /* the entries carry it */
    bk_req *r = arg;
    struct od_request *d = r->state;
    od_collect(d);
    if (od_respond(r, d) != BK_RESPOND)
        kp_buf_reset(r->out);         /* logged; an empty body fails the client's parse */
    gc_req_finish(r, d);
}

int gc_handle_offset_delete(bk_req *r)
{
    kp_OffsetDeleteRequest q;
    if (kp_dec_OffsetDeleteRequest(&r->body, 0, &q, &r->arena) != 0)
        return BK_CLOSE;
    int64_t total = 0;
    for (int32_t t = 0; t < q.Topics_count; t++)
        total += q.Topics[t].Partitions_count;
    if (total > INT32_MAX / 2)
        return BK_CLOSE;
    size_t n = (size_t)total + 1;
    struct od_request *d = calloc(1, sizeof *d + n * (2 * sizeof(md_offset) + sizeof(int32_t)));
    if (!d)
        return BK_CLOSE;
    d->offs = (md_offset *)(d + 1);
    d->store = d->offs + n;
    d->where = (int32_t *)(d->store + n);
    d->n = (int32_t)total;
    d->q = q;
    bool consumers;
    d->group_err = group_error(q.GroupId, &consumers);
    if (!sec_authorized(r, BK_RES_GROUP, q.GroupId, BK_OP_DELETE))
        d->group_err = KP_GROUP_AUTHORIZATION_FAILED;               /* Kafka's rights */
    gc_group *g = consumers ? gc_group_find(q.GroupId.p, (size_t)q.GroupId.len) : NULL;
    int32_t k = 0;
    for (int32_t t = 0; t < q.Topics_count; t++) {
        const kp_OffsetDeleteRequest_OffsetDeleteRequestTopic *qt = &q.Topics[t];
        bool subscribed = g && group_subscribed(g, qt->Name);
        for (int32_t i = 0; i < qt->Partitions_count; i++, k++) {
            md_offset *o = &d->offs[k];
            *o = (md_offset){
                .group_id = q.GroupId.p, .group_len = q.GroupId.len, .topic = qt->Name.p,
                .topic_len = qt->Name.len, .partition = qt->Partitions[i].PartitionIndex,
                .leader_epoch = -1, .expire_time_ms = -1, .tombstone = true,
            };
            if (!sec_authorized(r, BK_RES_TOPIC, qt->Name, BK_OP_READ))
                o->result = KP_TOPIC_AUTHORIZATION_FAILED;
            else if (!view_partition(r->b, qt->Name, o->partition))
                o->result = KP_UNKNOWN_TOPIC_OR_PARTITION;      /* KafkaApis' check first */
            else if (subscribed)
                o->result = KP_GROUP_SUBSCRIBED_TO_TOPIC;
            else {
                d->where[d->nstore] = k;
                d->store[d->nstore++] = *o;
            }
        }
    }
    bk_offset_commit bc = {
        .group = q.GroupId, .generation = -1, .member_id = KP_STR_NULL,
        .instance_id = KP_STR_NULL, .delete_offsets = true,
        .offs = d->store, .n = (size_t)d->nstore, .done = od_done, .arg = r,
        .cadence_key = 0,             /* rare, like an operator's: no pace (group_persist.c C7) */
    };
    char err[MD_ERRLEN];
    if (!d->group_err && d->nstore > 0)
        gc_offsets_commit(r->b, &bc, err, sizeof err);
    if (!bc.pending) {
        od_collect(d);
        int rc = od_respond(r, d);
        free(d);
        return rc;
    }
    d->pending = bc.pending;
    r->state = d;
    r->cancel = od_cancel;
    return BK_DEFER;
}
