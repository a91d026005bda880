/* The generated message codec (protocol/gen_msgs.py, kp_msgs.h): encoded
 * bytes against bytes written out by hand from the spec, decoding back
 * field by field, tagged fields, and hostile frames. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "kp_msgs.h"
#include "protocol/kp.h"
#include "tests/unit/kp_msgs_check.h"
#include "tests/unit/unit_run.h"

/* ---- Metadata ------------------------------------------------------------------ */

static struct kp_MetadataRequest_MetadataRequestTopic md_topic_a = {
    .TopicId = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 },
    .Name = { "a", 1 },
};

START_TEST(test_metadata_request_v0_v1_v9_v12_bytes)
{
    kp_MetadataRequest m;
    kp_init_MetadataRequest(&m);
    ck_assert(m.AllowAutoTopicCreation);        /* "default": "true" */
    struct kp_MetadataRequest_MetadataRequestTopic t = md_topic_a;
    memset(t.TopicId, 0, 16);                   /* no id before v10 */
    m.Topics = &t;
    m.Topics_count = 1;

    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 0, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 0, 1, 0, 1, 'a');
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 1, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 0, 1, 0, 1, 'a');
    kp_buf_reset(&out);
    /* v9: compact array and string, tags after the topic; then
     * AllowAutoTopicCreation, IncludeCluster… (8-10), IncludeTopic…, tags */
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 9, &m), 0);
    ASSERT_BYTES(&out, 2, 2, 'a', 0, 1, 0, 0, 0);

    kp_MetadataRequest d;
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_METADATA, KP_MSG_REQUEST), 9,
                             out.data, out.len, &d), 0);
    ck_assert_int_eq(d.Topics_count, 1);
    ck_assert(kp_str_eq(d.Topics[0].Name, "a"));
    ck_assert(d.AllowAutoTopicCreation);
    ck_assert(!d.IncludeClusterAuthorizedOperations);
    ck_assert(!d.IncludeTopicAuthorizedOperations);
    ck_assert_ptr_eq(d.Topics[0].Name.p, (const char *)out.data + 2);  /* zero copy */

    /* v12: TopicId, then the (now nullable) name; IncludeCluster… is gone */
    t = md_topic_a;
    t.Name = KP_STR_NULL;
    m.IncludeTopicAuthorizedOperations = true;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 12, &m), 0);
    ASSERT_BYTES(&out, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                 0, 0, 1, 1, 0);
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_METADATA, KP_MSG_REQUEST), 12,
                             out.data, out.len, &d), 0);
    ck_assert_int_eq(d.Topics_count, 1);
    ck_assert_int_eq(d.Topics[0].Name.len, -1);
    ck_assert_mem_eq(d.Topics[0].TopicId, md_topic_a.TopicId, 16);
    ck_assert(d.IncludeTopicAuthorizedOperations);

    /* A null name cannot be sent before v10 (gen_msgs.py G2). */
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 9, &m), KP_E_MALFORMED);
    /* A topic id cannot be sent before v10; it is ignorable, so dropped (gen_msgs.py G1). */
    t.Name = S("a");
    m.IncludeTopicAuthorizedOperations = false;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 9, &m), 0);
    ASSERT_BYTES(&out, 2, 2, 'a', 0, 1, 0, 0, 0);
    /* IncludeClusterAuthorizedOperations (8-10) is not: refused in v11 */
    m.IncludeClusterAuthorizedOperations = true;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 11, &m), KP_E_VERSION);
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 10, &m), 0);
}
END_TEST

START_TEST(test_metadata_request_null_topics_only_from_v1)
{
    kp_MetadataRequest m;
    kp_init_MetadataRequest(&m);
    m.Topics_count = -1;                        /* all topics */
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 1, &m), 0);
    ASSERT_BYTES(&out, 0xff, 0xff, 0xff, 0xff);
    kp_MetadataRequest d;
    const kp_msg_desc *md = kp_msg_find(KP_API_METADATA, KP_MSG_REQUEST);
    ck_assert_int_eq(dec_all(md, 1, out.data, out.len, &d), 0);
    ck_assert_int_eq(d.Topics_count, -1);
    /* v0 has no null array: refused both ways */
    ck_assert_int_eq(dec_all(md, 0, out.data, out.len, &d), KP_E_MALFORMED);
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 0, &m), KP_E_MALFORMED);
}
END_TEST

