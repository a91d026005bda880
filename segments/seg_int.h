/*
 * segments/seg_int.h — internals shared by the files of segments/.
 * Nothing here is part of the module's contract (that is seg.h).
 *
 * Ownership in one picture:
 *
 *   seg_log ── segs[0..n) ──► seg_segment ──► seg_file (.log fd, refcounted)
 *     │                          ├─ idx   (.index,     8-byte entries)
 *     │                          └─ tidx  (.timeindex, 12-byte entries)
 *     │                               each: a read-only mapping of the file,
 *     │                               plus a heap tail of the newest entries
 *     └─ mu: guards segs[]/n, log_end, recovery_point, trunc_gen — the
 *            only state seg_flush (worker thread) looks at.
 *
 * The owner thread reads its own state without the lock; it takes the lock
 * only to change what the flusher reads.  The flusher takes the lock only to
 * copy file references and to publish the new recovery point.
 */
#ifndef SLUICE_SEG_INT_H
#define SLUICE_SEG_INT_H

#include <endian.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "segments/seg.h"
#include "protocol/kp.h"

/* ---- refcounted file (segment.c) ---------------------------------------- */
struct seg_file {
    int fd;
    atomic_int refs;
};

seg_file *seg_file_new(int fd);             /* refs = 1 */
void      seg_file_ref(seg_file *f);
void      seg_file_unref(seg_file *f);      /* closes the fd at 0 */

/* ---- sparse indexes (index.c) ------------------------------------------ */
#define SEG_OIDX_ENTRY 8     /* INT32 relative offset, INT32 position */
#define SEG_TIDX_ENTRY 12    /* INT64 timestamp, INT32 relative offset */

#define SEG_IDX_TAIL  4096   /* bytes of entries held in memory before a
                                 spill: 512 offset or 341 time entries */

typedef struct seg_idx {
    seg_file *file;          /* NULL while sealed (index.c, I5) */
    char     *path;          /* set only while sealed: where to reopen */
    uint8_t  *map;           /* MAP_SHARED, PROT_READ; NULL while
                                map_len == 0 */
    size_t    map_len;       /* bytes mapped (>= file length used) */
    size_t    entry;         /* SEG_OIDX_ENTRY or SEG_TIDX_ENTRY */
    uint32_t  n;             /* valid entries */
    uint32_t  spilled;       /* entries [0, spilled) are in the file */
    uint32_t  cap;           /* entries the file currently has room for */
    uint8_t  *tail;          /* entries [spilled, n), SEG_IDX_TAIL bytes:
                                malloc'ed by the first add, freed by trim */
} seg_idx;

int  seg_idx_open(seg_idx *x, const char *path, size_t entry, bool create);
void seg_idx_close(seg_idx *x);
/* Makes room for `entries` (ftruncate + remap when the mapping is short). */
int  seg_idx_reserve(seg_idx *x, uint32_t entries);
int  seg_idx_clear(seg_idx *x);             /* no entries, file all zero */
/* Keeps entries [0, keep); what the file held past them reads as zero. */
int  seg_idx_drop(seg_idx *x, uint32_t keep);
/* Writes the tail's entries to the file (one pwrite).  0 or SEG_E_IO (the
 * entries stay in the tail). */
int  seg_idx_spill(seg_idx *x);
/* Spills, frees the tail, file length = n entries. */
int  seg_idx_trim(seg_idx *x);
/* Trims and closes the fd, keeping the mapping; path (the file's name
 * now) is where a later write reopens it (index.c, I5).  0, or SEG_E_*
 * with the index still open. */
