/*
 * Fetch throughput against its ceiling: back-to-back 1 MiB Fetch v4
 * requests over one partition holding ~512 MiB of page-cached data, versus
 * plain sendfile(2) of the same cached segment file into a loopback TCP
 * socket, in the same run.  Both receivers read into one reused buffer and
 * discard the bytes.  The ratio says how close the broker's path (request
 * parse, index lookup, response header, sendfile of the range) gets to the
 * kernel's copy.
 *
 *   build/bench/fetch_bench [path/to/sluiced] [MiB]     (default 512)
 *       (sluiced also from $SLUICED; default build/sluiced)
 *   $BENCH_FETCH_VERSION (default 4) picks the Fetch version, up to 17
 *   (v13+ by topic id, from a Metadata v12), $BENCH_PRODUCE_VERSION
 *   (default 7, 3..11) the Produce version of the fill, whose rate is
 *   printed too.  Requests and responses go through the generated codec
 *   (kp_msgs.h), so any version is the same code here.
 */
#include "bench/bench_fetch.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#define FETCH_MAX   BENCH_FETCH_MAX
#define PASSES      4

static const char *topic = "fetch-bench";
static bench_fetcher fetcher;

static int16_t env_version(const char *name, int16_t def, int16_t lo, int16_t hi)
{
    const char *e = getenv(name);
    int v = e && *e ? atoi(e) : def;
    if (v < lo || v > hi) {
        fprintf(stderr, "fetch_bench: %s=%d outside %d..%d\n", name, v, lo, hi);
        exit(2);
    }
    return (int16_t)v;
}

static void fill(int fd, long mib)
{
    double t0 = bench_now();
    long total = bench_fetch_fill(&fetcher, fd, mib << 20);
    if (total < 0)
        exit(1);
    double t = bench_now() - t0;
    printf("fetch_bench: Produce v%d, %.1f MB batches, acks=1: %.0f MB/s\n",
           fetcher.produce_version, (double)BENCH_FETCH_BATCH_RECS * BENCH_FETCH_VALUE_SIZE / 1e6,
           (double)total / 1e6 / t);
}

static long fetch_pass(int fd, kp_buf *q, kp_buf *r)
{
    long n = bench_fetch_pass(&fetcher, fd, q, r);
    if (n < 0)
        exit(1);
    return n;
}

/* ---- sendfile baseline --------------------------------------------------- */

struct sender {
    int sock, file;
    off_t size;
    int passes;
    bool ping_pong;           /* wait for a 1-byte request before each MiB */
};

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    for (int i = 0; i < s->passes; i++) {
        off_t off = 0;
        while (off < s->size) {
            size_t n = (size_t)(s->size - off) < FETCH_MAX ? (size_t)(s->size - off) : FETCH_MAX;
            uint8_t req;
            if (s->ping_pong && bench_read_all(s->sock, &req, 1))
                return NULL;
            off_t end = off + (off_t)n;
            while (off < end) {
                ssize_t w = sendfile(s->sock, s->file, &off, (size_t)(end - off));
                if (w < 0 && errno == EINTR)
                    continue;
                if (w <= 0)
                    return NULL;
            }
        }
    }
    shutdown(s->sock, SHUT_WR);
    return NULL;
}

/* Streams the file `passes` times; with ping_pong, in 1 MiB answers to
 * 1-byte requests, the I/O pattern of back-to-back fetches. */
