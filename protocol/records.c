/*
 * records.c — the records inside a RecordBatch v2: an iterator (consumer
 * side: the messages view, compaction, tests) and a builder (producer side:
 * clients, tests, benchmarks, compaction).
 *
 * A record, after decompression of the records area (kp.h has the batch):
 *
 *   length          VARINT   bytes of the rest of the record
 *   Attributes      INT8
 *   TimestampDelta  VARLONG  from BaseTimestamp
 *   OffsetDelta     VARINT   from BaseOffset
 *   KeyLength       VARINT   -1 = null   | Key bytes
 *   ValueLength     VARINT   -1 = null   | Value bytes
 *   HeadersCount    VARINT
 *   Headers         { VARINT len, key (never null), VARINT len (-1 null), value }
 *
 * Iterator promises:
 *   1. Every read is bounds-checked; the batch need not have been validated
 *      (the CRC is not checked here).  A record must fill its length
 *      exactly, headers included (they are walked once in next(), so
 *      kp_header_next cannot fail on a record next() accepted), and the
 *      records area must hold exactly RecordsCount records.
 *   2. Counts are bounded by the bytes that could hold them (a record takes
 *      at least 7 bytes, a header 2), so a hostile count costs nothing.
 *   3. Decompressed records live in it->plain, capped at KP_REC_PLAIN_MAX;
 *      slices stay valid until the next start or free.  Errors latch.
 *
 * Builder promises:
 *   1. kp_bb_finish emits a batch that kp_batch_validate accepts (for
 *      kp_bb_add; kp_bb_add_at with gaps gives a kp_batch_check_stored one).
 *   2. On failure the output buffer is restored to where the batch started.
 *   3. finish (success or not) releases the record buffer, so a builder is
 *      reused by calling kp_bb_init again without leaking.
 */
#include <string.h>

#include "protocol/kp.h"

#define REC_MIN_SIZE KP_REC_MIN_SIZE
#define HDR_MIN_SIZE 2

void kp_rec_iter_init0(kp_rec_iter *it)
{
    memset(it, 0, sizeof *it);
    kp_buf_init(&it->plain);
    kp_rd_init(&it->rd, NULL, 0);
}

void kp_rec_iter_free(kp_rec_iter *it)
{
    kp_buf_free(&it->plain);
    kp_rec_iter_init0(it);
}

int kp_rec_iter_start(kp_rec_iter *it, const uint8_t *p, size_t len)
{
    kp_buf_reset(&it->plain);
    kp_rd_init(&it->rd, NULL, 0);
    it->left = 0;
    it->err = kp_batch_header(p, len, &it->batch);
    if (it->err)
        return it->err;
    size_t size = (size_t)KP_BATCH_LOG_OVERHEAD + (size_t)it->batch.BatchLength;
    if (size > len)
        return it->err = KP_E_TRUNCATED;
    if (it->batch.Magic != 2)
        return it->err = KP_E_MAGIC;
    if (it->batch.RecordsCount < 0)
        return it->err = KP_E_MALFORMED;

    const uint8_t *recs = p + KP_BATCH_HEADER_SIZE;
    size_t n = size - KP_BATCH_HEADER_SIZE;
    int codec = it->batch.Attributes & KP_ATTR_CODEC_MASK;
    if (codec == KP_CODEC_NONE) {
        kp_rd_init(&it->rd, recs, n);
    } else {
        int rc = kp_decompress(codec, recs, n, &it->plain, KP_REC_PLAIN_MAX);
        if (rc < 0)
            return it->err = rc;
        kp_rd_init(&it->rd, it->plain.data, it->plain.len);
    }
    if ((uint64_t)it->batch.RecordsCount > kp_rd_left(&it->rd) / REC_MIN_SIZE)
        return it->err = KP_E_MALFORMED;
    it->left = it->batch.RecordsCount;
    return 0;
}

/* kp_rec_read's primitives: the common case (a varint of one or two
 * bytes, a slice that fits) inline, everything else — errors, longer and
 * over-long varints — through rd.c, which owns those rules.  Produce
 * validates every record with kp_rec_read, so its per-record cost is on
 * the produce hot path (bench/rdkafka_validate_bench.c). */
