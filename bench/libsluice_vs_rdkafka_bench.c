/*
 * libsluice vs librdkafka against the same sluiced, same settings, same run.
 *
 *   build/bench/libsluice_vs_rdkafka_bench [N100] [N1K] [RATE]
 *       SLUICED (default build/sluiced), SLUICE_BENCH (default: sluice-bench
 *       next to sluiced) name the binaries.  Defaults: 2,000,000 × 100 B and
 *       500,000 × 1 KiB.  RATE (msgs/s): only the latency comparison, at
 *       that rate (for repeated runs at a rate a full run chose).
 *
 * Workloads, each on its own fresh topic (1 partition) per client:
 *   produce N × size as fast as possible: linger.ms=5, batch.size=1000000,
 *   acks=1, no compression, idempotence off, 256 MiB of queue, at most 5
 *   requests in flight (libsluice's default and ceiling; librdkafka's
 *   default is 1000000) and no cap on records per batch besides
 *   batch.size (librdkafka's batch.num.messages, default 10000, set to its
 *   maximum; libsluice has no such cap); then both
 *   clients consume each of the two topics from the beginning (assign, no
 *   group, default fetch settings, which are the same in both).  Each
 *   consume row compares the two clients on the same bytes: how a topic
 *   was written (batch sizes and boundaries against the 1 MiB
 *   max.partition.fetch.bytes) moves a client's read rate by up to ~2×,
 *   so comparing each client on the topic it wrote itself mixes the
 *   producers' batching into the consumer figure.  Then the produce
 *   latency: 100 B records at 50 % of the lower of the two peak produce
 *   rates, p99 of delivery-report minus send time, median of 3 runs of
 *   5 s per client, alternating (latency_compare).
 * Every run starts with sync(2), outside its clock: a produce run leaves
 * up to ~0.5 GB dirty in the page cache, and its writeback (30 s later, or
 * past dirty_background_ratio) stalled the broker's appends for tens to
 * hundreds of ms in whichever client's run it landed, alternately.
 * libsluice runs as the sluice-bench tool (its RESULT line is parsed);
 * librdkafka runs in this process with the equivalent loop.  Printed:
 * msgs/s for both and the ratio libsluice / librdkafka (target ≥ 1.0), and
 * the p99 latencies (target: libsluice ≤ librdkafka).
 */
#include "bench/bench_common.h"

#include <librdkafka/rdkafka.h>
#include <libgen.h>
#include <sys/resource.h>
#include <stdint.h>

typedef struct result {
    double msgs_per_s, p50, p99;
    long msgs;
    double cpu_s;             /* client CPU (user + system), whole run */
} result;

/* CPU seconds used so far by this process (who = RUSAGE_SELF: the
 * librdkafka runs) or by its waited-for children (RUSAGE_CHILDREN: the
 * sluice-bench runs; sluiced is only waited for at the end).  On a shared
 * machine the CPU a client spends per message is steadier than its rate. */
static double cpu_now(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Before each run, for both clients alike: what earlier runs wrote goes
 * to disk now rather than during this run (see the header). */
static void settle(void)
{
    sync();
}

/* ---- libsluice through sluice-bench ------------------------------------------- */

static char sluice_bench[1024];

static result run_sluice(const char *bs, const char *topic, int consume, long n, int size,
                         double rate, double duration)
{
    char cmd[2048], opt[128] = "";
    if (rate > 0 && duration > 0)
        snprintf(opt, sizeof opt, " -r %.0f -d %.1f", rate, duration);
    snprintf(cmd, sizeof cmd,
             "'%s' -q -b %s -t %s %s -n %ld -s %d -a 1 -X linger.ms=5 -X batch.size=1000000 "
             "-X buffer.memory=268435456 -X max.in.flight.requests.per.connection=5 "
             "-X log_level=4%s",
             sluice_bench, bs, topic, consume ? "-C" : "-P", n, size, opt);
    settle();
    double cpu0 = cpu_now(RUSAGE_CHILDREN);
    FILE *f = popen(cmd, "r");
    result r = { 0 };
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "RESULT", 6) != 0)
            continue;
        char *p;
        if ((p = strstr(line, "msgs_per_s=")))
            r.msgs_per_s = atof(p + 11);
        if ((p = strstr(line, " msgs=")))
            r.msgs = atol(p + 6);
        if ((p = strstr(line, "p50_ms=")))
            r.p50 = atof(p + 7);
        if ((p = strstr(line, "p99_ms=")))
            r.p99 = atof(p + 7);
    }
    if (!f || pclose(f) != 0)
        fprintf(stderr, "bench: %s failed\n", cmd);
    r.cpu_s = cpu_now(RUSAGE_CHILDREN) - cpu0;
    return r;
}

