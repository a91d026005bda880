/*
 * The operator SQL surface: the stable tables an operator queries (brokers,
 * topics, partitions, topic_configs, consumer_groups, group_members,
 * group_assignments, committed_offsets, consumer_lag, messages), the
 * authorizer that allows exactly that surface, and the output formats.
 *
 * Why a temp schema: the internal tables (metadata/, sql/schema.sql) carry
 * some of the same names (topics, partitions, …) with other columns, and
 * may change.  sq_install creates the operator names as TEMP views on one
 * connection; SQLite resolves an unqualified name in temp before main, so
 * "topics" is the view and "main.topics" the internal table.  Nothing is
 * written to the database file: the connection is read-only.
 *
 * Writes (INSERT/UPDATE/DELETE on topics, topic_configs, consumer_groups,
 * committed_offsets, scram_credentials, subjects …) are INSTEAD OF triggers on those views calling one SQL
 * function per row, which hands the change to sq_env.write — in the daemon,
 * the event-loop thread, which applies it through the same functions as the
 * Kafka admin APIs (subjects: the schema registry's REST writes, and their
 * DELETE / UPDATE once the statement has matched every row,
 * sq_schema_writes).  Without a write hook (sluice-sql --data-dir) writes are
 * refused.
 *
 * Live numbers (log end offset, size, segments …) come from sq_env.live: a
 * snapshot the event loop publishes (daemon) or a scan of the partition
 * directories (sluice-sql --data-dir).
 *
 * This file and sql_surface.c, sql_vtab.c, sql_messages.c, sql_format.c
 * depend only on SQLite, metadata/ and protocol/, so sluice-sql links them
 * from libadmin.a without sql_worker.c and admin_http.c (the event-loop
 * side, which the shell never references and the linker leaves out).
 */
#ifndef SLUICE_SQL_SURFACE_H
#define SLUICE_SQL_SURFACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata/md.h"
#include "protocol/kp.h"
#include "segments/seg.h"

struct sqlite3;

/* ---- live partition numbers ------------------------------------------------ */
typedef struct sq_live {
    const char *topic;              /* into the snapshot's string pool */
    int32_t partition;
    int64_t log_start_offset;
    int64_t log_end_offset;
    int64_t high_watermark;
    int64_t last_stable_offset;     /* -1: not known (a stopped broker's files) */
    int64_t size_bytes;
    int32_t segments;
    int64_t last_timestamp;         /* largest record timestamp, -1 none */
    uint64_t bytes_in, messages_in, bytes_out;
    /* cluster mode: this broker leads it; its followers' log ends as the
     * leader knows them are sq_snap.fol[first_follower ..+ nfollowers] */
    bool leading;
    int32_t nfollowers;
    size_t first_follower;
    /* its producers' state: sq_snap.prod[first_producer ..+ nproducers] */
    uint32_t nproducers;
    size_t first_producer;
} sq_live;

/* One producer a partition remembers (daemon/replica/replica_producers.h). */
typedef struct sq_producer {
    int64_t producer_id;
    int64_t last_timestamp;         /* -1: no batch remembered */
    int64_t txn_start;              /* its open transaction's first offset; -1 none */
    int32_t last_sequence;          /* -1: no batch remembered */
    int32_t coordinator_epoch;      /* -1: no marker yet */
    int16_t epoch;
} sq_producer;

/* One transactional id this broker coordinates (daemon/txn/txn.h txn_row). */
typedef struct sq_txn {
    const char *id;                 /* into sq_snap.txn_pool */
    const char *partitions;         /* "topic-0,topic-1" (into txn_pool) */
    const char *state;              /* static text */
    int64_t producer_id;
    int64_t start_ms;               /* -1: no transaction open */
    int64_t update_ms;
    int32_t timeout_ms;
    int16_t epoch;
} sq_txn;

typedef struct sq_follower {
    int32_t broker_id;
    int64_t log_end_offset;         /* its last fetch offset; -1: none yet */
} sq_follower;

