/*
 * metadata/ internals shared by db.c, migrate.c, topics.c and config.c.
 * Not for other modules: they call md.h.  Unit tests (tests/unit/test_md_*)
 * may include it to drive the migration mechanism with their own files.
 */
#ifndef SLUICE_MD_INTERNAL_H
#define SLUICE_MD_INTERNAL_H

#include <stdbool.h>

#include <sqlite3.h>

#include "metadata/md.h"

/* The schema and migrations linked in by sql/embed.sh, sorted by path. */
struct md_sql_file {
    const char *name;
    const char *text;
};
extern const struct md_sql_file md_sql_files[];
extern const size_t md_sql_files_count;

/* Every statement md_* runs, prepared once in md_open (after migrations,
 * so a statement that no longer matches the schema fails the open instead
 * of a request), reset after each use.  Order matches md_stmt_sql[]. */
enum md_stmt {
    ST_BEGIN, ST_COMMIT, ST_ROLLBACK,
    ST_SAVEPOINT, ST_RELEASE, ST_ROLLBACK_TO,
    ST_USER_VERSION,
    ST_BROKER_UPSERT,
    ST_TOPIC_GET, ST_TOPIC_LIST, ST_TOPIC_COLLIDES, ST_TOPIC_INSERT,
    ST_TOPIC_DELETE, ST_TOPIC_SET_PARTITIONS,
    ST_CFG_LIST, ST_CFG_UPSERT, ST_CFG_DELETE, ST_CFG_DELETE_ALL,
    /* Prepared on first use (md_stmt_lazy): their tables come from a
     * migration that the mechanism tests' partial schemas leave out. */
    ST_FIRST_LAZY,
    ST_GROUP_UPSERT = ST_FIRST_LAZY, ST_MEMBERS_DELETE, ST_MEMBER_INSERT,
    ST_OFFSET_COMMIT, ST_OFFSET_UPDATE, ST_OFFSET_LIST,
    ST_OFFSET_DELETE,
    /* sql/migrations/0003: partition state apart from local bookmarks. */
    ST_PART_INSERT, ST_PART_LIST, ST_PART_SET_STATE,
    ST_REPLICA_INSERT, ST_REPLICA_LIST, ST_REPLICAS_DELETE, ST_LOG_SAVE,
    ST_CLUSTER_GET, ST_CLUSTER_INSERT,
    /* sql/migrations/0004: the ZooKeeper mirror (cluster.c, topics.c). */
    ST_BROKERS_MARK_DEAD, ST_BROKER_MIRROR, ST_BROKER_LIST,
    ST_CONTROLLER_SET, ST_CONTROLLER_GET,
    ST_TOPIC_MIRROR_UPDATE, ST_PARTS_TRUNCATE,
    /* sql/migrations/0007: offsets pending in a transaction (txn_offsets.c). */
    ST_TXN_OFFSET_PUT,
    /* 0008: an ordinary commit after pending ones (groups.c). */
    ST_TXN_OFFSET_SUPERSEDE,
    /* 0009: the schema registry's mirror, one row at a time (schemas.c). */
    ST_SR_VERSION_PUT, ST_SR_VERSION_DELETE, ST_SR_SOFT_DELETE,
    ST_SR_SCHEMA_PUT, ST_SR_SCHEMA_DELETE, ST_SR_CONFIG_PUT, ST_SR_CONFIG_DELETE,
    ST_COUNT
};

struct md_db {
    sqlite3 *h;
    sqlite3_stmt *st[ST_COUNT];
    int wal_fd;                  /* the -wal file, O_RDONLY, for fdatasync;
                                    -1 until first needed (db.c) */
    bool in_batch;               /* between md_begin and md_commit/rollback:
                                    the commit is not synced (db.c) */
    int wal_err;                 /* errno of the last failed WAL sync */
};

/* The statement, reset and unbound, ready to bind. */
sqlite3_stmt *md_stmt(md_db *db, enum md_stmt which);

/* A statement at or after ST_FIRST_LAZY, prepared on its first use and
 * kept until md_close, reset and unbound: 0, or MD_E_SQL (err says why). */
int md_stmt_lazy(md_db *db, enum md_stmt which, sqlite3_stmt **out,
                 char *err, size_t errlen);

/* Formats err (may be NULL/0) and returns code. */
int md_errf(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* MD_E_SQL with "what: sqlite's message". */
int md_sqlerr(md_db *db, char *err, size_t errlen, const char *what);

/* Runs a statement that returns no rows (or whose rows are ignored) to the
 * end and resets it: SQLITE_DONE → 0, else MD_E_SQL. */
int md_step_done(md_db *db, sqlite3_stmt *s, char *err, size_t errlen,
                 const char *what);

/* Steps s (bound, ready) to the end, one element of size bytes per row
 * filled by fill() (0, or MD_E_SQL when a row could not be kept), into a
 * malloc'd *out (NULL when none).  On failure drop() frees the cnt
 * elements taken so far, the failed one included (NULL: free()).  s is
 * reset. */
int md_rows(sqlite3_stmt *s, size_t size, int (*fill)(sqlite3_stmt *s, void *elem),
            void (*drop)(void *v, size_t cnt), void **out, size_t *n);
/* fill / drop for md_rows of (topic, partition, offset, leader_epoch,
 * metadata, commit_time_ms) rows into md_committed (groups.c). */
int md_committed_fill(sqlite3_stmt *s, void *elem);
void md_committed_drop(void *v, size_t cnt);
/* A TxnOffsetCommit entry (o->txn) into pending_txn_offsets (txn_offsets.c),
 * inside md_offset_commit's transaction: o->result KP_NONE, or
 * KP_UNKNOWN_TOPIC_OR_PARTITION (topic gone).  0 or MD_E_SQL. */
int md_txn_offset_put(md_db *db, md_offset *o, char *err, size_t errlen);
/* fill / drop for md_rows of (name, value) rows into md_kv (topics.c). */
int md_kv_fill(sqlite3_stmt *s, void *elem);
void md_kv_drop(void *v, size_t cnt);

/* One md_* change as a unit, inside or outside a caller's md_begin:
 * outside, BEGIN IMMEDIATE … COMMIT (takes the write lock up front, so a
 * read-then-write never hits SQLITE_BUSY_SNAPSHOT); inside, a SAVEPOINT, so
 * a failed change undoes only itself and the caller's transaction goes on.
 *   int t; if ((rc = md_txn_enter(db, &t, err, errlen))) return rc;
 *   … rc = work …
 *   return md_txn_leave(db, t, rc, err, errlen);
 * md_txn_leave commits/releases when rc == 0, rolls back otherwise, and
 * returns rc (or MD_E_SQL if the commit itself failed). */
int md_txn_enter(md_db *db, int *token, char *err, size_t errlen);
int md_txn_leave(md_db *db, int token, int rc, char *err, size_t errlen);

int64_t md_now_ms(void);

/* Brings the database at h to the newest version the files describe (see
 * sql/schema.sql for the rules).  files: schema.sql, migrations/NNNN_*.sql
 * and re-run-at-open scripts, as embed.sh lists them.  0 or MD_E_SQL. */
int md_migrate(sqlite3 *h, const struct md_sql_file *files, size_t n,
               char *err, size_t errlen);

/* md_open with another set of SQL files (tests of the mechanism). */
int md_open_files(const char *path, const struct md_sql_file *files, size_t n,
                  md_db **out, char *err, size_t errlen);

#endif
