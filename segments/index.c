/*
 * segments/index.c — the two sparse indexes of a segment.
 *
 * What: fixed-size big-endian entries in a file mapped MAP_SHARED and
 * read-only, so the page cache (not our heap) holds them and a lookup is a
 * binary search in memory.  One entry of each kind is owed per
 * index.interval.bytes of log appended (rule in segment.c,
 * seg_segment_index_batch).
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
 * Where entries live while a segment is written:
 *
 *     entry  0            spilled               n
 *            +------------+---------------------+
 *            | in the file (pwrite, seen       | tail: heap buffer of
 *            | through the read-only mapping) | SEG_IDX_TAIL bytes
 *            +------------+---------------------+
 *
 *   New entries go to the tail; a full tail is written to the file with
 *   one pwrite (seg_idx_spill), and trim spills what is left.  Nothing is
 *   ever stored through the mapping: a store into a fresh page of a
 *   MAP_SHARED file is a page fault that zero-fills the pages around it
 *   and starts a journal handle, and those faults cost appends about a
 *   fifth of their throughput (bench/seg_bench, 16 KiB batches: 0.78 of
 *   write() with stores, 0.99 with no index at all); a store into a hole
 *   on a full filesystem is SIGBUS, where pwrite says ENOSPC.  Readers
 *   (owner thread) find entries [spilled, n) in the tail (idx_entry).
 *   The tail is malloc'ed by the first entry added since open or the last
 *   trim and freed by trim, so only segments being written hold one.
 *
 *   The tail's entries are not in the file until spilled, so the file of
 *   the *active* segment can lag its log.  That is safe because recovery
 *   always rescans the active segment (log.c, seg_open: only segments
 *   wholly below the recovery point are trusted), and a segment is spilled
 *   on roll before the next segment is published to seg_flush (log.c,
 *   roll_now), so a flush that makes a sealed segment trusted finds its
 *   entries in the page cache.
 *
 * Invariants (checked on open by seg_index_check, else rebuilt):
 *   I1. rel and pos strictly increase; ts strictly increases (an entry
 *       whose ts equals the previous one replaces that entry's rel).
 *   I2. No entry at position 0 (so rel > 0): an all-zero entry can only be
 *       preallocation slack, which is how a crash before trim shows up.
 *   I3. pos < .log size, and the batch at pos has BaseOffset base+rel.
 *   I4. Entries [0, spilled) of the file are valid; after them the file
 *       holds zeros, except that slot `spilled` may hold an older value of
 *       that entry (seg_tidx_set_last took a spilled entry back into the
 *       tail to replace it: the older value is a weaker but true bound).
 *       So the file alone is always a valid index of a prefix of the log.
 *
 * States of a file: active (length = segment.index.bytes, preallocated,
 * seg_idx_reserve) → trimmed (length = n entries, everything spilled,
 * seg_idx_trim, on roll and close) → sealed (trimmed, and the fd closed:
 * seg_idx_seal, for every segment but the active one).  Truncation can make
 * a trimmed or sealed one active again.
 *
 *   I5. A sealed index keeps its mapping but no descriptor: lookups need
 *       only the mapping, and a partition's closed segments would
 *       otherwise hold two fds each (thousands of partitions ran out of
 *       them).  x->file or x->path is set, never both; whatever must
 *       write the file again (reserve, drop, spill, trim) reopens it by
 *       path first (idx_fd), and seg_flush syncs a sealed one by path.
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

/* The index's fd, reopened by path when it is sealed (I5); -1 with errno
 * when that fails (EMFILE: the process is out of descriptors). */
static int idx_fd(seg_idx *x)
{
    if (x->file)
        return x->file->fd;
    int fd = open(x->path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (!(x->file = seg_file_new(fd))) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    free(x->path);
    x->path = NULL;
    return fd;
}

/* Entry i (< n), wherever it lives now. */
static const uint8_t *idx_entry(const seg_idx *x, uint32_t i)
{
    if (i >= x->spilled)
        return x->tail + (size_t)(i - x->spilled) * x->entry;
    return x->map + (size_t)i * x->entry;
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
        x->map = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (x->map == MAP_FAILED) {
            x->map = NULL;
            seg_idx_close(x);
            return SEG_E_IO;
        }
        x->map_len = len;
    }
    /* A fresh open trusts nothing: the caller validates and sets n. */
    x->n = x->spilled = 0;
    return 0;
}

