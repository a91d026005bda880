/*
 * daemon/cluster/cluster_controller.c — the controller: one broker of the cluster,
 * elected through the ephemeral /controller znode, writes every
 * partition's state (leader, leader epoch, ISR) and carries out topic
 * deletions.
 *
 *   election    create /controller (ephemeral) → won: /controller_epoch + 1,
 *               written conditionally on its znode version → active
 *               lost: watch /controller, try again when it vanishes
 *   reconcile   what the mirror shows, against who is alive:
 *                 a partition without a state      → state: leader = first
 *                                                    live replica, ISR = it
 *                 its leader is dead               → first live ISR member;
 *                                                    none alive: no write (C4),
 *                                                    or with unclean.leader.
 *                                                    election.enable the first
 *                                                    live replica, ISR = it
 *                 leader -1, an ISR member is back → that member leads
 *                 no ISR member stayed up since the  → the longest log of
 *                 state was written (an ISR of 2+)     those back, after
 *                                                      leader.recovery.wait.ms
 *                                                      unless all are back
 *                                                      (cluster_recovery.c)
 *               each change bumps the leader epoch; the writes go in
 *               transactions of up to CTL_BATCH operations, not one round
 *               trip per partition
 *   reassign    every target replica of a reassigning partition in the ISR
 *               → ISR ∩ target, a leader from the target, and the topic
 *               znode without the removed replicas, in one transaction
 *               (cluster_reassign.c)
 *   deletion    /admin/delete_topics/<t> → delete the topic's znodes, then
 *               the request; every broker's mirror deletes its copy
 *
 * The controller starts warm: every broker's mirror already holds the
 * whole cluster (cluster_mirror.c), so a new controller reconciles from it at
 * once instead of reading every partition from ZooKeeper first, which is
 * what makes Kafka's ZooKeeper controller's failover grow with the
 * partition count.
 *
 * A partition whose leader dies with no other in-sync replica alive (every
 * replication-factor-1 partition of that broker) is offline: every broker's
 * view already says so (Metadata answers leader -1 for a leader that is not
 * alive, view_broker_alive), and no write could change it, so none is made
 * (C4).  It comes back with that broker, which leads it again in the same
 * epoch: nobody led it meanwhile, so its log cannot have diverged.
 * Writing leader -1 for each of them, as Kafka's ZooKeeper controller does,
 * would make a broker's death cost a write and a watch on every broker per
 * partition it held alone, and a new controller's takeover (its
 * predecessor's partitions among them) grow with them.
 *
 * Invariants:
 *   C1. Every transaction starts with a check of /controller_epoch's
 *       version as this controller wrote it: a deposed controller's
 *       writes fail whole (Kafka's fencing), and it resigns.
 *   C2. State writes are conditional on the state znode's version the
 *       mirror last saw; a stale mirror fails the write, the watch that
 *       made it stale refreshes the topic, and the refresh reconciles it
 *       again.
 *   C3. While a topic's writes are in flight, or it is being deleted, it
 *       is not reconciled again; and a partition it wrote is not written
 *       again until the mirror shows the version that write made
 *       (cl_topic.expect), so a reconcile that runs between a write's
 *       answer and its watch does not repeat it with a stale version.
 *   C4. Only a change is written: a partition's state is rewritten when a
 *       leader is elected (a live ISR member, or the first live replica of
 *       a new partition), never merely to record that it has none.
 */
#include "daemon/cluster/cluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CTL_BATCH 600                /* operations per transaction */

/* ---- election ---------------------------------------------------------------------------- */

static void become_active(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    cl->active = true;
    view_set_controller(b, b->cfg->broker_id);
    BK_INFO("controller: this broker (%d) is the controller, epoch %d",
            (int)b->cfg->broker_id, (int)cl->epoch);
    md_controller_set(b->db, view_controller_id(b), cl->epoch);
    /* The mirror is current as far as watches go; it is checked with two
     * listings (brokers, topics), not by reading every partition again,
     * so the first elections see who is alive now. */
    cl_mirror_refresh_brokers(b);
    cl_mirror_check_topics(b);
    cl_ctl_refresh_deletions(b);
    cl_ctl_logdirs_reset(b);
    cl_ctl_logdirs_refresh(b);                       /* cluster_logdirs.c */
    cl_ctl_reconcile(b, NULL);
}

