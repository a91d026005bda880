/*
 * daemon/cluster/cluster_session.c — this broker as a member of the cluster: its
 * registration, what it does as the ZooKeeper session comes and goes, and
 * the ZooKeeper side of the topic write halves.
 *
 * Session states and what the broker does (on_session):
 *
 *   new session ─► register /brokers/ids/<id> (ephemeral), resync the
 *                  mirror, try to become controller
 *   connecting  ─► the connection is lost, the session may live on: keep
 *                  serving what it leads (ZooKeeper may just be restarting);
 *                  metadata changes fail with REQUEST_TIMED_OUT meanwhile
 *   connected   ─► (same session) resync: watches may have been missed
 *   expired     ─► others have seen this broker die and may have moved its
 *                  partitions: stop leading at once (fenced), resign as
 *                  controller; cluster_zk.c makes a new session
 *
 * Leadership fencing (view_cluster_fenced): a broker serves as leader only
 * while it is registered in this session, its mirror has caught up since
 * the session began, and the loop has not stood still for longer than ZooKeeper
 * would wait for it (a SIGSTOP, a swap storm): after such a stall it asks
 * ZooKeeper whether its registration is still its own before serving
 * again.  So a broker never acts on leadership another broker may have
 * been given meanwhile.
 *
 * Writes (cl_topic_*): the broker that receives CreateTopics,
 * CreatePartitions, DeleteTopics or a config change writes Kafka's znodes
 * itself (the assignment and config, /admin/delete_topics/<t>), as Kafka's
 * admin tools do; the controller does the rest (partition states,
 * deletion).  The write's answer waits (cl_wait) until this broker's own
 * mirror shows the change applied, so a client that asks again — here or
 * after a metadata refresh — sees it.
 *
 * Invariants:
 *   S1. fenced ⇔ !registered ∨ !synced ∨ stalled; registered and synced
 *       are reset by every new session and by expiry.
 *   S2. Each cl_wait ends exactly once: met (KP_NONE), past its deadline
 *       (REQUEST_TIMED_OUT), or at shutdown.
 *   S3. A topic is never written onto a broker that has left: its creation
 *       checks, in the same transaction, that every broker its assignment
 *       names is registered.  One that left as the request came (its
 *       registration deleted, this broker's mirror not yet told) fails the
 *       check; the broker's own assignment is then made again among the
 *       brokers registered now (an operator's is refused).
 */
#include "daemon/security/sec_authz.h"
#include "daemon/cluster/cluster.h"
#include "daemon/replication/repl_fetcher.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/replica/replica.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/replica/replica_logdir.h"

#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CL_TICK_MS 100

/* ---- waits ------------------------------------------------------------------------------ */

enum { W_CREATED, W_DELETED, W_PARTITIONS, W_CONFIG, W_ASSIGN };

struct cl_wait {
    cl_wait *next;
    int kind;
    char topic[MD_TOPIC_NAME_MAX + 1];
    int32_t count;                   /* W_PARTITIONS */
    int version;                     /* W_CONFIG, W_ASSIGN: the znode's version written */
    bk_topic_op *op;
    int64_t deadline_us;
};

static bool states_written(const bk_topic *t, int32_t count)
{
    if (t->npartitions < count)
        return false;
    for (int32_t p = 0; p < t->npartitions; p++)
        if (t->parts[p].zk_version < 0)
            return false;
    return true;
}

static bool wait_met(bk_broker *b, const cl_wait *w)
{
    bk_topic *t = view_topic_find(b, w->topic, strlen(w->topic));
    cl_topic *ct;
    switch (w->kind) {
    case W_CREATED:
        return t && states_written(t, 1);
    case W_DELETED:
        return !t;
    case W_PARTITIONS:
        return t && states_written(t, w->count);
    case W_CONFIG:
        ct = cl_mirror_topic(b, w->topic, false);
        return !t || (ct && ct->config_version >= w->version);
    case W_ASSIGN:
        ct = cl_mirror_topic(b, w->topic, false);
        return !t || (ct && ct->assign_version >= w->version);
    }
    return true;
}

static void wait_add(bk_broker *b, int kind, const char *topic, int32_t count, int version,
                     bk_topic_op *op)
{
    if (!op)
        return;
    cl_wait *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->kind = kind;
    snprintf(w->topic, sizeof w->topic, "%s", topic);
    w->count = count;
    w->version = version;
    w->op = op;
    int32_t ms = op->timeout_ms > 0 ? op->timeout_ms : 30000;
    w->deadline_us = bk_mono_us() + (int64_t)ms * 1000;
    if (wait_met(b, w)) {
        free(w);
        op->done(op, KP_NONE, "");
        return;
    }
    w->next = b->cl->waits;
    b->cl->waits = w;
}

