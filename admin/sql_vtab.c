/*
 * admin/sql_vtab.c — the small virtual tables behind the views:
 *
 *   sluice_partition_state   live numbers per partition, from the
 *                            statement's snapshot (sq_conn_snap); lookups by
 *                            (topic, partition) are a binary search, so the
 *                            views can join it per row
 *   sluice_partition_merged  the same columns for every row of
 *                            main.local_logs: the live numbers if the
 *                            snapshot has the partition, else the stored
 *                            ones.  Built once per statement (one scan of
 *                            main.local_logs), then point lookups:
 *                            consumer_lag's high watermark for each
 *                            committed offset without a B-tree search of
 *                            main.partitions per offset
 *   sluice_config_defs       every topic config Sluice knows: Kafka's
 *                            default and the broker-level value if set
 *   sluice_assignment(blob)  a ConsumerProtocol assignment decoded to
 *                            (topic, partition) rows
 *   sluice_producers         each local partition's producers (idempotent
 *                            and transactional), from the snapshot
 *   sluice_transactions      the transactional ids this broker coordinates
 *                            (daemon/txn/txn_ops.c), from the snapshot
 *
 * All six are eponymous (no CREATE VIRTUAL TABLE needed, so they work on
 * a read-only connection) and read-only.  Also here: the snapshot object.
 *
 * Lookups by (topic, partition) first try the row after the previous
 * answer: a join driven by a scan in (…, topic, partition) order — such as
 * committed_offsets' primary key (group_id, topic, partition) — asks for
 * the partitions in order, so nearly every lookup costs one comparison.
 */
#include "admin/sql_surface.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

/* ---- snapshots ----------------------------------------------------------------- */
sq_snap *sq_snap_new(size_t n, size_t pool_bytes)
{
    sq_snap *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->rows = calloc(n ? n : 1, sizeof *s->rows);
    s->pool = malloc(pool_bytes ? pool_bytes : 1);
    if (!s->rows || !s->pool) {
        free(s->rows);
        free(s->pool);
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->n = n;
    s->taken_us = sq_mono_us();
    return s;
}

void sq_snap_ref(sq_snap *s) { atomic_fetch_add(&s->refs, 1); }

void sq_snap_unref(sq_snap *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) {
        free(s->rows);
        free(s->pool);
        free(s->fol);
        free(s->prod);
        free(s->txn);
        free(s->txn_pool);
        free(s);
    }
}

static int live_cmp(const void *a, const void *b)
{
    const sq_live *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    return c ? c : (x->partition > y->partition) - (x->partition < y->partition);
}

void sq_snap_sort(sq_snap *s)
{
    if (s->n > 1)
        qsort(s->rows, s->n, sizeof *s->rows, live_cmp);
}

