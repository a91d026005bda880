/*
 * segments/epochs.c — the log's leader-epoch history: which leader epoch
 * wrote the log from which offset on (Kafka's LeaderEpochFileCache), kept
 * in memory on the seg_log and on disk in Kafka's format:
 *
 *     <dir>/leader-epoch-checkpoint, text:
 *       0\n                          format version
 *       <count>\n                    entries that follow
 *       <epoch> <startOffset>\n      ... count times, epochs increasing
 *
 * A follower asks its new leader where the epoch of its own last batch
 * ends (OffsetForLeaderEpoch, answered from seg_epoch_end_offset) and
 * truncates there, so a tail the new leader never had is cut exactly at
 * the divergence.
 *
 * Invariants:
 *   E1. Entries are strictly increasing in epoch and non-decreasing in
 *       start offset; every start offset lies in [log start, log end].
 *       seg_epoch_assign enforces it as Kafka's assign does: a new entry
 *       removes every entry with an epoch >= its own or a start >= its own.
 *   E2. Every append passes each batch's PartitionLeaderEpoch to
 *       seg_epoch_assign (log.c, write_batches): a leader's batches carry
 *       the epoch it stamped, a follower's the leader's, so both keep the
 *       same history.  A leader also assigns its epoch at its log end when
 *       it takes over (the daemon calls seg_epoch_assign), so it answers
 *       for an epoch that has no batch yet.
 *   E3. Truncation (retention.c, after_shrink) drops entries starting at or
 *       past the new end; moving the log start keeps the entry covering it,
 *       moved up to the new start, and drops those below (Kafka's
 *       truncateFromStart).  A full truncation empties the history.
 *   E4. The file is replaced whole (tmp, fdatasync, rename, fsync of the
 *       directory), never on the owner thread: the owner takes a snapshot
 *       (seg_epoch_take_checkpoint, only when `gen` moved since the last
 *       one) that holds the directory open, and any thread writes it.
 *       Snapshots written in the order taken leave the newest on disk.  A
 *       snapshot written after its directory was renamed (topic deletion)
 *       lands in the renamed directory, never in a new one of the old name.
 *       A history whose entries equal those of the last snapshot (or of
 *       the file loaded at open) gives no snapshot: at open, E3 drops an
 *       entry that starts at the log end (a leader that wrote nothing in
 *       its epoch yet) and the daemon's takeover assigns it again, and
 *       rewriting the same file for each of thousands of partitions (an
 *       fdatasync and a directory fsync each) made a start take tens of
 *       seconds.
 *   E5. seg_open loads the file (a damaged one is ignored), applies E3 to
 *       the recovered log, then assigns the epochs of the batches at or
 *       above the recovery point: what a crash kept in the log but not yet
 *       in the file comes back from the batches themselves, as Kafka's
 *       recovery does.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "segments/seg_int.h"

#define EPOCH_FILE "leader-epoch-checkpoint"
#define EPOCH_LINE_MAX 48                /* "<int32> <int64>\n" */

struct seg_epoch_ckpt {
    int dirfd;
    size_t len;
    char text[];
};

int32_t seg_epoch_latest(const seg_log *log)
{
    return log->nepochs > 0 ? log->epochs[log->nepochs - 1].epoch : -1;
}

int32_t seg_epoch_for_offset(const seg_log *log, int64_t offset)
{
    int32_t e = -1;
    for (int i = 0; i < log->nepochs && log->epochs[i].start_offset <= offset; i++)
        e = log->epochs[i].epoch;
    return e;
}

int64_t seg_epoch_start_above(const seg_log *log, int32_t epoch)
{
    for (int i = 0; i < log->nepochs; i++)
        if (log->epochs[i].epoch > epoch)
            return log->epochs[i].start_offset;
    return -1;
}

int seg_epoch_entries(const seg_log *log, seg_epoch_entry *out, int cap)
{
    for (int i = 0; i < log->nepochs && i < cap; i++)
        out[i] = log->epochs[i];
    return log->nepochs;
}

int seg_epoch_assign(seg_log *log, int32_t epoch, int64_t start_offset)
{
    if (epoch < 0 || start_offset < 0)
        return 0;                        /* batches of old clients: -1 */
    int n = log->nepochs;
    if (n > 0 && log->epochs[n - 1].epoch == epoch &&
        log->epochs[n - 1].start_offset <= start_offset)
        return 0;                        /* the hot path: same epoch */
    while (n > 0 && (log->epochs[n - 1].epoch >= epoch ||
                     log->epochs[n - 1].start_offset >= start_offset))
        n--;                             /* E1 */
    if (n == log->epochs_cap) {
        int cap = log->epochs_cap ? log->epochs_cap * 2 : 8;
        seg_epoch_entry *e = realloc(log->epochs, (size_t)cap * sizeof *e);
        if (!e)
            return SEG_E_NOMEM;
        log->epochs = e;
        log->epochs_cap = cap;
    }
    log->epochs[n] = (seg_epoch_entry){ .epoch = epoch, .start_offset = start_offset };
    log->nepochs = n + 1;
    log->epochs_gen++;
    return 1;
}

