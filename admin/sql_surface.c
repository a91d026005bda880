/*
 * admin/sql_surface.c — the operator tables as TEMP views on a read-only
 * connection, the INSTEAD OF triggers that turn INSERT/UPDATE/DELETE on
 * eight of them (topics, topic_configs, partitions' replicas, consumer_groups,
 * committed_offsets, acls, scram_credentials, subjects) into admin operations,
 * and the authorizer.
 *
 * The authorizer allows exactly:
 *   - SELECT (reads of anything except the credentials in main.users),
 *     WITH / recursive CTEs, every built-in function but load_extension;
 *   - PRAGMA that only reads (table_info, index_list, …) without a value;
 *   - INSERT / UPDATE / DELETE of the writable views (topics, topic_configs,
 *     partitions' replicas, consumer_groups, committed_offsets, acls,
 *     scram_credentials, subjects), top level only (the triggers then call our
 *     internal functions, which nobody else may call).
 * Everything else — ATTACH, schema changes, PRAGMA writes, transactions,
 * writes to other tables, VACUUM — is refused, and the refusal names why
 * (the authorizer keeps the reason in c->deny; sq_run reports it instead
 * of SQLite's generic "not authorized").
 *
 * Invariants:
 *   1. The connection is SQLITE_OPEN_READONLY: even a hole in the
 *      authorizer cannot write the metadata file.
 *   2. c->internal is true only while sq_open builds the surface and while
 *      a virtual table runs its own lookup query.
 */
#include "admin/sql_surface.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

