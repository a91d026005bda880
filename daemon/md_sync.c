/*
 * daemon/md_sync.c — the metadata sync worker: group commit for SQLite.
 *
 * Design note.
 *
 * The loop's SQLite handle runs at synchronous=NORMAL without automatic
 * checkpoints (metadata/db.c, D1-D4): md_commit of a batch only writes the
 * WAL into the page cache.  This worker makes such batches durable without
 * the loop ever waiting for the disk:
 *
 *   loop thread                           worker thread (own md_db)
 *   -----------                           -------------------------
 *   md_begin … md_commit   (WAL write())
 *   seq = bk_mdsync_request()
 *   or seq = bk_mdsync_submit(job)
 *     requested = seq ─────────────────►  target = requested; take jobs
 *   hold the answers tagged seq          each job: BEGIN IMMEDIATE, run,
 *                                           COMMIT    (WAL write())
 *                                         md_wal_sync      (fdatasync WAL)
 *                                         synced = target
 *   sync_done ◄─── worker.h W3 ◄───────── (every commit ≤ target is on disk)
 *   listener(synced): finish answers ≤ synced
 *                                         every CKPT_INTERVAL_MS with new
 *                                         commits: md_checkpoint (PASSIVE)
 *
 * Jobs.  The hot metadata writes (offset commits and group state) do not
 * even run their SQL on the loop: the coordinator hands the worker a job
 * (self-contained copies of the rows) and the worker writes it on its own
 * connection right before the fdatasync that covers it.  The loop's CPU
 * per OffsetCommit is then parsing, checks and the answer, and the SQL
 * runs on the other core.  Both connections write the same database;
 * SQLite lets one writer at a time in, so a loop write that meets a job's
 * transaction waits for it (db.c's busy handler naps in tens of µs first)
 * — only the rare loop writes (admin changes, the recovery points every
 * few seconds) can meet one.
 *
 * The thread is a bk_worker (daemon/worker.c) of one thread; a sync is
 * its one sync_work item, a checkpoint its ckpt_work item, due
 * CKPT_INTERVAL_MS after the last one.
 *
 * Group commit: requests that arrive while an fdatasync runs are covered
 * by the next one, which takes the newest sequence number at its start, so
 * at most one sync is in flight and one sync covers any number of
 * transactions (sync_work is queued once however many requests come:
 * worker.h W2).  At 20,000 partition-commits/s that is a few hundred
 * fdatasyncs per second instead of one per loop turn on the loop.
 *
 * Which writes go where (the choice, also in db.c):
 *   - offset commits and group state (daemon/group/group_persist.c's end-of-turn batch):
 *     submitted here as jobs, written and synced by the worker; their
 *     responses (OffsetCommit, JoinGroup, SyncGroup …) wait for the
 *     covering sync;
 *   - partition offsets (replica_save_offsets) and other timer batches:
 *     requested here, nobody waits (they only bound recovery work);
 *   - rare admin writes outside md_begin (topics, configs, producer-id
 *     blocks, DeleteGroups): synced on the loop by db.c's WAL hook before
 *     their md_* call returns, so their handlers need no change.
 *
 * Checkpoints run here, PASSIVE on the worker's connection: they never
 * block or wait for the loop's writes.  After a complete checkpoint the
 * loop's next commit restarts the WAL and SQLite syncs the new WAL header
 * there (db.c, D4): one loop fsync per checkpoint, hence the interval.
 *
 * Invariants:
 *   S1. requested ≥ synced; synced only grows; a sync that sets synced = t
 *       started after the request of t (so after its md_commit) returned.
 *   S2. The listener sees strictly increasing sequence numbers, on the
 *       loop thread, never from inside bk_mdsync_request.
 *   S3. A failed fdatasync latches err: after one, Linux may report later
 *       syncs as fine although the failed pages were dropped, so nothing
 *       is ever called durable again until a restart (recovery rereads the
 *       WAL from disk).  Answers then carry an error.
 *   S4. bk_mdsync_stop returns with every requested sync done; the worker
 *       closes its connection only after its last md_wal_sync (db.c D3).
 *   S5. Jobs run in submission order, each before the sync whose number
 *       it was given, so a job's changes are durable when the listener
 *       sees its seq; the worker writes job->rc before it publishes
 *       synced under mu, so the loop reads rc after the listener call.
 *   S6. The per-sync wake-ups happen outside mu: the worker wakes the
 *       loop (worker.h W5), and the loop the worker (bk_worker_submit),
 *       after unlocking.  Otherwise the woken thread finds mu held and sleeps
 *       again on it: two more context switches per sync, and the loop
 *       blocked on a lock.
 *   S7. The worker runs at nice 19.  On an idle core it runs at once, as
 *       before; when the loop and the clients want both cores (the
 *       benchmark's producer), it takes its turn after them instead of
 *       preempting the loop in the middle of a produce: the syncs then
 *       take longer (and each covers more: C6 in group_persist.c), not the data
 *       path.  In group_commit_bench (2 cores shared with the clients,
 *       OffsetCommits from 10 connections at 2,500/s) the produce drop
 *       went from 30-40 % to 16-24 % (medians of 6-8 rounds), where
 *       ApiVersions at the same rate cost 14-20 %, and commits kept
 *       96-99 % of their pace.  The price is commit latency while both
 *       cores are saturated: p99 ~30 ms (median 1.3-2.9 ms), against
 *       ~4 ms at nice 0 and ~7 ms at nice 10 (drop ~31 %).  SCHED_IDLE
 *       (the cleaner's) did no better on produce and commits fell to
 *       18-19.7k/s: durability answers wait on this thread, so it must
 *       still win some slices.
 */
