/*
 * metadata/txn_offsets.c — offsets committed inside a transaction
 * (TxnOffsetCommit), pending until the transaction ends
 * (sql/migrations/0007_txn_offsets.sql).
 *
 * Design note.  The group coordinator writes them through its jobs on the
 * metadata sync worker, as it writes ordinary commits (md_offset_commit
 * with md_offset.txn set), so a TxnOffsetCommit is answered only once its
 * rows are durable.  The transaction's end (daemon/group/group_txn.c,
 * gc_txn_complete) completes them in one statement pair per group: a
 * commit upserts them into committed_offsets, then both commit and abort
 * delete them.  Nothing else reads or writes them, so what SQL's
 * committed_offsets and lag show is only ever committed.
 *
 * Invariants:
 *   T1. A (group, topic, partition, producer) has at most one pending row:
 *       the newest TxnOffsetCommit of that transaction (Kafka keeps the
 *       last one too).
 *   T3. A commit never moves a committed offset back: a pending row an
 *       ordinary commit wrote over after it (superseded, 0008) is dropped,
 *       not copied, as Kafka keeps the later write (GroupMetadata
 *       onTxnOffsetCommitCompleted's olderThan).
 *   T2. Completing deletes the producer's rows of the completed groups in
 *       the same savepoint that (for a commit) copies them, so a retried
 *       completion changes nothing.
 */
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

int md_txn_offset_put(md_db *db, md_offset *o, char *err, size_t errlen)
{
    sqlite3_stmt *s;
    int rc = md_stmt_lazy(db, ST_TXN_OFFSET_PUT, &s, err, errlen);
    if (rc)
        return rc;
    sqlite3_bind_text(s, 1, o->group_len ? o->group_id : "", o->group_len, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, o->topic, o->topic_len, SQLITE_STATIC);
    sqlite3_bind_int(s, 3, o->partition);
    sqlite3_bind_int64(s, 4, o->producer_id);
    sqlite3_bind_int(s, 5, o->producer_epoch);
    sqlite3_bind_int64(s, 6, o->offset);
    sqlite3_bind_int(s, 7, o->leader_epoch);
    sqlite3_bind_text(s, 8, o->metadata && o->metadata_len > 0 ? o->metadata : "",
                      o->metadata && o->metadata_len > 0 ? o->metadata_len : 0, SQLITE_STATIC);
    sqlite3_bind_int64(s, 9, o->commit_time_ms);
    int sr = sqlite3_step(s);
    sqlite3_reset(s);
    o->result = KP_NONE;
    if (sr == SQLITE_DONE)
        return 0;
    if ((sr & 0xff) == SQLITE_CONSTRAINT) {   /* as md_offset_commit: this row only */
        o->result = KP_UNKNOWN_TOPIC_OR_PARTITION;
        return 0;
    }
    return md_sqlerr(db, err, errlen, "store a transaction's offset");
}

/* The distinct groups with rows of producer_id that match accepts. */
static int completed_groups(md_db *db, int64_t producer_id, md_group_match_fn match,
                            void *arg, char ***ids, size_t *n, char *err, size_t errlen)
{
    *ids = NULL;
    *n = 0;
    sqlite3_stmt *s;
    int rc = prep(db, "SELECT DISTINCT group_id FROM pending_txn_offsets "
                      "WHERE producer_id = ?1", &s, err, errlen);
    if (rc)
        return rc;
    sqlite3_bind_int64(s, 1, producer_id);
    size_t cap = 0;
    int st;
    while (!rc && (st = sqlite3_step(s)) == SQLITE_ROW) {
        const char *id = (const char *)sqlite3_column_text(s, 0);
        if (!id || (match && !match(id, arg)))
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 8;
            char **v = realloc(*ids, cap * sizeof *v);
            if (!v) {
                rc = md_errf(err, errlen, MD_E_SQL, "out of memory");
                break;
            }
            *ids = v;
        }
        if (!((*ids)[*n] = strdup(id)))
            rc = md_errf(err, errlen, MD_E_SQL, "out of memory");
        else
            ++*n;
    }
    if (!rc && st != SQLITE_DONE)
        rc = md_sqlerr(db, err, errlen, "list a transaction's offsets");
    sqlite3_finalize(s);
    return rc;
}

