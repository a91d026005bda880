/*
 * metadata/config.c — topic config definitions, validation, resolution.
 *
 * Design note.
 *
 * defs[] is the one list of topic configs Sluice knows: Kafka's topic-level
 * name, the broker-level key that sets its cluster default, the type, the
 * default Kafka ships, the allowed range or values.  Everything else reads
 * it: md_config_check (CreateTopics, AlterConfigs, the SQL surface),
 * md_config_effective (DescribeConfigs: value and source) and
 * md_topic_config_resolve (the typed struct the data path uses).
 *
 * Promises:
 *   P1. A value md_config_check accepts, md_topic_config_resolve parses to
 *       the same thing: both go through parse_value().
 *   P2. Messages use Kafka's shapes so operators recognise them:
 *       "Invalid value X for configuration Y: <what is allowed>",
 *       "Unknown topic config name: X".
 *   P3. Numbers parse completely: surrounding blanks are trimmed (Kafka
 *       trims too), anything else that is not part of the number is an
 *       error, as is overflow.  Booleans are true/false in any case, enum
 *       strings exact (Kafka compares case-sensitively), list items are
 *       comma-separated and trimmed.
 *
 * Resolution order (md_config_effective): topic override, else broker
 * override, else default; both arrays are keyed by the topic-level name
 * (the daemon maps log.retention.ms → retention.ms when reading its
 * properties, via md_config_def_by_broker_key).  With duplicates in an
 * array, the last one wins, as when Kafka folds a request into Properties.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"
#include "protocol/kp.h"

#define LMAX INT64_MAX
#define IMAX INT32_MAX

static const char *const cleanup_policies[] = { "delete", "compact", NULL };
static const char *const compression_types[] = {
    "uncompressed", "zstd", "lz4", "snappy", "gzip", "producer", NULL };
static const char *const timestamp_types[] = { "CreateTime", "LogAppendTime", NULL };
/* Confluent's subject name strategies: the class names Confluent Server
 * takes, then the short names; md_topic_config keeps the index mod 3. */
static const char *const subject_strategies[] = {
    "io.confluent.kafka.serializers.subject.TopicNameStrategy",
    "io.confluent.kafka.serializers.subject.RecordNameStrategy",
    "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy",
    "TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy", NULL };
static const char *const validation_levels[] = { "id", "decode", NULL };
#define STRATEGY_DEFAULT "io.confluent.kafka.serializers.subject.TopicNameStrategy"
#define STRATEGY_DOC "subject a record's schema id must be registered under: " \
    "TopicNameStrategy <topic>-key|value, RecordNameStrategy the record's full name, " \
    "TopicRecordNameStrategy <topic>-<full name>"


