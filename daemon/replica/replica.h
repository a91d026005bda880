/*
 * daemon/replica/replica.h — the local replicas: the partition logs this broker
 * hosts (daemon/replica/replica.c), the Fetch waiters on them (replica_partition.c), and
 * the workers that flush (replica_flusher.c), retain (replica_retention.c), compact
 * (replica_cleaner.c) and delete (replica_janitor.c) them.
 */
#ifndef SLUICE_REPLICA_H
#define SLUICE_REPLICA_H

#include "daemon/broker.h"
#include "segments/seg.h"
#include "daemon/replica/replica_producers.h"

/* ---- waiting for data (Fetch long-poll, acks=all) ------------------------ */
/* A waiter is linked into one of a partition's two lists: `waiters`
 * (replica_partition_watch: consumers' Fetch, acks=all Produce), woken when
 * the high watermark moves; and `append_waiters`
 * (replica_partition_watch_appends: replica Fetch, which reads up to the log
 * end), woken by every append.  replica_partition_notify (the partition is
 * deleted, or no longer led here) wakes both.  Waking unlinks each waiter
 * and calls its wake().  wake() runs on the loop thread and may
 * re-register. */
typedef struct bk_waiter {
    struct bk_waiter *next, *prev;
    bk_partition *part;               /* NULL when not linked */
    void (*wake)(struct bk_waiter *w);
    void *arg;
    /* A bk_deferred's own (replica_deferred.h): the deferred the waiter
     * is chained to (NULL: none) and the next waiter on its chain. */
    struct bk_deferred *deferred;
    struct bk_waiter *chain;
} bk_waiter;

void replica_partition_init_waiters(bk_partition *p);   /* empty list */
void replica_partition_watch(bk_partition *p, bk_waiter *w);
void replica_partition_watch_appends(bk_partition *p, bk_waiter *w);
void replica_partition_unwatch(bk_waiter *w);
void replica_partition_notify(bk_partition *p);

/* What the leader knows of one follower of a partition it leads
 * (daemon/replication/repl_isr.c): Kafka's follower fetch state. */
typedef struct bk_follower {
    int32_t id;
    int64_t log_end;                 /* its last FetchOffset; -1: not fetched yet */
    int64_t last_caught_up_ms;       /* Kafka's lastCaughtUpTimeMs (bk_now_ms) */
    int64_t last_fetch_ms;           /* its previous fetch, and the leader's */
    int64_t last_fetch_leader_end;   /* log end at that moment */
} bk_follower;

/* ---- local replicas (daemon/replica/replica.c) ----------------------------------------
 * The logs this broker hosts: one bk_partition per replica it holds, with
 * its log, high watermark, producer state and fetch waiters.  Linked into
 * the broker's list of local replicas and pointed at by the view's
 * partition (bk_pview.local); the topic pointer names the view's topic, for
 * its name and effective config. */
struct bk_partition {
    bk_topic *topic;
    int32_t id;
    bk_partition *lnext, *lprev;     /* the broker's local replicas */
    seg_log *log;
    int32_t leader_epoch;
    int64_t high_watermark;          /* standalone: the log end */
    /* flush policy (flush.messages / flush.ms) */
    int64_t unflushed_messages;
    int64_t last_flush_ms;
    bool flush_in_flight;
    /* bookmarks last saved to SQLite, to save only what changed */
    int64_t saved_log_start, saved_recovery_point, saved_hw;
    bk_waiter waiters;               /* list head (circular, sentinel) */
    bk_waiter append_waiters;        /* replica fetches: woken by appends too */
    /* cluster mode, as leader (daemon/replication/repl_isr.c): the followers, reset
     * when the leader epoch changes; fixed size, no allocation per fetch */
    bk_follower followers[MD_REPLICAS_MAX];
    int32_t nfollowers;
    int32_t followers_epoch;         /* leader epoch the followers belong to */
    bool leading;                    /* led here at the last view change */
    uint8_t held;                    /* led in the view, but not here (cluster_recovery.c R5):
                                        0 no, 1 not known yet, 2 led before a restart */
    int isr_pending_version;         /* ISR write out on this state version; -1 none */
    int32_t min_epoch;               /* no append while leader_epoch is below it (a
                                        promoted mirror's, daemon/link/link.c K14) */
    int64_t local_start;             /* a mirror that left mirroring: its first local
                                        offset (daemon/link/link.c K17); -1 none */
    int64_t storage_retry_ms;        /* log failed: next seg_reset_error try */
    struct bk_pstate *producers;     /* idempotent producers (replica_producers.c) */
    /* counters for /metrics */
    uint64_t bytes_in, messages_in, bytes_out;
    uint64_t flushes;                /* fdatasyncs completed (replica_flusher.c) */
    /* retention and compaction (daemon/replica/replica_retention.c, daemon/replica/replica_cleaner.c) */
    bool clean_in_flight;            /* a compaction job is out */
    uint64_t segments_deleted, bytes_deleted;
    uint64_t cleaner_runs, cleaner_bytes_freed, cleaner_records_removed,
             cleaner_failures;
    int64_t cleaner_last_us;         /* duration of the last compaction */
};

