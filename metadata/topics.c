/*
 * metadata/topics.c — topics, their partitions and their config overrides.
 *
 * Design note.
 *
 * Each public call is one change of one kind of fact (DESIGN.md): it checks
 * everything it can before touching the database, then makes its writes in
 * one md_txn_enter/leave unit, so a topic never exists without all its
 * partitions or with half its configs.
 *
 * Checks, in the order Kafka makes them for CreateTopics, so a request with
 * several problems gets the error a Kafka broker would give:
 *   name rules → already exists → '.'/'_' collision → partitions ≥ 1 →
 *   replication factor ≥ 1 → each config (unknown name, null, bad value).
 * validate_only runs the same checks (existence read outside any write
 * transaction) and returns before the first write.
 *
 * Invariants (kept here, relied on by the data path):
 *   T1. topics.partitions = number of partitions rows for the topic, and
 *       the rows are numbered 0..partitions-1.
 *   T2. Every stored override passed md_config_check.
 *   T3. Deleting a topic deletes its partitions, their replicas and
 *       bookmarks, its configs and committed offsets (ON DELETE CASCADE;
 *       foreign_keys is on for every handle).
 *   T4. Every partition has 1..MD_REPLICAS_MAX replicas, each broker once,
 *       and its ISR is a subset of them.
 * The partition log files are not touched here: the caller removes them
 * after md_topic_delete succeeds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

/* ---- names ---------------------------------------------------------------- */

static bool legal_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int md_topic_name_check(const char *name, size_t len, char *err, size_t errlen)
{
    if (!name || len == 0)
        return md_errf(err, errlen, KP_INVALID_TOPIC_EXCEPTION,
                       "Topic name is illegal, it can't be empty");
    if ((len == 1 && name[0] == '.') || (len == 2 && !memcmp(name, "..", 2)))
        return md_errf(err, errlen, KP_INVALID_TOPIC_EXCEPTION,
                       "Topic name cannot be \".\" or \"..\"");
    if (len > MD_TOPIC_NAME_MAX)
        return md_errf(err, errlen, KP_INVALID_TOPIC_EXCEPTION,
                       "Topic name is illegal, it can't be longer than %d "
                       "characters (it has %zu)", MD_TOPIC_NAME_MAX, len);
    for (size_t i = 0; i < len; i++) {
        if (legal_char((unsigned char)name[i]))
            continue;
        /* Echo the name with unprintable bytes masked: it goes into logs
         * and onto the wire. */
        char shown[MD_TOPIC_NAME_MAX + 1];
        for (size_t j = 0; j < len; j++)
            shown[j] = name[j] >= 0x20 && name[j] < 0x7f ? name[j] : '?';
        shown[len] = 0;
        return md_errf(err, errlen, KP_INVALID_TOPIC_EXCEPTION,
                       "Topic name \"%s\" is illegal, it contains a character "
                       "other than ASCII alphanumerics, '.', '_' and '-'", shown);
    }
    return KP_NONE;
}

/* ---- reading topics --------------------------------------------------------- */

static void row_to_topic(sqlite3_stmt *s, md_topic *t)
{
    memset(t, 0, sizeof *t);
    const char *name = (const char *)sqlite3_column_text(s, 0);
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    if (sqlite3_column_bytes(s, 1) == 16)
        memcpy(t->id, sqlite3_column_blob(s, 1), 16);
    t->partitions = sqlite3_column_int(s, 2);
    t->replication_factor = (int16_t)sqlite3_column_int(s, 3);
    t->internal = sqlite3_column_int(s, 4) != 0;
    t->created_at_ms = sqlite3_column_int64(s, 5);
}

int md_topic_get(md_db *db, const char *name, md_topic *out)
{
    sqlite3_stmt *s = md_stmt(db, ST_TOPIC_GET);
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int step = sqlite3_step(s), rc;
    if (step == SQLITE_ROW) {
        if (out)
            row_to_topic(s, out);
        rc = KP_NONE;
    } else {
        rc = step == SQLITE_DONE ? KP_UNKNOWN_TOPIC_OR_PARTITION : MD_E_SQL;
    }
    sqlite3_reset(s);
    return rc;
}

static int fill_topic(sqlite3_stmt *s, void *elem)
{
    row_to_topic(s, elem);
    return 0;
}

int md_topic_list(md_db *db, md_topic **out, size_t *n)
{
    void *v;
    int rc = md_rows(md_stmt(db, ST_TOPIC_LIST), sizeof **out, fill_topic, NULL,
                     &v, n);
    *out = v;
    return rc;
}

