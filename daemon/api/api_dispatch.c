/*
 * The API table: what the broker advertises in ApiVersions and which
 * handler serves each key.  Ranges follow protocol/README.md §8.  The
 * group and admin APIs (OffsetCommit .. OffsetDelete, CreateTopics ..
 * InitProducerId) and OffsetForLeaderEpoch are served over every version
 * Kafka defines for them, flexible ones included; so are the data-path
 * APIs (Produce, Fetch, ListOffsets, Metadata, ApiVersions), over the
 * whole range of their JSON definitions in protocol/messages/: Produce
 * v0-2 and Fetch v0-3 carry the old message formats (magic 0 and 1),
 * converted by protocol/legacy.c.  ElectLeaders (cluster_leaders.c) v0-2.
 * Alter/ListPartitionReassignments (api_reassign.c) v0, the only version.
 * DescribeAcls, CreateAcls and DeleteAcls (api_acls.c) v0-3, all Kafka's.
 */
#include "daemon/request.h"
#include "kp_msgs.h"

static const bk_api apis[] = {
    { KP_API_PRODUCE,                  0, 11, api_handle_produce },
    { KP_API_FETCH,                    0, 17, api_handle_fetch },
    { KP_API_LIST_OFFSETS,             0, 10, api_handle_list_offsets },
    { KP_API_METADATA,                 0, 12, api_handle_metadata },
    { KP_API_API_VERSIONS,             0, 4,  api_handle_api_versions },
    { KP_API_CREATE_TOPICS,            0, 7,  api_handle_create_topics },
    { KP_API_DELETE_TOPICS,            0, 6,  api_handle_delete_topics },
    { KP_API_DESCRIBE_CONFIGS,         0, 4,  api_handle_describe_configs },
    { KP_API_ALTER_CONFIGS,            0, 2,  api_handle_alter_configs },
    { KP_API_CREATE_PARTITIONS,        0, 3,  api_handle_create_partitions },
    { KP_API_INCREMENTAL_ALTER_CONFIGS,0, 1,  api_handle_incremental_alter_configs },
    { KP_API_DELETE_RECORDS,           0, 2,  api_handle_delete_records },
    { KP_API_INIT_PRODUCER_ID,         0, 5,  api_handle_init_producer_id },
    /* the transaction coordinator (daemon/txn/txn_api.c) */
    { KP_API_ADD_PARTITIONS_TO_TXN,    0, 5,  txn_handle_add_partitions_to_txn },
    { KP_API_ADD_OFFSETS_TO_TXN,       0, 4,  txn_handle_add_offsets_to_txn },
    /* v5 is transaction version 2 (KIP-890 part 2): not served */
    { KP_API_END_TXN,                  0, 4,  txn_handle_end_txn },
    { KP_API_DESCRIBE_TRANSACTIONS,    0, 0,  txn_handle_describe_transactions },
    { KP_API_LIST_TRANSACTIONS,        0, 1,  txn_handle_list_transactions },
    { KP_API_WRITE_TXN_MARKERS,        0, 1,  api_handle_write_txn_markers },
    { KP_API_DESCRIBE_PRODUCERS,       0, 0,  api_handle_describe_producers },
    /* v4 is flexible: the generated codec and the server's header v2 */
    { KP_API_OFFSET_FOR_LEADER_EPOCH,  0, 4,  api_handle_offset_for_leader_epoch },
    /* group coordinator (daemon/group*.c) */
    { KP_API_OFFSET_COMMIT,            0, 9,  gc_handle_offset_commit },
    { KP_API_OFFSET_FETCH,             0, 9,  gc_handle_offset_fetch },
    { KP_API_TXN_OFFSET_COMMIT,        0, 4,  api_handle_txn_offset_commit },
    { KP_API_FIND_COORDINATOR,         0, 6,  gc_handle_find_coordinator },
    { KP_API_JOIN_GROUP,               0, 9,  gc_handle_join_group },
    { KP_API_HEARTBEAT,                0, 4,  gc_handle_heartbeat },
    { KP_API_LEAVE_GROUP,              0, 5,  gc_handle_leave_group },
    { KP_API_SYNC_GROUP,               0, 5,  gc_handle_sync_group },
    { KP_API_DESCRIBE_GROUPS,          0, 5,  gc_handle_describe_groups },
    { KP_API_LIST_GROUPS,              0, 5,  gc_handle_list_groups },
    { KP_API_DELETE_GROUPS,            0, 2,  gc_handle_delete_groups },
    { KP_API_OFFSET_DELETE,            0, 0,  gc_handle_offset_delete },
    { KP_API_ELECT_LEADERS,            0, 2,  api_handle_elect_leaders },
    /* partition reassignments (api_reassign.c, cluster_reassign.c) */
    { KP_API_ALTER_PARTITION_REASSIGNMENTS, 0, 0, api_handle_alter_partition_reassignments },
    { KP_API_LIST_PARTITION_REASSIGNMENTS,  0, 0, api_handle_list_partition_reassignments },
    /* the authorizer's ACLs (daemon/api/api_acls.c) */
    { KP_API_DESCRIBE_ACLS,            0, 3,  api_handle_describe_acls },
    { KP_API_CREATE_ACLS,              0, 3,  api_handle_create_acls },
    { KP_API_DELETE_ACLS,              0, 3,  api_handle_delete_acls },
    /* SASL (daemon/security/sec_sasl.c): v0 handshake = raw tokens follow; v2 is flexible */
    { KP_API_SASL_HANDSHAKE,           0, 1,  sec_handle_sasl_handshake },
    { KP_API_SASL_AUTHENTICATE,        0, 2,  sec_handle_sasl_authenticate },
    { KP_API_DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, api_handle_describe_user_scram_credentials },
    { KP_API_ALTER_USER_SCRAM_CREDENTIALS,    0, 0, api_handle_alter_user_scram_credentials },
};

