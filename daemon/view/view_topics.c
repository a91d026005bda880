/*
 * daemon/view/view_topics.c — the one path per topic fact: topics, partition counts,
 * config overrides and partition state, each with a write half and an
 * apply half.
 *
 *   write half   validates and stores the fact through b->store
 *                (daemon/view/view_store.h): md_* on SQLite in standalone mode; in
 *                cluster mode, ZooKeeper (whose watch mirrors it into
 *                SQLite on every broker).
 *   apply half   view_topic_apply(name): makes the cluster view (view.c) and
 *                the local replicas (replica.c) match what the store holds
 *                for that topic — created, grown, reconfigured, re-led or
 *                deleted.  Idempotent: applying twice changes nothing, so a
 *                watch that fires again, or a full resync after a ZooKeeper
 *                reconnect, is safe.
 *
 * Callers: the Kafka admin APIs (api_topics.c, api_configs.c), Metadata's
 * auto-creation, the SQL surface's writes (sql_worker.c) and startup
 * (view_topics_load applies every stored topic).  Nobody else writes topic
 * facts or changes the registries.  metadata/README.md tables every fact.
 *
 * Invariants:
 *   P1. After a write half succeeds, its apply half runs before the caller
 *       answers, so the answer and every later request see the change.
 *   P2. A write whose apply fails for a new topic is undone in the store
 *       (the topic was never visible); for an existing topic the store
 *       wins and the failure is logged (the broker serves what it could
 *       open; the next apply retries).
 */
#include "daemon/md_sync.h"
#include "daemon/view/view_registry.h"

#include "daemon/view/view_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void view_seg_config(const md_topic_config *c, seg_config *out)
{
    seg_config_default(out);
    out->segment_bytes = (uint64_t)c->segment_bytes;
    out->segment_ms = c->segment_ms;
    out->segment_jitter_ms = c->segment_jitter_ms;
    out->index_interval_bytes = (uint32_t)c->index_interval_bytes;
    out->segment_index_bytes = (uint32_t)c->segment_index_bytes;
}

static int resolve_config(bk_broker *b, const char *topic, md_topic_config *cfg,
                          char *err, size_t errlen)
{
    md_kv *kv = NULL;
    size_t n = 0;
    int rc = md_topic_configs(b->db, topic, &kv, &n);
    if (rc != KP_NONE) {
        snprintf(err, errlen, "cannot read configs of topic %s", topic);
        return rc;
    }
    rc = md_topic_config_resolve(b->cfg->topic_defaults, b->cfg->ntopic_defaults,
                                 kv, n, cfg, err, errlen);
    md_kv_free(kv, n);
    return rc;
}

/* ---- the apply half ----------------------------------------------------------------- */

static bool hosts(const md_partition_state *st, int32_t self)
{
    for (int32_t i = 0; i < st->nreplicas; i++)
        if (st->replicas[i] == self)
            return true;
    return false;
}

static void free_topic(bk_topic *t)
{
    free(t->parts);
    free(t);
}

/* Out of the view first (V3: woken waiters find nothing), then each local
 * replica closed; destroy deletes the logs. */
static void remove_topic(bk_broker *b, bk_topic *t, bool in_view, bool destroy)
{
    if (in_view)
        view_remove(b, t);
    for (int32_t i = 0; i < t->npartitions; i++)
        if (t->parts[i].local)
            b->replica_hooks->close(b, t->parts[i].local, destroy);
    free_topic(t);
}

static void set_view_state(bk_pview *v, const md_partition_state *st)
{
    v->leader = st->leader;
    v->leader_epoch = st->leader_epoch;
    v->nreplicas = st->nreplicas;
    v->nisr = st->nisr;
    memcpy(v->replicas, st->replicas, sizeof v->replicas);
    memcpy(v->isr, st->isr, sizeof v->isr);
    v->controller_epoch = st->controller_epoch;
    v->zk_version = st->zk_version;
    v->adding = st->adding;
    v->removing = st->removing;
}

/* The store's partitions of t, applied: state into the view, local
 * replicas opened where this broker became a replica and closed (their
 * logs deleted) where it stopped being one. */
