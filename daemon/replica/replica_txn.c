/*
 * daemon/replica/replica_txn.c — transaction markers on the partition side
 * (replica_txn.h).  PLACEHOLDER while issue 30 is built: answers every
 * marker NOT_LEADER_OR_FOLLOWER, later, on the loop.
 */
#include <event2/event.h>
#include <stdlib.h>

#include "daemon/broker.h"
#include "daemon/replica/replica_txn.h"

typedef struct mk_later {
    replica_marker_done done;
    void *arg;
} mk_later;

static void mk_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    mk_later *l = arg;
    l->done(l->arg, KP_NOT_LEADER_OR_FOLLOWER);
    free(l);
}

void replica_txn_write_marker(bk_broker *b, const char *topic, int32_t partition,
                              int64_t producer_id, int16_t producer_epoch, bool commit,
                              int32_t coordinator_epoch, int64_t timeout_ms,
                              replica_marker_done done, void *arg)
{
    (void)topic; (void)partition; (void)producer_id; (void)producer_epoch;
    (void)commit; (void)coordinator_epoch; (void)timeout_ms;
    mk_later *l = malloc(sizeof *l);
    if (!l)
        abort();
    l->done = done;
    l->arg = arg;
    if (event_base_once(b->base, -1, EV_TIMEOUT, mk_fire, l, NULL) != 0)
        abort();
}
