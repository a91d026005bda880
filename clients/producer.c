/*
 * producer.c — sl_produce, batching, Produce requests, retries, delivery
 * reports, idempotence.
 *
 * A batch moves through these lists of its partition (sl_ppart); every
 * move happens under cl->lock:
 *
 *   sl_produce ──append──► open ──close (I/O thread: full, or linger.ms
 *   expired / flush and the partition has a free in-flight slot)──►
 *   [finish: header, sequence, compression, CRC,
 *   done with the lock dropped] ──► ready ──send──► in flight
 *        in flight ──ok / fatal error──► DR queue ──sl_poll──► callbacks
 *        in flight ──retriable error──► back into ready, ordered by id
 *
 * Hot path cost (sl_produce): one lock, a topic lookup (last-hit cache),
 * one reserve + straight stores of the record into the open batch's
 * buffer, no allocation per message (batches and their buffers are
 * recycled through a free list).
 *
 * Backlog: a batch whose linger.ms expired while its partition already has
 * max.in.flight requests out, or batches waiting to go, stays open and
 * keeps filling (up to batch.size) until an answer frees a slot, as
 * librdkafka builds a request's batch when it sends.  Closing it on time
 * anyway would queue more linger-sized batches behind a stalled broker, one
 * request each, so a 100 ms stall would take as many round trips to work
 * off as it queued batches; a grown batch works it off in one.
 *
 * Ordering and idempotence:
 *   1. Only the I/O thread closes batches, so ids and sequences are given
 *      in append order per partition; a batch keeps its sequence across
 *      retries (the broker de-duplicates by it).
 *   2. A retried batch is sent only when nothing else of its partition is
 *      in flight, oldest first, so a retry can't overtake.  Batches that
 *      were in flight behind a failed one come back as failed too
 *      (transport error, or OUT_OF_ORDER_SEQUENCE_NUMBER from the broker),
 *      and are requeued in id order.
 *   3. enable.idempotence (default true) asks InitProducerId (v0-1) of any
 *      broker before the first batch is closed (Sluice serves it:
 *      daemon/api/api_producer_id.c).  A broker without the API (an old Kafka)
 *      leaves the producer non-idempotent, with one log line, and retries
 *      may then duplicate after a lost answer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "clients/sl_int.h"
#include "kp_msgs.h"

typedef struct sl_ppart sl_ppart;
typedef struct sl_ptopic sl_ptopic;

typedef struct sl_pbatch {
    struct sl_pbatch *next;
    sl_ppart *pp;
    kp_buf buf;               /* [61-byte header][records] */
    kp_buf wire;              /* compressed batch (codec != none) */
    kp_buf *out;              /* the finished batch: &buf or &wire */
    int32_t count;
    int64_t base_ts, max_ts;
    int64_t first_ms, deadline;
    void **opaques;
    int32_t op_cap;
    uint64_t id;
    int32_t base_seq;
    int attempts;
    int64_t retry_at;
    int err;
    int64_t base_offset;
    size_t mem;
    bool full;
} sl_pbatch;

struct sl_ppart {
    sl_ptopic *t;
    int32_t partition;
    sl_pbatch *open_head, *open_tail;
    sl_pbatch *ready_head, *ready_tail;
    int inflight;
    int32_t next_seq;
};

struct sl_ptopic {
    char *name;
    int32_t npart;
    sl_ppart **parts;
    int32_t sticky;
};

enum { IDEM_OFF, IDEM_WANT, IDEM_ASKING, IDEM_OK };

typedef struct sl_prod {
    sl_ptopic **topics;
    int n_topics;
    sl_ptopic *last;
    sl_ppart **all;           /* every partition ever used */
    int n_all;
    int64_t queued_bytes, outq;
    sl_pbatch *dr_head, *dr_tail;
    /* dr_head != NULL, readable without the lock (atomic): sl_poll(…, 0)
     * on an empty queue returns without touching cl->lock.  An application
     * pacing its sends calls it in a tight loop, and each lock round there
     * is one more the I/O thread has to win before it can close, send or
     * complete a batch (glibc mutexes are not fair: the spinning thread
     * re-takes the lock before the woken I/O thread runs). */
    int dr_pending;
    sl_pbatch *free_list;
    int n_free;
    int flushing;
    uint64_t next_id;
    int idem;
    int64_t pid;
    int16_t epoch;
    int64_t idem_retry_at;
    bool fatal;
    uint32_t rng;
} sl_prod;

struct sl_producer {
    sl_client *cl;
    sl_prod *p;
};

/* Batches at least this big are written in place, not copied into the
 * request (sl_req_ref); below it the copy is cheaper than an iovec. */
#define SL_REF_MIN 16384

typedef struct sl_preq {
    int n;
    sl_pbatch *b[];
} sl_preq;

/* ---- record encoding (hot path) ------------------------------------------- */

