/*
 * test_seg_log — the partition log's behaviour: offsets, reads as whole
 * batches, rolling, time lookups, truncation, retention, reopen, flush on
 * another thread, and the error state after a failed write.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/kp.h"
#include "segments/seg.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

/* ---- helpers ---------------------------------------------------------------- */
static void setup(void)
{
    unit_tmpdir_make("seg_log");
}

static void teardown(void)
{
    unit_tmpdir_remove();
}

static seg_config small_cfg(void)
{
    seg_config c;
    seg_config_default(&c);
    c.index_interval_bytes = 256;
    c.segment_index_bytes = 4096;
    return c;
}

static seg_log *open_log(const seg_config *c, int64_t lso, int64_t rp)
{
    seg_open_opts o = { .dir = g_dir, .cfg = *c, .log_start_offset = lso,
                        .recovery_point = rp };
    seg_log *log = NULL;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    return log;
}

/* Appends one batch of n records, timestamps ts, ts+1, …, values of vlen
 * bytes, to out; returns its size. */
static size_t add_batch(kp_buf *out, int n, int64_t ts, int vlen, int codec)
{
    kp_batch_builder bb;
    char val[16384];
    memset(val, 'v', sizeof val);
    kp_bb_init(&bb, out, codec);
    for (int i = 0; i < n; i++)
        kp_bb_add(&bb, ts + i, "k", 1, val, vlen, NULL, 0);
    int64_t sz = kp_bb_finish(&bb);
    kp_bb_free(&bb);
    ck_assert_int_gt(sz, 0);
    return (size_t)sz;
}

static int64_t append1(seg_log *log, int n, int64_t ts, int vlen, int64_t now)
{
    kp_buf b;
    kp_buf_init(&b);
    add_batch(&b, n, ts, vlen, KP_CODEC_NONE);
    int64_t base = -1;
    ck_assert_int_eq(seg_append(log, b.data, b.len, now, &base), 0);
    kp_buf_free(&b);
    return base;
}

static int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | p[i];
    return (int64_t)v;
}

static int32_t be32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                     (uint32_t)p[2] << 8 | p[3]);
}

/* Reads the range into memory and checks it is whole batches; returns the
 * offset after its last batch, the first batch's base in *first. */
static int64_t check_range(const seg_range *r, int64_t *first, uint8_t **copy)
{
    uint8_t *buf = malloc(r->len);
    ck_assert_int_eq(pread(r->fd, buf, r->len, r->pos), (ssize_t)r->len);
    size_t off = 0;
    int64_t end = -1;
    while (off < r->len) {
        kp_batch h;
        int64_t sz = kp_batch_check_stored(buf + off, r->len - off, &h);
        ck_assert_int_gt(sz, 0);
        if (off == 0)
            *first = h.BaseOffset;
        ck_assert(end < 0 || h.BaseOffset == end);
        end = h.BaseOffset + h.LastOffsetDelta + 1;
        off += (size_t)sz;
    }
    ck_assert_uint_eq(off, r->len);
    if (copy)
        *copy = buf;
    else
        free(buf);
    return end;
}

/* ---- tests -------------------------------------------------------------------- */
START_TEST(test_append_assigns_contiguous_offsets)
{
    seg_config c = small_cfg();
    seg_log *log = open_log(&c, 0, 0);
    ck_assert_int_eq(seg_log_end(log), 0);
    ck_assert_int_eq(append1(log, 1, 1000, 10, 0), 0);
    ck_assert_int_eq(append1(log, 3, 1000, 10, 0), 1);
    /* Several batches in one call: each BaseOffset is rewritten. */
    kp_buf b;
    kp_buf_init(&b);
    size_t s1 = add_batch(&b, 5, 1000, 10, KP_CODEC_NONE);
    add_batch(&b, 2, 1000, 10, KP_CODEC_NONE);
    int64_t base;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
    ck_assert_int_eq(base, 4);
    ck_assert_int_eq(be64(b.data), 4);
    ck_assert_int_eq(be64(b.data + s1), 9);
    ck_assert_int_eq(seg_log_end(log), 11);
    ck_assert_uint_eq(seg_size_bytes(log), seg_size_bytes(log));
    /* What is stored is what was given, offsets included. */
    seg_range r;
    ck_assert_int_eq(seg_read(log, 4, INT64_MAX, 1 << 20, &r), 0);
    ck_assert_uint_eq(r.len, b.len);
    uint8_t *copy;
    int64_t first;
    ck_assert_int_eq(check_range(&r, &first, &copy), 11);
    ck_assert_mem_eq(copy, b.data, b.len);
    free(copy);
    seg_range_release(&r);
    /* Framing errors are refused without touching the log. */
    ck_assert_int_eq(seg_append(log, b.data, b.len - 1, 0, &base), SEG_E_INVALID);
    ck_assert_int_eq(seg_log_end(log), 11);
    /* A follower's append may not start before the log end (gaps past it:
     * test_assigned_append_may_start_past_the_log_end). */
    kp_buf_reset(&b);
    add_batch(&b, 2, 1000, 10, KP_CODEC_NONE);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), SEG_E_INVALID);
    kp_batch_set_base_offset(b.data, 11);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), 0);
    ck_assert_int_eq(seg_log_end(log), 13);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

