/*
 * daemon/cluster/cluster_reassign.c — partition reassignments (issue 16, online
 * expansion): a partition's replicas moved to another set of brokers
 * while it is produced to and consumed from, as Kafka's ZooKeeper
 * controller does it (KIP-455).  AlterPartitionReassignments and an SQL
 * UPDATE of partitions.replicas both come here (cl_partitions_reassign_request).
 *
 * Kafka's vocabulary: O the original replicas, T the target.  While a
 * reassignment runs the topic znode /brokers/topics/<t> holds
 *
 *     "partitions":{"0":[T ++ (O \ T)]},
 *     "adding_replicas":{"0":[T \ O]}, "removing_replicas":{"0":[O \ T]}
 *
 * (md_partition_state.adding / .removing as bits over those positions).
 *
 *   start    any broker: validates T, writes the topic znode at the
 *            version its mirror saw; answers once its mirror shows it
 *   follow   every broker's mirror applies it: the adding replicas open
 *            their logs and follow the leader (repl_fetcher.c, throttled by
 *            follower.replication.throttled.rate); the leader adds each to
 *            the ISR once it caught up (repl_isr.c)
 *   finish   the controller (reconcile_topic → cl_ctl_reassign_adjust), once
 *            every member of T is in the ISR: ISR := ISR ∩ T, a new leader
 *            from T (epoch + 1) if the leader is not in T, and in the same
 *            transaction the topic znode with replicas = T and no marks;
 *            the removed replicas' brokers close and delete their logs
 *            when their mirror applies it (view_topic_apply)
 *   cancel   T null: replicas := O, marks cleared (any broker, as start);
 *            an adding replica that led meanwhile is replaced by the
 *            controller (leader outside the replicas → elect from the ISR)
 *
 * Any broker accepts both APIs, not only the controller (Kafka's brokers
 * forward to theirs): the start and the cancel are a versioned write of
 * the topic znode that every broker can make, as CreatePartitions is,
 * and the listing is read from the broker's own mirror, which shows the
 * whole cluster.
 *
 * Invariants:
 *   R1. T ∪ O stays the replica set until every member of T is in sync,
 *       so the partition never has fewer in-sync copies than before.
 *   R2. The leader is always a replica: the finish and a cancel that
 *       dropped it elect from ISR ∩ replicas in the same write.
 *   R3. Every write of the topic znode is conditional on the version the
 *       writer's mirror saw (a start racing another start or a finish
 *       fails; the start is computed again from the refreshed mirror, up
 *       to RA_TRIES times).
 *   R4. A write waiting for its retry is on cl->ra_retries with its own
 *       timer; shutdown (cl_reassign_stop) answers and frees each, so
 *       none is left unanswered or leaked when the loop's events go.
 */
#include "daemon/cluster/cluster.h"
#include "daemon/view/view_store.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RA_TRIES 20
#define RA_RETRY_MS 50

