/* metadata/topics.c: topic names, create/get/list/delete, partitions,
 * stored config overrides. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metadata/md.h"
#include "tests/unit/unit_md.h"
#include "tests/unit/unit_run.h"

static char dir[64];
static char path[128];
static md_db *db;
static char err[MD_ERRLEN];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_md_topics.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/meta.db", dir);
    ck_assert_int_eq(md_open(path, &db, err, sizeof err), 0);
    err[0] = 0;
}

static void teardown(void)
{
    md_close(db);
    db = NULL;
    char p[160];
    static const char *const sfx[] = { "", "-wal", "-shm" };
    for (size_t i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
    rmdir(dir);
}

static int64_t query_int(const char *sql)
{
    return unit_query_int(db, sql);
}

static int create(const char *name, int32_t parts, const md_kv *cfg, size_t n)
{
    err[0] = 0;
    return md_topic_create(db, name, parts, 1, cfg, n, 1, NULL, false, err, sizeof err);
}

/* ---- names ---- */

START_TEST(test_topic_name_rules)
{
    static const char *const good[] = { "a", "orders", "A-b_c.9", "__consumer_offsets",
                                        "...", "-" };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        ck_assert_msg(md_topic_name_check(good[i], strlen(good[i]), err, sizeof err) == 0,
                      "%s refused: %s", good[i], err);
    char long_name[251];
    memset(long_name, 'x', 250);
    long_name[250] = 0;
    ck_assert_int_eq(md_topic_name_check(long_name, 249, err, sizeof err), 0);

    struct { const char *name; size_t len; const char *says; } bad[] = {
        { "", 0, "empty" },
        { ".", 1, "\".\"" },
        { "..", 2, "\"..\"" },
        { long_name, 250, "249" },
        { "a b", 3, "ASCII alphanumerics" },
        { "a/b", 3, "ASCII alphanumerics" },
        { "caf\xc3\xa9", 5, "ASCII alphanumerics" },
        { "a\0b", 3, "ASCII alphanumerics" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        ck_assert_int_eq(md_topic_name_check(bad[i].name, bad[i].len, err, sizeof err),
                         KP_INVALID_TOPIC_EXCEPTION);
        ck_assert_msg(strstr(err, bad[i].says), "case %zu: %s", i, err);
    }
}
END_TEST

START_TEST(test_create_refuses_bad_names)
{
    char long_name[251];
    memset(long_name, 'x', 250);
    long_name[250] = 0;
    static const char *const bad[] = { ".", "..", "", "a b", "a/b" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_int_eq(create(bad[i], 1, NULL, 0), KP_INVALID_TOPIC_EXCEPTION);
    ck_assert_int_eq(create(long_name, 1, NULL, 0), KP_INVALID_TOPIC_EXCEPTION);
    ck_assert_int_eq(create(NULL, 1, NULL, 0), KP_INVALID_TOPIC_EXCEPTION);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topics"), 0);
}
END_TEST

START_TEST(test_create_refuses_dot_underscore_collision)
{
    ck_assert_int_eq(create("a.b", 1, NULL, 0), 0);
    ck_assert_int_eq(create("a_b", 1, NULL, 0), KP_INVALID_TOPIC_EXCEPTION);
    ck_assert_ptr_nonnull(strstr(err, "collides"));
    ck_assert_ptr_nonnull(strstr(err, "a.b"));
}
END_TEST

/* ---- create / get / list / delete ---- */

START_TEST(test_create_get_and_list)
{
    ck_assert_int_eq(create("orders", 3, NULL, 0), 0);
    ck_assert_int_eq(create("audit", 1, NULL, 0), 0);
    ck_assert_int_eq(create("__consumer_offsets", 1, NULL, 0), 0);

    md_topic t;
    ck_assert_int_eq(md_topic_get(db, "orders", &t), 0);
    ck_assert_str_eq(t.name, "orders");
    ck_assert_int_eq(t.partitions, 3);
    ck_assert_int_eq(t.replication_factor, 1);
    ck_assert(!t.internal);
    ck_assert_int_gt(t.created_at_ms, 1600000000000LL);
    ck_assert_int_eq(t.id[6] >> 4, 4);           /* UUID v4 */
    static const uint8_t zero[16];
    ck_assert(memcmp(t.id, zero, 16) != 0);

    md_topic *all;
    size_t n;
    ck_assert_int_eq(md_topic_list(db, &all, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(all[0].name, "__consumer_offsets");
    ck_assert(all[0].internal);
    ck_assert_str_eq(all[1].name, "audit");
    ck_assert_str_eq(all[2].name, "orders");
    ck_assert(memcmp(all[1].id, all[2].id, 16) != 0);
    free(all);

    ck_assert_int_eq(md_topic_get(db, "nope", &t), KP_UNKNOWN_TOPIC_OR_PARTITION);
}
END_TEST

START_TEST(test_list_of_no_topics_is_empty)
{
    md_topic *all = (md_topic *)1;
    size_t n = 99;
    ck_assert_int_eq(md_topic_list(db, &all, &n), 0);
    ck_assert_uint_eq(n, 0);
    ck_assert_ptr_null(all);
}
END_TEST

START_TEST(test_create_makes_partitions_led_by_leader)
{
    ck_assert_int_eq(md_topic_create(db, "t", 4, 1, NULL, 0, 5, NULL, false, err,
                                     sizeof err), 0);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "t", &p, &n), 0);
    ck_assert_uint_eq(n, 4);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(p[i].partition, (int)i);
        ck_assert_int_eq(p[i].st.leader, 5);
        ck_assert_int_eq(p[i].st.leader_epoch, 0);
        ck_assert_int_eq(p[i].log_start_offset, 0);
        ck_assert_int_eq(p[i].recovery_point, 0);
        ck_assert_int_eq(p[i].high_watermark, 0);
    }
    free(p);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partition_replicas WHERE topic = 't' "
                               "AND broker_id = 5 AND position = 0 AND in_isr"), 4);
}
END_TEST

