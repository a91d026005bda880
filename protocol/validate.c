/*
 * validate.c — every record of a produced batch checked before the broker
 * acknowledges it: Kafka's LogValidator for magic 2.
 *
 * kp_batch_validate has already checked the header, the length and the
 * CRC; a CRC only proves the bytes are the ones the client meant, not that
 * a consumer can read them.  This walks the records the way a consumer
 * will (kp_rec_read, records.c: one parser for both sides):
 *
 *   records area ──(codec bits)──► kp_dstream into the window v->win
 *        │ none: read in place          (fixed size, refilled as records
 *        ▼                               are consumed)
 *   for i in 0..RecordsCount-1:
 *        kp_rec_read (length, attributes, deltas, key, value, headers,
 *                     the fields fill the length exactly)
 *        OffsetDelta == i                    else INVALID_RECORD
 *        key present if key_required         else INVALID_RECORD
 *        CreateTime timestamp in range       else INVALID_TIMESTAMP
 *        rules->on_record (when set)         its fault (the schema
 *                                            checks of issue 31)
 *   ─► no byte left after the last record
 *   (and RecordsCount ≤ bytes / 7, checked first when the bytes are known)
 *
 * Streaming: a record cut by the window's end is moved to its start and
 * completed from the stream; a record longer than the whole window is
 * read field by field as it streams by (big_record: varints decoded,
 * key, value and header bytes skipped unread, kp_rec_read's rules), so
 * nothing ever holds more than the window however the batch compresses.
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
 *   V3. No allocation once v is warm, and bounded memory: decoder
 *       contexts are reset, not recreated; the window (KP_VAL_WINDOW) is
 *       allocated once.  A compressed batch of any ratio is validated in
 *       the window plus the decoders' own state; a snappy block larger
 *       than KEEP_MAX (snappy has no streaming form) is released after
 *       its batch.
 *   V4. A record timestamp of -1 (NO_TIMESTAMP: up-converted magic 0) is
 *       exempt from the range check, as in Kafka.
 *   V5. Same verdicts and messages as a whole decompression would give:
 *       a codec fault first (the stream is read to its end), then the
 *       count, then the first bad record.  On a refusal the stream is
 *       decoded again to learn its total size (error path only: a refused
 *       batch costs up to three decodes, each bounded by KP_REC_PLAIN_MAX).
 * Cost: uncompressed, one pass over the records (no copy); compressed, one
 * decompression into the cache-resident window and one pass over it (a
 * record cut by the window's end is copied once).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

#define KEEP_MAX ((size_t)8 << 20)

void kp_validator_init(kp_validator *v)
{
    *v = (kp_validator){ .codec = KP_CODEC_CTX_INIT, .win_cap = KP_VAL_WINDOW };
}

void kp_validator_set_window(kp_validator *v, size_t cap)
{
    free(v->win);
    v->win = NULL;
    v->win_cap = cap < 16 ? 16 : cap;
}

void kp_validator_free(kp_validator *v)
{
    kp_codec_ctx_free(&v->codec);
    free(v->win);
    v->win = NULL;
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

int kp_val_record_fault(kp_val_fault *f, int16_t error, int32_t i, const char *fmt, ...)
{
    f->error = error;
    f->record = i;
    int n = snprintf(f->message, sizeof f->message, "Record %" PRId32 " in batch: ", i);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message + n, sizeof f->message - (size_t)n, fmt, ap);
    va_end(ap);
    return KP_E_MALFORMED;
}

/* Record i did not read: say why, from a cursor at its start holding at
 * least its length varint, and `more` bytes of records after the cursor's
 * end (error path only; kp_rec_read itself stays the one parser). */
static int framing_fault(kp_val_fault *f, kp_rd at, size_t more, int32_t i, int32_t count)
{
    if (kp_rd_left(&at) + more == 0)
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
    size_t left = kp_rd_left(&at) + more;
    if ((size_t)len > left)
        return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, i,
                     "length %" PRId32 " runs past the batch end (%zu bytes left)",
                     len, left);
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

static int count_fault(kp_val_fault *f, int32_t count, size_t bytes)
{
    return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, -1,
                 "RecordsCount %" PRId32 " cannot fit in %zu bytes of records", count, bytes);
}

static int trailing_fault(kp_val_fault *f, size_t bytes, int32_t count)
{
    return fault(f, KP_E_MALFORMED, KP_CORRUPT_MESSAGE, -1,
                 "%zu bytes after the last of RecordsCount %" PRId32 " records",
                 bytes, count);
}

/* Read with BaseOffset 0 and CreateTime, so Offset is the OffsetDelta and
 * Timestamp the record's own. */
