/*
 * daemon/replication/repl_fetcher.c — the replica fetchers: a follower's copy of what its
 * leaders append (issue 16, follower side).
 *
 * In cluster mode every partition this broker hosts (bk_pview.local) whose
 * leader is another live broker is followed.  Partitions are grouped by
 * leader: one fetcher per leader broker, with one connection to that
 * broker's endpoint of the inter-broker listener (inter.broker.listener.name,
 * from its registration; TLS when that listener is SSL or SASL_SSL, a SASL
 * login when it is SASL_*: F9) and at most one request in
 * flight, a Fetch v11 carrying every partition followed from it, which the
 * leader long-polls (replica.fetch.wait.max.ms / replica.fetch.min.bytes).
 * Each answer's batches are appended as they are, with the leader's
 * offsets (seg_append_assigned), and the replica's high watermark becomes
 * min(leader's HighWatermark, its own log end).  An answer may start past
 * our log end: the leader's cleaner removed the batches there (a follower
 * that was down or wiped while it compacted), and the offsets between stay
 * a gap in our copy as in its log (segments/log.c L7); the next FetchOffset
 * is the new log end as always.
 *
 * States of a fetcher (one per leader):
 *
 *   CONNECTING ──connected──► READY ──send_fetch──► WAITING ──answer──► READY
 *                              │   (an OffsetForLeaderEpoch first while a
 *                              │    partition must truncate, F6)
 *                              └─ SASL listener (F9): sasl_start ─► WAITING
 *                                 (SaslHandshake, then SaslAuthenticate per
 *                                 token; handle_sasl) ─authenticated─► READY
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
 *     to it, then fetched again; behind the leader's log start → segments/ cannot
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
 *   F4. Standalone mode has no fetchers (repl_fetchers_start is only called
 *       by cl_start).
 *   F5. Partitions are followed only while the mirror is in step with
 *       ZooKeeper in this session (repl->synced): a recomputation before the
 *       first resync, or after the session expired, follows nothing.
 *       cl_mirror_resync_done ends with cl_brokers_changed, which recomputes.
 *   F6. A partition newly followed, or whose leader epoch changed, is not
 *       fetched until its log was cut where it diverges from the leader's:
 *       the fetcher first sends an OffsetForLeaderEpoch (same connection,
 *       still one request in flight) for its latest epoch and truncates
 *       as apply_epoch says (Kafka's rule).  The answer is used only if
 *       the view still has the epoch it was asked under and the log end
 *       it was asked at, so it describes the log it is applied to.
 *   F7. follower.replication.throttled.rate (bytes/s, dynamic; 0 or unset:
 *       none) bounds what all fetchers together append to the partitions
 *       this broker is being added to by a reassignment (Kafka's throttled
 *       replicas; cluster_reassign.c), through one token bucket of one second's
 *       worth: such a partition is asked for at most the tokens left, and
 *       left out of the requests (paused) while the bucket is empty.  The
 *       replicas already in sync are never throttled.
 *   F8. A plaintext connection's answers do not go through libevent's
 *       buffers (which read at most a few KiB per loop iteration, each
 *       with a FIONREAD ioctl, an epoll_wait, a timer re-arm, and then a
 *       copy out): once connected, its own persistent event (the read
 *       timeout the bufferevent had) recv()s each answer straight into
 *       f->in, sized by the frame length, and for the rest of a large
 *       answer sets SO_RCVLOWAT so that the socket wakes it when that
 *       much is there, not per segment the leader's sendfile sent
 *       (repl_frame.h, shared with the cluster links).  At most one
 *       answer is ever read (F2): bytes beyond it, or with no request
 *       out, fail the connection.  Requests go out by one send()
 *       when the bufferevent's output is empty.  The bufferevent keeps the
 *       connecting (evdns) and what the socket did not take.  TLS
 *       connections read through the bufferevent (SSL_read, sec_tls.c).
 *   F9. On a SASL_PLAINTEXT / SASL_SSL inter-broker listener nothing but
 *       SaslHandshake v1 and SaslAuthenticate v2 goes out on a connection
 *       until the login with sasl.mechanism.inter.broker.protocol and the
 *       broker's JAAS credentials (broker_config.c) succeeded; the exchange uses
 *       the same one-request-in-flight path (api_out says which answer is
 *       due).  SCRAM's server-final must carry the ServerSignature the
 *       password gives, or the login fails.  A failed login (the leader's
 *       ErrorMessage logged) is a conn_fail: backoff, and no Fetch, so the
 *       leader keeps this broker out of the ISR.  The SaltedPassword's
 *       PBKDF2 runs on the janitor (sec_sasl_client.h SC2), cached per salt
 *       and iteration count.  With the leader's SessionLifetimeMs (KIP-368) the next
 *       request after 85 to 95 % of it (at random, as Kafka's clients) is a
 *       new SaslHandshake on
 *       the same connection (repl_fetch_reauth_at; a lifetime past the
 *       clock's range is none); a leader that closes at expiry anyway is a
 *       conn_fail like any EOF.
 *   F10. Far behind, the next request goes out before an answer is
 *       appended, so the leader sends the next answer while this one is
 *       written (into new page-cache pages: the catch-up's bound): its
 *       FetchOffset is where the answer's whole batches end
 *       (repl_fetch_ahead_offset), which is the log end after the append.
 *       Only when that offset is below the HighWatermark the answer
 *       carried, for every partition with data, so a follower never
 *       reports early an offset that could move the leader's high
 *       watermark or put it in the ISR (those wait for the append, as in
 *       Kafka); and only when no partition has an error, none is being
 *       cut (F6) and nothing is throttled (F7).  Still one request in
 *       flight (F2: the answer was read whole).  If an append fails, the
 *       log end is not that offset and F1 drops the next answer.
 */