START_TEST(test_duplicate_topic_is_refused)
{
    ck_assert_int_eq(create("dup", 1, NULL, 0), 0);
    ck_assert_int_eq(create("dup", 2, NULL, 0), KP_TOPIC_ALREADY_EXISTS);
    ck_assert_str_eq(err, "Topic 'dup' already exists.");
    /* Kafka reports existence before other problems. */
    ck_assert_int_eq(create("dup", 0, NULL, 0), KP_TOPIC_ALREADY_EXISTS);
    md_topic t;
    ck_assert_int_eq(md_topic_get(db, "dup", &t), 0);
    ck_assert_int_eq(t.partitions, 1);
}
END_TEST

START_TEST(test_bad_partition_and_replication_counts)
{
    ck_assert_int_eq(create("t", 0, NULL, 0), KP_INVALID_PARTITIONS);
    ck_assert_int_eq(create("t", -1, NULL, 0), KP_INVALID_PARTITIONS);
    ck_assert_int_eq(md_topic_create(db, "t", 1, 0, NULL, 0, 1, NULL, false, err, sizeof err),
                     KP_INVALID_REPLICATION_FACTOR);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topics"), 0);
}
END_TEST

START_TEST(test_bad_config_is_refused_naming_the_key)
{
    md_kv cfg[] = { { "cleanup.policy", "compact" }, { "retention.ms", "abc" } };
    ck_assert_int_eq(create("t", 1, cfg, 2), KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "retention.ms"));
    ck_assert_ptr_nonnull(strstr(err, "abc"));

    md_kv unknown[] = { { "retention.msx", "1" } };
    ck_assert_int_eq(create("t", 1, unknown, 1), KP_INVALID_CONFIG);
    ck_assert_str_eq(err, "Unknown topic config name: retention.msx");

    md_kv null_value[] = { { "retention.ms", NULL } };
    ck_assert_int_eq(create("t", 1, null_value, 1), KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "retention.ms"));

    ck_assert_int_eq(query_int("SELECT count(*) FROM topics"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 0);
}
END_TEST

