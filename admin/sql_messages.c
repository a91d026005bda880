/*
 * admin/sql_messages.c — the `messages` virtual table: records read
 * straight from the partition's segment files, decompressed as needed.
 *
 * Records come from a seg_cursor (segments/cursor.c), which opens the
 * partition's files read-only by directory, never through the event loop's
 * seg_log, so a query runs on the SQL worker without touching loop state.
 * Reads stop at the statement snapshot's high watermark, so a half-written
 * tail batch is never looked at.
 *
 * Pushdown (xBestIndex): topic = ?, partition = ?, offset =/>/>=/</<= ?,
 * timestamp >=/> ?.  A query "topic='t' AND partition=0 AND offset >= N
 * LIMIT 10" costs: a directory listing, a binary search of the .index file
 * (about log2(entries) preads of 8 bytes), then batch headers from the
 * indexed position (at most index.interval.bytes of batches before N) and
 * the records up to the tenth.  A timestamp bound seeks with the
 * .timeindex the same way and skips whole batches by MaxTimestamp.
 * Uncompressed batches are streamed, so LIMIT stops the reading inside a
 * batch; compressed ones are read whole (cursor.c says how).  Records
 * point into the cursor: valid until the next advance(), which is all
 * xColumn needs.
 *
 * Rows come ordered by (topic, partition, offset), which the planner is
 * told, so ORDER BY offset costs nothing.
 *
 * A principal's statement (admin_http.c: a Basic user, a certificate,
 * User:ANONYMOUS) sees the records of the topics it may READ only, as a
 * Kafka consumer would (sq_conn.readable): others are skipped in a scan,
 * and "topic = 'x'" naming one is an error (TOPIC_AUTHORIZATION_FAILED).
 *
 * Columns: key and value are TEXT when the bytes are valid UTF-8, BLOB
 * otherwise, NULL when null; headers is a JSON array of {"key","value"}
 * (NULL when the record has none).
 *
 * Typed values (issue 31): key_schema_id / value_schema_id are the schema
 * id of bytes in Confluent's wire format (magic 0, the id, the body) when
 * the registry knows that id (its SQLite mirror, registry_schemas), else
 * NULL; key_json / value_json are the body decoded with that schema: an
 * Avro body as JSON (schema/sch.h's sch_avro_to_json: records as objects,
 * a union as its branch's plain value, so json_extract(value_json,
 * '$.amount') works), a JSON Schema body as its JSON text; NULL for
 * anything else (not the wire format, an unknown id, Protobuf, a body
 * that does not decode) — never an error.  Each id's schema is read and
 * parsed once per statement (the cursor's cache, MS1); a record then costs
 * a cache probe and the decode into a buffer the cursor reuses.
 *
 * Invariant:
 *   MS1. An id names one schema for good (the registry never gives an id
 *        to another schema), so what a cursor read of an id stays true for
 *        its statement; an id registered during the statement may read as
 *        unknown until the next one.
 */
#include "admin/sql_surface.h"
#include "schema/sch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

/* Bytes read from segment files by this table (bench/sql_bench.c). */
atomic_llong sq_messages_bytes_read;

/* ---- the table ------------------------------------------------------------------------- */
enum { M_TOPIC, M_PARTITION, M_OFFSET, M_TIMESTAMP, M_KEY, M_VALUE, M_HEADERS,
       M_KEY_SCHEMA_ID, M_VALUE_SCHEMA_ID, M_KEY_JSON, M_VALUE_JSON };

/* idxNum bits */
enum { B_TOPIC = 1, B_PART = 2, B_LO = 4, B_LO_GT = 8, B_HI = 16, B_HI_LT = 32,
       B_EQ = 64, B_TS = 128, B_TS_GT = 256 };

typedef struct msg_vt {
    sqlite3_vtab base;
    sq_conn *c;
    sqlite3_stmt *by_id, *by_version;   /* the registry's mirror (typed values) */
} msg_vt;

/* One schema id as a statement met it (MS1: immutable once filled; an id
 * names one schema for good). */
typedef struct msg_schema {
    int32_t id;
    bool used;                        /* slot taken */
    bool known;                       /* registered */
    sch_type type;
    sch_schema *avro;                 /* AVRO that parsed; else NULL */
} msg_schema;

