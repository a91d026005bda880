/* metadata/db.c + migrate.c: opening, schema versions, migrations,
 * transactions, persistence. */
#include <check.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "metadata/md.h"
#include "metadata/md_internal.h"
#include "tests/unit/unit_md.h"
#include "tests/unit/unit_run.h"

static char dir[64];
static char path[128];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_md_db.XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/meta.db", dir);
}

static void teardown(void)
{
    char p[160];
    static const char *const sfx[] = { "", "-wal", "-shm", "-journal" };
    for (size_t i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", path, sfx[i]);
        unlink(p);
    }
    rmdir(dir);
}

#define query_int unit_query_int

static const char *query_text(md_db *db, const char *sql, char *buf, size_t len)
{
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(md_sqlite(db), sql, -1, &s, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    snprintf(buf, len, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return buf;
}

static md_db *open_ok(void)
{
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    int rc = md_open(path, &db, err, sizeof err);
    ck_assert_msg(rc == 0, "md_open: %s", err);
    ck_assert_ptr_nonnull(db);
    return db;
}

/* The linked-in schema.sql, to build test file lists around it. */
static const struct md_sql_file *linked_schema(void)
{
    for (size_t i = 0; i < md_sql_files_count; i++)
        if (strcmp(md_sql_files[i].name, "sql/schema.sql") == 0)
            return &md_sql_files[i];
    ck_abort_msg("sql/schema.sql not linked in");
    return NULL;
}

/* The version a database opened with the linked files reaches: the
 * highest migration number (1 when there are none). */
static int latest_version(void)
{
    int v = 1;
    for (size_t i = 0; i < md_sql_files_count; i++) {
        const char *n = strstr(md_sql_files[i].name, "migrations/");
        if (n && atoi(n + 11) > v)
            v = atoi(n + 11);
    }
    return v;
}

/* A database at version 1: the schema alone, no migrations. */
static md_db *open_schema_only(void)
{
    struct md_sql_file files[] = { *linked_schema() };
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open_files(path, files, 1, &db, err, sizeof err) == 0, "%s", err);
    return db;
}

START_TEST(test_open_creates_schema_and_sets_user_version)
{
    md_db *db = open_ok();
    ck_assert_int_eq(md_schema_version(db), latest_version());
    static const char *const tables[] = {
        "brokers", "topics", "partitions", "topic_configs", "consumer_groups",
        "group_members", "committed_offsets", "producer_ids", "users", "acls" };
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        char sql[160];
        snprintf(sql, sizeof sql,
                 "SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='%s'",
                 tables[i]);
        ck_assert_msg(query_int(db, sql) == 1, "table %s missing", tables[i]);
    }
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM sqlite_schema "
                                   "WHERE type='view' AND name='consumer_lag'"), 1);
    ck_assert_int_eq(query_int(db, "SELECT next_producer_id FROM producer_ids"), 0);
    md_close(db);
}
END_TEST

/* db.c's durability contract: the loop's handle never fsyncs a batch
 * and never checkpoints; md_wal_sync / md_checkpoint do that. */
START_TEST(test_open_sets_wal_foreign_keys_normal_sync_no_autocheckpoint)
{
    md_db *db = open_ok();
    char buf[32];
    ck_assert_str_eq(query_text(db, "PRAGMA journal_mode", buf, sizeof buf), "wal");
    ck_assert_int_eq(query_int(db, "PRAGMA foreign_keys"), 1);
    ck_assert_int_eq(query_int(db, "PRAGMA synchronous"), 1);   /* NORMAL */
    ck_assert_int_eq(query_int(db, "PRAGMA wal_autocheckpoint"), 0);
    /* Migrations committed outside a batch: synced through the WAL hook,
     * which opened the WAL descriptor on the way. */
    ck_assert_int_ge(db->wal_fd, 0);
    md_close(db);
}
END_TEST

static md_db *open_syncer_ok(void)
{
    md_db *s = NULL;
    char err[MD_ERRLEN] = "";
    int rc = md_open_syncer(path, &s, err, sizeof err);
    ck_assert_msg(rc == 0, "md_open_syncer: %s", err);
    return s;
}

static void save_offsets_batch(md_db *db, int64_t v)
{
    ck_assert_int_eq(md_begin(db), 0);
    ck_assert_int_eq(md_log_bookmarks_save(db, "t", 0, v, v, v), 0);
    ck_assert_int_eq(md_commit(db), 0);
}

