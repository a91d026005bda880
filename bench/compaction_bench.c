/*
 * compaction_bench — what a running compaction costs producers (issue 7,
 * Performance: "compaction of a 1 GB log with 100,000 distinct keys
 * finishes in < 30 s and costs producers < 10 % throughput while it runs").
 *
 *   build/bench/compaction_bench [sluiced] [log MiB, default 256] [pairs, default 3]
 *                                [io rate ...]
 *       (sluiced also from $SLUICED; default build/sluiced; each io rate is
 *       a log.cleaner.io.max.bytes.per.second to measure, "default" for
 *       the broker's own, which is also what runs when none is given)
 *
 * One measurement is a pair of runs with the same timeline, the same data
 * and the same producer, differing only in whether the cleaner runs:
 *
 *   1. a fresh sluiced with log.cleaner.enable=false: topic "compacted"
 *      (cleanup.policy=compact, segment.bytes=64 MiB) gets <log MiB> of
 *      keyed records (100,000 keys, 200 B values, ~10 versions per key),
 *      then the broker stops.
 *   2. sluiced again on that data, log.cleaner.backoff.ms=BACKOFF_S.  One
 *      producer connection sends Produce v7 acks=1 (100 x 100 B records, 4
 *      in flight) to topic "produce" from start to the end.
 *        compaction run: cleaner on; its first tick (start + BACKOFF_S)
 *          finds every closed segment dirty and compacts the whole log.
 *          "during" = [start + BACKOFF_S, cleaning/ removed], whose length
 *          D is printed as the compaction time.
 *        control run: cleaner off; "during" = [start + BACKOFF_S,
 *          start + BACKOFF_S + D] with the D just measured.
 *      The drop is 1 - during(compaction) / during(control): the same
 *      window after start in both, so page-cache state, writeback of the
 *      prefill and the broker's warm-up are alike and only the cleaner
 *      differs.  The pair is repeated and the median drop reported.
 *      Also printed, as a second opinion on a shared machine: the drop
 *      with each run's rate first divided by its own before/after mean,
 *      which cancels load that other processes put on one run and not
 *      the other (the verdict stays on the plain drop).
 *
 * "produce" keeps retention.bytes=64 MiB in 16 MiB segments
 * (file.delete.delay.ms=0, checked every 500 ms), so the producer is in a
 * steady state: without it 400+ MB/s of appends fill the dirty page limit
 * a few seconds in and the rate falls 3x from writeback throttling alone,
 * which swamps what the cleaner costs (and fills the disk).
 * Each run prints the cleaner thread's CPU seconds ("sluice-cleaner" in
 * /proc/PID/task) so the cost can be read against its duration.
 */
#include "bench/bench_common.h"

#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define KEYS          100000
#define KEY_VALUE     200
#define PROD_RECS     100
#define PROD_VALUE    100
#define PIPELINE      4
#define BACKOFF_S     6

static atomic_bool running;
static atomic_uint_least64_t acked;            /* messages to "produce" */

static void die(const char *what)
{
    fprintf(stderr, "compaction_bench: %s\n", what);
    exit(1);
}

/* Keyed prefill: KEYS/100 batches of 100 records cover every key once;
 * they are built once and sent round after round until `bytes`. */
static void prefill(int port, uint64_t bytes)
{
    int nb = KEYS / 100;
    kp_buf *reqs = calloc((size_t)nb, sizeof *reqs);
    char value[KEY_VALUE], key[32];
    memset(value, 'c', sizeof value);
    for (int i = 0; i < nb; i++) {
        kp_buf batch;
        kp_buf_init(&batch);
        kp_batch_builder bb;
        kp_bb_init(&bb, &batch, KP_CODEC_NONE);
        for (int k = 0; k < 100; k++) {
            int kl = snprintf(key, sizeof key, "key-%08d", i * 100 + k);
            kp_bb_add(&bb, 1700000000000LL, key, kl, value, KEY_VALUE, NULL, 0);
        }
        if (kp_bb_finish(&bb) < 0)
            die("cannot build a batch");
        kp_buf_init(&reqs[i]);
        bench_produce_req(&reqs[i], 4, "compaction-bench", "compacted", 1, &batch);
        kp_buf_free(&batch);
    }
    int fd = bench_connect(port);
    if (fd < 0)
        die("cannot connect");
    kp_buf r;
    kp_buf_init(&r);
    uint64_t sent = 0;
    int inflight = 0, i = 0;
    while (sent < bytes || inflight > 0) {
        while (sent < bytes && inflight < 16) {
            if (bench_send_frame(fd, &reqs[i]))
                die("prefill: connection lost");
            sent += reqs[i].len;
            i = (i + 1) % nb;
            inflight++;
        }
        if (bench_recv_frame(fd, &r))
            die("prefill: connection lost");
        if (bench_produce_error(&r) != 0)
            die("prefill: produce error");
        inflight--;
    }
    close(fd);
    kp_buf_free(&r);
    for (int k = 0; k < nb; k++)
        kp_buf_free(&reqs[k]);
    free(reqs);
}

