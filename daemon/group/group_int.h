/*
 * The group coordinator's internals, shared by its files:
 *
 *   group_coordinator.c          the group table, the rebalance state machine, timers,
 *                    startup and shutdown
 *   group_join.c     JoinGroup (static membership), SyncGroup, Heartbeat,
 *                    LeaveGroup
 *   group_offset_commit.c  gc_offsets_commit, OffsetCommit, OffsetFetch, retention
 *   group_persist.c  the end of the loop turn, the jobs for the metadata
 *                    sync worker, the deferred answers (group_persist.c invariants C1, C2,
 *                    C5-C7, J1-J3), gc_group_delete
 *   group_api.c      wire parsing and encoding of the membership APIs
 *   group_offset_delete.c  OffsetDelete (tombstones on the commit path)
 *   group_txn.c      TxnOffsetCommit, a transaction's end (gc_txn_complete)
 *   group_log_txn.c  transactional offset records met by a load or a
 *                    follower of __consumer_offsets (gc_ltxn_*)
 *
 * Nothing outside these files includes it: the rest of the daemon calls
 * the bk_groups_* / bk_group_* / bk_offsets_* functions of group.h
 * and the bk_handle_* ones of request.h.
 *
 * Facts, one path each.  The write half stores the fact (standalone: in
 * SQLite, through a job on the metadata sync worker); the apply half
 * changes the running coordinator and answers (what a replicated log's
 * apply will call in cluster mode).
 *
 *   offset commit  (OffsetCommit; SQL UPDATE / INSERT of committed_offsets)
 *     path     gc_offsets_commit (group_offset_commit.c): validation, then queued
 *     write    the entries copied into the turn's job (gc_commit_to_job),
 *              upserted by the worker (md_offset_commit)
 *     apply    gc_commit_apply: each entry's result from the job; done()
 *     durable  answered only after the job's transaction and its WAL
 *              fdatasync (group_persist.c C2); a failed job or sync fails the commit
 *   group state  (membership, generation, protocol, assignments)
 *     path     gc_set_state / gc_mark_dirty (group_coordinator.c)
 *     write    the dirty group copied into the turn's job (md_group_save)
 *     apply    in memory first: the state machine runs on the loop
 *     durable  answers that reflect it wait for the job's sync (group_persist.c C2); after
 *              a crash groups load Empty and members rejoin.  Cluster
 *              mode: a completed rebalance (and an Empty group) is also
 *              Kafka's GroupMetadata record, the SyncGroup answers wait
 *              for its replication (group_join.c), and a new coordinator
 *              loads the group Stable with its members (group_log.c)
 *   group delete  (DeleteGroups; SQL DELETE FROM consumer_groups)
 *     path     gc_group_delete (group_persist.c): the group turns Dead, queued
 *     write    a delete in the next job, run before its group and offset
 *              rows (md_group_delete)
 *     apply    gc_delete_apply: frees the group (a failed write: Empty again)
 *     durable  answered only after the job's sync
 *   transactional offsets  (TxnOffsetCommit; a transaction's end)
 *     path     gc_offsets_commit with txn (entries carry md_offset.txn),
 *              then gc_txn_complete (group_txn.c)
 *     write    pending rows in the job (md_txn_offset_put), then a txn
 *              end in a later job (md_txn_offsets_complete, after its
 *              offsets)
 *     apply    gc_commit_apply; gc_txn_apply calls the end's done
 *     durable  both answered only after their job's sync (group_txn.c X2)
 *   offset and group expiry  (offsets.retention.minutes)
 *     path     gc_expire_tick (group_offset_commit.c)
 *     write    md_offsets_expire, md_group_delete on the loop's handle, only
 *              while no job writing group rows is in flight, skipping groups
 *              with commits queued
 *     apply    frees the expired Empty groups; cluster mode: tombstones
 *              for the expired offsets and groups (gc_log_offsets_tombstone,
 *              gc_log_group_tombstone), not waited for, as Kafka's
 *     durable  nobody waits for it; db.c D2
 *
 * Every job goes through the one sync worker in submission order
 * (md_sync.c S5), so no two writes of a group's rows race.
 */
#ifndef SLUICE_GROUP_H
#define SLUICE_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include <event2/util.h>