#include "daemon/md_sync.h"
#include "daemon/worker.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define CKPT_INTERVAL_MS 1000

typedef struct bk_mdsync {
    bk_broker *b;
    md_db *db;                    /* the worker's connection */
    bk_worker *wk;
    bk_work sync_work, ckpt_work;
    pthread_mutex_t mu;
    pthread_cond_t done;          /* synced moved (bk_mdsync_wait) */
    uint64_t requested;           /* under mu */
    bk_mdjob *jobs, **jobs_tail;  /* under mu: submitted, not yet taken */
    uint64_t synced;              /* under mu */
    int err;                      /* under mu: latched errno (S3) */
    uint64_t syncs, checkpoints;  /* under mu (written by the worker) */
    /* worker thread only */
    bool unckpt;                  /* synced commits not yet checkpointed */
    int64_t last_ckpt_us;
    /* loop only */
    uint64_t last_requested, reported;
    bk_mdsync_fn listener;
} bk_mdsync;

static bk_mdsync *ms;

static void checkpoint(bk_mdsync *s)
{
    char err[MD_ERRLEN];
    int frames = 0, copied = 0;
    if (md_checkpoint(s->db, &frames, &copied, err, sizeof err) != 0) {
        BK_WARN("metadata checkpoint failed: %s", err);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->checkpoints++;
    pthread_mutex_unlock(&s->mu);
}

/* Worker: one job in a transaction of its own, so one job's failure
 * cannot undo another's. */
static void run_job(bk_mdsync *s, bk_mdjob *j)
{
    if (md_begin(s->db) != 0) {
        BK_ERROR("metadata sync worker: cannot begin a transaction");
        j->rc = MD_E_SQL;
        return;
    }
    j->rc = j->run(s->db, j);
    if (md_commit(s->db) != 0) {
        BK_ERROR("metadata sync worker: commit failed");
        j->rc = MD_E_SQL;
    }
}

/* S7: nice 19 (Linux: a thread's own). */
static void lower_priority(void *arg, int thread)
{
    (void)arg; (void)thread;
    (void)setpriority(PRIO_PROCESS, (id_t)gettid(), 19);
}

/* Worker: the jobs and one fdatasync covering every request so far. */
static void sync_run(bk_work *w, int thread)
{
    (void)thread;
    bk_mdsync *s = (bk_mdsync *)((char *)w - offsetof(bk_mdsync, sync_work));
    pthread_mutex_lock(&s->mu);
    if (s->requested == s->synced) {             /* covered by the last run */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    uint64_t target = s->requested;
    bk_mdjob *jobs = s->jobs;
    s->jobs = NULL;
    s->jobs_tail = &s->jobs;
    pthread_mutex_unlock(&s->mu);
    for (bk_mdjob *j = jobs, *next; j; j = next) {
        next = j->next;                       /* S5: j is the loop's once synced */
        run_job(s, j);
    }
    int rc = md_wal_sync(s->db);                  /* the slow part */
    pthread_mutex_lock(&s->mu);
    s->syncs++;
    if (rc && !s->err) {
        s->err = -rc;
        BK_ERROR("metadata WAL fdatasync failed: %s; offset commits and "
                 "group changes are refused until a restart", strerror(-rc));
    }
    s->synced = target;
    pthread_cond_broadcast(&s->done);
    pthread_mutex_unlock(&s->mu);
    s->unckpt = true;
    int64_t due = s->last_ckpt_us + CKPT_INTERVAL_MS * 1000 - bk_mono_us();
    bk_worker_submit(s->wk, &s->ckpt_work, due);  /* once (worker.h W2) */
}

/* Worker: a PASSIVE checkpoint, CKPT_INTERVAL_MS after the last one. */
static void ckpt_run(bk_work *w, int thread)
{
    (void)thread;
    bk_mdsync *s = (bk_mdsync *)((char *)w - offsetof(bk_mdsync, ckpt_work));
    if (!s->unckpt)
        return;
    checkpoint(s);
    s->last_ckpt_us = bk_mono_us();
    s->unckpt = false;
}

/* Loop thread: the worker finished a sync (S2). */
static void sync_done(bk_work *w)
{
    bk_mdsync *s = (bk_mdsync *)((char *)w - offsetof(bk_mdsync, sync_work));
    pthread_mutex_lock(&s->mu);
    uint64_t synced = s->synced;
    int err = s->err;
    pthread_mutex_unlock(&s->mu);
    if (synced <= s->reported)
        return;
    s->reported = synced;
    if (s->listener)
        s->listener(synced, err);
}

int bk_mdsync_start(bk_broker *b, const char *dbpath)
{
    bk_mdsync *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->b = b;
    char err[MD_ERRLEN];
    if (md_open_syncer(dbpath, &s->db, err, sizeof err) != 0) {
        BK_ERROR("metadata sync worker: %s", err);
        free(s);
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->done, NULL);
    s->jobs_tail = &s->jobs;
    s->sync_work.run = sync_run;
    s->sync_work.done = sync_done;
    s->ckpt_work.run = ckpt_run;
    s->last_ckpt_us = bk_mono_us();
    bk_worker_opts o = { .name = "sluice-mdsync", .nthreads = 1,
                         .thread_start = lower_priority };
    if (bk_worker_new(b->base, &o, &s->wk) != 0) {
        BK_ERROR("metadata sync worker: cannot start");
        md_close(s->db);
        pthread_mutex_destroy(&s->mu);
        pthread_cond_destroy(&s->done);
        free(s);
        return -1;
    }
    ms = s;
    return 0;
}

void bk_mdsync_listen(bk_mdsync_fn fn)
{
    if (ms)
        ms->listener = fn;
}

/* Loop thread: one more sync to run, with job (or NULL) queued before it. */
static uint64_t enqueue(bk_mdjob *job)
{
    pthread_mutex_lock(&ms->mu);
    uint64_t seq = ++ms->requested;
    if (job) {
        job->seq = seq;
        *ms->jobs_tail = job;
        ms->jobs_tail = &job->next;
    }
    pthread_mutex_unlock(&ms->mu);
    bk_worker_submit(ms->wk, &ms->sync_work, 0);   /* S6: after the unlock */
    ms->last_requested = seq;
    return seq;
}

uint64_t bk_mdsync_request(void)
{
    return ms ? enqueue(NULL) : 0;
}

uint64_t bk_mdsync_submit(bk_broker *b, bk_mdjob *job)
{
    job->next = NULL;
    job->rc = 0;
    if (!ms) {
        job->seq = 0;
        job->rc = job->run(b->db, job);
        return 0;
    }
    return enqueue(job);
}

void bk_mdsync_wait(uint64_t seq)
{
    if (!ms)
        return;
    pthread_mutex_lock(&ms->mu);
    while (ms->synced < seq)
        pthread_cond_wait(&ms->done, &ms->mu);
    pthread_mutex_unlock(&ms->mu);
}

uint64_t bk_mdsync_requested(void)
{
    return ms ? ms->last_requested : 0;
}

uint64_t bk_mdsync_durable(void)
{
    return ms ? ms->reported : 0;
}

int bk_mdsync_error(void)
{
    if (!ms)
        return 0;
    pthread_mutex_lock(&ms->mu);
    int e = ms->err;
    pthread_mutex_unlock(&ms->mu);
    return e;
}

void bk_mdsync_stats(uint64_t *syncs, uint64_t *batches, uint64_t *checkpoints)
{
    *syncs = *batches = *checkpoints = 0;
    if (!ms)
        return;
    pthread_mutex_lock(&ms->mu);
    *syncs = ms->syncs;
    *batches = ms->synced;
    *checkpoints = ms->checkpoints;
    pthread_mutex_unlock(&ms->mu);
}

void bk_mdsync_stop(void)
{
    bk_mdsync *s = ms;
    if (!s)
        return;
    bk_worker_quit(s->wk, true);                 /* S4: every queued sync runs */
    bk_worker_join(s->wk);
    (void)bk_worker_take_all(s->wk);             /* the listener is not called */
    bk_worker_free(s->wk);
    ms = NULL;
    BK_INFO("metadata sync worker stopped: %llu syncs covered %llu batches, "
            "%llu checkpoints", (unsigned long long)s->syncs,
            (unsigned long long)s->requested, (unsigned long long)s->checkpoints);
    md_close(s->db);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->done);
    free(s);
}
