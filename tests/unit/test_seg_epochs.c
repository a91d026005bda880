/*
 * test_seg_epochs — the log's leader-epoch history (segments/epochs.c):
 * Kafka's leader-epoch-checkpoint text read and written byte for byte,
 * appends recording each batch's PartitionLeaderEpoch, truncation at both
 * ends trimming the history, Kafka's endOffsetFor answers, and a restart
 * relearning from the batches what the file did not hold yet.
 */
#include <check.h>
#include <fcntl.h>
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
    unit_tmpdir_make("seg_epochs");
}

static void teardown(void)
{
    unit_tmpdir_remove();
}

static seg_log *open_log(int64_t recovery_point)
{
    seg_open_opts o = { .dir = g_dir, .recovery_point = recovery_point };
    seg_config_default(&o.cfg);
    o.cfg.segment_bytes = 1000;          /* a few batches per segment */
    seg_log *log = NULL;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    return log;
}

/* One batch of n records written by leader epoch `epoch`; its base offset. */
static int64_t append_epoch(seg_log *log, int n, int32_t epoch)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_NONE);
    for (int i = 0; i < n; i++)
        kp_bb_add(&bb, 1000 + i, "k", 1, "value-value-value", 17, NULL, 0);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_bb_free(&bb);
    kp_batch_set_leader_epoch(b.data, epoch);    /* outside the CRC */
    int64_t base = -1;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
    kp_buf_free(&b);
    return base;
}

static void save(seg_log *log)
{
    seg_epoch_ckpt *c = seg_epoch_take_checkpoint(log);
    ck_assert_ptr_nonnull(c);
    ck_assert_int_eq(seg_epoch_write_checkpoint(c), 0);
    ck_assert_ptr_null(seg_epoch_take_checkpoint(log));   /* nothing new */
}

static void read_file(char *out, size_t cap)
{
    char path[256];
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", g_dir);
    int fd = open(path, O_RDONLY);
    ck_assert_int_ge(fd, 0);
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    ck_assert_int_ge(n, 0);
    out[n] = 0;
}