int  seg_idx_seal(seg_idx *x, const char *path);
/* Offset index entry i (< n). */
void seg_oidx_get(const seg_idx *x, uint32_t i, int32_t *rel, int32_t *pos);
/* Adds an entry at n (the caller keeps index.c I1).  0 or SEG_E_IO. */
int  seg_oidx_add(seg_idx *x, int32_t rel, int32_t pos);
void seg_tidx_get(const seg_idx *x, uint32_t i, int64_t *ts, int32_t *rel);
int  seg_tidx_add(seg_idx *x, int64_t ts, int32_t rel);
/* Replaces the last entry (n > 0).  0 or SEG_E_IO. */
int  seg_tidx_set_last(seg_idx *x, int64_t ts, int32_t rel);
/* Last entry with rel <= target (-1: none). */
int64_t seg_oidx_floor_rel(const seg_idx *x, int32_t rel);
/* Last entry with pos <= target (-1: none). */
int64_t seg_oidx_floor_pos(const seg_idx *x, int32_t pos);
/* Last entry with ts < target (-1: none). */
int64_t seg_tidx_below(const seg_idx *x, int64_t ts);

/* ---- segment (segment.c) ------------------------------------------------ */
typedef struct seg_segment {
    int64_t   base;          /* base offset, the name of its files */
    int64_t   next;          /* offset after its last batch (base if empty) */
    uint64_t  size;          /* bytes of whole batches in .log */
    seg_file *log;           /* the log's reference */
    seg_idx   idx, tidx;
    int64_t   max_ts;        /* largest MaxTimestamp in it, -1 if none */
    int64_t   roll_ts;       /* the first batch's MaxTimestamp, -1 when
                                empty or it has none (log.c, L6) */
    int64_t   created_ms;    /* wall clock at its first append (at
                                creation or open until then): log.c L6's
                                fallback when roll_ts is -1 */
    int64_t   roll_jitter_ms;/* seg_roll_jitter, drawn once per segment */
    uint32_t  since_index;   /* bytes appended since the last index entry */
    /* Batch starts known without the index (read.c H1): [0] the last one
     * appended, [1] the last one a read found; valid when `set`. */
    struct seg_hint {
        bool     set;
        uint64_t pos;
        int64_t  base;
    } hint[2];
} seg_segment;

/* Base name of a segment's file: dir/00000000000000000042.<ext> */
void seg_path(char *out, size_t cap, const char *dir, int64_t base,
              const char *ext);
/* "<20 digits><ext>" → base, or -1 (log.c). */
int64_t seg_name_base(const char *name, const char *ext);
/* A new segment's share of segment.jitter.ms (segment.c). */
int64_t seg_roll_jitter(const seg_config *c);
int  seg_segment_create(const char *dir, int64_t base, const seg_config *c,
                        int64_t now_ms, seg_segment **out);
/* Frees memory and drops references; files stay. */
void seg_segment_free(seg_segment *s);
/* Renames the files to .deleted and unlinks them, then frees.  Open ranges
 * keep their fd (the inode lives until the last reference goes). */
void seg_segment_delete(const char *dir, seg_segment *s);
/* The two halves of seg_segment_delete: rename B.* to B.*.deleted (owner
 * thread), and unlink B.*.deleted (any thread, after file.delete.delay.ms). */
void seg_segment_rename_deleted(const char *dir, int64_t base);
void seg_segment_unlink_deleted(const char *dir, int64_t base);
/* Accounts one batch now stored at `pos` (append and rebuild share this
 * rule): adds the index entries it is owed, then folds its MaxTimestamp
 * into s->max_ts.  0, or SEG_E_IO if an index cannot grow. */
int  seg_segment_index_batch(seg_segment *s, const seg_config *c,
                             int32_t rel, uint64_t pos, uint32_t size,
                             int64_t max_ts);
/* Makes the segment the active one: indexes get room up to
 * segment.index.bytes.  0 or SEG_E_IO. */
int  seg_segment_activate(seg_segment *s, const seg_config *c);
/* A segment no longer written: both indexes sealed (index.c, I5) under
 * their names in dir.  Failing (no memory, or the trim failed) is
 * harmless: the indexes stay open.  Owner thread. */
void seg_segment_seal(seg_segment *s, const char *dir);
/* Cuts the segment's .log to `pos` and drops index entries at or beyond. */
int  seg_segment_cut(seg_segment *s, uint64_t pos);