void cl_wait_assignment(bk_broker *b, const char *topic, int version, bk_topic_op *op)
{
    wait_add(b, W_ASSIGN, topic, 0, version, op);
}

/* Ends the waits that are met (topic: only those on it; NULL: all) and,
 * with now_us, those past their deadline. */
static void waits_check(bk_broker *b, const char *topic, int64_t now_us)
{
    cl_wait **pp = &b->cl->waits, *done = NULL;
    while (*pp) {
        cl_wait *w = *pp;
        bool met = (!topic || !strcmp(w->topic, topic)) && wait_met(b, w);
        bool late = now_us && w->deadline_us <= now_us;
        if (!met && !late) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        w->count = met ? KP_NONE : KP_REQUEST_TIMED_OUT;   /* reused as the verdict */
        w->next = done;
        done = w;
    }
    /* Answered after the walk: a done callback may add a new wait. */
    for (cl_wait *w = done, *next; w; w = next) {
        next = w->next;
        char err[MD_TOPIC_NAME_MAX + 160];
        err[0] = 0;
        if (w->count != KP_NONE)
            snprintf(err, sizeof err, "The change to topic %s is stored in ZooKeeper but "
                     "the cluster did not show it applied within the request's timeout.",
                     w->topic);
        w->op->done(w->op, w->count, err);
        free(w);
    }
}

void cl_topic_applied(bk_broker *b, const char *name)
{
    waits_check(b, name, 0);
    cl_ctl_reconcile(b, name);
    repl_fetchers_update(b);
}

void cl_brokers_changed(bk_broker *b)
{
    cl_ctl_leaders_brokers_changed(b);
    cl_ctl_reconcile(b, NULL);
    if (view_controller_id(b) < 0)
        cl_ctl_elect(b);
    repl_fetchers_update(b);
}

/* ---- errors ------------------------------------------------------------------------------ */

int cl_zk_error(bk_broker *b, int zrc, const char *what, char *err, size_t errlen)
{
    if (zrc == ZCONNECTIONLOSS || zrc == ZOPERATIONTIMEOUT || zrc == ZINVALIDSTATE ||
        zrc == ZSESSIONEXPIRED || zrc == ZCLOSING || zrc == ZSESSIONMOVED) {
        snprintf(err, errlen, "%s: ZooKeeper (zookeeper.connect=%s) is unreachable; "
                 "metadata changes wait for it.", what, cl_zk_servers(b->zk));
        return KP_REQUEST_TIMED_OUT;
    }
    snprintf(err, errlen, "%s: ZooKeeper answered %s.", what, cl_zk_rc_str(zrc));
    return KP_UNKNOWN_SERVER_ERROR;
}

static int not_connected(bk_broker *b, const char *what, char *err, size_t errlen)
{
    if (cl_zk_connected(b->zk))
        return KP_NONE;
    return cl_zk_error(b, ZCONNECTIONLOSS, what, err, errlen);
}

/* ---- the write halves' ZooKeeper side ---------------------------------------------------- */

typedef struct cl_write {
    int kind;
    char topic[MD_TOPIC_NAME_MAX + 1];
    int32_t count;
    bk_topic_op *op;
    zk_txn *retry;                   /* create: the same without the config create */
    /* create: what it takes to write it again on other brokers (S3) */
    int16_t rf;
    bool assigned;                   /* the replicas are this broker's choice */
    int tries;
    uint8_t id[16];
    char *cfg;                       /* /config/topics/<t>'s JSON */
    int cfg_len;
} cl_write;

static cl_write *write_new(int kind, const char *topic, int32_t count, bk_topic_op *op)
{
    cl_write *w = calloc(1, sizeof *w);
    if (!w)
        abort();
    w->kind = kind;
    snprintf(w->topic, sizeof w->topic, "%s", topic);
    w->count = count;
    w->op = op;
    if (op)
        op->pending = true;
    return w;
}

static void write_free(cl_write *w)
{
    cl_zk_txn_free(w->retry);
    free(w->cfg);
    free(w);
}

