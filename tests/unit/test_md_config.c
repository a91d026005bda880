/* metadata/config.c: topic config definitions, validation, resolution. */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md.h"
#include "protocol/kp.h"
#include "tests/unit/unit_run.h"

static char err[MD_ERRLEN];

static int check(const char *name, const char *value)
{
    err[0] = 0;
    return md_config_check(name, value, err, sizeof err);
}

START_TEST(test_every_default_passes_its_own_check)
{
    size_t n;
    const md_config_def *d = md_config_defs(&n);
    ck_assert_uint_ge(n, 24);
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(check(d[i].name, d[i].default_value) == 0,
                      "%s default: %s", d[i].name, err);
        ck_assert_ptr_nonnull(d[i].broker_key);
        ck_assert_ptr_eq(md_config_def_find(d[i].name), &d[i]);
        ck_assert_ptr_eq(md_config_def_by_broker_key(d[i].broker_key), &d[i]);
        if (i)
            ck_assert_msg(strcmp(d[i - 1].name, d[i].name) < 0, "%s out of order",
                          d[i].name);
    }
}
END_TEST

START_TEST(test_kafka_names_and_defaults)
{
    struct { const char *name, *broker, *def; } want[] = {
        { "cleanup.policy", "log.cleanup.policy", "delete" },
        { "compression.type", "compression.type", "producer" },
        { "max.message.bytes", "message.max.bytes", "1048588" },
        { "min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio", "0.5" },
        { "retention.ms", "log.retention.ms", "604800000" },
        { "segment.bytes", "log.segment.bytes", "1073741824" },
        { "segment.index.bytes", "log.index.size.max.bytes", "10485760" },
        { "flush.messages", "log.flush.interval.messages", "9223372036854775807" },
        { "message.timestamp.type", "log.message.timestamp.type", "CreateTime" },
        { "message.format.version", "log.message.format.version", "3.0-IV1" },
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const md_config_def *d = md_config_def_find(want[i].name);
        ck_assert_msg(d != NULL, "%s missing", want[i].name);
        ck_assert_str_eq(d->broker_key, want[i].broker);
        ck_assert_str_eq(d->default_value, want[i].def);
    }
    ck_assert_ptr_null(md_config_def_find("log.retention.ms"));
    ck_assert_ptr_null(md_config_def_by_broker_key("retention.ms"));
    ck_assert_ptr_null(md_config_def_find(NULL));
}
END_TEST

START_TEST(test_unknown_name_message)
{
    ck_assert_int_eq(check("foo", "1"), KP_INVALID_CONFIG);
    ck_assert_str_eq(err, "Unknown topic config name: foo");
}
END_TEST