START_TEST(test_create_stores_configs_last_duplicate_wins)
{
    md_kv cfg[] = { { "retention.ms", "1" }, { "cleanup.policy", "compact,delete" },
                    { "retention.ms", "2" } };
    ck_assert_int_eq(create("t", 1, cfg, 3), 0);
    md_kv *kv;
    size_t n;
    ck_assert_int_eq(md_topic_configs(db, "t", &kv, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(kv[0].name, "cleanup.policy");
    ck_assert_str_eq(kv[0].value, "compact,delete");
    ck_assert_str_eq(kv[1].name, "retention.ms");
    ck_assert_str_eq(kv[1].value, "2");
    md_kv_free(kv, n);
}
END_TEST

START_TEST(test_validate_only_writes_nothing)
{
    md_kv cfg[] = { { "retention.ms", "1000" } };
    ck_assert_int_eq(md_topic_create(db, "v", 3, 1, cfg, 1, 1, NULL, true, err, sizeof err), 0);
    ck_assert_int_eq(md_topic_get(db, "v", NULL), KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partitions"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 0);
    /* …and still reports what a real create would. */
    md_kv bad[] = { { "segment.bytes", "1" } };
    ck_assert_int_eq(md_topic_create(db, "v", 3, 1, bad, 1, 1, NULL, true, err, sizeof err),
                     KP_INVALID_CONFIG);
    ck_assert_int_eq(create("v", 1, NULL, 0), 0);
    ck_assert_int_eq(md_topic_create(db, "v", 3, 1, NULL, 0, 1, NULL, true, err, sizeof err),
                     KP_TOPIC_ALREADY_EXISTS);
}
END_TEST

START_TEST(test_delete_cascades_to_partitions_configs_and_offsets)
{
    md_kv cfg[] = { { "retention.ms", "1000" } };
    ck_assert_int_eq(create("gone", 2, cfg, 1), 0);
    ck_assert_int_eq(create("stays", 1, cfg, 1), 0);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db),
        "INSERT INTO committed_offsets (group_id, topic, partition, offset, "
        "commit_time_ms) VALUES ('g', 'gone', 0, 5, 0), ('g', 'stays', 0, 1, 0)",
        NULL, NULL, NULL), SQLITE_OK);

    ck_assert_int_eq(md_topic_delete(db, "gone", err, sizeof err), 0);
    ck_assert_int_eq(md_topic_get(db, "gone", NULL), KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partitions WHERE topic='gone'"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs WHERE topic='gone'"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM committed_offsets WHERE topic='gone'"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partitions"), 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM committed_offsets"), 1);

    ck_assert_int_eq(md_topic_delete(db, "gone", err, sizeof err),
                     KP_UNKNOWN_TOPIC_OR_PARTITION);
    /* The name is free again, with a new id. */
    ck_assert_int_eq(create("gone", 1, NULL, 0), 0);
}
END_TEST

/* ---- partitions ---- */