static void write_fail(bk_broker *b, cl_write *w, int rc, const char *err)
{
    (void)b;
    BK_WARN("topic %s: %s", w->topic, err);
    if (w->op)
        w->op->done(w->op, rc, err);
    write_free(w);
}

static void on_create_written(bk_broker *b, const zk_result *r, void *arg);

/* The creation's transaction (and its retry, w->retry, for a config znode
 * left behind), sent: the config and the assignment, and a check that
 * each broker it names is registered (S3). */
static void create_send(bk_broker *b, cl_write *w, const int32_t *replicas)
{
    md_partition_state *parts = calloc((size_t)w->count, sizeof *parts);
    if (!parts)
        abort();
    int32_t named[CL_MAX_BROKERS];
    int nnamed = 0;
    for (int32_t p = 0; p < w->count; p++) {
        parts[p].nreplicas = w->rf;
        for (int16_t j = 0; j < w->rf; j++) {
            int32_t id = replicas[(size_t)p * (size_t)w->rf + (size_t)j];
            parts[p].replicas[j] = id;
            bool seen = false;
            for (int k = 0; k < nnamed && !seen; k++)
                seen = named[k] == id;
            if (!seen && nnamed < CL_MAX_BROKERS)
                named[nnamed++] = id;
        }
    }
    kp_buf assign;
    kp_buf_init(&assign);
    cl_zj_topic_format(w->id, parts, w->count, &assign);
    free(parts);
    char cpath[MD_TOPIC_NAME_MAX + 32], tpath[MD_TOPIC_NAME_MAX + 32], bpath[64];
    snprintf(cpath, sizeof cpath, "/config/topics/%s", w->topic);
    snprintf(tpath, sizeof tpath, "/brokers/topics/%s", w->topic);
    /* Kafka's order: the config first, so a watch on the topic finds it. */
    zk_txn *t = cl_zk_txn_new(), *retry = cl_zk_txn_new();
    cl_zk_txn_create(t, cpath, w->cfg, w->cfg_len, 0);
    cl_zk_txn_create(t, tpath, (const char *)assign.data, (int)assign.len, 0);
    cl_zk_txn_set(retry, cpath, w->cfg, w->cfg_len, -1);
    cl_zk_txn_create(retry, tpath, (const char *)assign.data, (int)assign.len, 0);
    for (int k = 0; k < nnamed; k++) {
        snprintf(bpath, sizeof bpath, "/brokers/ids/%d", (int)named[k]);
        cl_zk_txn_check(t, bpath, -1);
        cl_zk_txn_check(retry, bpath, -1);
    }
    kp_buf_free(&assign);
    cl_zk_txn_free(w->retry);
    w->retry = retry;
    cl_zk_txn_commit(b->zk, t, on_create_written, w);
}

/* S3: a broker the assignment named left just before the write (its
 * registration was deleted, and this broker's mirror had not seen it go).
 * The registered brokers, read now, that the view also shows alive. */
static void on_create_brokers(bk_broker *b, const zk_result *r, void *arg)
{
    cl_write *w = arg;
    char err[400];
    if (r->rc != ZOK) {
        int rc = cl_zk_error(b, r->rc, "cannot create the topic", err, sizeof err);
        write_fail(b, w, rc, err);
        return;
    }
    int32_t view[CL_MAX_BROKERS], live[CL_MAX_BROKERS];
    int nview = view_live_brokers(b, view, CL_MAX_BROKERS), n = 0;
    if (nview > CL_MAX_BROKERS)
        nview = CL_MAX_BROKERS;
    for (int i = 0; i < nview; i++)
        for (int c = 0; c < r->nchildren; c++)
            if (atol(r->children[c]) == view[i] && n < CL_MAX_BROKERS) {
                live[n++] = view[i];
                break;
            }
    int32_t *replicas = malloc((size_t)w->count * (size_t)w->rf * sizeof *replicas);
    if (!replicas)
        abort();
    int rc = view_assign_among(b, live, n, 0, w->count, w->rf, -1, replicas, err,
                                  sizeof err);
    if (rc != KP_NONE) {
        free(replicas);
        write_fail(b, w, rc, err);
        return;
    }
    BK_INFO("topic %s: a broker it was placed on left meanwhile; placing it again on the "
            "%d registered", w->topic, n);
    create_send(b, w, replicas);
    free(replicas);
}

