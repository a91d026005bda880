/*
 * admin/sql_format.c — running statements through the surface and
 * writing their rows as an aligned table, CSV (RFC 4180), JSON (an array
 * of objects per result set) or sqlite3's "line" mode.
 *
 * Values: NULL is NULL in table/line mode, empty in CSV, null in JSON.
 * TEXT is written as is (JSON-escaped in JSON).  A BLOB that is valid
 * UTF-8 is written as text; any other BLOB as x'hex' (JSON: "x'hex'").
 *
 * The table format holds a result set in memory to size its columns; it
 * is bounded by the row limit (admin.sql.max.rows), checked as rows come.
 *
 * JSON in TEXT (messages' key_json / value_json, subjects' schema …): kept
 * compact and whole on its one line in a table, pretty-printed in line
 * mode (sluice-sql's .mode line or \x, psql's expanded display), where each
 * value has its own lines: two spaces a level, its lines under the first.
 */
#include "admin/sql_surface.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sqlite3.h>

/* Not a SQLite code: the row limit was hit. */
#define ROW_LIMIT (-100)
/* Not a SQLite code: the result outgrew SQ_MAX_RESULT_BYTES.  Rows are
 * bounded by admin.sql.max.rows but a row is not (zeroblob, printf, a
 * recursive CTE …): without this one SELECT could make the broker allocate
 * gigabytes (found by tests/fuzz/fuzz_sql_authorizer.c). */
#define BYTE_LIMIT (-101)

int sq_format_parse(const char *name)
{
    if (!name) return -1;
    if (!strcasecmp(name, "table") || !strcasecmp(name, "text") ||
        !strcasecmp(name, "column")) return SQ_FMT_TABLE;
    if (!strcasecmp(name, "csv")) return SQ_FMT_CSV;
    if (!strcasecmp(name, "json")) return SQ_FMT_JSON;
    if (!strcasecmp(name, "line")) return SQ_FMT_LINE;
    return -1;
}

void sq_result_free(sq_result *res)
{
    kp_buf_free(&res->out);
}

static bool valid_utf8(const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        size_t k;
        if (b == 0)
            return false;
        if (b < 0x80) k = 0;
        else if ((b & 0xE0) == 0xC0) k = 1;
        else if ((b & 0xF0) == 0xE0) k = 2;
        else if ((b & 0xF8) == 0xF0) k = 3;
        else return false;
        if (n - i <= k)
            return false;
        for (size_t j = 1; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80)
                return false;
        i += k + 1;
    }
    return true;
}

/* Decimal text of v into num (at least 21 bytes, not NUL-terminated); the
 * length.  What sqlite3_column_text would give for an INTEGER, without
 * SQLite converting the value in place (a printf and an allocation per
 * cell: most of the cost of a wide integer result). */
static size_t i64_text(char *num, int64_t v)
{
    char tmp[20];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0, len = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        num[len++] = '-';
    while (n)
        num[len++] = tmp[--n];
    return len;
}

/* Column i of the current row.  The sqlite3_column_* accessors each take
 * the connection's mutex and check for a failed allocation: a third of the
 * cost of writing a wide result.  Reading the value itself with
 * sqlite3_value_* is what SQLite calls "unprotected" use, unsafe only when
 * another thread uses the connection meanwhile: ours belongs to one worker
 * (SQLITE_OPEN_NOMUTEX, sql_worker.c). */
static sqlite3_value *col_value(sqlite3_stmt *st, int i) { return sqlite3_column_value(st, i); }

/* The text of a value as it is shown: *hex set for a binary blob.  num is
 * scratch space for an INTEGER's digits (the result may point into it). */
static const char *value_text(sqlite3_stmt *st, int i, size_t *len, bool *hex, char *num)
{
    sqlite3_value *v = col_value(st, i);
    *hex = false;
    int t = sqlite3_value_type(v);
    if (t == SQLITE_NULL) {
        *len = 0;
        return NULL;
    }
    if (t == SQLITE_INTEGER) {
        *len = i64_text(num, sqlite3_value_int64(v));
        return num;
    }
    if (t == SQLITE_BLOB) {
        const uint8_t *p = sqlite3_value_blob(v);
        *len = (size_t)sqlite3_value_bytes(v);
        if (*len && !valid_utf8(p, *len))
            *hex = true;
        return p ? (const char *)p : "";
    }
    const char *s = (const char *)sqlite3_value_text(v);
    *len = (size_t)sqlite3_value_bytes(v);
    return s ? s : "";
}

