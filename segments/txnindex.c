/*
 * segments/txnindex.c — the aborted-transaction index (Kafka's .txnindex).
 *
 * A read_committed consumer is told, with every fetch, which aborted
 * transactions overlap the records it got, so that it drops their
 * records without the broker reading message bytes (the zero-copy path
 * stays).  Each ABORT marker appended to the log adds one entry to the
 * index of the segment holding the marker, in Kafka's file layout
 * (big-endian, 34 bytes per entry, appended in marker order):
 *
 *   0  Version           INT16 = 0
 *   2  ProducerId        INT64
 *  10  FirstOffset       INT64   the transaction's first record
 *  18  LastOffset        INT64   the ABORT marker's offset
 *  26  LastStableOffset  INT64   the partition's LSO once it completed
 *
 * The whole log's entries are also kept in memory (log->txns, ordered by
 * LastOffset), loaded from the files at open: a fetch looks them up with
 * a binary search and no I/O.  Memory is 32 bytes per aborted
 * transaction still in the log; aborts are rare next to records.
 *
 * Invariants (cite as "txnindex.c X1"):
 *   X1. log->txns holds exactly the entries of the segments in segs[],
 *       ordered by LastOffset; an entry belongs to the segment whose
 *       range [base, next segment's base) holds its LastOffset.
 *   X2. A segment's .txnindex file holds its entries, in order, and
 *       nothing else: appends pwrite at count * 34; a cut (truncation,
 *       a replay from a producer snapshot) shortens the file to the
 *       entries kept.  Deleting a segment deletes its .txnindex with
 *       its other files (segment.c).
 *   X3. Entries are written without fsync at append; seg_flush (the
 *       flusher thread) fdatasyncs the files written since
 *       (txn_unsynced), and a write that failed marks the index dirty
 *       (txn_failed) until seg_txn_retry rewrites the file from memory.
 *       The producer state snapshot passes a marker only once
 *       seg_txn_durable (replica_producers.c), so its replay, which
 *       re-adds every entry past the snapshot after seg_txn_forget_from,
 *       always covers the entries not known to be on disk.  A file
 *       unreadable at open makes the replay start at or below its
 *       segment's base (txn_rebuild_from), as Kafka rebuilds from the
 *       last snapshot known good.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "segments/seg_int.h"

#define TXN_ENTRY 34
#define TXN_EXT ".txnindex"

static void put64(uint8_t *p, int64_t v)
{
    uint64_t u = htobe64((uint64_t)v);
    memcpy(p, &u, sizeof u);
}

static void encode(uint8_t *buf, const seg_aborted_txn *e)
{
    buf[0] = buf[1] = 0;                       /* Version 0 */
    put64(buf + 2, e->producer_id);
    put64(buf + 10, e->first_offset);
    put64(buf + 18, e->last_offset);
    put64(buf + 26, e->last_stable_offset);
}

/* Index of the segment holding offset (its range reaches the next
 * segment's base); 0 for offsets below the first. */
