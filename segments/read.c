/*
 * segments/read.c — answering fetches as file ranges, and time lookups.
 *
 * What seg_read promises (seg.h): a range of one segment that starts at
 * the batch holding the offset, ends on a batch boundary, is at most
 * max_bytes unless a single batch is larger (then exactly that batch), and
 * never reaches past s->size — so never into bytes an append has not
 * finished (log.c, L3).
 *
 * Cost of a read, whatever the log size:
 *   - binary search over segs[] (in memory),
 *   - binary search in the .index mapping,
 *   - a walk of batch headers by pread from the index entry found: at most
 *     index.interval.bytes of log plus one batch, i.e. interval/batch + 1
 *     small preads, to find the start; the same again from the index entry
 *     below start + max_bytes to find the end.
 * No allocation; the only state touched is a refcount.
 *
 * The start walk reads 27 header bytes (through LastOffsetDelta) rather
 * than 12 so it stops *at* the batch holding the offset instead of reading
 * one header past it; the end walk needs only the 12-byte log overhead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "segments/seg_int.h"

#define START_PEEK (SEG_HDR_LOD + 4)

static int walk_from(seg_segment *s, uint64_t p, int64_t offset,
                     uint64_t *pos, uint32_t *size, int64_t expect_base)
{
    bool first = true;
    while (p < s->size) {
        uint8_t h[START_PEEK];
        if (s->size - p < sizeof h ||
            seg_pread_full(s->log->fd, h, sizeof h, (off_t)p) != sizeof h)
            return SEG_E_IO;
        int64_t base = seg_be64(h);
        int64_t sz = kp_batch_size(h, sizeof h);
        if (sz < KP_BATCH_HEADER_SIZE || (uint64_t)sz > s->size - p)
            return SEG_E_IO;
        if (first && expect_base >= 0 && base != expect_base)
            return 1;               /* the index entry lies */
        first = false;
        if (base > offset || base + seg_be32(h + SEG_HDR_LOD) >= offset) {
            *pos = p;
            *size = (uint32_t)sz;
            return 0;
        }
        p += (uint64_t)sz;
    }
    *pos = s->size;
    *size = 0;
    return 0;
}

int seg_find_batch(seg_segment *s, int64_t offset, uint64_t *pos,
                   uint32_t *size)
{
    int64_t rel = offset - s->base;
    int64_t k = seg_oidx_floor_rel(&s->idx, rel > INT32_MAX ? INT32_MAX
                                                           : (int32_t)rel);
    if (k >= 0) {
        int32_t r, p;
        seg_oidx_get(&s->idx, (uint32_t)k, &r, &p);
        int rc = walk_from(s, (uint64_t)p, offset, pos, size, s->base + r);
        if (rc <= 0)
            return rc;
        /* A damaged entry slipped past the open-time check: fall back to
         * a walk from the start (correct, just not bounded). */
    }
    return walk_from(s, 0, offset, pos, size, -1);
}

/* Largest batch boundary in (start, limit], walking from the index entry
 * at or below limit; at least start + first. */
static int range_end(seg_segment *s, uint64_t start, uint32_t first,
                     uint64_t limit, uint64_t *end)
{
    uint64_t p = start;
    int64_t k = seg_oidx_floor_pos(&s->idx, (int32_t)limit);
    if (k >= 0) {
        int32_t r, ep;
        seg_oidx_get(&s->idx, (uint32_t)k, &r, &ep);
        if ((uint64_t)ep > p)
            p = (uint64_t)ep;
    }
    while (p < s->size) {
        uint8_t h[KP_BATCH_LOG_OVERHEAD];
        if (seg_pread_full(s->log->fd, h, sizeof h, (off_t)p) != sizeof h)
            return SEG_E_IO;
        int64_t sz = kp_batch_size(h, sizeof h);
        if (sz < KP_BATCH_HEADER_SIZE || (uint64_t)sz > s->size - p)
            return SEG_E_IO;
        if (p + (uint64_t)sz > limit)
            break;
        p += (uint64_t)sz;
    }
    *end = p > start ? p : start + first;
    return 0;
}