/* The partition statements come from migration 0003 and are prepared on
 * first use (md_internal.h); a failed prepare leaves NULL, which SQLite's
 * bind/step calls refuse with SQLITE_MISUSE, so callers see an error. */
static sqlite3_stmt *stmt(md_db *db, enum md_stmt which)
{
    if (which < ST_FIRST_LAZY)
        return md_stmt(db, which);
    sqlite3_stmt *s = NULL;
    char err[MD_ERRLEN];
    return md_stmt_lazy(db, which, &s, err, sizeof err) ? NULL : s;
}

/* ---- creating and deleting ---------------------------------------------------- */

/* Existence and the '.'/'_' collision rule. */
static int check_new_name(md_db *db, const char *name, char *err, size_t errlen)
{
    int rc = md_topic_get(db, name, NULL);
    if (rc == KP_NONE)
        return md_errf(err, errlen, KP_TOPIC_ALREADY_EXISTS,
                       "Topic '%s' already exists.", name);
    if (rc != KP_UNKNOWN_TOPIC_OR_PARTITION)
        return md_sqlerr(db, err, errlen, "topic lookup");
    sqlite3_stmt *s = md_stmt(db, ST_TOPIC_COLLIDES);
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW)
        rc = md_errf(err, errlen, KP_INVALID_TOPIC_EXCEPTION,
                     "Topic '%s' collides with existing topic: %s", name,
                     (const char *)sqlite3_column_text(s, 0));
    else if (step == SQLITE_DONE)
        rc = KP_NONE;
    else
        rc = md_sqlerr(db, err, errlen, "topic collision lookup");
    sqlite3_reset(s);
    return rc;
}

static int check_configs(const md_kv *kv, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        int rc = md_config_check(kv[i].name, kv[i].value, err, errlen);
        if (rc)
            return rc;
    }
    return KP_NONE;
}

static int insert_configs(md_db *db, const char *topic, const md_kv *kv,
                          size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        sqlite3_stmt *s = md_stmt(db, ST_CFG_UPSERT);
        sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, kv[i].name, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, kv[i].value, -1, SQLITE_STATIC);
        int rc = md_step_done(db, s, err, errlen, "store topic config");
        if (rc)
            return rc;
    }
    return 0;
}

/* One partition's state rows: the partitions row and one
 * partition_replicas row per replica. */
static int insert_state(md_db *db, const char *topic, int32_t p,
                        const md_partition_state *st, bool with_row,
                        char *err, size_t errlen)
{
    int rc = 0;
    if (with_row) {
        sqlite3_stmt *s = stmt(db, ST_PART_INSERT);
        sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, p);
        sqlite3_bind_int(s, 3, st->leader);
        sqlite3_bind_int(s, 4, st->leader_epoch);
        sqlite3_bind_int(s, 5, st->controller_epoch);
        sqlite3_bind_int(s, 6, st->zk_version);
        rc = md_step_done(db, s, err, errlen, "upsert partition");
    }
    for (int32_t i = 0; !rc && i < st->nreplicas; i++) {
        bool in_isr = false;
        for (int32_t j = 0; j < st->nisr; j++)
            in_isr |= st->isr[j] == st->replicas[i];
        sqlite3_stmt *s = stmt(db, ST_REPLICA_INSERT);
        sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, p);
        sqlite3_bind_int(s, 3, i);
        sqlite3_bind_int(s, 4, st->replicas[i]);
        sqlite3_bind_int(s, 5, in_isr);
        const char *re = st->adding >> i & 1 ? "adding" : st->removing >> i & 1 ? "removing"
                                                                                 : NULL;
        if (re)
            sqlite3_bind_text(s, 6, re, -1, SQLITE_STATIC);
        else
            sqlite3_bind_null(s, 6);
        rc = md_step_done(db, s, err, errlen, "insert partition replica");
    }
    return rc;
}

