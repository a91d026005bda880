/*
 * test_seg_cleaner — compaction and deferred deletion in segments/:
 * newest value per key at its original offset, tombstones, codecs kept,
 * a crash after every commit step leaving a valid log, a small dedupe
 * buffer cleaning a prefix, the active segment untouched, and *.deleted
 * files living until seg_dead_unlink while open ranges stay readable.
 */
#include <check.h>
#include <dirent.h>
#include <ftw.h>
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
    unit_tmpdir_make("seg_clean");
}

static void teardown(void)
{
    unit_tmpdir_remove();
}

static seg_log *open_log(int64_t segment_bytes)
{
    seg_open_opts o = { .dir = g_dir };
    seg_config_default(&o.cfg);
    o.cfg.segment_bytes = (uint64_t)segment_bytes;
    o.cfg.index_interval_bytes = 256;
    o.cfg.segment_index_bytes = 4096;
    seg_log *log = NULL;
    ck_assert_int_eq(seg_open(&o, &log), 0);
    return log;
}

/* One batch of n records with keys "k<first+i mod keys>" and values
 * "v<offset-to-be>" (value NULL when tomb). */
static void append_keys(seg_log *log, int n, int keys, int *seq, int64_t ts,
                        int codec, bool tomb)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, codec);
    char k[32], v[32];
    for (int i = 0; i < n; i++) {
        int key = (*seq)++ % keys;
        snprintf(k, sizeof k, "k%d", key);
        snprintf(v, sizeof v, "v%lld", (long long)(seg_log_end(log) + i));
        kp_bb_add(&bb, ts, k, (int32_t)strlen(k), tomb ? NULL : v,
                  tomb ? -1 : (int32_t)strlen(v), NULL, 0);
    }
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    int64_t base;
    ck_assert_int_eq(seg_append(log, b.data, b.len, ts, &base), 0);
    kp_buf_free(&b);
}

typedef struct rec_seen {
    int64_t offset, ts;
    char key[32], value[32];
    bool tomb;
    int codec;
    int16_t attrs;              /* its batch's */
    int64_t base_ts;            /* its batch's BaseTimestamp */
} rec_seen;

/* Every record from log start to end, through seg_read as a fetch would. */
static int read_all(seg_log *log, rec_seen *out, int cap)
{
    int n = 0;
    int64_t off = seg_log_start(log);
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    while (off < seg_log_end(log)) {
        seg_range r;
        ck_assert_int_eq(seg_read(log, off, INT64_MAX, 1 << 20, &r), 0);
        if (r.len == 0)
            break;
        uint8_t *buf = malloc(r.len);
        ck_assert_int_eq(pread(r.fd, buf, r.len, r.pos), (ssize_t)r.len);
        size_t pos = 0;
        while (pos < r.len) {
            kp_batch h;
            int64_t sz = kp_batch_check_stored(buf + pos, r.len - pos, &h);
            ck_assert_int_gt(sz, 0);
            ck_assert_int_eq(kp_rec_iter_start(&it, buf + pos, (size_t)sz), 0);
            kp_record rec;
            while (kp_rec_iter_next(&it, &rec) == 1) {
                ck_assert_int_lt(n, cap);
                rec_seen *s = &out[n++];
                s->offset = rec.Offset;
                s->ts = rec.Timestamp;
                s->attrs = h.Attributes;
                s->base_ts = h.BaseTimestamp;
                snprintf(s->key, sizeof s->key, "%.*s", rec.Key.len, rec.Key.p);
                s->tomb = rec.Value.len < 0;
                snprintf(s->value, sizeof s->value, "%.*s",
                         rec.Value.len < 0 ? 0 : rec.Value.len, rec.Value.p);
                s->codec = h.Attributes & KP_ATTR_CODEC_MASK;
            }
            off = h.BaseOffset + h.LastOffsetDelta + 1;
            pos += (size_t)sz;
        }
        free(buf);
        seg_range_release(&r);
    }
    kp_rec_iter_free(&it);
    return n;
}

/* n batches of 10 records under keys no test asserts on (k100...). */
static void dirty_more(seg_log *log, int n)
{
    for (int i = 0; i < n; i++) {
        int s2 = 100 + i * 10;
        append_keys(log, 10, 1000, &s2, 999000, KP_CODEC_NONE, false);
    }
}

static seg_clean_policy policy(void)
{
    seg_clean_policy p = {
        .now_ms = 1000000, .min_compaction_lag_ms = 0,
        .max_compaction_lag_ms = 0, .min_cleanable_dirty_ratio = 0.0,
        .delete_retention_ms = 86400000, .dedupe_buffer_bytes = 1 << 20,
        .io_max_bytes_per_sec = 0, .markers_below = INT64_MAX,
    };
    return p;
}

static int clean_once(seg_log *log, const seg_clean_policy *p, seg_clean_stats *st)
{
    seg_clean_job *j;
    int rc = seg_clean_plan(log, p, &j);
    if (rc != 1)
        return rc;
    int run = seg_clean_run(j, NULL);
    ck_assert_int_eq(seg_clean_finish(log, j, st), run);
    return run == 0 ? 1 : run;
}

/* Checks: each key once (unless allow_dups), value = "v<offset>", offsets
 * increasing, and the newest offset per key as in `newest`. */
static void check_newest(seg_log *log, const int64_t *newest, int keys, bool allow_dups)
{
    rec_seen *r = calloc(4096, sizeof *r);
    int n = read_all(log, r, 4096);
    int64_t last = -1;
    int *count = calloc((size_t)keys, sizeof *count);
    int64_t *seen = calloc((size_t)keys, sizeof *seen);
    for (int i = 0; i < n; i++) {
        ck_assert_int_gt(r[i].offset, last);
        last = r[i].offset;
        int k = atoi(r[i].key + 1);
        count[k]++;
        seen[k] = r[i].offset;
        if (!r[i].tomb) {
            char want[32];
            snprintf(want, sizeof want, "v%lld", (long long)r[i].offset);
            ck_assert_str_eq(r[i].value, want);
        }
    }
    for (int k = 0; k < keys; k++) {
        if (!allow_dups)
            ck_assert_int_le(count[k], 1);
        if (newest[k] >= 0)
            ck_assert_int_eq(seen[k], newest[k]);
    }
    free(count);
    free(seen);
    free(r);
}

