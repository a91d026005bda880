/*
 * test_seg_txnindex — the aborted-transaction index (segments/txnindex.c):
 * Kafka's 34-byte entries in <base>.txnindex beside each segment, the
 * overlap query a read_committed fetch asks, and the index following the
 * log through reopen, truncation, retention and a torn file.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/kp.h"
#include "segments/seg.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

static void setup(void)
{
    unit_tmpdir_make("seg_txnidx");
}

static void teardown(void)
{
    unit_tmpdir_remove();
}

static seg_log *open_log(void)
{
    seg_open_opts o = { .dir = g_dir };
    seg_config_default(&o.cfg);
    seg_log *log = NULL;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    return log;
}

/* n batches of one record each. */
static void append_n(seg_log *log, int n)
{
    for (int i = 0; i < n; i++) {
        kp_buf b;
        kp_buf_init(&b);
        kp_batch_builder bb;
        kp_bb_init(&bb, &b, KP_CODEC_NONE);
        kp_bb_add(&bb, 1700000000000LL, "k", 1, "v", 1, NULL, 0);
        ck_assert_int_gt(kp_bb_finish(&bb), 0);
        kp_bb_free(&bb);
        int64_t base;
        ck_assert_int_eq(seg_append(log, b.data, b.len, 1700000000000LL, &base), 0);
        kp_buf_free(&b);
    }
}

static int64_t file_size(int64_t base)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%020lld.txnindex", g_dir, (long long)base);
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static void add(seg_log *log, int64_t pid, int64_t first, int64_t last, int64_t lso)
{
    seg_aborted_txn e = { pid, first, last, lso };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
}

/* Segments 0, 5 and 10, an entry in each (markers 2, 7, 12). */
static seg_log *three_segments_three_entries(void)
{
    seg_log *log = open_log();
    append_n(log, 5);
    ck_assert_int_eq(seg_roll(log, 1700000000000LL), 0);
    append_n(log, 5);
    ck_assert_int_eq(seg_roll(log, 1700000000000LL), 0);
    append_n(log, 5);
    add(log, 1, 0, 2, 3);
    add(log, 1, 4, 7, 8);
    add(log, 1, 11, 12, 13);
    return log;
}

/* ---- tests ---------------------------------------------------------------------- */
START_TEST(test_entries_are_kafkas_34_bytes_and_survive_reopen)
{
    seg_log *log = open_log();
    append_n(log, 10);
    add(log, 7, 1, 3, 4);
    add(log, 9, 2, 6, 7);
    ck_assert_int_eq(file_size(0), 68);
    char path[128];
    snprintf(path, sizeof path, "%s/%020d.txnindex", g_dir, 0);
    FILE *f = fopen(path, "rb");
    uint8_t buf[34];
    ck_assert_int_eq(fread(buf, 1, sizeof buf, f), 34);
    fclose(f);
    static const uint8_t want[34] = {
        0, 0,                      0, 0, 0, 0, 0, 0, 0, 7,   /* Version, ProducerId */
        0, 0, 0, 0, 0, 0, 0, 1,    0, 0, 0, 0, 0, 0, 0, 3,   /* FirstOffset, LastOffset */
        0, 0, 0, 0, 0, 0, 0, 4 };                            /* LastStableOffset */
    ck_assert_mem_eq(buf, want, 34);
    /* not past the last entry, not outside the log: refused, nothing written */
    seg_aborted_txn bad = { 1, 5, 5, 6 }, beyond = { 1, 8, 10, 11 };
    ck_assert_int_eq(seg_txn_add(log, &bad), SEG_E_RANGE);
    ck_assert_int_eq(seg_txn_add(log, &beyond), SEG_E_RANGE);
    ck_assert_int_eq(file_size(0), 68);
    seg_close(log);

    log = open_log();
    ck_assert_int_eq(seg_txn_count(log), 2);
    seg_aborted_txn out[4];
    ck_assert_int_eq(seg_txn_collect(log, 0, 10, out, 4), 2);
    ck_assert_int_eq(out[0].producer_id, 7);
    ck_assert_int_eq(out[1].producer_id, 9);
    ck_assert_int_eq(out[1].first_offset, 2);
    ck_assert_int_eq(out[1].last_offset, 6);
    ck_assert_int_eq(out[1].last_stable_offset, 7);
    seg_close(log);
}
END_TEST

