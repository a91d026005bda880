/*
 * daemon/txn/txn_log.c — where the transaction coordinator's state lives:
 * the internal topic __transaction_state, as in Kafka's
 * TransactionStateManager.
 *
 * Design note.
 *
 * The coordinator of transactional id T is the leader of partition
 * abs(javaStringHashCode(T)) % partitions of __transaction_state (the
 * group coordinator's hash, group_log.c).  The topic
 * (transaction.state.log.num.partitions, .replication.factor, .min.isr,
 * .segment.bytes, cleanup.policy=compact) is created through the ordinary
 * topic path by the first broker asked about an id: in cluster mode once
 * enough brokers live (as __consumer_offsets: Kafka refuses a smaller
 * replication factor), standalone with one replica.  Both modes take the
 * same path from there on.
 *
 * Every state change of an id is one record appended to its partition,
 * Kafka's layout (kp_records.h, generated from its JSON):
 *
 *     key   int16 0 | TransactionalId (string)
 *     value int16 1 | ProducerId | ProducerEpoch | TransactionTimeoutMs |
 *                     TransactionStatus (int8) | TransactionPartitions
 *                     ([topic, [partition]], nullable) |
 *                     TransactionLastUpdateTimestampMs |
 *                     TransactionStartTimestampMs | tagged fields
 *                     (PreviousProducerId, NextProducerId)
 *     a null value (tombstone): the id expired
 *
 * and the change takes effect (txn_meta.cur) only when the partition's high
 * watermark covers it (standalone: the log end, at once; still on the next
 * loop turn, through the same bk_deferred as an acks=all produce).
 *
 * Per partition (tl_tick → part_sync):
 *
 *     IDLE ── led here (load_start: cursor over [log start, log end)) ──►
 *     LOADING ── load_step, TL_STEP_RECORDS per loop turn ──► LOADED
 *       ▲                                                      │
 *       └──── a new leader epoch, still led ◄──────────────────┘
 *     any ── not led here any more (part_unload) ──► IDLE
 *
 * Invariants (cite as "txn_log.c T1"):
 *   T1. An id is served only while its partition is LOADED for the leader
 *       epoch the view shows and this broker leads it; that leader epoch
 *       is the coordinator epoch of its markers.
 *   T2. txn_meta.cur is what the log holds for the id, up to the high
 *       watermark: a change is applied when its record is covered, never
 *       before, and a failed write leaves cur as it was.
 *   T3. One change of an id is in flight at a time (m->pending, or its
 *       markers): every request meeting it answers CONCURRENT_TRANSACTIONS,
 *       or (a client's AddPartitionsToTxn, AddOffsetsToTxn, EndTxn) waits
 *       a short while to be run again once the id is free (txn_park.c).
 *   T4. An id unloaded while a write or markers are in flight stays
 *       allocated, off the table, marked gone, until they end (their
 *       callbacks answer NOT_COORDINATOR); then it is freed, once.
 */
#include "daemon/txn/txn_int.h"
#include "daemon/group/group.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_deferred.h"
#include "daemon/view/view.h"
#include "kp_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define TL_TICK_MS 100
#define TL_STEP_RECORDS 2000
#define TL_WRITE_TIMEOUT_MS 5000      /* Kafka: request.timeout.ms of the append */

enum tl_state { TL_IDLE, TL_LOADING, TL_LOADED };

typedef struct tl_part {
    enum tl_state state;
    int32_t epoch;
    seg_cursor *cur;
    int64_t records, started_us;
} tl_part;

typedef struct tl_write {
    struct tl_write *next_w, *prev_w; /* on tl.writes while in flight */
    txn_meta *m;
    txn_rec next;
    bool tombstone;
    int32_t part, epoch;
    int64_t end;
    txn_write_done done;
    void *arg;
    bk_deferred wait;
    bk_waiter bw;
} tl_write;

static struct {
    bk_broker *b;
    tl_part *parts;
    int32_t nparts;
    txn_meta **hash;
    size_t hash_size, nmeta;
    struct event *tick, *step_ev;
    int64_t create_after_ms;
    kp_buf batch, key, val;
    kp_arena arena;
    tl_write writes;                  /* sentinel: the writes in flight */
} tl;

