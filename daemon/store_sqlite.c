/*
 * daemon/store_sqlite.c — the standalone store (view_store.h): the broker's own
 * SQLite file is the record of every fact.
 *
 * Each write runs md_* on the loop's handle (validation and the write are
 * one statement or transaction there) and then brings the running broker
 * in line before it returns: view_topic_apply for topics, the broker
 * configs' adopt, the authorizer's reload.  Nothing here is asynchronous,
 * so op->pending is never set (view_store.h S2) and op->done never called.
 */
#include "daemon/view/view_store.h"

#include <stdio.h>

#include "daemon/security/sec_authz.h"
#include "daemon/view/view_broker_configs.h"

static int topic_create(bk_broker *b, const char *name, int32_t partitions,
                        int16_t replication_factor, const int32_t *replicas,
                        bool own_assignment, const md_kv *configs, size_t nconfigs,
                        bk_topic_op *op, char *err, size_t errlen)
{
    (void)own_assignment, (void)op;
    int rc = md_topic_create(b->db, name, partitions, replication_factor, configs, nconfigs,
                             b->cfg->broker_id, replicas, false, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if ((rc = view_topic_apply(b, name, err, errlen)) != KP_NONE) {
        /* view_topics.c P2: never visible, so undo the row we just wrote. */
        char e2[MD_ERRLEN];
        md_topic_delete(b->db, name, e2, sizeof e2);
        return rc;
    }
    BK_INFO("created topic %s with %d partitions", name, partitions);
    return KP_NONE;
}

static int topic_delete(bk_broker *b, const char *name, bk_topic_op *op,
                        char *err, size_t errlen)
{
    (void)op;
    int rc = md_topic_delete(b->db, name, err, errlen);
    if (rc != KP_NONE)
        return rc;
    view_topic_apply(b, name, err, errlen);    /* gone: cannot fail */
    BK_INFO("deleted topic %s", name);
    return KP_NONE;
}

static int topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                                const int32_t *replicas, int16_t replication_factor,
                                bk_topic_op *op, char *err, size_t errlen)
{
    (void)replication_factor, (void)op;
    int rc = md_topic_add_partitions(b->db, name, count, b->cfg->broker_id, replicas, false,
                                     err, errlen);
    if (rc != KP_NONE)
        return rc;
    if ((rc = view_topic_apply(b, name, err, errlen)) != KP_NONE)
        return rc;
    BK_INFO("topic %s now has %d partitions", name, count);
    return KP_NONE;
}

static int topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                             bk_topic_op *op, char *err, size_t errlen)
{
    (void)op;
    int rc = md_topic_config_replace(b->db, name, kv, n, false, err, errlen);
    if (rc != KP_NONE)
        return rc < 0 ? KP_UNKNOWN_SERVER_ERROR : rc;
    if ((rc = view_topic_apply(b, name, err, errlen)) != KP_NONE)
        snprintf(err, errlen, "The configs of topic %.150s were stored but could not "
                 "be applied; see the broker log.", name);
    return rc;
}

static int broker_configs_set(bk_broker *b, const char *resource, const md_kv *kv, size_t n,
                              bk_topic_op *op, char *msg, size_t msglen)
{
    (void)op;
    int rc = view_broker_configs_adopt(b, resource, kv, n);
    if (rc != KP_NONE)
        snprintf(msg, msglen, "Cannot store the broker configs.");
    return rc;
}

static int acl_change(bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add,
                      size_t nadd, bk_topic_op *op, char *err, size_t errlen)
{
    (void)op;
    if (md_acl_change(b->db, del, ndel, add, nadd, err, errlen) != 0)   /* sec_authz.c Z3 */
        return KP_UNKNOWN_SERVER_ERROR;
    return sec_authz_reload(b) ? KP_UNKNOWN_SERVER_ERROR : KP_NONE;
}

static int scram_set(bk_broker *b, const char *name, const md_scram_cred *c,
                     char *err, size_t errlen)
{
    return md_user_upsert(b->db, name, c, err, errlen);
}

static int scram_delete(bk_broker *b, const char *name, const char *mechanism,
                        bool *deleted, char *err, size_t errlen)
{
    return md_user_delete(b->db, name, mechanism, deleted, err, errlen);
}

/* The one broker already holds every target replica (cluster_reassign.c's
 * check refuses any other), so there is nothing to move. */
static int partitions_reassign(bk_broker *b, const char *topic, const bk_reassign *parts,
                               int32_t n, bk_topic_op *op, char *err, size_t errlen)
{
    (void)b, (void)topic, (void)parts, (void)n, (void)op, (void)err, (void)errlen;
    return KP_NONE;
}

const bk_store bk_store_sqlite = {
    .name = "sqlite",
    .topic_create = topic_create,
    .topic_delete = topic_delete,
    .topic_add_partitions = topic_add_partitions,
    .topic_configs_set = topic_configs_set,
    .broker_configs_set = broker_configs_set,
    .acl_change = acl_change,
    .scram_set = scram_set,
    .scram_delete = scram_delete,
    .partitions_reassign = partitions_reassign,
};
