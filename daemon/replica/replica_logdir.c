/*
 * daemon/replica/replica_logdir.c — the log directory's health: Kafka's log-dir failure
 * handling (LogDirFailureChannel, ReplicaManager.handleLogDirFailure) for
 * the one log directory Sluice uses (issue 28).
 *
 * States and transitions:
 *
 *   HEALTHY ──bk_logdir_fault (ENOSPC, EDQUOT, EIO, EROFS on an append to
 *             a partition led here, a replica fetch's append, or a flush)──►
 *   FAILED  ── standalone: bk_logdir_recovered (an append succeeded again:
 *                          the operator freed space) ──► HEALTHY
 *              cluster mode: only a restart (as Kafka's offline log dirs)
 *
 * FAILED in cluster mode (bk_logdir_offline):
 *   - view.c's bk_leader_replica answers KAFKA_STORAGE_ERROR for every
 *     partition led here (produce, fetch, list offsets);
 *   - repl_fetcher.c follows nothing: no fetch from here can put this broker
 *     back into an ISR;
 *   - the controller is told with Kafka's notification, the persistent
 *     sequential /log_dir_event_notification/log_dir_event_<seq> holding
 *     {"version":1,"broker":<id>,"event":1}.  With one log directory every
 *     partition of this broker is on it, so the notification says all
 *     that Kafka's LeaderAndIsr answers (KAFKA_STORAGE_ERROR per
 *     partition) would: the controller (cluster_logdirs.c) takes this broker
 *     out of every ISR and moves its leaderships.  It is written again
 *     when the controller changes, when this broker registers anew (after
 *     a session expiry: the controller keeps a failure per registration),
 *     or when a write failed (bk_logdir_renotify).
 *
 * Invariants:
 *   D1. The failure is logged once per HEALTHY → FAILED transition, with
 *       strerror's words, the file and the partition; later faults of the
 *       same failure are silent (the callers log nothing when
 *       bk_logdir_fault says true).
 *   D2. Loop thread only; /metrics and SQL read copies
 *       (bk_logdir_info_get, called on the loop).
 *   D3. No ZooKeeper round trip is waited for: the notification is an
 *       asynchronous create.
 */
#include "daemon/replica/replica_logdir.h"

#include "daemon/cluster/cluster.h"
#include "daemon/replication/repl_fetcher.h"
#include "daemon/replica/replica.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define LOGDIR_EVENT_PATH "/log_dir_event_notification/log_dir_event_"
#define LOGDIR_EVENT_FAILURE 1           /* Kafka's LogDirFailure */

static bk_logdir_info ld = { .failed_ms = -1 };
static bool notify_pending;              /* cluster: the controller still to be told */
static bool notify_in_flight;

static bool storage_fault(int err)
{
    return err == ENOSPC || err == EDQUOT || err == EIO || err == EROFS;
}

bool bk_logdir_failed(void) { return ld.failed; }

bool bk_logdir_offline(const bk_broker *b)
{
    return ld.failed && b->cl;
}

void bk_logdir_info_get(bk_logdir_info *out) { *out = ld; }

static void on_event_created(bk_broker *b, const zk_result *r, void *arg)
{
    (void)arg;
    notify_in_flight = false;
    if (r->rc == ZOK) {
        BK_INFO("log directory %s: the controller is told (%s)", b->data_dir,
                LOGDIR_EVENT_PATH "<seq>");
        return;
    }
    /* Connection lost or the session expired: the next controller change
     * or cluster tick writes it again (a duplicate is harmless: the
     * controller's handling is idempotent).  Said once, not every tick. */
    static bool warned;
    if (!warned)
        BK_WARN("log directory %s: cannot tell the controller yet (%s); retrying",
                b->data_dir, zk_rc_str(r->rc));
    warned = true;
    notify_pending = true;
}

void bk_logdir_renotify(bk_broker *b)
{
    if (!ld.failed || !b->cl || !b->zk)
        return;
    notify_pending = true;
    if (notify_in_flight || !zk_connected(b->zk))
        return;
    kp_buf out;
    kp_buf_init(&out);
    if (zj_log_dir_event_format(b->cfg->broker_id, LOGDIR_EVENT_FAILURE, &out) == 0) {
        notify_pending = false;
        notify_in_flight = true;
        zk_create(b->zk, LOGDIR_EVENT_PATH, (const char *)out.data, (int)out.len,
                  ZOO_SEQUENCE, on_event_created, NULL);
    }
    kp_buf_free(&out);
}

/* The file the fault was on, as near as the log says: the segment holding
 * the log's last batch (where appends go), or the partition directory. */
static void fault_file(bk_broker *b, bk_partition *p, char *out, size_t cap)
{
    int64_t base = 0, pos;
    uint64_t ino;
    int64_t end = seg_log_end(p->log);
    if (end > seg_log_start(p->log) && seg_locate(p->log, end - 1, &base, &pos, &ino) != 0)
        base = -1;
    if (base >= 0)
        snprintf(out, cap, "%s/%s-%d/%020lld.log", b->data_dir, p->topic->name, (int)p->id,
                 (long long)base);
    else
        snprintf(out, cap, "%s/%s-%d", b->data_dir, p->topic->name, (int)p->id);
}

bool bk_logdir_fault(bk_broker *b, bk_partition *p, const char *op, int err)
{
    if (ld.failed)
        return true;                                  /* D1 */
    if (!err)
        err = EIO;
    if (!storage_fault(err))
        return false;
    char file[4096 + 300];
    fault_file(b, p, file, sizeof file);
    ld.failed = true;
    ld.err = err;
    ld.failed_ms = bk_now_ms();
    ld.failures++;
    if (snprintf(ld.error, sizeof ld.error, "%s: %s %s (partition %s-%d)", strerror(err), op,
                 file, p->topic->name, (int)p->id) >= (int)sizeof ld.error)
        ld.error[sizeof ld.error - 2] = '~';     /* a path past the size: cut, marked */
    if (!b->cl) {
        BK_ERROR("log directory %s failed: %s; its partitions refuse writes "
                 "(KAFKA_STORAGE_ERROR) and keep serving reads until the disk takes writes "
                 "again", b->data_dir, ld.error);
        return true;
    }
    BK_ERROR("log directory %s failed: %s; this broker stops leading and following the "
             "partitions stored there and tells the controller; restart it once the "
             "directory takes writes again", b->data_dir, ld.error);
    bk_fetchers_update(b);
    bk_logdir_renotify(b);
    return true;
}

void bk_logdir_recovered(bk_broker *b, bk_partition *p)
{
    if (!ld.failed || b->cl)
        return;
    ld.failed = false;
    ld.err = 0;
    ld.error[0] = 0;
    BK_INFO("log directory %s takes writes again (partition %s-%d, log end %lld)",
            b->data_dir, p->topic->name, (int)p->id, (long long)seg_log_end(p->log));
}

/* The cluster tick: a notification that could not be written. */
void bk_logdir_tick(bk_broker *b)
{
    if (notify_pending)
        bk_logdir_renotify(b);
}
