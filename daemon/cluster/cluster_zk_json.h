/*
 * daemon/cluster/cluster_zk_json.h — Kafka's ZooKeeper-mode znode contents, parsed and
 * formatted (prefix zj_).  Pure functions: no ZooKeeper, no SQLite, no
 * loop; the cluster-mode code (daemon/zk*.c, the mirror, the controller)
 * reads znodes with the parsers and writes them with the formatters.
 *
 * Formats (Kafka's ZkData.scala; metadata/README.md tables the paths):
 *   /cluster/id                         {"version":"1","id":"<22-char id>"}
 *   /brokers/ids/<id>                   v5 registration (zj_broker)
 *   /brokers/topics/<t>                 {"version":3,"topic_id":…,"partitions":{"0":[1,2]},…}
 *   /brokers/topics/<t>/partitions/<p>/state
 *                                       {"controller_epoch":3,"leader":1,"version":1,
 *                                        "leader_epoch":5,"isr":[1,2]}
 *   /config/topics/<t>                  {"version":1,"config":{"retention.ms":"1000"}}
 *   /controller                         {"version":2,"brokerid":1,"timestamp":"<ms>",
 *                                        "kraftControllerEpoch":-1} (v1 read too)
 *   /controller_epoch                   a decimal integer, e.g. "7"
 *   /config/changes/config_change_<n>   {"version":2,"entity_path":"topics/<t>"}
 *   /kafka-acl/<Type>/<name>            {"version":1,"acls":[{"principal":…,
 *                                        "permissionType":"Allow","operation":"Read",
 *                                        "host":"*"}]} (and -extended/prefixed/…)
 *
 * Parsers take (json, len): the bytes need not be NUL-terminated and are
 * never read past len.  They return 0, or -1 with err naming what is wrong
 * ("partition 3: broker id -2").  Unknown keys are skipped (a newer Kafka
 * or Sluice may add some); nesting deeper than ZJ_DEPTH_MAX, numbers out of
 * range, truncated text and trailing bytes are errors.  Formatters append
 * to out and return 0, or -1 when out could not grow (out->err).
 */
#ifndef SLUICE_ZK_JSON_H
#define SLUICE_ZK_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daemon/broker.h"
#include "metadata/md.h"
#include "protocol/kp.h"

#define ZJ_DEPTH_MAX 32

/* ---- /brokers/ids/<id> ------------------------------------------------------ */
typedef struct zj_broker {
    int32_t id;                  /* from the znode's name, not its JSON:
                                    cl_zj_broker_parse sets -1 */
    char host[256];
    int32_t port;
    char rack[64];               /* "" when none */
    char endpoints[512];         /* joined "PLAINTEXT://h:p,SSL://h:p" */
    int64_t timestamp_ms;        /* registration time; -1 when absent */
    int64_t czxid;               /* the znode's creation zxid (its stat, not its JSON):
                                    Kafka's broker epoch; 0 unknown */
    int64_t session;             /* the session that made it (its stat's
                                    ephemeralOwner); 0 unknown */
    /* Formatting: listener_security_protocol_map as "NAME:PROTO,..."; ""
     * maps each listener named like a protocol to it (others PLAINTEXT). */
    char protocol_map[512];
    /* Parsing: endpoints split by listener name (the first ZJ_EPS_MAX). */
    struct zj_endpoint {
        char name[64];
        char host[256];
        int32_t port;
    } eps[8];
    int neps;
} zj_broker;
#define ZJ_EPS_MAX 8
/* The endpoint of listener name (case-insensitive) in b, or NULL. */
const struct zj_endpoint *cl_zj_broker_endpoint(const zj_broker *b, const char *name);

/* host/port come from "host"/"port", or from the first PLAINTEXT endpoint
 * (else the first endpoint) when "host" is null, as Kafka writes it for
 * brokers without a PLAINTEXT listener. */
int cl_zj_broker_parse(const char *json, size_t len, zj_broker *out, char *err, size_t errlen);
/* Kafka's v5 form; endpoints "" is written as PLAINTEXT://host:port; rack
 * only when set. */
int cl_zj_broker_format(const zj_broker *b, kp_buf *out);

/* ---- /brokers/topics/<t> --------------------------------------------------- */
typedef struct zj_topic {
    bool has_id;                 /* version 3 with a non-zero topic_id */
    uint8_t id[16];
    int32_t npartitions;
    /* [npartitions], malloc'd: only nreplicas/replicas set; leader -1,
     * epochs 0, nisr 0, zk_version -1 (the state znodes hold the rest). */
    md_partition_state *parts;
} zj_topic;

/* Partitions must be exactly "0".."n-1", each with 1..MD_REPLICAS_MAX
 * distinct broker ids >= 0.  Versions 1 and 2 (no topic_id) are read too.
 * On success the caller frees with cl_zj_topic_free; on error nothing is
 * left allocated. */
int  cl_zj_topic_parse(const char *json, size_t len, zj_topic *out, char *err, size_t errlen);
void cl_zj_topic_free(zj_topic *t);
/* Version 3 with topic_id; id NULL writes version 2 without it.  Each
 * part's adding/removing bits become "adding_replicas"/"removing_replicas"
 * (Kafka's reassignment maps; cl_zj_topic_parse reads them back into the bits,
 * ignoring ids that are not replicas). */
int  cl_zj_topic_format(const uint8_t *id, const md_partition_state *parts, int32_t n,
                     kp_buf *out);

