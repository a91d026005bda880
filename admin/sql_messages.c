/*
 * admin/sql_messages.c — the `messages` virtual table: records read
 * straight from the partition's segment files, decompressed as needed.
 *
 * The files are opened read-only by path (<log.dirs>/<topic>-<partition>/
 * <20-digit base>.log/.index/.timeindex), never through the event loop's
 * seg_log, so a query runs on the SQL worker without touching loop state.
 * That is safe because segment files are append-only: a batch below the
 * high watermark never changes, and retention unlinks files (an open fd
 * keeps reading).  Reads stop at the statement snapshot's high watermark,
 * so a half-written tail batch is never looked at.
 *
 * Pushdown (xBestIndex): topic = ?, partition = ?, offset =/>/>=/</<= ?,
 * timestamp >=/> ?.  A query "topic='t' AND partition=0 AND offset >= N
 * LIMIT 10" costs: a directory listing, a binary search of the .index file
 * (about log2(entries) preads of 8 bytes), then batch headers from the
 * indexed position (at most index.interval.bytes of batches before N) and
 * the records up to the tenth.  A timestamp bound seeks with the
 * .timeindex the same way and skips whole batches by MaxTimestamp.
 *
 * Reading a batch:
 *   - uncompressed: streamed.  After its header, records are read through
 *     a window of STREAM_CHUNK bytes of the file, one after the other (a
 *     record's offset is only known by reading the records before it: the
 *     index points at batches), and reading stops when SQLite stops asking
 *     (LIMIT).  A record bigger than the window that lies below the wanted
 *     offset is skipped after reading its first bytes.  So "offset >= N
 *     LIMIT 10" in the middle of a 1 MB batch of 1 KiB records reads about
 *     half the batch, not all of it.
 *   - compressed: read and decompressed whole (a codec's stream cannot be
 *     entered in the middle).  A query in a 1 MB compressed batch reads
 *     that batch.
 *   Records of a streamed batch point into the window: valid until the
 *   next advance(), which is all xColumn needs.
 *
 * Rows come ordered by (topic, partition, offset), which the planner is
 * told, so ORDER BY offset costs nothing.
 *
 * Columns: key and value are TEXT when the bytes are valid UTF-8, BLOB
 * otherwise, NULL when null; headers is a JSON array of {"key","value"}
 * (NULL when the record has none).
 */
#include "admin/sql_surface.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

/* Bytes read from segment files by this table (bench/sql_bench.c). */
atomic_llong sq_messages_bytes_read;

static ssize_t pread_all(int fd, void *buf, size_t n, off_t pos)
{
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, pos + (off_t)done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        done += (size_t)r;
    }
    atomic_fetch_add(&sq_messages_bytes_read, (long long)done);
    return (ssize_t)done;
}

static int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v = (v << 8) | p[i];
    return (int64_t)v;
}
static int32_t be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                     ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}

static int seg_cmp(const void *a, const void *b)
{
    const sq_seginfo *x = a, *y = b;
    return (x->base > y->base) - (x->base < y->base);
}

int sq_list_segments(const char *dir, sq_seginfo **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *nm = e->d_name;
        if (strlen(nm) != 24 || strcmp(nm + 20, ".log"))
            continue;
        int64_t base = 0;
        bool ok = true;
        for (int i = 0; i < 20; i++) {
            if (nm[i] < '0' || nm[i] > '9') { ok = false; break; }
            base = base * 10 + (nm[i] - '0');
        }
        if (!ok)
            continue;
        char path[4200];
        struct stat stt;
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        if (stat(path, &stt))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 8;
            sq_seginfo *ns = realloc(*out, cap * sizeof *ns);
            if (!ns)
                break;
            *out = ns;
        }
        (*out)[*n].base = base;
        (*out)[(*n)++].size = (int64_t)stt.st_size;
    }
    closedir(d);
    if (*n > 1)
        qsort(*out, *n, sizeof **out, seg_cmp);
    return 0;
}

