/*
 * daemon/view/view.h — the cluster view (daemon/view/view.c) and the one path per
 * topic fact (daemon/view/view_topics.c).
 */
#ifndef SLUICE_CLUSTER_H
#define SLUICE_CLUSTER_H

#include "daemon/broker.h"
#include "segments/seg.h"

/* ---- the cluster view (daemon/view/view.c) -------------------------------------------
 * Every topic and partition of the cluster as the store has them (SQLite
 * in standalone mode; a ZooKeeper mirror in cluster mode): replicas, ISR,
 * leader, leader epoch.  "Who leads this partition", "does it exist",
 * "who coordinates this group" and "which brokers are alive" are asked
 * here and only here. */
typedef struct bk_pview {
    int32_t leader;                  /* -1: none */
    int32_t leader_epoch;
    int32_t nreplicas, nisr;
    int32_t replicas[MD_REPLICAS_MAX];   /* preference order */
    int32_t isr[MD_REPLICAS_MAX];
    int32_t controller_epoch;        /* md_partition_state's: who wrote it */
    int32_t zk_version;              /* its state znode's version; -1 none */
    uint32_t adding, removing;       /* a reassignment: md_partition_state's bits */
    bk_partition *local;             /* this broker's replica; NULL if none */
} bk_pview;

struct bk_topic {
    char name[MD_TOPIC_NAME_MAX + 1];
    uint8_t id[16];
    bool internal;
    int32_t npartitions;
    bk_pview *parts;                 /* [npartitions] */
    md_topic_config cfg;             /* effective config */
    bk_topic *hnext;                 /* name hash chain */
    bk_topic *idnext;                /* id hash chain (view.c, V4) */
};

bk_topic *view_topic_find(bk_broker *b, const char *name, size_t len);
/* The topic with this id (Metadata v10+, Fetch v13+); NULL for the zero
 * id or one no topic has (deleted, or never existed). */
bk_topic *view_topic_find_id(bk_broker *b, const uint8_t id[16]);
/* Calls fn for every topic, in no particular order. */
void view_topics_foreach(bk_broker *b, void (*fn)(bk_topic *t, void *arg), void *arg);
/* The view of one partition; NULL when it does not exist. */
const bk_pview *view_partition(bk_broker *b, kp_str topic, int32_t partition);
/* For the APIs a partition's leader serves (Produce, Fetch from consumers,
 * ListOffsets, DeleteRecords): KP_NONE with *out when this broker leads the
 * partition and hosts its log; KP_NOT_LEADER_OR_FOLLOWER when it exists
 * but is led elsewhere or not hosted here; KP_UNKNOWN_TOPIC_OR_PARTITION
 * when it does not exist. */
int view_leader_replica(bk_broker *b, kp_str topic, int32_t partition, bk_partition **out);
/* Leader of partition i of t (-1: none). */
int32_t view_leader_of(bk_broker *b, const bk_topic *t, int32_t partition);
int32_t view_controller_id(bk_broker *b);
/* Standalone: only this broker exists, and it is alive. */
bool view_broker_alive(bk_broker *b, int32_t id);
/* Live broker ids, ascending, at most max; returns how many there are. */
int  view_live_brokers(bk_broker *b, int32_t *ids, int max);
/* The live brokers with their endpoints (Metadata, FindCoordinator),
 * ascending by id, at most max; the strings live until the loop next
 * runs.  Returns how many were written. */
typedef struct bk_broker_info {
    int32_t id;
    const char *host;
    int32_t port;
    const char *rack;                /* NULL: none */
} bk_broker_info;
/* The live brokers' endpoints on listener (a connection's, from
 * net_conn_listener; NULL: the first listener); brokers without it are
 * left out. */
int  view_brokers_info(bk_broker *b, const char *listener, bk_broker_info *out, int max);
/* Cluster mode: this broker may not act as leader now (daemon/cluster/cluster_session.c:
 * not registered in its ZooKeeper session, its mirror not caught up, or
 * back from a stall ZooKeeper has not confirmed it survived). */
bool view_cluster_fenced(bk_broker *b);

/* ---- what cluster mode tells the view (cluster_session.c, cluster_mirror.c) --------
 * The view owns the live-broker list, the controller and the fenced flag;
 * cluster mode writes them when they change, so the view's questions
 * never reach into cluster/.  Standalone nothing is written and the view
 * answers for this broker alone. */
