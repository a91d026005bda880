/*
 * The Fetch side of the benchmarks, described once: the fill (Produce of
 * ~0.9 MB batches, acks=1) and one pass of back-to-back 1 MiB Fetch
 * requests from offset 0 to the high watermark, as fetch_bench measures
 * them, so that another bench (cluster_bench's catch-up, which compares a
 * follower's rate with this one in the same run) reads exactly the same
 * way.  Requests and responses go through the generated codec (kp_msgs.h),
 * so any version is the same code.  Header-only like bench_common.h.
 */
#ifndef SLUICE_BENCH_FETCH_H
#define SLUICE_BENCH_FETCH_H

#include "bench/bench_common.h"
#include "kp_msgs.h"

#define BENCH_FETCH_MAX        (1 << 20)
#define BENCH_FETCH_VALUE_SIZE 1000
#define BENCH_FETCH_BATCH_RECS 900      /* ~0.9 MB batches, under max.message.bytes */

typedef struct bench_fetcher {
    const char *topic;
    const char *client;
    int16_t fetch_version, produce_version;
    uint8_t topic_id[16];               /* Fetch v13+ */
    kp_arena arena;                     /* decoded responses, reset per request */
    int32_t cid;
} bench_fetcher;

static inline void bench_fetcher_init(bench_fetcher *f, const char *topic, const char *client,
                                      int16_t fetch_version, int16_t produce_version)
{
    memset(f, 0, sizeof *f);
    f->topic = topic;
    f->client = client;
    f->fetch_version = fetch_version;
    f->produce_version = produce_version;
    f->cid = 1;
    kp_arena_init(&f->arena, KP_ARENA_LIMIT_DEFAULT);
}

/* A response body of api at version v: past the correlation id and, for a
 * flexible version, the header's tags. */
static inline kp_rd bench_resp_body(const kp_buf *r, int16_t api, int16_t v)
{
    kp_rd rd;
    kp_rd_init(&rd, r->data, r->len);
    kp_rd_i32(&rd);
    if (v >= kp_api_first_flexible(api))
        kp_rd_tags(&rd);
    return rd;
}

/* Writes `bytes` (rounded up to whole batches) to partition 0 of f->topic
 * on fd with acks=1.  Returns the bytes written, or -1 (printed why). */
static inline long bench_fetch_fill(bench_fetcher *f, int fd, long bytes)
{
    kp_buf batch, q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    if (bench_batch(&batch, BENCH_FETCH_BATCH_RECS, BENCH_FETCH_VALUE_SIZE, 'f')) {
        fprintf(stderr, "%s: cannot build a batch\n", f->client);
        return -1;
    }
    kp_ProduceRequest_PartitionProduceData pd = {
        .Index = 0, .Records = { (const char *)batch.data, (int32_t)batch.len } };
    kp_ProduceRequest_TopicProduceData td = {
        .Name = kp_str_cstr(f->topic), .PartitionData = &pd, .PartitionData_count = 1 };
    kp_ProduceRequest m;
    kp_init_ProduceRequest(&m);
    m.Acks = 1;
    m.TimeoutMs = 30000;
    m.TopicData = &td;
    m.TopicData_count = 1;
    long total = 0;
    int16_t v = f->produce_version;
    while (total < bytes) {
        kp_buf_reset(&q);
        kp_req_hdr_write(&q, KP_API_PRODUCE, v, f->cid++, f->client);
        kp_enc_ProduceRequest(&q, v, &m);
        int err = -1;
        if (bench_roundtrip(fd, &q, &r) == 0) {
            kp_rd rd = bench_resp_body(&r, KP_API_PRODUCE, v);
            kp_ProduceResponse pr;
            kp_arena_reset(&f->arena);
            if (kp_dec_ProduceResponse(&rd, v, &pr, &f->arena) == 0 &&
                pr.Responses_count == 1 && pr.Responses[0].PartitionResponses_count == 1)
                err = pr.Responses[0].PartitionResponses[0].ErrorCode;
        }
        if (err) {
            fprintf(stderr, "%s: produce failed (%d)\n", f->client, err);
            total = -1;
            break;
        }
        total += (long)batch.len;
    }
    kp_buf_free(&batch);
    kp_buf_free(&q);
    kp_buf_free(&r);
    return total;
}

