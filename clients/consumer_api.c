/*
 * consumer_api.c — the consumer's public calls other than poll: lifecycle,
 * assign/subscribe, seek/position, commits, watermarks.
 *
 * Each call takes cl->lock, changes state that the I/O thread acts on
 * (consumer.c, group.c), and wakes it.  Calls that need an answer from a
 * broker (sync commit, committed, watermarks) become ops (client.c) that
 * the calling thread waits on.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_cons.h"

void sl_grp_init(sl_client *cl);

sl_consumer *sl_consumer_new(const sl_conf *conf, char *errbuf, size_t size)
{
    if (conf && conf->heartbeat_interval_ms >= conf->session_timeout_ms) {
        sl_errbuf(errbuf, size, "heartbeat.interval.ms (%d) must be lower than "
                  "session.timeout.ms (%d)", conf->heartbeat_interval_ms,
                  conf->session_timeout_ms);
        return NULL;
    }
    sl_client *cl = sl_client_new(conf, "consumer", errbuf, size);
    if (!cl)
        return NULL;
    sl_consumer *cons = calloc(1, sizeof *cons);
    sl_cons *c = calloc(1, sizeof *c);
    if (!cons || !c) {
        free(cons);
        free(c);
        sl_client_free(cl);
        sl_errbuf(errbuf, size, "out of memory");
        return NULL;
    }
    kp_rec_iter_init0(&c->it);
    cons->cl = cl;
    cons->c = c;
    cl->cons = c;
    cl->app_handle = cons;
    if (cl->conf.group_id)
        sl_grp_init(cl);
    if (sl_client_start(cl, errbuf, size) != 0) {
        sl_grp_free(cl);
        cl->cons = NULL;
        free(c);
        free(cons);
        sl_client_free(cl);
        return NULL;
    }
    return cons;
}

int sl_consumer_subscribe(sl_consumer *cons, const char *const *topics, int count)
{
    if (!cons || count < 0 || (count && !topics))
        return SL_E_INVALID_ARG;
    for (int i = 0; i < count; i++)
        if (!topics[i] || !*topics[i])
            return SL_E_INVALID_ARG;
    sl_client *cl = cons->cl;
    pthread_mutex_lock(&cl->lock);
    int rc;
    if (!cl->grp || cons->c->mode == SL_MODE_ASSIGN || cons->c->closed) {
        rc = SL_E_STATE;
    } else {
        rc = sl_grp_subscribe(cl, topics, count);
        if (rc == 0)
            cons->c->mode = count ? SL_MODE_SUBSCRIBE : SL_MODE_NONE;
    }
    pthread_mutex_unlock(&cl->lock);
    sl_wakeup(cl);
    return rc;
}

int sl_consumer_unsubscribe(sl_consumer *cons)
{
    return sl_consumer_subscribe(cons, NULL, 0);
}

int sl_consumer_assign(sl_consumer *cons, const sl_topic_partition *parts, int count)
{
    if (!cons || count < 0 || (count && !parts))
        return SL_E_INVALID_ARG;
    sl_tp *tps = calloc((size_t)count + 1, sizeof *tps);
    if (!tps)
        return SL_E_NOMEM;
    for (int i = 0; i < count; i++) {
        if (!parts[i].topic || parts[i].partition < 0 ||
            (parts[i].offset < 0 && parts[i].offset != SL_OFFSET_BEGINNING &&
             parts[i].offset != SL_OFFSET_END && parts[i].offset != SL_OFFSET_STORED)) {
            free(tps);
            return SL_E_INVALID_ARG;
        }
        tps[i] = (sl_tp){ (char *)parts[i].topic, parts[i].partition, parts[i].offset };
    }
    sl_client *cl = cons->cl;
    int rc = 0;
    pthread_mutex_lock(&cl->lock);
    if (cons->c->mode == SL_MODE_SUBSCRIBE || cons->c->closed) {
        rc = SL_E_STATE;
    } else {
        sl_cons_set_assignment(cl, tps, count, false);
        cons->c->mode = count ? SL_MODE_ASSIGN : SL_MODE_NONE;
    }
    pthread_mutex_unlock(&cl->lock);
    free(tps);
    return rc;
}

int sl_consumer_position(sl_consumer *cons, const char *topic, int32_t partition,
                         int64_t *offset)
{
    if (!cons || !topic || !offset)
        return SL_E_INVALID_ARG;
    pthread_mutex_lock(&cons->cl->lock);
    sl_cpart *cp = sl_cons_find(cons->c, topic, partition);
    int rc = cp && cp->assigned ? 0 : SL_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (cp && cp->assigned)
        *offset = cp->app_pos >= 0 ? cp->app_pos : SL_OFFSET_INVALID;
    pthread_mutex_unlock(&cons->cl->lock);
    return rc;
}

int sl_consumer_seek(sl_consumer *cons, const char *topic, int32_t partition,
                     int64_t offset)
{
    if (!cons || !topic || (offset < 0 && offset != SL_OFFSET_BEGINNING &&
                            offset != SL_OFFSET_END))
        return SL_E_INVALID_ARG;
    sl_client *cl = cons->cl;
    pthread_mutex_lock(&cl->lock);
    sl_cpart *cp = sl_cons_find(cons->c, topic, partition);
    int rc = cp && cp->assigned ? 0 : SL_ERR_UNKNOWN_TOPIC_OR_PARTITION;
    if (rc == 0)
        sl_cons_start_at(cl, cp, offset);
    pthread_mutex_unlock(&cl->lock);
    return rc;
}

int sl_consumer_assignment(sl_consumer *cons, sl_topic_partition **parts)
{
    if (!cons || !parts)
        return SL_E_INVALID_ARG;
    sl_cons *c = cons->c;
    pthread_mutex_lock(&cons->cl->lock);
    int n = 0;
    size_t names = 0;
    for (int i = 0; i < c->n_all; i++)
        if (c->all[i]->assigned) {
            n++;
            names += strlen(c->all[i]->topic) + 1;
        }
    sl_topic_partition *out = malloc(sizeof *out * (size_t)n + names + 1);
    if (!out) {
        pthread_mutex_unlock(&cons->cl->lock);
        return SL_E_NOMEM;
    }
    char *s = (char *)(out + n);
    int k = 0;
    for (int i = 0; i < c->n_all; i++) {
        sl_cpart *cp = c->all[i];
        if (!cp->assigned)
            continue;
        size_t len = strlen(cp->topic) + 1;
        memcpy(s, cp->topic, len);
        out[k++] = (sl_topic_partition){ s, cp->partition,
                                         cp->app_pos >= 0 ? cp->app_pos : SL_OFFSET_INVALID, 0 };
        s += len;
    }
    pthread_mutex_unlock(&cons->cl->lock);
    *parts = out;
    return n;
}

int sl_consumer_commit(sl_consumer *cons, sl_topic_partition *parts, int count, int async)
{
    if (!cons || count < 0 || (count && !parts))
        return SL_E_INVALID_ARG;
    sl_client *cl = cons->cl;
    if (!cl->grp)
        return SL_E_STATE;
    sl_tp *tps = NULL;
    int n = count;
    pthread_mutex_lock(&cl->lock);
    if (parts) {
        tps = calloc((size_t)count + 1, sizeof *tps);
        for (int i = 0; tps && i < count; i++)
            tps[i] = (sl_tp){ (char *)parts[i].topic, parts[i].partition, parts[i].offset };
    } else {
        n = sl_cons_snapshot_positions(cl, &tps);
        if (n < 0)
            tps = NULL;
    }
    int rc = tps ? sl_grp_commit(cl, tps, n, !async, parts, NULL, 0) : SL_E_NOMEM;
    pthread_mutex_unlock(&cl->lock);
    free(tps);
    return rc;
}

int sl_consumer_committed(sl_consumer *cons, sl_topic_partition *parts, int count,
                          int timeout_ms)
{
    if (!cons || count <= 0 || !parts)
        return SL_E_INVALID_ARG;
    sl_client *cl = cons->cl;
    if (!cl->grp)
        return SL_E_STATE;
    sl_tp *tps = calloc((size_t)count, sizeof *tps);
    if (!tps)
        return SL_E_NOMEM;
    for (int i = 0; i < count; i++)
        tps[i] = (sl_tp){ (char *)parts[i].topic, parts[i].partition, SL_OFFSET_INVALID };
    pthread_mutex_lock(&cl->lock);
    int rc = sl_grp_fetch_offsets(cl, tps, count, timeout_ms, NULL, 0);
    pthread_mutex_unlock(&cl->lock);
    for (int i = 0; i < count; i++) {
        parts[i].offset = tps[i].offset;
        parts[i].err = rc;
    }
    free(tps);
    return rc;
}

/* ---- watermarks: two ListOffsets to the leader --------------------------- */