/* ---- /brokers/topics/<t>/partitions/<p>/state -------------------------------- */
/* Sets leader (>= -1), leader_epoch, controller_epoch and the ISR (distinct
 * ids >= 0, at most MD_REPLICAS_MAX, in the znode's order) of *st; leaves
 * replicas and zk_version as they were (they come from the topic znode and
 * the znode's Stat). */
int cl_zj_state_parse(const char *json, size_t len, md_partition_state *st,
                   char *err, size_t errlen);
int cl_zj_state_format(const md_partition_state *st, kp_buf *out);

/* ---- /config/topics/<t> ------------------------------------------------------- */
/* The "config" object as name/value pairs in the znode's order (values
 * must be strings); *kv malloc'd (md_kv_free), NULL when n == 0.  Values
 * are not checked here: md_topic_mirror_put checks and skips bad ones. */
int cl_zj_config_parse(const char *json, size_t len, md_kv **kv, size_t *n,
                    char *err, size_t errlen);
int cl_zj_config_format(const md_kv *kv, size_t n, kp_buf *out);

/* ---- /controller, /controller_epoch, /cluster/id ----------------------------- */
/* timestamp_ms may be NULL; -1 when the znode has none. */
int cl_zj_controller_parse(const char *json, size_t len, int32_t *broker_id,
                        int64_t *timestamp_ms, char *err, size_t errlen);
int cl_zj_controller_format(int32_t broker_id, int64_t timestamp_ms, kp_buf *out);
/* /latest_producer_id_block (Kafka's ProducerIdBlockZNode, version 1):
 * {"version":1,"broker":B,"block_start":"S","block_end":"E"}, the last
 * block reserved by any broker. */
int cl_zj_pid_block_parse(const char *json, size_t len, int64_t *block_end, char *err,
                          size_t errlen);
int cl_zj_pid_block_format(int32_t broker_id, int64_t start, int64_t end, kp_buf *out);
/* A decimal integer 0..INT32_MAX, surrounding whitespace allowed. */
int cl_zj_epoch_parse(const char *text, size_t len, int32_t *epoch, char *err, size_t errlen);
int cl_zj_epoch_format(int32_t epoch, kp_buf *out);
int cl_zj_cluster_id_parse(const char *json, size_t len, char out[MD_CLUSTER_ID_MAX + 1],
                        char *err, size_t errlen);
int cl_zj_cluster_id_format(const char *id, kp_buf *out);

/* ---- /config/changes/config_change_<seq> ---------------------------------------- */
/* The entity whose config changed, as "topics/<t>" or "brokers/<id>":
 * version 2's "entity_path", or version 1's "entity_type" and
 * "entity_name" joined.  out[cap]; -1 when absent or too long. */
int cl_zj_config_change_parse(const char *json, size_t len, char *entity_path, size_t cap,
                           char *err, size_t errlen);
/* Version 2: {"version":2,"entity_path":"topics/t"}. */
int cl_zj_config_change_format(const char *entity_path, kp_buf *out);
/* ---- /log_dir_event_notification/log_dir_event_<seq> ----------------------------- */
/* Kafka's LogDirEventNotification: {"version":1,"broker":1,"event":1}
 * (event 1: a log directory of that broker failed).  parse: -1 when the
 * broker is missing or out of range; *event -1 when absent. */
int cl_zj_log_dir_event_parse(const char *json, size_t len, int32_t *broker, int32_t *event,
                           char *err, size_t errlen);
int cl_zj_log_dir_event_format(int32_t broker, int32_t event, kp_buf *out);
/* An entity name as Kafka's Sanitizer writes it into a znode's name
 * (/config/users/<name>): java.net.URLEncoder's form (A-Z a-z 0-9 . - _
 * kept, every other byte %XX) with '*' as %2A and ' ' as %20.  out[cap]
 * (3 × strlen + 1 always suffices); -1 when it does not fit.  desanitize
 * is URLDecoder's ('+' is ' '): -1 for a malformed %, or a NUL. */
int cl_zj_sanitize(const char *name, char *out, size_t cap);
int cl_zj_desanitize(const char *name, char *out, size_t cap);
/* ---- /kafka-acl/<Type>/<name>, /kafka-acl-extended/prefixed/<Type>/<name> -------- */
/* {"version":1,"acls":[{"principal":"User:a","permissionType":"Allow",
 *   "operation":"Read","host":"*"}]}: the ACLs of one resource pattern.
 * Parse fills principal, permission, operation and host of each md_acl
 * (as written: Kafka's "Allow", "Read"; the others NULL); *out malloc'd
 * (md_acl_free).  Format writes those four fields as given. */
int cl_zj_acls_parse(const char *json, size_t len, md_acl **out, size_t *n,
                  char *err, size_t errlen);
int cl_zj_acls_format(const md_acl *acls, size_t n, kp_buf *out);
/* /kafka-acl-extended-changes/acl_changes_<seq>: {"version":1,"resourceType":
 * "Topic","name":"x","patternType":"Prefixed"}. */
int cl_zj_acl_change_format(const char *type, const char *name, kp_buf *out);

/* A znode's child name as an id: "0".."2147483647", no sign, no leading
 * zeros (broker ids under /brokers/ids, partitions under .../partitions).
 * 0 or -1. */
int cl_zj_id_parse(const char *name, size_t len, int32_t *out);

#endif