/* Calls fn for every local replica (it may not close any). */
void replica_replicas_foreach(bk_broker *b, void (*fn)(bk_partition *p, void *arg), void *arg);
size_t replica_replicas_count(bk_broker *b);
/* Opens (recovering) this broker's replica of partition idx of t, with
 * the bookmarks in mp (NULL: a new, empty log), links it into the local
 * replicas and into t->parts[idx].local.  KP_NONE or a KP_* with err. */
int  replica_open(bk_broker *b, bk_topic *t, int32_t idx, const md_partition *mp,
                     char *err, size_t errlen);
/* Unlinks and closes it; destroy: the log is deleted (topic deletion). */
void replica_close(bk_broker *b, bk_partition *p, bool destroy);
/* Gives the view these calls (b->replica_hooks, view_registry.h): it
 * opens and closes the local replicas as the topics' facts change. */
void replica_install(bk_broker *b);
/* Saves log start / recovery point / high watermark of every local
 * replica whose values changed, in one transaction. */
void replica_save_offsets(bk_broker *b);

/* Called after an append: flush policy bookkeeping, then the high
 * watermark (standalone: the log end). */
void replica_partition_appended(bk_broker *b, bk_partition *p, int64_t messages);
/* Queues the partition's leader-epoch-checkpoint for writing if its
 * epoch history changed (O(1) when not): after appends, truncations,
 * log-start moves and a leadership taken. */
void replica_partition_epochs_save(bk_broker *b, bk_partition *p);
/* The last stable offset (Kafka's firstUnstableOffset bounded by the HW):
 * the first offset of the oldest open transaction, else the high
 * watermark.  O(1) (replica_producers.c P4); read_committed consumers are
 * served below it.  It moves only with the HW or a marker append, which
 * the HW then covers, so the HW waiters hear of every move. */
static inline int64_t replica_partition_lso(const bk_partition *p)
{
    int64_t fu = p->producers ? p->producers->first_unstable : -1;
    return fu >= 0 && fu < p->high_watermark ? fu : p->high_watermark;
}
/* Empties p's log, which restarts at offset (seg_restart_at: a mirror
 * behind its source's log start), with what goes with it: the segments to
 * the janitor, the epochs checkpoint, the producer state, the high
 * watermark at offset.  0 or the SEG_E_* error. */
int replica_partition_restart_at(bk_broker *b, bk_partition *p, int64_t offset);
/* Moves the high watermark; wakes the fetch waiters only if it moved. */
void replica_partition_set_high_watermark(bk_broker *b, bk_partition *p, int64_t hw);

/* Who moves the high watermark after an append.  With no hooks (b->isr
 * NULL: standalone) replica_partition.c sets it to the log end itself.
 * Cluster mode installs the ISR's (daemon/replication/repl_isr.c, from
 * main.c before any log opens): as leader, the smallest log end among the
 * ISR members, which is the log end again when the ISR is the leader
 * alone; never moved back; as follower, left to the replica fetcher. */
