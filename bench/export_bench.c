/*
 * sluice-export vs sluice-consume on the same topic, same run (issue 32).
 *
 *   build/bench/export_bench [MIB]
 *       SLUICED (default build/sluiced) names the broker; the tools are the
 *       ones beside it.  MIB: data to export (default 256), 1 KiB records
 *       on a 4-partition topic written by sluice-bench.
 *
 * Runs, alternating, 3 rounds each, medians printed: sluice-consume -e into
 * /dev/null (every partition, one consumer) and sluice-export --until-end
 * with the null codec and --parallel 1 (files written, fsynced, renamed,
 * committed, then removed outside the clock).  Then once each: --parallel
 * 2 with null, deflate and snappy.  Printed: MB/s of each, export/consume
 * (target >= 0.5), parallel 2 / parallel 1 (target >= 1.4 on 2 cores), and
 * the exporter's peak resident size (getrusage of the child).
 */
#include "bench/bench_common.h"

#include <libgen.h>
#include <sys/resource.h>

static char tools[1024], bootstrap[64];
static long records;

typedef struct run {
    double secs;
    long maxrss_kib;
    double cpu;                     /* the child's user + system seconds */
    double idle;                    /* the machine's idle CPU seconds meanwhile */
} run;

/* The machine's idle CPU seconds so far (/proc/stat: idle + iowait). */
static double machine_idle(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[5] = { 0 };
    if (f) {
        if (fscanf(f, "cpu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4]) != 5)
            v[3] = v[4] = 0;
        fclose(f);
    }
    return (double)(v[3] + v[4]) / (double)sysconf(_SC_CLK_TCK);
}

/* Runs argv with stdout to /dev/null; its time and peak RSS, or exits. */
static run run_child(char *const *argv)
{
    fflush(stdout);                 /* the child must not print it again */
    double t0 = bench_now(), idle0 = machine_idle();
    pid_t pid = fork();
    if (pid == 0) {
        bench_child_setup();
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "export_bench: %s failed (status %d)\n", argv[0], st);
        exit(1);
    }
    return (run){ bench_now() - t0, ru.ru_maxrss,
                  (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                  (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6,
                  machine_idle() - idle0 };
}

static run run_consume(const char *topic)
{
    char bin[1100];
    snprintf(bin, sizeof bin, "%s/sluice-consume", tools);
    char *argv[] = { bin, "-b", bootstrap, "-t", (char *)topic, "-e", "-q", NULL };
    return run_child(argv);
}

static run run_export(const char *topic, const char *codec, const char *parallel)
{
    static int n;
    char bin[1100], dir[400], group[64];
    snprintf(bin, sizeof bin, "%s/sluice-export", tools);
    snprintf(dir, sizeof dir, "%s/out%d", bench_scratch, n);
    /* A group of its own (commits only, no membership): a fresh tree
     * whose group had committed would resume there. */
    snprintf(group, sizeof group, "group.id=bench-%d", n++);
    char *argv[] = { bin, "-b", bootstrap, "-t", (char *)topic, "-d", dir, "-e", "-q",
                     "-X", group, "-c", (char *)codec, "-P", (char *)parallel, NULL };
    sync();
    run r = run_child(argv);
    bench_rm_tree(dir);
    return r;
}

static double mbps(double secs)
{
    return (double)records * 1024 / 1e6 / secs;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 256;
    records = mib * 1024;
    char path[1024];
    snprintf(path, sizeof path, "%s", bench_sluiced_path());
    snprintf(tools, sizeof tools, "%s", dirname(path));
    bench_catch_signals(1200);
    bench_mkdtemp(bench_scratch, sizeof bench_scratch, "sluice-export-bench");

    bench_broker b = { 0 };
    bench_broker_start(&b, NULL);
    snprintf(bootstrap, sizeof bootstrap, "127.0.0.1:%d", b.port);
    int fd = bench_connect(b.port);
    if (fd < 0 || bench_create_topic(fd, "exp", 4, NULL) != 0) {
        fprintf(stderr, "export_bench: creating the topic failed\n");
        return 1;
    }
    close(fd);
    char sb[1100], count[32];
    snprintf(sb, sizeof sb, "%s/sluice-bench", tools);
    snprintf(count, sizeof count, "%ld", records);
    char *prod[] = { sb, "-q", "-b", bootstrap, "-t", "exp", "-n", count, "-s", "1024",
                     "-a", "1", "-X", "linger.ms=5", NULL };
    run_child(prod);
    sync();
    run_consume("exp");                       /* warm the page cache */

    double c[3], e[3];
    long rss = 0;
    run e1 = { 0 };
    for (int i = 0; i < 3; i++) {
        c[i] = run_consume("exp").secs;
        run r = run_export("exp", "null", "1");
        e[i] = r.secs;
        if (i == 1)
            e1 = r;
        if (r.maxrss_kib > rss)
            rss = r.maxrss_kib;
    }
    double cm = bench_median(c, 3), em = bench_median(e, 3);
    printf("data: %ld records of 1 KiB, 4 partitions (%.0f MB)\n", records,
           (double)records * 1024 / 1e6);
    printf("sluice-consume -> /dev/null:          %8.1f MB/s\n", mbps(cm));
    printf("sluice-export null, --parallel 1:     %8.1f MB/s  (ratio %.2f, target >= 0.5)\n",
           mbps(em), cm / em);
    run p2 = run_export("exp", "null", "2");
    printf("sluice-export null, --parallel 2:     %8.1f MB/s  (x%.2f of --parallel 1, "
           "target >= 1.4)\n", mbps(p2.secs), em / p2.secs);
    /* The bound on that ratio in this run: --parallel 2 can only go faster
     * with a core to spare.  Cores the exporter used, and the machine's
     * idle cores meanwhile (other processes, the broker included). */
    printf("  cores used: --parallel 1 %.2f, --parallel 2 %.2f; machine idle meanwhile "
           "%.2f and %.2f of %ld cores\n", e1.cpu / e1.secs, p2.cpu / p2.secs,
           e1.idle / e1.secs, p2.idle / p2.secs, sysconf(_SC_NPROCESSORS_ONLN));
    const char *codecs[] = { "deflate", "snappy", "xz", "zstandard" };
    for (int i = 0; i < 4; i++) {
        run r = run_export("exp", codecs[i], "2");
        printf("sluice-export %-9s --parallel 2: %8.1f MB/s\n", codecs[i], mbps(r.secs));
        if (r.maxrss_kib > rss)
            rss = r.maxrss_kib;
    }
    if (p2.maxrss_kib > rss)
        rss = p2.maxrss_kib;
    printf("sluice-export peak resident size:     %8.1f MiB\n", rss / 1024.0);
    bench_broker_cleanup(&b);
    bench_rm_tree(bench_scratch);
    return 0;
}
