/*
 * metadata/links.c — cluster links and mirror topics in SQLite
 * (sql/migrations/0011_cluster_links.sql), standalone's store of record for
 * daemon/link/link.c.  Writes are per SQL statement or per state change, and
 * the source log ends per timer: statements are prepared per call.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

static int step_done(md_db *db, sqlite3_stmt *s, char *err, size_t errlen, const char *what)
{
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : md_sqlerr(db, err, errlen, what);
    sqlite3_finalize(s);
    return rc;
}

/* Binds the texts (NULL binds NULL) to ?1..?n, i to ?n+1 when sql has it,
 * and runs sql. */
static int exec_texts(md_db *db, const char *sql, const char *const *v, int n, int64_t i,
                      char *err, size_t errlen)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, sql, -1, &s, NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "prepare a link statement");
    for (int k = 0; k < n; k++)
        sqlite3_bind_text(s, k + 1, v[k], -1, SQLITE_STATIC);
    if (sqlite3_bind_parameter_count(s) > n)
        sqlite3_bind_int64(s, n + 1, i);
    return step_done(db, s, err, errlen, sql);
}

static void copy_col(char *dst, size_t cap, sqlite3_stmt *s, int col)
{
    const char *t = (const char *)sqlite3_column_text(s, col);
    snprintf(dst, cap, "%s", t ? t : "");
}

int md_link_put(md_db *db, const md_link_row *l, int64_t now_ms, char *err, size_t errlen)
{
    const char *v[] = { l->name, l->bootstrap, l->config, l->secrets, l->state };
    return exec_texts(db, "INSERT INTO cluster_links (name, bootstrap_servers, config, secrets, "
                      "state, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", v, 5, now_ms,
                      err, errlen);
}

int md_link_delete(md_db *db, const char *name, char *err, size_t errlen)
{
    const char *v[] = { name };
    /* its synced ACLs stay, as local ones: nobody removes them now */
    return exec_texts(db, "DELETE FROM link_acls WHERE link = ?1", v, 1, 0, err, errlen) ||
           exec_texts(db, "DELETE FROM cluster_links WHERE name = ?1", v, 1, 0, err, errlen);
}

/* PRAGMA secure_delete set to v (0 off, 1 on, 2 fast); the value before,
 * or -1. */
