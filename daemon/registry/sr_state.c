/*
 * daemon/registry/sr_state.c — the registry's model in memory, and the
 * _schemas records that change it.
 *
 * Records (Confluent's KafkaSchemaRegistry, JSON keys and values):
 *
 *     key {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
 *         value {"subject":S,"version":V,"id":N,["schemaType":T,]
 *                ["references":[...],]"schema":TEXT,"deleted":B}
 *         null: version V of S is gone for good (a permanent delete)
 *     key {"keytype":"CONFIG","subject":S|null,"magic":0}
 *         value {"compatibilityLevel":L}; null: S's level is cleared
 *     key {"keytype":"MODE","subject":S|null,"magic":0}
 *         value {"mode":M}; null: cleared
 *     key {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}
 *         value {"subject":S,"version":V}: versions up to V soft-deleted
 *     key {"keytype":"CLEAR_SUBJECT" | "NOOP" | "CONTEXT", ...}: skipped
 *
 * Invariants (cite as "sr_state.c M1"):
 *   M1. schemas[] is ascending by id, subjects[] by name; a schema is kept
 *       while a version (soft-deleted or not) names it (uses > 0).
 *   M2. max_id never goes down: an id once seen is not handed out again,
 *       even after its schema is gone.  (Across a restart it is the highest
 *       id the log still holds, as Confluent's IncrementalIdGenerator: ids
 *       whose every record compaction removed may come back.)
 */
#include "daemon/registry/sr_int.h"

#include <stdlib.h>
#include <string.h>

/* ---- lookups ---------------------------------------------------------------------- */