/* Metadata v1 response, one broker, one topic with one partition. */
static const uint8_t md_resp_v1[] = {
    0, 0, 0, 1,                             /* Brokers: 1 */
    0, 0, 0, 7, 0, 1, 'h', 0, 0, 0x23, 0x84, 0xff, 0xff,  /* 7 "h" 9092 null rack */
    0, 0, 0, 7,                             /* ControllerId */
    0, 0, 0, 1,                             /* Topics: 1 */
    0, 0, 0, 1, 't', 0,                     /* ErrorCode, "t", IsInternal */
    0, 0, 0, 1,                             /* Partitions: 1 */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 7,           /* ErrorCode, index 0, leader 7 */
    0, 0, 0, 1, 0, 0, 0, 7,                 /* ReplicaNodes [7] */
    0, 0, 0, 1, 0, 0, 0, 7,                 /* IsrNodes [7] */
};

START_TEST(test_metadata_response_v1_decode_every_field)
{
    kp_MetadataResponse m;
    const kp_msg_desc *d = kp_msg_find(KP_API_METADATA, KP_MSG_RESPONSE);
    ck_assert_int_eq(dec_all(d, 1, md_resp_v1, sizeof md_resp_v1, &m), 0);
    ck_assert_int_eq(m.Brokers_count, 1);
    ck_assert_int_eq(m.Brokers[0].NodeId, 7);
    ck_assert(kp_str_eq(m.Brokers[0].Host, "h"));
    ck_assert_int_eq(m.Brokers[0].Port, 9092);
    ck_assert_int_eq(m.Brokers[0].Rack.len, -1);
    ck_assert_int_eq(m.ClusterId.len, -1);      /* v2+; default null */
    ck_assert_int_eq(m.ControllerId, 7);
    ck_assert_int_eq(m.Topics_count, 1);
    ck_assert(kp_str_eq(m.Topics[0].Name, "t"));
    ck_assert(!m.Topics[0].IsInternal);
    ck_assert_int_eq(m.Topics[0].TopicAuthorizedOperations, INT32_MIN);  /* default */
    ck_assert_int_eq(m.Topics[0].Partitions_count, 1);
    const kp_MetadataResponse_MetadataResponsePartition *p = &m.Topics[0].Partitions[0];
    ck_assert_int_eq(p->LeaderId, 7);
    ck_assert_int_eq(p->LeaderEpoch, -1);       /* v7+; default -1 */
    ck_assert_int_eq(p->ReplicaNodes_count, 1);
    ck_assert_int_eq(p->ReplicaNodes[0], 7);
    ck_assert_int_eq(p->IsrNodes[0], 7);
    ck_assert_int_eq(p->OfflineReplicas_count, 0);
    assert_reencodes(d, 1, &m, md_resp_v1, sizeof md_resp_v1);
    /* The same message at v12 (flexible) and back. */
    ck_assert_int_eq(kp_enc_MetadataResponse(&out, 12, &m), 0);
    kp_MetadataResponse m12;
    ck_assert_int_eq(dec_all(d, 12, out.data, out.len, &m12), 0);
    ck_assert_int_eq(m12.Topics[0].Partitions[0].IsrNodes[0], 7);
    ck_assert(kp_str_eq(m12.Brokers[0].Host, "h"));
}
END_TEST

/* ---- Produce --------------------------------------------------------------------- */

static void produce_fill(kp_ProduceRequest *m, struct kp_ProduceRequest_TopicProduceData *t,
                         struct kp_ProduceRequest_PartitionProduceData *p)
{
    kp_init_ProduceRequest(m);
    m->Acks = -1;
    m->TimeoutMs = 30000;
    m->TopicData = t;
    m->TopicData_count = 1;
    memset(t, 0, sizeof *t);
    t->Name = S("t");
    t->PartitionData = p;
    t->PartitionData_count = 1;
    p->Index = 0;
    p->Records = S("RB");
}

