/*
 * Produce with full record validation vs without (issue 28, Deliver 2):
 * the cost of protocol/validate.c on the broker, per codec and record size.
 *
 *   build/bench/rdkafka_validate_bench [path/to/sluiced] [MB per measurement] [rounds]
 *       (sluiced also from $SLUICED; default build/sluiced; 128 MB of
 *       record values per measurement (a quarter of it for the client
 *       phase); 5 rounds)
 *
 * The same binary both ways: "off" starts sluiced with
 * SLUICE_TEST_SKIP_RECORD_VALIDATION=1 in its environment (a TEST-ONLY
 * switch, daemon/api/api_produce.c).  One broker per mode runs for the whole
 * bench; for record values of 100 B and 1 KiB and every codec, each round
 * measures both (alternating which goes first), each time sending the same
 * pre-built batch
 * (~64 KiB of values: 640 or 64 records of log-line-like text, compressed
 * by the bench beforehand, so the client costs nothing but the send) as
 * Produce v7, acks=1, BENCH_PIPELINE requests in flight, until the MB of values
 * is sent.  Figures: MB/s of record values (wall clock), and the broker's
 * CPU seconds (utime+stime) per GB of values.  Printed per codec and size:
 * the medians over the rounds, and the ratio on/off of the median
 * throughputs (targets: uncompressed >= 0.9, lz4 and zstd >= 0.7); then
 * the validator's CPU per GB measured alone in this process (the least of
 * three runs over ~256 MB of values), and the "CPU ratio"
 * off / (off + validator): the throughput ratio of a broker bound by its
 * own CPU.  Then the codec's decode bound, measured in the same run on the
 * same batch, the same way: "decode s/GB", the CPU per GB of values to
 * do nothing but decompress the batch's records area, the fastest one-shot
 * way each library offers (inflate, snappy_uncompress per raw or xerial
 * block, LZ4F_decompress with stableDst, ZSTD_decompressDCtx), into a
 * preallocated buffer with a reused context; and "bound ratio"
 * off / (off + decode): the best throughput ratio any validator that
 * decompresses can reach on a broker bound by its CPU (the machine's
 * physical bound for that codec).  After the table, one line per codec
 * that misses its target (wall-clock or CPU ratio): whether the bound
 * rules it out (bound ratio < target), and validator / decode, how far
 * the validator is from the bare decode (what it adds is parsing every
 * record, which the uncompressed row's validator s/GB prices).
 *
 * Then the same with a real client: librdkafka (linger.ms=5, acks=1,
 * compression.type = the codec) producing the same log-line values, 4096
 * distinct ones in turn, on this machine — what a producer sees, the
 * client's compression included.  Printed: msgs/s on and off, their
 * ratio, and the broker's CPU per GB of values.
 *
 * Clients and broker share the machine's cores (and, on a shared machine,
 * other work): run under `flock /tmp/sluice-bench.lock`, and read the CPU
 * per GB, which other load disturbs less than the wall clock.
 */
#include "bench/bench_rdkafka.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#define BATCH_VALUES (64 * 1024)
#define NCODECS 5
#define NSIZES 2
#define MAX_ROUNDS 15

static const char *const codec_names[NCODECS] = { "none", "gzip", "snappy", "lz4", "zstd" };
static const size_t value_sizes[NSIZES] = { 100, 1024 };

/* Log-line-like values (what compresses about as well as real traffic):
 * words from a small vocabulary and numbers, from a fixed LCG. */
static void fill_value(char *v, size_t n, uint32_t *seed)
{
    static const char *const words[] = {
        "GET", "POST", "/api/v1/orders", "/api/v1/users", "status=200", "status=404",
        "latency_ms=", "user=", "region=eu-west-1", "region=us-east-2", "ok", "retry",
        "cache=hit", "cache=miss", "bytes=", "trace=",
    };
    size_t i = 0;
    while (i < n) {
        *seed = *seed * 1103515245u + 12345u;
        uint32_t r = *seed >> 8;
        char tok[32];
        int t = (r & 1) ? snprintf(tok, sizeof tok, "%u ", r % 100000)
                        : snprintf(tok, sizeof tok, "%s ", words[r % 16]);
        for (int k = 0; k < t && i < n; k++)
            v[i++] = tok[k];
    }
}

