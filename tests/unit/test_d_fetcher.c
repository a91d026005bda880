/*
 * test_d_fetcher — the replica fetcher's pure decisions (daemon/replication/repl_fetcher.c):
 * which partitions a broker follows, and how much of a leader's answer is
 * whole batches it may append.  The fetching itself runs against real
 * brokers in tests/integration/test_replication_follow.py.
 */
#include <check.h>
#include <string.h>

#include "daemon/replication/repl_fetcher.h"
#include "tests/unit/unit_run.h"

static bk_partition *const LOCAL = (bk_partition *)&LOCAL;   /* any non-NULL */

static bk_pview view(int32_t leader, bool local)
{
    bk_pview v;
    memset(&v, 0, sizeof v);
    v.leader = leader;
    v.local = local ? LOCAL : NULL;
    return v;
}

START_TEST(test_follows_only_local_replicas_led_by_another_live_broker)
{
    bk_pview v = view(2, true);
    ck_assert(repl_follow_wanted(&v, 1, true));
    ck_assert(!repl_follow_wanted(&v, 1, false));     /* leader not alive */
    ck_assert(!repl_follow_wanted(&v, 2, true));      /* this broker leads it */
    v = view(2, false);
    ck_assert(!repl_follow_wanted(&v, 1, true));      /* not hosted here */
    v = view(-1, true);
    ck_assert(!repl_follow_wanted(&v, 1, true));      /* no leader */
}
END_TEST

static kp_buf buf;                   /* each test's batches (fixture) */

static void setup(void)
{
    kp_buf_init(&buf);
}

static void teardown(void)
{
    kp_buf_free(&buf);
}

/* n batches of `records` records each into out; returns their total size. */
static size_t batches(kp_buf *out, int n, int records)
{
    for (int i = 0; i < n; i++) {
        kp_batch_builder bb;
        kp_bb_init(&bb, out, KP_CODEC_NONE);
        for (int j = 0; j < records; j++)
            kp_bb_add(&bb, 1000 + j, "k", 1, "value", 5, NULL, 0);
        ck_assert_int_gt(kp_bb_finish(&bb), 0);
        kp_bb_free(&bb);
    }
    return out->len;
}

START_TEST(test_whole_batches_are_kept_and_their_records_counted)
{
    size_t len = batches(&buf, 3, 4);
    int64_t records = -1;
    ck_assert_uint_eq(repl_fetch_whole_batches(buf.data, len, &records), len);
    ck_assert_int_eq(records, 12);
}
END_TEST

START_TEST(test_a_partial_last_batch_is_left_out)
{
    size_t two = batches(&buf, 2, 3);
    size_t len = batches(&buf, 1, 3);
    int64_t records = -1;
    for (size_t cut = two; cut < len; cut += 7) {
        ck_assert_uint_eq(repl_fetch_whole_batches(buf.data, cut, &records), two);
        ck_assert_int_eq(records, 6);
    }
    ck_assert_uint_eq(repl_fetch_whole_batches(buf.data, 10, &records), 0);
    ck_assert_int_eq(records, 0);
    ck_assert_uint_eq(repl_fetch_whole_batches(buf.data, 0, NULL), 0);
}
END_TEST

START_TEST(test_a_bad_length_ends_the_whole_batches)
{
    size_t one = batches(&buf, 1, 2);
    size_t len = batches(&buf, 1, 2);
    memset(buf.data + one + 8, 0, 4);                /* BatchLength 0 */
    ck_assert_uint_eq(repl_fetch_whole_batches(buf.data, len, NULL), one);
}
END_TEST

