/*
 * sql_bench — the SQL admin surface against issue 6's performance targets,
 * over the real wire (Kafka frames to the broker, HTTP POST /sql to its
 * admin endpoint), each figure printed next to its target with PASS/MISS:
 *
 *   1. SELECT * FROM consumer_lag with 1,000 partitions (10 topics x 100,
 *      5 records each so lag is non-zero) and 50 offsets-only groups
 *      (OffsetCommit v2, generation -1): median and p95 of 50 queries,
 *      target < 50 ms.  Twice: (a) each group has committed one topic,
 *      5,000 rows; (b) every group has committed every partition, 50,000
 *      rows.  Also count(*) over the view: the join without the output.
 *   2. Produce throughput with and without that query every 100 ms from
 *      another thread (after 1a and after 1b): pipelined Produce v7
 *      (acks=1) of one pre-built 64 KiB batch, quiet and loaded alternating
 *      in 1 s slices.  Target < 5 % drop.  On a 2-core box the producer
 *      client, the broker's loop and the SQL worker share the cores, so this
 *      measures the query's CPU share as much as any interference.
 *   3. SELECT offset, key, value FROM messages WHERE topic='big' AND
 *      partition=P AND offset >= N LIMIT 10, N at 10, 50 and 90 % of the
 *      partition (inside a batch), and N the tenth-last record of a batch
 *      (the worst case): bytes read from segment files (the broker's
 *      sluice_sql_messages_bytes_read_total on GET /metrics), target
 *      < 1 MB, and latency.  (a) ~1 MB batches of 1,000 x 1 KiB records,
 *      the most max.message.bytes allows; (b) 16 KiB batches, the Java
 *      producer's default batch.size.  The issue says a 10 GB partition;
 *      the default here is 2 GiB (b: 1/8 of that) to stay in the time
 *      budget.  What the query reads is an index search (log2(entries)
 *      preads of 8 bytes) plus, these batches being uncompressed, the
 *      batch holding the first row from its start to the last row
 *      returned, in 16 KiB reads (a compressed batch is read whole); none
 *      of it grows with the partition; pass a bigger size to check.  So a
 *      query near the end of a 1 MB batch reads about 1 MB.  Run last so
 *      the writeback of 2 GiB does not disturb the throughput comparison.
 *   4. Typed messages (issue 31): 1 M records in Confluent's wire format
 *      (an Avro record {x long, name string} registered through the
 *      registry's REST API), then SELECT count(*) ... WHERE
 *      json_extract(value_json, '$.x') >= N: records/s, beside the same
 *      scan counting length(value) (no decoding) in the same run.  The
 *      issue asks for the figure (a report, no target).
 *
 *   build-x/bench/sql_bench [big MiB, default 2048] [produce seconds each way, default 10]
 *                           [typed records, default 1000000]
 *       sluiced: $SLUICED, else the one beside this binary (../sluiced),
 *       else build/sluiced.  Data under $BENCH_TMPDIR (default /tmp),
 *       removed at the end (also when a step fails).
 *
 * Latencies are with the data in page cache (it was just written).
 */
#include "bench/bench_common.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/stat.h>

#define LAG_TOPICS        10
#define LAG_PARTS         100
#define LAG_GROUPS        50
#define LAG_RECORDS       5           /* per partition; groups commit 0..4 */
#define LAG_QUERIES       50
#define LAG_TARGET_MS     50.0

#define BIG_VALUE         1024
#define BIG_RECS          1000        /* ~1.03 MB: under max.message.bytes */
#define SMALL_RECS        16          /* 16 KiB: the Java producer's batch.size */
#define MSG_TARGET_BYTES  1000000

#define TPUT_VALUE        1024
#define TPUT_RECS         64          /* 64 KiB batches */
#define TPUT_INFLIGHT     4
#define TPUT_TARGET_DROP  5.0

static int kafka_port, admin_port, registry_port;
static bench_broker broker;           /* stopped and removed at exit, even on failure */

static void cleanup_at_exit(void) { bench_broker_cleanup(&broker); broker.dir[0] = 0; }

/* ---- HTTP ---------------------------------------------------------------------- */
typedef bench_http_res http_res;

static int http_do(const char *method, const char *path, const char *body, http_res *res)
{
    return bench_http(admin_port, method, path, body, res);
}

