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
 *
 *   $BENCH_COMPARE=1: the newest versions against the ones served before
 *   them, in the same run and against the same broker: the fill alternates
 *   Produce $BENCH_PRODUCE_VERSION (then default 7, the newest before
 *   issue 17) and v11 in eight rounds, the passes alternate Fetch
 *   $BENCH_FETCH_VERSION (then default 11) and v17; each pair is printed
 *   with its ratio new/old (no sendfile baseline in this mode).
 */
#include "bench/bench_common.h"
#include "kp_msgs.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#define FETCH_MAX   (1 << 20)
#define VALUE_SIZE  1000
#define BATCH_RECS  900          /* ~0.9 MB batches, under max.message.bytes */
#define PASSES      4

static const char *topic = "fetch-bench";
static int16_t fetch_version = 4, produce_version = 7;
static uint8_t topic_id[16];             /* Fetch v13+ */
static kp_arena arena;                   /* decoded responses, reset per request */

/* A response body of api at version v: past the correlation id and, for a
 * flexible version, the header's tags. */
static kp_rd resp_body(const kp_buf *r, int16_t api, int16_t v)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    if (v >= kp_api_first_flexible(api))
        kp_rd_tags(&rd);
    return rd;
}

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

/* Produces at least mib MiB at version v; returns the seconds it took and
 * adds the bytes to *bytes. */
static double produce_mib(int fd, int16_t v, long mib, long *bytes)
{
    kp_buf batch, q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    if (bench_batch(&batch, BATCH_RECS, VALUE_SIZE, 'f')) {
        fprintf(stderr, "fetch_bench: cannot build a batch\n");
        exit(1);
    }
    kp_ProduceRequest_PartitionProduceData pd = {
        .Index = 0, .Records = { (const char *)batch.data, (int32_t)batch.len } };
    kp_ProduceRequest_TopicProduceData td = {
        .Name = kp_str_cstr(topic), .PartitionData = &pd, .PartitionData_count = 1 };
    kp_ProduceRequest m;
    kp_init_ProduceRequest(&m);
    m.Acks = 1;
    m.TimeoutMs = 30000;
    m.TopicData = &td;
    m.TopicData_count = 1;
    long total = 0, goal = mib << 20;
    double t0 = bench_now();
    for (int32_t cid = 1; total < goal; cid++) {
        kp_buf_reset(&q);
        kp_req_hdr_write(&q, KP_API_PRODUCE, v, cid, "fetch-bench");
        kp_enc_ProduceRequest(&q, v, &m);
        int err = -1;
        if (bench_roundtrip(fd, &q, &r) == 0) {
            kp_rd rd = resp_body(&r, KP_API_PRODUCE, v);
            kp_ProduceResponse pr;
            kp_arena_reset(&arena);
            if (kp_dec_ProduceResponse(&rd, v, &pr, &arena) == 0 &&
                pr.Responses_count == 1 && pr.Responses[0].PartitionResponses_count == 1)
                err = pr.Responses[0].PartitionResponses[0].ErrorCode;
        }
        if (err) {
            fprintf(stderr, "fetch_bench: produce failed (%d)\n", err);
            exit(1);
        }
        total += (long)batch.len;
    }
    double t = bench_now() - t0;
    kp_buf_free(&batch);
    kp_buf_free(&q);
    kp_buf_free(&r);
    *bytes += total;
    return t;
}

static void fill(int fd, long mib)
{
    long total = 0;
    double t = produce_mib(fd, produce_version, mib, &total);
    printf("fetch_bench: Produce v%d, %.1f MB batches, acks=1: %.0f MB/s\n", produce_version,
           (double)BATCH_RECS * VALUE_SIZE / 1e6, (double)total / 1e6 / t);
}

/* Fetch v13+ names the topic by id: Metadata v12 has it. */
static void find_topic_id(int fd)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    kp_MetadataRequest_MetadataRequestTopic mt = { .Name = kp_str_cstr(topic) };
    kp_MetadataRequest m;
    kp_init_MetadataRequest(&m);
    m.Topics = &mt;
    m.Topics_count = 1;
    kp_req_hdr_write(&q, KP_API_METADATA, 12, 1, "fetch-bench");
    kp_enc_MetadataRequest(&q, 12, &m);
    kp_MetadataResponse mr;
    kp_arena_reset(&arena);
    kp_rd rd;
    if (bench_roundtrip(fd, &q, &r) || (rd = resp_body(&r, KP_API_METADATA, 12),
        kp_dec_MetadataResponse(&rd, 12, &mr, &arena)) || mr.Topics_count != 1 ||
        mr.Topics[0].ErrorCode) {
        fprintf(stderr, "fetch_bench: no topic id from Metadata v12\n");
        exit(1);
    }
    memcpy(topic_id, mr.Topics[0].TopicId, 16);
    kp_buf_free(&q);
    kp_buf_free(&r);
}

/* One pass of 1 MiB fetches from offset 0 to the high watermark.  Returns
 * record bytes received. */