#include "daemon/view/view.h"
#include "daemon/group/group.h"
#include "daemon/request.h"
#include "daemon/group/group_commit_cadence.h"
#include "kp_msgs.h"

/* Kafka's GroupCoordinator.NewMemberJoinTimeoutMs. */
#define GC_NEW_MEMBER_JOIN_TIMEOUT_MS 300000

/* GC_DEAD: being deleted (gc_group_delete), freed once that is durable. */
enum gc_state { GC_EMPTY, GC_PREPARING, GC_COMPLETING, GC_STABLE, GC_DEAD };
const char *gc_state_name(enum gc_state s);   /* Kafka's names */

typedef struct gc_group gc_group;
typedef struct gc_member gc_member;
typedef struct gc_job gc_job;

/* A deferred answer.  It sits in exactly one place (group_persist.c C1): held by a
 * member (join or sync, m != NULL), in the outbox (answer written,
 * waiting for the end of the loop turn), in the commit batch, or in the
 * synced list (its turn's job submitted, waiting for the sync seq).  A
 * join or sync wait belongs to a request (r->state points here and
 * r->cancel unlinks it); an offset commit's or a group delete's belongs to
 * its caller (r NULL, done set; gc_groups_forget detaches it). */
typedef struct gc_wait {
    struct gc_wait *next, *prev;      /* outbox / batch / synced; self when unlinked */
    bk_req *r;                        /* join, sync; NULL for a commit */
    gc_member *m;                     /* join or sync wait held by m */
    bool is_sync;
    /* offset commits (group_offset_commit.c): the caller's entries, the ones
     * to store with result KP_NONE until the apply half fills them in */
    md_offset *offs;
    size_t noffs;
    bk_group_done_fn done;            /* commits, deletes; NULL: forgotten */
    void *done_arg;
    /* group deletes (group_coordinator.c): the id (owned) and where the reason goes */
    char *delete_id;
    char *delete_err;
    size_t delete_errlen;
    int rc;                           /* commits, deletes: outcome of the store */
    uint64_t seq;                     /* in synced: the sync to wait for */
    struct gc_job *job;               /* commits: the job storing its rows */
    size_t job_first;                 /* … from this row of the job */
    /* cluster mode, commits (group_log.c): the __consumer_offsets
     * partition its record went to and the high watermark that answers
     * it (0: none); hold: waiting for that high watermark */
    int32_t log_partition;
    int32_t log_epoch;                /* the leader epoch it was appended in */
    int64_t log_end;
    struct gl_hold *hold;
    /* a transaction's end (group_txn.c, gc_txn_complete): done when set */
    gc_txn_done_fn txn_done;
    int64_t txn_producer_id;
    int32_t txn_partition;            /* -1: every group's */
    int32_t txn_nparts;               /* what groups hash over */
    bool txn_commit;
} gc_wait;

/* A transaction's end in a job (group_txn.c): the producer's pending
 * offsets of the groups in partition part of nparts (nparts 0: every
 * group) committed or dropped; rc the worker's outcome. */
typedef struct gc_txn_end {
    int64_t producer_id;
    int32_t part, nparts;
    bool commit;
    int rc;
} gc_txn_end;

typedef struct gc_proto {
    char *name;
    uint8_t *meta;
    int32_t meta_len;
} gc_proto;

struct gc_member {
    gc_member *next, *prev;           /* the group's list, in join order */
    gc_group *g;
    char *id;
    char *instance_id;                /* NULL: dynamic member */
    char *client_id;
    char *client_host;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    char *protocol_type;
    gc_proto *protos;                 /* in the member's preference order */
    int nprotos;
    uint8_t *assignment;
    int32_t assignment_len;
    gc_wait *join_w;                  /* a JoinGroup waiting for the rebalance */
    gc_wait *sync_w;                  /* a SyncGroup waiting for the leader */
    bool is_new;                      /* joined in this rebalance */
    int64_t last_seen_us;             /* monotonic: heartbeat, join, sync, commit */
    struct event *session_timer;
};

/* A member id handed out with MEMBER_ID_REQUIRED, not yet joined. */
typedef struct gc_pending {
    struct gc_pending *next;
    gc_group *g;
    char *id;
    struct event *timer;              /* session timeout */
} gc_pending;

