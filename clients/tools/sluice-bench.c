/*
 * sluice-bench — producer/consumer performance tool on libsluice, in the
 * spirit of kafka-producer-perf-test.  Built only on sluice.h.
 *
 * Produce: fixed-size records (content random once), at a target rate or
 * flat out, for a count or a duration; latency of each record is delivery
 * report time minus send time (the send time rides in msg_opaque, so the
 * measurement costs no allocation).  Consume: assign every partition from
 * the beginning and read COUNT records (or until idle).  A progress line
 * each second on stderr; a summary at the end, and one "RESULT k=v …"
 * line on stdout for scripts.
 */
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clients/sluice.h"
#define TOOL_NAME "sluice-bench"
#include "clients/tools/tool.h"

static const char usage[] =
"NAME\n"
"    sluice-bench - measure produce or consume throughput and latency\n"
"\n"
"SYNOPSIS\n"
"    sluice-bench -b BROKERS -t TOPIC [--produce | --consume] [options]\n"
"\n"
"OPTIONS\n"
"    -b, --brokers HOST:PORT[,..]  bootstrap.servers (required)\n"
"    -t, --topic TOPIC             topic (required)\n"
"    -P, --produce                 produce (default)\n"
"    -C, --consume                 consume every partition from the beginning\n"
"    -s, --record-size BYTES       value size (default 100)\n"
"    -n, --count N                 records to produce/consume (default 1000000)\n"
"    -d, --duration SECONDS        produce for this long instead of a count\n"
"    -r, --rate MSGS_PER_S         target produce rate (default 0: as fast as possible)\n"
"    -a, --acks ACKS               all, 1 or 0 (default 1; 1/0 turn idempotence off)\n"
"    -z, --compression CODEC       none, gzip, snappy, lz4, zstd (default none)\n"
"    -X, --property KEY=VALUE      any configuration property (repeatable)\n"
"    -q, --quiet                   no progress lines\n"
"    -h, --help                    this text\n"
"\n"
"OUTPUT\n"
"    each second: records, msgs/s and MB/s in that second, average latency;\n"
"    at the end: totals, msgs/s, MB/s, latency p50/p95/p99/p99.9/max (ms), and\n"
"    RESULT mode=… msgs=… secs=… msgs_per_s=… mb_per_s=… p50_ms=… p95_ms=…\n"
"    p99_ms=… p999_ms=… max_ms=…\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* Latencies (µs) of delivered records, sorted at the end. */
static uint32_t *lat;
static size_t n_lat, cap_lat;
static long delivered, failed;
static double lat_sum_window;
static long lat_n_window;
static int first_err;

static void dr(const sl_delivery *d, void *opaque)
{
    (void)opaque;
    if (d->err) {
        if (!failed++)
            first_err = d->err;
        return;
    }
    delivered++;
    uint64_t us = now_us() - (uint64_t)(uintptr_t)d->msg_opaque;
    if (n_lat == cap_lat) {
        size_t cap = cap_lat ? cap_lat * 2 : 1 << 20;
        uint32_t *n = realloc(lat, cap * sizeof *n);
        if (!n)
            return;
        lat = n;
        cap_lat = cap;
    }
    lat[n_lat++] = us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
    lat_sum_window += (double)us;
    lat_n_window++;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static double pct(double p)
{
    if (!n_lat)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)(n_lat - 1) + 0.5);
    return lat[i] / 1000.0;
}

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

static int run_produce(sl_conf *conf, const char *topic, size_t size, long count,
                       double duration, double rate, int quiet)
{
    sl_conf_set_delivery_cb(conf, dr);
    char err[512];
    sl_producer *p = sl_producer_new(conf, err, sizeof err);
    if (!p) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        return 2;
    }
    char *payload = malloc(size ? size : 1);
    srand(42);
    for (size_t i = 0; i < size; i++)
        payload[i] = (char)(rand() & 0xff);
    /* Warm up: connection, metadata, producer id — outside the clock. */
    if (sl_producer_partition_count(p, topic, 10000) <= 0) {
        fprintf(stderr, "sluice-bench: no metadata for %s\n", topic);
        return 1;
    }
    double t0 = now_s(), next_report = t0 + 1, last_t = t0;
    long sent = 0, last_sent = 0;
    while (!stop) {
        double t = now_s();
        if (duration > 0 ? t - t0 >= duration : sent >= count)
            break;
        if (rate > 0) {
            double due = t0 + (double)sent / rate;
            if (due > t) {
                sl_poll(p, 0);
                double wait = due - now_s();
                if (wait > 0.0002)
                    usleep((useconds_t)(wait * 1e6 > 1000 ? 1000 : wait * 1e6));
                continue;
            }
        }
        int rc = sl_produce(p, topic, SL_PARTITION_ANY, NULL, 0, payload, size, NULL, 0, 0,
                            (void *)(uintptr_t)now_us());
        if (rc == SL_E_QUEUE_FULL) {
            sl_poll(p, 1);
            continue;
        }
        if (rc) {
            fprintf(stderr, "sluice-bench: produce: %s\n", sl_err_name(rc));
            break;
        }
        sent++;
        if ((sent & 1023) == 0 || rate > 0)
            sl_poll(p, 0);
        if (t >= next_report) {
            if (!quiet)
                fprintf(stderr, "%8ld sent  %10.0f msgs/s  %8.2f MB/s  avg latency %7.2f ms\n",
                        sent, (sent - last_sent) / (t - last_t),
                        (double)(sent - last_sent) * (double)size / (t - last_t) / 1e6,
                        lat_n_window ? lat_sum_window / lat_n_window / 1000.0 : 0.0);
            last_sent = sent;
            last_t = t;
            lat_sum_window = 0;
            lat_n_window = 0;
            next_report = t + 1;
        }
    }
    sl_flush(p, 120000);
    double secs = now_s() - t0;
    sl_producer_destroy(p);
    free(payload);
    qsort(lat, n_lat, sizeof *lat, cmp_u32);
    double mps = delivered / secs, mbps = (double)delivered * (double)size / secs / 1e6;
    fprintf(stderr, "%ld records sent, %ld delivered, %ld failed%s%s in %.2f s: %.0f msgs/s, "
            "%.2f MB/s\nlatency ms: p50 %.2f  p95 %.2f  p99 %.2f  p99.9 %.2f  max %.2f\n",
            sent, delivered, failed, failed ? " first error " : "",
            failed ? sl_err_name(first_err) : "", secs, mps, mbps, pct(50), pct(95), pct(99),
            pct(99.9), n_lat ? lat[n_lat - 1] / 1000.0 : 0.0);
    printf("RESULT mode=produce msgs=%ld secs=%.3f msgs_per_s=%.0f mb_per_s=%.2f p50_ms=%.3f "
           "p95_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f failed=%ld\n",
           delivered, secs, mps, mbps, pct(50), pct(95), pct(99), pct(99.9),
           n_lat ? lat[n_lat - 1] / 1000.0 : 0.0, failed);
    free(lat);
    return failed || sent == 0 || delivered < sent ? 1 : 0;
}

