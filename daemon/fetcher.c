/*
 * daemon/fetcher.c — the replica fetchers: a follower's copy of what its
 * leaders append (issue 16, follower side).
 *
 * In cluster mode every partition this broker hosts (bk_pview.local) whose
 * leader is another live broker is followed.  Partitions are grouped by
 * leader: one fetcher per leader broker, with one connection to that
 * broker's host/port from the cluster view and at most one request in
 * flight, a Fetch v11 carrying every partition followed from it, which the
 * leader long-polls (replica.fetch.wait.max.ms / replica.fetch.min.bytes).
 * Each answer's batches are appended as they are, with the leader's
 * offsets (seg_append_assigned), and the replica's high watermark becomes
 * min(leader's HighWatermark, its own log end).
 *
 * States of a fetcher (one per leader):
 *
 *   CONNECTING ──connected──► READY ──send_fetch──► WAITING ──answer──► READY
 *        ▲                     │ (nothing to fetch: a timer for the
 *        │                     │  earliest paused partition's retry)
 *        └──── BACKOFF ◄───────┴── connection error, EOF, timeout, a frame
 *           (replica.fetch.backoff.ms)  that does not decode (conn_fail)
 *
 * Partitions of a fetcher are paused after a partition error:
 *   FENCED_LEADER_EPOCH: our view is older than the leader's; until the
 *     view of the partition changes (its leader, epoch or znode version),
 *     which it will, since the leader saw a newer state in ZooKeeper.
 *   NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_LEADER_EPOCH:
 *     until the view changes, or replica.fetch.backoff.ms at most: the
 *     leader's own mirror applies the same ZooKeeper change a little later
 *     than ours may (a topic just created), and no further change would
 *     come to wake us.
 *   OFFSET_OUT_OF_RANGE: ahead of the leader's high watermark → truncated
 *     to it (the simple truncation; epoch-based truncation comes later),
 *     then fetched again; behind the leader's log start → segments/ cannot
 *     restart a log above its end, so it is logged and paused until the
 *     view changes.
 *   Any other error (storage, a local append that failed): backoff.
 *
 * Invariants:
 *   F1. Nothing is appended to a replica unless, when the answer arrives,
 *       the view still has it local and led by this fetcher's broker, and
 *       its log end is the FetchOffset the request carried.  So a partition
 *       whose leadership moves to this broker (or elsewhere), or that was
 *       deleted (and maybe recreated) while a fetch was in flight, is never
 *       touched by that fetch: answers are looked up again by name (view.c,
 *       V3), never through pointers kept across the loop.
 *   F2. At most one connection and one request in flight per leader; a
 *       fetcher with no partitions left is closed and freed.
 *   F3. The append path allocates nothing per answer: the frame buffer,
 *       the decode arena and the request buffers are the fetcher's and are
 *       reused (grown, never shrunk, while the fetcher lives).
 *   F4. Standalone mode has no fetchers (bk_fetchers_start is only called
 *       by cl_start).
 *   F5. Partitions are followed only while the mirror is in step with
 *       ZooKeeper in this session (cl->synced): a recomputation before the
 *       first resync, or after the session expired, follows nothing.
 *       mr_resync_done ends with cl_brokers_changed, which recomputes.
 */
#include "daemon/fetcher.h"
#include "daemon/cl.h"
#include "daemon/replica.h"
#include "daemon/producer_state.h"
#include "kp_msgs.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define FE_HOST_MAX 256
/* Fetch v11: the newest without flexible headers and with every field the
 * contract names (CurrentLeaderEpoch, LogStartOffset, RackId). */
#define FE_FETCH_VERSION 11
/* Beyond replica.fetch.wait.max.ms, how long an answer may take before
 * the connection is given up (Kafka's replica.socket.timeout.ms default). */
#define FE_SOCKET_TIMEOUT_MS 30000
/* Response framing overhead allowed above the byte limits asked for. */
#define FE_FRAME_SLACK (1 << 20)

