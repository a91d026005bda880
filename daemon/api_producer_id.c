/*
 * daemon/api_producer_id.c — InitProducerId (API key 22), v0–1.
 *
 * An idempotent producer (TransactionalId null) gets a new ProducerId with
 * epoch 0 each time it asks; the sequence checks that use it live in
 * daemon/producer_state.c.  Ids come from SQLite (producer_ids) in blocks
 * of PID_BLOCK, like Kafka's ProducerIdManager: one durable write per
 * block, and an id is never handed out twice, even across a crash
 * (the unused rest of a block is skipped).
 *
 * Transactions are out of scope.  A non-null TransactionalId is answered
 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED: clients treat it as fatal and say
 * so at once ("Transactional Id authorization failed"), where a retriable
 * code such as COORDINATOR_NOT_AVAILABLE would make init_transactions()
 * retry until its timeout.  The broker logs why.
 *
 * v2+ is flexible, v3+ carries an epoch bump for transactional producers:
 * neither is advertised (protocol/README.md §8: 0–1).
 */
#include "daemon/request.h"

#define PID_BLOCK 1000

static int16_t next_producer_id(bk_broker *b, int64_t *pid)
{
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

int bk_handle_init_producer_id(bk_req *r)
{
    kp_rd *in = &r->body;
    kp_str txn = kp_rd_string(in);                    /* TransactionalId */
    (void)kp_rd_i32(in);                              /* TransactionTimeoutMs */
    if (!kp_rd_ok(in))
        return BK_CLOSE;
    int16_t err = KP_NONE;
    int64_t pid = -1;
    int16_t epoch = -1;
    if (txn.len >= 0) {
        char cid[128] = "(null)";
        if (r->hdr.ClientId.len >= 0)
            kp_str_copy(r->hdr.ClientId, cid, sizeof cid);
        BK_INFO("InitProducerId from client %s with transactional.id \"%.*s\" refused: "
                "this broker does not support transactions (idempotence without "
                "transactional.id works)", cid, txn.len > 200 ? 200 : (int)txn.len, txn.p);
        err = KP_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    } else {
        err = next_producer_id(r->b, &pid);
        if (err == KP_NONE)
            epoch = 0;
    }
    kp_buf *o = r->out;
    kp_wr_i32(o, 0);                                  /* ThrottleTimeMs */
    kp_wr_i16(o, err);
    kp_wr_i64(o, pid);
    kp_wr_i16(o, epoch);
    return BK_RESPOND;
}
