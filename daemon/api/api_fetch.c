/*
 * daemon/api/api_fetch.c — Fetch (API key 1), v0–v17.
 *
 * Message bytes never enter this process: each partition's data is one or
 * more seg_range (file, position, length) spliced into the response with
 * net_req_add_range and sent with sendfile by daemon/net/net_server.c.  The handler
 * writes only the small fixed fields.  Cost per partition: one hash
 * lookup, one seg_read bounded by the high watermark (a follower's: by
 * the log end; an index lookup plus a bounded header scan), no
 * allocation; a follower's fetch adds a scan of at most MD_REPLICAS_MAX
 * follower slots (daemon/replication/repl_isr.c).  The decoded request
 * (kp_dec_FetchRequest), the handler's state and the response being
 * encoded all live in the request arena, so no malloc per request in the
 * steady state.
 *
 * The response is encoded by kp_enc_FetchResponse with a records hook
 * (protocol/msgs.c M5): the encoder writes each partition's Records length
 * prefix and fetch_splice splices that partition's file ranges in right
 * after it (net_req_add_range), so the bytes still never leave the files.  Consumers are never served above the HW: it is
 * the read's upper bound (seg.h), not a check after the fact.
 *
 * Size rules (KIP-74): the response carries at most
 * min(MaxBytes, fetch.max.bytes) of records, each partition at most
 * PartitionMaxBytes, except that the first non-empty partition always gets
 * at least one whole batch, however large — otherwise a consumer facing a
 * batch bigger than its limits would be stuck.  A batch that would overflow
 * a later partition's budget is left for the next fetch.  Ranges end on
 * batch boundaries, so no partial batch is ever sent.
 *
 * Long-poll.  When fewer than MinBytes are ready and MaxWaitMs > 0 (and no
 * partition has an error), the handler returns BK_DEFER:
 *
 *            handler              the HW moves on any watched partition
 *   READY ─────────────► WAITING ◄──────────────────────────┐
 *     ▲   (not enough)     │  replica_partition_set_high_watermark → notify     │
 *     │                    │  → the request's bk_deferred (st->wait,       │
 *     │                    │  replica_deferred.h): drop all waiters        │
 *     │                    ▼                                               │
 *     │                 REBUILD (fetch_rebuild, next turn) ─ not enough ───┘
 *     │                    │ enough data, an error, or the deadline
 *     └── net_req_finish ◄──┴──── fetch_timeout (MaxWaitMs) rebuilds and finishes
 *
 * Invariants:
 *   1. While WAITING, the request holds no file ranges and r->out holds
 *      nothing of the body; every REBUILD writes the body from scratch
 *      (fetch_reset), so a response always reflects one instant.
 *   2. No bk_partition pointer survives a return to the loop: waiters are
 *      unlinked when woken (replica_deferred.h D2), and REBUILD looks partitions up
 *      again by name (topic deletion notifies before freeing; a deleted
 *      partition is answered UNKNOWN_TOPIC_OR_PARTITION).
 *   3. Waking is by notification only, never polling.  Notifications are
 *      coalesced: many HW moves in one loop turn cost one REBUILD
 *      (replica_deferred.h D3).
 *   4. The parsed request (fetch_state) points into the request frame and
 *      lives in the request arena; the connection keeps both untouched
 *      while the request is deferred.  If the connection dies first,
 *      fetch_cancel releases the events and waiters before the arena goes.
 *   5. The leader throttle's tokens (below) are charged for the build
 *      that is sent: each build counts its throttled bytes
 *      (st->throttled), fetch_reset forgets them with the body
 *      (invariant 1), fetch_free charges what is left.
 *
 * Replica fetches (cluster mode, ReplicaId >= 0: a follower; issue 16).
 * The requester must be one of the partition's replicas and this broker
 * its leader (else NOT_LEADER_OR_FOLLOWER).  It is served up to the LOG
 * END, not the HW, with the same file ranges, and HighWatermark tells it
 * the leader's HW.  Each build reports the follower's FetchOffset (its log
 * end) to daemon/replication/repl_isr.c (HW, ISR) before reading, so the answer carries
 * the HW that fetch moved.  A replica fetch waits on the partition's
 * append waiters (daemon/replica/replica_partition.c invariant 4): appends wake it, not
 * only HW moves.  Standalone, ReplicaId is ignored as before.
 *
 * leader.replication.throttled.rate (bytes/s, dynamic; 0 or unset: none)
 * bounds what this leader serves, to all followers together, of the
 * partitions a reassignment is adding the fetching follower to (Kafka's
 * throttled replicas, daemon/replication/repl_throttle.c): one token bucket per broker
 * (leader_throttle).  A build serves such a partition at most the tokens
 * left (KIP-74's one whole batch may overdraw it) and nothing while the
 * bucket is empty, so the follower's fetch waits as an empty one does
 * (long-poll, then it asks again).  Never blocking, and unset it costs
 * one config lookup per replica fetch build, nothing per partition.
 *
 * Versions.
 *   v0–v3   the old message formats: a consumer that old reads magic 0
 *           (v0–v1) or magic 1 (v2–v3) only, so its partitions' batches
 *           are copied from the files (seg_range_copy, the same ranges) and
 *           down-converted by kp_batch_to_legacy (protocol/legacy.c) into
 *           st->conv, which the records hook copies into the response.
 *           Off the zero-copy path, for those clients only, and counted
 *           in /metrics (sluice_fetch_down_converted_*).  Records below
 *           FetchOffset inside the first batch are left out.
 *   v4–v11  record batches v2, zero copy (the rest of this note).
 *   v12+    flexible; ClusterId is decoded and, as by Kafka's brokers
 *           (only its KRaft controllers check it), not compared.
 *   v13+    topics by TopicId.  Kafka's answers: an id no topic has
 *           (never existed, or deleted) is UNKNOWN_TOPIC_ID for each of
 *           its partitions; an id whose topic name now belongs to a topic
 *           with another id (deleted and re-created while the request
 *           waited) is INCONSISTENT_TOPIC_ID.  The response names topics
 *           by the requested id.
 *   v15+    a follower's ReplicaId comes in the ReplicaState tagged field
 *           (the top-level field is gone); the leader takes either.
 *   v12+/16+ NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry the
 *           partition's CurrentLeader (v12+) and the leaders'
 *           NodeEndpoints (v16+, KIP-951: daemon/api/api_leader_hint.c).
 *   v17     ReplicaDirectoryId (JBOD) is decoded and ignored.
 *
 * Sessions (KIP-227) are not offered: SessionId 0 in every response, so
 * clients send full requests.  A request naming a session gets
 * FETCH_SESSION_ID_NOT_FOUND, as from a broker that evicted it.
 */
