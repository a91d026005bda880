/*
 * consumer.c — assignment, offset resolution, prefetching Fetch requests,
 * and sl_consumer_poll's record iteration.
 *
 * Partition states (sl_cpart.state):
 *
 *   NEED_STORED --(group.c: OffsetFetch)--> ACTIVE, or NEED_RESET if none
 *   NEED_RESET  --(ListOffsets earliest/latest)--> ACTIVE
 *   ACTIVE      --(Fetch: OFFSET_OUT_OF_RANGE)--> NEED_RESET, or STOPPED
 *                 with an error event when auto.offset.reset=none
 *   any         --seek / assign--> ACTIVE or NEED_RESET (version bumped)
 *
 * Prefetching: the I/O thread keeps one Fetch in flight per broker for
 * the ACTIVE partitions it leads while fewer than
 * queued.max.messages.kbytes are queued.  A response is kept whole (its
 * frame is refcounted) and queued as one chunk per partition; the fetch
 * position advances past the last complete batch at once, so the next
 * Fetch goes out while the application is still reading this one.
 *
 * Invariants:
 *   1. version: every seek/assign bumps a partition's version; chunks and
 *      in-flight requests carry the version they were made for, and data
 *      for an older version is dropped.  So a seek never returns stale
 *      messages, even ones already being iterated.
 *   2. app_pos is the offset after the last message poll returned (or the
 *      seek target): what position() reports and auto commit commits.
 *      Records below it in a batch are skipped (fetch from mid-batch).
 *   3. cparts live until the consumer is destroyed (chunks point to them);
 *      "assigned" says whether they belong to the current assignment.
 *   4. Decompression and record decoding run without cl->lock: the chunk
 *      being read belongs to the polling thread alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "clients/sl_int.h"
#include "clients/sl_cons.h"
#include "kp_msgs.h"

/* ---- partitions ----------------------------------------------------------- */

sl_cpart *sl_cons_find(sl_cons *c, const char *topic, int32_t partition)
{
    for (int i = 0; i < c->n_all; i++)
        if (c->all[i]->partition == partition && strcmp(c->all[i]->topic, topic) == 0)
            return c->all[i];
    return NULL;
}

static sl_cpart *cpart_get(sl_cons *c, const char *topic, int32_t partition)
{
    sl_cpart *cp = sl_cons_find(c, topic, partition);
    if (cp)
        return cp;
    sl_cpart **na = realloc(c->all, sizeof *na * (size_t)(c->n_all + 1));
    if (!na)
        return NULL;
    c->all = na;
    cp = calloc(1, sizeof *cp);
    if (!cp || !(cp->topic = strdup(topic))) {
        free(cp);
        return NULL;
    }
    cp->partition = partition;
    cp->app_pos = SL_OFFSET_INVALID;
    cp->committed = SL_OFFSET_INVALID;
    c->all[c->n_all++] = cp;
    return cp;
}

void sl_chunk_free(sl_chunk *ch)
{
    sl_frame_unref(ch->f);
    free(ch->aborted);
    free(ch);
}

/* Drops queued chunks whose partition moved on (lock held). */
static void queue_purge(sl_cons *c)
{
    sl_chunk **pp = &c->q_head, *last = NULL;
    while (*pp) {
        sl_chunk *ch = *pp;
        if (ch->version != ch->cp->version || !ch->cp->assigned) {
            *pp = ch->next;
            c->q_bytes -= (int64_t)ch->len;
            sl_chunk_free(ch);
            continue;
        }
        last = ch;
        pp = &ch->next;
    }
    c->q_tail = last;
}

static void queue_push(sl_client *cl, sl_cons *c, sl_chunk *ch)
{
    ch->next = NULL;
    if (c->q_tail)
        c->q_tail->next = ch;
    else
        c->q_head = ch;
    c->q_tail = ch;
    c->q_bytes += (int64_t)ch->len;
    pthread_cond_broadcast(&cl->cond);
}