/* Sorted by name (Kafka's DescribeConfigs lists them so, and tests compare). */
static const md_config_def defs[] = {
    { "cleanup.policy", "log.cleanup.policy", MD_CT_LIST, "delete", 0, 0,
      cleanup_policies, false,
      "delete: discard old segments by retention; compact: keep the last "
      "record of each key" },
    { "compression.type", "compression.type", MD_CT_STRING, "producer", 0, 0,
      compression_types, false,
      "codec stored batches must use; producer keeps what the client sent" },
    /* Confluent Server's schema validation (issue 31, daemon/registry/sr_validate.c) */
    { "confluent.key.schema.validation", "confluent.key.schema.validation", MD_CT_BOOL,
      "false", 0, 0, NULL, false,
      "whether each record's key must carry the id of a schema registered under its subject" },
    { "confluent.key.subject.name.strategy", "confluent.key.subject.name.strategy",
      MD_CT_STRING, STRATEGY_DEFAULT, 0, 0, subject_strategies, false, STRATEGY_DOC },
    { "confluent.value.schema.validation", "confluent.value.schema.validation", MD_CT_BOOL,
      "false", 0, 0, NULL, false,
      "whether each record's value must carry the id of a schema registered under its subject" },
    { "confluent.value.subject.name.strategy", "confluent.value.subject.name.strategy",
      MD_CT_STRING, STRATEGY_DEFAULT, 0, 0, subject_strategies, false, STRATEGY_DOC },
    { "delete.retention.ms", "log.cleaner.delete.retention.ms", MD_CT_LONG,
      "86400000", 0, LMAX, NULL, false,
      "how long tombstones stay readable in a compacted topic" },
    { "file.delete.delay.ms", "log.segment.delete.delay.ms", MD_CT_LONG,
      "60000", 0, LMAX, NULL, false,
      "wait before removing a deleted segment's files" },
    { "flush.messages", "log.flush.interval.messages", MD_CT_LONG,
      "9223372036854775807", 1, LMAX, NULL, false,
      "fsync the log after this many messages" },
    { "flush.ms", "log.flush.interval.ms", MD_CT_LONG,
      "9223372036854775807", 0, LMAX, NULL, false,
      "fsync the log after this long" },
    { "index.interval.bytes", "log.index.interval.bytes", MD_CT_INT,
      "4096", 0, IMAX, NULL, false,
      "bytes of log between two offset-index entries" },
    { "max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", MD_CT_LONG,
      "9223372036854775807", 1, LMAX, NULL, false,
      "longest a record stays uncompacted" },
    { "max.message.bytes", "message.max.bytes", MD_CT_INT,
      "1048588", 0, IMAX, NULL, false,
      "largest record batch the topic accepts" },
    { "message.downconversion.enable", "log.message.downconversion.enable",
      MD_CT_BOOL, "true", 0, 0, NULL, false,
      "whether old fetch versions get down-converted batches" },
    { "message.format.version", "log.message.format.version", MD_CT_STRING,
      "3.0-IV1", 0, 0, NULL, false,
      "accepted for compatibility; Sluice always writes format v2" },
    /* KIP-937 (Kafka 3.6) splits the difference bound in two; a bound left
     * at its default falls back to difference.max.ms (Kafka's LogConfig). */
    { "message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms",
      MD_CT_LONG, "9223372036854775807", 0, LMAX, NULL, false,
      "largest allowed lead of a CreateTime timestamp over the broker clock" },
    { "message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms",
      MD_CT_LONG, "9223372036854775807", 0, LMAX, NULL, false,
      "largest allowed lag of a CreateTime timestamp behind the broker clock" },
    { "message.timestamp.difference.max.ms",
      "log.message.timestamp.difference.max.ms", MD_CT_LONG,
      "9223372036854775807", 0, LMAX, NULL, false,
      "largest allowed gap between a CreateTime timestamp and the broker clock" },
    { "message.timestamp.type", "log.message.timestamp.type", MD_CT_STRING,
      "CreateTime", 0, 0, timestamp_types, false,
      "CreateTime keeps the producer's timestamp; LogAppendTime stamps on append" },
    { "min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio",
      MD_CT_DOUBLE, "0.5", 0, 1, NULL, false,
      "dirty fraction of the log that triggers compaction" },
    { "min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms", MD_CT_LONG,
      "0", 0, LMAX, NULL, false,
      "shortest a record stays uncompacted" },
    { "min.insync.replicas", "min.insync.replicas", MD_CT_INT,
      "1", 1, IMAX, NULL, false,
      "replicas that must have a write for acks=all to succeed" },
    { "preallocate", "log.preallocate", MD_CT_BOOL, "false", 0, 0, NULL, false,
      "preallocate segment files on creation" },
    { "retention.bytes", "log.retention.bytes", MD_CT_LONG,
      "-1", -1, LMAX, NULL, false,
      "size a partition may reach before old segments go; -1 unlimited" },
    { "retention.ms", "log.retention.ms", MD_CT_LONG,
      "604800000", -1, LMAX, NULL, false,
      "age after which old segments go; -1 forever" },
    { "segment.bytes", "log.segment.bytes", MD_CT_INT,
      "1073741824", 14, IMAX, NULL, false,
      "size at which a new segment is rolled" },
    { "segment.index.bytes", "log.index.size.max.bytes", MD_CT_INT,
      "10485760", 4, IMAX, NULL, false,
      "size of a segment's offset index" },
    { "segment.jitter.ms", "log.roll.jitter.ms", MD_CT_LONG,
      "0", 0, LMAX, NULL, false,
      "random delay subtracted from segment.ms to spread rolls" },
    { "segment.ms", "log.roll.ms", MD_CT_LONG,
      "604800000", 1, LMAX, NULL, false,
      "age at which a new segment is rolled" },
    { "sluice.key.schema.validation.level", "sluice.key.schema.validation.level",
      MD_CT_STRING, "id", 0, 0, validation_levels, false,
      "id: the key's schema id is checked; decode: its Avro body must decode too" },
    { "sluice.value.schema.validation.level", "sluice.value.schema.validation.level",
      MD_CT_STRING, "id", 0, 0, validation_levels, false,
      "id: the value's schema id is checked; decode: its Avro body must decode too" },
    { "unclean.leader.election.enable", "unclean.leader.election.enable",
      MD_CT_BOOL, "false", 0, 0, NULL, false,
      "whether an out-of-sync replica may become leader (data loss)" },
};
#define NDEFS (sizeof defs / sizeof defs[0])