int64_t sq_mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- the operator surface ------------------------------------------------------ */
static const char surface_sql[] =
    /* Endpoints as registered in cluster mode; standalone stores none and
     * shows its one listener. */
    "CREATE TEMP VIEW brokers AS\n"
    "SELECT id, host, port, rack,\n"
    "       coalesce(endpoints, 'PLAINTEXT://' || host || ':' || port) AS endpoints,\n"
    "       sluice_broker_alive(id) AS alive,\n"
    "       id IS sluice_controller_id() AS is_controller, registered_at\n"
    "  FROM main.brokers;\n"

    "CREATE TEMP VIEW topics AS\n"
    "SELECT name, partitions, replication_factor, internal, created_at\n"
    "  FROM main.topics;\n"

    /* Replicas and ISR as "1,2,3" in preference order, from one row per
     * replica; the numbers live from the log where this broker hosts it,
     * else its stored bookmarks (NULL where it has none).  A leader that
     * is not alive is none, as Metadata says (the stored state keeps it:
     * no write marks a partition offline, cl_controller.c C4). */
    "CREATE TEMP VIEW partitions AS\n"
    "SELECT p.topic, p.partition,\n"
    "       CASE WHEN sluice_broker_alive(p.leader) THEN p.leader ELSE -1 END AS leader,\n"
    "       (SELECT group_concat(broker_id, ',') FROM (SELECT broker_id FROM\n"
    "          main.partition_replicas r WHERE r.topic = p.topic\n"
    "          AND r.partition = p.partition ORDER BY position)) AS replicas,\n"
    "       (SELECT group_concat(broker_id, ',') FROM (SELECT broker_id FROM\n"
    "          main.partition_replicas r WHERE r.topic = p.topic\n"
    "          AND r.partition = p.partition AND r.in_isr ORDER BY position)) AS isr,\n"
    "       coalesce(l.log_start_offset, b.log_start_offset) AS log_start_offset,\n"
    "       coalesce(l.log_end_offset, b.high_watermark) AS log_end_offset,\n"
    "       coalesce(l.high_watermark, b.high_watermark) AS high_watermark,\n"
    "       l.last_stable_offset,\n"
    "       l.size_bytes, l.segments, p.leader_epoch, l.last_timestamp,\n"
    "       b.recovery_point, p.controller_epoch,\n"
    /* Kafka's under-replicated (ISR smaller than the replicas) and
     * offline (no live leader, as the leader column says) partitions. */
    "       (SELECT count(*) FROM main.partition_replicas r WHERE r.topic = p.topic\n"
    "          AND r.partition = p.partition AND r.in_isr) <\n"
    "       (SELECT count(*) FROM main.partition_replicas r WHERE r.topic = p.topic\n"
    "          AND r.partition = p.partition) AS under_replicated,\n"
    "       (p.leader < 0 OR NOT coalesce(sluice_broker_alive(p.leader), 0)) AS offline,\n"
    /* A reassignment in progress (daemon/cluster/cluster_reassign.c): NULL when none. */
    "       (SELECT group_concat(broker_id, ',') FROM (SELECT broker_id FROM\n"
    "          main.partition_replicas r WHERE r.topic = p.topic AND r.partition = p.partition\n"
    "          AND r.reassigning = 'adding' ORDER BY position)) AS adding_replicas,\n"
    "       (SELECT group_concat(broker_id, ',') FROM (SELECT broker_id FROM\n"
    "          main.partition_replicas r WHERE r.topic = p.topic AND r.partition = p.partition\n"
    "          AND r.reassigning = 'removing' ORDER BY position)) AS removing_replicas\n"
    "  FROM main.partitions p LEFT JOIN sluice_partition_state l\n"
    "    ON l.topic = p.topic AND l.partition = p.partition\n"
    "  LEFT JOIN main.local_logs b ON b.topic = p.topic AND b.partition = p.partition;\n"

    /* Each local partition's producers (replica_producers.h): what
     * DescribeProducers answers, open transactions included. */
    "CREATE TEMP VIEW producers AS\n"
    "SELECT topic, partition, producer_id, producer_epoch, last_sequence, last_timestamp,\n"
    "       coordinator_epoch, current_txn_start_offset FROM sluice_producers;\n"

    /* The transactional ids this broker coordinates (daemon/txn/txn_ops.c):
     * what DescribeTransactions answers; start_time NULL when none is open. */
    "CREATE TEMP VIEW transactions AS\n"
    "SELECT transactional_id, producer_id, producer_epoch, state, partitions, start_time,\n"
    "       timeout_ms, last_update FROM sluice_transactions;\n"

    /* The schema registry's mirror (daemon/registry/sr_mirror.c): every
     * schema by id, and every version of every subject (soft-deleted ones
     * with deleted = 1) with the level and mode that apply to it.  INSERT
     * and DELETE on subjects are the registry's REST writes (triggers
     * below). */
    "CREATE TEMP VIEW schemas AS\n"
    "SELECT id, schema_type, schema, refs AS \"references\" FROM main.registry_schemas;\n"
    "CREATE TEMP VIEW subjects AS\n"
    "SELECT v.subject, v.version, v.schema_id, s.schema_type, s.schema, v.deleted,\n"
    "       coalesce(c.compatibility, g.compatibility, 'BACKWARD') AS compatibility,\n"
    "       coalesce(c.mode, g.mode, 'READWRITE') AS mode, s.refs AS \"references\"\n"
    "  FROM main.registry_versions v\n"
    "  LEFT JOIN main.registry_schemas s ON s.id = v.schema_id\n"
    "  LEFT JOIN main.registry_configs c ON c.subject = v.subject\n"
    "  LEFT JOIN main.registry_configs g ON g.subject = '';\n"

    "CREATE TEMP VIEW partition_replicas AS\n"
    "SELECT r.topic, r.partition, r.position, r.broker_id, r.in_isr,\n"
    "       r.broker_id = p.leader AND sluice_broker_alive(r.broker_id) AS is_leader,\n"
    "       sluice_broker_alive(r.broker_id) AS alive,\n"
    /* NULL where this broker cannot know: another broker's replica of a
     * partition led elsewhere, or a follower that has not fetched yet. */
    "       sluice_replica_end(r.topic, r.partition, r.broker_id) AS log_end_offset,\n"
    "       sluice_replica_lag(r.topic, r.partition, r.broker_id) AS lag\n"
    "  FROM main.partition_replicas r JOIN main.partitions p\n"
    "    ON p.topic = r.topic AND p.partition = r.partition;\n"

    "CREATE TEMP VIEW topic_configs AS\n"
    "SELECT t.name AS topic, d.name AS name,\n"
    "       CASE WHEN d.sensitive THEN NULL\n"
    "            ELSE coalesce(o.value, d.broker_value, d.default_value) END AS value,\n"
    "       CASE WHEN o.value IS NOT NULL THEN 'topic'\n"
    "            WHEN d.broker_value IS NOT NULL THEN 'broker'\n"
    "            ELSE 'default' END AS source,\n"
    "       0 AS read_only, d.type AS type, d.sensitive AS sensitive\n"
    "  FROM main.topics t CROSS JOIN sluice_config_defs d\n"
    "  LEFT JOIN main.topic_configs o ON o.topic = t.name AND o.name = d.name;\n"

    /* Dynamic broker configs (daemon/view/view_broker_configs.c): broker_id NULL is
     * the cluster-wide default. */
    "CREATE TEMP VIEW broker_configs AS\n"
    "SELECT CASE WHEN broker = '' THEN NULL ELSE CAST(broker AS INTEGER) END AS broker_id,\n"
    "       name, value,\n"
    "       CASE WHEN broker = '' THEN 'dynamic_default' ELSE 'dynamic_broker' END AS source\n"
    "  FROM main.broker_configs;\n"

    "CREATE TEMP VIEW consumer_groups AS\n"
    "SELECT g.group_id, g.state, g.protocol, g.generation,\n"
    "       (SELECT count(*) FROM main.group_members m\n"
    "         WHERE m.group_id = g.group_id) AS members,\n"
    "       g.protocol_type, g.leader, g.state_changed_at\n"
    "  FROM main.consumer_groups g\n"
    "UNION ALL\n"
    "SELECT DISTINCT o.group_id, 'Empty', NULL, 0, 0, NULL, NULL, NULL\n"
    "  FROM main.committed_offsets o\n"
    " WHERE o.group_id NOT IN (SELECT group_id FROM main.consumer_groups);\n"

    "CREATE TEMP VIEW group_members AS\n"
    "SELECT m.group_id, m.member_id, m.instance_id, m.client_id,\n"
    "       m.client_host AS host, m.session_timeout_ms, m.rebalance_timeout_ms,\n"
    "       (SELECT count(*) FROM sluice_assignment(m.assignment)) AS assigned_partitions\n"
    "  FROM main.group_members m;\n"

    "CREATE TEMP VIEW group_assignments AS\n"
    "SELECT m.group_id, m.member_id, a.topic, a.partition\n"
    "  FROM main.group_members m, sluice_assignment(m.assignment) a;\n"

    "CREATE TEMP VIEW committed_offsets AS\n"
    "SELECT group_id, topic, partition, offset, metadata,\n"
    "       commit_time_ms AS committed_at, leader_epoch\n"
    "  FROM main.committed_offsets;\n"

    /* Committed offsets outside (CROSS JOIN fixes the order) in
     * primary-key order — a sequential scan, or a search by group_id; the
     * planner would rather scan committed_offsets_topic and fetch every
     * row's offset from the table, 3x slower, hence INDEXED BY the primary
     * key of this WITHOUT ROWID table (SQLite's name for it; a query of the
     * view fails loudly if a migration ever renames it) — each joined to
     * its partition's high watermark by a point lookup in
     * sluice_partition_merged (main.local_logs with the live numbers, built
     * once per statement; the lookups come in partition order, so each is
     * one comparison).  No B-tree search of main.local_logs per offset, and
     * no index covering committed_offsets.offset, which every commit would
     * have to update (+65 % instructions per upsert). */
    "CREATE TEMP VIEW consumer_lag AS\n"
    "SELECT o.group_id, o.topic, o.partition, o.offset AS committed,\n"
    "       h.high_watermark AS log_end_offset,\n"
    "       max(h.high_watermark - o.offset, 0) AS lag\n"
    "  FROM main.committed_offsets o INDEXED BY sqlite_autoindex_committed_offsets_1\n"
    "  CROSS JOIN sluice_partition_merged h\n"
    "    ON h.topic = o.topic AND h.partition = o.partition;\n"

    /* The authorizer's ACLs (daemon/security/sec_authz.c), Kafka's names as kafka-acls
     * prints them; INSERT and DELETE go through what CreateAcls and
     * DeleteAcls use. */
    "CREATE TEMP VIEW acls AS\n"
    "SELECT id, resource_type, resource_name, pattern_type, principal, host,\n"
    "       operation, permission\n"
    "  FROM main.acls;\n"
    /* SASL/SCRAM users without their keys (main.users' salt, stored_key and
     * server_key are refused to every reader, see authorize); INSERT or
     * UPDATE with a password derives a new credential, which is all that
     * is stored: the password column always reads NULL. */
    /* The log directory (log.dirs' first entry) and its health, as the
     * broker knows it now (issue 28): state 'online' or 'offline' (Kafka's
     * words), NULL when read from a stopped broker's files. */
    "CREATE TEMP VIEW log_dirs AS\n"
    "SELECT sluice_log_dir('path') AS path, sluice_log_dir('state') AS state,\n"
    "       sluice_log_dir('error') AS error, sluice_log_dir('failed_at') AS failed_at,\n"
    "       sluice_log_dir('failures') AS failures;\n"
    "CREATE TEMP VIEW scram_credentials AS\n"
    "SELECT name, mechanism, iterations, NULL AS password, created_at FROM main.users;\n"
    "CREATE TEMP TRIGGER scram_credentials_insert INSTEAD OF INSERT ON scram_credentials BEGIN\n"
    "  SELECT sluice_scram_set(NEW.name, NEW.mechanism, NEW.password, NEW.iterations);\nEND;\n"
    "CREATE TEMP TRIGGER scram_credentials_update INSTEAD OF UPDATE ON scram_credentials BEGIN\n"
    "  SELECT RAISE(ABORT, 'scram_credentials: name and mechanism cannot change; "
    "INSERT the new one and DELETE the old')\n"
    "   WHERE OLD.name IS NOT NEW.name OR OLD.mechanism IS NOT NEW.mechanism;\n"
    "  SELECT sluice_scram_set(NEW.name, NEW.mechanism, NEW.password, NEW.iterations);\nEND;\n"
    "CREATE TEMP TRIGGER scram_credentials_delete INSTEAD OF DELETE ON scram_credentials BEGIN\n"
    "  SELECT sluice_scram_delete(OLD.name, OLD.mechanism);\nEND;\n"

    /* A row in subjects is a version: INSERT registers one (POST
     * /subjects/{s}/versions).  DELETE takes what it matched one step
     * further, as Confluent's two-step rule has it (sq_schema_writes): a
     * subject whose every version it matched, by a WHERE that names no
     * version's column (note_version_read), is deleted as a whole (soft
     * while it has live versions, else permanently), other rows version by
     * version (a live one soft, a soft-deleted one permanently). */
    "CREATE TEMP TRIGGER subjects_insert INSTEAD OF INSERT ON subjects BEGIN\n"
    "  SELECT sluice_schema_register(NEW.subject, NEW.schema, NEW.schema_type,\n"
    "         NEW.\"references\", NEW.version IS NOT NULL OR NEW.schema_id IS NOT NULL\n"
    "         OR NEW.deleted IS NOT NULL OR NEW.compatibility IS NOT NULL\n"
    "         OR NEW.mode IS NOT NULL);\nEND;\n"
    /* UPDATE subjects SET compatibility = 'FULL' (and/or mode) is PUT
     * /config/{s} (/mode/{s}) once per subject; NULL clears the subject's
     * own (DELETE /config/{s}).  Other columns: refused by the authorizer. */
    "CREATE TEMP TRIGGER subjects_update INSTEAD OF UPDATE ON subjects BEGIN\n"
    "  SELECT sluice_subject_set(OLD.subject, NEW.compatibility, NEW.mode);\nEND;\n"
    "CREATE TEMP TRIGGER subjects_delete INSTEAD OF DELETE ON subjects BEGIN\n"
    "  SELECT sluice_schema_delete(OLD.subject, OLD.version, OLD.deleted,\n"
    "         (SELECT count(*) FROM main.registry_versions WHERE subject = OLD.subject));\n"
    "END;\n"

    /* Writes: one internal function call per row. */
    "CREATE TEMP TRIGGER topics_insert INSTEAD OF INSERT ON topics BEGIN\n"
    "  SELECT sluice_topic_create(NEW.name, NEW.partitions, NEW.replication_factor,\n"
    "         NEW.internal, NEW.created_at);\nEND;\n"
    "CREATE TEMP TRIGGER topics_delete INSTEAD OF DELETE ON topics BEGIN\n"
    "  SELECT sluice_topic_delete(OLD.name);\nEND;\n"
    "CREATE TEMP TRIGGER topics_update INSTEAD OF UPDATE ON topics BEGIN\n"
    "  SELECT sluice_topic_update(OLD.name, NEW.name, OLD.partitions, NEW.partitions,\n"
    "         OLD.replication_factor IS NOT NEW.replication_factor\n"
    "         OR OLD.internal IS NOT NEW.internal OR OLD.created_at IS NOT NEW.created_at);\nEND;\n"

    /* UPDATE partitions SET replicas = '2,3,4' starts a reassignment (NULL
     * cancels the one in progress), as AlterPartitionReassignments does. */
    /* (The authorizer refuses a SET of any other column.) */
    "CREATE TEMP TRIGGER partitions_update INSTEAD OF UPDATE ON partitions BEGIN\n"
    "  SELECT sluice_partition_reassign(OLD.topic, OLD.partition, OLD.replicas,\n"
    "         NEW.replicas);\nEND;\n"

    "CREATE TEMP TRIGGER topic_configs_insert INSTEAD OF INSERT ON topic_configs BEGIN\n"
    "  SELECT sluice_config_set(NEW.topic, NEW.name, NEW.value);\nEND;\n"
    "CREATE TEMP TRIGGER topic_configs_update INSTEAD OF UPDATE ON topic_configs BEGIN\n"
    "  SELECT sluice_config_update(OLD.topic, OLD.name, NEW.topic, NEW.name, NEW.value,\n"
    "         OLD.source, OLD.value IS NOT NEW.value);\nEND;\n"
    "CREATE TEMP TRIGGER topic_configs_delete INSTEAD OF DELETE ON topic_configs BEGIN\n"
    "  SELECT sluice_config_unset(OLD.topic, OLD.name, OLD.source);\nEND;\n"

    "CREATE TEMP TRIGGER acls_insert INSTEAD OF INSERT ON acls BEGIN\n"
    "  SELECT sluice_acl_create(NEW.resource_type, NEW.resource_name, NEW.pattern_type,\n"
    "         NEW.principal, NEW.host, NEW.operation, NEW.permission);\nEND;\n"
    "CREATE TEMP TRIGGER acls_delete INSTEAD OF DELETE ON acls BEGIN\n"
    "  SELECT sluice_acl_delete(OLD.resource_type, OLD.resource_name, OLD.pattern_type,\n"
    "         OLD.principal, OLD.host, OLD.operation, OLD.permission);\nEND;\n"

    /* An operator's abort of a hanging transaction: the coordinator aborts
     * it as its timeout would, if it is still the one read. */
    "CREATE TEMP TRIGGER transactions_update INSTEAD OF UPDATE ON transactions BEGIN\n"
    "  SELECT sluice_txn_abort(OLD.transactional_id, OLD.producer_id, OLD.producer_epoch,\n"
    "                          NEW.state);\nEND;\n"
    "CREATE TEMP TRIGGER consumer_groups_delete INSTEAD OF DELETE ON consumer_groups BEGIN\n"
    "  SELECT sluice_group_delete(OLD.group_id);\nEND;\n"

    "CREATE TEMP TRIGGER committed_offsets_update INSTEAD OF UPDATE ON committed_offsets BEGIN\n"
    "  SELECT sluice_offset_set(OLD.group_id, OLD.topic, OLD.partition,\n"
    "         NEW.group_id, NEW.topic, NEW.partition, NEW.offset, NEW.metadata);\nEND;\n"
    "CREATE TEMP TRIGGER committed_offsets_insert INSTEAD OF INSERT ON committed_offsets BEGIN\n"
    "  SELECT sluice_offset_set(NEW.group_id, NEW.topic, NEW.partition,\n"
    "         NEW.group_id, NEW.topic, NEW.partition, NEW.offset, NEW.metadata);\nEND;\n"

    /* Cluster links and mirror topics (daemon/link/link.c): the secret
     * settings are never shown (main.cluster_links.secrets is refused to
     * every reader, see authorize); config shows them masked.  A mirror
     * partition's lag: the source's log end as last fetched (saved once a
     * second) minus the mirror's live log end. */
    "CREATE TEMP VIEW cluster_links AS\n"
    "SELECT name, bootstrap_servers, config, state, last_error, offsets_synced_at,\n"
    "       groups_synced, sync_error, topics_skipped, source_cluster_id, created_at\n"
    "  FROM main.cluster_links;\n"
    "CREATE TEMP VIEW mirror_partitions AS\n"
    "SELECT mp.topic, mp.partition, mp.source_end AS source_log_end_offset,\n"
    "       l.log_end_offset AS mirror_log_end_offset,\n"
    "       max(0, mp.source_end - coalesce(l.log_end_offset, 0)) AS lag,\n"
    /* since the mirror last had all of it, while it lags (0 when not) */
    "       CASE WHEN mp.source_end <= coalesce(l.log_end_offset, 0) THEN 0\n"
    "            ELSE CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)\n"
    "                 - mp.caught_up_at END AS lag_ms,\n"
    "       mp.updated_at\n"
    "  FROM main.mirror_partitions mp LEFT JOIN sluice_partition_state l\n"
    "    ON l.topic = mp.topic AND l.partition = mp.partition;\n"
    "CREATE TEMP VIEW mirror_topics AS\n"
    "SELECT m.topic, m.link, m.source_topic, m.state, m.last_error,\n"
    "       (SELECT sum(lag) FROM mirror_partitions mp WHERE mp.topic = m.topic) AS lag,\n"
    "       (SELECT max(lag_ms) FROM mirror_partitions mp WHERE mp.topic = m.topic) AS lag_ms,\n"
    "       m.created_at\n"
    "  FROM main.mirror_topics m;\n"
    "CREATE TEMP TRIGGER cluster_links_insert INSTEAD OF INSERT ON cluster_links BEGIN\n"
    "  SELECT sluice_link_create(NEW.name, NEW.bootstrap_servers, NEW.config, NEW.state,\n"
    "         NEW.last_error, NEW.created_at);\nEND;\n"
    /* A link's settings changed in place (link.c K16): its name stays,
     * the broker's columns are its own. */
    "CREATE TEMP TRIGGER cluster_links_update INSTEAD OF UPDATE ON cluster_links BEGIN\n"
    "  SELECT RAISE(ABORT, 'cluster_links: only bootstrap_servers and config can be "
    "changed; a link keeps its name (DELETE it and INSERT another), and state, last_error "
    "and the sync columns are the broker own')\n"
    "   WHERE OLD.name IS NOT NEW.name OR OLD.state IS NOT NEW.state\n"
    "      OR OLD.last_error IS NOT NEW.last_error OR OLD.created_at IS NOT NEW.created_at\n"
    "      OR OLD.offsets_synced_at IS NOT NEW.offsets_synced_at\n"
    "      OR OLD.groups_synced IS NOT NEW.groups_synced\n"
    "      OR OLD.sync_error IS NOT NEW.sync_error\n"
    "      OR OLD.topics_skipped IS NOT NEW.topics_skipped\n"
    "      OR OLD.source_cluster_id IS NOT NEW.source_cluster_id;\n"
    "  SELECT sluice_link_update(OLD.name, NEW.bootstrap_servers, NEW.config)\n"
    "   WHERE OLD.bootstrap_servers IS NOT NEW.bootstrap_servers\n"
    "      OR OLD.config IS NOT NEW.config;\n"
    "END;\n"
    "CREATE TEMP TRIGGER cluster_links_delete INSTEAD OF DELETE ON cluster_links BEGIN\n"
    "  SELECT sluice_link_delete(OLD.name);\nEND;\n"
    "CREATE TEMP TRIGGER mirror_topics_insert INSTEAD OF INSERT ON mirror_topics BEGIN\n"
    "  SELECT sluice_mirror_create(NEW.topic, NEW.link, NEW.source_topic, NEW.state,\n"
    "         NEW.last_error IS NOT NULL OR NEW.lag IS NOT NULL OR NEW.lag_ms IS NOT NULL\n"
    "         OR NEW.created_at IS NOT NULL);\n"
    "END;\n"
    "CREATE TEMP TRIGGER mirror_topics_delete INSTEAD OF DELETE ON mirror_topics BEGIN\n"
    "  SELECT sluice_mirror_delete(OLD.topic);\nEND;\n"
    "CREATE TEMP TRIGGER mirror_topics_update INSTEAD OF UPDATE ON mirror_topics BEGIN\n"
    "  SELECT RAISE(ABORT, 'mirror_topics: only state can be changed (active, paused, "
    "promoted, failed_over)')\n"
    "   WHERE OLD.topic IS NOT NEW.topic OR OLD.link IS NOT NEW.link\n"
    "      OR OLD.source_topic IS NOT NEW.source_topic;\n"
    "  SELECT sluice_mirror_state(OLD.topic, NEW.state) WHERE OLD.state IS NOT NEW.state;\n"
    "END;\n";