static int64_t raw_high_watermark(void)
{
    sqlite3 *h;
    ck_assert_int_eq(sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(h, "SELECT high_watermark FROM local_logs "
                                        "WHERE topic = 't' AND partition = 0", -1, &s,
                                        NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

START_TEST(test_batch_commit_stays_in_wal_until_worker_checkpoints)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_topic_create(db, "t", 1, 1, NULL, 0, 1, NULL, false, err, sizeof err), 0);
    md_db *syncer = open_syncer_ok();
    /* Everything so far into the database file, so the WAL holds only
     * what follows. */
    int frames = -1, copied = -1;
    ck_assert_int_eq(md_checkpoint(syncer, &frames, &copied, err, sizeof err), 0);
    ck_assert_int_eq(frames, copied);
    for (int i = 1; i <= 50; i++)
        save_offsets_batch(db, i);
    ck_assert_int_eq(md_wal_sync(syncer), 0);
    /* Another connection (as after a restart) reads the synced batches
     * out of the WAL: the loop's handle never checkpointed them. */
    ck_assert_int_eq(raw_high_watermark(), 50);
    ck_assert_int_eq(md_checkpoint(syncer, &frames, &copied, err, sizeof err), 0);
    ck_assert_int_gt(frames, 0);
    ck_assert_int_eq(frames, copied);
    md_close(syncer);
    md_close(db);
    /* Reopening from scratch (every connection closed) keeps them too. */
    db = open_ok();
    ck_assert_int_eq(query_int(db, "SELECT high_watermark FROM local_logs "
                                   "WHERE topic = 't'"), 50);
    md_close(db);
}
END_TEST

struct worker_arg {
    md_db *syncer;
    atomic_bool stop;
    int syncs, checkpoints, failures;
};

static void *sync_worker(void *arg)
{
    struct worker_arg *w = arg;
    char err[MD_ERRLEN];
    while (!atomic_load(&w->stop)) {
        if (md_wal_sync(w->syncer) != 0)
            w->failures++;
        w->syncs++;
        if (md_checkpoint(w->syncer, NULL, NULL, err, sizeof err) != 0)
            w->failures++;
        w->checkpoints++;
    }
    return NULL;
}

struct writer_arg {
    md_db *db;
    int32_t partition;
    int n;                              /* batches to write */
    int failures;
};

static void *batch_writer(void *arg)
{
    struct writer_arg *w = arg;
    for (int i = 1; i <= w->n; i++) {
        if (md_begin(w->db) != 0) {
            w->failures++;
            continue;
        }
        if (md_log_bookmarks_save(w->db, "t", w->partition, i, i, i) != 0)
            w->failures++;
        if (md_commit(w->db) != 0)
            w->failures++;
    }
    return NULL;
}

/* The worker's PASSIVE checkpoints never make the loop's writes wait or
 * fail, and the WAL the worker syncs stays the same file while SQLite
 * restarts it from the beginning (metadata/db.c D3). */
START_TEST(test_worker_checkpoints_while_loop_writes_and_wal_keeps_its_inode)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_topic_create(db, "t", 1, 1, NULL, 0, 1, NULL, false, err, sizeof err), 0);
    struct worker_arg w = { .syncer = open_syncer_ok() };
    ck_assert_int_eq(md_wal_sync(w.syncer), 0);
    struct stat before;
    ck_assert_int_eq(fstat(w.syncer->wal_fd, &before), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, sync_worker, &w), 0);
    struct writer_arg loop = { .db = db, .partition = 0, .n = 2000 };
    batch_writer(&loop);
    ck_assert_int_eq(loop.failures, 0);
    atomic_store(&w.stop, true);
    pthread_join(t, NULL);
    ck_assert_int_eq(w.failures, 0);
    ck_assert_int_gt(w.checkpoints, 0);
    char wal[160];
    snprintf(wal, sizeof wal, "%s-wal", path);
    struct stat now;
    ck_assert_int_eq(stat(wal, &now), 0);
    ck_assert_int_eq(now.st_ino, before.st_ino);
    ck_assert_int_eq(md_wal_sync(w.syncer), 0);
    ck_assert_int_eq(raw_high_watermark(), 2000);
    md_close(w.syncer);
    md_close(db);
}
END_TEST

