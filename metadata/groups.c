/*
 * metadata/groups.c — consumer groups, their members, committed offsets.
 *
 * Design note.
 *
 * The group coordinator (daemon/group*.c) owns live group state in memory;
 * what it writes here is the record an operator queries and what a
 * restarted broker loads: one consumer_groups row per group, the members
 * of its current generation, and every committed offset.  Writes happen
 * per state change and per loop turn of offset commits and group deletes
 * (one job on the metadata sync worker's connection, daemon/group/group_persist.c),
 * never per heartbeat; only the retention check writes on the loop's
 * handle.
 *
 * The statements of the hot paths (group save, offset commit, offset
 * fetch) come from db.c's cache of prepared statements (md_stmt_lazy):
 * they run for every state change and every sync cycle of commits, where
 * parsing the SQL again cost more than the upserts.  Rare ones (load at startup,
 * deletes, expiry) are prepared per call.
 *
 * Invariants:
 *   G1. md_group_save writes the group row and the full member set as one
 *       unit: a reader never sees members of two generations.
 *   G2. md_offset_commit is one transaction (or one savepoint of the
 *       caller's): all of a batch or none of it.  Inside the caller's
 *       md_begin batch it is durable once a WAL sync that started after
 *       md_commit has finished (db.c D1); alone, when it returns (db.c D2).
 *   G3. Committed offsets are independent of consumer_groups rows (a
 *       consumer using assign() never joins); deleting a group deletes
 *       both, deleting a topic deletes its offsets (schema cascade).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

static int prep(md_db *db, const char *sql, sqlite3_stmt **s, char *err, size_t errlen)
{
    if (sqlite3_prepare_v2(db->h, sql, -1, s, NULL) != SQLITE_OK) {
        *s = NULL;
        return md_sqlerr(db, err, errlen, "prepare");
    }
    return 0;
}

static void bind_text_or_null(sqlite3_stmt *s, int i, const char *v)
{
    if (v)
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

static void bind_blob_or_null(sqlite3_stmt *s, int i, const void *p, int32_t len)
{
    if (len >= 0)
        sqlite3_bind_blob(s, i, len ? p : "", len, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

/* ---- groups ---------------------------------------------------------------- */