#include "daemon/view/view_broker_configs.h"
#include "daemon/view/view.h"
#include "daemon/api/api_leader_hint.h"
#include "daemon/net/net_metrics.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_deferred.h"
#include "daemon/replication/repl_throttle.h"
#include "daemon/security/sec_authz.h"
#include "daemon/request.h"
#include "daemon/security/sec_peer.h"
#include "kp_msgs.h"

#include <stdlib.h>
#include <string.h>

#define FETCH_MAX_RANGES 16       /* per partition per response */

/* leader.replication.throttled.rate's bucket: one per broker process. */
static bk_tbucket leader_throttle;

typedef struct fetch_part {
    int32_t topic;                /* index into fetch_state.topics */
    int32_t partition;
    int32_t current_leader_epoch; /* -1: not checked */
    int64_t fetch_offset;
    int32_t max_bytes;
    int first_range, nranges;     /* this build's ranges, in fetch_state.ranges */
    size_t conv_off, conv_len;    /* v0-3: this build's messages, in fetch_state.conv */
    bk_waiter w;                  /* on fetch_state.wait while it waits */
} fetch_part;

typedef struct fetch_topic {
    kp_str name;                  /* in the request frame; v13+: a copy of the
                                     name the id had at parse time (r->arena) */
    uint8_t id[16];               /* v13+: as requested */
    int16_t error;                /* at parse time: TOPIC_AUTHORIZATION_FAILED;
                                     v13+: UNKNOWN_TOPIC_ID */
    int32_t nparts;
} fetch_topic;