static void on_create_written(bk_broker *b, const zk_result *r, void *arg)
{
    cl_write *w = arg;
    char err[400];
    if (r->rc == ZOK) {
        BK_INFO("topic %s: created in ZooKeeper with %d partitions", w->topic, (int)w->count);
        wait_add(b, W_CREATED, w->topic, w->count, 0, w->op);
        cl_mirror_refresh_topic(b, w->topic);          /* do not wait for the watch */
        write_free(w);
        return;
    }
    /* op 0: /config/topics/<t>, op 1: /brokers/topics/<t>, then the checks
     * of the brokers it names (S3) */
    int gone = -1;
    for (int i = 2; i < r->nops && gone < 0; i++)
        if (r->op_rc[i] == ZNONODE)
            gone = i;
    if (gone >= 0 && w->assigned && w->tries++ < 3) {
        cl_zk_children(b->zk, "/brokers/ids", false, on_create_brokers, w);
        return;
    }
    if (gone >= 0) {
        snprintf(err, sizeof err, "The partition assignment names a broker that is not "
                 "registered (it left as the topic was being created).");
        write_fail(b, w, KP_INVALID_REPLICA_ASSIGNMENT, err);
        return;
    }
    if (r->nops >= 2 && r->op_rc[1] == ZNODEEXISTS) {
        snprintf(err, sizeof err, "Topic '%s' already exists.", w->topic);
        write_fail(b, w, KP_TOPIC_ALREADY_EXISTS, err);
        return;
    }
    if (r->nops >= 2 && r->op_rc[0] == ZNODEEXISTS && w->retry) {
        /* A config znode left behind (Kafka leaves none; an operator may
         * have written one): overwrite it with the new topic's. */
        zk_txn *t = w->retry;
        w->retry = NULL;
        cl_zk_txn_commit(b->zk, t, on_create_written, w);
        return;
    }
    int rc = cl_zk_error(b, r->rc, "cannot create the topic", err, sizeof err);
    write_fail(b, w, rc, err);
}

int cl_topic_create(bk_broker *b, const char *name, int32_t partitions,
                    const int32_t *replicas, int16_t rf, bool assigned, const md_kv *configs,
                    size_t nconfigs, bk_topic_op *op, char *err, size_t errlen)
{
    int rc = not_connected(b, "cannot create the topic", err, errlen);
    if (rc != KP_NONE)
        return rc;
    cl_write *w = write_new(W_CREATED, name, partitions, op);
    w->rf = rf;
    w->assigned = assigned;
    md_uuid_random(w->id);
    kp_buf cfg;
    kp_buf_init(&cfg);
    cl_zj_config_format(configs, nconfigs, &cfg);
    if (!(w->cfg = malloc(cfg.len + 1)))
        abort();
    memcpy(w->cfg, cfg.data, cfg.len);
    w->cfg_len = (int)cfg.len;
    kp_buf_free(&cfg);
    create_send(b, w, replicas);
    return KP_NONE;
}

static void on_delete_requested(bk_broker *b, const zk_result *r, void *arg)
{
    cl_write *w = arg;
    if (r->rc == ZOK || r->rc == ZNODEEXISTS) {
        BK_INFO("topic %s: deletion requested (/admin/delete_topics/%s)", w->topic, w->topic);
        wait_add(b, W_DELETED, w->topic, 0, 0, w->op);
        free(w);
        return;
    }
    char err[400];
    int rc = cl_zk_error(b, r->rc, "cannot request the deletion", err, sizeof err);
    write_fail(b, w, rc, err);
}

int cl_topic_delete(bk_broker *b, const char *name, bk_topic_op *op, char *err, size_t errlen)
{
    int rc = not_connected(b, "cannot delete the topic", err, errlen);
    if (rc != KP_NONE)
        return rc;
    char path[MD_TOPIC_NAME_MAX + 32];
    snprintf(path, sizeof path, "/admin/delete_topics/%s", name);
    cl_zk_create(b->zk, path, NULL, -1, 0, on_delete_requested,
              write_new(W_DELETED, name, 0, op));
    return KP_NONE;
}

static void on_assignment_set(bk_broker *b, const zk_result *r, void *arg)
{
    cl_write *w = arg;
    char err[400];
    if (r->rc == ZOK) {
        BK_INFO("topic %s: now %d partitions in ZooKeeper", w->topic, (int)w->count);
        wait_add(b, W_PARTITIONS, w->topic, w->count, 0, w->op);
        cl_mirror_refresh_topic(b, w->topic);
        free(w);
        return;
    }
    int rc;
    if (r->rc == ZBADVERSION) {
        snprintf(err, sizeof err, "Topic %s changed while its partitions were being "
                 "added; try again.", w->topic);
        rc = KP_REASSIGNMENT_IN_PROGRESS;
    } else {
        rc = cl_zk_error(b, r->rc, "cannot add partitions", err, sizeof err);
    }
    write_fail(b, w, rc, err);
}

