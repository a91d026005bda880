/* CRC-32C (hardware and table paths) and murmur2 against known vectors. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

START_TEST(test_crc32c_check_value)
{
    ck_assert_uint_eq(kp_crc32c(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(kp_crc32c_sw(0, "123456789", 9), 0xE3069283u);
    ck_assert_uint_eq(kp_crc32c(0, "", 0), 0);
    /* RFC 3720 B.4: 32 bytes of zeros / of 0xff. */
    uint8_t z[32];
    memset(z, 0, sizeof z);
    ck_assert_uint_eq(kp_crc32c(0, z, 32), 0x8A9136AAu);
    memset(z, 0xff, sizeof z);
    ck_assert_uint_eq(kp_crc32c(0, z, 32), 0x62A8AB43u);
}
END_TEST

START_TEST(test_crc32c_chains)
{
    uint32_t c = kp_crc32c(0, "1234", 4);
    ck_assert_uint_eq(kp_crc32c(c, "56789", 5), 0xE3069283u);
    c = kp_crc32c_sw(0, "12345", 5);
    ck_assert_uint_eq(kp_crc32c_sw(c, "6789", 4), 0xE3069283u);
}
END_TEST

START_TEST(test_crc32c_hw_equals_sw_every_length_and_alignment)
{
    uint8_t *buf = malloc(300 + 16);
    srand(12345);
    for (int i = 0; i < 316; i++)
        buf[i] = (uint8_t)rand();
    for (size_t off = 0; off < 16; off++)
        for (size_t len = 0; len <= 300; len++) {
            uint32_t seed = (uint32_t)(len * 2654435761u);
            ck_assert_uint_eq(kp_crc32c(0, buf + off, len), kp_crc32c_sw(0, buf + off, len));
            ck_assert_uint_eq(kp_crc32c(seed, buf + off, len),
                              kp_crc32c_sw(seed, buf + off, len));
        }
    free(buf);
}
END_TEST

START_TEST(test_crc32c_large_buffer)
{
    size_t n = 1 << 20;
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)(i * 31 + 7);
    ck_assert_uint_eq(kp_crc32c(0, buf, n), kp_crc32c_sw(0, buf, n));
    free(buf);
}
END_TEST

/* Lengths either side of the three-way split points (3 x 256, 3 x 8192)
 * and their multiples, at every alignment mod 8: the joined streams must
 * equal the plain table walk. */
START_TEST(test_crc32c_three_way_split_boundaries)
{
    static const size_t around[] = { 768, 1536, 24576, 49152, 24576 + 768 };
    uint8_t *buf = malloc(60000);
    for (size_t i = 0; i < 60000; i++)
        buf[i] = (uint8_t)(i * 131 + (i >> 7));
    for (size_t a = 0; a < sizeof around / sizeof around[0]; a++)
        for (size_t n = around[a] - 9; n <= around[a] + 9; n++)
            for (size_t off = 0; off < 8; off++)
                ck_assert_uint_eq(kp_crc32c(0, buf + off, n), kp_crc32c_sw(0, buf + off, n));
    free(buf);
}
END_TEST

START_TEST(test_murmur2_vectors_from_readme)
{
    ck_assert_int_eq(kp_murmur2("21", 2), -973932308);
    ck_assert_uint_eq((uint32_t)kp_murmur2("21", 2), 0xC5F2F8ECu);
    ck_assert_uint_eq((uint32_t)kp_murmur2("foo", 3), 0x23A256D0u);
    ck_assert_uint_eq((uint32_t)kp_murmur2("key1", 4), 0x01B38BC4u);
    ck_assert_uint_eq((uint32_t)kp_murmur2("hello world", 11), 0x48D0C363u);
}
END_TEST

static int part(const char *k, int n)
{
    return (kp_murmur2(k, strlen(k)) & 0x7fffffff) % n;
}

START_TEST(test_murmur2_java_partitions)
{
    ck_assert_int_eq(part("21", 3), 0);
    ck_assert_int_eq(part("21", 6), 0);
    ck_assert_int_eq(part("foo", 3), 2);
    ck_assert_int_eq(part("foo", 6), 2);
    ck_assert_int_eq(part("key1", 3), 2);
    ck_assert_int_eq(part("key1", 6), 2);
    ck_assert_int_eq(part("hello world", 3), 1);
    ck_assert_int_eq(part("hello world", 6), 1);
}
END_TEST

START_TEST(test_murmur2_unaligned_and_empty)
{
    char buf[32];
    memcpy(buf + 1, "hello world", 11);
    ck_assert_uint_eq((uint32_t)kp_murmur2(buf + 1, 11), 0x48D0C363u);
    (void)kp_murmur2("", 0);   /* defined, no crash */
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_crc32c_check_value, test_crc32c_chains,
        test_crc32c_hw_equals_sw_every_length_and_alignment, test_crc32c_large_buffer,
        test_crc32c_three_way_split_boundaries, test_murmur2_vectors_from_readme,
        test_murmur2_java_partitions, test_murmur2_unaligned_and_empty,
    };
    return unit_run("kp_crc", "core", tests, sizeof tests / sizeof *tests, NULL, NULL, 60);
}