static const kp_str tl_topic = { TXN_TOPIC, (int32_t)sizeof TXN_TOPIC - 1 };

/* ---- the ids ----------------------------------------------------------------- */

static size_t id_hash(const char *id, size_t len)
{
    uint32_t h = 2166136261u;         /* FNV-1a */
    for (size_t k = 0; k < len; k++)
        h = (h ^ (uint8_t)id[k]) * 16777619u;
    return h;
}

txn_meta *txn_meta_find(const char *id, size_t len)
{
    if (!tl.hash_size)
        return NULL;
    for (txn_meta *m = tl.hash[id_hash(id, len) & (tl.hash_size - 1)]; m; m = m->hnext)
        if (m->id_len == len && !memcmp(m->id, id, len))
            return m;
    return NULL;
}

static int hash_grow(void)
{
    size_t n = tl.hash_size ? 2 * tl.hash_size : 1024;
    txn_meta **h = calloc(n, sizeof *h);
    if (!h)
        return -1;
    for (size_t k = 0; k < tl.hash_size; k++)
        for (txn_meta *m = tl.hash[k], *next; m; m = next) {
            next = m->hnext;
            size_t s = id_hash(m->id, m->id_len) & (n - 1);
            m->hnext = h[s];
            h[s] = m;
        }
    free(tl.hash);
    tl.hash = h;
    tl.hash_size = n;
    return 0;
}

txn_meta *txn_meta_add(const char *id, size_t len, int32_t part)
{
    if (tl.nmeta + 1 > tl.hash_size && hash_grow() != 0)
        return NULL;
    txn_meta *m = calloc(1, sizeof *m);
    if (!m || !(m->id = malloc(len + 1))) {
        free(m);
        return NULL;
    }
    memcpy(m->id, id, len);
    m->id[len] = 0;
    m->id_len = len;
    m->part = part;
    m->cur = (txn_rec){ .pid = -1, .last_pid = -1, .epoch = -1, .last_epoch = -1,
                        .state = TXN_EMPTY };
    size_t s = id_hash(id, len) & (tl.hash_size - 1);
    m->hnext = tl.hash[s];
    tl.hash[s] = m;
    tl.nmeta++;
    return m;
}

void txn_rec_free(txn_rec *r)
{
    for (size_t k = 0; k < r->ntps; k++)
        free(r->tps[k].topic);
    free(r->tps);
    r->tps = NULL;
    r->ntps = 0;
}

int txn_rec_copy(txn_rec *dst, const txn_rec *src)
{
    *dst = *src;
    dst->tps = NULL;
    dst->ntps = 0;
    if (!src->ntps)
        return 0;
    if (!(dst->tps = calloc(src->ntps, sizeof *dst->tps)))
        return -1;
    for (size_t k = 0; k < src->ntps; k++, dst->ntps++) {
        dst->tps[k].partition = src->tps[k].partition;
        if (!(dst->tps[k].topic = strdup(src->tps[k].topic))) {
            txn_rec_free(dst);
            return -1;
        }
    }
    return 0;
}

static void meta_free(txn_meta *m)
{
    txn_rec_free(&m->cur);
    free(m->id);
    free(m);
}

/* Off the table; freed now, or when what is in flight ends (T4). */
void txn_meta_remove(txn_meta *m)
{
    txn_meta **pp = &tl.hash[id_hash(m->id, m->id_len) & (tl.hash_size - 1)];
    while (*pp && *pp != m)
        pp = &(*pp)->hnext;
    if (*pp) {
        *pp = m->hnext;
        tl.nmeta--;
    }
    m->hnext = NULL;
    m->gone = true;
    txn_park_wake(m->id, m->id_len);
    if (m->markers && txn_markers_drop(m->markers))
        m->markers = NULL;
    txn_meta_release(m);
}

bool txn_meta_release(txn_meta *m)
{
    if (!m->gone || m->pending || m->markers)
        return false;
    meta_free(m);
    return true;
}

