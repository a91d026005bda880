/*
 * libsluice against librdkafka's in-process mock cluster — an independent
 * Kafka broker implementation, so these prove the library speaks Kafka and
 * not just Sluice: configuration errors, produce/consume round trips
 * (keys, headers, zstd, murmur2 placement), idempotence, retries after
 * injected errors, seek/position, groups with both assignors, commits.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include "clients/sluice.h"
#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static rd_kafka_t *rk;
static rd_kafka_mock_cluster_t *mc;
static const char *bootstrap;

static void mock_up(void)
{
    char err[256];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "log_level", "0", err, sizeof err);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    ck_assert_ptr_nonnull(rk);
    mc = rd_kafka_mock_cluster_new(rk, 3);
    ck_assert_ptr_nonnull(mc);
    bootstrap = rd_kafka_mock_cluster_bootstraps(mc);
}

static void mock_down(void)
{
    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
}

static sl_conf *conf_for(const char *kv[])
{
    sl_conf *c = sl_conf_new();
    char err[256];
    ck_assert_int_eq(sl_conf_set(c, "bootstrap.servers", bootstrap, err, sizeof err), 0);
    ck_assert_int_eq(sl_conf_set(c, "log_level", getenv("SL_LOG") ? getenv("SL_LOG") : "3", err, sizeof err), 0);
    for (int i = 0; kv && kv[i]; i += 2)
        ck_assert_msg(sl_conf_set(c, kv[i], kv[i + 1], err, sizeof err) == 0, "%s", err);
    return c;
}

/* ---- delivery reports ----------------------------------------------------- */
typedef struct drs {
    int ok, failed;
    int64_t offsets[4096];
    int32_t parts[4096];
} drs;

static void dr_cb(const sl_delivery *d, void *opaque)
{
    drs *r = opaque;
    intptr_t i = (intptr_t)d->msg_opaque;
    if (d->err) {
        r->failed++;
        return;
    }
    r->ok++;
    if (i >= 0 && i < 4096) {
        r->offsets[i] = d->offset;
        r->parts[i] = d->partition;
    }
}

static sl_producer *producer(const char *kv[], drs *r)
{
    sl_conf *c = conf_for(kv);
    sl_conf_set_delivery_cb(c, dr_cb);
    sl_conf_set_opaque(c, r);
    char err[256];
    sl_producer *p = sl_producer_new(c, err, sizeof err);
    ck_assert_msg(p != NULL, "%s", err);
    sl_conf_destroy(c);
    return p;
}

/* ---- tests ---------------------------------------------------------------------- */

START_TEST(test_conf_rejects_unknown_key_and_bad_values)
{
    sl_conf *c = sl_conf_new();
    char err[256];
    ck_assert_int_eq(sl_conf_set(c, "no.such.key", "1", err, sizeof err), SL_E_CONF);
    ck_assert_ptr_nonnull(strstr(err, "no.such.key"));
    ck_assert_int_eq(sl_conf_set(c, "linger.ms", "soon", err, sizeof err), SL_E_CONF);
    ck_assert_ptr_nonnull(strstr(err, "linger.ms"));
    ck_assert_int_eq(sl_conf_set(c, "acks", "2", err, sizeof err), SL_E_CONF);
    ck_assert_int_eq(sl_conf_set(c, "compression.type", "brotli", err, sizeof err), SL_E_CONF);
    ck_assert_ptr_nonnull(strstr(err, "brotli"));
    ck_assert_int_eq(sl_conf_set(c, "partition.assignment.strategy", "range,sticky", err,
                                 sizeof err), SL_E_CONF);
    ck_assert_int_eq(sl_conf_set(c, "compression.type", "zstd", err, sizeof err), 0);
    ck_assert_int_eq(sl_conf_set(c, "auto.offset.reset", "smallest", err, sizeof err), 0);
    char v[64];
    ck_assert_int_eq(sl_conf_get(c, "compression.type", v, sizeof v), 0);
    ck_assert_str_eq(v, "zstd");
    ck_assert_int_eq(sl_conf_get(c, "auto.offset.reset", v, sizeof v), 0);
    ck_assert_str_eq(v, "earliest");
    ck_assert_int_eq(sl_conf_get(c, "enable.idempotence", v, sizeof v), 0);
    ck_assert_str_eq(v, "true");
    ck_assert_int_eq(sl_conf_get(c, "isolation.level", v, sizeof v), 0);
    ck_assert_str_eq(v, "read_uncommitted");                /* Java's default */
    ck_assert_int_eq(sl_conf_set(c, "isolation.level", "read_committed", err, sizeof err), 0);
    ck_assert_int_eq(sl_conf_get(c, "isolation.level", v, sizeof v), 0);
    ck_assert_str_eq(v, "read_committed");
    ck_assert_int_eq(sl_conf_set(c, "isolation.level", "serializable", err, sizeof err),
                     SL_E_CONF);
    ck_assert_ptr_nonnull(strstr(err, "isolation.level"));
    /* No bootstrap.servers: the constructor names it. */
    ck_assert_ptr_null(sl_producer_new(c, err, sizeof err));
    ck_assert_ptr_nonnull(strstr(err, "bootstrap.servers"));
    ck_assert_str_eq(sl_err_name(SL_ERR_NOT_LEADER_OR_FOLLOWER), "NOT_LEADER_OR_FOLLOWER");
    ck_assert_str_eq(sl_err_name(SL_E_QUEUE_FULL), "QUEUE_FULL");
    sl_conf_destroy(c);
}
END_TEST