START_TEST(test_compaction_keeps_newest_per_key_at_original_offset)
{
    seg_log *log = open_log(2048);
    int seq = 0;
    for (int i = 0; i < 40; i++)
        append_keys(log, 10, 7, &seq, 1000, KP_CODEC_NONE, false);
    int64_t end = seg_log_end(log);
    int segs = seg_segment_count(log);
    ck_assert_int_gt(segs, 2);
    /* The newest offset of key k among the closed segments; the active
     * one keeps its own copies. */
    seg_clean_policy p = policy();
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_gt(st.segments_in, 0);
    ck_assert_int_lt(st.records_out, st.records_in);
    ck_assert_int_eq(seg_log_end(log), end);
    int64_t newest[7];
    for (int k = 0; k < 7; k++)
        newest[k] = -1;
    for (int64_t o = 0; o < end; o++)
        newest[o % 7] = o;          /* key of offset o is o % 7 (seq == o) */
    check_newest(log, newest, 7, true);
    /* Nothing dirty left: a second plan finds nothing to do. */
    seg_clean_job *j;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);
    /* Reopen: same contents (the swapped files are the log now). */
    seg_close(log);
    log = open_log(2048);
    ck_assert_int_eq(seg_log_end(log), end);
    check_newest(log, newest, 7, true);
    seg_close(log);
}
END_TEST

START_TEST(test_active_segment_never_compacted)
{
    seg_log *log = open_log(1 << 20);       /* everything in the active one */
    int seq = 0;
    for (int i = 0; i < 10; i++)
        append_keys(log, 10, 3, &seq, 1000, KP_CODEC_NONE, false);
    seg_clean_policy p = policy();
    seg_clean_job *j;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);
    rec_seen r[200];
    ck_assert_int_eq(read_all(log, r, 200), 100);
    seg_close(log);
}
END_TEST

START_TEST(test_min_compaction_lag_and_dirty_ratio_honoured)
{
    seg_log *log = open_log(2048);
    int seq = 0;
    for (int i = 0; i < 20; i++)
        append_keys(log, 10, 5, &seq, 900000, KP_CODEC_NONE, false);
    seg_clean_policy p = policy();
    p.min_compaction_lag_ms = 200000;       /* records are 100 s old */
    seg_clean_job *j;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);
    p.min_compaction_lag_ms = 0;
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    /* Clean now; a few more dirty batches stay under a 0.9 ratio ... */
    for (int i = 0; i < 6; i++)
        append_keys(log, 10, 5, &seq, 900000, KP_CODEC_NONE, false);
    p.min_cleanable_dirty_ratio = 0.99;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);
    /* ... unless max.compaction.lag.ms says they waited long enough. */
    p.max_compaction_lag_ms = 50000;
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    seg_close(log);
}
END_TEST

/* The tombstones of keys k0..k(ntomb-1) left in the log; their record
 * timestamps in ts[] (may be NULL); asserts no value of those keys is. */
static int tombs_left(seg_log *log, int ntomb, int64_t *ts)
{
    rec_seen *r = calloc(4096, sizeof *r);
    int n = read_all(log, r, 4096), tombs = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].key[0] != 'k' || atoi(r[i].key + 1) >= ntomb)
            continue;
        ck_assert_msg(r[i].tomb, "old value of %s at %lld survived its tombstone",
                      r[i].key, (long long)r[i].offset);
        if (ts)
            ts[tombs] = r[i].ts;
        tombs++;
    }
    free(r);
    return tombs;
}

/* Values for keys k0..k9, tombstones for k0..k4 (record timestamp
 * tomb_ts), then other keys until those leave the active segment. */
static void write_with_tombstones(seg_log *log, int64_t tomb_ts, int codec)
{
    int seq = 0;
    for (int i = 0; i < 10; i++)
        append_keys(log, 10, 10, &seq, 1000, codec, false);
    seq = 0;
    append_keys(log, 5, 5, &seq, tomb_ts, codec, true);
    dirty_more(log, 20);
}

START_TEST(test_tombstones_dropped_after_delete_retention)
{
    seg_log *log = open_log(2048);
    write_with_tombstones(log, 1000, KP_CODEC_NONE);
    seg_clean_policy p = policy();
    p.delete_retention_ms = 10 * 1000 * 1000;
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    ck_assert_int_eq(tombs_left(log, 5, NULL), 5);      /* young: they stay */
    /* delete.retention.ms after that compaction, a pass drops them. */
    dirty_more(log, 8);
    p.now_ms += p.delete_retention_ms;
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_eq(tombs_left(log, 5, NULL), 0);
    ck_assert_int_eq(st.tombstones_removed, 5);
    seg_close(log);
}
END_TEST

/* The bug behind a flaky integration test: expiry was "record timestamp
 * older than now - delete.retention.ms", so a tombstone with an old
 * CreateTime went at its first compaction (no consumer ever saw it), one
 * from a clock running ahead stayed for ever, and when it went depended
 * on the client's clock.  Kafka's rule counts from the compaction that
 * first kept it (the delete horizon), which these tests pin exactly. */
