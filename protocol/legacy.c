/*
 * legacy.c — the old message formats (magic 0 and 1) that Produce v0–v2 and
 * Fetch v0–v3 carry, converted to and from RecordBatch v2, the only
 * format Sluice stores (protocol/README.md §5).
 *
 * A message set is a run of entries, each
 *
 *   offset size field
 *        0    8 Offset          producer: any (magic 0) / 0..n-1 (magic 1
 *                               inner messages); broker: the absolute offset
 *        8    4 MessageSize     bytes after this field
 *       12    4 Crc             zlib CRC-32 of bytes 16 .. end of message
 *       16    1 Magic           0 or 1
 *       17    1 Attributes      bits 0-2 codec (0 none, 1 gzip, 2 snappy,
 *                               3 lz4); bit 3 LogAppendTime (magic 1)
 *       18    8 Timestamp       magic 1 only
 *        .    4 Key length      -1: null, then the key
 *        .    4 Value length    -1: null, then the value
 *
 * A compressed message (a "wrapper") holds in its value a whole message set
 * compressed with its codec; the inner messages are uncompressed (Kafka
 * never nests deeper).  Magic 1 inner offsets are relative (0..n-1) and a
 * LogAppendTime wrapper's timestamp stands for all of its inner messages.
 *
 * Promises:
 *   1. Up-conversion (kp_legacy_to_batch) writes ONE batch v2 for the
 *      whole set, offset deltas 0..n-1 in message order, no producer id,
 *      compressed with the codec of the first wrapper met (none if there
 *      is none), as Kafka's LogValidator keeps the producer's codec.
 *      Timestamps: magic 1 messages keep theirs (inner ones take a
 *      LogAppendTime wrapper's); magic 0 messages have none and get -1
 *      (NO_TIMESTAMP), as Kafka writes them.  Every CRC is checked
 *      (KP_E_CRC); a magic other than 0/1 is KP_E_MAGIC; a nested wrapper
 *      or a truncated entry is KP_E_MALFORMED.  A trailing partial entry
 *      is an error, not ignored: producers never send one.
 *   2. Down-conversion (kp_batch_to_legacy) writes one uncompressed
 *      message per record whose offset is >= from, with its absolute
 *      offset; magic 1 carries the record's timestamp and the batch's
 *      timestamp type; headers are dropped (the old formats have none);
 *      control batches write nothing.  Uncompressed output is what every
 *      old client reads; re-compressing would cost the broker CPU for
 *      bytes that travel once.
 *   3. Neither function touches its input; out grows only by what they
 *      append (on failure out->len is restored).
 *   4. A magic 0 lz4 wrapper is read whatever its frame header checksum
 *      says: Kafka before 0.10 computed it over the wrong bytes (the magic
 *      number included, KAFKA-3160) and clients of that era (kafka-python's
 *      lz4_encode_old_kafka) still write it so; Kafka's broker ignores it
 *      for magic 0, and so does this (fix_lz4_hc puts the right one in a
 *      copy).
 */
#include <string.h>

#include <zlib.h>

#include "protocol/kp.h"

#define MSG_OVERHEAD 12                /* Offset + MessageSize */
#define MSG_MIN0     14                /* Crc Magic Attributes KeyLen ValueLen */
#define MSG_MIN1     22                /* ... + Timestamp */
#define LEGACY_ATTR_LOG_APPEND_TIME 0x08

/* One parsed message.  Key/Value point into the set. */
typedef struct legacy_msg {
    int8_t magic, attributes;
    int64_t offset, timestamp;
    kp_str key, value;
} legacy_msg;