static void put_hex(kp_buf *o, const char *p, size_t n)
{
    static const char hx[] = "0123456789abcdef";
    kp_wr_raw(o, "x'", 2);
    uint8_t *d = kp_buf_reserve(o, n * 2);
    if (!d)
        return;
    for (size_t i = 0; i < n; i++) {
        d[2 * i] = (uint8_t)hx[(uint8_t)p[i] >> 4];
        d[2 * i + 1] = (uint8_t)hx[(uint8_t)p[i] & 15];
    }
    o->len += n * 2;
    kp_wr_raw(o, "'", 1);
}

static void put_plain(kp_buf *o, sqlite3_stmt *st, int i, const char *null_as)
{
    if (o->len > SQ_MAX_RESULT_BYTES)      /* BYTE_LIMIT ends the statement */
        return;
    size_t n;
    bool hex;
    char num[24];
    const char *s = value_text(st, i, &n, &hex, num);
    if (!s)
        kp_wr_raw(o, null_as, strlen(null_as));
    else if (hex)
        put_hex(o, s, n);
    else
        kp_wr_raw(o, s, n);
}

/* s (n bytes) laid out two spaces a level, each new line starting with pad
 * spaces, tokens as they are (numbers and strings byte for byte); false,
 * nothing written, unless it is a JSON object or array. */
static bool put_pretty_json(kp_buf *o, const char *s, size_t n, size_t pad)
{
    if (n < 2 || (s[0] != '{' && s[0] != '[') || n > SQ_MAX_VALUE_BYTES)
        return false;
    json_t *j = json_loadb(s, n, 0, NULL);
    if (!j)
        return false;
    json_decref(j);
    size_t depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (in_str) {
            kp_wr_raw(o, &ch, 1);
            if (ch == '\\' && i + 1 < n)
                kp_wr_raw(o, &s[++i], 1);
            else if (ch == '"')
                in_str = false;
            continue;
        }
        size_t nl = 0;                  /* a new line after (1) or before (2) ch */
        switch (ch) {
        case ' ': case '\t': case '\n': case '\r':
            continue;
        case '"':
            in_str = true;
            break;
        case '{': case '[': {
            size_t k = i + 1;
            while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r'))
                k++;
            if (k < n && (s[k] == '}' || s[k] == ']')) {          /* empty: {} [] */
                kp_wr_raw(o, &ch, 1);
                kp_wr_raw(o, &s[k], 1);
                i = k;
                continue;
            }
            depth++;
            nl = 1;
            break;
        }
        case '}': case ']':
            depth--;
            nl = 2;
            break;
        case ',':
            nl = 1;
            break;
        case ':':
            kp_wr_raw(o, ": ", 2);
            continue;
        }
        if (nl == 1)
            kp_wr_raw(o, &ch, 1);
        if (nl) {
            kp_wr_raw(o, "\n", 1);
            for (size_t k = 0; k < pad + 2 * depth; k++)
                kp_wr_raw(o, " ", 1);
        }
        if (nl != 1)
            kp_wr_raw(o, &ch, 1);
    }
    return true;
}

static void put_json_string(kp_buf *o, const char *s, size_t n)
{
    kp_wr_raw(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') {
            char e[2] = { '\\', (char)ch };
            kp_wr_raw(o, e, 2);
        } else if (ch == '\n') {
            kp_wr_raw(o, "\\n", 2);
        } else if (ch == '\r') {
            kp_wr_raw(o, "\\r", 2);
        } else if (ch == '\t') {
            kp_wr_raw(o, "\\t", 2);
        } else if (ch < 0x20) {
            kp_buf_printf(o, "\\u%04x", ch);
        } else {
            kp_wr_raw(o, &s[i], 1);
        }
    }
    kp_wr_raw(o, "\"", 1);
}