typedef struct fetch_state {
    bk_req *r;
    int32_t max_wait_ms;
    int32_t min_bytes;
    int64_t limit;                /* min(MaxBytes, fetch.max.bytes) */
    int8_t isolation_level;
    int16_t error;                /* top-level (v7+) */
    int32_t replica_id;           /* >= 0: a follower (cluster mode); else -1 */
    /* leader.replication.throttled.rate: > 0 in a build that throttles;
     * the bucket's tokens at its start; the bytes it served throttled. */
    int64_t throttle_rate, throttle_tokens, throttled;
    int32_t ntopics, nparts;
    fetch_topic *topics;
    fetch_part *parts;
    /* The response being built (kp_enc_FetchResponse), one entry per
     * requested topic and partition; Records.p is the fetch_part whose
     * ranges fetch_splice splices in (protocol/msgs.c M5). */
    kp_FetchResponse_FetchableTopicResponse *rtopics;
    kp_FetchResponse_PartitionData *rparts;
    seg_range *ranges;            /* this build's file ranges, in order (r->arena) */
    int nranges, cap_ranges, ranges_sent;
    size_t out_base;              /* r->out->len when the handler started */
    int64_t deadline_us;
    bk_deferred wait;             /* MaxWaitMs, and the parts' waiters */
    /* v0-3 only (down-conversion): file bytes read, messages written, and
     * the iterator that decompresses; freed with the state. */
    kp_buf raw, conv;
    kp_rec_iter it;
    bk_hint_nodes hints;          /* v16+: leaders named by this build */
} fetch_state;

/* ---- parsing --------------------------------------------------------------- */

static void fetch_rebuild(void *arg);         /* long-poll, below */
static void fetch_timeout(void *arg);

/* Decodes the request with the generated codec (its arrays in r->arena,
 * which lives until the request is done, deferred or not) and copies what
 * the handler keeps into one allocation: each partition needs a waiter of
 * its own while the request waits.  NULL: malformed or out of memory. */
static fetch_state *fetch_parse(bk_req *r)
{
    int16_t v = r->hdr.RequestApiVersion;
    kp_FetchRequest q;
    if (kp_dec_FetchRequest(&r->body, v, &q, &r->arena) != 0)
        return NULL;
    int32_t ntopics = q.Topics_count < 0 ? 0 : q.Topics_count;
    size_t nparts = 0;
    for (int32_t t = 0; t < ntopics; t++)
        nparts += q.Topics[t].Partitions_count < 0 ? 0 : (size_t)q.Topics[t].Partitions_count;
    size_t sz = sizeof(fetch_state) + (size_t)ntopics * sizeof(fetch_topic) +
                nparts * sizeof(fetch_part) +
                (size_t)ntopics * sizeof(kp_FetchResponse_FetchableTopicResponse) +
                nparts * sizeof(kp_FetchResponse_PartitionData);
    /* In the request arena, which lives until the request is done
     * (deferred or not) and keeps its chunk: no malloc per fetch. */
    fetch_state *st = kp_arena_alloc(&r->arena, sz);
    if (!st)
        return NULL;
    st->r = r;
    st->ntopics = ntopics;
    st->nparts = (int32_t)nparts;
    st->parts = (fetch_part *)(st + 1);
    st->topics = (fetch_topic *)(st->parts + st->nparts);
    st->rtopics = (kp_FetchResponse_FetchableTopicResponse *)(st->topics + ntopics);
    st->rparts = (kp_FetchResponse_PartitionData *)(st->rtopics + ntopics);
    st->max_wait_ms = q.MaxWaitMs;
    st->min_bytes = q.MinBytes;
    st->isolation_level = q.IsolationLevel;
    kp_buf_init(&st->raw);
    kp_buf_init(&st->conv);
    kp_rec_iter_init0(&st->it);
    replica_deferred_init(&st->wait, fetch_rebuild, fetch_timeout, st);
    int32_t replica = v >= 15 ? q.ReplicaState.ReplicaId : q.ReplicaId;
    st->replica_id = bk_cluster_mode(r->b) && replica >= 0 ? replica : -1;
    int64_t cap = r->b->cfg->fetch_max_bytes;
    st->limit = q.MaxBytes < cap ? q.MaxBytes : cap;    /* MaxBytes: v3+, else INT32_MAX */
    if (st->limit < 0)
        st->limit = 0;
    st->error = KP_NONE;
    if (q.SessionId != 0)
        st->error = KP_FETCH_SESSION_ID_NOT_FOUND;
    else if (q.SessionEpoch > 0)
        st->error = KP_INVALID_FETCH_SESSION_EPOCH;
    bool cluster_action = replica >= 0 && BK_AUTHZ_CLUSTER(r, BK_OP_CLUSTER_ACTION);
    fetch_part *fp = st->parts;
    for (int32_t t = 0; t < ntopics; t++) {
        const kp_FetchRequest_FetchTopic *qt = &q.Topics[t];
        st->topics[t].name = qt->Topic;
        st->topics[t].nparts = qt->Partitions_count < 0 ? 0 : qt->Partitions_count;
        st->topics[t].error = KP_NONE;
        if (v >= 13) {
            memcpy(st->topics[t].id, qt->TopicId, 16);
            const bk_topic *bt = view_topic_find_id(r->b, qt->TopicId);
            st->topics[t].name = KP_STR_NULL;
            if (!bt) {
                st->topics[t].error = KP_UNKNOWN_TOPIC_ID;
            } else {
                size_t n = strlen(bt->name);
                char *name = kp_arena_alloc(&r->arena, n + 1);
                if (!name)
                    return NULL;
                memcpy(name, bt->name, n);
                st->topics[t].name = (kp_str){ name, (int32_t)n };
            }
        }
        /* A follower needs CLUSTER_ACTION, a consumer READ (Kafka's). */
        if (st->topics[t].error == KP_NONE && !(replica >= 0 ? cluster_action
                : sec_authorized(r, BK_RES_TOPIC, st->topics[t].name, BK_OP_READ)))
            st->topics[t].error = KP_TOPIC_AUTHORIZATION_FAILED;
        for (int32_t i = 0; i < st->topics[t].nparts; i++, fp++) {
            const kp_FetchRequest_FetchPartition *qp = &qt->Partitions[i];
            /* CurrentLeaderEpoch is v9+; below it stays -1: not checked. */
            *fp = (fetch_part){ .topic = t, .partition = qp->Partition,
                                .current_leader_epoch = qp->CurrentLeaderEpoch,
                                .fetch_offset = qp->FetchOffset,
                                .max_bytes = qp->PartitionMaxBytes };
        }
    }
    return st;
}