START_TEST(test_tombstone_age_counts_from_first_compaction_not_its_timestamp)
{
    seg_clean_policy p0 = policy();
    int64_t stamps[] = { 1, p0.now_ms + 1000 * 1000 * 1000 };   /* past, future */
    for (int c = 0; c < 2; c++) {
        teardown();
        setup();
        seg_log *log = open_log(2048);
        write_with_tombstones(log, stamps[c], KP_CODEC_NONE);
        seg_clean_policy p = policy();
        p.delete_retention_ms = 5000;
        int64_t t0 = p.now_ms;
        ck_assert_int_eq(clean_once(log, &p, NULL), 1);
        int64_t ts[8];
        ck_assert_int_eq(tombs_left(log, 5, ts), 5);    /* kept, whatever ts */
        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(ts[i], stamps[c]);         /* and their timestamps */
        rec_seen *r = calloc(4096, sizeof *r);
        int n = read_all(log, r, 4096);
        for (int i = 0; i < n; i++)
            if (r[i].tomb) {                            /* cleaner.c T1: the stamp */
                ck_assert(r[i].attrs & KP_ATTR_DELETE_HORIZON);
                ck_assert_int_eq(r[i].base_ts, t0 + 5000);
            } else if (r[i].key[0] == 'k' && atoi(r[i].key + 1) < 10) {
                ck_assert(!(r[i].attrs & KP_ATTR_DELETE_HORIZON));
            }
        free(r);
        /* Re-cleaning the cleaned segments before the horizon keeps them
         * (the stamp is not renewed) ... */
        dirty_more(log, 8);
        p.now_ms = t0 + 5000 - 1;
        ck_assert_int_eq(clean_once(log, &p, NULL), 1);
        ck_assert_int_eq(tombs_left(log, 5, NULL), 5);
        /* ... and the first pass at the horizon drops them. */
        dirty_more(log, 8);
        p.now_ms = t0 + 5000;
        ck_assert_int_eq(clean_once(log, &p, NULL), 1);
        ck_assert_int_eq(tombs_left(log, 5, NULL), 0);
        seg_close(log);
    }
}
END_TEST

START_TEST(test_expired_tombstones_go_without_new_writes)
{
    seg_log *log = open_log(2048);
    write_with_tombstones(log, 1000, KP_CODEC_NONE);
    seg_clean_policy p = policy();
    p.delete_retention_ms = 5000;
    p.min_cleanable_dirty_ratio = 0.5;
    int64_t t0 = p.now_ms;
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    ck_assert_int_eq(tombs_left(log, 5, NULL), 5);
    seg_clean_job *j;
    p.now_ms = t0 + 4999;                   /* nothing dirty, horizon ahead */
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);
    p.now_ms = t0 + 5000;                   /* cleaner.c T3: due on the horizon alone */
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_eq(st.tombstones_removed, 5);
    ck_assert_int_eq(tombs_left(log, 5, NULL), 0);
    ck_assert_int_eq(st.delete_horizon_ms, -1);
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);   /* and not again */
    p.now_ms += 1000 * 1000;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 0);
    seg_close(log);
}
END_TEST

static void forget_checkpoint(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", g_dir);
    ck_assert_int_eq(unlink(path), 0);
}

static bool have_checkpoint(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", g_dir);
    return access(path, F_OK) == 0;
}

/* 400 records over 7 keys in 2 KiB segments; seq for more of them. */
static seg_log *seven_keys_log(int *seq)
{
    seg_log *log = open_log(2048);
    *seq = 0;
    for (int i = 0; i < 40; i++)
        append_keys(log, 10, 7, seq, 1000, KP_CODEC_NONE, false);
    return log;
}

START_TEST(test_clean_end_survives_restart)
{
    int seq;
    seg_log *log = seven_keys_log(&seq);
    seg_clean_policy p = policy();
    ck_assert(!have_checkpoint());
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    ck_assert(have_checkpoint());
    seg_close(log);
    /* A restart does not make the cleaned part dirty again... */
    log = open_log(2048);
    ck_assert_int_eq(clean_once(log, &p, NULL), 0);
    /* ...and new writes past it are what the next run reads. */
    dirty_more(log, 30);
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_gt(st.clean_from, 0);
    seg_close(log);
}
END_TEST

START_TEST(test_truncation_below_clean_end_forgets_checkpoint)
{
    int seq;
    seg_log *log = seven_keys_log(&seq);
    seg_clean_policy p = policy();
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_gt(st.clean_to, 20);
    /* A follower truncating into the cleaned part: what it appends next
     * must be cleaned, after a restart too. */
    ck_assert_int_eq(seg_truncate(log, 20), 0);
    ck_assert(!have_checkpoint());
    for (int i = 0; i < 40; i++)
        append_keys(log, 10, 7, &seq, 1000, KP_CODEC_NONE, false);
    seg_close(log);
    log = open_log(2048);
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_eq(st.clean_from, 0);
    seg_close(log);
}
END_TEST

START_TEST(test_checkpoint_past_the_log_end_is_dropped)
{
    int seq;
    seg_log *log = seven_keys_log(&seq);
    seg_clean_policy p = policy();
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    seg_close(log);
    char path[128];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", g_dir);
    FILE *f = fopen(path, "w");
    fprintf(f, "0\n100000 -1\n");
    fclose(f);
    log = open_log(2048);
    ck_assert(!have_checkpoint());
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);      /* all dirty */
    ck_assert_int_eq(st.clean_from, 0);
    seg_close(log);
}
END_TEST

START_TEST(test_delete_horizon_survives_reopen_and_recompression)
{
    int codecs[] = { KP_CODEC_NONE, KP_CODEC_LZ4, KP_CODEC_ZSTD };
    for (int c = 0; c < 3; c++) {
        teardown();
        setup();
        seg_log *log = open_log(2048);
        write_with_tombstones(log, 1000, codecs[c]);
        seg_clean_policy p = policy();
        p.delete_retention_ms = 5000;
        int64_t t0 = p.now_ms;
        ck_assert_int_eq(clean_once(log, &p, NULL), 1);
        seg_close(log);
        /* The checkpoint brings back clean_end and the horizon: nothing
         * is due until the horizon passes. */
        log = open_log(2048);
        p.now_ms = t0 + 4999;
        ck_assert_int_eq(clean_once(log, &p, NULL), 0);
        seg_close(log);
        /* Without it (lost, or a log from before checkpoints) every
         * segment is dirty again: a pass just before the horizon keeps
         * the tombstones and their stamp. */
        forget_checkpoint();
        log = open_log(2048);
        seg_clean_stats st;
        ck_assert_int_eq(clean_once(log, &p, &st), 1);
        ck_assert_int_eq(st.delete_horizon_ms, t0 + 5000);
        int64_t ts[8];
        ck_assert_int_eq(tombs_left(log, 5, ts), 5);
        for (int i = 0; i < 5; i++)
            ck_assert_int_eq(ts[i], 1000);
        rec_seen *r = calloc(4096, sizeof *r);
        int n = read_all(log, r, 4096);
        for (int i = 0; i < n; i++)
            if (r[i].tomb) {
                ck_assert_int_eq(r[i].base_ts, t0 + 5000);
                ck_assert_int_eq(r[i].codec, codecs[c]);
            }
        free(r);
        p.now_ms = t0 + 5000;
        ck_assert_int_eq(clean_once(log, &p, NULL), 1);
        ck_assert_int_eq(tombs_left(log, 5, NULL), 0);
        seg_close(log);
    }
}
END_TEST

