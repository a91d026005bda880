/*
 * libFuzzer target: one RecordBatch v2 through everything that may see
 * hostile bytes — size, header, both validation rules, the record iterator
 * (decompressing) and header iteration — plus every codec's decoder on the
 * raw input, and the old formats (protocol/legacy.c): the input as a magic
 * 0/1 message set up-converted, the CRC-fixed batch down-converted.  Not built by the Makefile (needs clang); build and run:
 *
 *   clang -g -O1 -std=gnu11 -D_GNU_SOURCE -I. \
 *       -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_kp_batch.c \
 *       $(find protocol -name '*.c') $(pkg-config --libs libzstd zlib liblz4 snappy) \
 *       -o /tmp/fuzz_kp_batch
 *   /tmp/fuzz_kp_batch -max_total_time=60 -rss_limit_mb=1024
 */
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    kp_batch b;
    (void)kp_batch_size(data, size);
    (void)kp_batch_header(data, size, &b);
    (void)kp_batch_validate(data, size, &b);
    (void)kp_batch_check_stored(data, size, &b);

    /* Records: the CRC is fixed up in a copy so the fuzzer reaches the
     * record parser instead of stopping at the checksum. */
    uint8_t *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    int64_t whole = kp_batch_size(p, size);
    if (whole >= KP_BATCH_HEADER_SIZE && (uint64_t)whole <= size) {
        uint32_t c = kp_crc32c(0, p + KP_BATCH_CRC_START, (size_t)whole - KP_BATCH_CRC_START);
        p[17] = (uint8_t)(c >> 24); p[18] = (uint8_t)(c >> 16);
        p[19] = (uint8_t)(c >> 8);  p[20] = (uint8_t)c;
        (void)kp_batch_check_stored(p, size, &b);
        kp_batch_set_log_append_time(p, 1);
    }
    kp_rec_iter it;
    kp_record rec;
    kp_header h;
    kp_rec_iter_init0(&it);
    if (kp_rec_iter_start(&it, p, size) == 0) {
        volatile size_t sink = 0;
        (void)sink;
        while (kp_rec_iter_next(&it, &rec) == 1) {
            if (rec.Key.len > 0)
                sink += (uint8_t)rec.Key.p[rec.Key.len - 1];
            if (rec.Value.len > 0)
                sink += (uint8_t)rec.Value.p[rec.Value.len - 1];
            while (kp_header_next(&rec, &h) == 1)
                if (h.Value.len > 0)
                    sink += (uint8_t)h.Value.p[h.Value.len - 1];
        }
    }
    kp_buf out;
    kp_buf_init(&out);
    for (int magic = 0; magic <= 1; magic++) {
        kp_buf_reset(&out);
        (void)kp_batch_to_legacy(p, size, magic, 0, &it, &out);
    }
    int32_t count;
    kp_buf_reset(&out);
    (void)kp_legacy_to_batch(data, size, &out, 1 << 20, &count);
    kp_rec_iter_free(&it);
    free(p);

    for (int codec = KP_CODEC_GZIP; codec <= KP_CODEC_ZSTD; codec++) {
        kp_buf_reset(&out);
        (void)kp_decompress(codec, data, size, &out, 1 << 20);
    }
    kp_buf_free(&out);
    return 0;
}