START_TEST(test_add_partitions_grows_and_refuses_non_increase)
{
    ck_assert_int_eq(md_topic_create(db, "t", 2, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), 0);
    ck_assert_int_eq(md_log_bookmarks_save(db, "t", 0, 0, 7, 7), 0);

    ck_assert_int_eq(md_topic_add_partitions(db, "t", 5, 3, NULL, true, err, sizeof err), 0);
    md_topic t;
    ck_assert_int_eq(md_topic_get(db, "t", &t), 0);
    ck_assert_int_eq(t.partitions, 2);           /* validate_only */

    ck_assert_int_eq(md_topic_add_partitions(db, "t", 5, 3, NULL, false, err, sizeof err), 0);
    ck_assert_int_eq(md_topic_get(db, "t", &t), 0);
    ck_assert_int_eq(t.partitions, 5);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "t", &p, &n), 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(p[0].st.leader, 1);
    ck_assert_int_eq(p[0].high_watermark, 7);    /* old partitions untouched */
    ck_assert_int_eq(p[4].partition, 4);
    ck_assert_int_eq(p[4].st.leader, 3);
    free(p);

    ck_assert_int_eq(md_topic_add_partitions(db, "t", 5, 1, NULL, false, err, sizeof err),
                     KP_INVALID_PARTITIONS);
    ck_assert_ptr_nonnull(strstr(err, "already has 5"));
    ck_assert_int_eq(md_topic_add_partitions(db, "t", 3, 1, NULL, false, err, sizeof err),
                     KP_INVALID_PARTITIONS);
    ck_assert_int_eq(md_topic_add_partitions(db, "nope", 3, 1, NULL, false, err, sizeof err),
                     KP_UNKNOWN_TOPIC_OR_PARTITION);
}
END_TEST

