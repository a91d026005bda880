/*
 * segments/headers.c — walking the batch headers of the log tail.
 *
 * For state the broker keeps per batch and must rebuild after a crash
 * (the idempotent producers' sequence numbers, daemon/replica/replica_producers.c):
 * seg_scan_headers hands every batch header from an offset to the log end
 * to a callback, oldest first, without reading record bytes one at a time.
 *
 * Cost: the start is found like a read (index lookup + a bounded header
 * walk); after that the segment is read in WINDOW-sized preads.  A header
 * inside the window costs nothing more; a batch larger than the window is
 * skipped by starting the next window at the next header.  So a log of
 * small batches is read through once, sequentially, and a log of big
 * batches costs one pread per batch.  One heap buffer per call.
 *
 * Only whole batches are visited: a segment is read up to s->size, which
 * never covers a batch an append has not finished (log.c, L3).
 */
#include <stdlib.h>
#include <string.h>

#include "segments/seg_int.h"

#define WINDOW (64 * 1024)

static int scan_segment(seg_segment *s, uint64_t pos, uint8_t *buf,
                        seg_header_fn fn, void *arg)
{
    uint64_t win_pos = 0, win_len = 0;      /* buf holds [win_pos, +win_len) */
    while (pos < s->size) {
        if (s->size - pos < KP_BATCH_HEADER_SIZE)
            return SEG_E_IO;
        if (pos < win_pos || pos + KP_BATCH_HEADER_SIZE > win_pos + win_len) {
            uint64_t want = s->size - pos < WINDOW ? s->size - pos : WINDOW;
            ssize_t got = seg_pread_full(s->log->fd, buf, (size_t)want, (off_t)pos);
            if (got < KP_BATCH_HEADER_SIZE)
                return SEG_E_IO;
            win_pos = pos;
            win_len = (uint64_t)got;
        }
        const uint8_t *h = buf + (pos - win_pos);
        int64_t sz = kp_batch_size(h, KP_BATCH_HEADER_SIZE);
        if (sz < KP_BATCH_HEADER_SIZE || (uint64_t)sz > s->size - pos)
            return SEG_E_IO;
        /* A small control batch is handed whole (seg.h): its one record
         * says COMMIT or ABORT.  Rare: at most one more pread. */
        if ((h[KP_BATCH_OFF_Attributes + 1] & KP_ATTR_CONTROL) &&
            sz <= SEG_CONTROL_BATCH_MAX && pos + (uint64_t)sz > win_pos + win_len) {
            uint64_t want = s->size - pos < WINDOW ? s->size - pos : WINDOW;
            ssize_t got = seg_pread_full(s->log->fd, buf, (size_t)want, (off_t)pos);
            if (got < sz)
                return SEG_E_IO;
            win_pos = pos;
            win_len = (uint64_t)got;
            h = buf;
        }
        int rc = fn(h, arg);
        if (rc)
            return rc;
        pos += (uint64_t)sz;
    }
    return 0;
}

int seg_scan_headers(seg_log *log, int64_t from, seg_header_fn fn, void *arg)
{
    if (from < log->log_start)
        from = log->log_start;
    uint8_t *buf = malloc(WINDOW);
    if (!buf)
        return SEG_E_IO;
    int rc = 0;
    for (int i = 0; i < log->n && rc == 0; i++) {
        seg_segment *s = log->segs[i];
        if (s->next <= from || s->size == 0)
            continue;
        uint64_t pos = 0;
        if (from > s->base) {
            uint32_t size;
            rc = seg_find_batch(s, from, &pos, &size);
            if (rc)
                break;
        }
        rc = scan_segment(s, pos, buf, fn, arg);
    }
    free(buf);
    return rc;
}
