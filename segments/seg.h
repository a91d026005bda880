/*
 * segments/ — the partition log.
 *
 * A partition is a directory of segments named by their 20-digit base
 * offset: 00000000000000000000.log / .index / .timeindex, and a .txnindex
 * when transactions were aborted in it (txnindex.c).  The .log holds
 * Kafka RecordBatch v2 exactly as produced, only BaseOffset (outside the
 * CRC) rewritten.  Reads are answered as file ranges for sendfile: message
 * bytes never pass through this process on the way out.
 *
 * Threading: one owner thread (the event loop) calls everything except
 * seg_flush, which may run on a worker thread concurrently with the owner's
 * appends and reads (it holds an internal lock only briefly, never across
 * the fdatasync), and the readers by directory (seg_cursor_*,
 * seg_dir_stat), which any thread may call: they never touch a seg_log.
 * Nothing outside segments/ reads segment files.
 *
 * Uses protocol/ for batch headers, CRC-32C and (for exact time lookups in
 * compressed batches) record iteration.  Knows nothing of libevent or SQLite:
 * the caller persists log start / recovery point wherever it keeps facts.
 *
 * Return values: 0 (or a non-negative count) on success; a negative
 * SEG_E_* or a Kafka error code (protocol/kp_errors.h) where the caller
 * would send one to a client, as documented per function.
 */
#ifndef SLUICE_SEG_H
#define SLUICE_SEG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol/kp.h"

enum {
    SEG_E_IO      = -2001,   /* errno kept in seg_last_errno(); log is now
                                in its error state and refuses appends */
    SEG_E_RANGE   = -2002,   /* offset outside [log start, log end] */
    SEG_E_INVALID = -2003,   /* batches not parseable / not contiguous */
    SEG_E_STATE   = -2004,   /* log is in the error state */
    SEG_E_TOOBIG  = -2005,   /* a batch larger than segment.bytes */
    SEG_E_NOMEM   = -2006,   /* out of memory (readers only) */
};

typedef struct seg_config {
    uint64_t segment_bytes;        /* segment.bytes, default 1 GiB */
    int64_t  segment_ms;           /* segment.ms, default 7 days */
    int64_t  segment_jitter_ms;    /* segment.jitter.ms, default 0 */
    uint32_t index_interval_bytes; /* index.interval.bytes, default 4096 */
    uint32_t segment_index_bytes;  /* segment.index.bytes, default 10 MiB:
                                      a segment whose index is full rolls */
} seg_config;

void seg_config_default(seg_config *c);

typedef struct seg_log seg_log;

typedef struct seg_open_opts {
    const char *dir;               /* created if missing */
    seg_config cfg;
    int64_t log_start_offset;      /* as last saved (0 if unknown) */
    int64_t recovery_point;        /* everything below was flushed and need
                                      not be scanned; 0 scans everything */
} seg_open_opts;

/* Opens (creating if needed) and recovers a partition: segments holding
 * offsets >= recovery_point are scanned batch by batch; the first batch
 * with a bad length, magic or CRC-32C ends the log (file truncated there,
 * later segments removed); missing or damaged indexes are rebuilt.
 * Returns 0 or SEG_E_IO with errno saying why (EMFILE: the process is
 * out of descriptors).  *out is set on success only.  Fds held: three
 * for the active segment, one (its .log) per sealed segment. */
int  seg_open(const seg_open_opts *opts, seg_log **out);
/* Closes files; does not flush (call seg_flush first for durability). */
void seg_close(seg_log *log);
void seg_set_config(seg_log *log, const seg_config *cfg);

int64_t  seg_log_start(const seg_log *log);     /* first offset kept */
int64_t  seg_log_end(const seg_log *log);       /* next offset to assign */
int64_t  seg_recovery_point(const seg_log *log);/* all below is flushed */
uint64_t seg_size_bytes(const seg_log *log);    /* sum of .log sizes */
int      seg_segment_count(const seg_log *log);
int      seg_last_errno(const seg_log *log);
bool     seg_failed(const seg_log *log);        /* in the error state */
/* Tries to leave the error state (after an operator freed space, or a
 * transient EIO): cuts the active segment back to its last whole batch
 * and drops index entries past it, then checks the device with an
 * fdatasync.  0: healthy again, appends resume at seg_log_end(), which
 * did not move; SEG_E_IO: still failing (errno in seg_last_errno).  Never
 * touches what was appended successfully.  Owner thread only. */
