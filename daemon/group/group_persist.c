/*
 * daemon/group/group_persist.c — the coordinator's persistence pipeline: the
 * end of the loop turn, the jobs it hands to the metadata sync worker,
 * and the deferred answers that wait for them.
 *
 * Design note.
 *
 * Deferred responses.  A JoinGroup in a rebalance and a SyncGroup before
 * the leader's are answered later (BK_DEFER): the member holds a gc_wait.
 * Offset commits (gc_offsets_commit) and group deletes (gc_group_delete)
 * queue theirs on the batch, whoever asked (a Kafka client or the SQL
 * surface), and are answered through their caller's done callback.
 * Answers are never sent from inside a state change: they are written
 * into the request's response buffer and queued on the outbox, which one
 * event per loop turn (run_turn) drains *after* handing the turn's writes
 * (dirty groups + offset commits) to the metadata sync worker as one job
 * (daemon/md_sync.c): the worker writes the job in one transaction on its
 * own connection, then fdatasyncs the WAL.  The turn parks its answers on
 * the synced list, tagged with that sync's number; they leave when the
 * worker reports it done (gc_on_durable).  Turns that end while a sync
 * runs submit nothing: their commits and state changes wait in the batch
 * and gc_on_durable submits them as one job, covered by the next sync —
 * one job, one transaction and one fdatasync per sync cycle however many
 * turns and requests it covers (C6); and commits wait, at most
 * offsets.commit.linger.ms, for the commits other connections are due to
 * send (C7).  So (1) no handler is re-entered while a group is
 * half-updated (net_req_finish may serve the next pipelined request on
 * that connection), and (2) a response that reflects a state change or
 * acknowledges a commit leaves only once that state is durable, and the
 * loop never waits for the disk.  If a connection dies, r->cancel drops
 * the wait but keeps the member: the session timeout decides whether it
 * is gone.  (While a request is deferred the connection is muted, so, as
 * in Kafka, a close is usually noticed only when the answer is written; a
 * member whose JoinGroup answer went nowhere is then evicted by its
 * session timeout.)
 *
 * Jobs.  The turn does not run its SQL on the loop.  It copies the rows
 * into a gc_job and hands the job to the metadata sync worker, which
 * writes them on its own connection, inside one transaction, right before
 * the fdatasync that covers them.  The loop keeps the parsing, the checks
 * and the answers; the upserts and the WAL write run on the other core.
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
 *   C1. A gc_wait is in exactly one place: held by a member (join_w or
 *       sync_w, w->m set), in the outbox, in the batch (offset commits,
 *       group deletes), or in the synced list.
 *   C2. Only finish_synced (from the turn event or the sync worker's
 *       completion) answers — net_req_finish, or a commit's or delete's
 *       apply half and done — and only for waits whose seq the worker has
 *       reported durable.
 *   C5. The synced list is in non-decreasing seq order (a turn tags its
 *       answers with the newest sequence number requested).
 *   C6. The turn event submits its job only when no sync is in flight
 *       (requested == durable); otherwise gc_on_durable submits it when a
 *       sync finishes.  So at most one job per finished sync while syncs
 *       run back to back, and every pending batch, outbox and dirty group
 *       is submitted by the end of the sync in flight, or, under C7, when
 *       linger_ev fires after it.  Group rows, offsets and group deletes
 *       reach SQLite only through jobs, in order (md_sync.c S5), so an
 *       older state never overwrites a newer one (retention's expiry
 *       aside: group_offset_commit.c, gc_expire_tick).
 *   C7. A batch of commits is submitted at once when no connection
 *       outside it is due to commit within offsets.commit.linger.ms of
 *       the batch's first commit (or three quarters of a batched
 *       connection's pace, if shorter); else when the due ones have come,
 *       are late, or that time has passed (daemon/group/group_commit_cadence.h learns
 *       each connection's pace from its commits); linger_ev runs the turn
 *       then.  Independent consumers do not commit in step: with each
 *       commit submitted on its own, 2,500 OffsetCommits/s from ten
 *       connections spread evenly made ~2,400 jobs and fdatasyncs a
 *       second (each fdatasync costs ~100 µs of CPU in this VM's
 *       block-device exits) and took 45 % of a core; waiting for the due
 *       ones (windows of up to 3 ms), ~270, at ~16 %.  A lone committer, or a
 *       connection that commits once, never waits: nothing is due to join
 *       it; consumers committing back to back re-commit right after each
 *       write and share the next one without waiting out the linger
 *       (ten of them: ~140k partition-commits/s, against ~76k when jobs
 *       were spaced a fixed 1 ms apart).  A sync in flight (C6) adds to
 *       the wait, and while commits wait, so do the turn's other answers
 *       (JoinGroup, SyncGroup) and dirty groups: a few ms, against
 *       rebalances that take seconds.  The price: the loop's own
 *       rare writes (recovery points, admin changes) may wait for the
 *       SQLite write lock behind a job (db.c busy_nap), and the worker
 *       runs at nice 19 (md_sync.c S7); a group delete waits with the
 *       commits, and runs first in their job, so a commit sharing its
 *       job (answered by the same sync) outlives it.
 *   J1. From gc_job_submit until gc_jobs_release sees a durable sequence
 *       number >= the job's, the worker owns the job: the loop neither
 *       reads nor writes it (md_sync.c S5 publishes its results).
 *   J2. gc->jobs lists the submitted jobs in submission (= seq) order.
 *   J3. A wait with w->job set is finished (finish_synced) no later than
 *       the release of that job, and reads the results before it.
 */
