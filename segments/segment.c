/*
 * segments/segment.c — one segment: its three files, refcounted fds, and
 * the index rule shared by append and rebuild.
 *
 * Files of a segment with base offset B (20 digits, zero-padded):
 *   B.log        RecordBatch v2 back to back, as produced, BaseOffset set
 *   B.index      offset index   (layout in index.c)
 *   B.timeindex  time index     (layout in index.c)
 *
 * Invariants:
 *   S1. size is the length of whole, valid batches in B.log; the file is
 *       never longer after a successful append or recovery (a failed
 *       append cuts back, seg_log enters its error state otherwise).
 *   S2. base <= every BaseOffset in the segment; BaseOffsets increase;
 *       next = last batch's BaseOffset + LastOffsetDelta + 1 (base if empty).
 *   S3. The .log fd lives as long as its last reference: the segment holds
 *       one, every seg_range and an in-flight seg_flush hold others.
 *   S4. Only the active segment holds index fds; a sealed one holds its
 *       .log fd alone (sendfile needs it) and reads its indexes through
 *       their mappings (index.c, I5).
 *
 * States: active (indexes preallocated, seg_segment_activate) → sealed
 * (indexes trimmed and their fds closed, seg_segment_seal: on roll, at
 * open, on a compaction's install) → deleted (renamed *.deleted,
 * unlinked).  Truncation may turn a sealed segment active again.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "segments/seg_int.h"

/* ---- refcounted fd ------------------------------------------------------- */
seg_file *seg_file_new(int fd)
{
    seg_file *f = malloc(sizeof *f);
    if (!f)
        return NULL;
    f->fd = fd;
    atomic_init(&f->refs, 1);
    return f;
}

void seg_file_ref(seg_file *f)
{
    atomic_fetch_add_explicit(&f->refs, 1, memory_order_relaxed);
}

void seg_file_unref(seg_file *f)
{
    if (atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) == 1) {
        close(f->fd);   /* close's errors carry no data loss for us here */
        free(f);
    }
}

/* ---- I/O that handles EINTR and short transfers -------------------------- */
ssize_t seg_pread_full(int fd, void *buf, size_t n, off_t pos)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, n - done,
                          pos + (off_t)done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;          /* EOF: caller sees a short count */
        done += (size_t)r;
    }
    return (ssize_t)done;
}

ssize_t seg_pwrite_full(int fd, const void *buf, size_t n, off_t pos)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pwrite(fd, (const uint8_t *)buf + done, n - done,
                           pos + (off_t)done);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0) {       /* no progress and no error: treat as full */
            errno = ENOSPC;
            return -1;
        }
        done += (size_t)r;
    }
    return (ssize_t)done;
}

/* ---- life cycle ------------------------------------------------------------ */
/* Kafka's randomSegmentJitter: uniform in [0, min(segment.jitter.ms,
 * segment.ms)), so partitions created together do not all roll together. */
int64_t seg_roll_jitter(const seg_config *c)
{
    int64_t bound = c->segment_jitter_ms < c->segment_ms ? c->segment_jitter_ms
                                                         : c->segment_ms;
    if (bound <= 0)
        return 0;
    return (int64_t)(((uint64_t)random() << 31 | (uint64_t)random()) % (uint64_t)bound);
}

void seg_path(char *out, size_t cap, const char *dir, int64_t base,
              const char *ext)
{
    snprintf(out, cap, "%s/%020" PRId64 "%s", dir, base, ext);
}

