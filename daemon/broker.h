/*
 * daemon/broker.h — sluiced, the broker process: the broker's state and
 * the few things every part of the daemon uses (logging, clocks, the wire
 * form of an error).
 *
 * The daemon's other contracts have a header each, so a file includes
 * what it uses:
 *   daemon/view/view.h      the cluster view (topics, partitions, leaders,
 *                         brokers) and the one path per topic fact
 *   daemon/replica/replica.h      the local replicas (partition logs), their fetch
 *                         waiters, and the workers that flush, retain,
 *                         compact and delete them
 *   daemon/request.h      the request context every API handler gets, and
 *                         the handlers
 *   daemon/group/group.h  the group coordinator's public face
 *   admin/admin.h         the admin HTTP endpoint (/sql, /metrics)
 *
 * One thread runs the event loop and owns everything here.  Work that may
 * block goes to a worker (daemon/worker.h: threads, a queue, done() back
 * on the loop):
 * partition fdatasyncs (replica_flusher.c), metadata WAL syncs and offset-commit
 * writes (md_sync.c), file removal and the PBKDF2 of PLAIN logins and of the
 * replica fetcher's SCRAM login (replica_janitor.c),
 * compaction (replica_cleaner.c) and SQL statements (admin/sql_worker.c).
 */
#ifndef SLUICE_BROKER_H
#define SLUICE_BROKER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/broker_config.h"
#include "metadata/md.h"
#include "protocol/kp.h"

struct event_base;
struct event;
typedef struct bk_broker bk_broker;

/* One partition's schema check of its records' keys or values (issue 31):
 * Produce fills the first fields per partition, the checker keeps its
 * per-batch memo in the rest (a run of records with one id costs one
 * comparison each). */
typedef struct bk_schema_ctx {
    const char *topic;
    bool key;                        /* keys ("<topic>-key"), else values */
    const md_schema_check *rule;
    int32_t last_ok;                 /* the checker's: last id found good; -1 none */
    const void *last_entry;          /* the checker's */
    char subject[320];               /* the checker's: TopicNameStrategy's subject */
} bk_schema_ctx;
typedef struct bk_conn bk_conn;
typedef struct bk_topic bk_topic;
typedef struct bk_partition bk_partition;