/* First row >= (topic, partition). */
static size_t snap_lower(const sq_snap *s, const char *topic, int32_t partition)
{
    size_t lo = 0, hi = s->n;
    sq_live key = { .topic = topic, .partition = partition };
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (live_cmp(&s->rows[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

const sq_live *sq_snap_find(const sq_snap *s, const char *topic, int32_t partition)
{
    if (!s)
        return NULL;
    size_t i = snap_lower(s, topic, partition);
    if (i < s->n && !strcmp(s->rows[i].topic, topic) && s->rows[i].partition == partition)
        return &s->rows[i];
    return NULL;
}

/* Every log this broker keeps bookmarks of (main.local_logs) with its
 * stored numbers (log end = high watermark, no last timestamp), sorted;
 * NULL on error.  Partitions hosted elsewhere have no numbers here: in
 * cluster mode their lag is their leader's to tell. */
static sq_snap *snap_of_partitions(sqlite3 *db)
{
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT topic, partition, log_start_offset, high_watermark "
                           "FROM main.local_logs ORDER BY topic, partition", -1, &st, NULL))
        return NULL;
    size_t n = 0, pool = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        n++;
        pool += (size_t)sqlite3_column_bytes(st, 0) + 1;
    }
    sqlite3_reset(st);
    sq_snap *s = sq_snap_new(n, pool);
    if (!s) {
        sqlite3_finalize(st);
        return NULL;
    }
    size_t i = 0, at = 0;
    while (i < n && sqlite3_step(st) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        size_t len = strlen(t);
        if (at + len + 1 > pool)
            break;
        sq_live *l = &s->rows[i++];
        memcpy(s->pool + at, t, len + 1);
        l->topic = s->pool + at;
        at += len + 1;
        l->partition = sqlite3_column_int(st, 1);
        l->log_start_offset = sqlite3_column_int64(st, 2);
        l->high_watermark = l->log_end_offset = sqlite3_column_int64(st, 3);
        l->last_timestamp = -1;
        l->last_stable_offset = -1;   /* the producer state is the broker's */
    }
    s->n = i;
    sqlite3_finalize(st);
    sq_snap_sort(s);
    return s;
}

sq_snap *sq_snap_from_files(sqlite3 *db, const char *data_dir)
{
    sq_snap *s = snap_of_partitions(db);
    for (size_t i = 0; s && i < s->n; i++) {
        sq_live *l = &s->rows[i];
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s-%d", data_dir, l->topic, l->partition);
        seg_dir_info di;
        if (seg_dir_stat(dir, &di) == 0 && di.segments) {
            l->size_bytes = (int64_t)di.size_bytes;
            l->segments = di.segments;
            l->log_end_offset = di.log_end;
            l->last_timestamp = di.max_ts;
            /* A stopped broker's stored high watermark may lag its log (it
             * is saved on a timer); standalone, the log end is the truth. */
            if (l->high_watermark < l->log_end_offset)
                l->high_watermark = l->log_end_offset;
            if (l->log_start_offset < di.first_base)
                l->log_start_offset = di.first_base;
        }
    }
    return s;
}

/* ---- common vtab plumbing --------------------------------------------------------- */
typedef struct vt {
    sqlite3_vtab base;
    sq_conn *c;
} vt;

static int vt_connect_decl(sqlite3 *db, void *aux, sqlite3_vtab **out, const char *decl)
{
    /* declare_vtab parses a CREATE TABLE: not the operator's statement. */
    sq_conn *c = aux;
    bool was = c->internal;
    c->internal = true;
    int rc = sqlite3_declare_vtab(db, decl);
    c->internal = was;
    if (rc != SQLITE_OK)
        return rc;
    vt *v = sqlite3_malloc(sizeof *v);
    if (!v)
        return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->c = aux;
    *out = &v->base;
    return SQLITE_OK;
}

static int vt_disconnect(sqlite3_vtab *v)
{
    sqlite3_free(v);
    return SQLITE_OK;
}

/* ---- sluice_partition_state --------------------------------------------------------- */
enum { PS_TOPIC, PS_PARTITION, PS_LSO, PS_LEO, PS_HW, PS_SIZE, PS_SEGS, PS_LAST_TS,
       PS_BYTES_IN, PS_MSGS_IN, PS_BYTES_OUT, PS_STABLE };

typedef struct ps_cur {
    sqlite3_vtab_cursor base;
    sq_snap *snap;
    size_t i, end;
} ps_cur;

static int ps_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    return vt_connect_decl(db, aux, out,
        "CREATE TABLE x(topic TEXT, partition INTEGER, log_start_offset INTEGER, "
        "log_end_offset INTEGER, high_watermark INTEGER, size_bytes INTEGER, "
        "segments INTEGER, last_timestamp INTEGER, bytes_in INTEGER, "
        "messages_in INTEGER, bytes_out INTEGER, last_stable_offset INTEGER)");
}

/* idxNum bit 1: topic = ?, bit 2: partition = ? (only with topic). */
static int ps_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
    (void)v;
    int topic = -1, part = -1;
    for (int i = 0; i < ii->nConstraint; i++) {
        const struct sqlite3_index_constraint *k = &ii->aConstraint[i];
        if (!k->usable || k->op != SQLITE_INDEX_CONSTRAINT_EQ)
            continue;
        if (k->iColumn == PS_TOPIC) topic = i;
        if (k->iColumn == PS_PARTITION) part = i;
    }
    ii->idxNum = 0;
    ii->estimatedCost = 100000;
    if (topic >= 0) {
        ii->idxNum |= 1;
        ii->aConstraintUsage[topic].argvIndex = 1;
        ii->aConstraintUsage[topic].omit = 1;
        ii->estimatedCost = 20;
        if (part >= 0) {
            ii->idxNum |= 2;
            ii->aConstraintUsage[part].argvIndex = 2;
            ii->aConstraintUsage[part].omit = 1;
            ii->estimatedCost = 2;
            ii->estimatedRows = 1;
            ii->idxFlags |= SQLITE_INDEX_SCAN_UNIQUE;
        }
    }
    return SQLITE_OK;
}