typedef struct bk_isr_hooks {
    void (*update_hw)(bk_broker *b, bk_partition *p);
} bk_isr_hooks;

/* ---- followers and the ISR (daemon/replication/repl_isr.c) ------------------------------
 * Standalone these do nothing (the view's ISR is [this broker]). */
/* A replica Fetch from follower id at fetch_offset (within the log),
 * with the leader's log end leader_end at that moment: records its log end
 * and caught-up time, moves the high watermark, and proposes the follower
 * for the ISR once it reached the high watermark. */
void repl_isr_follower_fetched(bk_broker *b, bk_partition *p, int32_t id,
                             int64_t fetch_offset, int64_t leader_end);
/* The view of p's partition changed (view_topics.c): new ISR, new leader. */
void repl_isr_view_changed(bk_broker *b, bk_partition *p);
/* Drops followers not caught up for replica.lag.time.max.ms from the ISR
 * of the partitions this broker leads (cluster tick). */
void repl_isr_tick(bk_broker *b);
/* Is id one of the partition's replicas / ISR members (view)? */
bool repl_isr_is_replica(const bk_partition *p, int32_t id);
int32_t repl_isr_size(const bk_partition *p);

/* ---- flush worker (daemon/replica/replica_flusher.c) ---------------------------------------- */
int  replica_flusher_start(bk_broker *b);
/* Queues an fdatasync of the partition on the worker thread (no-op if one
 * is in flight).  On completion the loop thread records the recovery point. */
void replica_flusher_request(bk_broker *b, bk_partition *p);
/* Drops pending work for p (topic deletion) and waits for in-flight work
 * on p to finish. */
void replica_flusher_forget(bk_broker *b, bk_partition *p);
void replica_flusher_stop(bk_broker *b);
/* Maintenance timer: requests flushes due under flush.ms. */
void replica_flush_tick(bk_broker *b);

/* ---- retention, compaction, file removal (replica_retention.c, replica_cleaner.c, replica_janitor.c)
 * The loop decides (a few numbers per partition); worker threads unlink,
 * compact and remove directories.  Start after replica_flusher_start; stop
 * (cancels compactions, installs finished ones) after replica_flusher_stop;
 * shutdown (runs every queued removal now) after view_topics_close_all. */
int  replica_retention_start(bk_broker *b);
void replica_retention_stop(bk_broker *b);
void replica_retention_shutdown(bk_broker *b);
/* log.retention.check.interval.ms: retention.ms / retention.bytes. */
void replica_retention_tick(bk_broker *b);
/* DeleteRecords: log start to `offset` (-1: high watermark), saved to
 * SQLite at once.  KP_NONE with *low_watermark, or a KP_* error. */
int  replica_delete_records(bk_broker *b, bk_partition *p, int64_t offset,
                       int64_t *low_watermark);
/* Topic deletion: renames the partition directory "...-delete" and hands
 * the log to the janitor; p->log is NULL afterwards. */
void replica_partition_log_delete(bk_broker *b, bk_partition *p);
int  replica_janitor_start(bk_broker *b);
void replica_janitor_stop(bk_broker *b);
/* Unlinks the list's *.deleted files after delay_ms (file.delete.delay.ms). */
void replica_janitor_dead(bk_broker *b, seg_dead *d, int64_t delay_ms);
void replica_janitor_destroy_log(bk_broker *b, seg_log *log);
void replica_janitor_remove_dir(bk_broker *b, const char *dir);
/* Writes a leader-epoch-checkpoint snapshot (fdatasync, rename). */
void replica_janitor_epochs(bk_broker *b, seg_epoch_ckpt *c);
/* log.cleaner.enable=false: no workers, no compaction. */
int  replica_cleaner_start(bk_broker *b);
void replica_cleaner_stop(bk_broker *b);
/* log.cleaner.backoff.ms: plans and queues due compactions. */
void replica_cleaner_tick(bk_broker *b);
/* Cancels and waits for p's compaction, then finishes it (before the
 * partition's log is closed or deleted). */
void replica_cleaner_forget(bk_broker *b, bk_partition *p);

#endif