#include "daemon/group/group_int.h"
#include "daemon/md_sync.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

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
    const char **dels;                /* group deletes, run first */
    int *del_rc;
    size_t ndels, dels_cap;
    int32_t clear_part, clear_nparts; /* nparts > 0: a load's first job,
                                         its partition's groups go first */
    gc_txn_end *txns;                 /* transactions' ends, run last */
    size_t ntxns, txns_cap;
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
    j->noffs = j->ngroups = j->ndels = j->ntxns = 0;
    j->clear_nparts = 0;
    j->next = NULL;
}

static void job_free(gc_job *j)
{
    job_reset(j);
    free(j->chunks);
    free(j->offs);
    free(j->groups);
    free(j->dels);
    free(j->del_rc);
    free(j->txns);
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

int gc_job_delete(gc_job *j, const char *group_id, size_t *index)
{
    if (j->ndels == j->dels_cap) {
        size_t cap = j->dels_cap ? 2 * j->dels_cap : 4;
        const char **d = realloc(j->dels, cap * sizeof *d);
        if (!d)
            return -1;
        j->dels = d;
        int *rc = realloc(j->del_rc, cap * sizeof *rc);
        if (!rc)
            return -1;
        j->del_rc = rc;
        j->dels_cap = cap;
    }
    const char *id = gc_job_strdup(j, group_id);
    if (!id)
        return -1;
    *index = j->ndels;
    j->dels[j->ndels] = id;
    j->del_rc[j->ndels++] = MD_E_SQL;
    return 0;
}

int gc_job_txn_end(gc_job *j, const gc_txn_end *t, size_t *index)
{
    if (j->ntxns == j->txns_cap) {
        size_t cap = j->txns_cap ? 2 * j->txns_cap : 4;
        gc_txn_end *v = realloc(j->txns, cap * sizeof *v);
        if (!v)
            return -1;
        j->txns = v;
        j->txns_cap = cap;
    }
    *index = j->ntxns;
    j->txns[j->ntxns] = *t;
    j->txns[j->ntxns++].rc = MD_E_SQL;
    return 0;
}

int gc_job_txn_end_result(const gc_job *j, size_t i)
{
    return j->txns[i].rc;
}

void gc_job_clear_partition(gc_job *j, int32_t partition, int32_t npartitions)
{
    j->clear_part = partition;
    j->clear_nparts = npartitions;
}

int gc_job_delete_result(const gc_job *j, size_t i)
{
    return j->del_rc[i];
}

md_offset *gc_job_row(gc_job *j, size_t i)
{
    return &j->offs[i];
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
    if (j->ngroups || j->ndels || j->clear_nparts)
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
        if (j->ngroups || j->ndels || j->clear_nparts)
            gc->group_jobs--;
        gc_job_put(j);
    }
}

