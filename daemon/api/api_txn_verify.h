/*
 * daemon/api/api_txn_verify.h — what a request verified by another
 * broker's transaction coordinator (KIP-890: AddPartitionsToTxn v4
 * VerifyOnly through repl_peer_call) shares, whether a Produce
 * (api_produce.c) or a TxnOffsetCommit (api_txn_offset_commit.c): the
 * answer read, the request run again from its first byte.
 */
#ifndef SLUICE_API_TXN_VERIFY_H
#define SLUICE_API_TXN_VERIFY_H

#include "daemon/request.h"
#include "kp_msgs.h"

/* r->cancel of a request waiting for the answer: r->state is the wait,
 * whose first member is the bk_req * it sets to NULL (the answer then
 * frees the wait). */
void api_verify_cancel(bk_req *r);

/* The answer's body decoded into m (its arrays in a): KP_NONE, then each
 * partition's code from api_verify_part; else the whole request's code. */
int16_t api_verify_decode(kp_rd *body, kp_AddPartitionsToTxnResponse *m, kp_arena *a);
int16_t api_verify_part(const kp_AddPartitionsToTxnResponse *m, kp_str topic,
                        int32_t partition);   /* not named: INVALID_TXN_STATE */

/* Sends x (VerifyOnly set here) to broker coord as AddPartitionsToTxn v4
 * and makes r wait (r->state = wait, whose first member is r; r->cancel
 * api_verify_cancel): done(wait, ...) runs once, later, on the loop.  No
 * coordinator now (coord -1): the call fails on the next loop turn.
 * 0, or -1 when it could not be encoded (nothing sent, r untouched). */
int api_verify_send(bk_req *r, int32_t coord,
                    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction *x,
                    int64_t timeout_ms, void (*done)(void *wait, int16_t error, kp_rd *body),
                    void *wait);

/* Runs handler on r again from body (the request's start), as the net
 * code runs a handler: answered, deferred again, or closed. */
void api_verify_rerun(bk_req *r, kp_rd body, int (*handler)(bk_req *r));

#endif
