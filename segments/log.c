/*
 * segments/log.c — a partition log: open with recovery, append, roll,
 * flush, close, destroy.  Reads are in read.c, retention and truncation
 * in retention.c.
 *
 * Invariants:
 *   L1. segs[] is sorted by base and never empty after seg_open; segs[n-1]
 *       is the active segment, the only one appended to.
 *   L2. log_end == segs[n-1]->next; log_start <= log_end;
 *       recovery_point <= log_end.
 *   L3. A batch becomes readable (s->size grows past it) only after its
 *       bytes were written whole; a failed write is cut back with
 *       ftruncate and the log latches its error state.
 *   L4. segs[]/n, log_end, recovery_point and trunc_gen change only under
 *       mu, which the flusher takes only to copy file references and to
 *       publish its result: never across an fdatasync.
 *   L5. Every change to the files a flush syncs (an append, a new or
 *       removed segment, a truncation, a compacted swap) bumps `changes`
 *       under mu; a flush that finds `changes` as its last successful one
 *       left it syncs nothing (a clean stop of an idle partition costs no
 *       fsync).  seg_open counts its own repairs as synced only when the
 *       recovery point it was given is the log end it found: those files
 *       were made durable by the flush that recorded it, and what open
 *       itself writes (index trims and rebuilds of the always-scanned
 *       active segment) it would write again.
 *   L6. Time rolls happen only in an append, as Kafka's shouldRoll: when
 *       the newest MaxTimestamp appended less the active segment's first
 *       MaxTimestamp (roll_ts; without one, the wall clock less that
 *       of the first append, or of the open) exceeds segment.ms less
 *       its jitter.
 *       Opening a log never rolls it, nor sets the clock to anything but
 *       what its first batch says.
 *   L7. Offsets only grow, and may skip: seg_append_assigned takes a first
 *       batch whose BaseOffset is at or past the log end (never before
 *       it), as Kafka's follower does (UnifiedLog.append without assigned
 *       offsets refuses only offsets below the log end or out of order),
 *       since a leader or link source that compacted the batch at our log
 *       end answers with the next one it kept.  The skipped offsets are a
 *       gap like a cleaner's: reads at an offset in it get the next batch
 *       (read.c), recovery allows it (recover.c R3), and a roll for that
 *       append starts the new segment at the batch's BaseOffset (as does
 *       an empty active segment too far below it: rebase_empty).
 *
 * States:
 *
 *   seg_open ──► HEALTHY ──(write / fdatasync error)──► FAILED
 *                  ▲ append, roll, read, retention       │ reads still
 *                  ├──────── seg_close + seg_open ◄──────┤ served;
 *                  └──────── seg_reset_error ◄───────────┘ appends get
 *                            (cut to s->size, fdatasync ok)  SEG_E_STATE
 */
#include <dirent.h>
#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "segments/seg_int.h"

void seg_config_default(seg_config *c)
{
    c->segment_bytes = 1ull << 30;
    c->segment_ms = 7LL * 24 * 3600 * 1000;
    c->segment_jitter_ms = 0;
    c->index_interval_bytes = 4096;
    c->segment_index_bytes = 10u << 20;
}

/* Positions are INT32 in the index, so a segment stays below 2 GiB. */
static void config_sane(seg_config *c)
{
    if (c->segment_bytes == 0 || c->segment_bytes > INT32_MAX)
        c->segment_bytes = INT32_MAX;
    if (c->segment_index_bytes < 4 * SEG_TIDX_ENTRY)
        c->segment_index_bytes = 4 * SEG_TIDX_ENTRY;
}