static int pragma_secure_delete(md_db *db, int v)
{
    sqlite3_stmt *s;
    int was = -1;
    if (sqlite3_prepare_v2(db->h, "PRAGMA secure_delete", -1, &s, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(s) == SQLITE_ROW)
        was = sqlite3_column_int(s, 0);
    sqlite3_finalize(s);
    char sql[40];
    snprintf(sql, sizeof sql, "PRAGMA secure_delete = %d", v);
    if (was >= 0 && sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK)
        return -1;
    return was;
}

int md_link_secrets_set(md_db *db, const char *name, const char *secrets, char *err,
                        size_t errlen)
{
    const char *v[] = { name, secrets };
    /* The old value's bytes are zeroed in the page, not left in free space;
     * the connection's own setting (a build's default may be ON) is put
     * back after, not turned off. */
    int was = pragma_secure_delete(db, 1);
    if (was < 0)
        return md_sqlerr(db, err, errlen, "secure_delete");
    int rc = exec_texts(db, "UPDATE cluster_links SET secrets = ?2 WHERE name = ?1", v, 2, 0,
                        err, errlen);
    if (was != 1)
        pragma_secure_delete(db, was);
    return rc;
}

int md_link_settings_set(md_db *db, const md_link_row *l, char *err, size_t errlen)
{
    const char *v[] = { l->name, l->bootstrap, l->config, l->secrets };
    /* As md_link_secrets_set: the old sealed secrets zeroed in the page;
     * last_error goes with the old settings (the new connection tells). */
    int was = pragma_secure_delete(db, 1);
    if (was < 0)
        return md_sqlerr(db, err, errlen, "secure_delete");
    int rc = exec_texts(db, "UPDATE cluster_links SET bootstrap_servers = ?2, config = ?3, "
                        "secrets = ?4, last_error = NULL WHERE name = ?1", v, 4, 0, err,
                        errlen);
    if (was != 1)
        pragma_secure_delete(db, was);
    return rc;
}

int md_link_source_cluster_set(md_db *db, const char *name, const char *cluster_id, char *err,
                               size_t errlen)
{
    const char *v[] = { name, cluster_id };
    return exec_texts(db, "UPDATE cluster_links SET source_cluster_id = ?2 WHERE name = ?1", v,
                      2, 0, err, errlen);
}

int md_scrub_wal(md_db *db, char *err, size_t errlen)
{
    int log = -1, ck = -1;
    if (sqlite3_wal_checkpoint_v2(db->h, "main", SQLITE_CHECKPOINT_TRUNCATE, &log, &ck) !=
        SQLITE_OK)
        return md_sqlerr(db, err, errlen, "checkpoint (truncate) after sealing secrets");
    return 0;
}

int md_link_acl_mark(md_db *db, const char *link, const char *acl, bool synced, char *err,
                     size_t errlen)
{
    const char *v[] = { link, acl };
    return exec_texts(db, synced ? "INSERT OR IGNORE INTO link_acls (link, acl) VALUES (?1, ?2)"
                                 : "DELETE FROM link_acls WHERE link = ?1 AND acl = ?2",
                      v, 2, 0, err, errlen);
}

int md_link_acl_list(md_db *db, const char *link, char ***out, size_t *n, char *err,
                     size_t errlen)
{
    sqlite3_stmt *s;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT acl FROM link_acls WHERE link = ?1", -1, &s,
                           NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "prepare the list of a link's ACLs");
    sqlite3_bind_text(s, 1, link, -1, SQLITE_STATIC);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        if (*n == cap) {
            char **nv = realloc(*out, (cap = cap ? cap * 2 : 16) * sizeof *nv);
            if (!nv)
                break;
            *out = nv;
        }
        if (!((*out)[*n] = strdup((const char *)sqlite3_column_text(s, 0))))
            break;
        (*n)++;
    }
    if (rc != SQLITE_DONE) {
        rc = md_sqlerr(db, err, errlen, "list a link's ACLs");
        sqlite3_finalize(s);
        while (*n > 0)
            free((*out)[--*n]);
        free(*out);
        *out = NULL;
        return rc;
    }
    sqlite3_finalize(s);
    return 0;
}

int md_link_status(md_db *db, const char *name, const char *state, const char *last_error,
                   char *err, size_t errlen)
{
    const char *v[] = { name, state, last_error };
    return exec_texts(db, "UPDATE cluster_links SET state = ?2, last_error = ?3 "
                      "WHERE name = ?1", v, 3, 0, err, errlen);
}

int md_link_sync_status(md_db *db, const char *name, int64_t synced_at_ms, int32_t groups,
                        const char *sync_error, const char *topics_skipped, char *err,
                        size_t errlen)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, "UPDATE cluster_links SET offsets_synced_at = "
                           "coalesce(?2, offsets_synced_at), groups_synced = ?3, "
                           "sync_error = ?4, topics_skipped = ?5 WHERE name = ?1", -1, &s,
                           NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "prepare a link's sync status");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    if (synced_at_ms >= 0)
        sqlite3_bind_int64(s, 2, synced_at_ms);
    sqlite3_bind_int(s, 3, groups);
    sqlite3_bind_text(s, 4, sync_error, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, topics_skipped && *topics_skipped ? topics_skipped : NULL, -1,
                      SQLITE_STATIC);
    return step_done(db, s, err, errlen, "a link's sync status");
}

int md_link_list(md_db *db, md_link_row **out, size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT name, bootstrap_servers, config, secrets, state, "
                           "last_error, source_cluster_id FROM cluster_links ORDER BY name", -1, &s,
                           NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "list cluster links");
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        md_link_row *nr = realloc(*out, (*n + 1) * sizeof **out);
        if (!nr) {
            sqlite3_finalize(s);
            return md_errf(err, errlen, MD_E_SQL, "out of memory listing cluster links");
        }
        *out = nr;
        md_link_row *l = &nr[(*n)++];
        copy_col(l->name, sizeof l->name, s, 0);
        copy_col(l->bootstrap, sizeof l->bootstrap, s, 1);
        copy_col(l->config, sizeof l->config, s, 2);
        copy_col(l->secrets, sizeof l->secrets, s, 3);
        copy_col(l->state, sizeof l->state, s, 4);
        copy_col(l->last_error, sizeof l->last_error, s, 5);
        copy_col(l->source_cluster, sizeof l->source_cluster, s, 6);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : md_sqlerr(db, err, errlen, "list cluster links");
}

