/*
 * libFuzzer target: a request frame body — header (v0/v1/v2 by API table),
 * then a generic walk of every primitive the body decoders use, driven by
 * the input itself.  Build like fuzz_kp_batch.c (see there).
 */
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy so the sanitizer sees any read past the end. */
    uint8_t *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    kp_rd r;
    kp_req_hdr h;
    kp_rd_init(&r, p, size);
    if (kp_req_hdr_read(&r, &h) == 0) {
        volatile size_t sink = 0;
        (void)sink;
        bool flex = h.flexible;
        uint8_t id[16];
        while (kp_rd_ok(&r) && kp_rd_left(&r) > 0) {
            uint8_t op = (uint8_t)kp_rd_i8(&r);
            kp_str s;
            switch (op % 12) {
            case 0: s = kp_rd_str_v(&r, flex); if (s.len > 0) sink += (uint8_t)s.p[s.len - 1]; break;
            case 1: s = kp_rd_bytes_v(&r, flex); if (s.len > 0) sink += (uint8_t)s.p[s.len - 1]; break;
            case 2: sink += (size_t)kp_rd_array_v(&r, flex, 1 + op / 12); break;
            case 3: kp_rd_tags(&r); break;
            case 4: sink += (size_t)kp_rd_varlong(&r); break;
            case 5: sink += (size_t)kp_rd_varint(&r); break;
            case 6: sink += kp_rd_uvarint(&r); break;
            case 7: sink += (size_t)kp_rd_i64(&r); break;
            case 8: kp_rd_uuid(&r, id); break;
            case 9: s = kp_rd_compact_string(&r); break;
            case 10: s = kp_rd_string(&r); (void)kp_str_eq(s, "x"); break;
            case 11: kp_rd_skip(&r, op / 12); break;
            }
        }
    }
    free(p);
    return 0;
}
