/*
 * schema/canon.c — the texts of a parsed schema: Java's Schema.toString()
 * (what Confluent stores and compares), Confluent's normalized form, Avro's
 * Parsing Canonical Form and its CRC-64-AVRO fingerprint.
 *
 * toString, attribute by attribute as Java 1.11 writes them:
 *   primitive  "int", or {"type":"int",<props>} when it has properties
 *   record     {"type":"record"|"error","name":n[,"namespace":ns][,"doc":d],
 *               "fields":[{"name":f,"type":t[,"doc":d][,"default":v]
 *               [,"order":o][,"aliases":[..]]<props>}..]<props>[,"aliases":[..]]}
 *   enum       {"type":"enum","name":..,"doc","symbols":[..][,"default":s]<props>,"aliases"}
 *   fixed      {"type":"fixed","name":..,"doc","size":n<props>,"aliases"}
 *   array/map  {"type":"array","items":t<props>}  {"type":"map","values":t<props>}
 *   union      [t,..]
 * A named type already written (or defined by a reference) is written as its
 * name, qualified only when its namespace differs from the enclosing one; a
 * namespace is written only when it differs from the enclosing one.  JSON
 * values (defaults, properties) are written as Jackson does: compact,
 * doubles as Java's Double.toString.
 *
 * Normalized (normalize=true): Confluent's AvroSchemaUtils.toNormalizedString,
 * Parsing Canonical Form's layout with what PCF drops kept:
 *   named      {"name":full,"type":k, "symbols"|"size"[,logical]|"fields",
 *               [,"doc"][,"aliases":sorted full names][,enum "default"]<props sorted>}
 *   field      {"name":f,"type":t,"order":"ASCENDING"|..[,"doc"][,"aliases":sorted]
 *               [,"default":v]<props sorted>}
 *   array/map  {"type":"array","items":t<props sorted>}
 *   primitive  "int", or {"type":"int"[,"logicalType":..(decimal: precision,
 *               scale)]<props sorted>}
 * Nested JSON objects in properties are sorted by key too; a default of a
 * float or double field is written as a floating-point number (Java turns
 * it into a Double); types from references are written by full name.
 *
 * Every walk keeps the set of named types written (seen[], per call): the
 * graph may be cyclic (sch_int.h).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/sch_int.h"

/* ---- JSON as Jackson writes it -------------------------------------------- */
void sch_json_string(kp_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    kp_wr_raw(b, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t ch = (uint8_t)s[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\')
            continue;
        kp_wr_raw(b, s + run, i - run);
        run = i + 1;
        char e[6] = {'\\', 0};
        switch (ch) {
        case '"': e[1] = '"'; break;
        case '\\': e[1] = '\\'; break;
        case '\b': e[1] = 'b'; break;
        case '\f': e[1] = 'f'; break;
        case '\n': e[1] = 'n'; break;
        case '\r': e[1] = 'r'; break;
        case '\t': e[1] = 't'; break;
        default:
            memcpy(e, "\\u00", 4);
            e[4] = hex[ch >> 4];
            e[5] = hex[ch & 15];
            kp_wr_raw(b, e, 6);
            continue;
        }
        kp_wr_raw(b, e, 2);
    }
    kp_wr_raw(b, s + run, len - run);
    kp_wr_raw(b, "\"", 1);
}

static void w_str(kp_buf *b, const char *s) { sch_json_string(b, s, strlen(s)); }
static void w_raw(kp_buf *b, const char *s) { kp_wr_raw(b, s, strlen(s)); }

/* Java's Double.toString: the shortest digits that read back as d, plain
 * in [1e-3, 1e7), else d.dddE±n. */
static void w_double(kp_buf *b, double d)
{
    if (isnan(d) || isinf(d)) {
        w_raw(b, isnan(d) ? "\"NaN\"" : d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        return;
    }
    if (d == 0) {
        w_raw(b, signbit(d) ? "-0.0" : "0.0");
        return;
    }
    char e[40];
    for (int p = 0; p < 17; p++) {
        snprintf(e, sizeof e, "%.*e", p, d);
        if (strtod(e, NULL) == d)
            break;
    }
    /* e: [-]D[.DDD]e±XX */
    char digits[24];
    size_t nd = 0;
    const char *q = e;
    bool neg = *q == '-';
    if (neg)
        q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    digits[nd] = 0;
    int exp = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        digits[--nd] = 0;
    char out[64];
    size_t o = 0;
    if (neg)
        out[o++] = '-';
    double a = fabs(d);
    if (a >= 1e-3 && a < 1e7) {
        if (exp < 0) {
            out[o++] = '0';
            out[o++] = '.';
            for (int i = -1; i > exp; i--)
                out[o++] = '0';
            for (size_t i = 0; i < nd; i++)
                out[o++] = digits[i];
        } else {
            for (int i = 0; i <= exp; i++)
                out[o++] = (size_t)i < nd ? digits[i] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 >= nd)
                out[o++] = '0';
            for (size_t i = (size_t)exp + 1; i < nd; i++)
                out[o++] = digits[i];
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        out[o++] = '.';
        if (nd == 1)
            out[o++] = '0';
        for (size_t i = 1; i < nd; i++)
            out[o++] = digits[i];
        snprintf(out + o, sizeof out - o, "E%d", exp);
    }
    w_raw(b, out);
}

static void w_json(kp_buf *b, const json_t *v, bool sorted, int depth)
{
    if (depth > JSON_PARSER_MAX_DEPTH + 8) { /* cannot happen: jansson parsed it */
        w_raw(b, "null");
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        w_raw(b, "{");
        size_t n = json_object_size(v), k = 0;
        const char **keys = NULL;
        if (sorted && n > 1 && (keys = malloc(n * sizeof *keys))) {
            const char *key;
            json_t *e;
            json_object_foreach((json_t *)v, key, e) keys[k++] = key;
            for (size_t i = 1; i < n; i++) /* insertion sort: property lists are short */
                for (size_t j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
                    const char *t = keys[j];
                    keys[j] = keys[j - 1];
                    keys[j - 1] = t;
                }
            for (size_t i = 0; i < n; i++) {
                if (i)
                    w_raw(b, ",");
                w_str(b, keys[i]);
                w_raw(b, ":");
                w_json(b, json_object_get(v, keys[i]), sorted, depth + 1);
            }
            free(keys);
        } else {
            const char *key;
            json_t *e;
            json_object_foreach((json_t *)v, key, e) {
                if (k++)
                    w_raw(b, ",");
                w_str(b, key);
                w_raw(b, ":");
                w_json(b, e, sorted, depth + 1);
            }
        }
        w_raw(b, "}");
        return;
    }
    case JSON_ARRAY: {
        w_raw(b, "[");
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) {
            if (i)
                w_raw(b, ",");
            w_json(b, e, sorted, depth + 1);
        }
        w_raw(b, "]");
        return;
    }
    case JSON_STRING: sch_json_string(b, json_string_value(v), json_string_length(v)); return;
    case JSON_INTEGER: kp_buf_printf(b, "%lld", (long long)json_integer_value(v)); return;
    case JSON_REAL: w_double(b, json_real_value(v)); return;
    case JSON_TRUE: w_raw(b, "true"); return;
    case JSON_FALSE: w_raw(b, "false"); return;
    case JSON_NULL: w_raw(b, "null"); return;
    }
}