#define BK_VIEW_EPS_MAX 8
typedef struct bk_view_broker {
    int32_t id;
    char host[256];                  /* a registration without endpoints */
    int32_t port;
    char rack[64];                   /* "" when none */
    int neps;
    struct bk_view_endpoint {
        char name[64];               /* listener name */
        char host[256];
        int32_t port;
    } eps[BK_VIEW_EPS_MAX];
} bk_view_broker;
/* cl_start: cluster answers from now on (no brokers, no controller,
 * fenced); stop: standalone answers again, the list freed. */
void view_cluster_start(bk_broker *b);
void view_cluster_stop(bk_broker *b);
/* The live brokers, ascending by id: the view takes list (malloc'd, or
 * NULL with n 0) and frees the one it had. */
void view_set_brokers(bk_broker *b, bk_view_broker *list, int n);
void view_set_controller(bk_broker *b, int32_t id);
void view_set_fenced(bk_broker *b, bool fenced);
/* Cluster mode: this broker is in its controlled shutdown (daemon/
 * cluster_leaders.c): it takes no new records, so its followers can become
 * level with it before its leaderships move. */
bool cl_cluster_leaving(bk_broker *b);
/* The cluster id (md_cluster_id), read once at startup. */
const char *view_cluster_id(bk_broker *b);
/* KP_NONE when the live brokers can hold rf replicas of a partition, else
 * KP_INVALID_REPLICATION_FACTOR with Kafka's text. */
int  view_check_replication(bk_broker *b, int16_t rf, char *err, size_t errlen);
/* Replicas for partitions [first, first + count) of a topic: rf per
 * partition, on distinct live brokers, leaders spread, on distinct racks
 * where broker.rack allows (Kafka's AdminUtils.assignReplicasToBrokers).
 * lead0: partition 0's first replica when adding partitions (the new ones
 * continue from it, as Kafka's addPartitions), else -1.  KP_NONE, or
 * KP_INVALID_REPLICATION_FACTOR with Kafka's text. */
int  view_assign(bk_broker *b, int32_t first, int32_t count, int16_t rf, int32_t lead0,
                    int32_t *replicas, char *err, size_t errlen);
/* The same among the given live brokers (ascending ids) rather than all
 * that the view shows alive. */
int  view_assign_among(bk_broker *b, const int32_t *brokers, int nbrokers, int32_t first,
                          int32_t count, int16_t rf, int32_t lead0, int32_t *replicas,
                          char *err, size_t errlen);
/* The assignment itself, over n brokers (ids ascending; racks[i] is
 * broker i's rack, "" or NULL for none; rack-aware when every broker has
 * one), from broker-list position start: replicas gets count × rf ids.
 * 0, or -1 when rf is not in 1..n or n is out of range. */
int  view_assign_replicas(const int32_t *ids, const char *const *racks, int n, int32_t start,
                        int32_t first, int32_t count, int16_t rf, int32_t *replicas);

/* ---- one path per fact (daemon/view/view_topics.c) -----------------------------------------
 * Each kind of fact has one function whose write half stores it through
 * b->store (daemon/view/view_store.h: SQLite standalone, ZooKeeper in cluster mode)
 * and whose apply half makes the running broker match what is stored
 * (view_topic_apply; in cluster mode the mirror's watches call it).
 * Kafka APIs and SQL writes alike call these.  metadata/README.md tables
 * every fact with its paths. */

/* Cluster mode: zookeeper.connect is set (daemon/zk*.c, mirror.c,
 * controller.c); standalone otherwise. */
static inline bool bk_cluster_mode(const bk_broker *b)
{
    return b->cfg->zookeeper_connect[0] != 0;
}

/* An asynchronous write.  In cluster mode a write half stores its fact in
 * ZooKeeper and answers once this broker's mirror shows it applied (or
 * the deadline passes): it sets op->pending and later calls
 * op->done(op, rc, err) on the loop, exactly once.  Standalone writes
 * finish before they return (pending stays false, done is not called).
 * op NULL: the caller does not wait for the answer (Metadata's
 * auto-creation); the write still happens. */
