/*
 * daemon/replica/replica_producers.c — the idempotent producer, broker side.
 *
 * Design note.
 *
 * A producer that sets enable.idempotence gets a ProducerId from
 * InitProducerId (daemon/api/api_producer_id.c) and numbers its records per
 * partition from 0: every batch carries ProducerId, ProducerEpoch and
 * BaseSequence (its first record's number; the last is BaseSequence +
 * LastOffsetDelta, wrapping at INT32_MAX to 0).  Per partition and
 * producer the broker remembers the epoch and the last five batches
 * (bk_producer), and decides for each incoming batch, in Kafka's order
 * (ProducerStateManager / ProducerAppendInfo):
 *
 *   same epoch, (first, last) seq equal to a remembered batch
 *                                   → duplicate: answered with that batch's
 *                                     offset, nothing appended
 *   epoch below the remembered one  → INVALID_PRODUCER_EPOCH
 *   epoch above it, seq != 0        → OUT_OF_ORDER_SEQUENCE_NUMBER
 *   same epoch, seq != last + 1     → OUT_OF_ORDER_SEQUENCE_NUMBER
 *   producer unknown                → accepted at any sequence (Kafka >= 2.5,
 *                                     KIP-360: state legitimately vanishes
 *                                     with retention or expiry; librdkafka
 *                                     2.0.2 treats UNKNOWN_PRODUCER_ID in a
 *                                     produce answer as needing an epoch
 *                                     bump it cannot do without KIP-360's
 *                                     InitProducerId v3, so we never send it)
 *
 * Transactions (KIP-98).  A transactional batch (attribute bit 0x10)
 * follows the same epoch and sequence rules; the first one of a producer
 * with no open transaction opens one there (txn_first, Kafka's
 * currentTxnFirstOffset).  A marker (control batch: COMMIT or ABORT,
 * written by replica_txn.c for the coordinator, or replicated) closes
 * it: the producer takes the marker's epoch (a newer epoch forgets its
 * batches: the next data batch starts at sequence 0) and coordinator
 * epoch; an ABORT enters the aborted-transaction index (segments/
 * txnindex.c) with the LSO once it completed.  A producer with an open
 * transaction never expires, and a non-transactional batch from it is
 * INVALID_TXN_STATE, as Kafka.
 *
 * Invariants:
 *   P1. The table reflects exactly the batches below the log end: check
 *       runs before seg_append, record right after it on the same loop
 *       turn, and nothing else changes the log tail meanwhile.
 *   P2. A snapshot named N holds the state of the batches below offset N,
 *       so state = snapshot N + replay of the headers from N to the log
 *       end.  A snapshot above the log end (its tail was cut by recovery)
 *       is never used.
 *   P3. Memory is per producer, never per batch: a producer's entry is
 *       allocated when it first appears and keeps a fixed ring of five.
 *   P4. first_unstable is the smallest txn_first of the table (-1: no
 *       open transaction) and open_txns counts them.  The producers with
 *       an open transaction are a binary min-heap by txn_first (open,
 *       each knowing its index, open_at), whose array has the table's
 *       capacity, so opening or closing one is O(log open_txns) and never
 *       allocates nor scans the table (Kafka keeps a sorted map); only a
 *       snapshot's load rebuilds it.  The partition's LSO is
 *       min(first_unstable, high watermark) (replica_partition_lso), O(1)
 *       on the fetch path.
 *   P9. A mirror topic that left mirroring (daemon/link/link.c K17) holds
 *       the source's batches below local_start and only local ones from
 *       there.  A producer whose newest data batch (a marker, for one
 *       known by markers only: last_offset) lies below local_start and
 *       that has no open transaction is the source's: the source's
 *       producer ids are not this cluster's, so its state never judges a
 *       local batch.  check takes it as unknown (accepted at any sequence,
 *       as an expired producer), apply starts it afresh with the first
 *       batch at or past local_start, and replica_pstate_local_start
 *       forgets such producers and cuts the source's batches out of the
 *       rings of the others (a replay that ran before local_start was
 *       known).  Cost on the produce path: one comparison per batch.
 *
 * The table is open addressing with linear probing; deletion shifts the
 * following run back (no tombstones), so a lookup probes a short run.
 *
 * Snapshot file layout (big-endian), written to .tmp and renamed:
 *
 *   0  Magic      "SLPS"
 *   4  Version    INT16 = 3 (1: without the two transaction fields, 2:
 *                   without LastOffset; both read, LastOffset then -1)
 *   6  Count      INT32                 producers that follow
 *  10  producer × Count:
 *        ProducerId INT64 | ProducerEpoch INT16 | LastTimestamp INT64 |
 *        [v2: CoordinatorEpoch INT32 | CurrentTxnFirstOffset INT64] |
 *        [v3: LastOffset INT64 (P9)] |
 *        Batches INT8 (0..5, oldest first) | batch × Batches:
 *          FirstSeq INT32 | LastSeq INT32 | BaseOffset INT64 |
 *          LastOffsetDelta INT32 | Timestamp INT64
 *   end  Crc      UINT32                CRC-32C of every byte before it
 */