int      seg_reset_error(seg_log *log);
/* Largest timestamp appended so far (-1 if empty). */
int64_t  seg_max_timestamp(const seg_log *log);

/* Appends one or more concatenated batches that the caller has already
 * validated (kp_batch_validate): assigns offsets by rewriting each
 * BaseOffset in place, writes them with one write(), updates the indexes,
 * rolls first if segment.bytes / segment.ms / a full index call for it
 * (segment.ms as Kafka counts it: from the first batch's MaxTimestamp to
 * the newest one appended, log.c L6; a log is never rolled at open).
 * *base_offset gets the first assigned offset.  Cost: O(batches), no
 * allocation, no fsync.  On a write error the partial write is cut off,
 * the log enters its error state and SEG_E_IO is returned. */
int seg_append(seg_log *log, uint8_t *batches, size_t len, int64_t now_ms,
               int64_t *base_offset);
/* A follower's (or a mirror's) append: offsets are already assigned, the
 * first BaseOffset is at or past seg_log_end() (past it: the leader
 * compacted the batches between, log.c L7), none goes backwards, each
 * batch passes kp_batch_check_stored; batches are stored as given.
 * SEG_E_INVALID otherwise, with nothing written. */
int seg_append_assigned(seg_log *log, const uint8_t *batches, size_t len,
                        int64_t now_ms);

/* A byte range of one segment file, ready for sendfile.  The range holds a
 * reference on the file: the fd stays open (even if retention deletes the
 * segment meanwhile) until seg_range_release. */
typedef struct seg_file seg_file;
typedef struct seg_range {
    int fd;
    off_t pos;
    size_t len;                  /* 0: nothing to read at this offset */
    seg_file *file;              /* reference; NULL when len == 0 */
    int64_t next;                /* where the following read starts: the
                                    offset after the range's last batch
                                    (the offset asked for when len == 0) */
    bool seg_end;                /* the range stops at the end of its
                                    segment, not at max_bytes or max_offset:
                                    a read from `next` goes on in the next
                                    segment */
} seg_range;

/* Finds the batch containing `offset` and returns the range from its start,
 * ending on a batch boundary, at most max_bytes long — but always at least
 * one whole batch when one exists, even if larger than max_bytes.  No
 * batch holding an offset >= max_offset is ever in the range (pass the
 * high watermark: consumers are not served above it); a batch reaching
 * max_offset makes the range end before it, and len 0 if it is the first.
 * A range never spans two segments (the caller asks again from `next`).
 * offset == log end or >= max_offset: len 0.  offset < log start or > log
 * end: KP_OFFSET_OUT_OF_RANGE.  Cost: one index lookup and a bounded scan
 * of batch headers (at most index.interval.bytes of headers); the same
 * again when max_offset lies inside the segment read. */
int  seg_read(seg_log *log, int64_t offset, int64_t max_offset,
              size_t max_bytes, seg_range *out);
/* Where the batch holding `offset` starts: its segment's base offset, its
 * byte position there and the segment file's inode (a cursor's start
 * hint, seg_cursor_opts), from the in-memory index, which also knows the
 * active segment's newest entries that its .index file may still lack.
 * Owner thread.  0, 1 when no batch holds it (out of the log, or in a
 * gap), or SEG_E_IO.  Cost: one index lookup and a bounded scan of batch
 * headers, as seg_read, and an fstat. */
int  seg_locate(seg_log *log, int64_t offset, int64_t *seg_base, int64_t *pos,
                uint64_t *file_ino);
/* Copies the range's bytes into dst (r->len bytes of room), for a reader
 * that must look at them rather than send them (the fetch down-conversion
 * of old versions).  Returns the bytes copied: fewer than r->len when the
 * file shrank meanwhile (retention truncated or deleted it; the range's
 * reference keeps it open) or a read failed part way: the caller serves what
 * it got, cut at its last whole batch.  Thread-safe. */
size_t seg_range_copy(const seg_range *r, void *dst);
/* Takes another reference (the thread that releases may differ). */
void seg_range_retain(seg_range *r);
void seg_range_release(seg_range *r);   /* thread-safe */

/* First offset whose record timestamp >= ts (exact, looking inside the
 * batch; under LogAppendTime a record's timestamp is its batch's
 * MaxTimestamp), or the log end offset if none.  *timestamp (may be NULL)
 * gets that record's timestamp, -1 if none.  0 or SEG_E_IO. */
