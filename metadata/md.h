/*
 * metadata/ — the facts: one SQLite database per broker (WAL mode).
 *
 * It holds brokers, topics, partitions (log start, recovery point, high
 * watermark, leader, replicas, ISR, leader epoch), topic configs, consumer
 * groups, members, assignments, committed offsets, users and ACLs.  The
 * schema and its migrations live in sql/ and are linked in (sql/embed.sh);
 * md_open applies what PRAGMA user_version says is missing.
 *
 * Every change of a kind of fact goes through one md_* function here
 * (md_topic_create, md_topic_config_replace, …): in standalone mode it writes
 * SQLite; cluster mode will put ZooKeeper in front of the same calls.
 *
 * SQLite is never on the per-message path: callers write per request or
 * per timer.  A handle belongs to one thread.
 *
 * Also here, because they are facts about facts: the topic-config
 * definitions (Kafka's names, defaults, ranges, broker-level keys) and
 * their validation, and topic-name rules.
 *
 * Returns: KP_NONE (0) or a Kafka error code (protocol/kp_errors.h) that
 * a handler can send as is, with a message in err[] naming the problem;
 * MD_E_SQL (< -3000) when SQLite itself failed (message in err[] too).
 */
#ifndef SLUICE_MD_H
#define SLUICE_MD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/kp_errors.h"

enum { MD_E_SQL = -3001 };

#define MD_ERRLEN 256
#define MD_TOPIC_NAME_MAX 249

typedef struct md_db md_db;

/* A name/value pair; used for config overrides.  Strings owned by whoever
 * built the array (md_kv_free for arrays returned from here). */
typedef struct md_kv {
    char *name;
    char *value;
} md_kv;
void md_kv_free(md_kv *kv, size_t n);

/* Opens (creating) the database at path, WAL mode, busy timeout, applies
 * pending migrations.  0 or MD_E_SQL with err. */
int  md_open(const char *path, md_db **out, char *err, size_t errlen);
void md_close(md_db *db);
int  md_schema_version(md_db *db);
/* Several changes in one transaction (e.g. recovery points of every
 * partition on a timer, offset commits of one loop turn).
 *
 * Durability (db.c's design note): a change made outside md_begin is
 * durable (WAL fdatasync'd) when its md_* call returns.  A transaction
 * ended by md_commit is only written to the WAL (page cache): it survives
 * a crash of the process, and survives a power cut once an md_wal_sync —
 * on any handle of the same database, in any thread — that started after
 * md_commit returned has returned 0.  The broker's sync worker
 * (daemon/md_sync.c) does that off the event loop. */
int md_begin(md_db *db);
int md_commit(md_db *db);
int md_rollback(md_db *db);

/* ---- durability primitives (for a sync worker thread) ----------------------
 * A second connection to the database at path (which md_open created and
 * migrated), for one other thread: no migrations, no statement cache.
 * Only md_wal_sync, md_checkpoint and md_close are meant for it. */
int md_open_syncer(const char *path, md_db **out, char *err, size_t errlen);
/* fdatasync of the database's WAL file: every transaction committed to
 * the WAL (by any connection of the database) before the call is on disk
 * when it returns 0.  -errno on failure.  The descriptor is opened once:
 * SQLite restarts a WAL by overwriting it in place (same inode) and never
 * unlinks it while a connection is open. */
int md_wal_sync(md_db *db);
/* A PASSIVE checkpoint: copies the WAL frames no reader still needs into
 * the database file and syncs both (this is SQLite's fsync), without ever
 * waiting for or blocking a writer on another connection.  *wal_frames:
 * frames in the WAL, *copied: frames now in the database file (either
 * pointer may be NULL).  0 or MD_E_SQL. */
int md_checkpoint(md_db *db, int *wal_frames, int *copied, char *err, size_t errlen);
/* The raw handle, for the SQL admin surface only. */
struct sqlite3 *md_sqlite(md_db *db);

/* ---- brokers -------------------------------------------------------------- */
int md_broker_upsert(md_db *db, int32_t id, const char *host, int port,
                     const char *rack);

/* ---- the ZooKeeper mirror: brokers and controller (metadata/cluster.c) ------
 * Cluster mode copies /brokers/ids, /controller and /controller_epoch
 * here (sql/migrations/0004), so SQL on any broker shows the cluster. */
#define MD_ENDPOINTS_MAX 512

