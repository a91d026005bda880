/*
 * segments/cleaner.c — log compaction (Kafka's log cleaner).
 *
 * A compacted log keeps, for every key, at least its newest record.  The
 * owner thread plans (which segments, is it due), a worker does all the
 * reading and writing, and the owner installs the result:
 *
 *   seg_clean_plan (owner)  closed segments [0, last) whose newest record is
 *                           older than min.compaction.lag.ms (when > 0);
 *                           due when the dirty part (offsets >= clean_end)
 *                           is at least min.cleanable.dirty.ratio of them,
 *                           or a dirty segment is older than
 *                           max.compaction.lag.ms, or the delete horizon the
 *                           last run saw has passed (T3: tombstones go
 *                           without new writes).
 *                           Takes a reference on each input's .log file.
 *   seg_clean_run (worker)  pass 1: offset map key-hash → newest offset over
 *                           the dirty part, within dedupe_buffer_bytes (full:
 *                           stop at a batch boundary, "map end", and clean
 *                           only that prefix).  pass 2: per group of inputs
 *                           (together at most segment.bytes) write one new
 *                           segment in <dir>/cleaning/, fdatasync it, then
 *                           commit it (C1-C4 below).
 *   seg_clean_finish (owner) swaps segs[] entries (under mu), old segments
 *                           go to the dead list (their files were renamed
 *                           *.deleted in C2), clean_end = map end.
 *
 * A record survives when: its offset >= log start, its batch is not part
 * of an aborted transaction, and (key null, or its offset >= map end, or
 * no newer offset for its key in the map), and it is not a tombstone past
 * its batch's delete horizon.
 *
 * Transactions (KIP-98):
 *   X1. A segment reaching the first offset of an open transaction is not
 *       an input (Kafka's firstUncleanableOffset): whether its records
 *       count is not known yet.
 *   X2. A transactional batch of producer P at offset B is aborted iff
 *       P's first aborted-transaction entry ending at or after B starts at
 *       or before B (a producer's transactions never overlap, so the
 *       marker after B ends the one holding B).  Aborted batches neither
 *       enter the offset map (an aborted value never hides a committed
 *       one) nor the output.  Their marker and index entry go by X3, X4.
 *   X3. A marker whose transaction has no record left in the output
 *       (pass 2 saw none of that producer's transactional batches survive
 *       since its previous marker: all aborted, superseded or below log
 *       start) is empty.  An empty marker is stamped with a delete
 *       horizon the first time (now + delete.retention.ms, as T1), kept
 *       until it passes, then dropped (Kafka's CleanedTransactionMetadata
 *       and "retained until delete horizon"): a consumer that fetched the
 *       transaction's records before they went still sees its end.  The
 *       horizon joins the log's (T3), so the log is due when it passes.
 *   X4. An empty ABORT's index entry is dropped in the same run (Kafka
 *       does not carry it into the cleaned index): every fetch range that
 *       overlapped the aborted records is gone with them.  The worker
 *       lists those markers' offsets (ascending, one per transaction);
 *       install_group removes them (seg_txn_drop) before rewriting the
 *       group's .txnindex, so memory and file agree (txnindex.c X1, X2)
 *       and a restart loads the same.  A producer state replay from the
 *       log start meets no record of such a transaction, so it opens none
 *       and adds no entry.  One from a snapshot taken while it was open
 *       needs its marker, so a marker at or past the newest snapshot
 *       (policy markers_below) is never dropped; snapshots
 *       (replica_producers.c P2) follow the log end every few seconds, so
 *       this rarely holds one back, and the log is due again once the
 *       snapshot passes the first one held (log->markers_held; not kept
 *       over a restart: then the next due run drops it).
 *   X5. Each live producer's newest data batch in the inputs (the policy's
 *       producers: its last offset is the producer state's) is kept, as
 *       a batch with its header and no records when none survives or its
 *       transaction was aborted (Kafka's BatchRetention.RETAIN_EMPTY):
 *       a producer state rebuilt from the log then still knows the
 *       producer's epoch and last sequence, so its retry after a restart
 *       is still a duplicate and its zombie still fenced.  An empty
 *       transactional batch counts as kept for X3 (its marker stays, so
 *       a replay closes the transaction it opens).  An empty batch that
 *       is no longer its producer's newest (the producer wrote again, or
 *       expired) goes, and X3/X4 then let its marker and index entry go.
 *       A producer whose newest entry is a marker (no data since: the
 *       coordinator bumped its epoch) keeps that marker whole, epoch and
 *       all (Kafka's third case of isBatchLastRecordOfProducer).
 * A batch whose records all survive is copied byte for byte; one with
 * none is dropped (but X5); otherwise it is rebuilt with the same BaseOffset,
 * LastOffsetDelta, producer fields, attributes, leader epoch and codec,
 * records keeping their offsets (kp_bb_add_at).  Control batches are
 * copied.  Offsets therefore never move; gaps are allowed (read.c, R3).
 *
 * Tombstones (Kafka's rule since KIP-534; "now" is the plan's now_ms):
 *   T1. The first run that keeps a tombstone below map end stamps its
 *       batch with a delete horizon, now + delete.retention.ms: attribute
 *       KP_ATTR_DELETE_HORIZON, BaseTimestamp = horizon, record deltas
 *       taken from it (record timestamps read the same).  So a consumer
 *       has delete.retention.ms from the compaction that removed the
 *       key's older values to see the tombstone, however old or new the
 *       record's own timestamp is (a client clock, a replayed topic).
 *   T2. A later run drops a tombstone whose batch horizon is <= now; it
 *       never drops an unstamped one.  Safe: the run that stamped it had
 *       the tombstone in its map, so no older value of the key is left.
 *       Records at or past map end are neither stamped nor dropped.
 *   T3. The horizon is in the .log, so it survives restarts and swaps;
 *       log->delete_horizon (the latest horizon of a kept tombstone, kept
 *       in the checkpoint, K1) makes a log due once it passes, dirty or
 *       not.
 *
 * Checkpoint (Kafka's cleaner-offset-checkpoint, one per partition dir):
 *
 *     <dir>/cleaner-offset-checkpoint, text:
 *       0\n                                  format version
 *       <clean_end> <delete_horizon>\n
 *
 *   K1. A run that committed every group writes it (worker: .tmp,
 *       fdatasync, rename, fsync dir) after C4, so it never names an
 *       offset whose segments are not already the cleaned ones; a crash
 *       before it leaves the older, lower one (more work, never less).
 *       Without it a restart made the whole log dirty and re-cleaned it.
 *   K2. seg_open takes it if it parses and clean_end <= log end; else it
 *       unlinks it (a later, longer log must not make it valid again),
 *       and everything is dirty and the horizon relearnt, as before.
 *   K3. A truncation below clean_end (a follower's) lowers clean_end and
 *       unlinks the file on the owner (one small unlink, rare): data
 *       appended after it would otherwise pass for cleaned after a
 *       restart, and a tombstone there could outlive an older value.
 *
 * Commit of one group [B, E) (E: base of the first segment after it):
 *   C1. rename cleaning/B.log → B.E.swap, fsync dir    ← the commit point
 *   C2. rename each input's files to *.deleted
 *   C3. rename cleaning/B.index, B.timeindex into place
 *   C4. rename B.E.swap → B.log, fsync dir
 * seg_open (log.c, recover_cleaning) removes cleaning/ (a crash before
 * C1: the old segments are intact) and completes any B.E.swap (a crash
 * after C1: segment files with bases in [B, E) go, the swap becomes
 * B.log, its indexes are rebuilt).  So a crash at any moment leaves either
 * the old or the new segments, never both, never neither.
 *
 * Invariants:
 *   C5. While a job is out (log->cleaning), no segment with base below
 *       cleaning_end leaves segs[] (retention.c waits), so finish finds
 *       every input where plan saw it.
 *   C6. The active segment is never an input.
 *   C7. Key hashes are 64-bit: two keys colliding would lose the older
 *       one's record (Kafka's MD5 map has the same property, at 128 bits);
 *       at 10^6 keys the odds are ~10^-8.
 *
 * Neighbourliness (the broker's producers and consumers come first):
 *   N1. Output is pushed to disk as it is written: every WB_CHUNK the
 *       chunk just written is queued for writeback and the one before it
 *       waited for (sync_file_range), so a run never holds more than two
 *       chunks dirty.  Dirty memory from a rewrite therefore never pushes
 *       the loop's appends into the kernel's dirty throttling, the final
 *       fdatasync is short, and the worker runs no faster than the disk.
 *   N2. Each input is dropped from the page cache once pass 2 has read it
 *       (POSIX_FADV_DONTNEED): it is about to be replaced, and a 1 GB
 *       rewrite would otherwise push out the tail consumers read.  A
 *       cancelled or failed run only makes a later read go to disk.  An
 *       input still dirty is written back first (the flusher would have
 *       within 30 s anyway, before file.delete.delay.ms lets it go).
 *   N3. Pass 1 does not drop what it read: pass 2 reads it again.
 *   The worker thread's CPU and I/O priority is the caller's business
 *   (daemon/replica/replica_cleaner.c runs it at the lowest).
 */
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

