/*
 * daemon/replica/replica_txn.c — transaction markers on the partition side
 * (replica_txn.h): what WriteTxnMarkers and the transaction coordinator
 * call to end a producer's transaction in one partition.
 *
 * A marker is one control batch (replica_producers.c draws it) built in
 * a stack buffer and appended through the ordinary append path
 * (seg_append, the producer state, replica_partition_appended), then held,
 * like an acks=all Produce, until the high watermark covers it:
 *
 *   replica_txn_write_marker
 *     ├─ refused (not leader, storage error, ISR below
 *     │  min.insync.replicas, older producer or coordinator epoch)
 *     │    → error kept ──────────────────────────────┐
 *     └─ appended: the producer's transaction ends,    │
 *        an ABORT enters the aborted-transaction index │
 *            │                                         ▼
 *            ▼ replica_deferred (replica_deferred.h)   done(arg, error) on
 *        WAITING ── HW moves / leadership lost ──►     the next loop turn
 *        CHECK ── HW >= marker + 1 → KP_NONE ─────────►
 *              └─ not led here → NOT_LEADER_OR_FOLLOWER
 *        WAITING ── timeout_ms ── REQUEST_TIMED_OUT ──►
 *
 * Invariants (cite as "replica_txn.c M1"):
 *   M1. done runs exactly once, on the loop, never inside
 *       replica_txn_write_marker: even an answer known at once goes
 *       through the deferred's wake (replica_deferred.h D2).
 *   M2. No partition pointer outlives a loop turn: each check looks the
 *       partition up again by name (the name is copied into the hold).
 *   M3. One allocation per marker (its hold, which carries the deferred
 *       and its waiter); none per record.
 *   M4. A hold not answered when the loop stops is freed by
 *       replica_txn_stop without its done (M1 holds while the loop runs):
 *       its caller frees its own side (txn_markers.c K4).
 */
#include <stdlib.h>
#include <string.h>

#include "daemon/broker.h"
#include "daemon/replica/replica_deferred.h"
#include "daemon/replica/replica_logdir.h"
#include "daemon/replica/replica_txn.h"
#include "daemon/view/view.h"

typedef struct mk_hold {
    struct mk_hold *next_h, *prev_h;   /* on holds (M4) */
    bk_broker *b;
    replica_marker_done done;
    void *arg;
    int32_t partition;
    int16_t error;                 /* decided: answered at the next check */
    bool decided;
    int64_t end;                   /* the HW that answers it (marker + 1) */
    bk_deferred wait;
    bk_waiter w;
    char topic[];                  /* M2 */
} mk_hold;

/* Every hold not answered yet, for shutdown (sentinel; M4). */
static mk_hold holds = { .next_h = &holds, .prev_h = &holds };

static void mk_hold_free(mk_hold *h)
{
    h->next_h->prev_h = h->prev_h;
    h->prev_h->next_h = h->next_h;
    replica_deferred_free(&h->wait);
    free(h);
}

void replica_txn_stop(void)
{
    while (holds.next_h != &holds)
        mk_hold_free(holds.next_h);
}

static void mk_answer(mk_hold *h, int16_t error)
{
    h->next_h->prev_h = h->prev_h;
    h->prev_h->next_h = h->next_h;
    replica_deferred_free(&h->wait);
    replica_marker_done done = h->done;
    void *arg = h->arg;
    free(h);
    done(arg, error);
}

/* true when decided (h->error set). */
static bool mk_check(mk_hold *h)
{
    if (h->decided)
        return true;
    bk_partition *p;
    kp_str t = { h->topic, (int32_t)strlen(h->topic) };
    int rc = view_leader_replica(h->b, t, h->partition, &p);
    if (rc != KP_NONE) {
        h->error = (int16_t)rc;
    } else if (p->high_watermark >= h->end) {
        h->error = bk_cluster_mode(h->b) &&
                   repl_isr_size(p) < p->topic->cfg.min_insync_replicas
                       ? KP_NOT_ENOUGH_REPLICAS_AFTER_APPEND : KP_NONE;
    } else {
        replica_deferred_watch(&h->wait, p, &h->w, false);
        return false;
    }
    h->decided = true;
    return true;
}