static int apply_partitions(bk_broker *b, bk_topic *t, const md_partition *parts,
                            size_t n, char *err, size_t errlen)
{
    if ((size_t)t->npartitions < n) {
        bk_pview *np = realloc(t->parts, n * sizeof *np);
        if (!np) {
            snprintf(err, errlen, "out of memory");
            return KP_UNKNOWN_SERVER_ERROR;
        }
        memset(np + t->npartitions, 0, (n - (size_t)t->npartitions) * sizeof *np);
        t->parts = np;
    }
    int32_t self = b->cfg->broker_id;
    int rc = KP_NONE;
    for (size_t i = 0; i < n; i++) {
        bk_pview *v = &t->parts[i];
        set_view_state(v, &parts[i].st);
        if ((size_t)t->npartitions <= i)
            t->npartitions = (int32_t)i + 1;
        bool want = hosts(&parts[i].st, self), opened = false;
        if (want && !v->local && b->replica_hooks) {
            char e[MD_ERRLEN];
            int r = b->replica_hooks->open(b, t, (int32_t)i, &parts[i], e, sizeof e);
            opened = r == KP_NONE;
            if (r != KP_NONE && rc == KP_NONE) {
                rc = r;
                snprintf(err, errlen, "%s", e);
            }
        } else if (!want && v->local) {
            BK_INFO("partition %s-%zu: no longer a replica here; deleting its log",
                    t->name, i);
            b->replica_hooks->close(b, v->local, true);
        }
        if (v->local)
            b->replica_hooks->view_changed(b, v->local, v->leader_epoch, opened);
    }
    return rc;
}

int view_topic_apply(bk_broker *b, const char *name, char *err, size_t errlen)
{
    err[0] = 0;
    md_topic mt;
    bk_topic *t = view_topic_find(b, name, strlen(name));
    int rc = md_topic_get(b->db, name, &mt);
    if (rc == KP_UNKNOWN_TOPIC_OR_PARTITION || (rc == KP_NONE && t &&
                                                memcmp(t->id, mt.id, 16))) {
        if (t) {                             /* deleted (or deleted and recreated) */
            remove_topic(b, t, true, true);
            t = NULL;
        }
        if (rc != KP_NONE)
            return KP_NONE;
    }
    if (rc != KP_NONE) {
        snprintf(err, errlen, "cannot read topic %s from the metadata store", name);
        return rc;
    }
    md_topic_config cfg;
    if ((rc = resolve_config(b, name, &cfg, err, errlen)) != KP_NONE)
        return rc;
    md_partition *parts = NULL;
    size_t n = 0;
    if ((rc = md_partition_list(b->db, name, &parts, &n)) != KP_NONE) {
        snprintf(err, errlen, "cannot read partitions of topic %s", name);
        return rc;
    }
    bool created = !t;
    if (created) {
        if (!(t = calloc(1, sizeof *t))) {
            free(parts);
            snprintf(err, errlen, "out of memory");
            return KP_UNKNOWN_SERVER_ERROR;
        }
        snprintf(t->name, sizeof t->name, "%s", mt.name);
        memcpy(t->id, mt.id, sizeof t->id);
        t->internal = mt.internal;
    }
    bool reconfigured = !created && memcmp(&t->cfg, &cfg, sizeof cfg);
    t->cfg = cfg;
    if (reconfigured) {
        seg_config sc;
        view_seg_config(&cfg, &sc);
        for (int32_t i = 0; i < t->npartitions; i++)
            if (t->parts[i].local)
                b->replica_hooks->reconfigure(t->parts[i].local, &sc);
    }
    rc = apply_partitions(b, t, parts, n, err, errlen);
    free(parts);
    if (created && rc != KP_NONE) {
        remove_topic(b, t, false, false);
        return rc;
    }
    if (created)
        view_insert(b, t);
    if (rc != KP_NONE)
        BK_ERROR("topic %s: %s", name, err);
    return rc;
}

/* ---- startup and shutdown ------------------------------------------------------------ */

int view_topics_load(bk_broker *b)
{
    char err[MD_ERRLEN];
    if (!b->store)                            /* view_store.h S4 */
        b->store = &bk_store_sqlite;
    if (md_cluster_id(b->db, b->cluster_id, err, sizeof err) != 0) {
        BK_ERROR("cannot read the cluster id: %s", err);
        return -1;
    }
    md_topic *topics = NULL;
    size_t n = 0;
    if (md_topic_list(b->db, &topics, &n) != KP_NONE) {
        BK_ERROR("cannot list topics from the metadata store");
        return -1;
    }
    int64_t t0 = bk_mono_us();
    for (size_t i = 0; i < n; i++)
        if (view_topic_apply(b, topics[i].name, err, sizeof err) != KP_NONE) {
            BK_ERROR("topic %s: %s", topics[i].name, err);
            free(topics);
            return -1;
        }
    free(topics);
    BK_INFO("cluster %s: loaded %zu topics, %zu local replicas in %.1f ms",
            b->cluster_id, n, b->nreplicas,
            (double)(bk_mono_us() - t0) / 1000.0);
    return 0;
}

