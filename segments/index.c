/*
 * segments/index.c — the two sparse indexes of a segment.
 *
 * What: fixed-size big-endian entries in a file mapped MAP_SHARED, so the
 * page cache (not our heap) holds them and a lookup is a binary search in
 * memory.  One entry of each kind is owed per index.interval.bytes of log
 * appended (rule in segment.c, seg_segment_index_batch).
 *
 *   .index — offset index, 8 bytes per entry:
 *
 *     0        4        8
 *     +--------+--------+
 *     | rel    | pos    |   rel: BaseOffset of a batch − segment base (INT32)
 *     +--------+--------+   pos: its byte position in the .log      (INT32)
 *
 *   .timeindex — time index, 12 bytes per entry:
 *
 *     0                 8        12
 *     +-----------------+--------+
 *     | ts              | rel    |   ts:  largest MaxTimestamp of every
 *     +-----------------+--------+        batch *before* offset base+rel
 *                                    rel: an offset index entry's rel
 *
 *   So "every record before base+rel has a timestamp <= ts": a time lookup
 *   may start at the last entry with ts < target.
 *
 * Invariants (checked on open by seg_index_check, else rebuilt):
 *   I1. rel and pos strictly increase; ts strictly increases (an entry
 *       whose ts equals the previous one replaces that entry's rel).
 *   I2. No entry at position 0 (so rel > 0): an all-zero entry can only be
 *       preallocation slack, which is how a crash before trim shows up.
 *   I3. pos < .log size, and the batch at pos has BaseOffset base+rel.
 *   I4. Entries [0, n) are valid; every byte of the mapping after them
 *       that lies inside the file is zero.
 *
 * States of a file: active (length = segment.index.bytes, preallocated,
 * seg_idx_reserve) → trimmed (length = n entries, seg_idx_trim, on roll
 * and close).  Truncation can make a trimmed one active again.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segments/seg_int.h"

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);  p[3] = (uint8_t)v;
}

int seg_idx_open(seg_idx *x, const char *path, size_t entry, bool create)
{
    memset(x, 0, sizeof *x);
    x->entry = entry;
    int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
    if (fd < 0)
        return SEG_E_IO;
    struct stat st;
    if (fstat(fd, &st) < 0 || !(x->file = seg_file_new(fd))) {
        close(fd);
        return SEG_E_IO;
    }
    size_t len = (size_t)st.st_size;
    x->cap = (uint32_t)(len / entry);
    if (len > 0) {
        x->map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (x->map == MAP_FAILED) {
            x->map = NULL;
            seg_idx_close(x);
            return SEG_E_IO;
        }
        x->map_len = len;
    }
    /* A fresh open trusts nothing: the caller validates and sets n. */
    x->n = 0;
    return 0;
}

void seg_idx_close(seg_idx *x)
{
    if (x->map)
        munmap(x->map, x->map_len);
    if (x->file)
        seg_file_unref(x->file);
    memset(x, 0, sizeof *x);
}

int seg_idx_reserve(seg_idx *x, uint32_t entries)
{
    if (entries < x->n)
        entries = x->n;
    size_t len = (size_t)entries * x->entry;
    if (len == 0)
        len = x->entry;
    if (ftruncate(x->file->fd, (off_t)len) < 0)
        return SEG_E_IO;
    if (len > x->map_len) {
        /* Linux could mremap; munmap+mmap keeps this portable and it only
         * happens on activation or a rebuild that outgrows the default. */
        uint8_t *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
                          x->file->fd, 0);
        if (m == MAP_FAILED)
            return SEG_E_IO;
        if (x->map)
            munmap(x->map, x->map_len);
        x->map = m;
        x->map_len = len;
    }
    x->cap = (uint32_t)(len / x->entry);
    /* Slack past n must read as zero (I4): a shrink-then-grow brings back
     * zeros from the file, and stale entries were zeroed when dropped. */
    return 0;
}

int seg_idx_back(seg_idx *x, uint32_t i)
{
    size_t end = ((size_t)i + 1) * x->entry;
    if (end <= x->backed)
        return 0;
    size_t from = x->backed & ~(size_t)4095;
    size_t to = (end + 4095) & ~(size_t)4095;
    if (to > x->map_len)
        to = x->map_len;
    if (to <= from)
        return 0;
    int rc;
    do rc = fallocate(x->file->fd, FALLOC_FL_KEEP_SIZE, (off_t)from, (off_t)(to - from));
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EOPNOTSUPP)
        return SEG_E_IO;        /* ENOSPC: the caller latches the error state */
    x->backed = to;
    return 0;
}

int seg_idx_clear(seg_idx *x)
{
    size_t len = (size_t)x->cap * x->entry;
    if (!len)
        return 0;
    /* Punching the whole range back to a hole makes it read as zeros (I4)
     * at once.  A memset instead faults in and writes every page: after a
     * crash an active segment's index is preallocated to
     * segment.index.bytes, so recovery wrote ~25 MB per partition and a
     * broker with a thousand partitions took minutes to come back. */
    int rc;
    do rc = fallocate(x->file->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, (off_t)len);
    while (rc < 0 && errno == EINTR);
    if (rc < 0)
        memset(x->map, 0, len);     /* a filesystem without hole punching */
    else
        x->backed = 0;              /* the blocks went with the hole */
    return 0;
}