START_TEST(test_partition_offsets_save_and_read_back)
{
    ck_assert_int_eq(create("t", 3, NULL, 0), 0);
    ck_assert_int_eq(md_begin(db), 0);
    ck_assert_int_eq(md_log_bookmarks_save(db, "t", 0, 10, 20, 30), 0);
    ck_assert_int_eq(md_log_bookmarks_save(db, "t", 2, 1LL << 40, (1LL << 40) + 1,
                                               (1LL << 40) + 2), 0);
    ck_assert_int_eq(md_commit(db), 0);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "t", &p, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(p[0].log_start_offset, 10);
    ck_assert_int_eq(p[0].recovery_point, 20);
    ck_assert_int_eq(p[0].high_watermark, 30);
    ck_assert_int_eq(p[1].high_watermark, 0);
    ck_assert_int_eq(p[2].log_start_offset, 1LL << 40);
    ck_assert_int_eq(p[2].high_watermark, (1LL << 40) + 2);
    free(p);

    ck_assert_int_eq(md_log_bookmarks_save(db, "t", 3, 0, 0, 0),
                     KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(md_log_bookmarks_save(db, "x", 0, 0, 0, 0),
                     KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(md_partition_list(db, "x", &p, &n), KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_ptr_null(p);
}
END_TEST

/* ---- stored overrides ---- */

START_TEST(test_config_replace_is_all_or_nothing)
{
    md_kv start[] = { { "retention.ms", "1" }, { "segment.ms", "2" } };
    ck_assert_int_eq(create("t", 1, start, 2), 0);

    md_kv bad[] = { { "cleanup.policy", "compact" }, { "segment.bytes", "x" } };
    ck_assert_int_eq(md_topic_config_replace(db, "t", bad, 2, false, err, sizeof err),
                     KP_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "segment.bytes"));
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 2);

    md_kv good[] = { { "cleanup.policy", "compact" } };
    ck_assert_int_eq(md_topic_config_replace(db, "t", good, 1, true, err, sizeof err), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 2);
    ck_assert_int_eq(md_topic_config_replace(db, "t", good, 1, false, err, sizeof err), 0);
    md_kv *kv;
    size_t n;
    ck_assert_int_eq(md_topic_configs(db, "t", &kv, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(kv[0].name, "cleanup.policy");
    md_kv_free(kv, n);

    ck_assert_int_eq(md_topic_config_replace(db, "t", NULL, 0, false, err, sizeof err), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 0);
    ck_assert_int_eq(md_topic_config_replace(db, "x", NULL, 0, false, err, sizeof err),
                     KP_UNKNOWN_TOPIC_OR_PARTITION);
}
END_TEST

START_TEST(test_stored_configs_resolve_with_sources)
{
    md_kv cfg[] = { { "retention.ms", "1000" } };
    ck_assert_int_eq(create("t", 1, cfg, 1), 0);
    md_kv *topic;
    size_t nt;
    ck_assert_int_eq(md_topic_configs(db, "t", &topic, &nt), 0);
    md_kv broker[] = { { "retention.ms", "5" }, { "segment.bytes", "1048576" } };

    enum md_config_source src;
    ck_assert_str_eq(md_config_effective(broker, 2, topic, nt, "retention.ms", &src),
                     "1000");
    ck_assert_int_eq(src, MD_SRC_TOPIC);
    ck_assert_str_eq(md_config_effective(broker, 2, topic, nt, "segment.bytes", &src),
                     "1048576");
    ck_assert_int_eq(src, MD_SRC_BROKER);
    ck_assert_str_eq(md_config_effective(broker, 2, topic, nt, "segment.ms", &src),
                     "604800000");
    ck_assert_int_eq(src, MD_SRC_DEFAULT);

    md_topic_config c;
    ck_assert_int_eq(md_topic_config_resolve(broker, 2, topic, nt, &c, err, sizeof err), 0);
    ck_assert_int_eq(c.retention_ms, 1000);
    ck_assert_int_eq(c.segment_bytes, 1048576);
    ck_assert_int_eq(c.segment_ms, 604800000);
    md_kv_free(topic, nt);
}
END_TEST

/* ---- replica assignment and partition state (migration 0003) ---- */

START_TEST(test_manual_assignment_is_stored_in_preference_order)
{
    /* Two partitions, three replicas each, as CreateTopics' assignment. */
    const int32_t replicas[] = { 3, 1, 2,   2, 3, 1 };
    ck_assert_int_eq(md_topic_create(db, "a", 2, 3, NULL, 0, 1, replicas, false, err,
                                     sizeof err), 0);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "a", &p, &n), 0);
    ck_assert_uint_eq(n, 2);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(p[i].st.nreplicas, 3);
        ck_assert_int_eq(p[i].st.nisr, 3);
        for (int j = 0; j < 3; j++) {
            ck_assert_int_eq(p[i].st.replicas[j], replicas[i * 3 + (size_t)j]);
            ck_assert_int_eq(p[i].st.isr[j], replicas[i * 3 + (size_t)j]);
        }
        ck_assert_int_eq(p[i].st.leader, replicas[i * 3]);   /* the preferred one */
        ck_assert(p[i].has_bookmarks);                      /* broker 1 hosts both */
    }
    free(p);
    /* Broker 4 hosts none of them: no bookmarks of its own. */
    const int32_t elsewhere[] = { 2, 3 };
    ck_assert_int_eq(md_topic_create(db, "b", 1, 2, NULL, 0, 4, elsewhere, false, err,
                                     sizeof err), 0);
    ck_assert_int_eq(md_partition_list(db, "b", &p, &n), 0);
    ck_assert(!p[0].has_bookmarks);
    free(p);
    ck_assert_int_eq(query_int("SELECT count(*) FROM local_logs WHERE topic = 'b'"), 0);
    /* Grown partitions take their own assignment. */
    const int32_t more[] = { 1, 2, 3 };
    ck_assert_int_eq(md_topic_add_partitions(db, "a", 3, 1, more, false, err, sizeof err), 0);
    ck_assert_int_eq(md_partition_list(db, "a", &p, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_int_eq(p[2].st.replicas[0], 1);
    ck_assert_int_eq(p[2].st.replicas[2], 3);
    free(p);
}
END_TEST

START_TEST(test_bad_assignments_are_refused)
{
    const int32_t twice[] = { 1, 1 };
    ck_assert_int_eq(md_topic_create(db, "a", 1, 2, NULL, 0, 1, twice, false, err,
                                     sizeof err), KP_INVALID_REPLICA_ASSIGNMENT);
    ck_assert_ptr_nonnull(strstr(err, "Duplicate"));
    /* A replication factor above one needs the broker's assignment. */
    ck_assert_int_eq(md_topic_create(db, "a", 1, 2, NULL, 0, 1, NULL, false, err,
                                     sizeof err), KP_INVALID_REPLICATION_FACTOR);
    ck_assert_int_eq(md_topic_create(db, "a", 1, MD_REPLICAS_MAX + 1, NULL, 0, 1, NULL,
                                     false, err, sizeof err), KP_INVALID_REPLICATION_FACTOR);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topics"), 0);
}
END_TEST

START_TEST(test_partition_state_is_replaced_whole)
{
    const int32_t replicas[] = { 1, 2, 3 };
    ck_assert_int_eq(md_topic_create(db, "s", 1, 3, NULL, 0, 1, replicas, false, err,
                                     sizeof err), 0);
    md_partition_state st = { .leader = 2, .leader_epoch = 5, .nreplicas = 3,
                              .replicas = { 1, 2, 3 }, .nisr = 2, .isr = { 2, 3 } };
    ck_assert_int_eq(md_partition_state_set(db, "s", 0, &st, err, sizeof err), 0);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "s", &p, &n), 0);
    ck_assert_int_eq(p[0].st.leader, 2);
    ck_assert_int_eq(p[0].st.leader_epoch, 5);
    ck_assert_int_eq(p[0].st.nreplicas, 3);
    ck_assert_int_eq(p[0].st.nisr, 2);
    ck_assert_int_eq(p[0].st.isr[0], 2);
    ck_assert_int_eq(p[0].st.isr[1], 3);
    free(p);
    /* An ISR member that is not a replica, and an unknown partition. */
    md_partition_state bad = st;
    bad.isr[1] = 9;
    ck_assert_int_eq(md_partition_state_set(db, "s", 0, &bad, err, sizeof err),
                     KP_INVALID_REPLICA_ASSIGNMENT);
    ck_assert_int_eq(md_partition_state_set(db, "s", 1, &st, err, sizeof err),
                     KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partition_replicas "
                               "WHERE topic = 's' AND in_isr"), 2);
}
END_TEST

