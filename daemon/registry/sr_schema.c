/*
 * daemon/registry/sr_schema.c — what the registry asks of a schema: its
 * stored form and its compatibility with a subject's earlier versions,
 * through schema/sch.h (Avro parsed with Java's rules, written as Java's
 * Schema.toString(), which Confluent stores and compares).
 *
 * References ({name, subject, version}) resolve to the versions they name
 * through schema/refs.c (theirs first, each schema once, bounded), looked
 * up in the registry's memory.
 *
 * JSON Schema and Protobuf are stored byte-exact; no Debian library checks
 * their compatibility, so their subjects accept only level NONE and say so.
 */
#include "daemon/registry/sr_int.h"
#include "schema/sch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* sch_ref_lookup over the registry's memory: a subject's version. */
static int ref_lookup(void *arg, const char *subject, int32_t version, sch_ref_found *out)
{
    sr_registry *r = arg;
    sr_subject *s = sr_subject_find(r, subject);
    sr_version *v = s ? sr_version_find(s, version) : NULL;
    sr_schema *x = v ? sr_schema_by_id(r, v->id) : NULL;
    if (!x)
        return -1;
    *out = (sch_ref_found){ .id = x->id, .text = x->text, .refs = x->refs };
    return 0;
}

/* Avro text with its references parsed.  0 with *out, or -1 with err. */
static int avro_parse(sr_registry *r, const char *text, const char *refs, sch_schema **out,
                      char *err, size_t errlen)
{
    sch_ref_set *set = calloc(1, sizeof *set);
    if (!set) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = sch_refs_collect(refs, ref_lookup, r, set, err, errlen);
    if (rc == 0)
        rc = sch_avro_parse(text, strlen(text), set->refs, set->n, out, err, errlen);
    sch_refs_free(set);
    free(set);
    return rc;
}

int sr_schema_parse(sr_registry *r, const sr_schema *s, sch_schema **out, char *err,
                    size_t errlen)
{
    return avro_parse(r, s->text, s->refs, out, err, errlen);
}

int sr_schema_canon(sr_registry *r, const char *type, const char *text, const char *refs,
                    bool normalize, char **out, char *err, size_t errlen)
{
    if (strcmp(type, "AVRO")) {
        *out = strdup(text);
        snprintf(err, errlen, "out of memory");
        return *out ? 0 : -1;
    }
    sch_schema *s;
    if (avro_parse(r, text, refs, &s, err, errlen) != 0)
        return -1;
    kp_buf b;
    kp_buf_init(&b);
    int rc = sch_avro_canonical(s, normalize, &b) == 0 && !b.err ? 0 : -1;
    sch_free(s);
    *out = rc == 0 ? strndup((const char *)b.data, b.len) : NULL;
    kp_buf_free(&b);
    snprintf(err, errlen, "out of memory");
    return *out ? 0 : -1;
}

/* s's versions to check against: only, or the live ones, oldest first.
 * The count, or -1 with why (a stored schema of another type). */
static int prev_parse(sr_registry *r, sr_subject *s, const sr_version *only,
                      sch_schema **prev, char *why, size_t whylen)
{
    int n = 0;
    for (size_t i = 0; i < s->nv; i++) {
        const sr_version *v = &s->v[i];
        if (only ? v != only : v->deleted)
            continue;
        sr_schema *x = sr_schema_by_id(r, v->id);
        if (!x)
            continue;
        char err[512];
        if (strcmp(x->type, "AVRO")) {
            snprintf(why, whylen, "{errorType:'TYPE_MISMATCH', description:'version %d is a "
                     "%s schema, not Avro', additionalInfo:'/'}", v->version, x->type);
        } else if (avro_parse(r, x->text, x->refs, &prev[n], err, sizeof err) != 0) {
            snprintf(why, whylen, "{errorType:'UNREADABLE', description:'version %d does "
                     "not parse: %s'}", v->version, err);
        } else {
            n++;
            continue;
        }
        while (n > 0)
            sch_free(prev[--n]);      /* those parsed before it */
        return -1;
    }
    return n;
}

int sr_schema_compatible(sr_registry *r, sr_subject *s, const sr_version *only,
                         const sr_given *g, const char *level, char *why, size_t whylen)
{
    sch_level lv;
    if (!strcmp(level, "NONE") || sch_level_parse(level, &lv) != 0)
        return 1;
    if (strcmp(g->type, "AVRO")) {
        snprintf(why, whylen, "{errorType:'UNSUPPORTED', description:'the compatibility of "
                 "%s schemas is not checked by this registry: set the subject's level to "
                 "NONE (PUT /config/{subject})'}", g->type);
        return 0;
    }
    char err[512];
    sch_schema *next = NULL, **prev = calloc(s->nv ? s->nv : 1, sizeof *prev);
    int n = prev ? prev_parse(r, s, only, prev, why, whylen) : -1;
    int ok = 0;
    if (!prev) {
        snprintf(why, whylen, "{errorType:'OUT_OF_MEMORY'}");
    } else if (n >= 0 && avro_parse(r, g->text, g->refs, &next, err, sizeof err) != 0) {
        snprintf(why, whylen, "{errorType:'UNREADABLE', description:'%s'}", err);
    } else if (n >= 0) {
        ok = sch_avro_check_level(lv, next, (const sch_schema *const *)prev, (size_t)n, why,
                                  whylen);
        size_t l = strlen(why);
        if (!ok && l + 1 < whylen)
            snprintf(why + l, whylen - l, ", {compatibility: '%s'}", level);
    }
    for (int i = 0; i < n; i++)
        sch_free(prev[i]);
    free(prev);
    sch_free(next);
    return ok;
}
