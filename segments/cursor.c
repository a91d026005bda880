/*
 * segments/cursor.c — reading a partition's records by directory, from any
 * thread: the record cursor (the SQL `messages` table) and seg_dir_stat.
 *
 * Why by directory.  The owner thread's seg_log (segs[], index tails, fds)
 * is changed without a lock by appends, rolls and retention; a reader on
 * another thread must not look at it.  So a cursor opens the files itself,
 * read-only, by name (<dir>/<20-digit base>.log / .index / .timeindex),
 * and reads them with pread.  That is safe because:
 *   C1. Below the caller's bound `to` (a high watermark it saw) every batch
 *       was written whole before the bound was published, and an append
 *       never rewrites bytes already written; the cursor never decodes a
 *       batch starting at or above `to`, so a half-written tail batch is
 *       never looked at (only its header's BaseOffset, to stop).
 *   C2. Retention unlinks files: an fd already open keeps reading the
 *       inode; a file gone before it was opened is skipped (its offsets
 *       are below the new log start).
 *   C3. Index files are only read, never mapped: the owner may shrink
 *       them (trim on roll, truncation), and a mapping read past the new
 *       end would be SIGBUS.  A preallocated index's slack is zeros and
 *       no real entry is all-zero (index.c, I2), so the entry count is a
 *       binary search for the first zero entry.
 *
 * Cost of a cursor from offset N (or timestamp T), per segment entered:
 * a directory listing at open, a binary search of the .index (about
 * log2(entries) preads of 8 bytes; the .timeindex likewise for T), then
 * batch headers from the indexed position (at most index.interval.bytes
 * of batches before N) and the records wanted.
 *
 * Reading a batch:
 *   - uncompressed: streamed.  After its header, records are read through
 *     a window of STREAM_CHUNK bytes of the file, one after the other (a
 *     record's offset is only known by reading the records before it: the
 *     index points at batches), and reading stops when the caller stops
 *     asking.  A record bigger than the window that lies below `from` is
 *     skipped after reading its first bytes.  So "from N, ten records" in
 *     the middle of a 1 MB batch of 1 KiB records reads about half the
 *     batch, not all of it.
 *   - compressed: read and decompressed whole by protocol/ (a codec's
 *     stream cannot be entered in the middle).
 *   Records of a streamed batch point into the window: valid until the
 *   next seg_cursor_next.
 *
 * States: OPEN (listing only) ─next─► IN SEGMENT (fd, pos) ─► IN BATCH
 * (window or decoded batch) ─► … ─► DONE (a batch at or past `to`, or no
 * segment left); DONE only returns 0.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segments/seg_int.h"

/* Read size when streaming an uncompressed batch: a typical producer batch
 * (Java batch.size 16 KiB) in one read, a 1 MB batch in steps. */
#define STREAM_CHUNK (16 << 10)

struct seg_cursor {
    char *dir;
    int64_t *bases;                   /* segments, sorted */
    size_t nseg, si;
    int64_t lo, cap, ts_lo;
    int64_t hint_base, hint_pos;      /* seg_cursor_opts */
    uint64_t hint_ino;
    atomic_llong *bytes_read;
    bool done, control;               /* seg_cursor_opts.control */
    /* current segment */
    int fd;
    int64_t pos;                      /* next batch header */
    /* current batch */
    kp_buf batch;                     /* whole (compressed) or a window (streamed) */
    kp_rec_iter it;                   /* whole */
    bool in_batch, streaming;
    kp_batch hdr;                     /* its header (seg_cursor_batch), */
    int64_t wpos;                     /* file position of batch.data[0], */
    int64_t rpos, rend;               /* next record, end of the records area, */
    int32_t left;                     /* records not yet read */
};

/* Every read of the cursor goes here, so bytes_read counts them all. */
static ssize_t cur_pread(atomic_llong *count, int fd, void *buf, size_t n,
                         off_t pos)
{
    ssize_t r = seg_pread_full(fd, buf, n, pos);
    if (count && r > 0)
        atomic_fetch_add(count, (long long)r);
    return r;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Bases of dir's .log files, sorted; sizes summed into *bytes (may be
 * NULL).  Read-only: unlike seg_open's listing it removes nothing. */
