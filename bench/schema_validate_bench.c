/*
 * Produce to a topic whose values are checked against the schema registry
 * vs the same produce to a topic without the check (issue 31, Performance:
 * "Produce of 1 KiB Avro records (100 per batch) ... >= 0.95 for the id
 * check, >= 0.6 for full decoding").
 *
 *   build/bench/schema_validate_bench [path/to/sluiced] [MB per measurement] [rounds]
 *       (sluiced also from $SLUICED; default build/sluiced; 128 MB of
 *       record values per measurement; 5 rounds)
 *
 * One broker with its registry; one schema (a record of a long and a
 * ~1 KiB string) registered under three subjects; three topics:
 * "plain" (no check), "id" (confluent.value.schema.validation=true) and
 * "decode" (and sluice.value.schema.validation.level=decode).  One
 * pre-built uncompressed batch of 100 records, each value magic 0 + the
 * id + the Avro body (1 KiB in all), is sent to each topic in turn (the
 * order rotates per round) with bench_produce_measure (Produce v7, acks=1,
 * pipelined) until the MB are sent.  Printed: per topic the medians of
 * MB/s of values and of the broker's CPU s/GB, then the ratios
 * checked/plain of the throughputs and of the CPU (plain's CPU / the
 * checked one's: the throughput ratio of a broker bound by its CPU).
 * Then the checks alone, in this process, precise where the broker's
 * CPU clock (10 ms ticks) is not: kp_batch_validate_records on the same
 * batch (warm validator, ~256 MB of values, least of three runs, this
 * thread's CPU clock) without a hook, and with the hook Produce installs
 * calling the registry's check (sr_validate_check on a registry holding
 * the schema, as the broker runs it) at level id and at level decode:
 * s/GB each, and the ratio plain / (plain + extra), with the broker's
 * plain CPU s/GB above: the throughput ratio of a broker bound by its
 * CPU.  Run under `flock /tmp/sluice-bench.lock` (the machine is shared);
 * BENCH_TMPDIR=/dev/shm keeps the disk's writeback out of the figures.
 */
#include "bench/bench_common.h"
#include "daemon/registry/sr_int.h"

#include <time.h>

#define RECORDS 100
#define VALUE_SIZE 1024
#define MAX_ROUNDS 15
#define NTOPICS 3

static const char *const topics[NTOPICS] = { "plain", "id", "decode" };

/* POST body to the registry at port; the id in its answer, or -1. */
static int sr_register(int port, const char *subject, const char *body)
{
    char req[2048], resp[4096];
    int n = snprintf(req, sizeof req,
                     "POST /subjects/%s/versions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                     "Content-Type: application/vnd.schemaregistry.v1+json\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                     subject, strlen(body), body);
    for (int tries = 0; tries < 100; tries++) {     /* the listener may still be starting */
        int fd = bench_connect(port);
        if (fd < 0) {
            usleep(100000);
            continue;
        }
        bench_set_timeout(fd, 30);
        size_t got = 0;
        ssize_t k = 0;
        if (bench_write_all(fd, req, (size_t)n) == 0)
            while (got < sizeof resp - 1 && (k = read(fd, resp + got, sizeof resp - 1 - got)) > 0)
                got += (size_t)k;
        close(fd);
        resp[got] = 0;
        const char *id = strstr(resp, "\"id\":");
        if (strncmp(resp, "HTTP/1.1 200", 12) == 0 && id)
            return atoi(id + 5);
        fprintf(stderr, "registering %s failed: %s\n", subject, resp);
        return -1;
    }
    fprintf(stderr, "the registry does not listen on %d\n", port);
    return -1;
}

static size_t zigzag(uint8_t *p, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    size_t n = 0;
    while (u >= 0x80) {
        p[n++] = (uint8_t)(u | 0x80);
        u >>= 7;
    }
    p[n++] = (uint8_t)u;
    return n;
}

/* 100 values of exactly VALUE_SIZE bytes: magic 0, id, Avro {id, text}. */
static int make_batch(kp_buf *batch, int32_t sid)
{
    kp_buf_init(batch);
    kp_batch_builder bb;
    kp_bb_init(&bb, batch, KP_CODEC_NONE);
    for (int i = 0; i < RECORDS; i++) {
        uint8_t v[VALUE_SIZE];
        v[0] = 0;
        v[1] = (uint8_t)(sid >> 24), v[2] = (uint8_t)(sid >> 16);
        v[3] = (uint8_t)(sid >> 8), v[4] = (uint8_t)sid;
        size_t n = 5 + zigzag(v + 5, 1000000 + i);
        size_t text = VALUE_SIZE - n - 2;               /* a 2-byte length varint */
        n += zigzag(v + n, (int64_t)text);
        for (size_t k = 0; k < text; k++)
            v[n + k] = (uint8_t)('a' + (i + k) % 26);
        if (n + text != VALUE_SIZE)
            return -1;
        kp_bb_add(&bb, 1700000000000LL + i, NULL, 0, (const char *)v, VALUE_SIZE, NULL, 0);
    }
    int rc = kp_bb_finish(&bb) < 0 ? -1 : 0;
    kp_bb_free(&bb);
    return rc;
}