int seg_offset_for_time(seg_log *log, int64_t ts, int64_t *offset,
                        int64_t *timestamp);

/* ---- read-only access by directory (cursor.c) ------------------------------
 * For threads other than the owner (the SQL worker) and for tools reading
 * a stopped broker's files: these open the partition directory's files
 * read-only by name and never touch a seg_log, so they need no lock and
 * race with nothing but the owner's appends and deletions, which the
 * cursor's bound and open fds make harmless (cursor.c says why). */

/* Records of a partition with offsets in [from, to), oldest first,
 * decompressed where needed; control batches are skipped. */
typedef struct seg_cursor seg_cursor;
typedef struct seg_cursor_opts {
    const char *dir;             /* the partition directory */
    int64_t from;                /* first offset wanted */
    int64_t to;                  /* never reads a batch at or past it: the
                                    high watermark the caller saw */
    int64_t min_ts;              /* skips batches whose MaxTimestamp is
                                    below it, and seeks by the .timeindex
                                    (INT64_MIN: no bound; records are not
                                    filtered, the caller re-checks them) */
    atomic_llong *bytes_read;    /* may be NULL: file bytes read are added */
    int64_t hint_base, hint_pos; /* hint_pos > 0: the batch holding `from`
                                    starts there in segment hint_base, file
                                    hint_ino (seg_locate, just before), so
                                    no lookup in that segment's .index,
                                    whose file may lag the log by
                                    SEG_IDX_TAIL bytes of entries (~2 MiB
                                    of batch headers to walk).  Ignored
                                    when the file opened is another (a
                                    compaction swapped it in meanwhile) */
    uint64_t hint_ino;
    bool control;                /* control batches' records too (markers:
                                    COMMIT, ABORT); else they are skipped */
} seg_cursor_opts;

/* 0, SEG_E_IO (no such directory) or SEG_E_NOMEM.  Lists the directory;
 * reads nothing yet. */
int  seg_cursor_open(const seg_cursor_opts *o, seg_cursor **out);
/* 1: the next record in *rec, whose pointers (key, value, headers) stay
 * valid until the next call or close; 0: no more; SEG_E_NOMEM.  A batch
 * that does not decode is skipped, as is a segment deleted meanwhile. */
int  seg_cursor_next(seg_cursor *c, kp_record *rec);
/* The header of the batch that holds the record seg_cursor_next gave
 * last (its ProducerId, ProducerEpoch, Attributes: transactional,
 * control).  Valid until the next call or close. */
const kp_batch *seg_cursor_batch(const seg_cursor *c);
void seg_cursor_close(seg_cursor *c);           /* NULL is ok */

/* What a partition directory holds, read from its files. */
typedef struct seg_dir_info {
    int      segments;
    uint64_t size_bytes;         /* sum of .log sizes */
    int64_t  first_base;         /* base of the oldest segment */
    int64_t  log_end;            /* offset after the last whole batch */
    int64_t  max_ts;             /* largest MaxTimestamp of the newest
                                    segment, -1 if none */
} seg_dir_info;
/* 0 (segments == 0 for an empty directory) or SEG_E_IO / SEG_E_NOMEM.
 * Cost: a listing, the last .index/.timeindex entries, and the batch
 * headers after the last index entry of the newest segment. */
int  seg_dir_stat(const char *dir, seg_dir_info *info);

/* Calls fn with the 61-byte header (KP_BATCH_HEADER_SIZE, as stored:
 * BaseOffset first) of every batch holding an offset >= from, oldest first,
 * reading headers only (segments/headers.c says how).  For state rebuilt
 * from the log tail at open.  A non-zero return from fn stops the walk and
 * is returned; else 0 or SEG_E_IO.  Owner thread. */
/* A control batch (commit/abort marker) of at most SEG_CONTROL_BATCH_MAX
 * bytes is handed whole: its record follows the header in memory. */
#define SEG_CONTROL_BATCH_MAX 256
typedef int (*seg_header_fn)(const uint8_t *header, void *arg);
int seg_scan_headers(seg_log *log, int64_t from, seg_header_fn fn, void *arg);

/* Starts a new segment now (no-op on an empty active segment). */
int seg_roll(seg_log *log, int64_t now_ms);
/* Removes every offset >= `offset` (follower truncation), and the
 * leader epochs starting there.  offset below log start empties the log at
 * `offset`. */
