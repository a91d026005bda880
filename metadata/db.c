/*
 * metadata/db.c — the connection: open, pragmas, the statement cache,
 * transactions, brokers.
 *
 * Design note.
 *
 * One md_db wraps one sqlite3 connection owned by one thread (opened
 * SQLITE_OPEN_NOMUTEX).  md_open does, in order:
 *   1. open/create the file; extended result codes; a busy handler that
 *      waits up to ~5 s for the write lock (busy_nap: the sync worker's
 *      jobs, the admin shell or a second process may hold it briefly);
 *   2. journal_mode=WAL: readers (sluice-sql, /sql) never block the broker
 *      and the broker never blocks them;
 *   3. synchronous=NORMAL, wal_autocheckpoint=0 and the commit hook
 *      (wal_hook, below);
 *   4. migrations (migrate.c), with foreign keys still off so a migration
 *      may rebuild a table the way SQLite's ALTER TABLE guide says;
 *   5. foreign_keys=ON, which the schema's ON DELETE CASCADEs rely on;
 *   6. prepare every statement in stmt_sql[] before ST_FIRST_LAZY once.  A
 *      statement that no longer matches the schema fails the open, not a
 *      request later.  The rest are prepared on first use (md_stmt_lazy).
 *
 * Durability.  The handle lives on the broker's event loop, which must
 * never wait for an fsync (~0.2 ms on an idle SSD, tens of ms on a busy
 * disk).  So:
 *   - synchronous=NORMAL: a COMMIT only write()s its frames to the WAL,
 *     i.e. into the page cache.  It survives a crash of the process, not
 *     yet a power cut.
 *   - wal_autocheckpoint=0 (and our own WAL hook, which replaces SQLite's
 *     auto-checkpoint hook): this connection never checkpoints, since a
 *     checkpoint fsyncs the WAL and the database file.
 *   - md_wal_sync(db) is the durability step: fdatasync of the -wal file,
 *     through a descriptor opened by path (O_RDONLY; fsync of any
 *     descriptor of a file flushes the file).  It covers every transaction
 *     that any connection committed before the call.  The broker runs it
 *     on a worker thread with its own handle (md_open_syncer), which also
 *     runs PASSIVE checkpoints (md_checkpoint): those copy pages while
 *     writers go on, and never make a writer wait.  See daemon/md_sync.c
 *     for the group-commit protocol built on it.
 *
 * Which commits are synced where — the contract of this module:
 *   D1. A transaction ended by md_commit (the caller's md_begin batch:
 *       the sync worker's jobs — offset commits and group state of a loop
 *       turn —, partition offsets on a timer) is NOT synced here.  The caller owns its durability: it
 *       asks the sync worker and holds any answer that promises durability
 *       until the worker reports a sync that started after md_commit.
 *   D2. Any other commit — an md_* change made outside md_begin (topic
 *       create/delete, config changes, producer-id blocks, group deletes,
 *       the broker row), or a migration — is synced before the md_* call
 *       returns, by wal_hook: SQLite calls it after every commit on this
 *       connection, and outside a batch it runs md_wal_sync.  These are
 *       rare admin writes, so they keep the old "durable when it returns"
 *       promise at the price of one fdatasync on the caller's thread, and
 *       no handler can forget a sync.  A failed sync makes the statement
 *       report an error (the commit itself has happened: SQLite's rule).
 *   D3. SQLite restarts the WAL (writes from offset 0 again after a
 *       complete checkpoint) by overwriting the same file in place, so the
 *       descriptor md_wal_sync opened stays the WAL; the file is unlinked
 *       only when the last connection closes, and the sync worker's
 *       connection stays open until after the last md_wal_sync.
 *   D4. One fsync remains on the writer's side by SQLite's design: the
 *       first commit after a WAL restart syncs the new WAL header (even at
 *       NORMAL; it orders the header before later frames).  That is once
 *       per completed checkpoint, i.e. at most once per checkpoint
 *       interval of the worker, not once per transaction.
 *   D5. The syncer's handle writes too: the worker's jobs (offset commits
 *       and group state, in md_begin batches that its own md_wal_sync then
 *       covers).  It has the loop's pragmas (foreign keys, no automatic
 *       checkpoint) and statements, and no wal_hook: its commits are
 *       always the worker's to sync.  Writers take turns through the
 *       busy handler (busy_nap).
 *
 * Invariants:
 *   I1. Outside an md_* call no statement of st[] is left stepping (every
 *       path resets), so no read transaction pins an old WAL snapshot and
 *       checkpoints can always complete.
 *   I2. An md_* change is all-or-nothing (md_txn_enter/leave), whether or
 *       not the caller holds an md_begin transaction.
 *   I3. Statement order in stmt_sql[] equals enum md_stmt.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metadata/md_internal.h"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN]       = "BEGIN IMMEDIATE",
    [ST_COMMIT]      = "COMMIT",
    [ST_ROLLBACK]    = "ROLLBACK",
    [ST_SAVEPOINT]   = "SAVEPOINT md_change",
    [ST_RELEASE]     = "RELEASE md_change",
    [ST_ROLLBACK_TO] = "ROLLBACK TO md_change",
    [ST_USER_VERSION] = "PRAGMA user_version",
    [ST_BROKER_UPSERT] =
        "INSERT INTO brokers (id, host, port, rack, registered_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE SET "
        "host = excluded.host, port = excluded.port, rack = excluded.rack, "
        "registered_at = excluded.registered_at",
    [ST_TOPIC_GET] =
        "SELECT name, topic_id, partitions, replication_factor, internal, "
        "created_at FROM topics WHERE name = ?1",
    [ST_TOPIC_LIST] =
        "SELECT name, topic_id, partitions, replication_factor, internal, "
        "created_at FROM topics ORDER BY name",
    /* Kafka refuses a topic whose name equals an existing one once '.' and
     * '_' are treated alike: both map to the same metric names. */
    [ST_TOPIC_COLLIDES] =
        "SELECT name FROM topics WHERE name <> ?1 AND "
        "replace(name, '.', '_') = replace(?1, '.', '_') LIMIT 1",
    [ST_TOPIC_INSERT] =
        "INSERT INTO topics (name, topic_id, partitions, replication_factor, "
        "internal, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_TOPIC_DELETE] = "DELETE FROM topics WHERE name = ?1",
    [ST_TOPIC_SET_PARTITIONS] =
        "UPDATE topics SET partitions = ?2 WHERE name = ?1",
    [ST_CFG_LIST] =
        "SELECT name, value FROM topic_configs WHERE topic = ?1 ORDER BY name",
    [ST_CFG_UPSERT] =
        "INSERT INTO topic_configs (topic, name, value) VALUES (?1, ?2, ?3) "
        "ON CONFLICT (topic, name) DO UPDATE SET value = excluded.value",
    [ST_CFG_DELETE] = "DELETE FROM topic_configs WHERE topic = ?1 AND name = ?2",
    [ST_CFG_DELETE_ALL] = "DELETE FROM topic_configs WHERE topic = ?1",
    /* metadata/groups.c: every state change and every loop turn of offset
     * commits runs these, so they are prepared once here. */
    [ST_GROUP_UPSERT] =
        "INSERT INTO consumer_groups (group_id, state, protocol_type, protocol, "
        "generation, leader, updated_at, state_changed_at) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT (group_id) DO UPDATE SET "
        "state = excluded.state, protocol_type = excluded.protocol_type, "
        "protocol = excluded.protocol, generation = excluded.generation, "
        "leader = excluded.leader, updated_at = excluded.updated_at, "
        "state_changed_at = excluded.state_changed_at",
    [ST_MEMBERS_DELETE] = "DELETE FROM group_members WHERE group_id = ?1",
    [ST_MEMBER_INSERT] =
        "INSERT INTO group_members (group_id, member_id, instance_id, "
        "client_id, client_host, session_timeout_ms, rebalance_timeout_ms, "
        "subscription, assignment) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [ST_OFFSET_COMMIT] =
        "INSERT INTO committed_offsets (group_id, topic, partition, offset, "
        "leader_epoch, metadata, commit_time_ms, expire_time_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) "
        "ON CONFLICT (group_id, topic, partition) DO UPDATE SET "
        "offset = excluded.offset, leader_epoch = excluded.leader_epoch, "
        "metadata = excluded.metadata, commit_time_ms = excluded.commit_time_ms, "
        "expire_time_ms = excluded.expire_time_ms",
    [ST_OFFSET_UPDATE] =
        "UPDATE committed_offsets SET offset = ?4, leader_epoch = ?5, metadata = ?6, "
        "commit_time_ms = ?7, expire_time_ms = ?8 "
        "WHERE group_id = ?1 AND topic = ?2 AND partition = ?3",
    [ST_OFFSET_DELETE] =
        "DELETE FROM committed_offsets WHERE group_id = ?1 AND topic = ?2 AND partition = ?3",
    [ST_OFFSET_LIST] =
        "SELECT topic, partition, offset, leader_epoch, metadata, commit_time_ms "
        "FROM committed_offsets WHERE group_id = ?1 ORDER BY topic, partition",
    /* An upsert: the mirror re-puts partitions that exist, and their
     * local_logs rows (foreign key children) must survive it. */
    [ST_PART_INSERT] =
        "INSERT INTO partitions (topic, partition, leader, leader_epoch, "
        "controller_epoch, zk_version) VALUES (?1, ?2, ?3, ?4, ?5, ?6) "
        "ON CONFLICT (topic, partition) DO UPDATE SET leader = excluded.leader, "
        "leader_epoch = excluded.leader_epoch, "
        "controller_epoch = excluded.controller_epoch, zk_version = excluded.zk_version",
    /* The bookmarks come along where this broker hosts the partition. */
    [ST_PART_LIST] =
        "SELECT p.partition, p.leader, p.leader_epoch, l.log_start_offset, "
        "l.recovery_point, l.high_watermark, l.topic IS NOT NULL, "
        "p.controller_epoch, p.zk_version FROM partitions p LEFT JOIN local_logs l "
        "ON l.topic = p.topic AND l.partition = p.partition "
        "WHERE p.topic = ?1 ORDER BY p.partition",
    [ST_PART_SET_STATE] =
        "UPDATE partitions SET leader = ?3, leader_epoch = ?4, "
        "controller_epoch = ?5, zk_version = ?6 WHERE topic = ?1 AND partition = ?2",
    [ST_REPLICA_INSERT] =
        "INSERT INTO partition_replicas (topic, partition, position, broker_id, "
        "in_isr, reassigning) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_REPLICA_LIST] =
        "SELECT partition, broker_id, in_isr, reassigning FROM partition_replicas "
        "WHERE topic = ?1 ORDER BY partition, position",
    [ST_REPLICAS_DELETE] =
        "DELETE FROM partition_replicas WHERE topic = ?1 AND partition = ?2",
    [ST_LOG_SAVE] =
        "INSERT INTO local_logs (topic, partition, log_start_offset, "
        "recovery_point, high_watermark) VALUES (?1, ?2, ?3, ?4, ?5) "
        "ON CONFLICT (topic, partition) DO UPDATE SET "
        "log_start_offset = excluded.log_start_offset, "
        "recovery_point = excluded.recovery_point, "
        "high_watermark = excluded.high_watermark",
    [ST_CLUSTER_GET] = "SELECT cluster_id FROM cluster WHERE id = 0",
    [ST_CLUSTER_INSERT] =
        "INSERT INTO cluster (id, cluster_id, created_at) VALUES (0, ?1, ?2) "
        "ON CONFLICT (id) DO NOTHING",
    [ST_BROKERS_MARK_DEAD] = "UPDATE brokers SET alive = 0 WHERE alive <> 0",
    [ST_BROKER_MIRROR] =
        "INSERT INTO brokers (id, host, port, rack, endpoints, registered_at, alive) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1) ON CONFLICT (id) DO UPDATE SET "
        "host = excluded.host, port = excluded.port, rack = excluded.rack, "
        "endpoints = excluded.endpoints, registered_at = excluded.registered_at, "
        "alive = 1",
    [ST_BROKER_LIST] =
        "SELECT id, host, port, rack, endpoints, registered_at, alive "
        "FROM brokers ORDER BY id",
    [ST_CONTROLLER_SET] =
        "INSERT INTO controller (id, broker_id, epoch, changed_at) "
        "VALUES (0, ?1, ?2, ?3) ON CONFLICT (id) DO UPDATE SET "
        "broker_id = excluded.broker_id, epoch = excluded.epoch, "
        "changed_at = excluded.changed_at",
    [ST_CONTROLLER_GET] = "SELECT broker_id, epoch FROM controller WHERE id = 0",
    [ST_TOPIC_MIRROR_UPDATE] =
        "UPDATE topics SET partitions = ?2, replication_factor = ?3, internal = ?4 "
        "WHERE name = ?1",
    [ST_PARTS_TRUNCATE] = "DELETE FROM partitions WHERE topic = ?1 AND partition >= ?2",
    [ST_TXN_OFFSET_PUT] =
        "INSERT INTO pending_txn_offsets (group_id, topic, partition, producer_id, "
        "producer_epoch, offset, leader_epoch, metadata, commit_time_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
        "ON CONFLICT (group_id, topic, partition, producer_id) DO UPDATE SET "
        "producer_epoch = excluded.producer_epoch, offset = excluded.offset, "
        "leader_epoch = excluded.leader_epoch, metadata = excluded.metadata, "
        "commit_time_ms = excluded.commit_time_ms, superseded = 0",
    /* An ordinary commit written after the pending ones (0008's note). */
    [ST_TXN_OFFSET_SUPERSEDE] =
        "UPDATE pending_txn_offsets SET superseded = 1 "
        "WHERE group_id = ?1 AND topic = ?2 AND partition = ?3 AND superseded = 0",
    [ST_SR_VERSION_PUT] =
        "INSERT OR REPLACE INTO registry_versions (subject, version, schema_id, deleted) "
        "VALUES (?1, ?2, ?3, ?4)",
    [ST_SR_VERSION_DELETE] = "DELETE FROM registry_versions WHERE subject = ?1 AND version = ?2",
    [ST_SR_SOFT_DELETE] =
        "UPDATE registry_versions SET deleted = 1 WHERE subject = ?1 AND version <= ?2",
    [ST_SR_SCHEMA_PUT] =
        "INSERT OR REPLACE INTO registry_schemas (id, schema_type, schema, refs) "
        "VALUES (?1, ?2, ?3, ?4)",
    [ST_SR_SCHEMA_DELETE] = "DELETE FROM registry_schemas WHERE id = ?1",
    [ST_SR_CONFIG_PUT] =
        "INSERT OR REPLACE INTO registry_configs (subject, compatibility, mode) "
        "VALUES (?1, nullif(?2, ''), nullif(?3, ''))",
    [ST_SR_CONFIG_DELETE] = "DELETE FROM registry_configs WHERE subject = ?1",
};