static size_t schema_pos(sr_registry *r, int32_t id)
{
    size_t lo = 0, hi = r->nschemas;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->schemas[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

sr_schema *sr_schema_by_id(sr_registry *r, int32_t id)
{
    size_t i = schema_pos(r, id);
    return i < r->nschemas && r->schemas[i]->id == id ? r->schemas[i] : NULL;
}

sr_schema *sr_schema_find(sr_registry *r, const char *type, const char *text,
                          const char *refs)
{
    for (size_t i = 0; i < r->nschemas; i++) {
        sr_schema *s = r->schemas[i];
        if (!strcmp(s->text, text) && !strcmp(s->type, type) && !strcmp(s->refs, refs))
            return s;
    }
    return NULL;
}

static size_t subject_pos(sr_registry *r, const char *name)
{
    size_t lo = 0, hi = r->nsubjects;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(r->subjects[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

sr_subject *sr_subject_find(sr_registry *r, const char *name)
{
    size_t i = subject_pos(r, name);
    return i < r->nsubjects && !strcmp(r->subjects[i]->name, name) ? r->subjects[i] : NULL;
}

sr_version *sr_version_find(sr_subject *s, int32_t version)
{
    for (size_t i = 0; i < s->nv; i++)
        if (s->v[i].version == version)
            return &s->v[i];
    return NULL;
}

sr_version *sr_version_latest(sr_subject *s, bool deleted)
{
    for (size_t i = s->nv; i-- > 0;)
        if (deleted || !s->v[i].deleted)
            return &s->v[i];
    return NULL;
}

size_t sr_subject_live(const sr_subject *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->nv; i++)
        n += !s->v[i].deleted;
    return n;
}

const char *sr_compat_of(sr_registry *r, const sr_subject *s)
{
    return s && s->compat[0] ? s->compat : r->compat;
}

const char *sr_mode_of(sr_registry *r, const sr_subject *s)
{
    return s && s->mode[0] ? s->mode : r->mode;
}

/* ---- changes -------------------------------------------------------------------------- */

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
    if (n < *cap)
        return 0;
    size_t c = *cap ? 2 * *cap : 16;
    void *p = realloc(*arr, c * size);
    if (!p)
        return -1;
    *arr = p;
    *cap = c;
    return 0;
}

static sr_subject *subject_add(sr_registry *r, const char *name)
{
    sr_subject *s = sr_subject_find(r, name);
    if (s)
        return s;
    if (grow((void **)&r->subjects, &r->cap_subjects, r->nsubjects, sizeof *r->subjects))
        return NULL;
    if (!(s = calloc(1, sizeof *s)) || !(s->name = strdup(name))) {
        free(s);
        return NULL;
    }
    size_t i = subject_pos(r, name);
    memmove(&r->subjects[i + 1], &r->subjects[i], (r->nsubjects - i) * sizeof *r->subjects);
    r->subjects[i] = s;
    r->nsubjects++;
    return s;
}

/* A subject with no version and no setting of its own leaves memory. */
static void subject_maybe_drop(sr_registry *r, sr_subject *s)
{
    if (s->nv || s->compat[0] || s->mode[0])
        return;
    size_t i = subject_pos(r, s->name);
    memmove(&r->subjects[i], &r->subjects[i + 1], (r->nsubjects - i - 1) * sizeof *r->subjects);
    r->nsubjects--;
    free(s->v);
    free(s->name);
    free(s);
}

static void schema_unuse(sr_registry *r, int32_t id)
{
    size_t i = schema_pos(r, id);
    if (i >= r->nschemas || r->schemas[i]->id != id || --r->schemas[i]->uses > 0)
        return;
    sr_schema *s = r->schemas[i];
    sr_mirror_schema(r, s, true);
    memmove(&r->schemas[i], &r->schemas[i + 1], (r->nschemas - i - 1) * sizeof *r->schemas);
    r->nschemas--;
    free(s->type);
    free(s->text);
    free(s->refs);
    free(s->answer);
    free(s);
}

/* Id id names (type, text, refs), one use more (M1). */
static int schema_use(sr_registry *r, int32_t id, const char *type, const char *text,
                      const char *refs)
{
    if (id > r->max_id)
        r->max_id = id;                          /* M2 */
    size_t i = schema_pos(r, id);
    if (i < r->nschemas && r->schemas[i]->id == id) {
        r->schemas[i]->uses++;
        return 0;
    }
    if (grow((void **)&r->schemas, &r->cap_schemas, r->nschemas, sizeof *r->schemas))
        return -1;
    sr_schema *s = calloc(1, sizeof *s);
    if (!s || !(s->type = strdup(type)) || !(s->text = strdup(text)) ||
        !(s->refs = strdup(refs))) {
        if (s) {
            free(s->type);
            free(s->text);
        }
        free(s);
        return -1;
    }
    s->id = id;
    s->uses = 1;
    memmove(&r->schemas[i + 1], &r->schemas[i], (r->nschemas - i) * sizeof *r->schemas);
    r->schemas[i] = s;
    r->nschemas++;
    sr_mirror_schema(r, s, false);
    return 0;
}

static bool version_remove(sr_registry *r, sr_subject *s, int32_t version)
{
    sr_version *v = sr_version_find(s, version);
    if (!v)
        return false;
    int32_t id = v->id;
    size_t i = (size_t)(v - s->v);
    memmove(&s->v[i], &s->v[i + 1], (s->nv - i - 1) * sizeof *s->v);
    s->nv--;
    schema_unuse(r, id);
    return true;
}

static int apply_schema(sr_registry *r, const char *subject, int32_t version, json_t *val)
{
    sr_subject *s = subject_add(r, subject);
    if (!s)
        return -1;
    if (!val) {
        if (version_remove(r, s, version))
            sr_mirror_version(r, subject, version, NULL);
        subject_maybe_drop(r, s);
        return 0;
    }
    json_int_t id = json_integer_value(json_object_get(val, "id"));
    const char *text = json_string_value(json_object_get(val, "schema"));
    const char *type = json_string_value(json_object_get(val, "schemaType"));
    json_t *refs = json_object_get(val, "references");
    if (id <= 0 || id > INT32_MAX || !text)
        return 0;                                /* not one we can serve: skipped */
    char *rtext = refs && json_array_size(refs)
                  ? json_dumps(refs, JSON_COMPACT | JSON_PRESERVE_ORDER) : strdup("[]");
    if (!rtext)
        return -1;
    version_remove(r, s, version);               /* a rewrite (soft delete) replaces it */
    int rc = schema_use(r, (int32_t)id, type ? type : "AVRO", text, rtext);
    free(rtext);
    if (rc || grow((void **)&s->v, &s->cap, s->nv, sizeof *s->v))
        return -1;
    size_t i = s->nv;
    while (i > 0 && s->v[i - 1].version > version)
        i--;
    memmove(&s->v[i + 1], &s->v[i], (s->nv - i) * sizeof *s->v);
    s->v[i] = (sr_version){ .version = version, .id = (int32_t)id,
                            .deleted = json_is_true(json_object_get(val, "deleted")) };
    s->nv++;
    sr_mirror_version(r, subject, version, &s->v[i]);
    return 0;
}

/* CONFIG and MODE: a subject's own setting or the global one. */
static int apply_setting(sr_registry *r, const char *subject, bool config, json_t *val)
{
    const char *v = json_string_value(json_object_get(val, config ? "compatibilityLevel"
                                                                   : "mode"));
    if (val && !v)
        return 0;
    sr_subject *s = subject ? subject_add(r, subject) : NULL;
    if (subject && !s)
        return -1;
    char *dst = config ? (s ? s->compat : r->compat) : (s ? s->mode : r->mode);
    size_t cap = config ? SR_COMPAT_LEN : SR_MODE_LEN;
    const char *dflt = s ? "" : config ? "BACKWARD" : "READWRITE";
    snprintf(dst, cap, "%s", v ? v : dflt);
    sr_mirror_settings(r, s);
    if (s)
        subject_maybe_drop(r, s);
    return 0;
}

int sr_state_apply(sr_registry *r, const char *key, size_t klen, const char *val,
                   ssize_t vlen)
{
    r->gen++;                                    /* sr_validate.c's index is stale */
    json_t *k = json_loadb(key, klen, 0, NULL);
    json_t *v = val && vlen >= 0 ? json_loadb(val, (size_t)vlen, JSON_DECODE_ANY, NULL) : NULL;
    const char *kt = v || !val || vlen < 0 ? json_string_value(json_object_get(k, "keytype"))
                     : NULL;                     /* a value that does not parse: skipped,
                                                    never taken for a tombstone */
    const char *subject = json_string_value(json_object_get(k, "subject"));
    if (v && json_is_null(v)) {
        json_decref(v);
        v = NULL;
    }
    int rc = 0;
    if (!kt) {
        rc = 0;                                  /* not a registry key: skipped */
    } else if (!strcmp(kt, "SCHEMA") && subject) {
        json_int_t ver = json_integer_value(json_object_get(k, "version"));
        if (ver > 0 && ver <= INT32_MAX)
            rc = apply_schema(r, subject, (int32_t)ver, v);
    } else if (!strcmp(kt, "CONFIG") || !strcmp(kt, "MODE")) {
        rc = apply_setting(r, subject, kt[0] == 'C', v);
    } else if (!strcmp(kt, "DELETE_SUBJECT") && subject && v) {
        sr_subject *s = sr_subject_find(r, subject);
        json_int_t upto = json_integer_value(json_object_get(v, "version"));
        for (size_t i = 0; s && i < s->nv; i++)
            if (s->v[i].version <= upto)
                s->v[i].deleted = true;
        if (s && upto > 0)
            sr_mirror_soft_delete(r, subject, upto > INT32_MAX ? INT32_MAX : (int32_t)upto);
    }
    json_decref(k);
    json_decref(v);
    return rc;
}

void sr_state_free(sr_registry *r)
{
    for (size_t i = 0; i < r->nsubjects; i++) {
        free(r->subjects[i]->v);
        free(r->subjects[i]->name);
        free(r->subjects[i]);
    }
    for (size_t i = 0; i < r->nschemas; i++) {
        free(r->schemas[i]->type);
        free(r->schemas[i]->text);
        free(r->schemas[i]->refs);
        free(r->schemas[i]->answer);
        free(r->schemas[i]);
    }
    free(r->subjects);
    free(r->schemas);
    r->subjects = NULL;
    r->schemas = NULL;
    r->nsubjects = r->nschemas = r->cap_subjects = r->cap_schemas = 0;
}

/* ---- records out ------------------------------------------------------------------------ */

static char *dump(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return s;
}

static json_t *jsubject(const char *subject)
{
    return subject ? json_string(subject) : json_null();
}

char *sr_key_schema(const char *subject, int32_t version)
{
    return dump(json_pack("{s:s, s:s, s:i, s:i}", "keytype", "SCHEMA", "subject", subject,
                          "version", version, "magic", 1));
}

static char *key_of(const char *type, const char *subject)
{
    json_t *s = jsubject(subject);
    char *k = dump(json_pack("{s:s, s:O, s:i}", "keytype", type, "subject", s, "magic", 0));
    json_decref(s);
    return k;
}

char *sr_key_config(const char *subject)
{
    return key_of("CONFIG", subject);
}

char *sr_key_mode(const char *subject)
{
    return key_of("MODE", subject);
}

char *sr_key_delete_subject(const char *subject)
{
    return key_of("DELETE_SUBJECT", subject);
}

char *sr_val_delete_subject(const char *subject, int32_t version)
{
    return dump(json_pack("{s:s, s:i}", "subject", subject, "version", version));
}

char *sr_val_setting(bool config, const char *v)
{
    return dump(json_pack("{s:s}", config ? "compatibilityLevel" : "mode", v));
}

char *sr_val_schema(const char *subject, int32_t version, int32_t id, const char *type,
                    const char *text, const char *refs, bool deleted)
{
    json_t *v = json_pack("{s:s, s:i, s:i}", "subject", subject, "version", version, "id", id);
    if (v && strcmp(type, "AVRO"))
        json_object_set_new(v, "schemaType", json_string(type));
    if (v && strcmp(refs, "[]"))
        json_object_set_new(v, "references", json_loads(refs, 0, NULL));
    if (v) {
        json_object_set_new(v, "schema", json_string(text));
        json_object_set_new(v, "deleted", json_boolean(deleted));
    }
    return dump(v);
}
