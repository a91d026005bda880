/*
 * test_seg_read — reading a partition: seg_read's upper bound and next
 * offset, the time lookup's timestamp, the read-only record cursor
 * (uncompressed and compressed batches, mid-batch starts, bounds, time
 * seeks, deleted segments) and seg_dir_stat.
 */
#include <check.h>
#include <ftw.h>
#include <stdatomic.h>
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
    unit_tmpdir_make("seg_read");
}

static void teardown(void)
{
    unit_tmpdir_remove();
}

static seg_log *open_log(uint64_t segment_bytes)
{
    seg_open_opts o = { .dir = g_dir };
    seg_config_default(&o.cfg);
    o.cfg.index_interval_bytes = 256;
    o.cfg.segment_index_bytes = 4096;
    if (segment_bytes)
        o.cfg.segment_bytes = segment_bytes;
    seg_log *log = NULL;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    return log;
}

/* Value of the record at `offset`: "v<offset>" padded with 'x' to vlen. */
static int value_of(int64_t offset, char *buf, int vlen)
{
    memset(buf, 'x', (size_t)vlen);
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "v%lld", (long long)offset);
    memcpy(buf, tmp, (size_t)(n < vlen ? n : vlen));
    return vlen;
}

/* Appends one batch of n records whose offsets start at the log end,
 * timestamps ts, ts+1, …; returns its base offset. */
static int64_t append(seg_log *log, int n, int64_t ts, int vlen, int codec)
{
    static char val[40000];
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, codec);
    int64_t base = seg_log_end(log);
    for (int i = 0; i < n; i++)
        kp_bb_add(&bb, ts + i, "k", 1, val, value_of(base + i, val, vlen), NULL, 0);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_bb_free(&bb);
    int64_t got = -1;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &got), 0);
    ck_assert_int_eq(got, base);
    kp_buf_free(&b);
    return base;
}

/* `batches` batches of `per` records, batch i at timestamps from
 * 1000 + ts_step * i, odd batches compressed with odd_codec. */
static seg_log *log_of(uint64_t segment_bytes, int batches, int per, int ts_step,
                       int vlen, int odd_codec)
{
    seg_log *log = open_log(segment_bytes);
    for (int i = 0; i < batches; i++)
        append(log, per, 1000 + ts_step * i, vlen, i % 2 ? odd_codec : KP_CODEC_NONE);
    return log;
}

/* Walks the range's batch headers: first base, and the offset after the
 * last batch. */
static int64_t range_end_offset(const seg_range *r, int64_t *first)
{
    size_t off = 0;
    int64_t end = -1;
    *first = -1;
    while (off < r->len) {
        uint8_t h[KP_BATCH_HEADER_SIZE];
        ck_assert_int_eq(pread(r->fd, h, sizeof h, r->pos + (off_t)off), (ssize_t)sizeof h);
        kp_batch b;
        ck_assert_int_eq(kp_batch_header(h, sizeof h, &b), 0);
        if (*first < 0)
            *first = b.BaseOffset;
        end = b.BaseOffset + b.LastOffsetDelta + 1;
        off += (size_t)kp_batch_size(h, sizeof h);
    }
    ck_assert_uint_eq(off, r->len);
    return end;
}