typedef struct clean_in {
    int64_t   base, next;
    uint64_t  size;
    seg_file *f;
    int64_t   max_ts;
} clean_in;

typedef struct clean_group {
    int       first, count;          /* inputs in[first, first+count) */
    int64_t   end;                   /* E */
    seg_segment *s;                  /* written (NULL: not yet / failed) */
    bool      committed;             /* C1 done */
} clean_group;

struct seg_clean_job {
    char      *dir;
    seg_config cfg;
    seg_clean_policy pol;
    clean_in  *in;
    int        nin;
    int64_t    end_base;             /* base of segs[last] (active or later) */
    int64_t    log_start;
    int64_t    dirty_from;
    int64_t    map_end;
    clean_group *g;
    int        ng;
    int        crash_step;
    bool       crashed;
    int        rc;
    int64_t    t0_us;
    seg_aborted_txn *aborted;        /* X2: sorted by producer, last offset */
    seg_producer_last *plast;        /* X5: sorted by producer */
    size_t     nplast;
    int        naborted;
    struct txo { int64_t pid1; bool kept; } *txo;   /* X3: pid + 1 (0: free) */
    size_t     txo_mask, txo_n;
    int64_t   *gone;                 /* X4: empty ABORTs' offsets, ascending */
    int        ngone, gone_cap;
    uint64_t   io_bytes;
    uint64_t   wb_queued, wb_waited; /* N1: output offsets, current group */
    seg_clean_stats st;
};

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* ---- checkpoint (K1-K3) ------------------------------------------------------ */
#define CKPT_NAME "cleaner-offset-checkpoint"

static int fsync_dir(const char *dir);