void sch_json_write(kp_buf *b, const json_t *v) { w_json(b, v, false, 0); }

/* ---- toString and the normalized form --------------------------------------- */
typedef struct {
    kp_buf *b;
    bool norm;                 /* w_props: sorted keys (the normalized form) */
    bool *seen;
} wctx;

static void w_props(wctx *w, const json_t *props)
{
    const char *key;
    json_t *v;
    if (!props)
        return;
    if (w->norm && json_object_size(props) > 1) {
        kp_buf t; /* the sorted object, its braces dropped */
        kp_buf_init(&t);
        w_json(&t, props, true, 0);
        if (!t.err && t.len > 2) {
            w_raw(w->b, ",");
            kp_wr_raw(w->b, t.data + 1, t.len - 2);
        }
        if (t.err)
            w->b->err = t.err;
        kp_buf_free(&t);
        return;
    }
    json_object_foreach((json_t *)props, key, v) {
        w_raw(w->b, ",");
        w_str(w->b, key);
        w_raw(w->b, ":");
        w_json(w->b, v, w->norm, 0);
    }
}

static bool same_space(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

/* Java's Name.getQualified(space): the short name when in the enclosing
 * namespace (unless it would read as a primitive), else the full name. */
static const char *qualified(const char *full, const char *space, const char *cur)
{
    const char *dot = strrchr(full, '.');
    const char *name = dot ? dot + 1 : full;
    if (space && cur && strcmp(space, cur) == 0) {
        static const char *const prims[] = {"null", "boolean", "int", "long", "float", "double",
                                            "bytes", "string", "record", "enum", "array", "map",
                                            "union", "fixed", NULL};
        for (const char *const *p = prims; *p; p++)
            if (strcmp(*p, name) == 0)
                return full;
        return name;
    }
    return full;
}

static void w_aliases(wctx *w, const sch_node *n)
{
    if (!n->naliases)
        return;
    w_raw(w->b, ",\"aliases\":[");
    for (size_t i = 0; i < n->naliases; i++) {
        if (i)
            w_raw(w->b, ",");
        char *asp = NULL;
        const char *dot = strrchr(n->aliases[i], '.');
        if (dot)
            asp = strndup(n->aliases[i], (size_t)(dot - n->aliases[i]));
        w_str(w->b, qualified(n->aliases[i], asp, n->space));
        free(asp);
    }
    w_raw(w->b, "]");
}

static void w_node(wctx *w, const sch_node *n, const char *cur);

static void w_fields(wctx *w, const sch_node *n)
{
    static const char *const orders[] = {"ascending", "descending", "ignore"};
    w_raw(w->b, ",\"fields\":[");
    for (size_t i = 0; i < n->nfields; i++) {
        const sch_field *f = &n->fields[i];
        w_raw(w->b, i ? ",{\"name\":" : "{\"name\":");
        w_str(w->b, f->name);
        w_raw(w->b, ",\"type\":");
        w_node(w, f->type, n->space);
        if (f->doc) {
            w_raw(w->b, ",\"doc\":");
            w_str(w->b, f->doc);
        }
        if (f->dflt) {
            w_raw(w->b, ",\"default\":");
            w_json(w->b, f->dflt, false, 0);
        }
        if (f->order != SCH_ORDER_ASCENDING) {
            w_raw(w->b, ",\"order\":");
            w_str(w->b, orders[f->order]);
        }
        if (f->aliases && json_array_size(f->aliases)) {
            w_raw(w->b, ",\"aliases\":");
            w_json(w->b, f->aliases, false, 0);
        }
        w_props(w, f->props);
        w_raw(w->b, "}");
    }
    w_raw(w->b, "]");
}

static void w_node(wctx *w, const sch_node *n, const char *cur)
{
    kp_buf *b = w->b;
    if (n->kind <= SCH_K_STRING) {
        if (!n->props || !json_object_size(n->props)) {
            w_str(b, sch_kind_name(n->kind));
            return;
        }
        w_raw(b, "{\"type\":");
        w_str(b, sch_kind_name(n->kind));
        w_props(w, n->props);
        w_raw(b, "}");
        return;
    }
    if (n->kind == SCH_K_UNION) {
        w_raw(b, "[");
        for (size_t i = 0; i < n->nbranches; i++) {
            if (i)
                w_raw(b, ",");
            w_node(w, n->branches[i], cur);
        }
        w_raw(b, "]");
        return;
    }
    if (n->kind == SCH_K_ARRAY || n->kind == SCH_K_MAP) {
        w_raw(b, n->kind == SCH_K_ARRAY ? "{\"type\":\"array\",\"items\":"
                                        : "{\"type\":\"map\",\"values\":");
        w_node(w, n->items, cur);
        w_props(w, n->props);
        w_raw(b, "}");
        return;
    }
    /* named */
    if (n->external || w->seen[n->id]) {
        w_str(b, qualified(n->full, n->space, cur));
        return;
    }
    w->seen[n->id] = true;
    w_raw(b, "{\"type\":");
    w_str(b, n->kind == SCH_K_RECORD ? (n->is_error ? "error" : "record") : sch_kind_name(n->kind));
    w_raw(b, ",\"name\":");
    w_str(b, n->name);
    if (n->space) {
        if (!same_space(n->space, cur)) {
            w_raw(b, ",\"namespace\":");
            w_str(b, n->space);
        }
    } else if (!n->space && cur) {
        w_raw(b, ",\"namespace\":\"\"");
    }
    if (n->doc) {
        w_raw(b, ",\"doc\":");
        w_str(b, n->doc);
    }
    if (n->kind == SCH_K_RECORD) {
        w_fields(w, n);
    } else if (n->kind == SCH_K_ENUM) {
        w_raw(b, ",\"symbols\":[");
        for (size_t i = 0; i < n->nsymbols; i++) {
            if (i)
                w_raw(b, ",");
            w_str(b, n->symbols[i]);
        }
        w_raw(b, "]");
        if (n->enum_default) {
            w_raw(b, ",\"default\":");
            w_str(b, n->enum_default);
        }
    } else {
        kp_buf_printf(b, ",\"size\":%lld", (long long)n->size);
    }
    w_props(w, n->props);
    w_aliases(w, n);
    w_raw(b, "}");
}

/* ---- Confluent's normalized form ------------------------------------------- */
/* Properties sorted by key, less those the logical type wrote. */
static void n_props(wctx *w, const json_t *props, const char *lt)
{
    if (!props || !json_object_size(props))
        return;
    if (!lt) {
        w_props(w, props);
        return;
    }
    json_t *rest = json_copy((json_t *)props);
    if (!rest) {
        w->b->err = KP_E_NOMEM;
        return;
    }
    json_object_del(rest, "logicalType");
    if (lt[0] == 'd' && lt[1] == 'e') {
        json_object_del(rest, "precision");
        json_object_del(rest, "scale");
    }
    w_props(w, rest);
    json_decref(rest);
}

static void n_logical(wctx *w, const sch_node *n, const char *lt)
{
    w_raw(w->b, ",\"logicalType\":");
    w_str(w->b, lt);
    if (lt[0] == 'd' && lt[1] == 'e') {
        json_int_t sc = json_integer_value(json_object_get(n->props, "scale"));
        kp_buf_printf(w->b, ",\"precision\":%lld",
                      (long long)json_integer_value(json_object_get(n->props, "precision")));
        if (sc)
            kp_buf_printf(w->b, ",\"scale\":%lld", (long long)sc);
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A sorted JSON array of n strings. */
static void n_sorted(wctx *w, const char **v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_str);
    w_raw(w->b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i && strcmp(v[i], v[i - 1]) == 0)
            continue; /* Java's TreeSet */
        if (i)
            w_raw(w->b, ",");
        w_str(w->b, v[i]);
    }
    w_raw(w->b, "]");
}

static void n_node(wctx *w, const sch_node *n, const char *cur);

static void n_field(wctx *w, const sch_field *f, const char *cur)
{
    static const char *const orders[] = {"ASCENDING", "DESCENDING", "IGNORE"};
    w_raw(w->b, "{\"name\":");
    w_str(w->b, f->name);
    w_raw(w->b, ",\"type\":");
    n_node(w, f->type, cur);
    w_raw(w->b, ",\"order\":");
    w_str(w->b, orders[f->order]);
    if (f->doc) {
        w_raw(w->b, ",\"doc\":");
        w_str(w->b, f->doc);
    }
    size_t na = json_array_size(f->aliases);
    if (na) {
        const char **v = malloc(na * sizeof *v);
        if (!v) {
            w->b->err = KP_E_NOMEM;
            return;
        }
        for (size_t i = 0; i < na; i++)
            v[i] = json_string_value(json_array_get(f->aliases, i));
        w_raw(w->b, ",\"aliases\":");
        n_sorted(w, v, na);
        free(v);
    }
    if (f->dflt) {
        w_raw(w->b, ",\"default\":");
        if (json_is_integer(f->dflt) &&
            (f->type->kind == SCH_K_DOUBLE || f->type->kind == SCH_K_FLOAT))
            w_double(w->b, (double)json_integer_value(f->dflt));
        else
            w_json(w->b, f->dflt, true, 0);
    }
    w_props(w, f->props);
    w_raw(w->b, "}");
}

static void n_node(wctx *w, const sch_node *n, const char *cur)
{
    kp_buf *b = w->b;
    const char *lt = n->kind == SCH_K_FIXED || n->kind <= SCH_K_STRING ? sch_logical(n) : NULL;
    switch (n->kind) {
    case SCH_K_UNION:
        w_raw(b, "[");
        for (size_t i = 0; i < n->nbranches; i++) {
            if (i)
                w_raw(b, ",");
            n_node(w, n->branches[i], cur);
        }
        w_raw(b, "]");
        return;
    case SCH_K_ARRAY:
    case SCH_K_MAP:
        w_raw(b, n->kind == SCH_K_ARRAY ? "{\"type\":\"array\",\"items\":"
                                        : "{\"type\":\"map\",\"values\":");
        n_node(w, n->items, cur);
        w_props(w, n->props);
        w_raw(b, "}");
        return;
    case SCH_K_RECORD:
    case SCH_K_ENUM:
    case SCH_K_FIXED:
        if (n->external || w->seen[n->id]) {
            w_str(b, n->full);
            return;
        }
        w->seen[n->id] = true;
        w_raw(b, "{\"name\":");
        w_str(b, n->full);
        /* Not in Confluent's text: without it a type of the null
         * namespace inside a named one would read back in that one. */
        if (!n->space && cur)
            w_raw(b, ",\"namespace\":\"\"");
        w_raw(b, ",\"type\":");
        w_str(b, sch_kind_name(n->kind));
        if (n->kind == SCH_K_ENUM) {
            w_raw(b, ",\"symbols\":[");
            for (size_t i = 0; i < n->nsymbols; i++) {
                if (i)
                    w_raw(b, ",");
                w_str(b, n->symbols[i]);
            }
            w_raw(b, "]");
        } else if (n->kind == SCH_K_FIXED) {
            kp_buf_printf(b, ",\"size\":%lld", (long long)n->size);
            if (lt)
                n_logical(w, n, lt);
        } else {
            w_raw(b, ",\"fields\":[");
            for (size_t i = 0; i < n->nfields; i++) {
                if (i)
                    w_raw(b, ",");
                n_field(w, &n->fields[i], n->space);
            }
            w_raw(b, "]");
        }
        if (n->doc && *n->doc) {
            w_raw(b, ",\"doc\":");
            w_str(b, n->doc);
        }
        if (n->naliases) {
            w_raw(b, ",\"aliases\":");
            n_sorted(w, (const char **)n->aliases, n->naliases);
        }
        if (n->kind == SCH_K_ENUM && n->enum_default) {
            w_raw(b, ",\"default\":");
            w_str(b, n->enum_default);
        }
        n_props(w, n->props, lt);
        w_raw(b, "}");
        return;
    default:
        if (!lt && (!n->props || !json_object_size(n->props))) {
            w_str(b, sch_kind_name(n->kind));
            return;
        }
        w_raw(b, "{\"type\":");
        w_str(b, sch_kind_name(n->kind));
        if (lt)
            n_logical(w, n, lt);
        n_props(w, n->props, lt);
        w_raw(b, "}");
        return;
    }
}

int sch_avro_canonical(const sch_schema *s, bool normalize, kp_buf *out)
{
    wctx w = {.b = out, .norm = normalize, .seen = calloc(s->nnodes + 1, 1)};
    if (!w.seen)
        return -1;
    if (normalize)
        n_node(&w, s->root, NULL);
    else
        w_node(&w, s->root, NULL);
    free(w.seen);
    return out->err ? -1 : 0;
}

/* ---- Parsing Canonical Form (Avro spec) and CRC-64-AVRO -------------------- */
static void pcf_node(wctx *w, const sch_node *n)
{
    kp_buf *b = w->b;
    switch (n->kind) {
    case SCH_K_UNION:
        w_raw(b, "[");
        for (size_t i = 0; i < n->nbranches; i++) {
            if (i)
                w_raw(b, ",");
            pcf_node(w, n->branches[i]);
        }
        w_raw(b, "]");
        return;
    case SCH_K_ARRAY:
    case SCH_K_MAP:
        w_raw(b, n->kind == SCH_K_ARRAY ? "{\"type\":\"array\",\"items\":"
                                        : "{\"type\":\"map\",\"values\":");
        pcf_node(w, n->items);
        w_raw(b, "}");
        return;
    case SCH_K_RECORD:
    case SCH_K_ENUM:
    case SCH_K_FIXED:
        if (w->seen[n->id]) {
            w_str(b, n->full);
            return;
        }
        w->seen[n->id] = true;
        w_raw(b, "{\"name\":");
        w_str(b, n->full);
        w_raw(b, ",\"type\":");
        w_str(b, sch_kind_name(n->kind));
        if (n->kind == SCH_K_RECORD) {
            w_raw(b, ",\"fields\":[");
            for (size_t i = 0; i < n->nfields; i++) {
                w_raw(b, i ? ",{\"name\":" : "{\"name\":");
                w_str(b, n->fields[i].name);
                w_raw(b, ",\"type\":");
                pcf_node(w, n->fields[i].type);
                w_raw(b, "}");
            }
            w_raw(b, "]");
        } else if (n->kind == SCH_K_ENUM) {
            w_raw(b, ",\"symbols\":[");
            for (size_t i = 0; i < n->nsymbols; i++) {
                if (i)
                    w_raw(b, ",");
                w_str(b, n->symbols[i]);
            }
            w_raw(b, "]");
        } else {
            kp_buf_printf(b, ",\"size\":%lld", (long long)n->size);
        }
        w_raw(b, "}");
        return;
    default: w_str(b, sch_kind_name(n->kind)); return;
    }
}

int sch_avro_pcf(const sch_schema *s, kp_buf *out)
{
    wctx w = {.b = out, .seen = calloc(s->nnodes + 1, 1)};
    if (!w.seen)
        return -1;
    pcf_node(&w, s->root);
    free(w.seen);
    return out->err ? -1 : 0;
}

#define SCH_CRC64_EMPTY 0xc15d213aa4d7a795ull

uint64_t sch_crc64_avro(const void *p, size_t len)
{
    /* Built per call (2,048 steps, beside writing the PCF): no shared
     * state, so any thread may fingerprint (sch.h S1). */
    uint64_t table[256];
    for (int i = 0; i < 256; i++) {
        uint64_t fp = (uint64_t)i;
        for (int j = 0; j < 8; j++)
            fp = (fp >> 1) ^ (SCH_CRC64_EMPTY & (0 - (fp & 1)));
        table[i] = fp;
    }
    uint64_t fp = SCH_CRC64_EMPTY;
    const uint8_t *q = p;
    for (size_t i = 0; i < len; i++)
        fp = (fp >> 8) ^ table[(fp ^ q[i]) & 0xff];
    return fp;
}

uint64_t sch_avro_fingerprint(const sch_schema *s)
{
    kp_buf b;
    kp_buf_init(&b);
    uint64_t fp = sch_avro_pcf(s, &b) == 0 ? sch_crc64_avro(b.data, b.len) : 0;
    kp_buf_free(&b);
    return fp;
}
