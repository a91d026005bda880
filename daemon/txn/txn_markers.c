/*
 * daemon/txn/txn_markers.c — a decided transaction's markers, as Kafka's
 * TransactionMarkerChannelManager: once an id's PrepareCommit or
 * PrepareAbort is replicated (txn_log.c T2), a COMMIT or ABORT control
 * record goes to every partition of its transaction, then its
 * CompleteCommit or CompleteAbort is written.
 *
 * Per partition of the transaction, each round (mk_round):
 *
 *   - led here: replica_txn_write_marker (daemon/replica/replica_txn.h),
 *     then, for a partition of __consumer_offsets, gc_txn_complete (the
 *     group's pending transactional offsets become committed or go);
 *   - __consumer_offsets standalone (no such log; the group coordinator
 *     keeps offsets in SQLite): gc_txn_complete only;
 *   - led by another broker: one WriteTxnMarkers v1 per broker, with all
 *     of that broker's partitions (repl_peer_call);
 *   - a partition whose topic is gone (deleted), or past its partition
 *     count: dropped, as Kafka drops it.
 *
 * A partition that failed (NOT_LEADER_OR_FOLLOWER, BROKER_NOT_AVAILABLE, a
 * timeout, no leader yet) is tried again in the next round, after a
 * backoff doubling from MK_BACKOFF_MS to MK_BACKOFF_MAX_MS, until it is
 * written or its topic is gone (Kafka retries until then too).  One log
 * line per transaction says that its markers are being retried.
 *
 * Invariants (cite as "txn_markers.c K1"):
 *   K1. m->markers is set from txn_markers_start until the Complete record's
 *       write is started (then m->pending holds the id: txn_log.c T3).
 *   K2. A round starts only when no call of the previous one is out
 *       (k->inflight 0); every callback decrements it exactly once.
 *   K3. An id unloaded meanwhile (m->gone) stops at the next callback: the
 *       markers are freed when none is out, and m with them (txn_log.c T4).
 *   K4. Every call out is on k->calls until its callback frees it; at
 *       shutdown (the loop stopped) the callees drop their waiters without
 *       calling back (group_persist.c's gc_wait_drop, replica_txn.c M4), so
 *       txn_markers_stop_all frees what is still on it.
 */
#include "daemon/txn/txn_int.h"
#include "daemon/group/group.h"
#include "daemon/replica/replica_txn.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/view/view.h"

#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#define MK_BACKOFF_MS 100
#define MK_BACKOFF_MAX_MS 5000
#define MK_TIMEOUT_MS 30000           /* Kafka's request.timeout.ms */
#define MK_MAX_PEERS 64               /* distinct leaders per round; more wait */

enum { MK_TODO, MK_OUT, MK_DONE };

typedef struct mk_part {
    const txn_tp *tp;                 /* in k->m->cur.tps */
    int state;
    int16_t last_err;
    int32_t broker;                   /* MK_OUT to a peer: which */
} mk_part;

typedef struct txn_markers {
    struct txn_markers *next_k, *prev_k;   /* on mk_all */
    bk_broker *b;
    txn_meta *m;
    bool commit;
    int64_t pid;
    int16_t epoch;
    int32_t coord_epoch;
    mk_part *parts;
    size_t n, left;
    int inflight;                     /* K2 */
    struct mk_call *calls;            /* the calls out (K4) */
    int64_t backoff_ms;
    bool logged;
    struct event *retry_ev;
} txn_markers;

typedef struct mk_call {              /* one partition, or one peer's request */
    struct mk_call *next_c, *prev_c;  /* on k->calls (K4) */
    txn_markers *k;
    size_t first;                     /* the local call's partition */
    int32_t broker;                   /* a peer call's broker, else -1 */
} mk_call;

static void mk_round(txn_markers *k);

static mk_call *mk_call_new(txn_markers *k, size_t first, int32_t broker)
{
    mk_call *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    *c = (mk_call){ .next_c = k->calls, .k = k, .first = first, .broker = broker };
    if (k->calls)
        k->calls->prev_c = c;
    k->calls = c;
    return c;
}

static void mk_call_free(mk_call *c)
{
    if (!c)
        return;
    if (c->prev_c)
        c->prev_c->next_c = c->next_c;
    else
        c->k->calls = c->next_c;
    if (c->next_c)
        c->next_c->prev_c = c->prev_c;
    free(c);
}