typedef struct md_broker_row {
    int32_t id;
    const char *host;
    int32_t port;
    const char *rack;                 /* NULL or "": none */
    const char *endpoints;            /* "PLAINTEXT://h:p,…"; NULL: none */
    int64_t registered_at_ms;         /* the registration's timestamp */
} md_broker_row;

/* The live brokers are exactly live[0..n) (the children of /brokers/ids):
 * in one transaction each is upserted with alive = 1 and every other
 * stored broker row gets alive = 0 (kept, so SQL shows dead brokers).
 * 0, KP_INVALID_REQUEST (a bad id, host or port; nothing written) or
 * MD_E_SQL. */
int md_brokers_mirror(md_db *db, const md_broker_row *live, size_t n,
                      char *err, size_t errlen);

/* A stored broker, as md_broker_list reads it. */
typedef struct md_broker {
    int32_t id;
    char host[256];
    int32_t port;
    char rack[64];                    /* "" when none */
    char endpoints[MD_ENDPOINTS_MAX]; /* "" when none */
    int64_t registered_at_ms;
    bool alive;
} md_broker;
/* Every broker row by id; *out malloc'd (free()), NULL when n == 0. */
int md_broker_list(md_db *db, md_broker **out, size_t *n);

/* The controller as last mirrored: broker_id -1 while nobody holds
 * /controller, epoch from /controller_epoch.  Its presence marks the
 * database as a cluster member's (the SQL surface keys on it). */
int md_controller_set(md_db *db, int32_t broker_id, int32_t epoch);
/* 0 with *broker_id and *epoch, or 0 with both -1 when there is no row
 * (standalone); MD_E_SQL. */
int md_controller_get(md_db *db, int32_t *broker_id, int32_t *epoch);

/* ---- topics ---------------------------------------------------------------- */
typedef struct md_topic {
    char name[MD_TOPIC_NAME_MAX + 1];
    uint8_t id[16];               /* topic UUID, random at creation */
    int32_t partitions;
    int16_t replication_factor;
    bool internal;
    int64_t created_at_ms;
} md_topic;

/* Kafka's rules: 1..249 chars of [a-zA-Z0-9._-], not "." or "..".
 * KP_NONE or KP_INVALID_TOPIC_EXCEPTION with err saying which rule. */
int md_topic_name_check(const char *name, size_t len, char *err, size_t errlen);

/* Creates the topic, its partitions and its config overrides in one
 * transaction.  replicas[p * replication_factor + i] is the i-th replica of
 * partition p in preference order (the broker chose them, or the request's
 * manual assignment did): the first leads, epoch 0, every replica in the
 * ISR.  replicas NULL: replication factor 1, every partition on self_id.
 * Partitions with a replica on self_id get this broker's log bookmarks (all
 * 0).  Errors: KP_INVALID_TOPIC_EXCEPTION, KP_TOPIC_ALREADY_EXISTS,
 * KP_INVALID_PARTITIONS (< 1), KP_INVALID_REPLICATION_FACTOR (< 1, or
 * over MD_REPLICAS_MAX), KP_INVALID_REPLICA_ASSIGNMENT (a broker twice in
 * one partition), KP_INVALID_CONFIG (err names the key and what is
 * allowed).  validate_only: checks everything, writes nothing. */
int md_topic_create(md_db *db, const char *name, int32_t partitions,
                    int16_t replication_factor, const md_kv *configs,
                    size_t nconfigs, int32_t self_id, const int32_t *replicas,
                    bool validate_only, char *err, size_t errlen);
/* Removes topic, partitions, configs and committed offsets for it.
 * KP_UNKNOWN_TOPIC_OR_PARTITION if absent. */
int md_topic_delete(md_db *db, const char *name, char *err, size_t errlen);
/* KP_UNKNOWN_TOPIC_OR_PARTITION if absent. */
int md_topic_get(md_db *db, const char *name, md_topic *out);
/* All topics sorted by name; *out malloc'd (free()), may be NULL if n==0. */
int md_topic_list(md_db *db, md_topic **out, size_t *n);
/* Grows the partition count to new_count (KP_INVALID_PARTITIONS unless
 * new_count > current).  replicas: the new partitions' assignment, as for
 * md_topic_create (replication factor = the topic's); NULL: each on
 * self_id alone. */
int md_topic_add_partitions(md_db *db, const char *name, int32_t new_count,
                            int32_t self_id, const int32_t *replicas,
                            bool validate_only, char *err, size_t errlen);