/* Sets where a partition starts (lock held). */
void sl_cons_start_at(sl_client *cl, sl_cpart *cp, int64_t offset)
{
    cp->version++;
    cp->eof_sent = false;
    cp->backoff_until = 0;
    cp->busy = false;         /* answers for the old version are ignored */
    if (offset >= 0) {
        cp->fetch_pos = cp->app_pos = offset;
        cp->state = CP_ACTIVE;
    } else if (offset == SL_OFFSET_STORED && cl->conf.group_id) {
        cp->state = CP_NEED_STORED;
        cp->app_pos = SL_OFFSET_INVALID;
    } else {
        if (offset == SL_OFFSET_STORED)
            offset = cl->conf.auto_offset_reset;
        cp->app_pos = SL_OFFSET_INVALID;
        if (offset == SL_OFFSET_INVALID) {
            cp->state = CP_STOPPED;
        } else {
            cp->fetch_pos = offset;
            cp->state = CP_NEED_RESET;
        }
    }
    sl_wakeup(cl);
}

void sl_cons_set_assignment(sl_client *cl, const sl_tp *tps, int n, bool from_group)
{
    sl_cons *c = cl->cons;
    (void)from_group;
    for (int i = 0; i < c->n_all; i++) {
        if (c->all[i]->assigned) {
            c->all[i]->assigned = false;
            c->all[i]->version++;
        }
    }
    for (int i = 0; i < n; i++) {
        sl_cpart *cp = cpart_get(c, tps[i].topic, tps[i].partition);
        if (!cp)
            continue;
        cp->assigned = true;
        sl_md_want(cl, cp->topic);
        sl_cons_start_at(cl, cp, tps[i].offset);
    }
    queue_purge(c);
    pthread_cond_broadcast(&cl->cond);
}

int sl_cons_snapshot_positions(sl_client *cl, sl_tp **out)
{
    sl_cons *c = cl->cons;
    int n = 0;
    for (int i = 0; i < c->n_all; i++)
        if (c->all[i]->assigned && c->all[i]->app_pos >= 0)
            n++;
    sl_tp *t = calloc((size_t)n + 1, sizeof *t);
    if (!t)
        return SL_E_NOMEM;
    int k = 0;
    for (int i = 0; i < c->n_all; i++) {
        sl_cpart *cp = c->all[i];
        if (cp->assigned && cp->app_pos >= 0)
            t[k++] = (sl_tp){ cp->topic, cp->partition, cp->app_pos };
    }
    *out = t;
    return n;
}

void sl_cons_set_committed(sl_client *cl, const char *topic, int32_t partition,
                           int64_t offset)
{
    sl_cpart *cp = sl_cons_find(cl->cons, topic, partition);
    if (cp)
        cp->committed = offset;
}

/* ---- ListOffsets (auto.offset.reset) --------------------------------------- */

void sl_list_offsets_send(sl_client *cl, sl_broker *b, int16_t v, const char *topic,
                          int32_t partition, int64_t timestamp, sl_resp_cb *cb,
                          void *ctx)
{
    kp_ListOffsetsRequest_ListOffsetsPartition qp = {
        .PartitionIndex = partition, .CurrentLeaderEpoch = -1,
        .Timestamp = timestamp, .MaxNumOffsets = 1,
    };
    kp_ListOffsetsRequest_ListOffsetsTopic qt = {
        .Name = kp_str_cstr(topic), .Partitions = &qp, .Partitions_count = 1,
    };
    kp_ListOffsetsRequest q;
    kp_init_ListOffsetsRequest(&q);
    q.ReplicaId = -1;
    q.IsolationLevel = (int8_t)cl->conf.isolation_level;  /* v2+: latest = LSO */
    q.Topics = &qt;
    q.Topics_count = 1;
    kp_enc_ListOffsetsRequest(sl_req_begin(cl, b, KP_API_LIST_OFFSETS, v), v, &q);
    sl_req_end(cl, b, cb, ctx);
}