START_TEST(test_produce_request_v3_v9_records_zero_copy)
{
    kp_ProduceRequest m;
    struct kp_ProduceRequest_TopicProduceData t;
    struct kp_ProduceRequest_PartitionProduceData p;
    produce_fill(&m, &t, &p);
    const kp_msg_desc *d = kp_msg_find(KP_API_PRODUCE, KP_MSG_REQUEST);

    ck_assert_int_eq(kp_enc_ProduceRequest(&out, 3, &m), 0);
    ASSERT_BYTES(&out, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30,
                 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 0,
                 0, 0, 0, 2, 'R', 'B');
    kp_ProduceRequest r;
    ck_assert_int_eq(dec_all(d, 3, out.data, out.len, &r), 0);
    ck_assert_int_eq(r.TransactionalId.len, -1);
    ck_assert_int_eq(r.Acks, -1);
    ck_assert_int_eq(r.TimeoutMs, 30000);
    ck_assert(kp_str_eq(r.TopicData[0].Name, "t"));
    ck_assert_int_eq(r.TopicData[0].PartitionData[0].Index, 0);
    ck_assert_int_eq(r.TopicData[0].PartitionData[0].Records.len, 2);
    ck_assert_ptr_eq(r.TopicData[0].PartitionData[0].Records.p, (const char *)out.data + 27);

    kp_buf_reset(&out);
    m.TransactionalId = S("x");
    ck_assert_int_eq(kp_enc_ProduceRequest(&out, 9, &m), 0);
    ASSERT_BYTES(&out, 2, 'x', 0xff, 0xff, 0, 0, 0x75, 0x30,
                 2, 2, 't', 2, 0, 0, 0, 0, 3, 'R', 'B', 0, 0, 0);
    ck_assert_int_eq(dec_all(d, 9, out.data, out.len, &r), 0);
    ck_assert(kp_str_eq(r.TransactionalId, "x"));
    ck_assert(memcmp(r.TopicData[0].PartitionData[0].Records.p, "RB", 2) == 0);
    ck_assert_ptr_eq(r.TopicData[0].PartitionData[0].Records.p, (const char *)out.data + 17);
    /* Records are nullable in every version. */
    p.Records = KP_STR_NULL;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ProduceRequest(&out, 9, &m), 0);
    ck_assert_int_eq(dec_all(d, 9, out.data, out.len, &r), 0);
    ck_assert_int_eq(r.TopicData[0].PartitionData[0].Records.len, -1);
}
END_TEST

/* The records hook (msgs.c M5) stands in for the bytes: here it writes
 * "ZZ" where the caller's slice said "RB", as a splice would. */
static void records_hook(kp_buf *b, kp_str s, void *arg)
{
    (*(int *)arg)++;
    ck_assert_int_eq(s.len, 2);
    kp_wr_raw(b, "ZZ", 2);
}

START_TEST(test_records_hook_writes_only_the_length_prefix)
{
    kp_ProduceRequest m;
    struct kp_ProduceRequest_TopicProduceData t;
    struct kp_ProduceRequest_PartitionProduceData p;
    produce_fill(&m, &t, &p);
    int calls = 0;
    out.records = records_hook;
    out.records_arg = &calls;
    ck_assert_int_eq(kp_enc_ProduceRequest(&out, 3, &m), 0);
    ASSERT_BYTES(&out, 0xff, 0xff, 0xff, 0xff, 0, 0, 0x75, 0x30,
                 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 0,
                 0, 0, 0, 2, 'Z', 'Z');
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ProduceRequest(&out, 9, &m), 0);
    ASSERT_BYTES(&out, 0, 0xff, 0xff, 0, 0, 0x75, 0x30,
                 2, 2, 't', 2, 0, 0, 0, 0, 3, 'Z', 'Z', 0, 0, 0);
    ck_assert_int_eq(calls, 2);
    /* Null records are written by the encoder itself. */
    p.Records = KP_STR_NULL;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ProduceRequest(&out, 9, &m), 0);
    ck_assert_int_eq(calls, 2);
    out.records = NULL;
}
END_TEST