enum fe_state { FE_CONNECTING, FE_READY, FE_WAITING, FE_BACKOFF };

typedef struct fe_part {
    char topic[MD_TOPIC_NAME_MAX + 1];
    int32_t partition;
    int32_t leader_epoch, zk_version;    /* the view's, last recomputed */
    int64_t retry_us;                    /* paused until (0: active;
                                            INT64_MAX: until the view changes) */
    int64_t fetch_offset;                /* in the request in flight */
    int32_t fetch_epoch;                 /* CurrentLeaderEpoch it carried */
    bool in_request, seen;
} fe_part;

typedef struct fe_fetcher {
    struct fe_set *set;
    int32_t leader;
    char host[FE_HOST_MAX];
    int32_t port;
    enum fe_state state;
    struct bufferevent *bev;
    struct event *timer;                 /* backoff, paused partitions */
    fe_part *parts;
    int nparts, cap;
    /* reused buffers (F3) */
    kp_buf out;
    uint8_t *in;
    size_t in_cap;
    kp_arena arena;
    kp_FetchRequest_FetchTopic *ts;
    kp_FetchRequest_FetchPartition *ps;
    int req_cap;
    int32_t corrid;
    int64_t max_batch;                   /* largest max.message.bytes followed */
    struct fe_fetcher *next;
} fe_fetcher;

typedef struct fe_set {
    bk_broker *b;
    struct evdns_base *dns;
    struct event *recompute;             /* zero-delay, coalesces updates */
    fe_fetcher *fetchers;
} fe_set;

/* ---- pure pieces ------------------------------------------------------------- */

bool bk_follow_wanted(const bk_pview *v, int32_t self, bool leader_alive)
{
    return v->local && v->leader >= 0 && v->leader != self && leader_alive;
}

size_t bk_fetch_whole_batches(const uint8_t *buf, size_t len, int64_t *records)
{
    size_t off = 0;
    int64_t n = 0;
    while (len - off >= KP_BATCH_HEADER_SIZE) {
        int64_t size = kp_batch_size(buf + off, len - off);
        kp_batch h;
        if (size < KP_BATCH_HEADER_SIZE || (uint64_t)size > len - off ||
            kp_batch_header(buf + off, len - off, &h) != 0)
            break;
        n += h.RecordsCount > 0 ? h.RecordsCount : 0;
        off += (size_t)size;
    }
    if (records)
        *records = n;
    return off;
}

enum bk_out_of_range bk_fetch_out_of_range(int64_t log_end, int64_t leader_hw,
                                           int64_t leader_log_start)
{
    if (leader_hw >= 0 && log_end > leader_hw)
        return BK_OOR_TRUNCATE;
    if (leader_log_start >= 0 && log_end < leader_log_start)
        return BK_OOR_BELOW_START;
    return BK_OOR_RETRY;
}

/* ---- connection ------------------------------------------------------------------- */

static void send_fetch(fe_fetcher *f);
static void fetcher_connect(fe_fetcher *f);

static void arm_timer(fe_fetcher *f, int64_t delay_ms)
{
    struct timeval tv = { (time_t)(delay_ms / 1000), (suseconds_t)(delay_ms % 1000) * 1000 };
    evtimer_add(f->timer, &tv);
}

static void close_conn(fe_fetcher *f)
{
    if (f->bev)
        bufferevent_free(f->bev);        /* no callback runs after this */
    f->bev = NULL;
    for (int i = 0; i < f->nparts; i++)
        f->parts[i].in_request = false;
}

/* Whatever went wrong with the connection, the fetcher starts over after
 * replica.fetch.backoff.ms: nothing was appended from a broken answer, and
 * the next request asks again from each log end. */