void txn_meta_foreach(void (*fn)(txn_meta *m, void *arg), void *arg)
{
    for (size_t k = 0; k < tl.hash_size; k++)
        for (txn_meta *m = tl.hash[k], *next; m; m = next) {
            next = m->hnext;          /* fn may remove m */
            fn(m, arg);
        }
}

/* ---- which partition, who leads it --------------------------------------------- */

static void maybe_create(bk_broker *b)
{
    int64_t now = bk_now_ms();
    if (now < tl.create_after_ms)
        return;
    tl.create_after_ms = now + 2000;
    char err[256], isr[16], seg[16];
    int16_t rf = bk_cluster_mode(b) ? b->cfg->transaction_state_log_replication_factor : 1;
    int16_t min_isr = b->cfg->transaction_state_log_min_isr;
    if (min_isr > rf)
        min_isr = rf;
    if (view_check_replication(b, rf, err, sizeof err) != KP_NONE)
        return;                       /* not enough brokers yet */
    snprintf(isr, sizeof isr, "%d", min_isr);
    snprintf(seg, sizeof seg, "%d", b->cfg->transaction_state_log_segment_bytes);
    md_kv kv[] = { { (char *)"cleanup.policy", (char *)"compact" },
                   { (char *)"min.insync.replicas", isr },
                   { (char *)"segment.bytes", seg } };
    int32_t n = b->cfg->transaction_state_log_num_partitions;
    int rc = view_topic_create(b, TXN_TOPIC, n, rf, NULL, kv, 3, false, NULL, err, sizeof err);
    if (rc != KP_NONE && rc != KP_TOPIC_ALREADY_EXISTS)
        BK_WARN("creating %s failed (%d): %s; retrying", TXN_TOPIC, rc, err);
    else if (rc == KP_NONE)
        BK_INFO("creating %s: %d partitions, replication factor %d", TXN_TOPIC, n, rf);
}

int32_t txn_coordinator_of(bk_broker *b, const char *id, size_t len)
{
    bk_topic *t = view_topic_find(b, TXN_TOPIC, tl_topic.len);
    if (!t || t->npartitions <= 0) {
        maybe_create(b);
        return -1;
    }
    return view_leader_of(b, t, gc_log_partition_in(t->npartitions, id, len));
}

bool txn_log_loading(void)
{
    for (int32_t i = 0; i < tl.nparts; i++)
        if (tl.parts[i].state == TL_LOADING)
            return true;
    return false;
}

int32_t txn_log_epoch(int32_t part)
{
    if (part < 0 || part >= tl.nparts || tl.parts[part].state != TL_LOADED)
        return -1;
    return tl.parts[part].epoch;
}

/* ---- loading -------------------------------------------------------------------- */

static void drop_meta(txn_meta *m, void *arg)
{
    int32_t part = *(int32_t *)arg;
    if (part < 0 || m->part == part)
        txn_meta_remove(m);
}

/* Its ids leave memory (Kafka's removeTransactionsForTxnTopicPartition). */
static void part_unload(int32_t i)
{
    tl_part *tp = &tl.parts[i];
    seg_cursor_close(tp->cur);
    *tp = (tl_part){ .state = TL_IDLE };
    txn_meta_foreach(drop_meta, &i);
}

static int parts_fit(int32_t n)
{
    if (n == tl.nparts)
        return 0;
    int32_t all = -1;
    for (int32_t i = 0; i < tl.nparts; i++)
        seg_cursor_close(tl.parts[i].cur);
    txn_meta_foreach(drop_meta, &all);
    free(tl.parts);
    tl.parts = NULL;
    tl.nparts = 0;
    if (n == 0)
        return 0;
    if (!(tl.parts = calloc((size_t)n, sizeof *tl.parts)))
        return -1;
    tl.nparts = n;
    return 0;
}