struct gc_group {
    gc_group *hnext;
    char *id;
    enum gc_state state;
    int64_t state_changed_at;         /* wall ms */
    int32_t generation;
    char *protocol_type;              /* NULL: offsets only */
    char *protocol;                   /* chosen for the generation */
    char *leader;                     /* member id, NULL without members */
    gc_member members;                /* list sentinel */
    int nmembers;
    gc_pending *pending;
    struct event *join_timer;         /* initial delay / rebalance timeout */
    bool initial_delay;               /* join_timer is an InitialDelayedJoin */
    bool new_member_added;
    int64_t initial_remaining_ms;
    gc_wait *store_w;                 /* cluster mode, Completing: the leader's
                                         SyncGroup's GroupMetadata record,
                                         waiting to be replicated (group_join.c
                                         M2) */
    struct gc_replacement *replacing; /* cluster mode, Stable: static members'
                                         replacements being stored, oldest
                                         first (group_join.c M2) */
    bool dirty;                       /* persist at the end of the loop turn */
    gc_group *dirty_next;
};

typedef struct gc_coord {
    bk_broker *b;
    gc_group **hash;
    size_t hash_size, ngroups;
    gc_wait outbox;                   /* answered, to finish after the turn's commit */
    gc_wait batch;                    /* commits and deletes for the next job */
    gc_wait synced;                   /* stored, waiting for their WAL sync
                                         (seq non-decreasing) */
    gc_group *dirty;
    struct event *turn_ev;            /* end of loop turn: persist, then answer */
    struct event *linger_ev;          /* the batch waits for due commits (group_persist.c C7) */
    cc_table cadence;                 /* each connection's commit pace (group_persist.c C7) */
    int64_t batch_first_us;           /* arrival of the batch's oldest commit */
    int64_t linger_until;             /* when linger_ev is due, while pending */
    struct event *expire_timer;       /* offsets.retention.check.interval.ms */
    struct event *sig_term, *sig_int; /* answer waiting joins on shutdown */
    gc_job *jobs, **jobs_tail;        /* submitted to the sync worker (group_persist.c J2) */
    gc_job *job_pool;
    uint64_t last_job_seq;
    int group_jobs;                   /* submitted jobs that write group rows */
    bool expire_due;                  /* retention check waits for them */
} gc_coord;

extern gc_coord *gc;

/* ---- group_coordinator.c: the table, the state machine, timers ------------------------- */
/* The apply half of a delete, after its job's sync: rc is the store's
 * outcome; returns the KP_* answer, the reason in w->delete_err. */
int gc_delete_apply(gc_wait *w, int rc);
gc_group *gc_group_find(const char *id, size_t len);
gc_group *gc_group_create(const char *id, size_t len);
void gc_group_free(gc_group *g);      /* unlinks from the hash too */
/* This broker no longer coordinates g: its waiting requests answered
 * NOT_COORDINATOR, then freed (group_log.c G4). */
void gc_group_unload(gc_group *g);
gc_member *gc_member_find(gc_group *g, const char *id, size_t len);
gc_member *gc_member_of(gc_group *g, kp_str member_id);   /* null, "": none */
/* The group a member request names: NULL with *err INVALID_GROUP_ID,
 * NOT_COORDINATOR (gc_coordinator_error) or UNKNOWN_MEMBER_ID. */
gc_group *gc_member_group(kp_str group_id, int16_t *err);
gc_member *gc_static_member(gc_group *g, const char *instance, size_t len);
bool gc_static_fenced(gc_group *g, kp_str member_id, kp_str instance_id);
bool gc_is_pending(gc_group *g, const char *id, size_t len);
void gc_add_pending(gc_group *g, const char *id, int32_t session_ms);
void gc_remove_pending(gc_group *g, const char *id, size_t len);
void gc_leave_pending(gc_group *g, const char *id, size_t len);
void gc_member_free(gc_member *m);    /* unlinked, waits answered or dropped */
void gc_group_add(gc_group *g, gc_member *m);
void gc_set_leader(gc_group *g, const char *id);
void gc_set_state(gc_group *g, enum gc_state s);
void gc_mark_dirty(gc_group *g);
void gc_touch(gc_member *m);          /* a sign of life: resets the session clock */
void gc_arm_session(gc_member *m);
void gc_session_cb(evutil_socket_t fd, short what, void *arg);   /* m's session timer */
void gc_remove_member_and_update(gc_group *g, gc_member *m, const char *why);
void gc_maybe_prepare_rebalance(gc_group *g, const char *why);
void gc_try_complete_join(gc_group *g);
/* The protocol entry of m named name (NULL: m's first choice). */
const gc_proto *gc_member_proto(const gc_member *m, const char *name);
bool gc_member_supports(const gc_member *m, const char *p, size_t len);
/* Kafka's selectProtocol; NULL without members (or memory). */
char *gc_select_protocol(gc_group *g);
/* Drops g's pending GroupMetadata stores (group_join.c), if any: their
 * records may still be replicated, nobody waits for them. */
