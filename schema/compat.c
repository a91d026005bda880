/*
 * schema/compat.c — can data written with one schema be read with another?
 * Avro's Schema Resolution, decided the way Java's SchemaCompatibility
 * (ReaderWriterCompatibilityChecker, Avro 1.11) decides it, since that is
 * what Confluent's registry runs:
 *
 *   same kind      primitives match; arrays/maps compare items/values;
 *                  fixed: names (reader's short name, or a reader alias
 *                  equal to the writer's full name) and sizes; enums: names,
 *                  and every writer symbol in the reader unless the reader
 *                  has a default; records: names, then every reader field
 *                  from the writer field of its name (or of one of its
 *                  aliases), else its default (an enum with a default also
 *                  does); unions: every writer branch readable by the reader
 *   writer union   every branch readable by the reader
 *   promotions     int→long, float, double; long→float, double; float→double;
 *                  string↔bytes
 *   reader union   some branch reads the writer
 *   otherwise      TYPE_MISMATCH
 *
 * Recursive types: a (reader, writer) pair met again while it is being
 * checked is assumed compatible (coinduction, as Java's memo does); pairs
 * found compatible are remembered, so shared subtrees are checked once.
 * Every incompatibility is reported, one line each, as Confluent words it,
 * with its path (/fields/1/type); like Java the check goes on past the
 * first (except while trying a reader union's branches, where the first
 * failure decides).  Not the hot path: allocation is fine here.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/sch_int.h"

#define C_MAX_DEPTH 4096        /* pairs nested; recursion is cut by the memo first */
#define C_MAX_WORK 50000000L    /* field lookups and pairs: bounds hostile schemas */

/* A pair's state in the memo.  Incompatible pairs are remembered too, or
 * a type reached along many paths (R1's ten fields of R2, whose ten fields
 * are R3, ...) would be checked again each time: exponential.  One found
 * incompatible while trying a reader union's branch (quiet, unreported) is
 * checked once more when met where it must be reported. */
enum { M_EMPTY = 0, M_BUSY, M_OK, M_BAD_QUIET, M_BAD };

typedef struct {
    uint64_t *keys;            /* (reader id + 1) << 32 | writer id; 0 empty */
    uint8_t *vals;
    size_t cap, n;
    char path[512];
    size_t plen;
    int quiet;                 /* > 0: trying a reader union's branch, no report */
    size_t wlen;               /* why's length so far */
    long work;                 /* steps left (C_MAX_WORK) */
    bool exhausted;            /* work ran out: reported once, every loop stops */
    bool oom;
    char *why;
    size_t whylen;
    const char *rname, *wname; /* "reader"/"writer" or "new"/"old" */
} cctx;

static uint8_t *c_slot(cctx *c, const sch_node *r, const sch_node *w)
{
    uint64_t key = ((uint64_t)r->id + 1) << 32 | w->id;
    if ((c->n + 1) * 2 > c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 256;
        uint64_t *k = calloc(cap, sizeof *k);
        uint8_t *v = calloc(cap, 1);
        if (!k || !v) {
            free(k);
            free(v);
            c->oom = true;
            return NULL;
        }
        for (size_t i = 0; i < c->cap; i++)
            if (c->keys[i]) {
                size_t j = (c->keys[i] * 0x9E3779B97F4A7C15ull >> 20) & (cap - 1);
                while (k[j])
                    j = (j + 1) & (cap - 1);
                k[j] = c->keys[i];
                v[j] = c->vals[i];
            }
        free(c->keys);
        free(c->vals);
        c->keys = k;
        c->vals = v;
        c->cap = cap;
    }
    size_t j = (key * 0x9E3779B97F4A7C15ull >> 20) & (c->cap - 1);
    while (c->keys[j] && c->keys[j] != key)
        j = (j + 1) & (c->cap - 1);
    if (!c->keys[j]) {
        c->keys[j] = key;
        c->n++;
    }
    return &c->vals[j];
}

static void c_push(cctx *c, const char *seg, size_t *mark)
{
    *mark = c->plen;
    int n = snprintf(c->path + c->plen, sizeof c->path - c->plen, "/%s", seg);
    if (n > 0 && c->plen + (size_t)n < sizeof c->path)
        c->plen += (size_t)n;
}

static void c_pop(cctx *c, size_t mark)
{
    c->plen = mark;
    c->path[mark] = 0;
}