static int list_segments(const char *dir, int64_t **out, size_t *n,
                         uint64_t *bytes)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return SEG_E_IO;
    size_t cap = 0;
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t base = seg_name_base(e->d_name, ".log");
        if (base < 0)
            continue;
        if (bytes) {
            char path[4200];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (stat(path, &st))
                continue;             /* deleted meanwhile (C2) */
            *bytes += (uint64_t)st.st_size;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            int64_t *v = realloc(*out, cap * sizeof *v);
            if (!v) {
                rc = SEG_E_NOMEM;
                break;
            }
            *out = v;
        }
        (*out)[(*n)++] = base;
    }
    closedir(d);
    if (*n > 1)
        qsort(*out, *n, sizeof **out, cmp_i64);
    return rc;
}

static int open_file(const char *dir, int64_t base, const char *ext)
{
    char path[4200];
    seg_path(path, sizeof path, dir, base, ext);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* ---- index files by pread (C3) --------------------------------------------- */
static uint32_t file_entries(atomic_llong *cnt, int fd, size_t entry)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st))
        return 0;
    uint32_t lo = 0, hi = (uint32_t)((size_t)st.st_size / entry);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint8_t e[SEG_TIDX_ENTRY];
        if (cur_pread(cnt, fd, e, entry, (off_t)mid * (off_t)entry) != (ssize_t)entry)
            return lo;
        bool zero = true;
        for (size_t i = 0; i < entry; i++)
            if (e[i]) zero = false;
        if (zero)
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

/* Entry k-1 of the last k whose key is <= (offset index: rel) or <
 * (time index: ts) the target, read into e; false when none.  The key of
 * an offset entry is its first INT32, of a time entry its first INT64. */
static bool file_floor(atomic_llong *cnt, int fd, uint32_t n, size_t entry,
                       int64_t target, uint8_t *e)
{
    uint32_t lo = 0, hi = n;          /* first entry past the target */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cur_pread(cnt, fd, e, entry, (off_t)mid * (off_t)entry) != (ssize_t)entry)
            return false;
        bool below = entry == SEG_OIDX_ENTRY ? seg_be32(e) <= target
                                             : seg_be64(e) < target;
        if (below)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && cur_pread(cnt, fd, e, entry, (off_t)(lo - 1) * (off_t)entry) ==
                         (ssize_t)entry;
}

/* Position of the last offset-index entry with rel <= target (0 if none). */
static int64_t oidx_floor(atomic_llong *cnt, int fd, uint32_t n, int64_t target)
{
    uint8_t e[SEG_OIDX_ENTRY];
    if (target > INT32_MAX)
        target = INT32_MAX;
    return file_floor(cnt, fd, n, SEG_OIDX_ENTRY, target, e) ? seg_be32(e + 4) : 0;
}

/* ---- the cursor ------------------------------------------------------------ */
int seg_cursor_open(const seg_cursor_opts *o, seg_cursor **out)
{
    *out = NULL;
    seg_cursor *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = strdup(o->dir))) {
        free(c);
        return SEG_E_NOMEM;
    }
    c->fd = -1;
    c->lo = o->from;
    c->cap = o->to;
    c->ts_lo = o->min_ts;
    c->hint_base = o->hint_base;
    c->hint_pos = o->hint_pos;
    c->hint_ino = o->hint_ino;
    c->bytes_read = o->bytes_read;
    c->control = o->control;
    kp_buf_init(&c->batch);
    kp_rec_iter_init0(&c->it);
    int rc = list_segments(c->dir, &c->bases, &c->nseg, NULL);
    if (rc) {
        seg_cursor_close(c);
        return rc;
    }
    c->done = c->lo >= c->cap;
    *out = c;
    return 0;
}