/* ---- the checks alone, in this process ------------------------------------- */

typedef struct hook_run {
    bk_broker *b;
    bk_schema_ctx c;
    kp_validator v;
    kp_batch bh;
    const kp_buf *batch;
    bool on;
} hook_run;

/* What Produce's hook does for a value (daemon/api/api_produce.c). */
static int value_hook(void *arg, int32_t i, const kp_record *rec, bool whole, kp_val_fault *f)
{
    hook_run *h = arg;
    char why[144];
    if (rec->Value.len >= 0 &&
        h->b->schema_check(h->b, &h->c, (const uint8_t *)rec->Value.p, (size_t)rec->Value.len,
                           whole, why, sizeof why) != 0)
        return kp_val_record_fault(f, KP_INVALID_RECORD, i, "%s", why);
    return 0;
}

static double hook_cpu_per_gb(hook_run *h)
{
    long iters = (long)(256e6 / (RECORDS * VALUE_SIZE)) + 1;
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
        for (long i = 0; i < iters; i++) {
            kp_val_rules rules = { .now_ms = 1700000000000LL, .on_record = h->on ? value_hook : NULL,
                                   .arg = h };
            kp_val_fault f;
            h->c.last_ok = -1;                  /* per partition, as Produce sets it */
            h->c.last_entry = NULL;
            if (kp_batch_validate_records(&h->v, h->batch->data, h->batch->len, &h->bh, &rules,
                                          &f) != 0) {
                fprintf(stderr, "the bench's batch is refused: %s\n", f.message);
                exit(1);
            }
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        if (rep == 0 || secs < best)
            best = secs;
    }
    return best / ((double)iters * RECORDS * VALUE_SIZE / 1e9);
}

/* s/GB of the validator alone, with the id check, with decoding (out[3]).
 * 0, or -1 when the registry cannot be set up. */
static int checks_alone(double out[3])
{
    static bk_broker b;
    static sr_registry r;
    r.b = &b;
    b.registry = &r;
    b.schema_check = sr_validate_check;
    static const char key[] = "{\"keytype\":\"SCHEMA\",\"subject\":\"t-value\",\"version\":1,"
                              "\"magic\":1}";
    static const char val[] = "{\"subject\":\"t-value\",\"version\":1,\"id\":1,\"schema\":"
        "\"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"Event\\\",\\\"fields\\\":[{\\\"name\\\":"
        "\\\"id\\\",\\\"type\\\":\\\"long\\\"},{\\\"name\\\":\\\"text\\\",\\\"type\\\":"
        "\\\"string\\\"}]}\",\"deleted\":false}";
    if (sr_state_apply(&r, key, strlen(key), val, (ssize_t)strlen(val)) != 0 || r.nschemas != 1)
        return -1;
    kp_buf batch;
    if (make_batch(&batch, 1) != 0)
        return -1;
    md_schema_check id = { .on = true }, decode = { .on = true, .decode = true };
    hook_run h = { .b = &b, .batch = &batch, .c = { .topic = "t" } };
    kp_validator_init(&h.v);
    if (kp_batch_validate(batch.data, batch.len, &h.bh) != (int64_t)batch.len)
        return -1;
    out[0] = hook_cpu_per_gb(&h);
    h.on = true;
    h.c.rule = &id;
    out[1] = hook_cpu_per_gb(&h);
    h.c.rule = &decode;
    out[2] = hook_cpu_per_gb(&h);
    kp_validator_free(&h.v);
    kp_buf_free(&batch);
    sr_validate_free(&r);
    sr_state_free(&r);
    return 0;
}