void gc_store_cancel(gc_group *g);
/* Answer m's waiting JoinGroup / SyncGroup with err (queued, group_persist.c C1). */
void gc_answer_join_error(gc_member *m, int16_t err, const char *member_id);
void gc_answer_sync(gc_member *m, int16_t err);
bool gc_str_eq(const char *a, const char *p, size_t len);   /* a NUL-terminated */
void gc_tv_ms(struct timeval *tv, int64_t ms);              /* ms < 0: 0 */

/* ---- group_persist.c: waits, the end of the turn, jobs -------------------- */
/* A deferred group request lets go of its own state: state freed, r->state
 * and r->cancel cleared (from its cancel, or through gc_req_finish). */
void gc_req_release(bk_req *r, void *state);
/* The end of a deferred group answer whose body is in r->out: the state
 * released, then the answer sent (net_req_finish may start the connection's
 * next request on r, so nothing of r is touched after it). */
void gc_req_finish(bk_req *r, void *state);
gc_wait *gc_wait_new(bk_req *r);
void gc_wait_unlink(gc_wait *w);
/* Drops a wait without answering it (shutdown only). */
void gc_wait_drop(gc_wait *w);
/* The answer is in w->r->out: finish it after this turn's transaction. */
void gc_wait_answered(gc_wait *w);
void gc_schedule_turn(void);
void gc_turn_cb(evutil_socket_t fd, short what, void *arg);   /* turn_ev, linger_ev */
void gc_on_durable(uint64_t seq, int err);                    /* the md_sync listener */
/* The apply half of a delete, after its job's sync: rc is the
 * store's outcome; returns the KP_* answer, the reason in w->delete_err. */
int gc_delete_apply(gc_wait *w, int rc);
/* Queues w (a commit or a delete, done set) for the next job. */
void gc_batch_add(gc_wait *w, uint64_t cadence_key);
/* Copies g's row and member rows into j.  0 or -1 (no memory). */
int gc_group_to_job(gc_job *j, const gc_group *g);
/* Hands the dirty groups to the sync worker as a job of their own (no
 * answer waits on it: timers, startup, shutdown). */
void gc_save_dirty_now(void);

/* The turn's writes as a job for the metadata sync worker (loop thread
 * only). */
gc_job *gc_job_take(void);            /* empty, from the pool; NULL: no memory */
void gc_job_put(gc_job *j);           /* back to the pool, unsubmitted */
const char *gc_job_strdup(gc_job *j, const char *s);         /* NULL stays NULL */
const char *gc_job_strndup(gc_job *j, const char *p, size_t len);
const void *gc_job_blob(gc_job *j, const void *p, int32_t len);  /* len < 0: NULL */
/* One more group delete, run before the job's group and offset rows;
 * *index: its place.  0, or -1: no memory. */
int gc_job_delete(gc_job *j, const char *group_id, size_t *index);
int gc_job_delete_result(const gc_job *j, size_t i);
/* One more transaction's end, run after the job's offsets; *index: its
 * place.  0, or -1: no memory. */
int gc_job_txn_end(gc_job *j, const gc_txn_end *t, size_t *index);
int gc_job_txn_end_result(const gc_job *j, size_t i);
/* Makes j a load's first job: before anything else in it, the worker
 * deletes every stored group (row, members, offsets) of that
 * __consumer_offsets partition (group_log.c G5). */
void gc_job_clear_partition(gc_job *j, int32_t partition, int32_t npartitions);
/* n more offset rows (valid until the next call); *first: the index of
 * the first.  NULL: no memory. */