/* ---- building the response -------------------------------------------------- */

typedef struct fetch_acc {
    int64_t total;                /* record bytes in the response so far */
    bool any_error;
} fetch_acc;

/* Keeps one partition's ranges for the encoder (fetch_splice).  false:
 * out of memory, nothing kept. */
static bool fetch_keep_ranges(fetch_state *st, fetch_part *fp, seg_range *rg, int n)
{
    fp->first_range = st->nranges;
    fp->nranges = 0;
    if (n == 0)
        return true;
    if (st->nranges + n > st->cap_ranges) {
        int cap = st->cap_ranges ? st->cap_ranges * 2 : 2 * FETCH_MAX_RANGES;
        while (cap < st->nranges + n)
            cap *= 2;
        /* From the request arena: no malloc in the steady state; the old
         * array stays there until the request is done (capacity doubles,
         * so at most as much again). */
        seg_range *nr = kp_arena_alloc(&st->r->arena, (size_t)cap * sizeof *nr);
        if (!nr)
            return false;
        if (st->nranges)
            memcpy(nr, st->ranges, (size_t)st->nranges * sizeof *nr);
        st->ranges = nr;
        st->cap_ranges = cap;
    }
    memcpy(st->ranges + st->nranges, rg, (size_t)n * sizeof *rg);
    st->nranges += n;
    fp->nranges = n;
    return true;
}

/* v13+: the topic the request names by id, checked at every build
 * (invariant 2: a rebuild looks it up again). */
static int16_t fetch_topic_error(bk_broker *b, int16_t v, const fetch_topic *ft)
{
    if (ft->error != KP_NONE)
        return ft->error;
    if (v < 13)
        return KP_NONE;
    const bk_topic *t = view_topic_find(b, ft->name.p, (size_t)ft->name.len);
    if (!t)
        return KP_UNKNOWN_TOPIC_ID;               /* deleted since */
    if (memcmp(t->id, ft->id, 16) != 0)
        return KP_INCONSISTENT_TOPIC_ID;          /* re-created since */
    return KP_NONE;
}

/* Appends the range's bytes to out.  A file that shrank meanwhile
 * (retention) gives fewer: what was read is served.  0 or -1 (no memory). */
static int read_range(const seg_range *rg, kp_buf *out)
{
    uint8_t *d = kp_buf_reserve(out, rg->len);
    if (!d)
        return -1;
    out->len += seg_range_copy(rg, d);
    return 0;
}