/* ---- seg_read ------------------------------------------------------------- */
START_TEST(test_read_stops_at_upper_bound)
{
    seg_log *log = log_of(0, 10, 5, 5, 100, KP_CODEC_NONE);
    seg_range r;
    int64_t first;
    /* Bound on a batch boundary: exactly the batches below it. */
    ck_assert_int_eq(seg_read(log, 0, 25, 1 << 20, &r), 0);
    ck_assert_int_eq(range_end_offset(&r, &first), 25);
    ck_assert_int_eq(first, 0);
    ck_assert_int_eq(r.next, 25);
    ck_assert(!r.seg_end);
    seg_range_release(&r);
    /* Bound inside a batch: that batch is not served either. */
    ck_assert_int_eq(seg_read(log, 7, 23, 1 << 20, &r), 0);
    ck_assert_int_eq(range_end_offset(&r, &first), 20);
    ck_assert_int_eq(first, 5);
    ck_assert_int_eq(r.next, 20);
    seg_range_release(&r);
    /* Starting in the batch that reaches the bound, or at the bound. */
    ck_assert_int_eq(seg_read(log, 21, 23, 1 << 20, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    ck_assert_int_eq(r.next, 21);
    ck_assert_int_eq(seg_read(log, 25, 25, 1 << 20, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    /* Even the one-batch-whatever-its-size rule stops at the bound. */
    ck_assert_int_eq(seg_read(log, 20, 24, 0, &r), 0);
    ck_assert_uint_eq(r.len, 0);
    /* Above the log end is still out of range, bound or not. */
    ck_assert_int_eq(seg_read(log, 51, 25, 1 << 20, &r), KP_OFFSET_OUT_OF_RANGE);
    /* No bound: to the end of the segment. */
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 1 << 20, &r), 0);
    ck_assert_int_eq(range_end_offset(&r, &first), 50);
    ck_assert_int_eq(r.next, 50);
    ck_assert(r.seg_end);
    seg_range_release(&r);
    seg_close(log);
}
END_TEST

START_TEST(test_read_next_offset_when_max_bytes_cuts)
{
    seg_log *log = log_of(0, 10, 5, 5, 100, KP_CODEC_NONE);
    seg_range r;
    int64_t first;
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 1, &r), 0);
    size_t one = r.len;                         /* all batches are the same size */
    ck_assert_int_eq(range_end_offset(&r, &first), 5);
    ck_assert_int_eq(r.next, 5);
    ck_assert(!r.seg_end);
    seg_range_release(&r);
    /* Every start and every budget: next is the walked end, and bounded
     * reads never pass the bound. */
    for (int64_t o = 0; o < 50; o++)
        for (size_t want = 1; want < 11 * one; want += one / 2)
            for (int k = 0; k < 3; k++) {
                static const int64_t hws[] = { 50, 45, 43 };
                int64_t hw = hws[k];
                ck_assert_int_eq(seg_read(log, o, hw, want, &r), 0);
                if (hw < 50 && o >= hw / 5 * 5) {   /* the batch reaches hw */
                    ck_assert_uint_eq(r.len, 0);
                    continue;
                }
                int64_t end = range_end_offset(&r, &first);
                ck_assert_int_eq(first, o / 5 * 5);
                ck_assert_int_eq(r.next, end);
                ck_assert_int_le(end, hw);
                ck_assert(r.seg_end == (end == 50));
                seg_range_release(&r);
            }
    seg_close(log);
}
END_TEST

START_TEST(test_read_next_continues_across_segments)
{
    /* A few batches per segment. */
    seg_log *log = log_of(2000, 30, 3, 1, 200, KP_CODEC_NONE);
    ck_assert_int_gt(seg_segment_count(log), 3);
    int64_t off = 0, hw = 80, ranges = 0, ends = 0;
    while (off < hw) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, off, hw, 1 << 20, &r), 0);
        if (r.len == 0)
            break;
        int64_t first;
        ck_assert_int_eq(range_end_offset(&r, &first), r.next);
        ck_assert_int_eq(first, off);
        ck_assert_int_eq(ranges, ends);         /* only the last may stop early */
        ends += r.seg_end;
        ranges++;
        off = r.next;
        seg_range_release(&r);
    }
    ck_assert_int_eq(off, 78);                  /* the batch 78..80 reaches 80 */
    ck_assert_int_gt(ranges, 3);                /* one per segment */
    seg_close(log);
}
END_TEST

/* ---- time lookup ---------------------------------------------------------- */
/* The batch seg_read serves for offset o alone (max_bytes 1: exactly
 * one batch): it must hold o.  Returns its base. */
static int64_t batch_holding(seg_log *log, int64_t o)
{
    seg_range r;
    int64_t first;
    ck_assert_int_eq(seg_read(log, o, INT64_MAX, 1, &r), 0);
    int64_t end = range_end_offset(&r, &first);
    ck_assert_msg(first <= o && o < end, "offset %lld read as batch [%lld, %lld)",
                  (long long)o, (long long)first, (long long)end);
    seg_range_release(&r);
    return first;
}