int seg_truncate(seg_log *log, int64_t offset);
/* Empties the log, which restarts at `offset`, below or above its end (a
 * copy behind its source's log start: Kafka's truncateFullyAndStartAt).
 * The removed segments wait in seg_take_dead.  0 or SEG_E_*. */
int seg_restart_at(seg_log *log, int64_t offset);
/* Moves the log start offset forward to `offset` (DeleteRecords,
 * retention), then deletes segments lying wholly below it; never the active
 * segment.  Returns the number of segments deleted, or SEG_E_*.
 * *bytes_freed (may be NULL) gets their size. */
int seg_advance_log_start(seg_log *log, int64_t offset, uint64_t *bytes_freed);
/* Deletes the oldest segments whose largest timestamp is < before_ms
 * (time retention) and, if max_bytes >= 0, the oldest ones while the log
 * is larger than max_bytes (size retention); never the active segment.
 * Returns the number deleted, or SEG_E_*. */
int seg_delete_old(seg_log *log, int64_t before_ms, int64_t max_bytes,
                   uint64_t *bytes_freed);
/* Deletes the directory and everything in it (topic deletion).  The log
 * is closed and freed. */
int seg_destroy(seg_log *log);

/* ---- deferred deletion (file.delete.delay.ms) ------------------------------
 * With deferred delete on, segments removed by retention, DeleteRecords,
 * truncation or a compaction swap leave the list at once and wait on a
 * "dead" list; the owner takes that list with seg_take_dead and hands it
 * to any thread, which renames the files *.deleted at once
 * (seg_dead_rename) and unlinks them when the delay is over.  So the owner
 * pays only the detach (truncation and compaction rename themselves,
 * since their base names may be reused at once).  Off (the default)
 * unlinks at once, as before.  A crash after the rename leaves *.deleted
 * files, which seg_open removes; a crash before it brings the segments
 * back below the saved log start, where the next check deletes them. */
typedef struct seg_dead seg_dead;
void      seg_set_deferred_delete(seg_log *log, bool on);
seg_dead *seg_take_dead(seg_log *log);          /* owner; NULL if none */
int       seg_dead_count(const seg_dead *d);
uint64_t  seg_dead_bytes(const seg_dead *d);
/* Any thread: renames files not yet *.deleted (idempotent). */
void      seg_dead_rename(seg_dead *d);
/* Any thread: renames if not done, unlinks the *.deleted files, frees the
 * list (NULL is ok).
 * Open ranges on them stay readable (seg_range holds the fd). */
void      seg_dead_unlink(seg_dead *d);

/* Renames the partition directory (topic deletion: Kafka's
 * "<topic>-<p>.<id>-delete"), so the name is free for a new topic at once
 * while the files wait for seg_destroy on a worker.  Owner thread. */
int  seg_rename_dir(seg_log *log, const char *newdir);
/* Removes a directory tree of segment files (leftover "-delete" dirs at
 * startup).  Any thread. */
int  seg_remove_dir(const char *dir);

/* ---- compaction (cleaner.c) -------------------------------------------------
 * Keeps the newest record per key in the closed segments, drops the
 * records of aborted transactions (the aborted-transaction index says
 * which: cleaner.c X1-X2) and, delete.retention.ms after the run that
 * found them empty, the markers of transactions with no record left
 * (with the index entries of aborted ones: cleaner.c X3-X4), drops a
 * tombstone once delete.retention.ms have passed since the compaction that
 * first kept it (its delete horizon, stored in its batch as Kafka does,
 * KIP-534; never from the record's own timestamp), keeps every surviving
 * record's offset (gaps allowed), recompresses with the batch's codec.
 *
 *   owner thread            worker thread              owner thread
 *   seg_clean_plan ──job──► seg_clean_run ──(event)──► seg_clean_finish
 *   (cheap: a few numbers   (reads closed segments by   (swaps segs[], old
 *    per segment)            their fds, writes new ones   ones to the dead
 *                            aside, swaps files by rename) list)
 *
 * Between plan and finish the log must not be closed; retention defers
 * deleting the segments under cleaning, seg_truncate below them fails
 * with SEG_E_STATE.  Crash safety: see cleaner.c. */
/* A live producer's newest data batch, by the offset it ends at (Kafka's
 * lastDataOffset): compaction keeps that batch, empty if need be, or its
 * newest marker when no data batch came since (cleaner.c X5). */