/* The request names one partition: the answer's last partition is it. */
int sl_list_offsets_read(sl_client *cl, kp_rd *r, int16_t ver, int16_t *ec, int64_t *off)
{
    kp_ListOffsetsResponse m;
    if (kp_dec_ListOffsetsResponse(r, ver, &m, &cl->arena) != 0)
        return SL_E_BAD_MSG;
    for (int32_t i = 0; i < m.Topics_count; i++)
        for (int32_t j = 0; j < m.Topics[i].Partitions_count; j++) {
            *ec = m.Topics[i].Partitions[j].ErrorCode;
            *off = m.Topics[i].Partitions[j].Offset;
        }
    return 0;
}

typedef struct lo_ctx {
    sl_cpart *cp;
    uint32_t version;
} lo_ctx;

static void handle_list_offsets(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                                kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f;
    lo_ctx *x = ctx;
    sl_cpart *cp = x->cp;
    bool current = cp->version == x->version;
    free(x);
    if (!cl->cons || !current)
        return;
    cp->busy = false;
    int16_t ec = 0;
    int64_t off = -1;
    if (!err)
        err = sl_list_offsets_read(cl, r, ver, &ec, &off);
    if (err || ec || off < 0) {
        cp->backoff_until = sl_now_ms() + cl->conf.retry_backoff_ms;
        sl_md_refresh(cl);
        return;
    }
    cp->fetch_pos = off;
    cp->app_pos = off;
    cp->state = CP_ACTIVE;
}

static void send_list_offsets(sl_client *cl, sl_broker *b, sl_cpart *cp, int16_t v)
{
    lo_ctx *x = malloc(sizeof *x);
    if (!x)
        return;
    x->cp = cp;
    x->version = cp->version;
    sl_list_offsets_send(cl, b, v, cp->topic, cp->partition,
                         cp->fetch_pos == SL_OFFSET_BEGINNING ? -2 : -1,
                         handle_list_offsets, x);
    cp->busy = true;
}

/* ---- Fetch ------------------------------------------------------------------ */

typedef struct fetch_ctx {
    int n;
    struct { sl_cpart *cp; uint32_t version; int64_t pos; } p[];
} fetch_ctx;

static void error_event(sl_client *cl, sl_cons *c, sl_cpart *cp, int err, int64_t off)
{
    sl_chunk *ch = calloc(1, sizeof *ch);
    if (!ch)
        return;
    ch->cp = cp;
    ch->version = cp->version;
    ch->err = err;
    ch->offset = off;
    queue_push(cl, c, ch);
}

/* Copies a read_committed fetch's aborted transactions into its chunk. */
static int chunk_set_aborted(sl_chunk *ch, const kp_FetchResponse_PartitionData *mp)
{
    if (mp->AbortedTransactions_count <= 0)
        return 0;
    ch->aborted = calloc((size_t)mp->AbortedTransactions_count, sizeof *ch->aborted);
    if (!ch->aborted)
        return -1;
    for (int32_t i = 0; i < mp->AbortedTransactions_count; i++)
        ch->aborted[i] = (struct sl_aborted){ mp->AbortedTransactions[i].ProducerId,
                                              mp->AbortedTransactions[i].FirstOffset, true };
    ch->n_aborted = mp->AbortedTransactions_count;
    return 0;
}