/* Fetch v0-3: the partition's ranges as magic 0 (v0-1) or 1 (v2-3)
 * messages in st->conv.  Returns the bytes written, or -1 (a read or
 * decode failure; nothing kept). */
static int64_t down_convert(fetch_state *st, fetch_part *fp, seg_range *rg, int n)
{
    int magic = st->r->hdr.RequestApiVersion >= 2 ? 1 : 0;
    st->raw.len = 0;
    for (int i = 0; i < n; i++)
        if (read_range(&rg[i], &st->raw) != 0)
            return -1;
    size_t start = st->conv.len;
    for (size_t at = 0; at < st->raw.len;) {
        int64_t size = kp_batch_size(st->raw.data + at, st->raw.len - at);
        if (size < 0 || (size_t)size > st->raw.len - at)
            break;                /* a cut-off tail: the next fetch gets it */
        if (kp_batch_to_legacy(st->raw.data + at, (size_t)size, magic, fp->fetch_offset,
                               &st->it, &st->conv) != 0) {
            st->conv.len = start;
            return -1;
        }
        at += (size_t)size;
    }
    fp->conv_off = start;
    fp->conv_len = st->conv.len - start;
    net_metrics_converted(KP_API_FETCH, fp->conv_len);
    return (int64_t)fp->conv_len;
}

/* The aborted transactions of [from, to) into *out (r->arena).  Returns
 * how many (0 when the arena is out of memory: the consumer then sees the
 * aborted records, so that is logged). */
static int32_t fetch_aborted(bk_req *r, bk_partition *p, int64_t from, int64_t to,
                             kp_FetchResponse_AbortedTransaction **out)
{
    int n = seg_txn_collect(p->log, from, to, NULL, 0);
    if (n == 0)
        return 0;
    seg_aborted_txn *e = kp_arena_alloc(&r->arena, (size_t)n * sizeof *e);
    kp_FetchResponse_AbortedTransaction *a =
        kp_arena_alloc(&r->arena, (size_t)n * sizeof *a);
    if (!e || !a) {
        BK_ERROR("%s-%d: no memory for %d aborted transactions of a read_committed "
                 "fetch", p->topic->name, p->id, n);
        return 0;
    }
    seg_txn_collect(p->log, from, to, e, n);
    for (int i = 0; i < n; i++) {
        memset(&a[i], 0, sizeof a[i]);
        a[i].ProducerId = e[i].producer_id;
        a[i].FirstOffset = e[i].first_offset;
    }
    *out = a;
    return n;
}

