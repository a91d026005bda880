/*
 * Avro body checking and decoding (issue 31, Performance): what
 * sch_avro_validate costs the produce path (value validation's full-decode
 * level) and sch_avro_to_json costs SQL's value_json, per 1 KiB record.
 *
 * The bodies are an order (ids, a customer, 20 line items of sku, qty and
 * price, a note, a map of tags, an enum, an optional coupon) encoded here
 * in Avro's binary encoding, about 1 KiB each, NBODIES of them with
 * varying contents, checked round-robin so the figures are not of one
 * cached record.  Each figure is the best of ROUNDS passes.
 *
 *   build/bench/sch_avro_bench [records per pass]     (under flock /tmp/sluice-bench.lock)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "schema/sch.h"

#define NBODIES 64
#define ROUNDS 5

static const char schema[] =
    "{\"type\":\"record\",\"name\":\"Order\",\"namespace\":\"bench\",\"fields\":["
    "{\"name\":\"id\",\"type\":\"long\"},{\"name\":\"ts\",\"type\":\"long\"},"
    "{\"name\":\"customer\",\"type\":\"string\"},"
    "{\"name\":\"items\",\"type\":{\"type\":\"array\",\"items\":{\"type\":\"record\",\"name\":\"Item\","
    "\"fields\":[{\"name\":\"sku\",\"type\":\"string\"},{\"name\":\"qty\",\"type\":\"int\"},"
    "{\"name\":\"price\",\"type\":\"double\"}]}}},"
    "{\"name\":\"note\",\"type\":\"string\"},"
    "{\"name\":\"tags\",\"type\":{\"type\":\"map\",\"values\":\"string\"}},"
    "{\"name\":\"status\",\"type\":{\"type\":\"enum\",\"name\":\"Status\",\"symbols\":[\"NEW\",\"PAID\"]}},"
    "{\"name\":\"coupon\",\"type\":[\"null\",\"string\"],\"default\":null}]}";

static void put_long(kp_buf *b, int64_t v)
{
    uint64_t u = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    while (u >= 0x80) {
        uint8_t c = (uint8_t)(u | 0x80);
        kp_wr_raw(b, &c, 1);
        u >>= 7;
    }
    uint8_t c = (uint8_t)u;
    kp_wr_raw(b, &c, 1);
}

static void put_str(kp_buf *b, const char *s)
{
    put_long(b, (int64_t)strlen(s));
    kp_wr_raw(b, s, strlen(s));
}

static void order(kp_buf *b, int i)
{
    char t[512];
    put_long(b, 1000000 + i);
    put_long(b, 1733400000000LL + i);
    snprintf(t, sizeof t, "customer-%05d@example.com", i * 7919 % 100000);
    put_str(b, t);
    put_long(b, 20);
    for (int k = 0; k < 20; k++) {
        snprintf(t, sizeof t, "SKU-%08d", i * 31 + k);
        put_str(b, t);
        put_long(b, k + 1);
        double price = 9.99 + k * 1.25 + i;
        kp_wr_raw(b, &price, 8); /* little-endian host */
    }
    put_long(b, 0);            /* the array's end */
    memset(t, 'n', 460);
    t[460] = 0;
    put_str(b, t);
    put_long(b, 5);
    for (int k = 0; k < 5; k++) {
        char key[16], val[32];
        snprintf(key, sizeof key, "tag%d", k);
        snprintf(val, sizeof val, "value-%d-%d", i, k);
        put_str(b, key);
        put_str(b, val);
    }
    put_long(b, 0);            /* the map's end */
    put_long(b, i % 2);
    put_long(b, i % 3 ? 0 : 1);
    if (i % 3 == 0)
        put_str(b, "SPRING-SALE");
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    sch_schema *s;
    char err[256];
    if (sch_avro_parse(schema, strlen(schema), NULL, 0, &s, err, sizeof err) != 0) {
        fprintf(stderr, "schema: %s\n", err);
        return 1;
    }
    kp_buf bodies[NBODIES];
    size_t total = 0;
    for (int i = 0; i < NBODIES; i++) {
        kp_buf_init(&bodies[i]);
        order(&bodies[i], i);
        total += bodies[i].len;
        if (sch_avro_validate(s, bodies[i].data, bodies[i].len, err, sizeof err) != 0) {
            fprintf(stderr, "body %d: %s\n", i, err);
            return 1;
        }
    }
    double avg = (double)total / NBODIES;
    kp_buf out;
    kp_buf_init(&out);
    for (int job = 0; job < 2; job++) {
        double best = 1e9;
        for (int r = 0; r < ROUNDS; r++) {
            double t0 = now();
            for (long i = 0; i < n; i++) {
                kp_buf *b = &bodies[i % NBODIES];
                int rc;
                if (job == 0) {
                    rc = sch_avro_validate(s, b->data, b->len, NULL, 0);
                } else {
                    kp_buf_reset(&out);
                    rc = sch_avro_to_json(s, b->data, b->len, &out);
                }
                if (rc != 0)
                    return 1;
            }
            double dt = now() - t0;
            if (dt < best)
                best = dt;
        }
        printf("%-18s %ld records of %.0f bytes: %8.0f records/s  %7.1f MB/s  (%.0f ns/record)\n",
               job == 0 ? "sch_avro_validate" : "sch_avro_to_json", n, avg, n / best,
               n * avg / best / 1e6, best / n * 1e9);
    }
    kp_buf_free(&out);
    for (int i = 0; i < NBODIES; i++)
        kp_buf_free(&bodies[i]);
    sch_free(s);
    return 0;
}
