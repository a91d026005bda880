/*
 * daemon/replication/repl_throttle.c — the reassignment throttles' token bucket.
 *
 * Invariants:
 *   T1. At most one second's worth (rate bytes) is ever saved up, so a
 *       throttle idle for a while allows one burst of rate bytes, not more.
 *   T2. rate < 1e12 (view_broker_config_rate), so idle (at most 1 s) times
 *       rate stays within int64.
 *   T3. Refilling is by elapsed time only, computed when asked: no timer,
 *       nothing runs while nobody is throttled.
 */
#include "daemon/replication/repl_throttle.h"

int64_t repl_tbucket_refill(bk_tbucket *t, int64_t rate, int64_t now_us)
{
    int64_t idle = now_us - t->at_us;
    if (idle > 1000000)
        idle = 1000000;                   /* T1 fills it anyway; no overflow */
    if (t->at_us == 0)
        t->tokens = rate;
    else
        t->tokens += idle * rate / 1000000;
    if (t->tokens > rate)
        t->tokens = rate;                 /* T1 */
    t->at_us = now_us;
    return t->tokens;
}

bool repl_throttled_replica(const bk_pview *v, int32_t broker)
{
    for (int32_t i = 0; i < v->nreplicas; i++)
        if (v->replicas[i] == broker)
            return v->adding >> i & 1;
    return false;
}
