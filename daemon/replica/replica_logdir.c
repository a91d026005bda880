/*
 * daemon/replica/replica_logdir.c — the log directory's health: Kafka's log-dir failure
 * handling (LogDirFailureChannel, ReplicaManager.handleLogDirFailure) for
 * the one log directory Sluice uses (issue 28).
 *
 * States and transitions:
 *
 *   HEALTHY ──replica_logdir_fault (ENOSPC, EDQUOT, EIO, EROFS on an append to
 *             a partition led here, a replica fetch's append, or a flush)──►
 *   FAILED  ── standalone: replica_logdir_recovered (an append succeeded again:
 *                          the operator freed space) ──► HEALTHY
 *              cluster mode: only a restart (as Kafka's offline log dirs)
 *
 * FAILED in cluster mode (replica_logdir_offline):
 *   - view.c's view_leader_replica answers KAFKA_STORAGE_ERROR for every
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
 *     or when a write failed (cl_logdir_renotify).  That half is cluster
 *     mode's (cluster_logdirs.c), reached through b->on_logdir_failed,
 *     which cl_start installs: set means cluster mode.
 *
 * Invariants:
 *   D1. The failure is logged once per HEALTHY → FAILED transition, with
 *       strerror's words, the file and the partition; later faults of the
 *       same failure are silent (the callers log nothing when
 *       replica_logdir_fault says true).
 *   D2. Loop thread only; /metrics and SQL read copies
 *       (replica_logdir_info_get, called on the loop).
 *   D3. No ZooKeeper round trip is waited for: the notification is an
 *       asynchronous create.
 */
#include "daemon/replica/replica_logdir.h"

#include "daemon/replica/replica.h"
#include "daemon/view/view.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static bk_logdir_info ld = { .failed_ms = -1 };

static bool storage_fault(int err)
{
    return err == ENOSPC || err == EDQUOT || err == EIO || err == EROFS;
}

bool replica_logdir_failed(void) { return ld.failed; }

bool replica_logdir_offline(const bk_broker *b)
{
    return ld.failed && b->on_logdir_failed;   /* cluster mode */
}

void replica_logdir_info_get(bk_logdir_info *out) { *out = ld; }

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

bool replica_logdir_fault(bk_broker *b, bk_partition *p, const char *op, int err)
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
    b->logdir_failed = true;                          /* the view's copy (view.c) */
    ld.err = err;
    ld.failed_ms = bk_now_ms();
    ld.failures++;
    if (snprintf(ld.error, sizeof ld.error, "%s: %s %s (partition %s-%d)", strerror(err), op,
                 file, p->topic->name, (int)p->id) >= (int)sizeof ld.error)
        ld.error[sizeof ld.error - 2] = '~';     /* a path past the size: cut, marked */
    if (!b->on_logdir_failed) {
        BK_ERROR("log directory %s failed: %s; its partitions refuse writes "
                 "(KAFKA_STORAGE_ERROR) and keep serving reads until the disk takes writes "
                 "again", b->data_dir, ld.error);
        return true;
    }
    BK_ERROR("log directory %s failed: %s; this broker stops leading and following the "
             "partitions stored there and tells the controller; restart it once the "
             "directory takes writes again", b->data_dir, ld.error);
    b->on_logdir_failed(b);
    return true;
}

void replica_logdir_recovered(bk_broker *b, bk_partition *p)
{
    if (!ld.failed || b->on_logdir_failed)
        return;
    ld.failed = false;
    b->logdir_failed = false;
    ld.err = 0;
    ld.error[0] = 0;
    BK_INFO("log directory %s takes writes again (partition %s-%d, log end %lld)",
            b->data_dir, p->topic->name, (int)p->id, (long long)seg_log_end(p->log));
}