static void put_json_value(kp_buf *o, sqlite3_stmt *st, int i)
{
    if (o->len > SQ_MAX_RESULT_BYTES)      /* BYTE_LIMIT ends the statement */
        return;
    sqlite3_value *v = col_value(st, i);
    int t = sqlite3_value_type(v);
    if (t == SQLITE_NULL) {
        kp_wr_raw(o, "null", 4);
    } else if (t == SQLITE_INTEGER) {
        char num[24];
        kp_wr_raw(o, num, i64_text(num, sqlite3_value_int64(v)));
    } else if (t == SQLITE_FLOAT) {
        double d = sqlite3_value_double(v);
        if (d != d || d - d != 0)                       /* NaN, inf: not JSON */
            kp_wr_raw(o, "null", 4);
        else
            kp_buf_printf(o, "%.17g", d);
    } else {
        size_t n;
        bool hex;
        char num[24];
        const char *s = value_text(st, i, &n, &hex, num);
        if (hex) {
            kp_buf tmp;
            kp_buf_init(&tmp);
            put_hex(&tmp, s, n);
            put_json_string(o, (const char *)tmp.data, tmp.len);
            kp_buf_free(&tmp);
        } else {
            put_json_string(o, s, n);
        }
    }
}

static void put_csv_field(kp_buf *o, const char *s, size_t n)
{
    bool quote = false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r')
            quote = true;
    if (!quote) {
        kp_wr_raw(o, s, n);
        return;
    }
    kp_wr_raw(o, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"')
            kp_wr_raw(o, "\"", 1);
        kp_wr_raw(o, &s[i], 1);
    }
    kp_wr_raw(o, "\"", 1);
}

static void put_csv_value(kp_buf *o, sqlite3_stmt *st, int i)
{
    if (o->len > SQ_MAX_RESULT_BYTES)      /* BYTE_LIMIT ends the statement */
        return;
    size_t n;
    bool hex;
    char num[24];
    const char *s = value_text(st, i, &n, &hex, num);
    if (!s)
        return;
    if (hex) {
        put_hex(o, s, n);
        return;
    }
    put_csv_field(o, s, n);
}

/* Display width of UTF-8 text: code points (good enough for names). */
static size_t width(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++)
        if (((unsigned char)s[i] & 0xC0) != 0x80)
            w++;
    return w;
}

/* Table: cells collected as (offset, length) into one buffer. */
typedef struct cell { size_t at, len; bool right; } cell;

