/*
 * schema/parse.c — Avro schema text (and its references) to the type graph
 * of sch_int.h.
 *
 * The rules are Avro's specification as Java's Schema.Parser (1.11) applies
 * them, since Confluent's registry is Java: names are [A-Za-z_][A-Za-z0-9_]*
 * per dotted component (non-ASCII letters allowed, as Character.isLetter
 * does); comments are allowed (Jackson's ALLOW_COMMENTS); a named type is registered before its body is
 * parsed (so a record may refer to itself); a bare name is looked up in the
 * enclosing namespace, then in the null namespace; unions may not hold a
 * union or two types of one kind (or of one full name); defaults are checked
 * against their field's type; attributes Avro does not reserve are kept in
 * text order as properties.
 *
 * Hostile text (sch.h S2): the text size is checked first; jansson limits
 * JSON nesting (JSON_PARSER_MAX_DEPTH, 2048) and refuses invalid JSON; our
 * recursion is bounded by SCH_MAX_DEPTH; every name by SCH_MAX_NAME; the
 * number of type nodes by SCH_MAX_TYPES.  The first error wins (pctx.err)
 * and unwinds: every node is on s->nodes already, so sch_free cleans up.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "schema/sch_int.h"

typedef struct {
    sch_schema *s;
    sch_node **tab;            /* full name → node, open addressing */
    size_t tabcap, tabn;
    bool external;             /* parsing a reference */
    long budget;               /* steps left for checking defaults (sch_default_ok) */
    sch_node *prim[SCH_K_STRING + 1]; /* one node per primitive without properties */
    const char *refname;
    char *err;
    size_t errlen;
    bool failed;
} pctx;

static const char *const k_names[] = {
    "null", "boolean", "int", "long", "float", "double", "bytes", "string",
    "record", "enum", "fixed", "array", "map", "union",
};

const char *sch_kind_name(sch_kind k) { return k_names[k]; }

static int prim_kind(const char *s)
{
    for (int k = SCH_K_NULL; k <= SCH_K_STRING; k++)
        if (strcmp(s, k_names[k]) == 0)
            return k;
    return -1;
}

__attribute__((format(printf, 2, 3))) static void *p_fail(pctx *c, const char *fmt, ...)
{
    if (c->failed)
        return NULL;
    c->failed = true;
    if (c->err && c->errlen) {
        size_t off = 0;
        if (c->refname)
            off = (size_t)snprintf(c->err, c->errlen, "in reference %s: ", c->refname);
        if (off < c->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(c->err + off, c->errlen - off, fmt, ap);
            va_end(ap);
        }
    }
    return NULL;
}

/* A short excerpt of a JSON value for messages (never the whole schema). */
static const char *p_excerpt(const json_t *j, char *buf, size_t n)
{
    char *t = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t) {
        snprintf(buf, n, "?");
        return buf;
    }
    if (strlen(t) >= n && n > 4)
        snprintf(buf, n, "%.*s...", (int)(n - 4), t);
    else
        snprintf(buf, n, "%s", t);
    free(t);
    return buf;
}

static sch_node *p_new(pctx *c, sch_kind k)
{
    sch_schema *s = c->s;
    if (s->nnodes >= SCH_MAX_TYPES)
        return p_fail(c, "more than %d types in the schema", SCH_MAX_TYPES);
    if (s->nnodes == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        sch_node **n = realloc(s->nodes, cap * sizeof *n);
        if (!n)
            return p_fail(c, "out of memory");
        s->nodes = n;
        s->cap = cap;
    }
    sch_node *n = calloc(1, sizeof *n);
    if (!n)
        return p_fail(c, "out of memory");
    n->kind = k;
    n->dec_scale = -1;
    n->id = (uint32_t)s->nnodes;
    n->external = c->external;
    s->nodes[s->nnodes++] = n;
    return n;
}

/* ---- the name table ----------------------------------------------------- */
static uint64_t p_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static sch_node *p_lookup(const pctx *c, const char *full)
{
    if (!c->tabcap)
        return NULL;
    for (size_t i = p_hash(full) & (c->tabcap - 1);; i = (i + 1) & (c->tabcap - 1)) {
        sch_node *n = c->tab[i];
        if (!n)
            return NULL;
        if (strcmp(n->full, full) == 0)
            return n;
    }
}