START_TEST(test_query_returns_overlapping_aborts_and_stops_at_a_complete_lso)
{
    seg_log *log = open_log();
    append_n(log, 20);
    add(log, 1, 1, 3, 2);          /* pid 2's transaction (from 2) still open */
    add(log, 2, 2, 6, 7);
    add(log, 3, 10, 12, 13);
    seg_aborted_txn out[4];
    /* [4, 10): pid 1 ended before 4; pid 2 overlaps; pid 3 starts at 10 */
    ck_assert_int_eq(seg_txn_collect(log, 4, 10, out, 4), 1);
    ck_assert_int_eq(out[0].producer_id, 2);
    /* [0, 2): pid 1 only; its LSO (2) reached 2, so nothing later is looked at */
    ck_assert_int_eq(seg_txn_collect(log, 0, 2, out, 4), 1);
    ck_assert_int_eq(out[0].producer_id, 1);
    /* [0, 3): pids 1 and 2 */
    ck_assert_int_eq(seg_txn_collect(log, 0, 3, out, 4), 2);
    ck_assert_int_eq(seg_txn_collect(log, 13, 20, out, 4), 0);
    /* counting only */
    ck_assert_int_eq(seg_txn_collect(log, 0, 20, NULL, 0), 3);
    seg_close(log);
}
END_TEST

START_TEST(test_truncation_cuts_and_retention_deletes_with_the_segments)
{
    seg_log *log = three_segments_three_entries();
    add(log, 2, 13, 14, 15);
    ck_assert_int_eq(file_size(0), 34);
    ck_assert_int_eq(file_size(5), 34);
    ck_assert_int_eq(file_size(10), 68);
    ck_assert_int_eq(seg_truncate(log, 13), 0);        /* the entry at 14 goes */
    ck_assert_int_eq(seg_txn_count(log), 3);
    ck_assert_int_eq(file_size(10), 34);
    ck_assert_int_eq(seg_truncate(log, 9), 0);         /* segment 10 goes with 12 */
    ck_assert_int_eq(seg_txn_count(log), 2);
    ck_assert_int_eq(file_size(10), -1);
    ck_assert_int_eq(seg_roll(log, 1700000000000LL), 0);
    append_n(log, 1);
    ck_assert_int_eq(seg_advance_log_start(log, 6, NULL), 1);   /* segment 0 */
    ck_assert_int_eq(seg_txn_count(log), 1);
    ck_assert_int_eq(file_size(0), -1);
    seg_aborted_txn out[2];
    ck_assert_int_eq(seg_txn_collect(log, 0, 100, out, 2), 1);
    ck_assert_int_eq(out[0].last_offset, 7);
    seg_close(log);
    log = open_log();
    ck_assert_int_eq(seg_txn_count(log), 1);
    seg_close(log);
}
END_TEST

START_TEST(test_torn_or_stale_entries_are_cut_at_open)
{
    seg_log *log = open_log();
    append_n(log, 10);
    add(log, 1, 0, 2, 3);
    add(log, 1, 4, 8, 9);
    seg_close(log);
    /* a torn entry at the end */
    char path[128];
    snprintf(path, sizeof path, "%s/%020d.txnindex", g_dir, 0);
    FILE *f = fopen(path, "ab");
    fwrite("\0\0\0\0\0\0\0\0\0\0", 1, 10, f);
    fclose(f);
    log = open_log();
    ck_assert_int_eq(seg_txn_count(log), 2);
    ck_assert_int_eq(file_size(0), 68);
    seg_close(log);
    /* an entry whose marker is past the log end (the log lost its tail in
     * a crash, the index did not) */
    static const uint8_t stale[34] = {
        0, 0, 0, 0, 0, 0, 0, 0, 0, 1,  0, 0, 0, 0, 0, 0, 0, 9,
        0, 0, 0, 0, 0, 0, 0, 50,       0, 0, 0, 0, 0, 0, 0, 51 };
    f = fopen(path, "ab");
    fwrite(stale, 1, sizeof stale, f);
    fclose(f);
    ck_assert_int_eq(file_size(0), 102);
    log = open_log();
    ck_assert_int_eq(seg_txn_count(log), 2);
    ck_assert_int_eq(file_size(0), 68);
    /* the log lost its tail: the entry whose marker went, goes */
    ck_assert_int_eq(seg_truncate(log, 5), 0);
    ck_assert_int_eq(seg_txn_count(log), 1);
    ck_assert_int_eq(file_size(0), 34);
    seg_txn_forget_from(log, 0);
    ck_assert_int_eq(seg_txn_count(log), 0);
    ck_assert_int_eq(file_size(0), -1);
    seg_close(log);
}
END_TEST

