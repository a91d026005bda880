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
 * BROKER_NOT_AVAILABLE (no such live broker), NETWORK_EXCEPTION (the
 * connection failed or closed), REQUEST_TIMED_OUT (timeout_ms passed),
 * or the broker is stopping. */
typedef void (*repl_peer_done)(void *arg, int16_t error, kp_rd *body);

/* Sends request body[0, len) (encoded for api/version, without its
 * header) to broker_id and calls done exactly once, later, on the loop
 * (never from inside this call). */
void repl_peer_call(struct bk_broker *b, int32_t broker_id, int16_t api, int16_t version,
                    const uint8_t *body, size_t len, int64_t timeout_ms,
                    repl_peer_done done, void *arg);

#endif