/* ---- partitions ------------------------------------------------------------
 * Two kinds of facts per partition, stored apart (sql/migrations/0003):
 *   - its state, which the whole cluster agrees on: leader, leader epoch,
 *     replicas in preference order, ISR (tables partitions and
 *     partition_replicas);
 *   - this broker's bookmarks of its own copy of the log: log start,
 *     recovery point, high watermark (table local_logs), present only
 *     where this broker hosts a replica. */
#define MD_REPLICAS_MAX 16

typedef struct md_partition_state {
    int32_t leader;                   /* -1: none */
    int32_t leader_epoch;
    int32_t nreplicas;
    int32_t replicas[MD_REPLICAS_MAX];/* preference order */
    int32_t nisr;
    int32_t isr[MD_REPLICAS_MAX];     /* in replica order */
    int32_t controller_epoch;         /* of the controller that wrote the
                                         state (0 standalone) */
    int32_t zk_version;               /* the state znode's version; -1
                                         unknown or standalone */
    /* A reassignment in progress (Kafka's adding_replicas /
     * removing_replicas of the topic znode), as bits over the positions in
     * replicas[]: bit i set = replicas[i] is being added / removed.  0 and
     * 0 when none (always, standalone). */
    uint32_t adding, removing;
} md_partition_state;

typedef struct md_partition {
    int32_t partition;
    md_partition_state st;
    bool has_bookmarks;               /* a local_logs row exists */
    int64_t log_start_offset;         /* bookmarks; 0 without a row */
    int64_t recovery_point;
    int64_t high_watermark;
} md_partition;

/* Partitions of a topic ordered by index; *out malloc'd (free()). */
int md_partition_list(md_db *db, const char *topic, md_partition **out, size_t *n);
/* Replaces a partition's state (leader, epoch, replicas, ISR, controller
 * epoch, znode version) at once — also the mirror's write when one state
 * znode changed.
 * KP_UNKNOWN_TOPIC_OR_PARTITION, KP_INVALID_REPLICA_ASSIGNMENT (no
 * replica, a broker twice, an ISR member that is not a replica) or
 * MD_E_SQL. */
int md_partition_state_set(md_db *db, const char *topic, int32_t partition,
                           const md_partition_state *st, char *err, size_t errlen);
/* One topic exactly as ZooKeeper has it (the mirror's write; the caller
 * combined /brokers/topics/<t>, each partition's state znode and
 * /config/topics/<t>).  parts[p] is partition p's whole state (replicas in
 * order, leader, epochs, ISR, zk_version); configs are the overrides. */
typedef struct md_mirror_topic {
    const char *name;
    uint8_t id[16];
    int32_t npartitions;
    const md_partition_state *parts;  /* [npartitions] */
    const md_kv *configs;
    size_t nconfigs;
    int64_t created_at_ms;            /* the topic znode's ctime; 0: now.
                                         Kept from the first put */
} md_mirror_topic;

/* Writes t in one transaction: the topic row (replication factor of
 * partition 0, internal by name), every partition's state and replicas,
 * partitions past npartitions deleted, the overrides replaced whole.  A
 * stored topic of the same name but another id is deleted first (deleted
 * and recreated in ZooKeeper: its partitions, bookmarks, configs and
 * committed offsets go, as md_topic_delete does).  local_logs rows of
 * partitions that remain are kept.  ZooKeeper is the truth, so:
 *   - overrides that fail md_config_check are skipped, not stored, and
 *     counted in *skipped (may be NULL) with the first one's reason in err;
 *     they do not fail the write;
 *   - ISR members that are not replicas are dropped (the tables cannot
 *     hold them);
 *   - the '.'/'_' name collision rule is not applied.
 * 0, KP_INVALID_TOPIC_EXCEPTION (name), KP_INVALID_PARTITIONS (none),
 * KP_INVALID_REPLICA_ASSIGNMENT (a partition with no replica, too many, a
 * broker twice or an id < 0), or MD_E_SQL; nothing written on error.
 * Deleting a mirrored topic: md_topic_delete. */
int md_topic_mirror_put(md_db *db, const md_mirror_topic *t, size_t *skipped,
                        char *err, size_t errlen);

/* This broker's bookmarks of a log it hosts (insert or update). */
int md_log_bookmarks_save(md_db *db, const char *topic, int32_t partition,
                          int64_t log_start_offset, int64_t recovery_point,
                          int64_t high_watermark);

