/*
 * daemon/registry/sr_mirror.c — the registry's state mirrored into the
 * broker's SQLite (metadata/schemas.c), for SQL's `schemas` and `subjects`.
 *
 * Design note.
 *
 * The mirror follows memory, which follows the log (sr_log.c R2).  Each
 * change sr_state.c makes while applying a record is noted here as one
 * row operation, a self-contained copy (a version put or gone, a schema
 * new or gone, a subject's settings, a soft delete); the operations of one
 * sr_log_tail become one job of the metadata sync worker (daemon/md_sync.c),
 * run on its own connection in one transaction.  So the loop's cost of a
 * registration is a few small copies whatever the subject's length, and
 * no SQL at all runs on the loop.  On start the first job clears the
 * tables, and the load's operations rebuild them.
 *
 * Invariants (cite as "sr_mirror.c X1"):
 *   X1. Jobs are submitted in the order their records were applied, and
 *       the worker runs jobs in submission order (md_sync.c S5), so SQL
 *       sees the log's changes in log order.
 *   X2. A write applied on this broker is answered only once the job that
 *       mirrors it has run (sr_mirror_answer), so a client reads its own
 *       registration back through SQL.  Only the answer waits: the next
 *       write starts at once.
 *   X3. A job is freed only once the worker is done with it (the durable
 *       sequence number covers its seq), or at stop after waiting for it.
 *   X4. An operation that cannot be noted (no memory) or a job that fails
 *       loses the mirror's step: the next flush rewrites it whole from
 *       memory instead.  A failure is logged; the registry keeps serving
 *       from memory (the mirror is rebuilt from _schemas on every start,
 *       so a crash loses nothing that matters).
 */
#include "daemon/registry/sr_int.h"
#include "daemon/md_sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MOP_CLEAR, MOP_VERSION_PUT, MOP_VERSION_DELETE, MOP_SOFT_DELETE, MOP_SCHEMA_PUT,
       MOP_SCHEMA_DELETE, MOP_CONFIG };

typedef struct sr_mop {
    int kind;
    bool deleted;
    int32_t a, b;                 /* version and id; upto; id */
    char *subject;                /* or the schema's type (MOP_SCHEMA_PUT) */
    char *text, *refs;
    char compat[SR_COMPAT_LEN], mode[SR_MODE_LEN];
} sr_mop;

struct sr_mjob {
    bk_mdjob job;
    sr_mjob *next;                /* r's jobs the worker may still read (X3) */
    sr_mop *ops;
    size_t n, cap;
};

struct sr_held {                  /* an answer waiting for its mirror (X2) */
    sr_held *next;
    uint64_t seq;
    sr_write_done done;
    void *arg;
    int status, code;
    char msg[256];
};

static sr_registry *mirror_r;     /* the listener's (md_sync's listeners take no arg) */

/* ---- the worker's side ----------------------------------------------------------------- */

static int op_run(md_db *db, const sr_mop *o, char *err, size_t errlen)
{
    switch (o->kind) {
    case MOP_CLEAR:
        return md_sr_clear(db, err, errlen);
    case MOP_VERSION_PUT:
        return md_sr_version_put(db, o->subject, o->a, o->b, o->deleted, err, errlen);
    case MOP_VERSION_DELETE:
        return md_sr_version_delete(db, o->subject, o->a, err, errlen);
    case MOP_SOFT_DELETE:
        return md_sr_soft_delete(db, o->subject, o->a, err, errlen);
    case MOP_SCHEMA_PUT:
        return md_sr_schema_put(db, o->a, o->subject, o->text, o->refs, err, errlen);
    case MOP_SCHEMA_DELETE:
        return md_sr_schema_delete(db, o->a, err, errlen);
    default:
        return md_sr_config_put(db, o->subject, o->compat, o->mode, err, errlen);
    }
}