static void fetch_partition(sl_client *cl, sl_cons *c, sl_cpart *cp, sl_frame *f,
                            const kp_FetchResponse_PartitionData *mp)
{
    int16_t ec = mp->ErrorCode;
    /* read_committed: the end a consumer can reach is the LSO. */
    int64_t hwm = cl->conf.isolation_level && mp->LastStableOffset >= 0
                  ? mp->LastStableOffset : mp->HighWatermark;
    kp_str recs = mp->Records;
    if (ec == SL_ERR_OFFSET_OUT_OF_RANGE) {
        int64_t reset = cl->conf.auto_offset_reset;
        sl_log(cl, 5, "%s [%d]: offset %lld out of range, %s", cp->topic, cp->partition,
               (long long)cp->fetch_pos,
               reset == SL_OFFSET_INVALID ? "stopping (auto.offset.reset=none)"
               : reset == SL_OFFSET_BEGINNING ? "resetting to earliest" : "resetting to latest");
        if (reset == SL_OFFSET_INVALID) {
            cp->state = CP_STOPPED;
            error_event(cl, c, cp, SL_ERR_OFFSET_OUT_OF_RANGE, cp->fetch_pos);
        } else {
            cp->fetch_pos = reset;
            cp->state = CP_NEED_RESET;
        }
        return;
    }
    if (ec) {
        cp->backoff_until = sl_now_ms() + cl->conf.retry_backoff_ms;
        sl_md_refresh(cl);
        return;
    }
    cp->hwm = hwm;
    /* Walk batch headers to find the next fetch position. */
    const uint8_t *p = (const uint8_t *)recs.p;
    size_t len = recs.len > 0 ? (size_t)recs.len : 0, used = 0;
    int64_t next = cp->fetch_pos;
    while (len - used >= KP_BATCH_HEADER_SIZE) {
        int64_t size = kp_batch_size(p + used, len - used);
        if (size < 0 || (uint64_t)size > len - used)
            break;                                        /* partial tail */
        kp_batch h;
        if (kp_batch_header(p + used, len - used, &h) != 0)
            break;
        int64_t last = h.BaseOffset + h.LastOffsetDelta;
        if (last + 1 > next)
            next = last + 1;
        used += (size_t)size;
    }
    if (used > 0) {
        sl_chunk *ch = calloc(1, sizeof *ch);
        if (!ch)
            return;
        if (chunk_set_aborted(ch, mp) != 0) {
            free(ch);
            return;
        }
        ch->cp = cp;
        ch->version = cp->version;
        ch->f = f;
        f->refs++;
        ch->p = p;
        ch->len = used;
        cp->fetch_pos = next;
        cp->eof_sent = false;
        queue_push(cl, c, ch);
    } else if (len > 0) {
        /* A batch bigger than max.partition.fetch.bytes cannot happen with
         * v3+ (the broker sends one whole batch); a corrupt one can. */
        sl_log(cl, 3, "%s [%d]: no complete batch at offset %lld", cp->topic,
               cp->partition, (long long)cp->fetch_pos);
        cp->backoff_until = sl_now_ms() + 1000;
    } else if (cl->conf.enable_partition_eof && !cp->eof_sent && cp->fetch_pos >= hwm) {
        cp->eof_sent = true;
        error_event(cl, c, cp, SL_E_PARTITION_EOF, cp->fetch_pos);
    }
}

static void handle_fetch(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                         kp_rd *r, int16_t ver, void *ctx)
{
    fetch_ctx *x = ctx;
    sl_cons *c = cl->cons;
    b->fetch_inflight = false;
    if (!c) {
        free(x);
        return;
    }
    for (int i = 0; i < x->n; i++)
        x->p[i].cp->fetching = false;
    if (err) {
        free(x);
        return;
    }
    /* Records are slices of f, which fetch_partition keeps (refcounted). */
    kp_FetchResponse m;
    if (kp_dec_FetchResponse(r, ver, &m, &cl->arena) != 0) {
        sl_log(cl, 3, "malformed Fetch response");
        free(x);
        return;
    }
    if (m.ErrorCode) {                                    /* v7+ */
        sl_log(cl, 4, "Fetch failed: %s", sl_err_name(m.ErrorCode));
        free(x);
        return;
    }
    for (int32_t i = 0; i < m.Responses_count; i++) {
        const kp_FetchResponse_FetchableTopicResponse *mt = &m.Responses[i];
        for (int32_t j = 0; j < mt->Partitions_count; j++) {
            const kp_FetchResponse_PartitionData *mp = &mt->Partitions[j];
            for (int k = 0; k < x->n; k++) {
                sl_cpart *cp = x->p[k].cp;
                if (cp->partition != mp->PartitionIndex || !kp_str_eq(mt->Topic, cp->topic))
                    continue;
                if (cp->version == x->p[k].version && cp->assigned &&
                    cp->state == CP_ACTIVE && cp->fetch_pos == x->p[k].pos)
                    fetch_partition(cl, c, cp, f, mp);
                break;
            }
        }
    }
    free(x);
}

