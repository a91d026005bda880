/*
 * daemon/api/api_producer_id.c — InitProducerId (API key 22), v0–5.
 *
 * An idempotent producer (TransactionalId null) gets a new ProducerId with
 * epoch 0 each time it asks; the sequence checks that use it live in
 * daemon/replica/replica_producers.c; ids come from bk_producer_id_next
 * (daemon/producer_ids.c).
 *
 * A non-null TransactionalId is the transaction coordinator's
 * (daemon/txn/txn_coord.c txn_init_producer_id): WRITE on the id, its
 * epoch bumped, the previous producer fenced.
 *
 * v2+ is flexible; v3+ carries the producer's current ProducerId and
 * ProducerEpoch (KIP-360, an epoch bump).  Without a TransactionalId Kafka
 * ignores them and hands out a new id with epoch 0, and so does this
 * handler: an idempotent producer (librdkafka bumps after a sequence
 * error) simply starts again under the new id.
 */
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/txn/txn.h"
#include "kp_msgs.h"

int api_handle_init_producer_id(bk_req *r)
{
    if (bk_producer_id_wait(r, api_handle_init_producer_id))
        return BK_DEFER;                 /* a fresh floor first (producer_ids.c P1) */
    int16_t v = r->hdr.RequestApiVersion;
    kp_InitProducerIdRequest q;
    if (kp_dec_InitProducerIdRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    kp_InitProducerIdResponse m;
    kp_init_InitProducerIdResponse(&m);
    m.ProducerId = -1;
    m.ProducerEpoch = -1;
    if (q.TransactionalId.len >= 0)
        return txn_init_producer_id(r, &q);
    if (!BK_AUTHZ_CLUSTER(r, BK_OP_IDEMPOTENT_WRITE) &&
               !sec_authorized_any(r, BK_RES_TOPIC, BK_OP_WRITE)) {
        /* Kafka 3's rule (KIP-679): WRITE on any topic implies idempotence */
        m.ErrorCode = KP_CLUSTER_AUTHORIZATION_FAILED;
    } else {
        m.ErrorCode = bk_producer_id_next(r->b, &m.ProducerId);
        if (m.ErrorCode == KP_NONE)
            m.ProducerEpoch = 0;
    }
    return kp_enc_InitProducerIdResponse(r->out, v, &m) == 0 ? BK_RESPOND : BK_CLOSE;
}
