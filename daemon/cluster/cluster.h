/*
 * daemon/cluster/cluster.h — cluster mode's internals: this broker's state in
 * the cluster (bk_cl), what the mirror knows of each topic beyond the view,
 * and the calls between the files that implement cluster mode:
 *
 *   daemon/cluster/cluster_session.c   this broker in the cluster: registration in
 *                         /brokers/ids, the session's states, leadership
 *                         fencing, the write halves' ZooKeeper side and
 *                         the waits for their answers
 *   daemon/cluster/cluster_mirror.c    ZooKeeper → SQLite → the view, through watches
 *   daemon/cluster/cluster_controller.c  election, partition states, deletions,
 *                         re-election when a broker dies
 *   daemon/replication/repl_isr.c       the leader's followers, high watermark and ISR
 *   daemon/cluster/cluster_reassign.c  partition reassignments: started by any broker,
 *                         finished by the controller
 *   daemon/cluster/cluster_recovery.c  elections when no ISR member stayed up: the
 *                         longest log of the returning members
 *   and the other cluster_*.c: leaders, notices, logdirs, broker configs,
 *   ACLs and users in ZooKeeper.
 *
 * It is not private to them: files outside cluster/ still include it to
 * reach b->cl (at 76eb650: main.c, net_metrics.c, api_elect_leaders.c,
 * replica_logdir.c, repl_fetcher.c, view.c, view_topics.c,
 * view_broker_configs.c and tests/unit/test_d_log_ends.c; `grep -rl
 * cluster/cluster.h` gives today's list).  Issue 29 cuts those edges; a new
 * file outside cluster/ should use view.h instead.
 *
 * Everything here runs on the loop; ZooKeeper is reached through cluster_zk.h.
 * Others see cluster mode through view.h (bk_cluster_mode, the view's
 * answers) and the write halves of view_topics.c.
 */
#ifndef SLUICE_CL_H
#define SLUICE_CL_H

#include "daemon/view/view.h"
#include "daemon/cluster/cluster_zk.h"
#include "daemon/cluster/cluster_zk_json.h"
#include "daemon/replication/repl_isr.h"

/* What the mirror knows of a topic beyond the view: its znodes' versions,
 * for versioned writes, and whether a refresh is running. */
typedef struct cl_topic {
    char name[MD_TOPIC_NAME_MAX + 1];
    int assign_version;              /* /brokers/topics/<t>; -1: unknown */
    int config_version;              /* /config/topics/<t>; -1: no znode */
    bool refreshing, again;          /* a refresh runs; run another after it */
    bool resync;                     /* counted in cl->resync_pending */
    bool deleting;                   /* in /admin/delete_topics (controller) */
    int writes;                      /* controller writes in flight */
    /* controller: per partition, the state znode version its last write
     * makes (-2: none); not written again until the mirror shows it (cluster_controller.c C3) */
    int32_t *expect;
    int32_t nexpect;
    /* state znodes whose watch fired, read again one by one (cluster_mirror.c M5) */
    int32_t *dirty;
    int ndirty, capdirty;
    /* controller: per partition, moves asked for (cluster_leaders.c CTL_MARK_*) */
    uint8_t *marks;
    int32_t nmarks;
    bool states_fetching, dirty_listed;
    /* per partition, the state znode's mzxid last read (0: unknown) and,
     * controller, since when its election waits for ISR members to
     * return (0: not waiting); cluster_recovery.c */
    int64_t *state_mzxid, *recovery_since_ms;
    int32_t nrecovery;
    struct cl_topic *next_dirty;
    struct cl_topic *hnext;
} cl_topic;

typedef struct cl_wait cl_wait;
typedef struct bk_cluster bk_cluster;