static void jobs_wait(void)
{
    if (gc->jobs)
        bk_mdsync_wait(gc->last_job_seq);
}

void gc_jobs_free(void)
{
    jobs_wait();
    gc_jobs_release(UINT64_MAX);
    while (gc->job_pool) {
        gc_job *j = gc->job_pool;
        gc->job_pool = j->next;
        job_free(j);
    }
}

/* ---- on the worker ------------------------------------------------------------ */

static bool in_cleared_partition(const char *group_id, void *arg)
{
    const gc_job *j = arg;
    return gc_log_partition_in(j->clear_nparts, group_id, strlen(group_id)) == j->clear_part;
}

static bool in_txn_partition(const char *group_id, void *arg)
{
    const gc_txn_end *t = arg;
    return gc_log_partition_in(t->nparts, group_id, strlen(group_id)) == t->part;
}

/* A load's clear first (the partition's groups are what its log says,
 * group_log.c G5), then deletes, then group rows, then the offsets, then
 * transactions' ends (their TxnOffsetCommits were answered, so stored, before
 * the transaction could end; group_txn.c X2): a group or an offset
 * queued after a delete of the same id outlives it (one that came before
 * is answered by the same sync: either order is one the clients could
 * have seen).  A group that fails is logged (its next change writes it
 * again), an offset batch that fails fails its commits.  Each md_* call
 * is a savepoint, so one failure undoes only itself. */
static int run(md_db *db, bk_mdjob *base)
{
    gc_job *j = (gc_job *)base;
    char err[MD_ERRLEN];
    int64_t cleared = 0;
    if (j->clear_nparts > 0 &&
        md_groups_delete_matching(db, in_cleared_partition, j, &cleared, err, sizeof err) != 0)
        BK_ERROR("clearing the groups of __consumer_offsets-%d before its load failed "
                 "(rows the log no longer has may stay): %s", j->clear_part, err);
    else if (cleared > 0)
        BK_INFO("__consumer_offsets-%d: %lld stored groups cleared before its load",
                j->clear_part, (long long)cleared);
    for (size_t i = 0; i < j->ndels; i++) {
        j->del_rc[i] = md_group_delete(db, j->dels[i], err, sizeof err);
        if (j->del_rc[i] && j->del_rc[i] != KP_GROUP_ID_NOT_FOUND)
            BK_ERROR("deleting group %s failed: %s", j->dels[i], err);
    }
    for (size_t i = 0; i < j->ngroups; i++)
        if (md_group_save(db, &j->groups[i], err, sizeof err) != 0)
            BK_ERROR("saving group %s failed: %s", j->groups[i].group_id, err);
    int rc = 0;
    if (j->noffs && md_offset_commit(db, j->offs, j->noffs, err, sizeof err) != 0) {
        BK_ERROR("storing %zu committed offsets failed: %s", j->noffs, err);
        rc = MD_E_SQL;
    }
    for (size_t i = 0; i < j->ntxns; i++) {
        gc_txn_end *t = &j->txns[i];
        int64_t moved = 0;
        t->rc = md_txn_offsets_complete(db, t->producer_id, t->commit,
                                        t->nparts > 0 ? in_txn_partition : NULL, t, &moved,
                                        err, sizeof err);
        if (t->rc)
            BK_ERROR("completing the offsets of producer %lld's transaction failed: %s",
                     (long long)t->producer_id, err);
    }
    return rc;
}

