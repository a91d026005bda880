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

typedef struct commit_op {
    sl_op op;
    sl_tp *tps;
    int n;
    int *errs;
    bool async, report, fetch, sent;
} commit_op;

static void commit_free(sl_op *op)
{
    commit_op *c = (commit_op *)op;
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
    if (!err) {
        if (ver >= 3)
            (void)kp_rd_i32(r);
        int32_t nt = kp_rd_array(r, 6);
        for (int32_t i = 0; i < nt && kp_rd_ok(r); i++) {
            kp_str t = kp_rd_string(r);
            int32_t np = kp_rd_array(r, 6);
            for (int32_t j = 0; j < np && kp_rd_ok(r); j++) {
                int32_t p = kp_rd_i32(r);
                int16_t ec = kp_rd_i16(r);
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
        if (!kp_rd_ok(r))
            err = SL_E_BAD_MSG;
    }
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
    if (ver >= 3)
        (void)kp_rd_i32(r);                               /* ThrottleTimeMs */
    int32_t nt = kp_rd_array(r, 6);
    for (int32_t i = 0; i < nt && kp_rd_ok(r); i++) {
        kp_str t = kp_rd_string(r);
        int32_t np = kp_rd_array(r, 16);
        for (int32_t j = 0; j < np && kp_rd_ok(r); j++) {
            int32_t p = kp_rd_i32(r);
            int64_t off = kp_rd_i64(r);
            if (ver >= 5)
                (void)kp_rd_i32(r);                       /* CommittedLeaderEpoch */
            (void)kp_rd_string(r);                        /* Metadata */
            int16_t ec = kp_rd_i16(r);
            if (kp_rd_ok(r))
                each(ctx, t, p, off, ec);
        }
    }
    int e = ver >= 2 && kp_rd_ok(r) ? kp_rd_i16(r) : 0;
    return kp_rd_ok(r) ? e : SL_E_BAD_MSG;
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

/* Writes [Topic, [Partition...]] groups for tps (fetch) or with offsets
 * (commit). */
static void write_topics(kp_buf *w, const sl_tp *tps, int n, int16_t v, bool commit)
{
    size_t cnt = kp_wr_i32_placeholder(w);
    int32_t ntop = 0;
    for (int j = 0; j < n; j++) {
        bool first = true;
        for (int k = 0; k < j && first; k++)
            first = strcmp(tps[k].topic, tps[j].topic) != 0;
        if (!first)
            continue;
        ntop++;
        kp_wr_string(w, tps[j].topic, -1);
        int32_t np = 0;
        for (int k = j; k < n; k++)
            np += strcmp(tps[k].topic, tps[j].topic) == 0;
        kp_wr_array(w, np);
        for (int k = j; k < n; k++) {
            if (strcmp(tps[k].topic, tps[j].topic) != 0)
                continue;
            kp_wr_i32(w, tps[k].partition);
            if (commit) {
                kp_wr_i64(w, tps[k].offset);
                if (v >= 6)
                    kp_wr_i32(w, -1);                     /* CommittedLeaderEpoch */
                kp_wr_string(w, "", 0);                   /* CommittedMetadata */
            }
        }
    }
    kp_wr_i32_at(w, cnt, ntop);
}

static int commit_step(sl_client *cl, sl_op *op, int64_t now)
{
    commit_op *c = (commit_op *)op;
    sl_grp *g = cl->grp;
    sl_broker *b = sl_grp_coord_ready(cl, now);
    if (!b)
        return 0;
    if (c->fetch) {
        int16_t v;
        kp_buf *w = sl_grp_op_req(cl, op, b, KP_API_OFFSET_FETCH, 1, 5, &v);
        if (!w)
            return 1;
        write_topics(w, c->tps, c->n, v, false);
        sl_req_end(cl, b, handle_offset_fetch, c);
        return 1;
    }
    int16_t v;
    kp_buf *w = sl_grp_op_req(cl, op, b, KP_API_OFFSET_COMMIT, 2, 7, &v);
    if (!w)
        return 1;
    bool member = g->state == G_STABLE || g->state == G_REVOKE_WAIT;
    kp_wr_i32(w, member ? g->generation : -1);
    kp_wr_string(w, member && g->member_id ? g->member_id : "", -1);
    if (v >= 7)
        kp_wr_string(w, NULL, -1);                        /* GroupInstanceId */
    if (v <= 4)
        kp_wr_i64(w, -1);                                 /* RetentionTimeMs */
    write_topics(w, c->tps, c->n, v, true);
    sl_req_end(cl, b, handle_offset_commit, c);
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
