/*
 * daemon/replica/replica.c — the local replicas: the partition logs this broker
 * hosts, the second registry beside the cluster view (view.c).
 *
 * A local replica is a bk_partition: its open seg_log, high watermark,
 * idempotent-producer state, fetch waiters, flush and cleaner bookkeeping,
 * and the bookmarks (log start, recovery point, high watermark) last saved
 * to SQLite's local_logs.  Work that runs over "every log on this broker"
 * (flush ticks, retention, compaction, metrics, saving bookmarks, SQL
 * snapshots, shutdown) walks this list, never the view: a partition the
 * view knows but this broker does not host has no log to work on.
 *
 * Invariants:
 *   R1. A replica is in the list iff its log is open, and then its view
 *       partition points at it (t->parts[id].local == p) (view.c, V2).
 *   R2. Partition directories are <log.dirs>/<topic>-<partition>, as
 *       Kafka's.
 *   R3. Closing a replica first stops the workers that may hold it (the
 *       flusher, the cleaner), then wakes its waiters, so nothing can
 *       point at it once it is freed.
 */
#include "daemon/replica/replica.h"
#include "daemon/view/view_registry.h"
#include "daemon/md_sync.h"
#include "daemon/replica/replica_producers.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static void link_replica(bk_broker *b, bk_partition *p)
{
    p->lprev = NULL;
    p->lnext = b->replicas;
    if (b->replicas)
        b->replicas->lprev = p;
    b->replicas = p;
    b->nreplicas++;
}

static void unlink_replica(bk_broker *b, bk_partition *p)
{
    if (p->lprev)
        p->lprev->lnext = p->lnext;
    else
        b->replicas = p->lnext;
    if (p->lnext)
        p->lnext->lprev = p->lprev;
    p->lnext = p->lprev = NULL;
    b->nreplicas--;
}

void replica_replicas_foreach(bk_broker *b, void (*fn)(bk_partition *p, void *arg), void *arg)
{
    for (bk_partition *p = b->replicas, *next; p; p = next) {
        next = p->lnext;
        fn(p, arg);
    }
}

size_t replica_replicas_count(bk_broker *b)
{
    return b->nreplicas;
}

int replica_open(bk_broker *b, bk_topic *t, int32_t idx, const md_partition *mp,
                    char *err, size_t errlen)
{
    bk_partition *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    p->topic = t;
    p->id = idx;
    p->local_start = -1;                  /* link.c K17: none known yet */
    replica_partition_init_waiters(p);
    char dir[8192];
    snprintf(dir, sizeof dir, "%s/%s-%d", b->data_dir, t->name, idx);
    seg_open_opts o = { .dir = dir };
    view_seg_config(&t->cfg, &o.cfg);
    p->leader_epoch = t->parts[idx].leader_epoch;
    if (mp && mp->has_bookmarks) {
        o.log_start_offset = mp->log_start_offset;
        o.recovery_point = mp->recovery_point;
        p->saved_log_start = mp->log_start_offset;
        p->saved_recovery_point = mp->recovery_point;
        p->saved_hw = mp->high_watermark;
    } else {
        p->saved_log_start = p->saved_recovery_point = p->saved_hw = -1;
    }
    int rc = seg_open(&o, &p->log);
    if (rc != 0) {
        int e = errno;
        struct rlimit nofile = { 0 };
        if ((e == EMFILE || e == ENFILE) && getrlimit(RLIMIT_NOFILE, &nofile) == 0)
            snprintf(err, errlen, "cannot open partition log %s: out of file descriptors "
                     "(%s, RLIMIT_NOFILE %llu): raise the limit (ulimit -n, systemd "
                     "LimitNOFILE=); each partition holds 3 fds, and 1 per closed segment",
                     dir, strerror(e), (unsigned long long)nofile.rlim_cur);
        else
            snprintf(err, errlen, "cannot open partition log %s: %s", dir, strerror(e));
        free(p);
        return KP_KAFKA_STORAGE_ERROR;
    }
    p->high_watermark = seg_log_end(p->log);
    /* Cluster mode: what was above the saved HW may not be on the ISR; the
     * leader moves it on once they report (daemon/replication/repl_isr.c). */
    if (bk_cluster_mode(b) && p->saved_hw >= 0 && p->saved_hw < p->high_watermark)
        p->high_watermark = p->saved_hw;
    p->last_flush_ms = bk_now_ms();
    /* Removed segments wait file.delete.delay.ms on the janitor thread. */
    seg_set_deferred_delete(p->log, true);
    replica_producers_open(b, p);         /* failures logged; starts empty */
    /* Standalone this broker leads from the start (cluster mode: when the
     * view says so, repl_isr.c): its epoch starts at the log end.  Never
     * below an epoch the log has (assign would drop it: epochs.c E1), and
     * not at all in a mirror topic of a cluster link while it mirrors: its
     * history is its source's (daemon/link/link_conn.c C5).  At startup the
     * links are not loaded yet: the first rule keeps a mirror's history. */
    const char *mirror_why;
    if (!bk_cluster_mode(b) && p->leader_epoch >= seg_epoch_latest(p->log) &&
        !bk_mirror_refuses(b, t->name, &mirror_why))
        seg_epoch_assign(p->log, p->leader_epoch, seg_log_end(p->log));
    /* The history recovered at open is saved by the caller once the view's
     * takeover (repl_isr.c) has assigned its epoch too: one checkpoint, and
     * none when that is what the file holds (epochs.c, E4). */
    t->parts[idx].local = p;
    link_replica(b, p);
    return KP_NONE;
}

