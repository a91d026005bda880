/*
 * daemon/group_job.c — a turn's group writes as one job for the metadata
 * sync worker.
 *
 * Design note.
 *
 * The coordinator's end-of-turn batch (group.c, run_turn: dirty groups and
 * the offset commits of the loop turn) does not run its SQL on the loop.
 * It copies the rows into a gc_job and hands the job to the metadata sync
 * worker (daemon/md_sync.c), which writes them on its own connection,
 * inside one transaction, right before the fdatasync that covers them.
 * The loop keeps the parsing, the checks and the answers; the upserts and
 * the WAL write run on the other core.
 *
 * A job holds copies, not pointers into the loop's state: a connection
 * may close (its request frames freed) and a group may change or be freed
 * while the worker runs.  Strings and blobs go to the job's arena (chunks
 * that never move, so pointers into them stay valid); the row arrays grow
 * by realloc and only the worker reads them after submission.  Jobs come
 * from a pool and go back to it once the sync that covers them is
 * reported, arena and arrays kept: no allocation per commit in the steady
 * state.
 *
 * Invariants:
 *   J1. From gc_job_submit until gc_jobs_release sees a durable sequence
 *       number >= the job's, the worker owns the job: the loop neither
 *       reads nor writes it (md_sync.c S5 publishes its results).
 *   J2. gc->jobs lists the submitted jobs in submission (= seq) order.
 *   J3. A wait with w->job set is finished (finish_synced) no later than
 *       the release of that job, and reads the results before it.
 */
#include "daemon/group.h"
#include "daemon/md_sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK_SIZE (16 * 1024)

typedef struct gc_chunk {
    struct gc_chunk *next;
    size_t cap, used;
    max_align_t data[];
} gc_chunk;

struct gc_job {
    bk_mdjob base;                    /* first: the worker sees this */
    gc_job *next;                     /* gc->jobs or the pool */
    gc_chunk *chunks;                 /* newest first */
    md_offset *offs;
    size_t noffs, offs_cap;
    md_group *groups;
    size_t ngroups, groups_cap;
};

/* ---- the arena ------------------------------------------------------------- */

static void *job_alloc(gc_job *j, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    gc_chunk *c = j->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_SIZE ? n : CHUNK_SIZE;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->cap = cap;
        c->used = 0;
        c->next = j->chunks;
        j->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    return p;
}

/* A copy of len bytes plus a NUL; p may be NULL when len is 0. */
static const char *job_copy(gc_job *j, const void *p, size_t len)
{
    char *q = job_alloc(j, len + 1);
    if (!q)
        return NULL;
    if (len)
        memcpy(q, p, len);
    q[len] = 0;
    return q;
}

const char *gc_job_strdup(gc_job *j, const char *s)
{
    return s ? job_copy(j, s, strlen(s)) : NULL;
}

const char *gc_job_strndup(gc_job *j, const char *p, size_t len)
{
    return job_copy(j, p, len);
}

/* Keeps one standard chunk, emptied; frees the rest. */
static void job_reset(gc_job *j)
{
    gc_chunk *keep = NULL;
    while (j->chunks) {
        gc_chunk *c = j->chunks;
        j->chunks = c->next;
        if (!keep && c->cap == CHUNK_SIZE) {
            keep = c;
            continue;
        }
        free(c);
    }
    if (keep) {
        keep->used = 0;
        keep->next = NULL;
    }
    j->chunks = keep;
    j->noffs = j->ngroups = 0;
    j->next = NULL;
}

static void job_free(gc_job *j)
{
    job_reset(j);
    free(j->chunks);
    free(j->offs);
    free(j->groups);
    free(j);
}

/* ---- building -------------------------------------------------------------- */

static int run(md_db *db, bk_mdjob *base);

gc_job *gc_job_take(void)
{
    gc_job *j = gc->job_pool;
    if (j) {
        gc->job_pool = j->next;
        j->next = NULL;
        return j;
    }
    j = calloc(1, sizeof *j);
    if (j)
        j->base.run = run;
    return j;
}