static void bump_epoch(bk_broker *b);

static void on_epoch_written(bk_broker *b, const zk_result *r, void *arg)
{
    bk_cluster *cl = b->cl;
    int32_t epoch = (int32_t)(intptr_t)arg;
    if (r->rc == ZOK) {
        cl->epoch = epoch;
        cl->epoch_version = r->stat.version;
        cl->electing = false;
        become_active(b);
    } else if (r->rc == ZBADVERSION || r->rc == ZNODEEXISTS) {
        bump_epoch(b);                            /* raced; read it again */
    } else {
        cl->electing = false;
        BK_WARN("controller: cannot write /controller_epoch (%s); retrying", cl_zk_rc_str(r->rc));
    }
}

static void on_epoch(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    kp_buf out;
    kp_buf_init(&out);
    if (r->rc == ZNONODE) {
        cl_zj_epoch_format(1, &out);
        cl_zk_create(b->zk, "/controller_epoch", (const char *)out.data, (int)out.len, 0,
                  on_epoch_written, (void *)(intptr_t)1);
    } else if (r->rc == ZOK) {
        int32_t e = 0;
        char err[128];
        if (cl_zj_epoch_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, &e,
                           err, sizeof err) != 0) {
            BK_ERROR("controller: /controller_epoch holds %.*s (%s); starting over from it",
                     r->len > 0 ? r->len : 0, r->data ? r->data : "", err);
            e = 0;
        }
        cl_zj_epoch_format(e + 1, &out);
        cl_zk_set(b->zk, "/controller_epoch", (const char *)out.data, (int)out.len,
               r->stat.version, on_epoch_written, (void *)(intptr_t)(e + 1));
    } else {
        b->cl->electing = false;
    }
    kp_buf_free(&out);
}

static void bump_epoch(bk_broker *b)
{
    cl_zk_get(b->zk, "/controller_epoch", false, on_epoch, NULL);
}

static void on_controller_created(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    if (r->rc == ZOK) {
        bump_epoch(b);
        return;
    }
    cl->electing = false;
    if (r->rc == ZNODEEXISTS)
        cl_mirror_refresh_controller(b);                 /* someone else won; watch it */
}

void cl_ctl_elect(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (!cl->registered || cl->electing || cl->active || !cl_zk_connected(b->zk))
        return;
    cl->electing = true;
    kp_buf out;
    kp_buf_init(&out);
    cl_zj_controller_format(b->cfg->broker_id, bk_now_ms(), &out);
    cl_zk_create(b->zk, "/controller", (const char *)out.data, (int)out.len, ZOO_EPHEMERAL,
              on_controller_created, NULL);
    kp_buf_free(&out);
}

void cl_ctl_resign(bk_broker *b, const char *why)
{
    bk_cluster *cl = b->cl;
    if (!cl->active)
        return;
    cl->active = false;
    BK_WARN("controller: this broker is no longer the controller: %s", why);
}

/* ---- state writes -------------------------------------------------------------------------- */

typedef struct ctl_batch {
    char topic[MD_TOPIC_NAME_MAX + 1];
    int elected;
    bool last;                       /* deletion: the final transaction */
} ctl_batch;

static void on_written(bk_broker *b, const zk_result *r, void *arg)
{
    ctl_batch *cb = arg;
    bk_cluster *cl = b->cl;
    cl_topic *ct = cl_mirror_topic(b, cb->topic, false);
    if (ct && ct->writes > 0)
        ct->writes--;
    if (r->rc != ZOK && ct)
        for (int32_t i = 0; i < ct->nexpect; i++)
            ct->expect[i] = -2;                   /* C3: it did not happen (or may not have) */
    if (r->rc == ZOK) {
        if (cb->elected)
            BK_INFO("controller: topic %s: %d partition(s) given a leader",
                    cb->topic, cb->elected);
    } else if (r->nops > 0 && r->op_rc[0] == ZBADVERSION) {
        cl_ctl_resign(b, "/controller_epoch moved on: another broker was elected");   /* C1 */
    } else if (r->rc == ZBADVERSION || r->rc == ZNODEEXISTS || r->rc == ZNONODE) {
        BK_INFO("controller: topic %s changed under a write (%s); reading it again",
                cb->topic, cl_zk_rc_str(r->rc));
        cl_mirror_refresh_topic(b, cb->topic);           /* C2 */
    } else if (cl->active) {
        BK_WARN("controller: writing topic %s failed (%s); retried after the reconnect",
                cb->topic, cl_zk_rc_str(r->rc));
    }
    free(cb);
}