static void send_fetch(sl_client *cl, sl_cons *c, sl_broker *b, int64_t now)
{
    int16_t v = sl_api_version(b, KP_API_FETCH, 4, 11);
    if (v < 0)
        return;
    int n = 0;
    for (int i = 0; i < c->n_all; i++) {
        sl_cpart *cp = c->all[i];
        if (cp->assigned && cp->state == CP_ACTIVE && !cp->fetching &&
            cp->backoff_until <= now && sl_md_leader(cl, cp->topic, cp->partition) == b->id)
            n++;
    }
    if (n == 0)
        return;
    fetch_ctx *x = malloc(sizeof *x + sizeof x->p[0] * (size_t)n);
    if (!x)
        return;
    x->n = 0;
    /* One topic entry per partition, as before; the arrays are scratch in
     * cl->arena until encoded. */
    kp_FetchRequest_FetchTopic *ts = kp_arena_alloc(&cl->arena, (size_t)n * sizeof *ts);
    kp_FetchRequest_FetchPartition *ps = kp_arena_alloc(&cl->arena, (size_t)n * sizeof *ps);
    if (!ts || !ps) {
        kp_arena_reset(&cl->arena);
        free(x);
        return;
    }
    for (int i = 0; i < c->n_all && x->n < n; i++) {
        sl_cpart *cp = c->all[i];
        if (!(cp->assigned && cp->state == CP_ACTIVE && !cp->fetching &&
              cp->backoff_until <= now &&
              sl_md_leader(cl, cp->topic, cp->partition) == b->id))
            continue;
        /* LogStartOffset -1: a consumer's, not a follower's (JSON default). */
        ps[x->n] = (kp_FetchRequest_FetchPartition){
            .Partition = cp->partition, .CurrentLeaderEpoch = -1,
            .FetchOffset = cp->fetch_pos, .LastFetchedEpoch = -1,
            .LogStartOffset = -1, .PartitionMaxBytes = cl->conf.max_partition_fetch_bytes,
        };
        ts[x->n] = (kp_FetchRequest_FetchTopic){
            .Topic = kp_str_cstr(cp->topic),
            .Partitions = &ps[x->n], .Partitions_count = 1,
        };
        cp->fetching = true;
        x->p[x->n].cp = cp;
        x->p[x->n].version = cp->version;
        x->p[x->n].pos = cp->fetch_pos;
        x->n++;
    }
    kp_FetchRequest q;
    kp_init_FetchRequest(&q);
    q.ReplicaId = -1;
    q.MaxWaitMs = cl->conf.fetch_max_wait_ms;
    q.MinBytes = cl->conf.fetch_min_bytes;
    q.MaxBytes = cl->conf.fetch_max_bytes;
    q.IsolationLevel = (int8_t)cl->conf.isolation_level;
    q.SessionId = 0;
    q.SessionEpoch = -1;                                  /* no session (v7+) */
    q.Topics = ts;
    q.Topics_count = x->n;
    q.RackId = (kp_str){ "", 0 };                         /* v11+ */
    kp_enc_FetchRequest(sl_req_begin(cl, b, KP_API_FETCH, v), v, &q);
    kp_arena_reset(&cl->arena);
    sl_req_end(cl, b, handle_fetch, x);
    b->fetch_inflight = true;
}