void seg_cursor_close(seg_cursor *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    kp_rec_iter_free(&c->it);
    kp_buf_free(&c->batch);
    free(c->bases);
    free(c->dir);
    free(c);
}

static void leave_segment(seg_cursor *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->si++;
}

/* The hint still names the batch holding lo in the file open: the file
 * seg_locate looked in (a compaction renames a new one into place before
 * the owner hears of it), and a batch header there whose offsets hold lo
 * (a truncation keeps the file). */
static bool hint_holds(seg_cursor *c)
{
    uint8_t h[KP_BATCH_HEADER_SIZE];
    kp_batch b;
    struct stat st;
    return !fstat(c->fd, &st) && (uint64_t)st.st_ino == c->hint_ino &&
           cur_pread(c->bytes_read, c->fd, h, sizeof h, (off_t)c->hint_pos) ==
               (ssize_t)sizeof h &&
           !kp_batch_header(h, sizeof h, &b) && b.Magic == 2 && b.BaseOffset <= c->lo &&
           c->lo <= b.BaseOffset + b.LastOffsetDelta;
}

/* Opens segment si and seeks to the first batch that can hold a wanted
 * record.  false when there is no such segment. */
static bool open_segment(seg_cursor *c)
{
    while (c->si < c->nseg) {
        int64_t base = c->bases[c->si];
        if (base >= c->cap)
            return false;
        /* Skip a segment wholly below lo: the next one starts at or below lo. */
        if (c->si + 1 < c->nseg && c->bases[c->si + 1] <= c->lo) {
            c->si++;
            continue;
        }
        c->fd = open_file(c->dir, base, ".log");
        if (c->fd < 0) {                  /* deleted by retention meanwhile (C2) */
            c->si++;
            continue;
        }
        c->pos = 0;
        if (c->hint_pos > 0 && base == c->hint_base && c->ts_lo == INT64_MIN &&
            hint_holds(c)) {
            c->pos = c->hint_pos;         /* the owner's lookup: no .index */
            return true;
        }
        int ix = open_file(c->dir, base, ".index");
        if (ix >= 0) {
            uint32_t n = file_entries(c->bytes_read, ix, SEG_OIDX_ENTRY);
            if (c->lo > base)
                c->pos = oidx_floor(c->bytes_read, ix, n, c->lo - base);
            if (c->ts_lo > INT64_MIN) {
                int tx = open_file(c->dir, base, ".timeindex");
                uint8_t e[SEG_TIDX_ENTRY];
                if (tx >= 0 &&
                    file_floor(c->bytes_read, tx,
                               file_entries(c->bytes_read, tx, SEG_TIDX_ENTRY),
                               SEG_TIDX_ENTRY, c->ts_lo, e)) {
                    int64_t p = oidx_floor(c->bytes_read, ix, n, seg_be32(e + 8));
                    if (p > c->pos)
                        c->pos = p;
                }
                if (tx >= 0)
                    close(tx);
            }
            close(ix);
        }
        return true;
    }
    return false;
}

/* Makes bytes [from, from + need) of the segment file, all inside the
 * streamed batch, readable in the window, reading max(need, atleast) bytes
 * (up to the batch end) when they are not there yet; what the window
 * already holds of them is kept, not read again.  A pointer to byte
 * `from`, or NULL on a short read. */
static const uint8_t *window(seg_cursor *c, int64_t from, size_t need, size_t atleast)
{
    kp_buf *w = &c->batch;
    int64_t wend = c->wpos + (int64_t)w->len;
    if (from >= c->wpos && from + (int64_t)need <= wend)
        return w->data + (from - c->wpos);
    size_t keep = 0;
    if (from >= c->wpos && from < wend) {            /* slide the tail down */
        keep = (size_t)(wend - from);
        memmove(w->data, w->data + (from - c->wpos), keep);
    }
    size_t n = need > atleast ? need : atleast;
    if ((int64_t)n > c->rend - from)
        n = (size_t)(c->rend - from);
    w->len = keep;
    c->wpos = from;
    uint8_t *p = kp_buf_reserve(w, n - keep);
    if (!p)
        return NULL;
    ssize_t r = cur_pread(c->bytes_read, c->fd, p, n - keep,
                          (off_t)(from + (int64_t)keep));
    if (r < 0 || (size_t)r != n - keep)
        return NULL;
    w->len = n;
    return w->data;
}

