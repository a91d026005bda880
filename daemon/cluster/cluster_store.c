/*
 * daemon/cluster/cluster_store.c — the store of record in cluster mode
 * (daemon/view/view_store.h): ZooKeeper, in Kafka's layout, with the broker's SQLite
 * file as its mirror.
 *
 * Each operation checks the fact against the mirror first (md_* with
 * validate_only, so a refusal is answered at once, view_store.h S1), then hands
 * it to the module that writes its znodes:
 *
 *   topics, partitions, topic configs   cluster_mirror.c (cl_topic_*)
 *   broker configs                      cluster_broker_configs.c
 *   ACLs                                cluster_acls.c
 *   SCRAM credentials                   cluster_users.c
 *   reassignments                       cluster_reassign.c
 *   cluster links, mirror topics        cluster_links.c
 *
 * Those answer through op once this broker's mirror shows the write
 * (view_store.h S2, S3), except the SCRAM credentials: they are stored in the
 * local SQLite first, so this broker serves them at once, and published
 * after (cluster_users.c's write half).
 */
#include "daemon/cluster/cluster.h"

#include <stdio.h>

#include "daemon/security/sec_authz.h"
#include "daemon/security/sec_sasl.h"
#include "daemon/view/view_store.h"

static int topic_create(bk_broker *b, const char *name, int32_t partitions,
                        int16_t replication_factor, const int32_t *replicas,
                        bool own_assignment, const md_kv *configs, size_t nconfigs,
                        bk_topic_op *op, char *err, size_t errlen)
{
    int rc = md_topic_create(b->db, name, partitions, replication_factor, configs, nconfigs,
                             b->cfg->broker_id, replicas, true, err, errlen);
    if (rc != KP_NONE)
        return rc;
    return cl_topic_create(b, name, partitions, replicas, replication_factor, own_assignment,
                           configs, nconfigs, op, err, errlen);
}

/* /admin/delete_topics, then the mirror */
static int topic_delete(bk_broker *b, const char *name, bk_topic_op *op,
                        char *err, size_t errlen)
{
    if (md_topic_get(b->db, name, NULL) != KP_NONE) {
        snprintf(err, errlen, "This server does not host this topic-partition.");
        return KP_UNKNOWN_TOPIC_OR_PARTITION;
    }
    return cl_topic_delete(b, name, op, err, errlen);
}

static int topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                                const int32_t *replicas, int16_t replication_factor,
                                bk_topic_op *op, char *err, size_t errlen)
{
    int rc = md_topic_add_partitions(b->db, name, count, b->cfg->broker_id, replicas, true,
                                     err, errlen);
    if (rc != KP_NONE)
        return rc;
    return cl_topic_add_partitions(b, name, count, replicas, replication_factor, op,
                                   err, errlen);
}

static int topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                             bk_topic_op *op, char *err, size_t errlen)
{
    int rc = md_topic_config_replace(b->db, name, kv, n, true, err, errlen);
    if (rc == KP_NONE)
        rc = cl_topic_configs_set(b, name, kv, n, op, err, errlen);
    return rc < 0 ? KP_UNKNOWN_SERVER_ERROR : rc;
}

/* Stored in the local SQLite first, so this broker serves it at once, then
 * the user's whole set published (reading it back stores the same rows,
 * cluster_users.c Z3). */
static int scram_set(bk_broker *b, const char *name, const md_scram_cred *c,
                     char *err, size_t errlen)
{
    int rc = md_user_upsert(b->db, name, c, err, errlen);
    if (rc == 0)
        cl_sasl_zk_publish(b, name);
    return rc;
}

static int scram_delete(bk_broker *b, const char *name, const char *mechanism,
                        bool *deleted, char *err, size_t errlen)
{
    int rc = md_user_delete(b->db, name, mechanism, deleted, err, errlen);
    if (rc == 0 && *deleted)
        cl_sasl_zk_publish(b, name);
    return rc;
}

const bk_store cl_store_zk = {
    .name = "zookeeper",
    .topic_create = topic_create,
    .topic_delete = topic_delete,
    .topic_add_partitions = topic_add_partitions,
    .topic_configs_set = topic_configs_set,
    /* adopted as read back (cluster_broker_configs.c K1) */
    .broker_configs_set = cl_broker_configs_write,
    /* the acls table follows its resync (cluster_acls.c K1) */
    .acl_change = cl_authz_zk_write,
    .scram_set = scram_set,
    .scram_delete = scram_delete,
    .partitions_reassign = cl_partitions_reassign,
    /* written to the local SQLite first, as the SCRAM credentials */
    .link_publish = cl_links_publish,
    .mirror_propose = cl_links_mirror_propose,
    .mirror_caught_up = cl_links_caught_up,
    .mirrors_told_list = cl_links_told_list,
    .mirror_local_epoch = cl_links_local_epoch,
};