static int open_seg_file(const char *dir, int64_t base, const char *ext)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%020lld.%s", dir, (long long)base, ext);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Entries in an index file: the preallocated slack of an active index is
 * zeros, and a real entry is never all-zero (index.c, I2), so the count is
 * found by binary search for the first zero entry. */
static uint32_t index_entries(int fd, size_t entry)
{
    struct stat st;
    if (fd < 0 || fstat(fd, &st))
        return 0;
    uint32_t lo = 0, hi = (uint32_t)((size_t)st.st_size / entry);
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint8_t e[12];
        if (pread_all(fd, e, entry, (off_t)mid * (off_t)entry) != (ssize_t)entry)
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

/* Position of the last offset-index entry with rel <= target (0 if none). */
static int64_t oidx_floor(int fd, uint32_t n, int64_t target)
{
    uint32_t lo = 0, hi = n;                 /* first entry with rel > target */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint8_t e[8];
        if (pread_all(fd, e, 8, (off_t)mid * 8) != 8)
            return 0;
        if (be32(e) <= target)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    uint8_t e[8];
    if (pread_all(fd, e, 8, (off_t)(lo - 1) * 8) != 8)
        return 0;
    return be32(e + 4);
}

/* rel of the last time-index entry with ts < target (0 if none). */
static int64_t tidx_below(int fd, uint32_t n, int64_t target)
{
    uint32_t lo = 0, hi = n;                 /* first entry with ts >= target */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint8_t e[12];
        if (pread_all(fd, e, 12, (off_t)mid * 12) != 12)
            return 0;
        if (be64(e) < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 0;
    uint8_t e[12];
    if (pread_all(fd, e, 12, (off_t)(lo - 1) * 12) != 12)
        return 0;
    return be32(e + 8);
}

int64_t sq_segment_end(const char *dir, int64_t base, int64_t *max_ts)
{
    *max_ts = -1;
    int fd = open_seg_file(dir, base, "log");
    if (fd < 0)
        return base;
    int ix = open_seg_file(dir, base, "index");
    int64_t pos = 0;
    if (ix >= 0) {
        pos = oidx_floor(ix, index_entries(ix, 8), INT32_MAX);
        close(ix);
    }
    int tx = open_seg_file(dir, base, "timeindex");
    if (tx >= 0) {
        uint32_t n = index_entries(tx, 12);
        uint8_t e[12];
        if (n && pread_all(tx, e, 12, (off_t)(n - 1) * 12) == 12)
            *max_ts = be64(e);
        close(tx);
    }
    int64_t end = base;
    uint8_t h[KP_BATCH_HEADER_SIZE];
    for (;;) {
        if (pread_all(fd, h, sizeof h, (off_t)pos) != (ssize_t)sizeof h)
            break;
        kp_batch b;
        int64_t size = kp_batch_size(h, sizeof h);
        if (size < KP_BATCH_HEADER_SIZE || kp_batch_header(h, sizeof h, &b) || b.Magic != 2)
            break;
        end = b.BaseOffset + b.LastOffsetDelta + 1;
        if (b.MaxTimestamp > *max_ts)
            *max_ts = b.MaxTimestamp;
        pos += size;
    }
    close(fd);
    return end;
}

/* ---- the table ------------------------------------------------------------------------- */
/* Read size when streaming an uncompressed batch: a typical producer batch
 * (Java batch.size 16 KiB) in one read, a 1 MB batch in steps. */
#define STREAM_CHUNK (16 << 10)

enum { M_TOPIC, M_PARTITION, M_OFFSET, M_TIMESTAMP, M_KEY, M_VALUE, M_HEADERS };

/* idxNum bits */
enum { B_TOPIC = 1, B_PART = 2, B_LO = 4, B_LO_GT = 8, B_HI = 16, B_HI_LT = 32,
       B_EQ = 64, B_TS = 128, B_TS_GT = 256 };

typedef struct msg_vt {
    sqlite3_vtab base;
    sq_conn *c;
} msg_vt;

typedef struct msg_cur {
    sqlite3_vtab_cursor base;
    sq_conn *c;
    sq_snap *snap;
    char *topic;                      /* topic = ? (NULL: all) */
    bool has_part;
    int32_t part;
    int64_t lo, hi;                   /* offsets [lo, hi) */
    int64_t ts_lo;                    /* timestamp >= ts_lo */
    size_t pi, pend;                  /* partitions left, in the snapshot */
    /* current partition */
    const sq_live *cur;
    char dir[4200];
    sq_seginfo *segs;
    size_t nseg, si;
    int fd;
    int64_t pos;
    int64_t cap;                      /* min(hi, high watermark) */
    /* current batch */
    kp_buf batch;                     /* whole (compressed) or a window (streamed) */
    kp_rec_iter it;                   /* whole */
    bool in_batch;
    bool streaming;
    kp_batch hdr;                     /* streamed: its header, */
    int64_t wpos;                     /* file position of batch.data[0], */
    int64_t rpos, rend;               /* next record, end of the records area, */
    int32_t left;                     /* records not yet read */
    kp_record rec;
    int64_t rowid;
    bool eof;
} msg_cur;

static int msg_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                       sqlite3_vtab **out, char **err)
{
    (void)argc; (void)argv; (void)err;
    sq_conn *c = aux;
    bool was = c->internal;
    c->internal = true;                 /* our CREATE TABLE, not the operator's */
    int rc = sqlite3_declare_vtab(db,
        "CREATE TABLE x(topic TEXT, partition INTEGER, offset INTEGER, "
        "timestamp INTEGER, key, value, headers TEXT)");
    c->internal = was;
    if (rc != SQLITE_OK)
        return rc;
    msg_vt *v = sqlite3_malloc(sizeof *v);
    if (!v)
        return SQLITE_NOMEM;
    memset(v, 0, sizeof *v);
    v->c = aux;
    *out = &v->base;
    return SQLITE_OK;
}

static int msg_disconnect(sqlite3_vtab *v)
{
    sqlite3_free(v);
    return SQLITE_OK;
}

static int msg_best_index(sqlite3_vtab *v, sqlite3_index_info *ii)
{
    (void)v;
    int use[9];
    for (int i = 0; i < 9; i++) use[i] = -1;
    int bits = 0;
    for (int i = 0; i < ii->nConstraint; i++) {
        const struct sqlite3_index_constraint *k = &ii->aConstraint[i];
        if (!k->usable)
            continue;
        switch (k->iColumn) {
        case M_TOPIC:
            if (k->op == SQLITE_INDEX_CONSTRAINT_EQ) { use[0] = i; bits |= B_TOPIC; }
            break;
        case M_PARTITION:
            if (k->op == SQLITE_INDEX_CONSTRAINT_EQ) { use[1] = i; bits |= B_PART; }
            break;
        case M_OFFSET:
            if (k->op == SQLITE_INDEX_CONSTRAINT_EQ) { use[2] = i; bits |= B_EQ; }
            else if (k->op == SQLITE_INDEX_CONSTRAINT_GE || k->op == SQLITE_INDEX_CONSTRAINT_GT) {
                use[3] = i;
                bits = (bits & ~B_LO_GT) | B_LO | (k->op == SQLITE_INDEX_CONSTRAINT_GT ? B_LO_GT : 0);
            } else if (k->op == SQLITE_INDEX_CONSTRAINT_LE || k->op == SQLITE_INDEX_CONSTRAINT_LT) {
                use[4] = i;
                bits = (bits & ~B_HI_LT) | B_HI | (k->op == SQLITE_INDEX_CONSTRAINT_LT ? B_HI_LT : 0);
            }
            break;
        case M_TIMESTAMP:
            if (k->op == SQLITE_INDEX_CONSTRAINT_GE || k->op == SQLITE_INDEX_CONSTRAINT_GT) {
                use[5] = i;
                bits = (bits & ~B_TS_GT) | B_TS | (k->op == SQLITE_INDEX_CONSTRAINT_GT ? B_TS_GT : 0);
            }
            break;
        }
    }
    if (bits & B_EQ)
        bits &= ~(B_LO | B_LO_GT | B_HI | B_HI_LT), use[3] = use[4] = -1;
    /* argv order: topic, partition, eq, lo, hi, ts */
    int argi = 1;
    for (int k = 0; k < 6; k++)
        if (use[k] >= 0) {
            ii->aConstraintUsage[use[k]].argvIndex = argi++;
            /* The timestamp bound only seeks: records are re-checked. */
            ii->aConstraintUsage[use[k]].omit = k != 5;
        }
    ii->idxNum = bits;
    double cost = 1e9;
    if (bits & B_TOPIC) cost /= 100;
    if (bits & B_PART) cost /= 10;
    if (bits & (B_EQ | B_LO)) cost /= 1000;
    if (bits & B_TS) cost /= 100;
    ii->estimatedCost = cost;
    if (bits & B_EQ && bits & B_TOPIC && bits & B_PART) {
        ii->estimatedRows = 1;
    }
    /* Rows come in (topic, partition, offset) order. */
    bool ordered = true;
    for (int i = 0; i < ii->nOrderBy; i++) {
        const struct sqlite3_index_orderby *o = &ii->aOrderBy[i];
        if (o->desc || !(o->iColumn == M_TOPIC || o->iColumn == M_PARTITION ||
                         o->iColumn == M_OFFSET)) {
            ordered = false;
            break;
        }
        /* Sorted by offset alone only within one partition. */
        if (o->iColumn == M_OFFSET && i == 0 && !((bits & B_TOPIC) && (bits & B_PART)))
            ordered = false;
        if (o->iColumn == M_PARTITION && i == 0 && !(bits & B_TOPIC))
            ordered = false;
    }
    ii->orderByConsumed = ordered && ii->nOrderBy > 0;
    return SQLITE_OK;
}

static int msg_open(sqlite3_vtab *v, sqlite3_vtab_cursor **out)
{
    msg_cur *cur = sqlite3_malloc(sizeof *cur);
    if (!cur)
        return SQLITE_NOMEM;
    memset(cur, 0, sizeof *cur);
    cur->c = ((msg_vt *)v)->c;
    cur->fd = -1;
    kp_buf_init(&cur->batch);
    kp_rec_iter_init0(&cur->it);
    *out = &cur->base;
    return SQLITE_OK;
}

static void close_partition(msg_cur *cur)
{
    if (cur->fd >= 0)
        close(cur->fd);
    cur->fd = -1;
    free(cur->segs);
    cur->segs = NULL;
    cur->nseg = cur->si = 0;
    cur->in_batch = false;
    cur->cur = NULL;
}

static int msg_close(sqlite3_vtab_cursor *cc)
{
    msg_cur *cur = (msg_cur *)cc;
    close_partition(cur);
    kp_rec_iter_free(&cur->it);
    kp_buf_free(&cur->batch);
    sq_snap_unref(cur->snap);
    free(cur->topic);
    sqlite3_free(cur);
    return SQLITE_OK;
}

/* Opens segment si and seeks to the first batch that can hold a wanted
 * record.  false when there is no such segment. */
static bool open_segment(msg_cur *cur)
{
    while (cur->si < cur->nseg) {
        int64_t base = cur->segs[cur->si].base;
        if (base >= cur->cap)
            return false;
        /* Skip a segment wholly below lo: the next one starts at or below lo. */
        if (cur->si + 1 < cur->nseg && cur->segs[cur->si + 1].base <= cur->lo) {
            cur->si++;
            continue;
        }
        cur->fd = open_seg_file(cur->dir, base, "log");
        if (cur->fd < 0) {                          /* deleted by retention meanwhile */
            cur->si++;
            continue;
        }
        cur->pos = 0;
        int ix = open_seg_file(cur->dir, base, "index");
        if (ix >= 0) {
            uint32_t n = index_entries(ix, 8);
            if (cur->lo > base)
                cur->pos = oidx_floor(ix, n, cur->lo - base > INT32_MAX ? INT32_MAX
                                                                     : cur->lo - base);
            if (cur->ts_lo > INT64_MIN) {
                int tx = open_seg_file(cur->dir, base, "timeindex");
                if (tx >= 0) {
                    int64_t rel = tidx_below(tx, index_entries(tx, 12), cur->ts_lo);
                    close(tx);
                    int64_t p = rel > 0 ? oidx_floor(ix, n, rel) : 0;
                    if (p > cur->pos)
                        cur->pos = p;
                }
            }
            close(ix);
        }
        return true;
    }
    return false;
}

static bool start_partition(msg_cur *cur)
{
    while (cur->pi < cur->pend) {
        const sq_live *l = &cur->snap->rows[cur->pi++];
        if (cur->has_part && l->partition != cur->part)
            continue;
        if (cur->topic && strcmp(l->topic, cur->topic))
            continue;
        cur->cur = l;
        cur->cap = cur->hi < l->high_watermark ? cur->hi : l->high_watermark;
        if (cur->lo >= cur->cap)
            continue;
        snprintf(cur->dir, sizeof cur->dir, "%s/%s-%d", cur->c->env.data_dir, l->topic,
                 l->partition);
        if (sq_list_segments(cur->dir, &cur->segs, &cur->nseg) || !cur->nseg) {
            close_partition(cur);
            continue;
        }
        cur->si = 0;
        if (open_segment(cur))
            return true;
        close_partition(cur);
    }
    return false;
}

/* Makes bytes [from, from + need) of the segment file, all inside the
 * streamed batch, readable in the window, reading max(need, atleast) bytes
 * (up to the batch end) when they are not there yet; what the window
 * already holds of them is kept, not read again.  A pointer to byte
 * `from`, or NULL on a short read. */
static const uint8_t *window(msg_cur *cur, int64_t from, size_t need, size_t atleast)
{
    kp_buf *w = &cur->batch;
    int64_t wend = cur->wpos + (int64_t)w->len;
    if (from >= cur->wpos && from + (int64_t)need <= wend)
        return w->data + (from - cur->wpos);
    size_t keep = 0;
    if (from >= cur->wpos && from < wend) {            /* slide the tail down */
        keep = (size_t)(wend - from);
        memmove(w->data, w->data + (from - cur->wpos), keep);
    }
    size_t n = need > atleast ? need : atleast;
    if ((int64_t)n > cur->rend - from)
        n = (size_t)(cur->rend - from);
    w->len = keep;
    cur->wpos = from;
    uint8_t *p = kp_buf_reserve(w, n - keep);
    if (!p)
        return NULL;
    ssize_t r = pread_all(cur->fd, p, n - keep, (off_t)(from + (int64_t)keep));
    if (r < 0 || (size_t)r != n - keep)
        return NULL;
    w->len = n;
    return w->data;
}

/* The next record of a streamed batch: 1, 0 at its end, KP_E_NOMEM, or
 * another KP_E_* when it is unreadable (the rest of the batch is skipped,
 * as a whole batch that does not decode is). */
static int stream_next(msg_cur *cur, kp_record *rec)
{
    while (cur->left > 0 && cur->rpos < cur->rend) {
        /* The length (VARINT, at most 5 bytes), then Attributes INT8,
         * TimestampDelta VARLONG (10), OffsetDelta VARINT (5): the first 21
         * bytes say how big the record is and whether it is wanted.  They
         * are read with the chunk that follows: skipping small records one
         * by one would save preads but not disk reads (pages). */
        size_t avail = (size_t)(cur->rend - cur->rpos), vn = avail < 21 ? avail : 21;
        const uint8_t *p = window(cur, cur->rpos, vn, STREAM_CHUNK);
        if (!p)
            return cur->batch.err ? KP_E_NOMEM : KP_E_TRUNCATED;
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
            int64_t off = cur->hdr.BaseOffset + kp_rd_varint(&rd);
            if (kp_rd_ok(&rd) && off < cur->lo) {
                cur->rpos += (int64_t)total;
                cur->left--;
                continue;
            }
        }
        if (!(p = window(cur, cur->rpos, total, STREAM_CHUNK)))
            return cur->batch.err ? KP_E_NOMEM : KP_E_TRUNCATED;
        kp_rd_init(&rd, p, total);
        int rc = kp_rec_read(&rd, &cur->hdr, rec);
        if (rc != 1)
            return rc;
        cur->rpos += (int64_t)total;
        cur->left--;
        return 1;
    }
    return 0;
}