#include "daemon/replica/replica_producers.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/view/view.h"
#include "daemon/replica/replica.h"

/* ---- the table -------------------------------------------------------------- */
void replica_pstate_init(bk_pstate *ps)
{
    memset(ps, 0, sizeof *ps);
    ps->first_unstable = -1;           /* P4: no open transaction */
    ps->snapshot_at = -1;
    ps->local_start = -1;              /* P9: none */
}

void replica_pstate_free(bk_pstate *ps)
{
    for (uint32_t i = 0; i < ps->cap; i++)
        free(ps->slots[i]);
    free(ps->slots);
    free(ps->open);
    replica_pstate_init(ps);
}

static uint32_t slot_of(int64_t pid, uint32_t cap)
{
    uint64_t h = (uint64_t)pid * 0x9E3779B97F4A7C15ULL;   /* Fibonacci hashing */
    return (uint32_t)(h >> 32) & (cap - 1);
}

bk_producer *replica_pstate_find(const bk_pstate *ps, int64_t pid)
{
    if (!ps || ps->cap == 0)
        return NULL;
    for (uint32_t i = slot_of(pid, ps->cap);; i = (i + 1) & (ps->cap - 1)) {
        bk_producer *e = ps->slots[i];
        if (!e || e->pid == pid)
            return e;
    }
}

static int grow(bk_pstate *ps)
{
    uint32_t ncap = ps->cap ? ps->cap * 2 : 8;
    bk_producer **ns = calloc(ncap, sizeof *ns);
    bk_producer **open = ns ? realloc(ps->open, ncap * sizeof *open) : NULL;   /* P4 */
    if (!open) {
        free(ns);
        return -1;
    }
    ps->open = open;
    for (uint32_t i = 0; i < ps->cap; i++) {
        bk_producer *e = ps->slots[i];
        if (!e)
            continue;
        uint32_t j = slot_of(e->pid, ncap);
        while (ns[j])
            j = (j + 1) & (ncap - 1);
        ns[j] = e;
    }
    free(ps->slots);
    ps->slots = ns;
    ps->cap = ncap;
    return 0;
}

/* The entry for pid, created (epoch -1, no batches) if absent. */
static bk_producer *find_or_add(bk_pstate *ps, int64_t pid)
{
    bk_producer *e = replica_pstate_find(ps, pid);
    if (e)
        return e;
    if ((ps->n + 1) * 4 > ps->cap * 3 && grow(ps) != 0)     /* load <= 3/4 */
        return NULL;
    e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->pid = pid;
    e->epoch = -1;
    e->last_offset = -1;
    e->txn_first = -1;
    e->coord_epoch = -1;
    uint32_t i = slot_of(pid, ps->cap);
    while (ps->slots[i])
        i = (i + 1) & (ps->cap - 1);
    ps->slots[i] = e;
    ps->n++;
    return e;
}

/* Removes slots[i] and shifts back the entries of the run after it that
 * would otherwise become unreachable. */
static void remove_at(bk_pstate *ps, uint32_t i)
{
    uint32_t mask = ps->cap - 1;
    free(ps->slots[i]);
    ps->slots[i] = NULL;
    ps->n--;
    for (uint32_t j = (i + 1) & mask; ps->slots[j]; j = (j + 1) & mask) {
        uint32_t home = slot_of(ps->slots[j]->pid, ps->cap);
        /* j's entry may move to the hole i if i lies cyclically in [home, j) */
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            ps->slots[i] = ps->slots[j];
            ps->slots[j] = NULL;
            i = j;
        }
    }
}

/* P9: e's state is the source's (a mirror's, below local_start). */
static bool from_source(const bk_pstate *ps, const bk_producer *e)
{
    if (ps->local_start < 0 || e->txn_first >= 0)
        return false;
    int64_t last = e->n > 0 ? e->batches[e->head].base_offset : e->last_offset;
    return last < ps->local_start;
}

/* P9: e's batches below from out of its ring, the order kept. */
static void ring_cut(bk_producer *e, int64_t from)
{
    bk_pbatch keep[BK_PRODUCER_BATCHES];
    uint8_t k = 0;
    for (int i = e->n - 1; i >= 0; i--) {        /* oldest first */
        const bk_pbatch *b = &e->batches[(e->head + BK_PRODUCER_BATCHES - i) %
                                         BK_PRODUCER_BATCHES];
        if (b->base_offset >= from)
            keep[k++] = *b;
    }
    memcpy(e->batches, keep, k * sizeof *keep);
    e->n = k;
    e->head = k > 0 ? (uint8_t)(k - 1) : 0;
}