static int segment_of(const seg_log *log, int64_t offset)
{
    int lo = 0, hi = log->n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (log->segs[mid]->base <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* First entry with last_offset >= offset. */
static int first_at_or_after(const seg_log *log, int64_t offset)
{
    int lo = 0, hi = log->ntxns;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (log->txns[mid].last_offset < offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Entries of segs[i]: [*from, *to) of log->txns (X1). */
static void segment_entries(const seg_log *log, int i, int *from, int *to)
{
    *from = first_at_or_after(log, log->segs[i]->base);
    *to = i + 1 < log->n ? first_at_or_after(log, log->segs[i + 1]->base) : log->ntxns;
}

static int push(seg_log *log, const seg_aborted_txn *e)
{
    if (log->ntxns == log->txns_cap) {
        int cap = log->txns_cap ? log->txns_cap * 2 : 8;
        seg_aborted_txn *v = realloc(log->txns, (size_t)cap * sizeof *v);
        if (!v)
            return SEG_E_NOMEM;
        log->txns = v;
        log->txns_cap = cap;
    }
    log->txns[log->ntxns++] = *e;
    return 0;
}

int seg_txn_add(seg_log *log, const seg_aborted_txn *e)
{
    if (e->last_offset < log->log_start || e->last_offset >= log->log_end ||
        (log->ntxns > 0 && log->txns[log->ntxns - 1].last_offset >= e->last_offset))
        return SEG_E_RANGE;
    int rc = push(log, e);
    if (rc)
        return rc;
    int i = segment_of(log, e->last_offset), from, to;
    segment_entries(log, i, &from, &to);
    uint8_t buf[TXN_ENTRY];
    encode(buf, e);
    char path[4096];
    seg_path(path, sizeof path, log->dir, log->segs[i]->base, TXN_EXT);
    ssize_t w = -1;
    if (log->txn_failed < 0) {                 /* else the retry writes it */
        int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            w = seg_pwrite_full(fd, buf, TXN_ENTRY, (off_t)(to - from - 1) * TXN_ENTRY);
            close(fd);
        }
    }
    if (w != TXN_ENTRY) {                      /* kept in memory, dirty (X3) */
        if (log->txn_failed < 0)
            log->txn_failed = e->last_offset;
        return SEG_E_IO;
    }
    pthread_mutex_lock(&log->mu);
    if (log->txn_unsynced < 0)
        log->txn_unsynced = e->last_offset;
    log->txn_writes++;
    pthread_mutex_unlock(&log->mu);
    return 0;
}

bool seg_txn_durable(seg_log *log)
{
    if (log->txn_failed >= 0)
        return false;
    pthread_mutex_lock(&log->mu);
    bool ok = log->txn_unsynced < 0;
    pthread_mutex_unlock(&log->mu);
    return ok;
}

/* X3: a rewritten file needs an fdatasync like an appended one. */
static void mark_unsynced(seg_log *log, int64_t offset)
{
    pthread_mutex_lock(&log->mu);
    if (log->txn_unsynced < 0 || offset < log->txn_unsynced)
        log->txn_unsynced = offset;
    log->txn_writes++;
    pthread_mutex_unlock(&log->mu);
}

int seg_txn_retry(seg_log *log)
{
    if (log->txn_failed < 0)
        return 0;
    /* Below the first segment (retention took the failed one): 0, and
     * the later entries, left unwritten (seg_txn_add), are rewritten. */
    int i = segment_of(log, log->txn_failed);
    log->txn_failed = -1;
    for (; i < log->n; i++)
        if (seg_txn_rewrite(log, i) != 0)
            return SEG_E_IO;                   /* dirty again from segs[i] */
    return 0;
}

int seg_txn_sync_first(const seg_log *log, int first)
{
    if (log->txn_unsynced < 0)
        return first;
    int i = segment_of(log, log->txn_unsynced);
    return i < first ? i : first;
}

int64_t seg_txn_rebuild_from(const seg_log *log)
{
    return log->txn_rebuild_from;
}

void seg_txn_rebuilt(seg_log *log)
{
    log->txn_rebuild_from = -1;
}

/* Cuts segs[i]'s file to the entries it keeps in memory (X2). */
static void cut_file(seg_log *log, int i)
{
    int from, to;
    segment_entries(log, i, &from, &to);
    char path[4096];
    seg_path(path, sizeof path, log->dir, log->segs[i]->base, TXN_EXT);
    if (to > from)
        (void)truncate(path, (off_t)(to - from) * TXN_ENTRY);
    else
        unlink(path);                      /* ENOENT when it never had one */
}

void seg_txn_forget_from(seg_log *log, int64_t offset)
{
    int k = first_at_or_after(log, offset);
    if (k == log->ntxns && log->txn_rebuild_from < 0)
        return;
    /* An unreadable file's segment (X3) is cut too: the replay rewrites it. */
    int first_seg = segment_of(log, k < log->ntxns ? log->txns[k].last_offset : offset);
    log->ntxns = k;
    if (log->txn_failed >= offset)
        log->txn_failed = -1;                  /* the replay re-adds it */
    for (int i = first_seg; i < log->n; i++)
        cut_file(log, i);
}

void seg_txn_segment_gone(seg_log *log, int i)
{
    int from, to;
    segment_entries(log, i, &from, &to);
    if (to == from)
        return;
    memmove(log->txns + from, log->txns + to,
            (size_t)(log->ntxns - to) * sizeof *log->txns);
    log->ntxns -= to - from;
}

int seg_txn_collect(const seg_log *log, int64_t from, int64_t to,
                    seg_aborted_txn *out, int cap)
{
    int n = 0;
    for (int k = first_at_or_after(log, from); k < log->ntxns; k++) {
        const seg_aborted_txn *e = &log->txns[k];
        if (e->first_offset < to) {
            if (n < cap)
                out[n] = *e;
            n++;
        }
        /* Kafka's completion rule: once an abort completed with the LSO at
         * or past `to`, no transaction starting below `to` was still open,
         * so no later marker ends one. */
        if (e->last_stable_offset >= to)
            break;
    }
    return n;
}

int seg_txn_count(const seg_log *log)
{
    return log->ntxns;
}

/* At open (seg_open, segments in order): reads segs[i]'s file; entries
 * whose marker lies past the segment's end (a torn tail cut) or that are
 * not well formed end it, and the file is cut to what was kept. */
int seg_txn_load(seg_log *log, int i)
{
    seg_segment *s = log->segs[i];
    char path[4096];
    seg_path(path, sizeof path, log->dir, s->base, TXN_EXT);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : SEG_E_IO;
    uint8_t buf[TXN_ENTRY * 64];
    off_t pos = 0;
    bool cut = false;
    for (;;) {
        ssize_t got = seg_pread_full(fd, buf, sizeof buf, pos);
        if (got < 0) {
            close(fd);
            return SEG_E_IO;
        }
        ssize_t at = 0;
        for (; at + TXN_ENTRY <= got; at += TXN_ENTRY) {
            const uint8_t *p = buf + at;
            seg_aborted_txn e = {
                .producer_id = seg_be64(p + 2), .first_offset = seg_be64(p + 10),
                .last_offset = seg_be64(p + 18), .last_stable_offset = seg_be64(p + 26),
            };
            bool ok = p[0] == 0 && p[1] == 0 && e.last_offset >= s->base &&
                      e.last_offset < s->next && e.first_offset <= e.last_offset &&
                      (log->ntxns == 0 ||
                       log->txns[log->ntxns - 1].last_offset < e.last_offset);
            if (!ok || push(log, &e) != 0) {
                cut = true;
                break;
            }
        }
        if (cut || got < (ssize_t)sizeof buf) {
            cut |= at != got;                 /* a torn entry at the end */
            pos += at;
            break;
        }
        pos += got;
    }
    close(fd);
    if (cut)
        (void)truncate(path, pos);
    return 0;
}

void seg_txn_drop(seg_log *log, const int64_t *last, int n, int64_t from, int64_t to)
{
    int w = 0, k = 0;
    for (int r = 0; r < log->ntxns; r++) {
        int64_t off = log->txns[r].last_offset;
        while (k < n && last[k] < off)
            k++;
        if (off >= from && off < to && k < n && last[k] == off)
            continue;                          /* dropped; order kept (X1) */
        log->txns[w++] = log->txns[r];
    }
    log->ntxns = w;
}

int seg_txn_rewrite(seg_log *log, int i)
{
    int from, to;
    segment_entries(log, i, &from, &to);
    char path[4096];
    seg_path(path, sizeof path, log->dir, log->segs[i]->base, TXN_EXT);
    if (to == from) {
        unlink(path);
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = fd < 0 ? SEG_E_IO : 0;
    for (int k = from; k < to && rc == 0; k++) {
        const seg_aborted_txn *e = &log->txns[k];
        uint8_t buf[TXN_ENTRY];
        encode(buf, e);
        if (seg_pwrite_full(fd, buf, TXN_ENTRY, (off_t)(k - from) * TXN_ENTRY) != TXN_ENTRY)
            rc = SEG_E_IO;
    }
    if (fd >= 0)
        close(fd);
    if (rc == 0)
        mark_unsynced(log, log->segs[i]->base);
    else if (log->txn_failed < 0 || log->segs[i]->base < log->txn_failed)
        log->txn_failed = log->segs[i]->base;  /* X3: seg_txn_retry */
    return rc;
}