static double sendfile_baseline(const char *path, int passes, bool ping_pong,
                                long *bytes_out)
{
    int file = open(path, O_RDONLY);
    struct stat sb;
    if (file < 0 || fstat(file, &sb)) {
        perror(path);
        exit(1);
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t alen = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1) ||
        getsockname(ls, (struct sockaddr *)&a, &alen)) {
        perror("fetch_bench: listen");
        exit(1);
    }
    int rx = bench_connect(ntohs(a.sin_port));
    int tx = accept(ls, NULL, NULL);
    close(ls);
    struct sender s = { tx, file, sb.st_size, passes, ping_pong };
    static uint8_t buf[FETCH_MAX];
    double t0 = bench_now();
    pthread_t th;
    pthread_create(&th, NULL, sender_main, &s);
    long got = 0;
    long total = (long)sb.st_size * passes;
    while (!ping_pong || got < total) {
        size_t want = sizeof buf;
        if (ping_pong) {
            long left_in_pass = (long)sb.st_size - got % (long)sb.st_size;
            want = left_in_pass < FETCH_MAX ? (size_t)left_in_pass : FETCH_MAX;
            uint8_t req = 1;
            if (bench_write_all(rx, &req, 1) || bench_read_all(rx, buf, want))
                break;
            got += (long)want;
            continue;
        }
        ssize_t n = read(rx, buf, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += n;
    }
    double t = bench_now() - t0;
    pthread_join(th, NULL);
    close(rx);
    close(tx);
    close(file);
    *bytes_out = got;
    return t;
}

static int find_segment(const char *dir, char *out, size_t cap)
{
    char pdir[512];
    snprintf(pdir, sizeof pdir, "%s/%s-0", dir, topic);
    DIR *d = opendir(pdir);
    if (!d)
        return -1;
    struct dirent *e;
    off_t best = -1;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".log"))
            continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", pdir, e->d_name);
        struct stat sb;
        if (!stat(p, &sb) && sb.st_size > best) {
            best = sb.st_size;
            snprintf(out, cap, "%s", p);
        }
    }
    closedir(d);
    return best > 0 ? 0 : -1;
}

static void print_pair(const char *api, int16_t vold, long bold, double told, int16_t vnew,
                       long bnew, double tnew)
{
    double mold = (double)bold / 1e6 / told, mnew = (double)bnew / 1e6 / tnew;
    printf("fetch_bench: %s v%d %.0f MB/s, v%d %.0f MB/s: ratio v%d/v%d %.3f\n", api, vold,
           mold, vnew, mnew, vnew, vold, mnew / mold);
}