#include "daemon/replication/repl_fetcher.h"
#include "daemon/view/view_broker_configs.h"
#include "daemon/replication/repl_isr.h"
#include "daemon/replication/repl_conn.h"
#include "daemon/replication/repl_frame.h"
#include "daemon/replica/replica.h"
#include "daemon/replica/replica_producers.h"
#include "daemon/security/sec_sasl_client.h"
#include "daemon/replication/repl_throttle.h"
#include "daemon/security/sec_tls.h"
#include "daemon/replica/replica_logdir.h"

#include <arpa/inet.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include "kp_msgs.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#define FE_HOST_MAX 256
/* Fetch v11: the newest without flexible headers and with every field the
 * contract names (CurrentLeaderEpoch, LogStartOffset, RackId). */
#define FE_FETCH_VERSION 11
/* OffsetForLeaderEpoch v3: ReplicaId and CurrentLeaderEpoch, header v1. */
#define FE_EPOCH_VERSION 3
/* A re-authentication is started at a random share of the session's
 * lifetime between these thousandths (Kafka's SaslClientAuthenticator:
 * 0.85 + 0.10 * random). */
#define FE_REAUTH_MIN_PERMILLE 850
#define FE_REAUTH_SPAN_PERMILLE 100
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
    /* F6: asking the leader where its log diverges (OffsetForLeaderEpoch)
     * before fetching; oe_end / oe_epoch: our log end and latest epoch
     * when asked. */
    bool truncating;
    int64_t oe_end;
    int32_t oe_epoch;
    /* F10: while one answer is handled, its data for this partition (F1
     * checked; NULL: none to apply) and the offset the next request asks
     * for before it is appended (-1: the log end, as usual). */
    const kp_FetchResponse_PartitionData *answer;
    bk_partition *answer_to;
    int64_t ahead;
} fe_part;

typedef struct fe_fetcher {
    struct fe_set *set;
    int32_t leader;
    char host[FE_HOST_MAX];
    int32_t port;
    enum fe_state state;
    struct bufferevent *bev;
    struct event *rev;                   /* plaintext: answers read here (F8) */
    struct event *timer;                 /* backoff, paused partitions */
    fe_part *parts;
    int nparts, cap;
    /* reused buffers (F3) */
    kp_buf out;
    repl_frame in;                       /* F8: the answer being read */
    kp_arena arena;
    kp_FetchRequest_FetchTopic *ts;
    kp_FetchRequest_FetchPartition *ps;
    kp_OffsetForLeaderEpochRequest_OffsetForLeaderTopic *ets;
    kp_OffsetForLeaderEpochRequest_OffsetForLeaderPartition *eps;
    int req_cap;
    int16_t api_out;                     /* the API of the request out */
    /* F9: the SASL login on a SASL inter-broker listener */
    bk_sasl_client sasl;
    int64_t reauth_us;                   /* mono; 0: no session lifetime */
    int32_t corrid;
    int64_t max_batch;                   /* largest max.message.bytes followed */
    struct fe_fetcher *next;
} fe_fetcher;

typedef struct fe_set {
    bk_broker *b;
    struct evdns_base *dns;
    struct event *recompute;             /* zero-delay, coalesces updates */
    fe_fetcher *fetchers;
    bk_tbucket throttle;                 /* follower.replication.throttled.rate (F7) */
    /* F9: the SCRAM SaltedPassword of the broker's password (one
     * credential, in ZooKeeper, for every leader): PBKDF2 runs once per
     * salt, not per login, and never on the loop (sec_sasl_client.h SC2). */
    bk_sasl_keys keys;
} fe_set;

/* /metrics (repl_fetchers_counters); the loop thread's only. */
static uint64_t fetches_ahead, answers_dropped;

void repl_fetchers_counters(uint64_t *ahead, uint64_t *dropped)
{
    *ahead = fetches_ahead;
    *dropped = answers_dropped;
}

/* ---- pure pieces ------------------------------------------------------------- */

bool repl_follow_wanted(const bk_pview *v, int32_t self, bool leader_alive)
{
    return v->local && v->leader >= 0 && v->leader != self && leader_alive;
}

size_t repl_fetch_whole_batches(const uint8_t *buf, size_t len, int64_t *records)
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

int64_t repl_fetch_ahead_offset(const uint8_t *buf, size_t whole, int64_t log_end,
                              int64_t leader_hw)
{
    int64_t expect = log_end;
    for (size_t off = 0; off < whole;) {
        kp_batch h;
        int64_t size = kp_batch_size(buf + off, whole - off);
        if (size < KP_BATCH_HEADER_SIZE || (uint64_t)size > whole - off ||
            kp_batch_header(buf + off, whole - off, &h) != 0 || h.LastOffsetDelta < 0 ||
            h.BaseOffset < expect)
            return -1;                   /* what seg_append_assigned refuses (log.c L7) */
        if (h.BaseOffset > INT64_MAX - 1 - h.LastOffsetDelta)
            return -1;                   /* a leader's offsets past INT64_MAX */
        expect = h.BaseOffset + h.LastOffsetDelta + 1;
        off += (size_t)size;
    }
    return whole == 0 || expect < leader_hw ? expect : -1;
}

