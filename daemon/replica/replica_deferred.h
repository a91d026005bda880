/*
 * daemon/replica/replica_deferred.h — one deferred answer: wait until a
 * partition's high watermark (or log end) gets somewhere, or a store says
 * it is done, with a deadline and a cancel.
 *
 * Its users: an acks=all Produce waiting for its batches to be replicated
 * (daemon/api/api_produce.c), a Fetch long-poll waiting for MinBytes
 * (daemon/api/api_fetch.c), a group's commit held until the high watermark
 * of __consumer_offsets covers it (daemon/group/group_log.c).  Each keeps
 * one bk_deferred and one bk_waiter per partition it may wait on, both in
 * its own memory (the request arena, or its hold); the deferred allocates
 * only its two events, once per wait, when replica_deferred_arm starts it.
 *
 *              replica_deferred_init
 *     IDLE ───────────────────────► IDLE (the user checks, may watch)
 *       │ replica_deferred_arm (deadline timer added)
 *       ▼
 *     WAITING ── a watched partition moves (replica_partition_notify → waiter
 *       ▲  │     wake) or replica_deferred_wake (a store is done, shutdown):
 *       │  │     every waiter unlinked, wake_ev activated ──► SCHEDULED
 *       │  │  SCHEDULED ── next loop turn ──► on_wake(arg): the user checks;
 *       └──┼──────────── it watches again (WAITING) or finishes (free)
 *          │ deadline, or replica_deferred_expire (shutdown): every waiter
 *          ▼ unlinked ──► on_timeout(arg): the user answers and frees
 *     freed: replica_deferred_free from any state (the answer is sent, or the
 *            connection died first: the request's cancel)
 *
 * Invariants (cite as "replica_deferred.h D1"):
 *   D1. A waiter is on its deferred's chain from replica_deferred_watch until
 *       replica_deferred_unwatch (or free); the chain is how a deferred drops
 *       all its waiters at once, from any context, without a lookup.
 *   D2. on_wake and on_timeout run on the loop, never inside
 *       replica_partition_notify, and with no waiter linked: the user keeps no
 *       partition pointer across a return to the loop and looks its
 *       partitions up again by name (topic deletion notifies before it
 *       frees: replica_partition.c invariant 3).
 *   D3. Wakes are coalesced: any number of notifications before the next
 *       loop turn cost one on_wake.
 *   D4. After replica_deferred_free, no callback of the deferred runs.
 */
#ifndef SLUICE_REPLICA_DEFERRED_H
#define SLUICE_REPLICA_DEFERRED_H

#include "daemon/replica/replica.h"

struct event;
struct event_base;

typedef void (*bk_deferred_fn)(void *arg);

typedef struct bk_deferred {
    bk_deferred_fn on_wake, on_timeout;
    void *arg;
    bk_waiter *watched;               /* D1: the chain, through w->chain */
    struct event *timer;              /* the deadline; NULL until armed */
    struct event *wake_ev;            /* D3: activated once per turn */
    bool wake_pending;
} bk_deferred;

/* Ready to watch, not armed: no event yet, so a user whose first check
 * finds everything done pays nothing more. */
void replica_deferred_init(bk_deferred *d, bk_deferred_fn on_wake,
                      bk_deferred_fn on_timeout, void *arg);
/* Starts the deadline, timeout_ms from now (a negative one is 0).  0, or
 * -1 out of memory (the user answers now; replica_deferred_free still frees). */
int replica_deferred_arm(bk_deferred *d, struct event_base *base, int64_t timeout_ms);
/* Links w on p's high watermark waiters, or with appends on its append
 * waiters (replica fetches, which read to the log end:
 * replica_partition.c invariant 4), and chains it to d (D1).  w starts
 * zeroed and belongs to d from then on (its wake and arg are d's). */
void replica_deferred_watch(bk_deferred *d, bk_partition *p, bk_waiter *w, bool appends);
/* Unlinks every waiter of d (D1). */
void replica_deferred_unwatch(bk_deferred *d);
/* Unlinks every waiter and runs on_wake on the next loop turn (D3): what
 * a waiter does when its partition moves, and what a user calls when
 * something else than a partition is what it waits for. */
void replica_deferred_wake(bk_deferred *d);
/* Unlinks every waiter and runs on_timeout on the next loop turn, as if
 * the deadline had passed (shutdown).  Armed deferreds only. */
void replica_deferred_expire(bk_deferred *d);
/* Unlinks every waiter and frees the events (D4); d may then be reused
 * after replica_deferred_init. */
void replica_deferred_free(bk_deferred *d);

#endif