void seg_set_config(seg_log *log, const seg_config *cfg)
{
    log->cfg = *cfg;
    config_sane(&log->cfg);
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- getters ------------------------------------------------------------- */
int64_t seg_log_start(const seg_log *log) { return log->log_start; }
int64_t seg_log_end(const seg_log *log) { return log->log_end; }
uint64_t seg_size_bytes(const seg_log *log) { return log->size; }
int seg_segment_count(const seg_log *log) { return log->n; }
int seg_last_errno(const seg_log *log) { return atomic_load(&log->last_errno); }
bool seg_failed(const seg_log *log) { return atomic_load(&log->failed); }
int64_t seg_max_timestamp(const seg_log *log) { return log->max_ts; }

int64_t seg_recovery_point(const seg_log *log)
{
    seg_log *l = (seg_log *)log;        /* the lock is not part of the value */
    pthread_mutex_lock(&l->mu);
    int64_t rp = l->recovery_point;
    pthread_mutex_unlock(&l->mu);
    return rp;
}

int seg_log_fail(seg_log *log, int err)
{
    atomic_store(&log->last_errno, err);
    atomic_store(&log->failed, true);
    return SEG_E_IO;
}

/* FAILED → HEALTHY.  What a failed append may have left: bytes past
 * s->size in the active .log (a short write whose ftruncate also failed),
 * index entries for batches that never became readable (the index could
 * not grow), a half-created next segment (ignored: a roll recreates its
 * files).  seg_segment_cut removes the first two; the fdatasync proves
 * the device takes writes again before we promise anything. */
int seg_reset_error(seg_log *log)
{
    if (!seg_failed(log))
        return 0;
    seg_segment *s = log->segs[log->n - 1];
    if (seg_segment_cut(s, s->size) != 0)
        return seg_log_fail(log, errno ? errno : EIO);
    int rc;
    do rc = fdatasync(s->log->fd); while (rc < 0 && errno == EINTR);
    if (rc < 0)
        return seg_log_fail(log, errno);
    atomic_store(&log->last_errno, 0);
    atomic_store(&log->failed, false);
    return 0;
}

/* ---- segment list (L4) --------------------------------------------------- */
int seg_log_push(seg_log *log, seg_segment *s)
{
    if (log->n == log->cap) {
        int cap = log->cap ? log->cap * 2 : 8;
        pthread_mutex_lock(&log->mu);
        seg_segment **a = realloc(log->segs, (size_t)cap * sizeof *a);
        if (a) { log->segs = a; log->cap = cap; }
        pthread_mutex_unlock(&log->mu);
        if (!a)
            return SEG_E_IO;
    }
    pthread_mutex_lock(&log->mu);
    log->segs[log->n++] = s;
    log->log_end = s->next;
    log->changes++;                              /* L5 */
    pthread_mutex_unlock(&log->mu);
    log->size += s->size;
    return 0;
}

/* Removes segs[i] from the list and deletes its files. */
void seg_log_remove(seg_log *log, int i, uint64_t *freed, bool rename_now)
{
    seg_segment *s = log->segs[i];
    seg_txn_segment_gone(log, i);                /* txnindex.c X1 */
    pthread_mutex_lock(&log->mu);
    memmove(log->segs + i, log->segs + i + 1,
            (size_t)(log->n - i - 1) * sizeof *log->segs);
    log->n--;
    log->changes++;                              /* L5: its name goes */
    pthread_mutex_unlock(&log->mu);
    log->size -= s->size;
    if (freed)
        *freed += s->size;
    if (log->defer_delete) {
        /* Retention: even the rename waits for the janitor, so a mass
         * deletion costs the owner only this detach (bench: 10,000
         * partitions).  Retention only removes bases below the log start,
         * which no new segment takes (truncation renames at once). */
        if (rename_now)
            seg_segment_rename_deleted(log->dir, s->base);
        seg_log_bury(log, s, rename_now);
    } else {
        seg_segment_delete(log->dir, s);
    }
}

void seg_log_bury(seg_log *log, seg_segment *s, bool renamed)
{
    seg_dead *d = calloc(1, sizeof *d);
    if (!d || !(d->dir = strdup(log->dir))) {
        /* No memory to remember it: unlink now (readers keep their fd). */
        free(d);
        if (!renamed)
            seg_segment_rename_deleted(log->dir, s->base);
        seg_segment_unlink_deleted(log->dir, s->base);
        seg_segment_free(s);
        return;
    }
    d->s = s;
    d->renamed = renamed;
    d->next = log->dead;
    log->dead = d;
}

void seg_set_deferred_delete(seg_log *log, bool on) { log->defer_delete = on; }

seg_dead *seg_take_dead(seg_log *log)
{
    seg_dead *d = log->dead;
    log->dead = NULL;
    return d;
}

int seg_dead_count(const seg_dead *d)
{
    int n = 0;
    for (; d; d = d->next)
        n++;
    return n;
}

uint64_t seg_dead_bytes(const seg_dead *d)
{
    uint64_t n = 0;
    for (; d; d = d->next)
        n += d->s->size;
    return n;
}

void seg_dead_rename(seg_dead *d)
{
    for (; d; d = d->next)
        if (!d->renamed) {
            seg_segment_rename_deleted(d->dir, d->s->base);
            d->renamed = true;
        }
}

void seg_dead_unlink(seg_dead *d)
{
    while (d) {
        seg_dead *next = d->next;
        if (!d->renamed)
            seg_segment_rename_deleted(d->dir, d->s->base);
        seg_segment_unlink_deleted(d->dir, d->s->base);
        seg_segment_free(d->s);
        free(d->dir);
        free(d);
        d = next;
    }
}

/* ---- open / recovery ----------------------------------------------------- */
static int mkdir_p(const char *dir)
{
    char tmp[4096];
    size_t len = strlen(dir);
    if (len == 0 || len >= sizeof tmp)
        return -1;
    memcpy(tmp, dir, len + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

int64_t seg_name_base(const char *name, const char *ext)
{
    size_t n = strlen(name);
    if (n != 20 + strlen(ext) || strcmp(name + 20, ext) != 0)
        return -1;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9' || v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* "<20 digits>.<20 digits>.swap" → base and end, or -1. */
static int swap_name(const char *name, int64_t *b, int64_t *e)
{
    char tmp[64];
    if (strlen(name) != 46 || strcmp(name + 41, ".swap") != 0 || name[20] != '.')
        return -1;
    memcpy(tmp, name, 20);
    strcpy(tmp + 20, ".log");
    *b = seg_name_base(tmp, ".log");
    memcpy(tmp, name + 21, 20);
    strcpy(tmp + 20, ".log");
    *e = seg_name_base(tmp, ".log");
    return *b < 0 || *e < 0 ? -1 : 0;
}

/* Finishes or forgets a compaction a crash interrupted (cleaner.c):
 * the staging directory goes; a B.E.swap file is the committed result for
 * the segments with bases in [B, E): whatever of them is left goes, and
 * the swap becomes B.log (its indexes are rebuilt by the scan). */
static void recover_cleaning(const char *dir)
{
    char path[4200], to[4200];
    snprintf(path, sizeof path, "%s/cleaning", dir);
    seg_remove_dir(path);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    int64_t sb[64], se[64];
    int ns = 0;
    while ((e = readdir(d)) && ns < 64)
        if (swap_name(e->d_name, &sb[ns], &se[ns]) == 0)
            ns++;
    for (int i = 0; i < ns; i++) {
        rewinddir(d);
        while ((e = readdir(d))) {
            int64_t b = seg_name_base(e->d_name, ".log");
            if (b < 0) b = seg_name_base(e->d_name, ".index");
            if (b < 0) b = seg_name_base(e->d_name, ".timeindex");
            if (b < 0) b = seg_name_base(e->d_name, ".txnindex");
            if (b >= sb[i] && b < se[i]) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        }
        snprintf(path, sizeof path, "%s/%020" PRId64 ".%020" PRId64 ".swap",
                 dir, sb[i], se[i]);
        seg_path(to, sizeof to, dir, sb[i], ".log");
        rename(path, to);
    }
    closedir(d);
}

/* Lists segment bases; removes *.deleted leftovers and orphan indexes. */
static int list_bases(const char *dir, int64_t **out, int *count)
{
    DIR *d = opendir(dir);
    if (!d)
        return SEG_E_IO;
    int64_t *v = NULL;
    int n = 0, cap = 0;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 8 && strcmp(e->d_name + len - 8, ".deleted") == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);           /* a deletion a crash interrupted */
            continue;
        }
        int64_t b = seg_name_base(e->d_name, ".log");
        if (b < 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *w = realloc(v, (size_t)cap * sizeof *w);
            if (!w) { free(v); closedir(d); return SEG_E_IO; }
            v = w;
        }
        v[n++] = b;
    }
    rewinddir(d);
    while ((e = readdir(d))) {
        int64_t b = seg_name_base(e->d_name, ".index");
        if (b < 0)
            b = seg_name_base(e->d_name, ".timeindex");
        if (b < 0)
            b = seg_name_base(e->d_name, ".txnindex");
        if (b < 0)
            continue;
        bool found = false;
        for (int i = 0; i < n && !found; i++)
            found = v[i] == b;
        if (!found) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_i64);
    *out = v;
    *count = n;
    return 0;
}

static void unlink_segment_files(const char *dir, int64_t base)
{
    static const char *const ext[] = { ".log", ".index", ".timeindex", ".txnindex" };
    char path[4096];
    for (int i = 0; i < 4; i++) {
        seg_path(path, sizeof path, dir, base, ext[i]);
        unlink(path);
    }
}

/* Opens an existing segment's files (indexes created when missing). */
static int segment_load(const char *dir, int64_t base, seg_segment **out,
                        bool *idx_missing)
{
    char path[4096];
    seg_segment *s = calloc(1, sizeof *s);
    if (!s)
        return SEG_E_IO;
    s->base = s->next = base;
    s->max_ts = -1;
    seg_path(path, sizeof path, dir, base, ".log");
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !(s->log = seg_file_new(fd))) {
        if (fd >= 0)
            close(fd);
        free(s);
        return SEG_E_IO;
    }
    s->size = (uint64_t)st.st_size;
    *idx_missing = false;
    static const char *const ext[] = { ".index", ".timeindex" };
    seg_idx *x[] = { &s->idx, &s->tidx };
    for (int i = 0; i < 2; i++) {
        seg_path(path, sizeof path, dir, base, ext[i]);
        if (access(path, F_OK) != 0)
            *idx_missing = true;
        if (seg_idx_open(x[i], path, i ? SEG_TIDX_ENTRY : SEG_OIDX_ENTRY,
                         true)) {
            seg_segment_free(s);
            return SEG_E_IO;
        }
    }
    *out = s;
    return 0;
}