static void fetch_partition(bk_req *r, fetch_state *st, fetch_part *fp,
                            fetch_acc *acc, kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = r->b;
    int16_t v = r->hdr.RequestApiVersion;
    int16_t err = KP_NONE;
    int64_t hw = -1, lso = -1, log_start = -1;
    seg_range ranges[FETCH_MAX_RANGES];
    int nranges = 0;
    int64_t bytes = 0;

    bk_partition *p = NULL;
    int64_t upto = -1;            /* read bound: HW (consumers), log end (followers) */
    int64_t end = -1;
    const fetch_topic *ft = &st->topics[fp->topic];
    err = fetch_topic_error(b, v, ft);
    if (err == KP_NONE)
        err = (int16_t)view_leader_replica(b, ft->name, fp->partition, &p);
    if (p && st->replica_id >= 0 && !repl_isr_is_replica(p, st->replica_id)) {
        err = KP_NOT_LEADER_OR_FOLLOWER;          /* Kafka: not an assigned replica */
        p = NULL;
    }
    if (p) {
        end = seg_log_end(p->log);
        log_start = seg_log_start(p->log);
        if (st->replica_id >= 0 && fp->fetch_offset >= log_start && fp->fetch_offset <= end &&
            (fp->current_leader_epoch < 0 || fp->current_leader_epoch == p->leader_epoch))
            repl_isr_follower_fetched(b, p, st->replica_id, fp->fetch_offset, end);
        hw = p->high_watermark;
        lso = replica_partition_lso(p);          /* O(1) */
        /* read_committed is served up to the LSO (v4+; IsolationLevel is 0
         * before), read_uncommitted up to the HW, followers to the end. */
        upto = st->replica_id >= 0 ? end : st->isolation_level == 1 ? lso : hw;
        if (fp->current_leader_epoch >= 0 &&
            fp->current_leader_epoch != p->leader_epoch)
            err = fp->current_leader_epoch < p->leader_epoch
                      ? KP_FENCED_LEADER_EPOCH : KP_UNKNOWN_LEADER_EPOCH;
        else if (v < 10 && p->topic->cfg.compression_type == KP_CODEC_ZSTD)
            err = KP_UNSUPPORTED_COMPRESSION_TYPE;     /* protocol/README.md §7.2 */
        else if (fp->fetch_offset < log_start || fp->fetch_offset > end)
            err = KP_OFFSET_OUT_OF_RANGE;  /* as Kafka: between HW and log end is empty */
    }

    bool throttled = false;
    int64_t tokens = 0;
    if (err == KP_NONE && st->throttle_rate > 0 && fp->fetch_offset < upto) {
        const bk_pview *pv = view_partition(b, ft->name, fp->partition);
        throttled = pv && repl_throttled_replica(pv, st->replica_id);
        tokens = st->throttle_tokens - st->throttled;
    }
    if (err == KP_NONE && fp->fetch_offset < upto && (!throttled || tokens > 0)) {
        int64_t remaining = st->limit - acc->total;
        int64_t budget = fp->max_bytes < remaining ? fp->max_bytes : remaining;
        if (throttled && tokens < budget)
            budget = tokens;
        if (budget < 0)
            budget = 0;
        bool first = acc->total == 0;   /* KIP-74: one batch whatever its size */
        int64_t off = fp->fetch_offset;
        while (nranges < FETCH_MAX_RANGES && off < upto) {
            int64_t want = budget - bytes;
            if (want <= 0 && !(first && nranges == 0))
                break;
            seg_range rg;
            /* Upper bound = HW for consumers: nothing above it is served
             * to them (segments/read.c R1); the log end for followers. */
            int rc = seg_read(p->log, off, upto, (size_t)(want > 0 ? want : 0), &rg);
            if (rc != 0) {
                if (nranges == 0)
                    err = rc == KP_OFFSET_OUT_OF_RANGE || rc == SEG_E_RANGE
                              ? KP_OFFSET_OUT_OF_RANGE : KP_KAFKA_STORAGE_ERROR;
                break;
            }
            if (rg.len == 0)
                break;
            if ((int64_t)rg.len > want && !(first && nranges == 0)) {
                seg_range_release(&rg);     /* left for the next fetch */
                break;
            }
            ranges[nranges++] = rg;
            bytes += (int64_t)rg.len;
            /* Go on in the next segment only if this range stopped at the
             * end of its segment with budget left (Kafka itself stops at a
             * segment end; we need not). */
            if ((int64_t)rg.len >= want || !rg.seg_end || rg.next <= off)
                break;
            off = rg.next;
        }
        if (err != KP_NONE) {
            for (int i = 0; i < nranges; i++)
                seg_range_release(&ranges[i]);
            nranges = 0;
            bytes = 0;
        }
    }
    int32_t leader_id = -1, leader_epoch = -1;
    if (v >= 12 && (err == KP_NOT_LEADER_OR_FOLLOWER || err == KP_FENCED_LEADER_EPOCH))
        api_leader_hint(b, ft->name, fp->partition, &leader_id, &leader_epoch, &st->hints);
    fp->conv_off = fp->conv_len = 0;
    if (v < 4 && nranges > 0) {
        /* The old formats: convert, and send the messages instead. */
        bytes = down_convert(st, fp, ranges, nranges);
        for (int i = 0; i < nranges; i++)
            seg_range_release(&ranges[i]);
        nranges = 0;
        if (bytes < 0) {
            err = KP_KAFKA_STORAGE_ERROR;
            bytes = 0;
        }
    }
    if (!fetch_keep_ranges(st, fp, ranges, nranges)) {
        for (int i = 0; i < nranges; i++)         /* out of memory: none now, */
            seg_range_release(&ranges[i]);        /* the consumer asks again */
        bytes = 0;
    }
    if (err != KP_NONE)
        acc->any_error = true;

    /* read_committed: the aborted transactions overlapping the records
     * sent, from the in-memory index (segments/txnindex.c), so the consumer
     * drops their records; no message byte is read here. */
    kp_FetchResponse_AbortedTransaction *aborted = NULL;
    int32_t naborted = 0;
    if (p && err == KP_NONE && st->isolation_level == 1 && v >= 4 && bytes > 0)
        naborted = fetch_aborted(r, p, fp->fetch_offset,
                                 nranges > 0 ? ranges[nranges - 1].next : upto, &aborted);
    /* Fields at their JSON defaults where v4-11 lack them (gen_msgs.py G1). */
    *rp = (kp_FetchResponse_PartitionData){
        .PartitionIndex = fp->partition,
        .ErrorCode = err,
        .HighWatermark = hw,
        .LastStableOffset = lso,
        .LogStartOffset = v >= 5 ? log_start : -1,
        .DivergingEpoch = { .Epoch = -1, .EndOffset = -1 },
        .CurrentLeader = { .LeaderId = leader_id, .LeaderEpoch = leader_epoch },
        .SnapshotId = { .EndOffset = -1, .Epoch = -1 },
        .PreferredReadReplica = -1,
        .Records = { (const char *)fp, (int32_t)bytes },
        .AbortedTransactions = aborted,
        .AbortedTransactions_count = naborted,
    };
    if (p)
        p->bytes_out += (uint64_t)bytes;
    if (throttled)
        st->throttled += bytes;
    acc->total += bytes;
}

