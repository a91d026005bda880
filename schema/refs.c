/*
 * schema/refs.c — a schema's references ({name, subject, version}, JSON)
 * resolved to the texts sch_avro_parse takes, through the caller's store:
 * the registry's memory (daemon/registry/sr_schema.c) or SQLite's mirror
 * of it (admin/sql_messages.c).
 *
 * Each referenced schema comes once, its own references before it
 * (Confluent's order).  References cannot form a cycle (a reference names
 * a version registered before it); their number and nesting are bounded
 * all the same (SCH_MAX_REFS, SCH_MAX_REF_DEPTH), so a hostile store
 * cannot make this loop.
 */
#include "schema/sch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static int collect(const char *refs, sch_ref_lookup lookup, void *arg, sch_ref_set *set,
                   int depth, char *err, size_t errlen)
{
    if (!refs || !strcmp(refs, "[]"))
        return 0;
    if (depth > SCH_MAX_REF_DEPTH) {
        snprintf(err, errlen, "references nest deeper than %d", SCH_MAX_REF_DEPTH);
        return -1;
    }
    json_t *a = json_loads(refs, 0, NULL);
    if (!json_is_array(a)) {
        json_decref(a);
        snprintf(err, errlen, "references are not a JSON array");
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < json_array_size(a); i++) {
        json_t *ref = json_array_get(a, i);
        const char *subject = json_string_value(json_object_get(ref, "subject"));
        json_t *version = json_object_get(ref, "version");
        sch_ref_found x;
        if (!subject || !json_is_integer(version) ||
            lookup(arg, subject, (int32_t)json_integer_value(version), &x) != 0) {
            snprintf(err, errlen, "reference %s not found",
                     subject ? subject : "(without a subject)");
            rc = -1;
            break;
        }
        bool have = false;
        for (size_t k = 0; k < set->n && !have; k++)
            have = set->ids[k] == x.id;
        if (have)
            continue;
        if ((rc = collect(x.refs, lookup, arg, set, depth + 1, err, errlen)) != 0)
            break;
        if (set->n == SCH_MAX_REFS) {
            snprintf(err, errlen, "more than %d references", SCH_MAX_REFS);
            rc = -1;
            break;
        }
        const char *name = json_string_value(json_object_get(ref, "name"));
        size_t k = set->n++;
        set->names[k] = name ? strdup(name) : NULL;
        set->ids[k] = x.id;
        set->refs[k] = (sch_ref){ set->names[k], x.text, strlen(x.text) };
    }
    json_decref(a);
    return rc;
}

int sch_refs_collect(const char *refs, sch_ref_lookup lookup, void *arg, sch_ref_set *set,
                     char *err, size_t errlen)
{
    return collect(refs, lookup, arg, set, 0, err, errlen);
}

void sch_refs_free(sch_ref_set *set)
{
    for (size_t k = 0; k < set->n; k++)
        free(set->names[k]);
    set->n = 0;
}
