/*
 * The librdkafka side of the benchmarks: one producer load, described
 * once, so that every bench comparing brokers drives them the same way.
 * Header-only like bench_common.h.
 *
 * bench_rk_produce: n messages of BENCH_RK_MSG_SIZE bytes to partition 0,
 * linger.ms=5, acks=1 (bench_rk_produce_acks: as given), no compression, queues large enough that the
 * producer never waits on itself, then $BENCH_RK_CONF's settings; the
 * clock runs from the first produce
 * call to the end of the flush (connection and metadata are warmed up
 * before it starts).
 */
#ifndef SLUICE_BENCH_RDKAFKA_H
#define SLUICE_BENCH_RDKAFKA_H

#include "bench/bench_common.h"

#include <librdkafka/rdkafka.h>
#include <stdatomic.h>

#define BENCH_RK_MSG_SIZE 100

typedef struct bench_rk_phase {
    double secs;
    double cpu;            /* broker CPU seconds (sluiced only) */
    long msgs;
} bench_rk_phase;

/* Atomic: txn_bench's producers run on several threads at once. */
static atomic_long bench_rk_delivered, bench_rk_failed;
/* More client settings for every client made after it is set: "key",
 * "value", ..., NULL (bench/tls_bench.c: security.protocol=ssl, ...). */
static const char *const *bench_rk_extra;

static inline void bench_rk_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk; (void)opaque;
    if (m->err)
        bench_rk_failed++;
    else
        bench_rk_delivered++;
}

static inline rd_kafka_conf_t *bench_rk_conf_new(const char *bootstrap)
{
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    if (rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err, sizeof err) ||
        rd_kafka_conf_set(c, "log_level", "3", err, sizeof err)) {
        fprintf(stderr, "conf: %s\n", err);
        exit(1);
    }
    for (const char *const *kv = bench_rk_extra; kv && kv[0]; kv += 2)
        if (rd_kafka_conf_set(c, kv[0], kv[1], err, sizeof err)) {
            fprintf(stderr, "conf %s: %s\n", kv[0], err);
            exit(1);
        }
    return c;
}

static inline void bench_rk_conf(rd_kafka_conf_t *c, const char *k, const char *v)
{
    char err[512];
    if (rd_kafka_conf_set(c, k, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        fprintf(stderr, "conf %s=%s: %s\n", k, v, err);
        exit(1);
    }
}

/* The benches' producer configuration (linger.ms=5, acks, compression.type,
 * queues large enough that the bench, not the client, is measured). */
static inline rd_kafka_conf_t *bench_rk_producer_conf(const char *bootstrap, const char *acks,
                                                     const char *codec)
{
    rd_kafka_conf_t *c = bench_rk_conf_new(bootstrap);
    bench_rk_conf(c, "linger.ms", "5");
    bench_rk_conf(c, "acks", acks);
    bench_rk_conf(c, "compression.type", codec);
    bench_rk_conf(c, "queue.buffering.max.messages", "1000000");
    bench_rk_conf(c, "queue.buffering.max.kbytes", "1048576");
    return c;
}

/* The producer of conf c, delivery reports counted; exits on failure. */
static inline rd_kafka_t *bench_rk_producer_new(rd_kafka_conf_t *c)
{
    rd_kafka_conf_set_dr_msg_cb(c, bench_rk_dr_cb);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "producer: %s\n", err);
        exit(1);
    }
    return rk;
}

/* One message to partition p (not copied: the payload must live until
 * the flush), waiting while the queue is full;
 * i: the caller's message count, every 1024th serves the delivery
 * reports.  Exits on any other error. */
static inline void bench_rk_produce_one(rd_kafka_t *rk, rd_kafka_topic_t *rkt, int32_t p,
                                        const void *payload, size_t len, long i)
{
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_PARTITION(p),
            RD_KAFKA_V_VALUE((void *)payload, len), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
            break;
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            fprintf(stderr, "produce: %s\n", rd_kafka_err2str(e));
            exit(1);
        }
        rd_kafka_poll(rk, 10);
    }
    if ((i & 1023) == 0)
        rd_kafka_poll(rk, 0);
}