static bool p_insert(pctx *c, sch_node *n)
{
    if ((c->tabn + 1) * 2 > c->tabcap) {
        size_t cap = c->tabcap ? c->tabcap * 2 : 64;
        sch_node **t = calloc(cap, sizeof *t);
        if (!t)
            return false;
        for (size_t i = 0; i < c->tabcap; i++)
            if (c->tab[i]) {
                size_t j = p_hash(c->tab[i]->full) & (cap - 1);
                while (t[j])
                    j = (j + 1) & (cap - 1);
                t[j] = c->tab[i];
            }
        free(c->tab);
        c->tab = t;
        c->tabcap = cap;
    }
    size_t j = p_hash(n->full) & (c->tabcap - 1);
    while (c->tab[j])
        j = (j + 1) & (c->tabcap - 1);
    c->tab[j] = n;
    c->tabn++;
    return true;
}

/* ---- sets of strings (sch_int.h) ------------------------------------------ */
int sch_set_init(sch_set *s, size_t n)
{
    s->cap = 16;
    while (s->cap < 2 * n + 2)
        s->cap *= 2;
    s->slot = calloc(s->cap, sizeof *s->slot);
    return s->slot ? 0 : -1;
}

static size_t set_pos(const sch_set *s, const char *k)
{
    size_t i = p_hash(k) & (s->cap - 1);
    while (s->slot[i] && strcmp(s->slot[i], k) != 0)
        i = (i + 1) & (s->cap - 1);
    return i;
}

int sch_set_add(sch_set *s, const char *k)
{
    size_t i = set_pos(s, k);
    if (s->slot[i])
        return 0;
    s->slot[i] = k;
    return 1;
}

bool sch_set_has(const sch_set *s, const char *k) { return s->slot[set_pos(s, k)] != NULL; }

void sch_set_free(sch_set *s)
{
    free(s->slot);
    s->slot = NULL;
}

/* ---- names ----------------------------------------------------------------- */
/* One component: [A-Za-z_][A-Za-z0-9_]*; Java's messages. */
static bool p_ident(pctx *c, const char *s, size_t len, const char *whole)
{
    if (len == 0)
        return p_fail(c, "Empty name"), false;
    /* Java tests Character.isLetter: a name in another script is legal
     * there, so every non-ASCII character (jansson gives valid UTF-8) is
     * taken for a letter here. */
    unsigned char ch = (unsigned char)s[0];
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || ch == '_' || ch >= 0x80))
        return p_fail(c, "Illegal initial character: %s", whole), false;
    for (size_t i = 1; i < len; i++) {
        ch = (unsigned char)s[i];
        if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
              ch == '_' || ch >= 0x80))
            return p_fail(c, "Illegal character in: %s", whole), false;
    }
    return true;
}

static bool p_dotted(pctx *c, const char *s)
{
    if (strlen(s) > SCH_MAX_NAME)
        return p_fail(c, "name longer than %d bytes", SCH_MAX_NAME), false;
    for (const char *p = s;;) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        if (!p_ident(c, p, n, s))
            return false;
        if (!dot)
            return true;
        p = dot + 1;
    }
}

/* The full name of name in space (Java's Name): a dotted name carries its
 * own namespace; "" is the null namespace.  Sets *space_out (owned, or NULL). */
static char *p_fullname(pctx *c, const char *name, const char *space, char **space_out)
{
    *space_out = NULL;
    if (!p_dotted(c, name))
        return NULL;
    const char *dot = strrchr(name, '.');
    char *full;
    if (dot) {
        *space_out = strndup(name, (size_t)(dot - name));
        full = strdup(name);
    } else if (space && *space) {
        if (!p_dotted(c, space))
            return NULL;
        *space_out = strdup(space);
        if (asprintf(&full, "%s.%s", space, name) < 0)
            full = NULL;
    } else {
        full = strdup(name);
    }
    if (!full || (dot && !*space_out) || ((space && *space && !dot) && !*space_out)) {
        free(full);
        free(*space_out);
        *space_out = NULL;
        return p_fail(c, "out of memory");
    }
    if (strlen(full) > SCH_MAX_NAME) {
        free(full);
        free(*space_out);
        *space_out = NULL;
        return p_fail(c, "name longer than %d bytes", SCH_MAX_NAME);
    }
    return full;
}