static inline uint64_t rec_leb(kp_rd *r, bool *done)
{
    const uint8_t *q = r->p;
    *done = false;
    if (r->err || r->end - q < 2) {
        if (!r->err && r->end - q == 1 && !(q[0] & 0x80)) {
            r->p++;
            *done = true;
            return q[0];
        }
        return 0;
    }
    if (!(q[0] & 0x80)) {
        r->p += 1;
        *done = true;
        return q[0];
    }
    if (!(q[1] & 0x80)) {
        r->p += 2;
        *done = true;
        return (uint64_t)(q[0] & 0x7f) | (uint64_t)q[1] << 7;
    }
    return 0;
}

static inline int32_t rec_varint(kp_rd *r)
{
    bool done;
    uint64_t u = rec_leb(r, &done);
    if (!done)
        return kp_rd_varint(r);
    return (int32_t)(((uint32_t)u >> 1) ^ (0u - ((uint32_t)u & 1)));
}

static inline int64_t rec_varlong(kp_rd *r)
{
    bool done;
    uint64_t u = rec_leb(r, &done);
    if (!done)
        return kp_rd_varlong(r);
    return (int64_t)((u >> 1) ^ (0ull - (u & 1)));
}

static inline const uint8_t *rec_raw(kp_rd *r, size_t n)
{
    if (!r->err && (size_t)(r->end - r->p) >= n) {
        const uint8_t *q = r->p;
        r->p += n;
        return q;
    }
    return kp_rd_raw(r, n);
}

/* VARINT length + bytes; -1 is null when allowed.  Inlined: key, value
 * and every header go through it. */
static inline __attribute__((always_inline))
kp_str rd_varbytes(kp_rd *r, bool nullable)
{
    int32_t n = rec_varint(r);
    if (!kp_rd_ok(r))
        return KP_STR_NULL;
    if (n < 0) {
        if (n != -1 || !nullable)
            r->err = KP_E_MALFORMED;
        return KP_STR_NULL;
    }
    const uint8_t *q = rec_raw(r, (size_t)n);
    if (!kp_rd_ok(r))
        return KP_STR_NULL;
    return (kp_str){ q ? (const char *)q : "", n };
}

static int read_header(kp_rd *r, kp_header *h)
{
    h->Key = rd_varbytes(r, false);
    h->Value = rd_varbytes(r, true);
    return r->err;
}

int kp_rec_read(kp_rd *rd, const kp_batch *b, kp_record *rec)
{
    int32_t len = rec_varint(rd);
    if (kp_rd_ok(rd) && len < 0)
        rd->err = KP_E_MALFORMED;
    const uint8_t *body = rec_raw(rd, len < 0 ? 0 : (size_t)len);
    if (!kp_rd_ok(rd))
        return rd->err;

    kp_rd r = { body, body ? body + len : body, 0 };   /* NULL + 0 is undefined */
    const uint8_t *attr = rec_raw(&r, 1);
    rec->Attributes = attr ? (int8_t)attr[0] : 0;
    int64_t TimestampDelta = rec_varlong(&r);
    int32_t OffsetDelta = rec_varint(&r);
    rec->Key = rd_varbytes(&r, true);
    rec->Value = rd_varbytes(&r, true);
    rec->HeadersCount = rec_varint(&r);
    if (kp_rd_ok(&r) && (rec->HeadersCount < 0 ||
                         (size_t)rec->HeadersCount > kp_rd_left(&r) / HDR_MIN_SIZE))
        r.err = KP_E_MALFORMED;
    const uint8_t *hstart = r.p;
    for (int32_t i = 0; i < rec->HeadersCount && kp_rd_ok(&r); i++) {
        kp_header h;
        (void)read_header(&r, &h);
    }
    if (kp_rd_ok(&r) && kp_rd_left(&r) != 0)
        r.err = KP_E_MALFORMED;                 /* record longer than its fields */
    if (!kp_rd_ok(&r))
        return r.err == KP_E_TRUNCATED ? KP_E_MALFORMED : r.err;
    rec->headers = (kp_rd){ hstart, r.p, 0 };

    rec->Timestamp = (b->Attributes & KP_ATTR_LOG_APPEND_TIME)
        ? b->MaxTimestamp
        : (int64_t)((uint64_t)b->BaseTimestamp + (uint64_t)TimestampDelta);
    rec->Offset = (int64_t)((uint64_t)b->BaseOffset + (uint64_t)(int64_t)OffsetDelta);
    return 1;
}

int kp_rec_iter_next(kp_rec_iter *it, kp_record *rec)
{
    if (it->err)
        return it->err;
    if (it->left <= 0) {
        if (kp_rd_left(&it->rd) != 0)
            return it->err = KP_E_MALFORMED;    /* bytes after the last record */
        return 0;
    }
    int rc = kp_rec_read(&it->rd, &it->batch, rec);
    if (rc != 1)
        return it->err = rc;
    it->left--;
    return 1;
}