static void write_file(const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", g_dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void expect_end(seg_log *log, int32_t asked, int32_t epoch, int64_t end)
{
    int32_t e;
    int64_t o;
    ck_assert_int_eq(seg_epoch_end_offset(log, asked, &e, &o), 0);
    ck_assert_int_eq(e, epoch);
    ck_assert_int_eq(o, end);
}

START_TEST(test_checkpoint_text_parses_as_kafka_writes_it)
{
    seg_epoch_entry e[8];
    ck_assert_int_eq(seg_epoch_parse("0\n0\n", 4, e, 8), 0);
    const char *t = "0\n3\n0 0\n2 150\n5 150\n";
    ck_assert_int_eq(seg_epoch_parse(t, strlen(t), e, 8), 3);
    ck_assert_int_eq(e[1].epoch, 2);
    ck_assert_int_eq(e[1].start_offset, 150);
    ck_assert_int_eq(e[2].epoch, 5);
    const char *bad[] = {
        "", "0\n", "1\n0\n", "0\n2\n0 0\n",            /* version, count short */
        "0\n1\n0 0\n1 5\n",                            /* more lines than count */
        "0\n2\n3 0\n3 5\n", "0\n2\n3 10\n4 5\n",       /* not increasing */
        "0\n1\n-1 0\n", "0\n1\n0 -5\n", "0\n1\n0 0",   /* negative, no newline */
        "0\n1\n0 0 7\n", "0\n1\nx y\n", "0\n-1\n", "0\n1\n 0 0\n",
        "0\n1\n4294967296 0\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(seg_epoch_parse(bad[i], strlen(bad[i]), e, 8) == SEG_E_INVALID,
                      "accepted %zu", i);
    ck_assert_int_eq(seg_epoch_parse(t, strlen(t), e, 2), SEG_E_INVALID);  /* cap */
}
END_TEST

START_TEST(test_appends_record_epochs_and_file_is_kafkas_format)
{
    seg_log *log = open_log(0);
    ck_assert_int_eq(seg_epoch_latest(log), -1);
    expect_end(log, 0, -1, -1);                  /* empty history */
    append_epoch(log, 3, 0);                     /* [0, 3) */
    append_epoch(log, 2, 0);                     /* [3, 5) */
    ck_assert_int_eq(seg_epoch_assign(log, 2, 5), 1);   /* a new leader at the end */
    append_epoch(log, 4, 2);                     /* [5, 9) */
    append_epoch(log, 1, 4);                     /* [9, 10): epoch 3 led nothing here */
    append_epoch(log, 1, -1);                    /* an old client's: ignored */
    ck_assert_int_eq(seg_epoch_latest(log), 4);
    save(log);
    char text[256];
    read_file(text, sizeof text);
    ck_assert_str_eq(text, "0\n3\n0 0\n2 5\n4 9\n");
    /* Kafka's endOffsetFor cases. */
    expect_end(log, 4, 4, 11);                   /* current: the log end */
    expect_end(log, 2, 2, 9);
    expect_end(log, 3, 2, 9);                    /* unknown: the largest below */
    expect_end(log, 0, 0, 5);
    expect_end(log, 7, -1, -1);                  /* newer than any */
    expect_end(log, -1, -1, -1);
    seg_close(log);

    log = open_log(11);                          /* all flushed: from the file */
    seg_epoch_entry e[8];
    ck_assert_int_eq(seg_epoch_entries(log, e, 8), 3);
    ck_assert_int_eq(e[2].epoch, 4);
    ck_assert_int_eq(e[2].start_offset, 9);
    ck_assert_ptr_null(seg_epoch_take_checkpoint(log));  /* as on disk */
    seg_close(log);
}
END_TEST

START_TEST(test_truncation_trims_history_at_both_ends)
{
    seg_log *log = open_log(0);
    int64_t b1 = append_epoch(log, 5, 1);        /* [0, 5) */
    int64_t b3 = append_epoch(log, 5, 3);        /* [5, 10) */
    int64_t b6 = append_epoch(log, 5, 6);        /* [10, 15) */
    ck_assert_int_eq(b1, 0);
    ck_assert_int_eq(b3, 5);
    ck_assert_int_eq(b6, 10);
    ck_assert_int_eq(seg_epoch_assign(log, 7, 15), 1);
    /* The epoch assigned at the end has no batch: a truncation there
     * removes it too (the follower side of a leader that took no write). */
    ck_assert_int_eq(seg_truncate(log, 15), 0);
    ck_assert_int_eq(seg_epoch_latest(log), 6);
    ck_assert_int_eq(seg_truncate(log, 10), 0);  /* epoch 6 goes */
    ck_assert_int_eq(seg_epoch_latest(log), 3);
    expect_end(log, 3, 3, 10);
    append_epoch(log, 5, 8);                     /* the new leader's data */
    save(log);
    char text[256];
    read_file(text, sizeof text);
    ck_assert_str_eq(text, "0\n3\n1 0\n3 5\n8 10\n");
    /* Log start into epoch 3: epoch 1 goes, 3 now starts at the new start. */
    ck_assert_int_ge(seg_advance_log_start(log, 7, NULL), 0);
    save(log);
    read_file(text, sizeof text);
    ck_assert_str_eq(text, "0\n2\n3 7\n8 10\n");
    expect_end(log, 1, 1, 7);                    /* below all: the first kept */
    /* A full truncation starts the history afresh. */
    ck_assert_int_eq(seg_truncate(log, 2), 0);
    ck_assert_int_eq(seg_epoch_latest(log), -1);
    seg_close(log);
}
END_TEST

START_TEST(test_restart_relearns_epochs_the_file_missed)
{
    seg_log *log = open_log(0);
    append_epoch(log, 4, 0);                     /* [0, 4) */
    save(log);                                   /* "0 0" on disk */
    append_epoch(log, 4, 1);                     /* [4, 8): a crash before its save */
    append_epoch(log, 4, 2);                     /* [8, 12) */
    seg_close(log);
    log = open_log(6);                           /* recovery point inside epoch 1 */
    seg_epoch_entry e[8];
    ck_assert_int_eq(seg_epoch_entries(log, e, 8), 3);
    ck_assert_int_eq(e[1].epoch, 1);
    ck_assert_int_eq(e[1].start_offset, 4);
    ck_assert_int_eq(e[2].start_offset, 8);
    save(log);                                   /* changed since the file */
    seg_close(log);

    /* A file naming offsets the log no longer has (torn tail) is cut to it;
     * a damaged file is ignored and the history comes from the batches. */
    write_file("0\n4\n0 0\n1 4\n2 8\n9 40\n");
    log = open_log(12);
    ck_assert_int_eq(seg_epoch_latest(log), 2);
    seg_close(log);
    write_file("0\n2\n0 0\n");
    log = open_log(0);
    ck_assert_int_eq(seg_epoch_entries(log, e, 8), 3);
    seg_close(log);
}
END_TEST

START_TEST(test_snapshot_after_directory_rename_stays_with_it)
{
    seg_log *log = open_log(0);
    append_epoch(log, 1, 5);
    seg_epoch_ckpt *c = seg_epoch_take_checkpoint(log);
    ck_assert_ptr_nonnull(c);
    seg_close(log);
    /* The log's directory renamed (topic deletion) and a new one made at
     * the old name: the late snapshot lands in the renamed one. */
    char moved[128], path[256];
    snprintf(moved, sizeof moved, "%s.moved", g_dir);
    ck_assert_int_eq(rename(g_dir, moved), 0);
    ck_assert_int_eq(mkdir(g_dir, 0700), 0);
    ck_assert_int_eq(seg_epoch_write_checkpoint(c), 0);
    struct stat st;
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", g_dir);
    ck_assert_int_ne(stat(path, &st), 0);
    snprintf(path, sizeof path, "%s/leader-epoch-checkpoint", moved);
    ck_assert_int_eq(stat(path, &st), 0);
    nftw(moved, unit_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
END_TEST

/* A leader that took over and wrote nothing yet has an entry at its log
 * end, which open drops (epochs.c E3) and the takeover assigns again: the same
 * history as on disk is no new snapshot (each was an fdatasync and a
 * directory fsync on the loop, per partition, at every start), while a
 * real change still is. */
START_TEST(test_reopened_history_equal_to_file_is_not_rewritten)
{
    seg_log *log = open_log(0);
    append_epoch(log, 3, 0);                     /* [0, 3) */
    ck_assert_int_eq(seg_epoch_assign(log, 2, 3), 1);   /* leader 2 at the end */
    save(log);
    seg_close(log);

    log = open_log(3);
    ck_assert_int_eq(seg_epoch_latest(log), 0);  /* (2, 3) dropped at open */
    ck_assert_int_eq(seg_epoch_assign(log, 2, 3), 1);   /* the takeover again */
    ck_assert_ptr_null(seg_epoch_take_checkpoint(log));  /* as on disk */
    ck_assert_int_eq(seg_epoch_assign(log, 3, 3), 1);   /* a newer leader */
    save(log);
    char text[256];
    read_file(text, sizeof text);
    ck_assert_str_eq(text, "0\n2\n0 0\n3 3\n");
    seg_close(log);

    write_file("0\n1\n");                       /* damaged: unknown, so written */
    log = open_log(3);
    ck_assert_int_eq(seg_epoch_assign(log, 3, 3), 1);
    save(log);
    read_file(text, sizeof text);
    ck_assert_str_eq(text, "0\n2\n0 0\n3 3\n");
    seg_close(log);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_checkpoint_text_parses_as_kafka_writes_it,
        test_appends_record_epochs_and_file_is_kafkas_format,
        test_truncation_trims_history_at_both_ends,
        test_restart_relearns_epochs_the_file_missed,
        test_snapshot_after_directory_rename_stays_with_it,
        test_reopened_history_equal_to_file_is_not_rewritten,
    };
    return unit_run("seg_epochs", "epochs", tests, sizeof tests / sizeof *tests, setup,
                    teardown, 30);
}