static int ps_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    ps_cur *cur = sqlite3_malloc(sizeof *cur);
    if (!cur)
        return SQLITE_NOMEM;
    memset(cur, 0, sizeof *cur);
    cur->snap = sq_conn_snap(((vt *)v)->c);
    if (cur->snap)
        sq_snap_ref(cur->snap);
    *out = &cur->base;
    return SQLITE_OK;
}

static int ps_close(sqlite3_vtab_cursor *cc)
{
    ps_cur *cur = (ps_cur *)cc;
    sq_snap_unref(cur->snap);
    sqlite3_free(cur);
    return SQLITE_OK;
}

static int ps_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                     sqlite3_value **argv)
{
    (void)is; (void)argc;
    ps_cur *cur = (ps_cur *)cc;
    size_t next = cur->end;                  /* the row after the last answer */
    cur->i = cur->end = 0;
    if (!cur->snap)
        return SQLITE_OK;
    if (!(idx & 1)) {
        cur->end = cur->snap->n;
        return SQLITE_OK;
    }
    const char *topic = (const char *)sqlite3_value_text(argv[0]);
    if (!topic)
        return SQLITE_OK;
    if (idx & 2) {
        if (sqlite3_value_numeric_type(argv[1]) != SQLITE_INTEGER)
            return SQLITE_OK;
        int64_t p = sqlite3_value_int64(argv[1]);
        if (p < 0 || p > INT32_MAX)
            return SQLITE_OK;
        const sq_live *r = &cur->snap->rows[next];
        size_t i = next < cur->snap->n && r->partition == p && !strcmp(r->topic, topic)
                 ? next : snap_lower(cur->snap, topic, (int32_t)p);
        if (i < cur->snap->n && !strcmp(cur->snap->rows[i].topic, topic) &&
            cur->snap->rows[i].partition == p) {
            cur->i = i;
            cur->end = i + 1;
        }
        return SQLITE_OK;
    }
    size_t i = snap_lower(cur->snap, topic, INT32_MIN), e = i;
    while (e < cur->snap->n && !strcmp(cur->snap->rows[e].topic, topic))
        e++;
    cur->i = i;
    cur->end = e;
    return SQLITE_OK;
}

static int ps_next(sqlite3_vtab_cursor *cc) { ((ps_cur *)cc)->i++; return SQLITE_OK; }
static int ps_eof(sqlite3_vtab_cursor *cc) { ps_cur *c = (ps_cur *)cc; return c->i >= c->end; }

static int ps_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    ps_cur *cur = (ps_cur *)cc;
    const sq_live *l = &cur->snap->rows[cur->i];
    switch (col) {
    case PS_TOPIC: sqlite3_result_text(ctx, l->topic, -1, SQLITE_TRANSIENT); break;
    case PS_PARTITION: sqlite3_result_int(ctx, l->partition); break;
    case PS_LSO: sqlite3_result_int64(ctx, l->log_start_offset); break;
    case PS_LEO: sqlite3_result_int64(ctx, l->log_end_offset); break;
    case PS_HW: sqlite3_result_int64(ctx, l->high_watermark); break;
    case PS_SIZE: sqlite3_result_int64(ctx, l->size_bytes); break;
    case PS_SEGS: sqlite3_result_int(ctx, l->segments); break;
    case PS_LAST_TS:
        if (l->last_timestamp < 0) sqlite3_result_null(ctx);
        else sqlite3_result_int64(ctx, l->last_timestamp);
        break;
    case PS_BYTES_IN: sqlite3_result_int64(ctx, (int64_t)l->bytes_in); break;
    case PS_MSGS_IN: sqlite3_result_int64(ctx, (int64_t)l->messages_in); break;
    case PS_BYTES_OUT: sqlite3_result_int64(ctx, (int64_t)l->bytes_out); break;
    case PS_STABLE:
        if (l->last_stable_offset >= 0)
            sqlite3_result_int64(ctx, l->last_stable_offset);
        break;                                   /* else NULL */
    }
    return SQLITE_OK;
}