void sl_cons_tick(sl_client *cl, int64_t now, int64_t *next)
{
    sl_cons *c = cl->cons;
    if (c->closed)
        return;
    bool room = c->q_bytes < (int64_t)cl->conf.queued_max_kbytes * 1024;
    bool need_md = false;
    for (int i = 0; i < c->n_all; i++) {
        sl_cpart *cp = c->all[i];
        if (!cp->assigned)
            continue;
        if (cp->backoff_until > now) {
            if (cp->backoff_until < *next)
                *next = cp->backoff_until;
            continue;
        }
        if (cp->state == CP_NEED_STORED && !cl->conf.group_id) {
            sl_cons_start_at(cl, cp, cl->conf.auto_offset_reset);
            continue;
        }
        if (cp->state != CP_NEED_RESET && cp->state != CP_ACTIVE)
            continue;
        int32_t leader = sl_md_leader(cl, cp->topic, cp->partition);
        if (leader < 0) {
            sl_mtopic *t = sl_md_topic(cl, cp->topic, false);
            if (t && t->known && cp->partition >= t->npart && t->npart >= 0 &&
                !cp->eof_sent) {
                /* Unknown topic/partition: report once, keep watching. */
                cp->eof_sent = true;
                error_event(cl, c, cp, SL_ERR_UNKNOWN_TOPIC_OR_PARTITION, -1);
            }
            need_md = true;
            continue;
        }
        sl_broker *b = sl_broker_ready(cl, leader);
        if (!b)
            continue;
        if (cp->state == CP_NEED_RESET && !cp->busy) {
            int16_t v = sl_api_version(b, KP_API_LIST_OFFSETS, 1, 2);
            if (v >= 0)
                send_list_offsets(cl, b, cp, v);
            continue;
        }
        if (cp->state == CP_ACTIVE && room && !b->fetch_inflight)
            send_fetch(cl, c, b, now);
    }
    if (need_md)
        sl_md_refresh(cl);
}

/* ---- poll --------------------------------------------------------------------- */

/* A control batch (a transaction marker) is never returned; with
 * read_committed, neither is a transactional batch whose producer has an
 * aborted transaction open at its offset (the fetch's AbortedTransactions,
 * each closed by that producer's next marker). */
static bool batch_skipped(sl_chunk *ch, const kp_batch *h)
{
    bool control = h->Attributes & KP_ATTR_CONTROL;
    bool aborted = false;
    for (int i = 0; i < ch->n_aborted; i++) {
        struct sl_aborted *a = &ch->aborted[i];
        if (!a->open || a->pid != h->ProducerId || a->first > h->BaseOffset)
            continue;
        if (control)
            a->open = false;
        else
            aborted = true;
    }
    return control || (aborted && (h->Attributes & KP_ATTR_TRANSACTIONAL));
}

/* Next record of the current chunk, decoding batches as needed; lock NOT
 * held.  1 = record, 0 = chunk exhausted, < 0 = corrupt data. */
static int next_record(sl_cons *c, kp_record *rec)
{
    for (;;) {
        if (c->in_batch) {
            int rc = kp_rec_iter_next(&c->it, rec);
            if (rc == 1)
                return 1;
            c->in_batch = false;
            if (rc < 0)
                return rc;
        }
        sl_chunk *ch = c->cur;
        if (ch->used >= ch->len)
            return 0;
        int64_t size = kp_batch_size(ch->p + ch->used, ch->len - ch->used);
        if (size < 0)
            return (int)size;
        const uint8_t *bp = ch->p + ch->used;
        ch->used += (size_t)size;
        kp_batch h;
        if (kp_batch_header(bp, (size_t)size, &h) == 0 && batch_skipped(ch, &h))
            continue;                       /* transaction marker or aborted */
        int rc = kp_rec_iter_start(&c->it, bp, (size_t)size);
        if (rc < 0)
            return rc;
        c->in_batch = true;
    }
}

