/*
 * daemon/replication/repl_isr.c — the leader's side of replication: what it knows of its
 * followers, the high watermark it derives from them, and the ISR it grows
 * and shrinks (Kafka's Partition.updateFollowerFetchState, maybeExpandIsr,
 * maybeShrinkIsr).
 *
 * A follower fetches with Fetch ReplicaId = its broker id; daemon/api/api_fetch.c
 * calls repl_isr_follower_fetched for each partition it asked for, with its
 * FetchOffset (its log end) and the leader's log end at that moment.  The
 * leader keeps, per partition it leads, one bk_follower per follower that
 * fetched (fixed array in bk_partition: no allocation per fetch).
 *
 * High watermark (cluster mode, as leader): the smallest log end among the
 * ISR members, the leader's own included.  An ISR member whose log end is
 * not known yet (no fetch since this broker became leader) holds the HW
 * where it is.  Standalone, and with ISR = [leader], that is the log end.
 * replica_partition.c sets the standalone one itself; cluster mode's is
 * isr_update_hw, installed by repl_isr_install as replica.h's bk_isr_hooks.
 *
 * ISR changes, each one znode write:
 *
 *   follower's log end >= HW, not in ISR ──► expand  (repl_isr_follower_fetched)
 *   ISR member not caught up for replica.lag.time.max.ms ──► shrink
 *                                                        (repl_isr_tick)
 *
 *   repl_isr_change: b->repl_ops->isr_write(state, the version the mirror showed) ──►
 *       ZOK         logged; the state watch brings the new ISR into the
 *                   view (view_topic_apply → repl_isr_view_changed)
 *       ZBADVERSION the state changed under us (the controller moved
 *                   leadership, or a newer ISR): nothing; the mirror
 *                   applies the new state, and the next fetch or tick
 *                   decides again from it
 *       other       ZooKeeper unreachable: the next fetch or tick retries
 *
 * Invariants:
 *   I1. The high watermark never moves back here, and never passes the
 *       leader's log end.
 *   I2. At most one ISR write per partition is out: isr_pending_version is
 *       the state version it was written against (-1: none); it is cleared
 *       by its answer when that failed, and by the view changing version
 *       when it succeeded, so the next decision sees the written ISR.
 *   I3. The view is never edited here: the ISR in the view is always the
 *       one ZooKeeper holds (as mirrored).
 *   I4. A follower's state belongs to one leader epoch (followers_epoch);
 *       a new epoch starts with none known.
 *   I5. Only a leader that is not fenced writes (view_leader_replica).
 */
#include "daemon/replication/repl_isr.h"
#include "daemon/replica/replica.h"

#include <zookeeper/zookeeper.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t mono_ms(void)
{
    return bk_mono_us() / 1000;
}

static const bk_pview *view_of(const bk_partition *p)
{
    return &p->topic->parts[p->id];
}