/* A name used as a type: the enclosing namespace first, then the null one. */
/* A primitive without properties: one shared node per kind (a record of
 * 100,000 int fields is 100,001 nodes otherwise). */
static sch_node *p_prim(pctx *c, sch_kind k)
{
    if (!c->prim[k])
        c->prim[k] = p_new(c, k);
    return c->prim[k];
}

static sch_node *p_resolve(pctx *c, const char *name, const char *space)
{
    if (strlen(name) > SCH_MAX_NAME)
        return p_fail(c, "name longer than %d bytes", SCH_MAX_NAME);
    sch_node *n = NULL;
    if (!strchr(name, '.') && space && *space) {
        char buf[2 * SCH_MAX_NAME + 2];
        snprintf(buf, sizeof buf, "%s.%s", space, name);
        n = p_lookup(c, buf);
    }
    if (!n)
        n = p_lookup(c, name);
    if (!n)
        return p_fail(c, "Undefined name: \"%s\"", name);
    return n;
}

/* Extra attributes: every key not in reserved (NULL-terminated), text order. */
static bool p_props(pctx *c, json_t *obj, const char *const *reserved, json_t **out)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        bool res = false;
        for (const char *const *r = reserved; *r; r++)
            if (strcmp(key, *r) == 0)
                res = true;
        if (res)
            continue;
        if (!*out && !(*out = json_object()))
            return p_fail(c, "out of memory"), false;
        if (json_object_set(*out, key, v) != 0)
            return p_fail(c, "out of memory"), false;
    }
    return true;
}

static const char *const k_schema_reserved[] = {
    "doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases",
    NULL};
static const char *const k_enum_reserved[] = {
    "doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases",
    "default", NULL};
static const char *const k_field_reserved[] = {"default", "doc", "name", "order", "type", "aliases",
                                              NULL};

static const char *p_text(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static sch_node *p_parse(pctx *c, json_t *j, const char *space, int depth);

/* The named part of a record, enum or fixed: name, namespace, aliases, doc;
 * registered at once so the body may refer to it. */
static bool p_named(pctx *c, sch_node *n, json_t *j, const char *space)
{
    char ex[120];
    const char *name = p_text(j, "name");
    if (!name)
        return p_fail(c, "No name in schema: %s", p_excerpt(j, ex, sizeof ex)), false;
    json_t *nsj = json_object_get(j, "namespace");
    if (nsj && !json_is_string(nsj) && !json_is_null(nsj))
        return p_fail(c, "namespace not a string: %s", p_excerpt(nsj, ex, sizeof ex)), false;
    const char *ns = json_is_string(nsj) ? json_string_value(nsj) : space;
    n->full = p_fullname(c, name, ns, &n->space);
    if (!n->full)
        return false;
    const char *dot = strrchr(n->full, '.');
    n->name = dot ? dot + 1 : n->full;
    if (!n->space && prim_kind(n->full) >= 0)
        return p_fail(c, "Schemas may not be named after primitives: %s", n->full), false;
    if (p_lookup(c, n->full))
        return p_fail(c, "Can't redefine: %s", n->full), false;
    if (!p_insert(c, n))
        return p_fail(c, "out of memory"), false;
    n->doc = p_text(j, "doc");
    json_t *al = json_object_get(j, "aliases");
    if (al) {
        if (!json_is_array(al))
            return p_fail(c, "aliases not an array: %s", p_excerpt(al, ex, sizeof ex)), false;
        n->aliases = calloc(json_array_size(al) + 1, sizeof *n->aliases);
        if (!n->aliases)
            return p_fail(c, "out of memory"), false;
        size_t i;
        json_t *a;
        json_array_foreach(al, i, a) {
            if (!json_is_string(a))
                return p_fail(c, "alias not a string: %s", p_excerpt(a, ex, sizeof ex)), false;
            char *asp;
            char *full = p_fullname(c, json_string_value(a), n->space, &asp);
            free(asp);
            if (!full)
                return false;
            n->aliases[n->naliases++] = full;
        }
    }
    return true;
}

/* A float or double's textual default as Java's Double.valueOf reads it:
 * a finite number becomes a JSON number; NaN and the infinities stay text
 * in Double.toString's spelling (Jackson quotes them).  NULL: not a number. */
static json_t *p_text_real(const char *t)
{
    while (*t == ' ' || *t == '\t' || *t == '\n' || *t == '\r')
        t++;
    char *end;
    double v = strtod(t, &end);
    if (end == t)
        return NULL;
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r' || *end == 'd' ||
           *end == 'D' || *end == 'f' || *end == 'F')
        end++;
    if (*end)
        return NULL;
    if (isnan(v))
        return json_string("NaN");
    if (isinf(v))
        return json_string(v > 0 ? "Infinity" : "-Infinity");
    return json_real(v);
}