static inline size_t uv_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}
static inline uint32_t zz32(int32_t v) { return ((uint32_t)v << 1) ^ (uint32_t)(v >> 31); }
static inline uint64_t zz64(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline uint8_t *put_uv(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

size_t sl_header_key_len(const sl_header *h)
{
    return h->key_len > 0 ? (size_t)h->key_len : strlen(h->key);
}

/* Appends one record to b (lock held).  Returns bytes added or < 0. */
static int64_t rec_append(sl_pbatch *b, int64_t ts, const void *key, size_t klen,
                          const void *val, size_t vlen, const sl_header *h, int nh)
{
    if (b->count == 0)
        b->base_ts = b->max_ts = ts;
    if (ts > b->max_ts)
        b->max_ts = ts;
    int64_t tsd = ts - b->base_ts;
    size_t body = 1 + uv_size(zz64(tsd)) + uv_size(zz32(b->count)) +
                  (key ? uv_size(zz32((int32_t)klen)) + klen : 1) +
                  (val ? uv_size(zz32((int32_t)vlen)) + vlen : 1) +
                  uv_size(zz32(nh));
    for (int i = 0; i < nh; i++) {
        size_t kl = sl_header_key_len(&h[i]);
        body += uv_size(zz32((int32_t)kl)) + kl +
                (h[i].value ? uv_size(zz32(h[i].value_len)) + (size_t)h[i].value_len : 1);
    }
    uint8_t *p = kp_buf_reserve(&b->buf, body + 5);
    if (!p)
        return SL_E_NOMEM;
    uint8_t *start = p;
    p = put_uv(p, zz32((int32_t)body));
    *p++ = 0;                                             /* Attributes */
    p = put_uv(p, zz64(tsd));                             /* TimestampDelta */
    p = put_uv(p, zz32(b->count));                        /* OffsetDelta */
    if (key) {
        p = put_uv(p, zz32((int32_t)klen));
        memcpy(p, key, klen);
        p += klen;
    } else {
        *p++ = 1;                                         /* -1: null */
    }
    if (val) {
        p = put_uv(p, zz32((int32_t)vlen));
        memcpy(p, val, vlen);
        p += vlen;
    } else {
        *p++ = 1;
    }
    p = put_uv(p, zz32(nh));
    for (int i = 0; i < nh; i++) {
        size_t kl = sl_header_key_len(&h[i]);
        p = put_uv(p, zz32((int32_t)kl));
        memcpy(p, h[i].key, kl);
        p += kl;
        if (h[i].value) {
            p = put_uv(p, zz32(h[i].value_len));
            memcpy(p, h[i].value, (size_t)h[i].value_len);
            p += h[i].value_len;
        } else {
            *p++ = 1;
        }
    }
    size_t n = (size_t)(p - start);
    b->buf.len += n;
    b->count++;
    return (int64_t)n;
}

static void put_be(uint8_t *p, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

/* Header, compression, CRC (I/O thread, lock NOT held: b is unreachable
 * from other threads here). */
static int batch_finish(sl_pbatch *b, int codec, int64_t pid, int16_t epoch)
{
    kp_buf *w = &b->buf;
    if (codec != KP_CODEC_NONE) {
        kp_buf_reset(&b->wire);
        uint8_t *h = kp_buf_reserve(&b->wire, KP_BATCH_HEADER_SIZE);
        if (!h)
            return SL_E_NOMEM;
        b->wire.len = KP_BATCH_HEADER_SIZE;
        int rc = kp_compress(codec, b->buf.data + KP_BATCH_HEADER_SIZE,
                             b->buf.len - KP_BATCH_HEADER_SIZE, &b->wire);
        if (rc < 0)
            return rc;
        w = &b->wire;
    }
    uint8_t *p = w->data;
    size_t size = w->len;
    memset(p, 0, KP_BATCH_HEADER_SIZE);
    put_be(p + KP_BATCH_OFF_BatchLength, size - KP_BATCH_LOG_OVERHEAD, 4);
    put_be(p + KP_BATCH_OFF_PartitionLeaderEpoch, (uint32_t)-1, 4);
    p[KP_BATCH_OFF_Magic] = KP_BATCH_MAGIC;
    put_be(p + KP_BATCH_OFF_Attributes, (uint16_t)codec, 2);
    put_be(p + KP_BATCH_OFF_LastOffsetDelta, (uint32_t)(b->count - 1), 4);
    put_be(p + KP_BATCH_OFF_BaseTimestamp, (uint64_t)b->base_ts, 8);
    put_be(p + KP_BATCH_OFF_MaxTimestamp, (uint64_t)b->max_ts, 8);
    put_be(p + KP_BATCH_OFF_ProducerId, (uint64_t)pid, 8);
    put_be(p + KP_BATCH_OFF_ProducerEpoch, (uint16_t)epoch, 2);
    put_be(p + KP_BATCH_OFF_BaseSequence, (uint32_t)(pid >= 0 ? b->base_seq : -1), 4);
    put_be(p + KP_BATCH_OFF_RecordsCount, (uint32_t)b->count, 4);
    put_be(p + KP_BATCH_OFF_Crc, kp_crc32c(0, p + KP_BATCH_CRC_START,
                                           size - KP_BATCH_CRC_START), 4);
    b->out = w;
    return 0;
}

/* ---- batch lifecycle -------------------------------------------------------- */

static sl_pbatch *batch_new(sl_prod *p)
{
    sl_pbatch *b = p->free_list;
    if (b) {
        p->free_list = b->next;
        p->n_free--;
    } else {
        b = calloc(1, sizeof *b);
        if (!b)
            return NULL;
        kp_buf_init(&b->buf);
        kp_buf_init(&b->wire);
    }
    kp_buf_reset(&b->buf);
    uint8_t *h = kp_buf_reserve(&b->buf, KP_BATCH_HEADER_SIZE);
    if (!h) {
        free(b);
        return NULL;
    }
    b->buf.len = KP_BATCH_HEADER_SIZE;
    b->next = NULL;
    b->count = 0;
    b->attempts = 0;
    b->retry_at = 0;
    b->err = 0;
    b->base_offset = -1;
    b->mem = 0;
    b->full = false;
    b->out = NULL;
    return b;
}

static void batch_release(sl_prod *p, sl_pbatch *b)
{
    /* Keep a few for reuse; big buffers are not kept around forever. */
    if (p->n_free < 16 && b->buf.cap <= ((size_t)8 << 20)) {
        b->next = p->free_list;
        p->free_list = b;
        p->n_free++;
        return;
    }
    kp_buf_free(&b->buf);
    kp_buf_free(&b->wire);
    free(b->opaques);
    free(b);
}

/* A batch is done (delivered or failed): hand it to the DR queue, or
 * account it right away when nobody wants reports. */
static void batch_done(sl_client *cl, sl_pbatch *b, int err, int64_t base_offset)
{
    sl_prod *p = cl->prod;
    b->err = err;
    b->base_offset = base_offset;
    b->next = NULL;
    if (!cl->conf.dr_cb) {
        p->outq -= b->count;
        p->queued_bytes -= (int64_t)b->mem;
        batch_release(p, b);
    } else {
        if (p->dr_tail)
            p->dr_tail->next = b;
        else
            p->dr_head = b;
        p->dr_tail = b;
        __atomic_store_n(&p->dr_pending, 1, __ATOMIC_RELEASE);
    }
    pthread_cond_broadcast(&cl->cond);
}

static void ready_insert(sl_ppart *pp, sl_pbatch *b)
{
    sl_pbatch **pb = &pp->ready_head;
    while (*pb && (*pb)->id < b->id)
        pb = &(*pb)->next;
    b->next = *pb;
    *pb = b;
    if (!b->next)
        pp->ready_tail = b;
}

/* ---- topics and partitioning ---------------------------------------------- */

static sl_ptopic *ptopic_get(sl_client *cl, const char *name, int64_t deadline, int *err)
{
    sl_prod *p = cl->prod;
    if (p->last && strcmp(p->last->name, name) == 0)
        return p->last;
    sl_ptopic *t = NULL;
    for (int i = 0; i < p->n_topics; i++)
        if (strcmp(p->topics[i]->name, name) == 0)
            t = p->topics[i];
    if (!t) {
        sl_mtopic *mt;
        int rc = sl_md_wait_topic(cl, name, deadline, &mt);
        if (rc) {
            *err = rc;
            return NULL;
        }
        for (int i = 0; i < p->n_topics; i++)     /* raced with another thread */
            if (strcmp(p->topics[i]->name, name) == 0)
                t = p->topics[i];
        if (!t) {
            sl_ptopic **nt = realloc(p->topics, sizeof *nt * (size_t)(p->n_topics + 1));
            if (!nt || !(t = calloc(1, sizeof *t)) || !(t->name = strdup(name))) {
                if (nt)
                    p->topics = nt;
                free(t);
                *err = SL_E_NOMEM;
                return NULL;
            }
            p->topics = nt;
            p->topics[p->n_topics++] = t;
            t->sticky = -1;
        }
    }
    /* Partition count may have grown since. */
    sl_mtopic *mt = sl_md_topic(cl, name, false);
    if (mt && mt->npart > t->npart) {
        sl_ppart **np = realloc(t->parts, sizeof *np * (size_t)mt->npart);
        sl_ppart **na = realloc(p->all, sizeof *na * (size_t)(p->n_all + mt->npart - t->npart));
        if (np)
            t->parts = np;
        if (na)
            p->all = na;
        if (!np || !na) {
            *err = SL_E_NOMEM;
            return NULL;
        }
        for (int32_t i = t->npart; i < mt->npart; i++) {
            sl_ppart *pp = calloc(1, sizeof *pp);
            if (!pp) {
                *err = SL_E_NOMEM;
                return NULL;
            }
            pp->t = t;
            pp->partition = i;
            t->parts[i] = pp;
            p->all[p->n_all++] = pp;
            t->npart = i + 1;
        }
    }
    p->last = t;
    return t;
}

static uint32_t rng_next(sl_prod *p)
{
    uint32_t x = p->rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return p->rng = x;
}

static int32_t choose_partition(sl_client *cl, sl_ptopic *t, const void *key, size_t klen)
{
    sl_prod *p = cl->prod;
    switch (cl->conf.partitioner) {
    case SL_PART_MURMUR2:
        return (int32_t)((kp_murmur2(key ? key : "", key ? klen : 0) & 0x7fffffff) %
                         t->npart);
    case SL_PART_CONSISTENT_RANDOM:
        if (key && klen)
            return (int32_t)(crc32(0, key, (uInt)klen) % (uint32_t)t->npart);
        return (int32_t)(rng_next(p) % (uint32_t)t->npart);
    case SL_PART_RANDOM:
        return (int32_t)(rng_next(p) % (uint32_t)t->npart);
    default:
        if (key)
            return (int32_t)((kp_murmur2(key, klen) & 0x7fffffff) % t->npart);
        /* Null key: sticky partition, changed when its batch closes. */
        if (t->sticky < 0 || t->sticky >= t->npart)
            t->sticky = (int32_t)(rng_next(p) % (uint32_t)t->npart);
        return t->sticky;
    }
}

/* ---- public produce API ------------------------------------------------ */

int sl_produce(sl_producer *pr, const char *topic, int32_t partition,
               const void *key, size_t key_len, const void *value, size_t value_len,
               const sl_header *headers, int header_count, int64_t timestamp,
               void *msg_opaque)
{
    if (!pr || !topic || !*topic || partition < -1 || header_count < 0 ||
        (header_count && !headers) || key_len > INT32_MAX || value_len > INT32_MAX)
        return SL_E_INVALID_ARG;
    for (int i = 0; i < header_count; i++)
        if (!headers[i].key || (headers[i].value && headers[i].value_len < 0))
            return SL_E_INVALID_ARG;
    sl_client *cl = pr->cl;
    sl_prod *p = pr->p;
    int err = 0;
    bool wake = false;
    pthread_mutex_lock(&cl->lock);
    if (p->fatal) {
        err = SL_E_FATAL;
        goto out;
    }
    if (cl->auth_err) {                      /* client_sec.c inv. 1 */
        err = cl->auth_err;
        goto out;
    }
    sl_ptopic *t = ptopic_get(cl, topic, sl_now_ms() + cl->conf.max_block_ms, &err);
    if (!t)
        goto out;
    if (partition == SL_PARTITION_ANY)
        partition = choose_partition(cl, t, key, key_len);
    else if (partition >= t->npart) {
        err = SL_ERR_UNKNOWN_TOPIC_OR_PARTITION;
        goto out;
    }
    size_t approx = key_len + value_len + 32;
    for (int i = 0; i < header_count; i++)
        approx += sl_header_key_len(&headers[i]) + (headers[i].value ? (size_t)headers[i].value_len : 0) + 10;
    if ((int64_t)approx > cl->conf.buffer_memory) {
        err = SL_ERR_MESSAGE_TOO_LARGE;
        goto out;
    }
    if (p->queued_bytes + (int64_t)approx > cl->conf.buffer_memory) {
        err = SL_E_QUEUE_FULL;
        goto out;
    }
    sl_ppart *pp = t->parts[partition];
    sl_pbatch *b = pp->open_tail;
    if (!b || b->full) {
        b = batch_new(p);
        if (!b) {
            err = SL_E_NOMEM;
            goto out;
        }
        b->pp = pp;
        b->first_ms = sl_now_ms();
        b->deadline = b->first_ms + cl->conf.delivery_timeout_ms;
        if (pp->open_tail)
            pp->open_tail->next = b;
        else
            pp->open_head = b;
        pp->open_tail = b;
        wake = true;
    }
    if (cl->conf.dr_cb) {
        if (b->count >= b->op_cap) {
            int32_t cap = b->op_cap ? b->op_cap * 2 : 256;
            void **no = realloc(b->opaques, sizeof *no * (size_t)cap);
            if (!no) {
                err = SL_E_NOMEM;
                goto out;
            }
            b->opaques = no;
            b->op_cap = cap;
        }
        b->opaques[b->count] = msg_opaque;
    }
    int64_t n = rec_append(b, timestamp ? timestamp : sl_wall_ms(), key, key_len,
                           value, value_len, headers, header_count);
    if (n < 0) {
        err = (int)n;
        goto out;
    }
    b->mem += (size_t)n;
    p->queued_bytes += n;
    p->outq++;
    if (b->buf.len - KP_BATCH_HEADER_SIZE >= (size_t)cl->conf.batch_size) {
        b->full = true;
        wake = true;
        if (t->sticky == partition)
            t->sticky = -1;
    }
out:
    pthread_mutex_unlock(&cl->lock);
    if (wake)
        sl_wakeup(cl);
    return err;
}

/* Serves the DR queue; caller holds the lock, which is dropped around the
 * callbacks. */
static int serve_dr(sl_client *cl)
{
    sl_prod *p = cl->prod;
    sl_pbatch *list = p->dr_head;
    p->dr_head = p->dr_tail = NULL;
    __atomic_store_n(&p->dr_pending, 0, __ATOMIC_RELAXED);
    if (!list)
        return 0;
    pthread_mutex_unlock(&cl->lock);
    int served = 0;
    for (sl_pbatch *b = list; b; b = b->next) {
        sl_delivery d = { .err = b->err,
                          .errstr = b->err ? sl_err_name(b->err) : NULL,
                          .topic = b->pp->t->name, .partition = b->pp->partition };
        for (int32_t i = 0; i < b->count; i++) {
            d.offset = b->err || b->base_offset < 0 ? -1 : b->base_offset + i;
            d.msg_opaque = b->opaques ? b->opaques[i] : NULL;
            cl->conf.dr_cb(&d, cl->conf.opaque);
        }
        served += b->count;
    }
    pthread_mutex_lock(&cl->lock);
    while (list) {
        sl_pbatch *b = list;
        list = b->next;
        p->outq -= b->count;
        p->queued_bytes -= (int64_t)b->mem;
        batch_release(p, b);
    }
    pthread_cond_broadcast(&cl->cond);
    return served;
}

int sl_poll(sl_producer *pr, int timeout_ms)
{
    if (!pr)
        return SL_E_INVALID_ARG;
    sl_client *cl = pr->cl;
    /* A report queued just after this load is served by the next call. */
    if (timeout_ms == 0 && !__atomic_load_n(&pr->p->dr_pending, __ATOMIC_ACQUIRE))
        return 0;
    int64_t deadline = sl_deadline(timeout_ms);
    pthread_mutex_lock(&cl->lock);
    int n = serve_dr(cl);
    while (n == 0 && timeout_ms != 0 && pr->p->outq > 0) {
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT) {
            n = serve_dr(cl);
            break;
        }
        n = serve_dr(cl);
    }
    pthread_mutex_unlock(&cl->lock);
    return n;
}

int sl_flush(sl_producer *pr, int timeout_ms)
{
    if (!pr)
        return SL_E_INVALID_ARG;
    sl_client *cl = pr->cl;
    int64_t deadline = sl_deadline(timeout_ms);
    int rc = 0;
    pthread_mutex_lock(&cl->lock);
    pr->p->flushing++;
    sl_wakeup(cl);
    for (;;) {
        /* serve_dr drops the lock around the callbacks, and a broadcast
         * made meanwhile is lost: drain until the queue is seen empty
         * under the lock before waiting again. */
        while (serve_dr(cl) > 0)
            ;
        if (pr->p->outq <= 0)
            break;
        if (sl_cond_wait_until(cl, deadline) == ETIMEDOUT) {
            serve_dr(cl);
            rc = pr->p->outq > 0 ? SL_E_TIMED_OUT : 0;
            break;
        }
    }
    pr->p->flushing--;
    pthread_mutex_unlock(&cl->lock);
    return rc;
}

int sl_outq_len(sl_producer *pr)
{
    pthread_mutex_lock(&pr->cl->lock);
    int n = (int)pr->p->outq;
    pthread_mutex_unlock(&pr->cl->lock);
    return n;
}

int sl_producer_idempotent(sl_producer *pr)
{
    pthread_mutex_lock(&pr->cl->lock);
    int v = pr->p->idem == IDEM_OK;
    pthread_mutex_unlock(&pr->cl->lock);
    return v;
}

int sl_producer_partition_count(sl_producer *pr, const char *topic, int timeout_ms)
{
    sl_mtopic *t;
    pthread_mutex_lock(&pr->cl->lock);
    int rc = sl_md_wait_topic(pr->cl, topic, sl_deadline(timeout_ms), &t);
    if (rc == 0)
        rc = t->npart;
    pthread_mutex_unlock(&pr->cl->lock);
    return rc;
}

/* ---- I/O thread side -------------------------------------------------------- */

static void handle_init_pid(sl_client *cl, sl_broker *b, int err, sl_frame *f,
                            kp_rd *r, int16_t ver, void *ctx)
{
    (void)b; (void)f; (void)ctx;
    sl_prod *p = cl->prod;
    if (!p)
        return;
    if (err) {
        p->idem = IDEM_WANT;
        p->idem_retry_at = sl_now_ms() + cl->conf.retry_backoff_ms;
        return;
    }
    kp_InitProducerIdResponse m;
    kp_arena none;                                        /* no arrays: unused */
    kp_arena_init(&none, 0);
    bool ok = kp_dec_InitProducerIdResponse(r, ver, &m, &none) == 0;
    kp_arena_free(&none);
    int16_t ec = m.ErrorCode;
    int64_t pid = m.ProducerId;
    int16_t epoch = m.ProducerEpoch;
    if (!ok || ec != 0) {
        if (ok && sl_retriable(ec)) {
            p->idem = IDEM_WANT;
            p->idem_retry_at = sl_now_ms() + cl->conf.retry_backoff_ms;
            return;
        }
        sl_log(cl, 4, "InitProducerId failed (%s): producing without idempotence",
               ok ? sl_err_name(ec) : "malformed answer");
        p->idem = IDEM_OFF;
        return;
    }
    p->pid = pid;
    p->epoch = epoch;
    p->idem = IDEM_OK;
    sl_log(cl, 7, "idempotent producer: ProducerId %lld epoch %d", (long long)pid, epoch);
    pthread_cond_broadcast(&cl->cond);
}

/* Returns true when batches may be closed (the producer id question is
 * settled). */
static bool idem_ready(sl_client *cl, int64_t now, int64_t *next)
{
    sl_prod *p = cl->prod;
    if (p->idem == IDEM_OFF || p->idem == IDEM_OK)
        return true;
    if (p->idem == IDEM_ASKING)
        return false;
    if (now < p->idem_retry_at) {
        if (p->idem_retry_at < *next)
            *next = p->idem_retry_at;
        return false;
    }
    sl_broker *b = sl_any_broker(cl);
    if (!b)
        return false;
    int16_t v = sl_api_version(b, KP_API_INIT_PRODUCER_ID, 0, 1);
    if (v < 0) {
        sl_log(cl, 5, "broker %s:%d lacks InitProducerId: enable.idempotence "
               "degraded, producing without idempotence", b->host, b->port);
        p->idem = IDEM_OFF;
        return true;
    }
    kp_InitProducerIdRequest q;
    kp_init_InitProducerIdRequest(&q);
    q.TransactionalId = KP_STR_NULL;                      /* idempotence only */
    q.TransactionTimeoutMs = 60000;
    kp_enc_InitProducerIdRequest(sl_req_begin(cl, b, KP_API_INIT_PRODUCER_ID, v), v, &q);
    sl_req_end(cl, b, handle_init_pid, NULL);
    p->idem = IDEM_ASKING;
    return false;
}

static void batch_result(sl_client *cl, sl_pbatch *b, int err, int64_t offset)
{
    sl_prod *p = cl->prod;
    sl_ppart *pp = b->pp;
    pp->inflight--;
    int64_t now = sl_now_ms();
    if (err == SL_ERR_DUPLICATE_SEQUENCE_NUMBER) {
        batch_done(cl, b, 0, -1);            /* already written earlier */
        return;
    }
    if (err == 0) {
        batch_done(cl, b, 0, offset);
        return;
    }
    bool retriable = sl_retriable(err);
    if (err == SL_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER && p->idem == IDEM_OK &&
        pp->ready_head && pp->ready_head->id < b->id)
        retriable = true;                    /* an earlier batch is being retried */
    if (err == SL_E_DESTROYED)
        retriable = false;
    if (cl->auth_err)                        /* client_sec.c inv. 1 */
        retriable = false, err = cl->auth_err;
    if (retriable && b->attempts <= cl->conf.retries && now < b->deadline) {
        b->retry_at = now + cl->conf.retry_backoff_ms;
        ready_insert(pp, b);
        if (err != SL_E_TIMED_OUT)
            sl_md_refresh(cl);
        sl_log(cl, 7, "%s [%d]: retrying batch of %d after %s", pp->t->name,
               pp->partition, b->count, sl_err_name(err));
        return;
    }
    if (retriable && now >= b->deadline)
        err = SL_E_MSG_TIMED_OUT;
    if (p->idem == IDEM_OK && (err == SL_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER ||
                               err == KP_INVALID_PRODUCER_EPOCH ||
                               err == KP_UNKNOWN_PRODUCER_ID)) {
        sl_log(cl, 3, "%s [%d]: %s: idempotent producer can no longer guarantee "
               "ordering; failing", pp->t->name, pp->partition, sl_err_name(err));
        p->fatal = true;
    }
    batch_done(cl, b, err, -1);
}

static void handle_produce(sl_client *cl, sl_broker *br, int err, sl_frame *f,
                           kp_rd *r, int16_t ver, void *ctx)
{
    (void)br; (void)f;
    sl_preq *q = ctx;
    if (!cl->prod) {
        free(q);
        return;
    }
    if (err) {
        for (int i = 0; i < q->n; i++)
            batch_result(cl, q->b[i], err, -1);
        free(q);
        return;
    }
    kp_ProduceResponse m;
    if (kp_dec_ProduceResponse(r, ver, &m, &cl->arena) != 0)
        m.Responses_count = 0;         /* malformed: all fail below */
    for (int32_t i = 0; i < m.Responses_count; i++) {
        const kp_ProduceResponse_TopicProduceResponse *mt = &m.Responses[i];
        for (int32_t j = 0; j < mt->PartitionResponses_count; j++) {
            const kp_ProduceResponse_PartitionProduceResponse *mp = &mt->PartitionResponses[j];
            for (int k = 0; k < q->n; k++) {
                sl_pbatch *b = q->b[k];
                if (b && b->pp->partition == mp->Index && kp_str_eq(mt->Name, b->pp->t->name)) {
                    q->b[k] = NULL;
                    batch_result(cl, b, mp->ErrorCode, mp->BaseOffset);
                    break;
                }
            }
        }
    }
    /* Anything the broker did not answer for failed. */
    for (int k = 0; k < q->n; k++)
        if (q->b[k])
            batch_result(cl, q->b[k], SL_E_BAD_MSG, -1);
    free(q);
}

/* Can pp's ready head go out now? */
static bool sendable(sl_client *cl, sl_ppart *pp, int64_t now, int64_t *next)
{
    sl_pbatch *b = pp->ready_head;
    if (!b || pp->inflight >= cl->conf.max_in_flight)
        return false;
    if (b->attempts > 0 && (pp->inflight > 0 || b->retry_at > now)) {
        if (pp->inflight == 0 && b->retry_at < *next)
            *next = b->retry_at;
        return false;
    }
    return true;
}

/* Records of a Produce request (kp_buf hook, protocol/msgs.c M5): a big
 * batch is sent from its own buffer (it stays untouched in flight until
 * its answer); acks=0 has no answer to wait for, so the batch is done
 * before the write: copy. */
typedef struct records_to {
    sl_broker *br;
    bool ref;                   /* acks != 0: the batch outlives the write */
} records_to;

static void records_ref(kp_buf *w, kp_str s, void *arg)
{
    records_to *to = arg;
    if (to->ref && (size_t)s.len >= SL_REF_MIN)
        sl_req_ref(to->br, s.p, (size_t)s.len);
    else
        kp_wr_raw(w, s.p, (size_t)s.len);
}

static void send_produce(sl_client *cl, sl_broker *br, int64_t now, int64_t *next)
{
    sl_prod *p = cl->prod;
    int16_t v = sl_api_version(br, KP_API_PRODUCE, 3, 7);
    if (v < 0) {
        /* Nothing we can speak: fail what is waiting for this broker. */
        for (int i = 0; i < p->n_all; i++) {
            sl_ppart *pp = p->all[i];
            if (sl_md_leader(cl, pp->t->name, pp->partition) != br->id)
                continue;
            while (pp->ready_head) {
                sl_pbatch *b = pp->ready_head;
                pp->ready_head = b->next;
                batch_done(cl, b, SL_E_UNSUPPORTED, -1);
            }
            pp->ready_tail = NULL;
        }
        return;
    }
    for (int round = 0; round < cl->conf.max_in_flight; round++) {
        /* Count candidates first: the context array is sized by them. */
        int n = 0;
        for (int i = 0; i < p->n_all; i++) {
            sl_ppart *pp = p->all[i];
            if (pp->ready_head && sendable(cl, pp, now, next) &&
                sl_md_leader(cl, pp->t->name, pp->partition) == br->id)
                n++;
        }
        if (n == 0)
            return;
        sl_preq *q = malloc(sizeof *q + sizeof q->b[0] * (size_t)n);
        if (!q)
            return;
        q->n = 0;
        /* One topic entry per partition (the broker answers by name);
         * the arrays are scratch in cl->arena until encoded. */
        kp_ProduceRequest_TopicProduceData *ts = kp_arena_alloc(&cl->arena, (size_t)n * sizeof *ts);
        kp_ProduceRequest_PartitionProduceData *ps = kp_arena_alloc(&cl->arena, (size_t)n * sizeof *ps);
        if (!ts || !ps) {
            kp_arena_reset(&cl->arena);
            free(q);
            return;
        }
        for (int i = 0; i < p->n_all; i++) {
            sl_ppart *pp = p->all[i];
            if (!pp->ready_head || !sendable(cl, pp, now, next) ||
                sl_md_leader(cl, pp->t->name, pp->partition) != br->id || q->n >= n)
                continue;
            sl_pbatch *b = pp->ready_head;
            pp->ready_head = b->next;
            if (!pp->ready_head)
                pp->ready_tail = NULL;
            b->next = NULL;
            b->attempts++;
            pp->inflight++;
            ps[q->n] = (kp_ProduceRequest_PartitionProduceData){
                .Index = pp->partition,
                .Records = { (const char *)b->out->data, (int32_t)b->out->len },
            };
            ts[q->n] = (kp_ProduceRequest_TopicProduceData){
                .Name = kp_str_cstr(pp->t->name),
                .PartitionData = &ps[q->n], .PartitionData_count = 1,
            };
            q->b[q->n++] = b;
        }
        kp_ProduceRequest m;
        kp_init_ProduceRequest(&m);
        m.TransactionalId = KP_STR_NULL;
        m.Acks = (int16_t)cl->conf.acks;
        m.TimeoutMs = cl->conf.request_timeout_ms;
        m.TopicData = ts;
        m.TopicData_count = q->n;
        kp_buf *w = sl_req_begin(cl, br, KP_API_PRODUCE, v);
        records_to to = { br, cl->conf.acks != 0 };
        w->records = records_ref;
        w->records_arg = &to;
        kp_enc_ProduceRequest(w, v, &m);
        w->records = NULL;
        kp_arena_reset(&cl->arena);
        if (cl->conf.acks == 0) {
            sl_req_end(cl, br, NULL, NULL);
            for (int k = 0; k < q->n; k++) {
                q->b[k]->pp->inflight--;
                batch_done(cl, q->b[k], 0, -1);
            }
            free(q);
        } else {
            sl_req_end(cl, br, handle_produce, q);
        }
    }
}

void sl_prod_tick(sl_client *cl, int64_t now, int64_t *next)
{
    sl_prod *p = cl->prod;
    bool may_close = idem_ready(cl, now, next);
    int codec = cl->conf.codec;
    sl_pbatch *closing = NULL, **ctail = &closing;
    /* A refused login ends every batch not yet sent at once (client_sec.c
     * inv. 1); an in-flight one ends in batch_result. */
    int64_t expire = cl->auth_err ? INT64_MAX : now;
    int expire_err = cl->auth_err ? cl->auth_err : SL_E_MSG_TIMED_OUT;
    for (int i = 0; i < p->n_all; i++) {
        sl_ppart *pp = p->all[i];
        /* Delivery timeout for batches not yet sent. */
        while (pp->open_head && pp->open_head->deadline <= expire) {
            sl_pbatch *b = pp->open_head;
            pp->open_head = b->next;
            if (!pp->open_head)
                pp->open_tail = NULL;
            batch_done(cl, b, expire_err, -1);
        }
        while (pp->ready_head && pp->ready_head->deadline <= expire && pp->inflight == 0) {
            sl_pbatch *b = pp->ready_head;
            pp->ready_head = b->next;
            if (!pp->ready_head)
                pp->ready_tail = NULL;
            batch_done(cl, b, expire_err, -1);
        }
        if (!may_close)
            continue;
        while (pp->open_head) {
            sl_pbatch *b = pp->open_head;
            int64_t due = b->first_ms + cl->conf.linger_ms;
            if (!(b->full || b->next || p->flushing || due <= now)) {
                if (due < *next)
                    *next = due;
                break;
            }
            /* Due but nowhere to go yet: keep filling (see Backlog); the
             * answer that frees a slot runs this tick again. */
            if (!b->full && !b->next &&
                (pp->ready_head || pp->inflight >= cl->conf.max_in_flight))
                break;
            pp->open_head = b->next;
            if (!pp->open_head)
                pp->open_tail = NULL;
            if (pp->t->sticky == pp->partition)
                pp->t->sticky = -1;
            b->next = NULL;
            b->id = p->next_id++;
            b->base_seq = pp->next_seq;
            pp->next_seq = (int32_t)(((uint32_t)pp->next_seq + (uint32_t)b->count) & 0x7fffffff);
            *ctail = b;
            ctail = &b->next;
        }
    }
    if (closing) {
        int64_t pid = p->idem == IDEM_OK ? p->pid : -1;
        int16_t epoch = p->idem == IDEM_OK ? p->epoch : -1;
        /* Compression and CRC without the lock: these batches are reachable
         * only from `closing` now. */
        pthread_mutex_unlock(&cl->lock);
        for (sl_pbatch *b = closing; b; b = b->next)
            b->err = batch_finish(b, codec, pid, epoch);
        pthread_mutex_lock(&cl->lock);
        while (closing) {
            sl_pbatch *b = closing;
            closing = b->next;
            b->next = NULL;
            if (b->err) {
                batch_done(cl, b, b->err, -1);
                continue;
            }
            sl_ppart *pp = b->pp;
            if (pp->ready_tail)
                pp->ready_tail->next = b;
            else
                pp->ready_head = b;
            pp->ready_tail = b;
        }
    }
    /* Send what is ready, per leader. */
    bool need_md = false;
    for (int i = 0; i < p->n_all; i++) {
        sl_ppart *pp = p->all[i];
        if (!pp->ready_head)
            continue;
        int32_t leader = sl_md_leader(cl, pp->t->name, pp->partition);
        if (leader < 0) {
            need_md = true;
            continue;
        }
        sl_broker *br = sl_broker_ready(cl, leader);
        if (!br)
            continue;
        send_produce(cl, br, now, next);
    }
    if (need_md)
        sl_md_refresh(cl);
}

/* ---- lifecycle ---------------------------------------------------------- */

sl_producer *sl_producer_new(const sl_conf *conf, char *errbuf, size_t size)
{
    sl_client *cl = sl_client_new(conf, "producer", errbuf, size);
    if (!cl)
        return NULL;
    sl_producer *pr = calloc(1, sizeof *pr);
    sl_prod *p = calloc(1, sizeof *p);
    if (!pr || !p) {
        free(pr);
        free(p);
        sl_client_free(cl);
        sl_errbuf(errbuf, size, "out of memory");
        return NULL;
    }
    p->idem = cl->conf.enable_idempotence ? IDEM_WANT : IDEM_OFF;
    p->pid = -1;
    p->epoch = -1;
    p->rng = (uint32_t)((uintptr_t)p >> 4) ^ (uint32_t)sl_wall_ms() ^ 0x9e3779b9u;
    if (!p->rng)
        p->rng = 1;
    if (cl->conf.enable_idempotence && cl->conf.acks != -1) {
        sl_errbuf(errbuf, size, "enable.idempotence=true requires acks=all "
                  "(set enable.idempotence=false to use acks=%d)", cl->conf.acks);
        free(pr);
        free(p);
        sl_client_free(cl);
        return NULL;
    }
    pr->cl = cl;
    pr->p = p;
    cl->prod = p;
    cl->app_handle = pr;
    if (sl_client_start(cl, errbuf, size) != 0) {
        cl->prod = NULL;
        free(p);
        free(pr);
        sl_client_free(cl);
        return NULL;
    }
    return pr;
}

static void free_list(sl_pbatch *b)
{
    while (b) {
        sl_pbatch *n = b->next;
        kp_buf_free(&b->buf);
        kp_buf_free(&b->wire);
        free(b->opaques);
        free(b);
        b = n;
    }
}

void sl_producer_destroy(sl_producer *pr)
{
    if (!pr)
        return;
    sl_client *cl = pr->cl;
    sl_prod *p = pr->p;
    sl_client_stop(cl);                  /* in-flight batches land in DR */
    for (int i = 0; i < p->n_all; i++) {
        free_list(p->all[i]->open_head);
        free_list(p->all[i]->ready_head);
        free(p->all[i]);
    }
    free_list(p->dr_head);
    free_list(p->free_list);
    for (int i = 0; i < p->n_topics; i++) {
        free(p->topics[i]->parts);
        free(p->topics[i]->name);
        free(p->topics[i]);
    }
    free(p->topics);
    free(p->all);
    cl->prod = NULL;
    free(p);
    sl_client_free(cl);
    free(pr);
}
