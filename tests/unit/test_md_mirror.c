/* metadata/ as the ZooKeeper mirror writes it: md_topic_mirror_put,
 * md_brokers_mirror, the controller row, migration 0004. */
#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md.h"
#include "metadata/md_internal.h"
#include "tests/unit/unit_md.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

static char path[128];
static md_db *db;

static void setup(void)
{
    unit_tmpdir_make("test_md_mirror");
    snprintf(path, sizeof path, "%s/meta.db", g_dir);
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open(path, &db, err, sizeof err) == 0, "%s", err);
}

static void teardown(void)
{
    md_close(db);
    db = NULL;
    unit_tmpdir_remove();
}

static int64_t query_int(const char *sql)
{
    return unit_query_int(db, sql);
}

static char txt[256];
#define STATE(st) unit_state_text(&(st), txt, sizeof txt)

static md_partition_state state(int32_t leader, int32_t epoch, int32_t nrep,
                                const int32_t *rep, int32_t nisr, const int32_t *isr)
{
    md_partition_state st;
    memset(&st, 0, sizeof st);
    st.leader = leader;
    st.leader_epoch = epoch;
    st.controller_epoch = 7;
    st.zk_version = epoch;
    st.nreplicas = nrep;
    for (int32_t i = 0; i < nrep; i++)
        st.replicas[i] = rep[i];
    st.nisr = nisr;
    for (int32_t i = 0; i < nisr; i++)
        st.isr[i] = isr[i];
    return st;
}

static const uint8_t ID1[16] = { 1, 2, 3, 4, 5, 6, 0x47, 8, 0x89, 10, 11, 12, 13, 14, 15, 16 };
static const uint8_t ID2[16] = { 9, 9, 9, 9, 9, 9, 0x49, 9, 0x89, 9, 9, 9, 9, 9, 9, 9 };

static int put(const uint8_t *id, const md_partition_state *parts, int32_t n,
               const md_kv *cfg, size_t ncfg, size_t *skipped, char *err)
{
    md_mirror_topic t = { .name = "orders", .npartitions = n, .parts = parts,
                          .configs = cfg, .nconfigs = ncfg, .created_at_ms = 1733000000000 };
    memcpy(t.id, id, 16);
    return md_topic_mirror_put(db, &t, skipped, err, MD_ERRLEN);
}

