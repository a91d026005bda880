/*
 * daemon/replica/replica_cleaner.c — log.cleaner.threads compaction workers.
 *
 * Every log.cleaner.backoff.ms the loop asks each partition of a topic
 * with cleanup.policy containing "compact" whether it is due
 * (seg_clean_plan: a few numbers per segment); a due one is queued here.
 * A worker runs seg_clean_run (all reading, writing, fdatasync and the
 * rename swap: segments/cleaner.c) and posts the job back through an
 * eventfd; the loop installs it (seg_clean_finish), hands the replaced
 * segments to the janitor (unlinked after file.delete.delay.ms) and logs
 * one line.
 *
 *   loop                          worker(s)
 *   bk_cleaner_tick
 *     seg_clean_plan → job ─────► seg_clean_run(job, &cancel)
 *     p->clean_in_flight          │
 *   done_cb ◄──── eventfd ◄───────┘
 *     seg_clean_finish, janitor, log line, counters
 *
 * Invariants:
 *   1. At most one job per partition (p->clean_in_flight from plan to
 *      finish); the partition's log is never closed in between:
 *      bk_cleaner_forget (topic deletion, shutdown) cancels, waits and
 *      finishes first.
 *   2. Workers touch only the job (seg.h allows seg_clean_run anywhere).
 *   3. The dedupe buffer is log.cleaner.dedupe.buffer.size split between
 *      the threads, as Kafka does.
 *   4. Workers run at the lowest CPU and I/O priority (lowest_priority):
 *      producers come first (issue 7: a compaction may cost them < 10 %
 *      of their throughput).  segments/cleaner.c keeps the page cache out
 *      of their way (N1-N3 there); log.cleaner.io.max.bytes.per.second
 *      (unlimited by default, as in Kafka) caps the rate on top.
 */
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"

#include <errno.h>
#include <linux/ioprio.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

typedef struct clean_work {
    struct clean_work *next;
    bk_partition *p;
    seg_clean_job *job;
    atomic_bool cancel;
    int rc;
    bool running, done;
} clean_work;

typedef struct bk_cleaner {
    bk_broker *b;
    pthread_t *threads;
    int nthreads;
    pthread_mutex_t mu;
    pthread_cond_t work, idle;
    clean_work *pending, *done, *running;   /* running: a list via next */
    bool stop;
    int efd;
    struct event *done_ev, *tick_ev;
} bk_cleaner;

static void unlink_from(clean_work **list, clean_work *w)
{
    for (clean_work **pp = list; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            return;
        }
}

/* 4: the calling worker gives way to everything else on the machine.
 * CPU: SCHED_IDLE (Linux: per thread), so the loop and the clients take
 * any CPU they want the moment they want it, and a CPU running only the
 * cleaner counts as idle when the kernel places a waking loop thread; a
 * kernel without it gets nice 19.  The loop never waits for a worker
 * except in bk_cleaner_forget, which only waits for the next batch
 * boundary; SCHED_IDLE still gets a few slices per second however busy
 * the machine is.
 * I/O: best effort at the lowest level (7), not the idle class: under
 * ext4's data=ordered a journal commit, which a producer's flush waits
 * for, can wait on the cleaner's data blocks, and an idle-class request
 * may wait for the disk to go quiet (the broker's own writes) first. */
static void lowest_priority(void)
{
    struct sched_param sp = { 0 };
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    /* No glibc wrapper; who = 0 is the calling thread. */
    syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0,
            IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 7));
}