/* Worker thread: the job's operations in order, in md_sync's transaction. */
static int job_run(md_db *db, bk_mdjob *job)
{
    sr_mjob *j = (sr_mjob *)job;
    char err[MD_ERRLEN] = "";
    for (size_t i = 0; i < j->n; i++) {
        int rc = op_run(db, &j->ops[i], err, sizeof err);
        if (rc) {
            BK_WARN("schema registry: cannot update its SQL mirror: %s", err);
            return rc;
        }
    }
    return 0;
}

/* ---- noting changes (loop thread) ------------------------------------------------------ */

static void job_free(sr_mjob *j)
{
    for (size_t i = 0; j && i < j->n; i++) {
        free(j->ops[i].subject);
        free(j->ops[i].text);
        free(j->ops[i].refs);
    }
    if (j)
        free(j->ops);
    free(j);
}

/* A new operation of the job being built, its strings copied; NULL (and
 * the mirror lost, X4) without memory. */
static sr_mop *op_add(sr_registry *r, int kind, const char *subject, const char *text,
                      const char *refs)
{
    if (!r->mirror_on || r->mirror_lost)
        return NULL;
    sr_mjob *j = r->mjob ? r->mjob : (r->mjob = calloc(1, sizeof *r->mjob));
    if (j && j->n == j->cap) {
        size_t c = j->cap ? 2 * j->cap : 8;
        sr_mop *p = realloc(j->ops, c * sizeof *p);
        if (p) {
            j->ops = p;
            j->cap = c;
        }
    }
    if (!j || j->n == j->cap) {
        r->mirror_lost = true;
        return NULL;
    }
    sr_mop *o = &j->ops[j->n];
    *o = (sr_mop){ .kind = kind };
    if ((subject && !(o->subject = strdup(subject))) || (text && !(o->text = strdup(text))) ||
        (refs && !(o->refs = strdup(refs)))) {
        free(o->subject);
        free(o->text);
        r->mirror_lost = true;
        return NULL;
    }
    j->n++;
    return o;
}

void sr_mirror_version(sr_registry *r, const char *subject, int32_t version,
                       const sr_version *v)
{
    sr_mop *o = op_add(r, v ? MOP_VERSION_PUT : MOP_VERSION_DELETE, subject, NULL, NULL);
    if (o)
        *o = (sr_mop){ .kind = o->kind, .subject = o->subject, .a = version,
                       .b = v ? v->id : 0, .deleted = v && v->deleted };
}

void sr_mirror_soft_delete(sr_registry *r, const char *subject, int32_t upto)
{
    sr_mop *o = op_add(r, MOP_SOFT_DELETE, subject, NULL, NULL);
    if (o)
        o->a = upto;
}

void sr_mirror_schema(sr_registry *r, const sr_schema *x, bool gone)
{
    sr_mop *o = gone ? op_add(r, MOP_SCHEMA_DELETE, NULL, NULL, NULL)
                : op_add(r, MOP_SCHEMA_PUT, x->type, x->text, x->refs);
    if (o)
        o->a = x->id;
}

void sr_mirror_settings(sr_registry *r, const sr_subject *s)
{
    sr_mop *o = op_add(r, MOP_CONFIG, s ? s->name : "", NULL, NULL);
    if (!o)
        return;
    /* the registry's own: stored only where it differs from the default */
    const char *c = s ? s->compat : strcmp(r->compat, "BACKWARD") ? r->compat : "";
    const char *m = s ? s->mode : strcmp(r->mode, "READWRITE") ? r->mode : "";
    snprintf(o->compat, sizeof o->compat, "%s", c);
    snprintf(o->mode, sizeof o->mode, "%s", m);
}

/* X4: the job being built replaced by memory whole. */
static void rebuild(sr_registry *r)
{
    job_free(r->mjob);
    r->mjob = NULL;
    r->mirror_lost = false;
    op_add(r, MOP_CLEAR, NULL, NULL, NULL);
    for (size_t i = 0; i < r->nschemas; i++)
        sr_mirror_schema(r, r->schemas[i], false);
    for (size_t i = 0; i < r->nsubjects; i++) {
        sr_subject *s = r->subjects[i];
        for (size_t k = 0; k < s->nv; k++)
            sr_mirror_version(r, s->name, s->v[k].version, &s->v[k]);
        if (s->compat[0] || s->mode[0])
            sr_mirror_settings(r, s);
    }
    sr_mirror_settings(r, NULL);
}

