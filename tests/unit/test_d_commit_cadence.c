/*
 * test_d_commit_cadence — when a batch of offset commits is written
 * (daemon/group/group_commit_cadence.h): at once with no connection due, after the
 * due ones have come, never past the linger or three quarters of a
 * batched connection's own pace, never for a connection that is late
 * or has committed only once; the smoothed pace, forgotten after a long
 * pause; the table's reuse of the oldest entry.
 */
#include <check.h>

#include "daemon/group/group_commit_cadence.h"
#include "tests/unit/unit_run.h"

#define MS 1000

static cc_table t;
#define C(i) ((uint64_t)(i) + 1)            /* connection serials start at 1 */

static void setup(void)
{
    t = (cc_table){ 0 };
}

/* Connection i commits every gap_us, first at start_us, n times. */
static void pace(int i, int64_t start_us, int64_t gap_us, int n)
{
    for (int k = 0; k < n; k++)
        gc_cadence_note(&t, C(i), start_us + k * gap_us);
}

START_TEST(test_a_lone_committer_never_waits)
{
    pace(0, 0, 4 * MS, 10);                 /* last commit at 36 ms */
    ck_assert_int_eq(gc_cadence_submit_at(&t, 36 * MS, 36 * MS, 5 * MS), 0);
}
END_TEST

START_TEST(test_one_off_commits_never_wait)
{
    gc_cadence_note(&t, C(0), 10 * MS);
    gc_cadence_note(&t, C(1), 11 * MS);             /* one commit each: no pace */
    ck_assert_int_eq(gc_cadence_submit_at(&t, 11 * MS, 11 * MS, 5 * MS), 0);
}
END_TEST

START_TEST(test_waits_for_a_connection_due_within_the_linger)
{
    pace(0, 0, 4 * MS, 10);                 /* 0 .. 36 ms */
    pace(1, 1 * MS, 4 * MS, 9);             /* 1 .. 33 ms: next due at 37 */
    int64_t until = gc_cadence_submit_at(&t, 36 * MS, 36 * MS, 5 * MS);
    ck_assert_int_eq(until, 38 * MS);       /* due 37 ms + a quarter of its gap */
    /* It comes: nobody else is due, so the batch goes at once. */
    gc_cadence_note(&t, C(1), 37 * MS);
    ck_assert_int_eq(gc_cadence_submit_at(&t, 37 * MS, 36 * MS, 5 * MS), 0);
}
END_TEST

START_TEST(test_a_late_connection_is_not_waited_for)
{
    pace(0, 0, 4 * MS, 10);
    pace(1, 1 * MS, 4 * MS, 9);             /* due at 37 ms, late after 38 */
    ck_assert_int_eq(gc_cadence_submit_at(&t, 38 * MS, 36 * MS, 5 * MS), 0);
}
END_TEST

START_TEST(test_connections_due_after_the_linger_are_not_waited_for)
{
    pace(0, 0, 40 * MS, 10);                /* last at 360 ms */
    pace(1, 0, 40 * MS, 9);                 /* last at 320, due at 360 */
    /* At 361 ms with a 5 ms linger: 1 is due (late only after 370 ms), so
     * it is waited for, but never past 365 ms. */
    ck_assert_int_eq(gc_cadence_submit_at(&t, 361 * MS, 360 * MS, 5 * MS), 365 * MS);
    /* With a 100 ms pace it is due at 420 ms: after the linger. */
    t = (cc_table){ 0 };
    pace(0, 0, 40 * MS, 10);
    pace(1, 20 * MS, 100 * MS, 4);          /* last at 320, due at 420 */
    ck_assert_int_eq(gc_cadence_submit_at(&t, 361 * MS, 360 * MS, 5 * MS), 0);
}
END_TEST

START_TEST(test_never_past_three_quarters_of_a_batched_pace)
{
    /* 0 commits every 2 ms, so it waits at most 1.5 ms, even for 1, due
     * 1.2 ms later and not late before 21.6 ms. */
    pace(0, 0, 2 * MS, 10);                 /* last at 18 ms */
    gc_cadence_note(&t, C(1), 100);
    gc_cadence_note(&t, C(1), 9650);                /* a 9.55 ms pace: due at 19.2 ms */
    int64_t until = gc_cadence_submit_at(&t, 18 * MS, 18 * MS, 5 * MS);
    ck_assert_int_eq(until, 18 * MS + 1500);
    ck_assert_int_eq(gc_cadence_submit_at(&t, 18 * MS + 1500, 18 * MS, 5 * MS), 0);
}
END_TEST