/* The encoder's records hook (protocol/msgs.c M5): it has written the
 * length prefix of a partition's Records; the partition's file ranges go
 * right after it, in order. */
static void fetch_splice(kp_buf *o, kp_str s, void *arg)
{
    fetch_state *st = arg;
    const fetch_part *fp = (const fetch_part *)s.p;
    if (fp->conv_len > 0)                         /* v0-3: converted messages */
        kp_wr_raw(o, st->conv.data + fp->conv_off, fp->conv_len);
    for (int i = 0; i < fp->nranges; i++)
        net_req_add_range(st->r, &st->ranges[fp->first_range + i]);
    st->ranges_sent = fp->first_range + fp->nranges;
}

/* Writes the whole response body.  Returns the record bytes in it. */
static int64_t fetch_build(bk_req *r, fetch_state *st, bool *any_error)
{
    kp_buf *o = r->out;
    int16_t v = r->hdr.RequestApiVersion;
    fetch_acc acc = { 0, false };
    kp_FetchResponse m;
    kp_init_FetchResponse(&m);
    m.ErrorCode = st->error;                      /* v7+; set only from v7 fields */
    m.SessionId = 0;                              /* no sessions */
    st->nranges = st->ranges_sent = 0;
    st->conv.len = 0;
    st->hints.n = 0;
    st->throttled = 0;
    st->throttle_rate = st->replica_id >= 0
        ? view_broker_config_rate(st->r->b, "leader.replication.throttled.rate") : 0;
    if (st->throttle_rate > 0)
        st->throttle_tokens = repl_tbucket_refill(&leader_throttle, st->throttle_rate,
                                                bk_mono_us());
    if (st->error != KP_NONE) {
        *any_error = true;
    } else {
        kp_FetchResponse_PartitionData *rp = st->rparts;
        fetch_part *fp = st->parts;
        for (int32_t t = 0; t < st->ntopics; t++) {
            st->rtopics[t] = (kp_FetchResponse_FetchableTopicResponse){
                .Topic = st->topics[t].name, .Partitions = rp,
                .Partitions_count = st->topics[t].nparts,
            };
            memcpy(st->rtopics[t].TopicId, st->topics[t].id, 16);
            for (int32_t i = 0; i < st->topics[t].nparts; i++, fp++, rp++)
                fetch_partition(r, st, fp, &acc, rp);
        }
        m.Responses = st->rtopics;
        m.Responses_count = st->ntopics;
        *any_error = acc.any_error;
    }
    kp_FetchResponse_NodeEndpoint ne[BK_HINT_MAX_NODES];
    if (v >= 16 && st->hints.n > 0) {
        bk_broker_info info[BK_HINT_MAX_NODES];
        int n = api_hint_endpoints(r->b, net_conn_listener(r->conn), &st->hints, info);
        BK_HINT_FILL_ENDPOINTS(ne, info, n);
        m.NodeEndpoints = ne;
        m.NodeEndpoints_count = n;
    }
    o->records = fetch_splice;
    o->records_arg = st;
    kp_enc_FetchResponse(o, v, &m);
    o->records = NULL;
    o->records_arg = NULL;
    /* A failed encode (out of memory: the connection closes) may stop
     * before some ranges were spliced; their references are ours. */
    for (int i = st->ranges_sent; i < st->nranges; i++)
        seg_range_release(&st->ranges[i]);
    st->nranges = 0;
    return acc.total;
}

