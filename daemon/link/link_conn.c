/*
 * daemon/link/link_conn.c — a cluster link's connection to its source and
 * the requests on it (issue 33).  One connection per link, to the first
 * bootstrap server, one request in flight:
 *
 *   IDLE ─kick─► CONNECTING ─connected─► READY ─next─► WAITING ─answer─► READY
 *                  ▲          (SASL_PLAINTEXT: SaslHandshake, then one      │
 *                  │           SaslAuthenticate with PLAIN's token first)  │
 *                  └─── BACKOFF ◄── an error, EOF, timeout, refused login ─┘
 *                       (reconnect.backoff.ms, doubled up to .max.ms)
 *
 * What READY sends next (next_request), in this order:
 *   Metadata v8 of the mirrors' source topics, when metadata.max.age.ms
 *     has passed (or a mirror was added): the partition count, followed
 *     when the source adds partitions (link.c lk_mirror_sourced);
 *   DescribeConfigs v2 of the source topics whose mirror is not created
 *     yet (the source's topic overrides go into the mirror's creation),
 *     and after each Metadata of those created (their changes followed:
 *     link.c lk_mirror_configs);
 *   Fetch v11 as a consumer (ReplicaId -1) of every partition of every
 *     active or promoting mirror, at the mirror's log end,
 *     IsolationLevel 0 (read_uncommitted).
 *
 * Why read_uncommitted: the mirror must hold the source's batches at the
 * source's offsets, and its transactions' outcomes with them.  Both
 * isolation levels return the same batches (read_committed stops at the
 * last stable offset and lists the aborted ranges, it does not leave the
 * aborted batches out), so read_committed would only delay the copy of an
 * open transaction's batches; read_uncommitted copies up to the source's
 * high watermark, the markers (control batches) with the rest, and the
 * mirror's own producer state (replica_pstate_record) computes its last
 * stable offset and aborted ranges from them, so its read_committed
 * consumers see exactly what the source's see.
 *
 * Invariants (link.c K2 is the one this file keeps):
 *   C1. An answer is applied to a partition only if its mirror still
 *       fetches (active or promoting), the view still has the local
 *       partition, and its log end is the FetchOffset the request carried.
 *   C2. At most one request in flight; the answer's frame is read whole
 *       before it is handled.  The arena and buffers are the link's, reset
 *       and reused: nothing is allocated per answer once they have grown.
 *   C3. A failing connection or login is retried with doubling backoff up
 *       to reconnect.backoff.max.ms, and its error is logged and stored
 *       once per distinct message (link.c lk_link_error): no retry storm.
 *   C4. Answers do not go through libevent's input buffer: they are
 *       recv()d straight into l->in by on_sock_read, the connection's own
 *       event (libevent 2.1 reads 4 KiB per wakeup whatever
 *       bufferevent_set_max_single_read says: a 4 MiB answer took a
 *       thousand loop turns, each a readv, an FIONREAD and a timer re-armed,
 *       and the mirror's catch-up ran at a tenth of a follower's).  While
 *       more than LK_LOWAT_MIN of an answer is missing the socket's
 *       SO_RCVLOWAT is that (at most LK_LOWAT_MAX), 1 otherwise, as
 *       repl_fetcher.c's F8.  The bufferevent keeps connecting and output.
 */
#include "daemon/link/link_int.h"
#include "daemon/view/view.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_producers.h"
#include "daemon/replication/repl_fetcher.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include "kp_msgs.h"

#define LK_FETCH_VERSION 11
#define LK_METADATA_VERSION 8
#define LK_CONFIGS_VERSION 2
#define LK_HANDSHAKE_VERSION 1
#define LK_AUTH_VERSION 1
/* Beyond fetch.max.wait.ms, how long an answer may take (Kafka's
 * request.timeout.ms default). */
#define LK_REQUEST_TIMEOUT_MS 30000
/* C4: l->in's least size, read into before an answer's length is known. */
#define LK_IN_MIN (64u << 10)
/* C4: below LK_LOWAT_MIN missing the wakeups are few anyway; above
 * LK_LOWAT_MAX the kernel would have to grow the receive buffer (as
 * repl_fetcher.c's FE_LOWAT_MAX). */
#define LK_LOWAT_MIN (64u << 10)
#define LK_LOWAT_MAX (1u << 20)
/* DescribeConfigs' ConfigSource for a topic's own override. */
#define LK_DYNAMIC_TOPIC_CONFIG 1