static void conn_fail(fe_fetcher *f, const char *why)
{
    BK_WARN("replica fetcher for broker %d (%s:%d): %s; reconnecting in %d ms",
            f->leader, f->host, f->port, why, f->set->b->cfg->replica_fetch_backoff_ms);
    close_conn(f);
    f->state = FE_BACKOFF;
    arm_timer(f, f->set->b->cfg->replica_fetch_backoff_ms);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    fe_fetcher *f = arg;
    if (f->state == FE_BACKOFF)
        fetcher_connect(f);
    else if (f->state == FE_READY)
        send_fetch(f);
}

/* ---- the answer --------------------------------------------------------------------- */

static fe_part *find_part(fe_fetcher *f, kp_str topic, int32_t partition)
{
    for (int i = 0; i < f->nparts; i++)
        if (f->parts[i].partition == partition && kp_str_eq(topic, f->parts[i].topic))
            return &f->parts[i];
    return NULL;
}

/* until_us INT64_MAX: until the view of the partition changes. */
static void pause_part(fe_part *fp, int64_t until_us)
{
    fp->retry_us = until_us;
}

/* OFFSET_OUT_OF_RANGE: see the note at the top. */
static void out_of_range(fe_fetcher *f, fe_part *fp, bk_partition *p,
                         const kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = f->set->b;
    int64_t end = seg_log_end(p->log);
    int64_t backoff_us = (int64_t)b->cfg->replica_fetch_backoff_ms * 1000;
    switch (bk_fetch_out_of_range(end, rp->HighWatermark, rp->LogStartOffset)) {
    case BK_OOR_TRUNCATE: {
        int rc = seg_truncate(p->log, rp->HighWatermark);
        bk_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
        if (rc != 0) {
            BK_ERROR("partition %s-%d: cannot truncate to the leader's high watermark "
                     "%lld (error %d); not fetching it until its state changes",
                     fp->topic, fp->partition, (long long)rp->HighWatermark, rc);
            pause_part(fp, INT64_MAX);
            return;
        }
        BK_INFO("partition %s-%d: log end %lld was ahead of leader %d's high watermark; "
                "truncated to %lld", fp->topic, fp->partition, (long long)end, f->leader,
                (long long)seg_log_end(p->log));
        bk_producers_reset(b, p);
        if (p->high_watermark > seg_log_end(p->log))
            bk_partition_set_high_watermark(b, p, seg_log_end(p->log));
        return;                          /* fetched again at once */
    }
    case BK_OOR_BELOW_START:
        BK_ERROR("partition %s-%d: log end %lld is below leader %d's log start %lld and "
                 "the log cannot restart there yet; not fetching it until its state "
                 "changes", fp->topic, fp->partition, (long long)end, f->leader,
                 (long long)rp->LogStartOffset);
        pause_part(fp, INT64_MAX);
        return;
    case BK_OOR_RETRY:
        pause_part(fp, bk_mono_us() + backoff_us);
        return;
    }
}