START_TEST(test_out_of_range_truncates_only_a_follower_ahead_of_its_leader)
{
    ck_assert_int_eq(repl_fetch_out_of_range(150, 110, 0), BK_OOR_TRUNCATE);
    ck_assert_int_eq(repl_fetch_out_of_range(5, 110, 20), BK_OOR_BELOW_START);
    ck_assert_int_eq(repl_fetch_out_of_range(110, 110, 20), BK_OOR_RETRY);
    ck_assert_int_eq(repl_fetch_out_of_range(20, 110, 20), BK_OOR_RETRY);
    ck_assert_int_eq(repl_fetch_out_of_range(150, -1, -1), BK_OOR_RETRY);   /* nothing known */
}
END_TEST

/* Batches of 4 records at the given base offsets into buf; their size. */
static size_t batches_at(const int64_t *bases, int n)
{
    size_t off = buf.len;
    for (int i = 0; i < n; i++) {
        size_t at = buf.len;
        batches(&buf, 1, 4);
        kp_batch_set_base_offset(buf.data + at, bases[i]);
    }
    return buf.len - off;
}

START_TEST(test_the_next_fetch_goes_ahead_only_below_the_leaders_high_watermark)
{
    size_t len = batches_at((const int64_t[]){ 10, 14, 18 }, 3);
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, 100), 22);
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, 23), 22);
    /* Reaching the high watermark: the leader must see the append done
     * (it may move the high watermark, or the ISR). */
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, 22), -1);
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, -1), -1);
    /* Starting before the log end: the append will refuse them. */
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 11, 100), -1);
    /* Past it (the leader compacted [9, 10)): the append takes them. */
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 9, 100), 22);
    /* Nothing to append: the log end. */
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, 0, 10, 5), 10);
}
END_TEST

START_TEST(test_the_next_fetch_goes_ahead_past_gaps_but_never_back)
{
    size_t len = batches_at((const int64_t[]){ 10, 30 }, 2);   /* compacted */
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, 100), 34);
    kp_buf_reset(&buf);
    len = batches_at((const int64_t[]){ 10, 12 }, 2);          /* overlaps */
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, 100), -1);
    kp_buf_reset(&buf);
    len = batches_at((const int64_t[]){ 10 }, 1);
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len - 1, 10, 100), -1);  /* cut */
}
END_TEST

START_TEST(test_a_leaders_offsets_or_session_lifetime_near_int64_max_do_not_overflow)
{
    /* The second batch ends past INT64_MAX: not ahead (no wrapped offset). */
    size_t len = batches_at((const int64_t[]){ 10, INT64_MAX - 1 }, 2);
    ck_assert_int_eq(repl_fetch_ahead_offset(buf.data, len, 10, INT64_MAX), -1);
    /* 85 % of the SessionLifetimeMs, in µs; a lifetime no clock reaches is never. */
    ck_assert_int_eq(repl_fetch_reauth_at(1000, 10000, 850), 1000 + 8500000);
    ck_assert_int_eq(repl_fetch_reauth_at(1000, 10000, 950), 1000 + 9500000);
    ck_assert_int_eq(repl_fetch_reauth_at(1000, 0, 900), 0);
    ck_assert_int_eq(repl_fetch_reauth_at(1000, -5, 900), 0);
    ck_assert_int_eq(repl_fetch_reauth_at(1000, INT64_MAX, 900), 0);
    ck_assert_int_eq(repl_fetch_reauth_at(1000, INT64_MAX / 100, 950), 0);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_follows_only_local_replicas_led_by_another_live_broker,
        test_whole_batches_are_kept_and_their_records_counted,
        test_a_partial_last_batch_is_left_out,
        test_a_bad_length_ends_the_whole_batches,
        test_out_of_range_truncates_only_a_follower_ahead_of_its_leader,
        test_the_next_fetch_goes_ahead_only_below_the_leaders_high_watermark,
        test_a_leaders_offsets_or_session_lifetime_near_int64_max_do_not_overflow,
        test_the_next_fetch_goes_ahead_past_gaps_but_never_back,
    };
    return unit_run("d_fetcher", "fetcher", tests, sizeof tests / sizeof *tests, setup, teardown, 0);
}