int cl_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                            const int32_t *replicas, int16_t rf, bk_topic_op *op,
                            char *err, size_t errlen)
{
    int rc = not_connected(b, "cannot add partitions", err, errlen);
    if (rc != KP_NONE)
        return rc;
    bk_topic *t = view_topic_find(b, name, strlen(name));
    cl_topic *ct = cl_mirror_topic(b, name, false);
    if (!t || !ct || ct->assign_version < 0) {
        snprintf(err, errlen, "Topic %s is not known to this broker's mirror yet.", name);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    md_partition_state *parts = calloc((size_t)count, sizeof *parts);
    if (!parts) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    for (int32_t p = 0; p < count; p++) {
        if (p < t->npartitions) {
            parts[p].nreplicas = t->parts[p].nreplicas;
            memcpy(parts[p].replicas, t->parts[p].replicas, sizeof parts[p].replicas);
            parts[p].adding = t->parts[p].adding;         /* a reassignment goes on */
            parts[p].removing = t->parts[p].removing;
        } else {
            parts[p].nreplicas = rf;
            memcpy(parts[p].replicas, replicas + (size_t)(p - t->npartitions) * (size_t)rf,
                   (size_t)rf * sizeof(int32_t));
        }
    }
    kp_buf assign;
    kp_buf_init(&assign);
    cl_zj_topic_format(t->id, parts, count, &assign);
    free(parts);
    char path[MD_TOPIC_NAME_MAX + 32];
    snprintf(path, sizeof path, "/brokers/topics/%s", name);
    cl_zk_set(b->zk, path, (const char *)assign.data, (int)assign.len, ct->assign_version,
           on_assignment_set, write_new(W_PARTITIONS, name, count, op));
    kp_buf_free(&assign);
    return KP_NONE;
}

static void on_config_set(bk_broker *b, const zk_result *r, void *arg)
{
    cl_write *w = arg;
    char err[400];
    if (r->rc == ZOK) {
        BK_INFO("topic %s: configs changed in ZooKeeper", w->topic);
        wait_add(b, W_CONFIG, w->topic, 0, r->stat.version, w->op);
        cl_mirror_refresh_topic(b, w->topic);
        free(w);
        return;
    }
    int rc;
    if (r->rc == ZBADVERSION || r->rc == ZNODEEXISTS) {
        snprintf(err, sizeof err, "The configs of topic %s changed meanwhile; try again.",
                 w->topic);
        rc = KP_INVALID_REQUEST;
    } else {
        rc = cl_zk_error(b, r->rc, "cannot change the configs", err, sizeof err);
    }
    write_fail(b, w, rc, err);
}

int cl_topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                         bk_topic_op *op, char *err, size_t errlen)
{
    int rc = not_connected(b, "cannot change the configs", err, errlen);
    if (rc != KP_NONE)
        return rc;
    cl_topic *ct = cl_mirror_topic(b, name, true);
    kp_buf cfg;
    kp_buf_init(&cfg);
    cl_zj_config_format(kv, n, &cfg);
    char path[MD_TOPIC_NAME_MAX + 32];
    snprintf(path, sizeof path, "/config/topics/%s", name);
    cl_write *w = write_new(W_CONFIG, name, 0, op);
    if (ct && ct->config_version >= 0)
        cl_zk_set(b->zk, path, (const char *)cfg.data, (int)cfg.len, ct->config_version,
               on_config_set, w);
    else
        cl_zk_create(b->zk, path, (const char *)cfg.data, (int)cfg.len, 0, on_config_set, w);
    kp_buf_free(&cfg);
    return KP_NONE;
}

/* ---- registration ------------------------------------------------------------------------- */

static void register_broker(bk_broker *b);

