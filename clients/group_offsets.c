/*
 * group_offsets.c — a group member's offsets: OffsetCommit (v2-7) and
 * OffsetFetch (v1-5) as ops (client.c), auto commit, and the background
 * fetch of committed offsets for partitions that start from them.
 *
 * Sync commits and committed() wait on their op; async commits report
 * through an event served by poll; auto commits report nowhere but the
 * log.  A commit or fetch that meets a coordinator error forgets the
 * coordinator and goes back on the op queue, so it is sent again to the
 * next one.
 *
 * Auto commit (enable.auto.commit) runs while the member is STABLE, before
 * a rejoin (REVOKE_WAIT, on the coordinator connection ahead of the
 * JoinGroup), on leave and close — and also with a manual assign() when
 * group.id is set, as librdkafka does.  Manual-assign consumers commit
 * with generation -1 and an empty member id, as Kafka's "simple"
 * consumers do.
 *
 * Invariant: a partition's cp->committed changes only on a successful
 * OffsetCommit or OffsetFetch answer, so auto commit sends exactly the
 * positions the broker does not have yet.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_grp.h"
#include "kp_msgs.h"

typedef struct commit_op {
    sl_op op;
    sl_tp *tps;
    int n;
    int *errs;
    bool async, report, fetch, sent;
    sl_client *cl;            /* async: its grp counts the commit out */
} commit_op;

static void commit_free(sl_op *op)
{
    commit_op *c = (commit_op *)op;
    if (c->async && c->cl && c->cl->grp && --c->cl->grp->commits_out == 0)
        pthread_cond_broadcast(&c->cl->cond);
    sl_grp_free_tps(c->tps, c->n);
    free(c->errs);
    free(c);
}

static void handle_offset_commit(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                                 kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    commit_op *c = ctx;
    int first = 0;
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_OffsetCommitResponse m;
    if (!err && kp_dec_OffsetCommitResponse(r, ver, &m, &ar) != 0)
        err = SL_E_BAD_MSG;
    if (!err) {
        for (int32_t i = 0; i < m.Topics_count; i++) {
            kp_str t = m.Topics[i].Name;
            for (int32_t j = 0; j < m.Topics[i].Partitions_count; j++) {
                int32_t p = m.Topics[i].Partitions[j].PartitionIndex;
                int16_t ec = m.Topics[i].Partitions[j].ErrorCode;
                for (int k = 0; k < c->n; k++)
                    if (c->tps[k].partition == p && kp_str_eq(t, c->tps[k].topic)) {
                        c->errs[k] = ec;
                        if (!ec && cl->cons)
                            sl_cons_set_committed(cl, c->tps[k].topic, p, c->tps[k].offset);
                    }
                if (ec && !first)
                    first = ec;
            }
        }
    }
    kp_arena_free(&ar);
    int e = err ? err : first;
    if (sl_grp_coord_error(e) && cl->grp) {
        sl_grp_coord_lost(cl);
        if (!c->op.abandoned || c->async) {
            c->sent = false;                              /* try again */
            sl_op_submit(cl, &c->op);
            return;
        }
    }
    if (e)
        sl_log(cl, e == SL_ERR_REBALANCE_IN_PROGRESS ? 6 : 4,
               "group %s: OffsetCommit: %s", cl->conf.group_id, sl_err_name(e));
    if (c->report) {
        sl_topic_partition *t = sl_grp_tps_export(c->tps, c->n);
        for (int k = 0; t && k < c->n; k++)
            t[k].err = c->errs[k] ? c->errs[k] : err;
        sl_grp_ev_push(cl, EV_COMMIT, e, t, c->n);
    }
    sl_op_finish(cl, &c->op, e, e ? "OffsetCommit: %s" : NULL, sl_err_name(e));
}

int sl_offset_fetch_read(kp_rd *r, int16_t ver, sl_offset_fetch_each *each, void *ctx)
{
    kp_arena ar;
    kp_arena_init(&ar, 0);
    kp_OffsetFetchResponse m;
    int rc = kp_dec_OffsetFetchResponse(r, ver, &m, &ar);
    for (int32_t i = 0; rc == 0 && i < m.Topics_count; i++) {
        const kp_OffsetFetchResponse_OffsetFetchResponseTopic *t = &m.Topics[i];
        for (int32_t j = 0; j < t->Partitions_count; j++)
            each(ctx, t->Name, t->Partitions[j].PartitionIndex,
                 t->Partitions[j].CommittedOffset, t->Partitions[j].ErrorCode);
    }
    kp_arena_free(&ar);
    return rc == 0 ? m.ErrorCode : SL_E_BAD_MSG;          /* ErrorCode: 0 before v2 */
}