int md_errf(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

int md_sqlerr(md_db *db, char *err, size_t errlen, const char *what)
{
    return md_errf(err, errlen, MD_E_SQL, "%s: %s", what, sqlite3_errmsg(db->h));
}

int64_t md_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

sqlite3_stmt *md_stmt(md_db *db, enum md_stmt which)
{
    sqlite3_stmt *s = db->st[which];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
}

int md_stmt_lazy(md_db *db, enum md_stmt which, sqlite3_stmt **out,
                 char *err, size_t errlen)
{
    if (!db->st[which] &&
        sqlite3_prepare_v3(db->h, stmt_sql[which], -1, SQLITE_PREPARE_PERSISTENT,
                           &db->st[which], NULL) != SQLITE_OK) {
        db->st[which] = NULL;
        *out = NULL;
        return md_errf(err, errlen, MD_E_SQL, "prepare \"%s\": %s",
                       stmt_sql[which], sqlite3_errmsg(db->h));
    }
    *out = md_stmt(db, which);
    return 0;
}

int md_step_done(md_db *db, sqlite3_stmt *s, char *err, size_t errlen,
                 const char *what)
{
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        ;
    int out = rc == SQLITE_DONE ? 0 : md_sqlerr(db, err, errlen, what);
    sqlite3_reset(s);
    return out;
}

int md_rows(sqlite3_stmt *s, size_t size, int (*fill)(sqlite3_stmt *s, void *elem),
            void (*drop)(void *v, size_t cnt), void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!s)
        return MD_E_SQL;
    char *v = NULL;
    size_t cnt = 0, cap = 0;
    int step, rc = 0;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        if (cnt == cap) {
            cap = cap ? cap * 2 : 8;
            char *nv = realloc(v, cap * size);
            if (!nv) {
                rc = MD_E_SQL;
                break;
            }
            v = nv;
        }
        if ((rc = fill(s, v + cnt++ * size)))
            break;
    }
    if (!rc && step != SQLITE_DONE)
        rc = MD_E_SQL;
    sqlite3_reset(s);
    if (rc) {
        if (drop)
            drop(v, cnt);
        else
            free(v);
        return rc;
    }
    *out = v;
    *n = cnt;
    return 0;
}