static seg_log *log_of_many(int nbatches, seg_config *c)
{
    seg_log *log = open_log(c, 0, 0);
    for (int i = 0; i < nbatches; i++)
        append1(log, 1 + i % 4, 1000 + i * 10, 20 + (i * 37) % 300, 0);
    return log;
}

START_TEST(test_read_returns_whole_batches)
{
    seg_config c = small_cfg();
    seg_log *log = log_of_many(200, &c);
    int64_t end = seg_log_end(log);
    size_t maxes[] = { 1, 100, 700, 3000, 100000 };
    for (int64_t o = 0; o < end; o++)
        for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++) {
            seg_range r;
            ck_assert_int_eq(seg_read(log, o, INT64_MAX, maxes[m], &r), 0);
            ck_assert_uint_gt(r.len, 0);
            int64_t first, last = check_range(&r, &first, NULL);
            ck_assert_int_le(first, o);
            ck_assert_int_gt(last, o);
            if (r.len > maxes[m]) {     /* only ever one oversized batch */
                int64_t f2;
                uint8_t hdr[12];
                ck_assert_int_eq(pread(r.fd, hdr, 12, r.pos), 12);
                ck_assert_uint_eq((size_t)be32(hdr + 8) + 12, r.len);
                (void)f2;
            }
            seg_range_release(&r);
        }
    seg_range r;
    ck_assert_int_eq(seg_read(log, end, INT64_MAX, 100, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_int_eq(seg_read(log, end + 1, INT64_MAX, 100, &r), KP_OFFSET_OUT_OF_RANGE);
    ck_assert_int_eq(seg_read(log, -1, INT64_MAX, 100, &r), KP_OFFSET_OUT_OF_RANGE);
    seg_close(log);
}
END_TEST

START_TEST(test_read_at_least_one_batch_when_max_bytes_small)
{
    seg_config c = small_cfg();
    seg_log *log = open_log(&c, 0, 0);
    append1(log, 3, 1000, 5000, 0);
    append1(log, 3, 1000, 5000, 0);
    seg_range r;
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 10, &r), 0);
    int64_t first;
    ck_assert_int_eq(check_range(&r, &first, NULL), 3);
    ck_assert_uint_gt(r.len, 15000);
    seg_range_release(&r);
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 0, &r), 0);
    ck_assert_int_eq(check_range(&r, &first, NULL), 3);
    seg_range_release(&r);
    seg_close(log);
}
END_TEST

START_TEST(test_read_mid_batch_offset_starts_at_batch)
{
    seg_config c = small_cfg();
    seg_log *log = open_log(&c, 0, 0);
    append1(log, 5, 1000, 10, 0);   /* 0..4 */
    append1(log, 5, 1000, 10, 0);   /* 5..9 */
    seg_range r;
    int64_t first;
    ck_assert_int_eq(seg_read(log, 7, INT64_MAX, 1 << 20, &r), 0);
    ck_assert_int_eq(check_range(&r, &first, NULL), 10);
    ck_assert_int_eq(first, 5);
    seg_range_release(&r);
    ck_assert_int_eq(seg_read(log, 4, INT64_MAX, 1 << 20, &r), 0);
    check_range(&r, &first, NULL);
    ck_assert_int_eq(first, 0);
    seg_range_release(&r);
    seg_close(log);
}
END_TEST

START_TEST(test_roll_by_segment_bytes)
{
    seg_config c = small_cfg();
    c.segment_bytes = 4096;
    seg_log *log = log_of_many(100, &c);
    ck_assert_int_gt(seg_segment_count(log), 5);
    /* Every segment file stays within segment.bytes. */
    for (int64_t o = 0; o < seg_log_end(log);) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, o, INT64_MAX, 1 << 20, &r), 0);
        struct stat st;
        fstat(r.fd, &st);
        ck_assert_int_le(st.st_size, 4096);
        int64_t first;
        int64_t next = check_range(&r, &first, NULL);
        ck_assert_int_eq(first, o);     /* ranges chain with no hole */
        ck_assert_int_eq(r.pos + (off_t)r.len, st.st_size);
        o = next;
        seg_range_release(&r);
    }
    /* Too big for any segment. */
    kp_buf b;
    kp_buf_init(&b);
    add_batch(&b, 1, 0, 5000, KP_CODEC_NONE);
    int64_t base;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), SEG_E_TOOBIG);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

START_TEST(test_roll_by_segment_ms)
{
    seg_config c = small_cfg();
    c.segment_ms = 1000;
    seg_log *log = open_log(&c, 0, 0);
    /* Kafka's clock: batch timestamps, from the segment's first batch;
     * the wall clock (last argument) plays no part while batches have
     * timestamps. */
    append1(log, 1, 10000, 10, 0);
    append1(log, 1, 10500, 10, 999999);
    append1(log, 1, 11000, 10, 0);          /* 1000 is not beyond 1000 */
    ck_assert_int_eq(seg_segment_count(log), 1);
    append1(log, 1, 11001, 10, 0);
    ck_assert_int_eq(seg_segment_count(log), 2);
    append1(log, 1, 12001, 10, 0);          /* the new segment's clock */
    ck_assert_int_eq(seg_segment_count(log), 2);
    /* An explicit roll, and a no-op one on the empty active segment. */
    ck_assert_int_eq(seg_roll(log, 12000), 0);
    ck_assert_int_eq(seg_roll(log, 12000), 0);
    ck_assert_int_eq(seg_segment_count(log), 3);
    seg_close(log);
}
END_TEST