/* min.compaction.lag.ms = 0 must not read timestamps: a record stamped
 * far in the future once held every later segment out of compaction. */
START_TEST(test_future_timestamp_does_not_hold_back_compaction)
{
    seg_log *log = open_log(2048);
    int seq = 0;
    for (int i = 0; i < 10; i++)
        append_keys(log, 10, 5, &seq, 1000, KP_CODEC_NONE, false);
    seg_clean_policy p = policy();
    append_keys(log, 5, 5, &seq, p.now_ms + 1000 * 1000 * 1000, KP_CODEC_NONE, false);
    for (int i = 0; i < 10; i++)
        append_keys(log, 10, 5, &seq, 1000, KP_CODEC_NONE, false);
    dirty_more(log, 20);
    ck_assert_int_eq(clean_once(log, &p, NULL), 1);
    rec_seen *r = calloc(4096, sizeof *r);
    int n = read_all(log, r, 4096), mine = 0;
    for (int i = 0; i < n; i++)
        mine += r[i].key[0] == 'k' && atoi(r[i].key + 1) < 5;
    ck_assert_int_eq(mine, 5);              /* one per key, all segments */
    free(r);
    seg_close(log);
}
END_TEST

START_TEST(test_compressed_batches_recompressed_with_their_codec)
{
    int codecs[] = { KP_CODEC_GZIP, KP_CODEC_SNAPPY, KP_CODEC_LZ4, KP_CODEC_ZSTD };
    for (int c = 0; c < 4; c++) {
        teardown();
        setup();
        seg_log *log = open_log(2048);
        int seq = 0;
        for (int i = 0; i < 30; i++)
            append_keys(log, 10, 13, &seq, 1000, codecs[c], false);
        int64_t end = seg_log_end(log);
        seg_clean_policy p = policy();
        ck_assert_int_eq(clean_once(log, &p, NULL), 1);
        int64_t newest[13];
        for (int k = 0; k < 13; k++)
            newest[k] = -1;
        for (int64_t o = 0; o < end; o++)
            newest[o % 13] = o;
        check_newest(log, newest, 13, true);
        rec_seen *r = calloc(4096, sizeof *r);
        int n = read_all(log, r, 4096);
        for (int i = 0; i < n; i++)
            ck_assert_int_eq(r[i].codec, codecs[c]);
        free(r);
        seg_close(log);
    }
}
END_TEST

static int count_files(const char *suffix)
{
    DIR *d = opendir(g_dir);
    struct dirent *e;
    int n = 0;
    size_t sl = strlen(suffix);
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l >= sl && !strcmp(e->d_name + l - sl, suffix))
            n++;
    }
    closedir(d);
    return n;
}

START_TEST(test_crash_after_each_commit_step_leaves_valid_log)
{
    for (int step = 1; step <= 5; step++) {
        teardown();
        setup();
        seg_log *log = open_log(2048);
        int seq = 0;
        for (int i = 0; i < 30; i++)
            append_keys(log, 10, 9, &seq, 1000, KP_CODEC_LZ4, false);
        int64_t end = seg_log_end(log);
        rec_seen *before = calloc(4096, sizeof *before);
        int nbefore = read_all(log, before, 4096);
        seg_clean_policy p = policy();
        seg_clean_job *j;
        ck_assert_int_eq(seg_clean_plan(log, &p, &j), 1);
        seg_clean_crash_after(j, step);
        ck_assert_int_ne(seg_clean_run(j, NULL), 0);
        seg_clean_finish(log, j, NULL);     /* a "dead" process installs nothing */
        seg_close(log);

        log = open_log(2048);
        ck_assert_int_eq(seg_log_end(log), end);
        int64_t newest[9];
        for (int k = 0; k < 9; k++)
            newest[k] = -1;
        for (int64_t o = 0; o < end; o++)
            newest[o % 9] = o;
        /* Either the old log whole (step 1) or the compacted one: every
         * key's newest value at its offset, never a torn mix. */
        check_newest(log, newest, 9, true);
        rec_seen *after = calloc(4096, sizeof *after);
        int nafter = read_all(log, after, 4096);
        if (step == 1)
            ck_assert_int_eq(nafter, nbefore);
        else
            ck_assert_int_lt(nafter, nbefore);
        ck_assert_int_eq(count_files(".swap"), 0);
        ck_assert_int_eq(count_files(".deleted"), 0);
        free(before);
        free(after);
        /* And it compacts fine afterwards. */
        ck_assert_int_ge(clean_once(log, &p, NULL), 0);
        check_newest(log, newest, 9, true);
        seg_close(log);
    }
}
END_TEST

START_TEST(test_small_dedupe_buffer_cleans_a_prefix)
{
    seg_log *log = open_log(4096);
    int seq = 0;
    for (int i = 0; i < 300; i++)
        append_keys(log, 10, 3000, &seq, 1000, KP_CODEC_NONE, false);
    int64_t end = seg_log_end(log);
    seg_clean_policy p = policy();
    p.dedupe_buffer_bytes = 16 * 1024;      /* ~800 keys per pass */
    seg_clean_stats st;
    int passes = 0;
    do {
        ck_assert_int_eq(clean_once(log, &p, &st), 1);
        passes++;
    } while (st.partial && passes < 20);
    ck_assert_int_gt(passes, 1);
    int64_t newest[3000];
    for (int k = 0; k < 3000; k++)
        newest[k] = -1;
    for (int64_t o = 0; o < end; o++)
        newest[o % 3000] = o;
    check_newest(log, newest, 3000, true);
    seg_close(log);
}
END_TEST