struct bk_broker {
    struct event_base *base;
    bk_config *cfg;
    md_db *db;
    char data_dir[4096];             /* first entry of log.dirs */
    char cluster_id[MD_CLUSTER_ID_MAX + 1];
    /* the cluster view (view.c) */
    bk_topic **topic_hash;           /* by name */
    bk_topic **topic_id_hash;        /* by topic id, same size (view.c V4) */
    size_t topic_hash_size, ntopics;
    /* cluster mode (view.c; written by cluster/ through bk_view_cluster_*):
     * the live brokers ascending, the controller, leadership fencing */
    bool view_clustered;             /* false: standalone answers */
    struct bk_view_broker *live;
    int nlive;
    int32_t controller_id;           /* -1: none */
    bool fenced;
    /* the local replicas (replica.c): a doubly linked list */
    bk_partition *replicas;
    size_t nreplicas;
    struct event *sig_term, *sig_int;
    struct event *maint_timer;       /* flush.ms checks; saves offsets and
                                        producer state (main.c) */
    bool stopping;
    int nconns;
    struct bk_flusher *flusher;      /* fsync worker (daemon/replica/replica_flusher.c) */
    struct bk_server *server;
    struct bk_tls *tls;              /* TLS contexts, made on first use (sec_tls.c) */
    struct bk_zk *zk;                /* cluster mode: the ZooKeeper session (cluster_zk.c) */
    struct bk_cluster *cl;           /* cluster mode: mirror and controller state */
    struct repl_cluster *repl;       /* cluster mode: lent to replication (repl_isr.h) */
    const struct repl_cluster_ops *repl_ops; /* cluster mode's calls (repl_isr_install) */
    const struct bk_store *store;    /* where facts are written (daemon/view/view_store.h) */
    const struct bk_isr_hooks *isr;  /* cluster mode: the ISR's high watermark
                                        (repl_isr.c); NULL: the log end's */
    /* the local replicas as the view opens and closes them (replica.c,
     * daemon/view/view_registry.h); NULL: none */
    const struct view_replica_hooks *replica_hooks;
    bool logdir_failed;              /* the log directory failed (replica_logdir.c) */
    /* cluster mode, set by cl_start: a failed log directory is the
     * controller's to handle (cluster_logdirs.c); NULL: standalone, it
     * recovers when writes succeed again (replica_logdir.c) */
    void (*on_logdir_failed)(bk_broker *b);
    /* FindCoordinator KeyType 1: the transaction coordinator's answer
     * (daemon/txn/txn.h txn_coordinator_of, installed by txn_start); NULL:
     * not started */
    int32_t (*txn_coordinator_of)(bk_broker *b, const char *id, size_t len);
    struct bk_authz *authz;          /* ACLs, checked in memory (sec_authz.c) */
    struct bk_admin *admin;          /* admin HTTP + SQL workers (admin_http.c) */
    struct sr_registry *registry;    /* the schema registry (daemon/registry) */
    struct lk_set *links;            /* cluster links (daemon/link/link.c); NULL: none */
    /* the password encoder: cluster links' secrets sealed at rest
     * (daemon/security/sec_pwenc.h, made in main.c before the loop runs) */
    struct sec_pwenc *pwenc;
    /* true (with the reason) when topic is a mirror of a cluster link, which
     * takes no writes but its link's: no transaction may add it, no marker
     * may go into it (daemon/link/link.h link_mirror_refuses, installed by
     * link_start); NULL: no links */
    bool (*mirror_refuses)(bk_broker *b, const char *topic, const char **msg);
    /* Cluster mode: a partition of topic is led here after a view change
     * (repl_isr.c), so a mirror that left mirroring takes its fresh epoch
     * duty at once (daemon/link/link.h link_mirror_led; link.c K14, K17) */
    void (*mirror_led)(bk_broker *b, const char *topic);
    /* Cluster mode: the cluster_links / mirror_topics rows in SQLite were
     * changed by another broker's write (cluster_links.c's apply half);
     * the links follow them (daemon/link/link.c link_sync, installed by
     * link_start); NULL: not started */
    void (*links_changed)(bk_broker *b);
    /* Produce's check of one key or value in the schema registry's wire
     * format against c->rule (issue 31; daemon/registry/sr_validate.c,
     * installed by sr_start; NULL: no registry here).  whole false: p holds
     * only the first bytes of a long one (the id is checked, not the body).
     * 0, -1 refused with the reason in why, or -2 not known yet (the
     * registry here is still catching up: retriable) with the reason in
     * why.  Loop thread, no allocation. */
    int (*schema_check)(bk_broker *b, bk_schema_ctx *c, const uint8_t *p, size_t len,
                        bool whole, char *why, size_t whylen);
    struct bk_janitor *janitor;      /* unlinks files (replica_janitor.c) */
    /* where CPU work the loop must not do runs (bk_worker_call: a login's
     * PBKDF2): the janitor's worker while it runs, else NULL */
    struct bk_worker *calls;
    struct bk_cleaner *cleaner;      /* compaction workers (replica_cleaner.c) */
    struct event *retention_timer;   /* log.retention.check.interval.ms */
    int64_t pid_next, pid_end;       /* producer ids reserved in SQLite, unused */
    int64_t pid_floor;               /* producer_ids' floor known saved (bk_producer_id_floor) */
    /* cluster mode, set by cl_start: producer ids come from ZooKeeper's
     * /latest_producer_id_block (cluster_producer_ids.c); NULL: SQLite */
    int16_t (*on_producer_id_next)(bk_broker *b, int64_t *pid);
    int16_t (*on_producer_id_floor)(bk_broker *b, int64_t above);   /* the same: a floor */
    /* the same: a fresh read of the floor, bk_producer_ids_synced when back */
    void (*on_producer_id_fresh)(bk_broker *b);
    /* InitProducerId requests waiting for a floor read (producer_ids.c P1):
     * cur: covered by the read in flight; next: arrived after it was sent;
     * run: covered by a read that is back, being answered */
    struct bk_pid_wait *pid_wait_cur, *pid_wait_next, *pid_wait_run;
    bool pid_reading;
};