md_offset *gc_job_rows(gc_job *j, size_t n, size_t *first);
/* Row i of the rows added so far (before submission: to update it). */
md_offset *gc_job_row(gc_job *j, size_t i);
/* One more group with room for nmembers members; NULL: no memory. */
md_group *gc_job_group(gc_job *j, size_t nmembers);
/* After the job's sync was reported (group_persist.c J1): row i's result, the job's rc. */
int gc_job_row_result(const gc_job *j, size_t i);
int gc_job_rc(const gc_job *j);
uint64_t gc_job_submit(gc_job *j);    /* returns the covering sync's seq */
void gc_jobs_release(uint64_t durable);
void gc_jobs_free(void);              /* shutdown: waits, then frees */

/* ---- group_log.c: cluster mode, group state in __consumer_offsets -------- */
#define GL_TOPIC "__consumer_offsets"
int  gc_log_start(bk_broker *b);          /* cluster mode only; 0 or -1 */
void gc_log_stop(void);
/* The leader of the group's __consumer_offsets partition; -1: none yet
 * (the topic is created once enough brokers live). */
int32_t gc_log_coordinator_of(bk_broker *b, const char *id, size_t len);
/* The group's partition among npartitions (Kafka's partitionFor); pure,
 * safe on any thread. */
int32_t gc_log_partition_in(int32_t npartitions, const char *id, size_t len);
/* KP_NONE when this broker leads the group's partition and has loaded it;
 * else COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or
 * COORDINATOR_LOAD_IN_PROGRESS. */
int16_t gc_log_coordinator_error(bk_broker *b, const char *id, size_t len);
/* Appends w's entries to store (result KP_NONE) to the group's partition
 * as Kafka's OffsetCommit records (a TxnOffsetCommit's, md_offset.txn:
 * one transactional batch of its producer, as Kafka's storeOffsets);
 * sets w->log_partition / log_end.  KP_NONE, or the error every such
 * entry gets. */
int16_t gc_log_commit_append(bk_broker *b, gc_wait *w);
/* After w's apply half: true when w now waits for its record's high
 * watermark (group_log.c answers and frees it), false to answer now
 * (its entries may carry the replication's error). */
bool gc_log_commit_hold(gc_wait *w);
void gc_log_forget(gc_wait *w);           /* from gc_wait_drop */
/* Appends g's state as Kafka's GroupMetadata record to its partition
 * (cluster mode).  KP_NONE (w, when given, then has log_partition /
 * log_end set for gc_log_group_hold), or the error Kafka's storeGroup maps
 * the refusal to (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
 * UNKNOWN_SERVER_ERROR). */
int16_t gc_log_group_store(bk_broker *b, const gc_group *g, gc_wait *w);
/* Holds w (no entries, done set) until its record is replicated: 1, then
 * done(done_arg, err) runs later (err 0, NOT_COORDINATOR or
 * REQUEST_TIMED_OUT) and frees w; else 0 (replicated already) or the
 * error, and w is the caller's. */
int16_t gc_log_group_hold(gc_wait *w);
/* Retention: tombstones for the expired offsets offs[0..n) (cluster mode;
 * only those of partitions led here). */
void gc_log_offsets_tombstone(bk_broker *b, const md_offset *offs, size_t n);
/* DeleteGroups: appends the group's tombstones (cluster mode). */
void gc_log_group_tombstone(bk_broker *b, const char *id);
/* True while partition i of __consumer_offsets is being loaded here: a
 * marker appended now is past what the load reads (group_txn.c). */
bool gc_log_loading(int32_t i);

/* ---- group_log_txn.c: transactional offset records in a load ------------- */
typedef struct gc_ltxn_row {
    md_offset o;                      /* txn, producer_id, producer_epoch set */
    char *strings;                    /* owns o's group_id, topic, metadata */
} gc_ltxn_row;
typedef struct gc_ltxn {              /* pending per producer (group_log_txn.c L1) */
    gc_ltxn_row *rows;
    size_t n, cap;
} gc_ltxn;
typedef int (*gc_ltxn_fn)(void *arg, const md_offset *o);
void gc_ltxn_clear(gc_ltxn *t);
/* A transactional OffsetCommit record of producer pid (its batch's
 * epoch): pending, o's strings copied.  0, or -1: no memory. */
