/*
 * segments/recover.c — scanning a segment's .log: crash recovery (every
 * batch CRC-checked) and index rebuild (headers only), plus the bounded
 * tail walk that lets a trusted segment open without reading it all.
 *
 * What recovery promises: after seg_scan, [0, valid_bytes) of the file is
 * a run of batches each of which
 *   R1. has a length that fits in the file and is at least a v2 header,
 *   R2. has Magic 2 and a correct CRC-32C (verify mode, via
 *       kp_batch_check_stored),
 *   R3. has BaseOffset >= the end of the batch before it (>= min_base for
 *       the first): gaps are allowed (compaction), going backwards is not,
 *   R4. keeps relative offsets and positions inside INT32 (index fields).
 * The first batch breaking one of them ends the segment; the caller cuts
 * the file there and drops every later segment.  A torn tail fails R1 or
 * R2, so a crash at any byte never leaves a torn batch readable.
 *
 * Reads go through one buffer in big sequential chunks; a batch larger
 * than the buffer grows it (bounded by the file size, checked first).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segments/seg_int.h"

#define SCAN_CHUNK (1u << 20)

typedef struct scan_buf {
    int fd;
    uint8_t *p;
    size_t cap;
    uint64_t at;           /* file position of p[0] */
    size_t len;            /* bytes valid in p */
} scan_buf;

/* Makes [pos, pos+n) available; returns a pointer or NULL (short / error,
 * *err set on I/O errors). */
static const uint8_t *sb_get(scan_buf *b, uint64_t pos, size_t n,
                             uint64_t fsize, int *err)
{
    if (pos >= b->at && pos + n <= b->at + b->len)
        return b->p + (pos - b->at);
    if (n > b->cap) {
        uint8_t *q = realloc(b->p, n);
        if (!q) { *err = SEG_E_IO; return NULL; }
        b->p = q;
        b->cap = n;
    }
    size_t want = b->cap;
    if (want > fsize - pos)
        want = (size_t)(fsize - pos);
    ssize_t r = seg_pread_full(b->fd, b->p, want, (off_t)pos);
    if (r < 0) { *err = SEG_E_IO; return NULL; }
    b->at = pos;
    b->len = (size_t)r;
    return (size_t)r >= n ? b->p : NULL;
}

int seg_scan(seg_segment *s, const seg_config *c, bool verify,
             int64_t min_base, seg_scan_result *r)
{
    struct stat st;
    if (fstat(s->log->fd, &st) < 0)
        return SEG_E_IO;
    uint64_t fsize = (uint64_t)st.st_size;

    /* Forget the old indexes entirely, slack included (I4 in index.c). */
    if (seg_idx_clear(&s->idx) || seg_idx_clear(&s->tidx))
        return SEG_E_IO;
    s->since_index = 0;
    s->max_ts = -1;

    scan_buf b = { .fd = s->log->fd, .cap = SCAN_CHUNK };
    if (!(b.p = malloc(b.cap)))
        return SEG_E_IO;
    int err = 0;
    uint64_t pos = 0;
    int64_t expect = min_base > s->base ? min_base : s->base;
    int64_t next = s->base;
    while (pos < fsize) {
        const uint8_t *p = sb_get(&b, pos, KP_BATCH_HEADER_SIZE, fsize, &err);
        if (!p)
            break;                                        /* R1 (or I/O) */
        int64_t size = kp_batch_size(p, KP_BATCH_HEADER_SIZE);
        if (size < KP_BATCH_HEADER_SIZE || (uint64_t)size > fsize - pos ||
            pos + (uint64_t)size > INT32_MAX)
            break;                                        /* R1, R4 */
        kp_batch h;
        if (verify) {
            if (!(p = sb_get(&b, pos, (size_t)size, fsize, &err)) ||
                kp_batch_check_stored(p, (size_t)size, &h) != size)
                break;                                    /* R2 */
        } else if (kp_batch_header(p, KP_BATCH_HEADER_SIZE, &h) != 0 ||
                   h.Magic != 2) {
            break;
        }
        if (h.BaseOffset < expect || h.LastOffsetDelta < 0 ||
            h.BaseOffset - s->base + h.LastOffsetDelta > INT32_MAX)
            break;                                        /* R3, R4 */
        if (seg_segment_index_batch(s, c, (int32_t)(h.BaseOffset - s->base),
                                    pos, (uint32_t)size, h.MaxTimestamp)) {
            err = SEG_E_IO;
            break;
        }
        expect = next = h.BaseOffset + h.LastOffsetDelta + 1;
        pos += (uint64_t)size;
    }
    free(b.p);
    if (err)
        return err;
    s->size = pos;
    s->next = next;
    r->valid_bytes = pos;
    r->next = next;
    r->clean = pos == fsize;
    return 0;
}

int seg_segment_tail(seg_segment *s, const seg_config *c)
{
    /* Start where both indexes still know enough: the time index's last
     * entry bounds every timestamp before it, the offset index's last
     * entry is where the next entry is counted from.  Normally they name
     * the same batch, so this walks at most index.interval.bytes. */
    uint64_t start = 0, last_entry = 0;
    int64_t max_ts = -1;
    int32_t rel, pos;
    if (s->idx.n) {
        seg_oidx_get(&s->idx, s->idx.n - 1, &rel, &pos);
        last_entry = (uint64_t)pos;
    }
    if (s->tidx.n) {
        int32_t trel;
        seg_tidx_get(&s->tidx, s->tidx.n - 1, &max_ts, &trel);
        int64_t k = seg_oidx_floor_rel(&s->idx, trel);
        if (k >= 0) {
            seg_oidx_get(&s->idx, (uint32_t)k, &rel, &pos);
            start = (uint64_t)pos;
        } else {
            max_ts = -1;
        }
    }
    int64_t next = s->base, expect = s->base;
    uint64_t p = start;
    while (p < s->size) {
        uint8_t h[SEG_HDR_PEEK];
        if (s->size - p < KP_BATCH_HEADER_SIZE)
            return 1;
        ssize_t n = seg_pread_full(s->log->fd, h, sizeof h, (off_t)p);
        if (n < 0)
            return SEG_E_IO;
        if ((size_t)n < sizeof h)
            return 1;
        int64_t size = kp_batch_size(h, sizeof h);
        int64_t base = seg_be64(h);
        int32_t lod = seg_be32(h + KP_BATCH_OFF_LastOffsetDelta);
        if (size < KP_BATCH_HEADER_SIZE || (uint64_t)size > s->size - p ||
            h[KP_BATCH_OFF_Magic] != KP_BATCH_MAGIC || base < expect || lod < 0)
            return 1;
        if (p > last_entry && p - last_entry >= c->index_interval_bytes)
            return 1;           /* an entry the rule owed is missing */
        int64_t ts = seg_be64(h + KP_BATCH_OFF_MaxTimestamp);
        if (ts > max_ts)
            max_ts = ts;
        expect = next = base + lod + 1;
        p += (uint64_t)size;
    }
    s->next = next;
    s->max_ts = max_ts;
    s->since_index = (uint32_t)(s->size - last_entry);
    return 0;
}
