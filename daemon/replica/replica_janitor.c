/*
 * daemon/replica/replica_janitor.c — the thread that removes files, so the loop never does.
 *
 * Three kinds of work arrive from the loop, each with a time it is due:
 *   - a seg_dead list (segments retention, DeleteRecords or a compaction
 *     swap took out of a log): renamed *.deleted at once (if the swap did
 *     not already), unlinked when file.delete.delay.ms has passed, so a fetch that found
 *     the segment just before still opens nothing stale (it holds the fd
 *     anyway, seg_range);
 *   - a whole seg_log of a deleted topic, its directory already renamed
 *     "<topic>-<p>.<id>-delete": seg_destroy (close, unlink, rmdir);
 *   - a directory path (such leftovers found at startup): seg_remove_dir;
 *   - a leader-epoch-checkpoint snapshot (segments/epochs.c, E4): written
 *     with its fdatasyncs here, due at once, so snapshots of one partition
 *     are written in the order they were taken (invariant 1 keeps equal due
 *     times in queue order);
 *   - a call (bk_janitor_call): CPU work the loop must not do, such as a
 *     PLAIN login's PBKDF2 (sec_sasl.c inv. 3); run here, due at once, and
 *     its done() posted back to the loop (done_ev).
 *
 * Invariants:
 *   1. The queue is kept sorted by due time; the thread sleeps until the
 *      head is due (pthread_cond_timedwait on CLOCK_MONOTONIC).
 *   2. Nothing here touches a log the loop still owns: a seg_dead list and
 *      a destroyed log were handed over whole.
 *   3. bk_janitor_stop does everything still queued at once (a stopping
 *      broker does not wait out delays: the files are *.deleted already and
 *      seg_open would remove them anyway), then joins, then runs the done()
 *      of every call (on the loop thread, as always).
 *   4. A call's done() runs exactly once, on the loop thread, after its
 *      run() has returned; the arg is the caller's until then (a caller
 *      whose requester went away marks arg, never frees it early).
 */
#include "daemon/view/view.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

typedef struct jan_item {
    struct jan_item *next;
    int64_t due_us;                  /* CLOCK_MONOTONIC */
    seg_dead *dead;
    bool rename_only;                /* first half of a dead list's removal */
    seg_log *log;
    char *dir;
    seg_epoch_ckpt *epochs;
    void (*run)(void *), (*done)(void *);   /* a call (inv. 4) */
    void *arg;
} jan_item;

typedef struct bk_janitor {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    jan_item *queue;
    jan_item *done;                  /* calls run, for done_ev (LIFO) */
    struct event *done_ev;
    bool stop;
} bk_janitor;

static void do_item(bk_janitor *j, jan_item *it)
{
    if (it->run) {
        it->run(it->arg);
        pthread_mutex_lock(&j->mu);
        it->next = j->done;
        j->done = it;
        pthread_mutex_unlock(&j->mu);
        event_active(j->done_ev, EV_READ, 0);
        return;
    }
    if (it->rename_only) {
        seg_dead_rename(it->dead);   /* the unlink item still owns it */
        free(it);
        return;
    }
    if (it->dead)
        seg_dead_unlink(it->dead);
    if (it->log && seg_destroy(it->log) != 0)
        BK_WARN("janitor: could not remove every file of a deleted partition");
    if (it->dir && seg_remove_dir(it->dir) != 0)
        BK_WARN("janitor: could not remove %s", it->dir);
    /* A failed write leaves the previous file, and the next change writes
     * the whole history again; a restart relearns the tail from the log. */
    if (it->epochs && seg_epoch_write_checkpoint(it->epochs) != 0)
        BK_WARN("janitor: could not write a leader-epoch-checkpoint");
    free(it->dir);
    free(it);
}