enum { TXN_OWN = 1, TXN_SAVEPOINT = 2 };

int md_txn_enter(md_db *db, int *token, char *err, size_t errlen)
{
    if (sqlite3_get_autocommit(db->h)) {
        *token = TXN_OWN;
        return md_step_done(db, md_stmt(db, ST_BEGIN), err, errlen, "begin");
    }
    *token = TXN_SAVEPOINT;
    return md_step_done(db, md_stmt(db, ST_SAVEPOINT), err, errlen, "savepoint");
}

int md_txn_leave(md_db *db, int token, int rc, char *err, size_t errlen)
{
    if (token == TXN_OWN) {
        if (rc == 0) {
            rc = md_step_done(db, md_stmt(db, ST_COMMIT), err, errlen, "commit");
            if (rc == 0)
                return 0;
        }
        /* Some errors (SQLITE_FULL, IOERR) already rolled back. */
        if (!sqlite3_get_autocommit(db->h))
            md_step_done(db, md_stmt(db, ST_ROLLBACK), NULL, 0, "rollback");
        return rc;
    }
    if (rc != 0 && !sqlite3_get_autocommit(db->h))
        md_step_done(db, md_stmt(db, ST_ROLLBACK_TO), NULL, 0, "rollback to");
    if (!sqlite3_get_autocommit(db->h)) {
        int r2 = md_step_done(db, md_stmt(db, ST_RELEASE), rc ? NULL : err,
                              rc ? 0 : errlen, "release");
        if (rc == 0)
            rc = r2;
    }
    return rc;
}