/* The restart case: batches stamped long ago, a log reopened much later.
 * Neither the open nor the next append with the same clock rolls it. */
START_TEST(test_reopen_does_not_roll_old_segment)
{
    seg_config c = small_cfg();
    c.segment_ms = 1000;
    seg_log *log = open_log(&c, 0, 0);
    append1(log, 1, 1700000000000LL, 10, 1700000000000LL);
    seg_close(log);
    log = open_log(&c, 0, 0);
    ck_assert_int_eq(seg_segment_count(log), 1);
    int64_t wall = 1700000000000LL + 365LL * 24 * 3600 * 1000;
    append1(log, 1, 1700000000500LL, 10, wall);
    ck_assert_int_eq(seg_segment_count(log), 1);
    /* The first batch's timestamp, read back at open, still counts. */
    append1(log, 1, 1700000001001LL, 10, wall);
    ck_assert_int_eq(seg_segment_count(log), 2);
    seg_close(log);
}
END_TEST

START_TEST(test_roll_by_full_index)
{
    seg_config c = small_cfg();
    c.index_interval_bytes = 0;         /* an entry for every batch */
    c.segment_index_bytes = 120;        /* 10 time entries */
    seg_log *log = log_of_many(60, &c);
    ck_assert_int_ge(seg_segment_count(log), 5);
    seg_close(log);
}
END_TEST

START_TEST(test_offset_for_time)
{
    seg_config c = small_cfg();
    c.segment_bytes = 8192;
    seg_log *log = open_log(&c, 0, 0);
    /* Batches of 10 records, ts = 10 * offset; every other one compressed. */
    int codecs[] = { KP_CODEC_NONE, KP_CODEC_ZSTD, KP_CODEC_GZIP };
    for (int i = 0; i < 60; i++) {
        kp_buf b;
        kp_buf_init(&b);
        kp_batch_builder bb;
        kp_bb_init(&bb, &b, codecs[i % 3]);
        for (int j = 0; j < 10; j++)
            kp_bb_add(&bb, 10 * (i * 10 + j), "k", 1, "value-value", 11, NULL, 0);
        ck_assert_int_gt(kp_bb_finish(&bb), 0);
        kp_bb_free(&bb);
        int64_t base;
        ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
        kp_buf_free(&b);
    }
    ck_assert_int_gt(seg_segment_count(log), 1);
    ck_assert_int_eq(seg_max_timestamp(log), 5990);
    for (int pass = 0; pass < 2; pass++) {
        for (int64_t ts = 0; ts <= 5990; ts += 7) {
            int64_t off;
            ck_assert_int_eq(seg_offset_for_time(log, ts, &off, NULL), 0);
            ck_assert_int_eq(off, (ts + 9) / 10);
        }
        int64_t off;
        ck_assert_int_eq(seg_offset_for_time(log, 6000, &off, NULL), 0);
        ck_assert_int_eq(off, 600);
        ck_assert_int_eq(seg_offset_for_time(log, -5, &off, NULL), 0);
        ck_assert_int_eq(off, 0);
        seg_close(log);
        log = open_log(&c, 0, 600);     /* the same after a reopen */
    }
    /* Never below the log start. */
    ck_assert_int_ge(seg_advance_log_start(log, 25, NULL), 0);
    int64_t off;
    ck_assert_int_eq(seg_offset_for_time(log, 0, &off, NULL), 0);
    ck_assert_int_eq(off, 25);
    seg_close(log);
}
END_TEST

/* Descriptors this process holds on files of g_dir ending in ext. */
static int open_fds_ending(const char *ext)
{
    DIR *d = opendir("/proc/self/fd");
    ck_assert_ptr_nonnull(d);
    int n = 0;
    size_t dl = strlen(g_dir), el = strlen(ext);
    for (struct dirent *e; (e = readdir(d));) {
        char link[300], target[4096];
        snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(link, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = 0;
        if ((size_t)len > dl + el && !strncmp(target, g_dir, dl) && target[dl] == '/' &&
            !strcmp(target + len - el, ext))
            n++;
    }
    closedir(d);
    return n;
}

/* Closed segments hold their .log fd only (index.c I5); a truncation into
 * one reopens its indexes, whose new entries are then flushed by name and
 * trusted by the next open: every offset is found again. */
START_TEST(test_sealed_segments_hold_no_index_fds_and_reopen_them)
{
    seg_config c = small_cfg();
    c.segment_bytes = 2048;
    c.index_interval_bytes = 0;             /* an entry for every batch */
    seg_log *log = open_log(&c, 0, 0);
    for (int i = 0; i < 40; i++)
        append1(log, 3, 1000 + i, 100, 0);      /* batches at 0, 3, 6, … */
    int segs = seg_segment_count(log);
    ck_assert_int_gt(segs, 3);
    ck_assert_int_eq(open_fds_ending(".log"), segs);
    ck_assert_int_eq(open_fds_ending(".index"), 1);
    ck_assert_int_eq(open_fds_ending(".timeindex"), 1);
    /* Into the second segment, sealed: it is active again, with fds. */
    ck_assert_int_eq(seg_truncate(log, 21), 0);
    ck_assert_int_lt(seg_segment_count(log), segs);
    for (int i = 0; i < 30; i++)
        append1(log, 3, 2000 + i, 100, 0);
    int64_t end = seg_log_end(log), flushed = -1;
    ck_assert_int_eq(end, 21 + 90);
    ck_assert_int_eq(seg_flush(log, &flushed), 0);
    ck_assert_int_eq(flushed, end);
    segs = seg_segment_count(log);
    ck_assert_int_eq(open_fds_ending(".index"), 1);
    seg_close(log);
    ck_assert_int_eq(open_fds_ending(".log"), 0);

    log = open_log(&c, 0, end);             /* everything trusted */
    ck_assert_int_eq(seg_segment_count(log), segs);
    ck_assert_int_eq(open_fds_ending(".log"), segs);
    ck_assert_int_eq(open_fds_ending(".index"), 1);
    for (int64_t o = 0; o < end; o++) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, o, INT64_MAX, 1, &r), 0);
        int64_t first;
        int64_t next = check_range(&r, &first, NULL);
        ck_assert_int_le(first, o);
        ck_assert_int_gt(next, o);
        seg_range_release(&r);
    }
    int64_t off, ts;
    ck_assert_int_eq(seg_offset_for_time(log, 2010, &off, &ts), 0);
    ck_assert_int_eq(off, 21 + 8 * 3 + 2);     /* batch 8: 2008, 2009, 2010 */
    ck_assert_int_eq(ts, 2010);
    seg_close(log);
}
END_TEST

