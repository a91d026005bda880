/*
 * metadata/users.c — SASL/SCRAM credentials in the users table
 * (sql/schema.sql): salt, iterations, stored key and server key per user
 * and mechanism, never a password.  The SQL surface hides the key columns
 * (admin/sql_surface.c); only the broker's own handle reads them, here.
 *
 * Statements are prepared per call, as broker_configs.c does: a login or
 * an admin change is one call, far off the per-message path.
 */
#include "metadata/md_internal.h"

#include <stdio.h>
#include <string.h>

static int blob(sqlite3_stmt *s, int col, uint8_t *out, size_t cap, size_t *len)
{
    int n = sqlite3_column_bytes(s, col);
    if (n < 0 || (size_t)n > cap)
        return -1;
    memcpy(out, sqlite3_column_blob(s, col), (size_t)n);
    *len = (size_t)n;
    return 0;
}

/* sql prepared with ?1 = name and ?2 = mechanism (when not NULL). */
static int prepare(md_db *db, const char *sql, const char *name, const char *mechanism,
                   sqlite3_stmt **s)
{
    if (sqlite3_prepare_v2(db->h, sql, -1, s, NULL) != SQLITE_OK)
        return MD_E_SQL;
    sqlite3_bind_text(*s, 1, name, -1, SQLITE_STATIC);
    if (mechanism)
        sqlite3_bind_text(*s, 2, mechanism, -1, SQLITE_STATIC);
    return 0;
}

int md_user_get(md_db *db, const char *name, const char *mechanism, md_scram_cred *out)
{
    sqlite3_stmt *s;
    if (prepare(db, "SELECT salt, iterations, stored_key, server_key, created_at "
                "FROM users WHERE name = ?1 AND mechanism = ?2", name, mechanism, &s))
        return MD_E_SQL;
    int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) {
        rc = 1;
    } else if (rc == SQLITE_ROW) {
        size_t kl2 = 0;
        memset(out, 0, sizeof *out);
        snprintf(out->mechanism, sizeof out->mechanism, "%s", mechanism);
        out->iterations = sqlite3_column_int(s, 1);
        out->created_at = sqlite3_column_int64(s, 4);
        rc = blob(s, 0, out->salt, sizeof out->salt, &out->salt_len) ||
             blob(s, 2, out->stored_key, sizeof out->stored_key, &out->key_len) ||
             blob(s, 3, out->server_key, sizeof out->server_key, &kl2) ||
             kl2 != out->key_len ? MD_E_SQL : 0;
    } else {
        rc = MD_E_SQL;
    }
    sqlite3_finalize(s);
    return rc;
}

int md_user_upsert(md_db *db, const char *name, const md_scram_cred *c,
                   char *err, size_t errlen)
{
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, "INSERT OR REPLACE INTO users (name, mechanism, salt, "
                           "iterations, stored_key, server_key, created_at) "
                           "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)", -1, &s, NULL) != SQLITE_OK)
        return md_sqlerr(db, err, errlen, "prepare user upsert");
    sqlite3_bind_text(s, 1, name, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, c->mechanism, -1, SQLITE_STATIC);
    sqlite3_bind_blob(s, 3, c->salt, (int)c->salt_len, SQLITE_STATIC);
    sqlite3_bind_int(s, 4, c->iterations);
    sqlite3_bind_blob(s, 5, c->stored_key, (int)c->key_len, SQLITE_STATIC);
    sqlite3_bind_blob(s, 6, c->server_key, (int)c->key_len, SQLITE_STATIC);
    sqlite3_bind_int64(s, 7, c->created_at);
    int rc = md_step_done(db, s, err, errlen, "store user credential");
    sqlite3_finalize(s);
    return rc;
}

int md_user_delete(md_db *db, const char *name, const char *mechanism, bool *deleted,
                   char *err, size_t errlen)
{
    sqlite3_stmt *s;
    *deleted = false;
    if (prepare(db, "DELETE FROM users WHERE name = ?1 AND mechanism = ?2", name, mechanism,
                &s))
        return md_sqlerr(db, err, errlen, "prepare user delete");
    int rc = md_step_done(db, s, err, errlen, "delete user credential");
    if (!rc)
        *deleted = sqlite3_changes(db->h) > 0;
    sqlite3_finalize(s);
    return rc;
}

int md_user_list(md_db *db, const char *name, md_user_fn fn, void *arg)
{
    sqlite3_stmt *s;
    if (prepare(db, "SELECT name, mechanism, iterations FROM users "
                "WHERE ?1 IS NULL OR name = ?1 ORDER BY name, mechanism", name, NULL, &s))
        return MD_E_SQL;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW)
        fn(arg, (const char *)sqlite3_column_text(s, 0),
           (const char *)sqlite3_column_text(s, 1), sqlite3_column_int(s, 2));
    sqlite3_finalize(s);
    return rc == SQLITE_DONE ? 0 : MD_E_SQL;
}