/* K1 (worker).  Failure is not the run's: the old file still holds. */
static void save_checkpoint(const char *dir, int64_t clean_end, int64_t horizon)
{
    char path[4200], tmp[4220], text[64];
    snprintf(path, sizeof path, "%s/" CKPT_NAME, dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int len = snprintf(text, sizeof text, "0\n%" PRId64 " %" PRId64 "\n",
                       clean_end, horizon);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    bool ok = seg_pwrite_full(fd, text, (size_t)len, 0) == len && fdatasync(fd) == 0;
    close(fd);
    if (!ok || rename(tmp, path) < 0) {
        unlink(tmp);
        return;
    }
    fsync_dir(dir);
}

void seg_clean_load_checkpoint(seg_log *log)
{
    log->clean_end = log->log_start;            /* K2: all dirty */
    log->delete_horizon = -1;
    log->markers_held = -1;
    char path[4200], text[64];
    snprintf(path, sizeof path, "%s/" CKPT_NAME, log->dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, text, sizeof text - 1);
    close(fd);
    int64_t end, horizon;
    int used = 0;
    text[n > 0 ? n : 0] = 0;
    if (n <= 0 ||
        sscanf(text, "0\n%" SCNd64 " %" SCNd64 "\n%n", &end, &horizon, &used) != 2 ||
        used != n || end < 0 || end > log->log_end || horizon < -1) {
        unlink(path);
        return;
    }
    log->clean_saved = true;
    if (end > log->clean_end)
        log->clean_end = end;
    log->delete_horizon = horizon;
}

void seg_clean_truncated(seg_log *log, int64_t end)
{
    if (log->clean_end <= end)
        return;
    log->clean_end = end;                       /* K3 */
    if (log->clean_saved) {
        char path[4200];
        snprintf(path, sizeof path, "%s/" CKPT_NAME, log->dir);
        unlink(path);
        log->clean_saved = false;
    }
}

/* ---- plan (owner) ----------------------------------------------------------- */
static int cmp_aborted(const void *a, const void *b)
{
    const seg_aborted_txn *x = a, *y = b;
    if (x->producer_id != y->producer_id)
        return x->producer_id < y->producer_id ? -1 : 1;
    return (x->last_offset > y->last_offset) - (x->last_offset < y->last_offset);
}

static bool may_hold_input(const seg_aborted_txn *e, const seg_clean_job *j)
{
    return e->last_offset >= j->log_start && e->first_offset < j->end_base;
}

/* X2: the aborted transactions that may hold a batch of the inputs. */
static int copy_aborted(const seg_log *log, seg_clean_job *j)
{
    int n = 0;
    for (int k = 0; k < log->ntxns; k++)
        n += may_hold_input(&log->txns[k], j);
    if (n == 0)
        return 0;
    if (!(j->aborted = malloc((size_t)n * sizeof *j->aborted)))
        return -1;
    for (int k = 0; k < log->ntxns; k++)
        if (may_hold_input(&log->txns[k], j))
            j->aborted[j->naborted++] = log->txns[k];
    qsort(j->aborted, (size_t)n, sizeof *j->aborted, cmp_aborted);
    return 0;
}

static int cmp_plast(const void *a, const void *b)
{
    const seg_producer_last *x = a, *y = b;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* X5: the producers whose newest batch may be an input. */
static int copy_producers(const seg_clean_policy *p, seg_clean_job *j)
{
    size_t n = 0;
    for (size_t k = 0; k < p->nproducers; k++)
        n += p->producers[k].last_offset < j->end_base;
    if (n == 0)
        return 0;
    if (!(j->plast = malloc(n * sizeof *j->plast)))
        return -1;
    for (size_t k = 0; k < p->nproducers; k++)
        if (p->producers[k].last_offset < j->end_base)
            j->plast[j->nplast++] = p->producers[k];
    qsort(j->plast, n, sizeof *j->plast, cmp_plast);
    return 0;
}

/* X5: the newest entry of the producer of the batch at p (its header);
 * NULL for none or no producer id. */
static const seg_producer_last *plast_of(const seg_clean_job *j, const uint8_t *p)
{
    int64_t pid = seg_be64(p + KP_BATCH_OFF_ProducerId);
    if (j->nplast == 0 || pid < 0)
        return NULL;
    seg_producer_last key = { .pid = pid };
    return bsearch(&key, j->plast, j->nplast, sizeof *j->plast, cmp_plast);
}

/* X5, for the data batch at p (its header). */
static bool producer_last(const seg_clean_job *j, const uint8_t *p)
{
    const seg_producer_last *e = plast_of(j, p);
    return e && e->last_offset == seg_be64(p) + seg_be32(p + KP_BATCH_OFF_LastOffsetDelta);
}

/* X5, for the marker at p: its producer's newest entry (no data batch
 * since, Kafka's lastDataOffset empty), which holds the producer's epoch
 * (a bump by the coordinator's fencing or timeout). */
static bool marker_last(const seg_clean_job *j, const uint8_t *p)
{
    const seg_producer_last *e = plast_of(j, p);
    return e && e->last_offset < 0 &&
           e->epoch == (int16_t)((p[KP_BATCH_OFF_ProducerEpoch] << 8) |
                                 p[KP_BATCH_OFF_ProducerEpoch + 1]);
}

/* X2, for the batch at p (its header). */
static bool aborted_batch(const seg_clean_job *j, const uint8_t *p, uint16_t attrs)
{
    if (j->naborted == 0 || !(attrs & KP_ATTR_TRANSACTIONAL) || (attrs & KP_ATTR_CONTROL))
        return false;
    int64_t pid = seg_be64(p + KP_BATCH_OFF_ProducerId), base = seg_be64(p);
    int lo = 0, hi = j->naborted;
    while (lo < hi) {                   /* first (pid, last) >= (pid, base) */
        int mid = (lo + hi) / 2;
        const seg_aborted_txn *e = &j->aborted[mid];
        if (e->producer_id < pid || (e->producer_id == pid && e->last_offset < base))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < j->naborted && j->aborted[lo].producer_id == pid &&
           j->aborted[lo].first_offset <= base;
}

int seg_clean_plan(seg_log *log, const seg_clean_policy *p, seg_clean_job **job)
{
    *job = NULL;
    if (log->cleaning || seg_failed(log) || log->n < 2)
        return 0;
    /* Only a positive min.compaction.lag.ms looks at timestamps (Kafka's
     * rule): else one record from a client whose clock runs ahead would
     * hold every later segment out of compaction until that time. */
    int last = 0;                               /* first uncleanable (C6) */
    int64_t lag_cut = p->min_compaction_lag_ms > 0
                          ? p->now_ms - p->min_compaction_lag_ms : INT64_MAX;
    while (last < log->n - 1 && log->segs[last]->max_ts <= lag_cut &&
           (!p->has_unstable || log->segs[last]->next <= p->unstable_from))   /* X1 */
        last++;
    if (last == 0)
        return 0;
    uint64_t total = 0, dirty = 0;
    bool force = false;
    for (int i = 0; i < last; i++) {
        seg_segment *s = log->segs[i];
        total += s->size;
        if (s->next > log->clean_end && s->next > log->log_start) {
            dirty += s->size;
            if (p->max_compaction_lag_ms > 0 && s->max_ts >= 0 &&
                s->max_ts <= p->now_ms - p->max_compaction_lag_ms)
                force = true;
        }
    }
    bool expired = (log->delete_horizon >= 0 &&
                    log->delete_horizon <= p->now_ms) ||     /* T3 */
                   (log->markers_held >= 0 && log->markers_held < p->markers_below &&
                    log->markers_held < log->segs[last]->base);   /* X3 */
    if (!expired &&
        (dirty == 0 || (!force && (double)dirty < p->min_cleanable_dirty_ratio *
                                                  (double)total)))
        return 0;
    seg_clean_job *j = calloc(1, sizeof *j);
    if (!j || !(j->dir = strdup(log->dir)) ||
        !(j->in = calloc((size_t)last, sizeof *j->in))) {
        if (j) free(j->dir);
        free(j);
        return SEG_E_IO;
    }
    j->cfg = log->cfg;
    j->pol = *p;
    j->nin = last;
    for (int i = 0; i < last; i++) {
        seg_segment *s = log->segs[i];
        j->in[i] = (clean_in){ s->base, s->next, s->size, s->log, s->max_ts };
        seg_file_ref(s->log);
    }
    j->end_base = log->segs[last]->base;
    j->log_start = log->log_start;
    if (copy_aborted(log, j) != 0 || copy_producers(p, j) != 0) {
        free(j->aborted);
        for (int i = 0; i < last; i++)
            seg_file_unref(j->in[i].f);
        free(j->in);
        free(j->dir);
        free(j);
        return SEG_E_IO;
    }
    j->dirty_from = log->clean_end > log->log_start ? log->clean_end
                                                    : log->log_start;
    log->cleaning = true;                       /* C5 */
    log->cleaning_end = j->end_base;
    *job = j;
    return 1;
}

void seg_clean_crash_after(seg_clean_job *job, int step) { job->crash_step = step; }

/* ---- offset map ------------------------------------------------------------- */
/* Open addressing, linear probing, 16-byte slots.  The table starts at
 * OMAP_START slots and doubles while it is over half full, up to `limit`
 * (the dedupe buffer's share, or 8 bytes of dirty log per key if that is
 * less), where it may fill to 0.8 before the map is full (a prefix run).
 * Sizing it for the buffer up front cost a cache and TLB miss per record:
 * 100,000 keys spread over a 64 MiB table put most of a run's user time
 * in the probe loops; in 4 MiB they stay cached. */
typedef struct omap_slot { uint64_t h; int64_t off; } omap_slot;
typedef struct omap {
    omap_slot *t;
    size_t mask, n, max;
    size_t limit;                     /* slots the budget allows */
} omap;

#define OMAP_START ((size_t)1 << 16)

static uint64_t key_hash(const uint8_t *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        h = (h ^ v) * 0xc4ceb9fe1a85ec53ULL;
        h ^= h >> 29;
    }
    uint64_t v = 0;
    for (size_t k = 0; i < n; i++, k++)
        v |= (uint64_t)p[i] << (8 * k);
    h = (h ^ v) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 29;
    return h ? h : 1;                 /* 0 marks an empty slot */
}

static int omap_init(omap *m, size_t budget, uint64_t dirty_bytes)
{
    size_t want = 1024;
    while (want < dirty_bytes / 8 && want < ((size_t)1 << 40))
        want <<= 1;
    size_t cap = 1024;
    while (cap * 2 * sizeof(omap_slot) <= budget)
        cap <<= 1;
    if (want < cap)
        cap = want;
    m->limit = cap;
    if (cap > OMAP_START)
        cap = OMAP_START;
    m->t = calloc(cap, sizeof *m->t);
    if (!m->t)
        return SEG_E_IO;
    m->mask = cap - 1;
    m->n = 0;
    m->max = cap == m->limit ? cap / 10 * 8 : cap / 2;
    return 0;
}

static void omap_put(omap *m, uint64_t h, int64_t off);

/* Room for `more` new keys: grows while over the threshold and below
 * the limit.  false: the map is full (or memory ran out: the same). */
static bool omap_reserve(omap *m, size_t more)
{
    while (m->n + more > m->max && m->mask + 1 < m->limit) {
        size_t cap = (m->mask + 1) * 2;
        omap_slot *t = calloc(cap, sizeof *t), *old = m->t;
        if (!t) {
            m->limit = m->mask + 1;
            m->max = m->limit / 10 * 8;
            break;
        }
        size_t oldcap = m->mask + 1;
        m->t = t;
        m->mask = cap - 1;
        m->n = 0;
        m->max = cap == m->limit ? cap / 10 * 8 : cap / 2;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].h)
                omap_put(m, old[i].h, old[i].off);
        free(old);
    }
    return m->n + more <= m->max;
}