static kp_batch header_for_rules(const kp_batch *b)
{
    kp_batch hb = *b;
    hb.BaseOffset = 0;
    hb.Attributes &= (int16_t)~KP_ATTR_LOG_APPEND_TIME;
    return hb;
}

/* The rules on a well-framed record i; inlined, as it runs per record on
 * the produce path. */
static inline __attribute__((always_inline))
int check_record(const kp_record *rec, int32_t i, const kp_val_rules *rules, kp_val_fault *f,
                 int64_t *max_ts, bool whole)
{
    if (rec->Offset != i)
        return fault(f, KP_E_MALFORMED, KP_INVALID_RECORD, i,
                     "OffsetDelta %" PRId64 ", expected %" PRId32
                     " (deltas run 0..RecordsCount-1 in order)", rec->Offset, i);
    if (rules->key_required && rec->Key.len < 0)
        return fault(f, KP_E_MALFORMED, KP_INVALID_RECORD, i,
                     "Compacted topic cannot accept message without key");
    if (!kp_val_timestamp_ok(rules, rec->Timestamp))
        return fault(f, KP_E_MALFORMED, KP_INVALID_TIMESTAMP, i,
                     "timestamp %" PRId64 " is out of range of the broker's "
                     "clock %" PRId64 " (message.timestamp.before.max.ms %" PRId64
                     ", after.max.ms %" PRId64 ")", rec->Timestamp, rules->now_ms,
                     rules->before_max_ms, rules->after_max_ms);
    if (rules->on_record) {
        int rc = rules->on_record(rules->arg, i, rec, whole, f);
        if (rc)
            return rc;
    }
    if (rec->Timestamp > *max_ts)
        *max_ts = rec->Timestamp;
    return 0;
}

/* Uncompressed: the records in place. */
static int walk(kp_rd *rd, const kp_batch *b, const kp_val_rules *rules,
                kp_val_fault *f, int64_t *max_ts)
{
    int32_t count = b->RecordsCount;
    if ((uint64_t)count > kp_rd_left(rd) / KP_REC_MIN_SIZE)
        return count_fault(f, count, kp_rd_left(rd));
    kp_batch hb = header_for_rules(b);
    for (int32_t i = 0; i < count; i++) {
        kp_rd at = *rd;
        kp_record rec;
        if (kp_rec_read(rd, &hb, &rec) != 1)
            return framing_fault(f, at, 0, i, count);
        int rc = check_record(&rec, i, rules, f, max_ts, true);
        if (rc)
            return rc;
    }
    if (kp_rd_left(rd) != 0)
        return trailing_fault(f, kp_rd_left(rd), count);
    return 0;
}

/* ---- compressed: the records streamed through the window ---------------- */

/* Stream offset of win[head]. */
static size_t stream_at(const kp_validator *v)
{
    return v->ds.produced - (v->tail - v->head);
}

/* At least need (<= win_cap) unread bytes in the window, or all the stream
 * has left.  0 or the decoder's KP_E_*. */
static int fill(kp_validator *v, size_t need)
{
    if (v->tail - v->head >= need)
        return 0;
    if (v->head) {                      /* a cut record to the window's start */
        memmove(v->win, v->win + v->head, v->tail - v->head);
        v->tail -= v->head;
        v->head = 0;
    }
    while (v->tail < need && !v->ds.done) {
        size_t got;
        int rc = kp_dstream_read(&v->ds, v->win + v->tail, v->win_cap - v->tail, &got);
        if (rc < 0)
            return rc;
        v->tail += got;
    }
    return 0;
}

static inline kp_rd window(const kp_validator *v)
{
    return (kp_rd){ v->win + v->head, v->win + v->tail, 0 };
}

/* big_record's steps, *left counting down the record's body.  Each returns
 * 0, KP_E_MALFORMED (framing), or the decoder's KP_E_*. */
static int big_varint(kp_validator *v, size_t *left, bool is_long, int64_t *out)
{
    int rc = fill(v, 10);
    if (rc)
        return rc;
    size_t avail = v->tail - v->head;
    kp_rd r;
    kp_rd_init(&r, v->win + v->head, avail < *left ? avail : *left);
    *out = is_long ? kp_rd_varlong(&r) : kp_rd_varint(&r);
    if (!kp_rd_ok(&r))
        return KP_E_MALFORMED;
    size_t used = (size_t)(r.p - (v->win + v->head));
    v->head += used;
    *left -= used;
    return 0;
}