void seg_idx_close(seg_idx *x)
{
    if (x->map)
        munmap(x->map, x->map_len);
    if (x->file)
        seg_file_unref(x->file);
    free(x->path);
    free(x->tail);
    memset(x, 0, sizeof *x);
}

int seg_idx_reserve(seg_idx *x, uint32_t entries)
{
    if (entries < x->n)
        entries = x->n;
    size_t len = (size_t)entries * x->entry;
    if (len == 0)
        len = x->entry;
    int fd = idx_fd(x);
    if (fd < 0 || ftruncate(fd, (off_t)len) < 0)
        return SEG_E_IO;
    if (len > x->map_len) {
        /* Linux could mremap; munmap+mmap keeps this portable and it only
         * happens on activation or a rebuild that outgrows the default. */
        uint8_t *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
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

/* Makes file bytes [from, to) read as zero without storing through the
 * mapping: punching a hole frees the blocks too, and costs nothing per
 * page, where writing zeros would fault in and write every page (after a
 * crash an active index is preallocated to segment.index.bytes: ~25 MB
 * per partition at recovery, minutes for a thousand partitions). */
static int zero_range(seg_idx *x, size_t from, size_t to)
{
    size_t flen = (size_t)x->cap * x->entry;
    if (to > flen)
        to = flen;
    if (to <= from)
        return 0;
    int rc, fd = idx_fd(x);
    if (fd < 0)
        return SEG_E_IO;
    do rc = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      (off_t)from, (off_t)(to - from));
    while (rc < 0 && errno == EINTR);
    if (rc == 0)
        return 0;
    static const uint8_t zeros[4096];   /* no hole punching here */
    for (size_t at = from; at < to; at += sizeof zeros) {
        size_t n = to - at < sizeof zeros ? to - at : sizeof zeros;
        if (seg_pwrite_full(fd, zeros, n, (off_t)at) < 0)
            return SEG_E_IO;
    }
    return 0;
}

int seg_idx_clear(seg_idx *x)
{
    int rc = zero_range(x, 0, (size_t)x->cap * x->entry);
    x->n = x->spilled = 0;
    return rc;
}

int seg_idx_drop(seg_idx *x, uint32_t keep)
{
    if (keep >= x->n)
        return 0;
    if (keep <= x->spilled) {
        /* Slot `spilled` may hold an older copy of an entry (I4): it goes
         * too, even when that entry was still in the tail. */
        if (zero_range(x, (size_t)keep * x->entry,
                       ((size_t)x->spilled + 1) * x->entry))
            return SEG_E_IO;
        x->spilled = keep;
    }
    x->n = keep;
    return 0;
}

int seg_idx_spill(seg_idx *x)
{
    if (x->n == x->spilled)
        return 0;
    int fd = idx_fd(x);
    if (fd < 0 || seg_pwrite_full(fd, x->tail,
                        (size_t)(x->n - x->spilled) * x->entry,
                        (off_t)((size_t)x->spilled * x->entry)) < 0)
        return SEG_E_IO;        /* the tail keeps them: a retry may work */
    x->spilled = x->n;
    return 0;
}

int seg_idx_trim(seg_idx *x)
{
    if (seg_idx_spill(x))
        return SEG_E_IO;        /* readers still find them in the tail */
    free(x->tail);
    x->tail = NULL;
    if (!x->file && x->cap == x->n)
        return 0;               /* sealed, so trimmed already */
    /* The mapping stays as long as it was; we never touch past n. */
    int fd = idx_fd(x);
    if (fd < 0 || ftruncate(fd, (off_t)((size_t)x->n * x->entry)) < 0)
        return SEG_E_IO;
    x->cap = x->n;
    return 0;
}

int seg_idx_seal(seg_idx *x, const char *path)
{
    if (seg_idx_trim(x))
        return SEG_E_IO;        /* keeps its fd: a later trim may work */
    char *p = strdup(path);
    if (!p)
        return SEG_E_NOMEM;
    free(x->path);
    x->path = p;
    if (x->file)
        seg_file_unref(x->file);    /* a flush holding it keeps the fd */
    x->file = NULL;
    return 0;
}

/* Room for one more entry at n, in the tail.  Cost: nothing, except one
 * pwrite per SEG_IDX_TAIL bytes of entries (and a malloc when a segment
 * gets its first entry since it was trimmed or opened). */
static uint8_t *idx_push(seg_idx *x)
{
    if (x->n >= x->cap && seg_idx_reserve(x, x->cap * 2 + 1))
        return NULL;        /* the file, and so the mapping, covers n */
    if ((size_t)(x->n - x->spilled + 1) * x->entry > SEG_IDX_TAIL &&
        seg_idx_spill(x))
        return NULL;
    if (!x->tail && !(x->tail = malloc(SEG_IDX_TAIL)))
        return NULL;
    return x->tail + (size_t)(x->n++ - x->spilled) * x->entry;
}

void seg_oidx_get(const seg_idx *x, uint32_t i, int32_t *rel, int32_t *pos)
{
    const uint8_t *p = idx_entry(x, i);
    *rel = seg_be32(p);
    *pos = seg_be32(p + 4);
}

int seg_oidx_add(seg_idx *x, int32_t rel, int32_t pos)
{
    uint8_t *p = idx_push(x);
    if (!p)
        return SEG_E_IO;
    put32(p, (uint32_t)rel);
    put32(p + 4, (uint32_t)pos);
    return 0;
}

void seg_tidx_get(const seg_idx *x, uint32_t i, int64_t *ts, int32_t *rel)
{
    const uint8_t *p = idx_entry(x, i);
    *ts = seg_be64(p);
    *rel = seg_be32(p + 8);
}

static void tidx_store(uint8_t *p, int64_t ts, int32_t rel)
{
    put32(p, (uint32_t)((uint64_t)ts >> 32));
    put32(p + 4, (uint32_t)ts);
    put32(p + 8, (uint32_t)rel);
}

int seg_tidx_add(seg_idx *x, int64_t ts, int32_t rel)
{
    uint8_t *p = idx_push(x);
    if (!p)
        return SEG_E_IO;
    tidx_store(p, ts, rel);
    return 0;
}

int seg_tidx_set_last(seg_idx *x, int64_t ts, int32_t rel)
{
    if (x->spilled == x->n) {
        /* Spilled already: take it back into the tail rather than pwrite
         * 12 bytes for every entry while timestamps stand still.  The
         * file keeps its older value until the next spill (I4). */
        if (!x->tail && !(x->tail = malloc(SEG_IDX_TAIL)))
            return SEG_E_IO;
        x->spilled = x->n - 1;
    }
    tidx_store(x->tail + (size_t)(x->n - 1 - x->spilled) * x->entry, ts, rel);
    return 0;
}

/* Binary searches: the largest i in [0, n) whose key satisfies `below`,
 * keys being monotonic (I1).  O(log n) touches of mapped pages. */
static int64_t oidx_floor(const seg_idx *x, int32_t v, bool by_pos)
{
    int64_t lo = 0, hi = (int64_t)x->n - 1, found = -1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int32_t r, p;
        seg_oidx_get(x, (uint32_t)mid, &r, &p);
        if ((by_pos ? p : r) <= v) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
}

int64_t seg_oidx_floor_rel(const seg_idx *x, int32_t rel)
{
    return oidx_floor(x, rel, false);
}

int64_t seg_oidx_floor_pos(const seg_idx *x, int32_t pos)
{
    return oidx_floor(x, pos, true);
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
        const uint8_t *p = x->map + (size_t)n * x->entry;   /* the file's */
        int64_t a, b;
        if (x->entry == SEG_OIDX_ENTRY) {
            int32_t rel = seg_be32(p), pos = seg_be32(p + 4);
            if (rel == 0 && pos == 0)
                break;
            if (pos <= 0 || (uint64_t)pos >= log_size)
                return -1;
            a = rel; b = pos;
        } else {
            int64_t ts = seg_be64(p);
            int32_t rel = seg_be32(p + 8);
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
    s->idx.n = s->idx.spilled = (uint32_t)no;
    s->tidx.n = s->tidx.spilled = (uint32_t)nt;
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
