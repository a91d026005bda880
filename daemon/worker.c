/*
 * daemon/worker.c — the one worker (design note and invariants W1-worker.h W6 in
 * worker.h).
 *
 * States of a bk_work, each move under wk->mu and by the function named:
 *
 *   (caller's) ─submit─► queued ─a thread─► running ─run() returns─►
 *        ▲                  │                   │       posted (done set)
 *        │                take              take waits     │ finish / take
 *        └──────────────────┴───────────────────┴──────────┘ / take_all
 *
 * A running item is known to the worker only through running[thread],
 * which bk_worker_take reads; an item without done() is not recorded
 * there, as run() may free it (worker.h W4).
 */
#include "daemon/worker.h"
#include "daemon/broker.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

struct bk_worker {
    pthread_mutex_t mu;
    pthread_cond_t work;             /* queue changed, or quit (CLOCK_MONOTONIC) */
    pthread_cond_t idle;             /* a run() returned (bk_worker_take) */
    bk_work *queue;                  /* worker.h W1: by due time */
    bk_work *done, **done_tail;      /* worker.h W3: oldest first, via done_next */
    bk_work **running;               /* [nthreads] */
    bool quit, drain;
    struct event *wake;              /* done non-empty: bk_worker_finish */
    bk_worker_opts o;
    pthread_t *threads;
    int started;
};

struct thread_arg { bk_worker *wk; int idx; };

/* wk->mu held: the head, once due; NULL with *wait_us set (0: no work). */
static bk_work *next_due(bk_worker *wk, int64_t *wait_us)
{
    *wait_us = 0;
    bk_work *w = wk->queue;
    if (!w)
        return NULL;
    if (!wk->quit) {
        int64_t now = bk_mono_us();
        if (w->due_us > now) {
            *wait_us = w->due_us - now;
            return NULL;
        }
    }
    wk->queue = w->next;
    w->queued = false;
    return w;
}

static void timed_wait(bk_worker *wk, int64_t wait_us)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += wait_us / 1000000;
    ts.tv_nsec += (wait_us % 1000000) * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&wk->work, &wk->mu, &ts);
}

static void *worker_main(void *p)
{
    struct thread_arg ta = *(struct thread_arg *)p;
    free(p);
    bk_worker *wk = ta.wk;
    if (wk->o.name)
        pthread_setname_np(pthread_self(), wk->o.name);
    if (wk->o.thread_start)
        wk->o.thread_start(wk->o.arg, ta.idx);
    pthread_mutex_lock(&wk->mu);
    for (;;) {
        if (wk->quit && (!wk->drain || !wk->queue))
            break;                                  /* worker.h W6 */
        int64_t wait_us;
        bk_work *w = next_due(wk, &wait_us);
        if (!w) {
            if (wait_us > 0)
                timed_wait(wk, wait_us);
            else
                pthread_cond_wait(&wk->work, &wk->mu);
            continue;
        }
        bool has_done = w->done != NULL;
        wk->running[ta.idx] = has_done ? w : NULL;  /* worker.h W4 */
        pthread_mutex_unlock(&wk->mu);

        w->run(w, ta.idx);                          /* the slow part (worker.h W5) */

        pthread_mutex_lock(&wk->mu);
        wk->running[ta.idx] = NULL;
        bool wake = false;
        if (has_done && !w->posted) {               /* worker.h W3 */
            w->posted = true;
            w->done_next = NULL;
            *wk->done_tail = w;
            wk->done_tail = &w->done_next;
            wake = true;
        }
        pthread_cond_broadcast(&wk->idle);
        if (wake) {
            pthread_mutex_unlock(&wk->mu);         /* worker.h W5 */
            event_active(wk->wake, EV_READ, 0);
            pthread_mutex_lock(&wk->mu);
        }
    }
    pthread_mutex_unlock(&wk->mu);
    return NULL;
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_worker_finish(arg);
}

int bk_worker_new(struct event_base *base, const bk_worker_opts *o, bk_worker **out)
{
    *out = NULL;
    bk_worker *wk = calloc(1, sizeof *wk);
    int n = o->nthreads > 0 ? o->nthreads : 1;
    if (!wk)
        return -1;
    wk->o = *o;
    wk->o.nthreads = n;
    wk->done_tail = &wk->done;
    wk->running = calloc((size_t)n, sizeof *wk->running);
    wk->threads = calloc((size_t)n, sizeof *wk->threads);
    wk->wake = event_new(base, -1, 0, on_wake, wk);
    if (!wk->running || !wk->threads || !wk->wake) {
        if (wk->wake)
            event_free(wk->wake);
        free(wk->running);
        free(wk->threads);
        free(wk);
        return -1;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&wk->work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&wk->idle, NULL);
    pthread_mutex_init(&wk->mu, NULL);
    for (; wk->started < n; wk->started++) {
        struct thread_arg *ta = malloc(sizeof *ta);
        int rc = ta ? 0 : -1;
        if (ta) {
            *ta = (struct thread_arg){ wk, wk->started };
            rc = pthread_create(&wk->threads[wk->started], NULL, worker_main, ta);
        }
        if (rc != 0) {
            free(ta);
            BK_ERROR("%s: cannot start a worker thread", o->name ? o->name : "worker");
            bk_worker_quit(wk, false);
            bk_worker_join(wk);
            bk_worker_free(wk);
            return -1;
        }
    }
    *out = wk;
    return 0;
}