/* ---- librdkafka, in process --------------------------------------------------- */

static uint32_t *lat;
static size_t n_lat;
static long delivered;

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk; (void)opaque;
    if (m->err)
        return;
    delivered++;
    uint64_t us = now_us() - (uint64_t)(uintptr_t)m->_private;
    lat[n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

static void cset(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "conf %s=%s: %s\n", k, v, err);
        exit(1);
    }
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static result rdk_produce(const char *bs, const char *topic, long n, int size, double rate,
                          double duration)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    cset(c, "bootstrap.servers", bs);
    cset(c, "log_level", "3");
    cset(c, "linger.ms", "5");
    cset(c, "batch.size", "1000000");
    cset(c, "acks", "1");
    cset(c, "enable.idempotence", "false");
    cset(c, "compression.type", "none");
    cset(c, "queue.buffering.max.kbytes", "262144");
    cset(c, "queue.buffering.max.messages", "10000000");
    cset(c, "partitioner", "murmur2_random");
    cset(c, "max.in.flight.requests.per.connection", "5");
    cset(c, "batch.num.messages", "1000000");
    rd_kafka_conf_set_dr_msg_cb(c, dr_cb);
    settle();
    double cpu0 = cpu_now(RUSAGE_SELF);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md;
    rd_kafka_metadata(rk, 0, rkt, &md, 10000);        /* warm up outside the clock */
    rd_kafka_metadata_destroy(md);
    char *payload = malloc((size_t)size);
    srand(42);
    for (int i = 0; i < size; i++)
        payload[i] = (char)(rand() & 0xff);
    long cap = duration > 0 ? (long)(rate * duration * 1.2) + 1000 : n;
    lat = malloc(sizeof *lat * (size_t)cap);
    n_lat = 0;
    delivered = 0;
    double t0 = bench_now();
    long sent = 0;
    for (;;) {
        double t = bench_now();
        if (duration > 0 ? t - t0 >= duration : sent >= n)
            break;
        if (sent >= cap)
            break;
        if (rate > 0) {
            double due = t0 + (double)sent / rate;
            if (due > t) {
                rd_kafka_poll(rk, 0);
                double wait = due - bench_now();
                if (wait > 0.0002)
                    usleep((useconds_t)(wait * 1e6 > 1000 ? 1000 : wait * 1e6));
                continue;
            }
        }
        if (rd_kafka_produce(rkt, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, payload,
                             (size_t)size, NULL, 0, (void *)(uintptr_t)now_us()) != 0) {
            rd_kafka_poll(rk, 1);
            continue;
        }
        sent++;
        if ((sent & 1023) == 0 || rate > 0)
            rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 120000);
    double secs = bench_now() - t0;
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(payload);
    qsort(lat, n_lat, sizeof *lat, cmp_u32);
    result r = { delivered / secs, 0, 0, delivered, cpu_now(RUSAGE_SELF) - cpu0 };
    if (n_lat) {
        r.p50 = lat[(size_t)(0.50 * (double)(n_lat - 1))] / 1000.0;
        r.p99 = lat[(size_t)(0.99 * (double)(n_lat - 1))] / 1000.0;
    }
    free(lat);
    lat = NULL;
    return r;
}

