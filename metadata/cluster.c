/*
 * metadata/cluster.c — the ZooKeeper mirror's brokers and controller rows
 * (sql/migrations/0004; topics are mirrored by md_topic_mirror_put in
 * topics.c, beside the other topic writes).
 *
 * Design note.
 *
 * The mirror replaces what it knows whole: the set of live brokers is the
 * set of children of /brokers/ids at one moment, so md_brokers_mirror
 * takes all of them and writes one transaction; a broker row is never
 * deleted, only marked alive = 0, so an operator sees in SQL which broker
 * went away and when it last registered.
 *
 * Invariants:
 *   C1. After md_brokers_mirror, alive = 1 exactly for the ids passed.
 *   C2. The controller table has at most one row (id 0); no row means the
 *       database never mirrored a cluster (standalone).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metadata/md_internal.h"

static sqlite3_stmt *lazy(md_db *db, enum md_stmt which, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    return md_stmt_lazy(db, which, &s, err, errlen) ? NULL : s;
}

static void bind_opt_text(sqlite3_stmt *s, int i, const char *v)
{
    if (v && v[0])
        sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(s, i);
}

int md_brokers_mirror(md_db *db, const md_broker_row *live, size_t n,
                      char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        if (live[i].id < 0 || !live[i].host || live[i].port < 0 || live[i].port > 65535)
            return md_errf(err, errlen, KP_INVALID_REQUEST,
                           "broker %d: bad id, host or port", (int)live[i].id);
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    sqlite3_stmt *s = lazy(db, ST_BROKERS_MARK_DEAD, err, errlen);
    rc = s ? md_step_done(db, s, err, errlen, "mark brokers dead") : MD_E_SQL;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!(s = lazy(db, ST_BROKER_MIRROR, err, errlen))) {
            rc = MD_E_SQL;
            break;
        }
        sqlite3_bind_int(s, 1, live[i].id);
        sqlite3_bind_text(s, 2, live[i].host, -1, SQLITE_STATIC);
        sqlite3_bind_int(s, 3, live[i].port);
        bind_opt_text(s, 4, live[i].rack);
        bind_opt_text(s, 5, live[i].endpoints);
        sqlite3_bind_int64(s, 6, live[i].registered_at_ms);
        rc = md_step_done(db, s, err, errlen, "mirror broker");
    }
    return md_txn_leave(db, t, rc, err, errlen);
}

static void copy_col(sqlite3_stmt *s, int col, char *out, size_t cap)
{
    const char *v = (const char *)sqlite3_column_text(s, col);
    snprintf(out, cap, "%s", v ? v : "");
}

static int fill_broker(sqlite3_stmt *s, void *elem)
{
    md_broker *b = elem;
    b->id = sqlite3_column_int(s, 0);
    copy_col(s, 1, b->host, sizeof b->host);
    b->port = sqlite3_column_int(s, 2);
    copy_col(s, 3, b->rack, sizeof b->rack);
    copy_col(s, 4, b->endpoints, sizeof b->endpoints);
    b->registered_at_ms = sqlite3_column_int64(s, 5);
    b->alive = sqlite3_column_int(s, 6) != 0;
    return 0;
}

int md_broker_list(md_db *db, md_broker **out, size_t *n)
{
    void *v;
    int rc = md_rows(lazy(db, ST_BROKER_LIST, NULL, 0), sizeof **out, fill_broker,
                     NULL, &v, n);
    *out = v;
    return rc;
}

int md_controller_set(md_db *db, int32_t broker_id, int32_t epoch)
{
    if (broker_id < -1 || epoch < 0)
        return KP_INVALID_REQUEST;
    sqlite3_stmt *s = lazy(db, ST_CONTROLLER_SET, NULL, 0);
    if (!s)
        return MD_E_SQL;
    sqlite3_bind_int(s, 1, broker_id);
    sqlite3_bind_int(s, 2, epoch);
    sqlite3_bind_int64(s, 3, md_now_ms());
    return md_step_done(db, s, NULL, 0, "set controller");
}

int md_controller_get(md_db *db, int32_t *broker_id, int32_t *epoch)
{
    *broker_id = *epoch = -1;
    sqlite3_stmt *s = lazy(db, ST_CONTROLLER_GET, NULL, 0);
    if (!s)
        return MD_E_SQL;
    int step = sqlite3_step(s);
    if (step == SQLITE_ROW) {
        *broker_id = sqlite3_column_int(s, 0);
        *epoch = sqlite3_column_int(s, 1);
    }
    sqlite3_reset(s);
    return step == SQLITE_ROW || step == SQLITE_DONE ? 0 : MD_E_SQL;
}