static int exec_pragma(sqlite3 *h, const char *sql, char *err, size_t errlen)
{
    char *msg = NULL;
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        md_errf(err, errlen, MD_E_SQL, "%s: %s", sql, msg ? msg : "?");
        sqlite3_free(msg);
        return MD_E_SQL;
    }
    return 0;
}

/* journal_mode answers with the mode it ended up in: a file on a
 * filesystem without shared memory support stays "delete", which would
 * silently lose the readers-never-block promise. */
static int set_wal(sqlite3 *h, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(h, "PRAGMA journal_mode=WAL", -1, &s, NULL) != SQLITE_OK)
        return md_errf(err, errlen, MD_E_SQL, "journal_mode: %s", sqlite3_errmsg(h));
    int rc = 0;
    if (sqlite3_step(s) != SQLITE_ROW) {
        rc = md_errf(err, errlen, MD_E_SQL, "journal_mode: %s", sqlite3_errmsg(h));
    } else {
        const char *mode = (const char *)sqlite3_column_text(s, 0);
        if (!mode || (strcmp(mode, "wal") && strcmp(mode, "memory")))
            rc = md_errf(err, errlen, MD_E_SQL,
                         "journal_mode: WAL refused (mode is %s)",
                         mode ? mode : "?");
    }
    sqlite3_finalize(s);
    return rc;
}