static bool has_id(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* O: the replicas that are not being added, in replica order. */
static int32_t original_of(const bk_pview *v, int32_t *out)
{
    int32_t n = 0;
    for (int32_t i = 0; i < v->nreplicas; i++)
        if (!(v->adding >> i & 1))
            out[n++] = v->replicas[i];
    return n;
}

/* The partition's new assignment for target T (nt -1: cancel) from its
 * view: replicas and marks in st. */
static void plan(const bk_pview *v, const int32_t *t, int32_t nt, md_partition_state *st)
{
    int32_t o[MD_REPLICAS_MAX];
    int32_t no = original_of(v, o);
    st->adding = st->removing = 0;
    if (nt < 0) {
        st->nreplicas = no;
        memcpy(st->replicas, o, (size_t)no * sizeof *o);
        return;
    }
    int32_t n = 0;
    for (int32_t i = 0; i < nt; i++) {
        if (!has_id(o, no, t[i]))
            st->adding |= 1u << n;
        st->replicas[n++] = t[i];
    }
    for (int32_t i = 0; i < no; i++)
        if (!has_id(t, nt, o[i])) {
            st->removing |= 1u << n;
            st->replicas[n++] = o[i];
        }
    st->nreplicas = n;
    if (!st->adding && !st->removing)
        st->nreplicas = nt;                       /* same set: the new order at once */
}

/* Kafka's checks of one partition's target: KP_NONE or the refusal, with
 * words in msg. */
static int16_t check(bk_broker *b, const bk_topic *t, bk_reassign *ra)
{
    if (!t || ra->partition < 0 || ra->partition >= t->npartitions) {
        snprintf(ra->msg, sizeof ra->msg, "This server does not host this topic-partition.");
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    const bk_pview *v = &t->parts[ra->partition];
    if (ra->nreplicas < 0) {
        if (v->adding || v->removing)
            return KP_NONE;
        snprintf(ra->msg, sizeof ra->msg, "There is no ongoing reassignment for partition "
                 "%s-%d.", t->name, (int)ra->partition);
        return KP_NO_REASSIGNMENT_IN_PROGRESS;
    }
    if (ra->nreplicas == 0 || ra->nreplicas > MD_REPLICAS_MAX) {
        snprintf(ra->msg, sizeof ra->msg, "The target replica list must hold 1 to %d "
                 "brokers.", MD_REPLICAS_MAX);
        return KP_INVALID_REPLICA_ASSIGNMENT;
    }
    int32_t o[MD_REPLICAS_MAX], no = original_of(v, o);
    for (int32_t i = 0; i < ra->nreplicas; i++) {
        int32_t id = ra->replicas[i];
        if (has_id(ra->replicas, i, id)) {
            snprintf(ra->msg, sizeof ra->msg, "The proposed assignment contains duplicate "
                     "replicas: broker %d.", (int)id);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
        /* A broker already holding the partition may be down for a moment;
         * a new one must be alive to start copying it (Kafka's rule). */
        if (id < 0 || (!has_id(o, no, id) && !view_broker_alive(b, id))) {
            snprintf(ra->msg, sizeof ra->msg, "Replica assignment has brokers that are not "
                     "alive: broker %d.", (int)id);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    if (no + ra->nreplicas > MD_REPLICAS_MAX) {
        int32_t u = no;
        for (int32_t i = 0; i < ra->nreplicas; i++)
            u += !has_id(o, no, ra->replicas[i]);
        if (u > MD_REPLICAS_MAX) {
            snprintf(ra->msg, sizeof ra->msg, "The original and target replicas together "
                     "exceed %d brokers.", MD_REPLICAS_MAX);
            return KP_INVALID_REPLICA_ASSIGNMENT;
        }
    }
    return KP_NONE;
}

/* ---- start and cancel: the topic znode, written by any broker ----------------------- */

/* t's assignment as the view has it (replicas and marks per partition),
 * calloc'd. */
static md_partition_state *view_assignment(const bk_topic *t)
{
    md_partition_state *parts = calloc((size_t)(t->npartitions ? t->npartitions : 1),
                                       sizeof *parts);
    if (!parts)
        abort();
    for (int32_t p = 0; p < t->npartitions; p++) {
        const bk_pview *v = &t->parts[p];
        parts[p].nreplicas = v->nreplicas;
        memcpy(parts[p].replicas, v->replicas, sizeof parts[p].replicas);
        parts[p].adding = v->adding;
        parts[p].removing = v->removing;
    }
    return parts;
}

/* parts (freed here) as t's topic znode: its JSON into out (initialised
 * here; the caller frees it) and its path. */
static void assignment_json(const bk_topic *t, md_partition_state *parts, kp_buf *out,
                            char path[MD_TOPIC_NAME_MAX + 32])
{
    kp_buf_init(out);
    cl_zj_topic_format(t->id, parts, t->npartitions, out);
    free(parts);
    snprintf(path, MD_TOPIC_NAME_MAX + 32, "/brokers/topics/%s", t->name);
}

typedef struct ra_write {
    struct ra_write *next, **pprev;   /* on cl->ra_retries while the timer runs (R4) */
    struct event *timer;
    bk_broker *b;
    char topic[MD_TOPIC_NAME_MAX + 1];
    int32_t n;
    int tries;
    bk_topic_op *op;
    struct { int32_t partition, nreplicas; int32_t replicas[MD_REPLICAS_MAX]; } *parts;
} ra_write;

static void ra_free(ra_write *w)
{
    if (w->timer)
        event_free(w->timer);
    free(w->parts);
    free(w);
}

static void ra_fail(ra_write *w, int rc, const char *err)
{
    BK_WARN("topic %s: reassignment not written: %s", w->topic, err);
    if (w->op)
        w->op->done(w->op, rc, err);
    ra_free(w);
}

static void ra_send(ra_write *w);

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    ra_write *w = arg;
    if (w->next)
        w->next->pprev = w->pprev;
    *w->pprev = w->next;
    w->next = NULL;
    w->pprev = NULL;
    ra_send(w);
}

/* R3's wait: true when w waits on cl->ra_retries for RA_RETRY_MS (R4). */
static bool ra_retry_later(ra_write *w)
{
    bk_cluster *cl = w->b->cl;
    if (++w->tries >= RA_TRIES)
        return false;
    if (!w->timer && !(w->timer = evtimer_new(w->b->base, on_retry, w)))
        return false;
    struct timeval tv = { 0, RA_RETRY_MS * 1000 };
    if (evtimer_add(w->timer, &tv))
        return false;
    w->next = cl->ra_retries;
    if (w->next)
        w->next->pprev = &w->next;
    w->pprev = &cl->ra_retries;
    cl->ra_retries = w;
    return true;
}

void cl_reassign_stop(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    while (cl->ra_retries) {
        ra_write *w = cl->ra_retries;
        cl->ra_retries = w->next;
        if (w->op)
            w->op->done(w->op, KP_REQUEST_TIMED_OUT, "The broker shut down before the "
                        "reassignment was written.");
        ra_free(w);
    }
}

static void on_assignment_set(bk_broker *b, const zk_result *r, void *arg)
{
    ra_write *w = arg;
    char err[400];
    if (r->rc == ZOK) {
        BK_INFO("topic %s: reassignment of %d partition(s) written to ZooKeeper", w->topic,
                (int)w->n);
        cl_mirror_refresh_topic(b, w->topic);
        if (w->op)
            cl_wait_assignment(b, w->topic, r->stat.version, w->op);
        ra_free(w);
        return;
    }
    if (r->rc == ZBADVERSION) {
        /* R3: the znode moved on (a finish, another start); the mirror's
         * watch brings the new one, and the plan is made again from it. */
        cl_mirror_refresh_topic(b, w->topic);
        if (ra_retry_later(w))
            return;
    }
    int rc = r->rc == ZBADVERSION ? KP_REASSIGNMENT_IN_PROGRESS
                                  : cl_zk_error(b, r->rc, "cannot write the reassignment",
                                                err, sizeof err);
    if (r->rc == ZBADVERSION)
        snprintf(err, sizeof err, "Topic %s kept changing while its reassignment was "
                 "written; try again.", w->topic);
    ra_fail(w, rc, err);
}

static void ra_send(ra_write *w)
{
    bk_broker *b = w->b;
    bk_topic *t = view_topic_find(b, w->topic, strlen(w->topic));
    cl_topic *ct = cl_mirror_topic(b, w->topic, false);
    char err[256];
    if (!cl_zk_connected(b->zk)) {
        int rc = cl_zk_error(b, ZCONNECTIONLOSS, "cannot write the reassignment", err,
                             sizeof err);
        ra_fail(w, rc, err);
        return;
    }
    if (!t || !ct || ct->assign_version < 0) {
        snprintf(err, sizeof err, "Topic %s is not known to this broker's mirror.", w->topic);
        ra_fail(w, KP_UNKNOWN_TOPIC_OR_PARTITION, err);
        return;
    }
    if (ct->refreshing && ra_retry_later(w))      /* R3: wait for the newer picture */
        return;
    md_partition_state *parts = view_assignment(t);
    for (int32_t i = 0; i < w->n; i++)
        if (w->parts[i].partition < t->npartitions)
            plan(&t->parts[w->parts[i].partition], w->parts[i].replicas,
                 w->parts[i].nreplicas, &parts[w->parts[i].partition]);
    kp_buf assign;
    char path[MD_TOPIC_NAME_MAX + 32];
    assignment_json(t, parts, &assign, path);
    cl_zk_set(b->zk, path, (const char *)assign.data, (int)assign.len, ct->assign_version,
           on_assignment_set, w);
    kp_buf_free(&assign);
}

int cl_partitions_reassign_request(bk_broker *b, const char *topic, bk_reassign *parts, int32_t n,
                           bk_topic_op *op, char *err, size_t errlen)
{
    err[0] = 0;
    bk_topic *t = view_topic_find(b, topic, strlen(topic));
    int32_t valid = 0;
    for (int32_t i = 0; i < n; i++) {
        parts[i].msg[0] = 0;
        parts[i].error = check(b, t, &parts[i]);
        for (int32_t j = 0; j < i && parts[i].error == KP_NONE; j++)
            if (parts[j].partition == parts[i].partition) {
                snprintf(parts[i].msg, sizeof parts[i].msg, "Partition %d is given twice.",
                         (int)parts[i].partition);
                parts[i].error = KP_INVALID_REQUEST;
            }
        valid += parts[i].error == KP_NONE;
    }
    if (!valid)
        return KP_NONE;
    return b->store->partitions_reassign(b, topic, parts, n, op, err, errlen);
}

int cl_partitions_reassign(bk_broker *b, const char *topic, const bk_reassign *parts,
                           int32_t n, bk_topic_op *op, char *err, size_t errlen)
{
    int32_t valid = 0;
    for (int32_t i = 0; i < n; i++)
        valid += parts[i].error == KP_NONE;
    if (!cl_zk_connected(b->zk))
        return cl_zk_error(b, ZCONNECTIONLOSS, "cannot write the reassignment", err, errlen);
    ra_write *w = calloc(1, sizeof *w);
    if (!w || !(w->parts = calloc((size_t)valid, sizeof *w->parts)))
        abort();
    w->b = b;
    snprintf(w->topic, sizeof w->topic, "%s", topic);
    w->op = op;
    for (int32_t i = 0; i < n; i++) {
        if (parts[i].error != KP_NONE)
            continue;
        w->parts[w->n].partition = parts[i].partition;
        w->parts[w->n].nreplicas = parts[i].nreplicas;
        if (parts[i].nreplicas > 0)
            memcpy(w->parts[w->n].replicas, parts[i].replicas,
                   (size_t)parts[i].nreplicas * sizeof(int32_t));
        w->n++;
    }
    if (op)
        op->pending = true;
    ra_send(w);
    return KP_NONE;
}

int32_t cl_reassign_ids(const bk_pview *v, bool adding, int32_t *out)
{
    uint32_t mask = adding ? v->adding : v->removing;
    int32_t n = 0;
    for (int32_t i = 0; i < v->nreplicas; i++)
        if (mask >> i & 1)
            out[n++] = v->replicas[i];
    return n;
}

/* ---- finish: the controller ------------------------------------------------------------ */

bool cl_ctl_reassign_adjust(bk_broker *b, const bk_topic *t, int32_t p, md_partition_state *st,
                         bool *finished)
{
    const bk_pview *v = &t->parts[p];
    *finished = false;
    int32_t target[MD_REPLICAS_MAX], nt = 0;
    for (int32_t i = 0; i < v->nreplicas; i++)
        if (!(v->removing >> i & 1))
            target[nt++] = v->replicas[i];
    bool reassigning = v->adding || v->removing;
    if (reassigning) {
        for (int32_t i = 0; i < nt; i++)
            if (!has_id(st->isr, st->nisr, target[i]))
                return false;                     /* R1: not every target in sync yet */
        *finished = true;
    } else if (st->leader < 0 || has_id(v->replicas, v->nreplicas, st->leader)) {
        return false;
    }
    /* R2: finished (replicas become T), or a cancel left the leader out */
    int32_t isr[MD_REPLICAS_MAX], ni = 0;
    for (int32_t i = 0; i < nt; i++)
        if (has_id(st->isr, st->nisr, target[i]))
            isr[ni++] = target[i];
    if (!has_id(target, nt, st->leader) || !view_broker_alive(b, st->leader)) {
        int32_t lead = -1;
        for (int32_t i = 0; i < ni && lead < 0; i++)
            if (view_broker_alive(b, isr[i]))
                lead = isr[i];
        if (lead < 0)
            return *finished = false;             /* no one to lead it yet */
        BK_INFO("partition %s-%d: reassignment moves leadership from %d to %d (epoch %d)",
                t->name, (int)p, (int)st->leader, (int)lead, (int)st->leader_epoch + 1);
        st->leader = lead;
        st->leader_epoch++;
    }
    if (*finished)
        BK_INFO("partition %s-%d: reassignment done: every target replica is in sync, "
                "%d replica(s) now", t->name, (int)p, (int)nt);
    st->nisr = ni;
    memcpy(st->isr, isr, (size_t)ni * sizeof *isr);
    st->nreplicas = nt;
    memcpy(st->replicas, target, (size_t)nt * sizeof *target);
    st->adding = st->removing = 0;
    return true;
}

void cl_ctl_reassign_put_assignment(zk_txn *txn, const bk_topic *t, int version,
                                 const bool *finished)
{
    md_partition_state *parts = view_assignment(t);
    for (int32_t p = 0; p < t->npartitions; p++) {
        if (!finished[p])
            continue;
        const bk_pview *v = &t->parts[p];
        md_partition_state *st = &parts[p];
        st->nreplicas = 0;
        for (int32_t i = 0; i < v->nreplicas; i++)
            if (!(v->removing >> i & 1))
                st->replicas[st->nreplicas++] = v->replicas[i];
        st->adding = st->removing = 0;
    }
    kp_buf out;
    char path[MD_TOPIC_NAME_MAX + 32];
    assignment_json(t, parts, &out, path);
    cl_zk_txn_set(txn, path, (const char *)out.data, (int)out.len, version);
    kp_buf_free(&out);
}