START_TEST(test_truncate)
{
    seg_config c = small_cfg();
    c.segment_bytes = 2048;
    seg_log *log = open_log(&c, 0, 0);
    for (int i = 0; i < 40; i++)
        append1(log, 3, 1000 + i, 100, 0);      /* batches at 0, 3, 6, … */
    ck_assert_int_eq(seg_log_end(log), 120);
    int segs = seg_segment_count(log);
    ck_assert_int_gt(segs, 3);
    /* At a batch boundary. */
    ck_assert_int_eq(seg_truncate(log, 90), 0);
    ck_assert_int_eq(seg_log_end(log), 90);
    ck_assert_int_lt(seg_segment_count(log), segs);
    /* Inside a batch: the whole batch goes. */
    ck_assert_int_eq(seg_truncate(log, 61), 0);
    ck_assert_int_eq(seg_log_end(log), 60);
    seg_range r;
    ck_assert_int_eq(seg_read(log, 61, INT64_MAX, 100, &r), KP_OFFSET_OUT_OF_RANGE);
    ck_assert_int_eq(seg_read(log, 59, INT64_MAX, 1 << 20, &r), 0);
    int64_t first;
    ck_assert_int_eq(check_range(&r, &first, NULL), 60);
    seg_range_release(&r);
    ck_assert_int_le(seg_recovery_point(log), 60);
    ck_assert_int_eq(seg_max_timestamp(log), 1000 + 19 + 2);
    /* Appends go on from there, and survive a reopen. */
    ck_assert_int_eq(append1(log, 3, 5000, 100, 0), 60);
    seg_close(log);
    log = open_log(&c, 0, 0);
    ck_assert_int_eq(seg_log_end(log), 63);
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 1 << 20, &r), 0);
    ck_assert_int_eq(check_range(&r, &first, NULL) > 0, 1);
    seg_range_release(&r);
    /* Below the log start: the log restarts empty there. */
    ck_assert_int_eq(seg_advance_log_start(log, 30, NULL) >= 0, 1);
    ck_assert_int_eq(seg_truncate(log, 10), 0);
    ck_assert_int_eq(seg_log_end(log), 10);
    ck_assert_int_eq(seg_log_start(log), 10);
    ck_assert_int_eq(seg_segment_count(log), 1);
    ck_assert_int_eq(append1(log, 1, 0, 10, 0), 10);
    /* Above the log end (a mirror behind its source's log start): empty
     * there, appends go on from there, and it survives a reopen. */
    ck_assert_int_eq(seg_restart_at(log, 500), 0);
    ck_assert_int_eq(seg_log_start(log), 500);
    ck_assert_int_eq(seg_log_end(log), 500);
    ck_assert_int_eq(seg_segment_count(log), 1);
    ck_assert_int_eq(append1(log, 2, 0, 10, 0), 500);
    ck_assert_int_eq(seg_restart_at(log, -1), SEG_E_RANGE);
    seg_close(log);
    log = open_log(&c, 0, 0);
    ck_assert_int_eq(seg_log_start(log), 500);
    ck_assert_int_eq(seg_log_end(log), 502);
    seg_close(log);
}
END_TEST

/* A flush with nothing new to sync returns at once (log.c L5) but never
 * holds the recovery point back: after a reopen at its end, an append,
 * a truncation, each is synced by the next flush. */