START_TEST(test_mirror_put_writes_the_topic_as_zookeeper_has_it)
{
    md_partition_state parts[2] = {
        state(2, 4, 3, (int32_t[]){ 2, 1, 3 }, 2, (int32_t[]){ 2, 3 }),
        state(-1, 0, 1, (int32_t[]){ 5 }, 0, NULL),
    };
    md_kv cfg[] = { { "retention.ms", "1000" } };
    char err[MD_ERRLEN];
    size_t skipped = 9;
    ck_assert_msg(put(ID1, parts, 2, cfg, 1, &skipped, err) == 0, "%s", err);
    ck_assert_uint_eq(skipped, 0);

    md_topic t;
    ck_assert_int_eq(md_topic_get(db, "orders", &t), 0);
    ck_assert_mem_eq(t.id, ID1, 16);
    ck_assert_int_eq(t.partitions, 2);
    ck_assert_int_eq(t.replication_factor, 3);
    ck_assert(!t.internal);
    ck_assert_int_eq(t.created_at_ms, 1733000000000);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "orders", &p, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_str_eq(STATE(p[0].st), "leader 2 epoch 4 replicas 2,1,3 isr 2,3");
    ck_assert_int_eq(p[0].st.controller_epoch, 7);
    ck_assert_int_eq(p[0].st.zk_version, 4);
    ck_assert(!p[0].has_bookmarks);          /* the mirror writes no bookmarks */
    ck_assert_str_eq(STATE(p[1].st), "leader -1 epoch 0 replicas 5 isr ");
    free(p);
    md_kv *kv;
    ck_assert_int_eq(md_topic_configs(db, "orders", &kv, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(kv[0].value, "1000");
    md_kv_free(kv, n);
}
END_TEST

START_TEST(test_mirror_reput_follows_leader_isr_growth_and_config_changes)
{
    md_partition_state parts[3] = {
        state(1, 0, 2, (int32_t[]){ 1, 2 }, 2, (int32_t[]){ 1, 2 }),
        state(2, 0, 2, (int32_t[]){ 2, 1 }, 2, (int32_t[]){ 2, 1 }),
        state(1, 0, 2, (int32_t[]){ 1, 2 }, 2, (int32_t[]){ 1, 2 }),
    };
    md_kv cfg1[] = { { "retention.ms", "1000" }, { "segment.bytes", "1048576" } };
    char err[MD_ERRLEN];
    ck_assert_msg(put(ID1, parts, 1, cfg1, 2, NULL, err) == 0, "%s", err);
    ck_assert_int_eq(md_log_bookmarks_save(db, "orders", 0, 5, 6, 7), 0);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db),
        "INSERT INTO committed_offsets (group_id, topic, partition, offset, "
        "commit_time_ms) VALUES ('g', 'orders', 0, 3, 0)", NULL, NULL, NULL), SQLITE_OK);

    /* Broker 1 died: 2 leads partition 0 at epoch 1, alone in the ISR;
     * two partitions added; configs replaced. */
    parts[0] = state(2, 1, 2, (int32_t[]){ 1, 2 }, 1, (int32_t[]){ 2 });
    md_kv cfg2[] = { { "cleanup.policy", "compact" } };
    ck_assert_msg(put(ID1, parts, 3, cfg2, 1, NULL, err) == 0, "%s", err);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "orders", &p, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert_str_eq(STATE(p[0].st), "leader 2 epoch 1 replicas 1,2 isr 2");
    ck_assert_int_eq(p[0].st.zk_version, 1);
    ck_assert(p[0].has_bookmarks);            /* local_logs row kept */
    ck_assert_int_eq(p[0].high_watermark, 7);
    ck_assert_str_eq(STATE(p[1].st), "leader 2 epoch 0 replicas 2,1 isr 2,1");
    ck_assert_str_eq(STATE(p[2].st), "leader 1 epoch 0 replicas 1,2 isr 1,2");
    free(p);
    ck_assert_int_eq(query_int("SELECT partitions FROM topics WHERE name = 'orders'"), 3);
    ck_assert_int_eq(query_int("SELECT count(*) FROM committed_offsets"), 1);
    md_kv *kv;
    ck_assert_int_eq(md_topic_configs(db, "orders", &kv, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(kv[0].name, "cleanup.policy");
    md_kv_free(kv, n);

    /* The same again: only the topic row is written, no partition. */
    int before = sqlite3_total_changes(md_sqlite(db));
    ck_assert_msg(put(ID1, parts, 3, NULL, 0, NULL, err) == 0, "%s", err);
    ck_assert_int_eq(sqlite3_total_changes(md_sqlite(db)) - before, 1 + 1);  /* + config */
    before = sqlite3_total_changes(md_sqlite(db));
    ck_assert_msg(put(ID1, parts, 3, NULL, 0, NULL, err) == 0, "%s", err);
    ck_assert_int_eq(sqlite3_total_changes(md_sqlite(db)) - before, 1);

    /* Fewer partitions (only a recreated topic has that in Kafka, but the
     * mirror writes what it sees): the rest go, with their bookmarks. */
    ck_assert_int_eq(md_log_bookmarks_save(db, "orders", 2, 0, 0, 1), 0);
    ck_assert_msg(put(ID1, parts, 2, NULL, 0, NULL, err) == 0, "%s", err);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partitions WHERE topic = 'orders'"), 2);
    ck_assert_int_eq(query_int("SELECT count(*) FROM local_logs WHERE partition = 2"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM partition_replicas WHERE partition = 2"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 0);
}
END_TEST

START_TEST(test_mirror_topic_recreated_with_another_id_replaces_the_old_one)
{
    md_partition_state parts[2] = {
        state(1, 3, 1, (int32_t[]){ 1 }, 1, (int32_t[]){ 1 }),
        state(1, 3, 1, (int32_t[]){ 1 }, 1, (int32_t[]){ 1 }),
    };
    md_kv cfg[] = { { "retention.ms", "1000" } };
    char err[MD_ERRLEN];
    ck_assert_msg(put(ID1, parts, 2, cfg, 1, NULL, err) == 0, "%s", err);
    ck_assert_int_eq(md_log_bookmarks_save(db, "orders", 0, 5, 6, 7), 0);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db),
        "INSERT INTO committed_offsets (group_id, topic, partition, offset, "
        "commit_time_ms) VALUES ('g', 'orders', 0, 3, 0)", NULL, NULL, NULL), SQLITE_OK);

    parts[0] = state(2, 0, 1, (int32_t[]){ 2 }, 1, (int32_t[]){ 2 });
    ck_assert_msg(put(ID2, parts, 1, NULL, 0, NULL, err) == 0, "%s", err);
    md_topic t;
    ck_assert_int_eq(md_topic_get(db, "orders", &t), 0);
    ck_assert_mem_eq(t.id, ID2, 16);
    ck_assert_int_eq(t.partitions, 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM local_logs"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM committed_offsets"), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 0);
    ck_assert_int_eq(query_int("SELECT leader FROM partitions WHERE topic = 'orders'"), 2);
}
END_TEST