/* Every live txn_markers, for shutdown (sentinel). */
static txn_markers mk_all = { .next_k = &mk_all, .prev_k = &mk_all };

bool txn_markers_drop(txn_markers *k)
{
    if (k->inflight > 0)
        return false;                 /* K3: the last callback frees them */
    txn_markers_free(k);
    return true;
}

void txn_markers_free(txn_markers *k)
{
    if (!k)
        return;
    if (k->next_k) {
        k->next_k->prev_k = k->prev_k;
        k->prev_k->next_k = k->next_k;
    }
    if (k->retry_ev)
        event_free(k->retry_ev);
    free(k->parts);
    free(k);
}

/* What a partition's error means: 0 done (written, or the topic is gone),
 * else tried again. */
static bool mk_gone(txn_markers *k, const txn_tp *tp)
{
    bk_topic *t = view_topic_find(k->b, tp->topic, strlen(tp->topic));
    if (!strcmp(tp->topic, TXN_OFFSETS_TOPIC) && !bk_cluster_mode(k->b))
        return false;                 /* standalone: no log, but never gone */
    return !t || tp->partition < 0 || tp->partition >= t->npartitions;
}

static void mk_result(txn_markers *k, size_t i, int16_t err)
{
    mk_part *p = &k->parts[i];
    if (p->state != MK_OUT)
        return;
    /* INVALID_PRODUCER_EPOCH: the partition has seen a later epoch of the
     * producer, so this transaction ended there (Kafka stops sending too). */
    if (err == KP_NONE || err == KP_INVALID_PRODUCER_EPOCH ||
        (err == KP_UNKNOWN_TOPIC_OR_PARTITION && mk_gone(k, p->tp))) {
        p->state = MK_DONE;
        k->left--;
        return;
    }
    p->state = MK_TODO;
    p->last_err = err;
}

static void complete_written(txn_meta *m, void *arg, int16_t err)
{
    (void)arg;
    if (err)                          /* still Prepare*: a reload sends them again */
        BK_WARN("transactional id %s: writing its Complete record failed (%d)", m->id, err);
    else
        txn_ops_completed(m->cur.state == TXN_COMPLETE_COMMIT);
}

/* Every marker is written: Complete*, the partitions cleared (K1). */
static void mk_complete(txn_markers *k)
{
    txn_meta *m = k->m;
    m->markers = NULL;
    txn_rec next = m->cur;
    next.tps = NULL;
    next.ntps = 0;
    next.state = k->commit ? TXN_COMPLETE_COMMIT : TXN_COMPLETE_ABORT;
    next.update_ms = bk_now_ms();
    bk_broker *b = k->b;
    if (k->logged)
        BK_INFO("transactional id %s: its markers are all written now", m->id);
    txn_markers_free(k);
    int16_t err = txn_log_write(b, m, &next, complete_written, NULL);
    if (err)                          /* the abort tick starts the markers again */
        complete_written(m, NULL, err);
}

/* After a callback: the next step once no call is out (K2, K3). */
static void mk_after(txn_markers *k)
{
    if (--k->inflight > 0)
        return;
    txn_meta *m = k->m;
    if (m->gone) {
        m->markers = NULL;
        txn_markers_free(k);
        txn_meta_release(m);
        return;
    }
    if (k->left == 0) {
        mk_complete(k);
        return;
    }
    if (!k->logged) {
        k->logged = true;
        int16_t e = 0;
        for (size_t i = 0; i < k->n && !e; i++)
            if (k->parts[i].state == MK_TODO)
                e = k->parts[i].last_err;
        BK_WARN("transactional id %s: %zu of its %s markers not written yet (error %d); "
                "retrying until they are", m->id, k->left, k->commit ? "COMMIT" : "ABORT", e);
    }
    struct timeval tv = { k->backoff_ms / 1000, (k->backoff_ms % 1000) * 1000 };
    k->backoff_ms = k->backoff_ms * 2 > MK_BACKOFF_MAX_MS ? MK_BACKOFF_MAX_MS : k->backoff_ms * 2;
    if (event_add(k->retry_ev, &tv) != 0)
        mk_round(k);                  /* no timer: at once */
}

static void gc_done(void *arg, int16_t err)
{
    mk_call *c = arg;
    txn_markers *k = c->k;
    mk_result(k, c->first, err);
    mk_call_free(c);
    mk_after(k);
}

static bool is_offsets(const txn_tp *tp)
{
    return !strcmp(tp->topic, TXN_OFFSETS_TOPIC);
}