static bool has_id(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

bool repl_isr_is_replica(const bk_partition *p, int32_t id)
{
    const bk_pview *v = view_of(p);
    return has_id(v->replicas, v->nreplicas, id);
}

int32_t repl_isr_size(const bk_partition *p)
{
    return view_of(p)->nisr;
}

static bool leads(bk_broker *b, const bk_partition *p)
{
    return view_of(p)->leader == b->cfg->broker_id && !p->held;   /* cluster_recovery.c R5 */
}

/* I4: the follower slot for id, created if missing (NULL: no room). */
static bk_follower *follower(bk_partition *p, int32_t id, int64_t now)
{
    if (p->followers_epoch != p->leader_epoch) {
        p->nfollowers = 0;
        p->followers_epoch = p->leader_epoch;
    }
    for (int32_t i = 0; i < p->nfollowers; i++)
        if (p->followers[i].id == id)
            return &p->followers[i];
    if (p->nfollowers >= MD_REPLICAS_MAX)
        return NULL;
    bk_follower *f = &p->followers[p->nfollowers++];
    const bk_pview *v = view_of(p);
    /* As Kafka at leader election: an ISR member counts as caught up now,
     * so it has replica.lag.time.max.ms to show it still is. */
    *f = (bk_follower){ .id = id, .log_end = -1,
                        .last_caught_up_ms = has_id(v->isr, v->nisr, id) ? now : 0,
                        .last_fetch_ms = 0, .last_fetch_leader_end = -1 };
    return f;
}

/* The bk_isr_hooks update_hw of cluster mode (replica.h). */
static void isr_update_hw(bk_broker *b, bk_partition *p)
{
    int64_t end = seg_log_end(p->log);
    if (!leads(b, p))
        return;                                   /* the follower side's */
    const bk_pview *v = view_of(p);
    int64_t hw = end, now = mono_ms();
    for (int32_t i = 0; i < v->nisr; i++) {
        if (v->isr[i] == b->cfg->broker_id)
            continue;
        bk_follower *f = follower(p, v->isr[i], now);
        if (!f || f->log_end < 0)
            return;                               /* unknown: the HW holds */
        if (f->log_end < hw)
            hw = f->log_end;
    }
    if (hw > p->high_watermark)                   /* I1 */
        replica_partition_set_high_watermark(b, p, hw);
}

void repl_isr_install(bk_broker *b, const repl_cluster_ops *ops)
{
    static const bk_isr_hooks hooks = { .update_hw = isr_update_hw };
    b->isr = &hooks;
    b->repl_ops = ops;
}

/* The ISR of v with id added (in replica order) or removed. */
static int32_t isr_with(const bk_pview *v, int32_t id, bool add, int32_t *out)
{
    int32_t n = 0;
    if (add) {
        for (int32_t i = 0; i < v->nreplicas; i++)
            if (v->replicas[i] == id || has_id(v->isr, v->nisr, v->replicas[i]))
                out[n++] = v->replicas[i];
        /* ISR members that are not replicas (cannot happen: md checks) stay out */
    } else {
        for (int32_t i = 0; i < v->nisr; i++)
            if (v->isr[i] != id)
                out[n++] = v->isr[i];
    }
    return n;
}

static void isr_propose(bk_broker *b, bk_partition *p, int32_t id, bool add,
                        const char *why)
{
    const bk_pview *v = view_of(p);
    if (p->isr_pending_version >= 0 || v->zk_version < 0)
        return;                                   /* I2 */
    int32_t isr[MD_REPLICAS_MAX];
    int32_t n = isr_with(v, id, add, isr);
    if (repl_isr_change(b, p->topic->name, p->id, isr, n, why) == 0)
        p->isr_pending_version = v->zk_version;
}

void repl_isr_follower_fetched(bk_broker *b, bk_partition *p, int32_t id,
                             int64_t fetch_offset, int64_t leader_end)
{
    if (!bk_cluster_mode(b) || id == b->cfg->broker_id)
        return;
    int64_t now = mono_ms();
    bk_follower *f = follower(p, id, now);
    if (!f)
        return;
    /* Kafka's rule: caught up now if it asks for the log end; caught up at
     * its previous fetch if it now asks for what was the end then. */
    if (fetch_offset >= leader_end)
        f->last_caught_up_ms = now;
    else if (f->last_fetch_leader_end >= 0 && fetch_offset >= f->last_fetch_leader_end &&
             f->last_fetch_ms > f->last_caught_up_ms)
        f->last_caught_up_ms = f->last_fetch_ms;
    f->last_fetch_ms = now;
    f->last_fetch_leader_end = leader_end;
    f->log_end = fetch_offset;
    const bk_pview *v = view_of(p);
    if (leads(b, p) && has_id(v->isr, v->nisr, id) && fetch_offset < p->high_watermark) {
        /* An ISR member's log reaches the high watermark by definition; one
         * that asks for less has lost what it had (a restart that cut its
         * log back), so it must not be elected before it has it again. */
        char why[96];
        snprintf(why, sizeof why, "follower %d's log end %lld fell below the high "
                 "watermark %lld", (int)id, (long long)fetch_offset,
                 (long long)p->high_watermark);
        isr_propose(b, p, id, false, why);
        return;
    }
    isr_update_hw(b, p);
    if (leads(b, p) && !has_id(v->isr, v->nisr, id) && fetch_offset >= p->high_watermark &&
        !b->repl_ops->broker_shutting(b, id)) {             /* cluster_leaders.c L4 */
        char why[64];
        snprintf(why, sizeof why, "follower %d caught up", (int)id);
        isr_propose(b, p, id, true, why);
    }
}

void repl_isr_view_changed(bk_broker *b, bk_partition *p)
{
    if (!bk_cluster_mode(b))
        return;
    const bk_pview *v = view_of(p);
    if (p->isr_pending_version >= 0 && v->zk_version != p->isr_pending_version)
        p->isr_pending_version = -1;              /* I2: the write (or another) is in */
    b->repl_ops->view_changed(b, p);
    bool was = p->leading;
    p->leading = leads(b, p);
    /* As Kafka's makeLeader: the new epoch starts at the log end, so
     * OffsetForLeaderEpoch answers for it before its first batch.  Never
     * below an epoch the log already has (a view loaded from SQLite before
     * the resync may be older than the log): assign would drop it.  Not
     * in a mirror topic of a cluster link while it mirrors: its history is
     * its source's (daemon/link/link_conn.c C5). */
    const char *mirror_why;
    if (p->leading && p->leader_epoch >= seg_epoch_latest(p->log) &&
        !bk_mirror_refuses(b, p->topic->name, &mirror_why) &&
        seg_epoch_assign(p->log, p->leader_epoch, seg_log_end(p->log)) > 0)
        replica_partition_epochs_save(b, p);
    if (p->leading) {
        isr_update_hw(b, p);                      /* a smaller ISR may let it move */
        bk_mirror_led(b, p->topic->name);         /* link.c K14: a raise that landed */
    }
    else if (was)
        replica_partition_notify(p);                   /* acks=all waiters: not the leader now */
}

struct tick_arg {
    bk_broker *b;
    int64_t now, lag;
};

static void tick_replica(bk_partition *p, void *arg)
{
    struct tick_arg *a = arg;
    bk_broker *b = a->b;
    bk_partition *lp;
    kp_str name = { p->topic->name, (int32_t)strlen(p->topic->name) };
    if (!leads(b, p) || view_leader_replica(b, name, p->id, &lp) != KP_NONE || lp != p)
        return;                                   /* I5 */
    const bk_pview *v = view_of(p);
    for (int32_t i = 0; i < v->nisr; i++) {
        int32_t id = v->isr[i];
        if (id == b->cfg->broker_id)
            continue;
        bk_follower *f = follower(p, id, a->now);
        if (f && a->now - f->last_caught_up_ms > a->lag) {
            char why[96];
            snprintf(why, sizeof why, "follower %d not caught up for %lld ms", (int)id,
                     (long long)(a->now - f->last_caught_up_ms));
            isr_propose(b, p, id, false, why);
            return;                               /* one change per write (I2) */
        }
    }
}

void repl_isr_tick(bk_broker *b)
{
    int64_t now = mono_ms();
    int64_t lag = b->cfg->replica_lag_time_max_ms;
    /* Every lag/2 (Kafka's isr-expiration interval), within 0.1..1 s. */
    int64_t every = lag / 2 < 100 ? 100 : lag / 2 > 1000 ? 1000 : lag / 2;
    if (now - b->repl->isr_checked_ms < every)
        return;
    b->repl->isr_checked_ms = now;
    struct tick_arg a = { b, now, lag };
    replica_replicas_foreach(b, tick_replica, &a);
}

/* ---- the znode write ---------------------------------------------------------------- */

typedef struct isr_write {
    repl_isr_done cb;                 /* first: the writer's answer */
    char topic[MD_TOPIC_NAME_MAX + 1];
    int32_t partition;
    int version;
    int32_t old_isr[MD_REPLICAS_MAX], new_isr[MD_REPLICAS_MAX];
    int32_t nold, nnew;
    char why[96];
} isr_write;

static void ids_str(const int32_t *ids, int32_t n, char *out, size_t cap)
{
    size_t at = 0;
    out[0] = 0;
    at += (size_t)snprintf(out + at, cap - at, "[");
    for (int32_t i = 0; i < n && at < cap; i++)
        at += (size_t)snprintf(out + at, cap - at, i ? ",%d" : "%d", (int)ids[i]);
    if (at < cap)
        snprintf(out + at, cap - at, "]");
}

/* The partition this write was for, if still hosted here. */
static bk_partition *write_partition(bk_broker *b, const isr_write *w)
{
    bk_topic *t = view_topic_find(b, w->topic, strlen(w->topic));
    if (!t || w->partition >= t->npartitions)
        return NULL;
    return t->parts[w->partition].local;
}

static void on_isr_written(bk_broker *b, int rc, const char *rc_str, repl_isr_done *arg)
{
    isr_write *w = (isr_write *)arg;
    bk_partition *p = write_partition(b, w);
    if (rc == ZOK) {
        char a[128], c[128];
        ids_str(w->old_isr, w->nold, a, sizeof a);
        ids_str(w->new_isr, w->nnew, c, sizeof c);
        BK_INFO("partition %s-%d: ISR %s -> %s (%s)", w->topic, (int)w->partition, a, c,
                w->why);
        b->repl_ops->isr_counted(b, w->nnew < w->nold);
        /* I2: pending until the mirror shows a newer version; if it
         * already does (the watch was faster), clear now. */
        if (p && p->isr_pending_version == w->version &&
            p->topic->parts[p->id].zk_version != w->version)
            p->isr_pending_version = -1;
    } else {
        if (rc != ZBADVERSION)
            BK_WARN("partition %s-%d: ISR change not written (%s); retried later",
                    w->topic, (int)w->partition, rc_str);
        /* ZBADVERSION: the state moved on; the mirror applies it (I3). */
        if (p && p->isr_pending_version == w->version)
            p->isr_pending_version = -1;
    }
    free(w);
}

/* The partition's state znode written as the view shows it but for isr
 * and leader_epoch (the leader's writes: repl_isr_change, repl_isr_epoch_raise). */
static int state_write(bk_broker *b, const char *topic, int32_t partition, const int32_t *isr,
                       int32_t nisr, int32_t epoch, const char *why)
{
    bk_topic *t = view_topic_find(b, topic, strlen(topic));
    if (!t || partition < 0 || partition >= t->npartitions || !b->zk || nisr <= 0 ||
        nisr > MD_REPLICAS_MAX)
        return -1;
    const bk_pview *v = &t->parts[partition];
    if (v->zk_version < 0 || v->leader != b->cfg->broker_id || (v->local && v->local->held))
        return -1;
    isr_write *w = calloc(1, sizeof *w);
    if (!w)
        return -1;
    w->cb.done = on_isr_written;
    snprintf(w->topic, sizeof w->topic, "%s", topic);
    w->partition = partition;
    w->version = v->zk_version;
    w->nold = v->nisr;
    memcpy(w->old_isr, v->isr, (size_t)v->nisr * sizeof *isr);
    w->nnew = nisr;
    memcpy(w->new_isr, isr, (size_t)nisr * sizeof *isr);
    snprintf(w->why, sizeof w->why, "%s", why ? why : "");
    /* Same leader and controller epoch: the ISR moves, or the epoch. */
    md_partition_state st = { .leader = v->leader, .leader_epoch = epoch,
                              .controller_epoch = v->controller_epoch, .nisr = nisr };
    memcpy(st.isr, isr, (size_t)nisr * sizeof *isr);
    char path[MD_TOPIC_NAME_MAX + 64];
    snprintf(path, sizeof path, "/brokers/topics/%s/partitions/%d/state", topic,
             (int)partition);
    b->repl_ops->isr_write(b, path, &st, v->zk_version, &w->cb);
    return 0;
}

int repl_isr_change(bk_broker *b, const char *topic, int32_t partition, const int32_t *isr,
                  int32_t nisr, const char *why)
{
    bk_topic *t = view_topic_find(b, topic, strlen(topic));
    if (!t || partition < 0 || partition >= t->npartitions)
        return -1;
    return state_write(b, topic, partition, isr, nisr, t->parts[partition].leader_epoch, why);
}

int repl_isr_epoch_raise(bk_broker *b, bk_partition *p, int32_t epoch, const char *why)
{
    const bk_pview *v = view_of(p);
    if (!bk_cluster_mode(b) || p->isr_pending_version >= 0 || v->zk_version < 0 ||
        epoch <= v->leader_epoch)
        return -1;                                /* I2: one write at a time */
    if (state_write(b, p->topic->name, p->id, v->isr, v->nisr, epoch, why) != 0)
        return -1;
    p->isr_pending_version = v->zk_version;
    return 0;
}