/* Moves to the next wanted record; sets eof at the end. */
static int advance(msg_cur *cur)
{
    for (;;) {
        if (!cur->cur && !start_partition(cur)) {
            cur->eof = true;
            return SQLITE_OK;
        }
        if (cur->in_batch) {
            int r = cur->streaming ? stream_next(cur, &cur->rec)
                                   : kp_rec_iter_next(&cur->it, &cur->rec);
            if (r == KP_E_NOMEM)
                return SQLITE_NOMEM;
            if (r == 1) {
                if (cur->rec.Offset < cur->lo)
                    continue;
                if (cur->rec.Offset >= cur->cap) {
                    close_partition(cur);
                    continue;
                }
                cur->rowid++;
                return SQLITE_OK;
            }
            cur->in_batch = false;
            continue;
        }
        if (cur->fd < 0) {
            if (!open_segment(cur)) {
                close_partition(cur);
                continue;
            }
        }
        uint8_t h[KP_BATCH_HEADER_SIZE];
        kp_batch b;
        int64_t size = -1;
        if (pread_all(cur->fd, h, sizeof h, (off_t)cur->pos) == (ssize_t)sizeof h)
            size = kp_batch_size(h, sizeof h);
        if (size < KP_BATCH_HEADER_SIZE || kp_batch_header(h, sizeof h, &b) || b.Magic != 2) {
            close(cur->fd);                          /* end of this segment */
            cur->fd = -1;
            cur->si++;
            continue;
        }
        if (b.BaseOffset >= cur->cap) {
            close_partition(cur);
            continue;
        }
        int64_t last = b.BaseOffset + b.LastOffsetDelta;
        bool is_control = (b.Attributes & KP_ATTR_CONTROL) != 0;
        if (last < cur->lo || is_control ||
            (cur->ts_lo > INT64_MIN && b.MaxTimestamp < cur->ts_lo)) {
            cur->pos += size;
            continue;
        }
        kp_buf_reset(&cur->batch);
        if ((b.Attributes & KP_ATTR_CODEC_MASK) == KP_CODEC_NONE) {
            cur->hdr = b;
            cur->wpos = cur->pos;                       /* empty window */
            cur->rpos = cur->pos + KP_BATCH_HEADER_SIZE;
            cur->rend = cur->pos + size;
            cur->left = b.RecordsCount;
            cur->pos += size;
            cur->streaming = cur->in_batch = true;
            continue;
        }
        cur->streaming = false;
        uint8_t *p = kp_buf_reserve(&cur->batch, (size_t)size);
        if (!p)
            return SQLITE_NOMEM;
        if (pread_all(cur->fd, p, (size_t)size, (off_t)cur->pos) != (ssize_t)size) {
            close(cur->fd);
            cur->fd = -1;
            cur->si++;
            continue;
        }
        cur->batch.len = (size_t)size;
        cur->pos += size;
        if (kp_rec_iter_start(&cur->it, cur->batch.data, (size_t)size) != 0)
            continue;                                /* undecodable: skip the batch */
        cur->in_batch = true;
    }
}