static int make_batch(kp_buf *batch, int codec, size_t value_size)
{
    int n = (int)(BATCH_VALUES / value_size);
    char *v = malloc(value_size);
    uint32_t seed = 42;
    kp_buf_init(batch);
    kp_batch_builder bb;
    kp_bb_init(&bb, batch, codec);
    for (int i = 0; i < n; i++) {
        fill_value(v, value_size, &seed);
        char key[16];
        int kl = snprintf(key, sizeof key, "k%d", i % 97);
        kp_bb_add(&bb, 1700000000000LL + i, key, kl, v, (int32_t)value_size, NULL, 0);
    }
    int rc = kp_bb_finish(&bb) < 0 ? -1 : n;
    kp_bb_free(&bb);
    free(v);
    return rc;
}

typedef bench_produce_result result;

/* CPU seconds (this thread's CLOCK_THREAD_CPUTIME_ID, which time spent
 * waiting on a busy machine does not inflate) per GB of values for step(ctx)
 * run on a batch of records x value_size bytes of values, ~256 MB of
 * values' worth, the least of REPS such runs (the work is the same each
 * time: other load only adds); step returns false if the bench's own
 * batch fails. */
#define REPS 3
static double cpu_per_gb(bool (*step)(void *), void *ctx, int records, size_t value_size)
{
    long iters = (long)(256e6 / ((double)records * (double)value_size)) + 1;
    double best = 0;
    for (int rep = 0; rep < REPS; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        for (long i = 0; i < iters; i++)
            if (!step(ctx)) {
                fprintf(stderr, "the bench's own batch does not validate or decode\n");
                exit(1);
            }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (rep == 0 || secs < best)
            best = secs;
    }
    return best / ((double)iters * (double)records * (double)value_size / 1e9);
}

typedef struct val_run {
    kp_validator v;
    const kp_buf *batch;
    kp_batch b;
    int64_t size;
} val_run;

static bool val_step(void *ctx)
{
    val_run *r = ctx;
    kp_val_rules rules = { .now_ms = 1700000000000LL };
    kp_val_fault f;
    return r->size >= 0 &&
           kp_batch_validate_records(&r->v, r->batch->data, (size_t)r->size, &r->b, &rules,
                                     &f) == 0;
}

/* The validator alone, in this process: kp_batch_validate_records on the
 * batch, warm validator, as the broker runs it. */
static double validator_cpu_per_gb(const kp_buf *batch, int records, size_t value_size)
{
    val_run r = { .batch = batch };
    kp_validator_init(&r.v);
    r.size = kp_batch_validate(batch->data, batch->len, &r.b);
    double s = cpu_per_gb(val_step, &r, records, value_size);
    kp_validator_free(&r.v);
    return s;
}

/* The codec's decode bound: the batch's records area decompressed whole,
 * the fastest one-shot way each library offers, into a preallocated
 * buffer with a reused context (nothing allocated in the timed loop), the
 * output checked against kp_decompress's once before. */
typedef struct dec_run {
    int codec;
    const uint8_t *in;
    size_t in_len, plain;     /* plain: the decompressed size */
    uint8_t *out;
    size_t cap;               /* plain + a block of slack: LZ4F decodes a
                                 block straight into dst only when dst has
                                 room for a whole one */
    z_stream zs;
    LZ4F_dctx *lz4;
    ZSTD_DCtx *zstd;
} dec_run;

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Raw snappy block, or xerial framing (16-byte header, then INT32 BE
 * length + raw block to the end), as protocol/codec.c reads them. */
static size_t snappy_whole(const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
    static const uint8_t xerial_magic[8] = { 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0 };
    size_t got = cap, done = 0;
    if (n < 16 || memcmp(in, xerial_magic, 8) != 0)
        return snappy_uncompress((const char *)in, n, (char *)out, &got) == SNAPPY_OK ? got : 0;
    for (size_t pos = 16; pos + 4 <= n;) {
        size_t len = be32(in + pos);
        got = cap - done;
        if (len > n - pos - 4 || snappy_uncompress((const char *)in + pos + 4, len,
                                                   (char *)out + done, &got) != SNAPPY_OK)
            return 0;
        done += got;
        pos += 4 + len;
    }
    return done;
}

static bool dec_step(void *ctx)
{
    dec_run *d = ctx;
    size_t got = 0, src = d->in_len;
    switch (d->codec) {
    case KP_CODEC_GZIP:
        inflateReset(&d->zs);
        d->zs.next_in = (Bytef *)(uintptr_t)d->in;
        d->zs.avail_in = (uInt)d->in_len;
        d->zs.next_out = d->out;
        d->zs.avail_out = (uInt)d->cap;
        if (inflate(&d->zs, Z_FINISH) == Z_STREAM_END)
            got = d->cap - d->zs.avail_out;
        break;
    case KP_CODEC_SNAPPY:
        got = snappy_whole(d->in, d->in_len, d->out, d->cap);
        break;
    case KP_CODEC_LZ4: {
        LZ4F_decompressOptions_t o = { .stableDst = 1 };
        LZ4F_resetDecompressionContext(d->lz4);
        got = d->cap;
        if (LZ4F_decompress(d->lz4, d->out, &got, d->in, &src, &o) != 0 || src != d->in_len)
            got = 0;
        break;
    }
    case KP_CODEC_ZSTD:
        got = ZSTD_decompressDCtx(d->zstd, d->out, d->cap, d->in, d->in_len);
        break;
    }
    return got == d->plain;
}

