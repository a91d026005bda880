/*
 * metadata/schemas.c — the schema registry's mirror in SQLite
 * (sql/migrations/0009_schema_registry.sql): rows the registry
 * (daemon/registry/sr_mirror.c) writes after applying _schemas records.
 * Registry writes are rare (a registration, a deletion): statements are
 * prepared per call rather than cached.
 */
#include <string.h>

#include "metadata/md_internal.h"

static int run(md_db *db, const char *sql, sqlite3_stmt **s, char *err, size_t errlen)
{
    if (sqlite3_prepare_v2(db->h, sql, -1, s, NULL) != SQLITE_OK) {
        *s = NULL;
        return md_sqlerr(db, err, errlen, "prepare a registry statement");
    }
    return 0;
}

/* Steps s to its end and finalizes it.  0 or MD_E_SQL. */
static int done(md_db *db, sqlite3_stmt *s, char *err, size_t errlen, const char *what)
{
    int rc = sqlite3_step(s) == SQLITE_DONE ? 0 : md_sqlerr(db, err, errlen, what);
    sqlite3_finalize(s);
    return rc;
}

static int exec(md_db *db, const char *sql, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    int rc = run(db, sql, &s, err, errlen);
    return rc ? rc : done(db, s, err, errlen, sql);
}

int md_sr_clear(md_db *db, char *err, size_t errlen)
{
    int t, rc = md_txn_enter(db, &t, err, errlen);
    if (rc)
        return rc;
    rc = exec(db, "DELETE FROM registry_versions", err, errlen);
    if (!rc)
        rc = exec(db, "DELETE FROM registry_schemas", err, errlen);
    if (!rc)
        rc = exec(db, "DELETE FROM registry_configs", err, errlen);
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_sr_subject_put(md_db *db, const char *subject, const md_sr_version *v, size_t nv,
                      const char *compatibility, const char *mode, char *err, size_t errlen)
{
    int t, rc = md_txn_enter(db, &t, err, errlen);
    sqlite3_stmt *s;
    if (rc)
        return rc;
    if (!(rc = run(db, "DELETE FROM registry_versions WHERE subject = ?1", &s, err, errlen))) {
        sqlite3_bind_text(s, 1, subject, -1, SQLITE_STATIC);
        rc = done(db, s, err, errlen, "clear a subject's versions");
    }
    for (size_t i = 0; !rc && i < nv; i++) {
        if ((rc = run(db, "INSERT INTO registry_versions (subject, version, schema_id, deleted) "
                      "VALUES (?1, ?2, ?3, ?4)", &s, err, errlen)))
            break;
        sqlite3_bind_text(s, 1, subject, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 2, v[i].version);
        sqlite3_bind_int(s, 3, v[i].schema_id);
        sqlite3_bind_int(s, 4, v[i].deleted);
        rc = done(db, s, err, errlen, "put a subject's version");
    }
    bool set = (compatibility && compatibility[0]) || (mode && mode[0]);
    if (!rc && !(rc = run(db, set ? "INSERT OR REPLACE INTO registry_configs (subject, "
                          "compatibility, mode) VALUES (?1, nullif(?2, ''), nullif(?3, ''))"
                          : "DELETE FROM registry_configs WHERE subject = ?1", &s, err,
                          errlen))) {
        sqlite3_bind_text(s, 1, subject, -1, SQLITE_STATIC);
        if (set) {
            sqlite3_bind_text(s, 2, compatibility ? compatibility : "", -1, SQLITE_STATIC);
            sqlite3_bind_text(s, 3, mode ? mode : "", -1, SQLITE_STATIC);
        }
        rc = done(db, s, err, errlen, "put a subject's settings");
    }
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_sr_schema_put(md_db *db, int32_t id, const char *type, const char *schema,
                     const char *refs, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    int rc = run(db, "INSERT OR REPLACE INTO registry_schemas (id, schema_type, schema, refs) "
                 "VALUES (?1, ?2, ?3, ?4)", &s, err, errlen);
    if (rc)
        return rc;
    sqlite3_bind_int(s, 1, id);
    sqlite3_bind_text(s, 2, type, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 3, schema, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, refs, -1, SQLITE_STATIC);
    return done(db, s, err, errlen, "put a schema");
}

int md_sr_schemas_prune(md_db *db, char *err, size_t errlen)
{
    return exec(db, "DELETE FROM registry_schemas WHERE id NOT IN "
                "(SELECT schema_id FROM registry_versions)", err, errlen);
}