START_TEST(test_cluster_id_is_made_once_in_kafka_form)
{
    char a[MD_CLUSTER_ID_MAX + 1], b[MD_CLUSTER_ID_MAX + 1];
    ck_assert_int_eq(md_cluster_id(db, a, err, sizeof err), 0);
    ck_assert_uint_eq(strlen(a), 22);
    ck_assert_uint_eq(strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                "0123456789-_"), 22);
    ck_assert_int_ne(a[0], '-');
    md_close(db);
    ck_assert_int_eq(md_open(path, &db, err, sizeof err), 0);
    ck_assert_int_eq(md_cluster_id(db, b, err, sizeof err), 0);
    ck_assert_str_eq(a, b);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_topic_name_rules, test_create_refuses_bad_names,
        test_create_refuses_dot_underscore_collision, test_create_get_and_list,
        test_list_of_no_topics_is_empty, test_create_makes_partitions_led_by_leader,
        test_duplicate_topic_is_refused, test_bad_partition_and_replication_counts,
        test_bad_config_is_refused_naming_the_key,
        test_create_stores_configs_last_duplicate_wins, test_validate_only_writes_nothing,
        test_delete_cascades_to_partitions_configs_and_offsets,
        test_add_partitions_grows_and_refuses_non_increase,
        test_partition_offsets_save_and_read_back, test_config_replace_is_all_or_nothing, test_stored_configs_resolve_with_sources,
        test_manual_assignment_is_stored_in_preference_order,
        test_bad_assignments_are_refused, test_partition_state_is_replaced_whole,
        test_cluster_id_is_made_once_in_kafka_form,
    };
    return unit_run("md_topics", "topics", tests, sizeof tests / sizeof *tests, setup, teardown, 0);
}
