/*
 * libFuzzer target: Kafka's znode JSON (daemon/cluster/cluster_zk_json.c).  The input is
 * given to every parser as a znode's bytes (not NUL-terminated; libFuzzer's
 * buffer is exactly size bytes, so ASan sees any read past the end).  An
 * error must come with a message.  Whatever parses is formatted, and the
 * formatted text must parse again to the same values: what a broker reads
 * from ZooKeeper it can write back.  A crash, sanitizer report, leak, an
 * error without a message or a round trip that changes a value is a
 * finding.  Seeds: Kafka's own znode texts (tests/fuzz/corpus/).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/cluster/cluster_zk_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void need(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "zk_json: %s\n", what);
        abort();
    }
}

static void failed_with_message(int rc, const char *err)
{
    if (rc)
        need(err[0] != 0, "an error without a message");
}

static bool same_state(const md_partition_state *a, const md_partition_state *b)
{
    return a->leader == b->leader && a->leader_epoch == b->leader_epoch &&
           a->controller_epoch == b->controller_epoch && a->nisr == b->nisr &&
           !memcmp(a->isr, b->isr, (size_t)a->nisr * sizeof *a->isr);
}

static void broker(const char *js, size_t n, kp_buf *out)
{
    zj_broker b, back;
    char err[256] = "";
    int rc = cl_zj_broker_parse(js, n, &b, err, sizeof err);
    failed_with_message(rc, err);
    if (rc)
        return;
    kp_buf_reset(out);
    need(cl_zj_broker_format(&b, out) == 0, "broker format");
    err[0] = 0;
    rc = cl_zj_broker_parse((const char *)out->data, out->len, &back, err, sizeof err);
    if (rc)
        fprintf(stderr, "%s\n", err);
    need(rc == 0, "broker: formatted text does not parse");
    need(!strcmp(b.host, back.host) && b.port == back.port && !strcmp(b.rack, back.rack) &&
         b.timestamp_ms == back.timestamp_ms, "broker round trip");
    need(!b.endpoints[0] || !strcmp(b.endpoints, back.endpoints), "broker endpoints");
}

static void topic(const char *js, size_t n, kp_buf *out)
{
    zj_topic t, back;
    char err[256] = "";
    int rc = cl_zj_topic_parse(js, n, &t, err, sizeof err);
    failed_with_message(rc, err);
    if (rc)
        return;
    kp_buf_reset(out);
    need(cl_zj_topic_format(t.has_id ? t.id : NULL, t.parts, t.npartitions, out) == 0,
         "topic format");
    need(cl_zj_topic_parse((const char *)out->data, out->len, &back, err, sizeof err) == 0,
         "topic: formatted text does not parse");
    need(back.has_id == t.has_id && (!t.has_id || !memcmp(back.id, t.id, 16)) &&
         back.npartitions == t.npartitions, "topic round trip");
    for (int32_t p = 0; p < t.npartitions; p++)
        need(back.parts[p].nreplicas == t.parts[p].nreplicas &&
             !memcmp(back.parts[p].replicas, t.parts[p].replicas,
                     (size_t)t.parts[p].nreplicas * sizeof(int32_t)), "topic replicas");
    cl_zj_topic_free(&back);
    cl_zj_topic_free(&t);
}

static void state(const char *js, size_t n, kp_buf *out)
{
    md_partition_state st, back;
    memset(&st, 0, sizeof st);
    memset(&back, 0, sizeof back);
    char err[256] = "";
    int rc = cl_zj_state_parse(js, n, &st, err, sizeof err);
    failed_with_message(rc, err);
    if (rc)
        return;
    kp_buf_reset(out);
    need(cl_zj_state_format(&st, out) == 0, "state format");
    need(cl_zj_state_parse((const char *)out->data, out->len, &back, err, sizeof err) == 0 &&
         same_state(&st, &back), "state round trip");
}

static void config(const char *js, size_t n, kp_buf *out)
{
    md_kv *kv, *back;
    size_t nkv, nback;
    char err[256] = "";
    int rc = cl_zj_config_parse(js, n, &kv, &nkv, err, sizeof err);
    failed_with_message(rc, err);
    if (rc)
        return;
    kp_buf_reset(out);
    need(cl_zj_config_format(kv, nkv, out) == 0, "config format");
    need(cl_zj_config_parse((const char *)out->data, out->len, &back, &nback, err,
                         sizeof err) == 0 && nback == nkv, "config round trip");
    for (size_t i = 0; i < nkv; i++)
        need(!strcmp(kv[i].name, back[i].name) && !strcmp(kv[i].value, back[i].value),
             "config values");
    md_kv_free(back, nback);
    md_kv_free(kv, nkv);
}

/* /kafka-acl/<Type>/<name>: parsed, formatted, parsed again alike. */
static void acls(const char *js, size_t n, kp_buf *out)
{
    md_acl *a, *back;
    size_t na, nback;
    char err[256] = "";
    int rc = cl_zj_acls_parse(js, n, &a, &na, err, sizeof err);
    failed_with_message(rc, err);
    if (rc)
        return;
    kp_buf_reset(out);
    need(cl_zj_acls_format(a, na, out) == 0, "acls format");
    need(cl_zj_acls_parse((const char *)out->data, out->len, &back, &nback, err,
                       sizeof err) == 0 && nback == na, "acls round trip");
    for (size_t i = 0; i < na; i++)
        need(!strcmp(a[i].principal, back[i].principal) && !strcmp(a[i].host, back[i].host) &&
             !strcmp(a[i].operation, back[i].operation) &&
             !strcmp(a[i].permission, back[i].permission), "acl values");
    md_acl_free(back, nback);
    md_acl_free(a, na);
}