/* Fetch v13+ names the topic by id: Metadata v12 has it.  0, or -1. */
static inline int bench_fetch_find_topic_id(bench_fetcher *f, int fd)
{
    kp_buf q, r;
    kp_buf_init(&q);
    kp_buf_init(&r);
    kp_MetadataRequest_MetadataRequestTopic mt = { .Name = kp_str_cstr(f->topic) };
    kp_MetadataRequest m;
    kp_init_MetadataRequest(&m);
    m.Topics = &mt;
    m.Topics_count = 1;
    kp_req_hdr_write(&q, KP_API_METADATA, 12, f->cid++, f->client);
    kp_enc_MetadataRequest(&q, 12, &m);
    kp_MetadataResponse mr;
    kp_arena_reset(&f->arena);
    kp_rd rd;
    int rc = -1;
    if (bench_roundtrip(fd, &q, &r) == 0 && (rd = bench_resp_body(&r, KP_API_METADATA, 12),
        kp_dec_MetadataResponse(&rd, 12, &mr, &f->arena)) == 0 && mr.Topics_count == 1 &&
        mr.Topics[0].ErrorCode == 0) {
        memcpy(f->topic_id, mr.Topics[0].TopicId, 16);
        rc = 0;
    }
    kp_buf_free(&q);
    kp_buf_free(&r);
    return rc;
}

/* One pass of 1 MiB fetches (MaxWaitMs 0) from offset 0 to the high
 * watermark.  Returns record bytes received, or -1 (printed why). */
static inline long bench_fetch_pass(bench_fetcher *f, int fd, kp_buf *q, kp_buf *r)
{
    int64_t off = 0, hw = 1;
    long bytes = 0;
    kp_FetchRequest_FetchPartition fp = { .Partition = 0, .CurrentLeaderEpoch = -1,
                                          .LastFetchedEpoch = -1, .LogStartOffset = -1,
                                          .PartitionMaxBytes = BENCH_FETCH_MAX };
    kp_FetchRequest_FetchTopic ft = { .Topic = kp_str_cstr(f->topic), .Partitions = &fp,
                                      .Partitions_count = 1 };
    memcpy(ft.TopicId, f->topic_id, 16);
    kp_FetchRequest m;
    kp_init_FetchRequest(&m);
    m.MaxWaitMs = 0;
    m.MinBytes = 0;
    m.MaxBytes = BENCH_FETCH_MAX;
    m.Topics = &ft;
    m.Topics_count = 1;
    int16_t v = f->fetch_version;
    while (off < hw) {
        kp_buf_reset(q);
        kp_req_hdr_write(q, KP_API_FETCH, v, f->cid++, f->client);
        fp.FetchOffset = off;
        kp_enc_FetchRequest(q, v, &m);
        if (bench_roundtrip(fd, q, r)) {
            fprintf(stderr, "%s: fetch failed\n", f->client);
            return -1;
        }
        kp_rd rd = bench_resp_body(r, KP_API_FETCH, v);
        kp_FetchResponse fr;
        kp_arena_reset(&f->arena);
        int16_t err = -1;
        kp_str recs = KP_STR_NULL;
        if (kp_dec_FetchResponse(&rd, v, &fr, &f->arena) == 0 && fr.Responses_count == 1 &&
            fr.Responses[0].Partitions_count == 1) {
            err = fr.Responses[0].Partitions[0].ErrorCode;
            hw = fr.Responses[0].Partitions[0].HighWatermark;
            recs = fr.Responses[0].Partitions[0].Records;
        }
        if (err || recs.len <= 0) {
            fprintf(stderr, "%s: bad fetch response at offset %lld (error %d, high watermark "
                    "%lld, %d record bytes)\n", f->client, (long long)off, err, (long long)hw,
                    (int)recs.len);
            return -1;
        }
        /* Next offset: after the last whole batch (headers only). */
        const uint8_t *p = (const uint8_t *)recs.p;
        size_t left = (size_t)recs.len;
        while (left >= KP_BATCH_HEADER_SIZE) {
            int64_t size = kp_batch_size(p, left);
            kp_batch h;
            if (size < 0 || (size_t)size > left || kp_batch_header(p, left, &h))
                break;
            off = h.BaseOffset + h.LastOffsetDelta + 1;
            p += size;
            left -= (size_t)size;
        }
        bytes += recs.len;
    }
    return bytes;
}

#endif