static void fetched_one(void *ctx, kp_str t, int32_t p, int64_t off, int16_t ec)
{
    commit_op *c = ctx;
    for (int k = 0; k < c->n; k++)
        if (c->tps[k].partition == p && kp_str_eq(t, c->tps[k].topic)) {
            c->tps[k].offset = off >= 0 ? off : SL_OFFSET_INVALID;
            c->errs[k] = ec;
        }
}

static void handle_offset_fetch(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                                kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    commit_op *c = ctx;
    int e = err ? err : sl_offset_fetch_read(r, ver, fetched_one, c);
    if (sl_grp_coord_error(e) && cl->grp && !c->op.abandoned) {
        sl_grp_coord_lost(cl);
        c->sent = false;
        sl_op_submit(cl, &c->op);
        return;
    }
    sl_op_finish(cl, &c->op, e, e ? "OffsetFetch: %s" : NULL, sl_err_name(e));
}

/* The request's topics for tps, grouped by topic (tps need not be sorted),
 * with their partitions in tps order.  The arrays are malloc'd (free
 * *topics and *parts); names point into tps.  Fills fetch (OffsetFetch) or
 * commit (OffsetCommit: offsets, no metadata) entries.  0, or SL_E_NOMEM. */
typedef struct req_topics {
    kp_OffsetCommitRequest_OffsetCommitRequestTopic *ct;
    kp_OffsetCommitRequest_OffsetCommitRequestPartition *cp;
    kp_OffsetFetchRequest_OffsetFetchRequestTopic *ft;
    int32_t *fp;
    int32_t ntopics;
} req_topics;

static void req_topics_free(req_topics *q)
{
    free(q->ct);
    free(q->cp);
    free(q->ft);
    free(q->fp);
}

static int req_topics_build(req_topics *q, const sl_tp *tps, int n, bool commit)
{
    memset(q, 0, sizeof *q);
    size_t cap = (size_t)n + 1;
    if (commit) {
        q->ct = calloc(cap, sizeof *q->ct);
        q->cp = calloc(cap, sizeof *q->cp);
    } else {
        q->ft = calloc(cap, sizeof *q->ft);
        q->fp = calloc(cap, sizeof *q->fp);
    }
    if (commit ? !q->ct || !q->cp : !q->ft || !q->fp) {
        req_topics_free(q);
        return SL_E_NOMEM;
    }
    int32_t k = 0;
    for (int j = 0; j < n; j++) {
        bool first = true;
        for (int i = 0; i < j && first; i++)
            first = strcmp(tps[i].topic, tps[j].topic) != 0;
        if (!first)
            continue;
        int32_t start = k;
        for (int i = j; i < n; i++) {
            if (strcmp(tps[i].topic, tps[j].topic) != 0)
                continue;
            if (commit)
                q->cp[k] = (kp_OffsetCommitRequest_OffsetCommitRequestPartition){
                    .PartitionIndex = tps[i].partition, .CommittedOffset = tps[i].offset,
                    .CommittedLeaderEpoch = -1, .CommitTimestamp = -1,   /* v1 only */
                    .CommittedMetadata = kp_str_cstr(""),
                };
            else
                q->fp[k] = tps[i].partition;
            k++;
        }
        kp_str name = kp_str_cstr(tps[j].topic);
        if (commit)
            q->ct[q->ntopics++] = (kp_OffsetCommitRequest_OffsetCommitRequestTopic){
                .Name = name, .Partitions = q->cp + start, .Partitions_count = k - start,
            };
        else
            q->ft[q->ntopics++] = (kp_OffsetFetchRequest_OffsetFetchRequestTopic){
                .Name = name, .PartitionIndexes = q->fp + start,
                .PartitionIndexes_count = k - start,
            };
    }
    return 0;
}