uint32_t replica_pstate_local_start(bk_pstate *ps, int64_t offset)
{
    ps->local_start = offset < 0 ? -1 : offset;
    uint32_t gone = 0;
    for (uint32_t i = 0; offset >= 0 && i < ps->cap;) {
        bk_producer *e = ps->slots[i];
        if (e && from_source(ps, e)) {
            remove_at(ps, i);          /* slot i may now hold a shifted entry */
            gone++;
            ps->dirty = true;
            continue;
        }
        if (e && e->n > 0 && e->batches[e->head].base_offset >= offset) {
            uint8_t n = e->n;
            ring_cut(e, offset);
            ps->dirty |= n != e->n;
        }
        i++;
    }
    return gone;
}

uint32_t replica_pstate_expire(bk_pstate *ps, int64_t now_ms, int64_t max_age_ms)
{
    uint32_t gone = 0;
    for (uint32_t i = 0; i < ps->cap;) {
        bk_producer *e = ps->slots[i];
        if (e && e->last_ts < now_ms - max_age_ms && e->txn_first < 0) {
            remove_at(ps, i);          /* slot i may now hold a shifted entry */
            gone++;
            continue;
        }
        i++;
    }
    if (gone)
        ps->dirty = true;
    return gone;
}

/* ---- sequence rules ---------------------------------------------------------- */
/* Kafka's DefaultRecordBatch.incrementSequence: wraps to 0 after INT32_MAX. */
static int32_t seq_add(int32_t seq, int32_t inc)
{
    if (seq > INT32_MAX - inc)
        return inc - (INT32_MAX - seq) - 1;
    return seq + inc;
}

static bool in_sequence(int32_t last, int32_t next)
{
    return next == seq_add(last, 1);
}

static const bk_pbatch *find_duplicate(const bk_producer *e, const kp_batch *h)
{
    if (h->ProducerEpoch != e->epoch)
        return NULL;
    int32_t last = seq_add(h->BaseSequence, h->LastOffsetDelta);
    for (int i = 0; i < e->n; i++) {
        const bk_pbatch *b = &e->batches[i];
        if (b->first_seq == h->BaseSequence && b->last_seq == last)
            return b;
    }
    return NULL;
}

/* The latest earlier batch of the same producer in this request, if any:
 * several batches of one producer in one request chain on each other. */
static bool prior_in_request(const uint8_t *data, size_t upto, int64_t pid,
                             kp_batch *out)
{
    bool found = false;
    for (size_t at = 0; at < upto;) {
        kp_batch h;
        if (kp_batch_header(data + at, upto - at, &h) != 0)
            break;
        if (h.ProducerId == pid) {
            *out = h;
            found = true;
        }
        at += (size_t)h.BatchLength + KP_BATCH_LOG_OVERHEAD;
    }
    return found;
}

int replica_pstate_check(const bk_pstate *ps, const uint8_t *data, size_t len,
                    bk_pbatch *dup)
{
    for (size_t at = 0; at < len;) {
        kp_batch h;
        if (kp_batch_header(data + at, len - at, &h) != 0)
            return KP_CORRUPT_MESSAGE;        /* validated before: cannot be */
        size_t here = at;
        at += (size_t)h.BatchLength + KP_BATCH_LOG_OVERHEAD;
        if (h.ProducerId < 0)
            continue;
        if (h.ProducerEpoch < 0 || h.BaseSequence < 0)
            return KP_CORRUPT_MESSAGE;
        const bk_producer *e = replica_pstate_find(ps, h.ProducerId);
        if (e && from_source(ps, e))
            e = NULL;                          /* P9: the source's, not this one */
        /* Kafka: "Expected transactional write from producer" */
        if (e && e->txn_first >= 0 && !(h.Attributes & KP_ATTR_TRANSACTIONAL) &&
            h.ProducerEpoch == e->epoch)
            return KP_INVALID_TXN_STATE;
        if (e) {
            const bk_pbatch *d = find_duplicate(e, &h);
            if (d) {
                *dup = *d;
                return BK_PS_DUPLICATE;
            }
        }
        int16_t epoch;
        int32_t last;
        kp_batch prior;
        if (here > 0 && prior_in_request(data, here, h.ProducerId, &prior)) {
            epoch = prior.ProducerEpoch;
            last = seq_add(prior.BaseSequence, prior.LastOffsetDelta);
        } else if (e && e->n > 0) {
            epoch = e->epoch;
            last = e->batches[e->head].last_seq;
        } else if (e && e->epoch >= 0) {
            /* Known by a marker only (its epoch bumped by the coordinator):
             * Kafka's NO_SEQUENCE case, the next batch starts at 0. */
            if (h.ProducerEpoch < e->epoch)
                return KP_INVALID_PRODUCER_EPOCH;
            if (h.BaseSequence != 0)
                return KP_OUT_OF_ORDER_SEQUENCE_NUMBER;
            continue;
        } else {
            continue;                          /* unknown producer: accepted */
        }
        if (h.ProducerEpoch < epoch)
            return KP_INVALID_PRODUCER_EPOCH;
        if (h.ProducerEpoch > epoch ? h.BaseSequence != 0
                                    : !in_sequence(last, h.BaseSequence))
            return KP_OUT_OF_ORDER_SEQUENCE_NUMBER;
    }
    return KP_NONE;
}