int seg_idx_trim(seg_idx *x)
{
    /* The mapping stays as long as it was; we never touch past n. */
    if (ftruncate(x->file->fd, (off_t)((size_t)x->n * x->entry)) < 0)
        return SEG_E_IO;
    x->cap = x->n;
    if (x->backed > (size_t)x->n * x->entry)      /* the tail went back to a hole */
        x->backed = (size_t)x->n * x->entry;
    return 0;
}

void seg_oidx_get(const seg_idx *x, uint32_t i, int32_t *rel, int32_t *pos)
{
    const uint8_t *p = x->map + (size_t)i * SEG_OIDX_ENTRY;
    *rel = seg_be32(p);
    *pos = seg_be32(p + 4);
}

void seg_oidx_put(seg_idx *x, uint32_t i, int32_t rel, int32_t pos)
{
    uint8_t *p = x->map + (size_t)i * SEG_OIDX_ENTRY;
    put32(p, (uint32_t)rel);
    put32(p + 4, (uint32_t)pos);
}

void seg_tidx_get(const seg_idx *x, uint32_t i, int64_t *ts, int32_t *rel)
{
    const uint8_t *p = x->map + (size_t)i * SEG_TIDX_ENTRY;
    *ts = seg_be64(p);
    *rel = seg_be32(p + 8);
}

void seg_tidx_put(seg_idx *x, uint32_t i, int64_t ts, int32_t rel)
{
    uint8_t *p = x->map + (size_t)i * SEG_TIDX_ENTRY;
    put32(p, (uint32_t)((uint64_t)ts >> 32));
    put32(p + 4, (uint32_t)ts);
    put32(p + 8, (uint32_t)rel);
}

/* Binary searches: the largest i in [0, n) whose key satisfies `below`,
 * keys being monotonic (I1).  O(log n) touches of mapped pages. */
int64_t seg_oidx_floor_rel(const seg_idx *x, int32_t rel)
{
    int64_t lo = 0, hi = (int64_t)x->n - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int32_t r, p;
        seg_oidx_get(x, (uint32_t)mid, &r, &p);
        if (r <= rel) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
}

int64_t seg_oidx_floor_pos(const seg_idx *x, int32_t pos)
{
    int64_t lo = 0, hi = (int64_t)x->n - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int32_t r, p;
        seg_oidx_get(x, (uint32_t)mid, &r, &p);
        if (p <= pos) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
}

int64_t seg_tidx_below(const seg_idx *x, int64_t ts)
{
    int64_t lo = 0, hi = (int64_t)x->n - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int64_t t;
        int32_t r;
        seg_tidx_get(x, (uint32_t)mid, &t, &r);
        if (t < ts) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
}

/* How many leading entries obey I1-I3 given the log size; the rest must be
 * all zero (slack) or the index is damaged (-1). */
static int64_t valid_prefix(const seg_idx *x, uint64_t log_size)
{
    uint32_t total = (uint32_t)(x->map_len / x->entry);
    uint32_t n = 0;
    int64_t prev_a = INT64_MIN, prev_b = INT64_MIN;
    for (; n < total; n++) {
        int64_t a, b;
        if (x->entry == SEG_OIDX_ENTRY) {
            int32_t rel, pos;
            seg_oidx_get(x, n, &rel, &pos);
            if (rel == 0 && pos == 0)
                break;
            if (pos <= 0 || (uint64_t)pos >= log_size)
                return -1;
            a = rel; b = pos;
        } else {
            int64_t ts;
            int32_t rel;
            seg_tidx_get(x, n, &ts, &rel);
            if (ts == 0 && rel == 0)
                break;
            a = ts; b = rel;
        }
        if (b <= 0 || a <= prev_a || b <= prev_b)
            return -1;
        prev_a = a; prev_b = b;
    }
    for (size_t i = (size_t)n * x->entry; i < x->map_len; i++)
        if (x->map[i])
            return -1;
    return n;
}

int seg_index_check(seg_segment *s)
{
    if (s->idx.map_len % SEG_OIDX_ENTRY || s->tidx.map_len % SEG_TIDX_ENTRY)
        return 1;
    int64_t no = valid_prefix(&s->idx, s->size);
    int64_t nt = valid_prefix(&s->tidx, s->size);
    if (no < 0 || nt < 0)
        return 1;
    s->idx.n = (uint32_t)no;
    s->tidx.n = (uint32_t)nt;
    if (nt > 0) {
        /* Every time entry names an offset entry, the last one included. */
        int64_t ts;
        int32_t trel, orel, opos;
        seg_tidx_get(&s->tidx, (uint32_t)nt - 1, &ts, &trel);
        int64_t k = seg_oidx_floor_rel(&s->idx, trel);
        if (k < 0)
            return 1;
        seg_oidx_get(&s->idx, (uint32_t)k, &orel, &opos);
        if (orel != trel)
            return 1;
    }
    if (no > 0) {
        /* I3 for the last entry: it points at the batch it names.  The
         * earlier ones are then bounded by it; a lookup through a wrong one
         * fails its own header check and the read returns SEG_E_IO. */
        int32_t rel, pos;
        uint8_t h[12];
        seg_oidx_get(&s->idx, (uint32_t)no - 1, &rel, &pos);
        if (seg_pread_full(s->log->fd, h, 12, pos) != 12 ||
            seg_be64(h) != s->base + rel)
            return 1;
    }
    return 0;
}