static const char *const views[] = {
    "brokers", "topics", "partitions", "partition_replicas", "topic_configs",
    "broker_configs", "consumer_groups", "scram_credentials",
    "group_members", "group_assignments", "committed_offsets", "consumer_lag", "acls",
    "log_dirs", "producers", "transactions", "schemas", "subjects", "cluster_links",
    "mirror_topics", "mirror_partitions", NULL
};

/* Every view refuses, with a reason, the writes it has no meaning for. */
static const char refusals_sql[] =
    "CREATE TEMP TRIGGER %s_no_%s INSTEAD OF %s ON %s BEGIN\n"
    "  SELECT RAISE(ABORT, '%s');\nEND;\n";

/* (topic, partition, broker): the replica's log end as this broker knows
 * it — its own log's end, or, where it leads, what the follower last
 * fetched from — else NULL (a follower's state is its leader's to tell). */
static bool replica_end(sq_conn *c, sqlite3_value **v, const sq_live **lp, int64_t *end)
{
    const sq_snap *s = sq_conn_snap(c);
    const char *topic = (const char *)sqlite3_value_text(v[0]);
    const sq_live *l = s && topic ? sq_snap_find(s, topic, sqlite3_value_int(v[1])) : NULL;
    int64_t id = sqlite3_value_int64(v[2]);
    *lp = l;
    if (!l)
        return false;
    if (id == c->env.broker_id) {
        *end = l->log_end_offset;
        return true;
    }
    for (int32_t i = 0; l->leading && i < l->nfollowers; i++) {
        const sq_follower *f = &s->fol[l->first_follower + (size_t)i];
        if (f->broker_id == id && f->log_end_offset >= 0) {
            *end = f->log_end_offset;
            return true;
        }
    }
    return false;
}