/* The sync worker writes too (db.c D5): its batches and the loop's take
 * turns for the write lock through the busy handler, none fails, and the
 * worker's handle keeps the schema's foreign keys. */
START_TEST(test_syncer_and_loop_write_batches_side_by_side)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_topic_create(db, "t", 2, 1, NULL, 0, 1, NULL, false, err, sizeof err), 0);
    struct writer_arg loop = { .db = db, .partition = 0, .n = 1000 };
    struct writer_arg worker = { .db = open_syncer_ok(), .partition = 1, .n = 1000 };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, batch_writer, &worker), 0);
    batch_writer(&loop);
    pthread_join(t, NULL);
    ck_assert_int_eq(loop.failures, 0);
    ck_assert_int_eq(worker.failures, 0);
    ck_assert_int_eq(query_int(db, "SELECT sum(high_watermark) FROM local_logs "
                                   "WHERE topic = 't'"), 2000);
    md_offset o[2] = {
        { .group_id = "g", .group_len = 1, .topic = "t", .topic_len = 1, .partition = 1,
          .offset = 7, .leader_epoch = -1, .expire_time_ms = -1 },
        { .group_id = "g", .group_len = 1, .topic = "gone", .topic_len = 4, .partition = 0,
          .offset = 7, .leader_epoch = -1, .expire_time_ms = -1 },
    };
    ck_assert_int_eq(md_begin(worker.db), 0);
    ck_assert_int_eq(md_offset_commit(worker.db, o, 2, err, sizeof err), 0);
    ck_assert_int_eq(md_commit(worker.db), 0);
    ck_assert_int_eq(o[0].result, KP_NONE);
    ck_assert_int_eq(o[1].result, KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(query_int(db, "SELECT offset FROM committed_offsets "
                                   "WHERE group_id = 'g'"), 7);
    md_close(worker.db);
    md_close(db);
}
END_TEST

START_TEST(test_wal_sync_without_wal_file_is_a_no_op)
{
    md_db *db = open_ok();
    md_close(db);               /* last connection: checkpoint, WAL removed */
    char wal[160];
    snprintf(wal, sizeof wal, "%s-wal", path);
    ck_assert_int_ne(access(wal, F_OK), 0);
    db = open_ok();
    md_db *syncer = open_syncer_ok();
    ck_assert_int_eq(md_wal_sync(syncer), 0);
    md_close(syncer);
    md_close(db);
}
END_TEST

/* Migration 0003 on a database a version-2 broker wrote: replicas and ISR
 * leave their comma-joined text for one row per replica, the bookmarks
 * move to local_logs, nothing is lost. */
START_TEST(test_migration_0003_splits_partition_facts)
{
    struct md_sql_file v2[2];
    size_t nv2 = 0;
    for (size_t i = 0; i < md_sql_files_count; i++)
        if (!strcmp(md_sql_files[i].name, "sql/schema.sql") ||
            strstr(md_sql_files[i].name, "migrations/0002_"))
            v2[nv2++] = md_sql_files[i];
    ck_assert_uint_eq(nv2, 2);
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open_files(path, v2, nv2, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_schema_version(db), 2);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db),
        "INSERT INTO topics VALUES ('t', randomblob(16), 2, 3, 0, 0);"
        "INSERT INTO partitions VALUES ('t', 0, 2, 4, '2,1,3', '3,2', 10, 20, 30);"
        "INSERT INTO partitions VALUES ('t', 1, 1, 0, '1', '1', 0, 7, 7);",
        NULL, NULL, NULL), SQLITE_OK);
    md_close(db);

    db = open_ok();
    ck_assert_int_eq(md_schema_version(db), latest_version());
    md_partition *p;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "t", &p, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(p[0].st.leader, 2);
    ck_assert_int_eq(p[0].st.leader_epoch, 4);
    ck_assert_int_eq(p[0].st.nreplicas, 3);
    ck_assert_int_eq(p[0].st.replicas[0], 2);
    ck_assert_int_eq(p[0].st.replicas[1], 1);
    ck_assert_int_eq(p[0].st.replicas[2], 3);
    ck_assert_int_eq(p[0].st.nisr, 2);          /* in replica order */
    ck_assert_int_eq(p[0].st.isr[0], 2);
    ck_assert_int_eq(p[0].st.isr[1], 3);
    ck_assert(p[0].has_bookmarks);
    ck_assert_int_eq(p[0].log_start_offset, 10);
    ck_assert_int_eq(p[0].recovery_point, 20);
    ck_assert_int_eq(p[0].high_watermark, 30);
    ck_assert_int_eq(p[1].st.nreplicas, 1);
    ck_assert_int_eq(p[1].high_watermark, 7);
    free(p);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM pragma_table_info('partitions') "
                                   "WHERE name IN ('replicas', 'isr', 'high_watermark')"), 0);
    md_close(db);
}
END_TEST