/* The one door to a mirror topic (link.c K1): true, with the reason in
 * *msg, when topic is a mirror of a cluster link and takes no writes but
 * its link's; false when it is not or there are no links.  Through the
 * mirror_refuses hook, so no room calls into daemon/link/. */
static inline bool bk_mirror_refuses(bk_broker *b, const char *topic, const char **msg)
{
    return b->mirror_refuses && b->mirror_refuses(b, topic, msg);
}

/* Partitions added to topic by a client or SQL: refused (true, the text
 * in msg) while it is a mirror, whose partitions follow the source's (the
 * link adds them, link.c K1). */
static inline bool bk_mirror_partitions_refused(bk_broker *b, const char *topic, char *msg,
                                                size_t msglen)
{
    const char *why;
    if (!bk_mirror_refuses(b, topic, &why))
        return false;
    snprintf(msg, msglen, "'%s' is a mirror topic: its partitions follow the source topic's; "
             "promote it first (UPDATE mirror_topics SET state = 'promoted')", topic);
    return true;
}

/* The same door's other side: see bk_broker.mirror_led. */
static inline void bk_mirror_led(bk_broker *b, const char *topic)
{
    if (b->mirror_led)
        b->mirror_led(b, topic);
}

/* A new producer id, unique for this broker's life and across restarts,
 * and in cluster mode across the brokers (daemon/producer_ids.c): KP_NONE,
 * or a retriable Kafka code when none can be reserved now
 * (COORDINATOR_NOT_AVAILABLE standalone, COORDINATOR_LOAD_IN_PROGRESS while
 * a cluster broker reserves a block). */
int16_t bk_producer_id_next(bk_broker *b, int64_t *pid);
/* No id <= above is handed out here from now on, across restarts: the
 * producer ids of another cluster's batches copied here (a mirror topic,
 * daemon/link/).  One durable write when above passes the saved floor
 * (rounded up to a block: rare), else nothing.  KP_NONE, or
 * COORDINATOR_NOT_AVAILABLE when the floor cannot be saved.  Cluster mode
 * (b->on_producer_id_floor): the floor is the cluster's, in ZooKeeper,
 * raised asynchronously; COORDINATOR_LOAD_IN_PROGRESS until it is (ask
 * again shortly; daemon/cluster/cluster_producer_ids.c PB4). */
int16_t bk_producer_id_floor(bk_broker *b, int64_t above);
/* Cluster mode: the floor read that b->on_producer_id_fresh sent is back
 * (whatever its result): the requests it covers run again (producer_ids.c). */
void bk_producer_ids_synced(bk_broker *b);

/* ---- misc ------------------------------------------------------------------- */
int64_t bk_now_ms(void);             /* wall clock, ms */
int64_t bk_mono_us(void);            /* monotonic, µs */
/* One log line to stderr: "[2026-11-30 01:02:03,456] INFO message". */
void bk_log(const char *level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define BK_INFO(...)  bk_log("INFO", __VA_ARGS__)
#define BK_WARN(...)  bk_log("WARN", __VA_ARGS__)
#define BK_ERROR(...) bk_log("ERROR", __VA_ARGS__)
/* event_add with its failure logged, naming what the event is for (epoll_ctl
 * fails with ENOMEM, or ENOSPC past fs.epoll.max_user_watches).  0, or -1:
 * the event is not armed, and the caller says beside the call what that
 * costs and does it. */
struct event;
struct timeval;
int bk_event_add(struct event *ev, const struct timeval *tv, const char *what);
/* The wire form of a handler's result: Kafka codes (-1 and up) pass;
 * internal errors (negative, e.g. MD_E_SQL) never reach the wire and
 * become UNKNOWN_SERVER_ERROR. */
int16_t bk_wire_code(int rc);
/* A NUL-terminated malloc'd copy of a slice (null → NULL).  Embedded NUL
 * bytes become '?', so "retention.ms\0x" can never pass as "retention.ms".
 * *oom is set when allocation fails (and left alone otherwise). */
char *bk_slice_dup(kp_str s, bool *oom);
/* s[0..len) is well-formed UTF-8 (no overlong forms, surrogates, or code
 * points past U+10FFFF): user names (SASL, SCRAM credentials, znodes). */
bool bk_utf8_valid(const char *s, size_t len);

#endif
