/*
 * validate.c — every record of a produced batch checked before the broker
 * acknowledges it: Kafka's LogValidator for magic 2.
 *
 * kp_batch_validate has already checked the header, the length and the
 * CRC; a CRC only proves the bytes are the ones the client meant, not that
 * a consumer can read them.  This walks the records the way a consumer
 * will (kp_rec_read, records.c: one parser for both sides):
 *
 *   records area ──(codec bits)──► kp_decompress_ctx into v->plain
 *        │ none: read in place
 *        ▼
 *   RecordsCount ≤ bytes / 7 ─► for i in 0..RecordsCount-1:
 *        kp_rec_read (length, attributes, deltas, key, value, headers,
 *                     the fields fill the length exactly)
 *        OffsetDelta == i                    else INVALID_RECORD
 *        key present if key_required         else INVALID_RECORD
 *        CreateTime timestamp in range       else INVALID_TIMESTAMP
 *   ─► no byte left after the last record
 *
 * Promises:
 *   V1. Acceptance implies readability: a batch accepted here is read to
 *       its end by kp_rec_iter (same bound on the decompressed size, same
 *       count bound, same record reader).  tests/fuzz/fuzz_kp_validate.c
 *       asserts it.
 *   V2. Framing and codec faults are CORRUPT_MESSAGE; a well-framed record
 *       that breaks a rule is INVALID_RECORD or INVALID_TIMESTAMP (as
 *       Kafka's InvalidRecordException / InvalidTimestampException).  The
 *       fault names the record (its index in the batch) and what is wrong.
 *   V3. No allocation once v is warm: decoder contexts are reset, not
 *       recreated, and v->plain keeps its room — up to KEEP_MAX; a larger
 *       batch's buffer is released after it, so one hostile batch does not
 *       pin up to KP_REC_PLAIN_MAX of memory.
 *   V4. A record timestamp of -1 (NO_TIMESTAMP: up-converted magic 0) is
 *       exempt from the range check, as in Kafka.
 * Cost: uncompressed, one pass over the records (no copy); compressed, one
 * decompression into v->plain and one pass over it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "protocol/kp.h"

#define KEEP_MAX ((size_t)8 << 20)

void kp_validator_init(kp_validator *v)
{
    v->codec = (kp_codec_ctx)KP_CODEC_CTX_INIT;
    kp_buf_init(&v->plain);
}

void kp_validator_free(kp_validator *v)
{
    kp_codec_ctx_free(&v->codec);
    kp_buf_free(&v->plain);
}

static const char *codec_name(int codec)
{
    static const char *const names[] = { "uncompressed", "gzip", "snappy", "lz4", "zstd" };
    return codec >= 0 && codec <= KP_CODEC_ZSTD ? names[codec] : "unknown codec";
}

__attribute__((format(printf, 5, 6)))
static int fault(kp_val_fault *f, int rc, int16_t error, int32_t record,
                 const char *fmt, ...)
{
    f->error = error;
    f->record = record;
    int n = record >= 0
        ? snprintf(f->message, sizeof f->message, "Record %" PRId32 " in batch: ", record)
        : snprintf(f->message, sizeof f->message, "Batch: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message + n, sizeof f->message - (size_t)n, fmt, ap);
    va_end(ap);
    return rc;
}

/* Record i did not read: say why, from a cursor at its start (error path
 * only; kp_rec_read itself stays the one parser). */
static int framing_fault(kp_val_fault *f, kp_rd at, int32_t i, int32_t count)
{
    size_t left = kp_rd_left(&at);
    if (left == 0)
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, i,
                     "missing: the records end after %" PRId32 " of RecordsCount %" PRId32,
                     i, count);
    int32_t len = kp_rd_varint(&at);
    if (!kp_rd_ok(&at))
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, i,
                     "length varint truncated or too long");
    if (len < 0)
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, i,
                     "negative length %" PRId32, len);
    if ((size_t)len > kp_rd_left(&at))
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, i,
                     "length %" PRId32 " runs past the batch end (%zu bytes left)",
                     len, kp_rd_left(&at));
    return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, i,
                 "fields do not fill its length %" PRId32 " exactly (a varint, "
                 "key, value or header is cut short or runs over)", len);
}