static void next_request(lk_link *l);
static void link_connect(lk_link *l);

static void arm(lk_link *l, int64_t ms)
{
    if (!l->timer)
        return;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    bk_event_add(l->timer, &tv, "a cluster link's timer");
}

static void requests_forgotten(lk_link *l)
{
    for (lk_mirror *m = l->set->mirrors; m; m = m->next) {
        if (m->link != l)
            continue;
        m->in_request = false;
        for (int32_t i = 0; i < m->nparts; i++)
            m->parts[i].in_request = false;
    }
}

void lk_conn_close(lk_link *l)
{
    if (l->rev)
        event_free(l->rev);
    l->rev = NULL;
    l->in_got = 0;
    if (l->bev)
        bufferevent_free(l->bev);
    l->bev = NULL;
    if (l->timer)
        event_del(l->timer);
    l->conn = LK_IDLE;
    requests_forgotten(l);
}

/* C3 */
static void conn_fail(lk_link *l, const char *why)
{
    lk_conn_close(l);
    lk_link_error(l, why);
    l->backoff_cur_ms = l->backoff_cur_ms ? l->backoff_cur_ms * 2 : l->backoff_ms;
    if (l->backoff_cur_ms > l->backoff_max_ms)
        l->backoff_cur_ms = l->backoff_max_ms;
    l->conn = LK_BACKOFF;
    arm(l, l->backoff_cur_ms);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd; (void)what;
    lk_link *l = arg;
    if (l->conn == LK_BACKOFF || l->conn == LK_IDLE)
        link_connect(l);
    else if (l->conn == LK_READY)
        next_request(l);
}

void lk_conn_kick(lk_link *l)
{
    if (!l->timer && !(l->timer = event_new(l->b->base, -1, 0, on_timer, l)))
        return;
    if (l->conn == LK_IDLE)
        link_connect(l);
    else if (l->conn == LK_READY)
        next_request(l);
}

/* Frames and sends a request; WAITING after. */
static void send_request(lk_link *l, int16_t api, int16_t version, const void *q)
{
    if (++l->corrid < 0)
        l->corrid = 0;
    char client_id[MD_TOPIC_NAME_MAX + 16];
    snprintf(client_id, sizeof client_id, "sluice-link-%s", l->name);
    kp_buf_reset(&l->out);
    size_t frame = kp_wr_i32_placeholder(&l->out);
    kp_req_hdr_write(&l->out, api, version, l->corrid, client_id);
    switch (api) {
    case KP_API_FETCH: kp_enc_FetchRequest(&l->out, version, q); break;
    case KP_API_METADATA: kp_enc_MetadataRequest(&l->out, version, q); break;
    case KP_API_DESCRIBE_CONFIGS: kp_enc_DescribeConfigsRequest(&l->out, version, q); break;
    case KP_API_SASL_HANDSHAKE: kp_enc_SaslHandshakeRequest(&l->out, version, q); break;
    default: kp_enc_SaslAuthenticateRequest(&l->out, version, q); break;
    }
    kp_wr_i32_at(&l->out, frame, (int32_t)(l->out.len - frame - 4));
    if (l->out.err || bufferevent_write(l->bev, l->out.data, l->out.len) != 0) {
        conn_fail(l, "cannot send a request to the source");
        return;
    }
    if (api == KP_API_SASL_AUTHENTICATE)
        memset(l->out.data, 0, l->out.len);          /* the password */
    l->api_out = api;
    l->conn = LK_WAITING;
}

/* ---- what READY sends next ----------------------------------------------------- */
static bool send_metadata(lk_link *l, int64_t now)
{
    int n = 0;
    if (now < l->metadata_due_us)
        return false;
    /* Due again in metadata.max.age.ms, whether or not there is anything
     * to ask (an idle link wakes that often, not every loop turn). */
    l->metadata_due_us = now + l->metadata_max_age_ms * 1000;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        n += m->link == l && m->state != LK_PROMOTED && m->state != LK_FAILED_OVER &&
             m->state != LK_FAILED;
    if (n == 0)
        return false;
    kp_MetadataRequest_MetadataRequestTopic *ts = kp_arena_alloc(&l->arena, (size_t)n * sizeof *ts);
    if (!ts) {
        conn_fail(l, "out of memory for a request");
        return true;
    }
    n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->state != LK_PROMOTED && m->state != LK_FAILED_OVER &&
            m->state != LK_FAILED) {
            ts[n++].Name = kp_str_cstr(m->source);
            m->in_request = true;
        }
    kp_MetadataRequest q;
    kp_init_MetadataRequest(&q);
    q.Topics = ts;
    q.Topics_count = n;
    q.AllowAutoTopicCreation = false;
    send_request(l, KP_API_METADATA, LK_METADATA_VERSION, &q);
    return true;
}