/* Replicas of one partition: at least one, each broker once, ISR ⊆ replicas. */
static int check_state(const md_partition_state *st, int32_t p, char *err,
                       size_t errlen)
{
    if (st->nreplicas < 1 || st->nreplicas > MD_REPLICAS_MAX ||
        st->nisr < 0 || st->nisr > st->nreplicas)
        return md_errf(err, errlen, KP_INVALID_REPLICA_ASSIGNMENT,
                       "Partition %d must have 1 to %d replicas.", (int)p,
                       MD_REPLICAS_MAX);
    for (int32_t i = 0; i < st->nreplicas; i++) {
        if (st->replicas[i] < 0)
            return md_errf(err, errlen, KP_INVALID_REPLICA_ASSIGNMENT,
                           "Invalid broker id %d in the replicas of partition %d.",
                           (int)st->replicas[i], (int)p);
        for (int32_t j = 0; j < i; j++)
            if (st->replicas[j] == st->replicas[i])
                return md_errf(err, errlen, KP_INVALID_REPLICA_ASSIGNMENT,
                               "Duplicate brokers not allowed in replica "
                               "assignment: broker %d twice for partition id %d.",
                               (int)st->replicas[i], (int)p);
    }
    for (int32_t j = 0; j < st->nisr; j++) {
        bool found = false;
        for (int32_t i = 0; i < st->nreplicas; i++)
            found |= st->replicas[i] == st->isr[j];
        if (!found)
            return md_errf(err, errlen, KP_INVALID_REPLICA_ASSIGNMENT,
                           "In-sync replica %d of partition %d is not a replica.",
                           (int)st->isr[j], (int)p);
    }
    return 0;
}

/* The state of a new partition from its assignment: the first replica
 * leads at epoch 0, all are in sync. */
static void initial_state(const int32_t *replicas, int32_t rf, int32_t self_id,
                          md_partition_state *st)
{
    memset(st, 0, sizeof *st);
    st->zk_version = -1;
    st->nreplicas = st->nisr = rf;
    for (int32_t i = 0; i < rf && i < MD_REPLICAS_MAX; i++)
        st->replicas[i] = st->isr[i] = replicas ? replicas[i] : self_id;
    st->leader = st->replicas[0];
}