START_TEST(test_produce_response_v10_tagged_struct_round_trips)
{
    kp_ProduceResponse m;
    kp_init_ProduceResponse(&m);
    struct kp_ProduceResponse_TopicProduceResponse t;
    struct kp_ProduceResponse_PartitionProduceResponse p;
    memset(&t, 0, sizeof t);
    memset(&p, 0, sizeof p);
    t.Name = S("t");
    t.PartitionResponses = &p;
    t.PartitionResponses_count = 1;
    p.ErrorCode = KP_NOT_LEADER_OR_FOLLOWER;
    p.BaseOffset = -1;
    p.LogAppendTimeMs = -1;
    p.LogStartOffset = -1;
    p.ErrorMessage = KP_STR_NULL;
    p.CurrentLeader.LeaderId = -1;
    p.CurrentLeader.LeaderEpoch = -1;            /* the default: not written */
    m.Responses = &t;
    m.Responses_count = 1;
    ck_assert_int_eq(kp_enc_ProduceResponse(&out, 10, &m), 0);
    size_t plain = out.len;
    kp_buf_reset(&out);
    p.CurrentLeader.LeaderId = 2;
    p.CurrentLeader.LeaderEpoch = 5;
    ck_assert_int_eq(kp_enc_ProduceResponse(&out, 10, &m), 0);
    /* one tagged field: tag 0, size 9 (two int32 + empty tags) */
    ck_assert_uint_eq(out.len, plain + 2 + 9);
    kp_ProduceResponse r;
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_PRODUCE, KP_MSG_RESPONSE), 10,
                             out.data, out.len, &r), 0);
    ck_assert_int_eq(r.Responses[0].PartitionResponses[0].ErrorCode, KP_NOT_LEADER_OR_FOLLOWER);
    ck_assert_int_eq(r.Responses[0].PartitionResponses[0].CurrentLeader.LeaderId, 2);
    ck_assert_int_eq(r.Responses[0].PartitionResponses[0].CurrentLeader.LeaderEpoch, 5);
    /* not in v9, and it is not ignorable: refused */
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ProduceResponse(&out, 9, &m), KP_E_VERSION);
}
END_TEST

/* ---- FindCoordinator ------------------------------------------------------------- */

START_TEST(test_find_coordinator_v0_v4)
{
    kp_FindCoordinatorRequest q;
    kp_init_FindCoordinatorRequest(&q);
    q.Key = S("g");
    ck_assert_int_eq(kp_enc_FindCoordinatorRequest(&out, 0, &q), 0);
    ASSERT_BYTES(&out, 0, 1, 'g');
    kp_buf_reset(&out);
    kp_str keys[1] = { S("g") };
    q.Key = S("");
    q.CoordinatorKeys = keys;
    q.CoordinatorKeys_count = 1;
    ck_assert_int_eq(kp_enc_FindCoordinatorRequest(&out, 4, &q), 0);
    ASSERT_BYTES(&out, 0, 2, 2, 'g', 0);
    kp_FindCoordinatorRequest qd;
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_FIND_COORDINATOR, KP_MSG_REQUEST), 4,
                             out.data, out.len, &qd), 0);
    ck_assert_int_eq(qd.KeyType, 0);
    ck_assert_int_eq(qd.CoordinatorKeys_count, 1);
    ck_assert(kp_str_eq(qd.CoordinatorKeys[0], "g"));
    ck_assert(kp_str_eq(qd.Key, ""));

    kp_FindCoordinatorResponse m;
    kp_init_FindCoordinatorResponse(&m);
    m.NodeId = 1;
    m.Host = S("h");
    m.Port = 9092;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_FindCoordinatorResponse(&out, 0, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 0, 0, 0, 1, 0, 1, 'h', 0, 0, 0x23, 0x84);
    /* v4 moved everything into Coordinators: the v0 fields are refused */
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_FindCoordinatorResponse(&out, 4, &m), KP_E_VERSION);

    kp_init_FindCoordinatorResponse(&m);
    struct kp_FindCoordinatorResponse_Coordinator c = {
        .Key = S("g"), .NodeId = 1, .Host = S("h"), .Port = 9092,
        .ErrorCode = 0, .ErrorMessage = KP_STR_NULL,
    };
    m.Coordinators = &c;
    m.Coordinators_count = 1;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_FindCoordinatorResponse(&out, 4, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 0, 0, 2, 2, 'g', 0, 0, 0, 1, 2, 'h', 0, 0, 0x23, 0x84,
                 0, 0, 0, 0, 0);
    kp_FindCoordinatorResponse r;
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_FIND_COORDINATOR, KP_MSG_RESPONSE), 4,
                             out.data, out.len, &r), 0);
    ck_assert_int_eq(r.Coordinators_count, 1);
    ck_assert(kp_str_eq(r.Coordinators[0].Key, "g"));
    ck_assert_int_eq(r.Coordinators[0].NodeId, 1);
    ck_assert(kp_str_eq(r.Coordinators[0].Host, "h"));
    ck_assert_int_eq(r.Coordinators[0].Port, 9092);
    ck_assert_int_eq(r.Coordinators[0].ErrorMessage.len, -1);
}
END_TEST

