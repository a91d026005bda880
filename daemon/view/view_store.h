/*
 * daemon/view/view_store.h — the store of record: where the write halves of the
 * broker's facts (topics, partition counts, topic and broker config
 * overrides, ACLs, SCRAM credentials, reassignments) keep them.
 *
 * A table of operations, in the manner of SQLite's VFS: main.c picks one
 * implementation at start and puts it in b->store; the write paths
 * (view_topics.c, view_broker_configs.c, sec_authz.c, sec_sasl.c,
 * cluster_reassign.c's cl_partitions_reassign_request) call b->store->op(...) and
 * never ask which mode the broker runs in.
 *
 *   bk_store_sqlite  standalone (daemon/store_sqlite.c): the broker's own
 *                    SQLite file is the record.  A write stores the fact
 *                    and applies it (view_topic_apply, the broker configs'
 *                    adopt, the authorizer's reload) before it returns.
 *   cl_store_zk      cluster mode (daemon/cluster/cluster_store.c):
 *                    ZooKeeper is the record and the SQLite file its
 *                    mirror.  A write checks the fact against the mirror,
 *                    writes it to ZooKeeper and answers once this broker's
 *                    mirror shows it (the watch applies it, as it applies
 *                    every other broker's writes).
 *
 * What every implementation keeps:
 *   S1. Validation that needs no store (names, kinds of key, counts) and
 *       validate_only requests are the caller's; an operation is called
 *       only to write, and a refusal it finds is answered at once (its
 *       return value, op->pending left false).
 *   S2. Completion is bk_topic_op's (view.h): the return value is the
 *       answer unless op->pending is set; then op->done brings it, exactly
 *       once, on the loop.  bk_store_sqlite never sets pending.
 *   S3. A write that succeeded is visible to every later request on this
 *       broker by the time the answer is given (view_topics.c P1).
 *   S4. The table is chosen before view_topics_load and never changes while
 *       the broker runs.  A broker main.c did not set up (the fuzz harness
 *       builds its own) gets bk_store_sqlite from view_topics_load.
 */
#ifndef SLUICE_STORE_H
#define SLUICE_STORE_H

#include "daemon/view/view.h"

/* link_publish's how. */
enum { BK_PUB_UPDATE = 0, BK_PUB_INSERT = 1, BK_PUB_RESEAL = 2 };

typedef struct bk_store {
    const char *name;                /* for the log: "sqlite", "zookeeper" */
    /* replicas: partitions × replication_factor, in preference order;
     * own_assignment: the broker chose them (view_assign), the caller
     * did not (ZooKeeper writes the topic without a manual assignment). */
    int (*topic_create)(bk_broker *b, const char *name, int32_t partitions,
                        int16_t replication_factor, const int32_t *replicas,
                        bool own_assignment, const md_kv *configs, size_t nconfigs,
                        bk_topic_op *op, char *err, size_t errlen);
    int (*topic_delete)(bk_broker *b, const char *name, bk_topic_op *op,
                        char *err, size_t errlen);
    /* count: the new total; replicas: the new partitions' assignment. */
    int (*topic_add_partitions)(bk_broker *b, const char *name, int32_t count,
                                const int32_t *replicas, int16_t replication_factor,
                                bk_topic_op *op, char *err, size_t errlen);
    /* The topic's whole override set. */
    int (*topic_configs_set)(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                             bk_topic_op *op, char *err, size_t errlen);
    /* resource: a broker id, or "" for the cluster-wide defaults. */
    int (*broker_configs_set)(bk_broker *b, const char *resource, const md_kv *kv,
                              size_t n, bk_topic_op *op, char *err, size_t errlen);
    /* Rows removed and added, in one change. */
    int (*acl_change)(bk_broker *b, const md_acl *del, size_t ndel, const md_acl *add,
                      size_t nadd, bk_topic_op *op, char *err, size_t errlen);
    /* One user's credential for one mechanism, set or removed (*deleted:
     * whether there was one).  Answered at once in both modes. */
    int (*scram_set)(bk_broker *b, const char *name, const md_scram_cred *c,
                     char *err, size_t errlen);
    int (*scram_delete)(bk_broker *b, const char *name, const char *mechanism,
                        bool *deleted, char *err, size_t errlen);
    /* The parts of a reassignment that passed their checks (error
     * KP_NONE); the others are skipped. */
    int (*partitions_reassign)(bk_broker *b, const char *topic, const bk_reassign *parts,
                               int32_t n, bk_topic_op *op, char *err, size_t errlen);
    /* A cluster link's (mirror false) or a mirror topic's row changed in
     * this broker's SQLite (written there first, as the SCRAM credentials
     * are) or went: published to the other brokers, asynchronously
     * (daemon/link/link.c K6).  NULL (standalone): SQLite is the record.
     * how: BK_PUB_UPDATE (a znode gone is not made again: another broker
     * deleted the row), BK_PUB_INSERT (made only if none is there),
     * BK_PUB_RESEAL (written over; a znode gone is not made again, and
     * the row goes here: deleted on another broker while this one was
     * down). */
    void (*link_publish)(bk_broker *b, bool mirror, const char *name, int how);
    /* A mirror topic's terminal state proposed (daemon/link/link.c K15):
     * written to the cluster by compare-and-set before any broker takes
     * it; done (on the loop, always once) hears rc 0 when the cluster holds
     * state now, else -1 and the state it holds instead (now, "" when
     * unknown), which this broker has taken.  NULL (standalone): the
     * broker takes the state at once. */
    void (*mirror_propose)(bk_broker *b, const char *topic, const char *state,
                           void (*done)(bk_broker *b, void *arg, int rc, const char *now),
                           void *arg);
    /* A promoting mirror partition's leader caught up (daemon/link/link.c
     * K11): the fact ("<topic id hex>.<partition>.<leader epoch>", under
     * 64 bytes) written, asynchronously; and the facts listed, then given
     * to told on the loop (not called when the listing fails).  NULL
     * (standalone): the one broker decides alone. */
    void (*mirror_caught_up)(bk_broker *b, const char *fact);
    void (*mirrors_told_list)(bk_broker *b,
                              void (*told)(bk_broker *b, char *const *names, int n));
    /* A mirror partition's first local epoch (daemon/link/link.c K17):
     * key "<topic id hex>.<partition>" (under 64 bytes) made to hold epoch
     * unless it holds one already; done (on the loop, always once) hears
     * the epoch the cluster holds, -1 when unknown (asked again later).
     * NULL (standalone): the stored leader epoch tells it. */
    void (*mirror_local_epoch)(bk_broker *b, const char *key, int32_t epoch,
                               void (*done)(bk_broker *b, void *arg, int32_t epoch),
                               void *arg);
} bk_store;

extern const bk_store bk_store_sqlite;

#endif
