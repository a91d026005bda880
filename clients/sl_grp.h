/*
 * sl_grp.h — the consumer-group member's state, shared by group.c (the
 * membership: coordinator, JoinGroup/SyncGroup, heartbeats, leaving),
 * group_offsets.c (OffsetCommit/OffsetFetch, auto commit) and assignor.c
 * (the leader's assignors).  All fields are guarded by cl->lock.  The
 * states and who moves them are drawn at the top of group.c.
 */
#ifndef SLUICE_SL_GRP_H
#define SLUICE_SL_GRP_H

#include "clients/sl_cons.h"

enum { G_IDLE, G_REVOKE_WAIT, G_JOIN, G_ASSIGN_WAIT, G_SYNC, G_STABLE, G_POLL_LEFT };

typedef struct g_event {
    struct g_event *next;
    int type;                 /* SL_REBALANCE_ASSIGN / REVOKE, or EV_COMMIT */
    int err;
    sl_topic_partition *tps;
    int n;
} g_event;
#define EV_COMMIT 3

typedef struct g_member {
    char *id;
    char **topics;
    int n_topics;
    sl_tp *out;               /* assignment being built */
    int n_out, cap_out;
} g_member;

struct sl_grp {
    int state;
    int32_t coord;
    bool coord_inflight;
    int64_t coord_retry_at;
    char *member_id;
    int32_t generation;
    char *protocol;
    sl_sub sub;               /* subscription (subscription.c) */
    bool sub_changed;         /* regex matches changed since the JoinGroup */
    sl_tp *assigned;
    int n_assigned;
    bool inflight;            /* JoinGroup / SyncGroup outstanding */
    bool hb_inflight;
    int64_t next_hb, next_autocommit, retry_at;
    bool revoke_done;
    g_member *members;        /* leader only, between Join and Sync */
    int n_members;
    g_event *ev_head, *ev_tail;
    struct commit_op *stored;  /* background OffsetFetch for NEED_STORED */
    int commits_out;          /* async commits not finished: close waits for them */
    uint32_t assign_md_epoch; /* leader: assign with metadata newer than this */
    char poll_errstr[128];    /* POLL_LEFT: what the next poll reports */
    uint64_t polls_seen;      /* cons->polls at the last check */
};
typedef struct sl_grp sl_grp;

/* group.c */
sl_topic_partition *sl_grp_tps_export(const sl_tp *tps, int n);   /* one malloc */
void sl_grp_ev_push(sl_client *cl, int type, int err, sl_topic_partition *tps, int n);
void sl_grp_free_tps(sl_tp *t, int n);
/* The coordinator if ready for requests, else NULL (and FindCoordinator
 * or a connection is under way). */
sl_broker *sl_grp_coord_ready(sl_client *cl, int64_t now);
/* An op's request to coordinator b (sl_req_begin; the body is the caller's), at
 * the newest version of lo..hi that b offers; or NULL when it offers none,
 * and the op is finished with SL_E_UNSUPPORTED. */
kp_buf *sl_grp_op_req(sl_client *cl, sl_op *op, sl_broker *b, int16_t api,
                      int16_t lo, int16_t hi, int16_t *ver);
bool sl_grp_coord_error(int ec);
void sl_grp_coord_lost(sl_client *cl);

/* group_offsets.c */
/* Collects the background OffsetFetch of NEED_STORED partitions and
 * starts the next one. */
void sl_grp_stored_tick(sl_client *cl, int64_t now);
void sl_grp_stored_free(sl_client *cl);      /* the handle is going away */
/* Commits the positions that moved, in the background. */
void sl_grp_auto_commit(sl_client *cl, int64_t now);
void sl_grp_autocommit_tick(sl_client *cl, int64_t now, int64_t *next);
/* Commits every assigned position and waits (lock dropped meanwhile). */
int  sl_grp_commit_positions(sl_client *cl);
void sl_grp_commits_drain(sl_client *cl, int timeout_ms);

/* assignor.c */
/* All distinct topics of all members, sorted (names point into members). */
int  sl_grp_all_topics(sl_grp *g, char ***out);
/* Fills every member's out with the protocol's assignment of topics. */
void sl_grp_assign(sl_client *cl, sl_grp *g, char **topics, int nt);

#endif