static bool p_fields_each(pctx *c, sch_node *n, json_t *fs, sch_set *seen, int depth);

static bool p_fields(pctx *c, sch_node *n, json_t *j, int depth)
{
    char ex[120];
    json_t *fs = json_object_get(j, "fields");
    if (!json_is_array(fs))
        return p_fail(c, "Record has no fields: %s", p_excerpt(j, ex, sizeof ex)), false;
    size_t nf = json_array_size(fs);
    n->fields = calloc(nf ? nf : 1, sizeof *n->fields);
    if (!n->fields)
        return p_fail(c, "out of memory"), false;
    sch_set seen;
    if (sch_set_init(&seen, nf) != 0)
        return p_fail(c, "out of memory"), false;
    bool ok = p_fields_each(c, n, fs, &seen, depth);
    sch_set_free(&seen);
    return ok;
}

static bool p_fields_each(pctx *c, sch_node *n, json_t *fs, sch_set *seen, int depth)
{
    char ex[120];
    size_t i;
    json_t *fj;
    json_array_foreach(fs, i, fj) {
        sch_field *f = &n->fields[n->nfields];
        const char *fname = json_is_object(fj) ? p_text(fj, "name") : NULL;
        if (!fname)
            return p_fail(c, "No field name: %s", p_excerpt(fj, ex, sizeof ex)), false;
        if (strlen(fname) > SCH_MAX_NAME)
            return p_fail(c, "field name longer than %d bytes", SCH_MAX_NAME), false;
        if (!p_ident(c, fname, strlen(fname), fname))
            return false;
        if (sch_set_add(seen, fname) == 0)
            return p_fail(c, "Duplicate field %s in record %s", fname, n->full), false;
        json_t *tj = json_object_get(fj, "type");
        if (!tj)
            return p_fail(c, "No field type: %s", p_excerpt(fj, ex, sizeof ex)), false;
        f->name = fname;
        n->nfields++;     /* counted before its type: sch_free sees a whole field */
        f->doc = p_text(fj, "doc");
        f->type = p_parse(c, tj, n->space, depth + 1);
        if (!f->type)
            return false;
        json_t *d = json_object_get(fj, "default");
        if (d && json_is_string(d) &&
            (f->type->kind == SCH_K_FLOAT || f->type->kind == SCH_K_DOUBLE)) {
            /* Java reads a textual default of a float or double as the
             * number it spells ("NaN" too). */
            if (!(f->dflt = p_text_real(json_string_value(d))))
                return p_fail(c, "Invalid default for field %s: %s not a %s", fname,
                              p_excerpt(d, ex, sizeof ex), sch_kind_name(f->type->kind)),
                       false;
        } else if (d) {
            if (!sch_default_ok(f->type, d, 0, &c->budget)) {
                if (c->budget < 0)
                    return p_fail(c, "defaults take more than %ld steps to check",
                                  SCH_DEFAULT_WORK), false;
                return p_fail(c, "Invalid default for field %s: %s not a %s", fname,
                              p_excerpt(d, ex, sizeof ex),
                              f->type->full ? f->type->full : sch_kind_name(f->type->kind)),
                       false;
            }
            f->dflt = json_incref(d);
        }
        const char *ord = p_text(fj, "order");
        if (json_object_get(fj, "order")) {
            if (ord && strcasecmp(ord, "ascending") == 0)
                f->order = SCH_ORDER_ASCENDING;
            else if (ord && strcasecmp(ord, "descending") == 0)
                f->order = SCH_ORDER_DESCENDING;
            else if (ord && strcasecmp(ord, "ignore") == 0)
                f->order = SCH_ORDER_IGNORE;
            else
                return p_fail(c, "Invalid order for field %s", fname), false;
        }
        json_t *al = json_object_get(fj, "aliases");
        if (al) {
            if (!json_is_array(al))
                return p_fail(c, "aliases not an array: %s", p_excerpt(al, ex, sizeof ex)), false;
            size_t k;
            json_t *a;
            json_array_foreach(al, k, a) if (!json_is_string(a) ||
                                             strlen(json_string_value(a)) > SCH_MAX_NAME) return p_fail(
                c, "alias not a string: %s", p_excerpt(a, ex, sizeof ex)),
                false;
            f->aliases = json_incref(al);
        }
        if (!p_props(c, fj, k_field_reserved, &f->props))
            return false;
    }
    return true;
}

