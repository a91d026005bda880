/*
 * metadata/acls.c — the acls table (sql/schema.sql): one row per ACL, with
 * Kafka's enum names as text.  The authorizer (daemon/security/sec_authz.c) keeps the
 * table in memory and checks requests there; this file only stores and
 * lists rows, and validates nothing beyond what the table's CHECKs do.
 *
 * Invariants:
 *   A1. md_acl_change applies its removals and additions in one
 *       transaction: a reader sees the whole change or none of it.
 *       md_acl_replace swaps the whole table the same way.
 *   A2. Adding an ACL that is stored already is no change (the table's
 *       UNIQUE key; Kafka's CreateAcls of an existing ACL succeeds too).
 */
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

#define ACL_COLS "resource_type, resource_name, pattern_type, principal, host, " \
                 "operation, permission"

static int acl_fill(sqlite3_stmt *s, void *elem)
{
    md_acl *a = elem;
    char **f[] = { &a->resource_type, &a->resource_name, &a->pattern_type, &a->principal,
                   &a->host, &a->operation, &a->permission };
    for (int i = 0; i < 7; i++)
        if (!(*f[i] = strdup((const char *)sqlite3_column_text(s, i))))
            return MD_E_SQL;
    return 0;
}

static void acl_drop(void *v, size_t cnt)
{
    md_acl_free(v, cnt);
}

void md_acl_free(md_acl *a, size_t n)
{
    for (size_t i = 0; a && i < n; i++) {
        free(a[i].resource_type);
        free(a[i].resource_name);
        free(a[i].pattern_type);
        free(a[i].principal);
        free(a[i].host);
        free(a[i].operation);
        free(a[i].permission);
    }
    free(a);
}

int md_acl_list(md_db *db, md_acl **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, "SELECT " ACL_COLS " FROM acls ORDER BY id", -1, &s,
                           NULL) != SQLITE_OK)
        return MD_E_SQL;
    void *v = NULL;
    int rc = md_rows(s, sizeof **out, acl_fill, acl_drop, &v, n);
    sqlite3_finalize(s);
    *out = v;
    return rc;
}

static void acl_bind(sqlite3_stmt *s, const md_acl *a)
{
    const char *f[] = { a->resource_type, a->resource_name, a->pattern_type, a->principal,
                        a->host, a->operation, a->permission };
    for (int i = 0; i < 7; i++)
        sqlite3_bind_text(s, i + 1, f[i], -1, SQLITE_STATIC);
}

int md_acl_change(md_db *db, const md_acl *del, size_t ndel, const md_acl *add, size_t nadd,
                  char *err, size_t errlen)
{
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *ds = NULL, *is = NULL;
    if (sqlite3_prepare_v2(db->h, "DELETE FROM acls WHERE resource_type = ?1 AND "
                           "resource_name = ?2 AND pattern_type = ?3 AND principal = ?4 AND "
                           "host = ?5 AND operation = ?6 AND permission = ?7", -1, &ds,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->h, "INSERT OR IGNORE INTO acls (" ACL_COLS ") VALUES "
                           "(?1, ?2, ?3, ?4, ?5, ?6, ?7)", -1, &is, NULL) != SQLITE_OK) {
        rc = md_sqlerr(db, err, errlen, "prepare acls");
    } else {
        for (size_t i = 0; !rc && i < ndel; i++) {
            acl_bind(ds, &del[i]);
            rc = md_step_done(db, ds, err, errlen, "delete acl");
        }
        for (size_t i = 0; !rc && i < nadd; i++) {         /* A2 */
            acl_bind(is, &add[i]);
            rc = md_step_done(db, is, err, errlen, "store acl");
        }
    }
    sqlite3_finalize(ds);
    sqlite3_finalize(is);
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_acl_replace(md_db *db, const md_acl *acls, size_t n, char *err, size_t errlen)
{
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    if (sqlite3_exec(db->h, "DELETE FROM acls", NULL, NULL, NULL) != SQLITE_OK)
        rc = md_sqlerr(db, err, errlen, "clear acls");
    if (!rc)
        rc = md_acl_change(db, NULL, 0, acls, n, err, errlen);       /* a savepoint inside */
    return md_txn_leave(db, t, rc, err, errlen);
}