bool kp_val_timestamp_ok(const kp_val_rules *r, int64_t ts)
{
    if (!r->check_timestamps || ts == -1)
        return true;                            /* V4 */
    /* Exact in unsigned arithmetic: |now - ts| < 2^64. */
    if (ts < r->now_ms)
        return r->before_max_ms == INT64_MAX ||
               (uint64_t)r->now_ms - (uint64_t)ts <= (uint64_t)r->before_max_ms;
    return r->after_max_ms == INT64_MAX ||
           (uint64_t)ts - (uint64_t)r->now_ms <= (uint64_t)r->after_max_ms;
}

static int walk(kp_rd *rd, const kp_batch *b, const kp_val_rules *rules,
                kp_val_fault *f, int64_t *max_ts)
{
    int32_t count = b->RecordsCount;
    if ((uint64_t)count > kp_rd_left(rd) / KP_REC_MIN_SIZE)
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, -1,
                     "RecordsCount %" PRId32 " cannot fit in %zu bytes of records",
                     count, kp_rd_left(rd));
    /* Read with BaseOffset 0 and CreateTime, so Offset is the OffsetDelta
     * and Timestamp the record's own. */
    kp_batch hb = *b;
    hb.BaseOffset = 0;
    hb.Attributes &= (int16_t)~KP_ATTR_LOG_APPEND_TIME;
    *max_ts = -1;
    for (int32_t i = 0; i < count; i++) {
        kp_rd at = *rd;
        kp_record rec;
        if (kp_rec_read(rd, &hb, &rec) != 1)
            return framing_fault(f, at, i, count);
        if (rec.Offset != i)
            return fault(f, KP_E_MALFORMED, KP_INVALID_RECORD, i,
                         "OffsetDelta %" PRId64 ", expected %" PRId32
                         " (deltas run 0..RecordsCount-1 in order)", rec.Offset, i);
        if (rules->key_required && rec.Key.len < 0)
            return fault(f, KP_E_MALFORMED, KP_INVALID_RECORD, i,
                         "Compacted topic cannot accept message without key");
        if (!kp_val_timestamp_ok(rules, rec.Timestamp))
            return fault(f, KP_E_MALFORMED, KP_INVALID_TIMESTAMP, i,
                         "timestamp %" PRId64 " is out of range of the broker's "
                         "clock %" PRId64 " (message.timestamp.before.max.ms %" PRId64
                         ", after.max.ms %" PRId64 ")", rec.Timestamp, rules->now_ms,
                         rules->before_max_ms, rules->after_max_ms);
        if (rec.Timestamp > *max_ts)
            *max_ts = rec.Timestamp;
    }
    if (kp_rd_left(rd) != 0)
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, -1,
                     "%zu bytes after the last of RecordsCount %" PRId32 " records",
                     kp_rd_left(rd), count);
    return 0;
}

int kp_batch_validate_records(kp_validator *v, const uint8_t *p, size_t size,
                              const kp_batch *b, const kp_val_rules *rules,
                              kp_val_fault *f)
{
    int codec = b->Attributes & KP_ATTR_CODEC_MASK;
    const uint8_t *recs = p + KP_BATCH_HEADER_SIZE;
    size_t n = size - KP_BATCH_HEADER_SIZE;
    kp_rd rd;
    if (codec == KP_CODEC_NONE) {
        kp_rd_init(&rd, recs, n);
        return walk(&rd, b, rules, f, &v->max_timestamp);
    }
    kp_buf_reset(&v->plain);
    int rc = kp_decompress_ctx(&v->codec, codec, recs, n, &v->plain, KP_REC_PLAIN_MAX);
    if (rc == KP_E_NOMEM)
        rc = fault(f, rc, KP_CORRUPT_MESSAGE, -1, "no memory to decompress %s records",
                   codec_name(codec));
    else if (rc < 0)
        rc = fault(f, rc, KP_CORRUPT_MESSAGE, -1,
                   "%s records do not decompress (corrupt, cut short, or over %zu MiB)",
                   codec_name(codec), KP_REC_PLAIN_MAX >> 20);
    else {
        kp_rd_init(&rd, v->plain.data, v->plain.len);
        rc = walk(&rd, b, rules, f, &v->max_timestamp);
    }
    if (v->plain.cap > KEEP_MAX) {                   /* V3 */
        kp_buf_free(&v->plain);
        kp_buf_init(&v->plain);
    }
    return rc;
}
