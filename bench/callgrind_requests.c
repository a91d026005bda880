/*
 * callgrind_requests — instructions the broker executes per Produce request
 * and per Fetch request, counted by valgrind's callgrind over the whole
 * sluiced process (event loop, handlers, workers), for one binary or for two
 * (before and after a change, in the same run).  Instruction counts do not
 * depend on how busy the machine is, so a restructuring can be held to
 * "within 2 %" where wall-clock figures would drown in noise.
 *
 *   build/bench/callgrind_requests [BEFORE_SLUICED] AFTER_SLUICED
 *   (default: build/sluiced alone; CG_PRODUCES, CG_FETCHES: request counts)
 *
 * Per binary: a broker under callgrind, one topic with one partition, 200
 * Produce requests of warm-up, counters zeroed (callgrind_control -z), then
 * CG_PRODUCES Produce v7 requests (acks=1, one batch of 10 records x 100
 * bytes each) and a dump; counters zeroed again, then Fetch v13 passes of
 * 1 MiB requests over what was written until CG_FETCHES requests were
 * answered, and a dump.  Each figure is the dump's total divided by the
 * requests sent.  Only what runs inside the connection's event callbacks
 * is counted (callgrind --toggle-collect on CG_TOGGLE, default
 * "on_readable,on_writable" of daemon/net/net_server.c: read, parse,
 * handle, answer); timers and worker threads, whose share depends on how
 * long the run takes, would otherwise swing the figure by a few per cent.
 */
#include "bench/bench_fetch.h"

#include <glob.h>
#include <sys/stat.h>

#define CG_WARMUP 200

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? atol(v) : dflt;
}

/* "totals: N" (or "summary: N") of the newest dump file in dir. */
static double last_dump_total(const char *dir)
{
    char pat[300];
    snprintf(pat, sizeof pat, "%s/cg.out.*", dir);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0) {
        fprintf(stderr, "callgrind_requests: no callgrind dump in %s\n", dir);
        exit(1);
    }
    const char *newest = NULL;
    time_t best = 0;
    for (size_t i = 0; i < g.gl_pathc; i++) {
        struct stat st;
        if (stat(g.gl_pathv[i], &st) == 0 && (!newest || st.st_mtime >= best)) {
            newest = g.gl_pathv[i];
            best = st.st_mtime;
        }
    }
    double total = -1;
    FILE *f = newest ? fopen(newest, "r") : NULL;
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "totals:", 7) || !strncmp(line, "summary:", 8))
            total = atof(strchr(line, ':') + 1);
    if (f)
        fclose(f);
    /* The next dump must not be mistaken for this one. */
    for (size_t i = 0; i < g.gl_pathc; i++)
        unlink(g.gl_pathv[i]);
    globfree(&g);
    if (total < 0) {
        fprintf(stderr, "callgrind_requests: no totals in %s\n", newest ? newest : dir);
        exit(1);
    }
    return total;
}

static void control(const char *flag, pid_t pid)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "callgrind_control %s %d >/dev/null 2>&1", flag, (int)pid);
    if (system(cmd) != 0) {
        fprintf(stderr, "callgrind_requests: `%s` failed\n", cmd);
        exit(1);
    }
}

/* Instructions per produce and per fetch request of one binary. */
static void measure(const char *sluiced, double *per_produce, double *per_fetch)
{
    char dir[200], wrapper[300];
    bench_mkdtemp(dir, sizeof dir, "sluice-cg");
    snprintf(wrapper, sizeof wrapper, "%s/sluiced-under-callgrind", dir);
    char toggles[512] = "", list[256];
    snprintf(list, sizeof list, "%s", getenv("CG_TOGGLE") ? getenv("CG_TOGGLE") : "on_readable,on_writable");
    for (char *save = NULL, *fn = strtok_r(list, ",", &save); fn; fn = strtok_r(NULL, ",", &save))
        snprintf(toggles + strlen(toggles), sizeof toggles - strlen(toggles), " --toggle-collect=%s", fn);
    FILE *w = fopen(wrapper, "w");
    if (!w || fprintf(w, "#!/bin/sh\nexec valgrind --tool=callgrind --callgrind-out-file=%s/cg.out%s "
                      "%s \"$@\"\n", dir, toggles, sluiced) < 0 || fclose(w) || chmod(wrapper, 0755)) {
        perror("callgrind_requests: wrapper");
        exit(1);
    }
    setenv("SLUICED", wrapper, 1);
    bench_broker b = { .listen_wait = 120 };
    snprintf(b.dir, sizeof b.dir, "%s/data", dir);
    bench_broker_start(&b, NULL);
    int fd = bench_connect(b.port);
    if (fd < 0 || bench_create_topic(fd, "cg", 1, NULL)) {
        fprintf(stderr, "callgrind_requests: cannot create the topic on %s\n", sluiced);
        exit(1);
    }
    bench_set_timeout(fd, 120);
    kp_buf batch, q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    if (bench_batch(&batch, 10, 100, 'c'))
        exit(1);
    long produces = env_long("CG_PRODUCES", 2000), fetches = env_long("CG_FETCHES", 600);
    for (long i = 0; i < CG_WARMUP + produces; i++) {
        if (i == CG_WARMUP)
            control("-z", b.pid);
        bench_produce_req(&q, (int32_t)i, "cg", "cg", 1, &batch);
        if (bench_roundtrip(fd, &q, &r) || bench_produce_error(&r)) {
            fprintf(stderr, "callgrind_requests: produce %ld failed\n", i);
            exit(1);
        }
    }
    control("-d", b.pid);
    *per_produce = last_dump_total(dir) / (double)produces;

    bench_fetcher f;
    bench_fetcher_init(&f, "cg", "cg", 13, 7);
    if (bench_fetch_find_topic_id(&f, fd))
        exit(1);
    control("-z", b.pid);
    int32_t first = f.cid;
    while (f.cid - first < fetches)
        if (bench_fetch_pass(&f, fd, &q, &r) < 0)
            exit(1);
    control("-d", b.pid);
    *per_fetch = last_dump_total(dir) / (double)(f.cid - first);

    close(fd);
    kp_buf_free(&q);
    kp_buf_free(&r);
    kp_buf_free(&batch);
    bench_broker_cleanup(&b);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "callgrind_requests: could not remove %s\n", dir);
}

int main(int argc, char **argv)
{
    bench_catch_signals(1800);
    const char *before = argc > 2 ? argv[1] : NULL;
    const char *after = argc > 2 ? argv[2] : argc > 1 ? argv[1] : bench_sluiced_path();
    double bp = 0, bf = 0, ap, af;
    if (before)
        measure(before, &bp, &bf);
    measure(after, &ap, &af);
    if (before) {
        printf("before %s: %.0f instructions per produce request, %.0f per fetch request\n",
               before, bp, bf);
        printf("after  %s: %.0f instructions per produce request, %.0f per fetch request\n",
               after, ap, af);
        printf("after/before: produce %.4f, fetch %.4f\n", ap / bp, af / bf);
    } else {
        printf("%s: %.0f instructions per produce request, %.0f per fetch request\n", after, ap, af);
    }
    return 0;
}