static void check_roundtrip(const char *codec)
{
    mock_up();
    rd_kafka_mock_topic_create(mc, "rt", 3, 1);
    drs *r = calloc(1, sizeof *r);
    const char *kv[] = { "compression.type", codec, "linger.ms", "2", NULL };
    sl_producer *p = producer(kv, r);
    enum { N = 600 };
    for (int i = 0; i < N; i++) {
        char key[32], val[64];
        snprintf(key, sizeof key, "key-%d", i % 50);
        snprintf(val, sizeof val, "value-%d-\x01\xff", i);
        sl_header h[2] = { { "seq", &i, sizeof i, 0 }, { "nullh", NULL, 0, 0 } };
        ck_assert_int_eq(sl_produce(p, "rt", SL_PARTITION_ANY, key, strlen(key), val,
                                    strlen(val) + 1, h, 2, 1700000000000 + i,
                                    (void *)(intptr_t)i), 0);
    }
    ck_assert_int_eq(sl_flush(p, 10000), 0);
    ck_assert_int_eq(r->ok, N);
    ck_assert_int_eq(sl_producer_idempotent(p), 1);  /* mock has InitProducerId */
    for (int i = 0; i < N; i++) {
        char key[32];
        snprintf(key, sizeof key, "key-%d", i % 50);
        ck_assert_int_eq(r->parts[i], (kp_murmur2(key, strlen(key)) & 0x7fffffff) % 3);
    }
    sl_producer_destroy(p);

    sl_conf *c = conf_for(NULL);
    char err[256];
    sl_consumer *cons = sl_consumer_new(c, err, sizeof err);
    ck_assert_msg(cons != NULL, "%s", err);
    sl_conf_destroy(c);
    sl_topic_partition tp[3] = { { "rt", 0, SL_OFFSET_BEGINNING, 0 },
                                 { "rt", 1, SL_OFFSET_BEGINNING, 0 },
                                 { "rt", 2, SL_OFFSET_BEGINNING, 0 } };
    ck_assert_int_eq(sl_consumer_assign(cons, tp, 3), 0);
    int seen = 0;
    char *got = calloc(N, 1);
    while (seen < N) {
        sl_message m;
        int rc = sl_consumer_poll(cons, 5000, &m);
        ck_assert_int_eq(rc, 1);
        ck_assert_int_eq(m.err, 0);
        ck_assert_int_eq(m.header_count, 2);
        int i;
        ck_assert_int_eq(m.headers[0].value_len, sizeof i);
        memcpy(&i, m.headers[0].value, sizeof i);
        ck_assert(i >= 0 && i < N && !got[i]);
        got[i] = 1;
        ck_assert_str_eq(m.headers[0].key, "seq");
        ck_assert_str_eq(m.headers[1].key, "nullh");
        ck_assert_ptr_null(m.headers[1].value);
        char key[32], val[64];
        snprintf(key, sizeof key, "key-%d", i % 50);
        snprintf(val, sizeof val, "value-%d-\x01\xff", i);
        ck_assert_int_eq(m.key_len, (int)strlen(key));
        ck_assert(memcmp(m.key, key, strlen(key)) == 0);
        ck_assert_int_eq(m.value_len, (int)strlen(val) + 1);
        ck_assert(memcmp(m.value, val, strlen(val) + 1) == 0);
        ck_assert_int_eq(m.timestamp, 1700000000000 + i);
        ck_assert_int_eq(m.partition, r->parts[i]);
        ck_assert_int_eq(m.offset, r->offsets[i]);
        seen++;
    }
    int64_t pos;
    ck_assert_int_eq(sl_consumer_position(cons, "rt", r->parts[N - 1], &pos), 0);
    ck_assert_int_eq(pos, r->offsets[N - 1] + 1);
    sl_consumer_destroy(cons);
    free(got);
    free(r);
    mock_down();
}

