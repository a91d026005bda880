/*
 * segments/read.c — answering fetches as file ranges, and time lookups.
 *
 * What seg_read promises (seg.h): a range of one segment that starts at
 * the batch holding the offset, ends on a batch boundary, is at most
 * max_bytes unless a single batch is larger (then exactly that batch), and
 * never reaches past s->size — so never into bytes an append has not
 * finished (log.c, L3).
 *
 * Invariants of a range (R1-R3):
 *   R1. No batch in it holds an offset >= max_offset: a follower's
 *       appends above the high watermark are never served to consumers.
 *   R2. `next` is where the following read starts, found by the walk
 *       that found the range's end (or s->next when it ends the segment),
 *       so a caller never reads a batch header to go on.
 *   R3. seg_end is set exactly when end == s->size.
 *
 * The max_offset bound costs nothing while the high watermark is at or
 * past the end of the segment read (always, standalone: HW = log end);
 * otherwise it is one more bounded lookup, of the batch holding
 * max_offset, whose position becomes the range's limit.
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
 * A reader that goes on where the last one stopped (a follower's or a
 * consumer's fetch at the log tail, where batches of small records are
 * many per index interval) walks from the nearest batch start it knows:
 *   H1. s->hint[] holds batch starts of s's current bytes only: the last
 *       batch appended (seg_segment_index_batch) and the last found by a
 *       walk; a cut (seg_segment_cut) drops those at or past it.  A walk
 *       from a hint checks the batch there has the base it says (as an
 *       index entry's), else the index is used.  Owner thread only (seg.h).
 *
 * The start walk reads 27 header bytes (through LastOffsetDelta) rather
 * than 12 so it stops *at* the batch holding the offset instead of reading
 * one header past it; the end walk needs only the 12-byte log overhead.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segments/seg_int.h"

#define START_PEEK (KP_BATCH_OFF_LastOffsetDelta + 4)

/* A batch found by a walk: where it is and the offsets it holds. */
typedef struct batch_at {
    uint64_t pos;                /* s->size: none at or after the offset */
    uint32_t size;
    int64_t  base, last;
} batch_at;

static int walk_from(seg_segment *s, uint64_t p, int64_t offset, batch_at *b,
                     int64_t expect_base)
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
        int64_t last = base + seg_be32(h + KP_BATCH_OFF_LastOffsetDelta);
        if (base > offset || last >= offset) {
            *b = (batch_at){ p, (uint32_t)sz, base, last };
            s->hint[1] = (struct seg_hint){ true, p, base };          /* H1 */
            return 0;
        }
        p += (uint64_t)sz;
    }
    *b = (batch_at){ s->size, 0, s->next, s->next - 1 };
    return 0;
}

static int find_batch(seg_segment *s, int64_t offset, batch_at *b)
{
    int64_t rel = offset - s->base;
    /* Below the segment (a log start under the first segment, log.c L7):
     * no entry, the walk starts at its first batch. */
    int64_t k = rel < 0 ? -1 : seg_oidx_floor_rel(&s->idx, rel > INT32_MAX ? INT32_MAX
                                                                       : (int32_t)rel);
    int32_t r = 0, p = 0;
    if (k >= 0)
        seg_oidx_get(&s->idx, (uint32_t)k, &r, &p);
    /* H1: the known batch start nearest below offset, if past the index's. */
    const struct seg_hint *h = NULL;
    for (int i = 0; i < 2; i++)
        if (s->hint[i].set && s->hint[i].base <= offset && s->hint[i].pos < s->size &&
            (k < 0 || s->hint[i].pos > (uint64_t)p) && (!h || s->hint[i].pos > h->pos))
            h = &s->hint[i];
    if (h) {
        int rc = walk_from(s, h->pos, offset, b, h->base);
        if (rc <= 0)
            return rc;
    }
    if (k >= 0) {
        int rc = walk_from(s, (uint64_t)p, offset, b, s->base + r);
        if (rc <= 0)
            return rc;
        /* A damaged entry slipped past the open-time check: fall back to
         * a walk from the start (correct, just not bounded). */
    }
    return walk_from(s, 0, offset, b, -1);
}

int seg_find_batch(seg_segment *s, int64_t offset, uint64_t *pos,
                   uint32_t *size)
{
    batch_at b;
    int rc = find_batch(s, offset, &b);
    if (rc == 0) {
        *pos = b.pos;
        *size = b.size;
    }
    return rc;
}

/* Largest batch boundary in (first->pos, limit], walking from the index
 * entry at or below limit (limit < s->size); at least the first batch.
 * *next: BaseOffset of the batch at *end, read by the walk anyway (the
 * 12-byte log overhead starts with it). */