#define MSG_SCHEMAS_MAX 4096          /* ids cached per statement; past it, start over */

typedef struct msg_cur {
    sqlite3_vtab_cursor base;
    sq_conn *c;
    sq_snap *snap;
    char *topic;                      /* topic = ? (NULL: all) */
    bool has_part;
    int32_t part;
    int64_t lo, hi;                   /* offsets [lo, hi) */
    int64_t ts_lo;                    /* timestamp >= ts_lo */
    size_t pi, pend;                  /* partitions left, in the snapshot */
    /* current partition */
    const sq_live *cur;
    seg_cursor *sc;
    kp_record rec;
    int64_t rowid;
    bool eof;
    /* typed values */
    msg_schema *schemas;              /* open addressing by id */
    size_t schemas_cap, schemas_n;
    kp_buf json;                      /* the last decode, reused */
} msg_cur;

/* ---- topics a principal may read ------------------------------------------------- */
static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void sq_topic_set_sort(sq_topic_set *s)
{
    if (s->n)
        qsort(s->names, s->n, sizeof *s->names, name_cmp);
}

bool sq_topic_set_has(const sq_topic_set *s, const char *topic)
{
    return s->n && bsearch(&topic, s->names, s->n, sizeof *s->names, name_cmp);
}

void sq_topic_set_free(sq_topic_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->names[i]);
    free(s->names);
    free(s);
}

static bool readable(const msg_cur *cur, const char *topic)
{
    return !cur->c->readable || sq_topic_set_has(cur->c->readable, topic);
}

static int msg_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                       sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    sq_conn *c = aux;
    bool was = c->internal;
    c->internal = true;                 /* our CREATE TABLE, not the operator's */
    int rc = sqlite3_declare_vtab(db,
        "CREATE TABLE x(topic TEXT, partition INTEGER, offset INTEGER, "
        "timestamp INTEGER, key, value, headers TEXT, key_schema_id INTEGER, "
        "value_schema_id INTEGER, key_json TEXT, value_json TEXT)");
    c->internal = was;
    if (rc != SQLITE_OK)
        return rc;
    msg_vt *v = sqlite3_malloc(sizeof *v);
    if (!v)
        return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->c = aux;
    *out = &v->base;
    return SQLITE_OK;
}

static int msg_disconnect(sqlite3_vtab *v)
{
    msg_vt *mv = (msg_vt *)v;
    sqlite3_finalize(mv->by_id);
    sqlite3_finalize(mv->by_version);
    sqlite3_free(v);
    return SQLITE_OK;
}