/* Immutable once published; shared by reference between threads. */
typedef struct sq_snap {
    atomic_int refs;
    int64_t taken_us;               /* monotonic */
    size_t n;
    sq_live *rows;                  /* sorted by (topic, partition) */
    char *pool;
    sq_follower *fol;               /* NULL: none (owned; freed with the snapshot) */
    size_t nfol;
    sq_producer *prod;              /* NULL: none (owned) */
    size_t nprod;
    sq_txn *txn;                    /* NULL: none (owned), with its strings in txn_pool */
    size_t ntxn;
    char *txn_pool;
    /* the log directory's health (daemon/replica/replica_logdir.c); has_logdir false: unknown */
    bool has_logdir, logdir_failed;
    int64_t logdir_failed_ms;       /* -1: never failed */
    int64_t logdir_failures;
    char logdir_error[512];
} sq_snap;

sq_snap *sq_snap_new(size_t n, size_t pool_bytes);   /* refs = 1 */
void sq_snap_ref(sq_snap *s);
void sq_snap_unref(sq_snap *s);
void sq_snap_sort(sq_snap *s);
/* Binary search; NULL if absent. */
const sq_live *sq_snap_find(const sq_snap *s, const char *topic, int32_t partition);
/* Scans <data_dir>/<topic>-<partition>/ for every partition of every topic
 * in db (sluice-sql --data-dir).  Stored offsets come from the database. */
sq_snap *sq_snap_from_files(struct sqlite3 *db, const char *data_dir);

/* ---- writes ------------------------------------------------------------------ */
enum sq_op {
    SQ_TOPIC_CREATE,       /* s1 name, i1 partitions (-1 default), i2 rf (-1) */
    SQ_TOPIC_DELETE,       /* s1 name */
    SQ_TOPIC_PARTITIONS,   /* s1 name, i1 new count */
    SQ_CONFIG_SET,         /* s1 topic, s2 name, s3 value */
    SQ_CONFIG_UNSET,       /* s1 topic, s2 name */
    SQ_GROUP_DELETE,       /* s1 group */
    SQ_OFFSET_SET,         /* s1 group, s2 topic, i1 partition, i2 offset, s3 metadata */
    SQ_PARTITION_REASSIGN, /* s1 topic, i1 partition, s2 target "1,2,3" (NULL: cancel) */
    SQ_ACL_CREATE,         /* s1..s7 the acls columns, resource_type .. permission */
    SQ_ACL_DELETE,         /* s1..s7 the row's columns */
    SQ_SCRAM_SET,          /* s1 user, s2 mechanism, s3 password, i1 iterations (-1 default) */
    SQ_SCRAM_DELETE,       /* s1 user, s2 mechanism */
    SQ_TXN_ABORT,          /* s1 transactional id, i1 producer id, i2 epoch (as read) */
    SQ_SCHEMA_REGISTER,    /* s1 subject, s2 schema, s3 type (NULL AVRO), s4 references */
    SQ_SCHEMA_DELETE,      /* s1 subject, i1 version (0: the subject), i2 permanent (1) */
    SQ_SUBJECT_CONFIG,     /* s1 subject, s2 level or mode (NULL: clear), i1 1: mode */
    SQ_LINK_CREATE,        /* s1 name, s2 bootstrap servers, s3 config lines */
    SQ_LINK_UPDATE,        /* s1 name, s2 bootstrap servers, s3 config lines */
    SQ_LINK_KEPT,          /* the worker's own (sql_worker.c): s1 name, s3 config lines */
    SQ_LINK_DELETE,        /* s1 name */
    SQ_MIRROR_CREATE,      /* s1 topic, s2 link, s3 source topic (NULL: s1), s4 state */
    SQ_MIRROR_DELETE,      /* s1 topic */
    SQ_MIRROR_STATE,       /* s1 topic, s2 new state */
};

typedef struct sq_write {
    enum sq_op op;
    const char *s1, *s2, *s3;
    const char *s4, *s5, *s6, *s7;       /* SQ_ACL_*: the acls row's other columns */
    int64_t i1, i2;
    uint64_t link_base;                  /* SQ_LINK_UPDATE: the row its kept secrets came
                                          * from (link.c K16); 0: none kept */
} sq_write;

/* ---- environment ------------------------------------------------------------- */
typedef struct sq_env {
    const char *data_dir;           /* log.dirs (first) */
    int32_t broker_id;
    bool broker_alive;              /* false when reading a stopped broker */
    /* Broker-level topic defaults (source "broker"), by topic-level name. */
    const md_kv *broker_defaults;
    size_t nbroker_defaults;
    /* A snapshot reference (caller unrefs) or NULL. */
    sq_snap *(*live)(void *arg);
    /* Applies one change; returns KP_NONE or a Kafka error code with a
     * message in err.  NULL: the surface is read-only. */
    int (*write)(void *arg, const sq_write *w, char *err, size_t errlen);
    void *arg;
    int64_t max_rows;               /* admin.sql.max.rows */
    int64_t timeout_ms;             /* admin.sql.timeout.ms */
} sq_env;