/* The mirror's source configs are wanted: to create it, or (each
 * Metadata) to follow their changes. */
static bool configs_wanted(const lk_link *l, const lk_mirror *m)
{
    return m->link == l && (m->created ? m->configs_due : m->source_parts > 0) &&
           (m->state == LK_ACTIVE || m->state == LK_PAUSED || m->state == LK_PROMOTING);
}

static bool send_configs(lk_link *l)
{
    int n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        n += configs_wanted(l, m);
    if (n == 0)
        return false;
    kp_DescribeConfigsRequest_DescribeConfigsResource *rs =
        kp_arena_alloc(&l->arena, (size_t)n * sizeof *rs);
    if (!rs) {
        conn_fail(l, "out of memory for a request");
        return true;
    }
    n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (configs_wanted(l, m)) {
            rs[n++] = (kp_DescribeConfigsRequest_DescribeConfigsResource){
                .ResourceType = 2, .ResourceName = kp_str_cstr(m->source),
                .ConfigurationKeys_count = -1 };
            m->in_request = true;
        }
    kp_DescribeConfigsRequest q;
    kp_init_DescribeConfigsRequest(&q);
    q.Resources = rs;
    q.Resources_count = n;
    send_request(l, KP_API_DESCRIBE_CONFIGS, LK_CONFIGS_VERSION, &q);
    return true;
}

/* One topic entry per partition (the request allows it; no grouping to
 * keep): every fetching partition not paused by an error. */
static bool send_fetch(lk_link *l, int64_t now, int64_t *next_us)
{
    bk_broker *b = l->b;
    int n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && lk_mirror_fetching(m))
            n += m->nparts;
    if (n == 0)
        return false;
    kp_FetchRequest_FetchTopic *ts = kp_arena_alloc(&l->arena, (size_t)n * sizeof *ts);
    kp_FetchRequest_FetchPartition *ps = kp_arena_alloc(&l->arena, (size_t)n * sizeof *ps);
    if (!ts || !ps) {
        conn_fail(l, "out of memory for a request");
        return true;
    }
    n = 0;
    for (lk_mirror *m = l->set->mirrors; m; m = m->next) {
        if (m->link != l || !lk_mirror_fetching(m))
            continue;
        for (int32_t i = 0; i < m->nparts; i++) {
            lk_part *lp = &m->parts[i];
            if (lp->retry_us > now) {
                if (lp->retry_us < *next_us)
                    *next_us = lp->retry_us;
                continue;
            }
            const bk_pview *v = view_partition(b, kp_str_cstr(m->topic), i);
            if (!v || !v->local)
                continue;                /* created by the next Metadata */
            lp->retry_us = 0;
            lp->fetch_offset = seg_log_end(v->local->log);
            lp->in_request = true;
            ps[n] = (kp_FetchRequest_FetchPartition){
                .Partition = i, .CurrentLeaderEpoch = -1, .FetchOffset = lp->fetch_offset,
                .LastFetchedEpoch = -1, .LogStartOffset = -1,
                .PartitionMaxBytes = l->partition_max_bytes,
            };
            ts[n] = (kp_FetchRequest_FetchTopic){
                .Topic = kp_str_cstr(m->source), .Partitions = &ps[n], .Partitions_count = 1,
            };
            n++;
        }
    }
    if (n == 0)
        return false;
    kp_FetchRequest q;
    kp_init_FetchRequest(&q);
    q.ReplicaId = -1;                    /* a consumer: bounded by the high watermark */
    q.MaxWaitMs = l->fetch_max_wait_ms;
    q.MinBytes = l->fetch_min_bytes;
    q.MaxBytes = l->fetch_max_bytes;
    q.IsolationLevel = 0;                /* read_uncommitted: see the note at the top */
    q.SessionId = 0;
    q.SessionEpoch = -1;
    q.Topics = ts;
    q.Topics_count = n;
    q.RackId = (kp_str){ "", 0 };
    send_request(l, KP_API_FETCH, LK_FETCH_VERSION, &q);
    return true;
}