/* Recovers the loaded segment s (position i of n).  Returns 0 if the
 * whole segment is good, 1 if it was cut (everything after must go). */
static int segment_recover(seg_log *log, seg_segment *s, bool trusted,
                           bool idx_missing, int64_t min_base)
{
    if (trusted && !idx_missing && s->base >= min_base &&
        seg_index_check(s) == 0 && seg_segment_tail(s, &log->cfg) == 0)
        return 0;
    /* A flushed segment whose index or tail looks wrong is rebuilt with
     * the full check too: CRCs are cheap next to serving garbage. */
    seg_scan_result r;
    if (seg_scan(s, &log->cfg, true, min_base, &r))
        return SEG_E_IO;
    if (r.clean)
        return 0;
    int rc;
    do rc = ftruncate(s->log->fd, (off_t)r.valid_bytes);
    while (rc < 0 && errno == EINTR);
    return rc < 0 ? SEG_E_IO : 1;
}

static int first_batch_ts(seg_segment *s, int64_t *ts)
{
    uint8_t h[SEG_HDR_PEEK];
    if (s->size < sizeof h ||
        seg_pread_full(s->log->fd, h, sizeof h, 0) != (ssize_t)sizeof h)
        return -1;
    *ts = seg_be64(h + KP_BATCH_OFF_MaxTimestamp);
    return *ts >= 0 ? 0 : -1;
}