typedef struct sq_conn sq_conn;

/* The topics a principal may READ: the rows of `messages` it is shown
 * (sql_messages.c).  Sorted, names owned. */
typedef struct sq_topic_set {
    char **names;
    size_t n;
} sq_topic_set;
void sq_topic_set_sort(sq_topic_set *s);          /* once filled */
bool sq_topic_set_has(const sq_topic_set *s, const char *topic);
void sq_topic_set_free(sq_topic_set *s);

/* Opens path read-only, installs the surface.  0 or -1 with err. */
int  sq_open(const char *path, const sq_env *env, sq_conn **out, char *err, size_t errlen);
void sq_close(sq_conn *c);
struct sqlite3 *sq_db(sq_conn *c);
/* Interrupts the running statement from another thread. */
void sq_interrupt(sq_conn *c);

/* ---- running a statement --------------------------------------------------- */
enum sq_format { SQ_FMT_TABLE, SQ_FMT_CSV, SQ_FMT_JSON, SQ_FMT_LINE };
int sq_format_parse(const char *name);   /* -1 if unknown */

/* Bounds on one statement's memory, whatever max_rows says: a value
 * (string or blob, SQLITE_LIMIT_LENGTH) and the formatted result. */
#define SQ_MAX_VALUE_BYTES  (16 << 20)
#define SQ_MAX_RESULT_BYTES (64 << 20)

typedef struct sq_result {
    kp_buf out;                     /* formatted rows */
    int64_t rows;
    int64_t changes;
    bool failed;
    char err[512];
} sq_result;

/* Runs the statements in sql (several allowed, separated by ';'), through
 * the authorizer, with the time and row limits, formatting every result
 * set into res->out.  Stops at the first error (res->failed, res->err). */
void sq_run(sq_conn *c, const char *sql, int format, bool headers, sq_result *res);
void sq_result_free(sq_result *res);

/* ---- internals shared by the sql_*.c files of the surface ------------------ */
struct sq_conn {
    struct sqlite3 *db;
    sq_env env;
    bool internal;                  /* our own statements: authorizer off */
    bool wrote;                     /* the statement made an allowed write */
    bool read_only;                 /* writes refused (a principal with DESCRIBE only) */
    const sq_topic_set *readable;   /* messages: topics it may READ; NULL: all */
    int64_t changes;                /* rows changed through the write hook */
    char deny[256];                 /* why the authorizer refused */
    int64_t deadline_us;
    sq_snap *snap;                  /* per statement, taken on first use */
    struct sqlite3_stmt *cluster_st;/* the mirror's controller and alive flags
                                       (sql_surface.c); NULL: standalone file */
    struct sq_schema_row *rows;     /* DELETE / UPDATE subjects: the statement's rows */
    size_t nrows, caprows;
    bool set_compat, set_mode;      /* UPDATE subjects SETs these (the authorizer) */
    unsigned version_reads;         /* DELETE subjects: version columns read (the authorizer) */
    bool names_versions;            /* its WHERE names one: never the whole subject */
};
/* DELETE / UPDATE on subjects, once the statement has matched every row
 * (sql_surface.c): a subject all of whose versions a DELETE matches, by a
 * WHERE that names no version's column (version, schema_id, schema, …), is
 * deleted as a whole (Confluent's DELETE /subjects/{s}), the other rows
 * version by version; an UPDATE sets each subject's level or mode once.
 * 0, or -1 with the statement's error in err (NULL: only forget them). */
int  sq_schema_writes(sq_conn *c, char *err, size_t errlen);
int  sq_vtab_register(sq_conn *c);       /* sql_vtab.c */
int  sq_messages_register(sq_conn *c);   /* sql_messages.c */
/* Bytes the messages table has read from segment files since start
 * (GET /metrics: sluice_sql_messages_bytes_read_total). */
extern atomic_llong sq_messages_bytes_read;
/* The statement's snapshot (taken on first use, kept until it ends). */
sq_snap *sq_conn_snap(sq_conn *c);
int64_t sq_mono_us(void);

#endif