START_TEST(test_linger_zero_writes_at_once)
{
    pace(0, 0, 4 * MS, 10);
    pace(1, 1 * MS, 4 * MS, 9);
    ck_assert_int_eq(gc_cadence_submit_at(&t, 36 * MS, 36 * MS, 0), 0);
}
END_TEST

START_TEST(test_ten_staggered_consumers_share_one_write)
{
    /* Ten consumers, each every 4 ms, 0.4 ms apart: a batch waits for
     * those due within three quarters of their pace (3 ms) after the
     * first, so eight commits share one write. */
    for (int k = 0; k < 5; k++)
        for (int i = 0; i < 10; i++)
            gc_cadence_note(&t, C(i), k * 4 * MS + i * 400);
    int64_t first = 5 * 4 * MS;
    for (int i = 0; i < 8; i++) {
        int64_t now = first + i * 400;
        gc_cadence_note(&t, C(i), now);
        int64_t until = gc_cadence_submit_at(&t, now, first, 5 * MS);
        if (i < 7)
            ck_assert_int_gt(until, now);
        else
            ck_assert_int_eq(until, 0);
    }
}
END_TEST

static const cc_entry *entry(uint64_t conn)
{
    for (int i = 0; i < CC_SLOTS; i++)
        if (t.e[i].conn == conn)
            return &t.e[i];
    return NULL;
}

START_TEST(test_the_pace_is_smoothed)
{
    pace(0, 0, 4 * MS, 4);                  /* 0 .. 12 ms */
    gc_cadence_note(&t, C(0), 20 * MS);             /* one gap of 8 ms: 4 + (8 - 4) / 4 */
    ck_assert_int_eq(entry(C(0))->gap_us, 5 * MS);
    /* So it is due at 25 ms: a batch begun at 22 ms waits until it is
     * late, 25 + 1.25 ms, within the 5 ms linger. */
    gc_cadence_note(&t, C(1), 22 * MS);
    ck_assert_int_eq(gc_cadence_submit_at(&t, 22 * MS, 22 * MS, 5 * MS), 26 * MS + 250);
}
END_TEST

START_TEST(test_a_long_pause_forgets_the_pace)
{
    pace(1, 0, 4 * MS, 10);                 /* last at 36 ms, due at 40 ... */
    int64_t back = 36 * MS + CC_MAX_GAP_US + 1;
    gc_cadence_note(&t, C(1), back);                /* ... comes 10 s late */
    ck_assert_int_eq(entry(C(1))->gap_us, 0);
    /* Smoothed instead, its gap would be 4 ms + (10 s - 4 ms) / 4 and its
     * next commit due then: a batch begun 1 ms before would wait for it. */
    int64_t smoothed = 4 * MS + (CC_MAX_GAP_US + 1 - 4 * MS) / 4;
    int64_t now = back + smoothed - 1 * MS;
    gc_cadence_note(&t, C(0), now);
    ck_assert_int_eq(gc_cadence_submit_at(&t, now, now, 5 * MS), 0);
}
END_TEST

START_TEST(test_a_full_table_reuses_the_oldest_entry)
{
    for (int i = 0; i < CC_SLOTS; i++)
        pace(i, 1000 + i, 4 * MS, 2);
    gc_cadence_note(&t, C(CC_SLOTS), 50 * MS);      /* a new connection */
    int found_new = 0, found_oldest = 0;
    for (int i = 0; i < CC_SLOTS; i++) {
        found_new += t.e[i].conn == C(CC_SLOTS);
        found_oldest += t.e[i].conn == C(0);
    }
    ck_assert_int_eq(found_new, 1);
    ck_assert_int_eq(found_oldest, 0);
    /* Its history starts over: one commit, no pace. */
    for (int i = 0; i < CC_SLOTS; i++)
        if (t.e[i].conn == C(CC_SLOTS))
            ck_assert_int_eq(t.e[i].gap_us, 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_a_lone_committer_never_waits, test_one_off_commits_never_wait,
        test_waits_for_a_connection_due_within_the_linger, test_a_late_connection_is_not_waited_for,
        test_connections_due_after_the_linger_are_not_waited_for,
        test_never_past_three_quarters_of_a_batched_pace, test_linger_zero_writes_at_once,
        test_ten_staggered_consumers_share_one_write, test_the_pace_is_smoothed,
        test_a_long_pause_forgets_the_pace,
        test_a_full_table_reuses_the_oldest_entry,
    };
    return unit_run("commit cadence", "cadence", tests, sizeof tests / sizeof *tests, setup,
                    NULL, 0);
}
