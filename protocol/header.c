/*
 * header.c — request/response headers and the table of API names and first
 * flexible versions.
 *
 * The header version follows from the API's first flexible version
 * (protocol/README.md §2): v2 (v1 + TAGGED_FIELDS) from it on, else v1.  The table must
 * know every API Kafka has, not only those we serve, or a request for an
 * unserved flexible version would be misparsed before it can be refused.
 * Values are Kafka 3.x's (keys 0..67); "none" is INT16_MAX.
 *
 * ControlledShutdown (7) v0 is the one request with header v0 (no ClientId).
 * kp_req_hdr_read parses it as such (ClientId null, not flexible) rather
 * than misreading the body as a client id; the broker does not advertise
 * key 7, so the daemon refuses it like any unsupported API.
 *
 * ClientId stays a classic INT16 string even in header v2 (the schema marks
 * it "flexibleVersions": "none").
 *
 * The response header follows the request's (v1 for a v2 request, else
 * v0), except ApiVersions: its response header is always v0, so that a
 * client that sent a version we do not know can still read our answer
 * (KIP-511).  kp_resp_frame_head is the one place that writes it for the
 * broker; kp_resp_hdr_write the same bytes into a kp_buf.
 */
#include "protocol/kp.h"

#define NONE INT16_MAX
#define API_CONTROLLED_SHUTDOWN 7

static const struct {
    const char *name;
    int16_t first_flexible;
} apis[] = {
    [0] = { "Produce", 9 },
    [1] = { "Fetch", 12 },
    [2] = { "ListOffsets", 6 },
    [3] = { "Metadata", 9 },
    [4] = { "LeaderAndIsr", 4 },
    [5] = { "StopReplica", 2 },
    [6] = { "UpdateMetadata", 6 },
    [7] = { "ControlledShutdown", 3 },
    [8] = { "OffsetCommit", 8 },
    [9] = { "OffsetFetch", 6 },
    [10] = { "FindCoordinator", 3 },
    [11] = { "JoinGroup", 6 },
    [12] = { "Heartbeat", 4 },
    [13] = { "LeaveGroup", 4 },
    [14] = { "SyncGroup", 4 },
    [15] = { "DescribeGroups", 5 },
    [16] = { "ListGroups", 3 },
    [17] = { "SaslHandshake", NONE },
    [18] = { "ApiVersions", 3 },
    [19] = { "CreateTopics", 5 },
    [20] = { "DeleteTopics", 4 },
    [21] = { "DeleteRecords", 2 },
    [22] = { "InitProducerId", 2 },
    [23] = { "OffsetForLeaderEpoch", 4 },
    [24] = { "AddPartitionsToTxn", 3 },
    [25] = { "AddOffsetsToTxn", 3 },
    [26] = { "EndTxn", 3 },
    [27] = { "WriteTxnMarkers", 1 },
    [28] = { "TxnOffsetCommit", 3 },
    [29] = { "DescribeAcls", 2 },
    [30] = { "CreateAcls", 2 },
    [31] = { "DeleteAcls", 2 },
    [32] = { "DescribeConfigs", 4 },
    [33] = { "AlterConfigs", 2 },
    [34] = { "AlterReplicaLogDirs", 2 },
    [35] = { "DescribeLogDirs", 2 },
    [36] = { "SaslAuthenticate", 2 },
    [37] = { "CreatePartitions", 2 },
    [38] = { "CreateDelegationToken", 2 },
    [39] = { "RenewDelegationToken", 2 },
    [40] = { "ExpireDelegationToken", 2 },
    [41] = { "DescribeDelegationToken", 2 },
    [42] = { "DeleteGroups", 2 },
    [43] = { "ElectLeaders", 2 },
    [44] = { "IncrementalAlterConfigs", 1 },
    [45] = { "AlterPartitionReassignments", 0 },
    [46] = { "ListPartitionReassignments", 0 },
    [47] = { "OffsetDelete", NONE },
    [48] = { "DescribeClientQuotas", 1 },
    [49] = { "AlterClientQuotas", 1 },
    [50] = { "DescribeUserScramCredentials", 0 },
    [51] = { "AlterUserScramCredentials", 0 },
    [52] = { "Vote", 0 },
    [53] = { "BeginQuorumEpoch", 0 },
    [54] = { "EndQuorumEpoch", 0 },
    [55] = { "DescribeQuorum", 0 },
    [56] = { "AlterPartition", 0 },
    [57] = { "UpdateFeatures", 0 },
    [58] = { "Envelope", 0 },
    [59] = { "FetchSnapshot", 0 },
    [60] = { "DescribeCluster", 0 },
    [61] = { "DescribeProducers", 0 },
    [62] = { "BrokerRegistration", 0 },
    [63] = { "BrokerHeartbeat", 0 },
    [64] = { "UnregisterBroker", 0 },
    [65] = { "DescribeTransactions", 0 },
    [66] = { "ListTransactions", 0 },
    [67] = { "AllocateProducerIds", 0 },
};

