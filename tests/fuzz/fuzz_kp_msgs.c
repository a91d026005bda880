/*
 * libFuzzer target: the generated message codec (kp_msgs.h).  The input is
 * decoded as every message (requests, responses, headers) at every valid
 * version; whatever decodes is encoded again, and that encoding must decode
 * and re-encode to the same bytes (a fixed point: the first round may drop
 * unknown tags or normalise booleans, later rounds may not change a byte).
 * Any crash, sanitizer report, leak, or a codec that refuses to encode what
 * it decoded, is a finding.  Build like fuzz_kp_batch.c (see the Makefile).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kp_msgs.h"
#include "protocol/kp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fixed_point(const kp_msg_desc *d, int16_t v, const void *m,
                              void *scratch, kp_arena *a)
{
    kp_buf e1, e2;
    kp_buf_init(&e1);
    kp_buf_init(&e2);
    if (d->enc(&e1, v, m) != 0) {
        fprintf(stderr, "%s v%d: decoded but does not encode (%d)\n", d->name, v, e1.err);
        abort();
    }
    kp_arena a2;
    kp_arena_init(&a2, 0);
    kp_rd r;
    kp_rd_init(&r, e1.data, e1.len);
    if (d->dec(&r, v, scratch, &a2) != 0 || kp_rd_left(&r) != 0) {
        fprintf(stderr, "%s v%d: own encoding does not decode (%d)\n", d->name, v, r.err);
        abort();
    }
    if (d->enc(&e2, v, scratch) != 0 || e1.len != e2.len
        || (e1.len && memcmp(e1.data, e2.data, e1.len) != 0)) {
        fprintf(stderr, "%s v%d: re-encoding changed the bytes\n", d->name, v);
        abort();
    }
    kp_arena_free(&a2);
    kp_buf_free(&e1);
    kp_buf_free(&e2);
    (void)a;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* An exact-size copy so the sanitizer sees any read past the end. */
    uint8_t *p = malloc(size ? size : 1);
    memcpy(p, data, size);
    kp_arena a;
    kp_arena_init(&a, (size_t)16 << 20);
    for (size_t i = 0; i < kp_msg_descs_count; i++) {
        const kp_msg_desc *d = &kp_msg_descs[i];
        void *m = malloc(d->size), *scratch = malloc(d->size);
        for (int16_t v = d->min_version; v <= d->max_version; v++) {
            kp_rd r;
            kp_rd_init(&r, p, size);
            if (d->dec(&r, v, m, &a) == 0)
                check_fixed_point(d, v, m, scratch, &a);
            kp_arena_reset(&a);
        }
        free(m);
        free(scratch);
    }
    kp_arena_free(&a);
    free(p);
    return 0;
}
