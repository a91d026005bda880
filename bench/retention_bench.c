/*
 * retention_bench — the two costs issue 7 bounds, measured in-process on
 * segments/ (the code the broker's loop and workers run):
 *
 *   1. A retention check over 10,000 partitions (seg_delete_old per
 *      partition, as daemon/replica/replica_retention.c does every
 *      log.retention.check.interval.ms): target < 100 ms.  Measured twice:
 *      nothing due (the usual case), and one segment due in every partition
 *      (detach + rename on the loop; the janitor's unlink timed apart).
 *      The fd limit (3 files per segment) does not allow 10,000 two-segment
 *      logs open at once, so they are opened 2,000 at a time and only the
 *      check calls are timed and summed.
 *   2. Compaction of a log with 100,000 distinct keys (seg_clean_plan +
 *      seg_clean_run + seg_clean_finish): target < 30 s for 1 GB.  The
 *      default is 256 MB to keep `make bench` short; `retention_bench 1024`
 *      runs the full 1 GB.
 *
 *   retention_bench [log MiB, default 256]
 */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protocol/kp.h"
#include "segments/seg.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st; (void)flag; (void)f;
    return remove(p);
}

static void append_batch(seg_log *log, int n, int64_t ts, int key0, int keys,
                         int vlen, int64_t now)
{
    static char val[4096];
    memset(val, 'v', sizeof val);
    kp_buf b;
    kp_buf_init(&b);
    kp_batch_builder bb;
    kp_bb_init(&bb, &b, KP_CODEC_NONE);
    char k[32];
    for (int i = 0; i < n; i++) {
        int kl = snprintf(k, sizeof k, "key-%08d", (key0 + i) % keys);
        kp_bb_add(&bb, ts, k, kl, val, vlen, NULL, 0);
    }
    if (kp_bb_finish(&bb) < 0 || seg_append(log, b.data, b.len, now, NULL) != 0) {
        fprintf(stderr, "append failed\n");
        exit(1);
    }
    kp_buf_free(&b);
}

static void bench_retention(const char *root)
{
    const int total = 10000, chunk = 2000;
    double check_idle = 0, check_due = 0, unlink_s = 0;
    int deleted = 0;
    for (int base = 0; base < total; base += chunk) {
        seg_log *logs[2000];
        for (int i = 0; i < chunk; i++) {
            char dir[512];
            snprintf(dir, sizeof dir, "%s/p-%d", root, base + i);
            seg_open_opts o = { .dir = dir };
            seg_config_default(&o.cfg);
            if (seg_open(&o, &logs[i]) != 0) {
                fprintf(stderr, "seg_open %s failed\n", dir);
                exit(1);
            }
            seg_set_deferred_delete(logs[i], true);
            append_batch(logs[i], 10, 1000, 0, 10, 100, 1000);
            seg_roll(logs[i], 2000);
            append_batch(logs[i], 10, 5000, 0, 10, 100, 5000);
        }
        double t0 = now_s();
        for (int i = 0; i < chunk; i++)         /* nothing older than 500 */
            deleted += seg_delete_old(logs[i], 500, -1, NULL);
        double t1 = now_s();
        seg_dead *dead[2000];
        for (int i = 0; i < chunk; i++) {       /* the closed one is due */
            deleted += seg_delete_old(logs[i], 3000, -1, NULL);
            dead[i] = seg_take_dead(logs[i]);
        }
        double t2 = now_s();
        for (int i = 0; i < chunk; i++)
            seg_dead_unlink(dead[i]);
        double t3 = now_s();
        check_idle += t1 - t0;
        check_due += t2 - t1;
        unlink_s += t3 - t2;
        for (int i = 0; i < chunk; i++)
            seg_destroy(logs[i]);
    }
    printf("retention check, %d partitions, nothing due:      %8.2f ms (target < 100 ms)\n",
           total, check_idle * 1e3);
    printf("retention check, %d partitions, 1 segment each:   %8.2f ms on the loop "
           "(detach + rename), %.2f ms unlink on the janitor; %d segments\n",
           total, check_due * 1e3, unlink_s * 1e3, deleted);
}

static void bench_compaction(const char *root, long mib)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/compact-0", root);
    seg_open_opts o = { .dir = dir };
    seg_config_default(&o.cfg);
    o.cfg.segment_bytes = 128u << 20;
    seg_log *log;
    if (seg_open(&o, &log) != 0)
        exit(1);
    seg_set_deferred_delete(log, true);
    const int keys = 100000, per_batch = 100, vlen = 200;
    uint64_t target = (uint64_t)mib << 20;
    int seq = 0;
    double t0 = now_s();
    while (seg_size_bytes(log) < target) {
        append_batch(log, per_batch, 1000, seq, keys, vlen, 1000);
        seq += per_batch;
    }
    seg_roll(log, 2000);
    append_batch(log, 10, 1000, 0, keys, vlen, 2000);
    double t1 = now_s();
    uint64_t before = seg_size_bytes(log);
    seg_clean_policy p = {
        .now_ms = 10000, .min_cleanable_dirty_ratio = 0.5,
        .delete_retention_ms = 86400000, .dedupe_buffer_bytes = 128u << 20,
    };
    seg_clean_job *j;
    if (seg_clean_plan(log, &p, &j) != 1) {
        fprintf(stderr, "nothing to compact?\n");
        exit(1);
    }
    double t2 = now_s();
    int rc = seg_clean_run(j, NULL);
    double t3 = now_s();
    seg_clean_stats st;
    seg_clean_finish(log, j, &st);
    double t4 = now_s();
    seg_dead_unlink(seg_take_dead(log));
    printf("compaction: %.0f MiB written in %.1f s (%d records, %d distinct keys)\n",
           (double)before / (1 << 20), t1 - t0, seq, keys);
    printf("compaction of %.0f MiB: plan %.2f ms, run %.2f s (rc %d), finish %.2f ms; "
           "%d segments -> %d, %lld -> %lld records, %.1f MiB -> %.1f MiB; "
           "%.0f MiB/s (target < 30 s per GiB: %.1f s/GiB)\n",
           (double)before / (1 << 20), (t2 - t1) * 1e3, t3 - t2, rc, (t4 - t3) * 1e3,
           st.segments_in, st.segments_out, (long long)st.records_in,
           (long long)st.records_out, (double)st.bytes_in / (1 << 20),
           (double)st.bytes_out / (1 << 20),
           (double)st.bytes_in / (1 << 20) / (t3 - t2),
           (t3 - t2) * (double)(1u << 30) / (double)st.bytes_in);
    seg_destroy(log);
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 256;
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
        r.rlim_cur = r.rlim_max;
        setrlimit(RLIMIT_NOFILE, &r);
    }
    char root[] = "/tmp/retention_bench.XXXXXX";
    if (!mkdtemp(root))
        return 1;
    bench_retention(root);
    bench_compaction(root, mib);
    nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}
