/*
 * daemon/replication/repl_peer.h — requests from this broker to another
 * (issue 30: WriteTxnMarkers from a transaction coordinator to partition
 * leaders, AddPartitionsToTxn verification from a leader to a
 * coordinator): one connection per peer broker on the inter-broker
 * listener, with its TLS and SASL as the replica fetchers have them.
 */
#ifndef SLUICE_REPL_PEER_H
#define SLUICE_REPL_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "protocol/kp.h"

struct bk_broker;

/* error KP_NONE: body is the response after its header (valid during the
 * call only).  Else body is NULL and error says why no answer came:
 * BROKER_NOT_AVAILABLE (no such live broker, or the broker is stopping:
 * repl_peers_stop), NETWORK_EXCEPTION (the connection failed or closed),
 * REQUEST_TIMED_OUT (timeout_ms passed). */
typedef void (*repl_peer_done)(void *arg, int16_t error, kp_rd *body);

/* Sends request body[0, len) (encoded for api/version, without its
 * header) to broker_id and calls done exactly once, later, on the loop
 * (never from inside this call). */
void repl_peer_call(struct bk_broker *b, int32_t broker_id, int16_t api, int16_t version,
                    const uint8_t *body, size_t len, int64_t timeout_ms,
                    repl_peer_done done, void *arg);

/* cl_stop: every call waiting is answered BROKER_NOT_AVAILABLE (the
 * broker is stopping), every connection closed, everything freed.  A
 * call made after it (from a done callback too) is answered
 * BROKER_NOT_AVAILABLE on the next loop turn. */
void repl_peers_stop(struct bk_broker *b);

/* /metrics: requests sent to peers, and calls answered with an error
 * (no answer came); the loop thread's only. */
void repl_peer_counters(uint64_t *sent, uint64_t *failed);

/* Pure: the backoff before the next connection after `failures`
 * consecutive failed ones (0: none), doubling from min_ms to max_ms. */
int64_t repl_peer_backoff_ms(int failures, int64_t min_ms, int64_t max_ms);

#endif