static void fn_replica_end(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const sq_live *l;
    int64_t end;
    if (replica_end(sqlite3_user_data(ctx), v, &l, &end))
        sqlite3_result_int64(ctx, end);
    else
        sqlite3_result_null(ctx);
}

/* Messages the replica lacks of the leader's log; known where this
 * broker leads (Kafka's replica lag is the leader's too). */
static void fn_replica_lag(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const sq_live *l;
    int64_t end;
    if (replica_end(sqlite3_user_data(ctx), v, &l, &end) && l->leading)
        sqlite3_result_int64(ctx, l->log_end_offset > end ? l->log_end_offset - end : 0);
    else
        sqlite3_result_null(ctx);
}

/* (why: the text of RAISE, no quotes in it) */
static const struct { const char *view, *op, *why; } refusals[] = {
    { "brokers", NULL, "brokers is read-only: brokers register themselves" },
    { "log_dirs", NULL, "log_dirs is read-only: a failed log directory comes back when "
      "the broker restarts on a healthy one" },
    { "producers", NULL, "producers is read-only: producers write through Produce, and "
      "their transactions end with the markers of the transaction coordinator" },
    { "transactions", "INSERT", "transactions: transactional ids come with their producers "
      "(InitProducerId); abort one with UPDATE transactions SET state to CompleteAbort" },
    { "transactions", "DELETE", "transactions: an idle transactional id expires after "
      "transactional.id.expiration.ms; abort an open transaction with "
      "UPDATE transactions SET state to CompleteAbort" },
    { "partitions", "INSERT", "partitions: add partitions with "
      "UPDATE topics SET partitions = N" },
    { "partitions", "DELETE", "partitions: partitions cannot be deleted; only "
      "UPDATE partitions SET replicas (a reassignment) is allowed" },
    { "schemas", NULL, "schemas is read-only: a schema is registered under a subject, "
      "with INSERT INTO subjects (subject, schema[, schema_type, references])" },
    { "partition_replicas", NULL, "partition_replicas is read-only: replicas are "
      "assigned when partitions are created" },
    { "broker_configs", NULL, "broker_configs is read-only: change broker configs with "
      "AlterConfigs or IncrementalAlterConfigs on the BROKER resource" },
    { "group_members", NULL, "group_members is read-only: members join and leave "
      "through the Kafka group protocol" },
    { "group_assignments", NULL, "group_assignments is read-only: the group leader "
      "assigns partitions" },
    { "consumer_lag", NULL, "consumer_lag is read-only: move a group with "
      "UPDATE committed_offsets" },
    { "consumer_groups", "INSERT", "consumer_groups: groups are created by consumers "
      "joining; only DELETE (of an empty group) is allowed" },
    { "consumer_groups", "UPDATE", "consumer_groups: groups are created by consumers "
      "joining; only DELETE (of an empty group) is allowed" },
    { "acls", "UPDATE", "acls: an ACL is changed by DELETE of the old row and INSERT "
      "of the new one" },
    { "committed_offsets", "DELETE", "committed_offsets: to forget the offsets of a group, "
      "DELETE FROM consumer_groups" },
    { "mirror_partitions", NULL, "mirror_partitions is read-only: it shows each mirror "
      "partition lag; drive a mirror with UPDATE mirror_topics SET state" },
};

static bool in_list(const char *s, const char *const *list)
{
    for (; s && *list; list++)
        if (!strcmp(s, *list))
            return true;
    return false;
}

/* ---- write functions ------------------------------------------------------------ */
static const char *arg_text(sqlite3_value *v)
{
    return sqlite3_value_type(v) == SQLITE_NULL ? NULL : (const char *)sqlite3_value_text(v);
}

/* Hands w to the environment: 0, or -1 with the statement's error in msg. */
static int hook_write(sq_conn *c, const sq_write *w, char *msg, size_t msglen)
{
    char err[MD_ERRLEN + 64] = "";
    if (!c->env.write) {
        snprintf(msg, msglen, "read-only: this connection cannot change the "
                 "cluster (sluice-sql --data-dir reads a stopped broker)");
        return -1;
    }
    int rc = c->env.write(c->env.arg, w, err, sizeof err);
    if (rc == KP_NONE)
        return 0;
    snprintf(msg, msglen, "%s: %s", kp_error_name(rc), err[0] ? err : "the change was refused");
    return -1;
}

/* ... for one row; its error is the statement's. */
static void do_write(sqlite3_context *ctx, const sq_write *w)
{
    sq_conn *c = sqlite3_user_data(ctx);
    char msg[MD_ERRLEN + 128];
    if (hook_write(c, w, msg, sizeof msg) != 0) {
        sqlite3_result_error(ctx, msg, -1);
        return;
    }
    c->changes++;
    sqlite3_result_null(ctx);
}

static bool need_text(sqlite3_context *ctx, sqlite3_value *v, const char *what)
{
    if (sqlite3_value_type(v) == SQLITE_TEXT)
        return true;
    char msg[128];
    snprintf(msg, sizeof msg, "%s must be given as text", what);
    sqlite3_result_error(ctx, msg, -1);
    return false;
}

static bool need_int(sqlite3_context *ctx, sqlite3_value *v, const char *what, bool null_ok)
{
    int t = sqlite3_value_numeric_type(v);
    if (t == SQLITE_INTEGER || (null_ok && t == SQLITE_NULL))
        return true;
    char msg[128];
    snprintf(msg, sizeof msg, "%s must be an integer", what);
    sqlite3_result_error(ctx, msg, -1);
    return false;
}

static void fn_topic_create(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[0], "topics.name") ||
        !need_int(ctx, v[1], "topics.partitions", true) ||
        !need_int(ctx, v[2], "topics.replication_factor", true))
        return;
    if (sqlite3_value_type(v[3]) != SQLITE_NULL || sqlite3_value_type(v[4]) != SQLITE_NULL) {
        sqlite3_result_error(ctx, "topics: only name, partitions and replication_factor "
                             "can be given; internal and created_at are set by the broker", -1);
        return;
    }
    sq_write w = { .op = SQ_TOPIC_CREATE, .s1 = arg_text(v[0]),
                   .i1 = sqlite3_value_type(v[1]) == SQLITE_NULL ? -1 : sqlite3_value_int64(v[1]),
                   .i2 = sqlite3_value_type(v[2]) == SQLITE_NULL ? -1 : sqlite3_value_int64(v[2]) };
    do_write(ctx, &w);
}

static void fn_topic_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_write w = { .op = SQ_TOPIC_DELETE, .s1 = arg_text(v[0]) };
    do_write(ctx, &w);
}