typedef struct seg_producer_last {
    int64_t pid;
    int64_t last_offset;             /* -1: no data batch since its newest
                                        marker, which has this epoch */
    int16_t epoch;
} seg_producer_last;

typedef struct seg_clean_policy {
    int64_t now_ms;
    int64_t min_compaction_lag_ms;   /* min.compaction.lag.ms */
    int64_t max_compaction_lag_ms;   /* max.compaction.lag.ms (<=0: none) */
    double  min_cleanable_dirty_ratio;
    int64_t delete_retention_ms;     /* delete.retention.ms */
    size_t  dedupe_buffer_bytes;     /* log.cleaner.dedupe.buffer.size share */
    double  io_max_bytes_per_sec;    /* log.cleaner.io.max.bytes.per.second;
                                        <= 0: unthrottled */
    bool    has_unstable;            /* a transaction is open from ... */
    int64_t unstable_from;           /* ... this offset (the producer state's
                                        first unstable offset): segments
                                        reaching it are not cleaned */
    int64_t markers_below;           /* markers at or past it are never
                                        dropped (the newest producer state
                                        snapshot: a replay from it may need
                                        them, cleaner.c X3) */
    const seg_producer_last *producers;  /* any order; seg_clean_plan */
    size_t  nproducers;                  /* copies them (cleaner.c X5) */
} seg_clean_policy;

typedef struct seg_clean_stats {
    int      segments_in, segments_out;
    uint64_t bytes_in, bytes_out;
    int64_t  records_in, records_out;
    int64_t  clean_from, clean_to;    /* offsets deduplicated this run */
    int64_t  elapsed_us;
    bool     partial;                 /* dedupe buffer full: a prefix only */
    int64_t  tombstones_removed;      /* past their delete horizon */
    int64_t  markers_removed;         /* transaction markers past theirs
                                         (cleaner.c X3) */
    int64_t  delete_horizon_ms;       /* latest horizon of a tombstone kept
                                         (-1: none kept) */
    int64_t  markers_held;            /* first marker past its horizon kept
                                         for the producer snapshot; -1 none */
    int64_t  batches_emptied;         /* kept as a header alone (cleaner.c X5) */
    bool     txn_index_failed;        /* a compacted segment's .txnindex not
                                         written: kept in memory, retried
                                         (txnindex.c X3) */
} seg_clean_stats;

typedef struct seg_clean_job seg_clean_job;
/* Owner thread.  1 with *job when the log is due (dirty ratio,
 * max.compaction.lag.ms, or a kept tombstone's delete horizon has passed:
 * so tombstones go even when nothing new is written), 0 when not, SEG_E_*
 * on failure. */
int  seg_clean_plan(seg_log *log, const seg_clean_policy *p, seg_clean_job **job);
/* Any one thread.  *cancel (may be NULL) is polled between batches.
 * 0, or SEG_E_IO / SEG_E_STATE (cancelled) with nothing swapped. */
int  seg_clean_run(seg_clean_job *job, const atomic_bool *cancel);
/* Owner thread, exactly once per planned job, whatever run returned:
 * installs what run swapped on disk, frees the job.  *st may be NULL. */
int  seg_clean_finish(seg_log *log, seg_clean_job *job, seg_clean_stats *st);
/* Tests: run stops as if the process died right after step k of the
 * commit (cleaner.c, C1-C4); 0 = never. */
void seg_clean_crash_after(seg_clean_job *job, int step);

/* ---- aborted transactions (txnindex.c) ------------------------------------
 * Kafka's .txnindex beside each segment: one entry per ABORT marker, in
 * marker order, also kept in memory for the whole log (txnindex.c X1-X3).
 * Owner thread. */
typedef struct seg_aborted_txn {
    int64_t producer_id;
    int64_t first_offset;        /* the transaction's first record */
    int64_t last_offset;         /* its ABORT marker */
    int64_t last_stable_offset;  /* the partition's LSO once it completed */
} seg_aborted_txn;
/* Adds the entry of an ABORT marker already in the log, past every entry
 * recorded.  0; SEG_E_RANGE (marker outside the log or not past the last
 * entry: nothing added); SEG_E_NOMEM; SEG_E_IO (the file write failed:
 * the entry is kept in memory, the index is dirty until seg_txn_retry
 * rewrites it, and seg_txn_durable says false meanwhile, txnindex.c X3). */