/* D2: SQLite calls this after every commit on the connection, write lock
 * released.  A batch (md_begin … md_commit) is the caller's to sync (D1). */
static int wal_hook(void *arg, sqlite3 *h, const char *dbname, int frames)
{
    (void)h; (void)dbname; (void)frames;
    md_db *db = arg;
    if (db->in_batch)
        return SQLITE_OK;
    return md_wal_sync(db) == 0 ? SQLITE_OK : SQLITE_IOERR_FSYNC;
}

int md_wal_sync(md_db *db)
{
    if (db->wal_fd < 0) {
        const char *main_path = sqlite3_db_filename(db->h, "main");
        if (!main_path || !*main_path)
            return 0;                 /* in-memory: nothing to sync */
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s-wal", main_path) >= (int)sizeof p)
            return -ENAMETOOLONG;
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            /* No WAL file: nothing was ever committed to one since the
             * last connection closed (which checkpointed and synced). */
            if (errno == ENOENT)
                return 0;
            db->wal_err = errno;
            return -errno;
        }
        db->wal_fd = fd;
    }
    while (fdatasync(db->wal_fd) != 0) {
        if (errno == EINTR)
            continue;
        db->wal_err = errno;
        return -errno;
    }
    return 0;
}

int md_checkpoint(md_db *db, int *wal_frames, int *copied, char *err, size_t errlen)
{
    int log = -1, ck = -1;
    int rc = sqlite3_wal_checkpoint_v2(db->h, "main", SQLITE_CHECKPOINT_PASSIVE,
                                       &log, &ck);
    if (wal_frames)
        *wal_frames = log;
    if (copied)
        *copied = ck;
    /* BUSY: another connection (the admin shell closing) is checkpointing;
     * it does our work. */
    if (rc != SQLITE_OK && rc != SQLITE_BUSY)
        return md_sqlerr(db, err, errlen, "checkpoint");
    return 0;
}

