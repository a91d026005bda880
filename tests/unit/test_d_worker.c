/*
 * test_d_worker — the one worker (daemon/worker.c, W1-W6 in worker.h):
 * order, due times, done() on the loop, coalescing, take, quit.
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "daemon/broker.h"
#include "daemon/worker.h"
#include "tests/unit/unit_run.h"

#define N 8

typedef struct item {
    bk_work w;
    int id;
    int64_t sleep_us;
    atomic_bool cancel;
    atomic_int runs;
    atomic_bool started;
} item;

static int ran[64], nran, finished[64], nfinished;
static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_t loop_thread;
static struct event_base *base;

static void run_item(bk_work *w, int thread)
{
    (void)thread;
    item *it = (item *)w;
    atomic_store(&it->started, true);
    for (int64_t t = 0; t < it->sleep_us && !atomic_load(&it->cancel); t += 1000)
        usleep(1000);
    atomic_fetch_add(&it->runs, 1);
    pthread_mutex_lock(&log_mu);
    ran[nran++] = it->id;
    pthread_mutex_unlock(&log_mu);
}

static void done_item(bk_work *w)
{
    ck_assert(pthread_equal(pthread_self(), loop_thread));
    finished[nfinished++] = ((item *)w)->id;
}

static void init_items(item *its, int n)
{
    for (int i = 0; i < n; i++) {
        its[i] = (item){ .id = i };
        its[i].w.run = run_item;
        its[i].w.done = done_item;
    }
}

static void setup(void)
{
    evthread_use_pthreads();
    base = event_base_new();
    loop_thread = pthread_self();
    nran = nfinished = 0;
}

static void teardown(void)
{
    event_base_free(base);
}

/* Loop turns until n done() calls or 5 s. */
static void loop_until_finished(int n)
{
    for (int i = 0; i < 5000 && nfinished < n; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
}

static bk_worker *start(int nthreads)
{
    bk_worker *wk;
    bk_worker_opts o = { .name = "test-worker", .nthreads = nthreads };
    ck_assert_int_eq(bk_worker_new(base, &o, &wk), 0);
    return wk;
}

static void stop(bk_worker *wk)
{
    bk_worker_quit(wk, true);
    bk_worker_join(wk);
    bk_worker_finish(wk);
    bk_worker_free(wk);
}

START_TEST(test_one_thread_runs_and_finishes_in_submission_order)
{
    bk_worker *wk = start(1);
    item its[N];
    init_items(its, N);
    for (int i = 0; i < N; i++)
        bk_worker_submit(wk, &its[i].w, 0);
    loop_until_finished(N);
    ck_assert_int_eq(nfinished, N);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(ran[i], i);
        ck_assert_int_eq(finished[i], i);
    }
    stop(wk);
}
END_TEST

START_TEST(test_a_later_due_time_runs_after_work_due_now)
{
    bk_worker *wk = start(1);
    item its[3];
    init_items(its, 3);
    bk_worker_submit(wk, &its[0].w, 200000);
    bk_worker_submit(wk, &its[1].w, 0);
    bk_worker_submit(wk, &its[2].w, 0);
    int64_t t0 = bk_mono_us();
    loop_until_finished(3);
    ck_assert_int_eq(nfinished, 3);
    ck_assert_int_eq(ran[0], 1);
    ck_assert_int_eq(ran[1], 2);
    ck_assert_int_eq(ran[2], 0);
    ck_assert_int_ge(bk_mono_us() - t0, 190000);
    stop(wk);
}
END_TEST

START_TEST(test_submitting_a_queued_item_again_runs_it_once)
{
    bk_worker *wk = start(1);
    item its[2];
    init_items(its, 2);
    its[0].sleep_us = 50000;          /* holds the thread while 1 is queued */
    bk_worker_submit(wk, &its[0].w, 0);
    bk_worker_submit(wk, &its[1].w, 0);
    bk_worker_submit(wk, &its[1].w, 0);
    loop_until_finished(2);
    usleep(20000);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(atomic_load(&its[1].runs), 1);
    ck_assert_int_eq(nfinished, 2);
    stop(wk);
}
END_TEST

