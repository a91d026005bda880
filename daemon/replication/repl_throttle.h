/*
 * daemon/replication/repl_throttle.h — the reassignment throttles' token bucket
 * (daemon/replication/repl_throttle.c), shared by both ends of a throttled copy:
 * follower.replication.throttled.rate in the replica fetchers
 * (daemon/replication/repl_fetcher.c F7) and leader.replication.throttled.rate in the
 * leader's answers to replica fetches (daemon/api/api_fetch.c).
 */
#ifndef SLUICE_THROTTLE_H
#define SLUICE_THROTTLE_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon/view/view.h"

/* Bytes a throttle may still move; below 0 after one whole batch bigger
 * than what was left (a batch is never split).  Zeroed: full at the first
 * refill. */
typedef struct bk_tbucket {
    int64_t tokens, at_us;
} bk_tbucket;

/* The tokens left after refilling at rate (bytes/s, > 0) up to one
 * second's worth, now_us on the monotonic clock. */
int64_t repl_tbucket_refill(bk_tbucket *t, int64_t rate, int64_t now_us);  /* rate < 1e12 */

/* Whether broker is a replica the reassignment of v is adding (Kafka's
 * throttled replicas): only those copies are throttled, never the
 * replicas already in sync. */
bool repl_throttled_replica(const bk_pview *v, int32_t broker);

#endif