/* `versions` rounds over `keys` keys in closed segments, then one batch in
 * the active one; cleaned with a `buffer` byte dedupe buffer. */
static void clean_many_keys(int keys, int versions, size_t buffer,
                            seg_clean_stats *st)
{
    seg_log *log = open_log(1 << 20);
    int seq = 0;
    for (int i = 0; i < keys * versions / 100; i++)
        append_keys(log, 100, keys, &seq, 1000, KP_CODEC_NONE, false);
    seg_roll(log, 2000);
    append_keys(log, 10, keys, &seq, 2000, KP_CODEC_NONE, false);
    seg_clean_policy p = policy();
    p.dedupe_buffer_bytes = buffer;
    ck_assert_int_eq(clean_once(log, &p, st), 1);
    seg_close(log);
}

START_TEST(test_offset_map_grows_to_the_keys_it_meets)
{
    /* 100,000 keys need the map to double twice past its first size
     * (65,536 slots, grown at half full); a 4 MiB buffer allows 262,144. */
    seg_clean_stats st;
    clean_many_keys(100000, 2, 4 << 20, &st);
    ck_assert(!st.partial);
    ck_assert_int_eq(st.records_in, 200000);
    ck_assert_int_eq(st.records_out, 100000);
}
END_TEST

START_TEST(test_offset_map_full_after_growing_cleans_a_prefix)
{
    /* 2 MiB holds 131,072 slots, filled to 0.8 (104,857 keys) once grown
     * to it: 150,000 distinct keys do not fit, the map ends at the batch
     * that would overflow it. */
    seg_clean_stats st;
    clean_many_keys(150000, 2, 2 << 20, &st);
    ck_assert(st.partial);
    ck_assert_int_gt(st.clean_to, 104857 - 100);
    ck_assert_int_le(st.clean_to, 104857);
}
END_TEST

START_TEST(test_deferred_delete_keeps_files_until_unlinked)
{
    seg_log *log = open_log(2048);
    seg_set_deferred_delete(log, true);
    int seq = 0;
    for (int i = 0; i < 30; i++)
        append_keys(log, 10, 1000, &seq, 1000, KP_CODEC_NONE, false);
    seg_range r;
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 100, &r), 0);
    ck_assert_int_gt(r.len, 0);
    uint64_t freed;
    int n = seg_delete_old(log, 2000, -1, &freed);
    ck_assert_int_gt(n, 0);
    ck_assert_int_eq(seg_segment_count(log), 1);
    ck_assert_int_gt(seg_log_start(log), 0);
    ck_assert_int_eq(count_files(".log.deleted"), 0);   /* the owner only detached */
    seg_dead *d = seg_take_dead(log);
    seg_dead_rename(d);
    ck_assert_int_eq(count_files(".log.deleted"), n);
    ck_assert_int_eq(seg_dead_count(d), n);
    ck_assert_uint_eq(seg_dead_bytes(d), freed);
    ck_assert_ptr_null(seg_take_dead(log));
    seg_dead_unlink(d);
    ck_assert_int_eq(count_files(".deleted"), 0);
    /* The fetch that held a range still reads its bytes. */
    uint8_t buf[64];
    ck_assert_int_eq(pread(r.fd, buf, sizeof buf, r.pos), (ssize_t)sizeof buf);
    seg_range r2;
    ck_assert_int_eq(seg_read(log, 0, INT64_MAX, 100, &r2), KP_OFFSET_OUT_OF_RANGE);
    seg_range_release(&r);
    seg_close(log);
}
END_TEST

START_TEST(test_retention_waits_for_segments_under_cleaning)
{
    seg_log *log = open_log(2048);
    int seq = 0;
    for (int i = 0; i < 30; i++)
        append_keys(log, 10, 5, &seq, 1000, KP_CODEC_NONE, false);
    seg_clean_policy p = policy();
    seg_clean_job *j;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 1);
    int segs = seg_segment_count(log);
    ck_assert_int_eq(seg_delete_old(log, 5000, -1, NULL), 0);
    ck_assert_int_eq(seg_segment_count(log), segs);
    ck_assert_int_eq(seg_truncate(log, 3), SEG_E_STATE);
    ck_assert_int_eq(seg_clean_run(j, NULL), 0);
    ck_assert_int_eq(seg_clean_finish(log, j, NULL), 0);
    ck_assert_int_gt(seg_delete_old(log, 5000, -1, NULL), 0);
    seg_close(log);
}
END_TEST

START_TEST(test_cancelled_run_swaps_nothing)
{
    seg_log *log = open_log(2048);
    int seq = 0;
    for (int i = 0; i < 30; i++)
        append_keys(log, 10, 5, &seq, 1000, KP_CODEC_NONE, false);
    rec_seen *r = calloc(4096, sizeof *r);
    int before = read_all(log, r, 4096);
    seg_clean_policy p = policy();
    seg_clean_job *j;
    ck_assert_int_eq(seg_clean_plan(log, &p, &j), 1);
    atomic_bool cancel = true;
    ck_assert_int_eq(seg_clean_run(j, &cancel), SEG_E_STATE);
    seg_clean_finish(log, j, NULL);
    ck_assert_int_eq(read_all(log, r, 4096), before);
    free(r);
    seg_close(log);
}
END_TEST

/* ---- transactions (cleaner.c X1 and cleaner.c X2) --------------------------------------------- */
/* One batch of producer pid: a transactional record (key, value "v<offset>")
 * or, control, a marker (COMMIT or ABORT).  Returns its offset. */