static int check_assignment(const int32_t *replicas, int32_t from, int32_t to,
                            int32_t rf, int32_t self_id, char *err, size_t errlen)
{
    if (rf > MD_REPLICAS_MAX)
        return md_errf(err, errlen, KP_INVALID_REPLICATION_FACTOR,
                       "Replication factor %d is more than %d.", (int)rf,
                       MD_REPLICAS_MAX);
    if (!replicas && rf != 1)
        return md_errf(err, errlen, KP_INVALID_REPLICATION_FACTOR,
                       "Replication factor %d needs a replica assignment.", (int)rf);
    for (int32_t p = from; p < to; p++) {
        md_partition_state st;
        initial_state(replicas ? replicas + (size_t)(p - from) * (size_t)rf : NULL,
                      rf, self_id, &st);
        int rc = check_state(&st, p, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

/* Partitions [from, to) with their assignment (see md_topic_create), and
 * this broker's bookmarks for those it hosts. */
static int insert_partitions(md_db *db, const char *topic, int32_t from,
                             int32_t to, int32_t rf, int32_t self_id,
                             const int32_t *replicas, char *err, size_t errlen)
{
    for (int32_t p = from; p < to; p++) {
        md_partition_state st;
        initial_state(replicas ? replicas + (size_t)(p - from) * (size_t)rf : NULL,
                      rf, self_id, &st);
        int rc = insert_state(db, topic, p, &st, true, err, errlen);
        bool hosted = false;
        for (int32_t i = 0; i < st.nreplicas; i++)
            hosted |= st.replicas[i] == self_id;
        if (!rc && hosted)
            rc = md_log_bookmarks_save(db, topic, p, 0, 0, 0);
        if (rc)
            return rc;
    }
    return 0;
}

static bool is_internal(const char *name)
{
    return !strcmp(name, "__consumer_offsets") || !strcmp(name, "__transaction_state");
}

int md_topic_create(md_db *db, const char *name, int32_t partitions,
                    int16_t replication_factor, const md_kv *configs,
                    size_t nconfigs, int32_t self_id, const int32_t *replicas,
                    bool validate_only, char *err, size_t errlen)
{
    int rc = md_topic_name_check(name, name ? strlen(name) : 0, err, errlen);
    if (rc)
        return rc;
    /* Arguments first, so validate_only needs no write lock. */
    if (partitions < 1)
        rc = md_errf(err, errlen, KP_INVALID_PARTITIONS,
                     "Number of partitions was set to an invalid non-positive "
                     "value (%d).", (int)partitions);
    else if (replication_factor < 1)
        rc = md_errf(err, errlen, KP_INVALID_REPLICATION_FACTOR,
                     "Replication factor must be larger than 0 (was %d).",
                     (int)replication_factor);
    else if (!(rc = check_assignment(replicas, 0, partitions, replication_factor,
                                     self_id, err, errlen)))
        rc = check_configs(configs, nconfigs, err, errlen);
    /* …but report existence ahead of them, as Kafka does. */
    int exists = check_new_name(db, name, err, errlen);
    if (exists)
        return exists;
    if (rc || validate_only)
        return rc;

    int t;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    rc = check_new_name(db, name, err, errlen);   /* again, under the lock */
    if (!rc) {
        uint8_t id[16];
        md_uuid_random(id);
        sqlite3_stmt *s = md_stmt(db, ST_TOPIC_INSERT);
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_blob(s, 2, id, 16, SQLITE_STATIC);
        sqlite3_bind_int(s, 3, partitions);
        sqlite3_bind_int(s, 4, replication_factor);
        sqlite3_bind_int(s, 5, is_internal(name));
        sqlite3_bind_int64(s, 6, md_now_ms());
        rc = md_step_done(db, s, err, errlen, "insert topic");
    }
    if (!rc)
        rc = insert_partitions(db, name, 0, partitions, replication_factor,
                               self_id, replicas, err, errlen);
    if (!rc)
        rc = insert_configs(db, name, configs, nconfigs, err, errlen);
    return md_txn_leave(db, t, rc, err, errlen);
}

static int unknown_topic(const char *name, char *err, size_t errlen)
{
    return md_errf(err, errlen, KP_UNKNOWN_TOPIC_OR_PARTITION,
                   "This server does not host this topic-partition: %s",
                   name ? name : "(null)");
}

int md_topic_delete(md_db *db, const char *name, char *err, size_t errlen)
{
    if (!name)
        return unknown_topic(name, err, errlen);
    sqlite3_stmt *s = md_stmt(db, ST_TOPIC_DELETE);
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    /* One statement: the cascade runs inside it, so it is atomic as is. */
    int rc = md_step_done(db, s, err, errlen, "delete topic");
    if (rc)
        return rc;
    return sqlite3_changes(db->h) ? KP_NONE : unknown_topic(name, err, errlen);
}

int md_topic_add_partitions(md_db *db, const char *name, int32_t new_count,
                            int32_t self_id, const int32_t *replicas,
                            bool validate_only, char *err, size_t errlen)
{
    md_topic t;
    int rc = md_topic_get(db, name, &t);
    if (rc == KP_UNKNOWN_TOPIC_OR_PARTITION)
        return unknown_topic(name, err, errlen);
    if (rc)
        return md_sqlerr(db, err, errlen, "topic lookup");
    if (new_count == t.partitions)
        return md_errf(err, errlen, KP_INVALID_PARTITIONS,
                       "Topic already has %d partitions.", (int)t.partitions);
    if (new_count < t.partitions)
        return md_errf(err, errlen, KP_INVALID_PARTITIONS,
                       "Topic currently has %d partitions, which is higher "
                       "than the requested %d.", (int)t.partitions, (int)new_count);
    rc = check_assignment(replicas, t.partitions, new_count, t.replication_factor,
                          self_id, err, errlen);
    if (rc || validate_only)
        return rc;

    int tok;
    if ((rc = md_txn_enter(db, &tok, err, errlen)))
        return rc;
    /* Re-read under the write lock: another writer may have grown it. */
    rc = md_topic_get(db, name, &t);
    if (rc == KP_UNKNOWN_TOPIC_OR_PARTITION)
        rc = unknown_topic(name, err, errlen);
    else if (rc)
        rc = md_sqlerr(db, err, errlen, "topic lookup");
    else if (new_count <= t.partitions)
        rc = md_errf(err, errlen, KP_INVALID_PARTITIONS,
                     "Topic currently has %d partitions, which is not less "
                     "than the requested %d.", (int)t.partitions, (int)new_count);
    if (!rc)
        rc = insert_partitions(db, name, t.partitions, new_count,
                               t.replication_factor, self_id, replicas, err, errlen);
    if (!rc) {
        sqlite3_stmt *s = md_stmt(db, ST_TOPIC_SET_PARTITIONS);
        sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, new_count);
        rc = md_step_done(db, s, err, errlen, "update partition count");
    }
    return md_txn_leave(db, tok, rc, err, errlen);
}

/* ---- partitions ---------------------------------------------------------------- */

/* One element per row of which (bound to the topic), filled by fill(): 0,
 * or MD_E_SQL when a row could not be kept (fill() says so the same way).
 * On failure drop() frees the cnt elements taken so far, the failed one
 * included.  The topic must exist first (its lookup error otherwise). */
static int list_rows(md_db *db, enum md_stmt which, const char *topic, size_t size,
                     int (*fill)(sqlite3_stmt *s, void *elem),
                     void (*drop)(void *v, size_t cnt), void **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = md_topic_get(db, topic, NULL);
    if (rc)
        return rc;
    sqlite3_stmt *s = stmt(db, which);
    if (!s)
        return MD_E_SQL;
    sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
    return md_rows(s, size, fill, drop, out, n);
}

static int fill_partition(sqlite3_stmt *s, void *elem)
{
    md_partition *p = elem;
    memset(p, 0, sizeof *p);
    p->partition = sqlite3_column_int(s, 0);
    p->st.leader = sqlite3_column_int(s, 1);
    p->st.leader_epoch = sqlite3_column_int(s, 2);
    p->log_start_offset = sqlite3_column_int64(s, 3);
    p->recovery_point = sqlite3_column_int64(s, 4);
    p->high_watermark = sqlite3_column_int64(s, 5);
    p->has_bookmarks = sqlite3_column_int(s, 6);
    p->st.controller_epoch = sqlite3_column_int(s, 7);
    p->st.zk_version = sqlite3_column_int(s, 8);
    return 0;
}

/* Fills each partition's replicas and ISR, in preference order. */
static int fill_replicas(md_db *db, const char *topic, md_partition *parts, size_t n)
{
    sqlite3_stmt *s = stmt(db, ST_REPLICA_LIST);
    sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
    int step;
    while ((step = sqlite3_step(s)) == SQLITE_ROW) {
        int32_t p = sqlite3_column_int(s, 0);
        if (p < 0 || (size_t)p >= n || parts[p].partition != p)
            continue;                    /* T1: rows are numbered 0..n-1 */
        md_partition_state *st = &parts[p].st;
        if (st->nreplicas == MD_REPLICAS_MAX)
            continue;
        int32_t id = sqlite3_column_int(s, 1);
        const unsigned char *re = sqlite3_column_text(s, 3);
        if (re && re[0] == 'a')
            st->adding |= 1u << st->nreplicas;
        else if (re && re[0] == 'r')
            st->removing |= 1u << st->nreplicas;
        st->replicas[st->nreplicas++] = id;
        if (sqlite3_column_int(s, 2))
            st->isr[st->nisr++] = id;
    }
    sqlite3_reset(s);
    return step == SQLITE_DONE ? 0 : MD_E_SQL;
}

int md_partition_list(md_db *db, const char *topic, md_partition **out, size_t *n)
{
    void *v;
    int rc = list_rows(db, ST_PART_LIST, topic, sizeof **out, fill_partition,
                       NULL, &v, n);
    if (!rc && (rc = fill_replicas(db, topic, v, *n))) {
        free(v);
        v = NULL;
        *n = 0;
    }
    *out = v;
    return rc;
}

int md_partition_state_set(md_db *db, const char *topic, int32_t partition,
                           const md_partition_state *st, char *err, size_t errlen)
{
    int rc = check_state(st, partition, err, errlen);
    if (rc)
        return rc;
    int t;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *s = stmt(db, ST_PART_SET_STATE);
    sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, partition);
    sqlite3_bind_int(s, 3, st->leader);
    sqlite3_bind_int(s, 4, st->leader_epoch);
    sqlite3_bind_int(s, 5, st->controller_epoch);
    sqlite3_bind_int(s, 6, st->zk_version);
    rc = md_step_done(db, s, err, errlen, "update partition state");
    if (!rc && !sqlite3_changes(db->h))
        rc = md_errf(err, errlen, KP_UNKNOWN_TOPIC_OR_PARTITION,
                     "This server does not host this topic-partition: %s-%d",
                     topic, (int)partition);
    if (!rc) {
        s = stmt(db, ST_REPLICAS_DELETE);
        sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, partition);
        rc = md_step_done(db, s, err, errlen, "clear partition replicas");
    }
    if (!rc)
        rc = insert_state(db, topic, partition, st, false, err, errlen);
    return md_txn_leave(db, t, rc, err, errlen);
}