struct bk_cluster {
    bk_broker *b;
    bk_zk *zk;
    /* /brokers/ids: the live brokers, ascending */
    zj_broker *brokers;
    int nbrokers;
    bool brokers_refreshing, brokers_again;
    /* this broker in the session */
    bool registered;                 /* our /brokers/ids/<id> is this session's */
    bool synced;                     /* a full resync finished in this session */
    bool stalled;                    /* the loop stood still past the session timeout */
    int resync_pending;              /* topic refreshes the running resync waits for */
    bool resync_running, resync_again;
    intptr_t resync_gen;             /* which resync a topic listing belongs to */
    int64_t last_tick_us;
    int64_t register_retry_us;       /* 0: no retry due */
    struct event *tick;
    /* the mirror's topics (cl_topic), hashed by name */
    cl_topic **thash;
    size_t thash_size, ntopics;
    /* the controller */
    bool active;                     /* this broker is the controller */
    bool electing;
    int32_t epoch;                   /* ours, when active */
    int epoch_version;               /* /controller_epoch's znode version we wrote */
    bool deletions_refreshing, deletions_again;
    cl_topic *dirty_topics;          /* topics with dirty states (cluster_mirror.c) */
    struct event *dirty_ev;
    /* write halves waiting for the mirror to show their change */
    cl_wait *waits;
    struct ra_write *ra_retries;     /* reassignment writes waiting to retry (cluster_reassign.c R4) */
    repl_cluster repl;               /* lent to replication as b->repl (repl_isr.h) */
    /* /admin/controlled_shutdown: brokers leaving, ascending (cluster_leaders.c) */
    int32_t shutting[CL_MAX_BROKERS];
    int nshutting;
    /* Brokers whose request znode went: still leaving until they register
     * anew or a fetch's wait after their registration went (cluster_leaders.c L6). */
    int32_t left[CL_MAX_BROKERS];
    int64_t left_reg_ms[CL_MAX_BROKERS];  /* the registration's timestamp, -1 none */
    int64_t left_gone_ms[CL_MAX_BROKERS]; /* monotonic, since unregistered; -1 */
    int nleft;
    struct cl_cshut *cshut;          /* this broker's own controlled shutdown */
    int64_t imbalance_checked_ms;    /* last leader-imbalance check (controller) */
    int32_t seen_alive[CL_MAX_BROKERS];  /* live brokers at the last change (cluster_leaders.c) */
    int64_t seen_czxid[CL_MAX_BROKERS];  /* their registrations' czxids then */
    bool seen_bounced[CL_MAX_BROKERS];   /* registered anew while seen alive (cluster_leaders.c L7) */
    int nseen_alive;
    int64_t reg_czxid;               /* our registration's czxid; 0 not registered */
    struct cl_recovery *rec;         /* log ends, election waits (cluster_recovery.c) */
    /* producer ids reserved in /latest_producer_id_block (cluster_producer_ids.c) */
    struct cl_pid_blocks {
        int64_t next, end;           /* the current block, end exclusive */
        int64_t pre_start, pre_end;  /* the next one, fetched ahead; pre_end 0: none */
        int64_t want_start;          /* the block being written to the znode */
        bool fetching;
        int failures;
        int64_t retry_us;            /* mono: no fetch before, after a failure */
        /* the floor (cluster_producer_ids.c PB4-PB7): no id below it is
         * handed out; known: read in this connection to ZooKeeper */
        int64_t floor;
        bool floor_known;
        int64_t raise_to;            /* a raise asked for (0: none); raising: in flight */
        int64_t raise_writing;       /* the floor the multi in flight writes */
        bool raising;
        int raise_failures;
        int64_t raise_retry_us;
        int64_t raise_last;          /* the block znode read: its block_end, version */
        int raise_block_version;     /* -1: no such znode */
    } pids;
};

/* cluster_producer_ids.c: b->on_producer_id_next in cluster mode (as
 * bk_producer_id_next, broker.h); _prefetch: a block now if none is held
 * or being fetched (each session connect). */
int16_t cl_producer_id_next(bk_broker *b, int64_t *pid);
void cl_producer_ids_prefetch(bk_broker *b);
/* b->on_producer_id_floor in cluster mode (bk_producer_id_floor, broker.h):
 * KP_NONE when no id <= above can be handed out by any broker any more, else
 * COORDINATOR_LOAD_IN_PROGRESS while the floor is raised in ZooKeeper. */
int16_t cl_producer_id_floor(bk_broker *b, int64_t above);
/* The floor read (with a watch): first at each session (re)connect, before
 * the other resyncs (PB6); _lost: the connection went (PB7). */
void cl_producer_ids_floor_read(bk_broker *b);
void cl_producer_ids_floor_lost(bk_broker *b);
bool cl_producer_ids_on_watch(bk_broker *b, int type, const char *path);
/* b->on_producer_id_fresh (PB8): a sync and a get of the floor, then
 * bk_producer_ids_synced. */