static void next_request(lk_link *l)
{
    if (l->conn != LK_READY || !l->bev)
        return;
    int64_t now = bk_mono_us(), next_us = INT64_MAX;
    kp_arena_reset(&l->arena);
    if (send_metadata(l, now) || send_configs(l) || send_fetch(l, now, &next_us))
        return;
    if (l->metadata_due_us < next_us)
        next_us = l->metadata_due_us;
    /* Nothing to fetch now: wake for the next Metadata or retry. */
    arm(l, next_us > now ? (next_us - now) / 1000 + 1 : 1);
}

/* ---- the answers ----------------------------------------------------------------- */
static lk_mirror *mirror_of_source(lk_link *l, kp_str source)
{
    for (lk_mirror *m = l->set->mirrors; m; m = m->next)
        if (m->link == l && m->in_request && kp_str_eq(source, m->source))
            return m;
    return NULL;
}

static void handle_metadata(lk_link *l, kp_rd *r)
{
    kp_MetadataResponse mr;
    if (kp_dec_MetadataResponse(r, LK_METADATA_VERSION, &mr, &l->arena) != 0) {
        conn_fail(l, "malformed Metadata answer from the source");
        return;
    }
    lk_link_error(l, NULL);              /* the source answers: healthy */
    l->backoff_cur_ms = 0;
    for (int32_t i = 0; i < mr.Topics_count; i++) {
        const kp_MetadataResponse_MetadataResponseTopic *t = &mr.Topics[i];
        lk_mirror *m;
        while ((m = mirror_of_source(l, t->Name))) {
            m->in_request = false;
            char why[1024];
            if (t->ErrorCode != KP_NONE || t->Partitions_count <= 0) {
                snprintf(why, sizeof why, "source topic %s: %s", m->source,
                         t->ErrorCode == KP_UNKNOWN_TOPIC_OR_PARTITION
                             ? "does not exist on the source"
                             : kp_error_name(t->ErrorCode ? t->ErrorCode : KP_INVALID_PARTITIONS));
                lk_mirror_error(m, why);
                continue;
            }
            m->source_parts = t->Partitions_count;
            m->configs_due = m->created;
            if (m->created)
                lk_mirror_sourced(m, t->Partitions_count, NULL, 0, false);
        }
    }
    requests_forgotten(l);
}

static void handle_configs(lk_link *l, kp_rd *r)
{
    kp_DescribeConfigsResponse dr;
    if (kp_dec_DescribeConfigsResponse(r, LK_CONFIGS_VERSION, &dr, &l->arena) != 0) {
        conn_fail(l, "malformed DescribeConfigs answer from the source");
        return;
    }
    for (int32_t i = 0; i < dr.Results_count; i++) {
        const kp_DescribeConfigsResponse_DescribeConfigsResult *res = &dr.Results[i];
        lk_mirror *m = mirror_of_source(l, res->ResourceName);
        if (!m)
            continue;
        m->in_request = false;
        if (res->ErrorCode != KP_NONE) {
            char why[1024];
            snprintf(why, sizeof why, "DescribeConfigs of source topic %s: %s", m->source,
                     kp_error_name(res->ErrorCode));
            lk_mirror_error(m, why);
            m->source_parts = 0;         /* asked again after the next Metadata */
            m->configs_due = false;
            continue;
        }
        md_kv *kv = kp_arena_alloc(&l->arena, (size_t)(res->Configs_count + 1) * sizeof *kv);
        size_t n = 0;
        for (int32_t j = 0; kv && j < res->Configs_count; j++) {
            const kp_DescribeConfigsResponse_DescribeConfigsResourceResult *c = &res->Configs[j];
            if (c->ConfigSource != LK_DYNAMIC_TOPIC_CONFIG || c->Value.len < 0)
                continue;
            char *name = kp_arena_alloc(&l->arena, (size_t)c->Name.len + 1);
            char *value = kp_arena_alloc(&l->arena, (size_t)c->Value.len + 1);
            if (!name || !value)
                break;
            memcpy(name, c->Name.p, (size_t)c->Name.len);
            memcpy(value, c->Value.p, (size_t)c->Value.len);
            kv[n++] = (md_kv){ .name = name, .value = value };
        }
        if (!kv) {
            lk_mirror_error(m, "out of memory for the source's configs");
            continue;
        }
        if (m->created) {
            m->configs_due = false;
            lk_mirror_configs(m, kv, n);
        } else {
            lk_mirror_sourced(m, m->source_parts, kv, n, true);
        }
    }
    requests_forgotten(l);
}