static void *janitor_main(void *arg)
{
    bk_janitor *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (!j->queue && j->stop)
            break;
        if (!j->queue) {
            pthread_cond_wait(&j->cv, &j->mu);
            continue;
        }
        int64_t now = bk_mono_us();
        if (!j->stop && j->queue->due_us > now) {
            int64_t due = j->queue->due_us;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            int64_t wait = due - now;
            ts.tv_sec += wait / 1000000;
            ts.tv_nsec += (wait % 1000000) * 1000;
            if (ts.tv_nsec >= 1000000000) { ts.tv_sec++; ts.tv_nsec -= 1000000000; }
            pthread_cond_timedwait(&j->cv, &j->mu, &ts);
            continue;
        }
        jan_item *it = j->queue;
        j->queue = it->next;
        pthread_mutex_unlock(&j->mu);
        do_item(j, it);              /* unlink, rmdir, a call: the slow part */
        pthread_mutex_lock(&j->mu);
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Loop thread: the done() of calls that have run, oldest first. */
static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_janitor *j = arg;
    pthread_mutex_lock(&j->mu);
    jan_item *list = j->done, *rev = NULL;
    j->done = NULL;
    pthread_mutex_unlock(&j->mu);
    while (list) {
        jan_item *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    while (rev) {
        jan_item *n = rev->next;
        rev->done(rev->arg);
        free(rev);
        rev = n;
    }
}

int bk_janitor_start(bk_broker *b)
{
    bk_janitor *j = calloc(1, sizeof *j);
    if (!j)
        return -1;
    j->done_ev = event_new(b->base, -1, 0, on_done, j);
    if (!j->done_ev) {
        free(j);
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&j->mu, NULL);
    int rc = pthread_create(&j->thread, NULL, janitor_main, j);
    if (rc) {
        BK_ERROR("janitor: pthread_create: %s", strerror(rc));
        pthread_cond_destroy(&j->cv);
        pthread_mutex_destroy(&j->mu);
        event_free(j->done_ev);
        free(j);
        return -1;
    }
    b->janitor = j;
    return 0;
}

static void enqueue(bk_broker *b, jan_item *it, int64_t delay_ms)
{
    bk_janitor *j = b->janitor;
    if (!j) {                        /* not started (tests, shutdown); never a call */
        do_item(NULL, it);
        return;
    }
    it->due_us = bk_mono_us() + (delay_ms > 0 ? delay_ms * 1000 : 0);
    pthread_mutex_lock(&j->mu);
    jan_item **pp = &j->queue;
    while (*pp && (*pp)->due_us <= it->due_us)
        pp = &(*pp)->next;
    it->next = *pp;
    *pp = it;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void bk_janitor_dead(bk_broker *b, seg_dead *d, int64_t delay_ms)
{
    if (!d)
        return;
    jan_item *it = calloc(1, sizeof *it), *ren = calloc(1, sizeof *ren);
    if (!it || !ren) {
        free(it);
        free(ren);
        seg_dead_unlink(d);          /* no memory to wait: unlink now */
        return;
    }
    /* Rename *.deleted now (the loop only detached), unlink after the
     * delay; equal due times keep queue order, so the rename goes first. */
    ren->dead = d;
    ren->rename_only = true;
    enqueue(b, ren, 0);
    it->dead = d;
    enqueue(b, it, delay_ms);
}

void bk_janitor_destroy_log(bk_broker *b, seg_log *log)
{
    jan_item *it = calloc(1, sizeof *it);
    if (!it) {
        seg_destroy(log);
        return;
    }
    it->log = log;
    enqueue(b, it, 0);
}

void bk_janitor_remove_dir(bk_broker *b, const char *dir)
{
    jan_item *it = calloc(1, sizeof *it);
    if (!it || !(it->dir = strdup(dir))) {
        free(it);
        return;
    }
    enqueue(b, it, 0);
}

void bk_janitor_epochs(bk_broker *b, seg_epoch_ckpt *c)
{
    jan_item *it = calloc(1, sizeof *it);
    if (!it) {
        seg_epoch_write_checkpoint(c);   /* no memory to queue: here */
        return;
    }
    it->epochs = c;
    enqueue(b, it, 0);
}

int bk_janitor_call(bk_broker *b, void (*run)(void *), void (*done)(void *), void *arg)
{
    jan_item *it = b->janitor ? calloc(1, sizeof *it) : NULL;
    if (!it)
        return -1;
    it->run = run;
    it->done = done;
    it->arg = arg;
    enqueue(b, it, 0);
    return 0;
}

void bk_janitor_stop(bk_broker *b)
{
    bk_janitor *j = b->janitor;
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_signal(&j->cv);
    pthread_mutex_unlock(&j->mu);
    pthread_join(j->thread, NULL);
    on_done(-1, 0, j);               /* inv. 3 */
    event_free(j->done_ev);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    free(j);
    b->janitor = NULL;
}