static int msg_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
    (void)v;
    int use[9];
    for (int i = 0; i < 9; i++) use[i] = -1;
    int bits = 0;
    for (int i = 0; i < ii->nConstraint; i++) {
        const struct sqlite3_index_constraint *k = &ii->aConstraint[i];
        if (!k->usable)
            continue;
        switch (k->iColumn) {
        case M_TOPIC:
            if (k->op == SQLITE_INDEX_CONSTRAINT_EQ) { use[0] = i; bits |= B_TOPIC; }
            break;
        case M_PARTITION:
            if (k->op == SQLITE_INDEX_CONSTRAINT_EQ) { use[1] = i; bits |= B_PART; }
            break;
        case M_OFFSET:
            if (k->op == SQLITE_INDEX_CONSTRAINT_EQ) { use[2] = i; bits |= B_EQ; }
            else if (k->op == SQLITE_INDEX_CONSTRAINT_GE || k->op == SQLITE_INDEX_CONSTRAINT_GT) {
                use[3] = i;
                bits = (bits & ~B_LO_GT) | B_LO | (k->op == SQLITE_INDEX_CONSTRAINT_GT ? B_LO_GT : 0);
            } else if (k->op == SQLITE_INDEX_CONSTRAINT_LE || k->op == SQLITE_INDEX_CONSTRAINT_LT) {
                use[4] = i;
                bits = (bits & ~B_HI_LT) | B_HI | (k->op == SQLITE_INDEX_CONSTRAINT_LT ? B_HI_LT : 0);
            }
            break;
        case M_TIMESTAMP:
            if (k->op == SQLITE_INDEX_CONSTRAINT_GE || k->op == SQLITE_INDEX_CONSTRAINT_GT) {
                use[5] = i;
                bits = (bits & ~B_TS_GT) | B_TS | (k->op == SQLITE_INDEX_CONSTRAINT_GT ? B_TS_GT : 0);
            }
            break;
        }
    }
    if (bits & B_EQ)
        bits &= ~(B_LO | B_LO_GT | B_HI | B_HI_LT), use[3] = use[4] = -1;
    /* argv order: topic, partition, eq, lo, hi, ts */
    int argi = 1;
    for (int k = 0; k < 6; k++)
        if (use[k] >= 0) {
            ii->aConstraintUsage[use[k]].argvIndex = argi++;
            /* The timestamp bound only seeks: records are re-checked. */
            ii->aConstraintUsage[use[k]].omit = k != 5;
        }
    ii->idxNum = bits;
    double cost = 1e9;
    if (bits & B_TOPIC) cost /= 100;
    if (bits & B_PART) cost /= 10;
    if (bits & (B_EQ | B_LO)) cost /= 1000;
    if (bits & B_TS) cost /= 100;
    ii->estimatedCost = cost;
    if (bits & B_EQ && bits & B_TOPIC && bits & B_PART) {
        ii->estimatedRows = 1;
    }
    /* Rows come in (topic, partition, offset) order. */
    bool ordered = true;
    for (int i = 0; i < ii->nOrderBy; i++) {
        const struct sqlite3_index_orderby *o = &ii->aOrderBy[i];
        if (o->desc || !(o->iColumn == M_TOPIC || o->iColumn == M_PARTITION ||
                         o->iColumn == M_OFFSET)) {
            ordered = false;
            break;
        }
        /* Sorted by offset alone only within one partition. */
        if (o->iColumn == M_OFFSET && i == 0 && !((bits & B_TOPIC) && (bits & B_PART)))
            ordered = false;
        if (o->iColumn == M_PARTITION && i == 0 && !(bits & B_TOPIC))
            ordered = false;
    }
    ii->orderByConsumed = ordered && ii->nOrderBy > 0;
    return SQLITE_OK;
}

static int msg_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    msg_cur *cur = sqlite3_malloc(sizeof *cur);
    if (!cur)
        return SQLITE_NOMEM;
    memset(cur, 0, sizeof *cur);
    cur->c = ((msg_vt *)v)->c;
    kp_buf_init(&cur->json);
    *out = &cur->base;
    return SQLITE_OK;
}

static void close_partition(msg_cur *cur)
{
    seg_cursor_close(cur->sc);
    cur->sc = NULL;
    cur->cur = NULL;
}

static void schemas_clear(msg_cur *cur)
{
    for (size_t i = 0; i < cur->schemas_cap; i++)
        sch_free(cur->schemas[i].avro);
    free(cur->schemas);
    cur->schemas = NULL;
    cur->schemas_cap = cur->schemas_n = 0;
}

static int msg_close(sqlite3_vtab_cursor *cc)
{
    msg_cur *cur = (msg_cur *)cc;
    close_partition(cur);
    schemas_clear(cur);
    kp_buf_free(&cur->json);
    sq_snap_unref(cur->snap);
    free(cur->topic);
    sqlite3_free(cur);
    return SQLITE_OK;
}

/* Opens a record cursor on the next wanted partition.  false at the end. */
static bool start_partition(msg_cur *cur)
{
    while (cur->pi < cur->pend) {
        const sq_live *l = &cur->snap->rows[cur->pi++];
        if (cur->has_part && l->partition != cur->part)
            continue;
        if ((cur->topic && strcmp(l->topic, cur->topic)) || !readable(cur, l->topic))
            continue;
        int64_t cap = cur->hi < l->high_watermark ? cur->hi : l->high_watermark;
        if (cur->lo >= cap)
            continue;
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s-%d", cur->c->env.data_dir, l->topic,
                 l->partition);
        seg_cursor_opts o = { .dir = dir, .from = cur->lo, .to = cap,
                              .min_ts = cur->ts_lo,
                              .bytes_read = &sq_messages_bytes_read };
        if (seg_cursor_open(&o, &cur->sc) != 0)
            continue;                 /* no files (yet, or any more) */
        cur->cur = l;
        return true;
    }
    return false;
}