/* Opens path in WAL mode at synchronous=NORMAL with a busy timeout: the
 * steps both kinds of handle share.  0 with *out set, or MD_E_SQL. */
/* Two connections of the broker write (the loop's, and the sync worker's
 * jobs, daemon/md_sync.c), and a transaction holds the write lock for
 * well under a millisecond: nap in tens of µs first, where SQLite's own
 * handler would sleep 1 ms and more from the first retry; give up after
 * about 5 s (the admin shell or another process may hold it longer). */
static int busy_nap(void *arg, int count)
{
    (void)arg;
    if (count < 200) {
        usleep(50);                    /* the first 10 ms */
        return 1;
    }
    if (count < 200 + 4990) {
        usleep(1000);
        return 1;
    }
    return 0;
}

/* Prepares every statement before ST_FIRST_LAZY (step 6). */
static int prepare_eager(md_db *db, char *err, size_t errlen)
{
    for (int i = 0; i < ST_FIRST_LAZY; i++)
        if (sqlite3_prepare_v3(db->h, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                               &db->st[i], NULL) != SQLITE_OK)
            return md_errf(err, errlen, MD_E_SQL, "prepare \"%s\": %s",
                           stmt_sql[i], sqlite3_errmsg(db->h));
    return 0;
}

/* Before SQLite's first use: no memory statistics.  With them on, every
 * sqlite3_malloc and free takes a process-wide mutex (offset-commit
 * upserts ran ~14 % faster without, in a microbenchmark), and nothing here
 * reads them.  Too late once SQLite is initialised
 * (SQLITE_MISUSE, ignored): the statistics then just stay on. */
