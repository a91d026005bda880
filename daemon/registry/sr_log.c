/*
 * daemon/registry/sr_log.c — where the registry's state lives: the
 * compacted topic _schemas, one partition, in Confluent's record format
 * (sr_state.c draws it), as Confluent's KafkaStore keeps it.
 *
 * Design note.
 *
 * The topic is created by the first write (cleanup.policy=compact, one
 * partition, replication factor 3 capped at the live brokers, as
 * Confluent's kafkastore.topic.replication.factor; standalone 1).
 *
 * Every broker with a replica of _schemas-0, leader or follower, applies
 * its records in log order up to the high watermark it knows (sr_log_tail:
 * on start from the log start, then every SR_TAIL_MS and when a write is
 * covered), so a restart keeps every subject, version, id, setting and
 * deletion, a follower serves what its leader wrote, and a broker that
 * joins late catches up through ordinary replication.  A broker without a
 * replica (a cluster larger than the replication factor) reads the same
 * records from the leader as a consumer would (sr_follow.c) and applies
 * them with the same sr_log_apply.
 *
 * A write (a registration, a deletion, a setting) is the records it
 * needs, appended in one batch to _schemas-0 while this broker leads it
 * (the one writer: ids are allocated there), then held until the
 * partition's high watermark covers them — what an acks=all produce waits
 * for (standalone: the log end, on the next loop turn), through the same
 * replica_deferred.h wait as the transaction coordinator's writes
 * (txn_log.c) — then applied by the tail and answered.
 *
 *     IDLE ── sr_log_write: appended ──► WAITING ── HW covers it ──► tail,
 *       ▲                                   │                    done(200)
 *       │                                   ├─ leadership moved, deadline,
 *       └───────────────────────────────────┘  append failed: done(500)
 *
 * Invariants (cite as "sr_log.c R1"):
 *   R1. One write is in flight at a time (r->writing); requests that write
 *       queue behind it (sr_http.c), so an id handed out and the versions
 *       a write computed are never raced by another write.
 *   R2. Memory changes only by records the log holds up to the high
 *       watermark, applied once each in log order (r->applied is the next
 *       offset to apply): a write's records are applied after they are
 *       covered, never before; a write whose records are never covered is
 *       never applied.
 *   R3. A write starts only when everything the log holds is applied
 *       (applied == log end) and nothing was applied since its handler
 *       chose its id and version (else it is refused, retriably: that
 *       choice may be taken): ids and versions are decided on the whole of
 *       the log, also by a new leader that inherited records.  Handlers
 *       apply the log before deciding (sr_api.c must_wait), so a refusal
 *       is rare.
 */
#include "daemon/registry/sr_int.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_deferred.h"
#include "daemon/view/view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define SR_WRITE_TIMEOUT_MS 10000     /* Confluent's kafkastore.timeout.ms is 500; ours
                                         waits for acks=all as a produce would */

struct sr_wr {
    sr_registry *r;
    sr_rec *recs;
    size_t n;
    int64_t end;
    int32_t epoch;
    int status, code;                 /* status != 0: failed before the wait */
    char msg[400];
    sr_write_done done;
    void *arg;
    bk_deferred wait;
    bk_waiter bw;
};

static const kp_str sr_topic = { SR_TOPIC, (int32_t)sizeof SR_TOPIC - 1 };

/* ---- applying: the tail of the local replica ------------------------------------- */

int sr_log_apply(sr_registry *r, const kp_record *rec)
{
    if (rec->Offset < r->applied)
        return 0;                     /* R2: once each */
    r->applied = rec->Offset + 1;
    if (rec->Key.len <= 0)
        return 0;
    return sr_state_apply(r, rec->Key.p, (size_t)rec->Key.len, rec->Value.p,
                          rec->Value.len) != 0 ? -1 : 1;
}