const bk_api *api_find(int16_t key)
{
    for (size_t i = 0; i < sizeof apis / sizeof apis[0]; i++)
        if (apis[i].key == key)
            return &apis[i];
    return NULL;
}

const bk_api *api_table(size_t *n)
{
    *n = sizeof apis / sizeof apis[0];
    return apis;
}

/*
 * ApiVersions v0-4, through the generated codec (kp_msgs.h): the request
 * body is decoded and the response encoded from the JSON definitions, so
 * the bytes follow the spec for each version (v4 is v3 on the wire; it
 * tells the broker the client reads UNSUPPORTED_VERSION).  A version above 4 gets
 * UNSUPPORTED_VERSION with a v0-shaped body listing everything, so that any
 * client can read it and retry with a version it finds there
 * (protocol/README.md §7.3).
 * v3+'s request body (ClientSoftwareName/Version) is read but not required
 * to be sensible.
 */
int api_handle_api_versions(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    size_t n;
    const bk_api *t = api_table(&n);
    kp_ApiVersionsResponse_ApiVersion keys[sizeof apis / sizeof apis[0]];
    kp_ApiVersionsResponse m;
    kp_init_ApiVersionsResponse(&m);
    for (size_t i = 0; i < n; i++)
        keys[i] = (kp_ApiVersionsResponse_ApiVersion){
            .ApiKey = t[i].key, .MinVersion = t[i].min_version, .MaxVersion = t[i].max_version,
        };
    m.ApiKeys = keys;
    m.ApiKeys_count = (int32_t)n;
    if (v > 4 || v < 0) {
        m.ErrorCode = KP_UNSUPPORTED_VERSION;
        kp_enc_ApiVersionsResponse(r->out, 0, &m);
        return BK_RESPOND;
    }
    kp_ApiVersionsRequest q;
    if (kp_dec_ApiVersionsRequest(&r->body, v, &q, &r->arena) != 0)
        return BK_CLOSE;
    m.ErrorCode = KP_NONE;
    kp_enc_ApiVersionsResponse(r->out, v, &m);
    return BK_RESPOND;
}
