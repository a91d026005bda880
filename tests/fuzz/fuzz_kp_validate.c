/*
 * libFuzzer target: record validation (protocol/validate.c).  Asserts its
 * promise V1 — acceptance implies readability: whatever
 * kp_batch_validate + kp_batch_validate_records accept, the consumer-side
 * iterator (kp_rec_iter, headers included) reads to the end with exactly
 * RecordsCount records and no error.  Anything else aborts.
 *
 * Input: a control byte, then either
 *   bit 0 clear: a RecordBatch (its CRC is fixed up so the fuzzer gets past
 *                the checksum to the records), or
 *   bit 0 set:   a count byte and a records area, which the harness
 *                compresses with codec (control >> 1) % 5 and wraps in a
 *                header with that count, so fuzzed records reach the
 *                validator inside well-formed gzip/snappy/lz4/zstd streams.
 *   bit 4 / 5:   key_required / check_timestamps.
 * One validator serves every input (as in the broker), so state leaking
 * from one input into the next would show.  A second one streams through
 * a 16-byte window (every record longer than that read field by field,
 * every record cut by the window's end): its verdict and message must be
 * the first one's, or the streaming (validate.c) is wrong.  Built and run by `make fuzz`;
 * seeds in tests/fuzz/corpus/fuzz_kp_validate/.
 */
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);  p[3] = (uint8_t)v;
}

/* Input → one batch in out (CRC valid when its length allows). */
static void make_batch(const uint8_t *data, size_t size, kp_buf *out)
{
    uint8_t ctl = data[0];
    if (!(ctl & 1)) {
        kp_wr_raw(out, data + 1, size - 1);
    } else if (size >= 2) {
        int codec = (ctl >> 1) % 5;
        uint8_t hdr[KP_BATCH_HEADER_SIZE];
        memset(hdr, 0, sizeof hdr);
        hdr[16] = 2;                                        /* Magic */
        hdr[22] = (uint8_t)codec;
        put32(hdr + 23, (uint32_t)data[1] - 1);             /* LastOffsetDelta */
        memset(hdr + 43, 0xff, 14);                         /* no producer */
        put32(hdr + 57, data[1]);                           /* RecordsCount */
        kp_wr_raw(out, hdr, sizeof hdr);
        if (kp_compress(codec, data + 2, size - 2, out) < 0)
            return;
        if (out->err)
            return;
        put32(out->data + 8, (uint32_t)(out->len - KP_BATCH_LOG_OVERHEAD));
    }
    int64_t whole = kp_batch_size(out->data, out->len);
    if (whole >= KP_BATCH_HEADER_SIZE && (uint64_t)whole <= out->len) {
        uint8_t *p = out->data;
        put32(p + 17, kp_crc32c(0, p + KP_BATCH_CRC_START, (size_t)whole - KP_BATCH_CRC_START));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kp_validator v, tiny;
    static bool ready;
    if (!ready) {
        kp_validator_init(&v);
        kp_validator_init(&tiny);
        kp_validator_set_window(&tiny, 16);
        ready = true;
    }
    if (size < 1)
        return 0;
    kp_buf in;
    kp_buf_init(&in);
    make_batch(data, size, &in);

    kp_batch b;
    int64_t len = in.data ? kp_batch_validate(in.data, in.len, &b) : -1;
    if (len > 0) {
        kp_val_rules rules = {
            .key_required = data[0] & 0x10,
            .check_timestamps = data[0] & 0x20,
            .now_ms = 1700000000000LL,
            .before_max_ms = 3600000,
            .after_max_ms = 3600000,
        };
        kp_val_fault f;
        int rc = kp_batch_validate_records(&v, in.data, (size_t)len, &b, &rules, &f);
        kp_val_fault tf;
        if (kp_batch_validate_records(&tiny, in.data, (size_t)len, &b, &rules, &tf) != rc ||
            (rc != 0 && (tf.error != f.error || tf.record != f.record ||
                         strcmp(tf.message, f.message) != 0)))
            abort();                             /* the window changed a verdict */
        if (rc == 0) {
            kp_rec_iter it;
            kp_record rec;
            kp_header h;
            kp_rec_iter_init0(&it);
            if (kp_rec_iter_start(&it, in.data, (size_t)len) != 0)
                abort();
            int32_t n = 0;
            int r;
            while ((r = kp_rec_iter_next(&it, &rec)) == 1) {
                if (rec.Offset != (int64_t)((uint64_t)b.BaseOffset + (uint64_t)n))  /* wraps as the iterator does */
                    abort();
                if (rules.key_required && rec.Key.len < 0)
                    abort();
                while ((r = kp_header_next(&rec, &h)) == 1)
                    ;
                if (r != 0)
                    abort();
                n++;
            }
            if (r != 0 || n != b.RecordsCount)
                abort();
            kp_rec_iter_free(&it);
        } else if (f.message[0] == '\0' || (f.error != KP_CORRUPT_MESSAGE &&
                   f.error != KP_INVALID_RECORD && f.error != KP_INVALID_TIMESTAMP)) {
            abort();                             /* every refusal says why */
        }
    }
    kp_buf_free(&in);
    return 0;
}