int replica_pstate_check_marker(const bk_pstate *ps, int64_t pid, int16_t epoch,
                                int32_t coordinator_epoch)
{
    const bk_producer *e = replica_pstate_find(ps, pid);
    if (!e || from_source(ps, e))              /* P9 */
        return KP_NONE;
    if (epoch < e->epoch)
        return KP_INVALID_PRODUCER_EPOCH;
    if (coordinator_epoch < e->coord_epoch)
        return KP_TRANSACTION_COORDINATOR_FENCED;
    return KP_NONE;
}

/* ---- P4: the open transactions, a min-heap by first offset ---------------- */
static void open_set(bk_pstate *ps, uint32_t i, bk_producer *e)
{
    ps->open[i] = e;
    e->open_at = i;
}

/* Moves the entry at i up or down to where the heap order puts it. */
static void open_fix(bk_pstate *ps, uint32_t i)
{
    bk_producer *e = ps->open[i];
    while (i > 0 && e->txn_first < ps->open[(i - 1) / 2]->txn_first) {
        open_set(ps, i, ps->open[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (uint32_t c; (c = 2 * i + 1) < ps->open_txns; i = c) {
        if (c + 1 < ps->open_txns && ps->open[c + 1]->txn_first < ps->open[c]->txn_first)
            c++;
        if (ps->open[c]->txn_first >= e->txn_first)
            break;
        open_set(ps, i, ps->open[c]);
    }
    open_set(ps, i, e);
}

static void open_top(bk_pstate *ps)
{
    ps->first_unstable = ps->open_txns ? ps->open[0]->txn_first : -1;
}

/* e (in the table, so the heap has room) opens a transaction at first. */
static void open_txn(bk_pstate *ps, bk_producer *e, int64_t first)
{
    e->txn_first = first;
    open_set(ps, ps->open_txns, e);
    open_fix(ps, ps->open_txns++);
    open_top(ps);
}

static void close_txn(bk_pstate *ps, bk_producer *e)
{
    uint32_t i = e->open_at;
    e->txn_first = -1;
    bk_producer *last = ps->open[--ps->open_txns];
    if (i < ps->open_txns) {
        open_set(ps, i, last);
        open_fix(ps, i);
    }
    open_top(ps);
}

/* The heap from the table's txn_first fields (a snapshot's load). */
static void open_rebuild(bk_pstate *ps)
{
    ps->open_txns = 0;
    for (uint32_t i = 0; i < ps->cap; i++) {
        bk_producer *e = ps->slots[i];
        if (e && e->txn_first >= 0) {
            open_set(ps, ps->open_txns, e);
            open_fix(ps, ps->open_txns++);
        }
    }
    open_top(ps);
}

/* The marker at h ends e's open transaction (if any): an ABORT goes to
 * the aborted-transaction index with the LSO after it (txnindex.c). */
static void end_txn(bk_pstate *ps, bk_producer *e, const kp_batch *h, const bk_marker *m)
{
    if (m)
        e->coord_epoch = m->coordinator_epoch;
    if (e->txn_first < 0)
        return;
    int64_t first = e->txn_first;
    close_txn(ps, e);                      /* P4 */
    if (!m || m->commit || !ps->log)
        return;
    seg_aborted_txn t = {
        .producer_id = e->pid, .first_offset = first, .last_offset = h->BaseOffset,
        .last_stable_offset = ps->first_unstable >= 0 ? ps->first_unstable
                                                      : h->BaseOffset + 1,
    };
    int rc = seg_txn_add(ps->log, &t);
    if (rc != 0 && rc != SEG_E_RANGE)      /* RANGE: replayed, already there */
        BK_WARN("aborted transaction of producer %lld (offsets %lld..%lld) not "
                "written to the transaction index (error %d); kept in memory",
                (long long)e->pid, (long long)first, (long long)h->BaseOffset, rc);
}

int replica_pstate_apply(bk_pstate *ps, const kp_batch *h, int64_t ts, const bk_marker *m)
{
    bk_producer *e = find_or_add(ps, h->ProducerId);
    if (!e)
        return -1;
    if (h->BaseOffset >= ps->local_start && from_source(ps, e)) {
        e->n = 0;                          /* P9: starts afresh here */
        e->coord_epoch = -1;
        e->epoch = h->ProducerEpoch;
    }
    e->last_offset = h->BaseOffset;
    if (e->epoch != h->ProducerEpoch) {
        e->epoch = h->ProducerEpoch;
        e->n = 0;
    }
    if (h->Attributes & KP_ATTR_CONTROL) {
        end_txn(ps, e, h, m);
        if (ts > e->last_ts)
            e->last_ts = ts;
        ps->dirty = true;
        return 0;
    }
    if ((h->Attributes & KP_ATTR_TRANSACTIONAL) && e->txn_first < 0)
        open_txn(ps, e, h->BaseOffset);    /* P4 */
    e->head = e->n == 0 ? 0 : (uint8_t)((e->head + 1) % BK_PRODUCER_BATCHES);
    if (e->n < BK_PRODUCER_BATCHES)
        e->n++;
    bk_pbatch *b = &e->batches[e->head];
    b->first_seq = h->BaseSequence;
    b->last_seq = seq_add(h->BaseSequence, h->LastOffsetDelta);
    b->base_offset = h->BaseOffset;
    b->offset_delta = h->LastOffsetDelta;
    b->timestamp = h->MaxTimestamp;
    if (ts > e->last_ts)
        e->last_ts = ts;
    ps->dirty = true;
    return 0;
}

int replica_pstate_record(bk_pstate *ps, const uint8_t *data, size_t len, int64_t now_ms)
{
    int rc = 0;
    for (size_t at = 0; at < len;) {
        kp_batch h;
        if (kp_batch_header(data + at, len - at, &h) != 0)
            return -1;
        size_t size = (size_t)h.BatchLength + KP_BATCH_LOG_OVERHEAD;
        bk_marker m;
        bool marker = (h.Attributes & KP_ATTR_CONTROL) &&
                      replica_marker_parse(data + at, len - at, &m) == 0;
        at += size;
        if (h.ProducerId >= 0 &&
            replica_pstate_apply(ps, &h, now_ms, marker ? &m : NULL) != 0)
            rc = -1;
    }
    return rc;
}

/* ---- transaction markers ---------------------------------------------------------
 * A marker is a control batch with one record (Kafka's EndTransactionMarker):
 *
 *   header (61 bytes): Attributes = transactional 0x10 | control 0x20,
 *                      BaseSequence -1, RecordsCount 1
 *   record (17 bytes): Length varint (16) | Attributes INT8 0 |
 *                      TimestampDelta 0 | OffsetDelta 0 |
 *                      KeyLength varint (4) | Key: Version INT16 0, Type INT16
 *                      (0 ABORT, 1 COMMIT) | ValueLength varint (6) |
 *                      Value: Version INT16 0, CoordinatorEpoch INT32 |
 *                      Headers varint 0
 */
int replica_marker_parse(const uint8_t *batch, size_t len, bk_marker *m)
{
    if (len < KP_BATCH_HEADER_SIZE)
        return -1;
    kp_rd r;
    kp_rd_init(&r, batch + KP_BATCH_HEADER_SIZE, len - KP_BATCH_HEADER_SIZE);
    kp_rd_varint(&r);                          /* Length */
    kp_rd_i8(&r);                              /* Attributes */
    kp_rd_varlong(&r);                         /* TimestampDelta */
    kp_rd_varint(&r);                          /* OffsetDelta */
    int32_t klen = kp_rd_varint(&r);
    int16_t kver = kp_rd_i16(&r);
    int16_t type = kp_rd_i16(&r);
    int32_t vlen = kp_rd_varint(&r);
    kp_rd_i16(&r);                             /* value Version */
    int32_t coord = kp_rd_i32(&r);
    if (!kp_rd_ok(&r) || klen < 4 || kver < 0 || vlen < 6 || (type != 0 && type != 1))
        return -1;
    m->commit = type == 1;
    m->coordinator_epoch = coord;
    return 0;
}

static uint8_t *put_be(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--)
        p[bytes - 1 - i] = (uint8_t)(v >> (8 * i));
    return p + bytes;
}

size_t replica_marker_build(uint8_t *out, int64_t pid, int16_t epoch, int32_t leader_epoch,
                            const bk_marker *m, int64_t now_ms)
{
    uint8_t *p = out;
    p = put_be(p, 0, 8);                                   /* BaseOffset */
    p = put_be(p, REPLICA_MARKER_SIZE - KP_BATCH_LOG_OVERHEAD, 4);
    p = put_be(p, (uint32_t)leader_epoch, 4);
    *p++ = KP_BATCH_MAGIC;
    uint8_t *crc = p;
    p += 4;
    p = put_be(p, KP_ATTR_TRANSACTIONAL | KP_ATTR_CONTROL, 2);
    p = put_be(p, 0, 4);                                   /* LastOffsetDelta */
    p = put_be(p, (uint64_t)now_ms, 8);                    /* BaseTimestamp */
    p = put_be(p, (uint64_t)now_ms, 8);                    /* MaxTimestamp */
    p = put_be(p, (uint64_t)pid, 8);
    p = put_be(p, (uint16_t)epoch, 2);
    p = put_be(p, (uint32_t)-1, 4);                        /* BaseSequence */
    p = put_be(p, 1, 4);                                   /* RecordsCount */
    static const uint8_t rec[] = { 0x20, 0, 0, 0, 0x08 };  /* zig-zag varints */
    memcpy(p, rec, sizeof rec);
    p += sizeof rec;
    p = put_be(p, 0, 2);                                   /* key Version */
    p = put_be(p, m->commit ? 1 : 0, 2);                   /* Type */
    *p++ = 0x0c;                                           /* ValueLength 6 */
    p = put_be(p, 0, 2);                                   /* value Version */
    p = put_be(p, (uint32_t)m->coordinator_epoch, 4);
    *p++ = 0;                                              /* Headers */
    put_be(crc, kp_crc32c(0, out + KP_BATCH_CRC_START,
                          (size_t)(p - out) - KP_BATCH_CRC_START), 4);
    return (size_t)(p - out);
}

/* ---- snapshots ----------------------------------------------------------------- */
#define SNAP_MAGIC "SLPS"
#define SNAP_VERSION 3
#define SNAP_EXT ".snapshot"

/* "<20 digits>.snapshot" → its offset, or -1. */
static int64_t snap_offset(const char *name)
{
    if (strlen(name) != 20 + strlen(SNAP_EXT) || name[0] < '0' || name[0] > '9')
        return -1;
    char *end;
    errno = 0;
    long long v = strtoll(name, &end, 10);
    return end == name + 20 && strcmp(end, SNAP_EXT) == 0 && errno == 0 ? v : -1;
}

/* Snapshot offsets found in dir, newest first; *out malloc'd. */
static int list_snapshots(const char *dir, int64_t **out, int *count)
{
    *out = NULL;
    *count = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0, cap = 0;
    int64_t *v = NULL;
    struct dirent *de;
    while ((de = readdir(d))) {
        int64_t o = snap_offset(de->d_name);
        if (o < 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 4;
            int64_t *w = realloc(v, (size_t)cap * sizeof *w);
            if (!w)
                break;
            v = w;
        }
        v[n++] = o;
    }
    closedir(d);
    for (int i = 1; i < n; i++)                 /* insertion sort, descending */
        for (int j = i; j > 0 && v[j] > v[j - 1]; j--) {
            int64_t t = v[j]; v[j] = v[j - 1]; v[j - 1] = t;
        }
    *out = v;
    *count = n;
    return 0;
}

static void snap_path(char *out, size_t cap, const char *dir, int64_t offset)
{
    snprintf(out, cap, "%s/%020lld" SNAP_EXT, dir, (long long)offset);
}

int replica_pstate_save(const bk_pstate *ps, const char *dir, int64_t offset)
{
    kp_buf b;
    kp_buf_init(&b);
    kp_wr_raw(&b, SNAP_MAGIC, 4);
    kp_wr_i16(&b, SNAP_VERSION);
    kp_wr_i32(&b, ps ? (int32_t)ps->n : 0);
    for (uint32_t i = 0; ps && i < ps->cap; i++) {
        const bk_producer *e = ps->slots[i];
        if (!e)
            continue;
        kp_wr_i64(&b, e->pid);
        kp_wr_i16(&b, e->epoch);
        kp_wr_i64(&b, e->last_ts);
        kp_wr_i32(&b, e->coord_epoch);
        kp_wr_i64(&b, e->txn_first);
        kp_wr_i64(&b, e->last_offset);
        kp_wr_i8(&b, (int8_t)e->n);
        for (int k = e->n - 1; k >= 0; k--) {   /* oldest first */
            const bk_pbatch *pb = &e->batches[(e->head + BK_PRODUCER_BATCHES - k) %
                                              BK_PRODUCER_BATCHES];
            kp_wr_i32(&b, pb->first_seq);
            kp_wr_i32(&b, pb->last_seq);
            kp_wr_i64(&b, pb->base_offset);
            kp_wr_i32(&b, pb->offset_delta);
            kp_wr_i64(&b, pb->timestamp);
        }
    }
    kp_wr_u32(&b, kp_crc32c(0, b.data, b.len));
    char path[4200], tmp[4300];
    snap_path(path, sizeof path, dir, offset);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = -1;
    int fd = b.err ? -1 : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        size_t off = 0;
        while (off < b.len) {
            ssize_t w = write(fd, b.data + off, b.len - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        /* No fsync: a snapshot lost or torn by a power cut fails its CRC
         * or is missing, and the state is replayed from the log (P2). */
        if (close(fd) == 0 && off == b.len && rename(tmp, path) == 0)
            rc = 0;
        else
            unlink(tmp);
    }
    kp_buf_free(&b);
    if (rc != 0)
        return rc;
    int64_t *offs;
    int n;
    if (list_snapshots(dir, &offs, &n) == 0) {
        for (int i = 2; i < n; i++) {           /* keep the newest two */
            snap_path(path, sizeof path, dir, offs[i]);
            unlink(path);
        }
        free(offs);
    }
    return 0;
}

static int decode(bk_pstate *ps, const uint8_t *data, size_t len)
{
    if (len < 14 || memcmp(data, SNAP_MAGIC, 4) != 0)
        return -1;
    kp_rd tail;
    kp_rd_init(&tail, data + len - 4, 4);
    if (kp_rd_u32(&tail) != kp_crc32c(0, data, len - 4))
        return -1;
    kp_rd r;
    kp_rd_init(&r, data + 4, len - 8);
    int16_t version = kp_rd_i16(&r);
    if (version < 1 || version > SNAP_VERSION)
        return -1;
    int32_t count = kp_rd_i32(&r);
    for (int32_t i = 0; i < count && kp_rd_ok(&r); i++) {
        int64_t pid = kp_rd_i64(&r);
        int16_t epoch = kp_rd_i16(&r);
        int64_t last_ts = kp_rd_i64(&r);
        int32_t coord_epoch = version >= 2 ? kp_rd_i32(&r) : -1;
        int64_t txn_first = version >= 2 ? kp_rd_i64(&r) : -1;
        int64_t last_offset = version >= 3 ? kp_rd_i64(&r) : -1;
        int8_t nb = kp_rd_i8(&r);
        if (!kp_rd_ok(&r) || pid < 0 || nb < 0 || nb > BK_PRODUCER_BATCHES)
            return -1;
        bk_producer *e = find_or_add(ps, pid);
        if (!e)
            return -1;
        e->epoch = epoch;
        e->last_ts = last_ts;
        e->coord_epoch = coord_epoch;
        e->txn_first = txn_first < 0 ? -1 : txn_first;
        e->last_offset = last_offset < 0 ? -1 : last_offset;
        for (int k = 0; k < nb; k++) {
            bk_pbatch *pb = &e->batches[k];
            pb->first_seq = kp_rd_i32(&r);
            pb->last_seq = kp_rd_i32(&r);
            pb->base_offset = kp_rd_i64(&r);
            pb->offset_delta = kp_rd_i32(&r);
            pb->timestamp = kp_rd_i64(&r);
        }
        e->n = (uint8_t)nb;
        e->head = nb > 0 ? (uint8_t)(nb - 1) : 0;
    }
    open_rebuild(ps);                          /* P4 */
    return kp_rd_ok(&r) && kp_rd_left(&r) == 0 ? 0 : -1;
}

static int read_file(const char *path, kp_buf *out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    for (;;) {
        uint8_t *dst = kp_buf_reserve(out, 65536);
        if (!dst) {
            close(fd);
            return -1;
        }
        ssize_t got = read(fd, dst, 65536);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            close(fd);
            return got == 0 ? 0 : -1;
        }
        out->len += (size_t)got;
    }
}

int64_t replica_pstate_load(bk_pstate *ps, const char *dir, int64_t log_end)
{
    int64_t *offs;
    int n;
    if (list_snapshots(dir, &offs, &n) != 0)
        return -1;
    int64_t found = -1;
    char path[4200];
    for (int i = 0; i < n && found < 0; i++) {
        snap_path(path, sizeof path, dir, offs[i]);
        if (offs[i] > log_end) {                /* P2: its tail was cut */
            unlink(path);
            continue;
        }
        kp_buf b;
        kp_buf_init(&b);
        if (read_file(path, &b) == 0 && decode(ps, b.data, b.len) == 0) {
            found = offs[i];
        } else {
            replica_pstate_free(ps);
            BK_WARN("producer state snapshot %s is unreadable; ignored", path);
        }
        kp_buf_free(&b);
    }
    free(offs);
    ps->dirty = false;
    return found;
}

/* ---- the partition's side ---------------------------------------------------------- */
/* view_topics.c invariant 3: <log.dirs>/<topic>-<partition>. */
static void partition_dir(bk_broker *b, bk_partition *p, char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s-%d", b->data_dir, p->topic->name, p->id);
}

/* Replayed producers count as seen now: batch timestamps are the
 * producer's clock (CreateTime may be any age), and expiring state just
 * rebuilt would defeat the rebuild. */
struct replay { bk_pstate *ps; int64_t batches; int64_t now; };

static int replay_header(const uint8_t *hdr, void *arg)
{
    struct replay *rp = arg;
    kp_batch h;
    if (kp_batch_header(hdr, KP_BATCH_HEADER_SIZE, &h) != 0)
        return -1;
    rp->batches++;
    if (h.ProducerId < 0)
        return 0;
    /* seg.h: a small control batch comes whole, its marker readable. */
    bk_marker m;
    size_t size = (size_t)h.BatchLength + KP_BATCH_LOG_OVERHEAD;
    bool marker = (h.Attributes & KP_ATTR_CONTROL) && size <= SEG_CONTROL_BATCH_MAX &&
                  replica_marker_parse(hdr, size, &m) == 0;
    if (replica_pstate_apply(rp->ps, &h, rp->now, marker ? &m : NULL) != 0)
        return -1;
    return 0;
}

/* txnindex.c X3, as Kafka takes a producer snapshot only once the log
 * (its .txnindex too) is flushed up to it: the snapshot at the log end
 * may pass the ABORT markers only when their index entries are on disk.
 * A failed index write is retried here (a rewrite from memory, no
 * fsync); the fdatasync is the flusher's (b: ask it; NULL: at close,
 * after main.c flushed every log). */
static bool index_durable(bk_broker *b, bk_partition *p)
{
    if (seg_txn_retry(p->log) != 0)
        return false;
    if (seg_txn_durable(p->log))
        return true;
    if (b)
        replica_flusher_request(b, p);
    return false;
}

int replica_producers_open(bk_broker *b, bk_partition *p)
{
    bk_pstate *ps = malloc(sizeof *ps);
    if (!ps)
        return -1;
    replica_pstate_init(ps);
    char dir[8192];
    partition_dir(b, p, dir, sizeof dir);
    int64_t end = seg_log_end(p->log);
    /* An unreadable .txnindex (txnindex.c X3): its entries come back
     * only from a replay that starts at or below its segment's base. */
    int64_t rebuild = seg_txn_rebuild_from(p->log);
    int64_t from = replica_pstate_load(ps, dir, rebuild >= 0 && rebuild < end ? rebuild : end);
    ps->snapshot_at = from;
    ps->local_start = p->local_start;        /* P9, for the replay's batches */
    if (from < 0)
        from = seg_log_start(p->log);        /* no snapshot: all of the log */
    int rc = 0;
    ps->log = p->log;
    if (from < end || rebuild >= 0) {
        /* The replay re-adds the aborted transactions it passes
         * (txnindex.c X3). */
        seg_txn_forget_from(p->log, from);
        int64_t t0 = bk_mono_us();
        struct replay rp = { ps, 0, bk_now_ms() };
        if (seg_scan_headers(p->log, from, replay_header, &rp) != 0) {
            BK_ERROR("%s-%d: cannot rebuild producer state from the log; "
                     "retried idempotent batches may be appended twice",
                     p->topic->name, p->id);
            rc = -1;
        } else {
            seg_txn_rebuilt(p->log);
        }
        if (rp.batches > 0)
            BK_INFO("%s-%d: producer state rebuilt from %lld batch headers "
                    "(offsets %lld..%lld, %u producers) in %.1f ms", p->topic->name,
                    p->id, (long long)rp.batches, (long long)from,
                    (long long)end, ps->n, (double)(bk_mono_us() - t0) / 1000.0);
        replica_pstate_local_start(ps, p->local_start);    /* P9: the snapshot's too */
        if (rc == 0 && index_durable(NULL, p) && replica_pstate_save(ps, dir, end) == 0) {
            ps->dirty = false;
            ps->snapshot_at = end;
        }
    }
    replica_pstate_local_start(ps, p->local_start);        /* P9 */
    replica_pstate_expire(ps, bk_now_ms(), BK_PRODUCER_EXPIRATION_MS);
    p->producers = ps;
    return rc;
}

void replica_producers_local_start(bk_partition *p, int64_t offset)
{
    p->local_start = offset;
    uint32_t gone = p->producers ? replica_pstate_local_start(p->producers, offset) : 0;
    if (gone)
        BK_INFO("%s-%d: %u producer%s of the source forgotten: local batches from "
                "offset %lld on", p->topic->name, p->id, gone, gone == 1 ? "" : "s",
                (long long)offset);
}

void replica_producers_close(bk_broker *b, bk_partition *p, bool destroy)
{
    if (!destroy && p->log) {
        char dir[8192];
        partition_dir(b, p, dir, sizeof dir);
        if (!index_durable(NULL, p))
            BK_WARN("%s-%d: the aborted-transaction index is not on disk; no producer "
                    "state snapshot, the next start replays the log from the last one",
                    p->topic->name, p->id);
        else if (replica_pstate_save(p->producers, dir, seg_log_end(p->log)) != 0)
            BK_WARN("%s-%d: cannot write the producer state snapshot (%s); "
                    "the next start replays the log", p->topic->name, p->id,
                    strerror(errno));
    }
    if (p->producers) {
        replica_pstate_free(p->producers);
        free(p->producers);
        p->producers = NULL;
    }
}

int replica_producers_reset(bk_broker *b, bk_partition *p)
{
    replica_producers_close(b, p, true);          /* its state may hold cut batches */
    return replica_producers_open(b, p);
}

static void tick_replica(bk_partition *p, void *arg)
{
    bk_broker *b = arg;
    bk_pstate *ps = p->producers;
    if (!ps || ps->n == 0)
        return;
    replica_pstate_expire(ps, bk_now_ms(), BK_PRODUCER_EXPIRATION_MS);
    if (!ps->dirty || !index_durable(b, p))
        return;                     /* not durable: the next tick retries */
    char dir[8192];
    partition_dir(b, p, dir, sizeof dir);
    int64_t end = seg_log_end(p->log);
    if (replica_pstate_save(ps, dir, end) == 0) {
        ps->dirty = false;
        ps->snapshot_at = end;
    }
}

void replica_producers_tick(bk_broker *b)
{
    replica_replicas_foreach(b, tick_replica, b);
}