int seg_read(seg_log *log, int64_t offset, size_t max_bytes, seg_range *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    if (offset < log->log_start || offset > log->log_end)
        return KP_OFFSET_OUT_OF_RANGE;
    if (offset == log->log_end)
        return 0;
    /* Last segment with base <= offset (binary search over segs[]). */
    int lo = 0, hi = log->n - 1, i = 0;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (log->segs[mid]->base <= offset) { i = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    for (; i < log->n; i++) {
        seg_segment *s = log->segs[i];
        uint64_t start, end;
        uint32_t first;
        if (offset < s->next) {
            int rc = seg_find_batch(s, offset, &start, &first);
            if (rc)
                return rc;
        } else {
            start = s->size;    /* offset in a gap after this segment */
        }
        if (start >= s->size) {
            if (i + 1 < log->n)
                offset = log->segs[i + 1]->base;
            continue;
        }
        if (s->size - start <= max_bytes) {
            end = s->size;
        } else {
            int rc = range_end(s, start, first, start + max_bytes, &end);
            if (rc)
                return rc;
        }
        seg_file_ref(s->log);
        out->file = s->log;
        out->fd = s->log->fd;
        out->pos = (off_t)start;
        out->len = (size_t)(end - start);
        return 0;
    }
    return 0;
}

void seg_range_retain(seg_range *r)
{
    if (r->file)
        seg_file_ref(r->file);
}

void seg_range_release(seg_range *r)
{
    if (r->file)
        seg_file_unref(r->file);
    r->file = NULL;
    r->fd = -1;
    r->len = 0;
}

/* ---- time lookup ------------------------------------------------------------ */
/* First record in s with Timestamp >= ts and Offset >= min_off, or -1.
 * Walks headers from the time index's bound (bounded like a read), then
 * looks inside the first batch whose MaxTimestamp reaches ts. */
static int segment_time(seg_segment *s, int64_t ts, int64_t min_off,
                        int64_t *found)
{
    uint64_t p = 0;
    int64_t k = seg_tidx_below(&s->tidx, ts);
    if (k >= 0) {
        int64_t t;
        int32_t rel, r, pos;
        seg_tidx_get(&s->tidx, (uint32_t)k, &t, &rel);
        int64_t j = seg_oidx_floor_rel(&s->idx, rel);
        if (j >= 0) {
            seg_oidx_get(&s->idx, (uint32_t)j, &r, &pos);
            p = (uint64_t)pos;
        }
    }
    *found = -1;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int rc = 0;
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    while (p < s->size && *found < 0) {
        uint8_t h[SEG_HDR_PEEK];
        if (s->size - p < sizeof h ||
            seg_pread_full(s->log->fd, h, sizeof h, (off_t)p) != sizeof h) {
            rc = SEG_E_IO;
            break;
        }
        int64_t sz = kp_batch_size(h, sizeof h);
        if (sz < KP_BATCH_HEADER_SIZE || (uint64_t)sz > s->size - p) {
            rc = SEG_E_IO;
            break;
        }
        int64_t last = seg_be64(h) + seg_be32(h + SEG_HDR_LOD);
        if (seg_be64(h + SEG_HDR_MAXTS) >= ts && last >= min_off) {
            if ((size_t)sz > cap) {
                uint8_t *q = realloc(buf, (size_t)sz);
                if (!q) { rc = SEG_E_IO; break; }
                buf = q;
                cap = (size_t)sz;
            }
            if (seg_pread_full(s->log->fd, buf, (size_t)sz, (off_t)p) != sz ||
                kp_rec_iter_start(&it, buf, (size_t)sz) != 0) {
                rc = SEG_E_IO;
                break;
            }
            kp_record rec;
            int more;
            while ((more = kp_rec_iter_next(&it, &rec)) == 1)
                if (rec.Timestamp >= ts && rec.Offset >= min_off) {
                    *found = rec.Offset;
                    break;
                }
            if (more < 0) {
                rc = SEG_E_IO;
                break;
            }
        }
        p += (uint64_t)sz;
    }
    kp_rec_iter_free(&it);
    free(buf);
    return rc;
}

int seg_offset_for_time(seg_log *log, int64_t ts, int64_t *offset)
{
    for (int i = 0; i < log->n; i++) {
        seg_segment *s = log->segs[i];
        if (s->max_ts < ts || s->next <= log->log_start)
            continue;           /* nothing that new in it */
        int64_t found;
        int rc = segment_time(s, ts, log->log_start, &found);
        if (rc)
            return rc;
        if (found >= 0) {
            *offset = found;
            return 0;
        }
    }
    *offset = log->log_end;
    return 0;
}