/* One partition of an answer (F1 checked by the caller). */
static void apply_partition(fe_fetcher *f, fe_part *fp, bk_partition *p,
                            const kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = f->set->b;
    int64_t backoff_us = (int64_t)b->cfg->replica_fetch_backoff_ms * 1000;
    switch (rp->ErrorCode) {
    case KP_NONE:
        break;
    case KP_FENCED_LEADER_EPOCH:
        /* The view may have moved on while the request was out: the
         * recomputation for it has run already and none comes again, so
         * it is asked again at once with the view's epoch. */
        if (p->leader_epoch != fp->fetch_epoch) {
            pause_part(fp, 0);
            return;
        }
        BK_INFO("partition %s-%d: leader %d has a newer leader epoch than %d; not "
                "fetching it until this broker's view of it changes", fp->topic,
                fp->partition, f->leader, fp->fetch_epoch);
        pause_part(fp, INT64_MAX);
        return;
    case KP_NOT_LEADER_OR_FOLLOWER:
    case KP_UNKNOWN_TOPIC_OR_PARTITION:
    case KP_UNKNOWN_LEADER_EPOCH:
        pause_part(fp, bk_mono_us() + backoff_us);
        return;
    case KP_OFFSET_OUT_OF_RANGE:
        out_of_range(f, fp, p, rp);
        return;
    default:
        BK_WARN("partition %s-%d: leader %d answered error %d; retrying in %d ms",
                fp->topic, fp->partition, f->leader, rp->ErrorCode,
                b->cfg->replica_fetch_backoff_ms);
        pause_part(fp, bk_mono_us() + backoff_us);
        return;
    }
    int64_t records = 0;
    size_t whole = rp->Records.len > 0
        ? bk_fetch_whole_batches((const uint8_t *)rp->Records.p, (size_t)rp->Records.len,
                                 &records)
        : 0;
    if (whole > 0) {
        /* Cost: one CRC pass per batch (seg_append_assigned checks what it
         * stores) and one write(); the bytes are the frame buffer's. */
        int rc = seg_append_assigned(p->log, (const uint8_t *)rp->Records.p, whole,
                                     bk_now_ms());
        if (rc != 0) {
            BK_ERROR("partition %s-%d: cannot append %zu bytes from leader %d at offset "
                     "%lld (error %d); retrying in %d ms", fp->topic, fp->partition, whole,
                     f->leader, (long long)seg_log_end(p->log), rc,
                     b->cfg->replica_fetch_backoff_ms);
            if (seg_failed(p->log) && seg_reset_error(p->log) != 0)
                BK_ERROR("partition %s-%d: its log stays in the error state",
                         fp->topic, fp->partition);
            pause_part(fp, bk_mono_us() + backoff_us);
            return;
        }
        p->bytes_in += whole;
        /* The producers' sequences go with their batches, so a retry that
         * reaches this replica once it leads is still recognised. */
        if (p->producers && bk_pstate_record(p->producers, (const uint8_t *)rp->Records.p,
                                             whole, bk_now_ms()) != 0)
            BK_WARN("partition %s-%d: out of memory for producer state; retried "
                    "idempotent batches may be appended twice", fp->topic, fp->partition);
        bk_partition_appended(b, p, records);
    }
    int64_t end = seg_log_end(p->log);
    int64_t hw = rp->HighWatermark < end ? rp->HighWatermark : end;
    if (hw >= 0)
        bk_partition_set_high_watermark(b, p, hw);
}

static void handle_answer(fe_fetcher *f, const uint8_t *frame, size_t len)
{
    bk_broker *b = f->set->b;
    kp_rd r;
    kp_rd_init(&r, frame, len);
    int32_t corrid = kp_rd_i32(&r);
    if (!kp_rd_ok(&r) || corrid != f->corrid) {
        conn_fail(f, "answer with an unexpected correlation id");
        return;
    }
    kp_FetchResponse m;
    kp_arena_reset(&f->arena);
    if (kp_dec_FetchResponse(&r, FE_FETCH_VERSION, &m, &f->arena) != 0) {
        conn_fail(f, "malformed Fetch answer");
        return;
    }
    f->state = FE_READY;
    if (m.ErrorCode != KP_NONE) {
        BK_WARN("replica fetcher for broker %d: Fetch failed with error %d; retrying in "
                "%d ms", f->leader, m.ErrorCode, b->cfg->replica_fetch_backoff_ms);
        for (int i = 0; i < f->nparts; i++)
            f->parts[i].in_request = false;
        arm_timer(f, b->cfg->replica_fetch_backoff_ms);
        return;
    }
    int32_t self = b->cfg->broker_id;
    for (int32_t i = 0; i < m.Responses_count; i++) {
        const kp_FetchResponse_FetchableTopicResponse *mt = &m.Responses[i];
        for (int32_t j = 0; j < mt->Partitions_count; j++) {
            const kp_FetchResponse_PartitionData *rp = &mt->Partitions[j];
            fe_part *fp = find_part(f, mt->Topic, rp->PartitionIndex);
            if (!fp || !fp->in_request)
                continue;                /* no longer followed from here */
            fp->in_request = false;
            /* F1: the view as it is now, by name. */
            const bk_pview *v = bk_view_partition(b, mt->Topic, rp->PartitionIndex);
            if (!v || !v->local || v->leader != f->leader || v->leader == self ||
                seg_log_end(v->local->log) != fp->fetch_offset)
                continue;
            apply_partition(f, fp, v->local, rp);
        }
    }
    for (int i = 0; i < f->nparts; i++)
        f->parts[i].in_request = false;  /* any the leader left out: asked again */
    send_fetch(f);
}

