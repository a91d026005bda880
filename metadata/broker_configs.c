/*
 * metadata/broker_configs.c — the dynamic broker configs table
 * (sql/migrations/0005_broker_configs.sql): one set of (name, value) per
 * broker resource, '' for the cluster-wide default.  Validating names and
 * values is the caller's (daemon/view/view_broker_configs.c): this file stores what
 * it is given.
 *
 * Invariant:
 *   B1. md_broker_configs_replace swaps a resource's whole set in one
 *       transaction: a reader sees the old set or the new one.
 */
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

int md_broker_configs(md_db *db, const char *broker, md_kv **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s;
    if (sqlite3_prepare_v2(db->h, "SELECT name, value FROM broker_configs WHERE broker = ?1 "
                           "ORDER BY name", -1, &s, NULL) != SQLITE_OK)
        return MD_E_SQL;
    sqlite3_bind_text(s, 1, broker, -1, SQLITE_STATIC);
    void *v = NULL;
    int rc = md_rows(s, sizeof **out, md_kv_fill, md_kv_drop, &v, n);
    sqlite3_finalize(s);
    *out = v;
    return rc;
}

int md_broker_configs_replace(md_db *db, const char *broker, const md_kv *kv, size_t n,
                              char *err, size_t errlen)
{
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *del = NULL, *ins = NULL;
    if (sqlite3_prepare_v2(db->h, "DELETE FROM broker_configs WHERE broker = ?1", -1, &del,
                           NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db->h, "INSERT INTO broker_configs (broker, name, value) "
                           "VALUES (?1, ?2, ?3)", -1, &ins, NULL) != SQLITE_OK) {
        rc = md_sqlerr(db, err, errlen, "prepare broker configs");
    } else {
        sqlite3_bind_text(del, 1, broker, -1, SQLITE_STATIC);
        rc = md_step_done(db, del, err, errlen, "clear broker configs");
        for (size_t i = 0; !rc && i < n; i++) {
            sqlite3_bind_text(ins, 1, broker, -1, SQLITE_STATIC);
            sqlite3_bind_text(ins, 2, kv[i].name, -1, SQLITE_STATIC);
            sqlite3_bind_text(ins, 3, kv[i].value, -1, SQLITE_STATIC);
            rc = md_step_done(db, ins, err, errlen, "store broker config");
        }
    }
    sqlite3_finalize(del);
    sqlite3_finalize(ins);
    return md_txn_leave(db, t, rc, err, errlen);
}