/* BENCH_COMPARE: old and newest versions alternating, same broker, same run. */
static int compare(int fd, long mib, pid_t broker)
{
    enum { ROUNDS = 8 };
    int16_t pv[2] = { fetcher.produce_version, 11 }, fv[2] = { fetcher.fetch_version, 17 };
    long pbytes[2] = { 0 }, fbytes[2] = { 0 };
    double pt[2] = { 0 }, ft[2] = { 0 }, fcpu[2] = { 0 };
    for (int i = 0; i < ROUNDS; i++)
        for (int j = 0; j < 2; j++) {
            int k = (i + j) % 2;
            fetcher.produce_version = pv[k];
            double t0 = bench_now();
            long n = bench_fetch_fill(&fetcher, fd, ((mib << 20) / (2 * ROUNDS)) + 1);
            if (n < 0)
                exit(1);
            pt[k] += bench_now() - t0;
            pbytes[k] += n;
        }
    if (bench_fetch_find_topic_id(&fetcher, fd)) {
        fprintf(stderr, "fetch_bench: no topic id from Metadata v12\n");
        exit(1);
    }
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    fetcher.fetch_version = fv[1];
    fetch_pass(fd, &q, &r);                         /* warm-up */
    for (int i = 0; i < 2 * PASSES; i++)            /* order flipped every pass */
        for (int j = 0; j < 2; j++) {
            int k = (i + j) % 2;
            fetcher.fetch_version = fv[k];
            double t0 = bench_now(), c0 = bench_cpu_seconds(broker);
            fbytes[k] += fetch_pass(fd, &q, &r);
            ft[k] += bench_now() - t0;
            fcpu[k] += bench_cpu_seconds(broker) - c0;
        }
    kp_buf_free(&q);
    kp_buf_free(&r);
    print_pair("Produce (acks=1, 0.9 MB batches)", pv[0], pbytes[0], pt[0], pv[1], pbytes[1],
               pt[1]);
    print_pair("Fetch (1 MiB per request)", fv[0], fbytes[0], ft[0], fv[1], fbytes[1], ft[1]);
    printf("fetch_bench: Fetch broker CPU v%d %.2f, v%d %.2f CPU-s/GB\n", fv[0],
           fcpu[0] / ((double)fbytes[0] / 1e9), fv[1], fcpu[1] / ((double)fbytes[1] / 1e9));
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    long mib = argc > 2 ? atol(argv[2]) : 512;
    const char *cmp = getenv("BENCH_COMPARE");
    bool comparing = cmp && *cmp && strcmp(cmp, "0");
    bench_fetcher_init(&fetcher, topic, "fetch_bench",
                       env_version("BENCH_FETCH_VERSION", comparing ? 11 : 4, 4, 17),
                       env_version("BENCH_PRODUCE_VERSION", 7, 3, 11));
    bench_broker b = { 0 };
    const char *const extra[] = { "auto.create.topics.enable=false", NULL };
    bench_broker_start(&b, extra);
    int fd = bench_connect(b.port);
    const char *const tcfg[] = { "segment.bytes", "1073741824", NULL };
    if (fd < 0 || bench_create_topic(fd, topic, 1, tcfg) != 0) {
        fprintf(stderr, "fetch_bench: cannot create the topic\n");
        bench_broker_cleanup(&b);
        return 1;
    }
    if (comparing) {
        int rc = compare(fd, mib, b.pid);
        close(fd);
        bench_broker_cleanup(&b);
        kp_arena_free(&fetcher.arena);
        return rc;
    }
    double t0 = bench_now();
    fill(fd, mib);
    printf("fetch_bench: wrote %ld MiB in %.1f s\n", mib, bench_now() - t0);
    if (fetcher.fetch_version >= 13 && bench_fetch_find_topic_id(&fetcher, fd)) {
        fprintf(stderr, "fetch_bench: no topic id from Metadata v12\n");
        exit(1);
    }

    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    fetch_pass(fd, &q, &r);                         /* warm-up */
    double cpu0 = bench_cpu_seconds(b.pid);
    int32_t cid0 = fetcher.cid;
    t0 = bench_now();
    long fbytes = 0;
    for (int i = 0; i < PASSES; i++)
        fbytes += fetch_pass(fd, &q, &r);
    double ft = bench_now() - t0;
    double cpu = bench_cpu_seconds(b.pid) - cpu0;
    close(fd);
    kp_buf_free(&q);
    kp_buf_free(&r);

    char seg[1100];
    if (find_segment(b.dir, seg, sizeof seg)) {
        fprintf(stderr, "fetch_bench: no segment file found\n");
        bench_broker_cleanup(&b);
        return 1;
    }
    long sbytes = 0, pbytes = 0;
    sendfile_baseline(seg, 1, false, &sbytes);      /* warm-up */
    double st = sendfile_baseline(seg, PASSES, false, &sbytes);
    double pt = sendfile_baseline(seg, PASSES, true, &pbytes);
    bench_broker_cleanup(&b);
    kp_arena_free(&fetcher.arena);

    double fmb = (double)fbytes / 1e6 / ft, smb = (double)sbytes / 1e6 / st;
    double pmb = (double)pbytes / 1e6 / pt;
    printf("fetch_bench: Fetch v%d, 1 MiB per request, %d passes over %ld MiB: %.0f MB/s "
           "(%ld requests/s), broker CPU %.2f s = %.2f CPU-s/GB\n",
           fetcher.fetch_version, PASSES, mib, fmb, (long)((fetcher.cid - cid0) / ft), cpu, cpu / ((double)fbytes / 1e9));
    printf("fetch_bench: sendfile of the cached segment, loopback TCP, streamed: %.0f MB/s; "
           "1 MiB per 1-byte request: %.0f MB/s\n", smb, pmb);
    printf("fetch_bench: ratio fetch/sendfile %.2f (streamed), %.2f (request/response)\n",
           fmb / smb, fmb / pmb);
    return 0;
}