/* Moves to the next wanted record; sets eof at the end. */
static int advance(msg_cur *cur)
{
    for (;;) {
        if (!cur->sc && !start_partition(cur)) {
            cur->eof = true;
            return SQLITE_OK;
        }
        int r = seg_cursor_next(cur->sc, &cur->rec);
        if (r == 1) {
            cur->rowid++;
            return SQLITE_OK;
        }
        if (r == SEG_E_NOMEM)
            return SQLITE_NOMEM;
        close_partition(cur);
    }
}

static int msg_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                      sqlite3_value **argv)
{
    (void)is; (void)argc;
    msg_cur *cur = (msg_cur *)cc;
    close_partition(cur);
    free(cur->topic);
    cur->topic = NULL;
    cur->has_part = false;
    cur->lo = 0;
    cur->hi = INT64_MAX;
    cur->ts_lo = INT64_MIN;
    cur->eof = false;
    cur->rowid = 0;
    int a = 0;
    if (idx & B_TOPIC) {
        const char *t = (const char *)sqlite3_value_text(argv[a++]);
        cur->topic = strdup(t ? t : "");
        if (!t)
            cur->eof = true;
        else if (!readable(cur, t)) {
            sqlite3_free(cc->pVtab->zErrMsg);
            cc->pVtab->zErrMsg = sqlite3_mprintf("TOPIC_AUTHORIZATION_FAILED: reading the "
                                                 "messages of %s needs READ on it", t);
            return SQLITE_ERROR;
        }
    }
    if (idx & B_PART) {
        sqlite3_value *v = argv[a++];
        int64_t p = sqlite3_value_int64(v);
        if (sqlite3_value_numeric_type(v) != SQLITE_INTEGER || p < 0 || p > INT32_MAX)
            cur->eof = true;
        cur->has_part = true;
        cur->part = (int32_t)p;
    }
    if (idx & B_EQ) {
        sqlite3_value *v = argv[a++];
        if (sqlite3_value_numeric_type(v) != SQLITE_INTEGER)
            cur->eof = true;
        cur->lo = sqlite3_value_int64(v);
        cur->hi = cur->lo < INT64_MAX ? cur->lo + 1 : INT64_MAX;
    }
    if (idx & B_LO) {
        sqlite3_value *v = argv[a++];
        double d = sqlite3_value_double(v);
        int64_t x = sqlite3_value_numeric_type(v) == SQLITE_INTEGER ? sqlite3_value_int64(v)
                  : d < -9e18 ? INT64_MIN : d > 9e18 ? INT64_MAX : (int64_t)d;
        if (sqlite3_value_type(v) == SQLITE_NULL) cur->eof = true;
        if (idx & B_LO_GT && x < INT64_MAX) x++;
        if (x > cur->lo) cur->lo = x;
    }
    if (idx & B_HI) {
        sqlite3_value *v = argv[a++];
        double d = sqlite3_value_double(v);
        int64_t x = sqlite3_value_numeric_type(v) == SQLITE_INTEGER ? sqlite3_value_int64(v)
                  : d < -9e18 ? INT64_MIN : d > 9e18 ? INT64_MAX : (int64_t)d;
        if (sqlite3_value_type(v) == SQLITE_NULL) cur->eof = true;
        if (!(idx & B_HI_LT) && x < INT64_MAX) x++;
        if (x < cur->hi) cur->hi = x;
    }
    if (idx & B_TS) {
        sqlite3_value *v = argv[a++];
        if (sqlite3_value_type(v) != SQLITE_NULL) {
            cur->ts_lo = sqlite3_value_int64(v);
            if (idx & B_TS_GT && cur->ts_lo < INT64_MAX) cur->ts_lo++;
        }
    }
    if (!cur->snap) {
        cur->snap = sq_conn_snap(cur->c);
        if (cur->snap)
            sq_snap_ref(cur->snap);
    }
    if (!cur->snap || cur->eof) {
        cur->eof = true;
        return SQLITE_OK;
    }
    cur->pi = 0;
    cur->pend = cur->snap->n;
    if (cur->topic) {                     /* the snapshot is sorted: narrow to the topic */
        size_t lo = 0, hi = cur->snap->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(cur->snap->rows[mid].topic, cur->topic) < 0) lo = mid + 1;
            else hi = mid;
        }
        cur->pi = lo;
        size_t e = lo;
        while (e < cur->snap->n && !strcmp(cur->snap->rows[e].topic, cur->topic))
            e++;
        cur->pend = e;
    }
    return advance(cur);
}