static void load_start(int32_t i, const bk_pview *v)
{
    tl_part *tp = &tl.parts[i];
    part_unload(i);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s-%d", tl.b->data_dir, TXN_TOPIC, i);
    seg_cursor_opts o = { .dir = dir, .from = seg_log_start(v->local->log),
                          .to = seg_log_end(v->local->log), .min_ts = INT64_MIN };
    tp->state = TL_LOADING;
    tp->epoch = v->leader_epoch;
    tp->started_us = bk_mono_us();
    if (o.from < o.to && seg_cursor_open(&o, &tp->cur) != 0)
        tp->cur = NULL;
    BK_INFO("%s-%d led here (epoch %d): loading transaction state [%lld, %lld)",
            TXN_TOPIC, i, tp->epoch, (long long)o.from, (long long)o.to);
    event_active(tl.step_ev, EV_TIMEOUT, 0);
}

/* One TransactionLogValue into rec (its partitions copied).  -1: a version
 * this broker does not read, malformed, or no memory. */
static int read_value(kp_str value, kp_arena *arena, txn_rec *rec)
{
    kp_rd v;
    kp_rd_init(&v, value.p, (size_t)value.len);
    int16_t version = kp_rd_i16(&v);
    kp_TransactionLogValue x;
    kp_arena_reset(arena);
    if (!kp_rd_ok(&v) || version < 0 || version > 1 ||
        kp_dec_TransactionLogValue(&v, version, &x, arena) != 0)
        return -1;
    *rec = (txn_rec){ .pid = x.ProducerId, .last_pid = x.PreviousProducerId,
                      .epoch = x.ProducerEpoch, .last_epoch = -1,
                      .timeout_ms = x.TransactionTimeoutMs, .state = x.TransactionStatus,
                      .start_ms = x.TransactionStartTimestampMs,
                      .update_ms = x.TransactionLastUpdateTimestampMs };
    size_t n = 0;
    for (int32_t t = 0; t < x.TransactionPartitions_count; t++)
        n += x.TransactionPartitions[t].PartitionIds_count > 0
             ? (size_t)x.TransactionPartitions[t].PartitionIds_count : 0;
    if (n && !(rec->tps = calloc(n, sizeof *rec->tps)))
        return -1;
    for (int32_t t = 0; t < x.TransactionPartitions_count; t++) {
        const kp_TransactionLogValue_PartitionsSchema *s = &x.TransactionPartitions[t];
        for (int32_t k = 0; k < s->PartitionIds_count; k++) {
            txn_tp *tp = &rec->tps[rec->ntps];
            if (!(tp->topic = malloc((size_t)s->Topic.len + 1))) {
                txn_rec_free(rec);
                return -1;
            }
            memcpy(tp->topic, s->Topic.p, (size_t)s->Topic.len);
            tp->topic[s->Topic.len] = 0;
            tp->partition = s->PartitionIds[k];
            rec->ntps++;
        }
    }
    return 0;
}

int txn_log_decode(const kp_record *r, kp_arena *arena, kp_str *id, txn_rec *rec)
{
    kp_rd k;
    kp_rd_init(&k, r->Key.p, r->Key.len > 0 ? (size_t)r->Key.len : 0);
    int16_t kv = kp_rd_i16(&k);
    kp_TransactionLogKey key;
    if (!kp_rd_ok(&k) || kv != 0 || kp_dec_TransactionLogKey(&k, 0, &key, NULL) != 0 ||
        key.TransactionalId.len <= 0)
        return TXN_DEC_SKIP;          /* not ours */
    *id = key.TransactionalId;
    if (r->Value.len < 0)
        return TXN_DEC_TOMBSTONE;
    return read_value(r->Value, arena, rec) == 0 ? TXN_DEC_STATE : TXN_DEC_SKIP;
}

/* A record of partition i: the id's state as written, or its tombstone. */
static int load_record(int32_t i, const kp_record *r)
{
    kp_str id;
    txn_rec rec;
    int what = txn_log_decode(r, &tl.arena, &id, &rec);
    if (what == TXN_DEC_SKIP)
        return 0;                     /* skipped */
    size_t len = (size_t)id.len;
    txn_meta *m = txn_meta_find(id.p, len);
    if (what == TXN_DEC_TOMBSTONE) {
        if (m)
            txn_meta_remove(m);
        return 0;
    }
    if (!m && !(m = txn_meta_add(id.p, len, i))) {
        txn_rec_free(&rec);
        return -1;
    }
    txn_rec_free(&m->cur);
    m->cur = rec;
    return 0;
}