START_TEST(test_longs_parse_fully_and_respect_range)
{
    ck_assert_int_eq(check("retention.ms", "-1"), 0);
    ck_assert_int_eq(check("retention.ms", "0"), 0);
    ck_assert_int_eq(check("retention.ms", " 86400000 "), 0);   /* Kafka trims */
    ck_assert_int_eq(check("retention.ms", "9223372036854775807"), 0);
    ck_assert_int_eq(check("retention.ms", "+5"), 0);

    static const char *const bad[] = { "abc", "", "  ", "10ms", "1.5", "1e3",
                                       "9223372036854775808", "-2", "0x10",
                                       "- 1", "1 2" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_msg(check("retention.ms", bad[i]) == KP_INVALID_CONFIG,
                      "'%s' accepted", bad[i]);
        ck_assert_ptr_nonnull(strstr(err, "for configuration retention.ms"));
    }
    check("retention.ms", "abc");
    ck_assert_str_eq(err, "Invalid value abc for configuration retention.ms: "
                          "must be a long >= -1");
    ck_assert_int_eq(check("segment.ms", "0"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("flush.messages", "0"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("flush.ms", "0"), 0);
    ck_assert_int_eq(check("max.compaction.lag.ms", "0"), KP_INVALID_CONFIG);
}
END_TEST

START_TEST(test_ints_stay_in_int32)
{
    ck_assert_int_eq(check("segment.bytes", "14"), 0);
    ck_assert_int_eq(check("segment.bytes", "13"), KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "must be an int >= 14"));
    ck_assert_int_eq(check("segment.bytes", "2147483647"), 0);
    ck_assert_int_eq(check("segment.bytes", "2147483648"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("segment.index.bytes", "3"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("min.insync.replicas", "0"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("max.message.bytes", "-1"), KP_INVALID_CONFIG);
}
END_TEST

START_TEST(test_bools_doubles_enums_and_lists)
{
    ck_assert_int_eq(check("preallocate", "true"), 0);
    ck_assert_int_eq(check("preallocate", "FALSE"), 0);
    ck_assert_int_eq(check("preallocate", "yes"), KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "true or false"));
    ck_assert_int_eq(check("preallocate", "1"), KP_INVALID_CONFIG);

    ck_assert_int_eq(check("min.cleanable.dirty.ratio", "0"), 0);
    ck_assert_int_eq(check("min.cleanable.dirty.ratio", "1"), 0);
    ck_assert_int_eq(check("min.cleanable.dirty.ratio", "0.25"), 0);
    ck_assert_int_eq(check("min.cleanable.dirty.ratio", "1.01"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("min.cleanable.dirty.ratio", "nan"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("min.cleanable.dirty.ratio", "0.5x"), KP_INVALID_CONFIG);

    ck_assert_int_eq(check("compression.type", "zstd"), 0);
    ck_assert_int_eq(check("compression.type", "ZSTD"), KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "uncompressed, zstd, lz4, snappy, gzip, producer"));
    ck_assert_int_eq(check("message.timestamp.type", "LogAppendTime"), 0);
    ck_assert_int_eq(check("message.timestamp.type", "logappendtime"), KP_INVALID_CONFIG);

    ck_assert_int_eq(check("cleanup.policy", "compact"), 0);
    ck_assert_int_eq(check("cleanup.policy", "compact,delete"), 0);
    ck_assert_int_eq(check("cleanup.policy", "delete, compact"), 0);
    ck_assert_int_eq(check("cleanup.policy", "compact,"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("cleanup.policy", "compact,,delete"), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("cleanup.policy", "remove"), KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "cleanup.policy"));
    ck_assert_int_eq(check("cleanup.policy", ""), KP_INVALID_CONFIG);

    ck_assert_int_eq(check("message.format.version", "2.8-IV1"), 0);
    ck_assert_int_eq(check("message.format.version", ""), KP_INVALID_CONFIG);
    ck_assert_int_eq(check("retention.ms", NULL), KP_INVALID_CONFIG);
}
END_TEST

START_TEST(test_resolve_defaults)
{
    md_topic_config c;
    ck_assert_int_eq(md_topic_config_resolve(NULL, 0, NULL, 0, &c, err, sizeof err), 0);
    ck_assert_int_eq(c.retention_ms, 604800000);
    ck_assert_int_eq(c.retention_bytes, -1);
    ck_assert_int_eq(c.segment_bytes, 1073741824);
    ck_assert_int_eq(c.segment_ms, 604800000);
    ck_assert_int_eq(c.segment_jitter_ms, 0);
    ck_assert_int_eq(c.segment_index_bytes, 10485760);
    ck_assert_int_eq(c.index_interval_bytes, 4096);
    ck_assert_int_eq(c.max_message_bytes, 1048588);
    ck_assert_int_eq(c.min_insync_replicas, 1);
    ck_assert_int_eq(c.flush_messages, INT64_MAX);
    ck_assert_int_eq(c.flush_ms, INT64_MAX);
    ck_assert_int_eq(c.delete_retention_ms, 86400000);
    ck_assert_int_eq(c.file_delete_delay_ms, 60000);
    ck_assert_int_eq(c.min_compaction_lag_ms, 0);
    ck_assert_int_eq(c.max_compaction_lag_ms, INT64_MAX);
    ck_assert_int_eq(c.message_timestamp_difference_max_ms, INT64_MAX);
    ck_assert_double_eq(c.min_cleanable_dirty_ratio, 0.5);
    ck_assert(c.cleanup_delete);
    ck_assert(!c.cleanup_compact);
    ck_assert(!c.log_append_time);
    ck_assert(!c.preallocate);
    ck_assert(!c.unclean_leader_election_enable);
    ck_assert_int_eq(c.compression_type, -1);
}
END_TEST

START_TEST(test_resolve_topic_over_broker_over_default)
{
    md_kv broker[] = { { "retention.ms", "100" }, { "compression.type", "lz4" },
                       { "cleanup.policy", "compact" } };
    md_kv topic[] = { { "retention.ms", "200" }, { "cleanup.policy", "compact,delete" },
                      { "message.timestamp.type", "LogAppendTime" },
                      { "preallocate", "TRUE" }, { "min.cleanable.dirty.ratio", "0.1" },
                      { "flush.messages", "1" } };
    md_topic_config c;
    ck_assert_int_eq(md_topic_config_resolve(broker, 3, topic, 6, &c, err, sizeof err), 0);
    ck_assert_int_eq(c.retention_ms, 200);
    ck_assert_int_eq(c.compression_type, KP_CODEC_LZ4);
    ck_assert(c.cleanup_delete && c.cleanup_compact);
    ck_assert(c.log_append_time);
    ck_assert(c.preallocate);
    ck_assert_double_eq_tol(c.min_cleanable_dirty_ratio, 0.1, 1e-12);
    ck_assert_int_eq(c.flush_messages, 1);
    ck_assert_int_eq(c.segment_bytes, 1073741824);

    enum md_config_source src = 0;
    ck_assert_str_eq(md_config_effective(broker, 3, topic, 6, "compression.type", &src),
                     "lz4");
    ck_assert_int_eq(src, MD_SRC_BROKER);
    ck_assert_ptr_null(md_config_effective(broker, 3, topic, 6, "nope", &src));
}
END_TEST

START_TEST(test_resolve_compression_codecs)
{
    struct { const char *v; int codec; } m[] = {
        { "producer", -1 }, { "uncompressed", KP_CODEC_NONE }, { "gzip", KP_CODEC_GZIP },
        { "snappy", KP_CODEC_SNAPPY }, { "lz4", KP_CODEC_LZ4 }, { "zstd", KP_CODEC_ZSTD },
    };
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        md_kv topic[] = { { "compression.type", (char *)m[i].v } };
        md_topic_config c;
        ck_assert_int_eq(md_topic_config_resolve(NULL, 0, topic, 1, &c, err, sizeof err), 0);
        ck_assert_msg(c.compression_type == m[i].codec, "%s", m[i].v);
    }
}
END_TEST

START_TEST(test_resolve_names_a_bad_broker_value)
{
    md_kv broker[] = { { "segment.bytes", "tiny" } };
    md_topic_config c;
    ck_assert_int_eq(md_topic_config_resolve(broker, 1, NULL, 0, &c, err, sizeof err),
                     KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "segment.bytes"));
    ck_assert_int_eq(c.segment_bytes, 1073741824);   /* default stands in */
    /* …and a topic override hides it. */
    md_kv topic[] = { { "segment.bytes", "1024" } };
    ck_assert_int_eq(md_topic_config_resolve(broker, 1, topic, 1, &c, err, sizeof err), 0);
    ck_assert_int_eq(c.segment_bytes, 1024);
}
END_TEST

START_TEST(test_resolve_timestamp_bounds_fall_back_to_difference)
{
    md_topic_config c;
    ck_assert_int_eq(md_topic_config_resolve(NULL, 0, NULL, 0, &c, err, sizeof err), 0);
    ck_assert(c.message_timestamp_before_max_ms == INT64_MAX);
    ck_assert(c.message_timestamp_after_max_ms == INT64_MAX);
    /* KIP-937: a bound left at its default is difference.max.ms ... */
    md_kv broker[] = { { "message.timestamp.difference.max.ms", "5000" } };
    ck_assert_int_eq(md_topic_config_resolve(broker, 1, NULL, 0, &c, err, sizeof err), 0);
    ck_assert(c.message_timestamp_before_max_ms == 5000);
    ck_assert(c.message_timestamp_after_max_ms == 5000);
    /* ... one that is set is itself */
    md_kv topic[] = { { "message.timestamp.before.max.ms", "100" } };
    ck_assert_int_eq(md_topic_config_resolve(broker, 1, topic, 1, &c, err, sizeof err), 0);
    ck_assert(c.message_timestamp_before_max_ms == 100);
    ck_assert(c.message_timestamp_after_max_ms == 5000);
}
END_TEST

START_TEST(test_last_duplicate_wins_in_arrays)
{
    md_kv topic[] = { { "retention.ms", "1" }, { "retention.ms", "2" } };
    enum md_config_source src;
    ck_assert_str_eq(md_config_effective(NULL, 0, topic, 2, "retention.ms", &src), "2");
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_every_default_passes_its_own_check, test_kafka_names_and_defaults,
        test_unknown_name_message, test_longs_parse_fully_and_respect_range,
        test_ints_stay_in_int32, test_bools_doubles_enums_and_lists, test_resolve_defaults,
        test_resolve_topic_over_broker_over_default, test_resolve_compression_codecs,
        test_resolve_names_a_bad_broker_value, test_last_duplicate_wins_in_arrays,
        test_resolve_timestamp_bounds_fall_back_to_difference,
    };
    return unit_run("md_config", "config", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