void cl_producer_ids_fresh(bk_broker *b);

/* cluster_session.c */
/* Cluster mode's calls for replication (main.c: repl_isr_install). */
extern const repl_cluster_ops cl_repl_ops;
int  cl_start(bk_broker *b, char *err, size_t errlen);
void cl_stop(bk_broker *b);
/* After the mirror applied topic name (or found it gone). */
void cl_topic_applied(bk_broker *b, const char *name);
/* After the live brokers changed. */
void cl_brokers_changed(bk_broker *b);
/* After registered, synced or stalled changed: the view's fenced flag
 * follows (cluster_session.c S1). */
void cl_fence_update(bk_broker *b);
/* A ZooKeeper rc as a Kafka error, with words for err. */
int  cl_zk_error(bk_broker *b, int zrc, const char *what, char *err, size_t errlen);

/* The write halves' cluster side (cl_store_zk calls them after validating):
 * KP_NONE with op->pending set (op may be NULL), or an error now (ZooKeeper
 * unreachable, the topic unknown to the mirror). */
int  cl_topic_create(bk_broker *b, const char *name, int32_t partitions,
                     const int32_t *replicas, int16_t rf, bool assigned,
                     const md_kv *configs, size_t nconfigs, bk_topic_op *op, char *err,
                     size_t errlen);
int  cl_topic_delete(bk_broker *b, const char *name, bk_topic_op *op, char *err,
                     size_t errlen);
/* count: the new total; replicas: the new partitions', rf each. */
int  cl_topic_add_partitions(bk_broker *b, const char *name, int32_t count,
                             const int32_t *replicas, int16_t rf, bk_topic_op *op,
                             char *err, size_t errlen);
int  cl_topic_configs_set(bk_broker *b, const char *name, const md_kv *kv, size_t n,
                          bk_topic_op *op, char *err, size_t errlen);

/* cluster_broker_configs.c: dynamic broker configs in /config/brokers/. */
/* Reads the default's and this broker's znodes (with watches) and adopts
 * them: at every session (re)connect and when a watch on one fires. */
void cl_broker_configs_refresh(bk_broker *b);
/* cluster_notices.c: deletes the change notices of folder ("/kafka-acl-changes",
 * "/kafka-acl-extended-changes", "/config/changes") older than
 * change.notification.expiration.ms, asynchronously; _all: the three. */
void cl_notices_purge(bk_broker *b, const char *folder);
void cl_notices_purge_all(bk_broker *b);
bool cl_broker_configs_path(const char *path);
/* Writes a validated set; KP_NONE with op->pending (op may be NULL), or an
 * error now (ZooKeeper unreachable). */
int  cl_broker_configs_write(bk_broker *b, const char *resource, const md_kv *kv, size_t n,
                             bk_topic_op *op, char *err, size_t errlen);

/* cluster_reassign.c: the parts of a reassignment that passed their checks
 * (error KP_NONE) written to their topic's znode; cl_store_zk's. */
int  cl_partitions_reassign(bk_broker *b, const char *topic, const bk_reassign *parts,
                            int32_t n, bk_topic_op *op, char *err, size_t errlen);

/* cluster_store.c: the store of record in cluster mode (daemon/view/view_store.h). */
extern const struct bk_store cl_store_zk;

/* A write half's op answered once the mirror shows topic's znode at
 * version or later (the reassignments' start, cluster_reassign.c). */
void cl_wait_assignment(bk_broker *b, const char *topic, int version, bk_topic_op *op);

/* cluster_reassign.c (the controller's half) */
/* reconcile_topic, for each existing partition p of t after the other
 * adjustments of st: finishes a reassignment whose targets are all in the
 * ISR (ISR ∩ target, a leader from the target; *finished set: the topic
 * znode must drop the removed replicas in the same transaction), or
 * replaces a leader a cancel left outside the replicas.  true when st
 * changed. */
/* cluster_reassign.c R4: every reassignment write waiting for its retry answered
 * REQUEST_TIMED_OUT and freed (shutdown, before the loop's events go). */
void cl_reassign_stop(bk_broker *b);
bool cl_ctl_reassign_adjust(bk_broker *b, const bk_topic *t, int32_t p, md_partition_state *st,
                         bool *finished);