/* Migration 0010 on a database a version-9 broker wrote: the acls table is
 * rebuilt to take SUBJECT, every ACL kept, the other names still refused. */
START_TEST(test_migration_0010_acls_take_subject)
{
    struct md_sql_file v9[16];
    size_t nv9 = 0;
    for (size_t i = 0; i < md_sql_files_count && nv9 < 16; i++) {
        const char *m = strstr(md_sql_files[i].name, "migrations/");
        if (!strcmp(md_sql_files[i].name, "sql/schema.sql") || (m && atoi(m + 11) <= 9))
            v9[nv9++] = md_sql_files[i];
    }
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open_files(path, v9, nv9, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_schema_version(db), 9);
    const char *subject = "INSERT INTO acls (resource_type, resource_name, pattern_type, "
                          "principal, operation, permission) VALUES ('SUBJECT', 's-', "
                          "'PREFIXED', 'User:a', 'READ', 'ALLOW')";
    ck_assert_int_ne(sqlite3_exec(md_sqlite(db), subject, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db),
        "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, host, "
        "operation, permission) VALUES ('TOPIC', 't', 'LITERAL', 'User:a', '10.0.0.1', "
        "'WRITE', 'DENY'), ('CLUSTER', 'kafka-cluster', 'LITERAL', 'User:b', '*', 'ALL', "
        "'ALLOW')", NULL, NULL, NULL), SQLITE_OK);
    md_close(db);

    db = open_ok();
    ck_assert_int_eq(md_schema_version(db), latest_version());
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM acls WHERE (resource_type, "
                                   "resource_name, host, operation, permission) IN (VALUES "
                                   "('TOPIC', 't', '10.0.0.1', 'WRITE', 'DENY'), ('CLUSTER', "
                                   "'kafka-cluster', '*', 'ALL', 'ALLOW'))"), 2);
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db), subject, NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_ne(sqlite3_exec(md_sqlite(db), "INSERT INTO acls (resource_type, "
                                  "resource_name, pattern_type, principal, operation, "
                                  "permission) VALUES ('SUBJECTS', 'x', 'LITERAL', 'User:a', "
                                  "'READ', 'ALLOW')", NULL, NULL, NULL), SQLITE_OK);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM acls"), 3);
    md_close(db);
}
END_TEST

START_TEST(test_reopen_is_idempotent)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_topic_create(db, "keep", 2, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), 0);
    md_close(db);
    for (int i = 0; i < 3; i++) {
        db = open_ok();
        ck_assert_int_eq(md_schema_version(db), latest_version());
        ck_assert_int_eq(query_int(db, "SELECT count(*) FROM topics"), 1);
        ck_assert_int_eq(query_int(db, "SELECT count(*) FROM producer_ids"), 1);
        md_close(db);
    }
}
END_TEST

START_TEST(test_migration_applies_once_in_order)
{
    struct md_sql_file files[] = {
        /* Deliberately out of order: the number decides, not the position. */
        { "sql/migrations/0003_note.sql",
          "INSERT INTO mig_log (what) VALUES ('0003');" },
        *linked_schema(),
        { "sql/migrations/0002_log.sql",
          "CREATE TABLE mig_log (what TEXT NOT NULL) STRICT;"
          "INSERT INTO mig_log (what) VALUES ('0002');" },
    };
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_msg(md_open_files(path, files, 3, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_schema_version(db), 3);
    char buf[32];
    ck_assert_str_eq(query_text(db, "SELECT group_concat(what, ',') FROM "
                                    "(SELECT what FROM mig_log ORDER BY rowid)",
                                buf, sizeof buf), "0002,0003");
    md_close(db);

    ck_assert_int_eq(md_open_files(path, files, 3, &db, err, sizeof err), 0);
    ck_assert_int_eq(md_schema_version(db), 3);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM mig_log"), 2);
    md_close(db);
}
END_TEST

START_TEST(test_migration_upgrades_an_existing_database)
{
    md_db *db = open_schema_only();      /* version 1 */
    char err[MD_ERRLEN] = "";
    /* As a version-1 broker wrote it (md_* now speaks the latest schema). */
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db), "INSERT INTO topics VALUES "
                                  "('old', randomblob(16), 1, 1, 0, 0)", NULL, NULL,
                                  NULL), SQLITE_OK);
    md_close(db);
    struct md_sql_file files[] = {
        *linked_schema(),
        { "sql/migrations/0002_brokers_zone.sql",
          "ALTER TABLE brokers ADD COLUMN zone TEXT;" },
    };
    ck_assert_msg(md_open_files(path, files, 2, &db, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(md_schema_version(db), 2);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM pragma_table_info('brokers') "
                                   "WHERE name = 'zone'"), 1);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM topics"), 1);
    md_close(db);
}
END_TEST