int  seg_txn_add(seg_log *log, const seg_aborted_txn *e);
/* Forgets the entries whose marker is at or past offset (files cut too):
 * before the producer state replays the log from there. */
void seg_txn_forget_from(seg_log *log, int64_t offset);
/* Kafka's collectAbortedTxns: the entries whose marker is at or past
 * `from` and whose first offset is below `to`, oldest marker first; up to
 * cap copied into out, the count returned (may exceed cap).  Cost: a
 * binary search, then the entries up to the first one whose LSO reached
 * `to`; no I/O. */
int  seg_txn_collect(const seg_log *log, int64_t from, int64_t to,
                     seg_aborted_txn *out, int cap);
int  seg_txn_count(const seg_log *log);
/* txnindex.c X3: true when every entry is on disk and fdatasynced (by
 * seg_flush, off the loop): only then may a producer state snapshot
 * pass the entries' markers.  seg_txn_retry rewrites the files whose
 * write failed (no fsync; 0 when none is left failing).  Both cheap when
 * nothing is pending. */
bool seg_txn_durable(seg_log *log);
int  seg_txn_retry(seg_log *log);
/* A .txnindex unreadable at open: the producer state must be replayed
 * from at or below this offset (-1: none); seg_txn_rebuilt clears it
 * once the replay re-added the entries. */
int64_t seg_txn_rebuild_from(const seg_log *log);
void seg_txn_rebuilt(seg_log *log);

/* ---- leader epochs (epochs.c) ----------------------------------------------
 * Which leader epoch wrote the log from which offset (Kafka's
 * leader-epoch-checkpoint).  Appends record each batch's
 * PartitionLeaderEpoch; truncation and log-start moves trim the history.
 * Owner thread, except seg_epoch_write_checkpoint. */
typedef struct seg_epoch_entry {
    int32_t epoch;
    int64_t start_offset;
} seg_epoch_entry;
/* The newest epoch of the history, -1 when it is empty. */
int32_t seg_epoch_latest(const seg_log *log);
/* The epoch that wrote `offset` (Kafka's epochForOffset: the last entry
 * starting at or below it), -1 when none does. */
int32_t seg_epoch_for_offset(const seg_log *log, int64_t offset);
/* The start offset of the first entry whose epoch is above epoch; -1
 * when the history has none. */
int64_t seg_epoch_start_above(const seg_log *log, int32_t epoch);
/* Copies up to cap entries, oldest first; returns how many there are. */
int  seg_epoch_entries(const seg_log *log, seg_epoch_entry *out, int cap);
/* `epoch` writes the log from start_offset on (a new leader at its log
 * end; appends call it per batch).  Entries with an epoch >= epoch or a
 * start >= start_offset are replaced.  1: changed, 0: nothing new (or
 * epoch < 0), SEG_E_NOMEM. */
int  seg_epoch_assign(seg_log *log, int32_t epoch, int64_t start_offset);
/* Kafka's endOffsetFor: for the newest epoch, the log end; else the start
 * of the first epoch above `epoch`, with *found_epoch the largest known
 * epoch <= epoch (epoch itself when all known ones are larger).  Both -1
 * when epoch < 0, the history is empty, or epoch is newer than any. */
int  seg_epoch_end_offset(const seg_log *log, int32_t epoch, int32_t *found_epoch,
                          int64_t *end_offset);
/* Kafka's checkpoint text, for tests: the entries (<= cap), or
 * SEG_E_INVALID for anything but a whole, ordered file. */
int  seg_epoch_parse(const char *text, size_t len, seg_epoch_entry *out, int cap);
/* Writing the file off the owner thread: take (owner; NULL when nothing
 * changed since the last take, or no memory / no directory), then write
 * (any thread: tmp, fdatasync, rename, fsync dir; frees) or free. */
typedef struct seg_epoch_ckpt seg_epoch_ckpt;
seg_epoch_ckpt *seg_epoch_take_checkpoint(seg_log *log);
int  seg_epoch_write_checkpoint(seg_epoch_ckpt *c);
void seg_epoch_free_checkpoint(seg_epoch_ckpt *c);

/* fdatasync of everything appended so far; then the recovery point moves
 * to the log end seen at the start.  Safe on a worker thread (see top).
 * *flushed_to (may be NULL) gets the new recovery point.
 * The active segment's newest index entries may still be in memory only
 * (index.c): harmless, since open rebuilds that segment's indexes anyway. */
int seg_flush(seg_log *log, int64_t *flushed_to);

#endif