/* ---- the mirror (cluster mode) ------------------------------------------------------
 * One topic as ZooKeeper has it; see md.h for what is tolerated and why. */

/* p's state with ISR members that are not replicas dropped, checked. */
static int mirror_state(const md_partition_state *in, int32_t p, md_partition_state *out,
                        char *err, size_t errlen)
{
    *out = *in;
    if (in->nreplicas < 1 || in->nreplicas > MD_REPLICAS_MAX)
        return check_state(in, p, err, errlen);
    out->nisr = 0;
    for (int32_t j = 0; j < in->nisr && j < MD_REPLICAS_MAX; j++)
        for (int32_t i = 0; i < in->nreplicas; i++)
            if (in->replicas[i] == in->isr[j]) {
                out->isr[out->nisr++] = in->isr[j];
                break;
            }
    return check_state(out, p, err, errlen);
}

/* The overrides replaced whole; bad ones skipped and counted, the first
 * one's reason kept in why. */
static int mirror_configs(md_db *db, const md_mirror_topic *t, size_t *skipped,
                          char *why, size_t whylen, char *err, size_t errlen)
{
    sqlite3_stmt *s = md_stmt(db, ST_CFG_DELETE_ALL);
    sqlite3_bind_text(s, 1, t->name, -1, SQLITE_STATIC);
    int rc = md_step_done(db, s, err, errlen, "clear topic configs");
    for (size_t i = 0; i < t->nconfigs && !rc; i++) {
        char e[MD_ERRLEN];
        if (!t->configs[i].name || !t->configs[i].value ||
            md_config_check(t->configs[i].name, t->configs[i].value, e, sizeof e)) {
            if (!t->configs[i].name || !t->configs[i].value)
                snprintf(e, sizeof e, "config without a name or value");
            if (!*skipped)
                snprintf(why, whylen, "topic %.64s: config skipped: %.160s", t->name, e);
            (*skipped)++;
            continue;
        }
        rc = insert_configs(db, t->name, &t->configs[i], 1, err, errlen);
    }
    return rc;
}

