/*
 * Startup with 1,000 partitions: how long from exec until sluiced accepts
 * connections, after a clean stop (SIGTERM) and after a crash (SIGKILL).
 *
 * Every partition holds data both times, so the two differ only in what
 * recovery must do: after a clean stop each partition's recovery point is
 * its end and nothing is scanned; before the SIGKILL the same amount again
 * is written to every partition, so recovery scans (and CRC-checks) all of
 * it, from the recovery point to the end.  Printed: each time, and the
 * crash/clean ratio, the in-run peer of the crash case; and the stops
 * of the brokers started after the clean stop, given nothing to write.
 *
 *   build/bench/startup_bench [partitions] [KiB per partition]
 *       (defaults 1000 and 64: 64 MiB written before each stop)
 */
#include "bench/bench_common.h"

#define VALUE_SIZE 1000
#define BATCH_RECS 16               /* ~16 KB batches */

/* Writes about kib KiB to every partition of topics startup-0..: one
 * Produce per topic and round, the same batch to each of its partitions.
 * Returns the bytes written, or -1. */
static long write_all(int fd, int partitions, long kib)
{
    kp_buf batch, q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    long total = bench_batch(&batch, BATCH_RECS, VALUE_SIZE, 's') ? -1 : 0;
    long rounds = batch.len ? ((kib << 10) + (long)batch.len - 1) / (long)batch.len : 0;
    for (long round = 0; total >= 0 && round < rounds; round++)
        for (int t = 0, made = 0; total >= 0 && made < partitions; t++) {
            char name[32];
            snprintf(name, sizeof name, "startup-%d", t);
            int n = partitions - made < 100 ? partitions - made : 100;
            bench_produce_req(&q, (int32_t)(round * 1000 + t), "startup-bench", name, n, &batch);
            int err = bench_roundtrip(fd, &q, &r) ? -1 : bench_produce_error(&r);
            if (err) {
                fprintf(stderr, "startup_bench: produce to %s failed (%d)\n", name, err);
                total = -1;
                break;
            }
            total += (long)batch.len * n;
            made += n;
        }
    kp_buf_free(&batch);
    kp_buf_free(&q);
    kp_buf_free(&r);
    return total;
}

static long write_or_die(bench_broker *b, int partitions, long kib)
{
    int fd = bench_connect(b->port);
    long n = fd < 0 ? -1 : write_all(fd, partitions, kib);
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        bench_broker_cleanup(b);
        exit(1);
    }
    return n;
}

int main(int argc, char **argv)
{
    int partitions = argc > 1 ? atoi(argv[1]) : 1000;
    long kib = argc > 2 ? atol(argv[2]) : 64;
    bench_broker b = { 0 };
    const char *const extra[] = { "auto.create.topics.enable=false", NULL };
    double first = bench_broker_start(&b, extra);
    int fd = bench_connect(b.port);
    int topics = (partitions + 99) / 100, made = 0;
    for (int i = 0; i < topics; i++) {
        char name[32];
        snprintf(name, sizeof name, "startup-%d", i);
        int n = partitions - made < 100 ? partitions - made : 100;
        int rc = bench_create_topic(fd, name, n, NULL);
        if (rc != 0) {
            fprintf(stderr, "startup_bench: creating %s failed (%d)\n", name, rc);
            bench_broker_cleanup(&b);
            return 1;
        }
        made += n;
    }
    close(fd);
    printf("startup: empty broker listening after %.1f ms\n", first * 1000);
    long clean_bytes = write_or_die(&b, made, kib);
    double stop = bench_broker_stop(&b);
    printf("startup: clean stop with %d partitions, %.1f MiB, took %.1f ms\n", made,
           clean_bytes / 1048576.0, stop * 1000);
    double best = 1e9, worst = 0, idle_best = 1e9, idle_worst = 0;
    for (int i = 0; i < 3; i++) {
        double t = bench_broker_start(&b, extra);
        best = t < best ? t : best;
        worst = t > worst ? t : worst;
        /* Nothing written since the start: nothing for the stop to sync. */
        double s = bench_broker_stop(&b);
        idle_best = s < idle_best ? s : idle_best;
        idle_worst = s > idle_worst ? s : idle_worst;
    }
    printf("startup: after clean stop, %d partitions: listening after %.1f ms (best of 3, worst %.1f ms)\n",
           made, best * 1000, worst * 1000);
    printf("startup: clean stop with %d partitions unchanged since the start: %.1f ms "
           "(best of 3, worst %.1f ms)\n", made, idle_best * 1000, idle_worst * 1000);
    bench_broker_start(&b, extra);
    long crash_bytes = write_or_die(&b, made, kib);
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
    b.pid = 0;
    double crash = bench_broker_start(&b, extra);
    printf("startup: after SIGKILL, %d partitions, %.1f MiB past their recovery points: "
           "listening after %.1f ms\n", made, crash_bytes / 1048576.0, crash * 1000);
    printf("startup: ratio crash/clean %.2f\n", crash / best);
    bench_broker_cleanup(&b);
    return 0;
}