typedef struct bk_topic_op bk_topic_op;
struct bk_topic_op {
    void (*done)(bk_topic_op *op, int rc, const char *err);
    void *arg;
    int32_t timeout_ms;              /* for the cluster to show it; <= 0: 30 s */
    bool pending;                    /* out */
};

/* Loads the view from the store and opens the local replicas. */
int  view_topics_load(bk_broker *b);
void view_topics_close_all(bk_broker *b);
/* The five topic writes below each take an op (NULL: the caller does not
 * wait; see bk_topic_op).  Their return value is the answer unless
 * op->pending is set after the call; then op->done brings it.  A refusal
 * found while validating, and every validate_only call, is always
 * answered at once.  Callers that wait for several: daemon/api/api_topic_wait.h. */

/* replicas: the manual assignment (partitions × replication_factor, in
 * preference order), or NULL for the broker's own (view_assign).
 * Validates, writes the facts, applies them.  KP_* with a message in err. */
int view_topic_create(bk_broker *b, const char *name, int32_t partitions,
                    int16_t replication_factor, const int32_t *replicas,
                    const md_kv *configs, size_t nconfigs, bool validate_only,
                    bk_topic_op *op, char *err, size_t errlen);
int view_topic_delete(bk_broker *b, const char *name, bk_topic_op *op,
                    char *err, size_t errlen);
/* replicas: the new partitions' assignment, or NULL (the broker's). */
int view_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                            const int32_t *replicas, bool validate_only,
                            bk_topic_op *op, char *err, size_t errlen);
/* A topic's whole override set (AlterConfigs; IncrementalAlterConfigs and
 * SQL compute the new set first), validated before anything is written. */
int view_topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                         bool validate_only, bk_topic_op *op, char *err, size_t errlen);
/* One override set (value) or removed (value NULL): SQL's row writes. */
int view_topic_config_edit(bk_broker *b, const char *name, const char *key,
                         const char *value, bk_topic_op *op, char *err, size_t errlen);
/* A partition's state (leader, epoch, replicas, ISR), replaced whole. */
int view_partition_state_set(bk_broker *b, const char *topic, int32_t partition,
                           const md_partition_state *st, char *err, size_t errlen);
/* Standalone: the leader epoch of each partition i < n of topic with
 * epochs[i] >= 0 set to it (the rest of its state as the view has it), in
 * one transaction and one apply of the topic (a mirror of thousands of
 * partitions promoted at once: one commit, no fsync on the loop). */
int view_partition_epochs_set(bk_broker *b, const char *topic, const int32_t *epochs,
                              int32_t n, char *err, size_t errlen);
/* A partition reassignment (AlterPartitionReassignments; SQL's UPDATE of
 * partitions.replicas), daemon/cluster/cluster_reassign.c.  Each part is checked as
 * Kafka does (error and msg set: UNKNOWN_TOPIC_OR_PARTITION,
 * INVALID_REPLICA_ASSIGNMENT for a duplicate or a new broker that is not
 * alive, NO_REASSIGNMENT_IN_PROGRESS for a cancel of none); the others are
 * written together, and the return value (or op->done) is their answer. */
typedef struct bk_reassign {
    int32_t partition;
    const int32_t *replicas;         /* the target, in preference order */
    int32_t nreplicas;               /* -1: cancel the reassignment in progress */
    int16_t error;                   /* out */
    char msg[MD_TOPIC_NAME_MAX + 160];  /* out */
} bk_reassign;
int cl_partitions_reassign_request(bk_broker *b, const char *topic, bk_reassign *parts, int32_t n,
                           bk_topic_op *op, char *err, size_t errlen);
/* The replicas v is adding (or removing) in a reassignment, into out;
 * how many. */
int32_t cl_reassign_ids(const bk_pview *v, bool adding, int32_t *out);
/* The apply half: makes the view and the local replicas match the store's
 * facts of one topic (created, grown, reconfigured, re-led or deleted).
 * KP_NONE, or an error after which the topic is left as the store has it
 * as far as it could be applied (logged). */
int view_topic_apply(bk_broker *b, const char *name, char *err, size_t errlen);
/* Segment settings for a partition, from the topic's effective config. */
void view_seg_config(const md_topic_config *c, seg_config *out);

#endif