typedef struct wm_op {
    sl_op op;
    char *topic;
    int32_t partition;
    int64_t lo, hi;
    int64_t ts[2];            /* ListOffsets timestamps asked */
    int want, answers;
} wm_op;

static void wm_free(sl_op *op)
{
    wm_op *w = (wm_op *)op;
    free(w->topic);
    free(w);
}

static void wm_handle(sl_client *cl, sl_broker *b, int err, sl_frame *f, kp_rd *r,
                      int16_t ver, void *ctx)
{
    (void)b; (void)f;
    wm_op *w = ctx;
    int16_t ec = 0;
    int64_t off = -1;
    if (!err)
        err = sl_list_offsets_read(cl, r, ver, &ec, &off);
    if (!w->op.err && (err || ec))
        w->op.err = err ? err : ec;
    /* Answers come in request order: earliest, then latest.  The op is
     * finished (and maybe freed) only after both, so neither callback can
     * touch a freed op. */
    if (++w->answers < w->want) {
        w->lo = off;
        return;
    }
    if (w->want == 1)
        w->lo = off;
    w->hi = off;
    int e = w->op.err;
    sl_op_finish(cl, &w->op, e, e ? "ListOffsets %s [%d]: %s" : NULL, w->topic,
                 w->partition, sl_err_name(e));
}