/* (old name, new name, old partitions, new partitions, other columns changed) */
static void fn_topic_update(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const char *old = arg_text(v[0]), *new = arg_text(v[1]);
    if (!new || strcmp(old, new) || sqlite3_value_int(v[4])) {
        sqlite3_result_error(ctx, "topics: only partitions can be changed (to add "
                             "partitions, as CreatePartitions does); topics cannot be "
                             "renamed and their other columns are read-only", -1);
        return;
    }
    if (!need_int(ctx, v[3], "topics.partitions", false))
        return;
    if (sqlite3_value_int64(v[2]) == sqlite3_value_int64(v[3])) {
        sqlite3_result_null(ctx);                    /* nothing to do */
        return;
    }
    sq_write w = { .op = SQ_TOPIC_PARTITIONS, .s1 = old, .i1 = sqlite3_value_int64(v[3]) };
    do_write(ctx, &w);
}

/* (topic, partition, old replicas, new replicas) */
static void fn_partition_reassign(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const char *old = arg_text(v[2]), *new = arg_text(v[3]);
    if (new && !need_text(ctx, v[3], "partitions.replicas"))
        return;
    if (new && old && !strcmp(old, new)) {
        sqlite3_result_null(ctx);                    /* nothing to do */
        return;
    }
    sq_write w = { .op = SQ_PARTITION_REASSIGN, .s1 = arg_text(v[0]),
                   .i1 = sqlite3_value_int64(v[1]), .s2 = new };
    do_write(ctx, &w);
}

static void fn_config_set(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[0], "topic_configs.topic") ||
        !need_text(ctx, v[1], "topic_configs.name"))
        return;
    if (sqlite3_value_type(v[2]) == SQLITE_NULL) {
        sqlite3_result_error(ctx, "topic_configs.value cannot be NULL; DELETE the row "
                             "to return to the default", -1);
        return;
    }
    sq_write w = { .op = SQ_CONFIG_SET, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]),
                   .s3 = (const char *)sqlite3_value_text(v[2]) };
    do_write(ctx, &w);
}

/* (old topic, old name, new topic, new name, new value, old source, value changed) */
static void fn_config_update(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const char *ot = arg_text(v[0]), *on = arg_text(v[1]);
    const char *nt = arg_text(v[2]), *nn = arg_text(v[3]);
    if (!nt || !nn || strcmp(ot, nt) || strcmp(on, nn)) {
        sqlite3_result_error(ctx, "topic_configs: only value can be changed", -1);
        return;
    }
    if (!sqlite3_value_int(v[6])) {
        sqlite3_result_null(ctx);
        return;
    }
    if (sqlite3_value_type(v[4]) == SQLITE_NULL) {
        sq_write w = { .op = SQ_CONFIG_UNSET, .s1 = ot, .s2 = on };
        const char *src = arg_text(v[5]);
        if (src && strcmp(src, "topic")) {
            sqlite3_result_null(ctx);
            return;
        }
        do_write(ctx, &w);
        return;
    }
    sq_write w = { .op = SQ_CONFIG_SET, .s1 = ot, .s2 = on,
                   .s3 = (const char *)sqlite3_value_text(v[4]) };
    do_write(ctx, &w);
}

static void fn_config_unset(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const char *src = arg_text(v[2]);
    if (src && strcmp(src, "topic")) {               /* no override: nothing to remove */
        sqlite3_result_null(ctx);
        return;
    }
    sq_write w = { .op = SQ_CONFIG_UNSET, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]) };
    do_write(ctx, &w);
}

static void fn_group_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_write w = { .op = SQ_GROUP_DELETE, .s1 = arg_text(v[0]) };
    do_write(ctx, &w);
}

/* (resource_type, resource_name, pattern_type, principal, host, operation,
 * permission): an ACL row; INSERT's pattern_type defaults to LITERAL and
 * host to "*", as kafka-acls does.  The broker checks the names. */
static void acl_write(sqlite3_context *ctx, sqlite3_value **v, enum sq_op op)
{
    const char *f[7];
    static const char *const col[7] = { "resource_type", "resource_name", "pattern_type",
                                        "principal", "host", "operation", "permission" };
    for (int i = 0; i < 7; i++) {
        f[i] = arg_text(v[i]);
        if (!f[i] && op == SQ_ACL_CREATE && (i == 2 || i == 4))
            f[i] = i == 2 ? "LITERAL" : "*";
        if (!f[i] || sqlite3_value_type(v[i]) == SQLITE_INTEGER) {
            char msg[96];
            snprintf(msg, sizeof msg, "acls.%s must be given as text", col[i]);
            sqlite3_result_error(ctx, msg, -1);
            return;
        }
    }
    sq_write w = { .op = op, .s1 = f[0], .s2 = f[1], .s3 = f[2], .s4 = f[3], .s5 = f[4],
                   .s6 = f[5], .s7 = f[6] };
    do_write(ctx, &w);
}

static void fn_acl_create(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    acl_write(ctx, v, SQ_ACL_CREATE);
}

static void fn_acl_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    acl_write(ctx, v, SQ_ACL_DELETE);
}

/* (old group, old topic, old partition, new group, new topic, new partition,
 *  new offset, new metadata) */
static void fn_offset_set(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[3], "committed_offsets.group_id") ||
        !need_text(ctx, v[4], "committed_offsets.topic") ||
        !need_int(ctx, v[5], "committed_offsets.partition", false) ||
        !need_int(ctx, v[6], "committed_offsets.offset", false))
        return;
    if (strcmp(arg_text(v[0]) ? arg_text(v[0]) : "", arg_text(v[3])) ||
        strcmp(arg_text(v[1]) ? arg_text(v[1]) : "", arg_text(v[4])) ||
        sqlite3_value_int64(v[2]) != sqlite3_value_int64(v[5])) {
        sqlite3_result_error(ctx, "committed_offsets: only offset and metadata can be "
                             "changed", -1);
        return;
    }
    if (sqlite3_value_int64(v[6]) < 0) {
        sqlite3_result_error(ctx, "committed_offsets.offset must be >= 0", -1);
        return;
    }
    sq_write w = { .op = SQ_OFFSET_SET, .s1 = arg_text(v[3]), .s2 = arg_text(v[4]),
                   .i1 = sqlite3_value_int64(v[5]), .i2 = sqlite3_value_int64(v[6]),
                   .s3 = arg_text(v[7]) };
    do_write(ctx, &w);
}

/* Cluster mode is a controller row in the file (the ZooKeeper mirror wrote
 * it; metadata/cluster.c).  Row of the statement: (row exists, controller
 * broker id, alive flag of broker ?1).  SQLITE_ROW, or 0 for a standalone
 * file (also one from before migration 0004, which has no such table). */
static int cluster_row(sq_conn *c, int64_t id)
{
    if (!c->cluster_st) {
        bool was = c->internal;
        c->internal = true;            /* our statement, not the operator's */
        int rc = sqlite3_prepare_v3(c->db,
            "SELECT EXISTS (SELECT 1 FROM main.controller),\n"
            "       (SELECT broker_id FROM main.controller WHERE id = 0),\n"
            "       (SELECT alive FROM main.brokers WHERE id = ?1)",
            -1, SQLITE_PREPARE_PERSISTENT, &c->cluster_st, NULL);
        c->internal = was;
        if (rc != SQLITE_OK) {
            sqlite3_finalize(c->cluster_st);
            c->cluster_st = NULL;
            return 0;
        }
    }
    sqlite3_reset(c->cluster_st);
    sqlite3_bind_int64(c->cluster_st, 1, id);
    if (sqlite3_step(c->cluster_st) != SQLITE_ROW || !sqlite3_column_int(c->cluster_st, 0))
        return 0;
    return SQLITE_ROW;
}

static void fn_controller_id(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc; (void)v;
    sq_conn *c = sqlite3_user_data(ctx);
    if (cluster_row(c, -1) == SQLITE_ROW)      /* -1 while none holds /controller */
        sqlite3_result_int(ctx, sqlite3_column_int(c->cluster_st, 1));
    else
        sqlite3_result_int(ctx, c->env.broker_id);   /* standalone: this broker */
    sqlite3_reset(c->cluster_st);
}

/* Standalone: only this broker exists, alive while this process runs.
 * Cluster mode: the mirror's flag (its ephemeral znode exists) — but only
 * a running broker keeps the mirror current, so a file read by a process
 * that is not the broker (sluice-sql --data-dir) answers NULL: unknown. */