static void local_done(void *arg, int16_t err)
{
    mk_call *c = arg;
    txn_markers *k = c->k;
    const txn_tp *tp = k->parts[c->first].tp;
    if (err == KP_NONE && is_offsets(tp) && !k->m->gone) {
        gc_txn_complete(k->b, tp->partition, k->pid, k->epoch, k->commit, gc_done, c);
        return;
    }
    gc_done(c, err);
}

/* A WriteTxnMarkers v1 answer: each partition's error. */
static void peer_done(void *arg, int16_t err, kp_rd *body)
{
    mk_call *c = arg;
    txn_markers *k = c->k;
    kp_WriteTxnMarkersResponse m;
    kp_init_WriteTxnMarkersResponse(&m);
    kp_arena a;
    kp_arena_init(&a, 0);
    if (!err && kp_dec_WriteTxnMarkersResponse(body, 1, &m, &a) != 0)
        err = KP_NETWORK_EXCEPTION;
    for (size_t i = 0; i < k->n; i++) {
        mk_part *p = &k->parts[i];
        if (p->state != MK_OUT || c->broker != p->broker)
            continue;
        int16_t e = err ? err : KP_UNKNOWN_SERVER_ERROR;
        for (int32_t x = 0; !err && x < m.Markers_count; x++)
            for (int32_t t = 0; t < m.Markers[x].Topics_count; t++) {
                const kp_WriteTxnMarkersResponse_WritableTxnMarkerTopicResult *tr =
                    &m.Markers[x].Topics[t];
                if ((size_t)tr->Name.len != strlen(p->tp->topic) ||
                    memcmp(tr->Name.p, p->tp->topic, (size_t)tr->Name.len))
                    continue;
                for (int32_t q = 0; q < tr->Partitions_count; q++)
                    if (tr->Partitions[q].PartitionIndex == p->tp->partition)
                        e = tr->Partitions[q].ErrorCode;
            }
        mk_result(k, i, e);
    }
    kp_arena_free(&a);
    mk_call_free(c);
    mk_after(k);
}

/* One WriteTxnMarkers v1 to broker with every TODO partition it leads. */
static void mk_peer(txn_markers *k, int32_t broker, const int32_t *leaders)
{
    kp_WriteTxnMarkersRequest q = { 0 };
    kp_WriteTxnMarkersRequest_WritableTxnMarker mk = {
        .ProducerId = k->pid, .ProducerEpoch = k->epoch, .TransactionResult = k->commit,
        .CoordinatorEpoch = k->coord_epoch,
    };
    kp_WriteTxnMarkersRequest_WritableTxnMarkerTopic *topics = calloc(k->n, sizeof *topics);
    int32_t *ids = calloc(k->n, sizeof *ids);
    mk_call *c = mk_call_new(k, 0, broker);
    kp_buf body;
    kp_buf_init(&body);
    if (!topics || !ids || !c)
        goto out;                     /* the partitions stay TODO: next round */
    mk.Topics = topics;
    for (size_t i = 0; i < k->n; i++) {
        mk_part *p = &k->parts[i];
        if (p->state != MK_TODO || leaders[i] != broker)
            continue;
        kp_WriteTxnMarkersRequest_WritableTxnMarkerTopic *t = NULL;
        for (int32_t x = 0; x < mk.Topics_count && !t; x++)
            if (!strcmp(topics[x].Name.p, p->tp->topic))
                t = &topics[x];
        if (!t) {
            t = &topics[mk.Topics_count++];
            t->Name = kp_str_cstr(p->tp->topic);
            t->PartitionIndexes = &ids[i];
        }
        /* a topic's partitions are adjacent in cur.tps (txn_coord.c add_tp) */
        t->PartitionIndexes[t->PartitionIndexes_count++] = p->tp->partition;
        p->state = MK_OUT;
        p->broker = broker;
    }
    q.Markers = &mk;
    q.Markers_count = 1;
    if (kp_enc_WriteTxnMarkersRequest(&body, 1, &q) != 0 || body.err) {
        BK_ERROR("transactional id %s: its WriteTxnMarkers to broker %d cannot be encoded; "
                 "retrying", k->m->id, broker);
        for (size_t i = 0; i < k->n; i++)
            if (k->parts[i].state == MK_OUT && leaders[i] == broker) {
                k->parts[i].state = MK_TODO;
                k->parts[i].last_err = KP_UNKNOWN_SERVER_ERROR;
            }
        goto out;
    }
    k->inflight++;
    repl_peer_call(k->b, broker, KP_API_WRITE_TXN_MARKERS, 1, body.data, body.len,
                   MK_TIMEOUT_MS, peer_done, c);
    c = NULL;
out:
    mk_call_free(c);
    free(topics);
    free(ids);
    kp_buf_free(&body);
}