/* Batch header helpers: big-endian loads without unaligned casts.  The
 * memcpy + be64toh form compiles to one load and a bswap; gcc left the
 * byte loop a loop (two of them per append). */
static inline int64_t seg_be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return (int64_t)be64toh(v);
}
static inline int32_t seg_be32(const uint8_t *p)
{
    return (int32_t)(((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
                     ((uint32_t)p[2] << 8) | (uint32_t)p[3]);
}
/* Bytes read to learn a batch's base, size, LastOffsetDelta and
 * MaxTimestamp: the header up to ProducerId (offsets: protocol/kp.h). */
#define SEG_HDR_PEEK  KP_BATCH_OFF_ProducerId

/* pread/pwrite that loop over EINTR and short transfers.  Return bytes done
 * (< n only at EOF for reads) or -1 with errno. */
ssize_t seg_pread_full(int fd, void *buf, size_t n, off_t pos);
ssize_t seg_pwrite_full(int fd, const void *buf, size_t n, off_t pos);

/* ---- recovery / index rebuild (recover.c) ------------------------------ */
typedef struct seg_scan_result {
    uint64_t valid_bytes;    /* where the first bad batch starts */
    int64_t  next;           /* offset after the last good batch */
    bool     clean;          /* the whole file was good */
} seg_scan_result;

/* Scans s's .log from position 0, rebuilding both indexes and s->max_ts;
 * with verify, checks every batch's CRC (kp_batch_check_stored), without
 * it only headers.  Batches must start at >= min_base and have offsets
 * never going backwards.  Does not truncate.  0 or SEG_E_IO. */
int seg_scan(seg_segment *s, const seg_config *c, bool verify,
             int64_t min_base, seg_scan_result *r);
/* Loads s's indexes as found on disk and checks them (increasing entries,
 * inside the log); then finds s->next and s->max_ts from the last entry
 * with a bounded header scan.  Returns 0, or 1 when the indexes or the
 * tail are not trustworthy (caller rebuilds / rescans). */
int seg_index_check(seg_segment *s);
/* Bounded header walk from the last index entry to the end of the .log:
 * sets next, max_ts, since_index.  0, 1 (a header is bad, or an index
 * entry the rule owed is missing) or SEG_E_IO. */
int seg_segment_tail(seg_segment *s, const seg_config *c);

/* ---- the log (log.c) ---------------------------------------------------- */
struct seg_log {
    char           *dir;
    seg_config      cfg;
    seg_segment   **segs;    /* sorted by base; segs[n-1] is active */
    int             n, cap;
    int64_t         log_start;
    int64_t         log_end;         /* mu */
    int64_t         recovery_point;  /* mu */
    uint64_t        trunc_gen;       /* mu: bumped by truncation */
    uint64_t        changes;         /* mu: bumped by every change a flush
                                        makes durable (log.c, L5) */
    uint64_t        synced_changes;  /* mu: changes as of the last flush */
    uint64_t        size;            /* sum of .log sizes */
    int64_t         max_ts;
    atomic_bool     failed;
    /* Retention and compaction (retention.c, cleaner.c). */
    bool            defer_delete;    /* removed segments go to `dead` */
    struct seg_dead *dead;           /* detached, renamed *.deleted, files
                                        not yet unlinked (seg_take_dead) */
    bool            cleaning;        /* a seg_clean_job is out: segments
                                        below cleaning_end stay put */
    int64_t         cleaning_end;
    int64_t         clean_end;       /* first offset not yet compacted */
    int64_t         delete_horizon;  /* latest delete horizon of a tombstone
                                        kept by the last compaction (-1:
                                        none, or not known since open) */
    int64_t         markers_held;    /* first marker past its horizon kept
                                        for the producer snapshot (cleaner.c
                                        X3); -1: none, or not known */
    bool            clean_saved;     /* a cleaner-offset-checkpoint file
                                        may exist (cleaner.c, K1-K3) */
    atomic_int      last_errno;
    pthread_mutex_t mu;
    /* Leader-epoch history (epochs.c, E1-E5). */
    seg_epoch_entry *epochs;
    int             nepochs, epochs_cap;
    uint64_t        epochs_gen;      /* bumped by every change */
    uint64_t        epochs_saved_gen;/* gen of the last snapshot taken */
    /* The entries of that snapshot (or of the file loaded at open), so
     * that a history changed back to what is on disk is not rewritten;
     * nepochs_saved -1: unknown (no file). */
    seg_epoch_entry *epochs_saved;
    int             nepochs_saved;
    /* Aborted transactions of every segment (txnindex.c X1). */
    seg_aborted_txn *txns;
    int             ntxns, txns_cap;
    /* Durability of the .txnindex files (txnindex.c X3), -1: none.
     * txn_failed: smallest LastOffset whose file write failed (loop only;
     * seg_txn_retry rewrites from memory).  txn_unsynced / txn_writes:
     * smallest LastOffset written since the last seg_flush and a count of
     * writes, under mu (the flusher reads them).  txn_rebuild_from: base of
     * a segment whose file was unreadable at open. */
    int64_t         txn_failed, txn_unsynced, txn_rebuild_from;
    uint64_t        txn_writes;
};
/* seg_flush: the first segment whose .txnindex needs an fdatasync. */
int  seg_txn_sync_first(const seg_log *log, int first);

/* Aborted-transaction index (txnindex.c): segs[i]'s file loaded at open
 * (segments in order, after they are pushed); segs[i]'s entries dropped
 * as it leaves segs[] (before it does: seg_log_remove); segs[i]'s file
 * rewritten from memory (a compaction swapped in a new segment). */
int  seg_txn_load(seg_log *log, int i);
void seg_txn_segment_gone(seg_log *log, int i);
int  seg_txn_rewrite(seg_log *log, int i);
/* Forgets the entries whose LastOffset is one of last[0..n) (ascending)
 * and lies in [from, to); the caller rewrites the segment's file. */
void seg_txn_drop(seg_log *log, const int64_t *last, int n, int64_t from, int64_t to);

/* Leader epochs: the two truncations of epochs.c E3, and epochs.c E5 at open. */
void seg_epoch_truncate_end(seg_log *log, int64_t end);
void seg_epoch_truncate_start(seg_log *log, int64_t start);
void seg_epoch_clear(seg_log *log);
int  seg_epoch_load(seg_log *log, int64_t recovery_point);

/* Latches the error state (errno kept); returns SEG_E_IO. */
int  seg_log_fail(seg_log *log, int err);
/* Appends s as the new active segment (log.c L4).  0 or SEG_E_IO. */
int  seg_log_push(seg_log *log, seg_segment *s);
/* A detached segment on its way out (seg.h, seg_dead). */
struct seg_dead {
    struct seg_dead *next;
    char            *dir;
    seg_segment     *s;
    bool             renamed;        /* files already *.deleted */
};
/* Puts s (already out of segs[]) on log->dead; renamed: its files are
 * *.deleted already, else seg_dead_unlink renames them first. */
void seg_log_bury(seg_log *log, seg_segment *s, bool renamed);
/* Compaction checkpoint (cleaner.c): seg_open learns clean_end and
 * delete_horizon from it; a truncation below clean_end forgets it. */
void seg_clean_load_checkpoint(seg_log *log);
void seg_clean_truncated(seg_log *log, int64_t end);
/* Removes segs[i] and deletes its files (deferred: buries it); adds its
 * size to *freed.  rename_now: rename *.deleted here even when deferred
 * (truncation: a new segment may take the same base name at once). */
void seg_log_remove(seg_log *log, int i, uint64_t *freed, bool rename_now);
/* Position of the batch holding `offset` in s, or of the first batch after
 * it (compaction gap); *size gets that batch's size.  Returns 0 (pos may
 * equal s->size: nothing at or after offset in s) or SEG_E_IO. */
int  seg_find_batch(seg_segment *s, int64_t offset, uint64_t *pos,
                    uint32_t *size);

#endif