static void index_path(char *path, size_t cap, int64_t base)
{
    snprintf(path, cap, "%s/%020lld.txnindex", g_dir, (long long)base);
}

/* txnindex.c X3: a write that fails (the path is a directory: EISDIR)
 * keeps the entry in memory and the index dirty; seg_txn_durable says
 * false until the retry rewrote the file and seg_flush fdatasynced it. */
START_TEST(test_a_failed_write_is_not_durable_until_retried_and_flushed)
{
    seg_log *log = open_log();
    append_n(log, 10);
    ck_assert(seg_txn_durable(log));
    char path[128];
    index_path(path, sizeof path, 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);
    seg_aborted_txn e = { 7, 1, 3, 4 }, e2 = { 8, 4, 6, 7 };
    ck_assert_int_eq(seg_txn_add(log, &e), SEG_E_IO);
    ck_assert_int_eq(seg_txn_add(log, &e2), SEG_E_IO);   /* dirty: left to the retry */
    ck_assert_int_eq(seg_txn_count(log), 2);             /* in memory: fetches see it */
    ck_assert(!seg_txn_durable(log));
    ck_assert_int_eq(seg_flush(log, NULL), 0);
    ck_assert(!seg_txn_durable(log));                    /* a flush is not a rewrite */
    ck_assert_int_eq(seg_txn_retry(log), SEG_E_IO);      /* still a directory */
    ck_assert(!seg_txn_durable(log));
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(seg_txn_retry(log), 0);
    ck_assert_int_eq(file_size(0), 68);
    ck_assert(!seg_txn_durable(log));                    /* written, not synced */
    ck_assert_int_eq(seg_flush(log, NULL), 0);
    ck_assert(seg_txn_durable(log));
    add(log, 9, 7, 8, 9);                                /* appends sync again */
    ck_assert(!seg_txn_durable(log));
    ck_assert_int_eq(seg_flush(log, NULL), 0);
    ck_assert(seg_txn_durable(log));
    seg_close(log);
    log = open_log();
    ck_assert_int_eq(seg_txn_count(log), 3);
    ck_assert_int_eq(seg_txn_rebuild_from(log), -1);
    seg_close(log);
}
END_TEST

/* An unreadable .txnindex at open keeps the earlier segments' entries
 * and asks for a replay from its segment's base, instead of dropping
 * every entry and trusting the producer snapshot. */
START_TEST(test_an_unreadable_index_at_open_asks_a_replay_from_its_segment)
{
    seg_log *log = three_segments_three_entries();
    seg_close(log);
    char path[128];
    index_path(path, sizeof path, 5);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(mkdir(path, 0755), 0);            /* reads fail: EISDIR */
    log = open_log();
    ck_assert_int_eq(seg_txn_rebuild_from(log), 5);
    ck_assert_int_eq(seg_txn_count(log), 1);           /* segment 0's */
    /* the producer state replays from at or below 5 and re-adds */
    seg_txn_forget_from(log, 5);
    ck_assert_int_eq(seg_txn_add(log, &(seg_aborted_txn){ 1, 4, 7, 8 }), SEG_E_IO);
    ck_assert_int_eq(seg_txn_add(log, &(seg_aborted_txn){ 1, 11, 12, 13 }), SEG_E_IO);
    seg_txn_rebuilt(log);
    ck_assert_int_eq(seg_txn_rebuild_from(log), -1);
    ck_assert_int_eq(seg_txn_count(log), 3);
    ck_assert(!seg_txn_durable(log));
    ck_assert_int_eq(rmdir(path), 0);
    ck_assert_int_eq(seg_txn_retry(log), 0);
    ck_assert_int_eq(seg_flush(log, NULL), 0);
    ck_assert(seg_txn_durable(log));
    ck_assert_int_eq(file_size(5), 34);
    ck_assert_int_eq(file_size(10), 34);
    seg_close(log);
    log = open_log();
    ck_assert_int_eq(seg_txn_count(log), 3);
    seg_close(log);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_entries_are_kafkas_34_bytes_and_survive_reopen,
        test_query_returns_overlapping_aborts_and_stops_at_a_complete_lso,
        test_truncation_cuts_and_retention_deletes_with_the_segments,
        test_torn_or_stale_entries_are_cut_at_open,
        test_a_failed_write_is_not_durable_until_retried_and_flushed,
        test_an_unreadable_index_at_open_asks_a_replay_from_its_segment,
    };
    return unit_run("seg_txnindex", "txnindex", tests, sizeof tests / sizeof *tests,
                    setup, teardown, 60);
}