static int commit_step(sl_client *cl, sl_op *op, int64_t now)
{
    commit_op *c = (commit_op *)op;
    sl_grp *g = cl->grp;
    sl_broker *b = sl_grp_coord_ready(cl, now);
    if (!b)
        return 0;
    req_topics rt;
    if (req_topics_build(&rt, c->tps, c->n, !c->fetch) != 0)
        return 0;                                         /* no memory: try again later */
    int16_t v;
    kp_buf *w = c->fetch ? sl_grp_op_req(cl, op, b, KP_API_OFFSET_FETCH, 1, 5, &v)
                         : sl_grp_op_req(cl, op, b, KP_API_OFFSET_COMMIT, 2, 7, &v);
    if (!w) {
        req_topics_free(&rt);
        return 1;
    }
    if (c->fetch) {
        kp_OffsetFetchRequest q;
        kp_init_OffsetFetchRequest(&q);
        q.GroupId = kp_str_cstr(cl->conf.group_id);
        q.Topics = rt.ft;
        q.Topics_count = rt.ntopics;
        kp_enc_OffsetFetchRequest(w, v, &q);
        sl_req_end(cl, b, handle_offset_fetch, c);
    } else {
        bool member = g->state == G_STABLE || g->state == G_REVOKE_WAIT;
        kp_OffsetCommitRequest q;
        kp_init_OffsetCommitRequest(&q);                  /* GroupInstanceId null,
                                                             RetentionTimeMs -1 */
        q.GroupId = kp_str_cstr(cl->conf.group_id);
        q.GenerationIdOrMemberEpoch = member ? g->generation : -1;
        q.MemberId = kp_str_cstr(member && g->member_id ? g->member_id : "");
        q.Topics = rt.ct;
        q.Topics_count = rt.ntopics;
        kp_enc_OffsetCommitRequest(w, v, &q);
        sl_req_end(cl, b, handle_offset_commit, c);
    }
    req_topics_free(&rt);
    return 1;
}

static commit_op *commit_op_new(sl_client *cl, const sl_tp *tps, int n, int timeout_ms)
{
    commit_op *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->tps = calloc((size_t)n + 1, sizeof *c->tps);
    c->errs = calloc((size_t)n + 1, sizeof *c->errs);
    if (!c->tps || !c->errs) {
        free(c->tps);
        free(c->errs);
        free(c);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        c->tps[i] = tps[i];
        c->tps[i].topic = strdup(tps[i].topic);
        c->n = i + 1;
        if (!c->tps[i].topic) {
            commit_free(&c->op);
            return NULL;
        }
    }
    c->n = n;
    c->op.step = commit_step;
    c->op.free_fn = commit_free;
    c->op.deadline = sl_now_ms() + (timeout_ms < 0 ? cl->conf.request_timeout_ms : timeout_ms);
    return c;
}

int sl_grp_commit(sl_client *cl, sl_tp *tps, int n, bool wait,
                  sl_topic_partition *results, char *errbuf, size_t size)
{
    if (!cl->grp)
        return SL_E_STATE;
    if (n == 0) {
        if (!wait && cl->conf.commit_cb)
            sl_grp_ev_push(cl, EV_COMMIT, 0, NULL, 0);
        return 0;
    }
    commit_op *c = commit_op_new(cl, tps, n, -1);
    if (!c)
        return SL_E_NOMEM;
    c->async = !wait;
    c->report = !wait && cl->conf.commit_cb && results != (sl_topic_partition *)-1;
    if (!wait) {
        c->op.detached = true;                            /* nobody waits */
        c->cl = cl;
        cl->grp->commits_out++;
        sl_op_submit(cl, &c->op);
        return 0;
    }
    /* Keep per-partition errors: copy them out before the op is freed. */
    sl_op_submit(cl, &c->op);
    int64_t deadline = sl_now_ms() + cl->conf.request_timeout_ms;
    while (!c->op.done)
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !c->op.done)
            break;
    if (c->op.done && results)
        for (int i = 0; i < n; i++)
            results[i].err = c->errs[i];
    return sl_op_wait(cl, &c->op, 0, errbuf, size);
}

int sl_grp_fetch_offsets(sl_client *cl, sl_tp *tps, int n, int timeout_ms,
                         char *errbuf, size_t size)
{
    commit_op *c = commit_op_new(cl, tps, n, timeout_ms);
    if (!c)
        return SL_E_NOMEM;
    c->fetch = true;
    sl_op_submit(cl, &c->op);
    int64_t deadline = sl_deadline(timeout_ms);
    while (!c->op.done)
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !c->op.done)
            break;
    if (c->op.done)
        for (int i = 0; i < n; i++)
            tps[i].offset = c->tps[i].offset;
    return sl_op_wait(cl, &c->op, 0, errbuf, size);
}

/* Waits (bounded by request.timeout.ms, and by timeout_ms) for the async
 * commits still out: a commit made right before a close must not be
 * dropped with the handle. */
void sl_grp_commits_drain(sl_client *cl, int timeout_ms)
{
    int64_t deadline = sl_now_ms() +
        (timeout_ms < cl->conf.request_timeout_ms ? timeout_ms : cl->conf.request_timeout_ms);
    while (cl->grp->commits_out > 0)
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT)
            break;
}

