/*
 * test_d_topic_wait — a request's topic writes answered once the last is
 * in (daemon/api/api_topic_wait.c).  The test plays the store of cluster mode as
 * cluster.h describes it: a write half that cannot finish sets
 * op->pending and calls op->done later, exactly once.  Standalone never
 * does, so this is where the waiting path runs.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "daemon/api/api_topic_wait.h"
#include "tests/unit/unit_run.h"

#define N 4

typedef struct answers {
    int rc[N];
    char err[N][64];
    int results;                      /* result calls */
    int finishes;
    int results_at_finish;
    bk_topic_op *ops[N];              /* the pending entries' ops */
} answers;

static void record(void *ctx, int32_t i, int rc, const char *err)
{
    answers *a = ctx;
    ck_assert_int_ge(i, 0);
    ck_assert_int_lt(i, N);
    a->rc[i] = rc;
    snprintf(a->err[i], sizeof a->err[i], "%s", err);
    a->results++;
}

static void finish(void *ctx)
{
    answers *a = ctx;
    a->finishes++;
    a->results_at_finish = a->results;
}

/* Issues N writes through a wait for r: entries whose bit is set in
 * pending_mask go pending (a->ops[i] keeps their op); the others answer at
 * once with rc 100 + i.  Checks api_topic_wait_start says expect. */
static void issue(answers *a, bk_req *r, unsigned pending_mask, int expect)
{
    memset(a, 0, sizeof *a);
    bk_topic_wait *w = api_topic_wait_new(r, 1500, record, finish, a);
    ck_assert_ptr_nonnull(w);
    for (int32_t i = 0; i < N; i++) {
        bk_topic_op *op = api_topic_wait_op(w, i);
        ck_assert_ptr_nonnull(op);
        ck_assert(!op->pending);
        ck_assert_int_eq(op->timeout_ms, 1500);
        int rc = 100 + i;
        if (pending_mask & (1u << i)) {
            op->pending = true;       /* the store answers later */
            a->ops[i] = op;
            rc = 0;                   /* not the answer: done brings it */
        }
        api_topic_wait_result(w, i, rc, "now");
    }
    ck_assert_int_eq(api_topic_wait_start(w), expect);
    if (r && expect == BK_DEFER)
        ck_assert_ptr_eq(r->state, w);
}

START_TEST(test_answers_at_once_when_no_write_is_pending)
{
    answers a;
    issue(&a, NULL, 0, BK_RESPOND);
    ck_assert_int_eq(a.finishes, 1);
    ck_assert_int_eq(a.results_at_finish, N);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(a.rc[i], 100 + i);
}
END_TEST

START_TEST(test_answers_in_request_order_once_the_last_pending_write_is_done)
{
    answers a;
    bk_topic_op **ops = a.ops;
    issue(&a, NULL, 1u << 1 | 1u << 3, BK_DEFER);
    ck_assert_int_eq(a.results, 2);                 /* entries 0 and 2 */
    ck_assert_int_eq(a.finishes, 0);
    ops[3]->done(ops[3], 7, "third");               /* out of order */
    ck_assert_int_eq(a.finishes, 0);
    ops[1]->done(ops[1], KP_NONE, NULL);
    ck_assert_int_eq(a.finishes, 1);
    ck_assert_int_eq(a.results_at_finish, N);
    ck_assert_int_eq(a.rc[0], 100);
    ck_assert_int_eq(a.rc[1], KP_NONE);
    ck_assert_str_eq(a.err[1], "");
    ck_assert_int_eq(a.rc[2], 102);
    ck_assert_int_eq(a.rc[3], 7);
    ck_assert_str_eq(a.err[3], "third");
}
END_TEST

/* The client's connection closes while two writes are pending: the
 * server calls r->cancel, then frees the request.  The late answers must
 * reach neither the request nor its response (run under SANITIZE=1 the
 * wait must also be freed by the last of them). */
START_TEST(test_answers_after_the_client_left_touch_nothing_of_it)
{
    answers a;
    bk_topic_op **ops = a.ops;
    bk_req r;
    memset(&r, 0, sizeof r);
    issue(&a, &r, 1u << 0 | 1u << 2, BK_DEFER);
    ck_assert_ptr_nonnull(r.cancel);
    ck_assert_ptr_nonnull(r.expire);
    r.cancel(&r);
    ck_assert_ptr_null(r.state);
    ck_assert_ptr_null(r.cancel);
    ck_assert_ptr_null(r.expire);
    int before = a.results;
    ops[2]->done(ops[2], 5, "late");
    ops[0]->done(ops[0], 5, "later");
    ck_assert_int_eq(a.results, before);
    ck_assert_int_eq(a.finishes, 0);
}
END_TEST

/* A store that answers twice breaks cluster.h's word; the wait counts
 * each op once, so the second answer cannot finish the request early. */
START_TEST(test_a_second_answer_for_one_write_is_ignored)
{
    answers a;
    bk_topic_op **ops = a.ops;
    issue(&a, NULL, 1u << 0 | 1u << 1, BK_DEFER);
    ops[0]->done(ops[0], 1, "once");
    ops[0]->done(ops[0], 2, "twice");
    ck_assert_int_eq(a.finishes, 0);
    ck_assert_int_eq(a.rc[0], 1);
    ops[1]->done(ops[1], 3, "");
    ck_assert_int_eq(a.finishes, 1);
}
END_TEST

int main(void)
{
    const TTest *const tests[] = {
        test_answers_at_once_when_no_write_is_pending,
        test_answers_in_request_order_once_the_last_pending_write_is_done,
        test_answers_after_the_client_left_touch_nothing_of_it,
        test_a_second_answer_for_one_write_is_ignored,
    };
    return unit_run("d_topic_wait", "wait", tests, sizeof tests / sizeof *tests, NULL, NULL, 0);
}
