/*
 * daemon/replica/replica_txn.h — transactions on the partition side
 * (KIP-98, issue 30): the transaction markers (control records) a
 * coordinator writes into the partitions of a transaction.  The last
 * stable offset and the aborted-transaction index live with the
 * partition (replica.h); this header is what the transaction coordinator
 * (daemon/txn/) and WriteTxnMarkers call.
 */
#ifndef SLUICE_REPLICA_TXN_H
#define SLUICE_REPLICA_TXN_H

#include <stdbool.h>
#include <stdint.h>

struct bk_broker;

/* error: KP_NONE, or the partition's Kafka code (NOT_LEADER_OR_FOLLOWER,
 * UNKNOWN_TOPIC_OR_PARTITION, KAFKA_STORAGE_ERROR, REQUEST_TIMED_OUT,
 * INVALID_PRODUCER_EPOCH, ...). */
typedef void (*replica_marker_done)(void *arg, int16_t error);

/* Appends a COMMIT (commit) or ABORT marker of producer_id/producer_epoch,
 * with the coordinator's epoch, to topic-partition led by this broker,
 * and calls done once, later, on the loop (never from inside this call):
 * KP_NONE when the high watermark covers the marker (acks=all), else the
 * error.  The marker ends the producer's open transaction there (the
 * last stable offset moves; an abort enters the aborted-transaction
 * index). */
void replica_txn_write_marker(struct bk_broker *b, const char *topic, int32_t partition,
                              int64_t producer_id, int16_t producer_epoch, bool commit,
                              int32_t coordinator_epoch, int64_t timeout_ms,
                              replica_marker_done done, void *arg);

/* Shutdown, the loop stopped: every marker still waiting for its high
 * watermark is dropped without its done (replica_txn.c M4). */
void replica_txn_stop(void);

#endif
