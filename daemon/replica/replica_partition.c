/*
 * daemon/replica/replica_partition.c — what happens to a partition around an append:
 * fetch waiters, flush policy bookkeeping, and "who leads it".
 *
 * Waiters.  A Fetch that long-polls (MinBytes not reached, MaxWaitMs > 0)
 * links one bk_waiter per requested partition into that partition's list.
 * The list is circular with the partition's `waiters` member as sentinel:
 *
 *     p->waiters <-> w1 <-> w2 <-> ... <-> p->waiters
 *
 * Invariants:
 *   1. A waiter is linked into at most one list, and w->part names it
 *      (NULL when not linked).  Unlinking is O(1) and needs no partition
 *      lookup, so a Fetch can drop all its waiters from any context.
 *   2. replica_partition_notify detaches the whole list before calling any
 *      wake(), so a wake() that re-registers on the same partition is not
 *      woken again by the same notify, and a wake() that unlinks other
 *      waiters of the same list (a Fetch dropping all its waiters) only
 *      touches the detached list.
 *   3. Topic deletion calls replica_partition_notify on a partition before
 *      freeing it; after notify the list is empty, so nothing can point at
 *      the freed partition.  wake() must therefore never keep the partition
 *      pointer: the Fetch code re-finds partitions by name on its next
 *      loop turn.
 *   4. `waiters` are woken when the high watermark moves, and only then
 *      (replica_partition_set_high_watermark, the one place that moves it
 *      while the partition is open): a consumer's Fetch reads up to the
 *      HW, so an append above it gives a waiter nothing new.  Topic
 *      deletion (3) is the other notify.  `append_waiters` (replica
 *      fetches, which read up to the log end) are woken by every append
 *      (replica_partition_appended) and by replica_partition_notify (deletion, lost
 *      leadership), not by HW moves: a HW move gives a follower no bytes,
 *      so its fetch would only wait again (it learns the HW with its next
 *      answer, as in Kafka).
 *
 * Flush policy (Kafka's flush.messages / flush.ms): appends count
 * unflushed messages; reaching flush.messages queues an fdatasync on the
 * flusher thread; replica_flush_tick, run from the maintenance timer every
 * log.flush.scheduler.interval.ms, queues partitions whose last flush is
 * older than flush.ms.  Neither ever syncs on the loop thread.
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_producers.h"

static void waiter_head_init(bk_waiter *h)
{
    h->next = h->prev = h;
    h->part = NULL;
    h->wake = NULL;
    h->arg = NULL;
}

void replica_partition_init_waiters(bk_partition *p)
{
    waiter_head_init(&p->waiters);
    waiter_head_init(&p->append_waiters);
    p->isr_pending_version = -1;
    p->followers_epoch = -1;
}

static void waiter_link_tail(bk_waiter *head, bk_waiter *w)
{
    w->prev = head->prev;
    w->next = head;
    head->prev->next = w;
    head->prev = w;
}

void replica_partition_watch(bk_partition *p, bk_waiter *w)
{
    if (w->part)
        replica_partition_unwatch(w);
    waiter_link_tail(&p->waiters, w);
    w->part = p;
}

void replica_partition_watch_appends(bk_partition *p, bk_waiter *w)
{
    if (w->part)
        replica_partition_unwatch(w);
    waiter_link_tail(&p->append_waiters, w);
    w->part = p;
}

void replica_partition_unwatch(bk_waiter *w)
{
    if (!w->part)
        return;
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->next = w->prev = NULL;
    w->part = NULL;
}

static void notify_list(bk_waiter *head)
{
    if (head->next == head || head->next == NULL)
        return;
    /* Invariant 2: move everything onto a local sentinel first.  Waiters
     * keep w->part == p while on it, so replica_partition_unwatch still works. */
    bk_waiter local;
    local.next = head->next;
    local.prev = head->prev;
    local.next->prev = &local;
    local.prev->next = &local;
    head->next = head->prev = head;

    while (local.next != &local) {
        bk_waiter *w = local.next;
        replica_partition_unwatch(w);
        if (w->wake)
            w->wake(w);
    }
}

void replica_partition_notify(bk_partition *p)
{
    notify_list(&p->waiters);
    notify_list(&p->append_waiters);
}

void replica_partition_set_high_watermark(bk_broker *b, bk_partition *p, int64_t hw)
{
    (void)b;
    if (hw == p->high_watermark)
        return;                  /* invariant 4: nothing new to read */
    p->high_watermark = hw;
    notify_list(&p->waiters);     /* invariant 4: not the append waiters */
}

void replica_partition_appended(bk_broker *b, bk_partition *p, int64_t messages)
{
    p->messages_in += (uint64_t)messages;
    p->unflushed_messages += messages;
    int64_t fm = p->topic->cfg.flush_messages;
    if (fm > 0 && p->unflushed_messages >= fm && !p->flush_in_flight)
        replica_flusher_request(b, p);
    /* Replica fetches read up to the log end: the append is news to them
     * (invariant 4).  Standalone the HW follows the log end; cluster mode's
     * hook keeps it behind until the ISR's followers fetch (replica.h
     * bk_isr_hooks). */
    notify_list(&p->append_waiters);
    replica_partition_epochs_save(b, p);  /* a batch of a new epoch */
    if (b->isr)
        b->isr->update_hw(b, p);
    else
        replica_partition_set_high_watermark(b, p, seg_log_end(p->log));
}

int replica_partition_restart_at(bk_broker *b, bk_partition *p, int64_t offset)
{
    int rc = seg_restart_at(p->log, offset);
    replica_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
    if (rc != 0)
        return rc;
    replica_partition_epochs_save(b, p);
    replica_producers_reset(b, p);
    p->high_watermark = offset;           /* may move back: a new log */
    notify_list(&p->waiters);
    notify_list(&p->append_waiters);
    return 0;
}

void replica_partition_epochs_save(bk_broker *b, bk_partition *p)
{
    seg_epoch_ckpt *c = p->log ? seg_epoch_take_checkpoint(p->log) : NULL;
    if (c)
        replica_janitor_epochs(b, c);         /* fdatasyncs off the loop */
}

struct flush_tick_arg {
    bk_broker *b;
    int64_t now;
};

static void flush_tick_replica(bk_partition *p, void *arg)
{
    struct flush_tick_arg *a = arg;
    int64_t fms = p->topic->cfg.flush_ms;
    if (fms < 0 || fms == INT64_MAX || p->unflushed_messages <= 0 || p->flush_in_flight)
        return;
    if (a->now - p->last_flush_ms >= fms)
        replica_flusher_request(a->b, p);
}

void replica_flush_tick(bk_broker *b)
{
    struct flush_tick_arg a = { b, bk_now_ms() };
    replica_replicas_foreach(b, flush_tick_replica, &a);
}