/* ---- groups into jobs, waits, the end of the loop turn ------------------------- */

void gc_req_release(bk_req *r, void *state)
{
    free(state);
    r->state = NULL;
    r->cancel = NULL;
}

void gc_req_finish(bk_req *r, void *state)
{
    gc_req_release(r, state);
    net_req_finish(r);
}

void gc_wait_drop(gc_wait *w)
{
    if (!w)
        return;
    if (w->r) {
        w->r->cancel = NULL;
        w->r->state = NULL;
    }
    gc_wait_unlink(w);
    gc_log_forget(w);
    free(w->delete_id);
    free(w);
}

/* A delete goes on without its caller (the group is already Dead, the
 * rows must follow); a commit's entries are the caller's, so one still
 * in the batch is dropped (one already copied into a job is stored). */
void gc_groups_forget(struct gc_wait *w)
{
    if (!w)
        return;
    if (w->delete_id) {
        w->done = NULL;
        w->delete_err = NULL;
        return;
    }
    gc_wait_drop(w);
}

void gc_batch_add(gc_wait *w, uint64_t cadence_key)
{
    int64_t mono = bk_mono_us();
    if (cadence_key)
        gc_cadence_note(&gc->cadence, cadence_key, mono);         /* C7 */
    if (gc->batch.next == &gc->batch)
        gc->batch_first_us = mono;
    w->prev = gc->batch.prev;
    w->next = &gc->batch;
    gc->batch.prev->next = w;
    gc->batch.prev = w;
    gc_schedule_turn();
}

/* g stays as it is on failure: the caller keeps it dirty. */
int gc_group_to_job(gc_job *j, const gc_group *g)
{
    md_group *rec = gc_job_group(j, (size_t)g->nmembers);
    if (!rec)
        return -1;
    bool ok = true;
    md_group_member *mm = (md_group_member *)rec->members;
    size_t n = 0;
    for (const gc_member *m = g->members.next; m != &g->members; m = m->next, n++) {
        const gc_proto *p = gc_member_proto(m, g->protocol);
        md_group_member *x = &mm[n];
        x->member_id = gc_job_strdup(j, m->id);
        x->instance_id = gc_job_strdup(j, m->instance_id);
        x->client_id = gc_job_strdup(j, m->client_id);
        x->client_host = gc_job_strdup(j, m->client_host);
        x->session_timeout_ms = m->session_timeout_ms;
        x->rebalance_timeout_ms = m->rebalance_timeout_ms;
        x->subscription_len = p ? p->meta_len : -1;
        x->subscription = p ? gc_job_blob(j, p->meta, p->meta_len) : NULL;
        x->assignment_len = m->assignment ? m->assignment_len : -1;
        x->assignment = gc_job_blob(j, m->assignment, x->assignment_len);
        ok = ok && x->member_id && x->client_id && x->client_host &&
             (x->instance_id || !m->instance_id) &&
             (x->subscription || x->subscription_len < 0) &&
             (x->assignment || x->assignment_len < 0);
    }
    rec->group_id = gc_job_strdup(j, g->id);
    rec->state = gc_state_name(g->state);              /* static */
    rec->protocol_type = gc_job_strdup(j, g->protocol_type);
    rec->protocol = gc_job_strdup(j, g->protocol);
    rec->generation = g->generation;
    rec->leader = gc_job_strdup(j, g->leader);
    rec->state_changed_at = g->state_changed_at;
    ok = ok && rec->group_id && (rec->protocol_type || !g->protocol_type) &&
         (rec->protocol || !g->protocol) && (rec->leader || !g->leader);
    return ok ? 0 : -1;
}