static int msg_filter(sqlite3_vtab_cursor *cc, int idx, const char *is, int argc,
                      sqlite3_value **argv)
{
    (void)is; (void)argc;
    msg_cur *cur = (msg_cur *)cc;
    close_partition(cur);
    free(cur->topic);
    cur->topic = NULL;
    cur->has_part = false;
    cur->lo = 0;
    cur->hi = INT64_MAX;
    cur->ts_lo = INT64_MIN;
    cur->eof = false;
    cur->rowid = 0;
    int a = 0;
    if (idx & B_TOPIC) {
        const char *t = (const char *)sqlite3_value_text(argv[a++]);
        cur->topic = strdup(t ? t : "");
        if (!t)
            cur->eof = true;
    }
    if (idx & B_PART) {
        sqlite3_value *v = argv[a++];
        int64_t p = sqlite3_value_int64(v);
        if (sqlite3_value_numeric_type(v) != SQLITE_INTEGER || p < 0 || p > INT32_MAX)
            cur->eof = true;
        cur->has_part = true;
        cur->part = (int32_t)p;
    }
    if (idx & B_EQ) {
        sqlite3_value *v = argv[a++];
        if (sqlite3_value_numeric_type(v) != SQLITE_INTEGER)
            cur->eof = true;
        cur->lo = sqlite3_value_int64(v);
        cur->hi = cur->lo < INT64_MAX ? cur->lo + 1 : INT64_MAX;
    }
    if (idx & B_LO) {
        sqlite3_value *v = argv[a++];
        double d = sqlite3_value_double(v);
        int64_t x = sqlite3_value_numeric_type(v) == SQLITE_INTEGER ? sqlite3_value_int64(v)
                  : d < -9e18 ? INT64_MIN : d > 9e18 ? INT64_MAX : (int64_t)d;
        if (sqlite3_value_type(v) == SQLITE_NULL) cur->eof = true;
        if (idx & B_LO_GT && x < INT64_MAX) x++;
        if (x > cur->lo) cur->lo = x;
    }
    if (idx & B_HI) {
        sqlite3_value *v = argv[a++];
        double d = sqlite3_value_double(v);
        int64_t x = sqlite3_value_numeric_type(v) == SQLITE_INTEGER ? sqlite3_value_int64(v)
                  : d < -9e18 ? INT64_MIN : d > 9e18 ? INT64_MAX : (int64_t)d;
        if (sqlite3_value_type(v) == SQLITE_NULL) cur->eof = true;
        if (!(idx & B_HI_LT) && x < INT64_MAX) x++;
        if (x < cur->hi) cur->hi = x;
    }
    if (idx & B_TS) {
        sqlite3_value *v = argv[a++];
        if (sqlite3_value_type(v) != SQLITE_NULL) {
            cur->ts_lo = sqlite3_value_int64(v);
            if (idx & B_TS_GT && cur->ts_lo < INT64_MAX) cur->ts_lo++;
        }
    }
    if (!cur->snap) {
        cur->snap = sq_conn_snap(cur->c);
        if (cur->snap)
            sq_snap_ref(cur->snap);
    }
    if (!cur->snap || cur->eof) {
        cur->eof = true;
        return SQLITE_OK;
    }
    cur->pi = 0;
    cur->pend = cur->snap->n;
    if (cur->topic) {                     /* the snapshot is sorted: narrow to the topic */
        size_t lo = 0, hi = cur->snap->n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (strcmp(cur->snap->rows[mid].topic, cur->topic) < 0) lo = mid + 1;
            else hi = mid;
        }
        cur->pi = lo;
        size_t e = lo;
        while (e < cur->snap->n && !strcmp(cur->snap->rows[e].topic, cur->topic))
            e++;
        cur->pend = e;
    }
    return advance(cur);
}