int seg_open(const seg_open_opts *opts, seg_log **out)
{
    if (!opts || !opts->dir || mkdir_p(opts->dir) < 0)
        return SEG_E_IO;
    seg_log *log = calloc(1, sizeof *log);
    if (!log || !(log->dir = strdup(opts->dir))) {
        free(log);
        return SEG_E_IO;
    }
    log->cfg = opts->cfg;
    config_sane(&log->cfg);
    pthread_mutex_init(&log->mu, NULL);
    atomic_init(&log->failed, false);
    atomic_init(&log->last_errno, 0);
    int64_t now = wall_ms();

    recover_cleaning(log->dir);
    int64_t *bases = NULL;
    int nb = 0, rc = list_bases(log->dir, &bases, &nb);
    /* Segments holding offsets >= recovery_point get the full scan. */
    int scan_from = 0;
    while (scan_from + 1 < nb && bases[scan_from + 1] <= opts->recovery_point)
        scan_from++;
    int64_t min_base = INT64_MIN;
    for (int i = 0; rc == 0 && i < nb; i++) {
        seg_segment *s;
        bool missing;
        if ((rc = segment_load(log->dir, bases[i], &s, &missing)))
            break;
        int r = segment_recover(log, s, i < scan_from, missing, min_base);
        if (r < 0) {
            seg_segment_free(s);
            rc = SEG_E_IO;
            break;
        }
        if ((rc = seg_log_push(log, s))) {
            seg_segment_free(s);
            break;
        }
        min_base = s->next;
        if (r == 1) {           /* the log ends here */
            for (int j = i + 1; j < nb; j++)
                unlink_segment_files(log->dir, bases[j]);
            break;
        }
    }
    free(bases);
    if (rc == 0 && log->n == 0) {
        seg_segment *s;
        int64_t base = opts->log_start_offset > 0 ? opts->log_start_offset : 0;
        if ((rc = seg_segment_create(log->dir, base, &log->cfg, now, &s)) == 0 &&
            (rc = seg_log_push(log, s)))
            seg_segment_free(s);
    }
    if (rc == 0) {
        seg_segment *a = log->segs[log->n - 1];
        for (int i = 0; i + 1 < log->n; i++)
            seg_segment_seal(log->segs[i], log->dir);     /* index.c, I5 */
        rc = seg_segment_activate(a, &log->cfg);
        if (first_batch_ts(a, &a->roll_ts) < 0)     /* L6: never a roll here */
            a->roll_ts = -1;
        a->created_ms = now;
        a->roll_jitter_ms = seg_roll_jitter(&log->cfg);
    }
    if (rc) {
        int e = errno;              /* the caller reports why (EMFILE …) */
        seg_close(log);
        errno = e;
        return SEG_E_IO;
    }
    log->log_end = log->segs[log->n - 1]->next;
    log->log_start = opts->log_start_offset > log->segs[0]->base
                         ? opts->log_start_offset : log->segs[0]->base;
    if (log->log_start > log->log_end)
        log->log_start = log->log_end;
    log->recovery_point = opts->recovery_point < log->log_end
                              ? opts->recovery_point : log->log_end;
    if (log->recovery_point < 0)
        log->recovery_point = 0;
    log->synced_changes = log->changes - (opts->recovery_point == log->log_end ? 0 : 1);  /* L5 */
    log->max_ts = -1;
    for (int i = 0; i < log->n; i++)
        if (log->segs[i]->max_ts > log->max_ts)
            log->max_ts = log->segs[i]->max_ts;
    log->txn_failed = log->txn_unsynced = log->txn_rebuild_from = -1;
    for (int i = 0; i < log->n; i++) {
        int kept = log->ntxns;
        if (seg_txn_load(log, i) != 0) {  /* the replay re-adds from here (txnindex.c X3) */
            log->ntxns = kept;
            log->txn_rebuild_from = log->segs[i]->base;
            break;
        }
    }
    seg_clean_load_checkpoint(log);     /* clean_end, delete_horizon */
    if (seg_epoch_load(log, log->recovery_point) != 0) {     /* epochs.c, E5 */
        seg_close(log);
        return SEG_E_IO;
    }
    *out = log;
    return 0;
}

