/*
 * metadata/producers.c — producer ids for InitProducerId.
 *
 * One row (producer_ids, sql/schema.sql) holds the next id never handed
 * out.  The broker takes ids in blocks (daemon/api/api_producer_id.c), so a
 * busy cluster of short-lived producers costs one SQLite write per block,
 * not per producer.  An id is never handed out twice, even across a crash:
 * the block is durable before its first id leaves the broker; a crash
 * only skips the rest of the block (ids are INT64, nothing is short).
 */
#include "metadata/md_internal.h"

int md_producer_id_allocate(md_db *db, int64_t count, int64_t *first,
                            char *err, size_t errlen)
{
    if (count < 1)
        return md_errf(err, errlen, MD_E_SQL, "producer id block of %lld", (long long)count);
    int t, rc = md_txn_enter(db, &t, err, errlen);
    if (rc)
        return rc;
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db->h, "UPDATE producer_ids SET next_producer_id = "
                           "next_producer_id + ?1 WHERE id = 0 "
                           "RETURNING next_producer_id - ?1", -1, &s, NULL) != SQLITE_OK) {
        rc = md_sqlerr(db, err, errlen, "prepare producer id allocation");
    } else {
        sqlite3_bind_int64(s, 1, count);
        if (sqlite3_step(s) == SQLITE_ROW) {
            *first = sqlite3_column_int64(s, 0);
            rc = sqlite3_step(s) == SQLITE_DONE ? 0
                 : md_sqlerr(db, err, errlen, "allocate producer ids");
        } else {
            rc = md_sqlerr(db, err, errlen, "allocate producer ids");
        }
    }
    sqlite3_finalize(s);
    return md_txn_leave(db, t, rc, err, errlen);
}

int md_producer_id_floor(md_db *db, int64_t floor, char *err, size_t errlen)
{
    sqlite3_stmt *s = NULL;
    int rc = 0;
    if (sqlite3_prepare_v2(db->h, "UPDATE producer_ids SET next_producer_id = "
                           "MAX(next_producer_id, ?1) WHERE id = 0", -1, &s, NULL) != SQLITE_OK) {
        rc = md_sqlerr(db, err, errlen, "prepare producer id floor");
    } else {
        sqlite3_bind_int64(s, 1, floor);
        if (sqlite3_step(s) != SQLITE_DONE)
            rc = md_sqlerr(db, err, errlen, "raise the producer id floor");
    }
    sqlite3_finalize(s);
    return rc;
}
