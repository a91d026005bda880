/*
 * daemon/registry/sr_follow.c — cluster mode: a broker without a replica of
 * _schemas-0 (a cluster of more brokers than its replication factor, 3)
 * still keeps the registry in memory and in SQL, and answers reads: it
 * reads the partition from its leader as a consumer would, with Fetch
 * requests over the inter-broker connection (replication/repl_peer.h, the
 * transaction markers' connections), and applies each record with
 * sr_log_apply, as the brokers with a replica apply their local log.
 *
 *     sr_log_tail (every SR_TAIL_MS, no local replica) ── sr_follow ──►
 *       Fetch _schemas-0 from r->applied (MaxWaitMs 0: the peer
 *       connection is shared, and a waiting Fetch would hold the calls
 *       behind it) ──► fetched: records applied in log order, the SQL
 *       mirror flushed; more to read: the next Fetch at once
 *
 * Reads wait until the broker has reached the high watermark its first
 * answer named (sr_follow_behind: answered 50003 "catching up", retriable)
 * so that a broker that joins never serves a registry older than the one
 * it found; after that it keeps following and serves what it has, like a
 * follower replica.  Writes are forwarded to the leader as on any broker
 * that does not lead (sr_forward.c).
 *
 * A leader whose log ends before r->applied (OFFSET_OUT_OF_RANGE with the
 * offset past its log start: _schemas truncated by an unclean election, or
 * deleted and made again) holds a history this broker did not apply: the
 * model is dropped and read again from the leader's log start, as a new
 * broker would (reads wait again, the SQL mirror is rewritten whole,
 * sr_mirror.c X4), with one WARN per such start-over.
 */
#include "daemon/registry/sr_int.h"
#include "daemon/replica/replica.h"
#include "daemon/replication/repl_peer.h"
#include "daemon/view/view.h"
#include "kp_msgs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SR_FOLLOW_MAX_BYTES (4 << 20)  /* per Fetch */
#define SR_FOLLOW_TIMEOUT_MS 5000

static const kp_str follow_topic = { SR_TOPIC, (int32_t)sizeof SR_TOPIC - 1 };

/* A Fetch in flight; r NULL once the registry stopped (repl_peers_stop
 * answers it after sr_stop). */
struct sr_fcall {
    sr_registry *r;
};

/* The records area of one Fetch answer, applied.  0, or -1 out of memory or
 * malformed (logged). */
static int apply_records(sr_registry *r, const uint8_t *p, size_t len)
{
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    int rc = 0;
    while (len >= 12 && rc == 0) {
        int64_t size = kp_batch_size(p, len);
        if (size < 0 || (size_t)size > len)
            break;                            /* the last batch, cut at MaxBytes */
        if (kp_rec_iter_start(&it, p, (size_t)size) != 0) {
            rc = -1;
            break;
        }
        kp_record rec;
        int got;
        while (rc == 0 && (got = kp_rec_iter_next(&it, &rec)) == 1)
            rc = sr_log_apply(r, &rec) < 0 ? -1 : 0;
        if (rc == 0 && got < 0)
            rc = -1;
        int64_t next = it.batch.BaseOffset + it.batch.LastOffsetDelta + 1;
        if (rc == 0 && next > r->applied)
            r->applied = next;                /* compaction's gaps inside a batch */
        p += size;
        len -= (size_t)size;
    }
    kp_rec_iter_free(&it);
    return rc;
}

/* The model dropped, to be read again from from (the leader's log start). */
static void follow_restart(sr_registry *r, int64_t from)
{
    BK_WARN("schema registry: the leader of %s-0 no longer holds offset %lld, which this "
            "broker applied up to (the log was truncated or made again): reading it again from "
            "its start, %lld", SR_TOPIC, (long long)r->applied, (long long)from);
    sr_state_free(r);
    sr_validate_free(r);                  /* sr_validate.c SV4: an id may name another schema */
    snprintf(r->compat, sizeof r->compat, "BACKWARD");
    snprintf(r->mode, sizeof r->mode, "READWRITE");
    r->max_id = 0;
    r->gen++;
    r->applied = from;
    r->follow_ready = false;              /* reads wait again (sr_follow_behind) */
    r->follow_target = -1;
    r->mirror_lost = true;                /* sr_mirror.c X4: rewritten whole at the flush */
}