void seg_close(seg_log *log)
{
    if (!log)
        return;
    seg_dead_unlink(seg_take_dead(log));
    for (int i = 0; i < log->n; i++) {
        seg_segment *s = log->segs[i];
        if (i == log->n - 1) {  /* trim the preallocated tail (index.c) */
            seg_idx_trim(&s->idx);
            seg_idx_trim(&s->tidx);
        }
        seg_segment_free(s);
    }
    free(log->segs);
    free(log->epochs);
    free(log->epochs_saved);
    free(log->txns);
    pthread_mutex_destroy(&log->mu);
    free(log->dir);
    free(log);
}

static int rm_entry(const char *p, const struct stat *st, int flag,
                    struct FTW *f)
{
    (void)st; (void)f;
    return (flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 ? -1 : 0;
}

int seg_remove_dir(const char *dir)
{
    if (access(dir, F_OK) != 0)
        return 0;
    return nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS) == 0 ? 0 : SEG_E_IO;
}

int seg_rename_dir(seg_log *log, const char *newdir)
{
    char *d = strdup(newdir);
    if (!d || rename(log->dir, newdir) < 0) {
        free(d);
        return SEG_E_IO;
    }
    pthread_mutex_lock(&log->mu);       /* seg_flush copies it */
    free(log->dir);
    log->dir = d;
    pthread_mutex_unlock(&log->mu);
    for (int i = 0; i + 1 < log->n; i++)     /* their names moved (index.c I5) */
        seg_segment_seal(log->segs[i], d);
    return 0;
}

int seg_destroy(seg_log *log)
{
    char *dir = strdup(log->dir);
    seg_close(log);
    if (!dir)
        return SEG_E_IO;
    int rc = seg_remove_dir(dir);
    free(dir);
    return rc;
}

/* ---- roll ------------------------------------------------------------------ */
/* The new segment starts at `base`: the log end, or (L7) the BaseOffset of
 * a follower's first batch past it, as Kafka rolls at
 * max(expectedNextOffset, logEndOffset). */