static void loaded_meta(txn_meta *m, void *arg)
{
    if (m->part == *(int32_t *)arg)
        txn_coord_loaded(m);
}

static bool part_step(int32_t i, int *budget)
{
    tl_part *tp = &tl.parts[i];
    kp_record rec;
    int rc = 1;
    while (tp->cur && *budget > 0 && (rc = seg_cursor_next(tp->cur, &rec)) == 1) {
        --*budget;
        tp->records++;
        if (load_record(i, &rec) != 0)
            rc = SEG_E_NOMEM;
    }
    if (rc < 0) {
        BK_ERROR("%s-%d: loading transaction state failed (%d); starting over", TXN_TOPIC, i,
                 rc);
        part_unload(i);
        return false;
    }
    if (tp->cur && rc == 1)
        return true;
    seg_cursor_close(tp->cur);
    tp->cur = NULL;
    tp->state = TL_LOADED;
    BK_INFO("%s-%d loaded: %lld records in %.1f ms; coordinating its transactional ids",
            TXN_TOPIC, i, (long long)tp->records, (bk_mono_us() - tp->started_us) / 1000.0);
    txn_meta_foreach(loaded_meta, &i);
    return false;
}

static void load_step(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    int budget = TL_STEP_RECORDS;
    bool more = false;
    for (int32_t i = 0; i < tl.nparts; i++)
        if (tl.parts[i].state == TL_LOADING)
            more |= part_step(i, &budget);
    if (more)
        event_active(tl.step_ev, EV_TIMEOUT, 0);
}

/* T1: loads partition i when led here for a new epoch, drops it when not.
 * true when led here. */
static bool part_sync(bk_broker *b, int32_t i)
{
    bk_partition *p;
    const bk_pview *v = view_partition(b, tl_topic, i);
    bool leads = view_leader_replica(b, tl_topic, i, &p) == KP_NONE && v && p->log;
    tl_part *tp = &tl.parts[i];
    if (!leads) {
        if (tp->state != TL_IDLE) {
            BK_INFO("%s-%d no longer led here: its transactional ids are coordinated "
                    "elsewhere", TXN_TOPIC, i);
            part_unload(i);
        }
        return false;
    }
    if (tp->state == TL_IDLE || tp->epoch != v->leader_epoch)
        load_start(i, v);
    return true;
}

static void tl_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what; (void)arg;
    bk_topic *t = view_topic_find(tl.b, TXN_TOPIC, tl_topic.len);
    if (parts_fit(t ? t->npartitions : 0) != 0)
        return;
    for (int32_t i = 0; i < tl.nparts; i++)
        part_sync(tl.b, i);
}

int16_t txn_log_owner(bk_broker *b, const char *id, size_t len, int32_t *part)
{
    bk_topic *t = view_topic_find(b, TXN_TOPIC, tl_topic.len);
    if (!t || t->npartitions <= 0) {
        maybe_create(b);
        return KP_COORDINATOR_NOT_AVAILABLE;
    }
    int32_t i = gc_log_partition_in(t->npartitions, id, len);
    if (view_leader_of(b, t, i) != b->cfg->broker_id)
        return KP_NOT_COORDINATOR;
    if (parts_fit(t->npartitions) != 0)
        return KP_COORDINATOR_NOT_AVAILABLE;
    if (!part_sync(b, i))
        return KP_NOT_COORDINATOR;
    if (tl.parts[i].state != TL_LOADED)
        return KP_COORDINATOR_LOAD_IN_PROGRESS;
    *part = i;
    return KP_NONE;
}

/* ---- writing: append, then wait for the high watermark ----------------------------- */