static int big_skip(kp_validator *v, size_t *left, size_t n)
{
    if (n > *left)
        return KP_E_MALFORMED;
    *left -= n;
    for (;;) {
        size_t take = v->tail - v->head < n ? v->tail - v->head : n;
        v->head += take;
        n -= take;
        if (n == 0)
            return 0;
        if (v->ds.done)
            return KP_E_MALFORMED;      /* the stream ends inside the record */
        v->head = v->tail = 0;
        size_t got;
        int rc = kp_dstream_read(&v->ds, v->win, v->win_cap, &got);
        if (rc < 0)
            return rc;
        v->tail = got;
    }
}

/* VARINT length + bytes skipped; -1 is null when allowed (rd_varbytes). */
static int big_bytes(kp_validator *v, size_t *left, bool nullable, int32_t *len)
{
    int64_t n;
    int rc = big_varint(v, left, false, &n);
    if (rc)
        return rc;
    *len = (int32_t)n;
    if (n < 0)
        return n == -1 && nullable ? 0 : KP_E_MALFORMED;
    return big_skip(v, left, (size_t)n);
}

/* big_bytes for a nullable key or value, its first KP_VAL_HEAD bytes kept
 * in head and shown in *out (on_record's view of a long record). */
static int big_bytes_head(kp_validator *v, size_t *left, uint8_t *head, kp_str *out)
{
    int64_t n;
    int rc = big_varint(v, left, false, &n);
    if (rc)
        return rc;
    *out = (kp_str){ NULL, -1 };
    if (n < 0)
        return n == -1 ? 0 : KP_E_MALFORMED;
    size_t h = (uint64_t)n < KP_VAL_HEAD ? (size_t)n : KP_VAL_HEAD;
    if (h > *left)
        return KP_E_MALFORMED;
    if ((rc = fill(v, h)))
        return rc;
    size_t got = v->tail - v->head < h ? v->tail - v->head : h;
    memcpy(head, v->win + v->head, got);
    *out = (kp_str){ (const char *)head, (int32_t)got };
    return big_skip(v, left, (size_t)n);
}

/* A record whose body (body bytes, win[head] on) is longer than the
 * window: kp_rec_read's rules, field by field as the stream goes by. */
static int big_record(kp_validator *v, size_t body, const kp_batch *hb, kp_record *rec)
{
    size_t left = body;
    int64_t ts, off, hc;
    int32_t hk, hv;
    int rc;
    if ((rc = big_skip(v, &left, 1)) || (rc = big_varint(v, &left, true, &ts)) ||
        (rc = big_varint(v, &left, false, &off)) ||
        (rc = big_bytes_head(v, &left, v->key_head, &rec->Key)) ||
        (rc = big_bytes_head(v, &left, v->value_head, &rec->Value)) ||
        (rc = big_varint(v, &left, false, &hc)))
        return rc;
    if (hc < 0 || (uint64_t)hc > left / 2)
        return KP_E_MALFORMED;
    for (int64_t h = 0; h < hc; h++)
        if ((rc = big_bytes(v, &left, false, &hk)) || (rc = big_bytes(v, &left, true, &hv)))
            return rc;
    if (left != 0)
        return KP_E_MALFORMED;          /* record longer than its fields */
    rec->Timestamp = (int64_t)((uint64_t)hb->BaseTimestamp + (uint64_t)ts);
    rec->Offset = (int64_t)((uint64_t)hb->BaseOffset + (uint64_t)(int64_t)(int32_t)off);
    return 0;
}

/* One record from the window (refilled as needed): 0, or a framing fault
 * (KP_E_MALFORMED, *f filled; total: the stream's size when known, for
 * the message), or the decoder's KP_E_*. */
static int stream_record(kp_validator *v, const kp_batch *hb, kp_record *rec,
                         int32_t i, int32_t count, size_t total, kp_val_fault *f, bool *whole)
{
    int rc;
    *whole = true;
    if (v->tail - v->head < 10 && (rc = fill(v, 10)))
        return rc;
    kp_rd rd = window(v);
    if (kp_rec_read(&rd, hb, rec) == 1) {           /* the common case */
        v->head = (size_t)(rd.p - v->win);
        return 0;
    }
    /* Not whole in the window: cut by its end, longer than it, or bad. */
    size_t start = stream_at(v);
    kp_rd at = window(v);
    int32_t len = kp_rd_varint(&at);
    size_t vlen = (size_t)(at.p - (v->win + v->head));
    if (!kp_rd_ok(&at) || len < 0 || v->ds.done || vlen + (size_t)len <= v->tail - v->head)
        goto framing;                   /* it was all there, or all there is */
    if (vlen + (size_t)len <= v->win_cap) {
        if ((rc = fill(v, vlen + (size_t)len)))
            return rc;
        rd = window(v);
        if (kp_rec_read(&rd, hb, rec) != 1)
            goto framing;
        v->head = (size_t)(rd.p - v->win);
        return 0;
    }
    uint8_t lenbytes[5];                /* for the message, if it fails */
    memcpy(lenbytes, v->win + v->head, vlen);
    v->head += vlen;
    *whole = false;
    rc = big_record(v, (size_t)len, hb, rec);
    if (rc != KP_E_MALFORMED)
        return rc;
    kp_rd_init(&at, lenbytes, vlen);
    return framing_fault(f, at, total - start - vlen, i, count);
framing:
    at = window(v);
    return framing_fault(f, at, total - stream_at(v) - kp_rd_left(&at), i, count);
}