static zk_txn *txn_begin(bk_broker *b)
{
    zk_txn *t = cl_zk_txn_new();
    cl_zk_txn_check(t, "/controller_epoch", b->cl->epoch_version);         /* C1 */
    return t;
}

static void txn_send(bk_broker *b, zk_txn **t, ctl_batch **cb, const char *topic)
{
    cl_topic *ct = cl_mirror_topic(b, topic, true);
    if (ct)
        ct->writes++;                             /* C3 */
    cl_zk_txn_commit(b->zk, *t, on_written, *cb);
    *t = NULL;
    *cb = NULL;
}

/* May lead: registered, and its log directory not failed (cluster_logdirs.c;
 * Kafka's controller elects only online replicas). */
static bool alive(bk_broker *b, int32_t id)
{
    return view_broker_alive(b, id) && !cl_broker_dir_failed(b, id);
}

static void put_state(zk_txn *t, bk_broker *b, const char *topic, int32_t p,
                      const md_partition_state *st, bool create, int version)
{
    md_partition_state s = *st;
    s.controller_epoch = b->cl->epoch;
    kp_buf out;
    kp_buf_init(&out);
    cl_zj_state_format(&s, &out);
    char path[MD_TOPIC_NAME_MAX + 64];
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", topic, (int)p);
    if (create)
        cl_zk_txn_create(t, path, (const char *)out.data, (int)out.len, 0);
    else
        cl_zk_txn_set(t, path, (const char *)out.data, (int)out.len, version);
    kp_buf_free(&out);
}

/* C3's per-partition bookkeeping, sized to the topic. */
static bool expect_grow(cl_topic *ct, int32_t n)
{
    if (ct->nexpect >= n)
        return true;
    int32_t *e = realloc(ct->expect, (size_t)n * sizeof *e);
    if (!e)
        return false;
    for (int32_t i = ct->nexpect; i < n; i++)
        e[i] = -2;
    ct->expect = e;
    ct->nexpect = n;
    return true;
}

/* unclean.leader.election.enable: with no ISR member alive, the first
 * live replica outside the ISR leads (-1: none).  What the ISR had beyond
 * its log is lost: logged here, and the offsets by each returning replica
 * as it truncates (repl_fetcher.c). */
static int32_t unclean_leader(bk_broker *b, const bk_topic *t, int32_t p)
{
    const bk_pview *v = &t->parts[p];
    for (int32_t i = 0; i < v->nreplicas; i++) {
        if (!alive(b, v->replicas[i]))
            continue;
        BK_WARN("partition %s-%d: unclean leader election: no ISR member is alive, "
                "broker %d (not in the ISR) leads at leader epoch %d; messages the ISR "
                "had beyond its log are lost (each returning replica logs the offsets "
                "it truncates)", t->name, (int)p, (int)v->replicas[i],
                (int)v->leader_epoch + 1);
        return v->replicas[i];
    }
    return -1;
}