static void on_registration(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    if (r->rc == ZOK && r->stat.ephemeralOwner == cl_zk_session_id(b->zk)) {
        if (!cl->registered) {
            BK_INFO("zookeeper: registered as broker %d (/brokers/ids/%d)",
                    (int)b->cfg->broker_id, (int)b->cfg->broker_id);
            cl_logdir_renotify(b);    /* a new registration: the controller forgets (cluster_logdirs.c) */
        }
        cl->registered = true;
        cl_fence_update(b);
        cl->register_retry_us = 0;
        cl_recovery_registered(b, r->stat.czxid);
        cl_ctl_elect(b);
        return;
    }
    if (r->rc == ZOK) {
        BK_WARN("zookeeper: /brokers/ids/%d belongs to another session (0x%llx): an "
                "earlier run of this broker whose session has not expired yet, or another "
                "broker with broker.id=%d; retrying every second",
                (int)b->cfg->broker_id, (unsigned long long)r->stat.ephemeralOwner,
                (int)b->cfg->broker_id);
    }
    cl->register_retry_us = bk_mono_us() + 1000000;
}

static void on_registered(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    char path[64];
    snprintf(path, sizeof path, "/brokers/ids/%d", (int)b->cfg->broker_id);
    if (r->rc == ZOK || r->rc == ZNODEEXISTS)
        cl_zk_exists(b->zk, path, false, on_registration, NULL);   /* whose is it? */
    else
        b->cl->register_retry_us = bk_mono_us() + 1000000;
}

static void register_now(bk_broker *b)
{
    const bk_config *c = b->cfg;
    zj_broker z = { .id = c->broker_id, .port = c->advertised_port,
                    .timestamp_ms = bk_now_ms() };
    snprintf(z.host, sizeof z.host, "%s", c->advertised_host);
    snprintf(z.rack, sizeof z.rack, "%s", c->rack);
    /* Every listener, Kafka's form: other brokers pick the inter-broker
     * one, and Metadata gives each client its own listener's (net_server.c
     * inv. 6). */
    bk_config_endpoints(c, z.endpoints, sizeof z.endpoints);
    bk_config_protocol_map(c, z.protocol_map, sizeof z.protocol_map);
    kp_buf out;
    kp_buf_init(&out);
    cl_zj_broker_format(&z, &out);
    char path[64];
    snprintf(path, sizeof path, "/brokers/ids/%d", (int)c->broker_id);
    cl_zk_create(b->zk, path, (const char *)out.data, (int)out.len, ZOO_EPHEMERAL,
              on_registered, NULL);
    kp_buf_free(&out);
}

/* The log ends first (cluster_recovery.c): a controller that sees the
 * registration finds the log this broker came back with. */
static void register_broker(bk_broker *b)
{
    cl_recovery_publish(b, register_now);
}

/* ---- the cluster id ------------------------------------------------------------------------ */

static void on_cluster_id(bk_broker *b, const zk_result *r, void *arg);

static void on_cluster_id_created(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    if (r->rc == ZOK || r->rc == ZNODEEXISTS)
        cl_zk_get(b->zk, "/cluster/id", false, on_cluster_id, (void *)1);
}

static void on_cluster_id(bk_broker *b, const zk_result *r, void *arg)
{
    char id[MD_CLUSTER_ID_MAX + 1], err[128];
    if (r->rc == ZNONODE && !arg) {
        kp_buf out;
        kp_buf_init(&out);
        cl_zj_cluster_id_format(b->cluster_id, &out);       /* the first broker's */
        cl_zk_create(b->zk, "/cluster/id", (const char *)out.data, (int)out.len, 0,
                  on_cluster_id_created, NULL);
        kp_buf_free(&out);
        return;
    }
    if (r->rc != ZOK)
        return;
    if (cl_zj_cluster_id_parse(r->data ? r->data : "", r->len > 0 ? (size_t)r->len : 0, id,
                            err, sizeof err) != 0) {
        BK_ERROR("zookeeper: /cluster/id is not Kafka's JSON (%s)", err);
        return;
    }
    if (strcmp(id, b->cluster_id)) {
        BK_INFO("cluster id %s (from ZooKeeper; this broker's store had %s)", id,
                b->cluster_id);
        snprintf(b->cluster_id, sizeof b->cluster_id, "%s", id);
        if (md_cluster_id_set(b->db, id, err, sizeof err) != 0)
            BK_ERROR("cannot store the cluster id: %s", err);
    }
}

/* ---- the session -------------------------------------------------------------------------- */