static void wm_send(sl_client *cl, sl_broker *b, wm_op *w, int16_t v, int64_t ts)
{
    sl_list_offsets_send(cl, b, v, w->topic, w->partition, ts, wm_handle, w);
}

static int wm_step(sl_client *cl, sl_op *op, int64_t now)
{
    (void)now;
    wm_op *w = (wm_op *)op;
    sl_mtopic *t = sl_md_topic(cl, w->topic, true);
    if (t && t->known && t->npart <= w->partition) {
        sl_op_finish(cl, op, SL_ERR_UNKNOWN_TOPIC_OR_PARTITION, "%s [%d]: unknown",
                     w->topic, w->partition);
        return 1;
    }
    int32_t leader = sl_md_leader(cl, w->topic, w->partition);
    if (leader < 0) {
        sl_md_want(cl, w->topic);
        return 0;
    }
    sl_broker *b = sl_broker_ready(cl, leader);
    if (!b)
        return 0;
    int16_t v = sl_api_version(b, KP_API_LIST_OFFSETS, 1, 2);
    if (v < 0) {
        sl_op_finish(cl, op, SL_E_UNSUPPORTED, "broker lacks ListOffsets v1-2");
        return 1;
    }
    /* The op may be abandoned (freed) only after both answers: keep it
     * alive by never finishing before the second one. */
    for (int i = 0; i < w->want; i++)
        wm_send(cl, b, w, v, w->ts[i]);
    return 1;
}