/* Reads that go on where the last stopped walk from the batch starts the
 * segment remembers (read.c H1): a follower's tail reads after every
 * append, reads of every offset backwards (the remembered start above the
 * offset: the index serves) and forwards, and after a truncation in the
 * middle and appends of other sizes there, the new batches. */
START_TEST(test_reads_follow_appends_and_a_truncation)
{
    seg_log *log = open_log(0);
    for (int i = 0; i < 60; i++) {
        int64_t base = append(log, 1 + i % 3, 1000 + i, 20 + i, KP_CODEC_NONE);
        ck_assert_int_eq(batch_holding(log, base), base);
        seg_range r;
        int64_t first;
        ck_assert_int_eq(seg_read(log, base, INT64_MAX, 1 << 20, &r), 0);
        ck_assert_int_eq(range_end_offset(&r, &first), seg_log_end(log));
        ck_assert_int_eq(first, base);
        seg_range_release(&r);
    }
    int64_t end = seg_log_end(log);
    for (int64_t o = end - 1; o >= 0; o--)
        batch_holding(log, o);
    for (int64_t o = 0; o < end; o++)
        batch_holding(log, o);
    int64_t cut = batch_holding(log, end / 2);
    batch_holding(log, end - 1);                  /* a remembered start past the cut */
    ck_assert_int_eq(seg_truncate(log, cut), 0);
    ck_assert_int_eq(seg_log_end(log), cut);
    for (int i = 0; i < 30; i++) {
        int64_t base = append(log, 2, 5000 + i, 70 - i, KP_CODEC_NONE);
        ck_assert_int_eq(batch_holding(log, base), base);
        ck_assert_int_eq(batch_holding(log, base + 1), base);
    }
    for (int64_t o = seg_log_end(log) - 1; o >= 0; o -= 3)
        batch_holding(log, o);
    seg_close(log);
}
END_TEST

START_TEST(test_offset_for_time_returns_record_timestamp)
{
    seg_log *log = open_log(0);
    append(log, 10, 1000, 50, KP_CODEC_NONE);   /* 0..9:   1000..1009 */
    append(log, 10, 2000, 50, KP_CODEC_GZIP);   /* 10..19: 2000..2009 */
    append(log, 10, 3000, 50, KP_CODEC_ZSTD);   /* 20..29: 3000..3009 */
    static const struct { int64_t ask, off, ts; } cases[] = {
        { 2004, 14, 2004 },     /* inside a compressed batch */
        { 1500, 10, 2000 },     /* between batches: the next one's first */
        { 3009, 29, 3009 },
        { 0, 0, 1000 },
        { 3010, 30, -1 },       /* none: the log end, no timestamp */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t off = -2, ts = -2;
        ck_assert_int_eq(seg_offset_for_time(log, cases[i].ask, &off, &ts), 0);
        ck_assert_int_eq(off, cases[i].off);
        ck_assert_int_eq(ts, cases[i].ts);
    }
    seg_close(log);
}
END_TEST

/* ---- the cursor ----------------------------------------------------------- */
/* Reads [from, to) with the cursor; checks offsets are consecutive from
 * `expect_first` and values match; returns the count. */
