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
 * sr_log_tail become one job, run in one transaction by the registry's own
 * worker thread (daemon/worker.h, "sluice-srmirror") on its own
 * connection to the metadata database (md_open_syncer).  So the loop's
 * cost of a registration is a few small copies whatever the subject's
 * length, and no SQL runs on the loop.  The start's load is the exception:
 * its job (which first clears the tables) runs before the loop serves,
 * on the loop's connection, so SQL's first reads find the rebuilt mirror.
 *
 * Not the metadata sync worker (md_sync.c): its jobs are answered after the
 * WAL's fdatasync, and the mirror needs none (it is rebuilt from _schemas
 * on every start, so a crash loses nothing that matters); waiting for one
 * per registration cut registry_bench's registrations from ~1,100/s to
 * 200-800/s.
 *
 * Invariants (cite as "sr_mirror.c X1"):
 *   X1. Jobs run in the order their records were applied (one thread:
 *       worker.h W1), so SQL sees the log's changes in log order.
 *   X2. A write applied on this broker is answered only once the job that
 *       mirrors it has run (sr_mirror_answer), so a client reads its own
 *       registration back through SQL.  Only the answer waits: the next
 *       write starts at once.
 *   X3. A job is the worker's from its submission until its done() on the
 *       loop, which frees it; at stop the worker drains before the rest
 *       is freed.
 *   X4. An operation that cannot be noted (no memory) or a job that fails
 *       loses the mirror's step: the next flush rewrites it whole from
 *       memory instead.  After a failed job that rewrite waits 1, 2, 4 …
 *       SR_MIRROR_RETRY_MAX_S seconds (a full disk or a lock held for long
 *       would otherwise make the loop copy the registry again and again),
 *       and writes meanwhile are answered without waiting for the mirror
 *       (X2 is suspended: it is known to be behind).  The first failure is
 *       logged, then nothing until the mirror is whole again (one line);
 *       the registry keeps serving from memory.
 */
#include "daemon/registry/sr_int.h"
#include "daemon/worker.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define SR_MIRROR_RETRY_MAX_S 30

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
    bk_work work;
    sr_registry *r;
    uint64_t seq;
    int rc;                       /* the worker's result, read in done() */
    bool quiet;                   /* X4: a failure is logged already */
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

/* The job's operations in order, in one transaction of db.  0 or MD_E_SQL. */
static int job_exec(md_db *db, sr_mjob *j)
{
    char err[MD_ERRLEN] = "";
    if (md_begin(db) != 0) {
        if (!j->quiet)
            BK_WARN("schema registry: cannot update its SQL mirror (begin failed)");
        return MD_E_SQL;
    }
    int rc = 0;
    for (size_t i = 0; i < j->n && !rc; i++)
        rc = op_run(db, &j->ops[i], err, sizeof err);
    if (rc) {
        md_rollback(db);
    } else if ((rc = md_commit(db)) != 0) {
        snprintf(err, sizeof err, "commit failed");
    }
    if (rc && !j->quiet)
        BK_WARN("schema registry: cannot update its SQL mirror: %s (rewritten whole from "
                "memory in 1 s, then backing off to %d s; not logged again until it is "
                "whole)", err, SR_MIRROR_RETRY_MAX_S);
    return rc;
}

