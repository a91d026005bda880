/*
 * daemon/registry/sr_mirror.c — the registry's state mirrored into the
 * broker's SQLite (metadata/schemas.c), for SQL's `schemas` and `subjects`.
 *
 * The mirror follows memory, which follows the log (sr_log.c R2): after a
 * write's records are applied, the subjects they name are rewritten; after
 * the load on start, everything is.  One transaction per write, committed
 * to the WAL without an fsync on the loop (metadata/db.c's md_begin /
 * md_commit): the mirror is rebuilt from _schemas on every start, so a
 * crash can lose nothing that matters.  A failed mirror write is logged and
 * the registry keeps serving from memory.
 */
#include "daemon/registry/sr_int.h"

#include <stdlib.h>
#include <string.h>

/* s's rows (the registry's own settings when s is NULL), and its schemas. */
static int put_subject(sr_registry *r, const char *name, char *err, size_t errlen)
{
    md_db *db = r->b->db;
    if (!name[0])
        return md_sr_subject_put(db, "", NULL, 0, strcmp(r->compat, "BACKWARD") ? r->compat
                                 : "", strcmp(r->mode, "READWRITE") ? r->mode : "", err,
                                 errlen);
    sr_subject *s = sr_subject_find(r, name);
    md_sr_version *v = s && s->nv ? calloc(s->nv, sizeof *v) : NULL;
    if (s && s->nv && !v)
        return md_sr_subject_put(db, name, NULL, 0, NULL, NULL, err, errlen);
    int rc = 0;
    for (size_t i = 0; s && i < s->nv && !rc; i++) {
        v[i] = (md_sr_version){ s->v[i].version, s->v[i].id, s->v[i].deleted };
        sr_schema *x = sr_schema_by_id(r, s->v[i].id);
        if (x)
            rc = md_sr_schema_put(db, x->id, x->type, x->text, x->refs, err, errlen);
    }
    if (!rc)
        rc = md_sr_subject_put(db, name, v, s ? s->nv : 0, s ? s->compat : NULL,
                               s ? s->mode : NULL, err, errlen);
    free(v);
    return rc;
}

void sr_mirror(sr_registry *r, const char *const *subjects, size_t n)
{
    char err[MD_ERRLEN] = "";
    if (!r->b->db || md_begin(r->b->db) != 0) {
        BK_WARN("schema registry: cannot update its SQL mirror (begin failed)");
        return;
    }
    int rc = 0;
    if (!subjects) {                          /* all: the rebuild on start */
        rc = md_sr_clear(r->b->db, err, sizeof err);
        for (size_t i = 0; !rc && i < r->nsubjects; i++)
            rc = put_subject(r, r->subjects[i]->name, err, sizeof err);
        if (!rc)
            rc = put_subject(r, "", err, sizeof err);
    }
    for (size_t i = 0; subjects && !rc && i < n; i++)
        rc = put_subject(r, subjects[i], err, sizeof err);
    if (!rc)
        rc = md_sr_schemas_prune(r->b->db, err, sizeof err);
    if (rc) {
        md_rollback(r->b->db);
        BK_WARN("schema registry: cannot update its SQL mirror: %s", err);
    } else if (md_commit(r->b->db) != 0) {
        BK_WARN("schema registry: cannot update its SQL mirror (commit failed)");
    }
}