/* ---- OffsetCommit ------------------------------------------------------------------ */

START_TEST(test_offset_commit_request_v2_v8)
{
    kp_OffsetCommitRequest m;
    kp_init_OffsetCommitRequest(&m);
    ck_assert_int_eq(m.RetentionTimeMs, -1);
    ck_assert_int_eq(m.GroupInstanceId.len, -1);
    struct kp_OffsetCommitRequest_OffsetCommitRequestTopic t;
    struct kp_OffsetCommitRequest_OffsetCommitRequestPartition p;
    memset(&t, 0, sizeof t);
    t.Name = S("t");
    t.Partitions = &p;
    t.Partitions_count = 1;
    p = (struct kp_OffsetCommitRequest_OffsetCommitRequestPartition){
        .PartitionIndex = 0, .CommittedOffset = 42, .CommittedLeaderEpoch = -1,
        .CommitTimestamp = -1, .CommittedMetadata = S("x"),
    };
    m.GroupId = S("g");
    m.GenerationIdOrMemberEpoch = 5;
    m.MemberId = S("m");
    m.Topics = &t;
    m.Topics_count = 1;
    const kp_msg_desc *d = kp_msg_find(KP_API_OFFSET_COMMIT, KP_MSG_REQUEST);

    ck_assert_int_eq(kp_enc_OffsetCommitRequest(&out, 2, &m), 0);
    ASSERT_BYTES(&out, 0, 1, 'g', 0, 0, 0, 5, 0, 1, 'm',
                 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                 0, 0, 0, 1, 0, 1, 't', 0, 0, 0, 1, 0, 0, 0, 0,
                 0, 0, 0, 0, 0, 0, 0, 42, 0, 1, 'x');
    kp_OffsetCommitRequest r;
    ck_assert_int_eq(dec_all(d, 2, out.data, out.len, &r), 0);
    ck_assert(kp_str_eq(r.GroupId, "g"));
    ck_assert_int_eq(r.GenerationIdOrMemberEpoch, 5);
    ck_assert(kp_str_eq(r.MemberId, "m"));
    ck_assert_int_eq(r.RetentionTimeMs, -1);
    ck_assert_int_eq(r.Topics[0].Partitions[0].CommittedOffset, 42);
    ck_assert_int_eq(r.Topics[0].Partitions[0].CommittedLeaderEpoch, -1);
    ck_assert(kp_str_eq(r.Topics[0].Partitions[0].CommittedMetadata, "x"));

    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_OffsetCommitRequest(&out, 8, &m), 0);
    ASSERT_BYTES(&out, 2, 'g', 0, 0, 0, 5, 2, 'm', 0,
                 2, 2, 't', 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42,
                 0xff, 0xff, 0xff, 0xff, 2, 'x', 0, 0, 0);
    ck_assert_int_eq(dec_all(d, 8, out.data, out.len, &r), 0);
    ck_assert_int_eq(r.GroupInstanceId.len, -1);
    ck_assert_int_eq(r.Topics_count, 1);
    ck_assert_int_eq(r.Topics[0].Partitions_count, 1);
    ck_assert_int_eq(r.Topics[0].Partitions[0].CommittedOffset, 42);
    ck_assert(kp_str_eq(r.Topics[0].Partitions[0].CommittedMetadata, "x"));
    /* RetentionTimeMs (2-4) is ignorable: dropped at v8, same bytes */
    m.RetentionTimeMs = 1000;
    size_t len8 = out.len;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_OffsetCommitRequest(&out, 8, &m), 0);
    ck_assert_uint_eq(out.len, len8);
    /* CommitTimestamp (v1 only) is not: refused at v2 */
    p.CommitTimestamp = 1000;
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_OffsetCommitRequest(&out, 2, &m), KP_E_VERSION);
}
END_TEST

/* ---- ApiVersions ------------------------------------------------------------------- */