START_TEST(test_two_runs_before_the_loop_turns_give_one_done)
{
    bk_worker *wk = start(1);
    item it;
    init_items(&it, 1);
    bk_worker_submit(wk, &it.w, 0);
    while (atomic_load(&it.runs) < 1)
        usleep(1000);
    usleep(5000);                     /* posted, the loop not turned */
    bk_worker_submit(wk, &it.w, 0);
    while (atomic_load(&it.runs) < 2)
        usleep(1000);
    usleep(5000);
    loop_until_finished(1);
    usleep(20000);
    event_base_loop(base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(nfinished, 1);
    stop(wk);
}
END_TEST

static bool is_even(bk_work *w, bool running, void *arg)
{
    (void)arg;
    item *it = (item *)w;
    if (it->id % 2)
        return false;
    if (running)
        atomic_store(&it->cancel, true);
    return true;
}

START_TEST(test_take_waits_out_a_running_match_and_returns_queued_and_finished)
{
    bk_worker *wk = start(1);
    item its[4];
    init_items(its, 4);
    its[0].sleep_us = 5000000;        /* cut short by the cancel flag */
    for (int i = 0; i < 4; i++)
        bk_worker_submit(wk, &its[i].w, 0);
    while (!atomic_load(&its[0].started))
        usleep(1000);
    int64_t t0 = bk_mono_us();
    bk_work *taken = bk_worker_take(wk, is_even, NULL);
    ck_assert_int_lt(bk_mono_us() - t0, 2000000);
    int n = 0;
    for (bk_work *w = taken; w; w = w->next) {
        ck_assert_int_eq(((item *)w)->id % 2, 0);
        n++;
    }
    ck_assert_int_eq(n, 2);           /* 2 queued, 0 finished */
    ck_assert_int_eq(atomic_load(&its[2].runs), 0);
    loop_until_finished(2);
    ck_assert_int_eq(nfinished, 2);   /* 1 and 3 */
    ck_assert_int_eq(finished[0] % 2, 1);
    ck_assert_int_eq(finished[1] % 2, 1);
    stop(wk);
}
END_TEST

START_TEST(test_quit_with_drain_runs_delayed_work_at_once)
{
    bk_worker *wk = start(2);
    item its[N];
    init_items(its, N);
    for (int i = 0; i < N; i++)
        bk_worker_submit(wk, &its[i].w, 60000000);
    int64_t t0 = bk_mono_us();
    bk_worker_quit(wk, true);
    bk_worker_join(wk);
    ck_assert_int_lt(bk_mono_us() - t0, 2000000);
    ck_assert_int_eq(nran, N);
    bk_worker_finish(wk);
    ck_assert_int_eq(nfinished, N);
    bk_worker_free(wk);
}
END_TEST

START_TEST(test_quit_without_drain_leaves_queued_work_to_the_caller)
{
    bk_worker *wk = start(1);
    item its[N];
    init_items(its, N);
    its[0].sleep_us = 30000;
    for (int i = 0; i < N; i++)
        bk_worker_submit(wk, &its[i].w, 0);
    usleep(10000);
    bk_worker_quit(wk, false);
    bk_worker_join(wk);
    int n = 0;
    for (bk_work *w = bk_worker_take_all(wk); w; w = w->next)
        n++;
    ck_assert_int_eq(n, N);       /* finished ones (done() not run) + never run */
    ck_assert_int_lt(nran, N);
    ck_assert_int_eq(nfinished, 0);
    bk_worker_free(wk);
}
END_TEST

static void run_free(bk_work *w, int thread)
{
    (void)thread;
    free(w);
}

START_TEST(test_work_without_done_belongs_to_run)
{
    bk_worker *wk = start(2);
    for (int i = 0; i < 100; i++) {
        bk_work *w = calloc(1, sizeof *w);
        w->run = run_free;
        bk_worker_submit(wk, w, 0);
    }
    stop(wk);                         /* ASan: nothing leaked or used after free */
}
END_TEST

/* Found in review: A's done() submits B again and takes its time; the
 * thread runs B again before the loop reaches B's done(), which then
 * covers both runs (worker.h W3).  Every done() still runs: A once, B once or
 * twice, C once (the old finish lost C's). */
static bk_worker *resubmit_wk;
static item *resubmit_b;
static void done_resubmit(bk_work *w)
{
    done_item(w);
    bk_worker_submit(resubmit_wk, &resubmit_b->w, 0);
    usleep(50000);                    /* B runs and is posted meanwhile */
}

START_TEST(test_done_that_submits_again_loses_no_other_done)
{
    bk_worker *wk = resubmit_wk = start(1);
    item its[3];
    init_items(its, 3);
    its[0].w.done = done_resubmit;
    resubmit_b = &its[1];
    for (int i = 0; i < 3; i++)
        bk_worker_submit(wk, &its[i].w, 0);
    while (atomic_load(&its[2].runs) < 1)
        usleep(1000);
    usleep(5000);                     /* all three posted, the loop not turned */
    loop_until_finished(3);
    for (int i = 0; i < 20; i++) {    /* a second done() of B, if it comes */
        event_base_loop(base, EVLOOP_NONBLOCK);
        usleep(1000);
    }
    int per[3] = { 0 };
    for (int i = 0; i < nfinished; i++)
        per[finished[i]]++;
    ck_assert_int_eq(per[0], 1);
    ck_assert(per[1] == 1 || per[1] == 2);
    ck_assert_int_eq(atomic_load(&its[1].runs), 2);
    ck_assert_int_eq(per[2], 1);
    stop(wk);
}
END_TEST

/* An item posted and queued again (waiting for its done() and for its
 * next run) comes out of take_all once, and the rest of the queue too. */
START_TEST(test_take_all_returns_a_posted_and_queued_item_once)
{
    bk_worker *wk = start(1);
    item its[3];
    init_items(its, 3);
    bk_worker_submit(wk, &its[0].w, 0);
    while (atomic_load(&its[0].runs) < 1)
        usleep(1000);
    usleep(5000);                     /* item 0 posted */
    bk_worker_quit(wk, false);
    bk_worker_join(wk);
    bk_worker_submit(wk, &its[0].w, 0);   /* queued again, no thread to run it */
    bk_worker_submit(wk, &its[1].w, 0);
    bk_worker_submit(wk, &its[2].w, 0);
    int seen[3] = { 0 }, n = 0;
    for (bk_work *w = bk_worker_take_all(wk); w && n < 10; w = w->next, n++)
        seen[((item *)w)->id]++;
    ck_assert_int_eq(n, 3);
    ck_assert_int_eq(seen[0], 1);
    ck_assert_int_eq(seen[1], 1);
    ck_assert_int_eq(seen[2], 1);
    bk_worker_free(wk);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_one_thread_runs_and_finishes_in_submission_order,
        test_a_later_due_time_runs_after_work_due_now,
        test_submitting_a_queued_item_again_runs_it_once,
        test_two_runs_before_the_loop_turns_give_one_done,
        test_take_waits_out_a_running_match_and_returns_queued_and_finished,
        test_quit_with_drain_runs_delayed_work_at_once,
        test_quit_without_drain_leaves_queued_work_to_the_caller,
        test_work_without_done_belongs_to_run,
        test_done_that_submits_again_loses_no_other_done,
        test_take_all_returns_a_posted_and_queued_item_once,
    };
    return unit_run("d_worker", "worker", tests, sizeof tests / sizeof *tests, setup, teardown,
                    20);
}