static void on_session(bk_broker *b, enum zk_session s, bool fresh)
{
    bk_cluster *cl = b->cl;
    switch (s) {
    case ZK_CONNECTED:
        if (fresh) {
            BK_INFO("zookeeper: session 0x%llx established with %s",
                    (unsigned long long)cl_zk_session_id(b->zk), cl_zk_servers(b->zk));
            cl->registered = cl->synced = false;
            cl->stalled = false;
            cl_fence_update(b);
            cl_mirror_resync_reset(b);
            register_broker(b);
            cl_zk_get(b->zk, "/cluster/id", false, on_cluster_id, NULL);
        } else {
            BK_INFO("zookeeper: reconnected (session 0x%llx lives on); resyncing",
                    (unsigned long long)cl_zk_session_id(b->zk));
        }
        cl_producer_ids_floor_read(b);   /* first: before any mirror state (PB6) */
        cl_mirror_resync(b);
        cl_broker_configs_refresh(b);             /* watches may have been missed */
        cl_authz_zk_resync(b);           /* the ACLs too (cluster_acls.c) */
        cl_sasl_zk_resync(b);
        cl_links_resync(b);              /* cluster links (cluster_links.c) */
        cl_notices_purge_all(b);         /* Kafka's, at each start (cluster_notices.c) */
        cl_producer_ids_prefetch(b);     /* a block before the first InitProducerId */
        break;
    case ZK_CONNECTING:
        cl_producer_ids_floor_lost(b);   /* PB7 */
        BK_WARN("zookeeper: lost the connection to %s; serving the partitions this "
                "broker leads meanwhile, metadata changes wait", cl_zk_servers(b->zk));
        break;
    case ZK_EXPIRED:
        BK_WARN("zookeeper: session expired: the cluster has taken this broker for dead "
                "and may have moved its partitions, so it stops acting as leader now, "
                "and registers again with a new session");
        cl->registered = cl->synced = false;
        cl_fence_update(b);
        cl_producer_ids_floor_lost(b);   /* PB7 */
        cl_ctl_resign(b, "the ZooKeeper session expired");
        repl_fetchers_update(b);           /* follows nothing until in step (repl_fetcher.c F5) */
        break;
    }
}

void cl_fence_update(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    view_set_fenced(b, !cl->registered || !cl->synced || cl->stalled);   /* S1 */
}