static int64_t append_txn_epoch(seg_log *log, int64_t pid, int16_t epoch, const char *key,
                                bool control, bool commit)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_NONE);
    kp_bb_set_producer(&bb, pid, epoch, control ? -1 : 0);
    bb.extra_attrs = KP_ATTR_TRANSACTIONAL | (control ? KP_ATTR_CONTROL : 0);
    if (control) {
        const uint8_t k[4] = { 0, 0, 0, commit ? 1 : 0 }, v[6] = { 0 };
        kp_bb_add(&bb, 1000, k, 4, v, 6, NULL, 0);
    } else {
        char v[32];
        snprintf(v, sizeof v, "v%lld", (long long)seg_log_end(log));
        kp_bb_add(&bb, 1000, key, (int32_t)strlen(key), v, (int32_t)strlen(v), NULL, 0);
    }
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    int64_t base;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 1000, &base), 0);
    kp_buf_free(&b);
    return base;
}

static int64_t append_txn(seg_log *log, int64_t pid, const char *key, bool control,
                          bool commit)
{
    return append_txn_epoch(log, pid, 0, key, control, commit);
}

START_TEST(test_aborted_records_dropped_and_never_hide_committed_ones)
{
    seg_log *log = open_log(2048);
    int64_t committed = append_txn(log, 1, "k0", false, false);
    append_txn(log, 1, NULL, true, true);                      /* COMMIT */
    int64_t aborted = append_txn(log, 2, "k0", false, false);  /* newer, aborted */
    append_txn(log, 2, "k1", false, false);
    int64_t abort = append_txn(log, 2, NULL, true, false);     /* ABORT */
    seg_aborted_txn e = { 2, aborted, abort, abort + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
    dirty_more(log, 30);
    ck_assert_int_gt(seg_segment_count(log), 2);

    /* cleaner.c X1: an open transaction from offset 0 holds every segment back */
    seg_clean_policy p = policy();
    p.has_unstable = true;
    p.unstable_from = 0;
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 0);

    p.has_unstable = false;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    rec_seen *r = calloc(4096, sizeof *r);
    int n = read_all(log, r, 4096);
    int k0 = 0, k1 = 0, markers = 0;
    for (int i = 0; i < n; i++) {
        if (r[i].attrs & KP_ATTR_CONTROL) {
            markers++;
            continue;
        }
        if (strcmp(r[i].key, "k0") == 0) {
            k0++;
            ck_assert_int_eq(r[i].offset, committed);    /* the committed value */
        }
        k1 += strcmp(r[i].key, "k1") == 0;
    }
    ck_assert_int_eq(k0, 1);
    ck_assert_int_eq(k1, 0);                             /* only ever aborted */
    ck_assert_int_eq(markers, 2);                        /* markers stay (cleaner.c X3) */
    ck_assert_int_eq(seg_txn_count(log), 0);             /* its data gone (cleaner.c X4) */
    free(r);
    seg_close(log);
    log = open_log(2048);                                /* its file was rewritten */
    ck_assert_int_eq(seg_txn_count(log), 0);
    seg_close(log);
}
END_TEST

/* The markers left in the log, oldest first: offsets, whether stamped. */
static int markers_of(seg_log *log, int64_t *off, bool *stamped, int64_t *horizon, int cap)
{
    rec_seen *r = calloc(4096, sizeof *r);
    int n = read_all(log, r, 4096), m = 0;
    for (int i = 0; i < n; i++) {
        if (!(r[i].attrs & KP_ATTR_CONTROL))
            continue;
        ck_assert_int_lt(m, cap);
        off[m] = r[i].offset;
        stamped[m] = (r[i].attrs & KP_ATTR_DELETE_HORIZON) != 0;
        horizon[m++] = r[i].base_ts;
    }
    free(r);
    return m;
}

/* The value of key k, or "" when the log has none. */
static void value_of(seg_log *log, const char *k, char *out, size_t cap)
{
    rec_seen *r = calloc(4096, sizeof *r);
    int n = read_all(log, r, 4096);
    out[0] = 0;
    for (int i = 0; i < n; i++)
        if (!(r[i].attrs & KP_ATTR_CONTROL) && strcmp(r[i].key, k) == 0)
            snprintf(out, cap, "%s", r[i].value);
    free(r);
}

START_TEST(test_empty_markers_go_after_delete_retention)
{
    seg_log *log = open_log(2048);
    append_txn(log, 1, "k0", false, false);
    int64_t c1 = append_txn(log, 1, NULL, true, true);          /* COMMIT, to be emptied */
    int64_t a2first = append_txn(log, 2, "k1", false, false);
    int64_t a2 = append_txn(log, 2, NULL, true, false);         /* ABORT */
    seg_aborted_txn e = { 2, a2first, a2, a2 + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
    int64_t newest = append_txn(log, 3, "k0", false, false);    /* supersedes pid 1's */
    int64_t c3 = append_txn(log, 3, NULL, true, true);          /* COMMIT, data kept */
    dirty_more(log, 30);

    seg_clean_policy p = policy();
    p.delete_retention_ms = 1000;
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    int64_t off[8], hz[8];
    bool stamped[8];
    /* cleaner.c X3: the two empty markers are stamped now + delete.retention.ms, the
     * one whose transaction still has a record is left as it was. */
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 8), 3);
    ck_assert_int_eq(off[0], c1);
    ck_assert(stamped[0]);
    ck_assert_int_eq(hz[0], 1001000);
    ck_assert_int_eq(off[1], a2);
    ck_assert(stamped[1]);
    ck_assert_int_eq(hz[1], 1001000);
    ck_assert_int_eq(off[2], c3);
    ck_assert(!stamped[2]);
    ck_assert_int_eq(st.markers_removed, 0);
    ck_assert_int_eq(seg_txn_count(log), 0);                    /* cleaner.c X4 */

    /* Before the horizon nothing is due; a restart keeps the horizon (cleaner.c T3). */
    p.now_ms = 1000999;
    ck_assert_int_eq(clean_once(log, &p, &st), 0);
    seg_close(log);
    log = open_log(2048);
    ck_assert_int_eq(seg_txn_count(log), 0);
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 8), 3);

    p.now_ms = 1001000;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_eq(st.markers_removed, 2);
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 8), 1);
    ck_assert_int_eq(off[0], c3);
    ck_assert(!stamped[0]);
    char v[32], want[32];
    value_of(log, "k0", v, sizeof v);
    snprintf(want, sizeof want, "v%lld", (long long)newest);
    ck_assert_str_eq(v, want);
    value_of(log, "k1", v, sizeof v);
    ck_assert_str_eq(v, "");
    seg_close(log);
    log = open_log(2048);                                       /* the same after a restart */
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 8), 1);
    ck_assert_int_eq(seg_txn_count(log), 0);
    seg_close(log);
}
END_TEST