START_TEST(test_flush_of_an_unchanged_log_keeps_the_recovery_point)
{
    seg_config c = small_cfg();
    seg_log *log = open_log(&c, 0, 0);
    for (int i = 0; i < 5; i++)
        append1(log, 3, 1000 + i, 100, 0);
    int64_t to = -1;
    ck_assert_int_eq(seg_flush(log, &to), 0);
    ck_assert_int_eq(to, 15);
    ck_assert_int_eq(seg_flush(log, &to), 0);   /* unchanged */
    ck_assert_int_eq(to, 15);
    seg_close(log);
    log = open_log(&c, 0, 15);                  /* a clean stop's recovery point */
    ck_assert_int_eq(seg_flush(log, &to), 0);
    ck_assert_int_eq(to, 15);
    append1(log, 3, 2000, 100, 0);
    ck_assert_int_eq(seg_recovery_point(log), 15);
    ck_assert_int_eq(seg_flush(log, &to), 0);
    ck_assert_int_eq(to, 18);
    /* Cut back and written again to the same end: synced again. */
    ck_assert_int_eq(seg_truncate(log, 12), 0);
    ck_assert_int_le(seg_recovery_point(log), 12);
    append1(log, 3, 3000, 100, 0);
    append1(log, 3, 3001, 100, 0);
    ck_assert_int_eq(seg_log_end(log), 18);
    ck_assert_int_eq(seg_flush(log, &to), 0);
    ck_assert_int_eq(to, 18);
    ck_assert_int_eq(seg_recovery_point(log), 18);
    seg_close(log);
    /* Opened with an older recovery point: the first flush syncs. */
    log = open_log(&c, 0, 3);
    ck_assert_int_eq(seg_recovery_point(log), 3);
    ck_assert_int_eq(seg_flush(log, &to), 0);
    ck_assert_int_eq(to, 18);
    seg_close(log);
}
END_TEST

START_TEST(test_advance_log_start_deletes_segments)
{
    seg_config c = small_cfg();
    c.segment_bytes = 2048;
    seg_log *log = log_of_many(100, &c);
    int segs = seg_segment_count(log);
    uint64_t size = seg_size_bytes(log);
    int64_t end = seg_log_end(log);
    seg_range keep;                 /* a reader holding the first segment */
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 100, &keep), 0);
    uint64_t freed = 0;
    int n = seg_advance_log_start(log, end / 2, &freed);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(seg_segment_count(log), segs - n);
    ck_assert_uint_eq(seg_size_bytes(log), size - freed);
    ck_assert_int_eq(seg_log_start(log), end / 2);
    seg_range r;
    ck_assert_int_eq(seg_read(log, end / 2 - 1, INT64_MAX, 100, &r), KP_OFFSET_OUT_OF_RANGE);
    ck_assert_int_eq(seg_read(log, end / 2, INT64_MAX, 100, &r), 0);
    int64_t first;
    ck_assert_int_le(check_range(&r, &first, NULL) > end / 2, 1);
    seg_range_release(&r);
    /* The deleted segment's range still reads. */
    int64_t f0;
    ck_assert_int_gt(check_range(&keep, &f0, NULL), 0);
    ck_assert_int_eq(f0, 0);
    seg_range_release(&keep);
    ck_assert_int_eq(seg_advance_log_start(log, end + 1, NULL), SEG_E_RANGE);
    /* All the way: the active segment stays. */
    ck_assert_int_ge(seg_advance_log_start(log, end, NULL), 0);
    ck_assert_int_eq(seg_segment_count(log), 1);
    ck_assert_int_eq(seg_log_start(log), end);
    seg_close(log);
    log = open_log(&c, end, end);
    ck_assert_int_eq(seg_log_start(log), end);
    ck_assert_int_eq(seg_log_end(log), end);
    seg_close(log);
}
END_TEST

START_TEST(test_delete_old_by_time_and_size)
{
    seg_config c = small_cfg();
    c.segment_bytes = 2048;
    seg_log *log = open_log(&c, 0, 0);
    for (int i = 0; i < 60; i++)
        append1(log, 1, 1000 * i, 300, 0);      /* ts 0 … 59000 */
    int segs = seg_segment_count(log);
    ck_assert_int_gt(segs, 6);
    uint64_t freed;
    int n = seg_delete_old(log, 10000, -1, &freed);
    ck_assert_int_gt(n, 0);
    int64_t off;
    ck_assert_int_eq(seg_offset_for_time(log, 0, &off, NULL), 0);
    ck_assert_int_eq(off, seg_log_start(log));
    ck_assert_int_le(seg_log_start(log), 10);   /* nothing >= 10000 went */
    ck_assert_int_gt(seg_log_start(log), 0);
    /* Size: oldest first until the log fits. */
    n = seg_delete_old(log, INT64_MIN, 5000, &freed);
    ck_assert_int_gt(n, 0);
    ck_assert_int_le(seg_size_bytes(log), 5000);
    ck_assert_int_gt(seg_segment_count(log), 1);
    /* Everything is old, but the active segment stays. */
    n = seg_delete_old(log, INT64_MAX, 0, &freed);
    ck_assert_int_eq(seg_segment_count(log), 1);
    ck_assert_int_eq(seg_log_end(log), 60);
    seg_close(log);
}
END_TEST

/* Every batch, as bytes, read through seg_read from log start to end. */
static size_t read_everything(seg_log *log, uint8_t **out)
{
    size_t cap = 1 << 16, len = 0;
    uint8_t *all = malloc(cap);
    for (int64_t o = seg_log_start(log); o < seg_log_end(log);) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, o, INT64_MAX, 5000, &r), 0);
        ck_assert_uint_gt(r.len, 0);
        uint8_t *copy;
        int64_t first;
        o = check_range(&r, &first, &copy);
        if (len + r.len > cap)
            all = realloc(all, cap = 2 * (len + r.len));
        memcpy(all + len, copy, r.len);
        len += r.len;
        free(copy);
        seg_range_release(&r);
    }
    *out = all;
    return len;
}