static void fn_broker_alive(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_conn *c = sqlite3_user_data(ctx);
    int64_t id = sqlite3_value_int64(v[0]);
    if (cluster_row(c, id) != SQLITE_ROW)
        sqlite3_result_int(ctx, c->env.broker_alive && id == c->env.broker_id);
    else if (!c->env.broker_alive)
        sqlite3_result_null(ctx);
    else
        sqlite3_result_int(ctx, sqlite3_column_int(c->cluster_st, 2) == 1);
    sqlite3_reset(c->cluster_st);
}

/* One column of the log_dirs view (issue 28) from the statement's
 * snapshot: path, state, error, failed_at, failures. */
static void fn_log_dir(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_conn *c = sqlite3_user_data(ctx);
    const char *col = (const char *)sqlite3_value_text(v[0]);
    const sq_snap *s = c->env.broker_alive ? sq_conn_snap(c) : NULL;
    bool known = s && s->has_logdir;
    if (!col) {
        sqlite3_result_null(ctx);
    } else if (!strcmp(col, "path")) {
        sqlite3_result_text(ctx, c->env.data_dir, -1, SQLITE_TRANSIENT);
    } else if (!known) {
        sqlite3_result_null(ctx);                 /* a stopped broker's files */
    } else if (!strcmp(col, "state")) {
        sqlite3_result_text(ctx, s->logdir_failed ? "offline" : "online", -1, SQLITE_STATIC);
    } else if (!strcmp(col, "error")) {
        if (s->logdir_failed)
            sqlite3_result_text(ctx, s->logdir_error, -1, SQLITE_TRANSIENT);
        else
            sqlite3_result_null(ctx);
    } else if (!strcmp(col, "failed_at")) {
        if (s->logdir_failed_ms >= 0)
            sqlite3_result_int64(ctx, s->logdir_failed_ms);
        else
            sqlite3_result_null(ctx);
    } else if (!strcmp(col, "failures")) {
        sqlite3_result_int64(ctx, s->logdir_failures);
    } else {
        sqlite3_result_null(ctx);
    }
}

/* (subject, schema, schema_type, references, another column given) */
static void fn_schema_register(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[0], "subjects.subject") || !need_text(ctx, v[1], "subjects.schema"))
        return;
    if (sqlite3_value_int(v[4])) {
        sqlite3_result_error(ctx, "subjects: only subject, schema, schema_type and references "
                             "can be given; the registry assigns version and schema_id", -1);
        return;
    }
    sq_write w = { .op = SQ_SCHEMA_REGISTER, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]),
                   .s3 = arg_text(v[2]), .s4 = arg_text(v[3]) };
    do_write(ctx, &w);
}

/* One row DELETE or UPDATE on subjects matched, kept until the statement
 * has matched them all: only then is it known whether a DELETE names a
 * whole subject, and an UPDATE sets a subject's level once, not per row. */
struct sq_schema_row {
    char *subject;                    /* NULL: done with */
    bool update;                      /* else a DELETE */
    bool deleted;                     /* DELETE: the row's */
    int64_t version, versions;        /* DELETE: the row's, the subject's */
    char *compat, *mode;              /* UPDATE: the new values (NULL: clear) */
};

static char *dup_or_null(sqlite3_value *v, bool *nomem)
{
    const char *t = arg_text(v);
    char *d = t ? strdup(t) : NULL;
    *nomem |= t && !d;
    return d;
}

static void row_free(struct sq_schema_row *r)
{
    free(r->subject);
    free(r->compat);
    free(r->mode);
    r->subject = r->compat = r->mode = NULL;
}

/* Keeps r (its strings taken) for sq_schema_writes. */
static void row_keep(sqlite3_context *ctx, struct sq_schema_row *r, bool nomem)
{
    sq_conn *c = sqlite3_user_data(ctx);
    if (!nomem && c->nrows == c->caprows) {
        size_t cap = c->caprows ? c->caprows * 2 : 8;
        struct sq_schema_row *d = realloc(c->rows, cap * sizeof *d);
        if (d) {
            c->rows = d;
            c->caprows = cap;
        }
    }
    if (nomem || !r->subject || c->nrows == c->caprows) {
        row_free(r);
        sqlite3_result_error_nomem(ctx);
        return;
    }
    c->rows[c->nrows++] = *r;
    sqlite3_result_null(ctx);
}

/* (subject, version, deleted, the subject's versions) */
static void fn_schema_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    bool nomem = false;
    struct sq_schema_row r = { .subject = dup_or_null(v[0], &nomem),
                               .version = sqlite3_value_int64(v[1]),
                               .deleted = sqlite3_value_int(v[2]) != 0,
                               .versions = sqlite3_value_int64(v[3]) };
    row_keep(ctx, &r, nomem);
}

/* (subject, new compatibility, new mode); which were SET: c->set_compat,
 * c->set_mode (the authorizer saw the statement's columns). */
static void fn_subject_set(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    bool nomem = false;
    struct sq_schema_row r = { .subject = dup_or_null(v[0], &nomem), .update = true,
                               .compat = dup_or_null(v[1], &nomem),
                               .mode = dup_or_null(v[2], &nomem) };
    row_keep(ctx, &r, nomem);
}

/* The writes for r's subject (the rows i.. of it): a DELETE of every version
 * by a WHERE that names none (note_version_read) is the subject's delete,
 * of some, or by version, a delete of each; an UPDATE sets the
 * subject's level and/or mode once.  0 or -1 with err. */
static int subject_writes(sq_conn *c, size_t i, char *err, size_t errlen)
{
    struct sq_schema_row *r = &c->rows[i];
    size_t n = 0, live = 0;
    for (size_t k = i; k < c->nrows; k++)
        if (c->rows[k].subject && c->rows[k].update == r->update &&
            !strcmp(c->rows[k].subject, r->subject)) {
            n++;
            live += !c->rows[k].deleted;
        }
    int rc = 0;
    if (r->update) {
        sq_write w = { .op = SQ_SUBJECT_CONFIG, .s1 = r->subject };
        if (c->set_compat) {
            w.s2 = r->compat;
            rc = hook_write(c, &w, err, errlen);
        }
        if (rc == 0 && c->set_mode) {
            w.s2 = r->mode;
            w.i1 = 1;
            rc = hook_write(c, &w, err, errlen);
        }
    } else {
        bool whole = !c->names_versions && (int64_t)n == r->versions;
        sq_write w = { .op = SQ_SCHEMA_DELETE, .s1 = r->subject, .i1 = whole ? 0 : r->version,
                       .i2 = whole ? live == 0 : r->deleted };
        rc = hook_write(c, &w, err, errlen);
        if (!whole)
            n = 1;
    }
    c->changes += rc == 0 ? (int64_t)n : 0;
    /* The subject's other rows were written with it (all, or none but i). */
    for (size_t k = i + 1; n > 1 && k < c->nrows; k++)
        if (c->rows[k].subject && c->rows[k].update == r->update &&
            !strcmp(c->rows[k].subject, r->subject))
            row_free(&c->rows[k]);
    row_free(r);
    return rc;
}

int sq_schema_writes(sq_conn *c, char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; err && rc == 0 && i < c->nrows; i++)
        if (c->rows[i].subject)
            rc = subject_writes(c, i, err, errlen);
    for (size_t i = 0; i < c->nrows; i++)
        row_free(&c->rows[i]);
    c->nrows = 0;
    return rc;
}

/* (name, mechanism, password, iterations NULL = default) */
static void fn_scram_set(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_write w = { .op = SQ_SCRAM_SET, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]),
                   .s3 = arg_text(v[2]),
                   .i1 = sqlite3_value_type(v[3]) == SQLITE_NULL ? -1 : sqlite3_value_int64(v[3]) };
    do_write(ctx, &w);
}

static void fn_scram_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_write w = { .op = SQ_SCRAM_DELETE, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]) };
    do_write(ctx, &w);
}

/* (name, bootstrap_servers, config, state, last_error, created_at) */
static void fn_link_create(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[0], "cluster_links.name") ||
        !need_text(ctx, v[1], "cluster_links.bootstrap_servers"))
        return;
    if (sqlite3_value_type(v[3]) != SQLITE_NULL || sqlite3_value_type(v[4]) != SQLITE_NULL ||
        sqlite3_value_type(v[5]) != SQLITE_NULL) {
        sqlite3_result_error(ctx, "cluster_links: only name, bootstrap_servers and config "
                             "can be given; state, last_error and created_at are the "
                             "broker's", -1);
        return;
    }
    if (sqlite3_value_type(v[2]) != SQLITE_NULL && !need_text(ctx, v[2], "cluster_links.config"))
        return;
    sq_write w = { .op = SQ_LINK_CREATE, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]),
                   .s3 = arg_text(v[2]) };
    do_write(ctx, &w);
}