static bool isr_has(const md_partition_state *st, int32_t id)
{
    for (int32_t j = 0; j < st->nisr; j++)
        if (st->isr[j] == id)
            return true;
    return false;
}

/* Whether a stored state already says what st says (the tables keep ISR
 * membership per replica, so ISR order does not count). */
static bool same_state(const md_partition_state *a, const md_partition_state *b)
{
    if (a->leader != b->leader || a->leader_epoch != b->leader_epoch ||
        a->controller_epoch != b->controller_epoch || a->zk_version != b->zk_version ||
        a->nreplicas != b->nreplicas || a->nisr != b->nisr ||
        a->adding != b->adding || a->removing != b->removing)
        return false;
    for (int32_t i = 0; i < a->nreplicas; i++)
        if (a->replicas[i] != b->replicas[i] ||
            isr_has(a, a->replicas[i]) != isr_has(b, b->replicas[i]))
            return false;
    return true;
}

int md_topic_mirror_put(md_db *db, const md_mirror_topic *t, size_t *skipped,
                        char *err, size_t errlen)
{
    size_t nskip = 0;
    if (skipped)
        *skipped = 0;
    int rc = md_topic_name_check(t->name, t->name ? strlen(t->name) : 0, err, errlen);
    if (rc)
        return rc;
    if (t->npartitions < 1 || !t->parts)
        return md_errf(err, errlen, KP_INVALID_PARTITIONS,
                       "Topic %s has no partitions.", t->name);
    md_partition_state *st = malloc((size_t)t->npartitions * sizeof *st);
    if (!st)
        return md_errf(err, errlen, MD_E_SQL, "out of memory");
    for (int32_t p = 0; p < t->npartitions && !rc; p++)
        rc = mirror_state(&t->parts[p], p, &st[p], err, errlen);
    if (rc) {
        free(st);
        return rc;
    }

    int tok;
    if ((rc = md_txn_enter(db, &tok, err, errlen))) {
        free(st);
        return rc;
    }
    md_topic old;
    bool exists = false;
    int get = md_topic_get(db, t->name, &old);
    if (get == KP_NONE && memcmp(old.id, t->id, 16)) {
        /* Deleted and recreated in ZooKeeper: the old one goes whole (T3). */
        sqlite3_stmt *s = md_stmt(db, ST_TOPIC_DELETE);
        sqlite3_bind_text(s, 1, t->name, -1, SQLITE_STATIC);
        rc = md_step_done(db, s, err, errlen, "delete recreated topic");
    } else if (get == KP_NONE) {
        exists = true;
    } else if (get != KP_UNKNOWN_TOPIC_OR_PARTITION) {
        rc = md_sqlerr(db, err, errlen, "topic lookup");
    }
    if (!rc && exists) {
        sqlite3_stmt *s = stmt(db, ST_TOPIC_MIRROR_UPDATE);
        sqlite3_bind_text(s, 1, t->name, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, t->npartitions);
        sqlite3_bind_int(s, 3, st[0].nreplicas);
        sqlite3_bind_int(s, 4, is_internal(t->name));
        rc = md_step_done(db, s, err, errlen, "update mirrored topic");
        if (!rc) {
            s = stmt(db, ST_PARTS_TRUNCATE);
            sqlite3_bind_text(s, 1, t->name, -1, SQLITE_STATIC);
            sqlite3_bind_int(s, 2, t->npartitions);
            rc = md_step_done(db, s, err, errlen, "delete partitions past the count");
        }
    } else if (!rc) {
        sqlite3_stmt *s = md_stmt(db, ST_TOPIC_INSERT);
        sqlite3_bind_text(s, 1, t->name, -1, SQLITE_STATIC);
        sqlite3_bind_blob(s, 2, t->id, 16, SQLITE_STATIC);
        sqlite3_bind_int(s, 3, t->npartitions);
        sqlite3_bind_int(s, 4, st[0].nreplicas);
        sqlite3_bind_int(s, 5, is_internal(t->name));
        sqlite3_bind_int64(s, 6, t->created_at_ms > 0 ? t->created_at_ms : md_now_ms());
        rc = md_step_done(db, s, err, errlen, "insert mirrored topic");
    }
    /* Partitions already stored as given are not rewritten: a re-put
     * after one state changed writes that one.  (10,000 partitions, RF 3,
     * on the 2-core dev box: ~95 ms written whole, ~25 ms re-put
     * unchanged, mostly the read.) */
    md_partition *old_parts = NULL;
    size_t nold = 0;
    if (!rc && exists && md_partition_list(db, t->name, &old_parts, &nold))
        rc = md_sqlerr(db, err, errlen, "read mirrored partitions");
    for (int32_t p = 0; p < t->npartitions && !rc; p++) {
        if ((size_t)p < nold && old_parts[p].partition == p &&
            same_state(&old_parts[p].st, &st[p]))
            continue;
        if (exists) {
            sqlite3_stmt *s = stmt(db, ST_REPLICAS_DELETE);
            sqlite3_bind_text(s, 1, t->name, -1, SQLITE_STATIC);
            sqlite3_bind_int(s, 2, p);
            rc = md_step_done(db, s, err, errlen, "clear partition replicas");
        }
        if (!rc)
            rc = insert_state(db, t->name, p, &st[p], true, err, errlen);
    }
    free(old_parts);
    char why[MD_ERRLEN] = "";
    if (!rc)
        rc = mirror_configs(db, t, &nskip, why, sizeof why, err, errlen);
    free(st);
    rc = md_txn_leave(db, tok, rc, err, errlen);
    if (!rc && nskip) {
        md_errf(err, errlen, 0, "%s", why);
        if (skipped)
            *skipped = nskip;
    }
    return rc;
}