static void omap_put(omap *m, uint64_t h, int64_t off)
{
    size_t i = (size_t)h & m->mask;
    while (m->t[i].h && m->t[i].h != h)
        i = (i + 1) & m->mask;
    if (!m->t[i].h) {
        m->t[i].h = h;
        m->n++;
    }
    m->t[i].off = off;
}

static int64_t omap_get(const omap *m, uint64_t h)
{
    size_t i = (size_t)h & m->mask;
    while (m->t[i].h) {
        if (m->t[i].h == h)
            return m->t[i].off;
        i = (i + 1) & m->mask;
    }
    return -1;
}

/* ---- sequential batch reader over one input ------------------------------------ */
typedef struct rdr {
    int fd;
    uint64_t size, pos;       /* file end (as planned), next batch */
    uint8_t *buf;
    size_t cap, len;
    uint64_t at;              /* file position of buf[0] */
} rdr;

#define RD_CHUNK (1u << 20)

/* The whole batch at r->pos: 1 with *p and *sz, 0 at the end, SEG_E_IO. */
static int rdr_next(rdr *r, const uint8_t **p, size_t *sz)
{
    if (r->pos + KP_BATCH_HEADER_SIZE > r->size)
        return 0;
    for (int pass = 0; pass < 2; pass++) {
        size_t need = KP_BATCH_LOG_OVERHEAD;
        if (r->pos >= r->at && r->pos + need <= r->at + r->len) {
            const uint8_t *q = r->buf + (r->pos - r->at);
            int64_t bs = kp_batch_size(q, need);
            if (bs < KP_BATCH_HEADER_SIZE || (uint64_t)bs > r->size - r->pos)
                return SEG_E_IO;
            if (r->pos + (uint64_t)bs <= r->at + r->len) {
                *p = q;
                *sz = (size_t)bs;
                r->pos += (uint64_t)bs;
                return 1;
            }
            need = (size_t)bs;
        }
        if (pass == 1)
            break;
        size_t want = need > RD_CHUNK ? need : RD_CHUNK;
        if (want > r->cap) {
            uint8_t *nb = realloc(r->buf, want);
            if (!nb)
                return SEG_E_IO;
            r->buf = nb;
            r->cap = want;
        }
        if (want > r->size - r->pos)
            want = (size_t)(r->size - r->pos);
        ssize_t got = seg_pread_full(r->fd, r->buf, want, (off_t)r->pos);
        if (got < 0)
            return SEG_E_IO;
        r->at = r->pos;
        r->len = (size_t)got;
        if (r->len < KP_BATCH_LOG_OVERHEAD)
            return SEG_E_IO;
        /* A batch longer than the chunk: read it whole. */
        int64_t bs = kp_batch_size(r->buf, r->len);
        if (bs >= KP_BATCH_HEADER_SIZE && (uint64_t)bs > r->len &&
            (uint64_t)bs <= r->size - r->pos) {
            if ((size_t)bs > r->cap) {
                uint8_t *nb = realloc(r->buf, (size_t)bs);
                if (!nb)
                    return SEG_E_IO;
                r->buf = nb;
                r->cap = (size_t)bs;
            }
            got = seg_pread_full(r->fd, r->buf, (size_t)bs, (off_t)r->pos);
            if (got != bs)
                return SEG_E_IO;
            r->len = (size_t)got;
        }
    }
    return SEG_E_IO;
}