static void *cleaner_main(void *arg)
{
    bk_cleaner *c = arg;
    pthread_setname_np(pthread_self(), "sluice-cleaner");  /* top, /proc */
    lowest_priority();
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (!c->pending && !c->stop)
            pthread_cond_wait(&c->work, &c->mu);
        if (c->stop)
            break;
        clean_work *w = c->pending;
        c->pending = w->next;
        w->next = c->running;
        c->running = w;
        w->running = true;
        pthread_mutex_unlock(&c->mu);

        w->rc = seg_clean_run(w->job, &w->cancel);     /* the slow part */

        pthread_mutex_lock(&c->mu);
        unlink_from(&c->running, w);
        w->running = false;
        w->done = true;
        w->next = c->done;
        c->done = w;
        pthread_cond_broadcast(&c->idle);
        uint64_t one = 1;
        ssize_t n = write(c->efd, &one, sizeof one);
        (void)n;                     /* overflow only: a wake-up is pending */
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Loop thread: installs one finished (or cancelled) job. */
static void finish_work(bk_broker *b, clean_work *w)
{
    bk_partition *p = w->p;
    seg_clean_stats st;
    int rc = seg_clean_finish(p->log, w->job, &st);
    p->clean_in_flight = false;
    bk_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
    if (rc == 0 && st.segments_in > 0) {
        uint64_t freed = st.bytes_in > st.bytes_out ? st.bytes_in - st.bytes_out : 0;
        p->cleaner_runs++;
        p->cleaner_bytes_freed += freed;
        p->cleaner_records_removed += (uint64_t)(st.records_in - st.records_out);
        p->cleaner_last_us = st.elapsed_us;
        BK_INFO("compacted %s-%d: %d segments into %d, offsets [%lld, %lld)%s, "
                "%lld of %lld records kept (%lld tombstones past their delete "
                "horizon removed), %llu bytes freed, %.1f ms",
                p->topic->name, p->id, st.segments_in, st.segments_out,
                (long long)st.clean_from, (long long)st.clean_to,
                st.partial ? " (dedupe buffer full: a prefix)" : "",
                (long long)st.records_out, (long long)st.records_in,
                (long long)st.tombstones_removed,
                (unsigned long long)freed, (double)st.elapsed_us / 1000.0);
    } else if (rc != 0 && rc != SEG_E_STATE) {
        p->cleaner_failures++;
        BK_ERROR("compaction of %s-%d failed (%d); the log is unchanged",
                 p->topic->name, p->id, rc);
    }
    free(w);
}

static void done_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    bk_cleaner *c = arg;
    uint64_t n;
    ssize_t r = read(fd, &n, sizeof n);
    (void)r;
    pthread_mutex_lock(&c->mu);
    clean_work *list = c->done;
    c->done = NULL;
    pthread_mutex_unlock(&c->mu);
    while (list) {
        clean_work *next = list->next;
        finish_work(c->b, list);
        list = next;
    }
}

struct tick_arg { bk_broker *b; seg_clean_policy pol; };

static void tick_replica(bk_partition *p, void *arg)
{
    struct tick_arg *a = arg;
    bk_cleaner *c = a->b->cleaner;
    const md_topic_config *tc = &p->topic->cfg;
    if (!tc->cleanup_compact || p->clean_in_flight)
        return;
    seg_clean_policy pol = a->pol;
    pol.min_compaction_lag_ms = tc->min_compaction_lag_ms;
    pol.max_compaction_lag_ms = tc->max_compaction_lag_ms;
    pol.min_cleanable_dirty_ratio = tc->min_cleanable_dirty_ratio;
    pol.delete_retention_ms = tc->delete_retention_ms;
    {
        seg_clean_job *job;
        if (seg_clean_plan(p->log, &pol, &job) != 1)
            return;
        clean_work *w = calloc(1, sizeof *w);
        if (!w) {
            seg_clean_finish(p->log, job, NULL);
            return;
        }
        w->p = p;
        w->job = job;
        atomic_init(&w->cancel, false);
        p->clean_in_flight = true;
        pthread_mutex_lock(&c->mu);
        clean_work **pp = &c->pending;
        while (*pp)
            pp = &(*pp)->next;
        *pp = w;
        pthread_cond_signal(&c->work);
        pthread_mutex_unlock(&c->mu);
    }
}