/* Moves every dirty group into j; one that does not fit stays dirty. */
static int dirty_to_job(gc_job *j)
{
    gc_group *keep = NULL;
    int rc = 0;
    while (gc->dirty) {
        gc_group *g = gc->dirty;
        gc->dirty = g->dirty_next;
        if (gc_group_to_job(j, g) == 0) {
            g->dirty = false;
            g->dirty_next = NULL;
        } else {
            g->dirty_next = keep;
            keep = g;
            rc = -1;
        }
    }
    gc->dirty = keep;
    return rc;
}

void gc_save_dirty_now(void)
{
    if (!gc->dirty)
        return;
    gc_job *j = gc_job_take();
    if (!j) {
        BK_ERROR("saving group state: out of memory");
        return;
    }
    if (dirty_to_job(j) != 0)
        BK_ERROR("saving group state: out of memory");
    gc_job_submit(j);
    gc_jobs_release(bk_mdsync_durable());   /* run already when no worker */
}

/* ---- waits and the end of the loop turn ------------------------------------- */

static void wait_cancel(bk_req *r)
{
    gc_wait *w = r->state;
    if (!w)
        return;
    if (w->m) {
        /* The member stays: its session timer (always pending) now counts
         * from its last sign of life, as nothing keeps it alive any more. */
        if (w->is_sync)
            w->m->sync_w = NULL;
        else
            w->m->join_w = NULL;
        w->m = NULL;
    }
    gc_wait_unlink(w);
    gc_req_release(r, w);
}

gc_wait *gc_wait_new(bk_req *r)
{
    gc_wait *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->r = r;
    w->next = w->prev = w;
    r->state = w;
    r->cancel = wait_cancel;
    return w;
}

void gc_wait_unlink(gc_wait *w)
{
    w->prev->next = w->next;
    w->next->prev = w->prev;
    w->next = w->prev = w;
}

static void list_append(gc_wait *head, gc_wait *w)
{
    w->prev = head->prev;
    w->next = head;
    head->prev->next = w;
    head->prev = w;
}

static void list_move(gc_wait *to, gc_wait *from)
{
    to->next = to->prev = to;
    if (from->next == from)
        return;
    to->next = from->next;
    to->prev = from->prev;
    to->next->prev = to;
    to->prev->next = to;
    from->next = from->prev = from;
}

void gc_wait_answered(gc_wait *w)
{
    w->m = NULL;
    gc_wait_unlink(w);
    list_append(&gc->outbox, w);
    gc_schedule_turn();
}

void gc_schedule_turn(void)
{
    event_active(gc->turn_ev, EV_TIMEOUT, 0);
}

/* Answers every wait of the synced list whose sync (seq) has finished.
 * They are taken off the list first: answering may serve new requests.
 * sync_err: a failed WAL sync (md_sync.c S3) fails the offset commits;
 * join and sync answers go out anyway, logged by the worker. */
static void finish_synced(uint64_t durable, int sync_err)
{
    gc_wait out;
    out.next = out.prev = &out;
    while (gc->synced.next != &gc->synced && gc->synced.next->seq <= durable) {
        gc_wait *w = gc->synced.next;
        gc_wait_unlink(w);
        list_append(&out, w);
    }
    while (out.next != &out) {
        gc_wait *w = out.next;
        gc_wait_unlink(w);
        if (!w->r) {                  /* a commit, a delete, a txn end: its apply half */
            int rc = w->rc ? w->rc : sync_err ? MD_E_SQL : 0;
            if (w->txn_done) {
                gc_txn_apply(w, rc);  /* answers and frees w (group_txn.c) */
                continue;
            }
            if (w->delete_id)
                rc = gc_delete_apply(w, rc);
            else
                gc_commit_apply(w, rc);   /* J3 */
            if (!w->delete_id && gc_log_commit_hold(w))
                continue;             /* answered once replicated (group_log.c) */
            bk_group_done_fn done = w->done;
            void *arg = w->done_arg;
            free(w->delete_id);
            free(w);
            if (done)
                done(arg, rc);
            continue;
        }
        gc_req_finish(w->r, w);
    }
}