static int64_t cursor_count_opts(const seg_cursor_opts *o, int64_t expect_first, int vlen)
{
    int64_t to = o->to;
    seg_cursor *c;
    ck_assert_int_eq(seg_cursor_open(o, &c), 0);
    kp_record rec;
    int64_t n = 0, want = expect_first;
    static char val[40000];
    int rc;
    while ((rc = seg_cursor_next(c, &rec)) == 1) {
        ck_assert_int_eq(rec.Offset, want);
        ck_assert_int_lt(rec.Offset, to);
        ck_assert_int_eq(rec.Value.len, vlen);
        value_of(rec.Offset, val, vlen);
        ck_assert(memcmp(rec.Value.p, val, (size_t)vlen) == 0);
        want++;
        n++;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(seg_cursor_next(c, &rec), 0);   /* stays done */
    seg_cursor_close(c);
    return n;
}

static int64_t cursor_count(int64_t from, int64_t to, int64_t min_ts,
                            int64_t expect_first, int vlen, atomic_llong *bytes)
{
    seg_cursor_opts o = { .dir = g_dir, .from = from, .to = to, .min_ts = min_ts,
                          .bytes_read = bytes };
    return cursor_count_opts(&o, expect_first, vlen);
}

START_TEST(test_cursor_reads_uncompressed_and_compressed)
{
    seg_log *log = open_log(1000);
    static const int codecs[] = { KP_CODEC_NONE, KP_CODEC_GZIP, KP_CODEC_ZSTD,
                                  KP_CODEC_LZ4, KP_CODEC_SNAPPY };
    for (int i = 0; i < 20; i++)
        append(log, 5, 1000 + 5 * i, 100, codecs[i % 5]);
    ck_assert_int_gt(seg_segment_count(log), 2);
    ck_assert_int_eq(cursor_count(0, 100, INT64_MIN, 0, 100, NULL), 100);
    /* Starting mid-batch, in an uncompressed and in a compressed one. */
    ck_assert_int_eq(cursor_count(52, 100, INT64_MIN, 52, 100, NULL), 48);
    ck_assert_int_eq(cursor_count(57, 100, INT64_MIN, 57, 100, NULL), 43);
    /* Upper bounds: mid-batch (compressed, uncompressed) and on a boundary. */
    ck_assert_int_eq(cursor_count(0, 58, INT64_MIN, 0, 100, NULL), 58);
    ck_assert_int_eq(cursor_count(3, 52, INT64_MIN, 3, 100, NULL), 49);
    ck_assert_int_eq(cursor_count(10, 15, INT64_MIN, 10, 100, NULL), 5);
    ck_assert_int_eq(cursor_count(15, 15, INT64_MIN, 15, 100, NULL), 0);
    /* Bound past the log end: what there is. */
    ck_assert_int_eq(cursor_count(90, 1000, INT64_MIN, 90, 100, NULL), 10);
    seg_close(log);
}
END_TEST

START_TEST(test_cursor_streams_big_records_from_mid_batch)
{
    seg_log *log = open_log(0);
    append(log, 3, 1000, 100, KP_CODEC_NONE);
    append(log, 8, 2000, 30000, KP_CODEC_NONE); /* records > the 16 KiB window */
    append(log, 3, 3000, 100, KP_CODEC_NONE);
    atomic_llong bytes = 0;
    ck_assert_int_eq(cursor_count(8, 9, INT64_MIN, 8, 30000, &bytes), 1);
    /* Records below `from` were skipped after their first bytes: about
     * one window (16 KiB) per skipped record and the two records read
     * whole (the one wanted, and the one that says the bound is reached),
     * not the whole 240 KB batch. */
    ck_assert_int_lt(bytes, 8 * 30000 * 3 / 4);
    ck_assert_int_gt(bytes, 30000);
    ck_assert_int_eq(cursor_count(3, 11, INT64_MIN, 3, 30000, NULL), 8);
    seg_close(log);
}
END_TEST

START_TEST(test_cursor_seeks_by_time_and_skips_older_batches)
{
    seg_log *log = log_of(0, 40, 5, 100, 100, KP_CODEC_GZIP);
    atomic_llong near = 0, all = 0;
    /* Batch 30 (offsets 150..154) holds timestamps 4000..4004. */
    ck_assert_int_eq(cursor_count(0, 200, 4002, 150, 100, &near), 50);
    ck_assert_int_eq(cursor_count(0, 200, INT64_MIN, 0, 100, &all), 200);
    ck_assert_int_lt(near * 2, all);            /* the .timeindex skipped most */
    seg_close(log);
}
END_TEST

START_TEST(test_cursor_skips_segments_deleted_meanwhile)
{
    seg_log *log = log_of(2000, 30, 3, 1, 200, KP_CODEC_NONE);
    int64_t second = -1;
    seg_cursor_opts o = { .dir = g_dir, .from = 0, .to = 90, .min_ts = INT64_MIN };
    seg_cursor *c;
    ck_assert_int_eq(seg_cursor_open(&o, &c), 0);
    /* Retention removes the first segment after the listing, before the
     * cursor opened it: the cursor goes on with the next one. */
    ck_assert_int_gt(seg_advance_log_start(log, 40, NULL), 1);
    kp_record rec;
    ck_assert_int_eq(seg_cursor_next(c, &rec), 1);
    second = rec.Offset;
    ck_assert_int_gt(second, 0);
    int64_t n = 1;
    while (seg_cursor_next(c, &rec) == 1)
        n++;
    ck_assert_int_eq(second + n, 90);
    seg_cursor_close(c);
    seg_close(log);
}
END_TEST

/* The active segment's .index file lags its in-memory entries (a tail of
 * SEG_IDX_TAIL bytes): a cursor opened near the log end walks the batch
 * headers from the last entry in the file, unless seg_locate, from the
 * owner's in-memory index, hints where the batch starts.  A stale hint
 * (not the batch holding `from`) is not trusted. */
START_TEST(test_cursor_starts_at_the_owners_hint)
{
    seg_log *log = open_log(0);
    for (int i = 0; i < 300; i++)
        append(log, 2, 1000 + i, 40, KP_CODEC_NONE);
    int64_t end = seg_log_end(log), from = end - 5, base = -1, pos = -1;
    uint64_t ino = 0, ino2;
    ck_assert_int_eq(seg_locate(log, from, &base, &pos, &ino), 0);
    ck_assert_int_eq(base, 0);
    ck_assert_int_gt(pos, 0);
    atomic_llong walked = 0, hinted = 0;
    ck_assert_int_eq(cursor_count(from, end, INT64_MIN, from, 40, &walked), 5);
    seg_cursor_opts o = { .dir = g_dir, .from = from, .to = end, .min_ts = INT64_MIN,
                          .bytes_read = &hinted, .hint_base = base, .hint_pos = pos,
                          .hint_ino = ino };
    ck_assert_int_eq(cursor_count_opts(&o, from, 40), 5);
    ck_assert_int_lt(hinted * 20, walked);      /* no walk from the file's last entry */

    /* A hint at another batch, in another segment or another file (a
     * compaction's, renamed into place) changes nothing. */
    int64_t b2, p2;
    ck_assert_int_eq(seg_locate(log, 10, &b2, &p2, &ino2), 0);
    ck_assert_uint_eq(ino2, ino);
    o.hint_pos = p2;
    ck_assert_int_eq(cursor_count_opts(&o, from, 40), 5);
    o.hint_pos = pos + 1;
    ck_assert_int_eq(cursor_count_opts(&o, from, 40), 5);
    o.hint_pos = pos;
    o.hint_base = 7;
    ck_assert_int_eq(cursor_count_opts(&o, from, 40), 5);
    o.hint_base = base;
    o.hint_ino = ino + 1;
    hinted = 0;
    ck_assert_int_eq(cursor_count_opts(&o, from, 40), 5);
    ck_assert_int_gt(hinted * 20, walked);      /* not trusted: walked */

    /* Nothing to locate at or past the log end. */
    ck_assert_int_eq(seg_locate(log, end, &b2, &p2, &ino2), 1);
    ck_assert_int_eq(seg_locate(log, end + 10, &b2, &p2, &ino2), 1);
    ck_assert_int_eq(seg_locate(log, -1, &b2, &p2, &ino2), 1);
    seg_close(log);
}
END_TEST

/* One batch of producer 7, epoch 2: a transactional record (codec), or
 * its COMMIT marker (a control batch, key Version 0 | Type 1). */
static void append_txn(seg_log *log, bool control, int codec)
{
    static const uint8_t commit_key[4] = { 0, 0, 0, 1 }, value[6] = { 0 };
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, codec);
    kp_bb_set_producer(&bb, 7, 2, control ? -1 : 0);
    bb.extra_attrs = KP_ATTR_TRANSACTIONAL | (control ? KP_ATTR_CONTROL : 0);
    if (control)
        kp_bb_add(&bb, 5, commit_key, 4, value, 6, NULL, 0);
    else
        kp_bb_add(&bb, 5, "t", 1, "txn", 3, NULL, 0);
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    kp_bb_free(&bb);
    int64_t got = -1;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 0, &got), 0);
    kp_buf_free(&b);
}