static void reconcile_topic(bk_broker *b, bk_topic *t)
{
    cl_topic *ct = cl_mirror_topic(b, t->name, true);
    if (!ct || ct->deleting || ct->writes > 0 || ct->refreshing ||
        !expect_grow(ct, t->npartitions))
        return;                                   /* C3; the refresh calls again */
    bool any_state = false;
    for (int32_t p = 0; p < t->npartitions && !any_state; p++)
        any_state = t->parts[p].zk_version >= 0;
    zk_txn *txn = NULL;
    ctl_batch *cb = NULL;
    bool *finished = NULL;                        /* reassignments done (cluster_reassign.c) */
    char path[MD_TOPIC_NAME_MAX + 64];
    for (int32_t p = 0; p < t->npartitions; p++) {
        const bk_pview *v = &t->parts[p];
        if (ct->expect[p] > v->zk_version)
            continue;                             /* C3: our write is not in yet */
        md_partition_state st = { .leader = v->leader, .leader_epoch = v->leader_epoch,
                                  .nreplicas = v->nreplicas, .nisr = v->nisr };
        memcpy(st.replicas, v->replicas, sizeof st.replicas);
        memcpy(st.isr, v->isr, sizeof st.isr);
        bool create = v->zk_version < 0, change = false;
        int rec;
        if (create) {
            /* As Kafka's initializeLeaderAndIsrForPartitions: the ISR is
             * every live assigned replica not shutting down (all empty,
             * hence in sync), led by the first; the leader's HW waits for
             * their first fetch.  Leaving ones only when no other lives. */
            st.nisr = 0;
            for (int pass = 0; pass < 2 && !st.nisr; pass++)
                for (int32_t i = 0; i < v->nreplicas; i++)
                    if (alive(b, v->replicas[i]) &&
                        (pass || !cl_broker_shutting(b, v->replicas[i])))
                        st.isr[st.nisr++] = v->replicas[i];
            if (!st.nisr)
                continue;                         /* created when a replica is alive */
            st.leader = st.isr[0];
            st.leader_epoch = 0;
            change = true;
        } else if ((rec = cl_ctl_recovery_adjust(b, ct, t, p, &st)) != CTL_REC_NONE) {
            if (rec == CTL_REC_WAIT)
                continue;                         /* cluster_recovery.c R2 */
            change = true;
        } else if (v->leader < 0 || !alive(b, v->leader)) {
            int32_t lead = -1;
            for (int32_t i = 0; i < v->nisr && lead < 0; i++)
                if (v->isr[i] != v->leader && alive(b, v->isr[i]))
                    lead = v->isr[i];
            bool unclean = lead < 0 && t->cfg.unclean_leader_election_enable &&
                           (lead = unclean_leader(b, t, p)) >= 0;
            if (lead < 0)
                continue;                         /* no one to elect: nothing to write */
            if (unclean) {                        /* it alone is in sync with itself */
                st.nisr = 1;
                st.isr[0] = lead;
            } else if (v->nisr > 1) {             /* the dead leader leaves the ISR */
                int32_t m = 0;
                for (int32_t i = 0; i < v->nisr; i++)
                    if (v->isr[i] != v->leader)
                        st.isr[m++] = v->isr[i];
                st.nisr = m;
            }
            st.leader = lead;
            st.leader_epoch = v->leader_epoch + 1;
            change = true;
        }
        if (!create && cl_ctl_leaders_adjust(b, ct, t->name, p, v, &st))
            change = true;                        /* cluster_leaders.c */
        bool fin = false;
        if (!create && cl_ctl_reassign_adjust(b, t, p, &st, &fin)) {
            change = true;                        /* cluster_reassign.c */
            if (fin) {
                if (!finished && !(finished = calloc((size_t)t->npartitions, sizeof *finished)))
                    abort();
                finished[p] = true;
            }
        }
        if (!change)
            continue;
        if (!txn) {
            txn = txn_begin(b);
            if (!(cb = calloc(1, sizeof *cb)))
                abort();
            snprintf(cb->topic, sizeof cb->topic, "%s", t->name);
        }
        if (create) {
            if (!any_state) {
                snprintf(path, sizeof path, "/brokers/topics/%s/partitions", t->name);
                cl_zk_txn_create(txn, path, NULL, -1, 0);
                any_state = true;
            }
            snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d", t->name, (int)p);
            cl_zk_txn_create(txn, path, NULL, -1, 0);
        }
        put_state(txn, b, t->name, p, &st, create, v->zk_version);
        ct->expect[p] = create ? 0 : v->zk_version + 1;
        cb->elected++;
        if (cl_zk_txn_count(txn) >= CTL_BATCH && !finished)
            txn_send(b, &txn, &cb, t->name);
    }
    /* Finished reassignments: the topic znode goes in the same transaction
     * as the last states (a state written in an earlier one only shrank
     * the ISR to the targets; the next reconcile finishes it again). */
    if (finished && txn)
        cl_ctl_reassign_put_assignment(txn, t, ct->assign_version, finished);
    free(finished);
    if (txn)
        txn_send(b, &txn, &cb, t->name);
}