/* ---- the cluster ------------------------------------------------------------- */
/* UUIDs as Kafka writes them (Uuid.toString): URL-safe base64 of the 16
 * bytes without padding, 22 characters. */
#define MD_UUID_TEXT_LEN 22
void md_uuid_to_text(const uint8_t id[16], char out[MD_UUID_TEXT_LEN + 1]);
/* 0, or -1 unless text is exactly 22 base64url characters (the last one's
 * 4 unused bits zero). */
int  md_uuid_from_text(const char *text, size_t len, uint8_t out[16]);
/* A random (v4) UUID as Kafka's Uuid.randomUuid makes it: never zero,
 * never one whose text starts with '-'. */
void md_uuid_random(uint8_t out[16]);

#define MD_CLUSTER_ID_MAX 64
/* The cluster id, made on the first call (Kafka's form: a random UUID in
 * URL-safe base64 without padding, 22 characters) and stored, so it is
 * the same across restarts.  0 or MD_E_SQL. */
int md_cluster_id(md_db *db, char out[MD_CLUSTER_ID_MAX + 1], char *err, size_t errlen);
/* Cluster mode: the id ZooKeeper holds (/cluster/id) replaces this
 * broker's own.  0, KP_INVALID_REQUEST or MD_E_SQL. */
int md_cluster_id_set(md_db *db, const char *id, char *err, size_t errlen);

/* ---- topic configs ---------------------------------------------------------- */
enum md_config_type { MD_CT_LONG, MD_CT_INT, MD_CT_DOUBLE, MD_CT_BOOL,
                      MD_CT_STRING, MD_CT_LIST };

/* DescribeConfigs ConfigSource values. */
enum md_config_source {
    MD_SRC_TOPIC = 1,             /* DYNAMIC_TOPIC_CONFIG */
    MD_SRC_BROKER = 4,            /* STATIC_BROKER_CONFIG (properties file) */
    MD_SRC_DEFAULT = 5,           /* DEFAULT_CONFIG */
};

typedef struct md_config_def {
    const char *name;             /* topic-level: "retention.ms" */
    const char *broker_key;       /* broker-level: "log.retention.ms" */
    enum md_config_type type;
    const char *default_value;    /* Kafka's default, as text */
    int64_t min, max;             /* numeric range (inclusive) */
    const char *const *allowed;   /* NULL-terminated, for enums/lists */
    bool sensitive;
    const char *doc;
} md_config_def;

const md_config_def *md_config_defs(size_t *n);
const md_config_def *md_config_def_find(const char *name);
const md_config_def *md_config_def_by_broker_key(const char *broker_key);
/* KP_NONE or KP_INVALID_CONFIG with err like
 * "Invalid value abc for configuration retention.ms: must be a long >= -1"
 * or "Unknown topic config name: foo". */
int md_config_check(const char *name, const char *value, char *err, size_t errlen);

/* ---- ACLs (metadata/acls.c) ------------------------------------------------ */
/* One row of acls, Kafka's enum names as text ("TOPIC", "LITERAL",
 * "User:alice", "*", "READ", "ALLOW"); strings malloc'd in lists. */
typedef struct md_acl {
    char *resource_type, *resource_name, *pattern_type, *principal, *host,
         *operation, *permission;
} md_acl;
int md_acl_list(md_db *db, md_acl **out, size_t *n);
void md_acl_free(md_acl *a, size_t n);
/* Removes del (rows equal in every column), then adds add (one already
 * stored is kept), in one transaction.  0 or MD_E_SQL (a CHECK failed). */
int md_acl_change(md_db *db, const md_acl *del, size_t ndel, const md_acl *add, size_t nadd,
                  char *err, size_t errlen);
/* The whole table becomes acls (cluster mode: ZooKeeper's set, mirrored),
 * in one transaction.  0 or MD_E_SQL. */
int md_acl_replace(md_db *db, const md_acl *acls, size_t n, char *err, size_t errlen);

/* ---- dynamic broker configs (metadata/broker_configs.c) --------------------- */
/* The set stored for one broker resource (its id as text; "" the
 * cluster-wide default), ordered by name; *out malloc'd (md_kv_free).
 * 0 or MD_E_SQL. */