int kp_header_next(kp_record *rec, kp_header *h)
{
    if (!kp_rd_ok(&rec->headers))
        return rec->headers.err;
    if (kp_rd_left(&rec->headers) == 0)
        return 0;
    int rc = read_header(&rec->headers, h);
    return rc ? rc : 1;
}

/* ---- builder -------------------------------------------------------------- */

void kp_bb_init(kp_batch_builder *bb, kp_buf *out, int codec)
{
    bb->out = out;
    bb->start = out->len;
    kp_buf_init(&bb->recs);
    bb->codec = codec;
    bb->count = 0;
    bb->base_ts = bb->max_ts = 0;
    bb->base_ts_set = false;
    bb->base_offset = 0;
    bb->ProducerId = -1;
    bb->ProducerEpoch = -1;
    bb->BaseSequence = -1;
    bb->extra_attrs = 0;
}

void kp_bb_set_producer(kp_batch_builder *bb, int64_t pid, int16_t epoch,
                        int32_t base_sequence)
{
    bb->ProducerId = pid;
    bb->ProducerEpoch = epoch;
    bb->BaseSequence = base_sequence;
}

void kp_bb_set_base_timestamp(kp_batch_builder *bb, int64_t ts)
{
    bb->base_ts = ts;
    bb->base_ts_set = true;
}