static int ps_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    *id = (sqlite3_int64)((ps_cur *)cc)->i;
    return SQLITE_OK;
}

static sqlite3_module ps_module = {
    .xConnect = ps_connect, .xBestIndex = ps_best_index, .xDisconnect = vt_disconnect,
    .xOpen = ps_open, .xClose = ps_close, .xFilter = ps_filter, .xNext = ps_next,
    .xEof = ps_eof, .xColumn = ps_column, .xRowid = ps_rowid,
};

/* ---- sluice_partition_merged ---------------------------------------------------------------
 * sluice_partition_state over a snapshot of its own, owned by the cursor
 * (one per statement): main.partitions overlaid with the live rows. */
static int pm_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    sq_conn *c = ((vt *)v)->c;
    ps_cur *cur = sqlite3_malloc(sizeof *cur);
    if (!cur)
        return SQLITE_NOMEM;
    memset(cur, 0, sizeof *cur);
    cur->snap = snap_of_partitions(c->db);
    if (!cur->snap) {
        sqlite3_free(cur);
        return SQLITE_ERROR;
    }
    const sq_snap *live = sq_conn_snap(c);
    for (size_t i = 0; live && i < cur->snap->n; i++) {
        sq_live *l = &cur->snap->rows[i];
        const sq_live *x = sq_snap_find(live, l->topic, l->partition);
        if (x) {
            const char *topic = l->topic;            /* into our own pool */
            *l = *x;
            l->topic = topic;
        }
    }
    *out = &cur->base;
    return SQLITE_OK;
}

static sqlite3_module pm_module = {
    .xConnect = ps_connect, .xBestIndex = ps_best_index, .xDisconnect = vt_disconnect,
    .xOpen = pm_open, .xClose = ps_close, .xFilter = ps_filter, .xNext = ps_next,
    .xEof = ps_eof, .xColumn = ps_column, .xRowid = ps_rowid,
};

/* ---- sluice_producers -------------------------------------------------------------------- */
enum { PR_TOPIC, PR_PARTITION, PR_ID, PR_EPOCH, PR_LAST_SEQ, PR_LAST_TS, PR_COORD_EPOCH,
       PR_TXN_START };

static int pr_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    return vt_connect_decl(db, aux, out,
        "CREATE TABLE x(topic TEXT, partition INTEGER, producer_id INTEGER, "
        "producer_epoch INTEGER, last_sequence INTEGER, last_timestamp INTEGER, "
        "coordinator_epoch INTEGER, current_txn_start_offset INTEGER)");
}

static int pr_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
    (void)v;
    ii->estimatedCost = 1000;                /* a scan: the snapshot is small */
    return SQLITE_OK;
}

/* A ps_cur (it shares ps_open/ps_close): i is the partition row, end the
 * producer within it. */
static void pr_settle(ps_cur *cur)
{
    while (cur->snap && cur->i < cur->snap->n && cur->end >= cur->snap->rows[cur->i].nproducers) {
        cur->i++;
        cur->end = 0;
    }
}

static int pr_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                     sqlite3_value **argv)
{
    (void)idx; (void)is; (void)argc; (void)argv;
    ps_cur *cur = (ps_cur *)cc;
    cur->i = cur->end = 0;
    pr_settle(cur);
    return SQLITE_OK;
}

static int pr_next(sqlite3_vtab_cursor *cc)
{
    ps_cur *cur = (ps_cur *)cc;
    cur->end++;
    pr_settle(cur);
    return SQLITE_OK;
}

static int pr_eof(sqlite3_vtab_cursor *cc)
{
    ps_cur *cur = (ps_cur *)cc;
    return !cur->snap || cur->i >= cur->snap->n;
}

static void result_or_null(sqlite3_context *ctx, int64_t v)
{
    if (v >= 0)
        sqlite3_result_int64(ctx, v);
}

