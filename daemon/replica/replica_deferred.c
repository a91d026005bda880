/*
 * daemon/replica/replica_deferred.c — the deferred answer of
 * replica_deferred.h (its design note: states and invariants D1-D4).
 *
 * Cost: nothing per partition beyond linking its waiter; two events per
 * wait, created when it is armed (a request answered by its first check
 * creates none) and freed with it.
 */
#include "daemon/replica/replica_deferred.h"

#include <event2/event.h>

void replica_deferred_init(bk_deferred *d, bk_deferred_fn on_wake,
                      bk_deferred_fn on_timeout, void *arg)
{
    *d = (bk_deferred){ .on_wake = on_wake, .on_timeout = on_timeout, .arg = arg };
}

/* Runs inside replica_partition_notify: only schedules (replica_deferred.h D2).  w->arg, not
 * w->deferred: the chain may already have been dropped by this notify. */
static void waiter_wake(bk_waiter *w)
{
    replica_deferred_wake(w->arg);
}

static void wake_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_deferred *d = arg;
    d->wake_pending = false;
    replica_deferred_unwatch(d);              /* replica_deferred.h D2, whoever woke it */
    d->on_wake(d->arg);
}

static void timer_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_deferred *d = arg;
    replica_deferred_unwatch(d);              /* replica_deferred.h D2 */
    d->on_timeout(d->arg);
}

int replica_deferred_arm(bk_deferred *d, struct event_base *base, int64_t timeout_ms)
{
    if (timeout_ms < 0)
        timeout_ms = 0;
    d->timer = evtimer_new(base, timer_cb, d);
    d->wake_ev = event_new(base, -1, 0, wake_cb, d);
    struct timeval tv = { (time_t)(timeout_ms / 1000), (suseconds_t)(timeout_ms % 1000) * 1000 };
    if (!d->timer || !d->wake_ev || evtimer_add(d->timer, &tv) != 0)
        return -1;
    return 0;
}

void replica_deferred_watch(bk_deferred *d, bk_partition *p, bk_waiter *w, bool appends)
{
    if (w->deferred != d) {              /* replica_deferred.h D1: chained once */
        w->deferred = d;
        w->chain = d->watched;
        d->watched = w;
    }
    w->wake = waiter_wake;
    w->arg = d;
    if (appends)
        replica_partition_watch_appends(p, w);
    else
        replica_partition_watch(p, w);
}

void replica_deferred_unwatch(bk_deferred *d)
{
    bk_waiter *w = d->watched;
    d->watched = NULL;
    while (w) {
        bk_waiter *next = w->chain;
        replica_partition_unwatch(w);
        w->deferred = NULL;
        w->chain = NULL;
        w = next;
    }
}

void replica_deferred_wake(bk_deferred *d)
{
    replica_deferred_unwatch(d);
    if (!d->wake_pending && d->wake_ev) {    /* replica_deferred.h D3; not armed: nothing to run */
        d->wake_pending = true;
        event_active(d->wake_ev, EV_TIMEOUT, 0);
    }
}

void replica_deferred_expire(bk_deferred *d)
{
    replica_deferred_unwatch(d);
    event_active(d->timer, EV_TIMEOUT, 0);
}

void replica_deferred_free(bk_deferred *d)
{
    replica_deferred_unwatch(d);
    if (d->timer)
        event_free(d->timer);
    if (d->wake_ev)
        event_free(d->wake_ev);
    d->timer = d->wake_ev = NULL;
    d->wake_pending = false;
}