static int roll_now(seg_log *log, int64_t base, int64_t now_ms)
{
    seg_segment *old = log->segs[log->n - 1], *s;
    if (old->size == 0)
        return 0;
    /* Its index tails reach the file before the new segment is published:
     * a flush that sees the new one (and so may make the old one trusted
     * at the next open) fdatasyncs the old indexes after this (index.c). */
    if (seg_idx_spill(&old->idx) || seg_idx_spill(&old->tidx))
        return seg_log_fail(log, errno);
    int rc = seg_segment_create(log->dir, base, &log->cfg, now_ms, &s);
    if (rc)
        return seg_log_fail(log, errno);
    if ((rc = seg_log_push(log, s))) {
        seg_segment_delete(log->dir, s);
        return seg_log_fail(log, ENOMEM);
    }
    /* Sealed: give back the preallocated index space, and the index fds
     * (index.c, I5). */
    seg_segment_seal(old, log->dir);
    return 0;
}

/* L7: an empty active segment whose base is more than INT32_MAX below a
 * follower's first batch cannot index it, and roll_now keeps an empty
 * segment: it is replaced by one at the batch's BaseOffset (the new one
 * pushed first, so segs[] is never empty, L1). */
static int rebase_empty(seg_log *log, int64_t base, int64_t now_ms)
{
    seg_segment *s;
    if (seg_segment_create(log->dir, base, &log->cfg, now_ms, &s))
        return seg_log_fail(log, errno);
    if (seg_log_push(log, s)) {
        seg_segment_delete(log->dir, s);
        return seg_log_fail(log, ENOMEM);
    }
    seg_log_remove(log, log->n - 2, NULL, true);
    return 0;
}

int seg_roll(seg_log *log, int64_t now_ms)
{
    if (seg_failed(log))
        return SEG_E_STATE;
    return roll_now(log, log->log_end, now_ms);
}

/* ---- append (the produce hot path) ----------------------------------------- */
/* L6, Kafka's LogSegment.shouldRoll by time: the newest MaxTimestamp of
 * the batches being appended, less the first batch's MaxTimestamp (the
 * wall clock less the segment's creation when that one has none), beyond
 * segment.ms less the segment's jitter.  Cost: one header load per batch. */
static bool roll_due(const seg_segment *s, const seg_config *c,
                     const uint8_t *buf, size_t len, int64_t now_ms)
{
    if (c->segment_ms <= 0)
        return false;
    int64_t waited;
    if (s->roll_ts >= 0) {
        int64_t newest = -1;
        for (size_t off = 0; off < len;
             off += KP_BATCH_LOG_OVERHEAD + (size_t)seg_be32(buf + off + KP_BATCH_OFF_BatchLength))
            if (seg_be64(buf + off + KP_BATCH_OFF_MaxTimestamp) > newest)
                newest = seg_be64(buf + off + KP_BATCH_OFF_MaxTimestamp);
        waited = newest - s->roll_ts;
    } else {
        waited = now_ms - s->created_ms;
    }
    return waited > c->segment_ms - s->roll_jitter_ms;
}

/* Writes len bytes of nb batches whose offsets run [first, end) into the
 * active segment (first: the log end, or past it, L7), rolling first when
 * asked to.  Cost: O(nb) header touches,
 * one pwrite (looped only on a short write), no allocation. */