const md_config_def *md_config_defs(size_t *n)
{
    *n = NDEFS;
    return defs;
}

const md_config_def *md_config_def_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < NDEFS; i++)
        if (strcmp(defs[i].name, name) == 0)
            return &defs[i];
    return NULL;
}

const md_config_def *md_config_def_by_broker_key(const char *broker_key)
{
    if (!broker_key)
        return NULL;
    for (size_t i = 0; i < NDEFS; i++)
        if (strcmp(defs[i].broker_key, broker_key) == 0)
            return &defs[i];
    return NULL;
}

/* A parsed value: i for LONG/INT/BOOL, d for DOUBLE, bits (one per
 * allowed[] entry) for STRING-with-allowed and LIST. */
struct val {
    int64_t i;
    double d;
    unsigned bits;
};

/* The span [*b, *e) without surrounding blanks. */
static void trim(const char **b, const char **e)
{
    while (*b < *e && isspace((unsigned char)**b))
        (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1]))
        (*e)--;
}

static int allowed_index(const char *const *allowed, const char *s, size_t len)
{
    for (int i = 0; allowed[i]; i++)
        if (strlen(allowed[i]) == len && memcmp(allowed[i], s, len) == 0)
            return i;
    return -1;
}

static void allowed_text(const char *const *allowed, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = 0;
    for (int i = 0; allowed[i] && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "",
                                allowed[i]);
}

/* "must be …" for def, into buf. */
static void rule_text(const md_config_def *d, char *buf, size_t len)
{
    char list[128];
    const char *what = d->type == MD_CT_INT ? "an int" : "a long";
    switch (d->type) {
    case MD_CT_LONG:
    case MD_CT_INT: {
        int64_t tmax = d->type == MD_CT_INT ? IMAX : LMAX;
        if (d->max < tmax)
            snprintf(buf, len, "must be %s between %lld and %lld", what,
                     (long long)d->min, (long long)d->max);
        else
            snprintf(buf, len, "must be %s >= %lld", what, (long long)d->min);
        break;
    }
    case MD_CT_DOUBLE:
        snprintf(buf, len, "must be a number between %lld and %lld",
                 (long long)d->min, (long long)d->max);
        break;
    case MD_CT_BOOL:
        snprintf(buf, len, "must be true or false");
        break;
    case MD_CT_STRING:
        if (d->allowed) {
            allowed_text(d->allowed, list, sizeof list);
            snprintf(buf, len, "must be one of: %s", list);
        } else {
            snprintf(buf, len, "must not be empty");
        }
        break;
    case MD_CT_LIST:
        allowed_text(d->allowed, list, sizeof list);
        snprintf(buf, len, "must be a comma-separated list of: %s", list);
        break;
    }
}