static bool p_symbols(pctx *c, sch_node *n, json_t *sy, sch_set *seen);

static bool p_enum(pctx *c, sch_node *n, json_t *j)
{
    char ex[120];
    json_t *sy = json_object_get(j, "symbols");
    if (!json_is_array(sy))
        return p_fail(c, "Enum has no symbols: %s", p_excerpt(j, ex, sizeof ex)), false;
    n->symbols = calloc(json_array_size(sy) + 1, sizeof *n->symbols);
    if (!n->symbols)
        return p_fail(c, "out of memory"), false;
    sch_set seen;
    if (sch_set_init(&seen, json_array_size(sy)) != 0)
        return p_fail(c, "out of memory"), false;
    bool ok = p_symbols(c, n, sy, &seen);
    if (ok) {
        json_t *d = json_object_get(j, "default");
        const char *ds = json_is_string(d) ? json_string_value(d) : NULL;
        if (d && !(ds && sch_set_has(&seen, ds))) {
            p_fail(c, "The Enum Default: %s is not in the enum symbol set",
                   p_excerpt(d, ex, sizeof ex));
            ok = false;
        }
        n->enum_default = ds;
    }
    sch_set_free(&seen);
    return ok;
}

static bool p_symbols(pctx *c, sch_node *n, json_t *sy, sch_set *seen)
{
    char ex[120];
    size_t i;
    json_t *v;
    json_array_foreach(sy, i, v) {
        if (!json_is_string(v))
            return p_fail(c, "Enum symbol not a string: %s", p_excerpt(v, ex, sizeof ex)), false;
        const char *sym = json_string_value(v);
        if (strlen(sym) > SCH_MAX_NAME)
            return p_fail(c, "enum symbol longer than %d bytes", SCH_MAX_NAME), false;
        if (!p_ident(c, sym, strlen(sym), sym))
            return false;
        if (sch_set_add(seen, sym) == 0)
            return p_fail(c, "Duplicate enum symbol: %s", sym), false;
        n->symbols[n->nsymbols++] = sym;
    }
    return true;
}

static sch_node *p_union(pctx *c, json_t *j, const char *space, int depth)
{
    sch_node *n = p_new(c, SCH_K_UNION);
    if (!n)
        return NULL;
    n->branches = calloc(json_array_size(j) + 1, sizeof *n->branches);
    if (!n->branches)
        return p_fail(c, "out of memory");
    sch_set named;             /* full names of the named branches */
    if (sch_set_init(&named, json_array_size(j)) != 0)
        return p_fail(c, "out of memory");
    uint32_t kinds = 0;        /* the unnamed kinds met */
    size_t i;
    json_t *bj;
    json_array_foreach(j, i, bj) {
        sch_node *b = p_parse(c, bj, space, depth + 1);
        if (!b)
            break;
        if (b->kind == SCH_K_UNION) {
            p_fail(c, "Nested union in a union");
            break;
        }
        bool dup = sch_kind_named(b->kind) ? sch_set_add(&named, b->full) == 0
                                           : (kinds & (1u << b->kind)) != 0;
        if (dup) {
            p_fail(c, "Duplicate in union: %s", b->full ? b->full : sch_kind_name(b->kind));
            break;
        }
        kinds |= 1u << b->kind;
        n->branches[n->nbranches++] = b;
    }
    sch_set_free(&named);
    return c->failed ? NULL : n;
}