/* Invariant 1: drops the body and its file ranges. */
static void fetch_reset(bk_req *r, fetch_state *st)
{
    for (int i = 0; i < r->npieces; i++)
        seg_range_release(&r->pieces[i].range);
    r->npieces = 0;
    r->out->len = st->out_base;
    r->out->err = 0;
    st->throttled = 0;            /* invariant 5 */
}

/* ---- long-poll ---------------------------------------------------------------- */

static void fetch_free(fetch_state *st)
{
    leader_throttle.tokens -= st->throttled;      /* invariant 5: what was sent */
    st->throttled = 0;
    kp_buf_free(&st->raw);
    kp_buf_free(&st->conv);
    kp_rec_iter_free(&st->it);
    replica_deferred_free(&st->wait);
    /* st itself is in r->arena (fetch_parse). */
}

static void fetch_cancel(bk_req *r)
{
    fetch_state *st = r->state;
    r->state = NULL;
    r->cancel = NULL;
    if (st)
        fetch_free(st);
}

/* Sends the (already built) response and forgets the request. */
static void fetch_finish(fetch_state *st)
{
    bk_req *r = st->r;
    r->state = NULL;
    r->cancel = NULL;
    fetch_free(st);
    net_req_finish(r);             /* may start the next request on r */
}

/* Links one waiter per requested partition that exists.  false if one is
 * missing (the caller answers at once: the rebuild reports it). */
static bool fetch_watch_all(fetch_state *st)
{
    bk_broker *b = st->r->b;
    for (int32_t i = 0; i < st->nparts; i++) {
        fetch_part *fp = &st->parts[i];
        bk_partition *p;
        if (view_leader_replica(b, st->topics[fp->topic].name, fp->partition, &p)) {
            replica_deferred_unwatch(&st->wait);
            return false;
        }
        /* A follower reads to the log end: its appends are news. */
        replica_deferred_watch(&st->wait, p, &fp->w, st->replica_id >= 0);
    }
    return true;
}

/* The loop turn after a watched partition moved (no waiter linked). */
static void fetch_rebuild(void *arg)
{
    fetch_state *st = arg;
    bk_req *r = st->r;
    fetch_reset(r, st);
    bool any_error = false;
    int64_t bytes = fetch_build(r, st, &any_error);
    if (bytes >= st->min_bytes || any_error || bk_mono_us() >= st->deadline_us ||
        r->b->stopping) {
        fetch_finish(st);
        return;
    }
    fetch_reset(r, st);
    if (!fetch_watch_all(st)) {
        fetch_build(r, st, &any_error);
        fetch_finish(st);
    }
}

static void fetch_timeout(void *arg)
{
    fetch_state *st = arg;
    bk_req *r = st->r;
    fetch_reset(r, st);
    bool any_error = false;
    fetch_build(r, st, &any_error);
    fetch_finish(st);
}

/* Shutdown: answer with what there is, on the next loop turn. */
static void fetch_expire(bk_req *r)
{
    fetch_state *st = r->state;
    replica_deferred_wake(&st->wait);
}

/* Turns a built-but-too-small response into a wait.  false: could not
 * (the caller answers now with what it built). */
static bool fetch_defer(bk_req *r, fetch_state *st)
{
    st->deadline_us = bk_mono_us() + (int64_t)st->max_wait_ms * 1000;
    if (replica_deferred_arm(&st->wait, r->b->base, st->max_wait_ms) != 0)
        return false;
    fetch_reset(r, st);
    if (!fetch_watch_all(st)) {
        bool any_error;
        fetch_build(r, st, &any_error);
        return false;
    }
    r->state = st;
    r->cancel = fetch_cancel;
    r->expire = fetch_expire;
    return true;
}

int api_handle_fetch(bk_req *r)
{
    fetch_state *st = fetch_parse(r);
    if (!st)
        return BK_CLOSE;          /* malformed (or out of memory) */
    st->out_base = r->out->len;
    bool any_error = false;
    int64_t bytes = fetch_build(r, st, &any_error);
    if (bytes >= st->min_bytes || st->max_wait_ms <= 0 || any_error ||
        r->b->stopping || !fetch_defer(r, st)) {
        fetch_free(st);
        return BK_RESPOND;
    }
    return BK_DEFER;
}