int md_txn_offsets_complete(md_db *db, int64_t producer_id, bool commit,
                            md_group_match_fn match, void *arg, int64_t *moved,
                            char *err, size_t errlen)
{
    *moved = 0;
    int t, rc;
    if ((rc = md_txn_enter(db, &t, err, errlen)))
        return rc;
    char **ids = NULL;
    size_t n = 0;
    rc = completed_groups(db, producer_id, match, arg, &ids, &n, err, errlen);
    /* "WHERE true" keeps SQLite from reading ON CONFLICT as a join's ON. */
    static const char *const sql[] = {
        "INSERT INTO committed_offsets (group_id, topic, partition, offset, leader_epoch, "
        "metadata, commit_time_ms, expire_time_ms) "
        "SELECT group_id, topic, partition, offset, leader_epoch, metadata, commit_time_ms, -1 "
        "FROM pending_txn_offsets WHERE producer_id = ?1 AND group_id = ?2 AND superseded = 0 AND true "
        "ON CONFLICT (group_id, topic, partition) DO UPDATE SET "
        "offset = excluded.offset, leader_epoch = excluded.leader_epoch, "
        "metadata = excluded.metadata, commit_time_ms = excluded.commit_time_ms, "
        "expire_time_ms = excluded.expire_time_ms",
        "DELETE FROM pending_txn_offsets WHERE producer_id = ?1 AND group_id = ?2",
    };
    for (size_t k = commit ? 0 : 1; !rc && k < 2; k++) {
        sqlite3_stmt *s;
        if ((rc = prep(db, sql[k], &s, err, errlen)))
            break;
        for (size_t i = 0; !rc && i < n; i++) {
            sqlite3_bind_int64(s, 1, producer_id);
            sqlite3_bind_text(s, 2, ids[i], -1, SQLITE_STATIC);
            rc = md_step_done(db, s, err, errlen, "complete a transaction's offsets");
            if (k == 1)
                *moved += sqlite3_changes(db->h);
        }
        sqlite3_finalize(s);
    }
    for (size_t i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_txn_offsets_pending(md_db *db, const char *group_id, size_t group_len,
                           md_committed **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s;
    if (prep(db, "SELECT topic, partition, max(offset), -1, '', max(commit_time_ms) "
                 "FROM pending_txn_offsets WHERE group_id = ?1 "
                 "GROUP BY topic, partition ORDER BY topic, partition", &s, NULL, 0))
        return MD_E_SQL;
    sqlite3_bind_text(s, 1, group_len ? group_id : "", (int)group_len, SQLITE_STATIC);
    int rc = md_rows(s, sizeof **out, md_committed_fill, md_committed_drop, (void **)out, n);
    sqlite3_finalize(s);
    return rc;
}

void md_txn_offsets_free(md_offset *o, size_t n)
{
    for (size_t i = 0; o && i < n; i++) {
        free((char *)o[i].group_id);
        free((char *)o[i].topic);
        free((char *)o[i].metadata);
    }
    free(o);
}

static void txn_offsets_drop(void *v, size_t cnt)
{
    md_txn_offsets_free(v, cnt);
}

static int txn_offset_fill(sqlite3_stmt *s, void *elem)
{
    md_offset *o = elem;
    const char *g = (const char *)sqlite3_column_text(s, 0);
    const char *t = (const char *)sqlite3_column_text(s, 1);
    const char *md = (const char *)sqlite3_column_text(s, 6);
    *o = (md_offset){
        .group_id = strdup(g ? g : ""), .topic = strdup(t ? t : ""),
        .metadata = strdup(md ? md : ""),
        .partition = sqlite3_column_int(s, 2), .producer_id = sqlite3_column_int64(s, 3),
        .producer_epoch = (int16_t)sqlite3_column_int(s, 4),
        .offset = sqlite3_column_int64(s, 5), .leader_epoch = sqlite3_column_int(s, 7),
        .commit_time_ms = sqlite3_column_int64(s, 8), .expire_time_ms = -1, .txn = true,
    };
    if (!o->group_id || !o->topic || !o->metadata)
        return MD_E_SQL;
    o->group_len = (int32_t)strlen(o->group_id);
    o->topic_len = (int32_t)strlen(o->topic);
    o->metadata_len = (int32_t)strlen(o->metadata);
    return 0;
}

int md_txn_offsets_of(md_db *db, int64_t producer_id, md_offset **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    sqlite3_stmt *s;
    if (prep(db, "SELECT group_id, topic, partition, producer_id, producer_epoch, offset, "
                 "metadata, leader_epoch, commit_time_ms FROM pending_txn_offsets "
                 "WHERE producer_id = ?1 ORDER BY group_id, topic, partition", &s, NULL, 0))
        return MD_E_SQL;
    sqlite3_bind_int64(s, 1, producer_id);
    int rc = md_rows(s, sizeof **out, txn_offset_fill, txn_offsets_drop, (void **)out, n);
    sqlite3_finalize(s);
    return rc;
}
