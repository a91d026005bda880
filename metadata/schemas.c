/*
 * metadata/schemas.c — the schema registry's mirror in SQLite
 * (sql/migrations/0009_schema_registry.sql): rows the registry
 * (daemon/registry/sr_mirror.c) writes, on the metadata sync worker, after
 * applying _schemas records — one row per change, so a registration costs
 * the same SQL at its first version and at its thousandth.  The statements
 * are db.c's cached ones (md_stmt_lazy).
 */
#include <string.h>

#include "metadata/md_internal.h"

int md_sr_clear(md_db *db, char *err, size_t errlen)
{
    static const char *const sql[] = { "DELETE FROM registry_versions",
                                       "DELETE FROM registry_schemas",
                                       "DELETE FROM registry_configs" };
    int t, rc = md_txn_enter(db, &t, err, errlen);
    if (rc)
        return rc;
    for (size_t i = 0; !rc && i < sizeof sql / sizeof *sql; i++)
        if (sqlite3_exec(db->h, sql[i], NULL, NULL, NULL) != SQLITE_OK)
            rc = md_sqlerr(db, err, errlen, sql[i]);
    return md_txn_leave(db, t, rc, err, errlen);
}

/* which, bound to (text, int, int, int) as far as given (NULL text: not
 * bound), run to its end. */
static int step(md_db *db, enum md_stmt which, const char *text, int a, int b, int c,
                int nints, char *err, size_t errlen, const char *what)
{
    sqlite3_stmt *s;
    int rc = md_stmt_lazy(db, which, &s, err, errlen);
    if (rc)
        return rc;
    int i = 1;
    if (text)
        sqlite3_bind_text(s, i++, text, -1, SQLITE_STATIC);
    int v[3] = { a, b, c };
    for (int k = 0; k < nints; k++)
        sqlite3_bind_int(s, i++, v[k]);
    return md_step_done(db, s, err, errlen, what);
}

int md_sr_version_put(md_db *db, const char *subject, int32_t version, int32_t schema_id,
                      bool deleted, char *err, size_t errlen)
{
    return step(db, ST_SR_VERSION_PUT, subject, version, schema_id, deleted, 3, err, errlen,
                "put a subject's version");
}

int md_sr_version_delete(md_db *db, const char *subject, int32_t version, char *err,
                         size_t errlen)
{
    return step(db, ST_SR_VERSION_DELETE, subject, version, 0, 0, 1, err, errlen,
                "delete a subject's version");
}

int md_sr_soft_delete(md_db *db, const char *subject, int32_t upto, char *err, size_t errlen)
{
    return step(db, ST_SR_SOFT_DELETE, subject, upto, 0, 0, 1, err, errlen,
                "soft-delete a subject's versions");
}

int md_sr_schema_put(md_db *db, int32_t id, const char *type, const char *schema,
                     const char *refs, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    int rc = md_stmt_lazy(db, ST_SR_SCHEMA_PUT, &s, err, errlen);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 1, id);
    sqlite3_bind_text(s, 2, type, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, schema, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, refs, -1, SQLITE_STATIC);
    return md_step_done(db, s, err, errlen, "put a schema");
}

int md_sr_schema_delete(md_db *db, int32_t id, char *err, size_t errlen)
{
    return step(db, ST_SR_SCHEMA_DELETE, NULL, id, 0, 0, 1, err, errlen, "delete a schema");
}

int md_sr_config_put(md_db *db, const char *subject, const char *compatibility,
                     const char *mode, char *err, size_t errlen)
{
    bool set = (compatibility && compatibility[0]) || (mode && mode[0]);
    sqlite3_stmt *s;
    int rc = md_stmt_lazy(db, set ? ST_SR_CONFIG_PUT : ST_SR_CONFIG_DELETE, &s, err, errlen);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, subject, -1, SQLITE_STATIC);
    if (set) {
        sqlite3_bind_text(s, 2, compatibility ? compatibility : "", -1, SQLITE_STATIC);
        sqlite3_bind_text(s, 3, mode ? mode : "", -1, SQLITE_STATIC);
    }
    return md_step_done(db, s, err, errlen, "put a subject's settings");
}