/* ZooKeeper is the truth: an operator's bad key is skipped and reported,
 * the rest of the topic is written. */
START_TEST(test_mirror_skips_bad_configs_and_reports_them)
{
    md_partition_state parts[1] = { state(1, 0, 1, (int32_t[]){ 1 }, 1, (int32_t[]){ 1 }) };
    md_kv cfg[] = { { "retention.ms", "abc" }, { "no.such.key", "1" },
                    { "segment.bytes", "1048576" } };
    char err[MD_ERRLEN] = "";
    size_t skipped = 0;
    ck_assert_int_eq(put(ID1, parts, 1, cfg, 3, &skipped, err), 0);
    ck_assert_uint_eq(skipped, 2);
    ck_assert_msg(strstr(err, "retention.ms"), "%s", err);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs"), 1);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topic_configs "
                               "WHERE name = 'segment.bytes'"), 1);
}
END_TEST

START_TEST(test_mirror_refuses_a_bad_assignment_and_writes_nothing)
{
    md_partition_state parts[2] = {
        state(1, 0, 1, (int32_t[]){ 1 }, 1, (int32_t[]){ 1 }),
        state(1, 0, 2, (int32_t[]){ 1, 1 }, 1, (int32_t[]){ 1 }),
    };
    char err[MD_ERRLEN];
    ck_assert_int_eq(put(ID1, parts, 2, NULL, 0, NULL, err), KP_INVALID_REPLICA_ASSIGNMENT);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topics"), 0);
    parts[1] = state(1, 0, 0, NULL, 0, NULL);
    ck_assert_int_eq(put(ID1, parts, 2, NULL, 0, NULL, err), KP_INVALID_REPLICA_ASSIGNMENT);
    ck_assert_int_eq(put(ID1, parts, 0, NULL, 0, NULL, err), KP_INVALID_PARTITIONS);
    md_mirror_topic bad = { .name = "a/b", .npartitions = 1, .parts = parts };
    ck_assert_int_eq(md_topic_mirror_put(db, &bad, NULL, err, sizeof err),
                     KP_INVALID_TOPIC_EXCEPTION);
    ck_assert_int_eq(query_int("SELECT count(*) FROM topics"), 0);

    /* An ISR member that is not a replica cannot be stored: dropped. */
    parts[0] = state(1, 0, 2, (int32_t[]){ 1, 2 }, 2, (int32_t[]){ 9, 2 });
    ck_assert_msg(put(ID1, parts, 1, NULL, 0, NULL, err) == 0, "%s", err);
    ck_assert_int_eq(query_int("SELECT group_concat(broker_id) FROM partition_replicas "
                               "WHERE in_isr"), 2);
}
END_TEST

START_TEST(test_partition_state_set_keeps_controller_epoch_and_zk_version)
{
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_topic_create(db, "s", 1, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), 0);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "s", &p, &n), 0);
    ck_assert_int_eq(p[0].st.zk_version, -1);  /* standalone: no znode */
    ck_assert_int_eq(p[0].st.controller_epoch, 0);
    ck_assert_str_eq(STATE(p[0].st), "leader 1 epoch 0 replicas 1 isr 1");
    md_partition_state st = p[0].st;
    free(p);
    st.leader_epoch = 2;
    st.controller_epoch = 5;
    st.zk_version = 11;
    ck_assert_int_eq(md_partition_state_set(db, "s", 0, &st, err, sizeof err), 0);
    ck_assert_int_eq(md_partition_list(db, "s", &p, &n), 0);
    ck_assert_int_eq(p[0].st.controller_epoch, 5);
    ck_assert_int_eq(p[0].st.zk_version, 11);
    ck_assert_str_eq(STATE(p[0].st), "leader 1 epoch 2 replicas 1 isr 1");
    free(p);
}
END_TEST