static void wr_record(const txn_meta *m, const txn_rec *r)
{
    kp_TransactionLogKey key = { .TransactionalId = { m->id, (int32_t)m->id_len } };
    kp_buf_reset(&tl.key);
    kp_wr_i16(&tl.key, 0);
    kp_enc_TransactionLogKey(&tl.key, 0, &key);
    kp_buf_reset(&tl.val);
    if (!r)
        return;
    kp_arena_reset(&tl.arena);
    kp_TransactionLogValue v;
    kp_init_TransactionLogValue(&v);
    v.ProducerId = r->pid;
    v.PreviousProducerId = r->last_pid;
    v.ProducerEpoch = r->epoch;
    v.TransactionTimeoutMs = r->timeout_ms;
    v.TransactionStatus = r->state;
    v.TransactionLastUpdateTimestampMs = r->update_ms;
    v.TransactionStartTimestampMs = r->start_ms;
    v.TransactionPartitions_count = -1;            /* Kafka: null when none */
    if (r->ntps) {
        v.TransactionPartitions = kp_arena_alloc(&tl.arena, r->ntps * sizeof
                                                 *v.TransactionPartitions);
        int32_t *ids = kp_arena_alloc(&tl.arena, r->ntps * sizeof *ids);
        if (!v.TransactionPartitions || !ids) {
            tl.val.err = KP_E_NOMEM;
            return;
        }
        v.TransactionPartitions_count = 0;
        for (size_t k = 0; k < r->ntps; k++) {    /* one entry per run of a topic */
            kp_TransactionLogValue_PartitionsSchema *s =
                v.TransactionPartitions_count ? &v.TransactionPartitions[
                    v.TransactionPartitions_count - 1] : NULL;
            if (!s || strcmp(r->tps[k - 1].topic, r->tps[k].topic) != 0) {
                s = &v.TransactionPartitions[v.TransactionPartitions_count++];
                s->Topic = kp_str_cstr(r->tps[k].topic);
                s->PartitionIds = &ids[k];
                s->PartitionIds_count = 0;
            }
            ids[k] = r->tps[k].partition;
            s->PartitionIds_count++;
        }
    }
    kp_wr_i16(&tl.val, 1);
    kp_enc_TransactionLogValue(&tl.val, 1, &v);
}

static void write_finish(tl_write *w, int16_t err)
{
    replica_deferred_free(&w->wait);
    w->prev_w->next_w = w->next_w;
    w->next_w->prev_w = w->prev_w;
    txn_meta *m = w->m;
    m->pending = false;
    txn_park_wake(m->id, m->id_len);  /* on the next turn: done may free m */
    if (m->gone && !err)
        err = KP_NOT_COORDINATOR;
    if (!err && !w->tombstone) {
        txn_rec_free(&m->cur);
        m->cur = w->next;
        w->next.tps = NULL;
        w->next.ntps = 0;
    }
    txn_rec_free(&w->next);
    txn_write_done done = w->done;
    void *arg = w->arg;
    free(w);
    bool gone = m->gone;              /* T4: done never removes a gone id */
    done(m, arg, err);
    if (gone)
        txn_meta_release(m);
}

/* The write's next step: finished when its record is covered (KP_NONE) or
 * cannot be any more (leadership moved: NOT_COORDINATOR; the deadline:
 * COORDINATOR_NOT_AVAILABLE, as Kafka maps a timed-out append, and the
 * client retries); else it watches the partition again. */
static void write_step(tl_write *w, bool deadline)
{
    bk_partition *p;
    int16_t e;
    if (view_leader_replica(tl.b, tl_topic, w->part, &p) != KP_NONE ||
        p->leader_epoch != w->epoch)
        e = KP_NOT_COORDINATOR;
    else if (p->high_watermark >= w->end)
        e = KP_NONE;
    else if (deadline)
        e = KP_COORDINATOR_NOT_AVAILABLE;
    else {
        replica_deferred_watch(&w->wait, p, &w->bw, false);
        return;
    }
    write_finish(w, e);
}

static void write_wake(void *arg)
{
    write_step(arg, false);
}

static void write_timeout(void *arg)
{
    write_step(arg, true);
}

