/*
 * ElectLeaders v0-2 (API key 43): what kafka-leader-election
 * --election-type PREFERRED sends, to the controller.
 *
 *   Request:  ElectionType (v1+), TopicPartitions [Topic, Partitions]
 *             (null: every partition), TimeoutMs
 *   Response: ThrottleTimeMs, ErrorCode (v1+), ReplicaElectionResults
 *             [Topic, PartitionResult [PartitionId, ErrorCode, ErrorMessage]]
 *
 * Per partition (daemon/cluster/cluster_leaders.c cl_ctl_elect_preferred): NONE when the
 * preferred replica was chosen, ELECTION_NOT_NEEDED when it leads already,
 * PREFERRED_LEADER_NOT_AVAILABLE when it is not alive or not in the ISR.
 * A broker that is not the controller answers NOT_CONTROLLER (the admin
 * client then asks the controller), as Kafka's do.  Standalone, the one
 * broker leads everything: ELECTION_NOT_NEEDED.  UNCLEAN elections are
 * refused with INVALID_REQUEST until unclean election exists.
 *
 * The answer goes out once ZooKeeper confirmed every election, as Kafka's
 * controller answers after its state writes: a partition elected (NONE)
 * is answered when this broker's view holds a state znode version newer
 * than the one it elected from (the write landed and the mirror read it
 * back).  NONE if the preferred replica leads in it, else
 * PREFERRED_LEADER_NOT_AVAILABLE (another write won; the mark was spent,
 * cluster_leaders.c L5); still waiting at TimeoutMs, REQUEST_TIMED_OUT.  The
 * wait never blocks the loop: the request is deferred and a timer looks
 * at the view every EL_POLL_MS (the view is in memory; an election takes
 * a ZooKeeper round trip or two).  For a null partition list, partitions
 * that need no election are left out, as in Kafka.
 *
 *   E1  a deferred answer's strings are in r->arena (copied: a topic may
 *       be deleted meanwhile), so the wait holds no pointer into the view.
 *   E2  exactly one of el_finish (all confirmed, or the deadline) and
 *       el_cancel (the connection went) ends the wait and frees it.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "kp_msgs.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define EL_POLL_MS 2

#define ELECTION_PREFERRED 0
#define ELECTION_UNCLEAN 1

typedef kp_ElectLeadersResponse_ReplicaElectionResult elect_topic;
typedef kp_ElectLeadersResponse_PartitionResult elect_part;

/* One election waiting for ZooKeeper: its answer slot and what it elected. */
typedef struct el_pending {
    elect_part *out;                  /* in r->arena */
    const char *topic;                /* in r->arena (E1) */
    int32_t preferred;
    int32_t from_version;             /* the state znode's version it elected from */
} el_pending;

typedef struct el_wait {
    bk_req *r;
    kp_ElectLeadersResponse m;        /* arrays in r->arena */
    struct event *timer;
    int64_t deadline_ms;
    int32_t n, cap;
    el_pending *p;
} el_wait;

static const char el_timeout_msg[] = "The election was not confirmed within the timeout.";
static const char el_lost_msg[] = "Another change of the partition's state came first.";

static kp_str el_msg(const char *s, size_t size)
{
    return (kp_str){ s, (int32_t)size - 1 };
}

static void el_free(el_wait *w)
{
    if (w->timer)
        event_free(w->timer);
    free(w->p);
    free(w);
}

/* Records an election to wait for.  false: out of memory (it is then
 * answered at once, as before ZooKeeper confirms). */
static bool el_add(el_wait *w, elect_part *out, const char *topic, const bk_pview *v)
{
    if (w->n == w->cap) {
        int32_t cap = w->cap ? w->cap * 2 : 8;
        el_pending *p = realloc(w->p, (size_t)cap * sizeof *p);
        if (!p)
            return false;
        w->p = p;
        w->cap = cap;
    }
    w->p[w->n++] = (el_pending){ out, topic, v->replicas[0], v->zk_version };
    return true;
}

/* true when every pending election is decided in the view; decided ones
 * get their answer.  At the deadline the rest get REQUEST_TIMED_OUT. */