void bk_worker_submit(bk_worker *wk, bk_work *w, int64_t delay_us)
{
    int64_t due = bk_mono_us() + (delay_us > 0 ? delay_us : 0);
    bool added = false, head = false;
    pthread_mutex_lock(&wk->mu);
    if (!w->queued) {                               /* worker.h W2 */
        w->queued = added = true;
        w->due_us = due;
        bk_work **pp = &wk->queue;
        while (*pp && (*pp)->due_us <= due)         /* worker.h W1 */
            pp = &(*pp)->next;
        w->next = *pp;
        *pp = w;
        head = wk->queue == w;
    }
    pthread_mutex_unlock(&wk->mu);
    /* worker.h W5: woken after the unlock.  A thread waiting for a later head must
     * look at the new one. */
    if (added && (head || wk->o.nthreads > 1))
        pthread_cond_broadcast(&wk->work);
    else if (added)
        pthread_cond_signal(&wk->work);
}

/* Output lists are short (one owner's items): a walk is enough. */
static bool in_list(const bk_work *l, const bk_work *w)
{
    for (; l; l = l->next)
        if (l == w)
            return true;
    return false;
}

bk_work *bk_worker_take(bk_worker *wk, bool (*match)(bk_work *w, bool running, void *arg),
                        void *arg)
{
    bk_work *out = NULL, **tail = &out;
    pthread_mutex_lock(&wk->mu);
    for (bk_work **pp = &wk->queue; *pp;) {
        bk_work *w = *pp;
        if (match(w, false, arg)) {
            *pp = w->next;
            w->queued = false;
            *tail = w;
            tail = &w->next;
        } else {
            pp = &w->next;
        }
    }
    for (;;) {
        bool busy = false;
        for (int i = 0; i < wk->o.nthreads; i++)
            if (wk->running[i] && match(wk->running[i], true, arg))
                busy = true;
        if (!busy)
            break;
        pthread_cond_wait(&wk->idle, &wk->mu);
    }
    wk->done_tail = &wk->done;
    for (bk_work **pp = &wk->done; *pp;) {
        bk_work *w = *pp;
        if (match(w, false, arg)) {
            *pp = w->done_next;
            w->posted = false;
            *tail = NULL;
            if (in_list(out, w))                    /* queued again while posted */
                continue;
            *tail = w;
            tail = &w->next;
        } else {
            pp = &w->done_next;
            wk->done_tail = pp;
        }
    }
    *tail = NULL;
    pthread_mutex_unlock(&wk->mu);
    return out;
}

void bk_worker_quit(bk_worker *wk, bool drain)
{
    pthread_mutex_lock(&wk->mu);
    wk->quit = true;
    wk->drain = drain;
    pthread_cond_broadcast(&wk->work);
    pthread_mutex_unlock(&wk->mu);
}

void bk_worker_join(bk_worker *wk)
{
    for (int i = 0; i < wk->started; i++)
        pthread_join(wk->threads[i], NULL);
    wk->started = 0;
}

void bk_worker_finish(bk_worker *wk)
{
    /* One item at a time, each taken under the lock: a done() may submit
     * an item again (worker.h W2, W3), which a thread can then run and post
     * before its turn here, so no chain is kept outside the lock.  At most
     * as many as were posted on entry: what is posted meanwhile has woken
     * the loop again. */
    pthread_mutex_lock(&wk->mu);
    int n = 0;
    for (bk_work *w = wk->done; w; w = w->done_next)
        n++;
    while (n-- > 0 && wk->done) {
        bk_work *w = wk->done;
        wk->done = w->done_next;
        if (!wk->done)
            wk->done_tail = &wk->done;
        w->posted = false;
        pthread_mutex_unlock(&wk->mu);
        w->done(w);                                 /* may free w */
        pthread_mutex_lock(&wk->mu);
    }
    pthread_mutex_unlock(&wk->mu);
}

bk_work *bk_worker_take_all(bk_worker *wk)
{
    /* An item posted and queued again is linked through next in the queue:
     * it goes out once, in the queue's part, whose links are read before
     * they are rewritten. */
    bk_work *out = NULL, **tail = &out;
    for (bk_work *w = wk->done; w; w = w->done_next) {
        w->posted = false;
        if (w->queued)
            continue;
        *tail = w;
        tail = &w->next;
    }
    for (bk_work *w = wk->queue, *next; w; w = next) {
        next = w->next;
        w->queued = false;
        *tail = w;
        tail = &w->next;
    }
    *tail = NULL;
    wk->done = wk->queue = NULL;
    wk->done_tail = &wk->done;
    return out;
}

void bk_worker_free(bk_worker *wk)
{
    if (!wk)
        return;
    event_free(wk->wake);
    pthread_cond_destroy(&wk->work);
    pthread_cond_destroy(&wk->idle);
    pthread_mutex_destroy(&wk->mu);
    free(wk->running);
    free(wk->threads);
    free(wk);
}

/* ---- calls (bk_worker_call) ----------------------------------------------- */

typedef struct bk_call {
    bk_work w;                       /* first: a bk_work * is a bk_call * */
    void (*run)(void *), (*done)(void *);
    void *arg;
} bk_call;

static void call_run(bk_work *w, int thread)
{
    (void)thread;
    bk_call *c = (bk_call *)w;
    c->run(c->arg);
}

static void call_done(bk_work *w)
{
    bk_call *c = (bk_call *)w;
    c->done(c->arg);
    free(c);
}

int bk_worker_call(bk_worker *wk, void (*run)(void *), void (*done)(void *), void *arg)
{
    bk_call *c = wk ? calloc(1, sizeof *c) : NULL;
    if (!c)
        return -1;
    c->w.run = call_run;
    c->w.done = call_done;
    c->run = run;
    c->done = done;
    c->arg = arg;
    bk_worker_submit(wk, &c->w, 0);
    return 0;
}