static void *produce_loop(void *arg)
{
    int port = *(int *)arg;
    kp_buf batch, req, r;
    kp_buf_init(&batch);
    kp_batch_builder bb;
    kp_bb_init(&bb, &batch, KP_CODEC_NONE);
    char value[PROD_VALUE];
    memset(value, 'p', sizeof value);
    for (int i = 0; i < PROD_RECS; i++)
        kp_bb_add(&bb, 1700000000000LL + i, NULL, 0, value, PROD_VALUE, NULL, 0);
    if (kp_bb_finish(&bb) < 0)
        die("cannot build a batch");
    kp_buf_init(&req);
    bench_produce_req(&req, 4, "compaction-bench", "produce", 1, &batch);
    kp_buf_free(&batch);
    kp_buf_init(&r);
    int fd = bench_connect(port);
    if (fd < 0)
        die("cannot connect");
    int inflight = 0;
    while (atomic_load(&running)) {
        while (inflight < PIPELINE) {
            if (bench_send_frame(fd, &req))
                die("Produce: connection lost");
            inflight++;
        }
        if (bench_recv_frame(fd, &r))
            die("Produce: connection lost");
        inflight--;
        if (bench_produce_error(&r) == 0)
            atomic_fetch_add(&acked, PROD_RECS);
    }
    while (inflight-- > 0)
        if (bench_recv_frame(fd, &r))
            die("Produce: connection lost");
    close(fd);
    kp_buf_free(&req);
    kp_buf_free(&r);
    return NULL;
}

static uint64_t dir_bytes(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "du -sb --exclude='*.deleted' '%s' 2>/dev/null", dir);
    FILE *f = popen(cmd, "r");
    unsigned long long n = 0;
    if (f) {
        if (fscanf(f, "%llu", &n) != 1)
            n = 0;
        pclose(f);
    }
    return n;
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void sleep_until(double t)
{
    double d;
    while ((d = t - bench_now()) > 0)
        usleep(d > 0.01 ? 10000 : (useconds_t)(d * 1e6));
}

typedef struct sample { double t; uint64_t n; } sample;

static sample take(void)
{
    return (sample){ bench_now(), atomic_load(&acked) };
}

static double rate(sample a, sample b)
{
    return (double)(b.n - a.n) / (b.t - a.t);
}

/* CPU seconds of the broker's threads named `name` (0 if none). */
static double thread_cpu(pid_t pid, const char *name)
{
    char path[400], buf[1024];
    double sum = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/%d/task/%s/stat", (int)pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        /* "tid (comm) state ... utime(14) stime(15)" */
        char *open = strchr(buf, '('), *close = strrchr(buf, ')');
        unsigned long long ut, st;
        if (!open || !close || strncmp(open + 1, name, strlen(name)) != 0 ||
            sscanf(close + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                   &ut, &st) != 2)
            continue;
        sum += (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
    }
    if (d)
        closedir(d);
    return sum;
}

typedef struct result {
    double before, during, after;   /* acknowledged msgs/s */
    double secs;                    /* compaction time (D) */
    double cleaner_cpu;             /* cleaner thread CPU seconds */
    double mib_in, mib_out;
} result;

/* One run on a fresh data dir.  io: log.cleaner.io.max.bytes.per.second,
 * NULL for the broker's default; window: 0 for the compaction run (it
 * measures D), else the control run's D. */