void bk_cleaner_tick(bk_broker *b)
{
    bk_cleaner *c = b->cleaner;
    if (!c)
        return;
    struct tick_arg a = { b, { 0 } };
    a.pol.now_ms = bk_now_ms();
    a.pol.dedupe_buffer_bytes = (size_t)(b->cfg->log_cleaner_dedupe_buffer_size /
                                         (c->nthreads > 0 ? c->nthreads : 1));
    a.pol.io_max_bytes_per_sec = b->cfg->log_cleaner_io_max_bytes_per_second;
    bk_replicas_foreach(b, tick_replica, &a);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    bk_cleaner_tick(arg);
}

int bk_cleaner_start(bk_broker *b)
{
    if (!b->cfg->log_cleaner_enable)
        return 0;
    bk_cleaner *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->b = b;
    c->nthreads = b->cfg->log_cleaner_threads > 0 ? b->cfg->log_cleaner_threads : 1;
    c->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    c->threads = calloc((size_t)c->nthreads, sizeof *c->threads);
    if (c->efd < 0 || !c->threads) {
        if (c->efd >= 0) close(c->efd);
        free(c->threads);
        free(c);
        return -1;
    }
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->work, NULL);
    pthread_cond_init(&c->idle, NULL);
    c->done_ev = event_new(b->base, c->efd, EV_READ | EV_PERSIST, done_cb, c);
    c->tick_ev = event_new(b->base, -1, EV_PERSIST, tick_cb, b);
    int64_t ms = b->cfg->log_cleaner_backoff_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    /* Unarmed, finished work would never be collected: the broker does not
     * start, as when the cleaner's memory cannot be had. */
    if (bk_event_add(c->done_ev, NULL, "log cleaner results") != 0 ||
        bk_event_add(c->tick_ev, &tv, "log cleaner tick") != 0) {
        if (c->done_ev)
            event_free(c->done_ev);
        if (c->tick_ev)
            event_free(c->tick_ev);
        close(c->efd);
        free(c->threads);
        free(c);
        return -1;
    }
    b->cleaner = c;
    for (int i = 0; i < c->nthreads; i++)
        if (pthread_create(&c->threads[i], NULL, cleaner_main, c) != 0) {
            c->nthreads = i;
            break;
        }
    return 0;
}

/* Moves the jobs of p from *list onto *mine (c->mu held). */
static void take_jobs_of(clean_work **list, const bk_partition *p, clean_work **mine)
{
    for (clean_work **pp = list; *pp;)
        if ((*pp)->p == p) {
            clean_work *w = *pp;
            *pp = w->next;
            w->next = *mine;
            *mine = w;
        } else {
            pp = &(*pp)->next;
        }
}

void bk_cleaner_forget(bk_broker *b, bk_partition *p)
{
    bk_cleaner *c = b->cleaner;
    if (!c || !p->clean_in_flight)
        return;
    clean_work *mine = NULL;
    pthread_mutex_lock(&c->mu);
    take_jobs_of(&c->pending, p, &mine);
    for (;;) {
        bool busy = false;
        for (clean_work *w = c->running; w; w = w->next)
            if (w->p == p) {
                atomic_store(&w->cancel, true);
                busy = true;
            }
        if (!busy)
            break;
        pthread_cond_wait(&c->idle, &c->mu);
    }
    take_jobs_of(&c->done, p, &mine);
    pthread_mutex_unlock(&c->mu);
    while (mine) {
        clean_work *next = mine->next;
        finish_work(b, mine);        /* a cancelled job swaps nothing */
        mine = next;
    }
}

void bk_cleaner_stop(bk_broker *b)
{
    bk_cleaner *c = b->cleaner;
    if (!c)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    for (clean_work *w = c->running; w; w = w->next)
        atomic_store(&w->cancel, true);
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    for (int i = 0; i < c->nthreads; i++)
        pthread_join(c->threads[i], NULL);
    clean_work *lists[] = { c->done, c->pending };
    for (int k = 0; k < 2; k++)
        for (clean_work *w = lists[k], *next; w; w = next) {
            next = w->next;
            finish_work(b, w);
        }
    event_free(c->done_ev);
    event_free(c->tick_ev);
    close(c->efd);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->idle);
    free(c->threads);
    free(c);
    b->cleaner = NULL;
}