static void on_probe(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    bk_cluster *cl = b->cl;
    if (!cl->stalled)
        return;
    if (r->rc == ZOK && r->stat.ephemeralOwner == cl_zk_session_id(b->zk)) {
        cl->stalled = false;
        cl_fence_update(b);
        BK_INFO("zookeeper: the session survived the stall; acting as leader again");
    } else if (r->rc == ZNONODE && cl->registered) {
        cl->registered = false;
        cl_fence_update(b);
        register_broker(b);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_broker *b = arg;
    bk_cluster *cl = b->cl;
    int64_t now = bk_mono_us();
    int64_t gap = now - cl->last_tick_us;
    cl->last_tick_us = now;
    int64_t limit = (int64_t)b->cfg->zookeeper_session_timeout_ms * 1000 * 2 / 3;
    if (gap > limit && !cl->stalled && cl->registered) {
        cl->stalled = true;
        cl_fence_update(b);
        BK_WARN("zookeeper: this broker stood still for %lld ms, longer than ZooKeeper "
                "waits for it; not acting as leader until ZooKeeper confirms its session",
                (long long)(gap / 1000));
    }
    if (cl->stalled && cl_zk_connected(b->zk)) {
        char path[64];
        snprintf(path, sizeof path, "/brokers/ids/%d", (int)b->cfg->broker_id);
        cl_zk_exists(b->zk, path, false, on_probe, NULL);
    }
    if (cl->register_retry_us && now >= cl->register_retry_us && cl_zk_connected(b->zk)) {
        cl->register_retry_us = 0;
        register_broker(b);
    }
    if (cl->registered && view_controller_id(b) < 0 && !cl->active)
        cl_ctl_elect(b);
    static int n;
    if (cl->active && ++n % 50 == 0)
        cl_ctl_refresh_deletions(b);                 /* every 5 s: retries failed ones */
    waits_check(b, NULL, now);
    repl_isr_tick(b);                               /* replica.lag.time.max.ms */
    cl_ctl_leaders_tick(b);                          /* auto.leader.rebalance.enable */
    cl_logdir_tick(b);                            /* a failed log dir's notification */
    cl_ctl_recovery_tick(b);                         /* leader.recovery.wait.ms */
}

static void on_watch(bk_broker *b, int type, const char *path)
{
    if (cl_sasl_zk_on_watch(b, type, path))     /* /config/users (cluster_users.c) */
        return;
    if (cl_producer_ids_on_watch(b, type, path))   /* the producer id floor */
        return;
    if (cl_links_on_watch(b, type, path))       /* /sluice/ (cluster_links.c) */
        return;
    if (!cl_authz_zk_on_watch(b, type, path))
        cl_mirror_on_watch(b, type, path);
}

/* repl_cluster.isr_write: the ISR write as the partition's state znode. */
static void on_repl_isr_written(bk_broker *b, const zk_result *r, void *arg)
{
    repl_isr_done *d = arg;
    d->done(b, r->rc, cl_zk_rc_str(r->rc), d);
}

static void cl_repl_isr_write(bk_broker *b, const char *path, const md_partition_state *st,
                              int version, repl_isr_done *arg)
{
    kp_buf out;
    kp_buf_init(&out);
    cl_zj_state_format(st, &out);
    cl_zk_set(b->zk, path, (const char *)out.data, (int)out.len, version, on_repl_isr_written,
              arg);
    kp_buf_free(&out);
}

const repl_cluster_ops cl_repl_ops = { .isr_write = cl_repl_isr_write,
                                      .broker_shutting = cl_broker_shutting,
                                      .view_changed = cl_recovery_view_changed,
                                      .isr_counted = cl_ctl_isr_counted };

int cl_start(bk_broker *b, char *err, size_t errlen)
{
    bk_cluster *cl = calloc(1, sizeof *cl);
    if (!cl) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    cl->b = b;
    cl->repl.synced = &cl->synced;
    b->cl = cl;
    b->repl = &cl->repl;
    view_cluster_start(b);                     /* fenced, no controller yet */
    b->on_logdir_failed = cl_logdir_failed;
    b->on_producer_id_next = cl_producer_id_next;
    b->on_producer_id_floor = cl_producer_id_floor;
    b->on_producer_id_fresh = cl_producer_ids_fresh;
    zk_hooks hooks = { .on_session = on_session, .on_watch = on_watch };
    if (cl_zk_start(b, &hooks, &b->zk, err, errlen) != 0) {
        free(cl);
        b->cl = NULL;
        b->repl = NULL;
        view_cluster_stop(b);
        b->on_logdir_failed = NULL;
        b->on_producer_id_next = NULL;
        b->on_producer_id_floor = NULL;
        b->on_producer_id_fresh = NULL;
        return -1;
    }
    cl->zk = b->zk;
    if (repl_fetchers_start(b) != 0) {
        snprintf(err, errlen, "cannot start the replica fetchers");
        cl_stop(b);
        return -1;
    }
    cl->tick = event_new(b->base, -1, EV_PERSIST, on_tick, b);
    struct timeval tv = { 0, CL_TICK_MS * 1000 };
    if (bk_event_add(cl->tick, &tv, "cluster tick") != 0) {
        snprintf(err, errlen, "cannot arm the cluster tick");
        cl_stop(b);
        return -1;
    }
    cl->last_tick_us = bk_mono_us();
    return 0;
}

void cl_stop(bk_broker *b)
{
    bk_cluster *cl = b->cl;
    if (!cl)
        return;
    repl_fetchers_stop(b);             /* before the view they follow goes */
    repl_peers_stop(b);                /* every call waiting is answered */
    /* The registration goes first: a broker that sees the controller gone
     * then already knows this broker is, and places no new partition on it. */
    char path[64];
    snprintf(path, sizeof path, "/brokers/ids/%d", (int)b->cfg->broker_id);
    cl_zk_delete_own_now(b->zk, path);
    cl_controlled_shutdown_end(b);   /* after the registration: never eligible again */
    if (cl->active)
        cl_zk_delete_own_now(b->zk, "/controller");
    cl_authz_zk_stop(b);                /* before its calls come back ZCLOSING */
    cl_reassign_stop(b);
    cl_zk_stop(b->zk);                     /* our ephemeral znodes vanish now */
    b->zk = NULL;
    for (cl_wait *w = cl->waits, *next; w; w = next) {
        next = w->next;
        w->op->done(w->op, KP_REQUEST_TIMED_OUT, "The broker is shutting down.");
        free(w);
    }
    if (cl->tick)
        event_free(cl->tick);
    cl_mirror_free(b);
    cl_recovery_free(b);
    free(cl);
    b->cl = NULL;
    b->repl = NULL;
    view_cluster_stop(b);
    b->on_logdir_failed = NULL;
    b->on_producer_id_next = NULL;
    b->on_producer_id_floor = NULL;
    b->on_producer_id_fresh = NULL;
}