static result rdk_consume(const char *bs, const char *topic, long n)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    cset(c, "bootstrap.servers", bs);
    cset(c, "log_level", "3");
    cset(c, "group.id", "rdk-bench");
    cset(c, "enable.auto.commit", "false");
    cset(c, "enable.partition.eof", "false");
    settle();
    double cpu0 = cpu_now(RUSAGE_SELF);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    rd_kafka_poll_set_consumer(rk);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(l, topic, 0)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    long got = 0;
    double t0 = 0, idle = bench_now();
    while (got < n) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        double t = bench_now();
        if (!m) {
            if (t - idle > 10)
                break;
            continue;
        }
        if (!m->err) {
            if (t0 == 0)
                t0 = t;
            got++;
            idle = t;
        }
        rd_kafka_message_destroy(m);
    }
    double secs = bench_now() - t0;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    result r = { t0 > 0 ? got / secs : 0, 0, 0, got, cpu_now(RUSAGE_SELF) - cpu0 };
    return r;
}

/* ---- main ------------------------------------------------------------------------ */

static double us_per_msg(result r)
{
    return r.msgs > 0 ? r.cpu_s * 1e6 / (double)r.msgs : 0;
}

static void row(const char *what, result s, result r)
{
    printf("%-48s %11.0f %11.0f %6.2f %8.3f %8.3f\n", what, s.msgs_per_s, r.msgs_per_s,
           r.msgs_per_s > 0 ? s.msgs_per_s / r.msgs_per_s : 0, us_per_msg(s), us_per_msg(r));
}

/* Latency pairs: LAT_RUNS × 5 s per client, alternating, so a burst of
 * load from elsewhere on a shared machine hits both; the median p99 of
 * each is compared. */
#define LAT_RUNS 3

static void latency_compare(const char *bs, double rate)
{
    double sp50[LAT_RUNS], sp99[LAT_RUNS], rp50[LAT_RUNS], rp99[LAT_RUNS];
    printf("produce latency at %.0f msgs/s, 100 B, %d x 5 s each, alternating:\n", rate,
           LAT_RUNS);
    for (int i = 0; i < LAT_RUNS; i++) {
        result sl = run_sluice(bs, "sl-lat", 0, 0, 100, rate, 5);
        result rl = rdk_produce(bs, "rk-lat", 0, 100, rate, 5);
        printf("  run %d: p50/p99 ms  libsluice %.3f / %.3f (%ld msgs)  "
               "librdkafka %.3f / %.3f (%ld msgs)\n", i + 1, sl.p50, sl.p99, sl.msgs, rl.p50,
               rl.p99, rl.msgs);
        sp50[i] = sl.p50, sp99[i] = sl.p99, rp50[i] = rl.p50, rp99[i] = rl.p99;
    }
    double s99 = bench_median(sp99, LAT_RUNS), r99 = bench_median(rp99, LAT_RUNS);
    printf("  median p50 ms  libsluice %.3f  librdkafka %.3f\n", bench_median(sp50, LAT_RUNS),
           bench_median(rp50, LAT_RUNS));
    printf("  median p99 ms  libsluice %.3f  librdkafka %.3f  (ratio %.2f; target <= 1)\n", s99,
           r99, r99 > 0 ? s99 / r99 : 0);
}

