/*
 * segments/retention.c — making the log shorter: truncation at the end
 * (a follower diverged from its leader) and deletion at the start
 * (DeleteRecords, retention.ms, retention.bytes).
 *
 * Invariants kept (log.c L1-L4), plus:
 *   T1. Only whole batches are removed.  Truncating to an offset inside a
 *       batch removes that whole batch: the log end becomes its BaseOffset
 *       (no offset >= `offset` survives, as seg.h asks).
 *   T2. The active segment is never deleted by retention; the log start
 *       only moves forward there, and is clamped to the log end.
 *   T3. Truncation bumps trunc_gen under the lock, so a flush that started
 *       before it cannot publish a recovery point past the new end.
 *
 * Deleted segments' files are renamed *.deleted at once (segment.c) and
 * unlinked either at once or, with seg_set_deferred_delete, by whoever
 * takes them with seg_take_dead (after file.delete.delay.ms); readers
 * holding a seg_range keep their fd either way.
 */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "segments/seg_int.h"

static void after_shrink(seg_log *log, int64_t end)
{
    seg_clean_truncated(log, end);
    seg_txn_forget_from(log, end);               /* txnindex.c X1 */
    pthread_mutex_lock(&log->mu);
    log->log_end = end;
    log->trunc_gen++;
    log->changes++;                              /* log.c L5 */
    if (log->recovery_point > end)
        log->recovery_point = end;
    pthread_mutex_unlock(&log->mu);
    if (log->log_start > end)
        log->log_start = end;
    seg_epoch_truncate_end(log, end);            /* epochs.c E3 */
    seg_epoch_truncate_start(log, log->log_start);
    log->max_ts = -1;
    for (int i = 0; i < log->n; i++)
        if (log->segs[i]->max_ts > log->max_ts)
            log->max_ts = log->segs[i]->max_ts;
}

/* Everything goes; the log restarts empty at `offset`. */
static int truncate_fully(seg_log *log, int64_t offset)
{
    while (log->n > 0)
        seg_log_remove(log, log->n - 1, NULL, true);
    seg_segment *s;
    if (seg_segment_create(log->dir, offset, &log->cfg, 0, &s))
        return seg_log_fail(log, errno);
    if (seg_log_push(log, s)) {
        seg_segment_free(s);
        return seg_log_fail(log, ENOMEM);
    }
    log->log_start = offset;
    after_shrink(log, offset);
    seg_epoch_clear(log);                        /* epochs.c E3 */
    return 0;
}

int seg_truncate(seg_log *log, int64_t offset)
{
    if (log->cleaning && offset < log->cleaning_end)
        return SEG_E_STATE;         /* the cleaner holds those segments */
    if (offset >= log->log_end) {
        /* An epoch a new leader assigned at its log end, with no batch
         * yet, starts at the end: gone too (epochs.c E3), as seg.h words it. */
        seg_epoch_truncate_end(log, offset);
        return 0;
    }
    if (offset <= log->log_start)
        return truncate_fully(log, offset);
    while (log->n > 1 && log->segs[log->n - 1]->base > offset)
        seg_log_remove(log, log->n - 1, NULL, true);
    seg_segment *s = log->segs[log->n - 1];
    uint64_t pos;
    uint32_t size;
    int rc = seg_find_batch(s, offset, &pos, &size);
    if (rc)
        return rc;
    int64_t end = offset;
    if (pos < s->size) {
        uint8_t h[8];
        if (seg_pread_full(s->log->fd, h, sizeof h, (off_t)pos) != sizeof h)
            return seg_log_fail(log, EIO);
        if (seg_be64(h) < end)
            end = seg_be64(h);      /* T1 */
    }
    uint64_t old = s->size;
    if (seg_segment_cut(s, pos) || seg_segment_activate(s, &log->cfg))
        return seg_log_fail(log, errno);
    log->size -= old - pos;
    /* next, max_ts and since_index come back from a walk of the tail. */
    if (seg_segment_tail(s, &log->cfg) < 0)
        return seg_log_fail(log, errno);
    s->next = end > s->base ? end : s->base;
    after_shrink(log, s->next);
    return 0;
}

int seg_restart_at(seg_log *log, int64_t offset)
{
    if (offset < 0)
        return SEG_E_RANGE;
    if (log->cleaning)
        return SEG_E_STATE;         /* the cleaner holds segments */
    return truncate_fully(log, offset);
}

int seg_advance_log_start(seg_log *log, int64_t offset, uint64_t *bytes_freed)
{
    if (offset > log->log_end)
        return SEG_E_RANGE;
    if (bytes_freed)
        *bytes_freed = 0;
    if (offset > log->log_start)
        log->log_start = offset;
    seg_epoch_truncate_start(log, log->log_start);   /* epochs.c E3 */
    int deleted = 0;
    /* A segment lies wholly below when the next one starts at or below.
     * Segments the cleaner is rewriting wait for the next call (cleaner.c C5). */
    while (log->n > 1 && log->segs[1]->base <= log->log_start &&
           !(log->cleaning && log->segs[0]->base < log->cleaning_end)) {
        seg_log_remove(log, 0, bytes_freed, false);
        deleted++;
    }
    return deleted;
}

/* A segment's age for time retention: its largest timestamp, or the
 * file's mtime when no batch carried one (as Kafka does). */
static int64_t segment_time(const seg_segment *s)
{
    if (s->max_ts >= 0)
        return s->max_ts;
    struct stat st;
    if (fstat(s->log->fd, &st) < 0)
        return INT64_MAX;           /* unknown: keep it */
    return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

int seg_delete_old(seg_log *log, int64_t before_ms, int64_t max_bytes,
                   uint64_t *bytes_freed)
{
    if (bytes_freed)
        *bytes_freed = 0;
    int deleted = 0;
    if (log->cleaning)
        return 0;                   /* cleaner.c C5: next check, after the swap */
    while (log->n > 1 && segment_time(log->segs[0]) < before_ms) {
        seg_log_remove(log, 0, bytes_freed, false);
        deleted++;
    }
    /* As seg.h words it: oldest first while the log is larger than
     * max_bytes.  (Kafka stops one segment earlier, keeping at least
     * retention.bytes; the contract here is the stricter bound.) */
    while (max_bytes >= 0 && log->n > 1 && log->size > (uint64_t)max_bytes) {
        seg_log_remove(log, 0, bytes_freed, false);
        deleted++;
    }
    if (deleted && log->segs[0]->base > log->log_start)
        log->log_start = log->segs[0]->base < log->log_end
                             ? log->segs[0]->base : log->log_end;
    seg_epoch_truncate_start(log, log->log_start);   /* epochs.c E3 */
    return deleted;
}
