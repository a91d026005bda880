/*
 * Startup with 1,000 partitions: how long from exec until sluiced accepts
 * connections, after a clean stop (SIGTERM) and after a crash (SIGKILL,
 * which makes every partition past its recovery point be scanned).
 *
 *   build/bench/startup_bench [partitions]      (default 1000)
 */
#include "bench/bench_common.h"

int main(int argc, char **argv)
{
    int partitions = argc > 1 ? atoi(argv[1]) : 1000;
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
    double stop = bench_broker_stop(&b);
    printf("startup: clean stop with %d partitions took %.1f ms\n", made, stop * 1000);
    double best = 1e9, worst = 0;
    for (int i = 0; i < 3; i++) {
        double t = bench_broker_start(&b, extra);
        best = t < best ? t : best;
        worst = t > worst ? t : worst;
        bench_broker_stop(&b);
    }
    printf("startup: after clean stop, %d partitions: listening after %.1f ms (best of 3, worst %.1f ms)\n",
           made, best * 1000, worst * 1000);
    bench_broker_start(&b, extra);
    kill(b.pid, SIGKILL);
    waitpid(b.pid, NULL, 0);
    b.pid = 0;
    double crash = bench_broker_start(&b, extra);
    printf("startup: after SIGKILL, %d partitions: listening after %.1f ms\n", made, crash * 1000);
    bench_broker_cleanup(&b);
    return 0;
}
