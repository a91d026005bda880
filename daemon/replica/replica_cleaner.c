/*
 * daemon/replica/replica_cleaner.c — log.cleaner.threads compaction workers.
 *
 * Every log.cleaner.backoff.ms the loop asks each partition of a topic
 * with cleanup.policy containing "compact" whether it is due
 * (seg_clean_plan: a few numbers per segment); a due one is queued here.
 * A worker thread (daemon/worker.c) runs seg_clean_run (all reading,
 * writing, fdatasync and the rename swap: segments/cleaner.c) and posts
 * the job back to the loop, which installs it (seg_clean_finish), hands the replaced
 * segments to the janitor (unlinked after file.delete.delay.ms) and logs
 * one line.
 *
 *   loop                          worker(s)
 *   replica_cleaner_tick
 *     seg_clean_plan → job ─────► seg_clean_run(job, &cancel)
 *     p->clean_in_flight          │
 *   clean_done ◄── worker.h W3 ◄──┘
 *     seg_clean_finish, janitor, log line, counters
 *
 * Invariants:
 *   1. At most one job per partition (p->clean_in_flight from plan to
 *      finish); the partition's log is never closed in between:
 *      replica_cleaner_forget (topic deletion, shutdown) cancels, waits and
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

#include "daemon/worker.h"

#include <linux/ioprio.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <event2/event.h>

typedef struct clean_work {
    bk_work w;                       /* first: a bk_work * is a clean_work * */
    bk_broker *b;
    bk_partition *p;
    seg_clean_job *job;
    atomic_bool cancel;
    int rc;
} clean_work;

typedef struct bk_cleaner {
    bk_worker *wk;
    int nthreads;
    struct event *tick_ev;
} bk_cleaner;

/* 4: the calling worker gives way to everything else on the machine.
 * CPU: SCHED_IDLE (Linux: per thread), so the loop and the clients take
 * any CPU they want the moment they want it, and a CPU running only the
 * cleaner counts as idle when the kernel places a waking loop thread; a
 * kernel without it gets nice 19.  The loop never waits for a worker
 * except in replica_cleaner_forget, which only waits for the next batch
 * boundary; SCHED_IDLE still gets a few slices per second however busy
 * the machine is.
 * I/O: best effort at the lowest level (7), not the idle class: under
 * ext4's data=ordered a journal commit, which a producer's flush waits
 * for, can wait on the cleaner's data blocks, and an idle-class request
 * may wait for the disk to go quiet (the broker's own writes) first. */
static void lowest_priority(void *arg, int thread)
{
    (void)arg; (void)thread;
    struct sched_param sp = { 0 };
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    /* No glibc wrapper; who = 0 is the calling thread. */
    syscall(SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0,
            IOPRIO_PRIO_VALUE(IOPRIO_CLASS_BE, 7));
}

static void clean_run(bk_work *w, int thread)
{
    (void)thread;
    clean_work *cw = (clean_work *)w;
    cw->rc = seg_clean_run(cw->job, &cw->cancel);     /* the slow part */
}

/* Loop thread: installs one finished (or cancelled) job. */
static void clean_done(bk_work *work)
{
    clean_work *w = (clean_work *)work;
    bk_broker *b = w->b;
    bk_partition *p = w->p;
    seg_clean_stats st;
    int rc = seg_clean_finish(p->log, w->job, &st);
    p->clean_in_flight = false;
    replica_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
    if (st.txn_index_failed)
        BK_WARN("%s-%d: cannot rewrite the aborted-transaction index of a compacted "
                "segment; its entries are kept in memory and the write retried",
                p->topic->name, p->id);
    if (rc == 0 && st.segments_in > 0) {
        uint64_t freed = st.bytes_in > st.bytes_out ? st.bytes_in - st.bytes_out : 0;
        p->cleaner_runs++;
        p->cleaner_bytes_freed += freed;
        p->cleaner_records_removed += (uint64_t)(st.records_in - st.records_out);
        p->cleaner_last_us = st.elapsed_us;
        BK_INFO("compacted %s-%d: %d segments into %d, offsets [%lld, %lld)%s, "
                "%lld of %lld records kept (%lld tombstones and %lld transaction "
                "markers past their delete horizon removed), %llu bytes freed, %.1f ms",
                p->topic->name, p->id, st.segments_in, st.segments_out,
                (long long)st.clean_from, (long long)st.clean_to,
                st.partial ? " (dedupe buffer full: a prefix)" : "",
                (long long)st.records_out, (long long)st.records_in,
                (long long)st.tombstones_removed, (long long)st.markers_removed,
                (unsigned long long)freed, (double)st.elapsed_us / 1000.0);
    } else if (rc != 0 && rc != SEG_E_STATE) {
        p->cleaner_failures++;
        BK_ERROR("compaction of %s-%d failed (%d); the log is unchanged",
                 p->topic->name, p->id, rc);
    }
    free(w);
}

struct tick_arg { bk_broker *b; seg_clean_policy pol; };

/* cleaner.c X5: each producer's newest data batch, by its last offset
 * (Kafka's lastDataOffset), or -1 and its epoch when it has none.  *out is malloc'd (NULL: none or no memory,
 * then compaction keeps none, as before). */
