/*
 * daemon/registry/sr_log.c — where the registry's state lives: the
 * compacted topic _schemas, one partition, in Confluent's record format
 * (sr_state.c draws it), as Confluent's KafkaStore keeps it.
 *
 * Design note.
 *
 * The topic is created by the first write (cleanup.policy=compact, one
 * partition, replication factor 3 capped at the live brokers, as
 * Confluent's kafkastore.topic.replication.factor; standalone 1).  On
 * start the broker reads partition 0 from its log start to its end and
 * applies every record in order (sr_state_apply): a restart keeps every
 * subject, version, id, setting and deletion.
 *
 * A write (a registration, a deletion, a setting) is the records it
 * needs, appended in one batch to _schemas-0 while this broker leads it,
 * then held until the partition's high watermark covers them — what an
 * acks=all produce waits for (standalone: the log end, on the next loop
 * turn), through the same replica_deferred.h wait as the transaction
 * coordinator's writes (txn_log.c) — then applied to memory and answered.
 *
 *     IDLE ── sr_log_write: appended ──► WAITING ── HW covers it ──► applied,
 *       ▲                                   │                    done(200)
 *       │                                   ├─ leadership moved, deadline,
 *       └───────────────────────────────────┘  append failed: done(500),
 *                                              nothing applied
 *
 * Invariants (cite as "sr_log.c R1"):
 *   R1. One write is in flight at a time (r->writing); requests that write
 *       queue behind it (sr_http.c), so an id handed out and the versions
 *       a write computed are never raced by another write.
 *   R2. Memory changes only by records the log holds up to the high
 *       watermark: a write's records are applied after they are covered,
 *       never before, and a failed write applies nothing (its id is burnt:
 *       sr_state.c M2).
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
    char msg[256];
    sr_write_done done;
    void *arg;
    bk_deferred wait;
    bk_waiter bw;
};

static const kp_str sr_topic = { SR_TOPIC, (int32_t)sizeof SR_TOPIC - 1 };

/* ---- loading ------------------------------------------------------------------------ */

int sr_log_load(sr_registry *r)
{
    bk_partition *p;
    if (!view_topic_find(r->b, SR_TOPIC, (size_t)sr_topic.len) ||
        view_leader_replica(r->b, sr_topic, 0, &p) != KP_NONE || !p->log)
        return 0;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s-0", r->b->data_dir, SR_TOPIC);
    seg_cursor_opts o = { .dir = dir, .from = seg_log_start(p->log),
                          .to = p->high_watermark, .min_ts = INT64_MIN };
    seg_cursor *c = NULL;
    if (o.from >= o.to)
        return 0;
    if (seg_cursor_open(&o, &c) != 0) {
        BK_ERROR("schema registry: cannot read %s-0", SR_TOPIC);
        return -1;
    }
    kp_record rec;
    int rc;
    int64_t t0 = bk_mono_us();
    while ((rc = seg_cursor_next(c, &rec)) == 1) {
        if (rec.Key.len <= 0)
            continue;
        if (sr_state_apply(r, rec.Key.p, (size_t)rec.Key.len, rec.Value.p,
                           rec.Value.len) != 0) {
            rc = -1;
            break;
        }
        r->records_loaded++;
    }
    seg_cursor_close(c);
    if (rc < 0) {
        BK_ERROR("schema registry: loading %s-0 failed (%d)", SR_TOPIC, rc);
        return -1;
    }
    sr_mirror(r, NULL, 0);
    BK_INFO("schema registry: loaded %lld records of %s-0 in %.1f ms: %zu subjects, "
            "%zu schemas", (long long)r->records_loaded, SR_TOPIC,
            (bk_mono_us() - t0) / 1000.0, r->nsubjects, r->nschemas);
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

/* The subjects the records name, rewritten in the SQL mirror. */
static void mirror_recs(sr_registry *r, const sr_rec *recs, size_t n)
{
    json_t **keys = calloc(n ? n : 1, sizeof *keys);
    const char **names = calloc(n ? n : 1, sizeof *names);
    if (!keys || !names) {
        free(keys);
        free(names);
        sr_mirror(r, NULL, 0);                /* all of it, without the list */
        return;
    }
    for (size_t i = 0; i < n; i++) {
        keys[i] = json_loads(recs[i].key, 0, NULL);
        const char *s = json_string_value(json_object_get(keys[i], "subject"));
        names[i] = s ? s : "";
    }
    sr_mirror(r, names, n);
    for (size_t i = 0; i < n; i++)
        json_decref(keys[i]);
    free(keys);
    free(names);
}

static void wr_finish(sr_wr *w, int status, int code, const char *msg)
{
    sr_registry *r = w->r;
    replica_deferred_free(&w->wait);
    if (status == 200)
        for (size_t i = 0; i < w->n; i++)         /* R2: covered, now applied */
            if (sr_state_apply(r, w->recs[i].key, strlen(w->recs[i].key), w->recs[i].val,
                               w->recs[i].val ? (ssize_t)strlen(w->recs[i].val) : -1)) {
                status = 500;
                code = 50001;
                msg = "Error while applying a record: out of memory";
            }
    if (status == 200)
        mirror_recs(r, w->recs, w->n);
    recs_free(w->recs, w->n);
    r->writing = NULL;
    sr_write_done done = w->done;
    void *arg = w->arg;
    char m[256];
    snprintf(m, sizeof m, "%s", msg ? msg : "");
    free(w);
    done(r, arg, status, code, m);
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
    return rc != KP_NONE || view_topic_find(b, SR_TOPIC, (size_t)sr_topic.len)
           ? rc : KP_LEADER_NOT_AVAILABLE;
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
        snprintf(err, errlen, "this broker does not lead %s-0", SR_TOPIC);
        return KP_NOT_LEADER_OR_FOLLOWER;
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
        w->code = rc == KP_NOT_LEADER_OR_FOLLOWER ? 50003 : 50001;
        snprintf(w->msg, sizeof w->msg, "Error in the backend data store: %s", err);
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