static void run_turn(bool after_sync);

/* The metadata sync worker finished the syncs up to seq.  What turns
 * gathered while it ran is written now, as one transaction — even if
 * another sync (requested elsewhere) is already running, so a steady
 * stream of other sync requests cannot hold the batch back. */
void gc_on_durable(uint64_t seq, int err)
{
    if (!gc)
        return;
    finish_synced(seq, err);
    gc_jobs_release(seq);
    if (gc->dirty || gc->batch.next != &gc->batch || gc->outbox.next != &gc->outbox)
        run_turn(true);
    if (gc->expire_due && !gc->dirty && gc->group_jobs == 0)
        gc_expire_tick(-1, 0, NULL);
}

/* End of the loop turn: one transaction for everything the turn changed
 * (dirty groups, offset commits), one WAL sync requested for it, and the
 * turn's answers queued behind that sync.  Every answer waits for the
 * newest sync requested so far, not only its own turn's: a JoinGroup
 * answered now may reflect a state stored by an earlier turn whose sync is
 * still running.  Lists are taken first: answering may serve new
 * requests, whose waits belong to the next run of this event. */
void gc_turn_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    run_turn(false);
}

static void run_turn(bool after_sync)
{
    /* C6: while a sync runs, its answers cannot leave and nothing written
     * now could be durable before the next sync anyway: keep gathering,
     * and write everything in one transaction when it finishes. */
    if (!after_sync && bk_mdsync_requested() > bk_mdsync_durable())
        return;
    /* C7: commits wait, at most offsets.commit.linger.ms, for the
     * commits other connections are due to send. */
    if (gc->batch.next != &gc->batch) {
        int64_t now = bk_mono_us();
        int64_t until = gc_cadence_submit_at(&gc->cadence, now, gc->batch_first_us,
                                     gc->b->cfg->offsets_commit_linger_ms * 1000);
        if (until) {
            /* Re-armed only when the time moves: each is a timerfd_settime. */
            if (until != gc->linger_until || !evtimer_pending(gc->linger_ev, NULL)) {
                struct timeval tv = { (until - now) / 1000000, (until - now) % 1000000 };
                /* Unarmed: tried again at the next commit (not pending). */
                bk_event_add(gc->linger_ev, &tv, "offset commit linger");
                gc->linger_until = until;
            }
            return;
        }
        evtimer_del(gc->linger_ev);
    }
    gc_wait out, batch;
    list_move(&out, &gc->outbox);
    list_move(&batch, &gc->batch);
    int rc = 0;
    if (gc->dirty || batch.next != &batch) {
        /* The SQL runs on the sync worker: copy, submit. */
        /* Out of memory: a group that does not fit stays dirty for the
         * next turn; the commits are answered with an error (rows already
         * copied may still be stored: a retry stores them again). */
        gc_job *j = gc_job_take();
        if (!j || dirty_to_job(j) != 0)
            BK_ERROR("saving group state / offsets: out of memory");
        for (gc_wait *w = batch.next; rc == 0 && w != &batch; w = w->next)
            if (!j)
                rc = MD_E_SQL;
            else if (w->txn_done)
                rc = gc_txn_to_job(w, j);
            else if (!w->delete_id)
                rc = gc_commit_to_job(w, j);
            else if (gc_job_delete(j, w->delete_id, &w->job_first) == 0)
                w->job = j;
            else
                rc = MD_E_SQL;
        if (rc)
            for (gc_wait *w = batch.next; w != &batch; w = w->next)
                w->job = NULL;
        if (j)
            gc_job_submit(j);
    }
    uint64_t seq = bk_mdsync_requested();
    while (batch.next != &batch) {
        gc_wait *w = batch.next;
        gc_wait_unlink(w);
        w->rc = rc;
        list_append(&out, w);
    }
    while (out.next != &out) {
        gc_wait *w = out.next;
        gc_wait_unlink(w);
        w->seq = seq;
        list_append(&gc->synced, w);
    }
    finish_synced(bk_mdsync_durable(), bk_mdsync_error());
    gc_jobs_release(bk_mdsync_durable());
}

