/*
 * sluice-export vs sluice-consume on the same topic, same run (issue 32).
 *
 *   build/bench/export_bench [MIB]
 *       SLUICED (default build/sluiced) names the broker; the tools are the
 *       ones beside it.  MIB: data to export (default 256), 1 KiB records
 *       on a 4-partition topic written by sluice-bench.
 *
 * Runs, alternating, 3 rounds each, medians printed: sluice-consume -e into
 * /dev/null (every partition, one consumer), sluice-export --until-end
 * with the null codec and --parallel 1 and 2 (files written, fsynced,
 * renamed, committed, then removed outside the clock), and two
 * sluice-consume side by side, one on partitions 0 and 1, one on 2 and 3:
 * what two readers get from this broker on this machine, the bound on
 * --parallel 2 (its workers read the same way, and write besides).  Then
 * once each: --parallel 2 with deflate, snappy, xz and zstandard.
 * Printed: MB/s of each, export/consume (target >= 0.5), parallel 2 /
 * parallel 1 (target >= 1.4 on 2 cores) beside the most the two readers'
 * rate allows it, and the exporter's peak resident size (getrusage of the
 * child).
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

/* Starts argv with stdout to /dev/null. */
static pid_t start_child(char *const *argv)
{
    fflush(stdout);                 /* the child must not print it again */
    pid_t pid = fork();
    if (pid == 0) {
        bench_child_setup();
        if (!freopen("/dev/null", "w", stdout))
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Waits for pid; its peak RSS and CPU seconds added to r, or exits. */
static void finish_child(pid_t pid, const char *name, run *r)
{
    int st = 0;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "export_bench: %s failed (status %d)\n", name, st);
        exit(1);
    }
    if (ru.ru_maxrss > r->maxrss_kib)
        r->maxrss_kib = ru.ru_maxrss;
    r->cpu += (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
              (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Runs argv (and argv2 beside it, unless NULL) with stdout to /dev/null:
 * the wall time until both ended, peak RSS, CPU, or exits. */
static run run_children(char *const *argv, char *const *argv2)
{
    run r = { 0 };
    double t0 = bench_now(), idle0 = machine_idle();
    pid_t a = start_child(argv), b = argv2 ? start_child(argv2) : 0;
    finish_child(a, argv[0], &r);
    if (argv2)
        finish_child(b, argv2[0], &r);
    r.secs = bench_now() - t0;
    r.idle = machine_idle() - idle0;
    return r;
}

static run run_child(char *const *argv)
{
    return run_children(argv, NULL);
}

static run run_consume(const char *topic)
{
    char bin[1100];
    snprintf(bin, sizeof bin, "%s/sluice-consume", tools);
    char *argv[] = { bin, "-b", bootstrap, "-t", (char *)topic, "-e", "-q", NULL };
    return run_child(argv);
}

/* Two sluice-consume side by side: partitions 0 and 1, and 2 and 3. */
static run run_consume_pair(const char *topic)
{
    char bin[1100];
    snprintf(bin, sizeof bin, "%s/sluice-consume", tools);
    char *a[] = { bin, "-b", bootstrap, "-t", (char *)topic, "-p", "0", "-p", "1", "-e", "-q", NULL };
    char *b[] = { bin, "-b", bootstrap, "-t", (char *)topic, "-p", "2", "-p", "3", "-e", "-q", NULL };
    return run_children(a, b);
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

    double c[3], e[3], e2[3], cp[3];
    long rss = 0;
    run e1 = { 0 }, p2 = { 0 };
    for (int i = 0; i < 3; i++) {
        c[i] = run_consume("exp").secs;
        run r = run_export("exp", "null", "1");
        e[i] = r.secs;
        run r2 = run_export("exp", "null", "2");
        e2[i] = r2.secs;
        cp[i] = run_consume_pair("exp").secs;
        if (i == 1) {
            e1 = r;
            p2 = r2;
        }
        if (r.maxrss_kib > rss)
            rss = r.maxrss_kib;
        if (r2.maxrss_kib > rss)
            rss = r2.maxrss_kib;
    }
    double cm = bench_median(c, 3), em = bench_median(e, 3);
    double e2m = bench_median(e2, 3), cpm = bench_median(cp, 3);
    printf("data: %ld records of 1 KiB, 4 partitions (%.0f MB)\n", records,
           (double)records * 1024 / 1e6);
    printf("sluice-consume -> /dev/null:          %8.1f MB/s\n", mbps(cm));
    printf("sluice-export null, --parallel 1:     %8.1f MB/s  (ratio %.2f, target >= 0.5)\n",
           mbps(em), cm / em);
    printf("sluice-export null, --parallel 2:     %8.1f MB/s  (x%.2f of --parallel 1, "
           "target >= 1.4)\n", mbps(e2m), em / e2m);
    /* The bound: --parallel 2's two workers cannot read faster than two
     * readers that only read. */
    printf("two sluice-consume side by side:      %8.1f MB/s  (bound on --parallel 2: "
           "x%.2f of --parallel 1 at most in this run)\n", mbps(cpm), em / cpm);
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
    printf("sluice-export peak resident size:     %8.1f MiB\n", rss / 1024.0);
    bench_broker_cleanup(&b);
    bench_rm_tree(bench_scratch);
    return 0;
}