#define N_APIS ((int)(sizeof apis / sizeof apis[0]))

int kp_api_first_flexible(int16_t api_key)
{
    if (api_key < 0 || api_key >= N_APIS || !apis[api_key].name)
        return INT16_MAX;
    return apis[api_key].first_flexible;
}

const char *kp_api_name(int16_t api_key)
{
    if (api_key < 0 || api_key >= N_APIS || !apis[api_key].name)
        return "Unknown";
    return apis[api_key].name;
}

int kp_req_hdr_read(kp_rd *r, kp_req_hdr *h)
{
    h->RequestApiKey = kp_rd_i16(r);
    h->RequestApiVersion = kp_rd_i16(r);
    h->CorrelationId = kp_rd_i32(r);
    h->ClientId = KP_STR_NULL;
    h->flexible = false;
    if (!kp_rd_ok(r))
        return r->err;
    if (h->RequestApiVersion < 0) {
        r->err = KP_E_MALFORMED;
        return r->err;
    }
    if (h->RequestApiKey == API_CONTROLLED_SHUTDOWN && h->RequestApiVersion == 0)
        return 0;                                   /* header v0 */
    h->ClientId = kp_rd_string(r);
    h->flexible = h->RequestApiVersion >= kp_api_first_flexible(h->RequestApiKey);
    if (h->flexible)
        kp_rd_tags(r);
    if (!kp_rd_ok(r)) {
        h->ClientId = KP_STR_NULL;
        return r->err;
    }
    return 0;
}

void kp_req_hdr_write(kp_buf *b, int16_t api_key, int16_t api_version,
                      int32_t correlation_id, const char *client_id)
{
    kp_wr_i16(b, api_key);
    kp_wr_i16(b, api_version);
    kp_wr_i32(b, correlation_id);
    if (api_key == API_CONTROLLED_SHUTDOWN && api_version == 0)
        return;
    kp_wr_string(b, client_id, -1);
    if (api_version >= kp_api_first_flexible(api_key))
        kp_wr_tags_empty(b);
}

bool kp_resp_hdr_flexible(const kp_req_hdr *h)
{
    return h->flexible && h->RequestApiKey != KP_API_API_VERSIONS;
}

/* Response header v0 is CorrelationId (INT32); v1 adds TAGGED_FIELDS,
 * always empty here (one 0x00). */
static size_t resp_hdr_put(uint8_t *p, int32_t correlation_id, bool flexible)
{
    uint32_t cid = (uint32_t)correlation_id;
    p[0] = (uint8_t)(cid >> 24); p[1] = (uint8_t)(cid >> 16);
    p[2] = (uint8_t)(cid >> 8);  p[3] = (uint8_t)cid;
    if (!flexible)
        return 4;
    p[4] = 0;
    return 5;
}

void kp_resp_hdr_write(kp_buf *b, int32_t correlation_id, bool flexible)
{
    uint8_t hdr[KP_RESP_HDR_MAX];
    kp_wr_raw(b, hdr, resp_hdr_put(hdr, correlation_id, flexible));
}

size_t kp_resp_frame_head(uint8_t out[KP_RESP_FRAME_HEAD_MAX], const kp_req_hdr *req,
                          size_t body_len)
{
    size_t n = resp_hdr_put(out + 4, req->CorrelationId, kp_resp_hdr_flexible(req));
    uint32_t size = (uint32_t)(n + body_len);
    out[0] = (uint8_t)(size >> 24); out[1] = (uint8_t)(size >> 16);
    out[2] = (uint8_t)(size >> 8);  out[3] = (uint8_t)size;
    return 4 + n;
}