int md_broker_configs(md_db *db, const char *broker, md_kv **out, size_t *n);
/* Replaces that resource's whole set (broker_configs.c B1), as given.  0 or MD_E_SQL. */
int md_broker_configs_replace(md_db *db, const char *broker, const md_kv *kv, size_t n,
                              char *err, size_t errlen);

/* Confluent's subject name strategies (confluent.*.subject.name.strategy). */
enum md_subject_strategy { MD_SUBJECT_TOPIC = 0, MD_SUBJECT_RECORD = 1, MD_SUBJECT_TOPIC_RECORD = 2 };
/* A topic's schema validation of keys or values (issue 31). */
typedef struct md_schema_check {
    bool on;                          /* confluent.*.schema.validation */
    bool decode;                      /* sluice.*.schema.validation.level=decode */
    enum md_subject_strategy strategy;
} md_schema_check;

/* The effective config of a topic, typed, for the data path. */
typedef struct md_topic_config {
    int64_t retention_ms;             /* -1: forever */
    int64_t retention_bytes;          /* -1: unlimited */
    int64_t segment_bytes;
    int64_t segment_ms;
    int64_t segment_jitter_ms;
    int32_t segment_index_bytes;
    int32_t index_interval_bytes;
    int32_t max_message_bytes;
    int32_t min_insync_replicas;
    int64_t flush_messages;
    int64_t flush_ms;
    int64_t delete_retention_ms;
    int64_t file_delete_delay_ms;
    int64_t min_compaction_lag_ms;
    int64_t max_compaction_lag_ms;
    int64_t message_timestamp_difference_max_ms;
    /* KIP-937: each is its own value when set, else difference.max.ms */
    int64_t message_timestamp_before_max_ms;
    int64_t message_timestamp_after_max_ms;
    double  min_cleanable_dirty_ratio;
    bool    cleanup_delete;
    bool    cleanup_compact;
    bool    log_append_time;          /* message.timestamp.type=LogAppendTime */
    bool    preallocate;
    bool    unclean_leader_election_enable;
    int     compression_type;         /* -1 producer, else enum kp_codec
                                         (0 = uncompressed) */
    md_schema_check key_schema, value_schema;
} md_topic_config;

/* Resolves each config: topic override, else broker override (both keyed
 * by the topic-level name), else the default.  Values are assumed valid
 * (checked when stored).  0, or KP_INVALID_CONFIG naming a bad one. */
int md_topic_config_resolve(const md_kv *broker, size_t nbroker,
                            const md_kv *topic, size_t ntopic,
                            md_topic_config *out, char *err, size_t errlen);
/* The effective text value and its source for one config name; NULL if
 * the name is unknown.  Points into the arrays or the definition. */
const char *md_config_effective(const md_kv *broker, size_t nbroker,
                                const md_kv *topic, size_t ntopic,
                                const char *name, enum md_config_source *src);

/* A topic's overrides (sorted by name); free with md_kv_free. */
int md_topic_configs(md_db *db, const char *topic, md_kv **out, size_t *n);
/* Replace all overrides at once, validated first: nothing changes if one
 * is bad.  The only write of overrides (AlterConfigs; IncrementalAlterConfigs
 * and SQL compute the new set first).  validate_only: check only.
 * KP_UNKNOWN_TOPIC_OR_PARTITION, KP_INVALID_CONFIG. */
int md_topic_config_replace(md_db *db, const char *topic, const md_kv *kv,
                            size_t n, bool validate_only, char *err, size_t errlen);

/* ---- groups and offsets (metadata/groups.c) --------------------------------
 * The group coordinator (daemon/group*.c) keeps live group state in memory
 * and writes it here at every state change, never per heartbeat, through
 * jobs on the metadata sync worker (daemon/group/group_persist.c) — commits and
 * group deletes too, whether a Kafka client or the SQL surface asked.
 * Strings are (pointer, length) where they come straight from a request
 * frame. */
#define MD_OFFSET_METADATA_MAX 4096   /* offset.metadata.max.bytes default */

typedef struct md_group_member {
    const char *member_id;
    const char *instance_id;          /* NULL: dynamic member */
    const char *client_id;
    const char *client_host;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    const void *subscription;         /* metadata for the group's protocol */
    int32_t subscription_len;         /* -1: none */
    const void *assignment;
    int32_t assignment_len;           /* -1: none */
} md_group_member;