/* Control batches are skipped unless asked for (group_log.c reads the
 * markers of __consumer_offsets); seg_cursor_batch names each record's
 * batch, compressed or streamed. */
START_TEST(test_cursor_shows_markers_when_asked_and_the_batch_header)
{
    seg_log *log = open_log(0);
    append(log, 2, 1000, 40, KP_CODEC_NONE);       /* offsets 0, 1 */
    append_txn(log, false, KP_CODEC_GZIP);         /* 2 */
    append_txn(log, false, KP_CODEC_NONE);         /* 3 */
    append_txn(log, true, KP_CODEC_NONE);          /* 4: COMMIT */
    append(log, 1, 1002, 40, KP_CODEC_NONE);       /* 5 */
    struct { int64_t off; int64_t pid; int16_t attrs; } want[] = {
        { 0, -1, 0 }, { 1, -1, 0 },
        { 2, 7, KP_ATTR_TRANSACTIONAL | KP_CODEC_GZIP }, { 3, 7, KP_ATTR_TRANSACTIONAL },
        { 4, 7, KP_ATTR_TRANSACTIONAL | KP_ATTR_CONTROL }, { 5, -1, 0 },
    };
    for (int control = 0; control <= 1; control++) {
        seg_cursor_opts o = { .dir = g_dir, .from = 0, .to = 6, .min_ts = INT64_MIN,
                              .control = control };
        seg_cursor *c;
        ck_assert_int_eq(seg_cursor_open(&o, &c), 0);
        kp_record rec;
        size_t k = 0;
        while (seg_cursor_next(c, &rec) == 1) {
            if (!control && want[k].attrs & KP_ATTR_CONTROL)
                k++;
            ck_assert_uint_lt(k, 6);
            const kp_batch *h = seg_cursor_batch(c);
            ck_assert_int_eq(rec.Offset, want[k].off);
            ck_assert_int_eq(h->ProducerId, want[k].pid);
            ck_assert_int_eq(h->Attributes, want[k].attrs);
            if (want[k].pid >= 0)
                ck_assert_int_eq(h->ProducerEpoch, 2);
            if (want[k].attrs & KP_ATTR_CONTROL)
                ck_assert(rec.Key.len == 4 && !memcmp(rec.Key.p, "\0\0\0\1", 4));
            k++;
        }
        ck_assert_uint_eq(k, 6);
        seg_cursor_close(c);
    }
    seg_close(log);
}
END_TEST

