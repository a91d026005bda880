-- Sluice metadata schema, version 1: what a new database gets.
--
-- How versions work (metadata/migrate.c does this at md_open):
--   * PRAGMA user_version is the schema version of a database file.
--   * A new file (user_version 0) runs this whole script in one transaction;
--     the script ends by setting user_version to the version it describes.
--   * Then every sql/migrations/NNNN_*.sql whose NNNN > user_version runs,
--     in order, each in its own transaction that also sets user_version=NNNN.
--   * This file stays at version 1; later changes are migrations only, so a
--     new database and an old upgraded one take the same path to the same
--     schema.  (If a future release folds migrations into this file, it
--     must raise the user_version below to the last migration folded in.)
--   * sql/*.sql other than this file (views.sql) are re-run at every open
--     and must be idempotent (DROP VIEW IF EXISTS …; CREATE VIEW …).
--
-- Conventions: STRICT tables; times are milliseconds since the Unix epoch
-- (INTEGER, column names ending in _at or _ms); Kafka's vocabulary for
-- names; foreign keys with ON DELETE CASCADE where a row cannot outlive its
-- parent (md_open turns PRAGMA foreign_keys on for every connection).
-- Operators read these tables with SQL, so values are stored readable
-- (ACL enums as Kafka's names, replica lists as "1,2,3").

-- Brokers of the cluster (standalone: just this one).
CREATE TABLE brokers (
    id            INTEGER PRIMARY KEY CHECK (id >= 0),
    host          TEXT    NOT NULL,
    port          INTEGER NOT NULL CHECK (port BETWEEN 0 AND 65535),
    rack          TEXT,
    registered_at INTEGER NOT NULL
) STRICT;

-- Topics.  The name is the key everywhere (Kafka topics are never renamed);
-- topic_id is the 16-byte UUID clients see in Metadata v10+ / Fetch v13+.
CREATE TABLE topics (
    name               TEXT    PRIMARY KEY
                       CHECK (length(name) BETWEEN 1 AND 249),
    topic_id           BLOB    NOT NULL UNIQUE CHECK (length(topic_id) = 16),
    partitions         INTEGER NOT NULL CHECK (partitions >= 1),
    replication_factor INTEGER NOT NULL CHECK (replication_factor >= 1),
    internal           INTEGER NOT NULL DEFAULT 0 CHECK (internal IN (0, 1)),
    created_at         INTEGER NOT NULL
) STRICT;

-- One row per partition.  leader -1 = no leader; replicas and isr are
-- broker ids joined by commas ("1,2,3"), replicas in preference order.
-- The three offsets are the partition log's durable bookmarks: log start
-- (after retention / DeleteRecords), recovery point (everything before it
-- is flushed and needs no recovery scan), high watermark.
CREATE TABLE partitions (
    topic            TEXT    NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    partition        INTEGER NOT NULL CHECK (partition >= 0),
    leader           INTEGER NOT NULL DEFAULT -1,
    leader_epoch     INTEGER NOT NULL DEFAULT 0,
    replicas         TEXT    NOT NULL DEFAULT '',
    isr              TEXT    NOT NULL DEFAULT '',
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    recovery_point   INTEGER NOT NULL DEFAULT 0,
    high_watermark   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (topic, partition)
) STRICT, WITHOUT ROWID;

-- Topic config overrides (DYNAMIC_TOPIC_CONFIG), keyed by Kafka's
-- topic-level names; values validated by md_config_check before storing.
CREATE TABLE topic_configs (
    topic TEXT NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    name  TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (topic, name)
) STRICT, WITHOUT ROWID;

-- Consumer groups as the group coordinator last persisted them.
CREATE TABLE consumer_groups (
    group_id      TEXT    PRIMARY KEY,
    state         TEXT    NOT NULL DEFAULT 'Empty'
                  CHECK (state IN ('Empty', 'PreparingRebalance',
                                   'CompletingRebalance', 'Stable', 'Dead')),
    protocol_type TEXT,
    protocol      TEXT,
    generation    INTEGER NOT NULL DEFAULT 0,
    leader        TEXT,
    updated_at    INTEGER NOT NULL
) STRICT;

-- Members of a group; subscription is the member's metadata for the chosen
-- protocol, assignment what the leader gave it in SyncGroup (both opaque
-- bytes as on the wire).
CREATE TABLE group_members (
    group_id             TEXT    NOT NULL
                         REFERENCES consumer_groups(group_id) ON DELETE CASCADE,
    member_id            TEXT    NOT NULL,
    instance_id          TEXT,
    client_id            TEXT    NOT NULL DEFAULT '',
    client_host          TEXT    NOT NULL DEFAULT '',
    session_timeout_ms   INTEGER NOT NULL,
    rebalance_timeout_ms INTEGER NOT NULL,
    subscription         BLOB,
    assignment           BLOB,
    PRIMARY KEY (group_id, member_id)
) STRICT;
CREATE UNIQUE INDEX group_members_instance
    ON group_members (group_id, instance_id) WHERE instance_id IS NOT NULL;

-- Committed offsets.  Not tied to consumer_groups: a consumer using
-- assign() commits without ever joining.  Tied to the topic: deleting a
-- topic forgets its offsets, as Kafka does.  expire_time_ms -1 = never
-- (retention decided by offsets.retention.minutes at expiry time).
CREATE TABLE committed_offsets (
    group_id       TEXT    NOT NULL,
    topic          TEXT    NOT NULL REFERENCES topics(name) ON DELETE CASCADE,
    partition      INTEGER NOT NULL CHECK (partition >= 0),
    offset         INTEGER NOT NULL,
    leader_epoch   INTEGER NOT NULL DEFAULT -1,
    metadata       TEXT,
    commit_time_ms INTEGER NOT NULL,
    expire_time_ms INTEGER NOT NULL DEFAULT -1,
    PRIMARY KEY (group_id, topic, partition)
) STRICT, WITHOUT ROWID;
CREATE INDEX committed_offsets_topic ON committed_offsets (topic, partition);

-- The producer-id sequence for InitProducerId: a single row; an allocation
-- is "UPDATE … SET next_producer_id = next_producer_id + n RETURNING".
CREATE TABLE producer_ids (
    id               INTEGER PRIMARY KEY CHECK (id = 0),
    next_producer_id INTEGER NOT NULL CHECK (next_producer_id >= 0)
) STRICT;
INSERT INTO producer_ids (id, next_producer_id) VALUES (0, 0);

-- SASL/SCRAM credentials (RFC 5802 terms), one row per user and mechanism
-- ("SCRAM-SHA-256", "SCRAM-SHA-512").  Never the password itself.
CREATE TABLE users (
    name       TEXT    NOT NULL,
    mechanism  TEXT    NOT NULL,
    salt       BLOB    NOT NULL,
    iterations INTEGER NOT NULL CHECK (iterations > 0),
    stored_key BLOB    NOT NULL,
    server_key BLOB    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (name, mechanism)
) STRICT;

-- ACLs, with Kafka's enum names (AclResourceType, PatternType,
-- AclOperation, AclPermissionType) so operators read them as kafka-acls
-- prints them.  principal like "User:alice", host "*" for any.
CREATE TABLE acls (
    id            INTEGER PRIMARY KEY,
    resource_type TEXT NOT NULL
                  CHECK (resource_type IN ('TOPIC', 'GROUP', 'CLUSTER',
                         'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER')),
    resource_name TEXT NOT NULL,
    pattern_type  TEXT NOT NULL CHECK (pattern_type IN ('LITERAL', 'PREFIXED')),
    principal     TEXT NOT NULL,
    host          TEXT NOT NULL DEFAULT '*',
    operation     TEXT NOT NULL
                  CHECK (operation IN ('ALL', 'READ', 'WRITE', 'CREATE',
                         'DELETE', 'ALTER', 'DESCRIBE', 'CLUSTER_ACTION',
                         'DESCRIBE_CONFIGS', 'ALTER_CONFIGS',
                         'IDEMPOTENT_WRITE', 'CREATE_TOKENS',
                         'DESCRIBE_TOKENS')),
    permission    TEXT NOT NULL CHECK (permission IN ('ALLOW', 'DENY')),
    UNIQUE (resource_type, resource_name, pattern_type, principal, host,
            operation, permission)
) STRICT;

PRAGMA user_version = 1;
