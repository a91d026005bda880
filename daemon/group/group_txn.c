/*
 * daemon/group/group_txn.c — offsets committed inside a transaction
 * (TxnOffsetCommit, KIP-98/KIP-447).  PLACEHOLDER while issue 30 is built:
 * no offset is pending, so a completion has nothing to apply; done fires
 * on the next loop turn.
 */
#include <event2/event.h>
#include <stdlib.h>

#include "daemon/group/group.h"

typedef struct gt_later {
    gc_txn_done_fn done;
    void *arg;
} gt_later;

static void gt_fire(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    gt_later *l = arg;
    gc_txn_done_fn done = l->done;
    void *done_arg = l->arg;
    free(l);
    done(done_arg, KP_NONE);
}

void gc_txn_complete(bk_broker *b, int32_t offsets_partition, int64_t producer_id,
                     int16_t producer_epoch, bool commit, gc_txn_done_fn done, void *arg)
{
    (void)offsets_partition; (void)producer_id; (void)producer_epoch; (void)commit;
    gt_later *l = malloc(sizeof *l);
    if (!l || event_base_once(b->base, -1, EV_TIMEOUT, gt_fire, l, NULL) != 0)
        abort();
    l->done = done;
    l->arg = arg;
}