static int run_consume(sl_conf *conf, const char *topic, long count, int quiet)
{
    char err[512];
    sl_consumer *c = sl_consumer_new(conf, err, sizeof err);
    if (!c) {
        fprintf(stderr, "sluice-bench: %s\n", err);
        return 2;
    }
    int n = sl_consumer_partition_count(c, topic, 10000);
    if (n <= 0) {
        fprintf(stderr, "sluice-bench: %s: %s\n", topic, sl_err_name(n));
        return 1;
    }
    sl_topic_partition *tp = calloc((size_t)n, sizeof *tp);
    for (int i = 0; i < n; i++)
        tp[i] = (sl_topic_partition){ topic, i, SL_OFFSET_BEGINNING, 0 };
    sl_consumer_assign(c, tp, n);
    free(tp);
    long got = 0, last_got = 0;
    double bytes = 0, t0 = 0, last_t = 0, next_report = 0, idle_since = now_s();
    while (!stop && got < count) {
        sl_message m;
        int rc = sl_consumer_poll(c, 100, &m);
        double t = now_s();
        if (rc != 1 || m.err) {
            if (t0 > 0 && t - idle_since > 5)
                break;                                    /* nothing more is coming */
            continue;
        }
        idle_since = t;
        if (t0 == 0) {
            t0 = last_t = t;
            next_report = t + 1;
        }
        got++;
        bytes += m.value_len + (m.key ? m.key_len : 0);
        if (t >= next_report && !quiet) {
            fprintf(stderr, "%8ld read  %10.0f msgs/s  %8.2f MB/s\n", got,
                    (got - last_got) / (t - last_t),
                    (double)(got - last_got) * (bytes / got) / (t - last_t) / 1e6);
            last_got = got;
            last_t = t;
            next_report = t + 1;
        }
    }
    double secs = t0 > 0 ? now_s() - t0 : 0;
    sl_consumer_destroy(c);
    double mps = secs > 0 ? got / secs : 0, mbps = secs > 0 ? bytes / secs / 1e6 : 0;
    fprintf(stderr, "%ld records read in %.2f s (from the first): %.0f msgs/s, %.2f MB/s\n",
            got, secs, mps, mbps);
    printf("RESULT mode=consume msgs=%ld secs=%.3f msgs_per_s=%.0f mb_per_s=%.2f\n", got, secs,
           mps, mbps);
    return got >= count ? 0 : 1;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "brokers", 1, 0, 'b' }, { "topic", 1, 0, 't' }, { "produce", 0, 0, 'P' },
        { "consume", 0, 0, 'C' }, { "record-size", 1, 0, 's' }, { "count", 1, 0, 'n' },
        { "duration", 1, 0, 'd' }, { "rate", 1, 0, 'r' }, { "acks", 1, 0, 'a' },
        { "compression", 1, 0, 'z' }, { "property", 1, 0, 'X' }, { "quiet", 0, 0, 'q' },
        { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
    };
    sl_conf *conf = sl_conf_new();
    const char *topic = NULL, *acks = "1";
    int consume = 0, quiet = 0, c;
    size_t size = 100;
    long count = 1000000;
    double duration = 0, rate = 0;
    tool_set(conf, "log_level", "4");
    while ((c = getopt_long(argc, argv, "b:t:PCs:n:d:r:a:z:X:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'b': tool_set(conf, "bootstrap.servers", optarg); break;
        case 't': topic = optarg; break;
        case 'P': consume = 0; break;
        case 'C': consume = 1; break;
        case 's': size = (size_t)atol(optarg); break;
        case 'n': count = atol(optarg); break;
        case 'd': duration = atof(optarg); break;
        case 'r': rate = atof(optarg); break;
        case 'a': acks = optarg; break;
        case 'z': tool_set(conf, "compression.type", optarg); break;
        case 'X':
            if (tool_set_property(conf, optarg))
                return 2;
            break;
        case 'q': quiet = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (!topic) {
        fputs("sluice-bench: -t TOPIC is required\n", stderr);
        return 2;
    }
    tool_set_acks(conf, acks);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    int rc = consume ? run_consume(conf, topic, count, quiet)
                     : run_produce(conf, topic, size, count, duration, rate, quiet);
    sl_conf_destroy(conf);
    return rc;
}