static sch_node *p_object(pctx *c, json_t *j, const char *space, int depth)
{
    char ex[120];
    json_t *tj = json_object_get(j, "type");
    if (!tj)
        return p_fail(c, "No type: %s", p_excerpt(j, ex, sizeof ex));
    if (!json_is_string(tj)) /* {"type": {...}} or {"type": [...]}: that schema */
        return p_parse(c, tj, space, depth + 1);
    const char *t = json_string_value(tj);
    int pk = prim_kind(t);
    sch_node *n;
    if (pk >= 0) {
        json_t *props = NULL;
        if (!p_props(c, j, k_schema_reserved, &props))
            return NULL;
        if (!props)
            return p_prim(c, (sch_kind)pk);
        json_decref(props);
        if (!(n = p_new(c, (sch_kind)pk)))
            return NULL;
    } else if (strcmp(t, "record") == 0 || strcmp(t, "error") == 0) {
        if (!(n = p_new(c, SCH_K_RECORD)))
            return NULL;
        n->is_error = t[0] == 'e';
        if (!p_named(c, n, j, space) || !p_fields(c, n, j, depth))
            return NULL;
    } else if (strcmp(t, "enum") == 0) {
        if (!(n = p_new(c, SCH_K_ENUM)) || !p_named(c, n, j, space) || !p_enum(c, n, j))
            return NULL;
    } else if (strcmp(t, "fixed") == 0) {
        if (!(n = p_new(c, SCH_K_FIXED)) || !p_named(c, n, j, space))
            return NULL;
        json_t *sz = json_object_get(j, "size");
        if (!json_is_integer(sz) || json_integer_value(sz) < 0 ||
            json_integer_value(sz) > INT32_MAX)
            return p_fail(c, "Invalid or no size: %s", p_excerpt(j, ex, sizeof ex));
        n->size = json_integer_value(sz);
    } else if (strcmp(t, "array") == 0 || strcmp(t, "map") == 0) {
        bool arr = t[0] == 'a';
        json_t *it = json_object_get(j, arr ? "items" : "values");
        if (!it)
            return p_fail(c, arr ? "Array has no items type: %s" : "Map has no values type: %s",
                          p_excerpt(j, ex, sizeof ex));
        if (!(n = p_new(c, arr ? SCH_K_ARRAY : SCH_K_MAP)))
            return NULL;
        if (!(n->items = p_parse(c, it, space, depth + 1)))
            return NULL;
    } else {
        /* {"type": "SomeName"}: a use of a named type (Java accepts it). */
        return p_resolve(c, t, space);
    }
    if (!p_props(c, j, n->kind == SCH_K_ENUM ? k_enum_reserved : k_schema_reserved, &n->props))
        return NULL;
    const char *lt = sch_logical(n);
    json_int_t scale = json_integer_value(json_object_get(n->props, "scale"));
    if (lt && strcmp(lt, "decimal") == 0 && scale <= 1000) /* to_json pads that many digits */
        n->dec_scale = (int)scale;
    return n;
}

static sch_node *p_parse(pctx *c, json_t *j, const char *space, int depth)
{
    char ex[120];
    if (c->failed)
        return NULL;
    if (depth > SCH_MAX_DEPTH)
        return p_fail(c, "schema nested deeper than %d levels", SCH_MAX_DEPTH);
    if (json_is_string(j)) {
        const char *t = json_string_value(j);
        int pk = prim_kind(t);
        return pk >= 0 ? p_prim(c, (sch_kind)pk) : p_resolve(c, t, space);
    }
    if (json_is_array(j))
        return p_union(c, j, space, depth);
    if (json_is_object(j))
        return p_object(c, j, space, depth);
    return p_fail(c, "Schema not yet supported: %s", p_excerpt(j, ex, sizeof ex));
}

/* Java's parser allows comments (Jackson's ALLOW_COMMENTS: C and C++
 * style); jansson does not.  A copy with each comment blanked out, or NULL
 * when there is none (an unterminated one, or no memory, is left to
 * jansson, which then says where it is). */