/* A marker past its horizon but at or past the newest producer snapshot
 * stays (a replay from the snapshot needs it: cleaner.c X3); the log is
 * due, with nothing dirty, once the snapshot passes it. */
START_TEST(test_marker_past_the_producer_snapshot_waits_for_it)
{
    seg_log *log = open_log(2048);
    int64_t first = append_txn(log, 2, "k1", false, false);
    int64_t abort = append_txn(log, 2, NULL, true, false);
    seg_aborted_txn e = { 2, first, abort, abort + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
    dirty_more(log, 30);
    seg_clean_policy p = policy();
    p.delete_retention_ms = 0;
    p.markers_below = abort;                        /* the snapshot is before it */
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);  /* stamps: horizon = now */
    ck_assert_int_eq(seg_txn_count(log), 0);
    p.now_ms += 1;
    dirty_more(log, 3);                             /* due by dirt once more */
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_eq(st.markers_removed, 0);        /* held for the snapshot */
    ck_assert_int_eq(st.markers_held, abort);
    int64_t off[4], hz[4];
    bool stamped[4];
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 4), 1);
    ck_assert(stamped[0]);
    ck_assert_int_eq(clean_once(log, &p, &st), 0);  /* nothing new: not due */
    p.markers_below = seg_log_end(log);             /* a snapshot at the end */
    ck_assert_int_eq(clean_once(log, &p, &st), 1);  /* due without new writes */
    ck_assert_int_eq(st.markers_removed, 1);
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 4), 0);
    seg_close(log);
}
END_TEST

/* An ABORT whose records lie partly past the cleaned segments keeps its
 * marker unstamped and its index entry: its data is not gone yet. */
START_TEST(test_abort_reaching_past_the_cleaned_part_keeps_its_entry)
{
    seg_log *log = open_log(2048);
    int64_t first = append_txn(log, 2, "k1", false, false);
    dirty_more(log, 30);                                        /* rolls segments */
    int64_t abort = append_txn(log, 2, NULL, true, false);
    seg_aborted_txn e = { 2, first, abort, abort + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
    seg_clean_policy p = policy();
    p.delete_retention_ms = 0;
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    char v[32];
    value_of(log, "k1", v, sizeof v);
    ck_assert_str_eq(v, "");                                    /* cleaner.c X2 still */
    /* the marker is in the active segment: neither cleaned nor its entry */
    ck_assert_int_eq(seg_txn_count(log), 1);
    int64_t off[4], hz[4];
    bool stamped[4];
    ck_assert_int_eq(markers_of(log, off, stamped, hz, 4), 1);
    ck_assert(!stamped[0]);
    seg_close(log);
}
END_TEST

/* Producer pid's batch of the given keys (gzip, so that the emptied
 * header must also say "uncompressed"); its base offset. */
static int64_t append_producer(seg_log *log, int64_t pid, int32_t seq, bool txn, int nkeys)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_GZIP);
    kp_bb_set_producer(&bb, pid, 3, seq);
    bb.extra_attrs = txn ? KP_ATTR_TRANSACTIONAL : 0;
    char k[8], v[32];
    for (int i = 0; i < nkeys; i++) {
        snprintf(k, sizeof k, "k%d", i);
        snprintf(v, sizeof v, "v%lld", (long long)(seg_log_end(log) + i));
        kp_bb_add(&bb, 1000 + i, k, (int32_t)strlen(k), v, (int32_t)strlen(v), NULL, 0);
    }
    ck_assert_int_gt(kp_bb_finish(&bb), 0);
    int64_t base;
    ck_assert_int_eq(seg_append(log, b.data, b.len, 1000, &base), 0);
    kp_buf_free(&b);
    return base;
}

/* The header of the batch at offset base, as the log serves it; false
 * when no batch starts there. */
static bool batch_at(seg_log *log, int64_t base, kp_batch *out)
{
    seg_range r;
    ck_assert_int_eq(seg_read(log, base, INT64_MAX, 1 << 20, &r), 0);
    uint8_t *buf = malloc(r.len ? r.len : 1);
    ck_assert_int_eq(pread(r.fd, buf, r.len, r.pos), (ssize_t)r.len);
    bool found = false;
    for (size_t pos = 0; pos < r.len && !found;) {
        int64_t sz = kp_batch_check_stored(buf + pos, r.len - pos, out);
        ck_assert_int_gt(sz, 0);                        /* CRC and lengths valid */
        found = out->BaseOffset == base;
        pos += (size_t)sz;
    }
    free(buf);
    seg_range_release(&r);
    return found;
}