START_TEST(test_roundtrip_keys_headers_none) { check_roundtrip("none"); }
END_TEST
START_TEST(test_roundtrip_keys_headers_zstd) { check_roundtrip("zstd"); }
END_TEST
START_TEST(test_roundtrip_keys_headers_gzip_lz4_snappy)
{
    check_roundtrip("gzip");
    check_roundtrip("lz4");
    check_roundtrip("snappy");
}
END_TEST

START_TEST(test_retries_after_not_leader_deliver_once_in_order)
{
    mock_up();
    rd_kafka_mock_topic_create(mc, "re", 1, 1);
    rd_kafka_mock_push_request_errors(mc, 0 /* Produce */, 3,
                                      RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                                      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT,
                                      RD_KAFKA_RESP_ERR__TRANSPORT);
    drs *r = calloc(1, sizeof *r);
    const char *kv[] = { "linger.ms", "0", "retry.backoff.ms", "20", NULL };
    sl_producer *p = producer(kv, r);
    for (int i = 0; i < 200; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        ck_assert_int_eq(sl_produce(p, "re", 0, NULL, 0, v, strlen(v), NULL, 0, 0,
                                    (void *)(intptr_t)i), 0);
        if (i % 20 == 0)
            usleep(2000);
    }
    ck_assert_int_eq(sl_flush(p, 20000), 0);
    ck_assert_int_eq(r->ok, 200);
    ck_assert_int_eq(r->failed, 0);
    sl_producer_destroy(p);
    /* Offsets 0..199 hold 0..199 exactly once, in order. */
    sl_conf *c = conf_for(NULL);
    sl_consumer *cons = sl_consumer_new(c, NULL, 0);
    sl_conf_destroy(c);
    sl_topic_partition tp = { "re", 0, SL_OFFSET_BEGINNING, 0 };
    sl_consumer_assign(cons, &tp, 1);
    for (int i = 0; i < 200; i++) {
        sl_message m;
        ck_assert_int_eq(sl_consumer_poll(cons, 5000, &m), 1);
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        ck_assert_int_eq(m.offset, i);
        ck_assert_int_eq(m.value_len, (int)strlen(v));
        ck_assert(memcmp(m.value, v, strlen(v)) == 0);
    }
    int64_t lo, hi;
    ck_assert_int_eq(sl_consumer_watermarks(cons, "re", 0, &lo, &hi, 5000), 0);
    ck_assert_int_eq(lo, 0);
    ck_assert_int_eq(hi, 200);
    sl_consumer_destroy(cons);
    free(r);
    mock_down();
}
END_TEST

START_TEST(test_without_init_producer_id_degrades_to_plain_producer)
{
    mock_up();
    rd_kafka_mock_set_apiversion(mc, 22 /* InitProducerId */, -1, -1);
    rd_kafka_mock_topic_create(mc, "np", 1, 1);
    drs *r = calloc(1, sizeof *r);
    const char *kv[] = { "log_level", "2", NULL };
    sl_producer *p = producer(kv, r);
    ck_assert_int_eq(sl_produce(p, "np", 0, "k", 1, "v", 1, NULL, 0, 0, NULL), 0);
    ck_assert_int_eq(sl_flush(p, 5000), 0);
    ck_assert_int_eq(r->ok, 1);
    ck_assert_int_eq(sl_producer_idempotent(p), 0);
    sl_producer_destroy(p);
    free(r);
    mock_down();
}
END_TEST

START_TEST(test_apiversions_v3_refused_falls_back_to_v0)
{
    mock_up();
    rd_kafka_mock_set_apiversion(mc, 18 /* ApiVersions */, 0, 2);
    rd_kafka_mock_topic_create(mc, "av", 1, 1);
    drs *r = calloc(1, sizeof *r);
    sl_producer *p = producer(NULL, r);
    ck_assert_int_eq(sl_produce(p, "av", 0, "k", 1, "v", 1, NULL, 0, 0, NULL), 0);
    ck_assert_int_eq(sl_flush(p, 5000), 0);
    ck_assert_int_eq(r->ok, 1);
    sl_producer_destroy(p);
    free(r);
    mock_down();
}
END_TEST