static double sql(const char *q, http_res *res)
{
    double t0 = bench_now();
    if (http_do("POST", "/sql?format=csv&headers=off", q, res) || res->status != 200) {
        fprintf(stderr, "sql_bench: %s\n  -> HTTP %d %.*s\n", q, res->status,
                (int)(res->body_len > 300 ? 300 : res->body_len), res->body ? res->body : "");
        exit(1);
    }
    return bench_now() - t0;
}

static long long messages_bytes_read(http_res *res)
{
    static const char name[] = "\nsluice_sql_messages_bytes_read_total ";
    if (http_do("GET", "/metrics", NULL, res) || res->status != 200) {
        fprintf(stderr, "sql_bench: GET /metrics failed\n");
        exit(1);
    }
    const char *p = strstr(res->body, name);
    if (!p) {
        fprintf(stderr, "sql_bench: /metrics has no sluice_sql_messages_bytes_read_total\n");
        exit(1);
    }
    return strtoll(p + sizeof name - 1, NULL, 10);
}

/* ---- Kafka requests ------------------------------------------------------------ */
static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void build_batch(kp_buf *out, int nrecs, int value_size)
{
    char *value = malloc((size_t)value_size);
    memset(value, 'v', (size_t)value_size);
    kp_batch_builder bb;
    kp_buf_init(out);
    kp_bb_init(&bb, out, KP_CODEC_NONE);
    int64_t ts = now_ms();
    for (int i = 0; i < nrecs; i++)
        kp_bb_add(&bb, ts, NULL, 0, value, value_size, NULL, 0);
    if (kp_bb_finish(&bb) < 0) {
        fprintf(stderr, "sql_bench: cannot build a batch\n");
        exit(1);
    }
    kp_bb_free(&bb);
    free(value);
}