static void close_topic_cb(bk_topic *t, void *arg)
{
    remove_topic(arg, t, false, false);
}

void view_topics_close_all(bk_broker *b)
{
    view_topics_foreach(b, close_topic_cb, b);
    view_free(b);
}

/* ---- write halves --------------------------------------------------------------------- */

/* Each write half runs validate → store → apply.  Standalone, md_* does
 * validate and store in one transaction (validate_only stops after the
 * checks) and the apply half follows at once, so op is never pending.
 * The marked "store → apply" step is where cluster mode writes ZooKeeper
 * instead, sets op->pending and answers through op->done once the mirror
 * applied it (P1 then holds for the answer the caller sends); the checks
 * before it, and validate_only, stay synchronous in both modes. */

/* Each partition is a directory and three open files, created at once:
 * a request for millions of them (one CreateTopics or CreatePartitions
 * frame) would stall the loop for minutes and exhaust descriptors.  Kafka
 * has no such cap; its practical limits are far lower than this one.
 * Found by tests/fuzz/fuzz_d_request.c. */
#define BK_MAX_PARTITIONS_PER_TOPIC 10000

static int partitions_cap(int32_t n, char *err, size_t errlen)
{
    if (n <= BK_MAX_PARTITIONS_PER_TOPIC)
        return KP_NONE;
    snprintf(err, errlen, "Number of partitions %d is more than this broker "
             "allows per topic (%d).", (int)n, BK_MAX_PARTITIONS_PER_TOPIC);
    return KP_INVALID_PARTITIONS;
}

/* The broker's assignment of count partitions from first (lead0:
 * view_assign's), or NULL with *rc set (a replication factor the live
 * brokers cannot hold). */
static int32_t *assign(bk_broker *b, int32_t first, int32_t count, int16_t rf, int32_t lead0,
                       int *rc, char *err, size_t errlen)
{
    size_t cells = (size_t)(count > 0 ? count : 1) * (size_t)(rf > 0 ? rf : 1);
    int32_t *r = malloc(cells * sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        *rc = KP_UNKNOWN_SERVER_ERROR;
        return NULL;
    }
    if ((*rc = view_assign(b, first, count, rf, lead0, r, err, errlen)) != KP_NONE) {
        free(r);
        return NULL;
    }
    return r;
}

int view_topic_create(bk_broker *b, const char *name, int32_t partitions,
                    int16_t replication_factor, const int32_t *replicas,
                    const md_kv *configs, size_t nconfigs, bool validate_only,
                    bk_topic_op *op, char *err, size_t errlen)
{
    err[0] = 0;
    if (partitions_cap(partitions, err, errlen) != KP_NONE)
        return KP_INVALID_PARTITIONS;
    int rc = KP_NONE;
    int32_t *own = NULL;
    if (!replicas && partitions > 0 && replication_factor > 0 &&
        !(replicas = own = assign(b, 0, partitions, replication_factor, -1, &rc, err, errlen)))
        return rc;
    if (validate_only)                        /* against the store's facts (view_store.h S1) */
        rc = md_topic_create(b->db, name, partitions, replication_factor, configs, nconfigs,
                             b->cfg->broker_id, replicas, true, err, errlen);
    else
        rc = b->store->topic_create(b, name, partitions, replication_factor, replicas,
                                    own != NULL, configs, nconfigs, op, err, errlen);
    free(own);
    return rc;
}

int view_topic_delete(bk_broker *b, const char *name, bk_topic_op *op,
                    char *err, size_t errlen)
{
    err[0] = 0;
    return b->store->topic_delete(b, name, op, err, errlen);
}

int view_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                            const int32_t *replicas, bool validate_only,
                            bk_topic_op *op, char *err, size_t errlen)
{
    err[0] = 0;
    if (partitions_cap(count, err, errlen) != KP_NONE)
        return KP_INVALID_PARTITIONS;
    bk_topic *t = view_topic_find(b, name, strlen(name));
    int rc = KP_NONE;
    int32_t *own = NULL;
    md_topic mt = { .replication_factor = 1 };
    bool known = md_topic_get(b->db, name, &mt) == KP_NONE;
    if (!replicas && t && known && count > t->npartitions &&
        !(replicas = own = assign(b, t->npartitions, count - t->npartitions,
                                  mt.replication_factor,
                                  t->npartitions && t->parts[0].nreplicas > 0 ?
                                  t->parts[0].replicas[0] : -1, &rc, err, errlen)))
        return rc;
    if (validate_only)                        /* against the store's facts (view_store.h S1) */
        rc = md_topic_add_partitions(b->db, name, count, b->cfg->broker_id, replicas, true,
                                     err, errlen);
    else
        rc = b->store->topic_add_partitions(b, name, count, replicas, mt.replication_factor,
                                            op, err, errlen);
    free(own);
    return rc;
}