static void mk_wake(void *arg)
{
    mk_hold *h = arg;
    if (mk_check(h))
        mk_answer(h, h->error);
}

static void mk_timeout(void *arg)
{
    mk_hold *h = arg;
    replica_deferred_unwatch(&h->wait);
    mk_answer(h, h->decided ? h->error : KP_REQUEST_TIMED_OUT);
}

/* Appends the marker to p, which this broker leads.  KP_NONE with
 * *end the offset after it, or the error. */
static int16_t mk_append(bk_broker *b, bk_partition *p, int64_t pid, int16_t epoch,
                         const bk_marker *m, int64_t *end)
{
    const char *why;
    if (bk_mirror_refuses(b, p->topic->name, &why))
        return KP_INVALID_REQUEST;       /* a mirror's offsets are its source's */
    if (seg_failed(p->log))
        return KP_KAFKA_STORAGE_ERROR;
    if (bk_cluster_mode(b) && repl_isr_size(p) < p->topic->cfg.min_insync_replicas)
        return KP_NOT_ENOUGH_REPLICAS;
    int rc = replica_pstate_check_marker(p->producers, pid, epoch, m->coordinator_epoch);
    if (rc != KP_NONE)
        return (int16_t)rc;
    int64_t now = bk_now_ms();
    uint8_t batch[REPLICA_MARKER_SIZE];
    size_t len = replica_marker_build(batch, pid, epoch, p->leader_epoch, m, now);
    int64_t base = -1;
    rc = seg_append(p->log, batch, len, now, &base);
    if (rc != 0) {
        if (seg_failed(p->log) &&
            !replica_logdir_fault(b, p, "appending a transaction marker to",
                                  seg_last_errno(p->log)))
            BK_ERROR("%s-%d: transaction marker not appended (error %d): partition "
                     "refuses writes until the disk takes them again",
                     p->topic->name, p->id, rc);
        return KP_KAFKA_STORAGE_ERROR;
    }
    if (!p->producers || replica_pstate_record(p->producers, batch, len, now) != 0)
        BK_WARN("%s-%d: producer state not recorded for the marker of producer %lld "
                "(out of memory)", p->topic->name, p->id, (long long)pid);
    p->bytes_in += len;
    replica_partition_appended(b, p, 1);      /* HW, flush policy, waiters */
    *end = base + 1;
    return KP_NONE;
}

void replica_txn_write_marker(bk_broker *b, const char *topic, int32_t partition,
                              int64_t producer_id, int16_t producer_epoch, bool commit,
                              int32_t coordinator_epoch, int64_t timeout_ms,
                              replica_marker_done done, void *arg)
{
    size_t tlen = strlen(topic);
    mk_hold *h = calloc(1, sizeof *h + tlen + 1);
    if (!h)
        abort();                       /* as the placeholder: no way to answer later */
    h->next_h = holds.next_h;
    h->prev_h = &holds;
    holds.next_h->prev_h = h;
    holds.next_h = h;
    h->b = b;
    h->done = done;
    h->arg = arg;
    h->partition = partition;
    memcpy(h->topic, topic, tlen + 1);
    replica_deferred_init(&h->wait, mk_wake, mk_timeout, h);
    if (replica_deferred_arm(&h->wait, b->base, timeout_ms) != 0)
        abort();                       /* M1 needs the deferred's events */

    bk_partition *p;
    kp_str t = { h->topic, (int32_t)tlen };
    int rc = view_leader_replica(b, t, partition, &p);
    if (rc == KP_NONE) {
        bk_marker m = { .commit = commit, .coordinator_epoch = coordinator_epoch };
        rc = mk_append(b, p, producer_id, producer_epoch, &m, &h->end);
    }
    if (rc != KP_NONE) {
        h->error = (int16_t)rc;
        h->decided = true;
    }
    replica_deferred_wake(&h->wait);   /* M1: checked on the next turn */
}