int gc_ltxn_add(gc_ltxn *t, int64_t pid, int16_t epoch, kp_str group, kp_str topic,
                int32_t partition, const md_offset *o);
/* A control record rec of batch h: COMMIT emits the producer's pending
 * offsets (txn cleared) to emit, ABORT drops them (group_log_txn.c L2).  0, or emit's
 * error. */
int gc_ltxn_marker(gc_ltxn *t, const kp_batch *h, const kp_record *rec, gc_ltxn_fn emit,
                   void *arg);
/* The end of a load: the still pending offsets as pending rows into *job
 * (taken when NULL).  0, or -1: no memory. */
int gc_ltxn_to_job(const gc_ltxn *t, gc_job **job);

/* ---- group_join.c: JoinGroup, SyncGroup, Heartbeat, LeaveGroup ----------- */
typedef struct gc_join_args {
    kp_str group_id;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    kp_str member_id;
    kp_str instance_id;               /* len < 0: none */
    kp_str protocol_type;
    int nprotos;
    const kp_JoinGroupRequest_JoinGroupRequestProtocol *protos;  /* in the request */
    bool require_known_member_id;     /* v4+ without an instance id */
} gc_join_args;
int gc_join(bk_req *r, const gc_join_args *a);
/* Writes a JoinGroup response body for r's version: g's generation,
 * protocol type and name, or (g NULL, an error) none of them. */
void gc_write_join(bk_req *r, int16_t err, const gc_group *g, const char *leader,
                   const char *member_id, gc_group *members_of);
/* protocol_type / protocol_name: SyncGroup v5's, null when not given. */
int gc_sync(bk_req *r, kp_str group_id, int32_t generation, kp_str member_id,
            kp_str instance_id, kp_str protocol_type, kp_str protocol_name, int nassign,
            const kp_SyncGroupRequest_SyncGroupRequestAssignment *assign);
/* Writes a SyncGroup response body: m's assignment and (v5) its group's
 * protocol, or (m NULL) none. */
void gc_write_sync(bk_req *r, int16_t err, const gc_member *m);
int16_t gc_heartbeat(kp_str group_id, int32_t generation, kp_str member_id,
                     kp_str instance_id);
int16_t gc_leave(kp_str group_id, kp_str member_id);
/* One member of g leaving (LeaveGroup v3+ names several): by member id,
 * or by instance id (then a member id given must match: else
 * FENCED_INSTANCE_ID).  Kafka's per-member errors. */
int16_t gc_leave_member(gc_group *g, kp_str member_id, kp_str instance_id);

/* ---- group_offset_commit.c --------------------------------------------------------- */
/* The write half, at the end of the turn: copies w's entries to store
 * into job (w->job, w->job_first).  0, or MD_E_SQL when out of memory. */
int gc_commit_to_job(gc_wait *w, gc_job *j);
/* The apply half, once the job's sync is reported (group_persist.c J3): each stored
 * entry's result from the job; rc != 0 (or a failed job) fails them all
 * with COORDINATOR_NOT_AVAILABLE.  The caller then runs w->done. */
void gc_commit_apply(gc_wait *w, int rc);
/* Whether an offset commit for group id is queued (not stored yet). */
bool gc_commits_pending(const char *id);
void gc_expire_tick(evutil_socket_t fd, short what, void *arg);

/* ---- group_txn.c: offsets in a transaction --------------------------------- */
/* The write half of a transaction's end (w->txn_done set): into j.  0, or
 * MD_E_SQL when out of memory. */
int gc_txn_to_job(gc_wait *w, gc_job *j);
/* Its apply half, after the job's sync: calls w->txn_done and frees w. */
void gc_txn_apply(gc_wait *w, int rc);
/* Kafka's validateOffsetCommit for a transactional commit (KIP-447): the
 * error for the whole request, or 0; *create: the group must be created. */
int16_t gc_txn_group_error(kp_str group, int32_t gen, kp_str member, kp_str instance,
                           bool *create);
/* The group's partitions with offsets pending in a transaction, as
 * md_offset_list's rows (md_committed_free).  0 or MD_E_SQL. */
int gc_txn_pending_list(bk_broker *b, kp_str group, md_committed **rows, size_t *n);

/* group_coordinator.c */
char *gc_strndup(const char *p, int32_t len);   /* len < 0: NULL */

#endif