static int pr_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    ps_cur *cur = (ps_cur *)cc;
    const sq_live *l = &cur->snap->rows[cur->i];
    const sq_producer *p = &cur->snap->prod[l->first_producer + cur->end];
    switch (col) {
    case PR_TOPIC: sqlite3_result_text(ctx, l->topic, -1, SQLITE_TRANSIENT); break;
    case PR_PARTITION: sqlite3_result_int(ctx, l->partition); break;
    case PR_ID: sqlite3_result_int64(ctx, p->producer_id); break;
    case PR_EPOCH: sqlite3_result_int(ctx, p->epoch); break;
    case PR_LAST_SEQ: result_or_null(ctx, p->last_sequence); break;
    case PR_LAST_TS: result_or_null(ctx, p->last_timestamp); break;
    case PR_COORD_EPOCH: result_or_null(ctx, p->coordinator_epoch); break;
    case PR_TXN_START: result_or_null(ctx, p->txn_start); break;
    }
    return SQLITE_OK;
}

/* The producer's place in the snapshot's array: unique per row. */
static int pr_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    const ps_cur *cur = (const ps_cur *)cc;
    *id = (sqlite3_int64)(cur->snap->rows[cur->i].first_producer + cur->end);
    return SQLITE_OK;
}

static sqlite3_module pr_module = {
    .xConnect = pr_connect, .xBestIndex = pr_best_index, .xDisconnect = vt_disconnect,
    .xOpen = ps_open, .xClose = ps_close, .xFilter = pr_filter,
    .xNext = pr_next, .xEof = pr_eof, .xColumn = pr_column, .xRowid = pr_rowid,
};

/* ---- sluice_transactions ------------------------------------------------------------------ */
enum { TX_ID, TX_PID, TX_EPOCH, TX_STATE, TX_PARTITIONS, TX_START, TX_TIMEOUT, TX_UPDATE };

static int tx_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    return vt_connect_decl(db, aux, out,
        "CREATE TABLE x(transactional_id TEXT, producer_id INTEGER, producer_epoch INTEGER, "
        "state TEXT, partitions TEXT, start_time INTEGER, timeout_ms INTEGER, "
        "last_update INTEGER)");
}

/* A ps_cur (it shares ps_open/ps_close/pr_best_index): i is the id's row. */
static int tx_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                     sqlite3_value **argv)
{
    (void)idx; (void)is; (void)argc; (void)argv;
    ((ps_cur *)cc)->i = 0;
    return SQLITE_OK;
}

static int tx_next(sqlite3_vtab_cursor *cc)
{
    ((ps_cur *)cc)->i++;
    return SQLITE_OK;
}

static int tx_eof(sqlite3_vtab_cursor *cc)
{
    ps_cur *cur = (ps_cur *)cc;
    return !cur->snap || cur->i >= cur->snap->ntxn;
}

static int tx_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    ps_cur *cur = (ps_cur *)cc;
    const sq_txn *t = &cur->snap->txn[cur->i];
    switch (col) {
    case TX_ID: sqlite3_result_text(ctx, t->id, -1, SQLITE_TRANSIENT); break;
    case TX_PID: sqlite3_result_int64(ctx, t->producer_id); break;
    case TX_EPOCH: sqlite3_result_int(ctx, t->epoch); break;
    case TX_STATE: sqlite3_result_text(ctx, t->state, -1, SQLITE_STATIC); break;
    case TX_PARTITIONS: sqlite3_result_text(ctx, t->partitions, -1, SQLITE_TRANSIENT); break;
    case TX_START: result_or_null(ctx, t->start_ms); break;
    case TX_TIMEOUT: sqlite3_result_int(ctx, t->timeout_ms); break;
    case TX_UPDATE: result_or_null(ctx, t->update_ms); break;
    }
    return SQLITE_OK;
}

static int tx_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    *id = (sqlite3_int64)((const ps_cur *)cc)->i;
    return SQLITE_OK;
}

static sqlite3_module tx_module = {
    .xConnect = tx_connect, .xBestIndex = pr_best_index, .xDisconnect = vt_disconnect,
    .xOpen = ps_open, .xClose = ps_close, .xFilter = tx_filter,
    .xNext = tx_next, .xEof = tx_eof, .xColumn = tx_column, .xRowid = tx_rowid,
};

/* ---- sluice_config_defs ---------------------------------------------------------------- */
typedef struct cd_cur {
    sqlite3_vtab_cursor base;
    sq_conn *c;
    size_t i, n;
    const md_config_def *defs;
} cd_cur;

static int cd_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    return vt_connect_decl(db, aux, out,
        "CREATE TABLE x(name TEXT, default_value TEXT, broker_value TEXT, "
        "type TEXT, sensitive INTEGER, doc TEXT, broker_key TEXT)");
}