typedef struct md_group {
    const char *group_id;
    const char *state;                /* "Empty", "PreparingRebalance",
                                         "CompletingRebalance", "Stable", "Dead" */
    const char *protocol_type;        /* NULL: offsets only (assign() users) */
    const char *protocol;             /* NULL: no generation chose one */
    int32_t generation;
    const char *leader;               /* NULL: no members */
    int64_t state_changed_at;         /* ms, when it entered state */
    const md_group_member *members;
    size_t nmembers;
} md_group;

/* Writes the group row and replaces its member rows, all or nothing (a
 * savepoint inside a caller's md_begin, else its own transaction).
 * 0 or MD_E_SQL. */
int md_group_save(md_db *db, const md_group *g, char *err, size_t errlen);
/* Removes the group, its members, its committed offsets and those pending
 * in a transaction.
 * KP_GROUP_ID_NOT_FOUND when there was neither a row nor an offset. */
int md_group_delete(md_db *db, const char *group_id, char *err, size_t errlen);
/* Removes every group (row, members, committed and pending offsets) whose id match
 * accepts, all or nothing; *deleted: how many groups went.  0 or MD_E_SQL. */
typedef bool (*md_group_match_fn)(const char *group_id, void *arg);
int md_groups_delete_matching(md_db *db, md_group_match_fn match, void *arg,
                              int64_t *deleted, char *err, size_t errlen);
/* Calls fn for every stored group, ordered by id, members included; the
 * pointers are valid during the call only.  A non-zero return from fn
 * stops the walk and is returned. */
typedef int (*md_group_fn)(const md_group *g, void *arg);
int md_group_foreach(md_db *db, md_group_fn fn, void *arg);
/* Number of committed offsets stored for the group (>= 0) or MD_E_SQL. */
int64_t md_group_offset_count(md_db *db, const char *group_id);

/* One partition's commit.  result is set by md_offset_commit. */
typedef struct md_offset {
    const char *group_id;
    int32_t group_len;
    const char *topic;
    int32_t topic_len;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;             /* -1: unknown */
    const char *metadata;             /* NULL is stored as "" (Kafka) */
    int32_t metadata_len;
    int64_t commit_time_ms;
    int64_t expire_time_ms;           /* -1: broker retention rules */
    bool tombstone;                   /* delete the stored offset instead
                                         (OffsetDelete); offset etc. unused */
    bool txn;                         /* TxnOffsetCommit: stored pending for
                                         producer_id (metadata/txn_offsets.c),
                                         not committed; expire_time_ms unused */
    int16_t producer_epoch;
    int64_t producer_id;
    int result;                       /* out: KP_NONE, or
                                         KP_UNKNOWN_TOPIC_OR_PARTITION when
                                         the topic is gone */
} md_offset;

/* Upserts every entry in one transaction (a savepoint inside md_begin):
 * one fsync for the lot; a tombstone entry deletes its row (none stored
 * is fine: KP_NONE); a txn entry goes to the pending rows instead.  An entry whose topic does not exist gets
 * result = KP_UNKNOWN_TOPIC_OR_PARTITION and the others still commit.
 * 0, or MD_E_SQL when nothing was committed. */
int md_offset_commit(md_db *db, md_offset *offs, size_t n, char *err, size_t errlen);

/* A stored commit, for OffsetFetch. */
typedef struct md_committed {
    char *topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    char *metadata;                   /* never NULL */
    int64_t commit_time_ms;
} md_committed;
/* Every offset the group committed, ordered by topic then partition;
 * *out malloc'd (md_committed_free), NULL when n == 0. */
int md_offset_list(md_db *db, const char *group_id, size_t group_len,
                   md_committed **out, size_t *n);
void md_committed_free(md_committed *c, size_t n);

/* ---- offsets pending in a transaction (metadata/txn_offsets.c) ------------
 * TxnOffsetCommit's rows (md_offset.txn, written by md_offset_commit) wait
 * in pending_txn_offsets until the transaction ends.  A commit moves the
 * producer's rows of the groups match accepts (NULL: every group) into
 * committed_offsets, an abort drops them; both delete them, so a second
 * completion (a retried marker) finds nothing.  *moved: rows completed.
 * All or nothing (a savepoint inside md_begin).  0 or MD_E_SQL. */
int md_txn_offsets_complete(md_db *db, int64_t producer_id, bool commit,
                            md_group_match_fn match, void *arg, int64_t *moved,
                            char *err, size_t errlen);