int16_t txn_log_write(bk_broker *b, txn_meta *m, txn_rec *next, txn_write_done done, void *arg)
{
    bk_partition *p;
    if (m->gone || view_leader_replica(b, tl_topic, m->part, &p) != KP_NONE ||
        txn_log_epoch(m->part) != p->leader_epoch)
        return KP_NOT_COORDINATOR;
    if (repl_isr_size(p) < p->topic->cfg.min_insync_replicas)
        return KP_COORDINATOR_NOT_AVAILABLE;       /* Kafka's NOT_ENOUGH_REPLICAS */
    if (seg_failed(p->log))
        return KP_NOT_COORDINATOR;
    tl_write *w = calloc(1, sizeof *w);
    if (!w)
        return KP_COORDINATOR_NOT_AVAILABLE;
    int64_t now = bk_now_ms(), base;
    wr_record(m, next);
    kp_batch_builder bb;
    kp_buf_reset(&tl.batch);
    kp_bb_init(&bb, &tl.batch, KP_CODEC_NONE);
    kp_bb_add(&bb, now, tl.key.data, (int32_t)tl.key.len, next ? tl.val.data : NULL,
              next ? (int32_t)tl.val.len : 0, NULL, 0);
    int rc = SEG_E_NOMEM;
    if (!tl.key.err && !tl.val.err && kp_bb_finish(&bb) >= 0 && !tl.batch.err) {
        kp_batch_set_leader_epoch(tl.batch.data, p->leader_epoch);
        rc = seg_append(p->log, tl.batch.data, tl.batch.len, now, &base);
    } else {
        kp_bb_free(&bb);
    }
    if (rc != 0) {
        free(w);
        BK_ERROR("transactional id %s: appending its state to %s-%d failed (%d)", m->id,
                 TXN_TOPIC, m->part, rc);
        return rc == SEG_E_NOMEM ? KP_COORDINATOR_NOT_AVAILABLE : KP_NOT_COORDINATOR;
    }
    p->bytes_in += tl.batch.len;
    replica_partition_appended(b, p, 1);
    w->m = m;
    if (next) {
        w->next = *next;
        next->tps = NULL;
        next->ntps = 0;
    }
    w->tombstone = !next;
    w->part = m->part;
    w->epoch = p->leader_epoch;
    w->end = seg_log_end(p->log);
    w->done = done;
    w->arg = arg;
    m->pending = true;
    w->next_w = tl.writes.next_w;
    w->prev_w = &tl.writes;
    tl.writes.next_w->prev_w = w;
    tl.writes.next_w = w;
    replica_deferred_init(&w->wait, write_wake, write_timeout, w);
    if (replica_deferred_arm(&w->wait, b->base, TL_WRITE_TIMEOUT_MS) != 0)
        abort();                      /* two small events: as event_base_once */
    replica_deferred_wake(&w->wait);  /* the first check on the next turn: done
                                         is never called from inside this call */
    return KP_NONE;
}

/* ---- start, stop ------------------------------------------------------------------ */

int txn_log_start(bk_broker *b)
{
    tl.b = b;
    tl.writes.next_w = tl.writes.prev_w = &tl.writes;
    kp_buf_init(&tl.batch);
    kp_buf_init(&tl.key);
    kp_buf_init(&tl.val);
    kp_arena_init(&tl.arena, 0);
    tl.tick = event_new(b->base, -1, EV_PERSIST, tl_tick, NULL);
    tl.step_ev = event_new(b->base, -1, 0, load_step, NULL);
    struct timeval tv = { 0, TL_TICK_MS * 1000 };
    if (!tl.tick || !tl.step_ev || event_add(tl.tick, &tv) != 0 || hash_grow() != 0) {
        BK_ERROR("transaction coordinator: out of memory");
        return -1;
    }
    return 0;
}

void txn_log_stop(void)
{
    if (!tl.b)
        return;
    /* Shutdown, the loop stopped: the writes in flight end as if leadership
     * had moved (their requests' connections are gone), the markers stop,
     * then every id goes. */
    while (tl.writes.next_w != &tl.writes)
        write_finish(tl.writes.next_w, KP_NOT_COORDINATOR);
    txn_markers_stop_all();
    parts_fit(0);
    if (tl.tick)
        event_free(tl.tick);
    if (tl.step_ev)
        event_free(tl.step_ev);
    kp_buf_free(&tl.batch);
    kp_buf_free(&tl.key);
    kp_buf_free(&tl.val);
    kp_arena_free(&tl.arena);
    free(tl.hash);
    memset(&tl, 0, sizeof tl);
}