static int run_table(sq_conn *c, sqlite3_stmt *st, int ncol, bool headers,
                     sq_result *res, int rc)
{
    kp_buf text;
    kp_buf_init(&text);
    cell *cells = NULL;
    size_t ncells = 0, cap = 0;
    size_t *w = calloc((size_t)ncol, sizeof *w);
    int64_t rows = 0;
    for (; rc == SQLITE_ROW; rc = sqlite3_step(st)) {
        if (++rows > c->env.max_rows) {
            rc = ROW_LIMIT;
            break;
        }
        if (text.len > SQ_MAX_RESULT_BYTES) {
            rc = BYTE_LIMIT;
            break;
        }
        if (ncells + (size_t)ncol > cap) {
            cap = cap ? cap * 2 : 64 + (size_t)ncol;
            cells = realloc(cells, cap * sizeof *cells);
            if (!cells)
                abort();
        }
        for (int i = 0; i < ncol; i++) {
            cell *ce = &cells[ncells++];
            ce->at = text.len;
            int t = sqlite3_value_type(col_value(st, i));
            ce->right = t == SQLITE_INTEGER || t == SQLITE_FLOAT;
            put_plain(&text, st, i, "NULL");
            ce->len = text.len - ce->at;
            /* One line per cell: newlines would break the alignment. */
            for (size_t k = ce->at; k < text.len; k++)
                if (text.data[k] == '\n' || text.data[k] == '\r' || text.data[k] == '\t')
                    text.data[k] = ' ';
            size_t cw = width((const char *)text.data + ce->at, ce->len);
            if (cw > w[i])
                w[i] = cw;
        }
    }
    if (rc == SQLITE_DONE && text.len > SQ_MAX_RESULT_BYTES)
        rc = BYTE_LIMIT;
    if (headers)
        for (int i = 0; i < ncol; i++) {
            const char *nm = sqlite3_column_name(st, i);
            size_t cw = width(nm, strlen(nm));
            if (cw > w[i])
                w[i] = cw;
        }
    kp_buf *o = &res->out;
    if (rc == SQLITE_DONE) {
        if (headers) {
            for (int i = 0; i < ncol; i++) {
                const char *nm = sqlite3_column_name(st, i);
                kp_buf_printf(o, "%s%s", i ? "  " : "", nm);
                if (i + 1 < ncol)
                    for (size_t k = width(nm, strlen(nm)); k < w[i]; k++)
                        kp_wr_raw(o, " ", 1);
            }
            kp_wr_raw(o, "\n", 1);
            for (int i = 0; i < ncol; i++) {
                if (i)
                    kp_wr_raw(o, "  ", 2);
                for (size_t k = 0; k < w[i]; k++)
                    kp_wr_raw(o, "-", 1);
            }
            kp_wr_raw(o, "\n", 1);
        }
        for (size_t r = 0; r < ncells; r += (size_t)ncol) {
            for (int i = 0; i < ncol; i++) {
                cell *ce = &cells[r + (size_t)i];
                size_t cw = width((const char *)text.data + ce->at, ce->len);
                if (i)
                    kp_wr_raw(o, "  ", 2);
                if (ce->right)
                    for (size_t k = cw; k < w[i]; k++)
                        kp_wr_raw(o, " ", 1);
                kp_wr_raw(o, text.data + ce->at, ce->len);
                if (!ce->right && i + 1 < ncol)
                    for (size_t k = cw; k < w[i]; k++)
                        kp_wr_raw(o, " ", 1);
            }
            kp_wr_raw(o, "\n", 1);
        }
        res->rows += rows;
    }
    free(w);
    free(cells);
    kp_buf_free(&text);
    return rc;
}

static int run_stream(sq_conn *c, sqlite3_stmt *st, int ncol, int format,
                      bool headers, sq_result *res, int rc)
{
    kp_buf *o = &res->out;
    int64_t rows = 0;
    if (format == SQ_FMT_CSV && headers) {
        for (int i = 0; i < ncol; i++) {
            const char *nm = sqlite3_column_name(st, i);
            if (i)
                kp_wr_raw(o, ",", 1);
            put_csv_field(o, nm, strlen(nm));
        }
        kp_wr_raw(o, "\r\n", 2);
    }
    if (format == SQ_FMT_JSON)
        kp_wr_raw(o, "[", 1);
    for (; rc == SQLITE_ROW; rc = sqlite3_step(st)) {
        if (++rows > c->env.max_rows) {
            rc = ROW_LIMIT;
            break;
        }
        if (o->len > SQ_MAX_RESULT_BYTES) {
            rc = BYTE_LIMIT;
            break;
        }
        switch (format) {
        case SQ_FMT_CSV:
            for (int i = 0; i < ncol; i++) {
                if (i)
                    kp_wr_raw(o, ",", 1);
                put_csv_value(o, st, i);
            }
            kp_wr_raw(o, "\r\n", 2);
            break;
        case SQ_FMT_JSON:
            kp_wr_raw(o, rows > 1 ? ",\n{" : "\n{", rows > 1 ? 3 : 2);
            for (int i = 0; i < ncol; i++) {
                const char *nm = sqlite3_column_name(st, i);
                if (i)
                    kp_wr_raw(o, ",", 1);
                put_json_string(o, nm, strlen(nm));
                kp_wr_raw(o, ":", 1);
                put_json_value(o, st, i);
            }
            kp_wr_raw(o, "}", 1);
            break;
        case SQ_FMT_LINE: {
            size_t wmax = 0;
            for (int i = 0; i < ncol; i++) {
                size_t l = strlen(sqlite3_column_name(st, i));
                if (l > wmax)
                    wmax = l;
            }
            if (rows > 1)
                kp_wr_raw(o, "\n", 1);
            for (int i = 0; i < ncol; i++) {
                kp_buf_printf(o, "%*s = ", (int)wmax, sqlite3_column_name(st, i));
                sqlite3_value *v = col_value(st, i);
                if (sqlite3_value_type(v) != SQLITE_TEXT || o->len > SQ_MAX_RESULT_BYTES ||
                    !put_pretty_json(o, (const char *)sqlite3_value_text(v),
                                     (size_t)sqlite3_value_bytes(v), wmax + 3))
                    put_plain(o, st, i, "NULL");
                kp_wr_raw(o, "\n", 1);
            }
            break;
        }
        }
    }
    if (rc == SQLITE_DONE && o->len > SQ_MAX_RESULT_BYTES)
        rc = BYTE_LIMIT;
    if (format == SQ_FMT_JSON)
        kp_wr_raw(o, rows ? "\n]\n" : "]\n", rows ? 3 : 2);
    res->rows += rows;
    return rc;
}