/* Reads one entry at r: 1 with *m, 0 at the end, or KP_E_*. */
static int read_msg(kp_rd *r, legacy_msg *m)
{
    if (kp_rd_left(r) == 0)
        return 0;
    m->offset = kp_rd_i64(r);
    int32_t size = kp_rd_i32(r);
    if (!kp_rd_ok(r) || size < MSG_MIN0 || (size_t)size > kp_rd_left(r))
        return KP_E_MALFORMED;
    const uint8_t *body = kp_rd_raw(r, (size_t)size);
    kp_rd b;
    kp_rd_init(&b, body, (size_t)size);
    uint32_t crc = kp_rd_u32(&b);
    if ((uint32_t)crc32(0, body + 4, (uInt)(size - 4)) != crc)
        return KP_E_CRC;
    m->magic = kp_rd_i8(&b);
    m->attributes = kp_rd_i8(&b);
    if (m->magic != 0 && m->magic != 1)
        return KP_E_MAGIC;
    m->timestamp = m->magic == 1 ? kp_rd_i64(&b) : -1;
    m->key = kp_rd_bytes(&b);
    m->value = kp_rd_bytes(&b);
    if (!kp_rd_ok(&b) || kp_rd_left(&b) != 0)
        return KP_E_MALFORMED;
    return 1;
}

/* XXH32 (seed 0) of fewer than 16 bytes: all an lz4 frame descriptor needs. */
static uint32_t rotl32(uint32_t x, int r)
{
    return (x << r) | (x >> (32 - r));
}

static uint32_t xxh32_short(const uint8_t *p, size_t len)
{
    const uint32_t P1 = 2654435761u, P2 = 2246822519u, P3 = 3266489917u,
                   P4 = 668265263u, P5 = 374761393u;
    uint32_t h = P5 + (uint32_t)len;
    for (; len >= 4; p += 4, len -= 4) {
        uint32_t w = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                     (uint32_t)p[3] << 24;
        h = rotl32(h + w * P3, 17) * P4;
    }
    for (; len > 0; p++, len--)
        h = rotl32(h + *p * P5, 11) * P1;
    h ^= h >> 15;
    h *= P2;
    h ^= h >> 13;
    h *= P3;
    h ^= h >> 16;
    return h;
}

/* Promise 4: the lz4 frame at p with the header checksum it should have.
 * The frame descriptor is FLG, BD, [ContentSize 8 if FLG bit 3],
 * [DictID 4 if FLG bit 0], then HC = (XXH32(descriptor) >> 8) & 0xFF. */
void kp_lz4_fix_header_checksum(uint8_t *p, size_t len)
{
    if (len < 7 || p[0] != 0x04 || p[1] != 0x22 || p[2] != 0x4D || p[3] != 0x18)
        return;
    size_t dlen = 2 + ((p[4] & 0x08) ? 8 : 0) + ((p[4] & 0x01) ? 4 : 0);
    if (4 + dlen >= len)
        return;
    p[4 + dlen] = (uint8_t)(xxh32_short(p + 4, dlen) >> 8);
}

/* Adds the messages of one (uncompressed) set to the builder.  inner: the
 * set came out of a wrapper, whose timestamp (wrapper_ts >= 0 under
 * LogAppendTime) overrides. */