static void throttle(seg_clean_job *j, uint64_t bytes)
{
    double rate = j->pol.io_max_bytes_per_sec;
    j->io_bytes += bytes;
    if (rate <= 0)
        return;
    double due_us = (double)j->io_bytes / rate * 1e6;
    int64_t ahead = (int64_t)due_us - (mono_us() - j->t0_us);
    if (ahead > 1000) {
        struct timespec ts = { ahead / 1000000, (ahead % 1000000) * 1000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
}

static bool cancelled(const atomic_bool *c)
{
    return c && atomic_load(c);
}

/* ---- pass 1: the offset map ------------------------------------------------------ */
static int build_map(seg_clean_job *j, omap *m, const atomic_bool *cancel)
{
    j->map_end = j->in[j->nin - 1].next;
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    rdr r = { 0 };
    int rc = 0;
    for (int i = 0; i < j->nin && rc == 0; i++) {
        clean_in *in = &j->in[i];
        if (in->next <= j->dirty_from)
            continue;
        r.fd = in->f->fd;
        r.size = in->size;
        r.pos = 0;
        r.len = 0;
        r.at = 0;
        const uint8_t *p;
        size_t sz;
        int more;
        while ((more = rdr_next(&r, &p, &sz)) == 1) {
            if (cancelled(cancel)) { rc = SEG_E_STATE; break; }
            throttle(j, sz);
            int64_t base = seg_be64(p);
            int64_t last = base + seg_be32(p + KP_BATCH_OFF_LastOffsetDelta);
            if (last < j->dirty_from)
                continue;
            uint16_t attrs = (uint16_t)((p[KP_BATCH_OFF_Attributes] << 8) |
                                       p[KP_BATCH_OFF_Attributes + 1]);
            if ((attrs & KP_ATTR_CONTROL) || aborted_batch(j, p, attrs))
                continue;                       /* X2 */
            int32_t count = seg_be32(p + KP_BATCH_OFF_RecordsCount);
            if (count < 0 || !omap_reserve(m, (size_t)count)) {
                j->map_end = base;              /* a prefix only */
                j->st.partial = true;
                goto done;
            }
            if (kp_rec_iter_start(&it, p, sz) != 0) { rc = SEG_E_IO; break; }
            kp_record rec;
            int k;
            while ((k = kp_rec_iter_next(&it, &rec)) == 1)
                if (rec.Offset >= j->dirty_from && rec.Key.len >= 0)
                    omap_put(m, key_hash((const uint8_t *)rec.Key.p,
                                         (size_t)rec.Key.len), rec.Offset);
            if (k < 0) { rc = SEG_E_IO; break; }
        }
        if (more < 0)
            rc = SEG_E_IO;
    }
done:
    kp_rec_iter_free(&it);
    free(r.buf);
    return rc;
}

/* ---- pass 2: rewrite one group ------------------------------------------------- */
enum { DROP, KEEP, DROP_TOMBSTONE };

/* horizon: the batch's delete horizon, -1 if it has none yet (T1, T2). */
static int keep_record(const seg_clean_job *j, const omap *m,
                       const kp_record *rec, int64_t horizon)
{
    if (rec->Offset < j->log_start)
        return DROP;
    if (rec->Key.len < 0 || rec->Offset >= j->map_end)
        return KEEP;
    int64_t newest = omap_get(m, key_hash((const uint8_t *)rec->Key.p,
                                          (size_t)rec->Key.len));
    if (newest > rec->Offset)
        return DROP;                             /* superseded */
    if (rec->Value.len < 0 && horizon >= 0 && horizon <= j->pol.now_ms)
        return DROP_TOMBSTONE;                   /* past its horizon (T2) */
    return KEEP;
}

static int64_t new_horizon(const seg_clean_job *j)
{
    int64_t now = j->pol.now_ms, r = j->pol.delete_retention_ms;
    if (r < 0)
        r = 0;
    return now > INT64_MAX - r ? INT64_MAX : now + r;
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);  p[3] = (uint8_t)v;
}

/* Rebuilds batch p keeping the records keep[] says, appending to out;
 * horizon >= 0 stamps it (T1). */
static int rebuild(const uint8_t *p, size_t sz, const uint8_t *keep,
                   int64_t horizon, kp_rec_iter *it, kp_buf *out)
{
    kp_batch h;
    if (kp_batch_header(p, sz, &h) != 0 || kp_rec_iter_start(it, p, sz) != 0)
        return SEG_E_IO;
    int codec = h.Attributes & KP_ATTR_CODEC_MASK;
    kp_batch_builder bb;
    kp_bb_init(&bb, out, codec);
    kp_bb_set_producer(&bb, h.ProducerId, h.ProducerEpoch, h.BaseSequence);
    bb.extra_attrs = (int16_t)(h.Attributes & ~KP_ATTR_CODEC_MASK);
    if (horizon >= 0) {
        bb.extra_attrs |= KP_ATTR_DELETE_HORIZON;
        kp_bb_set_base_timestamp(&bb, horizon);
    }
    bb.base_offset = h.BaseOffset;
    kp_header hdrs[64], *hv = hdrs;
    int hcap = 64;
    kp_record rec;
    int k, i = 0, rc = 0;
    while ((k = kp_rec_iter_next(it, &rec)) == 1) {
        if (!keep[i++])
            continue;
        int nh = 0;
        kp_header hd;
        int hk;
        while ((hk = kp_header_next(&rec, &hd)) == 1) {
            if (nh == hcap) {
                kp_header *nv = malloc((size_t)hcap * 2 * sizeof *nv);
                if (!nv) { rc = SEG_E_IO; break; }
                memcpy(nv, hv, (size_t)nh * sizeof *nv);
                if (hv != hdrs) free(hv);
                hv = nv;
                hcap *= 2;
            }
            hv[nh++] = hd;
        }
        if (hk < 0 || rc) { rc = SEG_E_IO; break; }
        kp_bb_add_at(&bb, (int32_t)(rec.Offset - h.BaseOffset), rec.Timestamp,
                     rec.Key.len < 0 ? NULL : rec.Key.p, rec.Key.len,
                     rec.Value.len < 0 ? NULL : rec.Value.p, rec.Value.len,
                     hv, nh);
    }
    if (hv != hdrs)
        free(hv);
    if (k < 0 || rc) {
        kp_bb_free(&bb);
        return SEG_E_IO;
    }
    size_t start = out->len;
    int64_t n = kp_bb_finish(&bb);
    if (n < 0)
        return SEG_E_IO;
    /* Same LastOffsetDelta (the batch still ends where it did, so the
     * segment's end and a producer's sequence bookkeeping are unchanged),
     * same leader epoch, and under LogAppendTime the same MaxTimestamp. */
    uint8_t *q = out->data + start;
    memcpy(q + KP_BATCH_OFF_PartitionLeaderEpoch, p + KP_BATCH_OFF_PartitionLeaderEpoch, 4);
    put_be32(q + KP_BATCH_OFF_LastOffsetDelta, (uint32_t)h.LastOffsetDelta);
    if (h.Attributes & KP_ATTR_LOG_APPEND_TIME)
        memcpy(q + KP_BATCH_OFF_MaxTimestamp, p + KP_BATCH_OFF_MaxTimestamp, 8);
    put_be32(q + KP_BATCH_OFF_Crc, kp_crc32c(0, q + KP_BATCH_CRC_START,
                                            (size_t)n - KP_BATCH_CRC_START));
    return 0;
}

#define WB_CHUNK (8u << 20)

/* N1: after a write, queue the newest full chunk for writeback and wait
 * for the one before it (blocks this worker only, at disk speed). */
static void writeback(seg_clean_job *j, seg_segment *s)
{
    int fd = s->log->fd;
    if (s->size - j->wb_queued < WB_CHUNK)
        return;
    if (j->wb_queued > j->wb_waited) {
        sync_file_range(fd, (off_t)j->wb_waited, (off_t)(j->wb_queued - j->wb_waited),
                        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                        SYNC_FILE_RANGE_WAIT_AFTER);
        j->wb_waited = j->wb_queued;
    }
    sync_file_range(fd, (off_t)j->wb_queued, (off_t)(s->size - j->wb_queued),
                    SYNC_FILE_RANGE_WRITE);
    j->wb_queued = s->size;
}

static int append_batch(seg_clean_job *j, seg_segment *s, const uint8_t *p,
                        size_t sz)
{
    if (seg_pwrite_full(s->log->fd, p, sz, (off_t)s->size) < 0)
        return SEG_E_IO;
    int64_t base = seg_be64(p);
    if (seg_segment_index_batch(s, &j->cfg, (int32_t)(base - s->base), s->size,
                                (uint32_t)sz, seg_be64(p + KP_BATCH_OFF_MaxTimestamp)))
        return SEG_E_IO;
    s->size += sz;
    s->next = base + seg_be32(p + KP_BATCH_OFF_LastOffsetDelta) + 1;
    j->st.bytes_out += sz;
    writeback(j, s);
    throttle(j, sz);
    return 0;
}

/* X5: the header of batch p alone, no records, uncompressed (Kafka's
 * writeEmptyHeader): same offsets, producer, epoch, sequence, leader
 * epoch; both timestamps its MaxTimestamp. */
static int append_empty(seg_clean_job *j, seg_segment *s, const uint8_t *p)
{
    uint8_t e[KP_BATCH_HEADER_SIZE];
    memcpy(e, p, sizeof e);
    put_be32(e + KP_BATCH_OFF_BatchLength, KP_BATCH_HEADER_SIZE - KP_BATCH_OFF_PartitionLeaderEpoch);
    uint16_t attrs = (uint16_t)((p[KP_BATCH_OFF_Attributes] << 8) | p[KP_BATCH_OFF_Attributes + 1]);
    attrs &= (uint16_t)~(KP_ATTR_CODEC_MASK | KP_ATTR_DELETE_HORIZON);
    e[KP_BATCH_OFF_Attributes] = (uint8_t)(attrs >> 8);
    e[KP_BATCH_OFF_Attributes + 1] = (uint8_t)attrs;
    memcpy(e + KP_BATCH_OFF_BaseTimestamp, p + KP_BATCH_OFF_MaxTimestamp, 8);
    put_be32(e + KP_BATCH_OFF_RecordsCount, 0);
    put_be32(e + KP_BATCH_OFF_Crc, kp_crc32c(0, e + KP_BATCH_CRC_START,
                                            KP_BATCH_HEADER_SIZE - KP_BATCH_CRC_START));
    j->st.batches_emptied++;
    return append_batch(j, s, e, sizeof e);
}

/* ---- transaction markers (X3, X4) --------------------------------------------- */
/* P's entry in the per-producer table (grown at half full); NULL: no memory. */
static struct txo *txo_get(seg_clean_job *j, int64_t pid)
{
    if (!j->txo || (j->txo_n + 1) * 2 > j->txo_mask + 1) {
        size_t cap = j->txo ? (j->txo_mask + 1) * 2 : 64;
        struct txo *t = calloc(cap, sizeof *t), *old = j->txo;
        if (!t)
            return NULL;
        size_t oldcap = old ? j->txo_mask + 1 : 0;
        j->txo = t;
        j->txo_mask = cap - 1;
        for (size_t i = 0; i < oldcap; i++) {
            if (!old[i].pid1)
                continue;
            size_t k = (size_t)old[i].pid1 * 0x9e3779b97f4a7c15ULL & j->txo_mask;
            while (t[k].pid1)
                k = (k + 1) & j->txo_mask;
            t[k] = old[i];
        }
        free(old);
    }
    size_t k = (size_t)(pid + 1) * 0x9e3779b97f4a7c15ULL & j->txo_mask;
    while (j->txo[k].pid1 && j->txo[k].pid1 != pid + 1)
        k = (k + 1) & j->txo_mask;
    if (!j->txo[k].pid1) {
        j->txo[k].pid1 = pid + 1;
        j->txo_n++;
    }
    return &j->txo[k];
}

/* A transactional data batch of the producer at p was kept (or not). */
static int txn_data_seen(seg_clean_job *j, const uint8_t *p, bool kept)
{
    if (!kept)
        return 0;
    struct txo *e = txo_get(j, seg_be64(p + KP_BATCH_OFF_ProducerId));
    if (!e)
        return SEG_E_IO;
    e->kept = true;
    return 0;
}

/* The marker at p: 1 if its transaction left nothing in the output (X3),
 * which also ends that transaction; *abort says its type. */
static int marker_empty(seg_clean_job *j, const uint8_t *p, size_t sz,
                        kp_rec_iter *it, bool *abort)
{
    kp_record rec;
    *abort = false;
    if (kp_rec_iter_start(it, p, sz) != 0 || kp_rec_iter_next(it, &rec) != 1 ||
        rec.Key.len < 4)
        return 0;                         /* not a marker we know: kept */
    const uint8_t *k = (const uint8_t *)rec.Key.p;
    int type = (k[2] << 8) | k[3];
    if (type != 0 && type != 1)
        return 0;
    *abort = type == 0;
    struct txo *e = txo_get(j, seg_be64(p + KP_BATCH_OFF_ProducerId));
    if (!e)
        return SEG_E_IO;
    bool empty = !e->kept;
    e->kept = false;
    return empty;
}

static int note_gone(seg_clean_job *j, int64_t offset)
{
    if (j->ngone == j->gone_cap) {
        int cap = j->gone_cap ? j->gone_cap * 2 : 16;
        int64_t *v = realloc(j->gone, (size_t)cap * sizeof *v);
        if (!v)
            return SEG_E_IO;
        j->gone = v;
        j->gone_cap = cap;
    }
    j->gone[j->ngone++] = offset;
    return 0;
}

/* X3, X4 for the control batch at p: appended as is, stamped, or dropped. */
static int control_batch(seg_clean_job *j, seg_segment *s, const uint8_t *p,
                         size_t sz, uint16_t attrs, kp_rec_iter *it, kp_buf *out)
{
    bool abort;
    int empty = (attrs & KP_ATTR_TRANSACTIONAL) ? marker_empty(j, p, sz, it, &abort) : 0;
    if (empty < 0)
        return empty;
    if (!empty || marker_last(j, p))                /* X5 */
        return append_batch(j, s, p, sz);
    if (abort && note_gone(j, seg_be64(p)) != 0)
        return SEG_E_IO;
    int64_t horizon = (attrs & KP_ATTR_DELETE_HORIZON)
                          ? (int64_t)seg_be64(p + KP_BATCH_OFF_BaseTimestamp) : -1;
    if (horizon >= 0 && horizon <= j->pol.now_ms) {
        if ((int64_t)seg_be64(p) < j->pol.markers_below) {
            j->st.markers_removed++;
            return 0;                               /* past its horizon */
        }
        if (j->st.markers_held < 0)                 /* due once the snapshot passes it */
            j->st.markers_held = seg_be64(p);
        return append_batch(j, s, p, sz);
    }
    if (horizon < 0)
        horizon = new_horizon(j);
    if (horizon > j->st.delete_horizon_ms)
        j->st.delete_horizon_ms = horizon;          /* T3 */
    if (attrs & KP_ATTR_DELETE_HORIZON)
        return append_batch(j, s, p, sz);
    int32_t count = seg_be32(p + KP_BATCH_OFF_RecordsCount);
    uint8_t keep[16];
    if (count <= 0 || count > (int32_t)sizeof keep)
        return append_batch(j, s, p, sz);           /* not a marker's shape */
    memset(keep, 1, sizeof keep);
    kp_buf_reset(out);
    int rc = rebuild(p, sz, keep, horizon, it, out);
    return rc ? rc : append_batch(j, s, out->data, out->len);
}

static int write_group(seg_clean_job *j, clean_group *g, const omap *m,
                       const char *staging, const atomic_bool *cancel)
{
    seg_segment *s;
    if (seg_segment_create(staging, j->in[g->first].base, &j->cfg, 0, &s))
        return SEG_E_IO;
    g->s = s;
    j->wb_queued = j->wb_waited = 0;
    kp_rec_iter it;
    kp_rec_iter_init0(&it);
    kp_buf out;
    kp_buf_init(&out);
    rdr r = { 0 };
    uint8_t *keep = NULL;
    size_t keep_cap = 0;
    int rc = 0;
    for (int i = g->first; i < g->first + g->count && rc == 0; i++) {
        clean_in *in = &j->in[i];
        r.fd = in->f->fd;
        r.size = in->size;
        r.pos = r.len = r.at = 0;
        j->st.bytes_in += in->size;
        const uint8_t *p;
        size_t sz;
        int more;
        while ((more = rdr_next(&r, &p, &sz)) == 1) {
            if (cancelled(cancel)) { rc = SEG_E_STATE; break; }
            throttle(j, sz);
            int64_t base = seg_be64(p);
            int32_t count = seg_be32(p + KP_BATCH_OFF_RecordsCount);
            if (base + seg_be32(p + KP_BATCH_OFF_LastOffsetDelta) < j->log_start) {
                j->st.records_in += count > 0 ? count : 0;
                continue;                           /* below log start */
            }
            uint16_t attrs = (uint16_t)((p[KP_BATCH_OFF_Attributes] << 8) |
                                       p[KP_BATCH_OFF_Attributes + 1]);
            if (attrs & KP_ATTR_CONTROL) {
                if ((rc = control_batch(j, s, p, sz, attrs, &it, &out)))
                    break;
                continue;
            }
            bool last = producer_last(j, p);        /* X5 */
            if (count <= 0) {
                /* X5: an emptied batch stays while it is its producer's
                 * newest, then goes (Kafka's DELETE_EMPTY), and with it
                 * what it held (X3, X4) */
                if (seg_be64(p + KP_BATCH_OFF_ProducerId) >= 0 && !last)
                    continue;
                if ((attrs & KP_ATTR_TRANSACTIONAL) &&
                    (rc = txn_data_seen(j, p, true)))
                    break;
                if ((rc = append_batch(j, s, p, sz)))
                    break;
                continue;
            }
            if (aborted_batch(j, p, attrs)) {       /* X2 */
                j->st.records_in += count;
                if (last && ((rc = txn_data_seen(j, p, true)) ||
                             (rc = append_empty(j, s, p))))
                    break;
                continue;
            }
            if ((size_t)count > keep_cap) {
                uint8_t *nk = realloc(keep, (size_t)count);
                if (!nk) { rc = SEG_E_IO; break; }
                keep = nk;
                keep_cap = (size_t)count;
            }
            int64_t horizon = (attrs & KP_ATTR_DELETE_HORIZON)
                                  ? (int64_t)seg_be64(p + KP_BATCH_OFF_BaseTimestamp) : -1;
            if (kp_rec_iter_start(&it, p, sz) != 0) { rc = SEG_E_IO; break; }
            kp_record rec;
            int k, n = 0, kept = 0, tombs = 0;
            while (n < count && (k = kp_rec_iter_next(&it, &rec)) == 1) {
                int why = keep_record(j, m, &rec, horizon);
                keep[n] = why == KEEP;
                j->st.tombstones_removed += why == DROP_TOMBSTONE;
                tombs += keep[n] && rec.Value.len < 0 && rec.Key.len >= 0 &&
                         rec.Offset < j->map_end;
                kept += keep[n++];
            }
            if (n != count) { rc = SEG_E_IO; break; }
            j->st.records_in += count;
            j->st.records_out += kept;
            if ((attrs & KP_ATTR_TRANSACTIONAL) &&
                (rc = txn_data_seen(j, p, kept > 0 || last)))   /* X3, X5 */
                break;
            if (kept == 0) {
                if (last && (rc = append_empty(j, s, p)))
                    break;
                continue;
            }
            bool stamp = tombs > 0 && horizon < 0;              /* T1 */
            if (stamp)
                horizon = new_horizon(j);
            if (tombs > 0 && horizon > j->st.delete_horizon_ms)
                j->st.delete_horizon_ms = horizon;
            if (kept == count && !stamp) {
                rc = append_batch(j, s, p, sz);     /* untouched: as is */
                continue;
            }
            kp_buf_reset(&out);
            if ((rc = rebuild(p, sz, keep, horizon, &it, &out)) == 0)
                rc = append_batch(j, s, out.data, out.len);
        }
        if (more < 0 && rc == 0)
            rc = SEG_E_IO;
        posix_fadvise(r.fd, 0, (off_t)in->size, POSIX_FADV_DONTNEED);  /* N2 */
    }
    kp_rec_iter_free(&it);
    kp_buf_free(&out);
    free(r.buf);
    free(keep);
    if (rc)
        return rc;
    /* Time retention must see the group as old as its inputs were, even
     * when the records carrying the newest timestamps went (Kafka keeps
     * the largest last-modified time the same way). */
    struct stat stt, newest = { 0 };
    for (int i = g->first; i < g->first + g->count; i++) {
        if (j->in[i].max_ts > s->max_ts)
            s->max_ts = j->in[i].max_ts;
        if (fstat(j->in[i].f->fd, &stt) == 0 &&
            (stt.st_mtim.tv_sec > newest.st_mtim.tv_sec ||
             (stt.st_mtim.tv_sec == newest.st_mtim.tv_sec &&
              stt.st_mtim.tv_nsec > newest.st_mtim.tv_nsec)))
            newest = stt;
    }
    struct timespec times[2] = { newest.st_atim, newest.st_mtim };
    if (newest.st_mtim.tv_sec)
        futimens(s->log->fd, times);
    /* Durable before it can be swapped in (C1). */
    if (seg_idx_trim(&s->idx) || seg_idx_trim(&s->tidx) ||
        fdatasync(s->log->fd) < 0 || fdatasync(s->idx.file->fd) < 0 ||
        fdatasync(s->tidx.file->fd) < 0)
        return SEG_E_IO;
    return 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* C1-C4 for one written group.  Returns 0, SEG_E_IO, or 1 (simulated
 * crash: stop here, touch nothing more). */
static int commit_group(seg_clean_job *j, clean_group *g, const char *staging)
{
    char from[4200], to[4200];
    int64_t b = j->in[g->first].base;
    if (j->crash_step == 1)
        return 1;                                   /* staged only */
    seg_path(from, sizeof from, staging, b, ".log");
    snprintf(to, sizeof to, "%s/%020" PRId64 ".%020" PRId64 ".swap",
             j->dir, b, g->end);
    if (rename(from, to) < 0 || fsync_dir(j->dir) < 0)
        return SEG_E_IO;                            /* C1 */
    g->committed = true;
    if (j->crash_step == 2)
        return 1;
    for (int i = g->first; i < g->first + g->count; i++)
        seg_segment_rename_deleted(j->dir, j->in[i].base);   /* C2 */
    if (j->crash_step == 3)
        return 1;
    static const char *const ext[] = { ".index", ".timeindex" };
    for (int i = 0; i < 2; i++) {                   /* C3 */
        seg_path(from, sizeof from, staging, b, ext[i]);
        seg_path(to, sizeof to, j->dir, b, ext[i]);
        rename(from, to);       /* failure: rebuilt from the .log at open */
    }
    if (j->crash_step == 4)
        return 1;
    snprintf(from, sizeof from, "%s/%020" PRId64 ".%020" PRId64 ".swap",
             j->dir, b, g->end);
    seg_path(to, sizeof to, j->dir, b, ".log");
    if (rename(from, to) < 0)
        return SEG_E_IO;                            /* C4 */
    fsync_dir(j->dir);
    if (j->crash_step == 5)
        return 1;
    return 0;
}

/* Groups inputs [0, ncl) so each new segment stays within segment.bytes
 * (by input size: output is never larger) and INT32 relative offsets. */
static int plan_groups(seg_clean_job *j, int ncl)
{
    j->g = calloc((size_t)ncl, sizeof *j->g);
    if (!j->g)
        return SEG_E_IO;
    for (int i = 0; i < ncl;) {
        clean_group *g = &j->g[j->ng++];
        g->first = i;
        uint64_t size = 0;
        do {
            size += j->in[i].size;
            i++;
        } while (i < ncl && size + j->in[i].size <= j->cfg.segment_bytes &&
                 j->in[i].next - j->in[g->first].base <= INT32_MAX);
        g->count = i - g->first;
        g->end = i < j->nin ? j->in[i].base : j->end_base;
    }
    return 0;
}

int seg_clean_run(seg_clean_job *j, const atomic_bool *cancel)
{
    j->t0_us = mono_us();
    j->st.delete_horizon_ms = -1;
    j->st.markers_held = -1;
    uint64_t dirty = 0;
    for (int i = 0; i < j->nin; i++)
        if (j->in[i].next > j->dirty_from)
            dirty += j->in[i].size;
    omap m;
    int rc = omap_init(&m, j->pol.dedupe_buffer_bytes, dirty);
    if (rc)
        return j->rc = rc;
    if ((rc = build_map(j, &m, cancel)))
        goto out;
    j->st.clean_from = j->dirty_from;
    j->st.clean_to = j->map_end;
    if (j->st.partial && j->map_end <= j->dirty_from)
        goto out;                   /* not even one batch fits the buffer */
    /* (Nothing dirty and not partial: planned for T3, a rewrite with an
     * empty map that only drops tombstones past their horizon.) */
    int ncl = 0;
    while (ncl < j->nin && j->in[ncl].base < j->map_end)
        ncl++;
    if ((rc = plan_groups(j, ncl)))
        goto out;
    char staging[4200];
    snprintf(staging, sizeof staging, "%s/cleaning", j->dir);
    seg_remove_dir(staging);
    if (mkdir(staging, 0755) < 0) {
        rc = SEG_E_IO;
        goto out;
    }
    for (int i = 0; i < j->ng && rc == 0; i++) {
        if ((rc = write_group(j, &j->g[i], &m, staging, cancel)))
            break;
        fsync_dir(staging);
        int c = commit_group(j, &j->g[i], staging);
        if (c == 1) {
            j->crashed = true;
            rc = SEG_E_IO;
        } else {
            rc = c;
        }
    }
    if (!j->crashed)
        seg_remove_dir(staging);
    if (rc == 0 && !j->crashed && j->ng > 0)
        save_checkpoint(j->dir, j->map_end > j->dirty_from ? j->map_end : j->dirty_from,
                        j->st.delete_horizon_ms);               /* K1 */
out:
    free(m.t);
    j->st.elapsed_us = mono_us() - j->t0_us;
    return j->rc = rc;
}

/* ---- finish (owner) ----------------------------------------------------------- */
static void install_group(seg_log *log, seg_clean_job *j, clean_group *g)
{
    int k = 0;
    while (k < log->n && log->segs[k]->base != j->in[g->first].base)
        k++;
    if (k + g->count > log->n - 1) {        /* C5 broken: cannot happen */
        seg_segment_free(g->s);
        g->s = NULL;
        return;
    }
    seg_segment *old[g->count];
    memcpy(old, log->segs + k, (size_t)g->count * sizeof *old);
    pthread_mutex_lock(&log->mu);
    log->segs[k] = g->s;
    memmove(log->segs + k + 1, log->segs + k + g->count,
            (size_t)(log->n - k - g->count) * sizeof *log->segs);
    log->n -= g->count - 1;
    log->changes++;                              /* log.c L5 */
    pthread_mutex_unlock(&log->mu);
    log->size += g->s->size;
    seg_segment_seal(g->s, log->dir);       /* staged elsewhere (index.c, I5) */
    for (int i = 0; i < g->count; i++) {
        log->size -= old[i]->size;
        seg_log_bury(log, old[i], true);    /* renamed in C2 */
    }
    /* C2 renamed the inputs' .txnindex away too; their entries are still
     * in memory and belong to the new segment (txnindex.c X1), less the
     * empty ABORTs' (X4).  A crash before this write loses them,
     * harmlessly: a marker in the group means all its transaction's
     * records were in the inputs, and X2 dropped them. */
    seg_txn_drop(log, j->gone, j->ngone, g->s->base, g->end);
    /* A failed write keeps the entries in memory and the index dirty
     * (txnindex.c X3): no producer snapshot passes them until
     * seg_txn_retry rewrote the file. */
    if (seg_txn_rewrite(log, k) != 0)
        j->st.txn_index_failed = true;      /* the caller logs it once */
    g->s = NULL;
}

int seg_clean_finish(seg_log *log, seg_clean_job *j, seg_clean_stats *st)
{
    int rc = j->rc;
    for (int i = 0; i < j->ng; i++) {
        clean_group *g = &j->g[i];
        if (g->s && g->committed && !j->crashed) {
            j->st.segments_in += g->count;
            j->st.segments_out++;
            install_group(log, j, g);
        }
        if (g->s)
            seg_segment_free(g->s);         /* staged only (or a "crash") */
    }
    if (rc == 0 && j->map_end > log->clean_end)
        log->clean_end = j->map_end;
    if (rc == 0 && !j->crashed && j->ng > 0) {
        log->delete_horizon = j->st.delete_horizon_ms;      /* T3 */
        log->markers_held = j->st.markers_held;             /* X3 */
        log->clean_saved = true;                            /* K1 */
    }
    log->max_ts = -1;
    for (int i = 0; i < log->n; i++)
        if (log->segs[i]->max_ts > log->max_ts)
            log->max_ts = log->segs[i]->max_ts;
    log->cleaning = false;
    if (st)
        *st = j->st;
    for (int i = 0; i < j->nin; i++)
        seg_file_unref(j->in[i].f);
    free(j->aborted);
    free(j->plast);
    free(j->txo);
    free(j->gone);
    free(j->in);
    free(j->g);
    free(j->dir);
    free(j);
    return rc;
}