/* The largest producer id of whole batches (-1: none): so that this
 * broker never hands one of them out (link.c K7).  One header read per
 * batch. */
static int64_t max_producer_id(const uint8_t *recs, size_t len)
{
    int64_t max = -1;
    for (size_t pos = 0; pos + 51 <= len;) {
        uint64_t pid = 0;
        uint32_t blen = 0;
        for (int k = 0; k < 8; k++)
            pid = pid << 8 | recs[pos + 43 + k];
        for (int k = 0; k < 4; k++)
            blen = blen << 8 | recs[pos + 8 + k];
        if ((int64_t)pid > max)
            max = (int64_t)pid;
        pos += 12 + (size_t)blen;
    }
    return max;
}

/* One partition of a Fetch answer (C1 checked): link.c K2. */
static void apply_partition(lk_link *l, lk_mirror *m, int32_t i, bk_partition *p,
                            const kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = l->b;
    lk_part *lp = &m->parts[i];
    int64_t end = seg_log_end(p->log), backoff_us = l->backoff_ms * 1000;
    char why[1024];
    if (rp->ErrorCode != KP_NONE && rp->HighWatermark >= 0 &&
        rp->HighWatermark != lp->source_end) {
        lp->source_end = rp->HighWatermark;          /* the lag, errors or not */
        m->ends_dirty = true;
    }
    /* No numbers in why: the same error each retry writes no SQL, no log. */
    if (rp->ErrorCode == KP_OFFSET_OUT_OF_RANGE) {
        switch (repl_fetch_out_of_range(end, rp->HighWatermark, rp->LogStartOffset)) {
        case BK_OOR_BELOW_START: {
            /* As a follower would: behind the source's log start (retention,
             * DeleteRecords), the mirror's log restarts there. */
            int rc = replica_partition_restart_at(b, p, rp->LogStartOffset);
            if (rc == 0) {
                BK_INFO("mirror topic %s-%d: log end %lld is below the source's log start "
                        "%lld: the mirror's log restarts there", m->topic, (int)i,
                        (long long)end, (long long)rp->LogStartOffset);
                lp->retry_us = 0;                    /* fetched again at once */
                return;
            }
            snprintf(why, sizeof why, "partition %d: cannot restart the log at the source's "
                     "log start (error %d); retrying", (int)i, rc);
            lk_mirror_error(m, why);
            lp->retry_us = bk_mono_us() + backoff_us;
            return;
        }
        case BK_OOR_TRUNCATE:
            snprintf(why, sizeof why, "partition %d: the mirror's log end is past the source's "
                     "high watermark; the source's log was cut (truncation by leader epoch is "
                     "not followed yet): not fetching this partition", (int)i);
            lk_mirror_error(m, why);
            lp->retry_us = INT64_MAX;
            return;
        case BK_OOR_RETRY:
            break;
        }
    }
    if (rp->ErrorCode != KP_NONE) {
        snprintf(why, sizeof why, "partition %d: the source answered %s", (int)i,
                 kp_error_name(rp->ErrorCode));
        lk_mirror_error(m, why);
        lp->retry_us = bk_mono_us() + backoff_us;
        return;
    }
    if (lp->answers_due > 0)
        lp->answers_due--;               /* link.c K3 */
    int64_t records = 0;
    const uint8_t *recs = (const uint8_t *)rp->Records.p;
    size_t whole = rp->Records.len > 0
        ? repl_fetch_whole_batches(recs, (size_t)rp->Records.len, &records) : 0;
    uint64_t first = 0;
    for (size_t k = 0; whole > 0 && k < 8; k++)
        first = first << 8 | recs[k];
    if (whole > 0 && (int64_t)first < end && end == seg_log_start(p->log) &&
        replica_partition_restart_at(b, p, (int64_t)first) == 0)
        end = (int64_t)first;            /* restarted at a log start inside a batch: at its
                                          * base, as Kafka's follower does */
    if (whole > 0 && bk_producer_id_floor(b, max_producer_id(recs, whole)) != KP_NONE) {
        lk_mirror_error(m, "cannot save the producer id floor above the source's ids; "
                        "retrying");
        lp->retry_us = bk_mono_us() + backoff_us;
        return;
    }
    if (whole > 0) {
        /* Cost: one CRC pass per batch and one write(); the bytes are the
         * answer's, as the source sent them. */
        int rc = seg_append_assigned(p->log, recs, whole, bk_now_ms());
        if (rc != 0) {
            snprintf(why, sizeof why, "partition %d: cannot append %zu bytes at %lld (error "
                     "%d: %s)", (int)i, whole, (long long)end, rc,
                     strerror(seg_failed(p->log) ? seg_last_errno(p->log) : EINVAL));
            lk_mirror_error(m, why);
            if (seg_failed(p->log))
                seg_reset_error(p->log);
            lp->retry_us = bk_mono_us() + backoff_us;
            return;
        }
        p->bytes_in += whole;
        if (p->producers && replica_pstate_record(p->producers, recs, whole, bk_now_ms()) != 0)
            BK_WARN("mirror topic %s-%d: out of memory for producer state", m->topic, (int)i);
        replica_partition_appended(b, p, records);
    }
    if (m->last_error[0] && whole > 0)
        lk_mirror_error(m, NULL);
    if (seg_log_end(p->log) >= rp->HighWatermark)
        lp->caught_up_ms = bk_now_ms();
    if (rp->HighWatermark != lp->source_end) {
        lp->source_end = rp->HighWatermark;
        m->ends_dirty = true;
    }
}