static char *p_uncomment(const char *t, size_t len)
{
    char *out = NULL;
    bool str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = t[i];
        if (out)
            out[i] = ch;
        if (str) {
            if (ch == '\\' && i + 1 < len) {
                i++;
                if (out)
                    out[i] = t[i];
            } else if (ch == '"') {
                str = false;
            }
            continue;
        }
        if (ch == '"') {
            str = true;
            continue;
        }
        if (ch != '/' || i + 1 >= len || (t[i + 1] != '*' && t[i + 1] != '/'))
            continue;
        size_t end = i + 2;
        if (t[i + 1] == '/') {
            while (end < len && t[end] != '\n')
                end++;
        } else {
            const char *close = memmem(t + i + 2, len - i - 2, "*/", 2);
            if (!close) {
                free(out);
                return NULL;
            }
            end = (size_t)(close - t) + 2;
        }
        if (!out) {
            if (!(out = malloc(len)))
                return NULL;
            memcpy(out, t, i);
        }
        memset(out + i, ' ', end - i);
        i = end - 1;
    }
    return out;
}

static json_t *p_load(pctx *c, sch_schema *s, const char *text, size_t len)
{
    json_error_t je;
    char *plain = p_uncomment(text, len);
    json_t *j = json_loadb(plain ? plain : text, len, JSON_DECODE_ANY, &je);
    free(plain);
    if (!j)
        return p_fail(c, "Invalid JSON: %s at line %d column %d", je.text, je.line, je.column);
    json_t **d = realloc(s->docs, (s->ndocs + 1) * sizeof *d);
    if (!d) {
        json_decref(j);
        return p_fail(c, "out of memory");
    }
    s->docs = d;
    s->docs[s->ndocs++] = j;
    return j;
}

