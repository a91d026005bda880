/*
 * crc32c.c — CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of RecordBatch v2 (bytes 21..end).
 *
 * Promises:
 *   1. kp_crc32c(kp_crc32c(0, a), b) == kp_crc32c(0, a||b): the value is
 *      pre- and post-inverted internally, so callers chain with 0 as seed.
 *   2. The hardware path and the table path return identical values for any
 *      buffer, length and alignment (tests compare them byte for byte).
 *   3. No alignment assumptions: words are loaded with memcpy.
 *
 * Dispatch: on x86-64 the SSE4.2 crc32 instruction (8 bytes a step) when the
 * CPU has it, decided once in a constructor.  The instruction has a
 * latency of 3 cycles but a throughput of 1, so long buffers are cut into
 * three streams computed side by side and joined with a "shift by N zero
 * bytes" operator (a GF(2) matrix turned into four 256-entry tables, as in
 * Mark Adler's crc32c.c): about three times one stream's speed, which
 * matters because every produced byte is checksummed on the loop thread; on ARMv8 built with the CRC
 * extension (__ARM_FEATURE_CRC32) the crc32c* instructions; elsewhere a
 * slicing-by-8 table walk (~1-2 GB/s, still far from the bottleneck).
 * Tables are built in the same constructor, before main(), so no thread can
 * observe them half-built.
 */
#include <string.h>

#include "protocol/kp.h"

#if defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

#define POLY 0x82F63B78u

static uint32_t tab[8][256];

static uint32_t sw_update(uint32_t c, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= c;
        c = tab[7][lo & 0xff] ^ tab[6][(lo >> 8) & 0xff] ^
            tab[5][(lo >> 16) & 0xff] ^ tab[4][lo >> 24] ^
            tab[3][hi & 0xff] ^ tab[2][(hi >> 8) & 0xff] ^
            tab[1][(hi >> 16) & 0xff] ^ tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        c = tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
#define HAVE_HW_DISPATCH 1

/* Stream lengths for the three-way split: LONG for big batches, SHORT for
 * the rest; both multiples of 8. */
#define LONG_LEN  8192
#define SHORT_LEN 256
static uint32_t zeros_long[4][256], zeros_short[4][256];

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1)
            sum ^= *mat;
    return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
    for (int n = 0; n < 32; n++)
        square[n] = gf2_times(mat, mat[n]);
}

/* Tables that advance a CRC over len zero bytes (len a power of two). */
static void zeros_tables(uint32_t zeros[4][256], size_t len)
{
    uint32_t even[32], odd[32];
    odd[0] = POLY;                       /* one zero bit */
    for (int n = 1; n < 32; n++)
        odd[n] = 1u << (n - 1);
    gf2_square(even, odd);               /* two zero bits */
    gf2_square(odd, even);               /* four zero bits */
    /* odd = four zero bits; square log2(len) + 1 times for len bytes. */
    const uint32_t *op = odd;
    for (size_t l = len; l > 0; l >>= 1) {
        if (op == odd) {
            gf2_square(even, odd);
            op = even;
        } else {
            gf2_square(odd, even);
            op = odd;
        }
    }
    for (uint32_t n = 0; n < 256; n++) {
        zeros[0][n] = gf2_times(op, n);
        zeros[1][n] = gf2_times(op, n << 8);
        zeros[2][n] = gf2_times(op, n << 16);
        zeros[3][n] = gf2_times(op, n << 24);
    }
}

static inline uint32_t shift(uint32_t zeros[4][256], uint32_t crc)
{
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^
           zeros[2][(crc >> 16) & 0xff] ^ zeros[3][crc >> 24];
}

__attribute__((target("sse4.2")))
static inline const uint8_t *three_way(uint64_t *c0, const uint8_t *p, size_t len,
                                       uint32_t zeros[4][256])
{
    uint64_t a = *c0, b = 0, c = 0;
    const uint8_t *end = p + len;
    while (p < end) {
        uint64_t w0, w1, w2;
        memcpy(&w0, p, 8);
        memcpy(&w1, p + len, 8);
        memcpy(&w2, p + 2 * len, 8);
        a = __builtin_ia32_crc32di(a, w0);
        b = __builtin_ia32_crc32di(b, w1);
        c = __builtin_ia32_crc32di(c, w2);
        p += 8;
    }
    a = shift(zeros, (uint32_t)a) ^ (uint32_t)b;
    a = shift(zeros, (uint32_t)a) ^ (uint32_t)c;
    *c0 = a;
    return p + 2 * len;
}

__attribute__((target("sse4.2")))
static uint32_t hw_update(uint32_t c, const uint8_t *p, size_t n)
{
    uint64_t c64 = c;
    while (n >= 3 * LONG_LEN) {
        p = three_way(&c64, p, LONG_LEN, zeros_long);
        n -= 3 * LONG_LEN;
    }
    while (n >= 3 * SHORT_LEN) {
        p = three_way(&c64, p, SHORT_LEN, zeros_short);
        n -= 3 * SHORT_LEN;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c64 = __builtin_ia32_crc32di(c64, w);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#elif defined(__ARM_FEATURE_CRC32)
static uint32_t hw_update(uint32_t c, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __crc32cd(c, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = __crc32cb(c, *p++);
    return c;
}
#endif

static uint32_t (*update)(uint32_t, const uint8_t *, size_t) = sw_update;

__attribute__((constructor))
static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (POLY & (0u - (c & 1)));
        tab[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++)
            tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xff];
#if defined(HAVE_HW_DISPATCH)
    zeros_tables(zeros_long, LONG_LEN);
    zeros_tables(zeros_short, SHORT_LEN);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        update = hw_update;
#elif defined(__ARM_FEATURE_CRC32)
    update = hw_update;
#endif
}

uint32_t kp_crc32c(uint32_t crc, const void *buf, size_t len)
{
    return ~update(~crc, buf, len);
}

uint32_t kp_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
    return ~sw_update(~crc, buf, len);
}