static int msg_next(sqlite3_vtab_cursor *cc) { return advance((msg_cur *)cc); }
static int msg_eof(sqlite3_vtab_cursor *cc) { return ((msg_cur *)cc)->eof; }

static bool utf8_ok(const char *s, int32_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    int32_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        int k;
        if (b == 0) return false;
        if (b < 0x80) k = 0;
        else if ((b & 0xE0) == 0xC0) k = 1;
        else if ((b & 0xF0) == 0xE0) k = 2;
        else if ((b & 0xF8) == 0xF0) k = 3;
        else return false;
        if (n - i <= k) return false;
        for (int j = 1; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80) return false;
        i += k + 1;
    }
    return true;
}

static void result_bytes(sqlite3_context *ctx, kp_str s)
{
    if (s.len < 0)
        sqlite3_result_null(ctx);
    else if (utf8_ok(s.p, s.len))
        sqlite3_result_text(ctx, s.len ? s.p : "", s.len, SQLITE_TRANSIENT);
    else
        sqlite3_result_blob(ctx, s.p, s.len, SQLITE_TRANSIENT);
}

static void json_str(kp_buf *o, kp_str s)
{
    if (s.len < 0) {
        kp_wr_raw(o, "null", 4);
        return;
    }
    if (!utf8_ok(s.p, s.len)) {                /* binary: hex, as the formats do */
        kp_wr_raw(o, "\"x'", 3);
        for (int32_t i = 0; i < s.len; i++)
            kp_buf_printf(o, "%02x", (uint8_t)s.p[i]);
        kp_wr_raw(o, "'\"", 2);
        return;
    }
    kp_wr_raw(o, "\"", 1);
    for (int32_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch == '"' || ch == '\\') { char e[2] = { '\\', (char)ch }; kp_wr_raw(o, e, 2); }
        else if (ch < 0x20) kp_buf_printf(o, "\\u%04x", ch);
        else kp_wr_raw(o, &s.p[i], 1);
    }
    kp_wr_raw(o, "\"", 1);
}

/* ---- typed values ------------------------------------------------------------------ */
/* A statement of ours on the mirror: prepared once per table, internally
 * (sql_surface.c invariant 2).  NULL when the file has no mirror. */
static sqlite3_stmt *mirror_stmt(msg_vt *v, sqlite3_stmt **st, const char *sql)
{
    if (!*st) {
        bool was = v->c->internal;
        v->c->internal = true;
        if (sqlite3_prepare_v3(v->c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, st, NULL) !=
            SQLITE_OK) {
            sqlite3_finalize(*st);
            *st = NULL;
        }
        v->c->internal = was;
    }
    return *st;
}

typedef struct ref_ctx {
    msg_vt *v;
    char **owned;                     /* the texts handed to schema/refs.c */
    size_t n, cap;
} ref_ctx;

static char *ref_keep(ref_ctx *x, const unsigned char *s)
{
    if (x->n == x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 16;
        char **o = realloc(x->owned, cap * sizeof *o);
        if (!o)
            return NULL;
        x->owned = o;
        x->cap = cap;
    }
    char *d = strdup(s ? (const char *)s : "");
    if (d)
        x->owned[x->n++] = d;
    return d;
}