static bool el_check(el_wait *w, bool deadline)
{
    bk_broker *b = w->r->b;
    bool all = true;
    for (int32_t i = 0; i < w->n; i++) {
        el_pending *e = &w->p[i];
        if (!e->out)
            continue;
        bk_topic *t = view_topic_find(b, e->topic, strlen(e->topic));
        int32_t pid = e->out->PartitionId;
        const bk_pview *v = t && pid < t->npartitions ? &t->parts[pid] : NULL;
        if (!v) {
            e->out->ErrorCode = KP_UNKNOWN_TOPIC_OR_PARTITION;   /* deleted meanwhile */
        } else if (v->zk_version > e->from_version) {
            if (v->leader != e->preferred) {
                e->out->ErrorCode = KP_PREFERRED_LEADER_NOT_AVAILABLE;
                e->out->ErrorMessage = el_msg(el_lost_msg, sizeof el_lost_msg);
            }
        } else if (deadline) {
            e->out->ErrorCode = KP_REQUEST_TIMED_OUT;
            e->out->ErrorMessage = el_msg(el_timeout_msg, sizeof el_timeout_msg);
        } else {
            all = false;
            continue;
        }
        e->out = NULL;
    }
    return all;
}

/* E2: answers and frees.  net_req_finish may start the next request on r. */
static void el_finish(el_wait *w)
{
    bk_req *r = w->r;
    r->state = NULL;
    r->cancel = NULL;
    r->expire = NULL;
    kp_enc_ElectLeadersResponse(r->out, r->hdr.RequestApiVersion, &w->m);
    if (r->out->err)
        kp_buf_reset(r->out);         /* an empty body fails the client's parse */
    el_free(w);
    net_req_finish(r);
}

/* false: the poll cannot be armed; the caller answers with what is known. */
static bool el_arm(el_wait *w)
{
    struct timeval tv = { 0, EL_POLL_MS * 1000 };
    return bk_event_add(w->timer, &tv, "ElectLeaders poll") == 0;
}

static void el_timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    el_wait *w = arg;
    if (el_check(w, bk_now_ms() >= w->deadline_ms) || !el_arm(w)) {
        el_check(w, true);
        el_finish(w);
    }
}

static void el_cancel(bk_req *r)       /* the connection went: E2 */
{
    el_wait *w = r->state;
    r->state = NULL;
    r->cancel = NULL;
    r->expire = NULL;
    if (w)
        el_free(w);
}

static void el_expire(bk_req *r)       /* shutdown: answer with what there is */
{
    el_wait *w = r->state;
    el_check(w, true);
    el_finish(w);
}

/* The response in m, at once when nothing waits for ZooKeeper, else
 * deferred (w taken over).  w NULL: standalone or not the controller. */
static int el_respond(bk_req *r, kp_ElectLeadersResponse *m, el_wait *w, int32_t timeout_ms)
{
    if (w)
        w->r = r;
    if (w && w->n > 0 && !el_check(w, false)) {
        w->m = *m;
        w->deadline_ms = bk_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
        if ((w->timer = evtimer_new(r->b->base, el_timer_cb, w)) && el_arm(w)) {
            r->state = w;
            r->cancel = el_cancel;
            r->expire = el_expire;
            return BK_DEFER;
        }
        el_check(w, true);            /* no timer: answer what is known now */
    }
    if (w)
        el_free(w);
    kp_enc_ElectLeadersResponse(r->out, r->hdr.RequestApiVersion, m);
    return r->out->err ? BK_CLOSE : BK_RESPOND;
}

static int16_t elect_one(bk_req *r, int8_t type, const char *topic, int32_t p,
                         kp_str *msg)
{
    bk_broker *b = r->b;
    *msg = KP_STR_NULL;
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_ALTER))
        return KP_CLUSTER_AUTHORIZATION_FAILED;
    bk_topic *t = view_topic_find(b, topic, strlen(topic));
    if (!t || p < 0 || p >= t->npartitions)
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    if (type != ELECTION_PREFERRED) {
        static const char why[] = "Only PREFERRED leader elections are served.";
        *msg = (kp_str){ why, (int32_t)sizeof why - 1 };
        return KP_INVALID_REQUEST;
    }
    if (!bk_cluster_mode(b))
        return KP_ELECTION_NOT_NEEDED;
    return (int16_t)cl_ctl_elect_preferred(b, topic, p);
}

/* Fills mt for topic's partitions ps[0..n) (ps NULL: all of them);
 * skip_unneeded drops ELECTION_NOT_NEEDED results; elections made are
 * added to w (NULL: not waited for).  -1: out of arena. */