static int cd_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
    (void)v;
    ii->estimatedCost = 40;
    ii->estimatedRows = 40;
    return SQLITE_OK;
}

static int cd_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    cd_cur *cur = sqlite3_malloc(sizeof *cur);
    if (!cur)
        return SQLITE_NOMEM;
    memset(cur, 0, sizeof *cur);
    cur->c = ((vt *)v)->c;
    cur->defs = md_config_defs(&cur->n);
    *out = &cur->base;
    return SQLITE_OK;
}

static int cd_close(sqlite3_vtab_cursor *cc) { sqlite3_free(cc); return SQLITE_OK; }

static int cd_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                     sqlite3_value **argv)
{
    (void)idx; (void)is; (void)argc; (void)argv;
    ((cd_cur *)cc)->i = 0;
    return SQLITE_OK;
}

static int cd_next(sqlite3_vtab_cursor *cc) { ((cd_cur *)cc)->i++; return SQLITE_OK; }
static int cd_eof(sqlite3_vtab_cursor *cc) { cd_cur *c = (cd_cur *)cc; return c->i >= c->n; }

static const char *type_name(enum md_config_type t)
{
    switch (t) {
    case MD_CT_LONG: return "LONG";
    case MD_CT_INT: return "INT";
    case MD_CT_DOUBLE: return "DOUBLE";
    case MD_CT_BOOL: return "BOOLEAN";
    case MD_CT_STRING: return "STRING";
    case MD_CT_LIST: return "LIST";
    }
    return "STRING";
}

static int cd_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    cd_cur *cur = (cd_cur *)cc;
    const md_config_def *d = &cur->defs[cur->i];
    const char *bv = NULL;
    switch (col) {
    case 0: sqlite3_result_text(ctx, d->name, -1, SQLITE_STATIC); break;
    case 1: sqlite3_result_text(ctx, d->default_value, -1, SQLITE_STATIC); break;
    case 2:
        for (size_t k = 0; k < cur->c->env.nbroker_defaults; k++)
            if (!strcmp(cur->c->env.broker_defaults[k].name, d->name))
                bv = cur->c->env.broker_defaults[k].value;
        if (bv) sqlite3_result_text(ctx, bv, -1, SQLITE_TRANSIENT);
        else sqlite3_result_null(ctx);
        break;
    case 3: sqlite3_result_text(ctx, type_name(d->type), -1, SQLITE_STATIC); break;
    case 4: sqlite3_result_int(ctx, d->sensitive); break;
    case 5: sqlite3_result_text(ctx, d->doc ? d->doc : "", -1, SQLITE_STATIC); break;
    case 6:
        if (d->broker_key) sqlite3_result_text(ctx, d->broker_key, -1, SQLITE_STATIC);
        else sqlite3_result_null(ctx);
        break;
    }
    return SQLITE_OK;
}

static int cd_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    *id = (sqlite3_int64)((cd_cur *)cc)->i;
    return SQLITE_OK;
}

static sqlite3_module cd_module = {
    .xConnect = cd_connect, .xBestIndex = cd_best_index, .xDisconnect = vt_disconnect,
    .xOpen = cd_open, .xClose = cd_close, .xFilter = cd_filter, .xNext = cd_next,
    .xEof = cd_eof, .xColumn = cd_column, .xRowid = cd_rowid,
};

/* ---- sluice_assignment(blob) -------------------------------------------------------------
 * ConsumerProtocolAssignment (the "consumer" protocol type):
 *   Version INT16, AssignedPartitions [ Topic STRING, Partitions [INT32] ],
 *   UserData BYTES (v1+ adds nothing we need).
 * Anything that does not parse yields no rows. */
typedef struct as_row { char topic[MD_TOPIC_NAME_MAX + 1]; int32_t partition; } as_row;

typedef struct as_cur {
    sqlite3_vtab_cursor base;
    as_row *rows;
    size_t n, i;
} as_cur;

static int as_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                      sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    return vt_connect_decl(db, aux, out,
        "CREATE TABLE x(topic TEXT, partition INTEGER, assignment HIDDEN)");
}