static void fill_headers(sl_cons *c, kp_record *rec, sl_message *m)
{
    m->headers = NULL;
    m->header_count = 0;
    if (rec->HeadersCount <= 0)
        return;
    if (rec->HeadersCount > c->hdr_cap) {
        int cap = rec->HeadersCount * 2;
        sl_header *nh = realloc(c->hdrs, sizeof *nh * (size_t)cap);
        char **nk = realloc(c->hkeys, sizeof *nk * (size_t)cap);
        if (nh)
            c->hdrs = nh;
        if (nk) {
            for (int i = c->hdr_cap; i < cap; i++)
                nk[i] = NULL;
            c->hkeys = nk;
        }
        if (!nh || !nk)
            return;
        c->hdr_cap = cap;
    }
    kp_header h;
    int n = 0;
    /* Header keys are not NUL-terminated on the wire: copy them. */
    while (n < rec->HeadersCount && kp_header_next(rec, &h) == 1) {
        char *k = realloc(c->hkeys[n], (size_t)h.Key.len + 1);
        if (!k)
            break;
        memcpy(k, h.Key.p, (size_t)h.Key.len);
        k[h.Key.len] = 0;
        c->hkeys[n] = k;
        c->hdrs[n].key = k;
        c->hdrs[n].key_len = h.Key.len;
        c->hdrs[n].value = h.Value.len < 0 ? NULL : (h.Value.len ? h.Value.p : "");
        c->hdrs[n].value_len = h.Value.len < 0 ? 0 : h.Value.len;
        n++;
    }
    m->headers = c->hdrs;
    m->header_count = n;
}

static void drop_cur(sl_cons *c)
{
    if (c->cur) {
        sl_chunk_free(c->cur);
        c->cur = NULL;
    }
    c->in_batch = false;
}

static void fill_message(sl_cons *c, sl_cpart *cp, kp_record *rec, sl_message *m)
{
    m->topic = cp->topic;
    m->partition = cp->partition;
    m->offset = rec->Offset;
    m->timestamp = rec->Timestamp;
    m->timestamp_type = (c->it.batch.Attributes & KP_ATTR_LOG_APPEND_TIME)
                        ? SL_TIMESTAMP_LOG_APPEND_TIME : SL_TIMESTAMP_CREATE_TIME;
    m->key = rec->Key.len < 0 ? NULL : (rec->Key.len ? rec->Key.p : "");
    m->key_len = rec->Key.len < 0 ? 0 : rec->Key.len;
    m->value = rec->Value.len < 0 ? NULL : (rec->Value.len ? rec->Value.p : "");
    m->value_len = rec->Value.len < 0 ? 0 : rec->Value.len;
    fill_headers(c, rec, m);
}

/* next_record's rc < 0 on the chunk being read: the rest of the fetch is
 * skipped and poll returns m as an SL_E_BAD_MSG error at the partition's
 * position.  Called with cl->lock held; returns with it released. */
static int corrupt_batch(sl_client *cl, sl_cons *c, sl_cpart *cp, int rc, sl_message *m)
{
    sl_log(cl, 3, "%s [%d]: corrupt batch (%d), skipping the rest of the fetch",
           cp->topic, cp->partition, rc);
    m->err = SL_E_BAD_MSG;
    m->errstr = "corrupt record batch";
    m->topic = cp->topic;
    m->partition = cp->partition;
    m->offset = cp->app_pos;
    drop_cur(c);
    pthread_mutex_unlock(&cl->lock);
    return 1;
}