START_TEST(test_api_versions_response_v0_v3)
{
    kp_ApiVersionsResponse m;
    kp_init_ApiVersionsResponse(&m);
    struct kp_ApiVersionsResponse_ApiVersion k = { .ApiKey = 18, .MinVersion = 0, .MaxVersion = 3 };
    m.ApiKeys = &k;
    m.ApiKeys_count = 1;
    ck_assert_int_eq(kp_enc_ApiVersionsResponse(&out, 0, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 0, 0, 0, 1, 0, 18, 0, 0, 0, 3);
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ApiVersionsResponse(&out, 3, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 2, 0, 18, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0);
    kp_ApiVersionsResponse r;
    const kp_msg_desc *d = kp_msg_find(KP_API_API_VERSIONS, KP_MSG_RESPONSE);
    ck_assert_int_eq(dec_all(d, 3, out.data, out.len, &r), 0);
    ck_assert_int_eq(r.ApiKeys_count, 1);
    ck_assert_int_eq(r.ApiKeys[0].ApiKey, 18);
    ck_assert_int_eq(r.ApiKeys[0].MaxVersion, 3);
    ck_assert_int_eq(r.FinalizedFeaturesEpoch, -1);
    ck_assert_int_eq(r.SupportedFeatures_count, 0);
}
END_TEST

START_TEST(test_api_versions_response_v3_tagged_fields_round_trip)
{
    kp_ApiVersionsResponse m;
    kp_init_ApiVersionsResponse(&m);
    struct kp_ApiVersionsResponse_SupportedFeatureKey f = { .Name = S("f"), .MinVersion = 1, .MaxVersion = 2 };
    m.SupportedFeatures = &f;
    m.SupportedFeatures_count = 1;
    m.FinalizedFeaturesEpoch = 7;
    m.ZkMigrationReady = true;
    ck_assert_int_eq(kp_enc_ApiVersionsResponse(&out, 3, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 1, 0, 0, 0, 0,
                 3,                                          /* three tags */
                 0, 8, 2, 2, 'f', 0, 1, 0, 2, 0,             /* SupportedFeatures */
                 1, 8, 0, 0, 0, 0, 0, 0, 0, 7,               /* FinalizedFeaturesEpoch */
                 3, 1, 1);                                   /* ZkMigrationReady */
    kp_ApiVersionsResponse r;
    const kp_msg_desc *d = kp_msg_find(KP_API_API_VERSIONS, KP_MSG_RESPONSE);
    ck_assert_int_eq(dec_all(d, 3, out.data, out.len, &r), 0);
    ck_assert_int_eq(r.SupportedFeatures_count, 1);
    ck_assert(kp_str_eq(r.SupportedFeatures[0].Name, "f"));
    ck_assert_int_eq(r.SupportedFeatures[0].MinVersion, 1);
    ck_assert_int_eq(r.SupportedFeatures[0].MaxVersion, 2);
    ck_assert_int_eq(r.FinalizedFeaturesEpoch, 7);
    ck_assert(r.ZkMigrationReady);
    ck_assert_int_eq(r.FinalizedFeatures_count, 0);
    assert_reencodes(d, 3, &r, out.data, out.len);
    /* The tagged fields are simply absent from v2 (all ignorable). */
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ApiVersionsResponse(&out, 2, &m), 0);
    ASSERT_BYTES(&out, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
}
END_TEST

/* ApiVersions v3 request body as librdkafka 2.0.2 sends it, with an unknown
 * tag 5 (two bytes) added to the top-level tag section. */
START_TEST(test_api_versions_request_v3_unknown_tag_skipped)
{
    static const uint8_t body[] = {
        0x0b, 'l', 'i', 'b', 'r', 'd', 'k', 'a', 'f', 'k', 'a',
        0x06, '2', '.', '0', '.', '2',
        0x01, 0x05, 0x02, 0xaa, 0xbb,
    };
    kp_ApiVersionsRequest m;
    const kp_msg_desc *d = kp_msg_find(KP_API_API_VERSIONS, KP_MSG_REQUEST);
    ck_assert_int_eq(dec_all(d, 3, body, sizeof body, &m), 0);
    ck_assert(kp_str_eq(m.ClientSoftwareName, "librdkafka"));
    ck_assert(kp_str_eq(m.ClientSoftwareVersion, "2.0.2"));
    /* v0 has an empty body */
    ck_assert_int_eq(dec_all(d, 0, NULL, 0, &m), 0);
    ck_assert(kp_str_eq(m.ClientSoftwareName, ""));
    kp_buf_reset(&out);
    ck_assert_int_eq(kp_enc_ApiVersionsRequest(&out, 0, &m), 0);
    ck_assert_uint_eq(out.len, 0);
    /* an unknown tag inside a struct element is skipped too */
    static const uint8_t resp[] = {
        0, 0, 2, 0, 18, 0, 0, 0, 3,
        1, 9, 1, 0x7f,                   /* element tags: tag 9, one byte */
        0, 0, 0, 0, 0,
    };
    kp_ApiVersionsResponse r;
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_API_VERSIONS, KP_MSG_RESPONSE), 3,
                             resp, sizeof resp, &r), 0);
    ck_assert_int_eq(r.ApiKeys[0].MaxVersion, 3);
}
END_TEST