static int write_batches(seg_log *log, uint8_t *buf, size_t len, int nb,
                         int64_t first, int64_t end, int64_t now_ms,
                         bool rewrite)
{
    seg_segment *s = log->segs[log->n - 1];
    const seg_config *c = &log->cfg;
    if (s->size > 0 &&
        (s->size + len > c->segment_bytes ||
         roll_due(s, c, buf, len, now_ms) ||
         s->idx.n + (uint64_t)nb > c->segment_index_bytes / SEG_OIDX_ENTRY ||
         s->tidx.n + (uint64_t)nb > c->segment_index_bytes / SEG_TIDX_ENTRY ||
         end - 1 - s->base > INT32_MAX || s->size + len > INT32_MAX)) {
        int rc = roll_now(log, first, now_ms);      /* first >= log end (L7) */
        if (rc)
            return rc;
        s = log->segs[log->n - 1];
    }
    if (s->size == 0 && first > s->base && end - 1 - s->base > INT32_MAX) {
        int rc = rebase_empty(log, first, now_ms);
        if (rc)
            return rc;
        s = log->segs[log->n - 1];
    }
    if (end - 1 - s->base > INT32_MAX || s->size + len > INT32_MAX)
        return SEG_E_TOOBIG;        /* even a fresh segment cannot hold it */
    if (s->size == 0) {             /* L6: the first batch sets the clock */
        s->roll_ts = seg_be64(buf + KP_BATCH_OFF_MaxTimestamp);
        s->created_ms = now_ms;
    }

    if (rewrite) {                  /* BaseOffset is outside the CRC */
        int64_t o = first;
        for (size_t off = 0; off < len;) {
            uint8_t *p = buf + off;
            kp_batch_set_base_offset(p, o);
            o += (int64_t)seg_be32(p + KP_BATCH_OFF_LastOffsetDelta) + 1;
            off += (size_t)seg_be32(p + KP_BATCH_OFF_BatchLength) + KP_BATCH_LOG_OVERHEAD;
        }
    }
    uint64_t pos = s->size;
    if (seg_pwrite_full(s->log->fd, buf, len, (off_t)pos) < 0) {
        int err = errno;
        int rc;
        /* L3: cut the partial bytes off; if even that fails, s->size
         * still hides them and recovery will cut them at the next open. */
        do rc = ftruncate(s->log->fd, (off_t)pos); while (rc < 0 && errno == EINTR);
        return seg_log_fail(log, err);
    }
    for (size_t off = 0; off < len;) {
        const uint8_t *p = buf + off;
        uint32_t size = (uint32_t)seg_be32(p + KP_BATCH_OFF_BatchLength) + KP_BATCH_LOG_OVERHEAD;
        if (seg_segment_index_batch(s, c, (int32_t)(seg_be64(p) - s->base),
                                    pos + off, size, seg_be64(p + KP_BATCH_OFF_MaxTimestamp)))
            return seg_log_fail(log, errno ? errno : EIO);
        /* epochs.c, E2: one compare per batch while the epoch stays. */
        if (seg_epoch_assign(log, seg_be32(p + KP_BATCH_OFF_PartitionLeaderEpoch), seg_be64(p)) < 0)
            return seg_log_fail(log, ENOMEM);
        off += size;
    }
    s->size += len;
    s->next = end;
    log->size += len;
    if (s->max_ts > log->max_ts)
        log->max_ts = s->max_ts;
    pthread_mutex_lock(&log->mu);
    log->log_end = end;
    log->changes++;                              /* L5 */
    pthread_mutex_unlock(&log->mu);
    return 0;
}

/* Walks the batch framing.  assigned (L7): offsets start at or past the
 * log end and never go backwards, and each batch passes the stored-batch
 * check. */
static int frame_batches(seg_log *log, const uint8_t *buf, size_t len,
                         bool assigned, int *nb, int64_t *count_or_end)
{
    int n = 0;
    int64_t count = 0, expect = log->log_end;
    for (size_t off = 0; off < len; n++) {
        const uint8_t *p = buf + off;
        size_t left = len - off;
        if (left < KP_BATCH_HEADER_SIZE)
            return SEG_E_INVALID;
        int64_t size = kp_batch_size(p, left);
        if (size < KP_BATCH_HEADER_SIZE || (uint64_t)size > left)
            return SEG_E_INVALID;
        if ((uint64_t)size > log->cfg.segment_bytes)
            return SEG_E_TOOBIG;
        int32_t lod = seg_be32(p + KP_BATCH_OFF_LastOffsetDelta);
        if (lod < 0 || n == INT32_MAX)
            return SEG_E_INVALID;
        if (assigned) {
            kp_batch h;
            int64_t base = seg_be64(p);
            if (base < expect ||
                kp_batch_check_stored(p, (size_t)size, &h) != size)
                return SEG_E_INVALID;
            expect = base + lod + 1;
        }
        count += (int64_t)lod + 1;
        off += (size_t)size;
    }
    if (n == 0)
        return SEG_E_INVALID;
    *nb = n;
    *count_or_end = assigned ? expect : count;
    return 0;
}

int seg_append(seg_log *log, uint8_t *batches, size_t len, int64_t now_ms,
               int64_t *base_offset)
{
    if (seg_failed(log))
        return SEG_E_STATE;
    int nb;
    int64_t count;
    int rc = frame_batches(log, batches, len, false, &nb, &count);
    if (rc)
        return rc;
    int64_t first = log->log_end;
    rc = write_batches(log, batches, len, nb, first, first + count, now_ms,
                       true);
    if (rc == 0 && base_offset)
        *base_offset = first;
    return rc;
}