/* Positions that moved since the last commit, committed in the
 * background (auto commit).  Sent at once when the coordinator is ready,
 * so a commit made before a rejoin precedes the JoinGroup on the wire. */
void sl_grp_auto_commit(sl_client *cl, int64_t now)
{
    sl_tp *tps;
    int n = sl_cons_snapshot_positions(cl, &tps);
    if (n < 0)
        return;
    int k = 0;
    for (int i = 0; i < n; i++) {
        sl_cpart *cp = sl_cons_find(cl->cons, tps[i].topic, tps[i].partition);
        if (cp && cp->committed != tps[i].offset)
            tps[k++] = tps[i];
    }
    commit_op *c = k ? commit_op_new(cl, tps, k, -1) : NULL;
    free(tps);
    if (!c)
        return;
    c->async = true;
    c->op.detached = true;
    if (commit_step(cl, &c->op, now) == 0)
        sl_op_submit(cl, &c->op);
}

void sl_grp_autocommit_tick(sl_client *cl, int64_t now, int64_t *next)
{
    sl_grp *g = cl->grp;
    if (!cl->conf.enable_auto_commit)
        return;
    if (!g->next_autocommit)
        g->next_autocommit = now + cl->conf.auto_commit_interval_ms;
    if (now >= g->next_autocommit) {
        sl_grp_auto_commit(cl, now);
        g->next_autocommit = now + cl->conf.auto_commit_interval_ms;
    }
    if (g->next_autocommit < *next)
        *next = g->next_autocommit;
}

/* Commits every assigned partition's position and waits: auto commit's
 * last word before the assignment goes (lock held, dropped meanwhile). */
int sl_grp_commit_positions(sl_client *cl)
{
    sl_tp *tps;
    int rc = 0;
    int n = sl_cons_snapshot_positions(cl, &tps);
    if (n > 0)
        rc = sl_grp_commit(cl, tps, n, true, NULL, NULL, 0);
    if (n >= 0)
        free(tps);
    return rc;
}

/* Committed offsets for partitions that start from them: one background
 * OffsetFetch for all of them, collected by sl_grp_stored_tick when done. */
static void stored_done(sl_client *cl, commit_op *c)
{
    for (int i = 0; i < c->n; i++) {
        sl_cpart *cp = sl_cons_find(cl->cons, c->tps[i].topic, c->tps[i].partition);
        if (!cp || !cp->busy)
            continue;
        cp->busy = false;
        if (cp->state != CP_NEED_STORED || !cp->assigned)
            continue;
        if (c->op.err || c->errs[i]) {
            cp->backoff_until = sl_now_ms() + cl->conf.retry_backoff_ms;
            continue;
        }
        int64_t off = c->tps[i].offset;
        cp->committed = off;
        sl_cons_start_at(cl, cp, off >= 0 ? off : cl->conf.auto_offset_reset);
    }
}

static void fetch_stored(sl_client *cl, int64_t now)
{
    sl_grp *g = cl->grp;
    sl_cons *cs = cl->cons;
    if (g->stored || !cs)
        return;
    int n = 0;
    for (int i = 0; i < cs->n_all; i++) {
        sl_cpart *cp = cs->all[i];
        if (cp->assigned && cp->state == CP_NEED_STORED && !cp->busy &&
            cp->backoff_until <= now)
            n++;
    }
    if (!n)
        return;
    sl_tp *tps = calloc((size_t)n, sizeof *tps);
    if (!tps)
        return;
    int k = 0;
    for (int i = 0; i < cs->n_all && k < n; i++) {
        sl_cpart *cp = cs->all[i];
        if (cp->assigned && cp->state == CP_NEED_STORED && !cp->busy &&
            cp->backoff_until <= now) {
            tps[k++] = (sl_tp){ cp->topic, cp->partition, SL_OFFSET_INVALID };
            cp->busy = true;
        }
    }
    commit_op *c = commit_op_new(cl, tps, n, cl->conf.request_timeout_ms);
    free(tps);
    if (!c)
        return;
    c->fetch = true;
    g->stored = c;
    sl_op_submit(cl, &c->op);
}

void sl_grp_stored_tick(sl_client *cl, int64_t now)
{
    sl_grp *g = cl->grp;
    if (g->stored && g->stored->op.done) {
        stored_done(cl, g->stored);
        g->stored->op.free_fn(&g->stored->op);
        g->stored = NULL;
    }
    fetch_stored(cl, now);
}

void sl_grp_stored_free(sl_client *cl)
{
    sl_grp *g = cl->grp;
    if (g->stored)
        g->stored->op.free_fn(&g->stored->op);
    g->stored = NULL;
}