START_TEST(test_reopen_keeps_everything)
{
    seg_config c = small_cfg();
    c.segment_bytes = 4096;
    seg_log *log = log_of_many(150, &c);
    uint8_t *before, *after;
    size_t n = read_everything(log, &before);
    int64_t end = seg_log_end(log), maxts = seg_max_timestamp(log);
    int segs = seg_segment_count(log);
    seg_close(log);
    int64_t rps[] = { 0, end / 2, end };
    for (int i = 0; i < 3; i++) {
        log = open_log(&c, 0, rps[i]);
        ck_assert_int_eq(seg_log_end(log), end);
        ck_assert_int_eq(seg_segment_count(log), segs);
        ck_assert_int_eq(seg_max_timestamp(log), maxts);
        ck_assert_int_eq(seg_recovery_point(log), rps[i]);
        ck_assert_uint_eq(read_everything(log, &after), n);
        ck_assert_mem_eq(before, after, n);
        free(after);
        /* And the log accepts appends where it left off. */
        if (i == 2)
            ck_assert_int_eq(append1(log, 1, 0, 10, 0), end);
        seg_close(log);
    }
    free(before);
}
END_TEST

/* ---- a follower's first batch past its log end (log.c L7) ------------------- */
/* Base offsets of the batches a read from `from` onwards returns, one
 * seg_read per range; n at most cap.  Each range holds whole valid batches. */
static int read_bases(seg_log *log, int64_t from, int64_t *bases, int cap)
{
    int n = 0;
    for (int64_t o = from; o < seg_log_end(log);) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, o, INT64_MAX, 1 << 20, &r), 0);
        ck_assert_uint_gt(r.len, 0);
        uint8_t *buf = malloc(r.len);
        ck_assert_int_eq(pread(r.fd, buf, r.len, r.pos), (ssize_t)r.len);
        for (size_t off = 0; off < r.len;) {
            kp_batch h;
            int64_t sz = kp_batch_check_stored(buf + off, r.len - off, &h);
            ck_assert_int_gt(sz, 0);
            ck_assert_int_lt(n, cap);
            bases[n++] = h.BaseOffset;
            o = h.BaseOffset + h.LastOffsetDelta + 1;
            off += (size_t)sz;
        }
        ck_assert_int_eq(o, r.next);
        free(buf);
        seg_range_release(&r);
    }
    return n;
}

/* One batch of n records at BaseOffset base, as a leader would send it. */
static void add_batch_at(kp_buf *out, int64_t base, int n)
{
    size_t at = out->len;
    add_batch(out, n, 1000 + base, 10, KP_CODEC_NONE);
    kp_batch_set_base_offset(out->data + at, base);
}

START_TEST(test_assigned_append_may_start_past_the_log_end)
{
    seg_config c = small_cfg();
    seg_log *log = open_log(&c, 0, 0);
    ck_assert_int_eq(append1(log, 4, 1000, 10, 0), 0);        /* [0, 4) */
    /* The leader compacted [4, 9): its answer starts at 9, and skips
     * [11, 20) inside the same append too. */
    kp_buf b;
    kp_buf_init(&b);
    add_batch_at(&b, 9, 2);
    add_batch_at(&b, 20, 3);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), 0);
    ck_assert_int_eq(seg_log_end(log), 23);
    ck_assert_int_eq(seg_log_start(log), 0);
    /* Before the log end is still refused, and leaves the log as it was:
     * a batch at 22 (inside the last one) and one at 0. */
    kp_buf_reset(&b);
    add_batch_at(&b, 22, 1);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), SEG_E_INVALID);
    kp_buf_reset(&b);
    add_batch_at(&b, 0, 1);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), SEG_E_INVALID);
    /* Going backwards after a valid first batch is refused whole. */
    kp_buf_reset(&b);
    add_batch_at(&b, 30, 2);
    add_batch_at(&b, 31, 1);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), SEG_E_INVALID);
    ck_assert_int_eq(seg_log_end(log), 23);
    /* A fetch at an offset in a gap gets the next batch; from the start,
     * every batch in order. */
    int64_t bases[8];
    ck_assert_int_eq(read_bases(log, 5, bases, 8), 2);
    ck_assert_int_eq(bases[0], 9);
    ck_assert_int_eq(bases[1], 20);
    ck_assert_int_eq(read_bases(log, 12, bases, 8), 1);
    ck_assert_int_eq(bases[0], 20);
    ck_assert_int_eq(read_bases(log, 0, bases, 8), 3);
    int64_t want[] = { 0, 9, 20 };
    ck_assert_mem_eq(bases, want, sizeof want);

    /* A gapped first batch that rolls: the new segment starts at its
     * BaseOffset, as Kafka's roll at max(expectedNextOffset, logEnd). */
    c.segment_bytes = seg_size_bytes(log) + 1;
    seg_set_config(log, &c);
    kp_buf_reset(&b);
    add_batch_at(&b, 40, 2);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), 0);
    ck_assert_int_eq(seg_segment_count(log), 2);
    char path[4096];
    snprintf(path, sizeof path, "%s/%020d.log", g_dir, 40);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(read_bases(log, 25, bases, 8), 1);        /* in the gap between segments */
    ck_assert_int_eq(bases[0], 40);
    ck_assert_int_eq(seg_log_end(log), 42);
    seg_close(log);

    /* Recovery from nothing trusted finds the same batches and log end,
     * and the log goes on at its end. */
    log = open_log(&c, 0, 0);
    ck_assert_int_eq(seg_log_end(log), 42);
    ck_assert_int_eq(read_bases(log, 0, bases, 8), 4);
    int64_t want2[] = { 0, 9, 20, 40 };
    ck_assert_mem_eq(bases, want2, sizeof want2);
    ck_assert_int_eq(read_bases(log, 23, bases, 8), 1);
    ck_assert_int_eq(bases[0], 40);
    kp_buf_reset(&b);
    add_batch_at(&b, 41, 1);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), SEG_E_INVALID);
    ck_assert_int_eq(append1(log, 1, 0, 10, 0), 42);
    seg_close(log);

    /* A gap wider than a segment's INT32 relative offsets, onto an empty
     * active segment: it is replaced by one at the batch. */
    seg_remove_dir(g_dir);
    mkdir(g_dir, 0700);
    log = open_log(&c, 0, 0);
    int64_t far = (int64_t)INT32_MAX + 100;
    kp_buf_reset(&b);
    add_batch_at(&b, far, 2);
    ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), 0);
    ck_assert_int_eq(seg_log_end(log), far + 2);
    ck_assert_int_eq(seg_segment_count(log), 1);
    ck_assert_int_eq(seg_log_start(log), 0);
    /* Enough batches for index entries: a read below the segment's base
     * still starts at its first batch. */
    int64_t many[32];
    for (int i = 1; i < 32; i++) {
        kp_buf_reset(&b);
        add_batch_at(&b, far + 2 * i, 2);
        ck_assert_int_eq(seg_append_assigned(log, b.data, b.len, 0), 0);
    }
    ck_assert_int_eq(read_bases(log, 5, many, 32), 32);
    ck_assert_int_eq(many[0], far);
    ck_assert_int_eq(many[31], far + 62);
    ck_assert_int_eq(seg_log_end(log), far + 64);
    seg_close(log);
    /* Reopened, the log starts at its first segment (seg_open, as Kafka's
     * max(checkpoint, first segment's base)): nothing lies below it. */
    log = open_log(&c, 0, 0);
    ck_assert_int_eq(seg_log_end(log), far + 64);
    ck_assert_int_eq(seg_log_start(log), far);
    ck_assert_int_eq(read_bases(log, far, many, 32), 32);
    ck_assert_int_eq(many[0], far);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