static int save_members(md_db *db, const md_group *g, char *err, size_t errlen)
{
    sqlite3_stmt *del, *ins;
    int rc = md_stmt_lazy(db, ST_MEMBERS_DELETE, &del, err, errlen);
    if (rc)
        return rc;
    sqlite3_bind_text(del, 1, g->group_id, -1, SQLITE_STATIC);
    rc = md_step_done(db, del, err, errlen, "delete members");
    for (size_t i = 0; !rc && i < g->nmembers; i++) {
        const md_group_member *m = &g->members[i];
        if ((rc = md_stmt_lazy(db, ST_MEMBER_INSERT, &ins, err, errlen)))
            break;
        sqlite3_bind_text(ins, 1, g->group_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 2, m->member_id, -1, SQLITE_STATIC);
        bind_text_or_null(ins, 3, m->instance_id);
        sqlite3_bind_text(ins, 4, m->client_id ? m->client_id : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(ins, 5, m->client_host ? m->client_host : "", -1, SQLITE_STATIC);
        sqlite3_bind_int(ins, 6, m->session_timeout_ms);
        sqlite3_bind_int(ins, 7, m->rebalance_timeout_ms);
        bind_blob_or_null(ins, 8, m->subscription, m->subscription_len);
        bind_blob_or_null(ins, 9, m->assignment, m->assignment_len);
        rc = md_step_done(db, ins, err, errlen, "insert member");
    }
    return rc;
}

int md_group_save(md_db *db, const md_group *g, char *err, size_t errlen)
{
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *s;
    rc = md_stmt_lazy(db, ST_GROUP_UPSERT, &s, err, errlen);
    if (!rc) {
        sqlite3_bind_text(s, 1, g->group_id, -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 2, g->state, -1, SQLITE_STATIC);
        bind_text_or_null(s, 3, g->protocol_type);
        bind_text_or_null(s, 4, g->protocol);
        sqlite3_bind_int(s, 5, g->generation);
        bind_text_or_null(s, 6, g->leader);
        sqlite3_bind_int64(s, 7, md_now_ms());
        sqlite3_bind_int64(s, 8, g->state_changed_at);
        rc = md_step_done(db, s, err, errlen, "save group");
    }
    if (!rc)
        rc = save_members(db, g, err, errlen);
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_group_delete(md_db *db, const char *group_id, char *err, size_t errlen)
{
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    static const char *const sql[] = {
        "DELETE FROM consumer_groups WHERE group_id = ?1",   /* members cascade */
        "DELETE FROM committed_offsets WHERE group_id = ?1",
        /* Kafka's deleted group takes its transactions' offsets along */
        "DELETE FROM pending_txn_offsets WHERE group_id = ?1",
    };
    int changes = 0;
    for (size_t i = 0; !rc && i < sizeof sql / sizeof *sql; i++) {
        sqlite3_stmt *s = NULL;
        rc = prep(db, sql[i], &s, err, errlen);
        if (!rc) {
            sqlite3_bind_text(s, 1, group_id, -1, SQLITE_STATIC);
            rc = md_step_done(db, s, err, errlen, "delete group");
            changes += sqlite3_changes(db->h);
        }
        sqlite3_finalize(s);
    }
    if (!rc && changes == 0)
        rc = md_errf(err, errlen, KP_GROUP_ID_NOT_FOUND, "Group %s not found", group_id);
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_groups_delete_matching(md_db *db, md_group_match_fn match, void *arg,
                              int64_t *deleted, char *err, size_t errlen)
{
    *deleted = 0;
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    /* Walk first, delete after: the ids are copied out of the read. */
    sqlite3_stmt *s = NULL;
    char **ids = NULL;
    size_t n = 0, cap = 0;
    rc = prep(db, "SELECT group_id FROM consumer_groups UNION "
                  "SELECT group_id FROM committed_offsets UNION "
                  "SELECT group_id FROM pending_txn_offsets", &s, err, errlen);
    int st = SQLITE_DONE;
    while (!rc && (st = sqlite3_step(s)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(s, 0);
        if (!id || !match(id, arg))
            continue;
        if (n == cap) {
            size_t c = cap ? 2 * cap : 16;
            char **v = realloc(ids, c * sizeof *v);
            if (!v)
                break;
            ids = v;
            cap = c;
        }
        if (!(ids[n] = strdup(id)))
            break;
        n++;
    }
    if (!rc && st != SQLITE_DONE)
        rc = st == SQLITE_ROW ? md_errf(err, errlen, MD_E_SQL, "out of memory")
                              : md_sqlerr(db, err, errlen, "list groups");
    sqlite3_finalize(s);
    for (size_t i = 0; !rc && i < n; i++) {
        rc = md_group_delete(db, ids[i], err, errlen);
        if (rc == KP_GROUP_ID_NOT_FOUND)
            rc = 0;
        else if (!rc)
            ++*deleted;
    }
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return md_txn_leave(db, t, rc, err, errlen);
}

static const char *col_text(sqlite3_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s, i);
}

/* Members of one group, read into arrays whose strings live until the
 * statement steps again; copied because two statements are in flight. */
struct member_rows {
    md_group_member *m;
    char **strs;
    size_t n, nstrs;
};

static char *dup_col(struct member_rows *mr, sqlite3_stmt *s, int i, bool blob)
{
    if (sqlite3_column_type(s, i) == SQLITE_NULL)
        return NULL;
    int len = sqlite3_column_bytes(s, i);
    const void *p = blob ? sqlite3_column_blob(s, i) : (const void *)sqlite3_column_text(s, i);
    char *d = malloc((size_t)len + 1);
    char **ns = realloc(mr->strs, (mr->nstrs + 1) * sizeof *ns);
    if (!d || !ns) {
        free(d);
        if (ns)
            mr->strs = ns;
        return NULL;
    }
    mr->strs = ns;
    if (len)
        memcpy(d, p, (size_t)len);
    d[len] = 0;
    mr->strs[mr->nstrs++] = d;
    return d;
}

static void member_rows_free(struct member_rows *mr)
{
    for (size_t i = 0; i < mr->nstrs; i++)
        free(mr->strs[i]);
    free(mr->strs);
    free(mr->m);
    memset(mr, 0, sizeof *mr);
}

static int load_members(md_db *db, sqlite3_stmt *ms, const char *group_id,
                        struct member_rows *mr)
{
    sqlite3_reset(ms);
    sqlite3_bind_text(ms, 1, group_id, -1, SQLITE_TRANSIENT);
    int rc;
    while ((rc = sqlite3_step(ms)) == SQLITE_ROW) {
        md_group_member *nm = realloc(mr->m, (mr->n + 1) * sizeof *nm);
        if (!nm)
            break;
        mr->m = nm;
        md_group_member *m = &mr->m[mr->n++];
        memset(m, 0, sizeof *m);
        m->member_id = dup_col(mr, ms, 0, false);
        m->instance_id = dup_col(mr, ms, 1, false);
        m->client_id = dup_col(mr, ms, 2, false);
        m->client_host = dup_col(mr, ms, 3, false);
        m->session_timeout_ms = sqlite3_column_int(ms, 4);
        m->rebalance_timeout_ms = sqlite3_column_int(ms, 5);
        m->subscription_len = sqlite3_column_type(ms, 6) == SQLITE_NULL ? -1
                              : sqlite3_column_bytes(ms, 6);
        m->subscription = dup_col(mr, ms, 6, true);
        m->assignment_len = sqlite3_column_type(ms, 7) == SQLITE_NULL ? -1
                            : sqlite3_column_bytes(ms, 7);
        m->assignment = dup_col(mr, ms, 7, true);
    }
    sqlite3_reset(ms);
    (void)db;
    return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : MD_E_SQL;
}

int md_group_foreach(md_db *db, md_group_fn fn, void *arg)
{
    sqlite3_stmt *gs = NULL, *ms = NULL;
    int rc = prep(db, "SELECT group_id, state, protocol_type, protocol, generation, "
                  "leader, state_changed_at FROM consumer_groups ORDER BY group_id",
                  &gs, NULL, 0);
    if (!rc)
        rc = prep(db, "SELECT member_id, instance_id, client_id, client_host, "
                  "session_timeout_ms, rebalance_timeout_ms, subscription, assignment "
                  "FROM group_members WHERE group_id = ?1 ORDER BY rowid", &ms, NULL, 0);
    int step = SQLITE_DONE;
    while (!rc && (step = sqlite3_step(gs)) == SQLITE_ROW) {
        struct member_rows mr = { 0 };
        md_group g = {
            .group_id = col_text(gs, 0),
            .state = col_text(gs, 1),
            .protocol_type = col_text(gs, 2),
            .protocol = col_text(gs, 3),
            .generation = sqlite3_column_int(gs, 4),
            .leader = col_text(gs, 5),
            .state_changed_at = sqlite3_column_int64(gs, 6),
        };
        rc = load_members(db, ms, g.group_id, &mr);
        if (!rc) {
            g.members = mr.m;
            g.nmembers = mr.n;
            rc = fn(&g, arg);
        }
        member_rows_free(&mr);
    }
    if (!rc && step != SQLITE_DONE && step != SQLITE_ROW)
        rc = MD_E_SQL;
    sqlite3_finalize(gs);
    sqlite3_finalize(ms);
    return rc;
}

int64_t md_group_offset_count(md_db *db, const char *group_id)
{
    sqlite3_stmt *s = NULL;
    if (prep(db, "SELECT count(*) FROM committed_offsets WHERE group_id = ?1", &s, NULL, 0))
        return MD_E_SQL;
    sqlite3_bind_text(s, 1, group_id, -1, SQLITE_STATIC);
    int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : MD_E_SQL;
    sqlite3_finalize(s);
    return n;
}

/* ---- offsets --------------------------------------------------------------- */

/* Binds one row to s (ST_OFFSET_UPDATE and ST_OFFSET_COMMIT share the
 * parameter numbers). */
static void bind_offset(sqlite3_stmt *s, const md_offset *o)
{
    sqlite3_bind_text(s, 1, o->group_len ? o->group_id : "", o->group_len, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, o->topic, o->topic_len, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, o->partition);
    sqlite3_bind_int64(s, 4, o->offset);
    sqlite3_bind_int(s, 5, o->leader_epoch);
    if (o->metadata && o->metadata_len > 0)
        sqlite3_bind_text(s, 6, o->metadata, o->metadata_len, SQLITE_STATIC);
    else
        sqlite3_bind_text(s, 6, "", 0, SQLITE_STATIC);
    sqlite3_bind_int64(s, 7, o->commit_time_ms);
    sqlite3_bind_int64(s, 8, o->expire_time_ms);
}

/* Most commits move an offset already stored: an UPDATE by primary key is
 * one b-tree seek (and no foreign-key check, the topic being unchanged),
 * where the upsert seeks for the INSERT's conflict first.  Only a row
 * that is not there yet goes through the INSERT. */
int md_offset_commit(md_db *db, md_offset *offs, size_t n, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *up, *ins, *del, *sup;
    if ((rc = md_stmt_lazy(db, ST_OFFSET_UPDATE, &up, err, errlen)) ||
        (rc = md_stmt_lazy(db, ST_OFFSET_COMMIT, &ins, err, errlen)) ||
        (rc = md_stmt_lazy(db, ST_OFFSET_DELETE, &del, err, errlen)) ||
        (rc = md_stmt_lazy(db, ST_TXN_OFFSET_SUPERSEDE, &sup, err, errlen)))
        return md_txn_leave(db, t, rc, err, errlen);
    for (size_t i = 0; !rc && i < n; i++) {
        md_offset *o = &offs[i];
        if (o->tombstone) {
            sqlite3_bind_text(del, 1, o->group_len ? o->group_id : "", o->group_len,
                              SQLITE_STATIC);
            sqlite3_bind_text(del, 2, o->topic, o->topic_len, SQLITE_STATIC);
            sqlite3_bind_int(del, 3, o->partition);
            rc = md_step_done(db, del, err, errlen, "delete offset");
            o->result = KP_NONE;
            continue;
        }
        if (o->txn) {
            rc = md_txn_offset_put(db, o, err, errlen);
            continue;
        }
        /* Written after any pending transactional offset of the partition:
         * their commit must not move this one back (txn_offsets.c T3). */
        sqlite3_bind_text(sup, 1, o->group_len ? o->group_id : "", o->group_len, SQLITE_STATIC);
        sqlite3_bind_text(sup, 2, o->topic, o->topic_len, SQLITE_STATIC);
        sqlite3_bind_int(sup, 3, o->partition);
        if ((rc = md_step_done(db, sup, err, errlen, "supersede pending offsets")))
            break;
        bind_offset(up, o);
        int sr = sqlite3_step(up);
        sqlite3_reset(up);
        if (sr == SQLITE_DONE && sqlite3_changes(db->h) == 1) {
            o->result = KP_NONE;
            continue;
        }
        if (sr != SQLITE_DONE) {
            rc = md_sqlerr(db, err, errlen, "commit offset");
            break;
        }
        bind_offset(ins, o);
        sr = sqlite3_step(ins);
        sqlite3_reset(ins);
        if (sr == SQLITE_DONE) {
            o->result = KP_NONE;
        } else if ((sr & 0xff) == SQLITE_CONSTRAINT) {
            /* The topic went away (foreign key) or the partition index is
             * impossible (CHECK): this row only; SQLite undid just this
             * statement and the transaction goes on. */
            o->result = KP_UNKNOWN_TOPIC_OR_PARTITION;
        } else {
            rc = md_sqlerr(db, err, errlen, "commit offset");
        }
    }
    return md_txn_leave(db, t, rc, err, errlen);
}

void md_committed_free(md_committed *c, size_t n)
{
    if (!c)
        return;
    for (size_t i = 0; i < n; i++) {
        free(c[i].topic);
        free(c[i].metadata);
    }
    free(c);
}

int md_committed_fill(sqlite3_stmt *s, void *elem)
{
    md_committed *c = elem;
    const char *tp = col_text(s, 0), *md = col_text(s, 4);
    c->topic = strdup(tp ? tp : "");
    c->partition = sqlite3_column_int(s, 1);
    c->offset = sqlite3_column_int64(s, 2);
    c->leader_epoch = sqlite3_column_int(s, 3);
    c->metadata = strdup(md ? md : "");
    c->commit_time_ms = sqlite3_column_int64(s, 5);
    return c->topic && c->metadata ? 0 : MD_E_SQL;
}

void md_committed_drop(void *v, size_t cnt)
{
    md_committed_free(v, cnt);
}

int md_offset_list(md_db *db, const char *group_id, size_t group_len,
                   md_committed **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s;
    if (md_stmt_lazy(db, ST_OFFSET_LIST, &s, NULL, 0))
        return MD_E_SQL;
    sqlite3_bind_text(s, 1, group_len ? group_id : "", (int)group_len, SQLITE_STATIC);
    return md_rows(s, sizeof **out, md_committed_fill, md_committed_drop, (void **)out, n);
}

int md_offsets_expire(md_db *db, int64_t now_ms, int64_t retention_ms,
                      md_expired_fn fn, void *arg, int64_t *expired, char *err, size_t errlen)
{
    *expired = 0;
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *s = NULL;
    rc = prep(db,
        "DELETE FROM committed_offsets AS o WHERE "
        "NOT EXISTS (SELECT 1 FROM consumer_groups g "
        "            WHERE g.group_id = o.group_id AND g.state <> 'Empty') "
        "AND CASE "
        "  WHEN o.expire_time_ms >= 0 THEN o.expire_time_ms <= ?1 "
        "  WHEN EXISTS (SELECT 1 FROM consumer_groups g WHERE g.group_id = o.group_id "
        "               AND coalesce(g.protocol_type, '') <> '') "
        "    THEN (SELECT g.state_changed_at FROM consumer_groups g "
        "          WHERE g.group_id = o.group_id) + ?2 <= ?1 "
        "  ELSE o.commit_time_ms + ?2 <= ?1 "
        "END RETURNING group_id, topic, partition", &s, err, errlen);
    if (!rc) {
        sqlite3_bind_int64(s, 1, now_ms);
        sqlite3_bind_int64(s, 2, retention_ms);
        int st;
        while ((st = sqlite3_step(s)) == SQLITE_ROW) {
            ++*expired;
            if (fn)
                fn((const char *)sqlite3_column_text(s, 0),
                   (const char *)sqlite3_column_text(s, 1), sqlite3_column_int(s, 2), arg);
        }
        if (st != SQLITE_DONE)
            rc = md_sqlerr(db, err, errlen, "expire offsets");
    }
    sqlite3_finalize(s);
    return md_txn_leave(db, t, rc, err, errlen);
}