/* The request header: ClientId stays a classic string in v2. */
START_TEST(test_request_header_v2_classic_client_id)
{
    kp_RequestHeader h;
    kp_init_RequestHeader(&h);
    h.RequestApiKey = 18;
    h.RequestApiVersion = 3;
    h.CorrelationId = 1;
    h.ClientId = S("rdkafka");
    const kp_msg_desc *d = kp_msg_find(-1, KP_MSG_HEADER);
    ck_assert_str_eq(d->name, "RequestHeader");
    ck_assert_int_eq(kp_enc_RequestHeader(&out, 2, &h), 0);
    ASSERT_BYTES(&out, 0x00, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00, 0x01,
                 0x00, 0x07, 'r', 'd', 'k', 'a', 'f', 'k', 'a', 0x00);
    /* the hand-written reader agrees */
    kp_rd rd;
    kp_req_hdr hh;
    kp_rd_init(&rd, out.data, out.len);
    ck_assert_int_eq(kp_req_hdr_read(&rd, &hh), 0);
    ck_assert(kp_str_eq(hh.ClientId, "rdkafka"));
    ck_assert_int_eq(kp_rd_left(&rd), 0);
}
END_TEST

/* ---- hostile input ------------------------------------------------------------------ */

START_TEST(test_hostile_counts_and_lengths_fail_without_allocating)
{
    const kp_msg_desc *d = kp_msg_find(KP_API_METADATA, KP_MSG_RESPONSE);
    kp_MetadataResponse m;
    /* Brokers count INT32_MAX with 4 bytes behind it */
    static const uint8_t huge[] = { 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0 };
    ck_assert_int_eq(dec_all(d, 1, huge, sizeof huge, &m), KP_E_MALFORMED);
    ck_assert_uint_eq(arena.total, 0);
    /* negative count other than -1 */
    static const uint8_t neg[] = { 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0 };
    ck_assert_int_eq(dec_all(d, 1, neg, sizeof neg, &m), KP_E_MALFORMED);
    /* compact count 2^32-1 (5-byte varint) in v9 */
    static const uint8_t chuge[] = { 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f, 0 };
    ck_assert_int_eq(dec_all(d, 9, chuge, sizeof chuge, &m), KP_E_MALFORMED);
    ck_assert_uint_eq(arena.total, 0);
    /* a string length of -2 */
    static const uint8_t sneg[] = { 0, 0, 0, 1, 0, 0, 0, 7, 0xff, 0xfe, 0, 0, 0, 0 };
    ck_assert_int_eq(dec_all(d, 1, sneg, sizeof sneg, &m), KP_E_MALFORMED);
    /* a tag count larger than the bytes left */
    static const uint8_t tags[] = { 0x0b, 'l', 'i', 'b', 'r', 'd', 'k', 'a', 'f', 'k', 'a',
                                    0x01, 0x7f };
    kp_ApiVersionsRequest q;
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_API_VERSIONS, KP_MSG_REQUEST), 3,
                             tags, sizeof tags, &q) != 0, 1);
    /* a tagged value whose size runs past the end */
    static const uint8_t tsize[] = { 1, 1, 1, 0x05, 0x20, 0x01 };
    ck_assert_int_eq(dec_all(kp_msg_find(KP_API_API_VERSIONS, KP_MSG_REQUEST), 3,
                             tsize, sizeof tsize, &q), KP_E_TRUNCATED);
}
END_TEST

START_TEST(test_every_truncation_fails_cleanly)
{
    const kp_msg_desc *d = kp_msg_find(KP_API_METADATA, KP_MSG_RESPONSE);
    for (size_t n = 0; n < sizeof md_resp_v1; n++) {
        uint8_t *copy = malloc(n ? n : 1);     /* exact size: ASan sees over-reads */
        memcpy(copy, md_resp_v1, n);
        kp_MetadataResponse m;
        /* truncated, or a count that the bytes left cannot pay for */
        int rc = dec_all(d, 1, copy, n, &m);
        ck_assert_msg(rc == KP_E_TRUNCATED || rc == KP_E_MALFORMED, "prefix %zu: %d", n, rc);
        free(copy);
        kp_arena_reset(&arena);
    }
}
END_TEST

