/*
 * daemon/txn/txn.h — the transaction coordinator (KIP-98, issue 30) as the
 * rest of the daemon sees it.  Its design note: daemon/txn/txn_log.c (where
 * the state lives) and daemon/txn/txn_coord.c (the state machine).
 */
#ifndef SLUICE_TXN_H
#define SLUICE_TXN_H

#include "daemon/request.h"
#include "kp_msgs.h"

/* Starts the coordinator: the leadership tick over __transaction_state,
 * the timeout and expiration timers.  After the view is loaded.  0 or -1. */
int txn_start(bk_broker *b);
/* Frees everything (shutdown, after the connections are gone). */
void txn_stop(void);

/* FindCoordinator KeyType 1: the broker coordinating transactional id
 * [id, id + len), or -1 while none does (the topic is being created, or
 * its partition has no leader).  Creates __transaction_state when first
 * asked.  Installed in bk_broker.txn_coordinator_of by main.c. */
int32_t txn_coordinator_of(bk_broker *b, const char *id, size_t len);

/* InitProducerId with a non-null TransactionalId (api_producer_id.c hands
 * it here, after decoding q): BK_RESPOND or BK_DEFER, as a handler. */
int txn_init_producer_id(bk_req *r, const kp_InitProducerIdRequest *q);

/* KIP-890, a partition leader's question (answered here when this broker
 * coordinates id): is topic-partition in the ongoing transaction of
 * producer pid at epoch?  KP_NONE yes; INVALID_TXN_STATE no (or none
 * ongoing); INVALID_PRODUCER_ID_MAPPING / INVALID_PRODUCER_EPOCH for
 * another producer or epoch; NOT_COORDINATOR (another broker coordinates
 * id), COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE. */
int16_t txn_verify_partition(bk_broker *b, kp_str id, int64_t pid, int16_t epoch,
                             const char *topic, int32_t partition);

/* The partition of __consumer_offsets AddOffsetsToTxn adds for group
 * (Kafka's partitionFor): what a TxnOffsetCommit is verified against. */
int32_t txn_offsets_partition(bk_broker *b, kp_str group);
#define TXN_OFFSETS_TOPIC "__consumer_offsets"

/* ---- the operator's view (txn_ops.c) ------------------------------------------ */
/* For /metrics: the coordinator's numbers (the ids this broker coordinates). */
typedef struct txn_stats {
    int64_t ongoing;                  /* transactions open now (Ongoing, Prepare*) */
    int64_t commits, aborts;          /* CompleteCommit / CompleteAbort written, since start */
    int64_t timeout_aborts;           /* of the aborts: started by the timeout */
    int64_t operator_aborts;          /* of the aborts: asked through SQL */
} txn_stats;
void txn_stats_get(txn_stats *s);

/* One transactional id this broker coordinates (written at least once), as
 * the SQL transactions view shows it.  Valid during the callback only. */
typedef struct txn_row {
    const char *id;                   /* NUL-terminated */
    const char *state;                /* Kafka's TransactionState name (static) */
    int64_t pid;
    int16_t epoch;
    int32_t timeout_ms;
    int64_t start_ms;                 /* its open transaction's start; -1: none open */
    int64_t update_ms;
    const void *m;                    /* txn_row_partitions' */
} txn_row;
void txn_rows_foreach(void (*fn)(const txn_row *row, void *arg), void *arg);
/* The row's partitions as "topic-0,topic-1" into buf (NUL-terminated when
 * cap > 0, cut at cap); returns the length of the whole text (snprintf's). */
size_t txn_row_partitions(const txn_row *row, char *buf, size_t cap);
/* An operator's abort of transactional id's open transaction (SQL), as the
 * timeout would abort it (epoch bumped, PrepareAbort, markers): KP_NONE when
 * started; pid/epoch are what the operator saw (the producer moved on
 * meanwhile: CONCURRENT_TRANSACTIONS).  err says why in words. */
int16_t txn_operator_abort(bk_broker *b, const char *id, int64_t pid, int16_t epoch,
                           char *err, size_t errlen);

#endif
