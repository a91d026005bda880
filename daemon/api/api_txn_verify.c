/*
 * daemon/api/api_txn_verify.c — the shared half of a verification by
 * another broker's transaction coordinator (api_txn_verify.h).
 */
#include "daemon/api/api_txn_verify.h"
#include "daemon/replication/repl_peer.h"

#include <string.h>

void api_verify_cancel(bk_req *r)
{
    bk_req **owner = r->state;
    if (owner)
        *owner = NULL;
    r->state = NULL;
    r->cancel = NULL;
}

int16_t api_verify_decode(kp_rd *body, kp_AddPartitionsToTxnResponse *m, kp_arena *a)
{
    if (kp_dec_AddPartitionsToTxnResponse(body, 4, m, a) != 0)
        return KP_COORDINATOR_NOT_AVAILABLE;
    return m->ErrorCode;
}

int16_t api_verify_part(const kp_AddPartitionsToTxnResponse *m, kp_str topic,
                        int32_t partition)
{
    int16_t err = KP_INVALID_TXN_STATE;
    for (int32_t t = 0; t < m->ResultsByTransaction_count; t++)
        for (int32_t k = 0; k < m->ResultsByTransaction[t].TopicResults_count; k++) {
            const kp_AddPartitionsToTxnResponse_AddPartitionsToTxnTopicResult *tr =
                &m->ResultsByTransaction[t].TopicResults[k];
            if (tr->Name.len != topic.len || memcmp(tr->Name.p, topic.p, (size_t)tr->Name.len))
                continue;
            for (int32_t j = 0; j < tr->ResultsByPartition_count; j++)
                if (tr->ResultsByPartition[j].PartitionIndex == partition)
                    err = tr->ResultsByPartition[j].PartitionErrorCode;
        }
    return err;
}

void api_verify_rerun(bk_req *r, kp_rd body, int (*handler)(bk_req *r))
{
    r->state = NULL;
    r->cancel = NULL;
    r->body = body;
    int rc = handler(r);
    if (rc == BK_RESPOND)
        net_req_finish(r);
    else if (rc == BK_NO_RESPONSE)
        net_req_finish_silent(r);
    else if (rc != BK_DEFER)
        net_req_close(r, false);
}

int api_verify_send(bk_req *r, int32_t coord,
                    kp_AddPartitionsToTxnRequest_AddPartitionsToTxnTransaction *x,
                    int64_t timeout_ms, void (*done)(void *wait, int16_t error, kp_rd *body),
                    void *wait)
{
    x->VerifyOnly = true;
    kp_AddPartitionsToTxnRequest aq;
    kp_init_AddPartitionsToTxnRequest(&aq);
    aq.Transactions = x;
    aq.Transactions_count = 1;
    kp_buf out;
    kp_buf_init(&out);
    if (kp_enc_AddPartitionsToTxnRequest(&out, 4, &aq) != 0 || out.err) {
        kp_buf_free(&out);
        return -1;
    }
    r->state = wait;
    r->cancel = api_verify_cancel;
    repl_peer_call(r->b, coord, KP_API_ADD_PARTITIONS_TO_TXN, 4, out.data, out.len, timeout_ms,
                   done, wait);
    kp_buf_free(&out);
    return 0;
}