/* Kafka's LeaderEpochFileCache.endOffsetFor, with the same cases. */
int seg_epoch_end_offset(const seg_log *log, int32_t epoch, int32_t *found_epoch,
                         int64_t *end_offset)
{
    *found_epoch = -1;
    *end_offset = -1;
    int n = log->nepochs;
    if (epoch < 0 || n == 0)
        return 0;
    if (log->epochs[n - 1].epoch == epoch) {     /* the current epoch */
        *found_epoch = epoch;
        *end_offset = log->log_end;
        return 0;
    }
    int hi = 0;                                  /* first entry above */
    while (hi < n && log->epochs[hi].epoch <= epoch)
        hi++;
    if (hi == n)
        return 0;                                /* newer than any known */
    /* Below every entry: the data of the epochs before is gone from the
     * log, and the follower starts at the first one kept. */
    *found_epoch = hi > 0 ? log->epochs[hi - 1].epoch : epoch;
    *end_offset = log->epochs[hi].start_offset;
    return 0;
}

void seg_epoch_truncate_end(seg_log *log, int64_t end)
{
    int n = log->nepochs;
    while (n > 0 && log->epochs[n - 1].start_offset >= end)
        n--;
    if (n != log->nepochs) {
        log->nepochs = n;
        log->epochs_gen++;
    }
}

void seg_epoch_truncate_start(seg_log *log, int64_t start)
{
    int k = 0;                                   /* entries starting <= start */
    while (k < log->nepochs && log->epochs[k].start_offset <= start)
        k++;
    if (k == 0 || (k == 1 && log->epochs[0].start_offset == start))
        return;
    log->epochs[k - 1].start_offset = start;     /* E3: it covers the start */
    memmove(log->epochs, log->epochs + (k - 1),
            (size_t)(log->nepochs - (k - 1)) * sizeof *log->epochs);
    log->nepochs -= k - 1;
    log->epochs_gen++;
}

void seg_epoch_clear(seg_log *log)
{
    if (log->nepochs > 0)
        log->epochs_gen++;
    log->nepochs = 0;
}

/* ---- the file ------------------------------------------------------------------ */

int seg_epoch_parse(const char *text, size_t len, seg_epoch_entry *out, int cap)
{
    const char *p = text, *end = text + len;
    int64_t v[2];
    int64_t version = -1, count = -1;
    int n = 0;
    for (int line = 0; p < end; line++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl || nl - p >= EPOCH_LINE_MAX)
            return SEG_E_INVALID;        /* every line ends with \n */
        char buf[EPOCH_LINE_MAX];
        memcpy(buf, p, (size_t)(nl - p));
        buf[nl - p] = 0;
        p = nl + 1;
        int used = -1;
        if (line < 2) {
            if (sscanf(buf, "%" SCNd64 "%n", &v[0], &used) != 1 || buf[used] ||
                buf[0] == '-' || buf[0] == '+' || buf[0] == ' ')
                return SEG_E_INVALID;
            if (line == 0 && (version = v[0]) != 0)
                return SEG_E_INVALID;    /* the only version Kafka wrote */
            if (line == 1 && ((count = v[0]) > cap))
                return SEG_E_INVALID;
            continue;
        }
        if (n >= count ||
            sscanf(buf, "%" SCNd64 " %" SCNd64 "%n", &v[0], &v[1], &used) != 2 ||
            buf[used] || buf[0] == ' ' || v[0] < 0 || v[0] > INT32_MAX || v[1] < 0 ||
            (n > 0 && (v[0] <= out[n - 1].epoch || v[1] < out[n - 1].start_offset)))
            return SEG_E_INVALID;        /* E1 holds for what is loaded */
        out[n++] = (seg_epoch_entry){ .epoch = (int32_t)v[0], .start_offset = v[1] };
    }
    if (version != 0 || count != n)
        return SEG_E_INVALID;
    return n;
}

static size_t format_entries(char *out, const seg_epoch_entry *e, int n)
{
    size_t len = (size_t)sprintf(out, "0\n%d\n", n);
    for (int i = 0; i < n; i++)
        len += (size_t)sprintf(out + len, "%" PRId32 " %" PRId64 "\n", e[i].epoch,
                               e[i].start_offset);
    return len;
}