START_TEST(test_failing_migration_rolls_back_and_names_file)
{
    struct md_sql_file files[] = {
        *linked_schema(),
        { "sql/migrations/0002_half.sql",
          "CREATE TABLE half (x INTEGER);"
          "THIS IS NOT SQL;" },
    };
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_open_files(path, files, 2, &db, err, sizeof err), MD_E_SQL);
    ck_assert_ptr_null(db);
    ck_assert_ptr_nonnull(strstr(err, "0002_half.sql"));

    /* The file stayed at version 1 without the half-made table. */
    db = open_schema_only();
    ck_assert_int_eq(md_schema_version(db), 1);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM sqlite_schema "
                                   "WHERE name = 'half'"), 0);
    md_close(db);
}
END_TEST

START_TEST(test_newer_database_is_refused)
{
    md_db *db = open_ok();
    ck_assert_int_eq(sqlite3_exec(md_sqlite(db), "PRAGMA user_version = 42",
                                  NULL, NULL, NULL), SQLITE_OK);
    md_close(db);
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_open(path, &db, err, sizeof err), MD_E_SQL);
    ck_assert_ptr_nonnull(strstr(err, "newer"));
}
END_TEST

START_TEST(test_duplicate_or_unnumbered_migrations_are_refused)
{
    struct md_sql_file dup[] = {
        *linked_schema(),
        { "sql/migrations/0002_a.sql", "SELECT 1;" },
        { "sql/migrations/0002_b.sql", "SELECT 1;" },
    };
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_open_files(path, dup, 3, &db, err, sizeof err), MD_E_SQL);
    ck_assert_ptr_nonnull(strstr(err, "same version"));

    struct md_sql_file bad[] = {
        *linked_schema(),
        { "sql/migrations/add_thing.sql", "SELECT 1;" },
    };
    ck_assert_int_eq(md_open_files(path, bad, 2, &db, err, sizeof err), MD_E_SQL);
    ck_assert_ptr_nonnull(strstr(err, "add_thing.sql"));
}
END_TEST

START_TEST(test_schema_must_set_user_version)
{
    struct md_sql_file files[] = {
        { "sql/schema.sql", "CREATE TABLE t (x INTEGER);" },
    };
    md_db *db = NULL;
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_open_files(path, files, 1, &db, err, sizeof err), MD_E_SQL);
    ck_assert_ptr_nonnull(strstr(err, "user_version"));
}
END_TEST

START_TEST(test_open_fails_cleanly_on_bad_path)
{
    md_db *db = (md_db *)1;
    char err[MD_ERRLEN] = "";
    ck_assert_int_eq(md_open("/nonexistent-dir/x/meta.db", &db, err, sizeof err),
                     MD_E_SQL);
    ck_assert_ptr_null(db);
    ck_assert_ptr_nonnull(strstr(err, "/nonexistent-dir/x/meta.db"));
}
END_TEST

START_TEST(test_begin_rollback_discards_changes)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_begin(db), 0);
    ck_assert_int_eq(md_topic_create(db, "t1", 1, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), 0);
    ck_assert_int_eq(md_broker_upsert(db, 1, "localhost", 9092, NULL), 0);
    ck_assert_int_eq(md_rollback(db), 0);
    ck_assert_int_eq(md_topic_get(db, "t1", NULL), KP_UNKNOWN_TOPIC_OR_PARTITION);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM brokers"), 0);
    md_close(db);
}
END_TEST