static int add_set(kp_batch_builder *bb, const uint8_t *p, size_t len, bool inner,
                   int64_t wrapper_ts, kp_buf *scratch, size_t max_out)
{
    kp_rd r;
    kp_rd_init(&r, p, len);
    legacy_msg m;
    int rc;
    while ((rc = read_msg(&r, &m)) == 1) {
        int codec = m.attributes & KP_ATTR_CODEC_MASK;
        if (codec != KP_CODEC_NONE) {
            if (inner || codec > KP_CODEC_LZ4 || m.value.len < 0)
                return KP_E_MALFORMED;
            if (bb->count == 0 && bb->codec == KP_CODEC_NONE)
                bb->codec = codec;
            size_t base = scratch->len;
            if (codec == KP_CODEC_LZ4 && m.magic == 0) {
                kp_buf fixed;
                kp_buf_init(&fixed);
                kp_wr_raw(&fixed, m.value.p, (size_t)m.value.len);
                if (fixed.err)
                    return KP_E_NOMEM;
                kp_lz4_fix_header_checksum(fixed.data, fixed.len);
                rc = kp_decompress(codec, fixed.data, fixed.len, scratch, max_out);
                kp_buf_free(&fixed);
            } else {
                rc = kp_decompress(codec, m.value.p, (size_t)m.value.len, scratch, max_out);
            }
            if (rc < 0)
                return rc;
            bool lat = m.magic == 1 && (m.attributes & LEGACY_ATTR_LOG_APPEND_TIME);
            /* scratch does not move while the inner set is read: nothing
             * else is appended to it until add_set returns. */
            rc = add_set(bb, scratch->data + base, scratch->len - base, true,
                         lat ? m.timestamp : -1, scratch, max_out);
            scratch->len = base;
            if (rc < 0)
                return rc;
            continue;
        }
        int64_t ts = inner && wrapper_ts >= 0 ? wrapper_ts : m.timestamp;
        kp_bb_add(bb, ts, m.key.len < 0 ? NULL : m.key.p, m.key.len,
                  m.value.len < 0 ? NULL : m.value.p, m.value.len, NULL, 0);
        if (bb->recs.len > max_out)       /* many small bombs make one big one */
            return KP_E_CODEC;
    }
    return rc;
}

int64_t kp_legacy_to_batch(const uint8_t *set, size_t len, kp_buf *out, size_t max_out,
                           int32_t *count)
{
    kp_batch_builder bb;
    kp_buf scratch;
    kp_buf_init(&scratch);
    kp_bb_init(&bb, out, KP_CODEC_NONE);
    int rc = add_set(&bb, set, len, false, -1, &scratch, max_out);
    kp_buf_free(&scratch);
    *count = bb.count;
    if (rc < 0) {
        kp_bb_free(&bb);
        return rc;
    }
    if (bb.count == 0) {
        kp_bb_free(&bb);
        return KP_E_MALFORMED;
    }
    return kp_bb_finish(&bb);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void wr_legacy_bytes(kp_buf *o, kp_str s)
{
    kp_wr_i32(o, s.len);
    if (s.len > 0)
        kp_wr_raw(o, s.p, (size_t)s.len);
}

int kp_batch_to_legacy(const uint8_t *batch, size_t len, int magic, int64_t from,
                       kp_rec_iter *it, kp_buf *out)
{
    size_t start = out->len;
    int rc = kp_rec_iter_start(it, batch, len);
    if (rc < 0)
        return rc;
    if (it->batch.Attributes & KP_ATTR_CONTROL)
        return 0;
    int8_t attrs = magic == 1 && (it->batch.Attributes & KP_ATTR_LOG_APPEND_TIME)
                       ? LEGACY_ATTR_LOG_APPEND_TIME : 0;
    kp_record rec;
    while ((rc = kp_rec_iter_next(it, &rec)) == 1) {
        if (rec.Offset < from)
            continue;
        kp_wr_i64(out, rec.Offset);
        size_t size_at = out->len;
        kp_wr_i32(out, 0);                       /* MessageSize, below */
        kp_wr_u32(out, 0);                       /* Crc, below */
        kp_wr_i8(out, (int8_t)magic);
        kp_wr_i8(out, attrs);
        if (magic == 1)
            kp_wr_i64(out, rec.Timestamp);
        wr_legacy_bytes(out, rec.Key);
        wr_legacy_bytes(out, rec.Value);
        if (out->err)
            break;
        uint8_t *m = out->data + size_at;
        size_t size = out->len - size_at - 4;
        put_be32(m, (uint32_t)size);
        put_be32(m + 4, (uint32_t)crc32(0, m + 8, (uInt)(size - 4)));
    }
    if (rc < 0 || out->err) {
        out->len = start;
        return rc < 0 ? rc : KP_E_NOMEM;
    }
    return 0;
}