/* 0 if value is valid for d (result in *v), -1 otherwise. */
static int parse_value(const md_config_def *d, const char *value, struct val *v)
{
    const char *b = value, *e = value + strlen(value);
    memset(v, 0, sizeof *v);
    trim(&b, &e);
    if (b == e)
        return -1;
    switch (d->type) {
    case MD_CT_LONG:
    case MD_CT_INT: {
        char buf[32], *end;
        if ((size_t)(e - b) >= sizeof buf)
            return -1;
        memcpy(buf, b, (size_t)(e - b));
        buf[e - b] = 0;
        if (!(isdigit((unsigned char)buf[0]) || buf[0] == '-' || buf[0] == '+'))
            return -1;
        errno = 0;
        long long x = strtoll(buf, &end, 10);
        if (errno || *end || x < d->min || x > d->max)
            return -1;
        v->i = x;
        return 0;
    }
    case MD_CT_DOUBLE: {
        char buf[64], *end;
        if ((size_t)(e - b) >= sizeof buf)
            return -1;
        memcpy(buf, b, (size_t)(e - b));
        buf[e - b] = 0;
        errno = 0;
        double x = strtod(buf, &end);
        if (errno || *end || !isfinite(x) || x < (double)d->min || x > (double)d->max)
            return -1;
        v->d = x;
        return 0;
    }
    case MD_CT_BOOL:
        if (e - b == 4 && strncasecmp(b, "true", 4) == 0)
            v->i = 1;
        else if (!(e - b == 5 && strncasecmp(b, "false", 5) == 0))
            return -1;
        return 0;
    case MD_CT_STRING:
        if (d->allowed) {
            int k = allowed_index(d->allowed, b, (size_t)(e - b));
            if (k < 0)
                return -1;
            v->bits = 1u << k;
        }
        return 0;
    case MD_CT_LIST:
        while (b < e) {
            const char *c = memchr(b, ',', (size_t)(e - b));
            const char *ib = b, *ie = c ? c : e;
            trim(&ib, &ie);
            int k = allowed_index(d->allowed, ib, (size_t)(ie - ib));
            if (k < 0)
                return -1;
            v->bits |= 1u << k;
            b = c ? c + 1 : e;
            if (c && b == e)
                return -1;          /* trailing comma: an empty item */
        }
        return 0;
    }
    return -1;
}

static int invalid(const md_config_def *d, const char *value, char *err,
                   size_t errlen)
{
    char rule[192];
    rule_text(d, rule, sizeof rule);
    return md_errf(err, errlen, KP_INVALID_CONFIG,
                   "Invalid value %.64s for configuration %s: %s",
                   value, d->name, rule);
}

int md_config_check(const char *name, const char *value, char *err, size_t errlen)
{
    const md_config_def *d = md_config_def_find(name);
    if (!d)
        return md_errf(err, errlen, KP_INVALID_CONFIG,
                       "Unknown topic config name: %.200s", name ? name : "(null)");
    if (!value)
        return md_errf(err, errlen, KP_INVALID_CONFIG,
                       "Null value not supported for topic configs: %s", name);
    struct val v;
    if (parse_value(d, value, &v))
        return invalid(d, value, err, errlen);
    return KP_NONE;
}

static const char *kv_lookup(const md_kv *kv, size_t n, const char *name)
{
    for (size_t i = n; i-- > 0;)
        if (kv[i].name && strcmp(kv[i].name, name) == 0)
            return kv[i].value;
    return NULL;
}

const char *md_config_effective(const md_kv *broker, size_t nbroker,
                                const md_kv *topic, size_t ntopic,
                                const char *name, enum md_config_source *src)
{
    const md_config_def *d = md_config_def_find(name);
    if (!d)
        return NULL;
    const char *v;
    enum md_config_source s;
    if ((v = kv_lookup(topic, ntopic, name)))
        s = MD_SRC_TOPIC;
    else if ((v = kv_lookup(broker, nbroker, name)))
        s = MD_SRC_BROKER;
    else
        v = d->default_value, s = MD_SRC_DEFAULT;
    if (src)
        *src = s;
    return v;
}

struct resolver {
    const md_kv *broker, *topic;
    size_t nbroker, ntopic;
    char *err;
    size_t errlen;
    int rc;
};

/* The parsed effective value of name; on a bad one latches rc (first bad
 * one named) and returns the parsed default so the struct stays sane. */
static struct val get(struct resolver *r, const char *name)
{
    const md_config_def *d = md_config_def_find(name);
    const char *text = md_config_effective(r->broker, r->nbroker, r->topic,
                                           r->ntopic, name, NULL);
    struct val v;
    if (parse_value(d, text, &v)) {
        if (!r->rc)
            r->rc = invalid(d, text, r->err, r->errlen);
        parse_value(d, d->default_value, &v);
    }
    return v;
}

