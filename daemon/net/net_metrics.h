/*
 * Counters for GET /metrics (daemon/net/net_metrics.c), rendered in the
 * Prometheus text format by admin/admin_http.c.  Recording is a few
 * additions: cheap enough for every request.
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdint.h>

#include "protocol/kp.h"

struct bk_broker;

/* A response went out (or, for acks=0, the request was handled): the
 * request's API key and its time in the broker.  Loop thread. */
void bk_metrics_request(int16_t api_key, int64_t elapsed_us);
/* One request's records were converted between the old message formats
 * (magic 0/1) and batches v2: a Produce v0-2 up-converted (api_key 0) or
 * a Fetch v0-3 partition down-converted (api_key 1), bytes its output.
 * Loop thread. */
void bk_metrics_converted(int16_t api_key, uint64_t bytes);
/* One fdatasync of a partition took elapsed_us.  Any thread. */
void bk_metrics_fsync(int64_t elapsed_us);
/* Appends every metric the loop thread owns (requests, connections,
 * per-partition counters and log sizes, fsync) to out.  Loop thread. */
void bk_metrics_render(struct bk_broker *b, kp_buf *out);

#endif