START_TEST(test_brokers_mirror_marks_the_missing_dead_and_keeps_their_rows)
{
    char err[MD_ERRLEN];
    md_broker_row live[] = {
        { 1, "10.0.0.1", 9092, "r1", "PLAINTEXT://10.0.0.1:9092", 1000 },
        { 2, "10.0.0.2", 9092, NULL, "PLAINTEXT://10.0.0.2:9092", 2000 },
        { 3, "10.0.0.3", 9092, "", NULL, 3000 },
    };
    ck_assert_msg(md_brokers_mirror(db, live, 3, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(query_int("SELECT count(*) FROM brokers WHERE alive"), 3);
    ck_assert_int_eq(query_int("SELECT count(*) FROM brokers WHERE rack IS NULL"), 2);

    live[0].registered_at_ms = 5000;        /* 1 re-registered, 2 vanished */
    md_broker_row now[] = { live[0], live[2] };
    ck_assert_msg(md_brokers_mirror(db, now, 2, err, sizeof err) == 0, "%s", err);
    md_broker *b;
    size_t n;
    ck_assert_int_eq(md_broker_list(db, &b, &n), 0);
    ck_assert_uint_eq(n, 3);
    ck_assert(b[0].alive && !b[1].alive && b[2].alive);
    ck_assert_int_eq(b[0].registered_at_ms, 5000);
    ck_assert_str_eq(b[0].rack, "r1");
    ck_assert_str_eq(b[0].endpoints, "PLAINTEXT://10.0.0.1:9092");
    ck_assert_str_eq(b[1].host, "10.0.0.2");
    ck_assert_str_eq(b[2].endpoints, "");
    free(b);

    ck_assert_int_eq(md_brokers_mirror(db, NULL, 0, err, sizeof err), 0);
    ck_assert_int_eq(query_int("SELECT count(*) FROM brokers WHERE alive"), 0);
    md_broker_row bad[] = { { -1, "h", 1, NULL, NULL, 0 } };
    ck_assert_int_eq(md_brokers_mirror(db, bad, 1, err, sizeof err), KP_INVALID_REQUEST);
}
END_TEST

START_TEST(test_controller_row_absent_standalone_then_as_mirrored)
{
    int32_t id, epoch;
    ck_assert_int_eq(md_controller_get(db, &id, &epoch), 0);
    ck_assert_int_eq(id, -1);
    ck_assert_int_eq(epoch, -1);
    ck_assert_int_eq(md_controller_set(db, 2, 7), 0);
    ck_assert_int_eq(md_controller_get(db, &id, &epoch), 0);
    ck_assert_int_eq(id, 2);
    ck_assert_int_eq(epoch, 7);
    ck_assert_int_eq(md_controller_set(db, -1, 7), 0);     /* /controller gone */
    ck_assert_int_eq(md_controller_get(db, &id, &epoch), 0);
    ck_assert_int_eq(id, -1);
    ck_assert_int_eq(epoch, 7);
    ck_assert_int_eq(query_int("SELECT count(*) FROM controller"), 1);
    ck_assert_int_eq(md_controller_set(db, -2, 0), KP_INVALID_REQUEST);
}
END_TEST

START_TEST(test_uuid_text_is_kafkas_base64url)
{
    /* Kafka: Uuid(0x0123456789abcdef, 0xfedcba9876543210).toString() */
    static const uint8_t id[16] = { 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
                                    0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10 };
    char text[MD_UUID_TEXT_LEN + 1];
    md_uuid_to_text(id, text);
    ck_assert_str_eq(text, "ASNFZ4mrze_-3LqYdlQyEA");
    uint8_t back[16];
    ck_assert_int_eq(md_uuid_from_text(text, strlen(text), back), 0);
    ck_assert_mem_eq(back, id, 16);
    ck_assert_int_eq(md_uuid_from_text("ASNFZ4mrze_-3LqYdlQyEB", 22, back), -1); /* low bits */
    ck_assert_int_eq(md_uuid_from_text("ASNFZ4mrze_-3LqYdlQyE", 21, back), -1);
    ck_assert_int_eq(md_uuid_from_text("ASNFZ4mrze+/3LqYdlQyEA", 22, back), -1);
    for (int i = 0; i < 100; i++) {
        uint8_t r[16];
        md_uuid_random(r);
        md_uuid_to_text(r, text);
        ck_assert(text[0] != '-');
        ck_assert_int_eq(md_uuid_from_text(text, 22, back), 0);
        ck_assert_mem_eq(back, r, 16);
    }
}
END_TEST

/* A database a 0003 broker wrote gains the mirror's columns with the
 * values that mean "standalone", and keeps everything it had. */
START_TEST(test_migration_0004_on_a_0003_database)
{
    md_close(db);
    db = NULL;
    char p3[160];
    snprintf(p3, sizeof p3, "%s/v3.db", g_dir);
    struct md_sql_file v3[3];
    size_t nv3 = 0;
    for (size_t i = 0; i < md_sql_files_count; i++)
        if (!strcmp(md_sql_files[i].name, "sql/schema.sql") ||
            strstr(md_sql_files[i].name, "migrations/0002_") ||
            strstr(md_sql_files[i].name, "migrations/0003_"))
            v3[nv3++] = md_sql_files[i];
    ck_assert_uint_eq(nv3, 3);
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open_files(p3, v3, nv3, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_schema_version(db), 3);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db),
        "INSERT INTO brokers (id, host, port, registered_at) VALUES (1, 'h', 9092, 5);"
        "INSERT INTO topics VALUES ('t', randomblob(16), 1, 1, 0, 0);"
        "INSERT INTO partitions VALUES ('t', 0, 1, 4);"
        "INSERT INTO partition_replicas VALUES ('t', 0, 0, 1, 1);"
        "INSERT INTO local_logs VALUES ('t', 0, 1, 2, 3);",
        NULL, NULL, NULL), SQLITE_OK);
    md_close(db);

    ck_assert_msg(md_open(p3, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_ge(md_schema_version(db), 4);
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "t", &p, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(STATE(p[0].st), "leader 1 epoch 4 replicas 1 isr 1");
    ck_assert_int_eq(p[0].st.controller_epoch, 0);
    ck_assert_int_eq(p[0].st.zk_version, -1);
    ck_assert_int_eq(p[0].high_watermark, 3);
    free(p);
    md_broker *b;
    ck_assert_int_eq(md_broker_list(db, &b, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert(b[0].alive);
    ck_assert_str_eq(b[0].endpoints, "");
    free(b);
    int32_t id, epoch;
    ck_assert_int_eq(md_controller_get(db, &id, &epoch), 0);
    ck_assert_int_eq(id, -1);                 /* still standalone */
}
END_TEST

/* The review of issue 33 (its third minor finding): sealing a link's secrets again zeroes the old
 * bytes (secure_delete on for the UPDATE) and leaves the connection's own
 * setting as it was, both ON and OFF. */
START_TEST(test_link_secrets_set_restores_secure_delete)
{
    char err[MD_ERRLEN] = "";
    md_link_row *l = calloc(1, sizeof *l);
    snprintf(l->name, sizeof l->name, "src");
    snprintf(l->bootstrap, sizeof l->bootstrap, "127.0.0.1:9");
    snprintf(l->secrets, sizeof l->secrets, "sasl.password=x");
    snprintf(l->state, sizeof l->state, "active");
    ck_assert_msg(md_link_put(db, l, 1, err, sizeof err) == 0, "%s", err);
    free(l);
    int64_t as_opened = query_int("PRAGMA secure_delete");   /* a build's default: ON here */
    ck_assert_msg(md_link_secrets_set(db, "src", "a", err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(query_int("PRAGMA secure_delete"), as_opened);
    for (int v = 0; v <= 1; v++) {
        char sql[40];
        snprintf(sql, sizeof sql, "PRAGMA secure_delete = %d", v);
        ck_assert_int_eq(sqlite3_exec(md_sqlite(db), sql, NULL, NULL, NULL), SQLITE_OK);
        ck_assert_msg(md_link_secrets_set(db, "src", v ? "b" : "c", err, sizeof err) == 0,
                      "%s", err);
        ck_assert_int_eq(query_int("PRAGMA secure_delete"), v);
    }
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_mirror_put_writes_the_topic_as_zookeeper_has_it,
        test_mirror_reput_follows_leader_isr_growth_and_config_changes,
        test_mirror_topic_recreated_with_another_id_replaces_the_old_one,
        test_mirror_skips_bad_configs_and_reports_them,
        test_mirror_refuses_a_bad_assignment_and_writes_nothing,
        test_partition_state_set_keeps_controller_epoch_and_zk_version,
        test_brokers_mirror_marks_the_missing_dead_and_keeps_their_rows,
        test_controller_row_absent_standalone_then_as_mirrored,
        test_uuid_text_is_kafkas_base64url,
        test_migration_0004_on_a_0003_database,
        test_link_secrets_set_restores_secure_delete,
    };
    return unit_run("md_mirror", "mirror", tests, sizeof tests / sizeof *tests,
                    setup, teardown, 0);
}