static result run(uint64_t log_bytes, const char *io, double window)
{
    bench_broker b = { 0 };
    const char *off[] = { "log.cleaner.enable=false", "num.partitions=1", NULL };
    bench_broker_start(&b, off);
    int fd = bench_connect(b.port);
    const char *ccfg[] = { "cleanup.policy", "compact", "segment.bytes", "67108864", NULL };
    const char *pcfg[] = { "segment.bytes", "16777216", "retention.bytes", "67108864",
                           "file.delete.delay.ms", "0", NULL };
    if (fd < 0 || bench_create_topic(fd, "compacted", 1, ccfg) != 0 ||
        bench_create_topic(fd, "produce", 1, pcfg) != 0)
        die("cannot create topics");
    close(fd);
    prefill(b.port, log_bytes);
    bench_broker_stop(&b);

    bool compact = window == 0;
    char pdir[400], staging[420], backoff[64], iocfg[96], enable[64];
    snprintf(pdir, sizeof pdir, "%s/compacted-0", b.dir);
    snprintf(staging, sizeof staging, "%s/cleaning", pdir);
    snprintf(backoff, sizeof backoff, "log.cleaner.backoff.ms=%d", BACKOFF_S * 1000);
    snprintf(enable, sizeof enable, "log.cleaner.enable=%s", compact ? "true" : "false");
    snprintf(iocfg, sizeof iocfg, "log.cleaner.io.max.bytes.per.second=%s", io ? io : "");
    result res = { .mib_in = (double)dir_bytes(pdir) / 1048576 };
    const char *on[] = { backoff, enable, "log.retention.check.interval.ms=500",
                         io ? iocfg : NULL, NULL };
    bench_broker_start(&b, on);
    double start = bench_now();
    atomic_store(&running, true);
    atomic_store(&acked, 0);
    pthread_t th;
    pthread_create(&th, NULL, produce_loop, &b.port);

    sleep_until(start + 1);
    sample s0 = take();
    sleep_until(start + BACKOFF_S - 0.3);
    sample s1 = take();
    sleep_until(start + BACKOFF_S);
    sample s2 = take();                         /* the first tick: plan + run */
    if (compact) {
        double deadline = start + BACKOFF_S + 600;
        while (!exists(staging) && bench_now() < deadline)
            usleep(2000);
        while (exists(staging) && bench_now() < deadline)
            usleep(2000);
    } else {
        sleep_until(s2.t + window);
    }
    sample s3 = take();                         /* the rewrite is swapped in */
    res.cleaner_cpu = thread_cpu(b.pid, "sluice-cleaner");
    sleep_until(s3.t + 0.3);
    sample s4 = take();
    sleep_until(s4.t + (s1.t - s0.t));
    sample s5 = take();
    atomic_store(&running, false);
    pthread_join(th, NULL);
    res.mib_out = (double)dir_bytes(pdir) / 1048576;
    res.before = rate(s0, s1);
    res.during = rate(s2, s3);
    res.after = rate(s4, s5);
    res.secs = s3.t - s2.t;
    bench_broker_cleanup(&b);
    return res;
}

static void measure(uint64_t log_bytes, const char *io, int pairs)
{
    double drops[64], norms[64], secs[64];
    printf("  log.cleaner.io.max.bytes.per.second=%s\n", io ? io : "(broker default)");
    for (int i = 0; i < pairs; i++) {
        result c = run(log_bytes, io, 0);
        result k = run(log_bytes, io, c.secs);
        drops[i] = 100 * (1 - c.during / k.during);
        norms[i] = 100 * (1 - (c.during / ((c.before + c.after) / 2)) /
                              (k.during / ((k.before + k.after) / 2)));
        secs[i] = c.secs;
        printf("    pair %d: log %.0f -> %.1f MiB, compaction %.2f s (%.0f MB/s, cleaner CPU %.2f s)\n"
               "      produce msgs/s  compaction run: before %8.0f during %8.0f after %8.0f\n"
               "                      control run:    before %8.0f during %8.0f after %8.0f\n"
               "      drop during compaction %.1f%% (each run against its own "
               "before/after: %.1f%%)\n",
               i + 1, c.mib_in, c.mib_out, c.secs, c.mib_in * 1.048576 / c.secs,
               c.cleaner_cpu, c.before, c.during, c.after, k.before, k.during,
               k.after, drops[i], norms[i]);
        fflush(stdout);
    }
    qsort(drops, (size_t)pairs, sizeof *drops, bench_cmp_double);
    qsort(norms, (size_t)pairs, sizeof *norms, bench_cmp_double);
    qsort(secs, (size_t)pairs, sizeof *secs, bench_cmp_double);
    double drop = drops[pairs / 2];
    printf("  median: compaction %.2f s (max %.2f s), producer drop %.1f%% (min %.1f%%, "
           "max %.1f%%; against own before/after %.1f%%)  target drop < 10%%: %s\n",
           secs[pairs / 2], secs[pairs - 1], drop, drops[0], drops[pairs - 1],
           norms[pairs / 2], drop < 10 ? "met" : "MISSED");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    int pairs = argc > 3 ? atoi(argv[3]) : 3;
    if (pairs < 1 || pairs > 64)
        pairs = 3;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("compaction_bench: %llu MiB keyed log (%d keys, %d B values), producer "
           "Produce v7 acks=1 %d x %d B per batch, %d in flight, to another topic; "
           "%ld CPUs, %d pairs\n", (unsigned long long)mib, KEYS, KEY_VALUE, PROD_RECS,
           PROD_VALUE, PIPELINE, cpus, pairs);
    fflush(stdout);
    if (argc <= 4)
        measure(mib << 20, NULL, pairs);
    for (int i = 4; i < argc; i++)
        measure(mib << 20, strcmp(argv[i], "default") ? argv[i] : NULL, pairs);
    return 0;
}