/* -1 for an uncompressed batch (nothing to decode). */
static double decode_cpu_per_gb(const kp_buf *batch, int codec, int records,
                                size_t value_size)
{
    if (codec == KP_CODEC_NONE)
        return -1;
    dec_run d = { .codec = codec, .in = batch->data + KP_BATCH_HEADER_SIZE,
                  .in_len = batch->len - KP_BATCH_HEADER_SIZE };
    kp_buf plain;
    kp_buf_init(&plain);
    if (kp_decompress(codec, d.in, d.in_len, &plain, KP_REC_PLAIN_MAX) != 0 ||
        inflateInit2(&d.zs, 15 + 32) != Z_OK ||
        LZ4F_isError(LZ4F_createDecompressionContext(&d.lz4, LZ4F_VERSION)) ||
        !(d.zstd = ZSTD_createDCtx())) {
        fprintf(stderr, "cannot set up the %s decoder\n", codec_names[codec]);
        exit(1);
    }
    d.plain = plain.len;
    d.cap = plain.len + ((size_t)64 << 10);
    d.out = malloc(d.cap);
    if (!d.out || !dec_step(&d) || memcmp(d.out, plain.data, d.plain) != 0) {
        fprintf(stderr, "the %s decode bound decodes its batch wrongly\n", codec_names[codec]);
        exit(1);
    }
    double s = cpu_per_gb(dec_step, &d, records, value_size);
    inflateEnd(&d.zs);
    LZ4F_freeDecompressionContext(d.lz4);
    ZSTD_freeDCtx(d.zstd);
    free(d.out);
    kp_buf_free(&plain);
    return s;
}

