/*
 * test_d_partition_hw — fetch waiters wake when the high watermark moves
 * (replica_partition_set_high_watermark), and only then: setting the value it
 * already has wakes no one, so once followers exist an append that leaves
 * the HW behind costs a waiting Fetch nothing.
 */
#include <check.h>
#include <string.h>

#include "daemon/replica/replica.h"
#include "tests/unit/unit_run.h"

static void count_wake(bk_waiter *w)
{
    (*(int *)w->arg)++;
}

START_TEST(test_waiters_wake_only_when_the_high_watermark_moves)
{
    bk_partition p;
    memset(&p, 0, sizeof p);
    replica_partition_init_waiters(&p);
    int woken = 0;
    bk_waiter w = { .wake = count_wake, .arg = &woken };

    replica_partition_watch(&p, &w);
    replica_partition_set_high_watermark(NULL, &p, 0);   /* where it is: no move */
    ck_assert_int_eq(woken, 0);
    ck_assert_ptr_eq(w.part, &p);

    replica_partition_set_high_watermark(NULL, &p, 5);
    ck_assert_int_eq(woken, 1);
    ck_assert_int_eq(p.high_watermark, 5);
    ck_assert_ptr_null(w.part);                     /* unlinked before wake */

    replica_partition_watch(&p, &w);
    replica_partition_set_high_watermark(NULL, &p, 5);
    ck_assert_int_eq(woken, 1);
    replica_partition_set_high_watermark(NULL, &p, 9);
    ck_assert_int_eq(woken, 2);
    /* A move with nobody waiting is just a store. */
    replica_partition_set_high_watermark(NULL, &p, 12);
    ck_assert_int_eq(woken, 2);
    ck_assert_int_eq(p.high_watermark, 12);
}
END_TEST

/* Replica fetches read to the log end: a HW move gives them no bytes, so
 * it leaves them waiting; deletion (replica_partition_notify) wakes both kinds. */
START_TEST(test_append_waiters_sleep_through_hw_moves_and_wake_on_notify)
{
    bk_partition p;
    memset(&p, 0, sizeof p);
    replica_partition_init_waiters(&p);
    int consumer = 0, follower = 0;
    bk_waiter wc = { .wake = count_wake, .arg = &consumer };
    bk_waiter wf = { .wake = count_wake, .arg = &follower };

    replica_partition_watch(&p, &wc);
    replica_partition_watch_appends(&p, &wf);
    replica_partition_set_high_watermark(NULL, &p, 3);
    ck_assert_int_eq(consumer, 1);
    ck_assert_int_eq(follower, 0);
    ck_assert_ptr_eq(wf.part, &p);

    replica_partition_watch(&p, &wc);
    replica_partition_notify(&p);
    ck_assert_int_eq(consumer, 2);
    ck_assert_int_eq(follower, 1);
    ck_assert_ptr_null(wf.part);
    ck_assert_ptr_null(wc.part);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = { test_waiters_wake_only_when_the_high_watermark_moves,
                                   test_append_waiters_sleep_through_hw_moves_and_wake_on_notify };
    return unit_run("d_partition_hw", "hw", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