static void produce_sync(int fd, const char *topic, int32_t nparts, const kp_buf *batch)
{
    static int32_t cid = 1;
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    bench_produce_req(&q, cid++, "sql-bench", topic, nparts, batch);
    int err = bench_roundtrip(fd, &q, &r) ? -1 : bench_produce_error(&r);
    if (err) {
        fprintf(stderr, "sql_bench: produce to %s failed (%d)\n", topic, err);
        exit(1);
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
}

/* OffsetCommit v2 for an Empty (offsets-only) group: generation -1, no
 * member.  Offset committed for every partition of lag topics
 * [first, first + ntopics). */
static void commit_group(int fd, const char *group, int64_t offset, int first, int ntopics)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    kp_req_hdr_write(&q, KP_API_OFFSET_COMMIT, 2, 7, "sql-bench");
    kp_wr_string(&q, group, -1);
    kp_wr_i32(&q, -1);                        /* GenerationId */
    kp_wr_string(&q, "", 0);                  /* MemberId */
    kp_wr_i64(&q, -1);                        /* RetentionTimeMs: broker default */
    kp_wr_array(&q, ntopics);
    for (int t = first; t < first + ntopics; t++) {
        char name[32];
        snprintf(name, sizeof name, "lag-%d", t);
        kp_wr_string(&q, name, -1);
        kp_wr_array(&q, LAG_PARTS);
        for (int p = 0; p < LAG_PARTS; p++) {
            kp_wr_i32(&q, p);
            kp_wr_i64(&q, offset);
            kp_wr_string(&q, "", 0);
        }
    }
    int err = -1, n = 0;
    if (bench_roundtrip(fd, &q, &r) == 0) {
        kp_rd rd;
        kp_rd_init(&rd, r.data, r.len);
        kp_rd_i32(&rd);
        err = 0;
        int32_t nt = kp_rd_array(&rd, 4);
        for (int32_t t = 0; t < nt; t++) {
            kp_rd_string(&rd);
            int32_t np = kp_rd_array(&rd, 6);
            for (int32_t p = 0; p < np; p++, n++) {
                kp_rd_i32(&rd);
                int16_t e = kp_rd_i16(&rd);
                if (e && !err)
                    err = e;
            }
        }
        if (!kp_rd_ok(&rd))
            err = -1;
    }
    if (err || n != ntopics * LAG_PARTS) {
        fprintf(stderr, "sql_bench: OffsetCommit for %s failed (%d, %d partitions)\n",
                group, err, n);
        exit(1);
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
}

static void create_topic(int fd, const char *name, int32_t parts, const char *const *configs)
{
    int err = bench_create_topic(fd, name, parts, configs);
    if (err) {
        fprintf(stderr, "sql_bench: CreateTopics %s: error %d\n", name, err);
        exit(1);
    }
}

static double pct(double *v, int n, double p)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static const char *verdict(bool ok) { return ok ? "PASS" : "MISS"; }

/* ---- 1. consumer_lag ----------------------------------------------------------- */
static const char lag_query[] = "SELECT * FROM consumer_lag";

/* The lag topics with LAG_RECORDS records per partition; group g commits
 * every partition of topic g % LAG_TOPICS (5,000 rows: each group reads
 * one topic). */
static void lag_setup(int fd)
{
    double t0 = bench_now();
    kp_buf small;
    build_batch(&small, LAG_RECORDS, 100);
    for (int t = 0; t < LAG_TOPICS; t++) {
        char name[32];
        snprintf(name, sizeof name, "lag-%d", t);
        create_topic(fd, name, LAG_PARTS, NULL);
        produce_sync(fd, name, LAG_PARTS, &small);
    }
    kp_buf_free(&small);
    for (int g = 0; g < LAG_GROUPS; g++) {
        char group[32];
        snprintf(group, sizeof group, "group-%02d", g);
        commit_group(fd, group, g % LAG_RECORDS, g % LAG_TOPICS, 1);
    }
    printf("setup: %d topics x %d partitions, %d records each; %d groups (%.1f s)\n",
           LAG_TOPICS, LAG_PARTS, LAG_RECORDS, LAG_GROUPS, bench_now() - t0);
}

/* Every group commits every partition (50,000 rows). */
static void lag_widen(int fd)
{
    for (int g = 0; g < LAG_GROUPS; g++) {
        char group[32];
        snprintf(group, sizeof group, "group-%02d", g);
        commit_group(fd, group, g % LAG_RECORDS, 0, LAG_TOPICS);
    }
}

static bool bench_lag(const char *what, long want)
{
    http_res res = { 0 };
    kp_buf_init(&res.raw);
    for (int i = 0; i < 3; i++)                               /* warm-up */
        sql(lag_query, &res);
    if (res.rows != want) {
        fprintf(stderr, "sql_bench: consumer_lag gave %ld rows, expected %ld\n", res.rows, want);
        exit(1);
    }
    double lat[LAG_QUERIES];
    for (int i = 0; i < LAG_QUERIES; i++)
        lat[i] = sql(lag_query, &res) * 1e3;
    double med = pct(lat, LAG_QUERIES, 0.5), p95 = pct(lat, LAG_QUERIES, 0.95);
    printf("\n1%s. %s: %d partitions, %d groups, %s = %ld rows (%zu B of CSV), %d queries\n",
           want == (long)LAG_TOPICS * LAG_PARTS * LAG_GROUPS ? "b" : "a", lag_query,
           LAG_TOPICS * LAG_PARTS, LAG_GROUPS, what, want, res.body_len, LAG_QUERIES);
    printf("   median %8.2f ms   target < %.0f ms   %s\n", med, LAG_TARGET_MS,
           verdict(med < LAG_TARGET_MS));
    printf("   p95    %8.2f ms   target < %.0f ms   %s\n", p95, LAG_TARGET_MS,
           verdict(p95 < LAG_TARGET_MS));
    /* Join and lookups without the output: where the time goes. */
    for (int i = 0; i < LAG_QUERIES; i++)
        lat[i] = sql("SELECT count(*), sum(lag) FROM consumer_lag", &res) * 1e3;
    printf("   (SELECT count(*), sum(lag) FROM consumer_lag: median %.2f ms)\n",
           pct(lat, LAG_QUERIES, 0.5));
    kp_buf_free(&res.raw);
    return med < LAG_TARGET_MS && p95 < LAG_TARGET_MS;
}

/* ---- 2. produce throughput with the lag query every 100 ms --------------------- */
struct lag_poller {
    pthread_t th;
    atomic_bool stop;
    int n;
    double lat[4096];
};

static void *lag_poller_main(void *arg)
{
    struct lag_poller *lp = arg;
    http_res res = { 0 };
    kp_buf_init(&res.raw);
    double next = bench_now();
    while (!atomic_load(&lp->stop)) {
        double t = sql(lag_query, &res);
        if (lp->n < (int)(sizeof lp->lat / sizeof lp->lat[0]))
            lp->lat[lp->n++] = t * 1e3;
        next += 0.1;
        double wait = next - bench_now();
        if (wait > 0)
            usleep((useconds_t)(wait * 1e6));
        else
            next = bench_now();                 /* overran: no catch-up burst */
    }
    kp_buf_free(&res.raw);
    return NULL;
}

/* Pipelined produce for `secs`: TPUT_INFLIGHT requests outstanding. */
static double produce_for(int fd, const kp_buf *q, double secs, long *reqs)
{
    kp_buf r;
    kp_buf_init(&r);
    uint8_t len[4] = { (uint8_t)(q->len >> 24), (uint8_t)(q->len >> 16),
                       (uint8_t)(q->len >> 8), (uint8_t)q->len };
    long sent = 0, done = 0;
    double t0 = bench_now(), end = t0 + secs;
    for (;;) {
        bool more = bench_now() < end;
        while (more && sent - done < TPUT_INFLIGHT) {
            if (bench_write_all(fd, len, 4) || bench_write_all(fd, q->data, q->len)) {
                fprintf(stderr, "sql_bench: produce write failed\n");
                exit(1);
            }
            sent++;
        }
        if (done == sent)
            break;
        uint8_t rl[4];
        if (bench_read_all(fd, rl, 4)) {
            fprintf(stderr, "sql_bench: produce read failed\n");
            exit(1);
        }
        size_t n = (size_t)rl[0] << 24 | (size_t)rl[1] << 16 | (size_t)rl[2] << 8 | rl[3];
        kp_buf_reset(&r);
        if (bench_read_all(fd, kp_buf_reserve(&r, n), n)) {
            fprintf(stderr, "sql_bench: produce read failed\n");
            exit(1);
        }
        r.len = n;
        int err = bench_produce_error(&r);
        if (err) {
            fprintf(stderr, "sql_bench: produce error %d\n", err);
            exit(1);
        }
        done++;
    }
    kp_buf_free(&r);
    *reqs = done;
    return bench_now() - t0;
}

/* Disk use stays bounded, so the comparison measures CPU, not page-cache
 * writeback throttling: 64 MiB segments, 128 MiB kept, checked every second
 * (log.retention.check.interval.ms at startup) and unlinked at once. */
static void tput_setup(int fd)
{
    static const char *const cfg[] = { "segment.bytes", "67108864",
                                       "retention.bytes", "134217728",
                                       "file.delete.delay.ms", "0", NULL };
    create_topic(fd, "tput", 1, cfg);
}

static bool bench_throughput(int fd, double secs, long rows)
{
    kp_buf batch, q;
    build_batch(&batch, TPUT_RECS, TPUT_VALUE);
    kp_buf_init(&q);
    bench_produce_req(&q, 1, "sql-bench", "tput", 1, &batch);
    long warm;
    produce_for(fd, &q, 1.0, &warm);

    /* Quiet and loaded alternate in 1 s slices, so drift (writeback,
     * retention, frequency scaling, the neighbours) falls on both sides. */
    double t[2] = { 0, 0 };
    long n[2] = { 0, 0 };
    struct lag_poller *lp = calloc(1, sizeof *lp);
    int slices = 2 * (int)(secs + 0.5);
    for (int round = 0; round < slices; round++) {
        int loaded = round & 1;
        if (loaded) {
            atomic_store(&lp->stop, false);
            pthread_create(&lp->th, NULL, lag_poller_main, lp);
        }
        long k;
        t[loaded] += produce_for(fd, &q, 1.0, &k);
        n[loaded] += k;
        if (loaded) {
            atomic_store(&lp->stop, true);
            pthread_join(lp->th, NULL);
        }
    }
    double mb = (double)batch.len / 1e6;
    double quiet = (double)n[0] * mb / t[0], busy = (double)n[1] * mb / t[1];
    double drop = (quiet - busy) / quiet * 100;
    double qmed = lp->n ? pct(lp->lat, lp->n, 0.5) : 0, qmax = lp->n ? lp->lat[lp->n - 1] : 0;
    printf("\n2%s. produce throughput, lag query (%ld rows) every 100 ms vs none: Produce v7 "
           "acks=1, %d x %d B records per %zu B batch, %d in flight, 1 partition; "
           "%.0f s each way, alternating 1 s slices\n",
           rows == (long)LAG_TOPICS * LAG_PARTS * LAG_GROUPS ? "b" : "a", rows, TPUT_RECS,
           TPUT_VALUE, batch.len, TPUT_INFLIGHT, secs);
    printf("   without lag query  %8.1f MB/s  (%.0f req/s)\n", quiet, (double)n[0] / t[0]);
    printf("   lag query / 100 ms %8.1f MB/s  (%.0f req/s; %d queries, median %.1f ms, "
           "max %.1f ms)\n", busy, (double)n[1] / t[1], lp->n, qmed, qmax);
    /* A query slower than 100 ms delays the next: the load is then less
     * than the target says, and the drop proves nothing. */
    int want = (int)(t[1] * 10 + 0.5);
    bool kept_up = lp->n * 10 >= want * 9;
    bool ok = drop < TPUT_TARGET_DROP && kept_up;
    printf("   drop   %8.2f %%    target < %.0f %%, with the query every 100 ms (ran %d of %d)"
           "    %s\n", drop, TPUT_TARGET_DROP, lp->n, want, verdict(ok));
    free(lp);
    kp_buf_free(&batch);
    kp_buf_free(&q);
    return ok;
}

/* ---- 3. messages at an offset in a big partition ------------------------------- */
static bool bench_messages(int fd, int32_t part, long mib, int nrecs)
{
    kp_buf batch;
    build_batch(&batch, nrecs, BIG_VALUE);
    double t0 = bench_now();
    long long goal = (long long)mib << 20, written = 0;
    long batches = 0;
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    kp_buf_reset(&q);
    kp_req_hdr_write(&q, KP_API_PRODUCE, 7, 1, "sql-bench");
    kp_wr_string(&q, NULL, -1);
    kp_wr_i16(&q, 1);
    kp_wr_i32(&q, 30000);
    kp_wr_array(&q, 1);
    kp_wr_string(&q, "big", -1);
    kp_wr_array(&q, 1);
    kp_wr_i32(&q, part);
    kp_wr_bytes(&q, batch.data, (int32_t)batch.len);
    while (written < goal) {
        int err = bench_roundtrip(fd, &q, &r) ? -1 : bench_produce_error(&r);
        if (err) {
            fprintf(stderr, "sql_bench: produce to big/%d failed (%d)\n", part, err);
            exit(1);
        }
        written += (long long)batch.len;
        batches++;
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    double fill = bench_now() - t0;
    int64_t hw = (int64_t)batches * nrecs;
    printf("\n3%s. messages at an offset: big/%d, %.2f GiB in %ld batches of %d x %d B records "
           "(%zu B each), %lld records; written in %.1f s (%.0f MB/s)\n",
           part ? "b" : "a", part, (double)written / (1 << 30), batches, nrecs, BIG_VALUE,
           batch.len, (long long)hw, fill, (double)written / 1e6 / fill);
    kp_buf_free(&batch);

    http_res res = { 0 }, met = { 0 };
    kp_buf_init(&res.raw);
    kp_buf_init(&met.raw);
    bool ok = true;
    /* Inside a batch at 10, 50, 90 % of the partition, and the last ten
     * records of a batch (the table reads a batch from its start). */
    static const double where[] = { 0.1, 0.5, 0.9, -1 };
    for (size_t w = 0; w < sizeof where / sizeof where[0]; w++) {
        int64_t n = where[w] < 0 ? (hw / 2 / nrecs) * nrecs + nrecs - 10
                  : (int64_t)((double)hw * where[w]) + nrecs / 2 + 3;
        char sq[256], label[32];
        if (where[w] < 0)
            snprintf(label, sizeof label, "batch end");
        else
            snprintf(label, sizeof label, "%2.0f %%", where[w] * 100);
        snprintf(sq, sizeof sq, "SELECT offset, key, value FROM messages WHERE topic='big' "
                 "AND partition=%d AND offset >= %lld LIMIT 10", part, (long long)n);
        long long b0 = messages_bytes_read(&met);
        double first = sql(sq, &res) * 1e3;
        long long bytes = messages_bytes_read(&met) - b0;
        if (res.rows != 10 || strtoll(res.body, NULL, 10) != n) {
            fprintf(stderr, "sql_bench: messages query gave %ld rows starting at %lld, "
                    "expected 10 from %lld\n", res.rows, strtoll(res.body, NULL, 10),
                    (long long)n);
            exit(1);
        }
        double lat[20];
        for (int i = 0; i < 20; i++)
            lat[i] = sql(sq, &res) * 1e3;
        if (w == 0)
            printf("   %s\n", sq);
        printf("   offset %-9lld (%-9s): read %8lld B   target < %d B   %s"
               "   latency first %.2f ms, median %.2f ms\n", (long long)n, label,
               bytes, MSG_TARGET_BYTES, verdict(bytes < MSG_TARGET_BYTES), first,
               pct(lat, 20, 0.5));
        ok = ok && bytes < MSG_TARGET_BYTES;
    }
    kp_buf_free(&res.raw);
    kp_buf_free(&met.raw);
    return ok;
}

/* ---- main ---------------------------------------------------------------------- */
/* ---- 4. typed messages ---------------------------------------------------------- */
#define TYPED_RECS_PER_BATCH 1000

static size_t avro_long(uint8_t *p, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (z >= 0x80) {
        p[n++] = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    p[n++] = (uint8_t)z;
    return n;
}

static bool bench_typed(int fd, long records)
{
    http_res res = { 0 };
    kp_buf_init(&res.raw);
    int id = -1;
    if (bench_http(registry_port, "POST", "/subjects/typed-value/versions",
                   "{\"schema\": \"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"T\\\","
                   "\\\"fields\\\":[{\\\"name\\\":\\\"x\\\",\\\"type\\\":\\\"long\\\"},"
                   "{\\\"name\\\":\\\"name\\\",\\\"type\\\":\\\"string\\\"}]}\"}", &res) ||
        res.status != 200 || sscanf(res.body, "{\"id\":%d", &id) != 1) {
        fprintf(stderr, "sql_bench: registering the schema failed (HTTP %d %.*s)\n", res.status,
                (int)(res.body_len > 200 ? 200 : res.body_len), res.body ? res.body : "");
        exit(1);
    }
    create_topic(fd, "typed", 1, NULL);
    kp_buf batch;
    kp_buf_init(&batch);
    int64_t ts = now_ms();
    for (long done = 0; done < records; done += TYPED_RECS_PER_BATCH) {
        kp_batch_builder bb;
        kp_buf_reset(&batch);
        kp_bb_init(&bb, &batch, KP_CODEC_NONE);
        for (int i = 0; i < TYPED_RECS_PER_BATCH; i++) {
            uint8_t v[64] = { 0, (uint8_t)(id >> 24), (uint8_t)(id >> 16), (uint8_t)(id >> 8),
                              (uint8_t)id };
            size_t n = 5 + avro_long(v + 5, done + i);
            n += avro_long(v + n, 8);
            memcpy(v + n, "customer", 8);
            kp_bb_add(&bb, ts, NULL, 0, v, (int32_t)(n + 8), NULL, 0);
        }
        if (kp_bb_finish(&bb) < 0) {
            fprintf(stderr, "sql_bench: cannot build a batch\n");
            exit(1);
        }
        kp_bb_free(&bb);
        produce_sync(fd, "typed", 1, &batch);
    }
    kp_buf_free(&batch);
    /* SQL reads up to the high watermark its snapshot of the partitions
     * saw: wait until that includes the last record */
    char last[160];
    snprintf(last, sizeof last, "SELECT count(*) FROM messages WHERE topic = 'typed' AND "
             "partition = 0 AND offset = %ld", records - 1);
    for (int i = 0; sql(last, &res) >= 0 && strtol(res.body, NULL, 10) != 1; i++) {
        if (i == 200) {
            fprintf(stderr, "sql_bench: SQL does not see the typed records after 20 s\n");
            exit(1);
        }
        usleep(100000);
    }
    printf("\n4. typed messages: %ld records in the wire format (schema id %d)\n", records, id);
    double secs[2];
    for (int k = 0; k < 2; k++) {
        char cond[96], q[256];
        snprintf(cond, sizeof cond, k ? "json_extract(value_json, '$.x') >= %ld"
                                      : "length(value) > 0", records / 2);
        snprintf(q, sizeof q, "SELECT count(*) FROM messages WHERE topic = 'typed' AND %s", cond);
        secs[k] = sql(q, &res);
        long want = k ? records - records / 2 : records;
        long got = strtol(res.body, NULL, 10);
        printf("   count(*) where %-40s %8ld rows in %6.2f s: %9.0f records/s\n",
               cond, got, secs[k], records / secs[k]);
        if (got != want) {
            fprintf(stderr, "sql_bench: counted %ld, not %ld\n", got, want);
            exit(1);
        }
    }
    printf("   ratio, records/s decoding / not decoding: %.2f\n", secs[0] / secs[1]);
    kp_buf_free(&res.raw);
    return true;
}

static void pick_sluiced(char *out, size_t cap)
{
    const char *env = getenv("SLUICED");
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if ((!env || !*env) && n > 0) {
        self[n] = 0;
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;                                   /* .../bench */
            slash = strrchr(self, '/');
            if (slash) {
                snprintf(slash, sizeof self - (size_t)(slash - self), "/sluiced");
                struct stat st;
                if (stat(self, &st) == 0) {
                    snprintf(out, cap, "%s", self);
                    return;
                }
            }
        }
    }
    snprintf(out, cap, "%s", bench_sluiced_path());
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 2048;
    double secs = argc > 2 ? atof(argv[2]) : 10;
    long typed = argc > 3 ? atol(argv[3]) : 1000000;
    if (mib <= 0 || secs <= 0) {
        fprintf(stderr, "usage: %s [big MiB] [produce seconds per side]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    static char sluiced[PATH_MAX];
    pick_sluiced(sluiced, sizeof sluiced);
    setenv("SLUICED", sluiced, 1);

    bench_broker *b = &broker;
    admin_port = bench_free_port();
    char admin[64];
    snprintf(admin, sizeof admin, "admin.listeners=127.0.0.1:%d", admin_port);
    registry_port = bench_free_port();
    char registry[80];
    snprintf(registry, sizeof registry, "schema.registry.listeners=http://127.0.0.1:%d",
             registry_port);
    const char *const extra[] = { admin, registry, "log.retention.check.interval.ms=1000",
                                  NULL };
    double start = bench_now();
    atexit(cleanup_at_exit);
    bench_broker_start(b, extra);
    kafka_port = b->port;
    printf("sql_bench: %s, Kafka on %d, admin on %d, data in %s\n", sluiced, kafka_port,
           admin_port, b->dir);
    /* The admin listener comes up with the broker; wait for it too. */
    for (int i = 0;; i++) {
        int fd = bench_connect(admin_port);
        if (fd >= 0) {
            close(fd);
            break;
        }
        if (i > 5000) {
            fprintf(stderr, "sql_bench: admin endpoint did not come up\n");
            return 1;
        }
        usleep(1000);
    }
    int fd = bench_connect(kafka_port);
    if (fd < 0) {
        fprintf(stderr, "sql_bench: cannot connect\n");
        return 1;
    }
    double cpu0 = bench_cpu_seconds(b->pid);
    long narrow = (long)LAG_PARTS * LAG_GROUPS, wide = (long)LAG_TOPICS * LAG_PARTS * LAG_GROUPS;
    lag_setup(fd);
    tput_setup(fd);
    bool ok = bench_lag("each group on one topic", narrow);
    ok &= bench_throughput(fd, secs, narrow);
    lag_widen(fd);
    ok &= bench_lag("every group on every partition", wide);
    ok &= bench_throughput(fd, secs, wide);
    create_topic(fd, "big", 2, NULL);
    printf("\n(The issue's 10 GB partition is scaled down to %ld MiB to fit the time budget: the\n"
           " read is an index search plus the batch holding the first row up to the last row\n"
           " returned, whatever the size.)\n",
           mib);
    ok &= bench_messages(fd, 0, mib, BIG_RECS);
    ok &= bench_messages(fd, 1, mib / 8 > 0 ? mib / 8 : 1, SMALL_RECS);
    ok &= bench_typed(fd, typed);
    double cpu = bench_cpu_seconds(b->pid) - cpu0;
    close(fd);
    cleanup_at_exit();
    printf("\nbroker CPU %.1f s over %.1f s wall; %s\n", cpu, bench_now() - start,
           ok ? "all targets met" : "some targets MISSED");
    return 0;
}