int64_t repl_fetch_reauth_at(int64_t now_us, int64_t lifetime_ms, int permille)
{
    if (lifetime_ms <= 0 || permille <= 0 || lifetime_ms > (INT64_MAX - now_us) / permille)
        return 0;                        /* none, or beyond any clock: never */
    return now_us + lifetime_ms * permille;
}

int64_t repl_fetch_reauth_due(int64_t lifetime_ms)
{
    uint16_t rnd = 0;
    if (RAND_bytes((unsigned char *)&rnd, sizeof rnd) != 1)
        rnd = 0;                                   /* the earliest share */
    return repl_fetch_reauth_at(bk_mono_us(), lifetime_ms,
                                FE_REAUTH_MIN_PERMILLE + rnd % (FE_REAUTH_SPAN_PERMILLE + 1));
}

enum bk_out_of_range repl_fetch_out_of_range(int64_t log_end, int64_t leader_hw,
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
    /* Unarmed, this fetcher does not retry by itself: logged, so that an
     * operator sees why it stalls. */
    bk_event_add(f->timer, &tv, "replica fetcher");
}

static void close_conn(fe_fetcher *f)
{
    if (f->rev)
        event_free(f->rev);              /* before its fd is closed */
    f->rev = NULL;
    repl_frame_reset(&f->in);
    sec_sasl_client_reset(&f->sasl);
    f->reauth_us = 0;
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

int repl_truncate(bk_broker *b, bk_partition *p, int64_t offset, const char *why,
                  const char *leader)
{
    int64_t end = seg_log_end(p->log);
    int rc = seg_truncate(p->log, offset);
    replica_janitor_dead(b, seg_take_dead(p->log), p->topic->cfg.file_delete_delay_ms);
    if (rc != 0)
        return rc;
    replica_partition_epochs_save(b, p);
    if (seg_log_end(p->log) == end)
        return 0;
    BK_INFO("partition %s-%d: log end %lld truncated to %lld (%s, %s)", p->topic->name, p->id,
            (long long)end, (long long)seg_log_end(p->log), why, leader);
    if (seg_log_end(p->log) < p->high_watermark)
        BK_WARN("partition %s-%d: offsets %lld to %lld were committed (below the high "
                "watermark) and are lost: %s does not have them (it was "
                "elected without them: an unclean leader election, or one that settled "
                "for the replicas back within leader.recovery.wait.ms)", p->topic->name,
                p->id, (long long)seg_log_end(p->log),
                (long long)p->high_watermark - 1, leader);
    replica_producers_reset(b, p);
    if (p->high_watermark > seg_log_end(p->log))
        replica_partition_set_high_watermark(b, p, seg_log_end(p->log));
    return 0;
}

/* repl_truncate, or pausing the partition until its view changes after
 * logging why not (the log is as it was, or in its error state). */
static int truncate_to(fe_fetcher *f, fe_part *fp, bk_partition *p, int64_t offset,
                       const char *why)
{
    char leader[32];
    snprintf(leader, sizeof leader, "leader %d", f->leader);
    int rc = repl_truncate(f->set->b, p, offset, why, leader);
    if (rc != 0) {
        BK_ERROR("partition %s-%d: cannot truncate to %lld (%s; error %d); not fetching "
                 "it until its state changes", fp->topic, fp->partition,
                 (long long)offset, why, rc);
        pause_part(fp, INT64_MAX);
    }
    return rc;
}

/* OFFSET_OUT_OF_RANGE: see the note at the top. */
static void out_of_range(fe_fetcher *f, fe_part *fp, bk_partition *p,
                         const kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = f->set->b;
    int64_t end = seg_log_end(p->log);
    int64_t backoff_us = (int64_t)b->cfg->replica_fetch_backoff_ms * 1000;
    switch (repl_fetch_out_of_range(end, rp->HighWatermark, rp->LogStartOffset)) {
    case BK_OOR_TRUNCATE:
        truncate_to(f, fp, p, rp->HighWatermark, "ahead of the leader's high watermark");
        return;                          /* fetched again at once */
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

/* A partition error of either answer (Fetch, OffsetForLeaderEpoch): the
 * pause the note at the top gives it. */
static void part_error(fe_fetcher *f, fe_part *fp, bk_partition *p, int16_t err)
{
    bk_broker *b = f->set->b;
    int64_t backoff_us = (int64_t)b->cfg->replica_fetch_backoff_ms * 1000;
    switch (err) {
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
    default:
        BK_WARN("partition %s-%d: leader %d answered error %d; retrying in %d ms",
                fp->topic, fp->partition, f->leader, err,
                b->cfg->replica_fetch_backoff_ms);
        pause_part(fp, bk_mono_us() + backoff_us);
        return;
    }
}

/* One partition of a Fetch answer (F1 checked by the caller). */
static void apply_partition(fe_fetcher *f, fe_part *fp, bk_partition *p,
                            const kp_FetchResponse_PartitionData *rp)
{
    bk_broker *b = f->set->b;
    int64_t backoff_us = (int64_t)b->cfg->replica_fetch_backoff_ms * 1000;
    if (rp->ErrorCode == KP_OFFSET_OUT_OF_RANGE) {
        out_of_range(f, fp, p, rp);
        return;
    }
    if (rp->ErrorCode != KP_NONE) {
        part_error(f, fp, p, rp->ErrorCode);
        return;
    }
    int64_t records = 0;
    size_t whole = rp->Records.len > 0
        ? repl_fetch_whole_batches((const uint8_t *)rp->Records.p, (size_t)rp->Records.len,
                                 &records)
        : 0;
    if (whole > 0) {
        /* Cost: one CRC pass per batch (seg_append_assigned checks what it
         * stores) and one write(); the bytes are the frame buffer's. */
        int rc = seg_append_assigned(p->log, (const uint8_t *)rp->Records.p, whole,
                                     bk_now_ms());
        if (rc != 0) {
            /* A storage fault takes the log directory offline (replica_logdir.c):
             * logged there once; this broker then follows nothing. */
            if (seg_failed(p->log) &&
                replica_logdir_fault(b, p, "appending to", seg_last_errno(p->log))) {
                pause_part(fp, INT64_MAX);
                return;
            }
            BK_ERROR("partition %s-%d: cannot append %zu bytes from leader %d at offset "
                     "%lld (error %d: %s); retrying in %d ms", fp->topic, fp->partition,
                     whole, f->leader, (long long)seg_log_end(p->log), rc,
                     strerror(seg_failed(p->log) ? seg_last_errno(p->log) : EINVAL),
                     b->cfg->replica_fetch_backoff_ms);
            if (seg_failed(p->log) && seg_reset_error(p->log) != 0)
                BK_ERROR("partition %s-%d: its log stays in the error state",
                         fp->topic, fp->partition);
            pause_part(fp, bk_mono_us() + backoff_us);
            return;
        }
        p->bytes_in += whole;
        if (repl_throttled_replica(&p->topic->parts[p->id], b->cfg->broker_id))
            f->set->throttle.tokens -= (int64_t)whole;    /* F7 */
        /* The producers' sequences go with their batches, so a retry that
         * reaches this replica once it leads is still recognised. */
        if (p->producers && replica_pstate_record(p->producers, (const uint8_t *)rp->Records.p,
                                             whole, bk_now_ms()) != 0)
            BK_WARN("partition %s-%d: out of memory for producer state; retried "
                    "idempotent batches may be appended twice", fp->topic, fp->partition);
        replica_partition_appended(b, p, records);
    }
    int64_t end = seg_log_end(p->log);
    int64_t hw = rp->HighWatermark < end ? rp->HighWatermark : end;
    if (hw >= 0)
        replica_partition_set_high_watermark(b, p, hw);
}

/* One partition of an OffsetForLeaderEpoch answer (F6; F1's checks done
 * by the caller): where the leader's log leaves ours, as Kafka's
 * follower decides it.  The leader answered for our latest epoch E with
 * the largest epoch L <= E it knows and where L ends in its log.  If we
 * know L too, our log is the leader's up to min(where L ends in ours,
 * where it ends in the leader's): cut there, done.  If we do not, cut
 * where our epochs up to L end and ask again with what is then our
 * latest.  A leader with no history (-1) leaves the pre-epoch rule: cut
 * back to our high watermark. */
int64_t repl_epoch_cut(const seg_log *log, int64_t hw, int32_t leader_epoch,
                       int64_t end_offset, bool *done, char *why, size_t whylen)
{
    int64_t end = seg_log_end(log), to = hw;
    *done = true;
    snprintf(why, whylen, "no leader epochs on the leader: back to the high watermark");
    if (leader_epoch >= 0 && end_offset >= 0) {
        int32_t ours;
        int64_t ours_end;
        seg_epoch_end_offset(log, leader_epoch, &ours, &ours_end);
        if (ours_end < 0)
            ours_end = end;              /* cannot be: L <= our latest epoch */
        *done = ours == leader_epoch;
        to = *done && end_offset < ours_end ? end_offset : ours_end;
        snprintf(why, whylen, "%s epoch %d ends at %lld in the leader's log, %lld in ours",
                 *done ? "leader" : "diverged before leader", (int)leader_epoch,
                 (long long)end_offset, (long long)ours_end);
    }
    return to > end ? end : to;
}

static void apply_epoch(fe_fetcher *f, fe_part *fp, bk_partition *p,
                        const kp_OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult *rp)
{
    if (rp->ErrorCode != KP_NONE) {
        part_error(f, fp, p, rp->ErrorCode);
        return;
    }
    bool done;
    char why[160];
    int64_t to = repl_epoch_cut(p->log, p->high_watermark, rp->LeaderEpoch, rp->EndOffset,
                                &done, why, sizeof why);
    if (truncate_to(f, fp, p, to, why) != 0)
        return;
    /* Asking again only helps when our latest epoch went down. */
    if (done || seg_epoch_latest(p->log) >= fp->oe_epoch)
        fp->truncating = false;
}

static void handle_epochs(fe_fetcher *f, kp_rd *r)
{
    bk_broker *b = f->set->b;
    kp_OffsetForLeaderEpochResponse m;
    kp_arena_reset(&f->arena);
    if (kp_dec_OffsetForLeaderEpochResponse(r, FE_EPOCH_VERSION, &m, &f->arena) != 0) {
        conn_fail(f, "malformed OffsetForLeaderEpoch answer");
        return;
    }
    f->state = FE_READY;
    int32_t self = b->cfg->broker_id;
    for (int32_t i = 0; i < m.Topics_count; i++) {
        const kp_OffsetForLeaderEpochResponse_OffsetForLeaderTopicResult *mt = &m.Topics[i];
        for (int32_t j = 0; j < mt->Partitions_count; j++) {
            const kp_OffsetForLeaderEpochResponse_OffsetForLeaderPartitionResult *rp =
                &mt->Partitions[j];
            fe_part *fp = find_part(f, mt->Topic, rp->Partition);
            if (!fp || !fp->in_request)
                continue;
            fp->in_request = false;
            const bk_pview *v = view_partition(b, mt->Topic, rp->Partition);
            if (!fp->truncating || !v || !v->local || v->leader != f->leader ||
                v->leader == self || v->leader_epoch != fp->fetch_epoch ||
                seg_log_end(v->local->log) != fp->oe_end)
                continue;                /* F1; asked again if still wanted */
            apply_epoch(f, fp, v->local, rp);
        }
    }
    for (int i = 0; i < f->nparts; i++)
        f->parts[i].in_request = false;
    send_fetch(f);
}

/* ---- the SASL login (F9; its client: daemon/security/sec_sasl_client.c) ------------------- */

static void send_request(fe_fetcher *f, int16_t api, int16_t version, const void *q);

static void sasl_send(void *conn, int16_t api, int16_t version, const void *q)
{
    send_request(conn, api, version, q);
}

static void sasl_conn_fail(void *conn, const char *why)
{
    conn_fail(conn, why);
}

/* Logged in: fetch, and (KIP-368) log in again before the leader's
 * session ends. */
static void sasl_authenticated(void *conn, int64_t lifetime_ms)
{
    fe_fetcher *f = conn;
    f->reauth_us = repl_fetch_reauth_due(lifetime_ms);
    send_fetch(f);
}

static const bk_sasl_client_ops sasl_ops = { sasl_send, sasl_conn_fail, sasl_authenticated };

static void sasl_start(fe_fetcher *f)
{
    f->reauth_us = 0;
    sec_sasl_client_start(&f->sasl);
}

/* The SaltedPassword is known (or failed): every fetcher waiting for it
 * goes on. */
static void on_salted(void *owner, bool ok)
{
    fe_set *s = owner;
    for (fe_fetcher *f = s->fetchers; f; f = f->next)
        if (f->sasl.salting) {
            sec_sasl_client_resume(&f->sasl, ok);
            if (f->sasl.salting)
                f->state = FE_WAITING;   /* another salt: nothing else is sent */
        }
}

/* An answer of the exchange: the next token, or authenticated → fetch. */
static void handle_sasl(fe_fetcher *f, kp_rd *r)
{
    kp_arena_reset(&f->arena);
    f->state = FE_READY;
    sec_sasl_client_answer(&f->sasl, f->api_out, r, &f->arena);
    if (f->sasl.salting)
        f->state = FE_WAITING;           /* nothing else is sent meanwhile */
}

static void handle_answer(fe_fetcher *f, const uint8_t *frame, size_t len)
{
    bk_broker *b = f->set->b;
    kp_rd r;
    kp_rd_init(&r, frame, len);
    int32_t corrid = kp_rd_i32(&r);
    if (f->sasl.salting) {               /* F9: no request is out meanwhile */
        conn_fail(f, "bytes from the leader with no request out");
        return;
    }
    if (!kp_rd_ok(&r) || corrid != f->corrid) {
        conn_fail(f, "answer with an unexpected correlation id");
        return;
    }
    if (f->api_out == KP_API_OFFSET_FOR_LEADER_EPOCH) {
        handle_epochs(f, &r);
        return;
    }
    if (f->api_out == KP_API_SASL_HANDSHAKE || f->api_out == KP_API_SASL_AUTHENTICATE) {
        handle_sasl(f, &r);
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
    /* F10: ahead while every partition to apply has no error and an
     * offset repl_fetch_ahead_offset allows, none is cut (F6) and nothing
     * is throttled (F7: its tokens are charged by the append). */
    bool ahead = view_broker_config_rate(b, "follower.replication.throttled.rate") <= 0;
    for (int i = 0; i < f->nparts; i++) {
        f->parts[i].answer = NULL;
        f->parts[i].ahead = -1;
        ahead = ahead && !f->parts[i].truncating;
    }
    for (int32_t i = 0; i < m.Responses_count; i++) {
        const kp_FetchResponse_FetchableTopicResponse *mt = &m.Responses[i];
        for (int32_t j = 0; j < mt->Partitions_count; j++) {
            const kp_FetchResponse_PartitionData *rp = &mt->Partitions[j];
            fe_part *fp = find_part(f, mt->Topic, rp->PartitionIndex);
            if (!fp || !fp->in_request)
                continue;                /* no longer followed from here */
            fp->in_request = false;
            /* F1: the view as it is now, by name; F6: not before the
             * divergence is cut. */
            const bk_pview *v = view_partition(b, mt->Topic, rp->PartitionIndex);
            if (fp->truncating || !v || !v->local || v->leader != f->leader ||
                v->leader == self || seg_log_end(v->local->log) != fp->fetch_offset) {
                answers_dropped++;
                continue;
            }
            fp->answer = rp;
            fp->answer_to = v->local;
            if (!ahead)
                continue;
            const uint8_t *recs = (const uint8_t *)rp->Records.p;
            size_t len = rp->Records.len > 0 ? (size_t)rp->Records.len : 0;
            fp->ahead = rp->ErrorCode != KP_NONE ? -1
                : repl_fetch_ahead_offset(recs, repl_fetch_whole_batches(recs, len, NULL),
                                        fp->fetch_offset, rp->HighWatermark);
            ahead = fp->ahead >= 0;
        }
    }
    for (int i = 0; i < f->nparts; i++)
        f->parts[i].in_request = false;  /* any the leader left out: asked again */
    if (ahead) {
        send_fetch(f);                   /* F10: answered while we append */
        fetches_ahead += f->state == FE_WAITING;
    }
    for (int i = 0; i < f->nparts; i++) {
        fe_part *fp = &f->parts[i];
        fp->ahead = -1;
        if (fp->answer)
            apply_partition(f, fp, fp->answer_to, fp->answer);
        fp->answer = NULL;
    }
    if (!ahead)
        send_fetch(f);
}

/* An answer holds at most the bytes asked for, but always a whole first
 * batch, which may be as large as a topic allows. */
static int64_t frame_max(const fe_fetcher *f)
{
    const bk_config *c = f->set->b->cfg;
    return (int64_t)c->replica_fetch_response_max_bytes + (int64_t)c->replica_fetch_max_bytes +
           f->max_batch + FE_FRAME_SLACK;
}

/* TLS connections: the answer through the bufferevent's input buffer. */
static void on_read(struct bufferevent *bev, void *arg)
{
    fe_fetcher *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    const char *why;
    size_t len;
    while (f->bev == bev) {              /* RF5: read even with nothing out */
        int rc = repl_frame_evbuffer(&f->in, in, f->state == FE_WAITING, frame_max(f), &len,
                                     &why);
        if (rc == REPL_FRAME_ERROR)
            conn_fail(f, why);
        if (rc != REPL_FRAME_DONE)
            return;
        handle_answer(f, f->in.buf + 4, len);
    }
}

/* Plaintext connections (F8): the answer recv()d straight into f->in. */
static void on_sock_read(evutil_socket_t fd, short what, void *arg)
{
    fe_fetcher *f = arg;
    const char *why;
    size_t len;
    if (what & EV_TIMEOUT) {
        if (f->state == FE_WAITING)
            conn_fail(f, "no answer in time");
        return;                          /* idle: still read, to see the leader close */
    }
    int rc = repl_frame_recv(&f->in, fd, f->state == FE_WAITING, frame_max(f), &len, &why);
    if (rc == REPL_FRAME_EOF)
        conn_fail(f, "connection closed by the leader");
    else if (rc == REPL_FRAME_ERROR)
        conn_fail(f, why);
    else if (rc == REPL_FRAME_DONE)
        handle_answer(f, f->in.buf + 4, len);
}

/* F8: a plaintext connection's input is read by on_sock_read, its own
 * event with the read timeout the bufferevent had; the bufferevent keeps
 * the connecting and the output.  0, or -1 (out of memory). */
static int take_reading(fe_fetcher *f)
{
    bk_broker *b = f->set->b;
    return repl_frame_watch(&f->in, b->base, f->bev,
                            (int64_t)b->cfg->replica_fetch_wait_max_ms + FE_SOCKET_TIMEOUT_MS,
                            on_sock_read, f, &f->rev);
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
        if (!bufferevent_openssl_get_ssl(bev) && take_reading(f) != 0) {
            conn_fail(f, "cannot watch the connection");
            return;
        }
        f->state = FE_READY;
        if (sec_sasl_client_wanted(f->set->b))
            sasl_start(f);               /* F9: the login before any Fetch */
        else
            send_fetch(f);
        return;
    }
    char why[256];
    conn_fail(f, sec_tls_event_why(bev, what, "connection closed by the leader", why,
                                     sizeof why));
}

static void fetcher_connect(fe_fetcher *f)
{
    bk_broker *b = f->set->b;
    close_conn(f);
    /* The inter-broker listener's protocol (inter.broker.listener.name):
     * TLS through libevent's OpenSSL filter, the host name checked
     * against the leader's certificate unless
     * ssl.endpoint.identification.algorithm is empty; SASL_* log in once
     * connected (F9). */
    char err[512];
    const char *why = NULL;
    f->bev = repl_conn_new(b, f->host, err, sizeof err, &why);
    if (!f->bev) {
        conn_fail(f, why);
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

/* p resized to n elements of size bytes; out of memory: p as it was, and
 * *ok false. */
static void *grow_array(void *p, int32_t n, size_t size, bool *ok)
{
    void *np = realloc(p, (size_t)n * size);
    if (!np) {
        *ok = false;
        return p;
    }
    return np;
}

/* Request arrays grown with the partitions (F3).  false: out of memory. */
static bool grow_requests(fe_fetcher *f)
{
    bool ok = true;
    if (f->req_cap >= f->nparts)
        return true;
    f->ts = grow_array(f->ts, f->nparts, sizeof *f->ts, &ok);
    f->ps = grow_array(f->ps, f->nparts, sizeof *f->ps, &ok);
    f->ets = grow_array(f->ets, f->nparts, sizeof *f->ets, &ok);
    f->eps = grow_array(f->eps, f->nparts, sizeof *f->eps, &ok);
    if (ok)
        f->req_cap = f->nparts;
    return ok;
}

/* Frames and sends the request in f->out's body writer; WAITING after. */
static void send_request(fe_fetcher *f, int16_t api, int16_t version, const void *q)
{
    bk_broker *b = f->set->b;
    if (++f->corrid < 0)
        f->corrid = 0;
    char client_id[32];
    snprintf(client_id, sizeof client_id, "broker-%d-fetcher-0", b->cfg->broker_id);
    kp_buf_reset(&f->out);
    size_t frame = kp_wr_i32_placeholder(&f->out);
    kp_req_hdr_write(&f->out, api, version, f->corrid, client_id);
    switch (api) {
    case KP_API_FETCH:
        kp_enc_FetchRequest(&f->out, version, q);
        break;
    case KP_API_OFFSET_FOR_LEADER_EPOCH:
        kp_enc_OffsetForLeaderEpochRequest(&f->out, version, q);
        break;
    case KP_API_SASL_HANDSHAKE:
        kp_enc_SaslHandshakeRequest(&f->out, version, q);
        break;
    default:
        kp_enc_SaslAuthenticateRequest(&f->out, version, q);
        break;
    }
    kp_wr_i32_at(&f->out, frame, (int32_t)(f->out.len - frame - 4));
    /* F8: plaintext requests go out by one send() when nothing waits in the
     * bufferevent (the usual case: the previous request was read whole
     * before it was answered); only what the socket does not take goes
     * through the bufferevent's output and its write event. */
    size_t sent = 0;
    if (!f->out.err && f->rev &&
        evbuffer_get_length(bufferevent_get_output(f->bev)) == 0) {
        ssize_t n = send(bufferevent_getfd(f->bev), f->out.data, f->out.len, MSG_NOSIGNAL);
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            conn_fail(f, "connection error");
            return;
        }
        sent = n > 0 ? (size_t)n : 0;
    }
    if (f->out.err || (sent < f->out.len &&
                       bufferevent_write(f->bev, f->out.data + sent, f->out.len - sent) != 0)) {
        conn_fail(f, "cannot send a request");
        return;
    }
    if (api == KP_API_SASL_AUTHENTICATE)
        OPENSSL_cleanse(f->out.data, f->out.len);     /* the password or proof */
    f->api_out = api;
    f->state = FE_WAITING;
}

/* F6: one OffsetForLeaderEpoch for every partition that must find its
 * divergence first and is not paused.  A log with no epoch history (empty,
 * or written before epochs) has nothing to ask: it is cut back to its high
 * watermark, Kafka's rule for it.  true: a request went out. */
static bool send_epochs(fe_fetcher *f, int64_t now)
{
    bk_broker *b = f->set->b;
    int n = 0;
    for (int i = 0; i < f->nparts; i++) {
        fe_part *fp = &f->parts[i];
        if (!fp->truncating || fp->retry_us > now)
            continue;
        const bk_pview *v = view_partition(b, kp_str_cstr(fp->topic), fp->partition);
        if (!v || !v->local || v->leader != f->leader)
            continue;
        bk_partition *p = v->local;
        fp->oe_epoch = seg_epoch_latest(p->log);
        if (fp->oe_epoch < 0) {
            if (truncate_to(f, fp, p, p->high_watermark, "no leader epochs here: back "
                            "to the high watermark") == 0)
                fp->truncating = false;
            continue;
        }
        fp->oe_end = seg_log_end(p->log);
        fp->fetch_epoch = v->leader_epoch;
        fp->in_request = true;
        f->eps[n] = (kp_OffsetForLeaderEpochRequest_OffsetForLeaderPartition){
            .Partition = fp->partition, .CurrentLeaderEpoch = fp->fetch_epoch,
            .LeaderEpoch = fp->oe_epoch,
        };
        f->ets[n] = (kp_OffsetForLeaderEpochRequest_OffsetForLeaderTopic){
            .Topic = kp_str_cstr(fp->topic), .Partitions = &f->eps[n], .Partitions_count = 1,
        };
        n++;
    }
    if (n == 0)
        return false;
    kp_OffsetForLeaderEpochRequest q;
    kp_init_OffsetForLeaderEpochRequest(&q);
    q.ReplicaId = b->cfg->broker_id;
    q.Topics = f->ets;
    q.Topics_count = n;
    send_request(f, KP_API_OFFSET_FOR_LEADER_EPOCH, FE_EPOCH_VERSION, &q);
    return true;
}

static void send_fetch(fe_fetcher *f)
{
    bk_broker *b = f->set->b;
    if (f->state != FE_READY || !f->bev)
        return;
    if (!grow_requests(f)) {
        conn_fail(f, "out of memory for a request");
        return;
    }
    int64_t now = bk_mono_us(), next_retry = INT64_MAX;
    if (f->reauth_us && now >= f->reauth_us) {
        sasl_start(f);                   /* F9: KIP-368, same connection */
        return;
    }
    if (send_epochs(f, now))
        return;
    int64_t rate = view_broker_config_rate(b, "follower.replication.throttled.rate");
    int64_t tokens = rate > 0 ? repl_tbucket_refill(&f->set->throttle, rate, now) : 0;
    int n = 0;
    for (int i = 0; i < f->nparts; i++) {
        fe_part *fp = &f->parts[i];
        if (fp->retry_us > now) {
            if (fp->retry_us < next_retry)
                next_retry = fp->retry_us;
            continue;
        }
        fp->retry_us = 0;
        if (fp->truncating)
            continue;                    /* F6: its truncation failed; paused */
        const bk_pview *v = view_partition(b, kp_str_cstr(fp->topic), fp->partition);
        if (!v || !v->local || v->leader != f->leader)
            continue;                    /* the next recomputation drops it */
        int32_t max_bytes = b->cfg->replica_fetch_max_bytes;
        if (rate > 0 && repl_throttled_replica(v, b->cfg->broker_id)) {
            if (tokens <= 0) {                   /* F7: back when the bucket has some */
                fp->retry_us = now + (1 - tokens) * 1000000 / rate;
                if (fp->retry_us < next_retry)
                    next_retry = fp->retry_us;
                continue;
            }
            if (tokens < max_bytes)
                max_bytes = (int32_t)tokens;
        }
        seg_log *log = v->local->log;
        fp->fetch_offset = fp->ahead >= 0 ? fp->ahead : seg_log_end(log);
        fp->fetch_epoch = v->leader_epoch;
        fp->in_request = true;
        f->ps[n] = (kp_FetchRequest_FetchPartition){
            .Partition = fp->partition, .CurrentLeaderEpoch = fp->fetch_epoch,
            .FetchOffset = fp->fetch_offset, .LastFetchedEpoch = -1,
            .LogStartOffset = seg_log_start(log),
            .PartitionMaxBytes = max_bytes,
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
    send_request(f, KP_API_FETCH, FE_FETCH_VERSION, &q);
}

/* ---- the set of fetchers ------------------------------------------------------------- */

static void fetcher_free(fe_fetcher *f)
{
    close_conn(f);
    if (f->timer)
        event_free(f->timer);
    kp_buf_free(&f->out);
    kp_arena_free(&f->arena);
    repl_frame_free(&f->in);
    free(f->ts);
    free(f->ps);
    free(f->ets);
    free(f->eps);
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
    sec_sasl_client_init(&f->sasl, &s->keys, &sasl_ops, f, leader);
    f->next = s->fetchers;
    s->fetchers = f;
    return f;
}

/* A replica that starts following a leader (a new leader, a new epoch)
 * first finds where its log leaves the leader's (F6: OffsetForLeaderEpoch,
 * apply_epoch) and cuts it there, so that what the new leader never had is
 * never served from here and what it has is not fetched twice.  A
 * follower thus cut below the leader's high watermark (an unclean
 * election) is dropped from the ISR by the leader (repl_isr.c) until it has
 * caught up again. */
static void follow(fe_fetcher *f, const bk_topic *t, int32_t i, const bk_pview *v)
{
    /* A broker in its controlled shutdown starts following nothing new
     * (cluster_leaders.c): following a new leader would first cut its log. */
    bool leaving = cl_cluster_leaving(f->set->b);
    for (int k = 0; k < f->nparts; k++) {
        fe_part *fp = &f->parts[k];
        if (fp->partition == i && !strcmp(fp->topic, t->name)) {
            if (leaving && fp->leader_epoch != v->leader_epoch)
                return;                  /* not seen: dropped */
            fp->seen = true;
            if (fp->leader_epoch != v->leader_epoch)
                fp->truncating = true;
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
    fe_part *fp = &f->parts[f->nparts++];
    memset(fp, 0, sizeof *fp);
    fp->ahead = -1;
    fp->truncating = true;
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
        if (!repl_follow_wanted(v, b->cfg->broker_id, view_broker_alive(b, v->leader)))
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
    if (*b->repl->synced && !replica_logdir_offline(b))   /* a failed log dir: none (replica_logdir.c) */
        view_topics_foreach(b, collect_topic, s);
    bk_broker_info info[CL_MAX_BROKERS];
    const bk_listener *ib = &b->cfg->listeners[b->cfg->inter_broker_listener];
    int nb = view_brokers_info(b, ib->name, info, CL_MAX_BROKERS);
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

void repl_fetchers_update(bk_broker *b)
{
    fe_set *s = b->repl ? b->repl->fetchers : NULL;
    if (!s)
        return;
    if (!evtimer_pending(s->recompute, NULL)) {
        struct timeval zero = { 0, 0 };
        bk_event_add(s->recompute, &zero, "fetchers recompute"); /* retried at the next call */
    }
}

int repl_fetchers_start(bk_broker *b)
{
    fe_set *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    s->b = b;
    sec_sasl_keys_init(&s->keys, b, on_salted, s);
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
    b->repl->fetchers = s;
    return 0;
}

void repl_fetchers_stop(bk_broker *b)
{
    fe_set *s = b->repl ? b->repl->fetchers : NULL;
    if (!s)
        return;
    while (s->fetchers) {
        fe_fetcher *f = s->fetchers;
        s->fetchers = f->next;
        fetcher_free(f);
    }
    event_free(s->recompute);
    sec_sasl_keys_free(&s->keys);         /* a job in flight is disowned */
    if (s->dns)
        evdns_base_free(s->dns, 0);
    free(s);
    b->repl->fetchers = NULL;
}
