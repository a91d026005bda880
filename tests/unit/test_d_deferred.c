/*
 * test_d_deferred — the deferred answer (daemon/replica/replica_deferred.h):
 * a high watermark move unlinks every waiter of the deferred at once and
 * runs its check on the next loop turn, once however many partitions
 * moved (replica_deferred.h D2, D3); the deadline runs the timeout with nothing linked; a
 * freed deferred (the connection closed) runs nothing and leaves no
 * waiter on a partition (replica_deferred.h D4).
 */
#include <check.h>
#include <string.h>

#include <event2/event.h>

#include "daemon/replica/replica_deferred.h"
#include "tests/unit/unit_run.h"

typedef struct probe {
    bk_deferred d;
    bk_waiter w[2];
    int wakes, timeouts;
    int linked_at_callback;           /* waiters still linked when called */
} probe;

static int linked(const probe *pr)
{
    return (pr->w[0].part != NULL) + (pr->w[1].part != NULL);
}

static void on_wake(void *arg)
{
    probe *pr = arg;
    pr->wakes++;
    pr->linked_at_callback += linked(pr);
}

static void on_timeout(void *arg)
{
    probe *pr = arg;
    pr->timeouts++;
    pr->linked_at_callback += linked(pr);
}

static void partition_init(bk_partition *p)
{
    memset(p, 0, sizeof *p);
    replica_partition_init_waiters(p);
}

/* Each test's loop, partitions and deferred (a fixture around each). */
static struct event_base *base;
static bk_partition a, b;
static probe pr;

static void setup(void)
{
    base = event_base_new();
    partition_init(&a);
    partition_init(&b);
}

static void teardown(void)
{
    replica_deferred_free(&pr.d);
    event_base_free(base);
}

/* A fresh probe, armed with timeout_ms (-1: not armed), watching a. */
static void probe_start(int64_t timeout_ms)
{
    memset(&pr, 0, sizeof pr);
    replica_deferred_init(&pr.d, on_wake, on_timeout, &pr);
    if (timeout_ms >= 0)
        ck_assert_int_eq(replica_deferred_arm(&pr.d, base, timeout_ms), 0);
    replica_deferred_watch(&pr.d, &a, &pr.w[0], false);
}

START_TEST(test_hw_moves_wake_the_check_once_on_the_next_turn)
{
    probe_start(60000);
    replica_deferred_watch(&pr.d, &b, &pr.w[1], false);
    ck_assert_int_eq(linked(&pr), 2);

    replica_partition_set_high_watermark(NULL, &a, 5);
    ck_assert_int_eq(linked(&pr), 0);         /* both dropped, b's too */
    ck_assert_int_eq(pr.wakes, 0);            /* replica_deferred.h D2: not inside notify */
    replica_partition_set_high_watermark(NULL, &b, 5);
    replica_deferred_wake(&pr.d);                  /* a store's completion */
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(pr.wakes, 1);            /* replica_deferred.h D3: coalesced */
    ck_assert_int_eq(pr.timeouts, 0);

    /* Watching again after a wake works, on either list. */
    replica_deferred_watch(&pr.d, &a, &pr.w[0], true);
    replica_partition_set_high_watermark(NULL, &a, 9);
    ck_assert_ptr_eq(pr.w[0].part, &a);       /* append waiters sleep through HW moves */
    replica_partition_notify(&a);                  /* deleted, or leadership lost */
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(pr.wakes, 2);
    ck_assert_int_eq(pr.linked_at_callback, 0);
}
END_TEST

START_TEST(test_deadline_runs_the_timeout_with_nothing_linked)
{
    probe_start(20);
    event_base_loop(base, EVLOOP_ONCE);
    ck_assert_int_eq(pr.timeouts, 1);
    ck_assert_int_eq(pr.wakes, 0);
    ck_assert_int_eq(pr.linked_at_callback, 0);
    ck_assert_ptr_eq(a.waiters.next, &a.waiters);
    replica_deferred_free(&pr.d);

    /* Shutdown's expire: the timeout path on the next turn, long before
     * the deadline. */
    probe_start(60000);
    replica_deferred_expire(&pr.d);
    ck_assert_int_eq(linked(&pr), 0);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(pr.timeouts, 1);
}
END_TEST

START_TEST(test_freed_deferred_runs_nothing_and_leaves_no_waiter)
{
    probe_start(10);
    replica_deferred_watch(&pr.d, &a, &pr.w[1], false);
    replica_deferred_wake(&pr.d);                  /* scheduled, then cancelled */
    replica_deferred_watch(&pr.d, &a, &pr.w[0], false);
    replica_deferred_free(&pr.d);                  /* the connection closed */
    ck_assert_ptr_eq(a.waiters.next, &a.waiters);
    ck_assert_ptr_null(pr.d.watched);
    event_base_loop(base, EVLOOP_NONBLOCK);
    replica_partition_set_high_watermark(NULL, &a, 3);
    ck_assert_int_eq(pr.wakes + pr.timeouts, 0);

    /* Never armed (answered by the first check): free costs nothing. */
    probe_start(-1);
    replica_deferred_free(&pr.d);
    ck_assert_ptr_eq(a.waiters.next, &a.waiters);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = { test_hw_moves_wake_the_check_once_on_the_next_turn,
                                   test_deadline_runs_the_timeout_with_nothing_linked,
                                   test_freed_deferred_runs_nothing_and_leaves_no_waiter };
    return unit_run("d_deferred", "deferred", tests, sizeof tests / sizeof *tests, setup,
                    teardown, 0);
}