int sr_log_tail(sr_registry *r)
{
    const bk_pview *v = view_partition(r->b, sr_topic, 0);
    bk_partition *p = v ? v->local : NULL;
    if (!p || !p->log)
        return sr_follow(r);          /* no replica here: read it from the leader */
    int64_t from = r->applied > seg_log_start(p->log) ? r->applied : seg_log_start(p->log);
    int64_t to = p->high_watermark;
    if (from >= to)
        return 0;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s-0", r->b->data_dir, SR_TOPIC);
    seg_cursor_opts o = { .dir = dir, .from = from, .to = to, .min_ts = INT64_MIN };
    /* where `from` is, from the in-memory index: the .index file lags the
     * active segment, and the cursor would walk every batch header since
     * its last entry (per write, O(the registry's size)) */
    if (seg_locate(p->log, from, &o.hint_base, &o.hint_pos, &o.hint_ino) != 0)
        o.hint_pos = 0;
    seg_cursor *c = NULL;
    if (seg_cursor_open(&o, &c) != 0) {
        BK_ERROR("schema registry: cannot read %s-0", SR_TOPIC);
        return -1;
    }
    bool all = r->applied == 0;       /* the first load */
    kp_record rec;
    int rc;
    int64_t t0 = bk_mono_us(), n = 0;
    while ((rc = seg_cursor_next(c, &rec)) == 1) {
        if ((rc = sr_log_apply(r, &rec)) < 0)
            break;
        n += rc;
    }
    seg_cursor_close(c);
    if (rc == 0)
        r->applied = to;              /* compaction may have left a gap at the end */
    r->records_loaded += n;
    sr_mirror_flush(r);               /* sr_mirror.c X1: in log order, off the loop */
    if (rc < 0) {
        BK_ERROR("schema registry: applying %s-0 failed (%d)", SR_TOPIC, rc);
        return -1;
    }
    if (all)
        BK_INFO("schema registry: loaded %lld records of %s-0 in %.1f ms: %zu subjects, "
                "%zu schemas", (long long)n, SR_TOPIC, (bk_mono_us() - t0) / 1000.0,
                r->nsubjects, r->nschemas);
    return 0;
}

/* ---- writing -------------------------------------------------------------------------- */

static void recs_free(sr_rec *recs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(recs[i].key);
        free(recs[i].val);
    }
    free(recs);
}

static void wr_finish(sr_wr *w, int status, int code, const char *msg)
{
    sr_registry *r = w->r;
    replica_deferred_free(&w->wait);
    if (status == 200 && sr_log_tail(r) != 0) {  /* R2: covered, now applied */
        status = 500;
        code = 50001;
        msg = "Error while applying the records of _schemas (see the broker's log)";
    }
    recs_free(w->recs, w->n);
    r->writing = NULL;
    sr_write_done done = w->done;
    void *arg = w->arg;
    char m[256];
    snprintf(m, sizeof m, "%s", msg ? msg : "");
    free(w);
    sr_mirror_answer(r, done, arg, status, code, m);   /* sr_mirror.c X2 */
}

static void wr_step(sr_wr *w, bool deadline)
{
    bk_partition *p;
    if (w->status) {
        wr_finish(w, w->status, w->code, w->msg);
        return;
    }
    if (view_leader_replica(w->r->b, sr_topic, 0, &p) != KP_NONE || p->leader_epoch != w->epoch)
        wr_finish(w, 500, 50003, "Error while forwarding the request: _schemas moved to "
                  "another leader; retry");
    else if (p->high_watermark >= w->end)
        wr_finish(w, 200, 0, NULL);
    else if (deadline)
        wr_finish(w, 500, 50002, "Write to the Kafka store timed out while waiting for "
                  "the records to be replicated");
    else
        replica_deferred_watch(&w->wait, p, &w->bw, false);
}

static void wr_wake(void *arg)
{
    wr_step(arg, false);
}

static void wr_timeout(void *arg)
{
    wr_step(arg, true);
}

/* _schemas, made when missing.  KP_NONE when it exists now. */
static int topic_ensure(bk_broker *b, char *err, size_t errlen)
{
    if (view_topic_find(b, SR_TOPIC, (size_t)sr_topic.len))
        return KP_NONE;
    int32_t live[8];
    int n = bk_cluster_mode(b) ? view_live_brokers(b, live, 8) : 1;
    int16_t rf = (int16_t)(n < 3 ? (n > 0 ? n : 1) : 3);
    md_kv kv[] = { { (char *)"cleanup.policy", (char *)"compact" } };
    int rc = view_topic_create(b, SR_TOPIC, 1, rf, NULL, kv, 1, false, NULL, err, errlen);
    if (rc == KP_NONE)
        BK_INFO("schema registry: created %s (compacted, replication factor %d)", SR_TOPIC,
                rf);
    if (rc == KP_TOPIC_ALREADY_EXISTS)
        rc = KP_NONE;
    if (rc == KP_NONE && !view_topic_find(b, SR_TOPIC, (size_t)sr_topic.len)) {
        snprintf(err, errlen, "%s is being created; retry", SR_TOPIC);
        rc = KP_LEADER_NOT_AVAILABLE;             /* cluster mode: the controller's turn */
    }
    return rc;
}