static void handle_fetch(lk_link *l, kp_rd *r)
{
    bk_broker *b = l->b;
    kp_FetchResponse fr;
    if (kp_dec_FetchResponse(r, LK_FETCH_VERSION, &fr, &l->arena) != 0) {
        conn_fail(l, "malformed Fetch answer from the source");
        return;
    }
    if (fr.ErrorCode != KP_NONE) {
        char why[1024];
        snprintf(why, sizeof why, "Fetch refused by the source: %s", kp_error_name(fr.ErrorCode));
        conn_fail(l, why);
        return;
    }
    for (int32_t i = 0; i < fr.Responses_count; i++) {
        const kp_FetchResponse_FetchableTopicResponse *t = &fr.Responses[i];
        for (lk_mirror *m = l->set->mirrors; m; m = m->next) {
            if (m->link != l || !kp_str_eq(t->Topic, m->source))
                continue;
            for (int32_t j = 0; j < t->Partitions_count; j++) {
                const kp_FetchResponse_PartitionData *rp = &t->Partitions[j];
                int32_t k = rp->PartitionIndex;
                if (k < 0 || k >= m->nparts || !m->parts[k].in_request)
                    continue;
                m->parts[k].in_request = false;
                const bk_pview *v = view_partition(b, kp_str_cstr(m->topic), k);
                if (!lk_mirror_fetching(m) || !v || !v->local ||   /* C1 */
                    seg_log_end(v->local->log) != m->parts[k].fetch_offset)
                    continue;
                apply_partition(l, m, k, v->local, rp);
            }
        }
    }
    requests_forgotten(l);
    for (lk_mirror *m = l->set->mirrors, *n; m; m = n) {
        n = m->next;
        if (m->link == l)
            lk_mirror_progress(m);
    }
}

static void send_plain_token(lk_link *l)
{
    size_t ul = strlen(l->user), pl = strlen(l->pass);
    char *tok = kp_arena_alloc(&l->arena, ul + pl + 2);
    if (!tok) {
        conn_fail(l, "out of memory for the login");
        return;
    }
    tok[0] = 0;                          /* PLAIN: authzid NUL user NUL password */
    memcpy(tok + 1, l->user, ul);
    tok[ul + 1] = 0;
    memcpy(tok + ul + 2, l->pass, pl);
    kp_SaslAuthenticateRequest q = { .AuthBytes = { tok, (int32_t)(ul + pl + 2) } };
    send_request(l, KP_API_SASL_AUTHENTICATE, LK_AUTH_VERSION, &q);
    memset(tok, 0, ul + pl + 2);
}