int md_mirror_put(md_db *db, const md_mirror_row *m, int64_t now_ms, char *err, size_t errlen)
{
    const char *v[] = { m->topic, m->link, m->source_topic, m->state };
    return exec_texts(db, "INSERT INTO mirror_topics (topic, link, source_topic, state, "
                      "created_at) VALUES (?1, ?2, ?3, ?4, ?5)", v, 4, now_ms, err, errlen);
}

int md_mirror_delete(md_db *db, const char *topic, char *err, size_t errlen)
{
    const char *v[] = { topic };
    int rc = exec_texts(db, "DELETE FROM mirror_partitions WHERE topic = ?1", v, 1,
                        0, err, errlen);
    return rc ? rc : exec_texts(db, "DELETE FROM mirror_topics WHERE topic = ?1",
                                v, 1, 0, err, errlen);
}

int md_mirror_status(md_db *db, const char *topic, const char *state, const char *last_error,
                     char *err, size_t errlen)
{
    const char *v[] = { topic, state, last_error };
    return exec_texts(db, "UPDATE mirror_topics SET state = ?2, last_error = ?3 "
                      "WHERE topic = ?1", v, 3, 0, err, errlen);
}

int md_mirror_list(md_db *db, md_mirror_row **out, size_t *n, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    *out = NULL;
    *n = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT topic, link, source_topic, state FROM mirror_topics "
                           "ORDER BY topic", -1, &s, NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "list mirror topics");
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
        md_mirror_row *nr = realloc(*out, (*n + 1) * sizeof **out);
        if (!nr) {
            sqlite3_finalize(s);
            return md_errf(err, errlen, MD_E_SQL, "out of memory listing mirror topics");
        }
        *out = nr;
        md_mirror_row *m = &nr[(*n)++];
        copy_col(m->topic, sizeof m->topic, s, 0);
        copy_col(m->link, sizeof m->link, s, 1);
        copy_col(m->source_topic, sizeof m->source_topic, s, 2);
        copy_col(m->state, sizeof m->state, s, 3);
    }
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : md_sqlerr(db, err, errlen, "list mirror topics");
}

int md_mirror_source_ends(md_db *db, const char *topic, const int64_t *ends,
                          const int64_t *caught_up, int32_t n, int64_t now_ms, char *err,
                          size_t errlen)
{
    sqlite3_stmt *s;
    int t, rc = md_txn_enter(db, &t, err, errlen);
    if (rc)
        return rc;
    if (sqlite3_prepare_v2(db->h, "INSERT INTO mirror_partitions (topic, partition, source_end, "
                           "caught_up_at, updated_at) VALUES (?1, ?2, ?3, ?5, ?4) "
                           "ON CONFLICT (topic, partition) DO UPDATE SET "
                           "source_end = excluded.source_end, caught_up_at = excluded.caught_up_at, "
                           "updated_at = excluded.updated_at", -1, &s, NULL) != SQLITE_OK)
        return md_txn_leave(db, t, md_sqlerr(db, err, errlen, "prepare mirror ends"), err,
                            errlen);
    for (int32_t i = 0; !rc && i < n; i++) {
        if (ends[i] < 0)
            continue;                    /* not fetched yet */
        sqlite3_bind_text(s, 1, topic, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, i);
        sqlite3_bind_int64(s, 3, ends[i]);
        sqlite3_bind_int64(s, 4, now_ms);
        if (caught_up[i] >= 0)
            sqlite3_bind_int64(s, 5, caught_up[i]);
        else
            sqlite3_bind_null(s, 5);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = md_sqlerr(db, err, errlen, "save mirror ends");
        sqlite3_reset(s);
    }
    sqlite3_finalize(s);
    return md_txn_leave(db, t, rc, err, errlen);
}
