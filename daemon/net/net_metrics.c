/*
 * daemon/net/net_metrics.c — request counts and latency histograms per API,
 * fsync latency and format conversions: the counters every room bumps, and
 * their Prometheus text (net_metrics_render_counters).  The rest of GET
 * /metrics, which reads every room, is admin/admin_metrics.c's.
 *
 * Names follow Prometheus conventions with Kafka's vocabulary: bytes and
 * messages "in" (produced) and "out" (fetched), log start/end offsets,
 * high watermark.  Histograms use fixed buckets in seconds, so recording is
 * a bucket search over 14 bounds and three additions.
 */
#include "daemon/net/net_metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>


#define NBUCKETS 14
static const int64_t bucket_us[NBUCKETS] = {
    100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000,
    500000, 1000000, 2500000, 10000000
};

#define MAX_API 128

/* Loop thread only. */
static struct {
    uint64_t count;
    uint64_t sum_us;
    uint64_t buckets[NBUCKETS];
} req[MAX_API];

/* Loop thread only: [0] Produce up-conversions, [1] Fetch down-conversions. */
static uint64_t conv_count[2], conv_bytes[2];

void net_metrics_converted(int16_t api_key, uint64_t bytes)
{
    if (api_key != KP_API_PRODUCE && api_key != KP_API_FETCH)
        return;
    conv_count[api_key]++;
    conv_bytes[api_key] += bytes;
}

/* Written by the flush worker thread. */
static atomic_ullong fsync_count, fsync_sum_us, fsync_buckets[NBUCKETS];

static int bucket_of(int64_t us)
{
    for (int i = 0; i < NBUCKETS; i++)
        if (us <= bucket_us[i])
            return i;
    return NBUCKETS;
}

void net_metrics_request(int16_t api_key, int64_t elapsed_us)
{
    if (api_key < 0 || api_key >= MAX_API)
        return;
    if (elapsed_us < 0)
        elapsed_us = 0;
    req[api_key].count++;
    req[api_key].sum_us += (uint64_t)elapsed_us;
    int b = bucket_of(elapsed_us);
    if (b < NBUCKETS)
        req[api_key].buckets[b]++;
}

void net_metrics_fsync(int64_t elapsed_us)
{
    if (elapsed_us < 0)
        elapsed_us = 0;
    atomic_fetch_add(&fsync_count, 1);
    atomic_fetch_add(&fsync_sum_us, (unsigned long long)elapsed_us);
    int b = bucket_of(elapsed_us);
    if (b < NBUCKETS)
        atomic_fetch_add(&fsync_buckets[b], 1);
}

static void histogram(kp_buf *o, const char *name, const char *labels,
                      const uint64_t *buckets, uint64_t count, uint64_t sum_us)
{
    uint64_t cum = 0;
    for (int i = 0; i < NBUCKETS; i++) {
        cum += buckets[i];
        kp_buf_printf(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, labels[0] ? "," : "",
                      (double)bucket_us[i] / 1e6, (unsigned long long)cum);
    }
    kp_buf_printf(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, labels[0] ? "," : "",
                  (unsigned long long)count);
    kp_buf_printf(o, "%s_sum%s%s%s %.6f\n", name, labels[0] ? "{" : "", labels,
                  labels[0] ? "}" : "", (double)sum_us / 1e6);
    kp_buf_printf(o, "%s_count%s%s%s %llu\n", name, labels[0] ? "{" : "", labels,
                  labels[0] ? "}" : "", (unsigned long long)count);
}

void net_metrics_render_counters(kp_buf *o)
{
    kp_buf_printf(o, "# HELP sluice_requests_total Requests answered, per Kafka API.\n"
                  "# TYPE sluice_requests_total counter\n");
    for (int k = 0; k < MAX_API; k++)
        if (req[k].count)
            kp_buf_printf(o, "sluice_requests_total{api=\"%s\"} %llu\n", kp_api_name((int16_t)k),
                          (unsigned long long)req[k].count);
    kp_buf_printf(o, "# HELP sluice_request_duration_seconds Time from a request's arrival "
                  "to its response, per Kafka API.\n"
                  "# TYPE sluice_request_duration_seconds histogram\n");
    for (int k = 0; k < MAX_API; k++)
        if (req[k].count) {
            char labels[96];
            snprintf(labels, sizeof labels, "api=\"%s\"", kp_api_name((int16_t)k));
            histogram(o, "sluice_request_duration_seconds", labels, req[k].buckets,
                      req[k].count, req[k].sum_us);
        }

    kp_buf_printf(o, "# HELP sluice_produce_up_converted_total Produce v0-2 partitions whose "
                  "magic 0/1 message sets were converted to record batches v2.\n"
                  "# TYPE sluice_produce_up_converted_total counter\n"
                  "sluice_produce_up_converted_total %llu\n"
                  "# HELP sluice_produce_up_converted_bytes_total Bytes of batches v2 written "
                  "by those conversions.\n"
                  "# TYPE sluice_produce_up_converted_bytes_total counter\n"
                  "sluice_produce_up_converted_bytes_total %llu\n"
                  "# HELP sluice_fetch_down_converted_total Fetch v0-3 partitions answered "
                  "with records converted to magic 0/1 (off the zero-copy path).\n"
                  "# TYPE sluice_fetch_down_converted_total counter\n"
                  "sluice_fetch_down_converted_total %llu\n"
                  "# HELP sluice_fetch_down_converted_bytes_total Bytes of magic 0/1 message "
                  "sets those conversions sent.\n"
                  "# TYPE sluice_fetch_down_converted_bytes_total counter\n"
                  "sluice_fetch_down_converted_bytes_total %llu\n",
                  (unsigned long long)conv_count[0], (unsigned long long)conv_bytes[0],
                  (unsigned long long)conv_count[1], (unsigned long long)conv_bytes[1]);

    uint64_t fb[NBUCKETS];
    for (int i = 0; i < NBUCKETS; i++)
        fb[i] = atomic_load(&fsync_buckets[i]);
    kp_buf_printf(o, "# HELP sluice_fsync_duration_seconds Time of one partition fdatasync.\n"
                  "# TYPE sluice_fsync_duration_seconds histogram\n");
    histogram(o, "sluice_fsync_duration_seconds", "", fb, atomic_load(&fsync_count),
              atomic_load(&fsync_sum_us));
}