int md_log_bookmarks_save(md_db *db, const char *topic, int32_t partition,
                          int64_t log_start_offset, int64_t recovery_point,
                          int64_t high_watermark)
{
    sqlite3_stmt *s = stmt(db, ST_LOG_SAVE);
    sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 2, partition);
    sqlite3_bind_int64(s, 3, log_start_offset);
    sqlite3_bind_int64(s, 4, recovery_point);
    sqlite3_bind_int64(s, 5, high_watermark);
    /* A partition deleted meanwhile fails the foreign key. */
    int rc = md_step_done(db, s, NULL, 0, "save log bookmarks");
    return rc ? KP_UNKNOWN_TOPIC_OR_PARTITION : KP_NONE;
}

/* ---- the cluster ------------------------------------------------------------------ */

static const char b64url[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

void md_uuid_random(uint8_t id[16])
{
    do {
        sqlite3_randomness(16, id);
        id[6] = (id[6] & 0x0f) | 0x40;
        id[8] = (id[8] & 0x3f) | 0x80;
    } while ((id[0] >> 2) == 62);               /* text would start with '-' */
}

void md_uuid_to_text(const uint8_t id[16], char out[MD_UUID_TEXT_LEN + 1])
{
    uint32_t acc = 0;
    int bits = 0, k = 0;
    for (int i = 0; i < 16; i++) {              /* 128 bits → 22 sextets */
        acc = (acc << 8) | id[i];
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out[k++] = b64url[(acc >> bits) & 63];
        }
    }
    out[k++] = b64url[(acc << (6 - bits)) & 63];
    out[k] = 0;
}