static size_t leb_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t varint_size(int32_t v)
{
    return leb_size(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

static size_t varlong_size(int64_t v)
{
    return leb_size(((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

/* Size of VARINT length + bytes; a negative length is null (-1). */
static size_t varbytes_size(const void *p, int32_t len)
{
    return p ? varint_size(len) + (size_t)len : 1;
}

static void wr_varbytes(kp_buf *b, const void *p, int32_t len)
{
    if (!p) {
        kp_wr_varint(b, -1);
        return;
    }
    kp_wr_varint(b, len);
    kp_wr_raw(b, p, (size_t)len);
}

void kp_bb_add_at(kp_batch_builder *bb, int32_t offset_delta, int64_t timestamp,
                  const void *key, int32_t key_len,
                  const void *value, int32_t value_len,
                  const kp_header *headers, int headers_count)
{
    kp_buf *b = &bb->recs;
    if (b->err)
        return;
    if ((key && key_len < 0) || (value && value_len < 0) || headers_count < 0 ||
        offset_delta < 0 || (headers_count > 0 && !headers)) {
        b->err = KP_E_MALFORMED;
        return;
    }
    if (bb->count == 0) {
        if (!bb->base_ts_set)
            bb->base_ts = timestamp;
        bb->max_ts = timestamp;
    }
    if (timestamp > bb->max_ts)
        bb->max_ts = timestamp;
    int64_t TimestampDelta = (int64_t)((uint64_t)timestamp - (uint64_t)bb->base_ts);

    uint64_t size = 1 + varlong_size(TimestampDelta) + varint_size(offset_delta) +
                    varbytes_size(key, key_len) + varbytes_size(value, value_len) +
                    varint_size(headers_count);
    for (int i = 0; i < headers_count; i++) {
        const kp_header *h = &headers[i];
        if (h->Key.len < 0 || (h->Key.len > 0 && !h->Key.p) ||
            (h->Value.len > 0 && !h->Value.p)) {
            b->err = KP_E_MALFORMED;
            return;
        }
        size += varbytes_size(h->Key.len ? h->Key.p : "", h->Key.len) +
                varbytes_size(h->Value.len < 0 ? NULL : "", h->Value.len);
    }
    if (size > INT32_MAX) {
        b->err = KP_E_MALFORMED;
        return;
    }
    kp_wr_varint(b, (int32_t)size);
    kp_wr_i8(b, 0);
    kp_wr_varlong(b, TimestampDelta);
    kp_wr_varint(b, offset_delta);
    wr_varbytes(b, key, key_len);
    wr_varbytes(b, value, value_len);
    kp_wr_varint(b, headers_count);
    for (int i = 0; i < headers_count; i++) {
        const kp_header *h = &headers[i];
        wr_varbytes(b, h->Key.len ? h->Key.p : "", h->Key.len);
        wr_varbytes(b, h->Value.len < 0 ? NULL : (h->Value.len ? h->Value.p : ""),
                    h->Value.len);
    }
    bb->count++;
}

void kp_bb_add(kp_batch_builder *bb, int64_t timestamp,
               const void *key, int32_t key_len,
               const void *value, int32_t value_len,
               const kp_header *headers, int headers_count)
{
    kp_bb_add_at(bb, bb->count, timestamp, key, key_len, value, value_len,
                 headers, headers_count);
}

/* The OffsetDelta of the last record: walks the (uncompressed, self-made)
 * records, so the builder needs no extra state for kp_bb_add_at's gaps. */
static int32_t last_offset_delta(const kp_buf *recs)
{
    kp_rd r;
    int32_t last = -1;
    kp_rd_init(&r, recs->data, recs->len);
    while (kp_rd_ok(&r) && kp_rd_left(&r) > 0) {
        int32_t len = kp_rd_varint(&r);
        const uint8_t *body = kp_rd_raw(&r, len < 0 ? 0 : (size_t)len);
        kp_rd rec;
        kp_rd_init(&rec, body, len < 0 ? 0 : (size_t)len);
        (void)kp_rd_i8(&rec);
        (void)kp_rd_varlong(&rec);
        last = kp_rd_varint(&rec);
    }
    return last;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

int64_t kp_bb_finish(kp_batch_builder *bb)
{
    kp_buf *out = bb->out;
    size_t start = out->len;
    int64_t rc;
    bb->start = start;

    if (bb->recs.err) {
        rc = bb->recs.err;
        goto done;
    }
    if (bb->count == 0) {
        rc = KP_E_MALFORMED;
        goto done;
    }
    if (out->err) {
        rc = out->err;
        goto done;
    }
    uint8_t *hdr = kp_buf_reserve(out, KP_BATCH_HEADER_SIZE);
    if (!hdr) {
        rc = KP_E_NOMEM;
        goto fail;
    }
    memset(hdr, 0, KP_BATCH_HEADER_SIZE);
    out->len += KP_BATCH_HEADER_SIZE;
    rc = kp_compress(bb->codec, bb->recs.data, bb->recs.len, out);
    if (rc < 0)
        goto fail;
    size_t size = out->len - start;
    if (size - KP_BATCH_LOG_OVERHEAD > INT32_MAX) {
        rc = KP_E_MALFORMED;
        goto fail;
    }

    uint8_t *p = out->data + start;        /* out may have moved: re-fetch */
    put_be(p + KP_BATCH_OFF_BaseOffset, (uint64_t)bb->base_offset, 8);
    put_be(p + KP_BATCH_OFF_BatchLength, size - KP_BATCH_LOG_OVERHEAD, 4);
    put_be(p + KP_BATCH_OFF_PartitionLeaderEpoch, (uint32_t)-1, 4);
    p[KP_BATCH_OFF_Magic] = KP_BATCH_MAGIC;
    put_be(p + KP_BATCH_OFF_Attributes, (uint16_t)((bb->codec & KP_ATTR_CODEC_MASK) |
                                                   (bb->extra_attrs & ~KP_ATTR_CODEC_MASK)), 2);
    put_be(p + KP_BATCH_OFF_LastOffsetDelta, (uint32_t)last_offset_delta(&bb->recs), 4);
    put_be(p + KP_BATCH_OFF_BaseTimestamp, (uint64_t)bb->base_ts, 8);
    put_be(p + KP_BATCH_OFF_MaxTimestamp, (uint64_t)bb->max_ts, 8);
    put_be(p + KP_BATCH_OFF_ProducerId, (uint64_t)bb->ProducerId, 8);
    put_be(p + KP_BATCH_OFF_ProducerEpoch, (uint16_t)bb->ProducerEpoch, 2);
    put_be(p + KP_BATCH_OFF_BaseSequence, (uint32_t)bb->BaseSequence, 4);
    put_be(p + KP_BATCH_OFF_RecordsCount, (uint32_t)bb->count, 4);
    put_be(p + KP_BATCH_OFF_Crc, kp_crc32c(0, p + KP_BATCH_CRC_START,
                                           size - KP_BATCH_CRC_START), 4);
    rc = (int64_t)size;
    goto done;

fail:
    out->len = start;
    if (out->err == KP_E_NOMEM && rc == KP_E_NOMEM)
        out->err = 0;
done:
    kp_buf_free(&bb->recs);
    bb->count = 0;
    return rc;
}

void kp_bb_free(kp_batch_builder *bb)
{
    kp_buf_free(&bb->recs);
    bb->count = 0;
}