static long fetch_pass(int fd, int16_t v, kp_buf *q, kp_buf *r, int32_t *cid)
{
    int64_t off = 0, hw = 1;
    long bytes = 0;
    kp_FetchRequest_FetchPartition fp = { .Partition = 0, .CurrentLeaderEpoch = -1,
                                          .LastFetchedEpoch = -1, .LogStartOffset = -1,
                                          .PartitionMaxBytes = FETCH_MAX };
    kp_FetchRequest_FetchTopic ft = { .Topic = kp_str_cstr(topic), .Partitions = &fp,
                                      .Partitions_count = 1 };
    memcpy(ft.TopicId, topic_id, 16);
    kp_FetchRequest m;
    kp_init_FetchRequest(&m);
    m.MaxWaitMs = 0;
    m.MinBytes = 0;
    m.MaxBytes = FETCH_MAX;
    m.Topics = &ft;
    m.Topics_count = 1;
    while (off < hw) {
        kp_buf_reset(q);
        kp_req_hdr_write(q, KP_API_FETCH, v, (*cid)++, "fetch-bench");
        fp.FetchOffset = off;
        kp_enc_FetchRequest(q, v, &m);
        if (bench_roundtrip(fd, q, r)) {
            fprintf(stderr, "fetch_bench: fetch failed\n");
            exit(1);
        }
        kp_rd rd = resp_body(r, KP_API_FETCH, v);
        kp_FetchResponse fr;
        kp_arena_reset(&arena);
        int16_t err = -1;
        kp_str recs = KP_STR_NULL;
        if (kp_dec_FetchResponse(&rd, v, &fr, &arena) == 0 && fr.Responses_count == 1 &&
            fr.Responses[0].Partitions_count == 1) {
            err = fr.Responses[0].Partitions[0].ErrorCode;
            hw = fr.Responses[0].Partitions[0].HighWatermark;
            recs = fr.Responses[0].Partitions[0].Records;
        }
        if (err || recs.len <= 0) {
            fprintf(stderr, "fetch_bench: bad fetch response (error %d)\n", err);
            exit(1);
        }
        /* Next offset: after the last whole batch (headers only). */
        const uint8_t *p = (const uint8_t *)recs.p;
        size_t left = (size_t)recs.len;
        while (left >= KP_BATCH_HEADER_SIZE) {
            int64_t size = kp_batch_size(p, left);
            kp_batch h;
            if (size < 0 || (size_t)size > left || kp_batch_header(p, left, &h))
                break;
            off = h.BaseOffset + h.LastOffsetDelta + 1;
            p += size;
            left -= (size_t)size;
        }
        bytes += recs.len;
    }
    return bytes;
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
    int16_t pv[2] = { produce_version, 11 }, fv[2] = { fetch_version, 17 };
    long pbytes[2] = { 0 }, fbytes[2] = { 0 };
    double pt[2] = { 0 }, ft[2] = { 0 }, fcpu[2] = { 0 };
    for (int i = 0; i < ROUNDS; i++)
        for (int j = 0; j < 2; j++) {
            int k = (i + j) % 2;
            pt[k] += produce_mib(fd, pv[k], mib / (2 * ROUNDS) + 1, &pbytes[k]);
        }
    find_topic_id(fd);
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    int32_t cid = 1;
    fetch_pass(fd, fv[1], &q, &r, &cid);            /* warm-up */
    for (int i = 0; i < 2 * PASSES; i++)            /* order flipped every pass */
        for (int j = 0; j < 2; j++) {
            int k = (i + j) % 2;
            double t0 = bench_now(), c0 = bench_cpu_seconds(broker);
            fbytes[k] += fetch_pass(fd, fv[k], &q, &r, &cid);
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
    fetch_version = env_version("BENCH_FETCH_VERSION", comparing ? 11 : 4, 4, 17);
    produce_version = env_version("BENCH_PRODUCE_VERSION", 7, 3, 11);
    kp_arena_init(&arena, KP_ARENA_LIMIT_DEFAULT);
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
        kp_arena_free(&arena);
        return rc;
    }
    double t0 = bench_now();
    fill(fd, mib);
    printf("fetch_bench: wrote %ld MiB in %.1f s\n", mib, bench_now() - t0);
    if (fetch_version >= 13)
        find_topic_id(fd);

    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    int32_t cid = 1;
    fetch_pass(fd, fetch_version, &q, &r, &cid);    /* warm-up */
    double cpu0 = bench_cpu_seconds(b.pid);
    int32_t cid0 = cid;
    t0 = bench_now();
    long fbytes = 0;
    for (int i = 0; i < PASSES; i++)
        fbytes += fetch_pass(fd, fetch_version, &q, &r, &cid);
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
    kp_arena_free(&arena);

    double fmb = (double)fbytes / 1e6 / ft, smb = (double)sbytes / 1e6 / st;
    double pmb = (double)pbytes / 1e6 / pt;
    printf("fetch_bench: Fetch v%d, 1 MiB per request, %d passes over %ld MiB: %.0f MB/s "
           "(%ld requests/s), broker CPU %.2f s = %.2f CPU-s/GB\n",
           fetch_version, PASSES, mib, fmb, (long)((cid - cid0) / ft), cpu, cpu / ((double)fbytes / 1e9));
    printf("fetch_bench: sendfile of the cached segment, loopback TCP, streamed: %.0f MB/s; "
           "1 MiB per 1-byte request: %.0f MB/s\n", smb, pmb);
    printf("fetch_bench: ratio fetch/sendfile %.2f (streamed), %.2f (request/response)\n",
           fmb / smb, fmb / pmb);
    return 0;
}