/* Worker thread. */
static void job_run(bk_work *w, int thread)
{
    (void)thread;
    sr_mjob *j = (sr_mjob *)w;
    j->rc = job_exec(j->r->mdb, j);
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

static void answer_held(sr_registry *r, uint64_t done_seq)
{
    while (r->held && r->held->seq <= done_seq) {
        sr_held *h = r->held;
        r->held = h->next;
        if (!r->held)
            r->held_tail = &r->held;
        h->done(r, h->arg, h->status, h->code, h->msg);
        free(h);
    }
}

static void retry_now(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    sr_mirror_flush(arg);
}

/* X4: the whole rewrite after a failed job, once its backoff is over. */
static void retry_later(sr_registry *r)
{
    int s = r->mirror_fails >= 5 ? SR_MIRROR_RETRY_MAX_S : 1 << r->mirror_fails;
    r->mirror_fails++;
    if (!r->mirror_retry)
        r->mirror_retry = evtimer_new(r->b->base, retry_now, r);
    struct timeval tv = { s < SR_MIRROR_RETRY_MAX_S ? s : SR_MIRROR_RETRY_MAX_S, 0 };
    if (r->mirror_retry && !evtimer_pending(r->mirror_retry, NULL))
        evtimer_add(r->mirror_retry, &tv);    /* failing: the next flush, at once */
}

static bool retry_waiting(const sr_registry *r)
{
    return r->mirror_retry && evtimer_pending(r->mirror_retry, NULL);
}

/* Loop thread: a job ran (X3). */
static void job_done(bk_work *w)
{
    sr_mjob *j = (sr_mjob *)w;
    sr_registry *r = j->r;
    if (j->rc) {
        r->mirror_lost = true;                /* X4 */
        retry_later(r);
    } else if (r->mirror_fails && j->n && j->ops[0].kind == MOP_CLEAR) {
        BK_INFO("schema registry: its SQL mirror is whole again (after %d failed "
                "attempt%s)", r->mirror_fails, r->mirror_fails > 1 ? "s" : "");
        r->mirror_fails = 0;
    }
    r->mirror_done = j->seq;
    job_free(j);
    answer_held(r, r->mirror_done);
    if (r->mirror_lost && !retry_waiting(r))
        sr_mirror_flush(r);
}

uint64_t sr_mirror_flush(sr_registry *r)
{
    if (!r->mirror_on)
        return r->mirror_seq;
    if (r->mirror_lost) {
        if (retry_waiting(r))
            return r->mirror_seq;             /* X4: rewritten when the timer says */
        if (!r->mirror_fails)
            BK_WARN("schema registry: its SQL mirror missed a change; rewriting it whole");
        rebuild(r);
    }
    sr_mjob *j = r->mjob;
    if (!j || !j->n)
        return r->mirror_seq;
    r->mjob = NULL;
    j->r = r;
    j->quiet = r->mirror_fails > 0;
    j->seq = ++r->mirror_seq;
    if (!r->mwk) {                            /* before the loop serves, or no worker */
        j->rc = job_exec(r->b->db, j);
        job_done(&j->work);
        return r->mirror_seq;
    }
    j->work.run = job_run;
    j->work.done = job_done;
    bk_worker_submit(r->mwk, &j->work, 0);    /* X1 */
    return r->mirror_seq;
}

void sr_mirror_answer(sr_registry *r, sr_write_done done, void *arg, int status, int code,
                      const char *msg)
{
    uint64_t seq = r->mirror_seq;
    sr_held *h = status == 200 && r->mirror_on && seq > r->mirror_done
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
    r->held_tail = &r->held;
    r->mirror_on = true;
    op_add(r, MOP_CLEAR, NULL, NULL, NULL);   /* the load rebuilds the tables */
}

void sr_mirror_serve(sr_registry *r)
{
    sr_mirror_flush(r);                       /* the load, on the loop's connection */
    char path[4200], err[MD_ERRLEN] = "";
    snprintf(path, sizeof path, "%s/sluice.db", r->b->data_dir);
    bk_worker_opts o = { .name = "sluice-srmirror", .nthreads = 1 };
    if (md_open_syncer(path, &r->mdb, err, sizeof err) != 0 ||
        bk_worker_new(r->b->base, &o, &r->mwk) != 0) {
        BK_WARN("schema registry: no worker for its SQL mirror (%s); it is written on the "
                "loop", err[0] ? err : "cannot start a thread");
        md_close(r->mdb);
        r->mdb = NULL;
    }
}

void sr_mirror_stop(sr_registry *r)
{
    if (!r->mirror_on)
        return;
    sr_mirror_flush(r);
    if (r->mwk) {
        bk_worker_quit(r->mwk, true);         /* X3: every job runs */
        bk_worker_join(r->mwk);
        for (bk_work *w = bk_worker_take_all(r->mwk), *next; w; w = next) {
            next = w->next;
            job_free((sr_mjob *)w);
        }
        bk_worker_free(r->mwk);
        r->mwk = NULL;
    }
    md_close(r->mdb);
    r->mdb = NULL;
    if (r->mirror_retry)
        event_free(r->mirror_retry);
    r->mirror_retry = NULL;
    answer_held(r, UINT64_MAX);
    job_free(r->mjob);
    r->mjob = NULL;
    r->mirror_on = false;
}