START_TEST(test_failed_change_inside_transaction_undoes_only_itself)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    ck_assert_int_eq(md_begin(db), 0);
    ck_assert_int_eq(md_topic_create(db, "a", 1, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), 0);
    ck_assert_int_eq(md_topic_create(db, "a", 1, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), KP_TOPIC_ALREADY_EXISTS);
    ck_assert_int_eq(md_topic_create(db, "b", 3, 1, NULL, 0, 1, NULL, false, err,
                                     sizeof err), 0);
    ck_assert_int_eq(md_commit(db), 0);
    md_close(db);

    db = open_ok();
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM topics"), 2);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM partitions"), 4);
    md_close(db);
}
END_TEST

START_TEST(test_broker_upsert_inserts_then_updates)
{
    md_db *db = open_ok();
    ck_assert_int_eq(md_broker_upsert(db, 1, "h1", 9092, NULL), 0);
    ck_assert_int_eq(md_broker_upsert(db, 1, "h2", 9093, "r1"), 0);
    ck_assert_int_eq(md_broker_upsert(db, 2, "h3", 9092, NULL), 0);
    ck_assert_int_eq(query_int(db, "SELECT count(*) FROM brokers"), 2);
    char buf[64];
    ck_assert_str_eq(query_text(db, "SELECT host || ':' || port || ':' || rack "
                                    "FROM brokers WHERE id = 1", buf, sizeof buf),
                     "h2:9093:r1");
    ck_assert_int_eq(md_broker_upsert(db, 3, "h", 70000, NULL), KP_INVALID_REQUEST);
    ck_assert_int_eq(md_broker_upsert(db, -1, "h", 1, NULL), KP_INVALID_REQUEST);
    md_close(db);
}
END_TEST

START_TEST(test_data_persists_across_close_and_reopen)
{
    md_db *db = open_ok();
    char err[MD_ERRLEN];
    md_kv cfg[] = { { "retention.ms", "1000" } };
    ck_assert_int_eq(md_topic_create(db, "p", 2, 1, cfg, 1, 7, NULL, false, err,
                                     sizeof err), 0);
    ck_assert_int_eq(md_log_bookmarks_save(db, "p", 1, 5, 10, 12), 0);
    md_topic before;
    ck_assert_int_eq(md_topic_get(db, "p", &before), 0);
    md_close(db);

    db = open_ok();
    md_topic after;
    ck_assert_int_eq(md_topic_get(db, "p", &after), 0);
    ck_assert_mem_eq(before.id, after.id, 16);
    ck_assert_int_eq(after.partitions, 2);
    ck_assert_int_eq(after.created_at_ms, before.created_at_ms);
    md_partition *parts;
    size_t n;
    ck_assert_int_eq(md_partition_list(db, "p", &parts, &n), 0);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(parts[1].st.leader, 7);
    ck_assert_int_eq(parts[1].high_watermark, 12);
    free(parts);
    md_kv *kv;
    ck_assert_int_eq(md_topic_configs(db, "p", &kv, &n), 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_str_eq(kv[0].value, "1000");
    md_kv_free(kv, n);
    md_close(db);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_open_creates_schema_and_sets_user_version,
        test_open_sets_wal_foreign_keys_normal_sync_no_autocheckpoint,
        test_batch_commit_stays_in_wal_until_worker_checkpoints,
        test_worker_checkpoints_while_loop_writes_and_wal_keeps_its_inode,
        test_syncer_and_loop_write_batches_side_by_side,
        test_wal_sync_without_wal_file_is_a_no_op, test_reopen_is_idempotent,
        test_migration_applies_once_in_order, test_migration_upgrades_an_existing_database,
        test_failing_migration_rolls_back_and_names_file, test_newer_database_is_refused,
        test_duplicate_or_unnumbered_migrations_are_refused, test_schema_must_set_user_version,
        test_migration_0003_splits_partition_facts,
                             test_migration_0010_acls_take_subject,
        test_open_fails_cleanly_on_bad_path, test_begin_rollback_discards_changes,
        test_failed_change_inside_transaction_undoes_only_itself,
        test_broker_upsert_inserts_then_updates, test_data_persists_across_close_and_reopen,
    };
    return unit_run("md_db", "db", tests, sizeof tests / sizeof *tests, setup, teardown, 0);
}