START_TEST(test_arena_limit_bounds_a_decode)
{
    kp_arena small;
    kp_arena_init(&small, 64);
    /* 20 ReplicaNodes = 80 bytes: over the 64-byte limit */
    uint8_t frame[4 + 80];
    memset(frame, 0, sizeof frame);
    frame[3] = 20;
    kp_rd r;
    kp_rd_init(&r, frame, sizeof frame);
    int32_t n = kp_msg_rd_count(&r, false, false, 4);
    ck_assert_int_eq(n, 20);
    ck_assert_ptr_null(kp_msg_alloc(&r, &small, (size_t)n, sizeof(int32_t)));
    ck_assert_int_eq(r.err, KP_E_NOMEM);
    ck_assert_ptr_nonnull(kp_arena_alloc(&small, 64));
    ck_assert_ptr_null(kp_arena_alloc(&small, 1));
    kp_arena_reset(&small);
    ck_assert_ptr_nonnull(kp_arena_alloc(&small, 1));
    kp_arena_free(&small);
}
END_TEST

START_TEST(test_version_out_of_range_refused)
{
    kp_MetadataRequest m;
    kp_init_MetadataRequest(&m);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, 13, &m), KP_E_VERSION);
    ck_assert_int_eq(kp_enc_MetadataRequest(&out, -1, &m), KP_E_VERSION);
    kp_rd r;
    kp_rd_init(&r, "", 0);
    ck_assert_int_eq(kp_dec_MetadataRequest(&r, 13, &m, &arena), KP_E_VERSION);
}
END_TEST

/* ---- the version table ------------------------------------------------------------- */

START_TEST(test_version_table_matches_hand_written_flexible_table)
{
    const kp_msg_desc *d = kp_msg_find(KP_API_METADATA, KP_MSG_REQUEST);
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(d->min_version, 0);
    ck_assert_int_eq(d->max_version, 12);
    ck_assert_int_eq(d->first_flexible, 9);
    size_t apis = 0;
    for (size_t i = 0; i < kp_msg_descs_count; i++) {
        const kp_msg_desc *m = &kp_msg_descs[i];
        if (m->kind == KP_MSG_HEADER)
            continue;
        apis++;
        ck_assert_msg(m->first_flexible == kp_api_first_flexible(m->api_key),
                      "%s: generated %d, header.c %d", m->name, m->first_flexible,
                      kp_api_first_flexible(m->api_key));
        const kp_msg_desc *other = kp_msg_find(m->api_key, m->kind == KP_MSG_REQUEST
                                               ? KP_MSG_RESPONSE : KP_MSG_REQUEST);
        ck_assert_ptr_nonnull(other);
        ck_assert_int_eq(other->max_version, m->max_version);
    }
    ck_assert_uint_eq(apis, 86);             /* the 43 APIs the broker knows */
}
END_TEST

/* Every message at every version: defaults encode, decode, re-encode the same. */
START_TEST(test_every_message_every_version_round_trips_defaults)
{
    check_defaults_round_trip(kp_msg_descs, kp_msg_descs_count);
}
END_TEST

int main(void)
{
    const TTest *tests[] = {
        test_metadata_request_v0_v1_v9_v12_bytes,
        test_metadata_request_null_topics_only_from_v1,
        test_metadata_response_v1_decode_every_field,
        test_produce_request_v3_v9_records_zero_copy,
        test_records_hook_writes_only_the_length_prefix,
        test_produce_response_v10_tagged_struct_round_trips,
        test_find_coordinator_v0_v4,
        test_offset_commit_request_v2_v8,
        test_api_versions_response_v0_v3,
        test_api_versions_response_v3_tagged_fields_round_trip,
        test_api_versions_request_v3_unknown_tag_skipped,
        test_request_header_v2_classic_client_id,
        test_hostile_counts_and_lengths_fail_without_allocating,
        test_every_truncation_fails_cleanly,
        test_arena_limit_bounds_a_decode,
        test_version_out_of_range_refused,
        test_version_table_matches_hand_written_flexible_table,
        test_every_message_every_version_round_trips_defaults,
    };
    return unit_run("kp_msgs", "core", tests, sizeof tests / sizeof tests[0],
                    setup, teardown, 0);
}