static void fetched(void *arg, int16_t error, kp_rd *body)
{
    sr_fcall *call = arg;
    sr_registry *r = call->r;
    free(call);
    if (!r)
        return;                               /* the registry stopped */
    r->follow_call = NULL;
    kp_arena arena;
    kp_arena_init(&arena, 0);
    kp_FetchResponse resp;
    const kp_FetchResponse_PartitionData *pd = NULL;
    if (error == KP_NONE && kp_dec_FetchResponse(body, 11, &resp, &arena) == 0 &&
        resp.ErrorCode == KP_NONE && resp.Responses_count == 1 &&
        resp.Responses[0].Partitions_count == 1)
        pd = &resp.Responses[0].Partitions[0];
    int64_t before = r->applied;
    bool more = false;
    if (pd && pd->ErrorCode == KP_OFFSET_OUT_OF_RANGE && r->applied < pd->LogStartOffset) {
        r->applied = pd->LogStartOffset;      /* compaction or retention moved the start */
        more = true;
    } else if (pd && pd->ErrorCode == KP_OFFSET_OUT_OF_RANGE && pd->LogStartOffset >= 0 &&
               r->applied > pd->LogStartOffset) {
        follow_restart(r, pd->LogStartOffset);
        more = true;
    } else if (pd && pd->ErrorCode == KP_NONE) {
        if (r->follow_target < 0)
            r->follow_target = pd->HighWatermark;
        if (pd->Records.len > 0 &&
            apply_records(r, (const uint8_t *)pd->Records.p, (size_t)pd->Records.len) != 0)
            BK_ERROR("schema registry: applying %s-0 as fetched from its leader failed",
                     SR_TOPIC);
        else if (r->applied < pd->HighWatermark && r->applied == before)
            r->applied = pd->HighWatermark;   /* compacted away up to the HW */
        if (!r->follow_ready && r->applied >= r->follow_target) {
            r->follow_ready = true;
            BK_INFO("schema registry: caught up with %s-0 from its leader at offset %lld "
                    "(no replica here): %zu subjects, %zu schemas", SR_TOPIC,
                    (long long)r->applied, r->nsubjects, r->nschemas);
        }
        more = r->applied > before && r->applied < pd->HighWatermark;
    }
    kp_arena_free(&arena);
    sr_mirror_flush(r);
    if (more)
        sr_follow(r);
}

int sr_follow(sr_registry *r)
{
    bk_broker *b = r->b;
    const bk_pview *v = bk_cluster_mode(b) ? view_partition(b, follow_topic, 0) : NULL;
    if (!v || v->leader < 0 || v->leader == b->cfg->broker_id || r->follow_call)
        return 0;
    kp_FetchRequest_FetchPartition part = {
        .Partition = 0, .CurrentLeaderEpoch = -1, .FetchOffset = r->applied,
        .LastFetchedEpoch = -1, .LogStartOffset = -1,
        .PartitionMaxBytes = SR_FOLLOW_MAX_BYTES };
    kp_FetchRequest_FetchTopic topic = { .Topic = follow_topic, .Partitions = &part,
                                         .Partitions_count = 1 };
    kp_FetchRequest q;
    kp_init_FetchRequest(&q);
    q.ReplicaId = -1;                         /* a consumer: up to the high watermark */
    q.MaxWaitMs = 0;
    q.MinBytes = 0;
    q.MaxBytes = SR_FOLLOW_MAX_BYTES;
    q.IsolationLevel = 0;
    q.SessionId = 0;
    q.SessionEpoch = -1;
    q.Topics = &topic;
    q.Topics_count = 1;
    q.RackId = (kp_str){ "", 0 };
    kp_buf body;
    kp_buf_init(&body);
    sr_fcall *call = malloc(sizeof *call);
    if (call && kp_enc_FetchRequest(&body, 11, &q) == 0 && !body.err) {
        call->r = r;
        r->follow_call = call;
        repl_peer_call(b, v->leader, KP_API_FETCH, 11, body.data, body.len,
                       SR_FOLLOW_TIMEOUT_MS, fetched, call);
    } else {
        free(call);
    }
    kp_buf_free(&body);
    return 0;
}

bool sr_follow_behind(sr_registry *r)
{
    if (r->follow_ready || !bk_cluster_mode(r->b))
        return false;
    const bk_pview *v = view_partition(r->b, follow_topic, 0);
    if (!v || (v->local && v->local->log))
        return false;                         /* nothing to follow, or a replica here */
    return true;
}

void sr_follow_stop(sr_registry *r)
{
    if (r->follow_call)
        r->follow_call->r = NULL;             /* freed when it is answered */
    r->follow_call = NULL;
}
