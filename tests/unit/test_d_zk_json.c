/* daemon/cluster/cluster_zk_json.c: Kafka's znode JSON read and written — Kafka's own
 * strings, round trips, and hostile input. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cluster/cluster_zk_json.h"
#include "tests/unit/unit_run.h"

static char err[256];

/* Parses s without its NUL, from a heap copy of exactly its length, so
 * ASan catches any read past the end. */
#define EXACT(s) exact_copy(s), strlen(s)
static char *held;
static const char *exact_copy(const char *s)
{
    free(held);
    size_t n = strlen(s);
    held = malloc(n ? n : 1);
    memcpy(held, s, n);
    return held;
}

static const char *text_of(kp_buf *b)
{
    static char out[8192];
    ck_assert_uint_lt(b->len, sizeof out);
    memcpy(out, b->data, b->len);
    out[b->len] = 0;
    return out;
}

/* ---- brokers ---------------------------------------------------------------------- */

START_TEST(test_broker_kafka_v5_registration)
{
    zj_broker b;
    const char *js = "{\"features\":{},\"listener_security_protocol_map\":{\"PLAINTEXT\":"
        "\"PLAINTEXT\"},\"endpoints\":[\"PLAINTEXT://127.0.0.1:9092\"],\"jmx_port\":-1,"
        "\"port\":9092,\"host\":\"127.0.0.1\",\"version\":5,\"timestamp\":\"1733000000000\","
        "\"rack\":\"r1\"}";
    ck_assert_msg(cl_zj_broker_parse(EXACT(js), &b, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(b.id, -1);
    ck_assert_str_eq(b.host, "127.0.0.1");
    ck_assert_int_eq(b.port, 9092);
    ck_assert_str_eq(b.rack, "r1");
    ck_assert_str_eq(b.endpoints, "PLAINTEXT://127.0.0.1:9092");
    ck_assert_int_eq(b.timestamp_ms, 1733000000000LL);

    /* Formatted back: Kafka's own bytes. */
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_broker_format(&b, &out), 0);
    ck_assert_str_eq(text_of(&out), js);
    kp_buf_free(&out);
}
END_TEST

START_TEST(test_broker_named_listeners_by_name)
{
    /* What a broker with listeners INTERNAL (SSL) and CLIENT writes, in
     * Kafka's form; read back, each listener's endpoint by its name. */
    zj_broker b = { .port = 9092, .timestamp_ms = 7 };
    snprintf(b.host, sizeof b.host, "h1");
    snprintf(b.endpoints, sizeof b.endpoints, "CLIENT://h1:9092,INTERNAL://[::1]:9093");
    snprintf(b.protocol_map, sizeof b.protocol_map, "CLIENT:PLAINTEXT,INTERNAL:SSL");
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_broker_format(&b, &out), 0);
    ck_assert_str_eq(text_of(&out), "{\"features\":{},\"listener_security_protocol_map\":"
        "{\"CLIENT\":\"PLAINTEXT\",\"INTERNAL\":\"SSL\"},\"endpoints\":[\"CLIENT://h1:9092\","
        "\"INTERNAL://[::1]:9093\"],\"jmx_port\":-1,\"port\":9092,\"host\":\"h1\","
        "\"version\":5,\"timestamp\":\"7\"}");
    zj_broker back;
    ck_assert_msg(cl_zj_broker_parse((const char *)out.data, out.len, &back, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_int_eq(back.neps, 2);
    const struct zj_endpoint *ep = cl_zj_broker_endpoint(&back, "internal");
    ck_assert_ptr_nonnull(ep);
    ck_assert_str_eq(ep->host, "::1");
    ck_assert_int_eq(ep->port, 9093);
    ck_assert_int_eq(cl_zj_broker_endpoint(&back, "CLIENT")->port, 9092);
    ck_assert_ptr_null(cl_zj_broker_endpoint(&back, "SSL"));
    kp_buf_free(&out);
}
END_TEST

START_TEST(test_broker_without_plaintext_host_is_null)
{
    zj_broker b;
    /* Kafka writes host null and port -1 with only SSL/SASL listeners. */
    const char *js = "{\"listener_security_protocol_map\":{\"INTERNAL\":\"SSL\","
        "\"EXTERNAL\":\"SASL_SSL\"},\"endpoints\":[\"INTERNAL://[::1]:9093\","
        "\"EXTERNAL://broker.example:9094\"],\"rack\":null,\"jmx_port\":-1,\"host\":null,"
        "\"timestamp\":\"1\",\"port\":-1,\"version\":4}";
    ck_assert_msg(cl_zj_broker_parse(EXACT(js), &b, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(b.host, "::1");
    ck_assert_int_eq(b.port, 9093);
    ck_assert_str_eq(b.rack, "");
    ck_assert_str_eq(b.endpoints, "INTERNAL://[::1]:9093,EXTERNAL://broker.example:9094");

    js = "{\"endpoints\":[\"SSL://a:1\",\"PLAINTEXT://b:2\"],\"host\":null,\"port\":-1}";
    ck_assert_msg(cl_zj_broker_parse(EXACT(js), &b, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(b.host, "b");
    ck_assert_int_eq(b.port, 2);

    /* Kafka 0.8's v1: host and port, no endpoints. */
    js = "{\"jmx_port\":-1,\"timestamp\":\"1400000000000\",\"host\":\"old\",\"version\":1,"
         "\"port\":9092}";
    ck_assert_msg(cl_zj_broker_parse(EXACT(js), &b, err, sizeof err) == 0, "%s", err);
    ck_assert_str_eq(b.host, "old");
    ck_assert_str_eq(b.endpoints, "");
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_broker_format(&b, &out), 0);
    zj_broker back;
    ck_assert_msg(cl_zj_broker_parse((const char *)out.data, out.len, &back, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(back.endpoints, "PLAINTEXT://old:9092");
    kp_buf_free(&out);

    js = "{\"host\":null,\"port\":-1,\"endpoints\":[]}";
    ck_assert_int_eq(cl_zj_broker_parse(EXACT(js), &b, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "endpoint"), "%s", err);
    js = "{\"host\":null,\"endpoints\":[\"PLAINTEXT://h:99999\"]}";
    ck_assert_int_eq(cl_zj_broker_parse(EXACT(js), &b, err, sizeof err), -1);
}
END_TEST

START_TEST(test_broker_format_escapes_and_round_trips)
{
    zj_broker b;
    memset(&b, 0, sizeof b);
    snprintf(b.host, sizeof b.host, "h\"x\\y");
    b.port = 1;
    snprintf(b.rack, sizeof b.rack, "rack\n1");
    snprintf(b.endpoints, sizeof b.endpoints, "PLAINTEXT://h:1,SSL://h:2,INTERNAL://h:3");
    b.timestamp_ms = 42;
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_broker_format(&b, &out), 0);
    ck_assert_msg(strstr(text_of(&out), "\"INTERNAL\":\"PLAINTEXT\""), "%s", text_of(&out));
    ck_assert_msg(strstr(text_of(&out), "\"SSL\":\"SSL\""), "%s", text_of(&out));
    zj_broker back;
    ck_assert_msg(cl_zj_broker_parse((const char *)out.data, out.len, &back, err, sizeof err) == 0,
                  "%s", err);
    ck_assert_str_eq(back.host, b.host);
    ck_assert_str_eq(back.rack, b.rack);
    ck_assert_str_eq(back.endpoints, b.endpoints);
    ck_assert_int_eq(back.timestamp_ms, 42);
    kp_buf_free(&out);
}
END_TEST

/* ---- topics ----------------------------------------------------------------------- */

/* t formatted with its id into out (initialised here), as text. */
static const char *topic_text(const zj_topic *t, kp_buf *out)
{
    kp_buf_init(out);
    ck_assert_int_eq(cl_zj_topic_format(t->id, t->parts, t->npartitions, out), 0);
    return text_of(out);
}

START_TEST(test_topic_reassignment_maps_round_trip_as_replica_bits)
{
    /* Partition 0 moves from [1,2] to [2,3]: replicas T ++ (O \ T), 3 added
     * (position 1), 1 removed (position 2); a map entry for a partition the
     * topic lacks is ignored; Kafka may write null for none. */
    static const struct { const char *js; uint32_t adding, removing; } cases[] = {
        { "{\"version\":3,\"topic_id\":\"ASNFZ4mrze_-3LqYdlQyEA\",\"adding_replicas\":"
          "{\"0\":[3]},\"removing_replicas\":{\"0\":[1],\"9\":[4]},\"partitions\":"
          "{\"0\":[2,3,1],\"1\":[1]}}", 1u << 1, 1u << 2 },
        { "{\"version\":2,\"partitions\":{\"0\":[1]},\"adding_replicas\":null}", 0, 0 },
        { "{\"version\":3,\"topic_id\":null,\"partitions\":{\"0\":[1]},"
          "\"removing_replicas\":null}", 0, 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zj_topic t;
        ck_assert_msg(cl_zj_topic_parse(EXACT(cases[i].js), &t, err, sizeof err) == 0, "%s", err);
        ck_assert_uint_eq(t.parts[0].adding, cases[i].adding);
        ck_assert_uint_eq(t.parts[0].removing, cases[i].removing);
        if (i == 0) {
            ck_assert_uint_eq(t.parts[1].adding | t.parts[1].removing, 0);
            kp_buf out;
            ck_assert_str_eq(topic_text(&t, &out), "{\"version\":3,\"topic_id\":"
                "\"ASNFZ4mrze_-3LqYdlQyEA\",\"partitions\":{\"0\":[2,3,1],\"1\":[1]},"
                "\"adding_replicas\":{\"0\":[3]},\"removing_replicas\":{\"0\":[1]}}");
            kp_buf_free(&out);
        }
        cl_zj_topic_free(&t);
    }
}
END_TEST

START_TEST(test_topic_v3_assignment)
{
    zj_topic t;
    const char *js = "{\"version\":3,\"topic_id\":\"ASNFZ4mrze_-3LqYdlQyEA\","
        "\"partitions\":{\"1\":[2,3,1],\"0\":[1,2,3]},\"adding_replicas\":{},"
        "\"removing_replicas\":{}}";
    ck_assert_msg(cl_zj_topic_parse(EXACT(js), &t, err, sizeof err) == 0, "%s", err);
    ck_assert(t.has_id);
    ck_assert_int_eq(t.id[0], 0x01);
    ck_assert_int_eq(t.id[15], 0x10);
    ck_assert_int_eq(t.npartitions, 2);
    ck_assert_int_eq(t.parts[0].nreplicas, 3);
    ck_assert_int_eq(t.parts[0].replicas[0], 1);
    ck_assert_int_eq(t.parts[1].replicas[0], 2);
    ck_assert_int_eq(t.parts[1].replicas[2], 1);
    ck_assert_int_eq(t.parts[1].leader, -1);
    ck_assert_int_eq(t.parts[1].nisr, 0);
    ck_assert_int_eq(t.parts[1].zk_version, -1);

    kp_buf out;
    ck_assert_str_eq(topic_text(&t, &out), "{\"version\":3,\"topic_id\":\"ASNFZ4mrze_-3LqYdlQyEA\","
        "\"partitions\":{\"0\":[1,2,3],\"1\":[2,3,1]},\"adding_replicas\":{},"
        "\"removing_replicas\":{}}");
    cl_zj_topic_free(&t);
    kp_buf_reset(&out);

    /* Version 1 (Kafka before 2.4) has no id. */
    js = "{\"version\":1,\"partitions\":{\"0\":[7]}}";
    ck_assert_msg(cl_zj_topic_parse(EXACT(js), &t, err, sizeof err) == 0, "%s", err);
    ck_assert(!t.has_id);
    ck_assert_int_eq(t.npartitions, 1);
    ck_assert_int_eq(cl_zj_topic_format(NULL, t.parts, t.npartitions, &out), 0);
    zj_topic back;
    ck_assert_int_eq(cl_zj_topic_parse((const char *)out.data, out.len, &back, err, sizeof err), 0);
    ck_assert(!back.has_id);
    ck_assert_int_eq(back.parts[0].replicas[0], 7);
    cl_zj_topic_free(&back);
    cl_zj_topic_free(&t);
    kp_buf_free(&out);
}
END_TEST

static void topic_refused(const char *js, const char *why)
{
    zj_topic t;
    t.parts = (void *)1;
    ck_assert_msg(cl_zj_topic_parse(EXACT(js), &t, err, sizeof err) == -1, "accepted %s", js);
    ck_assert_ptr_null(t.parts);
    ck_assert_msg(strstr(err, why), "%s: error \"%s\" lacks \"%s\"", js, err, why);
}

START_TEST(test_topic_refuses_gaps_duplicates_and_bad_brokers)
{
    topic_refused("{\"partitions\":{\"0\":[1],\"2\":[1]}}", "partition 1 missing");
    topic_refused("{\"partitions\":{\"1\":[1]}}", "partition 0 missing");
    topic_refused("{\"partitions\":{\"0\":[1],\"0\":[2]}}", "partition 0 given twice");
    topic_refused("{\"partitions\":{\"0\":[1],\"3\":[-2]}}", "partition 3: broker id -2");
    topic_refused("{\"partitions\":{\"0\":[1,1]}}", "broker 1 twice");
    topic_refused("{\"partitions\":{\"0\":[]}}", "partition 0: no replicas");
    topic_refused("{\"partitions\":{\"0\":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}}",
                  "more than 16");
    topic_refused("{\"partitions\":{\"00\":[1]}}", "not a partition number");
    topic_refused("{\"partitions\":{\"-1\":[1]}}", "not a partition number");
    topic_refused("{\"partitions\":{}}", "no partitions");
    topic_refused("{\"version\":3}", "no \"partitions\"");
    topic_refused("{\"partitions\":{\"0\":[1.5]}}", "fraction");
    topic_refused("{\"partitions\":{\"0\":[\"1\"]}}", "integer");
    topic_refused("{\"partitions\":{\"0\":[99999999999]}}", "out of range");
    topic_refused("{\"topic_id\":\"short\",\"partitions\":{\"0\":[1]}}", "topic_id");
    topic_refused("{\"partitions\":{\"0\":[1]},\"partitions\":{\"0\":[1]}}", "twice");
}
END_TEST

/* ---- partition state ---------------------------------------------------------------- */

START_TEST(test_state_kafka_form_and_round_trip)
{
    md_partition_state st;
    memset(&st, 0, sizeof st);
    st.nreplicas = 2;
    st.replicas[0] = 1;
    st.replicas[1] = 2;
    st.zk_version = 9;
    const char *js = "{\"controller_epoch\":3,\"leader\":1,\"version\":1,\"leader_epoch\":5,"
                     "\"isr\":[1,2]}";
    ck_assert_msg(cl_zj_state_parse(EXACT(js), &st, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.controller_epoch, 3);
    ck_assert_int_eq(st.leader, 1);
    ck_assert_int_eq(st.leader_epoch, 5);
    ck_assert_int_eq(st.nisr, 2);
    ck_assert_int_eq(st.isr[1], 2);
    ck_assert_int_eq(st.nreplicas, 2);              /* left alone */
    ck_assert_int_eq(st.zk_version, 9);
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_state_format(&st, &out), 0);
    ck_assert_str_eq(text_of(&out), js);
    kp_buf_free(&out);

    /* Kafka 3.x adds leader_recovery_state; offline: leader -1. */
    js = "{\"version\":1,\"leader\":-1,\"leader_epoch\":4,\"controller_epoch\":7,"
         "\"isr\":[3],\"leader_recovery_state\":0}";
    ck_assert_msg(cl_zj_state_parse(EXACT(js), &st, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(st.leader, -1);
    ck_assert_int_eq(st.nisr, 1);

    md_partition_state keep = st;
    js = "{\"leader\":-2,\"leader_epoch\":4,\"controller_epoch\":7,\"isr\":[]}";
    ck_assert_int_eq(cl_zj_state_parse(EXACT(js), &st, err, sizeof err), -1);
    ck_assert_mem_eq(&st, &keep, sizeof st);         /* untouched on error */
    js = "{\"leader\":1,\"controller_epoch\":7,\"isr\":[]}";
    ck_assert_int_eq(cl_zj_state_parse(EXACT(js), &st, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "leader_epoch"), "%s", err);
    js = "{\"leader\":1,\"leader_epoch\":1,\"controller_epoch\":7,\"isr\":[1,1]}";
    ck_assert_int_eq(cl_zj_state_parse(EXACT(js), &st, err, sizeof err), -1);
}
END_TEST

/* ---- configs, controller, epoch, cluster id --------------------------------------- */

START_TEST(test_config_overrides_round_trip)
{
    md_kv *kv;
    size_t n;
    const char *js = "{\"version\":1,\"config\":{\"retention.ms\":\"1000\","
                     "\"cleanup.policy\":\"compact,delete\",\"x\":\"a\\u00e9\\\"\"}}";
    ck_assert_msg(cl_zj_config_parse(EXACT(js), &kv, &n, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(kv[0].name, "retention.ms");
    ck_assert_str_eq(kv[0].value, "1000");
    ck_assert_str_eq(kv[1].value, "compact,delete");
    ck_assert_str_eq(kv[2].value, "a\xc3\xa9\"");
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_config_format(kv, n, &out), 0);
    md_kv *back;
    size_t nb;
    ck_assert_int_eq(cl_zj_config_parse((const char *)out.data, out.len, &back, &nb, err,
                                     sizeof err), 0);
    ck_assert_uint_eq(nb, 3);
    ck_assert_str_eq(back[2].value, kv[2].value);
    md_kv_free(back, nb);
    md_kv_free(kv, n);
    kp_buf_reset(&out);
    ck_assert_int_eq(cl_zj_config_format(NULL, 0, &out), 0);
    ck_assert_str_eq(text_of(&out), "{\"version\":1,\"config\":{}}");
    kp_buf_free(&out);

    js = "{\"version\":1,\"config\":{}}";
    ck_assert_int_eq(cl_zj_config_parse(EXACT(js), &kv, &n, err, sizeof err), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(kv);
    js = "{\"config\":{\"a\":1}}";
    ck_assert_int_eq(cl_zj_config_parse(EXACT(js), &kv, &n, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "must be a string"), "%s", err);
    js = "{\"config\":{\"a\":\"1\",\"a\":\"2\"}}";
    ck_assert_int_eq(cl_zj_config_parse(EXACT(js), &kv, &n, err, sizeof err), -1);
    js = "{\"config\":{\"a\":\"1\",\"b\":null}}";
    ck_assert_int_eq(cl_zj_config_parse(EXACT(js), &kv, &n, err, sizeof err), -1);
    ck_assert_ptr_null(kv);
    js = "{\"config\":{\"a\":\"x\\u0000y\"}}";
    ck_assert_int_eq(cl_zj_config_parse(EXACT(js), &kv, &n, err, sizeof err), -1);
}
END_TEST

START_TEST(test_controller_epoch_and_cluster_id)
{
    int32_t id;
    int64_t ts;
    const char *js = "{\"version\":1,\"brokerid\":1,\"timestamp\":\"1733000000000\"}";
    ck_assert_msg(cl_zj_controller_parse(EXACT(js), &id, &ts, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(id, 1);
    ck_assert_int_eq(ts, 1733000000000LL);
    js = "{\"version\":2,\"brokerid\":3,\"timestamp\":\"5\",\"kraftControllerEpoch\":-1}";
    ck_assert_int_eq(cl_zj_controller_parse(EXACT(js), &id, NULL, err, sizeof err), 0);
    ck_assert_int_eq(id, 3);
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_controller_format(3, 5, &out), 0);
    ck_assert_str_eq(text_of(&out), js);
    js = "{\"version\":1,\"timestamp\":\"5\"}";
    ck_assert_int_eq(cl_zj_controller_parse(EXACT(js), &id, NULL, err, sizeof err), -1);

    int32_t e;
    ck_assert_int_eq(cl_zj_epoch_parse(EXACT("7"), &e, err, sizeof err), 0);
    ck_assert_int_eq(e, 7);
    ck_assert_int_eq(cl_zj_epoch_parse(EXACT(" 12\n"), &e, err, sizeof err), 0);
    ck_assert_int_eq(e, 12);
    ck_assert_int_eq(cl_zj_epoch_parse(EXACT(""), &e, err, sizeof err), -1);
    ck_assert_int_eq(cl_zj_epoch_parse(EXACT("-1"), &e, err, sizeof err), -1);
    ck_assert_int_eq(cl_zj_epoch_parse(EXACT("2147483648"), &e, err, sizeof err), -1);
    ck_assert_int_eq(cl_zj_epoch_parse(EXACT("7x"), &e, err, sizeof err), -1);
    kp_buf_reset(&out);
    ck_assert_int_eq(cl_zj_epoch_format(2147483647, &out), 0);
    ck_assert_str_eq(text_of(&out), "2147483647");

    char cid[MD_CLUSTER_ID_MAX + 1];
    js = "{\"version\":\"1\",\"id\":\"ASNFZ4mrze_-3LqYdlQyEA\"}";
    ck_assert_int_eq(cl_zj_cluster_id_parse(EXACT(js), cid, err, sizeof err), 0);
    ck_assert_str_eq(cid, "ASNFZ4mrze_-3LqYdlQyEA");
    kp_buf_reset(&out);
    ck_assert_int_eq(cl_zj_cluster_id_format(cid, &out), 0);
    ck_assert_str_eq(text_of(&out), js);
    ck_assert_int_eq(cl_zj_cluster_id_parse(EXACT("{\"version\":\"1\"}"), cid, err, sizeof err), -1);

    char path[300];
    js = "{\"version\":2,\"entity_path\":\"topics/orders\"}";
    ck_assert_int_eq(cl_zj_config_change_parse(EXACT(js), path, sizeof path, err, sizeof err), 0);
    ck_assert_str_eq(path, "topics/orders");
    kp_buf_reset(&out);
    ck_assert_int_eq(cl_zj_config_change_format(path, &out), 0);
    ck_assert_str_eq(text_of(&out), js);
    js = "{\"version\":1,\"entity_type\":\"topics\",\"entity_name\":\"t1\"}";
    ck_assert_int_eq(cl_zj_config_change_parse(EXACT(js), path, sizeof path, err, sizeof err), 0);
    ck_assert_str_eq(path, "topics/t1");
    js = "{\"version\":2}";
    ck_assert_int_eq(cl_zj_config_change_parse(EXACT(js), path, sizeof path, err, sizeof err), -1);
    js = "{\"version\":1,\"entity_type\":\"topics\",\"entity_name\":\"t1\"}";
    ck_assert_int_eq(cl_zj_config_change_parse(EXACT(js), path, 5, err, sizeof err), -1);
    kp_buf_free(&out);

    int32_t v;
    ck_assert_int_eq(cl_zj_id_parse("0", 1, &v), 0);
    ck_assert_int_eq(cl_zj_id_parse("2147483647", 10, &v), 0);
    ck_assert_int_eq(v, 2147483647);
    ck_assert_int_eq(cl_zj_id_parse("2147483648", 10, &v), -1);
    ck_assert_int_eq(cl_zj_id_parse("01", 2, &v), -1);
    ck_assert_int_eq(cl_zj_id_parse("", 0, &v), -1);
    ck_assert_int_eq(cl_zj_id_parse("1a", 2, &v), -1);
}
END_TEST

/* Kafka's Sanitizer: what its Java (URLEncoder, then * and + replaced) writes. */
START_TEST(test_sanitize_as_kafka)
{
    char z[64], back[64];
    ck_assert_int_eq(cl_zj_sanitize("al,ice=x y", z, sizeof z), 0);
    ck_assert_str_eq(z, "al%2Cice%3Dx%20y");
    ck_assert_int_eq(cl_zj_desanitize(z, back, sizeof back), 0);
    ck_assert_str_eq(back, "al,ice=x y");
    ck_assert_int_eq(cl_zj_sanitize("a*b@c.d-e_F9", z, sizeof z), 0);
    ck_assert_str_eq(z, "a%2Ab%40c.d-e_F9");
    ck_assert_int_eq(cl_zj_sanitize("\xc3\xa9/%", z, sizeof z), 0);        /* e-acute, '/', '%' */
    ck_assert_str_eq(z, "%C3%A9%2F%25");
    ck_assert_int_eq(cl_zj_desanitize("a+b%2a", back, sizeof back), 0); /* URLDecoder's */
    ck_assert_str_eq(back, "a b*");
    ck_assert_int_eq(cl_zj_desanitize("a%2", back, sizeof back), -1);
    ck_assert_int_eq(cl_zj_desanitize("a%00", back, sizeof back), -1);
    ck_assert_int_eq(cl_zj_sanitize("abc", z, 3), -1);
    ck_assert_int_eq(cl_zj_sanitize(",", z, 3), -1);
    ck_assert(bk_utf8_valid("al,ice=x y \xc3\xa9 \xf0\x9f\x98\x80", 18));
    ck_assert(!bk_utf8_valid("\xc0\xaf", 2));                          /* overlong */
    ck_assert(!bk_utf8_valid("\xed\xa0\x80", 3));                      /* surrogate */
    ck_assert(!bk_utf8_valid("\xc3", 1));                              /* truncated */
    ck_assert(!bk_utf8_valid("\xff", 1));
}
END_TEST

/* ---- hostile input ------------------------------------------------------------------ */

/* Every prefix of a valid znode is refused, with a message, without a
 * read past its end (ASan, under make SANITIZE=1). */
START_TEST(test_every_truncation_is_an_error)
{
    const char *js = "{\"version\":3,\"topic_id\":\"ASNFZ4mrze_-3LqYdlQyEA\","
        "\"partitions\":{\"0\":[1,2,3],\"1\":[2,3,1]},\"adding_replicas\":{},"
        "\"x\":[true,false,null,-1.5e+3,\"\\ud83d\\ude00\"],\"removing_replicas\":{}}";
    size_t n = strlen(js);
    for (size_t i = 0; i < n; i++) {
        char *cut = malloc(i ? i : 1);
        memcpy(cut, js, i);
        zj_topic t;
        err[0] = 0;
        ck_assert_msg(cl_zj_topic_parse(cut, i, &t, err, sizeof err) == -1, "prefix %zu", i);
        ck_assert_msg(err[0], "no message for prefix %zu", i);
        free(cut);
    }
    zj_topic t;
    ck_assert_msg(cl_zj_topic_parse(EXACT(js), &t, err, sizeof err) == 0, "%s", err);
    cl_zj_topic_free(&t);
}
END_TEST

START_TEST(test_deep_nesting_huge_numbers_and_garbage)
{
    char deep[4096];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{\"x\":");
    for (int i = 0; i < 1000; i++)
        deep[k++] = '[';
    for (int i = 0; i < 1000; i++)
        deep[k++] = ']';
    deep[k++] = '}';
    deep[k] = 0;
    zj_broker b;
    ck_assert_int_eq(cl_zj_broker_parse(EXACT(deep), &b, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "deeper"), "%s", err);

    /* 31 levels of unknown value are fine (forward compatibility). */
    k = (size_t)snprintf(deep, sizeof deep, "{\"x\":");
    for (int i = 0; i < ZJ_DEPTH_MAX - 1; i++)
        deep[k++] = '[';
    for (int i = 0; i < ZJ_DEPTH_MAX - 1; i++)
        deep[k++] = ']';
    k += (size_t)snprintf(deep + k, sizeof deep - k, ",\"host\":\"h\",\"port\":1}");
    ck_assert_msg(cl_zj_broker_parse(EXACT(deep), &b, err, sizeof err) == 0, "%s", err);

    static const char *const bad[] = {
        "", " ", "null", "[]", "{", "}", "{\"host\":\"h\",\"port\":1}x",
        "{\"host\":\"h\" \"port\":1}", "{\"host\":\"h\",\"port\":1,}", "{,}",
        "{\"port\":99999999999999999999999999,\"host\":\"h\"}",
        "{\"port\":-9223372036854775809,\"host\":\"h\"}",
        "{\"port\":1e3,\"host\":\"h\"}", "{\"port\":01,\"host\":\"h\"}",
        "{\"host\":\"a\\x\",\"port\":1}", "{\"host\":\"\\ud800\",\"port\":1}",
        "{\"host\":\"\\u12\",\"port\":1}", "{\"host\":\"a\tb\",\"port\":1}",
        "{\"host\":\"h\",\"port\":1,\"z\":tru}", "{\"host\":\"h\",\"port\":1,\"z\":-}",
        "{\"host\":\"h\",\"port\":1,\"z\":1.}", "{\"host\":\"h\",\"port\":1,\"z\":\"}",
        "{\"host\":\"h\",\"port\":1,\"timestamp\":\"12a\"}",
        "{\"host\":\"h\",\"port\":1,\"timestamp\":\"99999999999999999999\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err[0] = 0;
        ck_assert_msg(cl_zj_broker_parse(EXACT(bad[i]), &b, err, sizeof err) == -1,
                      "accepted %s", bad[i]);
        ck_assert_msg(err[0], "no message for %s", bad[i]);
    }
    /* Skipped numbers may use all of JSON's forms. */
    const char *ok = "{\"z\":[-0,0.5,1E+9,2e-3,-1.25E2],\"host\":\"h\",\"port\":1}";
    ck_assert_msg(cl_zj_broker_parse(EXACT(ok), &b, err, sizeof err) == 0, "%s", err);
    /* Too long for the struct: refused, not truncated. */
    char longhost[600];
    snprintf(longhost, sizeof longhost, "{\"host\":\"%0300d\",\"port\":1}", 0);
    ck_assert_int_eq(cl_zj_broker_parse(EXACT(longhost), &b, err, sizeof err), -1);
    ck_assert_msg(strstr(err, "longer than"), "%s", err);
}
END_TEST

START_TEST(test_log_dir_event_kafka_form)
{
    int32_t id, ev;
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_log_dir_event_format(3, 1, &out), 0);
    ck_assert_str_eq(text_of(&out), "{\"version\":1,\"broker\":3,\"event\":1}");
    const char *js = "{\"version\":1,\"broker\":3,\"event\":1}";
    ck_assert_msg(cl_zj_log_dir_event_parse(EXACT(js), &id, &ev, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(id, 3);
    ck_assert_int_eq(ev, 1);
    js = "{\"event\":1,\"broker\":7,\"extra\":[1,{\"a\":2}]}";
    ck_assert_int_eq(cl_zj_log_dir_event_parse(EXACT(js), &id, &ev, err, sizeof err), 0);
    ck_assert_int_eq(id, 7);
    js = "{\"version\":1,\"broker\":7}";
    ck_assert_int_eq(cl_zj_log_dir_event_parse(EXACT(js), &id, &ev, err, sizeof err), 0);
    ck_assert_int_eq(ev, -1);
    const char *bad[] = { "{\"version\":1,\"event\":1}", "{\"broker\":-1,\"event\":1}",
                          "{\"broker\":2147483648}", "{\"broker\":\"3\"}", "[]", "",
                          "{\"broker\":3,", "null" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(cl_zj_log_dir_event_parse(EXACT(bad[i]), &id, &ev, err, sizeof err) == -1,
                      "%s", bad[i]);
    kp_buf_free(&out);
}
END_TEST

/* /latest_producer_id_block as Kafka's ProducerIdBlockZNode writes it. */
START_TEST(test_producer_id_block_kafka_form)
{
    char err[256];
    kp_buf out;
    kp_buf_init(&out);
    ck_assert_int_eq(cl_zj_pid_block_format(2, 1000, 1999, &out), 0);
    ck_assert_str_eq(text_of(&out),
                     "{\"version\":1,\"broker\":2,\"block_start\":\"1000\",\"block_end\":\"1999\"}");
    int64_t end = 0;
    ck_assert_msg(cl_zj_pid_block_parse(EXACT(text_of(&out)), &end, err, sizeof err) == 0, "%s",
                  err);
    ck_assert_int_eq(end, 1999);
    const char *js = "{\"version\":1,\"broker\":0,\"block_start\":\"9223372036854774807\","
                     "\"block_end\":\"9223372036854775806\"}";
    ck_assert_int_eq(cl_zj_pid_block_parse(EXACT(js), &end, err, sizeof err), 0);
    ck_assert_int_eq(end, INT64_MAX - 1);
    const char *bad[] = { "{\"version\":1,\"block_start\":\"0\"}", "{\"block_end\":\"x\"}",
                          "{\"block_end\":\"-5\"}", "[]", "", "null",
                          "{\"block_end\":\"99999999999999999999\"}" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        ck_assert_msg(cl_zj_pid_block_parse(EXACT(bad[i]), &end, err, sizeof err) == -1, "%s",
                      bad[i]);
    kp_buf_free(&out);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_producer_id_block_kafka_form,
        test_broker_kafka_v5_registration, test_broker_without_plaintext_host_is_null,
        test_broker_named_listeners_by_name,
        test_broker_format_escapes_and_round_trips, test_topic_v3_assignment,
        test_topic_reassignment_maps_round_trip_as_replica_bits,
        test_topic_refuses_gaps_duplicates_and_bad_brokers, test_state_kafka_form_and_round_trip,
        test_config_overrides_round_trip, test_controller_epoch_and_cluster_id,
        test_sanitize_as_kafka, test_log_dir_event_kafka_form,
        test_every_truncation_is_an_error, test_deep_nesting_huge_numbers_and_garbage,
    };
    return unit_run("zk_json", "zk_json", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