/* (name, bootstrap_servers, config) */
static void fn_link_update(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[1], "cluster_links.bootstrap_servers"))
        return;
    if (sqlite3_value_type(v[2]) != SQLITE_NULL && !need_text(ctx, v[2], "cluster_links.config"))
        return;
    sq_write w = { .op = SQ_LINK_UPDATE, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]),
                   .s3 = arg_text(v[2]) };
    do_write(ctx, &w);
}

static void fn_link_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_write w = { .op = SQ_LINK_DELETE, .s1 = arg_text(v[0]) };
    do_write(ctx, &w);
}

/* (topic, link, source_topic, state, any of the broker's columns given) */
static void fn_mirror_create(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[0], "mirror_topics.topic") ||
        !need_text(ctx, v[1], "mirror_topics.link"))
        return;
    if (sqlite3_value_int(v[4])) {
        sqlite3_result_error(ctx, "mirror_topics: only topic, link, source_topic and state "
                             "can be given; last_error, lag and created_at are the "
                             "broker's", -1);
        return;
    }
    sq_write w = { .op = SQ_MIRROR_CREATE, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]),
                   .s3 = arg_text(v[2]), .s4 = arg_text(v[3]) };
    do_write(ctx, &w);
}

static void fn_mirror_delete(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    sq_write w = { .op = SQ_MIRROR_DELETE, .s1 = arg_text(v[0]) };
    do_write(ctx, &w);
}

static void fn_mirror_state(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    if (!need_text(ctx, v[1], "mirror_topics.state"))
        return;
    sq_write w = { .op = SQ_MIRROR_STATE, .s1 = arg_text(v[0]), .s2 = arg_text(v[1]) };
    do_write(ctx, &w);
}

/* (transactional_id, producer_id, producer_epoch as read, the new state):
 * only 'CompleteAbort' (or 'PrepareAbort', its first step) is a change the
 * coordinator makes on request. */
static void fn_txn_abort(sqlite3_context *ctx, int argc, sqlite3_value **v)
{
    (void)argc;
    const char *to = arg_text(v[3]);
    if (!to || (strcmp(to, "CompleteAbort") && strcmp(to, "PrepareAbort"))) {
        sqlite3_result_error(ctx, "transactions: only UPDATE transactions SET state = "
                             "'CompleteAbort' (abort the open transaction) is allowed", -1);
        return;
    }
    sq_write w = { .op = SQ_TXN_ABORT, .s1 = arg_text(v[0]),
                   .i1 = sqlite3_value_int64(v[1]), .i2 = sqlite3_value_int64(v[2]) };
    do_write(ctx, &w);
}

static const struct {
    const char *name;
    int nargs;
    void (*fn)(sqlite3_context *, int, sqlite3_value **);
    bool internal;                    /* callable from our triggers only */
} functions[] = {
    { "sluice_topic_create", 5, fn_topic_create, true },
    { "sluice_topic_delete", 1, fn_topic_delete, true },
    { "sluice_topic_update", 5, fn_topic_update, true },
    { "sluice_partition_reassign", 4, fn_partition_reassign, true },
    { "sluice_config_set", 3, fn_config_set, true },
    { "sluice_config_update", 7, fn_config_update, true },
    { "sluice_config_unset", 3, fn_config_unset, true },
    { "sluice_group_delete", 1, fn_group_delete, true },
    { "sluice_offset_set", 8, fn_offset_set, true },
    { "sluice_acl_create", 7, fn_acl_create, true },
    { "sluice_acl_delete", 7, fn_acl_delete, true },
    { "sluice_scram_set", 4, fn_scram_set, true },
    { "sluice_scram_delete", 2, fn_scram_delete, true },
    { "sluice_txn_abort", 4, fn_txn_abort, true },
    { "sluice_schema_register", 5, fn_schema_register, true },
    { "sluice_schema_delete", 4, fn_schema_delete, true },
    { "sluice_subject_set", 3, fn_subject_set, true },
    { "sluice_link_create", 6, fn_link_create, true },
    { "sluice_link_update", 3, fn_link_update, true },
    { "sluice_link_delete", 1, fn_link_delete, true },
    { "sluice_mirror_create", 5, fn_mirror_create, true },
    { "sluice_mirror_delete", 1, fn_mirror_delete, true },
    { "sluice_mirror_state", 2, fn_mirror_state, true },
    { "sluice_controller_id", 0, fn_controller_id, false },
    { "sluice_broker_alive", 1, fn_broker_alive, false },
    { "sluice_replica_end", 3, fn_replica_end, false },
    { "sluice_replica_lag", 3, fn_replica_lag, false },
    { "sluice_log_dir", 1, fn_log_dir, false },
};

static bool internal_function(const char *name)
{
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++)
        if (functions[i].internal && !strcasecmp(functions[i].name, name))
            return true;
    return false;
}

/* Why a write of this kind to this view is refused, or NULL. */
static const char *refusal(const char *view, int action)
{
    const char *op = action == SQLITE_INSERT ? "INSERT" :
                     action == SQLITE_UPDATE ? "UPDATE" : "DELETE";
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        if (!strcmp(refusals[i].view, view) && (!refusals[i].op || !strcmp(refusals[i].op, op)))
            return refusals[i].why;
    return NULL;
}

/* ---- authorizer ---------------------------------------------------------------- */
/* Pragmas that only read: without a value, and those whose argument is a
 * table or index name (a value would make the others writes). */
static const char *const read_pragmas[] = {
    "table_list", "function_list", "module_list", "pragma_list",
    "collation_list", "compile_options", "user_version", "schema_version",
    "data_version", "database_list", "page_count", "page_size",
    "freelist_count", "encoding", "journal_mode", NULL
};
static const char *const name_pragmas[] = {
    "table_info", "table_xinfo", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", NULL
};
static const char *const secret_columns[] = { "salt", "stored_key", "server_key", NULL };
/* subjects' columns that single out versions (not the subject or its state) */
static const char *const version_columns[] = { "version", "schema_id", "schema", "schema_type",
                                               "references", NULL };

/* A statement on the subjects view reads each of its columns once to make
 * its rows; a column read again is named by the statement (its WHERE).  A
 * DELETE that names a version's column deletes version by version
 * (subject_writes), never the whole subject: on a follower whose mirror
 * lags, "WHERE version = 3" matching every version it knows must not
 * delete a version 4 the leader has. */
static void note_version_read(sq_conn *c, const char *column)
{
    for (unsigned i = 0; version_columns[i]; i++)
        if (!strcmp(column, version_columns[i])) {
            c->names_versions |= (c->version_reads & 1u << i) != 0;
            c->version_reads |= 1u << i;
        }
}

static int deny(sq_conn *c, const char *fmt, const char *arg)
{
    snprintf(c->deny, sizeof c->deny, fmt, arg ? arg : "");
    return SQLITE_DENY;
}