int md_uuid_from_text(const char *text, size_t len, uint8_t out[16])
{
    if (!text || len != MD_UUID_TEXT_LEN)
        return -1;
    uint8_t id[16];
    uint32_t acc = 0;
    int bits = 0, k = 0;
    for (size_t i = 0; i < len; i++) {
        const char *c = memchr(b64url, text[i], 64);
        if (!text[i] || !c)
            return -1;
        acc = (acc << 6) | (uint32_t)(c - b64url);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (k < 16)
                id[k++] = (uint8_t)(acc >> bits);
        }
    }
    /* 132 bits read: 128 of them data, the last 4 must be zero. */
    if (k != 16 || (acc & ((1u << bits) - 1)))
        return -1;
    memcpy(out, id, 16);
    return 0;
}

static int read_cluster_id(md_db *db, char *out)
{
    sqlite3_stmt *s = stmt(db, ST_CLUSTER_GET);
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW)
        snprintf(out, MD_CLUSTER_ID_MAX + 1, "%s", (const char *)sqlite3_column_text(s, 0));
    sqlite3_reset(s);
    return step == SQLITE_ROW ? 1 : step == SQLITE_DONE ? 0 : MD_E_SQL;
}

int md_cluster_id(md_db *db, char out[MD_CLUSTER_ID_MAX + 1], char *err, size_t errlen)
{
    int rc = read_cluster_id(db, out);
    if (rc == 1)
        return 0;
    if (rc)
        return md_sqlerr(db, err, errlen, "read cluster id");
    uint8_t id[16];
    md_uuid_random(id);
    char text[MD_UUID_TEXT_LEN + 1];
    md_uuid_to_text(id, text);
    sqlite3_stmt *s = stmt(db, ST_CLUSTER_INSERT);
    sqlite3_bind_text(s, 1, text, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, md_now_ms());
    if ((rc = md_step_done(db, s, err, errlen, "store cluster id")))
        return rc;
    /* Read back: whoever inserted first wins. */
    return read_cluster_id(db, out) == 1 ? 0 : md_sqlerr(db, err, errlen, "read cluster id");
}

int md_cluster_id_set(md_db *db, const char *id, char *err, size_t errlen)
{
    if (!id[0] || strlen(id) > MD_CLUSTER_ID_MAX) {
        snprintf(err, errlen, "cluster id must be 1..%d characters", MD_CLUSTER_ID_MAX);
        return KP_INVALID_REQUEST;
    }
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(md_sqlite(db), "INSERT INTO cluster (id, cluster_id, created_at) "
                           "VALUES (0, ?1, ?2) ON CONFLICT (id) DO UPDATE SET "
                           "cluster_id = excluded.cluster_id", -1, &s, NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "store cluster id");
    sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, md_now_ms());
    int rc = md_step_done(db, s, err, errlen, "store cluster id");
    sqlite3_finalize(s);
    return rc;
}

/* ---- topic config overrides ------------------------------------------------------ */

int md_kv_fill(sqlite3_stmt *s, void *elem)
{
    md_kv *kv = elem;
    kv->name = strdup((const char *)sqlite3_column_text(s, 0));
    kv->value = strdup((const char *)sqlite3_column_text(s, 1));
    return kv->name && kv->value ? 0 : MD_E_SQL;
}

void md_kv_drop(void *v, size_t cnt)
{
    md_kv_free(v, cnt);
}

int md_topic_configs(md_db *db, const char *topic, md_kv **out, size_t *n)
{
    void *v;
    int rc = list_rows(db, ST_CFG_LIST, topic, sizeof **out, md_kv_fill, md_kv_drop, &v, n);
    *out = v;
    return rc;
}

static int topic_must_exist(md_db *db, const char *topic, char *err, size_t errlen)
{
    int rc = md_topic_get(db, topic, NULL);
    if (rc == KP_UNKNOWN_TOPIC_OR_PARTITION)
        return unknown_topic(topic, err, errlen);
    return rc ? md_sqlerr(db, err, errlen, "topic lookup") : KP_NONE;
}

int md_topic_config_replace(md_db *db, const char *topic, const md_kv *kv,
                            size_t n, bool validate_only, char *err, size_t errlen)
{
    int rc = topic_must_exist(db, topic, err, errlen);
    if (!rc)
        rc = check_configs(kv, n, err, errlen);
    if (rc || validate_only)
        return rc;
    int t;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *s = md_stmt(db, ST_CFG_DELETE_ALL);
    sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
    rc = md_step_done(db, s, err, errlen, "clear topic configs");
    if (!rc)
        rc = insert_configs(db, topic, kv, n, err, errlen);
    return md_txn_leave(db, t, rc, err, errlen);
}