int md_topic_config_resolve(const md_kv *broker, size_t nbroker,
                            const md_kv *topic, size_t ntopic,
                            md_topic_config *out, char *err, size_t errlen)
{
    struct resolver r = { broker, topic, nbroker, ntopic, err, errlen, 0 };
    memset(out, 0, sizeof *out);
    out->retention_ms = get(&r, "retention.ms").i;
    out->retention_bytes = get(&r, "retention.bytes").i;
    out->segment_bytes = get(&r, "segment.bytes").i;
    out->segment_ms = get(&r, "segment.ms").i;
    out->segment_jitter_ms = get(&r, "segment.jitter.ms").i;
    out->segment_index_bytes = (int32_t)get(&r, "segment.index.bytes").i;
    out->index_interval_bytes = (int32_t)get(&r, "index.interval.bytes").i;
    out->max_message_bytes = (int32_t)get(&r, "max.message.bytes").i;
    out->min_insync_replicas = (int32_t)get(&r, "min.insync.replicas").i;
    out->flush_messages = get(&r, "flush.messages").i;
    out->flush_ms = get(&r, "flush.ms").i;
    out->delete_retention_ms = get(&r, "delete.retention.ms").i;
    out->file_delete_delay_ms = get(&r, "file.delete.delay.ms").i;
    out->min_compaction_lag_ms = get(&r, "min.compaction.lag.ms").i;
    out->max_compaction_lag_ms = get(&r, "max.compaction.lag.ms").i;
    out->message_timestamp_difference_max_ms =
        get(&r, "message.timestamp.difference.max.ms").i;
    out->min_cleanable_dirty_ratio = get(&r, "min.cleanable.dirty.ratio").d;
    unsigned cleanup = get(&r, "cleanup.policy").bits;
    out->cleanup_delete = cleanup & 1u;        /* cleanup_policies[0] */
    out->cleanup_compact = (cleanup >> 1) & 1u;
    out->log_append_time = get(&r, "message.timestamp.type").bits == 2u;
    out->preallocate = get(&r, "preallocate").i;
    out->unclean_leader_election_enable =
        get(&r, "unclean.leader.election.enable").i;
    get(&r, "message.downconversion.enable");   /* validated, not used */
    for (int k = 0; k < 2; k++) {               /* 0 key, 1 value */
        static const char *const names[2][3] = {
            { "confluent.key.schema.validation", "confluent.key.subject.name.strategy",
              "sluice.key.schema.validation.level" },
            { "confluent.value.schema.validation", "confluent.value.subject.name.strategy",
              "sluice.value.schema.validation.level" } };
        md_schema_check *c = k ? &out->value_schema : &out->key_schema;
        c->on = get(&r, names[k][0]).i;
        unsigned st = get(&r, names[k][1]).bits;
        for (int i = 0; i < 6; i++)
            if (st == 1u << i)
                c->strategy = (enum md_subject_strategy)(i % 3);
        c->decode = get(&r, names[k][2]).bits == 2u;
    }
    get(&r, "message.format.version");
    int64_t after = get(&r, "message.timestamp.after.max.ms").i;
    int64_t before = get(&r, "message.timestamp.before.max.ms").i;
    out->message_timestamp_after_max_ms =
        after != INT64_MAX ? after : out->message_timestamp_difference_max_ms;
    out->message_timestamp_before_max_ms =
        before != INT64_MAX ? before : out->message_timestamp_difference_max_ms;

    /* Index into compression_types[] → enum kp_codec, -1 for producer. */
    static const int codec_of[] = { KP_CODEC_NONE, KP_CODEC_ZSTD, KP_CODEC_LZ4,
                                    KP_CODEC_SNAPPY, KP_CODEC_GZIP, -1 };
    unsigned ct = get(&r, "compression.type").bits;
    out->compression_type = -1;
    for (int i = 0; i < 6; i++)
        if (ct == 1u << i)
            out->compression_type = codec_of[i];
    return r.rc;
}