static inline bench_rk_phase bench_rk_produce_acks(const char *bootstrap, const char *topic,
                                                   long n, pid_t broker, const char *acks)
{
    rd_kafka_conf_t *c = bench_rk_producer_conf(bootstrap, acks, "none");
    /* $BENCH_RK_CONF: "key=value ..." on top, to try a client setting
     * (linger.ms, batch.num.messages) without a rebuild; printed. */
    char more[512];
    snprintf(more, sizeof more, "%s", getenv("BENCH_RK_CONF") ? getenv("BENCH_RK_CONF") : "");
    for (char *save = NULL, *kv = strtok_r(more, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq) {
            fprintf(stderr, "BENCH_RK_CONF: %s is not key=value\n", kv);
            exit(2);
        }
        *eq = 0;
        bench_rk_conf(c, kv, eq + 1);
    }
    rd_kafka_t *rk = bench_rk_producer_new(c);
    /* Warm up: connection and metadata outside the measurement. */
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    rd_kafka_metadata(rk, 0, rkt, &md, 10000);
    rd_kafka_metadata_destroy(md);

    char payload[BENCH_RK_MSG_SIZE];
    memset(payload, 'p', sizeof payload);
    bench_rk_delivered = bench_rk_failed = 0;
    double cpu0 = broker > 0 ? bench_cpu_seconds(broker) : 0;
    double t0 = bench_now();
    for (long i = 0; i < n; i++)
        bench_rk_produce_one(rk, rkt, 0, payload, sizeof payload, i);
    rd_kafka_flush(rk, 120000);
    double t1 = bench_now();
    bench_rk_phase ph = { t1 - t0, broker > 0 ? bench_cpu_seconds(broker) - cpu0 : 0,
                          bench_rk_delivered };
    if (bench_rk_failed || bench_rk_delivered != n)
        fprintf(stderr, "produce to %s: %ld delivered, %ld failed of %ld\n",
                bootstrap, bench_rk_delivered, bench_rk_failed, n);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return ph;
}

static inline bench_rk_phase bench_rk_produce(const char *bootstrap, const char *topic, long n,
                                              pid_t broker)
{
    return bench_rk_produce_acks(bootstrap, topic, n, broker, "1");
}

/* Consumes everything the partition holds, from its first offset.  The
 * clock starts at the first message, so connection setup and the first
 * metadata round trip are not counted (they dominate small windows). */
static inline bench_rk_phase bench_rk_consume(const char *bootstrap, const char *topic, long *want,
                                  pid_t broker)
{
    rd_kafka_conf_t *c = bench_rk_conf_new(bootstrap);
    char err[512];
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "consumer: %s\n", err);
        exit(1);
    }
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic, 0, &lo, &hi, 10000);
    if (e) {
        fprintf(stderr, "watermarks from %s: %s\n", bootstrap, rd_kafka_err2str(e));
        exit(1);
    }
    long n = (long)(hi - lo);
    *want = n;
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
    double cpu0 = broker > 0 ? bench_cpu_seconds(broker) : 0;
    rd_kafka_consume_start(rkt, 0, RD_KAFKA_OFFSET_BEGINNING);
    long got = 0;
    rd_kafka_message_t *batch[4096];
    double t0 = 0, deadline = bench_now() + 100;
    while (got < n && bench_now() < deadline) {
        /* consume_batch waits until it has all it asked for (or the
         * timeout): never ask for more than is left. */
        size_t ask = n - got < 4096 ? (size_t)(n - got) : 4096;
        ssize_t k = rd_kafka_consume_batch(rkt, 0, 1000, batch, ask);
        if (k > 0 && t0 == 0)
            t0 = bench_now();
        for (ssize_t i = 0; i < k; i++) {
            if (!batch[i]->err && batch[i]->len == BENCH_RK_MSG_SIZE)
                got++;
            else if (getenv("BENCH_VERBOSE"))
                fprintf(stderr, "consume: %s (len %zu)\n",
                        rd_kafka_message_errstr(batch[i]), batch[i]->len);
            rd_kafka_message_destroy(batch[i]);
        }
    }
    double t1 = bench_now();
    bench_rk_phase ph = { t0 > 0 ? t1 - t0 : 0,
                          broker > 0 ? bench_cpu_seconds(broker) - cpu0 : 0, got };
    if (got != n)
        fprintf(stderr, "consume from %s: %ld of %ld\n", bootstrap, got, n);
    rd_kafka_consume_stop(rkt, 0);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return ph;
}

#endif