/* sch_ref_lookup over registry_versions + registry_schemas. */
static int ref_lookup(void *arg, const char *subject, int32_t version, sch_ref_found *out)
{
    ref_ctx *x = arg;
    sqlite3_stmt *st = mirror_stmt(x->v, &x->v->by_version,
        "SELECT s.id, s.schema, s.refs FROM main.registry_versions v "
        "JOIN main.registry_schemas s ON s.id = v.schema_id "
        "WHERE v.subject = ?1 AND v.version = ?2");
    if (!st)
        return -1;
    int rc = -1;
    sqlite3_bind_text(st, 1, subject, -1, SQLITE_STATIC);
    sqlite3_bind_int(st, 2, version);
    if (sqlite3_step(st) == SQLITE_ROW) {
        out->id = sqlite3_column_int(st, 0);
        out->text = ref_keep(x, sqlite3_column_text(st, 1));
        out->refs = ref_keep(x, sqlite3_column_text(st, 2));
        rc = out->text && out->refs ? 0 : -1;
    }
    sqlite3_reset(st);
    return rc;
}

/* Fills e for id from the mirror: its type, and an Avro schema parsed with
 * its references. */
static void schema_load(msg_vt *v, msg_schema *e)
{
    sqlite3_stmt *st = mirror_stmt(v, &v->by_id,
        "SELECT schema_type, schema, refs FROM main.registry_schemas WHERE id = ?1");
    if (!st)
        return;
    sqlite3_bind_int(st, 1, e->id);
    ref_ctx *x = NULL;
    sch_ref_set *set = NULL;
    if (sqlite3_step(st) == SQLITE_ROW &&
        sch_type_parse((const char *)sqlite3_column_text(st, 0), &e->type) == 0) {
        e->known = true;
        x = e->type == SCH_TYPE_AVRO ? calloc(1, sizeof *x) : NULL;
        set = x ? calloc(1, sizeof *set) : NULL;
    }
    if (set) {
        x->v = v;
        char *text = ref_keep(x, sqlite3_column_text(st, 1));
        char *refs = ref_keep(x, sqlite3_column_text(st, 2));
        char err[256];
        sqlite3_reset(st);
        if (text && refs && sch_refs_collect(refs, ref_lookup, x, set, err, sizeof err) == 0 &&
            sch_avro_parse(text, strlen(text), set->refs, set->n, &e->avro, NULL, 0) != 0)
            e->avro = NULL;
        sch_refs_free(set);
    }
    sqlite3_reset(st);
    for (size_t i = 0; x && i < x->n; i++)
        free(x->owned[i]);
    if (x)
        free(x->owned);
    free(x);
    free(set);
}

/* MS1: id's entry in the cursor's cache, read from the mirror on a miss;
 * NULL when no memory. */
static const msg_schema *schema_of(msg_cur *cur, int32_t id)
{
    if (cur->schemas_n >= MSG_SCHEMAS_MAX)
        schemas_clear(cur);
    if ((cur->schemas_n + 1) * 2 > cur->schemas_cap) {
        size_t cap = cur->schemas_cap ? cur->schemas_cap * 2 : 16;
        msg_schema *t = calloc(cap, sizeof *t);
        if (!t)
            return NULL;
        for (size_t i = 0; i < cur->schemas_cap; i++) {
            if (!cur->schemas[i].used)
                continue;
            size_t k = (uint32_t)cur->schemas[i].id * 2654435761u & (cap - 1);
            while (t[k].used)
                k = (k + 1) & (cap - 1);
            t[k] = cur->schemas[i];
        }
        free(cur->schemas);
        cur->schemas = t;
        cur->schemas_cap = cap;
    }
    size_t k = (uint32_t)id * 2654435761u & (cur->schemas_cap - 1);
    while (cur->schemas[k].used && cur->schemas[k].id != id)
        k = (k + 1) & (cur->schemas_cap - 1);
    msg_schema *e = &cur->schemas[k];
    if (!e->used) {
        *e = (msg_schema){ .id = id, .used = true };
        cur->schemas_n++;
        schema_load((msg_vt *)cur->base.pVtab, e);
    }
    return e;
}

/* The schema of bytes in the wire format, and where their body starts;
 * NULL when they are not, or the registry does not know the id. */
static const msg_schema *typed(msg_cur *cur, kp_str b, size_t *body)
{
    int32_t id;
    if (b.len < 0 || sch_wire_split((const uint8_t *)b.p, (size_t)b.len, &id, body) != 0)
        return NULL;
    const msg_schema *e = schema_of(cur, id);
    return e && e->known ? e : NULL;
}