static void handle_sasl(lk_link *l, kp_rd *r)
{
    char why[1024];
    if (l->api_out == KP_API_SASL_HANDSHAKE) {
        kp_SaslHandshakeResponse h;
        if (kp_dec_SaslHandshakeResponse(r, LK_HANDSHAKE_VERSION, &h, &l->arena) != 0 ||
            h.ErrorCode != KP_NONE) {
            snprintf(why, sizeof why, "the source refused SASL mechanism PLAIN (%s)",
                     kp_error_name(h.ErrorCode ? h.ErrorCode : KP_ILLEGAL_SASL_STATE));
            conn_fail(l, why);
            return;
        }
        l->conn = LK_READY;
        send_plain_token(l);
        return;
    }
    kp_SaslAuthenticateResponse a;
    if (kp_dec_SaslAuthenticateResponse(r, LK_AUTH_VERSION, &a, &l->arena) != 0) {
        conn_fail(l, "malformed SaslAuthenticate answer from the source");
        return;
    }
    if (a.ErrorCode != KP_NONE) {
        snprintf(why, sizeof why, "SASL authentication as '%s' failed: %s%s%.*s", l->user,
                 kp_error_name(a.ErrorCode), a.ErrorMessage.len > 0 ? ": " : "",
                 a.ErrorMessage.len > 0 ? (int)a.ErrorMessage.len : 0,
                 a.ErrorMessage.len > 0 ? a.ErrorMessage.p : "");
        conn_fail(l, why);
        return;
    }
    l->conn = LK_READY;
    next_request(l);
}

static void handle_answer(lk_link *l, const uint8_t *frame, size_t len)
{
    kp_rd r;
    kp_rd_init(&r, frame, len);
    int32_t corrid = kp_rd_i32(&r);
    if (!kp_rd_ok(&r) || corrid != l->corrid || l->conn != LK_WAITING) {
        conn_fail(l, "an answer from the source with an unexpected correlation id");
        return;
    }
    kp_arena_reset(&l->arena);
    l->conn = LK_READY;
    switch (l->api_out) {
    case KP_API_METADATA: handle_metadata(l, &r); break;
    case KP_API_DESCRIBE_CONFIGS: handle_configs(l, &r); break;
    case KP_API_FETCH: handle_fetch(l, &r); break;
    default: handle_sasl(l, &r); return;
    }
    next_request(l);
}

/* C4: the socket wakes us only once `bytes` are there (1: any).  A
 * failure only costs wakeups. */
static void set_lowat(lk_link *l, evutil_socket_t fd, size_t bytes)
{
    int v = bytes > LK_LOWAT_MAX ? (int)LK_LOWAT_MAX : (int)bytes;
    if (v == l->rcvlowat)
        return;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &v, sizeof v) == 0)
        l->rcvlowat = v;
}

static bool in_grow(lk_link *l, size_t need)
{
    if (need <= l->in_cap)
        return true;
    uint8_t *nb = realloc(l->in, need);
    if (!nb)
        return false;
    l->in = nb;
    l->in_cap = (uint32_t)need;
    return true;
}

/* Idle (nothing out) and closed by the source (its
 * connections.max.idle.ms): not an error; connected again when there is
 * something to ask. */
static void closed_idle(lk_link *l)
{
    int64_t due = (l->metadata_due_us - bk_mono_us()) / 1000;
    lk_conn_close(l);
    arm(l, due > 0 ? due : 1);
}

