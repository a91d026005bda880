/*
 * bench/seg_bench — the partition log's two hot paths against their peers.
 *
 *   1. Append throughput: seg_append of pre-built valid batches (1 KiB and
 *      16 KiB), one call per batch, beside a plain write() loop of the same
 *      sizes into the same directory in the same run.  The ratio is what
 *      the log costs over the bare syscall (target >= 0.9).  Runs alternate
 *      seg / write() and repeat, and files are removed between runs, so
 *      page-cache and writeback effects fall on both sides alike.
 *   2. Offset lookup: seg_read of random offsets (index binary search plus
 *      bounded header walk) on one segment and on 100 segments holding the
 *      same batches: the cost must not depend on the log's shape.
 *
 * Usage: seg_bench [dir]   (default: a fresh directory under /tmp)
 * Nothing is fsync'ed: both sides measure the page cache path, which is
 * what an acknowledged produce costs.
 */
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_common.h"
#include "protocol/kp.h"
#include "segments/seg.h"

#define TOTAL_BYTES   (512ull << 20)   /* per size, per side */
#define ROUNDS        8                /* split into alternating runs */
#define LOOKUP_BATCHES 100000
#define LOOKUPS       200000

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
    (void)st; (void)flag; (void)f;
    return remove(p);
}

static void rm_rf(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* One valid batch of about `size` bytes. */
static void make_batch(kp_buf *out, size_t size)
{
    static char val[1 << 16];
    memset(val, 'x', sizeof val);
    kp_batch_builder bb;
    kp_bb_init(&bb, out, KP_CODEC_NONE);
    kp_bb_add(&bb, 1700000000000LL, "key", 3, val, (int32_t)(size - 61 - 16),
              NULL, 0);
    if (kp_bb_finish(&bb) < 0) {
        fprintf(stderr, "seg_bench: cannot build a batch\n");
        exit(1);
    }
    kp_bb_free(&bb);
}

static double run_seg(const char *dir, uint8_t *batch, size_t len, uint64_t bytes)
{
    seg_open_opts o = { .dir = dir };
    seg_config_default(&o.cfg);
    seg_log *log;
    if (seg_open(&o, &log)) {
        fprintf(stderr, "seg_bench: seg_open %s failed\n", dir);
        exit(1);
    }
    double t = now_s();
    for (uint64_t done = 0; done < bytes; done += len) {
        int64_t base;
        if (seg_append(log, batch, len, 0, &base)) {
            fprintf(stderr, "seg_bench: seg_append failed\n");
            exit(1);
        }
    }
    t = now_s() - t;
    seg_destroy(log);
    return t;
}

static double run_write(const char *dir, const uint8_t *batch, size_t len,
                        uint64_t bytes)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/plain.out", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror("seg_bench: open");
        exit(1);
    }
    double t = now_s();
    for (uint64_t done = 0; done < bytes; done += len)
        if (write(fd, batch, len) != (ssize_t)len) {
            perror("seg_bench: write");
            exit(1);
        }
    t = now_s() - t;
    close(fd);
    unlink(path);
    return t;
}

static void bench_append(const char *root, size_t size, const char *label)
{
    kp_buf b;
    kp_buf_init(&b);
    make_batch(&b, size);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/append", root);
    uint64_t per_run = TOTAL_BYTES / ROUNDS;
    double ts = 0, tw = 0, ratio[ROUNDS];
    /* Warm-up pair, not counted: the first run pays for page allocation
     * and file-system metadata the later ones find ready. */
    run_seg(dir, b.data, b.len, per_run);
    mkdir(dir, 0755);
    run_write(dir, b.data, b.len, per_run);
    for (int r = 0; r < ROUNDS; r++) {      /* alternate who goes first */
        double a, w;
        if (r % 2 == 0) {
            a = run_seg(dir, b.data, b.len, per_run);
            mkdir(dir, 0755);
            w = run_write(dir, b.data, b.len, per_run);
        } else {
            mkdir(dir, 0755);
            w = run_write(dir, b.data, b.len, per_run);
            a = run_seg(dir, b.data, b.len, per_run);
        }
        ts += a;
        tw += w;
        ratio[r] = w / a;
    }
    qsort(ratio, ROUNDS, sizeof *ratio, bench_cmp_double);
    rm_rf(dir);
    double mb = (double)(per_run / b.len * b.len) * ROUNDS / 1e6;
    printf("append %s batches: seg %.0f MB/s, write() %.0f MB/s, ratio %.2f "
           "(median of %d paired runs %.2f)\n", label, mb / ts, mb / tw,
           tw / ts, ROUNDS, (ratio[ROUNDS / 2 - 1] + ratio[ROUNDS / 2]) / 2);
    fflush(stdout);
    kp_buf_free(&b);
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    return *x;
}

static double bench_lookup(const char *root, int segments, int *segs_out)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/lookup%d", root, segments);
    kp_buf b;
    kp_buf_init(&b);
    make_batch(&b, 1024);
    seg_open_opts o = { .dir = dir };
    seg_config_default(&o.cfg);
    o.cfg.segment_bytes = (uint64_t)LOOKUP_BATCHES * b.len / (uint64_t)segments + 1;
    seg_log *log;
    if (seg_open(&o, &log))
        exit(1);
    for (int i = 0; i < LOOKUP_BATCHES; i++) {
        int64_t base;
        if (seg_append(log, b.data, b.len, 0, &base))
            exit(1);
    }
    *segs_out = seg_segment_count(log);
    uint64_t x = 88172645463325252ull;
    int64_t end = seg_log_end(log);
    double t = now_s();
    for (int i = 0; i < LOOKUPS; i++) {
        seg_range r;
        if (seg_read(log, (int64_t)(rnd(&x) % (uint64_t)end), INT64_MAX, 64 << 10, &r) ||
            r.len == 0)
            exit(1);
        seg_range_release(&r);
    }
    t = now_s() - t;
    seg_destroy(log);
    kp_buf_free(&b);
    return t / LOOKUPS * 1e6;
}

int main(int argc, char **argv)
{
    char root[4096];
    if (argc > 1) {
        snprintf(root, sizeof root, "%s/seg_bench.%d", argv[1], (int)getpid());
        if (mkdir(root, 0755) < 0) {
            perror("seg_bench: mkdir");
            return 1;
        }
    } else {
        strcpy(root, "/tmp/seg_bench.XXXXXX");
        if (!mkdtemp(root)) {
            perror("seg_bench: mkdtemp");
            return 1;
        }
    }
    printf("seg_bench in %s: %llu MiB per size per side, %d alternating runs\n",
           root, (unsigned long long)(TOTAL_BYTES >> 20), ROUNDS);
    bench_append(root, 1024, "1KiB");
    bench_append(root, 16384, "16KiB");
    int s1, s100;
    double one = bench_lookup(root, 1, &s1);
    double hundred = bench_lookup(root, 100, &s100);
    printf("offset lookup (seg_read, random offset, max_bytes 64KiB, %d batches "
           "of 1KiB): %d segment %.2f us, %d segments %.2f us\n",
           LOOKUP_BATCHES, s1, one, s100, hundred);
    rm_rf(root);
    return 0;
}