void replica_close(bk_broker *b, bk_partition *p, bool destroy)
{
    replica_flusher_forget(b, p);
    replica_cleaner_forget(b, p);
    if (p->topic->parts[p->id].local == p)
        p->topic->parts[p->id].local = NULL;
    unlink_replica(b, p);
    replica_partition_notify(p);          /* waiters look it up again and fail */
    replica_producers_close(b, p, destroy);
    if (!destroy)
        replica_partition_epochs_save(b, p);
    if (destroy)
        replica_partition_log_delete(b, p);   /* unlinking on the janitor thread */
    else
        seg_close(p->log);
    free(p);
}

/* The view's leader epoch, ISR or leader of p changed. */
static void view_changed(bk_broker *b, bk_partition *p, int32_t leader_epoch, bool opened)
{
    p->leader_epoch = leader_epoch;
    repl_isr_view_changed(b, p);            /* ISR or leader changed: the HW */
    if (opened)                             /* the history recovered at open */
        replica_partition_epochs_save(b, p);
}

static void reconfigure(bk_partition *p, const seg_config *sc)
{
    seg_set_config(p->log, sc);
}

static bool held(const bk_partition *p)
{
    return p->held;
}

void replica_install(bk_broker *b)
{
    static const view_replica_hooks hooks = {
        .open = replica_open,
        .close = replica_close,
        .view_changed = view_changed,
        .reconfigure = reconfigure,
        .held = held,
    };
    b->replica_hooks = &hooks;
}

/* ---- bookmarks ------------------------------------------------------------------- */

static void save_replica(bk_partition *p, void *arg)
{
    bk_broker *b = arg;
    replica_partition_epochs_save(b, p);  /* retention, DeleteRecords moved the start */
    int64_t ls = seg_log_start(p->log), rp = seg_recovery_point(p->log);
    if (ls == p->saved_log_start && rp == p->saved_recovery_point &&
        p->high_watermark == p->saved_hw)
        return;
    if (md_log_bookmarks_save(b->db, p->topic->name, p->id, ls, rp,
                              p->high_watermark) == KP_NONE) {
        p->saved_log_start = ls;
        p->saved_recovery_point = rp;
        p->saved_hw = p->high_watermark;
    }
}

/* One transaction for every replica; its WAL sync runs on the metadata
 * sync worker (nobody waits: a recovery point saved late only means more
 * recovery work after a power cut). */
void replica_save_offsets(bk_broker *b)
{
    bool txn = md_begin(b->db) == 0;
    replica_replicas_foreach(b, save_replica, b);
    if (txn && md_commit(b->db) == 0)
        bk_mdsync_request();
}