/* librdkafka producing n values (cycling through vals) to topic. */
static result rk_measure(const bench_broker *b, const char *topic, const char *codec,
                         char *const *vals, int nvals, size_t value_size, long n)
{
    char bs[64];
    snprintf(bs, sizeof bs, "127.0.0.1:%d", b->port);
    rd_kafka_t *rk = bench_rk_producer_new(bench_rk_producer_conf(bs, "1", codec));
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    const struct rd_kafka_metadata *md;
    if (rd_kafka_metadata(rk, 0, rkt, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR)
        rd_kafka_metadata_destroy(md);
    bench_rk_delivered = bench_rk_failed = 0;
    double cpu0 = bench_cpu_seconds(b->pid), t0 = bench_now();
    for (long i = 0; i < n; i++) {
        /* no copy: vals live until the end of the program */
        while (rd_kafka_producev(rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(0),
                                 RD_KAFKA_V_VALUE(vals[i % nvals], value_size),
                                 RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR__QUEUE_FULL)
            rd_kafka_poll(rk, 10);
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0);
    }
    rd_kafka_flush(rk, 120000);
    double secs = bench_now() - t0, cpu = bench_cpu_seconds(b->pid) - cpu0;
    if (bench_rk_failed || bench_rk_delivered != n) {
        fprintf(stderr, "%s: %ld delivered, %ld failed of %ld\n", topic,
                bench_rk_delivered, bench_rk_failed, n);
        exit(1);
    }
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    double gb = (double)n * (double)value_size / 1e9;
    return (result){ (double)n / secs, cpu / gb };
}

/* A broker in one mode, with a topic per size and codec. */
static int start_mode(bench_broker *b, bool validate)
{
    if (validate)
        unsetenv("SLUICE_TEST_SKIP_RECORD_VALIDATION");
    else
        setenv("SLUICE_TEST_SKIP_RECORD_VALIDATION", "1", 1);
    const char *const extra[] = { "auto.create.topics.enable=false", NULL };
    bench_broker_start(b, extra);
    unsetenv("SLUICE_TEST_SKIP_RECORD_VALIDATION");
    int fd = bench_connect(b->port);
    if (fd < 0)
        return -1;
    int rc = 0;
    for (int s = 0; s < NSIZES && rc == 0; s++)
        for (int c = 0; c < NCODECS && rc == 0; c++) {
            char topic[64];
            snprintf(topic, sizeof topic, "v-%zu-%s", value_sizes[s], codec_names[c]);
            /* keep the disk small: only the newest 256 MiB of a topic */
            const char *const tcfg[] = { "segment.bytes", "67108864",
                                         "retention.bytes", "268435456", NULL };
            rc = bench_create_topic(fd, topic, 1, tcfg);
            topic[0] = 'r';                                 /* the client phase's */
            if (rc == 0)
                rc = bench_create_topic(fd, topic, 1, tcfg);
        }
    close(fd);
    return rc;
}

/* The throughput ratio codec c should reach (issue 28), 0: none. */
static double target_of(int c)
{
    return c == KP_CODEC_NONE ? 0.9 : (c == KP_CODEC_LZ4 || c == KP_CODEC_ZSTD) ? 0.7 : 0;
}

/* Medians over the rounds of size s and codec c, [validate off/on][MB/s,
 * CPU-s/GB] into med; returns the on/off throughput ratio and sets the
 * target it should meet (0: none). */
static double medians(result r[2][MAX_ROUNDS][NSIZES][NCODECS], int rounds, int s, int c,
                      double med[2][2], double *target)
{
    for (int v = 0; v < 2; v++) {
        double thr[MAX_ROUNDS], cpu[MAX_ROUNDS];
        for (int i = 0; i < rounds; i++) {
            thr[i] = r[v][i][s][c].mbps;
            cpu[i] = r[v][i][s][c].cpu_per_gb;
        }
        med[v][0] = bench_median(thr, rounds);
        med[v][1] = bench_median(cpu, rounds);
    }
    *target = target_of(c);
    return med[1][0] / med[0][0];
}

int main(int argc, char **argv)
{
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    double mb = argc > 2 ? atof(argv[2]) : 128;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS)
        rounds = 5;
    bench_catch_signals(1800);

    kp_buf batches[NSIZES][NCODECS];
    int records[NSIZES];
    for (int s = 0; s < NSIZES; s++)
        for (int c = 0; c < NCODECS; c++)
            if ((records[s] = make_batch(&batches[s][c], c, value_sizes[s])) < 0) {
                fprintf(stderr, "cannot build the %s batch\n", codec_names[c]);
                return 1;
            }

    /* Both brokers run side by side and the measurements alternate (on,
     * off, then off, on, ...) so that load from elsewhere on the machine
     * falls on both sides alike. */
    bench_broker brokers[2] = { { 0 }, { 0 } };            /* [validate] */
    for (int v = 0; v < 2; v++)
        if (start_mode(&brokers[v], v) != 0) {
            fprintf(stderr, "cannot start the %s broker\n", v ? "on" : "off");
            bench_broker_cleanup(&brokers[0]);
            bench_broker_cleanup(&brokers[1]);
            return 1;
        }
    static result res[2][MAX_ROUNDS][NSIZES][NCODECS];   /* [validate][round] */
    int failed = 0;
    for (int s = 0; s < NSIZES && !failed; s++)
        for (int c = 0; c < NCODECS && !failed; c++) {
            char topic[64];
            snprintf(topic, sizeof topic, "v-%zu-%s", value_sizes[s], codec_names[c]);
            for (int i = 0; i < rounds && !failed; i++)
                for (int k = 0; k < 2 && !failed; k++) {
                    int v = (i + k + 1) % 2;
                    failed = bench_produce_measure(&brokers[v], topic, &batches[s][c], records[s],
                                     value_sizes[s], mb, &res[v][i][s][c]);
                }
        }
    /* The client phase: librdkafka compressing, same values. */
    static result rk[2][MAX_ROUNDS][NSIZES][NCODECS];
    static char *vals[NSIZES][4096];
    for (int s = 0; s < NSIZES && !failed; s++) {
        uint32_t seed = 7;
        for (int i = 0; i < 4096; i++) {
            vals[s][i] = malloc(value_sizes[s]);
            fill_value(vals[s][i], value_sizes[s], &seed);
        }
        for (int c = 0; c < NCODECS; c++) {
            char topic[64];
            snprintf(topic, sizeof topic, "r-%zu-%s", value_sizes[s], codec_names[c]);
            long n = (long)(mb / 4 * 1e6 / (double)value_sizes[s]);
            for (int i = 0; i < rounds; i++)
                for (int k = 0; k < 2; k++) {
                    int v = (i + k + 1) % 2;
                    rk[v][i][s][c] = rk_measure(&brokers[v], topic, codec_names[c],
                                                vals[s], 4096, value_sizes[s], n);
                }
        }
    }
    bench_broker_cleanup(&brokers[0]);
    bench_broker_cleanup(&brokers[1]);
    if (failed) {
        fprintf(stderr, "a measurement failed\n");
        return 1;
    }

    printf("Produce v7 acks=1, %d in flight, batches of ~64 KiB of values, %.0f MB of "
           "values per measurement, median of %d rounds\n", BENCH_PIPELINE, mb, rounds);
    printf("%-6s %-6s %6s %10s %10s %7s %12s %12s %13s %9s %11s %11s\n", "value", "codec",
           "batch", "on MB/s", "off MB/s", "ratio", "on CPU-s/GB", "off CPU-s/GB",
           "validator s/GB", "CPU ratio", "decode s/GB", "bound ratio");
    int miss = 0;
    char why[NCODECS][256] = { "" };              /* per codec that misses */
    for (int s = 0; s < NSIZES; s++)
        for (int c = 0; c < NCODECS; c++) {
            double med[2][2], target, ratio = medians(res, rounds, s, c, med, &target);
            bool ok = ratio >= target;
            miss += !ok;
            char verdict[48] = "";
            if (target > 0)
                snprintf(verdict, sizeof verdict, "   %s >= %.1f", ok ? "meets" : "MISSES", target);
            /* The broker's CPU per GB without validation, against the same
             * plus the validator's own cost measured alone: the ratio a
             * broker bound by its CPU would see, less disturbed by other
             * load than the wall clock.  The same with the codec's bare
             * decode instead of the validator: the best ratio any
             * validator that decompresses can reach. */
            double off = med[0][1];
            double alone = validator_cpu_per_gb(&batches[s][c], records[s], value_sizes[s]);
            double dec = decode_cpu_per_gb(&batches[s][c], c, records[s], value_sizes[s]);
            double cpu_ratio = off / (off + alone), bound = off / (off + dec);
            char dec_s[16] = "-", bound_s[16] = "-";
            if (dec >= 0) {
                snprintf(dec_s, sizeof dec_s, "%.3f", dec);
                snprintf(bound_s, sizeof bound_s, "%.2f", bound);
            }
            printf("%-6zu %-6s %5zuB %10.1f %10.1f %7.2f %12.2f %12.2f %13.3f %9.2f %11s %11s%s\n",
                   value_sizes[s], codec_names[c], batches[s][c].len, med[1][0], med[0][0],
                   ratio, med[1][1], off, alone, cpu_ratio, dec_s, bound_s, verdict);
            if (target > 0 && dec >= 0 && (!ok || cpu_ratio < target)) {
                size_t n = strlen(why[c]);
                snprintf(why[c] + n, sizeof why[c] - n,
                         "%s%zu B: ratio %.2f, CPU ratio %.2f, bound ratio %.2f %s, "
                         "validator/decode %.2f", n ? "; " : "", value_sizes[s], ratio,
                         cpu_ratio, bound, bound < target ? "(ruled out by the bound)"
                                                          : "(the bound allows it)", alone / dec);
            }
        }
    for (int c = 0; c < NCODECS; c++)
        if (why[c][0])
            printf("%s misses >= %.1f: %s\n", codec_names[c], target_of(c), why[c]);

    printf("\nlibrdkafka %s producing (linger.ms=5 acks=1, compression.type = codec), "
           "%.0f MB of values per measurement, median of %d rounds\n", rd_kafka_version_str(),
           mb / 4, rounds);
    printf("%-6s %-6s %12s %12s %7s %12s %12s\n", "value", "codec", "on msgs/s",
           "off msgs/s", "ratio", "on CPU-s/GB", "off CPU-s/GB");
    for (int s = 0; s < NSIZES; s++)
        for (int c = 0; c < NCODECS; c++) {
            double med[2][2], target, ratio = medians(rk, rounds, s, c, med, &target);
            char verdict[48] = "";
            if (target > 0)
                snprintf(verdict, sizeof verdict, "   %s >= %.1f",
                         ratio >= target ? "meets" : "MISSES", target);
            printf("%-6zu %-6s %12.0f %12.0f %7.2f %12.2f %12.2f%s\n", value_sizes[s],
                   codec_names[c], med[1][0], med[0][0], ratio, med[1][1], med[0][1], verdict);
        }
    for (int s = 0; s < NSIZES; s++) {
        for (int c = 0; c < NCODECS; c++)
            kp_buf_free(&batches[s][c]);
        for (int i = 0; i < 4096; i++)
            free(vals[s][i]);
    }
    return miss ? 2 : 0;
}