/* Every pending row of producer_id, ordered by group, topic, partition;
 * strings malloc'd, txn set; free with md_txn_offsets_free.  0 or MD_E_SQL. */
int md_txn_offsets_of(md_db *db, int64_t producer_id, md_offset **out, size_t *n);
void md_txn_offsets_free(md_offset *o, size_t n);
/* The group's partitions with a pending offset (any producer), ordered by
 * topic then partition, one entry each (offset: the newest pending one);
 * as md_offset_list.  0 or MD_E_SQL. */
int md_txn_offsets_pending(md_db *db, const char *group_id, size_t group_len,
                           md_committed **out, size_t *n);

/* offsets.retention.minutes, Kafka's rules (KIP-211), for groups that are
 * Empty (or have no row):
 *   - an offset committed with an explicit retention (OffsetCommit v2-4
 *     RetentionTimeMs) expires at its expire_time_ms;
 *   - a consumer group (protocol_type set) loses all its offsets once it
 *     has been Empty for retention_ms (state_changed_at);
 *   - an offsets-only group loses each offset retention_ms after its
 *     commit.
 * Groups that are not Empty keep their offsets.  *expired: rows deleted;
 * fn (NULL: none) is called for each (strings valid during the call). */
typedef void (*md_expired_fn)(const char *group_id, const char *topic, int32_t partition,
                              void *arg);
int md_offsets_expire(md_db *db, int64_t now_ms, int64_t retention_ms,
                      md_expired_fn fn, void *arg, int64_t *expired, char *err, size_t errlen);

/* ---- producer ids (metadata/producers.c) ----------------------------------
 * Reserves count consecutive producer ids (InitProducerId) durably;
 * *first gets the first.  0 or MD_E_SQL. */
int md_producer_id_allocate(md_db *db, int64_t count, int64_t *first,
                            char *err, size_t errlen);
/* The next ids reserved start at floor or above.  0 or MD_E_SQL. */
int md_producer_id_floor(md_db *db, int64_t floor, char *err, size_t errlen);

/* ---- SASL/SCRAM credentials (users.c; the users table) ---------------------- */
/* One user's credential for one mechanism: never a password. */
typedef struct md_scram_cred {
    char mechanism[16];              /* "SCRAM-SHA-256", "SCRAM-SHA-512" */
    uint8_t salt[64];
    size_t salt_len;
    int32_t iterations;
    uint8_t stored_key[64], server_key[64];
    size_t key_len;                  /* 32 or 64 */
    int64_t created_at;              /* ms */
} md_scram_cred;
/* 0 and *out, 1 when the user has no credential for mechanism, MD_E_SQL. */
int md_user_get(md_db *db, const char *name, const char *mechanism, md_scram_cred *out);
/* Creates or replaces.  0 or MD_E_SQL with err. */
int md_user_upsert(md_db *db, const char *name, const md_scram_cred *c,
                   char *err, size_t errlen);
/* *deleted says whether there was one.  0 or MD_E_SQL with err. */
int md_user_delete(md_db *db, const char *name, const char *mechanism, bool *deleted,
                   char *err, size_t errlen);
/* fn per credential (name NULL: every user), in (name, mechanism) order,
 * without the keys.  0 or MD_E_SQL. */
typedef void (*md_user_fn)(void *arg, const char *name, const char *mechanism,
                           int32_t iterations);
int md_user_list(md_db *db, const char *name, md_user_fn fn, void *arg);

/* ---- the schema registry's mirror (schemas.c; sql/migrations/0009) -------------
 * What the _schemas topic holds, for SQL to read; the registry writes the
 * rows each applied record changes (on the metadata sync worker's
 * connection).  0 or MD_E_SQL with err. */
/* Every row gone (before a rebuild). */
int md_sr_clear(md_db *db, char *err, size_t errlen);
/* Version `version` of subject names schema_id (a new one or a rewrite). */
int md_sr_version_put(md_db *db, const char *subject, int32_t version, int32_t schema_id,
                      bool deleted, char *err, size_t errlen);
/* Gone for good (a permanent delete). */
int md_sr_version_delete(md_db *db, const char *subject, int32_t version, char *err,
                         size_t errlen);
/* Versions up to upto soft-deleted. */
int md_sr_soft_delete(md_db *db, const char *subject, int32_t upto, char *err, size_t errlen);
int md_sr_schema_put(md_db *db, int32_t id, const char *type, const char *schema,
                     const char *refs, char *err, size_t errlen);
