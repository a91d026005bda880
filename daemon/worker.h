/*
 * daemon/worker.h — the one worker: threads, a queue, one way back to the loop.
 *
 * Everything slow the loop must not do (fdatasync, unlink, compaction,
 * PBKDF2, SQL) runs on a bk_worker: N threads take bk_work items from one
 * queue ordered by due time, call run() off the loop, and hand the item
 * back to the loop, where done() runs.  The wake-up is event_active on one
 * event per worker (libevent is thread-aware: main.c's
 * evthread_use_pthreads); no eventfd.  The item is the caller's struct
 * (embed a bk_work in it): submitting allocates nothing.
 *
 *   loop                                  worker thread(s)
 *   bk_worker_submit(w, delay) ─queue──►  due? → run(w, thread)   (no lock)
 *   done(w) ◄── event_active ◄── done ◄── w → done list (if w->done)
 *
 * Invariants (cite as worker.h W1…):
 *   W1. The queue is ordered by due time; equal due times keep submission
 *       order, so with one thread work runs in the order it was submitted.
 *   W2. A work item is in at most one queue position: submitting an item
 *       already queued (not yet running) changes nothing.  An item
 *       submitted while it runs is queued again and runs again after.
 *   W3. done() runs on the loop thread, after run() returned.  An item
 *       waiting for its done() is posted once however often it ran
 *       meanwhile (as event_active coalesces): its done() runs once.
 *   W4. A work item without done() belongs to run() once run() starts.
 *   W5. The worker's mutex is never held while run() or done() runs, nor
 *       while it wakes the loop or a thread: a woken thread never finds
 *       it taken.
 *   W6. bk_worker_quit(drain) lets the threads run every queued item at
 *       once (due times ignored; items submitted meanwhile too); without
 *       drain, each thread ends after the item it runs.  bk_worker_join
 *       returns with no run() in progress; done() of what finished is
 *       left to bk_worker_finish or bk_worker_take_all.
 */
#ifndef SLUICE_WORKER_H
#define SLUICE_WORKER_H

#include <stdbool.h>
#include <stdint.h>

struct event_base;

typedef struct bk_work {
    struct bk_work *next;            /* the worker's while queued */
    struct bk_work *done_next;       /* the worker's while posted (W3) */
    int64_t due_us;                  /* CLOCK_MONOTONIC (bk_mono_us) */
    bool queued, posted;             /* under the worker's mutex */
    /* Worker thread: the slow part.  thread: 0 … nthreads-1. */
    void (*run)(struct bk_work *w, int thread);
    /* Loop thread, after run(); NULL: nothing to do there (W4). */
    void (*done)(struct bk_work *w);
} bk_work;

typedef struct bk_worker bk_worker;

typedef struct bk_worker_opts {
    const char *name;                /* the threads' name (top, /proc): ≤ 15 chars */
    int nthreads;                    /* ≥ 1 */
    /* Each thread first, on itself: priorities (nice, SCHED_IDLE, I/O). */
    void (*thread_start)(void *arg, int thread);
    void *arg;
} bk_worker_opts;

/* 0, or -1 (*out NULL) when memory, the event or a thread could not be had. */
int  bk_worker_new(struct event_base *base, const bk_worker_opts *o, bk_worker **out);
/* Any thread.  w->run and w->done set; delay_us 0: due now. */
void bk_worker_submit(bk_worker *wk, bk_work *w, int64_t delay_us);
/* Loop thread: takes out every queued or finished item for which
 * match(w, false) holds, after waiting until no running item has
 * match(w, true) (match may then ask a running one to stop early, as the
 * cleaner's cancel flag does).  Returns them, queued ones first; their
 * done() is the caller's to run or skip. */
bk_work *bk_worker_take(bk_worker *wk, bool (*match)(bk_work *w, bool running, void *arg),
                        void *arg);
void bk_worker_quit(bk_worker *wk, bool drain);   /* W6 */
void bk_worker_join(bk_worker *wk);
/* Loop thread: the done() of every finished item, oldest first (this is
 * what the loop's wake-up runs). */
void bk_worker_finish(bk_worker *wk);
/* After join: finished items (oldest first), then never-run ones, all
 * without their done(). */
bk_work *bk_worker_take_all(bk_worker *wk);
/* After join, with nothing left (take_all or finish). */
void bk_worker_free(bk_worker *wk);
/* Loop thread: run(arg) on one of wk's threads, then done(arg) on the loop,
 * exactly once (W3), as a work item of its own (allocated here: a call is
 * rare, a login's PBKDF2).  -1 when wk is NULL (not started) or memory
 * ran out: nothing was queued, the caller does the work itself. */
int bk_worker_call(bk_worker *wk, void (*run)(void *), void (*done)(void *), void *arg);

#endif