int main(int argc, char **argv)
{
    long n100 = argc > 1 ? atol(argv[1]) : 2000000;
    long n1k = argc > 2 ? atol(argv[2]) : 500000;
    double lat_rate = argc > 3 ? atof(argv[3]) : 0;
    const char *sb = getenv("SLUICE_BENCH");
    if (sb && *sb) {
        snprintf(sluice_bench, sizeof sluice_bench, "%s", sb);
    } else {
        char d[1024];
        snprintf(d, sizeof d, "%s", bench_sluiced_path());
        snprintf(sluice_bench, sizeof sluice_bench, "%s/sluice-bench", dirname(d));
    }
    if (access(sluice_bench, X_OK) != 0) {
        fprintf(stderr, "bench: %s not found (make build/sluice-bench, or set SLUICE_BENCH)\n",
                sluice_bench);
        return 1;
    }
    bench_broker b = { 0 };
    const char *const extra[] = { "auto.create.topics.enable=false", NULL };
    bench_broker_start(&b, extra);
    int fd = bench_connect(b.port);
    const char *topics[] = { "sl-100", "rk-100", "sl-1k", "rk-1k", "sl-lat", "rk-lat" };
    const char *const tcfg[] = { "segment.bytes", "1073741824", NULL };
    for (int i = 0; i < 6; i++)
        if (fd < 0 || bench_create_topic(fd, topics[i], 1, tcfg) != 0) {
            fprintf(stderr, "bench: cannot create %s\n", topics[i]);
            bench_broker_cleanup(&b);
            return 1;
        }
    close(fd);
    char bs[64];
    snprintf(bs, sizeof bs, "127.0.0.1:%d", b.port);

    if (lat_rate > 0) {
        latency_compare(bs, lat_rate);
        bench_broker_cleanup(&b);
        return 0;
    }
    result sp100 = run_sluice(bs, "sl-100", 0, n100, 100, 0, 0);
    result rp100 = rdk_produce(bs, "rk-100", n100, 100, 0, 0);
    result sc100[2], rc100[2], sc1k[2], rc1k[2];
    for (int i = 0; i < 2; i++) {
        sc100[i] = run_sluice(bs, topics[i], 1, n100, 100, 0, 0);
        rc100[i] = rdk_consume(bs, topics[i], n100);
    }
    result sp1k = run_sluice(bs, "sl-1k", 0, n1k, 1024, 0, 0);
    result rp1k = rdk_produce(bs, "rk-1k", n1k, 1024, 0, 0);
    for (int i = 0; i < 2; i++) {
        sc1k[i] = run_sluice(bs, topics[2 + i], 1, n1k, 1024, 0, 0);
        rc1k[i] = rdk_consume(bs, topics[2 + i], n1k);
    }
    double peak = sp100.msgs_per_s < rp100.msgs_per_s ? sp100.msgs_per_s : rp100.msgs_per_s;
    double rate = peak / 2;


    printf("libsluice vs librdkafka %s, same sluiced, linger.ms=5 batch.size=1000000 acks=1, "
           "no compression, max.in.flight 5, no per-batch record cap, 1 partition\n",
           rd_kafka_version_str());
    printf("%-48s %11s %11s %6s %17s\n", "", "msgs/s", "msgs/s", "", "client CPU us/msg");
    printf("%-48s %11s %11s %6s %8s %8s\n", "workload", "libsluice", "librdkafka", "ratio",
           "sluice", "rdkafka");
    static const char *const writer[2] = { "libsluice", "librdkafka" };
    char w[96];
    snprintf(w, sizeof w, "produce %ld x 100 B", n100);
    row(w, sp100, rp100);
    for (int i = 0; i < 2; i++) {
        snprintf(w, sizeof w, "consume %ld x 100 B written by %s", n100, writer[i]);
        row(w, sc100[i], rc100[i]);
    }
    snprintf(w, sizeof w, "produce %ld x 1 KiB", n1k);
    row(w, sp1k, rp1k);
    for (int i = 0; i < 2; i++) {
        snprintf(w, sizeof w, "consume %ld x 1 KiB written by %s", n1k, writer[i]);
        row(w, sc1k[i], rc1k[i]);
    }
    printf("(rate: 50%% of the lower of the two 100 B peak produce rates)\n");
    fflush(stdout);
    latency_compare(bs, rate);
    bench_broker_cleanup(&b);
    int bad = sp100.msgs < n100 || sp1k.msgs < n1k;
    for (int i = 0; i < 2; i++)
        bad |= sc100[i].msgs < n100 || sc1k[i].msgs < n1k;
    if (bad)
        printf("WARNING: a libsluice run did not complete its count\n");
    return bad;
}