static void reconcile_cb(bk_topic *t, void *arg)
{
    reconcile_topic(arg, t);
}

void cl_ctl_reconcile(bk_broker *b, const char *name)
{
    bk_cluster *cl = b->cl;
    if (!cl->active)
        return;
    if (!name) {
        view_topics_foreach(b, reconcile_cb, b);
        return;
    }
    bk_topic *t = view_topic_find(b, name, strlen(name));
    if (t)
        reconcile_topic(b, t);
}

/* ---- deletions ---------------------------------------------------------------------------- */

static void on_deleted(bk_broker *b, const zk_result *r, void *arg)
{
    ctl_batch *cb = arg;
    cl_topic *ct = cl_mirror_topic(b, cb->topic, false);
    if (ct && ct->writes > 0)
        ct->writes--;
    if (r->nops > 0 && r->op_rc[0] == ZBADVERSION) {
        cl_ctl_resign(b, "/controller_epoch moved on: another broker was elected");
    } else if (r->rc != ZOK) {
        if (ct && cb->last)
            ct->deleting = false;                 /* the next listing retries */
        BK_WARN("controller: deleting topic %s failed (%s); retrying", cb->topic,
                cl_zk_rc_str(r->rc));
    } else if (cb->last) {
        BK_INFO("controller: topic %s deleted", cb->topic);
        if (ct)
            ct->deleting = false;
    }
    free(cb);
}

static void delete_send(bk_broker *b, zk_txn **t, const char *topic, bool last)
{
    ctl_batch *cb = calloc(1, sizeof *cb);
    if (!cb)
        abort();
    snprintf(cb->topic, sizeof cb->topic, "%s", topic);
    cb->last = last;
    cl_topic *ct = cl_mirror_topic(b, topic, true);
    if (ct)
        ct->writes++;
    cl_zk_txn_commit(b->zk, *t, on_deleted, cb);
    *t = NULL;
}

static void delete_topic(bk_broker *b, const char *name)
{
    cl_topic *ct = cl_mirror_topic(b, name, true);
    if (!ct || ct->writes > 0)
        return;                                   /* running already */
    ct->deleting = true;
    bk_topic *t = view_topic_find(b, name, strlen(name));
    char path[MD_TOPIC_NAME_MAX + 64];
    zk_txn *txn = txn_begin(b);
    bool any_state = false;
    for (int32_t p = 0; t && p < t->npartitions; p++) {
        if (t->parts[p].zk_version < 0)
            continue;
        any_state = true;
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", name, (int)p);
        cl_zk_txn_delete(txn, path, -1);
        snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d", name, (int)p);
        cl_zk_txn_delete(txn, path, -1);
        if (cl_zk_txn_count(txn) >= CTL_BATCH) {
            delete_send(b, &txn, name, false);
            txn = txn_begin(b);
        }
    }
    if (t) {
        if (any_state) {
            snprintf(path, sizeof path, "/brokers/topics/%s/partitions", name);
            cl_zk_txn_delete(txn, path, -1);
        }
        snprintf(path, sizeof path, "/brokers/topics/%s", name);
        cl_zk_txn_delete(txn, path, -1);
        if (ct->config_version >= 0) {
            snprintf(path, sizeof path, "/config/topics/%s", name);
            cl_zk_txn_delete(txn, path, -1);
        }
    }
    snprintf(path, sizeof path, "/admin/delete_topics/%s", name);
    cl_zk_txn_delete(txn, path, -1);
    delete_send(b, &txn, name, true);
}

static void on_deletions(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    cl->deletions_refreshing = false;
    if (r->rc == ZOK && cl->active)
        for (int i = 0; i < r->nchildren; i++)
            delete_topic(b, r->children[i]);
    if (cl->deletions_again) {
        cl->deletions_again = false;
        cl_ctl_refresh_deletions(b);
    }
}

void cl_ctl_refresh_deletions(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (!cl->active)
        return;
    if (cl->deletions_refreshing) {
        cl->deletions_again = true;
        return;
    }
    cl->deletions_refreshing = true;
    cl_zk_children(b->zk, "/admin/delete_topics", true, on_deletions, NULL);
}