static int authorize(void *arg, int action, const char *a3, const char *a4,
                     const char *db, const char *inner)
{
    sq_conn *c = arg;
    if (c->internal)
        return SQLITE_OK;
    switch (action) {
    case SQLITE_SELECT:
    case SQLITE_RECURSIVE:
        return SQLITE_OK;
    case SQLITE_READ:
        if (a3 && !strcmp(a3, "users") && db && !strcmp(db, "main") &&
            in_list(a4, secret_columns))
            return deny(c, "users.%s is a credential and cannot be read", a4);
        if (a3 && !strcmp(a3, "cluster_links") && db && !strcmp(db, "main") && a4 &&
            !strcmp(a4, "secrets"))
            return deny(c, "cluster_links.secrets holds a link's credentials and cannot be "
                        "read (cluster_links.config shows them masked)", NULL);
        if (a3 && a4 && !strcmp(a3, "subjects") && db && !strcmp(db, "temp") && inner &&
            !strcmp(inner, "subjects"))
            note_version_read(c, a4);
        return SQLITE_OK;
    case SQLITE_FUNCTION:
        if (a4 && !strcasecmp(a4, "load_extension"))
            return deny(c, "load_extension() is not allowed", NULL);
        /* SQLite 3.40's printf('%.*c', N, x) loops N times inside one call,
         * out of reach of the progress handler's time limit (a fuzzer found
         * 0.4 s for N = 10^8, seconds for 2^31). */
        if (a4 && (!strcasecmp(a4, "printf") || !strcasecmp(a4, "format")))
            return deny(c, "%s() is not allowed: its widths escape the statement "
                        "time limit; use || and substr() to format", a4);
        if (a4 && internal_function(a4) && !inner)
            return deny(c, "%s() is internal: change the cluster with INSERT, UPDATE "
                        "or DELETE on topics, topic_configs, consumer_groups, scram_credentials, "
                        "committed_offsets, subjects, cluster_links or mirror_topics", a4);
        return SQLITE_OK;
    case SQLITE_PRAGMA:
        if ((!a4 && in_list(a3, read_pragmas)) || in_list(a3, name_pragmas))
            return SQLITE_OK;
        return deny(c, "PRAGMA %s is not allowed: only pragmas that read without "
                    "a value (table_info, index_list, …) are", a3);
    case SQLITE_INSERT:
    case SQLITE_UPDATE:
    case SQLITE_DELETE:
        /* SQLite reports INSERT/UPDATE of sqlite_master when it declares
         * an eponymous virtual table (pragma_table_info): allow those; a
         * real CREATE/ALTER/DROP is refused by its own action code. */
        if (a3 && (!strcmp(a3, "sqlite_master") || !strcmp(a3, "sqlite_temp_master") ||
                   !strcmp(a3, "sqlite_schema") || !strcmp(a3, "sqlite_temp_schema"))) {
            if (action != SQLITE_DELETE)      /* sqlite_master stays read-only: */
                return SQLITE_OK;             /* the connection is */
            return deny(c, "schema changes are not allowed (CREATE, DROP, ALTER, "
                        "REINDEX, ANALYZE)", NULL);
        }
        /* Our views: the writable ones apply the change, the others'
         * triggers say why they cannot. */
        if (!inner && db && !strcmp(db, "temp") && in_list(a3, views)) {
            const char *why = refusal(a3, action);
            if (why)
                return deny(c, "%s", why);
            /* partitions: replicas alone is writable (a reassignment);
             * refused when prepared, whether or not a row matches. */
            if (action == SQLITE_UPDATE && !strcmp(a3, "partitions") && a4 &&
                strcmp(a4, "replicas"))
                return deny(c, "partitions.%s is read-only: only replicas can be changed "
                            "(a reassignment)", a4);
            if (action == SQLITE_UPDATE && !strcmp(a3, "subjects") && a4) {
                if (strcmp(a4, "compatibility") && strcmp(a4, "mode"))
                    return deny(c, "subjects.%s cannot be changed: only compatibility and "
                                "mode (register with INSERT, delete with DELETE)", a4);
                *(a4[0] == 'c' ? &c->set_compat : &c->set_mode) = true;
            }
            /* subjects: the registry checks the principal's SUBJECT ACLs
             * as for its REST request (daemon/registry/sr_sql.c Q3). */
            if (c->read_only && strcmp(a3, "subjects"))
                return deny(c, "%s: writing through SQL needs ALTER on the cluster "
                            "(kafka-cluster); this principal may only read", a3);
            c->wrote = true;
            return SQLITE_OK;
        }
        return deny(c, "%s is read-only: writes are allowed only to topics, "
                    "topic_configs, partitions (replicas), consumer_groups, "
                    "committed_offsets, scram_credentials and subjects", a3);
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
        return deny(c, "ATTACH and DETACH are not allowed", NULL);
    case SQLITE_TRANSACTION:
    case SQLITE_SAVEPOINT:
        return deny(c, "transactions are not supported: each statement is applied "
                    "on its own", NULL);
    case SQLITE_CREATE_INDEX: case SQLITE_CREATE_TABLE: case SQLITE_CREATE_TEMP_INDEX:
    case SQLITE_CREATE_TEMP_TABLE: case SQLITE_CREATE_TEMP_TRIGGER:
    case SQLITE_CREATE_TEMP_VIEW: case SQLITE_CREATE_TRIGGER: case SQLITE_CREATE_VIEW:
    case SQLITE_DROP_INDEX: case SQLITE_DROP_TABLE: case SQLITE_DROP_TEMP_INDEX:
    case SQLITE_DROP_TEMP_TABLE: case SQLITE_DROP_TEMP_TRIGGER:
    case SQLITE_DROP_TEMP_VIEW: case SQLITE_DROP_TRIGGER: case SQLITE_DROP_VIEW:
    case SQLITE_ALTER_TABLE: case SQLITE_CREATE_VTABLE: case SQLITE_DROP_VTABLE:
    case SQLITE_REINDEX: case SQLITE_ANALYZE:
        return deny(c, "schema changes are not allowed (CREATE, DROP, ALTER, "
                    "REINDEX, ANALYZE)", NULL);
    default:
        return deny(c, "this kind of statement is not allowed", NULL);
    }
}

/* Time limit and cancellation: SQLite calls this every 1000 VM steps. */
static int progress(void *arg)
{
    sq_conn *c = arg;
    if (c->deadline_us && sq_mono_us() > c->deadline_us) {
        snprintf(c->deny, sizeof c->deny, "the statement ran longer than "
                 "admin.sql.timeout.ms (%lld ms) and was stopped",
                 (long long)c->env.timeout_ms);
        return 1;
    }
    return 0;
}

static int install_refusals(sq_conn *c, char **msg)
{
    static const char *const ops[] = { "INSERT", "UPDATE", "DELETE" };
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++)
        for (int k = 0; k < 3; k++) {
            if (refusals[i].op && strcmp(refusals[i].op, ops[k]))
                continue;
            char sql[1024];
            snprintf(sql, sizeof sql, refusals_sql, refusals[i].view, ops[k], ops[k],
                     refusals[i].view, refusals[i].why);
            if (sqlite3_exec(c->db, sql, NULL, NULL, msg) != SQLITE_OK)
                return -1;
        }
    /* Connect the eponymous tables now, outside the authorizer. */
    return sqlite3_exec(c->db, "SELECT 1 FROM messages WHERE 0; "
                        "SELECT 1 FROM sluice_partition_state WHERE 0; "
                        "SELECT 1 FROM sluice_partition_merged WHERE 0; "
                        "SELECT 1 FROM sluice_config_defs WHERE 0; "
                        "SELECT 1 FROM sluice_assignment(NULL)", NULL, NULL, msg);
}

/* ---- open / close ---------------------------------------------------------------- */
int sq_open(const char *path, const sq_env *env, sq_conn **out, char *err, size_t errlen)
{
    sq_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    c->env = *env;
    int rc = sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        snprintf(err, errlen, "cannot open %s read-only: %s", path,
                 c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
        sq_close(c);
        return -1;
    }
    sqlite3_limit(c->db, SQLITE_LIMIT_LENGTH, SQ_MAX_VALUE_BYTES);
    sqlite3_busy_timeout(c->db, 2000);
    sqlite3_extended_result_codes(c->db, 1);
    for (size_t i = 0; i < sizeof functions / sizeof functions[0]; i++)
        sqlite3_create_function(c->db, functions[i].name, functions[i].nargs,
                                SQLITE_UTF8,
                                c, functions[i].fn, NULL, NULL);
    c->internal = true;
    char *msg = NULL;
    if (sq_vtab_register(c) || sq_messages_register(c) ||
        sqlite3_exec(c->db, surface_sql, NULL, NULL, &msg) != SQLITE_OK ||
        install_refusals(c, &msg)) {
        snprintf(err, errlen, "cannot install the SQL surface: %s",
                 msg ? msg : sqlite3_errmsg(c->db));
        sqlite3_free(msg);
        sq_close(c);
        return -1;
    }
    c->internal = false;
    sqlite3_set_authorizer(c->db, authorize, c);
    sqlite3_progress_handler(c->db, 1000, progress, c);
    *out = c;
    return 0;
}

void sq_close(sq_conn *c)
{
    if (!c)
        return;
    if (c->snap)
        sq_snap_unref(c->snap);
    sqlite3_finalize(c->cluster_st);
    sqlite3_close_v2(c->db);
    sq_schema_writes(c, NULL, 0);
    free(c->rows);
    free(c);
}

struct sqlite3 *sq_db(sq_conn *c) { return c->db; }

void sq_interrupt(sq_conn *c) { sqlite3_interrupt(c->db); }

sq_snap *sq_conn_snap(sq_conn *c)
{
    if (!c->snap && c->env.live)
        c->snap = c->env.live(c->env.arg);
    return c->snap;
}