int sch_avro_parse(const char *text, size_t len, const sch_ref *refs, size_t nrefs,
                   sch_schema **out, char *err, size_t errlen)
{
    *out = NULL;
    if (err && errlen)
        err[0] = 0;
    pctx c = {.err = err, .errlen = errlen, .budget = SCH_DEFAULT_WORK};
    size_t total = len;
    for (size_t i = 0; i < nrefs; i++)
        total += refs[i].len;
    if (total > SCH_MAX_TEXT) {
        p_fail(&c, "schema text larger than %u bytes", SCH_MAX_TEXT);
        return -1;
    }
    sch_schema *s = calloc(1, sizeof *s);
    if (!s) {
        p_fail(&c, "out of memory");
        return -1;
    }
    c.s = s;
    c.external = true;
    for (size_t i = 0; i < nrefs && !c.failed; i++) {
        c.refname = refs[i].name ? refs[i].name : "?";
        json_t *j = p_load(&c, s, refs[i].text, refs[i].len);
        if (j)
            p_parse(&c, j, NULL, 0);
    }
    c.external = false;
    c.refname = NULL;
    if (!c.failed) {
        json_t *j = p_load(&c, s, text, len);
        if (j)
            s->root = p_parse(&c, j, NULL, 0);
    }
    free(c.tab);
    if (c.failed || !s->root) {
        p_fail(&c, "invalid schema");
        sch_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

void sch_free(sch_schema *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nnodes; i++) {
        sch_node *n = s->nodes[i];
        json_decref(n->props);
        free(n->full);
        free(n->space);
        for (size_t k = 0; k < n->naliases; k++)
            free(n->aliases[k]);
        free(n->aliases);
        for (size_t k = 0; k < n->nfields; k++) {
            json_decref(n->fields[k].dflt);
            json_decref(n->fields[k].aliases);
            json_decref(n->fields[k].props);
        }
        free(n->fields);
        free(n->symbols);
        free(n->branches);
        free(n);
    }
    free(s->nodes);
    for (size_t i = 0; i < s->ndocs; i++)
        json_decref(s->docs[i]);
    free(s->docs);
    free(s);
}

const char *sch_avro_name(const sch_schema *s) { return s->root->full; }

/* ---- logical types (sch_int.h) ---------------------------------------------- */
/* The logical type Java would recognise on n (LogicalTypes.fromSchemaIgnoreInvalid),
 * or NULL: an unknown or misplaced one stays a plain property. */
const char *sch_logical(const sch_node *n)
{
    const char *lt = json_string_value(json_object_get(n->props, "logicalType"));
    if (!lt)
        return NULL;
    static const struct { const char *name; sch_kind kind; } k[] = {
        {"date", SCH_K_INT},          {"time-millis", SCH_K_INT},
        {"time-micros", SCH_K_LONG},  {"timestamp-millis", SCH_K_LONG},
        {"timestamp-micros", SCH_K_LONG}, {"local-timestamp-millis", SCH_K_LONG},
        {"local-timestamp-micros", SCH_K_LONG}, {"uuid", SCH_K_STRING},
        {"duration", SCH_K_FIXED},    {"decimal", SCH_K_BYTES}, {"decimal", SCH_K_FIXED},
    };
    for (size_t i = 0; i < sizeof k / sizeof *k; i++) {
        if (strcmp(lt, k[i].name) != 0 || n->kind != k[i].kind)
            continue;
        if (n->kind == SCH_K_FIXED && lt[0] == 'd' && lt[1] == 'u' && n->size != 12)
            return NULL;
        if (lt[0] == 'd' && lt[1] == 'e') {
            json_t *p = json_object_get(n->props, "precision"), *sc = json_object_get(n->props, "scale");
            if (!json_is_integer(p) || json_integer_value(p) <= 0 ||
                (sc && (!json_is_integer(sc) || json_integer_value(sc) < 0 ||
                        json_integer_value(sc) > json_integer_value(p))))
                return NULL;
        }
        return lt;
    }
    return NULL;
}

/* ---- defaults (Avro 1.11's Schema.isValidDefault) --------------------------- */
bool sch_default_ok(const sch_node *t, const json_t *v, int depth, long *budget)
{
    if (depth > 2 * JSON_PARSER_MAX_DEPTH + 8 || --*budget < 0)
        return false;
    switch (t->kind) {
    case SCH_K_NULL: return json_is_null(v);
    case SCH_K_BOOLEAN: return json_is_boolean(v);
    case SCH_K_INT:
        return json_is_integer(v) && json_integer_value(v) >= INT32_MIN &&
               json_integer_value(v) <= INT32_MAX;
    case SCH_K_LONG: return json_is_integer(v);
    case SCH_K_FLOAT:
    case SCH_K_DOUBLE: return json_is_number(v);
    case SCH_K_BYTES:
    case SCH_K_STRING:
    case SCH_K_ENUM:
    case SCH_K_FIXED: return json_is_string(v);
    case SCH_K_ARRAY: {
        if (!json_is_array(v))
            return false;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (!sch_default_ok(t->items, e, depth + 1, budget)) return false;
        return true;
    }
    case SCH_K_MAP: {
        if (!json_is_object(v))
            return false;
        const char *k;
        json_t *e;
        json_object_foreach((json_t *)v, k, e) if (!sch_default_ok(t->items, e, depth + 1, budget)) return false;
        return true;
    }
    case SCH_K_UNION:
        for (size_t i = 0; i < t->nbranches; i++)
            if (sch_default_ok(t->branches[i], v, depth + 1, budget))
                return true;
        return false;
    case SCH_K_RECORD:
        if (!json_is_object(v))
            return false;
        for (size_t i = 0; i < t->nfields; i++) {
            const json_t *fv = json_object_get(v, t->fields[i].name);
            if (fv ? !sch_default_ok(t->fields[i].type, fv, depth + 1, budget) : !t->fields[i].dflt)
                return false;
        }
        return true;
    }
    return false;
}

/* ---- the registry's names: schema types and compatibility levels ------------ */
static const char *const k_types[] = {"AVRO", "JSON", "PROTOBUF"};

int sch_type_parse(const char *s, sch_type *out)
{
    if (!s || !*s) {
        *out = SCH_TYPE_AVRO;
        return 0;
    }
    for (int i = 0; i < 3; i++)
        if (strcmp(s, k_types[i]) == 0) {
            *out = (sch_type)i;
            return 0;
        }
    return -1;
}

const char *sch_type_name(sch_type t) { return (unsigned)t < 3 ? k_types[t] : "?"; }

static const char *const k_levels[] = {"NONE",    "BACKWARD",           "BACKWARD_TRANSITIVE",
                                       "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                                       "FULL_TRANSITIVE"};

int sch_level_parse(const char *s, sch_level *out)
{
    for (int i = 0; s && i < 7; i++)
        if (strcmp(s, k_levels[i]) == 0) {
            *out = (sch_level)i;
            return 0;
        }
    return -1;
}

const char *sch_level_name(sch_level l) { return (unsigned)l < 7 ? k_levels[l] : "?"; }