/* ---- jobs in flight and answers held --------------------------------------------------- */

/* X3: the jobs the worker is done with, freed; a failed one loses the mirror. */
static void reap(sr_registry *r, uint64_t durable)
{
    while (r->mjobs && r->mjobs->job.seq <= durable) {
        sr_mjob *j = r->mjobs;
        r->mjobs = j->next;
        if (j->job.rc)
            r->mirror_lost = true;
        job_free(j);
    }
    if (!r->mjobs)
        r->mjobs_tail = &r->mjobs;
}

static void answer_held(sr_registry *r, uint64_t durable)
{
    while (r->held && r->held->seq <= durable) {
        sr_held *h = r->held;
        r->held = h->next;
        if (!r->held)
            r->held_tail = &r->held;
        h->done(r, h->arg, h->status, h->code, h->msg);
        free(h);
    }
}

uint64_t sr_mirror_flush(sr_registry *r)
{
    if (!r->mirror_on)
        return r->mirror_seq;
    if (r->mirror_lost) {
        BK_WARN("schema registry: its SQL mirror missed a change; rewriting it whole");
        rebuild(r);
    }
    sr_mjob *j = r->mjob;
    if (!j || !j->n)
        return r->mirror_seq;
    r->mjob = NULL;
    j->job.run = job_run;
    *r->mjobs_tail = j;                       /* before the submit: it may run inline */
    r->mjobs_tail = &j->next;
    r->mirror_seq = bk_mdsync_submit(r->b, &j->job);   /* X1 */
    reap(r, bk_mdsync_durable());
    return r->mirror_seq;
}

/* md_sync's listener: jobs up to seq have run. */
static void on_durable(uint64_t seq, int err)
{
    (void)err;                                /* the rows are written; durability of
                                                 the mirror is not what answers wait for */
    sr_registry *r = mirror_r;
    if (!r)
        return;
    reap(r, seq);
    answer_held(r, seq);
    if (r->mirror_lost)
        sr_mirror_flush(r);
}

void sr_mirror_answer(sr_registry *r, sr_write_done done, void *arg, int status, int code,
                      const char *msg)
{
    uint64_t seq = r->mirror_seq;
    sr_held *h = status == 200 && r->mirror_on && seq > bk_mdsync_durable()
                 ? calloc(1, sizeof *h) : NULL;
    if (!h) {
        done(r, arg, status, code, msg);
        return;
    }
    *h = (sr_held){ .seq = seq, .done = done, .arg = arg, .status = status, .code = code };
    snprintf(h->msg, sizeof h->msg, "%s", msg ? msg : "");
    *r->held_tail = h;
    r->held_tail = &h->next;
    sr_kick(r);                               /* X2: the next write need not wait */
}

void sr_mirror_start(sr_registry *r)
{
    r->mjobs_tail = &r->mjobs;
    r->held_tail = &r->held;
    r->mirror_on = true;
    mirror_r = r;
    (void)bk_mdsync_listen(on_durable);       /* -1 without a worker: jobs run inline */
    op_add(r, MOP_CLEAR, NULL, NULL, NULL);   /* the load rebuilds the tables */
}

void sr_mirror_stop(sr_registry *r)
{
    if (!r->mirror_on)
        return;
    sr_mirror_flush(r);
    bk_mdsync_wait(r->mirror_seq);            /* shutdown: the loop has stopped */
    bk_mdsync_unlisten(on_durable);
    reap(r, UINT64_MAX);
    answer_held(r, UINT64_MAX);
    job_free(r->mjob);
    r->mjob = NULL;
    r->mirror_on = false;
    mirror_r = NULL;
}
