/*
 * daemon/group/group.h — the group coordinator as the rest of the daemon
 * sees it (its internals: daemon/group/group_int.h, private to daemon/group*.c).
 */
#ifndef SLUICE_COORDINATOR_H
#define SLUICE_COORDINATOR_H

#include "daemon/broker.h"
#include "kp_msgs.h"

/* ---- group coordinator (daemon/group*.c) ------------------------------------ */
/* Loads groups from SQLite (they come back Empty; members rejoin), starts
 * the offsets.retention.check.interval.ms timer.  After view_topics_load.
 * 0 or -1. */
int  gc_groups_init(bk_broker *b);
/* After net_server_free: saves what changed, frees everything. */
void gc_groups_shutdown(bk_broker *b);
/* "Who coordinates group G": one place to ask.  Standalone: this broker. */
int32_t gc_coordinator_of(bk_broker *b, const char *group);
/* NOT_COORDINATOR (or COORDINATOR_LOAD_IN_PROGRESS, ..._NOT_AVAILABLE) when
 * this broker cannot coordinate group id now, else 0. */
int16_t gc_coordinator_error(kp_str id);
/* abs(javaStringHashCode(id)) % npartitions: Kafka's partitionFor (group_log.c). */
int32_t gc_log_partition_in(int32_t npartitions, const char *id, size_t len);
/* The coordinator's writes answer on the loop once durable: done(arg, rc)
 * runs after the sync that covers them, never from inside the call that
 * queued them.  A caller that goes away first calls gc_groups_forget
 * (done will not run; the write itself may still happen). */
struct gc_wait;
typedef void (*bk_group_done_fn)(void *arg, int rc);
void gc_groups_forget(struct gc_wait *pending);

/* The one path that deletes a group and its committed offsets
 * (DeleteGroups, the SQL surface's DELETE FROM consumer_groups).  Refused
 * at once (NOT_COORDINATOR, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND for a group
 * already being deleted) with the reason in err; else KP_NONE with
 * d->pending set, and done(arg, rc) later: rc KP_NONE,
 * KP_GROUP_ID_NOT_FOUND or KP_UNKNOWN_SERVER_ERROR, the reason written
 * into err first (err must live until then). */
typedef struct bk_group_deletion {
    const char *group_id;
    bk_group_done_fn done;
    void *arg;
    char *err;
    size_t errlen;
    struct gc_wait *pending;          /* out: set while queued */
} bk_group_deletion;
int gc_group_delete(bk_broker *b, bk_group_deletion *d);

/* The one path for committed offsets: OffsetCommit and the SQL surface's
 * UPDATE / INSERT of committed_offsets (design note: group_offset_commit.c).
 * The caller fills offs[0..n) (group, topic, partition, offset, epoch,
 * metadata, times); gc_offsets_commit validates them as Kafka's
 * doCommitOffsets does, queues the valid ones on the coordinator's
 * persistence pipeline (write half: the sync worker's transaction and
 * fdatasync) and, on the loop after that sync, fills in their results
 * and calls done(arg, rc) (apply half); rc: 0, or MD_E_SQL when the write
 * failed (those entries then carry COORDINATOR_NOT_AVAILABLE).  offs and
 * the strings it points to stay the caller's and must live until done
 * runs or gc_groups_forget: a forgotten commit not yet handed to the
 * sync worker is dropped. */
typedef struct bk_offset_commit {
    kp_str group;
    int32_t generation;               /* a member's; -1: none (simple consumer) */
    kp_str member_id, instance_id;    /* instance: null for none */
    bool by_operator;                 /* the SQL surface: refused while the
                                         group has members, all or nothing */
    bool delete_offsets;              /* OffsetDelete: every entry is a
                                         tombstone; the caller made the group
                                         checks (group_offset_delete.c) */
    md_offset *offs;                  /* result: per entry, out */
    size_t n;
    uint64_t cadence_key;             /* the committer's connection serial, to
                                         learn its pace (group_persist.c C7);
                                         0: none */
    bk_group_done_fn done;
    void *arg;
    struct gc_wait *pending;          /* out: set while queued */
    struct bk_req *authz;             /* a client's: each topic needs READ
                                         (daemon/security/sec_authz.c); NULL: no check */
    bool txn;                         /* TxnOffsetCommit: stored pending for
                                         producer_id until its transaction
                                         ends (group_txn.c), KIP-447's group
                                         check instead of a member's */
    int64_t producer_id;
    int16_t producer_epoch;
    int16_t txn_verdict;              /* TxnOffsetCommit: the transaction
                                         coordinator's answer (KIP-890: is the
                                         group's partition in producer_id's
                                         ongoing transaction?); a Kafka code
                                         refuses each entry past the topic
                                         checks, nothing is stored */
} bk_offset_commit;
/* KP_NONE with c->pending set: queued, done runs later.  KP_NONE with
 * c->pending NULL: nothing to store, every entry's result is final.
 * Another KP_* error: an operator's commit was refused as a whole,
 * nothing queued, the reason in err. */
int gc_offsets_commit(bk_broker *b, bk_offset_commit *c, char *err, size_t errlen);
/* TxnOffsetCommit v0-4, decoded (q's strings in r's frame), with the
 * transaction coordinator's verdict (KP_NONE: verified): a handler's
 * BK_RESPOND / BK_DEFER / BK_CLOSE.  daemon/api/api_txn_offset_commit.c. */
int gc_txn_offset_commit(struct bk_req *r, const kp_TxnOffsetCommitRequest *q, int16_t verdict);
/* ---- transactions (issue 30; daemon/group/group_txn.c) ----------------------
 * A transaction's end reached the group's partition offsets_partition of
 * __consumer_offsets (cluster mode: its marker was appended there;
 * standalone: the coordinator decided): the offsets producer_id committed
 * with TxnOffsetCommit in that transaction become the groups' committed
 * offsets (commit) or are dropped.  done is called once, later, on the
 * loop (never from inside this call), when that is durable: KP_NONE, or
 * a Kafka code (COORDINATOR_NOT_AVAILABLE: the store failed, retry;
 * COORDINATOR_LOAD_IN_PROGRESS: the partition is being loaded here and
 * the load may not read this marker, write it again).
 * Cluster mode: the groups of that partition; offsets_partition -1, every
 * group's.  Standalone (one coordinator, no such topic): every group's,
 * whatever the partition.  Idempotent. */
typedef void (*gc_txn_done_fn)(void *arg, int16_t error);
void gc_txn_complete(bk_broker *b, int32_t offsets_partition, int64_t producer_id,
                     int16_t producer_epoch, bool commit, gc_txn_done_fn done, void *arg);

#endif