/* Adds to txn the topic znode without the removed replicas of the
 * finished[p] partitions, at version (cluster_reassign.c R3). */
void cl_ctl_reassign_put_assignment(zk_txn *txn, const bk_topic *t, int version,
                                 const bool *finished);

/* cluster_links.c: cluster links and mirror topics in ZooKeeper (issue 33).
 * publish: cl_store_zk's link_publish (view_store.h); resync: each session
 * (re)connect; on_watch: true when path is theirs. */
/* how: view_store.h's BK_PUB_*. */
void cl_links_publish(bk_broker *b, bool mirror, const char *name, int how);
/* view_store.h's mirror_propose (cluster_links.c L9). */
void cl_links_mirror_propose(bk_broker *b, const char *topic, const char *state,
                             void (*done)(bk_broker *b, void *arg, int rc, const char *now),
                             void *arg);
void cl_links_resync(bk_broker *b);
bool cl_links_on_watch(bk_broker *b, int type, const char *path);
/* cl_store_zk's mirror_caught_up and mirrors_told_list (view_store.h). */
void cl_links_caught_up(bk_broker *b, const char *fact);
void cl_links_told_list(bk_broker *b, void (*told)(bk_broker *b, char *const *names, int n));
void cl_links_local_epoch(bk_broker *b, const char *key, int32_t epoch,
                          void (*done)(bk_broker *b, void *arg, int32_t epoch), void *arg);

/* cluster_mirror.c */
void cl_mirror_on_watch(bk_broker *b, int type, const char *path);
void cl_mirror_resync(bk_broker *b);
/* A new session: any resync of the old one counts for nothing. */
void cl_mirror_resync_reset(bk_broker *b);
/* The resync's last topic is in (cluster_mirror.c's own bookkeeping). */
void cl_mirror_resync_done(bk_broker *b);
void cl_mirror_refresh_topic(bk_broker *b, const char *name);
/* Lists /brokers/topics once and refreshes what the mirror lacks or has
 * too many of (the child watch's work; a new controller's check). */
void cl_mirror_check_topics(bk_broker *b);
void cl_mirror_refresh_brokers(bk_broker *b);
void cl_mirror_refresh_controller(bk_broker *b);
cl_topic *cl_mirror_topic(bk_broker *b, const char *name, bool create);
void cl_mirror_free(bk_broker *b);

/* cluster_controller.c */
void cl_ctl_elect(bk_broker *b);
/* The controller lost its role (deposed, or the session expired). */
void cl_ctl_resign(bk_broker *b, const char *why);
/* Whatever the mirror changed, the controller checks (when active):
 * name NULL = every topic. */
void cl_ctl_reconcile(bk_broker *b, const char *name);
void cl_ctl_refresh_deletions(bk_broker *b);

/* cluster_logdirs.c: brokers whose log directory failed (Kafka's
 * /log_dir_event_notification).  Controller: true while broker id is
 * offline-dir in its current registration (cl_broker_shutting counts it
 * as leaving).  refresh: reads (and watches) the notifications; reset: a
 * new controller remembers nothing (and tells itself of its own). */
bool cl_broker_dir_failed(bk_broker *b, int32_t id);
void cl_ctl_logdirs_refresh(bk_broker *b);
bool cl_ctl_logdirs_path(const char *path);
void cl_ctl_logdirs_reset(bk_broker *b);
/* The failed broker's side.  cl_logdir_failed: b->on_logdir_failed (the
 * fetchers stop, the controller is told).  renotify: tells the controller
 * again (a new controller, or a notification that could not be written):
 * Kafka's new controller learns it from its LeaderAndIsr answers; here
 * the broker says it again.  tick: retries one that could not be written. */
void cl_logdir_failed(bk_broker *b);
void cl_logdir_renotify(bk_broker *b);
void cl_logdir_tick(bk_broker *b);

/* cluster_recovery.c: elections when no ISR member stayed up */
enum { CTL_REC_NONE, CTL_REC_WAIT, CTL_REC_ELECT };
/* The mirror read partition p's state znode, last modified at mzxid. */
void cl_recovery_state_read(bk_broker *b, const char *topic, int32_t p, int64_t mzxid);
/* Writes /broker_log_ends/<id> (this broker's log ends, for this
 * session), then calls then (whether the write worked or not: it is
 * logged, and the controller ignores what an earlier session wrote). */