static int elect_topic_fill(bk_req *r, int8_t type, const char *topic, const int32_t *ps,
                            int32_t n, bool skip_unneeded, elect_topic *mt, el_wait *w)
{
    mt->PartitionResult = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) * sizeof(elect_part));
    if (!mt->PartitionResult)
        return -1;
    mt->PartitionResult_count = 0;
    const char *saved = NULL;         /* E1: topic's copy in the arena */
    for (int32_t i = 0; i < n; i++) {
        elect_part *mp = &mt->PartitionResult[mt->PartitionResult_count];
        mp->PartitionId = ps ? ps[i] : i;
        mp->ErrorCode = elect_one(r, type, topic, mp->PartitionId, &mp->ErrorMessage);
        if (mp->ErrorCode == KP_NONE && w && bk_cluster_mode(r->b)) {
            size_t len = strlen(topic);
            char *copy = saved ? NULL : kp_arena_alloc(&r->arena, len + 1);  /* zeroed */
            if (copy)
                saved = memcpy(copy, topic, len);
            bk_topic *t = view_topic_find(r->b, topic, strlen(topic));
            if (saved && t)
                el_add(w, mp, saved, &t->parts[mp->PartitionId]);
        }
        if (!(skip_unneeded && mp->ErrorCode == KP_ELECTION_NOT_NEEDED))
            mt->PartitionResult_count++;
    }
    if (bk_cluster_mode(r->b))
        cl_ctl_reconcile(r->b, topic);               /* carries out what was marked */
    return 0;
}

struct all_arg { bk_req *r; int8_t type; kp_ElectLeadersResponse *m; int32_t cap; bool oom;
                 el_wait *w; };

static void elect_all_cb(bk_topic *t, void *arg)
{
    struct all_arg *a = arg;
    if (a->oom || a->m->ReplicaElectionResults_count >= a->cap)
        return;
    elect_topic *mt = &a->m->ReplicaElectionResults[a->m->ReplicaElectionResults_count];
    if (kp_arena_str(&a->r->arena, t->name, &mt->Topic) != 0 ||      /* E1 */
        elect_topic_fill(a->r, a->type, t->name, NULL, t->npartitions, true, mt, a->w) != 0)
        a->oom = true;
    else if (mt->PartitionResult_count > 0)
        a->m->ReplicaElectionResults_count++;
}

int api_handle_elect_leaders(bk_req *r)
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
    el_wait *w = NULL;
    if (bk_cluster_mode(r->b) && !not_controller && !(w = calloc(1, sizeof *w)))
        return BK_CLOSE;
    int rc = BK_CLOSE;
    if (q.TopicPartitions_count < 0) {
        int32_t cap = (int32_t)r->b->ntopics;
        m.ReplicaElectionResults = kp_arena_alloc(&r->arena,
                                                  (size_t)(cap ? cap : 1) * sizeof(elect_topic));
        if (!m.ReplicaElectionResults)
            goto out;
        m.ReplicaElectionResults_count = 0;
        if (!not_controller) {
            struct all_arg a = { r, type, &m, cap, false, w };
            view_topics_foreach(r->b, elect_all_cb, &a);
            if (a.oom)
                goto out;
        }
        return el_respond(r, &m, w, q.TimeoutMs);
    }
    m.ReplicaElectionResults_count = q.TopicPartitions_count;
    m.ReplicaElectionResults = kp_arena_alloc(
        &r->arena, (size_t)(q.TopicPartitions_count ? q.TopicPartitions_count : 1) *
                   sizeof(elect_topic));
    if (!m.ReplicaElectionResults)
        goto out;
    for (int32_t t = 0; t < q.TopicPartitions_count; t++) {
        const kp_ElectLeadersRequest_TopicPartitions *qt = &q.TopicPartitions[t];
        elect_topic *mt = &m.ReplicaElectionResults[t];
        mt->Topic = qt->Topic;
        int32_t n = qt->Partitions_count > 0 ? qt->Partitions_count : 0;
        if (not_controller) {
            mt->PartitionResult = kp_arena_alloc(&r->arena, (size_t)(n ? n : 1) *
                                                 sizeof(elect_part));
            if (!mt->PartitionResult)
                goto out;
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
        if (elect_topic_fill(r, type, name, qt->Partitions, n, false, mt, w) != 0)
            goto out;
    }
    return el_respond(r, &m, w, q.TimeoutMs);
out:
    if (w)
        el_free(w);
    return rc;
}