/* Appends w's records; KP_NONE with w->end and w->epoch set. */
static int wr_append(sr_wr *w, char *err, size_t errlen)
{
    bk_broker *b = w->r->b;
    bk_partition *p;
    int rc = topic_ensure(b, err, errlen);
    if (rc != KP_NONE)
        return rc;
    if (view_leader_replica(b, sr_topic, 0, &p) != KP_NONE || !p->log) {
        const bk_pview *v = view_partition(b, sr_topic, 0);
        snprintf(err, errlen, "broker %d does not lead %s-0 (%s%d does, and writes): "
                 "send writes to its registry", b->cfg->broker_id,
                 SR_TOPIC, v && v->leader >= 0 ? "broker " : "no broker: ",
                 v ? v->leader : -1);
        return KP_NOT_LEADER_OR_FOLLOWER;
    }
    int64_t decided_at = w->r->applied;
    if (sr_log_tail(w->r) != 0 || w->r->applied < seg_log_end(p->log)) {     /* R3 */
        snprintf(err, errlen, "%s-0 is being applied (%lld of %lld); retry", SR_TOPIC,
                 (long long)w->r->applied, (long long)seg_log_end(p->log));
        return KP_LEADER_NOT_AVAILABLE;
    }
    if (w->r->applied != decided_at) {                                       /* R3 */
        snprintf(err, errlen, "%s-0 changed while this write was decided (ids and versions "
                 "may be taken); retry", SR_TOPIC);
        return KP_LEADER_NOT_AVAILABLE;
    }
    if (bk_cluster_mode(b) && repl_isr_size(p) < p->topic->cfg.min_insync_replicas) {
        snprintf(err, errlen, "%s-0 has fewer in-sync replicas than min.insync.replicas",
                 SR_TOPIC);
        return KP_NOT_ENOUGH_REPLICAS;
    }
    int64_t now = bk_now_ms(), base;
    kp_buf batch;
    kp_buf_init(&batch);
    kp_batch_builder bb;
    kp_bb_init(&bb, &batch, KP_CODEC_NONE);
    for (size_t i = 0; i < w->n; i++)
        kp_bb_add(&bb, now, w->recs[i].key, (int32_t)strlen(w->recs[i].key), w->recs[i].val,
                  w->recs[i].val ? (int32_t)strlen(w->recs[i].val) : -1, NULL, 0);
    rc = SEG_E_NOMEM;
    if (kp_bb_finish(&bb) >= 0 && !batch.err) {
        kp_batch_set_leader_epoch(batch.data, p->leader_epoch);
        rc = seg_append(p->log, batch.data, batch.len, now, &base);
    } else {
        kp_bb_free(&bb);
    }
    size_t len = batch.len;
    kp_buf_free(&batch);
    if (rc != 0) {
        snprintf(err, errlen, "appending to %s-0 failed (%d)", SR_TOPIC, rc);
        return KP_KAFKA_STORAGE_ERROR;
    }
    p->bytes_in += (int64_t)len;
    replica_partition_appended(b, p, (int64_t)w->n);
    w->end = seg_log_end(p->log);
    w->epoch = p->leader_epoch;
    return KP_NONE;
}

void sr_log_write(sr_registry *r, sr_rec *recs, size_t n, sr_write_done done, void *arg)
{
    sr_wr *w = calloc(1, sizeof *w);
    if (!w) {
        recs_free(recs, n);
        done(r, arg, 500, 50001, "Error in the backend data store: out of memory");
        return;
    }
    *w = (sr_wr){ .r = r, .recs = recs, .n = n, .done = done, .arg = arg };
    r->writing = w;
    for (size_t i = 0; i < n; i++)
        if (!recs[i].key) {
            w->status = 500;
            w->code = 50001;
            snprintf(w->msg, sizeof w->msg, "Error in the backend data store: out of memory");
        }
    char err[200];
    int rc = w->status ? KP_NONE : wr_append(w, err, sizeof err);
    if (rc != KP_NONE) {
        BK_WARN("schema registry: a write failed: %s", err);
        w->status = 500;
        w->code = rc == KP_NOT_LEADER_OR_FOLLOWER ? 50003 : rc == KP_LEADER_NOT_AVAILABLE
                  ? 50002 : 50001;
        snprintf(w->msg, sizeof w->msg, "%s: %s", w->code == 50003 ? "Error while "
                 "forwarding the request to the leader" : "Error in the backend data store",
                 err);
    }
    replica_deferred_init(&w->wait, wr_wake, wr_timeout, w);
    if (replica_deferred_arm(&w->wait, r->b->base, SR_WRITE_TIMEOUT_MS) != 0)
        abort();                      /* two small events: as event_base_once */
    replica_deferred_wake(&w->wait);  /* the first check on the next turn */
}

void sr_log_stop(sr_registry *r)
{
    if (r->writing)                   /* shutdown: its request's connection is gone */
        wr_finish(r->writing, 500, 50002, "shutting down");
}