static int as_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
    (void)v;
    ii->idxNum = 0;
    ii->estimatedCost = 1e9;
    for (int i = 0; i < ii->nConstraint; i++)
        if (ii->aConstraint[i].iColumn == 2 &&
            ii->aConstraint[i].op == SQLITE_INDEX_CONSTRAINT_EQ) {
            if (!ii->aConstraint[i].usable)
                return SQLITE_CONSTRAINT;
            ii->aConstraintUsage[i].argvIndex = 1;
            ii->aConstraintUsage[i].omit = 1;
            ii->idxNum = 1;
            ii->estimatedCost = 10;
        }
    return SQLITE_OK;
}

static int as_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    (void)v;
    as_cur *cur = sqlite3_malloc(sizeof *cur);
    if (!cur)
        return SQLITE_NOMEM;
    memset(cur, 0, sizeof *cur);
    *out = &cur->base;
    return SQLITE_OK;
}

static int as_close(sqlite3_vtab_cursor *cc)
{
    free(((as_cur *)cc)->rows);
    sqlite3_free(cc);
    return SQLITE_OK;
}

static int as_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                     sqlite3_value **argv)
{
    (void)is; (void)argc;
    as_cur *cur = (as_cur *)cc;
    cur->n = cur->i = 0;
    if (!idx || sqlite3_value_type(argv[0]) != SQLITE_BLOB)
        return SQLITE_OK;
    kp_rd rd;
    kp_rd_init(&rd, sqlite3_value_blob(argv[0]), (size_t)sqlite3_value_bytes(argv[0]));
    kp_rd_i16(&rd);                                   /* Version */
    int32_t nt = kp_rd_array(&rd, 6);
    size_t cap = 0;
    for (int32_t t = 0; t < nt && kp_rd_ok(&rd); t++) {
        kp_str topic = kp_rd_string(&rd);
        int32_t np = kp_rd_array(&rd, 4);
        for (int32_t p = 0; p < np && kp_rd_ok(&rd); p++) {
            int32_t part = kp_rd_i32(&rd);
            if (!kp_rd_ok(&rd) || topic.len < 0)
                break;
            if (cur->n == cap) {
                cap = cap ? cap * 2 : 16;
                as_row *nr = realloc(cur->rows, cap * sizeof *nr);
                if (!nr)
                    return SQLITE_NOMEM;
                cur->rows = nr;
            }
            kp_str_copy(topic, cur->rows[cur->n].topic, sizeof cur->rows[cur->n].topic);
            cur->rows[cur->n++].partition = part;
        }
    }
    if (!kp_rd_ok(&rd))
        cur->n = 0;                                   /* not an assignment */
    return SQLITE_OK;
}

static int as_next(sqlite3_vtab_cursor *cc) { ((as_cur *)cc)->i++; return SQLITE_OK; }
static int as_eof(sqlite3_vtab_cursor *cc) { as_cur *c = (as_cur *)cc; return c->i >= c->n; }

static int as_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    as_cur *cur = (as_cur *)cc;
    if (col == 0)
        sqlite3_result_text(ctx, cur->rows[cur->i].topic, -1, SQLITE_TRANSIENT);
    else if (col == 1)
        sqlite3_result_int(ctx, cur->rows[cur->i].partition);
    else
        sqlite3_result_null(ctx);
    return SQLITE_OK;
}

static int as_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    *id = (sqlite3_int64)((as_cur *)cc)->i;
    return SQLITE_OK;
}

static sqlite3_module as_module = {
    .xConnect = as_connect, .xBestIndex = as_best_index, .xDisconnect = vt_disconnect,
    .xOpen = as_open, .xClose = as_close, .xFilter = as_filter, .xNext = as_next,
    .xEof = as_eof, .xColumn = as_column, .xRowid = as_rowid,
};

int sq_vtab_register(sq_conn *c)
{
    if (sqlite3_create_module(c->db, "sluice_partition_state", &ps_module, c) ||
        sqlite3_create_module(c->db, "sluice_partition_merged", &pm_module, c) ||
        sqlite3_create_module(c->db, "sluice_config_defs", &cd_module, c) ||
        sqlite3_create_module(c->db, "sluice_assignment", &as_module, c) ||
        sqlite3_create_module(c->db, "sluice_producers", &pr_module, c) ||
        sqlite3_create_module(c->db, "sluice_transactions", &tx_module, c))
        return -1;
    return 0;
}