/* The next record of a streamed batch: 1, 0 at its end, KP_E_NOMEM, or
 * another KP_E_* when it is unreadable (the rest of the batch is skipped,
 * as a whole batch that does not decode is). */
static int stream_next(seg_cursor *c, kp_record *rec)
{
    while (c->left > 0 && c->rpos < c->rend) {
        /* The length (VARINT, at most 5 bytes), then Attributes INT8,
         * TimestampDelta VARLONG (10), OffsetDelta VARINT (5): the first 21
         * bytes say how big the record is and whether it is wanted.  They
         * are read with the chunk that follows: skipping small records one
         * by one would save preads but not disk reads (pages). */
        size_t avail = (size_t)(c->rend - c->rpos), vn = avail < 21 ? avail : 21;
        const uint8_t *p = window(c, c->rpos, vn, STREAM_CHUNK);
        if (!p)
            return c->batch.err ? KP_E_NOMEM : KP_E_TRUNCATED;
        kp_rd rd;
        kp_rd_init(&rd, p, vn < 5 ? vn : 5);
        int32_t len = kp_rd_varint(&rd);
        size_t lenlen = (size_t)(rd.p - p);
        if (!kp_rd_ok(&rd) || len < 0 || (size_t)len > avail - lenlen)
            return KP_E_MALFORMED;
        size_t total = lenlen + (size_t)len;
        if (total > STREAM_CHUNK) {       /* big: read it only if wanted */
            kp_rd_init(&rd, p + lenlen, vn - lenlen);
            kp_rd_i8(&rd);
            kp_rd_varlong(&rd);
            int64_t off = c->hdr.BaseOffset + kp_rd_varint(&rd);
            if (kp_rd_ok(&rd) && off < c->lo) {
                c->rpos += (int64_t)total;
                c->left--;
                continue;
            }
        }
        if (!(p = window(c, c->rpos, total, STREAM_CHUNK)))
            return c->batch.err ? KP_E_NOMEM : KP_E_TRUNCATED;
        kp_rd_init(&rd, p, total);
        int rc = kp_rec_read(&rd, &c->hdr, rec);
        if (rc != 1)
            return rc;
        c->rpos += (int64_t)total;
        c->left--;
        return 1;
    }
    return 0;
}

/* Enters the batch at c->pos, or moves past it.  1: in a batch; 0: moved
 * on (skipped batch, or end of segment); -1: done (C1); SEG_E_NOMEM. */
static int enter_batch(seg_cursor *c)
{
    uint8_t h[KP_BATCH_HEADER_SIZE];
    kp_batch b;
    int64_t size = -1;
    if (cur_pread(c->bytes_read, c->fd, h, sizeof h, (off_t)c->pos) == (ssize_t)sizeof h)
        size = kp_batch_size(h, sizeof h);
    if (size < KP_BATCH_HEADER_SIZE || kp_batch_header(h, sizeof h, &b) || b.Magic != 2) {
        leave_segment(c);                        /* end of this segment */
        return 0;
    }
    if (b.BaseOffset >= c->cap)
        return -1;
    int64_t last = b.BaseOffset + b.LastOffsetDelta;
    if (last < c->lo || ((b.Attributes & KP_ATTR_CONTROL) && !c->control) ||
        (c->ts_lo > INT64_MIN && b.MaxTimestamp < c->ts_lo)) {
        c->pos += size;
        return 0;
    }
    kp_buf_reset(&c->batch);
    c->hdr = b;
    if ((b.Attributes & KP_ATTR_CODEC_MASK) == KP_CODEC_NONE) {
        c->wpos = c->pos;                       /* empty window */
        c->rpos = c->pos + KP_BATCH_HEADER_SIZE;
        c->rend = c->pos + size;
        c->left = b.RecordsCount;
        c->pos += size;
        c->streaming = c->in_batch = true;
        return 1;
    }
    c->streaming = false;
    uint8_t *p = kp_buf_reserve(&c->batch, (size_t)size);
    if (!p)
        return SEG_E_NOMEM;
    if (cur_pread(c->bytes_read, c->fd, p, (size_t)size, (off_t)c->pos) != (ssize_t)size) {
        leave_segment(c);
        return 0;
    }
    c->batch.len = (size_t)size;
    c->pos += size;
    if (kp_rec_iter_start(&c->it, c->batch.data, (size_t)size) != 0)
        return 0;                                /* undecodable: skip the batch */
    c->in_batch = true;
    return 1;
}