static int msg_next(sqlite3_vtab_cursor *cc) { return advance((msg_cur *)cc); }
static int msg_eof(sqlite3_vtab_cursor *cc) { return ((msg_cur *)cc)->eof; }

static bool utf8_ok(const char *s, int32_t n)
{
    const uint8_t *p = (const uint8_t *)s;
    int32_t i = 0;
    while (i < n) {
        uint8_t b = p[i];
        int k;
        if (b == 0) return false;
        if (b < 0x80) k = 0;
        else if ((b & 0xE0) == 0xC0) k = 1;
        else if ((b & 0xF0) == 0xE0) k = 2;
        else if ((b & 0xF8) == 0xF0) k = 3;
        else return false;
        if (n - i <= k) return false;
        for (int j = 1; j <= k; j++)
            if ((p[i + j] & 0xC0) != 0x80) return false;
        i += k + 1;
    }
    return true;
}

static void result_bytes(sqlite3_context *ctx, kp_str s)
{
    if (s.len < 0)
        sqlite3_result_null(ctx);
    else if (utf8_ok(s.p, s.len))
        sqlite3_result_text(ctx, s.len ? s.p : "", s.len, SQLITE_TRANSIENT);
    else
        sqlite3_result_blob(ctx, s.p, s.len, SQLITE_TRANSIENT);
}