void sq_run(sq_conn *c, const char *sql, int format, bool headers, sq_result *res)
{
    const char *tail = sql;
    int sets = 0;
    c->deadline_us = c->env.timeout_ms > 0 ? sq_mono_us() + c->env.timeout_ms * 1000 : 0;
    while (tail && *tail) {
        sqlite3_stmt *st = NULL;
        c->deny[0] = 0;
        c->wrote = false;
        c->set_compat = c->set_mode = false;
        c->version_reads = 0;
        c->names_versions = false;
        c->changes = 0;
        int rc = sqlite3_prepare_v2(c->db, tail, -1, &st, &tail);
        if (rc != SQLITE_OK) {
            res->failed = true;
            snprintf(res->err, sizeof res->err, "%s",
                     c->deny[0] ? c->deny : sqlite3_errmsg(c->db));
            return;
        }
        if (!st)                                       /* whitespace / comment */
            continue;
        if (!sqlite3_stmt_readonly(st) && !c->wrote) {
            sqlite3_finalize(st);
            res->failed = true;
            snprintf(res->err, sizeof res->err, "only SELECT, read-only PRAGMA and "
                     "the documented INSERT/UPDATE/DELETE are allowed");
            return;
        }
        int ncol = sqlite3_column_count(st);
        rc = sqlite3_step(st);
        if (ncol > 0 && (rc == SQLITE_ROW || rc == SQLITE_DONE)) {
            if (sets++ && format != SQ_FMT_JSON)
                kp_wr_raw(&res->out, "\n", 1);
            if (format == SQ_FMT_TABLE)
                rc = run_table(c, st, ncol, headers, res, rc);
            else
                rc = run_stream(c, st, ncol, format, headers, res, rc);
        }
        if (rc == SQLITE_DONE && c->nrows &&
            sq_schema_writes(c, res->err, sizeof res->err) != 0) {
            res->failed = true;
            rc = SQLITE_OK;                            /* err says why */
        }
        sq_schema_writes(c, NULL, 0);                  /* whatever is left: forgotten */
        if (c->wrote)
            res->changes += c->changes;
        if (rc != SQLITE_DONE && !res->failed) {
            res->failed = true;
            if (rc == ROW_LIMIT)
                snprintf(res->err, sizeof res->err, "the result has more than %lld rows "
                         "(admin.sql.max.rows); add a LIMIT or a WHERE",
                         (long long)c->env.max_rows);
            else if (rc == BYTE_LIMIT)
                snprintf(res->err, sizeof res->err, "the result is larger than %d MiB; "
                         "add a LIMIT or select fewer columns", SQ_MAX_RESULT_BYTES >> 20);
            else
                snprintf(res->err, sizeof res->err, "%s",
                         c->deny[0] ? c->deny : sqlite3_errmsg(c->db));
        }
        sqlite3_finalize(st);
        /* Live numbers are per statement: the next one takes a fresh snapshot. */
        if (c->snap) {
            sq_snap_unref(c->snap);
            c->snap = NULL;
        }
        if (res->failed)
            return;
    }
    if (!sets && format == SQ_FMT_JSON)       /* writes: still a JSON document */
        kp_wr_raw(&res->out, "[]\n", 3);
}