/* ---- index entries held in memory ------------------------------------------------ */
/* One-record batches at offsets [from, to), timestamp ts[o]. */
static void append_ts(seg_log *log, int64_t from, int64_t to, const int64_t *ts)
{
    for (int64_t o = from; o < to; o++)
        ck_assert_int_eq(append1(log, 1, ts[o], 10, 0), o);
}

/* Every offset reads back as its own batch, and every time lookup gives
 * the first offset whose timestamp reaches it (ts[] never decreases). */
static void expect_lookups(seg_log *log, int64_t end, const int64_t *ts)
{
    ck_assert_int_eq(seg_log_end(log), end);
    for (int64_t o = 0; o < end; o++) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, o, INT64_MAX, 1, &r), 0);
        int64_t first;
        ck_assert_int_eq(check_range(&r, &first, NULL), o + 1);
        ck_assert_int_eq(first, o);
        seg_range_release(&r);
    }
    for (int64_t t = ts[0] - 1; t <= ts[end - 1] + 1; t += 7) {
        int64_t want = 0, got;
        while (want < end && ts[want] < t)
            want++;
        ck_assert_int_eq(seg_offset_for_time(log, t, &got, NULL), 0);
        ck_assert_int_eq(got, want);
    }
}

START_TEST(test_index_tail_through_spill_roll_truncate_reopen)
{
    /* Enough entries that both indexes spill their in-memory tail to the
     * file more than once (index.c), a run of equal timestamps so the
     * time index replaces its last entry (also one already spilled, after
     * the truncation below cuts into a sealed segment), and reads and
     * time lookups checked at every step, through reopens. */
    seg_config c = small_cfg();
    c.segment_index_bytes = 64 << 10;
    static int64_t ts[5000];
    /* Entries fall on every 4th batch here, the last equal-time one on
     * 1000: cuts past it keep that entry and its bound, so the first new
     * entry replaces it after it was spilled. */
    for (int cut = 998; cut <= 1002; cut++) {
        seg_log *log = open_log(&c, 0, 0);
        for (int o = 0; o < 5000; o++)
            ts[o] = o < 1002 ? 5000 : 5000 + o - 1001;
        append_ts(log, 0, 3000, ts);
        expect_lookups(log, 3000, ts);
        ck_assert_int_eq(seg_roll(log, 0), 0);
        append_ts(log, 3000, 3003, ts);
        ck_assert_int_eq(seg_truncate(log, cut), 0);
        ck_assert_int_eq(seg_segment_count(log), 1);
        for (int o = cut; o < 5000; o++)    /* equal, then rising again */
            ts[o] = o < cut + 600 ? 5000 : 5000 + o - cut - 599;
        append_ts(log, cut, 4000, ts);
        expect_lookups(log, 4000, ts);
        ck_assert_int_eq(seg_roll(log, 0), 0);
        seg_close(log);
        for (int rp = 0; rp < 2; rp++) {    /* rebuilt, then trusted */
            log = open_log(&c, 0, rp ? 4000 : 0);
            expect_lookups(log, 4000, ts);
            seg_close(log);
        }
        log = open_log(&c, 0, 0);
        ck_assert_int_eq(seg_destroy(log), 0);
        mkdir(g_dir, 0700);
    }
}
END_TEST

