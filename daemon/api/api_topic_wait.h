/*
 * daemon/api/api_topic_wait.h — answering once every topic write of a request is in.
 *
 * The callers of the topic write halves (view.h) that answer for
 * several writes at once (CreateTopics, DeleteTopics, CreatePartitions,
 * AlterConfigs, IncrementalAlterConfigs) or for one write from another
 * thread (the SQL surface) wait through one bk_topic_wait:
 *
 *     w = api_topic_wait_new(r, timeout_ms, result, finish, ctx);
 *     for each entry i:
 *         rc = bk_topic_xxx(..., api_topic_wait_op(w, i), err, errlen);
 *         api_topic_wait_result(w, i, rc, err);
 *     return api_topic_wait_start(w);
 *
 * result(ctx, i, rc, err) records entry i's answer and finish(ctx) encodes
 * the whole response; both run exactly once per entry / per wait, now for
 * what is answered at once, later (on the loop) for pending writes.
 */
#ifndef SLUICE_TOPIC_WAIT_H
#define SLUICE_TOPIC_WAIT_H

#include "daemon/view/view.h"
#include "daemon/request.h"

typedef struct bk_topic_wait bk_topic_wait;
typedef void (*bk_topic_result_fn)(void *ctx, int32_t i, int rc, const char *err);

/* r: the request answered by finish (its cancel and expire are taken over
 * while waiting), or NULL for a caller that is not a request (finish then
 * does the answering).  timeout_ms goes to every op.  NULL: out of memory. */
bk_topic_wait *api_topic_wait_new(bk_req *r, int32_t timeout_ms, bk_topic_result_fn result,
                                 void (*finish)(void *ctx), void *ctx);
/* The op to hand to entry i's write half.  NULL when out of memory: the
 * write is then not waited for (view.h's op NULL). */
bk_topic_op *api_topic_wait_op(bk_topic_wait *w, int32_t i);
/* Entry i's answer as its write half (or a check before it) returned:
 * recorded now through result, unless the write went pending. */
void api_topic_wait_result(bk_topic_wait *w, int32_t i, int rc, const char *err);
/* After the last entry.  Nothing pending: finish runs now, w is freed and
 * BK_RESPOND returned.  Else BK_DEFER: the last done runs finish and
 * net_req_finish (when r); until then r->cancel and r->expire are w's. */
int  api_topic_wait_start(bk_topic_wait *w);
/* The waiting caller goes away (for r, r->cancel does this): answers still
 * to come are dropped, and neither result nor finish runs again. */
void api_topic_wait_cancel(bk_topic_wait *w);

#endif