int seg_cursor_next(seg_cursor *c, kp_record *rec)
{
    while (!c->done) {
        if (c->in_batch) {
            int r = c->streaming ? stream_next(c, rec) : kp_rec_iter_next(&c->it, rec);
            if (r == KP_E_NOMEM)
                return SEG_E_NOMEM;
            if (r == 1) {
                if (rec->Offset < c->lo)
                    continue;
                if (rec->Offset >= c->cap)
                    break;
                return 1;
            }
            c->in_batch = false;
            continue;
        }
        if (c->fd < 0 && !open_segment(c))
            break;
        int r = enter_batch(c);
        if (r == SEG_E_NOMEM)
            return r;
        if (r < 0)
            break;
    }
    c->done = true;
    c->in_batch = false;
    return 0;
}

const kp_batch *seg_cursor_batch(const seg_cursor *c)
{
    return &c->hdr;
}

/* ---- seg_dir_stat ----------------------------------------------------------- */
int seg_dir_stat(const char *dir, seg_dir_info *info)
{
    memset(info, 0, sizeof *info);
    info->max_ts = -1;
    int64_t *bases;
    size_t n;
    int rc = list_segments(dir, &bases, &n, &info->size_bytes);
    if (rc || n == 0) {
        free(bases);
        return rc;
    }
    int64_t base = bases[n - 1];
    info->segments = (int)n;
    info->first_base = bases[0];
    info->log_end = base;
    free(bases);
    /* The newest segment's end: its last index entry, then the headers. */
    int64_t pos = 0;
    int ix = open_file(dir, base, ".index");
    if (ix >= 0) {
        pos = oidx_floor(NULL, ix, file_entries(NULL, ix, SEG_OIDX_ENTRY), INT32_MAX);
        close(ix);
    }
    int tx = open_file(dir, base, ".timeindex");
    if (tx >= 0) {
        uint32_t k = file_entries(NULL, tx, SEG_TIDX_ENTRY);
        uint8_t e[SEG_TIDX_ENTRY];
        if (k && seg_pread_full(tx, e, sizeof e, (off_t)(k - 1) * SEG_TIDX_ENTRY) ==
                     (ssize_t)sizeof e)
            info->max_ts = seg_be64(e);
        close(tx);
    }
    int fd = open_file(dir, base, ".log");
    if (fd < 0)
        return 0;
    for (;;) {
        uint8_t h[KP_BATCH_HEADER_SIZE];
        kp_batch b;
        if (seg_pread_full(fd, h, sizeof h, (off_t)pos) != (ssize_t)sizeof h)
            break;
        int64_t size = kp_batch_size(h, sizeof h);
        if (size < KP_BATCH_HEADER_SIZE || kp_batch_header(h, sizeof h, &b) || b.Magic != 2)
            break;
        info->log_end = b.BaseOffset + b.LastOffsetDelta + 1;
        if (b.MaxTimestamp > info->max_ts)
            info->max_ts = b.MaxTimestamp;
        pos += size;
    }
    close(fd);
    return 0;
}
