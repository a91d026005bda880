/*
 * daemon/replica/replica_flusher.c — the fsync worker.
 *
 * fdatasync can take tens of milliseconds (seconds on a busy disk); on the
 * event loop it would stall every connection.  So the loop only queues a
 * partition here, one worker thread (daemon/worker.c) calls seg_flush,
 * and the result comes back to the loop, where the partition's flush
 * bookkeeping (flush_in_flight, last_flush_ms, unflushed_messages) is
 * updated.  The recovery point itself lives in the seg_log
 * (seg_recovery_point) and is persisted by replica_save_offsets.
 *
 *   loop thread                     worker thread
 *   -----------                     -------------
 *   replica_flusher_request(p)
 *     p->flush_in_flight = true
 *     job → bk_worker_submit ──────► flush_run: seg_flush(log)
 *     flush_done ◄── worker.h W3 ◄──┘
 *     p->flush_in_flight = false
 *
 * Invariants:
 *   1. At most one job per partition exists (pending, in flight or done):
 *      p->flush_in_flight is set from request until done_cb runs.
 *   2. Only the loop thread touches bk_partition fields; the worker sees
 *      only the job's seg_log pointer, which seg.h allows for seg_flush.
 *   3. replica_flusher_forget(p) returns with no job for p queued, running or
 *      finished (bk_worker_take waits out a running one and takes the
 *      others), so the partition and its log may be freed right after.
 *   4. replica_flusher_stop lets the worker finish every queued flush (they
 *      were promised by the flush policy), then joins it.
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/net/net_metrics.h"
#include "daemon/replica/replica_logdir.h"
#include "daemon/worker.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct flush_job {
    bk_work w;                    /* first: a bk_work * is a flush_job * */
    bk_broker *b;                 /* NULL when stopping */
    bk_partition *p;
    seg_log *log;
    int rc;
    int err;                      /* errno of a failed flush */
    int64_t flushed_to;
} flush_job;

typedef struct bk_flusher {
    bk_worker *wk;
} bk_flusher;

static void flush_run(bk_work *w, int thread)
{
    (void)thread;
    flush_job *j = (flush_job *)w;
    int64_t t0 = bk_mono_us();
    j->rc = seg_flush(j->log, &j->flushed_to);   /* the slow part */
    net_metrics_fsync(bk_mono_us() - t0);
    j->err = j->rc ? seg_last_errno(j->log) : 0;
}

/* Loop thread: records a finished flush.  j->b is NULL when stopping. */
static void flush_done(bk_work *w)
{
    flush_job *j = (flush_job *)w;
    bk_broker *b = j->b;
    bk_partition *p = j->p;
    p->flush_in_flight = false;
    p->last_flush_ms = bk_now_ms();
    if (j->rc == 0) {
        /* Offsets count messages: what was appended after the flushed
         * point is still unflushed. */
        int64_t left = seg_log_end(p->log) - j->flushed_to;
        p->unflushed_messages = left > 0 ? left : 0;
        p->flushes++;
        /* Appends that arrived during the fdatasync may already be
         * owed one under flush.messages: without this, the last ones
         * before a pause would wait for flush.ms (maybe forever). */
        int64_t fm = p->topic->cfg.flush_messages;
        if (b && fm > 0 && p->unflushed_messages >= fm)
            replica_flusher_request(b, p);
    } else if (!b || !replica_logdir_fault(b, p, "flushing", j->err)) {
        BK_ERROR("flush of partition %s-%d failed: %s",
                 p->topic->name, p->id, strerror(j->err ? j->err : EIO));
    }
    free(j);
}

int replica_flusher_start(bk_broker *b)
{
    bk_flusher *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    bk_worker_opts o = { .name = "sluice-flusher", .nthreads = 1 };
    if (bk_worker_new(b->base, &o, &f->wk) != 0) {
        BK_ERROR("flusher: cannot start its worker");
        free(f);
        return -1;
    }
    b->flusher = f;
    return 0;
}

void replica_flusher_request(bk_broker *b, bk_partition *p)
{
    bk_flusher *f = b->flusher;
    if (!f || p->flush_in_flight)
        return;                                  /* never fsync on the loop */
    flush_job *j = calloc(1, sizeof *j);
    if (!j)
        return;                                  /* the next trigger retries */
    j->w.run = flush_run;
    j->w.done = flush_done;
    j->b = b;
    j->p = p;
    j->log = p->log;
    p->flush_in_flight = true;
    bk_worker_submit(f->wk, &j->w, 0);
}

static bool job_of(bk_work *w, bool running, void *p)
{
    (void)running;
    return ((flush_job *)w)->p == p;
}

void replica_flusher_forget(bk_broker *b, bk_partition *p)
{
    bk_flusher *f = b->flusher;
    if (!f)
        return;
    for (bk_work *w = bk_worker_take(f->wk, job_of, p), *next; w; w = next) {
        next = w->next;
        free(w);                                 /* inv. 3: nothing left of p */
    }
    p->flush_in_flight = false;
}

void replica_flusher_stop(bk_broker *b)
{
    bk_flusher *f = b->flusher;
    if (!f)
        return;
    bk_worker_quit(f->wk, true);                 /* inv. 4 */
    bk_worker_join(f->wk);
    /* Record what the worker finished after the loop's last turn. */
    for (bk_work *w = bk_worker_take_all(f->wk), *next; w; w = next) {
        next = w->next;
        ((flush_job *)w)->b = NULL;
        flush_done(w);
    }
    bk_worker_free(f->wk);
    free(f);
    b->flusher = NULL;
}