START_TEST(test_each_producers_last_batch_stays_empty_if_need_be)
{
    seg_log *log = open_log(2048);
    int64_t a = append_producer(log, 7, 40, false, 2);   /* superseded, pid 7's last */
    int64_t gone = append_producer(log, 9, 5, false, 2); /* superseded, pid 9 not live */
    int64_t t = append_producer(log, 11, 0, true, 2);    /* aborted, pid 11's last */
    int64_t abort = append_txn(log, 11, NULL, true, false);
    seg_aborted_txn e = { 11, t, abort, abort + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
    int64_t newer = append_producer(log, 8, 0, false, 2);
    dirty_more(log, 30);
    seg_producer_last live[] = { { .pid = 11, .last_offset = t + 1, .epoch = 3 },
                                 { .pid = 8, .last_offset = newer + 1, .epoch = 3 },
                                 { .pid = 7, .last_offset = a + 1, .epoch = 3 } };
    seg_clean_policy p = policy();
    p.delete_retention_ms = 0;
    p.producers = live;
    p.nproducers = 3;
    seg_clean_stats st;
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert_int_eq(st.batches_emptied, 2);

    kp_batch h;
    ck_assert(batch_at(log, a, &h));                     /* cleaner.c X5 */
    ck_assert_int_eq(h.RecordsCount, 0);
    ck_assert_int_eq(h.ProducerId, 7);
    ck_assert_int_eq(h.ProducerEpoch, 3);
    ck_assert_int_eq(h.BaseSequence, 40);
    ck_assert_int_eq(h.LastOffsetDelta, 1);              /* still ends where it did */
    ck_assert_int_eq(h.Attributes & KP_ATTR_CODEC_MASK, KP_CODEC_NONE);
    ck_assert_int_eq(h.BaseTimestamp, 1001);             /* its MaxTimestamp */
    ck_assert(!batch_at(log, gone, &h));                 /* an expired producer's went */
    ck_assert(batch_at(log, t, &h));                     /* aborted: its header stays */
    ck_assert_int_eq(h.RecordsCount, 0);
    ck_assert(h.Attributes & KP_ATTR_TRANSACTIONAL);
    ck_assert(batch_at(log, abort, &h));                 /* so its marker and entry do */
    ck_assert_int_eq(seg_txn_count(log), 1);
    ck_assert(batch_at(log, newer, &h));
    ck_assert_int_eq(h.RecordsCount, 2);
    char v[32], want[32];
    value_of(log, "k0", v, sizeof v);                    /* no record came back */
    snprintf(want, sizeof want, "v%lld", (long long)newer);
    ck_assert_str_eq(v, want);

    /* a second run keeps them as they are */
    dirty_more(log, 30);
    ck_assert_int_eq(clean_once(log, &p, &st), 1);
    ck_assert(batch_at(log, a, &h));
    ck_assert_int_eq(h.RecordsCount, 0);
    ck_assert(batch_at(log, abort, &h));

    /* the producers gone (expired): the empty batches go, then the
     * marker they held, past its horizon, and its index entry */
    p.nproducers = 0;
    for (int run = 0; run < 3; run++) {
        dirty_more(log, 30);
        p.now_ms += 1000;
        ck_assert_int_eq(clean_once(log, &p, &st), 1);
    }
    ck_assert(!batch_at(log, a, &h));
    ck_assert(!batch_at(log, t, &h));
    ck_assert(!batch_at(log, abort, &h));
    ck_assert_int_eq(seg_txn_count(log), 0);
    seg_close(log);
}
END_TEST

START_TEST(test_a_producers_newest_marker_keeps_its_bumped_epoch)
{
    seg_log *log = open_log(2048);
    int64_t t = append_txn_epoch(log, 20, 4, "k1", false, false);
    int64_t abort = append_txn_epoch(log, 20, 5, NULL, true, false);   /* epoch bumped */
    seg_aborted_txn e = { 20, t, abort, abort + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e), 0);
    int64_t other = append_txn_epoch(log, 21, 1, "k2", false, false);
    int64_t abort2 = append_txn_epoch(log, 21, 1, NULL, true, false);
    seg_aborted_txn e2 = { 21, other, abort2, abort2 + 1 };
    ck_assert_int_eq(seg_txn_add(log, &e2), 0);
    dirty_more(log, 30);
    /* producer 20's newest entry is its marker (no data since the bump);
     * producer 21 wrote data after its marker, in the active segment */
    seg_producer_last live[] = { { .pid = 20, .last_offset = -1, .epoch = 5 },
                                 { .pid = 21, .last_offset = INT64_MAX - 1, .epoch = 1 } };
    seg_clean_policy p = policy();
    p.delete_retention_ms = 0;
    p.producers = live;
    p.nproducers = 2;
    seg_clean_stats st;
    for (int run = 0; run < 3; run++) {
        dirty_more(log, 30);
        p.now_ms += 1000;
        ck_assert_int_eq(clean_once(log, &p, &st), 1);
    }
    kp_batch h;
    ck_assert(!batch_at(log, t, &h));                    /* aborted data goes */
    ck_assert(batch_at(log, abort, &h));                 /* the marker with epoch 5 stays */
    ck_assert_int_eq(h.ProducerEpoch, 5);
    ck_assert_int_eq(h.RecordsCount, 1);
    ck_assert(!batch_at(log, abort2, &h));               /* an empty one of another goes */
    seg_close(log);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_compaction_keeps_newest_per_key_at_original_offset,
        test_active_segment_never_compacted, test_min_compaction_lag_and_dirty_ratio_honoured,
        test_tombstones_dropped_after_delete_retention,
        test_tombstone_age_counts_from_first_compaction_not_its_timestamp,
        test_expired_tombstones_go_without_new_writes,
        test_delete_horizon_survives_reopen_and_recompression, test_clean_end_survives_restart,
        test_truncation_below_clean_end_forgets_checkpoint,
        test_checkpoint_past_the_log_end_is_dropped,
        test_future_timestamp_does_not_hold_back_compaction,
        test_compressed_batches_recompressed_with_their_codec,
        test_crash_after_each_commit_step_leaves_valid_log,
        test_small_dedupe_buffer_cleans_a_prefix, test_offset_map_grows_to_the_keys_it_meets,
        test_offset_map_full_after_growing_cleans_a_prefix,
        test_deferred_delete_keeps_files_until_unlinked,
        test_retention_waits_for_segments_under_cleaning, test_cancelled_run_swaps_nothing,
        test_aborted_records_dropped_and_never_hide_committed_ones,
        test_empty_markers_go_after_delete_retention,
        test_abort_reaching_past_the_cleaned_part_keeps_its_entry,
        test_marker_past_the_producer_snapshot_waits_for_it,
        test_each_producers_last_batch_stays_empty_if_need_be,
        test_a_producers_newest_marker_keeps_its_bumped_epoch,
    };
    return unit_run("seg_cleaner", "cleaner", tests, sizeof tests / sizeof *tests,
                    setup, teardown, 60);
}