int seg_segment_create(const char *dir, int64_t base, const seg_config *c,
                       int64_t now_ms, seg_segment **out)
{
    char path[4096];
    seg_segment *s = calloc(1, sizeof *s);
    if (!s)
        return SEG_E_IO;
    s->base = s->next = base;
    s->max_ts = -1;
    s->roll_ts = -1;                /* the first batch sets it (log.c, L6) */
    s->created_ms = now_ms;
    s->roll_jitter_ms = c ? seg_roll_jitter(c) : 0;
    /* A new segment starts from nothing, whatever an earlier life of the
     * directory left under the same name. */
    static const char *const ext[] = { ".log", ".index", ".timeindex", ".txnindex" };
    for (int i = 0; i < 4; i++) {
        seg_path(path, sizeof path, dir, base, ext[i]);
        unlink(path);
    }
    seg_path(path, sizeof path, dir, base, ".log");
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || !(s->log = seg_file_new(fd))) {
        if (fd >= 0)
            close(fd);
        free(s);
        return SEG_E_IO;
    }
    seg_path(path, sizeof path, dir, base, ".index");
    int rc = seg_idx_open(&s->idx, path, SEG_OIDX_ENTRY, true);
    if (rc == 0) {
        seg_path(path, sizeof path, dir, base, ".timeindex");
        rc = seg_idx_open(&s->tidx, path, SEG_TIDX_ENTRY, true);
    }
    if (rc == 0 && c)
        rc = seg_segment_activate(s, c);
    if (rc) {
        seg_segment_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void seg_segment_free(seg_segment *s)
{
    if (!s)
        return;
    seg_idx_close(&s->idx);
    seg_idx_close(&s->tidx);
    if (s->log)
        seg_file_unref(s->log);
    free(s);
}

static const char *const del_ext[] = { ".index", ".timeindex", ".txnindex", ".log" };

/* Rename first so a crash mid-way leaves only *.deleted files, which
 * seg_open removes.  The unlink may come later (file.delete.delay.ms,
 * seg_dead): open ranges keep their fd anyway (S3). */
void seg_segment_rename_deleted(const char *dir, int64_t base)
{
    char from[4096], to[4200];
    for (int i = 0; i < 4; i++) {
        seg_path(from, sizeof from, dir, base, del_ext[i]);
        snprintf(to, sizeof to, "%s.deleted", from);
        if (rename(from, to) != 0)
            unlink(from);
    }
}

void seg_segment_unlink_deleted(const char *dir, int64_t base)
{
    char path[4200];
    for (int i = 0; i < 4; i++) {
        seg_path(path, sizeof path, dir, base, del_ext[i]);
        strcat(path, ".deleted");
        unlink(path);
    }
}

void seg_segment_delete(const char *dir, seg_segment *s)
{
    seg_segment_rename_deleted(dir, s->base);
    seg_segment_unlink_deleted(dir, s->base);
    seg_segment_free(s);
}

void seg_segment_seal(seg_segment *s, const char *dir)
{
    char path[4096];
    seg_path(path, sizeof path, dir, s->base, ".index");
    seg_idx_seal(&s->idx, path);
    seg_path(path, sizeof path, dir, s->base, ".timeindex");
    seg_idx_seal(&s->tidx, path);
}

int seg_segment_activate(seg_segment *s, const seg_config *c)
{
    uint32_t no = c->segment_index_bytes / SEG_OIDX_ENTRY;
    uint32_t nt = c->segment_index_bytes / SEG_TIDX_ENTRY;
    if (seg_idx_reserve(&s->idx, no ? no : 1) ||
        seg_idx_reserve(&s->tidx, nt ? nt : 1))
        return SEG_E_IO;
    return 0;
}

/* The one index rule.  Cost: O(1), at most two stores into the indexes'
 * in-memory tails (index.c), one pwrite per SEG_IDX_TAIL bytes of them. */
int seg_segment_index_batch(seg_segment *s, const seg_config *c,
                            int32_t rel, uint64_t pos, uint32_t size,
                            int64_t max_ts)
{
    if (pos > 0 && s->since_index >= c->index_interval_bytes) {
        seg_idx *t = &s->tidx;
        if (seg_oidx_add(&s->idx, rel, (int32_t)pos))
            return SEG_E_IO;
        int64_t last_ts;
        int32_t last_rel;
        if (t->n > 0)
            seg_tidx_get(t, t->n - 1, &last_ts, &last_rel);
        if (t->n > 0 && last_ts == s->max_ts) {   /* same bound, later start */
            if (seg_tidx_set_last(t, last_ts, rel))
                return SEG_E_IO;
        } else if (seg_tidx_add(t, s->max_ts, rel)) {
            return SEG_E_IO;
        }
        s->since_index = 0;
    }
    s->since_index += size;
    s->hint[0] = (struct seg_hint){ true, pos, s->base + rel };   /* read.c H1 */
    if (max_ts > s->max_ts)
        s->max_ts = max_ts;
    return 0;
}

int seg_segment_cut(seg_segment *s, uint64_t pos)
{
    int rc;
    do rc = ftruncate(s->log->fd, (off_t)pos); while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return SEG_E_IO;
    s->size = pos;
    for (int h = 0; h < 2; h++)       /* read.c H1: none at or past the cut */
        if (s->hint[h].pos >= pos)
            s->hint[h].set = false;
    uint32_t keep = pos ? (uint32_t)(seg_oidx_floor_pos(&s->idx,
                                     (int32_t)(pos - 1)) + 1) : 0;
    int32_t last_rel = 0, p;
    if (keep)
        seg_oidx_get(&s->idx, keep - 1, &last_rel, &p);
    uint32_t tkeep = 0;
    while (tkeep < s->tidx.n) {
        int64_t ts;
        int32_t r;
        seg_tidx_get(&s->tidx, tkeep, &ts, &r);
        if (!keep || r > last_rel)
            break;
        tkeep++;
    }
    /* What is dropped reads as zero in the files (index.c, I4). */
    if (seg_idx_drop(&s->idx, keep) || seg_idx_drop(&s->tidx, tkeep))
        return SEG_E_IO;
    return 0;
}