static int list_offsets(sl_consumer *cons, const char *topic, int32_t partition,
                        const int64_t *ts, int want, int64_t *lo_out, int64_t *hi_out,
                        int timeout_ms)
{
    if (!cons || !topic || partition < 0)
        return SL_E_INVALID_ARG;
    wm_op *w = calloc(1, sizeof *w);
    if (!w || !(w->topic = strdup(topic))) {
        free(w);
        return SL_E_NOMEM;
    }
    w->partition = partition;
    w->want = want;
    memcpy(w->ts, ts, sizeof *ts * (size_t)want);
    w->op.step = wm_step;
    w->op.free_fn = wm_free;
    w->op.deadline = sl_now_ms() + (timeout_ms < 0 ? 3600000 : timeout_ms);
    sl_client *cl = cons->cl;
    pthread_mutex_lock(&cl->lock);
    sl_op_submit(cl, &w->op);
    int64_t lo = 0, hi = 0;
    /* Read results before sl_op_wait frees the op. */
    int64_t deadline = sl_deadline(timeout_ms);
    while (!w->op.done)
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT && !w->op.done)
            break;
    if (w->op.done) {
        lo = w->lo;
        hi = w->hi;
    }
    int rc = sl_op_wait(cl, &w->op, 0, NULL, 0);
    pthread_mutex_unlock(&cl->lock);
    if (rc == 0) {
        if (lo_out)
            *lo_out = lo;
        if (hi_out)
            *hi_out = hi;
    }
    return rc;
}

int sl_consumer_watermarks(sl_consumer *cons, const char *topic, int32_t partition,
                           int64_t *low, int64_t *high, int timeout_ms)
{
    int64_t ts[2] = { -2, -1 };
    return list_offsets(cons, topic, partition, ts, 2, low, high, timeout_ms);
}

int sl_consumer_offset_for_time(sl_consumer *cons, const char *topic, int32_t partition,
                                int64_t timestamp_ms, int64_t *offset, int timeout_ms)
{
    if (timestamp_ms < 0)
        return SL_E_INVALID_ARG;
    return list_offsets(cons, topic, partition, &timestamp_ms, 1, offset, NULL, timeout_ms);
}

int sl_consumer_partition_count(sl_consumer *cons, const char *topic, int timeout_ms)
{
    if (!cons || !topic)
        return SL_E_INVALID_ARG;
    sl_mtopic *t;
    pthread_mutex_lock(&cons->cl->lock);
    int rc = sl_md_wait_topic(cons->cl, topic, sl_deadline(timeout_ms), &t);
    if (rc == 0)
        rc = t->npart;
    pthread_mutex_unlock(&cons->cl->lock);
    return rc;
}

/* ---- close ------------------------------------------------------------------ */

int sl_consumer_close_within(sl_consumer *cons, int timeout_ms)
{
    if (!cons || timeout_ms < 0)
        return SL_E_INVALID_ARG;
    sl_client *cl = cons->cl;
    int rc = 0;
    pthread_mutex_lock(&cl->lock);
    if (!cons->c->closed) {
        if (cl->grp)
            rc = sl_grp_close(cl, timeout_ms);
        sl_cons_set_assignment(cl, NULL, 0, false);
        cons->c->closed = true;
        pthread_cond_broadcast(&cl->cond);
    }
    pthread_mutex_unlock(&cl->lock);
    return rc;
}

int sl_consumer_close(sl_consumer *cons)
{
    return sl_consumer_close_within(cons, INT_MAX);
}

void sl_consumer_destroy(sl_consumer *cons)
{
    if (!cons)
        return;
    sl_consumer_close(cons);
    sl_client *cl = cons->cl;
    sl_cons *c = cons->c;
    sl_client_stop(cl);
    pthread_mutex_lock(&cl->lock);
    if (c->cur)
        sl_chunk_free(c->cur);
    while (c->q_head) {
        sl_chunk *ch = c->q_head;
        c->q_head = ch->next;
        sl_chunk_free(ch);
    }
    pthread_mutex_unlock(&cl->lock);
    kp_rec_iter_free(&c->it);
    for (int i = 0; i < c->n_all; i++) {
        free(c->all[i]->topic);
        free(c->all[i]);
    }
    free(c->all);
    for (int i = 0; i < c->hdr_cap; i++)
        free(c->hkeys[i]);
    free(c->hkeys);
    free(c->hdrs);
    sl_grp_free(cl);
    cl->cons = NULL;
    free(c);
    sl_client_free(cl);
    free(cons);
}
