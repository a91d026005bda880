/*
 * murmur2.c — Java's org.apache.kafka.common.utils.Utils.murmur2, so that
 * keys map to partitions exactly as the Java client and kafka-python do:
 * partition = (kp_murmur2(k, n) & 0x7fffffff) % partitions.
 * Words are read little-endian byte by byte (no alignment assumption); all
 * arithmetic is unsigned so overflow is defined.
 */
#include "protocol/kp.h"

int32_t kp_murmur2(const void *key, size_t len)
{
    const uint8_t *d = key;
    const uint32_t seed = 0x9747b28cu, m = 0x5bd1e995u;
    const int r = 24;
    uint32_t h = seed ^ (uint32_t)len;     /* Java: int length */
    size_t n4 = len / 4;

    for (size_t i = 0; i < n4; i++) {
        const uint8_t *q = d + 4 * i;
        uint32_t k = (uint32_t)q[0] | (uint32_t)q[1] << 8 |
                     (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        k *= m;
        k ^= k >> r;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *t = d + 4 * n4;
    switch (len & 3) {
    case 3: h ^= (uint32_t)t[2] << 16; /* fall through */
    case 2: h ^= (uint32_t)t[1] << 8;  /* fall through */
    case 1: h ^= t[0];
            h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}
