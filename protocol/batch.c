/*
 * batch.c — RecordBatch v2 framing: size, header decode, validation, and the
 * broker's in-place rewrites.
 *
 * The layout is drawn in kp.h.  What this file promises:
 *   1. Nothing reads past len: kp_batch_size needs 12 bytes, the rest needs
 *      the 61-byte header, validation needs the whole batch.
 *   2. Validation order is fixed so errors are stable: framing (TRUNCATED /
 *      MALFORMED) → Magic (KP_E_MAGIC; the CRC means nothing for other
 *      magics) → CRC-32C (KP_E_CRC) → codec bits (KP_E_CODEC) → counts
 *      (KP_E_MALFORMED).
 *   3. kp_batch_validate is the producer rule (RecordsCount >= 1,
 *      LastOffsetDelta == RecordsCount - 1); kp_batch_check_stored is the
 *      recovery rule, which accepts the gaps and empty batches that log
 *      compaction leaves (0 <= RecordsCount <= LastOffsetDelta + 1).
 *   4. BaseOffset and PartitionLeaderEpoch lie outside the CRC: rewriting
 *      them costs 12 byte stores.  LogAppendTime changes Attributes and
 *      MaxTimestamp, inside the CRC, so it costs one CRC pass.
 * Cost of validation: one CRC pass over the batch, no allocation.
 */
#include <string.h>

#include "protocol/kp.h"

static uint64_t get_be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

int64_t kp_batch_size(const uint8_t *p, size_t len)
{
    if (len < KP_BATCH_LOG_OVERHEAD)
        return KP_E_TRUNCATED;
    int32_t BatchLength = (int32_t)get_be(p + KP_BATCH_OFF_BatchLength, 4);
    if (BatchLength < KP_BATCH_HEADER_SIZE - KP_BATCH_LOG_OVERHEAD)
        return KP_E_MALFORMED;
    return (int64_t)KP_BATCH_LOG_OVERHEAD + BatchLength;
}

int kp_batch_header(const uint8_t *p, size_t len, kp_batch *b)
{
    int64_t size = kp_batch_size(p, len);
    if (size < 0)
        return (int)size;
    if (len < KP_BATCH_HEADER_SIZE)
        return KP_E_TRUNCATED;
    b->BaseOffset = (int64_t)get_be(p + KP_BATCH_OFF_BaseOffset, 8);
    b->BatchLength = (int32_t)get_be(p + KP_BATCH_OFF_BatchLength, 4);
    b->PartitionLeaderEpoch = (int32_t)get_be(p + KP_BATCH_OFF_PartitionLeaderEpoch, 4);
    b->Magic = (int8_t)p[KP_BATCH_OFF_Magic];
    b->Crc = (uint32_t)get_be(p + KP_BATCH_OFF_Crc, 4);
    b->Attributes = (int16_t)get_be(p + KP_BATCH_OFF_Attributes, 2);
    b->LastOffsetDelta = (int32_t)get_be(p + KP_BATCH_OFF_LastOffsetDelta, 4);
    b->BaseTimestamp = (int64_t)get_be(p + KP_BATCH_OFF_BaseTimestamp, 8);
    b->MaxTimestamp = (int64_t)get_be(p + KP_BATCH_OFF_MaxTimestamp, 8);
    b->ProducerId = (int64_t)get_be(p + KP_BATCH_OFF_ProducerId, 8);
    b->ProducerEpoch = (int16_t)get_be(p + KP_BATCH_OFF_ProducerEpoch, 2);
    b->BaseSequence = (int32_t)get_be(p + KP_BATCH_OFF_BaseSequence, 4);
    b->RecordsCount = (int32_t)get_be(p + KP_BATCH_OFF_RecordsCount, 4);
    return 0;
}

/* Framing, magic, CRC and codec, then the count rule (invariant 3): the
 * producer's, or with stored the recovery rule's.  b may be NULL. */
static int64_t check(const uint8_t *p, size_t len, kp_batch *b, bool stored)
{
    kp_batch tmp;
    if (!b)
        b = &tmp;
    int64_t size = kp_batch_size(p, len);
    if (size < 0)
        return size;
    if ((uint64_t)size > len)
        return KP_E_TRUNCATED;
    int rc = kp_batch_header(p, len, b);
    if (rc < 0)
        return rc;
    if (b->Magic != KP_BATCH_MAGIC)
        return KP_E_MAGIC;
    if (kp_crc32c(0, p + KP_BATCH_CRC_START, (size_t)size - KP_BATCH_CRC_START) != b->Crc)
        return KP_E_CRC;
    if ((b->Attributes & KP_ATTR_CODEC_MASK) > KP_CODEC_ZSTD)
        return KP_E_CODEC;
    bool counts_ok = stored ? b->RecordsCount >= 0 && b->LastOffsetDelta >= 0 &&
                              (int64_t)b->RecordsCount <= (int64_t)b->LastOffsetDelta + 1
                            : b->RecordsCount >= 1 && b->LastOffsetDelta == b->RecordsCount - 1;
    return counts_ok ? size : KP_E_MALFORMED;
}

int64_t kp_batch_validate(const uint8_t *p, size_t len, kp_batch *b)
{
    return check(p, len, b, false);
}

int64_t kp_batch_check_stored(const uint8_t *p, size_t len, kp_batch *b)
{
    return check(p, len, b, true);
}

void kp_batch_set_base_offset(uint8_t *p, int64_t base_offset)
{
    put_be(p + KP_BATCH_OFF_BaseOffset, (uint64_t)base_offset, 8);
}

void kp_batch_set_leader_epoch(uint8_t *p, int32_t epoch)
{
    put_be(p + KP_BATCH_OFF_PartitionLeaderEpoch, (uint32_t)epoch, 4);
}

/* The caller owns a whole, validated batch at p (BatchLength is trusted).
 * Sets the timestamp type and MaxTimestamp, then the CRC (a pass over the
 * batch): what Kafka's LogValidator does with setMaxTimestamp. */
void kp_batch_set_max_timestamp(uint8_t *p, bool log_append_time, int64_t ts)
{
    uint16_t attrs = (uint16_t)get_be(p + KP_BATCH_OFF_Attributes, 2);
    attrs = log_append_time ? attrs | KP_ATTR_LOG_APPEND_TIME
                            : attrs & (uint16_t)~KP_ATTR_LOG_APPEND_TIME;
    put_be(p + KP_BATCH_OFF_Attributes, attrs, 2);
    put_be(p + KP_BATCH_OFF_MaxTimestamp, (uint64_t)ts, 8);
    size_t size = KP_BATCH_LOG_OVERHEAD + (uint32_t)get_be(p + KP_BATCH_OFF_BatchLength, 4);
    uint32_t crc = kp_crc32c(0, p + KP_BATCH_CRC_START, size - KP_BATCH_CRC_START);
    put_be(p + KP_BATCH_OFF_Crc, crc, 4);
}

void kp_batch_set_log_append_time(uint8_t *p, int64_t now_ms)
{
    kp_batch_set_max_timestamp(p, true, now_ms);
}