static int range_end(seg_segment *s, const batch_at *first, uint64_t limit,
                     uint64_t *end, int64_t *next)
{
    uint64_t start = first->pos, p = start;
    int64_t k = seg_oidx_floor_pos(&s->idx, (int32_t)limit);
    if (k >= 0) {
        int32_t r, ep;
        seg_oidx_get(&s->idx, (uint32_t)k, &r, &ep);
        if ((uint64_t)ep > p)
            p = (uint64_t)ep;
    }
    *next = s->next;
    while (p < s->size) {
        uint8_t h[KP_BATCH_LOG_OVERHEAD];
        if (seg_pread_full(s->log->fd, h, sizeof h, (off_t)p) != sizeof h)
            return SEG_E_IO;
        int64_t sz = kp_batch_size(h, sizeof h);
        if (sz < KP_BATCH_HEADER_SIZE || (uint64_t)sz > s->size - p)
            return SEG_E_IO;
        if (p + (uint64_t)sz > limit) {
            *next = seg_be64(h);
            break;
        }
        p += (uint64_t)sz;
    }
    if (p > start) {
        *end = p;
    } else {
        *end = start + first->size;
        *next = first->last + 1;
    }
    return 0;
}

int seg_read(seg_log *log, int64_t offset, int64_t max_offset,
             size_t max_bytes, seg_range *out)
{
    memset(out, 0, sizeof *out);
    out->fd = -1;
    out->next = offset;
    if (offset < log->log_start || offset > log->log_end)
        return KP_OFFSET_OUT_OF_RANGE;
    if (offset == log->log_end || offset >= max_offset)
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
        if (s->base >= max_offset)
            return 0;
        batch_at first = { .pos = s->size };
        if (offset < s->next) {
            int rc = find_batch(s, offset, &first);
            if (rc)
                return rc;
        }
        if (first.pos >= s->size) {     /* offset in a gap after s */
            if (i + 1 < log->n)
                offset = log->segs[i + 1]->base;
            continue;
        }
        /* Where the range must stop: the segment end, or the batch that
         * reaches max_offset.  Standalone max_offset is the log end, so
         * the second lookup happens only once the HW lags (followers). */
        uint64_t stop = s->size;
        int64_t stop_next = s->next;
        if (max_offset < s->next) {
            if (first.last >= max_offset)
                return 0;
            batch_at hb;
            int rc = find_batch(s, max_offset, &hb);
            if (rc)
                return rc;
            stop = hb.pos;
            stop_next = hb.base;
        }
        uint64_t end;
        int64_t next;
        if (stop - first.pos <= max_bytes) {
            end = stop;
            next = stop_next;
        } else {
            int rc = range_end(s, &first, first.pos + max_bytes, &end, &next);
            if (rc)
                return rc;
        }
        seg_file_ref(s->log);
        out->file = s->log;
        out->fd = s->log->fd;
        out->pos = (off_t)first.pos;
        out->len = (size_t)(end - first.pos);
        out->next = next;
        out->seg_end = end == s->size;
        return 0;
    }
    return 0;
}

int seg_locate(seg_log *log, int64_t offset, int64_t *seg_base, int64_t *pos,
               uint64_t *file_ino)
{
    if (offset < log->log_start || offset >= log->log_end)
        return 1;
    int lo = 0, hi = log->n - 1, i = -1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (log->segs[mid]->base <= offset) { i = mid; lo = mid + 1; }
        else hi = mid - 1;
    }
    if (i < 0 || offset >= log->segs[i]->next)
        return 1;
    batch_at b;
    int rc = find_batch(log->segs[i], offset, &b);
    if (rc)
        return rc;
    struct stat st;
    if (b.pos >= log->segs[i]->size)
        return 1;
    if (fstat(log->segs[i]->log->fd, &st) != 0)
        return SEG_E_IO;
    *file_ino = (uint64_t)st.st_ino;
    *seg_base = log->segs[i]->base;
    *pos = (int64_t)b.pos;
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

size_t seg_range_copy(const seg_range *r, void *dst)
{
    /* What was read before an error or the end of a shrunk file is served,
     * as the zero-copy path would have sent it. */
    size_t got = 0;
    while (got < r->len) {
        ssize_t k = pread(r->fd, (uint8_t *)dst + got, r->len - got, r->pos + (off_t)got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return got;
}

/* ---- time lookup ------------------------------------------------------------ */
/* First record in s with Timestamp >= ts and Offset >= min_off, or -1.
 * Walks headers from the time index's bound (bounded like a read), then
 * looks inside the first batch whose MaxTimestamp reaches ts. */
static int segment_time(seg_segment *s, int64_t ts, int64_t min_off,
                        int64_t *found, int64_t *found_ts)
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
        int64_t last = seg_be64(h) + seg_be32(h + KP_BATCH_OFF_LastOffsetDelta);
        if (seg_be64(h + KP_BATCH_OFF_MaxTimestamp) >= ts && last >= min_off) {
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
                    *found_ts = rec.Timestamp;
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

int seg_offset_for_time(seg_log *log, int64_t ts, int64_t *offset,
                        int64_t *timestamp)
{
    int64_t dummy;
    if (!timestamp)
        timestamp = &dummy;
    *timestamp = -1;
    for (int i = 0; i < log->n; i++) {
        seg_segment *s = log->segs[i];
        if (s->max_ts < ts || s->next <= log->log_start)
            continue;           /* nothing that new in it */
        int64_t found;
        int rc = segment_time(s, ts, log->log_start, &found, timestamp);
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
