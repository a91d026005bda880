/*
 * daemon/replica/replica_flusher.c — the fsync worker.
 *
 * fdatasync can take tens of milliseconds (seconds on a busy disk); on the
 * event loop it would stall every connection.  So the loop only queues a
 * partition here, one worker thread calls seg_flush, and the result comes
 * back to the loop through an eventfd, where the partition's flush
 * bookkeeping (flush_in_flight, last_flush_ms, unflushed_messages) is
 * updated.  The recovery point itself lives in the seg_log
 * (seg_recovery_point) and is persisted by bk_save_offsets.
 *
 *   loop thread                     worker thread
 *   -----------                     -------------
 *   bk_flusher_request(p)
 *     p->flush_in_flight = true
 *     job → pending ───────────────► pop job, in_flight = job
 *                                   seg_flush(log)       (no lock held)
 *     done_cb ◄──── eventfd ◄────── job → done, in_flight = NULL
 *     p->flush_in_flight = false
 *
 * Invariants:
 *   1. At most one job per partition exists (pending, in flight or done):
 *      p->flush_in_flight is set from request until done_cb runs.
 *   2. Only the loop thread touches bk_partition fields; the worker sees
 *      only the job's seg_log pointer, which seg.h allows for seg_flush.
 *   3. bk_flusher_forget(p) returns with no job for p pending or in
 *      flight, and any finished job for p disowned (job->p = NULL), so the
 *      partition and its log may be freed right after.
 *   4. bk_flusher_stop lets the worker finish every queued flush (they
 *      were promised by the flush policy), then joins it.
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/net/net_metrics.h"
#include "daemon/replica/replica_logdir.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

typedef struct flush_job {
    struct flush_job *next;
    bk_partition *p;              /* NULL once forgotten */
    seg_log *log;
    int rc;
    int err;                      /* errno of a failed flush */
    int64_t flushed_to;
} flush_job;

typedef struct bk_flusher {
    bk_broker *b;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work;          /* pending non-empty, or stop */
    pthread_cond_t idle;          /* in_flight changed */
    flush_job *pending, **pending_tail;
    flush_job *done;
    flush_job *in_flight;
    bool stop;
    int efd;                      /* worker → loop: "done is non-empty" */
    struct event *done_ev;
} bk_flusher;

static void *flusher_main(void *arg)
{
    bk_flusher *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (!f->pending && !f->stop)
            pthread_cond_wait(&f->work, &f->mu);
        flush_job *j = f->pending;
        if (!j)
            break;                               /* stop, and queue drained */
        f->pending = j->next;
        if (!f->pending)
            f->pending_tail = &f->pending;
        f->in_flight = j;
        pthread_mutex_unlock(&f->mu);

        int64_t t0 = bk_mono_us();
        j->rc = seg_flush(j->log, &j->flushed_to);   /* the slow part */
        bk_metrics_fsync(bk_mono_us() - t0);
        j->err = j->rc ? seg_last_errno(j->log) : 0;

        pthread_mutex_lock(&f->mu);
        f->in_flight = NULL;
        j->next = f->done;
        f->done = j;
        pthread_cond_broadcast(&f->idle);
        uint64_t one = 1;
        /* An eventfd write only fails if the counter would overflow,
         * which a pending wake-up already covers. */
        ssize_t w = write(f->efd, &one, sizeof one);
        (void)w;
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

/* Loop thread: records finished flushes.  b is NULL when stopping. */
static void finish_job(bk_broker *b, flush_job *j)
{
    bk_partition *p = j->p;
    if (p) {
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
                bk_flusher_request(b, p);
        } else if (!b || !bk_logdir_fault(b, p, "flushing", j->err)) {
            BK_ERROR("flush of partition %s-%d failed: %s",
                     p->topic->name, p->id, strerror(j->err ? j->err : EIO));
        }
    }
    free(j);
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    bk_flusher *f = arg;
    uint64_t n;
    ssize_t r = read(fd, &n, sizeof n);
    (void)r;                                     /* EAGAIN: spurious, fine */
    pthread_mutex_lock(&f->mu);
    flush_job *list = f->done;
    f->done = NULL;
    pthread_mutex_unlock(&f->mu);
    while (list) {
        flush_job *next = list->next;
        finish_job(f->b, list);
        list = next;
    }
}

int bk_flusher_start(bk_broker *b)
{
    bk_flusher *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->b = b;
    f->pending_tail = &f->pending;
    f->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (f->efd < 0) {
        BK_ERROR("flusher: eventfd: %s", strerror(errno));
        free(f);
        return -1;
    }
    f->done_ev = event_new(b->base, f->efd, EV_READ | EV_PERSIST, done_cb, f);
    if (!f->done_ev || event_add(f->done_ev, NULL) != 0) {
        if (f->done_ev)
            event_free(f->done_ev);
        close(f->efd);
        free(f);
        return -1;
    }
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->work, NULL);
    pthread_cond_init(&f->idle, NULL);
    int rc = pthread_create(&f->thread, NULL, flusher_main, f);
    if (rc != 0) {
        BK_ERROR("flusher: pthread_create: %s", strerror(rc));
        event_free(f->done_ev);
        close(f->efd);
        pthread_mutex_destroy(&f->mu);
        pthread_cond_destroy(&f->work);
        pthread_cond_destroy(&f->idle);
        free(f);
        return -1;
    }
    b->flusher = f;
    return 0;
}

void bk_flusher_request(bk_broker *b, bk_partition *p)
{
    bk_flusher *f = b->flusher;
    if (!f || p->flush_in_flight)
        return;                                  /* never fsync on the loop */
    flush_job *j = calloc(1, sizeof *j);
    if (!j)
        return;                                  /* the next trigger retries */
    j->p = p;
    j->log = p->log;
    p->flush_in_flight = true;
    pthread_mutex_lock(&f->mu);
    *f->pending_tail = j;
    f->pending_tail = &j->next;
    pthread_cond_signal(&f->work);
    pthread_mutex_unlock(&f->mu);
}

void bk_flusher_forget(bk_broker *b, bk_partition *p)
{
    bk_flusher *f = b->flusher;
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    flush_job **pp = &f->pending;
    while (*pp) {
        flush_job *j = *pp;
        if (j->p == p) {
            *pp = j->next;
            free(j);
        } else {
            pp = &j->next;
        }
    }
    f->pending_tail = &f->pending;
    while (*f->pending_tail)
        f->pending_tail = &(*f->pending_tail)->next;
    while (f->in_flight && f->in_flight->p == p)
        pthread_cond_wait(&f->idle, &f->mu);
    for (flush_job *j = f->done; j; j = j->next)
        if (j->p == p)
            j->p = NULL;
    pthread_mutex_unlock(&f->mu);
    p->flush_in_flight = false;
}

void bk_flusher_stop(bk_broker *b)
{
    bk_flusher *f = b->flusher;
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    f->stop = true;
    pthread_cond_signal(&f->work);
    pthread_mutex_unlock(&f->mu);
    pthread_join(f->thread, NULL);
    /* Record what the worker finished after the loop's last turn. */
    flush_job *list = f->done;
    f->done = NULL;
    while (list) {
        flush_job *next = list->next;
        finish_job(NULL, list);
        list = next;
    }
    event_free(f->done_ev);
    close(f->efd);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->work);
    pthread_cond_destroy(&f->idle);
    free(f);
    b->flusher = NULL;
}