static void on_read(struct bufferevent *bev, void *arg)
{
    fe_fetcher *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    bk_broker *b = f->set->b;
    while (f->bev == bev && f->state == FE_WAITING) {
        size_t have = evbuffer_get_length(in);
        uint8_t hdr[4];
        if (have < 4 || evbuffer_copyout(in, hdr, 4) != 4)
            return;
        int64_t size = (int64_t)((uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 |
                                 (uint32_t)hdr[2] << 8 | hdr[3]);
        /* An answer holds at most the bytes asked for, but always a whole
         * first batch, which may be as large as a topic allows. */
        int64_t limit = (int64_t)b->cfg->replica_fetch_response_max_bytes +
                        (int64_t)b->cfg->replica_fetch_max_bytes + f->max_batch +
                        FE_FRAME_SLACK;
        if (size < 4 || size > limit) {
            conn_fail(f, "answer frame of an impossible size");
            return;
        }
        if (have < (size_t)size + 4)
            return;
        if ((size_t)size > f->in_cap) {  /* grown rarely, kept (F3) */
            uint8_t *nb = realloc(f->in, (size_t)size);
            if (!nb) {
                conn_fail(f, "out of memory for an answer");
                return;
            }
            f->in = nb;
            f->in_cap = (size_t)size;
        }
        evbuffer_drain(in, 4);
        evbuffer_remove(in, f->in, (size_t)size);
        handle_answer(f, f->in, (size_t)size);
    }
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    fe_fetcher *f = arg;
    if (bev != f->bev)
        return;
    if ((what & BEV_EVENT_TIMEOUT) && (what & BEV_EVENT_READING) &&
        f->state != FE_WAITING) {
        /* Idle (every partition paused): nothing was due; libevent turned
         * reading off, so on again, to see the leader close. */
        bufferevent_enable(bev, EV_READ);
        return;
    }
    if (what & BEV_EVENT_CONNECTED) {
        BK_INFO("replica fetcher for broker %d: connected to %s:%d (%d partitions)",
                f->leader, f->host, f->port, f->nparts);
        f->state = FE_READY;
        send_fetch(f);
        return;
    }
    conn_fail(f, what & BEV_EVENT_TIMEOUT ? "no answer in time"
                 : what & BEV_EVENT_EOF ? "connection closed by the leader"
                 : "connection error");
}

static void fetcher_connect(fe_fetcher *f)
{
    bk_broker *b = f->set->b;
    close_conn(f);
    f->bev = bufferevent_socket_new(b->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!f->bev) {
        conn_fail(f, "cannot create a socket");
        return;
    }
    bufferevent_setcb(f->bev, on_read, NULL, on_event, f);
    int64_t t = (int64_t)b->cfg->replica_fetch_wait_max_ms + FE_SOCKET_TIMEOUT_MS;
    struct timeval tv = { (time_t)(t / 1000), (suseconds_t)(t % 1000) * 1000 };
    bufferevent_set_timeouts(f->bev, &tv, &tv);
    bufferevent_enable(f->bev, EV_READ | EV_WRITE);
    f->state = FE_CONNECTING;
    /* Name resolution through evdns: nothing blocks the loop. */
    if (bufferevent_socket_connect_hostname(f->bev, f->set->dns, AF_UNSPEC, f->host,
                                            f->port) != 0)
        conn_fail(f, "cannot connect");
}

/* ---- the request ---------------------------------------------------------------------- */

static void send_fetch(fe_fetcher *f)
{
    bk_broker *b = f->set->b;
    if (f->state != FE_READY || !f->bev)
        return;
    if (f->req_cap < f->nparts) {        /* grown with the partitions (F3) */
        int cap = f->nparts;
        kp_FetchRequest_FetchTopic *ts = realloc(f->ts, (size_t)cap * sizeof *ts);
        if (ts)
            f->ts = ts;
        kp_FetchRequest_FetchPartition *ps = realloc(f->ps, (size_t)cap * sizeof *ps);
        if (ps)
            f->ps = ps;
        if (!ts || !ps) {
            conn_fail(f, "out of memory for a request");
            return;
        }
        f->req_cap = cap;
    }
    int64_t now = bk_mono_us(), next_retry = INT64_MAX;
    int n = 0;
    for (int i = 0; i < f->nparts; i++) {
        fe_part *fp = &f->parts[i];
        if (fp->retry_us > now) {
            if (fp->retry_us < next_retry)
                next_retry = fp->retry_us;
            continue;
        }
        fp->retry_us = 0;
        const bk_pview *v = bk_view_partition(b, kp_str_cstr(fp->topic), fp->partition);
        if (!v || !v->local || v->leader != f->leader)
            continue;                    /* the next recomputation drops it */
        seg_log *log = v->local->log;
        fp->fetch_offset = seg_log_end(log);
        fp->fetch_epoch = v->leader_epoch;
        fp->in_request = true;
        f->ps[n] = (kp_FetchRequest_FetchPartition){
            .Partition = fp->partition, .CurrentLeaderEpoch = fp->fetch_epoch,
            .FetchOffset = fp->fetch_offset, .LastFetchedEpoch = -1,
            .LogStartOffset = seg_log_start(log),
            .PartitionMaxBytes = b->cfg->replica_fetch_max_bytes,
        };
        f->ts[n] = (kp_FetchRequest_FetchTopic){
            .Topic = kp_str_cstr(fp->topic), .Partitions = &f->ps[n], .Partitions_count = 1,
        };
        n++;
    }
    if (n == 0) {                        /* all paused: wake for the first retry */
        if (next_retry != INT64_MAX)
            arm_timer(f, (next_retry - now) / 1000 + 1);
        return;
    }
    kp_FetchRequest q;
    kp_init_FetchRequest(&q);
    q.ReplicaId = b->cfg->broker_id;
    q.MaxWaitMs = b->cfg->replica_fetch_wait_max_ms;
    q.MinBytes = b->cfg->replica_fetch_min_bytes;
    q.MaxBytes = b->cfg->replica_fetch_response_max_bytes;
    q.IsolationLevel = 0;
    q.SessionId = 0;
    q.SessionEpoch = -1;                 /* no fetch sessions */
    q.Topics = f->ts;
    q.Topics_count = n;
    q.RackId = (kp_str){ "", 0 };
    if (++f->corrid < 0)
        f->corrid = 0;
    char client_id[32];
    snprintf(client_id, sizeof client_id, "broker-%d-fetcher-0", b->cfg->broker_id);
    kp_buf_reset(&f->out);
    size_t frame = kp_wr_i32_placeholder(&f->out);
    kp_req_hdr_write(&f->out, KP_API_FETCH, FE_FETCH_VERSION, f->corrid, client_id);
    kp_enc_FetchRequest(&f->out, FE_FETCH_VERSION, &q);
    kp_wr_i32_at(&f->out, frame, (int32_t)(f->out.len - frame - 4));
    if (f->out.err || bufferevent_write(f->bev, f->out.data, f->out.len) != 0) {
        conn_fail(f, "cannot send a Fetch");
        return;
    }
    f->state = FE_WAITING;
}

/* ---- the set of fetchers ------------------------------------------------------------- */

static void fetcher_free(fe_fetcher *f)
{
    close_conn(f);
    if (f->timer)
        event_free(f->timer);
    kp_buf_free(&f->out);
    kp_arena_free(&f->arena);
    free(f->in);
    free(f->ts);
    free(f->ps);
    free(f->parts);
    free(f);
}

static fe_fetcher *fetcher_get(fe_set *s, int32_t leader)
{
    for (fe_fetcher *f = s->fetchers; f; f = f->next)
        if (f->leader == leader)
            return f;
    fe_fetcher *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->set = s;
    f->leader = leader;
    f->port = -1;
    f->state = FE_BACKOFF;               /* not connected yet */
    f->timer = evtimer_new(s->b->base, on_timer, f);
    if (!f->timer) {
        free(f);
        return NULL;
    }
    kp_buf_init(&f->out);
    kp_arena_init(&f->arena, 0);
    f->next = s->fetchers;
    s->fetchers = f;
    return f;
}

/* A replica that starts following a leader (a new leader, a new epoch)
 * first cuts its log back to its high watermark, as Kafka's followers did
 * before leader epochs: what lies above it may never have been committed
 * and may differ from the new leader's log at the same offsets, while
 * everything at or below it is in every ISR member's log.  The cut part
 * is fetched again from the leader.  (Leader epochs, issue 16, will cut
 * exactly at the divergence instead.)  A follower thus cut below the
 * leader's high watermark is dropped from the ISR by the leader
 * (cl_isr.c) until it has caught up again. */
static void start_following(fe_fetcher *f, bk_partition *p, int32_t epoch)
{
    bk_broker *b = f->set->b;
    int64_t end = seg_log_end(p->log), hw = p->high_watermark;
    if (end <= hw)
        return;
    int rc = seg_truncate(p->log, hw);
    bk_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
    if (rc != 0) {
        BK_ERROR("partition %s-%d: cannot cut the log back to its high watermark %lld "
                 "(error %d) before following broker %d", p->topic->name, p->id,
                 (long long)hw, rc, f->leader);
        return;
    }
    bk_producers_reset(b, p);
    BK_INFO("partition %s-%d: following broker %d (leader epoch %d): log end %lld cut "
            "back to the high watermark %lld; the rest comes from the leader",
            p->topic->name, p->id, f->leader, (int)epoch, (long long)end,
            (long long)seg_log_end(p->log));
}

static void follow(fe_fetcher *f, const bk_topic *t, int32_t i, const bk_pview *v)
{
    /* A broker in its controlled shutdown starts following nothing new
     * (cl_leaders.c): following a new leader would first cut its log. */
    bool leaving = bk_cluster_leaving(f->set->b);
    for (int k = 0; k < f->nparts; k++) {
        fe_part *fp = &f->parts[k];
        if (fp->partition == i && !strcmp(fp->topic, t->name)) {
            if (leaving && fp->leader_epoch != v->leader_epoch)
                return;                  /* not seen: dropped */
            fp->seen = true;
            if (fp->leader_epoch != v->leader_epoch && v->local)
                start_following(f, v->local, v->leader_epoch);
            if (fp->leader_epoch != v->leader_epoch || fp->zk_version != v->zk_version) {
                fp->leader_epoch = v->leader_epoch;
                fp->zk_version = v->zk_version;
                fp->retry_us = 0;        /* the view changed: fetch again */
            }
            return;
        }
    }
    if (leaving)
        return;
    if (f->nparts == f->cap) {
        int cap = f->cap ? f->cap * 2 : 16;
        fe_part *np = realloc(f->parts, (size_t)cap * sizeof *np);
        if (!np) {
            BK_ERROR("partition %s-%d: out of memory; not followed", t->name, i);
            return;
        }
        f->parts = np;
        f->cap = cap;
    }
    if (v->local)
        start_following(f, v->local, v->leader_epoch);
    fe_part *fp = &f->parts[f->nparts++];
    memset(fp, 0, sizeof *fp);
    snprintf(fp->topic, sizeof fp->topic, "%s", t->name);
    fp->partition = i;
    fp->leader_epoch = v->leader_epoch;
    fp->zk_version = v->zk_version;
    fp->seen = true;
}

static void collect_topic(bk_topic *t, void *arg)
{
    fe_set *s = arg;
    bk_broker *b = s->b;
    for (int32_t i = 0; i < t->npartitions; i++) {
        const bk_pview *v = &t->parts[i];
        if (!bk_follow_wanted(v, b->cfg->broker_id, bk_broker_alive(b, v->leader)))
            continue;
        fe_fetcher *f = fetcher_get(s, v->leader);
        if (!f)
            continue;
        follow(f, t, i, v);
        if (t->cfg.max_message_bytes > f->max_batch)
            f->max_batch = t->cfg.max_message_bytes;
    }
}

static void recompute(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    fe_set *s = arg;
    bk_broker *b = s->b;
    for (fe_fetcher *f = s->fetchers; f; f = f->next) {
        f->max_batch = 0;
        for (int k = 0; k < f->nparts; k++)
            f->parts[k].seen = false;
    }
    /* F5: the view loaded from SQLite at startup, or kept through a lost
     * session, may name leaders that have changed since. */
    if (b->cl->synced)
        bk_topics_foreach(b, collect_topic, s);
    bk_broker_info info[CL_MAX_BROKERS];
    int nb = bk_brokers_info(b, info, CL_MAX_BROKERS);
    for (fe_fetcher **pf = &s->fetchers; *pf;) {
        fe_fetcher *f = *pf;
        int k = 0;
        for (int j = 0; j < f->nparts; j++)
            if (f->parts[j].seen)
                f->parts[k++] = f->parts[j];
        f->nparts = k;
        const bk_broker_info *bi = NULL;
        for (int j = 0; j < nb && !bi; j++)
            if (info[j].id == f->leader)
                bi = &info[j];
        if (k == 0 || !bi) {             /* F2 */
            if (f->port >= 0)
                BK_INFO("replica fetcher for broker %d: stopped (nothing to follow)",
                        f->leader);
            *pf = f->next;
            fetcher_free(f);
            continue;
        }
        if (f->port != bi->port || strcmp(f->host, bi->host)) {
            snprintf(f->host, sizeof f->host, "%s", bi->host);
            f->port = bi->port;
            event_del(f->timer);
            fetcher_connect(f);          /* a new (or moved) leader broker */
        } else if (f->state == FE_READY) {
            event_del(f->timer);
            send_fetch(f);               /* partitions resumed or added */
        }
        pf = &f->next;
    }
}

void bk_fetchers_update(bk_broker *b)
{
    fe_set *s = b->cl ? b->cl->fetchers : NULL;
    if (!s)
        return;
    if (!evtimer_pending(s->recompute, NULL)) {
        struct timeval zero = { 0, 0 };
        evtimer_add(s->recompute, &zero);
    }
}

int bk_fetchers_start(bk_broker *b)
{
    fe_set *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->b = b;
    /* Inactive, the resolver keeps no event of its own pending: the loop
     * still ends when everything else has. */
    s->dns = evdns_base_new(b->base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
                                     EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (!s->dns)                         /* numeric hosts still connect */
        BK_WARN("replica fetchers: no asynchronous resolver; leaders' host names "
                "are resolved by a blocking lookup");
    s->recompute = evtimer_new(b->base, recompute, s);
    if (!s->recompute) {
        if (s->dns)
            evdns_base_free(s->dns, 0);
        free(s);
        return -1;
    }
    b->cl->fetchers = s;
    return 0;
}

void bk_fetchers_stop(bk_broker *b)
{
    fe_set *s = b->cl ? b->cl->fetchers : NULL;
    if (!s)
        return;
    while (s->fetchers) {
        fe_fetcher *f = s->fetchers;
        s->fetchers = f->next;
        fetcher_free(f);
    }
    event_free(s->recompute);
    if (s->dns)
        evdns_base_free(s->dns, 0);
    free(s);
    b->cl->fetchers = NULL;
}