/* The entries of the snapshot just taken (or of the file loaded), kept
 * to compare with (E4).  On no memory the copy is forgotten, so the next
 * change is written whatever it holds. */
static void remember_saved(seg_log *log, const seg_epoch_entry *e, int n)
{
    seg_epoch_entry *copy = n > 0 ? realloc(log->epochs_saved, (size_t)n * sizeof *e) : NULL;
    if (n > 0 && !copy) {
        free(log->epochs_saved);
        log->epochs_saved = NULL;
        log->nepochs_saved = -1;
        return;
    }
    if (n > 0) {
        memcpy(copy, e, (size_t)n * sizeof *e);
        log->epochs_saved = copy;
    }
    log->nepochs_saved = n;
}

seg_epoch_ckpt *seg_epoch_take_checkpoint(seg_log *log)
{
    if (log->epochs_gen == log->epochs_saved_gen)
        return NULL;
    if (log->nepochs == log->nepochs_saved &&
        (log->nepochs == 0 ||
         !memcmp(log->epochs, log->epochs_saved, (size_t)log->nepochs * sizeof *log->epochs))) {
        log->epochs_saved_gen = log->epochs_gen;
        return NULL;                     /* E4: the same as on disk */
    }
    seg_epoch_ckpt *c = malloc(sizeof *c + 32 + (size_t)log->nepochs * EPOCH_LINE_MAX);
    if (!c)
        return NULL;                     /* tried again at the next change */
    c->dirfd = open(log->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (c->dirfd < 0) {
        free(c);
        return NULL;
    }
    c->len = format_entries(c->text, log->epochs, log->nepochs);
    log->epochs_saved_gen = log->epochs_gen;
    remember_saved(log, log->epochs, log->nepochs);
    return c;
}

int seg_epoch_write_checkpoint(seg_epoch_ckpt *c)
{
    if (!c)
        return 0;
    const char *tmp = EPOCH_FILE ".tmp";
    int rc = SEG_E_IO;
    int fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        bool ok = seg_pwrite_full(fd, c->text, c->len, 0) == (ssize_t)c->len &&
                  fdatasync(fd) == 0;
        close(fd);
        if (ok && renameat(c->dirfd, tmp, c->dirfd, EPOCH_FILE) == 0) {
            int r;
            do r = fsync(c->dirfd); while (r < 0 && errno == EINTR);
            rc = 0;                      /* the rename is what matters */
        } else {
            unlinkat(c->dirfd, tmp, 0);
        }
    }
    close(c->dirfd);
    free(c);
    return rc;
}

void seg_epoch_free_checkpoint(seg_epoch_ckpt *c)
{
    if (!c)
        return;
    close(c->dirfd);
    free(c);
}

/* ---- at open (E5) ------------------------------------------------------------- */

static int assign_header(const uint8_t *h, void *arg)
{
    seg_log *log = arg;
    return seg_epoch_assign(log, seg_be32(h + KP_BATCH_OFF_PartitionLeaderEpoch),
                            seg_be64(h)) < 0 ? SEG_E_NOMEM : 0;
}

int seg_epoch_load(seg_log *log, int64_t recovery_point)
{
    log->nepochs_saved = -1;             /* no file: unknown */
    char path[4200];
    snprintf(path, sizeof path, "%s/" EPOCH_FILE, log->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        struct stat st;
        char *text = NULL;
        if (fstat(fd, &st) == 0 && st.st_size > 0 && st.st_size < (1 << 24) &&
            (text = malloc((size_t)st.st_size)) &&
            seg_pread_full(fd, text, (size_t)st.st_size, 0) == st.st_size) {
            int cap = (int)(st.st_size / 4) + 1;
            seg_epoch_entry *e = malloc((size_t)cap * sizeof *e);
            int n = e ? seg_epoch_parse(text, (size_t)st.st_size, e, cap) : SEG_E_NOMEM;
            if (n >= 0) {
                remember_saved(log, e, n);
                free(log->epochs);
                log->epochs = e;
                log->nepochs = n;
                log->epochs_cap = cap;
                e = NULL;
            }
            free(e);
        }
        free(text);
        close(fd);
    }
    /* What was on disk is saved; changes from here on are written. */
    log->epochs_gen = log->epochs_saved_gen = 1;
    seg_epoch_truncate_end(log, log->log_end);
    seg_epoch_truncate_start(log, log->log_start);
    int64_t from = recovery_point > log->log_start ? recovery_point : log->log_start;
    /* The batch holding the recovery point may have begun an epoch. */
    return seg_scan_headers(log, from > 0 ? from - 1 : 0, assign_header, log);
}