/* Leader of tp: this broker's id, another's, -1 none yet, -2 gone, -3
 * standalone __consumer_offsets (the group coordinator only). */
static int32_t mk_leader(txn_markers *k, const txn_tp *tp)
{
    if (is_offsets(tp) && !bk_cluster_mode(k->b))
        return -3;
    if (mk_gone(k, tp))
        return -2;
    bk_topic *t = view_topic_find(k->b, tp->topic, strlen(tp->topic));
    return view_leader_of(k->b, t, tp->partition);
}

static void mk_round(txn_markers *k)
{
    int32_t *leaders = calloc(k->n ? k->n : 1, sizeof *leaders);
    int32_t peers[MK_MAX_PEERS];
    int npeers = 0;
    k->inflight++;                    /* K2: this round's own hold */
    for (size_t i = 0; leaders && !k->m->gone && i < k->n; i++) {
        mk_part *p = &k->parts[i];
        if (p->state != MK_TODO)
            continue;
        int32_t l = leaders[i] = mk_leader(k, p->tp);
        mk_call *c = l == -3 || l == k->b->cfg->broker_id ? mk_call_new(k, i, -1) : NULL;
        if (c) {
            p->state = MK_OUT;
            p->broker = -1;
            k->inflight++;
            if (l == -3)
                gc_txn_complete(k->b, p->tp->partition, k->pid, k->epoch, k->commit, gc_done, c);
            else
                replica_txn_write_marker(k->b, p->tp->topic, p->tp->partition, k->pid, k->epoch,
                                         k->commit, k->coord_epoch, MK_TIMEOUT_MS, local_done, c);
        } else if (l == -2) {
            p->state = MK_OUT;
            mk_result(k, i, KP_NONE);     /* a deleted topic's partition: dropped */
        } else if (l == -1) {
            p->last_err = KP_LEADER_NOT_AVAILABLE;
        } else if (l >= 0 && l != k->b->cfg->broker_id) {
            int x = 0;
            while (x < npeers && peers[x] != l)
                x++;
            if (x == npeers && npeers < MK_MAX_PEERS)
                peers[npeers++] = l;
        }
    }
    for (int x = 0; leaders && x < npeers; x++)
        mk_peer(k, peers[x], leaders);
    free(leaders);
    mk_after(k);
}

static void mk_retry(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    mk_round(arg);
}

void txn_markers_start(bk_broker *b, txn_meta *m)
{
    txn_markers *k = calloc(1, sizeof *k);
    if (!k || (m->cur.ntps && !(k->parts = calloc(m->cur.ntps, sizeof *k->parts))) ||
        !(k->retry_ev = evtimer_new(b->base, mk_retry, k))) {
        txn_markers_free(k);
        BK_ERROR("transactional id %s: out of memory for its markers; the next timeout "
                 "check starts them again", m->id);
        return;
    }
    *k = (txn_markers){ .b = b, .m = m, .commit = m->cur.state == TXN_PREPARE_COMMIT,
                        .pid = m->cur.pid, .epoch = m->cur.epoch,
                        .coord_epoch = txn_log_epoch(m->part), .parts = k->parts,
                        .n = m->cur.ntps, .left = m->cur.ntps, .backoff_ms = MK_BACKOFF_MS,
                        .retry_ev = k->retry_ev };
    for (size_t i = 0; i < k->n; i++)
        k->parts[i] = (mk_part){ .tp = &m->cur.tps[i], .state = MK_TODO };
    k->next_k = mk_all.next_k;
    k->prev_k = &mk_all;
    mk_all.next_k->prev_k = k;
    mk_all.next_k = k;
    m->markers = k;
    mk_round(k);
}

void txn_markers_stop_all(void)
{
    while (mk_all.next_k != &mk_all) {
        txn_markers *k = mk_all.next_k;
        txn_meta *m = k->m;
        m->markers = NULL;
        while (k->calls)
            mk_call_free(k->calls);   /* K4 */
        txn_markers_free(k);
        if (m->gone)
            txn_meta_release(m);      /* K3: unloaded, it waited for these */
    }
}