int seg_append_assigned(seg_log *log, const uint8_t *batches, size_t len,
                        int64_t now_ms)
{
    if (seg_failed(log))
        return SEG_E_STATE;
    int nb;
    int64_t end;
    int rc = frame_batches(log, batches, len, true, &nb, &end);
    if (rc)
        return rc;
    /* Not rewritten: the cast only satisfies the shared writer.  A first
     * BaseOffset past the log end leaves the offsets between empty (L7). */
    return write_batches(log, (uint8_t *)batches, len, nb, seg_be64(batches), end,
                         now_ms, false);
}

/* ---- flush (worker thread) -------------------------------------------------- */
static int sync_fd(int fd)
{
    int rc;
    do rc = fdatasync(fd); while (rc < 0 && errno == EINTR);
    return rc;
}

int seg_flush(seg_log *log, int64_t *flushed_to)
{
    if (seg_failed(log))
        return SEG_E_STATE;
    pthread_mutex_lock(&log->mu);
    int64_t end = log->log_end, rp = log->recovery_point;
    uint64_t gen = log->trunc_gen, changes = log->changes;
    if (changes == log->synced_changes && log->txn_unsynced < 0) {  /* L5 */
        if (flushed_to)
            *flushed_to = rp;
        pthread_mutex_unlock(&log->mu);
        return 0;
    }
    int first = log->n - 1;
    while (first > 0 && log->segs[first]->base > rp)
        first--;
    int tfirst = seg_txn_sync_first(log, first);   /* txnindex.c X3 */
    bool tpending = log->txn_unsynced >= 0;
    uint64_t twrites = log->txn_writes;
    int k = log->n - first, nb = log->n - tfirst, off = first - tfirst;
    seg_file **files = malloc((size_t)k * sizeof *files);
    int64_t *bases = malloc((size_t)nb * sizeof *bases);
    char *dir = strdup(log->dir);
    for (int i = 0; files && bases && i < nb; i++) {
        seg_segment *s = log->segs[tfirst + i];
        if (i >= off) {
            seg_file_ref(s->log);
            files[i - off] = s->log;
        }
        bases[i] = s->base;
    }
    pthread_mutex_unlock(&log->mu);
    if (!files || !bases || !dir) {
        if (files && bases)
            for (int i = 0; i < k; i++)
                seg_file_unref(files[i]);
        free(files);
        free(bases);
        free(dir);
        return SEG_E_IO;
    }

    int err = 0;
    /* The lock is not held here (L4): appends go on meanwhile; what they
     * add past `end` is simply not promised by this flush. */
    for (int i = 0; i < k; i++)
        if (sync_fd(files[i]->fd) < 0 && !err)
            err = errno;
    /* Indexes by name: the owner alone touches a seg_idx, whose fd may be
     * closed (sealed, index.c I5) or reopened meanwhile.  A name gone
     * means its segment left the log (retention or truncation, which
     * bumps trunc_gen) or was swapped for a compacted one already synced
     * (cleaner.c, C1): nothing this flush promises.  The .txnindex files
     * written since the last flush too (txnindex.c X3). */
    for (int i = 0; i < 2 * k + (tpending ? nb : 0); i++) {
        char path[4096];
        if (i < 2 * k)
            seg_path(path, sizeof path, dir, bases[off + i / 2],
                     i % 2 ? ".timeindex" : ".index");
        else
            seg_path(path, sizeof path, dir, bases[i - 2 * k], ".txnindex");
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT && !err)
            err = errno;
        if (fd >= 0 && sync_fd(fd) < 0 && !err)
            err = errno;
        if (fd >= 0)
            close(fd);
    }
    free(bases);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || sync_fd(dfd) < 0)      /* new segment names */
        err = err ? err : errno;
    if (dfd >= 0)
        close(dfd);
    for (int i = 0; i < k; i++)
        seg_file_unref(files[i]);
    free(files);
    free(dir);
    if (err)    /* after a failed fdatasync the page cache can't be trusted */
        return seg_log_fail(log, err);

    pthread_mutex_lock(&log->mu);
    if (gen == log->trunc_gen && end > log->recovery_point)
        log->recovery_point = end < log->log_end ? end : log->log_end;
    if (changes > log->synced_changes)
        log->synced_changes = changes;
    if (tpending && twrites == log->txn_writes)
        log->txn_unsynced = -1;                  /* txnindex.c X3 */
    if (flushed_to)
        *flushed_to = log->recovery_point;
    pthread_mutex_unlock(&log->mu);
    return 0;
}
