/* admin/sql_surface.c on a cluster member's file: brokers and partitions
 * as the ZooKeeper mirror stored them (md_brokers_mirror,
 * md_controller_set, md_topic_mirror_put), for a running broker and for
 * sluice-sql --data-dir on a stopped one. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin/sql_surface.h"
#include "metadata/md.h"
#include "tests/unit/unit_run.h"
#include "tests/unit/unit_tmpdir.h"

static char path[128];
static md_db *db;

static void setup(void)
{
    unit_tmpdir_make("test_d_sql_cluster");
    snprintf(path, sizeof path, "%s/sluice.db", g_dir);
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open(path, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_broker_upsert(db, 1, "h1", 9092, NULL), 0);
}

static void teardown(void)
{
    md_close(db);
    unit_tmpdir_remove();
}

/* The query's rows as CSV without a header, as broker 1 (running or not)
 * sees them. */
static const char *query(const char *sql, bool running)
{
    static char out[4096];
    sq_env env = { .data_dir = g_dir, .broker_id = running ? 1 : -1,
                   .broker_alive = running, .max_rows = 100, .timeout_ms = 2000 };
    sq_conn *c;
    char err[256];
    ck_assert_msg(sq_open(path, &env, &c, err, sizeof err) == 0, "%s", err);
    sq_result res;
    memset(&res, 0, sizeof res);
    kp_buf_init(&res.out);
    sq_run(c, sql, SQ_FMT_CSV, false, &res);
    ck_assert_msg(!res.failed, "%s: %s", sql, res.err);
    ck_assert_uint_lt(res.out.len, sizeof out);
    memcpy(out, res.out.data, res.out.len);
    out[res.out.len] = 0;
    sq_result_free(&res);
    sq_close(c);
    return out;
}

#define BROKERS "SELECT id, endpoints, alive, is_controller, sluice_controller_id() " \
                "FROM brokers ORDER BY id"

START_TEST(test_standalone_brokers_are_this_broker)
{
    ck_assert_str_eq(query(BROKERS, true), "1,PLAINTEXT://h1:9092,1,1,1\r\n");
    ck_assert_str_eq(query(BROKERS, false), "1,PLAINTEXT://h1:9092,0,0,-1\r\n");
}
END_TEST

START_TEST(test_cluster_brokers_come_from_the_mirror)
{
    char err[MD_ERRLEN];
    md_broker_row live[] = {
        { 1, "h1", 9092, "r1", "PLAINTEXT://h1:9092,SSL://h1:9093", 1 },
        { 2, "h2", 9092, "r2", "PLAINTEXT://h2:9092", 2 },
        { 3, "h3", 9092, NULL, "PLAINTEXT://h3:9092", 3 },
    };
    ck_assert_int_eq(md_brokers_mirror(db, live, 3, err, sizeof err), 0);
    md_broker_row now[] = { live[0], live[1] };           /* 3 went away */
    ck_assert_int_eq(md_brokers_mirror(db, now, 2, err, sizeof err), 0);
    ck_assert_int_eq(md_controller_set(db, 2, 5), 0);
    ck_assert_str_eq(query(BROKERS, true),
                     "1,\"PLAINTEXT://h1:9092,SSL://h1:9093\",1,0,2\r\n"
                     "2,PLAINTEXT://h2:9092,1,1,2\r\n"
                     "3,PLAINTEXT://h3:9092,0,0,2\r\n");
    /* A stopped broker's file: who is alive is unknown, not "all alive". */
    ck_assert_str_eq(query("SELECT id, alive IS NULL FROM brokers ORDER BY id", false),
                     "1,1\r\n2,1\r\n3,1\r\n");
    ck_assert_int_eq(md_controller_set(db, -1, 5), 0);    /* no controller now */
    ck_assert_str_eq(query("SELECT sum(is_controller), sluice_controller_id() FROM brokers",
                           true), "0,-1\r\n");
}
END_TEST

/* Every partition of the cluster has a row, hosted here or not. */
START_TEST(test_partitions_show_every_partition_of_the_cluster)
{
    md_partition_state parts[2];
    memset(parts, 0, sizeof parts);
    parts[0] = (md_partition_state){ .leader = 2, .leader_epoch = 3, .nreplicas = 2,
                                     .replicas = { 2, 3 }, .nisr = 1, .isr = { 2 },
                                     .controller_epoch = 5, .zk_version = 4 };
    parts[1] = (md_partition_state){ .leader = 1, .leader_epoch = 1, .nreplicas = 2,
                                     .replicas = { 1, 2 }, .nisr = 2, .isr = { 1, 2 },
                                     .controller_epoch = 5, .zk_version = 1 };
    md_mirror_topic t = { .name = "orders", .id = { 1, 2, 3 }, .npartitions = 2,
                          .parts = parts };
    char err[MD_ERRLEN];
    ck_assert_msg(md_topic_mirror_put(db, &t, NULL, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_log_bookmarks_save(db, "orders", 1, 0, 0, 0), 0);
    ck_assert_int_eq(md_controller_set(db, 2, 5), 0);
    ck_assert_str_eq(query("SELECT partition, leader, replicas, isr, leader_epoch, "
                           "controller_epoch, recovery_point IS NULL FROM partitions "
                           "ORDER BY partition", true),
                     /* broker 2 is not alive here: partition 0 is offline, as
                      * Metadata says (main's b34880a) */
                     "0,-1,\"2,3\",2,3,5,1\r\n1,1,\"1,2\",\"1,2\",1,5,0\r\n");
    ck_assert_str_eq(query("SELECT partition, under_replicated, offline FROM partitions "
                           "ORDER BY partition", true), "0,1,1\r\n1,0,0\r\n");
    ck_assert_str_eq(query("SELECT broker_id, alive FROM partition_replicas "
                           "WHERE partition = 0 ORDER BY position", true),
                     "2,0\r\n3,0\r\n");              /* no live brokers mirrored */
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_standalone_brokers_are_this_broker, test_cluster_brokers_come_from_the_mirror,
        test_partitions_show_every_partition_of_the_cluster,
    };
    return unit_run("sql_cluster", "sql_cluster", tests, sizeof tests / sizeof *tests,
                    setup, teardown, 0);
}
