/*
 * Counters for GET /metrics (daemon/net/net_metrics.c), rendered in the
 * Prometheus text format with the rest of the page by admin/admin_metrics.c.  Recording is a few
 * additions: cheap enough for every request.
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdint.h>

#include "protocol/kp.h"

/* A response went out (or, for acks=0, the request was handled): the
 * request's API key and its time in the broker.  Loop thread. */
void net_metrics_request(int16_t api_key, int64_t elapsed_us);
/* One request's records were converted between the old message formats
 * (magic 0/1) and batches v2: a Produce v0-2 up-converted (api_key 0) or
 * a Fetch v0-3 partition down-converted (api_key 1), bytes its output.
 * Loop thread. */
void net_metrics_converted(int16_t api_key, uint64_t bytes);
/* One fdatasync of a partition took elapsed_us.  Any thread. */
void net_metrics_fsync(int64_t elapsed_us);
/* Appends these counters (requests per API and their latency, format
 * conversions, fsync latency) to out, in Prometheus text; the rest of GET
 * /metrics is admin/admin_metrics.c's.  Loop thread. */
void net_metrics_render_counters(kp_buf *out);

#endif