static size_t producers_last(const bk_pstate *ps, seg_producer_last **out)
{
    *out = NULL;
    if (!ps || ps->n == 0 || !(*out = malloc(ps->n * sizeof **out)))
        return 0;
    size_t n = 0;
    for (uint32_t i = 0; i < ps->cap && n < ps->n; i++) {
        const bk_producer *e = ps->slots[i];
        if (e)
            (*out)[n++] = (seg_producer_last){
                .pid = e->pid, .epoch = e->epoch,
                .last_offset = e->n > 0 ? e->batches[e->head].base_offset +
                                              e->batches[e->head].offset_delta : -1 };
    }
    return n;
}

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
    /* cleaner.c X1: nothing from the first open transaction on */
    pol.has_unstable = p->producers && p->producers->first_unstable >= 0;
    pol.unstable_from = pol.has_unstable ? p->producers->first_unstable : 0;
    pol.markers_below = p->producers ? p->producers->snapshot_at : -1;   /* cleaner.c X3 */
    seg_producer_last *last;
    pol.nproducers = producers_last(p->producers, &last);
    pol.producers = last;
    {
        seg_clean_job *job;
        int due = seg_clean_plan(p->log, &pol, &job);
        free(last);                   /* the plan copied what it needs */
        if (due != 1)
            return;
        clean_work *w = calloc(1, sizeof *w);
        if (!w) {
            seg_clean_finish(p->log, job, NULL);
            return;
        }
        w->w.run = clean_run;
        w->w.done = clean_done;
        w->b = a->b;
        w->p = p;
        w->job = job;
        atomic_init(&w->cancel, false);
        p->clean_in_flight = true;
        bk_worker_submit(c->wk, &w->w, 0);
    }
}

void replica_cleaner_tick(bk_broker *b)
{
    bk_cleaner *c = b->cleaner;
    if (!c)
        return;
    struct tick_arg a = { b, { 0 } };
    a.pol.now_ms = bk_now_ms();
    a.pol.dedupe_buffer_bytes = (size_t)(b->cfg->log_cleaner_dedupe_buffer_size /
                                         (c->nthreads > 0 ? c->nthreads : 1));
    a.pol.io_max_bytes_per_sec = b->cfg->log_cleaner_io_max_bytes_per_second;
    replica_replicas_foreach(b, tick_replica, &a);
}

static void tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    replica_cleaner_tick(arg);
}

int replica_cleaner_start(bk_broker *b)
{
    if (!b->cfg->log_cleaner_enable)
        return 0;
    bk_cleaner *c = calloc(1, sizeof *c);
    if (!c)
        return -1;
    c->nthreads = b->cfg->log_cleaner_threads > 0 ? b->cfg->log_cleaner_threads : 1;
    bk_worker_opts o = { .name = "sluice-cleaner", .nthreads = c->nthreads,
                         .thread_start = lowest_priority };
    c->tick_ev = event_new(b->base, -1, EV_PERSIST, tick_cb, b);
    if (!c->tick_ev || bk_worker_new(b->base, &o, &c->wk) != 0) {
        if (c->tick_ev)
            event_free(c->tick_ev);
        free(c);
        return -1;
    }
    int64_t ms = b->cfg->log_cleaner_backoff_ms;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    /* An unarmed tick would never compact: the broker does not start, as
     * when the cleaner's memory cannot be had. */
    if (bk_event_add(c->tick_ev, &tv, "log cleaner tick") != 0) {
        bk_worker_quit(c->wk, false);
        bk_worker_join(c->wk);
        bk_worker_free(c->wk);
        event_free(c->tick_ev);
        free(c);
        return -1;
    }
    b->cleaner = c;
    return 0;
}

/* A job of p; a running one is asked to stop at its next batch boundary. */
static bool job_of(bk_work *w, bool running, void *p)
{
    clean_work *cw = (clean_work *)w;
    if (cw->p != p)
        return false;
    if (running)
        atomic_store(&cw->cancel, true);
    return true;
}

void replica_cleaner_forget(bk_broker *b, bk_partition *p)
{
    bk_cleaner *c = b->cleaner;
    if (!c || !p->clean_in_flight)
        return;
    for (bk_work *w = bk_worker_take(c->wk, job_of, p), *next; w; w = next) {
        next = w->next;
        clean_done(w);               /* a cancelled job swaps nothing */
    }
}

static bool any_running(bk_work *w, bool running, void *arg)
{
    (void)arg;
    if (running)
        atomic_store(&((clean_work *)w)->cancel, true);
    return false;
}

void replica_cleaner_stop(bk_broker *b)
{
    bk_cleaner *c = b->cleaner;
    if (!c)
        return;
    /* Cancel what runs; what is queued is never started (finished below). */
    bk_worker_quit(c->wk, false);
    bk_worker_take(c->wk, any_running, NULL);
    bk_worker_join(c->wk);
    for (bk_work *w = bk_worker_take_all(c->wk), *next; w; w = next) {
        next = w->next;
        clean_done(w);
    }
    bk_worker_free(c->wk);
    event_free(c->tick_ev);
    free(c);
    b->cleaner = NULL;
}
