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

#endif