static void small_ones(const char *js, size_t n, kp_buf *out)
{
    char err[256] = "";
    int32_t id, id2, epoch, epoch2;
    int64_t ts, ts2;
    int rc = cl_zj_controller_parse(js, n, &id, &ts, err, sizeof err);
    failed_with_message(rc, err);
    if (!rc) {
        kp_buf_reset(out);
        need(cl_zj_controller_format(id, ts, out) == 0 &&
             cl_zj_controller_parse((const char *)out->data, out->len, &id2, &ts2, err,
                                 sizeof err) == 0 && id == id2 && ts == ts2,
             "controller round trip");
    }
    err[0] = 0;
    rc = cl_zj_epoch_parse(js, n, &epoch, err, sizeof err);
    failed_with_message(rc, err);
    if (!rc) {
        kp_buf_reset(out);
        need(cl_zj_epoch_format(epoch, out) == 0 &&
             cl_zj_epoch_parse((const char *)out->data, out->len, &epoch2, err,
                            sizeof err) == 0 && epoch == epoch2, "epoch round trip");
    }
    int32_t ev, ev2;
    err[0] = 0;
    rc = cl_zj_log_dir_event_parse(js, n, &id, &ev, err, sizeof err);
    failed_with_message(rc, err);
    if (!rc) {
        kp_buf_reset(out);
        need(cl_zj_log_dir_event_format(id, ev, out) == 0 &&
             cl_zj_log_dir_event_parse((const char *)out->data, out->len, &id2, &ev2, err,
                                    sizeof err) == 0 && id == id2 && ev == ev2,
             "log dir event round trip");
    }
    char cid[MD_CLUSTER_ID_MAX + 1], cid2[MD_CLUSTER_ID_MAX + 1];
    err[0] = 0;
    rc = cl_zj_cluster_id_parse(js, n, cid, err, sizeof err);
    failed_with_message(rc, err);
    if (!rc) {
        kp_buf_reset(out);
        need(cl_zj_cluster_id_format(cid, out) == 0 &&
             cl_zj_cluster_id_parse((const char *)out->data, out->len, cid2, err,
                                 sizeof err) == 0 && !strcmp(cid, cid2), "cluster id round trip");
    }
    char path[300], path2[300];
    err[0] = 0;
    rc = cl_zj_config_change_parse(js, n, path, sizeof path, err, sizeof err);
    failed_with_message(rc, err);
    if (!rc) {
        kp_buf_reset(out);
        need(cl_zj_config_change_format(path, out) == 0 &&
             cl_zj_config_change_parse((const char *)out->data, out->len, path2, sizeof path2,
                                    err, sizeof err) == 0 && !strcmp(path, path2),
             "config change round trip");
    }
    int32_t v;
    (void)cl_zj_id_parse(js, n, &v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *js = (const char *)data;
    kp_buf out;
    kp_buf_init(&out);
    broker(js, size, &out);
    topic(js, size, &out);
    state(js, size, &out);
    config(js, size, &out);
    acls(js, size, &out);
    small_ones(js, size, &out);
    kp_buf_free(&out);
    return 0;
}
