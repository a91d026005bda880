/*
 * Produce and consume throughput through librdkafka, sluiced vs librdkafka's
 * in-process mock broker (rd_kafka_mock_cluster_new), in the same run.
 *
 *   build/bench/rdkafka_produce_bench [path/to/sluiced] [messages]
 *       (sluiced also from $SLUICED; default build/sluiced; 2,000,000)
 *
 * Each side: one topic, one partition; N messages of 100 bytes produced
 * with linger.ms=5, acks=1, no compression; then all N consumed from the
 * beginning with the legacy consumer API (no group needed).  The mock
 * keeps only the last ~5 MB of a partition (rdkafka_mock.c, not
 * configurable in 2.0.2), so its consume rate is measured on what it
 * kept; the clock of a consume phase starts at the first message.  Printed:
 * msgs/s and MB/s per phase, the ratio sluice/mock, and sluiced's CPU
 * (utime+stime from /proc/PID/stat) per GB of payload produced / fetched.
 *
 * The mock broker keeps messages in the heap of this very process, so it
 * is an upper bound on what a broker can do for this client, not a peer
 * with durability; its CPU cannot be separated from the client's and is
 * not reported.
 */
#include "bench/bench_rdkafka.h"

#include <librdkafka/rdkafka_mock.h>

static void report(const char *what, const char *who, bench_rk_phase p)
{
    double mb = (double)p.msgs * BENCH_RK_MSG_SIZE / 1e6;
    printf("%-8s %-7s %9ld msgs in %6.2f s: %10.0f msgs/s %7.1f MB/s",
           what, who, p.msgs, p.secs, p.msgs / p.secs, mb / p.secs);
    if (p.cpu > 0 || !strcmp(who, "sluice"))
        printf("   broker CPU %.2f s = %.1f CPU-s/GB", p.cpu, p.cpu / (mb / 1000));
    printf("\n");
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    long n = argc > 2 ? atol(argv[2]) : 2000000;
    const char *topic = "bench-produce";

    /* sluiced */
    bench_broker b = { 0 };
    const char *const extra[] = { "auto.create.topics.enable=false", NULL };
    bench_broker_start(&b, extra);
    int fd = bench_connect(b.port);
    const char *const tcfg[] = { "segment.bytes", "1073741824", NULL };
    if (fd < 0 || bench_create_topic(fd, topic, 1, tcfg) != 0) {
        fprintf(stderr, "cannot create topic on sluiced\n");
        bench_broker_cleanup(&b);
        return 1;
    }
    close(fd);
    char bs[64];
    snprintf(bs, sizeof bs, "127.0.0.1:%d", b.port);
    bench_rk_phase sp = bench_rk_produce(bs, topic, n, b.pid);
    long sn = 0, mn = 0;
    bench_rk_phase sc = bench_rk_consume(bs, topic, &sn, b.pid);
    bench_broker_cleanup(&b);

    /* librdkafka mock cluster, in this process */
    char err[512];
    rd_kafka_conf_t *mc = rd_kafka_conf_new();
    bench_rk_conf(mc, "log_level", "3");
    rd_kafka_t *host = rd_kafka_new(RD_KAFKA_PRODUCER, mc, err, sizeof err);
    rd_kafka_mock_cluster_t *mock = rd_kafka_mock_cluster_new(host, 1);
    if (!mock) {
        fprintf(stderr, "cannot start the mock cluster\n");
        return 1;
    }
    rd_kafka_mock_topic_create(mock, topic, 1, 1);
    char mbs[256];
    snprintf(mbs, sizeof mbs, "%s", rd_kafka_mock_cluster_bootstraps(mock));
    bench_rk_phase mp = bench_rk_produce(mbs, topic, n, 0);
    bench_rk_phase mcn = bench_rk_consume(mbs, topic, &mn, 0);
    rd_kafka_mock_cluster_destroy(mock);
    rd_kafka_destroy(host);

    printf("librdkafka %s, %ld messages of %d bytes, linger.ms=5 acks=1, 1 partition\n",
           rd_kafka_version_str(), n, BENCH_RK_MSG_SIZE);
    report("produce", "sluice", sp);
    report("produce", "mock", mp);
    report("consume", "sluice", sc);
    report("consume", "mock", mcn);
    if (mn < n)
        printf("(the mock keeps only the last ~5 MB of a partition, so its consume rate is\n"
               " measured on the %ld messages it retained; sluice's on all %ld)\n", mn, sn);
    printf("ratio sluice/mock: produce %.2f, consume %.2f\n",
           (sp.msgs / sp.secs) / (mp.msgs / mp.secs),
           (sc.msgs / sc.secs) / (mcn.msgs / mcn.secs));
    return (sp.msgs == n && sc.msgs == n && mp.msgs == n && mcn.msgs == mn) ? 0 : 1;
}