int view_topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                         bool validate_only, bk_topic_op *op, char *err, size_t errlen)
{
    if (!validate_only)
        return b->store->topic_configs_set(b, name, kv, n, op, err, errlen);
    int rc = md_topic_config_replace(b->db, name, kv, n, true, err, errlen);
    return rc < 0 ? KP_UNKNOWN_SERVER_ERROR : rc;
}

/* SQL's row writes become a whole new set, so they take the same write as
 * AlterConfigs.  Removing a key that has no override succeeds (Kafka's
 * DELETE does); a key Sluice does not know is refused, since it is most
 * likely a typo the operator wants to hear about. */
int view_topic_config_edit(bk_broker *b, const char *name, const char *key,
                         const char *value, bk_topic_op *op, char *err, size_t errlen)
{
    md_kv *kv = NULL;
    size_t n = 0;
    int rc = md_topic_configs(b->db, name, &kv, &n);
    if (rc == KP_UNKNOWN_TOPIC_OR_PARTITION) {
        snprintf(err, errlen, "This server does not host this topic-partition: %s", name);
        return rc;
    }
    if (rc != KP_NONE) {
        snprintf(err, errlen, "cannot read configs of topic %s", name);
        return KP_UNKNOWN_SERVER_ERROR;
    }
    if (!value && !md_config_def_find(key)) {
        md_kv_free(kv, n);
        snprintf(err, errlen, "Unknown topic config name: %.200s", key);
        return KP_INVALID_CONFIG;
    }
    md_kv *next = malloc((n + 1) * sizeof *next);
    if (!next) {
        md_kv_free(kv, n);
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].name, key))
            next[m++] = kv[i];
    if (value)
        next[m++] = (md_kv){ (char *)key, (char *)value };
    rc = view_topic_configs_set(b, name, next, m, false, op, err, errlen);
    free(next);
    md_kv_free(kv, n);
    return rc;
}

int view_partition_state_set(bk_broker *b, const char *topic, int32_t partition,
                           const md_partition_state *st, char *err, size_t errlen)
{
    int rc = md_partition_state_set(b->db, topic, partition, st, err, errlen);
    if (rc != KP_NONE)
        return rc < 0 ? KP_UNKNOWN_SERVER_ERROR : rc;
    BK_INFO("partition %s-%d: leader %d, epoch %d", topic, (int)partition,
            (int)st->leader, (int)st->leader_epoch);
    return view_topic_apply(b, topic, err, errlen);
}

int view_partition_epochs_set(bk_broker *b, const char *topic, const int32_t *epochs,
                              int32_t n, char *err, size_t errlen)
{
    bk_topic *t = view_topic_find(b, topic, strlen(topic));
    if (!t) {
        snprintf(err, errlen, "This server does not host this topic: %s", topic);
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    bool began = md_begin(b->db) == 0;
    int rc = began ? KP_NONE : KP_UNKNOWN_SERVER_ERROR;
    if (!began)
        snprintf(err, errlen, "cannot begin a transaction");
    for (int32_t i = 0; rc == KP_NONE && i < t->npartitions && i < n; i++) {
        if (epochs[i] < 0)
            continue;
        const bk_pview *v = &t->parts[i];
        md_partition_state st = { .leader = v->leader, .leader_epoch = epochs[i],
                                  .nreplicas = v->nreplicas, .nisr = v->nisr,
                                  .controller_epoch = v->controller_epoch,
                                  .zk_version = v->zk_version, .adding = v->adding,
                                  .removing = v->removing };
        memcpy(st.replicas, v->replicas, sizeof st.replicas);
        memcpy(st.isr, v->isr, sizeof st.isr);
        rc = md_partition_state_set(b->db, topic, i, &st, err, errlen);
        if (rc < 0)
            rc = KP_UNKNOWN_SERVER_ERROR;
    }
    if (rc != KP_NONE) {
        if (began)
            md_rollback(b->db);
        return rc;
    }
    if (md_commit(b->db) != 0) {
        snprintf(err, errlen, "cannot commit the leader epochs of %s", topic);
        return KP_UNKNOWN_SERVER_ERROR;
    }
    bk_mdsync_request();                 /* durable soon, off the loop (md_sync.c) */
    BK_INFO("topic %s: leader epochs stored (a mirror that left mirroring)", topic);
    return view_topic_apply(b, topic, err, errlen);
}