/* ---- flush on a worker thread ---------------------------------------------------- */
struct flusher { seg_log *log; atomic_int stop; atomic_int flushes; int errors; };

static void *flush_loop(void *arg)
{
    struct flusher *f = arg;
    while (!atomic_load(&f->stop)) {
        int64_t to;
        if (seg_flush(f->log, &to) != 0)
            f->errors++;
        atomic_fetch_add(&f->flushes, 1);
    }
    return NULL;
}

START_TEST(test_flush_on_other_thread_concurrent_with_append)
{
    seg_config c = small_cfg();
    c.segment_bytes = 16384;
    seg_log *log = open_log(&c, 0, 0);
    struct flusher f = { .log = log };
    atomic_init(&f.stop, 0);
    atomic_init(&f.flushes, 0);
    pthread_t t;
    pthread_create(&t, NULL, flush_loop, &f);
    kp_buf b;
    kp_buf_init(&b);
    add_batch(&b, 4, 1000, 200, KP_CODEC_NONE);
    int64_t expect = 0, rp_seen = 0;
    for (int i = 0; i < 3000; i++) {
        int64_t base;
        ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
        ck_assert_int_eq(base, expect);
        expect += 4;
        if (i % 500 == 499)
            seg_advance_log_start(log, expect - 200, NULL);
        int64_t rp = seg_recovery_point(log);
        ck_assert_int_ge(rp, rp_seen);          /* only moves forward */
        ck_assert_int_le(rp, seg_log_end(log));
        rp_seen = rp;
    }
    /* On a loaded machine the appends can finish before the flusher
     * thread first runs: wait for one flush rather than fail. */
    while (atomic_load(&f.flushes) == 0)
        sched_yield();
    atomic_store(&f.stop, 1);
    pthread_join(t, NULL);
    ck_assert_int_eq(f.errors, 0);
    ck_assert_int_gt(atomic_load(&f.flushes), 0);
    int64_t to;
    ck_assert_int_eq(seg_flush(log, &to), 0);
    ck_assert_int_eq(to, seg_log_end(log));
    ck_assert_int_eq(seg_recovery_point(log), expect);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

/* ---- the error state --------------------------------------------------------------- */
START_TEST(test_write_error_enters_error_state)
{
    seg_config c = small_cfg();
    seg_log *log = open_log(&c, 0, 0);
    kp_buf b;
    kp_buf_init(&b);
    add_batch(&b, 2, 1000, 3000, KP_CODEC_NONE);
    int64_t base;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
    uint64_t good = seg_size_bytes(log);
    /* The file may grow only part of the next batch: a short write, then
     * EFBIG (SIGXFSZ ignored so the write returns instead of killing us). */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit rl;
    getrlimit(RLIMIT_FSIZE, &rl);
    rlim_t hard = rl.rlim_max;
    rl.rlim_cur = good + b.len / 2;     /* only the soft limit: undoable */
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), SEG_E_IO);
    ck_assert(seg_failed(log));
    ck_assert_int_eq(seg_last_errno(log), EFBIG);
    ck_assert_int_eq(seg_log_end(log), 8);
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), SEG_E_STATE);
    /* The torn bytes were cut off the file and nothing of them is served. */
    char path[128];
    snprintf(path, sizeof path, "%s/%020d.log", g_dir, 0);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_size, (off_t)good);
    seg_range r;
    ck_assert_int_eq(seg_read(log, 6, INT64_MAX, 1 << 20, &r), 0);
    int64_t first;
    ck_assert_int_eq(check_range(&r, &first, NULL), 8);
    seg_range_release(&r);
    seg_close(log);
    /* Reopened, it is healthy again. */
    rl.rlim_cur = hard;
    ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &rl), 0);
    log = open_log(&c, 0, 0);
    ck_assert(!seg_failed(log));
    ck_assert_int_eq(seg_log_end(log), 8);
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &base), 0);
    ck_assert_int_eq(base, 8);
    kp_buf_free(&b);
    seg_close(log);
}
END_TEST

START_TEST(test_destroy_removes_directory)
{
    seg_config c = small_cfg();
    seg_log *log = log_of_many(10, &c);
    ck_assert_int_eq(seg_destroy(log), 0);
    struct stat st;
    ck_assert_int_ne(stat(g_dir, &st), 0);
    mkdir(g_dir, 0700);     /* for teardown */
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_append_assigns_contiguous_offsets, test_read_returns_whole_batches,
        test_read_at_least_one_batch_when_max_bytes_small,
        test_read_mid_batch_offset_starts_at_batch, test_roll_by_segment_bytes,
        test_roll_by_segment_ms, test_reopen_does_not_roll_old_segment,
        test_roll_by_full_index, test_sealed_segments_hold_no_index_fds_and_reopen_them, test_offset_for_time, test_truncate,
        test_flush_of_an_unchanged_log_keeps_the_recovery_point,
        test_advance_log_start_deletes_segments, test_delete_old_by_time_and_size,
        test_reopen_keeps_everything, test_assigned_append_may_start_past_the_log_end,
        test_index_tail_through_spill_roll_truncate_reopen,
        test_flush_on_other_thread_concurrent_with_append, test_write_error_enters_error_state,
        test_destroy_removes_directory,
    };
    return unit_run("seg_log", "log", tests, sizeof tests / sizeof *tests, setup, teardown, 60);
}
