/*
 * tests/unit/unit_md.h — helpers of the metadata unit tests: one integer
 * from a query on a handle's connection, and a partition state as text.
 */
#ifndef SLUICE_UNIT_MD_H
#define SLUICE_UNIT_MD_H

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>

#include "metadata/md.h"

static inline int64_t unit_query_int(md_db *db, const char *sql)
{
    sqlite3_stmt *s;
    ck_assert_int_eq(sqlite3_prepare_v2(md_sqlite(db), sql, -1, &s, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(s), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    return v;
}

/* "leader L epoch E replicas 2,1,3 isr 2,3" — one comparison per state. */
static inline const char *unit_state_text(const md_partition_state *st, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "leader %d epoch %d replicas ", (int)st->leader,
                                (int)st->leader_epoch);
    for (int32_t i = 0; i < st->nreplicas && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? "," : "", (int)st->replicas[i]);
    if (k < len)
        k += (size_t)snprintf(buf + k, len - k, " isr ");
    for (int32_t i = 0; i < st->nisr && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%d", i ? "," : "", (int)st->isr[i]);
    return buf;
}

#endif