START_TEST(test_seek_position_and_queue_full)
{
    mock_up();
    rd_kafka_mock_topic_create(mc, "sk", 1, 1);
    drs *r = calloc(1, sizeof *r);
    const char *kv[] = { "buffer.memory", "4096", NULL };
    sl_producer *p = producer(kv, r);
    int full = 0, sent = 0;
    for (int i = 0; i < 100; i++) {
        char v[100];
        memset(v, 'a' + i % 26, sizeof v);
        int rc = sl_produce(p, "sk", 0, NULL, 0, v, sizeof v, NULL, 0, 0, NULL);
        if (rc == SL_E_QUEUE_FULL) {
            full++;
            sl_flush(p, 5000);
            rc = sl_produce(p, "sk", 0, NULL, 0, v, sizeof v, NULL, 0, 0, NULL);
        }
        ck_assert_int_eq(rc, 0);
        sent++;
    }
    ck_assert_int_gt(full, 0);
    ck_assert_int_eq(sl_flush(p, 5000), 0);
    ck_assert_int_eq(r->ok, sent);
    ck_assert_int_eq(sl_produce(p, "sk", 7, NULL, 0, "x", 1, NULL, 0, 0, NULL),
                     SL_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    sl_producer_destroy(p);

    sl_conf *c = conf_for(NULL);
    sl_consumer *cons = sl_consumer_new(c, NULL, 0);
    sl_conf_destroy(c);
    sl_topic_partition tp = { "sk", 0, 10, 0 };
    sl_consumer_assign(cons, &tp, 1);
    sl_message m;
    ck_assert_int_eq(sl_consumer_poll(cons, 5000, &m), 1);
    ck_assert_int_eq(m.offset, 10);
    ck_assert_int_eq(((const char *)m.value)[0], 'a' + 10);
    ck_assert_int_eq(sl_consumer_seek(cons, "sk", 0, 42), 0);
    int64_t pos;
    ck_assert_int_eq(sl_consumer_position(cons, "sk", 0, &pos), 0);
    ck_assert_int_eq(pos, 42);
    ck_assert_int_eq(sl_consumer_poll(cons, 5000, &m), 1);
    ck_assert_int_eq(m.offset, 42);
    ck_assert_int_eq(sl_consumer_seek(cons, "sk", 0, SL_OFFSET_END), 0);
    ck_assert_int_eq(sl_consumer_poll(cons, 300, &m), 0);
    ck_assert_int_eq(sl_consumer_seek(cons, "sk", 0, SL_OFFSET_BEGINNING), 0);
    ck_assert_int_eq(sl_consumer_poll(cons, 5000, &m), 1);
    ck_assert_int_eq(m.offset, 0);
    ck_assert_int_eq(sl_consumer_position(cons, "nope", 0, &pos),
                     SL_ERR_UNKNOWN_TOPIC_OR_PARTITION);
    sl_consumer_destroy(cons);
    free(r);
    mock_down();
}
END_TEST

/* ---- groups --------------------------------------------------------------------- */

typedef struct rb_log {
    int assigns, revokes, last_n;
} rb_log;

static void rb_cb(sl_consumer *c, int ev, const sl_topic_partition *tps, int n, void *op)
{
    (void)c; (void)tps;
    rb_log *l = op;
    if (ev == SL_REBALANCE_ASSIGN) {
        l->assigns++;
        l->last_n = n;
    } else {
        l->revokes++;
    }
}

static void check_group(const char *strategy)
{
    mock_up();
    rd_kafka_mock_topic_create(mc, "gt", 6, 1);
    drs *r = calloc(1, sizeof *r);
    sl_producer *p = producer(NULL, r);
    enum { N = 300 };
    for (int i = 0; i < N; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", i);
        ck_assert_int_eq(sl_produce(p, "gt", i % 6, NULL, 0, v, strlen(v), NULL, 0, 0, NULL), 0);
    }
    ck_assert_int_eq(sl_flush(p, 10000), 0);
    sl_producer_destroy(p);

    enum { C = 3 };
    sl_consumer *cs[C];
    rb_log logs[C];
    memset(logs, 0, sizeof logs);
    const char *kv[] = { "group.id", "g1", "auto.offset.reset", "earliest",
                         "partition.assignment.strategy", strategy,
                         "heartbeat.interval.ms", "100", "session.timeout.ms", "6000",
                         "enable.auto.commit", "false", NULL };
    const char *topics[] = { "gt" };
    for (int i = 0; i < C; i++) {
        sl_conf *c = conf_for(kv);
        sl_conf_set_rebalance_cb(c, rb_cb);
        sl_conf_set_opaque(c, &logs[i]);
        cs[i] = sl_consumer_new(c, NULL, 0);
        ck_assert_ptr_nonnull(cs[i]);
        sl_conf_destroy(c);
        ck_assert_int_eq(sl_consumer_subscribe(cs[i], topics, 1), 0);
    }
    /* Poll all until every message was seen and each member has 2. */
    char *seen = calloc(N, 1);
    int total = 0;
    /* Bounded by time, not rounds: a poll may return at once while the
     * group rebalances, and on a loaded machine 4000 rounds ran out first
     * (292 of 300 seen in one CI run). */
    double deadline = mono_s() + 45;   /* twice: within the 120 s of unit_run */
    for (int round = 0; round < 1000000 && total < N && mono_s() < deadline; round++) {
        for (int i = 0; i < C; i++) {
            sl_message m;
            if (sl_consumer_poll(cs[i], 5, &m) == 1 && !m.err) {
                int v = atoi((const char *)m.value);
                ck_assert_int_eq(v % 6, m.partition);
                if (!seen[v]) {
                    seen[v] = 1;
                    total++;
                }
            }
        }
    }
    ck_assert_int_eq(total, N);
    /* Every message was seen by some member, but a partition that moved in
     * a rebalance is read again by its new owner from the start: poll on
     * (bounded) until each member's position is at the end of both of its
     * partitions, or the commit below reads a position short of it. */
    deadline = mono_s() + 45;
    for (int round = 0; round < 1000000 && mono_s() < deadline; round++) {
        bool at_end = true;
        for (int i = 0; i < C; i++) {
            sl_topic_partition *a = NULL;
            int n = sl_consumer_assignment(cs[i], &a);
            for (int k = 0; k < n; k++)
                at_end &= a[k].offset == N / 6;
            if (n >= 0)
                free(a);
            at_end &= n == 2;
        }
        if (at_end)
            break;
        for (int i = 0; i < C; i++) {
            sl_message m;
            if (sl_consumer_poll(cs[i], 5, &m) == 1 && !m.err)
                ck_assert_int_eq(atoi((const char *)m.value) % 6, m.partition);
        }
    }
    for (int i = 0; i < C; i++) {
        sl_topic_partition *a;
        int n = sl_consumer_assignment(cs[i], &a);
        ck_assert_int_eq(n, 2);
        free(a);
        ck_assert_int_ge(logs[i].assigns, 1);
    }
    /* Sync commit and read it back. */
    ck_assert_int_eq(sl_consumer_commit(cs[0], NULL, 0, 0), 0);
    sl_topic_partition *a;
    int n = sl_consumer_assignment(cs[0], &a);
    ck_assert_int_eq(n, 2);
    sl_topic_partition q[2] = { { a[0].topic, a[0].partition, 0, 0 },
                                { a[1].topic, a[1].partition, 0, 0 } };
    ck_assert_int_eq(sl_consumer_committed(cs[0], q, 2, 5000), 0);
    ck_assert_int_eq(q[0].offset, a[0].offset);
    ck_assert_int_eq(q[1].offset, a[1].offset);
    ck_assert_int_eq(q[0].offset, N / 6);
    free(a);
    for (int i = 0; i < C; i++)
        sl_consumer_destroy(cs[i]);
    free(seen);
    free(r);
    mock_down();
}

START_TEST(test_group_of_three_range) { check_group("range"); }
END_TEST
START_TEST(test_group_of_three_roundrobin) { check_group("roundrobin"); }
END_TEST

START_TEST(test_admin_against_mock_lists_groups)
{
    mock_up();
    rd_kafka_mock_topic_create(mc, "ad", 2, 1);
    sl_conf *c = conf_for(NULL);
    char err[256];
    sl_admin *a = sl_admin_new(c, err, sizeof err);
    sl_conf_destroy(c);
    ck_assert_ptr_nonnull(a);
    ck_assert_int_eq(sl_admin_partition_count(a, "ad", 5000), 2);
    char **g;
    int n;
    int rc = sl_admin_list_groups(a, &g, &n, 5000, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == SL_E_UNSUPPORTED, "%s", err);
    if (rc == 0)
        sl_admin_groups_free(g, n);
    sl_admin_destroy(a);
    mock_down();
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_conf_rejects_unknown_key_and_bad_values, test_roundtrip_keys_headers_none,
        test_roundtrip_keys_headers_zstd, test_roundtrip_keys_headers_gzip_lz4_snappy,
        test_retries_after_not_leader_deliver_once_in_order,
        test_without_init_producer_id_degrades_to_plain_producer,
        test_apiversions_v3_refused_falls_back_to_v0, test_seek_position_and_queue_full,
        test_group_of_three_range, test_group_of_three_roundrobin,
        test_admin_against_mock_lists_groups,
    };
    return unit_run("libsluice vs mock cluster", "all", tests, sizeof tests / sizeof *tests,
                    NULL, NULL, 120);
}