/* ---- group delete ---------------------------------------------------------------- */

/* The one path that deletes a group (DeleteGroups, the SQL surface).  Only
 * an Empty group, or one the coordinator does not hold, goes.  The group
 * turns Dead at once, so nothing joins or commits to it meanwhile (those
 * get COORDINATOR_NOT_AVAILABLE and retry, as in Kafka); the write half is
 * a delete in the next job, ordered with the commits and group rows around
 * it (group_persist.c); the apply half, gc_delete_apply, frees the group
 * once that job's sync is done. */
int gc_group_delete(bk_broker *b, bk_group_deletion *d)
{
    const char *id = d->group_id;
    d->pending = NULL;
    d->err[0] = 0;
    kp_str key = kp_str_cstr(id);
    gc_group *g = gc_group_find(id, strlen(id));
    if (gc_coordinator_error(key)) {
        snprintf(d->err, d->errlen, "This broker is not the coordinator of group %s.", id);
        return KP_NOT_COORDINATOR;
    }
    if (g && g->state == GC_DEAD) {
        snprintf(d->err, d->errlen, "The group id %s does not exist.", id);
        return KP_GROUP_ID_NOT_FOUND;
    }
    if (g && g->state != GC_EMPTY) {
        snprintf(d->err, d->errlen, "The group %s is not empty (state %s); stop its "
                 "consumers first.", id, gc_state_name(g->state));
        return KP_NON_EMPTY_GROUP;
    }
    gc_wait *w = calloc(1, sizeof *w);
    if (!w || !(w->delete_id = strdup(id))) {
        free(w);
        snprintf(d->err, d->errlen, "out of memory");
        return KP_UNKNOWN_SERVER_ERROR;
    }
    w->done = d->done;
    w->done_arg = d->arg;
    w->delete_err = d->err;
    w->delete_errlen = d->errlen;
    if (g) {
        g->state = GC_DEAD;           /* not dirty: its row goes */
        g->state_changed_at = bk_now_ms();
        for (gc_group **p = &gc->dirty; *p; p = &(*p)->dirty_next)
            if (*p == g) {
                *p = g->dirty_next;
                g->dirty = false;
                break;
            }
    }
    if (bk_cluster_mode(b))
        gc_log_group_tombstone(b, id);    /* group_log.c: no leader loads it back */
    d->pending = w;
    gc_batch_add(w, 0);
    return KP_NONE;
}

int gc_delete_apply(gc_wait *w, int rc)
{
    const char *id = w->delete_id;
    gc_group *g = gc_group_find(id, strlen(id));
    if (g && g->state != GC_DEAD)
        g = NULL;                     /* cannot happen: Dead groups take no one */
    int res = rc || !w->job || gc_job_rc(w->job) ? MD_E_SQL
              : gc_job_delete_result(w->job, w->job_first);
    w->job = NULL;
    char *err = w->delete_err;
    size_t errlen = err ? w->delete_errlen : 0;
    if (res == KP_GROUP_ID_NOT_FOUND && !g) {
        if (err)
            snprintf(err, errlen, "The group id %s does not exist.", id);
        return KP_GROUP_ID_NOT_FOUND;
    }
    if (res != KP_NONE && res != KP_GROUP_ID_NOT_FOUND) {
        /* Still stored: the group stays, as it was. */
        if (g)
            gc_set_state(g, GC_EMPTY);
        if (err)
            snprintf(err, errlen, "Deleting group %s failed; see the broker log.", id);
        return KP_UNKNOWN_SERVER_ERROR;
    }
    if (g)
        gc_group_free(g);
    BK_INFO("group %s deleted (with its committed offsets)", id);
    return KP_NONE;
}