void cl_recovery_publish(bk_broker *b, void (*then)(bk_broker *b));
/* Registered in this session with that czxid: held leaderships (cluster_recovery.c R5). */
void cl_recovery_registered(bk_broker *b, int64_t czxid);
/* Live broker id's registration czxid (Kafka's broker epoch); 0 none. */
int64_t cl_broker_czxid(bk_broker *b, int32_t id);
/* reconcile_topic, for an existing partition before its failover election:
 * CTL_REC_NONE (go on as before), CTL_REC_WAIT (write nothing now),
 * CTL_REC_ELECT (st holds the election). */
int  cl_ctl_recovery_adjust(bk_broker *b, cl_topic *ct, const bk_topic *t, int32_t p,
                         md_partition_state *st);
/* /broker_log_ends/<id>'s lines.  _parse: text (NUL-terminated; changed
 * in place, the topics point into it) → *session (the ZooKeeper session
 * the first line names; 0 when that line is wrong), *out (malloc'd, sorted
 * for _find), the count; lines not of the form, or all after a wrong first
 * line, are left out.  _head, _line: the first line, one line, into out;
 * its length (-1: cap too small). */
typedef struct cl_log_end {
    const char *topic;
    int32_t partition, epoch;        /* epoch: the log's last leader epoch */
    int64_t end;                     /* the log end offset */
    int64_t hw;                      /* the replica's high watermark */
} cl_log_end;
int  cl_log_ends_parse(char *text, int64_t *session, cl_log_end **out);
int  cl_log_ends_head(char *out, size_t cap, int64_t session);
const cl_log_end *cl_log_ends_find(const cl_log_end *e, int n, const char *topic, int32_t p);
int  cl_log_ends_line(char *out, size_t cap, const cl_log_end *e);
/* Each cluster tick: a wait that ended reconciles again. */
void cl_ctl_recovery_tick(bk_broker *b);
void cl_recovery_free(bk_broker *b);
/* repl_isr_view_changed: sets p->held (cluster_recovery.c R5), saying so when it changes. */
void cl_recovery_view_changed(bk_broker *b, bk_partition *p);

/* cluster_leaders.c */
/* Reads /admin/controlled_shutdown (and watches it). */
void cl_shutdowns_refresh(bk_broker *b);
/* id asked for a controlled shutdown in its current registration. */
bool cl_broker_shutting(bk_broker *b, int32_t id);
/* SIGTERM: 0 when a controlled shutdown started (done is called on the
 * loop once this broker's leaderships moved, or the retries ran out);
 * -1 when there is nothing to ask for (standalone, disabled, no
 * controller or ZooKeeper, nothing led): stop at once. */
int  cl_controlled_shutdown(bk_broker *b, void (*done)(bk_broker *b));
bool cl_controlled_shutdown_running(bk_broker *b);
/* cl_stop: removes the request znode and the poll. */
void cl_controlled_shutdown_end(bk_broker *b);
/* reconcile_topic, for each existing partition p of topic: st is the state
 * it would write (v's, or its own failover election); moves leadership off
 * a leaving broker, to the preferred replica when marked, and takes dead
 * or leaving followers out of the ISR.  true when st changed. */
bool cl_ctl_leaders_adjust(bk_broker *b, cl_topic *ct, const char *topic, int32_t p,
                        const bk_pview *v, md_partition_state *st);
/* Marks partition p of topic for a preferred-leader election (the caller
 * reconciles the topic): KP_NONE, KP_ELECTION_NOT_NEEDED,
 * KP_PREFERRED_LEADER_NOT_AVAILABLE, KP_UNKNOWN_TOPIC_OR_PARTITION,
 * KP_NOT_CONTROLLER. */
int  cl_ctl_elect_preferred(bk_broker *b, const char *topic, int32_t p);
/* The live brokers changed (before the reconcile): the ISRs that hold a
 * broker that just died are marked for it to leave. */
void cl_ctl_leaders_brokers_changed(bk_broker *b);
/* Each cluster tick: the automatic leader rebalance (controller). */
void cl_ctl_leaders_tick(bk_broker *b);
/* ISR changes this broker made, for /metrics. */
void cl_ctl_isr_counted(bk_broker *b, bool shrink);
void cl_isr_counters(uint64_t *shrinks, uint64_t *expands);

#endif
