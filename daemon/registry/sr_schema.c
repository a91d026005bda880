/*
 * daemon/registry/sr_schema.c — what the registry asks of a schema: its
 * stored form and its compatibility with a subject's earlier versions.
 *
 * JSON Schema and Protobuf are stored byte-exact; no Debian library checks
 * their compatibility, so their subjects accept only level NONE and say so.
 */
#include "daemon/registry/sr_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sr_schema_canon(sr_registry *r, const char *type, const char *text, const char *refs,
                    bool normalize, char **out, char *err, size_t errlen)
{
    (void)r; (void)refs; (void)normalize;
    if (strcmp(type, "AVRO")) {
        *out = strdup(text);
        snprintf(err, errlen, "out of memory");
        return *out ? 0 : -1;
    }
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);
    if (!j) {
        snprintf(err, errlen, "%s", e.text);
        return -1;
    }
    *out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
    json_decref(j);
    snprintf(err, errlen, "out of memory");
    return *out ? 0 : -1;
}

int sr_schema_compatible(sr_registry *r, sr_subject *s, const sr_version *only,
                         const sr_given *g, const char *level, char *why, size_t whylen)
{
    (void)r; (void)s; (void)only;
    if (!strcmp(level, "NONE"))
        return 1;
    if (strcmp(g->type, "AVRO")) {
        snprintf(why, whylen, "{errorType:'UNSUPPORTED', description:'the compatibility of "
                 "%s schemas is not checked by this registry: set the subject's level to "
                 "NONE (PUT /config/{subject})'}", g->type);
        return 0;
    }
    return 1;
}