/* No version names it any more. */
int md_sr_schema_delete(md_db *db, int32_t id, char *err, size_t errlen);
/* Subject's own level and mode (NULL or "": not set; subject "" is the
 * registry's own); neither set: its row goes. */
int md_sr_config_put(md_db *db, const char *subject, const char *compatibility,
                     const char *mode, char *err, size_t errlen);

/* ---- cluster links and mirror topics (links.c; sql/migrations/0011) -------------
 * Standalone's store of record for daemon/link/link.c.  0 or MD_E_SQL. */
typedef struct md_link_row {
    char name[MD_TOPIC_NAME_MAX + 1];
    char bootstrap[512];
    char config[8192];                   /* key=value lines, secrets masked: room for
                                          * 16 filters of each kind in Confluent's JSON */
    char secrets[2048];                  /* the secret key=value lines */
    char state[16];
    char last_error[MD_ERRLEN];
    char source_cluster[128];            /* the source's cluster id (link.c K18); "": none */
} md_link_row;
typedef struct md_mirror_row {
    char topic[MD_TOPIC_NAME_MAX + 1];
    char link[MD_TOPIC_NAME_MAX + 1];
    char source_topic[MD_TOPIC_NAME_MAX + 1];
    char state[16];
} md_mirror_row;
int md_link_put(md_db *db, const md_link_row *l, int64_t now_ms, char *err, size_t errlen);
int md_link_delete(md_db *db, const char *name, char *err, size_t errlen);
/* A link's bootstrap servers, config and (sealed) secrets replaced in its row
 * (UPDATE cluster_links), its last_error cleared; state and created_at kept. */
int md_link_settings_set(md_db *db, const md_link_row *l, char *err, size_t errlen);
/* A link's secrets replaced (sealed again, daemon/security/sec_pwenc.c P6)
 * with SQLite's secure_delete on, so the old bytes are zeroed in the page. */
int md_link_secrets_set(md_db *db, const char *name, const char *secrets, char *err,
                        size_t errlen);
/* A TRUNCATE checkpoint: the WAL's old frames (an old value's bytes among
 * them) copied and the -wal file emptied.  Fsyncs: at start only. */
int md_scrub_wal(md_db *db, char *err, size_t errlen);
/* The source's cluster id recorded (sql/migrations/0013; link.c K18). */
int md_link_source_cluster_set(md_db *db, const char *name, const char *cluster_id, char *err,
                               size_t errlen);
/* last_error NULL: none. */
int md_link_status(md_db *db, const char *name, const char *state, const char *last_error,
                   char *err, size_t errlen);
/* The sync state (sql/migrations/0012): synced_at_ms < 0 keeps the last;
 * sync_error NULL: none; topics_skipped "" or NULL: none. */
int md_link_sync_status(md_db *db, const char *name, int64_t synced_at_ms, int32_t groups,
                        const char *sync_error, const char *topics_skipped, char *err,
                        size_t errlen);
/* The ACLs link copied from its source (tab-separated keys, link_sync.c):
 * marked when added (synced) or removed.  The list: *out malloc'd strings
 * in a malloc'd array. */
int md_link_acl_mark(md_db *db, const char *link, const char *acl, bool synced, char *err,
                     size_t errlen);
int md_link_acl_list(md_db *db, const char *link, char ***out, size_t *n, char *err,
                     size_t errlen);
/* *out malloc'd (caller frees), by name. */
int md_link_list(md_db *db, md_link_row **out, size_t *n, char *err, size_t errlen);
int md_mirror_put(md_db *db, const md_mirror_row *m, int64_t now_ms, char *err, size_t errlen);
/* The row and its partitions' source ends. */
int md_mirror_delete(md_db *db, const char *topic, char *err, size_t errlen);
int md_mirror_status(md_db *db, const char *topic, const char *state, const char *last_error,
                     char *err, size_t errlen);
int md_mirror_list(md_db *db, md_mirror_row **out, size_t *n, char *err, size_t errlen);
/* ends[i]: partition i's source log end as last fetched (< 0: unknown, kept);
 * caught_up[i]: when the mirror last had all of it (ms; < 0: never). */
int md_mirror_source_ends(md_db *db, const char *topic, const int64_t *ends,
                          const int64_t *caught_up, int32_t n, int64_t now_ms, char *err,
                          size_t errlen);

#endif
