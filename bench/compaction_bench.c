/*
 * compaction_bench — what a running compaction costs producers (issue 7,
 * Performance: "costs producers < 10 % throughput while it runs").
 *
 *   build/bench/compaction_bench [path/to/sluiced] [log MiB, default 256]
 *       (sluiced also from $SLUICED; default build/sluiced)
 *
 * 1. sluiced with log.cleaner.enable=false: topic "compacted"
 *    (cleanup.policy=compact, segment.bytes=64 MiB) gets <log MiB> of keyed
 *    records (100,000 keys, 200 B values, so ~10 versions per key), then the
 *    broker stops.
 * 2. sluiced again on the same data with the cleaner on and
 *    log.cleaner.backoff.ms=BACKOFF_S: its first tick (BACKOFF_S after
 *    start) finds every closed segment dirty (clean_end is not persisted)
 *    and compacts the whole log on a worker.  One producer connection
 *    sends Produce v7 acks=1 (100 x 100 B records, 4 in flight) to another
 *    topic "produce" throughout; its acknowledged messages are sampled:
 *      before   [start + 1 s, start + BACKOFF_S - 0.3 s]   no compaction
 *      during   [first tick, cleaning/ removed]            compaction runs
 *      after    a window as long as "before", once it is done
 *    and printed as msgs/s with during / mean(before, after).
 * Run with log.cleaner.io.max.bytes.per.second unset (unthrottled, Kafka's
 * default) and once throttled to 32 MB/s, which bounds what the worker
 * takes from the disk and the CPUs (and makes the "during" window long
 * enough to average: per-second produce rates on a small VM vary by
 * +-25 % with no compaction at all, from page-cache writeback).
 */
#include "bench/bench_common.h"

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

static void produce_frame(kp_buf *req, const char *topic, const kp_buf *batch)
{
    kp_buf_init(req);
    kp_req_hdr_write(req, KP_API_PRODUCE, 7, 4, "compaction-bench");
    kp_wr_string(req, NULL, 0);                 /* TransactionalId */
    kp_wr_i16(req, 1);                          /* acks */
    kp_wr_i32(req, 30000);
    kp_wr_array(req, 1);
    kp_wr_string(req, topic, -1);
    kp_wr_array(req, 1);
    kp_wr_i32(req, 0);
    kp_wr_bytes(req, batch->data, (int32_t)batch->len);
}

static int16_t produce_error(const kp_buf *r)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    kp_rd_array(&rd, 0);
    kp_rd_string(&rd);
    kp_rd_array(&rd, 0);
    kp_rd_i32(&rd);
    int16_t err = kp_rd_i16(&rd);
    return kp_rd_ok(&rd) ? err : -1;
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
        produce_frame(&reqs[i], "compacted", &batch);
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
        if (produce_error(&r) != 0)
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
    produce_frame(&req, "produce", &batch);
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
        if (produce_error(&r) == 0)
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

/* One measurement on a fresh data dir; io: the cleaner's byte rate, or
 * NULL for unthrottled. */
static void run(uint64_t log_bytes, const char *io)
{
    bench_broker b = { 0 };
    const char *off[] = { "log.cleaner.enable=false", "num.partitions=1", NULL };
    bench_broker_start(&b, off);
    int fd = bench_connect(b.port);
    const char *ccfg[] = { "cleanup.policy", "compact", "segment.bytes", "67108864", NULL };
    if (fd < 0 || bench_create_topic(fd, "compacted", 1, ccfg) != 0 ||
        bench_create_topic(fd, "produce", 1, NULL) != 0)
        die("cannot create topics");
    close(fd);
    double t0 = bench_now();
    prefill(b.port, log_bytes);
    double fill_s = bench_now() - t0;
    bench_broker_stop(&b);

    char pdir[400], staging[420], backoff[64], iocfg[96];
    snprintf(pdir, sizeof pdir, "%s/compacted-0", b.dir);
    snprintf(staging, sizeof staging, "%s/cleaning", pdir);
    snprintf(backoff, sizeof backoff, "log.cleaner.backoff.ms=%d", BACKOFF_S * 1000);
    snprintf(iocfg, sizeof iocfg, "log.cleaner.io.max.bytes.per.second=%s", io ? io : "1e308");
    uint64_t before_bytes = dir_bytes(pdir);
    const char *on[] = { backoff, iocfg, NULL };
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
    double deadline = start + BACKOFF_S + 600;
    while (!exists(staging) && bench_now() < deadline)
        usleep(2000);
    while (exists(staging) && bench_now() < deadline)
        usleep(2000);
    sample s3 = take();                         /* the rewrite is swapped in */
    sleep_until(s3.t + 0.3);
    sample s4 = take();
    sleep_until(s4.t + (s1.t - s0.t));
    sample s5 = take();
    atomic_store(&running, false);
    pthread_join(th, NULL);
    uint64_t after_bytes = dir_bytes(pdir);

    double before = rate(s0, s1), during = rate(s2, s3), after = rate(s4, s5);
    double base = (before + after) / 2, ratio = during / base;
    printf("  cleaner io %-10s  log %5.0f MiB (filled in %.1f s) -> %5.1f MiB, "
           "compaction %.1f s (%.0f MB/s)\n",
           io ? io : "unlimited", (double)before_bytes / 1048576, fill_s,
           (double)after_bytes / 1048576, s3.t - s2.t,
           (double)before_bytes / 1e6 / (s3.t - s2.t));
    printf("    produce before %9.0f msgs/s, during %9.0f msgs/s, after %9.0f msgs/s: "
           "during/base %.3f (drop %.1f%%)  target drop < 10%%: %s\n",
           before, during, after, ratio, 100 * (1 - ratio), ratio > 0.9 ? "met" : "MISSED");
    fflush(stdout);
    bench_broker_cleanup(&b);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("compaction_bench: %llu MiB keyed log (%d keys, %d B values), producer "
           "Produce v7 acks=1 %d x %d B per batch, %d in flight, to another topic; "
           "%ld CPUs\n", (unsigned long long)mib, KEYS, KEY_VALUE, PROD_RECS,
           PROD_VALUE, PIPELINE, cpus);
    fflush(stdout);
    run(mib << 20, NULL);
    run(mib << 20, "32000000");
    return 0;
}