/* C2, C4: a frame is handled once it is whole, from l->in. */
static void on_sock_read(evutil_socket_t fd, short what, void *arg)
{
    lk_link *l = arg;
    char why[1024];
    if (what & EV_TIMEOUT) {
        if (l->conn == LK_WAITING) {
            snprintf(why, sizeof why, "%s:%d: no answer in time", l->host, l->port);
            conn_fail(l, why);
        }
        return;                          /* idle: still read, to see the source close */
    }
    size_t want = l->in_got < 4 ? l->in_cap
        : (size_t)((uint32_t)l->in[0] << 24 | (uint32_t)l->in[1] << 16 |
                   (uint32_t)l->in[2] << 8 | l->in[3]) + 4;
    ssize_t n = recv(fd, l->in + l->in_got, want - l->in_got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    if (n == 0 && l->conn == LK_READY && l->in_got == 0) {
        closed_idle(l);
        return;
    }
    if (n <= 0) {
        snprintf(why, sizeof why, "%s:%d: %s", l->host, l->port,
                 n == 0 ? "connection closed by the source"
                 : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
        conn_fail(l, why);
        return;
    }
    if (l->conn != LK_WAITING) {
        conn_fail(l, "bytes from the source with no request out");
        return;
    }
    l->in_got += (uint32_t)n;
    if (l->in_got < 4)
        return;
    uint32_t size = (uint32_t)l->in[0] << 24 | (uint32_t)l->in[1] << 16 |
                    (uint32_t)l->in[2] << 8 | l->in[3];
    if (size > LK_FRAME_MAX) {
        conn_fail(l, "an answer from the source larger than 256 MiB");
        return;
    }
    if (!in_grow(l, (size_t)size + 4)) {
        conn_fail(l, "out of memory reading an answer");
        return;
    }
    size_t total = (size_t)size + 4;
    if (l->in_got > total) {             /* one request in flight (C2) */
        conn_fail(l, "bytes from the source after its answer");
        return;
    }
    if (l->in_got < total) {
        size_t left = total - l->in_got;
        set_lowat(l, fd, left >= LK_LOWAT_MIN ? left : 1);
        return;
    }
    l->in_got = 0;
    set_lowat(l, fd, 1);
    handle_answer(l, l->in + 4, size);
}

/* C4: the connection's input read by on_sock_read, with the read timeout
 * the bufferevent had.  0, or -1. */
static int take_reading(lk_link *l)
{
    if (!in_grow(l, LK_IN_MIN))
        return -1;
    evutil_socket_t fd = bufferevent_getfd(l->bev);
    l->rev = event_new(l->b->base, fd, EV_READ | EV_PERSIST, on_sock_read, l);
    if (!l->rev)
        return -1;
    bufferevent_disable(l->bev, EV_READ);
    int64_t t = (int64_t)l->fetch_max_wait_ms + LK_REQUEST_TIMEOUT_MS;
    struct timeval tv = { (time_t)(t / 1000), (suseconds_t)(t % 1000) * 1000 };
    return event_add(l->rev, &tv);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
    lk_link *l = arg;
    char why[1024];
    if (bev != l->bev)
        return;
    if (what & BEV_EVENT_CONNECTED) {
        if (take_reading(l) != 0) {
            conn_fail(l, "cannot watch the connection to the source");
            return;
        }
        l->conn = LK_READY;
        if (l->sasl) {
            kp_SaslHandshakeRequest q = { .Mechanism = kp_str_cstr("PLAIN") };
            send_request(l, KP_API_SASL_HANDSHAKE, LK_HANDSHAKE_VERSION, &q);
        } else {
            next_request(l);
        }
        return;
    }
    if ((what & BEV_EVENT_EOF) && l->conn == LK_READY) {
        closed_idle(l);
        return;
    }
    int dns = bufferevent_socket_get_dns_error(bev);
    if ((what & BEV_EVENT_TIMEOUT) && l->conn == LK_READY) {
        bufferevent_enable(bev, EV_READ);          /* idle, not late */
        return;
    }
    snprintf(why, sizeof why, "%s:%d: %s", l->host, l->port,
             dns ? evutil_gai_strerror(dns)
             : (what & BEV_EVENT_EOF) ? "connection closed by the source"
             : (what & BEV_EVENT_TIMEOUT) ? "no answer in time"
             : evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
    conn_fail(l, why);
}

static void link_connect(lk_link *l)
{
    lk_conn_close(l);
    l->bev = bufferevent_socket_new(l->b->base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (!l->bev) {
        conn_fail(l, "cannot make a socket");
        return;
    }
    bufferevent_setcb(l->bev, NULL, NULL, on_event, l);   /* input: C4 */
    int64_t t = (int64_t)l->fetch_max_wait_ms + LK_REQUEST_TIMEOUT_MS;
    struct timeval tv = { (time_t)(t / 1000), (suseconds_t)(t % 1000) * 1000 };
    bufferevent_set_timeouts(l->bev, &tv, &tv);
    bufferevent_enable(l->bev, EV_READ | EV_WRITE);
    l->conn = LK_CONNECTING;
    l->rcvlowat = 1;                     /* a new socket's */
    l->metadata_due_us = 0;              /* the sources again on a new connection */
    /* Name resolution through evdns: nothing blocks the loop. */
    if (bufferevent_socket_connect_hostname(l->bev, l->set->dns, AF_UNSPEC, l->host,
                                            l->port) != 0)
        conn_fail(l, "cannot connect");
}