int sl_consumer_poll(sl_consumer *cons, int timeout_ms, sl_message *m)
{
    if (!cons || !m)
        return SL_E_INVALID_ARG;
    sl_client *cl = cons->cl;
    sl_cons *c = cons->c;
    int64_t deadline = sl_deadline(timeout_ms);
    memset(m, 0, sizeof *m);
    /* Fast path, one lock round per message: the chunk being read is this
     * thread's, so decode first and take the lock once to check the
     * partition's version and advance its position. */
    if (c->cur) {
        kp_record rec;
        int rc = next_record(c, &rec);
        pthread_mutex_lock(&cl->lock);
        c->polls++;                                      /* max.poll.interval.ms */
        if (rc == 1) {
            sl_cpart *cp = c->cur->cp;
            if (cl->grp && sl_grp_has_events(cl))
                sl_grp_serve_events(cl, cons);     /* may seek: re-check below */
            if (c->cur && c->cur->version == cp->version && cp->assigned &&
                rec.Offset >= cp->app_pos) {
                cp->app_pos = rec.Offset + 1;
                pthread_mutex_unlock(&cl->lock);
                fill_message(c, cp, &rec, m);
                return 1;
            }
        } else if (rc == 0) {
            drop_cur(c);
        } else {
            return corrupt_batch(cl, c, c->cur->cp, rc, m);
        }
    } else {
        pthread_mutex_lock(&cl->lock);
    }
    c->last_poll = sl_coarse_ms();
    for (;;) {
        if (cl->auth_err) {                /* client_sec.c inv. 1 */
            m->err = cl->auth_err;
            m->errstr = cl->auth_msg;
            m->key_len = m->value_len = -1;
            break;
        }
        if (cl->grp) {
            sl_grp_serve_events(cl, cons);
            if (sl_grp_poll_error(cl, m))
                break;
        }
        if (c->cur && (c->cur->version != c->cur->cp->version || !c->cur->cp->assigned))
            drop_cur(c);
        if (!c->cur) {
            sl_chunk *ch = c->q_head;
            if (!ch) {
                if (c->closed)
                    break;
                if (sl_grp_has_events(cl))
                    continue;             /* queued while the callbacks ran */
                if (timeout_ms == 0)
                    break;
                c->in_poll_wait = true;
                int w = sl_cond_wait_until(cl, deadline);
                c->in_poll_wait = false;
                c->last_poll = sl_coarse_ms();
                if (w == ETIMEDOUT) {
                    if (cl->grp)
                        sl_grp_serve_events(cl, cons);
                    break;
                }
                continue;
            }
            c->q_head = ch->next;
            if (!c->q_head)
                c->q_tail = NULL;
            c->q_bytes -= (int64_t)ch->len;
            sl_wakeup(cl);                                /* room to prefetch */
            if (ch->version != ch->cp->version || !ch->cp->assigned) {
                sl_chunk_free(ch);
                continue;
            }
            if (ch->err) {
                m->err = ch->err;
                m->errstr = sl_err_name(ch->err);
                m->topic = ch->cp->topic;
                m->partition = ch->cp->partition;
                m->offset = ch->offset;
                m->key_len = m->value_len = -1;
                sl_chunk_free(ch);
                pthread_mutex_unlock(&cl->lock);
                return 1;
            }
            c->cur = ch;
            ch->used = 0;
            c->in_batch = false;
        }
        sl_cpart *cp = c->cur->cp;
        pthread_mutex_unlock(&cl->lock);
        kp_record rec;
        int rc = next_record(c, &rec);
        pthread_mutex_lock(&cl->lock);
        if (rc <= 0) {
            if (rc < 0)
                return corrupt_batch(cl, c, cp, rc, m);
            drop_cur(c);
            continue;
        }
        if (c->cur->version != cp->version || !cp->assigned)
            continue;                                     /* seek raced: next loop drops it */
        if (rec.Offset < cp->app_pos)
            continue;                                     /* before the fetch offset */
        cp->app_pos = rec.Offset + 1;
        pthread_mutex_unlock(&cl->lock);
        fill_message(c, cp, &rec, m);
        return 1;
    }
    pthread_mutex_unlock(&cl->lock);
    return m->err ? 1 : 0;
}