START_TEST(test_cursor_on_missing_directory_fails)
{
    seg_cursor_opts o = { .dir = "/nonexistent/sluice-x-0", .from = 0, .to = 10,
                          .min_ts = INT64_MIN };
    seg_cursor *c = (seg_cursor *)1;
    ck_assert_int_eq(seg_cursor_open(&o, &c), SEG_E_IO);
    ck_assert_ptr_null(c);
}
END_TEST

START_TEST(test_dir_stat_matches_log)
{
    seg_log *log = log_of(2000, 30, 3, 10, 200, KP_CODEC_ZSTD);
    ck_assert_int_eq(seg_advance_log_start(log, 20, NULL) > 0, 1);
    seg_dir_info di;
    ck_assert_int_eq(seg_dir_stat(g_dir, &di), 0);
    ck_assert_int_eq(di.segments, seg_segment_count(log));
    ck_assert_uint_eq(di.size_bytes, seg_size_bytes(log));
    ck_assert_int_le(di.first_base, seg_log_start(log));
    ck_assert_int_eq(di.log_end, seg_log_end(log));
    ck_assert_int_eq(di.max_ts, 1000 + 10 * 29 + 2);
    seg_close(log);
    ck_assert_int_eq(seg_dir_stat("/nonexistent/sluice-x-0", &di), SEG_E_IO);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_read_stops_at_upper_bound, test_read_next_offset_when_max_bytes_cuts,
        test_read_next_continues_across_segments, test_reads_follow_appends_and_a_truncation,
        test_offset_for_time_returns_record_timestamp,
        test_cursor_reads_uncompressed_and_compressed,
        test_cursor_streams_big_records_from_mid_batch,
        test_cursor_seeks_by_time_and_skips_older_batches,
        test_cursor_skips_segments_deleted_meanwhile, test_cursor_starts_at_the_owners_hint,
        test_cursor_shows_markers_when_asked_and_the_batch_header,
        test_cursor_on_missing_directory_fails,
        test_dir_stat_matches_log,
    };
    return unit_run("seg_read", "read", tests, sizeof tests / sizeof *tests, setup, teardown, 60);
}