static void result_schema_id(msg_cur *cur, sqlite3_context *ctx, kp_str b)
{
    size_t body;
    const msg_schema *e = typed(cur, b, &body);
    if (e)
        sqlite3_result_int(ctx, e->id);
    else
        sqlite3_result_null(ctx);
}


/* A JSON Schema body is JSON text, or NULL is answered (json_extract on
 * anything else would fail the whole statement). */
static bool json_text(const char *p, size_t n)
{
    json_t *j = json_loadb(p, n, JSON_DECODE_ANY, NULL);
    bool ok = j != NULL;
    json_decref(j);
    return ok;
}

static void result_json(msg_cur *cur, sqlite3_context *ctx, kp_str b)
{
    size_t body;
    const msg_schema *e = typed(cur, b, &body);
    const char *p = e ? b.p + body : NULL;
    int32_t n = e ? b.len - (int32_t)body : 0;
    if (e && e->avro) {
        kp_buf_reset(&cur->json);
        if (sch_avro_to_json(e->avro, (const uint8_t *)p, (size_t)n, &cur->json) == 0 &&
            !cur->json.err) {
            sqlite3_result_text(ctx, (const char *)cur->json.data, (int)cur->json.len,
                                SQLITE_TRANSIENT);
            return;
        }
    } else if (e && e->type == SCH_TYPE_JSON && utf8_ok(p, n) && json_text(p, (size_t)n)) {
        sqlite3_result_text(ctx, n ? p : "", n, SQLITE_TRANSIENT);
        return;
    }
    sqlite3_result_null(ctx);
}

static int msg_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    msg_cur *cur = (msg_cur *)cc;
    switch (col) {
    case M_TOPIC: sqlite3_result_text(ctx, cur->cur->topic, -1, SQLITE_TRANSIENT); break;
    case M_PARTITION: sqlite3_result_int(ctx, cur->cur->partition); break;
    case M_OFFSET: sqlite3_result_int64(ctx, cur->rec.Offset); break;
    case M_TIMESTAMP: sqlite3_result_int64(ctx, cur->rec.Timestamp); break;
    case M_KEY: result_bytes(ctx, cur->rec.Key); break;
    case M_VALUE: result_bytes(ctx, cur->rec.Value); break;
    case M_KEY_SCHEMA_ID: result_schema_id(cur, ctx, cur->rec.Key); break;
    case M_VALUE_SCHEMA_ID: result_schema_id(cur, ctx, cur->rec.Value); break;
    case M_KEY_JSON: result_json(cur, ctx, cur->rec.Key); break;
    case M_VALUE_JSON: result_json(cur, ctx, cur->rec.Value); break;
    case M_HEADERS: {
        if (cur->rec.HeadersCount <= 0) {
            sqlite3_result_null(ctx);
            break;
        }
        kp_buf o;
        kp_buf_init(&o);
        kp_record r = cur->rec;                  /* kp_header_next advances a copy */
        kp_header h;
        kp_wr_raw(&o, "[", 1);
        for (int n = 0; kp_header_next(&r, &h) == 1; n++) {
            kp_wr_raw(&o, n ? ",{\"key\":" : "{\"key\":", n ? 8 : 7);
            json_str(&o, h.Key);
            kp_wr_raw(&o, ",\"value\":", 9);
            json_str(&o, h.Value);
            kp_wr_raw(&o, "}", 1);
        }
        kp_wr_raw(&o, "]", 1);
        sqlite3_result_text(ctx, (const char *)o.data, (int)o.len, SQLITE_TRANSIENT);
        kp_buf_free(&o);
        break;
    }
    }
    return SQLITE_OK;
}

static int msg_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    *id = ((msg_cur *)cc)->rowid;
    return SQLITE_OK;
}

static sqlite3_module msg_module = {
    .xConnect = msg_connect, .xBestIndex = msg_best_index, .xDisconnect = msg_disconnect,
    .xOpen = msg_open, .xClose = msg_close, .xFilter = msg_filter, .xNext = msg_next,
    .xEof = msg_eof, .xColumn = msg_column, .xRowid = msg_rowid,
};

int sq_messages_register(sq_conn *c)
{
    return sqlite3_create_module(c->db, "messages", &msg_module, c) ? -1 : 0;
}