static void json_str(kp_buf *o, kp_str s)
{
    if (s.len < 0) {
        kp_wr_raw(o, "null", 4);
        return;
    }
    if (!utf8_ok(s.p, s.len)) {                /* binary: hex, as the formats do */
        kp_wr_raw(o, "\"x'", 3);
        for (int32_t i = 0; i < s.len; i++)
            sq_printf(o, "%02x", (uint8_t)s.p[i]);
        kp_wr_raw(o, "'\"", 2);
        return;
    }
    kp_wr_raw(o, "\"", 1);
    for (int32_t i = 0; i < s.len; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch == '"' || ch == '\\') { char e[2] = { '\\', (char)ch }; kp_wr_raw(o, e, 2); }
        else if (ch < 0x20) sq_printf(o, "\\u%04x", ch);
        else kp_wr_raw(o, &s.p[i], 1);
    }
    kp_wr_raw(o, "\"", 1);
}

static int msg_column(sqlite3_vtab_cursor *cc, sqlite3_context *ctx, int col)
{
    msg_cur *cur = (msg_cur *)cc;
    switch (col) {
    case M_TOPIC: sqlite3_result_text(ctx, cur->cur->topic, -1, SQLITE_TRANSIENT); break;
    case M_PARTITION: sqlite3_result_int(ctx, cur->cur->partition); break;
    case M_OFFSET: sqlite3_result_int64(ctx, cur->rec.Offset); break;
    case M_TIMESTAMP: sqlite3_result_int64(ctx, cur->rec.Timestamp); break;
    case M_KEY: result_bytes(ctx, cur->rec.Key); break;
    case M_VALUE: result_bytes(ctx, cur->rec.Value); break;
    case M_HEADERS: {
        if (cur->rec.HeadersCount <= 0) {
            sqlite3_result_null(ctx);
            break;
        }
        kp_buf o;
        kp_buf_init(&o);
        kp_record r = cur->rec;                  /* kp_header_next advances a copy */
        kp_header h;
        kp_wr_raw(&o, "[", 1);
        for (int n = 0; kp_header_next(&r, &h) == 1; n++) {
            kp_wr_raw(&o, n ? ",{\"key\":" : "{\"key\":", n ? 8 : 7);
            json_str(&o, h.Key);
            kp_wr_raw(&o, ",\"value\":", 9);
            json_str(&o, h.Value);
            kp_wr_raw(&o, "}", 1);
        }
        kp_wr_raw(&o, "]", 1);
        sqlite3_result_text(ctx, (const char *)o.data, (int)o.len, SQLITE_TRANSIENT);
        kp_buf_free(&o);
        break;
    }
    }
    return SQLITE_OK;
}

static int msg_rowid(sqlite3_vtab_cursor *cc, sqlite3_int64 *id)
{
    *id = ((msg_cur *)cc)->rowid;
    return SQLITE_OK;
}

static sqlite3_module msg_module = {
    .xConnect = msg_connect, .xBestIndex = msg_best_index, .xDisconnect = msg_disconnect,
    .xOpen = msg_open, .xClose = msg_close, .xFilter = msg_filter, .xNext = msg_next,
    .xEof = msg_eof, .xColumn = msg_column, .xRowid = msg_rowid,
};

int sq_messages_register(sq_conn *c)
{
    return sqlite3_create_module(c->db, "messages", &msg_module, c) ? -1 : 0;
}