/* The stream's records (a fresh start of it in v->ds).  0, a fault
 * (KP_E_MALFORMED, *f filled), or the decoder's KP_E_*. */
static int stream_walk(kp_validator *v, const kp_batch *b, const kp_val_rules *rules,
                       size_t total, kp_val_fault *f)
{
    kp_batch hb = header_for_rules(b);
    int32_t count = b->RecordsCount;
    v->head = v->tail = 0;
    for (int32_t i = 0; i < count; i++) {
        kp_record rec;
        bool whole;
        int rc = stream_record(v, &hb, &rec, i, count, total, f, &whole);
        if (rc == 0)
            rc = check_record(&rec, i, rules, f, &v->max_timestamp, whole);
        if (rc)
            return rc;
    }
    int rc = fill(v, 1);
    if (rc)
        return rc;
    if (v->tail != v->head)
        return trailing_fault(f, total - stream_at(v), count);
    return 0;
}

/* The stream decoded to its end, discarded: its size, or its fault. */
static int stream_size(kp_validator *v, const uint8_t *recs, size_t n, int codec,
                       size_t *total)
{
    int rc = kp_dstream_start(&v->ds, &v->codec, codec, recs, n, KP_REC_PLAIN_MAX);
    while (rc == 0 && !v->ds.done) {
        size_t got;
        rc = kp_dstream_read(&v->ds, v->win, v->win_cap, &got);
    }
    *total = v->ds.produced;
    return rc;
}

static int validate_stream(kp_validator *v, const uint8_t *recs, size_t n, int codec,
                           const kp_batch *b, const kp_val_rules *rules, kp_val_fault *f)
{
    if (!v->win && !(v->win = malloc(v->win_cap)))
        return KP_E_NOMEM;
    int rc = kp_dstream_start(&v->ds, &v->codec, codec, recs, n, KP_REC_PLAIN_MAX);
    if (rc == 0)
        rc = stream_walk(v, b, rules, SIZE_MAX, f);
    if (rc != KP_E_MALFORMED)
        return rc;                      /* accepted, or a codec fault */
    /* V5: what a whole decompression would have said first. */
    size_t total;
    if ((rc = stream_size(v, recs, n, codec, &total)))
        return rc;
    if ((uint64_t)b->RecordsCount > total / KP_REC_MIN_SIZE)
        return count_fault(f, b->RecordsCount, total);
    if (f->error != KP_CORRUPT_MESSAGE)
        return KP_E_MALFORMED;          /* its message does not count bytes */
    rc = kp_dstream_start(&v->ds, &v->codec, codec, recs, n, KP_REC_PLAIN_MAX);
    return rc ? rc : stream_walk(v, b, rules, total, f);
}

int kp_batch_validate_records(kp_validator *v, const uint8_t *p, size_t size,
                              const kp_batch *b, const kp_val_rules *rules,
                              kp_val_fault *f)
{
    int codec = b->Attributes & KP_ATTR_CODEC_MASK;
    const uint8_t *recs = p + KP_BATCH_HEADER_SIZE;
    size_t n = size - KP_BATCH_HEADER_SIZE;
    v->max_timestamp = -1;
    if (codec == KP_CODEC_NONE) {
        kp_rd rd;
        kp_rd_init(&rd, recs, n);
        return walk(&rd, b, rules, f, &v->max_timestamp);
    }
    int rc = validate_stream(v, recs, n, codec, b, rules, f);
    if (rc == KP_E_NOMEM)
        rc = fault(f, rc, KP_CORRUPT_MESSAGE, -1, "no memory to decompress %s records",
                   codec_name(codec));
    else if (rc < 0 && rc != KP_E_MALFORMED)
        rc = fault(f, rc, KP_CORRUPT_MESSAGE, -1,
                   "%s records do not decompress (corrupt, cut short, or over %zu MiB)",
                   codec_name(codec), KP_REC_PLAIN_MAX >> 20);
    if (v->codec.snappy.cap > KEEP_MAX) {           /* V3 */
        kp_buf_free(&v->codec.snappy);
        kp_buf_init(&v->codec.snappy);
    }
    return rc;
}