int main(int argc, char **argv)
{
    double mb = argc > 2 ? atof(argv[2]) : 128;
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (rounds < 1 || rounds > MAX_ROUNDS || mb <= 0) {
        fprintf(stderr, "usage: %s [sluiced] [MB > 0] [rounds 1..%d]\n", argv[0], MAX_ROUNDS);
        return 2;
    }
    if (argc > 1)
        setenv("SLUICED", argv[1], 1);
    bench_catch_signals(1800);
    int rport = bench_free_port();
    char listener[96];
    snprintf(listener, sizeof listener, "schema.registry.listeners=http://127.0.0.1:%d", rport);
    const char *extra[] = { listener, NULL };
    bench_broker b = { 0 };
    bench_broker_start(&b, extra);
    int fd = bench_connect(b.port);
    const char *const cfgs[NTOPICS][5] = {
        { NULL },
        { "confluent.value.schema.validation", "true", NULL },
        { "confluent.value.schema.validation", "true",
          "sluice.value.schema.validation.level", "decode", NULL } };
    const char *schema = "{\"schema\": \"{\\\"type\\\":\\\"record\\\",\\\"name\\\":\\\"Event\\\","
                         "\\\"fields\\\":[{\\\"name\\\":\\\"id\\\",\\\"type\\\":\\\"long\\\"},"
                         "{\\\"name\\\":\\\"text\\\",\\\"type\\\":\\\"string\\\"}]}\"}";
    int32_t sid = -1;
    for (int t = 0; t < NTOPICS; t++) {
        char subject[64];
        snprintf(subject, sizeof subject, "%s-value", topics[t]);
        int rc = fd < 0 ? -1 : bench_create_topic(fd, topics[t], 1, cfgs[t]);
        int id = sr_register(rport, subject, schema);
        if (rc != 0 || id < 0 || (sid >= 0 && id != sid)) {
            fprintf(stderr, "setup failed: topic %s (error %d), id %d\n", topics[t], rc, id);
            bench_broker_cleanup(&b);
            return 1;
        }
        sid = id;
    }
    if (fd >= 0)
        close(fd);
    kp_buf batch;
    if (make_batch(&batch, sid) != 0) {
        fprintf(stderr, "cannot build the batch\n");
        bench_broker_cleanup(&b);
        return 1;
    }
    static bench_produce_result res[NTOPICS][MAX_ROUNDS];
    for (int i = 0; i < rounds; i++)
        for (int k = 0; k < NTOPICS; k++) {
            int t = (i + k) % NTOPICS;
            if (bench_produce_measure(&b, topics[t], &batch, RECORDS, VALUE_SIZE, mb,
                                      &res[t][i]) != 0) {
                fprintf(stderr, "produce to %s failed\n", topics[t]);
                bench_broker_cleanup(&b);
                return 1;
            }
        }
    printf("schema validation on produce: %d records of %d B Avro values per batch, "
           "uncompressed, %.0f MB per measurement, median of %d rounds\n",
           RECORDS, VALUE_SIZE, mb, rounds);
    double mbps[NTOPICS], cpu[NTOPICS];
    for (int t = 0; t < NTOPICS; t++) {
        double a[MAX_ROUNDS], c[MAX_ROUNDS];
        for (int i = 0; i < rounds; i++)
            a[i] = res[t][i].mbps, c[i] = res[t][i].cpu_per_gb;
        mbps[t] = bench_median(a, rounds);
        cpu[t] = bench_median(c, rounds);
        printf("  %-7s %8.1f MB/s  %6.3f CPU s/GB\n", topics[t], mbps[t], cpu[t]);
    }
    printf("  ratio id/plain     %.3f (CPU ratio %.3f; target >= 0.95)\n",
           mbps[1] / mbps[0], cpu[0] / cpu[1]);
    printf("  ratio decode/plain %.3f (CPU ratio %.3f; target >= 0.6)\n",
           mbps[2] / mbps[0], cpu[0] / cpu[2]);
    kp_buf_free(&batch);
    bench_broker_cleanup(&b);
    double alone[3];
    if (checks_alone(alone) != 0) {
        fprintf(stderr, "cannot set up the registry in this process\n");
        return 1;
    }
    printf("checks alone, in this process (CPU s/GB of values): validator %.4f, "
           "+ id check %.4f, + decode %.4f\n", alone[0], alone[1], alone[2]);
    printf("  CPU-bound ratio id/plain     %.3f (broker's plain %.3f s/GB + %.4f)\n",
           cpu[0] / (cpu[0] + alone[1] - alone[0]), cpu[0], alone[1] - alone[0]);
    printf("  CPU-bound ratio decode/plain %.3f (broker's plain %.3f s/GB + %.4f)\n",
           cpu[0] / (cpu[0] + alone[2] - alone[0]), cpu[0], alone[2] - alone[0]);
    return 0;
}