static void sqlite_global_setup(void)
{
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

static int open_handle(const char *path, int flags, md_db **out, char *err, size_t errlen)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, sqlite_global_setup);
    *out = NULL;
    md_db *db = calloc(1, sizeof *db);
    if (!db)
        return md_errf(err, errlen, MD_E_SQL, "out of memory");
    db->wal_fd = -1;
    if (sqlite3_open_v2(path, &db->h, flags | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        md_errf(err, errlen, MD_E_SQL, "open %s: %s", path,
                db->h ? sqlite3_errmsg(db->h) : "out of memory");
        md_close(db);
        return MD_E_SQL;
    }
    sqlite3_extended_result_codes(db->h, 1);
    sqlite3_busy_handler(db->h, busy_nap, NULL);
    int rc = set_wal(db->h, err, errlen);
    /* The syncer's checkpoints sync WAL and database file at NORMAL as at
     * FULL; the loop's commits must not sync at all (D1). */
    if (!rc)
        rc = exec_pragma(db->h, "PRAGMA synchronous=NORMAL", err, errlen);
    if (rc) {
        md_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

/* The end of md_open_syncer and md_open_files: after rc (0 so far) the
 * schema rules and the eager statements, then db in *out, or closed. */
static int open_finish(md_db *db, int rc, md_db **out, char *err, size_t errlen)
{
    if (!rc)
        rc = exec_pragma(db->h, "PRAGMA foreign_keys=ON", err, errlen);
    if (!rc)
        rc = prepare_eager(db, err, errlen);
    if (rc) {
        md_close(db);
        return rc;
    }
    *out = db;
    return 0;
}

int md_open_syncer(const char *path, md_db **out, char *err, size_t errlen)
{
    *out = NULL;
    md_db *db;
    int rc = open_handle(path, SQLITE_OPEN_READWRITE, &db, err, errlen);
    if (rc)
        return rc;
    /* A read makes this connection open the WAL, which from now on keeps
     * the file from being unlinked (D3).  The worker also writes (its
     * jobs, D5): the loop's schema rules and statements, and no automatic
     * checkpoint after a commit (it runs its own, on its interval). */
    rc = exec_pragma(db->h, "SELECT count(*) FROM sqlite_master", err, errlen);
    if (!rc)
        rc = exec_pragma(db->h, "PRAGMA wal_autocheckpoint=0", err, errlen);
    return open_finish(db, rc, out, err, errlen);
}

void md_close(md_db *db)
{
    if (!db)
        return;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(db->st[i]);
    sqlite3_close(db->h);
    if (db->wal_fd >= 0)
        close(db->wal_fd);
    free(db);
}

int md_open_files(const char *path, const struct md_sql_file *files, size_t n,
                  md_db **out, char *err, size_t errlen)
{
    *out = NULL;
    md_db *db;
    int rc = open_handle(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db, err, errlen);
    if (rc)
        return rc;
    /* Before the hook: the pragma itself (un)installs SQLite's hook. */
    rc = exec_pragma(db->h, "PRAGMA wal_autocheckpoint=0", err, errlen);
    if (!rc)
        sqlite3_wal_hook(db->h, wal_hook, db);
    if (!rc)
        rc = md_migrate(db->h, files, n, err, errlen);
    return open_finish(db, rc, out, err, errlen);
}

int md_open(const char *path, md_db **out, char *err, size_t errlen)
{
    return md_open_files(path, md_sql_files, md_sql_files_count, out, err, errlen);
}

int md_schema_version(md_db *db)
{
    sqlite3_stmt *s = md_stmt(db, ST_USER_VERSION);
    int v = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int(s, 0) : MD_E_SQL;
    sqlite3_reset(s);
    return v;
}

int md_begin(md_db *db)
{
    int rc = md_step_done(db, md_stmt(db, ST_BEGIN), NULL, 0, "begin");
    db->in_batch = rc == 0;
    return rc;
}

int md_commit(md_db *db)
{
    int rc = md_step_done(db, md_stmt(db, ST_COMMIT), NULL, 0, "commit");
    db->in_batch = false;
    /* A failed COMMIT (disk full, I/O error) may leave the transaction
     * open; end it so the handle is usable and nothing half-done lingers. */
    if (rc && !sqlite3_get_autocommit(db->h))
        md_step_done(db, md_stmt(db, ST_ROLLBACK), NULL, 0, "rollback");
    return rc;
}

int md_rollback(md_db *db)
{
    db->in_batch = false;
    if (sqlite3_get_autocommit(db->h))
        return 0;    /* already rolled back by SQLite after an error */
    return md_step_done(db, md_stmt(db, ST_ROLLBACK), NULL, 0, "rollback");
}

struct sqlite3 *md_sqlite(md_db *db)
{
    return db->h;
}

int md_broker_upsert(md_db *db, int32_t id, const char *host, int port,
                     const char *rack)
{
    if (id < 0 || !host || port < 0 || port > 65535)
        return KP_INVALID_REQUEST;
    sqlite3_stmt *s = md_stmt(db, ST_BROKER_UPSERT);
    sqlite3_bind_int(s, 1, id);
    sqlite3_bind_text(s, 2, host, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, port);
    if (rack)
        sqlite3_bind_text(s, 4, rack, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 5, md_now_ms());
    return md_step_done(db, s, NULL, 0, "broker upsert");
}

void md_kv_free(md_kv *kv, size_t n)
{
    if (!kv)
        return;
    for (size_t i = 0; i < n; i++) {
        free(kv[i].name);
        free(kv[i].value);
    }
    free(kv);
}