static const char *c_upper(sch_kind k, char *buf, size_t n)
{
    snprintf(buf, n, "%s", sch_kind_name(k));
    for (char *p = buf; *p; p++)
        if (*p >= 'a' && *p <= 'z')
            *p = (char)(*p - 'a' + 'A');
    return buf;
}

/* One incompatibility: errorType, description (Confluent's wording), and
 * additionalInfo (Java's message).  0 always: "not compatible". */
__attribute__((format(printf, 4, 5))) static int c_report(cctx *c, const char *type,
                                                          const char *desc, const char *fmt, ...)
{
    if (c->quiet || !c->why || !c->whylen)
        return 0;
    char info[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(info, sizeof info, fmt, ap);
    va_end(ap);
    const char *path = c->plen ? c->path : "/";
    char d[2048];
    if (strcmp(type, "READER_FIELD_MISSING_DEFAULT_VALUE") == 0)
        snprintf(d, sizeof d,
                 "The field '%s' at path '%s' in the %s schema has no default value and is "
                 "missing in the %s schema",
                 info, path, c->rname, c->wname);
    else if (strcmp(type, "MISSING_ENUM_SYMBOLS") == 0)
        snprintf(d, sizeof d, "The %s schema is missing enum symbols '%s' at path '%s' in the %s schema",
                 c->rname, info, path, c->wname);
    else
        snprintf(d, sizeof d, desc, path, c->rname, c->wname);
    /* Whole lines only: one that does not fit is left out. */
    int n = snprintf(c->why + c->wlen, c->whylen - c->wlen,
                     "%s{errorType:'%s', description:'%s', additionalInfo:'%s'}",
                     c->wlen ? "\n" : "", type, d, info);
    if (n > 0 && c->wlen + (size_t)n < c->whylen)
        c->wlen += (size_t)n;
    else
        c->why[c->wlen] = 0;
    return 0;
}

static int c_pair(cctx *c, const sch_node *r, const sch_node *w, int depth);

/* True once the work budget is spent (reported the first time): the
 * caller stops, incompatible. */
static bool c_spent(cctx *c)
{
    if (c->work >= 0)
        return false;
    if (!c->exhausted) {
        c->exhausted = true;
        int q = c->quiet;
        c->quiet = 0; /* the verdict is final: say why even inside a union */
        c_report(c, "TYPE_MISMATCH", "The schemas (path '%s') take too long to compare (%s, %s)",
                 "more than %ld steps", C_MAX_WORK);
        c->quiet = q;
    }
    return true;
}

static int c_sub(cctx *c, const char *seg, const sch_node *r, const sch_node *w, int depth)
{
    size_t mark;
    c_push(c, seg, &mark);
    int ok = c_pair(c, r, w, depth + 1);
    c_pop(c, mark);
    return ok;
}

static int c_names(cctx *c, const sch_node *r, const sch_node *w)
{
    if (strcmp(r->name, w->name) == 0)
        return 1;
    for (size_t i = 0; i < r->naliases; i++)
        if (strcmp(r->aliases[i], w->full) == 0)
            return 1;
    size_t mark;
    c_push(c, "name", &mark);
    c_report(c, "NAME_MISMATCH", "The name of the schema has changed (path '%s')", "expected: %s",
             w->full);
    c_pop(c, mark);
    return 0;
}

/* The writer's field for reader field number ri: by name (the same
 * position first: evolved records mostly keep their order), then by the
 * reader field's aliases. */
static const sch_field *c_writer_field(cctx *c, const sch_node *w, const sch_field *rf, size_t ri)
{
    if (ri < w->nfields && strcmp(w->fields[ri].name, rf->name) == 0)
        return &w->fields[ri];
    c->work -= (long)w->nfields * (1 + (long)json_array_size(rf->aliases));
    for (size_t i = 0; i < w->nfields; i++)
        if (strcmp(w->fields[i].name, rf->name) == 0)
            return &w->fields[i];
    size_t k;
    json_t *a;
    json_array_foreach(rf->aliases, k, a) {
        for (size_t i = 0; i < w->nfields; i++)
            if (strcmp(w->fields[i].name, json_string_value(a)) == 0)
                return &w->fields[i];
    }
    return NULL;
}

static int c_record(cctx *c, const sch_node *r, const sch_node *w, int depth)
{
    int all = c_names(c, r, w);
    if (!all && c->quiet)
        return 0;
    size_t m1, m2;
    c_push(c, "fields", &m1);
    for (size_t i = 0; i < r->nfields; i++) {
        if (c_spent(c)) {
            all = 0;
            break;
        }
        const sch_field *rf = &r->fields[i];
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        c_push(c, idx, &m2);
        const sch_field *wf = c_writer_field(c, w, rf, i);
        int ok = 1;
        if (wf)
            ok = c_sub(c, "type", rf->type, wf->type, depth);
        else if (!rf->dflt) {
            if (rf->type->kind == SCH_K_ENUM && rf->type->enum_default)
                ok = c_sub(c, "type", rf->type, w, depth);
            else
                ok = c_report(c, "READER_FIELD_MISSING_DEFAULT_VALUE", "", "%s", rf->name);
        }
        c_pop(c, m2);
        all &= ok;
        if (!ok && c->quiet)
            break;
    }
    c_pop(c, m1);
    return all;
}

static int c_enum(cctx *c, const sch_node *r, const sch_node *w)
{
    int named = c_names(c, r, w);
    if (!named && c->quiet)
        return 0;
    if (r->enum_default)
        return named;
    char missing[400] = "";
    size_t mlen = 0, nmissing = 0;
    sch_set rs;
    if (sch_set_init(&rs, r->nsymbols) != 0) {
        c->oom = true;
        return c_report(c, "MISSING_ENUM_SYMBOLS", "", "out of memory");
    }
    for (size_t k = 0; k < r->nsymbols; k++)
        sch_set_add(&rs, r->symbols[k]);
    for (size_t i = 0; i < w->nsymbols; i++) {
        bool found = sch_set_has(&rs, w->symbols[i]);
        if (!found && mlen < sizeof missing) {
            int n = snprintf(missing + mlen, sizeof missing - mlen, "%s%s", nmissing ? ", " : "",
                             w->symbols[i]);
            if (n > 0)
                mlen += (size_t)n;
        }
        nmissing += !found;
    }
    sch_set_free(&rs);
    if (!nmissing)
        return named;
    size_t mark;
    c_push(c, "symbols", &mark);
    c_report(c, "MISSING_ENUM_SYMBOLS", "", "[%s]", missing);
    c_pop(c, mark);
    return 0;
}

static int c_mismatch(cctx *c, const sch_node *r, const sch_node *w)
{
    char a[16], b[16];
    return c_report(c, "TYPE_MISMATCH",
                    "The type (path '%s') of a field in the %s schema does not match with the %s "
                    "schema",
                    "reader type: %s not compatible with writer type: %s",
                    c_upper(r->kind, a, sizeof a), c_upper(w->kind, b, sizeof b));
}

static int c_missing_branch(cctx *c, const sch_node *w)
{
    char a[16];
    return c_report(c, "MISSING_UNION_BRANCH",
                    "The %2$s schema is missing a type inside a union field at path '%1$s' in the "
                    "%3$s schema",
                    "reader union lacking writer type: %s", c_upper(w->kind, a, sizeof a));
}

static int c_same_kind(cctx *c, const sch_node *r, const sch_node *w, int depth)
{
    switch (r->kind) {
    case SCH_K_ARRAY: return c_sub(c, "items", r->items, w->items, depth);
    case SCH_K_MAP: return c_sub(c, "values", r->items, w->items, depth);
    case SCH_K_FIXED: {
        int named = c_names(c, r, w);
        if (!named && c->quiet)
            return 0;
        if (r->size != w->size) {
            size_t mark;
            c_push(c, "size", &mark);
            c_report(c, "FIXED_SIZE_MISMATCH",
                     "The size of FIXED type field at path '%s' in the %s schema does not match "
                     "with the %s schema",
                     "expected: %lld, found: %lld", (long long)w->size, (long long)r->size);
            c_pop(c, mark);
            return 0;
        }
        return named;
    }
    case SCH_K_ENUM: return c_enum(c, r, w);
    case SCH_K_RECORD: return c_record(c, r, w, depth);
    case SCH_K_UNION: {
        int all = 1;
        for (size_t i = 0; i < w->nbranches; i++) {
            char idx[24];
            snprintf(idx, sizeof idx, "%zu", i);
            size_t mark;
            c_push(c, idx, &mark);
            c->quiet++;
            int ok = c_pair(c, r, w->branches[i], depth + 1);
            c->quiet--;
            if (!ok)
                c_missing_branch(c, w->branches[i]);
            c_pop(c, mark);
            all &= ok;
            if (!ok && c->quiet)
                break;
        }
        return all;
    }
    default: return 1; /* primitives */
    }
}

static int c_other_kind(cctx *c, const sch_node *r, const sch_node *w, int depth)
{
    if (w->kind == SCH_K_UNION) {
        int all = 1;
        for (size_t i = 0; i < w->nbranches && (all || !c->quiet); i++)
            all &= c_pair(c, r, w->branches[i], depth + 1);
        return all;
    }
    sch_kind wk = w->kind;
    switch (r->kind) {
    case SCH_K_LONG:
        return wk == SCH_K_INT ? 1 : c_mismatch(c, r, w);
    case SCH_K_FLOAT:
        return wk == SCH_K_INT || wk == SCH_K_LONG ? 1 : c_mismatch(c, r, w);
    case SCH_K_DOUBLE:
        return wk == SCH_K_INT || wk == SCH_K_LONG || wk == SCH_K_FLOAT ? 1 : c_mismatch(c, r, w);
    case SCH_K_BYTES: return wk == SCH_K_STRING ? 1 : c_mismatch(c, r, w);
    case SCH_K_STRING: return wk == SCH_K_BYTES ? 1 : c_mismatch(c, r, w);
    case SCH_K_UNION:
        c->quiet++;
        for (size_t i = 0; i < r->nbranches; i++)
            if (c_pair(c, r->branches[i], w, depth + 1)) {
                c->quiet--;
                return 1;
            }
        c->quiet--;
        return c_missing_branch(c, w);
    default: return c_mismatch(c, r, w);
    }
}

static int c_pair(cctx *c, const sch_node *r, const sch_node *w, int depth)
{
    c->work--;
    if (c_spent(c))
        return 0;
    if (depth > C_MAX_DEPTH) {
        c_report(c, "TYPE_MISMATCH", "The schemas (path '%s') nest too deeply to compare (%s, %s)",
                 "nested deeper than %d", C_MAX_DEPTH);
        return 0;
    }
    uint8_t *m = c_slot(c, r, w);
    if (!m)
        return c_report(c, "TYPE_MISMATCH", "Out of memory comparing (path '%s') %s with %s",
                        "out of memory");
    if (*m == M_OK || *m == M_BUSY)
        return 1; /* compatible, or being checked: assumed (coinduction) */
    if (*m == M_BAD || (*m == M_BAD_QUIET && c->quiet))
        return 0; /* reported where first found, if anywhere */
    *m = M_BUSY;
    int ok = r->kind == w->kind ? c_same_kind(c, r, w, depth) : c_other_kind(c, r, w, depth);
    m = c_slot(c, r, w); /* the table may have grown */
    if (m)
        *m = ok ? M_OK : c->quiet ? M_BAD_QUIET : M_BAD;
    return ok;
}

/* Node ids are per schema; a memo key is always (reader's id, writer's id),
 * so the two schemas' ids never mix. */
static int c_check(const sch_schema *reader, const sch_schema *writer, const char *rname,
                   const char *wname, char *why, size_t whylen)
{
    if (why && whylen)
        why[0] = 0;
    cctx c = {.why = why, .whylen = whylen, .rname = rname, .wname = wname, .work = C_MAX_WORK};
    int ok = c_pair(&c, reader->root, writer->root, 0);
    free(c.keys);
    free(c.vals);
    return ok;
}

int sch_avro_compatible(const sch_schema *reader, const sch_schema *writer, char *why,
                        size_t whylen)
{
    return c_check(reader, writer, "reader", "writer", why, whylen);
}

int sch_avro_check_level(sch_level level, const sch_schema *new_schema,
                         const sch_schema *const *prev, size_t nprev, char *why, size_t whylen)
{
    if (why && whylen)
        why[0] = 0;
    if (level == SCH_LEVEL_NONE || nprev == 0)
        return 1;
    bool transitive = level == SCH_LEVEL_BACKWARD_TRANSITIVE ||
                      level == SCH_LEVEL_FORWARD_TRANSITIVE || level == SCH_LEVEL_FULL_TRANSITIVE;
    bool backward = level != SCH_LEVEL_FORWARD && level != SCH_LEVEL_FORWARD_TRANSITIVE;
    bool forward = level != SCH_LEVEL_BACKWARD && level != SCH_LEVEL_BACKWARD_TRANSITIVE;
    /* Latest first, as Confluent reports against the newest it fails. */
    for (size_t i = nprev; i-- > (transitive ? 0 : nprev - 1);) {
        if (backward && !c_check(new_schema, prev[i], "new", "old", why, whylen))
            return 0;
        if (forward && !c_check(prev[i], new_schema, "old", "new", why, whylen))
            return 0;
    }
    return 1;
}