void gc_job_put(gc_job *j)
{
    job_reset(j);
    j->next = gc->job_pool;
    gc->job_pool = j;
}

md_offset *gc_job_rows(gc_job *j, size_t n, size_t *first)
{
    if (j->offs_cap - j->noffs < n) {
        size_t cap = j->offs_cap ? j->offs_cap : 64;
        while (cap - j->noffs < n)
            cap *= 2;
        md_offset *o = realloc(j->offs, cap * sizeof *o);
        if (!o)
            return NULL;
        j->offs = o;
        j->offs_cap = cap;
    }
    *first = j->noffs;
    j->noffs += n;
    return j->offs + *first;
}

int gc_job_row_result(const gc_job *j, size_t i)
{
    return j->offs[i].result;
}

int gc_job_rc(const gc_job *j)
{
    return j->base.rc;
}

md_group *gc_job_group(gc_job *j, size_t nmembers)
{
    if (j->ngroups == j->groups_cap) {
        size_t cap = j->groups_cap ? 2 * j->groups_cap : 8;
        md_group *g = realloc(j->groups, cap * sizeof *g);
        if (!g)
            return NULL;
        j->groups = g;
        j->groups_cap = cap;
    }
    md_group_member *mm = NULL;
    if (nmembers && !(mm = job_alloc(j, nmembers * sizeof *mm)))
        return NULL;
    md_group *g = &j->groups[j->ngroups++];
    memset(g, 0, sizeof *g);
    g->members = mm;
    g->nmembers = nmembers;
    return g;
}

const void *gc_job_blob(gc_job *j, const void *p, int32_t len)
{
    return len < 0 ? NULL : job_copy(j, p, (size_t)len);
}

/* ---- submitting and releasing ------------------------------------------------ */

uint64_t gc_job_submit(gc_job *j)
{
    j->next = NULL;
    *gc->jobs_tail = j;
    gc->jobs_tail = &j->next;
    if (j->ngroups)
        gc->group_jobs++;
    gc->last_job_seq = bk_mdsync_submit(gc->b, &j->base);
    return gc->last_job_seq;
}

void gc_jobs_release(uint64_t durable)
{
    while (gc->jobs && (gc->jobs->base.seq <= durable || gc->jobs->base.seq == 0)) {
        gc_job *j = gc->jobs;
        gc->jobs = j->next;
        if (!gc->jobs)
            gc->jobs_tail = &gc->jobs;
        if (j->ngroups)
            gc->group_jobs--;
        gc_job_put(j);
    }
}

void gc_jobs_wait(void)
{
    if (gc->jobs)
        bk_mdsync_wait(gc->last_job_seq);
}

void gc_jobs_free(void)
{
    gc_jobs_wait();
    gc_jobs_release(UINT64_MAX);
    while (gc->job_pool) {
        gc_job *j = gc->job_pool;
        gc->job_pool = j->next;
        job_free(j);
    }
}

/* ---- on the worker ------------------------------------------------------------ */

/* Group rows first, then the offsets; a group that fails is logged (its
 * next change writes it again), an offset batch that fails fails its
 * commits.  Each md_* call is a savepoint, so one failure undoes only
 * itself. */
static int run(md_db *db, bk_mdjob *base)
{
    gc_job *j = (gc_job *)base;
    char err[MD_ERRLEN];
    for (size_t i = 0; i < j->ngroups; i++)
        if (md_group_save(db, &j->groups[i], err, sizeof err) != 0)
            BK_ERROR("saving group %s failed: %s", j->groups[i].group_id, err);
    if (j->noffs && md_offset_commit(db, j->offs, j->noffs, err, sizeof err) != 0) {
        BK_ERROR("storing %zu committed offsets failed: %s", j->noffs, err);
        return MD_E_SQL;
    }
    return 0;
}
