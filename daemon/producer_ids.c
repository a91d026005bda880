/*
 * daemon/producer_ids.c — producer ids (bk_producer_id_next, broker.h).
 *
 * Ids come from SQLite (producer_ids) in blocks of PID_BLOCK, like Kafka's
 * ProducerIdManager: one durable write per block, and an id is never
 * handed out twice, even across a crash (the unused rest of a block is
 * skipped).  Idempotent producers (api_producer_id.c) and the transaction
 * coordinator (daemon/txn/) both draw from here.  Cluster mode draws
 * from ZooKeeper instead, so ids are unique across the brokers
 * (b->on_producer_id_next, daemon/cluster/cluster_producer_ids.c).
 */
#include "daemon/broker.h"
#include "metadata/md.h"

#define PID_BLOCK 1000

int16_t bk_producer_id_next(bk_broker *b, int64_t *pid)
{
    if (b->on_producer_id_next)
        return b->on_producer_id_next(b, pid);    /* cluster mode */
    if (b->pid_next >= b->pid_end) {
        char err[MD_ERRLEN];
        int64_t first;
        if (md_producer_id_allocate(b->db, PID_BLOCK, &first, err, sizeof err) != 0) {
            BK_ERROR("InitProducerId: cannot reserve producer ids: %s", err);
            return KP_COORDINATOR_NOT_AVAILABLE;      /* retriable */
        }
        b->pid_next = first;
        b->pid_end = first + PID_BLOCK;
    }
    *pid = b->pid_next++;
    return KP_NONE;
}

int16_t bk_producer_id_floor(bk_broker *b, int64_t above)
{
    if (b->on_producer_id_floor)
        return b->on_producer_id_floor(b, above);  /* cluster mode */
    if (above < b->pid_floor)
        return KP_NONE;                  /* the common case: nothing to do */
    int64_t floor = (above / PID_BLOCK + 1) * PID_BLOCK;
    char err[MD_ERRLEN];
    if (md_producer_id_floor(b->db, floor, err, sizeof err) != 0) {
        BK_ERROR("cannot raise the producer id floor to %lld: %s", (long long)floor, err);
        return KP_COORDINATOR_NOT_AVAILABLE;
    }
    b->pid_floor = floor;
    if (b->pid_next <= above)
        b->pid_next = b->pid_end;        /* the block in hand may hold those ids: dropped */
    return KP_NONE;
}
